/* fuzz_redis.c -- libFuzzer harness: simba_redis against a hostile fake Redis.

   The harness listens on 127.0.0.1 (a free port), points one simba client
   at it and serves both of its connections itself, in the same thread: one
   loop polls simba's fds and the server's, reads simba's commands (RESP),
   and answers each with a reply the input chooses: the right one, an error
   (ERR, NOSCRIPT, NOPERM, LOADING, ...), a wrong type, huge or negative
   integers, wrong element counts, deep or big arrays, a truncated reply and
   a close, garbage, silence, a status out of range, an oversized owner. On
   the subscribe connection it forges pushes. simba runs on a virtual clock,
   so timeouts, backoffs and keepalives happen within the loop's bound.

   Asserted (abort = a finding):
   - no crash, leak, UB, signal (ASan/UBSan; a SIGPIPE aborts);
   - no stall: after the hostile part the server turns sane (grants
     everything) and, within a bounded number of loop turns, the client is
     connected again and every request has ended once released;
   - no false grant: an ACQUIRED only for a handle whose resource the fake
     server answered as granted (ENQUEUE/POLL with granted = 1, or a push)
     with exactly that fence; no second ACQUIRED without LOST/RELEASED in
     between; no event for an unknown or finished handle.

   What is NOT sent, on purpose (hiredis 0.14 limitations, documented in
   simba_redis.h, not simba's): more replies than commands on the main
   connection (hiredis assert()s), and on the subscribe connection arrays
   with fewer than two elements, a non-string type or channel, or an
   unsubscribe (hiredis assert()s). Array headers
   up to INT_MAX elements are sent (simba_redis limits what its reader
   accepts; hiredis 0.14 would allocate the pointer array up front). */
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_REDIS_IMPLEMENTATION
#include "simba_redis.h"
#include "fuzz_input.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <strings.h>

/* SIGPIPE (found here): simba_redis must never let a write to a connection
   the server has closed raise it, so the harness aborts if one does. */
#include <signal.h>

enum { NCONN = 8, NH = 48, NGRANT = 2048, MAXARG = 64, TURNS = 1500, HEAL_TURNS = 3000 };

static int trace;
#define TR(...) do { if (trace) { printf("  t=%lld ", (long long)vnow); printf(__VA_ARGS__); printf("\n"); } } while (0)

static int64_t vnow;
static int64_t vclock(void *u) { (void)u; return vnow; }

/*--- growable byte buffers ---------------------------------------------------------*/
typedef struct buf { char *p; size_t n, cap; } buf;
static void buf_add(buf *b, const void *d, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        b->p = (char *)realloc(b->p, nc);
        if (!b->p) abort();
        b->cap = nc;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void buf_fmt(buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) buf_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
static void buf_drop(buf *b, size_t n) { if (!n) return; memmove(b->p, b->p + n, b->n - n); b->n -= n; b->p[b->n] = 0; }
static void buf_free(buf *b) { free(b->p); b->p = NULL; b->n = b->cap = 0; }

/*--- the fake server's state ----------------------------------------------------------*/
typedef struct sconn {
    int fd;
    buf in, out;
    int sub;                    /* 1: the subscribe connection (CLIENT SETNAME simba-sub:...) */
    int subscribed;
    int close_after;            /* close once `out` is flushed */
    int mute;                   /* hung: no reply to anything any more */
    char channel[256];
} sconn;

typedef struct grant { char name[32]; int64_t fence; } grant;

typedef struct hnd {
    simba_lock h;
    char name[32];
    int acquired, ended, release_asked;
} hnd;

static struct {
    int lfd, port;
    sconn c[NCONN];
    simba *s;
    hnd h[NH];
    int nh;
    grant g[NGRANT];
    int ng;
    int64_t fence;
    int sane;                   /* heal phase: every reply right, grants at once */
    char requests[8][128];      /* request ids seen, for forged pushes */
    int nreq;
} F;

static void note_grant(const char *name, size_t n, int64_t fence) {
    if (F.ng >= NGRANT || n >= sizeof F.g[0].name) return;
    memcpy(F.g[F.ng].name, name, n);
    F.g[F.ng].name[n] = 0;
    F.g[F.ng].fence = fence;
    F.ng++;
}

static int was_granted(const char *name, int64_t fence) {
    int i;
    for (i = 0; i < F.ng; i++) if (F.g[i].fence == fence && strcmp(F.g[i].name, name) == 0) return 1;
    return 0;
}

/*--- RESP in: one command = an array of bulk strings ---------------------------------*/
typedef struct cmd { int argc; const char *argv[MAXARG]; size_t len[MAXARG]; } cmd;

/* Parses one command from c->in; returns bytes used, 0 if incomplete, -1 if bad. */
static long parse_cmd(sconn *c, cmd *out) {
    const char *p, *end;
    long n, i;
    char *e;
    if (c->in.n == 0) return 0;
    p = c->in.p;
    end = c->in.p + c->in.n;
    if (*p != '*') return -1;
    if (!memchr(p, '\n', (size_t)(end - p))) return 0;
    n = strtol(p + 1, &e, 10);
    if (n < 1 || n > 4096) return -1;
    p = strchr(p, '\n') + 1;
    out->argc = 0;
    for (i = 0; i < n; i++) {
        long len;
        if (p >= end || !memchr(p, '\n', (size_t)(end - p))) return 0;
        if (*p != '$') return -1;
        len = strtol(p + 1, &e, 10);
        if (len < 0) return -1;
        p = strchr(p, '\n') + 1;
        if (end - p < len + 2) return 0;
        if (out->argc < MAXARG) { out->argv[out->argc] = p; out->len[out->argc] = (size_t)len; out->argc++; }
        p += len + 2;
    }
    return (long)(p - c->in.p);
}

static int arg_is(const cmd *m, int i, const char *s) {
    return i < m->argc && m->len[i] == strlen(s) && strncasecmp(m->argv[i], s, m->len[i]) == 0;
}

/*--- RESP out ----------------------------------------------------------------------------*/
static void r_int(buf *b, long long v) { buf_fmt(b, ":%lld\r\n", v); }
static void r_bulk(buf *b, const char *s, size_t n) { buf_fmt(b, "$%zu\r\n", n); buf_add(b, s, n); buf_add(b, "\r\n", 2); }
static void r_str(buf *b, const char *s) { r_bulk(b, s, strlen(s)); }

static long long fz_int(fz_in *in) {
    switch (fz_u8(in) & 7) {
    case 0: return -1;
    case 1: return LLONG_MAX;
    case 2: return LLONG_MIN;
    case 3: return (long long)INT_MAX + 1;
    case 4: return -(long long)fz_u8(in);
    case 5: return (long long)(int64_t)((uint64_t)fz_u32(in) << 32 | fz_u32(in));
    default: return fz_u8(in);
    }
}

/* Some RESP value, depth-limited: the shapes a broken server might send. */
static void r_junk(buf *b, fz_in *in, int depth) {
    uint8_t k = fz_u8(in);
    switch (k % 9) {
    case 0: r_int(b, fz_int(in)); break;
    case 1: buf_add(b, "+OK\r\n", 5); break;
    case 2: buf_add(b, "$-1\r\n", 5); break;
    case 3: { char s[300]; size_t n = fz_u8(in) % 3 == 0 ? 200 + fz_u8(in) % 100 : fz_u8(in) % 8, i;
              for (i = 0; i < n; i++) s[i] = (char)(fz_more(in) ? fz_u8(in) : 'x');
              r_bulk(b, s, n); break; }
    case 4: buf_add(b, "-ERR junk\r\n", 11); break;
    case 5: buf_add(b, "*-1\r\n", 5); break;
    case 6: buf_add(b, "*0\r\n", 4); break;
    default:
        if (depth < 10) { int n = fz_u8(in) % 4, i; buf_fmt(b, "*%d\r\n", n); for (i = 0; i < n; i++) r_junk(b, in, depth + 1); }
        else r_int(b, 0);
    }
}

static void grant_reply(buf *b, const cmd *m, int nkeys, fz_in *in, int hostile) {
    /* {0, granted, ahead, held, recheck, owner, fence...}; names follow the
       10 fixed ARGV after the keys, in triples (name, capacity, weight) */
    int nres = nkeys, i, granted = F.sane ? 1 : (fz_u8(in) & 1);
    int base = 3 + nkeys + 10;
    long long gfield = hostile == 1 ? fz_int(in) : granted;
    int64_t fences[SIMBA_MAX_RESOURCES];
    if (nres < 0 || nres > SIMBA_MAX_RESOURCES) nres = 0;
    buf_fmt(b, "*%d\r\n", 6 + nres);
    r_int(b, 0);
    r_int(b, gfield);
    r_int(b, hostile == 2 ? fz_int(in) : granted ? 0 : 1);
    r_int(b, hostile == 3 ? fz_int(in) : 1);
    r_int(b, hostile == 4 ? fz_int(in) : -1);
    if (hostile == 5) { char o[400]; memset(o, 'o', sizeof o); r_bulk(b, o, 97 + fz_u8(in) % 300); }
    else if (hostile == 6) r_int(b, 7);
    else r_str(b, granted ? "fz~0000000000000001" : "other~0000000000000002");
    for (i = 0; i < nres; i++) {
        fences[i] = hostile == 7 ? fz_int(in) : granted ? ++F.fence : 0;
        r_int(b, fences[i]);
    }
    /* what simba may believe: a grant the reply really said */
    if (gfield == 1)
        for (i = 0; i < nres; i++)
            if (base + 3 * i < m->argc) note_grant(m->argv[base + 3 * i], m->len[base + 3 * i], fences[i]);
}

/* The right answer to a command. */
static void sane_reply(sconn *c, const cmd *m, fz_in *in, int hostile) {
    buf *b = &c->out;
    if (arg_is(m, 0, "CLIENT")) {
        if (m->argc >= 3 && m->len[2] >= 10 && strncmp(m->argv[2], "simba-sub:", 10) == 0) c->sub = 1;
        buf_add(b, "+OK\r\n", 5);
    } else if (arg_is(m, 0, "SELECT") || arg_is(m, 0, "AUTH")) {
        buf_add(b, "+OK\r\n", 5);
    } else if (arg_is(m, 0, "SCRIPT")) {
        r_str(b, "0123456789abcdef0123456789abcdef01234567");
    } else if (arg_is(m, 0, "INFO")) {
        r_str(b, "# Server\r\nredis_version:7.0.0\r\nrun_id:89abcdef0123456789abcdef0123456789abcdef\r\n");
    } else if (arg_is(m, 0, "SUBSCRIBE") && m->argc >= 2) {
        size_t n = m->len[1] < sizeof c->channel - 1 ? m->len[1] : sizeof c->channel - 1;
        memcpy(c->channel, m->argv[1], n);
        c->channel[n] = 0;
        c->subscribed = 1;
        buf_add(b, "*3\r\n", 4); r_str(b, "subscribe"); r_str(b, c->channel); r_int(b, 1);
    } else if ((arg_is(m, 0, "EVALSHA") || arg_is(m, 0, "EVAL")) && m->argc >= 4) {
        int nkeys = atoi(m->argv[2]);
        int k = 3 + (nkeys >= 0 && nkeys <= 8 ? nkeys : 0);
        if (k + 4 < m->argc && F.nreq < 8 && m->len[k + 4] > 0 && m->len[k + 4] < 128) {
            memcpy(F.requests[F.nreq], m->argv[k + 4], m->len[k + 4]);
            F.requests[F.nreq][m->len[k + 4]] = 0;
            F.nreq++;
        } else if (k + 4 < m->argc && m->len[k + 4] > 0 && m->len[k + 4] < 128) {
            int slot = (int)(fz_u8(in) % 8);
            memcpy(F.requests[slot], m->argv[k + 4], m->len[k + 4]);
            F.requests[slot][m->len[k + 4]] = 0;
        }
        if (k >= m->argc) { buf_add(b, "-ERR wrong number of arguments\r\n", 32); return; }
        if (arg_is(m, k, "open") || arg_is(m, k, "keepalive")) {
            buf_add(b, "*2\r\n", 4); r_int(b, 0); r_int(b, hostile == 1 ? fz_int(in) : 1);
        } else if (arg_is(m, k, "enqueue") || arg_is(m, k, "poll")) {
            grant_reply(b, m, nkeys, in, hostile);
        } else if (arg_is(m, k, "inspect")) {
            buf_add(b, "*5\r\n", 4); r_int(b, 0); r_int(b, 1); r_int(b, 0); r_str(b, ""); r_int(b, hostile == 1 ? fz_int(in) : 0);
        } else {
            buf_add(b, "*1\r\n", 4); r_int(b, 0);
        }
    } else if (arg_is(m, 0, "WAIT")) {
        r_int(b, 1);
    } else {
        buf_add(b, "-ERR unknown command\r\n", 22);
    }
}

static const char *const errs[] = {
    "-ERR fuzz\r\n", "-NOSCRIPT No matching script\r\n", "-NOPERM no permission\r\n",
    "-LOADING Redis is loading the dataset in memory\r\n", "-WRONGPASS invalid password\r\n",
    "-BUSY script running\r\n", "-READONLY replica\r\n", "-OOM command not allowed\r\n", "-\r\n",
    "-MASTERDOWN link down\r\n", "-NOAUTH Authentication required.\r\n"
};

/* Answer one command on c: sane in the heal phase, else what the input says. */
static void answer(sconn *c, const cmd *m, fz_in *in) {
    uint8_t how;
    buf *b = &c->out;
    if (c->mute) return;
    how = F.sane ? 0 : fz_u8(in);
    TR("srv%s <- %.*s %.*s  (how %d)", c->sub ? "(sub)" : "", (int)m->len[0], m->argv[0],
       m->argc > 3 ? (int)(m->len[3] > 40 ? 40 : m->len[3]) : 0, m->argc > 3 ? m->argv[3] : "", how % 16);
    if (arg_is(m, 0, "CLIENT") && m->argc >= 3 && m->len[2] >= 10 && strncmp(m->argv[2], "simba-sub:", 10) == 0) c->sub = 1;
    /* the subscribe connection: hiredis 0.14 flags it subscribed when
       SUBSCRIBE is queued, before the CLIENT SETNAME reply arrives, and
       assert()s on an array reply there with < 2 elements or non-string
       heads: keep to the shapes it can take (right, error, silence, close,
       truncation) */
    if (c->sub) {
        switch (how % 16) {
        case 4: { const char *e = errs[fz_u8(in) % (sizeof errs / sizeof errs[0])]; buf_add(b, e, strlen(e)); return; }
        case 11: c->mute = 1; return;
        case 13: c->close_after = 1; return;
        case 10: break;
        default: sane_reply(c, m, in, 0); return;
        }
    }
    switch (how % 16) {
    case 4: { const char *e = errs[fz_u8(in) % (sizeof errs / sizeof errs[0])]; buf_add(b, e, strlen(e)); break; }
    case 5: r_junk(b, in, 0); break;
    case 6: case 7: sane_reply(c, m, in, 1 + fz_u8(in) % 7); break;
    case 8: {                                   /* nested arrays */
        int d = 1 + fz_u8(in) % 12, i;
        for (i = 0; i < d; i++) buf_add(b, "*1\r\n", 4);
        r_int(b, 0);
        break;
    }
    case 9: {                                   /* a big (claimed) array */
        uint32_t n = fz_u16(in);
        if (n & 1) n = (uint32_t)INT_MAX - fz_u8(in);
        else n %= 4096;
        buf_fmt(b, "*%u\r\n", n);
        if (fz_u8(in) & 1) { uint32_t i; for (i = 0; i < n && i < 4096; i++) r_int(b, i); }
        else { c->close_after = 1; }            /* truncated: the rest never comes */
        break;
    }
    case 10: {                                  /* truncation, then close */
        buf tmp = {0, 0, 0};
        buf keep = *b;
        size_t cut;
        *b = tmp;
        sane_reply(c, m, in, 0);
        cut = b->n ? fz_u8(in) % b->n : 0;
        tmp = *b;
        *b = keep;
        buf_add(b, tmp.p ? tmp.p : "", cut);
        buf_free(&tmp);
        c->close_after = 1;
        break;
    }
    case 11: c->mute = 1; break;                /* hung (for good: RESP answers in order, so a
                                                   server cannot skip one reply and answer the
                                                   next); simba's op timeout must act */
    case 12: {                                  /* garbage: a type byte RESP does not have */
        char g[64];
        size_t n = fz_u8(in) % sizeof g, i;
        g[0] = '!';
        for (i = 1; i < n; i++) g[i] = (char)fz_u8(in);
        buf_add(b, g, n ? n : 1);
        buf_add(b, "\r\n", 2);
        c->close_after = 1;
        break;
    }
    case 13: c->close_after = 1; break;
    case 14: buf_add(b, "*1\r\n", 4); r_int(b, fz_int(in)); break;   /* status out of range */
    case 15: {                                  /* a status array of the wrong length */
        int n = fz_u8(in) % 12, i;
        buf_fmt(b, "*%d\r\n", n);
        for (i = 0; i < n; i++) r_int(b, i ? fz_int(in) : 0);
        break;
    }
    default: sane_reply(c, m, in, 0); break;
    }
}

/* A forged push on the subscribe connection. */
static void forge_push(fz_in *in) {
    sconn *c = NULL;
    int i;
    char payload[512];
    uint8_t how = fz_u8(in);
    buf *b;
    for (i = 0; i < NCONN; i++) if (F.c[i].fd >= 0 && F.c[i].sub && F.c[i].subscribed && !F.c[i].mute) c = &F.c[i];
    if (!c) return;
    b = &c->out;
    switch (how % 6) {
    case 0: case 1: {                           /* a plausible grant push */
        const char *req = F.nreq ? F.requests[fz_u8(in) % F.nreq] : "nobody~1";
        int hi = fz_u8(in) % (F.nh ? F.nh : 1);
        int64_t fence = (how & 8) ? fz_int(in) : ++F.fence;
        const char *name = F.nh ? F.h[hi].name : "r0";
        snprintf(payload, sizeof payload, "%s %lld %s", req, (long long)fence, name);
        if (fence > 0) note_grant(name, strlen(name), fence);
        break;
    }
    case 2: {                                   /* bytes */
        size_t n = fz_u8(in) % 300, k;
        for (k = 0; k < n && k < sizeof payload - 1; k++) payload[k] = (char)fz_u8(in);
        payload[k] = 0;
        buf_add(b, "*3\r\n", 4); r_str(b, "message"); r_str(b, c->channel); r_bulk(b, payload, k);
        TR("srv(sub) -> forged raw push of %zu bytes", k);
        return;
    }
    case 3:                                     /* a wrong element type in the message */
        buf_add(b, "*3\r\n", 4); r_str(b, "message"); r_str(b, c->channel); r_junk(b, in, 1);
        return;
    case 4:                                     /* another channel, or an extra subscribe confirmation */
        buf_add(b, "*3\r\n", 4); r_str(b, (how & 16) ? "subscribe" : "message"); r_str(b, (how & 32) ? c->channel : "elsewhere");
        r_int(b, 1);
        return;
    default:                                    /* a release push "- 0 name" or a long one */
        snprintf(payload, sizeof payload, "- 0 %s", F.nh ? F.h[fz_u8(in) % F.nh].name : "r0");
        break;
    }
    TR("srv(sub) -> push '%s'", payload);
    buf_add(b, "*3\r\n", 4); r_str(b, "message"); r_str(b, c->channel); r_str(b, payload);
}

/*--- the server's I/O --------------------------------------------------------------------*/
static void sconn_close(sconn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    buf_free(&c->in);
    buf_free(&c->out);
    c->sub = c->subscribed = c->close_after = c->mute = 0;
}

static void server_io(fz_in *in) {
    int i;
    for (;;) {                                  /* accept what is pending */
        int fd = accept(F.lfd, NULL, NULL), k;
        if (fd < 0) break;
        fcntl(fd, F_SETFL, O_NONBLOCK);
        for (k = 0; k < NCONN && F.c[k].fd >= 0; k++) {}
        if (k == NCONN) { close(fd); continue; }
        F.c[k].fd = fd;
        TR("srv accepted conn %d", k);
    }
    for (i = 0; i < NCONN; i++) {
        sconn *c = &F.c[i];
        char tmp[65536];
        ssize_t n;
        long used;
        cmd m;
        if (c->fd < 0) continue;
        while ((n = recv(c->fd, tmp, sizeof tmp, 0)) > 0) buf_add(&c->in, tmp, (size_t)n);
        if (n == 0) { TR("srv conn %d closed by simba", i); sconn_close(c); continue; }
        while (!c->close_after && (used = parse_cmd(c, &m)) != 0) {
            if (used < 0) { TR("srv conn %d: unreadable command", i); c->close_after = 1; break; }
            answer(c, &m, in);
            buf_drop(&c->in, (size_t)used);
        }
        while (c->out.n) {
            n = send(c->fd, c->out.p, c->out.n, MSG_NOSIGNAL);
            if (n <= 0) break;
            buf_drop(&c->out, (size_t)n);
        }
        if (c->close_after && (!c->out.n || n <= 0)) { TR("srv closes conn %d", i); sconn_close(c); }
    }
}

/*--- the client side ------------------------------------------------------------------------*/
static hnd *find(simba_lock h) {
    int i;
    for (i = 0; i < F.nh; i++) if (!F.h[i].ended && F.h[i].h.id == h.id && F.h[i].h.gen == h.gen) return &F.h[i];
    return NULL;
}

static void client_turn(void) {
    struct pollfd fds[8];
    simba_event ev[32];
    int n, k;
    n = simba_pollfds(F.s, fds, 8);
    FZ_CHECK(n >= 0 && n <= 8, "simba_pollfds: %d", n);
    if (n) (void)poll(fds, (nfds_t)n, 0);
    do {
        k = simba_tick(F.s, fds, n, ev, 32);
        FZ_CHECK(k >= 0, "simba_tick: %d", k);
        for (int i = 0; i < k; i++) {
            hnd *h;
            TR("client %s h%u fence=%lld err=%d", simba_event_name(ev[i].type), ev[i].lock.id, (long long)ev[i].fence, ev[i].error);
            if (ev[i].type == SIMBA_EVENT_CONNECTED || ev[i].type == SIMBA_EVENT_DISCONNECTED) continue;
            h = find(ev[i].lock);
            FZ_CHECK(h != NULL, "%s for an unknown or finished handle %u", simba_event_name(ev[i].type), ev[i].lock.id);
            switch (ev[i].type) {
            case SIMBA_EVENT_ACQUIRED:
                FZ_CHECK(!h->acquired, "handle %u ACQUIRED twice without LOST/RELEASED", h->h.id);
                FZ_CHECK(was_granted(h->name, ev[i].fence), "false grant: ACQUIRED on %s with fence %lld, never granted by the server",
                         h->name, (long long)ev[i].fence);
                h->acquired = 1;
                break;
            case SIMBA_EVENT_LOST: case SIMBA_EVENT_RELEASED: case SIMBA_EVENT_TIMEOUT: case SIMBA_EVENT_ERROR:
                h->acquired = 0;
                h->ended = 1;
                break;
            default: break;
            }
        }
    } while (k == 32);
}

static void do_acquire(fz_in *in) {
    simba_lock_desc d;
    const char *names[2];
    char second[40];
    hnd *h;
    uint8_t b = fz_u8(in);
    if (F.nh >= NH) return;
    h = &F.h[F.nh];
    memset(h, 0, sizeof *h);
    memset(&d, 0, sizeof d);
    snprintf(h->name, sizeof h->name, "r%d", F.nh);
    if (b & 1) {
        snprintf(second, sizeof second, "r%dx", F.nh);
        names[0] = h->name; names[1] = second;
        d.names = names; d.nnames = 2;
    } else d.name = h->name;
    d.capacity = 1 + ((b >> 1) & 3);
    d.permits = 1;
    d.exclusive = (b >> 3) & 1;
    d.wait_ms = (b & 0x30) == 0 ? 0 : (b & 0x30) == 0x10 ? 50 + fz_u8(in) * 20 : -1;
    h->h = simba_acquire(F.s, &d);
    TR("client acquire %s%s -> h%u", h->name, (b & 1) ? "+x" : "", h->h.id);
    if (h->h.id) F.nh++;
}

static void do_release(fz_in *in) {
    hnd *h;
    if (!F.nh) return;
    h = &F.h[fz_u8(in) % F.nh];
    if (h->ended || h->release_asked) return;
    if (simba_release(F.s, h->h) == SIMBA_OK) h->release_asked = 1;
    TR("client release h%u", h->h.id);
}

static int listen_once(void) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int one = 1;
    if (F.lfd > 0) return 1;
    F.lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (F.lfd < 0) return 0;
    setsockopt(F.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;                              /* a free port */
    if (bind(F.lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(F.lfd, 16) != 0) return 0;
    getsockname(F.lfd, (struct sockaddr *)&a, &al);
    F.port = ntohs(a.sin_port);
    fcntl(F.lfd, F_SETFL, O_NONBLOCK);
    return 1;
}

static void on_sigpipe(int sig) {
    static const char msg[] = "fuzz invariant broken: SIGPIPE raised inside simba (a write to a closed connection)\n";
    (void)sig;
    if (write(2, msg, sizeof msg - 1) < 0) {}
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    simba_redis_desc rd;
    simba_desc d;
    int i, turn, lfd, port;
    trace = getenv("FZ_TRACE") != NULL;
    if (trace) setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGPIPE, on_sigpipe);
    lfd = F.lfd; port = F.port;
    memset(&F, 0, sizeof F);
    F.lfd = lfd; F.port = port;
    for (i = 0; i < NCONN; i++) F.c[i].fd = -1;
    if (!listen_once()) { fprintf(stderr, "fuzz_redis: cannot listen on 127.0.0.1\n"); abort(); }
    vnow = 1000000;
    memset(&rd, 0, sizeof rd);
    rd.host = "127.0.0.1";
    rd.port = F.port;
    memset(&d, 0, sizeof d);
    d.backend = simba_redis(&rd);
    d.tenant = "fz";
    d.client_id = "fzclient";
    d.ttl_ms = 3000;
    d.transition_ms = 2000;
    d.clock.now_ms = vclock;
    d.linger_ms = -1;             /* the fake server is driven by this thread: it cannot answer
                                     the CLOSE of simba_destroy while simba_destroy waits */
    F.s = simba_create(&d, NULL);
    FZ_CHECK(F.s != NULL, "simba_create");
    /* the hostile part: the input drives both sides */
    for (turn = 0; turn < TURNS && fz_more(&in); turn++) {
        uint8_t op = fz_u8(&in);
        switch (op % 8) {
        case 0: do_acquire(&in); break;
        case 1: do_release(&in); break;
        case 2: vnow += fz_u8(&in) * 10; break;
        case 3: forge_push(&in); break;
        case 4: { int k = fz_u8(&in) % NCONN; if (F.c[k].fd >= 0) { TR("srv kills conn %d", k); sconn_close(&F.c[k]); } break; }
        default: vnow += 5; break;
        }
        client_turn();
        server_io(&in);
        client_turn();
    }
    /* heal: the server turns sane; every request must come to an end */
    F.sane = 1;
    TR("heal");
    for (i = 0; i < F.nh; i++)
        if (!F.h[i].ended && !F.h[i].release_asked && simba_release(F.s, F.h[i].h) == SIMBA_OK) F.h[i].release_asked = 1;
    for (turn = 0; turn < HEAL_TURNS; turn++) {
        int open = 0;
        vnow += 20;
        client_turn();
        server_io(&in);
        client_turn();
        for (i = 0; i < F.nh; i++) {
            if (F.h[i].ended) continue;
            open++;
            /* a request that was still pending when we released it all: release it now */
            if (!F.h[i].release_asked && simba_release(F.s, F.h[i].h) == SIMBA_OK) F.h[i].release_asked = 1;
        }
        if (!open && simba_connected(F.s)) break;
    }
    FZ_CHECK(simba_connected(F.s), "no connection %d turns (%d virtual s) after the server turned sane", HEAL_TURNS, HEAL_TURNS * 20 / 1000);
    for (i = 0; i < F.nh; i++)
        FZ_CHECK(F.h[i].ended, "handle %u (%s) never ended after the server turned sane", F.h[i].h.id, F.h[i].name);
    simba_destroy(F.s);
    for (i = 0; i < NCONN; i++) sconn_close(&F.c[i]);
    return 0;
}
