/* bench_mem.c -- the core's costs, on the in-memory backend (`make bench-mem`).

   One client holds 100,000 locks. Printed:
   - bytes the client allocated per held lock, beyond its name;
   - simba_tick() with nothing due: median of single calls;
   - a tick in which one timer is due, with 1k / 10k / 100k timers pending
     (O(log n): the ratio between sizes stays small);
   - backend operations per renewal period (ttl) while holding them all
     (O(1) per client: the keepalives, whatever the number of locks);
   - the raw mem round trip (one KEEPALIVE submitted and answered), as the unit;
   - the longest simba_tick while the 100,000 locks are taken and renewed
     (the ticks of drain(): the single ticks timed above aside), with the
     thread's CPU time in it, the longest of a connected client, and how
     many ticks slept in the kernel (the caller is never blocked: none should).
   A virtual clock keeps every timer still while measuring; only the
   measurements themselves read the real clock. No assertions: figures. */
#define _POSIX_C_SOURCE 200809L
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_util.h"

static int64_t vnow = 1000000;
static int64_t vclock(void *u) { (void)u; return vnow; }

static size_t live_bytes;
typedef struct { size_t size; size_t pad; } hdr;   /* keeps 16-byte alignment */
static void *count_alloc(size_t n, void *u) {
    hdr *h = (hdr *)malloc(sizeof(hdr) + n);
    (void)u;
    if (!h) return NULL;
    h->size = n;
    live_bytes += n;
    return h + 1;
}
static void count_free(void *p, void *u) {
    hdr *h;
    (void)u;
    if (!p) return;
    h = (hdr *)p - 1;
    live_bytes -= h->size;
    free(h);
}

static double real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static simba_event evbuf[4096];
static bench_ticks ticks;   /* drain's ticks (the timed single ticks aside) */

static void drain(simba *s) {
    while (bench_tick(&ticks, s, NULL, 0, evbuf, 4096) == 4096) {}
}

static simba *client(simba_mem_server *srv, int counted) {
    simba_desc d;
    memset(&d, 0, sizeof d);
    d.backend = simba_mem(srv, NULL);
    d.clock.now_ms = vclock;
    d.ttl_ms = 10000;
    d.transition_ms = 6000;
    if (counted) { d.allocator.alloc = count_alloc; d.allocator.free = count_free; }
    return simba_create(&d, NULL);
}

/* Median ns of one simba_tick with nothing due. */
static double idle_tick_ns(simba *s) {
    enum { N = 20001 };
    static double t[N];
    int i;
    for (i = 0; i < N; i++) {
        double a = real_ns();
        simba_tick(s, NULL, 0, evbuf, 16);
        t[i] = real_ns() - a;
    }
    qsort(t, N, sizeof t[0], cmp_double);
    return t[N / 2];
}

/* Median ns of a tick in which exactly one of n pending deadline timers fires.
   The client is partitioned from the start, so its requests stay pending with
   their deadlines and only the core's timer heap is measured. The clock only
   goes forward (a step back loses every hold): the n far timers stay far. */
static double due_timer_ns(simba_mem_server *srv, int n) {
    enum { ROUNDS = 301 };
    static double t[ROUNDS];
    simba_mem_faults f;
    simba_desc sd;
    simba *s;
    simba_lock_desc d;
    int i;
    memset(&f, 0, sizeof f);
    f.partitioned = 1;
    memset(&sd, 0, sizeof sd);
    sd.backend = simba_mem(srv, &f);
    sd.clock.now_ms = vclock;
    s = simba_create(&sd, NULL);
    memset(&d, 0, sizeof d);
    d.name = "busy";
    for (i = 0; i < n; i++) {
        d.wait_ms = 1000000 + i;              /* far away, all distinct */
        simba_acquire(s, &d);
    }
    drain(s);
    for (i = 0; i < ROUNDS; i++) {
        double a;
        d.wait_ms = 1;                        /* due at the next millisecond */
        simba_acquire(s, &d);
        drain(s);
        vnow += 1;
        a = real_ns();
        simba_tick(s, NULL, 0, evbuf, 16);    /* fires it: TIMEOUT */
        t[i] = real_ns() - a;
        drain(s);
    }
    qsort(t, ROUNDS, sizeof t[0], cmp_double);
    simba_destroy(s);
    return t[ROUNDS / 2];
}

int main(void) {
    enum { LOCKS = 100000 };
    simba_mem_desc md;
    simba_mem_server *srv;
    simba *s;
    simba_lock_desc d;
    size_t before, name_bytes = 0;
    uint64_t ops0, ka0;
    double rtt, idle, t1k, t10k, t100k, a;
    int i, held = 0;
    char name[32];

    memset(&md, 0, sizeof md);
    md.clock.now_ms = vclock;
    srv = simba_mem_server_create(&md);

    /* the unit: one KEEPALIVE through the mem backend and back */
    s = client(srv, 0);
    drain(s); drain(s);
    a = real_ns();
    for (i = 0; i < 100000; i++) {
        s->session.next_keepalive = 0;
        simba__session_tick(s, vnow);
        s->backend.vt->process(s->backend.impl, NULL, 0);
    }
    rtt = (real_ns() - a) / 100000;
    simba_destroy(s);

    s = client(srv, 1);
    drain(s); drain(s);
    before = live_bytes;
    memset(&d, 0, sizeof d);
    for (i = 0; i < LOCKS; i++) {
        snprintf(name, sizeof name, "lock-%06d", i);
        name_bytes += strlen(name) + 1;
        d.name = name;
        d.wait_ms = -1;
        simba_acquire(s, &d);
    }
    for (i = 0; i < 10; i++) drain(s);
    for (i = 0; i < LOCKS; i++) {
        simba_lock h;
        h.id = (uint32_t)i + 1;
        h.gen = s->locks[i].gen ^ s->salt;
        if (simba_valid_ms(s, h) > 0) held++;
    }
    idle = idle_tick_ns(s);

    /* one renewal period of virtual time, in 10 ms steps */
    ops0 = simba_mem_server_stats(srv).ops;
    ka0 = simba_mem_server_stats(srv).keepalives;
    for (i = 0; i < 1000; i++) { vnow += 10; drain(s); }

    printf("simba bench-mem: one client, %d locks held (%d confirmed)\n", LOCKS, held);
    printf("  mem round trip (KEEPALIVE submit+answer)   %8.0f ns   (the unit)\n", rtt);
    printf("  bytes per held lock, beyond its name       %8.1f     (target <= 256)\n",
           (double)(live_bytes - before - name_bytes) / LOCKS);
    printf("  simba_tick, nothing due, median            %8.0f ns = %.2f x round trip (target <= 1000 ns)\n",
           idle, idle / rtt);
    printf("  backend ops per renewal period (ttl 10 s)  %8llu     (keepalives %llu; O(1), not per lock)\n",
           (unsigned long long)(simba_mem_server_stats(srv).ops - ops0),
           (unsigned long long)(simba_mem_server_stats(srv).keepalives - ka0));
    bench_ticks_print("  tick:", &ticks);
    simba_destroy(s);

    t1k = due_timer_ns(srv, 1000);
    t10k = due_timer_ns(srv, 10000);
    t100k = due_timer_ns(srv, 100000);
    printf("  tick with one due timer, median: 1k pending %6.0f ns, 10k %6.0f ns, 100k %6.0f ns\n", t1k, t10k, t100k);
    printf("    = %.2f / %.2f / %.2f x round trip; 100k vs 1k: %.2f x (O(log n) keeps this small)\n",
           t1k / rtt, t10k / rtt, t100k / rtt, t100k / t1k);
    simba_mem_server_destroy(srv);
    return 0;
}
