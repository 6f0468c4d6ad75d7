/* harness.h -- the tiny test framework every simba test program shares.

   A test is a function `static void t_name(void)`; run it with RUN(t_name).
   CHECK(cond) fails the test (and returns from it) when cond is false.
   Each program ends with harness_summary(), which prints the line
   "N passed, N failed" and returns the exit code.

   The pump: a test drives several simba clients (one simba each) in one
   process, from one poll() over all their fds, and records every event per
   client. h_expect() pumps until a client has an event of a given type for a
   given handle, or a real-time limit passes. Events are recorded once and
   consumed by h_expect, so "A got ACQUIRED before B" is checkable by order.
*/
#ifndef SIMBA_TEST_HARNESS_H
#define SIMBA_TEST_HARNESS_H

/* Include this first: the tests use POSIX (poll, clock_gettime, getpid). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include "simba.h"

#ifdef __GNUC__
#define H_UNUSED __attribute__((unused))
#else
#define H_UNUSED
#endif

static int h_passed, h_failed, h_current_failed, h_current_skipped;
static const char *h_current;
static const char *h_filter;

#define CHECK(c) do { if (!(c)) { h_fail(__FILE__, __LINE__, #c); return; } } while (0)
#define CHECK_EQ(a, b) do { long long h_a_ = (long long)(a), h_b_ = (long long)(b); \
    if (h_a_ != h_b_) { char h_m_[256]; snprintf(h_m_, sizeof h_m_, "%s == %s (%lld != %lld)", #a, #b, h_a_, h_b_); \
    h_fail(__FILE__, __LINE__, h_m_); return; } } while (0)
#define RUN(fn) h_run(#fn, fn)

static H_UNUSED void h_fail(const char *file, int line, const char *what) {
    printf("  FAIL %s:%d: %s\n", file, line, what);
    fflush(stdout);
    h_current_failed = 1;
}

/* The running test cannot run here (what it needs is missing): it says why
   and counts as neither passed nor failed. Return right after. */
static H_UNUSED void h_skip(const char *why) {
    printf("  # skipped, not counted: %s\n", why);
    h_current_skipped = 1;
}

static H_UNUSED void h_run(const char *name, void (*fn)(void)) {
    if (h_filter && !strstr(name, h_filter)) return;
    h_current = name;
    h_current_failed = h_current_skipped = 0;
    fn();
    if (h_current_failed) { h_failed++; printf("not ok - %s\n", name); }
    else if (h_current_skipped) printf("skip - %s\n", name);
    else { h_passed++; printf("ok - %s\n", name); }
    fflush(stdout);
}

static H_UNUSED int harness_summary(void) {
    printf("%d passed, %d failed\n", h_passed, h_failed);
    fflush(stdout);
    return h_failed ? 1 : 0;
}

/* ---- the backends a test program made ----
   A backend test finds the backend of a simba client again (white-box: its
   kill hook, its stats) in h_made: give the backend h_track_alloc and
   h_track_free as its allocator and pass what its constructor returns to
   h_track. A freed impl is forgotten as it is freed. */

enum { H_MAX_BACKENDS = 256 };
static H_UNUSED simba_backend h_made[H_MAX_BACKENDS];
static H_UNUSED int h_nmade;

static H_UNUSED void *h_track_alloc(size_t n, void *user) { (void)user; return malloc(n); }
static H_UNUSED void h_track_free(void *p, void *user) {
    int i;
    (void)user;
    for (i = 0; i < h_nmade; i++) if (h_made[i].impl == p) { h_made[i] = h_made[--h_nmade]; break; }
    free(p);
}
static H_UNUSED simba_backend h_track(simba_backend b) {
    if (b.vt && h_nmade < H_MAX_BACKENDS) h_made[h_nmade++] = b;
    return b;
}

/* ---- the pump ---- */

enum { H_MAX_CLIENTS = 32, H_LOG = 4096 };

typedef struct h_client {
    simba *s;
    simba_event log[H_LOG];
    int consumed[H_LOG];
    int nlog;
    int paused;                 /* a paused client is not ticked (a stopped process) */
} h_client;

static H_UNUSED int64_t h_real_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static H_UNUSED void h_record(h_client *c, const simba_event *ev, int n) {
    int i;
    for (i = 0; i < n; i++) {
        if (c->nlog < H_LOG) { c->log[c->nlog] = ev[i]; c->consumed[c->nlog] = 0; c->nlog++; }
    }
}

/* One round: poll all unpaused clients' fds for at most max_ms, then tick each. */
static H_UNUSED void h_pump(h_client **cl, int n, int max_ms) {
    struct pollfd fds[H_MAX_CLIENTS * 8];
    int start[H_MAX_CLIENTS], count[H_MAX_CLIENTS];
    int nf = 0, i, timeout = max_ms;
    for (i = 0; i < n; i++) {
        int t, k;
        start[i] = nf; count[i] = 0;
        if (!cl[i] || !cl[i]->s || cl[i]->paused) continue;
        k = simba_pollfds(cl[i]->s, fds + nf, 8);
        if (k > 8) k = 8;
        if (k < 0) k = 0;
        count[i] = k; nf += k;
        t = simba_timeout_ms(cl[i]->s);
        if (t >= 0 && t < timeout) timeout = t;
    }
    if (timeout > 0 || nf > 0) poll(fds, (nfds_t)nf, timeout);
    for (i = 0; i < n; i++) {
        simba_event ev[64];
        int k;
        if (!cl[i] || !cl[i]->s || cl[i]->paused) continue;
        do {
            k = simba_tick(cl[i]->s, fds + start[i], count[i], ev, 64);
            if (k > 0) h_record(cl[i], ev, k);
        } while (k == 64);
    }
}

/* Pump for ms milliseconds of real time. */
static H_UNUSED void h_run_for(h_client **cl, int n, int ms) {
    int64_t end = h_real_ms() + ms;
    int64_t now;
    while ((now = h_real_ms()) < end) h_pump(cl, n, (int)(end - now));
}

/* Find (and consume) the first unconsumed event of `type` for `lock` in c's log.
   lock.gen == 0 matches any handle. */
static H_UNUSED simba_event *h_take(h_client *c, simba_lock lock, simba_event_type type) {
    int i;
    for (i = 0; i < c->nlog; i++) {
        simba_event *e = &c->log[i];
        if (c->consumed[i] || e->type != type) continue;
        if (lock.gen && (e->lock.id != lock.id || e->lock.gen != lock.gen)) continue;
        c->consumed[i] = 1;
        return e;
    }
    return NULL;
}

/* Pump until client `who` has an event of `type` for `lock`, up to ms. */
static H_UNUSED simba_event *h_expect(h_client **cl, int n, int who, simba_lock lock,
                                      simba_event_type type, int ms) {
    int64_t end = h_real_ms() + ms;
    for (;;) {
        simba_event *e = h_take(cl[who], lock, type);
        int64_t now;
        if (e) return e;
        now = h_real_ms();
        if (now >= end) return NULL;
        h_pump(cl, n, (int)(end - now) > 20 ? 20 : (int)(end - now));
    }
}

/* Prints every event c recorded (consumed or not), to tell why an expected
   one did not come. */
static H_UNUSED void h_print_events(const h_client *c, const char *who) {
    int i;
    for (i = 0; i < c->nlog; i++) {
        const simba_event *e = &c->log[i];
        printf("  # %s event %d: %s lock %u.%u error %d%s%s%s\n", who, i, simba_event_name(e->type),
               (unsigned)e->lock.id, (unsigned)e->lock.gen, e->error, c->consumed[i] ? " (taken)" : "",
               e->message[0] ? ": " : "", e->message);
    }
}

/* Is there an unconsumed event of `type` for `lock` (without consuming it)? */
static H_UNUSED int h_has(h_client *c, simba_lock lock, simba_event_type type) {
    int i;
    for (i = 0; i < c->nlog; i++) {
        simba_event *e = &c->log[i];
        if (c->consumed[i] || e->type != type) continue;
        if (lock.gen && (e->lock.id != lock.id || e->lock.gen != lock.gen)) continue;
        return 1;
    }
    return 0;
}

/* A silent holder against a newcomer: pumps only b until its request lb is
   granted (at most ms). Returns -1 when it was not, 1 when the silent
   client a still believed it held la at that moment (two holders), 0 when
   not; says how long after `since` (named by `after`) the grant came. */
static H_UNUSED int h_grant_beside_silent(h_client *b, simba_lock lb, simba *a, simba_lock la, int ms, int64_t since,
                                         const char *after) {
    h_client *cl[1];
    int64_t end = h_real_ms() + ms;
    cl[0] = b;
    while (h_real_ms() < end) {
        h_pump(cl, 1, 20);
        if (h_has(b, lb, SIMBA_EVENT_ACQUIRED)) {
            int64_t left = simba_valid_ms(a, la);
            printf("  # B granted %lld ms after %s; A believed for %lld ms more\n", (long long)(h_real_ms() - since),
                   after, (long long)(left > 0 ? left : 0));
            return left > 0;
        }
    }
    return -1;
}

/* Acquire one resource by name: the common case of the tests. */
static H_UNUSED simba_lock h_acquire(simba *s, const char *name, int wait_ms) {
    simba_lock_desc d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.wait_ms = wait_ms;
    return simba_acquire(s, &d);
}

/* The common opening of a contention test: client 0 takes `name` (granted
   within first_ms), then client 1 queues behind it and the pump runs for
   settle_ms so that its request reaches the server. Returns 0 (after
   recording the failure) if client 0 was not granted. */
static H_UNUSED int h_hold_then_queue(h_client **cl, const char *name, int first_ms, int settle_ms,
                                      simba_lock *la, simba_lock *lb) {
    *la = h_acquire(cl[0]->s, name, -1);
    if (!h_expect(cl, 2, 0, *la, SIMBA_EVENT_ACQUIRED, first_ms)) {
        h_fail(__FILE__, __LINE__, "the first client was not granted");
        return 0;
    }
    *lb = h_acquire(cl[1]->s, name, -1);
    h_run_for(cl, 2, settle_ms);
    return 1;
}

/* A tenant unique to this process and test, so tests never see each other's
   resources on a shared server. */
static H_UNUSED const char *h_tenant(void) {
    static char buf[64];
    static unsigned n;
    /* the counter is per translation unit (conformance.c and each test_x.c
       have their own), so the address of this one tells the units apart */
    unsigned unit = (unsigned)(((size_t)&n >> 3) & 0xffffu);
    snprintf(buf, sizeof buf, "t%ld_%x_%u", (long)getpid(), unit, ++n);
    return buf;
}

#endif
