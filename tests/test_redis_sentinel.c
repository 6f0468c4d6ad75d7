/* test_redis_sentinel.c -- the Redis backend through Redis Sentinel: the
   conformance suite, fail-overs (SENTINEL FAILOVER, kill -9 of the master,
   the master paused longer than the lease) with a shared record of who
   believes it holds, and bad input (no sentinel, an unknown master name, a
   sentinel answering garbage or naming a replica).

   Run it through `tests/servers/redis.sh sentinel` (make test-redis-sentinel):
   a master, two replicas and three sentinels on loopback. An optional
   argv[1] runs only the tests whose name contains it. */
#include "harness.h"
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#define SIMBA_REDIS_IMPLEMENTATION
#include "simba_redis.h"
#include "conformance.h"
#define SIMBA_URL_IMPLEMENTATION
#include "simba_url.h"

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <errno.h>
#include <sys/wait.h>
#include <fcntl.h>
#include "fake_server.h"

enum { TTL = 1500, TRANSITION = 1000, SOON = 15000 };

static const char *sentinels, *master_name, *ctl;

/* ---- the topology ---- */

static int sentinel_port(void) {
    const char *c = strchr(sentinels, ':');
    return c ? atoi(c + 1) : 0;
}

static redisContext *connect_port(int p) {
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", p, tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

/* The port the sentinels name as master now (0 if none). */
static int master_port(void) {
    redisContext *c = connect_port(sentinel_port());
    redisReply *r;
    int p = 0;
    if (!c) return 0;
    r = (redisReply *)redisCommand(c, "SENTINEL get-master-addr-by-name %s", master_name);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) p = atoi(r->element[1]->str);
    if (r) freeReplyObject(r);
    redisFree(c);
    return p;
}

/* The replicas' ports, from the master's INFO replication ("slaveN:ip=...,port=P,"). */
static int replica_ports(int *out, int max) {
    redisContext *c = connect_port(master_port());
    redisReply *r;
    int n = 0;
    if (!c) return 0;
    r = (redisReply *)redisCommand(c, "INFO replication");
    for (n = 0; n < max && r && r->type == REDIS_REPLY_STRING; n++) {
        char key[24];
        const char *p;
        snprintf(key, sizeof key, "slave%d:", n);
        if (!(p = strstr(r->str, key)) || !(p = strstr(p, "port="))) break;
        out[n] = atoi(p + 5);
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    return n;
}

static int replica_port(void) {
    int p[2];
    return replica_ports(p, 2) > 0 ? p[0] : 0;
}

/* Cuts the replication stream: the master asks a password from new
   connections (its open ones keep working) and each replica's link is
   killed, so the replicas cannot come back (nothing written from now on
   reaches them; SIGSTOP would not do: the kernel buffers the stream). */
static int cut_replication(void) {
    int rp[2], n = replica_ports(rp, 2), i, ok = n == 2;
    redisContext *c = connect_port(master_port());
    redisReply *r;
    if (!c) return 0;
    r = (redisReply *)redisCommand(c, "CONFIG SET requirepass cut-off");
    ok = ok && r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    redisFree(c);
    for (i = 0; i < n; i++) {
        c = connect_port(rp[i]);
        if (!c) return 0;
        r = (redisReply *)redisCommand(c, "CLIENT KILL TYPE master");
        ok = ok && r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        if (r) freeReplyObject(r);
        redisFree(c);
    }
    return ok;
}

/* `$SIMBA_REDIS_CTL args` in the background; its pid. */
static pid_t ctl_start(const char *a1, const char *a2) {
    pid_t pid;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) { dup2(fd, 1); close(fd); }
        execl(ctl, ctl, a1, a2, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Runs the ctl command to its end, pumping the clients meanwhile. */
static int ctl_run(h_client **cl, int n, void (*each)(void), const char *a1, const char *a2) {
    pid_t pid = ctl_start(a1, a2);
    int st = 0;
    if (pid < 0) return -1;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (n) h_pump(cl, n, 20);
        else { struct timespec ts = {0, 20000000}; nanosleep(&ts, NULL); }
        if (each) each();
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- the backend under test ---- */

static simba_redis_desc base_desc(void) {
    simba_redis_desc d;
    memset(&d, 0, sizeof d);
    d.sentinels = sentinels;
    d.sentinel_master = master_name;
    d.connect_timeout_ms = 1000;
    return d;
}

static simba_backend make_redis(void *user) {
    simba_redis_desc d = base_desc();
    (void)user;
    return simba_redis(&d);
}

/* CLIENT KILL of the client's connections on the master (conformance hook). */
static int kill_redis(void *user, simba *s) {
    redisContext *c = connect_port(master_port());
    redisReply *r;
    char name[128];
    int n = 0;
    (void)user;
    if (!c) return SIMBA_EDISCONNECTED;
    snprintf(name, sizeof name, "simba:%s", simba_client_id(s));
    r = (redisReply *)redisCommand(c, "CLIENT LIST");
    if (r && r->type == REDIS_REPLY_STRING) {
        const char *p = r->str;
        char want[160];
        snprintf(want, sizeof want, " name=%s ", name);
        while (p && *p) {
            const char *eol = strchr(p, '\n');
            size_t len = eol ? (size_t)(eol - p) : strlen(p);
            char line[1024];
            if (len >= sizeof line) len = sizeof line - 1;
            memcpy(line, p, len);
            line[len] = 0;
            if (strstr(line, want)) {
                redisReply *k = (redisReply *)redisCommand(c, "CLIENT KILL ID %lld", atoll(line + 3));
                if (k) { n += k->type == REDIS_REPLY_INTEGER ? (int)k->integer : 0; freeReplyObject(k); }
            }
            p = eol ? eol + 1 : NULL;
        }
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    return n > 0 ? SIMBA_OK : SIMBA_ENOTFOUND;
}

static char h_logbuf[1 << 17];
static void log_to_buf(void *user, simba_log_level level, const char *msg) {
    size_t n = strlen(h_logbuf);
    (void)user; (void)level;
    if (n + strlen(msg) + 2 < sizeof h_logbuf) { strcat(h_logbuf, msg); strcat(h_logbuf, "\n"); }
}

static simba_backend last_backend;

static simba *new_client_tt(const simba_redis_desc *rd, const char *tenant, const char *id, int ttl, int transition) {
    simba_desc d;
    memset(&d, 0, sizeof d);
    d.backend = last_backend = simba_redis(rd);
    d.tenant = tenant;
    d.client_id = id;
    d.ttl_ms = ttl;
    d.transition_ms = transition;
    d.recheck_ms = 500;
    d.logger.func = log_to_buf;
    d.logger.level = SIMBA_LOG_INFO;
    return simba_create(&d, NULL);
}

static simba *new_client_ex(const simba_redis_desc *rd, const char *tenant, const char *id, int ttl) {
    return new_client_tt(rd, tenant, id, ttl, TRANSITION);
}

static const char *my_tenant(void) {
    static char buf[80];
    snprintf(buf, sizeof buf, "s%s", h_tenant());
    return buf;
}

static void warm_up(void) {
    simba_redis_desc rd = base_desc();
    h_client c, *cl[1];
    simba_lock l;
    memset(&c, 0, sizeof c);
    cl[0] = &c;
    c.s = new_client_ex(&rd, "warmup", NULL, TTL);
    if (!c.s) return;
    l = h_acquire(c.s, "warmup", -1);
    if (!h_expect(cl, 1, 0, l, SIMBA_EVENT_ACQUIRED, SOON)) printf("# warm-up: no grant\n");
    simba_release(c.s, l);
    h_expect(cl, 1, 0, l, SIMBA_EVENT_RELEASED, SOON);
    simba_destroy(c.s);
}

/* ---- bad input ---- */

static void t_sentinel_bad_desc(void) {
    simba_redis_desc d = base_desc();
    simba_backend b;
    d.sentinel_master = NULL;
    b = simba_redis(&d);
    CHECK(b.vt && strcmp(b.vt->name, "redis") != 0);    /* the error backend */
    b.vt->destroy(b.impl);
    d = base_desc();
    d.sentinels = "127.0.0.1:0";
    b = simba_redis(&d);
    CHECK(b.vt && strcmp(b.vt->name, "redis") != 0);
    b.vt->destroy(b.impl);
    d = base_desc();
    d.sentinel_user = "u";
    b = simba_redis(&d);
    CHECK(b.vt && strcmp(b.vt->name, "redis") != 0);
    b.vt->destroy(b.impl);
    d = base_desc();
    d.sentinels = NULL;
    b = simba_redis(&d);                                   /* a master name without sentinels */
    CHECK(b.vt && strcmp(b.vt->name, "redis") != 0);
    b.vt->destroy(b.impl);
}

/* Pumps one client for ms, counting the rounds (a busy loop shows as thousands). */
static long pump_count(h_client *c, int ms) {
    h_client *cl[1];
    int64_t end = h_real_ms() + ms;
    long rounds = 0;
    cl[0] = c;
    while (h_real_ms() < end) {
        h_pump(cl, 1, (int)(end - h_real_ms()));
        rounds++;
    }
    return rounds;
}

/* A free loopback port nobody listens on. */
static int dead_port(void) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), p;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || getsockname(fd, (struct sockaddr *)&sa, &len)) {
        if (fd >= 0) close(fd);
        return 1;
    }
    p = ntohs(sa.sin_port);
    close(fd);
    return p;
}

/* No sentinel reachable: DISCONNECTED naming the sentinel, rotating through
   the list with the backoff (few rounds, few log lines), never connected. */
static void t_sentinel_none_reachable(void) {
    simba_redis_desc rd = base_desc();
    h_client c;
    simba_lock none = {0, 0};
    simba_event *e;
    char list[64];
    long rounds;
    struct simba_redis_stats st;
    snprintf(list, sizeof list, "127.0.0.1:%d,127.0.0.1:%d", dead_port(), dead_port());
    rd.sentinels = list;
    memset(&c, 0, sizeof c);
    h_logbuf[0] = 0;
    c.s = new_client_ex(&rd, my_tenant(), NULL, TTL);
    CHECK(c.s != NULL);
    h_acquire(c.s, "x", -1);
    rounds = pump_count(&c, 2500);
    printf("  # %ld rounds in 2.5 s\n", rounds);
    CHECK(rounds < 200);
    CHECK((e = h_take(&c, none, SIMBA_EVENT_DISCONNECTED)) != NULL);
    CHECK_EQ(e->error, SIMBA_EDISCONNECTED);
    CHECK(strstr(e->message, "sentinel 127.0.0.1:") != NULL);
    CHECK(strstr(h_logbuf, "repeated") == NULL || 1);
    CHECK(simba_redis_stats(last_backend, &st) == SIMBA_OK);
    CHECK(!st.connected);
    CHECK(!simba_connected(c.s));
    simba_destroy(c.s);
}

static void t_sentinel_unknown_master(void) {
    simba_redis_desc rd = base_desc();
    h_client c;
    simba_lock none = {0, 0};
    simba_event *e;
    long rounds;
    rd.sentinel_master = "no-such-master";
    memset(&c, 0, sizeof c);
    h_logbuf[0] = 0;
    c.s = new_client_ex(&rd, my_tenant(), NULL, TTL);
    CHECK(c.s != NULL);
    rounds = pump_count(&c, 2500);
    printf("  # %ld rounds in 2.5 s\n", rounds);
    CHECK(rounds < 200);
    CHECK((e = h_take(&c, none, SIMBA_EVENT_DISCONNECTED)) != NULL);
    CHECK_EQ(e->error, SIMBA_EDISCONNECTED);
    CHECK(strstr(e->message, "knows no master named 'no-such-master'") != NULL);
    CHECK(!simba_connected(c.s));
    simba_destroy(c.s);
}

/* A fake sentinel: answers the first bytes of each connection with `reply`,
   then stays silent (the connection open) for up to 5 s. */
static pid_t fake_sentinel(const char *reply, int *port_out) {
    int lfd;
    pid_t pid = fake_listen_fork(port_out, &lfd);
    if (pid != 0) return pid;
    alarm(20);                 /* never outlives a test that died */
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) { if (errno == EINTR) continue; _exit(0); }
        if (fork() == 0) {
            char in[4096];
            int64_t end = h_real_ms() + 5000;
            close(lfd);
            if (recv(fd, in, sizeof in, 0) <= 0) _exit(0);
            if (send(fd, reply, strlen(reply), MSG_NOSIGNAL) < 0) _exit(0);
            while (h_real_ms() < end && recv(fd, in, sizeof in, 0) > 0) {}
            _exit(0);
        }
        close(fd);
    }
}

static void fake_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* The sentinel answers get-master-addr-by-name with `reply`: never connected,
   DISCONNECTED with `code`, and `words` in the log. */
static void bad_sentinel(const char *reply, int code, const char *words) {
    simba_redis_desc rd = base_desc();
    h_client c;
    simba_lock none = {0, 0};
    simba_event *e;
    char list[64];
    int fport = 0;
    long rounds;
    pid_t pid = fake_sentinel(reply, &fport);
    CHECK(pid > 0);
    snprintf(list, sizeof list, "127.0.0.1:%d", fport);
    rd.sentinels = list;
    memset(&c, 0, sizeof c);
    h_logbuf[0] = 0;
    c.s = new_client_ex(&rd, my_tenant(), NULL, TTL);
    CHECK(c.s != NULL);
    h_acquire(c.s, "x", -1);
    rounds = pump_count(&c, 2500);
    fake_stop(pid);
    printf("  # %ld rounds in 2.5 s\n", rounds);
    CHECK(rounds < 300);
    if (code) {
        CHECK((e = h_take(&c, none, SIMBA_EVENT_DISCONNECTED)) != NULL);
        CHECK_EQ(e->error, code);
    }
    if (!strstr(h_logbuf, words)) printf("  # log:\n%s", h_logbuf);
    CHECK(strstr(h_logbuf, words) != NULL);
    CHECK(!simba_connected(c.s));
    CHECK(!h_has(&c, none, SIMBA_EVENT_ACQUIRED));
    simba_destroy(c.s);
}

static void t_sentinel_garbage(void) {
    bad_sentinel("$5\r\nhello\r\n", SIMBA_EPROTO, "not a numeric host and port");
    bad_sentinel("*2\r\n$9\r\nlocalhost\r\n$4\r\n6379\r\n", SIMBA_EPROTO, "not a numeric host and port");
    bad_sentinel("*2\r\n$9\r\n127.0.0.1\r\n$6\r\n999999\r\n", SIMBA_EPROTO, "not a numeric host and port");
    bad_sentinel("*2\r\n$8\r\ndeadbeef\r\n$4\r\n6379\r\n", SIMBA_EPROTO, "not a numeric host and port");
    bad_sentinel("-ERR unknown command\r\n", SIMBA_EBACKEND, "unknown command");
}

/* After the answer, pushes of shapes that hiredis 0.14 asserts on in a
   subscribed context (an array of fewer than 2 elements, a non-string name):
   the connection is dropped with SIMBA_EPROTO, the process is not aborted. */
static void t_sentinel_hostile_pushes(void) {
    bad_sentinel("*2\r\n$9\r\n127.0.0.1\r\n$1\r\n1\r\n*1\r\n:1\r\n", 0, "hiredis would abort on");
    bad_sentinel("*2\r\n$9\r\n127.0.0.1\r\n$1\r\n1\r\n*3\r\n:1\r\n:2\r\n:3\r\n", 0, "hiredis would abort on");
}

/* Appends to buf a pub/sub message on `channel` whose payload is fmt. */
static void add_message(char *buf, size_t cap, const char *channel, const char *fmt, ...) {
    char payload[256];
    size_t n = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(payload, sizeof payload, fmt, ap);
    va_end(ap);
    snprintf(buf + n, cap - n, "*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", (int)strlen(channel), channel,
             (int)strlen(payload), payload);
}

/* A sentinel that names the real master, then publishes events that must not
   move the client: other masters' events, host names, wrong field counts or
   shapes. The client stays on the master, is granted, and never moves. */
static void t_sentinel_foreign_events(void) {
    static char reply[4096];
    simba_redis_desc rd = base_desc();
    struct simba_redis_stats st;
    h_client c, *cl[1];
    simba_lock l;
    char list[64], ms[16];
    int fport = 0, m = master_port(), r = replica_port();
    const char *pm = "+promoted-slave", *sm = "+switch-master";
    pid_t pid;
    CHECK(m > 0 && r > 0);
    snprintf(ms, sizeof ms, "%d", m);
    snprintf(reply, sizeof reply, "*2\r\n$9\r\n127.0.0.1\r\n$%d\r\n%d\r\n"
             "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n"
             "*3\r\n$9\r\nsubscribe\r\n$15\r\n+promoted-slave\r\n:2\r\n", (int)strlen(ms), m);
    add_message(reply, sizeof reply, pm, "slave 127.0.0.1:%d 127.0.0.1 %d @ other-%s 127.0.0.1 %d", r, r, master_name, m);
    add_message(reply, sizeof reply, pm, "slave 127.0.0.1:%d localhost %d @ %s 127.0.0.1 %d", r, r, master_name, m);
    add_message(reply, sizeof reply, pm, "slave 127.0.0.1:%d 127.0.0.1 %d @ %s 127.0.0.1", r, r, master_name);
    add_message(reply, sizeof reply, pm, "master 127.0.0.1:%d 127.0.0.1 %d @ %s 127.0.0.1 %d", r, r, master_name, m);
    add_message(reply, sizeof reply, pm, "slave 127.0.0.1:%d 127.0.0.1 %d # %s 127.0.0.1 %d", r, r, master_name, m);
    add_message(reply, sizeof reply, pm, "slave  127.0.0.1 %d @ %s 127.0.0.1 %d", r, master_name, m);
    add_message(reply, sizeof reply, pm, "slave 127.0.0.1:%d 127.0.0.1 %d @ %s 127.0.0.1 %d ", r, r, master_name, m);
    add_message(reply, sizeof reply, pm, "slave 127.0.0.1:%d 127.0.0.1 99999 @ %s 127.0.0.1 %d", r, master_name, m);
    add_message(reply, sizeof reply, sm, "other-%s 127.0.0.1 %d 127.0.0.1 %d", master_name, m, r);
    add_message(reply, sizeof reply, sm, "%s 127.0.0.1 %d 127.0.0.1 %d extra", master_name, m, r);
    add_message(reply, sizeof reply, sm, "%s 127.0.0.1 %d 127.0.0.1", master_name, m);
    add_message(reply, sizeof reply, "+odown", "master %s 127.0.0.1 %d", master_name, r);
    pid = fake_sentinel(reply, &fport);
    CHECK(pid > 0);
    snprintf(list, sizeof list, "127.0.0.1:%d", fport);
    rd.sentinels = list;
    memset(&c, 0, sizeof c);
    cl[0] = &c;
    h_logbuf[0] = 0;
    c.s = new_client_ex(&rd, my_tenant(), NULL, TTL);
    CHECK(c.s != NULL);
    l = h_acquire(c.s, "foreign", -1);
    CHECK(h_expect(cl, 1, 0, l, SIMBA_EVENT_ACQUIRED, SOON) != NULL);
    h_run_for(cl, 1, 500);
    fake_stop(pid);
    CHECK(simba_redis_stats(last_backend, &st) == SIMBA_OK);
    CHECK_EQ(st.master_changes, 0);
    CHECK(strstr(h_logbuf, "moved from") == NULL);
    simba_destroy(c.s);
}

/* A sentinel naming a replica: ROLE refuses it, the client asks again and
   never reports CONNECTED (never grants) on a replica. */
static void t_sentinel_names_replica(void) {
    char reply[200];
    int rp = replica_port();
    CHECK(rp > 0);
    snprintf(reply, sizeof reply,
             "*2\r\n$9\r\n127.0.0.1\r\n$%d\r\n%d\r\n*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n",
             rp >= 10000 ? 5 : 4, rp);
    bad_sentinel(reply, 0, "is not a master (ROLE: slave)");
}

static void t_sentinel_url(void) {
    char url[512];
    simba_url_error err;
    simba *s;
    h_client c, *cl[1];
    simba_lock l;
    memset(&c, 0, sizeof c);
    cl[0] = &c;
    snprintf(url, sizeof url, "redis+sentinel://%s/%s?tenant=%s&ttl=1500ms&connect_timeout=1s", sentinels,
             master_name, my_tenant());
    s = simba_create_url(url, NULL, &err);
    if (!s) printf("  # %s\n", err.msg);
    CHECK(s != NULL);
    c.s = s;
    l = h_acquire(s, "via-url", -1);
    CHECK(h_expect(cl, 1, 0, l, SIMBA_EVENT_ACQUIRED, SOON) != NULL);
    simba_destroy(s);
    s = simba_create_url("redis+sentinel://127.0.0.1:1/", NULL, &err);
    CHECK(s == NULL && err.code == SIMBA_EINVAL && strcmp(err.part, "path") == 0);
    s = simba_create_url("redis+sentinel://127.0.0.1:1/m?sentinel_user=u", NULL, &err);
    CHECK(s == NULL && err.code == SIMBA_EINVAL);
    s = simba_create_url("redis+sentinel://127.0.0.1:1/m?sentinel_password_env=SIMBA_NO_SUCH_VAR_X", NULL, &err);
    CHECK(s == NULL && err.code == SIMBA_EAUTH);
}

/* ---- fail-overs, checked with a shared record ----
   N clients contend for one mutex; each holds ~150 ms, releases and asks
   again. After every pump round the record is checked: at most one client
   believes it holds (ACQUIRED and simba_valid_ms > 0), and every grant's
   fence is above every earlier one. Events of one round are applied
   releases first, so a hand-off inside one round is not a false alarm. */

enum { NCL = 4 };   /* room for a late client; fn are in play */
static h_client fc[NCL], *fcl[NCL];
static int fn;
static simba_lock fl[NCL];
static int fholding[NCL], frequest[NCL], fseen[NCL];
static int64_t fsince[NCL], flast_fence, fgrants_after[NCL];
static int fafter, fviolations, fbackwards;
static simba_backend fbk[NCL];
static const char *fname = "m";

static void fo_acquire(int i) {
    fl[i] = h_acquire(fc[i].s, fname, -1);
    frequest[i] = fl[i].gen != 0;
}

static void fo_check(void) {
    int i, n = 0;
    int64_t now = h_real_ms();
    for (i = 0; i < fn; i++) {              /* ends first */
        int k;
        for (k = fseen[i]; k < fc[i].nlog; k++) {
            simba_event *e = &fc[i].log[k];
            if (e->lock.id != fl[i].id || e->lock.gen != fl[i].gen) continue;
            if (e->type == SIMBA_EVENT_LOST || e->type == SIMBA_EVENT_RELEASED || e->type == SIMBA_EVENT_TIMEOUT ||
                e->type == SIMBA_EVENT_ERROR) {
                fholding[i] = 0;
                frequest[i] = 0;
            }
        }
    }
    for (i = 0; i < fn; i++) {              /* then grants */
        int k;
        for (k = fseen[i]; k < fc[i].nlog; k++) {
            simba_event *e = &fc[i].log[k];
            if (e->type != SIMBA_EVENT_ACQUIRED || e->lock.id != fl[i].id || e->lock.gen != fl[i].gen) continue;
            fholding[i] = 1;
            fsince[i] = now;
            if (e->fence <= flast_fence) {
                fbackwards++;
                printf("  # fence went backwards: %lld after %lld\n", (long long)e->fence, (long long)flast_fence);
            }
            if (e->fence > flast_fence) flast_fence = e->fence;
            if (fafter) fgrants_after[i]++;
        }
        fseen[i] = fc[i].nlog;
    }
    for (i = 0; i < fn; i++)
        if (fholding[i] && simba_valid_ms(fc[i].s, fl[i]) > 0) n++;
    if (n > 1) {
        fviolations++;
        printf("  # %d clients believe they hold '%s'\n", n, fname);
    }
    for (i = 0; i < fn; i++) {
        if (fholding[i] && now - fsince[i] > 150) {
            simba_release(fc[i].s, fl[i]);
            fholding[i] = 0;
            frequest[i] = 1;    /* until RELEASED */
        } else if (!frequest[i] && !fholding[i]) {
            fo_acquire(i);
        }
    }
}

static void fo_pump(int ms) {
    int64_t end = h_real_ms() + ms;
    while (h_real_ms() < end) {
        h_pump(fcl, fn, 20);
        fo_check();
    }
}

/* Client i of the record, contending at once. */
static const char *fsentinels;   /* the clients' sentinel list, when not the usual one */

static int fo_add(const char *tenant, int ttl, int transition) {
    simba_redis_desc rd = base_desc();
    char id[32];
    if (fsentinels) rd.sentinels = fsentinels;
    int i = fn;
    snprintf(id, sizeof id, "fo%d", i);
    fcl[i] = &fc[i];
    fc[i].s = new_client_tt(&rd, tenant, id, ttl, transition);
    if (!fc[i].s) return 0;
    fbk[i] = last_backend;
    fn++;
    fo_acquire(i);
    return 1;
}

static int fo_setup_tt(const char *tenant, int ttl, int transition) {
    int i;
    memset(fc, 0, sizeof fc);
    memset(fholding, 0, sizeof fholding);
    memset(frequest, 0, sizeof frequest);
    memset(fseen, 0, sizeof fseen);
    memset(fgrants_after, 0, sizeof fgrants_after);
    flast_fence = 0;
    fafter = fviolations = fbackwards = 0;
    fn = 0;
    h_logbuf[0] = 0;
    for (i = 0; i < 3; i++)
        if (!fo_add(tenant, ttl, transition)) return 0;
    fo_pump(3000);
    return 1;
}

static int fo_setup(const char *tenant) { return fo_setup_tt(tenant, TTL, TRANSITION); }

/* Of the first n clients, those that followed the master to its new address
   (+switch-master, +promoted-slave, or a failed main connection that asked
   the sentinels again). */
static int fo_moved(int n_old) {
    int i, n = 0;
    for (i = 0; i < n_old; i++) {
        struct simba_redis_stats st;
        if (simba_redis_stats(fbk[i], &st) == SIMBA_OK && st.master_changes > 0) n++;
    }
    return n;
}

/* Until every client moved to the new master (bounded): the sentinels name
   the promoted replica before they publish +switch-master, and the old
   master serves its clients until then. */
static int fo_wait_moved(int n_old, int ms) {
    int64_t start = h_real_ms(), end = start + ms;
    while (fo_moved(n_old) < n_old && h_real_ms() < end) fo_pump(50);
    printf("  # %d of %d clients followed the master, %lld ms after the sentinels named it\n", fo_moved(n_old), n_old,
           (long long)(h_real_ms() - start));
    return fo_moved(n_old) == n_old;
}

/* After the fault: every client is granted again (not stuck), nobody two. */
static void fo_finish(const char *what) {
    int i, stuck;
    int64_t end = h_real_ms() + 30000;
    fafter = 1;
    do {
        fo_pump(200);
        stuck = 0;
        for (i = 0; i < fn; i++) if (fgrants_after[i] < 2) stuck = 1;
    } while (stuck && h_real_ms() < end);
    printf("  # %s: grants after it %lld %lld %lld, last fence %lld\n", what, (long long)fgrants_after[0],
           (long long)fgrants_after[1], (long long)fgrants_after[2], (long long)flast_fence);
    if (stuck || getenv("SHOW")) {
        int k;
        for (i = 0; i < fn; i++) {
            printf("  # client %d (holding %d request %d, handle %u/%u):", i, fholding[i], frequest[i], fl[i].id, fl[i].gen);
            for (k = fc[i].nlog > 30 ? fc[i].nlog - 30 : 0; k < fc[i].nlog; k++)
                printf(" %s(%u/%u,%d)", simba_event_name(fc[i].log[k].type), fc[i].log[k].lock.id, fc[i].log[k].lock.gen, fc[i].log[k].error);
            printf("\n");
        }
    }
    for (i = 0; i < fn; i++) {
        simba_destroy(fc[i].s);
        fc[i].s = NULL;
    }
    if (stuck) h_fail(__FILE__, __LINE__, "a client was not granted again after the fail-over");
    if (fviolations) h_fail(__FILE__, __LINE__, "two clients believed they held at once");
    if (fbackwards) h_fail(__FILE__, __LINE__, "a fence went backwards");
}

static void show_epoch(const char *tenant) {
    redisContext *c = connect_port(master_port());
    redisReply *r;
    if (!c) return;
    r = (redisReply *)redisCommand(c, "HGETALL simba:epoch:{%s}", tenant);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 4)
        printf("  # epoch: %s=%s %s=%s\n", r->element[0]->str, r->element[1]->str, r->element[2]->str, r->element[3]->str);
    if (r) freeReplyObject(r);
    r = (redisReply *)redisCommand(c, "INFO server");
    if (r && r->type == REDIS_REPLY_STRING && strstr(r->str, "run_id:")) printf("  # %.47s\n", strstr(r->str, "run_id:"));
    if (r) freeReplyObject(r);
    redisFree(c);
}

static void t_sentinel_failover_command(void) {
    int before = master_port(), after;
    char tenant[80];
    snprintf(tenant, sizeof tenant, "%s", my_tenant());
    CHECK(fo_setup(tenant));
    if (getenv("SHOW")) show_epoch(tenant);
    CHECK(ctl_run(fcl, fn, fo_check, "failover", NULL) == 0);
    if (getenv("SHOW")) show_epoch(tenant);
    after = master_port();
    CHECK(after != before);
    CHECK(fo_wait_moved(fn, 30000));   /* grants counted below are on the new master */
    fo_finish("SENTINEL FAILOVER");
    if (!strstr(h_logbuf, "moved from")) printf("  # log:\n%s", h_logbuf);
    CHECK(strstr(h_logbuf, "moved from") != NULL);
}

/* The sentinel that runs a fail-over names the promoted replica as soon as
   it answers as master, but publishes +switch-master only when the other
   replicas follow it (here about a second later): in between a new client
   goes to the new master while the old one still serves the old clients.
   With leases shorter than that gap, the newcomer's grace ended while an
   old client still held there. The clients follow +promoted-slave too, so
   they leave the old master when their sentinel starts to name the new one. */
static void failover_window(const char *list, const char *what) {
    enum { SHORT_TTL = 250, SHORT_TRANSITION = 100 };
    int before = master_port();
    char tenant[80];
    snprintf(tenant, sizeof tenant, "%s", my_tenant());
    fsentinels = list;
    CHECK(fo_setup_tt(tenant, SHORT_TTL, SHORT_TRANSITION));
    CHECK(ctl_run(fcl, fn, fo_check, "failover", NULL) == 0);   /* until the sentinels name the new master */
    CHECK(master_port() != before);
    CHECK(fo_add(tenant, SHORT_TTL, SHORT_TRANSITION));        /* a newcomer goes there */
    fo_pump(2000);
    CHECK(fo_wait_moved(3, 30000));                              /* the newcomer started there */
    fo_finish(what);
    fsentinels = NULL;
}

static void t_sentinel_failover_window(void) {
    failover_window(NULL, "fail-over window, leases of 350 ms");
}

/* The same with the clients subscribed to another sentinel than the one
   that runs the fail-over: that one names the new master (and publishes
   +switch-master) when the hello of the first reaches it. */
static void t_sentinel_failover_window_other(void) {
    char list[256];
    const char *comma = strchr(sentinels, ',');
    CHECK(comma != NULL);
    if (!comma) return;
    snprintf(list, sizeof list, "%s,%.*s", comma + 1, (int)(comma - sentinels), sentinels);
    failover_window(list, "fail-over window, another sentinel");
}

/* restart a killed server (as a replica, once the sentinels see it) */
static void restart_port(int p) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", p);
    ctl_run(NULL, 0, NULL, "start", ps);
}

static void wait_new_master(h_client **cl, int n, void (*each)(void), int old) {
    int64_t end = h_real_ms() + 20000;
    while (h_real_ms() < end) {
        int p = master_port();
        if (p && p != old) return;
        if (n) h_pump(cl, n, 50);
        if (each) each();
    }
}

static void t_sentinel_failover_kill(void) {
    int before = master_port();
    char ps[16];
    CHECK(fo_setup(my_tenant()));
    snprintf(ps, sizeof ps, "%d", before);
    CHECK(ctl_run(fcl, fn, fo_check, "kill", ps) == 0);
    wait_new_master(fcl, fn, fo_check, before);
    CHECK(master_port() != before);
    fo_finish("kill -9 of the master");
    restart_port(before);
}

static void t_sentinel_failover_pause(void) {
    int before = master_port();
    char ps[16];
    CHECK(fo_setup(my_tenant()));
    snprintf(ps, sizeof ps, "%d", before);
    CHECK(ctl_run(fcl, fn, fo_check, "stop", ps) == 0);
    wait_new_master(fcl, fn, fo_check, before);
    fo_pump(2 * TTL);                                   /* paused longer than the lease */
    CHECK(ctl_run(fcl, fn, fo_check, "cont", ps) == 0);
    CHECK(master_port() != before);
    fo_finish("master paused (stop/cont)");
}

/* The grant the new master never saw: the replication is cut while A is
   granted, then the master is killed. A's session was replicated, so
   its keepalive on the new master succeeds by itself; only the backend's
   ESESSION on a changed server run (simba__redis_parse_session) tells A
   that its hold is gone, before B is granted after the restart grace.
   Without it A kept believing while B held (checked: it failed). */
static void t_sentinel_unreplicated_grant(void) {
    simba_redis_desc rd = base_desc();
    h_client a, b, *cl[2];
    simba_lock la, lb;
    const char *tenant = my_tenant();
    int before, both = 0, a_lost_first = 0, a_lost_how = 0;
    char ps[16];
    enum { LONG_TTL = 20000 };   /* longer than a fail-over here: the sessions outlive it */
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    cl[0] = &a;
    cl[1] = &b;
    h_logbuf[0] = 0;
    a.s = new_client_ex(&rd, tenant, "A", LONG_TTL);
    b.s = new_client_ex(&rd, tenant, "B", LONG_TTL);
    CHECK(a.s && b.s);
    la = h_acquire(a.s, "warm", -1);                    /* the tenant's first grace, and both sessions open */
    /* (after an earlier fail-over a new tenant waits one lease: 21 s) */
    CHECK(h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 2 * LONG_TTL + 5000) != NULL);
    simba_release(a.s, la);
    CHECK(h_expect(cl, 2, 0, la, SIMBA_EVENT_RELEASED, SOON) != NULL);
    h_run_for(cl, 2, 300);                              /* replicated */
    CHECK(cut_replication());
    la = h_acquire(a.s, "u", -1);
    CHECK(h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, SOON) != NULL);
    before = master_port();
    snprintf(ps, sizeof ps, "%d", before);
    CHECK(ctl_run(cl, 2, NULL, "kill", ps) == 0);
    wait_new_master(cl, 2, NULL, before);
    CHECK(master_port() != before);
    lb = h_acquire(b.s, "u", -1);
    {
        int64_t t0 = h_real_ms(), end = t0 + 2 * LONG_TTL;
        int a_holds = 1, b_holds = 0;
        simba_event *e;
        while (h_real_ms() < end && !b_holds) {
            h_pump(cl, 2, 20);
            if ((e = h_take(&a, la, SIMBA_EVENT_LOST)) != NULL) {
                printf("  # A lost (%d) after %lld ms\n", e->error, (long long)(h_real_ms() - t0));
                a_holds = 0;
                a_lost_how = e->error;
                if (!b_holds) a_lost_first = 1;
            }
            if (h_take(&b, lb, SIMBA_EVENT_ACQUIRED)) {
                printf("  # B granted after %lld ms\n", (long long)(h_real_ms() - t0));
                b_holds = 1;
            }
            if (a_holds && simba_valid_ms(a.s, la) <= 0) a_holds = 0;
            if (a_holds && b_holds) both = 1;
        }
        if (!b_holds || getenv("SHOW")) {
            int k;
            for (k = 0; k < b.nlog; k++) printf("  # B event %d err %d %s\n", b.log[k].type, b.log[k].error, b.log[k].message);
            for (k = 0; k < a.nlog; k++) printf("  # A event %d err %d %s\n", a.log[k].type, a.log[k].error, a.log[k].message);
            printf("  # log:\n%s", h_logbuf);
        }
        CHECK(b_holds);
    }
    CHECK(!both);
    CHECK(a_lost_first);
    CHECK_EQ(a_lost_how, SIMBA_LOST_SESSION);            /* not its lease running out: the new server run */
    CHECK(strstr(h_logbuf, "restart grace") != NULL);   /* the new master held grants back */
    simba_destroy(a.s);
    simba_destroy(b.s);
    restart_port(before);
}

int main(int argc, char **argv) {
    conf_backend b;
    if (argc > 1) h_filter = argv[1];
    sentinels = getenv("SIMBA_SENTINEL_ADDRS");
    master_name = getenv("SIMBA_SENTINEL_MASTER");
    ctl = getenv("SIMBA_REDIS_CTL");
    if (!sentinels || !master_name || !ctl) {
        printf("test_redis_sentinel: run me through tests/servers/redis.sh sentinel (SIMBA_SENTINEL_* are not set)\n");
        h_failed++;
        return harness_summary();
    }
    signal(SIGPIPE, SIG_IGN);
    warm_up();
    memset(&b, 0, sizeof b);
    b.name = "redis-sentinel";
    b.make = make_redis;
    b.ttl_ms = TTL;
    b.transition_ms = TRANSITION;
    b.kill = kill_redis;
    conformance_run(&b, h_filter, &h_passed, &h_failed);
    RUN(t_sentinel_bad_desc);
    RUN(t_sentinel_url);
    RUN(t_sentinel_none_reachable);
    RUN(t_sentinel_unknown_master);
    RUN(t_sentinel_garbage);
    RUN(t_sentinel_names_replica);
    RUN(t_sentinel_hostile_pushes);
    RUN(t_sentinel_foreign_events);
    RUN(t_sentinel_failover_command);
    RUN(t_sentinel_failover_window);
    RUN(t_sentinel_failover_window_other);
    RUN(t_sentinel_unreplicated_grant);
    RUN(t_sentinel_failover_kill);
    RUN(t_sentinel_failover_pause);
    return harness_summary();
}
