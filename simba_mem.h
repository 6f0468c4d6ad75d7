/*
    simba_mem.h -- the in-memory backend of simba (see simba.h): a lock server
    inside this process, and the fault injection that simba's own tests, the
    simulation and the fuzzers drive.

    Do this:
        #include "simba.h"
        #define SIMBA_MEM_IMPLEMENTATION
        #include "simba_mem.h"
    in *one* C or C++ file (after simba.h, whose implementation may live in
    the same or another file). No library to link.

        simba_mem_server *srv = simba_mem_server_create(NULL);
        simba *s = simba_create(&(simba_desc){ .backend = simba_mem(srv, NULL) }, NULL);
        ...
        simba_destroy(s);
        simba_mem_server_destroy(srv);

    Every client made with simba_mem(srv, ...) is one connection to srv;
    clients of one server contend exactly as they would on a real one. Only
    threads that serialise their calls may share a server (simba has no
    threads of its own).

    CONTENTS (every section starts with a comment ">>name", grep for it;
    --------  a sub-section with ">>name.sub", named as in docs/backends.md)
    Declarations:
        >>options       simba_mem_desc, simba_mem_faults: what the caller sets
        >>constructor   the server, simba_mem(), faults, restart, init, kill,
                        simba_mem_from_url()
        >>stats         struct simba_mem_stats and simba_mem_server_stats()
    Implementation (SIMBA_MEM_IMPLEMENTATION; guard SIMBA_MEM_IMPL_INCLUDED):
        >>internals     private types, helpers, a prototype of every function
        >>connection    answers and pushes on their way, faults, a dropped connection
        >>session       the server's sessions
        >>locks         .queue .rule .enqueue .release .admin .dispatch
        >>wakeups       .fire (who is told what) .deliver (the push handed to the core)
        >>stats         simba_mem_server_stats()
        >>vtable        attach, submit, pollfds, deadline, process, reset, destroy
        >>constructor   the server's lifetime, simba_mem(), simba_mem_from_url()

    HOW IT WORKS
    ------------
    The server is the executable model of what every backend's server does
    (docs/backend-contract.md): one queue per resource, the grant rule of the
    kit (simba_grant_step), sessions that expire ttl + transition after their
    last keepalive by the server's clock, fences that never go backwards, a
    push to the granted client only. It executes an operation when it is
    submitted and queues the answer, which the client reads in its next
    simba_tick when due: faults (delays, drops, reordering, partitions) act on
    that path, and a virtual clock (simba_mem_desc.clock) makes a run
    reproducible.
*/
#ifndef SIMBA_MEM_INCLUDED
#define SIMBA_MEM_INCLUDED

#ifndef SIMBA_INCLUDED
#error "simba_mem.h: include simba.h first"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*>>options: simba_mem_desc, simba_mem_faults */

/* ---- the in-memory backend ----
   A server object in this process; every simba client made with
   simba_mem(srv, ...) is one connection to it. Several clients of one server
   contend exactly as they would on a real one. With fault injection and a
   virtual clock it is also the backbone of simba's own tests. */
typedef struct simba_mem_server simba_mem_server;

typedef struct simba_mem_desc {
    simba_allocator allocator;
    simba_clock clock;          /* the server's clock (ms); default CLOCK_MONOTONIC */
} simba_mem_desc;

/* -- fault injection: the test harness --
   simba's own tests, the simulation (tests/test_sim.c), the fuzzer
   (tests/fuzz/fuzz_mem.c) and the benchmarks drive the mem server through
   what follows: faults per connection (delays, drops, reordering, partitions,
   back-pressure: simba_mem_faults, simba_mem_set_faults), a restart that
   loses all data and the operator's init after it (simba_mem_server_restart,
   simba_mem_server_init), a killed connection (simba_mem_kill) and the
   server's counters (simba_mem_server_stats). An application that embeds the
   mem backend needs none of it: simba_mem(srv, NULL) has no faults. */

/* Faults of one connection (or all, see simba_mem_set_faults). */
typedef struct simba_mem_faults {
    int delay_min_ms, delay_max_ms; /* each reply is delivered after a delay in this range */
    int drop_request_pct;       /* percent of requests lost before the server sees them */
    int drop_reply_pct;         /* percent of replies lost after the server did the work */
    int drop_push_pct;          /* percent of pushes (wake-ups) lost */
    int reorder;                /* replies may overtake each other (random delays per reply) */
    int partitioned;            /* the connection is cut: nothing passes, connects fail */
    int queue_limit;            /* answers in flight beyond which submit says SIMBA_EBUSY (0: none) */
    uint64_t seed;              /* random seed for the above (0 = fixed default) */
} simba_mem_faults;

/*>>constructor: the server, simba_mem(), faults, restart, init, kill, simba_mem_from_url() */

SIMBADEF simba_mem_server *simba_mem_server_create(const simba_mem_desc *desc);
SIMBADEF void simba_mem_server_destroy(simba_mem_server *srv);
/* A backend for one client; the options may be NULL (no faults). */
SIMBADEF simba_backend simba_mem(simba_mem_server *srv, const simba_mem_faults *faults);
/* Change the faults of the connection of client `s` (NULL s: of every connection). */
SIMBADEF int simba_mem_set_faults(simba_mem_server *srv, simba *s, const simba_mem_faults *faults);
/* Lose all state, like a server restart without persistence. Grants are held
   back for one lease after the restart, so that no holder that has not yet
   noticed can overlap with a new one. */
SIMBADEF void simba_mem_server_restart(simba_mem_server *srv);
/* The admin "init" of a server that lost its data: the operator vouches that
   no client holds anything from before (every client was stopped, or they are
   all new), so the restart grace ends now. Never call it while an old holder
   may still be working: two holders would overlap. */
SIMBADEF void simba_mem_server_init(simba_mem_server *srv);
/* Drop the connection of client `s` (its ops fail, it reconnects). */
SIMBADEF int simba_mem_kill(simba_mem_server *srv, simba *s);
/* simba_mem_from_url: "mem:" (nothing else but client options) on server srv. */
SIMBADEF int simba_mem_from_url(simba_url *u, simba_mem_server *srv, simba_backend *out, simba_url_error *err);

/*>>stats: struct simba_mem_stats and simba_mem_server_stats() */

/* Server statistics for tests and benchmarks. */
typedef struct simba_mem_stats {
    uint64_t ops;               /* operations executed */
    uint64_t keepalives;
    uint64_t rule_visits;       /* queue entries the grant rule and the dead-session purge looked
                                   at: O(holders + grants) per operation, not O(queue) (a lookup
                                   by request id is counted in find_steps, not here) */
    uint64_t find_steps;        /* index slots and queue entries looked at to find an entry by its
                                   request id (ENQUEUE, POLL, RELEASE, removals), and sessions
                                   passed over to find one by its id: O(1) expected per lookup,
                                   however long the queue and however many sessions */
    uint64_t moved;             /* queue entries copied to make room for an append (a slide to the
                                   front of the queue's array, or a bigger array): O(1) amortised
                                   per append, however long the queue */
    int resources, entries, sessions;
} simba_mem_stats;
SIMBADEF simba_mem_stats simba_mem_server_stats(simba_mem_server *srv);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_MEM_INCLUDED */

/*--- IMPLEMENTATION ---------------------------------------------------------*/
#ifdef SIMBA_MEM_IMPLEMENTATION
#ifndef SIMBA_MEM_IMPL_INCLUDED
#define SIMBA_MEM_IMPL_INCLUDED

/*>>internals: includes, private types, helpers, a prototype of every function */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/*--- the in-memory backend ---
   The server executes an operation when it is submitted (as a real server
   would on receipt) and queues the answer; the answer reaches the client in
   its next process() when due. Faults act on that path: a dropped request is
   never executed, a dropped reply was executed but never arrives, delays and
   reordering shift the due times. Pushes (wake-ups) travel the same path. */

#define SIMBA__RID_MAX (SIMBA_MAX_SESSION + SIMBA_MAX_ID + 32)

typedef struct simba__mem_entry {
    char request[SIMBA__RID_MAX];
    char session[SIMBA_MAX_SESSION + 1];
    int weight;
    int watch_owner;            /* simba_op.watch_owner: its client is told of owner changes */
    uint32_t hash;              /* of request: a find compares strings only on a match */
    int64_t fence;
    int64_t granted_at;         /* the server's clock at the grant (with fence) */
    uint64_t seq;               /* its resource's append number: the queue is in seq order */
} simba__mem_entry;

typedef struct simba__mem_slot {    /* the request-id index: an entry's hash and seq, 0 seq empty */
    uint32_t hash;
    uint64_t seq;
} simba__mem_slot;

typedef struct simba__mem_res {
    struct simba__mem_res *next;
    char *key;                  /* tenant, 0x01, name */
    const char *name;           /* inside key */
    int capacity;
    int64_t counter;            /* the last fence given */
    simba__mem_entry *base;     /* the allocation: cap entries */
    simba__mem_entry *q;        /* the queue: n entries from q (>= base): the head leaves in O(1) */
    int n, cap;
    int watchers;               /* entries with watch_owner */
    uint64_t seq;               /* the last seq given */
    simba__mem_slot *idx;       /* open addressing (linear probing) over the entries, by request
                                   hash: a find is O(1) expected, not a scan of the queue */
    uint32_t nidx;              /* slots, a power of two, at least 4x the entries (0: none yet) */
} simba__mem_res;

typedef struct simba__mem_conn simba__mem_conn;

typedef struct simba__mem_session {
    struct simba__mem_session *next;
    char id[SIMBA_MAX_SESSION + 1];
    int64_t expires;
    int64_t renewed;            /* the server's clock at its OPEN or latest KEEPALIVE */
    simba__mem_conn *conn;      /* where pushes for it go (NULL once the client is gone) */
    struct simba__mem_session *cnext, *cprev;   /* the sessions of conn (simba__mem_sess_bind) */
} simba__mem_session;

/* The kinds of push (0: an answer, not a push). */
enum { SIMBA__MEM_CHANGED = 1, SIMBA__MEM_GRANTED, SIMBA__MEM_RECHECK };

typedef struct simba__mem_item {    /* an answer or a push on its way to a client */
    int64_t due;
    uint64_t order;
    int wake;                   /* SIMBA__MEM_*: a push; 0: an answer */
    simba_reply reply;
    char *owner, *message, *name, *session, *request;   /* session: whose entry a push is about */
    simba_holder *entries;
} simba__mem_item;

struct simba__mem_conn {
    simba__mem_conn *next;
    simba_mem_server *srv;
    simba *s;
    simba_mem_faults faults;
    uint64_t rng;
    int connected, broken, attempts;
    int64_t reconnect_at, last_due;
    simba__mem_item *items;     /* sorted by (due, order); live items are [head, n) */
    int head, n, cap;
    simba__mem_session *sessions;   /* those whose pushes come here: a client's destroy
                                       lets go of them without a pass over every session */
};

struct simba_mem_server {
    simba_allocator alloc;
    simba_clock clock;
    simba__mem_res **rb;
    uint32_t nrb;
    int nres;
    simba__mem_session **sb;
    uint32_t nsb;
    int nsess;
    simba__mem_conn *conns;
    int epoch_set;
    int64_t grace_until;
    int64_t admin_epoch;        /* DELETE and SET_CAPACITY increase it */
    int64_t fence_floor;        /* the highest fence ever given (kept across delete and restart) */
    uint64_t order;
    const char *answering;      /* the request the op being executed answers (ENQUEUE, POLL) */
    simba_mem_stats stats;
};

typedef struct simba__mem_answer {
    simba_reply r;
    char owner[SIMBA_MAX_SESSION + 1];
    simba_holder *entries;
} simba__mem_answer;

static void *simba__mem_alloc(simba_mem_server *srv, size_t n) { return srv->alloc.alloc(n, srv->alloc.user); }
static void simba__mem_free(simba_mem_server *srv, void *p) { if (p) srv->alloc.free(p, srv->alloc.user); }
/* The server's clock, held inside 0 .. SIMBA_CLOCK_MAX_MS: expiries and
   fences taken from it cannot overflow. A clock stuck at an end expires
   nobody (a dead holder is not taken over), which costs liveness, never a
   second holder: a client believes only until its own deadline. */
static int64_t simba__mem_now(simba_mem_server *srv) {
    int64_t t = srv->clock.now_ms(srv->clock.user);
    return t < 0 ? 0 : t > SIMBA_CLOCK_MAX_MS ? SIMBA_CLOCK_MAX_MS : t;
}

static void simba__mem_copy(char *dst, size_t cap, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
}

/* FNV-1a: the server's hash tables (names, request ids, session ids). */
static uint32_t simba__mem_hash(const char *s) {
    uint32_t h = 2166136261u;
    while (*s) { h ^= (unsigned char)*s++; h *= 16777619u; }
    return h;
}

/* splitmix64: the faults' dice; not for secrets. */
static uint64_t simba__mem_mix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Every function of this file, so that the sections follow the one skeleton
   of the backend headers whatever calls what. */
static void *simba__mem_alloc(simba_mem_server *srv, size_t n);
static void simba__mem_free(simba_mem_server *srv, void *p);
static int64_t simba__mem_now(simba_mem_server *srv);
static void simba__mem_copy(char *dst, size_t cap, const char *src);
static uint32_t simba__mem_hash(const char *s);
static uint64_t simba__mem_mix64(uint64_t *state);
static int simba__mem_rand_pct(simba__mem_conn *c, int pct);
static int64_t simba__mem_due(simba__mem_conn *c, int64_t now);
static void simba__mem_item_free(simba_mem_server *srv, simba__mem_item *it);
static char *simba__mem_strdup(simba_mem_server *srv, const char *s);
static void simba__mem_push_item(simba__mem_conn *c, simba__mem_item *it);
static void simba__mem_deliver(simba__mem_conn *c, simba__mem_item *it);
static void simba__mem_disconnect(simba__mem_conn *c, int why, int report, int complete);
static simba__mem_conn *simba__mem_conn_of(simba_mem_server *srv, simba *s);
static uint32_t simba__mem_sess_bucket(const char *id, uint32_t nsb);
static simba__mem_session **simba__mem_sess_slot(simba_mem_server *srv, const char *id);
static void simba__mem_rehash_sess(simba_mem_server *srv);
static simba__mem_session *simba__mem_sess_live(simba_mem_server *srv, const char *id, int64_t now);
static void simba__mem_sess_bind(simba__mem_session *ss, simba__mem_conn *c);
static void simba__mem_sess_remove(simba_mem_server *srv, const char *id);
static void simba__mem_close(simba_mem_server *srv, const char *session, int64_t now);
static uint32_t simba__mem_res_hash(const char *tenant, const char *name);
static simba__mem_res *simba__mem_res_find(simba_mem_server *srv, const char *tenant, const char *name);
static void simba__mem_rehash_res(simba_mem_server *srv);
static simba__mem_res *simba__mem_res_get(simba_mem_server *srv, const char *tenant, const char *name, int capacity);
static void simba__mem_res_delete(simba_mem_server *srv, simba__mem_res *r);
static uint32_t simba__mem_idx_home(uint32_t hash, uint32_t nidx);
static int simba__mem_pos_of_seq(simba_mem_server *srv, const simba__mem_res *r, uint64_t seq);
static int simba__mem_find(simba_mem_server *srv, const simba__mem_res *r, const char *request);
static void simba__mem_idx_put(simba__mem_slot *idx, uint32_t nidx, uint32_t hash, uint64_t seq);
static int simba__mem_idx_reserve(simba_mem_server *srv, simba__mem_res *r);
static void simba__mem_idx_remove(simba_mem_server *srv, simba__mem_res *r, const simba__mem_entry *e);
static void simba__mem_remove_at(simba_mem_server *srv, simba__mem_res *r, int i);
static int simba__mem_append(simba_mem_server *srv, simba__mem_res *r, const simba_op *op, int weight);
static void simba__mem_grant(simba_mem_server *srv, simba__mem_res *r, simba__mem_entry *e, int64_t now, simba__mem_conn *quiet);
static void simba__mem_evaluate(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet);
static const char *simba__mem_owner(const simba__mem_res *r);
static void simba__mem_changed(simba_mem_server *srv, simba__mem_res *r, const char *owner_before, int64_t now, simba__mem_conn *quiet);
static int simba__mem_purge(simba_mem_server *srv, simba__mem_res *r, int64_t now);
static void simba__mem_touch(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet);
static int simba__mem_fits_now(simba_mem_server *srv, simba__mem_res **rs, const simba_op *op, int64_t now);
static int simba__mem_min_hint(int a, int64_t b);
static void simba__mem_state(simba_mem_server *srv, simba__mem_res **rs, int nres, const char *request, int64_t now, simba__mem_answer *a);
static void simba__mem_enqueue(simba_mem_server *srv, simba__mem_conn *c, const simba_op *op, int64_t now, simba__mem_answer *a);
static int simba__mem_lookup_all(simba_mem_server *srv, const simba_op *op, simba__mem_res **rs);
static void simba__mem_release(simba_mem_server *srv, simba__mem_conn *c, const simba_op *op, int64_t now);
static void simba__mem_holder_times(simba_mem_server *srv, const simba__mem_entry *e, int64_t now, simba_holder *h);
static void simba__mem_inspect(simba_mem_server *srv, const simba_op *op, int64_t now, simba__mem_answer *a);
static void simba__mem_execute(simba_mem_server *srv, simba__mem_conn *c, const simba_op *op, simba__mem_answer *a);
static void simba__mem_send_wake(simba__mem_conn *c, int kind, const char *name, const char *session, const char *request, int64_t fence, int64_t now);
static int simba__mem_has_watchers(const simba__mem_res *r);
static void simba__mem_tell(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet);
static void simba__mem_tell_watchers(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet);
static void simba__mem_wake_all(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet);
static void simba__mem_push_to_core(simba *s, const simba__mem_item *it);
static int simba__mem_attach(void *impl, simba *s);
static int simba__mem_submit(void *impl, const simba_op *op);
static int simba__mem_pollfds(void *impl, struct pollfd *fds, int max);
static int64_t simba__mem_deadline(void *impl);
static void simba__mem_process(void *impl, const struct pollfd *fds, int nfds);
static void simba__mem_reset(void *impl, int why);
static void simba__mem_destroy(void *impl);
static void simba__mem_clear(simba_mem_server *srv);

/*>>connection: answers and pushes on their way to a client, faults, a dropped connection */

static int simba__mem_rand_pct(simba__mem_conn *c, int pct) {
    return pct > 0 && (int)(simba__mem_mix64(&c->rng) % 100) < pct;
}

static int64_t simba__mem_due(simba__mem_conn *c, int64_t now) {
    int lo = c->faults.delay_min_ms, hi = c->faults.delay_max_ms, d = lo;
    int64_t due;
    if (hi > lo) d = lo + (int)(simba__mem_mix64(&c->rng) % (uint64_t)(hi - lo + 1));
    due = now + d;
    if (!c->faults.reorder && due < c->last_due) due = c->last_due;   /* keep FIFO */
    c->last_due = due;
    return due;
}

static void simba__mem_item_free(simba_mem_server *srv, simba__mem_item *it) {
    simba__mem_free(srv, it->owner); simba__mem_free(srv, it->message);
    simba__mem_free(srv, it->name); simba__mem_free(srv, it->request);
    simba__mem_free(srv, it->session);
    simba__mem_free(srv, it->entries);
}

static char *simba__mem_strdup(simba_mem_server *srv, const char *s) {
    return simba_allocator_strdup(&srv->alloc, s);   /* NULL stays NULL */
}

/* Queue an item for connection c, keeping the list sorted by due time. */
static void simba__mem_push_item(simba__mem_conn *c, simba__mem_item *it) {
    simba_mem_server *srv = c->srv;
    int k;
    if (c->n == c->cap) {
        if (c->head > 0) {
            memmove(c->items, c->items + c->head, sizeof(simba__mem_item) * (size_t)(c->n - c->head));
            c->n -= c->head; c->head = 0;
        }
        if (c->n == c->cap) {
            int ncap = c->cap ? c->cap * 2 : 32;
            simba__mem_item *ni = (simba__mem_item *)simba__mem_alloc(srv, sizeof(simba__mem_item) * (size_t)ncap);
            if (!ni) { simba__mem_item_free(srv, it); return; }   /* as if lost on the wire */
            if (c->n) memcpy(ni, c->items, sizeof(simba__mem_item) * (size_t)c->n);
            simba__mem_free(srv, c->items);
            c->items = ni; c->cap = ncap;
        }
    }
    it->order = ++srv->order;
    for (k = c->n; k > c->head && c->items[k - 1].due > it->due; k--) {}
    memmove(c->items + k + 1, c->items + k, sizeof(simba__mem_item) * (size_t)(c->n - k));
    c->items[k] = *it;
    c->n++;
    /* push mode: the answer is due for a client that may be in no simba call
       right now (another client of this server made the change); a real
       server would make its socket readable, here its timer is re-armed */
    if (c->s) simba_backend_due(c->s);
}

/* Hand an item to the core; the item's strings live during the call. */
static void simba__mem_deliver(simba__mem_conn *c, simba__mem_item *it) {
    if (it->wake) simba__mem_push_to_core(c->s, it);
    else {
        it->reply.owner = it->owner;
        it->reply.message = it->message;
        it->reply.entries = it->entries;
        simba_backend_complete(c->s, &it->reply);
    }
    simba__mem_item_free(c->srv, it);
}

/* Drop the connection: undelivered answers and pushes vanish. `report`: tell
   the core the connection is down; `complete`: fail the undelivered answers
   with SIMBA_EDISCONNECTED (only for a drop the backend finds by itself in
   process(): after reset() and destroy() the core fails the ops in flight). */
static void simba__mem_disconnect(simba__mem_conn *c, int why, int report, int complete) {
    int64_t now = simba__mem_now(c->srv);
    c->connected = 0;
    c->broken = 0;
    c->last_due = 0;                     /* a new connection keeps no FIFO order with the old one */
    c->reconnect_at = now + simba_backend_backoff_ms(c->s, ++c->attempts);
    if (report) simba_backend_state(c->s, 0, why, "connection dropped");
    while (c->head < c->n) {
        simba__mem_item it = c->items[c->head++];
        if (complete && !it.wake) {
            it.reply.status = SIMBA_EDISCONNECTED;
            it.reply.granted = 0;
            simba_backend_complete(c->s, &it.reply);
        }
        simba__mem_item_free(c->srv, &it);
    }
    c->head = c->n = 0;
}

static simba__mem_conn *simba__mem_conn_of(simba_mem_server *srv, simba *s) {
    simba__mem_conn *c;
    for (c = srv->conns; c; c = c->next) if (c->s == s) return c;
    return NULL;
}

SIMBADEF int simba_mem_set_faults(simba_mem_server *srv, simba *s, const simba_mem_faults *faults) {
    simba__mem_conn *c;
    simba_mem_faults none;
    if (!srv) return SIMBA_EINVAL;
    if (!faults) { memset(&none, 0, sizeof none); faults = &none; }
    for (c = srv->conns; c; c = c->next) {
        if (s && c->s != s) continue;
        c->faults = *faults;
        if (faults->seed) c->rng = faults->seed;
        if (s) return SIMBA_OK;
    }
    return s ? SIMBA_ESTALE : SIMBA_OK;
}

SIMBADEF int simba_mem_kill(simba_mem_server *srv, simba *s) {
    simba__mem_conn *c = srv ? simba__mem_conn_of(srv, s) : NULL;
    if (!c) return SIMBA_ESTALE;
    if (c->connected) c->broken = 1;
    return SIMBA_OK;
}

/*>>session: the server's sessions: find, renew, end */

static uint32_t simba__mem_sess_bucket(const char *id, uint32_t nsb) { return simba__mem_idx_home(simba__mem_hash(id), nsb); }

static simba__mem_session **simba__mem_sess_slot(simba_mem_server *srv, const char *id) {
    simba__mem_session **pp = &srv->sb[simba__mem_sess_bucket(id, srv->nsb)];
    while (*pp && strcmp((*pp)->id, id) != 0) { srv->stats.find_steps++; pp = &(*pp)->next; }
    return pp;
}

/* Twice the buckets once the sessions fill a quarter of them: a session is
   looked up in every grant and purge step, so its chain must stay short
   however many clients the server has. */
static void simba__mem_rehash_sess(simba_mem_server *srv) {
    uint32_t nb = srv->nsb * 2, i;
    simba__mem_session **b = (simba__mem_session **)simba__mem_alloc(srv, sizeof(void *) * nb);
    if (!b) return;                          /* longer chains, still correct */
    memset(b, 0, sizeof(void *) * nb);
    for (i = 0; i < srv->nsb; i++) {
        simba__mem_session *ss = srv->sb[i], *nx;
        for (; ss; ss = nx) {
            uint32_t k = simba__mem_sess_bucket(ss->id, nb);
            nx = ss->next;
            ss->next = b[k]; b[k] = ss;
        }
    }
    simba__mem_free(srv, srv->sb);
    srv->sb = b; srv->nsb = nb;
}

static simba__mem_session *simba__mem_sess_live(simba_mem_server *srv, const char *id, int64_t now) {
    simba__mem_session *ss = *simba__mem_sess_slot(srv, id);
    return ss && ss->expires > now ? ss : NULL;
}

/* Point ss's pushes at connection c (NULL: nowhere), keeping each
   connection's list of its sessions. */
static void simba__mem_sess_bind(simba__mem_session *ss, simba__mem_conn *c) {
    if (ss->conn == c) return;
    if (ss->conn) {
        if (ss->cprev) ss->cprev->cnext = ss->cnext;
        else ss->conn->sessions = ss->cnext;
        if (ss->cnext) ss->cnext->cprev = ss->cprev;
    }
    ss->cnext = ss->cprev = NULL;
    ss->conn = c;
    if (c) {
        ss->cnext = c->sessions;
        if (c->sessions) c->sessions->cprev = ss;
        c->sessions = ss;
    }
}

static void simba__mem_sess_remove(simba_mem_server *srv, const char *id) {
    simba__mem_session **pp = simba__mem_sess_slot(srv, id), *ss = *pp;
    if (!ss) return;
    simba__mem_sess_bind(ss, NULL);
    *pp = ss->next;
    simba__mem_free(srv, ss);
    srv->nsess--;
}

/* Remove every entry of a session (CLOSE). */
static void simba__mem_close(simba_mem_server *srv, const char *session, int64_t now) {
    uint32_t b;
    simba__mem_sess_remove(srv, session);
    for (b = 0; b < srv->nrb; b++) {
        simba__mem_res *r;
        for (r = srv->rb[b]; r; r = r->next) {
            int i, hit = 0;
            for (i = 0; i < r->n; i++) if (strcmp(r->q[i].session, session) == 0) { hit = 1; break; }
            if (!hit) continue;
            simba__mem_touch(srv, r, now, NULL);   /* the head, grants, owner watchers */
            simba__mem_purge(srv, r, now);         /* and its entries further back: CLOSE leaves nothing */
        }
    }
}

/*>>locks: resources and queues, the grant rule, ENQUEUE/POLL, RELEASE, INSPECT, one op executed */

/*>>locks.queue: resources, their queues and the index by request id */

static uint32_t simba__mem_res_hash(const char *tenant, const char *name) {
    return simba__mem_hash(tenant) * 31u ^ simba__mem_hash(name);
}

static simba__mem_res *simba__mem_res_find(simba_mem_server *srv, const char *tenant, const char *name) {
    simba__mem_res *r = srv->rb[simba__mem_res_hash(tenant, name) & (srv->nrb - 1)];
    size_t tl = strlen(tenant);
    for (; r; r = r->next)
        if (strncmp(r->key, tenant, tl) == 0 && r->key[tl] == 1 && strcmp(r->name, name) == 0) return r;
    return NULL;
}

static void simba__mem_rehash_res(simba_mem_server *srv) {
    uint32_t nb = srv->nrb * 2, i;
    simba__mem_res **b = (simba__mem_res **)simba__mem_alloc(srv, sizeof(void *) * nb);
    if (!b) return;                          /* longer chains, still correct */
    memset(b, 0, sizeof(void *) * nb);
    for (i = 0; i < srv->nrb; i++) {
        simba__mem_res *r = srv->rb[i], *nx;
        for (; r; r = nx) {
            char tenant[SIMBA_MAX_TENANT + 1];
            uint32_t k;
            nx = r->next;
            simba__mem_copy(tenant, sizeof tenant, r->key);
            tenant[r->name - r->key - 1] = 0;
            k = simba__mem_res_hash(tenant, r->name) & (nb - 1);
            r->next = b[k]; b[k] = r;
        }
    }
    simba__mem_free(srv, srv->rb);
    srv->rb = b; srv->nrb = nb;
}

static simba__mem_res *simba__mem_res_get(simba_mem_server *srv, const char *tenant, const char *name, int capacity) {
    simba__mem_res *r = simba__mem_res_find(srv, tenant, name);
    size_t tl = strlen(tenant), nl = strlen(name);
    uint32_t k;
    if (r) return r;
    if ((uint32_t)srv->nres >= srv->nrb) simba__mem_rehash_res(srv);
    r = (simba__mem_res *)simba__mem_alloc(srv, sizeof *r);
    if (!r) return NULL;
    memset(r, 0, sizeof *r);
    r->key = (char *)simba__mem_alloc(srv, tl + nl + 2);
    if (!r->key) { simba__mem_free(srv, r); return NULL; }
    memcpy(r->key, tenant, tl); r->key[tl] = 1; memcpy(r->key + tl + 1, name, nl + 1);
    r->name = r->key + tl + 1;
    r->capacity = capacity > 0 ? capacity : 1;
    k = simba__mem_res_hash(tenant, name) & (srv->nrb - 1);
    r->next = srv->rb[k]; srv->rb[k] = r;
    srv->nres++;
    return r;
}

static void simba__mem_res_delete(simba_mem_server *srv, simba__mem_res *r) {
    simba__mem_res **pp;
    uint32_t i;
    for (i = 0; i < srv->nrb; i++)
        for (pp = &srv->rb[i]; *pp; pp = &(*pp)->next)
            if (*pp == r) { *pp = r->next; goto found; }
found:
    simba__mem_free(srv, r->base);
    simba__mem_free(srv, r->idx);
    simba__mem_free(srv, r->key);
    simba__mem_free(srv, r);
    srv->nres--;
}

/* An index slot's home: FNV's low bits alone cluster on ids that differ in
   their last characters ("<session>~<n>"), so they are mixed first. */
static uint32_t simba__mem_idx_home(uint32_t hash, uint32_t nidx) {
    hash ^= hash >> 16; hash *= 0x85ebca6bu;
    hash ^= hash >> 13; hash *= 0xc2b2ae35u;
    hash ^= hash >> 16;
    return hash & (nidx - 1);
}

/* The position of the entry numbered `seq` in r's queue, or -1. Seqs grow
   along the queue and each removal leaves a gap, so the entry is at most
   seq - q[0].seq from the head: exactly there while nobody left from the
   middle (the hand-off case), else a binary search below that bound. */
static int simba__mem_pos_of_seq(simba_mem_server *srv, const simba__mem_res *r, uint64_t seq) {
    uint64_t bound;
    int lo = 0, hi;
    if (!r->n || seq < r->q[0].seq) return -1;
    bound = seq - r->q[0].seq;
    hi = bound < (uint64_t)r->n ? (int)bound : r->n - 1;
    srv->stats.find_steps++;
    if (r->q[hi].seq == seq) return hi;
    while (lo < hi) {                        /* in [lo, hi): q[hi].seq > seq */
        int mid = lo + (hi - lo) / 2;
        srv->stats.find_steps++;
        if (r->q[mid].seq < seq) lo = mid + 1;
        else if (r->q[mid].seq > seq) hi = mid;
        else return mid;
    }
    return -1;
}

/* The position in r's queue of the entry whose request id is `request`, or -1. */
static int simba__mem_find(simba_mem_server *srv, const simba__mem_res *r, const char *request) {
    uint32_t h = simba__mem_hash(request), mask = r->nidx - 1, k;
    if (!r->nidx) return -1;
    for (k = simba__mem_idx_home(h, r->nidx); r->idx[k].seq; k = (k + 1) & mask) {
        int pos;
        srv->stats.find_steps++;
        if (r->idx[k].hash != h) continue;
        pos = simba__mem_pos_of_seq(srv, r, r->idx[k].seq);
        if (pos >= 0 && strcmp(r->q[pos].request, request) == 0) return pos;
    }
    return -1;
}

static void simba__mem_idx_put(simba__mem_slot *idx, uint32_t nidx, uint32_t hash, uint64_t seq) {
    uint32_t k = simba__mem_idx_home(hash, nidx);
    while (idx[k].seq) k = (k + 1) & (nidx - 1);
    idx[k].hash = hash;
    idx[k].seq = seq;
}

/* Room in r's index for one more entry: at most a quarter full, so probes
   stay short whatever the queue's length. Rebuilt from the queue on growth. */
static int simba__mem_idx_reserve(simba_mem_server *srv, simba__mem_res *r) {
    uint32_t n = r->nidx ? r->nidx * 2 : 8;
    simba__mem_slot *idx;
    int i;
    if ((uint64_t)(r->n + 1) * 4 <= r->nidx) return SIMBA_OK;
    while ((uint64_t)(r->n + 1) * 4 > n) n *= 2;
    idx = (simba__mem_slot *)simba__mem_alloc(srv, sizeof(simba__mem_slot) * n);
    if (!idx) return SIMBA_ENOMEM;
    memset(idx, 0, sizeof(simba__mem_slot) * n);
    for (i = 0; i < r->n; i++) simba__mem_idx_put(idx, n, r->q[i].hash, r->q[i].seq);
    simba__mem_free(srv, r->idx);
    r->idx = idx;
    r->nidx = n;
    return SIMBA_OK;
}

/* Take the entry `e` out of r's index: linear probing's backward shift, so
   no tombstones build up however many entries come and go. */
static void simba__mem_idx_remove(simba_mem_server *srv, simba__mem_res *r, const simba__mem_entry *e) {
    uint32_t mask = r->nidx - 1, k, j;
    if (!r->nidx) return;
    for (k = simba__mem_idx_home(e->hash, r->nidx); r->idx[k].seq && r->idx[k].seq != e->seq; k = (k + 1) & mask) srv->stats.find_steps++;
    if (!r->idx[k].seq) return;
    for (j = (k + 1) & mask; r->idx[j].seq; j = (j + 1) & mask) {
        uint32_t home = simba__mem_idx_home(r->idx[j].hash, r->nidx);
        srv->stats.find_steps++;
        /* j's slot may move into the hole at k unless its home lies in (k, j] */
        if (((j - home) & mask) >= ((j - k) & mask)) { r->idx[k] = r->idx[j]; k = j; }
    }
    r->idx[k].seq = 0;
}

static void simba__mem_remove_at(simba_mem_server *srv, simba__mem_res *r, int i) {
    simba__mem_idx_remove(srv, r, &r->q[i]);
    if (r->q[i].watch_owner) r->watchers--;
    if (i == 0) r->q++;         /* the head (a holder leaving): O(1), however long the queue */
    else memmove(r->q + i, r->q + i + 1, sizeof(simba__mem_entry) * (size_t)(r->n - i - 1));
    r->n--;
}

static int simba__mem_append(simba_mem_server *srv, simba__mem_res *r, const simba_op *op, int weight) {
    simba__mem_entry *e;
    int front;
    if (simba__mem_idx_reserve(srv, r) != SIMBA_OK) return SIMBA_ENOMEM;
    /* The tail at the array's end: slide back to the front only when the
       room there is at least the queue's length, so that a slide's copies
       are paid for by as many appends since the last one (a hand-off
       removes the head and appends at the tail: the queue creeps along);
       with less room the array doubles instead. */
    front = r->q ? (int)(r->q - r->base) : 0;   /* free slots before the head */
    if (front + r->n == r->cap && front >= r->n && front > 0) {
        memmove(r->base, r->q, sizeof(simba__mem_entry) * (size_t)r->n);
        srv->stats.moved += (uint64_t)r->n;
        r->q = r->base;
        front = 0;
    }
    if (front + r->n == r->cap) {
        int ncap = r->cap ? r->cap * 2 : 4;
        simba__mem_entry *nq = (simba__mem_entry *)simba__mem_alloc(srv, sizeof(simba__mem_entry) * (size_t)ncap);
        if (!nq) return SIMBA_ENOMEM;
        if (r->n) memcpy(nq, r->q, sizeof(simba__mem_entry) * (size_t)r->n);
        srv->stats.moved += (uint64_t)r->n;
        simba__mem_free(srv, r->base);
        r->base = r->q = nq; r->cap = ncap;
    }
    e = &r->q[r->n++];
    memset(e, 0, sizeof *e);
    simba__mem_copy(e->request, sizeof e->request, op->request);
    simba__mem_copy(e->session, sizeof e->session, op->session);
    e->weight = weight;
    e->watch_owner = op->watch_owner;
    if (e->watch_owner) r->watchers++;
    e->hash = simba__mem_hash(e->request);
    e->seq = ++r->seq;
    simba__mem_idx_put(r->idx, r->nidx, e->hash, e->seq);
    return SIMBA_OK;
}

/*>>locks.rule: the grant rule (the prefix rule of simba_grant_step) and the lazy purge of dead sessions */

/* Give a fence to an entry the prefix rule grants now and push the grant to
   its client, except to `quiet` (the caller) for the request its answer is
   about. Its other requests are pushed like anyone's: a RELEASE that hands
   the lock to a waiter of the same client answers only the release. */
static void simba__mem_grant(simba_mem_server *srv, simba__mem_res *r, simba__mem_entry *e, int64_t now,
                             simba__mem_conn *quiet) {
    /* above the resource's counter, the clock and every fence this server
       ever gave: a deleted (or restarted) resource starts from zero again,
       and its fences must still never go backwards */
    int64_t f = simba_grant_fence(r->counter, now * 1000);
    simba__mem_session *ss = *simba__mem_sess_slot(srv, e->session);
    if (f <= srv->fence_floor) f = srv->fence_floor + 1;
    e->fence = r->counter = srv->fence_floor = f;
    e->granted_at = now;
    if (ss && !(ss->conn == quiet && srv->answering && strcmp(e->request, srv->answering) == 0))
        simba__mem_send_wake(ss->conn, SIMBA__MEM_GRANTED, r->name, e->session, e->request, e->fence, now);
}

/* The prefix rule, from the head, as far as it can matter: the holders (at
   most the capacity's worth, or the few left over after a capacity was
   lowered) and the waiters it grants now, up to the first it cannot. Dead
   sessions' entries are dropped when this walk reaches them, i.e. lazily,
   when they hold or are next: one behind the first blocked waiter cannot
   change a grant yet. So the work is O(holders + grants), not O(queue). */
static void simba__mem_evaluate(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet) {
    int i = 0, blocked = now < srv->grace_until;   /* restart grace: no grants, still purge */
    int64_t sum = 0;            /* weights near INT_MAX: an int sum would overflow and over-grant */
    while (i < r->n) {
        simba__mem_entry *e = &r->q[i];
        srv->stats.rule_visits++;
        if (!simba__mem_sess_live(srv, e->session, now)) { simba__mem_remove_at(srv, r, i); continue; }
        if (!blocked && !simba_grant_step(&sum, e->weight, r->capacity)) blocked = 1;
        if (!e->fence) {
            if (blocked) break;
            simba__mem_grant(srv, r, e, now, quiet);
        }
        i++;
    }
}

static const char *simba__mem_owner(const simba__mem_res *r) {
    return r->n && r->q[0].fence ? r->q[0].session : NULL;
}

/* After a change to r: grant (the granted are pushed their grant), and tell
   the owner watchers when the owner changed. Nobody else is woken: a waiter
   learns of its grant from its own push, so an owner change is no herd. */
static void simba__mem_changed(simba_mem_server *srv, simba__mem_res *r, const char *owner_before,
                               int64_t now, simba__mem_conn *quiet) {
    const char *after;
    simba__mem_evaluate(srv, r, now, quiet);
    after = simba__mem_owner(r);
    if ((owner_before == NULL) != (after == NULL) || (after && strcmp(owner_before, after) != 0))
        simba__mem_tell_watchers(srv, r, now, quiet);
}

/* Remove the entries of dead sessions. Returns whether anything changed. */
static int simba__mem_purge(simba_mem_server *srv, simba__mem_res *r, int64_t now) {
    int i, changed = 0;
    for (i = 0; i < r->n; ) {
        srv->stats.rule_visits++;
        if (!simba__mem_sess_live(srv, r->q[i].session, now)) { simba__mem_remove_at(srv, r, i); changed = 1; }
        else i++;
    }
    return changed;
}

/* Touch a resource: the walk of the prefix rule (grants, lazy purge), then owner watchers. */
static void simba__mem_touch(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet) {
    char before[SIMBA_MAX_SESSION + 1];
    const char *o = simba__mem_owner(r);
    simba__mem_copy(before, sizeof before, o);
    simba__mem_changed(srv, r, o ? before : NULL, now, quiet);
}

/* Would a new request of these weights be granted at once everywhere? */
static int simba__mem_fits_now(simba_mem_server *srv, simba__mem_res **rs, const simba_op *op, int64_t now) {
    int i, j;
    if (now < srv->grace_until) return 0;
    for (i = 0; i < op->nres; i++) {
        int64_t ahead = 0;
        for (j = 0; j < rs[i]->n; j++) {   /* the sum only grows: one entry that does not fit is enough */
            srv->stats.rule_visits++;
            if (!simba_grant_step(&ahead, rs[i]->q[j].weight, rs[i]->capacity)) return 0;
        }
        if (!simba_grant_step(&ahead, op->res[i].weight, rs[i]->capacity)) return 0;
    }
    return 1;
}

/*>>locks.enqueue: ENQUEUE and POLL: append or find, then the answer */

static int simba__mem_min_hint(int a, int64_t b) {
    if (b < 0) b = 0;
    if (b > 0x3fffffff) b = 0x3fffffff;
    return (a < 0 || b < a) ? (int)b : a;
}

/* The state of `request` in its resources, into a. */
static void simba__mem_state(simba_mem_server *srv, simba__mem_res **rs, int nres, const char *request,
                             int64_t now, simba__mem_answer *a) {
    int i, j, idx0 = -1;
    a->r.granted = 1;
    a->r.recheck_ms = -1;
    for (i = 0; i < nres; i++) {
        int idx = simba__mem_find(srv, rs[i], request);
        if (idx < 0) { a->r.status = SIMBA_ENOTFOUND; return; }
        if (i == 0) idx0 = idx;
        a->r.fence[i] = rs[i]->q[idx].fence;
        if (!a->r.fence[i]) a->r.granted = 0;
        /* the holders' expiries, and the first waiter's: the only ones that can
           move the queue before a push says it moved (dead ones further back
           are dropped when the walk reaches them) */
        for (j = 0; j < idx; j++) {
            simba__mem_session *ss = *simba__mem_sess_slot(srv, rs[i]->q[j].session);
            srv->stats.rule_visits++;
            if (ss) a->r.recheck_ms = simba__mem_min_hint(a->r.recheck_ms, ss->expires - now);
            if (!rs[i]->q[j].fence) break;
        }
    }
    if (now < srv->grace_until) {
        a->r.recheck_ms = simba__mem_min_hint(a->r.recheck_ms, srv->grace_until - now);
        a->r.grace_ms = simba__mem_min_hint(-1, srv->grace_until - now);
    }
    a->r.capacity = rs[0]->capacity;
    a->r.ahead = idx0;
    for (i = 0; i < rs[0]->n && rs[0]->q[i].fence; i++) a->r.held++;   /* the holders are a prefix */
    simba__mem_copy(a->owner, sizeof a->owner, simba__mem_owner(rs[0]));
    a->r.owner = a->owner[0] ? a->owner : NULL;
}

static void simba__mem_enqueue(simba_mem_server *srv, simba__mem_conn *c, const simba_op *op, int64_t now,
                               simba__mem_answer *a) {
    simba__mem_res *rs[SIMBA_MAX_RESOURCES];
    int i, existing = 0;
    for (i = 0; i < op->nres; i++) {
        rs[i] = simba__mem_res_get(srv, op->tenant, op->res[i].name, op->res[i].capacity);
        if (!rs[i]) { a->r.status = SIMBA_ENOMEM; return; }
        simba__mem_touch(srv, rs[i], now, c);
        if (op->res[i].weight > rs[i]->capacity) { a->r.status = SIMBA_ECAPACITY; return; }
    }
    for (i = 0; i < op->nres; i++) {
        int idx = simba__mem_find(srv, rs[i], op->request);
        if (idx < 0) continue;
        if (strcmp(rs[i]->q[idx].session, op->session) != 0) { a->r.status = SIMBA_EKEYBUSY; return; }
        existing = 1;
    }
    if (!existing) {
        if (op->try_only && !simba__mem_fits_now(srv, rs, op, now)) {
            a->r.recheck_ms = -1;
            a->r.capacity = rs[0]->capacity;
            if (now < srv->grace_until) a->r.grace_ms = simba__mem_min_hint(-1, srv->grace_until - now);
            return;
        }
        for (i = 0; i < op->nres; i++) {
            if (simba__mem_append(srv, rs[i], op, op->res[i].weight) != SIMBA_OK) { a->r.status = SIMBA_ENOMEM; return; }
            simba__mem_touch(srv, rs[i], now, c);
        }
    }
    simba__mem_state(srv, rs, op->nres, op->request, now, a);
}

/*>>locks.release: RELEASE: remove, then grant the next */

static int simba__mem_lookup_all(simba_mem_server *srv, const simba_op *op, simba__mem_res **rs) {
    int i;
    for (i = 0; i < op->nres; i++)
        if (!(rs[i] = simba__mem_res_find(srv, op->tenant, op->res[i].name))) return 0;
    return 1;
}

static void simba__mem_release(simba_mem_server *srv, simba__mem_conn *c, const simba_op *op, int64_t now) {
    int i;
    for (i = 0; i < op->nres; i++) {
        simba__mem_res *r = simba__mem_res_find(srv, op->tenant, op->res[i].name);
        char before[SIMBA_MAX_SESSION + 1];
        const char *o;
        int idx;
        if (!r || (idx = simba__mem_find(srv, r, op->request)) < 0) continue;
        if (strcmp(r->q[idx].session, op->session) != 0) continue;   /* not ours to remove */
        o = simba__mem_owner(r);
        simba__mem_copy(before, sizeof before, o);
        simba__mem_remove_at(srv, r, idx);
        simba__mem_changed(srv, r, o ? before : NULL, now, c);
    }
}

/*>>locks.admin: INSPECT */

/* An INSPECT entry's times, by the server's clock. */
static void simba__mem_holder_times(simba_mem_server *srv, const simba__mem_entry *e, int64_t now, simba_holder *h) {
    simba__mem_session *ss = *simba__mem_sess_slot(srv, e->session);
    h->expires_in_ms = ss ? ss->expires - now : -1;
    h->renewed_ago_ms = ss ? now - ss->renewed : -1;
    h->held_ms = e->fence ? now - e->granted_at : -1;
}

static void simba__mem_inspect(simba_mem_server *srv, const simba_op *op, int64_t now, simba__mem_answer *a) {
    simba__mem_res *r = simba__mem_res_find(srv, op->tenant, op->res[0].name);
    int i;
    if (now < srv->grace_until) a->r.grace_ms = simba__mem_min_hint(-1, srv->grace_until - now);
    a->r.entry_times = 1;
    if (!r) return;                                   /* absent: capacity 0, empty */
    simba__mem_touch(srv, r, now, NULL);
    simba__mem_purge(srv, r, now);   /* the whole queue is shown: no dead entries in it (those
                                        behind the first blocked waiter change no grant) */
    a->r.capacity = r->capacity;
    a->r.nentries = r->n;
    if (r->n) {
        a->entries = (simba_holder *)simba__mem_alloc(srv, sizeof(simba_holder) * (size_t)r->n);
        if (!a->entries) { a->r.status = SIMBA_ENOMEM; return; }
        for (i = 0; i < r->n; i++) {
            simba_holder *h = &a->entries[i];
            memset(h, 0, sizeof *h);
            simba__mem_copy(h->session, sizeof h->session, r->q[i].session);
            simba_session_client(r->q[i].session, h->client, sizeof h->client);
            h->fence = r->q[i].fence;
            h->weight = r->q[i].weight;
            h->granted = r->q[i].fence != 0;
            simba__mem_holder_times(srv, &r->q[i], now, h);
            if (h->granted) a->r.held++;
        }
    }
    a->r.entries = a->entries;
    simba__mem_copy(a->owner, sizeof a->owner, simba__mem_owner(r));
    a->r.owner = a->owner[0] ? a->owner : NULL;
}

/*>>locks.dispatch: one op, executed on receipt: the switch over op kinds, sessions included */

/* Over 80 lines: one short case per op kind; the server's dispatcher reads best as one switch. */
static void simba__mem_execute(simba_mem_server *srv, simba__mem_conn *c, const simba_op *op, simba__mem_answer *a) {
    int64_t now = simba__mem_now(srv);
    simba__mem_res *rs[SIMBA_MAX_RESOURCES];
    simba__mem_session *ss;
    srv->stats.ops++;
    srv->answering = op->kind == SIMBA_OP_ENQUEUE || op->kind == SIMBA_OP_POLL ? op->request : NULL;
    if (!srv->epoch_set) {                /* first operation after a data loss */
        srv->epoch_set = 1;
        srv->grace_until = now + op->lease_ms;
    }
    switch (op->kind) {
    case SIMBA_OP_OPEN:
        ss = *simba__mem_sess_slot(srv, op->session);
        if (!ss) {
            if ((uint64_t)srv->nsess * 4 >= srv->nsb) simba__mem_rehash_sess(srv);
            ss = (simba__mem_session *)simba__mem_alloc(srv, sizeof *ss);
            if (!ss) { a->r.status = SIMBA_ENOMEM; return; }
            memset(ss, 0, sizeof *ss);
            simba__mem_copy(ss->id, sizeof ss->id, op->session);
            {
                simba__mem_session **head = &srv->sb[simba__mem_sess_bucket(op->session, srv->nsb)];
                ss->next = *head; *head = ss;
            }
            srv->nsess++;
        }
        ss->expires = now + op->lease_ms;
        ss->renewed = now;
        simba__mem_sess_bind(ss, c);
        a->r.epoch = srv->admin_epoch;
        return;
    case SIMBA_OP_KEEPALIVE:
        srv->stats.keepalives++;
        ss = simba__mem_sess_live(srv, op->session, now);
        if (!ss) { a->r.status = SIMBA_ESESSION; return; }
        ss->expires = now + op->lease_ms;
        ss->renewed = now;
        simba__mem_sess_bind(ss, c);
        a->r.epoch = srv->admin_epoch;
        return;
    case SIMBA_OP_CLOSE:
        simba__mem_close(srv, op->session, now);
        return;
    case SIMBA_OP_ENQUEUE:
        if (!simba__mem_sess_live(srv, op->session, now)) { a->r.status = SIMBA_ESESSION; return; }
        simba__mem_enqueue(srv, c, op, now, a);
        return;
    case SIMBA_OP_POLL:
        if (!simba__mem_sess_live(srv, op->session, now)) { a->r.status = SIMBA_ESESSION; return; }
        if (!simba__mem_lookup_all(srv, op, rs)) { a->r.status = SIMBA_ENOTFOUND; return; }
        { int i; for (i = 0; i < op->nres; i++) simba__mem_touch(srv, rs[i], now, c); }
        {   /* a keyed id is the same in every session: another session's entry is not ours */
            int i, idx;
            for (i = 0; i < op->nres; i++)
                if ((idx = simba__mem_find(srv, rs[i], op->request)) >= 0 && strcmp(rs[i]->q[idx].session, op->session) != 0) {
                    a->r.status = SIMBA_ENOTFOUND;
                    return;
                }
        }
        simba__mem_state(srv, rs, op->nres, op->request, now, a);
        return;
    case SIMBA_OP_RELEASE:
        simba__mem_release(srv, c, op, now);
        return;
    case SIMBA_OP_INSPECT:
        simba__mem_inspect(srv, op, now, a);
        return;
    case SIMBA_OP_SET_CAPACITY:
        rs[0] = simba__mem_res_get(srv, op->tenant, op->res[0].name, op->res[0].capacity);
        if (!rs[0]) { a->r.status = SIMBA_ENOMEM; return; }
        rs[0]->capacity = op->res[0].capacity;
        srv->admin_epoch++;
        simba__mem_touch(srv, rs[0], now, NULL);
        simba__mem_wake_all(srv, rs[0], now, NULL);
        return;
    case SIMBA_OP_DELETE:
        srv->admin_epoch++;
        if ((rs[0] = simba__mem_res_find(srv, op->tenant, op->res[0].name)) != NULL) {
            simba__mem_wake_all(srv, rs[0], now, NULL);
            simba__mem_res_delete(srv, rs[0]);
        }
        return;
    default:
        a->r.status = SIMBA_EINVAL;
        return;
    }
}

/*>>wakeups: who is told what (fire), and the push handed to the core (deliver) */

/*>>wakeups.fire: who is told what when a queue changes: the granted, the owner watchers */

static void simba__mem_send_wake(simba__mem_conn *c, int kind, const char *name, const char *session,
                                 const char *request, int64_t fence, int64_t now) {
    simba__mem_item it;
    if (!c || !c->connected || c->faults.partitioned || simba__mem_rand_pct(c, c->faults.drop_reply_pct) ||
        simba__mem_rand_pct(c, c->faults.drop_push_pct)) return;
    memset(&it, 0, sizeof it);
    it.wake = kind;
    it.due = simba__mem_due(c, now);
    it.name = simba__mem_strdup(c->srv, name);
    it.session = simba__mem_strdup(c->srv, session);
    it.request = simba__mem_strdup(c->srv, request);
    it.reply.fence[0] = fence;
    if (!it.name || (request && !it.request) || (session && !it.session)) { simba__mem_item_free(c->srv, &it); return; }
    simba__mem_push_item(c, &it);
}

/* Whether an entry of r asked for owner changes: a count kept by append and
   remove, so a hand-off on a queue without contenders looks at no entry. */
static int simba__mem_has_watchers(const simba__mem_res *r) { return r->watchers > 0; }

/* Push a wake-up (no request id) to every client with an entry in r, but
   `quiet`, once per client. */
static void simba__mem_tell(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet) {
    int i;
    for (i = 0; i < r->n; i++) {
        simba__mem_session *ss = *simba__mem_sess_slot(srv, r->q[i].session);
        int j, seen = 0;
        srv->stats.rule_visits++;
        if (!ss || !ss->conn || ss->conn == quiet) continue;
        for (j = 0; j < i && !seen; j++) {
            simba__mem_session *o = *simba__mem_sess_slot(srv, r->q[j].session);
            seen = o && o->conn == ss->conn;
        }
        if (!seen) simba__mem_send_wake(ss->conn, SIMBA__MEM_CHANGED, r->name, NULL, NULL, 0, now);
    }
}

/* The owner of r changed: each entry that asked for it (simba_op.watch_owner,
   a contend handle) is told by its request id with fence 0, so only that
   handle re-checks, not every handle its client has on the name. */
static void simba__mem_tell_watchers(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet) {
    int i;
    if (!simba__mem_has_watchers(r)) return;
    for (i = 0; i < r->n; i++) {
        simba__mem_entry *e = &r->q[i];
        simba__mem_session *ss;
        srv->stats.rule_visits++;
        if (!e->watch_owner || !(ss = *simba__mem_sess_slot(srv, e->session)) || !ss->conn || ss->conn == quiet) continue;
        simba__mem_send_wake(ss->conn, SIMBA__MEM_RECHECK, r->name, e->session, e->request, 0, now);
    }
}

/* Everyone concerned with r looks again (its capacity changed, or it is deleted). */
static void simba__mem_wake_all(simba_mem_server *srv, simba__mem_res *r, int64_t now, simba__mem_conn *quiet) {
    simba__mem_tell(srv, r, now, quiet);
}

/*>>wakeups.deliver: a push handed to the core, by the kind of news */

/* A push, by the kind of news it carries. */
static void simba__mem_push_to_core(simba *s, const simba__mem_item *it) {
    if (it->wake == SIMBA__MEM_GRANTED) simba_backend_granted(s, it->name, it->session, it->request, it->reply.fence[0]);
    else if (it->wake == SIMBA__MEM_RECHECK) simba_backend_recheck(s, it->name, it->session, it->request);
    else simba_backend_changed(s, it->name);
}

/*>>stats: simba_mem_server_stats() */

SIMBADEF simba_mem_stats simba_mem_server_stats(simba_mem_server *srv) {
    simba_mem_stats st;
    uint32_t b;
    memset(&st, 0, sizeof st);
    if (!srv) return st;
    st = srv->stats;
    st.resources = srv->nres;
    st.sessions = srv->nsess;
    for (b = 0; b < srv->nrb; b++) {
        simba__mem_res *r;
        for (r = srv->rb[b]; r; r = r->next) st.entries += r->n;
    }
    return st;
}

/*>>vtable: attach, submit, pollfds, deadline, process, reset, destroy */

static int simba__mem_attach(void *impl, simba *s) {
    simba__mem_conn *c = (simba__mem_conn *)impl;
    c->s = s;
    c->reconnect_at = 0;                 /* connect on the first process() */
    return SIMBA_OK;
}

static int simba__mem_submit(void *impl, const simba_op *op) {
    simba__mem_conn *c = (simba__mem_conn *)impl;
    simba_mem_server *srv = c->srv;
    simba__mem_answer a;
    simba__mem_item it;
    int64_t now;
    if (!c->connected || c->broken) return SIMBA_EDISCONNECTED;
    if (c->faults.queue_limit > 0 && c->n - c->head >= c->faults.queue_limit) return SIMBA_EBUSY;
    if (c->faults.partitioned || simba__mem_rand_pct(c, c->faults.drop_request_pct)) return SIMBA_OK; /* lost */
    memset(&a, 0, sizeof a);
    a.r.id = op->id;
    a.r.recheck_ms = -1;
    simba__mem_execute(srv, c, op, &a);
    srv->answering = NULL;                 /* it pointed into op */
    now = simba__mem_now(srv);
    if (simba__mem_rand_pct(c, c->faults.drop_reply_pct)) { simba__mem_free(srv, a.entries); return SIMBA_OK; }
    memset(&it, 0, sizeof it);
    it.reply = a.r;
    it.due = simba__mem_due(c, now);
    it.owner = simba__mem_strdup(srv, a.r.owner);
    it.entries = a.entries;
    simba__mem_push_item(c, &it);
    return SIMBA_OK;
}

static int simba__mem_pollfds(void *impl, struct pollfd *fds, int max) { (void)impl; (void)fds; (void)max; return 0; }

static int64_t simba__mem_deadline(void *impl) {
    simba__mem_conn *c = (simba__mem_conn *)impl;
    if (c->broken) return 0;
    if (!c->connected) return c->reconnect_at;
    if (c->head < c->n && !c->faults.partitioned) return c->items[c->head].due;
    return -1;
}

static void simba__mem_process(void *impl, const struct pollfd *fds, int nfds) {
    simba__mem_conn *c = (simba__mem_conn *)impl;
    int64_t now = simba__mem_now(c->srv);
    (void)fds; (void)nfds;
    if (c->broken) simba__mem_disconnect(c, SIMBA_EDISCONNECTED, 1, 1);
    if (!c->connected) {
        if (now < c->reconnect_at) return;
        if (c->faults.partitioned) {
            c->reconnect_at = now + simba_backend_backoff_ms(c->s, ++c->attempts);
            simba_backend_state(c->s, 0, SIMBA_EDISCONNECTED, "partitioned");
            return;
        }
        c->connected = 1;
        c->attempts = 0;
        simba_backend_state(c->s, 1, 0, NULL);
    }
    if (c->faults.partitioned) return;
    while (c->head < c->n && c->items[c->head].due <= now && c->connected) {
        simba__mem_item it = c->items[c->head++];
        simba__mem_deliver(c, &it);
    }
    /* drained: the next item goes to the array's first slot again, not on
       along it, so a client's items stay in the few cache lines it used
       last (they walked a client's whole array, 32 slots of 224 bytes,
       one push at a time: with 1,000 clients that is 7 MB of cold lines) */
    if (c->head == c->n) c->head = c->n = 0;
}

static void simba__mem_reset(void *impl, int why) {
    simba__mem_conn *c = (simba__mem_conn *)impl;
    if (c->connected) simba__mem_disconnect(c, why, 1, 0);
}

static void simba__mem_destroy(void *impl) {
    simba__mem_conn *c = (simba__mem_conn *)impl;
    simba_mem_server *srv = c->srv;
    simba__mem_conn **pp;
    for (pp = &srv->conns; *pp; pp = &(*pp)->next) if (*pp == c) { *pp = c->next; break; }
    while (c->sessions) simba__mem_sess_bind(c->sessions, NULL);   /* they live on until they expire */
    simba__mem_disconnect(c, SIMBA_EDISCONNECTED, 0, 0);
    simba__mem_free(srv, c->items);
    simba__mem_free(srv, c);
}

static const simba_backend_vtable simba__mem_vtable = {
    "mem", simba__mem_attach, simba__mem_submit, simba__mem_pollfds, simba__mem_deadline,
    simba__mem_process, simba__mem_reset, simba__mem_destroy
};

/*>>constructor: the server (create, restart, init, destroy), simba_mem(), simba_mem_from_url() */

SIMBADEF simba_mem_server *simba_mem_server_create(const simba_mem_desc *desc) {
    simba_mem_desc d;
    simba_mem_server *srv;
    if (desc) d = *desc; else memset(&d, 0, sizeof d);
    d.allocator = simba_allocator_or_default(d.allocator);
    srv = (simba_mem_server *)d.allocator.alloc(sizeof *srv, d.allocator.user);
    if (!srv) return NULL;
    memset(srv, 0, sizeof *srv);
    srv->alloc = d.allocator;
    srv->clock = simba_clock_or_default(d.clock);
    srv->nrb = srv->nsb = 256;
    srv->rb = (simba__mem_res **)simba__mem_alloc(srv, sizeof(void *) * srv->nrb);
    srv->sb = (simba__mem_session **)simba__mem_alloc(srv, sizeof(void *) * srv->nsb);
    if (!srv->rb || !srv->sb) {
        simba__mem_free(srv, srv->rb); simba__mem_free(srv, srv->sb);
        d.allocator.free(srv, d.allocator.user);
        return NULL;
    }
    memset(srv->rb, 0, sizeof(void *) * srv->nrb);
    memset(srv->sb, 0, sizeof(void *) * srv->nsb);
    srv->epoch_set = 1;      /* a new server has no holders to wait for */
    srv->admin_epoch = 1;
    return srv;
}

SIMBADEF simba_backend simba_mem(simba_mem_server *srv, const simba_mem_faults *faults) {
    simba_backend b;
    simba__mem_conn *c;
    memset(&b, 0, sizeof b);
    if (!srv) return b;                   /* simba_create reports SIMBA_EINVAL */
    c = (simba__mem_conn *)simba__mem_alloc(srv, sizeof *c);
    if (!c) return b;
    memset(c, 0, sizeof *c);
    c->srv = srv;
    if (faults) c->faults = *faults;
    c->rng = c->faults.seed ? c->faults.seed : 0x5eed + srv->order++;
    c->next = srv->conns;
    srv->conns = c;
    b.vt = &simba__mem_vtable;
    b.impl = c;
    return b;
}

static void simba__mem_clear(simba_mem_server *srv) {
    uint32_t b;
    for (b = 0; b < srv->nrb; b++) {
        while (srv->rb[b]) {
            simba__mem_res *r = srv->rb[b];
            srv->rb[b] = r->next;
            simba__mem_free(srv, r->base); simba__mem_free(srv, r->idx);
            simba__mem_free(srv, r->key); simba__mem_free(srv, r);
        }
    }
    for (b = 0; b < srv->nsb; b++) {
        while (srv->sb[b]) {
            simba__mem_session *ss = srv->sb[b];
            srv->sb[b] = ss->next;
            simba__mem_free(srv, ss);
        }
    }
    {
        simba__mem_conn *c;                 /* their sessions are gone */
        for (c = srv->conns; c; c = c->next) c->sessions = NULL;
    }
    srv->nres = srv->nsess = 0;
}

SIMBADEF void simba_mem_server_restart(simba_mem_server *srv) {
    simba__mem_conn *c;
    if (!srv) return;
    simba__mem_clear(srv);
    srv->epoch_set = 0;                   /* the next operation starts the grace period */
    for (c = srv->conns; c; c = c->next) if (c->connected) c->broken = 1;
}

SIMBADEF void simba_mem_server_init(simba_mem_server *srv) {
    if (!srv) return;
    srv->epoch_set = 1;                   /* no grace will start ... */
    srv->grace_until = 0;                 /* ... and a running one ends */
}

/* The clients must be destroyed first; a server with clients left is not freed. */
SIMBADEF void simba_mem_server_destroy(simba_mem_server *srv) {
    simba_allocator a;
    if (!srv || srv->conns) return;
    simba__mem_clear(srv);
    simba__mem_free(srv, srv->rb);
    simba__mem_free(srv, srv->sb);
    a = srv->alloc;
    a.free(srv, a.user);
}

SIMBADEF int simba_mem_from_url(simba_url *u, simba_mem_server *srv, simba_backend *out, simba_url_error *err) {
    if (!u || !out) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: no URL or no output");
    if (strcmp(u->scheme, "mem") != 0)
        return simba_url_fail(err, SIMBA_EINVAL, "scheme", "URL scheme: '%s' is not mem", u->scheme);
    if (u->nhosts || u->user || u->password)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: mem: has no host or user (it is this process only)");
    if (u->path[0] && strcmp(u->path, "/") != 0)
        return simba_url_fail(err, SIMBA_EINVAL, "path", "URL path: mem: takes no path");
    if (!srv) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: mem: needs a simba_mem_server");
    *out = simba_mem(srv, NULL);
    return SIMBA_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* SIMBA_MEM_IMPL_INCLUDED */
#endif /* SIMBA_MEM_IMPLEMENTATION */

/*
    LICENSE (MIT): see the end of simba.h.
*/
