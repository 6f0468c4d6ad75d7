/* conformance.h -- the backend conformance suite: written once against the
   public API, run by every backend's test program (test_mem, test_redis,
   test_mysql, test_zk). A backend plugs in by filling a conf_backend. */
#ifndef SIMBA_CONFORMANCE_H
#define SIMBA_CONFORMANCE_H
#include "simba.h"

typedef struct conf_backend {
    const char *name;                       /* "mem", "redis", ... */
    /* A backend for one new client. Called once per client of each test. */
    simba_backend (*make)(void *user);
    void *user;
    int ttl_ms;                             /* short leases for the lease tests (e.g. 1500) */
    int transition_ms;                      /* e.g. 1000 */
    /* Optional: cut client s's connection from the server side (NULL: skip those checks). */
    int (*kill)(void *user, simba *s);
    /* Optional: called between tests (e.g. to clean up); may be NULL. */
    void (*between)(void *user);
    /* Optional: a hash tag put before every name of the multi-resource tests
       (Redis Cluster: one request's names must share a slot); NULL: none. */
    const char *multi_tag;
    /* The simba_holder times the backend does not report (always -1):
       CONF_TIMES_* bits; 0: it reports them all. */
    int unknown_times;
} conf_backend;

enum { CONF_TIMES_EXPIRES = 1, CONF_TIMES_RENEWED = 2, CONF_TIMES_HELD = 4 };

/* Runs every conformance test on the backend (those whose name contains
   filter, if not NULL), printing "ok - name" / "not ok - name" lines, and
   adds its counts to *passed and *failed (pass the caller's h_passed and
   h_failed: conformance.c is its own translation unit). The caller prints
   the summary with harness_summary(). */
void conformance_run(const conf_backend *b, const char *filter, int *passed, int *failed);

/* simba_create, keeping only the code (tests that check the code alone). */
static inline simba *cf_create(const simba_desc *d, int *code) {
    simba_error e;
    simba *s = simba_create(d, &e);
    *code = e.code;
    return s;
}
#endif
