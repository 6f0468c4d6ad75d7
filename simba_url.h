/*
    simba_url.h -- connection URLs for simba: one string per client, for config
    files and variables such as SIMBA_URL, and the dispatcher that turns it into
    a client of the right backend.

    Include it after simba.h and after the backend headers it should dispatch
    to, and define SIMBA_URL_IMPLEMENTATION in *one* file (the parser):

        #include "simba.h"
        #include "simba_redis.h"
        #include "simba_zk.h"
        #include "simba_mem.h"
        #define SIMBA_URL_IMPLEMENTATION
        #include "simba_url.h"

        simba_url_error err;
        simba *s = simba_create_url("redis://127.0.0.1:6379?tenant=billing", NULL, &err);
        if (!s) fprintf(stderr, "%s\n", err.msg);

    simba_create_url then accepts the schemes of exactly the backends included
    before (here redis:, redis+unix:, redis+sentinel:, redis+cluster:, zk: and
    mem:) and answers any other scheme with an error that lists them. The
    dispatcher is static, compiled in every file that includes this header,
    because the preprocessor then sees which backend headers that file
    included (C99 has no portable constructors for registration at run time,
    and a table filled by hand can forget a backend).

    CONTENTS (every section starts with a comment ">>name", grep for it)
    --------
        >>syntax        the URL syntax of every backend, simba_url_parse(),
                        simba_url_client_options()
        >>dispatch      simba_url_schemes(), simba_url_schemes_list(),
                        simba_url_scheme_status(), simba_url_desc(),
                        simba_create_url() (static: for the backends
                        included before this file)
    Implementation (SIMBA_URL_IMPLEMENTATION; guard SIMBA_URL_IMPL_INCLUDED):
        >>parse         the parser, the password sources, the client options
*/
#ifndef SIMBA_URL_INCLUDED
#define SIMBA_URL_INCLUDED

#ifndef SIMBA_INCLUDED
#error "simba_url.h: include simba.h (and the backend headers) first"
#endif

#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/*>>syntax: the URL syntax, simba_url_parse(), simba_url_client_options() */

/* ---- connection URLs ----
   One connection string for every backend, for config files and variables
   such as SIMBA_URL (docs/cli.md has the full syntax):

       redis://[user[:password]@]host[:port][/db][?prefix=..&wait_replicas=..]
       redis+unix:///path/to/sock[?db=..]
       redis+sentinel://[user[:password]@]s1:26379,s2:26379/mastername[?db=..]
       redis+cluster://host1:port1,host2:port2[?prefix=..]   (seed nodes)
       mysql://user[:password]@host[:port]/database[?socket=..&table_prefix=..]
       zk://host1:port1,host2:port2[/chroot][?base_path=..]
       postgres://[user[:password]@]host[:port][,host:port]/database[?schema=..]
                                   (postgresql:// too; libpq parses it: simba_pg.h)
       sqlite:///path/to/locks.db[?mode=..&busy_retry=..&checkpoint=..]   (one machine)
       mem:                        (this process only)

   and, for every scheme, the client options as query parameters: tenant,
   client_id, ttl, transition, op_timeout, recheck. Durations are a number
   with a unit: 500ms, 10s, 2m, 1h. Every part is percent-decoded. The
   password can stay out of the URL (and out of `ps`): password_env=VAR
   reads it from that environment variable, password_file=PATH from the
   first line of that file. simba never logs a password, and no error
   message contains one.

   This file parses (simba_url_parse); each backend header turns a parsed URL
   into its backend (simba_redis_from_url, ...) with the kit's URL readers
   in simba.h (simba_url_param, simba_url_int, ...). */

/* simba_url_parse: split and decode url into *out. Returns SIMBA_OK, or a
   SIMBA_E* with *err (may be NULL) naming the part. Reads url only up to its
   NUL, and at most SIMBA_URL_MAX + 1 bytes of it. */
SIMBADEF int simba_url_parse(const char *url, simba_url *out, simba_url_error *err);
/* simba_url_client_options: fills tenant, client_id, ttl_ms, transition_ms,
   op_timeout_ms, recheck_ms of *desc from the parameters of the same names
   (strings point into u). */
SIMBADEF int simba_url_client_options(simba_url *u, simba_desc *desc, simba_url_error *err);

/*>>dispatch: simba_url_schemes(), simba_url_scheme_status(), simba_url_desc(), simba_create_url(), ... */

#if defined(__GNUC__) || defined(__clang__)
#define SIMBA__URL_STATIC static __attribute__((unused))
#else
#define SIMBA__URL_STATIC static
#endif

#ifdef SIMBA_REDIS_INCLUDED
#define SIMBA__URL_HAS_REDIS 1
#else
#define SIMBA__URL_HAS_REDIS 0
#endif
#ifdef SIMBA_MYSQL_INCLUDED
#define SIMBA__URL_HAS_MYSQL 1
#else
#define SIMBA__URL_HAS_MYSQL 0
#endif
#ifdef SIMBA_ZK_INCLUDED
#define SIMBA__URL_HAS_ZK 1
#else
#define SIMBA__URL_HAS_ZK 0
#endif
#ifdef SIMBA_PG_INCLUDED
#define SIMBA__URL_HAS_PG 1
#else
#define SIMBA__URL_HAS_PG 0
#endif
#ifdef SIMBA_SQLITE_INCLUDED
#define SIMBA__URL_HAS_SQLITE 1
#else
#define SIMBA__URL_HAS_SQLITE 0
#endif
#ifdef SIMBA_MEM_INCLUDED
#define SIMBA__URL_HAS_MEM 1
#else
#define SIMBA__URL_HAS_MEM 0
#endif

/* simba_url_scheme_status: SIMBA_URL_SCHEME_COMPILED when scheme (as in
   simba_url.scheme, without "://") is one of simba's and its backend header
   was included before this file, SIMBA_URL_SCHEME_ABSENT when it is one of
   simba's but its backend is not in this program, SIMBA_URL_SCHEME_UNKNOWN
   otherwise. The CLI hands an ABSENT scheme to the simba built with every
   backend (docs/cli.md). */
enum { SIMBA_URL_SCHEME_UNKNOWN = 0, SIMBA_URL_SCHEME_ABSENT = 1, SIMBA_URL_SCHEME_COMPILED = 2 };
typedef struct simba__url_scheme { const char *scheme, *shown; int compiled; } simba__url_scheme;
static const simba__url_scheme simba__url_all_schemes[] = {
    {"redis", "redis://", SIMBA__URL_HAS_REDIS}, {"redis+unix", "redis+unix://", SIMBA__URL_HAS_REDIS},
    {"redis+sentinel", "redis+sentinel://", SIMBA__URL_HAS_REDIS},
    {"redis+cluster", "redis+cluster://", SIMBA__URL_HAS_REDIS}, {"mysql", "mysql://", SIMBA__URL_HAS_MYSQL},
    {"zk", "zk://", SIMBA__URL_HAS_ZK}, {"postgres", "postgres://", SIMBA__URL_HAS_PG},
    {"postgresql", "postgresql://", SIMBA__URL_HAS_PG}, {"sqlite", "sqlite://", SIMBA__URL_HAS_SQLITE},
    {"mem", "mem:", SIMBA__URL_HAS_MEM}};

SIMBA__URL_STATIC int simba_url_scheme_status(const char *scheme) {
    size_t i;
    for (i = 0; scheme && i < sizeof simba__url_all_schemes / sizeof simba__url_all_schemes[0]; i++)
        if (strcmp(scheme, simba__url_all_schemes[i].scheme) == 0)
            return simba__url_all_schemes[i].compiled ? SIMBA_URL_SCHEME_COMPILED : SIMBA_URL_SCHEME_ABSENT;
    return SIMBA_URL_SCHEME_UNKNOWN;
}

/* simba_url_schemes_list: the schemes this program accepts (compiled != 0) or
   knows but lacks (compiled == 0), as "redis://, mem:" for messages and
   --help ("" when none). The text is written into a buffer of this file's. */
SIMBA__URL_STATIC const char *simba_url_schemes_list(int compiled) {
    static char text[2][256];
    char *t = text[compiled != 0];
    size_t i, n, len = 0;
    t[0] = '\0';
    for (i = 0; i < sizeof simba__url_all_schemes / sizeof simba__url_all_schemes[0]; i++) {
        const simba__url_scheme *k = &simba__url_all_schemes[i];
        if ((k->compiled != 0) != (compiled != 0)) continue;
        n = strlen(k->shown);
        if (len + 2 + n >= sizeof text[0]) break;   /* (never: the table fits) */
        if (len) { memcpy(t + len, ", ", 2); len += 2; }
        memcpy(t + len, k->shown, n + 1);
        len += n;
    }
    return t;
}

/* The schemes this program accepts, for messages and --help. */
SIMBA__URL_STATIC const char *simba_url_schemes(void) { return simba_url_schemes_list(1); }

#ifdef SIMBA_MEM_INCLUDED
/* The process-wide server behind "mem:" URLs: every client made from a
   mem: URL in this process meets the others there (and no other process). */
SIMBA__URL_STATIC simba_mem_server *simba_url_mem_server(void) {
    static simba_mem_server *srv;
    if (!srv) srv = simba_mem_server_create(NULL);
    return srv;
}
#endif

/* simba_url_desc: parse url into *u and fill *d: the client options and the
   backend of its scheme (d->backend is set only on success; then simba owns
   it from simba_create on). Strings in *d point into *u. */
SIMBA__URL_STATIC int simba_url_desc(const char *url, simba_url *u, simba_desc *d, simba_url_error *err) {
    int rc;
    simba_backend b;
    if ((rc = simba_url_parse(url, u, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_client_options(u, d, err)) != SIMBA_OK) return rc;
    b.vt = NULL;
    b.impl = NULL;
    if (0) {}
#ifdef SIMBA_REDIS_INCLUDED
    else if (strcmp(u->scheme, "redis") == 0 || strcmp(u->scheme, "redis+unix") == 0 ||
             strcmp(u->scheme, "redis+sentinel") == 0 || strcmp(u->scheme, "redis+cluster") == 0)
        rc = simba_redis_from_url(u, &b, err);
#endif
#ifdef SIMBA_MYSQL_INCLUDED
    else if (strcmp(u->scheme, "mysql") == 0) rc = simba_mysql_from_url(u, &b, err);
#endif
#ifdef SIMBA_ZK_INCLUDED
    else if (strcmp(u->scheme, "zk") == 0) rc = simba_zk_from_url(u, &b, err);
#endif
#ifdef SIMBA_PG_INCLUDED   /* libpq parses the URL's text itself (PQconninfoParse) */
    else if (strcmp(u->scheme, "postgres") == 0 || strcmp(u->scheme, "postgresql") == 0)
        rc = simba_pg_from_url(u, url, &b, err);
#endif
#ifdef SIMBA_SQLITE_INCLUDED
    else if (strcmp(u->scheme, "sqlite") == 0) rc = simba_sqlite_from_url(u, &b, err);
#endif
#ifdef SIMBA_MEM_INCLUDED
    else if (strcmp(u->scheme, "mem") == 0) {
        rc = simba_url_check_used(u, err);
        if (rc == SIMBA_OK) {
            simba_mem_server *srv = simba_url_mem_server();
            rc = srv ? simba_mem_from_url(u, srv, &b, err)
                     : simba_url_fail(err, SIMBA_ENOMEM, "url", "URL: out of memory");
        }
    }
#endif
    else {
        const char *known = simba_url_scheme_status(u->scheme) == SIMBA_URL_SCHEME_ABSENT
                                ? "is not compiled into this program" : "is unknown";
        return simba_url_fail(err, SIMBA_EUNSUPPORTED, "scheme", "URL scheme: '%s' %s (this program accepts %s)",
                              u->scheme, known, simba_url_schemes());
    }
    if (rc == SIMBA_OK) d->backend = b;
    return rc;
}

/* simba_create_url: a client for url; base (may be NULL) gives the other
   fields of simba_desc (the URL's client options win). NULL on failure, with
   *err saying why (a failed simba_create: err->part "client"). */
SIMBA__URL_STATIC simba *simba_create_url(const char *url, const simba_desc *base, simba_url_error *err) {
    simba_url *u = (simba_url *)malloc(sizeof *u);
    simba_desc d;
    simba *s = NULL;
    simba_error e;
    if (!u) {
        simba_url_fail(err, SIMBA_ENOMEM, "url", "URL: out of memory");
        return NULL;
    }
    if (base) d = *base;
    else memset(&d, 0, sizeof d);
    if (simba_url_desc(url, u, &d, err) == SIMBA_OK) {
        s = simba_create(&d, &e);
        if (!s) simba_url_fail(err, e.code, "client", "cannot create the client: %s",
                               e.message[0] ? e.message : simba_strerror(e.code));
    }
    simba_url_clear(u);
    free(u);
    return s;
}

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_URL_INCLUDED */

/*--- IMPLEMENTATION ---------------------------------------------------------*/
#ifdef SIMBA_URL_IMPLEMENTATION
#ifndef SIMBA_URL_IMPL_INCLUDED
#define SIMBA_URL_IMPL_INCLUDED
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/*>>parse: the parser, the password sources, the client options */

/* ---- connection URLs (implementation) ----
   A small, strict parser: it reads the URL once, left to right, never past
   its NUL, and copies every decoded part into the struct's own buffer (the
   decoded text is never longer than the encoded one, so buf cannot overflow:
   SIMBA_URL_MAX bytes of URL plus at most SIMBA_URL_MAX of password from a
   file or the environment). */

static int simba__url_hex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes src[0..len) into u->buf at *pos; NULL (with *err) for a bad escape,
   a decoded NUL, or no room. */
static const char *simba__url_put(simba_url *u, size_t *pos, const char *src, size_t len,
                                  const char *part, simba_url_error *err) {
    char *dst = u->buf + *pos, *start = dst;
    size_t i;
    if (*pos + len + 1 > sizeof u->buf) {
        simba_url_fail(err, SIMBA_EINVAL, part, "URL %s: too long", part);
        return NULL;
    }
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c == '%') {
            int hi = i + 1 < len ? simba__url_hex((unsigned char)src[i + 1]) : -1;
            int lo = i + 2 < len ? simba__url_hex((unsigned char)src[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                simba_url_fail(err, SIMBA_EINVAL, part, "URL %s: '%%' is not followed by two hex digits", part);
                return NULL;
            }
            c = (unsigned char)(hi * 16 + lo);
            if (c == 0) {
                simba_url_fail(err, SIMBA_EINVAL, part, "URL %s: %%00 (a NUL byte) is not allowed", part);
                return NULL;
            }
            i += 2;
        } else if (c <= 0x20 || c == 0x7f) {
            simba_url_fail(err, SIMBA_EINVAL, part, "URL %s: a space or control byte (encode it as %%%02X)", part, c);
            return NULL;
        }
        *dst++ = (char)c;
    }
    *dst++ = '\0';
    *pos = (size_t)(dst - u->buf);
    return start;
}

/* Reads the first line of a password file into u->buf at *pos. A line
   with a NUL byte is not a password (a device such as /dev/zero, a binary
   file): read as a C string it would be an empty password. */
static const char *simba__url_password_file(simba_url *u, size_t *pos, const char *path, simba_url_error *err) {
    FILE *f = fopen(path, "r");
    char *dst = u->buf + *pos;
    size_t room = sizeof u->buf - *pos, n = 0, cap = room > 4096 ? 4096 : room;
    int c = 0;
    if (!f) {
        simba_url_fail(err, SIMBA_EAUTH, "password_file", "URL password_file: cannot open '%.120s'", path);
        return NULL;
    }
    while (n + 1 < cap && (c = getc(f)) != EOF && c != '\n' && c != 0) dst[n++] = (char)c;
    fclose(f);
    if (c == 0) {
        simba_url_fail(err, SIMBA_EAUTH, "password_file", "URL password_file: '%.120s' has a NUL byte: not a password",
                       path);
        return NULL;
    }
    while (n > 0 && dst[n - 1] == '\r') n--;
    dst[n] = '\0';
    if (n == 0) {
        simba_url_fail(err, SIMBA_EAUTH, "password_file", "URL password_file: '%.120s' is empty or unreadable", path);
        return NULL;
    }
    *pos += n + 1;
    return dst;
}

static int simba__url_host_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~' || c == '%';
}

/* One "host[:port]" or "[v6]:port" of the authority. */
static int simba__url_host(simba_url *u, size_t *pos, const char *h, size_t len, simba_url_error *err) {
    simba_url_host *out = &u->hosts[u->nhosts];
    size_t hl = len, i;
    const char *ports = NULL;
    size_t pl = 0;
    if (u->nhosts >= SIMBA_URL_MAX_HOSTS)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: more than %d hosts", SIMBA_URL_MAX_HOSTS);
    if (len == 0) return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: empty host name");
    if (h[0] == '[') {
        const char *close = (const char *)memchr(h, ']', len);
        if (!close) return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: '[' without ']'");
        for (i = 1; h + i < close; i++)
            if (!(simba__url_hex((unsigned char)h[i]) >= 0 || h[i] == ':' || h[i] == '.'))
                return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: bad byte in an IPv6 address");
        if (close == h + 1) return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: empty IPv6 address");
        hl = (size_t)(close - h) + 1;
        if (hl < len) {
            if (h[hl] != ':') return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: ']' must be followed by ':port'");
            ports = h + hl + 1;
            pl = len - hl - 1;
        }
        if (!(out->host = simba__url_put(u, pos, h + 1, hl - 2, "host", err))) return err ? err->code : SIMBA_EINVAL;
    } else {
        const char *colon = (const char *)memchr(h, ':', len);
        if (colon) {
            hl = (size_t)(colon - h);
            ports = colon + 1;
            pl = len - hl - 1;
        }
        if (hl == 0) return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: empty host name before ':'");
        for (i = 0; i < hl; i++)
            if (!simba__url_host_char((unsigned char)h[i]))
                return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: byte 0x%02x is not allowed in a host name (encode it)",
                                      (unsigned)(unsigned char)h[i]);
        if (!(out->host = simba__url_put(u, pos, h, hl, "host", err))) return err ? err->code : SIMBA_EINVAL;
    }
    out->port = 0;
    if (ports) {
        long p = 0;
        if (pl == 0) return simba_url_fail(err, SIMBA_EINVAL, "port", "URL port: empty after ':'");
        for (i = 0; i < pl; i++) {
            if (ports[i] < '0' || ports[i] > '9' || p > 65535)
                return simba_url_fail(err, SIMBA_EINVAL, "port", "URL port: '%.*s' is not a port (1..65535)",
                                      (int)(pl > 20 ? 20 : pl), ports);
            p = p * 10 + (ports[i] - '0');
        }
        if (p < 1 || p > 65535)
            return simba_url_fail(err, SIMBA_EINVAL, "port", "URL port: '%.*s' is not a port (1..65535)",
                                  (int)(pl > 20 ? 20 : pl), ports);
        out->port = (int)p;
    }
    u->nhosts++;
    return SIMBA_OK;
}

/* Over 80 lines: the URL grammar left to right (scheme, userinfo, hosts,
   path, query) in one place; split up, one grammar would be scattered. */
SIMBADEF int simba_url_parse(const char *url, simba_url *u, simba_url_error *err) {
    size_t n, i, pos = 0, end;
    const char *p, *q;
    const char *pw_env = NULL, *pw_file = NULL;
    int rc;
    if (err) memset(err, 0, sizeof *err);
    if (!u) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: no output struct");
    memset(u, 0, sizeof *u);
    u->path = "";
    if (!url) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: none given");
    for (n = 0; n <= SIMBA_URL_MAX && url[n]; n++) {}
    if (n > SIMBA_URL_MAX) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: longer than %d bytes", SIMBA_URL_MAX);
    if (n == 0) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: empty");

    /* scheme ":" */
    for (i = 0; i < n && url[i] != ':'; i++) {
        char c = url[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'));
        if (!ok) break;
    }
    if (i == n || url[i] != ':' || i == 0)
        return simba_url_fail(err, SIMBA_EINVAL, "scheme", "URL scheme: expected 'scheme:' at the start (e.g. redis://host)");
    if (i >= sizeof u->scheme) return simba_url_fail(err, SIMBA_EINVAL, "scheme", "URL scheme: too long");
    for (end = 0; end < i; end++) {
        char c = url[end];
        u->scheme[end] = (char)((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
    }
    u->scheme[i] = '\0';
    p = url + i + 1;
    end = n - (i + 1);                          /* bytes left after "scheme:" */

    if ((q = (const char *)memchr(p, '#', end)) != NULL)
        return simba_url_fail(err, SIMBA_EINVAL, "fragment", "URL fragment: '#' is not allowed (encode it as %%23)");

    /* "//" authority */
    if (end >= 2 && p[0] == '/' && p[1] == '/') {
        const char *a = p + 2, *ae, *at = NULL, *h;
        size_t alen;
        u->has_authority = 1;
        for (ae = a; ae < p + end && *ae != '/' && *ae != '?'; ae++)
            if (*ae == '@') at = ae;                /* the last '@': passwords may hold one encoded only */
        alen = (size_t)(ae - a);
        h = a;
        if (at) {
            const char *colon = (const char *)memchr(a, ':', (size_t)(at - a));
            size_t ul = colon ? (size_t)(colon - a) : (size_t)(at - a);
            if (memchr(a, '@', (size_t)(at - a)))
                return simba_url_fail(err, SIMBA_EINVAL, "userinfo", "URL userinfo: a second '@' (encode it as %%40)");
            if (ul > 0 && !(u->user = simba__url_put(u, &pos, a, ul, "user", err))) return err ? err->code : SIMBA_EINVAL;
            if (colon && !(u->password = simba__url_put(u, &pos, colon + 1, (size_t)(at - colon - 1), "password", err)))
                return err ? err->code : SIMBA_EINVAL;
            if (!colon && ul == 0)
                return simba_url_fail(err, SIMBA_EINVAL, "userinfo", "URL userinfo: empty before '@'");
            h = at + 1;
        }
        alen = (size_t)(ae - h);
        while (alen > 0) {
            const char *comma = (const char *)memchr(h, ',', alen);
            size_t hl = comma ? (size_t)(comma - h) : alen;
            if ((rc = simba__url_host(u, &pos, h, hl, err)) != SIMBA_OK) return rc;
            if (!comma) break;
            if (hl + 1 == alen) return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: empty host name after ','");
            h = comma + 1;
            alen -= hl + 1;
        }
        end -= (size_t)(ae - p);
        p = ae;
    }

    /* path */
    q = (const char *)memchr(p, '?', end);
    {
        size_t pl = q ? (size_t)(q - p) : end;
        if (pl > 0 && !(u->path = simba__url_put(u, &pos, p, pl, "path", err))) return err ? err->code : SIMBA_EINVAL;
    }

    /* query */
    if (q) {
        const char *s = q + 1, *qe = p + end;
        while (s < qe) {
            const char *amp = (const char *)memchr(s, '&', (size_t)(qe - s));
            const char *e = amp ? amp : qe, *eq = (const char *)memchr(s, '=', (size_t)(e - s));
            simba_url_query *pp;
            int k;
            if (e == s) { s = e + 1; continue; }   /* "a=1&&b=2": an empty pair is nothing */
            if (u->nparams >= SIMBA_URL_MAX_PARAMS)
                return simba_url_fail(err, SIMBA_EINVAL, "query", "URL query: more than %d parameters", SIMBA_URL_MAX_PARAMS);
            pp = &u->params[u->nparams];
            if ((eq ? eq : e) == s) return simba_url_fail(err, SIMBA_EINVAL, "query", "URL query: a parameter without a name");
            if (!(pp->key = simba__url_put(u, &pos, s, (size_t)((eq ? eq : e) - s), "query", err))) return err ? err->code : SIMBA_EINVAL;
            if (!(pp->value = simba__url_put(u, &pos, eq ? eq + 1 : e, eq ? (size_t)(e - eq - 1) : 0, pp->key, err)))
                return err ? err->code : SIMBA_EINVAL;
            for (k = 0; k < u->nparams; k++)
                if (strcmp(u->params[k].key, pp->key) == 0)
                    return simba_url_fail(err, SIMBA_EINVAL, pp->key, "URL query: parameter '%.40s' given twice", pp->key);
            u->nparams++;
            if (!amp) break;
            s = amp + 1;
        }
    }

    /* passwords that stay out of the URL */
    pw_env = simba_url_param(u, "password_env");
    pw_file = simba_url_param(u, "password_file");
    if ((pw_env != NULL) + (pw_file != NULL) + (u->password != NULL) > 1)
        return simba_url_fail(err, SIMBA_EINVAL, pw_env ? "password_env" : "password_file",
                              "URL password: given more than once (userinfo, password_env, password_file)");
    if (pw_env) {
        const char *v = *pw_env ? getenv(pw_env) : NULL;
        if (!v)
            return simba_url_fail(err, SIMBA_EAUTH, "password_env", "URL password_env: variable '%.60s' is not set", pw_env);
        if (strlen(v) >= sizeof u->buf - pos)
            return simba_url_fail(err, SIMBA_EAUTH, "password_env", "URL password_env: the password is too long");
        memcpy(u->buf + pos, v, strlen(v) + 1);
        u->password = u->buf + pos;
        pos += strlen(v) + 1;
    }
    if (pw_file && !(u->password = simba__url_password_file(u, &pos, pw_file, err))) return err ? err->code : SIMBA_EAUTH;
    return SIMBA_OK;
}

static int simba__url_word(const char *v, const char *extra, int maxlen) {
    int n = 0;
    for (; *v; v++, n++) {
        char c = *v;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr(extra, c)))
            return 0;
    }
    return n >= 1 && n <= maxlen;
}

SIMBADEF int simba_url_client_options(simba_url *u, simba_desc *d, simba_url_error *err) {
    const char *v;
    int rc;
    if (!u || !d) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: no URL or no desc");
    if ((v = simba_url_param(u, "tenant")) != NULL) {
        if (!simba__url_word(v, "._-", SIMBA_MAX_TENANT))
            return simba_url_fail(err, SIMBA_ENAME, "tenant", "URL parameter tenant: 1..%d bytes of [A-Za-z0-9._-]", SIMBA_MAX_TENANT);
        d->tenant = v;
    }
    if ((v = simba_url_param(u, "client_id")) != NULL) {
        if (!simba__url_word(v, ".:-", SIMBA_MAX_ID))
            return simba_url_fail(err, SIMBA_ENAME, "client_id", "URL parameter client_id: 1..%d bytes of [A-Za-z0-9.:-]", SIMBA_MAX_ID);
        d->client_id = v;
    }
    if ((rc = simba_url_duration(u, "ttl", 1, 86400000, &d->ttl_ms, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_duration(u, "transition", 1, 86400000, &d->transition_ms, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_duration(u, "op_timeout", 1, 86400000, &d->op_timeout_ms, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_duration(u, "recheck", 1, 86400000, &d->recheck_ms, err)) != SIMBA_OK) return rc;
    return SIMBA_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_URL_IMPL_INCLUDED */
#endif /* SIMBA_URL_IMPLEMENTATION */

/*
    LICENSE (MIT): see the end of simba.h.
*/
