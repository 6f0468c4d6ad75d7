/* bench_util.h -- what every benchmark program shares: a monotonic clock in
   microseconds (system-wide, so comparable across forked processes),
   percentiles, and integer settings from the environment. */
#ifndef SIMBA_BENCH_UTIL_H
#define SIMBA_BENCH_UTIL_H
#include <stdlib.h>
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

#endif
