/* bench_scale.c -- what a hand-off costs as the queue grows (issue #15):
   figures, never a pass/fail on speed (tests/test_scale.c is the test).

       bench_scale mem|redis|mysql|zk

   `make bench-scale` runs it for mem, then for each backend under its
   server script (tests/servers/<b>.sh run), which exports where the server
   is. For Q = 1, 10, 100, 1000 waiters (SIMBA_BENCH_QUICK=1: 1, 10, 100) on
   a mutex, in two layouts:
     4 clients   the Q waiters spread over 4 clients (one process, one poll loop)
     1 per cl.   each waiter in a client of its own (Q + 1 clients)
   and a semaphore of capacity 100 with 1000 waiters (quick: 100) of mixed
   permits (1, 2, 5, 1, 3, ...) over 4 clients. Per figure (scale.h says how):
     p50/p99   release -> the next ACQUIRED, microseconds
     srv/ho    server work per hand-off: Redis commands (scripts' inner
               commands included), MySQL statements (+ rows read), ZooKeeper
               packets, mem operations
     us/call   Redis: server microseconds per EVALSHA
     notif/gr  notifications per grant, counted by the server: Redis
               PUBLISH calls, ZooKeeper watches fired ("-": not countable)
     woken/gr  other clients whose sockets became readable, per grant
     idle/ho   with one client per waiter (Q + 1 sessions): the server work
               and the woken clients of their background (keepalives,
               rechecks, pings, MySQL's bell waits timing out) in a
               hand-off's window, at the rate measured in the same run; it
               is not the hand-off's work, and srv/ho and woken/gr are net
               of it (bench/scale.h, top comment)
   then the ratios of issue #15 next to their targets, and the peer of the
   backend in the same run (bench/peers/peer_lock.py: redis-py Lock, MySQL
   GET_LOCK, kazoo Lock) with simba's ratio to it per Q. Each figure is the
   median of SIMBA_SCALE_TURNS turns (3), and each turn runs every Q.

   mem has no socket and no server process: its hand-offs run back to back
   (1000 per figure), and a last check separates what a cold client costs
   from what the queue costs (mem_cold_check).

   Caps keep a full run in minutes: 20 hand-offs per figure, a hand-off waits at most 20 s, a settle at most 1 s. A figure
   that cannot run says why (e.g. MySQL with 1000 clients of 2 connections
   each is over the test server's connection limit). SIMBA_PYTHON picks the
   interpreter of the peers (default /usr/bin/python3, where the Debian
   packages python3-kazoo, python3-redis and python3-pymysql live). */
#define _POSIX_C_SOURCE 200809L
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
#include "scale.h"

enum { NQ = 4, ROUNDS = 20, ROUNDS_MEM = 1000, MAX_TURNS = 5 };
static const int qs[NQ] = { 1, 10, 100, 1000 };
static const int sem_weights[] = { 1, 2, 5, 1, 3, 1, 2, 1 };

typedef struct row {
    const char *layout;
    int q;
    sc_result r;
    int ran;
} row;

static void print_head(void) {
    printf("  %-10s %5s %4s %9s %9s %9s %8s %8s %8s %9s %9s\n", "layout", "Q", "n", "p50 us", "p99 us", "srv/ho",
           "us/call", "notif/gr", "woken/gr", "rows/ho", "idle/ho");
}

static void print_row(const char *backend, const row *w) {
    char notif[16], call[16], rows[16], idle[32];
    if (!w->r.ok) {
        printf("  %-10s %5d   skipped: %s\n", w->layout, w->q, w->r.why);
        return;
    }
    if (w->r.notifs_per_grant < 0) snprintf(notif, sizeof notif, "-");
    else snprintf(notif, sizeof notif, "%.1f", w->r.notifs_per_grant);
    if (strcmp(backend, "redis") == 0) snprintf(call, sizeof call, "%.0f", w->r.script_usec_per_call);
    else snprintf(call, sizeof call, "-");
    if (strcmp(backend, "mysql") == 0) snprintf(rows, sizeof rows, "%.0f", w->r.rows_per_ho);
    else snprintf(rows, sizeof rows, "-");
    if (w->r.bg_cmds_per_ho > 0 || w->r.bg_woken_per_grant > 0)
        snprintf(idle, sizeof idle, "%.0f/%.1f", w->r.bg_cmds_per_ho, w->r.bg_woken_per_grant);
    else snprintf(idle, sizeof idle, "-");
    printf("  %-10s %5d %4d %9.1f %9.1f %9.1f %8s %8s %8.1f %9s %9s\n", w->layout, w->q, w->r.handoffs, w->r.p50,
           w->r.p99, w->r.cmds_per_ho, call, notif, w->r.woken_per_grant, rows, idle);
    fflush(stdout);
}

static void verdict(const char *what, double v, double target, int have) {
    if (!have) printf("    %-58s      n/a  (target <= %.1f)  not measured\n", what, target);
    else printf("    %-58s %8.2f  (target <= %.1f)  %s\n", what, v, target, v <= target ? "met" : "NOT met");
}

/* Q = 1 among the 1,001 clients of the one-client-per-waiter Q = 1000
   figure (999 of them idle). */
#define SC_FLOOR_LAYOUT "1 of 1001"

/* The one-client-per-waiter layout at Q = 1000 runs 1,001 clients in this
   one process, and Q = 1 runs 2: the same Q = 1 among 1,001 clients says
   what the client count costs apart from the queue. */
static void floor_ratios(const row *rows, int n, const sc_result *lo, const sc_result *hi) {
    const sc_result *fl = NULL;
    int i;
    for (i = 0; i < n; i++)
        if (strcmp(rows[i].layout, SC_FLOOR_LAYOUT) == 0 && rows[i].r.ok) fl = &rows[i].r;
    if (!fl || !lo || !hi) return;
    printf("    %-58s %8.2f  (the client count alone)\n", "hand-off p50, Q=1 among 1001 clients / Q=1 among 2", fl->p50 / lo->p50);
    printf("    %-58s %8.2f  (the queue, its clients gone cold)\n", "hand-off p50, Q=1000 / Q=1, both among 1001 clients", hi->p50 / fl->p50);
}

/* The Q = 1000 / Q = 1 ratios of one layout. */
static void ratios(const char *backend, const char *layout, const row *rows, int n) {
    const sc_result *lo = NULL, *hi = NULL;
    double worst_notif = -1, work_lo, work_hi;
    char what[120];
    int i;
    for (i = 0; i < n; i++) {
        if (strcmp(rows[i].layout, layout) != 0 || !rows[i].r.ok) continue;
        if (rows[i].q == 1) lo = &rows[i].r;
        if (rows[i].q == 1000) hi = &rows[i].r;
        if (rows[i].r.notifs_per_grant > worst_notif) worst_notif = rows[i].r.notifs_per_grant;
    }
    printf("  %s, mutex, %s:\n", backend, layout);
    if (hi && lo && lo->p50 >= 1e6)   /* a ratio to a stalled base says nothing */
        printf("    %-58s      n/a  (target <= 1.5)  NOT met: the Q=1 hand-off itself took %.1f s\n",
               "hand-off p50, Q=1000 / Q=1", lo->p50 / 1e6);
    else verdict("hand-off p50, Q=1000 / Q=1", hi && lo ? hi->p50 / lo->p50 : 0, 1.5, hi && lo);
    if (strcmp(backend, "redis") == 0) {
        work_lo = lo ? lo->script_usec_per_call : 0;
        work_hi = hi ? hi->script_usec_per_call : 0;
        snprintf(what, sizeof what, "server us per EVALSHA, Q=1000 / Q=1");
    } else {
        work_lo = lo ? lo->cmds_per_ho : 0;
        work_hi = hi ? hi->cmds_per_ho : 0;
        snprintf(what, sizeof what, "server %s per hand-off, Q=1000 / Q=1",
                 strcmp(backend, "mysql") == 0 ? "statements" : strcmp(backend, "zk") == 0 ? "packets" : "operations");
    }
    verdict(what, work_lo > 0 ? work_hi / work_lo : 0, 2, hi && lo && work_lo > 0);
    if (strcmp(backend, "redis") == 0)
        verdict("server commands per hand-off, Q=1000 / Q=1", hi && lo ? hi->cmds_per_ho / lo->cmds_per_ho : 0, 2,
                hi && lo && lo->cmds_per_ho > 0);
    if (strcmp(backend, "mysql") == 0)
        verdict("rows read per hand-off, Q=1000 / Q=1", hi && lo && lo->rows_per_ho > 0 ? hi->rows_per_ho / lo->rows_per_ho : 0,
                2, hi && lo && lo->rows_per_ho > 0);
    if (strcmp(layout, "1 per cl.") == 0) floor_ratios(rows, n, lo, hi);
    if (hi && hi->pass_us > 0)   /* the bench's own cost, which a hand-off may wait behind */
        printf("    %-58s %8.0f us (idle; push mode, one epoll set)\n", "the bench's loop: one pass over all 1001 clients",
               hi->pass_us);
    if (worst_notif >= 0) verdict("notifications per grant, worst Q", worst_notif, 2, 1);
    else if (strcmp(backend, "mem") == 0)
        printf("    %-58s      n/a  (mem: no sockets, no server count)\n", "notifications per grant");
    else {
        double worst = -1;
        for (i = 0; i < n; i++)
            if (strcmp(rows[i].layout, layout) == 0 && rows[i].r.ok && rows[i].r.woken_per_grant > worst)
                worst = rows[i].r.woken_per_grant;
        verdict("other clients woken per grant, worst Q (no server count)", worst, 2, worst >= 0);
    }
}

/* ---- the peer, run by python in the same run against the same server ---- */

typedef struct peer_row {
    int q, ok;
    int waiters;          /* the peer's own queue: q, or KAZOO_WAITERS for kazoo above it */
    double p50, p99;
    char why[160];
} peer_row;

/* kazoo's reference in issue #15 is its Lock with 100 waiters; with 1,000
   waiter threads its one session's connection closes
   (ConnectionClosedError) and the ZooKeeper server then expires 1,000
   nodes under simba's next turn. So at Q = 1000 simba is compared with
   kazoo at 100 waiters. */
enum { KAZOO_WAITERS = 100 };

/* The peer at one Q, in a process of its own (python, or build/peer_getlock). */
static peer_row run_peer(const char *kind, int q) {
    char cmd[512], line[512];
    const char *py = getenv("SIMBA_PYTHON");
    peer_row p;
    FILE *f;
    memset(&p, 0, sizeof p);
    p.q = q;
    if (strcmp(kind, "kazoo") == 0 && q > KAZOO_WAITERS) q = KAZOO_WAITERS;
    p.waiters = q;
    snprintf(p.why, sizeof p.why, "no answer from the peer");
    if (!py || !*py) py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    if (strcmp(kind, "getlock") == 0 && access("build/peer_getlock", X_OK) == 0)   /* the C peer: see its comment */
        snprintf(cmd, sizeof cmd, "build/peer_getlock %d %d 2>&1", q, ROUNDS);
    else
        snprintf(cmd, sizeof cmd, "%s bench/peers/peer_lock.py %s %d %d 2>&1", py, kind, q, ROUNDS);
    f = popen(cmd, "r");
    if (!f) return p;
    while (fgets(line, sizeof line, f)) {
        int lq;
        if (sscanf(line, "Q %d p50_us %lf p99_us %lf", &lq, &p.p50, &p.p99) == 3) {
            p.ok = 1;
            p.why[0] = 0;
        } else if (sscanf(line, "Q %d skip %159[^\n]", &lq, p.why) == 2) {
            p.ok = 0;
        } else {
            fprintf(stderr, "peer %s: %s", kind, line);
        }
    }
    pclose(f);
    return p;
}

static const char *peer_kind(const char *backend) {
    return strcmp(backend, "redis") == 0 ? "redis" : strcmp(backend, "mysql") == 0 ? "getlock"
         : strcmp(backend, "zk") == 0    ? "kazoo" : NULL;
}

/* The peer rows (one per Q, each the median of its turns) next to simba's. */
static void peer_compare(const char *backend, const row *rows, int nrows, const peer_row *peers, int np, int turns) {
    const char *kind = peer_kind(backend);
    const char *label = strcmp(backend, "redis") == 0 ? "redis-py Lock" : strcmp(backend, "mysql") == 0 ? "MySQL GET_LOCK"
                                                                                                         : "kazoo Lock";
    int i, j, l;
    const char *layouts[2] = { "4 clients", "1 per cl." };
    double ratio1[2] = { 0, 0 }, ratio1000[2] = { 0, 0 };
    int all_below[2] = { 1, 1 }, have[2] = { 0, 0 };
    if (!kind) return;
    printf("\n  peer: %s (%s), same server, same run; at each Q the peer ran in turn with simba's two\n"
           "  layouts, %d turn(s) each, and each p50 here is the median of its turns\n", label,
           strcmp(kind, "getlock") == 0 && access("build/peer_getlock", X_OK) == 0 ? "build/peer_getlock"
                                                                                   : "bench/peers/peer_lock.py", turns);
    printf("  %-10s %5s %9s %9s   %s\n", "", "Q", "p50 us", "p99 us", "simba p50 / peer p50 (4 clients, 1 per cl.)");
    for (i = 0; i < np; i++) {
        if (!peers[i].ok) {
            printf("  %-10s %5d   skipped: %s\n", label, peers[i].q, peers[i].why);
            continue;
        }
        printf("  %-10s %5d %9.0f %9.0f  ", "peer", peers[i].q, peers[i].p50, peers[i].p99);
        for (l = 0; l < 2; l++) {
            int found = 0;
            for (j = 0; j < nrows; j++) {
                if (strcmp(rows[j].layout, layouts[l]) || rows[j].q != peers[i].q || !rows[j].r.ok) continue;
                found = 1;
                printf(" %8.3g", rows[j].r.p50 / peers[i].p50);
                have[l]++;
                if (rows[j].r.p50 > peers[i].p50) all_below[l] = 0;
                if (peers[i].q == 1) ratio1[l] = rows[j].r.p50 / peers[i].p50;
                if (peers[i].q == 1000) ratio1000[l] = rows[j].r.p50 / peers[i].p50;
            }
            if (!found) printf(" %8s", "-");
        }
        if (peers[i].waiters != peers[i].q) printf("   (the peer with %d waiters)", peers[i].waiters);
        printf("\n");
    }
    for (l = 0; l < 2; l++) {
        char what[120];
        if (!have[l]) continue;
        if (strcmp(kind, "getlock") == 0) {
            snprintf(what, sizeof what, "%s: (simba/GET_LOCK at Q=1000) / (at Q=1)", layouts[l]);
            verdict(what, ratio1[l] > 0 ? ratio1000[l] / ratio1[l] : 0, 1.5, ratio1[l] > 0 && ratio1000[l] > 0);
        } else {
            printf("    %-58s %8s  (target: at or below at every Q)  %s\n", layouts[l],
                   all_below[l] ? "yes" : "no", all_below[l] ? "met" : "NOT met");
        }
    }
}

/* ---- mem: what a cold client costs, apart from the queue ----

   A mem hand-off is a microsecond or two of CPU, so where its clients'
   memory is matters: with one client per waiter at Q = 1000, the grantee
   was last touched 1,000 hand-offs ago and its state (client, handles,
   server session) has left the CPU's caches; at Q = 1 the same two
   clients take turns and stay in them. This check separates the two, in
   one loop, its three set-ups taking turns round by round so that a drift
   of the machine falls on all three:
     warm   Q = 1, two clients taking turns (the other two set-ups'
            2,001 clients idle in the same process and server)
     queue  Q = 1000, one client per waiter (1,001 clients)
     cold   Q = 1 on each of 500 resources of 2 clients each (1,000
            clients), the resources in turn: every hand-off's clients were
            last touched 500 hand-offs ago, and no queue is longer than 1
   Plain simba_tick on the two clients of a hand-off (mem has no sockets). */
enum { MC_PAIRS = 500, MC_ROUNDS = 20000 };

typedef struct mc_set {
    simba **c;
    simba_lock *lk;
    const char **name;     /* per client: its resource */
    int nc, head;          /* queue: the holder's index */
    int *holder;           /* cold: per resource, which of its two clients holds */
    double *lat;
} mc_set;

static int mc_tick(simba *c, simba_lock want) {
    simba_event ev[64];
    int k = simba_tick(c, NULL, 0, ev, 64), j, got = 0;
    for (j = 0; j < k; j++)
        if (ev[j].type == SIMBA_EVENT_ACQUIRED && ev[j].lock.id == want.id && ev[j].lock.gen == want.gen) got = 1;
    return got;
}

/* Queue on `name` and tick thrice: the request reaches the server before
   the next client's, so the queue is in the order of these calls. */
static simba_lock mc_acquire(simba *c, const char *name) {
    simba_lock_desc d;
    simba_lock l, none;
    int t;
    memset(&d, 0, sizeof d);
    memset(&none, 0, sizeof none);
    d.name = name;
    d.wait_ms = -1;
    d.capacity = 1;
    l = simba_acquire(c, &d);
    for (t = 0; t < 3; t++) mc_tick(c, none);
    return l;
}

/* One hand-off from client h to client w: release, tick both until w's
   ACQUIRED (at most 1 s), queue h again. Its time, or -1. */
static double mc_handoff(mc_set *m, int h, int w) {
    simba_lock none;
    double t0 = now_us(), t1;
    int got = 0;
    memset(&none, 0, sizeof none);
    simba_release(m->c[h], m->lk[h]);
    while (!got && now_us() - t0 < 1e6) {
        mc_tick(m->c[h], none);
        got = mc_tick(m->c[w], m->lk[w]);
    }
    t1 = now_us();
    m->lk[h] = mc_acquire(m->c[h], m->name[h]);
    return got ? t1 - t0 : -1;
}

/* nc clients on the resource `one`, or (one NULL) in pairs on the
   resources mc-0 .. mc-499; each queues once, in client order. */
static int mc_setup(mc_set *m, simba_mem_server *srv, int nc, const char *one, const char *tag) {
    static char names[MC_PAIRS][16];
    int i;
    m->nc = nc;
    m->c = (simba **)calloc((size_t)nc, sizeof *m->c);
    m->lk = (simba_lock *)calloc((size_t)nc, sizeof *m->lk);
    m->name = (const char **)calloc((size_t)nc, sizeof *m->name);
    m->holder = (int *)calloc(MC_PAIRS, sizeof *m->holder);
    m->lat = (double *)calloc(MC_ROUNDS, sizeof *m->lat);
    if (!m->c || !m->lk || !m->name || !m->holder || !m->lat) return 0;
    for (i = 0; i < MC_PAIRS; i++) snprintf(names[i], sizeof names[i], "mc-%d", i);
    for (i = 0; i < nc; i++) {
        simba_desc d;
        char id[48];
        memset(&d, 0, sizeof d);
        snprintf(id, sizeof id, "mc-%s-%d", tag, i);
        d.client_id = id;
        d.backend = simba_mem(srv, NULL);
        d.ttl_ms = 600000;      /* no keepalive, no re-check within the check */
        d.recheck_ms = 600000;
        if (!(m->c[i] = simba_create(&d, NULL))) return 0;
        m->name[i] = one ? one : names[(i / 2) % MC_PAIRS];
    }
    for (i = 0; i < nc; i++) m->lk[i] = mc_acquire(m->c[i], m->name[i]);
    return 1;
}

static void mc_free(mc_set *m) {
    int i;
    for (i = 0; m->c && i < m->nc; i++) if (m->c[i]) simba_destroy(m->c[i]);
    free(m->c); free(m->lk); free(m->name); free(m->holder); free(m->lat);
}

static void mem_cold_check(void) {
    simba_mem_server *srv = simba_mem_server_create(NULL);
    mc_set warm, queue, cold;
    int i, n = 0, ok = srv != NULL;
    memset(&warm, 0, sizeof warm);
    memset(&queue, 0, sizeof queue);
    memset(&cold, 0, sizeof cold);
    ok = ok && mc_setup(&warm, srv, 2, "mc-warm", "w") && mc_setup(&queue, srv, 1001, "mc-queue", "q") &&
         mc_setup(&cold, srv, 2 * MC_PAIRS, NULL, "c");
    for (i = 0; ok && i < MC_ROUNDS; i++) {
        int p = i % MC_PAIRS, qh = queue.head, ch = 2 * p + cold.holder[p];
        double a = mc_handoff(&warm, i % 2, (i + 1) % 2);
        double b = mc_handoff(&queue, qh, (qh + 1) % 1001);
        double c = mc_handoff(&cold, ch, ch ^ 1);
        queue.head = (qh + 1) % 1001;
        cold.holder[p] ^= 1;
        if (a < 0 || b < 0 || c < 0) { ok = 0; break; }
        warm.lat[n] = a; queue.lat[n] = b; cold.lat[n] = c;
        n++;
    }
    printf("\n  mem, what a cold client costs (one loop, the three in turn, %d hand-offs each):\n", n);
    if (!ok || n < 3) printf("    not run: a set-up or a hand-off failed\n");
    else {
        double pw = pct(warm.lat, n, 0.5), pq = pct(queue.lat, n, 0.5), pc = pct(cold.lat, n, 0.5);
        printf("    %-58s %8.2f us\n", "warm:  Q=1, two clients take turns", pw);
        printf("    %-58s %8.2f us\n", "queue: Q=1000, one client per waiter", pq);
        printf("    %-58s %8.2f us\n", "cold:  Q=1 on 500 resources in turn, 2 clients each", pc);
        printf("    %-58s %8.2f  (clients as cold as at Q=1000)\n", "hand-off p50, queue / warm", pq / pw);
        printf("    %-58s %8.2f  (the queue alone, cold against cold)\n", "hand-off p50, queue / cold", pq / pc);
    }
    mc_free(&warm);
    mc_free(&queue);
    mc_free(&cold);
    if (srv) simba_mem_server_destroy(srv);
}

/* The median by p50 of the n turns of one figure that ran (ok[i]), as an
   index; -1 if none ran. One rule for simba's figures and the peer's. */
static int median_turn(const double *p50, const int *ok, int n) {
    int idx[MAX_TURNS], m = 0, i, j, t;
    for (i = 0; i < n && i < MAX_TURNS; i++)
        if (ok[i]) idx[m++] = i;
    for (i = 1; i < m; i++)
        for (j = i; j > 0 && p50[idx[j]] < p50[idx[j - 1]]; j--) { t = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = t; }
    return m ? idx[(m - 1) / 2] : -1;
}

static sc_result median_result(const sc_result *r, int n) {
    double p50[MAX_TURNS];
    int ok[MAX_TURNS], i, k;
    for (i = 0; i < n; i++) { p50[i] = r[i].p50; ok[i] = r[i].ok; }
    k = median_turn(p50, ok, n);
    return r[k < 0 ? 0 : k];   /* none ran: the first, with its reason */
}

/* A row of the table: the median of a figure's turns, printed. */
static void add_row(const char *backend, row *rows, int *nrows, const char *layout, int q, const sc_result *turns,
                    int nt) {
    row *w = &rows[(*nrows)++];
    w->layout = layout;
    w->q = q;
    w->r = median_result(turns, nt);
    print_row(backend, w);
}

static peer_row median_peer(const peer_row *p, int n) {
    double p50[MAX_TURNS];
    int ok[MAX_TURNS], i, k;
    for (i = 0; i < n; i++) { p50[i] = p[i].p50; ok[i] = p[i].ok; }
    k = median_turn(p50, ok, n);
    return p[k < 0 ? 0 : k];
}

int main(int argc, char **argv) {
    sc_env e;
    char why[256];
    row rows[2 * NQ + 2];
    peer_row peers[NQ];
    int nrows = 0, npeers = 0, i, t, quick = env_int("SIMBA_BENCH_QUICK", 0), nq = quick ? 3 : NQ;
    int max_clients, stalled4 = 0, turns = env_int("SIMBA_SCALE_TURNS", 3);
    const char *backend = argc > 1 ? argv[1] : "";
    int mem = strcmp(backend, "mem") == 0;   /* a hand-off of microseconds: more of them, for a stable p50 */
    const char *only = getenv("SIMBA_SCALE_ONLY");   /* debugging: "4", "1", "s" or "c" (mem): one layout */
    const char *kind = peer_kind(backend);
    int only_q = env_int("SIMBA_SCALE_Q", 0);        /* debugging: one Q */
    signal(SIGPIPE, SIG_IGN);
    memset(rows, 0, sizeof rows);
    memset(peers, 0, sizeof peers);
    if (turns < 1) turns = 1;
    if (turns > MAX_TURNS) turns = MAX_TURNS;
    if (!sc_env_init(&e, backend, why, sizeof why)) {
        fprintf(stderr, "bench_scale: %s\n", why);
        return 2;
    }
    /* 2 connections per MySQL client against max-connections of the test server */
    max_clients = strcmp(backend, "mysql") == 0 ? env_int("SIMBA_SCALE_MYSQL_MAX_CLIENTS", 150) : 1001;
    printf("\nsimba on %s: mutex hand-off as the queue grows; semaphore C=100 (issue #15)\n", backend);
    /* A server's first thousands of requests run slower (ZooKeeper's JVM
       compiles its hot paths as it goes): both sides warm it up first, and
       nothing of this counts. */
    if (!mem) {
        sc_result warm = sc_figure(&e, "warm", 4, 10, 1, NULL, 0, ROUNDS, 0);
        printf("  warm-up: simba %s", warm.ok ? "done" : warm.why);
        if (kind) {
            peer_row p = run_peer(kind, 10);
            printf(", peer %s", p.ok ? "done" : p.why);
        }
        printf("\n");
    }
    print_head();
    /* Each turn runs every Q in turn, and at each Q the 4-client layout,
       the one-client-per-waiter layout and the peer: a drift of the shared
       machine (minutes long, 0.3-0.5 ms on a hand-off of 1-2 ms) then falls
       on Q = 1 and Q = 1000 alike, where with all turns of one Q together
       it fell on one Q and tilted the ratio. Each figure is the median of
       its `turns`. Q = 1000 too: with the push-mode loop its set-up takes
       seconds, and a single turn of 10 hand-offs there gave 1.4-2.6x from
       one run to the next (Redis, one client per waiter). */
    {
        static sc_result r4[NQ][MAX_TURNS], r1[NQ][MAX_TURNS], rf[NQ][MAX_TURNS];
        static peer_row pr[NQ][MAX_TURNS];
        int rounds = mem ? ROUNDS_MEM : ROUNDS;
        int run4 = !only || *only == '4', run1 = !only || *only == '1';
        char name4[32], name1[32], namef[32];
        for (t = 0; t < turns; t++) {
            for (i = 0; i < nq; i++) {
                int fit1 = qs[i] + 1 <= max_clients, floor1 = run1 && fit1 && qs[i] == 1000;
                if (only_q > 0 && qs[i] != only_q) continue;   /* debugging: one Q */
                fprintf(stderr, "  (turn %d of %d, Q=%d)\n", t + 1, turns, qs[i]);
                snprintf(name4, sizeof name4, "mx4-%d-%d", qs[i], t);
                snprintf(name1, sizeof name1, "mx1-%d-%d", qs[i], t);
                if (run4 && stalled4 && qs[i] >= stalled4)
                    snprintf(r4[i][t].why, sizeof r4[i][t].why, "not run: the hand-off stalled at Q=%d", stalled4);
                else if (run4) {
                    r4[i][t] = sc_figure(&e, name4, 4, qs[i], 1, NULL, 0, rounds, 0);
                    if (!r4[i][t].ok && !stalled4 && strstr(r4[i][t].why, "grants missing")) stalled4 = qs[i];
                }
                if (run1 && fit1) r1[i][t] = sc_figure(&e, name1, qs[i] + 1, qs[i], 1, NULL, 0, rounds, 1);
                /* the same 1,001 clients with one waiter: what the client
                   count alone costs (their background in this one
                   process), for the Q = 1000 figure to be read against */
                if (floor1) {
                    snprintf(namef, sizeof namef, "mxf-%d-%d", qs[i], t);
                    rf[i][t] = sc_figure(&e, namef, qs[i] + 1, 1, 1, NULL, 0, rounds, 1);
                }
                if (run1 && !fit1)
                    snprintf(r1[i][t].why, sizeof r1[i][t].why,
                             "%d clients x 2 connections is over the test server's max-connections "
                             "(SIMBA_SCALE_MYSQL_MAX_CLIENTS=%d)", qs[i] + 1, max_clients);
                if (kind && !only) pr[i][t] = run_peer(kind, qs[i]);
            }
        }
        for (i = 0; i < nq; i++) {
            int floor1 = run1 && qs[i] + 1 <= max_clients && qs[i] == 1000;
            if (only_q > 0 && qs[i] != only_q) continue;
            if (run4) add_row(backend, rows, &nrows, "4 clients", qs[i], r4[i], turns);
            if (run1) add_row(backend, rows, &nrows, "1 per cl.", qs[i], r1[i], turns);
            if (floor1) add_row(backend, rows, &nrows, SC_FLOOR_LAYOUT, 1, rf[i], turns);
            if (kind && !only) peers[npeers++] = median_peer(pr[i], turns);
        }
    }
    if (!only || *only == 's') {
        int q = quick ? 100 : 1000;
        sc_result sr = sc_figure(&e, "sem100", 4, q, 100, sem_weights,
                                 (int)(sizeof sem_weights / sizeof sem_weights[0]), ROUNDS, 0);
        add_row(backend, rows, &nrows, "sem C=100", q, &sr, 1);
    }
    printf("\n  issue #15 targets (ratios within this run):\n");
    ratios(backend, "4 clients", rows, nrows);
    ratios(backend, "1 per cl.", rows, nrows);
    if (nrows > 0 && strcmp(rows[nrows - 1].layout, "sem C=100") == 0) {
        const sc_result *s = &rows[nrows - 1].r;
        printf("  %s, semaphore C=100, %d waiters of mixed permits, 4 clients:\n", backend, rows[nrows - 1].q);
        if (strcmp(backend, "mem") == 0)
            printf("    %-58s      n/a  (mem: no sockets, no server count)\n", "notifications per grant");
        else if (s->ok && s->notifs_per_grant >= 0) verdict("notifications per grant", s->notifs_per_grant, 2, 1);
        else verdict("other clients woken per grant (no server count)", s->ok ? s->woken_per_grant : 0, 2, s->ok);
    }
    peer_compare(backend, rows, nrows, peers, npeers, turns);
    if (mem && (!only || *only == 'c') && !quick) mem_cold_check();
    sc_env_free(&e);
    return 0;
}
