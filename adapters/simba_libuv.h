/* adapters/simba_libuv.h -- simba on a libuv loop, push mode.

       #include "simba.h"
       #include "adapters/simba_libuv.h"

       simba_libuv_attach(s, uv_default_loop(), on_event, user);
       uv_run(uv_default_loop(), UV_RUN_DEFAULT);   // simba runs with your handles

   One uv_poll_t per simba fd and one uv_timer_t; simba tells the adapter
   what changed, so no fd-set diffing (and libuv's rule "one poll handle per
   fd" holds across reconnects: the old handle is stopped before the new one
   starts). on_event gets every simba event; it may call simba on the same
   instance (release, acquire, even simba_destroy). The adapter is freed by
   simba_destroy(s) or simba_set_loop(s, NULL); its handles close
   asynchronously, so run the loop once more before uv_loop_close().
   Link with -luv. Not thread-safe: one loop thread, like simba itself. */
#ifndef SIMBA_LIBUV_H
#define SIMBA_LIBUV_H

#include "../simba.h"    /* installed: $(PREFIX)/include/simba_adapters/ next to simba.h */
#include <uv.h>
#include <stdlib.h>
#include <string.h>

typedef void (*simba_libuv_cb)(simba *s, const simba_event *ev, void *user);

typedef struct simba_libuv simba_libuv;
typedef struct simba__libuv_fd {
    uv_poll_t poll;             /* first: the handle's data points back here */
    simba_libuv *a;
    int fd, mask;
} simba__libuv_fd;

struct simba_libuv {
    uv_timer_t timer;
    simba *s;
    uv_loop_t *loop;
    simba_libuv_cb cb;
    void *user;
    int depth, dead;
    simba__libuv_fd *fds[16];
    int nfds;
    unsigned long wakeups, timer_fires;
};

static inline void simba__libuv_free_handle(uv_handle_t *h) { free(h->data); }

static inline void simba__libuv_close(simba_libuv *a) {
    int i;
    for (i = 0; i < a->nfds; i++) {
        uv_poll_stop(&a->fds[i]->poll);
        uv_close((uv_handle_t *)&a->fds[i]->poll, simba__libuv_free_handle);
    }
    a->nfds = 0;
    uv_timer_stop(&a->timer);
    uv_close((uv_handle_t *)&a->timer, simba__libuv_free_handle);   /* frees a */
}

static inline void simba__libuv_deliver(simba_libuv *a, int fd, int what) {
    simba_event ev[32];
    int n, i;
    a->depth++;
    a->wakeups++;
    n = simba_socket_action(a->s, fd, what, ev, 32);
    for (i = 0; i < n && !a->dead; i++) if (a->cb) a->cb(a->s, &ev[i], a->user);
    if (--a->depth == 0 && a->dead) simba__libuv_close(a);
}

static inline void simba__libuv_on_poll(uv_poll_t *h, int status, int events) {
    simba__libuv_fd *f = (simba__libuv_fd *)h->data;
    int what = ((events & UV_READABLE) ? SIMBA_POLL_IN : 0) | ((events & UV_WRITABLE) ? SIMBA_POLL_OUT : 0);
    if (status < 0) what = SIMBA_POLL_ERR | SIMBA_POLL_IN;   /* the read finds the error */
    simba__libuv_deliver(f->a, f->fd, what);
}

static inline void simba__libuv_on_timer(uv_timer_t *t) {
    simba_libuv *a = (simba_libuv *)t->data;
    a->timer_fires++;
    simba__libuv_deliver(a, SIMBA_TIMEOUT, 0);
}

static inline int simba__libuv_socket(void *user, int fd, int what) {
    simba_libuv *a = (simba_libuv *)user;
    simba__libuv_fd *f;
    int i, ev = ((what & SIMBA_POLL_IN) ? UV_READABLE : 0) | ((what & SIMBA_POLL_OUT) ? UV_WRITABLE : 0);
    for (i = 0; i < a->nfds && a->fds[i]->fd != fd; i++) {}
    if (i < a->nfds) {
        f = a->fds[i];
        if (!(what & SIMBA_POLL_REMOVE)) {
            f->mask = what;
            return uv_poll_start(&f->poll, ev, simba__libuv_on_poll) == 0 ? 0 : -1;
        }
        uv_poll_stop(&f->poll);
        uv_close((uv_handle_t *)&f->poll, simba__libuv_free_handle);
        a->fds[i] = a->fds[--a->nfds];
        return 0;
    }
    if (what & SIMBA_POLL_REMOVE) return 0;
    if (a->nfds == 16 || !(f = (simba__libuv_fd *)calloc(1, sizeof *f))) return -1;
    f->a = a;
    f->fd = fd;
    f->mask = what;
    if (uv_poll_init(a->loop, &f->poll, fd) != 0) { free(f); return -1; }
    f->poll.data = f;
    a->fds[a->nfds++] = f;
    if (uv_poll_start(&f->poll, ev, simba__libuv_on_poll) != 0) return -1;
    return 0;
}

static inline void simba__libuv_timer(void *user, int ms) {
    simba_libuv *a = (simba_libuv *)user;
    uv_timer_stop(&a->timer);
    if (ms >= 0) uv_timer_start(&a->timer, simba__libuv_on_timer, (uint64_t)ms, 0);
}

static inline void simba__libuv_detach(void *user) {
    simba_libuv *a = (simba_libuv *)user;
    a->dead = 1;
    if (!a->depth) simba__libuv_close(a);
}

/* simba_libuv_attach: from now on simba runs on loop. NULL on failure
   (simba left in pull mode). */
static inline simba_libuv *simba_libuv_attach(simba *s, uv_loop_t *loop, simba_libuv_cb cb, void *user) {
    simba_libuv *a = (simba_libuv *)calloc(1, sizeof *a);
    simba_loop hooks;
    if (!a) return NULL;
    a->s = s; a->loop = loop; a->cb = cb; a->user = user;
    if (uv_timer_init(loop, &a->timer) != 0) { free(a); return NULL; }
    a->timer.data = a;
    memset(&hooks, 0, sizeof hooks);
    hooks.socket = simba__libuv_socket;
    hooks.timer = simba__libuv_timer;
    hooks.detach = simba__libuv_detach;
    hooks.user = a;
    if (simba_set_loop(s, &hooks) != SIMBA_OK) { simba__libuv_close(a); return NULL; }
    return a;
}

/* simba_libuv_watched: the fds the adapter watches for simba now (tests). */
static inline int simba_libuv_watched(const simba_libuv *a, int *fds, int max) {
    int i;
    for (i = 0; i < a->nfds && i < max; i++) fds[i] = a->fds[i]->fd;
    return a->nfds;
}

#endif /* SIMBA_LIBUV_H */
