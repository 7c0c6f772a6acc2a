/* libwebsockets 4.1 (Debian, OpenSSL backend). Shims exist only for what Swift cannot import. */
#include <libwebsockets.h>

/* LWS_PRE is a function-like macro: the headroom lws_write needs before the payload. */
static inline size_t CLibWebSockets_pre(void) { return LWS_PRE; }
/* CONTEXT_PORT_NO_LISTEN, spelled once so callers need not know it is a macro. */
static inline int CLibWebSockets_portNoListen(void) { return CONTEXT_PORT_NO_LISTEN; }

/* lws_container_of() is a macro: keep the sul FIRST and cast the sul pointer back to the box. */
typedef struct CLibWebSockets_sulBox {
    lws_sorted_usec_list_t sul;
    void *owner;
} CLibWebSockets_sulBox;
