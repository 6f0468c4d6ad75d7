/* bench/peers/peer_getlock.c -- the MySQL GET_LOCK peer of `make bench-scale`
   (issue #15), in C: mutex hand-off latency with Q waiters, each waiter a
   thread with its own connection blocked in GET_LOCK, measured exactly as
   bench/peers/peer_lock.py measures its peers (and bench_scale.c simba).

       peer_getlock Q1,Q2,... [rounds]      (SIMBA_MYSQL_HOST/PORT/USER/PASSWORD)

   Why C: with pymysql, 500 and more threads each blocked in its own
   connection failed in the client library ("'NoneType' object has no
   attribute 'settimeout'": a connection closed under a waiting thread), so
   the Python peer could not give the Q = 1000 figure the issue compares
   against. Threads are the peer's business: simba itself has none.

   One round: the holder notes t0 and releases; the next thread to return
   from GET_LOCK notes t1; t1 - t0 is one hand-off. The old holder queues
   again only after that, so Q stays Q. Prints per Q:
       Q <q> p50_us <x> p99_us <y> n <rounds>     or     Q <q> skip <reason> */
#define _DEFAULT_SOURCE   /* usleep */
#define _POSIX_C_SOURCE 200809L
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct waiter {
    MYSQL *c;
    pthread_t t;
    int i;
    int go_release, go_requeue;   /* set by the main thread */
    double released_at;
} waiter;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int acquired_by = -1, stop_all, failed;
static double acquired_at;
static char lockname[64], fail_msg[200];

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void fail(const char *what, MYSQL *c) {
    pthread_mutex_lock(&mu);
    if (!failed) snprintf(fail_msg, sizeof fail_msg, "%s: %s", what, c ? mysql_error(c) : "");
    failed = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static int query_int(MYSQL *c, const char *sql, long *out) {
    MYSQL_RES *r;
    MYSQL_ROW row;
    if (mysql_query(c, sql) != 0 || !(r = mysql_store_result(c))) return -1;
    row = mysql_fetch_row(r);
    *out = row && row[0] ? atol(row[0]) : -1;
    mysql_free_result(r);
    return 0;
}

static MYSQL *connect_one(void) {
    const char *host = getenv("SIMBA_MYSQL_HOST"), *user = getenv("SIMBA_MYSQL_USER");
    const char *pw = getenv("SIMBA_MYSQL_PASSWORD"), *port = getenv("SIMBA_MYSQL_PORT");
    int attempt;
    for (attempt = 0; attempt < 20; attempt++) {   /* a burst of 1000 connects overruns the listen backlog */
        MYSQL *c = mysql_init(NULL);
        if (!c) return NULL;
        if (mysql_real_connect(c, host ? host : "127.0.0.1", user ? user : "root", pw ? pw : "", NULL,
                               port ? (unsigned)atoi(port) : 3306, NULL, 0))
            return c;
        mysql_close(c);
        usleep(50000u * (unsigned)(attempt + 1));
    }
    return NULL;
}

/* Wait (mu held) until flag is set or the run stops. */
static int wait_flag(int *flag) {
    while (!*flag && !stop_all && !failed) pthread_cond_wait(&cv, &mu);
    if (!*flag) return 0;
    *flag = 0;
    return 1;
}

static void *worker(void *arg) {
    waiter *w = (waiter *)arg;
    char sql[160];
    long v;
    for (;;) {
        snprintf(sql, sizeof sql, "SELECT GET_LOCK('%s', 120)", lockname);
        if (query_int(w->c, sql, &v) != 0 || v != 1) { fail("GET_LOCK", w->c); return NULL; }
        pthread_mutex_lock(&mu);
        acquired_by = w->i;
        acquired_at = now_us();
        pthread_cond_broadcast(&cv);
        if (!wait_flag(&w->go_release)) { pthread_mutex_unlock(&mu); return NULL; }
        pthread_mutex_unlock(&mu);
        w->released_at = now_us();
        snprintf(sql, sizeof sql, "SELECT RELEASE_LOCK('%s')", lockname);
        if (query_int(w->c, sql, &v) != 0) { fail("RELEASE_LOCK", w->c); return NULL; }
        pthread_mutex_lock(&mu);
        if (!wait_flag(&w->go_requeue)) { pthread_mutex_unlock(&mu); return NULL; }
        pthread_mutex_unlock(&mu);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The number of connections waiting in GET_LOCK for our name. */
static long waiting_now(MYSQL *admin) {
    char sql[200];
    long v = -1;
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT GET_LOCK(''%s''%%'",
             lockname);
    if (query_int(admin, sql, &v) != 0) return -1;
    return v;
}

static void one_q(int q, int rounds) {
    waiter *w = (waiter *)calloc((size_t)q + 1, sizeof *w);
    double *lat = (double *)calloc((size_t)rounds, sizeof *lat);
    MYSQL *admin = connect_one();
    int i, n = 0, holder, started = 0;
    double end;
    acquired_by = -1;
    stop_all = failed = 0;
    fail_msg[0] = 0;
    snprintf(lockname, sizeof lockname, "peer-%d-%d", (int)getpid(), q);
    if (!w || !lat || !admin) { printf("Q %d skip out of memory or no admin connection\n", q); goto out; }
    for (i = 0; i <= q; i++) {
        w[i].i = i;
        if (!(w[i].c = connect_one())) { printf("Q %d skip connection %d failed\n", q, i); goto out; }
    }
    /* the first holder, then the waiters, all queued before the rounds */
    if (pthread_create(&w[0].t, NULL, worker, &w[0]) != 0) { printf("Q %d skip no thread\n", q); goto out; }
    started = 1;
    pthread_mutex_lock(&mu);
    while (acquired_by < 0 && !failed) pthread_cond_wait(&cv, &mu);
    holder = acquired_by;
    pthread_mutex_unlock(&mu);
    for (i = 1; i <= q; i++) {
        if (pthread_create(&w[i].t, NULL, worker, &w[i]) != 0) { fail("pthread_create", NULL); break; }
        started++;
    }
    end = now_us() + 60e6;
    while (!failed && now_us() < end && waiting_now(admin) < q) usleep(20000);
    while (n < rounds && !failed) {
        double t1;
        int next;
        usleep(10000);
        pthread_mutex_lock(&mu);
        acquired_by = -1;
        w[holder].go_release = 1;
        pthread_cond_broadcast(&cv);
        while (acquired_by < 0 && !failed) pthread_cond_wait(&cv, &mu);
        next = acquired_by;
        t1 = acquired_at;
        pthread_mutex_unlock(&mu);
        if (failed) break;
        lat[n++] = t1 - w[holder].released_at;
        pthread_mutex_lock(&mu);
        w[holder].go_requeue = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        holder = next;
    }
    if (failed || !n) printf("Q %d skip %s\n", q, failed ? fail_msg : "no round finished");
    else {
        qsort(lat, (size_t)n, sizeof *lat, cmp_double);
        printf("Q %d p50_us %.0f p99_us %.0f n %d\n", q, lat[(n - 1) / 2], lat[(int)(0.99 * (n - 1) + 0.5)], n);
    }
out:
    fflush(stdout);
    /* the waiters are blocked in GET_LOCK: end them with their connections
       (the process exits right after; their threads are not joined) */
    pthread_mutex_lock(&mu);
    stop_all = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    (void)started;
    if (admin) mysql_close(admin);
}

int main(int argc, char **argv) {
    int rounds = argc > 2 ? atoi(argv[2]) : 20;
    if (argc < 2) { fprintf(stderr, "usage: peer_getlock Q1,Q2,... [rounds]\n"); return 2; }
    if (argc > 3 && strcmp(argv[3], "--one") == 0) {   /* one Q per process: its blocked threads die with it */
        one_q(atoi(argv[1]), rounds);
        _exit(0);
    }
    {
        char *list = strdup(argv[1]), *tok, *save = NULL;
        for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char cmd[512];
            int q = atoi(tok);
            snprintf(cmd, sizeof cmd, "'%s' %d %d --one", argv[0], q, q < 1000 ? rounds : (rounds / 2 > 5 ? rounds / 2 : 5));
            fflush(stdout);
            if (system(cmd) != 0) printf("Q %d skip the peer process failed\n", q);
            fflush(stdout);
        }
        free(list);
    }
    return 0;
}
