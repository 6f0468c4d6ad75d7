/* scale.h -- the measuring engine of issue #15, shared by bench/bench_scale.c
   (the figures) and tests/test_scale.c (the acceptance test).

   Public API only: clients come from simba_create_url() (mem: from our own
   simba_mem_server, for its operation counter); server work is read from
   the server itself, never from simba's internals:
     Redis      INFO commandstats: calls of every command (those a script
                runs included; INFO itself excluded), evalsha calls and usec,
                PUBLISH calls (one per push)
     MySQL      SHOW GLOBAL STATUS: Questions (statements), rows read: the
                sum of Handler_read_{first,key,last,next,prev,rnd,rnd_next}
                (MariaDB has no Innodb_rows_read)
     ZooKeeper  the mntr four-letter word: zk_packets_received, and the
                watches fired (the zk_sum_node_{created,deleted,changed,
                children}_watch_count summaries)
     mem        simba_mem_server_stats().ops
   Each snapshot's own cost (a SHOW statement, the mntr packets) is measured
   once with no client around and subtracted.

   One measured hand-off: the oldest holder releases (t0), the granted
   waiter(s) report ACQUIRED (t1 = the first of them), the old holder queues
   again at the tail (so the queue keeps its length), and the window closes
   once the clients concerned (the releaser, the grantees) have had no
   socket event for SC_QUIET_MS (sc_quiet). What the servers did in the
   window (counters read right before t0 and right after it) is the
   hand-off's work; then the servers are left to settle (their counters
   stop moving, or the settle's cap passes) before the next round. A local
   model of the FIFO queue (the grant rule of docs/design.md) says how many
   grants a release makes: a semaphore release that grants nobody is not a
   hand-off, its window's work is added to the others.

   With many clients (one per waiter, Q + 1 of them) the servers never
   stand still: 1,000 sessions' keepalives, fallback rechecks and MySQL bell
   waits go on all the time, and are no hand-off's work. Their rate is what
   the rest of the rounds (the settles) saw, and that rate times the
   windows' length is taken out of the windows' counts; it is printed as
   "idle/ho" next to the figures. The same for "woken": the clients their
   own background wakes in a window's time (measured idle, sc_background)
   are taken out.

   "woken" counts the clients, other than the releaser and the grantees,
   whose sockets became readable during a window: the client-side view of a
   herd. */
#ifndef SIMBA_SCALE_H
#define SIMBA_SCALE_H

#include <errno.h>
#include <mysql.h>
#include <hiredis.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../tests/zk_mntr.h"
#include "bench_util.h"

/* caps: a settle, the wait for a grant, the rounds of one figure (then it
   stops at 3 hand-offs or more: its n says how many) */
enum { SC_SETTLE_MS = 1000, SC_GRANT_WAIT_MS = 20000, SC_ROUNDS_S = 15, SC_MAX_EV = 64, SC_MANY_CLIENTS = 8,
       SC_EPOLL_BATCH = 256, SC_MAX_PART = 8, SC_QUIET_MS = 8,
       SC_SETTLE_MANY_MS = 100, SC_QUIET_SERVER_MS = 5000 };

/* What the servers did, cumulative. */
typedef struct sc_counters {
    double cmds;          /* Redis commands, MySQL statements, ZK packets received, mem ops */
    double script_calls;  /* Redis EVALSHA/EVAL calls */
    double script_usec;   /* ... and their server time */
    double notifs;        /* Redis PUBLISH calls, ZK watches fired (0 where unknown) */
    double rows_read;     /* MySQL rows read (Handler_read_*) */
} sc_counters;

typedef struct sc_env {
    char backend[8];        /* mem, redis, mysql, zk */
    char url[600];
    char tenant[48];
    simba_mem_server *mem;
    redisContext *redis;
    MYSQL *mysql;
    char zk_host[64];
    int zk_port;
    sc_counters overhead;   /* the cost of one snapshot */
    int has_notifs;         /* notifs is a server count */
} sc_env;

typedef struct sc_req {
    struct sc_req *next;    /* the model's waiting FIFO or held list */
    int client;
    int weight;
    int state;              /* 0 waiting, 1 held, 2 releasing, 3 done */
    simba_lock lock;
} sc_req;

struct sc_run;
typedef struct sc_slot {        /* the user pointer of one client's loop hooks */
    struct sc_run *r;
    int ci;
} sc_slot;

typedef struct sc_run {
    sc_env *e;
    int nc;
    simba **c;
    int *woke;
    int epfd;                   /* every client's sockets, in push mode (sc_step) */
    sc_slot *slots;
    double *due_us;             /* per client: when its timer hook is due (-1: none) */
    double next_due;            /* the earliest due_us set with ms > 0 (may be passed already) */
    int *now_list, *now_tmp, nnow;  /* clients whose timer was set to 0: due at the next turn */
    char *on_list;
    int capacity;
    const char *name;
    sc_req *wait_head, *wait_tail;  /* model FIFO, enqueue order */
    sc_req *held_head, *held_tail;  /* grant order */
    int held_weight;
    int acquired_since;             /* ACQUIRED events since the last release */
    double first_acq;               /* time of the first of them */
    double *io_us;                  /* per client: its last socket event (sc_step) */
    int part[SC_MAX_PART], npart;   /* the clients a round's hand-off concerns: releaser, grantees */
    int failures;
    char fail_msg[400];
    int info_queued;                /* INFO answer (-1 pending) */
    simba_lock info_lock;           /* its handle (for simba_holders) */
} sc_run;

/* One figure's result. */
typedef struct sc_result {
    int ok;
    char why[480];          /* when !ok */
    int handoffs;
    double p50, p99;        /* us */
    double cmds_per_ho, script_usec_per_call, notifs_per_grant, woken_per_grant, rows_per_ho;
    double script_calls_per_ho;
    double bg_cmds_per_ho, bg_woken_per_grant;   /* the idle background taken out of the above */
    double pass_us;         /* many clients: one pass of the bench's loop over all of them, idle */
} sc_result;

static int sc_debug = -1;   /* SIMBA_SCALE_DEBUG set: phases and their times on stderr */
static void sc_trace(const char *what, double since) {
    if (sc_debug < 0) sc_debug = getenv("SIMBA_SCALE_DEBUG") != NULL;
    if (sc_debug) fprintf(stderr, "  [%s: %.0f ms]\n", what, (now_us() - since) / 1000);
}

static void sc_failf(sc_run *r, const char *fmt, ...) {
    va_list ap;
    r->failures++;
    if (r->fail_msg[0]) return;
    va_start(ap, fmt);
    vsnprintf(r->fail_msg, sizeof r->fail_msg, fmt, ap);
    va_end(ap);
}

/* ---- server counters ---- */

static int sc_zk_mntr(sc_env *e, sc_counters *c) {
    return zk_mntr_read(e->zk_host, e->zk_port, &c->cmds, &c->notifs) >= 0;
}

static int sc_redis_stats(sc_env *e, sc_counters *c) {
    redisReply *rep = (redisReply *)redisCommand(e->redis, "INFO commandstats");
    char *line;
    if (!rep || rep->type != REDIS_REPLY_STRING) { if (rep) freeReplyObject(rep); return 0; }
    for (line = rep->str; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char name[64];
        double calls = 0, usec = 0;
        if (sscanf(line, "cmdstat_%63[^:]:calls=%lf,usec=%lf", name, &calls, &usec) != 3) continue;
        if (strcmp(name, "info") == 0) continue;
        c->cmds += calls;
        if (strcmp(name, "evalsha") == 0 || strcmp(name, "eval") == 0) { c->script_calls += calls; c->script_usec += usec; }
        if (strcmp(name, "publish") == 0) c->notifs += calls;
    }
    freeReplyObject(rep);
    return 1;
}

static int sc_mysql_stats(sc_env *e, sc_counters *c) {
    MYSQL_RES *res;
    MYSQL_ROW row;
    if (mysql_query(e->mysql, "SHOW GLOBAL STATUS WHERE Variable_name = 'Questions' OR Variable_name LIKE 'Handler_read%'"))
        return 0;
    res = mysql_store_result(e->mysql);
    if (!res) return 0;
    while ((row = mysql_fetch_row(res)) != NULL) {
        if (strcmp(row[0], "Questions") == 0) c->cmds = atof(row[1]);
        else if (strcmp(row[0], "Handler_read_retry") && strcmp(row[0], "Handler_read_rnd_deleted"))
            c->rows_read += atof(row[1]);
    }
    mysql_free_result(res);
    return 1;
}

/* The servers' counters now, less nothing (see sc_delta). */
static int sc_snap(sc_env *e, sc_counters *c) {
    memset(c, 0, sizeof *c);
    if (strcmp(e->backend, "mem") == 0) {
        simba_mem_stats st = simba_mem_server_stats(e->mem);
        c->cmds = (double)st.ops;
        return 1;
    }
    if (strcmp(e->backend, "redis") == 0) return sc_redis_stats(e, c);
    if (strcmp(e->backend, "mysql") == 0) return sc_mysql_stats(e, c);
    return sc_zk_mntr(e, c);
}

/* b - a, less `snaps` snapshots' own cost. */
static sc_counters sc_delta(const sc_env *e, const sc_counters *a, const sc_counters *b, int snaps) {
    sc_counters d;
    d.cmds = b->cmds - a->cmds - snaps * e->overhead.cmds;
    d.script_calls = b->script_calls - a->script_calls - snaps * e->overhead.script_calls;
    d.script_usec = b->script_usec - a->script_usec - snaps * e->overhead.script_usec;
    d.notifs = b->notifs - a->notifs - snaps * e->overhead.notifs;
    d.rows_read = b->rows_read - a->rows_read - snaps * e->overhead.rows_read;
    return d;
}

/* a + k * b, field by field */
static sc_counters sc_axpy(const sc_counters *a, double k, const sc_counters *b) {
    sc_counters d;
    d.cmds = a->cmds + k * b->cmds;
    d.script_calls = a->script_calls + k * b->script_calls;
    d.script_usec = a->script_usec + k * b->script_usec;
    d.notifs = a->notifs + k * b->notifs;
    d.rows_read = a->rows_read + k * b->rows_read;
    return d;
}

static int sc_warmup(sc_env *e);

/* Opens the side connections to the server and measures a snapshot's own
   cost. The environment comes from tests/servers/<backend>.sh. Returns 0
   with a message in why when the backend cannot be used. */
static int sc_env_init(sc_env *e, const char *backend, char *why, size_t whylen) {
    sc_counters a, b;
    int i;
    memset(e, 0, sizeof *e);
    snprintf(e->backend, sizeof e->backend, "%s", backend);
    snprintf(e->tenant, sizeof e->tenant, "scale%ld", (long)getpid());
    if (strcmp(backend, "mem") == 0) {
        e->mem = simba_mem_server_create(NULL);
        snprintf(e->url, sizeof e->url, "mem:");
    } else if (strcmp(backend, "redis") == 0) {
        const char *h = getenv("SIMBA_REDIS_HOST"), *p = getenv("SIMBA_REDIS_PORT");
        if (!h || !p) { snprintf(why, whylen, "SIMBA_REDIS_HOST/PORT not set (run under tests/servers/redis.sh)"); return 0; }
        snprintf(e->url, sizeof e->url, "redis://%s:%s", h, p);
        e->redis = redisConnect(h, atoi(p));
        if (!e->redis || e->redis->err) { snprintf(why, whylen, "cannot connect to Redis"); return 0; }
        e->has_notifs = 1;
    } else if (strcmp(backend, "mysql") == 0) {
        const char *h = getenv("SIMBA_MYSQL_HOST"), *p = getenv("SIMBA_MYSQL_PORT"), *u = getenv("SIMBA_MYSQL_USER"),
                   *pw = getenv("SIMBA_MYSQL_PASSWORD"), *db = getenv("SIMBA_MYSQL_DATABASE");
        if (!h || !p || !u || !db) { snprintf(why, whylen, "SIMBA_MYSQL_* not set (run under tests/servers/mysql.sh)"); return 0; }
        snprintf(e->url, sizeof e->url, "mysql://%s%s%s@%s:%s/%s?create_schema=1", u, pw && *pw ? ":" : "",
                 pw && *pw ? pw : "", h, p, db);
        e->mysql = mysql_init(NULL);
        if (!e->mysql || !mysql_real_connect(e->mysql, h, u, pw ? pw : "", db, (unsigned)atoi(p), NULL, 0)) {
            snprintf(why, whylen, "cannot connect to MySQL: %s", e->mysql ? mysql_error(e->mysql) : "out of memory");
            return 0;
        }
    } else if (strcmp(backend, "zk") == 0) {
        const char *hosts = getenv("SIMBA_ZK_HOSTS"), *colon;
        size_t hl;
        if (!hosts) { snprintf(why, whylen, "SIMBA_ZK_HOSTS not set (run under tests/servers/zk.sh)"); return 0; }
        snprintf(e->url, sizeof e->url, "zk://%s", hosts);
        colon = strchr(hosts, ':');
        hl = colon ? (size_t)(colon - hosts) : strlen(hosts);
        if (hl >= sizeof e->zk_host) hl = sizeof e->zk_host - 1;
        memcpy(e->zk_host, hosts, hl);
        e->zk_host[hl] = 0;
        e->zk_port = colon ? atoi(colon + 1) : 2181;
        e->has_notifs = 1;
    } else {
        snprintf(why, whylen, "unknown backend '%s' (mem, redis, mysql, zk)", backend);
        return 0;
    }
    if (sc_debug < 0) sc_debug = getenv("SIMBA_SCALE_DEBUG") != NULL;
    if (!e->mem && !sc_warmup(e)) {
        snprintf(why, whylen, "no first grant on %s within 60 s", backend);
        return 0;
    }
    /* a snapshot's own cost: the mean of 8 with nothing else going on */
    if (!sc_snap(e, &a)) { snprintf(why, whylen, "cannot read the %s server's counters", backend); return 0; }
    for (i = 0; i < 8; i++) sc_snap(e, &b);
    memset(&e->overhead, 0, sizeof e->overhead);
    e->overhead = sc_delta(e, &a, &b, 0);
    e->overhead.cmds /= 8;
    e->overhead.script_calls /= 8;
    e->overhead.script_usec /= 8;
    e->overhead.notifs /= 8;
    e->overhead.rows_read /= 8;
    return 1;
}

/* A fresh server (or tenant) holds grants back for one lease after it first
   sees us (the restart grace, docs/design.md). A first client with a short
   lease takes that wait once, so the figures' clients (ttl 60 s) do not. */
static void sc_log(void *user, simba_log_level level, const char *msg) {
    (void)user;
    (void)level;
    fprintf(stderr, "  [log: %s]\n", msg);
}

static int sc_warmup(sc_env *e) {
    simba_desc d;
    simba_url_error err;
    simba_lock_desc ld;
    simba_lock l;
    simba_event ev;
    simba *s;
    int ok = 0, i;
    memset(&d, 0, sizeof d);
    d.tenant = e->tenant;
    d.client_id = "scale-warmup";
    if (sc_debug > 0) {
        d.logger.func = sc_log;
        d.logger.level = SIMBA_LOG_INFO;
    }
    d.ttl_ms = 3000;
    d.transition_ms = 1000;
    s = simba_create_url(e->url, &d, &err);
    if (!s) return 0;
    memset(&ld, 0, sizeof ld);
    ld.name = "warmup";
    ld.wait_ms = -1;
    l = simba_acquire(s, &ld);
    for (i = 0; i < 60 && !ok; i++) {
        int r = simba_wait(s, l, 1000, &ev);
        if (r == 1 && ev.type == SIMBA_EVENT_ACQUIRED) ok = 1;
        else if (r == 1 && sc_debug > 0)
            fprintf(stderr, "  [warmup: %s %s %s]\n", simba_event_name(ev.type), simba_strerror(ev.error), ev.message);
    }
    if (ok) {
        simba_release(s, l);
        simba_wait(s, l, 5000, &ev);
    }
    simba_destroy(s);
    return ok;
}

static void sc_env_free(sc_env *e) {
    if (e->redis) redisFree(e->redis);
    if (e->mysql) mysql_close(e->mysql);
    if (e->mem) simba_mem_server_destroy(e->mem);
    memset(e, 0, sizeof *e);
}

/* ---- clients and the loop ---- */

static simba *sc_client(sc_env *e, int i) {
    simba_desc d;
    simba_url_error err;
    char id[48];
    simba *s;
    memset(&d, 0, sizeof d);
    snprintf(id, sizeof id, "scale-%d", i);
    d.tenant = e->tenant;
    d.client_id = id;
    /* keepalives far apart (they are not the herd); the fallback re-check of
       a waiting request at its default (ttl/2 of the default ttl): a grant
       that no push announces costs that much, and it is part of the cost */
    d.ttl_ms = 60000;
    d.recheck_ms = 5000;
    if (e->mem) {
        d.backend = simba_mem(e->mem, NULL);
        return simba_create(&d, NULL);
    }
    s = simba_create_url(e->url, &d, &err);
    if (!s) fprintf(stderr, "bench_scale: client %d: %s\n", i, err.msg);
    return s;
}

static void sc_model_push_wait(sc_run *r, sc_req *q) {
    q->next = NULL;
    if (r->wait_tail) r->wait_tail->next = q;
    else r->wait_head = q;
    r->wait_tail = q;
}

/* The grants the model expects now (the prefix rule), without making them. */
static int sc_model_expect(const sc_run *r) {
    int64_t ahead = r->held_weight;
    int n = 0;
    const sc_req *q;
    for (q = r->wait_head; q; q = q->next) {
        if (!simba_grant_step(&ahead, q->weight, r->capacity)) break;
        n++;
    }
    return n;
}

static void sc_on_event(sc_run *r, int ci, const simba_event *ev) {
    sc_req *q = (sc_req *)ev->user;
    switch (ev->type) {
    case SIMBA_EVENT_ACQUIRED: {
        sc_req **pp;
        if (!q) break;
        /* the time first: the model's walk below is O(Q) and the bench's own */
        if (r->acquired_since++ == 0) r->first_acq = now_us();
        if (r->npart < SC_MAX_PART) r->part[r->npart++] = ci;
        /* out of the model's FIFO (wherever it is: the model may be wrong) */
        for (pp = &r->wait_head; *pp; pp = &(*pp)->next)
            if (*pp == q) {
                *pp = q->next;
                break;
            }
        r->wait_tail = NULL;
        for (pp = &r->wait_head; *pp; pp = &(*pp)->next) r->wait_tail = *pp;
        q->state = 1;
        q->next = NULL;
        if (r->held_tail) r->held_tail->next = q;
        else r->held_head = q;
        r->held_tail = q;
        r->held_weight += q->weight;
        break;
    }
    case SIMBA_EVENT_RELEASED:
        if (q) q->state = 3;
        break;
    case SIMBA_EVENT_INFO:
        r->info_queued = ev->queued;
        break;
    case SIMBA_EVENT_LOST:
    case SIMBA_EVENT_ERROR:
    case SIMBA_EVENT_TIMEOUT:
        sc_failf(r, "client %d: %s (%s) %s", ci, simba_event_name(ev->type), simba_strerror(ev->error), ev->message);
        break;
    default:
        break;
    }
}

/* The bench drives its clients in push mode (simba_set_loop, the way
   libcurl's multi_socket_action is driven): every client's sockets sit in
   one epoll set, and its timer is a due time. A pass then costs O(clients
   with something to do), whatever the number of clients: what a process
   running 1,000 clients in one loop should do. In pull mode (simba_pollfds
   + poll + simba_tick per client) a pass over 1,001 idle clients cost this
   bench 0.4-1.4 ms, and a hand-off waited behind it. */
static int sc_hook_socket(void *user, int fd, int what) {
    sc_slot *slot = (sc_slot *)user;
    struct epoll_event ev;
    if (what & SIMBA_POLL_REMOVE) {
        epoll_ctl(slot->r->epfd, EPOLL_CTL_DEL, fd, NULL);   /* ENOENT/EBADF: already closed, fine */
        return 0;
    }
    memset(&ev, 0, sizeof ev);
    ev.events = ((what & SIMBA_POLL_IN) ? EPOLLIN : 0u) | ((what & SIMBA_POLL_OUT) ? EPOLLOUT : 0u);
    ev.data.u64 = ((uint64_t)(uint32_t)slot->ci << 32) | (uint32_t)fd;
    if (epoll_ctl(slot->r->epfd, EPOLL_CTL_MOD, fd, &ev) == 0) return 0;
    return errno == ENOENT && epoll_ctl(slot->r->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -1;
}

/* A timer of 0 (work queued by an API call, an answer due) puts the client
   on a list for the next turn; a later one is a due time, found by a scan
   only when the earliest of them passes (keepalives, re-checks: seconds
   apart). */
static void sc_hook_timer(void *user, int ms) {
    sc_slot *slot = (sc_slot *)user;
    sc_run *r = slot->r;
    double due = ms < 0 ? -1 : now_us() + ms * 1000.0;
    r->due_us[slot->ci] = due;
    if (ms == 0 && !r->on_list[slot->ci]) {
        r->on_list[slot->ci] = 1;
        r->now_list[r->nnow++] = slot->ci;
    }
    if (ms > 0 && (r->next_due < 0 || due < r->next_due)) r->next_due = due;
}

/* Client ci of r into push mode. */
static int sc_attach(sc_run *r, int ci) {
    simba_loop loop;
    memset(&loop, 0, sizeof loop);
    r->slots[ci].r = r;
    r->slots[ci].ci = ci;
    r->due_us[ci] = -1;
    loop.socket = sc_hook_socket;
    loop.timer = sc_hook_timer;
    loop.user = &r->slots[ci];
    return simba_set_loop(r->c[ci], &loop) == SIMBA_OK;
}

static void sc_action(sc_run *r, int ci, int fd, int what) {
    simba_event ev[SC_MAX_EV];
    int k = simba_socket_action(r->c[ci], fd, what, ev, SC_MAX_EV), j;
    for (j = 0; j < k; j++) sc_on_event(r, ci, &ev[j]);
}

/* One turn of the loop: wait up to timeout_ms (less if a timer is due
   sooner) for sockets, serve those ready, then the clients whose timer is
   due. "woke" marks a client whose socket became readable. */
static void sc_fire_due(sc_run *r, int ci, double now) {
    if (r->due_us[ci] < 0 || r->due_us[ci] > now) return;
    r->due_us[ci] = -1;   /* one-shot; the action re-arms it */
    r->io_us[ci] = now;   /* activity too (mem has no sockets: its work comes by timer) */
    sc_action(r, ci, SIMBA_TIMEOUT, 0);
}

static void sc_step(sc_run *r, int timeout_ms) {
    struct epoll_event evs[SC_EPOLL_BATCH];
    double now = now_us();
    int i, n;
    if (r->nnow) timeout_ms = 0;
    else if (r->next_due >= 0) {
        double ms = (r->next_due - now) / 1000.0;
        if (ms < timeout_ms) timeout_ms = ms <= 0 ? 0 : (int)ms + 1;
    }
    /* mem's clients have no socket: with work listed there is nothing to
       wait for, and a syscall per turn would be most of a mem hand-off's
       microseconds, the bench's cost, not the library's. */
    n = r->nnow && r->e->mem ? 0 : epoll_wait(r->epfd, evs, SC_EPOLL_BATCH, timeout_ms);
    if (n > 0) now = now_us();
    for (i = 0; i < n; i++) {
        int ci = (int)(evs[i].data.u64 >> 32), fd = (int)(uint32_t)evs[i].data.u64, what = 0;
        if (evs[i].events & EPOLLIN) what |= SIMBA_POLL_IN;
        if (evs[i].events & EPOLLOUT) what |= SIMBA_POLL_OUT;
        if (evs[i].events & (EPOLLERR | EPOLLHUP)) what |= SIMBA_POLL_ERR;
        if (what & (SIMBA_POLL_IN | SIMBA_POLL_ERR)) r->woke[ci] = 1;
        r->io_us[ci] = now;
        sc_action(r, ci, fd, what);
    }
    now = now_us();
    n = r->nnow;   /* the actions may list clients again: those wait for the next turn */
    memcpy(r->now_tmp, r->now_list, (size_t)n * sizeof *r->now_tmp);
    r->nnow = 0;
    for (i = 0; i < n; i++) {
        r->on_list[r->now_tmp[i]] = 0;
        sc_fire_due(r, r->now_tmp[i], now);
    }
    if (r->next_due >= 0 && r->next_due <= now) {
        r->next_due = -1;
        for (i = 0; i < r->nc; i++) sc_fire_due(r, i, now);
        for (i = 0; i < r->nc; i++)
            if (r->due_us[i] > 0 && (r->next_due < 0 || r->due_us[i] < r->next_due)) r->next_due = r->due_us[i];
    }
}

/* Sends what a client has queued, so that the server sees requests in the
   order of our calls (the model's FIFO): the bytes go out when the loop
   says the socket is writable, so a few turns. */
static void sc_send(sc_run *r) {
    int k;
    for (k = 0; k < 3; k++) sc_step(r, 0);
}

static sc_req *sc_enqueue(sc_run *r, int ci, int weight) {
    sc_req *q = (sc_req *)calloc(1, sizeof *q);
    simba_lock_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.name = r->name;
    ld.capacity = r->capacity;
    ld.permits = weight;
    ld.wait_ms = -1;
    ld.user = q;
    q->client = ci;
    q->weight = weight;
    q->lock = simba_acquire(r->c[ci], &ld);
    if (!q->lock.id) sc_failf(r, "simba_acquire failed: %s", simba_last_error_msg(r->c[ci]));
    sc_model_push_wait(r, q);
    return q;
}

/* The resource's queue length as the server sees it (-1: no answer). */
static int sc_queued(sc_run *r, int ms) {
    double end = now_us() + ms * 1000.0;
    r->info_queued = -1;
    r->info_lock = simba_inspect(r->c[0], r->name, NULL);
    while (r->info_queued < 0 && now_us() < end && !r->failures) sc_step(r, 10);
    return r->info_queued;
}

/* Puts the model's waiting FIFO in the server's order (simba_holders after
   an INSPECT): requests of different clients reach the server in an order
   we do not control; those of one client keep their order, so an entry of
   client c with weight w is our first waiting request of c with weight w.
   Returns the server's queue length, or -1. */
static int sc_model_sync(sc_run *r) {
    int queued = sc_queued(r, 10000), n, k;
    simba_holder *h;
    sc_req *head = NULL, *tail = NULL, **pp;
    if (queued < 0) return -1;
    h = (simba_holder *)calloc((size_t)queued + 1, sizeof *h);
    n = simba_holders(r->c[0], r->info_lock, h, queued + 1);
    if (n > queued + 1) n = queued + 1;
    for (k = 0; k < n; k++) {
        int ci;
        if (h[k].granted || sscanf(h[k].client, "scale-%d", &ci) != 1) continue;
        for (pp = &r->wait_head; *pp; pp = &(*pp)->next)
            if ((*pp)->client == ci && (*pp)->weight == h[k].weight) break;
        if (*pp) {
            sc_req *q = *pp;
            *pp = q->next;
            q->next = NULL;
            if (tail) tail->next = q;
            else head = q;
            tail = q;
        }
    }
    if (r->wait_head) {   /* unmatched (the answer was short): keep them at the end */
        if (tail) tail->next = r->wait_head;
        else head = r->wait_head;
    }
    r->wait_head = head;
    for (r->wait_tail = head; r->wait_tail && r->wait_tail->next;) r->wait_tail = r->wait_tail->next;
    free(h);
    return queued;
}

/* mem: no socket, no server of its own, no background within a round
   (keepalives are seconds apart): its work is done once no client is
   listed for a turn, and waiting longer (the networked backends' quiet
   window and settle) only lets the caches go cold, which then is most of
   a hand-off of a few microseconds, and varies from run to run by more
   than any queue length. So its hand-offs run nearly back to back. */
static void sc_drain(sc_run *r, int max_ms) {
    double end = now_us() + max_ms * 1000.0;
    while (r->nnow && now_us() < end) sc_step(r, 0);
}

/* The end of a hand-off's own work: its clients (the releaser, the
   grantees) have had no socket event for SC_QUIET_MS, at most max_ms. Not
   the servers' counters standing still (sc_settle): with 1,000 clients
   their keepalives and rechecks never stand still, and a round would take
   them all in. */
static void sc_quiet(sc_run *r, int releaser, int max_ms) {
    double end = now_us() + max_ms * 1000.0;
    if (r->e->mem) { sc_drain(r, max_ms); return; }
    while (now_us() < end) {
        double last = r->io_us[releaser], now;
        int i;
        for (i = 0; i < r->npart; i++)
            if (r->io_us[r->part[i]] > last) last = r->io_us[r->part[i]];
        now = now_us();
        if (now - last >= SC_QUIET_MS * 1000.0) return;
        sc_step(r, (int)((last + SC_QUIET_MS * 1000.0 - now) / 1000.0) + 1);
    }
}

/* Before a figure: the server left alone until its counters stand still
   (at most max_ms). The previous figure's 1,000 clients, or a peer's 1,000
   connections, are closed by then, but the server may still be tearing
   them down (closing sessions, expiring a peer's ephemeral nodes), and a
   figure that starts under that measures it. */
static void sc_server_quiet(sc_env *e, int max_ms) {
    double end = now_us() + max_ms * 1000.0;
    sc_counters a, b, d;
    if (strcmp(e->backend, "mem") == 0 || !sc_snap(e, &a)) return;
    while (now_us() < end) {
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep(&ts, NULL);
        if (!sc_snap(e, &b)) return;
        d = sc_delta(e, &a, &b, 1);
        if (d.cmds < 1) return;
        a = b;
    }
}

/* Steps until the servers' counters stop moving (two quiet 20 ms windows)
   or max_ms passes; returns the number of snapshots taken. (mem: 0,
   sc_drain). */
static int sc_settle(sc_run *r, int max_ms) {
    double end = now_us() + max_ms * 1000.0, next = now_us() + 20000;
    sc_counters prev, cur;
    int snaps = 1, quiet = 0;
    if (r->e->mem) { sc_drain(r, max_ms); return 0; }
    sc_snap(r->e, &prev);
    while (now_us() < end && quiet < 2) {
        sc_step(r, 5);
        if (now_us() >= next) {
            sc_counters d;
            sc_snap(r->e, &cur);
            snaps++;
            d = sc_delta(r->e, &prev, &cur, 1);
            quiet = d.cmds < 0.5 ? quiet + 1 : 0;
            prev = cur;
            next = now_us() + 20000;
        }
    }
    return snaps;
}

/* Sets up nc clients, one resource of `capacity`, holders and q waiters
   (weights from `weights`, cycled; 0 = all 1), round-robin over the
   clients from client `first_waiter_client` on (clients before it hold the
   first holders). Then measures `rounds` hand-offs. */
/* The idle background of a run: what the server does and how many clients
   wake up while nobody hands anything off (keepalives of Q + 1 sessions,
   MySQL's bell waits timing out, the libraries' pings). With 1,000 clients
   it is most of what the server counts during a hand-off, and it is not the
   hand-off's work: it is printed next to each figure (not subtracted: it
   varies too much between two windows of the same run to subtract). `ms`: how long to watch; `gap_us`: the hand-off p50, the time
   one woken-count pass covers. */
static void sc_background(sc_run *r, int ms, double gap_us, sc_counters *per_s, double *woken_per_pass,
                          double *pass_us) {
    sc_counters a, b;
    double t0, secs, in_pass = 0;
    int passes = 0, woken = 0, i, snaps;
    memset(per_s, 0, sizeof *per_s);
    *woken_per_pass = 0;
    if (!sc_snap(r->e, &a)) return;
    t0 = now_us();
    while (now_us() - t0 < ms * 1000.0) {
        double until = now_us() + (gap_us > 0 ? gap_us : 1000);
        memset(r->woke, 0, (size_t)r->nc * sizeof *r->woke);
        while (now_us() < until) {}               /* nobody ticked, as in a hand-off */
        until = now_us();
        sc_step(r, 0);
        in_pass += now_us() - until;
        for (i = 0; i < r->nc; i++) woken += r->woke[i];
        passes++;
        sc_step(r, 5);
    }
    snaps = 1;
    if (!sc_snap(r->e, &b)) return;
    secs = (now_us() - t0) / 1e6;
    *per_s = sc_delta(r->e, &a, &b, snaps);
    per_s->cmds /= secs; per_s->rows_read /= secs; per_s->notifs /= secs;
    per_s->script_calls /= secs; per_s->script_usec /= secs;
    *woken_per_pass = passes ? (double)woken / passes : 0;
    *pass_us = passes ? in_pass / passes : 0;
}

static sc_result sc_figure(sc_env *e, const char *name, int nc, int q, int capacity, const int *weights, int nweights,
                           int rounds, int per_client) {
    sc_result res;
    sc_run r;
    int i, nw = 0, measured = 0, grants_total = 0, woken_total = 0;
    double *lat = (double *)calloc((size_t)rounds + 1, sizeof *lat);
    sc_counters total, win;
    double rounds_t0 = 0, rounds_secs = 0, win_us = 0, woken_us = 0;
    sc_req *all_head = NULL;
    double setup_end, t_phase;
    memset(&res, 0, sizeof res);
    memset(&r, 0, sizeof r);
    memset(&total, 0, sizeof total);
    memset(&win, 0, sizeof win);
    r.e = e;
    r.nc = nc;
    r.name = name;
    r.capacity = capacity;
    r.c = (simba **)calloc((size_t)nc, sizeof *r.c);
    r.woke = (int *)calloc((size_t)nc, sizeof *r.woke);
    r.io_us = (double *)calloc((size_t)nc, sizeof *r.io_us);
    r.slots = (sc_slot *)calloc((size_t)nc, sizeof *r.slots);
    r.due_us = (double *)calloc((size_t)nc, sizeof *r.due_us);
    r.now_list = (int *)calloc((size_t)nc, sizeof *r.now_list);
    r.now_tmp = (int *)calloc((size_t)nc, sizeof *r.now_tmp);
    r.on_list = (char *)calloc((size_t)nc, 1);
    r.next_due = -1;
    sc_server_quiet(e, SC_QUIET_SERVER_MS);
    r.epfd = epoll_create1(EPOLL_CLOEXEC);
    (void)all_head;
    if (r.epfd < 0) {
        snprintf(res.why, sizeof res.why, "epoll_create1: %s", strerror(errno));
        goto done;
    }
    for (i = 0; i < nc; i++) {
        r.c[i] = sc_client(e, i);
        if (!r.c[i] || !sc_attach(&r, i)) {
            snprintf(res.why, sizeof res.why, "client %d could not be created", i);
            goto done;
        }
    }
    setup_end = now_us() + 120e6;
    t_phase = now_us();
    /* holders first: enqueue until the model says the next one would wait */
    {
        int64_t ahead = 0;
        for (i = 0;; i++) {
            int w = nweights ? weights[nw % nweights] : 1;
            if (!simba_grant_step(&ahead, w, capacity)) break;
            sc_enqueue(&r, per_client ? nc - 1 : i % nc, w);
            nw++;
            if (per_client) break;  /* one holder client (the last one) */
            sc_send(&r);
        }
        double next_trace = now_us() + 1e6;
        while (r.wait_head && now_us() < setup_end && !r.failures) {
            sc_step(&r, 10);
            if (sc_debug > 0 && now_us() > next_trace) {
                next_trace = now_us() + 1e6;
                int nwait = 0;
                sc_req *p;
                for (p = r.wait_head; p; p = p->next) nwait++;
                fprintf(stderr, "  [holders: %d not granted yet]\n", nwait);
            }
        }
        if (r.wait_head || r.failures) {
            snprintf(res.why, sizeof res.why, "the first holders were not granted%s%s", r.failures ? ": " : "",
                     r.fail_msg);
            goto done;
        }
    }
    sc_trace("clients and holders", t_phase);
    t_phase = now_us();
    {
        int queued_target = 0;
        sc_req *p;
        for (i = 0; i < q; i++) {
            int w = nweights ? weights[nw % nweights] : 1;
            sc_enqueue(&r, per_client ? i : i % nc, w);
            nw++;
            sc_send(&r);
            if (r.failures) break;
        }
        for (p = r.held_head; p; p = p->next) queued_target++;
        for (p = r.wait_head; p; p = p->next) queued_target++;
        while (!r.failures && now_us() < setup_end) {
            int n = sc_model_sync(&r);
            if (n == queued_target) break;
            sc_step(&r, 50);
        }
        if (r.failures || now_us() >= setup_end) {
            snprintf(res.why, sizeof res.why, "the %d waiters were not all queued in 120 s%s%s", q,
                     r.failures ? ": " : "", r.fail_msg);
            goto done;
        }
    }
    sc_trace("waiters", t_phase);
    t_phase = now_us();
    sc_settle(&r, 500);
    /* the rounds */
    {
        sc_counters a, b, wa, wb, dw;
        int snaps = 0, guard = 0;
        sc_snap(e, &a);
        rounds_t0 = now_us();
        snaps = 0;
        double rounds_end = now_us() + SC_ROUNDS_S * 1e6;
        while (measured < rounds && !r.failures && guard++ < rounds * 50 &&
               (measured < 3 || now_us() < rounds_end)) {
            sc_req *old = r.held_head;
            int expect, ci, got;
            double t0, end;
            if (!old) { sc_failf(&r, "nobody holds"); break; }
            r.held_head = old->next;
            if (!r.held_head) r.held_tail = NULL;
            r.held_weight -= old->weight;
            old->next = NULL;
            expect = sc_model_expect(&r);
            sc_snap(e, &wa);
            snaps++;
            memset(r.woke, 0, (size_t)nc * sizeof *r.woke);
            r.acquired_since = 0;
            r.npart = 0;
            t0 = now_us();
            old->state = 2;
            simba_release(r.c[old->client], old->lock);
            end = t0 + SC_GRANT_WAIT_MS * 1000.0;
            while ((old->state != 3 || r.acquired_since < expect) && now_us() < end && !r.failures) sc_step(&r, 5);
            if (r.failures) break;
            if (old->state != 3 || r.acquired_since < expect) {
                int queued = sc_queued(&r, 5000), nh = 0, k;
                simba_holder h[8];
                char tail[120] = "";
                sc_req *p;
                for (p = r.held_head; p; p = p->next) nh++;
                if (queued >= 0) {
                    int n = simba_holders(r.c[0], r.info_lock, h, 8);
                    for (k = 0; k < n && k < 8; k++)
                        snprintf(tail + strlen(tail), sizeof tail - strlen(tail), " %s%d", h[k].granted ? "H" : "w",
                                 h[k].weight);
                }
                sc_failf(&r, "round %d: %s after %d s (%d of %d grants; model: %d held, weight %d, next %d; "
                         "server: %d queued:%s)", measured, old->state != 3 ? "no RELEASED" : "grants missing",
                         SC_GRANT_WAIT_MS / 1000, r.acquired_since, expect, nh, r.held_weight,
                         r.wait_head ? r.wait_head->weight : 0, queued, tail);
                break;
            }
            got = r.acquired_since;
            ci = old->client;
            /* the old holder queues again, at the tail; the window closes
               once the clients concerned are quiet */
            sc_enqueue(&r, ci, old->weight);
            free(old);
            sc_quiet(&r, ci, SC_SETTLE_MS);
            sc_snap(e, &wb);
            snaps++;
            win_us += now_us() - t0;
            dw = sc_delta(e, &wa, &wb, 1);
            win = sc_axpy(&win, 1, &dw);
            {
                int k, w = 0;
                sc_req *p;
                for (k = 0; k < nc; k++) {
                    int granted = 0;
                    if (!r.woke[k] || k == ci) continue;
                    for (p = r.held_head; p; p = p->next)
                        if (p->client == k) granted = 1;
                    if (!granted) w++;
                }
                if (sc_debug > 0)
                    fprintf(stderr, "  [round %d: grant %.0f us, window %.0f us, %.0f server ops, %d others woken]\n",
                            measured, r.first_acq - t0, now_us() - t0, dw.cmds, w);
                if (got > 0) { woken_total += w; woken_us += now_us() - t0; }
            }
            /* many clients: their background never stands still, so a short
               settle (the window above already waited for this hand-off) */
            snaps += sc_settle(&r, nc > SC_MANY_CLIENTS ? SC_SETTLE_MANY_MS : SC_SETTLE_MS);
            if (got == 0) continue;   /* not a hand-off: its window's work goes with the others */
            lat[measured++] = r.first_acq - t0;
            grants_total += got;
        }
        sc_snap(e, &b);
        snaps++;
        total = sc_delta(e, &a, &b, snaps);
        rounds_secs = (now_us() - rounds_t0) / 1e6;
    }
    sc_trace("rounds", t_phase);
    t_phase = now_us();
    if (r.failures || measured == 0) {
        snprintf(res.why, sizeof res.why, "%s", r.failures ? r.fail_msg : "no hand-off measured");
        goto done;
    }
    res.ok = 1;
    res.handoffs = measured;
    res.p50 = pct(lat, measured, 0.5);
    res.p99 = pct(lat, measured, 0.99);
    {
        /* The hand-offs' own work: what the windows saw. With many clients,
           less their background at the rate the rest of the rounds (the
           settles) saw: 1,000 sessions' keepalives, rechecks and bell waits
           are no hand-off's work. With a few clients there is next to no
           background, and nothing is taken out (a herd's late re-polls,
           if any, would be). */
        sc_counters gap = sc_axpy(&total, -1, &win), own;
        double gap_us = rounds_secs * 1e6 - win_us, k = nc > SC_MANY_CLIENTS && gap_us > 0 ? win_us / gap_us : 0;
        own = sc_axpy(&win, -k, &gap);
        if (own.cmds < 0) own.cmds = 0;
        if (own.rows_read < 0) own.rows_read = 0;
        if (own.notifs < 0) own.notifs = 0;
        res.cmds_per_ho = own.cmds / measured;
        res.rows_per_ho = own.rows_read / measured;
        res.script_calls_per_ho = own.script_calls / measured;
        if (own.script_calls >= 0.5 * win.script_calls && own.script_calls > 0)
            res.script_usec_per_call = own.script_usec / own.script_calls;
        else res.script_usec_per_call = win.script_calls > 0 ? win.script_usec / win.script_calls : 0;
        res.notifs_per_grant = e->has_notifs ? own.notifs / grants_total : -1;
        res.bg_cmds_per_ho = (win.cmds - own.cmds) / measured;
    }
    res.woken_per_grant = (double)woken_total / grants_total;
    if (nc > SC_MANY_CLIENTS) {
        /* many clients: the idle pass of the loop, and the clients their
           own background wakes in a window's time, taken out of woken */
        sc_counters bg;
        double bg_woken, gap = res.p50 > 0 ? res.p50 : 1000;
        sc_background(&r, 2000, gap, &bg, &bg_woken, &res.pass_us);
        res.bg_woken_per_grant = bg_woken / gap * woken_us / grants_total;
        res.woken_per_grant -= res.bg_woken_per_grant;
        if (res.woken_per_grant < 0) res.woken_per_grant = 0;
    }
done:
    t_phase = now_us();
    for (i = 0; i < nc; i++)
        if (r.c[i]) simba_destroy(r.c[i]);
    sc_trace("destroy", t_phase);
    {
        sc_req *p, *n;
        for (p = r.wait_head; p; p = n) { n = p->next; free(p); }
        for (p = r.held_head; p; p = n) { n = p->next; free(p); }
    }
    free(r.c);
    free(r.woke);
    free(r.io_us);
    free(r.slots);
    free(r.due_us);
    free(r.now_list);
    free(r.now_tmp);
    free(r.on_list);
    if (r.epfd >= 0) close(r.epfd);
    free(lat);
    return res;
}

#endif
