/*
    simba.h -- distributed mutexes, semaphores, read/write locks and leader
    election for C, driven from the caller's own poll loop.

    Project: simba. License: MIT (see end of file).

    Do this:
        #define SIMBA_IMPLEMENTATION
    before you include this file in *one* C or C++ file to create the
    implementation. simba.h is the core only: the API, the loop, the backend
    contract and its kit. Every backend is an opt-in header of its own that
    follows the same pattern and the same skeleton (simba_mem.h: in this
    process; simba_redis.h, simba_mysql.h, simba_zk.h), and simba_url.h turns
    a connection URL into a client of any backend included before it.

    Optionally define before the implementation:
        SIMBA_ASSERT(c)     your own assert macro (default: assert(c))
        SIMBA_STATIC        make every function static (private to one file)
        SIMBADEF            the linkage of the public functions (default extern)

    TABLE OF CONTENTS
    =================
    Every section starts with a marker comment: grep -n '/[*]>>' simba.h

    Declarations (always compiled)
        >>api           the user API: limits, errors, events, descs, lifetime,
                        requests, the pull loop, introspection
        >>loop          push mode: event-loop hooks (LOOP INTEGRATION)
        >>backend       the backend API: WRITING A BACKEND, ops and replies,
                        the vtable, what a backend calls back
        >>kit           the backend kit: the grant rule, fences, name and id
                        checks, allocation that follows the user's allocator,
                        reading a parsed URL
    Implementation (SIMBA_IMPLEMENTATION)
        >>internals     includes, constants, small utilities, error texts
        >>types         the event ring, the lock table, the instance
        >>instance      instance checks (no global state), memory, logging
        >>slots         lock slots, handles, names, the name hash
        >>events        the event queue
        >>timers        the timer heap and what a due deadline does
        >>session       request ids, sessions, the local safety rule
        >>locks         the lock state machine
        >>dispatch      sending what the locks need
        >>backend       the backend callbacks, in-flight ops, the error backend
        >>kit           the backend kit
        >>api           the public API
        >>loop          push mode

    WALKTHROUGH: HOLD A LOCK FROM A POLL LOOP
    =========================================
        #define SIMBA_IMPLEMENTATION
        #include "simba.h"
        #define SIMBA_MEM_IMPLEMENTATION
        #include "simba_mem.h"                       // or a real backend's header

        simba_mem_server *srv = simba_mem_server_create(NULL);   // or a real backend
        simba *s = simba_create(&(simba_desc){ .backend = simba_mem(srv, NULL) }, NULL);
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
    ttl/3 (less a random part of up to a quarter, so that clients started
    together do not keep their keepalives in step) whatever the number of
    locks it holds. The server expires a session
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

    ACQUIRED     a request was granted; .fence is the first resource's fence,
                 .valid_ms/.valid_until how long the hold is safe, .capacity
                 the capacity the server stored (0: the backend does not say)
    RELEASED     a release (or the cancel of a waiting request) is done
    LOST         a hold ended without your asking; .error tells why
                 (SIMBA_LOST_EXPIRED, SIMBA_LOST_SESSION, SIMBA_LOST_STOLEN)
    TIMEOUT      a wait ended without a grant (.wait_ms passed, or a try-lock
                 found the resource busy). It comes at the deadline; the
                 entry is withdrawn from the server right after (until the
                 server confirms, it may still hold its place in the queue,
                 never a grant for you: the handle is finished). .error is
                 the cause seen while it waited (SIMBA_EDISCONNECTED,
                 SIMBA_EAUTH, SIMBA_EGRACE, ...) or 0 when it was just busy;
                 .message says it in words
    OWNER        contend handles: the holder changed; .owner is its client id
                 ("" when free)
    CONNECTED / DISCONNECTED   the backend connection changed state;
                 DISCONNECTED also for a failed connect, from the first
                 attempt on (.error, .message), once per kind of failure
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
    Client ids and idempotency keys: 1..SIMBA_MAX_ID bytes of [A-Za-z0-9.:-]
    (no '_': backends use it as a separator).
    At most SIMBA_MAX_RESOURCES resources in one request.

    THREADS
    =======
    simba starts none. One simba instance belongs to one thread at a time;
    separate instances may live in separate threads.

    CALLBACKS
    =========
    The logger, the clock, the loop hooks and simba_hold_until's done() are
    called from inside simba's own work. From there, a call on the same
    instance that would change it (acquire, contend, release, inspect,
    set_capacity, delete, tick, socket_action, pollfds, wait, hold_*,
    set_loop) answers SIMBA_EBUSY, and simba_destroy/simba_abandon do
    nothing (SIMBA_EBUSY in simba_last_error): defer such work until the
    simba call returns. Reading calls (simba_valid_ms, simba_fence,
    simba_now_ms, simba_last_error, ...) work.
*/
/* The implementations (simba.h's and the backends') use POSIX
   (clock_gettime, O_CLOEXEC, gethostname, getpid). In a file that defines an
   implementation, include simba.h before any system header, or compile with
   -D_POSIX_C_SOURCE=200809L (or -std=gnu99, which has POSIX already). Under
   a strict -std=c99/c11 simba.h turns POSIX on whenever it comes first, since
   a backend's implementation macro is defined only after it is included. */
#if (defined(SIMBA_IMPLEMENTATION) || defined(__STRICT_ANSI__)) && \
    !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

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
#if defined(__GNUC__) || defined(__clang__)
#define SIMBADEF static __attribute__((unused))   /* a user calls only some of them */
#else
#define SIMBADEF static
#endif
#else
#define SIMBADEF extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*>>api: the user API: limits, errors, events, descs, lifetime, requests, the loop, introspection */

enum {
    SIMBA_MAX_NAME = 256,       /* bytes in a resource name, without the NUL */
    SIMBA_MAX_TENANT = 64,      /* bytes in a tenant */
    SIMBA_MAX_ID = 64,          /* bytes in a client id or idempotency key */
    SIMBA_MAX_RESOURCES = 8,    /* resources in one multi-resource request */
    SIMBA_MAX_SESSION = 96,     /* bytes in a session id: client id, '~', 16 hex */
    SIMBA_MAX_MESSAGE = 160     /* bytes of detail text in an event or simba_error */
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
    SIMBA_EUNSUPPORTED = -16, /* the backend cannot do that */
    SIMBA_EKEYMISMATCH = -17, /* the idempotency key is in use here for another request shape */
    SIMBA_EGRACE = -18        /* the server holds back grants after a restart (data loss): a
                                 holder from before may still be alive; see "restart grace" */
};

/* Why a hold was LOST (simba_event.error for SIMBA_EVENT_LOST). */
enum {
    SIMBA_LOST_EXPIRED = 1,   /* the local safety deadline passed without a confirmed keepalive
                                 (or, after an admin change, without the hold confirmed again) */
    SIMBA_LOST_SESSION = 2,   /* the server says our session is gone (expired, restarted, killed) */
    SIMBA_LOST_STOLEN = 3     /* our entry disappeared from the server (deleted by an admin),
                                 or the server answered our hold with an error */
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
    int capacity;             /* INFO: the resource's capacity; ACQUIRED: the capacity the server
                                 has stored for the first resource (0 if the backend does not say) */
    int queued;               /* INFO: entries in its queue (held and waiting) */
    int held;                 /* INFO: entries granted; OWNER: holders (0 or 1 for a mutex) */
    char owner[SIMBA_MAX_ID + 1]; /* OWNER, INFO: client id of the oldest holder ("" = none) */
    int64_t valid_ms;         /* ACQUIRED: how long the hold is safe from now (simba_valid_ms) */
    int64_t valid_until;      /* ACQUIRED: the same as a deadline on simba_now_ms()'s clock */
    char message[SIMBA_MAX_MESSAGE + 1]; /* DISCONNECTED, TIMEOUT, ERROR: the cause in words
                                 ("" if none); TIMEOUT and ERROR also set .error to the cause
                                 seen while the request waited (SIMBA_EDISCONNECTED,
                                 SIMBA_EAUTH, SIMBA_EGRACE, ...; 0 = the resource was busy) */
} simba_event;

/* The allocator (sokol style); zero means malloc/free. */
typedef struct simba_allocator {
    void *(*alloc)(size_t size, void *user);
    void (*free)(void *ptr, void *user);
    void *user;
} simba_allocator;

/* The logger; zero means silent. msg is valid only during the call. It
   must not change the instance (CALLBACKS: such calls answer SIMBA_EBUSY). */
typedef struct simba_logger {
    void (*func)(void *user, simba_log_level level, const char *msg);
    void *user;
    simba_log_level level;    /* messages above this level are not formatted (default ERROR) */
} simba_logger;

/* A monotonic clock in milliseconds; zero means CLOCK_MONOTONIC. Tests
   inject a virtual clock here. Should it go back, simba cannot tell how
   much time really passed: every hold is lost (simba_valid_ms says 0 at
   once, the next tick reports LOST first) and a new session starts. */
typedef struct simba_clock {
    int64_t (*now_ms)(void *user);
    void *user;
} simba_clock;

/* The range of a clock's readings: 0 .. SIMBA_CLOCK_MAX_MS (2^50 ms, some
   35,000 years: a deadline or a fence in microseconds taken from it stays
   far inside int64_t). A reading outside it is a clock gone wrong, like
   one that goes back: every hold is lost, and nothing is granted until it
   reads in range again. */
#define SIMBA_CLOCK_MAX_MS ((int64_t)1 << 50)

/* ---- the backend contract (what a backend implements; see "WRITING A
   BACKEND" below). Users only pass the simba_backend value around. ---- */
typedef struct simba_backend_vtable simba_backend_vtable;
typedef struct simba_backend {
    const simba_backend_vtable *vt;
    void *impl;
} simba_backend;

/* ---- push mode: event-loop hooks (see "LOOP INTEGRATION" below) ---- */
enum {
    SIMBA_POLL_IN = 1,        /* readable (hook: watch for it; action: it happened) */
    SIMBA_POLL_OUT = 2,       /* writable */
    SIMBA_POLL_REMOVE = 4,    /* hook only: stop watching this fd */
    SIMBA_POLL_ERR = 8        /* action only: error or hang-up on the fd */
};
/* The fd argument of simba_socket_action() when the timer expired. */
#define SIMBA_TIMEOUT (-1)

typedef struct simba_loop {
    /* watch fd for `what` (SIMBA_POLL_IN and/or SIMBA_POLL_OUT; a later call
       for the same fd replaces the mask), or stop (SIMBA_POLL_REMOVE).
       Return 0, or nonzero when the loop cannot watch that fd: simba then
       polls it from the timer (every 20 ms) and asks again at the next change. */
    int (*socket)(void *user, int fd, int what);
    /* call simba_socket_action(s, SIMBA_TIMEOUT, 0, ...) once, ms from now
       (0: as soon as the loop gets back control); replaces the previous
       timer. -1: cancel. One-shot. */
    void (*timer)(void *user, int ms);
    /* optional: the hooks are no longer used (simba_set_loop replaced them,
       or simba_destroy); every fd was REMOVEd and the timer cancelled before. */
    void (*detach)(void *user);
    void *user;
} simba_loop;

typedef struct simba_desc {
    simba_backend backend;    /* required: simba_mem(...), simba_redis(...), ...; simba owns it */
    const char *tenant;       /* namespace of every resource name; default "default" */
    const char *client_id;    /* default "host:pid:random"; shown to others in OWNER events */
    int ttl_ms;               /* a hold is renewed within this; default 10000 */
    int transition_ms;        /* the extra time that belongs to the owner only; default 6000 */
    int op_timeout_ms;        /* a backend operation with no answer after this resets the
                                 connection; default min(ttl/3, 5000) */
    int recheck_ms;           /* fallback re-check period of a waiting request (a missed push
                                 costs at most this; each period is shortened by a random
                                 part of up to a quarter, so that clients started together
                                 do not re-check in step); default ttl/2 */
    simba_allocator allocator;
    simba_logger logger;
    simba_clock clock;        /* must not go backwards; values 0 .. SIMBA_CLOCK_MAX_MS */
    simba_loop loop;          /* optional push mode: socket + timer hooks (zero: pull mode) */
    int linger_ms;            /* how long simba_destroy may wait for the server to confirm the
                                 end of the session (its holds and waits end with it);
                                 default min(op_timeout_ms, 1000); < 0: it does not wait */
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
                                 client joins the same handle with a hold count (each
                                 join of a held one is told ACQUIRED; one that could not
                                 be told, memory out, fails with SIMBA_ENOMEM instead) */
    const char *key;          /* idempotency key: the same key is the same request. A second
                                 acquire with a key this client already has in flight returns
                                 the same handle; on the server the key makes one entry only.
                                 The shape must match (the same set of names in any order,
                                 capacity, permits, exclusive, contend, reentrant): another
                                 shape fails with SIMBA_EKEYMISMATCH. Fences follow the
                                 order of the first acquire's names. An acquire with the key
                                 of a handle still being released gets a new handle that is
                                 sent only once that release is confirmed */
    void *user;               /* given back in every event of this handle */
} simba_lock_desc;

/* A holder or waiter, as simba_holders() reports it. */
typedef struct simba_holder {
    char client[SIMBA_MAX_ID + 1];
    char session[SIMBA_MAX_SESSION + 1];
    int64_t fence;            /* 0 while waiting */
    int weight;               /* 0 = exclusive */
    int granted;
    /* Times by the SERVER's clock, in ms, as of its answer, so no client clock is involved; -1 where the backend
       cannot know (docs/backends.md: ZooKeeper knows none of them; a
       session opened by an older simba version has no renewed_ago_ms). A live owner renews its session every ttl/3 (less
       jitter), so renewed_ago_ms stays below a third of its lease
       (renewed_ago_ms + expires_in_ms); an owner that crashed or is cut off
       shows renewed_ago_ms growing and expires_in_ms shrinking until the
       server drops its entries. */
    int64_t expires_in_ms;    /* until the server expires the owner's session
                                 unless it is renewed before */
    int64_t renewed_ago_ms;   /* since the server saw the session's last renewal
                                 (its OPEN or latest KEEPALIVE) */
    int64_t held_ms;          /* since the grant (-1 while waiting); a lower bound
                                 where the backend derives it from the fence, which
                                 is the server's time at the grant unless the fence
                                 counter ran ahead of the clock */
} simba_holder;

/* ---- lifetime ---- */

/* simba_error: why simba_create refused, as a code and in words. */
typedef struct simba_error {
    int code;                 /* SIMBA_E*, 0 = ok */
    char message[SIMBA_MAX_MESSAGE + 96]; /* "" if there is nothing more than simba_strerror(code) */
} simba_error;
/* simba_create: a new client, or NULL. On failure `err` (optional, NULL is
   fine) gets the SIMBA_E* code and the words: which field of which desc is
   wrong and how, e.g. "simba_desc.ttl_ms: 20 is below the minimum of 30" or
   "simba_mysql_desc.url: no database in 'mysql://u@127.0.0.1:3306'". The
   backend in the desc is owned by simba from this call on and destroyed on
   failure too. The words go into the caller's struct because a failed
   create has no instance to ask, and a global or thread-local "last message"
   would race between threads that create instances. A backend constructor
   that rejects its desc returns a backend carrying the message
   (simba_backend_error), which is reported here. */
SIMBADEF simba *simba_create(const simba_desc *desc, simba_error *err);
/* simba_destroy: ends the session on the server, then frees everything. While
   connected it sends one CLOSE of the session, which ends every hold and
   waiting request of this instance on the server (released or not), and
   waits for its answer at most simba_desc.linger_ms (default
   min(op_timeout_ms, 1000); a round trip when the server answers): the next
   waiters are granted at once instead of after a lease. Nothing else is sent
   and no event is delivered (a session dropped earlier whose LOST events
   the caller did not take is closed as well, unanswered). Not connected (or
   linger_ms < 0): it frees at
   once, and the holds expire on the server after ttl + transition, as after
   a crash.
   simba_abandon: frees everything without a word to the server, as a crash
   does: holds last until the lease runs out. For a child after fork() whose
   parent owns the session, and for tests that play a crash.
   Both: NULL is a no-op. Using the pointer afterwards (calling any function with it,
   simba_destroy included) is undefined behaviour, as after free(): simba
   keeps no registry of instances (no global state); each call checks a magic
   field in the instance (SIMBA_ASSERT fails on a bad one in debug builds).
   Calls made from a callback while simba_destroy runs (a loop hook, the
   logger) answer SIMBA_EBUSY or SIMBA_EDESTROYED; simba_destroy called
   from a callback (CALLBACKS) does nothing. A stale handle of a live
   instance is always detected (SIMBA_ESTALE); a foreign one (of another
   instance, or of one freed at the same address) is detected by a random
   32-bit salt: it slips through with odds of 1 in 2^32. */
SIMBADEF void simba_destroy(simba *s);
SIMBADEF void simba_abandon(simba *s);

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
/* simba_valid_until: the same as an absolute deadline on simba_now_ms()'s
   clock (0 when not held), so a worker reads it once and compares with its own
   readings of simba_now_ms(). It moves later with every confirmed keepalive
   (after an admin change in the tenant, once the hold is confirmed again:
   docs/backend-contract.md, "The admin epoch").
   Between that deadline and the LOST event (delivered by the next simba_tick)
   the hold is NOT safe any more although LOST has not been seen yet:
   simba_valid_ms() is 0, simba_fence() is 0, and you must stop touching the
   protected data; LOST SIMBA_LOST_EXPIRED follows at the next tick. A LOST
   may also come before the deadline (the session or the entry is gone, a
   hold could not be confirmed after an admin change): stop at either. */
SIMBADEF int64_t simba_valid_until(simba *s, simba_lock lock);
/* simba_lease_ms: ttl + transition: how long the server keeps a session after
   its last keepalive. After a crash of the holder, the next holder is granted
   at the earliest this long after the crashed client's last keepalive (16 s
   with the defaults); after a clean exit (simba_release, simba_destroy closes
   without a release leaves the hold to expire) it is granted within a round
   trip. Tune failover with ttl_ms (keepalive every ttl/3) and transition_ms
   (the margin against clock-rate differences and pauses): both shorter means
   faster failover, more keepalive traffic and less tolerance for a stalled
   loop. */
SIMBADEF int simba_lease_ms(simba *s);
/* simba_fence: the fence of resource `index` of a held request (0 if not held). */
SIMBADEF int64_t simba_fence(simba *s, simba_lock lock, int index);
/* simba_holds: the hold count of a re-entrant handle (0 if not held). */
SIMBADEF int simba_holds(simba *s, simba_lock lock);

/* ---- the loop ---- */

/* simba_pollfds: fills up to max pollfds (fd, events) that simba wants
   watched; returns how many it needs (call again with more room if that is
   more than max). The fds can change from call to call. It also hands the
   requests made since the last tick to the backend, so they are on their way
   while you sleep. simba's fds are close-on-exec whenever this call or a
   tick returns: a child forked and exec'd then inherits none of them. */
SIMBADEF int simba_pollfds(simba *s, struct pollfd *fds, int max);
/* simba_timeout_ms: how long the caller may sleep before the next tick:
   -1 no deadline, 0 tick now. */
SIMBADEF int simba_timeout_ms(simba *s);
/* simba_tick: does the I/O that poll() found ready (fds as returned by poll;
   NULL means "try every fd", for epoll users and busy loops), fires due
   timers and writes up to max events into out. Returns the number written,
   or a negative SIMBA_E* (bad arguments, destroyed instance).
   max == 0 (out may then be NULL) is a tick that takes no event: the I/O
   and timers run, and every event stays queued for a later tick with room
   (while one is queued, simba_timeout_ms() is 0). */
SIMBADEF int simba_tick(simba *s, const struct pollfd *fds, int nfds, simba_event *out, int max);
/* simba_wait: opt-in blocking helper for prototypes and tools: runs the same
   loop (poll + tick) until `lock` has an event, or timeout_ms passes (<0:
   forever). Returns 1 with the event in *ev, 0 on timeout, <0 on error.
   Events of other handles stay queued for the next simba_tick. */
SIMBADEF int simba_wait(simba *s, simba_lock lock, int timeout_ms, simba_event *ev);
/* simba_hold_for: blocking helper for a holder that does blocking work in
   steps: runs the loop (poll + tick, so keepalives go out) for `ms` of simba's
   clock while `lock` is held. Returns 0 when ms passed and the hold is still
   valid; 1 with the event in *ev as soon as the lock has an event (LOST: stop
   at once; RELEASED; ...); <0 on error (SIMBA_ESTALE: not a live handle).
   Events of other handles stay queued for the next simba_tick.
   simba_hold_until: the same, and also returns 0 as soon as done(user) is
   non-zero (checked before every sleep, sleeps of at most 50 ms).
   WHICH CALLS TICK: simba_tick, simba_wait, simba_hold_for and simba_hold_until
   run the loop (I/O, keepalives, timers). simba_pollfds only hands new
   requests to the backend. Nothing else does I/O: between ticks keepalives
   stop, so a hold outlives at most ttl without a tick (sleep() with a lock
   held loses it; call simba_hold_for instead). */
SIMBADEF int simba_hold_for(simba *s, simba_lock lock, int ms, simba_event *ev);
SIMBADEF int simba_hold_until(simba *s, simba_lock lock, int timeout_ms, int (*done)(void *user), void *user, simba_event *ev);

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
/* simba_strerror: a short English text for a SIMBA_E* code (never NULL). */
SIMBADEF const char *simba_strerror(int err);
/* simba_event_name: "ACQUIRED", "LOST", ... for logs. */
SIMBADEF const char *simba_event_name(simba_event_type type);
/* simba_last_error: why the last call that returned {0,0} or an error failed,
   or the cause (.error) of the last TIMEOUT, ERROR or DISCONNECTED event. */
SIMBADEF int simba_last_error(simba *s);
/* simba_last_error_msg: detail text for simba_last_error() ("" if none);
   valid until the next simba call on s. */
SIMBADEF const char *simba_last_error_msg(simba *s);
/* simba_client_id: this client's id (the desc's, or the generated host:pid:random). */
SIMBADEF const char *simba_client_id(simba *s);
/* simba_connected: 1 while the backend connection is up. */
SIMBADEF int simba_connected(simba *s);
/* simba_grace_ms: how long the server's restart grace, as last reported to a
   request of s (TIMEOUT/.error SIMBA_EGRACE) or by an INSPECT's answer (read
   it right after INFO: an INFO whose server runs no grace sets it to 0),
   still holds back grants: ms from now, 0 when none was reported or it is
   over. For telling a user why a wait takes long before any TIMEOUT comes. */
SIMBADEF int64_t simba_grace_ms(simba *s);
/* simba_version: SIMBA_VERSION_STRING of the compiled implementation. */
SIMBADEF const char *simba_version(void);
/* simba_now_ms: simba's monotonic clock (the desc's clock, if one was given). */
SIMBADEF int64_t simba_now_ms(simba *s);

/*>>loop: push mode: event-loop hooks */

/*
    LOOP INTEGRATION
    ================
    Three ways to drive simba; pick one per instance.

    PULL (poll/select): each iteration call simba_pollfds(), sleep in poll()
    at most simba_timeout_ms(), then simba_tick(). An API call made between
    two ticks (simba_acquire, simba_release, simba_inspect, ...) only queues
    work; simba_timeout_ms() then returns 0, so the rule is simply: after
    any simba call, ask simba_pollfds() and simba_timeout_ms() again before
    you sleep (a loop that recomputes them every iteration, as in the
    walkthrough, does). A loop that cached the timeout across callbacks
    would wait for the next keepalive (ttl/3) instead.

    PUSH (hooks, like curl_multi_socket_action): set desc.loop (or call
    simba_set_loop). simba tells the loop, as it happens:
        socket(user, fd, SIMBA_POLL_IN|SIMBA_POLL_OUT)   start or change watching fd
        socket(user, fd, SIMBA_POLL_REMOVE)              stop watching fd
        timer(user, ms)                                  call back in ms (-1: cancel)
    and the loop calls simba_socket_action(s, fd, what_happened, ev, max)
    when fd is ready, or simba_socket_action(s, SIMBA_TIMEOUT, 0, ev, max)
    when the timer expires. It does that I/O, fires due timers and returns
    events exactly like simba_tick(). The user never diffs fd sets.
      - An API call that queued work calls timer(user, 0): a release from
        any callback of the loop goes out on the loop's next turn, not at
        the next keepalive.
      - A reconnect is told as REMOVE of the old fd before the add of the
        new one, also when the new socket got the same fd number (simba
        compares the socket's identity, st_dev/st_ino, not only the number).
        The REMOVE may come after the fd was closed (a client library closes
        sockets on its own), but always within the simba call that closed
        it, before control returns to the loop: ignore EBADF/ENOENT there.
        Sockets handed to the loop are made close-on-exec, so a forked
        child cannot keep a closed socket alive inside the loop's epoll set.
      - The timer carries every deadline, the local safety deadline too: a
        LOST from the clock alone arrives while the loop is otherwise idle.
    REENTRANCY: hooks are called only from inside simba calls on this
    instance (simba_create, simba_set_loop, simba_acquire, simba_release,
    simba_inspect/set_capacity/delete, simba_tick, simba_socket_action,
    simba_pollfds, simba_wait, simba_destroy), on the thread making that
    call. A hook must not change the same instance: as from any callback
    (CALLBACKS), simba_socket_action, simba_tick, simba_acquire,
    simba_release and the other calls that would answer SIMBA_EBUSY, and
    simba_destroy does nothing. Defer the work to the loop instead (the loop calls
    simba_socket_action later, from its own dispatch).
    ADAPTERS: adapters/simba_epoll.h, simba_libevent.h, simba_libuv.h wire
    these hooks to a loop library in one call and hand events to a callback.
*/
/* simba_set_loop: install (or with NULL remove) the push-mode hooks. The
   old hooks get REMOVE for every fd, timer -1 and detach; the new ones at
   once get every fd simba wants and the timer. socket and timer are
   required. Returns SIMBA_OK or SIMBA_E*. */
SIMBADEF int simba_set_loop(simba *s, const simba_loop *loop);
/* simba_socket_action: the loop says fd is ready (what: SIMBA_POLL_IN/OUT/
   ERR) or, with fd SIMBA_TIMEOUT, that the timer expired. Does the I/O,
   fires due timers, writes up to max events into out and re-arms the hooks.
   Returns the number of events or a negative SIMBA_E*. Events that do not
   fit stay queued and the timer is set to 0 for them. */
SIMBADEF int simba_socket_action(simba *s, int fd, int what, simba_event *out, int max);

/*>>backend: the backend API: the contract, ops and replies, the vtable, what a backend calls back */

/*
    WRITING A BACKEND
    =================
    A backend is a vtable plus an impl pointer. simba calls attach() once from
    simba_create, then submit() for each operation, and pollfds()/timeout_ms()/
    process() from the caller's loop. All operations are asynchronous: submit()
    returns SIMBA_OK when it took the operation, and then the backend calls
    simba_backend_complete() at most once for it, from inside process() or
    reset() (never from inside submit()). An op the connection loses needs no
    completion: after reset() and destroy() the core itself fails every op
    still in flight (as SIMBA_EDISCONNECTED) and ignores any later answer to
    it. submit() returns SIMBA_EDISCONNECTED (or another error) when it cannot
    take the operation; then no completion follows. A completion may make the
    core submit() again at once (from inside process() or reset()): a backend
    must accept that.

    The core validates every op once, before submit(): names, tenant, client
    and request ids, the number of resources, capacities and weights, lengths
    (docs/backend-contract.md lists what every op satisfies). Backends trust
    ops and never re-check them; they check only what their server answers.

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

    A backend may drive other backends (a composite: Redis Cluster drives one
    plain backend per master): it attaches each child to a relay
    (simba_backend_relay_open), so the child's reports reach the composite,
    and owes the core what any backend owes it (docs/backend-contract.md,
    "Composite backends").
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
    int watch_owner;        /* ENQUEUE/POLL: a contend handle's request: push this client a
                               wake-up (no request id) when the holder of res[0] changes.
                               Requests without it want only their own grant pushed, so an
                               owner change wakes only the clients that asked (no herd) */
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
    int capacity;           /* INSPECT; ENQUEUE/POLL: the stored capacity of res[0] (0 =
                               not reported: then ACQUIRED carries none and no mismatch
                               is warned about) */
    int nentries;           /* INSPECT: entries in queue order */
    const simba_holder *entries;
    int entry_times;        /* INSPECT: 1 when the backend filled the times of entries
                               (expires_in_ms, renewed_ago_ms, held_ms, each -1 where it
                               does not know); 0: the core sets them all to -1 */
    int64_t epoch;          /* OPEN/KEEPALIVE: the tenant's admin epoch, a counter that
                               DELETE and SET_CAPACITY increase (0: not kept). When it
                               changes, the core re-checks its holds, so a holder of a
                               deleted resource learns it even if the push was lost. */
    int grace_ms;           /* ENQUEUE/POLL/INSPECT: the server holds back grants for this
                               long after losing its data (restart grace); 0 = no grace
                               (INSPECT: none running, or the backend does not say) */
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
    /* drop the connection, report disconnected, reconnect with backoff. The
       ops in flight need no completion: after reset() returns, the core fails
       every op it submitted before and has no answer for (as if completed
       with SIMBA_EDISCONNECTED) and ignores a later answer to it. A backend
       may still complete them here itself. */
    void (*reset)(void *impl, int why);
    /* free everything; no completion is needed (the core drops the ops in
       flight and ignores completions made from inside destroy()) */
    void (*destroy)(void *impl);
};

/* What a backend calls back. */
SIMBADEF void simba_backend_complete(simba *s, const simba_reply *reply);
/* Pushes from the server, one call per kind of news. Each is a hint the core
   checks against its own state; none can make a request granted that the
   server did not grant to our current session.

   simba_backend_granted: entry `request` of session `session` on `name` was
   granted with `fence` (> 0). If it is a waiting one-resource request of our
   current session, the core reports ACQUIRED without another round trip; a
   keyed request keeps its id across sessions, so a grant to an entry of an
   earlier (dropped) session is never taken for the new session's request,
   and a handle whose key an earlier handle of the same session used POLLs
   instead (the push may be that handle's, late).
   Otherwise (not ours, multi-resource, already answered) it is news about
   `name`, as simba_backend_changed. */
SIMBADEF void simba_backend_granted(simba *s, const char *name, const char *session, const char *request, int64_t fence);
/* simba_backend_recheck: something changed for entry `request` of `session`
   on `name` alone (e.g. the owner changed, told to a contend handle): only
   that request re-checks (POLL), not the client's other requests on the
   name. If it is not a one-resource request of our current session, it is
   news about `name`, as simba_backend_changed. */
SIMBADEF void simba_backend_recheck(simba *s, const char *name, const char *session, const char *request);
/* simba_backend_changed: something changed on `name` (a release, a delete, a
   capacity change, a lost push): every waiter and holder of ours that has
   `name` among its resources re-checks (POLL). */
SIMBADEF void simba_backend_changed(simba *s, const char *name);
SIMBADEF void simba_backend_state(simba *s, int up, int err, const char *msg);
/* simba_backend_own_fds: every fd the backend's pollfds() reports is one it
   opened itself, close-on-exec, never one a library opened or reopened.
   The core then skips its check of each fd's flag at every pollfds (one
   system call per fd). Call it from attach(); by default the core checks. */
SIMBADEF void simba_backend_own_fds(simba *s);
SIMBADEF void *simba_backend_alloc(simba *s, size_t size);
SIMBADEF void simba_backend_free(simba *s, void *ptr);
SIMBADEF void simba_backend_log(simba *s, simba_log_level level, const char *fmt, ...);
/* Reconnect backoff shared by the backends: 50 ms doubling to 5 s, with
   jitter; within one lease (ttl + transition) of losing a connection that
   worked, at most 100 ms (a restart: the server is back soon, and holds
   are still valid for ttl if the client is back in time). */
SIMBADEF int simba_backend_backoff_ms(simba *s, int attempt);
SIMBADEF const char *simba_tenant(simba *s);
/* simba_backend_due: for a backend with no socket of its own (the mem
   backend's server lives in this process): an answer became due without any
   I/O the caller's loop could see, e.g. another client of the same server
   released. In push mode the core re-arms the loop's timer at once, so the
   caller's loop calls in; in pull mode simba_timeout_ms already counts it. */
SIMBADEF void simba_backend_due(simba *s);
/* simba_backend_error: what a backend constructor returns when it rejects its
   desc: simba_create then fails with `code` and the
   message, e.g. simba_backend_error(SIMBA_EINVAL, "simba_mysql_desc.url: no
   database in '%s'", url). Allocated with malloc (the constructor has no
   simba yet); an allocation failure still makes simba_create fail. */
SIMBADEF simba_backend simba_backend_error(int code, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* simba_backend_expand: a backend's DDL text (simba_mysql_schema,
   simba_pg_schema): statements[0..n), each followed by ";\n", with every
   `mark` character replaced by `with` (a table prefix, a schema name). Into
   buf (size bytes, always NUL-terminated, cut when short; buf NULL only
   counts). Returns the length of the whole text, without the NUL. */
SIMBADEF int simba_backend_expand(const char *const *statements, int n, char mark, const char *with,
                                  char *buf, size_t size);
/* simba_backend_resolve: the host-name policy of every backend, in one place
   (docs/design.md, "Host names"). Returns 0 with `out` = "" when `host` needs
   no lookup (a numeric IPv4/IPv6 address, or "localhost"), 0 with `out` = the
   numeric address of a name (resolved now, with a blocking getaddrinfo: call
   it from a backend constructor, never from inside simba_tick), or the
   getaddrinfo error code (gai_strerror() says it in words). */
SIMBADEF int simba_backend_resolve(const char *host, char *out, size_t cap);
/* simba_backend_resolve_error: a simba_backend_resolve error in words. */
SIMBADEF const char *simba_backend_resolve_error(int rc);
/* simba_backend_fail: from attach(): the reason the backend refuses, in words
   (then attach returns the code). */
SIMBADEF void simba_backend_fail(simba *s, int code, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* simba_backend_relay: for a composite backend, one that drives other
   backends (its children) through this same contract: Redis Cluster drives
   one plain backend per master. A child is attached to the simba that
   simba_backend_relay_open() returns: what the child reports (complete,
   granted, recheck, changed, state) goes to the relay's functions, with
   `user`, instead of to the core; a function left NULL passes the report
   on to `parent` unchanged (pushes are hints the core checks itself, so a
   composite may let them through). Everything else a child asks of its
   simba (alloc, free, log, the clock, tenant, client id, lease, backoff,
   due, fail) is the parent's. A relay is no simba of its own: every other
   simba_* call on it answers as on a destroyed instance. */
typedef struct simba_backend_relay {
    void *user;
    void (*complete)(void *user, const simba_reply *reply);
    void (*granted)(void *user, const char *name, const char *session, const char *request, int64_t fence);
    void (*recheck)(void *user, const char *name, const char *session, const char *request);
    void (*changed)(void *user, const char *name);
    void (*state)(void *user, int up, int err, const char *msg);
} simba_backend_relay;
/* A relay of `parent` (a simba, or itself a relay) that reports to `relay`
   (copied: it need not outlive the call); NULL when out of memory or when
   an argument is NULL. Close it with simba_backend_relay_close() after the
   child that uses it was destroyed. */
SIMBADEF simba *simba_backend_relay_open(simba *parent, const simba_backend_relay *relay);
SIMBADEF void simba_backend_relay_close(simba *relay);

/*>>kit: the backend kit: the grant rule, fences, name checks, allocation */

/* ---- the backend kit ----
   The rules every backend shares, written once here; a backend calls them and
   never writes them again (docs/backend-contract.md). */

/* simba_grant_weight: the grant rule's effective weight of an entry:
   min(weight, capacity), where weight 0 (exclusive) counts as the capacity. */
SIMBADEF int simba_grant_weight(int weight, int capacity);
/* simba_grant_step: one step of the prefix rule, walking a queue from its
   head. Adds the entry's effective weight to *ahead (the sum of the entries
   before it, 0 at the head; 64 bits, so weights near INT_MAX cannot wrap and
   over-grant) and returns 1 iff the entry is granted: what is ahead of it plus
   itself fits in the capacity. */
SIMBADEF int simba_grant_step(int64_t *ahead, int weight, int capacity);
/* simba_grant_fence: the fence a newly granted entry takes:
   max(counter + 1, now_us), so fences never go backwards, not even when the
   server lost its counter (a restart) as long as its clock did not go back. */
SIMBADEF int64_t simba_grant_fence(int64_t counter, int64_t now_us);
/* simba_check_name, simba_check_tenant, simba_check_id: what may go into a
   key, node name or row. Names: 1..SIMBA_MAX_NAME bytes, no control bytes.
   Tenants: 1..SIMBA_MAX_TENANT bytes of [A-Za-z0-9._-]. Client ids and keys:
   1..SIMBA_MAX_ID bytes of [A-Za-z0-9.:-]. Return SIMBA_OK, SIMBA_ENAME, or
   SIMBA_EINVAL for NULL. The core checks every name, tenant and id before a
   backend sees it; backends call these only on what they read back or take
   from their own desc. */
SIMBADEF int simba_check_name(const char *name);
SIMBADEF int simba_check_tenant(const char *tenant);
SIMBADEF int simba_check_id(const char *id);
/* simba_allocator_check: SIMBA_EINVAL if exactly one of alloc/free is set
   (a user alloc paired with libc free corrupts the heap), else SIMBA_OK. */
SIMBADEF int simba_allocator_check(const simba_allocator *a);
/* simba_allocator_alloc, _free, _strdup: memory that follows a desc's
   allocator before there is a simba (backend constructors); a NULL or zero
   allocator means malloc/free. _alloc returns zeroed memory (n 0 counts as 1);
   _free(a, NULL) does nothing. */
SIMBADEF void *simba_allocator_alloc(const simba_allocator *a, size_t n);
SIMBADEF void simba_allocator_free(const simba_allocator *a, void *ptr);
SIMBADEF char *simba_allocator_strdup(const simba_allocator *a, const char *str);
/* simba_allocator_or_default / simba_clock_or_default: `a` or `c` with its
   zero parts replaced by the defaults (malloc/free; CLOCK_MONOTONIC in ms). */
SIMBADEF simba_allocator simba_allocator_or_default(simba_allocator a);
SIMBADEF simba_clock simba_clock_or_default(simba_clock c);
/* simba_session_client: the client id inside session id `session` (the part
   before its last '~'), into out (cap bytes, NUL-terminated). */
SIMBADEF void simba_session_client(const char *session, char *out, size_t cap);

/* ---- reading a parsed URL ----
   A backend's simba_<b>_from_url reads the URL that simba_url.h parsed
   (simba_url_parse) with these: the parameters it knows, each marked used,
   then simba_url_check_used refuses whatever nobody read. */
enum {
    SIMBA_URL_MAX = 4096,         /* bytes in a URL */
    SIMBA_URL_MAX_HOSTS = 16,     /* hosts in a host list */
    SIMBA_URL_MAX_PARAMS = 32     /* query parameters */
};

/* What was wrong with a URL. msg is one line such as
   "URL port: '99999' is not a port (1..65535)"; it never holds a password. */
typedef struct simba_url_error {
    int code;                     /* SIMBA_EINVAL (syntax), SIMBA_ENAME, SIMBA_EUNSUPPORTED
                                     (scheme not compiled in), SIMBA_EAUTH (password source) */
    char part[32];                /* the part that is wrong: "scheme", "userinfo", "host",
                                     "port", "path", "query", or the parameter's name */
    char msg[256];
} simba_url_error;

typedef struct simba_url_host {
    const char *host;             /* decoded; IPv6 without its brackets */
    int port;                     /* 0 when the URL gives none */
} simba_url_host;

typedef struct simba_url_query {
    const char *key, *value;      /* decoded; value "" for "?flag" */
    int used;                     /* set by simba_url_param() */
} simba_url_query;

/* A parsed URL. Strings point into buf: keep the struct while you use them. */
typedef struct simba_url {
    char scheme[24];              /* lower case, e.g. "redis+unix" */
    int has_authority;            /* the URL had "//" */
    const char *user;             /* NULL when absent */
    const char *password;         /* NULL when absent (from the URL, password_env or password_file) */
    int nhosts;
    simba_url_host hosts[SIMBA_URL_MAX_HOSTS];
    const char *path;             /* decoded, with its leading '/'; "" when absent */
    int nparams;
    simba_url_query params[SIMBA_URL_MAX_PARAMS];
    char buf[2 * SIMBA_URL_MAX + 512];
} simba_url;

/* simba_url_param: the value of query parameter key (NULL if absent); marks it used. */
SIMBADEF const char *simba_url_param(simba_url *u, const char *key);
/* simba_url_int / simba_url_duration: parameter key as an integer in
   [min, max] / a duration in ms in [min, max]; absent leaves *out alone.
   SIMBA_OK or SIMBA_EINVAL with *err naming the parameter. */
SIMBADEF int simba_url_int(simba_url *u, const char *key, int min, int max, int *out, simba_url_error *err);
SIMBADEF int simba_url_duration(simba_url *u, const char *key, int min, int max, int *out, simba_url_error *err);
/* simba_parse_duration_ms: "500ms", "10s", "2m", "1h" (and "0") into *ms;
   a decimal fraction is allowed ("1.5s", "0.5s", "2.25m"), rounded up to a
   whole ms. SIMBA_EINVAL for anything else ("1.", ".5s", "1.5" without a
   unit), a missing unit or more than INT_MAX ms. */
SIMBADEF int simba_parse_duration_ms(const char *text, int *ms);
/* simba_url_check_used: SIMBA_EINVAL naming the first parameter nobody read. */
SIMBADEF int simba_url_check_used(const simba_url *u, simba_url_error *err);
/* simba_url_clear: overwrite the URL's storage (the password) with zeros. */
SIMBADEF void simba_url_clear(simba_url *u);
/* simba_url_fail: fills *err (may be NULL) and returns code; for backends' from_url. */
SIMBADEF int simba_url_fail(simba_url_error *err, int code, const char *part, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#ifdef __cplusplus
}
#endif
#endif /* SIMBA_INCLUDED */

/*--- IMPLEMENTATION ---------------------------------------------------------*/
#ifdef SIMBA_IMPLEMENTATION
#ifndef SIMBA_IMPL_INCLUDED
#define SIMBA_IMPL_INCLUDED

/*>>internals: includes, constants, small utilities, names and ids, error texts */

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <netdb.h>
#include <fcntl.h>

#ifndef SIMBA_ASSERT
#include <assert.h>
#define SIMBA_ASSERT(c) assert(c)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define SIMBA__NEVER INT64_MAX
#define SIMBA__MAGIC 0x53494d42u           /* "SIMB": a live instance */
#define SIMBA__DEAD 0x44454144u            /* "DEAD": inside simba_destroy, or a failed create */
#define SIMBA__RELAY 0x52454c41u           /* "RELA": a relay (simba_backend_relay_open) */
#define SIMBA__SESSION_OP 0xffffffffu      /* op ids of session operations */
#define SIMBA__CLOSE_OP 0xfffffffeu        /* a CLOSE: of an abandoned session (answer ignored) */
#define SIMBA__CLOSE_WAITED 1u             /* its seq: simba_destroy's, whose answer it waits for */
#define SIMBA__DROPPED_MAX 4               /* dropped sessions waiting for their CLOSE (simba__close_dropped) */

/*--- small utilities --------------------------------------------------------*/

static void *simba__default_alloc(size_t size, void *user) { (void)user; return malloc(size); }
static void simba__default_free(void *ptr, void *user) { (void)user; free(ptr); }

static int64_t simba__monotonic_ms(void *user) {
    struct timespec ts;
    (void)user;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const simba_allocator simba__no_allocator = {NULL, NULL, NULL};

static simba_allocator simba__allocator_or_default(simba_allocator a) {
    if (!a.alloc || !a.free) { a.alloc = simba__default_alloc; a.free = simba__default_free; }
    return a;
}

static simba_clock simba__clock_or_default(simba_clock c) {
    if (!c.now_ms) c.now_ms = simba__monotonic_ms;
    return c;
}

/* splitmix64: seeds and jitter; not for secrets. */
static uint64_t simba__mix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The seed of an instance's generator (handle salt, generated client id,
   session ids, request numbers). Two instances must never share it, not even
   one destroyed and another created at the same address in the same
   millisecond (the new one would take over the old one's session and keep its
   abandoned holds alive). So: 8 bytes of /dev/urandom when it can be read,
   mixed with a per-process counter (atomic where the compiler has GCC
   builtins: instances may be created in different threads; elsewhere a plain
   counter, which threads could in theory read twice, still mixed with the
   address and clocks), the pid, the address and both clocks. */
static uint64_t simba__seed_counter;

static uint64_t simba__new_seed(const void *addr) {
    uint64_t seed = 0, n, st;
    unsigned char b[8];
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        setvbuf(f, NULL, _IONBF, 0);         /* read 8 bytes, not a whole buffer */
        if (fread(b, 1, sizeof b, f) == sizeof b) {
            int i;
            for (i = 0; i < 8; i++) seed = (seed << 8) | b[i];
        }
        fclose(f);
    }
#if defined(__GNUC__) || defined(__clang__)
    n = __sync_add_and_fetch(&simba__seed_counter, 1);
#else
    n = ++simba__seed_counter;
#endif
    st = n ^ ((uint64_t)getpid() << 32);
    seed ^= simba__mix64(&st);
    st ^= (uint64_t)(uintptr_t)addr;
    seed ^= simba__mix64(&st);
    st ^= (uint64_t)simba__monotonic_ms(NULL) ^ ((uint64_t)time(NULL) << 20);
    seed ^= simba__mix64(&st);
    return seed;
}

/* FNV-1a: the name hash of the lock table. */
static uint32_t simba__hash(const char *s) {
    uint32_t h = 2166136261u;
    while (*s) { h ^= (unsigned char)*s++; h *= 16777619u; }
    return h;
}

/* A SIMBA_E* code in a byte (lock slots keep codes that small): anything
   else, which no backend should answer, becomes SIMBA_EBACKEND. */
static int8_t simba__code8(int code) {
    return (int8_t)(code >= -128 && code <= 127 ? code : SIMBA_EBACKEND);
}

static void simba__copy(char *dst, size_t cap, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
}

/* Names: 1..SIMBA_MAX_NAME bytes, no control bytes. */
static int simba__check_name(const char *name) {
    size_t n = 0;
    if (!name) return SIMBA_EINVAL;
    for (; name[n]; n++) {
        unsigned char c = (unsigned char)name[n];
        if (c < 0x20 || c == 0x7f || n >= SIMBA_MAX_NAME) return SIMBA_ENAME;
    }
    return n ? SIMBA_OK : SIMBA_ENAME;
}

/* Ids and tenants: a restricted alphabet, so every backend can put them into
   keys, node names and rows without escaping. Client ids and keys have no
   '_' (ZooKeeper entry names use it as a separator) and may have ':';
   tenants may have '_' but no ':' (Redis keys use it as a separator). */
static int simba__check_id(const char *id, size_t max, int is_tenant) {
    size_t n = 0;
    if (!id) return SIMBA_EINVAL;
    for (; id[n]; n++) {
        char c = id[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || (is_tenant ? c == '_' : c == ':');
        if (!ok || n >= max) return SIMBA_ENAME;
    }
    return n ? SIMBA_OK : SIMBA_ENAME;
}

SIMBADEF const char *simba_strerror(int err) {
    switch (err) {
    case SIMBA_OK: return "ok";
    case SIMBA_EINVAL: return "invalid argument (NULL, zero or out of range)";
    case SIMBA_ENAME: return "bad name: empty, too long, or a byte that is not allowed";
    case SIMBA_ECAPACITY: return "bad capacity: zero, or more permits than the capacity";
    case SIMBA_ESTALE: return "unknown, finished or foreign handle";
    case SIMBA_ENOMEM: return "out of memory";
    case SIMBA_EDISCONNECTED: return "not connected to the backend";
    case SIMBA_ETIMEDOUT: return "the backend did not answer in time";
    case SIMBA_ESESSION: return "the server no longer knows this session";
    case SIMBA_ENOTFOUND: return "no such resource or entry";
    case SIMBA_EBACKEND: return "the server answered with an error";
    case SIMBA_EPROTO: return "the server answered something unreadable";
    case SIMBA_EKEYBUSY: return "the idempotency key belongs to another live session";
    case SIMBA_EBUSY: return "the handle is busy";
    case SIMBA_EDESTROYED: return "the simba instance was destroyed";
    case SIMBA_EAUTH: return "the server refused our credentials or permissions";
    case SIMBA_EUNSUPPORTED: return "the backend does not support this";
    case SIMBA_EKEYMISMATCH: return "the idempotency key is in use for another request (names, permits, capacity or mode)";
    default: return "unknown error";
    }
}

SIMBADEF const char *simba_event_name(simba_event_type type) {
    switch (type) {
    case SIMBA_EVENT_ACQUIRED: return "ACQUIRED";
    case SIMBA_EVENT_RELEASED: return "RELEASED";
    case SIMBA_EVENT_LOST: return "LOST";
    case SIMBA_EVENT_TIMEOUT: return "TIMEOUT";
    case SIMBA_EVENT_OWNER: return "OWNER";
    case SIMBA_EVENT_CONNECTED: return "CONNECTED";
    case SIMBA_EVENT_DISCONNECTED: return "DISCONNECTED";
    case SIMBA_EVENT_ERROR: return "ERROR";
    case SIMBA_EVENT_INFO: return "INFO";
    case SIMBA_EVENT_DONE: return "DONE";
    default: return "NONE";
    }
}

SIMBADEF const char *simba_version(void) { return SIMBA_VERSION_STRING; }

/*>>types: the event ring, the lock table, sessions, the instance */

/*--- the event queue: a growable ring ---------------------------------------*/

typedef struct simba__events {
    simba_event *buf;
    int cap, head, count;
} simba__events;

/*--- the lock table ---------------------------------------------------------*/

enum { /* simba__lock.kind */
    SIMBA__K_FREE = 0,
    SIMBA__K_LOCK,
    SIMBA__K_QUERY,
    SIMBA__K_ZOMBIE,    /* withdrawn behind the user's back: the handle is stale,
                           the slot lives until the server confirmed the release */
    SIMBA__K_DEAD,      /* finished while on the dispatch list: freed when reached */
    SIMBA__K_OWED       /* finished while it owes events (simba__owe): the handle is
                           stale, the slot lives until they are delivered */
};

enum { /* simba__lock.state */
    SIMBA__S_PENDING = 1, /* needs ENQUEUE (or the query's op) */
    SIMBA__S_WAITING,     /* enqueued, not granted */
    SIMBA__S_HELD,
    SIMBA__S_RELEASING,   /* needs / awaits RELEASE */
    SIMBA__S_ANSWERED     /* query: answered, freed after its event was delivered */
};

enum { /* simba__lock.flags */
    SIMBA__F_CONTEND = 1 << 0,
    SIMBA__F_REENTRANT = 1 << 1,
    SIMBA__F_DIRTY = 1 << 2,       /* on the dispatch list */
    SIMBA__F_NEED_POLL = 1 << 3,   /* WAITING/HELD: a POLL is wanted; set while an ENQUEUE or
                                      POLL is in flight: news came that its answer may
                                      predate (simba__news) */
    SIMBA__F_MAY_EXIST = 1 << 4,   /* an ENQUEUE was sent in the lock's session */
    SIMBA__F_ACQ_QUEUED = 1 << 5,  /* the caller was not told of this hold yet (ACQUIRED queued) */
    SIMBA__F_HASHED = 1 << 6,      /* in the name hash */
    SIMBA__F_DELIVERED = 1 << 7,   /* query: its event was delivered; freed at the next tick */
    SIMBA__F_CAP_WARNED = 1 << 8,  /* a capacity mismatch was logged for it */
    SIMBA__F_RIDX = 1 << 9,        /* in the request index (simba__ridx_add) */
    SIMBA__F_BEHIND = 1 << 10,     /* PENDING keyed request: another handle of its key is
                                      releasing; nothing is sent until that is confirmed */
    SIMBA__F_OWED_LISTED = 1 << 11, /* on the owed list (it may owe nothing any more) */
    SIMBA__F_OWED_OLD_GEN = 1 << 12, /* withdrawn while it owed events: they name the handle
                                       the caller had, of the generation before (simba__zombify) */
    SIMBA__F_KEY_REUSED = 1 << 13, /* keyed: an earlier handle of this session may have had an
                                      entry under the key (simba__key_seen_before) */
    SIMBA__F_UNCONFIRMED = 1 << 14, /* the tenant's admin epoch moved since this lock's last
                                       answer: as a hold, valid until s->confirm_by at most;
                                       an answer from before does not grant it */
    SIMBA__F_CONFIRMING = 1 << 15  /* UNCONFIRMED, and the op in flight was sent after the
                                      move: its answer confirms or ends the hold */
};

typedef struct simba__ridx_slot {   /* the request index (simba__own_request) */
    uint32_t hash;                   /* simba__ridx_hash of the lock's ridx_k (its home, and a
                                        first comparison that needs no look at the lock) */
    uint32_t lock;                   /* index + 1, 0: empty */
} simba__ridx_slot;

typedef struct simba__lock {
    uint32_t gen;
    uint8_t kind, state, op, nres;   /* op: the simba_op_kind in flight, 0 none */
    uint8_t qkind;                   /* query: the simba_op_kind it asks for */
    int8_t cause;                    /* the last backend error seen while it waited (0 none) */
    uint16_t flags;
    uint16_t owed;                   /* events it owes the caller (simba__owe) */
    int16_t owed_error;              /* the code of an owed ERROR, INFO or DONE */
    int32_t capacity, weight;        /* weight 0 = exclusive */
    int32_t holds;
    int32_t wait_ms;
    uint32_t op_seq;
    uint32_t op_reset_no;            /* s->reset_no when its op was submitted */
    uint32_t heap_pos;               /* index + 1 in the timer heap, 0 = not in it */
    uint32_t next_dirty;             /* index + 1, dispatch list */
    uint32_t hnext, hprev;           /* index + 1, name hash chain (prev 0: the bucket's head) */
    uint32_t mnext, mprev;           /* index + 1, list of multi-resource locks */
    uint32_t knext, kprev;           /* index + 1, list of keyed locks */
    uint64_t ridx_k;                 /* its key in the request index (simba__ridx_key) */
    uint32_t session_no;             /* the session its entry belongs to */
    int nresult;                     /* query: INSPECT entries in arr.result */
    uint64_t req_no;
    int64_t timer_at;                /* min of the three deadlines below (heap key) */
    int64_t wait_deadline, recheck_at, op_deadline;
    int64_t fence;
    char *names;                     /* nres names, each NUL-terminated, one block */
    char *key;                       /* idempotency key, or NULL */
    union {                          /* (one kind of slot uses each) */
        int64_t *fences;             /* a lock with nres > 1: all fences */
        simba_holder *result;        /* a query: INSPECT entries */
    } arr;
    char *owner;                     /* contend: the owner last reported */
    void *user;
    int stored_capacity;             /* the server's capacity of its first resource (0 unknown) */
    uint32_t owed_next;              /* index + 1, the owed list */
} simba__lock;

enum { SIMBA__KEYS_SEEN_WORDS = 64 };  /* 4096 bits */

typedef struct simba__session {
    uint32_t no;                     /* generation, 0 = none yet */
    int open;                        /* the server confirmed OPEN */
    char id[SIMBA_MAX_SESSION + 1];
    int64_t valid_until;             /* local safety deadline of every hold */
    int64_t next_keepalive;
    uint8_t op;                      /* OPEN or KEEPALIVE in flight */
    uint32_t op_seq;
    uint32_t op_reset_no;            /* s->reset_no when it was submitted */
    int64_t op_sent, op_deadline;
    int failures;
    uint64_t req_next;               /* the n of the last request id given (see simba__next_req_no) */
    uint64_t keys_seen[SIMBA__KEYS_SEEN_WORDS]; /* simba__key_seen_before */
} simba__session;

struct simba {
    uint32_t magic;                  /* SIMBA__MAGIC while live (simba__is_live) */
    simba *relay_parent;             /* a relay: whom everything but its reports goes to */
    simba_backend_relay relay;       /* a relay: where its child's reports go */
    simba_allocator alloc;
    simba_logger logger;
    simba_clock clock;
    simba_backend backend;
    int connected, last_error;
    uint32_t reset_no;               /* counts vt->reset calls: an op submitted before the
                                        last one and still in flight is failed by the core */
    int own_fds;                     /* simba_backend_own_fds: no close-on-exec check */
    int backend_full;                /* the backend refused a submit (SIMBA_EBUSY): dispatch
                                        waits for its next completion instead of spinning */
    int conn_error;                  /* the last connection failure reported (0 none) */
    char conn_msg[SIMBA_MAX_MESSAGE + 1];  /* its message */
    char last_msg[SIMBA_MAX_MESSAGE + 96]; /* simba_last_error_msg() */
    int64_t grace_warned_until;      /* the end of the last restart grace logged */
    int64_t grace_until;             /* the end of the server's restart grace, our clock */
    int last_msg_code;               /* last_msg belongs to this simba_last_error() */
    int sess_error;                  /* why the last OPEN failed (0: none since it worked) */
    char sess_msg[SIMBA_MAX_MESSAGE + 1];
    char tenant[SIMBA_MAX_TENANT + 1];
    char client_id[SIMBA_MAX_ID + 1];
    int ttl_ms, transition_ms, op_timeout_ms, recheck_ms, linger_ms;
    int close_answered;              /* simba_destroy: the server answered its CLOSE */
    char dropped[SIMBA__DROPPED_MAX][SIMBA_MAX_SESSION + 1]; /* dropped sessions not closed on the
                                        server yet, oldest first: see simba__close_dropped */
    int ndropped;
    int64_t down_since;              /* when a connection that worked was lost (0: connected, or never was) */
    uint64_t rng;
    uint32_t salt;                   /* mixed into handle generations: foreign handles fail */
    simba__session session;
    int64_t admin_epoch;             /* the last epoch a keepalive reported */
    int64_t confirm_by;              /* the deadline of the holds flagged UNCONFIRMED: what the
                                        session's was before the epoch moved (SIMBA__NEVER: none) */
    /* lock slots */
    simba__lock *locks;
    uint32_t nlocks, caplocks, free_head; /* free list through next_dirty */
    uint32_t live_locks;
    uint64_t find_steps;             /* handles looked at to find one by a pushed request id or
                                        to unlink one from its lists (tests count it) */
    /* request index: our one-resource locks by request number or key, so a
       pushed request id finds its handle in O(1), not by walking the chain
       of the client's handles on the name. Open addressing, at least four
       times the live locks (simba__reserve), so an insert never allocates. */
    simba__ridx_slot *ridx;
    uint32_t nridx;
    /* name hash: buckets of lock index + 1 */
    uint32_t *buckets;
    uint32_t nbuckets;
    /* timer heap of lock indices */
    uint32_t *heap;
    uint32_t nheap, capheap;
    /* dispatch list */
    uint32_t dirty_head, dirty_tail;
    /* multi-resource locks (hashed by their first name only): wakes scan them */
    uint32_t multi_head;
    /* keyed locks, whatever their names: a key is looked up here, so that it
       is found (and its shape compared) whichever names the caller passes */
    uint32_t keyed_head;
    /* answered queries whose INFO was delivered: freed at the next tick */
    uint32_t delivered_queries;
    simba__events events;
    uint32_t owed_head, owed_tail;   /* index + 1: locks that owe events (simba__owe) */
    uint32_t owing;                  /* locks that owe events now */
    /* push mode (simba_loop): what the loop watches for us, so simba tells only changes */
    simba_loop loop;
    struct simba__watch *watch;
    int nwatch, capwatch;
    struct pollfd *loop_want;
    int capwant;
    int64_t loop_at;                 /* the armed timer's absolute time, SIMBA__NEVER: none */
    int cb_busy;                     /* inside a callback of the caller's (simba__callback_busy) */
    int64_t clock_max;               /* the latest time the caller's clock said (simba__now) */
    int clock_back;                  /* it went back since: holds are lost (simba__clock_check) */
    int64_t clock_wild;              /* its reading out of range, since the last good one (0: none) */
    int clock_wild_told;             /* ... and the log has said so */
    int loop_fallback;               /* an fd the loop could not watch: poll it from the timer */
};

/* One fd the loop watches for us, with the identity of its socket: a new
   socket that got the same number is a different fd for the loop. */
struct simba__watch {
    int fd, mask, ok;
    dev_t dev;
    ino_t ino;
};

/* Forward declarations: what one section uses before the section that owns it. */
static int simba__session_safe(simba *s, int64_t now);
static int64_t simba__hold_until(const simba *s, const simba__lock *l);
static void simba__heap_remove(simba *s, simba__lock *l);
static void simba__timer_update(simba *s, simba__lock *l);
static void simba__end_request(simba *s, simba__lock *l);
static void simba__backend_reset(simba *s, int why);
static void simba__loop_sync(simba *s);
static void simba__loop_kick(simba *s);
static void simba__loop_teardown(simba *s);

/*>>instance: instance checks (no global state), memory, logging, errors */

/*--- instance checks ----------------------------------------------------------
   No global state: every public call checks the instance's magic in O(1)
   (curl's GOOD_MULTI_HANDLE). simba_destroy sets it to SIMBA__DEAD first, so
   a call made from a callback inside simba_destroy (a loop hook, a logger)
   answers SIMBA_EDESTROYED. A pointer that was freed is not checked: using
   it is undefined (SIMBA_ASSERT catches some of it in debug builds). */
static int simba__is_live(const simba *s) {
    if (!s) return 0;
    SIMBA_ASSERT(s->magic == SIMBA__MAGIC || s->magic == SIMBA__DEAD || s->magic == SIMBA__RELAY);
    return s->magic == SIMBA__MAGIC;
}

/* A relay's reports go to its relay functions; everything else a backend
   asks of its simba goes to the instance at the root of its relays. */
static int simba__is_relay(const simba *s) { return s && s->magic == SIMBA__RELAY; }
static simba *simba__root(simba *s) {
    while (simba__is_relay(s)) s = s->relay_parent;
    return s;
}

/*--- memory and logging -------------------------------------------------------*/

/*--- the caller's callbacks ------------------------------------------------------
   The logger, the clock, the loop hooks and a hold helper's condition are
   called from the middle of simba's work (a lock being answered, a list
   being walked). A call from one of them into the same instance that would
   change its state answers SIMBA_EBUSY (simba_destroy does nothing): an
   acquire could move the lock table under the lock being answered, a tick
   would run the step it is in again, a destroy would free the instance
   under it. Reading calls (simba_valid_ms, simba_now_ms, ...) work. */
static int simba__callback_busy(const simba *s) { return s->cb_busy > 0; }

static void *simba__alloc(simba *s, size_t n) { return s->alloc.alloc(n, s->alloc.user); }
static void simba__free(simba *s, void *p) { if (p) s->alloc.free(p, s->alloc.user); }

static void simba__logv(simba *s, simba_log_level level, const char *fmt, va_list ap) {
    char buf[512];
    if (!s->logger.func || level > s->logger.level) return;
    vsnprintf(buf, sizeof buf, fmt, ap);
    s->cb_busy++;
    s->logger.func(s->logger.user, level, buf);
    s->cb_busy--;
}

static void simba__log(simba *s, simba_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    simba__logv(s, level, fmt, ap);
    va_end(ap);
}

/* simba's clock never goes back and never leaves 0 .. SIMBA_CLOCK_MAX_MS
   (deadlines taken from it cannot overflow). A caller's clock that goes
   back cannot say how much time really passed, and one that reads out of
   range is wrong, so no hold is safe any more: simba__clock_check drops
   the session at the next step (LOST first), and until then simba's time
   stays at the latest good reading (0 when there is none). */
static int64_t simba__now(simba *s) {
    int64_t t;
    s->cb_busy++;
    t = s->clock.now_ms(s->clock.user);
    s->cb_busy--;
    if (t < 0 || t > SIMBA_CLOCK_MAX_MS) {
        if (!s->clock_wild) s->clock_wild = t;   /* never 0: 0 is in range */
        s->clock_back = 1;
        return s->clock_max > 0 ? s->clock_max : 0;
    }
    s->clock_wild = 0;
    s->clock_wild_told = 0;
    if (t < s->clock_max) { s->clock_back = 1; return s->clock_max; }
    s->clock_max = t;
    return t;
}

static int simba__fail(simba *s, int err) { s->last_error = err; return err; }
static const simba_lock simba__no_lock = {0, 0};
/* simba__fail for the calls that return a handle: {0,0} and why. */
static simba_lock simba__fail_lock(simba *s, int err) { s->last_error = err; return simba__no_lock; }

/* simba_last_error() with its words. */
static void simba__set_error(simba *s, int err, const char *msg) {
    s->last_error = err;
    s->last_msg_code = err;
    simba__copy(s->last_msg, sizeof s->last_msg, msg);
}

/*>>slots: lock slots, handles, names, the name hash, the end of a slot */

/*--- lock slots, handles, names ------------------------------------------------*/

static simba_lock simba__handle(simba *s, const simba__lock *l) {
    simba_lock h;
    h.id = (uint32_t)(l - s->locks) + 1;
    h.gen = l->gen ^ s->salt;
    return h;
}

/* The live slot of a handle of kind `kind`, or NULL for a stale/foreign one. */
static simba__lock *simba__lookup(simba *s, simba_lock h, int kind) {
    simba__lock *l;
    if (h.id == 0 || h.id > s->nlocks) return NULL;
    l = &s->locks[h.id - 1];
    if ((l->gen ^ s->salt) != h.gen || l->kind != kind) return NULL;
    return l;
}

static const char *simba__name(const simba__lock *l, int i) {
    const char *p = l->names;
    while (i-- > 0) p += strlen(p) + 1;
    return p;
}

static int simba__reserve(simba *s, uint32_t live);
static simba__lock *simba__slot_new(simba *s) {
    simba__lock *l;
    uint32_t idx;
    if (simba__reserve(s, s->live_locks + 1) != SIMBA_OK) return NULL;
    if (s->free_head) {
        idx = s->free_head - 1;
        s->free_head = s->locks[idx].next_dirty;
    } else {
        if (s->nlocks == s->caplocks) {
            /* half as many again: amortised O(1) like doubling, and at most a
               third of the slots unused (they are the client's main memory) */
            uint32_t ncap = s->caplocks ? s->caplocks + s->caplocks / 2 : 16;
            simba__lock *nl = (simba__lock *)simba__alloc(s, sizeof(simba__lock) * ncap);
            if (!nl) return NULL;
            if (s->nlocks) memcpy(nl, s->locks, sizeof(simba__lock) * s->nlocks);
            simba__free(s, s->locks);
            s->locks = nl; s->caplocks = ncap;
        }
        idx = s->nlocks++;
        s->locks[idx].gen = 0;
        s->locks[idx].op_seq = 0;
    }
    l = &s->locks[idx];
    {
        /* An answer names its lock by slot and op number (simba__fill_op),
           and may come late and out of order: the slot's op numbers go on
           from its last lock's, so none of that lock's answers fits. */
        uint32_t gen = l->gen + 1, op_seq = l->op_seq;
        memset(l, 0, sizeof *l);
        l->gen = gen ? gen : 1;   /* generation 0 is never valid */
        l->op_seq = op_seq;
    }
    l->wait_deadline = l->recheck_at = l->op_deadline = l->timer_at = SIMBA__NEVER;
    s->live_locks++;
    return l;
}

static uint32_t simba__bucket(simba *s, const char *name) {
    return simba__hash(name) & (s->nbuckets - 1);
}

static int simba__hash_grow(simba *s) {
    uint32_t nb = s->nbuckets ? s->nbuckets * 2 : 64, i;
    uint32_t *b = (uint32_t *)simba__alloc(s, sizeof(uint32_t) * nb);
    if (!b) return SIMBA_ENOMEM;
    memset(b, 0, sizeof(uint32_t) * nb);
    simba__free(s, s->buckets);
    s->buckets = b; s->nbuckets = nb;
    for (i = 0; i < s->nlocks; i++) {
        simba__lock *l = &s->locks[i];
        if (!(l->flags & SIMBA__F_HASHED)) continue;
        {
            uint32_t k = simba__bucket(s, l->names);
            l->hnext = b[k]; l->hprev = 0;
            if (b[k]) s->locks[b[k] - 1].hprev = i + 1;
            b[k] = i + 1;
        }
    }
    return SIMBA_OK;
}

/* Locks are hashed by their first resource name (for wake-ups, re-entrancy
   and keys). */
static int simba__hash_insert(simba *s, simba__lock *l) {
    uint32_t k, me = (uint32_t)(l - s->locks) + 1;
    if (s->live_locks > s->nbuckets && simba__hash_grow(s) != SIMBA_OK && !s->nbuckets) return SIMBA_ENOMEM;
    k = simba__bucket(s, l->names);
    l->hnext = s->buckets[k]; l->hprev = 0;
    if (l->hnext) s->locks[l->hnext - 1].hprev = me;
    s->buckets[k] = me;
    l->flags |= SIMBA__F_HASHED;
    if (l->nres > 1) {
        l->mnext = s->multi_head; l->mprev = 0;
        if (l->mnext) s->locks[l->mnext - 1].mprev = me;
        s->multi_head = me;
    }
    if (l->key) {
        l->knext = s->keyed_head; l->kprev = 0;
        if (l->knext) s->locks[l->knext - 1].kprev = me;
        s->keyed_head = me;
    }
    return SIMBA_OK;
}

static void simba__ridx_remove(simba *s, simba__lock *l);

/* Unlink from the name chain and the multi and keyed lists: O(1) each
   through the prev links, however many handles share the name. */
static void simba__hash_remove(simba *s, simba__lock *l) {
    simba__ridx_remove(s, l);
    s->find_steps++;
    if (l->hprev) s->locks[l->hprev - 1].hnext = l->hnext;
    else s->buckets[simba__bucket(s, l->names)] = l->hnext;
    if (l->hnext) s->locks[l->hnext - 1].hprev = l->hprev;
    if (l->nres > 1) {
        if (l->mprev) s->locks[l->mprev - 1].mnext = l->mnext;
        else s->multi_head = l->mnext;
        if (l->mnext) s->locks[l->mnext - 1].mprev = l->mprev;
    }
    if (l->key) {
        if (l->kprev) s->locks[l->kprev - 1].knext = l->knext;
        else s->keyed_head = l->knext;
        if (l->knext) s->locks[l->knext - 1].kprev = l->kprev;
    }
    l->hnext = l->hprev = l->mnext = l->mprev = l->knext = l->kprev = 0;
}

/*--- the request index: a pushed request id to our handle ----------------------*/

/* A request number (below 2^62), or a key's hash with the top bit set: the
   two kinds of request id never share a key. Equal keys are compared in full
   by the caller (hashes of keys collide). */
static uint64_t simba__ridx_key(const char *key, uint64_t req_no) {
    return key ? 0x8000000000000000ull | simba__hash(key) : req_no;
}

static uint32_t simba__ridx_hash(uint64_t k) {
    uint64_t t = k;
    return (uint32_t)simba__mix64(&t);
}

static void simba__ridx_put(simba__ridx_slot *t, uint32_t n, uint64_t k, uint32_t lock) {
    uint32_t h = simba__ridx_hash(k), i = h & (n - 1);
    while (t[i].lock) i = (i + 1) & (n - 1);
    t[i].hash = h;
    t[i].lock = lock;
}

/* Room for `live` locks at half load at most (short probes at any size: 1.5
   slots looked at on average to find one, 2.5 to miss); rebuilt from the
   locks on growth. */
static int simba__ridx_reserve(simba *s, uint32_t live) {
    uint32_t n = s->nridx ? s->nridx : 64, i;
    simba__ridx_slot *t;
    while ((uint64_t)n < 2 * (uint64_t)live) n *= 2;
    if (n == s->nridx) return SIMBA_OK;
    t = (simba__ridx_slot *)simba__alloc(s, sizeof(simba__ridx_slot) * n);
    if (!t) return SIMBA_ENOMEM;
    memset(t, 0, sizeof(simba__ridx_slot) * n);
    for (i = 0; i < s->nlocks; i++)
        if (s->locks[i].flags & SIMBA__F_RIDX) simba__ridx_put(t, n, s->locks[i].ridx_k, i + 1);
    simba__free(s, s->ridx);
    s->ridx = t;
    s->nridx = n;
    return SIMBA_OK;
}

/* Index a one-resource lock under the request id it was just given. */
static void simba__ridx_add(simba *s, simba__lock *l) {
    if (l->kind != SIMBA__K_LOCK || l->nres != 1 || !(l->flags & SIMBA__F_HASHED) || !s->nridx) return;
    SIMBA_ASSERT(!(l->flags & SIMBA__F_RIDX));
    l->ridx_k = simba__ridx_key(l->key, l->req_no);
    simba__ridx_put(s->ridx, s->nridx, l->ridx_k, (uint32_t)(l - s->locks) + 1);
    l->flags |= SIMBA__F_RIDX;
}

/* Linear probing's backward shift: no tombstones, however many come and go. */
static void simba__ridx_remove(simba *s, simba__lock *l) {
    uint32_t me = (uint32_t)(l - s->locks) + 1, mask = s->nridx - 1, i, j;
    if (!(l->flags & SIMBA__F_RIDX)) return;
    l->flags &= (uint16_t)~SIMBA__F_RIDX;
    for (i = simba__ridx_hash(l->ridx_k) & mask; s->ridx[i].lock && s->ridx[i].lock != me; i = (i + 1) & mask)
        s->find_steps++;
    if (!s->ridx[i].lock) return;
    for (j = (i + 1) & mask; s->ridx[j].lock; j = (j + 1) & mask) {
        uint32_t home = s->ridx[j].hash & mask;
        s->find_steps++;
        /* j's slot may fill the hole at i unless its home lies in (i, j] */
        if (((j - home) & mask) >= ((j - i) & mask)) { s->ridx[i] = s->ridx[j]; i = j; }
    }
    s->ridx[i].lock = 0;
}

/*--- the dispatch list: locks that need an operation sent ---------------------*/

static void simba__mark_dirty(simba *s, simba__lock *l) {
    uint32_t me = (uint32_t)(l - s->locks) + 1;
    if (l->flags & SIMBA__F_DIRTY) return;
    l->flags |= SIMBA__F_DIRTY;
    l->next_dirty = 0;
    if (s->dirty_tail) s->locks[s->dirty_tail - 1].next_dirty = me;
    else s->dirty_head = me;
    s->dirty_tail = me;
}

static void simba__owed_unlink(simba *s, simba__lock *l);
/* A slot whose generation reaches this is never used again: a handle is
   {slot, 32-bit generation}, and a generation that wrapped round would give
   a handle kept from long ago the slot's new lock (simba_release of a stale
   handle would release someone else's hold). Below it, the slot's last
   lock can still move on twice (simba__slot_new, simba__zombify) without
   wrapping. It costs one slot per 2^31 locks in it. */
#define SIMBA__GEN_RETIRE 0xfffffff0u

static void simba__slot_free(simba *s, simba__lock *l) {
    SIMBA_ASSERT(!(l->flags & SIMBA__F_DIRTY));
    if (l->flags & SIMBA__F_OWED_LISTED) simba__owed_unlink(s, l);
    simba__heap_remove(s, l);
    if (l->flags & SIMBA__F_HASHED) simba__hash_remove(s, l);
    l->flags = 0;   /* a free slot is in no list: simba__hash_grow must not rehash it */
    simba__free(s, l->names);
    simba__free(s, l->key);
    simba__free(s, l->arr.fences);
    simba__free(s, l->owner);
    l->names = l->key = l->owner = NULL;
    l->arr.fences = NULL;
    l->kind = SIMBA__K_FREE;
    l->gen++;
    s->live_locks--;
    if (l->gen >= SIMBA__GEN_RETIRE) return;   /* retired: on no free list */
    l->next_dirty = s->free_head;
    s->free_head = (uint32_t)(l - s->locks) + 1;
}

/*--- a key has one server entry: one handle at a time sends for it ------------------*/

/* Whether a handle of `key` other than `except` may still have its entry on
   the server while giving it up (a release or a withdrawal not yet
   confirmed). */
static int simba__key_releasing(simba *s, const char *key, const simba__lock *except) {
    uint32_t i;
    for (i = s->keyed_head; i; ) {
        const simba__lock *l = &s->locks[i - 1];
        i = l->knext;
        if (l == except || strcmp(l->key, key) != 0) continue;
        if (l->kind == SIMBA__K_ZOMBIE || (l->kind == SIMBA__K_LOCK && l->state == SIMBA__S_RELEASING)) return 1;
    }
    return 0;
}

/* The handle `gone` of a key ends: a request of the same key that waited
   for it may now be sent. A request id names the entry by its key alone,
   so a RELEASE repeated after a lost or overtaken reply would remove an
   entry the new handle had already made: the new handle is sent only once
   the old entry is confirmed gone. */
static void simba__key_unblock(simba *s, const simba__lock *gone) {
    uint32_t i;
    if (!gone->key || simba__key_releasing(s, gone->key, gone)) return;
    for (i = s->keyed_head; i; ) {
        simba__lock *l = &s->locks[i - 1];
        i = l->knext;
        if (!(l->flags & SIMBA__F_BEHIND) || l == gone || strcmp(l->key, gone->key) != 0) continue;
        l->flags &= (uint16_t)~SIMBA__F_BEHIND;
        simba__mark_dirty(s, l);
    }
}

/* The end of a slot that owes nothing: on the dispatch list it is freed when
   the list reaches it. */
static void simba__slot_end(simba *s, simba__lock *l) {
    if (l->flags & SIMBA__F_DIRTY) { l->kind = SIMBA__K_DEAD; return; } /* reaped by dispatch */
    simba__slot_free(s, l);
}

/* The lock's op in flight is forgotten: an answer to it, if one comes, is
   stale (simba__complete matches answers by op number). The caller updates
   the timer. */
static void simba__drop_op(simba__lock *l) {
    l->op = 0;
    l->op_seq++;
    l->op_deadline = SIMBA__NEVER;
}

/* A slot whose handle is done. One that still owes events lives on, out of
   every list but the owed one, until they are delivered (simba__owed_first). */
static void simba__finish(simba *s, simba__lock *l) {
    simba__key_unblock(s, l);
    simba__drop_op(l);
    l->wait_deadline = l->recheck_at = SIMBA__NEVER;
    simba__timer_update(s, l);
    if (!l->owed) { simba__slot_end(s, l); return; }
    if (l->flags & SIMBA__F_HASHED) simba__hash_remove(s, l);
    l->flags &= (uint16_t)~SIMBA__F_HASHED;
    l->kind = SIMBA__K_OWED;
}

/*>>events: the event queue, the events a lock owes, emitting, forgetting */

/*--- emitting events ---------------------------------------------------------*/

static int simba__events_grow(simba *s) {
    simba__events *q = &s->events;
    int ncap = q->cap ? q->cap * 2 : 64, i;
    simba_event *nb = (simba_event *)simba__alloc(s, sizeof(simba_event) * (size_t)ncap);
    if (!nb) return SIMBA_ENOMEM;
    for (i = 0; i < q->count; i++) nb[i] = q->buf[(q->head + i) % q->cap];
    simba__free(s, q->buf);
    q->buf = nb; q->cap = ncap; q->head = 0;
    return SIMBA_OK;
}

/* Events go into the queue, which grows when it must. A lock's event is
   never dropped for want of memory: when the queue cannot grow, the lock
   keeps it itself (simba__owe), so a lock costs no queue room while it has
   nothing to say. From then on, while any lock owes, every lock event is
   owed (in order after that lock's events still queued), and the owed ones
   are delivered after the queue, but an owed LOST before anything except a
   LOST queued before it: a process that loses a lock is told first. An
   event of no lock (CONNECTED, DISCONNECTED) that finds no room is logged
   as lost and the error remembered (simba_last_error); so is an OWNER that
   would be owed (it reports a change of holder, the next change does
   again, and simba_inspect tells it any time). */

/* simba__lock.owed: up to three event types in order, four bits each, and
   the reason of an owed LOST in the top four bits (a LOST takes the older
   events out first, so it is always the first owed). */
enum { SIMBA__OWED_MAX = 3, SIMBA__OWED_REASON = 12 };

static int simba__owed_type(const simba__lock *l, int i) { return (l->owed >> (4 * i)) & 15; }

static int simba__owed_count(const simba__lock *l) {
    int n = 0;
    while (n < SIMBA__OWED_MAX && simba__owed_type(l, n)) n++;
    return n;
}

/* The generation the events a lock owes name: the caller's handle, also
   after a withdrawal made it stale (simba__zombify moved the slot on). */
static uint32_t simba__owed_gen(const simba__lock *l) {
    if (!(l->flags & SIMBA__F_OWED_OLD_GEN)) return l->gen;
    return l->gen == 1 ? 0xffffffffu : l->gen - 1;
}

/* The slot an event names (any kind but free), or NULL: by its generation
   now, or by the one of the events it owes. */
static simba__lock *simba__event_lock(simba *s, simba_lock h) {
    simba__lock *l;
    if (h.id == 0 || h.id > s->nlocks) return NULL;
    l = &s->locks[h.id - 1];
    if (l->kind == SIMBA__K_FREE) return NULL;
    if ((l->gen ^ s->salt) == h.gen || (l->owed && (simba__owed_gen(l) ^ s->salt) == h.gen)) return l;
    return NULL;
}

/* Put l on the owed list (a LOST at its head). A lock already listed stays
   where it is: it owed events that a LOST took out, among them the
   ACQUIRED (a held lock owes nothing else that a LOST takes out), so the
   caller does not believe it holds and that LOST is no news to act on. */
static void simba__owed_link(simba *s, simba__lock *l, int front) {
    uint32_t me = (uint32_t)(l - s->locks) + 1;
    if (l->flags & SIMBA__F_OWED_LISTED) return;
    l->flags |= SIMBA__F_OWED_LISTED;
    if (front || !s->owed_head) {
        l->owed_next = s->owed_head;
        s->owed_head = me;
        if (!s->owed_tail) s->owed_tail = me;
        return;
    }
    l->owed_next = 0;
    s->locks[s->owed_tail - 1].owed_next = me;
    s->owed_tail = me;
}

/* What l owes becomes nothing (delivered, or taken out by a LOST). */
static void simba__owed_clear(simba *s, simba__lock *l) {
    if (!l->owed) return;
    l->owed = 0;
    l->flags &= (uint16_t)~SIMBA__F_OWED_OLD_GEN;
    s->owing--;
}

/* Take l off the owed list wherever it is: a walk, for a slot freed while
   listed (a query whose owed answer simba_wait took); out of memory only. */
static void simba__owed_unlink(simba *s, simba__lock *l) {
    uint32_t me = (uint32_t)(l - s->locks) + 1, prev = 0, i = s->owed_head;
    while (i && i != me) { prev = i; i = s->locks[i - 1].owed_next; }
    if (!i) return;
    if (prev) s->locks[prev - 1].owed_next = l->owed_next;
    else s->owed_head = l->owed_next;
    if (s->owed_tail == me) s->owed_tail = prev;
    l->owed_next = 0;
    l->flags &= (uint16_t)~SIMBA__F_OWED_LISTED;
    if (l->owed) simba__owed_clear(s, l);
}

/* The first lock of the owed list that owes something; the ones that owe
   nothing any more (a LOST took their events out) leave the list here. */
static simba__lock *simba__owed_first(simba *s) {
    while (s->owed_head) {
        simba__lock *l = &s->locks[s->owed_head - 1];
        if (l->owed) return l;
        s->owed_head = l->owed_next;
        if (!s->owed_head) s->owed_tail = 0;
        l->flags &= (uint16_t)~SIMBA__F_OWED_LISTED;
        l->owed_next = 0;
        if (l->kind == SIMBA__K_OWED) simba__slot_end(s, l);
    }
    return NULL;
}

/* Keep ev in its lock: no room in the queue, or another lock owes already. */
static void simba__owe(simba *s, simba__lock *l, const simba_event *ev) {
    int n = simba__owed_count(l);
    if (ev->type == SIMBA_EVENT_OWNER || n == SIMBA__OWED_MAX) {
        SIMBA_ASSERT(ev->type == SIMBA_EVENT_OWNER);
        simba__log(s, SIMBA_LOG_ERROR, "simba: out of memory, %s not reported", simba_event_name(ev->type));
        (void)simba__fail(s, SIMBA_ENOMEM);
        return;
    }
    l->owed |= (uint16_t)(ev->type << (4 * n));
    if (ev->type == SIMBA_EVENT_LOST) l->owed |= (uint16_t)((ev->error & 15) << SIMBA__OWED_REASON);
    if (ev->type == SIMBA_EVENT_ERROR || ev->type == SIMBA_EVENT_INFO || ev->type == SIMBA_EVENT_DONE)
        l->owed_error = simba__code8(ev->error);
    if (!n) s->owing++;
    simba__owed_link(s, l, ev->type == SIMBA_EVENT_LOST);
}

/* The queue has room for one more event, or memory to grow it. */
static int simba__events_room(simba *s) {
    return s->events.count < s->events.cap || simba__events_grow(s) == SIMBA_OK;
}

/* Whether a re-entrant join of held lock l can be told its ACQUIRED now:
   queued (nothing owed ahead of it, and room in the queue or memory to
   grow it), or owed in l with a place left after it for the lock's last
   event (RELEASED, TIMEOUT, ERROR; a LOST replaces what is owed). Every
   other event of a lock is told once, in the room the queue keeps per
   live lock; only this one repeats, once per acquire, so the join asks
   first and is refused when the answer is no. */
static int simba__can_tell_join(simba *s, const simba__lock *l) {
    if (!s->owing && simba__events_room(s)) return 1;
    return simba__owed_count(l) < SIMBA__OWED_MAX - 1;
}

static void simba__emit_at(simba *s, const simba_event *ev, int front) {
    simba__events *q = &s->events;
    simba__lock *l = ev->lock.id ? simba__event_lock(s, ev->lock) : NULL;
    int room = simba__events_room(s);
    if (l && (s->owing || !room)) { simba__owe(s, l, ev); return; }
    if (!room) {
        simba__log(s, SIMBA_LOG_ERROR, "simba: out of memory, %s event dropped", simba_event_name(ev->type));
        (void)simba__fail(s, SIMBA_ENOMEM);
        return;
    }
    if (front) { q->head = (q->head + q->cap - 1) % q->cap; q->buf[q->head] = *ev; }
    else q->buf[(q->head + q->count) % q->cap] = *ev;
    q->count++;
}

/* Remove the undelivered events of one handle (used when a hold is lost
   before its ACQUIRED was delivered). */
static void simba__events_forget(simba *s, simba_lock h) {
    simba__events *q = &s->events;
    simba__lock *l = simba__event_lock(s, h);
    int i, kept = 0;
    for (i = 0; i < q->count; i++) {
        simba_event *e = &q->buf[(q->head + i) % q->cap];
        if (e->lock.id == h.id && e->lock.gen == h.gen) continue;
        q->buf[(q->head + kept) % q->cap] = *e;
        kept++;
    }
    q->count = kept;
    if (l) simba__owed_clear(s, l);
}

/* Why a request waited in vain (TIMEOUT) or failed: the last backend error it
   met, else the state of the connection and the session; 0 = plain busy. */
static int simba__wait_cause(simba *s, const simba__lock *l, char *msg, size_t cap) {
    msg[0] = 0;
    if (l->cause == SIMBA_EGRACE) {
        snprintf(msg, cap, "restart grace: the server holds back grants until %lld ms on simba's clock "
                 "(it lost its data; a holder from before may still be alive)", (long long)s->grace_until);
        return SIMBA_EGRACE;
    }
    if (!s->connected) {
        simba__copy(msg, cap, s->conn_msg[0] ? s->conn_msg : "no connection to the backend");
        return s->conn_error ? s->conn_error : SIMBA_EDISCONNECTED;
    }
    if (!s->session.open && s->sess_error) {
        simba__copy(msg, cap, s->sess_msg);
        return s->sess_error;
    }
    if (!s->session.open) {            /* connected, but the request could not be placed */
        simba__copy(msg, cap, "the server has not confirmed our session yet (no answer)");
        return SIMBA_ETIMEDOUT;
    }
    if (l->cause == SIMBA_EDISCONNECTED) simba__copy(msg, cap, s->conn_msg);
    return l->cause;
}

static void simba__emit_lock(simba *s, simba__lock *l, simba_event_type type, int error) {
    simba_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.lock = simba__handle(s, l);
    ev.user = l->user;
    ev.error = error;
    if (type == SIMBA_EVENT_TIMEOUT) {
        ev.error = simba__wait_cause(s, l, ev.message, sizeof ev.message);
        if (ev.error) simba__set_error(s, ev.error, ev.message);
    }
    if (type == SIMBA_EVENT_ACQUIRED) {
        int64_t now = simba__now(s);
        ev.fence = l->fence;
        ev.capacity = l->stored_capacity;
        if (simba__session_safe(s, now)) {
            ev.valid_until = simba__hold_until(s, l);
            ev.valid_ms = ev.valid_until - now;
        }
        l->flags |= SIMBA__F_ACQ_QUEUED;
    }
    if (type == SIMBA_EVENT_LOST) simba__events_forget(s, ev.lock);
    simba__emit_at(s, &ev, type == SIMBA_EVENT_LOST);
}

static void simba__emit_simple(simba *s, simba_event_type type, int error) {
    simba_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.error = error;
    simba__emit_at(s, &ev, 0);
}

/*>>timers: the timer heap and what a due deadline does */

/*--- the timer heap: one entry per lock, keyed by its earliest deadline ----------*/

static int simba__heap_less(simba *s, uint32_t a, uint32_t b) {
    return s->locks[s->heap[a]].timer_at < s->locks[s->heap[b]].timer_at;
}

static void simba__heap_swap(simba *s, uint32_t a, uint32_t b) {
    uint32_t t = s->heap[a];
    s->heap[a] = s->heap[b]; s->heap[b] = t;
    s->locks[s->heap[a]].heap_pos = a + 1;
    s->locks[s->heap[b]].heap_pos = b + 1;
}

static void simba__heap_up(simba *s, uint32_t i) {
    while (i > 0 && simba__heap_less(s, i, (i - 1) / 2)) { simba__heap_swap(s, i, (i - 1) / 2); i = (i - 1) / 2; }
}

static void simba__heap_down(simba *s, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->nheap && simba__heap_less(s, l, m)) m = l;
        if (r < s->nheap && simba__heap_less(s, r, m)) m = r;
        if (m == i) return;
        simba__heap_swap(s, i, m);
        i = m;
    }
}

static void simba__heap_remove(simba *s, simba__lock *l) {
    uint32_t i;
    if (!l->heap_pos) return;
    i = l->heap_pos - 1;
    l->heap_pos = 0;
    if (i != --s->nheap) {
        s->heap[i] = s->heap[s->nheap];
        s->locks[s->heap[i]].heap_pos = i + 1;
        simba__heap_down(s, i);
        simba__heap_up(s, i);
    }
}

/* Make room for `live` lock slots: a timer heap entry each (and their place
   in the request index), so that simba__timer_update never allocates
   inside a tick, where an ENOMEM could only be dropped. (A lock's events
   need no room made in advance: simba__owe.) */
static int simba__reserve(simba *s, uint32_t live) {
    if (simba__ridx_reserve(s, live) != SIMBA_OK) return simba__fail(s, SIMBA_ENOMEM);
    if (s->capheap < live) {
        uint32_t ncap = s->capheap ? s->capheap : 64;
        uint32_t *nh;
        while (ncap < live) ncap *= 2;
        nh = (uint32_t *)simba__alloc(s, sizeof(uint32_t) * ncap);
        if (!nh) return simba__fail(s, SIMBA_ENOMEM);
        if (s->nheap) memcpy(nh, s->heap, sizeof(uint32_t) * s->nheap);
        simba__free(s, s->heap);
        s->heap = nh; s->capheap = ncap;
    }
    return SIMBA_OK;
}

/* Recompute a lock's earliest deadline and fix its place in the heap. The
   heap has room for every live lock (simba__reserve), so this never
   allocates and a lock never goes without its deadlines. */
static void simba__timer_update(simba *s, simba__lock *l) {
    int64_t at = l->wait_deadline;
    if (l->recheck_at < at) at = l->recheck_at;
    if (l->op_deadline < at) at = l->op_deadline;
    if (at == SIMBA__NEVER) { simba__heap_remove(s, l); l->timer_at = at; return; }
    l->timer_at = at;
    if (!l->heap_pos) {
        SIMBA_ASSERT(s->nheap < s->capheap);
        if (s->nheap >= s->capheap) { (void)simba__fail(s, SIMBA_ENOMEM); return; }   /* unreachable */
        s->heap[s->nheap] = (uint32_t)(l - s->locks);
        l->heap_pos = ++s->nheap;
        simba__heap_up(s, l->heap_pos - 1);
    } else {
        simba__heap_down(s, l->heap_pos - 1);
        simba__heap_up(s, l->heap_pos - 1);
    }
}

/*--- what a due deadline does --------------------------------------------------*/

static void simba__lock_timer(simba *s, simba__lock *l, int64_t now, int *reset) {
    if (l->op_deadline <= now) {
        /* no answer in time: the connection is suspect; send the op again later */
        int op = l->op;
        simba__drop_op(l);
        l->cause = SIMBA_ETIMEDOUT;
        *reset = 1;
        if (op == SIMBA_OP_POLL) l->flags |= SIMBA__F_NEED_POLL;
        if (op) simba__mark_dirty(s, l);
    }
    if (l->wait_deadline <= now) {
        l->wait_deadline = SIMBA__NEVER;
        if (l->kind == SIMBA__K_LOCK && (l->state == SIMBA__S_PENDING || l->state == SIMBA__S_WAITING)) {
            simba__emit_lock(s, l, SIMBA_EVENT_TIMEOUT, 0);
            simba__end_request(s, l);
            return;
        }
    }
    if (l->recheck_at <= now) {
        l->recheck_at = SIMBA__NEVER;
        if (l->state == SIMBA__S_WAITING) l->flags |= SIMBA__F_NEED_POLL;
        simba__mark_dirty(s, l);
    }
    simba__timer_update(s, l);
}

static void simba__run_timers(simba *s, int64_t now) {
    int reset = 0;
    while (s->nheap && s->locks[s->heap[0]].timer_at <= now)
        simba__lock_timer(s, &s->locks[s->heap[0]], now, &reset);
    if (reset && s->connected) {
        simba__log(s, SIMBA_LOG_WARN, "simba: an operation timed out; resetting the connection");
        simba__backend_reset(s, SIMBA_ETIMEDOUT);
    }
}

/*>>session: request ids, sessions, keepalives, the local safety rule */

/*--- request ids ----------------------------------------------------------------*/

/* The key of a keyed request id "k~<key>", or NULL for "<session>~<n>".
   Not by the prefix alone: the client "k" has sessions "k~<hex>" and
   request ids "k~<hex>~<n>". A key cannot hold a '~' (simba_check_id), so
   the second '~' tells them apart. The one place that reads the kind. */
static const char *simba__request_key(const char *request) {
    return strncmp(request, "k~", 2) == 0 && simba__check_id(request + 2, SIMBA_MAX_ID, 0) == SIMBA_OK ? request + 2
                                                                                                       : NULL;
}

static void simba__request_id(simba *s, const simba__lock *l, char *buf, size_t cap) {
    if (l->key) snprintf(buf, cap, "k~%s", l->key);
    else snprintf(buf, cap, "%s~%llu", s->session.id, (unsigned long long)l->req_no);
}

/* The n of the next request id "<session>~<n>" of this session. Unique and
   increasing within the session (backends may rely on "a new request has a
   larger n"), but not guessable by other clients that see our ids: a random
   start below 2^56 and random steps of 1..2^32, so the next id is one of 2^32
   values. It stays below 2^62 for about 2^31 requests of one session. */
static uint64_t simba__next_req_no(simba *s) {
    s->session.req_next += 1 + (simba__mix64(&s->rng) & 0xffffffffull);
    return s->session.req_next;
}

/* The client id inside a session id (the part before the last '~'). */
static void simba__client_of(const char *session, char *out, size_t cap) {
    const char *tilde = session ? strrchr(session, '~') : NULL;
    size_t n = tilde ? (size_t)(tilde - session) : (session ? strlen(session) : 0);
    if (n >= cap) n = cap - 1;
    if (n) memcpy(out, session, n);
    out[n] = 0;
}

/*--- sessions ---------------------------------------------------------------------*/

static void simba__session_new_id(simba *s) {
    s->session.no++;
    if (!s->session.no) s->session.no = 1;
    snprintf(s->session.id, sizeof s->session.id, "%s~%016llx", s->client_id,
             (unsigned long long)simba__mix64(&s->rng));
    s->session.open = 0;
    s->session.op = 0;
    s->session.op_seq++;
    s->session.valid_until = INT64_MIN;
    s->session.next_keepalive = 0;   /* open at once */
    s->session.failures = 0;
    s->session.req_next = simba__mix64(&s->rng) & ((1ull << 56) - 1);
    memset(s->session.keys_seen, 0, sizeof s->session.keys_seen);
}

/* Whether an earlier handle of this session may have had an entry under
   `key`; notes that one now has. A keyed request's id is "k~<key>" for
   every handle of the key, so a grant pushed for an entry given up before
   (the push delayed past its RELEASE and the next ENQUEUE of the key, on a
   connection of its own) names the same session and request as the new
   handle's: such a handle believes only its own POLL (simba__wake_granted).
   Two bits per key in a filter emptied with each new session, since pushes
   name their session: a false "yes" costs a POLL, never a grant. */
static int simba__key_seen_before(simba *s, const char *key) {
    uint64_t st = simba__hash(key), v = simba__mix64(&st), *w = s->session.keys_seen;
    uint32_t bits = SIMBA__KEYS_SEEN_WORDS * 64, a = (uint32_t)(v % bits), b = (uint32_t)((v >> 32) % bits);
    int seen = (w[a / 64] >> (a % 64) & 1) && (w[b / 64] >> (b % 64) & 1);
    w[a / 64] |= 1ull << (a % 64);
    w[b / 64] |= 1ull << (b % 64);
    return seen;
}

static void simba__fill_op(simba *s, simba_op *op, simba_op_kind kind, uint32_t idx, uint32_t seq) {
    memset(op, 0, sizeof *op);
    op->id = ((uint64_t)idx << 32) | seq;
    op->kind = kind;
    op->tenant = s->tenant;
    op->client = s->client_id;
    op->session = s->session.id;
    op->lease_ms = s->ttl_ms + s->transition_ms;
}

/* What every op handed to a backend satisfies (docs/backend-contract.md,
   "What the core guarantees about ops"): the public calls and simba_create
   refused everything else with a SIMBA_E* code, so backends trust ops and
   never re-check them. Checked here once more, at the one submit point, as
   an assertion: a failure is a bug in the core. */
static int simba__check_op(const simba_op *op) {
    int i, j, want;
    if (op->kind < SIMBA_OP_OPEN || op->kind > SIMBA_OP_DELETE) return SIMBA_EINVAL;
    if (simba_check_tenant(op->tenant) != SIMBA_OK || simba_check_id(op->client) != SIMBA_OK) return SIMBA_ENAME;
    if (!op->session || !op->session[0] || strlen(op->session) > SIMBA_MAX_SESSION || op->lease_ms <= 0)
        return SIMBA_EINVAL;
    if (op->try_only && op->kind != SIMBA_OP_ENQUEUE) return SIMBA_EINVAL;
    switch (op->kind) {
    case SIMBA_OP_OPEN: case SIMBA_OP_KEEPALIVE: case SIMBA_OP_CLOSE:
        return op->nres == 0 ? SIMBA_OK : SIMBA_EINVAL;
    case SIMBA_OP_ENQUEUE: case SIMBA_OP_POLL: case SIMBA_OP_RELEASE:
        if (!op->request || !op->request[0] || strlen(op->request) > SIMBA_MAX_SESSION + SIMBA_MAX_ID + 32)
            return SIMBA_EINVAL;
        want = -1;
        break;
    default:                                     /* INSPECT, SET_CAPACITY, DELETE */
        want = 1;
        break;
    }
    if (op->nres < 1 || op->nres > SIMBA_MAX_RESOURCES || (want > 0 && op->nres != want) || !op->res)
        return SIMBA_EINVAL;
    for (i = 0; i < op->nres; i++) {
        const simba_res *r = &op->res[i];
        if (simba_check_name(r->name) != SIMBA_OK) return SIMBA_ENAME;
        if (r->capacity < 1 || r->weight < 0 || r->weight > r->capacity) return SIMBA_ECAPACITY;
        for (j = 0; j < i; j++) if (strcmp(r->name, op->res[j].name) == 0) return SIMBA_EINVAL;
    }
    return SIMBA_OK;
}

/* The one place the core hands an op to the backend. */
static int simba__submit(simba *s, const simba_op *op) {
    int valid;
    if (!s->connected) return SIMBA_EDISCONNECTED;
    valid = simba__check_op(op);
    SIMBA_ASSERT(valid == SIMBA_OK);
    (void)valid;
    return s->backend.vt->submit(s->backend.impl, op);
}

static void simba__session_send(simba *s, simba_op_kind kind, int64_t now) {
    simba_op op;
    s->session.op_seq++;
    simba__fill_op(s, &op, kind, SIMBA__SESSION_OP, s->session.op_seq);
    if (simba__submit(s, &op) != SIMBA_OK) return;
    s->session.op = (uint8_t)kind;
    s->session.op_reset_no = s->reset_no;
    s->session.op_sent = now;
    s->session.op_deadline = now + s->op_timeout_ms;
}

/* Is a LOST event still waiting for the caller? (An owed one is at the
   owed list's head: simba__owed_link.) */
static int simba__lost_queued(simba *s) {
    const simba__events *q = &s->events;
    simba__lock *l = s->owing ? simba__owed_first(s) : NULL;
    int i;
    if (l && simba__owed_type(l, 0) == SIMBA_EVENT_LOST) return 1;
    for (i = 0; i < q->count; i++)
        if (q->buf[(q->head + i) % q->cap].type == SIMBA_EVENT_LOST) return 1;
    return 0;
}

/* The oldest dropped session leaves the list (closed, or given up). */
static void simba__dropped_shift(simba *s) {
    int i;
    for (i = 1; i < s->ndropped; i++) memcpy(s->dropped[i - 1], s->dropped[i], sizeof s->dropped[i]);
    s->ndropped--;
}

/* A session to close once the caller has its LOST events. With the list
   full the oldest is given up: the server ends it when its lease there
   runs out (liveness, never safety: nobody here believes in its holds). */
static void simba__dropped_add(simba *s, const char *session) {
    if (s->ndropped == SIMBA__DROPPED_MAX) {
        simba__log(s, SIMBA_LOG_WARN, "simba: session %s left to its lease on the server (%d dropped sessions wait"
                   " to be closed)", s->dropped[0], SIMBA__DROPPED_MAX);
        simba__dropped_shift(s);
    }
    simba__copy(s->dropped[s->ndropped++], sizeof s->dropped[0], session);
}

/* A dropped session is closed on the server (its entries freed, the next
   waiters granted at once) only once the caller has taken every LOST event:
   until then it may still act as a holder, and the server's copy of the
   session is what keeps others out. Sent from the first step after that; the
   answer is ignored (the server ends the session at the latest when its
   lease runs out, which is also what happens when the caller never takes
   the events). Every session dropped before that is closed, oldest first:
   a session drops again while the caller still has the LOST events of the
   one before, and a session left out would keep its holds for the rest of
   its lease with nobody believing in them. */
static void simba__close_dropped(simba *s) {
    simba_op op;
    if (!s->ndropped || !s->connected || simba__lost_queued(s)) return;
    while (s->ndropped > 0) {
        simba__fill_op(s, &op, SIMBA_OP_CLOSE, SIMBA__CLOSE_OP, 0);
        op.session = s->dropped[0];
        if (simba__submit(s, &op) == SIMBA_EBUSY) return;   /* the backend is full: next step */
        simba__dropped_shift(s);
    }
}

/* What a dropped session means to one slot (simba__session_drop). */
static void simba__drop_lock(simba *s, simba__lock *l, int reason) {
    if (l->kind == SIMBA__K_ZOMBIE) { simba__finish(s, l); return; }
    if (l->kind != SIMBA__K_LOCK) return;
    simba__drop_op(l);
    l->flags &= (uint16_t)~(SIMBA__F_NEED_POLL | SIMBA__F_MAY_EXIST | SIMBA__F_UNCONFIRMED | SIMBA__F_CONFIRMING);
    l->recheck_at = SIMBA__NEVER;
    switch (l->state) {
    case SIMBA__S_HELD:
        if (l->flags & SIMBA__F_ACQ_QUEUED) {
            /* the caller never learned it held it: forget the grant, keep waiting */
            simba__events_forget(s, simba__handle(s, l));
            l->flags &= (uint16_t)~SIMBA__F_ACQ_QUEUED;
        } else {
            simba__emit_lock(s, l, SIMBA_EVENT_LOST, reason);
            if (!(l->flags & SIMBA__F_CONTEND)) { simba__finish(s, l); return; }
        }
        l->fence = 0;
        l->holds = 0;
        l->state = SIMBA__S_PENDING;
        break;
    case SIMBA__S_RELEASING:
        simba__emit_lock(s, l, SIMBA_EVENT_RELEASED, 0);
        simba__finish(s, l);
        return;
    default:
        l->state = SIMBA__S_PENDING;
        break;
    }
    simba__timer_update(s, l);
    simba__mark_dirty(s, l);
}

/* Drop the current session: every hold is LOST (reason), waiting requests go
   back to PENDING for the next session, releases in progress are done (the
   server drops the session's entries at the latest when it expires). The old
   session is closed on the server once the caller has its LOST events
   (simba__close_dropped). */
static void simba__session_drop(simba *s, int reason) {
    uint32_t i;
    int pass;
    if (s->session.no) simba__dropped_add(s, s->session.id);
    simba__log(s, SIMBA_LOG_WARN, "simba: session %s dropped (%s)", s->session.id,
               reason == SIMBA_LOST_EXPIRED ? "local deadline passed" : "server lost it");
    /* the holds still flagged UNCONFIRMED are past their own deadline
       (simba__lose_unconfirmed): they go last, so that their LOSTs, each
       put at the front of the queue, come first */
    for (pass = 0; pass < 2; pass++)
        for (i = 0; i < s->nlocks; i++)
            if (!(s->locks[i].flags & SIMBA__F_UNCONFIRMED) == !pass) simba__drop_lock(s, &s->locks[i], reason);
    simba__session_new_id(s);
}

/* The local safety rule, checked first in every tick and in simba_valid_ms. */
static int simba__session_safe(simba *s, int64_t now) {
    return s->session.open && !s->clock_back && now < s->session.valid_until;
}

/* A period of the client's own periodic traffic (keepalive, fallback
   recheck), shortened by a random part of up to a quarter. Clients started
   together (a deploy; every client reconnecting after a server restart)
   would otherwise keep their keepalives and rechecks in step for ever: all
   of them in the same millisecond, every period, a herd at the server and a
   hand-off that falls on it waits behind it. Never lengthened: a keepalive
   later than ttl/3 eats the session's margin, and a recheck is promised
   within recheck_ms. */
static int64_t simba__spread_ms(simba *s, int64_t period) {
    uint64_t span = period > 0 ? (uint64_t)period / 4 : 0;
    return span ? period - (int64_t)(simba__mix64(&s->rng) % (span + 1)) : period;
}

static void simba__session_tick(simba *s, int64_t now) {
    simba__session *ss = &s->session;
    if (ss->op && now >= ss->op_deadline) {
        simba__log(s, SIMBA_LOG_WARN, "simba: session operation timed out; resetting the connection");
        ss->op = 0;
        ss->op_seq++;
        if (s->connected) simba__backend_reset(s, SIMBA_ETIMEDOUT);
    }
    if (!s->connected || ss->op || now < ss->next_keepalive) return;
    simba__session_send(s, ss->open ? SIMBA_OP_KEEPALIVE : SIMBA_OP_OPEN, now);
}

/* News that may end a hold or grant a waiter: the lock asks the server
   again. If an ENQUEUE or POLL of it is in flight, its answer may have been
   given before the news (replies and pushes may come in any order, on
   connections of their own): the POLL goes out once that answer is in, even
   if it grants or confirms a hold (simba__recheck_after_answer). A lock
   whose ENQUEUE is not sent yet has nothing to hear: its answer will be
   newer. */
static void simba__news(simba *s, simba__lock *l) {
    if (l->kind != SIMBA__K_LOCK) return;
    if (l->state == SIMBA__S_PENDING ? l->op != SIMBA_OP_ENQUEUE
                                     : l->state != SIMBA__S_WAITING && l->state != SIMBA__S_HELD) return;
    l->flags |= SIMBA__F_NEED_POLL;
    if (!l->op) simba__mark_dirty(s, l);
}

/* An answer to an op is in: news that came while it was in flight is asked
   about now. */
static void simba__recheck_after_answer(simba *s, simba__lock *l) {
    if ((l->flags & SIMBA__F_NEED_POLL) && !l->op) simba__mark_dirty(s, l);
}

/* An admin change (a DELETE, a SET_CAPACITY) happened somewhere in the
   tenant before the keepalive that told us: every hold checks it is still
   there, and so does every lock whose answer is in flight (it may be a
   grant given before the change). Until a POLL sent from now on confirms
   it, a hold keeps the deadline it had before that keepalive (`before`):
   the keepalive proves the session alive, not that the change spared the
   hold. If no answer comes by then, the hold is LOST (simba__lose_unconfirmed). */
static void simba__recheck_holds(simba *s, int64_t before) {
    uint32_t i;
    int any = 0;
    for (i = 0; i < s->nlocks; i++) {
        simba__lock *l = &s->locks[i];
        if (l->kind != SIMBA__K_LOCK || (l->state != SIMBA__S_HELD && !l->op) || l->state == SIMBA__S_RELEASING) continue;
        simba__news(s, l);
        l->flags = (uint16_t)((l->flags | SIMBA__F_UNCONFIRMED) & ~SIMBA__F_CONFIRMING);
        any = 1;
    }
    if (any && before < s->confirm_by) s->confirm_by = before;
}

/* The local deadline of hold l: the session's, or the one it had when the
   admin epoch moved if no answer has confirmed it since. */
static int64_t simba__hold_until(const simba *s, const simba__lock *l) {
    if ((l->flags & SIMBA__F_UNCONFIRMED) && s->confirm_by < s->session.valid_until) return s->confirm_by;
    return s->session.valid_until;
}

/* Whether an answer to l (or a pushed grant) may be older than the last
   move of the admin epoch: then it does not grant, and the POLL that
   simba__news asked for decides. */
static int simba__answer_predates_news(const simba__lock *l) {
    return (l->flags & (SIMBA__F_UNCONFIRMED | SIMBA__F_CONFIRMING)) == SIMBA__F_UNCONFIRMED;
}

static void simba__session_reply(simba *s, const simba_reply *r, uint32_t seq, int64_t now) {
    simba__session *ss = &s->session;
    int kind = ss->op;
    if (seq != ss->op_seq || !kind) return;           /* stale */
    ss->op = 0;
    if (r->status == SIMBA_OK) {
        int64_t until = ss->op_sent + s->ttl_ms;       /* t_send + ttl: the safety rule */
        int64_t before = ss->valid_until;
        if (until > ss->valid_until) ss->valid_until = until;
        ss->open = 1;
        ss->failures = 0;
        s->sess_error = 0;
        ss->next_keepalive = ss->op_sent + simba__spread_ms(s, s->ttl_ms / 3);
        if (r->epoch && s->admin_epoch && r->epoch != s->admin_epoch) simba__recheck_holds(s, before);
        if (r->epoch) s->admin_epoch = r->epoch;
        return;
    }
    if (r->status == SIMBA_ESESSION && kind == SIMBA_OP_KEEPALIVE) {
        simba__session_drop(s, SIMBA_LOST_SESSION);
        return;
    }
    /* transport trouble: try again soon; the safety deadline keeps us honest */
    ss->failures++;
    ss->next_keepalive = now + simba_backend_backoff_ms(s, ss->failures);
    if (!ss->open) {
        s->sess_error = r->status;
        simba__copy(s->sess_msg, sizeof s->sess_msg, r->message ? r->message : "opening the session failed");
    }
    if (!ss->open) simba__log(s, SIMBA_LOG_WARN, "simba: opening the session failed: %s%s%s",
                              simba_strerror(r->status), r->message ? ": " : "", r->message ? r->message : "");
}

/*>>locks: the lock state machine: what an answer does to a request */

/*--- the lock state machine ---------------------------------------------------*/

/* Withdraw a request the caller no longer owns (timed out, failed): the handle
   goes stale now, the slot lives until the server confirmed the RELEASE. */
static void simba__zombify(simba *s, simba__lock *l) {
    l->kind = SIMBA__K_ZOMBIE;
    if (l->owed) l->flags |= SIMBA__F_OWED_OLD_GEN;
    l->gen++;
    if (!l->gen) l->gen = 1;
    l->state = SIMBA__S_RELEASING;
    simba__drop_op(l);
    l->flags &= (uint16_t)~(SIMBA__F_NEED_POLL | SIMBA__F_CONTEND);
    l->wait_deadline = l->recheck_at = SIMBA__NEVER;
    simba__timer_update(s, l);
    simba__mark_dirty(s, l);
}

/* End a request without a grant: withdraw its entry if one may exist. */
static void simba__end_request(simba *s, simba__lock *l) {
    if (l->flags & SIMBA__F_MAY_EXIST) simba__zombify(s, l);
    else simba__finish(s, l);
}

static void simba__recheck_later(simba *s, simba__lock *l, int64_t now, int hint_ms) {
    int64_t at = now + simba__spread_ms(s, s->recheck_ms);
    if (hint_ms >= 0 && now + hint_ms + 1 < at) at = now + hint_ms + 1;
    l->recheck_at = at;
    simba__timer_update(s, l);
}

/* Contend handles report who holds the resource whenever that changes. */
static void simba__update_owner(simba *s, simba__lock *l, const char *owner_session, int held) {
    char client[SIMBA_MAX_ID + 1];
    simba_event ev;
    if (!(l->flags & SIMBA__F_CONTEND)) return;
    if (l->state == SIMBA__S_HELD) simba__copy(client, sizeof client, s->client_id);
    else simba__client_of(owner_session, client, sizeof client);
    if (l->owner && strcmp(l->owner, client) == 0) return;
    simba__free(s, l->owner);
    l->owner = simba_allocator_strdup(&s->alloc, client);
    memset(&ev, 0, sizeof ev);
    ev.type = SIMBA_EVENT_OWNER;
    ev.lock = simba__handle(s, l);
    ev.user = l->user;
    ev.held = held;
    simba__copy(ev.owner, sizeof ev.owner, client);
    simba__emit_at(s, &ev, 0);
}

static void simba__grant(simba *s, simba__lock *l, const int64_t *fences) {
    int i;
    l->state = SIMBA__S_HELD;
    l->fence = fences[0];
    if (l->arr.fences) for (i = 0; i < l->nres; i++) l->arr.fences[i] = fences[i];
    if (l->holds < 1) l->holds = 1;
    l->wait_deadline = l->recheck_at = SIMBA__NEVER;
    simba__timer_update(s, l);
    simba__emit_lock(s, l, SIMBA_EVENT_ACQUIRED, 0);
    simba__recheck_after_answer(s, l);   /* the grant may predate news since */
}

/* A hold vanished on the server (deleted, or no longer granted). */
static void simba__lose_stolen(simba *s, simba__lock *l) {
    simba__emit_lock(s, l, SIMBA_EVENT_LOST, SIMBA_LOST_STOLEN);
    if (!(l->flags & SIMBA__F_CONTEND)) { simba__end_request(s, l); return; }
    l->state = SIMBA__S_PENDING;       /* contenders queue again, with a new request */
    l->session_no = 0;
    l->fence = 0;
    l->holds = 0;
    simba__mark_dirty(s, l);
}

/* A transport failure: send the same operation again once connected. The
   request id stays the same, so a retried ENQUEUE cannot make a second entry. */
static void simba__retry_op(simba *s, simba__lock *l, int op) {
    if (op == SIMBA_OP_POLL) l->flags |= SIMBA__F_NEED_POLL;
    simba__mark_dirty(s, l);
}

static void simba__emit_error(simba *s, simba__lock *l, int err, const char *msg) {
    simba_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = SIMBA_EVENT_ERROR;
    ev.lock = simba__handle(s, l);
    ev.user = l->user;
    ev.error = err;
    simba__copy(ev.message, sizeof ev.message, msg);
    simba__set_error(s, err, ev.message);
    simba__emit_at(s, &ev, 0);
}

/* What an ENQUEUE/POLL answer says beside the grant: the stored capacity (a
   request that asked for another one is told once, in the log) and the
   server's restart grace (logged once per grace, with its end). */
static void simba__note_reply(simba *s, simba__lock *l, const simba_reply *r, int64_t now) {
    l->cause = 0;
    if (r->capacity > 0) {
        l->stored_capacity = r->capacity;
        if (r->capacity != l->capacity && !(l->flags & SIMBA__F_CAP_WARNED)) {
            l->flags |= SIMBA__F_CAP_WARNED;
            simba__log(s, SIMBA_LOG_WARN, "simba: '%s' exists with capacity %d; this request asked for %d "
                       "and gets the stored %d (a resource keeps its capacity until it is deleted; "
                       "simba_set_capacity changes it)", l->names, r->capacity, (int)l->capacity, r->capacity);
        }
    }
    if (r->grace_ms > 0 && !r->granted) {
        l->cause = SIMBA_EGRACE;
        s->grace_until = now + r->grace_ms;
        if (now >= s->grace_warned_until) {
            s->grace_warned_until = s->grace_until;
            simba__log(s, SIMBA_LOG_WARN, "simba: the server lost its data (restart): no grants until %lld ms "
                       "on simba's clock (in %d ms), so that a holder from before cannot overlap with a new one",
                       (long long)s->grace_until, r->grace_ms);
        }
    }
}

static void simba__state_reply(simba *s, simba__lock *l, int op, const simba_reply *r, int64_t now) {
    int was = l->state;
    SIMBA_ASSERT(was != SIMBA__S_RELEASING);
    switch (r->status) {
    case SIMBA_OK:
        break;
    case SIMBA_ESESSION:
        simba__session_drop(s, SIMBA_LOST_SESSION);
        return;
    case SIMBA_ENOTFOUND:
        if (was == SIMBA__S_HELD) simba__lose_stolen(s, l);
        else { l->state = SIMBA__S_PENDING; simba__mark_dirty(s, l); }
        return;
    case SIMBA_EKEYBUSY:           /* the key's owner may be a session about to expire */
        l->cause = simba__code8(r->status);
        l->state = SIMBA__S_PENDING;
        simba__recheck_later(s, l, now, -1);
        return;
    case SIMBA_EDISCONNECTED:
    case SIMBA_ETIMEDOUT:
        l->cause = simba__code8(r->status);
        simba__retry_op(s, l, op);
        return;
    default:
        simba__log(s, SIMBA_LOG_ERROR, "simba: request on '%s' failed: %s%s%s", l->names,
                   simba_strerror(r->status), r->message ? ": " : "", r->message ? r->message : "");
        if (was == SIMBA__S_HELD) {
            /* the hold cannot be confirmed any more: a holder that stops
               holding is told LOST first (final, unless it contends: then
               ERROR says why and it queues again) */
            simba__emit_lock(s, l, SIMBA_EVENT_LOST, SIMBA_LOST_STOLEN);
            l->fence = 0;
            l->holds = 0;
            if (!(l->flags & SIMBA__F_CONTEND)) { simba__end_request(s, l); return; }
        }
        simba__emit_error(s, l, r->status, r->message);
        if (l->flags & SIMBA__F_CONTEND) {
            l->state = SIMBA__S_PENDING;
            simba__recheck_later(s, l, now, -1);
        } else simba__end_request(s, l);
        return;
    }
    simba__note_reply(s, l, r, now);
    if (l->flags & SIMBA__F_CONFIRMING)          /* sent after the admin change: it is news enough */
        l->flags &= (uint16_t)~(SIMBA__F_UNCONFIRMED | SIMBA__F_CONFIRMING);
    if (r->granted && simba__answer_predates_news(l)) {
        /* granted before the admin change we heard of, maybe: the POLL decides */
        if (was != SIMBA__S_HELD) l->state = SIMBA__S_WAITING;
        l->flags |= SIMBA__F_NEED_POLL;
        simba__recheck_after_answer(s, l);
    } else if (r->granted && simba__session_safe(s, now)) {
        if (was != SIMBA__S_HELD) simba__grant(s, l, r->fence);
        else simba__recheck_after_answer(s, l);
    } else if (was == SIMBA__S_HELD) {
        simba__lose_stolen(s, l);
        return;
    } else if (l->wait_ms == 0 && !(l->flags & SIMBA__F_CONTEND)) {
        simba__emit_lock(s, l, SIMBA_EVENT_TIMEOUT, 0);
        simba__end_request(s, l);
        return;
    } else {
        l->state = SIMBA__S_WAITING;
        if (l->flags & SIMBA__F_NEED_POLL) simba__recheck_after_answer(s, l);   /* woken meanwhile */
        else simba__recheck_later(s, l, now, r->recheck_ms);
    }
    simba__update_owner(s, l, r->owner, r->held);
}

static void simba__release_reply(simba *s, simba__lock *l, const simba_reply *r) {
    if (r->status == SIMBA_EDISCONNECTED || r->status == SIMBA_ETIMEDOUT) { simba__mark_dirty(s, l); return; }
    if (r->status != SIMBA_OK && r->status != SIMBA_ESESSION && r->status != SIMBA_ENOTFOUND) {
        /* the entry stays until our session ends; nobody holds it twice */
        simba__log(s, SIMBA_LOG_ERROR, "simba: release of '%s' failed: %s", l->names, simba_strerror(r->status));
        if (l->kind == SIMBA__K_LOCK) simba__emit_error(s, l, r->status, r->message);
    } else if (l->kind == SIMBA__K_LOCK) {
        simba__emit_lock(s, l, SIMBA_EVENT_RELEASED, 0);
    }
    simba__finish(s, l);
}

/* A backend that does not fill the times of its INSPECT entries: unknown. */
static void simba__holder_times_unknown(simba_holder *h, int n) {
    int i;
    for (i = 0; i < n; i++) h[i].expires_in_ms = h[i].renewed_ago_ms = h[i].held_ms = -1;
}

/* An INSPECT's answer says whether the server's restart grace runs now: it
   sets what simba_grace_ms() reports (0 when it runs none). */
static void simba__note_inspect_grace(simba *s, const simba_reply *r) {
    s->grace_until = r->grace_ms > 0 ? simba_now_ms(s) + r->grace_ms : 0;
}

static void simba__query_reply(simba *s, simba__lock *l, const simba_reply *r) {
    simba_event ev;
    if (r->status == SIMBA_EDISCONNECTED || r->status == SIMBA_ETIMEDOUT) { simba__mark_dirty(s, l); return; }
    memset(&ev, 0, sizeof ev);
    ev.type = l->qkind == SIMBA_OP_INSPECT ? SIMBA_EVENT_INFO : SIMBA_EVENT_DONE;
    ev.lock = simba__handle(s, l);
    ev.user = l->user;
    ev.error = r->status;
    if (r->status == SIMBA_OK && l->qkind == SIMBA_OP_INSPECT) {
        ev.capacity = r->capacity;
        ev.queued = r->nentries;
        ev.held = r->held;
        simba__client_of(r->owner, ev.owner, sizeof ev.owner);
        simba__note_inspect_grace(s, r);
        if (r->nentries > 0 && r->entries) {
            size_t n = sizeof(simba_holder) * (size_t)r->nentries;
            l->arr.result = (simba_holder *)simba__alloc(s, n);
            if (l->arr.result) {
                memcpy(l->arr.result, r->entries, n);
                l->nresult = r->nentries;
                if (!r->entry_times) simba__holder_times_unknown(l->arr.result, l->nresult);
            } else ev.error = SIMBA_ENOMEM;
        }
    }
    l->state = SIMBA__S_ANSWERED;
    l->op_deadline = SIMBA__NEVER;
    simba__timer_update(s, l);
    simba__emit_at(s, &ev, 0);
}

/*>>dispatch: send what the locks need */

/*--- dispatch: send what the locks need ------------------------------------------*/

/* Fill op with the lock's resources; res must have room for SIMBA_MAX_RESOURCES. */
static void simba__lock_op(simba *s, simba__lock *l, simba_op *op, simba_op_kind kind, simba_res *res,
                           char *rid, size_t ridcap) {
    int i;
    l->op_seq++;
    simba__fill_op(s, op, kind, (uint32_t)(l - s->locks), l->op_seq);
    for (i = 0; i < l->nres; i++) {
        res[i].name = simba__name(l, i);
        res[i].capacity = l->capacity;
        res[i].weight = l->weight;
    }
    op->res = res;
    op->nres = l->nres;
    if (kind == SIMBA_OP_INSPECT || kind == SIMBA_OP_SET_CAPACITY || kind == SIMBA_OP_DELETE) return;
    simba__request_id(s, l, rid, ridcap);
    op->request = rid;
    op->try_only = kind == SIMBA_OP_ENQUEUE && l->wait_ms == 0 && !(l->flags & SIMBA__F_CONTEND);
    op->watch_owner = (l->flags & SIMBA__F_CONTEND) != 0;
}

/* Which operation a dirty lock needs now (0: none). */
static int simba__needed_op(simba__lock *l) {
    if (l->kind == SIMBA__K_QUERY) return l->state == SIMBA__S_PENDING ? l->qkind : 0;
    if (l->state == SIMBA__S_RELEASING) return SIMBA_OP_RELEASE;
    if (l->state == SIMBA__S_PENDING)
        return l->recheck_at == SIMBA__NEVER && !(l->flags & SIMBA__F_BEHIND) ? SIMBA_OP_ENQUEUE : 0;
    if (l->flags & SIMBA__F_NEED_POLL) return SIMBA_OP_POLL;
    return 0;
}

/* Returns 0 if the op could not be sent (not connected): stop dispatching. */
static int simba__dispatch_one(simba *s, simba__lock *l, int64_t now) {
    simba_op op;
    simba_res res[SIMBA_MAX_RESOURCES];
    char rid[SIMBA_MAX_SESSION + SIMBA_MAX_ID + 32];
    int kind = simba__needed_op(l), rc;
    if (!kind || l->op == kind) return 1;
    if (kind == SIMBA_OP_ENQUEUE && l->session_no != s->session.no) {
        simba__ridx_remove(s, l);            /* its id of the last session */
        l->session_no = s->session.no;       /* a new request in this session */
        l->req_no = simba__next_req_no(s);
        l->flags &= (uint16_t)~(SIMBA__F_MAY_EXIST | SIMBA__F_KEY_REUSED);
        if (l->key && simba__key_seen_before(s, l->key)) l->flags |= SIMBA__F_KEY_REUSED;
        simba__ridx_add(s, l);
    }
    simba__lock_op(s, l, &op, (simba_op_kind)kind, res, rid, sizeof rid);
    if (kind == SIMBA_OP_SET_CAPACITY) res[0].capacity = l->capacity;
    rc = simba__submit(s, &op);
    if (rc != SIMBA_OK) {
        l->op_seq--;
        s->backend_full = rc == SIMBA_EBUSY;
        return 0;
    }
    l->op = (uint8_t)kind;
    l->op_reset_no = s->reset_no;
    if (kind == SIMBA_OP_ENQUEUE) l->flags |= SIMBA__F_MAY_EXIST;
    /* an answer to an op sent now is newer than any news before it */
    if (kind == SIMBA_OP_POLL || kind == SIMBA_OP_ENQUEUE) {
        l->flags &= (uint16_t)~SIMBA__F_NEED_POLL;
        if (l->flags & SIMBA__F_UNCONFIRMED) l->flags |= SIMBA__F_CONFIRMING;
    }
    l->op_deadline = now + s->op_timeout_ms;
    simba__timer_update(s, l);
    return 1;
}

static void simba__dispatch(simba *s, int64_t now) {
    s->backend_full = 0;                 /* try again each tick; a refusal sets it back */
    while (s->dirty_head && s->connected && simba__session_safe(s, now)) {
        simba__lock *l = &s->locks[s->dirty_head - 1];
        if (l->kind != SIMBA__K_DEAD && l->kind != SIMBA__K_OWED && !simba__dispatch_one(s, l, now)) return;
        s->dirty_head = l->next_dirty;
        if (!s->dirty_head) s->dirty_tail = 0;
        l->flags &= (uint16_t)~SIMBA__F_DIRTY;
        if (l->kind == SIMBA__K_DEAD) simba__slot_free(s, l);
    }
}

/*>>backend: the backend callback API (implementation): completions, in-flight ops, wakes, state, the error backend */

/* One answer to an op the core submitted (from the backend, or made up by
   simba__fail_inflight). An answer to an op that is no longer in flight
   (superseded, finished, or already failed by the core) is ignored. */
static void simba__complete(simba *s, const simba_reply *r) {
    uint32_t idx, seq;
    simba__lock *l;
    int op;
    int64_t now;
    s->backend_full = 0;                                /* room again: dispatch may go on */
    idx = (uint32_t)(r->id >> 32);
    seq = (uint32_t)r->id;
    now = simba__now(s);
    if (idx == SIMBA__SESSION_OP) { simba__session_reply(s, r, seq, now); return; }
    if (idx == SIMBA__CLOSE_OP && seq == SIMBA__CLOSE_WAITED) { s->close_answered = 1; return; }
    if (idx >= s->nlocks) return;                       /* other CLOSE answers and garbage */
    l = &s->locks[idx];
    if (l->op_seq != seq || !l->op) return;             /* stale: superseded or finished */
    op = l->op;
    l->op = 0;
    l->op_deadline = SIMBA__NEVER;
    simba__timer_update(s, l);
    if (l->kind == SIMBA__K_QUERY) simba__query_reply(s, l, r);
    else if (op == SIMBA_OP_RELEASE) simba__release_reply(s, l, r);
    else if (l->kind == SIMBA__K_LOCK) simba__state_reply(s, l, op, r, now);
}

SIMBADEF void simba_backend_complete(simba *s, const simba_reply *r) {
    if (simba__is_relay(s) && r) {
        if (s->relay.complete) s->relay.complete(s->relay.user, r);
        else simba_backend_complete(s->relay_parent, r);
        return;
    }
    if (!simba__is_live(s) || !r) return;
    simba__complete(s, r);
}

/* The core owns the failure of in-flight ops (hiredis style): after
   vt->reset, every op submitted before it and still not answered ends here,
   as if the backend had completed it with SIMBA_EDISCONNECTED (a backend may
   still do that itself inside reset(): then nothing is left to fail here).
   Each such op is no longer in flight afterwards, so an answer the backend
   sends later for it is stale and ignored. Ops submitted during reset() (a
   completion may make the core submit again) are newer and stay in flight. */
static void simba__fail_inflight(simba *s) {
    simba_reply r;
    uint32_t i;
    memset(&r, 0, sizeof r);
    r.status = SIMBA_EDISCONNECTED;
    r.recheck_ms = -1;
    if (s->session.op && s->session.op_reset_no != s->reset_no) {
        r.id = ((uint64_t)SIMBA__SESSION_OP << 32) | s->session.op_seq;
        simba__complete(s, &r);
    }
    for (i = 0; i < s->nlocks; i++) {     /* s->locks is re-read: nothing here frees or moves slots */
        simba__lock *l = &s->locks[i];
        if (!l->op || l->op_reset_no == s->reset_no) continue;
        r.id = ((uint64_t)i << 32) | l->op_seq;
        simba__complete(s, &r);
    }
}

/* Every vt->reset goes through here. */
static void simba__backend_reset(simba *s, int why) {
    s->reset_no++;
    s->backend.vt->reset(s->backend.impl, why);
    simba__fail_inflight(s);
}

/* Does lock l have resource `name`? */
static int simba__has_name(const simba__lock *l, const char *name) {
    int i;
    for (i = 0; i < l->nres; i++) if (strcmp(simba__name(l, i), name) == 0) return 1;
    return 0;
}

/* A push said something changed on `name`: the waiters and holders there re-POLL. */
static void simba__wake_lock(simba *s, simba__lock *l) {
    if (l->session_no != s->session.no) return;
    simba__news(s, l);
}

/* A push said our request was granted with `fence`: deliver it at once. */
/* Which request of this session a pushed request id names: its key (a keyed
   request "k~<key>"), or its number ("<session>~<n>"); 0 when it is neither.
   Parsed once per push, so matching it against the handles on the name is an
   integer or key compare each (no id is formatted per handle). */
static int simba__parse_request(simba *s, const char *request, const char **key, uint64_t *req_no) {
    size_t sl = strlen(s->session.id);
    const char *p;
    *key = NULL;
    *req_no = 0;
    if ((*key = simba__request_key(request)) != NULL) return 1;
    if (strncmp(request, s->session.id, sl) != 0 || request[sl] != '~' || !request[sl + 1]) return 0;
    for (p = request + sl + 1; *p; p++) {
        if (*p < '0' || *p > '9' || *req_no > (UINT64_MAX - 9) / 10) return 0;
        *req_no = *req_no * 10 + (uint64_t)(*p - '0');
    }
    return 1;
}

/* Whether l is the single-resource handle of our current session on `name`
   whose request id is (key, req_no); `waiting`: and it waits for its grant. */
static int simba__is_own_request(simba *s, const simba__lock *l, const char *name, const char *key,
                                 uint64_t req_no, int waiting) {
    if (l->kind != SIMBA__K_LOCK || l->nres != 1 || strcmp(l->names, name) != 0) return 0;
    if (l->session_no != s->session.no) return 0;
    if (waiting && (!(l->flags & SIMBA__F_MAY_EXIST) || (l->state != SIMBA__S_WAITING && l->state != SIMBA__S_PENDING)))
        return 0;
    return key ? l->key && strcmp(l->key, key) == 0 : !l->key && l->req_no == req_no;
}

/* The single-resource handle of our current session whose request id is
   `request` on `name`, or NULL (another session's, a multi-resource request,
   a request we no longer know). `waiting`: only a handle that waits for its
   grant (a keyed id may also name a handle of ours that is being released).
   Found through the request index; a key that names two handles (one being
   released, one new) takes the first of the name's chain, as before. */
static simba__lock *simba__own_request(simba *s, const char *name, const char *session, const char *request,
                                       int waiting) {
    const char *key;
    uint64_t req_no, k;
    uint32_t i, h, mask = s->nridx - 1;
    simba__lock *found = NULL;
    /* the entry must be our current session's: a keyed id outlives sessions */
    if (!s->session.open || strcmp(session, s->session.id) != 0) return NULL;
    if (!simba__parse_request(s, request, &key, &req_no) || !s->nridx) return NULL;
    k = simba__ridx_key(key, req_no);
    h = simba__ridx_hash(k);
    for (i = h & mask; s->ridx[i].lock; i = (i + 1) & mask) {
        simba__lock *l = &s->locks[s->ridx[i].lock - 1];
        s->find_steps++;
        if (s->ridx[i].hash != h || l->ridx_k != k || !simba__is_own_request(s, l, name, key, req_no, waiting))
            continue;
        if (!key) return l;                  /* a number names one request of the session */
        if (found) break;                    /* a key for two: the chain's order decides */
        found = l;
    }
    if (!s->ridx[i].lock) return found;
    for (i = s->buckets[simba__bucket(s, name)]; i; ) {
        simba__lock *l = &s->locks[i - 1];
        i = l->hnext;
        s->find_steps++;
        if (simba__is_own_request(s, l, name, key, req_no, waiting)) return l;
    }
    return NULL;
}

/* A pushed grant of one of our waiting requests: ACQUIRED without a round trip. */
static int simba__wake_granted(simba *s, const char *name, const char *session, const char *request, int64_t fence) {
    simba__lock *l = simba__own_request(s, name, session, request, 1);
    if (!l || !simba__session_safe(s, simba__now(s))) return 0;
    if ((l->flags & SIMBA__F_KEY_REUSED) || (l->flags & SIMBA__F_UNCONFIRMED)) {
        simba__wake_lock(s, l);       /* maybe an earlier entry's grant, or one from before an
                                         admin change: ask the server */
        return 1;
    }
    simba__drop_op(l);                /* an ENQUEUE/POLL answer in flight is now stale */
    simba__grant(s, l, &fence);
    simba__update_owner(s, l, NULL, 1);
    return 1;
}

/* A push about one request of ours, without a grant: only its handle
   re-POLLs (the other handles on the name are not concerned). 0 if it is not
   a one-resource request of the current session (then everyone looks). */
static int simba__wake_request(simba *s, const char *name, const char *session, const char *request) {
    simba__lock *l = simba__own_request(s, name, session, request, 0);
    if (!l) return 0;
    simba__wake_lock(s, l);
    return 1;
}

SIMBADEF void simba_backend_granted(simba *s, const char *name, const char *session, const char *request, int64_t fence) {
    if (simba__is_relay(s)) {
        if (s->relay.granted) s->relay.granted(s->relay.user, name, session, request, fence);
        else simba_backend_granted(s->relay_parent, name, session, request, fence);
        return;
    }
    if (!simba__is_live(s) || !name || !s->nbuckets) return;
    if (session && request && fence > 0 && simba__wake_granted(s, name, session, request, fence)) return;
    simba_backend_changed(s, name);   /* a grant we cannot place: everyone on `name` looks */
}

SIMBADEF void simba_backend_recheck(simba *s, const char *name, const char *session, const char *request) {
    if (simba__is_relay(s)) {
        if (s->relay.recheck) s->relay.recheck(s->relay.user, name, session, request);
        else simba_backend_recheck(s->relay_parent, name, session, request);
        return;
    }
    if (!simba__is_live(s) || !name || !s->nbuckets) return;
    if (session && request && simba__wake_request(s, name, session, request)) return;
    simba_backend_changed(s, name);
}

SIMBADEF void simba_backend_changed(simba *s, const char *name) {
    uint32_t i;
    if (simba__is_relay(s)) {
        if (s->relay.changed) s->relay.changed(s->relay.user, name);
        else simba_backend_changed(s->relay_parent, name);
        return;
    }
    if (!simba__is_live(s) || !name || !s->nbuckets) return;
    for (i = s->buckets[simba__bucket(s, name)]; i; ) {
        simba__lock *l = &s->locks[i - 1];
        i = l->hnext;
        if (strcmp(l->names, name) == 0) simba__wake_lock(s, l);
    }
    for (i = s->multi_head; i; ) {
        simba__lock *l = &s->locks[i - 1];
        i = l->mnext;
        if (strcmp(l->names, name) != 0 && simba__has_name(l, name)) simba__wake_lock(s, l);
    }
}

static void simba__emit_conn(simba *s, int err, const char *msg) {
    simba_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = SIMBA_EVENT_DISCONNECTED;
    ev.error = err;
    simba__copy(ev.message, sizeof ev.message, msg);
    simba__set_error(s, err, ev.message);
    simba__emit_at(s, &ev, 0);
}

SIMBADEF void simba_backend_own_fds(simba *s) {
    if (simba__is_live(s)) s->own_fds = 1;
}

SIMBADEF void simba_backend_state(simba *s, int up, int err, const char *msg) {
    if (simba__is_relay(s)) {
        if (s->relay.state) s->relay.state(s->relay.user, up, err, msg);
        else simba_backend_state(s->relay_parent, up, err, msg);
        return;
    }
    if (!simba__is_live(s)) return;
    if (up && !s->connected) {
        s->connected = 1;
        s->session.next_keepalive = 0;       /* re-confirm the session at once */
        simba__log(s, SIMBA_LOG_INFO, "simba: connected");
        simba__emit_simple(s, SIMBA_EVENT_CONNECTED, 0);
        s->conn_error = 0;
        s->down_since = 0;
    } else if (!up && s->connected) {
        s->connected = 0;
        s->down_since = simba__now(s);
        s->session.op = 0;
        s->session.op_seq++;
        s->conn_error = err ? err : SIMBA_EDISCONNECTED;
        simba__copy(s->conn_msg, sizeof s->conn_msg, msg);
        simba__log(s, SIMBA_LOG_WARN, "simba: disconnected: %s%s%s", simba_strerror(err), msg ? ": " : "", msg ? msg : "");
        simba__emit_conn(s, s->conn_error, msg);
    } else if (!up && err && err != s->conn_error) {
        /* a connect attempt failed (refused, bad password, ...): say so once per
           kind of failure, not at every retry; also before the first connect
           ever succeeded, so a wrong port or password is never silent */
        s->conn_error = err;
        simba__copy(s->conn_msg, sizeof s->conn_msg, msg);
        simba__log(s, SIMBA_LOG_ERROR, "simba: cannot connect: %s%s%s", simba_strerror(err), msg ? ": " : "", msg ? msg : "");
        simba__emit_conn(s, err, msg);
    } else if (!up && err && msg) {
        simba__copy(s->conn_msg, sizeof s->conn_msg, msg);   /* the newest words for the same error */
    }
}

SIMBADEF void *simba_backend_alloc(simba *s, size_t size) { return simba__alloc(simba__root(s), size); }
SIMBADEF void simba_backend_free(simba *s, void *ptr) { simba__free(simba__root(s), ptr); }
SIMBADEF void simba_backend_log(simba *s, simba_log_level level, const char *fmt, ...) {
    va_list ap;
    s = simba__root(s);
    if (!s) return;
    va_start(ap, fmt);
    simba__logv(s, level, fmt, ap);
    va_end(ap);
}
SIMBADEF int simba_backend_backoff_ms(simba *s, int attempt) {
    int base = 50, jitter;
    s = simba__root(s);
    while (attempt-- > 1 && base < 5000) base *= 2;
    if (base > 5000) base = 5000;
    if (s && s->down_since && simba__now(s) - s->down_since < (int64_t)s->ttl_ms + s->transition_ms && base > 100)
        base = 100;
    jitter = s ? (int)(simba__mix64(&s->rng) % (uint64_t)(base / 4 + 1)) : 0;
    return base - base / 8 + jitter;
}
SIMBADEF const char *simba_tenant(simba *s) {
    s = simba__root(s);
    return s ? s->tenant : "";
}

SIMBADEF void simba_backend_due(simba *s) {
    s = simba__root(s);
    if (simba__is_live(s)) simba__loop_kick(s);
}

SIMBADEF void simba_backend_fail(simba *s, int code, const char *fmt, ...) {
    char buf[sizeof s->last_msg];
    va_list ap;
    s = simba__root(s);
    if (!s || !fmt) return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    simba__set_error(s, code, buf);
}

SIMBADEF simba *simba_backend_relay_open(simba *parent, const simba_backend_relay *relay) {
    simba *root = simba__root(parent), *s;
    if (!root || !relay) return NULL;
    s = (simba *)simba__alloc(root, sizeof *s);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->magic = SIMBA__RELAY;
    s->relay_parent = parent;
    s->relay = *relay;
    return s;
}

SIMBADEF void simba_backend_relay_close(simba *relay) {
    if (!simba__is_relay(relay)) return;
    relay->magic = SIMBA__DEAD;
    simba__free(simba__root(relay->relay_parent), relay);
}

/* The backend a constructor returns when it refuses its desc: attach fails
   with the code and the message. */
typedef struct simba__error_backend {
    int code;
    char msg[SIMBA_MAX_MESSAGE + 96];
} simba__error_backend;

static int simba__error_attach(void *impl, simba *s) {
    simba__error_backend *e = (simba__error_backend *)impl;
    simba_backend_fail(s, e->code, "%s", e->msg);
    return e->code;
}
static int simba__error_submit(void *impl, const simba_op *op) { (void)impl; (void)op; return SIMBA_EDISCONNECTED; }
static int simba__error_pollfds(void *impl, struct pollfd *fds, int max) { (void)impl; (void)fds; (void)max; return 0; }
static int64_t simba__error_deadline(void *impl) { (void)impl; return -1; }
static void simba__error_process(void *impl, const struct pollfd *fds, int nfds) { (void)impl; (void)fds; (void)nfds; }
static void simba__error_reset(void *impl, int why) { (void)impl; (void)why; }
static void simba__error_destroy(void *impl) { free(impl); }
static const simba_backend_vtable simba__error_vtable = {
    "error", simba__error_attach, simba__error_submit, simba__error_pollfds, simba__error_deadline,
    simba__error_process, simba__error_reset, simba__error_destroy
};

SIMBADEF simba_backend simba_backend_error(int code, const char *fmt, ...) {
    simba_backend b;
    simba__error_backend *e = (simba__error_backend *)malloc(sizeof *e);
    va_list ap;
    memset(&b, 0, sizeof b);
    if (!e) return b;                      /* simba_create: EINVAL, "backend not set" */
    e->code = code ? code : SIMBA_EINVAL;
    e->msg[0] = 0;
    if (fmt) {
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    b.vt = &simba__error_vtable;
    b.impl = e;
    return b;
}
SIMBADEF int simba_backend_expand(const char *const *statements, int n, char mark, const char *with,
                                  char *buf, size_t size) {
    size_t out = 0, wlen = strlen(with);
    const char *p;
    int i;
    for (i = 0; i < n; i++) {
        for (p = statements[i]; *p; p++) {
            if (*p != mark) {
                if (buf && out + 1 < size) buf[out] = *p;
                out++;
                continue;
            }
            if (buf && out + 1 < size) memcpy(buf + out, with, out + 1 + wlen <= size ? wlen : size - 1 - out);
            out += wlen;
        }
        for (p = ";\n"; *p; p++, out++) if (buf && out + 1 < size) buf[out] = *p;
    }
    if (buf && size) buf[out < size ? out : size - 1] = 0;
    return (int)out;
}

SIMBADEF int simba_backend_resolve(const char *host, char *out, size_t cap) {
    struct addrinfo hints, *res = NULL;
    int rc;
    if (!out || cap == 0) return EAI_FAIL;
    out[0] = 0;
    if (!host || !*host) return EAI_NONAME;
    if (strcmp(host, "localhost") == 0) return 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST;
    if (getaddrinfo(host, NULL, &hints, &res) == 0) { freeaddrinfo(res); return 0; }
#ifdef SIMBA_NO_DNS
    /* the test and fuzz builds: a name is never sent to a resolver (this
       sandbox's resolver is not ours to load); every name is "not found" */
    return EAI_NONAME;
#endif
    hints.ai_flags = 0;
    if ((rc = getaddrinfo(host, NULL, &hints, &res)) != 0) return rc;
    rc = getnameinfo(res->ai_addr, res->ai_addrlen, out, (socklen_t)cap, NULL, 0, NI_NUMERICHOST);
    freeaddrinfo(res);
    if (rc != 0) out[0] = 0;
    return rc;
}

SIMBADEF const char *simba_backend_resolve_error(int rc) { return rc ? gai_strerror(rc) : "ok"; }

/*>>kit: the backend kit (implementation) */

/*--- the backend kit: the rules every backend shares ---*/

SIMBADEF int simba_grant_weight(int weight, int capacity) {
    return (weight == 0 || weight > capacity) ? capacity : weight;
}

SIMBADEF int simba_grant_step(int64_t *ahead, int weight, int capacity) {
    *ahead += simba_grant_weight(weight, capacity);
    return *ahead <= capacity;
}

SIMBADEF int64_t simba_grant_fence(int64_t counter, int64_t now_us) {
    return counter + 1 > now_us ? counter + 1 : now_us;
}

SIMBADEF int simba_check_name(const char *name) { return simba__check_name(name); }
SIMBADEF int simba_check_tenant(const char *tenant) { return simba__check_id(tenant, SIMBA_MAX_TENANT, 1); }
SIMBADEF int simba_check_id(const char *id) { return simba__check_id(id, SIMBA_MAX_ID, 0); }

SIMBADEF int simba_allocator_check(const simba_allocator *a) {
    return a && (!a->alloc != !a->free) ? SIMBA_EINVAL : SIMBA_OK;
}

SIMBADEF void *simba_allocator_alloc(const simba_allocator *a, size_t n) {
    simba_allocator d = simba__allocator_or_default(a ? *a : simba__no_allocator);
    void *p = d.alloc(n ? n : 1, d.user);
    if (p) memset(p, 0, n ? n : 1);
    return p;
}

SIMBADEF void simba_allocator_free(const simba_allocator *a, void *ptr) {
    simba_allocator d = simba__allocator_or_default(a ? *a : simba__no_allocator);
    if (ptr) d.free(ptr, d.user);
}

SIMBADEF char *simba_allocator_strdup(const simba_allocator *a, const char *str) {
    size_t n;
    char *d;
    if (!str) return NULL;
    n = strlen(str) + 1;
    d = (char *)simba_allocator_alloc(a, n);
    if (d) memcpy(d, str, n);
    return d;
}

SIMBADEF simba_allocator simba_allocator_or_default(simba_allocator a) { return simba__allocator_or_default(a); }
SIMBADEF simba_clock simba_clock_or_default(simba_clock c) { return simba__clock_or_default(c); }
SIMBADEF void simba_session_client(const char *session, char *out, size_t cap) {
    if (out && cap) simba__client_of(session, out, cap);
}

/* ---- reading a parsed URL (implementation) ---- */
SIMBADEF int simba_url_fail(simba_url_error *err, int code, const char *part, const char *fmt, ...) {
    va_list ap;
    if (!err) return code;
    err->code = code;
    simba__copy(err->part, sizeof err->part, part ? part : "");
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

SIMBADEF const char *simba_url_param(simba_url *u, const char *key) {
    int i;
    if (!u || !key) return NULL;
    for (i = 0; i < u->nparams; i++)
        if (strcmp(u->params[i].key, key) == 0) {
            u->params[i].used = 1;
            return u->params[i].value;
        }
    return NULL;
}

SIMBADEF int simba_url_int(simba_url *u, const char *key, int min, int max, int *out, simba_url_error *err) {
    const char *v = simba_url_param(u, key), *c;
    long long x = 0;
    int neg = 0;
    if (!v) return SIMBA_OK;
    c = v;
    if (*c == '-') { neg = 1; c++; }
    if (!*c) return simba_url_fail(err, SIMBA_EINVAL, key, "URL parameter %s: '%.40s' is not a number", key, v);
    for (; *c; c++) {
        if (*c < '0' || *c > '9' || x > 100000000000LL)
            return simba_url_fail(err, SIMBA_EINVAL, key, "URL parameter %s: '%.40s' is not a number", key, v);
        x = x * 10 + (*c - '0');
    }
    if (neg) x = -x;
    if (x < min || x > max)
        return simba_url_fail(err, SIMBA_EINVAL, key, "URL parameter %s: %lld is out of range (%d..%d)", key, x, min, max);
    *out = (int)x;
    return SIMBA_OK;
}

SIMBADEF int simba_parse_duration_ms(const char *t, int *ms) {
    long long x = 0, mul, frac = 0, scale = 1, part;
    int beyond = 0;            /* a non-zero digit past the 9th of the fraction */
    const char *c = t;
    if (!t || !ms || *c < '0' || *c > '9') return SIMBA_EINVAL;
    for (; *c >= '0' && *c <= '9'; c++) {
        x = x * 10 + (*c - '0');
        if (x > 2147483647LL) return SIMBA_EINVAL;
    }
    if (*c == '.') {           /* a decimal fraction: digits on both sides of the point */
        if (c[1] < '0' || c[1] > '9') return SIMBA_EINVAL;
        for (c++; *c >= '0' && *c <= '9'; c++) {
            if (scale < 1000000000LL) {
                frac = frac * 10 + (*c - '0');
                scale *= 10;
            } else if (*c != '0') beyond = 1;
        }
        if (*c == '\0') return SIMBA_EINVAL;   /* "1.5": of what? */
    }
    if (strcmp(c, "ms") == 0) mul = 1;
    else if (strcmp(c, "s") == 0) mul = 1000;
    else if (strcmp(c, "m") == 0) mul = 60000;
    else if (strcmp(c, "h") == 0) mul = 3600000;
    else if (*c == '\0' && x == 0) mul = 0;  /* "0" needs no unit */
    else return SIMBA_EINVAL;              /* "10" alone: 10 ms or 10 s? say which */
    /* the fraction, rounded up to a whole ms: a timeout never comes early */
    part = (frac * mul + scale - 1) / scale + (beyond && (frac * mul) % scale == 0);
    if (x * mul + part > 2147483647LL) return SIMBA_EINVAL;
    *ms = (int)(x * mul + part);
    return SIMBA_OK;
}

SIMBADEF int simba_url_duration(simba_url *u, const char *key, int min, int max, int *out, simba_url_error *err) {
    const char *v = simba_url_param(u, key);
    int ms;
    if (!v) return SIMBA_OK;
    if (simba_parse_duration_ms(v, &ms) != SIMBA_OK)
        return simba_url_fail(err, SIMBA_EINVAL, key, "URL parameter %s: '%.40s' is not a duration (500ms, 1.5s, 10s, 2m, 1h)", key, v);
    if (ms < min || ms > max)
        return simba_url_fail(err, SIMBA_EINVAL, key, "URL parameter %s: %d ms is out of range (%d..%d ms)", key, ms, min, max);
    *out = ms;
    return SIMBA_OK;
}

SIMBADEF int simba_url_check_used(const simba_url *u, simba_url_error *err) {
    int i;
    if (!u) return SIMBA_EINVAL;
    for (i = 0; i < u->nparams; i++)
        if (!u->params[i].used)
            return simba_url_fail(err, SIMBA_EINVAL, u->params[i].key, "URL query: unknown parameter '%.40s' for %s:",
                                  u->params[i].key, u->scheme);
    return SIMBA_OK;
}

SIMBADEF void simba_url_clear(simba_url *u) {
    volatile char *b;
    size_t i;
    if (!u) return;
    b = (volatile char *)u->buf;   /* volatile: the compiler may not skip it */
    for (i = 0; i < sizeof u->buf; i++) b[i] = 0;
    u->password = NULL;
}

/*>>api: the public API (implementation) */

/*--- the public API ---------------------------------------------------------------*/

static void simba__default_client_id(simba *s, char *out, size_t cap) {
    char host[64], buf[64];
    size_t i;
    if (gethostname(host, sizeof host) != 0) strcpy(host, "host");
    host[sizeof host - 1] = 0;
    host[24] = 0;                          /* leave room for pid and random */
    for (i = 0; host[i]; i++) {
        char c = host[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
        if (!ok) host[i] = '-';
    }
    if (!host[0]) strcpy(host, "host");
    /* into a buffer of known size (at most 24 + 1 + 20 + 1 + 8 bytes), so that
       gcc's -Wformat-truncation can see it fits at every -O level */
    snprintf(buf, sizeof buf, "%.24s:%ld:%08x", host, (long)getpid(), (unsigned)(simba__mix64(&s->rng) & 0xffffffffu));
    simba__copy(out, cap, buf);
}

/* Each refusal names the field and what is wrong (simba_error). */
static int simba__apply_desc(simba *s, const simba_desc *d, char *msg, size_t cap) {
    int err;
    if (d->ttl_ms < 0 || d->transition_ms < 0 || d->op_timeout_ms < 0 || d->recheck_ms < 0) {
        snprintf(msg, cap, "simba_desc.%s: %d is negative (0 means the default)",
                 d->ttl_ms < 0 ? "ttl_ms" : d->transition_ms < 0 ? "transition_ms" : d->op_timeout_ms < 0 ? "op_timeout_ms" : "recheck_ms",
                 d->ttl_ms < 0 ? d->ttl_ms : d->transition_ms < 0 ? d->transition_ms : d->op_timeout_ms < 0 ? d->op_timeout_ms : d->recheck_ms);
        return SIMBA_EINVAL;
    }
    if (d->ttl_ms && d->ttl_ms < 30) {     /* keepalives every ttl/3 need room */
        snprintf(msg, cap, "simba_desc.ttl_ms: %d is below the minimum of 30", d->ttl_ms);
        return SIMBA_EINVAL;
    }
    s->ttl_ms = d->ttl_ms ? d->ttl_ms : 10000;
    s->transition_ms = d->transition_ms ? d->transition_ms : 6000;
    if (s->ttl_ms > 0x3fffffff - s->transition_ms) {
        snprintf(msg, cap, "simba_desc.ttl_ms + transition_ms: %d + %d is too large (at most %d)",
                 s->ttl_ms, s->transition_ms, 0x3fffffff);
        return SIMBA_EINVAL;
    }
    s->op_timeout_ms = d->op_timeout_ms ? d->op_timeout_ms : (s->ttl_ms / 3 < 5000 ? s->ttl_ms / 3 : 5000);
    s->recheck_ms = d->recheck_ms ? d->recheck_ms : s->ttl_ms / 2;
    s->linger_ms = d->linger_ms ? d->linger_ms : (s->op_timeout_ms < 1000 ? s->op_timeout_ms : 1000);
    if (d->tenant) {
        if ((err = simba__check_id(d->tenant, SIMBA_MAX_TENANT, 1)) != SIMBA_OK) {
            snprintf(msg, cap, "simba_desc.tenant: must be 1..%d bytes of [A-Za-z0-9._-]", SIMBA_MAX_TENANT);
            return err;
        }
        simba__copy(s->tenant, sizeof s->tenant, d->tenant);
    } else simba__copy(s->tenant, sizeof s->tenant, "default");
    if (d->client_id) {
        if ((err = simba__check_id(d->client_id, SIMBA_MAX_ID, 0)) != SIMBA_OK) {
            snprintf(msg, cap, "simba_desc.client_id: must be 1..%d bytes of [A-Za-z0-9.:-]", SIMBA_MAX_ID);
            return err;
        }
        simba__copy(s->client_id, sizeof s->client_id, d->client_id);
    } else simba__default_client_id(s, s->client_id, sizeof s->client_id);
    return SIMBA_OK;
}

SIMBADEF simba *simba_create(const simba_desc *desc, simba_error *err) {
    simba_allocator a;
    simba *s;
    int rc;
    char msg[sizeof err->message];
    msg[0] = 0;
    if (err) { err->code = SIMBA_OK; err->message[0] = 0; }
    if (!desc || !desc->backend.vt || !desc->backend.vt->attach) {
        if (desc && desc->backend.vt && desc->backend.vt->destroy) desc->backend.vt->destroy(desc->backend.impl);
        if (err) {
            err->code = SIMBA_EINVAL;
            simba__copy(err->message, sizeof err->message, !desc ? "simba_desc: NULL" :
                        "simba_desc.backend: not set (the backend constructor failed: out of memory, or a NULL argument)");
        }
        return NULL;
    }
    a = simba__allocator_or_default(desc->allocator);
    s = (simba *)a.alloc(sizeof *s, a.user);
    if (!s) {
        desc->backend.vt->destroy(desc->backend.impl);
        if (err) { err->code = SIMBA_ENOMEM; simba__copy(err->message, sizeof err->message, "simba_create: out of memory"); }
        return NULL;
    }
    memset(s, 0, sizeof *s);
    s->alloc = a;
    s->logger = desc->logger;
    s->clock = simba__clock_or_default(desc->clock);
    s->clock_max = INT64_MIN;
    s->confirm_by = SIMBA__NEVER;
    s->backend = desc->backend;
    s->rng = simba__new_seed(s);
    s->magic = SIMBA__MAGIC;
    s->salt = (uint32_t)simba__mix64(&s->rng);
    rc = simba__apply_desc(s, desc, msg, sizeof msg);
    if (rc == SIMBA_OK) {
        simba__session_new_id(s);
        rc = simba__hash_grow(s);
    }
    if (rc == SIMBA_OK) {
        rc = s->backend.vt->attach(s->backend.impl, s);   /* may call simba_client_id() etc. */
        if (rc != SIMBA_OK) {
            if (s->last_msg_code == rc) simba__copy(msg, sizeof msg, s->last_msg);   /* simba_backend_fail */
        }
    }
    s->loop_at = SIMBA__NEVER;
    if (rc == SIMBA_OK && (desc->loop.socket || desc->loop.timer || desc->loop.detach)) {
        rc = simba_set_loop(s, &desc->loop);
    }
    if (rc != SIMBA_OK) {
        /* the refusal goes to the caller's logger too: nothing silent */
        simba__log(s, SIMBA_LOG_ERROR, "simba_create failed: %s", msg[0] ? msg : simba_strerror(rc));
        s->magic = SIMBA__DEAD;
        s->backend.vt->destroy(s->backend.impl);
        simba__free(s, s->buckets);
        a.free(s, a.user);
        if (err) { err->code = rc; simba__copy(err->message, sizeof err->message, msg); }
        return NULL;
    }
    return s;
}

/* The end of an instance ends its session on the server: one CLOSE removes
   every entry of the session, held or waiting, so the next waiters are
   granted within a round trip instead of after a lease. Only the backend's
   I/O runs here (no timers, no new requests, no events for the caller), for
   at most linger_ms. */
static void simba__close_on_server(simba *s) {
    simba_op op;
    int64_t end;
    if (!s->session.open || !s->connected || s->linger_ms < 0) return;
    simba__fill_op(s, &op, SIMBA_OP_CLOSE, SIMBA__CLOSE_OP, SIMBA__CLOSE_WAITED);
    s->close_answered = 0;
    if (simba__submit(s, &op) != SIMBA_OK) return;
    end = simba__monotonic_ms(NULL) + s->linger_ms;
    while (!s->close_answered && s->connected) {
        struct pollfd fds[16];
        int64_t left = end - simba__monotonic_ms(NULL), at, now;
        int n, t;
        if (left <= 0) return;
        t = left > 50 ? 50 : (int)left;
        at = s->backend.vt->deadline_ms(s->backend.impl);
        n = s->backend.vt->pollfds(s->backend.impl, fds, 16);
        if (n > 16) n = 16;
        if (n < 0) n = 0;
        now = simba__now(s);
        if (!n && (at < 0 || at - now > left)) return;   /* nothing can answer in time */
        if (at >= 0 && at - now < t) t = at <= now ? 0 : (int)(at - now);
        poll(fds, (nfds_t)n, t);
        /* with no socket only the clock brings the answer: one that stands
           still (a test's virtual clock) never will */
        if (!n && t > 0 && simba__now(s) == now) return;
        s->backend.vt->process(s->backend.impl, n ? fds : NULL, n);
    }
}

static void simba__free_instance(simba *s) {
    uint32_t i;
    simba_allocator a;
    s->magic = SIMBA__DEAD;       /* from here on every call answers SIMBA_EDESTROYED and the
                                     backend's last completions are ignored */
    simba__loop_teardown(s);      /* the loop lets go of the fds while they are open */
    /* the ops still in flight end with the instance: the core fails them all
       at once (their events could never be read); a backend need not complete
       them in destroy() */
    s->backend.vt->destroy(s->backend.impl);
    for (i = 0; i < s->nlocks; i++) {
        simba__lock *l = &s->locks[i];
        if (l->kind == SIMBA__K_FREE) continue;
        simba__free(s, l->names); simba__free(s, l->key); simba__free(s, l->arr.fences);
        simba__free(s, l->owner);
    }
    simba__free(s, s->locks);
    simba__free(s, s->buckets);
    simba__free(s, s->ridx);
    simba__free(s, s->heap);
    simba__free(s, s->events.buf);
    simba__free(s, s->watch);
    simba__free(s, s->loop_want);
    a = s->alloc;
    a.free(s, a.user);
}

SIMBADEF void simba_destroy(simba *s) {
    if (!simba__is_live(s)) return;
    if (simba__callback_busy(s)) { (void)simba__fail(s, SIMBA_EBUSY); return; }
    s->events.count = 0;              /* the caller is done: a dropped session ends too */
    s->owing = 0;
    if (s->linger_ms >= 0) simba__close_dropped(s);
    simba__close_on_server(s);
    simba__free_instance(s);
}

SIMBADEF void simba_abandon(simba *s) {
    if (!simba__is_live(s)) return;
    if (simba__callback_busy(s)) { (void)simba__fail(s, SIMBA_EBUSY); return; }
    simba__free_instance(s);
}

SIMBADEF int simba_last_error(simba *s) { return simba__is_live(s) ? s->last_error : SIMBA_EDESTROYED; }
SIMBADEF const char *simba_last_error_msg(simba *s) {
    if (!simba__is_live(s)) return "the simba instance was destroyed";
    return (s->last_error && s->last_msg_code == s->last_error) ? s->last_msg : "";
}
SIMBADEF const char *simba_client_id(simba *s) {
    s = simba__root(s);
    return simba__is_live(s) ? s->client_id : "";
}
SIMBADEF int simba_connected(simba *s) { return simba__is_live(s) ? s->connected : 0; }

SIMBADEF int64_t simba_grace_ms(simba *s) {
    int64_t left;
    if (!simba__is_live(s)) return 0;
    left = s->grace_until - simba_now_ms(s);
    return left > 0 ? left : 0;
}


/* Validate the resources of a lock desc; fills names[] and returns how many, or an error. */
static int simba__desc_names(const simba_lock_desc *d, const char **names) {
    int n = 0, i, j, err;
    if (d->names) {
        if (d->name || d->nnames < 1 || d->nnames > SIMBA_MAX_RESOURCES) return SIMBA_EINVAL;
        for (i = 0; i < d->nnames; i++) names[n++] = d->names[i];
    } else {
        if (d->nnames) return SIMBA_EINVAL;
        names[n++] = d->name;
    }
    for (i = 0; i < n; i++) {
        if ((err = simba__check_name(names[i])) != SIMBA_OK) return err;
        for (j = 0; j < i; j++) if (strcmp(names[i], names[j]) == 0) return SIMBA_EINVAL;
    }
    return n;
}

/* Is lock l the request that d describes: the same set of names (in any
   order), capacity, weight, contend and re-entrancy? */
static int simba__same_shape(const simba__lock *l, const simba_lock_desc *d, const char **names, int n,
                             int capacity, int weight) {
    int i, k;
    if (l->nres != n || l->capacity != capacity || l->weight != weight) return 0;
    if (!(l->flags & SIMBA__F_CONTEND) != !d->contend || !(l->flags & SIMBA__F_REENTRANT) != !d->reentrant) return 0;
    for (i = 0; i < n; i++) {
        const char *p = l->names;
        for (k = 0; k < l->nres; k++, p += strlen(p) + 1) if (strcmp(p, names[i]) == 0) break;
        if (k == l->nres) return 0;
    }
    return 1;
}

/* An existing handle that an acquire joins: the same key, or re-entrancy.
   A key names one request: the server entry behind it is shared, so a key
   reused for another shape (e.g. {a,b} then {b}) would leave two handles
   believing in one entry; that is refused (*err = SIMBA_EKEYMISMATCH). */
static simba__lock *simba__find_joinable(simba *s, const simba_lock_desc *d, const char **names, int n,
                                         int capacity, int weight, int *err) {
    uint32_t i;
    *err = SIMBA_OK;
    if (d->key) {
        for (i = s->keyed_head; i; ) {
            simba__lock *l = &s->locks[i - 1];
            i = l->knext;
            if (l->kind != SIMBA__K_LOCK || l->state == SIMBA__S_RELEASING || strcmp(l->key, d->key) != 0) continue;
            if (simba__same_shape(l, d, names, n, capacity, weight)) return l;
            *err = SIMBA_EKEYMISMATCH;
            return NULL;
        }
        return NULL;
    }
    for (i = s->buckets[simba__bucket(s, names[0])]; i; ) {
        simba__lock *l = &s->locks[i - 1];
        i = l->hnext;
        if (l->kind != SIMBA__K_LOCK || l->state == SIMBA__S_RELEASING || strcmp(l->names, names[0]) != 0) continue;
        if (d->reentrant && (l->flags & SIMBA__F_REENTRANT) && n == 1 && l->nres == 1 && l->weight == weight &&
            !(l->flags & SIMBA__F_CONTEND))
            return l;
    }
    return NULL;
}

static simba__lock *simba__new_lock(simba *s, const char **names, int n) {
    simba__lock *l = simba__slot_new(s);
    size_t total = 0;
    int i;
    char *p;
    if (!l) return NULL;
    l->kind = SIMBA__K_LOCK;
    for (i = 0; i < n; i++) total += strlen(names[i]) + 1;
    l->names = (char *)simba__alloc(s, total);
    if (!l->names) { simba__slot_free(s, l); return NULL; }
    for (p = l->names, i = 0; i < n; i++) { size_t k = strlen(names[i]) + 1; memcpy(p, names[i], k); p += k; }
    l->nres = (uint8_t)n;
    if (n > 1) {
        l->arr.fences = (int64_t *)simba__alloc(s, sizeof(int64_t) * (size_t)n);
        if (!l->arr.fences) { simba__slot_free(s, l); return NULL; }
        memset(l->arr.fences, 0, sizeof(int64_t) * (size_t)n);
    }
    return l;
}

SIMBADEF simba_lock simba_acquire(simba *s, const simba_lock_desc *d) {
    const char *names[SIMBA_MAX_RESOURCES];
    simba__lock *l;
    int n, capacity, permits, weight, err;
    int64_t now;
    if (!simba__is_live(s)) return simba__no_lock;
    if (simba__callback_busy(s)) return simba__fail_lock(s, SIMBA_EBUSY);
    if (!d) return simba__fail_lock(s, SIMBA_EINVAL);
    n = simba__desc_names(d, names);
    if (n < 0) return simba__fail_lock(s, n);
    capacity = d->capacity ? d->capacity : 1;
    permits = d->permits ? d->permits : 1;
    if (capacity < 0 || permits < 0) return simba__fail_lock(s, SIMBA_ECAPACITY);
    if (permits > capacity && !d->exclusive) return simba__fail_lock(s, SIMBA_ECAPACITY);
    if (d->key && (err = simba__check_id(d->key, SIMBA_MAX_ID, 0)) != SIMBA_OK) return simba__fail_lock(s, err);
    if (d->contend && (n != 1 || capacity != 1)) return simba__fail_lock(s, SIMBA_EINVAL);
    weight = d->exclusive ? 0 : permits;
    now = simba__now(s);
    err = SIMBA_OK;
    l = (d->key || d->reentrant) ? simba__find_joinable(s, d, names, n, capacity, weight, &err) : NULL;
    if (err != SIMBA_OK) {
        simba__log(s, SIMBA_LOG_WARN, "simba: key '%s' is in use here for another request shape", d->key);
        return simba__fail_lock(s, err);
    }
    if (l) {
        if (d->reentrant && !d->key) {
            /* no room to tell it: refused, the count as it was */
            if (l->state == SIMBA__S_HELD && !simba__can_tell_join(s, l)) return simba__fail_lock(s, SIMBA_ENOMEM);
            l->holds++;
            if (l->state == SIMBA__S_HELD) {
                /* ACQ_QUEUED means "the caller does not know it holds this";
                   once the first ACQUIRED was delivered it does, and a drop
                   must tell it LOST, not forget the hold with this event */
                int known = !(l->flags & SIMBA__F_ACQ_QUEUED);
                simba__emit_lock(s, l, SIMBA_EVENT_ACQUIRED, 0);
                if (known) l->flags &= (uint16_t)~SIMBA__F_ACQ_QUEUED;
            }
        }
        s->last_error = SIMBA_OK;
        simba__loop_kick(s);
        return simba__handle(s, l);
    }
    l = simba__new_lock(s, names, n);
    if (!l || (d->key && !(l->key = simba_allocator_strdup(&s->alloc, d->key)))) {
        if (l) simba__slot_free(s, l);
        return simba__fail_lock(s, SIMBA_ENOMEM);
    }
    l->capacity = capacity;
    l->weight = weight;
    l->holds = 1;
    l->user = d->user;
    l->wait_ms = d->contend ? -1 : d->wait_ms;
    if (d->contend) l->flags |= SIMBA__F_CONTEND;
    if (d->reentrant) l->flags |= SIMBA__F_REENTRANT;
    if (d->key && simba__key_releasing(s, d->key, NULL)) l->flags |= SIMBA__F_BEHIND;
    l->state = SIMBA__S_PENDING;
    /* a try-lock still needs the server's answer: bound it by the op timeout */
    if (l->wait_ms > 0) l->wait_deadline = now + l->wait_ms;
    else if (l->wait_ms == 0) l->wait_deadline = now + s->op_timeout_ms;
    if (simba__hash_insert(s, l) != SIMBA_OK) { simba__slot_free(s, l); return simba__fail_lock(s, SIMBA_ENOMEM); }
    simba__timer_update(s, l);
    simba__mark_dirty(s, l);
    s->last_error = SIMBA_OK;
    simba__loop_kick(s);
    return simba__handle(s, l);
}

SIMBADEF simba_lock simba_contend(simba *s, const char *name, void *user) {
    simba_lock_desc d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.contend = 1;
    d.wait_ms = -1;
    d.user = user;
    return simba_acquire(s, &d);
}

SIMBADEF int simba_release(simba *s, simba_lock h) {
    simba__lock *l;
    if (!simba__is_live(s)) return SIMBA_EDESTROYED;
    if (simba__callback_busy(s)) return simba__fail(s, SIMBA_EBUSY);
    l = simba__lookup(s, h, SIMBA__K_LOCK);
    if (!l) {
        simba__lock *q = simba__lookup(s, h, SIMBA__K_QUERY);
        if (q && q->state == SIMBA__S_ANSWERED && !(q->flags & SIMBA__F_DELIVERED)) { simba__finish(s, q); simba__loop_kick(s); return SIMBA_OK; }
        return simba__fail(s, SIMBA_ESTALE);
    }
    if (l->state == SIMBA__S_RELEASING) return simba__fail(s, SIMBA_ESTALE);
    if (l->holds > 1) { l->holds--; return SIMBA_OK; }
    l->flags &= (uint16_t)~(SIMBA__F_CONTEND | SIMBA__F_NEED_POLL);
    if (l->state == SIMBA__S_PENDING && !(l->flags & SIMBA__F_MAY_EXIST)) {
        simba__emit_lock(s, l, SIMBA_EVENT_RELEASED, 0);   /* nothing was sent: nothing to undo */
        simba__finish(s, l);
        simba__loop_kick(s);
        return SIMBA_OK;
    }
    l->state = SIMBA__S_RELEASING;
    simba__drop_op(l);        /* an answer in flight must not re-grant what we give up */
    l->wait_deadline = l->recheck_at = SIMBA__NEVER;
    simba__timer_update(s, l);
    simba__mark_dirty(s, l);
    simba__loop_kick(s);
    return SIMBA_OK;
}

SIMBADEF int64_t simba_valid_ms(simba *s, simba_lock h) {
    simba__lock *l;
    int64_t now, until;
    if (!simba__is_live(s) || !(l = simba__lookup(s, h, SIMBA__K_LOCK)) || l->state != SIMBA__S_HELD) return 0;
    now = simba__now(s);
    until = simba__hold_until(s, l);
    return simba__session_safe(s, now) && now < until ? until - now : 0;
}

SIMBADEF int64_t simba_valid_until(simba *s, simba_lock h) {
    return simba_valid_ms(s, h) > 0 ? simba__hold_until(s, simba__lookup(s, h, SIMBA__K_LOCK)) : 0;
}

SIMBADEF int64_t simba_fence(simba *s, simba_lock h, int index) {
    simba__lock *l;
    if (simba_valid_ms(s, h) <= 0) return 0;
    l = simba__lookup(s, h, SIMBA__K_LOCK);
    if (index < 0 || index >= l->nres) return 0;
    return l->arr.fences ? l->arr.fences[index] : l->fence;
}

SIMBADEF int simba_holds(simba *s, simba_lock h) {
    simba__lock *l;
    if (!simba__is_live(s) || !(l = simba__lookup(s, h, SIMBA__K_LOCK)) || l->state != SIMBA__S_HELD) return 0;
    return l->holds;
}

static simba_lock simba__query(simba *s, const char *name, int kind, int capacity, void *user) {
    simba__lock *l;
    int err;
    if (!simba__is_live(s)) return simba__no_lock;
    if (simba__callback_busy(s)) return simba__fail_lock(s, SIMBA_EBUSY);
    if ((err = simba__check_name(name)) != SIMBA_OK) return simba__fail_lock(s, err);
    if (kind == SIMBA_OP_SET_CAPACITY && capacity <= 0) return simba__fail_lock(s, SIMBA_ECAPACITY);
    l = simba__slot_new(s);
    if (!l || !(l->names = simba_allocator_strdup(&s->alloc, name))) {
        if (l) simba__slot_free(s, l);
        return simba__fail_lock(s, SIMBA_ENOMEM);
    }
    l->kind = SIMBA__K_QUERY;
    l->qkind = (uint8_t)kind;
    l->nres = 1;
    l->capacity = capacity ? capacity : 1;
    l->weight = 1;
    l->user = user;
    l->state = SIMBA__S_PENDING;
    simba__mark_dirty(s, l);
    s->last_error = SIMBA_OK;
    simba__loop_kick(s);
    return simba__handle(s, l);
}

SIMBADEF simba_lock simba_inspect(simba *s, const char *name, void *user) { return simba__query(s, name, SIMBA_OP_INSPECT, 0, user); }
SIMBADEF simba_lock simba_set_capacity(simba *s, const char *name, int capacity, void *user) {
    return simba__query(s, name, SIMBA_OP_SET_CAPACITY, capacity, user);
}
SIMBADEF simba_lock simba_delete(simba *s, const char *name, void *user) { return simba__query(s, name, SIMBA_OP_DELETE, 0, user); }

SIMBADEF int simba_holders(simba *s, simba_lock h, simba_holder *out, int max) {
    simba__lock *l;
    int i;
    if (!simba__is_live(s)) return SIMBA_EDESTROYED;
    l = simba__lookup(s, h, SIMBA__K_QUERY);
    if (!l || l->state != SIMBA__S_ANSWERED) return simba__fail(s, SIMBA_ESTALE);
    if (max < 0 || (max > 0 && !out)) return simba__fail(s, SIMBA_EINVAL);
    for (i = 0; i < l->nresult && i < max; i++) out[i] = l->arr.result[i];
    return l->nresult;
}

/* Every socket of every backend is close-on-exec, in both modes. A child
   that the application forks and execs (the job of `simba run`) must not
   inherit simba's authenticated connections: its writes would land in the
   middle of simba's protocol, and a daemon it starts would keep them open
   after simba is gone. An inherited socket also outlives the backend's
   close, and an epoll set keeps reporting it under its fd number, which a
   reconnect may have reused: a stale watcher nobody can remove. hiredis,
   MariaDB Connector/C and the ZooKeeper C client open their sockets without
   the flag, and reconnect inside their own calls, so the core marks each fd
   wherever it asks a backend for them: here, and nowhere else (a backend
   whose fds are all its own, opened close-on-exec, says so once with
   simba_backend_own_fds). */
static void simba__cloexec(int fd) {
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0 && !(fl & FD_CLOEXEC)) (void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

static int simba__backend_pollfds(simba *s, struct pollfd *fds, int max) {
    int n = s->backend.vt->pollfds(s->backend.impl, fds, max), j;
    if (s->own_fds) return n;
    for (j = 0; j < n && j < max; j++)
        if (fds[j].fd >= 0) simba__cloexec(fds[j].fd);
    return n;
}

/* All the backend's fds into s->loop_want, grown to fit. Returns how many
   there are: more than s->capwant only when it could not grow. */
static int simba__backend_fds(simba *s) {
    for (;;) {
        int n = simba__backend_pollfds(s, s->loop_want, s->capwant);
        struct pollfd *p;
        if (n <= s->capwant) return n;
        p = (struct pollfd *)simba__alloc(s, (size_t)n * sizeof *p);
        if (!p) return n;
        simba__free(s, s->loop_want);
        s->loop_want = p;
        s->capwant = n;
    }
}

SIMBADEF int simba_pollfds(simba *s, struct pollfd *fds, int max) {
    if (!simba__is_live(s)) return SIMBA_EDESTROYED;
    if (simba__callback_busy(s)) return simba__fail(s, SIMBA_EBUSY);
    if (max < 0 || (max > 0 && !fds)) return simba__fail(s, SIMBA_EINVAL);
    /* requests made since the last tick go out now, so the caller's poll()
       already waits for their answers instead of spinning once first */
    if (s->dirty_head) simba__dispatch(s, simba__now(s));
    simba__loop_sync(s);              /* push mode: the dispatch may have changed what to watch */
    return simba__backend_pollfds(s, fds, max);
}

/* How long the loop may sleep. A queued event means "tick now" for the
   caller's loop (it collects events by ticking); the blocking helpers leave
   other handles' events queued on purpose, so they ask without that rule,
   or they would spin for their whole wait. */
static int simba__sleep_ms(simba *s, int events_mean_now) {
    int64_t now, at = SIMBA__NEVER, b;
    if (events_mean_now && (s->events.count || s->owing)) return 0;
    now = simba__now(s);
    if (s->clock_back) return 0;      /* the step drops the session at once */
    if (s->dirty_head && s->connected && !s->backend_full && simba__session_safe(s, now)) return 0;
    if (s->nheap) at = s->locks[s->heap[0]].timer_at;
    if (s->session.open && s->session.valid_until < at) at = s->session.valid_until;
    if (s->confirm_by < at) at = s->confirm_by;
    if (s->connected) {
        int64_t k = s->session.op ? s->session.op_deadline : s->session.next_keepalive;
        if (k < at) at = k;
    }
    b = s->backend.vt->deadline_ms(s->backend.impl);
    if (b >= 0 && b < at) at = b;
    if (at == SIMBA__NEVER) return -1;
    if (at <= now) return 0;
    return at - now > 0x7fffffff ? 0x7fffffff : (int)(at - now);
}

SIMBADEF int simba_timeout_ms(simba *s) {
    if (!simba__is_live(s)) return 0;
    return simba__sleep_ms(s, 1);
}

/* Free the answered queries whose event the caller has had since the last tick. */
static void simba__reap_queries(simba *s) {
    while (s->delivered_queries) {
        simba__lock *l = &s->locks[s->delivered_queries - 1];
        s->delivered_queries = l->next_dirty;
        if (l->kind == SIMBA__K_QUERY) simba__slot_free(s, l);
    }
}

/* The caller's clock went back (simba__now): every hold is lost and a new
   session starts, on the caller's clock as it is now (deadlines set before
   the jump come that much later). */
static void simba__clock_check(simba *s) {
    if (!s->clock_back) return;
    if (!s->clock_wild)
        simba__log(s, SIMBA_LOG_ERROR, "simba: the clock went back from %lld ms; every hold is lost",
                   (long long)s->clock_max);
    else if (!s->clock_wild_told)
        simba__log(s, SIMBA_LOG_ERROR, "simba: the clock read %lld ms, outside 0..%lld; every hold is lost, "
                   "nothing is granted until it reads in range", (long long)s->clock_wild,
                   (long long)SIMBA_CLOCK_MAX_MS);
    if (s->clock_wild) s->clock_wild_told = 1;
    simba__session_drop(s, SIMBA_LOST_EXPIRED);
    s->clock_back = 0;
    s->clock_max = INT64_MIN;
}

/* The deadline of the holds not confirmed since the admin epoch moved has
   passed (simba__recheck_holds). A hold still unconfirmed drops the session,
   as a keepalive not answered in time does: every hold is LOST EXPIRED, and
   what goes on does so in a new session, with new requests and new fences
   (the old session's entries go with its CLOSE or its lease). An answer
   still in flight from before the move is not waited for: the op goes out
   again. */
static void simba__lose_unconfirmed(simba *s) {
    uint32_t i;
    int held = 0;
    s->confirm_by = SIMBA__NEVER;
    for (i = 0; i < s->nlocks; i++) {
        simba__lock *l = &s->locks[i];
        if (!(l->flags & SIMBA__F_UNCONFIRMED)) continue;
        if (l->kind == SIMBA__K_LOCK && l->state == SIMBA__S_HELD) { held = 1; continue; }   /* flagged for the drop */
        l->flags &= (uint16_t)~(SIMBA__F_UNCONFIRMED | SIMBA__F_CONFIRMING);
        if (l->kind != SIMBA__K_LOCK || l->state == SIMBA__S_RELEASING) continue;
        if (l->op) {
            simba__drop_op(l);
            if (l->state == SIMBA__S_WAITING) l->flags |= SIMBA__F_NEED_POLL;
            simba__timer_update(s, l);
            simba__mark_dirty(s, l);
        }
    }
    if (!held) return;
    simba__log(s, SIMBA_LOG_WARN, "simba: a hold got no answer by its deadline after an admin change; "
               "dropping the session");
    simba__session_drop(s, SIMBA_LOST_EXPIRED);
}

/* Everything a tick does except handing out events. */
static void simba__step(simba *s, const struct pollfd *fds, int nfds) {
    int64_t now = simba__now(s);
    simba__reap_queries(s);
    /* the safety rule first: from the clock alone, before any I/O */
    simba__clock_check(s);
    if (s->session.open && now >= s->session.valid_until) simba__session_drop(s, SIMBA_LOST_EXPIRED);
    if (now >= s->confirm_by) simba__lose_unconfirmed(s);
    simba__close_dropped(s);
    s->backend.vt->process(s->backend.impl, fds, nfds);
    now = simba__now(s);
    simba__run_timers(s, now);
    simba__session_tick(s, now);
    simba__dispatch(s, now);
    /* the step may have opened sockets, and the caller may fork on the
       events it returns: they are close-on-exec before it gets them */
    (void)simba__backend_fds(s);
}

/* The first event l owes, taken out of it. What the queue would have held
   is read from the lock now: its fence and stored capacity, the session's
   validity, the cause of a TIMEOUT; the words of an ERROR and the figures
   of an INFO were not kept (out of memory when they came): the code says so. */
static void simba__owed_take(simba *s, simba__lock *l, simba_event *ev) {
    int type = simba__owed_type(l, 0);
    int64_t now;
    memset(ev, 0, sizeof *ev);
    ev->type = (simba_event_type)type;
    ev->lock = simba__handle(s, l);
    ev->lock.gen = simba__owed_gen(l) ^ s->salt;
    ev->user = l->user;
    switch (type) {
    case SIMBA_EVENT_ACQUIRED:
        now = simba__now(s);
        ev->fence = l->fence;
        ev->capacity = l->stored_capacity;
        if (simba__session_safe(s, now)) {
            ev->valid_until = simba__hold_until(s, l);
            ev->valid_ms = ev->valid_until - now;
        }
        break;
    case SIMBA_EVENT_LOST:
        ev->error = (l->owed >> SIMBA__OWED_REASON) & 15;
        break;
    case SIMBA_EVENT_TIMEOUT:
        ev->error = simba__wait_cause(s, l, ev->message, sizeof ev->message);
        break;
    case SIMBA_EVENT_ERROR:
        ev->error = l->owed_error;
        snprintf(ev->message, sizeof ev->message, "%s (the details were lost: out of memory)",
                 simba_strerror(ev->error));
        break;
    case SIMBA_EVENT_INFO:
        ev->error = l->owed_error ? (int)l->owed_error : (int)SIMBA_ENOMEM;
        simba__copy(ev->message, sizeof ev->message, "the answer's figures were lost: out of memory");
        break;
    default:                                           /* DONE, RELEASED */
        ev->error = type == SIMBA_EVENT_DONE ? l->owed_error : 0;
        break;
    }
    if (!simba__owed_type(l, 1)) simba__owed_clear(s, l);  /* that was the last one */
    else l->owed = (uint16_t)((l->owed >> 4) & 0xff);       /* the next ones; a LOST's reason goes */
}

/* The next event for the caller: a LOST first (queued before any lock
   owed, or owed), then the queue, then what locks owe (simba__owe). */
static int simba__next_event(simba *s, simba_event *ev) {
    simba__events *q = &s->events;
    simba__lock *l = s->owing ? simba__owed_first(s) : NULL;
    if (q->count && (q->buf[q->head].type == SIMBA_EVENT_LOST || !l || simba__owed_type(l, 0) != SIMBA_EVENT_LOST)) {
        *ev = q->buf[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        return 1;
    }
    if (!l) return 0;
    simba__owed_take(s, l, ev);
    if (!l->owed) (void)simba__owed_first(s);       /* it leaves the list (and ends, if finished) */
    return 1;
}

/* Bookkeeping when an event leaves the queue. */
static void simba__delivered(simba *s, const simba_event *ev) {
    simba__lock *l;
    if (ev->type == SIMBA_EVENT_ACQUIRED && (l = simba__lookup(s, ev->lock, SIMBA__K_LOCK)))
        l->flags &= (uint16_t)~SIMBA__F_ACQ_QUEUED;
    if ((ev->type == SIMBA_EVENT_INFO || ev->type == SIMBA_EVENT_DONE) &&
        (l = simba__lookup(s, ev->lock, SIMBA__K_QUERY)) && !(l->flags & SIMBA__F_DELIVERED)) {
        l->flags |= SIMBA__F_DELIVERED;   /* freed at the next tick */
        l->next_dirty = s->delivered_queries;
        s->delivered_queries = ev->lock.id;
    }
}

SIMBADEF int simba_tick(simba *s, const struct pollfd *fds, int nfds, simba_event *out, int max) {
    int n = 0;
    if (!simba__is_live(s)) return SIMBA_EDESTROYED;
    if (simba__callback_busy(s)) return simba__fail(s, SIMBA_EBUSY);
    if (max < 0 || (max > 0 && !out) || nfds < 0 || (nfds > 0 && !fds)) return simba__fail(s, SIMBA_EINVAL);
    simba__step(s, fds, nfds);
    while (n < max && simba__next_event(s, &out[n])) {
        simba__delivered(s, &out[n]);
        n++;
    }
    if (!s->events.count) {
        /* emptied: the next event goes to the ring's first slot again, not
           on along it, so an idle client's events stay in the lines it used
           last (walking a ring sized for its locks one event at a time would
           touch a cold cache line at nearly every hand-off to a client unused
           for a while) */
        s->events.head = 0;
        if (s->events.cap > 1024) {   /* give back a burst's buffer: no room is kept for locks */
            simba__free(s, s->events.buf);
            s->events.buf = NULL;
            s->events.cap = 0;
        }
    }
    simba__loop_sync(s);              /* push mode: tell the loop the new fds and deadline */
    return n;
}

/* Take the first event of handle h, if any: queued, else owed (a lock
   that owes has no later event queued). */
static int simba__take_event(simba *s, simba_lock h, simba_event *ev) {
    simba__events *q = &s->events;
    simba__lock *l;
    int i;
    for (i = 0; i < q->count; i++) {
        simba_event *e = &q->buf[(q->head + i) % q->cap];
        if (e->lock.id != h.id || e->lock.gen != h.gen) continue;
        *ev = *e;
        for (; i + 1 < q->count; i++) q->buf[(q->head + i) % q->cap] = q->buf[(q->head + i + 1) % q->cap];
        q->count--;
        simba__delivered(s, ev);
        return 1;
    }
    l = simba__event_lock(s, h);
    if (!l || !l->owed) return 0;
    simba__owed_take(s, l, ev);
    simba__delivered(s, ev);
    return 1;
}

/* The blocking helpers sleep until simba's next deadline, which is on
   simba's clock (a virtual one in tests may run faster than the wall
   clock). They learn the clock's pace over their first 20 ms (woken after
   that long at most) and turn a sleep on simba's clock into wall-clock
   milliseconds at that pace, so a fast clock's keepalives are not slept
   through. A slower clock keeps the sleep as it is: waking early is safe. */
typedef struct simba__pace {
    int64_t wall0, clock0;
} simba__pace;

static void simba__pace_start(simba *s, simba__pace *p) {
    p->wall0 = simba__monotonic_ms(NULL);
    p->clock0 = simba__now(s);
}

static int simba__pace_sleep(simba *s, const simba__pace *p, int ms) {
    int64_t wall = simba__monotonic_ms(NULL) - p->wall0, clock = simba__now(s) - p->clock0;
    if (wall < 20) return ms < 20 - (int)wall ? ms : 20 - (int)wall;
    if (clock > wall) ms = (int)((int64_t)ms * wall / clock);
    return ms;
}

/* One round of the blocking helpers: poll() simba's fds for at most t ms,
   then step. In push mode the loop is told what the step changed, as after
   any tick. */
static void simba__poll_step(simba *s, int t) {
    struct pollfd fds[16];
    int n = simba_pollfds(s, fds, 16);
    if (n > 16) n = 16;
    if (n < 0) n = 0;
    poll(fds, (nfds_t)n, t);
    simba__step(s, n ? fds : NULL, n);
    simba__loop_sync(s);
}

SIMBADEF int simba_wait(simba *s, simba_lock h, int timeout_ms, simba_event *ev) {
    int64_t end;
    simba__pace pace;
    if (!simba__is_live(s)) return SIMBA_EDESTROYED;
    if (simba__callback_busy(s)) return simba__fail(s, SIMBA_EBUSY);
    if (!ev) return simba__fail(s, SIMBA_EINVAL);
    end = timeout_ms < 0 ? SIMBA__NEVER : simba__monotonic_ms(NULL) + timeout_ms;
    simba__pace_start(s, &pace);
    for (;;) {
        int t;
        int64_t left;
        if (simba__take_event(s, h, ev)) return 1;
        if (!simba__lookup(s, h, SIMBA__K_LOCK) && !simba__lookup(s, h, SIMBA__K_QUERY)) return simba__fail(s, SIMBA_ESTALE);
        left = end == SIMBA__NEVER ? 1000 : end - simba__monotonic_ms(NULL);
        if (left <= 0) return 0;
        t = simba__sleep_ms(s, 0);     /* other handles' events stay queued: not a reason to spin */
        if (t < 0 || t > 1000) t = 1000;
        t = simba__pace_sleep(s, &pace, t);
        if (t > left) t = (int)left;
        simba__poll_step(s, t);
    }
}

SIMBADEF int simba_lease_ms(simba *s) {
    s = simba__root(s);
    return s ? s->ttl_ms + s->transition_ms : 0;
}
SIMBADEF int64_t simba_now_ms(simba *s) {
    s = simba__root(s);
    return s ? simba__now(s) : 0;
}

/* The hold helpers measure time on simba's clock (a virtual clock in tests)
   and sleep in poll() for at most what is left, capped and at the clock's
   pace (simba__pace_sleep), so that a clock that runs faster or slower than
   the wall clock still works. */
static int simba__hold_done(simba *s, int (*done)(void *user), void *user) {
    int rc;
    s->cb_busy++;
    rc = done(user);
    s->cb_busy--;
    return rc;
}

SIMBADEF int simba_hold_until(simba *s, simba_lock h, int timeout_ms, int (*done)(void *user), void *user, simba_event *ev) {
    int64_t end;
    simba__pace pace;
    if (!simba__is_live(s)) return SIMBA_EDESTROYED;
    if (simba__callback_busy(s)) return simba__fail(s, SIMBA_EBUSY);
    if (!ev) return simba__fail(s, SIMBA_EINVAL);
    end = timeout_ms < 0 ? SIMBA__NEVER : simba__now(s) + timeout_ms;
    simba__pace_start(s, &pace);
    for (;;) {
        int t;
        int64_t left;
        if (simba__take_event(s, h, ev)) return 1;
        if (!simba__lookup(s, h, SIMBA__K_LOCK)) return simba__fail(s, SIMBA_ESTALE);
        if (done && simba__hold_done(s, done, user)) return 0;
        left = end == SIMBA__NEVER ? 1000 : end - simba__now(s);
        if (left <= 0) return 0;
        t = simba__sleep_ms(s, 0);     /* other handles' events stay queued: not a reason to spin */
        if (t < 0 || t > left) t = (int)(left > 1000 ? 1000 : left);
        t = simba__pace_sleep(s, &pace, t);
        if (done && t > 50) t = 50;
        simba__poll_step(s, t);
    }
}

SIMBADEF int simba_hold_for(simba *s, simba_lock h, int ms, simba_event *ev) {
    if (ms < 0) return simba__is_live(s) ? simba__fail(s, SIMBA_EINVAL) : SIMBA_EDESTROYED;
    return simba_hold_until(s, h, ms, NULL, NULL, ev);
}

/*>>loop: push mode: event-loop hooks (implementation) */

/*--- push mode: event-loop hooks ----------------------------------------------------
   simba keeps the set of fds the loop watches for it (with each socket's
   identity) and the time the loop's timer is armed for; after each tick and
   each API call it tells the loop only the differences. */

#define SIMBA__LOOP_FALLBACK_MS 20      /* polling period of an fd the loop could not watch */

static int simba__loop_mask(short ev) {
    return ((ev & POLLIN) ? SIMBA_POLL_IN : 0) | ((ev & POLLOUT) ? SIMBA_POLL_OUT : 0);
}

static int simba__loop_hook(simba *s, int fd, int what) {
    int rc;
    s->cb_busy++;
    rc = s->loop.socket(s->loop.user, fd, what);
    s->cb_busy--;
    return rc;
}

/* Arm the loop's timer for simba's next deadline, if that changed. */
static void simba__loop_timer(simba *s) {
    int ms = simba_timeout_ms(s);
    int64_t now = simba__now(s), at;
    if (s->loop_fallback && (ms < 0 || ms > SIMBA__LOOP_FALLBACK_MS)) ms = SIMBA__LOOP_FALLBACK_MS;
    at = ms < 0 ? SIMBA__NEVER : now + ms;
    if (at == s->loop_at) return;
    if (at != SIMBA__NEVER && at <= now && s->loop_at <= now) return;   /* already due */
    s->loop_at = at;
    s->cb_busy++;
    s->loop.timer(s->loop.user, ms);
    s->cb_busy--;
}

static void simba__loop_identity(int fd, dev_t *dev, ino_t *ino) {
    struct stat st;
    if (fstat(fd, &st) == 0) { *dev = st.st_dev; *ino = st.st_ino; }
    else { *dev = 0; *ino = 0; }
}

static void simba__loop_forget(simba *s, int i) {
    s->watch[i] = s->watch[--s->nwatch];
}

/* Tell the loop which fds changed: every REMOVE first, then the adds and changes. */
static void simba__loop_fds(simba *s) {
    int n = simba__backend_fds(s), i, j, fallback = 0;
    if (n < 0) n = 0;
    if (n > s->capwant) { n = s->capwant; fallback = 1; }   /* watch what fits; the rest from the timer */
    for (i = 0; i < s->nwatch;) {
        struct simba__watch *w = &s->watch[i];
        int keep = 0;
        for (j = 0; j < n; j++)
            if (s->loop_want[j].fd == w->fd && simba__loop_mask(s->loop_want[j].events)) { keep = 1; break; }
        if (keep) {
            dev_t dev;
            ino_t ino;
            simba__loop_identity(w->fd, &dev, &ino);
            keep = dev == w->dev && ino == w->ino;
        }
        if (keep) { i++; continue; }
        if (w->ok) (void)simba__loop_hook(s, w->fd, SIMBA_POLL_REMOVE);
        simba__loop_forget(s, i);
    }
    for (j = 0; j < n; j++) {
        int fd = s->loop_want[j].fd, mask = simba__loop_mask(s->loop_want[j].events);
        struct simba__watch *w = NULL;
        if (fd < 0 || !mask) continue;
        for (i = 0; i < s->nwatch; i++) if (s->watch[i].fd == fd) { w = &s->watch[i]; break; }
        if (!w) {
            if (s->nwatch == s->capwatch) {
                int cap = s->capwatch ? s->capwatch * 2 : 4;
                struct simba__watch *p = (struct simba__watch *)simba__alloc(s, (size_t)cap * sizeof *p);
                if (!p) { fallback = 1; continue; }
                if (s->nwatch) memcpy(p, s->watch, (size_t)s->nwatch * sizeof *p);
                simba__free(s, s->watch);
                s->watch = p;
                s->capwatch = cap;
            }
            w = &s->watch[s->nwatch++];
            w->fd = fd;
            w->mask = 0;
            w->ok = 0;
            simba__loop_identity(fd, &w->dev, &w->ino);
        }
        if (!w->ok || w->mask != mask) {
            w->mask = mask;
            w->ok = simba__loop_hook(s, fd, mask) == 0;
            if (!w->ok) simba__log(s, SIMBA_LOG_WARN, "simba: the loop cannot watch fd %d; polling it every %d ms",
                                   fd, SIMBA__LOOP_FALLBACK_MS);
        }
        if (!w->ok) fallback = 1;
    }
    s->loop_fallback = fallback;
}

static void simba__loop_sync(simba *s) {
    if (!s->loop.socket || s->cb_busy) return;
    simba__loop_fds(s);
    simba__loop_timer(s);
}

/* An API call queued work (or an event): let the loop come back at once. */
static void simba__loop_kick(simba *s) {
    if (!s->loop.socket || s->cb_busy) return;
    simba__loop_timer(s);
}

/* The loop lets go of everything: REMOVE each fd, cancel the timer, detach. */
static void simba__loop_teardown(simba *s) {
    simba_loop old = s->loop;
    if (!old.socket) return;
    s->cb_busy++;
    while (s->nwatch) {
        struct simba__watch w = s->watch[s->nwatch - 1];
        s->nwatch--;
        if (w.ok) (void)old.socket(old.user, w.fd, SIMBA_POLL_REMOVE);
    }
    if (s->loop_at != SIMBA__NEVER) old.timer(old.user, -1);
    s->loop_at = SIMBA__NEVER;
    s->loop_fallback = 0;
    memset(&s->loop, 0, sizeof s->loop);
    if (old.detach) old.detach(old.user);
    s->cb_busy--;
}

SIMBADEF int simba_set_loop(simba *s, const simba_loop *loop) {
    if (!simba__is_live(s)) return SIMBA_EDESTROYED;
    if (loop && (!loop->socket || !loop->timer)) return simba__fail(s, SIMBA_EINVAL);
    if (simba__callback_busy(s)) return simba__fail(s, SIMBA_EBUSY);
    simba__loop_teardown(s);
    if (!loop) return SIMBA_OK;
    s->loop = *loop;
    s->loop_at = SIMBA__NEVER;
    simba__loop_sync(s);
    return SIMBA_OK;
}

SIMBADEF int simba_socket_action(simba *s, int fd, int what, simba_event *out, int max) {
    struct pollfd p;
    int i;
    memset(&p, 0, sizeof p);                 /* the timer passes it with nfds 0 */
    if (!simba__is_live(s)) return SIMBA_EDESTROYED;
    if (simba__callback_busy(s)) return simba__fail(s, SIMBA_EBUSY);
    if (!out || max <= 0) return simba__fail(s, SIMBA_EINVAL);
    if (fd == SIMBA_TIMEOUT) {
        s->loop_at = SIMBA__NEVER;          /* the one-shot timer is spent */
        /* an fd the loop could not watch is tried on every timer */
        return s->loop_fallback ? simba_tick(s, NULL, 0, out, max) : simba_tick(s, &p, 0, out, max);
    }
    if (fd < 0) return simba__fail(s, SIMBA_EINVAL);
    p.fd = fd;
    p.events = POLLIN | POLLOUT;
    for (i = 0; i < s->nwatch; i++)
        if (s->watch[i].fd == fd) p.events = (short)(((s->watch[i].mask & SIMBA_POLL_IN) ? POLLIN : 0) |
                                                     ((s->watch[i].mask & SIMBA_POLL_OUT) ? POLLOUT : 0));
    p.revents = (short)(((what & SIMBA_POLL_IN) ? POLLIN : 0) | ((what & SIMBA_POLL_OUT) ? POLLOUT : 0) |
                        ((what & SIMBA_POLL_ERR) ? (POLLERR | POLLHUP) : 0));
    return simba_tick(s, &p, 1, out, max);
}

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_IMPL_INCLUDED */
#endif /* SIMBA_IMPLEMENTATION */

/*
    LICENSE (MIT)
    Copyright (c) 2026 the simba authors
    Permission is hereby granted, free of charge, to any person obtaining a copy
    of this software and associated documentation files (the "Software"), to
    deal in the Software without restriction, including without limitation the
    rights to use, copy, modify, merge, publish, distribute, sublicense, and/or
    sell copies of the Software, and to permit persons to whom the Software is
    furnished to do so, subject to the following conditions: The above copyright
    notice and this permission notice shall be included in all copies or
    substantial portions of the Software. THE SOFTWARE IS PROVIDED "AS IS",
    WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
*/
