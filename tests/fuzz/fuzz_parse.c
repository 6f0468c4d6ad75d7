/* fuzz_parse.c -- libFuzzer harness: every parser of user (and server)
   strings in the headers, with the backends' implementations in this file
   so the static ones are called directly:

   - ZooKeeper: the hosts string ("ip:port,...[/chroot]"), the base path, the
     digest (through simba_zk(), which checks them before any connect), an
     entry node name ("<w>_<session>_<request>_<seq>", from the server) and a
     resource node's capacity data;
   - Redis: the desc (prefix, host, user/password, ports; simba_redis()
     checks it), simba_redis_resource_key(), the INFO run_id parser;
   - MySQL: the desc (database, table prefix, port; simba_mysql());
   - core: tenant, client id, resource names and idempotency keys (through
     simba_create and simba_acquire on the mem backend).

   The first byte picks the target; the rest is split at NUL bytes into
   strings. Nothing connects: a backend is destroyed without being attached.
   Checked: no crash, leak or UB (ASan/UBSan), and that what a checker
   accepts has the documented shape. */
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#define SIMBA_REDIS_IMPLEMENTATION
#include "simba_redis.h"
#define SIMBA_MYSQL_IMPLEMENTATION
#include "simba_mysql.h"
#define SIMBA_ZK_IMPLEMENTATION
#include "simba_zk.h"
#include "fuzz_input.h"

enum { NSTR = 6 };

/* Split the input into up to NSTR NUL-terminated strings (copies). */
static int split(const uint8_t *p, size_t n, char **out, char *buf) {
    size_t i, k = 0;
    int ns = 0;
    out[ns++] = buf;
    for (i = 0; i < n; i++) {
        if (p[i] == 0 && ns < NSTR) { buf[k++] = 0; out[ns++] = buf + k; continue; }
        buf[k++] = (char)p[i];
    }
    buf[k] = 0;
    while (ns < NSTR) out[ns++] = buf + k;   /* the rest are "" */
    return ns;
}

static void destroy_backend(simba_backend b) {
    if (b.vt && b.impl) b.vt->destroy(b.impl);
}

static void fuzz_zk(char **s, uint8_t flags) {
    simba_zk_desc d;
    simba__zk zk;
    simba__zk_kid kid;
    int cap, ok;
    char why[256];
    memset(&d, 0, sizeof d);
    d.hosts = s[0];
    d.allow_hostnames = flags & 1;
    if (flags & 2) d.base_path = s[1];
    if (flags & 4) d.digest = s[2];
    d.session_timeout_ms = (flags & 8) ? -1 : 0;
    destroy_backend(simba_zk(&d));
    ok = simba__zk_check_hosts(s[0], flags & 1, why, sizeof why);
    /* a hosts string that is only a chroot ("/x") was accepted (found here) */
    if (ok) FZ_CHECK(s[0][0] != '/' && strchr(s[0], ':') != NULL, "hosts without a host:port accepted: %s", s[0]);
    if (simba__zk_check_base(s[1])) FZ_CHECK(s[1][0] == '/', "relative base path accepted");
    (void)simba__zk_check_digest(s[2]);
    /* server data: an entry node's name and a capacity */
    memset(&zk, 0, sizeof zk);                  /* zero allocator: malloc/free */
    ok = simba__zk_parse_kid(&zk, s[3], &kid);
    if (ok == 1) {
        FZ_CHECK(kid.weight >= 0 && kid.session && kid.request && !strchr(kid.request, '_'), "bad entry parse of %s", s[3]);
    }
    simba__zk_free(&zk, kid.node);
    if (simba__zk_parse_capacity(s[4], (int)strlen(s[4]), &cap)) FZ_CHECK(cap >= 1, "capacity %d accepted", cap);
    (void)simba__zk_parse_capacity(s[4], (int)(flags >> 4), &cap);   /* a length that may not match */
}

static void fuzz_redis(char **s, uint8_t flags, int port) {
    simba_redis_desc d;
    simba__redis r;
    char key[64], big[1024];
    int n;
    memset(&d, 0, sizeof d);
    d.prefix = (flags & 1) ? s[0] : NULL;
    d.host = (flags & 2) ? s[1] : NULL;
    d.user = (flags & 4) ? s[2] : NULL;
    d.password = (flags & 8) ? s[3] : NULL;
    d.unix_socket = (flags & 16) ? s[4] : NULL;
    d.port = port;
    d.db = (flags & 32) ? -1 : 0;
    d.connect_timeout_ms = (flags & 64) ? -port : 0;
    destroy_backend(simba_redis(&d));
    n = simba_redis_resource_key((flags & 128) ? NULL : s[0], s[1], s[2], key, sizeof key);
    if (n >= 0 && (size_t)n < sizeof key) FZ_CHECK(strlen(key) == (size_t)n, "resource key length %d for %s", n, key);
    n = simba_redis_resource_key(s[0], s[1], s[2], big, (size_t)(flags & 7));
    (void)n;
    memset(&r, 0, sizeof r);
    simba__redis_parse_run_id(&r, s[5], strlen(s[5]));
    FZ_CHECK(r.run_id[0] == 0 || strlen(r.run_id) == 40, "run_id of %zu bytes", strlen(r.run_id));
}

static void fuzz_mysql(char **s, uint8_t flags, int port) {
    simba_mysql_desc d;
    memset(&d, 0, sizeof d);
    d.database = (flags & 1) ? s[0] : NULL;
    d.table_prefix = (flags & 2) ? s[1] : NULL;
    d.host = (flags & 4) ? s[2] : NULL;
    d.user = (flags & 8) ? s[3] : NULL;
    d.password = (flags & 16) ? s[4] : NULL;
    d.unix_socket = (flags & 32) ? s[5] : NULL;
    d.ssl_cipher = (flags & 64) ? s[5] : NULL;
    d.port = port;
    destroy_backend(simba_mysql(&d));
    if (simba__mysql_prefix_ok(s[1])) FZ_CHECK(strlen(s[1]) <= 32, "table prefix of %zu bytes accepted", strlen(s[1]));
}

static int64_t fixed_clock(void *u) { (void)u; return 1000; }

static void fuzz_core(char **s, uint8_t flags) {
    simba_mem_server *srv = simba_mem_server_create(NULL);
    simba_desc d;
    simba *c;
    simba_error err;
    memset(&d, 0, sizeof d);
    d.backend = simba_mem(srv, NULL);
    d.tenant = (flags & 1) ? s[0] : NULL;
    d.client_id = (flags & 2) ? s[1] : NULL;
    d.clock.now_ms = fixed_clock;
    c = simba_create(&d, &err);
    FZ_CHECK(c != NULL || err.code < 0, "simba_create failed without an error code");
    if (c) {
        simba_lock_desc ld;
        const char *names[4];
        simba_lock h;
        simba_event ev[8];
        memset(&ld, 0, sizeof ld);
        names[0] = s[2]; names[1] = s[3]; names[2] = s[4]; names[3] = s[5];
        if (flags & 4) { ld.names = names; ld.nnames = 1 + (flags >> 6); } else ld.name = s[2];
        if (flags & 8) ld.key = s[5];
        ld.wait_ms = 0;
        h = simba_acquire(c, &ld);
        if (!h.id) FZ_CHECK(simba_last_error(c) < 0, "refused without an error");
        else FZ_CHECK(strlen(s[2]) <= SIMBA_MAX_NAME, "a name of %zu bytes accepted", strlen(s[2]));
        (void)simba_tick(c, NULL, 0, ev, 8);
        (void)simba_inspect(c, s[3], NULL);
        (void)simba_set_capacity(c, s[4], 1 + (flags & 3), NULL);
        (void)simba_tick(c, NULL, 0, ev, 8);
        simba_destroy(c);
    }
    simba_mem_server_destroy(srv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s[NSTR], *buf;
    uint8_t target, flags;
    int port;
    if (size < 4 || size > 4096) return 0;
    target = data[0]; flags = data[1];
    port = (int)(int16_t)(data[2] | (data[3] << 8)) * 3;   /* -98304..98301: both sides of 1..65535 */
    buf = (char *)malloc(size + 1);
    if (!buf) return 0;
    split(data + 4, size - 4, s, buf);
    switch (target % 4) {
    case 0: fuzz_zk(s, flags); break;
    case 1: fuzz_redis(s, flags, port); break;
    case 2: fuzz_mysql(s, flags, port); break;
    default: fuzz_core(s, flags); break;
    }
    free(buf);
    return 0;
}
