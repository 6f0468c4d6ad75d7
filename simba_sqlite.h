/*
    simba_sqlite.h -- the SQLite backend of simba (see simba.h): locks between
    the processes of one machine, with no server.

    Do this:
        #include "simba.h"
        #define SIMBA_SQLITE_IMPLEMENTATION
        #include "simba_sqlite.h"
    in *one* C or C++ file (after simba.h, whose implementation may live in
    the same or another file). Link with -lsqlite3 (Debian libsqlite3-dev).
    Linux only (open file description locks, pidfds, abstract unix sockets).

        simba *s = simba_create(&(simba_desc){
            .backend = simba_sqlite(&(simba_sqlite_desc){ .path = "/run/app/locks.db" }) });

    or the URL sqlite:///run/app/locks.db (simba_create_url, the CLI).

    CONTENTS (every section starts with a comment ">>name", grep for it;
    --------  a sub-section with ">>name.sub", named as in docs/backends.md)
    Declarations:
        >>options       simba_sqlite_desc: what the caller sets
        >>constructor   simba_sqlite(), simba_sqlite_from_url(), simba_sqlite_checkpoint()
        >>stats         struct simba_sqlite_stats and simba_sqlite_stats()
    Implementation (SIMBA_SQLITE_IMPLEMENTATION; guard SIMBA_SQLITE_IMPL_INCLUDED):
        >>internals     includes, limits, private types, memory, SQL text, the job queue
        >>connection    .connect (checks: file system, mark, wake socket, the file,
                        the schema, the boot, the grace) .io (a batch of ops, one
                        write transaction) .recover (reconnect, the file replaced)
        >>session       .open (is a session alive: lease, mark, process) .close
                        (the purge of a session): OPEN, KEEPALIVE, CLOSE
        >>locks         .rule (a resource's row, its owner, the grant rule's walk)
                        .enqueue (a request's state, ENQUEUE, POLL) .release
                        .admin (INSPECT, SET_CAPACITY, DELETE)
        >>wakeups       .arm (pidfds of the processes waited behind) .fire
                        (datagrams after COMMIT) .deliver (-> simba_backend_granted)
        >>stats         simba_sqlite_stats()
        >>vtable        attach, submit, pollfds, deadline_ms, process, reset, destroy
        >>constructor   desc checks, allocation, simba_sqlite_from_url(),
                        simba_sqlite_checkpoint()

    HOW IT WORKS (the design, the safety argument and measurements: docs/sqlite.md)
    ------------
    State: one SQLite database file in WAL mode that every process opens
    (tables meta, sessions, resources, entries, epochs; created on first use).
    Each batch of operations is one write transaction (BEGIN IMMEDIATE). A
    busy database (SQLITE_BUSY) is never waited for inside simba_tick: the
    batch is retried from the loop (deadline_ms), a few ms later. A sole
    holder of a name with an empty queue is kept in the resource's row (one
    row written per uncontended acquire and per release); anything else
    that reads or changes that queue first turns it into the head entry.

    A session's mark: each backend holds an open file description lock
    (F_OFD_SETLK) on one byte (its slot) of the sidecar file "<path>-simba".
    The kernel drops it when the last descriptor of that description closes,
    i.e. when the process dies. A session is dead when its lease ran out
    (CLOCK_MONOTONIC, the clock of simba's local safety rule), or when BOTH
    its mark is gone AND its process (pid and start time, /proc) is gone; then
    whoever looks purges its entries at once. Anything else (a stopped
    process, a forked child holding the descriptor, an fd closed by a library
    while the process lives) leaves the session to the ordinary lease rules.
    A process stopped inside a batch's transaction keeps SQLite's one write
    lock of the file: no batch of any process commits until it runs again
    or dies (docs/sqlite.md, "A stopped process").

    Wake-ups: every backend binds a datagram socket (abstract namespace, a
    random name kept in its session row). A transaction that grants an entry
    sends one datagram to that entry's process after COMMIT; an owner change
    is sent to the contend entries only; SET_CAPACITY and DELETE to every
    client with an entry. A waiter watches the process of the entry it waits
    behind (the first waiter: the holders) through a pidfd, so a holder
    killed with -9 is purged and its successor granted within milliseconds.

    Fences: max(counter + 1, CLOCK_REALTIME in us) (simba_grant_fence), with
    the counter kept per resource and, across a DELETE, per tenant.

    The file deleted or replaced under a client: before a batch that renews
    a session the path is walked (does it still name the file we opened?);
    before any other that is not only a release, an inotify watch of the
    file (one of simba_pollfds' descriptors) says whether it was deleted or
    renamed since, and only then is the path walked. Without the watch
    (built with SIMBA_SQLITE_NO_INOTIFY, or no inotify instance left) an
    fstat asks before each such batch whether the file still has a name.
    A session lives in one file: found replaced, or reopened as another
    file by a reconnect, the file makes the session void (LOST, a new one).
    docs/sqlite.md, "A replaced file", says why that is safe.
*/
#ifndef SIMBA_SQLITE_INCLUDED
#define SIMBA_SQLITE_INCLUDED

#ifndef SIMBA_INCLUDED
#error "simba_sqlite.h: include simba.h first"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*>>options: what the caller sets */
/* Options of simba_sqlite(). Strings are copied; zero fields take defaults. */
typedef struct simba_sqlite_desc {
    const char *path;           /* required: the database file every process opens
                                   (created with its schema on first use; its
                                   directory must exist and be writable). The
                                   sidecar "<path>-simba" holds the sessions' marks */
    int mode;                   /* permission bits of the files it creates; default
                                   0600. Whoever can write them can end or take any
                                   lock in them (docs/sqlite.md, "access") */
    int busy_retry_ms;          /* the longest pause before a batch that found the
                                   database busy is tried again; default 4 */
    int checkpoint_pages;       /* a commit inside simba_tick that leaves this many
                                   pages or more in the WAL file copies them back
                                   into the database file (a checkpoint: two
                                   fdatasync, which block the tick, tens of ms on
                                   a slow disk); default 1000 (SQLite's), at most
                                   1000000. < 0: never inside simba_tick; then
                                   call simba_sqlite_checkpoint() from a thread or
                                   a timer of your own (the WAL grows until a
                                   checkpoint, by any process, copies it back) */
    simba_allocator allocator;  /* for the backend's memory; zero = malloc/free;
                                   exactly one of alloc/free set: SIMBA_EINVAL */
} simba_sqlite_desc;

/*>>constructor: simba_sqlite, simba_sqlite_from_url, simba_sqlite_checkpoint */
/* A new SQLite backend for one simba client (pass it in simba_desc.backend;
   simba owns it from simba_create on). Never an unusable backend: on bad
   options it returns one that makes simba_create fail with SIMBA_EINVAL and
   a message naming the field ("simba_sqlite_desc.<field>: ..."); out of
   memory, SIMBA_ENOMEM. Opening the file happens in the loop: what is wrong
   with it (a network file system, read-only, not a simba file, ...) arrives
   as DISCONNECTED events with the cause in words, retried with backoff. */
SIMBADEF simba_backend simba_sqlite(const simba_sqlite_desc *d);

/* ---- connection URLs ----
   simba_sqlite_from_url: the backend for a parsed URL of scheme sqlite:
       sqlite:///absolute/path/to/locks.db[?mode=0660&busy_retry=4ms&checkpoint=1000|off]
   (three slashes: no host, then the absolute path). */
SIMBADEF int simba_sqlite_from_url(simba_url *u, simba_backend *out, simba_url_error *err);

/* simba_sqlite_checkpoint: copies the WAL of the simba lock file at `path`
   back into the database file (SQLite's PASSIVE checkpoint: what no reader
   still needs, without waiting for any other connection), on a connection of
   its own, and closes it. It blocks for the checkpoint's fdatasync calls:
   meant for a thread or a timer of the application when its backends have
   checkpoint_pages < 0 (safe beside them: they never share a connection).
   *wal_pages and *copied (each may be NULL): the WAL's pages and how many of
   them are now in the database file (equal when no reader held any back).
   Returns SIMBA_OK, or SIMBA_EINVAL (no path), SIMBA_ENOTFOUND (no such
   file), SIMBA_EPROTO (not a simba lock file, or corrupt),
   SIMBA_EUNSUPPORTED (a network file system), SIMBA_EAUTH / SIMBA_EBACKEND
   (the file cannot be opened or written), with the reason in msg (cap
   bytes, may be NULL). */
SIMBADEF int simba_sqlite_checkpoint(const char *path, int *wal_pages, int *copied, char *msg, size_t cap);

/*>>stats: counters of one backend */
/* Counters of one backend (the POSIX struct stat / stat() pattern). The
   first five fields are the same on every backend. */
struct simba_sqlite_stats {
    int connected;              /* the database is open and usable */
    int64_t reconnects;         /* opens after the first */
    int64_t ops_sent;           /* ops of the core accepted by submit */
    int64_t ops_completed;      /* ops answered to the core */
    int64_t wakes;              /* simba_backend_granted/_recheck/_changed calls made */
    /* SQLite's own */
    uint64_t transactions;      /* write transactions committed */
    uint64_t busy;              /* batches that found the database busy (retried) */
    uint64_t purged_dead;       /* sessions purged because their process died (mark and process gone) */
    uint64_t purged_expired;    /* sessions purged because their lease ran out */
    uint64_t datagrams_sent;    /* wake-ups sent to other sessions */
    uint64_t datagrams_lost;    /* ... that could not be sent (a hint: re-checks cover it) */
    uint64_t datagrams_received;
    uint64_t pidfd_fired;       /* watched processes seen to end */
    int watches;                /* pidfds open now */
    int slot;                   /* this backend's byte in the sidecar (-1: none) */
    int last_error;             /* SIMBA_E* of the last failed open or batch, 0 if none */
    int64_t longest_batch_us;   /* the longest batch (one transaction) inside a tick */
    /* where a batch's time goes (bench-sqlite prints them per cycle) */
    uint64_t statements;        /* prepared statements run, BEGIN and COMMIT included */
    uint64_t pages_written;     /* pages the committed transactions wrote to the WAL */
    int64_t batch_us;           /* time inside batches in all, from BEGIN to the wake-ups sent */
    uint64_t checkpoints;       /* checkpoints run inside simba_tick (checkpoint_pages) */
    int64_t checkpoint_us;      /* ... their time in all (part of batch_us) */
    /* the file's check before a batch: is it still the one its path names? */
    uint64_t name_checks;       /* our file asked whether it still has a name (an fstat) */
    uint64_t path_checks;       /* the path walked to see that it still names our file (a stat) */
    int file_watched;           /* 1: the kernel tells when our file is renamed or deleted (inotify),
                                   and an acquire checks the file only after it did */
};

/* Copies the counters of backend b (the value simba_sqlite() returned; valid
   until the simba instance that owns it is destroyed). Returns SIMBA_OK, or
   SIMBA_EINVAL if b is not a SQLite backend or out is NULL. */
SIMBADEF int simba_sqlite_stats(simba_backend b, struct simba_sqlite_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_SQLITE_INCLUDED */

/* ======================================================================= */
#if defined(SIMBA_SQLITE_IMPLEMENTATION) && !defined(SIMBA_SQLITE_IMPL_INCLUDED)
#define SIMBA_SQLITE_IMPL_INCLUDED

/*>>internals: includes, limits, private types, memory, SQL text, the job queue */

#include <sqlite3.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/uio.h>
#if defined(__has_include)
#if __has_include(<sys/pidfd.h>)
#ifdef __cplusplus
extern "C" {   /* glibc 2.36's <sys/pidfd.h> declares without it */
#endif
#include <sys/pidfd.h>
#ifdef __cplusplus
}
#endif
#define SIMBA__SQLITE_PIDFD 1
#endif
#endif
#ifndef SIMBA__SQLITE_PIDFD
#define SIMBA__SQLITE_PIDFD 0
#endif
/* inotify tells when the file we opened is deleted or renamed (define
   SIMBA_SQLITE_NO_INOTIFY to do without: every acquire then asks) */
#if defined(__has_include) && !defined(SIMBA_SQLITE_NO_INOTIFY)
#if __has_include(<sys/inotify.h>)
#include <sys/inotify.h>
#define SIMBA__SQLITE_INOTIFY 1
#endif
#endif
#ifndef SIMBA__SQLITE_INOTIFY
#define SIMBA__SQLITE_INOTIFY 0
#endif
/* Linux's values (glibc exposes them only with _GNU_SOURCE) */
#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36
#define F_OFD_SETLK 37
#endif
#ifndef SO_PASSCRED
#define SO_PASSCRED 16
#endif
#ifndef SCM_CREDENTIALS
#define SCM_CREDENTIALS 2
#endif
/* O_PATH (glibc: _GNU_SOURCE only; its value differs between
   architectures, so only the C library's own is used) */
#if !defined(O_PATH) && defined(__O_PATH)
#define O_PATH __O_PATH
#endif
/* struct ucred (glibc: _GNU_SOURCE only) */
typedef struct simba__sqlite_ucred { pid_t pid; uid_t uid; gid_t gid; } simba__sqlite_ucred;

enum {
    SIMBA__SQLITE_MAX_REQ = SIMBA_MAX_SESSION + SIMBA_MAX_ID + 40, /* a request id, with its NUL */
    SIMBA__SQLITE_MAX_JOBS = 256,   /* ops queued; beyond, submit answers SIMBA_EBUSY */
    SIMBA__SQLITE_BATCH = 64,       /* ops in one transaction */
    SIMBA__SQLITE_SLOTS = 65536,    /* bytes of the sidecar a backend may take */
    SIMBA__SQLITE_MAX_WATCH = 64,   /* pidfds of one backend */
    SIMBA__SQLITE_WAKE_NAME = 96,   /* bytes of a wake socket's name, with its NUL */
    SIMBA__SQLITE_DGRAM = 8 + SIMBA_MAX_NAME + 1 + SIMBA_MAX_SESSION + 1 + SIMBA__SQLITE_MAX_REQ
};

/* One op of the core, copied (submit's op lives only during the call), and
   its answer, kept until the transaction that made it committed. */
typedef struct simba__sqlite_job {
    uint64_t id;
    simba_op_kind kind;
    int lease_ms, try_only, watch_owner, nres;
    char tenant[SIMBA_MAX_TENANT + 1];
    char session[SIMBA_MAX_SESSION + 1];
    char request[SIMBA__SQLITE_MAX_REQ];
    simba_res res[SIMBA_MAX_RESOURCES];
    char names[SIMBA_MAX_RESOURCES][SIMBA_MAX_NAME + 1];
    simba_reply r;
    char owner[SIMBA_MAX_SESSION + 1];
    simba_holder *entries;
} simba__sqlite_job;

/* A wake-up to send after COMMIT. */
typedef struct simba__sqlite_wake {
    char addr[SIMBA__SQLITE_WAKE_NAME];
    char name[SIMBA_MAX_NAME + 1];
    char session[SIMBA_MAX_SESSION + 1];
    char request[SIMBA__SQLITE_MAX_REQ];   /* "" = none */
    int64_t fence;
} simba__sqlite_wake;

/* A process one of our waiting requests waits behind. */
typedef struct simba__sqlite_watch {
    char request[SIMBA__SQLITE_MAX_REQ];
    char name[SIMBA_MAX_NAME + 1];
    int pid;
    int fd;
} simba__sqlite_watch;

/* What one transaction learnt about a session (asked once per transaction). */
typedef struct simba__sqlite_known {
    char tenant[SIMBA_MAX_TENANT + 1];
    char id[SIMBA_MAX_SESSION + 1];
    int state;                  /* SIMBA__SQLITE_ABSENT, _LIVE, _EXPIRED, _GONE */
    char wake[SIMBA__SQLITE_WAKE_NAME];
    int64_t expires;
    int64_t renewed;            /* the session's last OPEN or KEEPALIVE, server ms */
    int64_t opened;             /* when its row was made (wall clock, us): which session of this id */
    int pid;
    int64_t start;
} simba__sqlite_known;
enum { SIMBA__SQLITE_ABSENT, SIMBA__SQLITE_LIVE, SIMBA__SQLITE_EXPIRED, SIMBA__SQLITE_GONE };

/* A resource to evaluate again, with its owner before the change (to tell
   the contend entries when it changes). */
typedef struct simba__sqlite_todo {
    char name[SIMBA_MAX_NAME + 1];
    char before[SIMBA_MAX_SESSION + 1];
} simba__sqlite_todo;

enum simba__sqlite_sql {
    SQ_BEGIN, SQ_COMMIT, SQ_ROLLBACK,
    SQ_META_GET, SQ_META_SET,
    SQ_SESS_GET, SQ_SESS_PUT, SQ_SESS_DEL, SQ_SESS_NAMES, SQ_ENT_DEL_SESS,
    SQ_RES_GET, SQ_RES_ADD, SQ_RES_COUNTER, SQ_RES_CAP, SQ_RES_DEL,
    SQ_Q_WALK, SQ_ENT_FIND, SQ_ENT_ADD, SQ_ENT_FENCE, SQ_REQ_LEFT, SQ_ENT_DEL_REQ,
    SQ_AHEAD, SQ_PRED, SQ_WATCHERS, SQ_RES_SESSIONS, SQ_ENT_DEL_RES,
    SQ_EPOCH_GET, SQ_EPOCH_BUMP, SQ_RES_HOLD, SQ_RES_UNHOLD, SQ_ENT_UNFOLD,
    SQ_ACQ_READ, SQ_RES_LET_GO, SQ_ENT_DEL_SEQ, SQ_N
};

/* The SQL of each statement, prepared once per open. Names are BLOBs, so
   every byte string is its own key (injective), compared bytewise. */
static const char *const simba__sqlite_sql_text[SQ_N] = {
    "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK",
    "SELECT v FROM meta WHERE k=?1",
    "INSERT OR REPLACE INTO meta(k,v) VALUES(?1,?2)",
    "SELECT slot,markfile,pid,start,expires,wake,renewed,opened FROM sessions WHERE tenant=?1 AND id=?2",
    /* opened: set when the row is made, kept by every later OPEN and KEEPALIVE */
    "INSERT INTO sessions(tenant,id,slot,markfile,pid,start,expires,wake,renewed,opened)"
    " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10) ON CONFLICT(tenant,id) DO UPDATE SET slot=excluded.slot,"
    " markfile=excluded.markfile, pid=excluded.pid, start=excluded.start, expires=excluded.expires,"
    " wake=excluded.wake, renewed=excluded.renewed",
    "DELETE FROM sessions WHERE tenant=?1 AND id=?2",
    "SELECT DISTINCT name FROM entries WHERE tenant=?1 AND session=?2",
    "DELETE FROM entries WHERE tenant=?1 AND session=?2",
    "SELECT capacity,counter,hsession,hrequest,hopened,hweight,hwatch,hfence FROM resources WHERE tenant=?1 AND name=?2",
    "INSERT OR IGNORE INTO resources(tenant,name,capacity,counter) VALUES(?1,?2,?3,"
    "(SELECT COALESCE(MAX(fence_floor),0) FROM epochs WHERE tenant=?1))",
    "UPDATE resources SET counter=?3 WHERE tenant=?1 AND name=?2",
    "UPDATE resources SET capacity=?3 WHERE tenant=?1 AND name=?2",
    "DELETE FROM resources WHERE tenant=?1 AND name=?2",
    "SELECT seq,request,session,weight,fence,nres FROM entries WHERE tenant=?1 AND name=?2 ORDER BY seq",
    "SELECT seq,session,fence FROM entries WHERE tenant=?1 AND name=?2 AND request=?3",
    /* at the tail: one past the last entry of the queue */
    "INSERT INTO entries(tenant,name,seq,request,session,weight,fence,watch,nres) VALUES(?1,?2,"
    "(SELECT COALESCE(MAX(seq),0)+1 FROM entries WHERE tenant=?1 AND name=?2),?3,?4,?5,0,?6,?7)",
    "UPDATE entries SET fence=?4 WHERE tenant=?1 AND name=?2 AND seq=?3",
    "SELECT COUNT(*),COALESCE(SUM(fence=0),0) FROM entries WHERE tenant=?1 AND session=?3 AND request=?2",
    "DELETE FROM entries WHERE tenant=?1 AND name=?2 AND request=?3 AND session=?4",
    "SELECT COUNT(*) FROM entries WHERE tenant=?1 AND name=?2 AND seq<?3",
    "SELECT session,fence FROM entries WHERE tenant=?1 AND name=?2 AND seq<?3 ORDER BY seq DESC LIMIT 1",
    /* the partial index, or the planner scans the whole queue (no statistics) */
    "SELECT session,request FROM entries INDEXED BY entries_watch WHERE tenant=?1 AND name=?2 AND watch=1",
    "SELECT DISTINCT session FROM entries WHERE tenant=?1 AND name=?2",
    "DELETE FROM entries WHERE tenant=?1 AND name=?2",
    "SELECT epoch FROM epochs WHERE tenant=?1",
    "INSERT INTO epochs(tenant,epoch,fence_floor) VALUES(?1,2,?2) ON CONFLICT(tenant) DO UPDATE"
    " SET epoch=epoch+1, fence_floor=MAX(fence_floor,?2)",
    /* a sole holder kept in the resource's row (its fence is the new counter) */
    "UPDATE resources SET counter=?3, hfence=?3, hsession=?4, hrequest=?5, hopened=?6, hweight=?7, hwatch=?8"
    " WHERE tenant=?1 AND name=?2",
    "UPDATE resources SET hsession=NULL, hrequest=NULL, hopened=NULL, hweight=NULL, hwatch=NULL, hfence=NULL"
    " WHERE tenant=?1 AND name=?2",
    /* that holder as the queue's head entry (the queue is empty then) */
    "INSERT INTO entries(tenant,name,seq,request,session,weight,fence,watch,nres) VALUES(?1,?2,"
    "(SELECT COALESCE(MIN(seq),2)-1 FROM entries WHERE tenant=?1 AND name=?2),?3,?4,?5,?6,?7,1)",
    /* what an acquire of one name reads, in one statement: whether the name's
       row exists and is free (no hold in the row, no entry in the queue), its
       capacity and counter; the restart grace; session ?3's row as
       SQ_SESS_GET reads it, and whether it exists */
    "SELECT r.name IS NOT NULL, r.capacity, r.counter,"
    " r.hsession IS NULL AND NOT EXISTS(SELECT 1 FROM entries WHERE tenant=?1 AND name=?2),"
    " (SELECT v FROM meta WHERE k='grace_until'), s.id IS NOT NULL,"
    " s.slot, s.markfile, s.pid, s.start, s.expires, s.wake, s.renewed, s.opened"
    " FROM (SELECT 1) LEFT JOIN resources r ON r.tenant=?1 AND r.name=?2"
    " LEFT JOIN sessions s ON s.tenant=?1 AND s.id=?3",
    "UPDATE resources SET hsession=NULL, hrequest=NULL, hopened=NULL, hweight=NULL, hwatch=NULL, hfence=NULL"
    " WHERE tenant=?1 AND name=?2 AND hsession=?3 AND hrequest=?4",
    /* one entry by its key (seq bound as the value the walk read, of any type) */
    "DELETE FROM entries WHERE tenant=?1 AND name=?2 AND seq IS ?3"
};

/* The schema, written by the first process that opens the file. */
static const char *const simba__sqlite_schema =
    "CREATE TABLE meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
    "CREATE TABLE sessions(tenant TEXT NOT NULL, id TEXT NOT NULL, slot INTEGER NOT NULL,"
    " markfile TEXT NOT NULL, pid INTEGER NOT NULL, start INTEGER NOT NULL,"
    " expires INTEGER NOT NULL, wake TEXT NOT NULL, renewed INTEGER NOT NULL, opened INTEGER NOT NULL,"
    " PRIMARY KEY(tenant,id)) WITHOUT ROWID;"
    "CREATE TABLE resources(tenant TEXT NOT NULL, name BLOB NOT NULL, capacity INTEGER NOT NULL,"
    " counter INTEGER NOT NULL, hsession TEXT, hrequest TEXT, hopened INTEGER, hweight INTEGER, hwatch INTEGER,"
    " hfence INTEGER, PRIMARY KEY(tenant,name)) WITHOUT ROWID;"
    "CREATE TABLE entries(tenant TEXT NOT NULL, name BLOB NOT NULL, seq INTEGER NOT NULL,"
    " request TEXT NOT NULL, session TEXT NOT NULL, weight INTEGER NOT NULL, fence INTEGER NOT NULL DEFAULT 0,"
    " watch INTEGER NOT NULL DEFAULT 0, nres INTEGER NOT NULL DEFAULT 1, PRIMARY KEY(tenant,name,seq),"
    " UNIQUE(tenant,name,request)) WITHOUT ROWID;"
    "CREATE INDEX entries_watch ON entries(tenant,name) WHERE watch=1;"
    "CREATE TABLE epochs(tenant TEXT PRIMARY KEY, epoch INTEGER NOT NULL, fence_floor INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO meta(k,v) VALUES('format','simba-sqlite 6');";

#define SIMBA__SQLITE_FORMAT "simba-sqlite 6"

typedef struct simba__sqlite {
    simba *s;
    simba_allocator alloc;
    char *path, *side_path;
    int mode, busy_retry_ms;
    int checkpoint_pages;       /* <= 0: no checkpoint inside a tick */
    /* the open database, the sidecar and its mark, the wake socket */
    sqlite3 *db;
    sqlite3_stmt *st[SQ_N];
    int up;                     /* told the core we are connected */
    int side;                   /* the sidecar's fd (our mark's description), -1 */
    int slot;                   /* our byte in it, -1 */
    char markfile[48];          /* "dev:ino" of the sidecar: whose marks we can see */
    dev_t db_dev; ino_t db_ino; /* the file we opened: a replaced path is noticed */
    dev_t used_dev; ino_t used_ino; /* the file of our last connection (had_file): a session lives in it */
    int db_fd;                  /* an O_PATH descriptor of it (-1: none): does it still have a name? */
    int name_fd;                /* an inotify watch of it (-1: none): something happened to the file */
    int name_changed;           /* ... since its last check: the next batch that checks walks the path */
    int wake_fd;
    char wake[SIMBA__SQLITE_WAKE_NAME];
    char tag[20];               /* a hash of the file's real path: every wake socket's name starts
                                   with "simba-sqlite-<tag>-", so a new file can see who is running */
    char path_tag[20];          /* a hash of the path as spelt (absolute): also in the wake socket's
                                   name, so a directory made again still finds the running clients */
    int had_file;               /* we used a file of this path before (it was deleted or replaced) */
    char session[SIMBA_MAX_SESSION + 1];        /* our session, as the last OPEN or KEEPALIVE named it */
    char void_session[SIMBA_MAX_SESSION + 1];   /* a session of a file that was replaced under us, "" */
    int pid;
    int64_t start;              /* our process's start time (/proc/self/stat) */
    int attempts;
    int64_t retry_at;           /* the next open, or the next try of a busy batch */
    int busy_tries;
    char last_msg[SIMBA_MAX_MESSAGE + 1];
    /* the job queue (a ring) */
    simba__sqlite_job **jobs;
    int jhead, jn;
    /* per transaction */
    int rc;                     /* the first SQLite error of the batch (0: none) */
    char errmsg[SIMBA_MAX_MESSAGE + 1];
    int64_t now, now_us, grace_until;
    int grace_read;             /* grace_until read in this transaction (on first need) */
    const char *tenant;         /* the tenant of the op being run */
    const char *answering;      /* the request id the op answers: no wake-up for it */
    const char *answering_session;
    simba__sqlite_known *known;
    int nknown, capknown;
    simba__sqlite_known nomem_known;   /* "alive", when the list cannot grow */
    simba__sqlite_wake *wakes;
    int nwakes, capwakes;
    simba__sqlite_todo *todo;
    int ntodo, captodo;
    char (*names)[SIMBA_MAX_NAME + 1];   /* scratch: the names of a purged session */
    int capnames;
    /* pidfds */
    simba__sqlite_watch watches[SIMBA__SQLITE_MAX_WATCH];
    int nwatch;
    struct simba_sqlite_stats stats;
} simba__sqlite;

/*>>internals.memory: memory, arrays, clocks, statements */

static void *simba__sqlite_alloc(simba__sqlite *b, size_t n) { return simba_allocator_alloc(&b->alloc, n); }
static void simba__sqlite_free(simba__sqlite *b, void *p) { simba_allocator_free(&b->alloc, p); }

/* Grows an array of elements of size `size` to hold at least `need`. 0: out of memory. */
static int simba__sqlite_grow(simba__sqlite *b, void **arr, int *cap, int need, size_t size) {
    void *n;
    int ncap;
    if (need <= *cap) return 1;
    ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    n = simba__sqlite_alloc(b, size * (size_t)ncap);
    if (!n) return 0;
    if (*arr) memcpy(n, *arr, size * (size_t)*cap);
    simba__sqlite_free(b, *arr);
    *arr = n;
    *cap = ncap;
    return 1;
}

static void simba__sqlite_copy(char *dst, size_t cap, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
}

/* The server's clock for leases: CLOCK_MONOTONIC, the clock of the core's
   local safety rule, in ms. One clock for every process of the host, and it
   stops during a suspend exactly as the holders' deadlines do (BOOTTIME
   would run on and expire holders that believe they still hold). */
static int64_t simba__sqlite_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The fence floor: wall-clock microseconds (a recreated file starts above
   every fence the old one gave, as long as the wall clock was not set back). */
static int64_t simba__sqlite_real_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A statement, reset and ready for new bindings. */
static sqlite3_stmt *simba__sqlite_q(simba__sqlite *b, int which) {
    sqlite3_stmt *st = b->st[which];
    b->stats.statements++;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

static void simba__sqlite_bind_text(sqlite3_stmt *st, int i, const char *t) {
    sqlite3_bind_text(st, i, t, -1, SQLITE_STATIC);
}

static void simba__sqlite_bind_name(sqlite3_stmt *st, int i, const char *name) {
    sqlite3_bind_blob(st, i, name, (int)strlen(name), SQLITE_STATIC);
}

/* Remembers the first error of a transaction (the batch is rolled back). */
static void simba__sqlite_fail(simba__sqlite *b, int rc) {
    if (b->rc) return;
    b->rc = rc;
    snprintf(b->errmsg, sizeof b->errmsg, "sqlite: %s", b->db ? sqlite3_errmsg(b->db) : sqlite3_errstr(rc));
}

/* One step: SQLITE_ROW or SQLITE_DONE; anything else is the batch's error
   (and reads as SQLITE_DONE, so loops end). */
static int simba__sqlite_step(simba__sqlite *b, sqlite3_stmt *st) {
    int rc;
    if (b->rc) return SQLITE_DONE;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) return rc;
    simba__sqlite_fail(b, rc);
    sqlite3_reset(st);
    return SQLITE_DONE;
}

/* A column as a NUL-terminated string into buf (blobs included). */
static void simba__sqlite_col(sqlite3_stmt *st, int i, char *buf, size_t cap) {
    const void *p = sqlite3_column_blob(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    if (n >= cap) n = cap - 1;
    if (p && n) memcpy(buf, p, n);
    buf[n] = 0;
}

/*>>internals.queue: the job queue */

/* ---- the job queue ---- */

static simba__sqlite_job *simba__sqlite_job_from_op(simba__sqlite *b, const simba_op *op) {
    simba__sqlite_job *j = (simba__sqlite_job *)simba__sqlite_alloc(b, sizeof *j);
    int i;
    if (!j) return NULL;
    j->id = op->id;
    j->kind = op->kind;
    j->lease_ms = op->lease_ms;
    j->try_only = op->try_only;
    j->watch_owner = op->watch_owner;
    j->nres = op->nres;
    simba__sqlite_copy(j->tenant, sizeof j->tenant, op->tenant);
    simba__sqlite_copy(j->session, sizeof j->session, op->session);
    simba__sqlite_copy(j->request, sizeof j->request, op->request);
    for (i = 0; i < op->nres && i < SIMBA_MAX_RESOURCES; i++) {
        simba__sqlite_copy(j->names[i], sizeof j->names[i], op->res[i].name);
        j->res[i] = op->res[i];
        j->res[i].name = j->names[i];
    }
    return j;
}

static void simba__sqlite_job_free(simba__sqlite *b, simba__sqlite_job *j) {
    if (!j) return;
    simba__sqlite_free(b, j->entries);
    simba__sqlite_free(b, j);
}

/* Takes the first n jobs off the queue, into out (in order). */
static void simba__sqlite_take(simba__sqlite *b, simba__sqlite_job **out, int n) {
    int i;
    for (i = 0; i < n; i++) {
        out[i] = b->jobs[b->jhead];
        b->jobs[b->jhead] = NULL;
        b->jhead = (b->jhead + 1) % SIMBA__SQLITE_MAX_JOBS;
        b->jn--;
    }
}

/* Answers a job to the core, then frees it. */
static void simba__sqlite_complete(simba__sqlite *b, simba__sqlite_job *j) {
    j->r.id = j->id;
    if (j->r.status != SIMBA_OK && !j->r.message) j->r.message = NULL;
    b->stats.ops_completed++;
    simba_backend_complete(b->s, &j->r);
    simba__sqlite_job_free(b, j);
}

/* Fails every queued job (the database went away under them). */
static void simba__sqlite_fail_queue(simba__sqlite *b, int code, const char *msg) {
    simba__sqlite_job *j;
    while (b->jn) {
        simba__sqlite_take(b, &j, 1);
        memset(&j->r, 0, sizeof j->r);
        j->r.status = code;
        j->r.message = msg;
        simba__sqlite_complete(b, j);
    }
}

/*>>connection: open, checks (file system, schema, boot), the mark, reconnect */

/*>>connection.connect: the checks and the open */

/* File systems whose locking SQLite (and our marks) cannot trust: network
   and FUSE file systems (statfs(2) f_type). */
static const char *simba__sqlite_fs_refused(long type) {
    switch ((unsigned long)type & 0xffffffffUL) {
    case 0x6969UL: return "NFS";
    case 0x517BUL: return "SMB";
    case 0xFF534D42UL: return "CIFS";
    case 0xFE534D42UL: return "SMB2";
    case 0x65735546UL: return "FUSE";
    case 0x00C36400UL: return "Ceph";
    case 0x5346414FUL: return "AFS";
    case 0x01021997UL: return "9P";
    case 0x73757245UL: return "Coda";
    case 0x564CUL: return "NCP";
    case 0x01161970UL: return "GFS2";
    case 0x7461636FUL: return "OCFS2";
    case 0x0BD00BD0UL: return "Lustre";
    default: return NULL;
    }
}

/* The directory of path, into dir. */
static void simba__sqlite_dir_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) { simba__sqlite_copy(dir, cap, "."); return; }
    if (slash == path) { simba__sqlite_copy(dir, cap, "/"); return; }
    if ((size_t)(slash - path) >= cap) { simba__sqlite_copy(dir, cap, "."); return; }
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
}

/* Why the file cannot be used (0: it can): what the directory is on. */
static int simba__sqlite_check_fs(const char *path, char *msg, size_t cap) {
    char dir[4096];
    struct statfs fs;
    const char *bad;
    simba__sqlite_dir_of(path, dir, sizeof dir);
    if (statfs(dir, &fs) != 0) {
        snprintf(msg, cap, "sqlite: directory of '%.60s': %s", path, strerror(errno));
        return errno == EACCES ? SIMBA_EAUTH : SIMBA_EBACKEND;
    }
    if ((bad = simba__sqlite_fs_refused((long)fs.f_type)) != NULL) {
        snprintf(msg, cap, "sqlite: '%.60s' is on %s, a network or FUSE file system: its locks cannot be"
                 " trusted (put the file on a local disk or tmpfs)", path, bad);
        return SIMBA_EUNSUPPORTED;
    }
    return 0;
}

/* Our process's start time (field 22 of /proc/<pid>/stat), -1 if there is
   no such process, -2 if it is a zombie (dead, not yet reaped). */
static int64_t simba__sqlite_proc_start(int pid) {
    char path[64], buf[1024];
    FILE *f;
    size_t n;
    char *p;
    int field;
    long long start = -1;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (!(f = fopen(path, "r"))) return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (!(p = strrchr(buf, ')'))) return -1;
    p += 2;                               /* the state, field 3 */
    if (*p == 'Z' || *p == 'X' || *p == 'x') return -2;
    for (field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    if (!p || sscanf(p, "%lld", &start) != 1) return -1;
    return start;
}

/* The sidecar and our mark in it: the first byte nobody holds. */
static int simba__sqlite_take_mark(simba__sqlite *b, char *msg, size_t cap) {
    struct stat st;
    int k;
    if (b->side >= 0) {   /* keep our mark while the sidecar is the same file */
        char now[48] = "";
        if (stat(b->side_path, &st) == 0)
            snprintf(now, sizeof now, "%llx:%llx", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
        if (strcmp(now, b->markfile) == 0) return 0;
        close(b->side);   /* the old file is gone for everyone else too: the lease decides there */
        b->side = -1;
        b->slot = b->stats.slot = -1;
    }
    b->side = open(b->side_path, O_RDWR | O_CREAT | O_CLOEXEC, (mode_t)b->mode);
    if (b->side < 0) {
        int e = errno;
        snprintf(msg, cap, "sqlite: cannot open the sidecar '%.80s': %s", b->side_path, strerror(e));
        return e == EACCES || e == EROFS || e == EPERM ? SIMBA_EAUTH : SIMBA_EBACKEND;
    }
    if (fstat(b->side, &st) != 0) return SIMBA_EBACKEND;
    snprintf(b->markfile, sizeof b->markfile, "%llx:%llx", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    for (k = 0; k < SIMBA__SQLITE_SLOTS; k++) {
        struct flock lk;
        memset(&lk, 0, sizeof lk);
        lk.l_type = F_WRLCK;
        lk.l_whence = SEEK_SET;
        lk.l_start = k;
        lk.l_len = 1;
        if (fcntl(b->side, F_OFD_SETLK, &lk) == 0) { b->slot = k; b->stats.slot = k; return 0; }
        if (errno != EAGAIN && errno != EACCES) {
            snprintf(msg, cap, "sqlite: cannot lock the sidecar '%.80s': %s", b->side_path, strerror(errno));
            return SIMBA_EUNSUPPORTED;
        }
    }
    snprintf(msg, cap, "sqlite: all %d marks of '%.80s' are taken", SIMBA__SQLITE_SLOTS, b->side_path);
    return SIMBA_EBACKEND;
}

/* Whether another description holds a mark in the sidecar (a client of a
   previous file of the same path may still believe it holds). */
static int simba__sqlite_others_marked(simba__sqlite *b) {
    struct flock lk;
    memset(&lk, 0, sizeof lk);
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    lk.l_start = 0;
    lk.l_len = 0;                         /* the whole file: ours does not conflict with us */
    if (fcntl(b->side, F_OFD_GETLK, &lk) != 0) return 1;
    return lk.l_type != F_UNLCK;
}

/* FNV-1a of the bytes of str, going on from h. */
static uint64_t simba__sqlite_fnv(uint64_t h, const char *str) {
    const char *p;
    for (p = str; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

/* The tags of the file's path. tag: FNV-1a of its directory's device and
   inode and its name, so every spelling of the path gives the same tag.
   path_tag: FNV-1a of the path itself (made absolute), which a directory
   removed and made again (a new inode: a new tag) keeps. */
static void simba__sqlite_make_tag(simba__sqlite *b) {
    char dir[4096], id[64];
    const char *base = strrchr(b->path, '/');
    uint64_t h = 14695981039346656037ULL;
    struct stat st;
    simba__sqlite_dir_of(b->path, dir, sizeof dir);
    if (stat(dir, &st) == 0)
        snprintf(id, sizeof id, "%llx:%llx/", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    else
        simba__sqlite_copy(id, sizeof id, dir);
    h = simba__sqlite_fnv(simba__sqlite_fnv(h, id), base ? base + 1 : b->path);
    snprintf(b->tag, sizeof b->tag, "%016llx", (unsigned long long)h);
    h = 14695981039346656037ULL;
    if (b->path[0] != '/' && getcwd(dir, sizeof dir)) h = simba__sqlite_fnv(simba__sqlite_fnv(h, dir), "/");
    h = simba__sqlite_fnv(h, b->path);
    snprintf(b->path_tag, sizeof b->path_tag, "%016llx", (unsigned long long)h);
}

/* Whether a wake socket's name (at: "simba-sqlite-...", up to a space or
   the line's end) is another running backend of our file: its tag or its
   path tag is ours (a name of an older simba has no path tag). *lease_ms
   is raised to the lease the name carries. */
static int simba__sqlite_wake_is_ours(simba__sqlite *b, const char *at, int *lease_ms) {
    char tag[20], path_tag[20];
    int pid, lease, n;
    size_t len = strcspn(at, " \n");
    if (len == strlen(b->wake) && strncmp(at, b->wake, len) == 0) return 0;   /* our own */
    path_tag[0] = 0;
    n = sscanf(at, "simba-sqlite-%16[0-9a-f]-%d-%d-%16[0-9a-f]-", tag, &pid, &lease, path_tag);
    if (n < 1 || (strcmp(tag, b->tag) != 0 && (n < 4 || strcmp(path_tag, b->path_tag) != 0))) return 0;
    if (n >= 3 && lease > *lease_ms) *lease_ms = lease;
    return 1;
}

/* Whether another backend of this path is running (its wake socket is
   listed in /proc/net/unix), even if both files, or their directory, were
   deleted under it; and the longest lease those backends run with (their
   wake socket's name carries it; *lease_ms is left as it is if none is
   readable). */
static int simba__sqlite_others_bound(simba__sqlite *b, int *lease_ms) {
    char line[512];
    FILE *f = fopen("/proc/net/unix", "r");
    int found = 0;
    if (!f) return 1;   /* cannot tell: assume so */
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "@simba-sqlite-");
        if (at && simba__sqlite_wake_is_ours(b, at + 1, lease_ms)) found = 1;
    }
    fclose(f);
    return found;
}

/* 64 random bits from /dev/urandom (the clock's bits when it cannot be read). */
static unsigned long long simba__sqlite_random(void) {
    unsigned long long r = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &r, sizeof r) != (ssize_t)sizeof r) r = 0;
        close(fd);
    }
    return r;
}

/* The datagram socket others wake us through, bound to a random abstract name. */
static int simba__sqlite_bind_wake(simba__sqlite *b, char *msg, size_t cap) {
    struct sockaddr_un a;
    int tries;
    if (b->wake_fd >= 0) return 0;
    b->wake_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (b->wake_fd < 0) {
        snprintf(msg, cap, "sqlite: wake-up socket: %s", strerror(errno));
        return SIMBA_EBACKEND;
    }
    for (tries = 0; tries < 8; tries++) {
        socklen_t len;
        unsigned long long r = simba__sqlite_random() ^ (unsigned long long)simba__sqlite_real_us();
        snprintf(b->wake, sizeof b->wake, "simba-sqlite-%s-%d-%d-%s-%llx", b->tag, b->pid, simba_lease_ms(b->s),
                 b->path_tag, r);
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        memcpy(a.sun_path + 1, b->wake, strlen(b->wake));
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(b->wake));
        if (bind(b->wake_fd, (struct sockaddr *)&a, len) == 0) {
            int on = 1;   /* the sender's uid comes with each datagram */
            setsockopt(b->wake_fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
            return 0;
        }
    }
    snprintf(msg, cap, "sqlite: wake-up socket bind: %s", strerror(errno));
    return SIMBA_EBACKEND;
}

/* Every statement, prepared. */
static int simba__sqlite_prepare(simba__sqlite *b, char *msg, size_t cap) {
    int i, rc;
    for (i = 0; i < SQ_N; i++) {
        rc = sqlite3_prepare_v2(b->db, simba__sqlite_sql_text[i], -1, &b->st[i], NULL);
        if (rc != SQLITE_OK) {
            snprintf(msg, cap, "sqlite: '%.60s' is not a simba lock file (%s)", b->path, sqlite3_errmsg(b->db));
            return SIMBA_EPROTO;
        }
    }
    return 0;
}

/* What a SQLite error code means for the user, as a SIMBA_E* with words. */
static int simba__sqlite_explain_at(const char *path, sqlite3 *db, int rc, const char *what, char *msg, size_t cap) {
    int prim = rc & 0xff;
    const char *why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (prim == SQLITE_NOTADB || prim == SQLITE_CORRUPT) {
        snprintf(msg, cap, "sqlite: '%.60s' is corrupt or not an SQLite file (%s)", path, why);
        return SIMBA_EPROTO;
    }
    if (prim == SQLITE_READONLY || prim == SQLITE_PERM || prim == SQLITE_CANTOPEN || prim == SQLITE_AUTH) {
        snprintf(msg, cap, "sqlite: '%.60s' cannot be written (%s: %s): the file and its directory must be"
                 " writable", path, what, why);
        return SIMBA_EAUTH;
    }
    if (prim == SQLITE_FULL) {
        snprintf(msg, cap, "sqlite: '%.60s': the disk is full (%s)", path, what);
        return SIMBA_EBACKEND;
    }
    snprintf(msg, cap, "sqlite: '%.60s': %s: %s", path, what, why);
    return SIMBA_EBACKEND;
}

static int simba__sqlite_explain(simba__sqlite *b, int rc, const char *what, char *msg, size_t cap) {
    return simba__sqlite_explain_at(b->path, b->db, rc, what, msg, cap);
}

/* ---- the handshake: the schema, the format, the boot ---- */

/* The format row: 1 = ours, 0 = no tables at all (a new file), -1 another
   file (tables, none of them ours), -2 another version of simba's format,
   or a SQLite error code (as -rc - 1000). */
static int simba__sqlite_format(sqlite3 *db) {
    sqlite3_stmt *st;
    int rc, ntables = 0, ours = 0;
    rc = sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type='table'", -1, &st, NULL);
    if (rc != SQLITE_OK) return -rc - 1000;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *n = sqlite3_column_text(st, 0);
        ntables++;
        if (n && strcmp((const char *)n, "meta") == 0) ours = 1;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return -rc - 1000;
    if (!ntables) return 0;
    if (!ours) return -1;
    rc = sqlite3_prepare_v2(db, "SELECT v FROM meta WHERE k='format'", -1, &st, NULL);
    if (rc != SQLITE_OK) return -1;
    ours = -1;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
        const char *f = (const char *)sqlite3_column_text(st, 0);
        ours = strcmp(f, SIMBA__SQLITE_FORMAT) == 0 ? 1 : strncmp(f, "simba-sqlite ", 13) == 0 ? -2 : -1;
    }
    sqlite3_finalize(st);
    return ours;
}

/* This boot's id (a reboot ends every process, hence every session). */
static void simba__sqlite_boot_id(char *out, size_t cap) {
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    size_t n = 0;
    if (f) { n = fread(out, 1, cap - 1, f); fclose(f); }
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' ')) n--;
    out[n] = 0;
}

static int64_t simba__sqlite_meta_int(simba__sqlite *b, const char *k, int64_t dflt) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_META_GET);
    int64_t v = dflt;
    simba__sqlite_bind_text(st, 1, k);
    if (simba__sqlite_step(b, st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return v;
}

/* After a reboot nothing of the old sessions lives: they all go, and the
   monotonic times in the file (expiries, the grace) mean nothing any more.
   A new file only notes the boot (its grace, if any, is of this boot). */
static void simba__sqlite_new_boot(simba__sqlite *b) {
    char boot[64], was[64] = "";
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_META_GET);
    simba__sqlite_boot_id(boot, sizeof boot);
    simba__sqlite_bind_text(st, 1, "boot_id");
    if (simba__sqlite_step(b, st) == SQLITE_ROW) simba__sqlite_col(st, 0, was, sizeof was);
    sqlite3_reset(st);
    if (strcmp(boot, was) == 0) return;
    if (was[0] && sqlite3_exec(b->db, "DELETE FROM entries; DELETE FROM sessions; DELETE FROM meta WHERE k='grace_until';"
                     " UPDATE resources SET hsession=NULL, hrequest=NULL, hopened=NULL, hweight=NULL, hwatch=NULL,"
                     " hfence=NULL WHERE hsession IS NOT NULL",
                     NULL, NULL, NULL) != SQLITE_OK) { simba__sqlite_fail(b, sqlite3_errcode(b->db)); return; }
    st = simba__sqlite_q(b, SQ_META_SET);
    simba__sqlite_bind_text(st, 1, "boot_id");
    simba__sqlite_bind_text(st, 2, boot);
    simba__sqlite_step(b, st);
}

/* The longest lease among ours and those of the other running clients of
   this path we can see (their wake sockets); *others (if not NULL): whether
   any other client runs (a wake socket, or a mark in the sidecar). */
static int simba__sqlite_longest_lease(simba__sqlite *b, int *others) {
    int lease = simba_lease_ms(b->s), bound = simba__sqlite_others_bound(b, &lease);
    if (others) *others = bound || simba__sqlite_others_marked(b);
    return lease;
}

/* No grant in this file for lease_ms from now (restart grace). */
static void simba__sqlite_grace(simba__sqlite *b, int lease_ms) {
    char sql[160];
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta(k,v) VALUES('grace_until',"
             "MAX(COALESCE((SELECT v FROM meta WHERE k='grace_until'),0),%lld))",
             (long long)(simba__sqlite_mono_ms() + lease_ms));
    if (sqlite3_exec(b->db, sql, NULL, NULL, NULL) != SQLITE_OK) simba__sqlite_fail(b, sqlite3_errcode(b->db));
}

/* Creates the schema in a new file. A new file while other processes hold
   marks in the sidecar means the file was deleted or replaced under running
   clients (or a running client has a wake socket of this path, or we used a
   file of this path before): some may still believe they hold, so it grants
   nothing for the longest lease among theirs and ours (docs/sqlite.md, "a
   replaced file"): one of them notices at its next renewal, ttl / 3 after
   its last, and believes until its last renewal + ttl, which may be
   longer than our own lease. */
static void simba__sqlite_create(simba__sqlite *b) {
    char *err = NULL;
    int lease, others;
    if (sqlite3_exec(b->db, simba__sqlite_schema, NULL, NULL, &err) != SQLITE_OK) {
        simba__sqlite_fail(b, sqlite3_errcode(b->db));
        sqlite3_free(err);
        return;
    }
    lease = simba__sqlite_longest_lease(b, &others);
    if (b->had_file || others) simba__sqlite_grace(b, lease);
}

/* A file made (or moved) at another path than ours was put here under
   running clients (renamed over the old one): the same grace. The path's
   tag is kept in the file. */
static void simba__sqlite_check_tag(simba__sqlite *b, int created) {
    char sql[160], was[24] = "";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(b->db, "SELECT v FROM meta WHERE k='tag'", -1, &st, NULL) != SQLITE_OK) {
        simba__sqlite_fail(b, sqlite3_errcode(b->db));
        return;
    }
    if (sqlite3_step(st) == SQLITE_ROW) simba__sqlite_col(st, 0, was, sizeof was);
    sqlite3_finalize(st);
    if (strcmp(was, b->tag) == 0) return;
    if (!created) simba__sqlite_grace(b, simba__sqlite_longest_lease(b, NULL));
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta(k,v) VALUES('tag','%s')", b->tag);
    if (sqlite3_exec(b->db, sql, NULL, NULL, NULL) != SQLITE_OK) simba__sqlite_fail(b, sqlite3_errcode(b->db));
}

/* The file the sidecar last saw at this path: its device and inode, kept in
   the sidecar past the marks (SIMBA__SQLITE_SLOTS on), written by whoever
   opens the path. Another file there while others run (an old copy moved
   back over the path keeps the path's tag and is not made new) may be news
   to a running client: the same grace as for a new file. A sidecar that
   names no file (made again, or by an older simba) tells nothing, so the
   same holds then. The sidecar then names this file. */
static void simba__sqlite_check_identity(simba__sqlite *b, int created) {
    char was[48], now[48];
    ssize_t n;
    if (b->side < 0) return;
    memset(now, 0, sizeof now);
    snprintf(now, sizeof now, "%llx:%llx", (unsigned long long)b->db_dev, (unsigned long long)b->db_ino);
    n = pread(b->side, was, sizeof was - 1, SIMBA__SQLITE_SLOTS);
    was[n > 0 ? n : 0] = 0;
    if (strcmp(was, now) == 0) return;
    if (!created) {   /* a new file had its grace in simba__sqlite_create */
        int others, lease = simba__sqlite_longest_lease(b, &others);
        if (others) simba__sqlite_grace(b, lease);
    }
    n = pwrite(b->side, now, sizeof now, SIMBA__SQLITE_SLOTS);
    (void)n;   /* not kept: the next opener finds no name, and takes the grace if others run */
}

/* The setup transaction: the schema if the file is new, the boot check.
   0, or a SIMBA_E* with msg; SIMBA_EBUSY: try again soon. */
static int simba__sqlite_setup(simba__sqlite *b, char *msg, size_t cap) {
    int rc, fmt;
    rc = sqlite3_exec(b->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) return SIMBA_EBUSY;
    if (rc != SQLITE_OK) return simba__sqlite_explain(b, rc, "begin", msg, cap);
    fmt = simba__sqlite_format(b->db);
    if (fmt == -2) {
        sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
        snprintf(msg, cap, "sqlite: '%.60s' was made by another version of simba (this one reads '%s'):"
                 " remove it (and its -wal, -shm, -simba files) when no process uses it", b->path, SIMBA__SQLITE_FORMAT);
        return SIMBA_EPROTO;
    }
    if (fmt < -2) {
        sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
        return simba__sqlite_explain(b, -(fmt + 1000), "reading the schema", msg, cap);
    }
    if (fmt == -1) {
        sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
        snprintf(msg, cap, "sqlite: '%.60s' is an SQLite file of something else (no simba tables): refused,"
                 " give simba a file of its own", b->path);
        return SIMBA_EPROTO;
    }
    b->rc = 0;
    if (fmt == 0) simba__sqlite_create(b);
    if (!b->rc) simba__sqlite_check_tag(b, fmt == 0);
    if (!b->rc) simba__sqlite_check_identity(b, fmt == 0);
    if (!b->rc && (rc = simba__sqlite_prepare(b, msg, cap)) != 0) { sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL); return rc; }
    if (!b->rc) simba__sqlite_new_boot(b);
    if (!b->rc && (rc = sqlite3_exec(b->db, "COMMIT", NULL, NULL, NULL)) != SQLITE_OK) simba__sqlite_fail(b, rc);
    if (b->rc) {
        rc = b->rc;
        b->rc = 0;
        sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
        if ((rc & 0xff) == SQLITE_BUSY) return SIMBA_EBUSY;
        return simba__sqlite_explain(b, rc, "creating the schema", msg, cap);
    }
    return 0;
}

/* After each COMMIT: when the WAL holds checkpoint_pages or more, a PASSIVE
   checkpoint (what SQLite's own wal_autocheckpoint does, which this hook
   replaces), counted. A failed checkpoint is not the commit's failure: the
   next commit tries again. */
static int simba__sqlite_wal_hook(void *arg, sqlite3 *db, const char *name, int pages) {
    simba__sqlite *b = (simba__sqlite *)arg;
    int64_t t0;
    if (b->checkpoint_pages <= 0 || pages < b->checkpoint_pages) return SQLITE_OK;
    t0 = simba__sqlite_real_us();
    sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    b->stats.checkpoints++;
    b->stats.checkpoint_us += simba__sqlite_real_us() - t0;
    return SQLITE_OK;
}

/* Opens the database file in WAL mode. 0, SIMBA_EBUSY, or a SIMBA_E*. */
/* The file the path names now, as an O_PATH descriptor: fstat reads its
   link count without a walk of the path, and closing it drops no lock
   (closing any other descriptor of the file would drop every POSIX lock
   this process holds on it, SQLite's among them). Without O_PATH there is
   none, and every check walks the path. 0 with the file's identity in
   *st, or -1 if the path names nothing. */
static int simba__sqlite_open_path_fd(simba__sqlite *b, struct stat *st) {
#ifdef O_PATH
    if ((b->db_fd = open(b->path, O_PATH | O_CLOEXEC)) < 0) return -1;
    return fstat(b->db_fd, st);
#else
    b->db_fd = -1;
    return stat(b->path, st);
#endif
}

/* An inotify watch of the file we opened, through /proc/self/fd (our
   inode itself, whatever the path names by now): a deletion or a rename
   over it drops its link count (IN_ATTRIB), a rename away moves it
   (IN_MOVE_SELF). Until the watch fires, a batch that would ask whether
   the file still has a name asks nothing (simba__sqlite_replaced). No
   watch (no inotify or /proc, no instance left for this user): every such
   batch asks. The first batch after an open checks either way. */
static void simba__sqlite_watch_file(simba__sqlite *b) {
    b->name_changed = 1;
#if SIMBA__SQLITE_INOTIFY
    if (b->db_fd >= 0 && (b->name_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) >= 0) {
        char self[40];
        snprintf(self, sizeof self, "/proc/self/fd/%d", b->db_fd);
        if (inotify_add_watch(b->name_fd, self, IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF) < 0) {
            close(b->name_fd);
            b->name_fd = -1;
        }
    }
#endif
}

/* The watch fired (its events drained): the next batch that checks the
   file walks the path. */
static void simba__sqlite_file_event(simba__sqlite *b) {
    char buf[1024];
    while (read(b->name_fd, buf, sizeof buf) > 0) continue;
    b->name_changed = 1;
}

static int simba__sqlite_open_db(simba__sqlite *b, char *msg, size_t cap) {
    struct stat st;
    int rc;
    mode_t old = umask((mode_t)(0777 & ~b->mode));   /* SQLite creates the file (and -wal, -shm) */
    rc = sqlite3_open_v2(b->path, &b->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    umask(old);
    if (rc != SQLITE_OK) return simba__sqlite_explain(b, rc, "open", msg, cap);
    if (sqlite3_db_readonly(b->db, "main") == 1) {
        snprintf(msg, cap, "sqlite: '%.60s' is read-only for this user: simba needs to write it", b->path);
        return SIMBA_EAUTH;
    }
    rc = sqlite3_exec(b->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    if ((rc & 0xff) == SQLITE_BUSY) return SIMBA_EBUSY;
    if (rc != SQLITE_OK) return simba__sqlite_explain(b, rc, "journal_mode=WAL", msg, cap);
    sqlite3_exec(b->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    /* a process that ends (every `simba run`) leaves the checkpoint to the
       ordinary ones instead of an fsync on its way out */
    sqlite3_db_config(b->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
    sqlite3_wal_hook(b->db, simba__sqlite_wal_hook, b);
    if (simba__sqlite_open_path_fd(b, &st) != 0) {
        snprintf(msg, cap, "sqlite: '%.60s' vanished while opening it", b->path);
        return SIMBA_EBUSY;
    }
    b->db_dev = st.st_dev;
    b->db_ino = st.st_ino;
    simba__sqlite_watch_file(b);
    return 0;
}

/*>>connection.io: a batch of ops, one write transaction */

static void simba__sqlite_run_op(simba__sqlite *b, simba__sqlite_job *j);
static void simba__sqlite_send_wakes(simba__sqlite *b);
static void simba__sqlite_down(simba__sqlite *b, int code, const char *msg);
static int simba__sqlite_replaced(simba__sqlite *b, int check, char *msg, size_t cap);

/* The per-transaction state starts empty; the clocks are read once. */
static void simba__sqlite_tx_begin(simba__sqlite *b) {
    b->rc = 0;
    b->errmsg[0] = 0;
    b->nknown = 0;
    b->nwakes = 0;
    b->ntodo = 0;
    b->now = simba__sqlite_mono_ms();
    b->now_us = simba__sqlite_real_us();
    b->tenant = "";
    b->grace_read = 0;
}

/* The ms left of the file's restart grace (0: none), read once per
   transaction and only by an op that may grant or answers it. */
static int64_t simba__sqlite_grace_left(simba__sqlite *b) {
    if (!b->grace_read) {
        b->grace_until = simba__sqlite_meta_int(b, "grace_until", 0);
        b->grace_read = 1;
    }
    return b->now < b->grace_until ? b->grace_until - b->now : 0;
}

/* A batch that failed: every op of it gets the cause; a file that went bad
   (corrupt, I/O error, read-only now) also drops the connection. */
static void simba__sqlite_batch_failed(simba__sqlite *b, simba__sqlite_job **jobs, int n) {
    char msg[SIMBA_MAX_MESSAGE + 96];
    int rc = b->rc, code, i, prim = b->rc & 0xff;
    code = simba__sqlite_explain(b, rc, "transaction", msg, sizeof msg);
    sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
    b->stats.last_error = code;
    if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED) code = SIMBA_EDISCONNECTED;
    for (i = 0; i < n; i++) {
        simba_holder *keep = NULL;
        simba__sqlite_free(b, jobs[i]->entries);
        jobs[i]->entries = keep;
        memset(&jobs[i]->r, 0, sizeof jobs[i]->r);
        jobs[i]->r.status = code;
        jobs[i]->r.message = msg;
        simba__sqlite_complete(b, jobs[i]);
    }
    if (b->up && (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB || prim == SQLITE_IOERR ||
                  prim == SQLITE_READONLY || prim == SQLITE_CANTOPEN))
        simba__sqlite_down(b, code, msg);
}

/* Adds the pages the last COMMIT wrote to the WAL (the connection's counter,
   read and reset). */
static void simba__sqlite_count_pages(simba__sqlite *b) {
    int cur = 0, high = 0;
    if (sqlite3_db_status(b->db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &high, 1) == SQLITE_OK && cur > 0)
        b->stats.pages_written += (uint64_t)cur;
}

/* How the next batch checks its file first (simba__sqlite_replaced): the
   walk of the path if it renews a session (an OPEN or a KEEPALIVE in it);
   none if it only lets go (RELEASE, CLOSE: letting go in a file nobody
   else sees any more is still letting go, and grants it makes there are
   believed no longer than the last walked renewal); else our file's name. */
enum { SIMBA__SQLITE_CHECK_NONE, SIMBA__SQLITE_CHECK_NAME, SIMBA__SQLITE_CHECK_PATH };

static int simba__sqlite_batch_check(simba__sqlite *b) {
    int i, n = b->jn < SIMBA__SQLITE_BATCH ? b->jn : SIMBA__SQLITE_BATCH, check = SIMBA__SQLITE_CHECK_NONE;
    for (i = 0; i < n; i++) {
        simba_op_kind k = b->jobs[(b->jhead + i) % SIMBA__SQLITE_MAX_JOBS]->kind;
        if (k == SIMBA_OP_OPEN || k == SIMBA_OP_KEEPALIVE) return SIMBA__SQLITE_CHECK_PATH;
        if (k != SIMBA_OP_RELEASE && k != SIMBA_OP_CLOSE) check = SIMBA__SQLITE_CHECK_NAME;
    }
    return check;
}

/* Runs up to SIMBA__SQLITE_BATCH queued ops in one write transaction and
   answers them after COMMIT. Never waits: a busy database (another process
   is writing) leaves the ops queued and retries from the loop a few ms
   later. Returns 1 if it ran a batch. */
static int simba__sqlite_run_batch(simba__sqlite *b) {
    simba__sqlite_job *jobs[SIMBA__SQLITE_BATCH];
    char msg[SIMBA_MAX_MESSAGE + 96];
    int n, i, rc;
    int64_t t0;
    if (!b->up || !b->jn || simba_now_ms(b->s) < b->retry_at) return 0;
    if (simba__sqlite_replaced(b, simba__sqlite_batch_check(b), msg, sizeof msg)) {
        simba__sqlite_copy(b->void_session, sizeof b->void_session, b->session);
        simba__sqlite_down(b, SIMBA_EDISCONNECTED, msg);
        return 0;
    }
    t0 = simba__sqlite_real_us();
    rc = sqlite3_step(simba__sqlite_q(b, SQ_BEGIN));
    if (rc != SQLITE_DONE) {
        int prim = rc & 0xff;
        sqlite3_reset(b->st[SQ_BEGIN]);
        if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED) {
            b->stats.busy++;
            b->retry_at = simba_now_ms(b->s) + 1 + (b->busy_tries++ % b->busy_retry_ms);
            return 0;
        }
        simba__sqlite_down(b, simba__sqlite_explain(b, rc, "begin", msg, sizeof msg), msg);
        return 0;
    }
    b->busy_tries = 0;
    simba__sqlite_tx_begin(b);
    n = b->jn < SIMBA__SQLITE_BATCH ? b->jn : SIMBA__SQLITE_BATCH;
    simba__sqlite_take(b, jobs, n);
    for (i = 0; i < n && !b->rc; i++) simba__sqlite_run_op(b, jobs[i]);
    if (!b->rc && (rc = sqlite3_step(simba__sqlite_q(b, SQ_COMMIT))) != SQLITE_DONE) simba__sqlite_fail(b, rc);
    if (b->rc) { simba__sqlite_batch_failed(b, jobs, n); return 1; }
    b->stats.transactions++;
    simba__sqlite_count_pages(b);
    simba__sqlite_send_wakes(b);
    t0 = simba__sqlite_real_us() - t0;
    b->stats.batch_us += t0;
    if (t0 > b->stats.longest_batch_us) b->stats.longest_batch_us = t0;
    for (i = 0; i < n; i++) simba__sqlite_complete(b, jobs[i]);
    return 1;
}

/*>>connection.recover: close, reconnect with backoff, the file replaced */

static void simba__sqlite_close_db(simba__sqlite *b) {
    int i;
    for (i = 0; i < SQ_N; i++) {
        if (b->st[i]) sqlite3_finalize(b->st[i]);
        b->st[i] = NULL;
    }
    if (b->db) sqlite3_close_v2(b->db);
    b->db = NULL;
    if (b->db_fd >= 0) close(b->db_fd);
    b->db_fd = -1;
    if (b->name_fd >= 0) close(b->name_fd);
    b->name_fd = -1;
}

static void simba__sqlite_watch_clear(simba__sqlite *b);

/* Closes everything: the database, the mark, the wake socket, the watches. */
static void simba__sqlite_close_all(simba__sqlite *b) {
    simba__sqlite_close_db(b);
    if (b->side >= 0) close(b->side);
    b->side = -1;
    b->slot = -1;
    b->stats.slot = -1;
    if (b->wake_fd >= 0) close(b->wake_fd);
    b->wake_fd = -1;
    simba__sqlite_watch_clear(b);
}

/* The connection is gone (or never came): tell the core, fail what is
   queued, try again after the shared backoff. */
/* The mark and the wake socket stay: while a hold of ours may still be
   believed, our mark tells a process that makes the file again to grant
   nothing for a lease. */
static void simba__sqlite_down(simba__sqlite *b, int code, const char *msg) {
    int was_up = b->up;
    simba__sqlite_close_db(b);
    simba__sqlite_watch_clear(b);
    b->up = 0;
    b->stats.last_error = code;
    simba__sqlite_copy(b->last_msg, sizeof b->last_msg, msg);
    b->retry_at = simba_now_ms(b->s) + simba_backend_backoff_ms(b->s, b->attempts++);
    simba__sqlite_fail_queue(b, SIMBA_EDISCONNECTED, msg);
    if (was_up || code != SIMBA_EBUSY) simba_backend_state(b->s, 0, code, msg);
}

/* A reconnect that opened another file than our last connection's (the
   path deleted and made again, an old copy moved back over it while we
   were down): our session lives in that last file only, so here it is
   void (simba__sqlite_voided), as when the check before a batch finds the
   file replaced. Whatever made us reconnect, the file decides. */
static void simba__sqlite_void_if_other_file(simba__sqlite *b) {
    if (!b->had_file || (b->db_dev == b->used_dev && b->db_ino == b->used_ino)) return;
    if (b->session[0]) simba__sqlite_copy(b->void_session, sizeof b->void_session, b->session);
}

/* One attempt to open everything. */
static void simba__sqlite_connect(simba__sqlite *b) {
    char msg[SIMBA_MAX_MESSAGE + 96];
    int rc;
    msg[0] = 0;
    if (!b->tag[0]) simba__sqlite_make_tag(b);
    if ((rc = simba__sqlite_check_fs(b->path, msg, sizeof msg)) == 0 && (rc = simba__sqlite_take_mark(b, msg, sizeof msg)) == 0 &&
        (rc = simba__sqlite_bind_wake(b, msg, sizeof msg)) == 0 && (rc = simba__sqlite_open_db(b, msg, sizeof msg)) == 0)
        rc = simba__sqlite_setup(b, msg, sizeof msg);
    if (rc == SIMBA_EBUSY) {             /* another process writes: soon again, quietly */
        simba__sqlite_close_db(b);
        b->retry_at = simba_now_ms(b->s) + 1 + (b->busy_tries++ % b->busy_retry_ms);
        return;
    }
    if (rc != 0) { simba__sqlite_down(b, rc, msg); return; }
    if (b->attempts || b->stats.reconnects || b->stats.transactions) b->stats.reconnects++;
    simba__sqlite_void_if_other_file(b);
    b->attempts = 0;
    b->busy_tries = 0;
    b->up = 1;
    b->had_file = 1;
    b->used_dev = b->db_dev;
    b->used_ino = b->db_ino;
    b->stats.last_error = 0;
    simba_backend_state(b->s, 1, 0, NULL);
}

/* Whether the file we opened is still the one its path names (deleted or
   replaced: nothing in it may be trusted any more). 0: it is.

   check (simba__sqlite_batch_check): _PATH: the path is walked and names
   our file (device and inode). _NAME: only our file is asked whether it
   still has a name: a file deleted or renamed over has none; one renamed
   away (or deleted after a hard link) still has. _NONE: nothing. With a
   watch of our file (simba__sqlite_watch_file), _NAME asks nothing until
   the watch fires, and then walks the path: that also sees a rename away.

   The walk is what safety needs, and only before a transaction that
   renews a session (OPEN, KEEPALIVE): a hold is believed until its
   session's last renewal sent + ttl (the core's safety rule), so only a
   renewal confirmed in a file the path no longer names could stretch a
   belief past the new file's restart grace (one lease after it is made).
   A grant in such a file is believed no longer than the last renewal the
   walk checked, which ends before that grace does. The cheap check makes
   the common cases (deleted, renamed over) noticed at the next operation
   that is not only a release (with a watch: the next such operation after
   the loop's poll saw the watch fire; renamed away too); without a watch,
   a file renamed away is noticed at the next renewal, within ttl / 3. */
static int simba__sqlite_replaced(simba__sqlite *b, int check, char *msg, size_t cap) {
    struct stat st;
    if (check == SIMBA__SQLITE_CHECK_NAME && b->name_fd >= 0)
        check = b->name_changed ? SIMBA__SQLITE_CHECK_PATH : SIMBA__SQLITE_CHECK_NONE;
    if (check == SIMBA__SQLITE_CHECK_NONE) return 0;
    if (check == SIMBA__SQLITE_CHECK_NAME && b->db_fd >= 0) {
        b->stats.name_checks++;
        if (fstat(b->db_fd, &st) == 0 && st.st_nlink > 0) return 0;
        snprintf(msg, cap, "sqlite: '%.60s' was deleted or replaced under this client (its holds end)", b->path);
        return 1;
    }
    b->stats.path_checks++;
    if (stat(b->path, &st) != 0) {
        snprintf(msg, cap, "sqlite: '%.60s' was deleted under this client (its holds end)", b->path);
        return 1;
    }
    if (st.st_dev != b->db_dev || st.st_ino != b->db_ino) {
        snprintf(msg, cap, "sqlite: '%.60s' was replaced by another file under this client (its holds end)", b->path);
        return 1;
    }
    b->name_changed = 0;   /* the path names our file: whatever the watch saw, it is still ours */
    return 0;
}

/*>>session: OPEN, KEEPALIVE, CLOSE; is a session alive (lease, mark, process) */

/*>>session.open: whether a session lives */

/* Whether the mark at `slot` of our sidecar is still its session's: 1 held
   (or we cannot tell), 0 gone. Our own byte is held for our own sessions
   only (the same wake socket): for another's row it is gone, since we could
   take the byte only after its owner let go of it. */
static int simba__sqlite_mark_held(simba__sqlite *b, int slot, const char *wake) {
    struct flock lk;
    if (b->side < 0) return 1;
    if (slot == b->slot) return strcmp(wake, b->wake) == 0;
    memset(&lk, 0, sizeof lk);
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    lk.l_start = slot;
    lk.l_len = 1;
    if (fcntl(b->side, F_OFD_GETLK, &lk) != 0) return 1;
    return lk.l_type != F_UNLCK;
}

/* The state of a session row (its columns as SQ_SESS_GET reads them, from
   column c on). A session whose lease has not run out is
   dead only when BOTH its mark is gone and its process (the pid with the
   same start time) is gone: a forked child holding the description, an fd
   closed by a library, an exec, a stopped process each keep one of the
   two, and fall to the lease (docs/sqlite.md, "the safety argument"). */
static int simba__sqlite_row_state(simba__sqlite *b, sqlite3_stmt *st, int c, simba__sqlite_known *k) {
    char markfile[48];
    int slot = sqlite3_column_int(st, c);
    simba__sqlite_col(st, c + 1, markfile, sizeof markfile);
    k->pid = sqlite3_column_int(st, c + 2);
    k->start = sqlite3_column_int64(st, c + 3);
    k->expires = sqlite3_column_int64(st, c + 4);
    simba__sqlite_col(st, c + 5, k->wake, sizeof k->wake);
    k->renewed = sqlite3_column_int64(st, c + 6);
    k->opened = sqlite3_column_int64(st, c + 7);
    if (k->expires < b->now) return SIMBA__SQLITE_EXPIRED;
    if (strcmp(markfile, b->markfile) != 0) return SIMBA__SQLITE_LIVE;   /* a mark we cannot see */
    if (simba__sqlite_mark_held(b, slot, k->wake)) return SIMBA__SQLITE_LIVE;
    return simba__sqlite_proc_start(k->pid) == k->start ? SIMBA__SQLITE_LIVE : SIMBA__SQLITE_GONE;
}

/* What this transaction knows of session `id` of the op's tenant, if it
   was read. */
static simba__sqlite_known *simba__sqlite_known_find(simba__sqlite *b, const char *id) {
    int i;
    for (i = 0; i < b->nknown; i++)
        if (strcmp(b->known[i].id, id) == 0 && strcmp(b->known[i].tenant, b->tenant) == 0) return &b->known[i];
    return NULL;
}

/* A new entry for session `id`, from the row a statement is on (its
   columns from c on; none: the session has no row). */
static simba__sqlite_known *simba__sqlite_known_add(simba__sqlite *b, const char *id, sqlite3_stmt *st, int c, int row) {
    simba__sqlite_known *k;
    if (!simba__sqlite_grow(b, (void **)&b->known, &b->capknown, b->nknown + 1, sizeof *b->known)) {
        simba__sqlite_fail(b, SQLITE_NOMEM);
        memset(&b->nomem_known, 0, sizeof b->nomem_known);
        b->nomem_known.state = SIMBA__SQLITE_LIVE;   /* (the batch fails anyway) */
        return &b->nomem_known;
    }
    k = &b->known[b->nknown++];
    memset(k, 0, sizeof *k);
    simba__sqlite_copy(k->tenant, sizeof k->tenant, b->tenant);
    simba__sqlite_copy(k->id, sizeof k->id, id);
    k->state = row ? simba__sqlite_row_state(b, st, c, k) : SIMBA__SQLITE_ABSENT;
    return k;
}

/* What this transaction knows of session `id` of the op's tenant (read once). */
static simba__sqlite_known *simba__sqlite_known_get(simba__sqlite *b, const char *id) {
    simba__sqlite_known *k = simba__sqlite_known_find(b, id);
    sqlite3_stmt *st;
    if (k) return k;
    st = simba__sqlite_q(b, SQ_SESS_GET);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_text(st, 2, id);
    k = simba__sqlite_known_add(b, id, st, 0, simba__sqlite_step(b, st) == SQLITE_ROW);
    sqlite3_reset(st);
    return k;
}

static int simba__sqlite_live(simba__sqlite *b, const char *id) {
    return simba__sqlite_known_get(b, id)->state == SIMBA__SQLITE_LIVE;
}

static void simba__sqlite_known_forget(simba__sqlite *b, const char *id) {
    int i;
    for (i = 0; i < b->nknown; i++)
        if (strcmp(b->known[i].id, id) == 0 && strcmp(b->known[i].tenant, b->tenant) == 0) b->known[i].id[0] = 0;
}

/*>>session.close: the purge of a session */

static void simba__sqlite_owner(simba__sqlite *b, const char *name, char *out, size_t cap);

/* Puts resource `name` on the list to evaluate again (once). */
static void simba__sqlite_todo_add(simba__sqlite *b, const char *name) {
    simba__sqlite_todo *t;
    int i;
    for (i = 0; i < b->ntodo; i++) if (strcmp(b->todo[i].name, name) == 0) return;
    if (!simba__sqlite_grow(b, (void **)&b->todo, &b->captodo, b->ntodo + 1, sizeof *b->todo)) {
        simba__sqlite_fail(b, SQLITE_NOMEM);
        return;
    }
    t = &b->todo[b->ntodo++];
    simba__sqlite_copy(t->name, sizeof t->name, name);
    simba__sqlite_owner(b, name, t->before, sizeof t->before);
}

/* Removes session `id` and every entry of it; its resources go on the todo
   list (simba__sqlite_drain evaluates them). */
static void simba__sqlite_purge(simba__sqlite *b, const char *id) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_SESS_NAMES);
    simba__sqlite_known *k = simba__sqlite_known_get(b, id);
    int n = 0, i;
    if (k->state == SIMBA__SQLITE_GONE) b->stats.purged_dead++;
    if (k->state == SIMBA__SQLITE_EXPIRED) b->stats.purged_expired++;
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_text(st, 2, id);
    while (simba__sqlite_step(b, st) == SQLITE_ROW) {
        if (!simba__sqlite_grow(b, (void **)&b->names, &b->capnames, n + 1, sizeof *b->names)) {
            simba__sqlite_fail(b, SQLITE_NOMEM);
            break;
        }
        simba__sqlite_col(st, 0, b->names[n++], sizeof *b->names);
    }
    sqlite3_reset(st);
    for (i = 0; i < n; i++) simba__sqlite_todo_add(b, b->names[i]);
    st = simba__sqlite_q(b, SQ_ENT_DEL_SESS);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_text(st, 2, id);
    simba__sqlite_step(b, st);
    st = simba__sqlite_q(b, SQ_SESS_DEL);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_text(st, 2, id);
    simba__sqlite_step(b, st);
    k->state = SIMBA__SQLITE_ABSENT;
}

static int64_t simba__sqlite_epoch(simba__sqlite *b) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_EPOCH_GET);
    int64_t e = 1;
    simba__sqlite_bind_text(st, 1, b->tenant);
    if (simba__sqlite_step(b, st) == SQLITE_ROW) e = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return e;
}

/* OPEN and KEEPALIVE write the same row: the expiry and where the session
   lives now (its mark and wake socket, which a reconnect changes). */
static void simba__sqlite_session_put(simba__sqlite *b, simba__sqlite_job *j) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_SESS_PUT);
    simba__sqlite_bind_text(st, 1, j->tenant);
    simba__sqlite_bind_text(st, 2, j->session);
    sqlite3_bind_int(st, 3, b->slot);
    simba__sqlite_bind_text(st, 4, b->markfile);
    sqlite3_bind_int(st, 5, b->pid);
    sqlite3_bind_int64(st, 6, b->start);
    sqlite3_bind_int64(st, 7, b->now + j->lease_ms);
    simba__sqlite_bind_text(st, 8, b->wake);
    sqlite3_bind_int64(st, 9, b->now);
    sqlite3_bind_int64(st, 10, b->now_us);
    simba__sqlite_step(b, st);
    simba__sqlite_known_forget(b, j->session);
    j->r.epoch = simba__sqlite_epoch(b);
}

static void simba__sqlite_drain(simba__sqlite *b);

/* Whether `session` is one we had in a file that was then replaced under
   us. A session lives in one file: in another (an old copy moved back over
   the path, say) its row, if any, is as it was when the copy was taken,
   holding what the session has let go since and missing what it took.
   So there it is gone (its row and entries purged), its holds LOST, and
   the core opens a new one. */
static int simba__sqlite_voided(simba__sqlite *b, const char *session) {
    return b->void_session[0] && strcmp(session, b->void_session) == 0;
}

/* A live session of the op, or SIMBA_ESESSION (a dead or voided one is purged). */
static int simba__sqlite_need_session(simba__sqlite *b, simba__sqlite_job *j) {
    simba__sqlite_known *k = simba__sqlite_known_get(b, j->session);
    if (k->state == SIMBA__SQLITE_LIVE && !simba__sqlite_voided(b, j->session)) return 1;
    if (k->state != SIMBA__SQLITE_ABSENT) { simba__sqlite_purge(b, j->session); simba__sqlite_drain(b); }
    j->r.status = SIMBA_ESESSION;
    return 0;
}

static void simba__sqlite_open(simba__sqlite *b, simba__sqlite_job *j) {
    if (!simba__sqlite_voided(b, j->session)) b->void_session[0] = 0;   /* the core's new session */
    simba__sqlite_copy(b->session, sizeof b->session, j->session);
    simba__sqlite_session_put(b, j);
}

static void simba__sqlite_keepalive(simba__sqlite *b, simba__sqlite_job *j) {
    simba__sqlite_copy(b->session, sizeof b->session, j->session);
    if (simba__sqlite_need_session(b, j)) simba__sqlite_session_put(b, j);
}

static void simba__sqlite_close(simba__sqlite *b, simba__sqlite_job *j) {
    simba__sqlite_purge(b, j->session);
    simba__sqlite_drain(b);
}

/*>>locks: ENQUEUE, POLL, RELEASE, INSPECT, SET_CAPACITY, DELETE */

static void simba__sqlite_wake_add(simba__sqlite *b, const char *addr, const char *name, const char *session,
                                   const char *request, int64_t fence);
static void simba__sqlite_watch_set(simba__sqlite *b, const char *request, const char *name, const int *pids, int n);
static void simba__sqlite_watch_drop(simba__sqlite *b, const char *request);

/*>>locks.rule: a resource's row, its owner, the grant rule's walk */

/* A sole holder kept in its resource's row instead of an entry row (an
   acquire of a free name writes that one row, its release clears it). It
   holds only while the queue's entries are empty: whatever else reads or
   changes the queue turns it into the head entry first (simba__sqlite_unfold). */
typedef struct simba__sqlite_hold {
    char session[SIMBA_MAX_SESSION + 1];   /* "" = no hold in the row */
    char request[SIMBA__SQLITE_MAX_REQ];
    int64_t opened;             /* its session's opened when it was granted */
    int64_t fence;
    int weight, watch;
} simba__sqlite_hold;

/* The stored capacity and fence counter of `name`, and the hold in its row
   (when h is not NULL); 0 if it does not exist. */
static int simba__sqlite_res_hold(simba__sqlite *b, const char *name, int *capacity, int64_t *counter,
                                  simba__sqlite_hold *h) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_RES_GET);
    int found = 0;
    if (h) h->session[0] = h->request[0] = 0;
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    if (simba__sqlite_step(b, st) == SQLITE_ROW) {
        found = 1;
        *capacity = sqlite3_column_int(st, 0);
        *counter = sqlite3_column_int64(st, 1);
        if (h && sqlite3_column_type(st, 2) != SQLITE_NULL) {
            simba__sqlite_col(st, 2, h->session, sizeof h->session);
            simba__sqlite_col(st, 3, h->request, sizeof h->request);
            h->opened = sqlite3_column_int64(st, 4);
            h->weight = sqlite3_column_int(st, 5);
            h->watch = sqlite3_column_int(st, 6);
            h->fence = sqlite3_column_int64(st, 7);
        }
    }
    sqlite3_reset(st);
    return found;
}

static int simba__sqlite_res(simba__sqlite *b, const char *name, int *capacity, int64_t *counter) {
    return simba__sqlite_res_hold(b, name, capacity, counter, NULL);
}

/* What an acquire of one name needs to know of it. */
typedef struct simba__sqlite_name_state {
    int found, capacity, is_free;   /* the row exists; free: no hold in it, no entry in the queue */
    int64_t counter;
} simba__sqlite_name_state;

/* The acquire's reads in one statement (SQ_ACQ_READ): the name's row, and
   what grace_left and known_get would read next (the restart grace, the
   op's session), kept for the rest of the transaction where they keep
   them, unless already read. */
static void simba__sqlite_acquire_read(simba__sqlite *b, simba__sqlite_job *j, simba__sqlite_name_state *f) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_ACQ_READ);
    memset(f, 0, sizeof *f);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    simba__sqlite_bind_text(st, 3, j->session);
    if (simba__sqlite_step(b, st) == SQLITE_ROW) {
        f->found = sqlite3_column_int(st, 0);
        f->capacity = sqlite3_column_int(st, 1);
        f->counter = sqlite3_column_int64(st, 2);
        f->is_free = sqlite3_column_int(st, 3);
        if (!b->grace_read) {
            b->grace_until = sqlite3_column_type(st, 4) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 4);
            b->grace_read = 1;
        }
        if (!simba__sqlite_known_find(b, j->session))
            simba__sqlite_known_add(b, j->session, st, 6, sqlite3_column_int(st, 5));
    }
    sqlite3_reset(st);
}

static void simba__sqlite_unhold(simba__sqlite *b, const char *name) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_RES_UNHOLD);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    simba__sqlite_step(b, st);
}

/* The hold in `name`'s row, if any, becomes the head entry of its queue
   (position, fence, weight, contend flag kept), so the rule's walk and
   every reader of entries see it. A hold whose session is not the one
   that took it (closed, purged, or opened again under its id: another
   opened) is dropped instead: it died with that session, whose purge does
   not look in resource rows. A hold of a session that is dead now (lease
   run out, process gone) is unfolded, and the walk purges it as any entry. */
static void simba__sqlite_unfold_hold(simba__sqlite *b, const char *name, const simba__sqlite_hold *h) {
    simba__sqlite_known *k;
    sqlite3_stmt *st;
    if (!h->session[0]) return;
    simba__sqlite_unhold(b, name);
    k = simba__sqlite_known_get(b, h->session);
    if (k->state == SIMBA__SQLITE_ABSENT || k->opened != h->opened) return;
    st = simba__sqlite_q(b, SQ_ENT_UNFOLD);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    simba__sqlite_bind_text(st, 3, h->request);
    simba__sqlite_bind_text(st, 4, h->session);
    sqlite3_bind_int(st, 5, h->weight);
    sqlite3_bind_int64(st, 6, h->fence);
    sqlite3_bind_int(st, 7, h->watch);
    simba__sqlite_step(b, st);
}

static void simba__sqlite_unfold(simba__sqlite *b, const char *name) {
    simba__sqlite_hold h;
    int capacity;
    int64_t counter;
    if (simba__sqlite_res_hold(b, name, &capacity, &counter, &h)) simba__sqlite_unfold_hold(b, name, &h);
}

/* The session of the oldest granted entry of `name` ("" if none). */
static void simba__sqlite_owner(simba__sqlite *b, const char *name, char *out, size_t cap) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_Q_WALK);
    out[0] = 0;
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    if (simba__sqlite_step(b, st) == SQLITE_ROW && sqlite3_column_int64(st, 4) > 0) simba__sqlite_col(st, 2, out, cap);
    sqlite3_reset(st);
}

enum { SIMBA__SQLITE_GRANTS = 16 };   /* grants applied per pass of the walk */

typedef struct simba__sqlite_grant {
    int64_t seq;
    int nres;                   /* resources of its request */
    char request[SIMBA__SQLITE_MAX_REQ];
    char session[SIMBA_MAX_SESSION + 1];
} simba__sqlite_grant;

/* An entry was granted: its client is woken with the fence when its
   request is now granted everywhere (several resources: fence 0, it
   re-checks). The request the op answers learns it from the reply. */
static void simba__sqlite_announce(simba__sqlite *b, const char *name, const simba__sqlite_grant *g, int64_t fence) {
    sqlite3_stmt *st;
    int total = 1, waiting = 0;
    const char *request = g->request, *session = g->session;
    simba__sqlite_known *k;
    if (b->answering && strcmp(request, b->answering) == 0 && strcmp(session, b->answering_session) == 0) return;
    if (g->nres > 1) {   /* granted everywhere now? */
        st = simba__sqlite_q(b, SQ_REQ_LEFT);
        simba__sqlite_bind_text(st, 1, b->tenant);
        simba__sqlite_bind_text(st, 2, request);
        simba__sqlite_bind_text(st, 3, session);
        if (simba__sqlite_step(b, st) == SQLITE_ROW) {
            total = sqlite3_column_int(st, 0);
            waiting = sqlite3_column_int(st, 1);
        }
        sqlite3_reset(st);
    }
    if (waiting || !total) return;
    k = simba__sqlite_known_get(b, session);
    if (k->state == SIMBA__SQLITE_LIVE) simba__sqlite_wake_add(b, k->wake, name, session, request, total == 1 ? fence : 0);
}

/* The owner of `name` changed: each contend entry (watch_owner) is told by
   its request id, so only that handle re-checks. */
static void simba__sqlite_tell_watchers(simba__sqlite *b, const char *name) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_WATCHERS);
    char session[SIMBA_MAX_SESSION + 1], request[SIMBA__SQLITE_MAX_REQ];
    int n = 0, i;
    struct { char s[SIMBA_MAX_SESSION + 1]; char r[SIMBA__SQLITE_MAX_REQ]; } w[16];
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    while (simba__sqlite_step(b, st) == SQLITE_ROW && n < 16) {
        simba__sqlite_col(st, 0, session, sizeof session);
        simba__sqlite_col(st, 1, request, sizeof request);
        memcpy(w[n].s, session, sizeof session);
        memcpy(w[n].r, request, sizeof request);
        n++;
    }
    sqlite3_reset(st);
    for (i = 0; i < n; i++) {
        simba__sqlite_known *k;
        if (b->answering && strcmp(w[i].r, b->answering) == 0) continue;
        k = simba__sqlite_known_get(b, w[i].s);
        if (k->state == SIMBA__SQLITE_LIVE) simba__sqlite_wake_add(b, k->wake, name, w[i].s, w[i].r, 0);
    }
}

/* Everyone with an entry in `name` looks again (its capacity changed, or it
   is deleted), once per client. */
static void simba__sqlite_tell_all(simba__sqlite *b, const char *name) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_RES_SESSIONS);
    int n = 0, i;
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    while (simba__sqlite_step(b, st) == SQLITE_ROW) {
        if (!simba__sqlite_grow(b, (void **)&b->names, &b->capnames, n + 1, sizeof *b->names)) break;
        simba__sqlite_col(st, 0, b->names[n++], sizeof *b->names);
    }
    sqlite3_reset(st);
    for (i = 0; i < n; i++) {
        simba__sqlite_known *k = simba__sqlite_known_get(b, b->names[i]);
        if (k->state == SIMBA__SQLITE_LIVE) simba__sqlite_wake_add(b, k->wake, name, "", "", 0);
    }
}

/* Whether column c of a statement's row is a session id simba could have
   written: TEXT of at most SIMBA_MAX_SESSION bytes with no NUL in it. Any
   other value (a BLOB, a longer or cut string, a number), written by
   another program, names no session: read back it would not compare equal
   to itself, so a purge by that id would delete nothing. */
static int simba__sqlite_session_column_ok(sqlite3_stmt *st, int c) {
    const unsigned char *t;
    int n;
    if (sqlite3_column_type(st, c) != SQLITE_TEXT) return 0;
    t = sqlite3_column_text(st, c);
    n = sqlite3_column_bytes(st, c);
    return t && n <= SIMBA_MAX_SESSION && strlen((const char *)t) == (size_t)n;
}

/* Deletes the entry of `name` the statement st (SQ_Q_WALK) is on, by its key,
   and resets st. For an entry that belongs to no session: no session's
   purge would ever remove it, and no client can believe it holds by it. */
static void simba__sqlite_drop_entry(simba__sqlite *b, const char *name, sqlite3_stmt *st) {
    sqlite3_value *seq = sqlite3_value_dup(sqlite3_column_value(st, 0));
    sqlite3_stmt *del;
    sqlite3_reset(st);
    if (!seq) { simba__sqlite_fail(b, SQLITE_NOMEM); return; }
    del = simba__sqlite_q(b, SQ_ENT_DEL_SEQ);
    simba__sqlite_bind_text(del, 1, b->tenant);
    simba__sqlite_bind_name(del, 2, name);
    sqlite3_bind_value(del, 3, seq);
    simba__sqlite_step(b, del);
    /* a row its own key cannot delete: the batch fails as corrupt data
       (SIMBA_EPROTO) rather than walk again */
    if (!b->rc && sqlite3_changes(b->db) != 1) simba__sqlite_fail(b, SQLITE_CORRUPT);
    sqlite3_value_free(seq);
}

/* One walk of the prefix rule from the head, as far as it can matter: the
   holders and the waiters it grants now, up to the first it cannot (whose
   session is returned in first_waiter). A dead session met on the way is
   purged, an entry that names no session is dropped, and the walk starts
   again (returns -1): each such pass removes the entry it stopped at.
   Otherwise the number of grants found (at most SIMBA__SQLITE_GRANTS), and
   in owner the owner once they are applied: the head's session if it holds
   or is granted now, else "". held_by: the owner as the walk found it (the
   head's session if it holds), set even when it returns -1.
   O(holders + grants). */
static int simba__sqlite_walk(simba__sqlite *b, const char *name, int capacity, simba__sqlite_grant *g,
                              simba__sqlite_grant *first_waiter, char *held_by, char *owner) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_Q_WALK);
    int64_t sum = 0;
    int blocked = simba__sqlite_grace_left(b) > 0, n = 0, head = 1;
    char session[SIMBA_MAX_SESSION + 1];
    first_waiter->seq = 0;
    owner[0] = held_by[0] = 0;
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    while (simba__sqlite_step(b, st) == SQLITE_ROW) {
        int weight = sqlite3_column_int(st, 3);
        int64_t fence = sqlite3_column_int64(st, 4);
        if (!simba__sqlite_session_column_ok(st, 2)) {
            simba__sqlite_drop_entry(b, name, st);
            return -1;
        }
        simba__sqlite_col(st, 2, session, sizeof session);
        if (head && fence) memcpy(held_by, session, sizeof session);
        if (!simba__sqlite_live(b, session)) {
            sqlite3_reset(st);
            simba__sqlite_purge(b, session);
            return -1;
        }
        if (!blocked && !simba_grant_step(&sum, weight, capacity)) blocked = 1;
        if (head && (fence || !blocked)) memcpy(owner, session, sizeof session);
        head = 0;
        if (fence) continue;
        if (blocked) {
            first_waiter->seq = sqlite3_column_int64(st, 0);
            simba__sqlite_col(st, 1, first_waiter->request, sizeof first_waiter->request);
            memcpy(first_waiter->session, session, sizeof session);
            break;
        }
        g[n].seq = sqlite3_column_int64(st, 0);
        g[n].nres = sqlite3_column_int(st, 5);
        simba__sqlite_col(st, 1, g[n].request, sizeof g[n].request);
        memcpy(g[n].session, session, sizeof session);
        if (++n == SIMBA__SQLITE_GRANTS) break;
    }
    sqlite3_reset(st);
    return n;
}

/* Gives the found entries their fences (simba_grant_fence) and tells them. */
static void simba__sqlite_apply(simba__sqlite *b, const char *name, simba__sqlite_grant *g, int n, int64_t *counter) {
    int i;
    sqlite3_stmt *st;
    for (i = 0; i < n && !b->rc; i++) {
        *counter = simba_grant_fence(*counter, b->now_us);
        st = simba__sqlite_q(b, SQ_ENT_FENCE);
        simba__sqlite_bind_text(st, 1, b->tenant);
        simba__sqlite_bind_name(st, 2, name);
        sqlite3_bind_int64(st, 3, g[i].seq);
        sqlite3_bind_int64(st, 4, *counter);
        simba__sqlite_step(b, st);
        simba__sqlite_announce(b, name, &g[i], *counter);
    }
    st = simba__sqlite_q(b, SQ_RES_COUNTER);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    sqlite3_bind_int64(st, 3, *counter);
    simba__sqlite_step(b, st);
}

/* After a change to `name` (before: its owner before it; NULL: nothing
   changed yet, the owner the first walk finds before any purge): grant what
   the rule grants, purge the dead met on the way, tell the contend entries
   if the owner changed. With capacity > 1 the new first waiter is also
   told: it watches the holders' processes from now on (>>wakeups). */
static void simba__sqlite_evaluate(simba__sqlite *b, const char *name, const char *before) {
    simba__sqlite_grant g[SIMBA__SQLITE_GRANTS], first;
    char after[SIMBA_MAX_SESSION + 1], was[SIMBA_MAX_SESSION + 1], prior[SIMBA_MAX_SESSION + 1];
    int capacity, n, granted = 0, passes = 0;
    int64_t counter;
    simba__sqlite_hold h;
    if (!simba__sqlite_res_hold(b, name, &capacity, &counter, &h)) return;
    simba__sqlite_unfold_hold(b, name, &h);
    for (;;) {
        n = simba__sqlite_walk(b, name, capacity, g, &first, was, after);
        if (b->rc) return;
        if (!before && passes++ == 0) {   /* the first pass read the queue as it was */
            memcpy(prior, was, sizeof was);
            before = prior;
        }
        if (n < 0) continue;
        if (n == 0) break;
        simba__sqlite_apply(b, name, g, n, &counter);
        granted += n;
        if (n < SIMBA__SQLITE_GRANTS) break;
    }
    if (granted && first.seq && capacity > 1 &&
        !(b->answering && strcmp(first.request, b->answering) == 0)) {
        simba__sqlite_known *k = simba__sqlite_known_get(b, first.session);
        if (k->state == SIMBA__SQLITE_LIVE) simba__sqlite_wake_add(b, k->wake, name, first.session, first.request, 0);
    }
    if (strcmp(before, after) != 0) simba__sqlite_tell_watchers(b, name);
}

/* Evaluates the resources the purges put on the todo list, until none is left. */
static void simba__sqlite_drain(simba__sqlite *b) {
    while (b->ntodo && !b->rc) {
        simba__sqlite_todo t = b->todo[--b->ntodo];
        simba__sqlite_evaluate(b, t.name, t.before);
    }
}

/* Touch a resource: the rule's walk (grants, purge), then what it caused. */
static void simba__sqlite_touch(simba__sqlite *b, const char *name) {
    simba__sqlite_evaluate(b, name, NULL);
    simba__sqlite_drain(b);
}

/*>>locks.enqueue: the state of a request, ENQUEUE */

static int simba__sqlite_min_hint(int a, int64_t v) {
    if (v < 0) v = 0;
    if (v > 0x3fffffff) v = 0x3fffffff;
    return (a < 0 || v < a) ? (int)v : a;
}

/* The processes a waiting entry (seq) waits behind, and the earliest
   expiry among them (recheck_ms): the holders and the first waiter ahead,
   as the rule's walk sees them. A waiter that is not the first watches only
   the entry right ahead of it, the first waiter the holders, so a death
   wakes one process (O(1)). Returns the number of pids in pids[]. */
static int simba__sqlite_behind(simba__sqlite *b, const char *name, int64_t seq, int *recheck, int *pids, int max) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_Q_WALK);
    char session[SIMBA_MAX_SESSION + 1], sess[16][SIMBA_MAX_SESSION + 1];
    int n = 0, waiter_ahead = 0, i, np = 0;
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    while (simba__sqlite_step(b, st) == SQLITE_ROW && sqlite3_column_int64(st, 0) < seq) {
        if (sqlite3_column_int64(st, 4) == 0) waiter_ahead = 1;
        if (n < 16) simba__sqlite_col(st, 2, sess[n++], sizeof sess[0]);
        if (waiter_ahead) break;
    }
    sqlite3_reset(st);
    for (i = 0; i < n; i++) {
        simba__sqlite_known *k = simba__sqlite_known_get(b, sess[i]);
        if (k->state == SIMBA__SQLITE_LIVE) *recheck = simba__sqlite_min_hint(*recheck, k->expires - b->now);
        if (!waiter_ahead && np < max && k->state == SIMBA__SQLITE_LIVE) pids[np++] = k->pid;
    }
    if (waiter_ahead) {   /* the entry right ahead of ours */
        st = simba__sqlite_q(b, SQ_PRED);
        simba__sqlite_bind_text(st, 1, b->tenant);
        simba__sqlite_bind_name(st, 2, name);
        sqlite3_bind_int64(st, 3, seq);
        session[0] = 0;
        if (simba__sqlite_step(b, st) == SQLITE_ROW) simba__sqlite_col(st, 0, session, sizeof session);
        sqlite3_reset(st);
        if (session[0]) {
            simba__sqlite_known *k = simba__sqlite_known_get(b, session);
            if (k->state == SIMBA__SQLITE_LIVE && np < max) pids[np++] = k->pid;
            else if (k->state != SIMBA__SQLITE_LIVE) return -1;   /* dead right ahead: purge, look again */
        }
    }
    return np;
}

/* Our entry of `request` in `name`: its seq and fence; 0 if absent or another session's. */
static int simba__sqlite_find(simba__sqlite *b, const char *name, const char *request, const char *session,
                              int64_t *seq, int64_t *fence, char *other, size_t cap) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_ENT_FIND);
    char s[SIMBA_MAX_SESSION + 1];
    int found = 0;
    if (other) other[0] = 0;
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, name);
    simba__sqlite_bind_text(st, 3, request);
    if (simba__sqlite_step(b, st) == SQLITE_ROW) {
        simba__sqlite_col(st, 1, s, sizeof s);
        if (strcmp(s, session) == 0) {
            found = 1;
            if (seq) *seq = sqlite3_column_int64(st, 0);
            if (fence) *fence = sqlite3_column_int64(st, 2);
        } else if (other) simba__sqlite_copy(other, cap, s);
    }
    sqlite3_reset(st);
    return found;
}

/* The answer to ENQUEUE/POLL: fences, granted, ahead, held, owner,
   capacity, recheck_ms, grace; and the processes to watch while it waits. */
static void simba__sqlite_state(simba__sqlite *b, simba__sqlite_job *j) {
    int i, capacity = 0, pids[SIMBA__SQLITE_GRANTS], np = 0;
    int64_t seq0 = 0, counter;
    sqlite3_stmt *st;
    j->r.granted = 1;
    j->r.recheck_ms = -1;
    for (i = 0; i < j->nres && !b->rc; i++) {
        int64_t seq, fence;
        if (!simba__sqlite_find(b, j->names[i], j->request, j->session, &seq, &fence, NULL, 0)) {
            j->r.status = SIMBA_ENOTFOUND;
            simba__sqlite_watch_drop(b, j->request);
            return;
        }
        if (i == 0) seq0 = seq;
        j->r.fence[i] = fence;
        if (fence) continue;
        j->r.granted = 0;
        for (;;) {
            int got = simba__sqlite_behind(b, j->names[i], seq, &j->r.recheck_ms, pids + np,
                                           SIMBA__SQLITE_GRANTS - np);
            if (got >= 0) { np += got; break; }
            {   /* the entry right ahead is dead: purge it, and the queue moves */
                sqlite3_stmt *p = simba__sqlite_q(b, SQ_PRED);
                char session[SIMBA_MAX_SESSION + 1] = "";
                simba__sqlite_bind_text(p, 1, b->tenant);
                simba__sqlite_bind_name(p, 2, j->names[i]);
                sqlite3_bind_int64(p, 3, seq);
                if (simba__sqlite_step(b, p) == SQLITE_ROW) simba__sqlite_col(p, 0, session, sizeof session);
                sqlite3_reset(p);
                if (!session[0] || b->rc) break;
                simba__sqlite_purge(b, session);
                simba__sqlite_drain(b);
                if (!simba__sqlite_find(b, j->names[i], j->request, j->session, &seq, &fence, NULL, 0)) {
                    j->r.status = SIMBA_ENOTFOUND;
                    return;
                }
                j->r.fence[i] = fence;
                if (fence) break;
            }
        }
    }
    if (j->r.granted) simba__sqlite_watch_drop(b, j->request);
    else simba__sqlite_watch_set(b, j->request, j->names[0], pids, np);
    if (simba__sqlite_grace_left(b) > 0) {
        j->r.recheck_ms = simba__sqlite_min_hint(j->r.recheck_ms, simba__sqlite_grace_left(b));
        j->r.grace_ms = simba__sqlite_min_hint(-1, simba__sqlite_grace_left(b));
    }
    simba__sqlite_res(b, j->names[0], &capacity, &counter);
    j->r.capacity = capacity;
    st = simba__sqlite_q(b, SQ_AHEAD);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    sqlite3_bind_int64(st, 3, seq0);
    if (simba__sqlite_step(b, st) == SQLITE_ROW) j->r.ahead = sqlite3_column_int(st, 0);
    sqlite3_reset(st);
    st = simba__sqlite_q(b, SQ_Q_WALK);   /* the holders are a prefix */
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    while (simba__sqlite_step(b, st) == SQLITE_ROW && sqlite3_column_int64(st, 4) > 0) {
        if (!j->r.held) simba__sqlite_col(st, 2, j->owner, sizeof j->owner);
        j->r.held++;
    }
    sqlite3_reset(st);
    j->r.owner = j->owner[0] ? j->owner : NULL;
}

/* Would a new request be granted at once in every resource (try_only)? It
   goes to the tail, so everything queued is ahead of it. */
static int simba__sqlite_fits_now(simba__sqlite *b, simba__sqlite_job *j) {
    int i, capacity, fits = 1;
    int64_t counter;
    if (simba__sqlite_grace_left(b) > 0) return 0;
    for (i = 0; i < j->nres && fits; i++) {
        sqlite3_stmt *st;
        int64_t ahead = 0;
        if (!simba__sqlite_res(b, j->names[i], &capacity, &counter)) return 0;
        st = simba__sqlite_q(b, SQ_Q_WALK);
        simba__sqlite_bind_text(st, 1, b->tenant);
        simba__sqlite_bind_name(st, 2, j->names[i]);
        while (fits && simba__sqlite_step(b, st) == SQLITE_ROW)   /* the sum only grows: stop at the first misfit */
            fits = simba_grant_step(&ahead, sqlite3_column_int(st, 3), capacity);
        sqlite3_reset(st);
        if (fits) fits = simba_grant_step(&ahead, j->res[i].weight, capacity);
    }
    return fits;
}

/* Creates the resources that do not exist yet, touches them; SIMBA_ECAPACITY
   when a weight exceeds a stored capacity. */
static int simba__sqlite_prepare_resources(simba__sqlite *b, simba__sqlite_job *j) {
    int i, capacity = 0;
    int64_t counter;
    for (i = 0; i < j->nres && !b->rc; i++) {
        sqlite3_stmt *st = simba__sqlite_q(b, SQ_RES_ADD);
        simba__sqlite_bind_text(st, 1, b->tenant);
        simba__sqlite_bind_name(st, 2, j->names[i]);
        sqlite3_bind_int(st, 3, j->res[i].capacity);
        simba__sqlite_step(b, st);
        simba__sqlite_touch(b, j->names[i]);
        simba__sqlite_res(b, j->names[i], &capacity, &counter);
        if (j->res[i].weight > capacity) return SIMBA_ECAPACITY;
    }
    return SIMBA_OK;
}

/* An entry of the request id under another session: a dead one is purged
   (then 0), a live one is SIMBA_EKEYBUSY. 1: we have one already. */
static int simba__sqlite_existing(simba__sqlite *b, simba__sqlite_job *j, int *existing) {
    int i;
    char other[SIMBA_MAX_SESSION + 1];
    *existing = 0;
    for (i = 0; i < j->nres && !b->rc; i++) {
        if (simba__sqlite_find(b, j->names[i], j->request, j->session, NULL, NULL, other, sizeof other)) {
            *existing = 1;
            continue;
        }
        if (!other[0]) continue;
        if (simba__sqlite_live(b, other)) return SIMBA_EKEYBUSY;
        simba__sqlite_purge(b, other);
        simba__sqlite_drain(b);
    }
    return SIMBA_OK;
}

/* The uncontended acquire: one name, free (no hold in its row, no entry in
   its queue), outside a restart grace. Granted at once as the rule's walk
   would grant it (the head of an empty queue fits any capacity it does
   not exceed; the fence from simba_grant_fence), kept in the resource's
   row: one row written. f: what simba__sqlite_acquire_read read of the
   name. 0: not such a case (nothing written but a missing resource row);
   the general path answers. The queue being empty, nobody
   is told: no waiter is behind it, no contend entry watches its owner. */
static int simba__sqlite_fast_acquire(simba__sqlite *b, simba__sqlite_job *j, simba__sqlite_name_state *f) {
    sqlite3_stmt *st;
    int64_t counter, ahead = 0;
    if (simba__sqlite_grace_left(b) > 0) return 0;
    if (!f->found) {
        st = simba__sqlite_q(b, SQ_RES_ADD);
        simba__sqlite_bind_text(st, 1, b->tenant);
        simba__sqlite_bind_name(st, 2, j->names[0]);
        sqlite3_bind_int(st, 3, j->res[0].capacity);
        simba__sqlite_step(b, st);
        simba__sqlite_acquire_read(b, j, f);
    }
    if (!f->found || !f->is_free || b->rc || f->capacity < 1 || j->res[0].weight > f->capacity ||
        !simba_grant_step(&ahead, j->res[0].weight, f->capacity))
        return 0;
    counter = simba_grant_fence(f->counter, b->now_us);
    st = simba__sqlite_q(b, SQ_RES_HOLD);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    sqlite3_bind_int64(st, 3, counter);
    simba__sqlite_bind_text(st, 4, j->session);
    simba__sqlite_bind_text(st, 5, j->request);
    sqlite3_bind_int64(st, 6, simba__sqlite_known_get(b, j->session)->opened);
    sqlite3_bind_int(st, 7, j->res[0].weight);
    sqlite3_bind_int(st, 8, j->watch_owner ? 1 : 0);
    simba__sqlite_step(b, st);
    simba__sqlite_watch_drop(b, j->request);
    j->r.granted = 1;
    j->r.fence[0] = counter;
    j->r.recheck_ms = -1;
    j->r.capacity = f->capacity;
    j->r.held = 1;
    simba__sqlite_copy(j->owner, sizeof j->owner, j->session);
    j->r.owner = j->owner;
    return 1;
}

static void simba__sqlite_enqueue(simba__sqlite *b, simba__sqlite_job *j) {
    int i, existing, rc;
    simba__sqlite_name_state f;
    if (j->nres == 1) simba__sqlite_acquire_read(b, j, &f);   /* need_session then reads nothing */
    if (!simba__sqlite_need_session(b, j)) return;
    if (j->nres == 1 && simba__sqlite_fast_acquire(b, j, &f)) return;
    if ((rc = simba__sqlite_prepare_resources(b, j)) != SIMBA_OK) { j->r.status = rc; return; }
    if ((rc = simba__sqlite_existing(b, j, &existing)) != SIMBA_OK) { j->r.status = rc; return; }
    if (!existing) {
        if (j->try_only && !simba__sqlite_fits_now(b, j)) {
            int64_t counter;
            j->r.recheck_ms = -1;
            simba__sqlite_res(b, j->names[0], &j->r.capacity, &counter);
            if (simba__sqlite_grace_left(b) > 0) j->r.grace_ms = simba__sqlite_min_hint(-1, simba__sqlite_grace_left(b));
            return;
        }
        for (i = 0; i < j->nres && !b->rc; i++) {
            sqlite3_stmt *st = simba__sqlite_q(b, SQ_ENT_ADD);
            simba__sqlite_bind_text(st, 1, b->tenant);
            simba__sqlite_bind_name(st, 2, j->names[i]);
            simba__sqlite_bind_text(st, 3, j->request);
            simba__sqlite_bind_text(st, 4, j->session);
            sqlite3_bind_int(st, 5, j->res[i].weight);
            sqlite3_bind_int(st, 6, j->watch_owner ? 1 : 0);
            sqlite3_bind_int(st, 7, j->nres);
            simba__sqlite_step(b, st);
        }
        for (i = 0; i < j->nres && !b->rc; i++) simba__sqlite_touch(b, j->names[i]);
    }
    simba__sqlite_state(b, j);
}

static void simba__sqlite_poll(simba__sqlite *b, simba__sqlite_job *j) {
    int i;
    if (!simba__sqlite_need_session(b, j)) return;
    for (i = 0; i < j->nres && !b->rc; i++) simba__sqlite_touch(b, j->names[i]);
    simba__sqlite_state(b, j);
}

/*>>locks.release: RELEASE */

/* The release of a hold kept in the resource's row: it is cleared, and
   as the queue is empty then, nobody else is granted or told. 0: the
   request's hold is not in the row. */
static int simba__sqlite_fast_release(simba__sqlite *b, simba__sqlite_job *j) {
    sqlite3_stmt *st;
    if (j->nres != 1) return 0;
    st = simba__sqlite_q(b, SQ_RES_LET_GO);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    simba__sqlite_bind_text(st, 3, j->session);
    simba__sqlite_bind_text(st, 4, j->request);
    return simba__sqlite_step(b, st) == SQLITE_DONE && !b->rc && sqlite3_changes(b->db) == 1;
}

static void simba__sqlite_release(simba__sqlite *b, simba__sqlite_job *j) {
    int i;
    simba__sqlite_watch_drop(b, j->request);
    if (simba__sqlite_fast_release(b, j)) return;
    for (i = 0; i < j->nres && !b->rc; i++) {
        char before[SIMBA_MAX_SESSION + 1];
        sqlite3_stmt *st;
        simba__sqlite_owner(b, j->names[i], before, sizeof before);
        st = simba__sqlite_q(b, SQ_ENT_DEL_REQ);
        simba__sqlite_bind_text(st, 1, b->tenant);
        simba__sqlite_bind_name(st, 2, j->names[i]);
        simba__sqlite_bind_text(st, 3, j->request);
        simba__sqlite_bind_text(st, 4, j->session);
        simba__sqlite_step(b, st);
        if (sqlite3_changes(b->db) == 0) continue;   /* not there, or not ours to remove */
        simba__sqlite_evaluate(b, j->names[i], before);
        simba__sqlite_drain(b);
    }
}

/*>>locks.admin: INSPECT, SET_CAPACITY, DELETE */

/* Purges every dead session with an entry in `name` (INSPECT shows the
   whole queue, so no dead entry may stay in it). */
static void simba__sqlite_purge_all(simba__sqlite *b, const char *name) {
    int again = 1;
    while (again && !b->rc) {
        sqlite3_stmt *st = simba__sqlite_q(b, SQ_RES_SESSIONS);
        char dead[SIMBA_MAX_SESSION + 1];
        again = 0;
        simba__sqlite_bind_text(st, 1, b->tenant);
        simba__sqlite_bind_name(st, 2, name);
        while (simba__sqlite_step(b, st) == SQLITE_ROW) {
            simba__sqlite_col(st, 0, dead, sizeof dead);
            if (!simba__sqlite_live(b, dead)) { again = 1; break; }
        }
        sqlite3_reset(st);
        if (again) { simba__sqlite_purge(b, dead); simba__sqlite_drain(b); }
    }
}

static void simba__sqlite_client_of(const char *session, char *out, size_t cap) {
    const char *t = strrchr(session, '~');
    size_t n = t ? (size_t)(t - session) : strlen(session);
    if (n >= cap) n = cap - 1;
    memcpy(out, session, n);
    out[n] = 0;
}

/* An entry's times by the server's clock (the shared monotonic one; held_ms
   from the fence, the wall clock in us at the grant unless the counter ran
   ahead of it: a lower bound). */
static void simba__sqlite_entry_times(simba__sqlite *b, simba_holder *h) {
    simba__sqlite_known *k = simba__sqlite_known_get(b, h->session);
    h->expires_in_ms = k->state == SIMBA__SQLITE_LIVE ? k->expires - b->now : -1;
    h->renewed_ago_ms = k->state == SIMBA__SQLITE_LIVE ? b->now - k->renewed : -1;
    h->held_ms = h->fence ? (b->now_us > h->fence ? (b->now_us - h->fence) / 1000 : 0) : -1;
}

static void simba__sqlite_inspect(simba__sqlite *b, simba__sqlite_job *j) {
    int capacity, n = 0, cap = 0;
    int64_t counter;
    sqlite3_stmt *st;
    simba__sqlite_touch(b, j->names[0]);
    if (!simba__sqlite_res(b, j->names[0], &capacity, &counter)) return;   /* absent: capacity 0, empty */
    simba__sqlite_purge_all(b, j->names[0]);
    j->r.capacity = capacity;
    st = simba__sqlite_q(b, SQ_Q_WALK);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    while (simba__sqlite_step(b, st) == SQLITE_ROW) {
        simba_holder *h;
        if (!simba__sqlite_grow(b, (void **)&j->entries, &cap, n + 1, sizeof *j->entries)) {
            j->r.status = SIMBA_ENOMEM;
            break;
        }
        h = &j->entries[n++];
        memset(h, 0, sizeof *h);
        simba__sqlite_col(st, 2, h->session, sizeof h->session);
        simba__sqlite_client_of(h->session, h->client, sizeof h->client);
        h->fence = sqlite3_column_int64(st, 4);
        h->weight = sqlite3_column_int(st, 3);
        h->granted = h->fence != 0;
        simba__sqlite_entry_times(b, h);
        if (h->granted) {
            if (!j->r.held) simba__sqlite_copy(j->owner, sizeof j->owner, h->session);
            j->r.held++;
        }
    }
    sqlite3_reset(st);
    j->r.nentries = n;
    j->r.entries = j->entries;
    j->r.entry_times = 1;
    if (simba__sqlite_grace_left(b) > 0) j->r.grace_ms = simba__sqlite_min_hint(-1, simba__sqlite_grace_left(b));
    j->r.owner = j->owner[0] ? j->owner : NULL;
}

static void simba__sqlite_bump_epoch(simba__sqlite *b, int64_t fence_floor) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_EPOCH_BUMP);
    simba__sqlite_bind_text(st, 1, b->tenant);
    sqlite3_bind_int64(st, 2, fence_floor);
    simba__sqlite_step(b, st);
}

static void simba__sqlite_set_capacity(simba__sqlite *b, simba__sqlite_job *j) {
    sqlite3_stmt *st = simba__sqlite_q(b, SQ_RES_ADD);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    sqlite3_bind_int(st, 3, j->res[0].capacity);
    simba__sqlite_step(b, st);
    st = simba__sqlite_q(b, SQ_RES_CAP);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    sqlite3_bind_int(st, 3, j->res[0].capacity);
    simba__sqlite_step(b, st);
    simba__sqlite_bump_epoch(b, 0);
    simba__sqlite_touch(b, j->names[0]);
    simba__sqlite_tell_all(b, j->names[0]);
}

/* The resource's counter survives it as the tenant's fence floor, so a
   resource made again under the same name never gives an older fence. */
static void simba__sqlite_delete(simba__sqlite *b, simba__sqlite_job *j) {
    int capacity;
    int64_t counter = 0;
    sqlite3_stmt *st;
    int found = simba__sqlite_res(b, j->names[0], &capacity, &counter);
    simba__sqlite_bump_epoch(b, counter);
    if (!found) return;
    simba__sqlite_unfold(b, j->names[0]);
    simba__sqlite_tell_all(b, j->names[0]);
    st = simba__sqlite_q(b, SQ_ENT_DEL_RES);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    simba__sqlite_step(b, st);
    st = simba__sqlite_q(b, SQ_RES_DEL);
    simba__sqlite_bind_text(st, 1, b->tenant);
    simba__sqlite_bind_name(st, 2, j->names[0]);
    simba__sqlite_step(b, st);
}

/* One op inside the batch's transaction. */
static void simba__sqlite_run_op(simba__sqlite *b, simba__sqlite_job *j) {
    b->tenant = j->tenant;
    b->answering = j->kind == SIMBA_OP_ENQUEUE || j->kind == SIMBA_OP_POLL ? j->request : NULL;
    b->answering_session = j->session;
    switch (j->kind) {
    case SIMBA_OP_OPEN: simba__sqlite_open(b, j); break;
    case SIMBA_OP_KEEPALIVE: simba__sqlite_keepalive(b, j); break;
    case SIMBA_OP_CLOSE: simba__sqlite_close(b, j); break;
    case SIMBA_OP_ENQUEUE: simba__sqlite_enqueue(b, j); break;
    case SIMBA_OP_POLL: simba__sqlite_poll(b, j); break;
    case SIMBA_OP_RELEASE: simba__sqlite_release(b, j); break;
    case SIMBA_OP_INSPECT: simba__sqlite_inspect(b, j); break;
    case SIMBA_OP_SET_CAPACITY: simba__sqlite_set_capacity(b, j); break;
    case SIMBA_OP_DELETE: simba__sqlite_delete(b, j); break;
    default: j->r.status = SIMBA_EINVAL; break;
    }
    b->answering = NULL;
}

/*>>wakeups: datagrams to the granted, pidfds of the processes waited on */

/*>>wakeups.arm: the processes our waiters wait behind (pidfds) */

static void simba__sqlite_watch_drop(simba__sqlite *b, const char *request) {
    int i = 0;
    while (i < b->nwatch) {
        if (strcmp(b->watches[i].request, request) == 0) {
            close(b->watches[i].fd);
            b->watches[i] = b->watches[--b->nwatch];
        } else i++;
    }
    b->stats.watches = b->nwatch;
}

static void simba__sqlite_watch_clear(simba__sqlite *b) {
    while (b->nwatch) close(b->watches[--b->nwatch].fd);
    b->stats.watches = 0;
}

/* Our waiting `request` waits behind these processes: a pidfd each (not
   our own process, whose end ends us too). When one ends, the request
   re-checks at once and purges it (mark gone, process gone). */
static void simba__sqlite_watch_set(simba__sqlite *b, const char *request, const char *name, const int *pids, int n) {
    int i, j;
    simba__sqlite_watch_drop(b, request);
#if SIMBA__SQLITE_PIDFD
    for (i = 0; i < n && b->nwatch < SIMBA__SQLITE_MAX_WATCH; i++) {
        int dup = pids[i] <= 0 || pids[i] == b->pid, fd;
        for (j = 0; j < i && !dup; j++) dup = pids[j] == pids[i];
        if (dup || (fd = pidfd_open((pid_t)pids[i], 0)) < 0) continue;
        simba__sqlite_copy(b->watches[b->nwatch].request, sizeof b->watches[0].request, request);
        simba__sqlite_copy(b->watches[b->nwatch].name, sizeof b->watches[0].name, name);
        b->watches[b->nwatch].pid = pids[i];
        b->watches[b->nwatch].fd = fd;
        b->nwatch++;
    }
#else
    (void)i; (void)j; (void)name; (void)pids; (void)n;
#endif
    b->stats.watches = b->nwatch;
}

/* Whether fd is readable in what poll() returned. */
static int simba__sqlite_ready(int fd, const struct pollfd *fds, int nfds) {
    int i;
    for (i = 0; i < nfds; i++) if (fds[i].fd == fd) return fds[i].revents != 0;
    return 0;
}

/* A process we waited behind ended: its waiters re-check (a POLL purges it
   and grants whoever is next). */
static void simba__sqlite_watch_fire(simba__sqlite *b, const struct pollfd *fds, int nfds) {
    char names[SIMBA__SQLITE_MAX_WATCH][SIMBA_MAX_NAME + 1];
    int i = 0, n = 0;
    while (i < b->nwatch) {
        if (simba__sqlite_ready(b->watches[i].fd, fds, nfds)) {
            simba__sqlite_copy(names[n++], sizeof names[0], b->watches[i].name);
            close(b->watches[i].fd);
            b->watches[i] = b->watches[--b->nwatch];
            b->stats.pidfd_fired++;
        } else i++;
    }
    b->stats.watches = b->nwatch;
    for (i = 0; i < n; i++) {
        b->stats.wakes++;
        simba_backend_changed(b->s, names[i]);
    }
}

/*>>wakeups.fire: what a grant sends (after COMMIT) */

static void simba__sqlite_wake_add(simba__sqlite *b, const char *addr, const char *name, const char *session,
                                   const char *request, int64_t fence) {
    simba__sqlite_wake *w;
    int i;
    if (!addr[0]) return;
    if (!request[0])   /* "look again at name": once per client and name */
        for (i = 0; i < b->nwakes; i++)
            if (!b->wakes[i].request[0] && strcmp(b->wakes[i].addr, addr) == 0 && strcmp(b->wakes[i].name, name) == 0) return;
    if (!simba__sqlite_grow(b, (void **)&b->wakes, &b->capwakes, b->nwakes + 1, sizeof *b->wakes)) {
        b->stats.datagrams_lost++;   /* a hint: the re-checks cover it */
        return;
    }
    w = &b->wakes[b->nwakes++];
    simba__sqlite_copy(w->addr, sizeof w->addr, addr);
    simba__sqlite_copy(w->name, sizeof w->name, name);
    simba__sqlite_copy(w->session, sizeof w->session, session);
    simba__sqlite_copy(w->request, sizeof w->request, request);
    w->fence = fence;
}

/* One datagram: the fence (8 bytes, little-endian), then name, session and
   request, each ended by a NUL. Sent without waiting; a full or vanished
   socket loses the hint only. */
static void simba__sqlite_send_wakes(simba__sqlite *b) {
    unsigned char buf[SIMBA__SQLITE_DGRAM];
    int i, k;
    for (i = 0; i < b->nwakes; i++) {
        simba__sqlite_wake *w = &b->wakes[i];
        struct sockaddr_un a;
        size_t len = 8, ln = strlen(w->name), ls = strlen(w->session), lr = strlen(w->request);
        socklen_t alen;
        for (k = 0; k < 8; k++) buf[k] = (unsigned char)((uint64_t)w->fence >> (8 * k));
        memcpy(buf + len, w->name, ln + 1); len += ln + 1;
        memcpy(buf + len, w->session, ls + 1); len += ls + 1;
        memcpy(buf + len, w->request, lr + 1); len += lr + 1;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        memcpy(a.sun_path + 1, w->addr, strlen(w->addr));
        alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(w->addr));
        if (sendto(b->wake_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a, alen) == (ssize_t)len)
            b->stats.datagrams_sent++;
        else
            b->stats.datagrams_lost++;
    }
    b->nwakes = 0;
}

/*>>wakeups.deliver: datagrams and ended processes -> simba_backend_granted/recheck/changed */

/* One datagram to the core: a grant (a fence, an entry), "this entry
   re-checks" (an entry, fence 0), or "everyone on name re-checks". */
static void simba__sqlite_deliver(simba__sqlite *b, const char *name, const char *session, const char *request,
                                  int64_t fence) {
    if (session[0] && request[0] && fence > 0) simba_backend_granted(b->s, name, session, request, fence);
    else if (session[0] && request[0]) simba_backend_recheck(b->s, name, session, request);
    else simba_backend_changed(b->s, name);
}

/* Reads every datagram waiting. Anyone on the host can send to an abstract
   socket, so a datagram is a hint: a bad one is dropped, and one from
   another user (SCM_CREDENTIALS) never carries a grant (fence 0: re-check). */
static void simba__sqlite_receive(simba__sqlite *b) {
    unsigned char buf[SIMBA__SQLITE_DGRAM + 1];
    union { struct cmsghdr h; char space[CMSG_SPACE(sizeof(simba__sqlite_ucred))]; } ctl;
    for (;;) {
        char *name, *session, *request, *end;
        int64_t fence = 0;
        struct msghdr mh;
        struct iovec iov;
        struct cmsghdr *c;
        int k, trusted = 0;
        ssize_t n;
        memset(&mh, 0, sizeof mh);
        iov.iov_base = buf;
        iov.iov_len = sizeof buf - 1;
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl.space;
        mh.msg_controllen = sizeof ctl.space;
        n = recvmsg(b->wake_fd, &mh, MSG_DONTWAIT);
        if (n < 0) return;
        for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                simba__sqlite_ucred cr;
                memcpy(&cr, CMSG_DATA(c), sizeof cr);
                trusted = cr.uid == getuid() || cr.uid == 0;
            }
        if (n < 11) continue;
        buf[n] = 0;
        end = (char *)buf + n;
        for (k = 0; k < 8; k++) fence |= (int64_t)((uint64_t)buf[k] << (8 * k));
        name = (char *)buf + 8;
        session = name + strlen(name) + 1;
        if (session >= end) continue;
        request = session + strlen(session) + 1;
        if (request >= end || simba_check_name(name) != SIMBA_OK || fence < 0) continue;
        if (!trusted) fence = 0;
        b->stats.datagrams_received++;
        b->stats.wakes++;
        simba__sqlite_deliver(b, name, session, request, fence);
        if (!b->up) return;   /* the wake made the core drop us */
    }
}

/*>>stats: simba_sqlite_stats */

static void simba__sqlite_destroy(void *impl);

SIMBADEF int simba_sqlite_stats(simba_backend bk, struct simba_sqlite_stats *out) {
    simba__sqlite *b;
    if (!bk.vt || bk.vt->destroy != simba__sqlite_destroy || !bk.impl || !out) return SIMBA_EINVAL;
    b = (simba__sqlite *)bk.impl;
    *out = b->stats;
    out->connected = b->up;
    out->file_watched = b->name_fd >= 0;
    return SIMBA_OK;
}

/*>>vtable: attach, submit, pollfds, deadline_ms, process, reset, destroy (glue only) */

static int simba__sqlite_attach(void *impl, simba *s) {
    simba__sqlite *b = (simba__sqlite *)impl;
    b->s = s;
    b->pid = (int)getpid();
    b->start = simba__sqlite_proc_start(b->pid);
    b->retry_at = simba_now_ms(s);   /* open on the first process() */
    simba_backend_own_fds(s);         /* the wake socket and pidfds: ours, close-on-exec */
    return SIMBA_OK;
}

static int simba__sqlite_submit(void *impl, const simba_op *op) {
    simba__sqlite *b = (simba__sqlite *)impl;
    simba__sqlite_job *j;
    int session_op = op->kind == SIMBA_OP_OPEN || op->kind == SIMBA_OP_KEEPALIVE || op->kind == SIMBA_OP_CLOSE;
    if (!b->up) return SIMBA_EDISCONNECTED;
    /* back-pressure; session ops keep room of their own (a keepalive stuck
       behind lock ops would cost every hold) */
    if (b->jn >= SIMBA__SQLITE_MAX_JOBS || (!session_op && b->jn >= SIMBA__SQLITE_MAX_JOBS - 16)) return SIMBA_EBUSY;
    if (!(j = simba__sqlite_job_from_op(b, op))) return SIMBA_ENOMEM;
    b->jobs[(b->jhead + b->jn) % SIMBA__SQLITE_MAX_JOBS] = j;
    b->jn++;
    b->stats.ops_sent++;
    return SIMBA_OK;
}

static int simba__sqlite_pollfds(void *impl, struct pollfd *fds, int max) {
    simba__sqlite *b = (simba__sqlite *)impl;
    int n = 0, i;
    if (b->wake_fd >= 0) {
        if (n < max && fds) { fds[n].fd = b->wake_fd; fds[n].events = POLLIN; fds[n].revents = 0; }
        n++;
    }
    if (b->name_fd >= 0) {
        if (n < max && fds) { fds[n].fd = b->name_fd; fds[n].events = POLLIN; fds[n].revents = 0; }
        n++;
    }
    for (i = 0; i < b->nwatch; i++, n++)
        if (n < max && fds) { fds[n].fd = b->watches[i].fd; fds[n].events = POLLIN; fds[n].revents = 0; }
    return n;
}

static int64_t simba__sqlite_deadline(void *impl) {
    simba__sqlite *b = (simba__sqlite *)impl;
    if (!b->up || b->jn) return b->retry_at < 0 ? 0 : b->retry_at;
    return -1;
}

/* At most a few batches per tick, so one tick stays short under a flood. */
static void simba__sqlite_process(void *impl, const struct pollfd *fds, int nfds) {
    simba__sqlite *b = (simba__sqlite *)impl;
    struct pollfd own[SIMBA__SQLITE_MAX_WATCH + 2];
    int k;
    if (!b->up) {
        if (simba_now_ms(b->s) < b->retry_at) return;
        simba__sqlite_connect(b);
        if (!b->up) return;
    }
    if (!fds) {   /* a loop that did not poll: all our fds asked at once */
        int max = (int)(sizeof own / sizeof own[0]);
        nfds = simba__sqlite_pollfds(b, own, max);
        if (nfds > max) nfds = max;
        if (poll(own, (nfds_t)nfds, 0) < 0) nfds = 0;
        fds = own;
    }
    if (b->name_fd >= 0 && simba__sqlite_ready(b->name_fd, fds, nfds)) simba__sqlite_file_event(b);
    if (simba__sqlite_ready(b->wake_fd, fds, nfds)) simba__sqlite_receive(b);
    if (b->up) simba__sqlite_watch_fire(b, fds, nfds);
    for (k = 0; k < 4 && b->up && b->jn; k++)
        if (!simba__sqlite_run_batch(b)) break;
}

static void simba__sqlite_reset(void *impl, int why) {
    simba__sqlite *b = (simba__sqlite *)impl;
    char msg[128];
    snprintf(msg, sizeof msg, "sqlite: connection reset (%s)", simba_strerror(why));
    simba__sqlite_down(b, why ? why : SIMBA_EDISCONNECTED, msg);
}

static void simba__sqlite_destroy(void *impl) {
    simba__sqlite *b = (simba__sqlite *)impl;
    simba__sqlite_close_all(b);
    while (b->jn) {
        simba__sqlite_job *j;
        simba__sqlite_take(b, &j, 1);
        simba__sqlite_job_free(b, j);
    }
    simba__sqlite_free(b, b->jobs);
    simba__sqlite_free(b, b->known);
    simba__sqlite_free(b, b->wakes);
    simba__sqlite_free(b, b->todo);
    simba__sqlite_free(b, b->names);
    simba__sqlite_free(b, b->path);
    simba__sqlite_free(b, b->side_path);
    simba__sqlite_free(b, b);
}

static const simba_backend_vtable simba__sqlite_vtable = {
    "sqlite",
    simba__sqlite_attach,
    simba__sqlite_submit,
    simba__sqlite_pollfds,
    simba__sqlite_deadline,
    simba__sqlite_process,
    simba__sqlite_reset,
    simba__sqlite_destroy
};

/*>>constructor: desc checks, allocation, from_url, checkpoint */

static int simba__sqlite_check_desc(const simba_sqlite_desc *d, simba_backend *err) {
    if (!d) { *err = simba_backend_error(SIMBA_EINVAL, "simba_sqlite_desc: NULL"); return SIMBA_EINVAL; }
    if (simba_allocator_check(&d->allocator) != SIMBA_OK) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_sqlite_desc.allocator: set both alloc and free, or neither");
        return SIMBA_EINVAL;
    }
    if (!d->path || !*d->path) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_sqlite_desc.path: required (the database file)");
        return SIMBA_EINVAL;
    }
    if (strlen(d->path) > 4000) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_sqlite_desc.path: %u bytes, at most 4000", (unsigned)strlen(d->path));
        return SIMBA_EINVAL;
    }
    if (d->mode < 0 || d->mode > 0777) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_sqlite_desc.mode: %o is not a permission (0..0777)", (unsigned)d->mode);
        return SIMBA_EINVAL;
    }
    if (d->busy_retry_ms < 0 || d->busy_retry_ms > 1000) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_sqlite_desc.busy_retry_ms: %d is not 0..1000", d->busy_retry_ms);
        return SIMBA_EINVAL;
    }
    if (d->checkpoint_pages > 1000000) {
        *err = simba_backend_error(SIMBA_EINVAL, "simba_sqlite_desc.checkpoint_pages: %d is more than 1000000 (< 0: none"
                                   " inside simba_tick)", d->checkpoint_pages);
        return SIMBA_EINVAL;
    }
    return SIMBA_OK;
}

SIMBADEF simba_backend simba_sqlite(const simba_sqlite_desc *d) {
    simba_backend out;
    simba__sqlite *b;
    size_t n;
    if (simba__sqlite_check_desc(d, &out) != SIMBA_OK) return out;
    b = (simba__sqlite *)simba_allocator_alloc(&d->allocator, sizeof *b);
    if (!b) return simba_backend_error(SIMBA_ENOMEM, "simba_sqlite: out of memory");
    b->alloc = d->allocator;
    b->side = b->wake_fd = b->slot = b->db_fd = b->name_fd = -1;
    b->stats.slot = -1;
    n = strlen(d->path);
    b->path = simba_allocator_strdup(&b->alloc, d->path);
    b->side_path = (char *)simba__sqlite_alloc(b, n + 8);
    b->jobs = (simba__sqlite_job **)simba__sqlite_alloc(b, sizeof(simba__sqlite_job *) * SIMBA__SQLITE_MAX_JOBS);
    if (!b->path || !b->side_path || !b->jobs) {
        simba__sqlite_destroy(b);
        return simba_backend_error(SIMBA_ENOMEM, "simba_sqlite: out of memory");
    }
    memcpy(b->side_path, d->path, n);
    memcpy(b->side_path + n, "-simba", 7);
    b->mode = d->mode ? d->mode : 0600;
    b->busy_retry_ms = d->busy_retry_ms ? d->busy_retry_ms : 4;
    b->checkpoint_pages = d->checkpoint_pages ? d->checkpoint_pages : 1000;
    out.vt = &simba__sqlite_vtable;
    out.impl = b;
    return out;
}

SIMBADEF int simba_sqlite_from_url(simba_url *u, simba_backend *out, simba_url_error *err) {
    simba_sqlite_desc d;
    const char *mode, *ckpt;
    int rc;
    memset(&d, 0, sizeof d);
    if (!u || !out) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: no URL or no output");
    if (strcmp(u->scheme, "sqlite") != 0)
        return simba_url_fail(err, SIMBA_EINVAL, "scheme", "URL scheme: '%s' is not sqlite", u->scheme);
    if (u->nhosts > 0 && u->hosts[0].host && u->hosts[0].host[0])
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: sqlite takes no host: sqlite:///absolute/path/locks.db"
                              " (three slashes)");
    if (!u->path[0] || u->path[0] != '/' || !u->path[1])
        return simba_url_fail(err, SIMBA_EINVAL, "path", "URL path: sqlite needs the file: sqlite:///absolute/path/locks.db");
    d.path = u->path;
    if ((mode = simba_url_param(u, "mode")) != NULL) {
        char *end;
        long m = strtol(mode, &end, 8);
        if (!*mode || *end || m <= 0 || m > 0777)
            return simba_url_fail(err, SIMBA_EINVAL, "mode", "URL parameter mode: '%.20s' is not octal permissions (e.g. 0660)", mode);
        d.mode = (int)m;
    }
    if ((rc = simba_url_duration(u, "busy_retry", 1, 1000, &d.busy_retry_ms, err)) != SIMBA_OK) return rc;
    if ((ckpt = simba_url_param(u, "checkpoint")) != NULL) {
        char *end;
        long n = strtol(ckpt, &end, 10);
        if (strcmp(ckpt, "off") == 0) d.checkpoint_pages = -1;
        else if (!*ckpt || *end || n < 1 || n > 1000000)
            return simba_url_fail(err, SIMBA_EINVAL, "checkpoint", "URL parameter checkpoint: '%.20s' is not a number of"
                                  " WAL pages (1..1000000) or off", ckpt);
        else d.checkpoint_pages = (int)n;
    }
    if ((rc = simba_url_check_used(u, err)) != SIMBA_OK) return rc;
    *out = simba_sqlite(&d);
    if (!out->vt) return simba_url_fail(err, SIMBA_ENOMEM, "url", "URL: the SQLite backend could not be made (out of memory)");
    return SIMBA_OK;
}

/* A checkpoint on a connection of its own (see the declaration). The file
   is checked as a backend checks it: file system, SQLite, format. */
SIMBADEF int simba_sqlite_checkpoint(const char *path, int *wal_pages, int *copied, char *msg, size_t cap) {
    sqlite3 *db = NULL;
    struct stat st;
    char buf[SIMBA_MAX_MESSAGE + 96];
    int rc, code, log = -1, done = -1;
    if (wal_pages) *wal_pages = -1;
    if (copied) *copied = -1;
    if (!msg || !cap) { msg = buf; cap = sizeof buf; }
    msg[0] = 0;
    if (!path || !*path || strlen(path) > 4000) {
        snprintf(msg, cap, "simba_sqlite_checkpoint: %s", path && *path ? "path longer than 4000 bytes" : "no path");
        return SIMBA_EINVAL;
    }
    if (stat(path, &st) != 0) {
        snprintf(msg, cap, "sqlite: '%.60s': %s", path, strerror(errno));
        return errno == ENOENT ? SIMBA_ENOTFOUND : errno == EACCES ? SIMBA_EAUTH : SIMBA_EBACKEND;
    }
    if ((code = simba__sqlite_check_fs(path, msg, cap)) != 0) return code;
    rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        /* its own close copies nothing more (this call's checkpoint is the one) */
        sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
        code = simba__sqlite_format(db);
        if (code == 1) {
            rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
            code = rc == SQLITE_OK ? SIMBA_OK : simba__sqlite_explain_at(path, db, rc, "checkpoint", msg, cap);
        } else if (code <= -1000) {
            code = simba__sqlite_explain_at(path, db, -code - 1000, "read", msg, cap);
        } else {
            snprintf(msg, cap, "sqlite: '%.60s' is not a simba lock file%s", path, code == -2 ? " of this version" : "");
            code = SIMBA_EPROTO;
        }
    } else {
        code = simba__sqlite_explain_at(path, db, rc, "open", msg, cap);
    }
    if (db) sqlite3_close_v2(db);
    if (code == SIMBA_OK) {
        if (wal_pages) *wal_pages = log;
        if (copied) *copied = done;
    }
    return code;
}

#endif /* SIMBA_SQLITE_IMPLEMENTATION */
