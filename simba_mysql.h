/*
    simba_mysql.h -- the MySQL/MariaDB backend of simba (see simba.h).

    Do this:
        #include "simba.h"
        #define SIMBA_MYSQL_IMPLEMENTATION
        #include "simba_mysql.h"
    in *one* C or C++ file (after simba.h, whose implementation may live in
    the same or another file). Link with -lmariadb (MariaDB Connector/C,
    Debian libmariadb-dev) and add -I/usr/include/mariadb.

        simba *s = simba_create(&(simba_desc){
            .backend = simba_mysql(&(simba_mysql_desc){
                .host = "127.0.0.1", .port = 3306, .user = "app",
                .password = "secret", .database = "locks", .create_schema = 1 }) }, NULL);

    Everything goes through the connector's non-blocking API (MYSQL_OPT_NONBLOCK,
    the _start and _cont calls, mysql_get_socket, mysql_get_timeout_value_ms): connecting,
    querying and reconnecting never block the caller. Host names follow the one
    policy of docs/design.md: a numeric address or "localhost" is used as given;
    another name is resolved once, blocking, inside simba_mysql() (not in the
    loop), and a name that does not resolve fails simba_create with a message.

    CONTENTS (every section starts with a comment ">>name", grep for it;
    --------  a sub-section with ">>name.sub", named as in docs/backends.md)
    Declarations:
        >>options       simba_mysql_desc: what the caller sets
        >>constructor   simba_mysql(), simba_mysql_from_url(), simba_mysql_schema()
        >>stats         struct simba_mysql_stats and simba_mysql_stats()
    Implementation (SIMBA_MYSQL_IMPLEMENTATION; guard SIMBA_MYSQL_IMPL_INCLUDED):
        >>internals     includes, limits, private types, memory, SQL text, the job queue
        >>connection    .io (the connector's non-blocking calls) .connect (setup,
                        errors, the restart grace) .queue (the main connection's
                        job queue) .recover (reconnect with backoff)
        >>session       OPEN, KEEPALIVE, CLOSE, the switch to a new session, the sweep
        >>locks         .queue (read the queues) .rule (the grant rule) .write
                        .dispatch: ENQUEUE, POLL, RELEASE, INSPECT, SET_CAPACITY, DELETE
                        (with the hold in the row, simba__mysql_sql_row, and the
                        one-round-trip statement, simba__mysql_sql_settle)
        >>wakeups       .arm (a waiter's watch and connection) .fire (the bells we
                        hold, rung by a release) .deliver (-> simba_backend_granted)
        >>stats         simba_mysql_stats()
        >>vtable        attach, submit, pollfds, deadline_ms, process, reset, destroy
        >>constructor   desc checks, allocation, the schema, simba_mysql_from_url()

    HOW IT WORKS (details and measurements in docs/mysql.md)
    ------------
    Tables (InnoDB, names VARBINARY, see simba_mysql.sql): <prefix>sessions,
    <prefix>resources, <prefix>entries, <prefix>capacity_audit. A sole
    holder that found its queue empty has no entry: its hold is kept in the
    resource's row (a negative capacity marks it, the h_ columns hold its
    request, session, weight and fence), so an uncontended ENQUEUE is one
    plain UPDATE of that row and its RELEASE another (simba__mysql_sql_row),
    prepared once per connection after its first few uses as text and sent
    as an EXECUTE from then on (simba__mysql_row_send); whatever else
    touches the resource first moves such a hold into the queue under the
    row's lock. An ENQUEUE or RELEASE of one resource that this UPDATE does
    not settle is then one statement (on MariaDB: a CALL of
    the procedure create_schema installs, or the same as a BEGIN NOT ATOMIC
    compound statement; simba__mysql_sql_settle): it locks the resource row and, when
    the grant rule has at most one entry to look at (an empty queue; a
    capacity-1 queue's live head after a release), writes the result and
    COMMITs in that one round trip. Every other operation (and those two
    when the block leaves it open) is one transaction of two round trips:
    lock the resource rows (SELECT ... FOR UPDATE, sorted by name) and read
    their queues, then write what the grant rule decided and COMMIT. Dead
    sessions' entries are purged there; a background sweep removes the rest
    in small batches. Deadlocks (1213) and lock wait timeouts (1205) are
    rolled back and retried. Time is the server's (NOW(6) in UTC). A session
    row keeps its expiry and its last renewal (renewed_ms, for INSPECT's
    renewed_ago_ms); create_schema adds that column to older tables in place.

    Wake-ups: the connection that owns an entry holds a user lock (GET_LOCK,
    the entry's "bell") for as long as the entry exists. A client with a
    waiting request keeps ONE extra connection that blocks in
    GET_LOCK(bell of the entry it waits behind); the release of that entry
    (or the death of its owner's connection) ends the wait at once, and one
    more query on that connection reads our fence, so the grant is usually
    delivered without a POLL. MariaDB's user locks cost O(n) per GET_LOCK on a
    connection holding n, so at most max_bells entries get one; waiters
    behind the others (and behind a holder of a capacity > 1 resource)
    re-poll with backoff instead.

    Two connections per client at most: the main one (one operation in
    flight, at most 32 lock operations queued, session operations first) and
    the waiter one (only while waiting). No restart grace is needed while
    the server keeps its commits (innodb_flush_log_at_trx_commit = 1); with
    another setting the backend grants nothing for one lease after the
    server started (restart_grace).
*/
#ifndef SIMBA_MYSQL_INCLUDED
#define SIMBA_MYSQL_INCLUDED

#ifndef SIMBA_INCLUDED
#error "simba_mysql.h: include simba.h first"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*>>options: what the caller sets */
/* Options of simba_mysql(). Strings are copied; zero fields take defaults. */
typedef struct simba_mysql_desc {
    const char *host;           /* numeric address or "localhost"; another name is
                                   resolved once, blocking, by simba_mysql()
                                   (docs/design.md); default "127.0.0.1" */
    int port;                   /* default 3306 */
    const char *unix_socket;    /* connect through this socket instead of TCP */
    const char *user;           /* default: the connector's default (login name) */
    const char *password;
    const char *database;       /* required: the schema that holds the tables */
    const char *table_prefix;   /* [A-Za-z0-9_]{0,32}; default "simba_" */
    /* TLS, passed through to the connector (MYSQL_OPT_SSL_*); NULL = unused */
    const char *ssl_key, *ssl_cert, *ssl_ca, *ssl_capath, *ssl_cipher;
    int ssl_verify_server_cert; /* 1: check the server's certificate and name */
    int connect_timeout_ms;     /* a connect (with TLS and setup) that takes
                                   longer is abandoned and retried; default 5000 */
    int create_schema;          /* 1: CREATE TABLE IF NOT EXISTS on connect,
                                   and upgrade older tables in place; on
                                   MariaDB also the two procedures of
                                   simba_mysql.sql (optional: without CREATE
                                   ROUTINE the client works without them) */
    int lock_wait_timeout_s;    /* innodb_lock_wait_timeout of simba's own
                                   sessions; default 1 (retried on expiry) */
    int sweep_ms;               /* period of the background sweep of expired
                                   sessions; default 2 * lease (>= 5 s); <0: off */
    int no_waiter;              /* 1: no waiter connection (waiters then rely on
                                   the core's re-checks only; for measurements) */
    int restart_grace;          /* grant nothing for one lease after the server
                                   started: 0 (default) when the server's
                                   innodb_flush_log_at_trx_commit != 1 (it may
                                   lose its last commits), 1 always, <0 never */
    int max_bells;              /* entries of this client that get a wake-up bell
                                   (a user lock); default 512, <0: all. Waiters
                                   behind an entry without one poll (<= 0.5 s). */
    simba_allocator allocator;  /* for the backend's memory; zero = malloc/free;
                                   exactly one of alloc/free set: SIMBA_EINVAL */
} simba_mysql_desc;

/*>>constructor: simba_mysql, simba_mysql_from_url, simba_mysql_schema */
/* A new MySQL backend for one simba client (pass it in simba_desc.backend;
   simba owns it from simba_create on). Never an unusable backend: on bad
   options (database missing, bad prefix, a host name that does not resolve,
   half an allocator) it returns one that makes simba_create fail with
   SIMBA_EINVAL and a message naming the field ("simba_mysql_desc.<field>:
   ...", in simba_create's simba_error); out of memory, SIMBA_ENOMEM and
   "simba_mysql: out of memory". */
SIMBADEF simba_backend simba_mysql(const simba_mysql_desc *d);

/* Writes the schema (the statements of simba_mysql.sql: CREATE TABLE IF
   NOT EXISTS of the four tables and the in-place upgrades of a sessions
   table made before renewed_ms and a resources table made before
   empty_seq, separated by ";\n") for table prefix
   `prefix` (NULL = "simba_") into buf. Returns the length it needs without
   the NUL (like snprintf), or SIMBA_ENAME for a bad prefix. */
SIMBADEF int simba_mysql_schema(const char *prefix, char *buf, size_t size);

/* ---- connection URLs ----
   simba_mysql_from_url: the backend for a parsed URL (simba_url_parse in
   simba_url.h) of scheme mysql:
       mysql://[user[:password]@]host[:port]/database[?parameters]
       mysql://[user[:password]@]/database?socket=/path/to/socket
   parameters: socket, table_prefix, create_schema (0/1), connect_timeout
   (duration), lock_wait_timeout (seconds), ssl_ca, ssl_capath, ssl_cert,
   ssl_key, ssl_cipher, ssl_verify (0/1), plus password_env / password_file
   (simba_url.h). Read the client options (simba_url_client_options) first: a
   parameter nobody read is an error here. */
SIMBADEF int simba_mysql_from_url(simba_url *u, simba_backend *out, simba_url_error *err);

/*>>stats: counters of one backend */
/* Counters of one backend, for tests, benchmarks and monitoring (the POSIX
   struct stat / stat() pattern). The first five fields are the same on
   every backend. */
struct simba_mysql_stats {
    int connected;              /* the main connection is up (as told to the core) */
    int64_t reconnects;         /* connects of the main connection after the first */
    int64_t ops_sent;           /* ops of the core accepted by submit */
    int64_t ops_completed;      /* ops answered to the core (simba_backend_complete) */
    int64_t wakes;              /* simba_backend_granted()/_recheck() calls made */
    /* MySQL's own */
    uint64_t batches;           /* query batches sent on the main connection */
    uint64_t statements;        /* statements in those batches */
    uint64_t transactions;      /* locking transactions committed */
    uint64_t retries;           /* transactions rolled back and run again */
    uint64_t deadlocks;         /* ER_LOCK_DEADLOCK (1213) answers */
    uint64_t lock_wait_timeouts;/* ER_LOCK_WAIT_TIMEOUT (1205) answers */
    uint64_t connects;          /* successful connects of the main connection */
    uint64_t waiter_connects;   /* ... and of the waiter connection */
    uint64_t bell_waits;        /* GET_LOCK waits started on the waiter connection */
    uint64_t bell_rings;        /* waits that ended because the bell was released */
    uint64_t swept_sessions;    /* expired sessions removed by the sweep */
    uint64_t swept_entries;     /* entries removed by the sweep */
    int last_error;             /* SIMBA_E* of the last failed connect or op, 0 if none */
    int held_bells;             /* user locks this client holds for its entries */
    int watches;                /* waiting requests the waiter connection watches */
    uint64_t polls;             /* POLL ops the core submitted (a grant pushed with its
                                   fence needs none) */
    uint64_t purged_watches;    /* watches of a dropped session discarded at the next OPEN */
    uint64_t purged_bells;      /* bells of a dropped session given back at the next OPEN */
    uint64_t stale_bell_waits;  /* GET_LOCK waits on a bell of a session not current (0:
                                   a dropped session's waits end with it) */
    uint64_t widened;           /* queue windows read again, twice as far, because the
                                   grant rule could reach past their end */
    uint64_t pushed_grants;     /* grants of our other waiting requests an op of ours
                                   found and pushed to the core (no ring, no POLL) */
    uint64_t rings_sent;        /* KILL QUERY rings of another client's waiter
                                   connection for a capacity > 1 grant (docs/mysql.md) */
    uint64_t rings_refused;     /* ... refused (ER_KILL_DENIED: another MySQL user) */
    uint64_t rings_heard;       /* waits of our waiter connection a ring cut short */
    uint64_t rings_missed;      /* capacity > 1 grants our waiter found without a ring:
                                   the first one turns the backoff re-polls back on */
    uint64_t calls;             /* one-round-trip ops sent as a CALL of the procedures
                                   simba_mysql.sql installs (docs/mysql.md) */
    uint64_t row_holds;         /* acquires settled by one UPDATE of the resource row: the
                                   hold kept in the row (docs/mysql.md, "The hold in the row") */
    uint64_t row_releases;      /* releases of such a hold by one UPDATE of the row */
    uint64_t row_misses;        /* those UPDATEs that matched nothing (the op then goes
                                   the procedures' way) */
    uint64_t row_skips;         /* releases sent the procedures' way without trying the
                                   row: their name met a queue here last time */
    uint64_t row_prepared;      /* row UPDATEs sent prepared (the binary protocol; the
                                   rest of row_holds + row_releases + row_misses as text) */
    uint64_t prepares;          /* row statements prepared on the main connection (a
                                   round trip each, once per connect; not in batches) */
};

/* Copies the counters of backend b (the value simba_mysql() returned; valid
   until the simba instance that owns it is destroyed). Returns SIMBA_OK, or
   SIMBA_EINVAL if b is not a MySQL backend or out is NULL. */
SIMBADEF int simba_mysql_stats(simba_backend b, struct simba_mysql_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_MYSQL_INCLUDED */

/* ======================================================================= */
#if defined(SIMBA_MYSQL_IMPLEMENTATION) && !defined(SIMBA_MYSQL_IMPL_INCLUDED)
#define SIMBA_MYSQL_IMPL_INCLUDED

/*>>internals: includes, limits, private types, memory, SQL text, the job queue */

#include <mysql.h>
#include <errmsg.h>
#include <mysqld_error.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef SIMBA_ASSERT
#include <assert.h>
#define SIMBA_ASSERT(c) assert(c)
#endif

/* Limits and tunables. */
enum {
    SIMBA__MYSQL_MAXRES = 40,          /* statements whose results one batch keeps */
    SIMBA__MYSQL_MAX_RETRIES = 8,      /* deadlock / lock-wait retries of one op */
    SIMBA__MYSQL_BELL_WAIT_S = 5,      /* GET_LOCK timeout with one watched bell */
    SIMBA__MYSQL_BELL_ROTATE_S = 1,    /* ... with several (they take turns) */
    SIMBA__MYSQL_SWEEP_BATCH = 500,    /* entries deleted per sweep statement */
    SIMBA__MYSQL_SWEEP_SESSIONS = 50,  /* expired sessions handled per sweep round */
    SIMBA__MYSQL_CLOSE_BATCH = 1000,   /* entries deleted per CLOSE statement */
    SIMBA__MYSQL_RETAKE_BATCH = 200,   /* bells re-taken per statement after a reconnect */
    SIMBA__MYSQL_MAX_QUEUED = 32,      /* lock ops queued on the main connection at most:
                                       the core times every op from its submit, so a
                                       deeper queue would time out its own tail */
    SIMBA__MYSQL_WINDOW_SLACK = 2,     /* queue rows read past the capacity asked for */
    SIMBA__MYSQL_PUSH_MAX = 16,        /* grants of our other requests one op pushes */
    SIMBA__MYSQL_BUSY_SLOTS = 64,      /* names remembered as busy (simba__mysql_busy_note) */
    SIMBA__MYSQL_WINDOW_MAX = 1 << 20  /* the longest window (20 doublings: whole queues) */
};

/* Server time. time_zone is '+00:00' in simba's sessions, so these are exact
   even across daylight-saving changes of the server's zone. The microseconds
   (fences) are integer arithmetic on the statement's one start time:
   UNIX_TIMESTAMP() is its second and MICROSECOND(NOW(6)) its fraction, the
   same number as CAST(UNIX_TIMESTAMP(NOW(6))*1000000 AS SIGNED) without the
   DECIMAL multiplication, which the acquire's statement pays twice. */
#define SIMBA__MYSQL_NOW_MS "CAST(UNIX_TIMESTAMP(NOW(3))*1000 AS SIGNED)"

#define SIMBA__MYSQL_NOW_US "(UNIX_TIMESTAMP()*1000000+MICROSECOND(NOW(6)))"

/* Internal job kinds, after the simba_op_kind values. */
enum {
    SIMBA__MYSQL_JOB_BELLS_RELEASE = 100, /* RELEASE_LOCK of bells we no longer need */
    SIMBA__MYSQL_JOB_BELLS_RETAKE,        /* GET_LOCK of our bells after a reconnect */
    SIMBA__MYSQL_JOB_SWEEP,               /* background removal of expired sessions */
    SIMBA__MYSQL_JOB_CLOSE_OLD,           /* CLOSE of a session the core dropped while
                                          it could not reach the server */
    SIMBA__MYSQL_JOB_RING,                /* KILL QUERY of the waiter connections of the
                                          sessions a capacity > 1 grant let in */
    SIMBA__MYSQL_JOB_PREPARE              /* PREPARE of the row statements on the main
                                          connection, after its first few uses as text */
};

/* Connection states. */
enum { SIMBA__MYSQL_CLOSED = 0, SIMBA__MYSQL_CONNECTING, SIMBA__MYSQL_SETUP, SIMBA__MYSQL_READY };

/* Steps of the async call in progress on a connection. */
enum { SIMBA__MYSQL_Q_NONE = 0, SIMBA__MYSQL_Q_CONNECT, SIMBA__MYSQL_Q_QUERY, SIMBA__MYSQL_Q_STORE,
       SIMBA__MYSQL_Q_NEXT, SIMBA__MYSQL_Q_PREPARE, SIMBA__MYSQL_Q_EXECUTE };

/* The row statements (simba__mysql_sql_row), prepared once per main
   connection: an uncontended ENQUEUE's and a RELEASE's. */
enum { SIMBA__MYSQL_PS_ENQUEUE = 0, SIMBA__MYSQL_PS_RELEASE, SIMBA__MYSQL_NPS };
enum { SIMBA__MYSQL_PS_MAXARGS = 16 };   /* the '?' of the longest row statement, and room */
/* Row statements a connection sends as text before it prepares them: more
   than a one-shot client's acquire and release (simba run), which would
   only wait for the PREPAREs before its CLOSE. */
enum { SIMBA__MYSQL_PS_AFTER = 3 };

/* Phases of a job (j->step). Each kind of job has its own step function,
   a small switch over the phases it goes through; S_FIRST builds and sends
   its first batch, every later phase reads the answer of the last one. */
enum {
    SIMBA__MYSQL_S_FIRST = 0,  /* nothing sent yet */
    SIMBA__MYSQL_S_FAST,       /* POLL: unlocked reads */
    SIMBA__MYSQL_S_ROW,        /* ENQUEUE/RELEASE: the one UPDATE of the resource row */
    SIMBA__MYSQL_S_PREPARE,    /* the PREPARE job: a row statement being prepared */
    SIMBA__MYSQL_S_READS,      /* locking reads (transaction open) */
    SIMBA__MYSQL_S_WRITES,     /* writes + COMMIT */
    SIMBA__MYSQL_S_ROLLBACK,   /* ROLLBACK before a retry or an error answer */
    SIMBA__MYSQL_S_SIMPLE,     /* one-batch jobs (OPEN, bells): sent */
    SIMBA__MYSQL_S_KEEPALIVE,  /* the renewal UPDATE */
    SIMBA__MYSQL_S_NOTIFY,     /* it matched nothing: session gone, or notified? */
    SIMBA__MYSQL_S_CLOSE_ENTRIES,
    SIMBA__MYSQL_S_CLOSE_SESSION,
    SIMBA__MYSQL_S_SWEEP_LIST,
    SIMBA__MYSQL_S_SWEEP_ENTRIES,
    SIMBA__MYSQL_S_SWEEP_SESSIONS
};

typedef struct simba__mysql_buf {
    char *p;
    size_t n, cap;
    int oom;
} simba__mysql_buf;

typedef struct simba__mysql_conn {
    MYSQL *m;
    int state;              /* SIMBA__MYSQL_CLOSED ... READY */
    int q;                  /* SIMBA__MYSQL_Q_*: the async call in progress */
    int wait;               /* MYSQL_WAIT_* the suspended call waits for (0 = none) */
    int64_t wait_until;     /* when MYSQL_WAIT_TIMEOUT is set */
    int done;               /* the query (or connect) finished: see err */
    unsigned err;           /* mysql_errno of the failure, 0 = ok */
    char errmsg[256];
    int nres;               /* results kept (one per statement) */
    MYSQL_RES *res[SIMBA__MYSQL_MAXRES];
    uint64_t affected[SIMBA__MYSQL_MAXRES];
    uint64_t insert_id[SIMBA__MYSQL_MAXRES]; /* LAST_INSERT_ID(expr) of a statement without rows */
    int64_t started_ms;     /* when the current connect/query began */
    int64_t retry_at;       /* CLOSED: when to connect again, if retry_armed */
    int retry_armed;        /* (times are simba_now_ms: any value, even negative) */
    int attempt;            /* failed connects in a row (backoff) */
    simba__mysql_buf sql;      /* the batch being run */
    MYSQL_STMT *ps[SIMBA__MYSQL_NPS]; /* the row statements on this connection (NULL: none yet) */
    int ps_ready;           /* bit k: ps[k] is prepared */
    int ps_text;            /* row statements sent as text on this connection */
    MYSQL_STMT *ps_run;     /* the statement of the PREPARE or EXECUTE in progress */
} simba__mysql_conn;

typedef struct simba__mysql_res {
    char *name;
    size_t len;
    int capacity, weight;
    int orig;               /* index in the op's res[] */
} simba__mysql_res;

typedef struct simba__mysql_job {
    struct simba__mysql_job *next;
    uint64_t op_id;
    int kind;
    int step;
    int attempts;
    int try_only, lease_ms;
    char *tenant, *client, *session, *request;
    int nres;
    simba__mysql_res res[SIMBA_MAX_RESOURCES];     /* sorted by name (lock order) */
    int sorted_of[SIMBA_MAX_RESOURCES];         /* op order -> sorted index */
    uint64_t bell;                              /* the request's bell */
    /* statement indexes of the reads in the batch of the current step */
    int ix_res, ix_ent;
    int settle;             /* the current batch is the one-round-trip block
                               (simba__mysql_sql_settle): its last result says
                               whether it committed */
    int settle_release;     /* ... and it gives our bell back when it commits */
    int settle_call;        /* ... as a CALL of the installed procedure */
    int row;                /* the current batch is the one-statement op on the resource
                               row (simba__mysql_sql_row): its affected rows say whether it took */
    int row_tried;          /* ... and it was sent (once per op: a miss goes the block's way) */
    int unfolded;           /* holds in rows turned into entries by this op's transaction */
    int widen;              /* the queue windows were too short this many times */
    /* what the evaluation decided, kept for the completion */
    simba_reply reply;
    char owner[SIMBA_MAX_SESSION + 1];
    char msg[256];
    simba_holder *holders;
    int nholders;
    int exists;             /* ENQUEUE/POLL: our entry exists after this op */
    int watch_valid;        /* waiting: watch_bell is the entry we wait behind */
    uint64_t watch_bell;
    int watch_res;          /* sorted index of the resource we wait in */
    int watch_multi;        /* ... whose capacity is > 1 */
    int64_t watch_seq;      /* our entry's queue position in res[0] */
    int took_bell;          /* ENQUEUE: our entry has a bell (see max_bells) */
    int release_bell;       /* release our bell after the transaction */
    int bell_released;      /* ... and the batch did */
    int retry;              /* ROLLBACK step: run the op again afterwards */
    int row_held;           /* ENQUEUE: settled by the row's UPDATE (the hold is in the row) */
    int met_queue;          /* RELEASE: other requests' entries were in the queue */
    /* other waiting requests of our session this op saw granted (pushed to
       the core when the op succeeds: simba__mysql_push_grants) */
    char *granted_req[SIMBA__MYSQL_PUSH_MAX];
    int64_t granted_fence[SIMBA__MYSQL_PUSH_MAX];
    int ngranted;
    /* ring keys (simba__mysql_ring_key) of other sessions this op's
       transaction granted in a capacity > 1 queue: rung after the COMMIT */
    uint64_t rings[SIMBA__MYSQL_PUSH_MAX];
    int nrings;
    int ring_next;          /* RING job: the next of its keys (in bells) to ring */
    /* internal jobs: bells to (re)take or release, sessions to sweep */
    uint64_t *bells;
    int nbells;
    simba__mysql_buf list;     /* SWEEP: "(t,s),(t,s)" of the sessions being swept */
} simba__mysql_job;

/* A waiting request of ours and the bell it waits behind. */
typedef struct simba__mysql_watch {
    char *request;
    char *session;          /* the session that owns the entry: a ring's grant is
                               for it only (keyed request ids outlive sessions) */
    char *name;             /* the request's first resource: the core finds
                               handles by it in simba_backend_granted */
    int single;             /* one-resource request: a ring may carry its fence */
    char *tenant;
    uint64_t bell;
    int immediate;          /* rings in a row that came back at once (bell free) */
    int64_t not_before;     /* backoff after immediate rings */
    int multi;              /* capacity > 1: the bell covers one holder of several */
    int64_t seq;            /* single: the entry's queue position (an entry of ours
                               further back cannot be granted before this one) */
    int first;              /* the first of ours in its queue (simba__mysql_watch_marks) */
    int poll_ms;            /* multi: re-poll period, 50 ms doubling to 1 s */
    int64_t poll_at;        /* multi: next re-poll (simba_now_ms) */
} simba__mysql_watch;

typedef struct simba__mysql {
    simba *s;
    simba_allocator alloc;
    /* options */
    char *host, *unix_socket, *user, *password, *database, *prefix;
    char *ssl_key, *ssl_cert, *ssl_ca, *ssl_capath, *ssl_cipher;
    int port, ssl_verify, connect_timeout_ms, create_schema, lock_wait_s, sweep_ms, no_waiter;
    int restart_grace;
    int64_t grace_until_ms; /* server time before which nothing is granted (0: none) */
    int grace_over;         /* the server's clock was past grace_until_ms at this connect:
                               the row statement compares no clock (simba__mysql_sql_row) */
    int64_t srv_start_ms;   /* the server's estimated start at our last connect (server time; 0: none) */
    long lossy_restarts;    /* restarts seen while commits may be lost (the grace applies) */
    long session_restarts;  /* lossy_restarts when the current session was opened */
    int block_semis;        /* separators inside the compound statement of the
                               batch being sent (one statement to the server) */
    int routines;           /* 1: CALL the settle procedures (simba__mysql_sql_settle);
                               0: not installed or not ours to run, on this connection */
    int no_settle;          /* 1: the tables lack empty_seq (a release before it): the two-round-trip
                               transaction for every op, until the next connect */
    int no_row_hold;        /* 1: the tables lack the h_ columns (a release before them): no hold
                               is kept in a resource row, until the next connect */
    int no_prepare;         /* 1: the server would not prepare a row statement: they go as
                               text, until the next connect */
    int ps_arg;             /* the row statement's values bound so far (simba__mysql_arg_*) */
    MYSQL_BIND ps_bind[SIMBA__MYSQL_PS_MAXARGS];   /* ... and where they are */
    unsigned long ps_len[SIMBA__MYSQL_PS_MAXARGS];
    long long ps_num[SIMBA__MYSQL_PS_MAXARGS];
    char ps_bell[32];       /* the bell's name, bound (one bell per row statement) */
    int installing;         /* the setup's second batch, CREATE PROCEDURE, is running */
    uint64_t deploy;        /* hash of database+prefix: makes bells unique per deployment */
    char t_sessions[48], t_resources[48], t_entries[48], t_audit[56];
    /* the main connection and its job queue (head runs) */
    simba__mysql_conn main;
    simba__mysql_job *head, *tail;
    int head_started;       /* the head job's current step is running */
    int queued_ops;         /* core ops (not session ops) in the queue */
    int up;                 /* reported connected to the core */
    int64_t next_sweep;
    uint64_t busy[SIMBA__MYSQL_BUSY_SLOTS]; /* names whose hold is likely an entry
                                               (simba__mysql_busy_note) */
    /* bells we hold (open addressing set of hashes, 0 = empty) */
    uint64_t *mine;
    int mine_cap, mine_n;
    int max_bells;
    /* notifications: the session's notify counter as last seen */
    char notify_session[SIMBA_MAX_SESSION + 1];
    int64_t notify_seen;
    /* the session of the last OPEN: bells and watches are this session's
       only; those of a session the core dropped go at the next OPEN */
    char cur_session[SIMBA_MAX_SESSION + 1];
    int cur_close_sent;     /* the core sent CLOSE for cur_session */
    int retake_needed;
    /* the waiter connection */
    simba__mysql_conn waiter;
    simba__mysql_watch *watches;
    int nwatch, watch_cap, watch_rr;
    int watch_marks_stale;  /* the watches changed: recompute their `first` marks */
    uint64_t waiting_bell;  /* bell of the GET_LOCK in flight (0 = none) */
    char *waiting_req;      /* its request */
    uint64_t ring_held;     /* ring key the waiter connection holds (0 = none) */
    int waiting_rung;       /* the wait in flight is ringable (simba__mysql_sql_ring_wait) */
    int waiting_fence;      /* ... and has ended: its fence read is in flight */
    int64_t waiting_code;   /* the answer of that wait (1, -1, -2) */
    int64_t waited_ms;      /* how long that wait blocked */
    int ring_fallback;      /* a grant came without its ring: re-poll capacity > 1 */
    int ring_refused_told;  /* the WARN about a refused KILL was logged */
    struct simba_mysql_stats stats;
} simba__mysql;

/* One queue entry as read (pointers into the MYSQL_RES, valid until the
   results are freed). */
typedef struct simba__mysql_ent {
    int r;                      /* sorted resource index */
    int64_t seq, fence, newfence;
    int weight;
    const char *request, *session;
    unsigned long reqlen, seslen;
    int64_t expires;            /* -1: no session row */
    int64_t renewed;            /* the session's last OPEN or KEEPALIVE; 0: not
                                   known (no session row, or written by a
                                   client older than the column) */
    int dead, removed, granted;
    int extra;                  /* read past the queue's window (our own entry, the
                                   one right ahead of it, the tail) */
    int ours;                   /* our request id AND our session */
    int foreign;                /* our request id, another session's entry (a keyed
                                   id is the same in every session): never ours */
} simba__mysql_ent;

typedef struct simba__mysql_eval {
    int64_t now_us, now_ms, our_expires;
    int exists[SIMBA_MAX_RESOURCES];
    int capacity[SIMBA_MAX_RESOURCES];
    int64_t counter[SIMBA_MAX_RESOURCES], counter0[SIMBA_MAX_RESOURCES];
    int64_t seq[SIMBA_MAX_RESOURCES];           /* the last queue position given out */
    int win_rows[SIMBA_MAX_RESOURCES];          /* rows the window of resource r read */
    simba__mysql_ent *e;
    int ne;
    int torn;               /* reads that disagree (a change landed between
                               the two statements): unlocked, decide under
                               locks; locked, a resource row was born: again */
    int64_t grace;          /* > 0: ms of restart grace left, no grants now */
    const char *why;        /* SIMBA_EPROTO: the check that failed */
    int row_holds;          /* resource rows read with a hold in them (capacity < 0) */
} simba__mysql_eval;

/* Defined in their sections below, used before. The step functions, one
   per kind of job, each a small switch over the job's phases: */
static void simba__mysql_step_open(simba__mysql *b, simba__mysql_job *j);      /* >>session */
static void simba__mysql_step_keepalive(simba__mysql *b, simba__mysql_job *j); /* >>session */
static void simba__mysql_step_close(simba__mysql *b, simba__mysql_job *j);     /* >>session */
static void simba__mysql_step_sweep(simba__mysql *b, simba__mysql_job *j);     /* >>session */
static void simba__mysql_step_lock(simba__mysql *b, simba__mysql_job *j);      /* >>locks */
static void simba__mysql_step_bells(simba__mysql *b, simba__mysql_job *j);     /* >>wakeups */
/* >>connection */
static void simba__mysql_main_lost(simba__mysql *b, int err, const char *msg);
/* >>locks */
static void simba__mysql_sql_release_bell(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x);
static uint64_t simba__mysql_ring_key(const simba__mysql *b, const char *tenant, const char *session, size_t seslen);
static void simba__mysql_queue_rings(simba__mysql *b, const simba__mysql_job *op);
static void simba__mysql_step_ring(simba__mysql *b, simba__mysql_job *j);
static void simba__mysql_step_prepare(simba__mysql *b, simba__mysql_job *j);
static void simba__mysql_prepare_refused(simba__mysql *b, simba__mysql_job *j);
static void simba__mysql_ring_refused(simba__mysql *b, simba__mysql_job *j);
/* >>wakeups */
static uint64_t simba__mysql_fnv(uint64_t h, const char *s, size_t n);
static uint64_t simba__mysql_bell(const simba__mysql *b, const char *tenant, const char *req, size_t reqlen);
static void simba__mysql_bellname(simba__mysql *b, simba__mysql_buf *x, uint64_t bell);
static int simba__mysql_mine_has(const simba__mysql *b, uint64_t h);
static void simba__mysql_mine_clear(simba__mysql *b);
static void simba__mysql_queue_bell_release_raw(simba__mysql *b, uint64_t bell);
static void simba__mysql_queue_retake(simba__mysql *b);
static void simba__mysql_watch_del(simba__mysql *b, const char *request);
static simba__mysql_watch *simba__mysql_watch_find(simba__mysql *b, const char *request);
static void simba__mysql_after(simba__mysql *b, simba__mysql_job *j, int status);
static int simba__mysql_is_mariadb(simba__mysql *b);
static void simba__mysql_sql_routines(simba__mysql *b, simba__mysql_buf *x);
/* >>vtable */
static void simba__mysql_destroy(void *impl);

/*>>internals.memory: memory, through the desc's allocator */

/* Everything goes through the desc's allocator (the kit's helpers: zero =
   malloc/free); alloc returns zeroed memory. */
static void *simba__mysql_alloc(simba__mysql *b, size_t n) { return simba_allocator_alloc(&b->alloc, n); }

static void simba__mysql_free(simba__mysql *b, void *p) { simba_allocator_free(&b->alloc, p); }

static char *simba__mysql_strndup(simba__mysql *b, const char *s, size_t n) {
    char *p;
    if (!s) return NULL;
    p = (char *)simba__mysql_alloc(b, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static char *simba__mysql_strdup(simba__mysql *b, const char *s) { return simba_allocator_strdup(&b->alloc, s); }

/*>>internals.text: SQL text: a growing buffer, strings as hex literals, numbers read back */

static int simba__mysql_reserve(simba__mysql *b, simba__mysql_buf *x, size_t more) {
    size_t need = x->n + more + 1, cap;
    char *p;
    if (x->oom) return 0;
    if (need <= x->cap) return 1;
    cap = x->cap ? x->cap : 256;
    while (cap < need) cap *= 2;
    p = (char *)simba__mysql_alloc(b, cap);
    if (!p) { x->oom = 1; return 0; }
    if (x->n) memcpy(p, x->p, x->n);
    simba__mysql_free(b, x->p);
    x->p = p;
    x->cap = cap;
    return 1;
}

static void simba__mysql_put(simba__mysql *b, simba__mysql_buf *x, const char *s) {
    size_t n = strlen(s);
    if (!simba__mysql_reserve(b, x, n)) return;
    memcpy(x->p + x->n, s, n);
    x->n += n;
    x->p[x->n] = 0;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void simba__mysql_putf(simba__mysql *b, simba__mysql_buf *x, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) { x->oom = 1; return; } /* only short pieces go here */
    simba__mysql_put(b, x, tmp);
}

/* Every string reaches SQL as a hex literal X'...': no byte of a name (quotes,
   backslashes, %, _, NUL-free binary) can end the literal or change the
   statement, whatever sql_mode (NO_BACKSLASH_ESCAPES, ANSI_QUOTES) says. */
static void simba__mysql_hex(simba__mysql *b, simba__mysql_buf *x, const char *s, size_t n) {
    static const char digits[] = "0123456789abcdef";
    size_t i;
    if (!simba__mysql_reserve(b, x, 2 * n + 3)) return;
    x->p[x->n++] = 'X';
    x->p[x->n++] = '\'';
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        x->p[x->n++] = digits[c >> 4];
        x->p[x->n++] = digits[c & 15];
    }
    x->p[x->n++] = '\'';
    x->p[x->n] = 0;
}

static void simba__mysql_hexs(simba__mysql *b, simba__mysql_buf *x, const char *s) {
    simba__mysql_hex(b, x, s, strlen(s));
}

static void simba__mysql_buf_clear(simba__mysql_buf *x) {
    x->n = 0;
    x->oom = 0;
    if (x->p) x->p[0] = 0;
}

static void simba__mysql_buf_free(simba__mysql *b, simba__mysql_buf *x) {
    simba__mysql_free(b, x->p);
    x->p = NULL;
    x->n = x->cap = 0;
    x->oom = 0;
}

static void simba__mysql_where_tenant(simba__mysql *b, simba__mysql_buf *x, const simba__mysql_job *j) {
    simba__mysql_put(b, x, " WHERE tenant=");
    simba__mysql_hexs(b, x, j->tenant);
}

/* The values of a statement that may be prepared (the row statements):
   TEXT writes each into the text (X'..', a number, a quoted bell name);
   MARKS writes a '?' for each (the text to prepare); BIND binds each to
   the next '?' in b->ps_bind (the text written is MARKS's, unused). One
   builder makes all three, so the prepared statement and its text form
   are the same statement. */
enum { SIMBA__MYSQL_ARGS_TEXT = 0, SIMBA__MYSQL_ARGS_MARKS, SIMBA__MYSQL_ARGS_BIND };
typedef struct simba__mysql_args {
    simba__mysql *b;
    simba__mysql_buf *x;
    int mode;
} simba__mysql_args;

/* The next '?'. BIND: its MYSQL_BIND in b->ps_bind, zeroed (NULL past the
   room there: the statement is marked out of memory and never sent). */
static MYSQL_BIND *simba__mysql_arg_next(simba__mysql_args *a) {
    simba__mysql *b = a->b;
    simba__mysql_put(b, a->x, "?");
    if (a->mode != SIMBA__MYSQL_ARGS_BIND) return NULL;
    if (b->ps_arg >= SIMBA__MYSQL_PS_MAXARGS) { a->x->oom = 1; return NULL; }
    memset(&b->ps_bind[b->ps_arg], 0, sizeof b->ps_bind[b->ps_arg]);
    return &b->ps_bind[b->ps_arg++];
}

/* n bytes at s (kept by the caller until the statement has run), bound as
   type: BLOB for names and ids (compared byte-wise), STRING for a bell. */
static void simba__mysql_arg_bind_bytes(simba__mysql_args *a, enum enum_field_types type, const char *s, size_t n) {
    MYSQL_BIND *m = simba__mysql_arg_next(a);
    unsigned long *len;
    if (!m) return;
    len = &a->b->ps_len[m - a->b->ps_bind];
    *len = (unsigned long)n;
    m->buffer_type = type;
    m->buffer = (void *)(uintptr_t)s;
    m->buffer_length = *len;
    m->length = len;
}

static void simba__mysql_arg_bytes(simba__mysql_args *a, const char *s, size_t n) {
    if (a->mode == SIMBA__MYSQL_ARGS_TEXT) simba__mysql_hex(a->b, a->x, s, n);
    else simba__mysql_arg_bind_bytes(a, MYSQL_TYPE_BLOB, s, n);
}

static void simba__mysql_arg_num(simba__mysql_args *a, long long v) {
    MYSQL_BIND *m;
    long long *at;
    if (a->mode == SIMBA__MYSQL_ARGS_TEXT) { simba__mysql_putf(a->b, a->x, "%lld", v); return; }
    if (!(m = simba__mysql_arg_next(a))) return;
    at = &a->b->ps_num[m - a->b->ps_bind];
    *at = v;
    m->buffer_type = MYSQL_TYPE_LONGLONG;
    m->buffer = at;
}

/* A bell's lock name, "simba:" and 16 lowercase hex digits, NUL-terminated
   in out (SIMBA__MYSQL_BELL_LEN + 1 bytes). */
enum { SIMBA__MYSQL_BELL_LEN = 22 };
static void simba__mysql_bell_text(char *out, uint64_t bell) {
    static const char digits[] = "0123456789abcdef";
    int i;
    memcpy(out, "simba:", 6);
    for (i = 0; i < 16; i++) out[6 + i] = digits[(bell >> (60 - 4 * i)) & 15];
    out[SIMBA__MYSQL_BELL_LEN] = 0;
}

static void simba__mysql_arg_bell(simba__mysql_args *a, uint64_t bell) {
    simba__mysql *b = a->b;
    if (a->mode == SIMBA__MYSQL_ARGS_TEXT) { simba__mysql_bellname(b, a->x, bell); return; }
    simba__mysql_bell_text(b->ps_bell, bell);
    simba__mysql_arg_bind_bytes(a, MYSQL_TYPE_STRING, b->ps_bell, SIMBA__MYSQL_BELL_LEN);
}

static int simba__mysql_int64(const char *s, unsigned long len, int64_t *out) {
    int64_t v = 0;
    unsigned long i = 0;
    int neg = 0;
    if (!s || len == 0 || len > 20) return 0;
    if (s[0] == '-') { neg = 1; i = 1; if (len == 1) return 0; }
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        if (v > (INT64_MAX - (s[i] - '0')) / 10) return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

static int simba__mysql_int(const char *s, unsigned long len, int *out) {
    int64_t v;
    if (!simba__mysql_int64(s, len, &v) || v < INT32_MIN || v > INT32_MAX) return 0;
    *out = (int)v;
    return 1;
}

/* Is `session` the one of the last OPEN (or is there none yet)? Bells and
   watches belong to the current session only. */
static int simba__mysql_is_current(const simba__mysql *b, const char *session) {
    return !b->cur_session[0] || strcmp(b->cur_session, session) == 0;
}

/*>>internals.queue: the job queue */

static void simba__mysql_job_free(simba__mysql *b, simba__mysql_job *j) {
    int i;
    if (!j) return;
    simba__mysql_free(b, j->tenant);
    simba__mysql_free(b, j->client);
    simba__mysql_free(b, j->session);
    simba__mysql_free(b, j->request);
    for (i = 0; i < j->nres; i++) simba__mysql_free(b, j->res[i].name);
    for (i = 0; i < j->ngranted; i++) simba__mysql_free(b, j->granted_req[i]);
    simba__mysql_free(b, j->holders);
    simba__mysql_free(b, j->bells);
    simba__mysql_buf_free(b, &j->list);
    simba__mysql_free(b, j);
}

static void simba__mysql_push(simba__mysql *b, simba__mysql_job *j, int front) {
    j->next = NULL;
    if (front && b->head && b->head_started) {
        /* never in front of a job whose transaction is open: right behind it */
        j->next = b->head->next;
        b->head->next = j;
        if (b->tail == b->head) b->tail = j;
    } else if (front) {
        j->next = b->head;
        b->head = j;
        if (!b->tail) b->tail = j;
    } else {
        if (b->tail) b->tail->next = j;
        else b->head = j;
        b->tail = j;
    }
}

/* A RELEASE passes the POLLs queued at the tail: a POLL only reads, and a
   release that frees a lock matters more to the waiters (of every client)
   than this client's re-checks, which would otherwise run first, one round
   trip each. It never passes a job that writes or has started (an ENQUEUE
   of the same request must come first), nor a POLL of its own request. */
static void simba__mysql_push_release(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_job *p, *after = NULL;
    for (p = b->head; p; p = p->next)
        if (p->kind != SIMBA_OP_POLL || (p == b->head && b->head_started) || strcmp(p->request, j->request) == 0)
            after = p;
    if (!after) { simba__mysql_push(b, j, 1); return; }
    j->next = after->next;
    after->next = j;
    if (b->tail == after) b->tail = j;
}

static simba__mysql_job *simba__mysql_pop(simba__mysql *b) {
    simba__mysql_job *j = b->head;
    if (!j) return NULL;
    if (j->kind >= SIMBA_OP_ENQUEUE && j->kind <= SIMBA_OP_DELETE && b->queued_ops > 0) b->queued_ops--;
    b->head = j->next;
    if (!b->head) b->tail = NULL;
    b->head_started = 0;
    return j;
}

static simba__mysql_job *simba__mysql_job_new(simba__mysql *b, int kind) {
    simba__mysql_job *j = (simba__mysql_job *)simba__mysql_alloc(b, sizeof *j);
    if (!j) return NULL;
    memset(j, 0, sizeof *j);
    j->kind = kind;
    j->ix_res = j->ix_ent = -1;
    return j;
}

/* Copy an op into a job: strings are the core's only during submit(). */
static simba__mysql_job *simba__mysql_job_from_op(simba__mysql *b, const simba_op *op, int *err) {
    simba__mysql_job *j = simba__mysql_job_new(b, (int)op->kind);
    int i, k;
    *err = SIMBA_ENOMEM;
    if (!j) return NULL;
    j->op_id = op->id;
    j->try_only = op->try_only;
    j->lease_ms = op->lease_ms;
    j->tenant = simba__mysql_strdup(b, op->tenant ? op->tenant : "");
    j->client = simba__mysql_strdup(b, op->client ? op->client : "");
    j->session = simba__mysql_strdup(b, op->session ? op->session : "");
    j->request = simba__mysql_strdup(b, op->request ? op->request : "");
    if (!j->tenant || !j->client || !j->session || !j->request) goto fail;
    for (i = 0; i < op->nres; i++) {
        const char *name = op->res[i].name;
        size_t len = strlen(name);
        simba__mysql_res r;
        r.name = simba__mysql_strndup(b, name, len);
        if (!r.name) goto fail;
        r.len = len;
        r.capacity = op->res[i].capacity;
        r.weight = op->res[i].weight;
        r.orig = i;
        /* insertion sort by bytes: the order InnoDB's VARBINARY index uses,
           so every transaction locks resource rows in the same order */
        for (k = j->nres; k > 0; k--) {
            simba__mysql_res *q = &j->res[k - 1];
            size_t m = q->len < len ? q->len : len;
            int c = memcmp(q->name, name, m);
            if (c < 0 || (c == 0 && q->len < len)) break;
            j->res[k] = *q;
        }
        j->res[k] = r;
        j->nres++;
    }
    for (i = 0; i < j->nres; i++) j->sorted_of[j->res[i].orig] = i;
    j->bell = simba__mysql_bell(b, j->tenant, j->request, strlen(j->request));
    *err = SIMBA_OK;
    return j;
fail:
    simba__mysql_job_free(b, j);
    return NULL;
}

/*>>connection: connect, setup, reconnect with backoff; the job queue runs on the main connection */

/*>>connection.io: the connector's non-blocking calls: connect, query, store results, one step of I/O */

static void simba__mysql_free_results(simba__mysql_conn *c) {
    int i;
    for (i = 0; i < c->nres; i++) if (c->res[i]) mysql_free_result(c->res[i]);
    c->nres = 0;
}

/* Rows the first statement of the last batch changed (0 without one). */
static uint64_t simba__mysql_affected(const simba__mysql_conn *c) { return c->nres >= 1 ? c->affected[0] : 0; }

/* Drop a connection at once, whatever it was doing: mariadb_cancel makes every
   further read/write fail, so mysql_close cannot block on a dead or busy
   socket. The server rolls back the open transaction and releases the user
   locks of the connection when it sees the socket close. */
static void simba__mysql_conn_drop(simba__mysql_conn *c) {
    int k;
    simba__mysql_free_results(c);
    if (c->m) {
        mariadb_cancel(c->m);
        mysql_close(c->m);
        c->m = NULL;
    }
    /* after mysql_close, which detaches them: their close sends nothing */
    for (k = 0; k < SIMBA__MYSQL_NPS; k++) {
        if (c->ps[k]) mysql_stmt_close(c->ps[k]);
        c->ps[k] = NULL;
    }
    c->ps_ready = 0;
    c->ps_text = 0;
    c->ps_run = NULL;
    c->state = SIMBA__MYSQL_CLOSED;
    c->q = SIMBA__MYSQL_Q_NONE;
    c->wait = 0;
    c->done = 0;
}

static void simba__mysql_set_error(simba__mysql_conn *c, unsigned err, const char *msg) {
    c->err = err ? err : CR_UNKNOWN_ERROR;
    snprintf(c->errmsg, sizeof c->errmsg, "%s", msg && *msg ? msg : "unknown MySQL client error");
    c->done = 1;
    c->q = SIMBA__MYSQL_Q_NONE;
    c->wait = 0;
}

/* c's call finished without error: nothing more to run. */
static void simba__mysql_conn_done(simba__mysql_conn *c) {
    c->q = SIMBA__MYSQL_Q_NONE;
    c->wait = 0;
    c->err = 0;
    c->done = 1;
}

/* The connector's _start (ev < 0) or _cont call of each phase. Each returns
   the MYSQL_WAIT_* it suspended on, or 0 with c->q set to the next phase
   (SIMBA__MYSQL_Q_NONE: finished, see c->done and c->err). */
static int simba__mysql_call_connect(simba__mysql *b, simba__mysql_conn *c, int ev) {
    MYSQL *ret = NULL;
    int st;
    if (ev < 0)
        st = mysql_real_connect_start(&ret, c->m, b->unix_socket ? NULL : b->host, b->user,
                                      b->password, b->database,
                                      (unsigned)(b->unix_socket ? 0 : b->port), b->unix_socket,
                                      CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS | CLIENT_FOUND_ROWS);
    else
        st = mysql_real_connect_cont(&ret, c->m, ev);
    if (st) return st;
    if (!ret) simba__mysql_set_error(c, mysql_errno(c->m), mysql_error(c->m));
    else simba__mysql_conn_done(c);
    return 0;
}
static int simba__mysql_call_query(simba__mysql_conn *c, int ev) {
    int r = 0, st;
    if (ev < 0) st = mysql_real_query_start(&r, c->m, c->sql.p, (unsigned long)c->sql.n);
    else st = mysql_real_query_cont(&r, c->m, ev);
    if (st) return st;
    if (r) simba__mysql_set_error(c, mysql_errno(c->m), mysql_error(c->m));
    else c->q = SIMBA__MYSQL_Q_STORE;
    return 0;
}
static int simba__mysql_call_store(simba__mysql_conn *c, int ev) {
    MYSQL_RES *res = NULL;
    int st;
    if (ev < 0) st = mysql_store_result_start(&res, c->m);
    else st = mysql_store_result_cont(&res, c->m, ev);
    if (st) return st;
    if (!res && mysql_field_count(c->m) != 0) {
        simba__mysql_set_error(c, mysql_errno(c->m), mysql_error(c->m));
        return 0;
    }
    if (c->nres < SIMBA__MYSQL_MAXRES) {
        c->res[c->nres] = res;
        c->affected[c->nres] = res ? 0 : (uint64_t)mysql_affected_rows(c->m);
        c->insert_id[c->nres] = res ? 0 : (uint64_t)mysql_insert_id(c->m);
        c->nres++;
    } else if (res) {
        mysql_free_result(res);
    }
    if (mysql_more_results(c->m)) c->q = SIMBA__MYSQL_Q_NEXT;
    else simba__mysql_conn_done(c);
    return 0;
}
/* A prepared statement's PREPARE, then each EXECUTE (an UPDATE: no rows,
   its affected count and LAST_INSERT_ID kept as a text batch's first
   statement's are). */
static void simba__mysql_stmt_error(simba__mysql_conn *c) {
    simba__mysql_set_error(c, mysql_stmt_errno(c->ps_run), mysql_stmt_error(c->ps_run));
}
static int simba__mysql_call_prepare(simba__mysql_conn *c, int ev) {
    int r = 0, st;
    if (ev < 0) st = mysql_stmt_prepare_start(&r, c->ps_run, c->sql.p, (unsigned long)c->sql.n);
    else st = mysql_stmt_prepare_cont(&r, c->ps_run, ev);
    if (st) return st;
    if (r) simba__mysql_stmt_error(c);
    else simba__mysql_conn_done(c);
    return 0;
}
static int simba__mysql_call_execute(simba__mysql_conn *c, int ev) {
    int r = 0, st;
    if (ev < 0) st = mysql_stmt_execute_start(&r, c->ps_run);
    else st = mysql_stmt_execute_cont(&r, c->ps_run, ev);
    if (st) return st;
    if (r) {
        simba__mysql_stmt_error(c);
        return 0;
    }
    c->res[0] = NULL;
    c->affected[0] = (uint64_t)mysql_stmt_affected_rows(c->ps_run);
    c->insert_id[0] = (uint64_t)mysql_stmt_insert_id(c->ps_run);
    c->nres = 1;
    simba__mysql_conn_done(c);
    return 0;
}
static int simba__mysql_call_next(simba__mysql_conn *c, int ev) {
    int r = 0, st;
    if (ev < 0) st = mysql_next_result_start(&r, c->m);
    else st = mysql_next_result_cont(&r, c->m, ev);
    if (st) return st;
    if (r > 0) simba__mysql_set_error(c, mysql_errno(c->m), mysql_error(c->m));
    else if (r < 0) simba__mysql_conn_done(c);
    else c->q = SIMBA__MYSQL_Q_STORE;
    return 0;
}

/* Run the suspended async call on, as far as it goes without blocking.
   ev < 0 starts the current step; otherwise ev holds the MYSQL_WAIT_* events
   that happened. Leaves c->wait set when suspended, c->done when finished. */
static void simba__mysql_conn_step(simba__mysql *b, simba__mysql_conn *c, int ev) {
    for (;;) {
        int st;
        switch (c->q) {
        case SIMBA__MYSQL_Q_CONNECT: st = simba__mysql_call_connect(b, c, ev); break;
        case SIMBA__MYSQL_Q_QUERY: st = simba__mysql_call_query(c, ev); break;
        case SIMBA__MYSQL_Q_STORE: st = simba__mysql_call_store(c, ev); break;
        case SIMBA__MYSQL_Q_NEXT: st = simba__mysql_call_next(c, ev); break;
        case SIMBA__MYSQL_Q_PREPARE: st = simba__mysql_call_prepare(c, ev); break;
        case SIMBA__MYSQL_Q_EXECUTE: st = simba__mysql_call_execute(c, ev); break;
        default: return;
        }
        if (st) {
            /* suspended: remember what it waits for */
            c->wait = st;
            if (st & MYSQL_WAIT_TIMEOUT)
                c->wait_until = simba_now_ms(b->s) + (int64_t)mysql_get_timeout_value_ms(c->m);
            return;
        }
        if (c->q == SIMBA__MYSQL_Q_NONE) return; /* finished or failed */
        ev = -1;                                  /* start the next phase's call */
    }
}

/* Start phase q (QUERY: the batch in c->sql; PREPARE: c->sql into
   statement ps; EXECUTE: ps with the values bound to it). */
static void simba__mysql_conn_start(simba__mysql *b, simba__mysql_conn *c, int q, MYSQL_STMT *ps) {
    simba__mysql_free_results(c);
    c->done = 0;
    c->err = 0;
    c->errmsg[0] = 0;
    c->started_ms = simba_now_ms(b->s);
    c->ps_run = ps;
    if (q != SIMBA__MYSQL_Q_EXECUTE && c->sql.oom) {
        simba__mysql_set_error(c, CR_OUT_OF_MEMORY, "out of memory building a query");
        return;
    }
    c->q = q;
    simba__mysql_conn_step(b, c, -1);
}

static void simba__mysql_conn_query(simba__mysql *b, simba__mysql_conn *c) {
    simba__mysql_conn_start(b, c, SIMBA__MYSQL_Q_QUERY, NULL);
}

/* Start connecting c (non-blocking). */
/* SIGPIPE. Connector/C sends with MSG_NOSIGNAL (and its TLS goes through
   the same send), so its writes to a connection the server closed fail with
   EPIPE and raise no signal. But its library init (run by the first
   mysql_init of the process) sets SIGPIPE to SIG_IGN for the whole process,
   which is not a library's call to make. So the host's disposition is put
   back around mysql_init: simba leaves signals as it found them, and with
   SIGPIPE at its default nothing of simba raises it (t_no_sigpipe). */
static MYSQL *simba__mysql_mysql_init(void) {
    MYSQL *m;
#if defined(SIGPIPE) && (defined(_POSIX_C_SOURCE) || defined(_XOPEN_SOURCE) || defined(_GNU_SOURCE))
    struct sigaction old;
    int saved = sigaction(SIGPIPE, NULL, &old) == 0;
    m = mysql_init(NULL);
    if (saved) (void)sigaction(SIGPIPE, &old, NULL);
#elif defined(SIGPIPE)
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    m = mysql_init(NULL);
    if (old != SIG_ERR) (void)signal(SIGPIPE, old);
#else
    m = mysql_init(NULL);
#endif
    return m;
}

static void simba__mysql_conn_open(simba__mysql *b, simba__mysql_conn *c) {
    unsigned int timeout_s;
    my_bool on = 1;
    simba__mysql_conn_drop(c);
    c->m = simba__mysql_mysql_init();
    c->done = 0;
    c->err = 0;
    c->started_ms = simba_now_ms(b->s);
    if (!c->m) { c->state = SIMBA__MYSQL_CONNECTING; simba__mysql_set_error(c, CR_OUT_OF_MEMORY, "mysql_init failed"); return; }
    mysql_options(c->m, MYSQL_OPT_NONBLOCK, 0);
    timeout_s = (unsigned)((b->connect_timeout_ms + 999) / 1000);
    mysql_options(c->m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout_s);
    mysql_options(c->m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    {
        /* simba never loads files: a hostile server must not be able to ask */
        unsigned int off = 0; /* the connector reads an unsigned int here */
        mysql_options(c->m, MYSQL_OPT_LOCAL_INFILE, &off);
    }
    if (b->ssl_key || b->ssl_cert || b->ssl_ca || b->ssl_capath || b->ssl_cipher)
        mysql_ssl_set(c->m, b->ssl_key, b->ssl_cert, b->ssl_ca, b->ssl_capath, b->ssl_cipher);
    if (b->ssl_verify) mysql_options(c->m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
    (void)on;
    c->state = SIMBA__MYSQL_CONNECTING;
    c->q = SIMBA__MYSQL_Q_CONNECT;
    simba__mysql_conn_step(b, c, -1);
}

static int simba__mysql_conn_fd(const simba__mysql_conn *c) {
    if (!c->m || c->state == SIMBA__MYSQL_CLOSED) return -1;
    return (int)mysql_get_socket(c->m);
}

/* poll() events wanted by c: what the suspended call waits for, or POLLIN
   while idle (so a server that closes the connection is noticed at once). */
static short simba__mysql_conn_events(const simba__mysql_conn *c) {
    short e = 0;
    if (c->q != SIMBA__MYSQL_Q_NONE) {
        if (c->wait & MYSQL_WAIT_READ) e |= POLLIN;
        if (c->wait & MYSQL_WAIT_WRITE) e |= POLLOUT;
        if (c->wait & MYSQL_WAIT_EXCEPT) e |= POLLPRI;
    } else if (c->state == SIMBA__MYSQL_READY) {
        e = POLLIN;
    }
    return e;
}

/* What poll() said about c's fd: revents, or -1 if c's fd is not in fds. */
static int simba__mysql_revents(const simba__mysql_conn *c, const struct pollfd *fds, int nfds) {
    int fd = simba__mysql_conn_fd(c), i;
    if (fd < 0) return -1;
    if (!fds) {
        /* "try every fd": ask the kernel ourselves (zero timeout) */
        struct pollfd p;
        p.fd = fd;
        p.events = simba__mysql_conn_events(c);
        p.revents = 0;
        if (!p.events) return 0;
        if (poll(&p, 1, 0) < 0) return 0;
        return p.revents;
    }
    for (i = 0; i < nfds; i++) if (fds[i].fd == fd) return fds[i].revents;
    return -1;
}

/* Let c make progress on what poll() reported. Returns 1 if the idle
   connection turned out to be closed by the server. */
static int simba__mysql_conn_io(simba__mysql *b, simba__mysql_conn *c, int revents) {
    if (c->q != SIMBA__MYSQL_Q_NONE && c->wait) {
        int ev = 0;
        if (revents > 0) {
            if (revents & (POLLIN | POLLHUP | POLLERR)) ev |= MYSQL_WAIT_READ;
            if (revents & (POLLOUT | POLLHUP | POLLERR)) ev |= MYSQL_WAIT_WRITE;
            if (revents & POLLPRI) ev |= MYSQL_WAIT_EXCEPT;
            ev &= c->wait | MYSQL_WAIT_READ;
        }
        if ((c->wait & MYSQL_WAIT_TIMEOUT) && simba_now_ms(b->s) >= c->wait_until) ev |= MYSQL_WAIT_TIMEOUT;
        if (ev) simba__mysql_conn_step(b, c, ev);
        return 0;
    }
    /* idle and readable: the server sent an unsolicited error packet (KILL,
       shutdown) or closed the socket. Either way the session is gone. */
    if (c->state == SIMBA__MYSQL_READY && c->q == SIMBA__MYSQL_Q_NONE && revents > 0 &&
        (revents & (POLLIN | POLLHUP | POLLERR)))
        return 1;
    return 0;
}

/*>>connection.connect: what an error means, the setup after connecting, the restart grace */

/* Is this MySQL error a lost connection (as opposed to an SQL error)? */
static int simba__mysql_is_conn_error(unsigned e) {
    return e == CR_SERVER_GONE_ERROR || e == CR_SERVER_LOST || e == CR_CONNECTION_ERROR ||
           e == CR_CONN_HOST_ERROR || e == CR_UNKNOWN_HOST || e == CR_COMMANDS_OUT_OF_SYNC ||
           e == CR_SERVER_LOST_EXTENDED || e == CR_ERR_NET_READ || e == CR_ERR_NET_WRITE ||
           e == ER_CONNECTION_KILLED || e == ER_SERVER_SHUTDOWN || e == ER_QUERY_INTERRUPTED ||
           e == CR_OUT_OF_MEMORY || e == ER_NET_READ_ERROR || e == ER_NET_ERROR_ON_WRITE ||
           e == ER_NET_READ_INTERRUPTED || e == ER_NET_WRITE_INTERRUPTED || e == 4031 /* MySQL 8: client disconnected */;
}

static int simba__mysql_is_auth_error(unsigned e) {
    return e == ER_ACCESS_DENIED_ERROR || e == ER_DBACCESS_DENIED_ERROR ||
           e == ER_TABLEACCESS_DENIED_ERROR || e == ER_COLUMNACCESS_DENIED_ERROR ||
           e == ER_SPECIFIC_ACCESS_DENIED_ERROR || e == ER_PASSWORD_NO_MATCH ||
           e == ER_ACCESS_DENIED_NO_PASSWORD_ERROR;
}

/* A database that does not exist is the configuration's mistake, not a
   refused password. */
static int simba__mysql_status_of(unsigned e) {
    if (e == ER_BAD_DB_ERROR) return SIMBA_EINVAL;
    if (simba__mysql_is_auth_error(e)) return SIMBA_EAUTH;
    if (simba__mysql_is_conn_error(e)) return SIMBA_EDISCONNECTED;
    return SIMBA_EBACKEND;
}

/* The words of a MySQL error: "<what>MySQL error <n>: <server's words>",
   and what to do where that is known. */
static void simba__mysql_error_words(char *out, size_t cap, const char *what, unsigned e, const char *msg) {
    const char *hint = e == ER_NO_SUCH_TABLE ? " (no simba tables: run simba_mysql.sql in the database, or connect "
                                               "with create_schema=1)"
                       : e == ER_BAD_DB_ERROR ? " (the database does not exist: create it, or name another)"
                       : e == ER_BAD_FIELD_ERROR ? " (old simba tables: upgrade them: run simba_mysql.sql, or connect "
                                                   "with create_schema=1)"
                       : "";
    snprintf(out, cap, "%sMySQL error %u: %.120s%s", what, e, msg, hint);
}

static void simba__mysql_setup_sql(simba__mysql *b, simba__mysql_buf *x, int main_conn) {
    simba__mysql_buf_clear(x);
    /* autocommit=1 whatever the server's default: a lone statement (a
       KEEPALIVE, the hold in the row's UPDATE) must be committed when it
       answers, or its renewal stays invisible to the other clients. UTC
       before any time is read. */
    simba__mysql_put(b, x, "SET SESSION time_zone='+00:00', SESSION autocommit=1");
    if (main_conn) {
        simba__mysql_putf(b, x, ", SESSION innodb_lock_wait_timeout=%d;\n", b->lock_wait_s);
        /* results 1 and 2: what the restart grace needs (simba__mysql_grace) */
        simba__mysql_put(b, x, "SELECT @@GLOBAL.innodb_flush_log_at_trx_commit, " SIMBA__MYSQL_NOW_MS ";\n"
                            "SHOW GLOBAL STATUS LIKE 'Uptime'");
        /* READ COMMITTED: no gap locks, so the only locks simba takes are the
           resource rows (in sorted order) and the entries it writes */
        simba__mysql_put(b, x, ";\nSET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
        if (b->create_schema) {
            char ddl[8192];
            int n = simba_mysql_schema(b->prefix, ddl, sizeof ddl);
            if (n > 0 && (size_t)n < sizeof ddl) {
                ddl[n - 2] = 0; /* drop the last ";\n" */
                simba__mysql_put(b, x, ";\n");
                simba__mysql_put(b, x, ddl);
            } else {
                x->oom = 1;
            }
        }
        /* the last result: the latest expiry and the oldest renewal of the
           tenant's live sessions (simba__mysql_grace) */
        if (b->restart_grace >= 0) {
            simba__mysql_putf(b, x, ";\nSELECT COALESCE(MAX(expires_ms),0), COALESCE(MIN(renewed_ms),0) FROM %s"
                              " WHERE tenant=", b->t_sessions);
            simba__mysql_hexs(b, x, simba_tenant(b->s));
            simba__mysql_put(b, x, " AND expires_ms > " SIMBA__MYSQL_NOW_MS);
        }
    }
}

/* A restart that may have lost commits ends the session opened before it.
   The crash may have lost the grant of a hold we still believe in, or the
   release of one we let go: the session row survived, so renewing it would
   keep a belief the server no longer backs (two holders once the grace
   ends) or a ghost hold nobody believes in (the lock stuck while we run).
   So the next KEEPALIVE of that session answers SIMBA_ESESSION without
   renewing it: the core reports every hold LOST (within ttl of its last
   keepalive before the crash, so before the grace ends: ttl < lease), opens
   a new session and CLOSEs the old one, which takes its entries with it.
   The estimated start (now - uptime, uptime whole seconds rounded down)
   moves by less than a second between connects to one server run, so a
   move of more than SIMBA__MYSQL_RESTART_SLACK_MS is a restart; a server
   that died within that time of its start is not told from the run before
   (it was inside its own grace then: it granted nothing). Unknown uptime
   counts as a restart, like the grace counts it as a fresh start. */
#define SIMBA__MYSQL_RESTART_SLACK_MS 1250
static void simba__mysql_note_restart(simba__mysql *b, int64_t now_ms, int64_t uptime, int lossy) {
    int64_t start;
    if (now_ms <= 0) return;
    start = uptime >= 0 ? now_ms - uptime * 1000 : now_ms;
    if (lossy && b->srv_start_ms > 0 && start > b->srv_start_ms + SIMBA__MYSQL_RESTART_SLACK_MS) {
        b->lossy_restarts++;
        simba_backend_log(b->s, SIMBA_LOG_WARN, "simba_mysql: the server restarted (%lld s ago) and may have lost "
                          "commits: the session from before ends (its holds LOST)", (long long)uptime);
    }
    b->srv_start_ms = start;
}

/* The current session was opened before the last lossy restart. */
static int simba__mysql_session_retired(const simba__mysql *b) {
    return b->session_restarts != b->lossy_restarts;
}

/* The restart grace. InnoDB keeps what it committed, so normally no grace
   is needed. But a server that may lose its last commits in a crash
   (innodb_flush_log_at_trx_commit != 1 and the OS goes down) could forget a
   grant whose holder still believes it holds. So, like the Redis and mem
   backends after a data loss, grant nothing until one lease after the
   server started: every holder that could have been forgotten has given up
   by then (its local deadline is at most one lease after its last confirmed
   keepalive, which was before the crash: a keepalive after the restart does
   not renew a session from before it, simba__mysql_note_restart). Uptime is
   whole seconds, rounded down, so the estimated start is never earlier than
   the real one. A server
   restart always breaks our connection, so reading it at connect is enough.
   "One lease" is ours, and another client of the tenant may have a longer
   one: the grace also runs until the latest session expiry of the tenant
   the server has, which is past the deadline of every holder whose last
   keepalive it kept (a client's deadline is its send time + ttl, the
   server's expiry its receive time + ttl + transition), and of one whose
   last keepalives the crash lost if they span less than its transition
   (t_restart_grace_longest_lease). Only sessions renewed before the server
   started can have lost keepalives: when every live session of the tenant
   was renewed since (a reconnect after a KILL or a network blip, the server
   up for longer than their leases), nothing extends the grace
   (t_reconnect_without_restart_no_grace). The estimated start is not earlier
   than the real one, so a session renewed before the real start is counted;
   unknown uptime counts every live session. */
static void simba__mysql_grace(simba__mysql *b, simba__mysql_conn *c) {
    int64_t flush = -1, now_ms = 0, uptime = -1, latest = 0, oldest_renewal = 0, start;
    MYSQL_RES *last = c->nres >= 4 ? c->res[c->nres - 1] : NULL;   /* the tenant's live sessions */
    int on;
    MYSQL_ROW row;
    unsigned long *len;
    if (c->nres >= 2 && c->res[1] && mysql_num_fields(c->res[1]) == 2 && (row = mysql_fetch_row(c->res[1])) &&
        (len = mysql_fetch_lengths(c->res[1])) && row[0] && row[1]) {
        if (!simba__mysql_int64(row[0], len[0], &flush)) flush = -1;
        if (!simba__mysql_int64(row[1], len[1], &now_ms)) now_ms = 0;
    }
    if (c->nres >= 3 && c->res[2] && mysql_num_fields(c->res[2]) == 2 && (row = mysql_fetch_row(c->res[2])) &&
        (len = mysql_fetch_lengths(c->res[2])) && row[1] && !simba__mysql_int64(row[1], len[1], &uptime))
        uptime = -1;
    if (last && mysql_num_fields(last) == 2 && (row = mysql_fetch_row(last)) && (len = mysql_fetch_lengths(last)) &&
        row[0] && row[1] &&
        (!simba__mysql_int64(row[0], len[0], &latest) || !simba__mysql_int64(row[1], len[1], &oldest_renewal)))
        latest = 0;
    on = b->restart_grace > 0 || (b->restart_grace == 0 && flush != 1);
    simba__mysql_note_restart(b, now_ms, uptime, on);
    b->grace_until_ms = 0;
    b->grace_over = 1;
    if (!on || now_ms <= 0) return;
    /* unknown uptime: be safe, count the server as just started */
    start = now_ms - (uptime >= 0 ? uptime * 1000 : 0);
    b->grace_until_ms = start + simba_lease_ms(b->s);
    if (oldest_renewal < start && latest > b->grace_until_ms) b->grace_until_ms = latest;
    b->grace_over = b->grace_until_ms <= now_ms;
    if (b->grace_until_ms > now_ms)
        simba_backend_log(b->s, SIMBA_LOG_INFO, "simba_mysql: server started %lld s ago: no grants for %lld ms",
                          (long long)uptime, (long long)(b->grace_until_ms - now_ms));
}

/*>>connection.queue: the job queue of the main connection: send, step, complete, roll back */

static void simba__mysql_send(simba__mysql *b) {
    b->stats.batches++;
    {
        /* statements: count the separators we put between them */
        size_t i;
        uint64_t n = 1;
        const simba__mysql_buf *x = &b->main.sql;
        for (i = 0; i < x->n; i++) if (x->p[i] == ';' && i + 1 < x->n) n++;
        b->stats.statements += n - (uint64_t)b->block_semis;
        b->block_semis = 0;
    }
    simba__mysql_conn_query(b, &b->main);
}

/* Set j's next phase and send the batch built for it in b->main.sql. */
static void simba__mysql_send_step(simba__mysql *b, simba__mysql_job *j, int step) {
    j->step = step;
    simba__mysql_send(b);
}

static void simba__mysql_complete(simba__mysql *b, simba__mysql_job *j, int status, const char *msg) {
    simba_reply rep;
    if (j->kind >= SIMBA__MYSQL_JOB_BELLS_RELEASE) return; /* internal */
    simba_backend_log(b->s, SIMBA_LOG_DEBUG, "simba_mysql: op %d on '%s' -> %s granted %d ahead %d recheck %d%s%s",
                      j->kind, j->nres ? j->res[j->sorted_of[0]].name : "", simba_strerror(status),
                      j->reply.granted, j->reply.ahead, j->reply.recheck_ms, msg && *msg ? ": " : "", msg ? msg : "");
    if (status != SIMBA_OK && status != SIMBA_ENOTFOUND && status != SIMBA_EKEYBUSY) b->stats.last_error = status;
    rep = j->reply;
    rep.id = j->op_id;
    rep.status = status;
    rep.message = msg && *msg ? msg : NULL;
    if (status == SIMBA_OK) {
        rep.owner = j->owner[0] ? j->owner : NULL;
        rep.entries = j->holders;
        rep.nentries = j->nholders;
    } else {
        memset(rep.fence, 0, sizeof rep.fence);
        rep.granted = 0;
        rep.owner = NULL;
        rep.entries = NULL;
        rep.nentries = 0;
        rep.recheck_ms = -1;
        rep.epoch = 0;
    }
    b->stats.ops_completed++;
    simba_backend_complete(b->s, &rep);
}

/* The head job is done: take it off the queue, do the bookkeeping, answer
   the core (internal jobs get no answer) and free it. */
static void simba__mysql_finish(simba__mysql *b, simba__mysql_job *j, int status, const char *msg) {
    simba__mysql_free_results(&b->main);
    simba__mysql_pop(b);
    if (status == SIMBA_OK && j->nrings) simba__mysql_queue_rings(b, j);
    simba__mysql_after(b, j, status);
    simba__mysql_complete(b, j, status, msg);
    simba__mysql_job_free(b, j);
}

/* The step function of j's kind. */
static void simba__mysql_step(simba__mysql *b, simba__mysql_job *j) {
    switch (j->kind) {
    case SIMBA_OP_OPEN: simba__mysql_step_open(b, j); break;
    case SIMBA__MYSQL_JOB_BELLS_RELEASE:
    case SIMBA__MYSQL_JOB_BELLS_RETAKE: simba__mysql_step_bells(b, j); break;
    case SIMBA_OP_KEEPALIVE: simba__mysql_step_keepalive(b, j); break;
    case SIMBA_OP_CLOSE:
    case SIMBA__MYSQL_JOB_CLOSE_OLD: simba__mysql_step_close(b, j); break;
    case SIMBA__MYSQL_JOB_SWEEP: simba__mysql_step_sweep(b, j); break;
    case SIMBA__MYSQL_JOB_RING: simba__mysql_step_ring(b, j); break;
    case SIMBA__MYSQL_JOB_PREPARE: simba__mysql_step_prepare(b, j); break;
    default: simba__mysql_step_lock(b, j); break;
    }
}

/* Start the head job if the connection is free. Never completes anything
   (so it is safe inside submit()). */
static void simba__mysql_kick(simba__mysql *b) {
    simba__mysql_job *j = b->head;
    if (!j || b->head_started || b->main.state != SIMBA__MYSQL_READY || b->main.q != SIMBA__MYSQL_Q_NONE ||
        b->main.done)
        return;
    b->head_started = 1;
    j->attempts++;
    j->unfolded = 0;
    j->step = SIMBA__MYSQL_S_FIRST;
    simba__mysql_step(b, j);
}

/* End the open transaction (if any) with ROLLBACK; then run the op again
   (retry) or answer `status`. An ENQUEUE flagged release_bell also gives
   its bell back in the same batch. */
static void simba__mysql_rollback(simba__mysql *b, simba__mysql_job *j, int status, int retry) {
    simba__mysql_buf *x = &b->main.sql;
    j->retry = retry;
    j->reply.status = status;
    j->step = SIMBA__MYSQL_S_ROLLBACK;
    simba__mysql_buf_clear(x);
    simba__mysql_put(b, x, "ROLLBACK");
    if (!retry) simba__mysql_sql_release_bell(b, j, x);
    simba__mysql_send(b);
}

/* The rollback of j came back: run the op again (retry) or answer. */
static void simba__mysql_rollback_done(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_free_results(&b->main);
    if (j->retry) {
        j->retry = 0;
        b->head_started = 0;
        simba__mysql_kick(b);
        return;
    }
    simba__mysql_finish(b, j, j->reply.status ? j->reply.status : SIMBA_EBACKEND, j->msg);
}

/* The head job's batch failed: a lost connection fails everything; a
   deadlock or lock wait timeout runs the op again; another SQL error rolls
   back and answers. */
static void simba__mysql_job_error(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_conn *c = &b->main;
    unsigned e = c->err;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", c->errmsg);
    simba__mysql_free_results(c);
    if (simba__mysql_is_conn_error(e)) { simba__mysql_main_lost(b, SIMBA_EDISCONNECTED, msg); return; }
    if (j->settle && j->settle_call && (e == ER_SP_DOES_NOT_EXIST || e == ER_PROCACCESS_DENIED_ERROR)) {
        /* no procedure, or no EXECUTE on it: nothing ran; the compound
           statement from now on, on this connection */
        simba_backend_log(b->s, SIMBA_LOG_INFO, "simba_mysql: %s: the compound statement instead", msg);
        b->routines = 0;
        simba__mysql_rollback(b, j, SIMBA_OK, 1);
        return;
    }
    if (j->row && e == ER_BAD_FIELD_ERROR) {
        /* tables of a release before the hold in the row, not upgraded:
           every op goes the procedures' way, which unfolds nothing there
           (no row can hold a hold) */
        simba_backend_log(b->s, SIMBA_LOG_WARN, "simba_mysql: %s: old simba tables: upgrade them (simba_mysql.sql, "
                          "or connect with create_schema=1); no hold in the row until then", msg);
        j->row = 0;
        b->no_row_hold = 1;
        simba__mysql_rollback(b, j, SIMBA_OK, 1);
        return;
    }
    j->row = 0;
    if (j->settle && e == ER_BAD_FIELD_ERROR && !b->no_settle) {
        /* tables of the release before empty_seq, not upgraded: the ops
           still work the two-round-trip way, which does not read it */
        simba_backend_log(b->s, SIMBA_LOG_WARN, "simba_mysql: %s: old simba tables: upgrade them (simba_mysql.sql, "
                          "or connect with create_schema=1); two round trips per op until then", msg);
        b->no_settle = 1;
        simba__mysql_rollback(b, j, SIMBA_OK, 1);
        return;
    }
    if (e == ER_LOCK_DEADLOCK || e == ER_LOCK_WAIT_TIMEOUT || e == ER_DUP_ENTRY) {
        /* the transaction (or its last statement) was rolled back: roll
           back the rest and run the whole op again from the reads */
        if (e == ER_LOCK_DEADLOCK) b->stats.deadlocks++;
        if (e == ER_LOCK_WAIT_TIMEOUT) b->stats.lock_wait_timeouts++;
        if (j->attempts < SIMBA__MYSQL_MAX_RETRIES) {
            b->stats.retries++;
            simba__mysql_rollback(b, j, SIMBA_OK, 1);
            return;
        }
    }
    /* an SQL error: roll back (harmless outside a transaction) and answer */
    simba__mysql_error_words(j->msg, sizeof j->msg, "", e, msg);
    /* an ENQUEUE that failed keeps its bell only for an older entry */
    j->release_bell = j->kind == SIMBA_OP_ENQUEUE && !simba__mysql_mine_has(b, j->bell);
    simba__mysql_rollback(b, j, simba__mysql_status_of(e), 0);
}

/* The head job's batch finished on the main connection: on to its next step. */
static void simba__mysql_job_result(simba__mysql *b) {
    simba__mysql_conn *c = &b->main;
    simba__mysql_job *j = b->head;
    c->done = 0;
    if (!j) { simba__mysql_free_results(c); return; }
    if (c->err && j->kind == SIMBA__MYSQL_JOB_RING && !simba__mysql_is_conn_error(c->err)) simba__mysql_ring_refused(b, j);
    else if (c->err && j->kind == SIMBA__MYSQL_JOB_PREPARE && !simba__mysql_is_conn_error(c->err))
        simba__mysql_prepare_refused(b, j);
    else if (c->err) simba__mysql_job_error(b, j);
    else if (j->step == SIMBA__MYSQL_S_ROLLBACK) simba__mysql_rollback_done(b, j);
    else simba__mysql_step(b, j);
}

/*>>connection.recover: a lost or failed main connection: fail the jobs, reconnect with backoff */

/* Fail every queued op with err (EDISCONNECTED) and forget the internal jobs. */
static void simba__mysql_fail_all(simba__mysql *b, int err, const char *msg) {
    simba__mysql_job *j;
    while ((j = simba__mysql_pop(b)) != NULL) {
        simba__mysql_complete(b, j, err, msg);
        simba__mysql_job_free(b, j);
    }
}

static void simba__mysql_schedule_reconnect(simba__mysql *b) {
    int ms = simba_backend_backoff_ms(b->s, b->main.attempt);
    b->main.attempt++;
    b->main.retry_at = simba_now_ms(b->s) + ms;
    b->main.retry_armed = 1;
}

/* The main connection is gone (or we drop it): the server rolls back an open
   transaction and frees our bells; entries and the session stay until the
   session expires. Fail what was queued, report, reconnect with backoff. */
static void simba__mysql_main_lost(simba__mysql *b, int err, const char *msg) {
    simba__mysql_conn_drop(&b->main);
    b->head_started = 0;
    b->up = 0;
    if (b->mine_n) b->retake_needed = 1;
    simba__mysql_schedule_reconnect(b);
    simba__mysql_fail_all(b, SIMBA_EDISCONNECTED, msg);
    simba_backend_state(b->s, 0, err, msg);
}

/* The main connection's connect or setup failed (or timed out): drop it,
   retry with backoff, tell the core. */
static void simba__mysql_main_failed(simba__mysql *b, int err, const char *msg) {
    simba__mysql_conn_drop(&b->main);
    simba__mysql_schedule_reconnect(b);
    simba_backend_state(b->s, 0, err, msg);
}

/* CONNECTING: when the connect is done, send the setup batch. Returns 1 to
   go on, 0 to wait. */
static int simba__mysql_main_connecting(simba__mysql *b, simba__mysql_conn *c) {
    if (!c->done) {
        if (simba_now_ms(b->s) - c->started_ms > b->connect_timeout_ms)
            simba__mysql_main_failed(b, SIMBA_ETIMEDOUT, "connect timed out");
        return 0;
    }
    c->done = 0;
    if (c->err) {
        int st = simba__mysql_status_of(c->err);
        char msg[300];
        simba__mysql_error_words(msg, sizeof msg, "connect: ", c->err, c->errmsg);
        b->stats.last_error = st;
        simba__mysql_main_failed(b, st == SIMBA_EBACKEND ? SIMBA_EDISCONNECTED : st, msg);
        return 0;
    }
    c->state = SIMBA__MYSQL_SETUP;
    b->installing = 0;
    simba__mysql_setup_sql(b, &c->sql, 1);
    simba__mysql_conn_query(b, c);
    return 1;
}

/* SETUP: when the setup batch is done, the connection is ready: re-take
   our bells, tell the core. Returns 1 to go on, 0 to wait. */
static int simba__mysql_main_setup(simba__mysql *b, simba__mysql_conn *c) {
    if (!c->done) {
        if (simba_now_ms(b->s) - c->started_ms > b->connect_timeout_ms)
            simba__mysql_main_failed(b, SIMBA_ETIMEDOUT, "connection setup timed out");
        return 0;
    }
    c->done = 0;
    if (b->installing && c->err && !simba__mysql_is_conn_error(c->err)) {
        /* no CREATE ROUTINE: the compound statement does the same */
        simba_backend_log(b->s, SIMBA_LOG_INFO, "simba_mysql: the procedures are not installed (MySQL error %u: "
                          "%.120s): the compound statement instead", c->err, c->errmsg);
        c->err = 0;
    }
    if (c->err) {
        int st = simba__mysql_status_of(c->err);
        char msg[300];
        simba__mysql_error_words(msg, sizeof msg, "setup: ", c->err, c->errmsg);
        b->stats.last_error = st;
        b->installing = 0;
        simba__mysql_main_failed(b, st, msg);
        return 0;
    }
    if (!b->installing) simba__mysql_grace(b, c);
    simba__mysql_free_results(c);
    b->routines = 1;
    b->no_settle = 0;
    b->no_row_hold = 0;
    b->no_prepare = 0;
    if (!b->installing && b->create_schema && simba__mysql_is_mariadb(b)) {
        /* a batch of its own: a client without CREATE ROUTINE still connects */
        b->installing = 1;
        simba__mysql_sql_routines(b, &c->sql);
        simba__mysql_conn_query(b, c);
        return 1;
    }
    b->installing = 0;
    c->state = SIMBA__MYSQL_READY;
    c->attempt = 0;
    if (b->stats.connects++) b->stats.reconnects++;
    if (b->retake_needed) simba__mysql_queue_retake(b);
    b->up = 1;
    simba_backend_state(b->s, 1, 0, NULL);
    return 1;
}

/* Drive the main connection: connect, setup, jobs. */
static void simba__mysql_main_progress(simba__mysql *b) {
    simba__mysql_conn *c = &b->main;
    int guard;
    for (guard = 0; guard < 64; guard++) {
        if (c->state == SIMBA__MYSQL_CLOSED) {
            if (c->retry_armed && simba_now_ms(b->s) >= c->retry_at) {
                c->retry_armed = 0;
                simba__mysql_conn_open(b, c);
                continue;
            }
            return;
        }
        if (c->state == SIMBA__MYSQL_CONNECTING) {
            if (!simba__mysql_main_connecting(b, c)) return;
            continue;
        }
        if (c->state == SIMBA__MYSQL_SETUP) {
            if (!simba__mysql_main_setup(b, c)) return;
            continue;
        }
        /* READY */
        if (c->done) { simba__mysql_job_result(b); continue; }
        if (c->q != SIMBA__MYSQL_Q_NONE) return;
        if (!b->head) {
            int64_t now = simba_now_ms(b->s);
            if (b->sweep_ms > 0 && now >= b->next_sweep) {
                simba__mysql_job *j = simba__mysql_job_new(b, SIMBA__MYSQL_JOB_SWEEP);
                b->next_sweep = now + b->sweep_ms;
                if (j) simba__mysql_push(b, j, 0);
            }
        }
        if (!b->head || b->head_started) return;
        simba__mysql_kick(b);
    }
}

/*>>session: OPEN, KEEPALIVE, CLOSE, the switch to a new session, the sweep of expired ones */

/* The renewal of a session row, the one rule OPEN and KEEPALIVE write, by
   the server's clock: expires one lease from now, renewed now (INSPECT's
   renewed_ago_ms, simba__mysql_holder_times). */
static void simba__mysql_sql_renewal(simba__mysql *b, simba__mysql_buf *x, int lease_ms) {
    simba__mysql_putf(b, x, "expires_ms=" SIMBA__MYSQL_NOW_MS "+%d, renewed_ms=" SIMBA__MYSQL_NOW_MS, lease_ms);
}

/* OPEN: drop the entries of an expired session of the same id (a session id
   that expired must not come back to life with its old entries; rare: ids
   are fresh per session), then create or renew the session row. */
static void simba__mysql_sql_open(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    simba__mysql_buf_clear(x);
    simba__mysql_putf(b, x, "DELETE e FROM %s e JOIN %s s ON s.tenant=e.tenant AND s.session=e.session"
                   " WHERE s.tenant=", b->t_entries, b->t_sessions);
    simba__mysql_hexs(b, x, j->tenant);
    simba__mysql_put(b, x, " AND s.session=");
    simba__mysql_hexs(b, x, j->session);
    simba__mysql_put(b, x, " AND s.expires_ms <= " SIMBA__MYSQL_NOW_MS ";\n");
    simba__mysql_putf(b, x, "INSERT INTO %s SET tenant=", b->t_sessions);
    simba__mysql_hexs(b, x, j->tenant);
    simba__mysql_put(b, x, ", session=");
    simba__mysql_hexs(b, x, j->session);
    simba__mysql_put(b, x, ", client=");
    simba__mysql_hexs(b, x, j->client);
    simba__mysql_put(b, x, ", ");
    simba__mysql_sql_renewal(b, x, j->lease_ms);
    simba__mysql_put(b, x, " ON DUPLICATE KEY UPDATE ");
    simba__mysql_sql_renewal(b, x, j->lease_ms);
}

/* OPEN: one batch (drop an expired namesake's entries, create the row). */
static void simba__mysql_step_open(simba__mysql *b, simba__mysql_job *j) {
    if (j->step != SIMBA__MYSQL_S_FIRST) { simba__mysql_finish(b, j, SIMBA_OK, NULL); return; }
    snprintf(b->notify_session, sizeof b->notify_session, "%s", j->session);
    b->notify_seen = 0;
    b->session_restarts = b->lossy_restarts;
    j->reply.epoch = 1;
    simba__mysql_sql_open(b, j, &b->main.sql);
    simba__mysql_send_step(b, j, SIMBA__MYSQL_S_SIMPLE);
}

/* One statement, whatever the number of locks: the whole renewal. It only
   matches while the session's notify counter is the one we saw; a DELETE or
   SET_CAPACITY on a resource we are queued in bumps it, the keepalive then
   matches nothing and we look why (simba__mysql_step_keepalive). */
static void simba__mysql_sql_keepalive(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    simba__mysql_buf_clear(x);
    simba__mysql_putf(b, x, "UPDATE %s SET ", b->t_sessions);
    simba__mysql_sql_renewal(b, x, j->lease_ms);
    simba__mysql_where_tenant(b, x, j);
    simba__mysql_put(b, x, " AND session=");
    simba__mysql_hexs(b, x, j->session);
    simba__mysql_putf(b, x, " AND expires_ms > " SIMBA__MYSQL_NOW_MS " AND notify=%lld", (long long)b->notify_seen);
}

/* The keepalive matched nothing: is the session alive, and what is its
   notify counter now? */
static void simba__mysql_sql_notify(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    simba__mysql_buf_clear(x);
    simba__mysql_putf(b, x, "SELECT notify FROM %s", b->t_sessions);
    simba__mysql_where_tenant(b, x, j);
    simba__mysql_put(b, x, " AND session=");
    simba__mysql_hexs(b, x, j->session);
    simba__mysql_put(b, x, " AND expires_ms > " SIMBA__MYSQL_NOW_MS);
}

/* KEEPALIVE: the renewal; when it matches nothing, read the session's
   notify counter (gone: ESESSION) and renew again with it. */
static void simba__mysql_step_keepalive(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_conn *c = &b->main;
    switch (j->step) {
    case SIMBA__MYSQL_S_FIRST:
        if (simba__mysql_session_retired(b)) {
            simba__mysql_finish(b, j, SIMBA_ESESSION, "simba_mysql: the server restarted and may have lost "
                                "commits of this session");
            return;
        }
        if (strcmp(b->notify_session, j->session) != 0) {
            snprintf(b->notify_session, sizeof b->notify_session, "%s", j->session);
            b->notify_seen = 0;
        }
        simba__mysql_sql_keepalive(b, j, &c->sql);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_KEEPALIVE);
        return;
    case SIMBA__MYSQL_S_KEEPALIVE:
        if (c->nres >= 1 && c->affected[0] == 1) {
            /* the contract's admin epoch: ours is the session's notify counter
               (+1: 0 means "not kept"); when it moves, the core re-checks holds */
            j->reply.epoch = b->notify_seen + 1;
            simba__mysql_finish(b, j, SIMBA_OK, NULL);
            return;
        }
        simba__mysql_free_results(c);
        if (j->attempts > 3) { simba__mysql_finish(b, j, SIMBA_ESESSION, NULL); return; }
        j->attempts++;
        simba__mysql_sql_notify(b, j, &c->sql);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_NOTIFY);
        return;
    case SIMBA__MYSQL_S_NOTIFY: {
        MYSQL_RES *r = c->nres >= 1 ? c->res[0] : NULL;
        MYSQL_ROW row = r && mysql_num_fields(r) == 1 ? mysql_fetch_row(r) : NULL;
        unsigned long *len = row ? mysql_fetch_lengths(r) : NULL;
        int64_t seen;
        if (!row || !len || !row[0] || !simba__mysql_int64(row[0], len[0], &seen)) {
            simba__mysql_finish(b, j, r && !row ? SIMBA_ESESSION : SIMBA_EPROTO, NULL);
            return;
        }
        simba__mysql_free_results(c);
        b->notify_seen = seen;
        simba__mysql_sql_keepalive(b, j, &c->sql);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_KEEPALIVE);
        return;
    }
    default:
        simba__mysql_finish(b, j, SIMBA_EPROTO, "simba_mysql: bad job state");
        return;
    }
}

/* CLOSE: the session's entries first, in short autocommit batches; the
   session row last, so an interrupted CLOSE leaves a session the sweep
   will find. */
static void simba__mysql_sql_close_entries(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    simba__mysql_buf_clear(x);
    simba__mysql_putf(b, x, "DELETE FROM %s", b->t_entries);
    simba__mysql_where_tenant(b, x, j);
    simba__mysql_put(b, x, " AND session=");
    simba__mysql_hexs(b, x, j->session);
    simba__mysql_putf(b, x, " LIMIT %d", SIMBA__MYSQL_CLOSE_BATCH);
}

static void simba__mysql_sql_close_session(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    simba__mysql_buf_clear(x);
    simba__mysql_putf(b, x, "DELETE FROM %s", b->t_sessions);
    simba__mysql_where_tenant(b, x, j);
    simba__mysql_put(b, x, " AND session=");
    simba__mysql_hexs(b, x, j->session);
    /* the bells go with the session; only the current session's CLOSE
       may drop them all at once (a dropped session's CLOSE can come
       after the next OPEN, whose bells must stay) */
    if (j->kind == SIMBA_OP_CLOSE && simba__mysql_is_current(b, j->session))
        simba__mysql_put(b, x, ";\nDO RELEASE_ALL_LOCKS()");
}

/* CLOSE (and CLOSE_OLD): the entries in batches, then the session row. */
static void simba__mysql_step_close(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_conn *c = &b->main;
    switch (j->step) {
    case SIMBA__MYSQL_S_FIRST:
        simba__mysql_sql_close_entries(b, j, &c->sql);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_CLOSE_ENTRIES);
        return;
    case SIMBA__MYSQL_S_CLOSE_ENTRIES: {
        uint64_t n = simba__mysql_affected(c);
        simba__mysql_free_results(c);
        if (n >= (uint64_t)SIMBA__MYSQL_CLOSE_BATCH) {
            simba__mysql_send(b); /* same statement again: the next batch */
            return;
        }
        simba__mysql_sql_close_session(b, j, &c->sql);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_CLOSE_SESSION);
        return;
    }
    default:
        simba__mysql_finish(b, j, SIMBA_OK, NULL);
        return;
    }
}

/* The core opens a new session: the previous one was dropped (or this is
   the first). Whatever the backend keeps for the old one goes now. The core
   sends CLOSE only while it is connected, so after an outage longer than
   ttl the backend would otherwise keep the old session's watches (the
   waiter connection would keep waiting on them in turns, missing the live
   ones' rings) and its bells (re-taken at every reconnect) for ever. On the
   server, the old session is closed here if the core could not (its rows
   would expire anyway; closing them frees its queue places now). */
static void simba__mysql_session_switch(simba__mysql *b, const simba_op *op) {
    int i;
    char old[SIMBA_MAX_SESSION + 1];
    snprintf(old, sizeof old, "%s", b->cur_session);
    snprintf(b->cur_session, sizeof b->cur_session, "%s", op->session ? op->session : "");
    b->stats.purged_watches += (uint64_t)b->nwatch;
    while (b->nwatch) simba__mysql_watch_del(b, b->watches[0].request);
    if (b->mine_n) {
        /* the server frees them with the connection; this one lives on */
        b->stats.purged_bells += (uint64_t)b->mine_n;
        for (i = 0; i < b->mine_cap; i++)
            if (b->mine[i]) simba__mysql_queue_bell_release_raw(b, b->mine[i]);
        simba__mysql_mine_clear(b);
    }
    b->retake_needed = 0;
    {
        /* a re-take queued at the reconnect is for those same bells */
        simba__mysql_job *q;
        for (q = b->head; q; q = q->next)
            if (q->kind == SIMBA__MYSQL_JOB_BELLS_RETAKE && !(q == b->head && b->head_started)) q->nbells = 0;
    }
    if (old[0] && !b->cur_close_sent) {
        int err;
        simba_op c = *op;
        simba__mysql_job *j;
        c.kind = SIMBA_OP_CLOSE;
        c.session = old;
        c.nres = 0;
        c.res = NULL;
        j = simba__mysql_job_from_op(b, &c, &err);
        if (j) {
            j->kind = SIMBA__MYSQL_JOB_CLOSE_OLD; /* internal: no answer to the core */
            simba__mysql_push(b, j, 0);
        }
    }
    b->cur_close_sent = 0;
}

/* SWEEP: a round of expired sessions, then their entries in batches, then
   the session rows (the list can be long: it goes in with put, not the
   printf buffer). */
static void simba__mysql_sql_sweep_list(simba__mysql *b, simba__mysql_buf *x) {
    simba__mysql_buf_clear(x);
    simba__mysql_putf(b, x, "SELECT tenant,session FROM %s WHERE expires_ms < " SIMBA__MYSQL_NOW_MS
                   " ORDER BY expires_ms LIMIT %d", b->t_sessions, SIMBA__MYSQL_SWEEP_SESSIONS);
}

static void simba__mysql_sql_sweep_entries(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    simba__mysql_buf_clear(x);
    simba__mysql_putf(b, x, "DELETE FROM %s WHERE (tenant,session) IN (", b->t_entries);
    simba__mysql_put(b, x, j->list.p);
    simba__mysql_putf(b, x, ") LIMIT %d", SIMBA__MYSQL_SWEEP_BATCH);
}

static void simba__mysql_sql_sweep_sessions(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    simba__mysql_buf_clear(x);
    /* only sessions still expired: a row cannot come back to life, but
       check anyway rather than trust the list's age */
    simba__mysql_putf(b, x, "DELETE FROM %s WHERE (tenant,session) IN (", b->t_sessions);
    simba__mysql_put(b, x, j->list.p);
    simba__mysql_put(b, x, ") AND expires_ms < " SIMBA__MYSQL_NOW_MS);
}

/* Reads the sweep's list of expired sessions into j->list as
   "(t,s),(t,s)"; returns how many. */
static int simba__mysql_sweep_read_list(simba__mysql *b, simba__mysql_job *j, simba__mysql_conn *c) {
    MYSQL_RES *r = c->nres >= 1 ? c->res[0] : NULL;
    MYSQL_ROW row;
    int n = 0;
    simba__mysql_buf_clear(&j->list);
    while (r && mysql_num_fields(r) == 2 && (row = mysql_fetch_row(r)) != NULL) {
        unsigned long *len = mysql_fetch_lengths(r);
        if (!row[0] || !row[1] || !len) continue;
        simba__mysql_put(b, &j->list, n ? ",(" : "(");
        simba__mysql_hex(b, &j->list, row[0], len[0]);
        simba__mysql_put(b, &j->list, ",");
        simba__mysql_hex(b, &j->list, row[1], len[1]);
        simba__mysql_put(b, &j->list, ")");
        n++;
    }
    return n;
}

/* SWEEP: list expired sessions, delete their entries in batches, then the
   session rows. Internal: nobody is answered. */
static void simba__mysql_step_sweep(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_conn *c = &b->main;
    switch (j->step) {
    case SIMBA__MYSQL_S_FIRST:
        simba__mysql_sql_sweep_list(b, &c->sql);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_SWEEP_LIST);
        return;
    case SIMBA__MYSQL_S_SWEEP_LIST: {
        int n = simba__mysql_sweep_read_list(b, j, c);
        simba__mysql_free_results(c);
        if (!n || j->list.oom) { simba__mysql_finish(b, j, SIMBA_OK, NULL); return; }
        j->nbells = n; /* sessions in this round */
        simba__mysql_sql_sweep_entries(b, j, &c->sql);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_SWEEP_ENTRIES);
        return;
    }
    case SIMBA__MYSQL_S_SWEEP_ENTRIES: {
        uint64_t n = simba__mysql_affected(c);
        b->stats.swept_entries += n;
        simba__mysql_free_results(c);
        if (n >= (uint64_t)SIMBA__MYSQL_SWEEP_BATCH) {
            simba__mysql_send(b);
            return;
        }
        simba__mysql_sql_sweep_sessions(b, j, &c->sql);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_SWEEP_SESSIONS);
        return;
    }
    default:
        b->stats.swept_sessions += simba__mysql_affected(c);
        simba__mysql_finish(b, j, SIMBA_OK, NULL);
        return;
    }
}

/*>>locks: ENQUEUE, POLL, RELEASE, INSPECT, SET_CAPACITY, DELETE (reads, the grant rule, writes) */

/*>>locks.queue: the reads: lock the resource rows (sorted by name), read their queues, parse */

static void simba__mysql_names_in(simba__mysql *b, simba__mysql_buf *x, const simba__mysql_job *j) {
    int i;
    simba__mysql_put(b, x, "name IN (");
    for (i = 0; i < j->nres; i++) {
        if (i) simba__mysql_put(b, x, ",");
        simba__mysql_hex(b, x, j->res[i].name, j->res[i].len);
    }
    simba__mysql_put(b, x, ")");
}

/* " WHERE tenant=<t> AND name=<res r>" */
static void simba__mysql_where_res(simba__mysql *b, simba__mysql_buf *x, const simba__mysql_job *j, int r) {
    simba__mysql_where_tenant(b, x, j);
    simba__mysql_put(b, x, " AND name=");
    simba__mysql_hex(b, x, j->res[r].name, j->res[r].len);
}

/* The queue rows of resource r the window reads (0: all of them). Lock
   ops read a prefix of each queue, as far as the grant rule can reach: the
   capacity asked for plus a little, doubled each time the rule could still
   grant past its end (simba__mysql_window_short). INSPECT, SET_CAPACITY and
   DELETE read, list or notify the whole queue. */
static int simba__mysql_window(const simba__mysql_job *j, int r) {
    int64_t n;
    if (j->kind != SIMBA_OP_ENQUEUE && j->kind != SIMBA_OP_POLL && j->kind != SIMBA_OP_RELEASE) return 0;
    /* after 20 doublings: whole queues (the same for every resource: the
       statement reads either windows or whole queues) */
    if (j->widen >= 20) return 0;
    n = (int64_t)(j->res[r].capacity > 0 ? j->res[r].capacity : 1) + SIMBA__MYSQL_WINDOW_SLACK;
    n <<= j->widen;
    return n >= SIMBA__MYSQL_WINDOW_MAX ? SIMBA__MYSQL_WINDOW_MAX : (int)n;
}

/* The columns of a queue row (k, seq, fence, session expiry, name, request,
   session, weight, x, session renewal) and its tables; x is 1 for the rows
   of the window. */
static void simba__mysql_sql_entry_cols(simba__mysql *b, simba__mysql_buf *x, int window, int by_request) {
    /* by request: the unique key (tenant, name, request), which the
       optimizer picks for the equalities (no FORCE: its name has the prefix) */
    simba__mysql_putf(b, x, "(SELECT 1, e.seq, e.fence, s.expires_ms, e.name, e.request, e.session, e.weight, %d, s.renewed_ms"
                   " FROM %s e %s LEFT JOIN %s s ON s.tenant=e.tenant AND s.session=e.session"
                   " WHERE e.tenant=", window, b->t_entries, by_request ? "" : "FORCE INDEX (PRIMARY)", b->t_sessions);
}

/* " AND e.name=<res r>" */
static void simba__mysql_and_name(simba__mysql *b, simba__mysql_buf *x, const simba__mysql_job *j, int r) {
    simba__mysql_put(b, x, " AND e.name=");
    simba__mysql_hex(b, x, j->res[r].name, j->res[r].len);
}

/* The queue rows: per resource its window from the head (an index range of
   the clustered key (tenant, name, seq), so its cost does not grow with the
   queue); then, past the window, our own entries (unique key (tenant, name,
   request)) and the entry right ahead of each (POLL: the bell a capacity-1
   waiter watches) or the tail of each queue (ENQUEUE: the entry ahead of
   the new one). Duplicates of window rows sort right after them (x DESC). */
static void simba__mysql_sql_queues(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    int r, own = j->kind == SIMBA_OP_POLL || j->kind == SIMBA_OP_RELEASE || j->kind == SIMBA_OP_ENQUEUE;
    if (!simba__mysql_window(j, 0)) {
        simba__mysql_sql_entry_cols(b, x, 1, 0);
        simba__mysql_hexs(b, x, j->tenant);
        simba__mysql_put(b, x, " AND e.");
        simba__mysql_names_in(b, x, j);
        simba__mysql_put(b, x, ")\nORDER BY k, n, a, x DESC;\n");
        return;
    }
    for (r = 0; r < j->nres; r++) {
        simba__mysql_put(b, x, "UNION ALL\n");
        simba__mysql_sql_entry_cols(b, x, 1, 0);
        simba__mysql_hexs(b, x, j->tenant);
        simba__mysql_and_name(b, x, j, r);
        simba__mysql_putf(b, x, " ORDER BY e.seq LIMIT %d)\n", simba__mysql_window(j, r));
    }
    if (own) {
        simba__mysql_put(b, x, "UNION ALL\n");
        simba__mysql_sql_entry_cols(b, x, 0, 1);
        simba__mysql_hexs(b, x, j->tenant);
        simba__mysql_put(b, x, " AND e.");
        simba__mysql_names_in(b, x, j);
        simba__mysql_put(b, x, " AND e.request=");
        simba__mysql_hexs(b, x, j->request);
        simba__mysql_put(b, x, ")\n");
    }
    for (r = 0; r < j->nres && j->kind != SIMBA_OP_RELEASE; r++) {
        simba__mysql_put(b, x, "UNION ALL\n");
        simba__mysql_sql_entry_cols(b, x, 0, 0);
        simba__mysql_hexs(b, x, j->tenant);
        simba__mysql_and_name(b, x, j, r);
        if (j->kind == SIMBA_OP_POLL) {
            simba__mysql_putf(b, x, " AND e.seq < (SELECT o.seq FROM %s o WHERE o.tenant=", b->t_entries);
            simba__mysql_hexs(b, x, j->tenant);
            simba__mysql_put(b, x, " AND o.name=");
            simba__mysql_hex(b, x, j->res[r].name, j->res[r].len);
            simba__mysql_put(b, x, " AND o.request=");
            simba__mysql_hexs(b, x, j->request);
            simba__mysql_put(b, x, ")");
        }
        simba__mysql_put(b, x, " ORDER BY e.seq DESC LIMIT 1)\n");
    }
    simba__mysql_put(b, x, "ORDER BY k, n, a, x DESC;\n");
}

/* ENQUEUE: a bell for the new entry while we hold fewer than max_bells
   (MariaDB's user locks cost O(n) per GET_LOCK on a connection holding n) */
static int simba__mysql_wants_bell(const simba__mysql *b, const simba__mysql_job *j) {
    return j->kind == SIMBA_OP_ENQUEUE &&
           (simba__mysql_mine_has(b, j->bell) || b->max_bells < 0 || b->mine_n < b->max_bells);
}

/* 1 when our connection has the request's bell (already, or now), else 0 */
static void simba__mysql_arg_take_bell(simba__mysql_args *a, uint64_t bell) {
    simba__mysql_put(a->b, a->x, "IF(IS_USED_LOCK(");
    simba__mysql_arg_bell(a, bell);
    simba__mysql_put(a->b, a->x, ") <=> CONNECTION_ID(), 1, GET_LOCK(");
    simba__mysql_arg_bell(a, bell);
    simba__mysql_put(a->b, a->x, ", 0))");
}

/* The same in the row statement, cheaper for a bell that is not ours yet
   (simba__mysql_after keeps the list of ours, simba__mysql_mine_has): then
   GET_LOCK alone, which the server runs without the check before it. A
   bell that may be ours already (a keyed request's retry) keeps the check:
   a second GET_LOCK of a lock the connection holds counts it twice, and
   the one RELEASE_LOCK of its release would not free it. The choice is a
   value, so text and prepared forms are one statement. */
static void simba__mysql_arg_take_new_bell(simba__mysql_args *a, uint64_t bell) {
    simba__mysql_put(a->b, a->x, "IF(");
    simba__mysql_arg_num(a, a->mode != SIMBA__MYSQL_ARGS_MARKS && simba__mysql_mine_has(a->b, bell));
    simba__mysql_put(a->b, a->x, ", ");
    simba__mysql_arg_take_bell(a, bell);
    simba__mysql_put(a->b, a->x, ", GET_LOCK(");
    simba__mysql_arg_bell(a, bell);
    simba__mysql_put(a->b, a->x, ", 0))");
}

static void simba__mysql_sql_take_bell(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    simba__mysql_args a;
    a.b = b;
    a.x = x;
    a.mode = SIMBA__MYSQL_ARGS_TEXT;
    simba__mysql_arg_take_bell(&a, j->bell);
}

/* The reads every resource operation evaluates, in two statements (each
   statement costs about a round trip on a busy server, so they are few):
   1. the resource rows, locked (FOR UPDATE) in sorted order when `lock`;
   2. one header row (server time, our session's expiry, and for ENQUEUE our
      bell taken with GET_LOCK(b, 0), before our entry can exist), then the
      queue rows (simba__mysql_sql_queues) with each entry's session expiry.
   Time is read after the locks are ours, so fences taken from it follow
   every grant made before. `start`: open the transaction first (a wider
   window is read again inside the one already open). */
static void simba__mysql_sql_reads(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x, int *nst, int lock,
                                   int start) {
    if (lock && start) {
        simba__mysql_put(b, x, "START TRANSACTION;\n");
        (*nst)++;
    }
    j->ix_res = *nst;
    simba__mysql_putf(b, x, "SELECT name,capacity,counter,seq FROM %s", b->t_resources);
    simba__mysql_where_tenant(b, x, j);
    simba__mysql_put(b, x, " AND ");
    simba__mysql_names_in(b, x, j);
    simba__mysql_put(b, x, lock ? " ORDER BY name FOR UPDATE;\n" : " ORDER BY name;\n");
    (*nst)++;
    j->ix_ent = *nst;
    simba__mysql_putf(b, x, "(SELECT 0 AS k, " SIMBA__MYSQL_NOW_US " AS a, (SELECT expires_ms FROM %s", b->t_sessions);
    simba__mysql_where_tenant(b, x, j);
    simba__mysql_put(b, x, " AND session=");
    simba__mysql_hexs(b, x, j->session);
    simba__mysql_put(b, x, ") AS b, ");
    /* taken once (a wider window reads again in the same op) */
    if (start) j->took_bell = simba__mysql_wants_bell(b, j);
    if (j->took_bell && start) {
        simba__mysql_sql_take_bell(b, j, x);
    } else {
        simba__mysql_put(b, x, j->took_bell ? "1" : "0");
    }
    simba__mysql_put(b, x, " AS c, NULL AS n, NULL AS rq, NULL AS se, NULL AS w, 1 AS x, NULL AS rn)\n");
    if (!simba__mysql_window(j, 0)) simba__mysql_put(b, x, "UNION ALL\n");
    simba__mysql_sql_queues(b, j, x);
    (*nst)++;
}

static int simba__mysql_res_index(const simba__mysql_job *j, const char *name, unsigned long len) {
    int i;
    for (i = 0; i < j->nres; i++)
        if (j->res[i].len == len && memcmp(j->res[i].name, name, len) == 0) return i;
    return -1;
}

/* SIMBA_EPROTO, remembering which check failed (the error message names it:
   "unexpected data" alone could not be told from a race). */
static int simba__mysql_bad(simba__mysql_eval *v, const char *why) {
    v->why = why;
    return SIMBA_EPROTO;
}

/* The resource rows (name, capacity, counter, seq); a missing one would be
   created with the capacity asked for. A negative capacity is a hold in the
   row (counted in v->row_holds). */
#define SIMBA__MYSQL_CAP_MAX 2147483647
static int simba__mysql_parse_resources(const simba__mysql_job *j, MYSQL_RES *rr, simba__mysql_eval *v) {
    MYSQL_ROW row;
    unsigned long *len;
    int r;
    for (r = 0; r < j->nres; r++) v->capacity[r] = j->res[r].capacity > 0 ? j->res[r].capacity : 1;
    while ((row = mysql_fetch_row(rr)) != NULL) {
        int k, cap;
        int64_t ctr, seq;
        len = mysql_fetch_lengths(rr);
        if (!len || !row[0] || !row[1] || !row[2] || !row[3]) return simba__mysql_bad(v, "a resource row with NULLs");
        k = simba__mysql_res_index(j, row[0], len[0]);
        if (k < 0 || v->exists[k]) return simba__mysql_bad(v, "a resource row not asked for, or twice");
        if (!simba__mysql_int(row[1], len[1], &cap) || cap == 0 || cap < -SIMBA__MYSQL_CAP_MAX)
            return simba__mysql_bad(v, "a resource capacity <= 0 or not a number");
        if (cap < 0) {
            /* a sole holder's hold kept in the row (simba__mysql_can_row):
               the capacity is -cap; the op moves the hold into the queue
               before it decides anything */
            v->row_holds++;
            cap = -cap;
        }
        if (!simba__mysql_int64(row[2], len[2], &ctr) || ctr < 0) return simba__mysql_bad(v, "a resource counter < 0 or not a number");
        if (!simba__mysql_int64(row[3], len[3], &seq) || seq < 0) return simba__mysql_bad(v, "a resource seq < 0 or not a number");
        v->seq[k] = seq;
        v->exists[k] = 1;
        v->capacity[k] = cap;
        v->counter[k] = v->counter0[k] = ctr;
    }
    return SIMBA_OK;
}

/* The header row: server time, our session's expiry, our bell. */
static int simba__mysql_parse_header(simba__mysql *b, simba__mysql_job *j, MYSQL_RES *re, simba__mysql_eval *v) {
    MYSQL_ROW row = mysql_fetch_row(re);
    unsigned long *len = mysql_fetch_lengths(re);
    if (!row || !len || !row[0] || len[0] != 1 || row[0][0] != '0') return simba__mysql_bad(v, "no header row");
    if (!row[1] || !simba__mysql_int64(row[1], len[1], &v->now_us) || v->now_us <= 0) return simba__mysql_bad(v, "no server time");
    v->now_ms = v->now_us / 1000;
    if (b->grace_until_ms > v->now_ms) v->grace = b->grace_until_ms - v->now_ms;
    v->our_expires = -1;
    if (row[2] && !simba__mysql_int64(row[2], len[2], &v->our_expires)) return simba__mysql_bad(v, "a session expiry that is not a number");
    /* GET_LOCK(bell, 0) is 0 when another connection has the name (user
       locks are global to the server: any user may take any name, another
       tenant's too). Then this entry has no bell: we must not count it as
       ours (nor give it back), and its waiters fall back to polling. */
    if (j->took_bell && !(row[3] && len[3] == 1 && row[3][0] == '1')) j->took_bell = 0;
    return SIMBA_OK;
}

/* Queue entry i: k, seq, fence, expires, name, request, session, weight, x.
   Sets *dup when it is the row of the entry before it again (an entry of the
   window read a second time as our own or the one ahead of it). */
static int simba__mysql_parse_entry(const simba__mysql_job *j, MYSQL_ROW row, const unsigned long *len,
                                    simba__mysql_eval *v, int i, int locked, int *dup) {
    simba__mysql_ent *e = &v->e[i];
    memset(e, 0, sizeof *e);
    *dup = 0;
    if (!row || !len || !row[0] || len[0] != 1 || row[0][0] != '1' || !row[1] || !row[2] || !row[4] ||
        !row[5] || !row[6] || !row[7] || !row[8] || len[8] != 1 || (row[8][0] != '0' && row[8][0] != '1'))
        return simba__mysql_bad(v, "a queue row with NULLs");
    e->r = simba__mysql_res_index(j, row[4], len[4]);
    if (e->r < 0) return simba__mysql_bad(v, "a queue row of a resource not asked for");
    e->extra = row[8][0] == '0';
    /* an entry without its resource row: the row was created (with this
       entry) between our two statements. Locked reads too: FOR UPDATE on a
       row that does not exist yet locks nothing (READ COMMITTED takes no gap
       locks), so a client enqueueing first on a new resource at the same
       moment commits in between. simba__mysql_lock_reads_done reads again. */
    if (!v->exists[e->r]) v->torn = 1;
    if (!simba__mysql_int64(row[1], len[1], &e->seq) || !simba__mysql_int64(row[2], len[2], &e->fence) ||
        !simba__mysql_int(row[7], len[7], &e->weight) || e->weight < 0 || e->fence < 0)
        return simba__mysql_bad(v, "a queue row with a bad seq, fence or weight");
    if (len[5] == 0 || len[5] > 128 || len[6] == 0 || len[6] > SIMBA_MAX_SESSION) return simba__mysql_bad(v, "a request or session id of a bad length");
    e->request = row[5];
    e->reqlen = len[5];
    e->session = row[6];
    e->seslen = len[6];
    e->expires = -1;
    if (row[3] && !simba__mysql_int64(row[3], len[3], &e->expires)) return simba__mysql_bad(v, "an entry's session expiry that is not a number");
    e->dead = e->expires < 0 || e->expires <= v->now_ms;
    e->renewed = 0;
    if (row[9] && !simba__mysql_int64(row[9], len[9], &e->renewed)) return simba__mysql_bad(v, "an entry's session renewal that is not a number");
    if (e->reqlen == strlen(j->request) && memcmp(e->request, j->request, e->reqlen) == 0) {
        int same = e->seslen == strlen(j->session) && memcmp(e->session, j->session, e->seslen) == 0;
        e->ours = same;
        e->foreign = !same;
    }
    /* a queue position past the resource's own counter: not ours to trust
       (unless the reads were not locked and an enqueue landed between them) */
    if (e->seq <= 0) return simba__mysql_bad(v, "a queue position <= 0");
    if (v->exists[e->r] && e->seq > v->seq[e->r]) {
        if (locked) return simba__mysql_bad(v, "a queue position past its resource's seq, under the resource's lock");
        v->torn = 1;
    }
    if (i > 0 && v->e[i - 1].r == e->r && v->e[i - 1].seq == e->seq) {
        /* one statement, one snapshot: the same entry reads the same */
        const simba__mysql_ent *p = &v->e[i - 1];
        if (!e->extra || p->reqlen != e->reqlen || memcmp(p->request, e->request, e->reqlen) != 0)
            return simba__mysql_bad(v, "a queue row read twice that differs");
        *dup = 1;
        return SIMBA_OK;
    }
    if (i > 0 && v->e[i - 1].r == e->r && v->e[i - 1].seq > e->seq) return simba__mysql_bad(v, "queue rows out of order");
    /* past a full window only: a short window read the whole queue */
    if (!e->extra) v->win_rows[e->r]++;
    else if (simba__mysql_window(j, e->r) && v->win_rows[e->r] < simba__mysql_window(j, e->r)) return simba__mysql_bad(v, "a row past a queue window that was not full");
    return SIMBA_OK;
}

/* Reads the three result sets of simba__mysql_sql_reads into v. SIMBA_EPROTO
   for anything of the wrong shape. */
static int simba__mysql_parse_reads(simba__mysql *b, simba__mysql_job *j, simba__mysql_conn *c, simba__mysql_eval *v, int locked) {
    MYSQL_RES *rr, *re;
    int i, n, rc, dup;
    memset(v, 0, sizeof *v);
    if (j->ix_res >= c->nres || j->ix_ent >= c->nres) return simba__mysql_bad(v, "missing result sets");
    rr = c->res[j->ix_res];
    re = c->res[j->ix_ent];
    if (!rr || !re || mysql_num_fields(rr) != 4 || mysql_num_fields(re) != 10 || mysql_num_rows(re) < 1)
        return simba__mysql_bad(v, "result sets of the wrong shape");
    if ((rc = simba__mysql_parse_resources(j, rr, v)) != SIMBA_OK) return rc;
    if ((rc = simba__mysql_parse_header(b, j, re, v)) != SIMBA_OK) return rc;
    n = (int)mysql_num_rows(re) - 1;
    if (n) {
        v->e = (simba__mysql_ent *)simba__mysql_alloc(b, (size_t)n * sizeof *v->e);
        if (!v->e) return SIMBA_ENOMEM;
    }
    for (i = 0; i < n; i++) {
        MYSQL_ROW row = mysql_fetch_row(re);
        rc = simba__mysql_parse_entry(j, row, mysql_fetch_lengths(re), v, v->ne, locked, &dup);
        if (rc != SIMBA_OK) return rc;
        if (!dup) v->ne++;
    }
    return SIMBA_OK;
}

/*>>locks.rule: the grant rule (simba_grant_step of simba.h) on the queues read, and the answers it gives */

/* Could the grant rule reach past the window of some queue? Then it must be
   read wider. The rule walks the live entries from the head; once one does
   not fit, none after it does (the sum only grows). So a window is enough
   when it read the whole queue (fewer rows than it asked for) or a live
   entry in it does not fit. Call after the op's own changes (a RELEASE
   frees room that may reach further). */
static int simba__mysql_window_short(const simba__mysql_job *j, const simba__mysql_eval *v) {
    int r, i;
    for (r = 0; r < j->nres; r++) {
        int64_t sum = 0;
        int w = simba__mysql_window(j, r), full = 0;
        if (!w || v->win_rows[r] < w) continue;
        for (i = 0; i < v->ne && !full; i++) {
            const simba__mysql_ent *e = &v->e[i];
            if (e->r == r && !e->extra && !e->dead && !e->removed && !simba_grant_step(&sum, e->weight, v->capacity[r]))
                full = 1;
        }
        if (!full) return 1;
    }
    return 0;
}

static int simba__mysql_live(const simba__mysql_ent *e) { return !e->dead && !e->removed; }

/* The grant rule over every queue: walk from the head; an entry is granted
   iff the effective weights ahead of it plus its own fit in the capacity. A
   newly granted entry takes max(counter + 1, server time in us). Dead and
   removed entries do not count. Returns how many fences were assigned.
   The server has a copy of the rule for the cases it settles alone in one
   round trip (an empty queue, a capacity-1 queue's head): simba__mysql_sql_settle. */
static int simba__mysql_walk(simba__mysql_job *j, simba__mysql_eval *v) {
    int r, i, assigned = 0;
    if (v->grace) return 0; /* see simba__mysql_grace */
    for (r = 0; r < j->nres; r++) {
        int64_t sum = 0;
        int cap = v->capacity[r];
        for (i = 0; i < v->ne; i++) {
            simba__mysql_ent *e = &v->e[i];
            int fits;
            if (e->r != r || !simba__mysql_live(e)) continue;
            fits = simba_grant_step(&sum, e->weight, cap);
            e->granted = e->fence > 0;
            if (!e->granted && fits) {
                e->newfence = simba_grant_fence(v->counter[r], v->now_us);
                v->counter[r] = e->newfence;
                e->granted = 1;
                assigned++;
            }
        }
    }
    return assigned;
}

/* The fences a new entry (last in every queue) would get now; 0 where it
   would wait. Call after simba__mysql_walk. */
static void simba__mysql_probe_new(simba__mysql_job *j, simba__mysql_eval *v, int64_t *fence) {
    int r, i;
    for (r = 0; r < j->nres; r++) {
        int64_t sum = 0;
        int cap = v->capacity[r];
        for (i = 0; i < v->ne; i++)
            if (v->e[i].r == r && simba__mysql_live(&v->e[i])) (void)simba_grant_step(&sum, v->e[i].weight, cap);
        fence[r] = simba_grant_step(&sum, j->res[r].weight, cap) && !v->grace
                       ? simba_grant_fence(v->counter[r], v->now_us) : 0;
    }
}

static int64_t simba__mysql_fence_of(const simba__mysql_ent *e) { return e->fence ? e->fence : e->newfence; }

/* The answer's part about res[0]: entries ahead of ours, holders, the
   oldest holder. Past the window `ahead` counts the queue positions not
   read as entries (an upper bound: some may be gone); holders are all in
   the window (they are the granted prefix). */
static void simba__mysql_answer_first(simba__mysql_job *j, const simba__mysql_eval *v, const int64_t *new_fence) {
    int i, o, r0 = j->sorted_of[0];
    int64_t prev = 0;
    for (i = 0, o = 0; i < v->ne; i++) {
        const simba__mysql_ent *e = &v->e[i];
        if (e->r != r0) continue;
        if (e->extra && prev && !o && e->seq - prev - 1 > 0)
            j->reply.ahead += e->seq - prev - 1 > 0x3fffffff ? 0x3fffffff : (int)(e->seq - prev - 1);
        prev = e->seq;
        if (!simba__mysql_live(e)) continue;
        if (e->ours) o = 1; /* o: our entry seen */
        else if (!o) j->reply.ahead++;
        if (simba__mysql_fence_of(e) > 0) {
            if (!j->owner[0]) {
                memcpy(j->owner, e->session, e->seslen);
                j->owner[e->seslen] = 0;
            }
            j->reply.held++;
        }
    }
    if (new_fence && new_fence[r0] > 0) {
        j->reply.held++;
        if (!j->owner[0]) snprintf(j->owner, sizeof j->owner, "%s", j->session);
    }
}

/* Fills j->reply (granted, fences, ahead, held, owner, recheck) and the watch
   from the evaluated queues, for our request. new_fence: the fences of our
   entry when it is inserted by this op (it is then last everywhere), else NULL. */
static void simba__mysql_answer(simba__mysql *b, simba__mysql_job *j, simba__mysql_eval *v, const int64_t *new_fence) {
    int o, i, r0 = j->sorted_of[0], all = 1;
    int64_t recheck = -1;
    memset(j->reply.fence, 0, sizeof j->reply.fence);
    j->watch_seq = new_fence ? v->seq[r0] + 1 : 0; /* a new entry: last */
    j->reply.ahead = 0;
    j->reply.held = 0;
    j->owner[0] = 0;
    j->watch_valid = 0;
    for (o = 0; o < j->nres; o++) {
        int r = j->sorted_of[o];
        int64_t f = new_fence ? new_fence[r] : 0;
        const simba__mysql_ent *pred = NULL, *head = NULL;
        for (i = 0; i < v->ne; i++) {
            const simba__mysql_ent *e = &v->e[i];
            if (e->r != r || !simba__mysql_live(e)) continue;
            if (e->ours) { f = simba__mysql_fence_of(e); if (o == 0) j->watch_seq = e->seq; break; }
            if (!head) head = e;
            pred = e;
            /* recheck when the earliest session ahead of us can expire */
            if (recheck < 0 || e->expires - v->now_ms < recheck) recheck = e->expires - v->now_ms;
        }
        j->reply.fence[o] = f;
        if (f > 0) continue;
        all = 0;
        if (!j->watch_valid && head) {
            /* capacity 1: only the entry right ahead can let us in (no herd
               on a release); otherwise the oldest entry, the likeliest to go */
            const simba__mysql_ent *w = v->capacity[r] == 1 ? pred : head;
            j->watch_valid = 1;
            j->watch_res = r;
            j->watch_multi = v->capacity[r] > 1;
            j->watch_bell = simba__mysql_bell(b, j->tenant, w->request, w->reqlen);
        }
    }
    j->reply.granted = all;
    /* the stored capacity (a request asking for another one is told) and the
       restart grace (the core names it as the cause of a TIMEOUT) */
    j->reply.capacity = v->capacity[r0];
    j->reply.grace_ms = (!all && v->grace > 0) ? (v->grace > 0x3fffffff ? 0x3fffffff : (int)v->grace) : 0;
    if (!all && v->grace > 0 && (recheck < 0 || v->grace < recheck)) recheck = v->grace;
    if (all || recheck < 0) j->reply.recheck_ms = -1;
    else j->reply.recheck_ms = recheck > 0x7fffffff ? 0x7fffffff : (int)recheck;
    simba__mysql_answer_first(j, v, new_fence);
}

/*>>locks.write: the writes the rule decided: new resources, purges, fences, entries, capacity */

/* After the transaction: give our bell back when this op leaves no entry
   of ours behind (RELEASE, an ENQUEUE that inserted nothing). */
static int simba__mysql_bell_due(const simba__mysql *b, const simba__mysql_job *j) {
    if (!j->release_bell) return 0;
    /* an op of a dropped session: its bells went at the next OPEN; the one
       an ENQUEUE just took goes, unless the current session has the same */
    if (!simba__mysql_is_current(b, j->session) && (j->kind != SIMBA_OP_ENQUEUE || simba__mysql_mine_has(b, j->bell)))
        return 0;
    return j->kind == SIMBA_OP_ENQUEUE ? j->took_bell : simba__mysql_mine_has(b, j->bell);
}

static void simba__mysql_sql_release_bell(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    if (!simba__mysql_bell_due(b, j)) return;
    j->bell_released = 1;
    simba__mysql_put(b, x, ";\nDO RELEASE_LOCK(");
    simba__mysql_bellname(b, x, j->bell);
    simba__mysql_put(b, x, ")");
}

/* A new resource, created by the first request that needs it. A plain
   INSERT: if another transaction created it meanwhile, the duplicate key
   rolls us back and the op runs again (and finds it). */
static void simba__mysql_sql_new_resource(simba__mysql *b, simba__mysql_job *j, const simba__mysql_eval *v,
                                          simba__mysql_buf *x, int r, int insert, int64_t f, int capacity) {
    simba__mysql_putf(b, x, "INSERT INTO %s (tenant,name,capacity,counter,seq) VALUES (", b->t_resources);
    simba__mysql_hexs(b, x, j->tenant);
    simba__mysql_put(b, x, ",");
    simba__mysql_hex(b, x, j->res[r].name, j->res[r].len);
    simba__mysql_putf(b, x, ",%d,%lld,%d);\n", capacity, (long long)(f > v->counter[r] ? f : v->counter[r]),
                   insert ? 1 : 0);
}

/* Deletes of resource r's entries: all of them on DELETE, else the dead
   ones and those this op released. */
static void simba__mysql_sql_purge(simba__mysql *b, simba__mysql_job *j, const simba__mysql_eval *v,
                                   simba__mysql_buf *x, int r) {
    int i, any = 0;
    if (j->kind == SIMBA_OP_DELETE) {
        simba__mysql_putf(b, x, "DELETE FROM %s", b->t_entries);
        simba__mysql_where_res(b, x, j, r);
        simba__mysql_put(b, x, ";\n");
        return;
    }
    for (i = 0; i < v->ne; i++) {
        const simba__mysql_ent *e = &v->e[i];
        if (e->r != r || simba__mysql_live(e)) continue;
        if (!any) {
            simba__mysql_putf(b, x, "DELETE FROM %s", b->t_entries);
            simba__mysql_where_res(b, x, j, r);
            simba__mysql_put(b, x, " AND seq IN (");
        }
        simba__mysql_putf(b, x, any ? ",%lld" : "%lld", (long long)e->seq);
        any = 1;
    }
    if (any) simba__mysql_put(b, x, ");\n");
}

/* The fences of resource r's entries granted now (one UPDATE ... CASE). */
static void simba__mysql_sql_fences(simba__mysql *b, simba__mysql_job *j, const simba__mysql_eval *v,
                                    simba__mysql_buf *x, int r) {
    int i, any = 0, first = 1;
    for (i = 0; i < v->ne; i++) {
        const simba__mysql_ent *e = &v->e[i];
        if (e->r != r || !e->newfence || !simba__mysql_live(e)) continue;
        if (!any) simba__mysql_putf(b, x, "UPDATE %s SET fence=CASE seq", b->t_entries);
        simba__mysql_putf(b, x, " WHEN %lld THEN %lld", (long long)e->seq, (long long)e->newfence);
        any = 1;
    }
    if (!any) return;
    simba__mysql_put(b, x, " ELSE fence END");
    simba__mysql_where_res(b, x, j, r);
    simba__mysql_put(b, x, " AND seq IN (");
    for (i = 0; i < v->ne; i++) {
        const simba__mysql_ent *e = &v->e[i];
        if (e->r != r || !e->newfence || !simba__mysql_live(e)) continue;
        simba__mysql_putf(b, x, first ? "%lld" : ",%lld", (long long)e->seq);
        first = 0;
    }
    simba__mysql_put(b, x, ") AND fence=0;\n");
}

/* Our new entry, last in resource r's queue at position seq. */
static void simba__mysql_sql_insert_entry(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x, int r,
                                          int64_t seq, int64_t fence) {
    simba__mysql_putf(b, x, "INSERT INTO %s (tenant,name,seq,request,session,weight,fence) VALUES (",
                   b->t_entries);
    simba__mysql_hexs(b, x, j->tenant);
    simba__mysql_put(b, x, ",");
    simba__mysql_hex(b, x, j->res[r].name, j->res[r].len);
    simba__mysql_putf(b, x, ",%lld,", (long long)seq);
    simba__mysql_hexs(b, x, j->request);
    simba__mysql_put(b, x, ",");
    simba__mysql_hexs(b, x, j->session);
    simba__mysql_putf(b, x, ",%d,%lld);\n", j->res[r].weight < 0 ? 0 : j->res[r].weight, (long long)fence);
}

/* No bell rings for SET_CAPACITY and DELETE: tell the sessions queued here
   through their notify counter, which their next keepalive sees. */
static void simba__mysql_sql_notify_queued(simba__mysql *b, simba__mysql_job *j, const simba__mysql_eval *v,
                                           simba__mysql_buf *x) {
    int i, any = 0;
    for (i = 0; i < v->ne; i++) {
        const simba__mysql_ent *e = &v->e[i];
        if (e->dead) continue;
        if (!any) {
            simba__mysql_putf(b, x, "UPDATE %s SET notify=notify+1", b->t_sessions);
            simba__mysql_where_tenant(b, x, j);
            simba__mysql_put(b, x, " AND session IN (");
        } else {
            simba__mysql_put(b, x, ",");
        }
        simba__mysql_hex(b, x, e->session, e->seslen);
        any = 1;
    }
    if (any) simba__mysql_put(b, x, ");\n");
}

/* SET_CAPACITY: the new capacity and its audit row. */
static void simba__mysql_sql_set_capacity(simba__mysql *b, simba__mysql_job *j, const simba__mysql_eval *v,
                                          simba__mysql_buf *x, int new_capacity, int old_capacity) {
    if (v->exists[0]) { /* (a new resource was inserted with it) */
        simba__mysql_putf(b, x, "UPDATE %s SET capacity=%d", b->t_resources, new_capacity);
        simba__mysql_where_res(b, x, j, 0);
        simba__mysql_put(b, x, ";\n");
    }
    simba__mysql_putf(b, x, "INSERT INTO %s (tenant,name,old_capacity,new_capacity,session,at_ms) VALUES (",
                   b->t_audit);
    simba__mysql_hexs(b, x, j->tenant);
    simba__mysql_put(b, x, ",");
    simba__mysql_hex(b, x, j->res[0].name, j->res[0].len);
    if (old_capacity > 0) simba__mysql_putf(b, x, ",%d,%d,", old_capacity, new_capacity);
    else simba__mysql_putf(b, x, ",NULL,%d,", new_capacity);
    simba__mysql_hexs(b, x, j->session);
    simba__mysql_putf(b, x, ",%lld);\n", (long long)v->now_ms);
}

/* The writes (second half of a locking transaction) for the evaluation v:
   purge dead entries, the changes of this op, new fences, counters. */
static void simba__mysql_sql_writes(simba__mysql *b, simba__mysql_job *j, simba__mysql_eval *v, simba__mysql_buf *x,
                                 int insert, const int64_t *extra_fence, int new_capacity, int old_capacity) {
    int r;
    for (r = 0; r < j->nres; r++) {
        int64_t seq = v->seq[r];
        if (!v->exists[r] && (insert || j->kind == SIMBA_OP_SET_CAPACITY))
            simba__mysql_sql_new_resource(b, j, v, x, r, insert, insert ? extra_fence[r] : 0,
                                          j->kind == SIMBA_OP_SET_CAPACITY ? new_capacity : v->capacity[r]);
        simba__mysql_sql_purge(b, j, v, x, r);
        simba__mysql_sql_fences(b, j, v, x, r);
        if (insert) {
            seq++;
            simba__mysql_sql_insert_entry(b, j, x, r, seq, extra_fence[r]);
            if (extra_fence[r] > v->counter[r]) v->counter[r] = extra_fence[r];
        }
        if (j->kind != SIMBA_OP_DELETE && v->exists[r] && (v->counter[r] != v->counter0[r] || seq != v->seq[r])) {
            simba__mysql_putf(b, x, "UPDATE %s SET counter=%lld, seq=%lld", b->t_resources, (long long)v->counter[r],
                           (long long)seq);
            simba__mysql_where_res(b, x, j, r);
            simba__mysql_put(b, x, ";\n");
        }
    }
    if (j->kind == SIMBA_OP_SET_CAPACITY || j->kind == SIMBA_OP_DELETE) simba__mysql_sql_notify_queued(b, j, v, x);
    if (j->kind == SIMBA_OP_SET_CAPACITY) simba__mysql_sql_set_capacity(b, j, v, x, new_capacity, old_capacity);
    if (j->kind == SIMBA_OP_DELETE && v->exists[0]) {
        simba__mysql_putf(b, x, "DELETE FROM %s", b->t_resources);
        simba__mysql_where_res(b, x, j, 0);
        simba__mysql_put(b, x, ";\n");
    }
    simba__mysql_put(b, x, "COMMIT");
    simba__mysql_sql_release_bell(b, j, x);
}

/*>>locks.dispatch: one lock op as a transaction: decide, write, commit, answer (INSPECT too) */

/* An INSPECT entry's times, by the server's clock (NOW(6) of the reads):
   until its session's expires_ms; since its session's renewed_ms (-1 where
   that is 0: no client wrote it, simba__mysql_ent.renewed); since the grant
   from the fence, which is max(counter + 1, the server's time in us) at the
   grant (a lower bound when the counter ran ahead of the clock, -1 past it).
   A session renewed after that reading (its renewal committed between the
   reading and the reads) counts as renewed at it: never more than its
   lease left, and the two times sum to the lease. */
static void simba__mysql_holder_times(const simba__mysql_ent *e, const simba__mysql_eval *v, simba_holder *h) {
    int64_t now = e->renewed > v->now_ms ? e->renewed : v->now_ms;
    h->expires_in_ms = e->expires >= 0 ? e->expires - now : -1;
    h->renewed_ago_ms = e->renewed > 0 ? now - e->renewed : -1;
    if (!e->fence) h->held_ms = e->newfence ? 0 : -1;     /* granted by this very INSPECT: 0 */
    else h->held_ms = e->fence <= v->now_us ? (v->now_us - e->fence) / 1000 : -1;
}

/* Copy the live queue of res[0] into j->holders for INSPECT. */
static int simba__mysql_collect_holders(simba__mysql *b, simba__mysql_job *j, simba__mysql_eval *v) {
    int i, n = 0;
    for (i = 0; i < v->ne; i++) if (!v->e[i].dead && !v->e[i].removed) n++;
    j->nholders = 0;
    if (!n) return SIMBA_OK;
    j->holders = (simba_holder *)simba__mysql_alloc(b, (size_t)n * sizeof *j->holders);
    if (!j->holders) return SIMBA_ENOMEM;
    memset(j->holders, 0, (size_t)n * sizeof *j->holders);
    for (i = 0; i < v->ne; i++) {
        const simba__mysql_ent *e = &v->e[i];
        simba_holder *h;
        size_t cl = e->seslen;
        if (e->dead || e->removed) continue;
        h = &j->holders[j->nholders++];
        memcpy(h->session, e->session, e->seslen);
        h->session[e->seslen] = 0;
        /* the client id is the part of the session id before the last '~' */
        while (cl > 0 && e->session[cl - 1] != '~') cl--;
        cl = cl ? cl - 1 : e->seslen;
        if (cl > SIMBA_MAX_ID) cl = SIMBA_MAX_ID;
        memcpy(h->client, e->session, cl);
        h->client[cl] = 0;
        h->fence = e->fence ? e->fence : e->newfence;
        h->weight = e->weight;
        h->granted = h->fence > 0;
        simba__mysql_holder_times(e, v, h);
    }
    return SIMBA_OK;
}

/* Decide an op from its reads. Returns SIMBA_OK with either j->step set to
   "writes" (x holds the second half of the transaction) or to "answer"; or
   an error status (the transaction is then rolled back). `locked`: the reads
   were made under the row locks (else: the POLL fast path, which only
   answers when nothing needs writing). */
enum { SIMBA__MYSQL_DECIDE_ANSWER = 1, SIMBA__MYSQL_DECIDE_WRITE, SIMBA__MYSQL_DECIDE_LOCK,
       SIMBA__MYSQL_DECIDE_WIDEN, SIMBA__MYSQL_DECIDE_UNFOLD };

/* What the op itself changes in v, before the grant rule runs: our entries
   (present: how many live ones), removals, a new capacity. Sets *insert when
   an ENQUEUE adds our entry; SIMBA_OK or the op's refusal. */
static int simba__mysql_decide_op(simba__mysql_job *j, simba__mysql_eval *v, int present, int foreign_live,
                                  int *insert, int *old_capacity, int *new_capacity) {
    int i, r;
    switch (j->kind) {
    case SIMBA_OP_ENQUEUE:
        if (foreign_live) { j->release_bell = 1; return SIMBA_EKEYBUSY; }
        if (present && present != j->nres) { j->release_bell = 1; return SIMBA_ENOTFOUND; }
        if (!present) {
            for (r = 0; r < j->nres; r++)
                if (j->res[r].weight > v->capacity[r]) { j->release_bell = 1; return SIMBA_ECAPACITY; }
            *insert = 1;
        }
        return SIMBA_OK;
    case SIMBA_OP_POLL:
        return present != j->nres ? SIMBA_ENOTFOUND : SIMBA_OK;
    case SIMBA_OP_RELEASE:
        j->met_queue = 0;
        for (i = 0; i < v->ne; i++) {
            if (v->e[i].ours && !v->e[i].dead) v->e[i].removed = 1;
            if (!v->e[i].ours && !v->e[i].dead) j->met_queue = 1;
        }
        j->release_bell = 1;
        return SIMBA_OK;
    case SIMBA_OP_INSPECT:
        return SIMBA_OK; /* a missing resource answers capacity 0, no entries */
    case SIMBA_OP_SET_CAPACITY:
        *old_capacity = v->exists[0] ? v->capacity[0] : 0;
        *new_capacity = j->res[0].capacity;
        v->capacity[0] = *new_capacity;
        return SIMBA_OK;
    case SIMBA_OP_DELETE:
        /* deleting a missing resource is done already */
        for (i = 0; i < v->ne; i++) v->e[i].removed = 1;
        return SIMBA_OK;
    default:
        return SIMBA_EINVAL;
    }
}

/* Other requests of our current session this op finds granted: by its own
   grants (a RELEASE that lets our next waiter in, a locked op's new fences,
   committed with it) or already (a fence read). Only those the waiter
   connection watches (single-resource, waiting as far as we know): the
   core is told after the op succeeds (simba__mysql_push_grants), so a
   release by this client needs no ring and no re-poll for its own waiters. */
static void simba__mysql_note_grants(simba__mysql *b, simba__mysql_job *j, const simba__mysql_eval *v, int locked) {
    int i;
    for (i = 0; i < j->ngranted; i++) simba__mysql_free(b, j->granted_req[i]);
    j->ngranted = 0;
    if (!b->nwatch || !simba__mysql_is_current(b, j->session)) return;
    for (i = 0; i < v->ne && j->ngranted < SIMBA__MYSQL_PUSH_MAX; i++) {
        const simba__mysql_ent *e = &v->e[i];
        int64_t f = locked ? simba__mysql_fence_of(e) : e->fence;
        char req[160];
        const simba__mysql_watch *w;
        if (e->ours || e->foreign || !simba__mysql_live(e) || f <= 0 || e->reqlen >= sizeof req) continue;
        if (e->seslen != strlen(j->session) || memcmp(e->session, j->session, e->seslen) != 0) continue;
        memcpy(req, e->request, e->reqlen);
        req[e->reqlen] = 0;
        w = simba__mysql_watch_find(b, req);
        if (!w || !w->single || strcmp(w->session, j->session) != 0) continue;
        if (!(j->granted_req[j->ngranted] = simba__mysql_strdup(b, req))) return;
        j->granted_fence[j->ngranted++] = f;
    }
}

/* Sessions of other clients this locked op's transaction grants in a queue
   of capacity > 1: their waiter connections get a ring after the COMMIT
   (a capacity-1 grantee is rung by the bell of the entry right ahead). */
static void simba__mysql_note_rings(simba__mysql *b, simba__mysql_job *j, const simba__mysql_eval *v) {
    int i, k;
    j->nrings = 0;
    for (i = 0; i < v->ne && j->nrings < SIMBA__MYSQL_PUSH_MAX; i++) {
        const simba__mysql_ent *e = &v->e[i];
        uint64_t key;
        if (e->ours || !simba__mysql_live(e) || e->fence > 0 || e->newfence <= 0 || v->capacity[e->r] <= 1) continue;
        if (e->seslen == strlen(j->session) && memcmp(e->session, j->session, e->seslen) == 0) continue;
        key = simba__mysql_ring_key(b, j->tenant, e->session, e->seslen);
        for (k = 0; k < j->nrings && j->rings[k] != key; k++) {}
        if (k == j->nrings) j->rings[j->nrings++] = key;
    }
}

/* INSPECT's answer: the live queue, holders, the oldest holder. */
static int simba__mysql_answer_inspect(simba__mysql *b, simba__mysql_job *j, simba__mysql_eval *v) {
    int i, rc = simba__mysql_collect_holders(b, j, v);
    if (rc) return rc;
    j->reply.capacity = v->exists[0] ? v->capacity[0] : 0;   /* 0: no such resource */
    j->reply.held = 0;
    j->reply.entry_times = 1;
    j->reply.grace_ms = v->grace > 0 ? (v->grace > 0x3fffffff ? 0x3fffffff : (int)v->grace) : 0;
    j->owner[0] = 0;
    for (i = 0; i < j->nholders; i++) {
        if (!j->holders[i].granted) continue;
        if (!j->owner[0]) memcpy(j->owner, j->holders[i].session, sizeof j->owner);
        j->reply.held++;
    }
    return SIMBA_OK;
}

static int simba__mysql_decide(simba__mysql *b, simba__mysql_job *j, simba__mysql_eval *v, simba__mysql_buf *x, int locked,
                            int *what) {
    int i, r, present = 0, foreign_live = 0, insert = 0, dead = 0, assigned, rc;
    int64_t extra_fence[SIMBA_MAX_RESOURCES];
    int needs_session = j->kind == SIMBA_OP_ENQUEUE || j->kind == SIMBA_OP_POLL;
    int old_capacity = 0, new_capacity = 0;
    memset(extra_fence, 0, sizeof extra_fence);
    *what = SIMBA__MYSQL_DECIDE_ANSWER;
    j->release_bell = 0;
    j->exists = 0;
    if (needs_session && (v->our_expires < 0 || v->our_expires <= v->now_ms)) {
        if (j->kind == SIMBA_OP_ENQUEUE) j->release_bell = 1;
        return SIMBA_ESESSION;
    }
    for (i = 0; i < v->ne; i++) {
        simba__mysql_ent *e = &v->e[i];
        if (e->dead) { dead++; continue; }
        if (e->ours) present++;
        else if (e->foreign) foreign_live = 1;
    }
    rc = simba__mysql_decide_op(j, v, present, foreign_live, &insert, &old_capacity, &new_capacity);
    if (rc != SIMBA_OK) return rc;
    if (simba__mysql_window_short(j, v)) { *what = SIMBA__MYSQL_DECIDE_WIDEN; return SIMBA_OK; }
    assigned = simba__mysql_walk(j, v);
    if (insert) {
        simba__mysql_probe_new(j, v, extra_fence);
        if (j->try_only) {
            /* try-lock: insert nothing unless granted everywhere at once */
            for (r = 0; r < j->nres; r++) if (!extra_fence[r]) break;
            if (r < j->nres) { insert = 0; j->release_bell = 1; }
        }
    }
    simba__mysql_note_grants(b, j, v, locked);
    if (j->kind == SIMBA_OP_ENQUEUE || j->kind == SIMBA_OP_POLL) {
        simba__mysql_answer(b, j, v, insert ? extra_fence : NULL);
        j->exists = insert || present;
        if (!j->exists) { j->reply.granted = 0; j->reply.recheck_ms = -1; }
    } else if (j->kind == SIMBA_OP_INSPECT && (rc = simba__mysql_answer_inspect(b, j, v)) != SIMBA_OK) {
        return rc;
    }
    if (!locked) {
        /* fast path: answer only if the snapshot is settled */
        *what = (dead || assigned) ? SIMBA__MYSQL_DECIDE_LOCK : SIMBA__MYSQL_DECIDE_ANSWER;
        return SIMBA_OK;
    }
    *what = SIMBA__MYSQL_DECIDE_WRITE;
    simba__mysql_note_rings(b, j, v);
    simba__mysql_buf_clear(x);
    simba__mysql_sql_writes(b, j, v, x, insert, extra_fence, new_capacity, old_capacity);
    return SIMBA_OK;
}

/* ---- one round trip: the block that commits an ENQUEUE or RELEASE the server can decide alone ---- */

/* ENQUEUE and RELEASE of one resource go out as one statement: a CALL of
   the procedure create_schema installs (simba_mysql.sql holds the same),
   or, where it is missing or not ours to run, the same text as a MariaDB
   compound statement (BEGIN NOT ATOMIC ... END, which needs no privilege
   beyond the tables'). A procedure is compiled once per connection; the
   compound statement on every call. It opens the transaction, locks the
   resource row, and settles the op itself when the grant rule has at most
   one entry to look at:
     ENQUEUE: the queue is empty, our session is live, our weight fits the
       stored capacity, no restart grace: our entry goes in granted, with
       max(counter + 1, server time in us), and the transaction commits.
       A missing resource row is created first, as the C path creates it.
     RELEASE: nobody else is queued, or the queue has capacity 1 and its
       head without us is live: that head gets its fence unless it has one.
       Our entry goes, the transaction commits, our bell is given back.
   THIS IS THE SERVER'S COPY OF THE GRANT RULE (simba_grant_step and
   simba_grant_fence of simba.h), written once in simba__mysql_settle_body
   below (procedure and compound statement alike), for these cases only:
   an empty queue grants any weight that fits; an entry at the head always
   fits (its effective weight is at most the capacity), and in a
   capacity-1 queue nothing behind it can. The C copy (simba__mysql_walk,
   simba__mysql_probe_new) decides every other case (a waiter on an
   ENQUEUE, a dead head, a capacity > 1 queue with others in it, our
   entry already there: a request sent again): the statement
   then leaves the transaction open with the resource row locked, and the
   locking reads of simba__mysql_sql_reads follow in the next round trip,
   then the writes, as for every other op. (The reads stay out of it: a
   compound statement costs for every statement it holds, run or not, and
   the reads are the longest.) It answers one row: (2, fence or NULL when
   not settled, stored capacity, seq before the op, bell taken 1/0/NULL,
   the session and request of the entry a RELEASE granted). */
static int simba__mysql_is_mariadb(simba__mysql *b) {
    const char *v = b->main.m ? mysql_get_server_info(b->main.m) : NULL;
    /* compound statements outside stored programs: MariaDB >= 10.1 */
    return v && strstr(v, "MariaDB") && mysql_get_server_version(b->main.m) >= 100100;
}

static int simba__mysql_can_settle(simba__mysql *b, const simba__mysql_job *j) {
    return (j->kind == SIMBA_OP_ENQUEUE || j->kind == SIMBA_OP_RELEASE) && j->nres == 1 && !b->no_settle &&
           simba__mysql_is_mariadb(b);
}

/* The statement's inputs: the procedure's parameters, the compound
   statement's first variables. Their types are the columns'. */
static const char *const simba__mysql_settle_params[][2] = {
    {"p_tenant", "VARBINARY(64)"}, {"p_name", "VARBINARY(256)"}, {"p_request", "VARBINARY(128)"},
    {"p_session", "VARBINARY(96)"}, {"p_weight", "INT"}, {"p_capacity", "INT"},
    {"p_grace", "BIGINT"},      /* server ms before which nothing is granted (0: none) */
    {"p_bell", "VARBINARY(64)"} /* ENQUEUE: the bell to take, RELEASE: to give back (NULL: none) */
};
#define SIMBA__MYSQL_SETTLE_NPARAMS 8
/* the procedures' names: the suffix is their version, so that clients of
   releases with different bodies never call each other's */
static const char *const simba__mysql_settle_names[2] = {"settle_enqueue_3", "settle_release_3"};

/* sf: the fence settled (NULL: not settled), sc sk ss: the resource row,
   sb: the bell, hq hf hs hr hl: the head of the queue without us (seq,
   fence, session, request, live); a SELECT ... INTO that finds no row
   leaves them NULL */
static const char simba__mysql_settle_vars[] =
    "DECLARE sf, sk, ss, se, hq, hf BIGINT DEFAULT NULL;\n"
    "DECLARE sc, sb, hl, nf INT DEFAULT NULL;\nDECLARE hs, hr VARBINARY(128) DEFAULT NULL;\n"
    "DECLARE CONTINUE HANDLER FOR NOT FOUND SET nf = 1;\nSTART TRANSACTION;\n";

/* The server's copy of the grant rule ("$": the table prefix).
   [0] ENQUEUE: take the bell, lock the resource row (a new resource is
   created with the capacity asked for, as simba__mysql_sql_new_resource
   does; a client creating it at the same moment makes one of us fail on
   the duplicate key, roll back and run the op again), and if nobody is
   queued, insert our entry granted and commit.
   [1] RELEASE: lock the resource row and read the head of the queue
   without us (its entry, and whether its session is live). Settled when
   nobody else is queued, or, in a queue of capacity 1, when that head is
   live: it is then the one entry the rule can grant (the head always
   fits), and gets its fence now unless it has one. Our entry goes, the
   transaction commits, our bell is given back (which wakes the head's
   waiter, whose connection reads its fence in the next query).
   "Nobody queued" is read from the resource row when it can be: every
   entry goes in at seq + 1 under the row's lock (by clients of every
   version), and empty_seq is written only here, to the seq at which the
   queue is seen empty under that lock; so empty_seq = seq means the queue
   is empty, and empty_seq = seq - 1 with our entry deleted means it was
   ours alone. Otherwise (empty_seq behind: a client that does not write
   it, a queue emptied by the C path) the entries are read as before, and
   an empty queue seen there is written back. */
#define SIMBA__MYSQL_SETTLE_UNFOLD                                                                          \
    "IF sc < 0 THEN\n"                                                                                     \
    "INSERT INTO `$entries` (tenant,name,seq,request,session,weight,fence)"                               \
    " SELECT tenant,name,seq,h_request,h_session,h_weight,h_fence FROM `$resources`"                       \
    " WHERE tenant=p_tenant AND name=p_name;\n"                                                            \
    "UPDATE `$resources` SET capacity=-capacity, empty_seq=seq-1, h_request=NULL, h_session=NULL,"        \
    " h_weight=0, h_fence=0 WHERE tenant=p_tenant AND name=p_name;\n"                                      \
    "SET sc = -sc, se = -1;\nEND IF;\n"
static const char *const simba__mysql_settle_body[2] = {
    "IF p_bell IS NOT NULL THEN\n"
    "SET sb = IF(IS_USED_LOCK(p_bell) <=> CONNECTION_ID(), 1, GET_LOCK(p_bell, 0));\nEND IF;\n"
    "SELECT capacity, seq, GREATEST(counter + 1, " SIMBA__MYSQL_NOW_US "), empty_seq INTO sc, ss, sf, se"
    " FROM `$resources` WHERE tenant=p_tenant AND name=p_name FOR UPDATE;\n"
    "IF sc IS NULL THEN\n"
    "INSERT INTO `$resources` (tenant,name,capacity,counter,seq) VALUES (p_tenant,p_name,p_capacity,0,0);\n"
    "SET sc = p_capacity, ss = 0, se = -1, sf = GREATEST(1, " SIMBA__MYSQL_NOW_US ");\nEND IF;\n"
    SIMBA__MYSQL_SETTLE_UNFOLD
    "IF sc >= p_weight AND (se = ss OR NOT EXISTS (SELECT 1 FROM `$entries` WHERE tenant=p_tenant AND name=p_name))"
    " AND EXISTS (SELECT 1 FROM `$sessions` WHERE tenant=p_tenant AND session=p_session AND expires_ms > "
    SIMBA__MYSQL_NOW_MS ") AND " SIMBA__MYSQL_NOW_MS " >= p_grace THEN\n"
    "INSERT INTO `$entries` (tenant,name,seq,request,session,weight,fence)"
    " VALUES (p_tenant,p_name,ss+1,p_request,p_session,p_weight,sf);\n"
    "UPDATE `$resources` SET counter=sf, seq=ss+1, empty_seq=ss WHERE tenant=p_tenant AND name=p_name;\n"
    "COMMIT;\nELSE SET sf = NULL;\nEND IF;\n",

    "SELECT capacity, counter, seq, empty_seq INTO sc, sk, ss, se FROM `$resources`"
    " WHERE tenant=p_tenant AND name=p_name FOR UPDATE;\n"
    SIMBA__MYSQL_SETTLE_UNFOLD
    "IF se = ss - 1 THEN\n"
    "DELETE FROM `$entries` WHERE tenant=p_tenant AND name=p_name AND request=p_request AND session=p_session;\n"
    "IF ROW_COUNT() = 1 THEN\n"
    "UPDATE `$resources` SET empty_seq=ss WHERE tenant=p_tenant AND name=p_name;\n"
    "COMMIT;\nSET sf = 0;\nEND IF;\nEND IF;\n"
    "IF sf IS NULL THEN\n"
    "SELECT e.seq, e.fence, e.session, e.request, IFNULL(s.expires_ms > " SIMBA__MYSQL_NOW_MS ", 0)"
    " INTO hq, hf, hs, hr, hl FROM `$entries` e FORCE INDEX (PRIMARY) LEFT JOIN `$sessions` s"
    " ON s.tenant=e.tenant AND s.session=e.session WHERE e.tenant=p_tenant AND e.name=p_name"
    " AND (e.request<>p_request OR e.session<>p_session) ORDER BY e.seq LIMIT 1;\n"
    "IF hq IS NULL OR (sc = 1 AND hl = 1 AND " SIMBA__MYSQL_NOW_MS " >= p_grace) THEN\n"
    "DELETE FROM `$entries` WHERE tenant=p_tenant AND name=p_name AND request=p_request AND session=p_session;\n"
    "IF hq IS NOT NULL AND hf = 0 THEN\nSET sf = GREATEST(sk + 1, " SIMBA__MYSQL_NOW_US ");\n"
    "UPDATE `$entries` SET fence=sf WHERE tenant=p_tenant AND name=p_name AND seq=hq AND fence=0;\n"
    "UPDATE `$resources` SET counter=sf WHERE tenant=p_tenant AND name=p_name;\n"
    "ELSE SET sf = 0, hs = NULL, hr = NULL;\nEND IF;\n"
    "IF hq IS NULL THEN\nUPDATE `$resources` SET empty_seq=ss WHERE tenant=p_tenant AND name=p_name;\nEND IF;\n"
    "COMMIT;\n"
    "ELSE SET sf = NULL;\nEND IF;\nEND IF;\n"
    "IF sf IS NOT NULL AND p_bell IS NOT NULL THEN\nDO RELEASE_LOCK(p_bell);\nEND IF;\n"};

/* text with every '$' replaced by the table prefix */
static void simba__mysql_put_prefixed(simba__mysql *b, simba__mysql_buf *x, const char *text) {
    while (*text) {
        size_t run = strcspn(text, "$");
        if (!simba__mysql_reserve(b, x, run)) return;
        memcpy(x->p + x->n, text, run);
        x->n += run;
        x->p[x->n] = 0;
        text += run;
        if (*text == '$') { simba__mysql_put(b, x, b->prefix); text++; }
    }
}

/* The body of procedure or compound statement k (0 ENQUEUE, 1 RELEASE),
   after its inputs: variables, START TRANSACTION, the rule, the answer. */
static void simba__mysql_put_settle_body(simba__mysql *b, simba__mysql_buf *x, int k) {
    simba__mysql_put(b, x, simba__mysql_settle_vars);
    simba__mysql_put_prefixed(b, x, simba__mysql_settle_body[k]);
    simba__mysql_put(b, x, "SELECT 2 AS k, sf, sc, ss, sb, hs, hr;\nEND");
}

/* CREATE PROCEDURE of both procedures (create_schema, on MariaDB): two
   statements; "$" stands for the table prefix in the procedures' names. */
static void simba__mysql_sql_routines(simba__mysql *b, simba__mysql_buf *x) {
    int k, i;
    simba__mysql_buf_clear(x);
    for (k = 0; k < 2; k++) {
        simba__mysql_putf(b, x, "%sCREATE PROCEDURE IF NOT EXISTS `%s%s`(", k ? ";\n" : "", b->prefix,
                          simba__mysql_settle_names[k]);
        for (i = 0; i < SIMBA__MYSQL_SETTLE_NPARAMS; i++)
            simba__mysql_putf(b, x, "%s%s %s", i ? ", " : "", simba__mysql_settle_params[i][0],
                              simba__mysql_settle_params[i][1]);
        simba__mysql_put(b, x, ")\nMODIFIES SQL DATA SQL SECURITY INVOKER\nBEGIN\n");
        simba__mysql_put_settle_body(b, x, k);
    }
}

/* Input i of the statement for job j, as an SQL value. */
static void simba__mysql_settle_arg(simba__mysql *b, simba__mysql_buf *x, const simba__mysql_job *j, int i) {
    int w = j->res[0].weight < 0 ? 0 : j->res[0].weight, cap = j->res[0].capacity > 0 ? j->res[0].capacity : 1;
    int bell = j->kind == SIMBA_OP_ENQUEUE ? j->took_bell : j->settle_release;
    switch (i) {
    case 0: simba__mysql_hexs(b, x, j->tenant); break;
    case 1: simba__mysql_hex(b, x, j->res[0].name, j->res[0].len); break;
    case 2: simba__mysql_hexs(b, x, j->request); break;
    case 3: simba__mysql_hexs(b, x, j->session); break;
    case 4: simba__mysql_putf(b, x, "%d", w); break;
    case 5: simba__mysql_putf(b, x, "%d", cap); break;
    case 6: simba__mysql_putf(b, x, "%lld", (long long)(b->grace_until_ms > 0 ? b->grace_until_ms : 0)); break;
    default:
        if (bell) simba__mysql_bellname(b, x, j->bell);
        else simba__mysql_put(b, x, "NULL");
        break;
    }
}

/* The first batch of an ENQUEUE or RELEASE that may settle in one round
   trip: a CALL of the installed procedure, or the same as a compound
   statement (b->routines 0: not installed, or not ours to run). */
static void simba__mysql_sql_settle(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    size_t n;
    int i, k = j->kind == SIMBA_OP_ENQUEUE ? 0 : 1, semis = 0;
    simba__mysql_buf_clear(x);
    j->settle = 1;
    j->settle_call = b->routines;
    if (k == 0) {
        j->took_bell = simba__mysql_wants_bell(b, j);
    } else {
        j->release_bell = 1;
        j->settle_release = simba__mysql_bell_due(b, j);
        j->release_bell = 0;
    }
    if (j->settle_call) {
        simba__mysql_putf(b, x, "CALL `%s%s`(", b->prefix, simba__mysql_settle_names[k]);
        for (i = 0; i < SIMBA__MYSQL_SETTLE_NPARAMS; i++) {
            if (i) simba__mysql_put(b, x, ",");
            simba__mysql_settle_arg(b, x, j, i);
        }
        simba__mysql_put(b, x, ")");
        b->stats.calls++;
        return;
    }
    simba__mysql_put(b, x, "BEGIN NOT ATOMIC\n");
    for (i = 0; i < SIMBA__MYSQL_SETTLE_NPARAMS; i++) {
        simba__mysql_putf(b, x, "DECLARE %s %s DEFAULT ", simba__mysql_settle_params[i][0],
                          simba__mysql_settle_params[i][1]);
        simba__mysql_settle_arg(b, x, j, i);
        simba__mysql_put(b, x, ";\n");
    }
    simba__mysql_put_settle_body(b, x, k);
    for (n = 0; n < x->n; n++) if (x->p[n] == ';') semis++;
    b->block_semis = semis;
}

/* THE HOLD IN THE ROW. A sole holder that found its queue empty has no
   entry row: its hold is kept in the resource's row, marked by a negative
   capacity (-capacity) with its request, session, weight and fence in the
   h_ columns and its queue position in seq. So an uncontended ENQUEUE is
   one UPDATE of that row and its RELEASE another, each one statement sent
   alone (no CALL, no transaction block): the row's affected count says
   whether it took, and LAST_INSERT_ID(expr) carries the fence (times two,
   plus the bell taken) out in the OK packet, without a result set.
   Why the UPDATE can decide alone: its WHERE reads only the row's own
   columns, and InnoDB evaluates an UPDATE's condition on the newest
   committed version of the row, again after any wait for its lock (READ
   COMMITTED's semi-consistent read re-reads a row it must change); a
   subquery could read an older snapshot, so there is none. The queue is
   empty when empty_seq = seq (every entry goes in at seq + 1 under the
   row's lock, by clients of every version); a positive capacity equal to
   the one asked for means no hold in the row; the restart grace is a
   constant compared with the server's clock, on a connection made while
   the grace ran (after it, by the server's clock at connect, there is
   nothing to compare: simba__mysql_grace). Our session's liveness is
   not read: the core believes a grant only while its session is safe
   (simba__session_safe of simba.h: before the local deadline of its last
   confirmed renewal, which is before the server's expiry of it), and a
   session is deleted before it expires only by its own CLOSE, after its
   last op. A grant to a session the server already let go is therefore
   never believed by anyone, and the hold is dead to everyone else.
   Everything else (a second request, POLL, INSPECT, SET_CAPACITY, DELETE,
   the procedures) first turns a hold in the row into the queue's entry
   (simba__mysql_sql_unfold, SIMBA__MYSQL_SETTLE_UNFOLD) under the row's
   lock, so the grant rule only ever walks entries; a RELEASE whose UPDATE
   then matches nothing goes the procedures' way. A client that does not
   know the h_ columns (an older release) reads the negative capacity as
   bad data (SIMBA_EPROTO, "a resource capacity <= 0"), and its procedures
   (version 2 and 1) settle nothing on it: it can neither grant past a hold
   in the row nor remove it. */
static void simba__mysql_settled(simba__mysql *b, simba__mysql_job *j, int64_t fence, int cap, int64_t seq,
                                 simba__mysql_ent *head);

/* Where a RELEASE looks first. A hold is in the row only while nobody
   queued behind it: a waiter moves it into the queue, and then the row's
   UPDATE matches nothing, a round trip spent on the hand-off's path before
   the CALL. So a name is marked busy when an ENQUEUE of ours on it ended
   as an entry (its hold, or its wait, is not in the row) or a RELEASE of
   ours on it met other requests' entries, and unmarked when a RELEASE
   found it alone; a RELEASE of a busy name goes the procedures' way at
   once. The mark is a guess that costs time only when wrong, never
   safety: either way releases the hold wherever it is (the procedures
   and the C path move a hold in the row into the queue first, under the
   row's lock). One hash per slot, direct-mapped: a collision forgets or
   invents a mark, nothing more. */
static uint64_t simba__mysql_busy_key(const simba__mysql *b, const simba__mysql_job *j) {
    uint64_t h = simba__mysql_fnv(b->deploy, j->tenant, strlen(j->tenant));
    h = simba__mysql_fnv(h, j->res[0].name, j->res[0].len);
    return h ? h : 1; /* 0 marks an empty slot */
}

static int simba__mysql_busy_has(const simba__mysql *b, const simba__mysql_job *j) {
    uint64_t h = simba__mysql_busy_key(b, j);
    return b->busy[h % SIMBA__MYSQL_BUSY_SLOTS] == h;
}

static void simba__mysql_busy_note(simba__mysql *b, const simba__mysql_job *j, int busy) {
    uint64_t h = simba__mysql_busy_key(b, j), *slot = &b->busy[h % SIMBA__MYSQL_BUSY_SLOTS];
    if (busy) *slot = h;
    else if (*slot == h) *slot = 0;
}

static int simba__mysql_can_row(simba__mysql *b, simba__mysql_job *j) {
    int cap, w;
    if (b->no_row_hold || j->row_tried || j->nres != 1) return 0;
    if (j->kind == SIMBA_OP_RELEASE && simba__mysql_busy_has(b, j)) {
        j->row_tried = 1;   /* decided once per op: a retry neither tries nor counts it again */
        b->stats.row_skips++;
        return 0;
    }
    if (j->kind == SIMBA_OP_RELEASE) return 1;
    if (j->kind != SIMBA_OP_ENQUEUE) return 0;
    cap = j->res[0].capacity > 0 ? j->res[0].capacity : 1;
    w = j->res[0].weight < 0 ? 0 : j->res[0].weight;
    return w <= cap;
}

/* The one statement of an uncontended ENQUEUE (our hold into the row) or
   RELEASE (it out again), sent as text or prepared (simba__mysql_args):
   the same statement either way, since what differs between ops, whether
   the bell is taken (and how) or given back and the restart grace's end,
   are values in it, not text (IF() runs only the branch it picks, so a
   bell not asked for is never touched). The grace's comparison is there
   only on a connection made while a grace ran (simba__mysql_grace decides
   at connect, and prepared statements die with their connection). Each
   assignment reads only columns no earlier one in the list wrote, so
   MariaDB's SIMULTANEOUS_ASSIGNMENT mode changes nothing. The RELEASE
   gives our bell back inside the statement: nobody can be waiting on it
   (a second request would have moved the hold out of the row, and the
   UPDATE would match nothing). j NULL: the text to prepare (MARKS),
   without values. */
static void simba__mysql_sql_row(simba__mysql *b, int kind, const simba__mysql_job *j, simba__mysql_buf *x,
                                 int mode) {
    simba__mysql_args a;
    const char *tenant = j ? j->tenant : "", *req = j ? j->request : "", *ses = j ? j->session : "";
    const char *name = j ? j->res[0].name : "";
    size_t namelen = j ? j->res[0].len : 0;
    uint64_t bell = j ? j->bell : 0;
    a.b = b;
    a.x = x;
    a.mode = mode;
    b->ps_arg = 0;
    simba__mysql_buf_clear(x);
    simba__mysql_putf(b, x, "UPDATE %s SET capacity=-capacity, ", b->t_resources);
    if (kind == SIMBA_OP_ENQUEUE) {
        int cap = j && j->res[0].capacity > 0 ? j->res[0].capacity : 1;
        int w = j && j->res[0].weight > 0 ? j->res[0].weight : 0;
        simba__mysql_put(b, x, "h_request=");
        simba__mysql_arg_bytes(&a, req, strlen(req));
        simba__mysql_put(b, x, ", h_session=");
        simba__mysql_arg_bytes(&a, ses, strlen(ses));
        simba__mysql_put(b, x, ", h_weight=");
        simba__mysql_arg_num(&a, w);
        simba__mysql_put(b, x, ", h_fence=LAST_INSERT_ID(GREATEST(counter+1, " SIMBA__MYSQL_NOW_US ")*2+IF(");
        simba__mysql_arg_num(&a, j && j->took_bell);
        simba__mysql_put(b, x, ", IFNULL(");
        simba__mysql_arg_take_new_bell(&a, bell);
        simba__mysql_put(b, x, ", 0), 0)) DIV 2, counter=GREATEST(counter+1, " SIMBA__MYSQL_NOW_US
                         "), empty_seq=seq, seq=seq+1 WHERE tenant=");
        simba__mysql_arg_bytes(&a, tenant, strlen(tenant));
        simba__mysql_put(b, x, " AND name=");
        simba__mysql_arg_bytes(&a, name, namelen);
        simba__mysql_put(b, x, " AND capacity=");
        simba__mysql_arg_num(&a, cap);
        simba__mysql_put(b, x, " AND empty_seq=seq");
        if (b->grace_over) return;
        simba__mysql_put(b, x, " AND " SIMBA__MYSQL_NOW_MS " >= ");
        simba__mysql_arg_num(&a, b->grace_until_ms > 0 ? (long long)b->grace_until_ms : 0);
        return;
    }
    simba__mysql_put(b, x, "empty_seq=seq, h_request=NULL, h_session=NULL, h_weight=0, h_fence=IF(");
    simba__mysql_arg_num(&a, j && j->settle_release);
    simba__mysql_put(b, x, ", LEAST(IFNULL(RELEASE_LOCK(");
    simba__mysql_arg_bell(&a, bell);
    simba__mysql_put(b, x, "), 0), 0), 0) WHERE tenant=");
    simba__mysql_arg_bytes(&a, tenant, strlen(tenant));
    simba__mysql_put(b, x, " AND name=");
    simba__mysql_arg_bytes(&a, name, namelen);
    simba__mysql_put(b, x, " AND capacity<0 AND h_request=");
    simba__mysql_arg_bytes(&a, req, strlen(req));
    simba__mysql_put(b, x, " AND h_session=");
    simba__mysql_arg_bytes(&a, ses, strlen(ses));
}

/* What the row statement of j decides before it is built: it is tried once
   per op; an ENQUEUE takes its bell in it when it may have one, a RELEASE
   gives its bell back in it when one is due. */
static void simba__mysql_row_begin(simba__mysql *b, simba__mysql_job *j) {
    j->row = 1;
    j->row_tried = 1;
    if (j->kind == SIMBA_OP_ENQUEUE) {
        j->took_bell = simba__mysql_wants_bell(b, j);
        return;
    }
    j->release_bell = 1;
    j->settle_release = simba__mysql_bell_due(b, j);
    j->release_bell = 0;
}

static void simba__mysql_queue_prepare(simba__mysql *b);

/* PREPARED ROW STATEMENTS. The row statements are most of what a client
   sends (an uncontended acquire and its release), and the server's parse
   of their text is a good part of what each costs it. So each main
   connection prepares them once, in a job of its own queued when it has
   sent SIMBA__MYSQL_PS_AFTER of them as text (never in an op's way: an op
   waits for it only when submitted while it runs; a one-shot client never
   prepares), and sends them prepared from then on: the same statement,
   values bound. A server that will not prepare them (max_prepared_stmt_count
   reached, a proxy without the binary protocol) gets them as text until
   the next connect. */
static void simba__mysql_row_send(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_conn *c = &b->main;
    int k = j->kind == SIMBA_OP_ENQUEUE ? SIMBA__MYSQL_PS_ENQUEUE : SIMBA__MYSQL_PS_RELEASE;
    simba__mysql_row_begin(b, j);
    if (!b->no_prepare && (c->ps_ready >> k & 1)) {
        j->step = SIMBA__MYSQL_S_ROW;
        simba__mysql_sql_row(b, j->kind, j, &c->sql, SIMBA__MYSQL_ARGS_BIND);
        b->stats.batches++;
        b->stats.statements++;
        b->stats.row_prepared++;
        if (c->sql.oom || mysql_stmt_bind_param(c->ps[k], b->ps_bind)) {
            simba__mysql_set_error(c, CR_OUT_OF_MEMORY, "binding the row statement's values failed");
            return;
        }
        simba__mysql_conn_start(b, c, SIMBA__MYSQL_Q_EXECUTE, c->ps[k]);
        return;
    }
    simba__mysql_sql_row(b, j->kind, j, &c->sql, SIMBA__MYSQL_ARGS_TEXT);
    simba__mysql_send_step(b, j, SIMBA__MYSQL_S_ROW);
    if (++c->ps_text >= SIMBA__MYSQL_PS_AFTER) simba__mysql_queue_prepare(b);
}

static void simba__mysql_queue_prepare(simba__mysql *b) {
    simba__mysql_job *j;
    if (b->no_prepare || b->main.ps_ready == (1 << SIMBA__MYSQL_NPS) - 1) return;
    for (j = b->head; j; j = j->next) if (j->kind == SIMBA__MYSQL_JOB_PREPARE) return;
    j = simba__mysql_job_new(b, SIMBA__MYSQL_JOB_PREPARE);
    if (j) simba__mysql_push(b, j, 0);   /* no memory: the text goes on, and asks again */
}

/* The PREPARE job: each row statement not prepared yet, one round trip each. */
static void simba__mysql_step_prepare(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_conn *c = &b->main;
    int k;
    if (j->step == SIMBA__MYSQL_S_PREPARE) {
        for (k = 0; k < SIMBA__MYSQL_NPS; k++) if (c->ps[k] && c->ps[k] == c->ps_run) c->ps_ready |= 1 << k;
        b->stats.prepares++;
    }
    for (k = 0; k < SIMBA__MYSQL_NPS && (c->ps_ready >> k & 1); k++) {}
    if (k == SIMBA__MYSQL_NPS || b->no_prepare) {
        simba__mysql_finish(b, j, SIMBA_OK, NULL);
        return;
    }
    if (!c->ps[k] && (c->ps[k] = mysql_stmt_init(c->m)) == NULL) {
        simba__mysql_finish(b, j, SIMBA_OK, NULL);   /* no memory: text, and ask again next time */
        return;
    }
    simba__mysql_sql_row(b, k == SIMBA__MYSQL_PS_ENQUEUE ? SIMBA_OP_ENQUEUE : SIMBA_OP_RELEASE, NULL, &c->sql,
                         SIMBA__MYSQL_ARGS_MARKS);
    j->step = SIMBA__MYSQL_S_PREPARE;
    simba__mysql_conn_start(b, c, SIMBA__MYSQL_Q_PREPARE, c->ps[k]);
}

/* The server refused a PREPARE (not a lost connection): text from now on,
   until the next connect. */
static void simba__mysql_prepare_refused(simba__mysql *b, simba__mysql_job *j) {
    char msg[300];
    simba__mysql_error_words(msg, sizeof msg, "", b->main.err, b->main.errmsg);
    simba_backend_log(b->s, SIMBA_LOG_INFO, "simba_mysql: the row statements go as text: %s", msg);
    b->no_prepare = 1;
    simba__mysql_finish(b, j, SIMBA_OK, NULL);
}

/* The C path's reads found holds in rows (negative capacities): turn them
   into entries, under the row locks the reads took, before reading again.
   The entry keeps the hold's queue position (the row's seq), request,
   session, weight and fence; empty_seq = seq - 1 says it is alone. */
static void simba__mysql_sql_unfold(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x, int *nst) {
    simba__mysql_putf(b, x, "INSERT INTO %s (tenant,name,seq,request,session,weight,fence)"
                      " SELECT tenant,name,seq,h_request,h_session,h_weight,h_fence FROM %s",
                      b->t_entries, b->t_resources);
    simba__mysql_where_tenant(b, x, j);
    simba__mysql_put(b, x, " AND ");
    simba__mysql_names_in(b, x, j);
    simba__mysql_put(b, x, " AND capacity<0;\n");
    simba__mysql_putf(b, x, "UPDATE %s SET capacity=-capacity, empty_seq=seq-1, h_request=NULL, h_session=NULL,"
                      " h_weight=0, h_fence=0", b->t_resources);
    simba__mysql_where_tenant(b, x, j);
    simba__mysql_put(b, x, " AND ");
    simba__mysql_names_in(b, x, j);
    simba__mysql_put(b, x, " AND capacity<0;\n");
    *nst += 2;
}

/* The row statement came back: settled (one row changed), or on to the
   procedures' way. */
static void simba__mysql_row_done(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_conn *c = &b->main;
    uint64_t n = simba__mysql_affected(c), id = c->nres >= 1 ? c->insert_id[0] : 0;
    simba__mysql_ent head;
    j->row = 0;
    simba__mysql_free_results(c);
    memset(&head, 0, sizeof head);
    if (n == 1 && j->kind == SIMBA_OP_ENQUEUE) {
        int64_t fence = (int64_t)(id >> 1);
        if (fence <= 0) {
            /* it took, so the fence must be there: the row's fence is the
               truth, read by the core's next POLL; say so rather than guess */
            snprintf(j->msg, sizeof j->msg, "unexpected data in the simba tables: a hold in the row without its fence");
            j->release_bell = 0;
            simba__mysql_finish(b, j, SIMBA_EPROTO, j->msg);
            return;
        }
        if (j->took_bell && !(id & 1)) j->took_bell = 0;
        b->stats.row_holds++;
        j->row_held = 1;
        simba__mysql_settled(b, j, fence, j->res[0].capacity > 0 ? j->res[0].capacity : 1, 0, &head);
        return;
    }
    if (n == 1) {
        b->stats.row_releases++;
        j->met_queue = 0;
        simba__mysql_settled(b, j, 0, 1, 0, &head);
        return;
    }
    /* nothing matched (nothing was done, no bell taken or given): the op
       goes the procedures' way */
    b->stats.row_misses++;
    j->took_bell = 0;
    j->settle_release = 0;
    j->step = SIMBA__MYSQL_S_FIRST;
    simba__mysql_step_lock(b, j);
}

/* Did the block settle the op? 1, 0 (the transaction is open), or
   SIMBA_EPROTO as a negative. *bell: the bell's GET_LOCK gave 1. */
static int simba__mysql_parse_settle(simba__mysql_conn *c, int64_t *fence, int *cap, int64_t *seq, int *bell,
                                     simba__mysql_ent *head) {
    MYSQL_RES *r = c->nres >= 1 ? c->res[0] : NULL;
    MYSQL_ROW row;
    unsigned long *len;
    if (!r || mysql_num_fields(r) != 7 || !(row = mysql_fetch_row(r)) || !(len = mysql_fetch_lengths(r)) || !row[0] ||
        len[0] != 1 || row[0][0] != '2')
        return -SIMBA_EPROTO;
    memset(head, 0, sizeof *head);
    if (row[5] && row[6]) {     /* a RELEASE's grant: the entry it granted */
        if (len[5] == 0 || len[5] > SIMBA_MAX_SESSION || len[6] == 0 || len[6] > 128) return -SIMBA_EPROTO;
        head->session = row[5];
        head->seslen = len[5];
        head->request = row[6];
        head->reqlen = len[6];
    }
    *bell = row[4] && len[4] == 1 && row[4][0] == '1';
    if (!row[1]) return 0;
    if (!simba__mysql_int64(row[1], len[1], fence) || *fence < 0) return -SIMBA_EPROTO;
    if (row[2] && !simba__mysql_int(row[2], len[2], cap)) return -SIMBA_EPROTO;
    if (row[3] && !simba__mysql_int64(row[3], len[3], seq)) return -SIMBA_EPROTO;
    return 1;
}

/* The block committed: answer as the C rule answers for a queue with
   nobody else in it (an ENQUEUE granted alone, a RELEASE that grants
   nobody). */
static void simba__mysql_settled(simba__mysql *b, simba__mysql_job *j, int64_t fence, int cap, int64_t seq,
                                 simba__mysql_ent *head) {
    simba__mysql_eval v;
    int64_t f[SIMBA_MAX_RESOURCES];
    memset(&v, 0, sizeof v);
    memset(f, 0, sizeof f);
    b->stats.transactions++;
    j->ngranted = 0;
    j->nrings = 0;
    j->release_bell = 0;
    if (j->kind == SIMBA_OP_RELEASE) j->met_queue = fence > 0 && head->request;
    if (j->kind == SIMBA_OP_RELEASE && fence > 0 && head->request) {
        /* the head we granted: pushed to the core if it is a waiting
           request of ours (capacity 1: no ring, the bell wakes others) */
        head->newfence = fence;
        head->foreign = head->reqlen == strlen(j->request) && memcmp(head->request, j->request, head->reqlen) == 0;
        v.e = head;
        v.ne = 1;
        simba__mysql_note_grants(b, j, &v, 1);
        v.e = NULL;
        v.ne = 0;
    }
    if (j->kind == SIMBA_OP_ENQUEUE) {
        v.exists[0] = 1;
        v.capacity[0] = cap;
        v.seq[0] = seq;
        f[0] = fence;
        simba__mysql_answer(b, j, &v, f);
        j->exists = 1;
    } else {
        j->bell_released = j->settle_release;
    }
    simba__mysql_finish(b, j, SIMBA_OK, NULL);
}

/* The reads of a lock op came back: decide, then answer, take the row
   locks (the POLL fast path found writes to do) or send the writes. */
static void simba__mysql_lock_reads_done(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_conn *c = &b->main;
    int locked = j->step == SIMBA__MYSQL_S_READS, what = 0, status, born = 0;
    simba__mysql_eval v;
    if (j->settle) {
        int64_t fence = 0, seq = 0;
        simba__mysql_ent head;
        int cap = 1, bell = 0, settled = simba__mysql_parse_settle(c, &fence, &cap, &seq, &bell, &head);
        j->settle = 0;
        /* GET_LOCK(bell, 0) is 0 when another connection has the name: then
           the entry has no bell (simba__mysql_parse_header) */
        if (j->took_bell && !bell) j->took_bell = 0;
        if (settled > 0) { simba__mysql_settled(b, j, fence, cap, seq, &head); return; }
        if (settled == 0) {
            /* the rule has a queue to walk: the locking reads, in the
               transaction the block opened (the bell as the block took it) */
            int nst = 0;
            simba__mysql_free_results(c);
            simba__mysql_buf_clear(&c->sql);
            simba__mysql_sql_reads(b, j, &c->sql, &nst, 1, 0);
            simba__mysql_send_step(b, j, SIMBA__MYSQL_S_READS);
            return;
        }
        /* a row of the wrong shape: committed or not, we cannot tell; the
           core's retry is safe (the request id makes the op idempotent) */
        simba__mysql_free_results(c);
        snprintf(j->msg, sizeof j->msg, "unexpected data in the simba tables: the one-round-trip block's row");
        simba__mysql_rollback(b, j, SIMBA_EPROTO, 0);
        return;
    }
    status = simba__mysql_parse_reads(b, j, c, &v, locked);
    if (status == SIMBA_OK && v.torn && locked) {
        /* a resource row born between our locked reads (parse_entry): a
           race like a deadlock, so run the op again; a row that stays
           missing under its entries is bad data */
        born = 1;
        if (j->attempts >= SIMBA__MYSQL_MAX_RETRIES) {
            status = SIMBA_EPROTO;
            v.why = "a queue entry without its resource row, read again and again";
        }
    } else if (status == SIMBA_OK && v.torn) {
        what = SIMBA__MYSQL_DECIDE_LOCK;
    } else if (status == SIMBA_OK && v.row_holds) {
        /* a hold in a row: locked, it becomes the queue's entry and the
           queues are read again in the same transaction; unlocked (a POLL's
           first reads), the op takes the row locks first */
        what = locked ? SIMBA__MYSQL_DECIDE_UNFOLD : SIMBA__MYSQL_DECIDE_LOCK;
        if (locked && j->unfolded) {
            /* our unfold ran under the row locks: a hold still there is not
               one this code wrote */
            status = SIMBA_EPROTO;
            v.why = "a hold in a resource row that stays after it was moved into the queue";
        }
    } else if (status == SIMBA_OK) {
        status = simba__mysql_decide(b, j, &v, &c->sql, locked, &what);
    }
    simba__mysql_free(b, v.e);
    /* decide() copied what it needs: the results can go */
    simba__mysql_free_results(c);
    if (born && status == SIMBA_OK) {
        b->stats.retries++;
        simba__mysql_rollback(b, j, SIMBA_OK, 1);
        return;
    }
    if (status != SIMBA_OK) {
        if (status == SIMBA_EPROTO)
            snprintf(j->msg, sizeof j->msg, "unexpected data in the simba tables: %s", v.why ? v.why : "?");
        if (!locked) simba__mysql_finish(b, j, status, j->msg);
        else simba__mysql_rollback(b, j, status, 0);
        return;
    }
    if (what == SIMBA__MYSQL_DECIDE_ANSWER) {
        simba__mysql_finish(b, j, SIMBA_OK, NULL);
    } else if (what == SIMBA__MYSQL_DECIDE_LOCK) {
        /* the snapshot needs writes: do it again under the row locks */
        int nst = 0;
        simba__mysql_buf_clear(&c->sql);
        simba__mysql_sql_reads(b, j, &c->sql, &nst, 1, 1);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_READS);
    } else if (what == SIMBA__MYSQL_DECIDE_UNFOLD) {
        int nst = 0;
        simba__mysql_buf_clear(&c->sql);
        j->unfolded = 1;
        simba__mysql_sql_unfold(b, j, &c->sql, &nst);
        simba__mysql_sql_reads(b, j, &c->sql, &nst, 1, 0);
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_READS);
    } else if (what == SIMBA__MYSQL_DECIDE_WIDEN) {
        /* the grant rule reaches past a window: read twice as far (in the
           transaction already open, when there is one) */
        int nst = 0;
        j->widen++;
        b->stats.widened++;
        simba__mysql_buf_clear(&c->sql);
        simba__mysql_sql_reads(b, j, &c->sql, &nst, locked, 0);
        simba__mysql_send_step(b, j, j->step);
    } else {
        simba__mysql_send_step(b, j, SIMBA__MYSQL_S_WRITES);
    }
}

/* ENQUEUE, POLL, RELEASE, INSPECT, SET_CAPACITY, DELETE: reads (a POLL
   first without locks), the decision, writes + COMMIT. */
static void simba__mysql_step_lock(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_buf *x = &b->main.sql;
    int nst = 0;
    switch (j->step) {
    case SIMBA__MYSQL_S_FIRST:
        j->settle = 0;
        if (simba__mysql_can_row(b, j)) {
            simba__mysql_row_send(b, j);
            return;
        }
        if (simba__mysql_can_settle(b, j)) {
            simba__mysql_sql_settle(b, j, x);
            simba__mysql_send_step(b, j, SIMBA__MYSQL_S_READS);
            return;
        }
        simba__mysql_buf_clear(x);
        simba__mysql_sql_reads(b, j, x, &nst, j->kind != SIMBA_OP_POLL, 1);
        simba__mysql_send_step(b, j, j->kind == SIMBA_OP_POLL ? SIMBA__MYSQL_S_FAST : SIMBA__MYSQL_S_READS);
        return;
    case SIMBA__MYSQL_S_ROW:
        simba__mysql_row_done(b, j);
        return;
    case SIMBA__MYSQL_S_FAST:
    case SIMBA__MYSQL_S_READS:
        simba__mysql_lock_reads_done(b, j);
        return;
    case SIMBA__MYSQL_S_WRITES:
        b->stats.transactions++;
        simba__mysql_finish(b, j, SIMBA_OK, NULL);
        return;
    default:
        simba__mysql_free_results(&b->main);
        simba__mysql_pop(b);
        simba__mysql_complete(b, j, SIMBA_EPROTO, "simba_mysql: bad job state");
        simba__mysql_job_free(b, j);
        return;
    }
}

/*>>wakeups: bells (user locks), the watches of the waiter connection -> simba_backend_granted, simba_backend_recheck */

/* With capacity > 1 the bell covers only the oldest holder; a release by
   another one would wait for the core's re-check period. So such waits also
   re-poll on their own: 50 ms after a change, doubling to 1 s while nothing
   changes. */
enum { SIMBA__MYSQL_POLL_MIN_MS = 50, SIMBA__MYSQL_POLL_MAX_MS = 1000 };

/* The functions of this section, so that its sub-sections can follow the
   vocabulary of docs/backends.md whatever calls what. */
static uint64_t simba__mysql_bell(const simba__mysql *b, const char *tenant, const char *req, size_t reqlen);
static void simba__mysql_bellname(simba__mysql *b, simba__mysql_buf *x, uint64_t bell);
static uint64_t simba__mysql_ring_key(const simba__mysql *b, const char *tenant, const char *session, size_t seslen);
static void simba__mysql_queue_rings(simba__mysql *b, const simba__mysql_job *op);
static void simba__mysql_step_ring(simba__mysql *b, simba__mysql_job *j);
static void simba__mysql_ring_refused(simba__mysql *b, simba__mysql_job *j);
static void simba__mysql_mine_put(uint64_t *keys, int cap, uint64_t h);
static int simba__mysql_mine_has(const simba__mysql *b, uint64_t h);
static int simba__mysql_mine_add(simba__mysql *b, uint64_t h);
static void simba__mysql_mine_del(simba__mysql *b, uint64_t h);
static void simba__mysql_mine_clear(simba__mysql *b);
static void simba__mysql_queue_bell_release_raw(simba__mysql *b, uint64_t bell);
static void simba__mysql_queue_bell_release(simba__mysql *b, uint64_t bell);
static void simba__mysql_queue_retake(simba__mysql *b);
static void simba__mysql_sql_bells(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x);
static void simba__mysql_step_bells(simba__mysql *b, simba__mysql_job *j);
static simba__mysql_watch *simba__mysql_watch_find(simba__mysql *b, const char *request);
static void simba__mysql_watch_del(simba__mysql *b, const char *request);
static void simba__mysql_watch_set(simba__mysql *b, const char *tenant, const char *session, const char *request, const char *name, size_t namelen, int single, int multi, uint64_t bell, int64_t seq);
static void simba__mysql_tell_granted(simba__mysql *b, const char *name, const char *session, const char *request, int64_t fence);
static void simba__mysql_tell_recheck(simba__mysql *b, const char *name, const char *session, const char *request);
static void simba__mysql_watch_marks(simba__mysql *b);
static int simba__mysql_watch_repolls(const simba__mysql *b, const simba__mysql_watch *w);
static void simba__mysql_watch_polls(simba__mysql *b);
static void simba__mysql_push_grants(simba__mysql *b, simba__mysql_job *j);
static void simba__mysql_after(simba__mysql *b, simba__mysql_job *j, int status);
static void simba__mysql_waiter_drop(simba__mysql *b, int backoff);
static int simba__mysql_bell_wanted(simba__mysql *b, uint64_t bell);
static simba__mysql_watch *simba__mysql_next_watch(simba__mysql *b, int64_t now);
static void simba__mysql_sql_watch_entry(simba__mysql *b, simba__mysql_buf *x, const simba__mysql_watch *w);
static void simba__mysql_sql_ring_wait(simba__mysql *b, simba__mysql_buf *x, const simba__mysql_watch *w, int t);
static void simba__mysql_waiter_start(simba__mysql *b, simba__mysql_watch *w);
static void simba__mysql_waiter_read_fence(simba__mysql *b, const simba__mysql_watch *w);
static int64_t simba__mysql_result_int(simba__mysql_conn *c, int i);
static void simba__mysql_ring_heard(simba__mysql *b);
static void simba__mysql_waiter_result(simba__mysql *b);
static void simba__mysql_waiter_answer(simba__mysql *b, int64_t rang, int64_t fence, int64_t elapsed);
static int simba__mysql_waiter_opening(simba__mysql *b, simba__mysql_conn *c, int64_t now);
static void simba__mysql_waiter_progress(simba__mysql *b);

/*>>wakeups.arm: a waiter's watch: the bell it waits behind, the waiter connection that blocks in GET_LOCK on it */

/* A bell is a user lock named "simba:<16 hex>": FNV-1a of the deployment
   (database, prefix), tenant and request id. GET_LOCK names are global to the
   server and limited to 64 characters, hence the hash. */
static uint64_t simba__mysql_fnv(uint64_t h, const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
    h ^= 0xff; /* separator, so ("ab","c") and ("a","bc") differ */
    h *= 1099511628211ULL;
    return h;
}

static uint64_t simba__mysql_bell(const simba__mysql *b, const char *tenant, const char *req, size_t reqlen) {
    uint64_t h = simba__mysql_fnv(b->deploy, tenant, strlen(tenant));
    h = simba__mysql_fnv(h, req, reqlen);
    return h ? h : 1; /* 0 marks an empty slot */
}

static void simba__mysql_bellname(simba__mysql *b, simba__mysql_buf *x, uint64_t bell) {
    char t[SIMBA__MYSQL_BELL_LEN + 1];
    simba__mysql_bell_text(t, bell);
    simba__mysql_put(b, x, "'");
    simba__mysql_put(b, x, t);
    simba__mysql_put(b, x, "'");
}

/* Rings: a capacity > 1 waiter cannot know which of the holders will let it
   in, so it cannot wait on the right bell. The granter knows: after its
   COMMIT it interrupts the grantee's waiter connection with KILL QUERY,
   which only ever runs bell waits, so the cut wait just looks again. The
   waiter connection holds a user lock named by the ring key of the session
   it waits for (database, prefix, tenant, session); IS_USED_LOCK(that name)
   is the connection id of the waiter right now, so a recycled id is never
   hit: no waiter, no id (KILL of 0: ER_NO_SUCH_THREAD, ignored). A ring is
   a hint to look, never a grant. See docs/mysql.md "Rings". */
static uint64_t simba__mysql_ring_key(const simba__mysql *b, const char *tenant, const char *session, size_t seslen) {
    uint64_t h = simba__mysql_fnv(b->deploy, "ring", 4); /* never a bell: those hash a tenant first */
    h = simba__mysql_fnv(h, tenant, strlen(tenant));
    h = simba__mysql_fnv(h, session, seslen);
    return h ? h : 1;
}

static simba__mysql_watch *simba__mysql_watch_find(simba__mysql *b, const char *request) {
    int i;
    for (i = 0; i < b->nwatch; i++)
        if (strcmp(b->watches[i].request, request) == 0) return &b->watches[i];
    return NULL;
}

static void simba__mysql_watch_del(simba__mysql *b, const char *request) {
    simba__mysql_watch *w = simba__mysql_watch_find(b, request);
    int i;
    if (!w) return;
    i = (int)(w - b->watches);
    simba__mysql_free(b, w->request);
    simba__mysql_free(b, w->session);
    simba__mysql_free(b, w->name);
    simba__mysql_free(b, w->tenant);
    b->watches[i] = b->watches[b->nwatch - 1];
    b->nwatch--;
    b->watch_marks_stale = 1;
}

static void simba__mysql_watch_set(simba__mysql *b, const char *tenant, const char *session, const char *request,
                                const char *name, size_t namelen, int single, int multi, uint64_t bell,
                                int64_t seq) {
    simba__mysql_watch *w = simba__mysql_watch_find(b, request);
    int64_t now = simba_now_ms(b->s);
    if (w && strcmp(w->session, session) != 0) {
        /* the same keyed request id in another session: not the same entry */
        simba__mysql_watch_del(b, request);
        w = NULL;
    }
    if (w) {
        if (w->bell != bell) {
            w->bell = bell;
            w->immediate = 0;
            w->not_before = 0;
            w->poll_ms = SIMBA__MYSQL_POLL_MIN_MS;
            w->poll_at = now + w->poll_ms;
        }
        w->multi = multi;
        w->seq = seq;
        b->watch_marks_stale = 1;
        return;
    }
    if (b->nwatch == b->watch_cap) {
        int cap = b->watch_cap ? b->watch_cap * 2 : 8;
        simba__mysql_watch *t = (simba__mysql_watch *)simba__mysql_alloc(b, (size_t)cap * sizeof *t);
        if (!t) return; /* no watch: the core's re-checks still find the grant */
        if (b->nwatch) memcpy(t, b->watches, (size_t)b->nwatch * sizeof *t);
        simba__mysql_free(b, b->watches);
        b->watches = t;
        b->watch_cap = cap;
    }
    w = &b->watches[b->nwatch];
    memset(w, 0, sizeof *w);
    w->request = simba__mysql_strdup(b, request);
    w->session = simba__mysql_strdup(b, session);
    w->name = simba__mysql_strndup(b, name, namelen);
    w->tenant = simba__mysql_strdup(b, tenant);
    if (!w->request || !w->session || !w->name || !w->tenant) {
        simba__mysql_free(b, w->request);
        simba__mysql_free(b, w->session);
        simba__mysql_free(b, w->name);
        simba__mysql_free(b, w->tenant);
        return;
    }
    w->single = single;
    w->multi = multi;
    w->bell = bell;
    w->seq = seq;
    w->poll_ms = SIMBA__MYSQL_POLL_MIN_MS;
    w->poll_at = now + w->poll_ms;
    b->nwatch++;
    b->watch_marks_stale = 1;
}

static void simba__mysql_waiter_drop(simba__mysql *b, int backoff) {
    simba__mysql_conn *c = &b->waiter;
    simba__mysql_conn_drop(c);
    b->waiting_bell = 0;
    b->waiting_fence = 0;
    b->ring_held = 0; /* user locks go with the connection */
    simba__mysql_free(b, b->waiting_req);
    b->waiting_req = NULL;
    if (backoff) {
        c->retry_at = simba_now_ms(b->s) + simba_backend_backoff_ms(b->s, c->attempt);
        c->attempt++;
    } else {
        c->retry_at = simba_now_ms(b->s);
    }
}

/* Is the bell the waiter connection blocks on still wanted by some watch? */
static int simba__mysql_bell_wanted(simba__mysql *b, uint64_t bell) {
    int i;
    for (i = 0; i < b->nwatch; i++) if (b->watches[i].bell == bell) return 1;
    return 0;
}

static simba__mysql_watch *simba__mysql_next_watch(simba__mysql *b, int64_t now) {
    int i;
    simba__mysql_watch_marks(b);
    for (i = 0; i < b->nwatch; i++) {
        simba__mysql_watch *w = &b->watches[(b->watch_rr + i) % b->nwatch];
        if (w->not_before <= now && w->first) {
            b->watch_rr = (int)((w - b->watches) + 1) % b->nwatch;
            return w;
        }
    }
    return NULL;
}

/* The entry of watch w, as SQL: "<entries> WHERE tenant=.. AND name=..
   AND request=.. AND session=.." (a keyed request id is the same in every
   session: only the entry of the watch's own session). */
static void simba__mysql_sql_watch_entry(simba__mysql *b, simba__mysql_buf *x, const simba__mysql_watch *w) {
    simba__mysql_putf(b, x, "%s WHERE tenant=", b->t_entries);
    simba__mysql_hexs(b, x, w->tenant);
    simba__mysql_put(b, x, " AND name=");
    simba__mysql_hexs(b, x, w->name);
    simba__mysql_put(b, x, " AND request=");
    simba__mysql_hexs(b, x, w->request);
    simba__mysql_put(b, x, " AND session=");
    simba__mysql_hexs(b, x, w->session);
}

/* The wait of a one-resource watch, ringable: hold the session's ring key
   (so a granter can find this connection), then, unless the entry is
   granted already (a ring sent while this connection ran no query would be
   lost: the grant committed before this statement began, so it sees it),
   wait for the bell. -2: granted already, 1: the bell rang, -1: timed out,
   -3: GET_LOCK cut short (MariaDB answers a KILLed GET_LOCK with NULL;
   MySQL with ER_QUERY_INTERRUPTED).
   One statement, its steps put in order by IF (whose conditions are never
   true: RELEASE_LOCK, GET_LOCK and IF(..., 1, GET_LOCK) are never -1). A
   ring may reach this connection at any moment, and MariaDB sends nothing
   more for a query of several statements that a KILL QUERY hits between
   two of them: the client would wait for the next result until it gave the
   connection up as dead. So the fence, which must be read in a snapshot
   taken after the wait, is a query of its own
   (simba__mysql_waiter_read_fence). A ring that comes while this
   connection runs no query cuts nothing short (MariaDB drops it); the next
   wait's snapshot sees the grant. */
static void simba__mysql_sql_ring_wait(simba__mysql *b, simba__mysql_buf *x, const simba__mysql_watch *w, int t) {
    uint64_t ring = simba__mysql_ring_key(b, w->tenant, w->session, strlen(w->session));
    simba__mysql_put(b, x, "SELECT IF(");
    if (b->ring_held && b->ring_held != ring) {
        simba__mysql_put(b, x, "RELEASE_LOCK(");
        simba__mysql_bellname(b, x, b->ring_held);
        simba__mysql_put(b, x, ") <=> -1 OR ");
    }
    simba__mysql_put(b, x, "IF(IS_USED_LOCK(");
    simba__mysql_bellname(b, x, ring);
    simba__mysql_put(b, x, ") <=> CONNECTION_ID(), 1, GET_LOCK(");
    simba__mysql_bellname(b, x, ring);
    simba__mysql_put(b, x, ", 0)) <=> -1, 0, IF(COALESCE((SELECT fence FROM ");
    simba__mysql_sql_watch_entry(b, x, w);
    simba__mysql_put(b, x, "), 0) > 0, -2, CASE COALESCE(GET_LOCK(");
    simba__mysql_bellname(b, x, w->bell);
    simba__mysql_putf(b, x, ",%d), -3) WHEN 1 THEN RELEASE_LOCK(", t);
    simba__mysql_bellname(b, x, w->bell);
    simba__mysql_put(b, x, ") WHEN 0 THEN -1 ELSE -3 END))");
    b->ring_held = ring;
}

static void simba__mysql_waiter_start(simba__mysql *b, simba__mysql_watch *w) {
    simba__mysql_conn *c = &b->waiter;
    simba__mysql_buf *x = &c->sql;
    int i, eligible = 0, t;
    for (i = 0; i < b->nwatch && eligible < 2; i++) eligible += b->watches[i].first;
    t = eligible > 1 ? SIMBA__MYSQL_BELL_ROTATE_S : SIMBA__MYSQL_BELL_WAIT_S;
    simba__mysql_buf_clear(x);
    b->waiting_rung = w->single;
    if (w->single) simba__mysql_sql_ring_wait(b, x, w, t);
    else {
        /* wait for the bell; once we get it, give it back at once (other
           waiters of the same bell get it in turn) */
        simba__mysql_put(b, x, "SELECT IF(GET_LOCK(");
        simba__mysql_bellname(b, x, w->bell);
        simba__mysql_putf(b, x, ",%d)=1, RELEASE_LOCK(", t);
        simba__mysql_bellname(b, x, w->bell);
        simba__mysql_put(b, x, "), -1)");
    }
    if (!simba__mysql_is_current(b, w->session)) b->stats.stale_bell_waits++;
    b->waiting_bell = w->bell;
    simba__mysql_free(b, b->waiting_req);
    b->waiting_req = simba__mysql_strdup(b, w->request);
    b->stats.bell_waits++;
    simba__mysql_conn_query(b, c);
}

/* After a ringable wait: our fence, in a snapshot taken after the wait (a
   bell is released, a ring sent, after the grant's COMMIT). */
static void simba__mysql_waiter_read_fence(simba__mysql *b, const simba__mysql_watch *w) {
    simba__mysql_buf *x = &b->waiter.sql;
    simba__mysql_buf_clear(x);
    simba__mysql_put(b, x, "SELECT fence FROM ");
    simba__mysql_sql_watch_entry(b, x, w);
    b->waiting_fence = 1;
    simba__mysql_conn_query(b, &b->waiter);
}

/* The waiter connection is connecting or running its setup: go on when
   that is done (1), else wait or drop it (0). */
static int simba__mysql_waiter_opening(simba__mysql *b, simba__mysql_conn *c, int64_t now) {
    if (!c->done) {
        if (c->state == SIMBA__MYSQL_CONNECTING && now - c->started_ms > b->connect_timeout_ms)
            simba__mysql_waiter_drop(b, 1);
        return 0;
    }
    c->done = 0;
    if (c->state == SIMBA__MYSQL_SETUP) simba__mysql_free_results(c);
    if (c->err) { simba__mysql_waiter_drop(b, 1); return 0; }
    if (c->state == SIMBA__MYSQL_CONNECTING) {
        c->state = SIMBA__MYSQL_SETUP;
        simba__mysql_setup_sql(b, &c->sql, 0);
        simba__mysql_conn_query(b, c);
        return 1;
    }
    c->state = SIMBA__MYSQL_READY;
    c->attempt = 0;
    b->stats.waiter_connects++;
    return 1;
}

static void simba__mysql_waiter_progress(simba__mysql *b) {
    simba__mysql_conn *c = &b->waiter;
    int64_t now = simba_now_ms(b->s);
    int guard;
    if (b->no_waiter) return;
    for (guard = 0; guard < 16; guard++) {
        if (c->state == SIMBA__MYSQL_CLOSED) {
            if (!b->nwatch || !b->up) return;
            if (c->retry_at > now) return;
            simba__mysql_conn_open(b, c);
            continue;
        }
        if (c->state == SIMBA__MYSQL_CONNECTING || c->state == SIMBA__MYSQL_SETUP) {
            if (!simba__mysql_waiter_opening(b, c, now)) return;
            continue;
        }
        if (c->done) { simba__mysql_waiter_result(b); continue; }
        if (c->q != SIMBA__MYSQL_Q_NONE) {
            /* blocked on a bell nobody wants any more while others wait:
               a new connection is cheaper than waiting the timeout out */
            if (b->waiting_bell && !simba__mysql_bell_wanted(b, b->waiting_bell) && b->nwatch > 0) {
                simba__mysql_waiter_drop(b, 0);
                continue;
            }
            /* a wait that outlives its GET_LOCK timeout by far: dead server */
            if (now - c->started_ms > (SIMBA__MYSQL_BELL_WAIT_S + 5) * 1000) simba__mysql_waiter_drop(b, 1);
            return;
        }
        {
            simba__mysql_watch *w = simba__mysql_next_watch(b, now);
            if (!w) return;
            simba__mysql_waiter_start(b, w);
        }
    }
}

/*>>wakeups.fire: the owner's side: the bells we hold while our entries exist, released (rung) when they go */

/* After the op that granted them committed: ring each grantee next, ahead
   of this client's other queued work (a ring is one short statement). */
static void simba__mysql_queue_rings(simba__mysql *b, const simba__mysql_job *op) {
    simba__mysql_job *j = simba__mysql_job_new(b, SIMBA__MYSQL_JOB_RING);
    if (!j) return; /* the grantee finds its grant at its wait's timeout */
    j->bells = (uint64_t *)simba__mysql_alloc(b, (size_t)op->nrings * sizeof *j->bells);
    if (!j->bells) { simba__mysql_job_free(b, j); return; }
    memcpy(j->bells, op->rings, (size_t)op->nrings * sizeof *j->bells);
    j->nbells = op->nrings;
    simba__mysql_push(b, j, 1);
}

/* RING: one KILL QUERY per grantee (one statement per batch: an error,
   e.g. no waiter to ring, ends a batch). */
static void simba__mysql_step_ring(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_buf *x = &b->main.sql;
    if (j->step != SIMBA__MYSQL_S_FIRST) {
        simba__mysql_free_results(&b->main);
        j->ring_next++;
    }
    if (j->ring_next >= j->nbells) { simba__mysql_finish(b, j, SIMBA_OK, NULL); return; }
    simba__mysql_buf_clear(x);
    simba__mysql_put(b, x, "KILL QUERY IS_USED_LOCK(");
    simba__mysql_bellname(b, x, j->bells[j->ring_next]);
    simba__mysql_put(b, x, ")");
    b->stats.rings_sent++;
    simba__mysql_send_step(b, j, SIMBA__MYSQL_S_SIMPLE);
}

/* A ring's KILL failed: no waiter holds the key (ER_NO_SUCH_THREAD: the
   grantee is not waiting on its connection, its next wait reads its fence
   first) or another MySQL user's (ER_KILL_DENIED_ERROR: that grantee's
   waiter finds the grant at its wait's timeout and turns re-polls on). */
static void simba__mysql_ring_refused(simba__mysql *b, simba__mysql_job *j) {
    simba__mysql_conn *c = &b->main;
    if (c->err == ER_KILL_DENIED_ERROR || c->err == ER_SPECIFIC_ACCESS_DENIED_ERROR) {
        b->stats.rings_refused++;
        if (!b->ring_refused_told) {
            b->ring_refused_told = 1;
            simba_backend_log(b->s, SIMBA_LOG_WARN,
                              "simba_mysql: KILL QUERY of another client's waiter refused (%u %s): it is "
                              "another MySQL user; give all clients one user or CONNECTION ADMIN, else its "
                              "capacity > 1 waiters fall back to polling",
                              c->err, c->errmsg);
        }
    }
    c->err = 0;
    simba__mysql_step_ring(b, j);
}

/* The set of bells this client's main connection holds (one per entry, up
   to max_bells), open addressing with linear probing. */
static void simba__mysql_mine_put(uint64_t *keys, int cap, uint64_t h) {
    int k = (int)(h % (uint64_t)cap);
    while (keys[k]) k = (k + 1) % cap;
    keys[k] = h;
}

static int simba__mysql_mine_has(const simba__mysql *b, uint64_t h) {
    int i;
    if (!b->mine_cap) return 0;
    for (i = (int)(h % (uint64_t)b->mine_cap); b->mine[i]; i = (i + 1) % b->mine_cap)
        if (b->mine[i] == h) return 1;
    return 0;
}

static int simba__mysql_mine_add(simba__mysql *b, uint64_t h) {
    if (simba__mysql_mine_has(b, h)) return 1;
    if ((b->mine_n + 1) * 2 > b->mine_cap) {
        int cap = b->mine_cap ? b->mine_cap * 2 : 64, j;
        uint64_t *t = (uint64_t *)simba__mysql_alloc(b, (size_t)cap * sizeof *t);
        if (!t) return 0;
        memset(t, 0, (size_t)cap * sizeof *t);
        for (j = 0; j < b->mine_cap; j++) if (b->mine[j]) simba__mysql_mine_put(t, cap, b->mine[j]);
        simba__mysql_free(b, b->mine);
        b->mine = t;
        b->mine_cap = cap;
    }
    simba__mysql_mine_put(b->mine, b->mine_cap, h);
    b->mine_n++;
    return 1;
}

static void simba__mysql_mine_del(simba__mysql *b, uint64_t h) {
    int i, j;
    if (!b->mine_cap) return;
    i = (int)(h % (uint64_t)b->mine_cap);
    while (b->mine[i] && b->mine[i] != h) i = (i + 1) % b->mine_cap;
    if (!b->mine[i]) return;
    b->mine[i] = 0;
    b->mine_n--;
    /* put the rest of the cluster back where a lookup will find it */
    for (j = (i + 1) % b->mine_cap; b->mine[j]; j = (j + 1) % b->mine_cap) {
        uint64_t v = b->mine[j];
        b->mine[j] = 0;
        simba__mysql_mine_put(b->mine, b->mine_cap, v);
    }
}

static void simba__mysql_mine_clear(simba__mysql *b) {
    simba__mysql_free(b, b->mine);
    b->mine = NULL;
    b->mine_cap = b->mine_n = 0;
}

/* Queue RELEASE_LOCK of a bell that is no longer in our set. */
static void simba__mysql_queue_bell_release_raw(simba__mysql *b, uint64_t bell) {
    simba__mysql_job *j;
    /* join a pending release job that has not started yet */
    for (j = b->head; j; j = j->next) {
        if (j->kind == SIMBA__MYSQL_JOB_BELLS_RELEASE && !(j == b->head && b->head_started) &&
            j->nbells < 64) {
            j->bells[j->nbells++] = bell;
            return;
        }
    }
    j = simba__mysql_job_new(b, SIMBA__MYSQL_JOB_BELLS_RELEASE);
    if (!j) return; /* the lock goes when the connection does */
    j->bells = (uint64_t *)simba__mysql_alloc(b, 64 * sizeof *j->bells);
    if (!j->bells) { simba__mysql_job_free(b, j); return; }
    j->bells[0] = bell;
    j->nbells = 1;
    simba__mysql_push(b, j, 0);
}

/* Queue RELEASE_LOCK of one bell (an entry that is gone without our RELEASE). */
static void simba__mysql_queue_bell_release(simba__mysql *b, uint64_t bell) {
    if (!simba__mysql_mine_has(b, bell)) return; /* an entry without a bell */
    simba__mysql_mine_del(b, bell);
    simba__mysql_queue_bell_release_raw(b, bell);
}

/* Queue RETAKE jobs for all our bells, in front of the core's ops (they are
   chained first, then the chain goes to the front of the queue). */
static void simba__mysql_queue_retake(simba__mysql *b) {
    simba__mysql_job *first = NULL, *last = NULL, *j = NULL;
    int i;
    b->retake_needed = 0;
    for (i = 0; i < b->mine_cap; i++) {
        if (!b->mine[i]) continue;
        if (!j || j->nbells == SIMBA__MYSQL_RETAKE_BATCH) {
            j = simba__mysql_job_new(b, SIMBA__MYSQL_JOB_BELLS_RETAKE);
            if (j) j->bells = (uint64_t *)simba__mysql_alloc(b, SIMBA__MYSQL_RETAKE_BATCH * sizeof *j->bells);
            if (!j || !j->bells) {
                /* no memory: those bells stay free; their waiters poll */
                simba__mysql_job_free(b, j);
                break;
            }
            if (last) last->next = j;
            else first = j;
            last = j;
        }
        j->bells[j->nbells++] = b->mine[i];
    }
    if (!first) return;
    /* the queue is idle right after a connect, but keep it general */
    if (b->head && b->head_started) {
        last->next = b->head->next;
        b->head->next = first;
        if (b->tail == b->head) b->tail = last;
    } else {
        last->next = b->head;
        b->head = first;
        if (!b->tail) b->tail = last;
    }
}

/* RELEASE_LOCK of bells we no longer need; or, after a reconnect, GET_LOCK
   of our bells again: our entries live on (the session does), their bells
   must ring again when they go. 0.05 s: a waiter may be passing through a
   bell that was free. */
static void simba__mysql_sql_bells(simba__mysql *b, simba__mysql_job *j, simba__mysql_buf *x) {
    int i;
    simba__mysql_buf_clear(x);
    simba__mysql_put(b, x, "DO 0");
    for (i = 0; i < j->nbells; i++) {
        if (j->kind == SIMBA__MYSQL_JOB_BELLS_RELEASE) {
            simba__mysql_put(b, x, ", RELEASE_LOCK(");
            simba__mysql_bellname(b, x, j->bells[i]);
            simba__mysql_put(b, x, ")");
        } else {
            simba__mysql_put(b, x, ", IF(IS_USED_LOCK(");
            simba__mysql_bellname(b, x, j->bells[i]);
            simba__mysql_put(b, x, ") <=> CONNECTION_ID(), 1, GET_LOCK(");
            simba__mysql_bellname(b, x, j->bells[i]);
            simba__mysql_put(b, x, ", 0.05))");
        }
    }
}

/* BELLS_RELEASE, BELLS_RETAKE: one batch of RELEASE_LOCK / GET_LOCK. */
static void simba__mysql_step_bells(simba__mysql *b, simba__mysql_job *j) {
    if (j->step != SIMBA__MYSQL_S_FIRST) {
        if (j->kind == SIMBA__MYSQL_JOB_BELLS_RETAKE) b->retake_needed = 0;
        simba__mysql_finish(b, j, SIMBA_OK, NULL);
        return;
    }
    simba__mysql_sql_bells(b, j, &b->main.sql);
    simba__mysql_send_step(b, j, SIMBA__MYSQL_S_SIMPLE);
}

/* Bookkeeping after an op committed: bells we hold, requests we watch. */
static void simba__mysql_after(simba__mysql *b, simba__mysql_job *j, int status) {
    if ((j->kind == SIMBA_OP_ENQUEUE || j->kind == SIMBA_OP_POLL || j->kind == SIMBA_OP_RELEASE) &&
        !simba__mysql_is_current(b, j->session)) {
        /* an op of a session the core has dropped (queued before the next
           OPEN): its entry is no longer anyone's concern here. Give back a bell
           it took, unless the current session holds the same one (a keyed
           request id names the same bell in every session). */
        if (j->kind == SIMBA_OP_ENQUEUE && j->took_bell && !j->bell_released && !simba__mysql_mine_has(b, j->bell))
            simba__mysql_queue_bell_release_raw(b, j->bell);
        return;
    }
    if (status == SIMBA_OK) simba__mysql_push_grants(b, j);
    switch (j->kind) {
    case SIMBA_OP_ENQUEUE:
    case SIMBA_OP_POLL:
        if (status == SIMBA_OK && j->exists) {
            if (j->took_bell) simba__mysql_mine_add(b, j->bell);
            if (j->kind == SIMBA_OP_ENQUEUE && j->nres == 1 && !j->row_held) simba__mysql_busy_note(b, j, 1);
            if (j->reply.granted || !j->watch_valid) simba__mysql_watch_del(b, j->request);
            else
                simba__mysql_watch_set(b, j->tenant, j->session, j->request, j->res[j->sorted_of[0]].name,
                                    j->res[j->sorted_of[0]].len, j->nres == 1, j->watch_multi, j->watch_bell,
                                    j->watch_seq);
        } else if (status == SIMBA_ENOTFOUND || status == SIMBA_ESESSION || status == SIMBA_OK) {
            /* our entry is gone (or was never made): so is the need for its bell */
            simba__mysql_watch_del(b, j->request);
            if (j->bell_released) simba__mysql_mine_del(b, j->bell);
            else simba__mysql_queue_bell_release(b, j->bell);
        } else if (j->bell_released) {
            simba__mysql_mine_del(b, j->bell);
        }
        break;
    case SIMBA_OP_RELEASE:
        if (status == SIMBA_OK) {
            simba__mysql_mine_del(b, j->bell);
            simba__mysql_watch_del(b, j->request);
            if (j->nres == 1) simba__mysql_busy_note(b, j, j->met_queue);
        }
        break;
    case SIMBA_OP_CLOSE:
        if (status == SIMBA_OK && simba__mysql_is_current(b, j->session)) {
            /* RELEASE_ALL_LOCKS dropped every bell */
            simba__mysql_mine_clear(b);
            while (b->nwatch) simba__mysql_watch_del(b, b->watches[0].request);
        }
        break;
    default:
        break;
    }
}

/*>>wakeups.deliver: what a ring or a re-poll tells the core: simba_backend_granted, simba_backend_recheck */

/* Every wake-up of the core goes through these two (stats.wakes counts them). */
static void simba__mysql_tell_granted(simba__mysql *b, const char *name, const char *session, const char *request,
                                      int64_t fence) {
    b->stats.wakes++;
    simba_backend_granted(b->s, name, session, request, fence);
}

/* This request alone looks again (the core makes it everyone on the name
   for a multi-resource request). */
static void simba__mysql_tell_recheck(simba__mysql *b, const char *name, const char *session, const char *request) {
    b->stats.wakes++;
    simba_backend_recheck(b->s, name, session, request);
}

/* Marks the watches that are the first of our waiting entries in their
   queue. The granted entries of a queue are a prefix of its live entries, so
   an entry of ours further back cannot be granted before the first one:
   only the first is watched (its bell, its re-polls); the next takes over
   when it is granted or leaves. Without this a client with many waiting
   handles on one name took turns on their bells (1 s each) and re-polled
   them all. One pass over the watches per change, grouping by queue
   (tenant, session, name); with more than 64 queues, every watch is marked
   (more watching, never less). */
static void simba__mysql_watch_marks(simba__mysql *b) {
    enum { GROUPS = 64 };
    int g[GROUPS], ng = 0, i, k;
    if (!b->watch_marks_stale) return;
    b->watch_marks_stale = 0;
    for (i = 0; i < b->nwatch; i++) b->watches[i].first = 1;
    for (i = 0; i < b->nwatch; i++) {
        simba__mysql_watch *w = &b->watches[i], *o = NULL;
        if (!w->single || !w->seq) continue;
        for (k = 0; k < ng; k++) {
            o = &b->watches[g[k]];
            if (strcmp(o->name, w->name) == 0 && strcmp(o->session, w->session) == 0 &&
                strcmp(o->tenant, w->tenant) == 0)
                break;
        }
        if (k == ng) {
            if (ng == GROUPS) { for (i = 0; i < b->nwatch; i++) b->watches[i].first = 1; return; }
            g[ng++] = i;
            continue;
        }
        /* the group's first so far is g[k]: the later of the two steps back */
        if (w->seq < o->seq) { o->first = 0; g[k] = i; }
        else w->first = 0;
    }
}

/* Does w re-poll on its own? A capacity > 1 wait of one resource is rung
   by its granter (KILL QUERY, see simba__mysql_ring_key) unless a grant
   came without its ring (another MySQL user's KILL refused), or while no
   waiter connection is up to be rung (no_waiter, or connecting): then,
   and for multi-resource waits, the backoff re-polls. */
static int simba__mysql_watch_repolls(const simba__mysql *b, const simba__mysql_watch *w) {
    return w->multi && (!w->single || b->ring_fallback || b->no_waiter || b->waiter.state != SIMBA__MYSQL_READY);
}

/* Due re-polls of capacity > 1 waits: have the core POLL them. */
static void simba__mysql_watch_polls(simba__mysql *b) {
    int64_t now = simba_now_ms(b->s);
    int i;
    char name[SIMBA_MAX_NAME + 1], request[160], session[SIMBA_MAX_SESSION + 1];
    simba__mysql_watch_marks(b);
    for (i = 0; i < b->nwatch; i++) {
        simba__mysql_watch *w = &b->watches[i];
        if (!simba__mysql_watch_repolls(b, w) || now < w->poll_at || !w->first) continue;
        /* nothing moved since the last one (a change resets it): slow down */
        w->poll_ms = w->poll_ms * 2 > SIMBA__MYSQL_POLL_MAX_MS ? SIMBA__MYSQL_POLL_MAX_MS : w->poll_ms * 2;
        w->poll_at = now + w->poll_ms;
        snprintf(name, sizeof name, "%s", w->name);
        snprintf(request, sizeof request, "%s", w->request);
        snprintf(session, sizeof session, "%s", w->session);
        simba__mysql_tell_recheck(b, name, session, request);
    }
}

/* The grants simba__mysql_note_grants found, now that the op succeeded (a
   locked op's new fences are committed): the watch is over, the core gets
   the fence (it believes it only for its current session). */
static void simba__mysql_push_grants(simba__mysql *b, simba__mysql_job *j) {
    char name[SIMBA_MAX_NAME + 1], session[SIMBA_MAX_SESSION + 1];
    int i;
    for (i = 0; i < j->ngranted; i++) {
        simba__mysql_watch *w = simba__mysql_watch_find(b, j->granted_req[i]);
        if (!w || strcmp(w->session, j->session) != 0) continue;
        snprintf(name, sizeof name, "%s", w->name);
        snprintf(session, sizeof session, "%s", w->session);
        simba__mysql_watch_del(b, j->granted_req[i]);
        b->stats.pushed_grants++;
        simba__mysql_tell_granted(b, name, session, j->granted_req[i], j->granted_fence[i]);
    }
}

/* The one integer of result set i of c (0 when absent or not a number). */
static int64_t simba__mysql_result_int(simba__mysql_conn *c, int i) {
    int64_t v = 0;
    if (c->nres > i && c->res[i] && mysql_num_fields(c->res[i]) == 1) {
        MYSQL_ROW row = mysql_fetch_row(c->res[i]);
        unsigned long *len = mysql_fetch_lengths(c->res[i]);
        if (row && len && row[0] && !simba__mysql_int64(row[0], len[0], &v)) v = 0;
    }
    return v;
}

/* A ring cut our wait short: some waiting entry of the ringing session was
   granted. Each watched capacity > 1 wait of one resource (the first of
   ours in its queue: only it can have been let in) looks again with one
   POLL; the next wait of the cut one reads its fence first anyway. */
static void simba__mysql_ring_heard(simba__mysql *b) {
    char name[SIMBA_MAX_NAME + 1], request[160], session[SIMBA_MAX_SESSION + 1];
    int i;
    b->stats.rings_heard++;
    simba__mysql_watch_marks(b);
    for (i = 0; i < b->nwatch; i++) {
        simba__mysql_watch *w = &b->watches[i];
        if (!w->multi || !w->single || !w->first) continue;
        snprintf(name, sizeof name, "%s", w->name);
        snprintf(request, sizeof request, "%s", w->request);
        snprintf(session, sizeof session, "%s", w->session);
        simba__mysql_tell_recheck(b, name, session, request);
    }
}

/* A query on the waiter connection finished: a bell wait, or the fence
   read after a ringable one. */
static void simba__mysql_waiter_result(simba__mysql *b) {
    simba__mysql_conn *c = &b->waiter;
    simba__mysql_watch *w;
    int64_t v;
    c->done = 0;
    if (c->err == ER_QUERY_INTERRUPTED && b->waiting_rung) {
        /* a ring (KILL QUERY) as MySQL answers it, and MariaDB outside
           GET_LOCK (a fence read): the connection lives on */
        simba__mysql_free_results(c);
        b->waiting_bell = 0;
        b->waiting_fence = 0;
        simba__mysql_ring_heard(b);
        return;
    }
    if (c->err) {
        simba_backend_log(b->s, SIMBA_LOG_DEBUG, "simba_mysql: waiter connection: %u %s", c->err, c->errmsg);
        simba__mysql_waiter_drop(b, 1);
        return;
    }
    v = simba__mysql_result_int(c, 0);
    simba__mysql_free_results(c);
    if (b->waiting_fence) {
        b->waiting_fence = 0;
        simba__mysql_waiter_answer(b, b->waiting_code, v, b->waited_ms);
        return;
    }
    /* GET_LOCK: 1 = the bell rang (a ringable wait: -2, -3 too, see
       simba__mysql_sql_ring_wait) */
    b->waiting_bell = 0;
    b->waited_ms = simba_now_ms(b->s) - c->started_ms;
    if (!b->waiting_rung) { simba__mysql_waiter_answer(b, v, 0, b->waited_ms); return; }
    if (v == -3) { simba__mysql_ring_heard(b); return; }
    w = b->waiting_req ? simba__mysql_watch_find(b, b->waiting_req) : NULL;
    if (!w) return; /* nobody cares now */
    b->waiting_code = v;
    simba__mysql_waiter_read_fence(b, w);
}

/* What a wait (rang: 1 = the bell rang) and, after a ringable one, the
   fence read then tell the core. */
static void simba__mysql_waiter_answer(simba__mysql *b, int64_t rang, int64_t fence, int64_t elapsed) {
    simba__mysql_watch *w = b->waiting_req ? simba__mysql_watch_find(b, b->waiting_req) : NULL;
    char name[SIMBA_MAX_NAME + 1], request[160], session[SIMBA_MAX_SESSION + 1];
    int single;
    if (w && w->single && fence > 0 && rang != 1) {
        /* granted with no bell: before this wait began (-2), or during a
           wait no ring cut short (-1): a grant in a capacity > 1 queue whose
           ring was refused (or lost with its granter's connection), so
           re-poll from now on */
        if (rang == -1 && w->multi && !b->ring_fallback) {
            b->ring_fallback = 1;
            simba_backend_log(b->s, SIMBA_LOG_WARN,
                              "simba_mysql: a capacity > 1 grant came without its ring (KILL QUERY refused to "
                              "another MySQL user?): its waits re-poll from now on");
        }
        if (rang == -1) b->stats.rings_missed++;
        rang = 1;
    }
    if (rang != 1 || !w) return; /* timed out (bell still held), or nobody cares now */
    b->stats.bell_rings++;
    /* a bell that is free at once (its owner has not taken it yet, or lost
       its connection) would make us spin: back off on that bell */
    if (elapsed < 2) {
        w->immediate++;
        w->not_before = simba_now_ms(b->s) + (w->immediate > 9 ? 500 : (1 << w->immediate));
    } else {
        w->immediate = 0;
        w->not_before = 0;
    }
    snprintf(name, sizeof name, "%s", w->name);
    snprintf(request, sizeof request, "%s", w->request);
    snprintf(session, sizeof session, "%s", w->session);
    single = w->single;
    simba_backend_log(b->s, SIMBA_LOG_DEBUG, "simba_mysql: bell rang after %lld ms for %s (fence %lld)",
                      (long long)elapsed, request, (long long)fence);
    if (single && fence > 0) {
        /* granted: the watch is over, the core gets the fence directly */
        simba__mysql_watch_del(b, request);
        /* the core believes it only if `session` is still its current one */
        simba__mysql_tell_granted(b, name, session, request, fence);
    } else {
        /* something moved ahead of this request: it alone looks again */
        simba__mysql_tell_recheck(b, name, session, request);
    }
}

/*>>stats: simba_mysql_stats */

SIMBADEF int simba_mysql_stats(simba_backend bk, struct simba_mysql_stats *out) {
    simba__mysql *b;
    /* (by its destroy: the vtable itself is defined further down) */
    if (!bk.vt || bk.vt->destroy != simba__mysql_destroy || !bk.impl || !out) return SIMBA_EINVAL;
    b = (simba__mysql *)bk.impl;
    *out = b->stats;
    out->connected = b->up;
    out->held_bells = b->mine_n;
    out->watches = b->nwatch;
    return SIMBA_OK;
}

/*>>vtable: attach, submit, pollfds, deadline_ms, process, reset, destroy (glue only) */

/* Looks like a numeric IPv4/IPv6 address (or "localhost", which the
   connector takes as its default unix socket): no DNS lookup, which would
   block inside mysql_real_connect_start. */
static int simba__mysql_host_is_numeric(const char *h) {
    if (strcmp(h, "localhost") == 0) return 1;
    for (; *h; h++)
        if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f') || (*h >= 'A' && *h <= 'F') || *h == '.' ||
              *h == ':'))
            return 0;
    return 1;
}

static int simba__mysql_attach(void *impl, simba *s) {
    simba__mysql *b = (simba__mysql *)impl;
    int64_t now;
    b->s = s;
    if (!b->unix_socket && !simba__mysql_host_is_numeric(b->host))
        simba_backend_log(s, SIMBA_LOG_WARN, "simba_mysql: host '%s' is a name: resolving it blocks the caller"
                          " (give a numeric address)", b->host);
    now = simba_now_ms(s);
    b->main.retry_at = now; /* connect on the first process() */
    b->main.retry_armed = 1;
    b->waiter.retry_at = now;
    if (b->sweep_ms == 0) {
        int lease = simba_lease_ms(s);
        b->sweep_ms = lease * 2 > 5000 ? lease * 2 : 5000;
    }
    /* spread the sweeps of many clients over the period */
    if (b->sweep_ms > 0) b->next_sweep = now + b->sweep_ms / 2 + (int64_t)(((uint64_t)(size_t)b >> 4) % (uint64_t)(b->sweep_ms / 2 + 1));
    return SIMBA_OK;
}

static int simba__mysql_submit(void *impl, const simba_op *op) {
    simba__mysql *b = (simba__mysql *)impl;
    simba__mysql_job *j;
    int err, session_op;
    /* the core validated the op (names, tenant, ids, counts, capacity) */
    if (!b->up || b->main.state != SIMBA__MYSQL_READY) return SIMBA_EDISCONNECTED;
    session_op = op->kind == SIMBA_OP_OPEN || op->kind == SIMBA_OP_KEEPALIVE || op->kind == SIMBA_OP_CLOSE;
    /* back-pressure: the core keeps the op and offers it again later */
    if (!session_op && b->queued_ops >= SIMBA__MYSQL_MAX_QUEUED) return SIMBA_EBUSY;
    j = simba__mysql_job_from_op(b, op, &err);
    if (!j) return err;
    b->stats.ops_sent++;
    if (op->kind == SIMBA_OP_POLL) b->stats.polls++;
    if (op->kind == SIMBA_OP_OPEN && strcmp(b->cur_session, j->session) != 0) simba__mysql_session_switch(b, op);
    if (op->kind == SIMBA_OP_CLOSE && strcmp(b->cur_session, j->session) == 0) b->cur_close_sent = 1;
    /* the session comes first: a keepalive stuck behind a long queue of
       lock ops would cost every hold (the local safety rule) */
    if (session_op) simba__mysql_push(b, j, 1);
    else if (op->kind == SIMBA_OP_RELEASE) { simba__mysql_push_release(b, j); b->queued_ops++; }
    else { simba__mysql_push(b, j, 0); b->queued_ops++; }
    simba__mysql_kick(b); /* send now; the answer is handled in process() */
    return SIMBA_OK;
}

static int simba__mysql_pollfds(void *impl, struct pollfd *fds, int max) {
    simba__mysql *b = (simba__mysql *)impl;
    int n = 0;
    simba__mysql_conn *cs[2];
    int i;
    cs[0] = &b->main;
    cs[1] = &b->waiter;
    for (i = 0; i < 2; i++) {
        int fd = simba__mysql_conn_fd(cs[i]);
        short ev = simba__mysql_conn_events(cs[i]);
        if (fd < 0 || !ev) continue;
        if (n < max && fds) { fds[n].fd = fd; fds[n].events = ev; fds[n].revents = 0; }
        n++;
    }
    return n;
}

/* Earliest of the deadlines so far (d, INT64_MAX = none) and v. */
static int64_t simba__mysql_min(int64_t d, int64_t v) { return v < d ? v : d; }

static int64_t simba__mysql_deadline(void *impl) {
    simba__mysql *b = (simba__mysql *)impl;
    int64_t d = INT64_MAX, now = simba_now_ms(b->s);
    simba__mysql_conn *c = &b->main;
    int i;
    if (c->done) return now;
    if (c->state == SIMBA__MYSQL_CLOSED && c->retry_armed) d = simba__mysql_min(d, c->retry_at);
    if (c->state == SIMBA__MYSQL_CONNECTING || c->state == SIMBA__MYSQL_SETUP)
        d = simba__mysql_min(d, c->started_ms + b->connect_timeout_ms);
    if (c->q != SIMBA__MYSQL_Q_NONE && (c->wait & MYSQL_WAIT_TIMEOUT)) d = simba__mysql_min(d, c->wait_until);
    if (c->state == SIMBA__MYSQL_READY && c->q == SIMBA__MYSQL_Q_NONE && b->head && !b->head_started) return now;
    if (c->state == SIMBA__MYSQL_READY && b->sweep_ms > 0) d = simba__mysql_min(d, b->next_sweep);
    if (!b->no_waiter) {
        simba__mysql_conn *w = &b->waiter;
        if (w->done) return now;
        if (w->state == SIMBA__MYSQL_CLOSED && b->nwatch && b->up) d = simba__mysql_min(d, w->retry_at);
        if (w->state == SIMBA__MYSQL_CONNECTING || w->state == SIMBA__MYSQL_SETUP)
            d = simba__mysql_min(d, w->started_ms + b->connect_timeout_ms);
        if (w->q != SIMBA__MYSQL_Q_NONE && (w->wait & MYSQL_WAIT_TIMEOUT)) d = simba__mysql_min(d, w->wait_until);
        if (w->q != SIMBA__MYSQL_Q_NONE) {
            if (b->waiting_bell && !simba__mysql_bell_wanted(b, b->waiting_bell) && b->nwatch) return now;
            d = simba__mysql_min(d, w->started_ms + (SIMBA__MYSQL_BELL_WAIT_S + 5) * 1000);
        }
        if (w->state == SIMBA__MYSQL_READY && w->q == SIMBA__MYSQL_Q_NONE)
            for (i = 0; i < b->nwatch; i++) d = simba__mysql_min(d, b->watches[i].not_before > now ? b->watches[i].not_before : now);
    }
    for (i = 0; i < b->nwatch; i++)
        if (simba__mysql_watch_repolls(b, &b->watches[i])) d = simba__mysql_min(d, b->watches[i].poll_at);
    /* the contract reserves negative values for "none": a clock that runs
       below zero cannot express its deadlines (see docs/mysql.md) */
    return d == INT64_MAX ? -1 : (d < 0 ? 0 : d);
}

static void simba__mysql_process(void *impl, const struct pollfd *fds, int nfds) {
    simba__mysql *b = (simba__mysql *)impl;
    int rv;
    rv = simba__mysql_revents(&b->main, fds, nfds);
    if (simba__mysql_conn_io(b, &b->main, rv)) {
        simba__mysql_main_lost(b, SIMBA_EDISCONNECTED, "the server closed the connection");
    }
    simba__mysql_main_progress(b);
    simba__mysql_watch_polls(b);
    if (!b->no_waiter) {
        rv = simba__mysql_revents(&b->waiter, fds, nfds);
        if (simba__mysql_conn_io(b, &b->waiter, rv)) simba__mysql_waiter_drop(b, 1);
        simba__mysql_waiter_progress(b);
    }
}

static void simba__mysql_reset(void *impl, int why) {
    simba__mysql *b = (simba__mysql *)impl;
    char msg[128]; /* "connection reset (" + simba_strerror() */
    snprintf(msg, sizeof msg, "connection reset (%s)", simba_strerror(why));
    simba__mysql_main_lost(b, why ? why : SIMBA_EDISCONNECTED, msg);
    /* the waiter's wait may be as stale as the main connection */
    if (b->waiter.state != SIMBA__MYSQL_CLOSED) simba__mysql_waiter_drop(b, 0);
}

static void simba__mysql_destroy(void *impl) {
    simba__mysql *b = (simba__mysql *)impl;
    simba__mysql_job *j;
    simba__mysql_conn_drop(&b->main);
    simba__mysql_conn_drop(&b->waiter);
    while ((j = simba__mysql_pop(b)) != NULL) {
        if (b->s) simba__mysql_complete(b, j, SIMBA_EDISCONNECTED, "backend destroyed");
        simba__mysql_job_free(b, j);
    }
    while (b->nwatch) simba__mysql_watch_del(b, b->watches[0].request);
    simba__mysql_free(b, b->watches);
    simba__mysql_mine_clear(b);
    simba__mysql_free(b, b->waiting_req);
    simba__mysql_buf_free(b, &b->main.sql);
    simba__mysql_buf_free(b, &b->waiter.sql);
    simba__mysql_free(b, b->host);
    simba__mysql_free(b, b->unix_socket);
    simba__mysql_free(b, b->user);
    simba__mysql_free(b, b->password);
    simba__mysql_free(b, b->database);
    simba__mysql_free(b, b->prefix);
    simba__mysql_free(b, b->ssl_key);
    simba__mysql_free(b, b->ssl_cert);
    simba__mysql_free(b, b->ssl_ca);
    simba__mysql_free(b, b->ssl_capath);
    simba__mysql_free(b, b->ssl_cipher);
    simba__mysql_free(b, b);
}

static const simba_backend_vtable simba__mysql_vtable = {
    "mysql",
    simba__mysql_attach,
    simba__mysql_submit,
    simba__mysql_pollfds,
    simba__mysql_deadline,
    simba__mysql_process,
    simba__mysql_reset,
    simba__mysql_destroy
};

/*>>constructor: desc checks, allocation, the schema, from_url */

static int simba__mysql_prefix_ok(const char *p) {
    size_t n = strlen(p), i;
    if (n > 32) return 0;
    for (i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return 1;
}

/* The DDL of simba_mysql.sql with "$" standing for the table prefix ("@"
   marks SQL's user variables, which the upgrade uses). Keep the two in
   sync: the tests compare the tables both create. */
static const char *const simba__mysql_ddl[] = {
    "CREATE TABLE IF NOT EXISTS `$sessions` (\n"
    "    tenant      VARBINARY(64)  NOT NULL,\n"
    "    session     VARBINARY(96)  NOT NULL,\n"
    "    client      VARBINARY(64)  NOT NULL,\n"
    "    expires_ms  BIGINT         NOT NULL,\n"
    "    notify      BIGINT         NOT NULL DEFAULT 0,\n"
    "    renewed_ms  BIGINT         NOT NULL DEFAULT 0,\n"
    "    PRIMARY KEY (tenant, session),\n"
    "    KEY $sessions_expiry (expires_ms)\n"
    ") ENGINE=InnoDB",
    /* the upgrade of a sessions table made before renewed_ms: add the column
       where it is missing (MySQL has no ADD COLUMN IF NOT EXISTS, so the
       statement is chosen by a query; MariaDB's IF NOT EXISTS also makes two
       clients upgrading at once both succeed) */
    "SET @simba_upgrade = (SELECT IF(COUNT(*) = 0, CONCAT('ALTER TABLE `$sessions` ADD COLUMN ',\n"
    "    IF(VERSION() LIKE '%MariaDB%', 'IF NOT EXISTS ', ''), 'renewed_ms BIGINT NOT NULL DEFAULT 0'), 'DO 0')\n"
    "    FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()\n"
    "    AND TABLE_NAME = '$sessions' AND COLUMN_NAME = 'renewed_ms')",
    "PREPARE simba_upgrade FROM @simba_upgrade",
    "EXECUTE simba_upgrade",
    "DEALLOCATE PREPARE simba_upgrade",
    "CREATE TABLE IF NOT EXISTS `$resources` (\n"
    "    tenant      VARBINARY(64)  NOT NULL,\n"
    "    name        VARBINARY(256) NOT NULL,\n"
    "    capacity    INT            NOT NULL,\n"
    "    counter     BIGINT         NOT NULL DEFAULT 0,\n"
    "    seq         BIGINT         NOT NULL DEFAULT 0,\n"
    "    empty_seq   BIGINT         NOT NULL DEFAULT -1,\n"
    "    h_request   VARBINARY(128) NULL,\n"
    "    h_session   VARBINARY(96)  NULL,\n"
    "    h_weight    INT            NOT NULL DEFAULT 0,\n"
    "    h_fence     BIGINT         NOT NULL DEFAULT 0,\n"
    "    PRIMARY KEY (tenant, name)\n"
    ") ENGINE=InnoDB",
    /* the upgrade of a resources table made before empty_seq (as above) */
    "SET @simba_upgrade = (SELECT IF(COUNT(*) = 0, CONCAT('ALTER TABLE `$resources` ADD COLUMN ',\n"
    "    IF(VERSION() LIKE '%MariaDB%', 'IF NOT EXISTS ', ''), 'empty_seq BIGINT NOT NULL DEFAULT -1'), 'DO 0')\n"
    "    FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()\n"
    "    AND TABLE_NAME = '$resources' AND COLUMN_NAME = 'empty_seq')",
    "PREPARE simba_upgrade FROM @simba_upgrade",
    "EXECUTE simba_upgrade",
    "DEALLOCATE PREPARE simba_upgrade",
    /* the upgrade of a resources table made before the hold in the row: its
       four h_ columns in one ALTER (chosen by whether h_request is there) */
    "SET @simba_upgrade = (SELECT IF(COUNT(*) = 0, CONCAT('ALTER TABLE `$resources` ',\n"
    "    REPLACE('ADD COLUMN ? h_request VARBINARY(128) NULL, ADD COLUMN ? h_session VARBINARY(96) NULL, '\n"
    "    'ADD COLUMN ? h_weight INT NOT NULL DEFAULT 0, ADD COLUMN ? h_fence BIGINT NOT NULL DEFAULT 0',\n"
    "    '?', IF(VERSION() LIKE '%MariaDB%', 'IF NOT EXISTS', ''))), 'DO 0')\n"
    "    FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()\n"
    "    AND TABLE_NAME = '$resources' AND COLUMN_NAME = 'h_request')",
    "PREPARE simba_upgrade FROM @simba_upgrade",
    "EXECUTE simba_upgrade",
    "DEALLOCATE PREPARE simba_upgrade",
    "CREATE TABLE IF NOT EXISTS `$entries` (\n"
    "    tenant      VARBINARY(64)  NOT NULL,\n"
    "    name        VARBINARY(256) NOT NULL,\n"
    "    seq         BIGINT         NOT NULL,\n"
    "    request     VARBINARY(128) NOT NULL,\n"
    "    session     VARBINARY(96)  NOT NULL,\n"
    "    weight      INT            NOT NULL,\n"
    "    fence       BIGINT         NOT NULL DEFAULT 0,\n"
    "    PRIMARY KEY (tenant, name, seq),\n"
    "    UNIQUE KEY $entries_request (tenant, name, request),\n"
    "    KEY $entries_session (tenant, session)\n"
    ") ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS `$capacity_audit` (\n"
    "    id            BIGINT         NOT NULL AUTO_INCREMENT,\n"
    "    tenant        VARBINARY(64)  NOT NULL,\n"
    "    name          VARBINARY(256) NOT NULL,\n"
    "    old_capacity  INT            NULL,\n"
    "    new_capacity  INT            NOT NULL,\n"
    "    session       VARBINARY(96)  NOT NULL,\n"
    "    at_ms         BIGINT         NOT NULL,\n"
    "    PRIMARY KEY (id),\n"
    "    KEY $capacity_audit_name (tenant, name)\n"
    ") ENGINE=InnoDB"
};

SIMBADEF int simba_mysql_schema(const char *prefix, char *buf, size_t size) {
    if (!prefix) prefix = "simba_";
    if (!simba__mysql_prefix_ok(prefix)) return SIMBA_ENAME;
    return simba_backend_expand(simba__mysql_ddl, (int)(sizeof simba__mysql_ddl / sizeof simba__mysql_ddl[0]), '$',
                                prefix, buf, size);
}

/* Every refusal names the field (simba_create's simba_error shows it). Returns
   SIMBA_OK, or simba_backend_error()'s backend in *err. The host name is
   resolved here (numeric[0] stays 0 when it is used as given). */
static int simba__mysql_check_desc(const simba_mysql_desc *d, char *numeric, size_t cap, simba_backend *err) {
    const char *prefix;
    numeric[0] = 0;
    if (!d) { *err = simba_backend_error(SIMBA_EINVAL, "simba_mysql_desc: NULL"); return SIMBA_EINVAL; }
    if (simba_allocator_check(&d->allocator) != SIMBA_OK) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_mysql_desc.allocator: set both alloc and free, or neither");
        return SIMBA_EINVAL;
    }
    if (!d->database || !*d->database) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_mysql_desc.database: required (the schema that holds simba's tables)");
        return SIMBA_EINVAL;
    }
    if (strlen(d->database) > 64) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_mysql_desc.database: %u bytes, at most 64", (unsigned)strlen(d->database));
        return SIMBA_EINVAL;
    }
    prefix = d->table_prefix ? d->table_prefix : "simba_";
    if (!simba__mysql_prefix_ok(prefix)) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_mysql_desc.table_prefix: '%.40s' is not [A-Za-z0-9_]{0,32}", prefix);
        return SIMBA_EINVAL;
    }
    if (d->port < 0 || d->port > 65535) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_mysql_desc.port: %d is not 0..65535", d->port);
        return SIMBA_EINVAL;
    }
    if (d->host && !d->unix_socket && !d->ssl_verify_server_cert) {
        /* the host-name policy (docs/design.md): a numeric address or
           "localhost" is used as given; any other name is resolved here, once,
           with a blocking lookup, so that no (re)connect inside simba_tick()
           ever waits for DNS. With ssl_verify_server_cert the connector keeps
           the name (it checks the certificate against it) and resolves it at
           each connect. */
        int rc = simba_backend_resolve(d->host, numeric, cap);
        if (rc != 0) {
            *err = simba_backend_error(SIMBA_EINVAL, "simba_mysql_desc.host: cannot resolve '%.100s': %s",
                                       d->host, simba_backend_resolve_error(rc));
            return SIMBA_EINVAL;
        }
    }
    return SIMBA_OK;
}

/* Copies the strings of d (0: out of memory). */
static int simba__mysql_copy_strings(simba__mysql *b, const simba_mysql_desc *d, const char *host) {
    b->host = simba__mysql_strdup(b, host);
    b->unix_socket = simba__mysql_strdup(b, d->unix_socket);
    b->user = simba__mysql_strdup(b, d->user);
    b->password = simba__mysql_strdup(b, d->password);
    b->database = simba__mysql_strdup(b, d->database);
    b->prefix = simba__mysql_strdup(b, d->table_prefix ? d->table_prefix : "simba_");
    b->ssl_key = simba__mysql_strdup(b, d->ssl_key);
    b->ssl_cert = simba__mysql_strdup(b, d->ssl_cert);
    b->ssl_ca = simba__mysql_strdup(b, d->ssl_ca);
    b->ssl_capath = simba__mysql_strdup(b, d->ssl_capath);
    b->ssl_cipher = simba__mysql_strdup(b, d->ssl_cipher);
    return b->host && b->database && b->prefix && (!d->unix_socket || b->unix_socket) &&
           (!d->user || b->user) && (!d->password || b->password) && (!d->ssl_key || b->ssl_key) &&
           (!d->ssl_cert || b->ssl_cert) && (!d->ssl_ca || b->ssl_ca) && (!d->ssl_capath || b->ssl_capath) &&
           (!d->ssl_cipher || b->ssl_cipher);
}

SIMBADEF simba_backend simba_mysql(const simba_mysql_desc *d) {
    simba_backend out;
    simba__mysql *b;
    char numeric[64];
    if (simba__mysql_check_desc(d, numeric, sizeof numeric, &out) != SIMBA_OK) return out;
    b = (simba__mysql *)simba_allocator_alloc(&d->allocator, sizeof *b);
    if (!b) return simba_backend_error(SIMBA_ENOMEM, "simba_mysql: out of memory");
    b->alloc = d->allocator;
    if (!simba__mysql_copy_strings(b, d, numeric[0] ? numeric : d->host ? d->host : "127.0.0.1")) {
        simba__mysql_destroy(b);
        return simba_backend_error(SIMBA_ENOMEM, "simba_mysql: out of memory");
    }
    b->port = d->port ? d->port : 3306;
    b->ssl_verify = d->ssl_verify_server_cert;
    b->connect_timeout_ms = d->connect_timeout_ms > 0 ? d->connect_timeout_ms : 5000;
    b->create_schema = d->create_schema;
    b->lock_wait_s = d->lock_wait_timeout_s > 0 ? d->lock_wait_timeout_s : 1;
    b->sweep_ms = d->sweep_ms;
    b->no_waiter = d->no_waiter;
    b->max_bells = d->max_bells ? d->max_bells : 512;
    b->restart_grace = d->restart_grace;
    b->deploy = simba__mysql_fnv(simba__mysql_fnv(14695981039346656037ULL, b->database, strlen(b->database)),
                              b->prefix, strlen(b->prefix));
    snprintf(b->t_sessions, sizeof b->t_sessions, "`%ssessions`", b->prefix);
    snprintf(b->t_resources, sizeof b->t_resources, "`%sresources`", b->prefix);
    snprintf(b->t_entries, sizeof b->t_entries, "`%sentries`", b->prefix);
    snprintf(b->t_audit, sizeof b->t_audit, "`%scapacity_audit`", b->prefix);
    out.vt = &simba__mysql_vtable;
    out.impl = b;
    return out;
}

SIMBADEF int simba_mysql_from_url(simba_url *u, simba_backend *out, simba_url_error *err) {
    simba_mysql_desc d;
    int rc;
    memset(&d, 0, sizeof d);
    if (!u || !out) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: no URL or no output");
    if (strcmp(u->scheme, "mysql") != 0)
        return simba_url_fail(err, SIMBA_EINVAL, "scheme", "URL scheme: '%s' is not mysql", u->scheme);
    if (!u->has_authority)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: mysql needs '//' (mysql://user@host/database)");
    d.unix_socket = simba_url_param(u, "socket");
    if (d.unix_socket && !*d.unix_socket)
        return simba_url_fail(err, SIMBA_EINVAL, "socket", "URL parameter socket: empty");
    if (u->nhosts > 1) return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: mysql takes one host");
    if (u->nhosts == 0 && !d.unix_socket)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: missing (mysql://user@host/database, or ?socket=PATH)");
    if (u->nhosts) {
        d.host = u->hosts[0].host;
        d.port = u->hosts[0].port ? u->hosts[0].port : 3306;
    }
    if (!u->path[0] || !u->path[1] || strchr(u->path + 1, '/') || strlen(u->path + 1) > 64)
        return simba_url_fail(err, SIMBA_EINVAL, "path", "URL path: mysql needs the database: mysql://user@host/database");
    d.database = u->path + 1;
    d.user = u->user;
    d.password = u->password;
    if ((d.table_prefix = simba_url_param(u, "table_prefix")) != NULL && !simba__mysql_prefix_ok(d.table_prefix))
        return simba_url_fail(err, SIMBA_EINVAL, "table_prefix", "URL parameter table_prefix: 0..32 bytes of [A-Za-z0-9_]");
    if ((rc = simba_url_int(u, "create_schema", 0, 1, &d.create_schema, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_duration(u, "connect_timeout", 1, 3600000, &d.connect_timeout_ms, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_int(u, "lock_wait_timeout", 1, 3600, &d.lock_wait_timeout_s, err)) != SIMBA_OK) return rc;
    d.ssl_ca = simba_url_param(u, "ssl_ca");
    d.ssl_capath = simba_url_param(u, "ssl_capath");
    d.ssl_cert = simba_url_param(u, "ssl_cert");
    d.ssl_key = simba_url_param(u, "ssl_key");
    d.ssl_cipher = simba_url_param(u, "ssl_cipher");
    if ((rc = simba_url_int(u, "ssl_verify", 0, 1, &d.ssl_verify_server_cert, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_check_used(u, err)) != SIMBA_OK) return rc;
    *out = simba_mysql(&d);
    if (!out->vt) return simba_url_fail(err, SIMBA_ENOMEM, "url", "URL: the MySQL backend could not be made (out of memory)");
    return SIMBA_OK;
}

#endif /* SIMBA_MYSQL_IMPLEMENTATION */
