/* link_a.c -- the translation unit that holds the implementation, for the
   two-translation-unit link test of tests/compile_matrix.sh. link_b.c only
   includes the headers and calls the API; linking both proves that the
   implementation is emitted exactly once and that the declarations match.
   The script defines SIMBA_LINK_<X> for each backend header that exists. */
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#ifdef SIMBA_LINK_REDIS
#define SIMBA_REDIS_IMPLEMENTATION
#include "simba_redis.h"
#endif
#ifdef SIMBA_LINK_MYSQL
#define SIMBA_MYSQL_IMPLEMENTATION
#include "simba_mysql.h"
#endif
#ifdef SIMBA_LINK_ZK
#define SIMBA_ZK_IMPLEMENTATION
#include "simba_zk.h"
#endif
#ifdef SIMBA_LINK_PG
#define SIMBA_PG_IMPLEMENTATION
#include "simba_pg.h"
#endif
#ifdef SIMBA_LINK_SQLITE
#define SIMBA_SQLITE_IMPLEMENTATION
#include "simba_sqlite.h"
#endif

#define SIMBA_URL_IMPLEMENTATION
#include "simba_url.h"

/* ISO C wants at least one declaration in a translation unit, even if the
   headers above were to expand to nothing. */
typedef int link_a_nonempty;
