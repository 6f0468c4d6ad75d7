/* zk_mntr.h -- what a ZooKeeper server says it did, from its "mntr"
   four-letter answer: packets received, and the watches fired (the sum of
   the zk_sum_node_*_watch_count summaries). Shared by tests/test_zk.c and
   bench/scale.h (the cost-per-hand-off test and figures of issue #15).
   Needs <sys/socket.h>, <netinet/in.h>, <arpa/inet.h>, <unistd.h>,
   <stdio.h>, <stdlib.h>, <string.h>. */
#ifndef SIMBA_TESTS_ZK_MNTR_H
#define SIMBA_TESTS_ZK_MNTR_H

/* Asks host:port (numeric IPv4). Returns the number of watch summaries
   found (0..4) with *packets and *watches set, or -1 when there is no
   answer or no packet count in it. */
static int zk_mntr_read(const char *host, int port, double *packets, double *watches) {
    static const char *const keys[] = { "zk_sum_node_created_watch_count", "zk_sum_node_deleted_watch_count",
                                        "zk_sum_node_changed_watch_count", "zk_sum_node_children_watch_count" };
    struct sockaddr_in a;
    char buf[16384];
    const char *p;
    size_t n = 0;
    int fd, k, found = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) return -1;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, "mntr", 4) != 4) { close(fd); return -1; }
    for (;;) {
        ssize_t m = read(fd, buf + n, sizeof buf - 1 - n);
        if (m <= 0) break;
        n += (size_t)m;
        if (n >= sizeof buf - 1) break;
    }
    close(fd);
    buf[n] = 0;
    p = strstr(buf, "zk_packets_received\t");
    if (!p) return -1;
    *packets = atof(p + strlen("zk_packets_received\t"));
    *watches = 0;
    for (k = 0; k < 4; k++) {
        char key[80];
        snprintf(key, sizeof key, "%s\t", keys[k]);
        p = strstr(buf, key);
        if (p) { *watches += atof(p + strlen(key)); found++; }
    }
    return found;
}

#endif
