/* SQLite 3. SQLITE_TRANSIENT is a cast macro ((sqlite3_destructor_type)-1) and does not import. */
#include <sqlite3.h>

static inline sqlite3_destructor_type CSQLite_transient(void) { return SQLITE_TRANSIENT; }
