/* test_loop.c -- push mode (simba_loop hooks) through the three adapters
   (epoll, libevent, libuv), against one backend chosen at build time:
   -DLOOP_REDIS, -DLOOP_MYSQL, -DLOOP_ZK, or none for the in-memory backend.

   Per adapter: a hand-off whose release comes from an unrelated timer of the
   loop reaches the waiter long before the keepalive/recheck would have
   (ttl 30 s: without the "kick" it waits 10 s); the fds the adapter watches
   equal simba_pollfds() and every one of them is registered in the kernel's
   epoll set with its CURRENT socket (inode), also after the backend's
   connections were killed (Redis CLIENT KILL, MySQL KILL, ZooKeeper restart);
   an idle hold wakes the loop for keepalives only; a LOST from the clock
   alone arrives on time while the server is gone and the loop is idle;
   simba_destroy from inside the event callback leaves the loop and another
   client on it working (run it under ASan); and (in-memory build, a fake
   backend) a socket replaced under the same fd number inside simba's call
   is watched, the old registration gone. */
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#include "harness.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#if defined(LOOP_REDIS)
#define SIMBA_REDIS_IMPLEMENTATION
#include "simba_redis.h"
#elif defined(LOOP_MYSQL)
#define SIMBA_MYSQL_IMPLEMENTATION
#include "simba_mysql.h"
#elif defined(LOOP_ZK)
#define SIMBA_ZK_IMPLEMENTATION
#include "simba_zk.h"
#endif
#include "adapters/simba_epoll.h"
#include "adapters/simba_libevent.h"
#include "adapters/simba_libuv.h"
#include <dirent.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/stat.h>

/*--- the backend under test ---------------------------------------------------*/
#if !defined(LOOP_REDIS) && !defined(LOOP_MYSQL) && !defined(LOOP_ZK)
static simba_mem_server *mem_srv;
#endif

static char tenant[64];
static H_UNUSED const char *env(const char *k) { const char *v = getenv(k); return v ? v : ""; }

static void log_stderr(void *user, simba_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "[%lld] %d %s\n", (long long)h_real_ms(), (int)level, msg);
}

static simba *new_client_desc(simba_desc *dp) {
    simba_desc d = *dp;
    if (getenv("LOOP_DEBUG")) { d.logger.func = log_stderr; d.logger.level = SIMBA_LOG_DEBUG; }
#if defined(LOOP_REDIS)
    { simba_redis_desc r; memset(&r, 0, sizeof r); r.host = env("SIMBA_REDIS_HOST"); r.port = atoi(env("SIMBA_REDIS_PORT"));
      d.backend = simba_redis(&r); }
#elif defined(LOOP_MYSQL)
    { simba_mysql_desc m; memset(&m, 0, sizeof m); m.host = env("SIMBA_MYSQL_HOST"); m.port = atoi(env("SIMBA_MYSQL_PORT"));
      m.user = env("SIMBA_MYSQL_USER"); m.database = env("SIMBA_MYSQL_DATABASE"); m.create_schema = 1;
      d.backend = simba_mysql(&m); }
#elif defined(LOOP_ZK)
    { simba_zk_desc z; memset(&z, 0, sizeof z); z.hosts = env("SIMBA_ZK_HOSTS"); d.backend = simba_zk(&z); }
#else
    d.backend = simba_mem(mem_srv, NULL);
#endif
    return simba_create(&d, NULL);
}

static simba *new_client(const char *id, int ttl) {
    simba_desc d;
    memset(&d, 0, sizeof d);
    d.client_id = id;
    d.ttl_ms = ttl;
    d.tenant = tenant;           /* one per process: A and B must meet */
    return new_client_desc(&d);
}

/* A fresh (or restarted) Redis server grants nothing for one lease of the
   first client that asks (docs/redis.md "Restart grace"): let a short-lease
   client be that one, so the ttl-30 s clients of the tests do not wait. */
static void warm_up(void) {
    simba_desc d;
    simba *s;
    simba_lock l;
    simba_lock_desc ld;
    simba_event ev;
    memset(&d, 0, sizeof d);
    d.client_id = "loop-warm";
    d.ttl_ms = 1500;
    d.transition_ms = 1000;
    d.tenant = tenant;
    s = new_client_desc(&d);
    if (!s) return;
    memset(&ld, 0, sizeof ld);
    ld.name = "warm-up";
    ld.wait_ms = -1;
    l = simba_acquire(s, &ld);
    while (simba_wait(s, l, 20000, &ev) == 1 && ev.type != SIMBA_EVENT_ACQUIRED) {}
    simba_destroy(s);
}

/* Cut every connection of our clients from the server side. */
static void kill_connections(void) {
    char cmd[512];
#if defined(LOOP_REDIS)
    snprintf(cmd, sizeof cmd, "redis-cli -p %s CLIENT KILL TYPE normal >/dev/null; redis-cli -p %s CLIENT KILL TYPE pubsub >/dev/null",
             env("SIMBA_REDIS_PORT"), env("SIMBA_REDIS_PORT"));
#elif defined(LOOP_MYSQL)
    snprintf(cmd, sizeof cmd, "for id in $(%s sql \"SELECT id FROM information_schema.processlist WHERE id <> CONNECTION_ID() "
             "AND command <> 'Daemon' AND user = '%s'\"); do %s sql \"KILL $id\" 2>/dev/null; done",
             env("SIMBA_MYSQL_CTL"), env("SIMBA_MYSQL_USER"), env("SIMBA_MYSQL_CTL"));
#elif defined(LOOP_ZK)
    snprintf(cmd, sizeof cmd, "%s kill s && %s start s >/dev/null", env("SIMBA_ZK_CTL"), env("SIMBA_ZK_CTL"));
#else
    cmd[0] = 0;
#endif
    if (cmd[0] && system(cmd) != 0) printf("  (kill command failed)\n");
}

/* The server goes away (LOST test); server_back() brings it again. */
static void server_gone(simba *s) {
    char cmd[256];
    (void)s;
#if defined(LOOP_REDIS)
    snprintf(cmd, sizeof cmd, "%s kill", env("SIMBA_REDIS_CTL"));
#elif defined(LOOP_MYSQL)
    snprintf(cmd, sizeof cmd, "%s kill", env("SIMBA_MYSQL_CTL"));
#elif defined(LOOP_ZK)
    snprintf(cmd, sizeof cmd, "%s stop s", env("SIMBA_ZK_CTL"));
#else
    simba_mem_faults f;
    memset(&f, 0, sizeof f);
    f.partitioned = 1;
    simba_mem_set_faults(mem_srv, s, &f);
    cmd[0] = 0;
#endif
    if (cmd[0] && system(cmd) != 0) printf("  (stop command failed)\n");
}

static void server_back(void) {
    char cmd[256];
#if defined(LOOP_REDIS)
    snprintf(cmd, sizeof cmd, "%s start >/dev/null", env("SIMBA_REDIS_CTL"));
#elif defined(LOOP_MYSQL)
    snprintf(cmd, sizeof cmd, "%s start >/dev/null", env("SIMBA_MYSQL_CTL"));
#elif defined(LOOP_ZK)
    snprintf(cmd, sizeof cmd, "%s cont s", env("SIMBA_ZK_CTL"));
#else
    cmd[0] = 0;
#endif
    if (cmd[0] && system(cmd) != 0) printf("  (start command failed)\n");
    warm_up();
}

/*--- the three loops behind one interface -----------------------------------------*/
typedef struct drv {
    const char *name;
    void *(*attach)(simba *s, int who);
    void (*run_once)(int ms);                    /* one turn of the loop, at most ms */
    void (*foreign)(int ms, void (*fn)(void));   /* a one-shot timer of the app itself */
    int (*watched)(void *a, int *fds, int max);
    unsigned long (*wakeups)(void *a);
} drv;

typedef struct rec { int who; simba_event ev; int64_t at; } rec;
static rec recs[4096];
static int nrecs;
static void on_event(simba *s, const simba_event *ev, void *user) {
    (void)s;
    if (getenv("LOOP_DEBUG")) fprintf(stderr, "event %d %s\n", (int)(intptr_t)user, simba_event_name(ev->type));
    if (nrecs < 4096) { recs[nrecs].who = (int)(intptr_t)user; recs[nrecs].ev = *ev; recs[nrecs].at = h_real_ms(); nrecs++; }
}

/* epoll */
static int ep = -1, ep_tfd = -1;
static void (*ep_fn)(void);
static char ep_marker;
static void *ep_attach(simba *s, int who) { return simba_epoll_attach(s, ep, on_event, (void *)(intptr_t)who); }
static void ep_run(int ms) {
    struct epoll_event ev[16];
    int n = epoll_wait(ep, ev, 16, ms), i;
    for (i = 0; i < n; i++) {
        if (ev[i].data.ptr == &ep_marker) {
            uint64_t x;
            if (read(ep_tfd, &x, sizeof x) == (ssize_t)sizeof x && ep_fn) { void (*f)(void) = ep_fn; ep_fn = NULL; f(); }
        } else simba_epoll_dispatch((simba_epoll *)ev[i].data.ptr);
    }
}
static void ep_foreign(int ms, void (*fn)(void)) {
    struct itimerspec t;
    memset(&t, 0, sizeof t);
    t.it_value.tv_sec = ms / 1000;
    t.it_value.tv_nsec = (long)(ms % 1000) * 1000000L + 1;
    ep_fn = fn;
    timerfd_settime(ep_tfd, 0, &t, NULL);
}
static int ep_watched(void *a, int *fds, int max) { return simba_epoll_watched((simba_epoll *)a, fds, max); }
static unsigned long ep_wakeups(void *a) { return ((simba_epoll *)a)->wakeups; }

/* libevent */
static struct event_base *eb;
static void (*eb_fn)(void);
static void eb_fire(evutil_socket_t fd, short w, void *arg) { void (*f)(void) = eb_fn; (void)fd; (void)w; (void)arg; eb_fn = NULL; if (f) f(); }
static void eb_nop(evutil_socket_t fd, short w, void *arg) { (void)fd; (void)w; (void)arg; }
static void *eb_attach(simba *s, int who) { return simba_libevent_attach(s, eb, on_event, (void *)(intptr_t)who); }
static void eb_run(int ms) {
    struct timeval tv;
    tv.tv_sec = ms / 1000; tv.tv_usec = (ms % 1000) * 1000;
    event_base_once(eb, -1, EV_TIMEOUT, eb_nop, NULL, &tv);   /* bounds the turn */
    event_base_loop(eb, EVLOOP_ONCE);
}
static void eb_foreign(int ms, void (*fn)(void)) {
    struct timeval tv;
    tv.tv_sec = ms / 1000; tv.tv_usec = (ms % 1000) * 1000;
    eb_fn = fn;
    event_base_once(eb, -1, EV_TIMEOUT, eb_fire, NULL, &tv);
}
static int eb_watched(void *a, int *fds, int max) { return simba_libevent_watched((simba_libevent *)a, fds, max); }
static unsigned long eb_wakeups(void *a) { return ((simba_libevent *)a)->wakeups; }

/* libuv */
static uv_loop_t uvl;
static uv_timer_t uv_bound, uv_ftimer;
static void (*uv_fn)(void);
static void uv_nop(uv_timer_t *t) { (void)t; }
static void uv_fire(uv_timer_t *t) { void (*f)(void) = uv_fn; (void)t; uv_fn = NULL; if (f) f(); }
static void *uv_attach_(simba *s, int who) { return simba_libuv_attach(s, &uvl, on_event, (void *)(intptr_t)who); }
static void uv_run_(int ms) {
    uv_update_time(&uvl);        /* libuv caches the time; the loop may have slept */
    uv_timer_start(&uv_bound, uv_nop, (uint64_t)ms, 0);
    /* ONCE runs due timers first and then blocks until the next one: with
       ms 0 the bound would be spent before the poll */
    uv_run(&uvl, ms > 0 ? UV_RUN_ONCE : UV_RUN_NOWAIT);
    uv_timer_stop(&uv_bound);
}
static void uv_foreign(int ms, void (*fn)(void)) { uv_fn = fn; uv_timer_start(&uv_ftimer, uv_fire, (uint64_t)ms, 0); }
static int uv_watched_(void *a, int *fds, int max) { return simba_libuv_watched((simba_libuv *)a, fds, max); }
static unsigned long uv_wakeups(void *a) { return ((simba_libuv *)a)->wakeups; }

static const drv drivers[3] = {
    { "epoll", ep_attach, ep_run, ep_foreign, ep_watched, ep_wakeups },
    { "libevent", eb_attach, eb_run, eb_foreign, eb_watched, eb_wakeups },
    { "libuv", uv_attach_, uv_run_, uv_foreign, uv_watched_, uv_wakeups },
};
static const drv *D;

/*--- helpers -----------------------------------------------------------------------*/
static int has_event(int who, simba_event_type t, simba_lock l, int from) {
    int i;
    for (i = from; i < nrecs; i++)
        if (recs[i].who == who && recs[i].ev.type == t && (!l.id || (recs[i].ev.lock.id == l.id && recs[i].ev.lock.gen == l.gen)))
            return i + 1;
    return 0;
}
/* Run the loop until who has event t for l (after record index from), or ms pass. */
static int wait_event(int who, simba_event_type t, simba_lock l, int from, int ms) {
    int64_t end = h_real_ms() + ms;
    int k;
    while (!(k = has_event(who, t, l, from)) && h_real_ms() < end) D->run_once(50);
    return k;
}
static void run_for(int ms) { int64_t end = h_real_ms() + ms; while (h_real_ms() < end) D->run_once((int)(end - h_real_ms())); }

/* Is fd registered in some epoll set of this process with its current socket? */
static int kernel_watches(int fd) {
    struct stat st;
    DIR *d;
    struct dirent *e;
    int found = 0;
    if (fstat(fd, &st) != 0) return 0;
    if (!(d = opendir("/proc/self/fd"))) return 0;
    while (!found && (e = readdir(d))) {
        char path[300], link[64], line[256];
        ssize_t n;
        FILE *f;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        n = readlink(path, link, sizeof link - 1);
        if (n <= 0) continue;
        link[n] = 0;
        if (!strstr(link, "eventpoll")) continue;
        snprintf(path, sizeof path, "/proc/self/fdinfo/%s", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        while (fgets(line, sizeof line, f)) {
            int tfd;
            unsigned long ino;
            const char *p = strstr(line, "ino:");
            if (sscanf(line, "tfd: %d", &tfd) == 1 && tfd == fd && p && sscanf(p, "ino:%lx", &ino) == 1 &&
                ino == (unsigned long)st.st_ino) { found = 1; break; }
        }
        fclose(f);
    }
    closedir(d);
    return found;
}

/* The adapter watches exactly what simba wants, each fd with its current socket. */
static int fds_agree(simba *s, void *a) {
    struct pollfd want[16];
    int have[16], nw, nh, i, j;
    D->run_once(0);              /* libuv registers lazily, in its next turn */
    nw = simba_pollfds(s, want, 16);
    nh = D->watched(a, have, 16);
    if (nw != nh) { printf("  %s: simba wants %d fds, the adapter watches %d\n", D->name, nw, nh); return 0; }
    for (i = 0; i < nw; i++) {
        for (j = 0; j < nh && have[j] != want[i].fd; j++) {}
        if (j == nh) { printf("  fd %d not watched\n", want[i].fd); return 0; }
        if (!kernel_watches(want[i].fd)) { printf("  fd %d: no epoll set watches its current socket\n", want[i].fd); return 0; }
    }
    return 1;
}

static char lname[64];
static const char *resource(const char *what) { snprintf(lname, sizeof lname, "%s-%s-%d", what, D->name, (int)getpid()); return lname; }

static simba *A, *B;
static simba_lock la, lb;
static int64_t released_at;
static void release_a(void) { released_at = h_real_ms(); simba_release(A, la); }

/* A holds, B waits, an app timer releases A: B gets it well before a keepalive. */
static int handoff(void *aa, void *ab, const char *name) {
    int from = nrecs, k;
    simba_lock_desc d;
    (void)aa; (void)ab;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.wait_ms = -1;
    la = simba_acquire(A, &d);
    if (!wait_event(0, SIMBA_EVENT_ACQUIRED, la, from, 15000)) { printf("  A never acquired\n"); return 0; }
    if (getenv("LOOP_DEBUG")) printf("  A acquired at %lld\n", (long long)h_real_ms());
    lb = simba_acquire(B, &d);
    run_for(300);
    if (has_event(1, SIMBA_EVENT_ACQUIRED, lb, from)) { printf("  B acquired while A holds\n"); return 0; }
    D->foreign(50, release_a);
    k = wait_event(1, SIMBA_EVENT_ACQUIRED, lb, from, 15000);
    if (!k) { printf("  B never acquired\n"); return 0; }
    printf("  %s: hand-off %lld ms after the release from an app timer\n", D->name, (long long)(recs[k - 1].at - released_at));
    /* ttl 30 s: keepalive every 10 s, recheck 15 s. Without the kick the
       release sits queued until then. */
    if (recs[k - 1].at - released_at > 5000) { printf("  hand-off waited for a timer\n"); return 0; }
    from = nrecs;
    simba_release(B, lb);
    k = wait_event(1, SIMBA_EVENT_RELEASED, lb, from, 15000);
    if (getenv("LOOP_DEBUG")) printf("  B released at %lld\n", (long long)h_real_ms());
    return k != 0;
}

static void t_handoff_and_reconnect(void) {
    void *aa, *ab;
    int64_t end;
    if (getenv("LOOP_DEBUG")) printf("  start at %lld\n", (long long)h_real_ms());
    A = new_client("loop-a", 30000);
    B = new_client("loop-b", 30000);
    CHECK(A && B);
    aa = D->attach(A, 0);
    ab = D->attach(B, 1);
    CHECK(aa && ab);
    CHECK(handoff(aa, ab, resource("handoff")));
    CHECK(fds_agree(A, aa));
    CHECK(fds_agree(B, ab));
    kill_connections();
    /* until both are back and watched right (reconnects take backoff + handshake) */
    end = h_real_ms() + 30000;
    while (h_real_ms() < end && !(simba_connected(A) && simba_connected(B))) D->run_once(50);
    run_for(500);
    CHECK(simba_connected(A) && simba_connected(B));
    CHECK(fds_agree(A, aa));
    CHECK(fds_agree(B, ab));
    CHECK(handoff(aa, ab, resource("after-kill")));
    CHECK(fds_agree(A, aa));
    simba_destroy(A);            /* frees the adapters (detach hook) */
    simba_destroy(B);
    run_for(100);
}

static void t_idle_is_keepalives_only(void) {
    void *a;
    int from = nrecs;
    unsigned long w0, w;
    simba_lock l;
    simba_lock_desc d;
    A = new_client("loop-idle", 3000);
    CHECK(A);
    a = D->attach(A, 2);
    CHECK(a);
    memset(&d, 0, sizeof d);
    d.name = resource("idle");
    d.wait_ms = -1;
    l = simba_acquire(A, &d);
    CHECK(wait_event(2, SIMBA_EVENT_ACQUIRED, l, from, 15000));
    w0 = D->wakeups(a);
    run_for(3000);
    w = D->wakeups(a) - w0;
    printf("  %s: %lu loop wake-ups for simba in 3 s holding 1 lock (ttl 3000: a keepalive per 1 s); %lu by the timer\n", D->name, w, D == &drivers[0] ? ((simba_epoll *)a)->timer_fires : D == &drivers[1] ? ((simba_libevent *)a)->timer_fires : ((simba_libuv *)a)->timer_fires);
#ifdef LOOP_ZK
    if (getenv("LOOP_DEBUG")) { simba__zk *z = (simba__zk *)A->backend.impl; printf("  zk: done %d wakes %d expired %d auth %d close %d want_up %d up %d fd %d interest %d next_ms-now %lld resetting-now %lld events %d dirty %u full %d\n",
        z->done != NULL, z->wakes != NULL, z->expired, z->auth_failed, z->close_wanted, simba__zk_want_up(z, simba_now_ms(A)), z->up, z->fd, z->interest, (long long)(z->next_ms - simba_now_ms(A)), (long long)(z->resetting_until - simba_now_ms(A)), A->events.count, A->dirty_head, A->backend_full); }
#endif
    if (getenv("LOOP_DEBUG")) { int f[8], k, j = D->watched(a, f, 8); struct pollfd p[8]; k = simba_pollfds(A, p, 8); printf("  watched %d (fd %d) wants %d (fd %d ev %d) timeout %d\n", j, f[0], k, p[0].fd, p[0].events, simba_timeout_ms(A)); }
    CHECK(w <= 20);              /* a busy loop would make thousands */
    CHECK(simba_valid_ms(A, l) > 0);
    simba_destroy(A);
    run_for(50);
}

static void t_lost_from_clock(void) {
    void *a;
    int from = nrecs, k;
    int64_t deadline;
    simba_lock l;
    simba_lock_desc d;
    A = new_client("loop-lost", 1500);
    CHECK(A);
    a = D->attach(A, 3);
    CHECK(a);
    memset(&d, 0, sizeof d);
    d.name = resource("lost");
    d.wait_ms = -1;
    l = simba_acquire(A, &d);
    CHECK(wait_event(3, SIMBA_EVENT_ACQUIRED, l, from, 15000));
    run_for(600);                /* a keepalive or two confirmed */
    server_gone(A);
    /* the local deadline as simba sees it: a keepalive answered just before
       the server went away still moves it, so sample it while it lasts */
    deadline = h_real_ms() + simba_valid_ms(A, l);
    {
        int64_t end = h_real_ms() + 20000;
        while (!(k = has_event(3, SIMBA_EVENT_LOST, l, from)) && h_real_ms() < end) {
            int64_t v = simba_valid_ms(A, l);
            if (v > 0) deadline = h_real_ms() + v;
            D->run_once(50);
        }
    }
    server_back();
    CHECK(k);
    printf("  %s: LOST %lld ms after the local deadline\n", D->name, (long long)(recs[k - 1].at - deadline));
    CHECK(recs[k - 1].at <= deadline + 1000);
    simba_destroy(A);
    run_for(50);
}

#if !defined(LOOP_REDIS) && !defined(LOOP_MYSQL) && !defined(LOOP_ZK)
/* A backend that only owns one socket, so the test decides when it changes. */
static int fake_fd = -1;
static char hook_log[512];
static int fake_attach(void *impl, simba *s) { (void)impl; (void)s; return SIMBA_OK; }
static int fake_submit(void *impl, const simba_op *op) { (void)impl; (void)op; return SIMBA_EDISCONNECTED; }
static int fake_pollfds(void *impl, struct pollfd *fds, int max) {
    (void)impl;
    if (fake_fd < 0) return 0;
    if (max >= 1) { fds[0].fd = fake_fd; fds[0].events = POLLIN; fds[0].revents = 0; }
    return 1;
}
static int64_t fake_deadline(void *impl) { (void)impl; return -1; }
/* fake_seen: the process() calls that found the socket readable (drained).
   fake_next >= 0: the next such call "reconnects": the socket is replaced by
   fake_next under the same fd number, as a client library does inside its
   own read when it reconnects. */
static int fake_seen, fake_next = -1;
static void fake_process(void *impl, const struct pollfd *fds, int nfds) {
    int i;
    char buf[64];
    (void)impl;
    for (i = 0; i < nfds; i++)
        if (fds[i].fd == fake_fd && fake_fd >= 0 && (fds[i].revents & POLLIN)) {
            fake_seen++;
            while (read(fake_fd, buf, sizeof buf) > 0) {}
            if (fake_next >= 0) {
                if (dup2(fake_next, fake_fd) != fake_fd) printf("  dup2 failed\n");
                close(fake_next);
                fake_next = -1;
            }
        }
}
static void fake_reset(void *impl, int why) { (void)impl; (void)why; }
static void fake_destroy(void *impl) { (void)impl; }
static const simba_backend_vtable fake_vt = { "fake", fake_attach, fake_submit, fake_pollfds, fake_deadline,
                                              fake_process, fake_reset, fake_destroy };
static int log_socket(void *user, int fd, int what) {
    size_t n = strlen(hook_log);
    (void)user;
    snprintf(hook_log + n, sizeof hook_log - n, "%s%s(%d)", n ? " " : "",
             (what & SIMBA_POLL_REMOVE) ? "remove" : what == SIMBA_POLL_IN ? "in" : "other", fd == fake_fd ? 1 : 0);
    return 0;
}
static void log_timer(void *user, int ms) {
    size_t n = strlen(hook_log);
    (void)user;
    snprintf(hook_log + n, sizeof hook_log - n, "%stimer(%d)", n ? " " : "", ms);
}
static void log_detach(void *user) {
    size_t n = strlen(hook_log);
    (void)user;
    snprintf(hook_log + n, sizeof hook_log - n, "%sdetach", n ? " " : "");
}

/* The backend's socket is replaced by another one under the SAME fd number
   (dup2: what a reconnect inside a client library looks like): the loop
   must hear REMOVE and then the add, in that order, although the number
   never changed; an unchanged socket costs no hook call. */
static void t_same_number_new_socket_is_remove_then_add(void) {
    simba_desc d;
    simba_backend b;
    simba_event ev[8];
    simba *s;
    int t;
    memset(&d, 0, sizeof d);
    b.vt = &fake_vt;
    b.impl = NULL;
    d.backend = b;
    d.loop.socket = log_socket;
    d.loop.timer = log_timer;
    d.loop.detach = log_detach;
    fake_fd = socket(AF_INET, SOCK_STREAM, 0);
    hook_log[0] = 0;
    s = simba_create(&d, NULL);
    CHECK(s != NULL);
    printf("  create: %s\n", hook_log);
    CHECK(strcmp(hook_log, "in(1)") == 0);
    hook_log[0] = 0;
    simba_tick(s, NULL, 0, ev, 8);
    CHECK(strcmp(hook_log, "") == 0);                /* nothing changed: nothing told */
    t = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(dup2(t, fake_fd) == fake_fd);              /* the old socket is closed, the number reused */
    close(t);
    simba_tick(s, NULL, 0, ev, 8);
    printf("  same number, new socket: %s\n", hook_log);
    CHECK(strcmp(hook_log, "remove(1) in(1)") == 0);
    hook_log[0] = 0;
    simba_destroy(s);
    printf("  destroy: %s\n", hook_log);
    CHECK(strcmp(hook_log, "remove(1) detach") == 0);
    close(fake_fd);
    fake_fd = -1;
}

/* Through each adapter: the backend's socket is replaced under the same fd
   number inside simba's call (a reconnect inside a client library), and the
   adapter must watch the new socket, not keep a registration of the old
   one: readiness of the new socket reaches the backend, and the kernel's
   epoll set holds the current inode. */
static void t_adapter_follows_new_socket(void) {
    simba_desc d;
    simba *s;
    void *a;
    int sp[2], np[2];
    int64_t end;
    memset(&d, 0, sizeof d);
    d.backend.vt = &fake_vt;
    d.backend.impl = NULL;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) == 0);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, np) == 0);
    fake_fd = sp[0];
    fake_seen = 0;
    fake_next = np[0];
    s = simba_create(&d, NULL);
    CHECK(s != NULL);
    a = D->attach(s, 5);
    CHECK(a != NULL);
    CHECK(write(sp[1], "x", 1) == 1);             /* served: the socket is replaced meanwhile */
    for (end = h_real_ms() + 2000; !fake_seen && h_real_ms() < end;) D->run_once(50);
    CHECK(fake_seen > 0 && fake_next < 0);
    close(sp[1]);
    D->run_once(50);
    fake_seen = 0;
    CHECK(write(np[1], "y", 1) == 1);
    for (end = h_real_ms() + 2000; !fake_seen && h_real_ms() < end;) D->run_once(50);
    printf("  %s: the new socket under fd %d was %sserved\n", D->name, fake_fd, fake_seen ? "" : "NOT ");
    CHECK(fake_seen > 0);
    CHECK(fds_agree(s, a));
    simba_destroy(s);
    run_for(50);
    close(np[1]);
    close(fake_fd);
    fake_fd = -1;
}
#endif

/* Through each adapter: simba_destroy from inside the event callback (the
   adapter is freed under its own dispatch), with another client's events
   and the loop's own timers still running afterwards. Meant for ASan. */
static simba *doomed;
static int doomed_gone;
static void destroy_on_acquired(simba *s, const simba_event *ev, void *user) {
    on_event(s, ev, user);
    if (s == doomed && ev->type == SIMBA_EVENT_ACQUIRED) {
        simba_destroy(s);
        doomed = NULL;
        doomed_gone = 1;
    }
}

static void t_destroy_in_callback(void) {
    simba_lock_desc ld;
    simba_lock l;
    void *a = NULL;
    int from = nrecs;
    int64_t end;
    doomed = new_client("loop-doomed", 3000);
    A = new_client("loop-witness", 3000);
    CHECK(doomed && A);
    if (D == &drivers[0]) a = simba_epoll_attach(doomed, ep, destroy_on_acquired, (void *)(intptr_t)6);
    else if (D == &drivers[1]) a = simba_libevent_attach(doomed, eb, destroy_on_acquired, (void *)(intptr_t)6);
    else a = simba_libuv_attach(doomed, &uvl, destroy_on_acquired, (void *)(intptr_t)6);
    CHECK(a != NULL);
    CHECK(D->attach(A, 7) != NULL);
    memset(&ld, 0, sizeof ld);
    ld.name = resource("doomed");
    ld.wait_ms = -1;
    (void)simba_acquire(doomed, &ld);
    ld.name = resource("witness");
    l = simba_acquire(A, &ld);
    for (end = h_real_ms() + 15000; !doomed_gone && h_real_ms() < end;) D->run_once(50);
    CHECK(doomed_gone);
    CHECK(wait_event(7, SIMBA_EVENT_ACQUIRED, l, from, 15000));
    run_for(1500);                                 /* the witness renews on the same loop */
    CHECK(simba_valid_ms(A, l) > 0);
    simba_destroy(A);
    run_for(50);
    doomed_gone = 0;
}

int main(int argc, char **argv) {
    int i;
    if (argc > 1) h_filter = argv[1];
    snprintf(tenant, sizeof tenant, "%s", h_tenant());
#if !defined(LOOP_REDIS) && !defined(LOOP_MYSQL) && !defined(LOOP_ZK)
    mem_srv = simba_mem_server_create(NULL);
#endif
    ep = epoll_create1(EPOLL_CLOEXEC);
    ep_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN;
        ev.data.ptr = &ep_marker;
        epoll_ctl(ep, EPOLL_CTL_ADD, ep_tfd, &ev);
    }
    eb = event_base_new();
    uv_loop_init(&uvl);
    uv_timer_init(&uvl, &uv_bound);
    uv_timer_init(&uvl, &uv_ftimer);
#if !defined(LOOP_REDIS) && !defined(LOOP_MYSQL) && !defined(LOOP_ZK)
    RUN(t_same_number_new_socket_is_remove_then_add);
#endif
    warm_up();
    for (i = 0; i < 3; i++) {
        D = &drivers[i];
        printf("# %s\n", D->name);
        RUN(t_handoff_and_reconnect);
        RUN(t_idle_is_keepalives_only);
        RUN(t_lost_from_clock);
        RUN(t_destroy_in_callback);
#if !defined(LOOP_REDIS) && !defined(LOOP_MYSQL) && !defined(LOOP_ZK)
        RUN(t_adapter_follows_new_socket);
#endif
    }
    uv_close((uv_handle_t *)&uv_bound, NULL);
    uv_close((uv_handle_t *)&uv_ftimer, NULL);
    uv_run(&uvl, UV_RUN_NOWAIT);
    uv_loop_close(&uvl);
    event_base_free(eb);
    close(ep_tfd);
    close(ep);
#if !defined(LOOP_REDIS) && !defined(LOOP_MYSQL) && !defined(LOOP_ZK)
    simba_mem_server_destroy(mem_srv);
#endif
    return harness_summary();
}
