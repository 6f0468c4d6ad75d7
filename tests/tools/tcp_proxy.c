/* tcp_proxy.c -- a small user-space TCP proxy for simba's tests: a network
   partition without iptables.

   usage: tcp_proxy [-p PIDFILE] LINK...
     LINK = LISTEN_PORT:TARGET_HOST:TARGET_PORT   (TARGET_HOST numeric, e.g. 127.0.0.1)

   Listens on 127.0.0.1:LISTEN_PORT for every LINK and forwards each accepted
   connection to TARGET_HOST:TARGET_PORT, both ways, byte for byte. One
   process, one poll() loop, no threads. Prints "ready" on stdout once every
   port listens (then stdout is closed), and writes its pid to PIDFILE.

   Control by signal (the whole process, every link):
     SIGUSR1  freeze: stop reading, writing and accepting. Every socket stays
              open, so nobody sees a FIN or a RST: the peers see silence, as
              behind a cut cable or a dropping firewall. Connections made
              meanwhile wait in the listen backlog (the kernel completes the
              handshake) and get no byte either.
     SIGUSR2  resume: forward what was buffered and go on.
     SIGTERM / SIGINT  exit (closes everything).
   A link that must be cut alone runs in its own process.

   A target that refuses or drops a connection closes the other side too
   (as a real network path would not, but the peer then retries, which is
   what a test wants). Buffers are 64 KB per direction; when one is full
   the proxy stops reading that side (TCP back-pressure). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { MAX_LINKS = 64, MAX_PAIRS = 512, BUF = 65536 };

typedef struct link {
    int lfd;
    struct sockaddr_in target;
} link_t;

typedef struct half {           /* bytes read from one fd, to be written to the other */
    char buf[BUF];
    size_t len;
    int eof;                    /* the reading side ended: shut down writing when drained */
} half_t;

typedef struct pair {
    int fd[2];                  /* 0 the accepted client side, 1 the target side */
    int connecting;             /* fd[1] connect() in progress */
    half_t h[2];                /* h[0]: read from fd[0], written to fd[1]; h[1] the other way */
} pair_t;

static volatile sig_atomic_t frozen, stop;
static link_t links[MAX_LINKS];
static int nlinks;
static pair_t *pairs[MAX_PAIRS];

static void on_signal(int sig) {
    if (sig == SIGUSR1) frozen = 1;
    else if (sig == SIGUSR2) frozen = 0;
    else stop = 1;
}

static int nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void pair_close(int i) {
    pair_t *p = pairs[i];
    if (!p) return;
    if (p->fd[0] >= 0) close(p->fd[0]);
    if (p->fd[1] >= 0) close(p->fd[1]);
    free(p);
    pairs[i] = NULL;
}

static int parse_link(const char *arg, link_t *l) {
    char host[64];
    int lport, tport;
    struct sockaddr_in a;
    const char *c1 = strchr(arg, ':'), *c2 = strrchr(arg, ':');
    int one = 1;
    if (!c1 || c1 == c2 || (size_t)(c2 - c1 - 1) >= sizeof host) return 0;
    lport = atoi(arg);
    tport = atoi(c2 + 1);
    memcpy(host, c1 + 1, (size_t)(c2 - c1 - 1));
    host[c2 - c1 - 1] = 0;
    if (lport <= 0 || lport > 65535 || tport <= 0 || tport > 65535) return 0;
    memset(&l->target, 0, sizeof l->target);
    l->target.sin_family = AF_INET;
    l->target.sin_port = htons((unsigned short)tport);
    if (inet_pton(AF_INET, host, &l->target.sin_addr) != 1) return 0;
    l->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (l->lfd < 0) return 0;
    setsockopt(l->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)lport);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(l->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(l->lfd, 64) != 0) {
        fprintf(stderr, "tcp_proxy: cannot listen on %d: %s\n", lport, strerror(errno));
        return 0;
    }
    nonblock(l->lfd);
    return 1;
}

static void do_accept(link_t *l) {
    int i, one = 1, fd = accept(l->lfd, NULL, NULL), t;
    pair_t *p;
    if (fd < 0) return;
    for (i = 0; i < MAX_PAIRS && pairs[i]; i++) {}
    if (i == MAX_PAIRS) { close(fd); return; }
    t = socket(AF_INET, SOCK_STREAM, 0);
    p = (pair_t *)calloc(1, sizeof *p);
    if (t < 0 || !p) { close(fd); if (t >= 0) close(t); free(p); return; }
    nonblock(fd);
    nonblock(t);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(t, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    p->fd[0] = fd;
    p->fd[1] = t;
    pairs[i] = p;
    if (connect(t, (struct sockaddr *)&l->target, sizeof l->target) != 0) {
        if (errno == EINPROGRESS) p->connecting = 1;
        else pair_close(i);
    }
}

/* Move bytes for pair i after poll said what is ready. Returns 0 if the pair ended. */
static int pump(pair_t *p, const struct pollfd *f) {
    int d;
    if (p->connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        if (!(f[1].revents & (POLLOUT | POLLERR | POLLHUP))) return 1;
        if (getsockopt(p->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return 0;
        p->connecting = 0;
    }
    for (d = 0; d < 2; d++) {           /* read fd[d] into h[d] */
        half_t *h = &p->h[d];
        if ((f[d].revents & (POLLIN | POLLHUP | POLLERR)) && !h->eof && h->len < BUF) {
            ssize_t n = recv(p->fd[d], h->buf + h->len, BUF - h->len, 0);
            if (n > 0) h->len += (size_t)n;
            else if (n == 0) h->eof = 1;
            else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return 0;
        }
    }
    for (d = 0; d < 2; d++) {           /* write h[d] to fd[1-d] */
        half_t *h = &p->h[d];
        if (h->len > 0) {
            ssize_t n = send(p->fd[1 - d], h->buf, h->len, MSG_NOSIGNAL);
            if (n > 0) {
                memmove(h->buf, h->buf + n, h->len - (size_t)n);
                h->len -= (size_t)n;
            } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return 0;
            }
        }
        if (h->eof && h->len == 0) {
            if (p->h[1 - d].eof && p->h[1 - d].len == 0) return 0;
            shutdown(p->fd[1 - d], SHUT_WR);
        }
    }
    return 1;
}

int main(int argc, char **argv) {
    struct sigaction sa;
    const char *pidfile = NULL;
    int i;
    static struct pollfd fds[MAX_LINKS + 2 * MAX_PAIRS];
    static int owner[MAX_LINKS + 2 * MAX_PAIRS];
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) { pidfile = argv[++i]; continue; }
        if (nlinks == MAX_LINKS || !parse_link(argv[i], &links[nlinks])) {
            fprintf(stderr, "tcp_proxy: bad link '%s' (LISTEN_PORT:TARGET_HOST:TARGET_PORT)\n", argv[i]);
            return 2;
        }
        nlinks++;
    }
    if (nlinks == 0) {
        fprintf(stderr, "usage: tcp_proxy [-p PIDFILE] LISTEN_PORT:TARGET_HOST:TARGET_PORT...\n");
        return 2;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (f) { fprintf(f, "%ld\n", (long)getpid()); fclose(f); }
    }
    printf("ready\n");
    fflush(stdout);
    fclose(stdout);
    while (!stop) {
        int n = 0;
        if (!frozen) {
            for (i = 0; i < nlinks; i++) {
                fds[n].fd = links[i].lfd;
                fds[n].events = POLLIN;
                owner[n++] = -1 - i;
            }
            for (i = 0; i < MAX_PAIRS; i++) {
                pair_t *p = pairs[i];
                int d;
                if (!p) continue;
                for (d = 0; d < 2; d++) {
                    short ev = 0;
                    if (d == 1 && p->connecting) ev = POLLOUT;
                    else {
                        if (!p->h[d].eof && p->h[d].len < BUF) ev |= POLLIN;
                        if (p->h[1 - d].len > 0) ev |= POLLOUT;
                    }
                    fds[n].fd = p->fd[d];
                    fds[n].events = ev;
                    owner[n++] = i;
                }
            }
        }
        /* frozen: poll nothing, just sleep until a signal (or 100 ms) */
        if (poll(fds, (nfds_t)n, frozen ? 100 : 1000) < 0 && errno != EINTR) break;
        if (frozen) continue;
        for (i = 0; i < n; i++) {
            if (owner[i] < 0) {
                if (fds[i].revents & POLLIN) do_accept(&links[-1 - owner[i]]);
                continue;
            }
            if (i + 1 < n && owner[i + 1] == owner[i] && pairs[owner[i]]) {
                if (!pump(pairs[owner[i]], &fds[i])) pair_close(owner[i]);
                i++;
            }
        }
    }
    for (i = 0; i < MAX_PAIRS; i++) pair_close(i);
    for (i = 0; i < nlinks; i++) close(links[i].lfd);
    return 0;
}
