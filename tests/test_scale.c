/* test_scale.c -- the acceptance test of issue #15 (cost that does not grow
   with the queue), one suite per backend in tests/run_all.sh's lanes; alone:
   `make test-scale`. It failed on every backend before #15 (the herd).

       test_scale mem|redis|mysql|zk [filter]

   (make test-scale runs it for each backend under its server script.)
   Counts, not times: what the server did per mutex hand-off, measured by
   bench/scale.h (Redis INFO commandstats, MySQL Questions and Handler_read_*,
   ZooKeeper mntr packets, mem operations), at Q = 10 and Q = 100 waiters, in the two
   layouts of the issue:
     t_spread_*      the waiters spread over 4 clients: the old herd re-polls
                     every request a woken client has on the resource
     t_per_client_*  one waiter per client: the old herd pushes every owner
                     change to many clients, each of which re-polls
   Each asserts
     - server work per hand-off at Q = 100 is within 2x of Q = 10 (on
       MySQL the rows read too), and
     - notifications per grant <= 2: Redis PUBLISH calls and ZooKeeper
       watches fired as the server counts them; MySQL and mem, where the
       server cannot tell, the other clients whose sockets woke up. */
#include "harness.h"
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#define SIMBA_REDIS_IMPLEMENTATION
#include "simba_redis.h"
#define SIMBA_MYSQL_IMPLEMENTATION
#include "simba_mysql.h"
#define SIMBA_ZK_IMPLEMENTATION
#include "simba_zk.h"
#define SIMBA_URL_IMPLEMENTATION
#include "simba_url.h"

#include <signal.h>
#include "../bench/scale.h"

enum { ROUNDS = 20, Q_LOW = 10, Q_HIGH = 100 };

static sc_env env;

static void report(const char *what, int q, const sc_result *r) {
    char notif[32] = "n/a", rows[48] = "";
    if (!r->ok) {
        printf("  %s Q=%d: %s\n", what, q, r->why);
        fflush(stdout);
        return;
    }
    if (r->notifs_per_grant >= 0) snprintf(notif, sizeof notif, "%.2f", r->notifs_per_grant);
    if (strcmp(env.backend, "mysql") == 0) snprintf(rows, sizeof rows, ", %.0f rows read", r->rows_per_ho);
    printf("  %s Q=%3d: %7.1f server ops%s per hand-off, notifications per grant %s (server), "
           "%.2f other clients woken per grant, p50 %.0f us\n",
           what, q, r->cmds_per_ho, rows, notif, r->woken_per_grant, r->p50);
    fflush(stdout);
}

/* notifications per grant: the server's count where it has one */
static double notifs(const sc_result *r) { return r->notifs_per_grant >= 0 ? r->notifs_per_grant : r->woken_per_grant; }

static void check_scaling(const char *layout, int per_client) {
    char name[32];
    sc_result lo, hi;
    snprintf(name, sizeof name, "%s-%d", layout, Q_LOW);
    lo = sc_figure(&env, name, per_client ? Q_LOW + 1 : 4, Q_LOW, 1, NULL, 0, ROUNDS, per_client);
    report(layout, Q_LOW, &lo);
    snprintf(name, sizeof name, "%s-%d", layout, Q_HIGH);
    hi = sc_figure(&env, name, per_client ? Q_HIGH + 1 : 4, Q_HIGH, 1, NULL, 0, ROUNDS, per_client);
    report(layout, Q_HIGH, &hi);
    CHECK(lo.ok);
    CHECK(hi.ok);
    printf("  %s: server work per hand-off Q=%d / Q=%d = %.2f (must be <= 2)\n", layout, Q_HIGH, Q_LOW,
           lo.cmds_per_ho > 0 ? hi.cmds_per_ho / lo.cmds_per_ho : 0);
    CHECK(hi.cmds_per_ho <= 2 * lo.cmds_per_ho);
    if (strcmp(env.backend, "mysql") == 0) {   /* the statements read a bounded prefix of the queue */
        printf("  %s: rows read per hand-off Q=%d / Q=%d = %.2f (must be <= 2)\n", layout, Q_HIGH, Q_LOW,
               lo.rows_per_ho > 0 ? hi.rows_per_ho / lo.rows_per_ho : 0);
        CHECK(hi.rows_per_ho <= 2 * lo.rows_per_ho);
    }
    CHECK(notifs(&lo) <= 2);
    CHECK(notifs(&hi) <= 2);
}

static void t_spread_work_and_notifications(void) { check_scaling("spread", 0); }
static void t_per_client_work_and_notifications(void) { check_scaling("per-client", 1); }

int main(int argc, char **argv) {
    char why[256];
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2 || !sc_env_init(&env, argv[1], why, sizeof why)) {
        fprintf(stderr, "test_scale: %s\n", argc < 2 ? "usage: test_scale mem|redis|mysql|zk [filter]" : why);
        return 2;
    }
    h_filter = argc > 2 ? argv[2] : NULL;
    printf("test_scale on %s (issue #15 acceptance)\n", argv[1]);
    RUN(t_spread_work_and_notifications);
    RUN(t_per_client_work_and_notifications);
    sc_env_free(&env);
    return harness_summary();
}
