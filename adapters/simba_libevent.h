/* adapters/simba_libevent.h -- simba on a libevent 2 event_base, push mode.

       #include "simba.h"
       #include "adapters/simba_libevent.h"

       simba_libevent_attach(s, base, on_event, user);
       event_base_dispatch(base);        // simba runs with your other events

   One `struct event` per simba fd (EV_PERSIST, re-made when simba changes
   the mask) and one timer event; simba tells the adapter what changed, so no
   fd-set diffing. on_event gets every simba event; it may call simba on the
   same instance (release, acquire, even simba_destroy). The adapter is freed
   by simba_destroy(s) or simba_set_loop(s, NULL). Link with -levent.
   Not thread-safe: one loop thread, like simba itself. */
#ifndef SIMBA_LIBEVENT_H
#define SIMBA_LIBEVENT_H

#include "../simba.h"    /* installed: $(PREFIX)/include/simba_adapters/ next to simba.h */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

typedef void (*simba_libevent_cb)(simba *s, const simba_event *ev, void *user);

typedef struct simba__libevent_fd {
    int fd, mask;
    struct event *ev;
} simba__libevent_fd;

typedef struct simba_libevent {
    simba *s;
    struct event_base *base;
    struct event *timer;
    simba_libevent_cb cb;
    void *user;
    int depth, dead;
    simba__libevent_fd fds[16];
    int nfds;
    unsigned long wakeups, timer_fires;
} simba_libevent;

static inline void simba__libevent_free(simba_libevent *a) {
    int i;
    for (i = 0; i < a->nfds; i++) event_free(a->fds[i].ev);
    if (a->timer) event_free(a->timer);
    free(a);
}

static inline void simba__libevent_deliver(simba_libevent *a, int fd, int what) {
    simba_event ev[32];
    int n, i;
    a->depth++;
    a->wakeups++;
    n = simba_socket_action(a->s, fd, what, ev, 32);
    for (i = 0; i < n && !a->dead; i++) if (a->cb) a->cb(a->s, &ev[i], a->user);
    if (--a->depth == 0 && a->dead) simba__libevent_free(a);
}

static inline void simba__libevent_on_fd(evutil_socket_t fd, short what, void *arg) {
    simba__libevent_deliver((simba_libevent *)arg, (int)fd,
                            ((what & EV_READ) ? SIMBA_POLL_IN : 0) | ((what & EV_WRITE) ? SIMBA_POLL_OUT : 0));
}

static inline void simba__libevent_on_timer(evutil_socket_t fd, short what, void *arg) {
    simba_libevent *a = (simba_libevent *)arg;
    (void)fd; (void)what;
    a->timer_fires++;
    simba__libevent_deliver(a, SIMBA_TIMEOUT, 0);
}

static inline int simba__libevent_socket(void *user, int fd, int what) {
    simba_libevent *a = (simba_libevent *)user;
    struct event *ev;
    int i;
    for (i = 0; i < a->nfds && a->fds[i].fd != fd; i++) {}
    if (i < a->nfds) {
        /* event_free deletes first; after a close libevent ignores EBADF/ENOENT */
        event_free(a->fds[i].ev);
        a->fds[i] = a->fds[--a->nfds];
    }
    if (what & SIMBA_POLL_REMOVE) return 0;
    if (a->nfds == 16) return -1;
    ev = event_new(a->base, fd, (short)(EV_PERSIST | ((what & SIMBA_POLL_IN) ? EV_READ : 0) |
                                        ((what & SIMBA_POLL_OUT) ? EV_WRITE : 0)),
                   simba__libevent_on_fd, a);
    if (!ev) return -1;
    if (event_add(ev, NULL) != 0) { event_free(ev); return -1; }
    a->fds[a->nfds].fd = fd;
    a->fds[a->nfds].mask = what;
    a->fds[a->nfds].ev = ev;
    a->nfds++;
    return 0;
}

static inline void simba__libevent_timer(void *user, int ms) {
    simba_libevent *a = (simba_libevent *)user;
    struct timeval tv;
    evtimer_del(a->timer);
    if (ms < 0) return;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    evtimer_add(a->timer, &tv);
}

static inline void simba__libevent_detach(void *user) {
    simba_libevent *a = (simba_libevent *)user;
    a->dead = 1;
    if (!a->depth) simba__libevent_free(a);
}

/* simba_libevent_attach: from now on simba runs on base. NULL on failure
   (simba left in pull mode). */
static inline simba_libevent *simba_libevent_attach(simba *s, struct event_base *base, simba_libevent_cb cb, void *user) {
    simba_libevent *a = (simba_libevent *)calloc(1, sizeof *a);
    simba_loop loop;
    if (!a) return NULL;
    a->s = s; a->base = base; a->cb = cb; a->user = user;
    a->timer = evtimer_new(base, simba__libevent_on_timer, a);
    if (!a->timer) { free(a); return NULL; }
    memset(&loop, 0, sizeof loop);
    loop.socket = simba__libevent_socket;
    loop.timer = simba__libevent_timer;
    loop.detach = simba__libevent_detach;
    loop.user = a;
    if (simba_set_loop(s, &loop) != SIMBA_OK) { simba__libevent_free(a); return NULL; }
    return a;
}

/* simba_libevent_watched: the fds the adapter watches for simba now (tests). */
static inline int simba_libevent_watched(const simba_libevent *a, int *fds, int max) {
    int i;
    for (i = 0; i < a->nfds && i < max; i++) fds[i] = a->fds[i].fd;
    return a->nfds;
}

#endif /* SIMBA_LIBEVENT_H */
