/* epoll_loop.c -- simba inside an existing epoll loop (Linux).

   The loop watches fds of its own (a timerfd pacing the work, an eventfd the
   code writes to when the loop should stop) and simba's, in one epoll set.
   simba's fds can change between calls (a reconnect opens a new socket), so
   each iteration re-syncs them with epoll_ctl, waits simba_timeout_ms(), then
   calls simba_tick(s, NULL, 0, ...): NULL = "try every fd", the epoll mode.

   A read/write lock on "catalog" for up to 4 readers: reader-1 and reader-2
   share it; writer (.exclusive = 1) waits for them; reader-3 then queues
   behind the writer although read slots are free (FIFO: writers never
   starve). Four clients on the in-memory backend; for a real backend change
   the line in start_client(). Exit 0 if order and exclusion held, else 1. */
/* Before the first #include: with -std=c99 the system headers declare only ISO C
   (no CLOCK_MONOTONIC, itimerspec...). _POSIX_C_SOURCE 200809L would do too. */
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { R1, R2, W, R3, CLIENTS, READERS_MAX = 4, GIVE_UP_MS = 15000, MAX_WATCH = 32 };

typedef struct client { const char *name; simba *s; simba_lock lock; } client;
static client clients[CLIENTS] = { { "reader-1", NULL, {0, 0} }, { "reader-2", NULL, {0, 0} },
                                   { "writer", NULL, {0, 0} }, { "reader-3", NULL, {0, 0} } };
static simba_mem_server *server;
static int timer_fd = -1, stop_fd = -1, step, grants, failed;
static int watched[MAX_WATCH], nwatched;     /* simba's fds now in the epoll set */
static struct timespec started;

static long elapsed_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)(t.tv_sec - started.tv_sec) * 1000 + (t.tv_nsec - started.tv_nsec) / 1000000;
}

static void say(const char *fmt, ...) {      /* printf, with the time since the start */
    va_list ap;
    printf("[%4.2f s] ", (double)elapsed_ms() / 1000.0);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

static simba *start_client(const char *name) {
    /* The one line to change for a real backend, e.g.
         .backend = simba_redis(&(simba_redis_desc){ .host = "127.0.0.1", .port = 6379 }),
         .backend = simba_mysql(&(simba_mysql_desc){ .host = "127.0.0.1", .database = "app" }),
         .backend = simba_zk(&(simba_zk_desc){ .hosts = "127.0.0.1:2181" }),  */
    return simba_create(&(simba_desc){ .backend = simba_mem(server, NULL), .client_id = name }, NULL);
}

static void acquire(client *c, int exclusive) {
    say("%s asks for the lock%s\n", c->name, exclusive ? " (exclusive)" : "");
    c->lock = simba_acquire(c->s, &(simba_lock_desc){ .name = "catalog", .capacity = READERS_MAX,
                                                      .exclusive = exclusive, .wait_ms = 10000, .user = c });
    if (c->lock.id == 0) { say("  FAIL: %s\n", simba_strerror(simba_last_error(c->s))); failed = 1; }
}

static void release(client *c) {
    say("%s is done and releases\n", c->name);
    simba_release(c->s, c->lock);
}

static void arm_timer(int ms) {              /* one-shot */
    struct itimerspec t = { { 0, 0 }, { ms / 1000, (long)(ms % 1000) * 1000000L } };
    timerfd_settime(timer_fd, 0, &t, NULL);
}

/* The application's own timer drives the script, one step per expiry. */
static void on_timer(void) {
    switch (step++) {
    case 0:                   /* the writer has queued by now: reader-3 must wait behind it */
        acquire(&clients[R3], 0);
        say("  (2 of %d read slots are free, but the writer is first in line)\n", READERS_MAX);
        arm_timer(300);
        break;
    case 1: release(&clients[R1]); release(&clients[R2]); break;
    case 2: release(&clients[W]); break;
    default: release(&clients[R3]); break;
    }
}

static void on_event(client *c, const simba_event *ev) {
    uint64_t one = 1;
    switch (ev->type) {
    case SIMBA_EVENT_ACQUIRED:
        say("%s got it (fence %lld)\n", c->name, (long long)ev->fence);
        grants++;
        if ((c == &clients[W] && grants != 3) || (c == &clients[R3] && grants != 4)) {
            say("  FAIL: %s should not be grant number %d\n", c->name, grants);
            failed = 1;
        }
        if (grants == 2) { acquire(&clients[W], 1); arm_timer(200); }  /* both readers in */
        if (c == &clients[W] || c == &clients[R3]) arm_timer(300);     /* work, then release */
        break;
    case SIMBA_EVENT_RELEASED:
        say("%s's release is confirmed\n", c->name);
        if (c == &clients[R3] && write(stop_fd, &one, sizeof one) != sizeof one) failed = 1;
        break;
    case SIMBA_EVENT_LOST: case SIMBA_EVENT_TIMEOUT: case SIMBA_EVENT_ERROR:
        say("  FAIL: %s: unexpected %s (%d)\n", c->name, simba_event_name(ev->type), ev->error);
        failed = 1;
        break;
    default: break;           /* CONNECTED, DISCONNECTED: simba reconnects by itself */
    }
}

static int epoll_set(int ep, int op, int fd, uint32_t events) {
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = events;
    e.data.fd = fd;
    return epoll_ctl(ep, op, fd, &e);
}

/* Put simba's current fds into the epoll set. Every fd gets a MOD each time,
   not only when its events changed: if simba closed an fd and a new socket
   got the same number, close() silently dropped it from the set, and MOD
   then fails with ENOENT, which tells us to ADD it again. */
static void sync_epoll(int ep) {
    int now[MAX_WATCH], nnow = 0, c, i, j;
    for (c = 0; c < CLIENTS; c++) {
        struct pollfd fds[8];
        int n = simba_pollfds(clients[c].s, fds, 8);
        for (i = 0; i < n && i < 8 && nnow < MAX_WATCH; i++) {
            uint32_t want = (uint16_t)fds[i].events;   /* EPOLLIN/OUT/PRI == POLLIN/OUT/PRI on Linux */
            if (epoll_set(ep, EPOLL_CTL_MOD, fds[i].fd, want) != 0 && errno == ENOENT)
                epoll_set(ep, EPOLL_CTL_ADD, fds[i].fd, want);
            now[nnow++] = fds[i].fd;
        }
    }
    for (j = 0; j < nwatched; j++) {         /* the fds simba no longer wants */
        for (i = 0; i < nnow && now[i] != watched[j]; i++) {}
        if (i == nnow) epoll_ctl(ep, EPOLL_CTL_DEL, watched[j], NULL);  /* fails if closed: fine */
    }
    memcpy(watched, now, sizeof(int) * (size_t)nnow);
    nwatched = nnow;
}

/* The exclusion, checked after every tick: a writer alone, or at most 4 readers. */
static void check(void) {
    int c, readers = 0, writer = simba_valid_ms(clients[W].s, clients[W].lock) > 0;
    for (c = 0; c < CLIENTS; c++) if (c != W) readers += simba_valid_ms(clients[c].s, clients[c].lock) > 0;
    if ((writer && readers) || readers > READERS_MAX) {
        say("  FAIL: %d readers and %d writer hold it at once\n", readers, writer);
        failed = 1;
    }
}

static void run(int ep) {
    int stop = 0, c, i, k;
    while (!stop && !failed) {
        struct epoll_event ready[16];
        int timeout = 1000, n;                 /* at least once a second: the GIVE_UP_MS check */
        sync_epoll(ep);
        for (c = 0; c < CLIENTS; c++) {
            int tc = simba_timeout_ms(clients[c].s);
            if (tc >= 0 && tc < timeout) timeout = tc;
        }
        n = epoll_wait(ep, ready, 16, timeout);
        for (i = 0; i < n; i++) {              /* our own fds; simba finds its own in the tick */
            uint64_t count;
            int fd = ready[i].data.fd;
            if (fd == timer_fd && read(fd, &count, sizeof count) == sizeof count) on_timer();
            if (fd == stop_fd && read(fd, &count, sizeof count) == sizeof count) stop = 1;
        }
        for (c = 0; c < CLIENTS; c++) {
            simba_event ev[16];
            int m = simba_tick(clients[c].s, NULL, 0, ev, 16);
            for (k = 0; k < m; k++) on_event(&clients[c], &ev[k]);
        }
        check();
        if (elapsed_ms() > GIVE_UP_MS) { say("  FAIL: not done after %d ms\n", GIVE_UP_MS); failed = 1; }
    }
}

int main(void) {
    int ep = epoll_create1(EPOLL_CLOEXEC), c;
    clock_gettime(CLOCK_MONOTONIC, &started);
    timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    server = simba_mem_server_create(NULL);
    /* a failed epoll_create1/timerfd_create/eventfd gave -1: epoll_ctl then fails too */
    failed = !server || epoll_set(ep, EPOLL_CTL_ADD, timer_fd, EPOLLIN) != 0 ||
             epoll_set(ep, EPOLL_CTL_ADD, stop_fd, EPOLLIN) != 0;
    for (c = 0; c < CLIENTS && !failed; c++) failed = !(clients[c].s = start_client(clients[c].name));
    if (failed) say("FAIL: cannot set up the loop\n");
    else { acquire(&clients[R1], 0); acquire(&clients[R2], 0); run(ep); }
    for (c = 0; c < CLIENTS; c++) simba_destroy(clients[c].s);
    simba_mem_server_destroy(server);
    close(ep);                                 /* -1 if it failed: close() then just says EBADF */
    close(timer_fd);
    close(stop_fd);
    say(failed ? "FAILED\n" : "ok: readers shared, the writer waited for both, reader-3 for the writer\n");
    return failed;
}
