/* test_sim.c -- seeded random schedules on the in-memory backend with a
   virtual clock and faults (paused clients, dropped requests, replies and
   pushes, delayed and reordered replies, partitions, server restarts). At every step it checks:

   - safety: for every resource, the weights held by clients that believe
     they hold it (simba_valid_ms > 0) never exceed its capacity;
   - FIFO on the server: granted entries are exactly a prefix of each queue,
     queue order is insertion order, and fences increase along the queue;
   - fences: on a mutex, every ACQUIRED carries a larger fence than the one
     before; on any resource no fence is handed out twice;
   - every request ends: after the faults heal, every handle ends with
     RELEASED, TIMEOUT, LOST or ERROR, and the server's queues are empty;
   - no leak (this program runs under ASan and valgrind in `make asan` and
     `make valgrind`).

   A failing schedule prints its seed; `build/test_sim --seed N -v` replays it
   and prints every step. `make test-mem` runs seeds 1..500 of every profile;
   `make sim-long` many more (SIM_SEEDS, from SIM_FIRST). */
#include "harness.h"
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"

enum { SIM_CLIENTS = 5, SIM_RES = 3, SIM_HANDLES = 64, SIM_FENCES = 4096 };

static int64_t vnow;                         /* the virtual clock, shared by all */
static int64_t vclock(void *user) { (void)user; return vnow; }

static const char *res_name[SIM_RES] = {"mutex", "sem2", "rw3"};
static const int res_cap[SIM_RES] = {1, 2, 3};

typedef struct sim_handle {
    simba_lock h;
    int client;
    int res[SIM_RES], nres;
    int permits, exclusive, capacity, wait_ms;
    int key;                    /* -1: none; else the client's key number */
    int ended, released_asked;
} sim_handle;

typedef struct sim {
    uint64_t rng;
    int verbose;
    simba_mem_server *srv;
    simba *c[SIM_CLIENTS];
    int paused[SIM_CLIENTS];
    simba_mem_faults faults[SIM_CLIENTS];
    sim_handle hs[SIM_HANDLES];
    int nhs;
    int64_t last_mutex_fence;
    int64_t fences[SIM_RES][SIM_FENCES];
    int nfences[SIM_RES];
    char why[256];
    int step;
} sim;

typedef struct sim_profile {
    const char *name;
    int drop_pct, delay_max, reorder, partitions, pauses, restarts;
} sim_profile;

static uint32_t rnd(sim *m, uint32_t n) { return n ? (uint32_t)(simba__mix64(&m->rng) % n) : 0; }

static int fail(sim *m, const char *fmt, long long a, long long b) {
    snprintf(m->why, sizeof m->why, fmt, a, b);
    return 0;
}

static sim_handle *find_handle(sim *m, int client, simba_lock h) {
    int i;
    for (i = 0; i < m->nhs; i++)
        if (m->hs[i].client == client && m->hs[i].h.id == h.id && m->hs[i].h.gen == h.gen && !m->hs[i].ended)
            return &m->hs[i];
    return NULL;
}

static int eff(const sim_handle *h, int r) {
    return h->exclusive ? res_cap[r] : h->permits;
}

/* Record a fence; a fence handed out twice on one resource is a failure. */
static int note_fence(sim *m, int r, int64_t f) {
    int i;
    for (i = 0; i < m->nfences[r]; i++) if (m->fences[r][i] == f) return fail(m, "fence %lld given twice on resource %lld", f, r);
    if (m->nfences[r] < SIM_FENCES) m->fences[r][m->nfences[r]++] = f;
    if (r == 0) {
        if (f <= m->last_mutex_fence) return fail(m, "mutex fence went backwards: %lld after %lld", f, m->last_mutex_fence);
        m->last_mutex_fence = f;
    }
    return 1;
}

static int handle_event(sim *m, int client, const simba_event *ev) {
    sim_handle *h;
    int i;
    if (ev->type == SIMBA_EVENT_CONNECTED || ev->type == SIMBA_EVENT_DISCONNECTED) return 1;
    h = find_handle(m, client, ev->lock);
    if (!h) return fail(m, "event for unknown handle %lld (type %lld)", (long long)ev->lock.id, ev->type);
    if (m->verbose) printf("    t=%lld c%d h%u %s fence=%lld err=%d\n", (long long)vnow, client, ev->lock.id,
                           simba_event_name(ev->type), (long long)ev->fence, ev->error);
    switch (ev->type) {
    case SIMBA_EVENT_ACQUIRED:
        for (i = 0; i < h->nres; i++) {
            int64_t f = simba_fence(m->c[client], h->h, i);
            if (f <= 0 && simba_valid_ms(m->c[client], h->h) > 0) return fail(m, "held without fence %lld %lld", f, i);
            if (f > 0 && !note_fence(m, h->res[i], f)) return 0;
        }
        return 1;
    case SIMBA_EVENT_RELEASED:
    case SIMBA_EVENT_TIMEOUT:
    case SIMBA_EVENT_LOST:
    case SIMBA_EVENT_ERROR:
        h->ended = 1;
        return 1;
    default:
        return 1;
    }
}

/* Safety: believed holds never exceed a capacity. */
static int check_safety(sim *m) {
    int r, i;
    for (r = 0; r < SIM_RES; r++) {
        int sum = 0;
        for (i = 0; i < m->nhs; i++) {
            sim_handle *h = &m->hs[i];
            int k;
            if (h->ended || !m->c[h->client] || simba_valid_ms(m->c[h->client], h->h) <= 0) continue;
            for (k = 0; k < h->nres; k++) if (h->res[k] == r) sum += eff(h, r);
        }
        if (sum > res_cap[r]) return fail(m, "%lld permits believed held on a resource of capacity %lld", sum, res_cap[r]);
    }
    return 1;
}

/* FIFO on the server: the granted entries are a prefix with increasing
   fences (a queue is an array in insertion order: entries are appended and
   removed, never moved ahead). */
static int check_server_queues(sim *m) {
    uint32_t b;
    for (b = 0; b < m->srv->nrb; b++) {
        simba__mem_res *r;
        for (r = m->srv->rb[b]; r; r = r->next) {
            int i, seen_waiting = 0;
            for (i = 0; i < r->n; i++) {
                if (!r->q[i].fence) { seen_waiting = 1; continue; }
                if (seen_waiting) return fail(m, "entry %lld granted behind a waiting one (queue of %lld)", i, r->n);
                if (i && r->q[i].fence <= r->q[i - 1].fence) return fail(m, "fences not increasing along the queue at %lld/%lld", i, r->n);
            }
        }
    }
    return 1;
}

static void tick_all(sim *m, int include_paused) {
    int i;
    for (i = 0; i < SIM_CLIENTS; i++) {
        simba_event ev[32];
        int n, k;
        if (!m->c[i] || (m->paused[i] && !include_paused)) continue;
        do {
            n = simba_tick(m->c[i], NULL, 0, ev, 32);
            for (k = 0; k < n; k++) if (!handle_event(m, i, &ev[k]) && !m->why[0]) snprintf(m->why, sizeof m->why, "event handling");
        } while (n == 32);
    }
}

/* Ask for what h describes; a keyed request that joins a live handle of
   ours is not a new handle. */
static void sim_acquire(sim *m, sim_handle *h) {
    simba_lock_desc d;
    const char *names[SIM_RES];
    char key[16];
    int i;
    memset(&d, 0, sizeof d);
    for (i = 0; i < h->nres; i++) names[i] = res_name[h->res[i]];
    if (h->nres == 1) d.name = names[0]; else { d.names = names; d.nnames = h->nres; }
    d.capacity = h->capacity;
    d.permits = h->permits;
    d.exclusive = h->exclusive;
    d.wait_ms = h->wait_ms;
    if (h->key >= 0) { snprintf(key, sizeof key, "c%dk%d", h->client, h->key); d.key = key; }
    h->h = simba_acquire(m->c[h->client], &d);
    if (h->h.id == 0) return;                      /* refused: not a handle */
    if (find_handle(m, h->client, h->h)) return;   /* joined a live handle of the same key */
    if (m->verbose) printf("    t=%lld c%d acquire h%u %s%s%s permits=%d excl=%d wait=%d key=%d\n", (long long)vnow,
                           h->client, h->h.id, names[0], h->nres > 1 ? "+" : "", h->nres > 1 ? res_name[h->res[1]] : "",
                           h->permits, h->exclusive, d.wait_ms, h->key);
    m->nhs++;
}

static void random_acquire(sim *m, int client) {
    sim_handle *h;
    int i, r0;
    if (m->nhs >= SIM_HANDLES) return;
    h = &m->hs[m->nhs];
    memset(h, 0, sizeof *h);
    h->client = client;
    r0 = (int)rnd(m, SIM_RES);
    h->res[h->nres++] = r0;
    if (rnd(m, 4) == 0) {                          /* multi-resource, either order */
        int r1 = (r0 + 1 + (int)rnd(m, SIM_RES - 1)) % SIM_RES;
        h->res[h->nres++] = r1;
    }
    /* every resource exists from the start with its own capacity; a request
       asks for at most the smallest capacity among its resources */
    h->capacity = res_cap[h->res[0]];
    for (i = 0; i < h->nres; i++) if (res_cap[h->res[i]] < h->capacity) h->capacity = res_cap[h->res[i]];
    h->exclusive = rnd(m, 5) == 0;
    h->permits = h->exclusive ? 1 : 1 + (int)rnd(m, (uint32_t)h->capacity);
    switch (rnd(m, 4)) {
    case 0: h->wait_ms = 0; break;
    case 1: h->wait_ms = 20 + (int)rnd(m, 400); break;
    default: h->wait_ms = -1; break;
    }
    h->key = rnd(m, 3) == 0 ? (int)rnd(m, 2) : -1;  /* a few keys per client, reused */
    sim_acquire(m, h);
}

/* Release one of the client's handles; a keyed one is sometimes asked for
   again at once with the same key, while its release is still on its way. */
static void random_release(sim *m, int client) {
    int i, tries;
    for (tries = 0; tries < 4; tries++) {
        sim_handle *h;
        if (!m->nhs) return;
        i = (int)rnd(m, (uint32_t)m->nhs);
        h = &m->hs[i];
        if (h->client != client || h->ended || h->released_asked) continue;
        if (simba_release(m->c[client], h->h) == SIMBA_OK) h->released_asked = 1;
        if (m->verbose) printf("    t=%lld c%d release h%u\n", (long long)vnow, client, h->h.id);
        if (h->key >= 0 && rnd(m, 2) == 0 && m->nhs < SIM_HANDLES) {
            sim_handle *again = &m->hs[m->nhs];
            *again = *h;
            again->ended = again->released_asked = 0;
            sim_acquire(m, again);
        }
        return;
    }
}

static void random_faults(sim *m, const sim_profile *p, int client) {
    simba_mem_faults *f = &m->faults[client];
    memset(f, 0, sizeof *f);
    f->seed = simba__mix64(&m->rng) | 1;
    if (p->drop_pct) {
        f->drop_reply_pct = (int)rnd(m, (uint32_t)p->drop_pct + 1);
        f->drop_request_pct = (int)rnd(m, (uint32_t)p->drop_pct + 1);
        f->drop_push_pct = (int)rnd(m, (uint32_t)p->drop_pct + 1);
    }
    if (p->delay_max) { f->delay_max_ms = (int)rnd(m, (uint32_t)p->delay_max + 1); f->reorder = p->reorder && rnd(m, 2); }
    if (p->partitions && rnd(m, 4) == 0) f->partitioned = 1;
    simba_mem_set_faults(m->srv, m->c[client], f);
}

/* A client whose every random choice (client id, session ids, request ids,
   the spread of its keepalives) comes from the schedule's seed, so that a
   failing seed replays the same schedule: simba_create seeds an instance
   from /dev/urandom, the pid and the clocks. */
static simba *new_client(sim *m, int i) {
    simba_desc d;
    simba *c;
    char id[16];
    memset(&d, 0, sizeof d);
    snprintf(id, sizeof id, "c%d", i);
    d.backend = simba_mem(m->srv, NULL);
    d.tenant = "sim";
    d.client_id = id;
    d.ttl_ms = 300;
    d.transition_ms = 200;
    d.clock.now_ms = vclock;
    c = simba_create(&d, NULL);
    if (c) {
        c->rng = simba__mix64(&m->rng) | 1;
        simba__session_new_id(c);
    }
    return c;
}

/* One schedule. Returns 1 if every invariant held. */
static int run_schedule(const sim_profile *p, uint64_t seed, int steps, int verbose) {
    static sim m;
    simba_mem_desc md;
    int i, ok = 1;
    memset(&m, 0, sizeof m);
    m.rng = seed * 0x9e3779b97f4a7c15ull + 1;
    m.verbose = verbose;
    vnow = 1000000;
    memset(&md, 0, sizeof md);
    md.clock.now_ms = vclock;
    m.srv = simba_mem_server_create(&md);
    for (i = 0; i < SIM_CLIENTS; i++) m.c[i] = new_client(&m, i);
    /* create every resource with its capacity first */
    for (i = 0; i < SIM_RES; i++) {
        simba_lock_desc d;
        memset(&d, 0, sizeof d);
        d.name = res_name[i]; d.capacity = res_cap[i]; d.wait_ms = -1;
        m.hs[m.nhs].h = simba_acquire(m.c[0], &d);
        m.hs[m.nhs].client = 0; m.hs[m.nhs].res[0] = i; m.hs[m.nhs].nres = 1; m.hs[m.nhs].permits = 1;
        m.hs[m.nhs].key = -1;
        m.nhs++;
    }
    for (m.step = 0; m.step < steps && ok; m.step++) {
        int who = (int)rnd(&m, SIM_CLIENTS);
        uint32_t act = rnd(&m, 100);
        vnow += rnd(&m, 16);
        if (act < 30) random_acquire(&m, who);
        else if (act < 55) random_release(&m, who);
        else if (act < 60 && p->pauses) { m.paused[who] = !m.paused[who]; if (verbose) printf("    t=%lld c%d %s\n", (long long)vnow, who, m.paused[who] ? "pause" : "resume"); }
        else if (act < 66 && (p->drop_pct || p->delay_max || p->partitions)) random_faults(&m, p, who);
        else if (act < 67 && p->restarts && rnd(&m, 4) == 0) { if (verbose) printf("    t=%lld server restart\n", (long long)vnow); simba_mem_server_restart(m.srv); }
        tick_all(&m, 0);
        if (m.why[0] || !check_safety(&m) || !check_server_queues(&m)) ok = 0;
    }
    /* heal: no faults, nobody paused, everyone releases; every request must end */
    if (ok) {
        int64_t end;
        for (i = 0; i < SIM_CLIENTS; i++) { m.paused[i] = 0; simba_mem_set_faults(m.srv, m.c[i], NULL); }
        for (i = 0; i < m.nhs; i++) {
            sim_handle *h = &m.hs[i];
            if (!h->ended && !h->released_asked && simba_release(m.c[h->client], h->h) == SIMBA_OK) h->released_asked = 1;
        }
        end = vnow + 20000;
        while (vnow < end && ok) {
            int open = 0;
            vnow += 5;
            tick_all(&m, 1);
            if (m.why[0] || !check_safety(&m) || !check_server_queues(&m)) ok = 0;
            for (i = 0; i < m.nhs; i++) if (!m.hs[i].ended && m.hs[i].h.id) open++;
            if (!open && simba_mem_server_stats(m.srv).entries == 0) break;
        }
        if (ok) {
            for (i = 0; i < m.nhs; i++)
                if (!m.hs[i].ended && m.hs[i].h.id) { ok = fail(&m, "handle %lld of client %lld never ended", m.hs[i].h.id, m.hs[i].client); break; }
        }
        if (ok && simba_mem_server_stats(m.srv).entries != 0) {
            /* what is left must belong to dead sessions (abandoned ones whose
               CLOSE was lost): after one lease, touching the resources purges them */
            int64_t until = vnow + 600;
            int r;
            while (vnow < until) { vnow += 10; tick_all(&m, 1); }
            for (r = 0; r < SIM_RES; r++) {
                simba_event ev;
                simba_lock q = simba_inspect(m.c[1], res_name[r], NULL);
                vnow += 1;
                if (simba_wait(m.c[1], q, 1000, &ev) != 1 || ev.type != SIMBA_EVENT_INFO) { ok = fail(&m, "inspect %lld failed (%lld)", r, ev.error); break; }
            }
        }
        if (ok && simba_mem_server_stats(m.srv).entries != 0)
            ok = fail(&m, "%lld entries left on the server (%lld)", simba_mem_server_stats(m.srv).entries, 0);
    }
    if (!ok) printf("  # profile %s seed %llu failed at step %d: %s\n    replay: build/test_sim --profile %s --seed %llu -v\n",
                    p->name, (unsigned long long)seed, m.step, m.why, p->name, (unsigned long long)seed);
    for (i = 0; i < SIM_CLIENTS; i++) simba_destroy(m.c[i]);
    simba_mem_server_destroy(m.srv);
    return ok;
}

static const sim_profile profiles[] = {
    {"calm", 0, 0, 0, 0, 0, 0},
    {"drops", 20, 0, 0, 0, 0, 0},
    {"delays", 0, 40, 1, 0, 0, 0},
    {"drops-reorder", 20, 200, 1, 0, 0, 0},
    {"pauses", 0, 10, 0, 0, 1, 0},
    {"partitions", 5, 20, 1, 1, 1, 0},
    {"restarts", 5, 20, 1, 0, 1, 1},
};
enum { NPROFILES = sizeof profiles / sizeof profiles[0] };

static int g_seeds = 500, g_first = 1, g_steps = 400;
static const sim_profile *g_profile;

static void run_profile(void) {
    int s, failures = 0;
    for (s = g_first; s < g_first + g_seeds && failures < 3; s++)
        if (!run_schedule(g_profile, (uint64_t)s, g_steps, 0)) failures++;
    if (failures) h_fail(__FILE__, __LINE__, "a schedule broke an invariant (seed above)");
}

int main(int argc, char **argv) {
    int i;
    long long seed = -1;
    const char *only = NULL;
    int verbose = 0;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) { g_seeds = 40; }
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) g_seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--first") && i + 1 < argc) g_first = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--profile") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "-v")) verbose = 1;
    }
    for (i = 0; i < NPROFILES; i++) {
        char name[64];
        if (only && strcmp(only, profiles[i].name) != 0) continue;
        g_profile = &profiles[i];
        if (seed >= 0) {
            int ok = run_schedule(g_profile, (uint64_t)seed, g_steps, verbose);
            if (ok) h_passed++; else h_failed++;
            printf("%s - replay %s seed %lld\n", ok ? "ok" : "not ok", g_profile->name, seed);
            continue;
        }
        if (g_first == 1) snprintf(name, sizeof name, "t_sim_%s (%d seeds x %d steps)", profiles[i].name, g_seeds, g_steps);
        else snprintf(name, sizeof name, "t_sim_%s (seeds %d.. x %d, %d steps)", profiles[i].name, g_first, g_seeds, g_steps);
        h_run(name, run_profile);
    }
    return harness_summary();
}
