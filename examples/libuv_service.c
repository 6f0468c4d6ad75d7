/* libuv_service.c -- a libuv service holds a lock with no adapter code of its
   own: adapters/simba_libuv.h wires simba into the uv loop.

   The service's own work is a periodic uv_timer (every 100 ms), done only
   while it holds "report-writer"; after 5 rounds it releases from that timer
   callback (simba is told at once) and stops when RELEASED arrives.
   In-memory backend here; for ZooKeeper change the one line in main(), e.g.
     .backend = simba_zk(&(simba_zk_desc){ .hosts = "127.0.0.1:2181" }) */
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include "adapters/simba_libuv.h"
#include <stdio.h>

static simba *s;
static simba_lock job;
static uv_timer_t work;
static int holding, rounds;

static void on_simba(simba *sc, const simba_event *ev, void *user) {
    (void)sc; (void)user;
    printf("simba: %s\n", simba_event_name(ev->type));
    if (ev->type == SIMBA_EVENT_ACQUIRED) holding = 1;
    if (ev->type == SIMBA_EVENT_LOST) holding = 0;              /* stop writing at once */
    if (ev->type == SIMBA_EVENT_RELEASED) {
        uv_timer_stop(&work);
        uv_close((uv_handle_t *)&work, NULL);
        simba_destroy(s);             /* frees the adapter; its handles close: the loop ends */
    }
}

static void on_work(uv_timer_t *t) {
    (void)t;
    if (!holding) return;
    printf("working (fence-protected write #%d)\n", ++rounds);
    if (rounds == 5) { holding = 0; simba_release(s, job); }
}

int main(void) {
    uv_loop_t *loop = uv_default_loop();
    simba_mem_server *srv = simba_mem_server_create(NULL);
    s = simba_create(&(simba_desc){ .backend = simba_mem(srv, NULL) }, NULL);
    if (!s || !simba_libuv_attach(s, loop, on_simba, NULL)) return 1;
    job = simba_acquire(s, &(simba_lock_desc){ .name = "report-writer", .wait_ms = -1 });
    uv_timer_init(loop, &work);
    uv_timer_start(&work, on_work, 100, 100);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    simba_mem_server_destroy(srv);
    return rounds == 5 ? 0 : 1;
}
