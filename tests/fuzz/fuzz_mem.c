/* fuzz_mem.c -- libFuzzer harness: API sequences on the in-memory backend.

   The input is a program: several clients (simba instances) on one
   simba_mem_server, a virtual clock, acquires of every shape (semaphores,
   exclusive, multi-resource, try-locks, timeouts, contend, re-entrant,
   keyed), releases, every fault of simba_mem_faults, kills, server restarts,
   paused clients, destroy and re-create, inspect / set_capacity / delete,
   and allocation failures (an allocator that fails on fuzzer-chosen calls).

   Checked after every step (abort = a finding):
   - safety: a client *believes* a hold from its ACQUIRED until LOST /
     RELEASED, and only while simba_valid_ms() > 0 (the local safety rule).
     On every resource the believed non-exclusive weights never exceed the
     largest capacity it ever had, and an exclusive believer is alone.
     (An admin simba_delete steals holds by design: a resource is exempt
     from a delete's submission until one lease after its DONE, the last
     one's when several are in flight.)
   - simba_valid_ms() > 0 only for a handle whose ACQUIRED was delivered,
     and never more than the ttl;
   - when a believed hold has expired by the clock, the next tick reports
     its LOST before any other event;
   - fences: never handed out twice on a resource; on a resource that was
     always a mutex, every ACQUIRED carries a larger fence than the last;
   - no event for an unknown handle or after a handle's final event, no
     second ACQUIRED without LOST/RELEASED in between (re-entrant joins
     excepted: they repeat ACQUIRED by contract);
   - at the end (faults healed, allocator working, everything released,
     the clock driven on): every request ended, and once every client is
     destroyed and the clock passed every lease, no entry is left.

   Every input class is on: capacities and permits near INT_MAX, fence
   history kept across simba_delete, idempotency keys (across sessions and
   on different resource sets), re-created clients that reuse a client id,
   re-entrant joins of a held handle, every allocation may fail. The bugs
   they found are fixed; tests/fuzz/regressions/mem/ replays them. */
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include <limits.h>
#include "fuzz_input.h"

enum { NCLI = 4, NRES = 4, NH = 160, NFENCE = 512, TTL = 300, TRANS = 200, LEASE = TTL + TRANS };

static const char *res_name[NRES] = {"m", "s2", "s3", "rw"};
static const int res_cap0[NRES] = {1, 2, 3, 2};

static int64_t vnow;
static int trace;   /* FZ_TRACE=1 in the environment: print every step (replaying an input) */
#define TR(...) do { if (trace) { printf("  t=%lld ", (long long)vnow); printf(__VA_ARGS__); printf("\n"); } } while (0)

/*--- the allocator: counts calls and fails the ones the input chose --------*/
static struct { long calls, fail_at; int fail_run; int enabled; } fa;
static void *fz_alloc(size_t n, void *user) {
    (void)user;
    fa.calls++;
    if (fa.enabled) {
        if (fa.fail_run > 0) { fa.fail_run--; TR("allocation %ld (%zu bytes) fails", fa.calls, n); return NULL; }
        if (fa.calls == fa.fail_at) { TR("allocation %ld (%zu bytes) fails", fa.calls, n); return NULL; }
    }
    return malloc(n);
}
static void fz_free(void *p, void *user) { (void)user; free(p); }

/*--- the virtual clock --------------------------------------------------------*/
static int64_t vclock(void *user) { (void)user; return vnow; }

/*--- the model ------------------------------------------------------------------*/
typedef struct fh {
    simba_lock h;
    int client, query;            /* query: an inspect/set_capacity/delete handle */
    int qkind, qres;              /* 0 inspect, 1 set_capacity, 2 delete */
    int res[SIMBA_MAX_RESOURCES], nres;
    int weight, exclusive, contend, reentrant;
    int holds;                    /* our count of the re-entrant hold count */
    int acquired;                 /* ACQUIRED seen, no LOST/RELEASED since */
    int extra_acq;                /* ACQUIREDs a re-entrant join may still repeat */
    int ended, release_asked;
} fh;

typedef struct cli {
    simba *s;
    int paused, gen;
} cli;

static struct {
    simba_mem_server *srv;
    cli c[NCLI];
    fh h[NH];
    int nh;
    int maxcap[NRES], cap[NRES], ever_resized[NRES];
    int deletes[NRES];            /* deletes in flight: safety and fence checks off... */
    int64_t exempt_until[NRES];   /* ...and until one lease after the last one ended */
    int64_t fences[NRES][NFENCE];
    int nfences[NRES];
    int64_t last_mutex_fence;
    uint64_t created;             /* clients created in this run: each one's seed */
} W;

/* FZ_SEED=N in the environment: another series of client seeds (a search
   for the one an intermittent finding needs); 0 by default. */
static uint64_t seed_base;

static void fz_log(void *user, simba_log_level level, const char *msg) {
    (void)user; (void)level;
    TR("log: %s", msg);
    /* under ENOMEM only an event of no lock (CONNECTED, DISCONNECTED) may be
       dropped, and an OWNER (the next change of holder repeats it): a lock
       keeps an event the queue has no room for until it is delivered */
    if (strstr(msg, "event dropped")) {
        FZ_CHECK(strstr(msg, "CONNECTED") != NULL, "a lock's event was dropped: %s", msg);
    }
    if (strstr(msg, "not reported")) {
        FZ_CHECK(strstr(msg, "OWNER") != NULL, "a lock's event was not reported: %s", msg);
    }
}

static int exempt(int r) { return W.deletes[r] > 0 || vnow < W.exempt_until[r]; }

/* A delete of r ended (answered, or its client is gone): the server did it
   or never will; its holders learn of it within a lease. */
static void delete_ended(int r) {
    W.deletes[r]--;
    if (W.exempt_until[r] < vnow + 2 * LEASE) W.exempt_until[r] = vnow + 2 * LEASE;
}

static fh *find(int client, simba_lock h) {
    int i;
    for (i = 0; i < W.nh; i++)
        if (W.h[i].client == client && !W.h[i].ended && W.h[i].h.id == h.id && W.h[i].h.gen == h.gen) return &W.h[i];
    return NULL;
}

static void note_fence(int r, int64_t f) {
    int i;
    if (exempt(r)) return;
    for (i = 0; i < W.nfences[r]; i++) FZ_CHECK(W.fences[r][i] != f, "fence %lld given twice on %s", (long long)f, res_name[r]);
    if (W.nfences[r] < NFENCE) W.fences[r][W.nfences[r]++] = f;
    /* only while "m" is a mutex: an acquire may have created it with a
       larger capacity, and then holders overlap and learn of their grants
       in any order */
    if (r == 0 && !W.ever_resized[0] && W.maxcap[0] == 1) {
        FZ_CHECK(f > W.last_mutex_fence, "mutex fence went backwards: %lld after %lld", (long long)f, (long long)W.last_mutex_fence);
        W.last_mutex_fence = f;
    }
}

static void on_event(int ci, const simba_event *ev) {
    fh *h;
    int i;
    TR("c%d %s h%u fence=%lld err=%d", ci, simba_event_name(ev->type), ev->lock.id, (long long)ev->fence, ev->error);
    if (ev->type == SIMBA_EVENT_CONNECTED || ev->type == SIMBA_EVENT_DISCONNECTED) return;
    h = find(ci, ev->lock);
    FZ_CHECK(h != NULL, "client %d: %s for an unknown or finished handle %u", ci, simba_event_name(ev->type), ev->lock.id);
    if (h->query) {
        FZ_CHECK(ev->type == SIMBA_EVENT_INFO || ev->type == SIMBA_EVENT_DONE || ev->type == SIMBA_EVENT_ERROR,
                 "query got %s", simba_event_name(ev->type));
        h->ended = 1;
        if (h->qkind == 2) delete_ended(h->qres);
        return;
    }
    switch (ev->type) {
    case SIMBA_EVENT_ACQUIRED:
        if (h->acquired) {
            FZ_CHECK(h->extra_acq > 0, "client %d handle %u ACQUIRED twice without LOST/RELEASED", ci, h->h.id);
            h->extra_acq--;
            return;
        }
        h->acquired = 1;
        for (i = 0; i < h->nres; i++) {
            int64_t f = simba_fence(W.c[ci].s, h->h, i);
            if (simba_valid_ms(W.c[ci].s, h->h) > 0) FZ_CHECK(f > 0, "held without a fence");
            if (f > 0) note_fence(h->res[i], f);
        }
        return;
    case SIMBA_EVENT_LOST:
        h->acquired = 0; h->extra_acq = 0;
        if (!h->contend || h->release_asked) h->ended = 1;
        return;
    case SIMBA_EVENT_ERROR:
        /* a contend handle retries after an ERROR (it ends only with
           simba_release); a hold it had is over either way */
        h->acquired = 0; h->extra_acq = 0;
        if (!h->contend || h->release_asked) h->ended = 1;
        return;
    case SIMBA_EVENT_RELEASED:
    case SIMBA_EVENT_TIMEOUT:
        h->acquired = 0;
        h->ended = 1;
        return;
    case SIMBA_EVENT_OWNER:
        FZ_CHECK(h->contend, "OWNER for a handle that does not contend");
        return;
    default:
        FZ_CHECK(0, "unexpected %s for a lock handle", simba_event_name(ev->type));
    }
}

static void tick(int ci) {
    simba *s = W.c[ci].s;
    simba_event ev[64];
    int expiring[NH], nexp = 0, i, j, n, k;
    if (!s) return;
    /* holds the clock alone has ended: their LOST must come before any other event */
    for (i = 0; i < W.nh; i++) {
        fh *h = &W.h[i];
        if (h->client == ci && !h->ended && !h->query && h->acquired && !h->release_asked && simba_valid_ms(s, h->h) == 0)
        { expiring[nexp++] = i; TR("c%d h%u: believed, valid_ms 0 before this tick", ci, h->h.id); }
    }
    do {
        n = simba_tick(s, NULL, 0, ev, 64);
        FZ_CHECK(n >= 0, "simba_tick failed: %d", n);
        for (k = 0; k < n; k++) {
            int left = 0, match = 0;
            for (j = 0; j < nexp; j++) {
                if (expiring[j] < 0) continue;
                if (W.h[expiring[j]].h.id == ev[k].lock.id && W.h[expiring[j]].h.gen == ev[k].lock.gen) match = 1;
                else left++;
            }
            if (match && ev[k].type == SIMBA_EVENT_LOST) {
                for (j = 0; j < nexp; j++)
                    if (expiring[j] >= 0 && W.h[expiring[j]].h.id == ev[k].lock.id && W.h[expiring[j]].h.gen == ev[k].lock.gen) expiring[j] = -1;
            } else if (left || match) {
                FZ_CHECK(0, "client %d: %s (handle %u) before the LOST of a hold expired by the clock", ci,
                         simba_event_name(ev[k].type), ev[k].lock.id);
            }
            on_event(ci, &ev[k]);
        }
    } while (n == 64);
    for (j = 0; j < nexp; j++) FZ_CHECK(expiring[j] < 0, "client %d: expired hold %u got no LOST in the next tick", ci, W.h[expiring[j]].h.id);
}

static void tick_all(int include_paused) {
    int i;
    for (i = 0; i < NCLI; i++) if (W.c[i].s && (include_paused || !W.c[i].paused)) tick(i);
}

/* a broken check: who believed what on resource r */
static void trace_believers(int r) {
    int i, k;
    for (i = 0; i < W.nh; i++) {
        fh *h = &W.h[i];
        if (h->ended || h->query || !h->acquired || !W.c[h->client].s) continue;
        for (k = 0; k < h->nres; k++)
            if (h->res[k] == r)
                TR("believer on %s: c%d h%u weight %d%s valid_ms %lld", res_name[r], h->client, h->h.id, h->weight,
                   h->exclusive ? " exclusive" : "", (long long)simba_valid_ms(W.c[h->client].s, h->h));
    }
}

static void check(void) {
    int r, i;
    for (i = 0; i < W.nh; i++) {   /* valid_ms > 0 only after a delivered ACQUIRED, never past ttl */
        fh *h = &W.h[i];
        int64_t v;
        if (h->ended || h->query || !W.c[h->client].s) continue;
        v = simba_valid_ms(W.c[h->client].s, h->h);
        FZ_CHECK(v <= TTL, "valid_ms %lld > ttl", (long long)v);
        if (v > 0) FZ_CHECK(h->acquired, "client %d handle %u valid without an ACQUIRED", h->client, h->h.id);
    }
    for (r = 0; r < NRES; r++) {
        long sum = 0;
        int excl = 0, believers = 0;
        if (exempt(r)) continue;
        for (i = 0; i < W.nh; i++) {
            fh *h = &W.h[i];
            int k, on = 0;
            if (h->ended || h->query || !h->acquired || !W.c[h->client].s) continue;
            for (k = 0; k < h->nres; k++) if (h->res[k] == r) on = 1;
            if (!on || simba_valid_ms(W.c[h->client].s, h->h) <= 0) continue;
            believers++;
            if (h->exclusive) excl = 1; else sum += h->weight < W.maxcap[r] ? h->weight : W.maxcap[r];
        }
        if (sum > W.maxcap[r] || (excl && believers > 1)) trace_believers(r);
        FZ_CHECK(sum <= W.maxcap[r], "%ld permits believed on %s (capacity at most %d)", sum, res_name[r], W.maxcap[r]);
        FZ_CHECK(!excl || believers == 1, "an exclusive hold on %s is believed with %d others", res_name[r], believers - 1);
    }
}

static simba *new_client(int ci) {
    simba_desc d;
    simba *c;
    char id[32];
    memset(&d, 0, sizeof d);
    d.backend = simba_mem(W.srv, NULL);
    d.tenant = "fz";
    /* a re-created client reuses its client id: sessions must still differ */
    snprintf(id, sizeof id, "c%d-0", ci);
    d.client_id = id;
    d.ttl_ms = TTL;
    d.transition_ms = TRANS;
    d.clock.now_ms = vclock;
    d.allocator.alloc = fz_alloc;
    d.allocator.free = fz_free;
    d.logger.func = fz_log;
    d.logger.user = &W.c[ci];
    d.logger.level = SIMBA_LOG_ERROR;
    W.c[ci].paused = 0;
    c = simba_create(&d, NULL);
    if (c) {
        /* every random choice of the client (session and request ids, the
           spread of its keepalives and back-offs) from the input's run, so
           that replaying an input replays its run: simba_create seeds an
           instance from /dev/urandom, the pid and the clocks */
        uint64_t st = seed_base << 32 | ++W.created;
        c->rng = simba__mix64(&st) | 1;   /* mixed: seeds a step apart would share a sequence */
        simba__session_new_id(c);
    }
    return c;
}

static void forget_client(int ci) {
    int i;
    for (i = 0; i < W.nh; i++) {
        fh *h = &W.h[i];
        if (h->client != ci || h->ended) continue;
        /* a delete still in flight: the server did it or never will */
        if (h->query && h->qkind == 2) delete_ended(h->qres);
        h->ended = 1;
    }
}

static fh *new_handle(void) {
    if (W.nh < NH) { memset(&W.h[W.nh], 0, sizeof W.h[W.nh]); return &W.h[W.nh]; }
    return NULL;
}

static void op_acquire(fz_in *in, int ci) {
    simba *s = W.c[ci].s;
    simba_lock_desc d;
    const char *names[SIMBA_MAX_RESOURCES];
    fh *h = new_handle(), *joined;
    uint8_t shape = fz_u8(in), b = fz_u8(in);
    int i, r0 = shape & 3, mincap;
    simba_lock lk;
    if (!s || !h) return;
    memset(&d, 0, sizeof d);
    h->client = ci;
    h->res[h->nres++] = r0;
    if (shape & 4) {                          /* multi-resource, any order */
        int r1 = (r0 + 1 + ((shape >> 3) % (NRES - 1))) % NRES;
        h->res[h->nres++] = r1;
        if (shape & 0x20) { int r2 = (r1 + 1) % NRES; if (r2 != r0) h->res[h->nres++] = r2; }
    }
    for (i = 0; i < h->nres; i++) names[i] = res_name[h->res[i]];
    if (h->nres == 1 && !(shape & 0x40)) d.name = names[0]; else { d.names = names; d.nnames = h->nres; }
    mincap = W.cap[h->res[0]];
    for (i = 0; i < h->nres; i++) if (W.cap[h->res[i]] < mincap) mincap = W.cap[h->res[i]];
    d.capacity = mincap;
    h->exclusive = (b & 7) == 0;
    h->weight = 1 + (int)((b >> 3) % (uint32_t)mincap);
    if ((b & 0xc0) == 0xc0) { d.capacity = INT_MAX - (b & 3); h->weight = INT_MAX - (b & 7); }
    d.permits = h->exclusive ? 0 : h->weight;
    d.exclusive = h->exclusive;
    switch (fz_u8(in) & 7) {
    case 0: d.wait_ms = 0; break;
    case 1: case 2: d.wait_ms = 1 + fz_u8(in) * 4; break;
    default: d.wait_ms = -1; break;
    }
    b = fz_u8(in);
    if ((b & 7) == 1 && h->nres == 1) { d.contend = 1; d.capacity = 1; d.permits = 0; d.exclusive = 0; h->exclusive = 0; h->weight = 1; }
    if ((b & 7) == 2) d.reentrant = 1;
    if ((b & 7) == 3) d.key = (b & 8) ? "k1" : "k2";
    /* an acquire may create a resource with its capacity: the bound grows */
    for (i = 0; i < h->nres; i++) if (d.capacity > W.maxcap[h->res[i]]) W.maxcap[h->res[i]] = d.capacity;
    lk = simba_acquire(s, &d);
    TR("c%d acquire %s%s%s n=%d cap=%d permits=%d excl=%d wait=%d contend=%d reentrant=%d key=%s -> h%u (%d)", ci, names[0],
       h->nres > 1 ? "+" : "", h->nres > 1 ? names[1] : "", h->nres, d.capacity, d.permits, d.exclusive, d.wait_ms,
       d.contend, d.reentrant, d.key ? d.key : "-", lk.id, simba_last_error(s));
    if (lk.id == 0) return;                    /* refused: no handle */
    joined = find(ci, lk);
    if (joined) {                              /* a re-entrant (or keyed) join: same handle */
        if (d.reentrant && !d.key) { joined->holds++; if (joined->acquired) joined->extra_acq++; }
        return;
    }
    h->h = lk;
    h->contend = d.contend;
    h->reentrant = d.reentrant;
    h->holds = 1;
    W.nh++;
}

static void op_release(fz_in *in, int ci) {
    int tries;
    for (tries = 0; tries < 4 && W.nh; tries++) {
        fh *h = &W.h[fz_pick(in, (uint32_t)W.nh)];
        int rc;
        if (h->client != ci || h->ended || h->query || !W.c[ci].s) continue;
        rc = simba_release(W.c[ci].s, h->h);
        TR("c%d release h%u -> %d", ci, h->h.id, rc);
        if (rc == SIMBA_OK && --h->holds <= 0) h->release_asked = 1;
        return;
    }
}

static void op_admin(fz_in *in, int ci) {
    simba *s = W.c[ci].s;
    uint8_t b = fz_u8(in);
    int r = b & 3, kind = (b >> 2) % 3, cap = 0;
    fh *h = new_handle();
    simba_lock lk;
    if (!s || !h) return;
    if (kind == 0) lk = simba_inspect(s, res_name[r], NULL);
    else if (kind == 1) {
        cap = 1 + (b >> 4) % 4;
        if ((b & 0xf0) == 0xf0) cap = INT_MAX;
        lk = simba_set_capacity(s, res_name[r], cap, NULL);
        if (lk.id) {
            W.cap[r] = cap;
            if (cap > W.maxcap[r]) W.maxcap[r] = cap;
            if (cap != 1) W.ever_resized[r] = 1;
        }
    } else lk = simba_delete(s, res_name[r], NULL);
    TR("c%d admin %s %s %d -> h%u", ci, kind == 0 ? "inspect" : kind == 1 ? "set_capacity" : "delete", res_name[r], cap, lk.id);
    if (lk.id == 0) return;
    h->h = lk; h->client = ci; h->query = 1; h->qkind = kind; h->qres = r;
    if (kind == 2) W.deletes[r]++;                  /* until its DONE (see on_event) */
    W.nh++;
}

static void op_faults(fz_in *in, int ci) {
    simba_mem_faults f;
    uint8_t a = fz_u8(in), b = fz_u8(in);
    if (!W.c[ci].s) return;
    memset(&f, 0, sizeof f);
    f.seed = fz_u8(in) | 1u;
    if (a & 1) f.drop_request_pct = b % 60;
    if (a & 2) f.drop_reply_pct = (b >> 2) % 60;
    if (a & 4) f.drop_push_pct = (b >> 1) % 101;
    if (a & 8) { f.delay_min_ms = b % 20; f.delay_max_ms = f.delay_min_ms + (b >> 3) % 200; }
    if (a & 16) f.reorder = 1;
    if (a & 32) f.partitioned = 1;
    if (a & 64) f.queue_limit = 1 + b % 4;
    TR("c%d faults%s drop_req=%d drop_reply=%d drop_push=%d delay=%d..%d reorder=%d partitioned=%d queue_limit=%d", ci,
       (a & 128) ? " (all)" : "", f.drop_request_pct, f.drop_reply_pct, f.drop_push_pct, f.delay_min_ms, f.delay_max_ms,
       f.reorder, f.partitioned, f.queue_limit);
    simba_mem_set_faults(W.srv, (a & 128) ? NULL : W.c[ci].s, &f);
}

static void heal(void) {
    int i;
    fa.enabled = 0;
    simba_mem_set_faults(W.srv, NULL, NULL);
    for (i = 0; i < NCLI; i++) W.c[i].paused = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    simba_mem_desc md;
    int i, r, steps = 0;
    int64_t end;
    trace = getenv("FZ_TRACE") != NULL;
    seed_base = getenv("FZ_SEED") ? strtoull(getenv("FZ_SEED"), NULL, 10) : 0;
    if (trace) setvbuf(stdout, NULL, _IONBF, 0);
    memset(&W, 0, sizeof W);
    memset(&fa, 0, sizeof fa);
    vnow = 1000000;
    for (r = 0; r < NRES; r++) W.maxcap[r] = W.cap[r] = res_cap0[r];
    memset(&md, 0, sizeof md);
    md.clock.now_ms = vclock;
    md.allocator.alloc = fz_alloc;
    md.allocator.free = fz_free;
    W.srv = simba_mem_server_create(&md);
    if (!W.srv) return 0;
    for (i = 0; i < NCLI; i++) W.c[i].s = new_client(i);
    fa.enabled = 1;
    while (fz_more(&in) && steps++ < 2000) {
        uint8_t op = fz_u8(&in);
        int ci = (op >> 4) % NCLI;
        TR("op %d client %d", op & 15, ci);
        switch (op & 15) {
        case 0: case 1: case 2: op_acquire(&in, ci); break;
        case 3: case 4: op_release(&in, ci); break;
        case 5: vnow += fz_u8(&in); break;
        case 6: vnow += 16 * (int64_t)fz_u8(&in); break;
        case 7: op_faults(&in, ci); break;
        case 8: if (W.c[ci].s) simba_mem_kill(W.srv, W.c[ci].s); break;
        case 9: if ((fz_u8(&in) & 3) == 0) simba_mem_server_restart(W.srv); break;
        case 10: W.c[ci].paused = !W.c[ci].paused; break;
        case 11:                                   /* destroy, then maybe re-create */
            forget_client(ci);
            simba_destroy(W.c[ci].s);
            W.c[ci].s = (fz_u8(&in) & 1) ? new_client(ci) : NULL;
            break;
        case 12: op_admin(&in, ci); break;
        case 13: {                                 /* arm an allocation failure */
            uint8_t b = fz_u8(&in);
            if (b & 1) fa.fail_run = 1 + (b >> 1) % 8; else fa.fail_at = fa.calls + 1 + (b >> 1);
            TR("allocation failures armed: run %d, at call %ld (now %ld)", fa.fail_run, fa.fail_at, fa.calls);
            break;
        }
        case 14: if (!W.c[ci].s) W.c[ci].s = new_client(ci); break;
        default: break;
        }
        tick_all(0);
        check();
    }
    /* heal: no faults, nobody paused, memory back, everyone releases */
    TR("heal");
    heal();
    for (i = 0; i < NCLI; i++) if (!W.c[i].s) W.c[i].s = new_client(i);
    for (i = 0; i < W.nh; i++) {
        fh *h = &W.h[i];
        if (h->ended || h->query || h->release_asked || !W.c[h->client].s) continue;
        while (h->holds > 0 && simba_release(W.c[h->client].s, h->h) == SIMBA_OK) h->holds--;
        h->release_asked = 1;
    }
    end = vnow + 60000;
    while (vnow < end) {
        int open = 0;
        vnow += 7;
        tick_all(1);
        check();
        for (i = 0; i < W.nh; i++) if (!W.h[i].ended && W.c[W.h[i].client].s) open++;
        if (!open) break;
    }
    for (i = 0; i < W.nh; i++) {
        fh *h = &W.h[i];
        if (h->ended || !W.c[h->client].s) continue;
        FZ_CHECK(0, "client %d handle %u (%s) never ended", h->client, h->h.id, h->query ? "query" : "lock");
    }
    /* every client gone, every lease past: touching the resources purges what is left */
    for (i = 0; i < NCLI; i++) { simba_destroy(W.c[i].s); W.c[i].s = NULL; }
    vnow += 4 * LEASE;
    W.c[0].s = new_client(0);
    for (r = 0; r < NRES && W.c[0].s; r++) {
        simba_lock q = simba_inspect(W.c[0].s, res_name[r], NULL);
        int t;
        for (t = 0; t < 200 && q.id; t++) {
            simba_event ev[8];
            int n = simba_tick(W.c[0].s, NULL, 0, ev, 8), k, done = 0;
            for (k = 0; k < n; k++) if (ev[k].lock.id == q.id && ev[k].lock.gen == q.gen) done = 1;
            if (done) break;
            vnow += 5;
        }
    }
    simba_destroy(W.c[0].s);
    W.c[0].s = NULL;
    FZ_CHECK(simba_mem_server_stats(W.srv).entries == 0, "%d entries left on the server", simba_mem_server_stats(W.srv).entries);
    simba_mem_server_destroy(W.srv);
    return 0;
}
