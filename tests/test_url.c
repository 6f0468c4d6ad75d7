/* test_url.c -- the connection URL syntax: every form the docs show, and
   malformed ones with the part their message names. No server needed: it
   builds backends without attaching them (simba_create is not called). */
#define SIMBA_IMPLEMENTATION
#define SIMBA_REDIS_IMPLEMENTATION
#define SIMBA_MYSQL_IMPLEMENTATION
#define SIMBA_ZK_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include "simba_redis.h"
#include "simba_mysql.h"
#include "simba_zk.h"
#define SIMBA_URL_IMPLEMENTATION
#include "simba_url.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; printf("  FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

/* A URL that must be accepted by the dispatcher; the backend is freed by
   creating and destroying a client (nothing connects before a tick). */
static void ok(const char *url) {
    simba_url u;
    simba_desc d;
    simba_url_error e;
    int rc;
    memset(&d, 0, sizeof d);
    rc = simba_url_desc(url, &u, &d, &e);
    CHECK(rc == SIMBA_OK, "%s: %d %s", url, rc, e.msg);
    if (rc == SIMBA_OK) {
        simba_error err;
        simba *s = simba_create(&d, &err);
        CHECK(s != NULL, "%s: simba_create: %s", url, simba_strerror(err.code));
        simba_destroy(s);
    }
}

/* A URL that must be refused with code, naming part, message containing text. */
static void bad(const char *url, int code, const char *part, const char *text) {
    simba_url u;
    simba_desc d;
    simba_url_error e;
    int rc;
    memset(&d, 0, sizeof d);
    rc = simba_url_desc(url, &u, &d, &e);
    CHECK(rc == code, "%s: rc %d, want %d (%s)", url, rc, code, e.msg);
    CHECK(strcmp(e.part, part) == 0, "%s: part '%s', want '%s' (%s)", url, e.part, part, e.msg);
    CHECK(strstr(e.msg, text) != NULL, "%s: message '%s' lacks '%s'", url, e.msg, text);
    CHECK(strstr(e.msg, "s3cret") == NULL, "%s: the message shows the password: %s", url, e.msg);
    CHECK(d.backend.vt == NULL, "%s: a backend was made although the URL is bad", url);
}

int main(void) {
    simba_url u;
    simba_url_error e;
    simba_desc d;
    int ms = -1;
    char path[] = "/tmp/simba-url-pw-XXXXXX";
    FILE *f;
    int fd;

    /* every form of the docs */
    ok("redis://127.0.0.1");
    ok("redis://127.0.0.1:6390/2?prefix=app.x&wait_replicas=1&wait_timeout=300ms&connect_timeout=2s");
    ok("redis://user:s3cret@127.0.0.1:6390/0");
    ok("redis://:s3cret@[::1]:6390");
    ok("REDIS://127.0.0.1");
    ok("redis+unix:///tmp/redis.sock?db=3");
    ok("redis+sentinel://127.0.0.1:26379,127.0.0.2:26380/mymaster?db=2&prefix=app");
    ok("redis+sentinel://user:s3cret@127.0.0.1,[::1]:26380/mymaster?sentinel_user=s&sentinel_password=x");
    ok("mysql://root@127.0.0.1/simba_test");
    ok("mysql://root:s3cret@127.0.0.1:3307/simba_test?table_prefix=t_&create_schema=1&connect_timeout=5s");
    ok("mysql://root@/simba_test?socket=/tmp/my.sock");
    ok("zk://127.0.0.1:2181");
    ok("zk://127.0.0.1:2181,127.0.0.2:2182,127.0.0.3/chroot?base_path=/locks&session_timeout=20s");
    ok("zk://app:s3cret@127.0.0.1");
    ok("zk://localhost:2181?allow_hostnames=1");   /* a name for the client library (no DNS query: /etc/hosts) */
    ok("mem:");
    ok("mem:?tenant=team-a&client_id=host:1&ttl=2s&transition=1500ms&op_timeout=500ms&recheck=1s");

    /* decoded parts */
    CHECK(simba_url_parse("redis://us%65r:p%40ss%3Aw@127.0.0.1:7000/4?prefix=a%2Eb&x", &u, &e) == SIMBA_OK, "%s", e.msg);
    CHECK(strcmp(u.scheme, "redis") == 0 && strcmp(u.user, "user") == 0 && strcmp(u.password, "p@ss:w") == 0,
          "user/password decoded: %s %s", u.user, u.password);
    CHECK(u.nhosts == 1 && strcmp(u.hosts[0].host, "127.0.0.1") == 0 && u.hosts[0].port == 7000, "host");
    CHECK(strcmp(u.path, "/4") == 0, "path %s", u.path);
    CHECK(u.nparams == 2 && strcmp(simba_url_param(&u, "prefix"), "a.b") == 0 && strcmp(simba_url_param(&u, "x"), "") == 0, "params");
    CHECK(simba_url_parse("zk://10.0.0.1/ch%20root", &u, &e) == SIMBA_OK && strcmp(u.path, "/ch root") == 0, "an encoded space");
    CHECK(simba_url_parse("zk://10.0.0.1/ch root", &u, &e) == SIMBA_EINVAL && strcmp(e.part, "path") == 0, "a raw space");
    CHECK(simba_url_parse("zk://[::1]:2181,10.0.0.1/chroot", &u, &e) == SIMBA_OK, "%s", e.msg);
    CHECK(u.nhosts == 2 && strcmp(u.hosts[0].host, "::1") == 0 && u.hosts[0].port == 2181 && u.hosts[1].port == 0, "v6 list");
    CHECK(simba_url_parse("mem:", &u, &e) == SIMBA_OK && !u.has_authority && u.path[0] == 0, "mem:");
    simba_url_clear(&u);
    CHECK(u.password == NULL && u.buf[0] == 0, "clear");

    /* client options reach the desc */
    memset(&d, 0, sizeof d);
    CHECK(simba_url_parse("mem:?tenant=t1&client_id=c-1&ttl=2s&transition=1500ms", &u, &e) == SIMBA_OK, "%s", e.msg);
    CHECK(simba_url_client_options(&u, &d, &e) == SIMBA_OK, "%s", e.msg);
    CHECK(d.ttl_ms == 2000 && d.transition_ms == 1500 && strcmp(d.tenant, "t1") == 0 && strcmp(d.client_id, "c-1") == 0, "options");

    /* durations */
    CHECK(simba_parse_duration_ms("500ms", &ms) == 0 && ms == 500, "500ms");
    CHECK(simba_parse_duration_ms("10s", &ms) == 0 && ms == 10000, "10s");
    CHECK(simba_parse_duration_ms("2m", &ms) == 0 && ms == 120000, "2m");
    CHECK(simba_parse_duration_ms("1h", &ms) == 0 && ms == 3600000, "1h");
    CHECK(simba_parse_duration_ms("0", &ms) == 0 && ms == 0, "0");
    CHECK(simba_parse_duration_ms("10", &ms) == SIMBA_EINVAL, "no unit");
    CHECK(simba_parse_duration_ms("-1s", &ms) == SIMBA_EINVAL, "negative");
    CHECK(simba_parse_duration_ms("1.5s", &ms) == 0 && ms == 1500, "1.5s");
    CHECK(simba_parse_duration_ms("0.5s", &ms) == 0 && ms == 500, "0.5s");
    CHECK(simba_parse_duration_ms("2.25m", &ms) == 0 && ms == 135000, "2.25m");
    CHECK(simba_parse_duration_ms("0.0001s", &ms) == 0 && ms == 1, "a fraction rounds up to a whole ms");
    CHECK(simba_parse_duration_ms("1.0000000001ms", &ms) == 0 && ms == 2, "past 9 digits still rounds up");
    CHECK(simba_parse_duration_ms("1.5", &ms) == SIMBA_EINVAL, "fraction without a unit");
    CHECK(simba_parse_duration_ms("1.s", &ms) == SIMBA_EINVAL, "no digit after the point");
    CHECK(simba_parse_duration_ms(".5s", &ms) == SIMBA_EINVAL, "no digit before the point");
    CHECK(simba_parse_duration_ms("1.5.5s", &ms) == SIMBA_EINVAL, "two points");
    CHECK(simba_parse_duration_ms("1,5s", &ms) == SIMBA_EINVAL, "comma");
    CHECK(simba_parse_duration_ms("596.524h", &ms) == SIMBA_EINVAL, "fraction overflow");
    CHECK(simba_parse_duration_ms("999h", &ms) == SIMBA_EINVAL, "overflow");
    CHECK(simba_parse_duration_ms("99999999999999999999ms", &ms) == SIMBA_EINVAL, "overflow digits");
    CHECK(simba_parse_duration_ms("5 s", &ms) == SIMBA_EINVAL, "space");

    /* passwords from the environment and from a file */
    setenv("SIMBA_TEST_URL_PW", "s3cret-env", 1);
    CHECK(simba_url_parse("redis://127.0.0.1?password_env=SIMBA_TEST_URL_PW", &u, &e) == SIMBA_OK, "%s", e.msg);
    CHECK(u.password && strcmp(u.password, "s3cret-env") == 0, "password_env");
    fd = mkstemp(path);
    f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f != NULL, "mkstemp");
    if (f) {
        char url[128];
        fputs("s3cret-file\n", f);
        fclose(f);
        snprintf(url, sizeof url, "mysql://root@127.0.0.1/db?password_file=%s", path);
        CHECK(simba_url_parse(url, &u, &e) == SIMBA_OK, "%s", e.msg);
        CHECK(u.password && strcmp(u.password, "s3cret-file") == 0, "password_file: %s", u.password ? u.password : "(null)");
        unlink(path);
        bad(url, SIMBA_EAUTH, "password_file", "cannot open");
    }
    /* not a password: a file of NUL bytes, an empty first line */
    bad("mysql://root@127.0.0.1/db?password_file=/dev/zero", SIMBA_EAUTH, "password_file", "NUL byte");
    bad("mysql://root@127.0.0.1/db?password_file=/dev/null", SIMBA_EAUTH, "password_file", "empty");

    /* malformed: each names its part */
    bad("", SIMBA_EINVAL, "url", "empty");
    bad("127.0.0.1:6379", SIMBA_EINVAL, "scheme", "scheme");
    bad("://x", SIMBA_EINVAL, "scheme", "scheme");
    bad("foo://x", SIMBA_EUNSUPPORTED, "scheme", "redis://, redis+unix://, redis+sentinel://, redis+cluster://, mysql://, zk://, mem:");
    bad("rediss://x", SIMBA_EUNSUPPORTED, "scheme", "is unknown");
    bad("redis://127.0.0.1:0", SIMBA_EINVAL, "port", "not a port");
    bad("redis://127.0.0.1:65536", SIMBA_EINVAL, "port", "not a port");
    bad("redis://127.0.0.1:6x", SIMBA_EINVAL, "port", "not a port");
    bad("redis://127.0.0.1:", SIMBA_EINVAL, "port", "empty");
    bad("redis://", SIMBA_EINVAL, "host", "missing");
    bad("redis://a,b", SIMBA_EINVAL, "host", "one host");
    bad("redis://127.0.0.1/x", SIMBA_EINVAL, "path", "database number");
    bad("redis://u@127.0.0.1", SIMBA_EINVAL, "userinfo", "needs a password");
    bad("redis://u:s3cret@@127.0.0.1", SIMBA_EINVAL, "userinfo", "second '@'");
    bad("redis://h%ZZ", SIMBA_EINVAL, "host", "two hex digits");
    bad("redis://h%4", SIMBA_EINVAL, "host", "two hex digits");
    bad("redis://u:s3cret%00@h", SIMBA_EINVAL, "password", "NUL");
    bad("redis://ho st", SIMBA_EINVAL, "host", "byte 0x20 is not allowed");
    bad("redis://h?x=a b", SIMBA_EINVAL, "x", "space or control");
    bad("redis://h!x", SIMBA_EINVAL, "host", "not allowed");
    bad("redis://[::1", SIMBA_EINVAL, "host", "without ']'");
    bad("redis://[]:1", SIMBA_EINVAL, "host", "empty IPv6");
    bad("redis://[::1]x", SIMBA_EINVAL, "host", "followed by ':port'");
    bad("redis://127.0.0.1?prefix=a/b", SIMBA_EINVAL, "prefix", "prefix");
    bad("redis://127.0.0.1?wait_replicas=x", SIMBA_EINVAL, "wait_replicas", "not a number");
    bad("redis://127.0.0.1?bogus=1", SIMBA_EINVAL, "bogus", "unknown parameter 'bogus'");
    bad("redis://127.0.0.1?ttl=10", SIMBA_EINVAL, "ttl", "not a duration");
    bad("redis://127.0.0.1?ttl=1s&ttl=2s", SIMBA_EINVAL, "ttl", "given twice");
    bad("redis://127.0.0.1?=1", SIMBA_EINVAL, "query", "without a name");
    bad("redis://127.0.0.1?tenant=a/b", SIMBA_ENAME, "tenant", "tenant");
    bad("redis://127.0.0.1?client_id=a_b", SIMBA_ENAME, "client_id", "client_id");
    bad("redis://127.0.0.1?password_env=SIMBA_TEST_NOT_SET_XYZ", SIMBA_EAUTH, "password_env", "not set");
    bad("redis://:s3cret@127.0.0.1?password_env=SIMBA_TEST_URL_PW", SIMBA_EINVAL, "password_env", "more than once");
    bad("redis://127.0.0.1#frag", SIMBA_EINVAL, "fragment", "'#'");
    bad("redis:127.0.0.1", SIMBA_EINVAL, "host", "needs '//'");
    bad("redis+unix://", SIMBA_EINVAL, "path", "socket's path");
    bad("redis+unix://h/sock", SIMBA_EINVAL, "host", "takes no host");
    bad("redis+sentinel://127.0.0.1:26379", SIMBA_EINVAL, "path", "master's name");
    bad("redis+sentinel:///m", SIMBA_EINVAL, "host", "needs the sentinels");
    bad("redis+sentinel://127.0.0.1/m?sentinel_user=s", SIMBA_EINVAL, "sentinel_user", "sentinel_password");
    bad("redis+sentinel://127.0.0.1/m?sentinel_password_env=SIMBA_TEST_NOT_SET_XYZ", SIMBA_EAUTH,
        "sentinel_password_env", "not set");
    bad("redis+sentinel://127.0.0.1/m?sentinel_password=a&sentinel_password_env=SIMBA_TEST_URL_PW", SIMBA_EINVAL,
        "sentinel_password_env", "given twice");
    bad("mysql://root@127.0.0.1", SIMBA_EINVAL, "path", "needs the database");
    bad("mysql://root@127.0.0.1/a/b", SIMBA_EINVAL, "path", "needs the database");
    bad("mysql://root@/db", SIMBA_EINVAL, "host", "missing");
    bad("mysql://root@127.0.0.1/db?table_prefix=a-b", SIMBA_EINVAL, "table_prefix", "table_prefix");
    bad("mysql://root@127.0.0.1/db?create_schema=2", SIMBA_EINVAL, "create_schema", "out of range");
    bad("zk://", SIMBA_EINVAL, "host", "missing");
    bad("zk://h1,,h2", SIMBA_EINVAL, "host", "empty host");
    bad("zk://h1,", SIMBA_EINVAL, "host", "after ','");
    bad("zk://no-such-host.invalid", SIMBA_EINVAL, "host", "cannot resolve");
    bad("zk://127.0.0.1?base_path=nope", SIMBA_EINVAL, "base_path", "ZooKeeper path");
    bad("zk://u@127.0.0.1", SIMBA_EINVAL, "userinfo", "user:password");
    bad("mem://h", SIMBA_EINVAL, "host", "this process only");
    bad("mem:/x", SIMBA_EINVAL, "path", "no path");
    bad("mem:?bogus", SIMBA_EINVAL, "bogus", "unknown parameter");
    {
        /* longer than SIMBA_URL_MAX: refused without reading past the limit */
        char *big = (char *)malloc(SIMBA_URL_MAX + 100);
        memset(big, 'a', SIMBA_URL_MAX + 99);
        memcpy(big, "mem:?", 5);
        big[SIMBA_URL_MAX + 99] = 0;
        bad(big, SIMBA_EINVAL, "url", "longer than");
        free(big);
    }
    printf("url: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
