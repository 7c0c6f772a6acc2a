/* zlib. deflateInit2/inflateInit2 are macros around the versioned *_ functions. */
#include <zlib.h>

static inline int CZlib_deflateInit2(z_streamp s, int level, int windowBits, int memLevel, int strategy) {
    return deflateInit2(s, level, Z_DEFLATED, windowBits, memLevel, strategy);
}
static inline int CZlib_inflateInit2(z_streamp s, int windowBits) { return inflateInit2(s, windowBits); }
