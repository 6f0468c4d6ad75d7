/* bench_loop.c -- push mode through the adapters, against Redis (started by
   `make bench-loop`; the in-memory backend when SIMBA_REDIS_PORT is unset).

   1. Hand-off latency when the release is issued from a foreign callback
      (an application timer of the loop, not a simba event): from
      simba_release(A) to B's ACQUIRED, p50 over ROUNDS hand-offs, for the
      plain poll loop (pull: pollfds/timeout/tick recomputed each iteration)
      and for epoll, libevent and libuv through the hooks, all in the same
      run. Printed as a ratio to the pull loop (target <= 1.1x).
   2. Idle cost: loop wake-ups per second for simba while one client holds
      1 and then 10,000 locks through each adapter, ttl 3000 (a keepalive
      every second is the floor; busy polling would be thousands). */
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#define SIMBA_REDIS_IMPLEMENTATION
#include "simba_redis.h"
#include "adapters/simba_epoll.h"
#include "adapters/simba_libevent.h"
#include "adapters/simba_libuv.h"
#include "bench_util.h"
#include <stdio.h>

static simba_mem_server *mem;
static char tenant[64];

static simba *client(const char *id, int ttl) {
    simba_desc d;
    const char *port = getenv("SIMBA_REDIS_PORT");
    memset(&d, 0, sizeof d);
    d.client_id = id;
    d.ttl_ms = ttl;
    d.transition_ms = ttl < 5000 ? 1000 : 0;
    d.tenant = tenant;
    if (port && *port) {
        simba_redis_desc r;
        memset(&r, 0, sizeof r);
        r.host = "127.0.0.1";
        r.port = atoi(port);
        d.backend = simba_redis(&r);
    } else d.backend = simba_mem(mem, NULL);
    return simba_create(&d, NULL);
}

/*--- one loop interface over the four ways ---*/
enum { PULL, EPOLL, LIBEVENT, LIBUV, MODES };
static const char *mode_name[MODES] = { "poll loop (pull)", "epoll adapter", "libevent adapter", "libuv adapter" };
static int mode;
static simba *cl[2];
static void *ad[2];
static int acquired[2], released[2];
static simba_lock lk[2];
static double released_at, handoff_us;
static void (*app_fn)(void);

static void on_event(simba *s, const simba_event *ev, void *user) {
    int who = (int)(intptr_t)user;
    (void)s;
    if (ev->type == SIMBA_EVENT_ACQUIRED) { acquired[who] = 1; if (released_at > 0) { handoff_us = now_us() - released_at; released_at = 0; } }
    if (ev->type == SIMBA_EVENT_RELEASED) released[who] = 1;
}

static int ep = -1, ep_app = -1;
static char ep_marker;
static struct event_base *eb;
static uv_loop_t uvl;
static uv_timer_t uv_app, uv_bound;

static void eb_app(evutil_socket_t fd, short w, void *arg) { void (*f)(void) = app_fn; (void)fd; (void)w; (void)arg; app_fn = NULL; if (f) f(); }
static void eb_nop(evutil_socket_t fd, short w, void *arg) { (void)fd; (void)w; (void)arg; }
static void uv_app_cb(uv_timer_t *t) { void (*f)(void) = app_fn; (void)t; app_fn = NULL; if (f) f(); }
static void uv_nop(uv_timer_t *t) { (void)t; }

static void attach(int who) {
    void *u = (void *)(intptr_t)who;
    if (mode == EPOLL) ad[who] = simba_epoll_attach(cl[who], ep, on_event, u);
    if (mode == LIBEVENT) ad[who] = simba_libevent_attach(cl[who], eb, on_event, u);
    if (mode == LIBUV) ad[who] = simba_libuv_attach(cl[who], &uvl, on_event, u);
}

static unsigned long timer_fires(int who) {
    if (mode == EPOLL) return ((simba_epoll *)ad[who])->timer_fires;
    if (mode == LIBEVENT) return ((simba_libevent *)ad[who])->timer_fires;
    if (mode == LIBUV) return ((simba_libuv *)ad[who])->timer_fires;
    return 0;
}

static unsigned long wakeups(int who) {
    if (mode == EPOLL) return ((simba_epoll *)ad[who])->wakeups;
    if (mode == LIBEVENT) return ((simba_libevent *)ad[who])->wakeups;
    if (mode == LIBUV) return ((simba_libuv *)ad[who])->wakeups;
    return 0;
}

/* An application timer, ms from now, that calls fn: not a simba callback. */
static void app_timer(int ms) {
    if (mode == PULL || mode == EPOLL) {
        struct itimerspec t;
        memset(&t, 0, sizeof t);
        t.it_value.tv_sec = ms / 1000;
        t.it_value.tv_nsec = (long)(ms % 1000) * 1000000L + 1;
        timerfd_settime(ep_app, 0, &t, NULL);
    } else if (mode == LIBEVENT) {
        struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
        event_base_once(eb, -1, EV_TIMEOUT, eb_app, NULL, &tv);
    } else uv_timer_start(&uv_app, uv_app_cb, (uint64_t)ms, 0);
}

/* One turn of the loop, at most ms. */
static void turn(int ms) {
    int i;
    if (mode == PULL) {
        struct pollfd p[9];
        int n = 0, k, t = ms, c;
        simba_event ev[32];
        for (c = 0; c < 2; c++) if (cl[c]) {
            int m = simba_pollfds(cl[c], p + n, 4), to = simba_timeout_ms(cl[c]);
            n += m > 4 ? 4 : m;
            if (to >= 0 && to < t) t = to;
        }
        p[n].fd = ep_app; p[n].events = POLLIN; p[n].revents = 0;
        poll(p, (nfds_t)n + 1, t);
        if (p[n].revents) { uint64_t x; if (read(ep_app, &x, sizeof x) == 8 && app_fn) { void (*f)(void) = app_fn; app_fn = NULL; f(); } }
        for (c = 0; c < 2; c++) if (cl[c]) {
            int j;
            k = simba_tick(cl[c], p, n, ev, 32);
            for (j = 0; j < k; j++) on_event(cl[c], &ev[j], (void *)(intptr_t)c);
        }
    } else if (mode == EPOLL) {
        struct epoll_event ev[16];
        int n = epoll_wait(ep, ev, 16, ms);
        for (i = 0; i < n; i++) {
            if (ev[i].data.ptr == &ep_marker) {
                uint64_t x;
                if (read(ep_app, &x, sizeof x) == 8 && app_fn) { void (*f)(void) = app_fn; app_fn = NULL; f(); }
            } else simba_epoll_dispatch((simba_epoll *)ev[i].data.ptr);
        }
    } else if (mode == LIBEVENT) {
        struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
        event_base_once(eb, -1, EV_TIMEOUT, eb_nop, NULL, &tv);
        event_base_loop(eb, EVLOOP_ONCE);
    } else {
        uv_update_time(&uvl);
        uv_timer_start(&uv_bound, uv_nop, (uint64_t)ms, 0);
        uv_run(&uvl, ms > 0 ? UV_RUN_ONCE : UV_RUN_NOWAIT);
        uv_timer_stop(&uv_bound);
    }
}

static int until(int *flag, int ms) {
    double end = now_us() + ms * 1000.0;
    while (!*flag && now_us() < end) turn(50);
    return *flag;
}

static int holder;
static void release_holder(void) { released_at = now_us(); simba_release(cl[holder], lk[holder]); }

static double handoff_p50(int rounds) {
    double v[1000];
    int n = 0, r;
    simba_lock_desc d;
    char name[64];
    snprintf(name, sizeof name, "handoff-%d", mode);
    memset(&d, 0, sizeof d);
    d.name = name;
    d.wait_ms = -1;
    cl[0] = client("bench-a", 30000);
    cl[1] = client("bench-b", 30000);
    attach(0); attach(1);
    acquired[0] = 0;
    lk[0] = simba_acquire(cl[0], &d);
    if (!until(&acquired[0], 30000)) { printf("  no first grant\n"); return -1; }
    holder = 0;
    for (r = 0; r < rounds && n < 1000; r++) {
        int w = 1 - holder;
        acquired[w] = 0;
        lk[w] = simba_acquire(cl[w], &d);
        until(&acquired[w], 20);             /* let the request reach the server */
        handoff_us = -1;
        app_fn = release_holder;
        app_timer(5);
        if (!until(&acquired[w], 20000)) { printf("  hand-off %d never completed\n", r); break; }
        if (handoff_us >= 0) v[n++] = handoff_us;
        if (getenv("BENCH_VERBOSE")) printf("    round %d: %.0f us\n", r, handoff_us);
        holder = w;
    }
    simba_destroy(cl[0]); simba_destroy(cl[1]);
    cl[0] = cl[1] = NULL;
    turn(0);
    return pct(v, n, 0.5);
}

static double idle_rate(int nlocks) {
    simba_lock_desc d;
    char name[64];
    int i;
    unsigned long w0, tf0;
    double t0, secs;
    cl[0] = client("bench-idle", 3000);
    attach(0);
    memset(&d, 0, sizeof d);
    d.name = name;
    d.wait_ms = -1;
    for (i = 0; i < nlocks; i++) { snprintf(name, sizeof name, "idle-%d-%d", mode, i); simba_acquire(cl[0], &d); }
    {   /* until every lock is held: a handful of seconds for 10,000 */
        simba_lock_desc q;
        int got = 0;
        memset(&q, 0, sizeof q);
        q.name = "idle-probe";
        q.wait_ms = -1;
        acquired[0] = 0;
        snprintf(name, sizeof name, "idle-probe-%d", mode);
        q.name = name;
        simba_acquire(cl[0], &q);
        got = until(&acquired[0], 60000);
        (void)got;
        /* 10,000 grants also bring 10,000 pushes and re-checks: wait until
           the burst is over (the loop was quiet between two keepalives) */
        {
            double quiet_from = now_us(), give_up = now_us() + 60e6;
            unsigned long last = wakeups(0);
            while (now_us() < give_up) {
                turn(10);
                if (wakeups(0) - last > 2) { last = wakeups(0); quiet_from = now_us(); }
                if (now_us() - quiet_from > 2.5e6) break;
            }
        }
    }
    w0 = wakeups(0);
    tf0 = timer_fires(0);
    t0 = now_us();
    while (now_us() - t0 < 5e6) turn(1000);
    secs = (now_us() - t0) / 1e6;
    if (getenv("BENCH_VERBOSE")) {
        unsigned long tf = timer_fires(0) - tf0;
        simba *c = cl[0];
        int64_t nw = simba_now_ms(c);
        if (c->nheap) { simba__lock *l = &c->locks[c->heap[0]];
            printf("    heap %u: top state %d op %d timer_at %+lld op_dl %+lld recheck %+lld wait %+lld; keepalive %+lld backend %lld\n", c->nheap, l->state, l->op,
                   (long long)(l->timer_at - nw), (long long)(l->op_deadline == INT64_MAX ? -1 : l->op_deadline - nw), (long long)(l->recheck_at == INT64_MAX ? -1 : l->recheck_at - nw),
                   (long long)(l->wait_deadline == INT64_MAX ? -1 : l->wait_deadline - nw), (long long)(c->session.next_keepalive - nw), (long long)c->backend.vt->deadline_ms(c->backend.impl)); }
        printf("    fallback %d nwatch %d\n", c->loop_fallback, c->nwatch);
        printf("    %d locks: %lu wake-ups, %lu by the timer; timeout now %d ms\n", nlocks, wakeups(0) - w0, tf, simba_timeout_ms(cl[0]));
    }
    i = (int)((double)(wakeups(0) - w0) / secs * 10 + 0.5);
    simba_destroy(cl[0]);
    cl[0] = NULL;
    turn(0);
    return i / 10.0;
}

int main(void) {
    int rounds = env_int("BENCH_ROUNDS", 40), m;
    double p50[MODES];
    struct epoll_event e;
    snprintf(tenant, sizeof tenant, "bl%ld", (long)getpid());
    mem = simba_mem_server_create(NULL);
    ep = epoll_create1(EPOLL_CLOEXEC);
    ep_app = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    memset(&e, 0, sizeof e);
    e.events = EPOLLIN;
    e.data.ptr = &ep_marker;
    epoll_ctl(ep, EPOLL_CTL_ADD, ep_app, &e);
    eb = event_base_new();
    uv_loop_init(&uvl);
    uv_timer_init(&uvl, &uv_app);
    uv_timer_init(&uvl, &uv_bound);
    printf("backend: %s; hand-off p50 with the release from an application timer, %d rounds each\n",
           getenv("SIMBA_REDIS_PORT") ? "redis" : "in-memory", rounds);
    {   /* warm up: a fresh Redis grants nothing for one lease of the first asker */
        mode = PULL;
        cl[0] = client("bench-warm", 1500);
        simba_lock_desc d; memset(&d, 0, sizeof d); d.name = "warm"; d.wait_ms = -1;
        acquired[0] = 0; lk[0] = simba_acquire(cl[0], &d); until(&acquired[0], 20000);
        simba_destroy(cl[0]); cl[0] = NULL;
    }
    for (m = 0; m < MODES; m++) {
        mode = m;
        p50[m] = handoff_p50(rounds);
        if (m == PULL) printf("  %-18s p50 %7.0f us\n", mode_name[m], p50[m]);
        else printf("  %-18s p50 %7.0f us  = %.2f x the poll loop\n", mode_name[m], p50[m], p50[m] / p50[PULL]);
    }
    printf("idle: simba wake-ups of the loop per second, ttl 3000 (one keepalive per second)\n");
    for (m = EPOLL; m < MODES; m++) {
        double one, many;
        mode = m;
        one = idle_rate(1);
        many = idle_rate(env_int("BENCH_LOCKS", 10000));
        printf("  %-18s 1 lock: %.1f/s   %d locks: %.1f/s\n", mode_name[m], one, env_int("BENCH_LOCKS", 10000), many);
    }
    uv_close((uv_handle_t *)&uv_app, NULL);
    uv_close((uv_handle_t *)&uv_bound, NULL);
    uv_run(&uvl, UV_RUN_NOWAIT);
    uv_loop_close(&uvl);
    event_base_free(eb);
    simba_mem_server_destroy(mem);
    return 0;
}
