/* bench_util.h -- what every benchmark program shares: a monotonic clock in
   microseconds (system-wide, so comparable across forked processes),
   percentiles, integer settings from the environment, and the longest
   simba_tick with the CPU time spent in it (bench_ticks; with simba.h
   included before, bench_tick and bench_wait time a bench's ticks). */
#ifndef SIMBA_BENCH_UTIL_H
#define SIMBA_BENCH_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#ifdef __GNUC__
#define BENCH_UNUSED __attribute__((unused))
#else
#define BENCH_UNUSED
#endif

static BENCH_UNUSED double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static BENCH_UNUSED int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The p-quantile (0..1) of v[0..n), which it sorts. */
static BENCH_UNUSED double pct(double *v, int n, double p) {
    int i;
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    i = (int)(p * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static BENCH_UNUSED int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* ---- the longest simba_tick: wall time, CPU time, sleeps ----

   A tick's wall time alone does not tell a tick that waited on the network
   from one that computed, nor from one whose thread the scheduler took off
   a busy machine's CPU. Around each tick: bench_tick_start(&m), the tick,
   bench_tick_stop(&t, &m, connected) (connected: the client was connected
   before and after the tick). Per tick it takes the thread's CPU time
   (CLOCK_THREAD_CPUTIME_ID) and its voluntary context switches: the thread
   gave up the CPU, i.e. it slept in the kernel on something (a blocking
   call). A tick whose wall time is well above its CPU time with no such
   sleep was runnable but preempted. */
typedef struct {
    double wall_us, cpu_us;             /* the longest tick, the CPU time in it */
    double up_wall_us, up_cpu_us;       /* the same among ticks of a connected client */
    long ticks, slept;                  /* ticks timed; those that slept in the kernel */
} bench_ticks;

typedef struct { double wall_us, cpu_us; long voluntary; } bench_tick_mark;

static BENCH_UNUSED double bench_cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The thread's voluntary context switches so far (the process's where
   the system has no per-thread count: the benches tick on one thread). */
static BENCH_UNUSED long bench_voluntary_switches(void) {
    struct rusage ru;
#ifdef RUSAGE_THREAD
    if (getrusage(RUSAGE_THREAD, &ru) != 0) return 0;
#else
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
#endif
    return ru.ru_nvcsw;
}

static BENCH_UNUSED void bench_tick_start(bench_tick_mark *m) {
    m->voluntary = bench_voluntary_switches();
    m->cpu_us = bench_cpu_us();
    m->wall_us = now_us();
}

static BENCH_UNUSED void bench_tick_stop(bench_ticks *t, const bench_tick_mark *m, int connected) {
    double wall = now_us() - m->wall_us, cpu = bench_cpu_us() - m->cpu_us;
    t->ticks++;
    if (bench_voluntary_switches() != m->voluntary) t->slept++;
    if (wall > t->wall_us) { t->wall_us = wall; t->cpu_us = cpu; }
    if (connected && wall > t->up_wall_us) { t->up_wall_us = wall; t->up_cpu_us = cpu; }
}

/* One line: "<label> longest simba_tick W us (CPU C us); connected W us
   (CPU C us); S of N ticks slept in the kernel". */
static BENCH_UNUSED void bench_ticks_print(const char *label, const bench_ticks *t) {
    printf("%s longest simba_tick %.0f us (CPU %.0f us); of a connected client %.0f us (CPU %.0f us);"
           " %ld of %ld ticks slept in the kernel\n",
           label, t->wall_us, t->cpu_us, t->up_wall_us, t->up_cpu_us, t->slept, t->ticks);
}

#ifdef SIMBA_INCLUDED
#include <poll.h>

/* simba_tick, timed into t: a bench's loop calls this where it would call
   simba_tick. t NULL: not timed (the timing's own system calls, a few per
   tick, stay out of a figure that times the loop as a whole). */
static BENCH_UNUSED int bench_tick(bench_ticks *t, simba *s, const struct pollfd *fds, int nfds, simba_event *out,
                                   int max) {
    int was_up, n;
    bench_tick_mark m;
    if (!t) return simba_tick(s, fds, nfds, out, max);
    was_up = simba_connected(s);
    bench_tick_start(&m);
    n = simba_tick(s, fds, nfds, out, max);
    bench_tick_stop(t, &m, was_up && simba_connected(s));
    return n;
}

/* simba_wait's loop (poll on s's fds, then a tick) with its ticks timed
   into t: returns 1 with lock's next event in *ev, 0 once timeout_ms
   passed (after one tick at least), < 0 when a tick fails. A tick takes
   one event at most, so lock's later events stay queued for the next
   call; an event of another handle is dropped (a bench calls this with
   one handle's events outstanding at a time). */
static BENCH_UNUSED int bench_wait(bench_ticks *t, simba *s, simba_lock lock, int timeout_ms, simba_event *ev) {
    double end = now_us() + timeout_ms * 1000.0;
    for (;;) {
        struct pollfd fds[16];
        int n = simba_pollfds(s, fds, 16), ms = simba_timeout_ms(s), k;
        double left = (end - now_us()) / 1000.0;
        if (n > 16) n = 16;
        if (n < 0) n = 0;
        if (ms < 0 || ms > left) ms = left > 0 ? (int)left + 1 : 0;
        poll(fds, (nfds_t)n, ms);
        k = bench_tick(t, s, n ? fds : NULL, n, ev, 1);
        if (k < 0) return k;
        if (k == 1 && ev->lock.id == lock.id && ev->lock.gen == lock.gen) return 1;
        if (now_us() >= end) return 0;
    }
}
#endif

#endif
