/* bench_pg.c -- the PostgreSQL backend's figures, each as a ratio to a
   floor measured in the same run on the same server (make bench-pg, which
   starts a throw-away server with tests/servers/pg.sh):

     - acquire+release cycle vs one committed single-row INSERT + one
       committed DELETE (two commits, as the cycle's two operations);
     - hand-off (release -> the waiter's ACQUIRED) vs one commit that
       NOTIFYs + the delivery to an idle LISTENing connection, both after
       the same 20 ms idle (and that floor back to back, printed beside);
     - side by side, what a PostgreSQL user would pick instead: a session
       pg_advisory_lock/unlock cycle and its blocking hand-off (not
       durable, no fence, one connection per waiter);
     - hand-off with 1000 waiters queued behind vs 1 (the same
       definition: release -> the next waiter's ACQUIRED);
     - the longest simba_tick seen, with the thread's CPU time in it, the
       longest of a connected client, and how many ticks slept in the
       kernel (the caller is never blocked: none should); the same for
       the held-locks client;
     - BENCH_HELD (default 100000) idle locks held by one client, next to
       1: statements per renewal period (the client's count, and the
       server's: write transactions by its xid counter) and per keepalive
       the client sent (keepalives come every ttl/3 less a random part, so
       a little more often than once per period), the time of the
       keepalive statement itself (next to a session of one lock), and
       bytes per lock on the client (a
       counting allocator under the core and the backend; libpq's buffers
       aside) and on the server (table + index sizes, and row sizes).

   Rounds of each are interleaved with their floor's where it matters
   (a shared machine's load hits both alike). Settings: BENCH_N (cycles and
   floor rounds, default 300), BENCH_HANDOFFS (default 200), BENCH_Q
   (default 1000), BENCH_HELD (default 100000; 0 skips that part). */
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_PG_IMPLEMENTATION
#include "simba_pg.h"
#include "bench_util.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *url;
static bench_ticks ticks;   /* every pump's ticks (reset for the held-locks part) */

/* ---- raw libpq (the floors) ---- */

static void quiet(void *arg, const char *msg) { (void)arg; (void)msg; }

static PGconn *raw_open(void) {
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "connect: %s", PQerrorMessage(c));
        exit(1);
    }
    PQsetNoticeProcessor(c, quiet, NULL);
    return c;
}

static void raw(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
        exit(1);
    }
    PQclear(r);
}

/* Waits on c's socket until a notification is there. */
static void wait_notify(PGconn *c) {
    PGnotify *n;
    for (;;) {
        struct pollfd p;
        PQconsumeInput(c);
        if ((n = PQnotifies(c)) != NULL) { PQfreemem(n); return; }
        p.fd = PQsocket(c);
        p.events = POLLIN;
        p.revents = 0;
        poll(&p, 1, 1000);
    }
}

/* Waits for the answer of a query sent with PQsendQuery. */
static void wait_result(PGconn *c) {
    PGresult *r;
    for (;;) {
        struct pollfd p;
        PQconsumeInput(c);
        if (!PQisBusy(c)) break;
        p.fd = PQsocket(c);
        p.events = POLLIN;
        p.revents = 0;
        poll(&p, 1, 1000);
    }
    while ((r = PQgetResult(c)) != NULL) PQclear(r);
}

/* The first column of the first row as a number. */
static double raw_num(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    double v;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1) {
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
        exit(1);
    }
    v = atof(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* A counting allocator: the bytes the held-locks client keeps, in the
   core (live_bytes[0]) and in the backend (live_bytes[1]); user points at
   the counter. */
static size_t live_bytes[2];
typedef struct { size_t size; size_t pad; } hdr;   /* keeps 16-byte alignment */
static void *count_alloc(size_t n, void *u) {
    hdr *h = (hdr *)malloc(sizeof(hdr) + n);
    if (!h) return NULL;
    h->size = n;
    *(size_t *)u += n;
    return h + 1;
}
static void count_free(void *p, void *u) {
    hdr *h;
    if (!p) return;
    h = (hdr *)p - 1;
    *(size_t *)u -= h->size;
    free(h);
}

/* ---- simba clients, pumped together ---- */

enum { MAXC = 8, MAXEV = 256 };
static simba *cl[MAXC];
static int ncl;
static simba_event evs[MAXC][MAXEV];
static int nevs[MAXC];

/* A client; ttl 0 = 10 s (and a 5 s transition). counted: its core and
   backend allocate through count_alloc, and its commits do not wait for
   the disk (synchronous_commit off, so no restart grace either): the
   held-locks figures count statements and bytes, not fsyncs, and the
   build-up of 100,000 grants takes a minute instead of three. */
static simba *client_ex(const char *tenant, const char *id, int ttl, int counted, simba_backend *out) {
    static char async_url[1024];
    simba_pg_desc pd;
    simba_desc d;
    simba *s;
    memset(&pd, 0, sizeof pd);
    pd.conninfo = url;
    pd.create_schema = 1;
    memset(&d, 0, sizeof d);
    if (counted) {
        snprintf(async_url, sizeof async_url, "%s%coptions=-c%%20synchronous_commit%%3Doff", url,
                 strchr(url, '?') ? '&' : '?');
        pd.conninfo = async_url;
        pd.restart_grace = -1;
        pd.allocator.alloc = d.allocator.alloc = count_alloc;
        pd.allocator.free = d.allocator.free = count_free;
        d.allocator.user = &live_bytes[0];
        pd.allocator.user = &live_bytes[1];
    }
    d.backend = simba_pg(&pd);
    if (out) *out = d.backend;
    d.tenant = tenant;
    d.client_id = id;
    d.ttl_ms = ttl ? ttl : 10000;
    d.transition_ms = ttl ? ttl / 2 : 5000;
    s = simba_create(&d, NULL);
    if (!s) { fprintf(stderr, "simba_create failed\n"); exit(1); }
    cl[ncl++] = s;
    return s;
}

static simba *client(const char *tenant, const char *id) { return client_ex(tenant, id, 0, 0, NULL); }

/* One poll over every client's fds, then a tick of each; the events land
   in evs[i]. */
static void pump(int cap_ms) {
    struct pollfd fds[MAXC * 4];
    int at[MAXC + 1], n = 0, i, t = cap_ms;
    for (i = 0; i < ncl; i++) {
        int ti = simba_timeout_ms(cl[i]);
        at[i] = n;
        n += simba_pollfds(cl[i], fds + n, 4);
        if (ti >= 0 && ti < t) t = ti;
    }
    at[ncl] = n;
    poll(fds, (nfds_t)n, t);
    for (i = 0; i < ncl; i++) nevs[i] = bench_tick(&ticks, cl[i], fds + at[i], at[i + 1] - at[i], evs[i], MAXEV);
}

/* Pumps until client s has event `type` for lock l. */
static int wait_event(simba *s, simba_lock l, simba_event_type type) {
    double end = now_us() + 30e6;
    int who, i;
    for (who = 0; who < ncl && cl[who] != s; who++) {}
    while (now_us() < end) {
        pump(100);
        for (i = 0; i < nevs[who]; i++) {
            simba_event *e = &evs[who][i];
            if (e->lock.id != l.id || e->lock.gen != l.gen) continue;
            if (e->type == type) return 1;
            if (e->type == SIMBA_EVENT_ERROR || e->type == SIMBA_EVENT_LOST) {
                fprintf(stderr, "%s: %s\n", simba_event_name(e->type), simba_strerror(e->error));
                return 0;
            }
        }
    }
    fprintf(stderr, "timed out waiting for %s\n", simba_event_name(type));
    return 0;
}

static void wait_connected(void) {
    double end = now_us() + 30e6;
    int i, all = 0;
    while (!all && now_us() < end) {
        pump(50);
        for (all = 1, i = 0; i < ncl; i++) all &= simba_connected(cl[i]);
    }
}

static void destroy_all(void) {
    while (ncl) simba_destroy(cl[--ncl]);
}

static simba_lock acquire(simba *s, const char *name) {
    simba_lock_desc d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.wait_ms = -1;
    return simba_acquire(s, &d);
}

/* ---- the figures ---- */

/* cycle: simba acquire+release vs INSERT + DELETE, rounds interleaved. */
static void bench_cycle(int N, double *simba_p50, double *floor_p50) {
    double *v = (double *)malloc(sizeof(double) * (size_t)N), *w = (double *)malloc(sizeof(double) * (size_t)N);
    PGconn *c = raw_open();
    simba *s = client("bench-cycle", "solo");
    int i;
    raw(c, "CREATE TABLE IF NOT EXISTS public.bench_floor (k integer PRIMARY KEY, v text)");
    wait_connected();
    for (i = 0; i < N; i++) {
        simba_lock l;
        double t0 = now_us();
        l = acquire(s, "cycle");
        if (!wait_event(s, l, SIMBA_EVENT_ACQUIRED)) exit(1);
        simba_release(s, l);
        if (!wait_event(s, l, SIMBA_EVENT_RELEASED)) exit(1);
        v[i] = now_us() - t0;
        t0 = now_us();
        raw(c, "INSERT INTO public.bench_floor VALUES (1, 'x')");
        raw(c, "DELETE FROM public.bench_floor WHERE k = 1");
        w[i] = now_us() - t0;
    }
    *simba_p50 = pct(v, N, 0.5);
    *floor_p50 = pct(w, N, 0.5);
    destroy_all();
    PQfinish(c);
    free(v);
    free(w);
}

/* The idle gap before each timed hand-off: B's ENQUEUE is answered and
   queued, and A's connection sits idle, as a holder's does while it works. */
enum { IDLE_GAP_US = 20000 };

/* The floor of a hand-off: a durable commit (one row written) that
   NOTIFYs, and its delivery to an idle listener. Rounds alternate: one
   after the same idle gap as a timed hand-off (both connections idle for
   IDLE_GAP_US: the ratio's floor, since the first statement of a server
   process that has been idle runs slower than one that follows another,
   and a timed hand-off's RELEASE is such a first statement), one right
   after the previous round (back to back, printed beside it). */
static void notify_floor(int N, double *idle_p50, double *hot_p50) {
    PGconn *l = raw_open(), *n = raw_open();
    double *v = (double *)malloc(sizeof(double) * (size_t)N), *w = (double *)malloc(sizeof(double) * (size_t)N);
    int i;
    raw(l, "LISTEN bench_floor");
    raw(n, "CREATE TABLE IF NOT EXISTS public.bench_floor (k integer PRIMARY KEY, v text)");
    for (i = 0; i < 2 * N; i++) {
        double t0;
        if (i % 2 == 0) {
            double until = now_us() + IDLE_GAP_US;
            while (now_us() < until) poll(NULL, 0, 5);   /* as pump(5) does in bench_handoff */
        }
        t0 = now_us();
        /* a durable commit (a row written) that notifies */
        raw(n, "WITH w AS (INSERT INTO public.bench_floor VALUES (2, 'x') ON CONFLICT (k) DO UPDATE SET v = 'y' RETURNING k)"
               " SELECT pg_notify('bench_floor', 'x') FROM w");
        wait_notify(l);
        (i % 2 == 0 ? v : w)[i / 2] = now_us() - t0;
    }
    *idle_p50 = pct(v, N, 0.5);
    *hot_p50 = pct(w, N, 0.5);
    PQfinish(l);
    PQfinish(n);
    free(v);
    free(w);
}

/* simba hand-off, one waiter (Q = 1): A holds, B waits; A releases; the
   time to B's ACQUIRED. */
static double bench_handoff(int H) {
    simba *a = client("bench-handoff", "a"), *b = client("bench-handoff", "b");
    double *v = (double *)malloc(sizeof(double) * (size_t)H), p;
    int i, k = 0;
    wait_connected();
    for (i = 0; i < H; i++) {
        simba_lock la = acquire(a, "handoff"), lb;
        double t0, until;
        if (!wait_event(a, la, SIMBA_EVENT_ACQUIRED)) break;
        lb = acquire(b, "handoff");
        until = now_us() + IDLE_GAP_US;        /* B's ENQUEUE answered: it waits */
        while (now_us() < until) pump(5);
        t0 = now_us();
        simba_release(a, la);
        if (!wait_event(b, lb, SIMBA_EVENT_ACQUIRED)) break;
        v[k++] = now_us() - t0;
        simba_release(b, lb);
        if (!wait_event(b, lb, SIMBA_EVENT_RELEASED)) break;
    }
    p = pct(v, k, 0.5);
    destroy_all();
    free(v);
    return p;
}

/* Hand-offs down a queue of Q waiters spread over 4 clients: each grant
   is released at once; the first 100 hand-offs (Q - 100 or more still
   behind) are timed from the release to the next ACQUIRED. */
static double bench_handoff_queue(int Q) {
    PGconn *c = raw_open();
    simba *h = client("bench-queue", "holder"), *w[4];
    simba_lock lh, *l = (simba_lock *)calloc((size_t)Q, sizeof(simba_lock));
    double *v = (double *)malloc(sizeof(double) * 100), t0, p, end;
    int i, k = 0, measure = Q < 100 ? Q : 100, released = 0;
    char sql[256];
    for (i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "w%d", i);
        w[i] = client("bench-queue", id);
    }
    wait_connected();
    lh = acquire(h, "queue");
    if (!wait_event(h, lh, SIMBA_EVENT_ACQUIRED)) exit(1);
    for (i = 0; i < Q; i++) {
        l[i] = acquire(w[i % 4], "queue");
        if (i % 16 == 15) pump(5);             /* keep them in order, client by client */
    }
    snprintf(sql, sizeof sql, "SELECT count(*) FROM simba.entries WHERE tenant = 'bench-queue'");
    end = now_us() + 60e6;
    while (now_us() < end) {
        PGresult *r;
        int have;
        pump(20);
        r = PQexec(c, sql);
        have = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : 0;
        PQclear(r);
        if (have >= Q + 1) break;
    }
    t0 = now_us();
    simba_release(h, lh);
    end = now_us() + 60e6;
    while (k < measure && now_us() < end) {
        int ci, e;
        pump(50);
        for (ci = 1; ci < ncl; ci++)
            for (e = 0; e < nevs[ci]; e++)
                if (evs[ci][e].type == SIMBA_EVENT_ACQUIRED && k < measure) {
                    double t1 = now_us();
                    v[k++] = t1 - t0;
                    t0 = now_us();
                    simba_release(cl[ci], evs[ci][e].lock);
                    released++;
                }
    }
    p = pct(v, k, 0.5);
    destroy_all();
    PQfinish(c);
    free(v);
    free(l);
    (void)released;
    return p;
}

/* pg_advisory_lock: the session lock cycle, and its blocking hand-off. */
static void bench_advisory(int N, int H, double *cycle_p50, double *handoff_p50) {
    PGconn *a = raw_open(), *b = raw_open();
    double *v = (double *)malloc(sizeof(double) * (size_t)(N > H ? N : H));
    int i;
    for (i = 0; i < N; i++) {
        double t0 = now_us();
        raw(a, "SELECT pg_advisory_lock(4242)");
        raw(a, "SELECT pg_advisory_unlock(4242)");
        v[i] = now_us() - t0;
    }
    *cycle_p50 = pct(v, N, 0.5);
    for (i = 0; i < H; i++) {
        double t0, until;
        raw(a, "SELECT pg_advisory_lock(4242)");
        PQsendQuery(b, "SELECT pg_advisory_lock(4242)");
        until = now_us() + 5e3;                /* B is blocked in the server */
        while (now_us() < until) {}
        t0 = now_us();
        raw(a, "SELECT pg_advisory_unlock(4242)");
        wait_result(b);
        v[i] = now_us() - t0;
        raw(b, "SELECT pg_advisory_unlock(4242)");
    }
    *handoff_p50 = pct(v, H, 0.5);
    PQfinish(a);
    PQfinish(b);
    free(v);
}

/* What the tenant's rows take on the server: table + index bytes of the
   tables a lock has rows in. */
static double server_bytes(PGconn *c) {
    return raw_num(c, "SELECT pg_total_relation_size('simba.entries') + pg_total_relation_size('simba.resources')"
                      " + pg_total_relation_size('simba.sessions')");
}

/* One client holds `held` locks (all granted), idle; prints the renewal
   and memory figures. */
static void bench_held(int held) {
    enum { TTL = 3000, WATCH_MS = 6000, KA = 100 };
    PGconn *c = raw_open();
    simba_backend bk;
    struct simba_pg_stats s0, s1;
    char tenant[32], name[32], sql[512], session[128], label[48];
    simba *s;
    simba_lock_desc d;
    size_t core0, backend0, names = 0;
    double t0, srv0, srv1, rows, x0, x1, *v = (double *)malloc(sizeof(double) * 2 * KA);
    int i, got = 0, period_ms = TTL / 3;
    memset(&s0, 0, sizeof s0);   /* read back below even if simba_pg_stats refused */
    memset(&s1, 0, sizeof s1);
    snprintf(tenant, sizeof tenant, "bench-held-%d", held);
    raw(c, "CHECKPOINT");
    memset(&ticks, 0, sizeof ticks);
    s = client_ex(tenant, "many", TTL, 1, &bk);
    wait_connected();
    srv0 = server_bytes(c);
    core0 = live_bytes[0];
    backend0 = live_bytes[1];
    memset(&d, 0, sizeof d);
    d.wait_ms = -1;
    d.name = name;
    t0 = now_us();
    for (i = 0; i < held; i++) {
        snprintf(name, sizeof name, "held-%06d", i);
        names += strlen(name) + 1;
        if (simba_acquire(s, &d).id == 0) { fprintf(stderr, "acquire failed\n"); exit(1); }
    }
    while (got < held && now_us() - t0 < 900e6) {
        pump(100);
        for (i = 0; i < nevs[0]; i++) {
            if (evs[0][i].type == SIMBA_EVENT_ACQUIRED) got++;
            if (evs[0][i].type == SIMBA_EVENT_LOST || evs[0][i].type == SIMBA_EVENT_ERROR) {
                fprintf(stderr, "%s during the build-up\n", simba_event_name(evs[0][i].type));
                exit(1);
            }
        }
    }
    printf("held:      %d locks acquired by one client in %.1f s (%.0f/s, one connection)\n", got,
           (now_us() - t0) / 1e6, got / ((now_us() - t0) / 1e6));
    /* idle: the renewal, counted by the client and by the server; the
       build-up's statistics first, or autovacuum's ANALYZE (a write
       transaction of its own) may fall into the window */
    raw(c, "VACUUM ANALYZE simba.entries, simba.resources, simba.sessions");
    simba_pg_stats(bk, &s0);
    x0 = raw_num(c, "SELECT txid_current()");
    t0 = now_us();
    while (now_us() < t0 + WATCH_MS * 1000.0) {
        pump(100);
        for (i = 0; i < nevs[0]; i++)
            if (evs[0][i].type == SIMBA_EVENT_LOST) { fprintf(stderr, "LOST while idle\n"); exit(1); }
    }
    x1 = raw_num(c, "SELECT txid_current()");
    simba_pg_stats(bk, &s1);
    /* the keepalive statement itself, as the client sends it */
    snprintf(sql, sizeof sql, "SELECT session FROM simba.sessions WHERE tenant = '%s'", tenant);
    {
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) { fprintf(stderr, "no session\n"); exit(1); }
        snprintf(session, sizeof session, "%s", PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    srv1 = server_bytes(c);
    snprintf(sql, sizeof sql, "SELECT (SELECT COALESCE(sum(pg_column_size(e.*)), 0) FROM simba.entries e WHERE tenant = '%s')"
             " + (SELECT COALESCE(sum(pg_column_size(r.*)), 0) FROM simba.resources r WHERE tenant = '%s')", tenant, tenant);
    rows = raw_num(c, sql);
    /* next to a session of one lock in another tenant, calls interleaved
       (a machine's load hits both alike) */
    snprintf(sql, sizeof sql, "SELECT simba.open('%s-one', 'one~0000000000000001', %d);"
             " SELECT o_granted FROM simba.enqueue('%s-one', 'one~0000000000000001', 'r1', false, false,"
             " ARRAY[encode('one'::bytea, 'hex')], ARRAY[1], ARRAY[0])", tenant, simba_lease_ms(s), tenant);
    raw(c, sql);
    for (i = 0; i < 2 * KA; i++) {
        double k0;
        if (i % 2) snprintf(sql, sizeof sql, "SELECT * FROM simba.keepalive('%s-one', 'one~0000000000000001', %d)",
                            tenant, simba_lease_ms(s));
        else snprintf(sql, sizeof sql, "SELECT * FROM simba.keepalive('%s', '%s', %d)", tenant, session, simba_lease_ms(s));
        k0 = now_us();
        raw(c, sql);
        v[i / 2 + (i % 2) * KA] = now_us() - k0;
    }
    printf("held:      %6d locks: %.2f statements per renewal period (%d ms) by the client, %.2f write transactions"
           " by the server's xid counter; %.2f statements per keepalive (%lld keepalives in %d s); keepalive"
           " statement p50 %.0f us (a session of 1 lock: %.0f us)\n",
           got, (double)(s1.queries - s0.queries) * period_ms / WATCH_MS, period_ms,
           (x1 - x0 - 1) * period_ms / WATCH_MS,
           s1.ops_sent > s0.ops_sent ? (double)(s1.queries - s0.queries) / (double)(s1.ops_sent - s0.ops_sent) : 0.0,
           (long long)(s1.ops_sent - s0.ops_sent), WATCH_MS / 1000, pct(v, KA, 0.5), pct(v + KA, KA, 0.5));
    printf("held:      %6d locks: client %.0f bytes per lock beyond its name (core %.0f, backend %.0f), server %.0f"
           " bytes per lock (tables + indexes; rows %.0f)\n",
           got, ((double)live_bytes[0] - (double)core0 - (double)names + (double)live_bytes[1] - (double)backend0) / got,
           ((double)live_bytes[0] - (double)core0 - (double)names) / got,
           ((double)live_bytes[1] - (double)backend0) / got, (srv1 - srv0) / got,
           rows / got);
    snprintf(label, sizeof label, "held:      %6d locks:", got);
    bench_ticks_print(label, &ticks);
    /* the rows go first: the client's close then has nothing to walk */
    snprintf(sql, sizeof sql, "DELETE FROM simba.entries WHERE tenant LIKE '%s%%';"
             " DELETE FROM simba.resources WHERE tenant LIKE '%s%%'; DELETE FROM simba.sessions WHERE tenant = '%s-one'",
             tenant, tenant, tenant);
    raw(c, sql);
    destroy_all();
    PQfinish(c);
    free(v);
}

int main(void) {
    int N = env_int("BENCH_N", 300), H = env_int("BENCH_HANDOFFS", 200), Q = env_int("BENCH_Q", 1000),
        HELD = env_int("BENCH_HELD", 100000);
    double cyc, insdel, notif, notif_hot, hand, hand_q, hand_1, adv_cycle, adv_hand;
    url = getenv("SIMBA_PG_URL");
    if (!url) { fprintf(stderr, "run through tests/servers/pg.sh (SIMBA_PG_URL)\n"); return 1; }
    printf("# bench_pg: N=%d cycles, H=%d hand-offs, Q=%d (medians)\n", N, H, Q);
    bench_cycle(N, &cyc, &insdel);
    notify_floor(H, &notif, &notif_hot);
    hand = bench_handoff(H);
    bench_advisory(N, H, &adv_cycle, &adv_hand);
    hand_1 = bench_handoff_queue(1);
    hand_q = bench_handoff_queue(Q);
    printf("cycle:     simba acquire+release %8.0f us | INSERT + DELETE (2 commits) %8.0f us | ratio %.2f (target <= 1.5)\n",
           cyc, insdel, cyc / insdel);
    printf("hand-off:  simba release->ACQUIRED %8.0f us | commit + NOTIFY delivery %8.0f us | ratio %.2f (target <= 1.5)"
           " (both after %d ms idle; the floor back to back %.0f us, ratio %.2f)\n",
           hand, notif, hand / notif, IDLE_GAP_US / 1000, notif_hot, hand / notif_hot);
    printf("advisory:  pg_advisory_lock cycle %8.0f us (simba/advisory %.2f); blocking hand-off %8.0f us (simba/advisory %.2f)\n",
           adv_cycle, cyc / adv_cycle, adv_hand, hand / adv_hand);
    printf("queue:     hand-off with Q=%d behind %8.0f us | Q=1 %8.0f us | ratio %.2f (target <= 1.5)\n",
           Q, hand_q, hand_1, hand_q / hand_1);
    bench_ticks_print("tick:     ", &ticks);
    if (HELD > 0) {
        bench_held(1);
        bench_held(HELD);
    }
    return 0;
}
