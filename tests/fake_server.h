/* tests/fake_server.h -- the listening half of the tests' fake servers (a
   fake Redis, a fake sentinel, a fake cluster node): a TCP socket on
   127.0.0.1 with a free port, and a child process in its own process group
   (kill(-pid) ends it and every helper it forked) that serves it.

       int lfd;
       pid_t pid = fake_listen_fork(&port, &lfd);
       if (pid != 0) return pid;        parent: the child's pid, or -1
       ... the child: accept(lfd) and answer, then _exit ...

   Included by the test files that need it, after their socket headers. */
#ifndef SIMBA_TESTS_FAKE_SERVER_H
#define SIMBA_TESTS_FAKE_SERVER_H

static pid_t fake_listen_fork(int *port_out, int *lfd_out) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    pid_t pid;
    if (lfd < 0) return -1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 16) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &len) != 0) { close(lfd); return -1; }
    *port_out = ntohs(sa.sin_port);
    fflush(stdout);                     /* the child must not print our buffered output again */
    pid = fork();
    if (pid < 0) { close(lfd); return -1; }
    if (pid > 0) { close(lfd); return pid; }
    setpgid(0, 0);
    *lfd_out = lfd;
    return 0;
}

/* A fake server that serves each connection in a child of its own:
   serve(fd, arg) talks to one client; the child then exits. Returns what
   fake_listen_fork returns to the parent (the pid, or -1). */
static H_UNUSED pid_t fake_serve_each(int *port_out, void (*serve)(int fd, const void *arg), const void *arg) {
    int lfd;
    pid_t pid = fake_listen_fork(port_out, &lfd);
    if (pid != 0) return pid;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) { if (errno == EINTR) continue; _exit(0); }
        if (fork() == 0) {
            close(lfd);
            serve(fd, arg);
            _exit(0);
        }
        close(fd);
    }
}

#endif
