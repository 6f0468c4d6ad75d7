/*
    simba.h -- distributed mutexes, semaphores, read/write locks and leader
    election for C, driven from the caller's own poll loop.

    Project: simba. License: MIT (see end of file).

    Do this:
        #define SIMBA_IMPLEMENTATION
    before you include this file in *one* C or C++ file to create the
    implementation. Backends are opt-in headers of their own that follow the
    same pattern (simba_redis.h, simba_mysql.h, simba_zk.h); the in-memory
    backend (simba_mem_*) lives in this file.

    Optionally define before the implementation:
        SIMBA_ASSERT(c)     your own assert macro (default: assert(c))
        SIMBA_STATIC        make every function static (private to one file)
        SIMBADEF            the linkage of the public functions (default extern)

    WALKTHROUGH: HOLD A LOCK FROM A POLL LOOP
    =========================================
        #define SIMBA_IMPLEMENTATION
        #include "simba.h"

        simba_mem_server *srv = simba_mem_server_create(NULL);   // or a real backend
        simba *s = simba_create(&(simba_desc){ .backend = simba_mem(srv, NULL) });
        simba_lock job = simba_acquire(s, &(simba_lock_desc){
            .name = "nightly-report", .wait_ms = -1 });          // wait forever
        for (;;) {
            struct pollfd fds[8];
            int n = simba_pollfds(s, fds, 8);        // what simba wants watched
            poll(fds, n > 8 ? 8 : n, simba_timeout_ms(s));
            simba_event ev[16];
            int k = simba_tick(s, fds, n > 8 ? 8 : n, ev, 16);
            for (int i = 0; i < k; i++) {
                if (ev[i].type == SIMBA_EVENT_ACQUIRED)  start_work(ev[i].fence);
                if (ev[i].type == SIMBA_EVENT_LOST)      stop_work_now();
                if (ev[i].type == SIMBA_EVENT_RELEASED)  goto done;
            }
            if (work_finished()) simba_release(s, job);
            // while working, simba_valid_ms(s, job) says how long the hold
            // is still safe; pass ev.fence to the storage you protect.
        }
        done:
        simba_destroy(s);
        simba_mem_server_destroy(srv);

    Your own fds and timers go into the same poll() call. Nothing in simba
    blocks, sleeps or starts a thread: all I/O happens inside simba_tick().

    THE MODEL
    =========
    Every lock is a fair, weighted, leased semaphore on a named resource:

        resource capacity C        request weight w
        mutex              1       1
        semaphore          N       permits (1..N)
        read/write lock    R       read: 1, write: all of R (.exclusive = 1)

    Each resource has a FIFO queue. A request is granted when the weights of
    all requests ahead of it plus its own fit in C: strict FIFO, no barging,
    writers are never starved. A request on several resources is enqueued in
    all of them in one atomic step, so no two requests can deadlock.

    Each grant carries a FENCE: a 64-bit number that strictly increases per
    resource in grant order. Hand it to the storage you protect and have it
    refuse writes with an older fence.

    A client has one SESSION on its backend, renewed by one keepalive every
    ttl/3 whatever the number of locks it holds. The server expires a session
    ttl + transition after the last keepalive it saw, by its own clock only.
    LOCAL SAFETY RULE: this client treats its holds as valid only until
    ttl after it *sent* the last keepalive the server confirmed, so it gives
    up at least `transition` before anyone else can be granted. When that
    moment passes, the next simba_tick() reports SIMBA_EVENT_LOST first,
    from the clock alone, before any other event and before any I/O.

    EVENTS
    ======
    simba_tick() copies events into your array by value; events hold no
    pointers into simba's state (strings are copied into the event).
    Events that do not fit stay queued for the next call.

    ACQUIRED     a request was granted; .fence is the first resource's fence
    RELEASED     a release (or the cancel of a waiting request) is done
    LOST         a hold ended without your asking; .error tells why
                 (SIMBA_LOST_EXPIRED, SIMBA_LOST_SESSION, SIMBA_LOST_STOLEN)
    TIMEOUT      a wait ended without a grant (.wait_ms passed, or a try-lock
                 found the resource busy); the request is withdrawn
    OWNER        contend handles: the holder changed; .owner is its client id
                 ("" when free)
    CONNECTED / DISCONNECTED   the backend connection changed state
    ERROR        a request failed; .error is a SIMBA_E* code
    INFO         an inspect request finished (.capacity, .queued, .held,
                 .owner; simba_holders() gives the list until the next tick)
    DONE         a set-capacity or delete request finished (.error)

    A lock handle stays valid until its final event (RELEASED, LOST, TIMEOUT
    or ERROR) has been produced; after that simba_release() on it returns
    SIMBA_ESTALE. Contend handles (leader election) re-enter the queue by
    themselves after LOST and end only with simba_release().

    NAMES AND LIMITS
    ================
    Resource names: 1..SIMBA_MAX_NAME bytes, any byte except control bytes
    (0x01-0x1f, 0x7f). Tenants: 1..SIMBA_MAX_TENANT bytes of [A-Za-z0-9._-].
    Client ids and idempotency keys: 1..SIMBA_MAX_ID bytes of [A-Za-z0-9._:-].
    At most SIMBA_MAX_RESOURCES resources in one request.
*/
#ifndef SIMBA_INCLUDED
#define SIMBA_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <poll.h>

#define SIMBA_VERSION_MAJOR 0
#define SIMBA_VERSION_MINOR 1
#define SIMBA_VERSION_PATCH 0
#define SIMBA_VERSION_STRING "0.1.0"

#ifndef SIMBADEF
#ifdef SIMBA_STATIC
#define SIMBADEF static
#else
#define SIMBADEF extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SIMBA_MAX_NAME = 256,       /* bytes in a resource name, without the NUL */
    SIMBA_MAX_TENANT = 64,      /* bytes in a tenant */
    SIMBA_MAX_ID = 64,          /* bytes in a client id or idempotency key */
    SIMBA_MAX_RESOURCES = 8,    /* resources in one multi-resource request */
    SIMBA_MAX_SESSION = 96      /* bytes in a session id: client id, '~', 16 hex */
};

/* Error codes: 0 is success, every error is negative. simba_strerror() names them. */
enum {
    SIMBA_OK = 0,
    SIMBA_EINVAL = -1,        /* an argument is NULL, zero or out of range */
    SIMBA_ENAME = -2,         /* a name, tenant, client id or key is empty, too long or has bytes not allowed */
    SIMBA_ECAPACITY = -3,     /* capacity 0, or more permits than the capacity */
    SIMBA_ESTALE = -4,        /* unknown, finished or foreign handle */
    SIMBA_ENOMEM = -5,        /* the allocator failed */
    SIMBA_EDISCONNECTED = -6, /* no connection to the backend (yet) */
    SIMBA_ETIMEDOUT = -7,     /* a backend operation did not answer in time */
    SIMBA_ESESSION = -8,      /* the server does not know (any more) our session */
    SIMBA_ENOTFOUND = -9,     /* no such resource or entry on the server */
    SIMBA_EBACKEND = -10,     /* the server answered with an error */
    SIMBA_EPROTO = -11,       /* the server answered something simba cannot read */
    SIMBA_EKEYBUSY = -12,     /* the idempotency key belongs to another live session */
    SIMBA_EBUSY = -13,        /* the handle is busy with another request */
    SIMBA_EDESTROYED = -14,   /* the simba instance was destroyed (or never created) */
    SIMBA_EAUTH = -15,        /* the server refused our credentials or permissions */
    SIMBA_EUNSUPPORTED = -16  /* the backend cannot do that */
};

/* Why a hold was LOST (simba_event.error for SIMBA_EVENT_LOST). */
enum {
    SIMBA_LOST_EXPIRED = 1,   /* the local safety deadline passed without a confirmed keepalive */
    SIMBA_LOST_SESSION = 2,   /* the server says our session is gone (expired, restarted, killed) */
    SIMBA_LOST_STOLEN = 3     /* our entry disappeared from the server (deleted by an admin) */
};

typedef enum simba_event_type {
    SIMBA_EVENT_NONE = 0,
    SIMBA_EVENT_ACQUIRED,
    SIMBA_EVENT_RELEASED,
    SIMBA_EVENT_LOST,
    SIMBA_EVENT_TIMEOUT,
    SIMBA_EVENT_OWNER,
    SIMBA_EVENT_CONNECTED,
    SIMBA_EVENT_DISCONNECTED,
    SIMBA_EVENT_ERROR,
    SIMBA_EVENT_INFO,
    SIMBA_EVENT_DONE
} simba_event_type;

typedef enum simba_log_level {
    SIMBA_LOG_ERROR = 0,
    SIMBA_LOG_WARN = 1,
    SIMBA_LOG_INFO = 2,
    SIMBA_LOG_DEBUG = 3
} simba_log_level;

typedef struct simba simba;

/* A lock (or admin request) handle: an index and a generation, so a stale
   handle is caught instead of touching another lock. {0,0} is never valid. */
typedef struct simba_lock {
    uint32_t id;
    uint32_t gen;
} simba_lock;

/* One event, by value. */
typedef struct simba_event {
    simba_event_type type;
    simba_lock lock;          /* the handle it is about ({0,0} for connection events) */
    void *user;               /* the handle's user pointer */
    int64_t fence;            /* ACQUIRED: the first resource's fence */
    int error;                /* LOST: SIMBA_LOST_*; ERROR, DONE, DISCONNECTED: SIMBA_E* (0 = ok) */
    int capacity;             /* INFO: the resource's capacity */
    int queued;               /* INFO: entries in its queue (held and waiting) */
    int held;                 /* INFO: entries granted; OWNER: holders (0 or 1 for a mutex) */
    char owner[SIMBA_MAX_ID + 1]; /* OWNER, INFO: client id of the oldest holder ("" = none) */
} simba_event;

/* The allocator (sokol style); zero means malloc/free. */
typedef struct simba_allocator {
    void *(*alloc)(size_t size, void *user);
    void (*free)(void *ptr, void *user);
    void *user;
} simba_allocator;

/* The logger; zero means silent. msg is valid only during the call. */
typedef struct simba_logger {
    void (*func)(void *user, simba_log_level level, const char *msg);
    void *user;
    simba_log_level level;    /* messages above this level are not formatted (default ERROR) */
} simba_logger;

/* A monotonic clock in milliseconds; zero means CLOCK_MONOTONIC. Tests
   inject a virtual clock here. */
typedef struct simba_clock {
    int64_t (*now_ms)(void *user);
    void *user;
} simba_clock;

/* ---- the backend contract (what a backend implements; see "WRITING A
   BACKEND" below). Users only pass the simba_backend value around. ---- */
typedef struct simba_backend_vtable simba_backend_vtable;
typedef struct simba_backend {
    const simba_backend_vtable *vt;
    void *impl;
} simba_backend;

typedef struct simba_desc {
    simba_backend backend;    /* required: simba_mem(...), simba_redis(...), ...; simba owns it */
    const char *tenant;       /* namespace of every resource name; default "default" */
    const char *client_id;    /* default "host:pid:random"; shown to others in OWNER events */
    int ttl_ms;               /* a hold is renewed within this; default 10000 */
    int transition_ms;        /* the extra time that belongs to the owner only; default 6000 */
    int op_timeout_ms;        /* a backend operation with no answer after this resets the
                                 connection; default min(ttl/3, 5000) */
    int recheck_ms;           /* fallback re-check period of a waiting request (a missed push
                                 costs at most this); default ttl/2 */
    simba_allocator allocator;
    simba_logger logger;
    simba_clock clock;
} simba_desc;

typedef struct simba_lock_desc {
    const char *name;         /* the resource (or use names/nnames) */
    const char *const *names; /* multi-resource: all granted together or not at all */
    int nnames;               /* 1..SIMBA_MAX_RESOURCES when names is set */
    int capacity;             /* the resource's capacity when this request creates it;
                                 default 1 (a mutex). An existing resource keeps its own. */
    int permits;              /* weight of the request; default 1; at most capacity */
    int exclusive;            /* take the whole capacity (the writer of a read/write lock) */
    int wait_ms;              /* 0: try once; >0: give up after this; <0: wait forever */
    int contend;              /* leader election: re-enqueue after LOST, report OWNER */
    int reentrant;            /* a second acquire of a held (or waiting) resource by this
                                 client joins the same handle with a hold count */
    const char *key;          /* idempotency key: the same key is the same request */
    void *user;               /* given back in every event of this handle */
} simba_lock_desc;

/* A holder or waiter, as simba_holders() reports it. */
typedef struct simba_holder {
    char client[SIMBA_MAX_ID + 1];
    char session[SIMBA_MAX_SESSION + 1];
    int64_t fence;            /* 0 while waiting */
    int weight;               /* 0 = exclusive */
    int granted;
} simba_holder;

/* ---- lifetime ---- */

/* simba_create: a new client. On failure returns NULL and, if err is not
   NULL, stores the SIMBA_E* code there; the backend is destroyed either way
   (simba owns it from this call on). */
SIMBADEF simba *simba_create_ex(const simba_desc *desc, int *err);
SIMBADEF simba *simba_create(const simba_desc *desc);
/* simba_destroy: frees everything, without waiting for the server. Holds that
   were not released expire on the server after ttl + transition. NULL is a
   no-op; a destroyed pointer is caught by the other calls (SIMBA_EDESTROYED). */
SIMBADEF void simba_destroy(simba *s);

/* ---- requests ---- */

/* simba_acquire: queue a request. Returns a handle; {0,0} on bad input, with
   the reason in simba_last_error(s). Events of the handle: ACQUIRED, then
   (after simba_release) RELEASED, or LOST, or TIMEOUT, or ERROR. */
SIMBADEF simba_lock simba_acquire(simba *s, const simba_lock_desc *desc);
/* simba_contend: leader election on a mutex named `name`: wait forever,
   re-enqueue after LOST, report OWNER changes. Stop with simba_release. */
SIMBADEF simba_lock simba_contend(simba *s, const char *name, void *user);
/* simba_release: release a hold or cancel a waiting request. RELEASED follows
   when the server confirmed it. With re-entrancy, only the last release of
   a handle's hold count goes to the server. Returns SIMBA_OK or SIMBA_E*. */
SIMBADEF int simba_release(simba *s, simba_lock lock);
/* simba_valid_ms: how long this hold is still safe by the local monotonic
   clock; 0 when it is not held (waiting, lost, released or stale). */
SIMBADEF int64_t simba_valid_ms(simba *s, simba_lock lock);
/* simba_fence: the fence of resource `index` of a held request (0 if not held). */
SIMBADEF int64_t simba_fence(simba *s, simba_lock lock, int index);
/* simba_holds: the hold count of a re-entrant handle (0 if not held). */
SIMBADEF int simba_holds(simba *s, simba_lock lock);

/* ---- the loop ---- */

/* simba_pollfds: fills up to max pollfds (fd, events) that simba wants
   watched; returns how many it needs (call again with more room if that is
   more than max). The fds can change from call to call. */
SIMBADEF int simba_pollfds(simba *s, struct pollfd *fds, int max);
/* simba_timeout_ms: how long the caller may sleep before the next tick:
   -1 no deadline, 0 tick now. */
SIMBADEF int simba_timeout_ms(simba *s);
/* simba_tick: does the I/O that poll() found ready (fds as returned by poll;
   NULL means "try every fd", for epoll users and busy loops), fires due
   timers and writes up to max events into out. Returns the number written,
   or a negative SIMBA_E* (bad arguments, destroyed instance). */
SIMBADEF int simba_tick(simba *s, const struct pollfd *fds, int nfds, simba_event *out, int max);
/* simba_wait: opt-in blocking helper for prototypes and tools: runs the same
   loop (poll + tick) until `lock` has an event, or timeout_ms passes (<0:
   forever). Returns 1 with the event in *ev, 0 on timeout, <0 on error.
   Events of other handles stay queued for the next simba_tick. */
SIMBADEF int simba_wait(simba *s, simba_lock lock, int timeout_ms, simba_event *ev);

/* ---- introspection and administration (asynchronous: answered by events) ---- */

/* simba_inspect: ask for a resource's holders, queue and capacity; INFO follows. */
SIMBADEF simba_lock simba_inspect(simba *s, const char *name, void *user);
/* simba_holders: after INFO, copies up to max holders/waiters (queue order)
   and returns how many there are. Valid until the next simba_tick. */
SIMBADEF int simba_holders(simba *s, simba_lock query, simba_holder *out, int max);
/* simba_set_capacity: change a resource's capacity; DONE follows. */
SIMBADEF simba_lock simba_set_capacity(simba *s, const char *name, int capacity, void *user);
/* simba_delete: remove a resource and every entry in it (holders get LOST
   STOLEN when they next look); DONE follows. */
SIMBADEF simba_lock simba_delete(simba *s, const char *name, void *user);

/* ---- misc ---- */
SIMBADEF const char *simba_strerror(int err);
SIMBADEF const char *simba_event_name(simba_event_type type);
SIMBADEF int simba_last_error(simba *s);
SIMBADEF const char *simba_client_id(simba *s);
SIMBADEF int simba_connected(simba *s);
SIMBADEF const char *simba_version(void);
SIMBADEF int64_t simba_now_ms(simba *s);

/*
    WRITING A BACKEND
    =================
    A backend is a vtable plus an impl pointer. simba calls attach() once from
    simba_create, then submit() for each operation, and pollfds()/timeout_ms()/
    process() from the caller's loop. All operations are asynchronous: submit()
    returns SIMBA_OK when it took the operation, and then the backend calls
    simba_backend_complete() exactly once for it, from inside process(),
    reset() or destroy() (never from inside submit()). submit() returns
    SIMBA_EDISCONNECTED (or another error) when it cannot take the operation;
    then no completion follows.

    Every operation is idempotent, so the core may send it again after a lost
    answer: ENQUEUE inserts only if the request id is absent, RELEASE of an
    absent entry succeeds.

    The server decides grants with the rule: an entry is granted iff the
    effective weights of the entries ahead of it plus its own are <= the
    resource's capacity, where the effective weight is min(weight, capacity)
    and weight 0 means exclusive (= capacity). When an entry becomes granted
    it takes the fence max(counter + 1, server time in microseconds) and the
    counter becomes that fence (so fences never go backwards, not even when a
    server loses its data). Entries of sessions that expired (server time past
    their expiry) are purged by any operation that touches their resource.
*/
typedef enum simba_op_kind {
    SIMBA_OP_OPEN = 1,      /* create session `session` with expiry now + lease_ms */
    SIMBA_OP_KEEPALIVE,     /* extend `session` to now + lease_ms; SIMBA_ESESSION if gone */
    SIMBA_OP_CLOSE,         /* delete `session` and all its entries (absent: ok) */
    SIMBA_OP_ENQUEUE,       /* insert `request` of `session` into every res[i] if absent;
                               with try_only, insert nothing unless all would be granted
                               at once; answer like POLL */
    SIMBA_OP_POLL,          /* the state of `request`: granted/fences/ahead/owner;
                               SIMBA_ENOTFOUND if the entry is gone */
    SIMBA_OP_RELEASE,       /* remove `request` from every res[i] (absent: ok), wake others */
    SIMBA_OP_INSPECT,       /* res[0]: capacity, entries in queue order */
    SIMBA_OP_SET_CAPACITY,  /* res[0].capacity becomes the capacity; wake waiters */
    SIMBA_OP_DELETE         /* remove res[0] and all its entries; wake waiters */
} simba_op_kind;

typedef struct simba_res {
    const char *name;
    int capacity;           /* used when the resource does not exist yet */
    int weight;             /* 0 = exclusive */
} simba_res;

typedef struct simba_op {
    uint64_t id;            /* echo in the completion */
    simba_op_kind kind;
    const char *tenant;
    const char *client;     /* this client's id */
    const char *session;    /* this client's current session id */
    const char *request;    /* request id (unique per request; "k~"+key for keyed requests) */
    int lease_ms;           /* ttl + transition: the server-side lifetime of the session */
    int try_only;           /* ENQUEUE: do not insert unless granted at once */
    int nres;
    const simba_res *res;
} simba_op;

typedef struct simba_reply {
    uint64_t id;            /* the op id */
    int status;             /* SIMBA_OK or SIMBA_E* */
    const char *message;    /* optional detail for status (valid during the call) */
    int granted;            /* ENQUEUE/POLL: granted in every resource */
    int64_t fence[SIMBA_MAX_RESOURCES]; /* ENQUEUE/POLL: per resource, 0 = not (yet) granted */
    int ahead;              /* ENQUEUE/POLL: entries ahead of the request in res[0] */
    int recheck_ms;         /* ENQUEUE/POLL: the earliest an entry ahead may expire, from
                               now, in server ms; -1 unknown */
    const char *owner;      /* ENQUEUE/POLL/INSPECT: session id of the oldest holder of
                               res[0], NULL or "" if none (valid during the call) */
    int held;               /* ENQUEUE/POLL/INSPECT: granted entries in res[0] */
    int capacity;           /* INSPECT */
    int nentries;           /* INSPECT: entries in queue order */
    const simba_holder *entries;
} simba_reply;

struct simba_backend_vtable {
    const char *name;
    /* called once by simba_create; the backend may start connecting */
    int (*attach)(void *impl, simba *s);
    int (*submit)(void *impl, const simba_op *op);
    int (*pollfds)(void *impl, struct pollfd *fds, int max);
    /* the absolute simba_now_ms() time the backend next needs process(), or -1 */
    int64_t (*deadline_ms)(void *impl);
    /* fds: what poll() returned (the backend finds its own fds in it), or NULL = try all */
    void (*process)(void *impl, const struct pollfd *fds, int nfds);
    /* drop the connection: complete every op in flight with SIMBA_EDISCONNECTED,
       report disconnected, reconnect with backoff */
    void (*reset)(void *impl, int why);
    /* complete every op in flight with SIMBA_EDISCONNECTED and free everything */
    void (*destroy)(void *impl);
};

/* What a backend calls back. */
SIMBADEF void simba_backend_complete(simba *s, const simba_reply *reply);
/* A push from the server: something changed in resource `name`. If `request`
   names one of our waiting single-resource requests and fence > 0, it was
   granted with that fence; otherwise our waiters on `name` re-check. */
SIMBADEF void simba_backend_wake(simba *s, const char *name, const char *request, int64_t fence);
/* Connection state: up = 1 connected, 0 disconnected (err, msg say why). */
SIMBADEF void simba_backend_state(simba *s, int up, int err, const char *msg);
SIMBADEF void *simba_backend_alloc(simba *s, size_t size);
SIMBADEF void simba_backend_free(simba *s, void *ptr);
SIMBADEF void simba_backend_log(simba *s, simba_log_level level, const char *fmt, ...);
/* Reconnect backoff shared by the backends: 50 ms doubling to 5 s, with jitter. */
SIMBADEF int simba_backend_backoff_ms(simba *s, int attempt);
SIMBADEF const char *simba_tenant(simba *s);
SIMBADEF int simba_lease_ms(simba *s);

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

/* Faults of one connection (or all, see simba_mem_set_faults). */
typedef struct simba_mem_faults {
    int delay_min_ms, delay_max_ms; /* each reply is delivered after a delay in this range */
    int drop_request_pct;       /* percent of requests lost before the server sees them */
    int drop_reply_pct;         /* percent of replies lost after the server did the work */
    int reorder;                /* replies may overtake each other (random delays per reply) */
    int partitioned;            /* the connection is cut: nothing passes, connects fail */
    uint64_t seed;              /* random seed for the above (0 = fixed default) */
} simba_mem_faults;

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
/* Drop the connection of client `s` (its ops fail, it reconnects). */
SIMBADEF int simba_mem_kill(simba_mem_server *srv, simba *s);
/* Server statistics for tests and benchmarks. */
typedef struct simba_mem_stats {
    uint64_t ops;               /* operations executed */
    uint64_t keepalives;
    int resources, entries, sessions;
} simba_mem_stats;
SIMBADEF simba_mem_stats simba_mem_server_stats(simba_mem_server *srv);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_INCLUDED */
