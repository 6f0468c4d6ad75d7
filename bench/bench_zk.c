/* bench_zk.c -- what simba costs on ZooKeeper, as multiples of the raw round
   trips measured in the same run (never a pass/fail on speed).

   Run through tests/servers/zk.sh (`make bench-zk`), which starts a
   standalone server and exports SIMBA_ZK_HOSTS. Prints:
     raw exists() and raw write (setData) round trips,
     uncontended acquire -> ACQUIRED,
     acquire + release cycle (ACQUIRED and RELEASED both confirmed),
     hand-off to a waiter in another process (fork): release -> the
       waiter's ACQUIRED, p50/p99 over the rounds,
     10 contenders on one mutex (10 clients, one process): time per grant,
     the longest simba_tick of this process's clients (the hand-off's
       waiter in the child aside), with the thread's CPU time in it, the
       longest of a connected client, and how many ticks slept in the
       kernel (the caller is never blocked: none should); the waits are
       simba_wait's loop with each tick timed (bench_wait).
   Targets of the design: a cycle costs at most 3 write round trips; a
   hand-off at most 2 exists round trips plus one write. */
#define _POSIX_C_SOURCE 200809L
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_ZK_IMPLEMENTATION
#include "simba_zk.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bench_util.h"

enum { RAW_N = 400, ACQ_N = 200, HANDOFF_N = 150, CONTENDERS = 10, CONTEND_GRANTS = 300 };

static const char *hosts;
static char tenant[64];
static bench_ticks ticks;   /* this process's simba ticks (the hand-off's waiter in the child aside) */

/* ---- raw round trips with a plain handle and our own loop ---- */

static int raw_connected, raw_done, raw_rc;

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)path; (void)ctx;
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) raw_connected = 1;
}
static void raw_silent(const char *m) { (void)m; }
static void raw_stat_done(int rc, const struct Stat *st, const void *d) { (void)st; (void)d; raw_rc = rc; raw_done = 1; }
static void raw_string_done(int rc, const char *v, const void *d) { (void)v; (void)d; raw_rc = rc; raw_done = 1; }

static int raw_loop(zhandle_t *zh, int *flag, int ms) {
    double end = now_us() + ms * 1000.0;
    while (!*flag && now_us() < end) {
        struct pollfd p;
        struct timeval tv;
        int fd = -1, interest = 0;
        zookeeper_interest(zh, &fd, &interest, &tv);
        if (fd < 0) { poll(NULL, 0, 5); continue; }
        p.fd = fd;
        p.events = (short)(((interest & ZOOKEEPER_READ) ? POLLIN : 0) | ((interest & ZOOKEEPER_WRITE) ? POLLOUT : 0));
        p.revents = 0;
        poll(&p, 1, 20);
        zookeeper_process(zh, ((p.revents & (POLLIN | POLLHUP | POLLERR)) ? ZOOKEEPER_READ : 0) |
                              ((p.revents & POLLOUT) ? ZOOKEEPER_WRITE : 0));
    }
    return *flag;
}

static int raw_rtts(double *exists_p50, double *exists_p99, double *write_p50, double *write_p99) {
    static double v[RAW_N];
    zhandle_t *zh = zookeeper_init2(hosts, raw_watcher, 10000, NULL, NULL, 0, raw_silent);
    char path[128];
    int i;
    if (!zh || !raw_loop(zh, &raw_connected, 10000)) return 0;
    snprintf(path, sizeof path, "/bench-%s", tenant);
    raw_done = 0;
    zoo_acreate(zh, path, "0", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, raw_string_done, NULL);
    raw_loop(zh, &raw_done, 5000);
    for (i = 0; i < RAW_N; i++) {
        double t0 = now_us();
        raw_done = 0;
        zoo_aexists(zh, path, 0, raw_stat_done, NULL);
        if (!raw_loop(zh, &raw_done, 5000)) return 0;
        v[i] = now_us() - t0;
    }
    *exists_p50 = pct(v, RAW_N, 0.5);
    *exists_p99 = pct(v, RAW_N, 0.99);
    for (i = 0; i < RAW_N; i++) {
        double t0 = now_us();
        raw_done = 0;
        zoo_aset(zh, path, "1", 1, -1, raw_stat_done, NULL);
        if (!raw_loop(zh, &raw_done, 5000) || raw_rc != ZOK) return 0;
        v[i] = now_us() - t0;
    }
    *write_p50 = pct(v, RAW_N, 0.5);
    *write_p99 = pct(v, RAW_N, 0.99);
    zookeeper_close(zh);
    return 1;
}

/* The floors of a hand-off on this machine, without simba: the holder
   deletes a node; another process, watching it, sees the deletion (what a
   mutex waiter that knew its only predecessor needs) and then reads the
   queue once (getChildren: the classic lock recipe, and what simba does for
   semaphores). Same fork and pipes as below. */
static int raw_fired;
static void raw_fire_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)state; (void)path; (void)ctx;
    if (type == ZOO_DELETED_EVENT) raw_fired = 1;
}
static void raw_void_done(int rc, const void *d) { (void)d; raw_rc = rc; raw_done = 1; }
static void raw_kids_done(int rc, const struct String_vector *v, const void *d) { (void)v; (void)d; raw_rc = rc; raw_done = 1; }

static zhandle_t *raw_connect(void) {
    zhandle_t *zh;
    raw_connected = 0;
    zh = zookeeper_init2(hosts, raw_watcher, 10000, NULL, NULL, 0, raw_silent);
    if (zh && !raw_loop(zh, &raw_connected, 10000)) { zookeeper_close(zh); zh = NULL; }
    return zh;
}

static void raw_handoff_child(int cmd_fd, int reply_fd, const char *path) {
    zhandle_t *zh = raw_connect();
    char c;
    if (!zh) _exit(2);
    while (read(cmd_fd, &c, 1) == 1 && c == 'q') {
        double t[2];
        raw_fired = 0;
        raw_done = 0;
        if (zoo_awexists(zh, path, raw_fire_watcher, NULL, raw_stat_done, NULL) != ZOK) _exit(3);
        if (!raw_loop(zh, &raw_done, 5000) || raw_rc != ZOK) _exit(4);
        if (write(reply_fd, "s", 1) != 1) _exit(5);
        if (!raw_loop(zh, &raw_fired, 10000)) _exit(6);
        t[0] = now_us();
        raw_done = 0;
        zoo_aget_children(zh, "/", 0, raw_kids_done, NULL);
        if (!raw_loop(zh, &raw_done, 5000)) _exit(7);
        t[1] = now_us();
        if (write(reply_fd, t, sizeof t) != (ssize_t)sizeof t) _exit(8);
    }
    zookeeper_close(zh);
    _exit(0);
}

static int raw_handoff(double *watch50, double *p50, double *p99) {
    static double v[HANDOFF_N], w[HANDOFF_N];
    char path[128];
    int cmd[2], rep[2], i, ok = 1, status = 0;
    pid_t pid;
    zhandle_t *zh;
    snprintf(path, sizeof path, "/bench-ho-%s", tenant);
    if (pipe(cmd) || pipe(rep)) return 0;
    pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) { close(cmd[1]); close(rep[0]); raw_handoff_child(cmd[0], rep[1], path); }
    close(cmd[0]);
    close(rep[1]);
    zh = raw_connect();
    for (i = 0; ok && zh && i < HANDOFF_N; i++) {
        double t0, t1[2];
        char c;
        raw_done = 0;
        zoo_acreate(zh, path, "0", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, raw_string_done, NULL);
        if (!raw_loop(zh, &raw_done, 5000) || raw_rc != ZOK) { ok = 0; break; }
        if (write(cmd[1], "q", 1) != 1 || read(rep[0], &c, 1) != 1) { ok = 0; break; }
        poll(NULL, 0, 30);
        t0 = now_us();
        raw_done = 0;
        zoo_adelete(zh, path, -1, raw_void_done, NULL);
        if (!raw_loop(zh, &raw_done, 5000)) { ok = 0; break; }
        if (read(rep[0], t1, sizeof t1) != (ssize_t)sizeof t1) { ok = 0; break; }
        w[i] = t1[0] - t0;
        v[i] = t1[1] - t0;
    }
    close(cmd[1]);
    waitpid(pid, &status, 0);
    if (zh) zookeeper_close(zh);
    close(rep[0]);
    if (!ok || !zh || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 0;
    *watch50 = pct(w, HANDOFF_N, 0.5);
    *p50 = pct(v, HANDOFF_N, 0.5);
    *p99 = pct(v, HANDOFF_N, 0.99);
    return 1;
}

/* ---- simba clients ---- */

static simba *client(const char *id) {
    simba_zk_desc zd;
    simba_desc d;
    simba *s;
    simba_lock warm;
    simba_event ev;
    simba_lock_desc ld;
    memset(&zd, 0, sizeof zd);
    zd.hosts = hosts;
    memset(&d, 0, sizeof d);
    d.backend = simba_zk(&zd);
    d.tenant = tenant;
    d.client_id = id;
    s = simba_create(&d, NULL);
    if (!s) return NULL;
    /* connect, open the session and create the parent nodes before timing */
    memset(&ld, 0, sizeof ld);
    ld.name = "warmup";
    ld.wait_ms = -1;
    warm = simba_acquire(s, &ld);
    if (bench_wait(&ticks, s, warm, 10000, &ev) != 1 || ev.type != SIMBA_EVENT_ACQUIRED) { simba_destroy(s); return NULL; }
    simba_release(s, warm);
    bench_wait(&ticks, s, warm, 10000, &ev);
    return s;
}

static simba_lock acquire(simba *s, const char *name) {
    simba_lock_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.name = name;
    ld.wait_ms = -1;
    return simba_acquire(s, &ld);
}

/* Waits for an event of type t on l; other events are dropped. */
static int wait_for(simba *s, simba_lock l, simba_event_type t, int ms) {
    double end = now_us() + ms * 1000.0;
    simba_event ev;
    while (now_us() < end) {
        int r = bench_wait(&ticks, s, l, (int)((end - now_us()) / 1000) + 1, &ev);
        if (r < 0) return 0;
        if (r == 1 && ev.type == t) return 1;
        if (r == 1 && (ev.type == SIMBA_EVENT_ERROR || ev.type == SIMBA_EVENT_LOST)) {
            fprintf(stderr, "waiting for %s: %s (%s)\n", simba_event_name(t), simba_event_name(ev.type),
                    simba_strerror(ev.error));
            return 0;
        }
    }
    fprintf(stderr, "waiting for %s: timed out\n", simba_event_name(t));
    return 0;
}

static int bench_acquire(double *acq_p50, double *acq_p99, double *cyc_p50, double *cyc_p99) {
    static double acq[ACQ_N], cyc[ACQ_N];
    simba *s = client("bench-a");
    int i;
    if (!s) return 0;
    for (i = 0; i < ACQ_N; i++) {
        double t0 = now_us(), t1;
        simba_lock l = acquire(s, "uncontended");
        if (!wait_for(s, l, SIMBA_EVENT_ACQUIRED, 10000)) { simba_destroy(s); return 0; }
        t1 = now_us();
        simba_release(s, l);
        if (!wait_for(s, l, SIMBA_EVENT_RELEASED, 10000)) { simba_destroy(s); return 0; }
        acq[i] = t1 - t0;
        cyc[i] = now_us() - t0;
    }
    simba_destroy(s);
    *acq_p50 = pct(acq, ACQ_N, 0.5);
    *acq_p99 = pct(acq, ACQ_N, 0.99);
    *cyc_p50 = pct(cyc, ACQ_N, 0.5);
    *cyc_p99 = pct(cyc, ACQ_N, 0.99);
    return 1;
}

/* ---- hand-off between processes ----
   Each round: the parent holds; it tells the child to queue; once the child
   says its request is out, the parent waits a little (the entry is in the
   queue), notes t0 and releases. The child notes t1 at its ACQUIRED, sends
   t1, releases, and waits for the next round. */

static void child_loop(int cmd_fd, int reply_fd) {
    simba *s = client("bench-child");
    char c;
    if (!s) _exit(2);
    while (read(cmd_fd, &c, 1) == 1 && c == 'q') {
        simba_lock l = acquire(s, "handoff");
        double t1;
        simba_event ev;
        int r;
        /* run one tick so the ENQUEUE is sent, then say so */
        r = bench_wait(&ticks, s, l, 1, &ev);
        if (r == 1 && ev.type == SIMBA_EVENT_ACQUIRED) _exit(3);   /* the parent should hold it */
        if (write(reply_fd, "s", 1) != 1) _exit(4);
        if (!wait_for(s, l, SIMBA_EVENT_ACQUIRED, 10000)) _exit(5);
        t1 = now_us();
        if (write(reply_fd, &t1, sizeof t1) != (ssize_t)sizeof t1) _exit(6);
        simba_release(s, l);
        if (!wait_for(s, l, SIMBA_EVENT_RELEASED, 10000)) _exit(7);
        if (write(reply_fd, "r", 1) != 1) _exit(8);
    }
    simba_destroy(s);
    _exit(0);
}

static int bench_handoff(double *p50, double *p99) {
    static double v[HANDOFF_N];
    int cmd[2], rep[2], i, ok = 1, status;
    pid_t pid;
    simba *s;
    if (pipe(cmd) || pipe(rep)) return 0;
    pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) { close(cmd[1]); close(rep[0]); child_loop(cmd[0], rep[1]); }
    close(cmd[0]);
    close(rep[1]);
    s = client("bench-parent");
    for (i = 0; ok && s && i < HANDOFF_N; i++) {
        simba_lock l = acquire(s, "handoff");
        double t0, t1;
        char c;
        if (!wait_for(s, l, SIMBA_EVENT_ACQUIRED, 10000)) { ok = 0; break; }
        if (write(cmd[1], "q", 1) != 1 || read(rep[0], &c, 1) != 1) { ok = 0; break; }
        {   /* let the child's entry land behind ours (keep our session ticking) */
            simba_event ev;
            double end = now_us() + 30000;
            while (now_us() < end) bench_wait(&ticks, s, l, 5, &ev);
        }
        t0 = now_us();
        simba_release(s, l);    /* sent by the next tick: keep ticking until confirmed */
        if (!wait_for(s, l, SIMBA_EVENT_RELEASED, 10000)) { ok = 0; break; }
        if (read(rep[0], &t1, sizeof t1) != (ssize_t)sizeof t1) { ok = 0; break; }
        v[i] = t1 - t0;
        if (read(rep[0], &c, 1) != 1) { ok = 0; break; }
    }
    close(cmd[1]);
    waitpid(pid, &status, 0);
    if (s) simba_destroy(s);
    close(rep[0]);
    if (!ok || !s || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "hand-off: round %d, parent %s, child exit %d\n", i, ok ? "ok" : "failed",
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 0;
    }
    *p50 = pct(v, HANDOFF_N, 0.5);
    *p99 = pct(v, HANDOFF_N, 0.99);
    return 1;
}

/* ---- 10 contenders: each acquires, releases at once, acquires again ---- */

static int bench_contenders(double *per_grant_us, double *grants_per_s) {
    simba *s[CONTENDERS];
    simba_lock l[CONTENDERS];
    int i, grants = 0, ok = 1;
    double t0, end;
    char id[32];
    for (i = 0; i < CONTENDERS; i++) {
        snprintf(id, sizeof id, "bench-c%d", i);
        s[i] = client(id);
        if (!s[i]) return 0;
    }
    t0 = now_us();
    for (i = 0; i < CONTENDERS; i++) l[i] = acquire(s[i], "contended");
    end = t0 + 120e6;
    while (grants < CONTEND_GRANTS && ok && now_us() < end) {
        struct pollfd fds[CONTENDERS * 4];
        int start[CONTENDERS], cnt[CONTENDERS], nf = 0, timeout = 50;
        for (i = 0; i < CONTENDERS; i++) {
            int k = simba_pollfds(s[i], fds + nf, 4), t = simba_timeout_ms(s[i]);
            if (k > 4) k = 4;
            start[i] = nf; cnt[i] = k; nf += k;
            if (t >= 0 && t < timeout) timeout = t;
        }
        poll(fds, (nfds_t)nf, timeout);
        for (i = 0; i < CONTENDERS; i++) {
            simba_event ev[16];
            int k = bench_tick(&ticks, s[i], fds + start[i], cnt[i], ev, 16), j;
            for (j = 0; j < k; j++) {
                if (ev[j].type == SIMBA_EVENT_ACQUIRED) {
                    grants++;
                    simba_release(s[i], l[i]);
                } else if (ev[j].type == SIMBA_EVENT_RELEASED) {
                    l[i] = acquire(s[i], "contended");
                } else if (ev[j].type == SIMBA_EVENT_LOST || ev[j].type == SIMBA_EVENT_ERROR) {
                    fprintf(stderr, "contender %d: %s (%d)\n", i, simba_event_name(ev[j].type), ev[j].error);
                    ok = 0;
                }
            }
        }
    }
    *per_grant_us = (now_us() - t0) / (grants ? grants : 1);
    *grants_per_s = grants / ((now_us() - t0) / 1e6);
    for (i = 0; i < CONTENDERS; i++) simba_destroy(s[i]);
    if (grants < CONTEND_GRANTS) fprintf(stderr, "contenders: %d grants in 120 s\n", grants);
    return ok && grants >= CONTEND_GRANTS;
}

int main(void) {
    double ex50, ex99, wr50, wr99, acq50, acq99, cyc50, cyc99, ho50, ho99, rwatch50, rho50, rho99, per_grant, gps;
    hosts = getenv("SIMBA_ZK_HOSTS");
    if (!hosts) {
        fprintf(stderr, "SIMBA_ZK_HOSTS is not set: run me through tests/servers/zk.sh run ./build/bench_zk\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(tenant, sizeof tenant, "bench%ld", (long)getpid());
    if (!raw_rtts(&ex50, &ex99, &wr50, &wr99)) { fprintf(stderr, "raw round trips failed\n"); return 1; }
    printf("simba on ZooKeeper (%s), medians over the run; ratios to the raw round trips\n", hosts);
    printf("  raw exists() round trip        p50 %7.0f us  p99 %7.0f us   (%d)\n", ex50, ex99, RAW_N);
    printf("  raw write (setData) round trip p50 %7.0f us  p99 %7.0f us   (%d)\n", wr50, wr99, RAW_N);
    if (!bench_acquire(&acq50, &acq99, &cyc50, &cyc99)) { fprintf(stderr, "acquire benchmark failed\n"); return 1; }
    printf("  uncontended acquire->ACQUIRED  p50 %7.0f us  p99 %7.0f us   = %.2f x exists, %.2f x write\n",
           acq50, acq99, acq50 / ex50, acq50 / wr50);
    printf("  acquire+release cycle          p50 %7.0f us  p99 %7.0f us   = %.2f x write (target <= 3)\n",
           cyc50, cyc99, cyc50 / wr50);
    if (!raw_handoff(&rwatch50, &rho50, &rho99)) { fprintf(stderr, "raw hand-off failed\n"); return 1; }
    if (!bench_handoff(&ho50, &ho99)) { fprintf(stderr, "hand-off benchmark failed\n"); return 1; }
    printf("  hand-off to another process    p50 %7.0f us  p99 %7.0f us   = %.2f x (2 exists + 1 write) (target <= 1)\n",
           ho50, ho99, ho50 / (2 * ex50 + wr50));
    printf("    (a mutex waiter is granted by its predecessor's deletion alone: no read)\n");
    printf("    raw floor: delete -> watch in the other process\n");
    printf("                                 p50 %7.0f us                  (simba = %.2f x this)\n",
           rwatch50, ho50 / rwatch50);
    printf("    raw: delete -> watch -> getChildren (the classic recipe)\n");
    printf("                                 p50 %7.0f us  p99 %7.0f us   (simba = %.2f x this)\n",
           rho50, rho99, ho50 / rho50);
    if (!bench_contenders(&per_grant, &gps)) { fprintf(stderr, "contenders benchmark failed\n"); return 1; }
    printf("  %d contenders, one mutex       %7.0f us per grant (%.0f grants/s) = %.2f x write\n",
           CONTENDERS, per_grant, gps, per_grant / wr50);
    bench_ticks_print("  tick:", &ticks);
    return 0;
}
