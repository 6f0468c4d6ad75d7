/* semaphore_pool.c -- a worker pool limited by a counting semaphore.

   Eight workers share a licence pool of 3 permits ("render-licences",
   capacity 3). Most jobs need one permit; every third job is big and needs
   two (.permits = 2). Each worker acquires, runs its job for a while (a timer
   in the loop, not a sleep: the loop stays free for everyone else), then
   releases. Here the workers are 8 simba clients in one process on the
   in-memory backend; in production they are 8 processes on any machines and
   only the backend line in start_worker() changes.

   The queue is strictly FIFO: a waiting 2-permit job is not overtaken by a
   1-permit job behind it, even when one permit is free, so big jobs never
   starve. Every grant has a fence, unique per resource, to hand to the
   storage the job writes to.

   Checked after every tick: the permits held (sum over the workers whose
   simba_valid_ms() > 0) never exceed 3, and no two grants share a fence.
   Exit 0 when all 8 jobs ran that way, 1 otherwise. */
#define SIMBA_IMPLEMENTATION
#include "simba.h"      /* first: it turns on the POSIX we use (poll, clock_gettime) */
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include <poll.h>
#include <stdio.h>
#include <time.h>

enum { WORKERS = 8, CAPACITY = 3, FDS_PER_WORKER = 4, GIVE_UP_MS = 15000 };

typedef struct worker {
    int no;
    int permits;
    int job_ms;
    simba *s;
    simba_lock lock;
    int64_t fence;
    int64_t job_end;         /* -1: not running */
    int done;                /* its RELEASED arrived */
} worker;

static worker workers[WORKERS];
static simba_mem_server *server;
static int64_t started;
static int failed, peak;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double secs(void) { return (double)(now_ms() - started) / 1000.0; }

static simba *start_worker(worker *w) {
    char id[32];
    snprintf(id, sizeof id, "worker-%d", w->no);
    /* The one line to change for a real backend, e.g.
         .backend = simba_redis(&(simba_redis_desc){ .host = "127.0.0.1", .port = 6379 }),
         .backend = simba_mysql(&(simba_mysql_desc){ .host = "127.0.0.1", .database = "app" }),
         .backend = simba_zk(&(simba_zk_desc){ .hosts = "127.0.0.1:2181" }),  */
    return simba_create(&(simba_desc){ .backend = simba_mem(server, NULL), .client_id = id }, NULL);
}

/* The permits held right now, as the workers themselves see it. */
static int permits_in_use(void) {
    int i, sum = 0;
    for (i = 0; i < WORKERS; i++)
        if (simba_valid_ms(workers[i].s, workers[i].lock) > 0) sum += workers[i].permits;
    return sum;
}

static void check_fence_unique(const worker *w) {
    int i;
    for (i = 0; i < WORKERS; i++)
        if (&workers[i] != w && workers[i].fence == w->fence) {
            printf("  FAIL: workers %d and %d got the same fence\n", w->no, workers[i].no);
            failed = 1;
        }
}

static void on_event(worker *w, const simba_event *ev) {
    switch (ev->type) {
    case SIMBA_EVENT_ACQUIRED:
        w->fence = ev->fence;
        w->job_end = now_ms() + w->job_ms;
        check_fence_unique(w);
        printf("[%4.2f s] worker %d got %d permit%s (fence %lld), %d of %d in use\n", secs(), w->no,
               w->permits, w->permits > 1 ? "s" : "", (long long)ev->fence, permits_in_use(), CAPACITY);
        break;
    case SIMBA_EVENT_RELEASED:
        w->done = 1;
        break;
    case SIMBA_EVENT_LOST:       /* stop the job at once: its writes would be refused */
    case SIMBA_EVENT_TIMEOUT:
    case SIMBA_EVENT_ERROR:
        printf("  FAIL: worker %d: unexpected %s (%d)\n", w->no, simba_event_name(ev->type), ev->error);
        w->job_end = -1;
        w->done = 1;
        failed = 1;
        break;
    default:
        break;
    }
}

static void finish_jobs(void) {
    int i;
    for (i = 0; i < WORKERS; i++) {
        worker *w = &workers[i];
        if (w->job_end < 0 || now_ms() < w->job_end) continue;
        w->job_end = -1;
        simba_release(w->s, w->lock);
        printf("[%4.2f s] worker %d is done and gives back %d, %d of %d in use\n", secs(), w->no,
               w->permits, permits_in_use(), CAPACITY);
    }
}

/* One round of the loop: poll over every worker's fds and job timers, tick all. */
static void run_once(void) {
    struct pollfd fds[WORKERS * FDS_PER_WORKER];
    int first[WORKERS], count[WORKERS], nfds = 0, timeout = 1000, i, k, used;
    for (i = 0; i < WORKERS; i++) {
        int t = simba_timeout_ms(workers[i].s);
        first[i] = nfds;
        count[i] = simba_pollfds(workers[i].s, fds + nfds, FDS_PER_WORKER);
        if (count[i] < 0) count[i] = 0;
        if (count[i] > FDS_PER_WORKER) count[i] = FDS_PER_WORKER;
        nfds += count[i];
        if (t >= 0 && t < timeout) timeout = t;
        if (workers[i].job_end >= 0) {
            int64_t left = workers[i].job_end - now_ms();
            if (left < timeout) timeout = left > 0 ? (int)left : 0;
        }
    }
    poll(fds, (nfds_t)nfds, timeout);
    for (i = 0; i < WORKERS; i++) {
        simba_event ev[16];
        int n = simba_tick(workers[i].s, fds + first[i], count[i], ev, 16);
        for (k = 0; k < n; k++) on_event(&workers[i], &ev[k]);
    }
    finish_jobs();
    used = permits_in_use();
    if (used > peak) peak = used;
    if (used > CAPACITY) { printf("  FAIL: %d permits in use, capacity %d\n", used, CAPACITY); failed = 1; }
}

static int all_done(void) {
    int i;
    for (i = 0; i < WORKERS; i++) if (!workers[i].done) return 0;
    return 1;
}

int main(void) {
    int i, ok = 1;
    started = now_ms();
    server = simba_mem_server_create(NULL);
    for (i = 0; i < WORKERS && server; i++) {
        worker *w = &workers[i];
        w->no = i;
        w->permits = i % 3 == 2 ? 2 : 1;
        w->job_ms = 150 + (i * 70) % 250;
        w->job_end = -1;
        if (!(w->s = start_worker(w))) { ok = 0; break; }
        w->lock = simba_acquire(w->s, &(simba_lock_desc){ .name = "render-licences",
            .capacity = CAPACITY, .permits = w->permits, .wait_ms = 10000, .user = w });
        if (w->lock.id == 0) { printf("acquire: %s\n", simba_strerror(simba_last_error(w->s))); ok = 0; }
    }
    if (!server || !ok) { printf("FAIL: cannot start the workers\n"); failed = 1; }
    else printf("8 workers share %d permits; workers 2 and 5 need 2 each\n", CAPACITY);
    while (!failed && !all_done() && now_ms() - started < GIVE_UP_MS) run_once();
    if (!failed && !all_done()) { printf("FAIL: not done after %d ms\n", GIVE_UP_MS); failed = 1; }
    for (i = 0; i < WORKERS; i++) simba_destroy(workers[i].s);
    simba_mem_server_destroy(server);
    if (failed) printf("FAILED\n");
    else printf("ok: 8 jobs done, at most %d of %d permits in use at any time\n", peak, CAPACITY);
    return failed;
}
