/* bench_redis.c -- what the Redis backend costs, as ratios to the raw server.

   Run through tests/servers/redis.sh (make bench-redis). In one run it
   measures the raw hiredis PING round trip (RTT) and then, as ratios to it:
     - uncontended acquire -> ACQUIRED, p50/p99      (target <= 1.3 x RTT)
     - acquire + release cycle, p50                  (target <= 2.5 x RTT)
     - hand-off: holder's release -> next waiter's ACQUIRED in another process
       (fork), p50/p99                               (target <= 2 x RTT)
     - throughput of acquire+release cycles, 64 distinct locks in flight on
       one connection, vs redis-benchmark -P 16 of the same two scripts
       (EVALSHA enqueue + EVALSHA release) in the same run     (target >= 0.4 x)
     - with 100,000 held locks: Redis commands per renewal period (from INFO
       commandstats), next to the same figure with 1 held lock (O(1))
     - floors of the hand-off, with plain hiredis: PUBLISH to an idle
       subscriber in another process (the target's floor), the same from a
       script that only PUBLISHes, and from the least a scripted grant can
       run (5 commands), and one small script (keepalive) sent
       to a server that was idle for 20 ms (a cold server runs a script
       several times slower than a hot one)
   Under `tests/servers/redis.sh sentinel` (make bench-redis-sentinel) it
   measures instead, in one run: acquire, cycle and hand-off through Sentinel
   and directly to the same master, in turn (4 pairs), each as a ratio to
   the raw PINGs of its own loop, the median per mode (target: Sentinel
   within 1.1 x of direct), and the time from a
   kill -9 of the master to the first new grant, as a ratio to the lease and
   to Sentinel's own fail-over (until get-master-addr-by-name names another
   master).
   Both ways it ends with the longest simba_tick of this process's clients
   (the hand-off's waiter in the child aside), with the thread's CPU time
   in it, the longest of a connected client, and how many ticks slept in
   the kernel (the caller is never blocked: none should); the client of
   the 100,000 held locks on a line of its own.
   It prints figures; it asserts nothing about speed. */
#define _POSIX_C_SOURCE 200809L
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_REDIS_IMPLEMENTATION
#include "simba_redis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <poll.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>
#include <hiredis/hiredis.h>
#include "bench_util.h"

static const char *host;
static int port;
static const char *sentinels, *sentinel_master;   /* set: clients go through Sentinel */
static int via_sentinel;
static bench_ticks ticks;   /* this process's ticks (the forked waiter's aside) */

/* ---- a simba client and a tiny event loop ---- */

static simba *client(const char *tenant, int ttl) {
    simba_redis_desc rd;
    simba_desc d;
    memset(&rd, 0, sizeof rd);
    memset(&d, 0, sizeof d);
    rd.host = host;
    rd.port = port;
    if (via_sentinel) {
        rd.sentinels = sentinels;
        rd.sentinel_master = sentinel_master;
    }
    d.backend = simba_redis(&rd);
    d.tenant = tenant;
    d.ttl_ms = ttl;
    return simba_create(&d, NULL);
}

/* Pumps until an event of `type` for `l` arrives (other events are handed to
   on_other if set). Returns 1, or 0 after limit_ms. */
typedef void (*other_fn)(simba *s, const simba_event *ev, void *user);

static int pump_until(simba *s, simba_lock l, simba_event_type type, int limit_ms, other_fn other, void *user,
                      simba_event *got) {
    double end = now_us() + limit_ms * 1000.0;
    for (;;) {
        struct pollfd fds[4];
        simba_event ev[64];
        int n = simba_pollfds(s, fds, 4), t = simba_timeout_ms(s), k, i, found = 0;
        double left = (end - now_us()) / 1000.0;
        if (left <= 0) return 0;
        if (t < 0 || t > left) t = (int)left + 1;
        if (n > 4) n = 4;
        poll(fds, (nfds_t)n, t);
        k = bench_tick(&ticks, s, fds, n, ev, 64);
        for (i = 0; i < k; i++) {
            if (!found && ev[i].type == type && ev[i].lock.id == l.id && ev[i].lock.gen == l.gen) {
                found = 1;
                if (got) *got = ev[i];
            } else if (other) other(s, &ev[i], user);
        }
        if (found) return 1;
    }
}

static simba_lock acquire(simba *s, const char *name) {
    simba_lock_desc d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.wait_ms = -1;
    return simba_acquire(s, &d);
}

/* ---- 1. raw round trip ---- */

static double rtt_p50, rtt_p99, rtt_alone_p50, cold_rtt_p50;

static int bench_rtt(void) {
    enum { N = 3000 };
    static double v[N];
    redisContext *c = redisConnect(host, port);
    int i;
    if (!c || c->err) { printf("cannot connect to %s:%d\n", host, port); return 0; }
    for (i = 0; i < 200 + N; i++) {
        double t0 = now_us();
        redisReply *r = (redisReply *)redisCommand(c, "PING");
        if (!r) { redisFree(c); return 0; }
        freeReplyObject(r);
        if (i >= 200) v[i - 200] = now_us() - t0;
    }
    rtt_alone_p50 = pct(v, N, 0.5);
    for (i = 0; i < 100; i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        double t0;
        redisReply *r;
        nanosleep(&ts, NULL);
        t0 = now_us();
        r = (redisReply *)redisCommand(c, "PING");
        if (!r) break;
        freeReplyObject(r);
        v[i] = now_us() - t0;
    }
    redisFree(c);
    cold_rtt_p50 = pct(v, 100, 0.5);
    return 1;
}

static int read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k <= 0) return 0;
        got += (size_t)k;
    }
    return 1;
}

/* ---- 1b. floors for the hand-off: what the server and the OS cost when
   both ends were idle, measured with plain hiredis and no simba ---- */

static double raw_handoff_p50, cold_script_p50, script_push_p50, least_grant_p50;

/* What the publisher of a push floor sends: a bare PUBLISH; a script that
   only PUBLISHes; the least a scripted grant runs (below). */
enum { PUSH_RAW, PUSH_SCRIPT, PUSH_LEAST_GRANT };
enum { PUSH_ROUNDS = 300 };   /* the hand-off's measured rounds, each with one round of the floors */

/* The least any scripted grant can run with the checks simba makes, were
   every key of a resource in one hash: read the resource (capacity, fence
   counter, holder, head waiter) in one command, the head waiter's session
   expiry (a dead waiter is never granted), TIME (the fence), one write of
   the hold, the PUBLISH. No grant rule runs in it; simba's own release runs
   16 commands (docs/redis.md, "Where a hand-off's time goes"). */
static const char *least_grant_lua =
    "local q = redis.call('HMGET', KEYS[1], 'capacity', 'fence', 'holder', 'head')\n"
    "local e = redis.call('ZSCORE', KEYS[2], q[4])\n"
    "local t = redis.call('TIME')\n"
    "local f = math.max(tonumber(q[2]) + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))\n"
    "if not e then return 0 end\n"
    "redis.call('HSET', KEYS[1], 'holder', q[4], 'fence', f, 'head', '')\n"
    "return redis.call('PUBLISH', ARGV[1], f)\n";

/* Loads a script; its sha in sha[41]. */
static int load_script(redisContext *c, const char *lua, char *sha) {
    redisReply *r = (redisReply *)redisCommand(c, "SCRIPT LOAD %s", lua);
    int ok = r && r->type == REDIS_REPLY_STRING;
    if (ok) snprintf(sha, 41, "%s", r->str);
    if (r) freeReplyObject(r);
    return ok;
}

/* The publisher's round: what `kind` sends. */
static redisReply *push_send(redisContext *c, int kind, const char *sha) {
    if (kind == PUSH_RAW) return (redisReply *)redisCommand(c, "PUBLISH simba-bench-raw-handoff x");
    if (kind == PUSH_SCRIPT) return (redisReply *)redisCommand(c, "EVALSHA %s 0 simba-bench-raw-handoff", sha);
    return (redisReply *)redisCommand(c, "EVALSHA %s 2 simba-bench-least:r simba-bench-least:s simba-bench-raw-handoff", sha);
}

/* The least grant's keys put back as they were (before each of its rounds,
   outside the timed part): a holder, a head waiter whose session lives. */
static void push_reset(redisContext *c) {
    freeReplyObject(redisCommand(c, "HSET simba-bench-least:r capacity 1 fence 1 holder h~1 head w~1"));
    freeReplyObject(redisCommand(c, "ZADD simba-bench-least:s 9999999999999 w~1"));
}

/* The floors' other ends: a subscriber in another process, blocked in a
   read, and the publisher's connection with the scripts loaded. */
typedef struct push_floor {
    pid_t pid;
    int from_sub;           /* the subscriber's receive times */
    redisContext *c;
    char sha[3][41];
    double v[3][PUSH_ROUNDS];
    int n;                  /* measured rounds in v */
    int turn;               /* which kind goes first this round (push_floor_round) */
} push_floor;

static int push_floor_start(push_floor *pf) {
    int c2p[2];
    char ready;
    memset(pf, 0, sizeof *pf);
    pf->pid = -1;
    pf->from_sub = -1;
    if (pipe(c2p)) return 0;
    pf->pid = fork();
    if (pf->pid < 0) { close(c2p[0]); close(c2p[1]); return 0; }
    if (pf->pid == 0) {
        redisContext *sc = redisConnect(host, port);
        void *rep;
        close(c2p[0]);
        if (!sc || sc->err) _exit(1);
        rep = redisCommand(sc, "SUBSCRIBE simba-bench-raw-handoff");
        if (!rep) _exit(1);
        freeReplyObject(rep);
        if (write(c2p[1], "r", 1) != 1) _exit(1);
        while (redisGetReply(sc, &rep) == REDIS_OK) {
            double t = now_us();
            freeReplyObject(rep);
            if (write(c2p[1], &t, sizeof t) != (ssize_t)sizeof t) break;
        }
        _exit(0);
    }
    close(c2p[1]);
    pf->from_sub = c2p[0];
    pf->c = redisConnect(host, port);
    return pf->c && !pf->c->err && read_full(pf->from_sub, &ready, 1) &&
           load_script(pf->c, "return redis.call('PUBLISH', ARGV[1], 'x')", pf->sha[PUSH_SCRIPT]) &&
           load_script(pf->c, least_grant_lua, pf->sha[PUSH_LEAST_GRANT]);
}

/* One round of each kind, in turn: the publisher idles 20 ms (as the
   holder does while the waiter queues), then sends; the time from before
   the send to the subscriber holding the message. With a bare PUBLISH, the
   floor of any push hand-off on this machine; with a script, the floor of
   a hand-off decided by a script. Kept when `keep` (after the warm-up; at
   most PUSH_ROUNDS kept rounds, the caller's count).
   Which kind goes first turns round by round: what ran just before a send
   moves its time by up to a third on this VM, so each kind follows the
   hand-off in a third of the rounds. */
static int push_floor_round(push_floor *pf, int keep) {
    int j;
    for (j = 0; j < 3; j++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        int k = (j + pf->turn) % 3;
        double t0, t1;
        redisReply *r;
        if (k == PUSH_LEAST_GRANT) push_reset(pf->c);
        nanosleep(&ts, NULL);
        t0 = now_us();
        r = push_send(pf->c, k, pf->sha[k]);
        if (!r) return 0;
        if (r->type != REDIS_REPLY_INTEGER || r->integer < 1) { freeReplyObject(r); return 0; }   /* nobody got it */
        freeReplyObject(r);
        if (!read_full(pf->from_sub, &t1, sizeof t1)) return 0;
        if (keep) pf->v[k][pf->n] = t1 - t0;
    }
    pf->turn++;
    if (keep) pf->n++;
    return 1;
}

/* Ends the floors; their p50s into the globals when all PUSH_ROUNDS rounds
   were kept. */
static int push_floor_stop(push_floor *pf) {
    double *p50[3];
    int k;
    p50[PUSH_RAW] = &raw_handoff_p50;
    p50[PUSH_SCRIPT] = &script_push_p50;
    p50[PUSH_LEAST_GRANT] = &least_grant_p50;
    if (pf->c) redisFree(pf->c);
    if (pf->pid > 0) {
        kill(pf->pid, SIGKILL);
        waitpid(pf->pid, NULL, 0);
    }
    if (pf->from_sub >= 0) close(pf->from_sub);
    if (pf->n < PUSH_ROUNDS) return 0;
    for (k = 0; k < 3; k++) *p50[k] = pct(pf->v[k], pf->n, 0.5);
    return 1;
}

/* The push floors next to the hand-off, as ratios to the bare PUBLISH. */
static void push_floors_print(double handoff) {
    printf("%-52s %9.1f us %10.2f\n", "  script that only PUBLISHes -> idle subscriber", script_push_p50,
           script_push_p50 / raw_handoff_p50);
    printf("%-52s %9.1f us %10.2f\n", "  least scripted grant (5 commands) -> subscriber", least_grant_p50,
           least_grant_p50 / raw_handoff_p50);
    printf("%-52s %12s %10.2f\n", "  (hand-off p50 / least scripted grant)", "", handoff / least_grant_p50);
    printf("%-52s\n", "  (ratios on these lines: to the raw PUBLISH -> idle subscriber)");
}

/* The round trip of one small script (simba's own keepalive) after 20 ms of
   idleness: next to the cold PING it shows what a script costs a server
   whose caches went cold, which is the case in every hand-off here. */
static int bench_cold_script(void) {
    enum { N = 100 };
    static double v[N];
    redisContext *c = redisConnect(host, port);
    redisReply *r;
    char sha[41], *script;
    size_t len = 1, i;
    int k;
    if (!c || c->err) return 0;
    for (i = 0; simba__redis_lua[i]; i++) len += strlen(simba__redis_lua[i]);
    script = (char *)malloc(len);
    if (!script) return 0;
    script[0] = 0;
    for (i = 0; simba__redis_lua[i]; i++) strcat(script, simba__redis_lua[i]);
    r = (redisReply *)redisCommand(c, "SCRIPT LOAD %s", script);
    free(script);
    if (!r || r->type != REDIS_REPLY_STRING) { if (r) freeReplyObject(r); redisFree(c); return 0; }
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    r = (redisReply *)redisCommand(c, "EVALSHA %s 0 open simba coldb coldb~0000000000000000 - 600000 '' 0 0 1", sha);
    if (r) freeReplyObject(r);
    for (k = 0; k < N; k++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        double t0;
        nanosleep(&ts, NULL);
        t0 = now_us();
        r = (redisReply *)redisCommand(c, "EVALSHA %s 0 keepalive simba coldb coldb~0000000000000000 - 600000 '' 0 0 1", sha);
        if (!r) break;
        freeReplyObject(r);
        v[k] = now_us() - t0;
    }
    redisFree(c);
    if (k < N) return 0;
    cold_script_p50 = pct(v, N, 0.5);
    return 1;
}

/* ---- 2. uncontended acquire and the whole cycle ---- */

static double acq_p50, acq_p99, cycle_p50, script_us;

/* INFO commandstats: usec_per_call of EVALSHA (the server's time per script). */
static double evalsha_usec(redisContext *c) {
    redisReply *r = (redisReply *)redisCommand(c, "INFO commandstats");
    const char *p;
    double v = 0;
    if (r && r->type == REDIS_REPLY_STRING && (p = strstr(r->str, "cmdstat_evalsha:")) != NULL &&
        (p = strstr(p, "usec_per_call=")) != NULL)
        v = atof(p + 14);
    if (r) freeReplyObject(r);
    return v;
}

static int bench_uncontended(void) {
    enum { N = 2000 };
    static double acq[N], cyc[N], ping[N];
    simba *s = client("bench-u", 10000);
    redisContext *c = redisConnect(host, port);
    simba_lock warm;
    int i;
    if (!s || !c || c->err) return 0;
    warm = acquire(s, "warm");                     /* connect, session, restart grace */
    if (!pump_until(s, warm, SIMBA_EVENT_ACQUIRED, 30000, NULL, NULL, NULL)) { printf("no grant\n"); return 0; }
    simba_release(s, warm);
    pump_until(s, warm, SIMBA_EVENT_RELEASED, 5000, NULL, NULL, NULL);
    freeReplyObject(redisCommand(c, "CONFIG RESETSTAT"));
    for (i = 0; i < 200 + N; i++) {
        double t0, t1, t2;
        simba_lock l;
        /* a raw PING in every round: the RTT the ratios use saw the same load */
        t0 = now_us();
        freeReplyObject(redisCommand(c, "PING"));
        if (i >= 200) ping[i - 200] = now_us() - t0;
        t0 = now_us();
        l = acquire(s, "u");
        if (!pump_until(s, l, SIMBA_EVENT_ACQUIRED, 5000, NULL, NULL, NULL)) return 0;
        t1 = now_us();
        simba_release(s, l);
        if (!pump_until(s, l, SIMBA_EVENT_RELEASED, 5000, NULL, NULL, NULL)) return 0;
        t2 = now_us();
        if (i >= 200) { acq[i - 200] = t1 - t0; cyc[i - 200] = t2 - t0; }
    }
    simba_destroy(s);
    script_us = evalsha_usec(c);
    redisFree(c);
    rtt_p50 = pct(ping, N, 0.5);
    rtt_p99 = pct(ping, N, 0.99);
    acq_p50 = pct(acq, N, 0.5);
    acq_p99 = pct(acq, N, 0.99);
    cycle_p50 = pct(cyc, N, 0.5);
    return 1;
}

/* ---- 2b. the floor of a script-based acquire ----
   The same round as above (a raw PING, then one request), but the request
   is a raw EVALSHA of (a) a script that does nothing and (b) a script that
   runs the ten commands of simba's uncontended ENQUEUE (TIME, 3 reads of
   the resource, session and tombstone, the grace read, ZADD and 3 HSETs on
   fresh keys) with no logic. simba's acquire cannot beat (b) by much: it
   is one round trip carrying those commands, plus the decisions around
   them and the client's tick. Each ratio is to the PINGs of its own loop. */

static double floor_empty, floor_cmds;

static const char *const floor_cmds_lua =
    "local k = KEYS[1] redis.call('TIME') redis.call('HMGET', k .. ':m', 'cap', 'ctr', 'seq', 'name') "
    "redis.call('ZRANGE', k .. ':q', 0, -1) redis.call('HGET', k .. ':s', 'exp') redis.call('GET', k .. ':t') "
    "redis.call('HMGET', k .. ':g', 'run', 'grace') redis.call('ZADD', k .. ':q', 1, ARGV[1]) "
    "redis.call('HSET', k .. ':s', 'e ' .. ARGV[1], '1') redis.call('HSET', k .. ':e', ARGV[1], 'sess 1 2 1 1') "
    "redis.call('HSET', k .. ':m', 'cap', '1', 'ctr', '2', 'seq', '1', 'name', 'n') return {0, 1, 0, 1, -1, 'sess', 2}";

static double floor_round(redisContext *c, const char *sha, int with_key) {
    enum { N = 1000 };
    static double ping[N], req[N];
    int i;
    for (i = 0; i < 100 + N; i++) {
        double t0 = now_us(), t1;
        freeReplyObject(redisCommand(c, "PING"));
        t1 = now_us();
        if (with_key) freeReplyObject(redisCommand(c, "EVALSHA %s 1 bench-floor:{%d} r%d", sha, i, i));
        else freeReplyObject(redisCommand(c, "EVALSHA %s 0", sha));
        if (i >= 100) { ping[i - 100] = t1 - t0; req[i - 100] = now_us() - t1; }
    }
    return pct(req, N, 0.5) / pct(ping, N, 0.5);
}

static int bench_script_floor(void) {
    redisContext *c = redisConnect(host, port);
    redisReply *r;
    char sha0[41], sha10[41];
    if (!c || c->err) return 0;
    r = (redisReply *)redisCommand(c, "SCRIPT LOAD %s", "return 1");
    if (!r || r->type != REDIS_REPLY_STRING) return 0;
    snprintf(sha0, sizeof sha0, "%s", r->str);
    freeReplyObject(r);
    r = (redisReply *)redisCommand(c, "SCRIPT LOAD %s", floor_cmds_lua);
    if (!r || r->type != REDIS_REPLY_STRING) return 0;
    snprintf(sha10, sizeof sha10, "%s", r->str);
    freeReplyObject(r);
    floor_empty = floor_round(c, sha0, 0);
    floor_cmds = floor_round(c, sha10, 1);
    freeReplyObject(redisCommand(c, "EVAL %s 0", "for _, k in ipairs(redis.call('KEYS', 'bench-floor:*')) do redis.call('DEL', k) end"));
    redisFree(c);
    return 1;
}

/* ---- 3. hand-off to a waiter in another process ---- */

static double hand_p50, hand_p99;
static double hand_rtt_p50;   /* raw PINGs of the hand-off loop itself (same load as its hand-offs) */

/* The server time of the hand-off's scripts, from SLOWLOG (every command
   logged while the measured rounds run): per kind, the p50 of its EVALSHAs'
   durations (us) and how many ran per hand-off. The holder is the client
   named simba:<holder id>; its RELEASE is the one that grants the waiter. */
enum { SL_HOLDER_ENQ, SL_WAITER_ENQ, SL_HANDOFF_REL, SL_WAITER_REL, SL_OTHER, SL_KINDS };
static const char *const sl_what[SL_KINDS] = {
    "holder's acquire (ENQUEUE, nobody there)", "waiter's ENQUEUE behind the holder",
    "holder's RELEASE granting the waiter", "waiter's RELEASE (nobody waits)", "other scripts (POLL, KEEPALIVE...)"
};
static double sl_p50[SL_KINDS], sl_per_handoff[SL_KINDS];
static int sl_ok;

static void slowlog_start(redisContext *c) {
    freeReplyObject(redisCommand(c, "CONFIG SET slowlog-max-len 100000"));
    freeReplyObject(redisCommand(c, "CONFIG SET slowlog-log-slower-than 0"));
    freeReplyObject(redisCommand(c, "SLOWLOG RESET"));
}

static void slowlog_collect(redisContext *c, const char *holder_name, int rounds) {
    static double d[SL_KINDS][8192];
    int nd[SL_KINDS] = {0}, k;
    size_t i;
    redisReply *r = (redisReply *)redisCommand(c, "SLOWLOG GET 100000");
    freeReplyObject(redisCommand(c, "CONFIG SET slowlog-log-slower-than 10000"));
    freeReplyObject(redisCommand(c, "CONFIG SET slowlog-max-len 128"));
    sl_ok = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY) { if (r) freeReplyObject(r); return; }
    for (i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i], *a;
        const char *op;
        int holder, kind;
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 6 || e->element[3]->type != REDIS_REPLY_ARRAY) continue;
        a = e->element[3];
        if (a->elements < 5 || strcasecmp(a->element[0]->str, "evalsha") != 0) continue;
        k = atoi(a->element[2]->str);
        if (k < 0 || (size_t)(3 + k) >= a->elements) continue;
        op = a->element[3 + k]->str;
        if (e->element[5]->type != REDIS_REPLY_STRING || strncmp(e->element[5]->str, "simba:", 6) != 0) continue;
        holder = strcmp(e->element[5]->str, holder_name) == 0;   /* (the floors' publisher is not simba) */
        if (strcmp(op, "enqueue") == 0) kind = holder ? SL_HOLDER_ENQ : SL_WAITER_ENQ;
        else if (strcmp(op, "release") == 0) kind = holder ? SL_HANDOFF_REL : SL_WAITER_REL;
        else kind = SL_OTHER;
        if (nd[kind] < 8192) d[kind][nd[kind]++] = (double)e->element[2]->integer;
    }
    freeReplyObject(r);
    for (k = 0; k < SL_KINDS; k++) {
        sl_p50[k] = nd[k] ? pct(d[k], nd[k], 0.5) : 0;
        sl_per_handoff[k] = (double)nd[k] / rounds;
    }
    sl_ok = 1;
}

static void slowlog_print(void) {
    int k;
    double n = 0;
    if (!sl_ok) { printf("  (SLOWLOG not readable: no server time per script)\n"); return; }
    printf("%-52s %12s %10s\n", "server time of the hand-off's scripts (SLOWLOG)", "p50 us", "per hand-off");
    for (k = 0; k < SL_KINDS; k++) {
        printf("  %-50s %12.1f %10.2f\n", sl_what[k], sl_p50[k], sl_per_handoff[k]);
        n += sl_per_handoff[k];
    }
    printf("  %-50s %12s %10.2f\n", "scripts per hand-off", "", n);
}

static void child_waiter(int from_parent, int to_parent) {
    simba *s = client("bench-h", 10000);
    char c;
    while (s && read_full(from_parent, &c, 1) && c == 'g') {
        simba_lock l = acquire(s, "h");
        simba_event ev;
        double t;
        /* let the ENQUEUE land before the holder releases */
        pump_until(s, l, SIMBA_EVENT_ACQUIRED, 20, NULL, NULL, NULL);
        if (write(to_parent, "q", 1) != 1) break;
        if (!pump_until(s, l, SIMBA_EVENT_ACQUIRED, 10000, NULL, NULL, &ev)) t = -1;
        else t = now_us();
        if (write(to_parent, &t, sizeof t) != (ssize_t)sizeof t) break;
        simba_release(s, l);
        pump_until(s, l, SIMBA_EVENT_RELEASED, 5000, NULL, NULL, NULL);
        if (write(to_parent, "d", 1) != 1) break;
    }
    if (s) simba_destroy(s);
    _exit(0);
}

/* The hand-off, round by round; with_floors: each round followed by one
   round of the push floors (push_floor_round), so that the hand-off and
   its floors share the machine's minute and their ratios compare like
   with like. */
static int bench_handoff(int with_floors) {
    enum { N = PUSH_ROUNDS };
    static double v[N], ping[N];
    static push_floor pf;
    int p2c[2], c2p[2], i, n = 0, floors_ok = 1;
    pid_t pid;
    simba *s;
    redisContext *raw = redisConnect(host, port);
    if (!raw || raw->err) { if (raw) redisFree(raw); return 0; }
    if (with_floors && !push_floor_start(&pf)) { push_floor_stop(&pf); redisFree(raw); return 0; }
    if (pipe(p2c) || pipe(c2p) || (pid = fork()) < 0) {
        if (with_floors) push_floor_stop(&pf);   /* its subscriber is not left behind */
        redisFree(raw);
        return 0;
    }
    if (pid == 0) { close(p2c[1]); close(c2p[0]); child_waiter(p2c[0], c2p[1]); }
    close(p2c[0]);
    close(c2p[1]);
    s = client("bench-h", 10000);
    for (i = 0; s && i < 20 + N; i++) {
        simba_lock l;
        double t_rel, t_acq;
        char c;
        if (i == 20) slowlog_start(raw);
        l = acquire(s, "h");
        if (!pump_until(s, l, SIMBA_EVENT_ACQUIRED, 30000, NULL, NULL, NULL)) break;
        if (write(p2c[1], "g", 1) != 1 || !read_full(c2p[0], &c, 1)) break;
        t_rel = now_us();
        simba_release(s, l);
        pump_until(s, l, SIMBA_EVENT_RELEASED, 5000, NULL, NULL, NULL);
        if (!read_full(c2p[0], &t_acq, sizeof t_acq) || !read_full(c2p[0], &c, 1)) break;
        if (t_acq < 0) { printf("waiter got no grant\n"); break; }
        if (i >= 20) {
            double t0 = now_us();
            freeReplyObject(redisCommand(raw, "PING"));
            ping[n] = now_us() - t0;
            v[n++] = t_acq - t_rel;
        }
        if (with_floors && !push_floor_round(&pf, i >= 20)) { floors_ok = 0; break; }
    }
    if (s && n == N) {
        char name[300];
        snprintf(name, sizeof name, "simba:%s", simba_client_id(s));
        slowlog_collect(raw, name, n);
    }
    redisFree(raw);
    close(p2c[1]);
    waitpid(pid, NULL, 0);
    close(c2p[0]);
    if (s) simba_destroy(s);
    if (with_floors && !push_floor_stop(&pf)) floors_ok = 0;
    if (n < N || !floors_ok) return 0;
    hand_p50 = pct(v, n, 0.5);
    hand_p99 = pct(v, n, 0.99);
    hand_rtt_p50 = pct(ping, n, 0.5);
    return 1;
}

/* ---- 4. throughput, and redis-benchmark of the same scripts ---- */

static double tput, raw_enqueue, raw_release;

typedef struct tp_state { long cycles; int stop; } tp_state;

static void tp_on_event(simba *s, const simba_event *ev, void *user) {
    tp_state *st = (tp_state *)user;
    if (ev->type == SIMBA_EVENT_ACQUIRED) simba_release(s, ev->lock);
    else if (ev->type == SIMBA_EVENT_RELEASED) {
        char name[32];
        st->cycles++;
        if (!st->stop) {
            snprintf(name, sizeof name, "tp-%lu", (unsigned long)(uintptr_t)ev->user);
            {
                simba_lock_desc d;
                memset(&d, 0, sizeof d);
                d.name = name;
                d.wait_ms = -1;
                d.user = ev->user;
                simba_acquire(s, &d);
            }
        }
    }
}

static int bench_throughput(void) {
    enum { INFLIGHT = 64 };
    simba *s = client("bench-t", 10000);
    tp_state st;
    simba_lock none = {0, 0};
    double t0, t1;
    int i;
    if (!s) return 0;
    memset(&st, 0, sizeof st);
    {   /* warm */
        simba_lock w = acquire(s, "warm");
        if (!pump_until(s, w, SIMBA_EVENT_ACQUIRED, 30000, NULL, NULL, NULL)) return 0;
    }
    for (i = 0; i < INFLIGHT; i++) {
        char name[32];
        simba_lock_desc d;
        snprintf(name, sizeof name, "tp-%d", i);
        memset(&d, 0, sizeof d);
        d.name = name;
        d.wait_ms = -1;
        d.user = (void *)(uintptr_t)i;
        simba_acquire(s, &d);
    }
    pump_until(s, none, SIMBA_EVENT_NONE, 500, tp_on_event, &st, NULL);   /* warm up */
    st.cycles = 0;
    t0 = now_us();
    pump_until(s, none, SIMBA_EVENT_NONE, 3000, tp_on_event, &st, NULL);
    t1 = now_us();
    tput = st.cycles / ((t1 - t0) / 1e6);
    st.stop = 1;
    pump_until(s, none, SIMBA_EVENT_NONE, 500, tp_on_event, &st, NULL);
    simba_destroy(s);
    return 1;
}

/* redis-benchmark's "requests per second" for one command line. */
static double redis_benchmark(const char *args) {
    char cmdline[16384];
    FILE *p;
    char line[4096];
    double rps = 0;
    snprintf(cmdline, sizeof cmdline, "redis-benchmark -h %s -p %d -P 16 -n 100000 -r 100000000 --csv %s 2>/dev/null",
             host, port, args);
    p = popen(cmdline, "r");
    if (!p) return 0;
    while (fgets(line, sizeof line, p)) {
        char *q = strchr(line, ',');
        if (q && q[1] == '"') rps = atof(q + 2);   /* "test","rps",... */
    }
    pclose(p);
    return rps;
}

static int bench_raw_scripts(void) {
    redisContext *c = redisConnect(host, port);
    redisReply *r;
    char sha[41], *script;
    char args[2048];
    size_t n = 0, i;
    if (!c || c->err) return 0;
    for (i = 0; simba__redis_lua[i]; i++) n += strlen(simba__redis_lua[i]);
    script = (char *)malloc(n + 1);
    if (!script) return 0;
    script[0] = 0;
    for (i = 0; simba__redis_lua[i]; i++) strcat(script, simba__redis_lua[i]);
    r = (redisReply *)redisCommand(c, "SCRIPT LOAD %s", script);
    if (!r || r->type != REDIS_REPLY_STRING) { printf("SCRIPT LOAD failed\n"); return 0; }
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    /* one session for all of them, alive for the whole run */
    r = (redisReply *)redisCommand(c, "EVALSHA %s 0 open simba rawb rawb~0000000000000000 - 600000 '' 0 0 1", sha);
    if (r) freeReplyObject(r);
    redisFree(c);
    free(script);
    /* the same ARGV simba sends: a fresh resource and request each time */
    snprintf(args, sizeof args, "EVALSHA %s 1 simba:{rawb:__rand_int__} enqueue simba rawb "
             "rawb~0000000000000000 rawb~0000000000000000~__rand_int__ 600000 '' 0 0 1 n __rand_int__ 1 1", sha);
    raw_enqueue = redis_benchmark(args);
    snprintf(args, sizeof args, "EVALSHA %s 1 simba:{rawb:__rand_int__} release simba rawb "
             "rawb~0000000000000000 rawb~0000000000000000~__rand_int__ 600000 '' 0 0 1 n __rand_int__ 1 1", sha);
    raw_release = redis_benchmark(args);
    return raw_enqueue > 0 && raw_release > 0;
}

/* ---- 5. renewal cost with 100,000 held locks ---- */

static double cmds_per_period[2];
static int evalsha_per_period[2];

/* Sum of calls over all commands in INFO commandstats, but INFO itself. */
static long long total_calls(redisContext *c, long long *evalsha) {
    redisReply *r = (redisReply *)redisCommand(c, "INFO commandstats");
    long long sum = 0;
    const char *p;
    *evalsha = 0;
    if (!r || r->type != REDIS_REPLY_STRING) { if (r) freeReplyObject(r); return -1; }
    for (p = strstr(r->str, "cmdstat_"); p; p = strstr(p + 1, "cmdstat_")) {
        const char *calls = strstr(p, ":calls=");
        long long n;
        if (!calls) break;
        n = atoll(calls + 7);
        if (strncmp(p, "cmdstat_info:", 13) == 0) continue;
        if (strncmp(p, "cmdstat_evalsha:", 16) == 0) *evalsha = n;
        sum += n;
    }
    freeReplyObject(r);
    return sum;
}

static int bench_renewal(int round, int nlocks) {
    enum { TTL = 3000, BATCH = 2000, PERIODS = 3 };
    simba *s = client(round ? "bench-100k" : "bench-1", TTL);
    redisContext *c = redisConnect(host, port);
    long long before, after, ev0, ev1;
    int done = 0, i;
    simba_lock none = {0, 0};
    if (!s || !c || c->err) return 0;
    while (done < nlocks) {
        int batch = nlocks - done < BATCH ? nlocks - done : BATCH;
        for (i = 0; i < batch; i++) {
            char name[32];
            snprintf(name, sizeof name, "held-%d", done + i);
            if (simba_acquire(s, &(simba_lock_desc){ .name = name, .wait_ms = -1 }).id == 0) return 0;
        }
        {
            /* pump until this batch is all granted */
            int granted = 0;
            double end = now_us() + 60e6;
            while (granted < batch && now_us() < end) {
                struct pollfd fds[4];
                simba_event evs[256];
                int n = simba_pollfds(s, fds, 4), k, j;
                n = n < 0 ? 0 : n > 4 ? 4 : n;
                poll(fds, (nfds_t)n, 10);
                k = bench_tick(&ticks, s, fds, n, evs, 256);
                for (j = 0; j < k; j++) {
                    if (evs[j].type == SIMBA_EVENT_ACQUIRED) granted++;
                    else if (evs[j].type == SIMBA_EVENT_LOST || evs[j].type == SIMBA_EVENT_ERROR) {
                        printf("lost a lock while taking %d (%s)\n", nlocks, simba_event_name(evs[j].type));
                        return 0;
                    }
                }
            }
            if (granted < batch) return 0;
        }
        done += batch;
    }
    pump_until(s, none, SIMBA_EVENT_NONE, TTL / 3, NULL, NULL, NULL);
    before = total_calls(c, &ev0);
    pump_until(s, none, SIMBA_EVENT_NONE, PERIODS * TTL / 3, NULL, NULL, NULL);
    after = total_calls(c, &ev1);
    cmds_per_period[round] = (double)(after - before) / PERIODS;
    evalsha_per_period[round] = (int)((ev1 - ev0 + PERIODS / 2) / PERIODS);
    redisFree(c);
    simba_destroy(s);
    return 1;
}

/* ---- Sentinel: the same loops through Sentinel, and a kill -9 ---- */

static int sentinel_master_port(void) {
    const char *c = strchr(sentinels, ':');
    redisContext *rc = redisConnect("127.0.0.1", c ? atoi(c + 1) : 26379);
    redisReply *r;
    int p = 0;
    if (!rc || rc->err) { if (rc) redisFree(rc); return 0; }
    r = (redisReply *)redisCommand(rc, "SENTINEL get-master-addr-by-name %s", sentinel_master);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) p = atoi(r->element[1]->str);
    if (r) freeReplyObject(r);
    redisFree(rc);
    return p;
}

/* kill -9 of the master; a client through Sentinel (connected, session
   open) then asks for a lock: ms until its grant, and until the sentinels
   named another master. */
static int bench_kill(double *grant_ms, double *switch_ms, int *lease_ms) {
    simba *s;
    simba_lock l;
    double t0, t_switch = -1;
    char cmd[256];
    int old = sentinel_master_port();
    via_sentinel = 1;
    s = client("bench-k", 3000);
    if (!s || !old) return 0;
    l = acquire(s, "warm");
    if (!pump_until(s, l, SIMBA_EVENT_ACQUIRED, 30000, NULL, NULL, NULL)) return 0;
    simba_release(s, l);
    pump_until(s, l, SIMBA_EVENT_RELEASED, 5000, NULL, NULL, NULL);
    *lease_ms = simba_lease_ms(s);
    snprintf(cmd, sizeof cmd, "%s kill %d", getenv("SIMBA_REDIS_CTL"), old);
    t0 = now_us();
    if (system(cmd) != 0) return 0;
    l = acquire(s, "k");
    for (;;) {
        simba_event ev;
        if (pump_until(s, l, SIMBA_EVENT_ACQUIRED, 50, NULL, NULL, &ev)) break;
        if (t_switch < 0) {
            int p = sentinel_master_port();
            if (p && p != old) t_switch = now_us();
        }
        if (now_us() - t0 > 120e6) return 0;
    }
    *grant_ms = (now_us() - t0) / 1000.0;
    *switch_ms = t_switch < 0 ? *grant_ms : (t_switch - t0) / 1000.0;
    simba_destroy(s);
    return 1;
}

/* The median of n (n <= 8) values. */
static double median_of(const double *v, int n) {
    double t[8];
    memcpy(t, v, (size_t)n * sizeof *t);
    return pct(t, n, 0.5);
}

static int bench_sentinel(void) {
    enum { PAIRS = 4 };
    /* per mode (0 direct, 1 through Sentinel) and pair: p50s and the ratios
       to the raw PINGs measured in the same loop, under the same load */
    double acq[2][PAIRS], cyc[2][PAIRS], hand[2][PAIRS], racq[2][PAIRS], rcyc[2][PAIRS], rhand[2][PAIRS];
    double grant_ms = 0, switch_ms = 0, m[2][3];
    int mode, pair, lease = 0, k;
    static const char *what[3] = { "acquire -> ACQUIRED", "acquire + release cycle", "hand-off to another process" };
    printf("simba Redis backend through Sentinel (%s, master '%s' at %s:%d)\n", sentinels, sentinel_master, host, port);
    fflush(stdout);
    if (!bench_rtt()) return 1;
    /* Direct and through Sentinel in turn, PAIRS times (the machine's load
       drifts between loops; one pair once gave 0.56 and another 1.33): each
       figure is a ratio to the raw PINGs of its own loop, and the verdict
       takes the median of each mode's ratios. */
    for (pair = 0; pair < PAIRS; pair++)
        for (mode = 0; mode < 2; mode++) {
            via_sentinel = mode;
            if (!bench_uncontended() || !bench_handoff(0)) { printf("%s: failed\n", mode ? "sentinel" : "direct"); return 1; }
            acq[mode][pair] = acq_p50;
            cyc[mode][pair] = cycle_p50;
            hand[mode][pair] = hand_p50;
            racq[mode][pair] = acq_p50 / rtt_p50;
            rcyc[mode][pair] = cycle_p50 / rtt_p50;
            rhand[mode][pair] = hand_p50 / hand_rtt_p50;
        }
    if (!bench_kill(&grant_ms, &switch_ms, &lease)) { printf("kill -9: failed\n"); return 1; }
    for (mode = 0; mode < 2; mode++) {
        m[mode][0] = median_of(racq[mode], PAIRS);
        m[mode][1] = median_of(rcyc[mode], PAIRS);
        m[mode][2] = median_of(rhand[mode], PAIRS);
    }
    printf("\n%d pairs of loops, direct then through Sentinel; per loop p50 / raw PING p50 of that loop\n", PAIRS);
    printf("%-30s %-9s %s\n", "measure", "mode", "p50 us (x RTT) per pair");
    for (k = 0; k < 3; k++)
        for (mode = 0; mode < 2; mode++) {
            const double *v = k == 0 ? acq[mode] : k == 1 ? cyc[mode] : hand[mode];
            const double *r = k == 0 ? racq[mode] : k == 1 ? rcyc[mode] : rhand[mode];
            printf("%-30s %-9s", mode ? "" : what[k], mode ? "sentinel" : "direct");
            for (pair = 0; pair < PAIRS; pair++) printf(" %7.0f (%4.2f)", v[pair], r[pair]);
            printf("\n");
        }
    printf("\n%-52s %10s %10s %10s %8s\n", "measure (median of the pairs' x RTT)", "direct", "sentinel", "/ direct",
           "target");
    for (k = 0; k < 3; k++)
        printf("%-52s %10.2f %10.2f %10.2f %8s\n", what[k], m[0][k], m[1][k], m[1][k] / m[0][k], "<= 1.1");
    printf("\n%-52s %9.0f ms\n", "kill -9 of the master -> sentinels name another", switch_ms);
    printf("%-52s %9.0f ms\n", "kill -9 of the master -> first new grant", grant_ms);
    printf("%-52s %12.2f\n", "  / lease (ttl + transition)", grant_ms / lease);
    printf("%-52s %12.2f\n", "  / Sentinel's own fail-over", grant_ms / switch_ms);
    printf("(lease %d ms: the new master grants nothing for one lease, the restart grace)\n", lease);
    printf("\n");
    bench_ticks_print("tick:", &ticks);
    return 0;
}

/* BENCH_REDIS_HANDOFF_ONLY=1: the hand-off, its floor and its scripts' server
   time only (a quick look while working on the hand-off path) */
static int bench_handoff_only(void) {
    if (!bench_handoff(1)) { printf("hand-off: failed\n"); return 1; }
    printf("%-52s %9.1f us %10.2f\n", "raw hiredis PING p50 (the hand-off loop's)", hand_rtt_p50, 1.0);
    printf("%-52s %9.1f us %10.2f\n", "hand-off release -> waiter's ACQUIRED p50 (2 procs)", hand_p50, hand_p50 / hand_rtt_p50);
    printf("%-52s %9.1f us %10.2f\n", "raw PUBLISH -> idle subscriber (2 procs) p50", raw_handoff_p50, raw_handoff_p50 / hand_rtt_p50);
    printf("%-52s %12s %10.2f %8s\n", "  (hand-off p50 / raw PUBLISH -> idle subscriber)", "", hand_p50 / raw_handoff_p50, "<= 1.5");
    push_floors_print(hand_p50);
    slowlog_print();
    return 0;
}

int main(void) {
    const char *p = getenv("SIMBA_REDIS_PORT");
    bench_ticks run_ticks;
    sentinels = getenv("SIMBA_SENTINEL_ADDRS");
    sentinel_master = getenv("SIMBA_SENTINEL_MASTER");
    host = getenv("SIMBA_REDIS_HOST");
    if (!host) host = "127.0.0.1";
    port = p ? atoi(p) : 0;
    if (!port) { printf("bench_redis: run me through tests/servers/redis.sh (SIMBA_REDIS_PORT)\n"); return 1; }
    signal(SIGPIPE, SIG_IGN);
    if (sentinels && sentinel_master) return bench_sentinel();
    printf("simba Redis backend benchmark (%s:%d, one machine, loopback)\n", host, port);
    fflush(stdout);
    if (!bench_rtt()) return 1;
    if (getenv("BENCH_REDIS_HANDOFF_ONLY")) return bench_handoff_only();
    if (!bench_uncontended()) { printf("uncontended: failed\n"); return 1; }
    if (!bench_script_floor()) { printf("script floor: failed\n"); return 1; }
    if (!bench_handoff(1)) { printf("hand-off: failed\n"); return 1; }
    if (!bench_cold_script()) { printf("hand-off floors: failed\n"); return 1; }
    if (!bench_throughput()) { printf("throughput: failed\n"); return 1; }
    if (!bench_raw_scripts()) { printf("redis-benchmark: failed\n"); return 1; }
    if (!bench_renewal(0, 1)) { printf("renewal: failed\n"); return 1; }
    run_ticks = ticks;
    memset(&ticks, 0, sizeof ticks);
    if (!bench_renewal(1, 100000)) { printf("renewal: failed\n"); return 1; }
    printf("\n%-52s %12s %10s %8s\n", "measure", "value", "x RTT p50", "target");
    printf("%-52s %9.1f us %10s %8s\n", "raw hiredis PING p50 (RTT; one before each acquire)", rtt_p50, "1.00", "");
    printf("%-52s %9.1f us %10.2f %8s\n", "raw hiredis PING p99", rtt_p99, rtt_p99 / rtt_p50, "");
    printf("%-52s %9.1f us %10.2f %8s\n", "raw PING p50, 3000 in a row before the rest", rtt_alone_p50, rtt_alone_p50 / rtt_p50, "");
    printf("%-52s %9.1f us %10.2f %8s\n", "raw PING after 20 ms idle p50 (cold RTT)", cold_rtt_p50, cold_rtt_p50 / rtt_p50, "");
    printf("%-52s %9.1f us %10.2f %8s\n", "server time of one script (EVALSHA usec_per_call)", script_us, script_us / rtt_p50, "");
    printf("%-52s %9.1f us %10.2f %8s\n", "uncontended acquire -> ACQUIRED p50", acq_p50, acq_p50 / rtt_p50, "<= 1.3");
    printf("%-52s %9.1f us %10.2f %8s\n", "uncontended acquire -> ACQUIRED p99", acq_p99, acq_p99 / rtt_p50, "");
    printf("%-52s %12s %10.2f %8s\n", "  floor: raw EVALSHA of an empty script, p50", "", floor_empty, "");
    printf("%-52s %12s %10.2f %8s\n", "  floor: raw EVALSHA, the fast path's 10 commands", "", floor_cmds, "");
    printf("%-52s %9.1f us %10.2f %8s\n", "acquire + release cycle p50", cycle_p50, cycle_p50 / rtt_p50, "<= 2.5");
    printf("%-52s %9.1f us %10.2f %8s\n", "hand-off release -> waiter's ACQUIRED p50 (2 procs)", hand_p50, hand_p50 / rtt_p50, "<= 2");
    printf("%-52s %9.1f us %10.2f %8s\n", "hand-off release -> waiter's ACQUIRED p99", hand_p99, hand_p99 / rtt_p50, "");
    printf("%-52s %12s %10.2f %8s\n", "  (hand-off p50 / cold RTT: both ends were idle)", "", hand_p50 / cold_rtt_p50, "");
    printf("%-52s %9.1f us %10.2f %8s\n", "raw PUBLISH -> idle subscriber (2 procs) p50", raw_handoff_p50, raw_handoff_p50 / rtt_p50, "");
    printf("%-52s %9.1f us %10.2f %8s\n", "raw EVALSHA keepalive after 20 ms idle p50", cold_script_p50, cold_script_p50 / rtt_p50, "");
    printf("%-52s %12s %10.2f %8s\n", "  (hand-off p50 / raw PUBLISH -> idle subscriber)", "", hand_p50 / raw_handoff_p50, "<= 1.5");
    push_floors_print(hand_p50);
    slowlog_print();
    {
        double raw_cycle = 1.0 / (1.0 / raw_enqueue + 1.0 / raw_release);
        printf("\n%-52s %12s %10s %8s\n", "throughput", "per second", "ratio", "target");
        printf("%-52s %12.0f %10s %8s\n", "redis-benchmark -P 16: EVALSHA enqueue", raw_enqueue, "", "");
        printf("%-52s %12.0f %10s %8s\n", "redis-benchmark -P 16: EVALSHA release", raw_release, "", "");
        printf("%-52s %12.0f %10s %8s\n", "  = raw enqueue+release cycles", raw_cycle, "1.00", "");
        printf("%-52s %12.0f %10.2f %8s\n", "simba acquire+release cycles (64 locks in flight)", tput, tput / raw_cycle, ">= 0.4");
    }
    printf("\n%-52s %12s %10s\n", "renewal (ttl 3 s: one period = 1 s)", "cmds/period", "EVALSHA");
    printf("%-52s %12.1f %10d\n", "1 held lock", cmds_per_period[0], evalsha_per_period[0]);
    printf("%-52s %12.1f %10d\n", "100,000 held locks", cmds_per_period[1], evalsha_per_period[1]);
    printf("(commands: every command Redis ran, those inside scripts included, INFO excluded)\n");
    printf("\n");
    bench_ticks_print("tick:", &run_ticks);
    bench_ticks_print("tick (100,000 held locks):", &ticks);
    return 0;
}
