/*
    simba_pg.h -- the PostgreSQL backend of simba (see simba.h).

    Do this:
        #include "simba.h"
        #define SIMBA_PG_IMPLEMENTATION
        #include "simba_pg.h"
    in *one* C or C++ file (after simba.h, whose implementation may live in
    the same or another file). Link with -lpq (Debian libpq-dev) and add
    -I/usr/include/postgresql.

        simba *s = simba_create(&(simba_desc){
            .backend = simba_pg(&(simba_pg_desc){
                .conninfo = "postgres://app@127.0.0.1/locks", .create_schema = 1 }) }, NULL);

    Everything goes through libpq's non-blocking API (PQconnectStartParams
    and PQconnectPoll, PQsendQueryParams, PQconsumeInput and PQisBusy,
    PQflush, PQsocket in simba_pollfds): connecting, querying and
    reconnecting never block the caller. The connection string is libpq's
    own (a "postgres://" URI or "key=value" words, parsed by
    PQconninfoParse), so multi-host lists, target_session_attrs, sslmode,
    PGPASSFILE and the PG* variables work as every libpq user expects. Host
    names follow the one policy of docs/design.md: a numeric address,
    "localhost" or a socket directory is used as given; another name is
    resolved once, blocking, inside simba_pg() (libpq gets it as hostaddr),
    and a name that does not resolve fails simba_create with a message.

    CONTENTS (every section starts with a comment ">>name", grep for it;
    --------  a sub-section with ">>name.sub", named as in docs/backends.md)
    Declarations:
        >>options       simba_pg_desc: what the caller sets
        >>constructor   simba_pg(), simba_pg_from_url(), simba_pg_schema()
        >>stats         struct simba_pg_stats and simba_pg_stats()
    Implementation (SIMBA_PG_IMPLEMENTATION; guard SIMBA_PG_IMPL_INCLUDED):
        >>internals     includes, limits, private types, memory, the job queue
        >>connection    .connect (setup: schema, version, read-only) .io (send a
                        job, read results and notifications) .recover (timers)
        >>session       OPEN, KEEPALIVE, CLOSE
        >>locks         .calls (the parameters) .poll (ENQUEUE/POLL answers) .admin
                        (INSPECT) .dispatch: ENQUEUE, POLL, RELEASE, SET_CAPACITY, DELETE
        >>wakeups       .arm (LISTEN) .fire (pg_notify at the grant) .deliver
                        (-> simba_backend_granted / _recheck / _changed)
        >>stats         simba_pg_stats()
        >>vtable        attach, submit, pollfds, deadline_ms, process, reset, destroy
        >>constructor   desc checks, allocation, the schema (SQL), simba_pg_from_url()

    HOW IT WORKS (details and measurements in docs/postgres.md)
    ------------
    The server decides: every operation is ONE call of a PL/pgSQL function
    installed by simba_pg.sql (or by create_schema = 1) in the schema
    (default "simba"): one round trip, one transaction. The functions lock
    the resource rows in name order (SELECT ... FOR UPDATE), purge dead
    sessions' entries, run the grant rule (the server's copy of
    simba_grant_step / simba_grant_fence, said so next to it) and answer
    one row; an acquire of a free name and its release take a fast path
    of one statement that answers as the walk would and keeps that sole
    holder's hold in the resource's row (no entry row until another
    request queues behind it). Each call is prepared once per connection
    (at its setup). Time is the server's only (clock_timestamp()).

    Wake-ups: each connection LISTENs on the channel of its session
    ("simba_" + the session's 16 hex). The transaction that grants an
    entry does pg_notify() on the granted session's channel only (delivered
    at commit): one notification per grant, none for the waiters behind.
    Any role may NOTIFY any channel, so a notification is believed as a
    grant only when it names the random token of the entry, which the
    server told the waiter alone; any other is a hint (one re-check), so a
    forged one costs a query and grants nothing.

    Tenants: row-level security on every table; a tenant listed in
    <schema>.tenant_roles is usable only by the roles listed for it
    (docs/postgres.md, "Tenant isolation").

    One connection per client, one query in flight, at most 64 lock
    operations queued (session operations first).
*/
#ifndef SIMBA_PG_INCLUDED
#define SIMBA_PG_INCLUDED

#ifndef SIMBA_INCLUDED
#error "simba_pg.h: include simba.h first"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*>>options: what the caller sets */
/* Options of simba_pg(). Strings are copied; zero fields take defaults. */
typedef struct simba_pg_desc {
    const char *conninfo;       /* libpq connection string: "postgres://user@host/db?..."
                                   or "host=... dbname=..."; NULL or "": libpq's
                                   defaults (PGHOST, PGDATABASE, ...) */
    const char *password;       /* overrides the connection string's; NULL: libpq's
                                   (the string, PGPASSWORD, PGPASSFILE, ~/.pgpass) */
    const char *schema;         /* [a-z_][a-z0-9_]{0,47}: simba's tables and functions;
                                   default "simba" */
    int create_schema;          /* 1: install the schema on connect (simba_pg.sql) */
    int connect_timeout_ms;     /* a connect (with setup) that takes longer is
                                   abandoned and retried; default 5000 */
    int lock_timeout_ms;        /* lock_timeout of simba's sessions: an operation
                                   that waits longer for rows another transaction
                                   holds ends (and is retried); default 2000 */
    int restart_grace;          /* grant nothing for one (the tenant's longest)
                                   lease after the server restarted, recovered
                                   from a crash or failed over, and end the
                                   sessions from before: 0 (default) when the
                                   server may lose commits (fsync or
                                   synchronous_commit off), 1 always (e.g. an
                                   asynchronous standby may be promoted), <0 never */
    simba_allocator allocator;  /* for the backend's memory; zero = malloc/free;
                                   exactly one of alloc/free set: SIMBA_EINVAL */
} simba_pg_desc;

/*>>constructor: simba_pg, simba_pg_from_url, simba_pg_schema */
/* A new PostgreSQL backend for one simba client (pass it in
   simba_desc.backend; simba owns it from simba_create on). Never an unusable
   backend: on bad options (a connection string libpq refuses, a bad schema
   name, a host name that does not resolve, half an allocator) it returns one
   that makes simba_create fail with SIMBA_EINVAL and a message naming the
   field ("simba_pg_desc.<field>: ...", in simba_create's err); out of
   memory, SIMBA_ENOMEM. */
SIMBADEF simba_backend simba_pg(const simba_pg_desc *d);

/* Writes the schema (the statements of simba_pg.sql) for schema name
   `schema` (NULL = "simba") into buf. Returns the length it needs without
   the NUL (like snprintf), or SIMBA_ENAME for a bad schema name. */
SIMBADEF int simba_pg_schema(const char *schema, char *buf, size_t size);

/* ---- connection URLs ----
   simba_pg_from_url: the backend for a URL of scheme postgres: or
   postgresql:, given both parsed (simba_url_parse in simba.h, for simba's
   own parameters) and as text (for libpq's parser, PQconninfoParse, which
   reads everything else: hosts, ports, the database, sslmode,
   target_session_attrs, ...):
       postgres://[user[:password]@]host[:port][,host2[:port2]]/database[?parameters]
   simba's parameters: schema, create_schema (0/1), lock_timeout (duration),
   restart_grace (-1/0/1),
   plus password_env / password_file and the client options (simba.h); they
   are taken out before libpq sees the URL. Any other parameter is libpq's
   (an unknown one is an error, in libpq's words). */
SIMBADEF int simba_pg_from_url(simba_url *u, const char *url, simba_backend *out, simba_url_error *err);

/*>>stats: counters of one backend */
/* Counters of one backend, for tests, benchmarks and monitoring (the POSIX
   struct stat / stat() pattern). The first five fields are the same on
   every backend. */
struct simba_pg_stats {
    int connected;              /* the connection is up (as told to the core) */
    int64_t reconnects;         /* connects after the first */
    int64_t ops_sent;           /* ops of the core accepted by submit */
    int64_t ops_completed;      /* ops answered to the core (simba_backend_complete) */
    int64_t wakes;              /* pushes told to the core (simba_backend_recheck/_changed) */
    /* PostgreSQL's own */
    uint64_t queries;           /* function calls sent */
    uint64_t notifications;     /* notifications received on our channel */
    uint64_t pushed_grants;     /* ... that named the token of our waiting entry: granted
                                   without a POLL */
    uint64_t ignored_notifications; /* ... of another channel or of a shape we do not
                                   send (forged or stale): ignored */
    uint64_t retried;           /* answers turned into SIMBA_ETIMEDOUT (deadlock,
                                   lock_timeout, serialization): the core retries */
    uint64_t connects;          /* successful connects */
    int last_error;             /* SIMBA_E* of the last failed connect or op, 0 if none */
};

/* Copies the counters of backend b (the value simba_pg() returned; valid
   until the simba instance that owns it is destroyed). Returns SIMBA_OK, or
   SIMBA_EINVAL if b is not a PostgreSQL backend or out is NULL. */
SIMBADEF int simba_pg_stats(simba_backend b, struct simba_pg_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_PG_INCLUDED */

/* ======================================================================= */
#if defined(SIMBA_PG_IMPLEMENTATION) && !defined(SIMBA_PG_IMPL_INCLUDED)
#define SIMBA_PG_IMPL_INCLUDED

/*>>internals: includes, limits, private types, memory, the job queue */

#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SIMBA__PG_MAX_QUEUED = 64,      /* lock ops queued before submit says SIMBA_EBUSY */
    SIMBA__PG_SCHEMA_VERSION = 12,   /* <schema>.version() of the functions below */
    SIMBA__PG_MAX_SCHEMA = 48,      /* bytes in a schema name */
    SIMBA__PG_NPARAMS = 8           /* parameters of the widest call (ENQUEUE) */
};

typedef enum simba__pg_state {
    SIMBA__PG_CLOSED = 0,           /* no connection; reconnect at retry_at */
    SIMBA__PG_CONNECTING,           /* PQconnectPoll until CONNECTION_OK */
    SIMBA__PG_SETUP,                /* the setup query (schema, lock_timeout, version) */
    SIMBA__PG_READY                 /* jobs run, one at a time */
} simba__pg_state;

/* One op of the core, as the text parameters of its function call. */
typedef struct simba__pg_job {
    struct simba__pg_job *next;
    uint64_t id;
    simba_op_kind kind;
    int nres;
    int nparams;
    char *text;                     /* the parameters, NUL-separated */
    const char *params[SIMBA__PG_NPARAMS];
} simba__pg_job;

/* A waiting request and the token of its entry, as the server answered. */
typedef struct simba__pg_token {
    char *request;
    char token[33];
} simba__pg_token;

typedef struct simba__pg {
    simba *s;
    simba_allocator alloc;
    /* options */
    char *conninfo, *password, *hostaddr;
    char schema[SIMBA__PG_MAX_SCHEMA + 1];
    int create_schema, connect_timeout_ms, lock_timeout_ms, restart_grace;
    /* the connection */
    PGconn *conn;
    simba__pg_state state;
    PostgresPollingStatusType want; /* CONNECTING: what PQconnectPoll waits for */
    int up;                         /* told the core we are connected */
    int ever_up;
    int flushing;                   /* PQflush has more to send: wait for POLLOUT */
    int setup_phase;                /* SETUP: 0 the version check, 1 the install, 2 the PREPAREs */
    int64_t started_ms;             /* the connect began */
    int64_t retry_at;               /* CLOSED: the next connect */
    int attempt;
    /* the jobs: head is in flight when busy */
    simba__pg_job *head, *tail;
    int busy;
    int queued_ops;
    PGresult *result;               /* the first result of the query in flight */
    /* the session whose channel we LISTEN on */
    char session[SIMBA_MAX_SESSION + 1];
    char channel[32];
    /* the entry tokens of our waiting one-resource requests (wakeups.deliver) */
    simba__pg_token *tokens;
    int ntokens, cap_tokens;
    struct simba_pg_stats stats;
} simba__pg;

static void *simba__pg_alloc(simba__pg *b, size_t n) { return simba_allocator_alloc(&b->alloc, n); }
static void simba__pg_free(simba__pg *b, void *p) { simba_allocator_free(&b->alloc, p); }
static char *simba__pg_strdup(simba__pg *b, const char *s) {
    return s ? simba_allocator_strdup(&b->alloc, s) : NULL;
}

static void simba__pg_job_free(simba__pg *b, simba__pg_job *j) {
    if (!j) return;
    simba__pg_free(b, j->text);
    simba__pg_free(b, j);
}

/* Takes the first job off the queue. */
static simba__pg_job *simba__pg_pop(simba__pg *b) {
    simba__pg_job *j = b->head;
    if (!j) return NULL;
    b->head = j->next;
    if (!b->head) b->tail = NULL;
    j->next = NULL;
    if (j->kind != SIMBA_OP_OPEN && j->kind != SIMBA_OP_KEEPALIVE && j->kind != SIMBA_OP_CLOSE) b->queued_ops--;
    return j;
}

/* Queues j: session ops go first (behind the one in flight), so that a
   keepalive never waits behind a long queue of lock ops (the local safety
   rule would cost every hold). */
static void simba__pg_push(simba__pg *b, simba__pg_job *j, int first) {
    simba__pg_job **at = &b->head, *prev = NULL;
    if (first) {
        if (b->busy && b->head) { prev = b->head; at = &b->head->next; }
        while (*at && ((*at)->kind == SIMBA_OP_OPEN || (*at)->kind == SIMBA_OP_KEEPALIVE ||
                       (*at)->kind == SIMBA_OP_CLOSE)) { prev = *at; at = &(*at)->next; }
        j->next = *at;
        *at = j;
        if (!j->next) b->tail = j;
        (void)prev;
        return;
    }
    j->next = NULL;
    if (b->tail) b->tail->next = j;
    else b->head = j;
    b->tail = j;
}

/* Lower-case hex of n bytes of p into out (2n + 1 bytes). */
static void simba__pg_hex(const char *p, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    size_t i;
    for (i = 0; i < n; i++) {
        out[2 * i] = digits[((unsigned char)p[i]) >> 4];
        out[2 * i + 1] = digits[((unsigned char)p[i]) & 15];
    }
    out[2 * n] = 0;
}

static int simba__pg_unhex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Decodes lower-case hex (at most cap - 1 bytes out). 0 = ok. */
static int simba__pg_unhex(const char *h, size_t n, char *out, size_t cap) {
    size_t i;
    if (n % 2 || n / 2 + 1 > cap) return -1;
    for (i = 0; i < n / 2; i++) {
        int hi = simba__pg_unhex_digit(h[2 * i]), lo = simba__pg_unhex_digit(h[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i] = (char)(hi * 16 + lo);
    }
    out[n / 2] = 0;
    return 0;
}

/* The tokens of our waiting requests: a small array, one entry per waiting
   one-resource request (a grant is looked up once). */
static int simba__pg_token_find(simba__pg *b, const char *request) {
    int i;
    for (i = 0; i < b->ntokens; i++) if (strcmp(b->tokens[i].request, request) == 0) return i;
    return -1;
}

static void simba__pg_token_del(simba__pg *b, const char *request) {
    int i = simba__pg_token_find(b, request);
    if (i < 0) return;
    simba__pg_free(b, b->tokens[i].request);
    b->tokens[i] = b->tokens[--b->ntokens];
}

static void simba__pg_token_clear(simba__pg *b) {
    while (b->ntokens) simba__pg_free(b, b->tokens[--b->ntokens].request);
}

/* Remembers (or replaces) the token of a waiting request; out of memory
   only costs the push (the waiter then re-checks). */
static void simba__pg_token_put(simba__pg *b, const char *request, const char *token) {
    int i = simba__pg_token_find(b, request);
    if (strlen(token) != 32) return;
    if (i < 0) {
        if (b->ntokens == b->cap_tokens) {
            int ncap = b->cap_tokens ? b->cap_tokens * 2 : 16;
            simba__pg_token *nt = (simba__pg_token *)simba__pg_alloc(b, sizeof *nt * (size_t)ncap);
            if (!nt) return;
            if (b->ntokens) memcpy(nt, b->tokens, sizeof *nt * (size_t)b->ntokens);
            simba__pg_free(b, b->tokens);
            b->tokens = nt;
            b->cap_tokens = ncap;
        }
        if (!(b->tokens[b->ntokens].request = simba__pg_strdup(b, request))) return;
        i = b->ntokens++;
    }
    memcpy(b->tokens[i].token, token, 33);
}

/*>>connection: connect, setup (schema), read, write, recover */

static void simba__pg_answer(simba__pg *b, simba__pg_job *j, PGresult *r);
static void simba__pg_notifications(simba__pg *b);
static int simba__pg_setup_sql(simba__pg *b, int phase, char **out);

/* libpq's message on one line (no trailing newline), at most cap bytes. */
static void simba__pg_message(const char *m, char *out, size_t cap) {
    size_t n = 0;
    if (!m) m = "";
    while (*m && n + 1 < cap) {
        char c = *m++;
        if (c == '\n') {
            if (!*m) break;
            if (n + 2 < cap) { out[n++] = ';'; out[n++] = ' '; }
            continue;
        }
        out[n++] = c == '\t' ? ' ' : c;
    }
    out[n] = 0;
}

/* The kind of a failed connect, from libpq's words (a failed connect has no
   SQLSTATE): a refused password or role is SIMBA_EAUTH. */
static int simba__pg_connect_error(const char *m) {
    if (!m) return SIMBA_EDISCONNECTED;
    if (strstr(m, "password authentication failed") || strstr(m, "no password supplied") ||
        strstr(m, "pg_hba.conf") || strstr(m, "authentication failed") ||
        (strstr(m, "role \"") && strstr(m, "does not exist")))
        return SIMBA_EAUTH;
    return SIMBA_EDISCONNECTED;
}

/* Drops the connection (no completions: see the callers). */
static void simba__pg_close(simba__pg *b) {
    if (b->result) { PQclear(b->result); b->result = NULL; }
    if (b->conn) { PQfinish(b->conn); b->conn = NULL; }
    b->state = SIMBA__PG_CLOSED;
    b->busy = 0;
    b->flushing = 0;
}

static void simba__pg_schedule(simba__pg *b) {
    b->retry_at = simba_now_ms(b->s) + simba_backend_backoff_ms(b->s, b->attempt++);
}

/* The connection is gone (or a connect failed): every queued job ends with
   `code` (the core has each of them in flight), the core hears the
   connection is down, and a reconnect is scheduled. With complete = 0 (the
   core's reset) the jobs end without completions: the core fails them. */
static void simba__pg_lost(simba__pg *b, int code, const char *msg, int complete) {
    simba__pg_job *list = NULL, *j;
    int was_up = b->up;
    b->up = 0;
    b->stats.connected = 0;
    b->stats.last_error = code;
    simba__pg_close(b);
    /* a grant notification sent while we were not listening was seen by
       other listeners only: its token must not be taken from them later */
    simba__pg_token_clear(b);
    /* take every job off first: a completion may submit again (and that is
       refused now: we are not up) */
    while ((j = simba__pg_pop(b)) != NULL) { j->next = list; list = j; }
    b->queued_ops = 0;
    while ((j = list) != NULL) {
        list = j->next;
        if (complete) {
            simba_reply r;
            memset(&r, 0, sizeof r);
            r.id = j->id;
            r.status = SIMBA_EDISCONNECTED;
            r.message = msg;
            r.recheck_ms = -1;
            b->stats.ops_completed++;
            simba_backend_complete(b->s, &r);
        }
        simba__pg_job_free(b, j);
    }
    simba__pg_schedule(b);
    if (was_up || code) simba_backend_state(b->s, 0, code ? code : SIMBA_EDISCONNECTED, msg);
}

/* A connect or setup that failed: the cause, in libpq's words. */
static void simba__pg_connect_failed(simba__pg *b, int code, const char *what) {
    char msg[SIMBA_MAX_MESSAGE];
    simba__pg_message(what, msg, sizeof msg);
    simba__pg_lost(b, code, msg, 1);
}

/*>>connection.connect: PQconnectStartParams, PQconnectPoll, the setup query */

/* The server's notices (a NOTICE, the FATAL before a terminated
   connection) go to the user's logger, not to stderr. */
static void simba__pg_notice(void *arg, const char *message) {
    simba__pg *b = (simba__pg *)arg;
    char msg[SIMBA_MAX_MESSAGE];
    simba__pg_message(message, msg, sizeof msg);
    simba_backend_log(b->s, SIMBA_LOG_DEBUG, "simba_pg: server says: %s", msg);
}

static void simba__pg_connect_start(simba__pg *b) {
    const char *kw[6], *val[6];
    int n = 0;
    kw[n] = "application_name"; val[n++] = "simba";
    kw[n] = "dbname"; val[n++] = b->conninfo;      /* expanded: its words win over the above */
    if (b->password) { kw[n] = "password"; val[n++] = b->password; }
    if (b->hostaddr) { kw[n] = "hostaddr"; val[n++] = b->hostaddr; }
    kw[n] = NULL; val[n] = NULL;
    b->started_ms = simba_now_ms(b->s);
    b->conn = PQconnectStartParams(kw, val, 1);
    if (!b->conn) { simba__pg_connect_failed(b, SIMBA_ENOMEM, "out of memory"); return; }
    if (PQstatus(b->conn) == CONNECTION_BAD) {
        simba__pg_connect_failed(b, simba__pg_connect_error(PQerrorMessage(b->conn)), PQerrorMessage(b->conn));
        return;
    }
    PQsetNoticeProcessor(b->conn, simba__pg_notice, b);
    b->state = SIMBA__PG_CONNECTING;
    b->want = PGRES_POLLING_WRITING;   /* libpq: begin as if PQconnectPoll had said WRITING */
}

/* Sends the setup, as one simple-protocol query: lock_timeout, then the
   version of the schema's functions as installed (phase 0); when that is
   not ours and create_schema is set, the schema, the calls prepared, then
   the version (phase 1); when it is ours, the calls prepared and the
   version (phase 2). Installing only when needed keeps its table locks
   away from the other clients' running calls. */
static void simba__pg_setup_send(simba__pg *b, int phase) {
    char *sql = NULL;
    if ((phase == 0 && PQsetnonblocking(b->conn, 1) != 0) || simba__pg_setup_sql(b, phase, &sql) != 0) {
        simba__pg_free(b, sql);
        simba__pg_connect_failed(b, SIMBA_ENOMEM, "setup failed (out of memory)");
        return;
    }
    if (!PQsendQuery(b->conn, sql)) {
        simba__pg_free(b, sql);
        simba__pg_connect_failed(b, SIMBA_EDISCONNECTED, PQerrorMessage(b->conn));
        return;
    }
    simba__pg_free(b, sql);
    b->state = SIMBA__PG_SETUP;
    b->setup_phase = phase;
    b->busy = 1;
    b->flushing = PQflush(b->conn) == 1;
}

static void simba__pg_connect_step(simba__pg *b) {
    PostgresPollingStatusType st = PQconnectPoll(b->conn);
    b->want = st;
    if (st == PGRES_POLLING_FAILED) {
        simba__pg_connect_failed(b, simba__pg_connect_error(PQerrorMessage(b->conn)), PQerrorMessage(b->conn));
        return;
    }
    if (st == PGRES_POLLING_OK) simba__pg_setup_send(b, 0);
}

/* The setup's results came in: the last one is the version of the schema's
   functions. */
static void simba__pg_setup_done(simba__pg *b, PGresult *r) {
    char msg[SIMBA_MAX_MESSAGE];
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
        int code = state && (strcmp(state, "42501") == 0 || strncmp(state, "28", 2) == 0) ? SIMBA_EAUTH : SIMBA_EBACKEND;
        if (state && (strcmp(state, "3F000") == 0 || strcmp(state, "42883") == 0))
            snprintf(msg, sizeof msg, "schema '%s' is not installed: run simba_pg.sql in the database, or connect with create_schema=1", b->schema);
        else simba__pg_message(r ? PQresultErrorMessage(r) : PQerrorMessage(b->conn), msg, sizeof msg);
        simba__pg_lost(b, code, msg, 1);
        return;
    }
    if (b->setup_phase == 0 && PQnfields(r) == 2 && strcmp(PQgetvalue(r, 0, 1), "on") == 0) {
        /* every call writes: a standby (or default_transaction_read_only)
           can serve no lock; the next connect may reach a primary */
        simba__pg_lost(b, SIMBA_EBACKEND, "the server is read-only (a standby, or default_transaction_read_only)", 1);
        return;
    }
    if (atoi(PQgetvalue(r, 0, 0)) > SIMBA__PG_SCHEMA_VERSION) {
        /* a newer simba installed it: never replaced by ours (create_schema
           or not), its clients would break */
        snprintf(msg, sizeof msg, "schema '%s' has version %.20s, newer than this simba's %d: use a simba of that version",
                 b->schema, PQgetvalue(r, 0, 0), SIMBA__PG_SCHEMA_VERSION);
        simba__pg_lost(b, SIMBA_EBACKEND, msg, 1);
        return;
    }
    if (atoi(PQgetvalue(r, 0, 0)) != SIMBA__PG_SCHEMA_VERSION && b->setup_phase == 0 && b->create_schema) {
        simba__pg_setup_send(b, 1);
        return;
    }
    if (atoi(PQgetvalue(r, 0, 0)) == 0) {
        snprintf(msg, sizeof msg, "schema '%s' is not installed: run simba_pg.sql in the database, or connect with create_schema=1", b->schema);
        simba__pg_lost(b, SIMBA_EBACKEND, msg, 1);
        return;
    }
    if (atoi(PQgetvalue(r, 0, 0)) != SIMBA__PG_SCHEMA_VERSION) {
        snprintf(msg, sizeof msg, "schema '%s' has version %.20s, this simba needs %d: run simba_pg.sql again",
                 b->schema, PQgetvalue(r, 0, 0), SIMBA__PG_SCHEMA_VERSION);
        simba__pg_lost(b, SIMBA_EBACKEND, msg, 1);
        return;
    }
    if (b->setup_phase == 0) {
        simba__pg_setup_send(b, 2);
        return;
    }
    b->state = SIMBA__PG_READY;
    b->up = 1;
    b->stats.connected = 1;
    if (b->ever_up) b->stats.reconnects++;
    b->ever_up = 1;
    b->stats.connects++;
    b->attempt = 0;
    b->session[0] = 0;   /* a new connection listens on nothing until OPEN/KEEPALIVE */
    b->channel[0] = 0;
    simba_backend_state(b->s, 1, 0, NULL);
}

/*>>connection.io: send the next job, flush; read results and notifications */

static const char *simba__pg_call(simba_op_kind k) {
    switch (k) {
    case SIMBA_OP_OPEN: return "open($1,$2,$3)";
    case SIMBA_OP_KEEPALIVE: return "keepalive($1,$2,$3)";
    case SIMBA_OP_CLOSE: return "close($1,$2)";
    case SIMBA_OP_ENQUEUE: return "enqueue($1,$2,$3,$4,$5,$6,$7,$8)";
    case SIMBA_OP_POLL: return "poll($1,$2,$3,$4)";
    case SIMBA_OP_RELEASE: return "release($1,$2,$3,$4)";
    case SIMBA_OP_INSPECT: return "inspect($1,$2)";
    case SIMBA_OP_SET_CAPACITY: return "set_capacity($1,$2,$3)";
    case SIMBA_OP_DELETE: return "delete($1,$2)";
    }
    return "version()";
}

/* The name of the prepared statement of call kind k ("simba_enqueue"). */
static void simba__pg_statement(simba_op_kind k, char *out, size_t cap) {
    const char *call = simba__pg_call(k);
    snprintf(out, cap, "simba_%.*s", (int)strcspn(call, "("), call);
}

/* Appends to sql (at `at`, cap bytes) one PREPARE per call kind: a call
   is then parsed and planned once per connection, not at every op. */
static size_t simba__pg_prepares(simba__pg *b, char *sql, size_t at, size_t cap) {
    static const simba_op_kind kinds[] = {
        SIMBA_OP_OPEN, SIMBA_OP_KEEPALIVE, SIMBA_OP_CLOSE, SIMBA_OP_ENQUEUE, SIMBA_OP_POLL,
        SIMBA_OP_RELEASE, SIMBA_OP_INSPECT, SIMBA_OP_SET_CAPACITY, SIMBA_OP_DELETE
    };
    char name[32];
    size_t i;
    for (i = 0; i < sizeof kinds / sizeof kinds[0] && at < cap; i++) {
        simba__pg_statement(kinds[i], name, sizeof name);
        at += (size_t)snprintf(sql + at, cap - at, "PREPARE %s AS SELECT * FROM %s.%s;\n", name, b->schema,
                               simba__pg_call(kinds[i]));
    }
    return at < cap ? at : cap;
}

/* Sends the job at the head when nothing is in flight: its call, prepared
   at the setup. */
static void simba__pg_kick(simba__pg *b) {
    char name[32];
    simba__pg_job *j = b->head;
    if (b->state != SIMBA__PG_READY || b->busy || !j) return;
    simba__pg_statement(j->kind, name, sizeof name);
    if (!PQsendQueryPrepared(b->conn, name, j->nparams, j->params, NULL, NULL, 0)) {
        char msg[SIMBA_MAX_MESSAGE];
        simba__pg_message(PQerrorMessage(b->conn), msg, sizeof msg);
        simba__pg_lost(b, SIMBA_EDISCONNECTED, msg, 1);
        return;
    }
    b->busy = 1;
    b->stats.queries++;
    b->flushing = PQflush(b->conn) == 1;
}


/* Reads what the socket has; finishes the query in flight when its last
   result came. 0 = ok, else the connection is gone (lost was called). */
static int simba__pg_read(simba__pg *b) {
    char msg[SIMBA_MAX_MESSAGE];
    if (!PQconsumeInput(b->conn)) {
        simba__pg_message(PQerrorMessage(b->conn), msg, sizeof msg);
        simba__pg_lost(b, SIMBA_EDISCONNECTED, msg[0] ? msg : "the server closed the connection", 1);
        return -1;
    }
    while (b->busy && !PQisBusy(b->conn)) {
        PGresult *r = PQgetResult(b->conn);
        if (r) {
            /* keep the last result (the setup's answer comes last) unless an
               earlier one is an error */
            if (!b->result || PQresultStatus(b->result) != PGRES_FATAL_ERROR) {
                if (b->result) PQclear(b->result);
                b->result = r;
            } else PQclear(r);
            continue;
        }
        b->busy = 0;
        r = b->result;
        b->result = NULL;
        if (b->state == SIMBA__PG_SETUP) simba__pg_setup_done(b, r);
        else simba__pg_answer(b, simba__pg_pop(b), r);
        if (r) PQclear(r);
        if (b->state == SIMBA__PG_CLOSED) return -1;
    }
    simba__pg_notifications(b);
    if (b->conn && PQstatus(b->conn) == CONNECTION_BAD) {
        simba__pg_message(PQerrorMessage(b->conn), msg, sizeof msg);
        simba__pg_lost(b, SIMBA_EDISCONNECTED, msg[0] ? msg : "the connection broke", 1);
        return -1;
    }
    return 0;
}

/*>>connection.recover: the deadline of a connect, the next reconnect */

static void simba__pg_timers(simba__pg *b) {
    int64_t now = simba_now_ms(b->s);
    if (b->state == SIMBA__PG_CLOSED && now >= b->retry_at) {
        simba__pg_connect_start(b);
        return;
    }
    if ((b->state == SIMBA__PG_CONNECTING || b->state == SIMBA__PG_SETUP) &&
        now >= b->started_ms + b->connect_timeout_ms) {
        char msg[96];
        snprintf(msg, sizeof msg, "connect timed out after %d ms", b->connect_timeout_ms);
        simba__pg_lost(b, SIMBA_ETIMEDOUT, msg, 1);
    }
}

/*>>session: OPEN, KEEPALIVE, CLOSE */

/* OPEN and KEEPALIVE answer the tenant's admin epoch, or -1: the session is
   gone (KEEPALIVE: SIMBA_ESESSION). Both LISTEN on the session's channel,
   so a new connection hears the session's grants from its first keepalive. */
static void simba__pg_session_reply(simba__pg *b, simba__pg_job *j, PGresult *r, simba_reply *out) {
    long long epoch;
    if (PQntuples(r) != 1 || PQnfields(r) != 1 || PQgetisnull(r, 0, 0)) { out->status = SIMBA_EPROTO; return; }
    if (j->kind == SIMBA_OP_CLOSE) return;
    epoch = atoll(PQgetvalue(r, 0, 0));
    if (epoch < 0) { out->status = SIMBA_ESESSION; return; }
    out->epoch = epoch;
    (void)b;
}

/* Our session (OPEN of a new one): its channel is the one we listen on. */
static void simba__pg_session_switch(simba__pg *b, const char *session) {
    size_t n = strlen(session);
    simba__pg_token_clear(b);   /* a keyed request id repeats across sessions */
    snprintf(b->session, sizeof b->session, "%s", session);
    snprintf(b->channel, sizeof b->channel, "simba_%s", n >= 16 ? session + n - 16 : session);
}

/*>>locks: ENQUEUE, POLL, RELEASE, INSPECT, SET_CAPACITY, DELETE */

/*>>locks.calls: the parameters of every call */

/* Appends s (and its NUL) to the job's text at *at. */
static void simba__pg_param(simba__pg_job *j, size_t *at, const char *s) {
    size_t n = strlen(s) + 1;
    memcpy(j->text + *at, s, n);
    j->params[j->nparams++] = j->text + *at;
    *at += n;
}

/* The names of op as a text[] literal of hex ("{6162,6364}") into j. */
static void simba__pg_param_names(simba__pg_job *j, size_t *at, const simba_op *op) {
    char *p = j->text + *at;
    int i;
    j->params[j->nparams++] = p;
    *p++ = '{';
    for (i = 0; i < op->nres; i++) {
        size_t n = strlen(op->res[i].name);
        if (i) *p++ = ',';
        simba__pg_hex(op->res[i].name, n, p);
        p += 2 * n;
    }
    *p++ = '}';
    *p++ = 0;
    *at = (size_t)(p - j->text);
}

/* An int[] literal of the capacities (which = 0) or weights (1) into j. */
static void simba__pg_param_ints(simba__pg_job *j, size_t *at, const simba_op *op, int which) {
    char *p = j->text + *at;
    int i;
    j->params[j->nparams++] = p;
    *p++ = '{';
    for (i = 0; i < op->nres; i++)
        p += sprintf(p, "%s%d", i ? "," : "", which ? op->res[i].weight : op->res[i].capacity);
    *p++ = '}';
    *p++ = 0;
    *at = (size_t)(p - j->text);
}

/* The job of op: its function's parameters as text. NULL: out of memory. */
static simba__pg_job *simba__pg_job_from_op(simba__pg *b, const simba_op *op) {
    simba__pg_job *j;
    size_t need = 64, at = 0;
    char num[24];
    int i;
    need += strlen(op->tenant) + (op->session ? strlen(op->session) : 0) + (op->request ? strlen(op->request) : 0);
    for (i = 0; i < op->nres; i++) need += 2 * strlen(op->res[i].name) + 2 + 2 * 24;
    j = (simba__pg_job *)simba__pg_alloc(b, sizeof *j);
    if (!j) return NULL;
    j->text = (char *)simba__pg_alloc(b, need);
    if (!j->text) { simba__pg_free(b, j); return NULL; }
    j->id = op->id;
    j->kind = op->kind;
    j->nres = op->nres;
    simba__pg_param(j, &at, op->tenant);
    switch (op->kind) {
    case SIMBA_OP_OPEN:
    case SIMBA_OP_KEEPALIVE:
        simba__pg_param(j, &at, op->session);
        snprintf(num, sizeof num, "%d", op->lease_ms);
        simba__pg_param(j, &at, num);
        break;
    case SIMBA_OP_CLOSE:
        simba__pg_param(j, &at, op->session);
        break;
    case SIMBA_OP_ENQUEUE:
    case SIMBA_OP_POLL:
    case SIMBA_OP_RELEASE:
        simba__pg_param(j, &at, op->session);
        simba__pg_param(j, &at, op->request);
        if (op->kind == SIMBA_OP_ENQUEUE) {
            simba__pg_param(j, &at, op->try_only ? "t" : "f");
            simba__pg_param(j, &at, op->watch_owner ? "t" : "f");
        }
        simba__pg_param_names(j, &at, op);
        if (op->kind == SIMBA_OP_ENQUEUE) {
            simba__pg_param_ints(j, &at, op, 0);
            simba__pg_param_ints(j, &at, op, 1);
        }
        break;
    case SIMBA_OP_INSPECT:
    case SIMBA_OP_SET_CAPACITY:
    case SIMBA_OP_DELETE:
        j->params[j->nparams++] = j->text + at;
        simba__pg_hex(op->res[0].name, strlen(op->res[0].name), j->text + at);
        at += strlen(j->text + at) + 1;
        if (op->kind == SIMBA_OP_SET_CAPACITY) {
            snprintf(num, sizeof num, "%d", op->res[0].capacity);
            simba__pg_param(j, &at, num);
        }
        break;
    }
    return j;
}

/*>>locks.poll: the answer of ENQUEUE and POLL */

/* The status codes the functions answer (simba_pg.sql says the same). */
static int simba__pg_status(int code) {
    switch (code) {
    case 0: return SIMBA_OK;
    case 1: return SIMBA_ESESSION;
    case 2: return SIMBA_ECAPACITY;
    case 3: return SIMBA_EKEYBUSY;
    case 4: return SIMBA_ENOTFOUND;
    }
    return SIMBA_EPROTO;
}

/* Parses a bigint[] literal "{1,2,3}" into out (n values expected). 0 = ok. */
static int simba__pg_bigints(const char *s, int64_t *out, int n) {
    int i = 0;
    if (*s++ != '{') return -1;
    while (*s && *s != '}') {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || i >= n || v < 0) return -1;
        out[i++] = v;
        s = end;
        if (*s == ',') s++;
    }
    return (*s == '}' && i == n) ? 0 : -1;
}

static int simba__pg_int(PGresult *r, int col, int dflt) {
    return PQgetisnull(r, 0, col) ? dflt : atoi(PQgetvalue(r, 0, col));
}

/* status, granted, fences, ahead, held, owner, recheck_ms, capacity,
   grace_ms, token; a waiting one-resource request's token is remembered. */
static void simba__pg_state_reply(simba__pg *b, simba__pg_job *j, PGresult *r, simba_reply *out) {
    const char *owner;
    if (PQntuples(r) != 1 || PQnfields(r) != 10 || PQgetisnull(r, 0, 0)) { out->status = SIMBA_EPROTO; return; }
    out->status = simba__pg_status(atoi(PQgetvalue(r, 0, 0)));
    out->recheck_ms = simba__pg_int(r, 6, -1);
    out->capacity = simba__pg_int(r, 7, 0);
    out->grace_ms = simba__pg_int(r, 8, 0);
    if (out->status != SIMBA_OK) return;
    out->granted = !PQgetisnull(r, 0, 1) && PQgetvalue(r, 0, 1)[0] == 't';
    if (!PQgetisnull(r, 0, 2) && simba__pg_bigints(PQgetvalue(r, 0, 2), out->fence, j->nres) != 0) {
        out->status = SIMBA_EPROTO;
        out->message = "fences of the wrong shape";
        return;
    }
    out->ahead = simba__pg_int(r, 3, 0);
    out->held = simba__pg_int(r, 4, 0);
    owner = PQgetisnull(r, 0, 5) ? NULL : PQgetvalue(r, 0, 5);
    out->owner = owner && *owner ? owner : NULL;
    if (j->nres == 1 && !out->granted && !PQgetisnull(r, 0, 9)) simba__pg_token_put(b, j->params[2], PQgetvalue(r, 0, 9));
    else simba__pg_token_del(b, j->params[2]);
}

/*>>locks.admin: INSPECT (capacity, entries in queue order, server times) */

/* Rows of (capacity, session, fence, weight, expires_in_ms,
   renewed_ago_ms, held_ms, grace_ms); none: no such resource; one with a
   NULL session: no entries. */
static void simba__pg_inspect_reply(simba__pg *b, PGresult *r, simba_reply *out, simba_holder **entries) {
    int n = PQntuples(r), i, k = 0;
    if (PQnfields(r) != 8) { out->status = SIMBA_EPROTO; return; }
    if (n == 0) return;
    out->capacity = atoi(PQgetvalue(r, 0, 0));
    out->entry_times = 1;
    out->grace_ms = atoi(PQgetvalue(r, 0, 7));
    *entries = (simba_holder *)simba__pg_alloc(b, sizeof(simba_holder) * (size_t)n);
    if (!*entries) { out->status = SIMBA_ENOMEM; return; }
    for (i = 0; i < n; i++) {
        simba_holder *h = &(*entries)[k];
        const char *sess, *tilde;
        if (PQgetisnull(r, i, 1)) continue;
        sess = PQgetvalue(r, i, 1);
        tilde = strrchr(sess, '~');
        if (strlen(sess) > SIMBA_MAX_SESSION || !tilde || (size_t)(tilde - sess) > SIMBA_MAX_ID) {
            out->status = SIMBA_EPROTO;
            return;
        }
        snprintf(h->session, sizeof h->session, "%s", sess);
        memcpy(h->client, sess, (size_t)(tilde - sess));
        h->client[tilde - sess] = 0;
        h->fence = atoll(PQgetvalue(r, i, 2));
        h->weight = atoi(PQgetvalue(r, i, 3));
        h->granted = h->fence > 0;
        h->expires_in_ms = atoll(PQgetvalue(r, i, 4));
        h->renewed_ago_ms = atoll(PQgetvalue(r, i, 5));
        h->held_ms = atoll(PQgetvalue(r, i, 6));
        if (h->granted) {
            if (!out->held) out->owner = (*entries)[k].session;
            out->held++;
        }
        k++;
    }
    out->nentries = k;
    out->entries = *entries;
}

/*>>locks.dispatch: the answer of every call, errors */

/* The kind of a server error: the ones a retry cures (a deadlock, a
   lock_timeout on rows another transaction holds, a serialization failure)
   are SIMBA_ETIMEDOUT, which the core retries; a read-only server or one
   shutting down drops the connection (the next may reach a primary). */
static int simba__pg_error(simba__pg *b, PGresult *r, int *drop) {
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    *drop = 0;
    if (!st) { *drop = 1; return SIMBA_EDISCONNECTED; }
    if (strcmp(st, "40P01") == 0 || strcmp(st, "40001") == 0 || strcmp(st, "55P03") == 0 ||
        strcmp(st, "57014") == 0) {
        b->stats.retried++;
        return SIMBA_ETIMEDOUT;
    }
    if (strcmp(st, "25006") == 0 || strncmp(st, "57P", 3) == 0 || strncmp(st, "08", 2) == 0) {
        *drop = 1;
        return SIMBA_EDISCONNECTED;
    }
    if (strcmp(st, "42501") == 0) return SIMBA_EAUTH;   /* privileges, row-level security */
    return SIMBA_EBACKEND;
}

/* The answer of the job at the head (taken off the queue), then the next. */
static void simba__pg_answer(simba__pg *b, simba__pg_job *j, PGresult *r) {
    simba_reply out;
    simba_holder *entries = NULL;
    char msg[SIMBA_MAX_MESSAGE];
    int drop = 0;
    if (!j) return;
    memset(&out, 0, sizeof out);
    out.id = j->id;
    out.recheck_ms = -1;
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
        out.status = simba__pg_error(b, r, &drop);
        simba__pg_message(r ? PQresultErrorMessage(r) : PQerrorMessage(b->conn), msg, sizeof msg);
        if (strstr(msg, "read-only")) snprintf(msg, sizeof msg, "the server is read-only (a standby, or default_transaction_read_only)");
        out.message = msg;
        b->stats.last_error = out.status;
    } else if (j->kind == SIMBA_OP_OPEN || j->kind == SIMBA_OP_KEEPALIVE || j->kind == SIMBA_OP_CLOSE) {
        simba__pg_session_reply(b, j, r, &out);
    } else if (j->kind == SIMBA_OP_ENQUEUE || j->kind == SIMBA_OP_POLL) {
        simba__pg_state_reply(b, j, r, &out);
    } else if (j->kind == SIMBA_OP_INSPECT) {
        simba__pg_inspect_reply(b, r, &out, &entries);
    } else if (PQntuples(r) != 1 || PQnfields(r) != 1) {
        out.status = SIMBA_EPROTO;
    }
    simba__pg_job_free(b, j);
    b->stats.ops_completed++;
    if (drop) {
        /* the connection is of no use: this op and the queued ones end
           EDISCONNECTED, and the next connection may reach a primary */
        simba__pg_lost(b, SIMBA_EDISCONNECTED, msg, 1);
        simba_backend_complete(b->s, &out);
    } else {
        simba_backend_complete(b->s, &out);
    }
    simba__pg_free(b, entries);
    simba__pg_kick(b);
}

/*>>wakeups: LISTEN/NOTIFY -> simba_backend_recheck / simba_backend_changed */

/*>>wakeups.arm: OPEN and KEEPALIVE LISTEN on the session's channel (the SQL) */
/*>>wakeups.fire: the granting transaction notifies the granted session (the SQL's settle) */

/*>>wakeups.deliver: with the entry's token a grant, else a hint (a re-check) */

/* Splits the next space-separated word of *p into out (cap bytes). 0 = ok. */
static int simba__pg_word(const char **p, char *out, size_t cap) {
    size_t n = strcspn(*p, " ");
    if (n == 0 || n >= cap) return -1;
    memcpy(out, *p, n);
    out[n] = 0;
    *p += n;
    if (**p == ' ') (*p)++;
    return 0;
}

/* "g <request> <hex name> <fence> <token>": an entry of ours was granted.
   When the token is the one the server told us for that waiting request
   (only its owner and the granting transaction know it before the grant:
   tokens are random, and a listener sees one only once it is granted),
   the grant is delivered with its fence, no POLL; otherwise it is a hint
   (a re-check of that request). "o - <hex name>" / "c - <hex name>": the
   owner, capacity or existence of name changed (re-check every request on
   it). Anything else, and anything on another channel, is ignored: any
   role may NOTIFY. */
static void simba__pg_notification(simba__pg *b, const char *channel, const char *payload) {
    char name[SIMBA_MAX_NAME + 1], request[SIMBA_MAX_SESSION + SIMBA_MAX_ID + 40], hex[2 * SIMBA_MAX_NAME + 2];
    char fence[24] = "", token[40] = "";
    const char *p;
    long long f = 0;
    int i;
    if (!b->channel[0] || strcmp(channel, b->channel) != 0 || !payload) goto ignore;
    if ((payload[0] != 'g' && payload[0] != 'o' && payload[0] != 'c') || payload[1] != ' ') goto ignore;
    p = payload + 2;
    if (simba__pg_word(&p, request, sizeof request) != 0 || simba__pg_word(&p, hex, sizeof hex) != 0) goto ignore;
    if (payload[0] == 'g' && (simba__pg_word(&p, fence, sizeof fence) != 0 || simba__pg_word(&p, token, sizeof token) != 0))
        goto ignore;
    if (*p || simba__pg_unhex(hex, strlen(hex), name, sizeof name) != 0 || simba_check_name(name) != SIMBA_OK)
        goto ignore;
    b->stats.notifications++;
    b->stats.wakes++;
    if (payload[0] != 'g') { simba_backend_changed(b->s, name); return; }
    f = strtoll(fence, NULL, 10);
    i = simba__pg_token_find(b, request);
    if (i >= 0 && f > 0 && strcmp(b->tokens[i].token, token) == 0) {
        simba__pg_token_del(b, request);
        b->stats.pushed_grants++;
        simba_backend_granted(b->s, name, b->session, request, (int64_t)f);
        return;
    }
    simba_backend_recheck(b->s, name, b->session, request);
    return;
ignore:
    b->stats.ignored_notifications++;
}

static void simba__pg_notifications(simba__pg *b) {
    PGnotify *n;
    while (b->conn && (n = PQnotifies(b->conn)) != NULL) {
        simba__pg_notification(b, n->relname, n->extra);
        PQfreemem(n);
    }
}

/*>>stats: simba_pg_stats */

static void simba__pg_destroy(void *impl);

SIMBADEF int simba_pg_stats(simba_backend b, struct simba_pg_stats *out) {
    if (!b.vt || b.vt->destroy != simba__pg_destroy || !b.impl || !out) return SIMBA_EINVAL;
    *out = ((simba__pg *)b.impl)->stats;
    return SIMBA_OK;
}

/*>>vtable: attach, submit, pollfds, deadline_ms, process, reset, destroy (glue only) */

static int simba__pg_attach(void *impl, simba *s) {
    simba__pg *b = (simba__pg *)impl;
    b->s = s;
    b->retry_at = simba_now_ms(s);   /* connect on the first process() */
    return SIMBA_OK;
}

static int simba__pg_submit(void *impl, const simba_op *op) {
    simba__pg *b = (simba__pg *)impl;
    simba__pg_job *j;
    int session_op = op->kind == SIMBA_OP_OPEN || op->kind == SIMBA_OP_KEEPALIVE || op->kind == SIMBA_OP_CLOSE;
    /* the core validated the op (names, tenant, ids, counts, capacity) */
    if (!b->up || b->state != SIMBA__PG_READY) return SIMBA_EDISCONNECTED;
    if (!session_op && b->queued_ops >= SIMBA__PG_MAX_QUEUED) return SIMBA_EBUSY;
    j = simba__pg_job_from_op(b, op);
    if (!j) return SIMBA_ENOMEM;
    b->stats.ops_sent++;
    if ((op->kind == SIMBA_OP_OPEN || op->kind == SIMBA_OP_KEEPALIVE) && strcmp(b->session, op->session) != 0)
        simba__pg_session_switch(b, op->session);
    if (!session_op) b->queued_ops++;
    if (op->kind == SIMBA_OP_RELEASE) simba__pg_token_del(b, op->request);
    simba__pg_push(b, j, session_op);
    simba__pg_kick(b);   /* send now; the answer is handled in process() */
    return SIMBA_OK;
}

static int simba__pg_pollfds(void *impl, struct pollfd *fds, int max) {
    simba__pg *b = (simba__pg *)impl;
    short ev = 0;
    int fd;
    if (!b->conn || (fd = PQsocket(b->conn)) < 0) return 0;
    if (b->state == SIMBA__PG_CONNECTING) ev = b->want == PGRES_POLLING_READING ? POLLIN : POLLOUT;
    else ev = (short)(POLLIN | (b->flushing ? POLLOUT : 0));
    if (fds && max > 0) { fds[0].fd = fd; fds[0].events = ev; fds[0].revents = 0; }
    return 1;
}

static int64_t simba__pg_deadline(void *impl) {
    simba__pg *b = (simba__pg *)impl;
    if (!b->s) return -1;
    if (b->state == SIMBA__PG_CLOSED) return b->retry_at < 0 ? 0 : b->retry_at;
    if (b->state == SIMBA__PG_CONNECTING || b->state == SIMBA__PG_SETUP) return b->started_ms + b->connect_timeout_ms;
    return -1;
}

/* What poll() said about our socket (everything when fds is NULL). */
static short simba__pg_revents(simba__pg *b, const struct pollfd *fds, int nfds) {
    int i, fd = b->conn ? PQsocket(b->conn) : -1;
    if (!fds) return (short)(POLLIN | POLLOUT);
    for (i = 0; i < nfds; i++) if (fds[i].fd == fd && fd >= 0) return fds[i].revents;
    return 0;
}

static void simba__pg_process(void *impl, const struct pollfd *fds, int nfds) {
    simba__pg *b = (simba__pg *)impl;
    short rv = simba__pg_revents(b, fds, nfds);
    simba__pg_timers(b);
    if (b->state == SIMBA__PG_CONNECTING) {
        if (rv) simba__pg_connect_step(b);
        return;
    }
    if (b->state != SIMBA__PG_SETUP && b->state != SIMBA__PG_READY) return;
    if (b->flushing && (rv & (POLLOUT | POLLERR | POLLHUP))) {
        int f = PQflush(b->conn);
        if (f < 0) {
            char msg[SIMBA_MAX_MESSAGE];
            simba__pg_message(PQerrorMessage(b->conn), msg, sizeof msg);
            simba__pg_lost(b, SIMBA_EDISCONNECTED, msg, 1);
            return;
        }
        b->flushing = f == 1;
    }
    if (rv & (POLLIN | POLLERR | POLLHUP)) simba__pg_read(b);
}

static void simba__pg_reset(void *impl, int why) {
    simba__pg *b = (simba__pg *)impl;
    char msg[128]; /* "connection reset (" + simba_strerror() */
    snprintf(msg, sizeof msg, "connection reset (%s)", simba_strerror(why));
    simba__pg_lost(b, why ? why : SIMBA_EDISCONNECTED, msg, 0);
}

static void simba__pg_destroy(void *impl) {
    simba__pg *b = (simba__pg *)impl;
    simba__pg_job *j;
    simba__pg_close(b);
    while ((j = simba__pg_pop(b)) != NULL) simba__pg_job_free(b, j);
    simba__pg_token_clear(b);
    simba__pg_free(b, b->tokens);
    simba__pg_free(b, b->conninfo);
    if (b->password) memset(b->password, 0, strlen(b->password));
    simba__pg_free(b, b->password);
    simba__pg_free(b, b->hostaddr);
    simba__pg_free(b, b);
}

static const simba_backend_vtable simba__pg_vtable = {
    "postgres",
    simba__pg_attach,
    simba__pg_submit,
    simba__pg_pollfds,
    simba__pg_deadline,
    simba__pg_process,
    simba__pg_reset,
    simba__pg_destroy
};

/*>>constructor: desc checks, allocation, the schema (SQL), simba_pg_from_url */

/* The schema: simba_pg.sql with "@" standing for the schema name. Keep the
   two in sync: simba_pg.sql is this text for "simba" (a test compares). */
static const char *const simba__pg_ddl[] = {
    /* one installer at a time: CREATE ... IF NOT EXISTS races with itself */
    "SELECT pg_advisory_xact_lock(7236450315724219)",
    /* A newer simba's schema is never replaced by this one: that simba's
       clients would call functions that no longer answer as they expect. */
    "DO $d$ DECLARE v integer := COALESCE((SELECT substring(p.prosrc FROM '[0-9]+')::integer\n"
    "    FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace\n"
    "    WHERE n.nspname = '@' AND p.proname = 'version' AND p.pronargs = 0), 0);\n"
    "BEGIN\n"
    "    IF v > 12 THEN\n"
    "        RAISE EXCEPTION 'schema @ has version %, newer than this simba_pg.sql (12): keep it, use the newer simba', v;\n"
    "    END IF;\n"
    "END $d$",
    "CREATE SCHEMA IF NOT EXISTS @",
    /* One row per client session. A session's entries live exactly as long
       as its expires is later than the server's clock_timestamp(); one
       keepalive UPDATE of this row renews all of a client's locks. */
    "CREATE TABLE IF NOT EXISTS @.sessions (\n"
    "    tenant    text        NOT NULL,\n"
    "    session   text        NOT NULL,    -- \"<client id>~<16 hex>\"\n"
    "    expires   timestamptz NOT NULL,    -- server time; dead when <= now\n"
    "    lease_ms  integer     NOT NULL,\n"
    "    PRIMARY KEY (tenant, session))",
    /* When the session of that id was opened: an id opened again after it
       expired is another session (OPEN), and a hold kept in a resource's
       row (below) names the one it belongs to. Version 10. */
    "ALTER TABLE @.sessions ADD COLUMN IF NOT EXISTS opened timestamptz",
    /* One row per resource; every operation on it locks this row (FOR
       UPDATE, several in name order), which serialises its queue. While the
       queue has entries or a hold in the row (h_ columns, below), held and
       owner are what the last walk of the grant rule found (every path that
       adds an entry ends in a walk or grants as one); an empty queue holds
       nothing, and its held and owner, left from its last holder, mean
       nothing: whatever reads them reads a queue with a holder. */
    "CREATE TABLE IF NOT EXISTS @.resources (\n"
    "    tenant    text    NOT NULL,\n"
    "    name      bytea   NOT NULL,        -- any bytes: compared byte-wise\n"
    "    capacity  integer NOT NULL,\n"
    "    counter   bigint  NOT NULL DEFAULT 0,  -- the last fence granted\n"
    "    seq       bigint  NOT NULL DEFAULT 0,  -- the last queue position given out\n"
    "    held      integer NOT NULL DEFAULT 0,  -- granted entries\n"
    "    owner     text,                        -- session of the oldest granted entry\n"
    "    PRIMARY KEY (tenant, name))",
    /* A sole holder kept in its resource's row (version 10): an acquire
       that finds the queue empty writes its hold here, with no entry row,
       and a release of it clears it, so an uncontended lock writes one row
       per operation. h_session NULL: none. Such a hold is the queue's first
       entry in all but storage (h_seq is its position, h_fence its fence):
       whatever else reads or changes the queue turns it into an entry row
       first, under the row's lock (unfold), so the grant rule only ever
       walks entry rows. */
    "ALTER TABLE @.resources ADD COLUMN IF NOT EXISTS h_seq bigint,\n"
    "    ADD COLUMN IF NOT EXISTS h_request text, ADD COLUMN IF NOT EXISTS h_session text,\n"
    "    ADD COLUMN IF NOT EXISTS h_opened timestamptz, ADD COLUMN IF NOT EXISTS h_weight integer,\n"
    "    ADD COLUMN IF NOT EXISTS h_fence bigint, ADD COLUMN IF NOT EXISTS h_watch boolean,\n"
    "    ADD COLUMN IF NOT EXISTS h_token text",
    /* The FIFO queues: one row per (request, resource); fence is 0 while
       waiting and set once when granted. */
    "CREATE TABLE IF NOT EXISTS @.entries (\n"
    "    tenant    text    NOT NULL,\n"
    "    name      bytea   NOT NULL,\n"
    "    seq       bigint  NOT NULL,\n"
    "    request   text    NOT NULL,\n"
    "    session   text    NOT NULL,\n"
    "    weight    integer NOT NULL,        -- 0 = exclusive (the whole capacity)\n"
    "    fence     bigint  NOT NULL DEFAULT 0,\n"
    "    watch     boolean NOT NULL DEFAULT false,  -- told when the owner changes\n"
    "    PRIMARY KEY (tenant, name, seq),\n"
    "    UNIQUE (tenant, name, request))",
    "CREATE INDEX IF NOT EXISTS entries_session ON @.entries (tenant, session)",
    /* a random token per entry, told only to its owner (in ENQUEUE and POLL
       answers), then in its grant's notification: a notification that names
       the token the waiter knows is the server's (wakeups.deliver) */
    "ALTER TABLE @.entries ADD COLUMN IF NOT EXISTS token text",
    "CREATE INDEX IF NOT EXISTS entries_watch ON @.entries (tenant, name) WHERE watch",
    /* The admin epoch of each tenant (DELETE and SET_CAPACITY add one). */
    "CREATE TABLE IF NOT EXISTS @.tenants (\n"
    "    tenant    text    PRIMARY KEY,\n"
    "    epoch     bigint  NOT NULL DEFAULT 1)",
    /* The restart grace: the server run (run, below) that last granted in
       the tenant, and the end of a grace (no grants). */
    "ALTER TABLE @.tenants ADD COLUMN IF NOT EXISTS boot timestamptz",
    "ALTER TABLE @.tenants ADD COLUMN IF NOT EXISTS grace_until timestamptz",
    /* The longest lease given in the tenant since lease_until was last
       passed, and a horizon past every session expiry given since then
       (version 12; note_lease keeps both, durably): a grace covers the
       sessions a server lost with their rows. */
    "ALTER TABLE @.tenants ADD COLUMN IF NOT EXISTS lease_max integer,\n"
    "    ADD COLUMN IF NOT EXISTS lease_until timestamptz",
    /* The server run (version 12): one row, made by the first walk of a
       run (mark_run), kept by a clean restart and emptied by PostgreSQL's
       crash recovery (UNLOGGED), which may have lost asynchronous commits
       without a new postmaster start. A run is a postmaster start and its
       row: a missing row, or one of another start, is a new run. No tenant
       data: read by every role, written only through mark_run. */
    "CREATE UNLOGGED TABLE IF NOT EXISTS @.run (\n"
    "    one        boolean     PRIMARY KEY DEFAULT true CHECK (one),\n"
    "    started    timestamptz NOT NULL,    -- this run's id (tenants.boot)\n"
    "    postmaster timestamptz NOT NULL     -- pg_postmaster_start_time() of the run\n"
    ")",
    "GRANT SELECT ON @.run TO PUBLIC",
    /* Tenant isolation: a tenant listed here is usable only by its roles
       (and their members); an unlisted tenant by every role with the grants. */
    "CREATE TABLE IF NOT EXISTS @.tenant_roles (\n"
    "    tenant    text NOT NULL,\n"
    "    role      name NOT NULL,\n"
    "    PRIMARY KEY (tenant, role))",
    /* An upgrade from an older version: the functions whose answer rows
       changed (state, enqueue, poll: version 5; inspect: version 6) go
       first, as CREATE OR REPLACE cannot change them, and so does the
       join_queue that took queue positions (version 9 gives them out in
       it). Only then: an installer that finds the current version in place
       (another client installed it while this one waited for the advisory
       lock) drops nothing that the other clients are calling. A schema
       older than version 12 gets the server's run as its tenants' boot
       names it (the postmaster's start): its upgrade starts no grace. */
    "DO $d$ DECLARE v integer := COALESCE((SELECT substring(p.prosrc FROM '[0-9]+')::integer\n"
    "    FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace\n"
    "    WHERE n.nspname = '@' AND p.proname = 'version' AND p.pronargs = 0), 0);\n"
    "BEGIN\n"
    "    IF v < 6 THEN\n"
    "        DROP FUNCTION IF EXISTS @.state(text, text, text, bytea[], timestamptz);\n"
    "        DROP FUNCTION IF EXISTS @.enqueue(text, text, text, boolean, boolean, text[], integer[], integer[]);\n"
    "        DROP FUNCTION IF EXISTS @.poll(text, text, text, text[]);\n"
    "        DROP FUNCTION IF EXISTS @.inspect(text, text);\n"
    "    END IF;\n"
    "    IF v < 9 THEN\n"
    "        DROP FUNCTION IF EXISTS @.join_queue(text, text, text, boolean, boolean, bytea[], bigint[], integer[],\n"
    "                                             timestamptz);\n"
    "    END IF;\n"
    "    IF v < 12 THEN\n"
    "        INSERT INTO @.run (started, postmaster)\n"
    "            VALUES (pg_catalog.pg_postmaster_start_time(), pg_catalog.pg_postmaster_start_time())\n"
    "            ON CONFLICT (one) DO NOTHING;\n"
    "    END IF;\n"
    "END $d$",
    "CREATE OR REPLACE FUNCTION @.version() RETURNS integer LANGUAGE sql IMMUTABLE AS $f$ SELECT 12 $f$",
    /* The policy of every table: a row of a tenant listed in tenant_roles
       is for the roles listed (and their members) only. Written out in the
       policy, not called as a function: its subqueries are planned with each
       statement (and kept with its plan), where a PL/pgSQL function would
       run two statements of its own for every row read. Version 7 put it
       there (version 6 called tenant_ok). */
    "DO $d$ DECLARE t text; v_rule text; BEGIN\n"
    "    FOREACH t IN ARRAY ARRAY['sessions', 'resources', 'entries', 'tenants'] LOOP\n"
    "        EXECUTE format('ALTER TABLE @.%I ENABLE ROW LEVEL SECURITY', t);\n"
    "        EXECUTE format('ALTER TABLE @.%I FORCE ROW LEVEL SECURITY', t);\n"
    "        v_rule := format('(NOT EXISTS (SELECT 1 FROM @.tenant_roles t WHERE t.tenant = %1$I.tenant)'\n"
    "                         ' OR EXISTS (SELECT 1 FROM @.tenant_roles t'\n"
    "                         ' JOIN pg_catalog.pg_roles r ON r.rolname = t.role WHERE t.tenant = %1$I.tenant'\n"
    "                         ' AND pg_catalog.pg_has_role(current_user, r.oid, ''MEMBER'')))', t);\n"
    "        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_policies p\n"
    "                       WHERE p.schemaname = '@' AND p.tablename = t AND p.policyname = 'tenant_rows') THEN\n"
    "            EXECUTE format('CREATE POLICY tenant_rows ON @.%I USING %s WITH CHECK %s', t, v_rule, v_rule);\n"
    "        ELSE\n"
    "            EXECUTE format('ALTER POLICY tenant_rows ON @.%I USING %s WITH CHECK %s', t, v_rule, v_rule);\n"
    "        END IF;\n"
    "    END LOOP;\n"
    "END $d$",
    "DROP FUNCTION IF EXISTS @.tenant_ok(text)",
    /* The helpers below are PL/pgSQL, not SQL: PL/pgSQL keeps its plans for
       the session, a SQL function with a subquery is planned at every call.
       Names resolve in pg_catalog and our schema only: the functions run
       with the caller's rights, and an operator or function that another
       role creates in a schema on the caller's search_path (public is
       writable by every role before PostgreSQL 15) is chosen over
       pg_catalog's wherever pg_catalog matches the arguments only through
       a cast (integer * interval in OPEN's and KEEPALIVE's expiry: one that
       answered 1 ms would end a session its client believes renewed). So
       every PL/pgSQL function (and bump_epoch) runs with search_path =
       pg_catalog, pg_temp and names our tables and functions with the
       schema. grant_weight, next_fence and channel take no SET (it would
       stop their inlining): every operator in them matches a pg_catalog
       one exactly (pg_catalog is searched first) or is written
       OPERATOR(pg_catalog.*). */
    /* simba_grant_weight (simba.h >>kit), the server's copy: min(weight,
       capacity), weight 0 (exclusive) counts as the capacity. */
    "CREATE OR REPLACE FUNCTION @.grant_weight(p_weight integer, p_capacity integer) RETURNS bigint\n"
    "LANGUAGE sql IMMUTABLE AS $f$\n"
    "    SELECT CASE WHEN p_weight = 0 OR p_weight > p_capacity THEN p_capacity ELSE p_weight END::bigint\n"
    "$f$",
    /* simba_grant_fence (simba.h >>kit), the server's copy: the next fence
       is above the last one and at least the server's clock in µs. STABLE
       (extract of a timestamptz is), so that it is inlined, not called. */
    "CREATE OR REPLACE FUNCTION @.next_fence(p_counter bigint, p_now timestamptz) RETURNS bigint\n"
    "LANGUAGE sql STABLE AS $f$\n"
    "    SELECT GREATEST(p_counter + 1, (extract(epoch FROM p_now) OPERATOR(pg_catalog.*) 1000000)::bigint)   -- simba_grant_fence\n"
    "$f$",
    "CREATE OR REPLACE FUNCTION @.channel(p_session text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$\n"
    "    SELECT 'simba_' || right(p_session, 16)\n"
    "$f$",
    "CREATE OR REPLACE FUNCTION @.live(p_tenant text, p_session text, p_now timestamptz) RETURNS boolean\n"
    "LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$\n"
    "BEGIN\n"
    "    RETURN EXISTS (SELECT 1 FROM @.sessions s\n"
    "                   WHERE s.tenant = p_tenant AND s.session = p_session AND s.expires > p_now);\n"
    "END $f$",
    /* This server run's id (run.started), the run's row made when it is
       missing or of another postmaster start: its id is the time it is
       made, never one a tenant recorded before. SECURITY DEFINER: clients
       read the row but cannot write it. */
    "CREATE OR REPLACE FUNCTION @.mark_run() RETURNS timestamptz\n"
    "LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_run timestamptz;\n"
    "BEGIN\n"
    "    SELECT m.started INTO v_run FROM @.run m WHERE m.postmaster = pg_postmaster_start_time();\n"
    "    IF FOUND THEN RETURN v_run; END IF;\n"
    "    INSERT INTO @.run AS m (started, postmaster) VALUES (clock_timestamp(), pg_postmaster_start_time())\n"
    "        ON CONFLICT (one) DO UPDATE SET started = EXCLUDED.started, postmaster = EXCLUDED.postmaster\n"
    "        WHERE m.postmaster <> EXCLUDED.postmaster;\n"
    "    SELECT m.started INTO v_run FROM @.run m;\n"
    "    RETURN v_run;\n"
    "END $f$",
    /* OPEN and KEEPALIVE give expiries now + lease: every one is at most
       lease_until, and lease_max is at least every lease given since
       lease_until was last passed (an expiry given before then has passed).
       A write (when a longer lease comes, or the horizon is less than a
       lease ahead: once a lease at most) commits durably, whatever
       synchronous_commit the server runs with, so a server that loses the
       sessions given since still has it. */
    "CREATE OR REPLACE FUNCTION @.note_lease(p_tenant text, p_lease integer, p_now timestamptz) RETURNS void\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "BEGIN\n"
    "    IF EXISTS (SELECT 1 FROM @.tenants t WHERE t.tenant = p_tenant AND t.lease_max >= p_lease\n"
    "               AND t.lease_until >= p_now + p_lease * interval '1 millisecond') THEN\n"
    "        RETURN;\n"
    "    END IF;\n"
    "    PERFORM set_config('synchronous_commit', 'on', true);\n"
    "    INSERT INTO @.tenants AS t (tenant, lease_max, lease_until)\n"
    "        VALUES (p_tenant, p_lease, p_now + 2 * p_lease * interval '1 millisecond')\n"
    "        ON CONFLICT (tenant) DO UPDATE\n"
    "        SET lease_max = CASE WHEN t.lease_until > p_now THEN GREATEST(t.lease_max, p_lease) ELSE p_lease END,\n"
    "            lease_until = GREATEST(t.lease_until, EXCLUDED.lease_until);\n"
    "END $f$",
    /* The restart grace (docs/postgres.md): a server run other than the one
       that last granted in the tenant (a restart, a crash recovery, a
       promoted standby) may have lost commits when the server does not
       keep them all (fsync or synchronous_commit off) or the client says
       so (simba_pg.restart_grace = 1): then nothing is granted until every
       session expiry given before may have passed: one longest lease of
       the sessions present, and of those lost with their rows, as
       note_lease kept it. The tenant's sessions then end: a holder whose
       grant was lost but whose session was kept (renewed again after the
       restart) would believe forever; each is told LOST at its next
       KEEPALIVE, a silent one when its lease runs out, within the grace.
       Returns the end of the grace (NULL: none). */
    "CREATE OR REPLACE FUNCTION @.notice_boot(p_tenant text, p_now timestamptz) RETURNS timestamptz\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE\n"
    "    v_boot timestamptz; v_grace timestamptz; v_lost timestamptz; v_start timestamptz := @.mark_run();\n"
    "    v_mode text := COALESCE(current_setting('simba_pg.restart_grace', true), '0'); v_lease integer;\n"
    "BEGIN\n"
    "    SELECT t.boot, t.grace_until INTO v_boot, v_grace FROM @.tenants t WHERE t.tenant = p_tenant;\n"
    "    IF FOUND AND v_boot = v_start THEN RETURN v_grace; END IF;\n"
    "    v_grace := NULL;\n"
    "    IF v_mode = '1' OR (v_mode = '0' AND (current_setting('fsync') = 'off'\n"
    "                                        OR current_setting('synchronous_commit') = 'off')) THEN\n"
    "        SELECT COALESCE(max(s.lease_ms), 0) INTO v_lease FROM @.sessions s WHERE s.tenant = p_tenant;\n"
    "        SELECT LEAST(t.lease_until, p_now + t.lease_max * interval '1 millisecond') INTO v_lost\n"
    "            FROM @.tenants t WHERE t.tenant = p_tenant AND t.lease_until > p_now;\n"
    "        v_grace := GREATEST(p_now + v_lease * interval '1 millisecond', v_lost);\n"
    "        -- a grant that a session from before holds may be lost: none of them is renewed (an\n"
    "        -- expiry before the postmaster's start is before the clock of every call of this run)\n"
    "        UPDATE @.sessions s SET expires = pg_postmaster_start_time()\n"
    "            WHERE s.tenant = p_tenant AND s.expires > pg_postmaster_start_time();\n"
    "    END IF;\n"
    "    INSERT INTO @.tenants AS t (tenant, boot, grace_until) VALUES (p_tenant, v_start, v_grace)\n"
    "        ON CONFLICT (tenant) DO UPDATE SET boot = EXCLUDED.boot, grace_until = EXCLUDED.grace_until;\n"
    "    RETURN v_grace;\n"
    "END $f$",
    /* OPEN and KEEPALIVE notice a new server run before they give an
       expiry: a session from before is not renewed in a run that may have
       lost its grants (notice_boot). */
    "CREATE OR REPLACE FUNCTION @.notice_run(p_tenant text, p_now timestamptz) RETURNS void\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "BEGIN\n"
    "    IF NOT EXISTS (SELECT 1 FROM @.tenants t WHERE t.tenant = p_tenant\n"
    "                   AND t.boot = (SELECT m.started FROM @.run m\n"
    "                                 WHERE m.postmaster = pg_postmaster_start_time())) THEN\n"
    "        PERFORM @.notice_boot(p_tenant, p_now);\n"
    "    END IF;\n"
    "END $f$",
    /* A hold kept in the resource's row becomes the queue's first entry row
       (the caller holds the row's lock). Only while its session is the one
       that took it (the same id, opened at the same time): a hold of a
       session that was closed, or opened again after it expired, is
       dropped, as CLOSE would have dropped its entry. The session's row is
       locked (KEY SHARE) until the caller's transaction ends, so a CLOSE
       either finished before (the hold is dropped here) or waits and then
       finds the entry. */
    "CREATE OR REPLACE FUNCTION @.unfold(p_tenant text, p_name bytea) RETURNS void\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "BEGIN\n"
    "    INSERT INTO @.entries (tenant, name, seq, request, session, weight, fence, watch, token)\n"
    "        SELECT r.tenant, r.name, r.h_seq, r.h_request, r.h_session, r.h_weight, r.h_fence, r.h_watch, r.h_token\n"
    "        FROM @.resources r JOIN @.sessions s ON s.tenant = r.tenant AND s.session = r.h_session\n"
    "            AND s.opened IS NOT DISTINCT FROM r.h_opened\n"
    "        WHERE r.tenant = p_tenant AND r.name = p_name\n"
    "        FOR KEY SHARE OF s;\n"
    "    UPDATE @.resources r SET h_seq = NULL, h_request = NULL, h_session = NULL, h_opened = NULL,\n"
    "        h_weight = NULL, h_fence = NULL, h_watch = NULL, h_token = NULL\n"
    "        WHERE r.tenant = p_tenant AND r.name = p_name AND r.h_session IS NOT NULL;\n"
    "END $f$",
    /* THE GRANT RULE, the server's copy of simba_grant_step and
       simba_grant_fence (simba.h >>kit; keep the two in step; the fence
       through next_fence above, which enqueue's fast path uses too). Walks the
       queue of one resource from its head (the caller holds the resource
       row's lock; a hold in the row is unfolded first): dead entries go; an entry is granted iff the effective
       weights ahead of it plus its own fit in the capacity; the walk stops
       at the first waiter that does not fit (FIFO, no barging). A newly
       granted entry takes the fence max(counter + 1, server time in us)
       and its session is notified (one notification per grant; the
       request p_quiet is answered by the caller and not notified). When the
       oldest holder changes, the sessions with watching entries are told. */
    "CREATE OR REPLACE FUNCTION @.settle(p_tenant text, p_name bytea, p_now timestamptz, p_quiet text)\n"
    "RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE\n"
    "    v_cap integer; v_counter bigint; v_counter0 bigint; v_old text; v_owner text; v_grace timestamptz;\n"
    "    v_held integer := 0; v_held0 integer; v_ahead bigint := 0; v_fence bigint; v_booted boolean; e record;\n"
    "    v_watched boolean := false; v_inline boolean;\n"
    "BEGIN\n"
    "    SELECT r.capacity, r.counter, r.owner, r.held, t.boot = (SELECT m.started FROM @.run m\n"
    "               WHERE m.postmaster = pg_catalog.pg_postmaster_start_time()), t.grace_until,\n"
    "           r.h_session IS NOT NULL INTO v_cap, v_counter, v_old, v_held0, v_booted, v_grace, v_inline\n"
    "        FROM @.resources r LEFT JOIN @.tenants t ON t.tenant = r.tenant\n"
    "        WHERE r.tenant = p_tenant AND r.name = p_name;\n"
    "    IF NOT FOUND THEN RETURN; END IF;\n"
    "    IF v_inline THEN PERFORM @.unfold(p_tenant, p_name); END IF;   -- changes none of the above\n"
    "    -- once this server run has noticed its boot in the tenant, the row read above holds its grace\n"
    "    IF v_booted IS NOT TRUE THEN v_grace := @.notice_boot(p_tenant, p_now); END IF;\n"
    "    v_counter0 := v_counter;\n"
    "    -- v_watched: a watcher may be in the queue (a walk to its end sees every live\n"
    "    -- entry; one that stops at a waiter does not, and the query at the end looks)\n"
    "    FOR e IN SELECT q.seq, q.session, q.request, q.weight, q.fence, q.token, q.watch, s.expires\n"
    "             FROM @.entries q LEFT JOIN @.sessions s ON s.tenant = q.tenant AND s.session = q.session\n"
    "             WHERE q.tenant = p_tenant AND q.name = p_name ORDER BY q.seq LOOP\n"
    "        IF e.expires IS NULL OR e.expires <= p_now THEN\n"
    "            DELETE FROM @.entries q WHERE q.tenant = p_tenant AND q.name = p_name AND q.seq = e.seq;\n"
    "            CONTINUE;\n"
    "        END IF;\n"
    "        v_ahead := v_ahead + @.grant_weight(e.weight, v_cap);      -- simba_grant_step\n"
    "        IF e.fence = 0 THEN\n"
    "            IF v_ahead > v_cap OR v_grace > p_now THEN                -- the restart grace\n"
    "                v_watched := true;\n"
    "                EXIT;\n"
    "            END IF;\n"
    "            v_fence := @.next_fence(v_counter, p_now);            -- simba_grant_fence\n"
    "            v_counter := v_fence;\n"
    "            UPDATE @.entries q SET fence = v_fence\n"
    "                WHERE q.tenant = p_tenant AND q.name = p_name AND q.seq = e.seq;\n"
    "            IF e.request IS DISTINCT FROM p_quiet THEN\n"
    "                PERFORM pg_notify(@.channel(e.session), 'g ' || e.request || ' ' || encode(p_name, 'hex')\n"
    "                                  || ' ' || v_fence || ' ' || COALESCE(e.token, '-'));\n"
    "            END IF;\n"
    "        END IF;\n"
    "        v_held := v_held + 1;\n"
    "        IF v_owner IS NULL THEN v_owner := e.session; END IF;\n"
    "        v_watched := v_watched OR e.watch;\n"
    "    END LOOP;\n"
    "    IF v_counter <> v_counter0 OR v_held <> v_held0 OR v_owner IS DISTINCT FROM v_old THEN\n"
    "        UPDATE @.resources r SET counter = v_counter, held = v_held, owner = v_owner\n"
    "            WHERE r.tenant = p_tenant AND r.name = p_name;\n"
    "    END IF;\n"
    "    IF v_owner IS DISTINCT FROM v_old AND v_watched THEN\n"
    "        PERFORM pg_notify(@.channel(w.session), 'o - ' || encode(p_name, 'hex'))\n"
    "            FROM (SELECT DISTINCT q.session FROM @.entries q\n"
    "                  WHERE q.tenant = p_tenant AND q.name = p_name AND q.watch) w;\n"
    "    END IF;\n"
    "END $f$",
    /* Locks the resource rows of p_names in name order (no deadlock between
       two multi-resource requests), creating missing ones with p_caps. */
    "CREATE OR REPLACE FUNCTION @.lock_all(p_tenant text, p_names bytea[], p_caps integer[])\n"
    "RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_i integer;\n"
    "BEGIN\n"
    "    FOR v_i IN SELECT k FROM generate_subscripts(p_names, 1) AS k ORDER BY p_names[k] LOOP\n"
    "        IF p_caps IS NOT NULL THEN\n"
    "            INSERT INTO @.resources (tenant, name, capacity) VALUES (p_tenant, p_names[v_i], p_caps[v_i])\n"
    "                ON CONFLICT (tenant, name) DO NOTHING;\n"
    "        END IF;\n"
    "        PERFORM 1 FROM @.resources r WHERE r.tenant = p_tenant AND r.name = p_names[v_i] FOR UPDATE;\n"
    "    END LOOP;\n"
    "END $f$",
    /* Would a new entry of these weights be granted at once everywhere
       (try_only)? The same rule: simba_grant_step over the live queue. */
    "CREATE OR REPLACE FUNCTION @.fits(p_tenant text, p_names bytea[], p_weights integer[], p_now timestamptz)\n"
    "RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_i integer; v_cap integer; v_ahead bigint; e record;\n"
    "BEGIN\n"
    "    IF EXISTS (SELECT 1 FROM @.tenants t WHERE t.tenant = p_tenant AND t.grace_until > p_now) THEN\n"
    "        RETURN false;\n"
    "    END IF;\n"
    "    FOR v_i IN 1 .. array_length(p_names, 1) LOOP\n"
    "        SELECT r.capacity INTO v_cap FROM @.resources r WHERE r.tenant = p_tenant AND r.name = p_names[v_i];\n"
    "        v_ahead := 0;\n"
    "        FOR e IN SELECT q.weight FROM @.entries q\n"
    "                 JOIN @.sessions s ON s.tenant = q.tenant AND s.session = q.session AND s.expires > p_now\n"
    "                 WHERE q.tenant = p_tenant AND q.name = p_names[v_i] ORDER BY q.seq LOOP\n"
    "            v_ahead := v_ahead + @.grant_weight(e.weight, v_cap);\n"
    "            IF v_ahead > v_cap THEN RETURN false; END IF;\n"
    "        END LOOP;\n"
    "        IF v_ahead + @.grant_weight(p_weights[v_i], v_cap) > v_cap THEN RETURN false; END IF;\n"
    "    END LOOP;\n"
    "    RETURN true;\n"
    "END $f$",
    /* The answer of ENQUEUE and POLL. o_status: 0 ok, 1 no session
       (SIMBA_ESESSION), 2 weight over the capacity (SIMBA_ECAPACITY), 3 the
       request id is another live session's (SIMBA_EKEYBUSY), 4 no such
       entry of ours (SIMBA_ENOTFOUND); simba_pg.h maps them. */
    "CREATE OR REPLACE FUNCTION @.state(p_tenant text, p_session text, p_request text, p_names bytea[],\n"
    "    p_now timestamptz, OUT o_status integer, OUT o_granted boolean, OUT o_fences bigint[],\n"
    "    OUT o_ahead integer, OUT o_held integer, OUT o_owner text, OUT o_recheck_ms integer,\n"
    "    OUT o_capacity integer, OUT o_grace_ms integer,\n"
    "    OUT o_token text)\n"
    "LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_i integer; e record; v_min timestamptz; v_exp timestamptz;\n"
    "BEGIN\n"
    "    o_status := 0; o_granted := true; o_fences := '{}'; o_grace_ms := 0; o_recheck_ms := -1;\n"
    "    FOR v_i IN 1 .. array_length(p_names, 1) LOOP\n"
    "        -- the request's entry row, or its hold in the resource's row (while its session is the\n"
    "        -- one that took it, as unfold keeps it)\n"
    "        SELECT q.seq, q.fence, q.session, q.token, r.held, r.owner, r.capacity INTO e\n"
    "            FROM @.entries q JOIN @.resources r ON r.tenant = q.tenant AND r.name = q.name\n"
    "            WHERE q.tenant = p_tenant AND q.name = p_names[v_i] AND q.request = p_request\n"
    "        UNION ALL\n"
    "        SELECT r.h_seq, r.h_fence, r.h_session, r.h_token, r.held, r.owner, r.capacity\n"
    "            FROM @.resources r JOIN @.sessions s ON s.tenant = r.tenant AND s.session = r.h_session\n"
    "                AND s.opened IS NOT DISTINCT FROM r.h_opened\n"
    "            WHERE r.tenant = p_tenant AND r.name = p_names[v_i] AND r.h_request = p_request;\n"
    "        IF NOT FOUND OR e.session <> p_session THEN o_status := 4; RETURN; END IF;\n"
    "        o_fences := o_fences || e.fence;\n"
    "        IF v_i = 1 THEN\n"
    "            o_token := e.token; o_held := e.held; o_owner := e.owner; o_capacity := e.capacity;\n"
    "            -- FIFO: the entries ahead of a granted one are holders; a sole holder has none\n"
    "            IF e.fence <> 0 AND e.held = 1 THEN o_ahead := 0;\n"
    "            ELSE SELECT count(*) INTO o_ahead FROM @.entries q\n"
    "                     WHERE q.tenant = p_tenant AND q.name = p_names[1] AND q.seq < e.seq;\n"
    "            END IF;\n"
    "        END IF;\n"
    "        IF e.fence = 0 THEN\n"
    "            o_granted := false;\n"
    "            -- the holders (the first `held` entries) go first: re-check when the first may expire\n"
    "            SELECT min(s.expires) INTO v_exp FROM\n"
    "                (SELECT q.session FROM @.entries q WHERE q.tenant = p_tenant AND q.name = p_names[v_i]\n"
    "                 ORDER BY q.seq LIMIT e.held) h\n"
    "                JOIN @.sessions s ON s.tenant = p_tenant AND s.session = h.session;\n"
    "            IF v_exp IS NOT NULL AND (v_min IS NULL OR v_exp < v_min) THEN v_min := v_exp; END IF;\n"
    "        END IF;\n"
    "    END LOOP;\n"
    "    IF v_min IS NOT NULL THEN\n"
    "        o_recheck_ms := GREATEST(0, LEAST(1073741823, ceil(extract(epoch FROM v_min - p_now) * 1000)))::integer;\n"
    "    END IF;\n"
    "    IF NOT o_granted THEN\n"
    "        SELECT GREATEST(0, LEAST(1073741823, ceil(extract(epoch FROM t.grace_until - p_now) * 1000)))::integer\n"
    "            INTO o_grace_ms FROM @.tenants t WHERE t.tenant = p_tenant AND t.grace_until > p_now;\n"
    "        IF o_grace_ms > 0 AND (o_recheck_ms < 0 OR o_grace_ms < o_recheck_ms) THEN o_recheck_ms := o_grace_ms; END IF;\n"
    "        o_grace_ms := COALESCE(o_grace_ms, 0);\n"
    "    END IF;\n"
    "END $f$",
    "CREATE OR REPLACE FUNCTION @.epoch(p_tenant text) RETURNS bigint LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$\n"
    "BEGIN\n"
    "    RETURN COALESCE((SELECT t.epoch FROM @.tenants t WHERE t.tenant = p_tenant), 1);\n"
    "END $f$",
    "CREATE OR REPLACE FUNCTION @.bump_epoch(p_tenant text) RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "    INSERT INTO @.tenants AS t (tenant, epoch) VALUES (p_tenant, 2)\n"
    "        ON CONFLICT (tenant) DO UPDATE SET epoch = t.epoch + 1\n"
    "$f$",
    /* OPEN: the session's expiry is server now + lease; an expired session
       of that id comes back empty, as another session (opened now). Listens
       on the session's channel. */
    "CREATE OR REPLACE FUNCTION @.open(p_tenant text, p_session text, p_lease integer) RETURNS bigint\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_now timestamptz := clock_timestamp(); v_exp timestamptz;\n"
    "BEGIN\n"
    "    PERFORM @.notice_run(p_tenant, v_now);\n"
    "    SELECT s.expires INTO v_exp FROM @.sessions s WHERE s.tenant = p_tenant AND s.session = p_session;\n"
    "    IF FOUND AND v_exp <= v_now THEN PERFORM @.close(p_tenant, p_session); END IF;\n"
    "    PERFORM @.note_lease(p_tenant, p_lease, v_now);\n"
    "    INSERT INTO @.sessions AS s (tenant, session, expires, lease_ms, opened)\n"
    "        VALUES (p_tenant, p_session, v_now + p_lease * interval '1 millisecond', p_lease, v_now)\n"
    "        ON CONFLICT (tenant, session) DO UPDATE SET expires = EXCLUDED.expires, lease_ms = EXCLUDED.lease_ms;\n"
    "    EXECUTE 'UNLISTEN *';\n"
    "    EXECUTE 'LISTEN ' || quote_ident(@.channel(p_session));\n"
    "    RETURN @.epoch(p_tenant);\n"
    "END $f$",
    /* KEEPALIVE: -1 when the session is gone or expired (never re-created). */
    "CREATE OR REPLACE FUNCTION @.keepalive(p_tenant text, p_session text, p_lease integer) RETURNS bigint\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_now timestamptz := clock_timestamp();\n"
    "BEGIN\n"
    "    PERFORM @.notice_run(p_tenant, v_now);\n"
    "    UPDATE @.sessions s SET expires = v_now + p_lease * interval '1 millisecond', lease_ms = p_lease\n"
    "        WHERE s.tenant = p_tenant AND s.session = p_session AND s.expires > v_now;\n"
    "    IF NOT FOUND THEN RETURN -1; END IF;\n"
    "    PERFORM @.note_lease(p_tenant, p_lease, v_now);\n"
    "    EXECUTE 'LISTEN ' || quote_ident(@.channel(p_session));\n"
    "    RETURN @.epoch(p_tenant);\n"
    "END $f$",
    /* CLOSE: the session and all its entries go; their queues move on. Its
       holds kept in resources' rows (no queue behind them) stay there, dead:
       whoever meets one drops it (unfold, stale, state). */
    "CREATE OR REPLACE FUNCTION @.close(p_tenant text, p_session text) RETURNS integer\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_now timestamptz := clock_timestamp(); v_name bytea;\n"
    "BEGIN\n"
    "    DELETE FROM @.sessions s WHERE s.tenant = p_tenant AND s.session = p_session;\n"
    "    FOR v_name IN SELECT DISTINCT q.name FROM @.entries q\n"
    "                  WHERE q.tenant = p_tenant AND q.session = p_session ORDER BY q.name LOOP\n"
    "        PERFORM 1 FROM @.resources r WHERE r.tenant = p_tenant AND r.name = v_name FOR UPDATE;\n"
    "        DELETE FROM @.entries q WHERE q.tenant = p_tenant AND q.name = v_name AND q.session = p_session;\n"
    "        PERFORM @.settle(p_tenant, v_name, v_now, NULL);\n"
    "    END LOOP;\n"
    "    RETURN 0;\n"
    "END $f$",
    /* ENQUEUE: insert the request into every resource (atomically, rows
       locked in name order) unless it is there; try_only inserts nothing
       unless it would be granted at once everywhere. */
    /* ENQUEUE past its fast path: the entry joins the queue (or a try
       that does not fit answers without one), the walks grant, the state
       answers. A hold kept in a resource's row becomes an entry row as
       soon as the row is locked, before the queue is read. A request id
       already in a queue is ours (a retry) or a dead session's (taken
       over). Each resource row, created if missing, is locked (in name
       order: no deadlock between two multi-resource requests) by the upsert
       that also gives out its next queue position (one left unused when no
       entry is inserted is a gap, which orders the same); without a live
       session it does nothing. */
    "CREATE OR REPLACE FUNCTION @.join_queue(p_tenant text, p_session text, p_request text, p_try boolean,\n"
    "    p_watch boolean, p_names bytea[], p_caps integer[], p_weights integer[], p_now timestamptz,\n"
    "    OUT o_status integer, OUT o_granted boolean, OUT o_fences bigint[], OUT o_ahead integer,\n"
    "    OUT o_held integer, OUT o_owner text, OUT o_recheck_ms integer, OUT o_capacity integer,\n"
    "    OUT o_grace_ms integer, OUT o_token text)\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_i integer; v_other text; v_mine boolean := false; v_order integer[] := '{1}'; v_seqs bigint[];\n"
    "    v_seq bigint; v_cap integer; v_inline boolean;\n"
    "BEGIN\n"
    "    o_status := 0; o_granted := false; o_recheck_ms := -1; o_grace_ms := 0;\n"
    "    IF array_length(p_names, 1) > 1 THEN\n"
    "        v_order := ARRAY(SELECT k FROM generate_subscripts(p_names, 1) AS k ORDER BY p_names[k]);\n"
    "    END IF;\n"
    "    FOREACH v_i IN ARRAY v_order LOOP\n"
    "        INSERT INTO @.resources AS r (tenant, name, capacity, seq)\n"
    "            SELECT p_tenant, p_names[v_i], p_caps[v_i], 1 WHERE EXISTS (SELECT 1 FROM @.sessions s\n"
    "                WHERE s.tenant = p_tenant AND s.session = p_session AND s.expires > p_now)\n"
    "            ON CONFLICT (tenant, name) DO UPDATE SET seq = r.seq + 1\n"
    "            RETURNING r.seq, r.capacity, r.h_session IS NOT NULL INTO v_seq, v_cap, v_inline;\n"
    "        IF NOT FOUND THEN o_status := 1; RETURN; END IF;\n"
    "        IF v_inline THEN PERFORM @.unfold(p_tenant, p_names[v_i]); END IF;\n"
    "        v_seqs[v_i] := v_seq;\n"
    "        IF p_weights[v_i] > v_cap THEN o_status := 2; o_capacity := v_cap; RETURN; END IF;\n"
    "    END LOOP;\n"
    "    FOR v_i IN 1 .. array_length(p_names, 1) LOOP\n"
    "        SELECT q.session INTO v_other FROM @.entries q\n"
    "            WHERE q.tenant = p_tenant AND q.name = p_names[v_i] AND q.request = p_request;\n"
    "        IF FOUND THEN\n"
    "            IF v_other = p_session THEN v_mine := true;\n"
    "            ELSIF @.live(p_tenant, v_other, p_now) THEN o_status := 3; RETURN;\n"
    "            ELSE DELETE FROM @.entries q\n"
    "                 WHERE q.tenant = p_tenant AND q.name = p_names[v_i] AND q.request = p_request;\n"
    "            END IF;\n"
    "        END IF;\n"
    "    END LOOP;\n"
    "    -- a new entry goes in, then one walk per queue grants what the rule grants (the walk\n"
    "    -- before it is needed only where nothing is inserted, and by fits(), which reads the\n"
    "    -- dead entries and the restart grace as the walk leaves them)\n"
    "    IF v_mine OR p_try THEN\n"
    "        FOR v_i IN 1 .. array_length(p_names, 1) LOOP\n"
    "            PERFORM @.settle(p_tenant, p_names[v_i], p_now, NULL);\n"
    "        END LOOP;\n"
    "    END IF;\n"
    "    IF NOT v_mine THEN\n"
    "        IF p_try AND NOT @.fits(p_tenant, p_names, p_weights, p_now) THEN\n"
    "            SELECT r.held, r.owner, r.capacity INTO o_held, o_owner, o_capacity\n"
    "                FROM @.resources r WHERE r.tenant = p_tenant AND r.name = p_names[1];\n"
    "            o_fences := array_fill(0::bigint, ARRAY[array_length(p_names, 1)]); o_ahead := 0;\n"
    "            o_grace_ms := COALESCE((SELECT GREATEST(0, ceil(extract(epoch FROM t.grace_until - p_now) * 1000))\n"
    "                FROM @.tenants t WHERE t.tenant = p_tenant AND t.grace_until > p_now), 0)::integer;\n"
    "            RETURN;\n"
    "        END IF;\n"
    "        FOR v_i IN 1 .. array_length(p_names, 1) LOOP\n"
    "            INSERT INTO @.entries (tenant, name, seq, request, session, weight, watch, token)\n"
    "                VALUES (p_tenant, p_names[v_i], v_seqs[v_i], p_request, p_session, p_weights[v_i], p_watch,\n"
    "                        replace(gen_random_uuid()::text, '-', ''));\n"
    "            PERFORM @.settle(p_tenant, p_names[v_i], p_now, p_request);\n"
    "        END LOOP;\n"
    "    END IF;\n"
    "    SELECT * INTO o_status, o_granted, o_fences, o_ahead, o_held, o_owner, o_recheck_ms, o_capacity,\n"
    "        o_grace_ms, o_token FROM @.state(p_tenant, p_session, p_request, p_names, p_now);\n"
    "END $f$",
    /* ENQUEUE. The fast path, for one resource: an empty queue (no entry
       row, no hold in the resource's row: so none of this request either),
       a live session, no restart grace in this server run; the request fits
       (its weight alone is at most the capacity) and is granted as settle
       and state would, as a hold kept in the resource's row (no entry row),
       in one UPDATE of that row that reads the queue in its snapshot, with
       no lock taken before. What makes that safe is the queue position:
       every writer that adds an entry to a queue gives it the row's next
       position, under the row's lock, in the transaction that adds it. The
       UPDATE requires the position the snapshot read (r.seq = the subquery:
       on a row changed meanwhile, PostgreSQL checks the row's conditions
       against its newest version once the writer that changed it has
       ended, with the subqueries' values of the snapshot), so when it
       succeeds no entry came into the queue after the snapshot, and none
       can until this transaction ends (the write holds the row's lock);
       when it does not, nothing was written and the long way decides. A
       name never used gets its row first (without a live session it gets
       none), then the fast path once more. The long way is join_queue. */
    "CREATE OR REPLACE FUNCTION @.enqueue(p_tenant text, p_session text, p_request text, p_try boolean,\n"
    "    p_watch boolean, p_names text[], p_caps integer[], p_weights integer[],\n"
    "    OUT o_status integer, OUT o_granted boolean, OUT o_fences bigint[], OUT o_ahead integer,\n"
    "    OUT o_held integer, OUT o_owner text, OUT o_recheck_ms integer, OUT o_capacity integer,\n"
    "    OUT o_grace_ms integer, OUT o_token text)\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE\n"
    "    v_now timestamptz := clock_timestamp();\n"
    "    v_n integer := array_length(p_names, 1); v_names bytea[];\n"
    "    v_i integer; v_cap integer; v_fence bigint; v_made boolean := false;\n"
    "BEGIN\n"
    "    o_status := 0; o_granted := false; o_recheck_ms := -1; o_grace_ms := 0;\n"
    "    FOR v_i IN 1 .. v_n LOOP v_names[v_i] := decode(p_names[v_i], 'hex'); END LOOP;\n"
    "    WHILE v_n = 1 LOOP\n"
    "        UPDATE @.resources r SET seq = r.seq + 1, counter = @.next_fence(r.counter, v_now),  -- simba_grant_fence\n"
    "            held = 1, owner = p_session, h_seq = r.seq + 1, h_request = p_request, h_session = p_session,\n"
    "            h_opened = x.opened, h_weight = p_weights[1], h_fence = @.next_fence(r.counter, v_now),\n"
    "            h_watch = p_watch, h_token = replace(gen_random_uuid()::text, '-', '') FROM @.sessions x\n"
    "        WHERE r.tenant = p_tenant AND r.name = v_names[1] AND r.h_session IS NULL AND p_weights[1] <= r.capacity\n"
    "          AND r.seq = (SELECT y.seq FROM @.resources y WHERE y.tenant = p_tenant AND y.name = v_names[1])\n"
    "          AND NOT EXISTS (SELECT 1 FROM @.entries q WHERE q.tenant = p_tenant AND q.name = v_names[1])\n"
    "          AND EXISTS (SELECT 1 FROM @.tenants t WHERE t.tenant = p_tenant\n"
    "                      AND t.boot = (SELECT m.started FROM @.run m\n"
    "                                    WHERE m.postmaster = pg_catalog.pg_postmaster_start_time())\n"
    "                      AND (t.grace_until IS NULL OR t.grace_until <= v_now))\n"
    "          AND x.tenant = p_tenant AND x.session = p_session AND x.expires > v_now\n"
    "        RETURNING r.counter, r.h_token, r.capacity INTO v_fence, o_token, v_cap;\n"
    "        IF v_cap IS NOT NULL THEN\n"
    "            IF p_watch THEN   -- the owner changed (an empty queue has none)\n"
    "                PERFORM pg_notify(@.channel(p_session), 'o - ' || encode(v_names[1], 'hex'));\n"
    "            END IF;\n"
    "            o_fences := ARRAY[v_fence]; o_granted := true; o_ahead := 0; o_held := 1; o_owner := p_session;\n"
    "            o_capacity := v_cap;\n"
    "            RETURN;\n"
    "        END IF;\n"
    "        EXIT WHEN v_made;\n"
    "        PERFORM 1 FROM @.resources r WHERE r.tenant = p_tenant AND r.name = v_names[1];\n"
    "        EXIT WHEN FOUND;\n"
    "        INSERT INTO @.resources (tenant, name, capacity) SELECT p_tenant, v_names[1], p_caps[1]\n"
    "            WHERE EXISTS (SELECT 1 FROM @.sessions x WHERE x.tenant = p_tenant AND x.session = p_session\n"
    "                          AND x.expires > v_now) ON CONFLICT DO NOTHING;\n"
    "        v_made := true;\n"
    "    END LOOP;\n"
    "    SELECT * INTO o_status, o_granted, o_fences, o_ahead, o_held, o_owner, o_recheck_ms, o_capacity,\n"
    "        o_grace_ms, o_token FROM @.join_queue(p_tenant, p_session, p_request, p_try, p_watch, v_names,\n"
    "                                                  p_caps, p_weights, v_now);\n"
    "END $f$",
    /* Does one of these queues need the walk (settle)? When a holder (an
       entry or a hold in the row) or the first waiter is dead (its session
       expired or gone), or the first
       waiter fits (the grant rule, as in settle: a restart grace that
       ended, or one that holds it back still). */
    "CREATE OR REPLACE FUNCTION @.stale(p_tenant text, p_names bytea[], p_now timestamptz) RETURNS boolean\n"
    "LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_i integer; v_cap integer; v_held integer; v_ahead bigint; e record; v_dead boolean;\n"
    "BEGIN\n"
    "    FOR v_i IN 1 .. array_length(p_names, 1) LOOP\n"
    "        SELECT r.capacity, r.held, r.h_session IS NOT NULL AND NOT EXISTS (SELECT 1 FROM @.sessions s\n"
    "                   WHERE s.tenant = r.tenant AND s.session = r.h_session\n"
    "                     AND s.opened IS NOT DISTINCT FROM r.h_opened AND s.expires > p_now)\n"
    "            INTO v_cap, v_held, v_dead FROM @.resources r\n"
    "            WHERE r.tenant = p_tenant AND r.name = p_names[v_i];\n"
    "        CONTINUE WHEN NOT FOUND;\n"
    "        IF v_dead THEN RETURN true; END IF;   -- a dead hold in the row\n"
    "        v_ahead := 0;\n"
    "        FOR e IN SELECT h.weight, h.fence, s.expires FROM\n"
    "                     (SELECT q.seq, q.session, q.weight, q.fence FROM @.entries q\n"
    "                      WHERE q.tenant = p_tenant AND q.name = p_names[v_i] ORDER BY q.seq LIMIT v_held + 1) h\n"
    "                 LEFT JOIN @.sessions s ON s.tenant = p_tenant AND s.session = h.session ORDER BY h.seq LOOP\n"
    "            IF e.expires IS NULL OR e.expires <= p_now THEN RETURN true; END IF;   -- dead\n"
    "            v_ahead := v_ahead + @.grant_weight(e.weight, v_cap);\n"
    "            IF e.fence = 0 AND v_ahead <= v_cap THEN RETURN true; END IF;     -- grantable\n"
    "        END LOOP;\n"
    "    END LOOP;\n"
    "    RETURN false;\n"
    "END $f$",
    /* POLL: the state of a request (its queues move on first when a holder
       died). */
    "CREATE OR REPLACE FUNCTION @.poll(p_tenant text, p_session text, p_request text, p_names text[],\n"
    "    OUT o_status integer, OUT o_granted boolean, OUT o_fences bigint[], OUT o_ahead integer,\n"
    "    OUT o_held integer, OUT o_owner text, OUT o_recheck_ms integer, OUT o_capacity integer,\n"
    "    OUT o_grace_ms integer, OUT o_token text)\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE\n"
    "    v_now timestamptz := clock_timestamp();\n"
    "    v_names bytea[]; v_i integer;\n"
    "BEGIN\n"
    "    o_status := 0; o_granted := false; o_recheck_ms := -1; o_grace_ms := 0;\n"
    "    IF NOT EXISTS (SELECT 1 FROM @.sessions s\n"
    "                   WHERE s.tenant = p_tenant AND s.session = p_session AND s.expires > v_now) THEN\n"
    "        o_status := 1; RETURN;\n"
    "    END IF;\n"
    "    FOR v_i IN 1 .. array_length(p_names, 1) LOOP v_names[v_i] := decode(p_names[v_i], 'hex'); END LOOP;\n"
    "    -- every writer leaves its queues settled; only time can make a holder (or the\n"
    "    -- first waiter) dead: without one, the answer is read without a lock or a write\n"
    "    IF @.stale(p_tenant, v_names, v_now) THEN\n"
    "        PERFORM @.lock_all(p_tenant, v_names, NULL);\n"
    "        FOR v_i IN 1 .. array_length(v_names, 1) LOOP\n"
    "            PERFORM @.settle(p_tenant, v_names[v_i], v_now, p_request);\n"
    "        END LOOP;\n"
    "    END IF;\n"
    "    SELECT * INTO o_status, o_granted, o_fences, o_ahead, o_held, o_owner, o_recheck_ms, o_capacity,\n"
    "        o_grace_ms, o_token FROM @.state(p_tenant, p_session, p_request, v_names, v_now);\n"
    "END $f$",
    /* RELEASE: our entry of the request goes from every resource (absent:
       ok); the walk grants and notifies who is next. A hold kept in the
       resource's row has no queue behind it (a request that joined the
       queue unfolded it into an entry row first, under the row's lock,
       which this UPDATE waits for and then finds the hold gone): it is
       cleared, in one UPDATE of the row. Otherwise one statement per
       resource deletes the entry, locks the resource's row and reads in its
       snapshot whether another entry is left; an entry that came into the
       queue after the snapshot gave the row a new position (see ENQUEUE),
       which the lock reads in the row's newest version: then the walk runs
       too. An emptied queue is left as it is. */
    "CREATE OR REPLACE FUNCTION @.release(p_tenant text, p_session text, p_request text, p_names text[])\n"
    "RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE\n"
    "    v_now timestamptz := clock_timestamp(); v_name bytea; v_names bytea[] := ARRAY[decode(p_names[1], 'hex')];\n"
    "    v_others boolean; v_moved boolean;\n"
    "BEGIN\n"
    "    IF array_length(p_names, 1) = 1 THEN   -- a hold in the row: only a one-resource request's\n"
    "        UPDATE @.resources r SET h_seq = NULL, h_request = NULL, h_session = NULL, h_opened = NULL,\n"
    "                h_weight = NULL, h_fence = NULL, h_watch = NULL, h_token = NULL\n"
    "            WHERE r.tenant = p_tenant AND r.name = v_names[1] AND r.h_request = p_request\n"
    "              AND r.h_session = p_session;\n"
    "        IF FOUND THEN RETURN 0; END IF;\n"
    "    ELSE\n"
    "        v_names := ARRAY(SELECT decode(x, 'hex') FROM unnest(p_names) AS x ORDER BY 1);\n"
    "    END IF;\n"
    "    -- in name order: each resource row locked before its queue changes, all held to the end\n"
    "    FOREACH v_name IN ARRAY v_names LOOP\n"
    "        -- the entry goes; the walk runs when another entry is left or came in since the\n"
    "        -- snapshot (a boot it has not noticed waits for the next grant)\n"
    "        WITH d AS (DELETE FROM @.entries q WHERE q.tenant = p_tenant AND q.name = v_name\n"
    "                   AND q.request = p_request AND q.session = p_session RETURNING q.seq)\n"
    "        SELECT EXISTS (SELECT 1 FROM d JOIN @.entries q ON q.tenant = p_tenant AND q.name = v_name\n"
    "                       AND q.seq <> d.seq),\n"
    "               r.seq <> (SELECT x.seq FROM @.resources x WHERE x.tenant = p_tenant AND x.name = v_name)\n"
    "            INTO v_others, v_moved FROM @.resources r WHERE r.tenant = p_tenant AND r.name = v_name\n"
    "            FOR UPDATE OF r;\n"
    "        IF v_others OR v_moved THEN PERFORM @.settle(p_tenant, v_name, v_now, NULL); END IF;\n"
    "    END LOOP;\n"
    "    RETURN 0;\n"
    "END $f$",
    /* INSPECT: rows (capacity, session, fence, weight, expires_in_ms,
       renewed_ago_ms, held_ms, grace_ms) in queue order, no dead entries,
       times by the server's clock as read once (v_now); no row: no such
       resource; one row with a NULL session: no entries. A session renewed
       after that reading (while this call waited for the row) is shown
       renewed at it: expires_in_ms never exceeds the lease. Version 6 added
       the times, version 11 that bound. */
    "CREATE OR REPLACE FUNCTION @.inspect(p_tenant text, p_name text)\n"
    "RETURNS TABLE (o_capacity integer, o_session text, o_fence bigint, o_weight integer,\n"
    "               o_expires_in_ms bigint, o_renewed_ago_ms bigint, o_held_ms bigint, o_grace_ms bigint)\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE\n"
    "    v_now timestamptz := clock_timestamp(); v_name bytea := decode(p_name, 'hex'); v_cap integer;\n"
    "    v_us bigint; v_grace bigint;\n"
    "BEGIN\n"
    "    SELECT r.capacity INTO v_cap FROM @.resources r WHERE r.tenant = p_tenant AND r.name = v_name FOR UPDATE;\n"
    "    IF NOT FOUND THEN RETURN; END IF;\n"
    "    PERFORM @.settle(p_tenant, v_name, v_now, NULL);\n"
    "    DELETE FROM @.entries q WHERE q.tenant = p_tenant AND q.name = v_name AND NOT EXISTS\n"
    "        (SELECT 1 FROM @.sessions s WHERE s.tenant = q.tenant AND s.session = q.session AND s.expires > v_now);\n"
    "    v_us := (extract(epoch FROM v_now) * 1000000)::bigint;\n"
    "    SELECT GREATEST(0, ceil(extract(epoch FROM t.grace_until - v_now) * 1000))::bigint INTO v_grace\n"
    "        FROM @.tenants t WHERE t.tenant = p_tenant AND t.grace_until > v_now;\n"
    "    v_grace := COALESCE(v_grace, 0);\n"
    "    RETURN QUERY SELECT v_cap, q.session, q.fence, q.weight, e.left_ms, s.lease_ms - e.left_ms,\n"
    "        CASE WHEN q.fence = 0 THEN -1 WHEN q.fence <= v_us THEN (v_us - q.fence) / 1000 ELSE 0 END,\n"
    "        v_grace\n"
    "        FROM @.entries q JOIN @.sessions s ON s.tenant = q.tenant AND s.session = q.session\n"
    "        CROSS JOIN LATERAL (SELECT LEAST(s.lease_ms, floor(extract(epoch FROM s.expires - v_now) * 1000))::bigint\n"
    "                            AS left_ms) e\n"
    "        WHERE q.tenant = p_tenant AND q.name = v_name ORDER BY q.seq;\n"
    "    IF NOT FOUND THEN RETURN QUERY SELECT v_cap, NULL::text, 0::bigint, 0, -1::bigint, -1::bigint, -1::bigint, v_grace; END IF;\n"
    "END $f$",
    /* SET_CAPACITY: the resource's capacity (created if absent); every
       session with an entry is told, the epoch moves, the queue moves on. */
    "CREATE OR REPLACE FUNCTION @.set_capacity(p_tenant text, p_name text, p_capacity integer) RETURNS integer\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_now timestamptz := clock_timestamp(); v_name bytea := decode(p_name, 'hex');\n"
    "BEGIN\n"
    "    INSERT INTO @.resources AS r (tenant, name, capacity) VALUES (p_tenant, v_name, p_capacity)\n"
    "        ON CONFLICT (tenant, name) DO UPDATE SET capacity = EXCLUDED.capacity;\n"
    "    PERFORM @.unfold(p_tenant, v_name);\n"
    "    PERFORM @.bump_epoch(p_tenant);\n"
    "    PERFORM pg_notify(@.channel(w.session), 'c - ' || p_name)\n"
    "        FROM (SELECT DISTINCT q.session FROM @.entries q WHERE q.tenant = p_tenant AND q.name = v_name) w;\n"
    "    PERFORM @.settle(p_tenant, v_name, v_now, NULL);\n"
    "    RETURN 0;\n"
    "END $f$",
    /* DELETE: the resource and all its entries; every session with an
       entry is told, the epoch moves. */
    "CREATE OR REPLACE FUNCTION @.delete(p_tenant text, p_name text) RETURNS integer\n"
    "LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$\n"
    "DECLARE v_name bytea := decode(p_name, 'hex');\n"
    "BEGIN\n"
    "    PERFORM 1 FROM @.resources r WHERE r.tenant = p_tenant AND r.name = v_name FOR UPDATE;\n"
    "    PERFORM @.unfold(p_tenant, v_name);\n"
    "    PERFORM pg_notify(@.channel(w.session), 'c - ' || p_name)\n"
    "        FROM (SELECT DISTINCT q.session FROM @.entries q WHERE q.tenant = p_tenant AND q.name = v_name) w;\n"
    "    DELETE FROM @.entries q WHERE q.tenant = p_tenant AND q.name = v_name;\n"
    "    DELETE FROM @.resources r WHERE r.tenant = p_tenant AND r.name = v_name;\n"
    "    PERFORM @.bump_epoch(p_tenant);\n"
    "    RETURN 0;\n"
    "END $f$"
};

static int simba__pg_schema_ok(const char *s) {
    size_t n = strlen(s), i;
    if (n == 0 || n > SIMBA__PG_MAX_SCHEMA) return 0;
    if (!((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_')) return 0;
    for (i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) return 0;
    return 1;
}

SIMBADEF int simba_pg_schema(const char *schema, char *buf, size_t size) {
    if (!schema) schema = "simba";
    if (!simba__pg_schema_ok(schema)) return SIMBA_ENAME;
    return simba_backend_expand(simba__pg_ddl, (int)(sizeof simba__pg_ddl / sizeof simba__pg_ddl[0]), '@', schema,
                                buf, size);
}

/* The setup query of phase 0 (lock_timeout; the version installed, 0 when
   none, and whether the server is read-only), 1 (the schema, the calls
   prepared, then its version) or 2 (the calls prepared, the version). */
static int simba__pg_setup_sql(simba__pg *b, int phase, char **out) {
    int n = phase == 1 ? simba_pg_schema(b->schema, NULL, 0) : 0;
    size_t cap = (size_t)(n > 0 ? n : 0) + 2048;
    char *sql = (char *)simba__pg_alloc(b, cap);
    size_t at;
    *out = sql;
    if (!sql) return -1;
    if (phase) {
        at = phase == 1 ? (size_t)simba_pg_schema(b->schema, sql, cap) : 0;
        at = simba__pg_prepares(b, sql, at, cap);
        snprintf(sql + at, cap - at, "SELECT %s.version()", b->schema);
        return 0;
    }
    snprintf(sql, cap,
             "SET client_min_messages = warning;\n"
             "SET lock_timeout = %d;\n"
             "SET simba_pg.restart_grace = '%d';\n"
             "SELECT COALESCE((SELECT substring(p.prosrc FROM '[0-9]+')::integer FROM pg_catalog.pg_proc p\n"
             "    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace\n"
             "    WHERE n.nspname = '%s' AND p.proname = 'version' AND p.pronargs = 0), 0),\n"
             "    current_setting('transaction_read_only')",
             b->lock_timeout_ms, b->restart_grace, b->schema);
    return 0;
}

/* The host-name policy (docs/design.md): the hosts of the connection
   string that are names (not numeric, not "localhost", not a socket
   directory) are resolved here, once; libpq gets the addresses as
   hostaddr (and keeps the names for TLS). Returns SIMBA_OK, or a refusal in
   *err. */
static int simba__pg_resolve_hosts(simba__pg *b, PQconninfoOption *opts, simba_backend *err) {
    const char *hosts = NULL, *addrs = NULL;
    char list[1024], one[256], num[64];
    size_t at = 0;
    int any = 0;
    PQconninfoOption *o;
    for (o = opts; o && o->keyword; o++) {
        if (strcmp(o->keyword, "host") == 0) hosts = o->val;
        if (strcmp(o->keyword, "hostaddr") == 0) addrs = o->val;
    }
    if (!hosts || !*hosts || (addrs && *addrs)) return SIMBA_OK;
    list[0] = 0;
    while (*hosts) {
        size_t n = strcspn(hosts, ",");
        int rc;
        if (n >= sizeof one) n = sizeof one - 1;
        memcpy(one, hosts, n);
        one[n] = 0;
        hosts += n;
        if (*hosts == ',') hosts++;
        num[0] = 0;
        if (one[0] && one[0] != '/' && one[0] != '@') {
            rc = simba_backend_resolve(one, num, sizeof num);
            if (rc != 0) {
                *err = simba_backend_error(SIMBA_EINVAL, "simba_pg_desc.conninfo: cannot resolve host '%.100s': %s",
                                           one, simba_backend_resolve_error(rc));
                return SIMBA_EINVAL;
            }
        }
        if (num[0]) any = 1;
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? "," : "", num);
        if (at >= sizeof list) return SIMBA_OK;   /* absurdly many hosts: libpq resolves them */
    }
    if (any && !(b->hostaddr = simba__pg_strdup(b, list))) {
        *err = simba_backend_error(SIMBA_ENOMEM, "simba_pg: out of memory");
        return SIMBA_ENOMEM;
    }
    return SIMBA_OK;
}

/* Every refusal names the field (simba_create's err shows it). */
static int simba__pg_check_desc(const simba_pg_desc *d, simba_backend *err) {
    if (!d) { *err = simba_backend_error(SIMBA_EINVAL, "simba_pg_desc: NULL"); return SIMBA_EINVAL; }
    if (simba_allocator_check(&d->allocator) != SIMBA_OK) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_pg_desc.allocator: set both alloc and free, or neither");
        return SIMBA_EINVAL;
    }
    if (d->schema && !simba__pg_schema_ok(d->schema)) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_pg_desc.schema: '%.60s' is not [a-z_][a-z0-9_]{0,47}", d->schema);
        return SIMBA_EINVAL;
    }
    if (d->connect_timeout_ms < 0 || d->lock_timeout_ms < 0) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_pg_desc.%s: negative",
                                   d->connect_timeout_ms < 0 ? "connect_timeout_ms" : "lock_timeout_ms");
        return SIMBA_EINVAL;
    }
    return SIMBA_OK;
}

SIMBADEF simba_backend simba_pg(const simba_pg_desc *d) {
    simba_backend out;
    simba__pg *b;
    PQconninfoOption *opts;
    char *errmsg = NULL;
    if (simba__pg_check_desc(d, &out) != SIMBA_OK) return out;
    opts = PQconninfoParse(d->conninfo ? d->conninfo : "", &errmsg);
    if (!opts) {
        char msg[SIMBA_MAX_MESSAGE];
        simba__pg_message(errmsg ? errmsg : "out of memory", msg, sizeof msg);
        if (errmsg) PQfreemem(errmsg);
        return simba_backend_error(errmsg ? SIMBA_EINVAL : SIMBA_ENOMEM, "simba_pg_desc.conninfo: %s", msg);
    }
    b = (simba__pg *)simba_allocator_alloc(&d->allocator, sizeof *b);
    if (!b) { PQconninfoFree(opts); return simba_backend_error(SIMBA_ENOMEM, "simba_pg: out of memory"); }
    b->alloc = d->allocator;
    if (simba__pg_resolve_hosts(b, opts, &out) != SIMBA_OK) {
        PQconninfoFree(opts);
        simba__pg_destroy(b);
        return out;
    }
    PQconninfoFree(opts);
    b->conninfo = simba__pg_strdup(b, d->conninfo ? d->conninfo : "");
    b->password = simba__pg_strdup(b, d->password);
    if (!b->conninfo || (d->password && !b->password)) {
        simba__pg_destroy(b);
        return simba_backend_error(SIMBA_ENOMEM, "simba_pg: out of memory");
    }
    snprintf(b->schema, sizeof b->schema, "%s", d->schema ? d->schema : "simba");
    b->create_schema = d->create_schema;
    b->connect_timeout_ms = d->connect_timeout_ms > 0 ? d->connect_timeout_ms : 5000;
    b->lock_timeout_ms = d->lock_timeout_ms > 0 ? d->lock_timeout_ms : 2000;
    b->restart_grace = d->restart_grace > 0 ? 1 : d->restart_grace < 0 ? -1 : 0;
    b->state = SIMBA__PG_CLOSED;
    out.vt = &simba__pg_vtable;
    out.impl = b;
    return out;
}

/* ---- simba_pg_from_url ---- */

/* simba's own parameters, taken out of the URL before libpq reads it. */
static int simba__pg_simba_param(const char *key, size_t n) {
    static const char *const ours[] = {"tenant", "client_id", "ttl", "transition", "op_timeout", "recheck",
                                       "password_env", "password_file", "schema", "create_schema", "lock_timeout",
                                       "restart_grace"};
    size_t i;
    for (i = 0; i < sizeof ours / sizeof ours[0]; i++)
        if (strlen(ours[i]) == n && strncmp(ours[i], key, n) == 0) return 1;
    return 0;
}

/* url without simba's parameters into out (cap bytes). 0 = ok. */
static int simba__pg_libpq_url(const char *url, char *out, size_t cap) {
    const char *q = strchr(url, '?'), *p;
    size_t at, n = q ? (size_t)(q - url) : strlen(url);
    int first = 1;
    if (n + 1 > cap) return -1;
    memcpy(out, url, n);
    at = n;
    out[at] = 0;
    if (!q) return 0;
    for (p = q + 1; *p;) {
        size_t len = strcspn(p, "&"), klen = strcspn(p, "=&");
        if (len && !simba__pg_simba_param(p, klen < len ? klen : len)) {
            if (at + len + 2 > cap) return -1;
            out[at++] = first ? '?' : '&';
            memcpy(out + at, p, len);
            at += len;
            out[at] = 0;
            first = 0;
        }
        p += len;
        if (*p == '&') p++;
    }
    return 0;
}

SIMBADEF int simba_pg_from_url(simba_url *u, const char *url, simba_backend *out, simba_url_error *err) {
    simba_pg_desc d;
    char *text;
    const char *rest;
    int rc, i;
    size_t cap;
    memset(&d, 0, sizeof d);
    if (!u || !url || !out) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: no URL or no output");
    if (strcmp(u->scheme, "postgres") != 0 && strcmp(u->scheme, "postgresql") != 0)
        return simba_url_fail(err, SIMBA_EINVAL, "scheme", "URL scheme: '%s' is not postgres", u->scheme);
    if ((d.schema = simba_url_param(u, "schema")) != NULL && !simba__pg_schema_ok(d.schema))
        return simba_url_fail(err, SIMBA_EINVAL, "schema", "URL parameter schema: [a-z_][a-z0-9_]{0,47}");
    if ((rc = simba_url_int(u, "create_schema", 0, 1, &d.create_schema, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_duration(u, "lock_timeout", 1, 3600000, &d.lock_timeout_ms, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_int(u, "restart_grace", -1, 1, &d.restart_grace, err)) != SIMBA_OK) return rc;
    for (i = 0; i < u->nparams; i++) u->params[i].used = 1;   /* the rest is libpq's to judge */
    /* libpq knows the scheme in lower case only; simba's parser took any case */
    if ((rest = strstr(url, "://")) == NULL)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: postgres needs '//' (postgres://user@host/database)");
    cap = strlen(rest) + sizeof "postgresql";
    text = (char *)malloc(cap);
    if (!text) return simba_url_fail(err, SIMBA_ENOMEM, "url", "URL: out of memory");
    memcpy(text, "postgresql", sizeof "postgresql" - 1);
    if (simba__pg_libpq_url(rest, text + sizeof "postgresql" - 1, cap - (sizeof "postgresql" - 1)) != 0) {
        free(text);
        return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: too long");
    }
    d.conninfo = text;
    d.password = u->password;
    {
        char *errmsg = NULL;
        PQconninfoOption *opts = PQconninfoParse(text, &errmsg);
        if (!opts) {
            char msg[200];
            simba__pg_message(errmsg ? errmsg : "out of memory", msg, sizeof msg);
            if (errmsg) PQfreemem(errmsg);
            memset(text, 0, cap);
            free(text);
            return simba_url_fail(err, SIMBA_EINVAL, "url", "URL (libpq): %s", msg);
        }
        PQconninfoFree(opts);
    }
    *out = simba_pg(&d);
    memset(text, 0, cap);
    free(text);
    if (!out->vt) return simba_url_fail(err, SIMBA_ENOMEM, "url", "URL: the PostgreSQL backend could not be made (out of memory)");
    return SIMBA_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* SIMBA_PG_IMPLEMENTATION */

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
