/* bench_sqlite.c -- the figures of the SQLite backend (make bench-sqlite),
   each as a ratio to a floor measured in the same run on the same file
   system:

     cycle      one uncontended acquire+release, vs one SQLite write
                transaction on the same file system (WAL) and a flock(2)
                pair; the two taken in turn, in rounds of one checkpoint
                period each, and the median of the rounds' ratios
     hand-off   a release to the ACQUIRED of a waiter in another process,
                vs one write transaction + one datagram between processes
     kill -9    a holder killed -> the waiter (another process) ACQUIRED,
                p50 and p99, with the default 16 s lease
     command    `simba run --try sqlite://... x -- true` vs `flock -n f true`
                (fork+exec+wait, min/median/max)
     no ckpt    the cycles again with checkpoint_pages = -1, then one
                simba_sqlite_checkpoint of their WAL from outside the loop
     Q=1000     a hand-off to another process with 1000 waiters behind it
                (all of one client there), vs one with a single waiter
     tick       the longest simba_tick of this process's clients (the
                other processes' aside) in the cycles, and then in the
                hand-offs, kill -9 rounds and Q rounds: its wall time,
                the thread's CPU time in it, the longest of a connected
                client, and how many ticks slept in the kernel (a commit
                that runs a WAL checkpoint waits for its fdatasync, as
                the longest batch shows); the waits are simba_wait's loop
                with each tick timed (bench_wait)

   Settings from the environment: BENCH_ROUNDS (of the cycle against its
   floor, 25), BENCH_N (cycles of the other lines, 2000), BENCH_KILLS (30),
   BENCH_CMDS (100), BENCH_Q_ROUNDS (15), BENCH_DIR (a directory; default a new one in $TMPDIR),
   SIMBA_CLI (the simba binary; default build/simba), SIMBA_CLI_NET (simba-net,
   the CLI with every backend: the same command with it, for comparison). */
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_SQLITE_IMPLEMENTATION
#include "simba_sqlite.h"
#include "bench/bench_util.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>

static char dir[256];
static int own_dir;   /* made by this run (not BENCH_DIR): removed at the end */
static bench_ticks ticks;   /* this process's ticks (reset after the cycles) */

/* Removes the run's directory (at exit: the early ends of BENCH_Q_ONLY and
   BENCH_CYCLE_ONLY too). */
static void remove_dir(void) {
    char cmd[400];
    if (!own_dir) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench-sqlite: could not remove %s\n", dir);
}

static int checkpoint_pages;   /* of the clients made next (0: the default) */

static simba *client(const char *path, const char *id, simba_backend *out) {
    simba_sqlite_desc sd;
    simba_desc d;
    memset(&sd, 0, sizeof sd);
    sd.path = path;
    sd.checkpoint_pages = checkpoint_pages;
    memset(&d, 0, sizeof d);
    d.backend = simba_sqlite(&sd);
    if (out) *out = d.backend;
    d.client_id = id;
    return simba_create(&d, NULL);
}

static int expect(simba *s, simba_lock l, simba_event_type t) {
    simba_event ev;
    return bench_wait(&ticks, s, l, 30000, &ev) == 1 && ev.type == t;
}

static simba_lock acquire(simba *s, const char *name, int wait_ms) {
    simba_lock_desc d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.wait_ms = wait_ms;
    return simba_acquire(s, &d);
}

/* ---- floors ---- */

/* An integer PRAGMA's value on db (-1 if it has none). */
static long pragma_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st;
    long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static char floor_settings[200];   /* what the floor ran with, read back from its connection */

/* One write transaction as the backend runs its own: the same settings
   (WAL, synchronous=NORMAL, SQLite's default checkpoint every 1000 WAL
   pages and page size), BEGIN IMMEDIATE, prepared statements; one UPDATE
   of one row, so one WAL page per transaction. The connection stays open
   between rounds (floor_run), as simba's does. */
typedef struct floor_conn {
    sqlite3 *db;
    sqlite3_stmt *begin, *update, *commit;   /* prepared once, as simba's are */
    long wal_pages;                          /* its checkpoint period, in WAL pages */
} floor_conn;

static void floor_open(floor_conn *f, const char *path) {
    sqlite3_open(path, &f->db);
    sqlite3_exec(f->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                        "CREATE TABLE IF NOT EXISTS bench_floor(k INTEGER PRIMARY KEY, v INTEGER);"
                        "INSERT OR IGNORE INTO bench_floor VALUES(1,0)", NULL, NULL, NULL);
    sqlite3_prepare_v2(f->db, "BEGIN IMMEDIATE", -1, &f->begin, NULL);
    sqlite3_prepare_v2(f->db, "UPDATE bench_floor SET v=v+1 WHERE k=1", -1, &f->update, NULL);
    sqlite3_prepare_v2(f->db, "COMMIT", -1, &f->commit, NULL);
    f->wal_pages = pragma_int(f->db, "PRAGMA wal_autocheckpoint");
    snprintf(floor_settings, sizeof floor_settings,
             "WAL, synchronous=%s, a checkpoint every %ld WAL pages, pages of %ld bytes, BEGIN IMMEDIATE,"
             " one prepared UPDATE of one row", pragma_int(f->db, "PRAGMA synchronous") == 1 ? "NORMAL" : "not NORMAL",
             f->wal_pages, pragma_int(f->db, "PRAGMA page_size"));
}

/* n transactions: us per transaction. */
static double floor_run(floor_conn *f, int n) {
    double t0 = now_us();
    int i;
    for (i = 0; i < n; i++) {
        sqlite3_step(f->begin); sqlite3_reset(f->begin);
        sqlite3_step(f->update); sqlite3_reset(f->update);
        sqlite3_step(f->commit); sqlite3_reset(f->commit);
    }
    return (now_us() - t0) / n;
}

static void floor_close(floor_conn *f) {
    sqlite3_finalize(f->begin);
    sqlite3_finalize(f->update);
    sqlite3_finalize(f->commit);
    sqlite3_close(f->db);
}

/* An uncontended cycle's transactions as simba runs them, without simba:
   the statements simba prepares (simba__sqlite_sql_text), bound as the
   backend binds them. The check of the file before the acquire's
   transaction is a watch that asks nothing until the file changes
   (simba__sqlite_watch_file), so none is made here.
   writes_only: only what a cycle cannot do without, the resource's row
   written in each of its two transactions (the hold taken, the hold let
   go); else all of the cycle's statements (the restart grace, the
   session, whether the name is free; the writes). */
static double cycle_sql_us(const char *path, int n, int writes_only) {
    static const char sess[] = "cycle~0123456789abcdef", req[] = "cycle~0123456789abcdef:1";
    static const int acquire[] = { SQ_ACQ_READ, SQ_RES_HOLD };
    sqlite3 *db;
    sqlite3_stmt *st[SQ_N];
    double t0;
    int i, k;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, NULL);
    sqlite3_exec(db, simba__sqlite_schema, NULL, NULL, NULL);
    sqlite3_exec(db, "INSERT INTO resources(tenant,name,capacity,counter) VALUES('',CAST('cycle' AS BLOB),1,0);"
                     "INSERT INTO sessions VALUES('','cycle~0123456789abcdef',1,'1:2',1,1,99999999999,'w',1,1)",
                 NULL, NULL, NULL);
    for (k = 0; k < SQ_N; k++) sqlite3_prepare_v2(db, simba__sqlite_sql_text[k], -1, &st[k], NULL);
    /* the binds of the backend: tenant, name, then what each statement takes */
    for (k = 0; k < SQ_N; k++) {
        sqlite3_bind_text(st[k], 1, k == SQ_META_GET ? "grace_until" : "", -1, SQLITE_STATIC);
        if (k != SQ_META_GET) sqlite3_bind_blob(st[k], 2, k == SQ_SESS_GET ? (const void *)sess : "cycle",
                                                k == SQ_SESS_GET ? (int)strlen(sess) : 5, SQLITE_STATIC);
    }
    sqlite3_bind_text(st[SQ_SESS_GET], 2, sess, -1, SQLITE_STATIC);
    sqlite3_bind_text(st[SQ_ACQ_READ], 3, sess, -1, SQLITE_STATIC);
    sqlite3_bind_text(st[SQ_RES_HOLD], 4, sess, -1, SQLITE_STATIC);
    sqlite3_bind_text(st[SQ_RES_HOLD], 5, req, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st[SQ_RES_HOLD], 6, 1);
    sqlite3_bind_int(st[SQ_RES_HOLD], 7, 1);
    sqlite3_bind_int(st[SQ_RES_HOLD], 8, 0);
    sqlite3_bind_text(st[SQ_RES_LET_GO], 3, sess, -1, SQLITE_STATIC);
    sqlite3_bind_text(st[SQ_RES_LET_GO], 4, req, -1, SQLITE_STATIC);
#define STEP(x) do { while (sqlite3_step(st[x]) == SQLITE_ROW) {} sqlite3_reset(st[x]); } while (0)
    t0 = now_us();
    for (i = 0; i < n; i++) {
        sqlite3_bind_int64(st[SQ_RES_HOLD], 3, i + 1);
        STEP(SQ_BEGIN);
        for (k = 0; k < 2; k++) if (!writes_only || acquire[k] == SQ_RES_HOLD) STEP(acquire[k]);
        STEP(SQ_COMMIT);
        STEP(SQ_BEGIN);
        STEP(SQ_RES_LET_GO);
        STEP(SQ_COMMIT);
    }
#undef STEP
    t0 = (now_us() - t0) / n;
    for (k = 0; k < SQ_N; k++) sqlite3_finalize(st[k]);
    sqlite3_close(db);
    return t0;
}

static double floor_flock_us(const char *path, int n) {
    int fd = open(path, O_RDWR | O_CREAT, 0600), i;
    double t0 = now_us();
    for (i = 0; i < n; i++) { flock(fd, LOCK_EX); flock(fd, LOCK_UN); }
    t0 = (now_us() - t0) / n;
    close(fd);
    return t0;
}

/* One datagram from one process to another: half a ping-pong round trip
   over abstract unix datagram sockets (the wake-up path). */
static int dgram_bind(const char *name) {
    struct sockaddr_un a;
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path + 1, name, strlen(name));
    bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name)));
    return fd;
}
static void dgram_send(int fd, const char *to) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path + 1, to, strlen(to));
    sendto(fd, "x", 1, 0, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(to)));
}
static double floor_dgram_us(int n) {
    char a[64], b[64], c;
    int fa, fb, i;
    pid_t pid;
    double t0;
    snprintf(a, sizeof a, "bench-sqlite-a-%d", (int)getpid());
    snprintf(b, sizeof b, "bench-sqlite-b-%d", (int)getpid());
    fa = dgram_bind(a);
    fb = dgram_bind(b);
    if ((pid = fork()) == 0) {
        for (i = 0; i < n; i++) { if (recv(fb, &c, 1, 0) != 1) _exit(1); dgram_send(fb, a); }
        _exit(0);
    }
    t0 = now_us();
    for (i = 0; i < n; i++) { dgram_send(fa, b); if (recv(fa, &c, 1, 0) != 1) break; }
    t0 = (now_us() - t0) / n / 2;
    waitpid(pid, NULL, 0);
    close(fa);
    close(fb);
    return t0;
}

/* ---- simba ---- */

/* Per cycle, from the backend's counters over the timed cycles. */
static double tx_per_cycle, statements_per_cycle, pages_per_cycle, batch_us_per_cycle;

static simba *cycle_client(const char *path, simba_backend *b) {
    simba *s = client(path, "cycle", b);
    simba_lock l = acquire(s, "cycle", -1);   /* warm: the file, the statements */
    expect(s, l, SIMBA_EVENT_ACQUIRED);
    simba_release(s, l);
    expect(s, l, SIMBA_EVENT_RELEASED);
    return s;
}

/* n cycles, the loop as a program runs it (ticks not timed one by one):
   us per cycle, or -1. */
static double cycle_run(simba *s, int n) {
    double t0 = now_us();
    int i;
    for (i = 0; i < n; i++) {
        simba_event ev;
        simba_lock l = acquire(s, "cycle", -1);
        if (bench_wait(NULL, s, l, 30000, &ev) != 1 || ev.type != SIMBA_EVENT_ACQUIRED) return -1;
        simba_release(s, l);
        if (bench_wait(NULL, s, l, 30000, &ev) != 1 || ev.type != SIMBA_EVENT_RELEASED) return -1;
    }
    return (now_us() - t0) / n;
}

/* n cycles with each tick timed (the tick lines). */
static int cycle_ticks(simba *s, int n) {
    int i;
    for (i = 0; i < n; i++) {
        simba_lock l = acquire(s, "cycle", -1);
        if (!expect(s, l, SIMBA_EVENT_ACQUIRED)) return -1;
        simba_release(s, l);
        if (!expect(s, l, SIMBA_EVENT_RELEASED)) return -1;
    }
    return 0;
}

static void cycle_stats(const struct simba_sqlite_stats *st0, const struct simba_sqlite_stats *st, int n) {
    tx_per_cycle = (double)(st->transactions - st0->transactions) / n;
    statements_per_cycle = (double)(st->statements - st0->statements) / n;
    pages_per_cycle = (double)(st->pages_written - st0->pages_written) / n;
    batch_us_per_cycle = (double)(st->batch_us - st0->batch_us) / n;
}

/* The cycles of one client on `path` in one run: us per cycle. */
static double cycle_us(const char *path, int n, int64_t *longest_us) {
    simba_backend b;
    simba *s = cycle_client(path, &b);
    struct simba_sqlite_stats st, st0;
    double us;
    simba_sqlite_stats(b, &st0);
    us = cycle_run(s, n);
    simba_sqlite_stats(b, &st);
    *longest_us = st.longest_batch_us;
    cycle_stats(&st0, &st, n);
    simba_destroy(s);
    return us;
}

/* The cycle against its floor, in rounds taken in turn: a round of the
   floor, then one of the cycles, each writing one checkpoint period of WAL
   pages (one checkpoint each: its two fdatasync are tens of ms, most of a
   transaction once spread over 1000). Taken in turn, a shared machine's
   slow spell falls on both sides of a ratio. Returns the median of the
   rounds' ratios; their range, the medians of each side and the
   counters over all of the cycles. */
typedef struct cycle_vs_floor {
    double ratio, ratio_min, ratio_max, floor_us, cycle_us;
    int rounds, cycles;   /* per round */
    int64_t longest_us;
} cycle_vs_floor;

static int cycle_rounds(const char *path, const char *floor_path, int rounds, cycle_vs_floor *out) {
    floor_conn f;
    simba_backend b;
    simba *s = cycle_client(path, &b);
    struct simba_sqlite_stats st, st0;
    double ratio[64], fl[64], cy[64];
    int r, total = 0;
    if (rounds > 64) rounds = 64;
    floor_open(&f, floor_path);
    floor_run(&f, 100);
    simba_sqlite_stats(b, &st0);
    if (cycle_run(s, 50) < 0) return -1;   /* the pages a cycle writes */
    simba_sqlite_stats(b, &st);
    cycle_stats(&st0, &st, 50);
    out->cycles = (int)(f.wal_pages / (pages_per_cycle > 0 ? pages_per_cycle : 1) + 0.5);
    if (out->cycles < 1) out->cycles = 1;
    simba_sqlite_stats(b, &st0);
    for (r = 0; r < rounds; r++) {
        fl[r] = floor_run(&f, (int)f.wal_pages);
        if ((cy[r] = cycle_run(s, out->cycles)) < 0) return -1;
        ratio[r] = cy[r] / fl[r];
        total += out->cycles;
    }
    simba_sqlite_stats(b, &st);
    cycle_stats(&st0, &st, total);
    out->longest_us = st.longest_batch_us;
    out->rounds = rounds;
    out->ratio = pct(ratio, rounds, 0.5);
    out->ratio_min = ratio[0];
    out->ratio_max = ratio[rounds - 1];
    out->floor_us = pct(fl, rounds, 0.5);
    out->cycle_us = pct(cy, rounds, 0.5);
    if (cycle_ticks(s, total / 4) < 0) return -1;   /* then a quarter as many, each tick timed */
    floor_close(&f);
    simba_destroy(s);
    return 0;
}

typedef struct shared_t {
    double released_at;
    double acquired_at;   /* the Q waiter's ACQUIRED */
    double lat[4096];
    int n;
    int stop;
} shared_t;
static shared_t *sh;

/* Two processes pass one mutex back and forth: each hand-off is a release
   in one process and the ACQUIRED of the other, which waits already. */
static void pingpong(const char *path, const char *id, int rounds, const char *name) {
    simba *s = client(path, id, NULL);
    int i;
    for (i = 0; i < rounds; i++) {
        simba_lock l = acquire(s, name, -1);
        if (!expect(s, l, SIMBA_EVENT_ACQUIRED)) break;
        if (sh->released_at > 0 && sh->n < 4096) sh->lat[sh->n++] = now_us() - sh->released_at;
        sh->released_at = now_us();
        simba_release(s, l);
        if (!expect(s, l, SIMBA_EVENT_RELEASED)) break;
    }
    simba_destroy(s);
}

static double handoff_us(const char *path, int rounds, const char *name, double *p99) {
    pid_t pid;
    double p50;
    memset(sh, 0, sizeof *sh);
    fflush(stdout);
    if ((pid = fork()) == 0) { pingpong(path, "pong", rounds, name); _exit(0); }
    pingpong(path, "ping", rounds, name);
    waitpid(pid, NULL, 0);
    p50 = pct(sh->lat, sh->n, 0.5);
    *p99 = pct(sh->lat, sh->n, 0.99);
    return p50;
}

/* A holder process killed with -9 while the parent waits: kill to ACQUIRED. */
static int kill_round(const char *path, double *lat) {
    int p[2];
    pid_t pid;
    char c;
    simba *s;
    simba_lock l;
    double t0;
    if (pipe(p) != 0) return 0;
    fflush(stdout);
    if ((pid = fork()) == 0) {
        simba *h = client(path, "victim", NULL);
        simba_lock hl = acquire(h, "k9", -1);
        simba_event ev;
        close(p[0]);
        if (!expect(h, hl, SIMBA_EVENT_ACQUIRED)) _exit(1);
        if (write(p[1], "A", 1) != 1) _exit(1);
        for (;;) simba_hold_for(h, hl, 60000, &ev);
    }
    close(p[1]);
    if (read(p[0], &c, 1) != 1) return 0;
    close(p[0]);
    s = client(path, "heir", NULL);
    l = acquire(s, "k9", -1);
    {   /* the request is queued (one round of the loop) */
        simba_event ev;
        bench_wait(&ticks, s, l, 50, &ev);
    }
    t0 = now_us();
    kill(pid, SIGKILL);
    if (!expect(s, l, SIMBA_EVENT_ACQUIRED)) return 0;
    *lat = now_us() - t0;
    waitpid(pid, NULL, 0);
    simba_release(s, l);
    expect(s, l, SIMBA_EVENT_RELEASED);
    simba_destroy(s);
    return 1;
}

/* fork+exec+wait of argv, in us. */
static double run_cmd(char *const argv[], int *status) {
    double t0 = now_us();
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    waitpid(pid, status, 0);
    return now_us() - t0;
}

static void cmd_stats(double *v, int n, double *mn, double *med, double *mx) {
    *mn = pct(v, n, 0);
    *med = pct(v, n, 0.5);
    *mx = pct(v, n, 1);
}

static int queued(simba *s, const char *name) {
    simba_lock q = simba_inspect(s, name, NULL);
    simba_event ev;
    if (simba_wait(s, q, 30000, &ev) != 1 || ev.type != SIMBA_EVENT_INFO) return -1;
    return ev.queued;
}

/* The holder's idle time before each timed release of the Q rounds, the
   same in both kinds of round (as the other backends' hand-off benches
   wait 20 ms). Without it the holder's wait would be as long as the
   waiters' setup: a few ms for one waiter, a few hundred for 1000; and a
   process that has slept for a while runs its next transaction several
   times slower on this kind of VM (a hand-off 650-850 us after 20-200 ms
   of sleep, 300-400 us after 1-2 ms): the ratio would measure the sleep,
   not the queue. */
enum { Q_IDLE_GAP_MS = 20 };

/* One hand-off with q waiters behind the holder, all of one client in
   another process (the waiters' process keeps its q handles, as a real
   one would; the holder's process has only its own): the holder's
   release, after Q_IDLE_GAP_MS of sleep, to the first waiter's ACQUIRED,
   in us (-1: it failed). */
static double queued_handoff_round_us(const char *path, int q, const char *name) {
    int ready[2], i, ok;
    char c = 0;
    pid_t pid;
    simba *h = client(path, "qh", NULL);
    simba_lock hl = acquire(h, name, -1);
    double t0;
    if (!expect(h, hl, SIMBA_EVENT_ACQUIRED) || pipe(ready) != 0) { simba_destroy(h); return -1; }
    sh->acquired_at = 0;
    fflush(stdout);
    if ((pid = fork()) == 0) {
        simba *w = client(path, "qw", NULL);
        simba_lock *wl = (simba_lock *)calloc((size_t)q, sizeof *wl);
        simba_event ev;
        close(ready[0]);
        for (i = 0; i < q; i++) wl[i] = acquire(w, name, -1);
        for (i = 0; i < 3000 && queued(w, name) != q + 1; i++) simba_wait(w, wl[0], 1, &ev);
        if (write(ready[1], "r", 1) != 1) _exit(1);
        if (simba_wait(w, wl[0], 30000, &ev) == 1 && ev.type == SIMBA_EVENT_ACQUIRED) sh->acquired_at = now_us();
        simba_destroy(w);
        free(wl);
        _exit(0);
    }
    close(ready[1]);
    ok = read(ready[0], &c, 1) == 1;
    close(ready[0]);
    poll(NULL, 0, Q_IDLE_GAP_MS);
    t0 = now_us();
    simba_release(h, hl);
    expect(h, hl, SIMBA_EVENT_RELEASED);
    waitpid(pid, NULL, 0);
    simba_destroy(h);
    return ok && sh->acquired_at > 0 ? sh->acquired_at - t0 : -1;
}

/* The hand-off with q waiters against one with a single waiter: rounds
   taken in turn (Q = 1, Q = q, Q = 1, ...), so that the machine's load
   and the WAL checkpoints (due every ~1000 pages: the q enqueues before
   a round bring them on) fall on both alike; the medians of `rounds`
   each. */
static void queued_handoffs(const char *path, int q, int rounds, double *q1_us, double *qn_us) {
    double *a = (double *)calloc((size_t)rounds, sizeof *a), *b = (double *)calloc((size_t)rounds, sizeof *b);
    char nm[64];
    int r, na = 0, nb = 0;
    double t;
    for (r = 0; r < rounds; r++) {
        snprintf(nm, sizeof nm, "q1-%d", r);
        if ((t = queued_handoff_round_us(path, 1, nm)) >= 0) a[na++] = t;
        snprintf(nm, sizeof nm, "q%d-%d", q, r);
        if ((t = queued_handoff_round_us(path, q, nm)) >= 0) b[nb++] = t;
    }
    *q1_us = na ? pct(a, na, 0.5) : -1;
    *qn_us = nb ? pct(b, nb, 0.5) : -1;
    free(a);
    free(b);
}

int main(void) {
    char db[320], offdb[320], floordb[320], writesdb[320], onerowdb[320], lockf[320], url[400], flockf[320];
    const char *cli = getenv("SIMBA_CLI") ? getenv("SIMBA_CLI") : "build/simba";
    const char *net = getenv("SIMBA_CLI_NET");
    int n = env_int("BENCH_N", 2000), kills = env_int("BENCH_KILLS", 30), cmds = env_int("BENCH_CMDS", 100), i, k;
    int qrounds = env_int("BENCH_Q_ROUNDS", 15), rounds = env_int("BENCH_ROUNDS", 25);
    cycle_vs_floor cf;
    double txn, wr, one_row, fl, dg, cyc, ho, ho99, kl[512], sv[1024], fv[1024], ov[1024], mn, med, mx, fmn, fmed, fmx, q1, q1000;
    int64_t longest = 0;
    memset(&cf, 0, sizeof cf);
    signal(SIGPIPE, SIG_IGN);
    if (getenv("BENCH_DIR")) snprintf(dir, sizeof dir, "%s", getenv("BENCH_DIR"));
    else {
        snprintf(dir, sizeof dir, "%s/simba-bench-sqlite-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
        own_dir = 1;
        atexit(remove_dir);
    }
    sh = (shared_t *)mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    snprintf(db, sizeof db, "%s/locks.db", dir);
    snprintf(offdb, sizeof offdb, "%s/nockpt.db", dir);
    snprintf(floordb, sizeof floordb, "%s/floor.db", dir);
    snprintf(writesdb, sizeof writesdb, "%s/writes.db", dir);
    snprintf(onerowdb, sizeof onerowdb, "%s/onerow.db", dir);
    snprintf(lockf, sizeof lockf, "%s/flock.lock", dir);
    snprintf(flockf, sizeof flockf, "%s/x.lock", dir);
    snprintf(url, sizeof url, "sqlite://%s/cli.db", dir);
    printf("bench-sqlite: %s (%ld cores)\n", dir, sysconf(_SC_NPROCESSORS_ONLN));

    if (getenv("BENCH_Q_ONLY")) {
        queued_handoffs(db, 1000, qrounds, &q1, &q1000);
        printf("Q: %.1f vs %.1f us = %.2f x\n", q1000, q1, q1000 / q1);
        return 0;
    }
    if (cycle_rounds(db, floordb, rounds, &cf) != 0) { fprintf(stderr, "bench-sqlite: the cycles failed\n"); return 1; }
    txn = cf.floor_us;
    cyc = cf.cycle_us;
    fl = floor_flock_us(lockf, n * 10);
    dg = floor_dgram_us(n);
    printf("floors: one write transaction %.1f us (%s: the backend's settings; the median of %d rounds of %ld);"
           " flock(2) lock+unlock %.2f us; one datagram to another process %.1f us\n", txn, floor_settings,
           cf.rounds, (long)(cf.cycles * pages_per_cycle + 0.5), fl, dg);
    printf("cycle: acquire+release %.1f us = %.2f x one write transaction (target <= 2.5; the median of %d rounds'"
           " ratios, %.2f-%.2f, each round %d cycles after %ld floor transactions: one checkpoint period of WAL"
           " pages each), %.0f x a flock pair; longest batch inside a tick %lld us; %.2f transactions per cycle\n",
           cyc, cf.ratio, cf.rounds, cf.ratio_min, cf.ratio_max, cf.cycles, (long)(cf.cycles * pages_per_cycle + 0.5),
           cyc / fl, (long long)cf.longest_us, tx_per_cycle);
    bench_ticks_print("tick (cycle):", &ticks);
    memset(&ticks, 0, sizeof ticks);
    printf("cycle, where the time goes: %.1f statements and %.1f WAL pages per cycle (the floor: 3 and 1 per"
           " transaction); inside the transactions %.1f us = %.2f x one write transaction, simba's loop outside"
           " them %.1f us\n", statements_per_cycle, pages_per_cycle, batch_us_per_cycle, batch_us_per_cycle / txn,
           cyc - batch_us_per_cycle);
    {   /* the same cycles with no checkpoint inside a tick, then one from outside the loop */
        int wal = 0, copied = 0;
        double t0, cyc_off;
        checkpoint_pages = -1;
        cyc_off = cycle_us(offdb, n, &longest);
        checkpoint_pages = 0;
        printf("cycle with checkpoint_pages = -1 (no checkpoint inside a tick): %.1f us; longest batch inside a tick"
               " %lld us\n", cyc_off, (long long)longest);
        bench_ticks_print("tick (cycle, checkpoint_pages = -1):", &ticks);
        memset(&ticks, 0, sizeof ticks);
        t0 = now_us();
        if (simba_sqlite_checkpoint(offdb, &wal, &copied, NULL, 0) == SIMBA_OK)
            printf("simba_sqlite_checkpoint after them (a thread's or a timer's, outside the loop): %.1f ms, %d of"
                   " %d WAL pages copied back\n", (now_us() - t0) / 1000, copied, wal);
    }
    wr = cycle_sql_us(writesdb, n, 1);
    printf("cycle floor: the writes a cycle needs (the resource's row in each of its two transactions: the hold taken,"
           " the hold let go; simba's schema and statements) %.1f us = %.2f x one write transaction; the cycle is"
           " %.2f x it\n", wr, wr / txn, cyc / wr);
    one_row = cycle_sql_us(onerowdb, n, 0);
    printf("cycle's SQL alone: simba's statements of a cycle (the acquire's reads, one write per transaction), no loop"
           " %.1f us = %.2f x one write transaction\n", one_row, one_row / txn);
    if (getenv("BENCH_CYCLE_ONLY")) return 0;

    ho = handoff_us(db, n / 2 > 4096 ? 4096 : n / 2, "handoff", &ho99);
    printf("hand-off to another process: p50 %.1f us, p99 %.1f us = %.2f x (transaction + datagram, %.1f us)"
           " (target <= 1.5)\n", ho, ho99, ho / (txn + dg), txn + dg);

    for (k = 0, i = 0; i < kills && i < 512; i++) if (kill_round(db, &kl[k])) k++;
    {
        double p50 = pct(kl, k, 0.5), p99 = pct(kl, k, 0.99);
        printf("kill -9 of a holder -> the waiter ACQUIRED (lease 16 s): p50 %.2f ms, p99 %.2f ms over %d"
               " (target <= 50 ms)\n", p50 / 1000, p99 / 1000, k);
    }

    queued_handoffs(db, 1000, qrounds, &q1, &q1000);
    printf("hand-off to another process with 1000 waiters behind: %.1f us, with 1: %.1f us = %.2f x (target <= 1.5;"
           " medians of %d rounds each, taken in turn, each after %d ms idle)\n", q1000, q1, q1000 / q1, qrounds,
           Q_IDLE_GAP_MS);
    bench_ticks_print("tick (hand-off, kill -9, Q=1000):", &ticks);

    {
        char *sargv[10], *fargv[6];
        int st, bad = 0;
        sargv[0] = (char *)cli; sargv[1] = (char *)"run"; sargv[2] = (char *)"--try"; sargv[3] = url;
        sargv[4] = (char *)"x"; sargv[5] = (char *)"--"; sargv[6] = (char *)"true"; sargv[7] = NULL;
        fargv[0] = (char *)"flock"; fargv[1] = (char *)"-n"; fargv[2] = flockf; fargv[3] = (char *)"true"; fargv[4] = NULL;
        run_cmd(sargv, &st);   /* warm: the file exists */
        for (i = 0; i < cmds && i < 1024; i++) {
            sv[i] = run_cmd(sargv, &st);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
            fv[i] = run_cmd(fargv, &st);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
        }
        cmd_stats(sv, i, &mn, &med, &mx);
        cmd_stats(fv, i, &fmn, &fmed, &fmx);
        printf("command: `simba run --try sqlite://.../cli.db x -- true` min/median/max %.2f/%.2f/%.2f ms;"
               " `flock -n x.lock true` %.2f/%.2f/%.2f ms; median ratio %.2f (target <= 3)%s\n",
               mn / 1000, med / 1000, mx / 1000, fmn / 1000, fmed / 1000, fmx / 1000, med / fmed,
               bad ? " (SOME RUNS FAILED)" : "");
        if (net) {   /* where the time goes: the program's start, and what the network libraries would add */
            double hmn, hmed, hmx, omn, omed, omx;
            sargv[0] = (char *)net;
            for (k = 0; k < i; k++) ov[k] = run_cmd(sargv, &st);
            cmd_stats(ov, i, &omn, &omed, &omx);
            sargv[0] = (char *)cli; sargv[1] = (char *)"--version"; sargv[2] = NULL;
            for (k = 0; k < i; k++) sv[k] = run_cmd(sargv, &st);
            cmd_stats(sv, i, &hmn, &hmed, &hmx);
            printf("command, where the time goes: `simba --version` (the program's start alone) %.2f ms = %.2f x"
                   " flock; the same `run --try` with simba-net (every backend's client library mapped at start)"
                   " %.2f/%.2f/%.2f ms, median ratio %.2f\n",
                   hmed / 1000, hmed / fmed, omn / 1000, omed / 1000, omx / 1000, omed / fmed);
        }
    }
    return 0;
}
