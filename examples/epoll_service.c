/* epoll_service.c -- a TCP echo server on epoll that holds a lock on the same
   loop, through adapters/simba_epoll.h (push mode: no fd-set diffing, no
   timeout computing; simba is one fd in the set).

   It listens on 127.0.0.1 (a free port), echoes what clients send, and
   serves only while it holds "echo-primary". A client of its own connects,
   sends "ping" five times; on the fifth echo the server releases the lock
   from its own read callback and exits when RELEASED arrives.
   In-memory backend here; for MySQL change the one line in main(), e.g.
     .backend = simba_mysql(&(simba_mysql_desc){ .host = "127.0.0.1", .database = "app" }) */
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include "adapters/simba_epoll.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>

static simba *s;
static simba_lock primary;
static int holding, done, echoes;

static void on_simba(simba *sc, const simba_event *ev, void *user) {
    (void)sc; (void)user;
    printf("simba: %s\n", simba_event_name(ev->type));
    if (ev->type == SIMBA_EVENT_ACQUIRED) holding = 1;
    if (ev->type == SIMBA_EVENT_LOST) holding = 0;
    if (ev->type == SIMBA_EVENT_RELEASED) done = 1;
}

static void add(int ep, int fd) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

int main(void) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int ep = epoll_create1(0), lfd = socket(AF_INET, SOCK_STREAM, 0), cfd = socket(AF_INET, SOCK_STREAM, 0), sent = 0;
    simba_mem_server *srv = simba_mem_server_create(NULL);
    simba_epoll *ad;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 8) || getsockname(lfd, (struct sockaddr *)&a, &len)) return 1;
    add(ep, lfd);
    s = simba_create(&(simba_desc){ .backend = simba_mem(srv, NULL) }, NULL);
    if (!s || !(ad = simba_epoll_attach(s, ep, on_simba, NULL))) return 1;
    primary = simba_acquire(s, &(simba_lock_desc){ .name = "echo-primary", .wait_ms = -1 });
    if (connect(cfd, (struct sockaddr *)&a, sizeof a)) return 1;
    add(ep, cfd);
    while (!done) {
        struct epoll_event ev[16];
        int n = epoll_wait(ep, ev, 16, 1000), i;
        if (holding && sent == echoes && sent < 5) sent += write(cfd, "ping", 4) == 4;
        for (i = 0; i < n; i++) {
            char buf[64];
            ssize_t k;
            if (ev[i].data.ptr == ad) { simba_epoll_dispatch(ad); continue; }   /* simba's */
            if (ev[i].data.fd == lfd) { add(ep, accept(lfd, NULL, NULL)); continue; }
            k = read(ev[i].data.fd, buf, sizeof buf);
            if (k <= 0) { close(ev[i].data.fd); continue; }
            if (ev[i].data.fd == cfd) {                       /* our client got its echo */
                printf("client got \"%.*s\"\n", (int)k, buf);
                if (++echoes == 5) { holding = 0; simba_release(s, primary); }
            } else if (holding && write(ev[i].data.fd, buf, (size_t)k) != k) return 1;  /* serve */
        }
    }
    simba_destroy(s);
    simba_mem_server_destroy(srv);
    close(cfd); close(lfd); close(ep);
    return echoes == 5 ? 0 : 1;
}
