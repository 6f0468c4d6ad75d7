/* leader_poll.c -- leader election from your own poll() loop (`make demo`).

   Three nodes of a service, "node-a", "node-b" and "node-c", contend for the
   leadership of "scheduler"; only the leader does the work. To run without a
   server they live in one process on the in-memory backend; in production
   each node is a process on its own machine and only the backend line in
   start_node() changes. The script:
     1. the first leader works for 500 ms, steps down (simba_release) and
        joins the election again, at the back of the queue;
     2. the second leader works for 500 ms and "crashes" (simba_destroy, no
        release): nobody may lead until its lease runs out on the server,
        ttl + transition = 2.5 s after its last keepalive;
     3. the third leader works for 500 ms, then everyone releases.
   Exit 0 if it all went that way; 1 if two nodes ever led at once, a fence
   went backwards, an error came, or it took longer than 15 s. */
#define SIMBA_IMPLEMENTATION
#include "simba.h"      /* first: it turns on the POSIX we use (poll, clock_gettime) */
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { NODES = 3, FDS_PER_NODE = 8, WORK_MS = 500, GIVE_UP_MS = 15000 };
enum { STEP_DOWN, CRASH, FINISH };
static const int script[] = { STEP_DOWN, CRASH, FINISH };   /* what leader 1, 2, 3 does */

typedef struct node {
    const char *name;
    simba *s;                /* NULL once crashed */
    simba_lock lead;         /* the contend handle */
    int released;            /* its final RELEASED arrived */
} node;

static node nodes[NODES] = { { "node-a", NULL, {0, 0}, 0 }, { "node-b", NULL, {0, 0}, 0 },
                             { "node-c", NULL, {0, 0}, 0 } };
static simba_mem_server *server;
static node *leader;                 /* who holds it now, as far as we know */
static int terms;                    /* leaders so far */
static int64_t work_until = -1;      /* when the current leader ends its turn */
static int64_t storage_fence;        /* the newest fence the protected storage saw */
static int64_t started;
static int failed;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static simba *start_node(const char *name) {
    /* The one line to change for a real backend (include its header, define
       its SIMBA_<X>_IMPLEMENTATION, link its library), e.g.:
         .backend = simba_redis(&(simba_redis_desc){ .host = "127.0.0.1", .port = 6379 }),
         .backend = simba_mysql(&(simba_mysql_desc){ .host = "127.0.0.1", .database = "app" }),
         .backend = simba_zk(&(simba_zk_desc){ .hosts = "127.0.0.1:2181" }),
       Short leases so that the crash hand-over shows within seconds. */
    return simba_create(&(simba_desc){ .backend = simba_mem(server, NULL),
                                       .client_id = name, .ttl_ms = 1500, .transition_ms = 1000 }, NULL);
}

/* printf with the time since the start in front. */
static void say(const char *fmt, ...) {
    va_list ap;
    printf("[%5.2f s] ", (double)(now_ms() - started) / 1000.0);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

/* What the leader protects would do: refuse a write with an older fence. */
static void storage_write(node *n, int64_t fence) {
    if (fence <= storage_fence) {
        say("  FAIL: %s's fence %lld is not newer than %lld\n", n->name, (long long)fence, (long long)storage_fence);
        failed = 1;
    }
    storage_fence = fence;
}

static void on_event(node *n, const simba_event *ev) {
    switch (ev->type) {
    case SIMBA_EVENT_ACQUIRED:
        say("%s is the leader now (fence %lld), working for %d ms\n", n->name, (long long)ev->fence, WORK_MS);
        if (leader) { say("  FAIL: %s still leads\n", leader->name); failed = 1; }
        storage_write(n, ev->fence);
        leader = n;
        terms++;
        work_until = now_ms() + WORK_MS;
        break;
    case SIMBA_EVENT_OWNER:
        if (strcmp(ev->owner, n->name) != 0)
            say("  %s sees leader %s\n", n->name, ev->owner[0] ? ev->owner : "(none)");
        break;
    case SIMBA_EVENT_RELEASED:     /* the server confirmed a release */
        if (ev->lock.id != n->lead.id || ev->lock.gen != n->lead.gen) {
            say("%s's step-down is confirmed\n", n->name);
            break;
        }
        say("%s has left the election\n", n->name);
        n->released = 1;
        if (leader == n) leader = NULL;
        break;
    case SIMBA_EVENT_LOST:     /* a contender stops working at once and queues again by itself */
        say("%s lost the leadership (reason %d), stops working\n", n->name, ev->error);
        if (leader == n) leader = NULL;
        break;
    case SIMBA_EVENT_ERROR:
        say("  FAIL: %s: %s\n", n->name, simba_strerror(ev->error));
        failed = 1;
        break;
    default:
        break;                 /* CONNECTED, DISCONNECTED: simba reconnects by itself */
    }
}

/* The leader's turn is over: do what the script says for this term. */
static void end_turn(void) {
    node *n = leader;
    int i;
    int step = terms <= 3 ? script[terms - 1] : FINISH;
    work_until = -1;
    if (step == STEP_DOWN) {
        say("%s steps down and joins the election again\n", n->name);
        simba_release(n->s, n->lead);  /* from here on it must not act as the leader */
        leader = NULL;
        n->lead = simba_contend(n->s, "scheduler", n);
    } else if (step == CRASH) {
        say("%s crashes (no release): the others wait for its lease to expire\n", n->name);
        simba_destroy(n->s);
        n->s = NULL;
        leader = NULL;         /* a crashed process does not work any more */
    } else {
        say("%s is done; everyone leaves the election\n", n->name);
        for (i = 0; i < NODES; i++) if (nodes[i].s) simba_release(nodes[i].s, nodes[i].lead);
    }
}

/* One round of the loop: poll over every node's fds, then tick every node. */
static void run_once(void) {
    struct pollfd fds[NODES * FDS_PER_NODE];
    int first[NODES], count[NODES], nfds = 0, timeout = -1, i, k;
    for (i = 0; i < NODES; i++) {
        int t;
        first[i] = nfds;
        count[i] = 0;
        if (!nodes[i].s) continue;
        /* backends want one or two fds; we watch at most FDS_PER_NODE */
        count[i] = simba_pollfds(nodes[i].s, fds + nfds, FDS_PER_NODE);
        if (count[i] < 0) count[i] = 0;
        if (count[i] > FDS_PER_NODE) count[i] = FDS_PER_NODE;
        nfds += count[i];
        t = simba_timeout_ms(nodes[i].s);
        if (t >= 0 && (timeout < 0 || t < timeout)) timeout = t;
    }
    if (work_until >= 0) {     /* our own timer goes into the same poll() */
        int t = (int)(work_until > now_ms() ? work_until - now_ms() : 0);
        if (timeout < 0 || t < timeout) timeout = t;
    }
    if (timeout < 0 || timeout > 1000) timeout = 1000;   /* to check GIVE_UP_MS */
    poll(fds, (nfds_t)nfds, timeout);
    for (i = 0; i < NODES; i++) {
        simba_event ev[16];
        int n;
        if (!nodes[i].s) continue;
        n = simba_tick(nodes[i].s, fds + first[i], count[i], ev, 16);
        for (k = 0; k < n; k++) on_event(&nodes[i], &ev[k]);
    }
    for (i = 0, k = 0; i < NODES; i++) if (simba_valid_ms(nodes[i].s, nodes[i].lead) > 0) k++;
    if (k > 1) { say("  FAIL: %d nodes hold the leadership at once\n", k); failed = 1; }
    if (work_until >= 0 && now_ms() >= work_until && leader) end_turn();
}

static int everyone_left(void) {
    int i;
    for (i = 0; i < NODES; i++) if (nodes[i].s && !nodes[i].released) return 0;
    return 1;
}

int main(void) {
    int64_t give_up;
    int i;
    started = now_ms();
    give_up = started + GIVE_UP_MS;
    server = simba_mem_server_create(NULL);
    for (i = 0; i < NODES && server; i++) {
        nodes[i].s = start_node(nodes[i].name);
        if (!nodes[i].s) break;
        nodes[i].lead = simba_contend(nodes[i].s, "scheduler", &nodes[i]);
    }
    if (!server || i < NODES) { say("FAIL: cannot start the nodes\n"); failed = 1; }
    else say("3 nodes contend for \"scheduler\"\n");
    while (!failed && !everyone_left() && now_ms() < give_up) run_once();
    if (!failed && !everyone_left()) { say("FAIL: not finished after %d ms\n", GIVE_UP_MS); failed = 1; }
    if (!failed && terms < 3) { say("FAIL: only %d leaders, expected 3\n", terms); failed = 1; }
    for (i = 0; i < NODES; i++) simba_destroy(nodes[i].s);
    simba_mem_server_destroy(server);
    if (failed) say("FAILED\n");
    else say("ok: %d leaders, %d hand-overs, never two at once\n", terms, terms - 1);
    return failed;
}
