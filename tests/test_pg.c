/* test_pg.c -- the conformance suite on the PostgreSQL backend, plus what
   only a real server can show: the server killed and restarted under a
   hold, a connection terminated (pg_terminate_backend), a stopped server
   (under a hold, and at connect), rows held by another transaction
   (lock_timeout), a full connection limit, a read-only server, the schema
   made by a client and by simba_pg.sql, tenant isolation against a hostile
   role, forged notifications, hostile names and bad options.

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

#include <poll.h>
#include <signal.h>

/* ---- the server, from tests/servers/pg.sh ---- */

static const char *env_url, *env_ctl;
/* SIMBA_TEST_SLOW=N (make valgrind-pg): leases and connect timeouts N
   times longer, for a client that runs N times slower */
static int slow = 1;

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static simba_pg_desc base_desc(void) {
    simba_pg_desc d;
    memset(&d, 0, sizeof d);
    d.conninfo = env_url;
    d.create_schema = 1;
    d.connect_timeout_ms = 3000 * slow;
    return d;
}

/* A blocking admin connection (the superuser) for setup and inspection.
   A test that fails (CHECK returns) inside a transaction of its own
   leaves it open on a connection nobody closes: the server ends such a
   transaction after 30 s idle, so its locks cannot hang the tests after
   it (the longest a test holds one on purpose is a few seconds). */
static void admin_quiet(void *arg, const char *msg) { (void)arg; (void)msg; }
static PGconn *admin_open_as(const char *conninfo) {
    PGconn *c = PQconnectdb(conninfo);
    PQsetNoticeProcessor(c, admin_quiet, NULL);
    if (PQstatus(c) != CONNECTION_OK) {
        printf("  # admin connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PQclear(PQexec(c, "SET idle_in_transaction_session_timeout = '30s'"));
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

static simba_backend make_backend(const simba_pg_desc *d0) {
    simba_pg_desc d = *d0;
    d.allocator.alloc = h_track_alloc;
    d.allocator.free = h_track_free;
    d.allocator.user = NULL;
    return h_track(simba_pg(&d));
}

/* The conformance suite's clients. Under SIMBA_TEST_SLOW (valgrind) they
   connect over the unix socket, where pg.sh trusts the superuser: ten
   clients computing libpq's SCRAM proof (4096 PBKDF2 rounds) under
   valgrind, one after the other in one thread, take longer than the
   suite's 10 s for what must happen soon. */
static simba_backend make_default(void *user) {
    static char socket_conninfo[512];
    simba_pg_desc d = base_desc();
    const char *sock = getenv("SIMBA_PG_SOCKET"), *port = getenv("SIMBA_PG_PORT");
    (void)user;
    if (slow > 1 && sock && port) {
        snprintf(socket_conninfo, sizeof socket_conninfo, "host=%s port=%s user=simba dbname=simba_test", sock, port);
        d.conninfo = socket_conninfo;
    }
    return make_backend(&d);
}

/* White-box: the backend of a simba client. */
static simba__pg *impl_of(simba *s) {
    int i;
    for (i = 0; i < h_nmade; i++)
        if (h_made[i].vt && ((simba__pg *)h_made[i].impl)->s == s) return (simba__pg *)h_made[i].impl;
    return NULL;
}

static struct simba_pg_stats stats_of(simba *s) {
    struct simba_pg_stats st;
    int i;
    memset(&st, 0, sizeof st);
    for (i = 0; i < h_nmade; i++)
        if (h_made[i].vt && ((simba__pg *)h_made[i].impl)->s == s) simba_pg_stats(h_made[i], &st);
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

/* The whole of a text file, NUL-terminated (free it), or NULL. */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    char *text;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = n >= 0 ? (char *)calloc(1, (size_t)n + 1) : NULL;
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) { free(text); text = NULL; }
    fclose(f);
    return text;
}

/* The queues as the grant rule sees them (white-box): the entry rows and
   the holds kept in resources' rows (a sole uncontended holder). Use it
   with an alias: FROM QUEUE q. */
#define QUEUE "(SELECT tenant, name, seq, request, session, weight, fence FROM simba.entries UNION ALL" \
              " SELECT tenant, name, h_seq, h_request, h_session, h_weight, h_fence FROM simba.resources" \
              " WHERE h_session IS NOT NULL)"

/* The schema simba_pg_schema() prints for `schema` (free it). */
static char *schema_text(const char *schema) {
    int need = simba_pg_schema(schema, NULL, 0);
    char *sql = need > 0 ? (char *)calloc(1, (size_t)need + 1) : NULL;
    if (sql) simba_pg_schema(schema, sql, (size_t)need + 1);
    return sql;
}

/* simba_pg.sql is exactly simba_pg_schema("simba") after its comment, and
   another schema name is substituted everywhere. */
static void t_schema_file_matches(void) {
    char *file = read_text("simba_pg.sql"), *mine, *body;
    int need;
    CHECK(file != NULL);
    body = file;
    while (strncmp(body, "--", 2) == 0) body = strchr(body, '\n') + 1;
    mine = schema_text("simba");
    CHECK(mine && strcmp(body, mine) == 0);
    free(mine);
    CHECK_EQ(simba_pg_schema("Bad-Name", NULL, 0), SIMBA_ENAME);
    CHECK_EQ(simba_pg_schema("x;drop", NULL, 0), SIMBA_ENAME);
    need = simba_pg_schema("other_schema", NULL, 0);
    mine = schema_text("other_schema");
    CHECK(mine && (int)strlen(mine) == need);
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
        if (cases[i].half_alloc) pd.allocator.alloc = h_track_alloc;
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

/* The URL of database `db` on the test server. */
static void url_db(const char *db, char *out, size_t cap) {
    const char *slash = strrchr(env_url, '/');
    int keep = slash ? (int)(slash - env_url) : (int)strlen(env_url);
    snprintf(out, cap, "%.*s/%s", keep, env_url, db);
}

/* DISCONNECTED of client 0 whose message holds `words`. */
static int disconnected_saying(h_client **cl, const char *words) {
    simba_event *e = h_expect(cl, 1, 0, h_no_lock(), SIMBA_EVENT_DISCONNECTED, 8000);
    if (e && !strstr(e->message, words)) printf("  # %s\n", e->message);
    return e && e->error == SIMBA_EBACKEND && strstr(e->message, words) != NULL;
}

/* A database that an older simba set up (tests/pg_schema_v5.sql to
   tests/pg_schema_v11.sql: each version exactly
   as it was installed, from simba_pg.sql of that version), with a holder
   of that version: a client
   without create_schema is refused in words and changes nothing; with
   create_schema the schema is upgraded in place and the old holder keeps
   its entry, its fence and the lock. The installer run again on a database
   in use loses nothing. A schema of a newer simba (version 13 here) is
   refused, with create_schema too, and by the installer itself, and stays
   as it was. */
static void schema_upgrade_from(const char *file, int version) {
    PGconn *root = admin_open(), *db = NULL;
    simba_pg_desc pd = base_desc();
    static h_client a, b;
    h_client *cl[1];
    simba_lock lb, lf;
    simba_event *e;
    char url[512], words[96], *old = read_text(file), *now = schema_text("simba");
    long long fence_old, fence_b;
    PGresult *r;
    CHECK(root && old && now);
    admin_exec(root, "DROP DATABASE IF EXISTS simba_upgrade WITH (FORCE)");
    CHECK(admin_exec(root, "CREATE DATABASE simba_upgrade") == 0);
    url_db("simba_upgrade", url, sizeof url);
    CHECK((db = admin_open_as(url)) != NULL);
    CHECK(admin_exec(db, old) == 0);
    CHECK_EQ(admin_num(db, "SELECT simba.version()"), version);
    /* a client of that version holds "held" (a 60 s lease: it outlives the test) */
    CHECK(admin_num(db, "SELECT simba.open('up', 'old~00000000000000aa', 60000)") >= 0);
    CHECK_EQ(admin_num(db, "SELECT o_granted::int FROM simba.enqueue('up', 'old~00000000000000aa', 'r-old',"
                           " false, false, ARRAY[encode('held'::bytea, 'hex')], ARRAY[1], ARRAY[0])"), 1);
    fence_old = admin_num(db, version >= 10 ? "SELECT fence FROM " QUEUE " queue WHERE tenant = 'up' AND session LIKE 'old~%'"
                                            : "SELECT fence FROM simba.entries WHERE tenant = 'up' AND session LIKE 'old~%'");
    CHECK(fence_old > 0);

    pd.conninfo = url;
    pd.create_schema = 0;
    memset(&a, 0, sizeof a);
    cl[0] = &a;
    a.s = new_client_ex("up", "a", 5000, 2000, &pd);
    CHECK(a.s);
    snprintf(words, sizeof words, "has version %d, this simba needs 12: run simba_pg.sql again", version);
    CHECK(disconnected_saying(cl, words));
    simba_destroy(a.s);
    a.s = NULL;
    CHECK_EQ(admin_num(db, "SELECT simba.version()"), version);

    pd.create_schema = 1;
    memset(&b, 0, sizeof b);
    cl[0] = &b;
    b.s = new_client_ex("up", "b", 20000, 5000, &pd);
    CHECK(b.s);
    CHECK(wait_connected(cl, 1, 0, 10000 * slow));     /* the upgrade is part of the connect */
    lb = h_acquire(b.s, "held", 500);
    CHECK((e = h_expect(cl, 1, 0, lb, SIMBA_EVENT_TIMEOUT, 10000)) != NULL);
    CHECK_EQ(admin_num(db, "SELECT simba.version()"), 12);
    CHECK_EQ(admin_num(db, "SELECT fence FROM " QUEUE " queue WHERE tenant = 'up' AND session LIKE 'old~%'"), fence_old);
    CHECK_EQ(admin_num(db, "SELECT count(*) FROM simba.inspect('up', encode('held'::bytea, 'hex'))"
                           " WHERE o_session = 'old~00000000000000aa' AND o_fence > 0"), 1);
    lf = h_acquire(b.s, "fresh", -1);
    CHECK((e = h_expect(cl, 1, 0, lf, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    fence_b = e ? e->fence : 0;

    /* the installer again, on a database in use */
    CHECK(admin_exec(db, now) == 0);
    h_run_for(cl, 1, 300);
    CHECK_EQ(admin_num(db, "SELECT count(*) FROM simba.sessions WHERE tenant = 'up'"), 2);
    CHECK_EQ(admin_num(db, "SELECT fence FROM " QUEUE " queue WHERE tenant = 'up' AND session LIKE 'old~%'"), fence_old);
    CHECK_EQ(admin_num(db, "SELECT fence FROM " QUEUE " queue WHERE tenant = 'up' AND name = 'fresh'::bytea"), fence_b);
    CHECK(!h_has(&b, lf, SIMBA_EVENT_LOST));
    CHECK(simba_valid_ms(b.s, lf) > 0);

    /* a newer simba's schema */
    CHECK(admin_exec(db, "CREATE OR REPLACE FUNCTION simba.version() RETURNS integer LANGUAGE sql IMMUTABLE"
                         " AS $f$ SELECT 13 $f$") == 0);
    memset(&a, 0, sizeof a);
    cl[0] = &a;
    a.s = new_client_ex("up", "c", 5000, 2000, &pd);
    CHECK(a.s);
    CHECK(disconnected_saying(cl, "has version 13, newer than this simba's 12"));
    r = PQexec(db, now);
    CHECK(PQresultStatus(r) == PGRES_FATAL_ERROR && strstr(PQresultErrorMessage(r), "newer than this simba_pg.sql") != NULL);
    PQclear(r);
    CHECK_EQ(admin_num(db, "SELECT simba.version()"), 13);
    CHECK_EQ(admin_num(db, "SELECT fence FROM " QUEUE " queue WHERE tenant = 'up' AND session LIKE 'old~%'"), fence_old);
    if (a.s) simba_destroy(a.s);
    a.s = NULL;
    if (b.s) simba_destroy(b.s);
    b.s = NULL;
    PQfinish(db);
    db = NULL;
    CHECK(admin_exec(root, "DROP DATABASE simba_upgrade WITH (FORCE)") == 0);
    PQfinish(root);
    free(old);
    free(now);
}

static void t_schema_upgrade(void) {
    schema_upgrade_from("tests/pg_schema_v5.sql", 5);
    schema_upgrade_from("tests/pg_schema_v6.sql", 6);
    schema_upgrade_from("tests/pg_schema_v7.sql", 7);
    schema_upgrade_from("tests/pg_schema_v8.sql", 8);
    schema_upgrade_from("tests/pg_schema_v9.sql", 9);
    schema_upgrade_from("tests/pg_schema_v10.sql", 10);
    schema_upgrade_from("tests/pg_schema_v11.sql", 11);
}

/* The fast paths of the server functions: an acquire of a free name (no
   entry in its queue, no hold in its row, no restart grace) and the
   release of that hold answer as the walk would (granted, a fence above
   every earlier one, the holder as owner; an empty queue after) without
   running the walk (settle), the state query or the queue join, and keep
   the hold in the resource's row: one write of that row per acquire and
   one per release, no entry row inserted or deleted. The holder's POLL
   finds its hold there; a watching acquirer hears its owner change as
   before. A name with a holder still goes the long way (settle runs
   there: the count is not zero for want of tracking) and the hold in the
   row becomes the queue's first entry row, a second holder of a semaphore
   is granted behind the first, and the long way into a queue emptied by a
   release answers the holder count and the owner of the queue as it is. */
static void t_uncontended_fast_path(void) {
    PGconn *root = admin_open();
    char *schema = schema_text("simba");
    const char *hold_in_row = "SELECT count(*) FROM simba.resources WHERE tenant = 'fast' AND name = '\\x6661'"
                              " AND h_fence = counter AND h_seq = seq AND h_request = 'q1'"
                              " AND h_session = 'f~00000000000000f1'";
    /* the rows inserted and deleted in the entries table in this transaction */
    const char *entry_writes = "SELECT n_tup_ins + n_tup_del FROM pg_stat_xact_user_tables"
                               " WHERE schemaname = 'simba' AND relname = 'entries'";
    /* the updates of resource rows in this transaction (and in earlier
       ones whose counts the server has not flushed yet: a difference
       within one transaction is exact) */
    const char *resource_writes = "SELECT n_tup_upd FROM pg_stat_xact_user_tables"
                                  " WHERE schemaname = 'simba' AND relname = 'resources'";
    PGnotify *n;
    long long f1, f2, writes, entry_rows;
    int heard = 0;
    CHECK(root && schema && admin_exec(root, schema) == 0);
    CHECK(admin_exec(root, "DELETE FROM simba.entries WHERE tenant = 'fast';"
                           " DELETE FROM simba.resources WHERE tenant = 'fast'") == 0);
    CHECK(admin_num(root, "SELECT simba.open('fast', 'f~00000000000000f1', 60000)") >= 0);
    CHECK(admin_num(root, "SELECT simba.open('fast', 'g~00000000000000f2', 60000)") >= 0);
    /* the tenant's first grant notices the server's boot (the long way) */
    CHECK_EQ(admin_num(root, "SELECT o_granted::int FROM simba.enqueue('fast', 'f~00000000000000f1', 'w', false,"
                             " false, ARRAY['77'], ARRAY[1], ARRAY[0])"), 1);
    CHECK(admin_num(root, "SELECT simba.release('fast', 'f~00000000000000f1', 'w', ARRAY['77'])") == 0);
    CHECK(admin_exec(root, "LISTEN simba_00000000000000f1") == 0);

    CHECK(admin_exec(root, "BEGIN; SET LOCAL track_functions = 'pl'") == 0);
    writes = admin_num(root, resource_writes);
    entry_rows = admin_num(root, entry_writes);
    f1 = admin_num(root, "SELECT o_fences[1] FROM simba.enqueue('fast', 'f~00000000000000f1', 'q1', false, true,"
                         " ARRAY['6661'], ARRAY[1], ARRAY[0]) WHERE o_status = 0 AND o_granted AND o_ahead = 0"
                         " AND o_held = 1 AND o_owner = 'f~00000000000000f1' AND length(o_token) = 32");
    CHECK(f1 > admin_num(root, "SELECT counter FROM simba.resources WHERE tenant = 'fast' AND name = '\\x77'"));
    CHECK_EQ(admin_num(root, hold_in_row), 1);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.entries WHERE tenant = 'fast' AND name = '\\x6661'"), 0);
    CHECK(admin_num(root, "SELECT simba.release('fast', 'f~00000000000000f1', 'q1', ARRAY['6661'])") == 0);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM " QUEUE " queue WHERE tenant = 'fast' AND name = '\\x6661'"), 0);
    f2 = admin_num(root, "SELECT o_fences[1] FROM simba.enqueue('fast', 'f~00000000000000f1', 'q2', false, false,"
                         " ARRAY['6661'], ARRAY[1], ARRAY[0]) WHERE o_granted");
    CHECK(f2 > f1);
    CHECK(admin_num(root, "SELECT simba.release('fast', 'f~00000000000000f1', 'q2', ARRAY['6661'])") == 0);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM pg_stat_xact_user_functions WHERE schemaname = 'simba'"
                             " AND funcname IN ('settle', 'state', 'join_queue')"), 0);
    CHECK_EQ(admin_num(root, resource_writes) - writes, 4);
    CHECK_EQ(admin_num(root, entry_writes) - entry_rows, 0);
    CHECK(admin_exec(root, "COMMIT") == 0);
    PQconsumeInput(root);
    while ((n = PQnotifies(root)) != NULL) {
        heard += strcmp(n->extra, "o - 6661") == 0;
        PQfreemem(n);
    }
    CHECK_EQ(heard, 1);
    /* the holder's POLL finds its hold in the row; another request of its session is not there */
    f1 = admin_num(root, "SELECT o_fences[1] FROM simba.enqueue('fast', 'f~00000000000000f1', 'q3', false, false,"
                         " ARRAY['6661'], ARRAY[1], ARRAY[0]) WHERE o_granted");
    CHECK(f1 > f2);
    CHECK_EQ(admin_num(root, "SELECT o_fences[1] FROM simba.poll('fast', 'f~00000000000000f1', 'q3', ARRAY['6661'])"
                             " WHERE o_status = 0 AND o_granted AND o_ahead = 0 AND o_held = 1"), f1);
    CHECK_EQ(admin_num(root, "SELECT o_status FROM simba.poll('fast', 'f~00000000000000f1', 'q0', ARRAY['6661'])"), 4);
    CHECK(admin_num(root, "SELECT simba.release('fast', 'f~00000000000000f1', 'q3', ARRAY['6661'])") == 0);

    /* a semaphore of 2: the second holder is granted the long way */
    CHECK(admin_exec(root, "BEGIN; SET LOCAL track_functions = 'pl'") == 0);
    CHECK_EQ(admin_num(root, "SELECT o_held FROM simba.enqueue('fast', 'f~00000000000000f1', 's1', false, false,"
                             " ARRAY['73'], ARRAY[2], ARRAY[1]) WHERE o_granted"), 1);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM pg_stat_xact_user_functions WHERE funcname = 'settle'"), 0);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.resources WHERE tenant = 'fast' AND name = '\\x73'"
                             " AND h_request = 's1'"), 1);
    CHECK_EQ(admin_num(root, "SELECT o_held FROM simba.enqueue('fast', 'g~00000000000000f2', 's2', false, false,"
                             " ARRAY['73'], ARRAY[2], ARRAY[1]) WHERE o_granted"), 2);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.resources WHERE tenant = 'fast' AND name = '\\x73'"
                             " AND h_session IS NULL"), 1);
    CHECK_EQ(admin_num(root, "SELECT (string_agg(request, ',' ORDER BY seq) = 's1,s2')::int FROM simba.entries"
                             " WHERE tenant = 'fast' AND name = '\\x73' AND fence > 0"), 1);
    CHECK(admin_num(root, "SELECT count(*) FROM pg_stat_xact_user_functions WHERE funcname = 'settle'") > 0);
    CHECK(admin_num(root, "SELECT simba.release('fast', 'f~00000000000000f1', 's1', ARRAY['73'])") == 0);
    CHECK_EQ(admin_num(root, "SELECT held FROM simba.resources WHERE tenant = 'fast' AND name = '\\x73'"), 1);
    CHECK(admin_num(root, "SELECT simba.release('fast', 'g~00000000000000f2', 's2', ARRAY['73'])") == 0);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM " QUEUE " queue WHERE tenant = 'fast' AND name = '\\x73'"), 0);
    /* the long way (a try) into the emptied queue: its holder count and owner are the new holder's */
    CHECK_EQ(admin_num(root, "SELECT o_held FROM simba.enqueue('fast', 'f~00000000000000f1', 's3', true, false,"
                             " ARRAY['73'], ARRAY[2], ARRAY[1]) WHERE o_granted AND o_owner = 'f~00000000000000f1'"
                             " AND o_ahead = 0"), 1);
    CHECK(admin_exec(root, "COMMIT") == 0);
    PQfinish(root);
    free(schema);
}

/* The race tests' sessions: K connections, each with a session
   "<letter><i>~...<i>" of tenant t (its queues emptied first). */
static int race_open(PGconn *root, PGconn **c, int k, const char *t, char letter) {
    char sql[200];
    int i;
    snprintf(sql, sizeof sql, "DELETE FROM simba.entries WHERE tenant = '%s';"
             " DELETE FROM simba.resources WHERE tenant = '%s'", t, t);
    admin_exec(root, sql);
    for (i = 0; i < k; i++) {
        if ((c[i] = admin_open()) == NULL) return 0;
        snprintf(sql, sizeof sql, "SELECT simba.open('%s', '%c%d~000000000000000%d', 60000)", t, letter, i, i);
        if (admin_num(c[i], sql) < 0) return 0;
    }
    return 1;
}

/* Waits for the answers of a burst sent to all k; 0 if one failed. */
static int race_answers(PGconn **c, int k) {
    int i, ok = 1;
    for (i = 0; i < k; i++) {
        PGresult *r;
        while ((r = PQgetResult(c[i])) != NULL) {
            if (PQresultStatus(r) != PGRES_TUPLES_OK) { printf("  # %s", PQresultErrorMessage(r)); ok = 0; }
            PQclear(r);
        }
    }
    return ok;
}

/* After a round on tenant t: at most cap entries granted; when the queue
   has entries, the row's held count is theirs and the oldest holder its
   owner; the granted entries' fences increase in queue order. */
static int race_consistent(PGconn *root, const char *t, int cap) {
    char sql[2048];
    int ok = 1;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM " QUEUE " queue WHERE tenant = '%s' AND fence > 0", t);
    ok &= admin_num(root, sql) <= cap;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM simba.resources r WHERE tenant = '%s' AND (NOT EXISTS"
             " (SELECT 1 FROM " QUEUE " q WHERE q.tenant = r.tenant) OR (held ="
             " (SELECT count(*) FROM " QUEUE " q WHERE q.tenant = r.tenant AND fence > 0)"
             " AND owner IS NOT DISTINCT FROM (SELECT session FROM " QUEUE " q"
             " WHERE q.tenant = r.tenant AND fence > 0 ORDER BY seq LIMIT 1)))", t);
    ok &= admin_num(root, sql) == 1;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM (SELECT fence, lag(fence) OVER (ORDER BY seq) AS before"
             " FROM " QUEUE " queue WHERE tenant = '%s' AND fence > 0) g WHERE g.before >= g.fence", t);
    ok &= admin_num(root, sql) == 0;
    return ok;
}

/* Ends the race's sessions (closing them empties every queue of entry rows). */
static int race_close(PGconn *root, PGconn **c, int k, const char *t, char letter) {
    char sql[200];
    int i, ok = 1;
    for (i = 0; i < k; i++) {
        snprintf(sql, sizeof sql, "SELECT simba.close('%s', '%c%d~000000000000000%d')", t, letter, i, i);
        ok &= admin_num(c[i], sql) == 0;
        PQfinish(c[i]);
    }
    /* (a hold kept in a resource's row stays there, dead: see unfold) */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM simba.entries WHERE tenant = '%s'", t);
    return ok && admin_num(root, sql) == 0;
}

/* Sessions on their own connections race on one mutex through the SQL
   functions, each round's calls sent to all at once: every session
   releases its last request and enqueues a new one, every other one a try
   (a try that does not fit gives out a queue position and inserts
   nothing: a gap); in every other round all release first, then all
   enqueue into the empty queue at once. The fast paths read the queue without a lock first
   (ENQUEUE's write of the resource's row requires the position it read;
   RELEASE's lock reads the row's newest position): after each round at
   most one entry is granted, a queue with entries has its head granted
   (no release missed a waiter that came in meanwhile), the row's held
   count and owner are the queue's, and the fences increase in queue
   order. */
static void t_sql_race_mutex(void) {
    enum { K = 4, ROUNDS = 60 };
    PGconn *c[K], *root = admin_open();
    char *schema = schema_text("simba"), sql[600];
    int i, round, ok = 1;
    CHECK(root && schema && admin_exec(root, schema) == 0);
    CHECK(race_open(root, c, K, "mrace", 'm'));
    for (round = 0; round < ROUNDS && ok; round++) {
        /* even rounds: one burst of release + enqueue; odd: releases, then enqueues */
        int burst, bursts = round % 2 ? 2 : 1;
        for (burst = 0; burst < bursts; burst++) {
            for (i = 0; i < K; i++) {
                char release[160] = "", enqueue[300] = "";
                if (burst == 0)
                    snprintf(release, sizeof release, "SELECT simba.release('mrace', 'm%d~000000000000000%d',"
                             " 'q%d', ARRAY['6d78']);", i, i, round - 1);
                if (burst == bursts - 1)
                    snprintf(enqueue, sizeof enqueue, "SELECT o_status FROM simba.enqueue('mrace',"
                             " 'm%d~000000000000000%d', 'q%d', %s, false, ARRAY['6d78'], ARRAY[1], ARRAY[0])",
                             i, i, round, (round + i) % 2 ? "true" : "false");
                snprintf(sql, sizeof sql, "%s %s", release, enqueue);
                ok &= PQsendQuery(c[i], sql);
            }
            ok &= race_answers(c, K);
        }
        ok &= race_consistent(root, "mrace", 1);
        ok &= admin_num(root, "SELECT count(*) FROM (SELECT fence FROM " QUEUE " queue WHERE tenant = 'mrace'"
                              " ORDER BY seq LIMIT 1) h WHERE h.fence = 0") == 0;
        if (!ok) printf("  # round %d\n", round);
    }
    CHECK(ok);
    CHECK(race_close(root, c, K, "mrace", 'm'));
    PQfinish(root);
    free(schema);
}

/* Sessions on their own connections race on one semaphore (capacity 2)
   through the SQL functions, each call sent to all at once: the first
   round also races to create the resource row. The row's lock (taken by
   ENQUEUE's FOR UPDATE or upsert, by RELEASE's FOR UPDATE) keeps every
   walk alone on its queue: after each round at most 2 entries are
   granted, the row's held count is theirs and the oldest holder is its
   owner (the queue has entries after every round), and the granted
   entries' fences increase in queue order. */
static void t_sql_race(void) {
    enum { K = 4, ROUNDS = 25 };
    PGconn *c[K], *root = admin_open();
    char *schema = schema_text("simba"), sql[400];
    int i, round, ok = 1;
    CHECK(root && schema && admin_exec(root, schema) == 0);
    CHECK(race_open(root, c, K, "race", 'r'));
    for (round = 0; round < ROUNDS && ok; round++) {
        /* round r: every session enqueues request q<r>; odd rounds release
           the previous round's requests in the same burst */
        for (i = 0; i < K; i++) {
            if (round % 2 == 1)
                snprintf(sql, sizeof sql, "SELECT simba.release('race', 'r%d~000000000000000%d', 'q%d',"
                         " ARRAY['73656d']); SELECT o_status FROM simba.enqueue('race', 'r%d~000000000000000%d',"
                         " 'q%d', false, false, ARRAY['73656d'], ARRAY[2], ARRAY[1])", i, i, round - 1, i, i, round);
            else
                snprintf(sql, sizeof sql, "SELECT o_status FROM simba.enqueue('race', 'r%d~000000000000000%d',"
                         " 'q%d', false, false, ARRAY['73656d'], ARRAY[2], ARRAY[1])", i, i, round);
            ok &= PQsendQuery(c[i], sql);
        }
        ok &= race_answers(c, K);
        ok &= race_consistent(root, "race", 2);
        if (!ok) printf("  # round %d\n", round);
    }
    CHECK(ok);
    /* the queue is FIFO: with every round's requests queued, the granted
       ones are the oldest */
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM " QUEUE " g WHERE tenant = 'race' AND fence > 0 AND EXISTS"
                             " (SELECT 1 FROM " QUEUE " w WHERE w.tenant = 'race' AND w.fence = 0"
                             " AND w.seq < g.seq)"), 0);
    CHECK(race_close(root, c, K, "race", 'r'));
    PQfinish(root);
    free(schema);
}

/* Sessions A and B (and C) of tenant `t` on the admin connection, the
   tenant's boot noticed (its first grant goes the long way), its queues
   emptied. */
static int hold_setup(PGconn *root, const char *t) {
    char sql[400];
    snprintf(sql, sizeof sql, "DELETE FROM simba.entries WHERE tenant = '%s'; DELETE FROM simba.resources"
             " WHERE tenant = '%s'; DELETE FROM simba.sessions WHERE tenant = '%s'", t, t, t);
    if (admin_exec(root, sql) != 0) return 0;
    snprintf(sql, sizeof sql, "SELECT simba.open('%s', 'a~00000000000000a1', 60000) + simba.open('%s',"
             " 'b~00000000000000b1', 60000) + simba.open('%s', 'c~00000000000000c1', 60000)", t, t, t);
    if (admin_num(root, sql) < 0) return 0;
    snprintf(sql, sizeof sql, "SELECT o_granted::int FROM simba.enqueue('%s', 'a~00000000000000a1', 'boot', false,"
             " false, ARRAY['626f6f74'], ARRAY[1], ARRAY[0])", t);
    if (admin_num(root, sql) != 1) return 0;
    snprintf(sql, sizeof sql, "SELECT simba.release('%s', 'a~00000000000000a1', 'boot', ARRAY['626f6f74'])", t);
    return admin_num(root, sql) == 0;
}

/* ENQUEUE of session s (a, b or c: "<s>~00000000000000<s>1") with request
   `req` on the names (hex, comma-separated) with capacity `cap`, weight 1
   or 0 (exclusive): the column `col` of the answer, -1 on an error. */
static long long hold_enqueue(PGconn *c, const char *t, char s, const char *req, const char *names, int cap,
                              int weight, const char *col) {
    char sql[600], caps[64] = "", weights[64] = "";
    const char *p;
    int n = 1;
    for (p = names; *p; p++) n += *p == ',';
    while (n--) {
        snprintf(caps + strlen(caps), sizeof caps - strlen(caps), "%s%d", caps[0] ? "," : "", cap);
        snprintf(weights + strlen(weights), sizeof weights - strlen(weights), "%s%d", weights[0] ? "," : "", weight);
    }
    snprintf(sql, sizeof sql, "SELECT %s FROM simba.enqueue('%s', '%c~00000000000000%c1', '%s', false, false,"
             " string_to_array('%s', ','), ARRAY[%s], ARRAY[%s])", col, t, s, s, req, names, caps, weights);
    return admin_num(c, sql);
}

/* The fence of request `req` on the first of its names (hex,
   comma-separated) as POLL answers it to session s (0: not granted on all
   of them; -status when the status is not 0). */
static long long hold_poll(PGconn *c, const char *t, char s, const char *req, const char *names) {
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT CASE WHEN o_status <> 0 THEN -o_status WHEN o_granted THEN o_fences[1]"
             " ELSE 0 END FROM simba.poll('%s', '%c~00000000000000%c1', '%s', string_to_array('%s', ','))",
             t, s, s, req, names);
    return admin_num(c, sql);
}

/* A sole holder's hold kept in the resource's row meets a second request:
   the long way turns the hold into the queue's first entry row (its
   position, fence and token kept), the newcomer waits behind it (mutex)
   or is granted beside it (semaphore of 2), the holder's POLL still
   answers its fence, its release grants the waiter with a higher fence,
   and a multi-resource request unfolds the hold of each of its names. */
static void t_hold_in_row_meets_a_queue(void) {
    PGconn *root = admin_open();
    char *schema = schema_text("simba");
    const char *t = "rowq";
    long long fa, fb, token_same;
    CHECK(root && schema && admin_exec(root, schema) == 0 && hold_setup(root, t));
    /* mutex "mx" (6d78): A holds in the row, B queues behind it */
    fa = hold_enqueue(root, t, 'a', "ra", "6d78", 1, 0, "o_fences[1]");
    CHECK(fa > 0);
    CHECK(admin_exec(root, "CREATE TEMP TABLE tok AS SELECT h_token FROM simba.resources"
                           " WHERE tenant = 'rowq' AND name = '\\x6d78'") == 0);
    CHECK_EQ(hold_enqueue(root, t, 'b', "rb", "6d78", 1, 0, "o_ahead * 10 + o_granted::int"), 10);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.resources WHERE tenant = 'rowq' AND name = '\\x6d78'"
                             " AND h_session IS NULL AND held = 1 AND owner = 'a~00000000000000a1'"), 1);
    token_same = admin_num(root, "SELECT count(*) FROM simba.entries q JOIN tok ON tok.h_token = q.token"
                                 " WHERE q.tenant = 'rowq' AND q.name = '\\x6d78' AND q.request = 'ra'");
    CHECK_EQ(token_same, 1);
    CHECK_EQ(admin_num(root, "SELECT (string_agg(request || ':' || (fence > 0)::int, ',' ORDER BY seq)"
                             " = 'ra:1,rb:0')::int FROM simba.entries WHERE tenant = 'rowq' AND name = '\\x6d78'"), 1);
    CHECK_EQ(hold_poll(root, t, 'a', "ra", "6d78"), fa);
    CHECK_EQ(hold_poll(root, t, 'b', "rb", "6d78"), 0);
    CHECK(admin_num(root, "SELECT simba.release('rowq', 'a~00000000000000a1', 'ra', ARRAY['6d78'])") == 0);
    fb = admin_num(root, "SELECT fence FROM simba.entries WHERE tenant = 'rowq' AND name = '\\x6d78' AND request = 'rb'");
    CHECK(fb > fa);
    CHECK_EQ(hold_poll(root, t, 'b', "rb", "6d78"), fb);
    CHECK(admin_num(root, "SELECT simba.release('rowq', 'b~00000000000000b1', 'rb', ARRAY['6d78'])") == 0);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM " QUEUE " q WHERE tenant = 'rowq' AND name = '\\x6d78'"), 0);

    /* semaphore "sm" (736d) of 2: A holds in the row, B is granted beside it, C waits */
    fa = hold_enqueue(root, t, 'a', "sa", "736d", 2, 1, "o_fences[1]");
    CHECK(fa > fb);
    fb = hold_enqueue(root, t, 'b', "sb", "736d", 2, 1, "o_fences[1]");
    CHECK(fb > fa);
    CHECK_EQ(hold_enqueue(root, t, 'c', "sc", "736d", 2, 1, "o_granted::int"), 0);
    CHECK_EQ(hold_poll(root, t, 'a', "sa", "736d"), fa);
    CHECK(admin_num(root, "SELECT simba.release('rowq', 'a~00000000000000a1', 'sa', ARRAY['736d'])") == 0);
    CHECK(hold_poll(root, t, 'c', "sc", "736d") > fb);

    /* a two-name request meets a hold in each name's row */
    CHECK(hold_enqueue(root, t, 'a', "x1", "7831", 1, 0, "o_fences[1]") > 0);
    CHECK(hold_enqueue(root, t, 'b', "x2", "7832", 1, 0, "o_fences[1]") > 0);
    CHECK_EQ(hold_enqueue(root, t, 'c', "xc", "7831,7832", 1, 0, "o_granted::int"), 0);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.resources WHERE tenant = 'rowq' AND h_session IS NOT NULL"), 0);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.entries WHERE tenant = 'rowq' AND fence > 0"
                             " AND request IN ('x1', 'x2')"), 2);
    CHECK(admin_num(root, "SELECT simba.release('rowq', 'a~00000000000000a1', 'x1', ARRAY['7831'])") == 0);
    CHECK_EQ(hold_poll(root, t, 'c', "xc", "7831,7832"), 0);
    CHECK(admin_num(root, "SELECT simba.release('rowq', 'b~00000000000000b1', 'x2', ARRAY['7832'])") == 0);
    CHECK(hold_poll(root, t, 'c', "xc", "7831,7832") > 0);
    PQfinish(root);
    free(schema);
}

/* A hold kept in a resource's row whose session ended is nobody's: after
   the session was closed, or expired, or expired and was opened again
   under its id (another session: OPEN), the next request is granted at
   once, the old request's POLL finds nothing, and INSPECT lists no holder.
   A live hold in a row is listed by INSPECT, and DELETE and SET_CAPACITY
   tell its session. */
static void t_hold_in_row_of_an_ended_session(void) {
    PGconn *root = admin_open();
    char *schema = schema_text("simba");
    const char *t = "rowd";
    const char *end[3] = {
        "SELECT simba.close('rowd', 'a~00000000000000a1')",
        "UPDATE simba.sessions SET expires = clock_timestamp() - interval '1 second'"
        " WHERE tenant = 'rowd' AND session = 'a~00000000000000a1'",
        "UPDATE simba.sessions SET expires = clock_timestamp() - interval '1 second'"
        " WHERE tenant = 'rowd' AND session = 'a~00000000000000a1';"
        " SELECT simba.open('rowd', 'a~00000000000000a1', 60000)",
    };
    char req[16];
    PGnotify *n;
    int k, heard = 0;
    long long fa;
    CHECK(root && schema && admin_exec(root, schema) == 0 && hold_setup(root, t));
    for (k = 0; k < 3; k++) {
        snprintf(req, sizeof req, "e%d", k);
        fa = hold_enqueue(root, t, 'a', req, "6564", 1, 0, "o_fences[1]");
        CHECK(fa > 0);
        CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.resources WHERE tenant = 'rowd'"
                                 " AND name = '\\x6564' AND h_session = 'a~00000000000000a1'"), 1);
        CHECK(admin_exec(root, end[k]) == 0);
        if (k == 2) CHECK_EQ(hold_poll(root, t, 'a', req, "6564"), -4);
        CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.inspect('rowd', '6564') WHERE o_session IS NULL"), 1);
        CHECK(hold_enqueue(root, t, 'b', req, "6564", 1, 0, "o_fences[1]") > fa);
        CHECK(admin_num(root, "SELECT simba.release('rowd', 'b~00000000000000b1', 'e0', ARRAY['6564'])"
                              " + simba.release('rowd', 'b~00000000000000b1', 'e1', ARRAY['6564'])"
                              " + simba.release('rowd', 'b~00000000000000b1', 'e2', ARRAY['6564'])") == 0);
        if (k == 0) CHECK(admin_num(root, "SELECT simba.open('rowd', 'a~00000000000000a1', 60000)") >= 0);
        if (k == 1) CHECK(admin_exec(root, "DELETE FROM simba.sessions WHERE tenant = 'rowd'"
                                           " AND session = 'a~00000000000000a1'") == 0 &&
                          admin_num(root, "SELECT simba.open('rowd', 'a~00000000000000a1', 60000)") >= 0);
    }
    /* INSPECT lists a live hold in the row; DELETE and SET_CAPACITY tell its session */
    CHECK(admin_num(root, "SELECT simba.open('rowd', 'a~00000000000000a1', 60000)") >= 0);
    fa = hold_enqueue(root, t, 'a', "i1", "6564", 1, 0, "o_fences[1]");
    CHECK_EQ(admin_num(root, "SELECT o_fence FROM simba.inspect('rowd', '6564')"
                             " WHERE o_session = 'a~00000000000000a1'"), fa);
    CHECK(admin_exec(root, "LISTEN simba_00000000000000a1") == 0);
    CHECK(hold_enqueue(root, t, 'a', "c1", "6331", 1, 0, "o_fences[1]") > 0);
    CHECK(admin_num(root, "SELECT simba.set_capacity('rowd', '6331', 3)") == 0);
    CHECK(hold_enqueue(root, t, 'a', "d1", "6431", 1, 0, "o_fences[1]") > 0);
    CHECK(admin_num(root, "SELECT simba.delete('rowd', '6431')") == 0);
    PQconsumeInput(root);
    while ((n = PQnotifies(root)) != NULL) {
        heard += strcmp(n->extra, "c - 6331") == 0 || strcmp(n->extra, "c - 6431") == 0;
        PQfreemem(n);
    }
    CHECK_EQ(heard, 2);
    PQfinish(root);
    free(schema);
}

/* Whether the query sent on c is still running after ms (waiting for a lock). */
static int still_busy(PGconn *c, int ms) {
    int i, busy = 1;
    for (i = 0; i < ms / 10 && busy; i++) {
        poll(NULL, 0, 10);
        PQconsumeInput(c);
        busy = PQisBusy(c);
    }
    return busy;
}

/* CLOSE of a session meets the long way of another that turns the
   session's hold in a row into an entry row (in a transaction still
   open): CLOSE waits for it (the entry row's session is locked), then
   finds the entry and walks its queue, so the waiter is granted by the
   CLOSE itself, not by a later POLL. */
static void t_hold_in_row_meets_close(void) {
    PGconn *root = admin_open(), *x = admin_open(), *y = admin_open();
    char *schema = schema_text("simba");
    const char *t = "rowc";
    PGresult *r;
    CHECK(root && x && y && schema && admin_exec(root, schema) == 0 && hold_setup(root, t));
    CHECK(hold_enqueue(root, t, 'a', "ca", "636c", 1, 0, "o_fences[1]") > 0);
    CHECK(admin_exec(x, "BEGIN") == 0);
    CHECK_EQ(hold_enqueue(x, t, 'b', "cb", "636c", 1, 0, "o_granted::int"), 0);
    CHECK(PQsendQuery(y, "SELECT simba.close('rowc', 'a~00000000000000a1')"));
    CHECK(still_busy(y, 200));                     /* CLOSE is still waiting */
    CHECK(admin_exec(x, "COMMIT") == 0);
    while ((r = PQgetResult(y)) != NULL) {
        CHECK(PQresultStatus(r) == PGRES_TUPLES_OK);
        PQclear(r);
    }
    CHECK(admin_num(root, "SELECT fence FROM simba.entries WHERE tenant = 'rowc' AND name = '\\x636c'"
                          " AND request = 'cb'") > 0);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.entries WHERE tenant = 'rowc' AND request = 'ca'"), 0);
    PQfinish(x);
    PQfinish(y);
    PQfinish(root);
    free(schema);
}

/* INSPECT meets a renewal that commits while it waits for the resource's
   row: the times it answers are by one clock reading, so the renewed
   session expires no later than its lease from then (renewed_ago_ms 0,
   the two summing to the lease), not its lease plus the wait. */
static void t_inspect_meets_a_renewal(void) {
    PGconn *root = admin_open(), *x = admin_open(), *y = admin_open();
    char *schema = schema_text("simba");
    const char *t = "rowk";
    PGresult *r;
    CHECK(root && x && y && schema && admin_exec(root, schema) == 0 && hold_setup(root, t));
    CHECK(hold_enqueue(root, t, 'a', "ka", "6b", 1, 0, "o_fences[1]") > 0);
    CHECK(admin_exec(x, "BEGIN") == 0);
    CHECK(admin_exec(x, "SELECT 1 FROM simba.resources WHERE tenant = 'rowk' AND name = '\\x6b' FOR UPDATE") == 0);
    CHECK(PQsendQuery(y, "SELECT o_expires_in_ms, o_renewed_ago_ms FROM simba.inspect('rowk', '6b')"
                         " WHERE o_session = 'a~00000000000000a1'"));
    CHECK(still_busy(y, 300));                     /* INSPECT is still waiting */
    CHECK(admin_num(x, "SELECT simba.keepalive('rowk', 'a~00000000000000a1', 60000)") >= 0);
    CHECK(admin_exec(x, "COMMIT") == 0);
    r = PQgetResult(y);
    CHECK(r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1);
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        long long expires_in = atoll(PQgetvalue(r, 0, 0)), renewed_ago = atoll(PQgetvalue(r, 0, 1));
        printf("  # expires_in_ms %lld, renewed_ago_ms %lld (lease 60000)\n", expires_in, renewed_ago);
        CHECK(expires_in >= 1 && expires_in <= 60000);
        CHECK_EQ(expires_in + renewed_ago, 60000);
    }
    PQclear(r);
    while ((r = PQgetResult(y)) != NULL) PQclear(r);
    PQfinish(x);
    PQfinish(y);
    PQfinish(root);
    free(schema);
}

/* A URL for role `user` with password `pw` on the test server. */
static void url_as(const char *user, const char *pw, char *out, size_t cap) {
    const char *at = strchr(env_url, '@');
    snprintf(out, cap, "postgres://%s:%s%s", user, pw, at ? at : "@127.0.0.1/simba_test");
}

/* The request id of client `client`'s entry on `name` (white-box, admin). */
static int entry_request(PGconn *c, const char *tenant, const char *client, const char *name, char *out, size_t cap) {
    char sql[1024];
    PGresult *r;
    int ok;
    snprintf(sql, sizeof sql, "SELECT request, session FROM " QUEUE " queue WHERE tenant = '%s' AND name = '%s'::bytea"
             " AND session LIKE '%s~%%'", tenant, name, client);
    r = PQexec(c, sql);
    ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (ok) snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
    else printf("  # entry_request: %s", PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* Tenant isolation enforced by PostgreSQL: role app_a owns tenant ta (listed
   in simba.tenant_roles); a hostile role app_b, with every grant a simba
   client has, can neither read, forge, change, delete nor release ta's
   entries and sessions, through the tables or through simba's functions,
   nor list itself for ta. A keeps its hold, with its fence. */
static void t_tenant_isolation(void) {
    PGconn *root = admin_open(), *hb = NULL;
    simba_pg_desc pd = base_desc();
    static h_client ha;
    h_client *cl[1];
    simba_lock la;
    simba_event *e;
    char url[512], sql[512], session[SIMBA_MAX_SESSION + 1] = "", request[256] = "";
    long long fence = -1;
    static const char *const attacks[] = {
        "UPDATE simba.sessions SET expires = now() + interval '1 day' WHERE tenant = 'ta'",
        "DELETE FROM simba.sessions WHERE tenant = 'ta'",
        "UPDATE simba.entries SET fence = 4242 WHERE tenant = 'ta'",
        "DELETE FROM simba.entries WHERE tenant = 'ta'",
        "UPDATE simba.resources SET capacity = 100, counter = 0 WHERE tenant = 'ta'",
        "UPDATE simba.resources SET h_session = NULL, h_request = NULL, h_fence = 4242 WHERE tenant = 'ta'",
        "DELETE FROM simba.resources WHERE tenant = 'ta'",
        "INSERT INTO simba.entries (tenant, name, seq, request, session, weight, fence)"
        " VALUES ('ta', 'iso'::bytea, 999, 'forged', 'evil~0000000000000000', 1, 4242)",
        "INSERT INTO simba.sessions VALUES ('ta', 'evil~0000000000000000', now() + interval '1 day', 1000)",
        "SELECT simba.open('ta', 'evil~0000000000000000', 100000)",
        "SELECT simba.delete('ta', encode('iso'::bytea, 'hex'))",
        "SELECT simba.set_capacity('ta', encode('iso'::bytea, 'hex'), 100)",
        "SELECT simba.close('ta', (SELECT min(session) FROM simba.sessions))",
        "INSERT INTO simba.tenant_roles VALUES ('ta', 'app_b')",
        "DELETE FROM simba.tenant_roles",
        "TRUNCATE simba.entries",
        "DROP POLICY tenant_rows ON simba.entries",
        "ALTER TABLE simba.entries DISABLE ROW LEVEL SECURITY",
        "SET row_security = off; SELECT count(*) FROM simba.entries WHERE tenant = 'ta'",
        NULL };
    int i;
    CHECK(root);
    if (!root) return;
    CHECK(admin_exec(root,
        "DO $d$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'app_a') THEN"
        "  CREATE ROLE app_a LOGIN PASSWORD 'pa'; CREATE ROLE app_b LOGIN PASSWORD 'pb'; END IF; END $d$;"
        "GRANT USAGE ON SCHEMA simba TO app_a, app_b;"
        "GRANT SELECT, INSERT, UPDATE, DELETE ON simba.sessions, simba.resources, simba.entries, simba.tenants"
        "  TO app_a, app_b;"
        "GRANT SELECT ON simba.tenant_roles TO app_a, app_b;"
        "DELETE FROM simba.tenant_roles WHERE tenant IN ('ta', 'tb');"
        "DELETE FROM simba.entries WHERE tenant IN ('ta', 'tb');"      /* a run before on this server */
        "DELETE FROM simba.sessions WHERE tenant IN ('ta', 'tb');"
        "DELETE FROM simba.resources WHERE tenant IN ('ta', 'tb');"
        "INSERT INTO simba.tenant_roles VALUES ('ta', 'app_a'), ('tb', 'app_b');") == 0);
    url_as("app_a", "pa", url, sizeof url);
    pd.conninfo = url;
    pd.create_schema = 0;
    memset(&ha, 0, sizeof ha);
    cl[0] = &ha;
    ha.s = new_client_ex("ta", "a", 20000, 5000, &pd);
    CHECK(ha.s);
    if (!ha.s) { PQfinish(root); return; }
    la = h_acquire(ha.s, "iso", -1);
    CHECK((e = h_expect(cl, 1, 0, la, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    fence = admin_num(root, "SELECT fence FROM " QUEUE " queue WHERE tenant = 'ta' AND name = 'iso'::bytea");
    CHECK(fence > 0);
    CHECK(entry_request(root, "ta", "a", "iso", request, sizeof request));
    url_as("app_b", "pb", url, sizeof url);
    hb = admin_open_as(url);
    CHECK(hb);
    if (hb) {
        /* what app_b sees of ta: nothing */
        CHECK_EQ(admin_num(hb, "SELECT count(*) FROM " QUEUE " queue WHERE tenant = 'ta'"), 0);
        CHECK_EQ(admin_num(hb, "SELECT count(*) FROM simba.sessions WHERE tenant = 'ta'"), 0);
        CHECK_EQ(admin_num(hb, "SELECT count(*) FROM simba.resources WHERE tenant = 'ta'"), 0);
        CHECK_EQ(admin_num(hb, "SELECT count(*) FROM simba.inspect('ta', encode('iso'::bytea, 'hex'))"), 0);
        for (i = 0; attacks[i]; i++) {
            PGresult *r = PQexec(hb, attacks[i]);
            ExecStatusType st = PQresultStatus(r);
            /* refused, or it touched nothing */
            if (st == PGRES_COMMAND_OK) CHECK(strcmp(PQcmdTuples(r), "0") == 0 || PQcmdTuples(r)[0] == 0);
            if (st == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 1 && strncmp(attacks[i], "SET", 3) == 0)
                CHECK(strcmp(PQgetvalue(r, 0, 0), "0") == 0);
            PQclear(r);
            PQclear(PQexec(hb, "ROLLBACK"));
        }
        snprintf(session, sizeof session, "%s", impl_of(ha.s) ? impl_of(ha.s)->session : "");
        snprintf(sql, sizeof sql, "SELECT simba.release('ta', '%s', '%s', ARRAY[encode('iso'::bytea, 'hex')])",
                 session, request);
        PQclear(PQexec(hb, sql));
        snprintf(sql, sizeof sql, "SELECT simba.keepalive('ta', '%s', 1)", session);
        PQclear(PQexec(hb, sql));
    }
    h_run_for(cl, 1, 300);
    /* A's hold is intact: same entry, same fence, no LOST */
    CHECK_EQ(admin_num(root, "SELECT fence FROM " QUEUE " queue WHERE tenant = 'ta' AND name = 'iso'::bytea"), fence);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM " QUEUE " queue WHERE tenant = 'ta'"), 1);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.sessions WHERE tenant = 'ta'"), 1);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.sessions WHERE tenant = 'ta' AND expires > now() + interval '5 s'"), 1);
    CHECK_EQ(admin_num(root, "SELECT count(*) FROM simba.tenant_roles WHERE tenant = 'ta'"), 1);
    CHECK(!h_has(&ha, la, SIMBA_EVENT_LOST));
    CHECK(simba_valid_ms(ha.s, la) > 0);
    /* app_b may use its own tenant */
    if (hb) {
        CHECK_EQ(admin_num(hb, "SELECT simba.open('tb', 'b~0123456789abcdef', 5000)"), 1);
        CHECK_EQ(admin_num(hb, "SELECT count(*) FROM simba.sessions WHERE tenant = 'tb'"), 1);
        PQfinish(hb);
    }
    simba_destroy(ha.s);
    PQfinish(root);
}

/* A forged notification (any role may NOTIFY any channel) is a hint: the
   waiter re-checks and stays waiting; garbage is ignored. Only the real
   release grants, with a larger fence. */
static void t_forged_notify(void) {
    const char *tenant = my_tenant();
    PGconn *root = admin_open();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb;
    simba_event *e;
    simba__pg *ib;
    struct simba_pg_stats before, after;
    char request[256], sql[1024];
    int64_t fa;
    int i;
    CHECK(root);
    if (!root) return;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &a; cl[1] = &b;
    a.s = new_client(tenant, "fa", 20000, 5000);
    b.s = new_client(tenant, "fb", 20000, 5000);
    CHECK(a.s && b.s);
    la = h_acquire(a.s, "forged", -1);
    CHECK((e = h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    fa = e ? e->fence : 0;
    lb = h_acquire(b.s, "forged", -1);
    h_run_for(cl, 2, 300);
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    CHECK(entry_request(root, tenant, "fb", "forged", request, sizeof request));
    ib = impl_of(b.s);
    CHECK(ib && ib->channel[0]);
    before = stats_of(b.s);
    for (i = 0; i < 5 && ib; i++) {
        /* the real shape, a "grant" of B's own request with a fence and a
           token: without the token the server told B, it is a hint */
        snprintf(sql, sizeof sql, "SELECT pg_notify('%s', 'g %s %s 4242 %032d')", ib->channel, request,
                 "666f72676564", i);
        CHECK(admin_exec(root, sql) == 0);
    }
    if (ib) {
        static const char *const junk[] = {"", "g", "g  ", "x y z", "g r zz 1 t", "g r 00 1 t", "g r 6 1 t", "o - 1f",
                                           "g r 666f72676564", "g r 666f72676564 1 t extra"};
        size_t k;
        for (k = 0; k < sizeof junk / sizeof junk[0]; k++) {
            snprintf(sql, sizeof sql, "SELECT pg_notify('%s', '%s')", ib->channel, junk[k]);
            CHECK(admin_exec(root, sql) == 0);
        }
    }
    h_run_for(cl, 2, 500);
    after = stats_of(b.s);
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    CHECK(after.notifications >= before.notifications + 5);
    CHECK(after.ignored_notifications >= before.ignored_notifications + 10);
    CHECK_EQ(after.pushed_grants, before.pushed_grants);
    CHECK(!h_has(&a, la, SIMBA_EVENT_LOST));
    CHECK_EQ(simba_release(a.s, la), SIMBA_OK);
    CHECK((e = h_expect(cl, 2, 1, lb, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    CHECK(e && e->fence > fa);
    CHECK(e && e->fence != 4242);
    /* the real grant named B's token: delivered with its fence, no POLL */
    CHECK_EQ(stats_of(b.s).pushed_grants, after.pushed_grants + 1);
    destroy_all(cl, 2);
    PQfinish(root);
}

/* Another client's transaction holds our resource row (SELECT ... FOR
   UPDATE): simba's call ends at lock_timeout and is retried, the waiter
   stays waiting, the holder keeps its hold; when the transaction ends the
   queue moves on. Nothing is granted twice. */
static void t_lock_timeout_rows_held(void) {
    const char *tenant = my_tenant();
    PGconn *root = admin_open();
    simba_pg_desc pd = base_desc();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb;
    simba_event *e;
    char sql[512];
    int64_t fa;
    CHECK(root);
    if (!root) return;
    pd.lock_timeout_ms = 200;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &a; cl[1] = &b;
    a.s = new_client_ex(tenant, "la", 20000, 5000, &pd);
    b.s = new_client_ex(tenant, "lb", 20000, 5000, &pd);
    CHECK(a.s && b.s);
    la = h_acquire(a.s, "rows", -1);
    CHECK((e = h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    fa = e ? e->fence : 0;
    CHECK(admin_exec(root, "BEGIN") == 0);
    snprintf(sql, sizeof sql, "SELECT * FROM simba.resources WHERE tenant = '%s' AND name = 'rows'::bytea FOR UPDATE",
             tenant);
    CHECK(admin_exec(root, sql) == 0);
    lb = h_acquire(b.s, "rows", -1);
    h_run_for(cl, 2, 1500);
    CHECK(stats_of(b.s).retried >= 2);
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ERROR));
    CHECK(!h_has(&a, la, SIMBA_EVENT_LOST));
    CHECK(simba_connected(b.s));
    CHECK(admin_exec(root, "COMMIT") == 0);
    h_run_for(cl, 2, 500);
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    CHECK_EQ(simba_release(a.s, la), SIMBA_OK);
    CHECK((e = h_expect(cl, 2, 1, lb, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    CHECK(e && e->fence > fa);
    destroy_all(cl, 2);
    PQfinish(root);
}

/* A role's connection limit is full: DISCONNECTED in the server's words;
   the client connects once a connection is free. */
static void t_connection_limit_full(void) {
    PGconn *root = admin_open(), *hog = NULL;
    simba_pg_desc pd = base_desc();
    static h_client a;
    h_client *cl[1];
    simba_event *e;
    simba_lock l;
    char url[512];
    CHECK(root);
    if (!root) return;
    CHECK(admin_exec(root,
        "DO $d$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'app_lim') THEN"
        "  CREATE ROLE app_lim LOGIN PASSWORD 'pl' CONNECTION LIMIT 1; END IF; END $d$;"
        "GRANT USAGE ON SCHEMA simba TO app_lim;"
        "GRANT SELECT, INSERT, UPDATE, DELETE ON simba.sessions, simba.resources, simba.entries, simba.tenants"
        "  TO app_lim;"
        "GRANT SELECT ON simba.tenant_roles TO app_lim;") == 0);
    url_as("app_lim", "pl", url, sizeof url);
    hog = admin_open_as(url);
    CHECK(hog);
    pd.conninfo = url;
    pd.create_schema = 0;
    memset(&a, 0, sizeof a);
    cl[0] = &a;
    a.s = new_client_ex(my_tenant(), "lim", 5000, 2000, &pd);
    CHECK(a.s);
    if (!a.s) { PQfinish(hog); PQfinish(root); return; }
    CHECK((e = h_expect(cl, 1, 0, h_no_lock(), SIMBA_EVENT_DISCONNECTED, 8000)) != NULL);
    CHECK(e && e->error == SIMBA_EDISCONNECTED);
    CHECK(e && strstr(e->message, "too many connections") != NULL);
    if (e && !strstr(e->message, "too many connections")) printf("  # %s\n", e->message);
    CHECK(!simba_connected(a.s));
    PQfinish(hog);
    CHECK(wait_connected(cl, 1, 0, 10000));
    l = h_acquire(a.s, "lim", -1);
    CHECK(h_expect(cl, 1, 0, l, SIMBA_EVENT_ACQUIRED, 10000) != NULL);
    simba_destroy(a.s);
    PQfinish(root);
}

/* The server becomes read-only (default_transaction_read_only, as a
   standby would be): the holder is told DISCONNECTED with the reason and
   LOST when its lease runs out; the waiter is granted nothing meanwhile;
   writable again, the waiter gets the lock with a larger fence after A was
   told LOST. */
static void t_read_only_server(void) {
    const char *tenant = my_tenant();
    PGconn *root = admin_open();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb;
    simba_event *e;
    int64_t fa, lost_at = 0, got_at;
    CHECK(root);
    if (!root) return;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &a; cl[1] = &b;
    a.s = new_client(tenant, "ra", 1500, 1000);
    b.s = new_client(tenant, "rb", 1500, 1000);
    CHECK(a.s && b.s);
    la = h_acquire(a.s, "ro", -1);
    CHECK((e = h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    fa = e ? e->fence : 0;
    lb = h_acquire(b.s, "ro", -1);
    h_run_for(cl, 2, 300);
    CHECK(admin_exec(root, "ALTER SYSTEM SET default_transaction_read_only = on") == 0);
    CHECK(admin_exec(root, "SELECT pg_reload_conf()") == 0);
    CHECK((e = h_expect(cl, 2, 0, h_no_lock(), SIMBA_EVENT_DISCONNECTED, 10000)) != NULL);
    CHECK(e && strstr(e->message, "read-only") != NULL);
    CHECK((e = h_expect(cl, 2, 0, la, SIMBA_EVENT_LOST, 10000)) != NULL);
    lost_at = h_real_ms();
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    h_run_for(cl, 2, 1000);
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    CHECK(admin_exec(root, "ALTER SYSTEM RESET default_transaction_read_only") == 0);
    CHECK(admin_exec(root, "SELECT pg_reload_conf()") == 0);
    CHECK((e = h_expect(cl, 2, 1, lb, SIMBA_EVENT_ACQUIRED, 15000)) != NULL);
    got_at = h_real_ms();
    CHECK(e && e->fence > fa);
    CHECK(lost_at > 0 && got_at >= lost_at);
    destroy_all(cl, 2);
    PQfinish(root);
}

/* The server is SIGKILLed and started again while A holds and B waits: the
   commits survive (fsync on); both reconnect; A still holds, B gets the
   lock only after A releases, with a larger fence. */
static void t_server_restart_mid_hold(void) {
    const char *tenant = my_tenant();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb;
    simba_event *e;
    int64_t fa, t0;
    char cmd[1024];
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &a; cl[1] = &b;
    a.s = new_client(tenant, "sa", 20000, 6000);
    b.s = new_client(tenant, "sb", 20000, 6000);
    CHECK(a.s && b.s);
    la = h_acquire(a.s, "restart", -1);
    CHECK((e = h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    fa = e ? e->fence : 0;
    lb = h_acquire(b.s, "restart", -1);
    h_run_for(cl, 2, 300);
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    snprintf(cmd, sizeof cmd, "%s restart", env_ctl);
    t0 = h_real_ms();
    CHECK(system(cmd) == 0);
    printf("  # server restarted in %lld ms\n", (long long)(h_real_ms() - t0));
    CHECK(h_expect(cl, 2, 0, h_no_lock(), SIMBA_EVENT_DISCONNECTED, 10000) != NULL);
    CHECK(wait_connected(cl, 2, 0, 15000));
    CHECK(wait_connected(cl, 2, 1, 15000));
    h_run_for(cl, 2, 1500);
    CHECK(!h_has(&a, la, SIMBA_EVENT_LOST));
    CHECK(simba_valid_ms(a.s, la) > 0);
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    CHECK_EQ(simba_release(a.s, la), SIMBA_OK);
    CHECK((e = h_expect(cl, 2, 1, lb, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    CHECK(e && e->fence > fa);
    destroy_all(cl, 2);
}

/* The server hangs (SIGSTOP, sockets open): the holder's keepalives time
   out, it is told LOST when its lease runs out; once the server runs again
   the waiter gets the lock (after A's session expired there), with a larger
   fence, and only after A was told LOST. */
static void t_stopped_server(void) {
    const char *tenant = my_tenant();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb;
    simba_event *e;
    int64_t fa, lost_at = 0, got_at;
    char cmd[1024];
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &a; cl[1] = &b;
    a.s = new_client(tenant, "pa", 1500, 1000);
    b.s = new_client(tenant, "pb", 1500, 1000);
    CHECK(a.s && b.s);
    la = h_acquire(a.s, "stopped", -1);
    CHECK((e = h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    fa = e ? e->fence : 0;
    lb = h_acquire(b.s, "stopped", -1);
    h_run_for(cl, 2, 300);
    snprintf(cmd, sizeof cmd, "%s stop", env_ctl);
    CHECK(system(cmd) == 0);
    CHECK((e = h_expect(cl, 2, 0, la, SIMBA_EVENT_LOST, 10000)) != NULL);
    lost_at = h_real_ms();
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    snprintf(cmd, sizeof cmd, "%s cont", env_ctl);
    CHECK(system(cmd) == 0);
    CHECK((e = h_expect(cl, 2, 1, lb, SIMBA_EVENT_ACQUIRED, 20000)) != NULL);
    got_at = h_real_ms();
    CHECK(e && e->fence > fa);
    CHECK(lost_at > 0 && got_at >= lost_at);
    destroy_all(cl, 2);
}

/* The hang guard of t_connect_to_stopped_server: a tick that never
   returns ends the run with a failure instead of hanging it. */
static void on_hang(int sig) {
    static const char msg[] = "not ok - t_connect_to_stopped_server: simba_tick did not return (it waits on the server)\n";
    (void)sig;
    if (write(STDOUT_FILENO, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

/* t_connect_to_stopped_server while the server is stopped: the acquire
   ends in TIMEOUT, the connect in DISCONNECTED with SIMBA_ETIMEDOUT. */
static void frozen_connect(h_client **cl) {
    simba_lock l = h_acquire(cl[0]->s, "frozen", 300);
    simba_event *e;
    CHECK((e = h_expect(cl, 1, 0, l, SIMBA_EVENT_TIMEOUT, 10000 * slow)) != NULL);
    CHECK((e = h_expect(cl, 1, 0, h_no_lock(), SIMBA_EVENT_DISCONNECTED, 10000 * slow)) != NULL);
    CHECK(e && e->error == SIMBA_ETIMEDOUT);
    CHECK(!simba_connected(cl[0]->s));
}

/* A client that connects to a hung server (SIGSTOP: the kernel accepts
   the TCP connection, the server never answers the startup): its ticks
   return all along (an alarm ends the run if one does not), the acquire
   waiting on the connect ends in TIMEOUT, the connect ends in DISCONNECTED
   with SIMBA_ETIMEDOUT; once the server runs again the client connects
   and gets the lock. */
static void t_connect_to_stopped_server(void) {
    static h_client a;
    h_client *cl[1];
    simba_lock l;
    char cmd[1024];
    memset(&a, 0, sizeof a);
    cl[0] = &a;
    snprintf(cmd, sizeof cmd, "%s stop", env_ctl);
    CHECK(system(cmd) == 0);
    signal(SIGALRM, on_hang);
    alarm((unsigned)(60 * slow));
    a.s = new_client(my_tenant(), "frozen", 3000, 1000);
    if (a.s) frozen_connect(cl);
    /* the server runs again whatever the checks above found: the tests
       after this one use it */
    snprintf(cmd, sizeof cmd, "%s cont", env_ctl);
    CHECK(system(cmd) == 0);
    CHECK(a.s);
    if (a.s) {
        CHECK(wait_connected(cl, 1, 0, 20000 * slow));
        l = h_acquire(a.s, "frozen", -1);
        CHECK(h_expect(cl, 1, 0, l, SIMBA_EVENT_ACQUIRED, 10000 * slow) != NULL);
    }
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    destroy_all(cl, 1);
}

/* A server that may lose its last commits (synchronous_commit off) and
   restarts: nothing is granted in the tenant for one lease (the longest of
   its sessions'), so that a holder from before cannot overlap with a new
   one; a --try meanwhile ends with SIMBA_EGRACE. A durable server's restart
   holds nothing back. */
static void t_restart_grace(void) {
    const char *tenant = my_tenant();
    PGconn *root = admin_open();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb;
    simba_event *e;
    char cmd[1024];
    int64_t t0;
    CHECK(root);
    if (!root) return;
    CHECK(admin_exec(root, "ALTER SYSTEM SET synchronous_commit = off") == 0);
    PQfinish(root);
    snprintf(cmd, sizeof cmd, "%s restart", env_ctl);
    CHECK(system(cmd) == 0);
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &a; cl[1] = &b;
    a.s = new_client(tenant, "ga", 3000, 1000);
    CHECK(a.s);
    la = h_acquire(a.s, "grace-a", -1);
    CHECK(h_expect(cl, 1, 0, la, SIMBA_EVENT_ACQUIRED, 15000) != NULL);
    CHECK(system(cmd) == 0);                   /* the lossy server restarts */
    CHECK(wait_connected(cl, 1, 0, 15000));
    b.s = new_client(tenant, "gb", 3000, 1000);
    CHECK(b.s);
    CHECK(wait_connected(cl, 2, 1, 15000));   /* a connect grants nothing: the grace starts at B's request */
    t0 = h_real_ms();
    lb = h_acquire(b.s, "grace-b", 500);       /* a free name: only the grace holds it back */
    CHECK((e = h_expect(cl, 2, 1, lb, SIMBA_EVENT_TIMEOUT, 10000)) != NULL);
    CHECK(e && e->error == SIMBA_EGRACE);
    lb = h_acquire(b.s, "grace-b", -1);
    CHECK((e = h_expect(cl, 2, 1, lb, SIMBA_EVENT_ACQUIRED, 15000)) != NULL);
    printf("  # granted %lld ms after the first try (lease 4000 ms)\n", (long long)(h_real_ms() - t0));
    CHECK(h_real_ms() - t0 >= 2000);
    destroy_all(cl, 2);
    /* durable again: a restart holds nothing back */
    root = admin_open();
    CHECK(root && admin_exec(root, "ALTER SYSTEM RESET synchronous_commit") == 0);
    if (root) PQfinish(root);
    CHECK(system(cmd) == 0);
    memset(&b, 0, sizeof b);
    cl[0] = &b;
    b.s = new_client(tenant, "gc", 3000, 1000);
    CHECK(b.s);
    lb = h_acquire(b.s, "grace-c", 2000);
    CHECK(h_expect(cl, 1, 0, lb, SIMBA_EVENT_ACQUIRED, 15000) != NULL);
    destroy_all(cl, 1);
}

/* Runs `$SIMBA_PG_CTL what`; 0 = it worked. */
static int ctl(const char *what) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s", env_ctl, what);
    return system(cmd);
}

/* A real fail-over to a promoted asynchronous standby that lacks the last
   commits: the standby streams from the server, then is cut off (the lag),
   A takes "promo" on the server (so the standby never hears of it) and B
   queues; the server dies, the standby is promoted; both clients, on the
   multi-host URL (server, standby; target_session_attrs=read-write), find
   it by themselves, but A is silent after the crash (cut off, or slow).
   With restart_grace = 1 (for such setups) B is granted only after a lease
   of grace, when A no longer believes it holds; without it B is granted at
   once beside A (the standby never saw A's entry). A is then told LOST.
   Leaves the server running again, alone. */
static void t_standby_promotion(void) {
    const char *tenant = my_tenant(), *sport = getenv("SIMBA_PG_STANDBY_PORT");
    simba_pg_desc pd = base_desc();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb;
    simba_event *e;
    char url[512], *slash = strrchr(env_url, '/');
    int64_t fa, t0;
    CHECK(sport && slash);
    snprintf(url, sizeof url, "%.*s,127.0.0.1:%s%s?target_session_attrs=read-write", (int)(slash - env_url),
             env_url, sport, slash);
    CHECK(ctl("standby-start") == 0);
    pd.conninfo = url;
    pd.restart_grace = 1;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &a; cl[1] = &b;
    a.s = new_client_ex(tenant, "fa", 3000, 1000, &pd);
    b.s = new_client_ex(tenant, "fb", 3000, 1000, &pd);
    CHECK(a.s && b.s);
    CHECK(wait_connected(cl, 2, 0, 10000) && wait_connected(cl, 2, 1, 10000));
    CHECK(ctl("standby-detach") == 0);
    la = h_acquire(a.s, "promo", -1);
    CHECK((e = h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 10000)) != NULL);
    fa = e ? e->fence : 0;
    lb = h_acquire(b.s, "promo", -1);
    h_run_for(cl, 2, 200);
    CHECK(!h_has(&b, lb, SIMBA_EVENT_ACQUIRED));
    t0 = h_real_ms();
    CHECK(ctl("kill") == 0);
    CHECK(ctl("standby-promote") == 0);
    /* A is silent from now on (cut off from the standby, or slow): only
       its lease, counted on its own clock, may keep it believing */
    CHECK_EQ(h_grant_beside_silent(&b, lb, a.s, la, 15000, t0, "the server died"), 0);
    CHECK((e = h_take(&b, lb, SIMBA_EVENT_ACQUIRED)) != NULL);
    CHECK(e && e->fence > fa);
    CHECK(h_expect(cl, 2, 0, la, SIMBA_EVENT_LOST, 1000) != NULL);
    destroy_all(cl, 2);
    CHECK(ctl("standby-kill") == 0);
    CHECK(ctl("start") == 0);
}

/* Whether the server answers a new connection within ms (after a crash). */
static int server_answers_within(int ms) {
    int64_t end = h_real_ms() + ms;
    while (h_real_ms() < end) {
        PGconn *c = PQconnectdb(env_url);
        int ok = PQstatus(c) == CONNECTION_OK;
        PQfinish(c);
        if (ok) return 1;
        { struct timespec ts = {0, 50000000}; nanosleep(&ts, NULL); }
    }
    return 0;
}

/* Pumps both clients until B is granted lb (or ms pass); returns how long A
   still believed it held la at that moment (> 0: two holders), 0 when A no
   longer believed, -1 when B was not granted. A is pumped too (not silent). */
static int64_t grant_beside_pumped(h_client **cl, simba_lock la, simba_lock lb, int ms, int64_t since) {
    int64_t end = h_real_ms() + ms;
    while (h_real_ms() < end) {
        h_pump(cl, 2, 20);
        if (h_has(cl[1], lb, SIMBA_EVENT_ACQUIRED)) {
            int64_t left = simba_valid_ms(cl[0]->s, la);
            printf("  # B granted %lld ms after t0; A %s (valid %lld ms more, LOST seen: %d)\n",
                   (long long)(h_real_ms() - since), left > 0 ? "STILL BELIEVES" : "no longer believes",
                   (long long)(left > 0 ? left : 0), h_has(cl[0], la, SIMBA_EVENT_LOST));
            return left > 0 ? left : 0;
        }
    }
    return -1;
}

/* Deletes, durably, what a server that loses its last commits may lose of
   a holder: the resource it holds and, unless who is NULL, its session
   (id prefix "who~"). Whether a real loss takes them depends on when the
   WAL writer runs, so the tests that need the loss make it. */
static int lose_holder(PGconn *root, const char *tenant, const char *who, const char *name) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "SET synchronous_commit = on;"
             "DELETE FROM simba.sessions WHERE tenant = '%s' AND session LIKE '%s~%%';"
             "DELETE FROM simba.entries WHERE tenant = '%s' AND name = '%s'::bytea;"
             "DELETE FROM simba.resources WHERE tenant = '%s' AND name = '%s'::bytea;",
             tenant, who ? who : "", tenant, name, tenant, name);
    return admin_exec(root, sql);
}

/* A server that may lose commits (synchronous_commit = off) has one
   backend killed (SIGKILL, as a segfault or the OOM killer would): the
   postmaster stays up, re-initialises and runs crash recovery, which may
   drop A's hold but not its session, opened while commits were durable
   (lose_holder makes it so), with the same
   pg_postmaster_start_time(). The run's row (UNLOGGED, emptied by the
   recovery) tells the new run; A, not silent, reconnects and renews: it
   must be told LOST before B is granted the lock it held, and B granted
   after the grace. */
static void t_restart_grace_after_crash_recovery(void) {
    const char *tenant = my_tenant();
    PGconn *root = admin_open();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb, lw;
    int64_t t0, left;
    int victim;
    CHECK(root);
    if (!root) return;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &a; cl[1] = &b;
    a.s = new_client(tenant, "ca", 10000, 1000);
    b.s = new_client(tenant, "cb", 10000, 1000);
    CHECK(a.s && b.s);
    CHECK(wait_connected(cl, 2, 0, 10000) && wait_connected(cl, 2, 1, 10000));
    /* this server run is noticed in the tenant while commits are durable */
    lw = h_acquire(a.s, "warmup", -1);
    CHECK(h_expect(cl, 2, 0, lw, SIMBA_EVENT_ACQUIRED, 10000) != NULL);
    CHECK_EQ(simba_release(a.s, lw), SIMBA_OK);
    h_run_for(cl, 2, 300);
    /* the server may now lose its last commits (the documented lossy mode) */
    CHECK(admin_exec(root, "ALTER SYSTEM SET synchronous_commit = off") == 0);
    CHECK(admin_exec(root, "SELECT pg_reload_conf()") == 0);
    h_run_for(cl, 2, 1500);   /* every backend has read the new settings; sessions renewed */
    la = h_acquire(a.s, "crash", -1);
    CHECK(h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 10000) != NULL);
    CHECK(lose_holder(root, tenant, NULL, "crash") == 0);   /* A's session, opened durably, stays */
    /* one backend dies: the postmaster re-initialises (crash recovery) */
    victim = PQbackendPID(root);
    t0 = h_real_ms();
    CHECK(kill(victim, SIGKILL) == 0);
    PQfinish(root);
    { struct timespec ts = {0, 300000000}; nanosleep(&ts, NULL); }
    CHECK(server_answers_within(20000));
    printf("  # server back %lld ms after the crash\n", (long long)(h_real_ms() - t0));
    lb = h_acquire(b.s, "crash", -1);
    left = grant_beside_pumped(cl, la, lb, 25000, t0);
    CHECK_EQ(left, 0);           /* granted, once A was told LOST */
    destroy_all(cl, 2);
    root = admin_open();
    CHECK(root && admin_exec(root, "ALTER SYSTEM RESET synchronous_commit") == 0);
    CHECK(root && admin_exec(root, "SELECT pg_reload_conf()") == 0);
    if (root) PQfinish(root);
}

/* Policies of a schema other than simba. */
static long long policies_in(PGconn *root, const char *schema) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_catalog.pg_policies WHERE schemaname = '%s'"
                              " AND policyname = 'tenant_rows'", schema);
    return admin_num(root, sql);
}

/* A schema of another name (simba_pg_desc.schema) installs, upgrades and
   re-installs beside the default one: the installer looks for the
   policies of the schema it installs. The default schema is there (A);
   B installs "locks_b" with create_schema = 1 and holds "x"; its version
   is then set back to 11 and C's create_schema = 1 upgrades it under B's
   hold; the installer runs once more by hand. Every table of locks_b keeps
   its policy, and B its hold. */
static void t_schema_beside_another(void) {
    PGconn *root = admin_open();
    static h_client a, b, c;
    h_client *cl[3];
    simba_pg_desc pd = base_desc();
    simba_event *e;
    simba_lock l = h_no_lock();
    char *again = schema_text("locks_b");
    CHECK(root && again);
    if (!root || !again) { if (root) PQfinish(root); free(again); return; }
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b); memset(&c, 0, sizeof c);
    cl[0] = &a; cl[1] = &b; cl[2] = &c;
    a.s = new_client(my_tenant(), "os1", 3000, 1000);   /* installs "simba" if missing */
    CHECK(a.s && wait_connected(cl, 1, 0, 10000));
    pd.schema = "locks_b";
    b.s = new_client_ex(my_tenant(), "os2", 3000, 1000, &pd);
    CHECK(b.s);
    if (b.s && !wait_connected(cl, 2, 1, 10000)) {
        e = h_expect(cl + 1, 1, 0, h_no_lock(), SIMBA_EVENT_DISCONNECTED, 100);
        printf("  # schema locks_b: not connected: %s\n", e ? e->message : "(no event)");
        CHECK(0);
    } else if (b.s) {
        l = h_acquire(b.s, "x", -1);
        CHECK(h_expect(cl, 2, 1, l, SIMBA_EVENT_ACQUIRED, 10000) != NULL);
    }
    CHECK_EQ(policies_in(root, "locks_b"), 4);
    CHECK(admin_exec(root, "CREATE OR REPLACE FUNCTION locks_b.version() RETURNS integer LANGUAGE sql IMMUTABLE"
                           " AS $f$ SELECT 11 $f$") == 0);
    c.s = new_client_ex(my_tenant(), "os3", 3000, 1000, &pd);
    CHECK(c.s && wait_connected(cl, 3, 2, 10000));   /* the upgrade is part of the connect */
    CHECK_EQ(admin_num(root, "SELECT locks_b.version()"), SIMBA__PG_SCHEMA_VERSION);
    CHECK(admin_exec(root, again) == 0);
    h_run_for(cl, 3, 300);
    CHECK_EQ(policies_in(root, "locks_b"), 4);
    CHECK(!h_has(&b, l, SIMBA_EVENT_LOST) && b.s && simba_valid_ms(b.s, l) > 0);
    destroy_all(cl, 3);
    admin_exec(root, "DROP SCHEMA locks_b CASCADE");
    PQfinish(root);
    free(again);
}

/* The restart grace covers the sessions a server lost with their rows,
   not only those it still has. B (ttl 1 s) is opened while commits are
   durable; then the server may lose commits (synchronous_commit = off): A
   opens with a longer lease (ttl 10 s) and takes "g"; A's session and hold
   are lost (lose_holder) and the server is killed and started again. A is
   silent (cut off, as in t_standby_promotion): B must be granted "g" only
   once A's lease is over. SIMBA_TEST_A_TTL=1000 gives A B's lease (the control). */
static void t_restart_grace_covers_lost_sessions(void) {
    const char *tenant = my_tenant();
    PGconn *root = admin_open();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb, lw;
    int64_t t0;
    CHECK(root);
    if (!root) return;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &b;
    b.s = new_client(tenant, "gb", 1000, 1000);
    CHECK(b.s && wait_connected(cl, 1, 0, 10000));
    lw = h_acquire(b.s, "warmup", -1);   /* this run noticed in the tenant, durably */
    CHECK(h_expect(cl, 1, 0, lw, SIMBA_EVENT_ACQUIRED, 10000) != NULL);
    CHECK_EQ(simba_release(b.s, lw), SIMBA_OK);
    h_run_for(cl, 1, 300);
    CHECK(admin_exec(root, "ALTER SYSTEM SET synchronous_commit = off") == 0);
    CHECK(admin_exec(root, "SELECT pg_reload_conf()") == 0);
    h_run_for(cl, 1, 1000);
    cl[0] = &a; cl[1] = &b;
    a.s = new_client(tenant, "ga", atoi(env_or("SIMBA_TEST_A_TTL", "10000")), 1000);
    CHECK(a.s && wait_connected(cl, 2, 0, 10000));
    la = h_acquire(a.s, "g", -1);
    CHECK(h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 10000) != NULL);
    CHECK(lose_holder(root, tenant, "ga", "g") == 0);
    PQfinish(root);
    t0 = h_real_ms();
    CHECK(ctl("restart") == 0);         /* kill -9 of the postmaster, start again */
    lb = h_acquire(b.s, "g", -1);
    CHECK_EQ(h_grant_beside_silent(&b, lb, a.s, la, 25000, t0, "the restart"), 0);
    destroy_all(cl, 2);
    root = admin_open();
    CHECK(root && admin_exec(root, "ALTER SYSTEM RESET synchronous_commit") == 0);
    CHECK(root && admin_exec(root, "SELECT pg_reload_conf()") == 0);
    if (root) PQfinish(root);
}

/* simba's functions run with the caller's rights, and some of their
   operators have no exact match in pg_catalog (OPEN's and KEEPALIVE's
   expiry is v_now + integer * interval; pg_catalog has float8 * interval):
   an operator of exactly those types in a schema on the caller's
   search_path would be chosen instead, unless the functions set their own
   path. Here public is writable by every role (the default before
   PostgreSQL 15; granted here). A role of another tenant (app_b of jtb,
   the client grants only) defines public.*(integer, interval) answering
   1 ms for leases over 10 s. A (tenant jta, ttl 20 s) holds "sp", and its
   server session must stay live while its client believes it renewed: B
   (jta) asks for "sp" and must not be granted beside A. SIMBA_TEST_NO_OPERATOR=1 makes
   no operator (the control). */
static void t_operator_on_search_path(void) {
    PGconn *root = admin_open(), *hb = NULL;
    simba_pg_desc pd = base_desc();
    static h_client a, b;
    h_client *cl[2];
    simba_lock la, lb;
    int64_t left;
    char url[512];
    CHECK(root);
    if (!root) return;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    cl[0] = &a;
    a.s = new_client(my_tenant(), "spi", 3000, 1000);   /* installs the schema if missing */
    CHECK(a.s && wait_connected(cl, 1, 0, 10000));
    destroy_all(cl, 1);
    CHECK(admin_exec(root,
        "DO $d$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'app_a') THEN"
        "  CREATE ROLE app_a LOGIN PASSWORD 'pa'; CREATE ROLE app_b LOGIN PASSWORD 'pb'; END IF; END $d$;"
        "GRANT USAGE ON SCHEMA simba TO app_a, app_b;"
        "GRANT SELECT, INSERT, UPDATE, DELETE ON simba.sessions, simba.resources, simba.entries, simba.tenants"
        "  TO app_a, app_b;"
        "GRANT SELECT ON simba.tenant_roles TO app_a, app_b;"
        "DELETE FROM simba.tenant_roles WHERE tenant IN ('jta', 'jtb');"
        "INSERT INTO simba.tenant_roles VALUES ('jta', 'app_a'), ('jtb', 'app_b');"
        "GRANT CREATE ON SCHEMA public TO PUBLIC;") == 0);   /* the default before PostgreSQL 15 */
    url_as("app_b", "pb", url, sizeof url);
    hb = admin_open_as(url);
    CHECK(hb);
    if (!hb) { PQfinish(root); return; }
    if (!getenv("SIMBA_TEST_NO_OPERATOR")) CHECK(admin_exec(hb,
        "CREATE FUNCTION public.short_lease(integer, interval) RETURNS interval LANGUAGE sql AS"
        " $f$ SELECT CASE WHEN $1 > 10000 THEN interval '1 millisecond'"
        "     ELSE $2 OPERATOR(pg_catalog.*) $1::float8 END $f$;"
        "CREATE OPERATOR public.* (LEFTARG = integer, RIGHTARG = interval, FUNCTION = public.short_lease);") == 0);
    PQfinish(hb);
    url_as("app_a", "pa", url, sizeof url);
    pd.conninfo = url;
    pd.create_schema = 0;
    cl[0] = &a; cl[1] = &b;
    a.s = new_client_ex("jta", "spa", 20000, 1000, &pd);
    b.s = new_client_ex("jta", "spb", 3000, 1000, &pd);
    CHECK(a.s && b.s);
    CHECK(wait_connected(cl, 2, 0, 10000) && wait_connected(cl, 2, 1, 10000));
    la = h_acquire(a.s, "sp", -1);
    CHECK(h_expect(cl, 2, 0, la, SIMBA_EVENT_ACQUIRED, 10000) != NULL);
    h_run_for(cl, 2, 500);
    printf("  # A's session on the server expires in %lld ms (A's client: valid %lld ms)\n",
           admin_num(root, "SELECT (extract(epoch FROM max(expires) - clock_timestamp()) * 1000)::bigint"
                           " FROM simba.sessions WHERE tenant = 'jta' AND session LIKE 'spa~%'"),
           (long long)simba_valid_ms(a.s, la));
    lb = h_acquire(b.s, "sp", -1);
    left = grant_beside_pumped(cl, la, lb, 3000, h_real_ms());
    CHECK(left <= 0);
    destroy_all(cl, 2);
    admin_exec(root, "DROP OPERATOR IF EXISTS public.* (integer, interval); DROP FUNCTION IF EXISTS public.short_lease(integer, interval);"
                     "REVOKE CREATE ON SCHEMA public FROM PUBLIC;");
    PQfinish(root);
}

int main(int argc, char **argv) {
    conf_backend cb;
    PGconn *c;
    env_url = env_or("SIMBA_PG_URL", "postgres://simba:simba@127.0.0.1:5432/simba_test");
    env_ctl = env_or("SIMBA_PG_CTL", NULL);
    if (argc > 1) h_filter = argv[1];
    slow = atoi(env_or("SIMBA_TEST_SLOW", "1"));
    if (slow < 1) slow = 1;
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
    cb.ttl_ms = 1500 * slow;
    cb.transition_ms = 1000 * slow;
    cb.kill = kill_client;
    conformance_run(&cb, h_filter, &h_passed, &h_failed);

    RUN(t_schema_file_matches);
    RUN(t_bad_options);
    RUN(t_server_absent);
    RUN(t_wrong_password);
    RUN(t_schema_missing_is_an_error);
    RUN(t_schema_upgrade);
    RUN(t_uncontended_fast_path);
    RUN(t_sql_race);
    RUN(t_sql_race_mutex);
    RUN(t_hold_in_row_meets_a_queue);
    RUN(t_hold_in_row_of_an_ended_session);
    RUN(t_hold_in_row_meets_close);
    RUN(t_inspect_meets_a_renewal);
    RUN(t_tenant_isolation);
    RUN(t_forged_notify);
    RUN(t_lock_timeout_rows_held);
    RUN(t_connection_limit_full);
    RUN(t_read_only_server);
    RUN(t_schema_beside_another);
    RUN(t_operator_on_search_path);
    if (env_ctl) {
        RUN(t_server_restart_mid_hold);
        RUN(t_stopped_server);
        RUN(t_connect_to_stopped_server);
        RUN(t_restart_grace);
        RUN(t_standby_promotion);
        RUN(t_restart_grace_after_crash_recovery);
        RUN(t_restart_grace_covers_lost_sessions);
    } else {
        printf("# skip - t_server_restart_mid_hold, t_stopped_server, t_connect_to_stopped_server (no SIMBA_PG_CTL)\n");
    }
    (void)stats_of;
    (void)env_ctl;
    (void)admin_exec;
    (void)wait_connected;
    (void)destroy_all;
    (void)new_client;
    return harness_summary();
}
