/* chaos_client.c -- one real client process of `make chaos`.
 *
 *   chaos_client BACKEND INDEX LOGFILE STATEDIR [SEED]   loop until SIGTERM
 *   chaos_client now                                     print CLOCK_MONOTONIC ns
 *
 * BACKEND is redis, redis-cluster, mysql, pg or zk; the servers are read from the
 * variables that tests/servers/<backend>.sh exports (SIMBA_REDIS_HOST/PORT,
 * SIMBA_REDIS_CLUSTER_SEEDS, SIMBA_MYSQL_*, SIMBA_PG_URL, SIMBA_ZK_HOSTS; CHAOS_ZK_HOSTS
 * overrides the last, for the ensemble).
 * CHAOS_TTL_MS / CHAOS_TRANSITION_MS set the lease (default 1500 / 1000).
 *
 * The loop: acquire either the mutex "m" or the semaphore "s" (capacity 2,
 * 1 or 2 permits), hold it for a random short time while ticking, release,
 * pause a little, again. Every believed hold is written to LOGFILE, opened
 * with O_APPEND, each record one line written by one write() (so records of
 * concurrent processes never interleave):
 *
 *   A client pid seq name fence permits capacity start_ns valid_until_ns
 *   V client pid seq name fence now_ns valid_until_ns      (validity moved)
 *   E client pid seq name fence end_ns why                 (belief ended)
 *   X client pid name event error now_ns                   (ERROR/TIMEOUT...)
 *
 * Times are CLOCK_MONOTONIC ns (one clock for every process of the machine).
 * The belief of a hold starts when ACQUIRED is seen and ends at the first of:
 * release sent, LOST seen, the local validity deadline. The deadline is
 * written whenever it changes (a V record, before the program goes on as a
 * holder), so a process that is killed or stopped has a bounded belief in the
 * log: the checker caps every hold at its last written deadline.
 *
 * While it holds, the process has a file STATEDIR/<pid> so that the fault
 * driver can pick a holder to stop or kill.
 *
 * SIGUSR1: from now on keep every hold (no release) until SIGUSR2. The ZK
 * partition fault uses it so that a client of the cut-off follower is still
 * a holder, relying on keepalives alone, for longer than the lease (issue #9
 * item 6: holds of 30-430 ms end in a release that the cut-off follower
 * cannot commit, which hides the bug).
 */
#define SIMBA_IMPLEMENTATION
#define SIMBA_REDIS_IMPLEMENTATION
#define SIMBA_MYSQL_IMPLEMENTATION
#define SIMBA_PG_IMPLEMENTATION
#define SIMBA_ZK_IMPLEMENTATION
#define SIMBA_SQLITE_IMPLEMENTATION
#include "simba.h"
#include "simba_redis.h"
#include "simba_mysql.h"
#include "simba_pg.h"
#include "simba_zk.h"
#include "simba_sqlite.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;
static void on_term(int sig) { (void)sig; stop_flag = 1; }
static volatile sig_atomic_t long_hold;
static void on_usr(int sig) { long_hold = sig == SIGUSR1; }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int log_fd = -1;
static char client_name[32];
static long my_pid;

/* One record, one write(): O_APPEND makes each write land whole at the end. */
static void rec(const char *fmt, ...) {
    char line[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (write(log_fd, line, (size_t)n) != n) {
        fprintf(stderr, "chaos_client: log write failed: %s\n", strerror(errno));
        exit(3);
    }
}

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {   /* xorshift64*: good enough to pick delays */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ULL) >> 33) % n;
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

/* CHAOS_LOG_LEVEL (0 error .. 3 debug; unset: silent): the library's messages
   on stderr (the run's client.err), each with its CLOCK_MONOTONIC time and
   the process, to read next to the log's records when a round fails. */
static void log_to_stderr(void *user, simba_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "%lld %ld L%d %s\n", (long long)now_ns(), (long)getpid(), (int)level, msg);
}

static simba_backend make_backend(const char *kind) {
    simba_backend none;
    memset(&none, 0, sizeof none);
    if (strcmp(kind, "redis") == 0) {
        simba_redis_desc d;
        memset(&d, 0, sizeof d);
        d.host = getenv("SIMBA_REDIS_HOST");
        d.port = env_int("SIMBA_REDIS_PORT", 6379);
        d.prefix = "chaos";
        return simba_redis(&d);
    }
    if (strcmp(kind, "redis-cluster") == 0) {
        simba_redis_desc d;
        memset(&d, 0, sizeof d);
        d.cluster_seeds = getenv("SIMBA_REDIS_CLUSTER_SEEDS");
        d.prefix = "chaos";
        return simba_redis(&d);
    }
    if (strcmp(kind, "mysql") == 0) {
        simba_mysql_desc d;
        memset(&d, 0, sizeof d);
        d.host = getenv("SIMBA_MYSQL_HOST");
        d.port = env_int("SIMBA_MYSQL_PORT", 3306);
        d.user = getenv("SIMBA_MYSQL_USER");
        d.password = getenv("SIMBA_MYSQL_PASSWORD");
        d.database = getenv("SIMBA_MYSQL_DATABASE");
        d.create_schema = 1;
        return simba_mysql(&d);
    }
    if (strcmp(kind, "pg") == 0) {
        simba_pg_desc d;
        memset(&d, 0, sizeof d);
        d.conninfo = getenv("SIMBA_PG_URL");
        d.create_schema = 1;
        return simba_pg(&d);
    }
    if (strcmp(kind, "zk") == 0) {
        simba_zk_desc d;
        memset(&d, 0, sizeof d);
        d.hosts = getenv("CHAOS_ZK_HOSTS") ? getenv("CHAOS_ZK_HOSTS") : getenv("SIMBA_ZK_HOSTS");
        d.base_path = "/chaos";
        return simba_zk(&d);
    }
    if (strcmp(kind, "sqlite") == 0) {   /* no server: the file of run.sh */
        simba_sqlite_desc d;
        memset(&d, 0, sizeof d);
        d.path = getenv("SIMBA_SQLITE_PATH");
        return simba_sqlite(&d);
    }
    return none;
}

/* The one hold (or request) this process has at a time. */
typedef struct hold {
    simba_lock h;
    int active;        /* a request is out */
    int held;          /* ACQUIRED seen, belief not ended */
    int expired;       /* the belief ended at the local deadline, no final event yet */
    long seq;
    const char *name;
    int permits, capacity;
    int64_t fence;
    int64_t valid_until;   /* last written deadline (ns) */
    int64_t release_at;    /* ns: when to release */
} hold;

static char state_path[512];
/* CHAOS_CHEAT=1: a broken application that ignores simba_valid_ms and
   believes until it sees LOST. With a holder stopped past its lease this
   must show up as a violation: it is how the chaos run shows it can fail. */
static int cheat;

static void end_belief(hold *k, const char *why) {
    int64_t t = now_ns();
    if (!k->held) return;
    /* a deadline already passed is the real end: the checker takes the min */
    rec("E %s %ld %ld %s %lld %lld %s", client_name, my_pid, k->seq, k->name,
        (long long)k->fence, (long long)t, why);
    k->held = 0;
    k->expired = strcmp(why, "expired") == 0;
    unlink(state_path);
}

/* Write the deadline when it moved. Called after each tick and before the
   program acts as a holder again. */
static void note_validity(simba *s, hold *k) {
    int64_t v, t, until;
    if (cheat) return;
    if (!k->held) {
        /* after its deadline a hold must stay dead until its LOST: if simba
           says it is valid again, an application would believe again; log it
           as such (a V after the deadline: the checker calls it a violation) */
        if (!k->active || !k->expired) return;
        v = simba_valid_ms(s, k->h);
        if (v <= 0) return;
        t = now_ns();
        until = t + (v + 1) * 1000000;
        rec("V %s %ld %ld %s %lld %lld %lld", client_name, my_pid, k->seq, k->name,
            (long long)k->fence, (long long)t, (long long)until);
        k->valid_until = until;
        k->held = 1;
        k->expired = 0;
        return;
    }
    v = simba_valid_ms(s, k->h);
    t = now_ns();
    if (v <= 0) { end_belief(k, "expired"); return; }
    until = t + (v + 1) * 1000000;   /* valid_ms is rounded down: round up */
    /* only moves of more than 1 ms are news (valid_ms counts in ms) */
    if (until > k->valid_until + 1000000 || until < k->valid_until - 1000000) {
        rec("V %s %ld %ld %s %lld %lld %lld", client_name, my_pid, k->seq, k->name,
            (long long)k->fence, (long long)t, (long long)until);
        k->valid_until = until;
    }
}

int main(int argc, char **argv) {
    const char *kind, *logpath, *statedir;
    int index, ttl, transition;
    simba_error err;
    simba_desc d;
    simba *s;
    hold k;
    int64_t next_acquire = 0;
    long seq = 0;
    struct sigaction sa;

    if (argc == 2 && strcmp(argv[1], "now") == 0) {
        printf("%lld\n", (long long)now_ns());
        return 0;
    }
    if (argc < 5) {
        fprintf(stderr, "usage: chaos_client redis|redis-cluster|mysql|pg|zk INDEX LOGFILE STATEDIR [SEED] | chaos_client now\n");
        return 2;
    }
    kind = argv[1];
    index = atoi(argv[2]);
    logpath = argv[3];
    statedir = argv[4];
    my_pid = (long)getpid();
    rng_state = (argc > 5 ? (uint64_t)strtoull(argv[5], NULL, 10) : 0) * 0x9E3779B97F4A7C15ULL
                ^ (uint64_t)now_ns() ^ ((uint64_t)my_pid << 32) ^ 1;
    snprintf(client_name, sizeof client_name, "c%d", index);
    snprintf(state_path, sizeof state_path, "%s/%ld", statedir, my_pid);

    log_fd = open(logpath, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (log_fd < 0) { fprintf(stderr, "chaos_client: %s: %s\n", logpath, strerror(errno)); return 2; }

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_usr;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);  /* item 9 of issue #9 is another helper's; a
                                  chaos run must not die of it meanwhile */

    cheat = env_int("CHAOS_CHEAT", 0);
    ttl = env_int("CHAOS_TTL_MS", 1500);
    transition = env_int("CHAOS_TRANSITION_MS", 1000);
    memset(&d, 0, sizeof d);
    d.backend = make_backend(kind);
    if (!d.backend.vt) { fprintf(stderr, "chaos_client: unknown backend or bad settings '%s'\n", kind); return 2; }
    d.tenant = "chaos";
    if (getenv("CHAOS_LOG_LEVEL")) {
        d.logger.func = log_to_stderr;
        d.logger.level = (simba_log_level)env_int("CHAOS_LOG_LEVEL", 0);
    }
    d.ttl_ms = ttl;
    d.transition_ms = transition;
    s = simba_create(&d, &err);
    if (!s) { fprintf(stderr, "chaos_client: simba_create: %s\n", err.message[0] ? err.message : simba_strerror(err.code)); return 2; }

    memset(&k, 0, sizeof k);
    while (!stop_flag) {
        struct pollfd fds[16];
        simba_event ev[16];
        int n, m, i, timeout;
        int64_t t = now_ns(), t_tick;

        if (!k.active && t >= next_acquire) {
            simba_lock_desc ld;
            memset(&ld, 0, sizeof ld);
            if (rnd(2) == 0) { ld.name = "m"; ld.capacity = 1; ld.permits = 1; }
            else { ld.name = "s"; ld.capacity = 2; ld.permits = 1 + (int)rnd(2); }
            ld.wait_ms = 6000 + (int)rnd(4000);
            k.h = simba_acquire(s, &ld);
            if (k.h.id == 0) {
                rec("X %s %ld %s ACQUIRE_CALL %d %lld", client_name, my_pid, ld.name,
                    simba_last_error(s), (long long)t);
                next_acquire = t + 100000000;
            } else {
                k.active = 1;
                k.held = 0;
                k.expired = 0;
                k.seq = ++seq;
                k.name = ld.name;
                k.permits = ld.permits;
                k.capacity = ld.capacity;
                k.fence = 0;
                k.valid_until = 0;
            }
        }
        if (k.held && !long_hold && t >= k.release_at) {
            /* the belief ends when the release is sent */
            end_belief(&k, "release");
            simba_release(s, k.h);
        }

        n = simba_pollfds(s, fds, 16);
        if (n > 16) n = 16;
        timeout = simba_timeout_ms(s);
        if (timeout < 0 || timeout > 50) timeout = 50;
        if (k.held && !long_hold) {
            int64_t left = (k.release_at - now_ns()) / 1000000;
            if (left < timeout) timeout = left < 0 ? 0 : (int)left;
        }
        if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR) break;
        m = simba_tick(s, fds, n, ev, 16);
        if (m < 0) { fprintf(stderr, "chaos_client: tick: %s\n", simba_strerror(m)); break; }
        t_tick = now_ns();   /* an ACQUIRED is known from here on: its belief starts here */
        for (i = 0; i < m; i++) {
            simba_event *e = &ev[i];
            int mine = k.active && e->lock.id == k.h.id && e->lock.gen == k.h.gen;
            t = now_ns();
            if (e->type == SIMBA_EVENT_CONNECTED || e->type == SIMBA_EVENT_DISCONNECTED)
                rec("X %s %ld - %s %d %lld", client_name, my_pid, simba_event_name(e->type),
                    e->error, (long long)t);
            if (!mine) continue;
            switch (e->type) {
            case SIMBA_EVENT_ACQUIRED: {
                int64_t v = simba_valid_ms(s, k.h);
                t = now_ns();
                k.held = 1;
                k.fence = e->fence;
                k.valid_until = t + (v > 0 ? v + 1 : 0) * 1000000;
                if (cheat) { v = 1; k.valid_until = t + (int64_t)3600 * 1000000000; }
                k.release_at = t + (int64_t)(30 + rnd(400)) * 1000000;
                rec("A %s %ld %ld %s %lld %d %d %lld %lld", client_name, my_pid, k.seq, k.name,
                    (long long)k.fence, k.permits, k.capacity, (long long)t_tick, (long long)k.valid_until);
                { int fd = open(state_path, O_WRONLY | O_CREAT | O_TRUNC, 0644); if (fd >= 0) close(fd); }
                if (v <= 0) end_belief(&k, "expired");
                break;
            }
            case SIMBA_EVENT_LOST:
                end_belief(&k, "lost");
                k.active = 0;
                next_acquire = t + (int64_t)rnd(100) * 1000000;
                break;
            case SIMBA_EVENT_RELEASED:
                end_belief(&k, "released");
                k.active = 0;
                next_acquire = t + (int64_t)rnd(100) * 1000000;
                break;
            case SIMBA_EVENT_TIMEOUT:
            case SIMBA_EVENT_ERROR:
                end_belief(&k, "ended");
                rec("X %s %ld %s %s %d %lld", client_name, my_pid, k.name, simba_event_name(e->type),
                    e->error, (long long)t);
                k.active = 0;
                next_acquire = t + (int64_t)rnd(200) * 1000000;
                break;
            default:
                break;
            }
        }
        note_validity(s, &k);
    }
    end_belief(&k, "exit");
    simba_destroy(s);
    close(log_fd);
    return 0;
}
