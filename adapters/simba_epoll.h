/* adapters/simba_epoll.h -- simba in a plain epoll loop (Linux), push mode.

       #include "simba.h"
       #include "adapters/simba_epoll.h"

       simba_epoll *a = simba_epoll_attach(s, epfd, on_event, user);
       for (;;) {
           struct epoll_event ev[16];
           int n = epoll_wait(epfd, ev, 16, -1);          // your loop, no timeout needed
           for (int i = 0; i < n; i++)
               if (ev[i].data.ptr == a) simba_epoll_dispatch(a);   // simba's
               else handle_your_own(&ev[i]);
       }

   simba's fds and its timer (a timerfd, and an eventfd for "now") live in an epoll set of the adapter's
   own, which is one fd in your set (registered with data.ptr == the adapter),
   so your fds' epoll_data is never touched and you never see simba's fds.
   on_event gets every simba event; it may call simba on the same instance
   (release, acquire, even simba_destroy). The adapter is freed by
   simba_destroy(s) or simba_set_loop(s, NULL); it leaves epfd as it found it.
   Not thread-safe: one loop thread, like simba itself. */
#ifndef SIMBA_EPOLL_H
#define SIMBA_EPOLL_H

#include "../simba.h"    /* installed: $(PREFIX)/include/simba_adapters/ next to simba.h */
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void (*simba_epoll_cb)(simba *s, const simba_event *ev, void *user);

typedef struct simba_epoll {
    simba *s;
    int epfd;                   /* the caller's set */
    int inner;                  /* ours: simba's fds + the timerfd */
    int tfd;
    int efd;                    /* timer(0): an eventfd is ready at once (a timerfd has timer slack) */
    simba_epoll_cb cb;
    void *user;
    int depth, dead;            /* inside dispatch; detached meanwhile */
    int fds[16], masks[16], nfds;  /* what we watch (for introspection) */
    unsigned long wakeups;      /* dispatches that had something to do */
    unsigned long timer_fires;
} simba_epoll;

static inline void simba__epoll_free(simba_epoll *a) {
    epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->inner, NULL);
    close(a->tfd);
    close(a->efd);
    close(a->inner);
    free(a);
}

static inline int simba__epoll_socket(void *user, int fd, int what) {
    simba_epoll *a = (simba_epoll *)user;
    struct epoll_event ev;
    int i;
    for (i = 0; i < a->nfds && a->fds[i] != fd; i++) {}
    if (what & SIMBA_POLL_REMOVE) {
        /* may fail with EBADF/ENOENT: the fd may already be closed */
        epoll_ctl(a->inner, EPOLL_CTL_DEL, fd, NULL);
        if (i < a->nfds) { a->nfds--; a->fds[i] = a->fds[a->nfds]; a->masks[i] = a->masks[a->nfds]; }
        return 0;
    }
    memset(&ev, 0, sizeof ev);
    ev.events = ((what & SIMBA_POLL_IN) ? EPOLLIN : 0u) | ((what & SIMBA_POLL_OUT) ? EPOLLOUT : 0u);
    ev.data.fd = fd;
    if (epoll_ctl(a->inner, i < a->nfds ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) != 0) {
        int op = errno == ENOENT ? EPOLL_CTL_ADD : errno == EEXIST ? EPOLL_CTL_MOD : -1;
        if (op < 0 || epoll_ctl(a->inner, op, fd, &ev) != 0) return -1;
    }
    if (i == a->nfds) {
        if (a->nfds == 16) { epoll_ctl(a->inner, EPOLL_CTL_DEL, fd, NULL); return -1; }
        a->fds[a->nfds++] = fd;
    }
    a->masks[i] = what;
    return 0;
}

static inline void simba__epoll_timer(void *user, int ms) {
    simba_epoll *a = (simba_epoll *)user;
    struct itimerspec t;
    uint64_t x;
    memset(&t, 0, sizeof t);
    if (read(a->efd, &x, sizeof x) < 0) {}      /* a new timer replaces a pending 0 */
    if (ms > 0) {
        t.it_value.tv_sec = ms / 1000;
        t.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
    }
    timerfd_settime(a->tfd, 0, &t, NULL);       /* all zero disarms */
    x = 1;
    if (ms == 0 && write(a->efd, &x, sizeof x) < 0) {}
}

static inline void simba__epoll_detach(void *user) {
    simba_epoll *a = (simba_epoll *)user;
    a->dead = 1;
    if (!a->depth) simba__epoll_free(a);   /* else the dispatch frees it on its way out */
}

static inline void simba__epoll_deliver(simba_epoll *a, int fd, int what) {
    simba_event ev[32];
    int n = simba_socket_action(a->s, fd, what, ev, 32), i;
    for (i = 0; i < n && !a->dead; i++) if (a->cb) a->cb(a->s, &ev[i], a->user);
}

/* simba_epoll_dispatch: call when your epoll_wait reports data.ptr == a.
   Returns how many simba fds/timers it served. */
static inline int simba_epoll_dispatch(simba_epoll *a) {
    struct epoll_event evs[16];
    int n, i, served = 0;
    a->depth++;
    n = epoll_wait(a->inner, evs, 16, 0);
    for (i = 0; i < n && !a->dead; i++) {
        if (evs[i].data.fd == a->tfd || evs[i].data.fd == a->efd) {
            uint64_t x;
            /* nothing to read: a later action of this batch re-armed it */
            if (read(evs[i].data.fd, &x, sizeof x) != (ssize_t)sizeof x) continue;
            a->timer_fires++;
            simba__epoll_deliver(a, SIMBA_TIMEOUT, 0);
        } else {
            uint32_t e = evs[i].events;
            simba__epoll_deliver(a, evs[i].data.fd, ((e & EPOLLIN) ? SIMBA_POLL_IN : 0) |
                                 ((e & EPOLLOUT) ? SIMBA_POLL_OUT : 0) |
                                 ((e & (EPOLLERR | EPOLLHUP)) ? SIMBA_POLL_ERR : 0));
        }
        served++;
    }
    if (served) a->wakeups++;
    if (--a->depth == 0 && a->dead) simba__epoll_free(a);
    return served;
}

/* simba_epoll_attach: from now on simba's fds and timer live in epfd. NULL on
   failure (errno set, simba left in pull mode). */
static inline simba_epoll *simba_epoll_attach(simba *s, int epfd, simba_epoll_cb cb, void *user) {
    simba_epoll *a = (simba_epoll *)calloc(1, sizeof *a);
    struct epoll_event ev;
    simba_loop loop;
    if (!a) return NULL;
    a->s = s; a->epfd = epfd; a->cb = cb; a->user = user;
    a->inner = epoll_create1(EPOLL_CLOEXEC);
    a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.fd = a->tfd;
    if (a->inner < 0 || a->tfd < 0 || a->efd < 0 || epoll_ctl(a->inner, EPOLL_CTL_ADD, a->tfd, &ev) != 0) goto fail;
    ev.data.fd = a->efd;
    if (epoll_ctl(a->inner, EPOLL_CTL_ADD, a->efd, &ev) != 0) goto fail;
    ev.data.ptr = a;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, a->inner, &ev) != 0) goto fail;
    memset(&loop, 0, sizeof loop);
    loop.socket = simba__epoll_socket;
    loop.timer = simba__epoll_timer;
    loop.detach = simba__epoll_detach;
    loop.user = a;
    if (simba_set_loop(s, &loop) != SIMBA_OK) { epoll_ctl(epfd, EPOLL_CTL_DEL, a->inner, NULL); goto fail; }
    return a;
fail:
    if (a->tfd >= 0) close(a->tfd);
    if (a->efd >= 0) close(a->efd);
    if (a->inner >= 0) close(a->inner);
    free(a);
    return NULL;
}

/* simba_epoll_watched: the fds the adapter watches for simba now (tests). */
static inline int simba_epoll_watched(const simba_epoll *a, int *fds, int max) {
    int i;
    for (i = 0; i < a->nfds && i < max; i++) fds[i] = a->fds[i];
    return a->nfds;
}

#endif /* SIMBA_EPOLL_H */
