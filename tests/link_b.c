/* link_b.c -- the user side of the two-translation-unit link test (see
   link_a.c): declarations only, then a real acquire/release on the in-memory
   backend through the blocking helper simba_wait(). Valid C99 and C++11, so
   the script also builds it as C++ against a C link_a.o (extern "C"). */
#include <stdio.h>
#include <string.h>
#include "simba.h"
#include "simba_mem.h"
#ifdef SIMBA_LINK_REDIS
#include "simba_redis.h"
#endif
#ifdef SIMBA_LINK_MYSQL
#include "simba_mysql.h"
#endif
#ifdef SIMBA_LINK_ZK
#include "simba_zk.h"
#endif
#ifdef SIMBA_LINK_PG
#include "simba_pg.h"
#endif
#ifdef SIMBA_LINK_SQLITE
#include "simba_sqlite.h"
#endif
#include "simba_url.h"

static int fail(const char *what, int err) {
    printf("link_b: %s: %s\n", what, simba_strerror(err));
    return 1;
}

/* Waits (up to 5 s) for the next event of `lock` and checks its type. */
static int expect(simba *s, simba_lock lock, simba_event_type type, simba_event *ev) {
    int rc = simba_wait(s, lock, 5000, ev);
    if (rc < 0) return fail("simba_wait", rc);
    if (rc == 0) { printf("link_b: no %s within 5 s\n", simba_event_name(type)); return 1; }
    if (ev->type != type) {
        printf("link_b: got %s, want %s\n", simba_event_name(ev->type), simba_event_name(type));
        return 1;
    }
    return 0;
}

int main(void) {
    simba_mem_server *srv = simba_mem_server_create(NULL);
    simba_desc desc;
    simba_lock_desc ld;
    simba_lock lock;
    simba_event ev;
    simba *s;
    int err = 0, bad;

    if (!srv) return fail("simba_mem_server_create", SIMBA_ENOMEM);
    memset(&desc, 0, sizeof desc);
    desc.backend = simba_mem(srv, NULL);
    desc.client_id = "link-b";
    s = simba_create(&desc, NULL);
    if (!s) { simba_mem_server_destroy(srv); return fail("simba_create", SIMBA_ENOMEM); }

    memset(&ld, 0, sizeof ld);
    ld.name = "link";
    ld.wait_ms = -1;
    lock = simba_acquire(s, &ld);
    bad = lock.gen == 0 ? fail("simba_acquire", simba_last_error(s)) : 0;
    if (!bad) bad = expect(s, lock, SIMBA_EVENT_ACQUIRED, &ev);
    if (!bad && (ev.fence <= 0 || simba_valid_ms(s, lock) <= 0)) bad = fail("hold not valid", SIMBA_OK);
    if (!bad && (err = simba_release(s, lock)) != SIMBA_OK) bad = fail("simba_release", err);
    if (!bad) bad = expect(s, lock, SIMBA_EVENT_RELEASED, &ev);

    simba_destroy(s);
    simba_mem_server_destroy(srv);
    if (!bad) {   /* simba_url.h: the parser in link_a, the dispatcher here */
        simba_url_error ue;
        simba *u = simba_create_url("mem:?tenant=link", NULL, &ue);
        if (!u) bad = fail(ue.msg, ue.code);
        simba_destroy(u);
    }
    if (!bad) printf("link_b: %s acquired and released\n", simba_version());
    return bad;
}
