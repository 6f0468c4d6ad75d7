/* libevent_service.c -- a libevent service holds a lock with no adapter code
   of its own: adapters/simba_libevent.h wires simba into the event_base.

   The service's own work is a periodic timer (its "tick" every 100 ms). It
   does that work only while it holds "report-writer"; after 5 ticks it
   releases from the timer callback (a foreign callback: simba is told at
   once, no waiting for a keepalive) and stops when RELEASED arrives.
   In-memory backend here; for Redis change the one line in main(), e.g.
     .backend = simba_redis(&(simba_redis_desc){ .host = "127.0.0.1", .port = 6379 }) */
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include "adapters/simba_libevent.h"
#include <stdio.h>

static simba *s;
static simba_lock job;
static struct event_base *base;
static struct event *work;
static int holding, ticks;

static void on_simba(simba *sc, const simba_event *ev, void *user) {
    (void)sc; (void)user;
    printf("simba: %s\n", simba_event_name(ev->type));
    if (ev->type == SIMBA_EVENT_ACQUIRED) holding = 1;
    if (ev->type == SIMBA_EVENT_LOST) holding = 0;              /* stop writing at once */
    if (ev->type == SIMBA_EVENT_RELEASED) event_base_loopbreak(base);
}

static void on_work(evutil_socket_t fd, short what, void *arg) {
    (void)fd; (void)what; (void)arg;
    if (!holding) return;                                       /* other work goes on */
    printf("working (fence-protected write #%d)\n", ++ticks);
    if (ticks == 5) { holding = 0; simba_release(s, job); }     /* from our own callback */
}

int main(void) {
    simba_mem_server *srv = simba_mem_server_create(NULL);
    struct timeval every = { 0, 100000 };
    base = event_base_new();
    s = simba_create(&(simba_desc){ .backend = simba_mem(srv, NULL) }, NULL);
    if (!base || !s || !simba_libevent_attach(s, base, on_simba, NULL)) return 1;
    job = simba_acquire(s, &(simba_lock_desc){ .name = "report-writer", .wait_ms = -1 });
    work = event_new(base, -1, EV_PERSIST, on_work, NULL);
    event_add(work, &every);
    event_base_dispatch(base);
    event_free(work);
    simba_destroy(s);                 /* frees the adapter too */
    event_base_free(base);
    simba_mem_server_destroy(srv);
    return ticks == 5 ? 0 : 1;
}
