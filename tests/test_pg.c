/* test_pg.c -- the conformance suite on the PostgreSQL backend, plus what
   only a real server can show: the server killed and restarted under a
   hold, a connection terminated (pg_terminate_backend), a stopped server,
   rows held by another transaction (lock_timeout), a full connection limit,
   a read-only server, the schema made by a client and by simba_pg.sql,
   tenant isolation against a hostile role, forged notifications, hostile
   names and bad options.

   Run through tests/servers/pg.sh (make test-pg), which starts a
   throw-away PostgreSQL server and exports SIMBA_PG_* (see that script). An
   optional argv[1] runs only the tests whose name contains it.

   The test helpers talk to the server with libpq's ordinary blocking calls
   on a separate "admin" connection: that is test code, not simba. */
#include "harness.h"
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_PG_IMPLEMENTATION
#include "simba_pg.h"
#include "conformance.h"

#include <signal.h>

/* ---- the server, from tests/servers/pg.sh ---- */

static const char *env_url, *env_ctl;

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static simba_pg_desc base_desc(void) {
    simba_pg_desc d;
    memset(&d, 0, sizeof d);
    d.conninfo = env_url;
    d.create_schema = 1;
    d.connect_timeout_ms = 3000;
    return d;
}

/* A blocking admin connection (the superuser) for setup and inspection. */
static PGconn *admin_open_as(const char *conninfo) {
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        printf("  # admin connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}
static PGconn *admin_open(void) { return admin_open_as(env_url); }

/* Runs SQL (possibly several statements), discarding results. 0 = ok. */
static int admin_exec(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok) printf("  # admin: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok ? 0 : -1;
}

/* The first column of the first row as a number (-1 on error or NULL). */
static long long admin_num(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) v = atoll(PQgetvalue(r, 0, 0));
    else if (PQresultStatus(r) != PGRES_TUPLES_OK) printf("  # admin: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return v;
}

/* A tenant for this file's tests. conformance.c is another translation unit
   with its own h_tenant() counter, so its tenants repeat ours: prefix ours. */
static const char *my_tenant(void) {
    static char buf[SIMBA_MAX_TENANT + 1];
    snprintf(buf, sizeof buf, "p%.60s", h_tenant());
    return buf;
}

/* ---- clients ---- */

/* Every backend this program made, so that kill() can find the one of a
   simba client; a freed impl is forgotten through the allocator hook. */
enum { MAX_BACKENDS = 256 };
static simba_backend made[MAX_BACKENDS];
static int nmade;

static void *track_alloc(size_t n, void *user) { (void)user; return malloc(n); }
static void track_free(void *p, void *user) {
    int i;
    (void)user;
    for (i = 0; i < nmade; i++) if (made[i].impl == p) { made[i] = made[--nmade]; break; }
    free(p);
}

static simba_backend make_backend(const simba_pg_desc *d0) {
    simba_pg_desc d = *d0;
    simba_backend b;
    d.allocator.alloc = track_alloc;
    d.allocator.free = track_free;
    d.allocator.user = NULL;
    b = simba_pg(&d);
    if (b.vt && nmade < MAX_BACKENDS) made[nmade++] = b;
    return b;
}

static simba_backend make_default(void *user) {
    simba_pg_desc d = base_desc();
    (void)user;
    return make_backend(&d);
}

/* White-box: the backend of a simba client. */
static simba__pg *impl_of(simba *s) {
    int i;
    for (i = 0; i < nmade; i++)
        if (made[i].vt && ((simba__pg *)made[i].impl)->s == s) return (simba__pg *)made[i].impl;
    return NULL;
}

static struct simba_pg_stats stats_of(simba *s) {
    struct simba_pg_stats st;
    int i;
    memset(&st, 0, sizeof st);
    for (i = 0; i < nmade; i++)
        if (made[i].vt && ((simba__pg *)made[i].impl)->s == s) simba_pg_stats(made[i], &st);
    return st;
}

/* pg_terminate_backend() of client s's connection, from the admin side. */
static int kill_client(void *user, simba *s) {
    simba__pg *impl = impl_of(s);
    PGconn *c;
    char sql[96];
    int rc;
    (void)user;
    if (!impl) return SIMBA_ESTALE;
    if (!impl->conn || impl->state != SIMBA__PG_READY) return SIMBA_EDISCONNECTED;
    c = admin_open();
    if (!c) return SIMBA_EDISCONNECTED;
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d)::int", PQbackendPID(impl->conn));
    rc = admin_num(c, sql) == 1 ? SIMBA_OK : SIMBA_EBACKEND;
    PQfinish(c);
    return rc;
}


static void log_stderr(void *user, simba_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "[%lld] %d %s\n", (long long)h_real_ms(), (int)level, msg);
}

static simba *new_client_ex(const char *tenant, const char *id, int ttl, int transition, const simba_pg_desc *pd) {
    simba_desc d;
    memset(&d, 0, sizeof d);
    if (getenv("SIMBA_TEST_LOG")) {
        d.logger.func = log_stderr;
        d.logger.level = (simba_log_level)atoi(getenv("SIMBA_TEST_LOG"));
    }
    d.backend = make_backend(pd);
    d.tenant = tenant;
    d.client_id = id;
    d.ttl_ms = ttl;
    d.transition_ms = transition;
    return simba_create(&d, NULL);
}

static simba *new_client(const char *tenant, const char *id, int ttl, int transition) {
    simba_pg_desc pd = base_desc();
    return new_client_ex(tenant, id, ttl, transition, &pd);
}

static simba_lock h_no_lock(void) { simba_lock l = {0, 0}; return l; }

static int wait_connected(h_client **cl, int n, int who, int ms) {
    int64_t end = h_real_ms() + ms;
    while (h_real_ms() < end) {
        if (simba_connected(cl[who]->s)) return 1;
        h_pump(cl, n, 20);
    }
    return simba_connected(cl[who]->s);
}

static void destroy_all(h_client **cl, int n) {
    int i;
    for (i = 0; i < n; i++) if (cl[i]->s) { simba_destroy(cl[i]->s); cl[i]->s = NULL; }
}

/* ---- backend-specific tests ---- */

/* simba_pg.sql is exactly simba_pg_schema("simba") after its comment, and
   another schema name is substituted everywhere. */
static void t_schema_file_matches(void) {
    FILE *f = fopen("simba_pg.sql", "rb");
    char *file, *mine, *body;
    long n;
    int need;
    CHECK(f != NULL);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    file = (char *)calloc(1, (size_t)n + 1);
    CHECK(fread(file, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    body = file;
    while (strncmp(body, "--", 2) == 0) body = strchr(body, '\n') + 1;
    need = simba_pg_schema(NULL, NULL, 0);
    mine = (char *)calloc(1, (size_t)need + 1);
    CHECK_EQ(simba_pg_schema("simba", mine, (size_t)need + 1), need);
    CHECK(strcmp(body, mine) == 0);
    CHECK_EQ(simba_pg_schema("Bad-Name", NULL, 0), SIMBA_ENAME);
    CHECK_EQ(simba_pg_schema("x;drop", NULL, 0), SIMBA_ENAME);
    need = simba_pg_schema("other_schema", NULL, 0);
    free(mine);
    mine = (char *)calloc(1, (size_t)need + 1);
    simba_pg_schema("other_schema", mine, (size_t)need + 1);
    CHECK(strstr(mine, "simba.") == NULL);
    CHECK(strstr(mine, "other_schema.settle") != NULL);
    free(mine);
    free(file);
}

/* Bad options fail simba_create with SIMBA_EINVAL and a message naming the
   field, in libpq's words for a connection string it refuses. */
static void t_bad_options(void) {
    simba_pg_desc pd;
    simba_desc d;
    simba_error er;
    simba *s;
    struct { const char *conninfo, *schema; int half_alloc; const char *want; } cases[] = {
        {"postgres://x@127.0.0.1/db?nosuchoption=1", NULL, 0, "simba_pg_desc.conninfo"},
        {"host='unterminated", NULL, 0, "simba_pg_desc.conninfo"},
        {"postgres://[::1", NULL, 0, "simba_pg_desc.conninfo"},
        {NULL, "Bad", 0, "simba_pg_desc.schema"},
        {NULL, "a;drop table x", 0, "simba_pg_desc.schema"},
        {NULL, NULL, 1, "simba_pg_desc.allocator"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int err = 0;
        memset(&pd, 0, sizeof pd);
        pd.conninfo = cases[i].conninfo ? cases[i].conninfo : env_url;
        pd.schema = cases[i].schema;
        if (cases[i].half_alloc) pd.allocator.alloc = track_alloc;
        memset(&d, 0, sizeof d);
        d.backend = simba_pg(&pd);
        d.tenant = "t";
        d.client_id = "c";
        memset(&er, 0, sizeof er);
        s = simba_create(&d, &er);
        CHECK(s == NULL);
        if (s) simba_destroy(s);
        err = er.code;
        CHECK_EQ(err, SIMBA_EINVAL);
        if (!strstr(er.message, cases[i].want)) printf("  # case %u: '%s'\n", (unsigned)i, er.message);
        CHECK(strstr(er.message, cases[i].want) != NULL);
    }
    {   /* stats of something else */
        struct simba_pg_stats st;
        simba_backend none;
        none.vt = NULL;
        none.impl = NULL;
        CHECK_EQ(simba_pg_stats(none, &st), SIMBA_EINVAL);
    }
}

/* Nothing listens: DISCONNECTED with libpq's words, a waiting request's
   TIMEOUT says why. */
static void t_server_absent(void) {
    simba_pg_desc pd = base_desc();
    static h_client a;
    h_client *cl[1];
    simba_lock l;
    simba_event *e;
    pd.conninfo = "postgres://simba@127.0.0.1:1/simba_test";
    memset(&a, 0, sizeof a);
    cl[0] = &a;
    a.s = new_client_ex(my_tenant(), "absent", 3000, 1000, &pd);
    CHECK(a.s);
    if (!a.s) return;
    l = h_acquire(a.s, "nowhere", 300);
    CHECK((e = h_expect(cl, 1, 0, l, SIMBA_EVENT_TIMEOUT, 5000)) != NULL);
    CHECK(!simba_connected(a.s));
    CHECK(e && (e->error == SIMBA_EDISCONNECTED || e->error == SIMBA_ETIMEDOUT));
    CHECK((e = h_take(&a, h_no_lock(), SIMBA_EVENT_DISCONNECTED)) != NULL);
    CHECK(e && e->error == SIMBA_EDISCONNECTED);
    CHECK(e && strstr(e->message, "refused") != NULL);
    simba_destroy(a.s);
}

/* A wrong password: DISCONNECTED with SIMBA_EAUTH and the server's words. */
static void t_wrong_password(void) {
    simba_pg_desc pd = base_desc();
    static h_client a;
    h_client *cl[1];
    simba_lock l;
    simba_event *e;
    pd.password = "certainly-not-the-password";
    memset(&a, 0, sizeof a);
    cl[0] = &a;
    a.s = new_client_ex(my_tenant(), "badpw", 3000, 1000, &pd);
    CHECK(a.s);
    if (!a.s) return;
    l = h_acquire(a.s, "nowhere", 1500);
    CHECK((e = h_expect(cl, 1, 0, h_no_lock(), SIMBA_EVENT_DISCONNECTED, 8000)) != NULL);
    CHECK(e && e->error == SIMBA_EAUTH);
    CHECK(e && strstr(e->message, "password authentication failed") != NULL);
    CHECK(e && strstr(e->message, "certainly") == NULL);
    CHECK((e = h_expect(cl, 1, 0, l, SIMBA_EVENT_TIMEOUT, 8000)) != NULL);
    CHECK(e && e->error == SIMBA_EAUTH);
    simba_destroy(a.s);
}

/* Without create_schema, a schema that is not there is said in words. */
static void t_schema_missing_is_an_error(void) {
    simba_pg_desc pd = base_desc();
    static h_client a;
    h_client *cl[1];
    simba_event *e;
    pd.create_schema = 0;
    pd.schema = "not_installed_here";
    memset(&a, 0, sizeof a);
    cl[0] = &a;
    a.s = new_client_ex(my_tenant(), "noschema", 3000, 1000, &pd);
    CHECK(a.s);
    if (!a.s) return;
    CHECK((e = h_expect(cl, 1, 0, h_no_lock(), SIMBA_EVENT_DISCONNECTED, 8000)) != NULL);
    CHECK(e && e->error == SIMBA_EBACKEND);
    CHECK(e && strstr(e->message, "not installed") != NULL);
    CHECK(!simba_connected(a.s));
    simba_destroy(a.s);
}

int main(int argc, char **argv) {
    conf_backend cb;
    PGconn *c;
    env_url = env_or("SIMBA_PG_URL", "postgres://simba:simba@127.0.0.1:5432/simba_test");
    env_ctl = env_or("SIMBA_PG_CTL", NULL);
    if (argc > 1) h_filter = argv[1];
    signal(SIGPIPE, SIG_IGN);
    c = admin_open();
    if (!c) {
        printf("no PostgreSQL server at %s (run through tests/servers/pg.sh)\n", env_url);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    PQfinish(c);

    memset(&cb, 0, sizeof cb);
    cb.name = "postgres";
    cb.make = make_default;
    cb.ttl_ms = 1500;
    cb.transition_ms = 1000;
    cb.kill = kill_client;
    conformance_run(&cb, h_filter, &h_passed, &h_failed);

    RUN(t_schema_file_matches);
    RUN(t_bad_options);
    RUN(t_server_absent);
    RUN(t_wrong_password);
    RUN(t_schema_missing_is_an_error);
    (void)stats_of;
    (void)env_ctl;
    (void)admin_exec;
    (void)wait_connected;
    (void)destroy_all;
    (void)new_client;
    return harness_summary();
}
