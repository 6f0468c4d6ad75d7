/* test_sqlite.c -- the conformance suite on the SQLite backend, plus what
   only real processes on one machine can show: many processes on a mutex
   and a semaphore, a holder killed with -9, a holder stopped with SIGSTOP,
   and the files that must be refused (network file system, read-only,
   unwritable directory, a foreign or corrupt file, the file deleted or
   replaced under running clients).

   Every test works in its own temporary directory. An optional argv[1]
   runs only the tests whose name contains it. */
#define _GNU_SOURCE   /* MAP_ANONYMOUS */
#include "harness.h"
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_SQLITE_IMPLEMENTATION
#include "simba_sqlite.h"
#define SIMBA_URL_IMPLEMENTATION
#include "simba_url.h"
#include "conformance.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <dirent.h>
#include <sys/stat.h>
#include <errno.h>
#include <sys/mman.h>

static char dir[256];          /* the temporary directory of this run */
static char conf_db[320];      /* the database of the conformance suite */

/* ---- the kill hook: a client's database handle goes bad under it ----

   A serverless backend has no connection a server could cut. What can go
   wrong under a running client is its handle on the file: the file's I/O
   fails (EIO from a failing disk, a descriptor closed or revoked under
   SQLite). The test plays that with a VFS shim, made the default VFS: it
   passes every call to the real VFS until its file is "killed", then fails
   what reads, writes or takes a lock with SQLITE_IOERR (what unlocks and
   closes still passes, so the handle closes cleanly). The backend must
   take it as a lost connection (DISCONNECTED), open a new handle
   (CONNECTED) and keep its session, its mark and its holds: the recover
   path of docs/sqlite.md. */

typedef struct kill_file {
    sqlite3_file base;
    int dead;
    sqlite3_file *real;         /* the real VFS's file, right after this struct */
} kill_file;

static sqlite3_vfs kill_vfs, *real_vfs;
static sqlite3_io_methods kill_methods;

#define KILL_REAL(f) (((kill_file *)(f))->real)
#define KILL_DEAD(f) (((kill_file *)(f))->dead)

static int kill_close(sqlite3_file *f) { return KILL_REAL(f)->pMethods->xClose(KILL_REAL(f)); }
static int kill_read(sqlite3_file *f, void *p, int n, sqlite3_int64 off) {
    return KILL_DEAD(f) ? SQLITE_IOERR_READ : KILL_REAL(f)->pMethods->xRead(KILL_REAL(f), p, n, off);
}
static int kill_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off) {
    return KILL_DEAD(f) ? SQLITE_IOERR_WRITE : KILL_REAL(f)->pMethods->xWrite(KILL_REAL(f), p, n, off);
}
static int kill_truncate(sqlite3_file *f, sqlite3_int64 n) {
    return KILL_DEAD(f) ? SQLITE_IOERR_TRUNCATE : KILL_REAL(f)->pMethods->xTruncate(KILL_REAL(f), n);
}
static int kill_sync(sqlite3_file *f, int flags) {
    return KILL_DEAD(f) ? SQLITE_IOERR_FSYNC : KILL_REAL(f)->pMethods->xSync(KILL_REAL(f), flags);
}
static int kill_size(sqlite3_file *f, sqlite3_int64 *n) {
    return KILL_DEAD(f) ? SQLITE_IOERR_FSTAT : KILL_REAL(f)->pMethods->xFileSize(KILL_REAL(f), n);
}
static int kill_lock(sqlite3_file *f, int level) {
    return KILL_DEAD(f) ? SQLITE_IOERR_LOCK : KILL_REAL(f)->pMethods->xLock(KILL_REAL(f), level);
}
static int kill_unlock(sqlite3_file *f, int level) { return KILL_REAL(f)->pMethods->xUnlock(KILL_REAL(f), level); }
static int kill_reserved(sqlite3_file *f, int *out) {
    return KILL_DEAD(f) ? SQLITE_IOERR_CHECKRESERVEDLOCK
                        : KILL_REAL(f)->pMethods->xCheckReservedLock(KILL_REAL(f), out);
}
static int kill_fcntl(sqlite3_file *f, int op, void *arg) {
    return KILL_REAL(f)->pMethods->xFileControl(KILL_REAL(f), op, arg);
}
static int kill_sector(sqlite3_file *f) { return KILL_REAL(f)->pMethods->xSectorSize(KILL_REAL(f)); }
static int kill_caps(sqlite3_file *f) { return KILL_REAL(f)->pMethods->xDeviceCharacteristics(KILL_REAL(f)); }
static int kill_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **pp) {
    return KILL_DEAD(f) ? SQLITE_IOERR_SHMMAP : KILL_REAL(f)->pMethods->xShmMap(KILL_REAL(f), pg, sz, extend, pp);
}
static int kill_shm_lock(sqlite3_file *f, int off, int n, int flags) {
    if (KILL_DEAD(f) && (flags & SQLITE_SHM_LOCK)) return SQLITE_IOERR_SHMLOCK;
    return KILL_REAL(f)->pMethods->xShmLock(KILL_REAL(f), off, n, flags);
}
static void kill_shm_barrier(sqlite3_file *f) { KILL_REAL(f)->pMethods->xShmBarrier(KILL_REAL(f)); }
static int kill_shm_unmap(sqlite3_file *f, int del) { return KILL_REAL(f)->pMethods->xShmUnmap(KILL_REAL(f), del); }
static int kill_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp) {
    if (KILL_DEAD(f)) { *pp = NULL; return SQLITE_IOERR_MMAP; }
    return KILL_REAL(f)->pMethods->xFetch(KILL_REAL(f), off, n, pp);
}
static int kill_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
    return KILL_REAL(f)->pMethods->xUnfetch(KILL_REAL(f), off, p);
}

static int kill_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out) {
    kill_file *k = (kill_file *)f;
    int rc;
    (void)vfs;
    k->dead = 0;
    k->real = (sqlite3_file *)(k + 1);
    rc = real_vfs->xOpen(real_vfs, name, k->real, flags, out);
    /* the shim's methods only over a file the real VFS opened (one whose
       open failed is never closed through them) */
    f->pMethods = rc == SQLITE_OK && k->real->pMethods ? &kill_methods : NULL;
    return rc;
}

/* The shim over the default VFS, made the default (once). */
static void kill_vfs_install(void) {
    real_vfs = sqlite3_vfs_find(NULL);
    kill_vfs = *real_vfs;
    kill_vfs.zName = "simba-test-kill";
    kill_vfs.szOsFile = (int)sizeof(kill_file) + real_vfs->szOsFile;
    kill_vfs.xOpen = kill_open;
    kill_vfs.pAppData = NULL;
    kill_methods.iVersion = 3;
    kill_methods.xClose = kill_close;
    kill_methods.xRead = kill_read;
    kill_methods.xWrite = kill_write;
    kill_methods.xTruncate = kill_truncate;
    kill_methods.xSync = kill_sync;
    kill_methods.xFileSize = kill_size;
    kill_methods.xLock = kill_lock;
    kill_methods.xUnlock = kill_unlock;
    kill_methods.xCheckReservedLock = kill_reserved;
    kill_methods.xFileControl = kill_fcntl;
    kill_methods.xSectorSize = kill_sector;
    kill_methods.xDeviceCharacteristics = kill_caps;
    kill_methods.xShmMap = kill_shm_map;
    kill_methods.xShmLock = kill_shm_lock;
    kill_methods.xShmBarrier = kill_shm_barrier;
    kill_methods.xShmUnmap = kill_shm_unmap;
    kill_methods.xFetch = kill_fetch;
    kill_methods.xUnfetch = kill_unfetch;
    sqlite3_vfs_register(&kill_vfs, 1);
}

static simba_backend make_default(void *user) {
    simba_sqlite_desc d;
    (void)user;
    memset(&d, 0, sizeof d);
    d.path = conf_db;
    d.allocator.alloc = h_track_alloc;
    d.allocator.free = h_track_free;
    return h_track(simba_sqlite(&d));
}

/* White-box: the backend of client s (this file includes the implementation). */
static simba__sqlite *impl_of(simba *s) {
    int i;
    for (i = 0; i < h_nmade; i++)
        if (((simba__sqlite *)h_made[i].impl)->s == s) return (simba__sqlite *)h_made[i].impl;
    return NULL;
}

/* Kills client s's handle on the file: the database file and its WAL fail
   every read, write and lock from now on. */
static int kill_handle(void *user, simba *s) {
    simba__sqlite *b = impl_of(s);
    sqlite3_file *f = NULL;
    (void)user;
    if (!b) return SIMBA_ESTALE;
    if (!b->db || !b->up) return SIMBA_EDISCONNECTED;
    if (sqlite3_file_control(b->db, "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK || !f ||
        f->pMethods != &kill_methods)
        return SIMBA_EBACKEND;
    ((kill_file *)f)->dead = 1;
    f = NULL;
    if (sqlite3_file_control(b->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &f) == SQLITE_OK && f &&
        f->pMethods == &kill_methods)
        ((kill_file *)f)->dead = 1;
    return SIMBA_OK;
}


/* ---- helpers ---- */

/* The logger of the clients this process makes (zero: silent). */
static simba_logger sq_logger;

/* A client on database `path`; ttl 0 = the defaults (lease 16 s). */
/* A client of the backend sd describes. */
static simba *sq_client_desc(const simba_sqlite_desc *sd, const char *tenant, const char *id, int ttl_ms,
                             int transition_ms, simba_backend *out) {
    simba_desc d;
    simba_error err;
    simba *s;
    memset(&d, 0, sizeof d);
    d.backend = simba_sqlite(sd);
    if (out) *out = d.backend;
    d.tenant = tenant;
    d.client_id = id;
    d.ttl_ms = ttl_ms;
    d.transition_ms = transition_ms;
    d.logger = sq_logger;
    s = simba_create(&d, &err);
    if (!s) printf("  # simba_create: %s %s\n", simba_strerror(err.code), err.message);
    return s;
}

static simba *sq_client_b(const char *path, const char *tenant, const char *id, int ttl_ms, int transition_ms,
                          simba_backend *out) {
    simba_sqlite_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.path = path;
    return sq_client_desc(&sd, tenant, id, ttl_ms, transition_ms, out);
}

static simba *sq_client(const char *path, const char *tenant, const char *id, int ttl_ms, int transition_ms) {
    return sq_client_b(path, tenant, id, ttl_ms, transition_ms, NULL);
}

/* A path in this run's directory, and a fresh sub-directory for a test. */
static void sq_path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", dir, name); }

/* A database in this run's directory and SQLite's files beside it. */
typedef struct sq_files { char db[320], wal[340], shm[340]; } sq_files;

static void sq_files_of(sq_files *f, const char *name) {
    sq_path(f->db, sizeof f->db, name);
    snprintf(f->wal, sizeof f->wal, "%s-wal", f->db);
    snprintf(f->shm, sizeof f->shm, "%s-shm", f->db);
}

static simba_lock sq_acquire(simba *s, const char *name, int capacity, int permits, int exclusive, int wait_ms) {
    simba_lock_desc d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.capacity = capacity;
    d.permits = permits;
    d.exclusive = exclusive;
    d.wait_ms = wait_ms;
    return simba_acquire(s, &d);
}

/* Waits (up to ms) for the next event of `l`; 1 if it is of `type`. */
static int sq_expect(simba *s, simba_lock l, simba_event_type type, int ms, simba_event *ev) {
    simba_event tmp;
    if (!ev) ev = &tmp;
    if (simba_wait(s, l, ms, ev) != 1) { printf("  # no event within %d ms (want %s)\n", ms, simba_event_name(type)); return 0; }
    if (ev->type != type) {
        printf("  # got %s (%s %s), want %s\n", simba_event_name(ev->type), simba_strerror(ev->error), ev->message,
               simba_event_name(type));
        return 0;
    }
    return 1;
}

/* The number of entries (held and waiting) of `name`, or -1. */
static int sq_queued(simba *s, const char *name) {
    simba_lock q = simba_inspect(s, name, NULL);
    simba_event ev;
    if (simba_wait(s, q, 5000, &ev) != 1) return -1;
    if (ev.type == SIMBA_EVENT_ERROR && ev.error == SIMBA_ENOTFOUND) return 0;
    return ev.type == SIMBA_EVENT_INFO ? ev.queued : -1;
}

/* Inspects until `name` has `n` entries (up to 10 s). */
static int sq_wait_queued(simba *s, const char *name, int n) {
    int64_t end = h_real_ms() + 10000;
    int got = -1;
    while (h_real_ms() < end) {
        if ((got = sq_queued(s, name)) == n) return 1;
        {   struct timespec ts = {0, 2000000}; nanosleep(&ts, NULL); }
    }
    printf("  # %s: %d entries, want %d\n", name, got, n);
    return 0;
}

/* Runs s's loop for up to ms until a DISCONNECTED event comes (into *out). */
static int sq_disconnected(simba *s, int ms, simba_event *out) {
    int64_t end = h_real_ms() + ms;
    while (h_real_ms() < end) {
        struct pollfd fds[16];
        simba_event ev[16];
        int n = simba_pollfds(s, fds, 16), k, i, t = simba_timeout_ms(s);
        n = n < 0 ? 0 : n > 16 ? 16 : n;
        poll(fds, (nfds_t)n, t < 0 || t > 20 ? 20 : t);
        k = simba_tick(s, fds, n, ev, 16);
        for (i = 0; i < k; i++) if (ev[i].type == SIMBA_EVENT_DISCONNECTED) { *out = ev[i]; return 1; }
    }
    return 0;
}

static struct simba_sqlite_stats sq_stats(simba_backend b) {
    struct simba_sqlite_stats st;
    memset(&st, 0, sizeof st);
    simba_sqlite_stats(b, &st);
    return st;
}

/* ---- many processes ---- */

/* The contenders' lease: queue order is kept by a session that lives, and a
   process that cannot renew its session within ttl (an operation unanswered
   for ttl / 3 on a loaded machine resets it; a session is dropped at its
   local deadline) queues again at the tail, as it should. A minute keeps
   every session of the test alive through any stall the machine makes. */
enum { SQ_MAX_PROCS = 64, SQ_LOG = 240, SQ_MANY_TTL = 60000 };
typedef struct sq_shared {
    int n;                      /* grants so far */
    int inuse, max_inuse;       /* permits held now, and at most */
    int order[SQ_MAX_PROCS];    /* child index by the order the grants were seen in */
    int64_t fence[SQ_MAX_PROCS];/* fence by child index */
    int64_t reconnects[SQ_MAX_PROCS];   /* the child's reconnects before its grant */
    char log[SQ_MAX_PROCS][SQ_LOG];     /* the child's last warnings, for a report */
} sq_shared;
static sq_shared *shared;

/* A contender's logger: its warnings go to its line of shared->log. */
static void sq_log_to_shared(void *user, simba_log_level level, const char *msg) {
    char *line = shared->log[(int)(intptr_t)user];
    size_t used = strlen(line);
    (void)level;
    if (used < SQ_LOG - 2) snprintf(line + used, SQ_LOG - used, "%s%s", used ? " | " : "", msg);
}

static void sq_note_max(int cur) {
    int m;
    while ((m = __sync_fetch_and_add(&shared->max_inuse, 0)) < cur)
        if (__sync_bool_compare_and_swap(&shared->max_inuse, m, cur)) break;
}

/* A contender process: waits for the lock, notes its grant, holds a moment, releases. */
static void sq_contender(const char *path, const char *tenant, const char *name, int capacity, int i) {
    char id[32];
    simba *s;
    simba_lock l;
    simba_event ev;
    int pos, code = 0;
    simba_backend b;
    snprintf(id, sizeof id, "p%d", i);
    sq_logger.func = sq_log_to_shared;
    sq_logger.user = (void *)(intptr_t)i;
    sq_logger.level = SIMBA_LOG_WARN;
    if (!(s = sq_client_b(path, tenant, id, SQ_MANY_TTL, 0, &b))) _exit(3);
    l = sq_acquire(s, name, capacity, 1, 0, -1);
    if (!sq_expect(s, l, SIMBA_EVENT_ACQUIRED, 60000, &ev)) _exit(4);
    pos = __sync_fetch_and_add(&shared->n, 1);
    shared->order[pos] = i;
    shared->fence[i] = ev.fence;
    shared->reconnects[i] = sq_stats(b).reconnects;
    sq_note_max(__sync_add_and_fetch(&shared->inuse, 1));
    if (simba_hold_for(s, l, 5, &ev) != 0) code = 5;
    __sync_sub_and_fetch(&shared->inuse, 1);      /* no longer believed before the release */
    simba_release(s, l);
    if (!sq_expect(s, l, SIMBA_EVENT_RELEASED, 10000, NULL)) code = 6;
    simba_destroy(s);
    _exit(code);
}

/* One child's line of the report: its fence, reconnects and warnings. */
static void sq_report_child(const char *what, int c) {
    printf("  # %s child %d (fence %lld, %lld reconnects): %s\n", what, c, (long long)shared->fence[c],
           (long long)shared->reconnects[c], shared->log[c][0] ? shared->log[c] : "no warnings");
}

/* What the children around the first grant out of queue order saw. */
static void sq_report_out_of_turn(int pos, int nprocs) {
    int j;
    for (j = pos; j < nprocs && j < pos + 3; j++) {
        char what[32];
        snprintf(what, sizeof what, "grant %d went to", j);
        sq_report_child(what, shared->order[j]);
    }
    sq_report_child("its turn was", pos);
}

/* N processes queue behind a holder in a known order; then it releases.
   Never more holders than the capacity; grants (their fences) in queue order. */
static void sq_many(const char *file, int capacity, int nprocs) {
    char path[320], tenant[32];
    pid_t pids[SQ_MAX_PROCS];
    simba *s;
    simba_lock l;
    int i, bad = 0;
    sq_path(path, sizeof path, file);
    snprintf(tenant, sizeof tenant, "many%d", capacity);
    memset(shared, 0, sizeof *shared);
    s = sq_client(path, tenant, "gate", SQ_MANY_TTL, 0);
    CHECK(s);
    l = sq_acquire(s, "job", capacity, 0, 1, -1);   /* the whole capacity: everyone queues */
    CHECK(sq_expect(s, l, SIMBA_EVENT_ACQUIRED, 10000, NULL));
    for (i = 0; i < nprocs; i++) {
        fflush(stdout);
        pids[i] = fork();
        if (pids[i] == 0) { simba_abandon(s); sq_contender(path, tenant, "job", capacity, i); }
        CHECK(pids[i] > 0);
        CHECK(sq_wait_queued(s, "job", i + 2));     /* child i is queued before child i+1 starts */
    }
    CHECK_EQ(simba_release(s, l), SIMBA_OK);
    CHECK(sq_expect(s, l, SIMBA_EVENT_RELEASED, 10000, NULL));
    for (i = 0; i < nprocs; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) { printf("  # child %d: status %d\n", i, st); bad++; }
    }
    simba_destroy(s);
    CHECK_EQ(bad, 0);
    CHECK_EQ(shared->n, nprocs);
    printf("  # %d processes, capacity %d: at most %d held at once\n", nprocs, capacity, shared->max_inuse);
    CHECK(shared->max_inuse <= capacity);
    if (capacity == 1) {
        /* one at a time: the grants were made (fences) in the order they
           were seen; a later fence seen first means two believed at once */
        for (i = 1; i < nprocs; i++) CHECK(shared->fence[shared->order[i]] > shared->fence[shared->order[i - 1]]);
        for (i = 0; i < nprocs; i++) if (shared->order[i] != i) { sq_report_out_of_turn(i, nprocs); break; }
        for (i = 0; i < nprocs; i++) CHECK_EQ(shared->order[i], i);
    }
    for (i = 1; i < nprocs; i++) CHECK(shared->fence[i] > shared->fence[i - 1]);   /* FIFO by fence */
}

static void t_sqlite_processes_mutex(void) { sq_many("mutex.db", 1, 50); }
static void t_sqlite_processes_semaphore(void) { sq_many("sem.db", 3, 50); }

/* ---- a holder killed with -9, a holder stopped ---- */

/* Whether pidfd_open works here (not under valgrind 3.19, which fails it
   with ENOSYS; the backend then finds a dead holder by its re-checks). */
static int sq_pidfd_works(void) {
#if SIMBA__SQLITE_PIDFD
    int fd = pidfd_open(getpid(), 0);
    if (fd < 0) return 0;
    close(fd);
    return 1;
#else
    return 0;
#endif
}

/* A holder process: acquires, tells the parent (one byte on fd), then holds
   until an event comes, which it reports as two bytes: type, error. */
static void sq_holder(const char *path, const char *tenant, int ttl, int transition, int fd) {
    simba *s = sq_client(path, tenant, "holder", ttl, transition);
    simba_lock l;
    simba_event ev;
    unsigned char msg[2];
    if (!s) _exit(3);
    l = sq_acquire(s, "x", 1, 1, 0, -1);
    if (!sq_expect(s, l, SIMBA_EVENT_ACQUIRED, 10000, &ev)) _exit(4);
    if (write(fd, "A", 1) != 1) _exit(5);
    while (simba_hold_for(s, l, 60000, &ev) == 0) {}
    msg[0] = (unsigned char)ev.type;
    msg[1] = (unsigned char)ev.error;
    if (write(fd, msg, 2) != 2) _exit(6);
    simba_abandon(s);
    _exit(0);
}

static int sq_read(int fd, void *buf, int n, int ms) {
    struct pollfd p;
    p.fd = fd;
    p.events = POLLIN;
    if (poll(&p, 1, ms) != 1) return 0;
    return (int)read(fd, buf, (size_t)n) == n;
}

static pid_t sq_start_holder(const char *path, const char *tenant, int ttl, int transition, int *rfd) {
    int p[2];
    pid_t pid;
    char c;
    if (pipe(p) != 0) return -1;
    fflush(stdout);
    if ((pid = fork()) == 0) { close(p[0]); sq_holder(path, tenant, ttl, transition, p[1]); }
    close(p[1]);
    if (pid < 0 || !sq_read(p[0], &c, 1, 10000) || c != 'A') { close(p[0]); return -1; }
    *rfd = p[0];
    return pid;
}

/* The default lease (16 s): a holder killed with -9 is purged as soon as its
   waiter's pidfd fires (its mark and its process are gone), not by its lease. */
static void t_sqlite_kill9_holder(void) {
    char path[320];
    int fd, st;
    pid_t pid;
    simba *s;
    simba_lock l;
    simba_event ev;
    struct simba_sqlite_stats stats;
    simba_backend b;
    sq_path(path, sizeof path, "kill9.db");
    pid = sq_start_holder(path, "k9", 0, 0, &fd);
    CHECK(pid > 0);
    s = sq_client_b(path, "k9", "waiter", 0, 0, &b);
    CHECK(s);
    l = sq_acquire(s, "x", 1, 1, 0, -1);
    CHECK(sq_wait_queued(s, "x", 2));
    kill(pid, SIGKILL);                          /* not reaped yet: a zombie */
    CHECK(sq_expect(s, l, SIMBA_EVENT_ACQUIRED, 15000, &ev));
    stats = sq_stats(b);
    printf("  # purged_dead %llu, purged_expired %llu, pidfd_fired %llu\n", (unsigned long long)stats.purged_dead,
           (unsigned long long)stats.purged_expired, (unsigned long long)stats.pidfd_fired);
    waitpid(pid, &st, 0);
    close(fd);
    simba_destroy(s);
    CHECK(stats.purged_dead >= 1);
    CHECK_EQ(stats.purged_expired, 0);
    if (sq_pidfd_works()) CHECK(stats.pidfd_fired >= 1);
    else printf("  # pidfd_open fails here (valgrind has no pidfds): the re-check found the holder dead\n");
}

/* Every descriptor a client has is close-on-exec (the core no longer checks
   the backend's, simba_backend_own_fds): what its pollfds reports (the wake
   socket; the pidfd of a holder it waits behind) and every file of the
   database it keeps open (SQLite's, the sidecar with its mark, the O_PATH
   one): an exec'd job inherits none of them. */
static void t_sqlite_fds_close_on_exec(void) {
    char path[320], fdpath[64], target[512];
    struct pollfd fds[16];
    int fd, st, n, i, seen = 0, inherited = 0;
    pid_t pid;
    simba *s;
    DIR *d;
    struct dirent *de;
    sq_path(path, sizeof path, "cloexec.db");
    pid = sq_start_holder(path, "cx", 0, 0, &fd);
    CHECK(pid > 0);
    s = sq_client(path, "cx", "waiter", 0, 0);
    CHECK(s);
    sq_acquire(s, "x", 1, 1, 0, -1);
    CHECK(sq_wait_queued(s, "x", 2));
    n = simba_pollfds(s, fds, 16);
    for (i = 0; i < n && i < 16; i++) inherited += !(fcntl(fds[i].fd, F_GETFD) & FD_CLOEXEC);
    if ((d = opendir("/proc/self/fd")) != NULL) {
        while ((de = readdir(d)) != NULL) {
            ssize_t k;
            snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", atoi(de->d_name));
            if ((k = readlink(fdpath, target, sizeof target - 1)) <= 0) continue;
            target[k] = 0;
            if (strncmp(target, path, strlen(path)) != 0) continue;
            seen++;
            if (!(fcntl(atoi(de->d_name), F_GETFD) & FD_CLOEXEC)) {
                printf("  # %s is inherited by an exec\n", target);
                inherited++;
            }
        }
        closedir(d);
    }
    printf("  # %d fds to poll, %d descriptors of the database's files\n", n, seen);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(fd);
    simba_destroy(s);
    CHECK(n >= (sq_pidfd_works() ? 2 : 1));
    CHECK(seen >= 4);   /* the file (SQLite's and the O_PATH one), -wal, -shm, the sidecar */
    CHECK_EQ(inherited, 0);
}

/* A holder killed with -9 before anyone waits: the next process (which may
   take the dead one's byte in the sidecar) finds it dead at once, so even a
   try-lock succeeds under the default 16 s lease. */
static void t_sqlite_dead_holder_try(void) {
    char path[320];
    int fd, st;
    pid_t pid;
    simba *s;
    sq_path(path, sizeof path, "dead.db");
    pid = sq_start_holder(path, "dead", 0, 0, &fd);
    CHECK(pid > 0);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(fd);
    s = sq_client(path, "dead", "next", 0, 0);
    CHECK(s);
    CHECK(sq_expect(s, sq_acquire(s, "x", 1, 1, 0, 0), SIMBA_EVENT_ACQUIRED, 5000, NULL));
    simba_destroy(s);
}

/* The first column of the first row of `sql` on the file at `path`, run
   through a connection of its own (white-box; -1: no row or an error). */
static long long sq_sql_num(const char *path, const char *sql) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK && sqlite3_busy_timeout(db, 5000) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
        else if (rc == SQLITE_DONE) v = sqlite3_changes(db);
    }
    if (v < 0) printf("  # %s: %s\n", sql, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* Clients a and b of tenant "row" on a new file `file` of this run's
   directory (its path into path), a holding "x" (its ACQUIRED into *ev):
   the start of the tests of a hold kept in a resource's row. 1 if so. */
static int sq_row_pair(const char *file, char *path, size_t cap, simba **a, simba **b, simba_lock *la,
                       simba_event *ev) {
    sq_path(path, cap, file);
    *a = sq_client(path, "row", "a", 0, 0);
    *b = sq_client(path, "row", "b", 0, 0);
    if (!*a || !*b) return 0;
    *la = sq_acquire(*a, "x", 1, 1, 0, -1);
    return sq_expect(*a, *la, SIMBA_EVENT_ACQUIRED, 5000, ev);
}

/* An uncontended hold is kept in its resource's row, with no entry row; a
   second request on the name turns it into the queue's head entry first:
   the holder keeps its lock and its fence, the waiter waits behind it and
   is granted when it releases, with a higher fence. */
static void t_sqlite_hold_in_row_meets_a_queue(void) {
    char path[320];
    simba *a, *b;
    simba_lock la, lb;
    simba_event ev;
    int64_t fa;
    CHECK(sq_row_pair("row-queue.db", path, sizeof path, &a, &b, &la, &ev));
    fa = ev.fence;
    CHECK_EQ(sq_sql_num(path, "SELECT count(*) FROM entries"), 0);
    CHECK_EQ(sq_sql_num(path, "SELECT hfence FROM resources WHERE tenant='row' AND name=CAST('x' AS BLOB)"), fa);
    lb = sq_acquire(b, "x", 1, 1, 0, -1);
    CHECK(sq_wait_queued(b, "x", 2));
    CHECK_EQ(sq_sql_num(path, "SELECT count(*) FROM resources WHERE hsession IS NOT NULL"), 0);
    CHECK_EQ(sq_sql_num(path, "SELECT fence FROM entries WHERE tenant='row' ORDER BY seq LIMIT 1"), fa);
    CHECK(simba_valid_ms(a, la) > 0);
    CHECK(!sq_expect(b, lb, SIMBA_EVENT_ACQUIRED, 300, NULL));
    simba_release(a, la);
    CHECK(sq_expect(a, la, SIMBA_EVENT_RELEASED, 5000, NULL));
    CHECK(sq_expect(b, lb, SIMBA_EVENT_ACQUIRED, 5000, &ev));
    CHECK(ev.fence > fa);
    simba_destroy(a);
    simba_destroy(b);
}

/* A hold in a resource's row is its session's, as that session was when
   it took it: the session's row made again under its id (another opened,
   as after a CLOSE and an OPEN of the same id) does not own it, so the hold
   is dead and the next request is granted at once (a purge deletes entry
   rows only; the hold is dropped by whoever reads the row next). */
static void t_sqlite_hold_in_row_of_an_ended_session(void) {
    char path[320];
    simba *a, *b;
    simba_lock la;
    CHECK(sq_row_pair("row-ended.db", path, sizeof path, &a, &b, &la, NULL));
    CHECK_EQ(sq_sql_num(path, "UPDATE sessions SET opened=opened+1 WHERE tenant='row' AND id="
                              "(SELECT hsession FROM resources WHERE tenant='row' AND name=CAST('x' AS BLOB))"), 1);
    CHECK(sq_expect(b, sq_acquire(b, "x", 1, 1, 0, 0), SIMBA_EVENT_ACQUIRED, 5000, NULL));
    CHECK_EQ(sq_sql_num(path, "SELECT count(*) FROM entries WHERE session LIKE 'a~%'"), 0);
    simba_destroy(a);
    simba_destroy(b);
}

/* A RELEASE lets go of a hold kept in a resource's row only when the hold
   is its request's, of its session: the row made to name another request
   (of the same session), then another session, keeps the hold through the
   release, and the next request is not granted. */
static void t_sqlite_hold_in_row_release_is_its_own(void) {
    static const char *const forge[] = {
        "UPDATE resources SET hrequest=hrequest||'-another' WHERE tenant='row' AND hsession IS NOT NULL",
        "UPDATE resources SET hsession=(SELECT id FROM sessions WHERE tenant='row' AND id LIKE 'b~%'),"
        " hopened=(SELECT opened FROM sessions WHERE tenant='row' AND id LIKE 'b~%')"
        " WHERE tenant='row' AND hsession IS NOT NULL"
    };
    char path[320], name[8];
    simba *a, *b;
    simba_lock la;
    int k;
    sq_path(path, sizeof path, "row-own.db");
    a = sq_client(path, "row", "a", 0, 0);
    b = sq_client(path, "row", "b", 0, 0);
    CHECK(a && b);
    CHECK(sq_wait_queued(b, "y", 0));   /* b's session row is there */
    for (k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "own%d", k);
        la = sq_acquire(a, name, 1, 1, 0, -1);
        CHECK(sq_expect(a, la, SIMBA_EVENT_ACQUIRED, 5000, NULL));
        CHECK_EQ(sq_sql_num(path, forge[k]), 1);
        simba_release(a, la);
        CHECK(sq_expect(a, la, SIMBA_EVENT_RELEASED, 5000, NULL));
        CHECK_EQ(sq_sql_num(path, "SELECT count(*) FROM resources WHERE tenant='row' AND hsession IS NOT NULL"), 1);
        CHECK_EQ(sq_sql_num(path, "UPDATE resources SET hsession=NULL WHERE tenant='row' AND hsession IS NOT NULL"), 1);
    }
    simba_destroy(a);
    simba_destroy(b);
}

/* DELETE tells a holder whose hold is kept in the resource's row at once
   (a datagram), as it tells the holders of entries: LOST comes in well under
   the holder's keepalive period, which would otherwise be how it learns. */
static void t_sqlite_hold_in_row_told_of_delete(void) {
    char path[320];
    simba *a, *b;
    simba_lock la;
    simba_event ev;
    int64_t t0;
    CHECK(sq_row_pair("row-delete.db", path, sizeof path, &a, &b, &la, NULL));
    t0 = h_real_ms();
    CHECK(sq_expect(b, simba_delete(b, "x", NULL), SIMBA_EVENT_DONE, 5000, NULL));
    CHECK(sq_expect(a, la, SIMBA_EVENT_LOST, 1000, &ev));
    printf("  # LOST %lld ms after the DELETE was asked\n", (long long)(h_real_ms() - t0));
    CHECK_EQ(ev.error, SIMBA_LOST_STOLEN);
    simba_destroy(a);
    simba_destroy(b);
}

/* After a reboot (another boot id in the file) the first process to open
   it removes every session and every hold, the holds kept in resource rows
   too: no process of the old boot lives. Capacities and fences stay. */
static void t_sqlite_reboot_clears_holds(void) {
    char path[320];
    simba *a, *b;
    sq_path(path, sizeof path, "reboot.db");
    a = sq_client(path, "boot", "a", 0, 0);
    CHECK(a);
    CHECK(sq_expect(a, sq_acquire(a, "x", 1, 1, 0, -1), SIMBA_EVENT_ACQUIRED, 5000, NULL));
    simba_destroy(a);   /* its CLOSE purges its entries; a hold in a row stays until read */
    CHECK_EQ(sq_sql_num(path, "SELECT count(*) FROM resources WHERE hsession IS NOT NULL"), 1);
    CHECK_EQ(sq_sql_num(path, "UPDATE meta SET v='an earlier boot' WHERE k='boot_id'"), 1);
    b = sq_client(path, "boot", "b", 0, 0);
    CHECK(b);
    CHECK(sq_wait_queued(b, "y", 0));   /* connected: the setup ran */
    CHECK_EQ(sq_sql_num(path, "SELECT count(*) FROM resources WHERE hsession IS NOT NULL"), 0);
    CHECK_EQ(sq_sql_num(path, "SELECT count(*) FROM resources WHERE name=CAST('x' AS BLOB) AND counter > 0"), 1);
    simba_destroy(b);
}

/* The counters of where a batch's time goes: an uncontended acquire and
   release are two transactions, each with its statements (BEGIN and COMMIT
   among them) and one WAL page (the resource's row, which keeps the hold). */
static void t_sqlite_stats_cycle(void) {
    char path[320];
    simba_backend b;
    simba *s;
    simba_lock l;
    struct simba_sqlite_stats st0, st;
    sq_path(path, sizeof path, "stats.db");
    s = sq_client_b(path, "stats", "counter", 0, 0, &b);
    CHECK(s);
    l = sq_acquire(s, "x", 1, 1, 0, -1);   /* the session's OPEN and the file's setup first */
    CHECK(sq_expect(s, l, SIMBA_EVENT_ACQUIRED, 5000, NULL));
    simba_release(s, l);
    CHECK(sq_expect(s, l, SIMBA_EVENT_RELEASED, 5000, NULL));
    st0 = sq_stats(b);
    l = sq_acquire(s, "x", 1, 1, 0, -1);
    CHECK(sq_expect(s, l, SIMBA_EVENT_ACQUIRED, 5000, NULL));
    simba_release(s, l);
    CHECK(sq_expect(s, l, SIMBA_EVENT_RELEASED, 5000, NULL));
    st = sq_stats(b);
    printf("  # one cycle: %llu transactions, %llu statements, %llu WAL pages, %lld us in batches\n",
           (unsigned long long)(st.transactions - st0.transactions), (unsigned long long)(st.statements - st0.statements),
           (unsigned long long)(st.pages_written - st0.pages_written), (long long)(st.batch_us - st0.batch_us));
    CHECK_EQ(st.transactions - st0.transactions, 2);
    /* BEGIN, the acquire's one read (name, grace, session), the hold, COMMIT; BEGIN, the release, COMMIT */
    CHECK_EQ(st.statements - st0.statements, 7);
    CHECK_EQ(st.pages_written - st0.pages_written, 2);   /* the hold in the resource's row: one page each */
    CHECK(st.batch_us >= st0.batch_us);
    CHECK(st.batch_us >= st.longest_batch_us);
    simba_destroy(s);
}

static void sq_write_file(const char *path, const char *text);

/* n uncontended cycles on `name`: 1 if every one was ACQUIRED and RELEASED. */
static int sq_cycles(simba *s, const char *name, int n) {
    int i;
    for (i = 0; i < n; i++) {
        simba_lock l = sq_acquire(s, name, 1, 1, 0, -1);
        if (!sq_expect(s, l, SIMBA_EVENT_ACQUIRED, 5000, NULL)) return 0;
        simba_release(s, l);
        if (!sq_expect(s, l, SIMBA_EVENT_RELEASED, 5000, NULL)) return 0;
    }
    return 1;
}

/* Pages in the WAL file of `path` (by its size; -1: no WAL file). */
static long sq_wal_pages(const char *path) {
    char wal[400];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", path);
    return stat(wal, &st) == 0 ? (long)(st.st_size / 4096) : -1;
}

/* checkpoint_pages < 0: no checkpoint inside simba_tick, however large the
   WAL grows; simba_sqlite_checkpoint copies it back from outside the loop,
   and the client goes on. */
static void t_sqlite_checkpoint_outside_tick(void) {
    char path[320], msg[256];
    simba_sqlite_desc sd;
    simba_backend b;
    simba *s;
    struct simba_sqlite_stats st;
    int wal = 0, copied = 0;
    sq_path(path, sizeof path, "ckpt-off.db");
    memset(&sd, 0, sizeof sd);
    sd.path = path;
    sd.checkpoint_pages = -1;
    s = sq_client_desc(&sd, "ckpt", "off", 0, 0, &b);
    CHECK(s);
    CHECK(sq_cycles(s, "x", 750));            /* 2 WAL pages a cycle: past SQLite's 1000 */
    st = sq_stats(b);
    printf("  # 750 cycles: %llu checkpoints inside a tick, WAL %ld pages\n", (unsigned long long)st.checkpoints,
           sq_wal_pages(path));
    CHECK_EQ(st.checkpoints, 0);
    CHECK(sq_wal_pages(path) >= 1200);
    CHECK_EQ(simba_sqlite_checkpoint(path, &wal, &copied, msg, sizeof msg), SIMBA_OK);
    printf("  # simba_sqlite_checkpoint: %d WAL pages, %d copied back\n", wal, copied);
    CHECK(wal >= 1200);
    CHECK_EQ(copied, wal);                    /* the client holds no read transaction between ticks */
    CHECK(sq_cycles(s, "x", 10));
    CHECK_EQ(sq_stats(b).checkpoints, 0);
    simba_destroy(s);
}

/* The default checkpoints inside the tick as SQLite would (every 1000 WAL
   pages), checkpoint_pages another size; both counted. */
static void t_sqlite_checkpoint_in_tick(void) {
    char path[320];
    simba_sqlite_desc sd;
    simba_backend b;
    simba *s;
    struct simba_sqlite_stats st;
    sq_path(path, sizeof path, "ckpt-default.db");
    s = sq_client_b(path, "ckpt", "default", 0, 0, &b);
    CHECK(s);
    CHECK(sq_cycles(s, "x", 750));
    st = sq_stats(b);
    printf("  # default, 750 cycles: %llu checkpoints, %lld us, WAL %ld pages\n", (unsigned long long)st.checkpoints,
           (long long)st.checkpoint_us, sq_wal_pages(path));
    CHECK(st.checkpoints >= 1);
    CHECK(sq_wal_pages(path) <= 1100);        /* restarted after a checkpoint, never past ~1000 pages */
    simba_destroy(s);

    sq_path(path, sizeof path, "ckpt-100.db");
    memset(&sd, 0, sizeof sd);
    sd.path = path;
    sd.checkpoint_pages = 100;
    s = sq_client_desc(&sd, "ckpt", "small", 0, 0, &b);
    CHECK(s);
    CHECK(sq_cycles(s, "x", 200));
    st = sq_stats(b);
    printf("  # every 100 pages, 200 cycles: %llu checkpoints, WAL %ld pages\n", (unsigned long long)st.checkpoints,
           sq_wal_pages(path));
    CHECK(st.checkpoints >= 3);
    CHECK(st.checkpoint_us > 0 && st.checkpoint_us <= st.batch_us);
    CHECK(sq_wal_pages(path) <= 120);
    simba_destroy(s);
}

/* Bad input to the checkpoint and its options: a clear code, no crash. */
static void t_sqlite_checkpoint_bad_input(void) {
    char path[320], msg[256], url[400];
    simba_sqlite_desc sd;
    simba_desc d;
    simba_error err;
    simba_url_error uerr;
    simba *s;
    sqlite3 *db;
    int wal = 7, copied = 7;
    CHECK_EQ(simba_sqlite_checkpoint(NULL, &wal, &copied, msg, sizeof msg), SIMBA_EINVAL);
    CHECK(wal == -1 && copied == -1);
    CHECK_EQ(simba_sqlite_checkpoint("", NULL, NULL, NULL, 0), SIMBA_EINVAL);
    sq_path(path, sizeof path, "ckpt-missing.db");
    CHECK_EQ(simba_sqlite_checkpoint(path, NULL, NULL, msg, sizeof msg), SIMBA_ENOTFOUND);
    printf("  # missing: %s\n", msg);
    sq_path(path, sizeof path, "ckpt-text.db");
    sq_write_file(path, "this is not a database, only text that looks like nothing SQLite knows. ");
    CHECK_EQ(simba_sqlite_checkpoint(path, NULL, NULL, msg, sizeof msg), SIMBA_EPROTO);
    printf("  # text: %s\n", msg);
    sq_path(path, sizeof path, "ckpt-foreign.db");
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "CREATE TABLE accounts(id INTEGER PRIMARY KEY, owner TEXT)", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK_EQ(simba_sqlite_checkpoint(path, NULL, NULL, msg, sizeof msg), SIMBA_EPROTO);
    CHECK(strstr(msg, "not a simba lock file") != NULL);
    printf("  # foreign: %s\n", msg);
    memset(&sd, 0, sizeof sd);
    sd.path = path;
    sd.checkpoint_pages = 1000001;
    memset(&d, 0, sizeof d);
    d.backend = simba_sqlite(&sd);
    s = simba_create(&d, &err);
    CHECK(s == NULL && err.code == SIMBA_EINVAL && strstr(err.message, "checkpoint_pages") != NULL);
    snprintf(url, sizeof url, "sqlite://%s/ckpt-url.db?checkpoint=off", dir);
    s = simba_create_url(url, NULL, &uerr);
    CHECK(s != NULL);
    simba_destroy(s);
    snprintf(url, sizeof url, "sqlite://%s/ckpt-url.db?checkpoint=0", dir);
    CHECK(simba_create_url(url, NULL, &uerr) == NULL && uerr.code == SIMBA_EINVAL && strcmp(uerr.part, "checkpoint") == 0);
    printf("  # checkpoint=0: %s\n", uerr.msg);
    snprintf(url, sizeof url, "sqlite://%s/ckpt-url.db?checkpoint=12abc", dir);
    CHECK(simba_create_url(url, NULL, &uerr) == NULL && uerr.code == SIMBA_EINVAL);
}

/* A stopped holder keeps its mark: it is purged by its lease only, and when
   it runs again its first event is LOST (the local safety rule). */
static void t_sqlite_sigstop_holder(void) {
    char path[320];
    unsigned char msg[2] = {0, 0};
    int fd, st;
    pid_t pid;
    simba *s;
    simba_lock l;
    struct simba_sqlite_stats stats;
    simba_backend b;
    sq_path(path, sizeof path, "stop.db");
    pid = sq_start_holder(path, "stop", 1500, 1000, &fd);
    CHECK(pid > 0);
    kill(pid, SIGSTOP);
    s = sq_client_b(path, "stop", "waiter", 1500, 1000, &b);
    CHECK(s);
    l = sq_acquire(s, "x", 1, 1, 0, -1);
    CHECK(sq_expect(s, l, SIMBA_EVENT_ACQUIRED, 15000, NULL));
    stats = sq_stats(b);
    kill(pid, SIGCONT);
    CHECK(sq_read(fd, msg, 2, 10000));
    waitpid(pid, &st, 0);
    close(fd);
    simba_destroy(s);
    printf("  # purged_dead %llu, purged_expired %llu; the holder's first event: %s\n",
           (unsigned long long)stats.purged_dead, (unsigned long long)stats.purged_expired,
           simba_event_name((simba_event_type)msg[0]));
    CHECK_EQ(stats.purged_dead, 0);
    CHECK(stats.purged_expired >= 1);
    CHECK_EQ(msg[0], SIMBA_EVENT_LOST);
    CHECK_EQ(msg[1], SIMBA_LOST_EXPIRED);
}

/* ---- files that must be refused ---- */

static void sq_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    int i;
    if (!f) return;
    for (i = 0; i < 200; i++) fputs(text, f);
    fclose(f);
}

/* A client on a bad file reports DISCONNECTED with code and words; it never grants. */
static int sq_refused(const char *path, int code, const char *words) {
    simba *s = sq_client(path, "bad", "c", 0, 0);
    simba_event ev;
    int ok;
    if (!s) return 0;
    simba_acquire(s, &(simba_lock_desc){ .name = "x", .wait_ms = -1 });
    ok = sq_disconnected(s, 5000, &ev);
    if (ok) printf("  # %s: %s\n", simba_strerror(ev.error), ev.message);
    else printf("  # no DISCONNECTED event\n");
    simba_destroy(s);
    return ok && ev.error == code && strstr(ev.message, words) != NULL;
}

static void t_sqlite_foreign_file(void) {
    char path[320];
    sqlite3 *db;
    sq_path(path, sizeof path, "foreign.db");
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "CREATE TABLE accounts(id INTEGER PRIMARY KEY, owner TEXT)", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK(sq_refused(path, SIMBA_EPROTO, "something else"));
}

/* A lock file of another format (an earlier simba's: its rows mean other
   things) is refused in words, and left as it was. */
static void t_sqlite_other_format(void) {
    char path[320];
    sqlite3 *db;
    sq_path(path, sizeof path, "format5.db");
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "CREATE TABLE meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
                           "INSERT INTO meta(k,v) VALUES('format','simba-sqlite 5')", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK(sq_refused(path, SIMBA_EPROTO, "was made by another version of simba (this one reads 'simba-sqlite 6')"));
    CHECK_EQ(sq_sql_num(path, "SELECT count(*) FROM meta WHERE k='format' AND v='simba-sqlite 5'"), 1);
}

static void t_sqlite_corrupt_file(void) {
    char path[320];
    sq_path(path, sizeof path, "corrupt.db");
    sq_write_file(path, "this is not a database, only text that looks like nothing SQLite knows. ");
    CHECK(sq_refused(path, SIMBA_EPROTO, "corrupt or not an SQLite file"));
}

/* Entries written by another program whose session column names no
   session simba could have made: a string longer than SIMBA_MAX_SESSION,
   a BLOB, a string with a NUL in it. The rule's walk drops each by its key
   (no purge by that id could ever remove it) and grants the name. In a
   child process, so that a walk that would loop inside its write
   transaction fails the test instead of hanging the suite. */
static void t_sqlite_garbage_entries_dropped(void) {
    char path[320], sql[1024], longsess[301];
    simba *s;
    simba_lock l;
    pid_t pid;
    int st = -1, done = 0;
    int64_t end;
    sq_path(path, sizeof path, "garbage.db");
    s = sq_client(path, "g", "setup", 1500, 1000);
    CHECK(s);
    l = sq_acquire(s, "other", 1, 1, 0, -1);
    CHECK(sq_expect(s, l, SIMBA_EVENT_ACQUIRED, 5000, NULL));
    simba_destroy(s);
    memset(longsess, 'q', 300);
    longsess[300] = 0;
    snprintf(sql, sizeof sql, "INSERT INTO entries(tenant,name,seq,request,session,weight,fence,watch,nres) VALUES"
             "('g',CAST('x' AS BLOB),1,'r1','%s',1,5,0,1),"
             "('g',CAST('x' AS BLOB),2,'r2',CAST('blob' AS BLOB),1,6,0,1),"
             "('g',CAST('x' AS BLOB),3,'r3','nul'||char(0)||'in',1,7,0,1)", longsess);
    CHECK(sq_sql_num(path, sql) == 3);
    if ((pid = fork()) == 0) {
        simba *c = sq_client(path, "g", "victim", 1500, 1000);
        simba_lock lx;
        if (!c) _exit(2);
        lx = sq_acquire(c, "x", 1, 1, 0, 2000);
        _exit(sq_expect(c, lx, SIMBA_EVENT_ACQUIRED, 4000, NULL) ? 0 : 1);
    }
    end = h_real_ms() + 8000;
    while (h_real_ms() < end && !done) {
        if (waitpid(pid, &st, WNOHANG) == pid) done = 1;
        else { struct timespec ts = {0, 20000000}; nanosleep(&ts, NULL); }
    }
    if (!done) { kill(pid, SIGKILL); waitpid(pid, &st, 0); }
    printf("  # the acquire behind the bad entries: %s\n",
           !done ? "no answer in 8 s" : WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ACQUIRED" : "not granted");
    CHECK(done && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(sq_sql_num(path, "SELECT COUNT(*) FROM entries WHERE request IN ('r1','r2','r3')") == 0);
}

static void t_sqlite_network_fs_refused(void) {
    /* no NFS server here: the table of refused file systems (statfs f_type) */
    CHECK(simba__sqlite_fs_refused(0x6969) != NULL);              /* NFS */
    CHECK(simba__sqlite_fs_refused((long)0xFF534D42UL) != NULL);  /* CIFS */
    CHECK(simba__sqlite_fs_refused(0x65735546) != NULL);          /* FUSE */
    CHECK(simba__sqlite_fs_refused(0x01021994) == NULL);          /* tmpfs */
    CHECK(simba__sqlite_fs_refused(0xEF53) == NULL);              /* ext4 */
    CHECK(simba__sqlite_fs_refused(0x58465342) == NULL);          /* xfs */
}

/* The same on a real FUSE mount (bindfs of a local directory: locks that
   SQLite cannot trust there all the same), when this machine can mount one
   (bindfs installed, /dev/fuse usable; `make deps` installs bindfs): the
   client says so in a DISCONNECTED event and grants nothing. Where no FUSE
   mount can be made, the test says so and counts as neither pass nor fail. */
static void t_sqlite_fuse_mount_refused(void) {
    char src[320], mnt[320], path[400], cmd[900];
    int mounted;
    sq_path(src, sizeof src, "fuse-src");
    sq_path(mnt, sizeof mnt, "fuse-mnt");
    CHECK(mkdir(src, 0755) == 0 && mkdir(mnt, 0755) == 0);
    snprintf(cmd, sizeof cmd, "bindfs '%s' '%s' 2>/dev/null", src, mnt);
    mounted = system(cmd) == 0;
    if (!mounted) { h_skip("no FUSE mount here (bindfs missing or /dev/fuse unusable)"); return; }
    snprintf(path, sizeof path, "%s/locks.db", mnt);
    CHECK(sq_refused(path, SIMBA_EUNSUPPORTED, "FUSE"));
    snprintf(cmd, sizeof cmd, "fusermount -u '%s' 2>/dev/null || umount '%s'", mnt, mnt);
    CHECK(system(cmd) == 0);
}

/* Runs fn(arg) in a child as an unprivileged user (nobody when we are
   root): the result is its exit status (0 = passed). */
static int sq_as_user(int (*fn)(const char *), const char *arg) {
    pid_t pid;
    int st = 0;
    fflush(stdout);
    if ((pid = fork()) == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(7);
        _exit(fn(arg) ? 0 : 1);
    }
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

static int sq_read_only_child(const char *path) { return sq_refused(path, SIMBA_EAUTH, "read-only"); }
static int sq_no_dir_child(const char *path) { return sq_refused(path, SIMBA_EAUTH, "Permission denied"); }

static void t_sqlite_read_only_file(void) {
    char sub[320], path[400], side[420];
    simba *s;
    sq_path(sub, sizeof sub, "ro");
    CHECK(mkdir(sub, 0777) == 0 && chmod(sub, 0777) == 0 && chmod(dir, 0755) == 0);
    snprintf(path, sizeof path, "%s/locks.db", sub);
    snprintf(side, sizeof side, "%s-simba", path);
    s = sq_client(path, "ro", "maker", 0, 0);                 /* makes the file */
    CHECK(s);
    CHECK(sq_expect(s, sq_acquire(s, "x", 1, 1, 0, 0), SIMBA_EVENT_ACQUIRED, 5000, NULL));
    simba_destroy(s);
    CHECK(chmod(path, 0444) == 0 && chmod(side, 0666) == 0);
    CHECK_EQ(sq_as_user(sq_read_only_child, path), 0);
}

static void t_sqlite_unwritable_dir(void) {
    char sub[320], path[400];
    sq_path(sub, sizeof sub, "nowrite");
    CHECK(mkdir(sub, 0555) == 0 && chmod(sub, 0555) == 0 && chmod(dir, 0755) == 0);
    snprintf(path, sizeof path, "%s/locks.db", sub);
    CHECK_EQ(sq_as_user(sq_no_dir_child, path), 0);
}

/* The file deleted, replaced or renamed away under a running holder: the
   holder is told (DISCONNECTED with the cause, then LOST), and a client
   that makes the file again grants nothing before that holder's hold has
   surely ended. Renamed away, the file keeps its name (another one), so
   the holder's next operation does not notice it: only the walk of the
   path before each renewal does. Its acquire after the rename may still be
   granted in the old file; that hold too must be lost first. */
enum { SQ_DELETED, SQ_RENAMED_OVER, SQ_RENAMED_AWAY };

static void sq_move_away(const char *path, const char *away) {
    char from[360], to[360];
    const char *ext[3] = { "", "-wal", "-shm" };
    int i;
    for (i = 0; i < 3; i++) {   /* the three together: SQLite's files of one database */
        snprintf(from, sizeof from, "%s%s", path, ext[i]);
        snprintf(to, sizeof to, "%s%s", away, ext[i]);
        CHECK(rename(from, to) == 0);
    }
}

static void sq_replaced(int how) {
    char other[320];
    sq_files f;
    static h_client ca, cb, cc;   /* megabytes of event log each: not on the stack */
    h_client *cl[2];
    simba_lock la, lb, lz = { 0, 0 }, lbz = { 0, 0 };
    simba_event *e, *lost, *acq, ev;
    int64_t end;
    simba_backend ba;
    int ilost = -1, izlost = -1, iacq = -1, i, saw_cause = 0, z_held = 0, watched;
    memset(&ca, 0, sizeof ca); memset(&cb, 0, sizeof cb); memset(&cc, 0, sizeof cc);
    sq_files_of(&f, how == SQ_RENAMED_OVER ? "replaced.db" : how == SQ_DELETED ? "deleted.db" : "away.db");
    ca.s = sq_client_b(f.db, "rep", "a", 1500, 1000, &ba);
    CHECK(ca.s);
    la = sq_acquire(ca.s, "x", 1, 1, 0, -1);
    CHECK(sq_expect(ca.s, la, SIMBA_EVENT_ACQUIRED, 5000, NULL));
    watched = sq_stats(ba).file_watched;
    if (how == SQ_RENAMED_OVER) {   /* another simba file (a backup, say) moved over ours, as an admin
                            would: its user closed, our -wal and -shm removed with it (a main
                            file beside another file's -wal is SQLite's own hazard) */
        sq_path(other, sizeof other, "other.db");
        cc.s = sq_client(other, "rep", "c", 1500, 1000);
        CHECK(cc.s);
        CHECK(sq_expect(cc.s, sq_acquire(cc.s, "y", 1, 1, 0, -1), SIMBA_EVENT_ACQUIRED, 5000, NULL));
        simba_destroy(cc.s);
        cc.s = NULL;
        CHECK(rename(other, f.db) == 0);
        unlink(f.wal);
        unlink(f.shm);
    } else if (how == SQ_DELETED) {   /* noticed at the holder's next operation, not its next renewal */
        int told = 0;
        CHECK(unlink(f.db) == 0);
        unlink(f.wal);
        unlink(f.shm);
        lz = sq_acquire(ca.s, "z", 1, 1, 0, -1);
        cl[0] = &ca;
        h_run_for(cl, 1, 150);
        for (i = 0; i < ca.nlog; i++)
            if (ca.log[i].type == SIMBA_EVENT_DISCONNECTED && strstr(ca.log[i].message, "was deleted")) told = 1;
        CHECK(told);
        CHECK(!h_has(&ca, lz, SIMBA_EVENT_ACQUIRED));
    } else {
        sq_path(other, sizeof other, "moved-away.db");
        sq_move_away(f.db, other);
        /* without a watch of the file: granted in the file moved away, and
           LOST at the next renewal; with one: the rename is noticed at this
           acquire, which is then granted in the file made again at the path */
        lz = sq_acquire(ca.s, "z", 1, 1, 0, -1);
        CHECK(simba_wait(ca.s, lz, 5000, &ev) == 1);
        z_held = ev.type == SIMBA_EVENT_ACQUIRED;
        printf("  # the holder's acquire after the rename: %s\n", simba_event_name(ev.type));
    }
    cb.s = sq_client(f.db, "rep", "b", 1500, 1000);
    CHECK(cb.s);
    lb = sq_acquire(cb.s, "x", 1, 1, 0, -1);
    if (how == SQ_RENAMED_AWAY) lbz = sq_acquire(cb.s, "z", 1, 1, 0, -1);
    cl[0] = &ca;
    cl[1] = &cb;
    end = h_real_ms() + 15000;
    for (i = 0; h_real_ms() < end && iacq < 0; i++) {   /* rounds: the holder is ticked first in each */
        h_pump(cl, 2, 50);
        if (ilost < 0 && h_has(&ca, la, SIMBA_EVENT_LOST)) ilost = i;
        if (z_held && izlost < 0 && h_has(&ca, lz, SIMBA_EVENT_LOST)) izlost = i;
        if (h_has(&cb, lb, SIMBA_EVENT_ACQUIRED) || (lbz.id && h_has(&cb, lbz, SIMBA_EVENT_ACQUIRED))) iacq = i;
    }
    printf("  # LOST in round %d, the new grant in round %d\n", ilost, iacq);
    CHECK(ilost >= 0 && iacq >= ilost);
    if (z_held && !watched) CHECK(izlost >= 0 && iacq >= izlost);
    if (how == SQ_RENAMED_AWAY && watched) CHECK_EQ(ilost, 0);   /* noticed at the acquire, before the rounds */
    ilost = iacq = -1;
    for (i = 0; i < ca.nlog; i++) {
        e = &ca.log[i];
        if (e->type == SIMBA_EVENT_DISCONNECTED && (strstr(e->message, "was deleted") || strstr(e->message, "was replaced")))
            saw_cause = 1;
        if (e->type == SIMBA_EVENT_LOST && ilost < 0) ilost = i;
    }
    lost = ilost >= 0 ? &ca.log[ilost] : NULL;
    for (i = 0; i < cb.nlog; i++) if (cb.log[i].type == SIMBA_EVENT_ACQUIRED && iacq < 0) iacq = i;
    acq = iacq >= 0 ? &cb.log[iacq] : NULL;
    printf("  # holder: %s%d; new client: %s\n", lost ? "LOST " : "no LOST", lost ? lost->error : 0,
           acq ? "ACQUIRED" : "not granted");
    CHECK(saw_cause);
    CHECK(lost != NULL);
    CHECK(acq != NULL);
    /* the holder stopped believing before the new client was granted: its
       hold ends by the clock (valid_until) before the grant's own start */
    CHECK(simba_valid_ms(ca.s, la) == 0);
    simba_destroy(ca.s);
    simba_destroy(cb.s);
    if (cc.s) simba_destroy(cc.s);
}

/* Whether our file is still the one its path names is asked of the file
   system before an acquire's batch only when the kernel said something
   happened to the file (an inotify watch of it: a deletion, a rename over
   or away, a chmod). Uncontended acquires then check nothing; a chmod makes
   the next one walk the path once, and it is granted as before (the
   deletion and the renames: t_sqlite_file_deleted and the two after it).
   Without a watch (SIMBA_SQLITE_NO_INOTIFY, or no inotify instance left)
   every acquire asks whether the file still has a name. */
static void t_sqlite_file_checked_on_change(void) {
    char path[320];
    simba_backend b;
    simba *s;
    struct simba_sqlite_stats st0, st;
    sq_path(path, sizeof path, "watched.db");
    s = sq_client_b(path, "watch", "a", 0, 0, &b);
    CHECK(s);
    CHECK(sq_cycles(s, "x", 1));
    st0 = sq_stats(b);
    CHECK(sq_cycles(s, "x", 20));
    st = sq_stats(b);
    printf("  # 20 cycles: %llu checks of the file's name, %llu walks of its path (watched: %d)\n",
           (unsigned long long)(st.name_checks - st0.name_checks),
           (unsigned long long)(st.path_checks - st0.path_checks), st.file_watched);
#ifdef SIMBA_SQLITE_NO_INOTIFY
    CHECK_EQ(st.file_watched, 0);
    CHECK_EQ(st.name_checks - st0.name_checks, 20);
#else
    CHECK_EQ(st.file_watched, 1);
    CHECK_EQ(st.name_checks - st0.name_checks, 0);
    CHECK(chmod(path, 0640) == 0);
    st0 = sq_stats(b);
    CHECK(sq_cycles(s, "x", 3));
    st = sq_stats(b);
    printf("  # after a chmod, 3 cycles: %llu checks of the name, %llu walks of the path\n",
           (unsigned long long)(st.name_checks - st0.name_checks),
           (unsigned long long)(st.path_checks - st0.path_checks));
    CHECK_EQ(st.name_checks - st0.name_checks, 0);
    CHECK(st.path_checks - st0.path_checks >= 1);
#endif
    simba_destroy(s);
}

/* Ticks of a loop that never polls (simba_tick with no fds) until `l`
   has an event of `type` (a DISCONNECTED: any lock) or ms pass. */
static int sq_tick_alone_until(simba *s, simba_lock l, simba_event_type type, int ms, simba_event *got) {
    int64_t end = h_real_ms() + ms;
    while (h_real_ms() < end) {
        simba_event ev[8];
        struct timespec ts = {0, 1000000};
        int k = simba_tick(s, NULL, 0, ev, 8), i;
        for (i = 0; i < k; i++)
            if (ev[i].type == type && (type == SIMBA_EVENT_DISCONNECTED || (ev[i].lock.id == l.id && ev[i].lock.gen == l.gen))) {
                if (got) *got = ev[i];
                return 1;
            }
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* A loop that never polls: the backend asks the kernel about all of its
   descriptors itself at each tick, so the hand-off's datagram and the
   watch of the file reach it as they reach a loop that polls. */
static void t_sqlite_tick_without_poll(void) {
    sq_files f;
    simba_backend bb;
    simba *a, *b;
    simba_lock la, lb, ly;
    simba_event ev;
    struct simba_sqlite_stats st0;
    sq_files_of(&f, "nopoll.db");
    a = sq_client(f.db, "np", "a", 0, 0);
    b = sq_client_b(f.db, "np", "b", 0, 0, &bb);
    CHECK(a && b);
    la = sq_acquire(a, "x", 1, 1, 0, -1);
    CHECK(sq_expect(a, la, SIMBA_EVENT_ACQUIRED, 5000, NULL));
    lb = sq_acquire(b, "x", 1, 1, 0, -1);
    CHECK(!sq_tick_alone_until(b, lb, SIMBA_EVENT_ACQUIRED, 300, NULL));   /* its ENQUEUE: a waiter */
    CHECK_EQ(sq_queued(a, "x"), 2);
    st0 = sq_stats(bb);
    simba_release(a, la);
    CHECK(sq_expect(a, la, SIMBA_EVENT_RELEASED, 5000, NULL));
    CHECK(sq_tick_alone_until(b, lb, SIMBA_EVENT_ACQUIRED, 5000, NULL));
    CHECK(sq_stats(bb).datagrams_received > st0.datagrams_received);   /* woken, not found by a re-check */
    CHECK(unlink(f.db) == 0);
    ly = sq_acquire(b, "y", 1, 1, 0, -1);
    CHECK(sq_tick_alone_until(b, ly, SIMBA_EVENT_DISCONNECTED, 5000, &ev));
    printf("  # %s\n", ev.message);
    CHECK(strstr(ev.message, "was deleted") != NULL);
    simba_destroy(a);
    simba_destroy(b);
}

/* Run last: every client of the tests before is destroyed, and no watch
   of a file outlives its client (each would hold one of the user's
   inotify instances, fs.inotify.max_user_instances, until exit), over
   every reconnect of the conformance suite's kill hook and of the
   replaced files. */
static void t_sqlite_no_watch_left(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int left = 0;
    if (!d) { printf("  # no /proc/self/fd: nothing to count\n"); return; }
    while ((e = readdir(d)) != NULL) {
        char p[300], to[64];
        ssize_t n;
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        n = readlink(p, to, sizeof to - 1);
        if (n > 0) { to[n] = 0; left += strcmp(to, "anon_inode:inotify") == 0; }
    }
    closedir(d);
    printf("  # inotify descriptors left: %d\n", left);
    CHECK_EQ(left, 0);
}

/* The file deleted under a holder whose lease is longer than the lease of
   the process that makes the file again: that process's restart grace must
   cover the holder's lease, not only its own, or it grants while the
   holder, which notices at its next renewal (ttl / 3 after its last),
   still believes. The file is deleted just after the holder's renewal. */
static void t_sqlite_file_deleted_longer_lease(void) {
    sq_files f;
    static h_client ca, cb;
    h_client *cl[2];
    simba_backend ba;
    simba_lock la, lb;
    struct simba_sqlite_stats st0;
    int64_t end;
    int i, ilost = -1, iacq = -1;
    memset(&ca, 0, sizeof ca); memset(&cb, 0, sizeof cb);
    sq_files_of(&f, "longer.db");
    ca.s = sq_client_b(f.db, "ml", "a", 6000, 2000, &ba);   /* lease 8 s, a renewal every ~2 s */
    CHECK(ca.s);
    la = sq_acquire(ca.s, "x", 1, 1, 0, -1);
    CHECK(sq_expect(ca.s, la, SIMBA_EVENT_ACQUIRED, 5000, NULL));
    cl[0] = &ca;
    st0 = sq_stats(ba);
    end = h_real_ms() + 5000;
    while (sq_stats(ba).transactions == st0.transactions && h_real_ms() < end) h_pump(cl, 1, 20);
    CHECK(sq_stats(ba).transactions > st0.transactions);   /* a renewal just committed */
    CHECK(unlink(f.db) == 0);
    unlink(f.wal);
    unlink(f.shm);
    cb.s = sq_client(f.db, "ml", "b", 300, 200);          /* lease 500 ms: it makes the file again */
    CHECK(cb.s);
    lb = sq_acquire(cb.s, "x", 1, 1, 0, -1);
    cl[1] = &cb;
    end = h_real_ms() + 20000;
    for (i = 0; h_real_ms() < end && iacq < 0; i++) {
        h_pump(cl, 2, 50);
        if (ilost < 0 && h_has(&ca, la, SIMBA_EVENT_LOST)) ilost = i;
        if (h_has(&cb, lb, SIMBA_EVENT_ACQUIRED)) iacq = i;
    }
    printf("  # the holder's LOST in round %d, the new grant in round %d (rounds of 50 ms)\n", ilost, iacq);
    simba_destroy(ca.s);
    simba_destroy(cb.s);
    CHECK(ilost >= 0 && iacq >= ilost);
}

/* An old copy of the file (a backup taken while a client ran) moved back
   over the path under that client. The copy has the same path's tag and
   the client's session as it was; it is not made new, so nothing about it
   says "new" but the file itself. The client's hold taken after the copy
   must be LOST before a new client is granted that name in the copy, and
   its session must not live on in the copy: there it still holds what it
   has let go since (y), which would block y for as long as it runs. */
static void t_sqlite_file_restored(void) {
    char copy[320];
    sq_files f;
    static h_client ca, cc;
    h_client *cl[2];
    simba_lock ly, lx, cx, cy;
    sqlite3 *db, *to;
    sqlite3_backup *bk;
    int64_t end;
    int i, ilost = -1, ix = -1, iy = -1;
    memset(&ca, 0, sizeof ca); memset(&cc, 0, sizeof cc);
    sq_files_of(&f, "restored.db");
    sq_path(copy, sizeof copy, "restored-backup.db");
    ca.s = sq_client(f.db, "rs", "a", 1500, 1000);
    CHECK(ca.s);
    ly = sq_acquire(ca.s, "y", 1, 1, 0, -1);
    CHECK(sq_expect(ca.s, ly, SIMBA_EVENT_ACQUIRED, 5000, NULL));
    CHECK(sqlite3_open(f.db, &db) == SQLITE_OK && sqlite3_open(copy, &to) == SQLITE_OK);
    CHECK((bk = sqlite3_backup_init(to, "main", db, "main")) != NULL);   /* a consistent copy */
    CHECK(sqlite3_backup_step(bk, -1) == SQLITE_DONE);
    sqlite3_backup_finish(bk);
    sqlite3_close(to);
    sqlite3_close(db);
    simba_release(ca.s, ly);
    CHECK(sq_expect(ca.s, ly, SIMBA_EVENT_RELEASED, 5000, NULL));
    lx = sq_acquire(ca.s, "x", 1, 1, 0, -1);
    CHECK(sq_expect(ca.s, lx, SIMBA_EVENT_ACQUIRED, 5000, NULL));
    CHECK(rename(copy, f.db) == 0);                               /* the copy back, its -wal and -shm fresh */
    unlink(f.wal);
    unlink(f.shm);
    cc.s = sq_client(f.db, "rs", "c", 1500, 1000);
    CHECK(cc.s);
    cx = sq_acquire(cc.s, "x", 1, 1, 0, -1);
    cy = sq_acquire(cc.s, "y", 1, 1, 0, -1);
    cl[0] = &ca;
    cl[1] = &cc;
    end = h_real_ms() + 20000;
    for (i = 0; h_real_ms() < end && (ix < 0 || iy < 0); i++) {
        h_pump(cl, 2, 50);
        if (ilost < 0 && h_has(&ca, lx, SIMBA_EVENT_LOST)) ilost = i;
        if (ix < 0 && h_has(&cc, cx, SIMBA_EVENT_ACQUIRED)) ix = i;
        if (iy < 0 && h_has(&cc, cy, SIMBA_EVENT_ACQUIRED)) iy = i;
    }
    printf("  # the holder's LOST of x in round %d; the new client's x in round %d, y in round %d\n", ilost, ix, iy);
    simba_destroy(ca.s);
    simba_destroy(cc.s);
    CHECK(ilost >= 0 && ix >= ilost);
    CHECK(iy >= 0);
}

/* t_sqlite_file_restored with the holder down at the moment of the
   restore: its op timed out (another connection held the write lock for
   longer than ttl / 3), so it reconnects straight into the old copy, where
   its session row is alive. The reconnect must void that session (the
   holder LOST x, taken after the copy) before a new client is granted x. */
static void t_sqlite_file_restored_while_down(void) {
    char copy[320];
    sq_files f;
    static h_client ca, cc;
    h_client *cl[2];
    simba_lock ly, lx, cx;
    sqlite3 *db, *to, *blocker;
    sqlite3_backup *bk;
    int64_t end, left = -1;
    int i, down = 0, ilost = -1, ix = -1;
    memset(&ca, 0, sizeof ca); memset(&cc, 0, sizeof cc);
    sq_files_of(&f, "restored-down.db");
    sq_path(copy, sizeof copy, "restored-down-backup.db");
    ca.s = sq_client(f.db, "rd", "a", 1500, 1000);   /* an op times out after ttl / 3 */
    CHECK(ca.s);
    cl[0] = &ca;
    ly = sq_acquire(ca.s, "y", 1, 1, 0, -1);
    CHECK(h_expect(cl, 1, 0, ly, SIMBA_EVENT_ACQUIRED, 5000));
    CHECK(sqlite3_open(f.db, &db) == SQLITE_OK && sqlite3_open(copy, &to) == SQLITE_OK);
    CHECK((bk = sqlite3_backup_init(to, "main", db, "main")) != NULL);   /* a copy with a's session in it */
    CHECK(sqlite3_backup_step(bk, -1) == SQLITE_DONE);
    sqlite3_backup_finish(bk);
    sqlite3_close(to);
    sqlite3_close(db);
    simba_release(ca.s, ly);
    CHECK(h_expect(cl, 1, 0, ly, SIMBA_EVENT_RELEASED, 5000));
    lx = sq_acquire(ca.s, "x", 1, 1, 0, -1);
    CHECK(h_expect(cl, 1, 0, lx, SIMBA_EVENT_ACQUIRED, 5000));
    CHECK(sqlite3_open(f.db, &blocker) == SQLITE_OK);   /* a's next keepalive times out: a goes down */
    CHECK(sqlite3_exec(blocker, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    end = h_real_ms() + 5000;
    while (h_real_ms() < end && !down) {
        h_pump(cl, 1, 20);
        for (i = 0; i < ca.nlog; i++) if (ca.log[i].type == SIMBA_EVENT_DISCONNECTED) down = 1;
    }
    CHECK(down);
    CHECK(rename(copy, f.db) == 0);                     /* while a is down: the copy back, -wal and -shm fresh */
    unlink(f.wal);
    unlink(f.shm);
    sqlite3_exec(blocker, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(blocker);
    cc.s = sq_client(f.db, "rd", "c", 1500, 1000);
    CHECK(cc.s);
    cx = sq_acquire(cc.s, "x", 1, 1, 0, -1);
    cl[1] = &cc;
    end = h_real_ms() + 15000;
    for (i = 0; h_real_ms() < end && ix < 0; i++) {
        h_pump(cl, 2, 50);
        if (ilost < 0 && h_has(&ca, lx, SIMBA_EVENT_LOST)) ilost = i;
        if (h_has(&cc, cx, SIMBA_EVENT_ACQUIRED)) { ix = i; left = simba_valid_ms(ca.s, lx); }
    }
    printf("  # the holder's LOST of x in round %d; the new client's x in round %d (rounds of 50 ms),"
           " the holder's belief then: %lld ms\n", ilost, ix, (long long)left);
    simba_destroy(ca.s);
    simba_destroy(cc.s);
    CHECK(ix >= 0);
    CHECK(ilost >= 0 && ix >= ilost && left <= 0);
}

/* The directory of the file replaced under a holder (renamed away and
   made again, as a RuntimeDirectory= on a service's restart or a cleaner
   of /tmp does): the sidecar's marks went with it and the new directory
   has another inode. The new file must still grant nothing until the
   holder's belief is over: the running holder's wake socket carries the
   path's own tag too. */
static void t_sqlite_directory_replaced(void) {
    char sub[320], old[320], path[340];
    static h_client ca, cb;
    h_client *cl[2];
    simba_lock la, lb;
    int64_t end, left = -1;
    int i, ilost = -1, iacq = -1;
    memset(&ca, 0, sizeof ca); memset(&cb, 0, sizeof cb);
    sq_path(sub, sizeof sub, "run");
    sq_path(old, sizeof old, "run.old");
    snprintf(path, sizeof path, "%s/locks.db", sub);
    CHECK(mkdir(sub, 0700) == 0);
    ca.s = sq_client(path, "dr", "a", 1500, 1000);
    CHECK(ca.s);
    cl[0] = &ca;
    la = sq_acquire(ca.s, "x", 1, 1, 0, -1);
    CHECK(h_expect(cl, 1, 0, la, SIMBA_EVENT_ACQUIRED, 5000));
    CHECK(rename(sub, old) == 0);            /* the directory away with everything in it, and made again */
    CHECK(mkdir(sub, 0700) == 0);
    cb.s = sq_client(path, "dr", "b", 1500, 1000);
    CHECK(cb.s);
    lb = sq_acquire(cb.s, "x", 1, 1, 0, -1);
    cl[1] = &cb;
    end = h_real_ms() + 10000;
    for (i = 0; h_real_ms() < end && iacq < 0; i++) {
        h_pump(cl, 2, 50);
        if (ilost < 0 && h_has(&ca, la, SIMBA_EVENT_LOST)) ilost = i;
        if (h_has(&cb, lb, SIMBA_EVENT_ACQUIRED)) { iacq = i; left = simba_valid_ms(ca.s, la); }
    }
    printf("  # the holder's LOST in round %d, the new grant in round %d (rounds of 50 ms),"
           " the holder's belief then: %lld ms\n", ilost, iacq, (long long)left);
    simba_destroy(ca.s);
    simba_destroy(cb.s);
    CHECK(iacq >= 0);
    CHECK(left <= 0 && ilost >= 0 && iacq >= ilost);
}

static void t_sqlite_file_deleted(void) { sq_replaced(SQ_DELETED); }
static void t_sqlite_file_replaced(void) { sq_replaced(SQ_RENAMED_OVER); }
static void t_sqlite_file_renamed_away(void) { sq_replaced(SQ_RENAMED_AWAY); }

static int rm_rf(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd);
}

int main(int argc, char **argv) {
    conf_backend cb;
    if (argc > 1) h_filter = argv[1];
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, sizeof dir, "%s/simba-sqlite-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(conf_db, sizeof conf_db, "%s/conformance.db", dir);

    memset(&cb, 0, sizeof cb);
    cb.name = "sqlite";
    cb.make = make_default;
    cb.ttl_ms = 1500;
    cb.transition_ms = 1000;
    cb.kill = kill_handle;
    kill_vfs_install();
    conformance_run(&cb, h_filter, &h_passed, &h_failed);

    shared = (sq_shared *)mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) { perror("mmap"); return 1; }
    RUN(t_sqlite_processes_mutex);
    RUN(t_sqlite_processes_semaphore);
    RUN(t_sqlite_kill9_holder);
    RUN(t_sqlite_dead_holder_try);
    RUN(t_sqlite_fds_close_on_exec);
    RUN(t_sqlite_hold_in_row_meets_a_queue);
    RUN(t_sqlite_hold_in_row_of_an_ended_session);
    RUN(t_sqlite_hold_in_row_release_is_its_own);
    RUN(t_sqlite_hold_in_row_told_of_delete);
    RUN(t_sqlite_reboot_clears_holds);
    RUN(t_sqlite_stats_cycle);
    RUN(t_sqlite_checkpoint_outside_tick);
    RUN(t_sqlite_checkpoint_in_tick);
    RUN(t_sqlite_checkpoint_bad_input);
    RUN(t_sqlite_sigstop_holder);
    RUN(t_sqlite_foreign_file);
    RUN(t_sqlite_other_format);
    RUN(t_sqlite_corrupt_file);
    RUN(t_sqlite_garbage_entries_dropped);
    RUN(t_sqlite_network_fs_refused);
    RUN(t_sqlite_fuse_mount_refused);
    RUN(t_sqlite_read_only_file);
    RUN(t_sqlite_unwritable_dir);
    RUN(t_sqlite_file_deleted);
    RUN(t_sqlite_file_replaced);
    RUN(t_sqlite_file_renamed_away);
    RUN(t_sqlite_file_deleted_longer_lease);
    RUN(t_sqlite_file_checked_on_change);
    RUN(t_sqlite_tick_without_poll);
    RUN(t_sqlite_file_restored);
    RUN(t_sqlite_file_restored_while_down);
    RUN(t_sqlite_directory_replaced);
    RUN(t_sqlite_no_watch_left);

    rm_rf(dir);
    return harness_summary();
}
