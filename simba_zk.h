/*
    simba_zk.h -- the ZooKeeper backend of simba (libzookeeper_st, 3.5+).

    Project: simba. License: MIT (see simba.h).

    Do this:
        #define SIMBA_IMPLEMENTATION
        #include "simba.h"
        #define SIMBA_ZK_IMPLEMENTATION
        #include "simba_zk.h"
    in *one* C or C++ file; elsewhere include both without the defines.
    Link with -lzookeeper_st (the single-threaded client: simba drives it
    from your poll loop; never link the _mt library into the same program).

    CONTENTS (every section starts with a comment ">>name", grep for it;
    --------  a sub-section with ">>name.sub", named as in docs/backends.md)
    Declarations:
        >>options       simba_zk_desc: what the caller sets
        >>constructor   simba_zk(), simba_zk_from_url()
        >>stats         struct simba_zk_stats and simba_zk_stats()
    Implementation (SIMBA_ZK_IMPLEMENTATION; guard SIMBA_ZK_IMPL_INCLUDED):
        >>internals     includes, limits, private types, memory, names, errors,
                        children, the entry cache, calls, ops
        >>connection    the ZooKeeper handle: connect, session events, reconnect
                        with backoff, reset
        >>session       OPEN, KEEPALIVE, CLOSE
        >>locks         .calls .rule (the grant rule on a read queue) .enqueue
                        .poll .release .admin .dispatch
        >>wakeups       .arm (the baton, marks) .fire (watch events, one read per
                        resource per event) .deliver (grants to the core, the
                        mutex hand-off from a watch)
        >>stats         simba_zk_stats()
        >>vtable        attach, submit, pollfds, deadline_ms, process, reset, destroy
        >>constructor   desc checks, allocation, simba_zk_from_url()

    WALKTHROUGH
    ===========
        simba *s = simba_create(&(simba_desc){
            .backend = simba_zk(&(simba_zk_desc){ .hosts = "127.0.0.1:2181" }),
            .tenant = "billing" }, NULL);
        // then the loop of simba.h: simba_pollfds / poll / simba_tick

    OPTIONS (simba_zk_desc)
    =======================
    hosts               required: "host:port,host:port,..." -- an ensemble's
                        client addresses, optionally followed by "/chroot" (which
                        must exist). A host name (localhost too) is resolved once,
                        in simba_zk() (blocking, the host-name policy of
                        docs/design.md), so no reconnect inside simba_tick()
                        waits for DNS; a name that does not resolve is
                        SIMBA_EINVAL naming `hosts`.
    base_path           where simba keeps its nodes; default "/simba". Absolute,
                        no trailing '/', at most 256 bytes.
    session_timeout_ms  the ZooKeeper session timeout asked for; default (and
                        minimum) the core's lease, simba_lease_ms(s) = ttl +
                        transition, read at attach. If the server negotiates a
                        shorter one (its maxSessionTimeout is below the lease),
                        opening a session fails with SIMBA_EINVAL: the server
                        would expire holds that the client still believes valid.
    digest              "user:password": sent with zoo_add_auth("digest") on
                        every connection. Then every node simba creates carries
                        CREATOR_ALL_ACL (only this user may read, change or
                        delete a tenant's resources and entries) and the base
                        path world:anyone READ|CREATE plus the creator's ALL.
                        Without it, nodes are created with OPEN_ACL_UNSAFE.
    allow_hostnames     leave names to the client library, which resolves them
                        (blocking) at every connect, e.g. to follow DNS changes.
    zk_log_level        libzookeeper's own log (to stderr): 0 silent (default),
                        1 error .. 4 debug. The level is process-wide in the
                        library (zoo_set_debug_level).
    allocator           for the backend's memory (not libzookeeper's own);
                        zero means malloc/free; only one of alloc/free set is
                        SIMBA_EINVAL (a user alloc paired with libc free would
                        corrupt the heap).

    A bad desc makes simba_create fail with SIMBA_EINVAL, and
    simba_create's simba_error names the field ("simba_zk_desc.hosts: ...").

    STATS
    =====
    simba_zk_stats(backend, &st) (struct simba_zk_stats): connected,
    reconnects, ops_sent, ops_completed, wakes (the same first fields on every
    backend), then the ZooKeeper session (id, password, negotiated timeout,
    server), the handles opened and the hand-offs granted from a watch.

    NODE LAYOUT
    ===========
        <base>                                   persistent
        <base>/<tenant>                          container
        <base>/<tenant>/<resource>               persistent, data = capacity ("3")
        <base>/<tenant>/<resource>/<w>_<session>_<request>_<seq>
                                                 ephemeral sequential entry
    Tenants and resource names are percent-encoded: bytes other than
    [A-Za-z0-9_-] become %XX (upper-case hex), so "a/b", ".", "..",
    "zookeeper", "%" and bytes >= 0x80 all map to one safe node name each, and
    two names never share one (the encoding is injective). <w> is the weight
    in decimal (0 = exclusive). Session and request ids never contain '_'.

    Queue order is the sequence number the server appends (creation order in
    the resource). One getChildren gives the whole queue; the grant rule of
    simba.h (prefix sum of effective weights <= capacity) is computed from it.
    The fence of a grant is the entry's czxid: globally monotonic, persisted,
    so it never goes backwards, not even across restarts or a new leader.

    A multi-resource request creates its entries in every resource with one
    zoo_amulti (atomic), so every pair of requests is ordered the same way in
    every queue.

    A resource node and its capacity (the node's data) stay until
    simba_delete removes them, however long the resource sits empty: the one
    resource lifetime rule of every backend. Tenant nodes are containers: the
    server deletes one some time after its last resource went
    (znode.container.checkIntervalMs, default 60 s). Resource nodes made by
    an older simba as containers keep that kind until they are reaped or
    deleted; the next request then recreates them persistent.

    SESSIONS
    ========
    The ZooKeeper session is the simba session. OPEN maps the core's session
    id to the connected ZooKeeper session (a different simba session on an
    already used ZooKeeper session closes it and opens a fresh one first, so
    no entry of a dropped simba session survives). KEEPALIVE is a sync and an
    exists() of the base path, one round trip that proves the session alive
    and the leader reached (the client library also pings every timeout/3).
    While the client library reconnects (ZOO_CONNECTING_STATE) the backend
    reports disconnected: holds then follow the core's local safety rule. (libzookeeper 3.8 sometimes reconnects
    without saying "connecting": a "connected" while connected is taken as a
    drop too, see docs/zookeeper.md.) A reconnect within the session timeout keeps
    the session and every entry. An expired session answers SIMBA_ESESSION
    (LOST for every hold) and the backend opens a new ZooKeeper handle for the
    next OPEN. Before a grant is reported, the entry's ephemeralOwner must be
    the current ZooKeeper session (an entry left by an older session is never
    claimed -- the Curator double-leader bug).

    simba_destroy() abandons the ZooKeeper session without closing it, so its
    entries live until the server expires it, as the core documents for every
    backend. CLOSE (the core drops a session) closes the ZooKeeper session:
    the server deletes its entries at once.

    WAKE-UPS
    ========
    A waiter on a resource of capacity 1 watches only its predecessor (no
    herd). With capacity > 1, the baton: the first waiter not granted watches
    the children list, every waiter behind it its predecessor's entry, and an
    entry granted with someone behind it sets its data (a mark) so that only
    the next in line wakes. Every read of a resource also watches its data
    (capacity changes, deletion). An event concerns only the waiters whose
    watch it fired; one read of the resource answers all of them, and grants
    go to the core with their fence (simba_backend_granted with the request id):
    no re-poll per handle. The core falls back on its recheck period if a
    watch is ever lost.

    The mutex hand-off needs no read: when a waiter's last read showed
    exactly one entry ahead of it (capacity 1, one resource), nobody can get
    ahead of it any more (sequence numbers only grow), so that entry's
    NodeDeleted alone makes it the head, and the grant is pushed to the core from
    what the backend knows (fence = its entry's czxid from create2). It is
    a hand-off of one write plus one notification. The waiter further back
    needs no read either: an entry granted at capacity 1 with someone
    behind it marks itself "h" (it was the head: nobody can get ahead of it
    again), and its successor, whose data watch fires, reads that mark back
    while re-arming the watch and takes the marked entry as its predecessor:
    each hand-off then costs a delete, a mark, an exists per waiter (its
    own entry's watch) and two notifications, and no read of the queue
    however long it is. What could
    make such a grant wrong is heard first, because ZooKeeper delivers one
    client's events in the order the changes happened: DELETE's multi
    changes the resource node before it deletes anything, which fires the
    data watch of every reader;
    that change (or a capacity change) or any session event (events
    replayed after a reconnect come in no useful order) makes the waiter
    read again. Our own entry deleted by another client is heard first too:
    a mutex waiter watches its own entry (simba__zk_watch_self), so the
    grant is told on the predecessor's NodeDeleted itself, with no read (a
    delete and one notification per hand-off; the watch is removed before
    we mark or delete the entry ourselves, so it never fires on us). Until
    that watch is known set (and after any session event), the grant waits
    for an exists of our entry instead (simba__zk_confirm_head).

    LIMITS
    ======
    - The sequence number of a resource node is a signed 32-bit counter: after
      2^31 entries in one resource node's lifetime the order breaks.
    - Reads can be served by a lagging follower; they can only be late, never
      show a grant that did not happen, because a client sees its own writes.
      Not a write whose answer was lost with its connection: the reads that
      look for one (a retried ENQUEUE: is our entry there? a RELEASE that
      does not know its entry's name) go behind a sync sent on the current
      connection (the keepalive's, or their own), or a member that has not
      applied that create yet would hide it, and the retry would leave a
      second entry nobody releases (docs/zookeeper.md, "A lost answer").
*/
#ifndef SIMBA_INCLUDED
#error "include simba.h before simba_zk.h"
#endif

#ifndef SIMBA_ZK_INCLUDED
#define SIMBA_ZK_INCLUDED

#ifdef __cplusplus
extern "C" {
#endif

/*>>options: what the caller sets (OPTIONS above) */
typedef struct simba_zk_desc {
    const char *hosts;          /* "127.0.0.1:2181,127.0.0.1:2182[/chroot]" (required) */
    const char *base_path;      /* default "/simba" */
    int session_timeout_ms;     /* default and minimum: simba_lease_ms(s) at attach */
    const char *digest;         /* "user:password" for zoo_add_auth("digest"); NULL = none */
    int allow_hostnames;        /* names resolved by the client library at each connect (blocking),
                                   not once by simba_zk() */
    int zk_log_level;           /* libzookeeper's stderr log: 0 silent (default), 1..4 */
    simba_allocator allocator;  /* zero: malloc/free */
} simba_zk_desc;

/*>>constructor: simba_zk and simba_zk_from_url */

/* simba_zk: a ZooKeeper backend for simba_desc.backend. simba owns it from
   simba_create on. A bad desc (no hosts, a host name that does not resolve,
   a bad base path or digest, half an allocator) makes simba_create fail
   with SIMBA_EINVAL and simba_create's simba_error names the field
   ("simba_zk_desc.hosts: ..."); no memory makes it fail with SIMBA_ENOMEM. */
SIMBADEF simba_backend simba_zk(const simba_zk_desc *desc);

/* ---- connection URLs ----
   simba_zk_from_url: the backend for a parsed URL (simba_url_parse in
   simba_url.h) of scheme zk:
       zk://[user:password@]host1[:port1],host2[:port2][/chroot][?parameters]
   (default port 2181; user:password becomes the digest credential).
   parameters: base_path, session_timeout (duration), allow_hostnames (0/1),
   log_level (0..4), plus password_env / password_file (simba_url.h). Read the
   client options (simba_url_client_options) first: a parameter nobody read
   is an error here. */
SIMBADEF int simba_zk_from_url(simba_url *u, simba_backend *out, simba_url_error *err);

/*>>stats: what the backend reports about itself */

/* What simba_zk_stats() reports (the first five fields are the same on every
   backend). */
struct simba_zk_stats {
    int connected;              /* 1 while the session is usable (what the core was told) */
    int64_t reconnects;         /* connections made after the first (same session or a new one) */
    int64_t ops_sent;           /* ops the backend accepted from the core */
    int64_t ops_completed;      /* replies it gave (ops_sent - ops_completed are in flight) */
    int64_t wakes;              /* simba_backend_changed calls (watches that fired) */
    int64_t session_id;         /* the ZooKeeper session id, 0 before the first connect */
    char password[16];          /* its password (sensitive: for tests and admin tools) */
    int timeout_ms;             /* the negotiated session timeout (0 if not connected) */
    char server[64];            /* "ip:port" of the server connected to, "" if none */
    int handles;                /* ZooKeeper handles opened so far (one more per new session) */
    int64_t watch_grants;       /* mutex hand-offs granted from the predecessor's deletion
                                   alone, with no read of the queue (see WAKE-UPS) */
    int64_t unread_grants;      /* of those, told on the deletion event itself: our own
                                   entry was watched, so no exists confirmed it */
    int64_t names_read;         /* children names received in queue reads: what a
                                   hand-off costs in bytes grows with it */
};

/* simba_zk_stats: fills *out for a backend made by simba_zk (keep a copy of
   the simba_backend value; it stays valid until simba_destroy). Returns
   SIMBA_OK, or SIMBA_EINVAL if b is not a ZooKeeper backend or out is NULL. */
SIMBADEF int simba_zk_stats(simba_backend b, struct simba_zk_stats *out);
#ifdef __cplusplus
}
#endif
#endif /* SIMBA_ZK_INCLUDED */

/* ======================================================================== */
#ifdef SIMBA_ZK_IMPLEMENTATION
#ifndef SIMBA_ZK_IMPL_INCLUDED
#define SIMBA_ZK_IMPL_INCLUDED

/*>>internals: includes, limits, private types, memory, names, errors, children, the entry cache, calls, ops */

/* <zookeeper/zookeeper.h> rather than <zookeeper.h>: found through the system
   include path, its C11 anonymous union does not trip -pedantic. */
#include <zookeeper/zookeeper.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SIMBA__ZK_BASE_MAX = 256,
    SIMBA__ZK_PATH_MAX = 2048,       /* base + tenant + resource (3x encoded) + entry */
    SIMBA__ZK_RETRIES = 4,           /* resource node vanished under us (deleted meanwhile) */
    SIMBA__ZK_MAGIC = 0x5a4b4245     /* "ZKBE" */
};

/* What one outstanding zoo_a* call is for. */
enum {
    SIMBA__ZK_C_GET = 1,      /* aget resource node: capacity (+ data watch) */
    SIMBA__ZK_C_KIDS,         /* aget_children resource node: the queue */
    SIMBA__ZK_C_PARENT,       /* acreate of a parent node (exists = fine) */
    SIMBA__ZK_C_CREATE,       /* acreate2 of our entry (single resource) */
    SIMBA__ZK_C_MCREATE,      /* amulti of creates (multi-resource) */
    SIMBA__ZK_C_STAT,         /* aexists of an entry: czxid, ephemeralOwner */
    SIMBA__ZK_C_DELETE,       /* adelete of an entry (absent = fine) */
    SIMBA__ZK_C_PING,         /* aexists of the base path: session round trip */
    SIMBA__ZK_C_SET,          /* aset of the capacity */
    SIMBA__ZK_C_MDELETE,      /* amulti of deletes (DELETE of a resource) */
    SIMBA__ZK_C_WATCH_PRED,   /* awget of the predecessor: gone = wake */
    SIMBA__ZK_C_WATCH_KIDS,   /* awget_children: changed since our read = wake */
    SIMBA__ZK_C_FORGET,       /* adelete nobody waits for (duplicates, undo) */
    SIMBA__ZK_C_AUTH,         /* zoo_add_auth */
    SIMBA__ZK_C_SYNC,         /* async (sync) of the base path: the keepalive reached the leader */
    SIMBA__ZK_C_OWNER,        /* aexists of a child named like ours: whose is it? */
    SIMBA__ZK_C_MARK,         /* aset of our granted entry: its successor's data watch fires */
    SIMBA__ZK_C_CONFIRM,      /* aexists of our entry, its pred gone: ZOK = it exists, the grant
                                 holds (name = resource path, path = our node; simba__zk_confirm_head) */
    SIMBA__ZK_C_SELF          /* awexists of our own waiting entry: ZOK = there, and its deletion
                                 will be heard before any later event (simba__zk_watch_self) */
};

/* Phases of an operation: each phase is one flight of pipelined calls. */
enum {
    SIMBA__ZK_P_START = 0,
    SIMBA__ZK_P_READ,         /* GET + KIDS of every resource */
    SIMBA__ZK_P_WRITE,        /* parents? + create(s) + GET + KIDS */
    SIMBA__ZK_P_STAT,         /* STAT of granted entries without a known czxid */
    SIMBA__ZK_P_UNDO,         /* try_only lost the race: delete what we created */
    SIMBA__ZK_P_DELETE,       /* RELEASE: delete our entries */
    SIMBA__ZK_P_PING,
    SIMBA__ZK_P_SET,
    SIMBA__ZK_P_CREATE_RES,   /* SET_CAPACITY of a missing resource */
    SIMBA__ZK_P_MDELETE,
    SIMBA__ZK_P_OWNERS        /* STAT of children named like ours whose owner we do not know */
};

/* The call index of the base path's first component ("/simba"); -1 marks
   the other parents above the resources. */
enum { SIMBA__ZK_TOP = -2 };

/* One child of a resource node, parsed. */
typedef struct simba__zk_kid {
    char *node;               /* the child's name as the server has it */
    char *session;            /* parsed, NUL-terminated (same allocation as node) */
    char *request;
    int weight;
    long long seq;
    int64_t owner, czxid;     /* named like ours: from a stat; owner 0 unknown, -1 gone */
} simba__zk_kid;

/* One resource of an operation. */
typedef struct simba__zk_rs {
    char *name;               /* the simba name */
    char *path;               /* <base>/<tenant>/<encoded name> */
    int want_capacity;        /* capacity if this op creates the resource */
    int weight;
    int exists;               /* the resource node was there at the last read */
    int capacity;             /* stored capacity (want_capacity if missing) */
    int nkids;
    simba__zk_kid *kids;      /* sorted by seq */
    char *mine;               /* our entry's child name, NULL unknown */
    int64_t czxid, owner;     /* of our entry: fence and ephemeralOwner, 0 unknown */
    int pos;                  /* index of our entry in kids, -1 absent */
    int granted;
    int was_granted;          /* this entry (mine) was granted before (from the cache) */
} simba__zk_rs;

typedef struct simba__zk simba__zk;

typedef struct simba__zk_op {
    struct simba__zk_op *next, *prev;
    simba__zk *zk;
    uint64_t id;
    simba_op_kind kind;
    char *tenant, *session, *request;
    int try_only, lease_ms;
    int nres;
    simba__zk_rs res[SIMBA_MAX_RESOURCES];
    int phase, pending, attempts;
    int created;              /* this op created our entries */
    int parent_refused;       /* creating the base path or the tenant node: ZNOAUTH */
    int fast;                 /* skipped the read before creating */
    unsigned epoch;           /* zk->epoch when a read that decides about our own writes went out
                                 (simba__zk_sync_before_read) */
    long long req_n;          /* n of "<session>~<n>", -1 for other ids */
    int internal;             /* a refresh of >>wakeups: no reply to the core */
    unsigned batch;           /* zk->batch when its reads went out */
    struct simba__zk_op *followers, *next_follower;   /* POLLs answered from this op's read */
    int status;
    char message[200];
    /* the answer */
    int granted, ahead, held, capacity;
    int64_t fence[SIMBA_MAX_RESOURCES];
    char owner[SIMBA_MAX_SESSION + 1];
    int nentries;
    simba_holder *entries;
} simba__zk_op;

/* One outstanding zoo_a* call. The library owns `data` = this until its
   completion runs; calls of a closed handle are freed by us. */
typedef struct simba__zk_call {
    struct simba__zk_call *next, *prev;
    simba__zk *zk;
    simba__zk_op *op;         /* NULL: nobody waits (watch arming, forgotten deletes) */
    int step, index;
    unsigned gen;             /* the handle generation it was issued on */
    unsigned epoch;           /* SELF: zk->epoch when it was issued */
    char *name;               /* WATCH_*: the resource to wake */
    char *path;               /* WATCH_*: the watched node, to replay its event if it already happened */
    int nkids;                /* WATCH_KIDS: the queue we decided on */
    uint64_t kids_hash;
    int nresults;
    zoo_op_result_t *results; /* MCREATE/MDELETE */
    char *bufs;               /* MCREATE: created paths */
    int bufsize;
} simba__zk_call;

/* The entry cache's index: a client with hundreds of handles on
   one resource finds the entries an op or an event concerns by key, never
   by a walk of them all. Each entry is indexed under four keys
   (simba__zk_mine_keys): its request, its own entry, the entry it watches,
   its pred. Chained buckets, and the links live in the entry, so indexing
   allocates nothing but a bigger bucket array (with no memory for it the
   chains grow longer, and lookups stay right). A key only finds; the
   strings decide. */
enum { SIMBA__ZK_K_REQ, SIMBA__ZK_K_OWN, SIMBA__ZK_K_WATCH, SIMBA__ZK_K_PRED, SIMBA__ZK_KINDS };

struct simba__zk_mine;
typedef struct simba__zk_link {
    struct simba__zk_link *next;   /* in its bucket */
    struct simba__zk_mine *m;
    uint32_t key;
    int kind, on;                  /* on: in the index */
} simba__zk_link;

/* Our own entries, so a release needs no read and a re-poll no stat. */
typedef struct simba__zk_mine {
    struct simba__zk_mine *next, *prev;
    simba__zk_link ln[SIMBA__ZK_KINDS];
    struct simba__zk_mine *due_next;   /* in zk->due (grant_due set), if on_due */
    int on_due;
    uint32_t path_key;        /* of path[0] (simba__zk_mine_on, before the strings) */
    int nres;
    int granted;              /* we answered granted: it stays granted until removed */
    int releasing;            /* a RELEASE of it runs: its own deletion is no news */
    int armed;                /* that watch is set and has not fired */
    int stale;                /* its watch fired: the next refresh of the resource evaluates it */
    int grant_due;            /* granted, to be told to the core: 1 from a read, 2 from pred_gone
                                 (confirm it first), 3 confirmed (simba__zk_confirm_head) */
    char *request, *session;
    char *path[SIMBA_MAX_RESOURCES];   /* the resource paths */
    char *node[SIMBA_MAX_RESOURCES];   /* our child in each */
    int64_t czxid[SIMBA_MAX_RESOURCES];
    int64_t owner;
    char *pred;               /* a mutex waiter: the only entry ahead at our last read, whose
                                 deletion alone grants us (NULL: unknown, read again) */
    int pred_gone;            /* its NodeDeleted arrived, nothing made us forget it since */
    /* a single-resource waiter's watch (>>wakeups): what it waits for, so that an
       event re-reads the resource once for every handle it concerns, and a
       re-poll re-arms nothing that is still armed */
    char *name;               /* the resource's simba name */
    char *watch;              /* the entry it watches ("" = the children list), NULL none */
    int watch_ver;            /* the watched entry's data version already reacted to (its mark) */
    int cap1;                 /* capacity 1 at our last read: a head mark on the entry we
                                 watch makes that entry our pred (simba__zk_probe_head) */
    int probe;                /* pred taken from a mark event, not usable until its data
                                 read back is the head mark (simba__zk_watch_answer) */
    int self;                 /* our watch on our own entry (simba__zk_watch_self): 0 none,
                                 1 asked, 2 set while the entry was there and not fired
                                 since, -1 the entry is gone */
    unsigned self_epoch;      /* zk->epoch when it was asked */
} simba__zk_mine;

typedef struct simba__zk_wake {
    struct simba__zk_wake *next;
    char *name;
} simba__zk_wake;

struct simba__zk {
    unsigned magic;
    simba *s;
    simba_allocator a;        /* the desc's (zero: malloc/free) */
    char *hosts, *base, *digest, *tenant_enc;
    int timeout_ms;           /* asked for */
    int lease_ms;
    int log_level;
    zhandle_t *zh;
    unsigned gen;             /* handle generation, +1 per zookeeper_init */
    int handles;
    int zstate;               /* last session state the watcher saw */
    int up;                   /* what we told the core */
    int dropped;              /* the watcher saw the link go down since the core was last told */
    int expired, auth_failed, close_wanted;
    int closing;              /* inside zookeeper_close: callbacks only free */
    int64_t zsid;             /* the connected session's id */
    char passwd[16];
    int negotiated;
    int warned_short;         /* the too short negotiated timeout was logged on this handle */
    int64_t reinit_at;        /* when to make a new handle (-1: not waiting) */
    int attempts;
    int64_t hold_until;       /* a connect failed: leave the library alone until then */
    int conn_attempts;        /* failed connects since the last CONNECTED */
    char session[SIMBA_MAX_SESSION + 1];   /* the simba session on zsid, "" none yet */
    int64_t resetting_until;  /* after reset(): down until the library noticed, at most this */
    char fast_session[SIMBA_MAX_SESSION + 1];
    long long fast_max_n;     /* highest n an ENQUEUE of fast_session was sent for */
    int parents_ok;           /* base and tenant seen to exist on this handle */
    int fd, interest;
    int64_t next_ms;
    simba__zk_call *calls;
    simba__zk_op *ops, *done, *done_tail;
    simba__zk_op *spare;          /* ops kept for reuse (simba__zk_op_new) */
    int nspare;
    simba__zk_link **ix;          /* the entry cache's index: ix_cap buckets (a power of 2) */
    size_t ix_cap, ix_n;
    struct simba__zk_mine *due;   /* entries whose grant_due is set */
    int nmulti;                   /* entries of several resources (never indexed by event) */
    simba__zk_mine *mine;
    int npred;                /* mine entries with pred set */
    unsigned epoch;           /* +1 per session event: a self watch asked before one is not trusted */
    int synced;               /* a sync went out since the last session event (simba__zk_sync_before_read) */
    int64_t watch_grants, unread_grants;
    int64_t connects;         /* CONNECTED events, every handle (reconnects = connects - 1) */
    int64_t ops_sent, ops_completed, wakes_sent;   /* simba_zk_stats */
    simba__zk_wake *wakes;
    simba__zk_wake *refreshes;   /* resources to read once for their stale waiters */
    int grants_due;              /* some mine has grant_due set */
    unsigned batch;              /* +1 per process(): reads of one batch saw the same events */
    int64_t refreshes_sent;
    int64_t names_read;
};

/*>>internals.memory: memory */

/*--- memory ---*/

/* One-line forwarders to the kit: memory follows the desc's allocator (zero
   means malloc/free); _alloc returns zeroed memory. */
static void *simba__zk_alloc(simba__zk *zk, size_t n) { return simba_allocator_alloc(&zk->a, n); }
static void simba__zk_free(simba__zk *zk, void *p) { simba_allocator_free(&zk->a, p); }
static char *simba__zk_strdup(simba__zk *zk, const char *s) { return simba_allocator_strdup(&zk->a, s); }

static int64_t simba__zk_now(simba__zk *zk) { return simba_now_ms(zk->s); }

/*>>internals.names: name encoding, ACLs */

/*--- name encoding ---*/

/* Bytes kept as they are; everything else becomes %XX. '.' is escaped so that
   "." and ".." can never appear as a node name. */
static int simba__zk_plain(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Appends the encoding of in to out (of cap bytes, at *len); 0 if it does not fit. */
static int simba__zk_encode(char *out, size_t cap, size_t *len, const char *in) {
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)in;
    for (; *p; p++) {
        if (simba__zk_plain(*p)) {
            if (*len + 1 >= cap) return 0;
            out[(*len)++] = (char)*p;
        } else {
            if (*len + 3 >= cap) return 0;
            out[(*len)++] = '%';
            out[(*len)++] = hex[*p >> 4];
            out[(*len)++] = hex[*p & 15];
        }
    }
    out[*len] = 0;
    return 1;
}

static int simba__zk_hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes n bytes of an encoded node name; 0 if it is not one of ours. */
static int simba__zk_decode(char *out, size_t cap, const char *in, size_t n) {
    size_t i, o = 0;
    for (i = 0; i < n; i++) {
        int c = (unsigned char)in[i];
        if (c == '%') {
            int hi, lo;
            if (i + 2 >= n) return 0;
            hi = simba__zk_hexval(in[i + 1]);
            lo = simba__zk_hexval(in[i + 2]);
            if (hi < 0 || lo < 0) return 0;
            c = hi * 16 + lo;
            i += 2;
        } else if (!simba__zk_plain((unsigned char)c)) {
            return 0;
        }
        if (o + 1 >= cap) return 0;
        out[o++] = (char)c;
    }
    out[o] = 0;
    return o > 0;
}

/* <base>/<enc tenant>/<enc name>, allocated; NULL if too long or no memory. */
static char *simba__zk_res_path(simba__zk *zk, const char *tenant, const char *name) {
    char buf[SIMBA__ZK_PATH_MAX];
    size_t len = (size_t)snprintf(buf, sizeof buf, "%s/", zk->base);
    if (len >= sizeof buf) return NULL;
    if (!simba__zk_encode(buf, sizeof buf, &len, tenant)) return NULL;
    if (len + 1 >= sizeof buf) return NULL;
    buf[len++] = '/';
    buf[len] = 0;
    if (!simba__zk_encode(buf, sizeof buf, &len, name)) return NULL;
    return simba__zk_strdup(zk, buf);
}

/*--- ACLs ---*/

static char simba__zk_s_world[] = "world", simba__zk_s_anyone[] = "anyone";
static char simba__zk_s_auth[] = "auth", simba__zk_s_empty[] = "";
/* READ|CREATE = 1|4 and ALL = 31 (the ZOO_PERM_* values; they are not
   constant expressions in C, so spelled out for a static initializer). */
static struct ACL simba__zk_base_acl_items[2] = {
    { 1 | 4, { simba__zk_s_world, simba__zk_s_anyone } },
    { 31, { simba__zk_s_auth, simba__zk_s_empty } }
};
static struct ACL_vector simba__zk_base_acl = { 2, simba__zk_base_acl_items };

/* The base path is shared by tenants of different users: anyone may create a
   tenant under it and read it; only its creator may change or delete it. */
static struct ACL_vector *simba__zk_acl_base(simba__zk *zk) {
    return zk->digest ? &simba__zk_base_acl : &ZOO_OPEN_ACL_UNSAFE;
}

/* Tenants, resources and entries: only the creating user. */
static struct ACL_vector *simba__zk_acl_own(simba__zk *zk) {
    return zk->digest ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
}

/*>>internals.errors: error mapping */

/*--- error mapping ---*/

/* A ZooKeeper error as a simba code for an op of `kind`. An expired session is
   SIMBA_ESESSION only where the op belongs to the session; admin ops just
   retry on the next session. */
static int simba__zk_status_of(int rc, simba_op_kind kind) {
    switch (rc) {
    case ZOK: return SIMBA_OK;
    case ZCONNECTIONLOSS: case ZOPERATIONTIMEOUT: case ZCLOSING: case ZINVALIDSTATE:
    case ZSESSIONMOVED: case ZTHROTTLEDOP:
        return SIMBA_EDISCONNECTED;
    case ZSESSIONEXPIRED:
        return (kind == SIMBA_OP_KEEPALIVE || kind == SIMBA_OP_ENQUEUE || kind == SIMBA_OP_POLL ||
                kind == SIMBA_OP_RELEASE) ? SIMBA_ESESSION : SIMBA_EDISCONNECTED;
    case ZNOAUTH: case ZAUTHFAILED: case ZINVALIDACL: case ZSESSIONCLOSEDREQUIRESASLAUTH:
        return SIMBA_EAUTH;
    case ZNONODE: return SIMBA_ENOTFOUND;
    case ZMARSHALLINGERROR: return SIMBA_ENOMEM;
    case ZBADARGUMENTS: return SIMBA_EINVAL;
    default: return SIMBA_EBACKEND;
    }
}

static void simba__zk_fail_words(simba__zk_op *op, int status, const char *words) {
    if (op->status != SIMBA_OK) return;          /* the first error tells the story */
    op->status = status;
    snprintf(op->message, sizeof op->message, "%s", words);
}

/* fmt takes two strings: arg, then the words of ZooKeeper's code rc */
static void simba__zk_fail(simba__zk_op *op, int status, const char *fmt, const char *arg, int rc) {
    char words[sizeof op->message];
    snprintf(words, sizeof words, fmt, arg ? arg : "", zerror(rc));
    simba__zk_fail_words(op, status, words);
}

static void simba__zk_oom(simba__zk_op *op) { simba__zk_fail_words(op, SIMBA_ENOMEM, "out of memory"); }

static void simba__zk_fail_rc(simba__zk_op *op, int rc, const char *what) {
    simba__zk_fail(op, simba__zk_status_of(rc, op->kind), "%s: %s", what, rc);
}

/* "A node is missing, retry" -- only if nothing worse happened first. A
   parent refused with ZNOAUTH (a tenant node squatted by another digest
   user) makes the entry's create fail with ZNONODE right after it: the
   refusal is the story, a retry would only repeat it (it did, 30,000
   requests in 5 s, and the core re-enqueues at once on SIMBA_ENOTFOUND). */
static void simba__zk_missing(simba__zk_op *op) {
    if (op->status != SIMBA_OK) return;
    if (op->parent_refused) {
        op->status = SIMBA_EAUTH;
        snprintf(op->message, sizeof op->message, "%s",
                 "the tenant node is missing and this user may not create it: "
                 "provision the tenant (docs/zookeeper.md, tenant isolation)");
        return;
    }
    op->status = SIMBA_ENOTFOUND;
}

/*>>internals.cache: the children of a resource node, the entry cache */

/*--- children of a resource node ---*/

static int simba__zk_parse_uint(const char *s, size_t n, long long max, long long *out) {
    size_t i;
    long long v = 0;
    if (n == 0 || n > 18) return 0;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max) return 0;
    *out = v;
    return 1;
}

/* "<w>_<session>_<request>_<seq>" into kid; 0 if the name is not an entry. */
static int simba__zk_parse_kid(simba__zk *zk, const char *node, simba__zk_kid *kid) {
    size_t n = strlen(node);
    char *copy = (char *)simba__zk_alloc(zk, 2 * n + 2), *parse, *u1, *u2, *u3;
    long long w, seq;
    int neg;
    memset(kid, 0, sizeof *kid);
    if (!copy) return -1;
    memcpy(copy, node, n + 1);
    parse = copy + n + 1;
    memcpy(parse, node, n + 1);
    kid->node = copy;
    u1 = strchr(parse, '_');
    u2 = u1 ? strchr(u1 + 1, '_') : NULL;
    u3 = strrchr(parse, '_');
    if (!u1 || !u2 || u3 == u2 || u2 == u1 + 1 || u3 == u2 + 1) return 0;
    *u1 = *u2 = *u3 = 0;
    if (!simba__zk_parse_uint(parse, (size_t)(u1 - parse), INT_MAX, &w)) return 0;
    neg = u3[1] == '-';
    if (!simba__zk_parse_uint(u3 + 1 + neg, strlen(u3 + 1 + neg), LLONG_MAX / 2, &seq)) return 0;
    if (strchr(u2 + 1, '_')) return 0;
    kid->weight = (int)w;
    kid->seq = neg ? -seq : seq;
    kid->session = u1 + 1;
    kid->request = u2 + 1;
    return 1;
}

static int simba__zk_kid_cmp(const void *a, const void *b) {
    long long x = ((const simba__zk_kid *)a)->seq, y = ((const simba__zk_kid *)b)->seq;
    return x < y ? -1 : x > y;
}

static void simba__zk_free_kids(simba__zk *zk, simba__zk_rs *r) {
    int i;
    for (i = 0; i < r->nkids; i++) simba__zk_free(zk, r->kids[i].node);
    simba__zk_free(zk, r->kids);
    r->kids = NULL;
    r->nkids = 0;
}

/* Copies and sorts a getChildren answer. Garbage in a resource node is an
   error (SIMBA_EPROTO), never guessed around. */
static void simba__zk_store_kids(simba__zk_op *op, simba__zk_rs *r, const struct String_vector *v) {
    simba__zk *zk = op->zk;
    int i, n = v ? v->count : 0;
    simba__zk_free_kids(zk, r);
    if (n <= 0) return;
    r->kids = (simba__zk_kid *)simba__zk_alloc(zk, sizeof(simba__zk_kid) * (size_t)n);
    if (!r->kids) { simba__zk_oom(op); return; }
    for (i = 0; i < n; i++) {
        int ok = simba__zk_parse_kid(zk, v->data[i], &r->kids[i]);
        r->nkids = i + 1;
        if (ok < 0) { simba__zk_oom(op); return; }
        if (ok == 0 && op->kind != SIMBA_OP_DELETE) {    /* DELETE clears junk too */
            op->status = SIMBA_EPROTO;
            snprintf(op->message, sizeof op->message, "node %.60s/%.80s is not a simba entry",
                     r->path, v->data[i]);
            return;
        }
    }
    qsort(r->kids, (size_t)r->nkids, sizeof(simba__zk_kid), simba__zk_kid_cmp);
}

/* FNV-1a of one child name. */
static uint64_t simba__zk_name_hash(const char *name) {
    const unsigned char *p = (const unsigned char *)name;
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++) { h ^= *p; h *= 1099511628211ull; }
    return h;
}

/* An order-independent digest of a children list (the sum of the names'
   hashes), to notice a change: of a getChildren answer, and of a read queue. */
static uint64_t simba__zk_kids_hash(const struct String_vector *v) {
    uint64_t sum = 0;
    int i;
    for (i = 0; v && i < v->count; i++) sum += simba__zk_name_hash(v->data[i]);
    return sum;
}

static uint64_t simba__zk_rs_hash(const simba__zk_rs *r) {
    uint64_t sum = 0;
    int i;
    for (i = 0; i < r->nkids; i++) sum += simba__zk_name_hash(r->kids[i].node);
    return sum;
}

/* The capacity in a resource node's data: decimal 1..INT_MAX, nothing else. */
static int simba__zk_parse_capacity(const char *v, int len, int *out) {
    long long c;
    if (!v || len <= 0 || !simba__zk_parse_uint(v, (size_t)len, INT_MAX, &c) || c < 1) return 0;
    *out = (int)c;
    return 1;
}

/*--- the entry cache ---*/

/* The key of a cache string (FNV-1a, 32 bits): the first n bytes of a, then,
   with b, "/" and b. So the key of an event's path "<resource>/<node>" is
   the key of (resource, node), computed from the path alone. */
static uint32_t simba__zk_key(const char *a, size_t n, const char *b) {
    const unsigned char *p = (const unsigned char *)a;
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; a && i < n; i++) { h ^= p[i]; h *= 16777619u; }
    if (!b) return h;
    h ^= '/';
    h *= 16777619u;
    for (p = (const unsigned char *)b; *p; p++) { h ^= *p; h *= 16777619u; }
    return h;
}

static uint32_t simba__zk_entry_key(const char *respath, const char *node) {
    return respath && node ? simba__zk_key(respath, strlen(respath), node) : 0;
}

/* The bucket array starts at this many buckets (allocated with the
   backend, so the index always exists) and doubles as entries come. */
enum { SIMBA__ZK_IX_MIN = 64 };

static void simba__zk_ix_grow(simba__zk *zk) {
    size_t cap = zk->ix_cap * 2, i;
    simba__zk_link **b = (simba__zk_link **)simba__zk_alloc(zk, cap * sizeof *b);
    if (!b) return;                               /* longer chains, still right */
    for (i = 0; i < zk->ix_cap; i++)
        while (zk->ix[i]) {
            simba__zk_link *l = zk->ix[i];
            zk->ix[i] = l->next;
            l->next = b[l->key & (cap - 1)];
            b[l->key & (cap - 1)] = l;
        }
    simba__zk_free(zk, zk->ix);
    zk->ix = b;
    zk->ix_cap = cap;
}

static void simba__zk_ix_del(simba__zk *zk, simba__zk_link *l) {
    simba__zk_link **pp;
    if (!l->on) return;
    for (pp = &zk->ix[l->key & (zk->ix_cap - 1)]; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    l->next = NULL;
    l->on = 0;
    zk->ix_n--;
}

static void simba__zk_ix_put(simba__zk *zk, simba__zk_mine *m, int kind, uint32_t key) {
    simba__zk_link *l = &m->ln[kind];
    simba__zk_ix_del(zk, l);
    if (zk->ix_n >= zk->ix_cap) simba__zk_ix_grow(zk);
    l->m = m;
    l->kind = kind;
    l->key = key;
    l->next = zk->ix[key & (zk->ix_cap - 1)];
    zk->ix[key & (zk->ix_cap - 1)] = l;
    l->on = 1;
    zk->ix_n++;
}

/* The first link of (kind, key) from l on in its chain. */
static simba__zk_link *simba__zk_ix_match(simba__zk_link *l, int kind, uint32_t key) {
    while (l && (l->kind != kind || l->key != key)) l = l->next;
    return l;
}

static simba__zk_link *simba__zk_ix_first(const simba__zk *zk, int kind, uint32_t key) {
    return simba__zk_ix_match(zk->ix[key & (zk->ix_cap - 1)], kind, key);
}

/* Up to max entries indexed under (kind, key), for a caller that changes
   entries (and so the index) while it goes through them. Returns how many
   there are; more than max: the caller walks them all instead. */
static int simba__zk_ix_collect(const simba__zk *zk, int kind, uint32_t key, simba__zk_mine **out, int n, int max) {
    simba__zk_link *l;
    for (l = simba__zk_ix_first(zk, kind, key); l; l = simba__zk_ix_match(l->next, kind, key)) {
        int i, seen = 0;
        for (i = 0; i < n && i < max; i++) seen |= out[i] == l->m;
        if (seen) continue;
        if (n < max) out[n] = l->m;
        n++;
    }
    return n;
}

/* m's keys, after any of its strings changed: the one place that keeps
   the index in step with the strings (an entry without the string is not
   indexed under that kind). */
static void simba__zk_mine_keys(simba__zk *zk, simba__zk_mine *m) {
    const char *p = m->path[0];
    int k;
    for (k = 0; k < SIMBA__ZK_KINDS; k++) simba__zk_ix_del(zk, &m->ln[k]);
    m->path_key = p ? simba__zk_key(p, strlen(p), NULL) : 0;
    if (m->request && m->session)
        simba__zk_ix_put(zk, m, SIMBA__ZK_K_REQ, simba__zk_key(m->request, strlen(m->request), m->session));
    if (p && m->node[0]) simba__zk_ix_put(zk, m, SIMBA__ZK_K_OWN, simba__zk_entry_key(p, m->node[0]));
    if (p && m->watch) simba__zk_ix_put(zk, m, SIMBA__ZK_K_WATCH, simba__zk_entry_key(p, m->watch));
    if (p && m->pred) simba__zk_ix_put(zk, m, SIMBA__ZK_K_PRED, simba__zk_entry_key(p, m->pred));
}

static simba__zk_mine *simba__zk_mine_find(simba__zk *zk, const char *request, const char *session) {
    uint32_t key = simba__zk_key(request, strlen(request), session);
    simba__zk_link *l;
    for (l = simba__zk_ix_first(zk, SIMBA__ZK_K_REQ, key); l; l = simba__zk_ix_match(l->next, SIMBA__ZK_K_REQ, key))
        if (strcmp(l->m->request, request) == 0 && strcmp(l->m->session, session) == 0) return l->m;
    return NULL;
}

/* grant_due set: the entry goes on the list simba__zk_deliver_grants takes. */
static void simba__zk_mine_due(simba__zk *zk, simba__zk_mine *m, int due) {
    m->grant_due = due;
    zk->grants_due = 1;
    if (m->on_due) return;
    m->on_due = 1;
    m->due_next = zk->due;
    zk->due = m;
}

static void simba__zk_mine_undue(simba__zk *zk, simba__zk_mine *m) {
    simba__zk_mine **pp;
    if (!m->on_due) return;
    for (pp = &zk->due; *pp; pp = &(*pp)->due_next)
        if (*pp == m) {
            *pp = m->due_next;
            break;
        }
    m->on_due = 0;
    m->due_next = NULL;
}

/* The predecessor a waiter knew is no longer enough to grant it. */
static void simba__zk_forget_pred(simba__zk *zk, simba__zk_mine *m) {
    if (!m->pred) return;
    simba__zk_free(zk, m->pred);
    m->pred = NULL;
    simba__zk_ix_del(zk, &m->ln[SIMBA__ZK_K_PRED]);
    m->pred_gone = 0;
    m->probe = 0;
    if (m->grant_due == 2) m->grant_due = 0;
    zk->npred--;
}

/* The pred (one place for its key and the count). Returns 0 with no memory:
   no pred then, so a read decides. */
static int simba__zk_mine_set_pred(simba__zk *zk, simba__zk_mine *m, const char *node) {
    simba__zk_forget_pred(zk, m);
    m->pred = simba__zk_strdup(zk, node);
    if (!m->pred) return 0;
    zk->npred++;
    simba__zk_mine_keys(zk, m);
    return 1;
}

static void simba__zk_forget_all_preds(simba__zk *zk) {
    simba__zk_mine *m;
    for (m = zk->mine; m && zk->npred > 0; m = m->next) simba__zk_forget_pred(zk, m);
}

/* A session event: events replayed after a reconnect come in no useful
   order, so a watch on our own entry proves nothing until asked again. */
static void simba__zk_forget_self_watches(simba__zk *zk) {
    simba__zk_mine *m;
    zk->epoch++;
    for (m = zk->mine; m; m = m->next)
        if (m->self > 0) m->self = 0;
}

/* Out of the cache: its list, its index, the due list, then freed. */
static void simba__zk_mine_free(simba__zk *zk, simba__zk_mine *m) {
    int i;
    if (m->prev) m->prev->next = m->next;
    else if (zk->mine == m) zk->mine = m->next;
    if (m->next) m->next->prev = m->prev;
    for (i = 0; i < SIMBA__ZK_KINDS; i++) simba__zk_ix_del(zk, &m->ln[i]);
    simba__zk_mine_undue(zk, m);
    if (m->nres != 1) zk->nmulti--;
    simba__zk_forget_pred(zk, m);
    for (i = 0; i < m->nres; i++) { simba__zk_free(zk, m->path[i]); simba__zk_free(zk, m->node[i]); }
    simba__zk_free(zk, m->name);
    simba__zk_free(zk, m->watch);
    simba__zk_free(zk, m->request);
    simba__zk_free(zk, m->session);
    simba__zk_free(zk, m);
}

static void simba__zk_mine_drop(simba__zk *zk, const char *request, const char *session) {
    simba__zk_mine *m = simba__zk_mine_find(zk, request, session);
    if (m) simba__zk_mine_free(zk, m);
}

static void simba__zk_mine_clear(simba__zk *zk) {
    while (zk->mine) simba__zk_mine_free(zk, zk->mine);
}

/* A waiter whose read showed exactly one entry ahead in a queue of capacity 1:
   sequence numbers only grow, so nobody can get ahead of it any more, and the
   deletion of that one entry alone makes it the head, which capacity 1 always
   grants. Not for several resources (one grant is not the request's), and
   only with our entry's fence and session known. */
static int simba__zk_pred_grants(const simba__zk_op *op) {
    const simba__zk_rs *r = &op->res[0];
    return op->status == SIMBA_OK && !op->granted && op->nres == 1 && r->capacity == 1 && r->pos == 1 &&
           r->nkids > 1 && r->czxid != 0 && r->owner == op->zk->zsid && op->zk->zsid != 0;
}

/* Remember what an op knows of its entries (best effort: no memory, no cache). */
static void simba__zk_mine_save(simba__zk_op *op) {
    simba__zk *zk = op->zk;
    simba__zk_mine *m = simba__zk_mine_find(zk, op->request, op->session);
    int i;
    if (!m) {
        m = (simba__zk_mine *)simba__zk_alloc(zk, sizeof *m);
        if (!m) return;
        m->request = simba__zk_strdup(zk, op->request);
        m->session = simba__zk_strdup(zk, op->session);
        if (!m->request || !m->session) {     /* the walks compare them: no entry without them */
            simba__zk_free(zk, m->request);
            simba__zk_free(zk, m->session);
            simba__zk_free(zk, m);
            return;
        }
        m->nres = op->nres;
        m->name = simba__zk_strdup(zk, op->res[0].name);
        for (i = 0; i < op->nres; i++) m->path[i] = simba__zk_strdup(zk, op->res[i].path);
        m->next = zk->mine;
        if (zk->mine) zk->mine->prev = m;
        zk->mine = m;
        if (m->nres != 1) zk->nmulti++;
    }
    for (i = 0; i < op->nres && i < m->nres; i++) {
        simba__zk_rs *r = &op->res[i];
        if (!m->path[i] || strcmp(m->path[i], r->path) != 0 || !r->mine) continue;
        if (!m->node[i] || strcmp(m->node[i], r->mine) != 0) {
            simba__zk_free(zk, m->node[i]);
            m->node[i] = simba__zk_strdup(zk, r->mine);
            m->czxid[i] = 0;
            m->armed = 0;             /* a new entry: whatever the old one watched is not ours */
            m->self = 0;
        }
        if (r->czxid) { m->czxid[i] = r->czxid; m->owner = r->owner; }
    }
    if (op->granted && op->status == SIMBA_OK) { m->granted = 1; m->grant_due = 0; }   /* the reply tells it */
    simba__zk_forget_pred(zk, m);
    simba__zk_mine_keys(zk, m);
    if (simba__zk_pred_grants(op)) (void)simba__zk_mine_set_pred(zk, m, op->res[0].kids[0].node);
}

/* Fill an op's resources from the cache. */
static void simba__zk_mine_load(simba__zk_op *op) {
    simba__zk_mine *m = simba__zk_mine_find(op->zk, op->request, op->session);
    int i;
    if (!m || m->nres != op->nres) return;
    for (i = 0; i < op->nres; i++) {
        simba__zk_rs *r = &op->res[i];
        if (!m->path[i] || !m->node[i] || strcmp(m->path[i], r->path) != 0) continue;
        if (!r->mine) r->mine = simba__zk_strdup(op->zk, m->node[i]);
        if (r->mine && strcmp(r->mine, m->node[i]) == 0) {
            r->was_granted = m->granted;
            if (m->czxid[i]) { r->czxid = m->czxid[i]; r->owner = m->owner; }
        }
    }
}

/*>>internals.calls: calls, ops: bookkeeping and delivery */

/*--- calls ---*/

static simba__zk_call *simba__zk_call_new(simba__zk *zk, simba__zk_op *op, int step, int index) {
    simba__zk_call *c = (simba__zk_call *)simba__zk_alloc(zk, sizeof *c);
    if (!c) return NULL;
    c->zk = zk;
    c->op = op;
    c->step = step;
    c->index = index;
    c->gen = zk->gen;
    c->next = zk->calls;
    if (zk->calls) zk->calls->prev = c;
    zk->calls = c;
    if (op) op->pending++;
    return c;
}

static void simba__zk_call_free(simba__zk *zk, simba__zk_call *c) {
    if (c->prev) c->prev->next = c->next;
    else if (zk->calls == c) zk->calls = c->next;
    if (c->next) c->next->prev = c->prev;
    simba__zk_free(zk, c->name);
    simba__zk_free(zk, c->path);
    simba__zk_free(zk, c->results);
    simba__zk_free(zk, c->bufs);
    simba__zk_free(zk, c);
}

/* The library refused the call at once (rc != ZOK): no completion follows. */
static void simba__zk_call_refused(simba__zk_call *c, int rc, const char *what) {
    simba__zk_op *op = c->op;
    simba__zk *zk = c->zk;
    if (op) {
        op->pending--;
        simba__zk_fail_rc(op, rc, what);
    }
    simba__zk_call_free(zk, c);
}

/* Take a completed call off the list; returns its op, or NULL when nobody
   waits for it any more (then the call is freed and the caller stops). */
static simba__zk_op *simba__zk_call_done(simba__zk_call *c) {
    simba__zk_op *op = c->op;
    if (c->zk->closing || c->gen != c->zk->gen || !op) return NULL;
    op->pending--;
    return op;
}

/*--- ops: bookkeeping and delivery ---*/

/* Spare ops. An op is over 1 KiB, and glibc's malloc serves a request of
   that size only after merging every small chunk freed since: the read of
   a 1,000-entry queue frees a thousand names, and the next release would
   wait for that merge before its delete goes out. A few ops are kept for
   reuse instead, so an op costs no allocation of that size. */
enum { SIMBA__ZK_SPARE_OPS = 4 };

static simba__zk_op *simba__zk_op_new(simba__zk *zk) {
    simba__zk_op *op = zk->spare;
    if (!op) return (simba__zk_op *)simba__zk_alloc(zk, sizeof *op);
    zk->spare = op->next;
    zk->nspare--;
    memset(op, 0, sizeof *op);
    return op;
}

static void simba__zk_op_free(simba__zk *zk, simba__zk_op *op) {
    int i;
    for (i = 0; i < op->nres; i++) {
        simba__zk_free(zk, op->res[i].name);
        simba__zk_free(zk, op->res[i].path);
        simba__zk_free(zk, op->res[i].mine);
        simba__zk_free_kids(zk, &op->res[i]);
    }
    simba__zk_free(zk, op->tenant);
    simba__zk_free(zk, op->session);
    simba__zk_free(zk, op->request);
    simba__zk_free(zk, op->entries);
    if (zk->nspare < SIMBA__ZK_SPARE_OPS) {
        op->next = zk->spare;
        zk->spare = op;
        zk->nspare++;
        return;
    }
    simba__zk_free(zk, op);
}

static void simba__zk_free_spares(simba__zk *zk) {
    while (zk->spare) {
        simba__zk_op *op = zk->spare;
        zk->spare = op->next;
        simba__zk_free(zk, op);
    }
    zk->nspare = 0;
}

static void simba__zk_finish(simba__zk_op *op) {
    simba__zk *zk = op->zk;
    if (op->prev) op->prev->next = op->next;
    else if (zk->ops == op) zk->ops = op->next;
    if (op->next) op->next->prev = op->prev;
    op->next = NULL;
    op->prev = NULL;
    if (zk->done_tail) zk->done_tail->next = op;
    else zk->done = op;
    zk->done_tail = op;
    op->phase = -1;
}

static void simba__zk_finish_status(simba__zk_op *op, int status, const char *msg) {
    if (op->status == SIMBA_OK && status != SIMBA_OK) {
        op->status = status;
        if (msg) snprintf(op->message, sizeof op->message, "%s", msg);
    }
    simba__zk_finish(op);
}

/* Every op in flight ends with `status` (an expired session: per op kind). */
static void simba__zk_fail_all(simba__zk *zk, int status, int expired) {
    simba__zk_call *c;
    for (c = zk->calls; c; c = c->next) c->op = NULL;
    while (zk->ops) {
        simba__zk_op *op = zk->ops;
        int st = expired ? simba__zk_status_of(ZSESSIONEXPIRED, op->kind) : status;
        op->pending = 0;
        simba__zk_finish_status(op, st, expired ? "the ZooKeeper session expired" : "connection reset");
    }
}

static void simba__zk_queue_wake(simba__zk *zk, const char *name);

static void simba__zk_deliver(simba__zk *zk) {
    while (zk->done) {
        simba__zk_op *op = zk->done;
        simba_reply rep;
        int i;
        zk->done = op->next;
        if (!zk->done) zk->done_tail = NULL;
        if (op->internal) {                  /* a refresh: nobody asked; failed, the core re-polls */
            if (op->status != SIMBA_OK) simba__zk_queue_wake(zk, op->res[0].name);
            simba__zk_op_free(zk, op);
            continue;
        }
        memset(&rep, 0, sizeof rep);
        rep.id = op->id;
        rep.status = op->status;
        rep.message = op->message[0] ? op->message : NULL;
        rep.granted = op->status == SIMBA_OK && op->granted;
        for (i = 0; i < op->nres && i < SIMBA_MAX_RESOURCES; i++) rep.fence[i] = rep.granted ? op->fence[i] : 0;
        rep.ahead = op->ahead;
        rep.recheck_ms = -1;                 /* ZooKeeper expires sessions itself and the watch fires */
        rep.owner = op->owner[0] ? op->owner : NULL;
        rep.held = op->held;
        rep.capacity = op->capacity;
        rep.nentries = op->nentries;
        rep.entries = op->entries;
        zk->ops_completed++;
        simba_backend_complete(zk->s, &rep);
        simba__zk_op_free(zk, op);
    }
}

/* Declared ahead: the completions (in >>locks) and the watcher (in
   >>wakeups) are handed to the library by every section; op_advance runs
   the step functions of >>session and >>locks; queue_wake and arm_watch
   belong to >>wakeups; the stats find their backend through the vtable. */
static void simba__zk_op_advance(simba__zk_op *op);
static void simba__zk_on_void(int rc, const void *data);
static void simba__zk_on_stat(int rc, const struct Stat *st, const void *data);
static void simba__zk_on_data(int rc, const char *value, int len, const struct Stat *st, const void *data);
static void simba__zk_on_kids(int rc, const struct String_vector *v, const void *data);
static void simba__zk_on_create(int rc, const char *path, const struct Stat *st, const void *data);
static void simba__zk_on_string(int rc, const char *value, const void *data);
static void simba__zk_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
static void simba__zk_queue_wake(simba__zk *zk, const char *name);
static void simba__zk_arm_op(simba__zk_op *op);
static void simba__zk_mark_granted(simba__zk_op *op, int i);
static void simba__zk_refresh_done(simba__zk_op *op);
static void simba__zk_node_event(simba__zk *zk, int type, const char *path);
static void simba__zk_watch_answer(simba__zk *zk, const char *path, int rc, const struct Stat *st, const char *value,
                                   int len);
static void simba__zk_confirmed(simba__zk_call *c, simba__zk_op *op, int rc);
static void simba__zk_self_answer(simba__zk_call *c, int rc);
static void simba__zk_grant_unread(simba__zk *zk, simba__zk_mine *m);
static simba__zk_mine *simba__zk_mine_by_node(simba__zk *zk, const char *path, const char *node);
static void simba__zk_unwatch_self(simba__zk *zk, simba__zk_mine *m);
static int simba__zk_confirm_head(simba__zk *zk, simba__zk_mine *m, simba__zk_op *op);
static simba__zk *simba__zk_of(simba_backend b);

/*>>connection: the ZooKeeper handle: connect, session events, reconnect with backoff, reset */

static void simba__zk_silent_log(const char *msg) { (void)msg; }

/* A session state change (from simba__zk_watcher): flags only. */
static void simba__zk_on_session_event(simba__zk *zk, zhandle_t *zh, int state) {
    /* after a reconnect the server replays missed events in no useful order */
    simba__zk_forget_all_preds(zk);
    simba__zk_forget_self_watches(zk);
    zk->synced = 0;                   /* the next connection has seen no sync of ours */
    /* "connected" while connected: the library replaced the connection
       without a "connecting" first (seen with libzookeeper 3.8 after the
       socket was cut under it). Requests sent on the old one get no answer. */
    if (state != ZOO_CONNECTED_STATE || zk->zstate == ZOO_CONNECTED_STATE) zk->dropped = 1;
    zk->zstate = state;
    if (state == ZOO_CONNECTED_STATE) {
        const clientid_t *id = zoo_client_id(zh);
        zk->connects++;
        if (id) {
            if (zk->zsid && id->client_id != zk->zsid) zk->expired = 1;   /* cannot happen: be safe */
            zk->zsid = id->client_id;
            memcpy(zk->passwd, id->passwd, sizeof zk->passwd);
        }
        zk->negotiated = zoo_recv_timeout(zh);
        zk->resetting_until = 0;
        zk->attempts = 0;
        if (zk->conn_attempts > 1)
            simba_backend_log(zk->s, SIMBA_LOG_INFO, "simba_zk: connected to %s after %d failed attempts",
                              zk->hosts, zk->conn_attempts);
        zk->conn_attempts = 0;
        zk->hold_until = 0;
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
        zk->expired = 1;
    } else if (state == ZOO_AUTH_FAILED_STATE) {
        zk->auth_failed = 1;
    } else if (state == ZOO_CONNECTING_STATE) {
        zk->resetting_until = 0;
    }
}

/* A connection attempt failed (refused, reset, no answer in time) while not
   connected. libzookeeper retries at once and hands out a fd that is
   always ready (against a refused port the caller's loop would spin,
   hundreds of connect()s a second): back off like the other backends. The wait is capped
   far below the session timeout (1/20: the core keeps a hold for ttl
   after its last keepalive, and a failover to another member, an election
   included, must still fit in that), so a server that comes back, or the
   next member of the list, is found while the hold and the session live. */
static void simba__zk_connect_failed(simba__zk *zk, int rc) {
    int why = errno;
    int64_t now = simba__zk_now(zk);
    int wait = simba_backend_backoff_ms(zk->s, ++zk->conn_attempts), cap = zk->timeout_ms / 20;
    if (zk->zstate == ZOO_CONNECTED_STATE) return;
    if (!zk->up && !zk->expired && !zk->auth_failed) {
        /* told from the first failed attempt on, also before any CONNECTED
           (the core says it once per kind of failure); logged once a run of
           failures, the count comes with the next CONNECTED */
        char msg[300];
        if (rc == ZOPERATIONTIMEOUT)
            snprintf(msg, sizeof msg, "cannot connect to %.200s: no answer to the session handshake in time",
                     zk->hosts);
        else
            snprintf(msg, sizeof msg, "cannot connect to %.200s: %s", zk->hosts,
                     why ? strerror(why) : "connection failed");
        if (zk->conn_attempts == 1) simba_backend_log(zk->s, SIMBA_LOG_WARN, "simba_zk: %s; retrying with backoff", msg);
        simba_backend_state(zk->s, 0, SIMBA_EDISCONNECTED, msg);
    }
    if (zk->hold_until > now) return;
    if (cap < 50) cap = 50;
    if (wait > cap) wait = cap;
    zk->hold_until = now + wait;
}

static void simba__zk_refresh(simba__zk *zk) {
    struct timeval tv;
    int fd = -1, interest = 0, rc;
    int64_t now;
    if (!zk->zh) { zk->fd = -1; return; }
    now = simba__zk_now(zk);
    if (zk->hold_until > now && zk->zstate != ZOO_CONNECTED_STATE) {
        zk->fd = -1;
        zk->interest = 0;
        zk->next_ms = zk->hold_until;
        return;
    }
    tv.tv_sec = 0;
    tv.tv_usec = 0;
    rc = zookeeper_interest(zk->zh, &fd, &interest, &tv);
    /* a timeout while connected is a ping's (the watcher tells that drop);
       before, it is an attempt that got no answer: a failed attempt too */
    if (rc != ZOK && rc != ZNOTHING && (rc != ZOPERATIONTIMEOUT || zk->zstate != ZOO_CONNECTED_STATE))
        simba__zk_connect_failed(zk, rc);
    if (rc != ZOK && rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) fd = -1;
    zk->fd = fd;
    zk->interest = fd >= 0 ? interest : 0;
    zk->next_ms = simba__zk_now(zk) + (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* libzookeeper 3.6+ resolves its host list again in every
   zookeeper_interest() by default, i.e. in every simba_pollfds(): a
   getaddrinfo() each time (a netlink dump of the interfaces even for a
   numeric address), about a third of a hand-off's time. -1: only when a
   connection is lost, the resolution the library needs to follow moved
   hosts (names are passed only with allow_hostnames). The call is 3.6+;
   with an older client library define SIMBA_ZK_RESOLUTION_DELAY 0. */
#ifndef SIMBA_ZK_RESOLUTION_DELAY
#define SIMBA_ZK_RESOLUTION_DELAY 1
#endif
static void simba__zk_resolve_at_connect_only(zhandle_t *zh) {
#if SIMBA_ZK_RESOLUTION_DELAY
    (void)zoo_set_servers_resolution_delay(zh, -1);
#else
    (void)zh;
#endif
}

static void simba__zk_open_handle(simba__zk *zk) {
    int64_t now = simba__zk_now(zk);
    zk->gen++;
    zk->zstate = 0;
    zk->zsid = 0;
    zk->negotiated = 0;
    zk->warned_short = 0;
    zk->session[0] = 0;
    zk->parents_ok = 0;
    zk->synced = 0;
    zk->expired = zk->auth_failed = zk->close_wanted = 0;
    zk->resetting_until = 0;
    zk->hold_until = 0;
    zk->conn_attempts = 0;
    zk->fd = -1;
    zk->zh = zookeeper_init2(zk->hosts, simba__zk_watcher, zk->timeout_ms, NULL, zk, 0,
                             zk->log_level > 0 ? (log_callback_fn)0 : simba__zk_silent_log);
    if (!zk->zh) {
        zk->reinit_at = now + simba_backend_backoff_ms(zk->s, ++zk->attempts);
        simba_backend_log(zk->s, SIMBA_LOG_WARN, "simba_zk: zookeeper_init(%s) failed: %s", zk->hosts, strerror(errno));
        return;
    }
    zk->reinit_at = -1;
    zk->handles++;
    simba__zk_resolve_at_connect_only(zk->zh);
    if (zk->digest) {
        simba__zk_call *c = simba__zk_call_new(zk, NULL, SIMBA__ZK_C_AUTH, 0);
        int rc = c ? zoo_add_auth(zk->zh, "digest", zk->digest, (int)strlen(zk->digest), simba__zk_on_void, c)
                   : ZMARSHALLINGERROR;
        if (rc != ZOK) {
            if (c) simba__zk_call_free(zk, c);
            zk->auth_failed = 1;
        }
    }
    simba__zk_refresh(zk);
}

/* Close the handle. abandon: do not send closeSession (the session and its
   entries then live until the server expires them); otherwise the server
   deletes the session's entries at once. */
static void simba__zk_close_handle(simba__zk *zk, int abandon) {
    if (!zk->zh) return;
    zk->closing = 1;
    if (abandon && zoo_state(zk->zh) == ZOO_CONNECTED_STATE) {
        /* zookeeper_close sends closeSession only on a connected handle: drop
           the connection first, the library notices at once. */
        simba__zk_refresh(zk);
        if (zk->fd >= 0) {
            shutdown(zk->fd, SHUT_RDWR);
            (void)zookeeper_process(zk->zh, ZOOKEEPER_READ);
        }
    }
    (void)zookeeper_close(zk->zh);
    zk->zh = NULL;
    while (zk->calls) simba__zk_call_free(zk, zk->calls);   /* ones the library did not complete */
    zk->closing = 0;
    zk->fd = -1;
    zk->interest = 0;
    zk->zsid = 0;
    zk->session[0] = 0;
    zk->zstate = 0;
    simba__zk_mine_clear(zk);
}

/* The server gave a session timeout below the lease (its maxSessionTimeout):
   a hold would outlive the session, so the backend stays down and says why. */
static int simba__zk_too_short(const simba__zk *zk) {
    return zk->negotiated > 0 && zk->negotiated < zk->lease_ms;
}

static void simba__zk_too_short_msg(const simba__zk *zk, char *out, size_t cap) {
    snprintf(out, cap, "the server allows a session timeout of %d ms only, below the lease of %d ms: "
             "raise its maxSessionTimeout or lower ttl", zk->negotiated, zk->lease_ms);
}

static int simba__zk_want_up(const simba__zk *zk, int64_t now) {
    return zk->zh && zk->zstate == ZOO_CONNECTED_STATE && !zk->expired && !zk->auth_failed &&
           !zk->close_wanted && now >= zk->resetting_until && !simba__zk_too_short(zk);
}

static void simba__zk_tell_core(simba__zk *zk, int up) {
    zk->up = up;
    if (up) {
        simba_backend_state(zk->s, 1, 0, NULL);
    } else if (!zk->expired && !zk->auth_failed && zk->zstate == ZOO_CONNECTED_STATE && simba__zk_too_short(zk)) {
        /* a persistent refusal, not a drop: SIMBA_EINVAL with the reason */
        char msg[200];
        simba__zk_too_short_msg(zk, msg, sizeof msg);
        if (!zk->warned_short) simba_backend_log(zk->s, SIMBA_LOG_ERROR, "simba_zk: %s", msg);
        zk->warned_short = 1;
        simba_backend_state(zk->s, 0, SIMBA_EINVAL, msg);
    } else {
        int err = zk->expired ? SIMBA_ESESSION : zk->auth_failed ? SIMBA_EAUTH : SIMBA_EDISCONNECTED;
        simba_backend_state(zk->s, 0, err, zk->expired ? "ZooKeeper session expired"
                            : zk->auth_failed ? "ZooKeeper refused the credentials"
                            : "ZooKeeper connection lost; reconnecting");
    }
}

/* Tell the core what the handle's state is now. A connection that ended
   and came back between two looks is still told as a drop and a return:
   what was in flight on it is failed (and retried by the core, requests
   are idempotent), as the library does itself when it says "connecting". */
static void simba__zk_report(simba__zk *zk) {
    int want = simba__zk_want_up(zk, simba__zk_now(zk));
    if (zk->dropped && zk->up) {
        simba__zk_fail_all(zk, SIMBA_EDISCONNECTED, 0);
        simba__zk_tell_core(zk, 0);
    }
    zk->dropped = 0;
    if (want != zk->up) simba__zk_tell_core(zk, want);
    else if (!want && zk->zstate == ZOO_CONNECTED_STATE && simba__zk_too_short(zk) && !zk->warned_short)
        simba__zk_tell_core(zk, 0);   /* never up: still say why */
}

/* Expired, refused or unwanted handles are replaced here, outside any
   library callback. */
static void simba__zk_housekeeping(simba__zk *zk) {
    int64_t now = simba__zk_now(zk);
    if (zk->zh && (zk->expired || zk->auth_failed || zk->close_wanted)) {
        int auth = zk->auth_failed, expired = zk->expired;
        simba__zk_fail_all(zk, auth ? SIMBA_EAUTH : SIMBA_EDISCONNECTED, expired);
        simba__zk_report(zk);
        if (expired) simba_backend_log(zk->s, SIMBA_LOG_WARN, "simba_zk: session 0x%llx expired",
                                       (unsigned long long)zk->zsid);
        simba__zk_close_handle(zk, 0);
        zk->reinit_at = auth ? now + simba_backend_backoff_ms(zk->s, ++zk->attempts) : now;
    }
    if (!zk->zh && zk->reinit_at >= 0 && now >= zk->reinit_at) simba__zk_open_handle(zk);
}

/*>>session: OPEN, KEEPALIVE, CLOSE */

/* A sync with the quorum (of the base path: a sync covers the whole tree).
   The server forwards it to the leader and answers it, and every later
   request of the session (a session's requests are answered in order),
   only once it has applied everything the leader had when the sync
   reached it. 0 if it could not be sent (the op has failed). */
static int simba__zk_issue_sync(simba__zk_op *op) {
    simba__zk_call *c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_SYNC, 0);
    int rc;
    if (!c) { simba__zk_oom(op); return 0; }
    rc = zoo_async(op->zk->zh, op->zk->base, simba__zk_on_string, c);
    if (rc != ZOK) { simba__zk_call_refused(c, rc, "sync with the quorum"); return 0; }
    op->zk->synced = 1;
    return 1;
}

/* Reads that decide whether a write of ours happened: an ENQUEUE that may
   be a retry (is its entry there already?) and a RELEASE that does not know
   its entry's name (is there one to delete?). ZooKeeper promises that a
   server shows at least what the client has seen (its last zxid), but the
   answer of a create lost with its connection was never seen, and the
   member we reconnect to may not have applied that create yet: a plain
   read there misses the entry, and the retry creates a second one (a ghost
   of our live session that nobody releases: the lock is stuck while the
   session lives) or the release leaves it
   (t_zk_lost_create_on_lagging_follower). So the read goes behind a sync
   sent on the same connection: every create we sent on an earlier one
   reached the leader before that sync did (one that arrives after our
   session moved to this server is refused as "session moved"), so the
   read shows it (on the leader itself, a session's reads already wait
   for its writes in progress). One sync per connection is enough: the
   keepalive's, which the core sends first after every reconnect, or one
   sent here. And the answer counts only if no session event came in
   between (simba__zk_read_still_good): a connection that the library
   replaced before we heard of it carries no sync of ours. */
static void simba__zk_sync_before_read(simba__zk_op *op) {
    if (!op->zk->synced) simba__zk_issue_sync(op);
    op->epoch = op->zk->epoch;
}

/* The reads of simba__zk_sync_before_read were answered on the connection
   they were sent on; otherwise the op fails (the core retries it). */
static int simba__zk_read_still_good(simba__zk_op *op) {
    if (op->epoch == op->zk->epoch) return 1;
    simba__zk_fail(op, SIMBA_EDISCONNECTED, "%s: %s", "the connection changed during the read", ZCONNECTIONLOSS);
    return 0;
}

/* Session ops are answered from what we know of the handle, or by one round
   trip; everything else runs its phases. */
static int simba__zk_start_session_op(simba__zk *zk, simba__zk_op *op) {
    switch (op->kind) {
    case SIMBA_OP_OPEN:
        if (zk->session[0] && strcmp(zk->session, op->session) != 0) {
            /* a new simba session needs a fresh ZooKeeper session: the old one may
               still carry entries of the dropped simba session */
            zk->close_wanted = 1;
            return SIMBA_EDISCONNECTED;
        }
        if (simba__zk_too_short(zk)) {   /* not sent while too short (want_up): be safe */
            simba__zk_too_short_msg(zk, op->message, sizeof op->message);
            return SIMBA_EINVAL;
        }
        snprintf(zk->session, sizeof zk->session, "%s", op->session);
        return SIMBA_OK;
    case SIMBA_OP_KEEPALIVE:
        return zk->session[0] && strcmp(zk->session, op->session) == 0 ? SIMBA_OK : SIMBA_ESESSION;
    case SIMBA_OP_CLOSE:
        if (zk->session[0] && strcmp(zk->session, op->session) == 0) zk->close_wanted = 1;
        return SIMBA_OK;
    case SIMBA_OP_ENQUEUE: case SIMBA_OP_POLL:
        return zk->session[0] && strcmp(zk->session, op->session) == 0 ? SIMBA_OK : SIMBA_ESESSION;
    default:
        return SIMBA_OK;
    }
}

/* The session round trip of OPEN and KEEPALIVE, on which the core extends
   every hold to send time + ttl. A read alone proves nothing: a follower
   cut off from the leader answers it locally (for up to syncLimit x
   tickTime) while the leader, which alone expires sessions, hears nothing
   from us, and another client on the majority is granted once it expires
   our session (two believing holders for about a second:
   t_zk_partitioned_follower_no_overlap). So a sync goes first: the server sends it
   to the leader and answers it, and the read queued behind it, only once
   the leader did. A cut-off follower never answers, the keepalive times
   out, and the hold ends at the last keepalive that reached the leader. */
static void simba__zk_issue_ping(simba__zk_op *op) {
    simba__zk_call *c;
    int rc;
    if (!simba__zk_issue_sync(op)) return;
    c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_PING, 0);
    if (!c) { simba__zk_oom(op); return; }
    rc = zoo_aexists(op->zk->zh, op->zk->base, 0, simba__zk_on_stat, c);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "session round trip");
}

static void simba__zk_step_session(simba__zk_op *op) {
    if (op->phase == SIMBA__ZK_P_START) {
        op->phase = SIMBA__ZK_P_PING;
        simba__zk_issue_ping(op);
        return;
    }
    simba__zk_finish(op);
}

/*>>locks: ENQUEUE, POLL, RELEASE, INSPECT, SET_CAPACITY, DELETE */

/*>>locks.calls: the calls an op makes and their completions (also for >>connection, >>session) */

static void simba__zk_on_data(int rc, const char *value, int len, const struct Stat *st, const void *data) {
    simba__zk_call *c = (simba__zk_call *)data;
    simba__zk_op *op = simba__zk_call_done(c);
    if (op) {
        simba__zk_rs *r = &op->res[c->index];
        if (rc == ZOK) {
            r->exists = 1;
            if (!simba__zk_parse_capacity(value, len, &r->capacity) && op->status == SIMBA_OK) {
                op->status = SIMBA_EPROTO;
                snprintf(op->message, sizeof op->message, "resource node %.150s holds no capacity", r->path);
            }
        } else if (rc == ZNONODE) {
            r->exists = 0;
            r->capacity = r->want_capacity;
        } else {
            simba__zk_fail_rc(op, rc, "reading the resource");
        }
    } else if (c->step == SIMBA__ZK_C_WATCH_PRED && !c->zk->closing && c->gen == c->zk->gen && c->path) {
        simba__zk_watch_answer(c->zk, c->path, rc, st, value, len);
    }
    simba__zk_call_free(c->zk, c);
    if (op) simba__zk_op_advance(op);
}

static void simba__zk_on_kids(int rc, const struct String_vector *v, const void *data) {
    simba__zk_call *c = (simba__zk_call *)data;
    simba__zk_op *op = simba__zk_call_done(c);
    if (rc == ZOK && v) c->zk->names_read += v->count;
    if (op) {
        simba__zk_rs *r = &op->res[c->index];
        if (rc == ZOK) {
            r->exists = 1;
            simba__zk_store_kids(op, r, v);
        } else if (rc == ZNONODE) {
            r->exists = 0;
            simba__zk_free_kids(op->zk, r);
        } else {
            simba__zk_fail_rc(op, rc, "listing the queue");
        }
    } else if (c->step == SIMBA__ZK_C_WATCH_KIDS && !c->zk->closing && c->gen == c->zk->gen) {
        int n = rc == ZOK && v ? v->count : -1;
        if (n != c->nkids || simba__zk_kids_hash(v) != c->kids_hash)   /* changed between our read and the watch */
            simba__zk_node_event(c->zk, ZOO_CHILD_EVENT, c->path);
    }
    simba__zk_call_free(c->zk, c);
    if (op) simba__zk_op_advance(op);
}

static void simba__zk_on_stat(int rc, const struct Stat *st, const void *data) {
    simba__zk_call *c = (simba__zk_call *)data;
    simba__zk_op *op = simba__zk_call_done(c);
    if (c->step == SIMBA__ZK_C_CONFIRM) simba__zk_confirmed(c, op, rc);
    else if (c->step == SIMBA__ZK_C_SELF) simba__zk_self_answer(c, rc);
    else if (op && c->step == SIMBA__ZK_C_PING) {
        if (rc != ZOK && rc != ZNONODE) simba__zk_fail_rc(op, rc, "session round trip");
    } else if (op && c->step == SIMBA__ZK_C_SET) {
        if (rc == ZNONODE) simba__zk_missing(op);      /* create it, then set again */
        else if (rc != ZOK) simba__zk_fail_rc(op, rc, "setting the capacity");
    } else if (op && c->step == SIMBA__ZK_C_OWNER) {
        simba__zk_rs *r = &op->res[c->index];
        if (c->nkids < r->nkids) {
            simba__zk_kid *kid = &r->kids[c->nkids];
            if (rc == ZOK && st) { kid->owner = st->ephemeralOwner ? st->ephemeralOwner : -1; kid->czxid = st->czxid; }
            else if (rc == ZNONODE) kid->owner = -1;
            else simba__zk_fail_rc(op, rc, "reading an entry");
        }
    } else if (op && op->kind == SIMBA_OP_INSPECT) {
        if (rc == ZOK && st && c->index < op->nentries) op->entries[c->index].fence = st->czxid;
        else if (rc != ZOK && rc != ZNONODE) simba__zk_fail_rc(op, rc, "reading an entry");
    } else if (op) {
        simba__zk_rs *r = &op->res[c->index];
        if (rc == ZOK && st) { r->czxid = st->czxid; r->owner = st->ephemeralOwner; }
        else if (rc == ZNONODE) simba__zk_fail(op, SIMBA_ENOTFOUND, "%sentry gone: %s", "", rc);
        else simba__zk_fail_rc(op, rc, "reading our entry");
    }
    simba__zk_call_free(c->zk, c);
    if (op) simba__zk_op_advance(op);
}

static void simba__zk_on_create(int rc, const char *path, const struct Stat *st, const void *data) {
    simba__zk_call *c = (simba__zk_call *)data;
    simba__zk_op *op = simba__zk_call_done(c);
    if (op) {
        simba__zk_rs *r = &op->res[c->index];
        if (rc == ZOK && path) {
            const char *slash = strrchr(path, '/');
            simba__zk_free(op->zk, r->mine);
            r->mine = simba__zk_strdup(op->zk, slash ? slash + 1 : path);
            if (st) { r->czxid = st->czxid; r->owner = st->ephemeralOwner; }
            op->created = 1;
        } else if (rc == ZNONODE) {
            simba__zk_missing(op);           /* a parent is missing: the op retries with parents */
        } else {
            simba__zk_fail_rc(op, rc, "creating the entry");
        }
    }
    simba__zk_call_free(c->zk, c);
    if (op) simba__zk_op_advance(op);
}

static void simba__zk_on_parent(simba__zk_call *c, simba__zk_op *op, int rc) {
    if (rc == ZOK || rc == ZNODEEXISTS) return;
    /* The base path and the tenant node are provisioned by an admin in the
       tenant recipe, where tenants may not create under the base path: the
       create is refused before the server looks whether the node exists.
       Not an error by itself; if the node really is missing, the creates
       below it fail with ZNONODE and simba__zk_missing says why. */
    if (rc == ZNOAUTH && c->index < 0) { op->parent_refused = 1; return; }
    if (rc == ZNONODE && c->index == SIMBA__ZK_TOP) {
        /* The parent of the base path's first component is "/": only a
           chroot ("host:port/chroot") can be missing there. Not retried
           (a retry as "not found" would loop with no grant and no error). */
        const char *chroot = strchr(op->zk->hosts, '/');
        if (op->status != SIMBA_OK) return;
        op->status = SIMBA_EINVAL;
        snprintf(op->message, sizeof op->message, "chroot %.120s does not exist: create it first",
                 chroot ? chroot : "/");
        return;
    }
    if (rc == ZNONODE) { simba__zk_missing(op); return; }   /* raced with a reaper: retry */
    simba__zk_fail_rc(op, rc, c->index < 0 ? "creating the base path" : "creating the resource");
}

static void simba__zk_on_mcreate(simba__zk_call *c, simba__zk_op *op, int rc) {
    int i;
    if (rc == ZOK) {
        for (i = 0; i < c->nresults && i < op->nres; i++) {
            const char *path = c->results[i].value;
            const char *slash = path ? strrchr(path, '/') : NULL;
            simba__zk_free(op->zk, op->res[i].mine);
            op->res[i].mine = simba__zk_strdup(op->zk, slash ? slash + 1 : "");
        }
        op->created = 1;
        return;
    }
    for (i = 0; i < c->nresults; i++) if (c->results[i].err == ZNONODE) rc = ZNONODE;
    if (rc == ZNONODE) simba__zk_missing(op);
    else simba__zk_fail_rc(op, rc, "creating the entries");
}

static void simba__zk_on_void(int rc, const void *data) {
    simba__zk_call *c = (simba__zk_call *)data;
    simba__zk *zk = c->zk;
    simba__zk_op *op;
    if (c->step == SIMBA__ZK_C_AUTH && !zk->closing && c->gen == zk->gen && rc != ZOK && rc != ZCONNECTIONLOSS) {
        zk->auth_failed = 1;
    }
    op = simba__zk_call_done(c);
    if (op) {
        switch (c->step) {
        case SIMBA__ZK_C_PARENT: simba__zk_on_parent(c, op, rc); break;
        case SIMBA__ZK_C_MCREATE: simba__zk_on_mcreate(c, op, rc); break;
        case SIMBA__ZK_C_DELETE:
            if (rc != ZOK && rc != ZNONODE) simba__zk_fail_rc(op, rc, "deleting an entry");
            break;
        case SIMBA__ZK_C_MDELETE:
            if (rc == ZNOTEMPTY || rc == ZNONODE) simba__zk_missing(op);  /* changed: retry */
            else if (rc != ZOK) simba__zk_fail_rc(op, rc, "deleting the resource");
            break;
        default: break;
        }
    }
    simba__zk_call_free(zk, c);
    if (op) simba__zk_op_advance(op);
}

static void simba__zk_on_string(int rc, const char *value, const void *data) {
    simba__zk_call *c = (simba__zk_call *)data;
    simba__zk_op *op = simba__zk_call_done(c);
    (void)value;
    if (op && c->step == SIMBA__ZK_C_SYNC) {
        if (rc != ZOK && rc != ZNONODE) simba__zk_fail_rc(op, rc, "sync with the quorum");
    } else if (op) {
        simba__zk_on_parent(c, op, rc);
    }
    simba__zk_call_free(c->zk, c);
    if (op) simba__zk_op_advance(op);
}

/*--- issuing calls ---*/

static void simba__zk_issue_get(simba__zk_op *op, int i) {
    simba__zk_call *c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_GET, i);
    int rc;
    if (!c) { simba__zk_oom(op); return; }
    /* the data watch tells every reader of a resource about capacity changes and deletion */
    rc = zoo_awget(op->zk->zh, op->res[i].path, simba__zk_watcher, op->zk, simba__zk_on_data, c);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "reading the resource");
}

static void simba__zk_issue_kids(simba__zk_op *op, int i) {
    simba__zk_call *c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_KIDS, i);
    int rc;
    if (!c) { simba__zk_oom(op); return; }
    rc = zoo_aget_children(op->zk->zh, op->res[i].path, 0, simba__zk_on_kids, c);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "listing the queue");
}

static void simba__zk_issue_reads(simba__zk_op *op) {
    int i;
    for (i = 0; i < op->nres; i++) {
        simba__zk_issue_get(op, i);
        simba__zk_issue_kids(op, i);
    }
}

static void simba__zk_issue_parent(simba__zk_op *op, const char *path, const char *data,
                                   struct ACL_vector *acl, int mode, int index) {
    simba__zk_call *c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_PARENT, index);
    int rc;
    if (!c) { simba__zk_oom(op); return; }
    rc = zoo_acreate(op->zk->zh, path, data, data ? (int)strlen(data) : -1, acl, mode,
                     simba__zk_on_string, c);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "creating a parent node");
}

/* Create whatever may be missing above our entries, in order, in the same
   flight as the entries themselves: ZooKeeper runs a session's requests in
   order, so the entries' create sees the parents. "Exists" is success. */
static void simba__zk_issue_parents(simba__zk_op *op, int all) {
    simba__zk *zk = op->zk;
    char path[SIMBA__ZK_PATH_MAX], cap[16];
    size_t i, n = strlen(zk->base);
    int r;
    if (!zk->parents_ok || all) {
        for (i = 1; i <= n; i++) {
            if (i < n && zk->base[i] != '/') continue;
            memcpy(path, zk->base, i);
            path[i] = 0;
            simba__zk_issue_parent(op, path, NULL, simba__zk_acl_base(zk), 0,
                                   strchr(path + 1, '/') ? -1 : SIMBA__ZK_TOP);
        }
        snprintf(path, sizeof path, "%s/%s", zk->base, zk->tenant_enc);
        simba__zk_issue_parent(op, path, NULL, simba__zk_acl_own(zk), ZOO_CONTAINER, -1);
    }
    for (r = 0; r < op->nres; r++) {
        if (op->res[r].exists && !all) continue;
        snprintf(cap, sizeof cap, "%d", op->res[r].want_capacity);
        /* persistent, not a container: a resource and its capacity stay
           until DELETE, as on every backend (docs/backend-contract.md) */
        simba__zk_issue_parent(op, op->res[r].path, cap, simba__zk_acl_own(zk), ZOO_PERSISTENT, r);
    }
}

/* The entry's path prefix; the server appends the sequence number. */
static int simba__zk_entry_prefix(const simba__zk_op *op, int i, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s/%d_%s_%s_", op->res[i].path, op->res[i].weight, op->session, op->request);
    return n > 0 && (size_t)n < cap;
}

static void simba__zk_note_sent(simba__zk_op *op) {
    simba__zk *zk = op->zk;
    if (op->req_n < 0) return;
    if (strcmp(zk->fast_session, op->session) != 0) {
        snprintf(zk->fast_session, sizeof zk->fast_session, "%s", op->session);
        zk->fast_max_n = op->req_n;
    } else if (op->req_n > zk->fast_max_n) {
        zk->fast_max_n = op->req_n;
    }
}

static void simba__zk_issue_create1(simba__zk_op *op) {
    char prefix[SIMBA__ZK_PATH_MAX];
    simba__zk_call *c;
    int rc;
    if (!simba__zk_entry_prefix(op, 0, prefix, sizeof prefix)) {
        simba__zk_fail_words(op, SIMBA_ENAME, "name too long for a node path");
        return;
    }
    c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_CREATE, 0);
    if (!c) { simba__zk_oom(op); return; }
    rc = zoo_acreate2(op->zk->zh, prefix, NULL, -1, simba__zk_acl_own(op->zk), ZOO_EPHEMERAL_SEQUENTIAL,
                      simba__zk_on_create, c);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "creating the entry");
    else simba__zk_note_sent(op);
}

/* All resources of a request in one atomic multi. */
static void simba__zk_issue_createn(simba__zk_op *op) {
    zoo_op_t ops[SIMBA_MAX_RESOURCES];
    simba__zk_call *c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_MCREATE, 0);
    int i, rc, bufsize = SIMBA__ZK_PATH_MAX;
    char *prefix;
    if (!c) { simba__zk_oom(op); return; }
    c->results = (zoo_op_result_t *)simba__zk_alloc(op->zk, sizeof(zoo_op_result_t) * (size_t)op->nres);
    /* the created paths come back here; the prefixes we send live in the second half */
    c->bufs = (char *)simba__zk_alloc(op->zk, (size_t)bufsize * (size_t)op->nres * 2);
    c->nresults = op->nres;
    c->bufsize = bufsize;
    if (!c->results || !c->bufs) { simba__zk_call_refused(c, ZMARSHALLINGERROR, "out of memory"); return; }
    prefix = c->bufs + (size_t)bufsize * (size_t)op->nres;
    for (i = 0; i < op->nres; i++) {
        char *pi = prefix + (size_t)i * (size_t)bufsize;
        if (!simba__zk_entry_prefix(op, i, pi, (size_t)bufsize)) {
            simba__zk_call_refused(c, ZBADARGUMENTS, "name too long for a node path");
            return;
        }
        zoo_create_op_init(&ops[i], pi, NULL, -1, simba__zk_acl_own(op->zk), ZOO_EPHEMERAL_SEQUENTIAL,
                           c->bufs + (size_t)i * (size_t)bufsize, bufsize);
    }
    rc = zoo_amulti(op->zk->zh, op->nres, ops, c->results, simba__zk_on_void, c);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "creating the entries");
    else simba__zk_note_sent(op);
}

static void simba__zk_entry_path(const simba__zk_rs *r, const char *node, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", r->path, node);
}

static void simba__zk_issue_stat(simba__zk_op *op, const char *path, int index) {
    simba__zk_call *c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_STAT, index);
    int rc;
    if (!c) { simba__zk_oom(op); return; }
    rc = zoo_aexists(op->zk->zh, path, 0, simba__zk_on_stat, c);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "reading an entry");
}

/* op NULL: a delete nobody waits for (a duplicate, an undo after an error). */
static void simba__zk_issue_delete(simba__zk *zk, simba__zk_op *op, const char *path) {
    simba__zk_call *c = simba__zk_call_new(zk, op, op ? SIMBA__ZK_C_DELETE : SIMBA__ZK_C_FORGET, 0);
    int rc;
    if (!c) { if (op) simba__zk_oom(op); return; }
    rc = zoo_adelete(zk->zh, path, -1, simba__zk_on_void, c);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "deleting an entry");
}

static void simba__zk_issue_set(simba__zk_op *op) {
    char cap[16];
    simba__zk_call *c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_SET, 0);
    int rc;
    if (!c) { simba__zk_oom(op); return; }
    snprintf(cap, sizeof cap, "%d", op->res[0].want_capacity);
    rc = zoo_aset(op->zk->zh, op->res[0].path, cap, (int)strlen(cap), -1, simba__zk_on_stat, c);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "setting the capacity");
}

/* DELETE: every entry and the resource node in one multi, so nobody sees a
   half-deleted queue. A concurrent change fails it; the op reads again.
   The server runs (and tells watchers of) a multi's deletes in order. */
static void simba__zk_issue_mdelete(simba__zk_op *op) {
    simba__zk *zk = op->zk;
    simba__zk_rs *r = &op->res[0];
    int n = r->nkids + 2, i, rc;
    char capacity[16];
    size_t plen = strlen(r->path), total = 0;
    zoo_op_t *ops;
    char *paths, *p;
    simba__zk_call *c = simba__zk_call_new(zk, op, SIMBA__ZK_C_MDELETE, 0);
    if (!c) { simba__zk_oom(op); return; }
    for (i = 0; i < r->nkids; i++) total += plen + strlen(r->kids[i].node) + 2;
    c->results = (zoo_op_result_t *)simba__zk_alloc(zk, sizeof(zoo_op_result_t) * (size_t)n);
    c->nresults = n;
    ops = (zoo_op_t *)simba__zk_alloc(zk, sizeof(zoo_op_t) * (size_t)n);
    paths = (char *)simba__zk_alloc(zk, total + 1);
    if (!c->results || !ops || !paths) {
        simba__zk_free(zk, ops);
        simba__zk_free(zk, paths);
        simba__zk_call_refused(c, ZMARSHALLINGERROR, "out of memory");
        return;
    }
    /* first a change of the resource node, whose data watch every reader
       has: a waiter that would take its predecessor's deletion as its grant
       hears of this change before any deletion of the same multi
       (simba__zk_note_event), and forgets its predecessor. The data is
       deleted with the node: its value does not matter. Then the tail first. */
    snprintf(capacity, sizeof capacity, "%d", r->capacity > 0 ? r->capacity : 1);
    zoo_set_op_init(&ops[0], r->path, capacity, (int)strlen(capacity), -1, NULL);
    for (i = 0, p = paths; i < r->nkids; i++) {
        const char *node = r->kids[r->nkids - 1 - i].node;
        size_t k = plen + strlen(node) + 2;
        snprintf(p, k, "%s/%s", r->path, node);
        zoo_delete_op_init(&ops[i + 1], p, -1);
        p += k;
    }
    zoo_delete_op_init(&ops[n - 1], r->path, -1);
    rc = zoo_amulti(zk->zh, n, ops, c->results, simba__zk_on_void, c);
    simba__zk_free(zk, ops);       /* the request is serialized: paths are no longer needed */
    simba__zk_free(zk, paths);
    if (rc != ZOK) simba__zk_call_refused(c, rc, "deleting the resource");
}

/*>>locks.rule: the grant rule (simba_grant_step of simba.h) on a read queue */

static int simba__zk_is_ours(const simba__zk_op *op, const simba__zk_kid *k) {
    return strcmp(k->request, op->request) == 0 && strcmp(k->session, op->session) == 0;
}

/* Walk a queue from its head: granted entries, our position and grant.
   A child named like ours (our session and request id) is ours only if it
   is the node our create returned (r->mine, kept in the mine cache), or,
   when we do not know that name (a create whose answer was lost), if its
   ephemeralOwner is our ZooKeeper session (simba__zk_need_owners stats it
   first). Anyone with create rights can read our names and plant such a
   child: it is someone else's entry and counts like any other. Only a
   second child proven ours (a retried create that still went through) is
   deleted. */
static void simba__zk_eval(simba__zk_op *op, int i) {
    simba__zk *zk = op->zk;
    simba__zk_rs *r = &op->res[i];
    int64_t ahead = 0;
    int k, known = r->mine != NULL;
    r->pos = -1;
    r->granted = 0;
    for (k = 0; k < r->nkids; k++) {
        simba__zk_kid *kid = &r->kids[k];
        int granted = simba_grant_step(&ahead, kid->weight, r->capacity);
        if (op->request && simba__zk_is_ours(op, kid)) {
            int ours = known ? strcmp(r->mine, kid->node) == 0 : (zk->zsid != 0 && kid->owner == zk->zsid);
            if (ours && r->pos < 0) {
                r->pos = k;
                r->granted = granted;
                if (!known) {
                    r->mine = simba__zk_strdup(zk, kid->node);
                    r->czxid = kid->czxid;
                    r->owner = kid->owner;
                    r->was_granted = 0;
                }
                /* a grant is kept until the entry is removed, even if the capacity
                   shrank since (the prefix rule still makes everyone behind wait) */
                if (r->was_granted) r->granted = 1;
            } else if (!known && zk->zsid != 0 && kid->owner == zk->zsid) {
                char path[SIMBA__ZK_PATH_MAX];
                simba__zk_entry_path(r, kid->node, path, sizeof path);
                simba__zk_issue_delete(zk, NULL, path);
            }
        }
    }
}

/* Before evaluating a read whose queues hold children named like ours that
   we cannot tell apart (our node name unknown): stat each of them for its
   ephemeralOwner. Returns 1 if calls went out (phase P_OWNERS). */
static int simba__zk_need_owners(simba__zk_op *op) {
    int i, k, sent = 0;
    if (!op->request) return 0;
    for (i = 0; i < op->nres; i++) {
        simba__zk_rs *r = &op->res[i];
        if (r->mine) continue;
        for (k = 0; k < r->nkids; k++) {
            simba__zk_kid *kid = &r->kids[k];
            char path[SIMBA__ZK_PATH_MAX];
            simba__zk_call *c;
            int rc;
            if (kid->owner != 0 || !simba__zk_is_ours(op, kid)) continue;
            c = simba__zk_call_new(op->zk, op, SIMBA__ZK_C_OWNER, i);
            if (!c) { simba__zk_oom(op); return 1; }
            c->nkids = k;
            simba__zk_entry_path(r, kid->node, path, sizeof path);
            rc = zoo_aexists(op->zk->zh, path, 0, simba__zk_on_stat, c);
            if (rc != ZOK) { simba__zk_call_refused(c, rc, "reading an entry"); return 1; }
            sent = 1;
        }
    }
    if (sent) op->phase = SIMBA__ZK_P_OWNERS;
    return sent;
}

static int simba__zk_held(const simba__zk_rs *r) {
    int64_t ahead = 0;
    int k;
    for (k = 0; k < r->nkids; k++)
        if (!simba_grant_step(&ahead, r->kids[k].weight, r->capacity)) break;
    return k;
}

/* Another session has an entry with our request id (an idempotency key). */
static int simba__zk_key_busy(const simba__zk_op *op) {
    int i, k;
    for (i = 0; i < op->nres; i++)
        for (k = 0; k < op->res[i].nkids; k++) {
            const simba__zk_kid *kid = &op->res[i].kids[k];
            if (strcmp(kid->request, op->request) == 0 && strcmp(kid->session, op->session) != 0) return 1;
        }
    return 0;
}

/* try_only: would a new entry at the tail of every queue be granted now? */
static int simba__zk_grantable_now(const simba__zk_op *op) {
    int i, k;
    for (i = 0; i < op->nres; i++) {
        const simba__zk_rs *r = &op->res[i];
        int64_t ahead = 0;
        for (k = 0; k < r->nkids; k++) simba_grant_step(&ahead, r->kids[k].weight, r->capacity);
        if (!simba_grant_step(&ahead, r->weight, r->capacity)) return 0;
    }
    return 1;
}

static void simba__zk_fill_queue_answer(simba__zk_op *op) {
    simba__zk_rs *r = &op->res[0];
    op->held = simba__zk_held(r);
    op->ahead = r->pos >= 0 ? r->pos : r->nkids;
    op->capacity = r->capacity;
    if (r->nkids > 0 && op->held > 0) snprintf(op->owner, sizeof op->owner, "%s", r->kids[0].session);
}

/*>>locks.enqueue: ENQUEUE (and the answer of ENQUEUE and POLL) */

/* ENQUEUE/POLL: the answer once every resource was evaluated (and stat'ed). */
static void simba__zk_answer(simba__zk_op *op) {
    simba__zk *zk = op->zk;
    int i;
    simba__zk_fill_queue_answer(op);
    for (i = 0; i < op->nres; i++) op->fence[i] = 0;
    if (op->granted) {
        for (i = 0; i < op->nres; i++) {
            if (op->res[i].owner != zk->zsid) {
                /* never claim an entry of another ZooKeeper session, even one of ours */
                simba__zk_finish_status(op, SIMBA_ESESSION, "the entry belongs to an older ZooKeeper session");
                return;
            }
            op->fence[i] = op->res[i].czxid;
        }
    }
    simba__zk_mine_save(op);
    for (i = 0; i < op->nres; i++) simba__zk_mark_granted(op, i);
    if (!op->granted) simba__zk_arm_op(op);
    simba__zk_finish(op);
}

/* After a read (or our create) of every queue. */
static void simba__zk_after_eval(simba__zk_op *op) {
    int i, need_stat = 0;
    op->granted = 1;
    for (i = 0; i < op->nres; i++) if (!op->res[i].granted) op->granted = 0;
    if (op->try_only && !op->granted && op->created) {
        char path[SIMBA__ZK_PATH_MAX];
        op->phase = SIMBA__ZK_P_UNDO;          /* lost a race for a free resource: take it back */
        for (i = 0; i < op->nres; i++) {
            if (!op->res[i].mine) continue;
            simba__zk_entry_path(&op->res[i], op->res[i].mine, path, sizeof path);
            simba__zk_issue_delete(op->zk, op, path);
        }
        return;
    }
    if (op->granted) {
        op->phase = SIMBA__ZK_P_STAT;
        for (i = 0; i < op->nres; i++) {
            char path[SIMBA__ZK_PATH_MAX];
            if (op->res[i].czxid) continue;
            simba__zk_entry_path(&op->res[i], op->res[i].mine, path, sizeof path);
            simba__zk_issue_stat(op, path, i);
            need_stat = 1;
        }
        if (need_stat) return;
    }
    simba__zk_answer(op);
}

/*--- ENQUEUE, POLL ---*/

/* The create flight. parents: 0 none (the fast path: a missing parent fails
   the create and we come back with 2), 1 the resources the read found
   missing, 2 everything from the base path down. */
static void simba__zk_issue_write(simba__zk_op *op, int parents) {
    int i, missing = 0;
    for (i = 0; i < op->nres; i++) if (!op->res[i].exists) missing = 1;
    if (parents == 2) simba__zk_issue_parents(op, 1);
    else if (parents == 1 && missing) simba__zk_issue_parents(op, 0);
    if (op->nres == 1) simba__zk_issue_create1(op);
    else simba__zk_issue_createn(op);
    simba__zk_issue_reads(op);
    op->phase = SIMBA__ZK_P_WRITE;
}

static void simba__zk_enqueue_read_done(simba__zk_op *op) {
    int i, found = 0;
    if (op->status != SIMBA_OK || !simba__zk_read_still_good(op)) { simba__zk_finish(op); return; }
    if (simba__zk_need_owners(op)) return;
    if (simba__zk_key_busy(op)) {
        simba__zk_finish_status(op, SIMBA_EKEYBUSY, "the key belongs to another live session");
        return;
    }
    for (i = 0; i < op->nres; i++) {
        simba__zk_eval(op, i);
        if (op->res[i].pos >= 0) found = 1;
    }
    if (found) {                       /* a retry: answer the entry as it is */
        int complete = 1;
        for (i = 0; i < op->nres; i++) if (op->res[i].pos < 0) complete = 0;
        if (complete) { simba__zk_after_eval(op); return; }
        /* some resource lost its entry (an admin's DELETE): remove the rest,
           then enqueue again; the deletes run before the creates */
        for (i = 0; i < op->nres; i++) {
            char path[SIMBA__ZK_PATH_MAX];
            simba__zk_rs *r = &op->res[i];
            if (r->pos < 0) continue;
            simba__zk_entry_path(r, r->kids[r->pos].node, path, sizeof path);
            simba__zk_issue_delete(op->zk, NULL, path);
            simba__zk_free(op->zk, r->mine);
            r->mine = NULL;
            r->pos = -1;
            r->czxid = r->owner = 0;
        }
        simba__zk_mine_drop(op->zk, op->request, op->session);
    }
    for (i = 0; i < op->nres; i++) {
        if (op->res[i].exists && op->res[i].weight > op->res[i].capacity) {
            simba__zk_finish_status(op, SIMBA_ECAPACITY, "more permits than the resource's capacity");
            return;
        }
    }
    if (op->try_only && !simba__zk_grantable_now(op)) {
        op->granted = 0;
        simba__zk_fill_queue_answer(op);
        simba__zk_finish(op);
        return;
    }
    simba__zk_issue_write(op, 1);
}

static void simba__zk_enqueue_write_done(simba__zk_op *op) {
    int i;
    if (op->status == SIMBA_ENOTFOUND && !op->created && op->attempts < SIMBA__ZK_RETRIES) {
        /* a parent was missing (first use, a DELETE meanwhile, or an empty tenant reaped) */
        op->attempts++;
        op->status = SIMBA_OK;
        op->message[0] = 0;
        simba__zk_issue_write(op, 2);
        return;
    }
    if (op->status != SIMBA_OK) { simba__zk_finish(op); return; }
    op->zk->parents_ok = 1;
    for (i = 0; i < op->nres; i++) {
        simba__zk_eval(op, i);
        if (op->res[i].pos < 0) {
            simba__zk_finish_status(op, SIMBA_ENOTFOUND, "the new entry was deleted at once");
            return;
        }
    }
    simba__zk_after_eval(op);
}

static void simba__zk_poll_read_done(simba__zk_op *op) {
    int i;
    if (op->status != SIMBA_OK) { simba__zk_finish(op); return; }
    if (simba__zk_need_owners(op)) return;
    for (i = 0; i < op->nres; i++) {
        simba__zk_eval(op, i);
        if (op->res[i].pos < 0) {
            simba__zk_mine_drop(op->zk, op->request, op->session);
            simba__zk_finish_status(op, SIMBA_ENOTFOUND, "the entry is gone");
            return;
        }
    }
    simba__zk_after_eval(op);
}

/*>>locks.poll: one read for the POLLs of one resource that the core sends together */

/* A POLL of one resource joins a read of that resource already on its way
   if no event was processed since it went out (same batch): that read is
   as fresh as one of its own would be. The core re-polls every handle on a
   name at once (a resource deleted, a multi-resource request, its recheck
   of holders): one getData + getChildren answers them all. */
static int simba__zk_join_read(simba__zk_op *op) {
    simba__zk *zk = op->zk;
    simba__zk_op *l;
    if (op->kind != SIMBA_OP_POLL || op->nres != 1) return 0;
    for (l = zk->ops; l; l = l->next) {
        if (l == op || l->kind != SIMBA_OP_POLL || l->nres != 1 || l->phase != SIMBA__ZK_P_READ ||
            l->batch != zk->batch || strcmp(l->res[0].path, op->res[0].path) != 0)
            continue;
        op->phase = SIMBA__ZK_P_READ;
        op->pending = 1;                      /* the leader's read */
        op->next_follower = l->followers;
        l->followers = op;
        return 1;
    }
    return 0;
}

/* The leader's read arrived: each follower gets a copy and goes on alone. */
static void simba__zk_share_read(simba__zk_op *op) {
    const simba__zk_rs *src = &op->res[0];
    while (op->followers) {
        simba__zk_op *f = op->followers;
        simba__zk_rs *r = &f->res[0];
        int k;
        op->followers = f->next_follower;
        f->next_follower = NULL;
        if (f->phase != SIMBA__ZK_P_READ) continue;   /* failed meanwhile */
        f->pending = 0;
        r->exists = src->exists;
        r->capacity = src->capacity;
        if (op->status != SIMBA_OK) {
            f->status = op->status;
            snprintf(f->message, sizeof f->message, "%s", op->message);
        }
        simba__zk_free_kids(f->zk, r);
        if (src->nkids > 0 && f->status == SIMBA_OK) {
            r->kids = (simba__zk_kid *)simba__zk_alloc(f->zk, sizeof(simba__zk_kid) * (size_t)src->nkids);
            if (!r->kids) simba__zk_oom(f);
            for (k = 0; r->kids && k < src->nkids; k++) {
                if (simba__zk_parse_kid(f->zk, src->kids[k].node, &r->kids[k]) < 0)
                    simba__zk_oom(f);
                r->nkids = k + 1;
            }
        }
        simba__zk_op_advance(f);
    }
}

static void simba__zk_stat_done(simba__zk_op *op) {
    if (op->status != SIMBA_OK) { simba__zk_finish(op); return; }
    simba__zk_answer(op);
}

static void simba__zk_step_enqueue(simba__zk_op *op) {
    switch (op->phase) {
    case SIMBA__ZK_P_START:
        if (op->fast) { simba__zk_issue_write(op, 0); break; }
        op->phase = SIMBA__ZK_P_READ;
        op->batch = op->zk->batch;
        if (op->kind == SIMBA_OP_ENQUEUE) simba__zk_sync_before_read(op);
        simba__zk_issue_reads(op);
        break;
    case SIMBA__ZK_P_READ: case SIMBA__ZK_P_OWNERS:
        if (op->phase == SIMBA__ZK_P_READ && op->followers) simba__zk_share_read(op);
        if (op->internal) simba__zk_refresh_done(op);
        else if (op->kind == SIMBA_OP_POLL) simba__zk_poll_read_done(op);
        else simba__zk_enqueue_read_done(op);
        break;
    case SIMBA__ZK_P_WRITE: simba__zk_enqueue_write_done(op); break;
    case SIMBA__ZK_P_STAT: simba__zk_stat_done(op); break;
    case SIMBA__ZK_P_UNDO:
        op->granted = 0;
        op->status = SIMBA_OK;             /* whatever the delete said: nothing is held */
        op->res[0].pos = -1;
        simba__zk_fill_queue_answer(op);
        simba__zk_mine_drop(op->zk, op->request, op->session);
        simba__zk_finish(op);
        break;
    default: simba__zk_finish(op); break;
    }
}

/*>>locks.release: RELEASE */

static void simba__zk_release_delete(simba__zk_op *op) {
    char path[SIMBA__ZK_PATH_MAX];
    int i, k, any = 0;
    simba__zk_mine *m = simba__zk_mine_find(op->zk, op->request, op->session);
    op->phase = SIMBA__ZK_P_DELETE;
    if (m) simba__zk_unwatch_self(op->zk, m);
    for (i = 0; i < op->nres; i++) {
        simba__zk_rs *r = &op->res[i];
        if (r->nkids == 0 && r->mine) {            /* from the cache */
            simba__zk_entry_path(r, r->mine, path, sizeof path);
            simba__zk_issue_delete(op->zk, op, path);
            any = 1;
        }
        for (k = 0; k < r->nkids; k++) {
            if (!simba__zk_is_ours(op, &r->kids[k])) continue;
            simba__zk_entry_path(r, r->kids[k].node, path, sizeof path);
            simba__zk_issue_delete(op->zk, op, path);
            any = 1;
        }
    }
    if (!any) simba__zk_finish(op);
}

static void simba__zk_step_release(simba__zk_op *op) {
    simba__zk_mine *m;
    int i, cached = 1;
    switch (op->phase) {
    case SIMBA__ZK_P_START: {
        if ((m = simba__zk_mine_find(op->zk, op->request, op->session)) != NULL) m->releasing = 1;
        simba__zk_mine_load(op);
        for (i = 0; i < op->nres; i++) if (!op->res[i].mine) cached = 0;
        if (cached) { simba__zk_release_delete(op); break; }
        simba__zk_sync_before_read(op);
        for (i = 0; i < op->nres; i++) {
            simba__zk_free(op->zk, op->res[i].mine);
            op->res[i].mine = NULL;
            simba__zk_issue_kids(op, i);
        }
        op->phase = SIMBA__ZK_P_READ;
        break;
    }
    case SIMBA__ZK_P_READ:
        if (op->status != SIMBA_OK || !simba__zk_read_still_good(op)) { simba__zk_finish(op); break; }
        simba__zk_release_delete(op);
        break;
    default:
        if (op->status == SIMBA_OK) simba__zk_mine_drop(op->zk, op->request, op->session);
        else if ((m = simba__zk_mine_find(op->zk, op->request, op->session)) != NULL) m->releasing = 0;
        simba__zk_finish(op);
        break;
    }
}

/*>>locks.admin: INSPECT, SET_CAPACITY, DELETE */

static void simba__zk_inspect_read_done(simba__zk_op *op) {
    simba__zk_rs *r = &op->res[0];
    int64_t ahead = 0;
    int k;
    if (op->status != SIMBA_OK) { simba__zk_finish(op); return; }
    if (!r->exists) { simba__zk_finish_status(op, SIMBA_ENOTFOUND, "no such resource"); return; }
    op->res[0].pos = -1;
    simba__zk_fill_queue_answer(op);
    op->nentries = r->nkids;
    if (r->nkids > 0) {
        op->entries = (simba_holder *)simba__zk_alloc(op->zk, sizeof(simba_holder) * (size_t)r->nkids);
        if (!op->entries) { simba__zk_finish_status(op, SIMBA_ENOMEM, "out of memory"); return; }
    }
    op->phase = SIMBA__ZK_P_STAT;
    for (k = 0; k < r->nkids; k++) {
        simba_holder *h = &op->entries[k];
        const char *tilde = strrchr(r->kids[k].session, '~');
        size_t clen = tilde ? (size_t)(tilde - r->kids[k].session) : strlen(r->kids[k].session);
        char path[SIMBA__ZK_PATH_MAX];
        if (clen > SIMBA_MAX_ID) clen = SIMBA_MAX_ID;
        memcpy(h->client, r->kids[k].session, clen);
        h->client[clen] = 0;
        snprintf(h->session, sizeof h->session, "%s", r->kids[k].session);
        h->weight = r->kids[k].weight;
        h->granted = simba_grant_step(&ahead, r->kids[k].weight, r->capacity);
        if (!h->granted) continue;
        simba__zk_entry_path(r, r->kids[k].node, path, sizeof path);
        simba__zk_issue_stat(op, path, k);      /* the holder's fence: its czxid */
    }
    if (op->pending == 0) simba__zk_finish(op);
}

static void simba__zk_step_inspect(simba__zk_op *op) {
    switch (op->phase) {
    case SIMBA__ZK_P_START: op->phase = SIMBA__ZK_P_READ; simba__zk_issue_reads(op); break;
    case SIMBA__ZK_P_READ: simba__zk_inspect_read_done(op); break;
    default: simba__zk_finish(op); break;
    }
}

static void simba__zk_step_set_capacity(simba__zk_op *op) {
    switch (op->phase) {
    case SIMBA__ZK_P_START:
        op->phase = SIMBA__ZK_P_SET;
        simba__zk_issue_set(op);
        break;
    case SIMBA__ZK_P_SET:
    case SIMBA__ZK_P_CREATE_RES:
        if (op->status == SIMBA_ENOTFOUND && op->attempts < SIMBA__ZK_RETRIES) {
            op->attempts++;
            op->status = SIMBA_OK;
            if (op->phase == SIMBA__ZK_P_SET) {
                /* no such resource yet: create it with the capacity (then set, in case
                   someone else created it first) */
                op->res[0].exists = 0;
                op->phase = SIMBA__ZK_P_CREATE_RES;
                simba__zk_issue_parents(op, 1);
            } else {
                op->phase = SIMBA__ZK_P_SET;
                simba__zk_issue_set(op);
            }
            break;
        }
        if (op->status == SIMBA_OK && op->phase == SIMBA__ZK_P_CREATE_RES) {
            op->phase = SIMBA__ZK_P_SET;
            simba__zk_issue_set(op);
            break;
        }
        simba__zk_finish(op);
        break;
    default: simba__zk_finish(op); break;
    }
}

static void simba__zk_step_delete(simba__zk_op *op) {
    switch (op->phase) {
    case SIMBA__ZK_P_START:
        op->phase = SIMBA__ZK_P_READ;
        simba__zk_issue_kids(op, 0);
        break;
    case SIMBA__ZK_P_READ:
        if (op->status != SIMBA_OK) { simba__zk_finish(op); break; }
        if (!op->res[0].exists) { simba__zk_finish_status(op, SIMBA_ENOTFOUND, "no such resource"); break; }
        op->phase = SIMBA__ZK_P_MDELETE;
        simba__zk_issue_mdelete(op);
        break;
    case SIMBA__ZK_P_MDELETE:
        if (op->status == SIMBA_ENOTFOUND && op->attempts < SIMBA__ZK_RETRIES) {
            op->attempts++;                       /* the queue changed meanwhile: read it again */
            op->status = SIMBA_OK;
            op->phase = SIMBA__ZK_P_READ;
            simba__zk_issue_kids(op, 0);
            break;
        }
        simba__zk_finish(op);
        break;
    default: simba__zk_finish(op); break;
    }
}

/*>>locks.dispatch: ops: running, creation */

/* Runs an op until it waits for the server or is finished. */
static void simba__zk_op_advance(simba__zk_op *op) {
    while (op->pending == 0 && op->phase >= 0) {
        switch (op->kind) {
        case SIMBA_OP_ENQUEUE: case SIMBA_OP_POLL: simba__zk_step_enqueue(op); break;
        case SIMBA_OP_RELEASE: simba__zk_step_release(op); break;
        case SIMBA_OP_INSPECT: simba__zk_step_inspect(op); break;
        case SIMBA_OP_SET_CAPACITY: simba__zk_step_set_capacity(op); break;
        case SIMBA_OP_DELETE: simba__zk_step_delete(op); break;
        case SIMBA_OP_OPEN: case SIMBA_OP_KEEPALIVE: simba__zk_step_session(op); break;
        default: simba__zk_finish(op); break;
        }
    }
}

/* n of a request id "<session>~<n>", -1 for any other form (keys). */
static long long simba__zk_request_n(const char *session, const char *request) {
    size_t sl = strlen(session);
    long long n;
    if (strncmp(request, session, sl) != 0 || request[sl] != '~') return -1;
    if (!simba__zk_parse_uint(request + sl + 1, strlen(request + sl + 1), LLONG_MAX / 2, &n)) return -1;
    return n;
}

/* The fast path: create without reading first. Safe only for a request that
   this backend never sent before (so no entry of it can exist) and whose
   weight fits any capacity (so no SIMBA_ECAPACITY can be due). */
static int simba__zk_can_skip_read(const simba__zk_op *op) {
    const simba__zk *zk = op->zk;
    int i;
    if (op->kind != SIMBA_OP_ENQUEUE || op->try_only || op->req_n < 0) return 0;
    for (i = 0; i < op->nres; i++) if (op->res[i].weight > 1) return 0;
    if (simba__zk_mine_find((simba__zk *)zk, op->request, op->session)) return 0;
    return strcmp(zk->fast_session, op->session) != 0 || op->req_n > zk->fast_max_n;
}

static int simba__zk_op_copy(simba__zk *zk, simba__zk_op *op, const simba_op *src) {
    int i;
    op->zk = zk;
    op->id = src->id;
    op->kind = src->kind;
    op->try_only = src->try_only;
    op->lease_ms = src->lease_ms;
    op->req_n = -1;
    op->tenant = simba__zk_strdup(zk, src->tenant ? src->tenant : simba_tenant(zk->s));
    op->session = simba__zk_strdup(zk, src->session ? src->session : "");
    if (!op->tenant || !op->session) return SIMBA_ENOMEM;
    if (src->request) {
        /* no '_' or '/' in ids (simba_check_id): the entry's node name stays parseable */
        op->request = simba__zk_strdup(zk, src->request);
        if (!op->request) return SIMBA_ENOMEM;
        op->req_n = simba__zk_request_n(op->session, op->request);
    }
    op->nres = src->nres;                     /* the core validated the op: trusted */
    for (i = 0; i < op->nres; i++) {
        simba__zk_rs *r = &op->res[i];
        r->name = simba__zk_strdup(zk, src->res[i].name);
        r->path = simba__zk_res_path(zk, op->tenant, src->res[i].name);
        /* the core's limits keep every path below SIMBA__ZK_PATH_MAX: NULL is no memory */
        if (!r->name || !r->path) return SIMBA_ENOMEM;
        /* ops that create nothing (POLL, RELEASE, INSPECT, DELETE) carry no capacity */
        r->want_capacity = src->res[i].capacity > 0 ? src->res[i].capacity : 1;
        r->capacity = r->want_capacity;
        r->weight = src->res[i].weight;
        r->pos = -1;
    }
    return SIMBA_OK;
}

/*>>wakeups: watches -> one read per resource per event (refresh), grants pushed with simba_backend_granted, the baton, the mutex hand-off */

/* What a node event means for waiters that know their predecessor: its
   deletion grants them; a change of the resource node (capacity, deletion) or
   the deletion of our own entry means they must read again. ZooKeeper
   delivers one client's events in the order the changes happened. */
/* The most entries one event picks from the index (simba__zk_ix_collect);
   more than that, and it asks every entry (each check is in the one
   function both ways use). */
enum { SIMBA__ZK_HITS = 8 };

/* One event (fired, or replayed from the answer of the call that set the
   watch) for one client: only the handles whose watch it fires are
   concerned, and all of them are answered from ONE read of the resource
   (simba__zk_refresh_done), never one read per handle. A mutex waiter whose
   only predecessor went is granted with no read at all. The core re-polls
   the name (every handle on it) only where a read of ours cannot answer:
   our own entry gone (a holder must hear LOST), the resource node deleted,
   and multi-resource requests. */
/* What one event is, and what it found so far (simba__zk_event_one). */
typedef struct simba__zk_ev {
    int type;
    const char *path, *node;   /* node: the entry, NULL for the resource node */
    size_t rlen;               /* the resource's path is path's first rlen bytes */
    uint32_t rkey;
    int claimed, to_core, refresh;
} simba__zk_ev;

/* The functions of this section, so that its sub-sections can follow the
   vocabulary of docs/backends.md whatever calls what. */
static void simba__zk_queue_name(simba__zk *zk, simba__zk_wake **list, const char *name);
static void simba__zk_queue_wake(simba__zk *zk, const char *name);
static void simba__zk_free_names(simba__zk *zk, simba__zk_wake **list);
static void simba__zk_deliver_wakes(simba__zk *zk);
static int simba__zk_split_path(simba__zk *zk, const char *path, char *name, size_t cap, size_t *rlen);
static int simba__zk_path_is(const char *path, const char *dir, const char *node);
static void simba__zk_note_one(simba__zk *zk, simba__zk_mine *m, int type, const char *path);
static void simba__zk_note_event(simba__zk *zk, int type, const char *path, int entry);
static int simba__zk_mine_on(const simba__zk_mine *m, const char *path, size_t rlen, uint32_t rkey);
static int simba__zk_fires(const simba__zk_mine *m, int type, const char *node);
static int simba__zk_event_hits(const simba__zk *zk, const char *path, simba__zk_mine **hit);
static int simba__zk_is_head_mark(const char *value, int len);
static int simba__zk_probe_head(simba__zk *zk, simba__zk_mine *m, const char *node);
static void simba__zk_event_one(simba__zk *zk, simba__zk_mine *m, simba__zk_ev *e);
static void simba__zk_node_event(simba__zk *zk, int type, const char *path);
static int simba__zk_answer_one(simba__zk *zk, simba__zk_mine *m, const simba__zk_ev *e, const char *name, const struct Stat *st, int head);
static void simba__zk_watch_answer(simba__zk *zk, const char *path, int rc, const struct Stat *st, const char *value, int len);
static void simba__zk_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
static void simba__zk_watch_self(simba__zk *zk, simba__zk_mine *m);
static void simba__zk_self_answer(simba__zk_call *c, int rc);
static int simba__zk_entry_watched_by_other(const simba__zk *zk, const simba__zk_mine *m);
static void simba__zk_on_unwatched(int rc, const void *data);
static void simba__zk_unwatch_self(simba__zk *zk, simba__zk_mine *m);
static void simba__zk_arm_mine(simba__zk *zk, simba__zk_mine *m, const simba__zk_rs *r, const char *target);
static const char *simba__zk_target(const simba__zk_rs *r, int pos, int pred_granted);
static void simba__zk_set_pred(simba__zk *zk, simba__zk_mine *m, const simba__zk_rs *r);
static void simba__zk_arm_op(simba__zk_op *op);
static void simba__zk_arm_watch(simba__zk_op *op, int i);
static void simba__zk_mark_at(simba__zk *zk, const char *respath, const char *node, const char *data);
static void simba__zk_issue_mark(simba__zk *zk, const simba__zk_rs *r, const char *node);
static void simba__zk_mark_head(simba__zk *zk, const char *respath, const char *node);
static void simba__zk_mark_granted(simba__zk_op *op, int i);
static simba__zk_mine *simba__zk_mine_by_node(simba__zk *zk, const char *path, const char *node);
static int simba__zk_refresh_one(simba__zk_op *op, simba__zk_mine *m, int k, int granted, int pred_granted);
static void simba__zk_refresh_done(simba__zk_op *op);
static void simba__zk_start_refresh(simba__zk *zk, const char *name);
static void simba__zk_start_refreshes(simba__zk *zk);
static void simba__zk_deliver_grants(simba__zk *zk);
static int simba__zk_confirm_head(simba__zk *zk, simba__zk_mine *m, simba__zk_op *op);
static void simba__zk_grant_unread(simba__zk *zk, simba__zk_mine *m);
static void simba__zk_answer_granted(simba__zk_op *op, const simba__zk_mine *m);
static void simba__zk_confirmed(simba__zk_call *c, simba__zk_op *op, int rc);
static int simba__zk_grant_from_watch(simba__zk_op *op);

/*>>wakeups.arm: what a waiter watches: its predecessor (the baton), its own entry, the marks a successor reads */

/* Sets the watch a single-resource waiter needs, unless it is set already:
   `target` is the entry ahead of it, or "" for the children list. The watch
   is set after our read, so a change in between is caught by the answer to
   the watch-setting call itself (simba__zk_watch_answer, and the children
   list compared with the queue we decided on). */
/* A mutex waiter watches its own entry too. Then the predecessor's
   NodeDeleted alone grants it, with no exists to confirm our entry is still
   there (simba__zk_confirm_head): ZooKeeper tells one session its events in
   the order the changes happened, so if our entry had been deleted (by
   hand, by a client with write access) before the predecessor, its
   NodeDeleted would have come first (simba__zk_node_event: self = -1, and
   the pred is forgotten). Trusted only when set while the entry was there
   (ZOK) and since the last session event (replays after a reconnect come in
   no useful order). One exists per entry, sent while it waits; removed
   before we change or delete the entry ourselves (simba__zk_unwatch_self),
   so that our own mark or release is no notification to ourselves. */
static void simba__zk_watch_self(simba__zk *zk, simba__zk_mine *m) {
    char path[SIMBA__ZK_PATH_MAX];
    simba__zk_call *c;
    if (m->self || m->nres != 1 || m->granted || m->releasing || !m->path[0] || !m->node[0] || !zk->zh || !zk->up)
        return;
    c = simba__zk_call_new(zk, NULL, SIMBA__ZK_C_SELF, 0);
    if (!c) return;
    c->epoch = zk->epoch;
    c->name = simba__zk_strdup(zk, m->path[0]);
    c->path = simba__zk_strdup(zk, m->node[0]);
    snprintf(path, sizeof path, "%s/%s", m->path[0], m->node[0]);
    if (!c->name || !c->path || zoo_awexists(zk->zh, path, simba__zk_watcher, zk, simba__zk_on_stat, c) != ZOK) {
        simba__zk_call_free(zk, c);
        return;
    }
    m->self = 1;
    m->self_epoch = zk->epoch;
}

static void simba__zk_self_answer(simba__zk_call *c, int rc) {
    simba__zk *zk = c->zk;
    simba__zk_mine *m;
    if (zk->closing || c->gen != zk->gen || !c->name || !c->path) return;
    m = simba__zk_mine_by_node(zk, c->name, c->path);
    if (!m || m->self != 1 || m->self_epoch != c->epoch || c->epoch != zk->epoch) return;
    m->self = rc == ZOK ? 2 : rc == ZNONODE ? -1 : 0;
}

/* Does another waiter of ours watch m's entry? The server keeps one watch
   per session and node: removing ours would remove its. */
static int simba__zk_entry_watched_by_other(const simba__zk *zk, const simba__zk_mine *m) {
    uint32_t key = simba__zk_entry_key(m->path[0], m->node[0]);
    const simba__zk_link *l;
    for (l = simba__zk_ix_first(zk, SIMBA__ZK_K_WATCH, key); l; l = simba__zk_ix_match(l->next, SIMBA__ZK_K_WATCH, key)) {
        const simba__zk_mine *o = l->m;
        if (o != m && o->nres == 1 && o->watch && o->path[0] && strcmp(o->watch, m->node[0]) == 0 &&
            strcmp(o->path[0], m->path[0]) == 0)
            return 1;
    }
    return 0;
}

static void simba__zk_on_unwatched(int rc, const void *data) { (void)rc; (void)data; }

/* We are about to mark or delete our own entry: take our watch on it off
   first (sent ahead of the change, so the server never fires it). Only
   "remove all" removes it at the server: zoo_aremove_watches with a
   watcher sends CHECK_WATCHES and forgets it locally, and the server would
   still fire it. libzookeeper declares the completion as a pointer to a
   void_completion_t but uses the pointer as the function itself (3.8; the
   header says void_completion_t *): hence the union. */
static void simba__zk_unwatch_self(simba__zk *zk, simba__zk_mine *m) {
    char path[SIMBA__ZK_PATH_MAX];
    union { void_completion_t fn; void_completion_t *declared; } done;
    int had = m->self > 0;
    if (m->self > 0) m->self = 0;
    if (!had || !zk->zh || !m->path[0] || !m->node[0] || simba__zk_entry_watched_by_other(zk, m)) return;
    snprintf(path, sizeof path, "%s/%s", m->path[0], m->node[0]);
    done.fn = simba__zk_on_unwatched;
    (void)zoo_aremove_all_watches(zk->zh, path, ZWATCHTYPE_DATA, 0, done.declared, NULL);
}

static void simba__zk_arm_mine(simba__zk *zk, simba__zk_mine *m, const simba__zk_rs *r, const char *target) {
    char path[SIMBA__ZK_PATH_MAX];
    simba__zk_call *c;
    int rc;
    if (m->armed && m->watch && strcmp(m->watch, target) == 0) return;
    if (!m->watch || strcmp(m->watch, target) != 0) {
        simba__zk_free(zk, m->watch);
        m->watch = simba__zk_strdup(zk, target);
        m->watch_ver = 0;
        simba__zk_mine_keys(zk, m);
        if (!m->watch) return;                /* the core's recheck period covers us */
    }
    c = simba__zk_call_new(zk, NULL, target[0] ? SIMBA__ZK_C_WATCH_PRED : SIMBA__ZK_C_WATCH_KIDS, 0);
    if (!c) return;
    if (target[0]) simba__zk_entry_path(r, target, path, sizeof path);
    else snprintf(path, sizeof path, "%s", r->path);
    c->name = simba__zk_strdup(zk, r->name);
    c->path = simba__zk_strdup(zk, path);
    if (!c->name || !c->path) { simba__zk_call_free(zk, c); return; }
    if (target[0]) {
        rc = zoo_awget(zk->zh, path, simba__zk_watcher, zk, simba__zk_on_data, c);
    } else {
        c->nkids = r->nkids;
        c->kids_hash = simba__zk_rs_hash(r);
        rc = zoo_awget_children(zk->zh, path, simba__zk_watcher, zk, simba__zk_on_kids, c);
    }
    if (rc != ZOK) { simba__zk_call_free(zk, c); return; }
    m->armed = 1;
    if (target[0] && m->cap1) simba__zk_watch_self(zk, m);
}

/* What a waiter at position pos (not granted) of a read queue waits for.
   Capacity 1: only its predecessor's deletion can make it the head. Larger
   capacities, the baton: the first waiter not granted (its predecessor is
   granted) watches the children list, where every release shows; every
   waiter behind watches its predecessor's entry, which changes when that
   one is granted (simba__zk_mark_granted) or leaves. So a release wakes one
   client, and each grant wakes at most the next in line. */
static const char *simba__zk_target(const simba__zk_rs *r, int pos, int pred_granted) {
    if (pos <= 0) return "";
    if (r->capacity > 1 && pred_granted) return "";
    return r->kids[pos - 1].node;
}

/* A mutex waiter with exactly one entry ahead: that entry's deletion alone
   grants it (see simba__zk_pred_grants). */
static void simba__zk_set_pred(simba__zk *zk, simba__zk_mine *m, const simba__zk_rs *r) {
    (void)simba__zk_mine_set_pred(zk, m, r->kids[0].node);
}

/* ENQUEUE/POLL answered "waiting": arm what each resource needs. */
static void simba__zk_arm_op(simba__zk_op *op) {
    simba__zk *zk = op->zk;
    simba__zk_mine *m = simba__zk_mine_find(zk, op->request, op->session);
    simba__zk_rs *r = &op->res[0];
    int i;
    if (op->nres != 1 || !m || m->nres != 1) {
        for (i = 0; i < op->nres; i++) simba__zk_arm_watch(op, i);
        return;
    }
    if (r->granted || r->pos < 0) return;
    m->stale = 0;
    m->cap1 = r->capacity == 1;
    simba__zk_arm_mine(zk, m, r, simba__zk_target(r, r->pos, simba__zk_held(r) >= r->pos));
}

/* A waiter of a multi-resource request (the core re-polls it on every
   event of its resources): with capacity 1 its predecessor, otherwise the
   children list. */
static void simba__zk_arm_watch(simba__zk_op *op, int i) {
    simba__zk *zk = op->zk;
    simba__zk_rs *r = &op->res[i];
    char path[SIMBA__ZK_PATH_MAX];
    int pred = r->capacity == 1 && r->pos > 0;
    simba__zk_call *c;
    int rc;
    if (r->granted || r->pos < 0) return;
    c = simba__zk_call_new(zk, NULL, pred ? SIMBA__ZK_C_WATCH_PRED : SIMBA__ZK_C_WATCH_KIDS, i);
    if (!c) return;                       /* the core's recheck period covers us */
    if (pred) simba__zk_entry_path(r, r->kids[r->pos - 1].node, path, sizeof path);
    else snprintf(path, sizeof path, "%s", r->path);
    c->name = simba__zk_strdup(zk, r->name);
    c->path = simba__zk_strdup(zk, path);
    if (!c->name || !c->path) { simba__zk_call_free(zk, c); return; }
    if (pred) {
        rc = zoo_awget(zk->zh, path, simba__zk_watcher, zk, simba__zk_on_data, c);
    } else {
        c->nkids = r->nkids;
        c->kids_hash = simba__zk_rs_hash(r);
        rc = zoo_awget_children(zk->zh, r->path, simba__zk_watcher, zk, simba__zk_on_kids, c);
    }
    if (rc != ZOK) simba__zk_call_free(zk, c);
}

/* The baton: an entry granted (at this resource) with someone behind it in
   the read sets its data, which fires the data watch of its successor (a
   waiter not at the head watches its predecessor). Capacity 1 needs none:
   the successor waits for the deletion. A notification only: grants are
   always decided by the prefix rule on a read. */
static void simba__zk_mark_at(simba__zk *zk, const char *respath, const char *node, const char *data) {
    char path[SIMBA__ZK_PATH_MAX];
    simba__zk_call *c;
    simba__zk_mine *m = simba__zk_mine_by_node(zk, respath, node);
    if (!zk->zh) return;
    if (m) simba__zk_unwatch_self(zk, m);
    c = simba__zk_call_new(zk, NULL, SIMBA__ZK_C_MARK, 0);
    if (!c) return;
    snprintf(path, sizeof path, "%s/%s", respath, node);
    if (zoo_aset(zk->zh, path, data, 1, -1, simba__zk_on_stat, c) != ZOK) simba__zk_call_free(zk, c);
}

static void simba__zk_issue_mark(simba__zk *zk, const simba__zk_rs *r, const char *node) {
    simba__zk_mark_at(zk, r->path, node, "g");
}

/* The head mark: our entry, granted at capacity 1, was the first of the
   queue (a fact whatever the capacity later: nobody can get ahead of it
   again). Its successor watches it, and takes it as its pred from this
   alone (simba__zk_probe_head): the next hand-off needs no read. */
static void simba__zk_mark_head(simba__zk *zk, const char *respath, const char *node) {
    simba__zk_mark_at(zk, respath, node, "h");
}

static void simba__zk_mark_granted(simba__zk_op *op, int i) {
    const simba__zk_rs *r = &op->res[i];
    if (op->status != SIMBA_OK || !r->granted || r->was_granted || r->pos < 0 || r->pos + 1 >= r->nkids || !r->mine)
        return;
    if (r->capacity > 1) simba__zk_issue_mark(op->zk, r, r->mine);
    else if (r->pos == 0) simba__zk_mark_head(op->zk, r->path, r->mine);
}

/*>>wakeups.fire: what a watch event means for our waiters: one read per resource per event (the refresh) */

/* The simba name of a node path under our tenant, and the length of its
   resource node's path; 0 if the path is none of ours. */
static int simba__zk_split_path(simba__zk *zk, const char *path, char *name, size_t cap, size_t *rlen) {
    size_t bl = strlen(zk->base), tl = strlen(zk->tenant_enc);
    const char *p, *slash;
    if (strncmp(path, zk->base, bl) != 0 || path[bl] != '/') return 0;
    p = path + bl + 1;
    if (strncmp(p, zk->tenant_enc, tl) != 0 || p[tl] != '/') return 0;
    p += tl + 1;
    slash = strchr(p, '/');
    if (!simba__zk_decode(name, cap, p, slash ? (size_t)(slash - p) : strlen(p))) return 0;
    if (simba_check_name(name) != SIMBA_OK) return 0;     /* read back from the server: no name of ours */
    *rlen = slash ? (size_t)(slash - path) : strlen(path);
    return 1;
}

/* path is dir + "/" + node. */
static int simba__zk_path_is(const char *path, const char *dir, const char *node) {
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && path[n] == '/' && strcmp(path + n + 1, node) == 0;
}

static void simba__zk_note_one(simba__zk *zk, simba__zk_mine *m, int type, const char *path) {
    if (!m->pred || m->nres != 1 || !m->path[0]) return;
    if (type == ZOO_DELETED_EVENT && simba__zk_path_is(path, m->path[0], m->pred)) m->pred_gone = 1;
    else if ((type == ZOO_DELETED_EVENT && m->node[0] && simba__zk_path_is(path, m->path[0], m->node[0])) ||
             strcmp(path, m->path[0]) == 0)
        simba__zk_forget_pred(zk, m);
}

/* An event on an entry concerns the waiters whose pred or own entry it is;
   one on the resource node, all of them. */
static void simba__zk_note_event(simba__zk *zk, int type, const char *path, int entry) {
    simba__zk_mine *hit[SIMBA__ZK_HITS], *m;
    int n = SIMBA__ZK_HITS + 1, i;
    if (zk->npred == 0) return;
    if (entry) {
        uint32_t key = simba__zk_key(path, strlen(path), NULL);   /* the key of (resource, entry) */
        n = simba__zk_ix_collect(zk, SIMBA__ZK_K_PRED, key, hit, 0, SIMBA__ZK_HITS);
        n = simba__zk_ix_collect(zk, SIMBA__ZK_K_OWN, key, hit, n, SIMBA__ZK_HITS);
    }
    if (n <= SIMBA__ZK_HITS) {
        for (i = 0; i < n; i++) simba__zk_note_one(zk, hit[i], type, path);
        return;
    }
    for (m = zk->mine; m && zk->npred > 0; m = m->next) simba__zk_note_one(zk, m, type, path);
}

/* Is m on the resource of path's first rlen bytes (whose key is rkey)? */
static int simba__zk_mine_on(const simba__zk_mine *m, const char *path, size_t rlen, uint32_t rkey) {
    int i;
    if (m->nres == 1) return m->path_key == rkey && m->path[0] && strlen(m->path[0]) == rlen &&
                             strncmp(m->path[0], path, rlen) == 0;
    for (i = 0; i < m->nres; i++)
        if (m->path[i] && strlen(m->path[i]) == rlen && strncmp(m->path[i], path, rlen) == 0) return 1;
    return 0;
}

/* Does an event on `node` of the resource (NULL: the resource node itself)
   fire m's armed watch? */
static int simba__zk_fires(const simba__zk_mine *m, int type, const char *node) {
    if (!m->armed || !m->watch) return 0;
    if (!node) return type == ZOO_CHILD_EVENT && m->watch[0] == 0;
    return strcmp(m->watch, node) == 0;
}

/* The entries an event on an entry (node) of a resource can concern: ours
   (own) and those that watch it. Returns how many (> SIMBA__ZK_HITS: ask
   them all). */
static int simba__zk_event_hits(const simba__zk *zk, const char *path, simba__zk_mine **hit) {
    uint32_t key = simba__zk_key(path, strlen(path), NULL);
    int n;
    if (zk->nmulti > 0) return SIMBA__ZK_HITS + 1;   /* a request of several resources may be on it */
    n = simba__zk_ix_collect(zk, SIMBA__ZK_K_OWN, key, hit, 0, SIMBA__ZK_HITS);
    return simba__zk_ix_collect(zk, SIMBA__ZK_K_WATCH, key, hit, n, SIMBA__ZK_HITS);
}

static int simba__zk_is_head_mark(const char *value, int len) { return value && len == 1 && value[0] == 'h'; }

/* The entry a mutex waiter watches (its predecessor at our last read) was
   marked: if the mark says it was the head (simba__zk_mark_head), nothing
   is ahead of it any more (sequence numbers only grow, a deleted entry never
   comes back), so its deletion alone makes us the head, as for the pred of
   simba__zk_pred_grants: no read of the queue. Taken as pred now (so its
   deletion cannot be mistaken for a plain one), usable once the data read
   back by re-arming the watch is the head mark. What else could make that
   wrong is heard first, as for any pred (simba__zk_note_event): a DELETE's
   multi changes the resource node (our read's data watch) before it deletes
   anything. Returns 0 if this is no case for it (the caller reads). */
static int simba__zk_probe_head(simba__zk *zk, simba__zk_mine *m, const char *node) {
    char path[SIMBA__ZK_PATH_MAX];
    simba__zk_call *c;
    if (!m->cap1 || m->stale || !m->watch || strcmp(m->watch, node) != 0 || !m->czxid[0] || m->owner != zk->zsid ||
        zk->zsid == 0 || !zk->zh || !zk->up)
        return 0;
    if (m->pred && strcmp(m->pred, node) != 0) return 0;
    if (!m->pred) {
        if (!simba__zk_mine_set_pred(zk, m, node)) return 0;
        m->probe = 1;
    }
    snprintf(path, sizeof path, "%s/%s", m->path[0], node);
    c = simba__zk_call_new(zk, NULL, SIMBA__ZK_C_WATCH_PRED, 0);
    if (!c) { simba__zk_forget_pred(zk, m); return 0; }
    c->name = simba__zk_strdup(zk, m->name);
    c->path = simba__zk_strdup(zk, path);
    if (!c->name || !c->path || zoo_awget(zk->zh, path, simba__zk_watcher, zk, simba__zk_on_data, c) != ZOK) {
        simba__zk_call_free(zk, c);
        simba__zk_forget_pred(zk, m);
        return 0;
    }
    m->armed = 1;
    return 1;
}

/* One entry of ours and one event (any entry: every check is here; the
   index only picks which entries to ask). */
static void simba__zk_event_one(simba__zk *zk, simba__zk_mine *m, simba__zk_ev *e) {
    if (!simba__zk_mine_on(m, e->path, e->rlen, e->rkey)) return;
    if (m->nres != 1) { e->to_core = 1; return; }
    if (e->node && m->node[0] && strcmp(e->node, m->node[0]) == 0) {
        e->claimed = 1;                              /* our own entry: deleted by someone else? */
        if (e->type == ZOO_DELETED_EVENT && !m->releasing) e->to_core = 1;
        if (m->self > 0) m->self = e->type == ZOO_DELETED_EVENT ? -1 : 0;   /* our watch on it fired */
        return;
    }
    if (!e->node && e->type == ZOO_CHANGED_EVENT && m->granted && !m->releasing) {
        /* a holder's only watch on the resource fired (a capacity change, or
           a DELETE's multi, which changes the node first): the core's POLL
           reads again, and hears LOST if the entry went with it */
        e->to_core = 1;
        return;
    }
    if (m->granted || m->releasing) return;         /* a leaving waiter waits for nothing */
    if (!e->node && e->type == ZOO_CHANGED_EVENT) {  /* the capacity: every waiter looks again */
        m->stale = e->refresh = e->claimed = 1;
        return;
    }
    if (!simba__zk_fires(m, e->type, e->node)) return;
    m->armed = 0;
    e->claimed = 1;
    if (m->pred && m->pred_gone && !m->probe) simba__zk_mine_due(zk, m, 2);
    else if (e->type == ZOO_CHANGED_EVENT && simba__zk_probe_head(zk, m, e->node)) return;
    else m->stale = e->refresh = 1;
}

static void simba__zk_node_event(simba__zk *zk, int type, const char *path) {
    char name[SIMBA_MAX_NAME + 1];
    simba__zk_mine *hit[SIMBA__ZK_HITS], *m;
    simba__zk_ev e;
    int n = SIMBA__ZK_HITS + 1, i;
    memset(&e, 0, sizeof e);
    if (!path || !simba__zk_split_path(zk, path, name, sizeof name, &e.rlen)) return;
    e.type = type;
    e.path = path;
    e.node = path[e.rlen] == '/' ? path + e.rlen + 1 : NULL;
    e.rkey = simba__zk_key(path, e.rlen, NULL);
    simba__zk_note_event(zk, type, path, e.node != NULL);
    if (!e.node && type != ZOO_CHILD_EVENT && type != ZOO_CHANGED_EVENT) e.to_core = 1;   /* deleted, created */
    if (e.node) n = simba__zk_event_hits(zk, path, hit);
    if (n <= SIMBA__ZK_HITS)
        for (i = 0; i < n; i++) simba__zk_event_one(zk, hit[i], &e);
    else
        for (m = zk->mine; m; m = m->next) simba__zk_event_one(zk, m, &e);
    if (!e.claimed && !e.to_core) {
        /* a watch nobody owns any more (its waiter moved on or left); if a
           waiter of ours lost track of its own, one read puts it right */
        for (m = zk->mine; m; m = m->next)
            if (m->nres == 1 && !m->granted && !m->releasing && !m->armed && simba__zk_mine_on(m, path, e.rlen, e.rkey))
                m->stale = e.refresh = 1;
    }
    if (e.to_core) simba__zk_queue_wake(zk, name);
    if (e.refresh) simba__zk_queue_name(zk, &zk->refreshes, name);
}

/* One entry of ours and the answer to a data watch on `node` (see
   simba__zk_watch_answer). Returns 1 if the answer is to be replayed as
   the event it stands for. */
static int simba__zk_answer_one(simba__zk *zk, simba__zk_mine *m, const simba__zk_ev *e, const char *name,
                                const struct Stat *st, int head) {
    const char *node = e->node;
    if (m->nres != 1 || !simba__zk_mine_on(m, e->path, e->rlen, e->rkey) || !simba__zk_fires(m, ZOO_CHANGED_EVENT, node))
        return 0;
    if (m->pred && strcmp(m->pred, node) == 0) {
        if (head || !m->probe) {                  /* the pred is (confirmed) the head */
            m->probe = 0;
            m->watch_ver = st->version;
            return 0;
        }
        simba__zk_forget_pred(zk, m);             /* marked, but not as the head: read */
        m->stale = 1;
        simba__zk_queue_name(zk, &zk->refreshes, name);
        return 0;
    }
    if (st->version <= m->watch_ver) return 0;
    m->watch_ver = st->version;                   /* once per mark: a kept grant is marked for good */
    if (head && !m->pred && !m->granted && !m->releasing && m->cap1 && !m->stale && m->czxid[0] &&
        m->owner == zk->zsid && zk->zsid != 0)
        /* marked as the head before our watch: its data is in hand */
        return !simba__zk_mine_set_pred(zk, m, node);
    return 1;
}

/* The answer to a data watch set on an entry: gone already, or marked
   (granted) since the version we reacted to: the event happened before the
   watch, replay it. */
static void simba__zk_watch_answer(simba__zk *zk, const char *path, int rc, const struct Stat *st, const char *value,
                                   int len) {
    char name[SIMBA_MAX_NAME + 1];
    simba__zk_mine *hit[SIMBA__ZK_HITS], *m;
    simba__zk_ev e;
    int fire = 0, head = rc == ZOK && simba__zk_is_head_mark(value, len), n, i;
    if (rc == ZNONODE) { simba__zk_node_event(zk, ZOO_DELETED_EVENT, path); return; }
    memset(&e, 0, sizeof e);
    if (rc != ZOK || !st || !simba__zk_split_path(zk, path, name, sizeof name, &e.rlen) || path[e.rlen] != '/') return;
    e.path = path;
    e.node = path + e.rlen + 1;
    e.rkey = simba__zk_key(path, e.rlen, NULL);
    n = simba__zk_event_hits(zk, path, hit);
    if (n <= SIMBA__ZK_HITS)
        for (i = 0; i < n; i++) fire |= simba__zk_answer_one(zk, hit[i], &e, name, st, head);
    else
        for (m = zk->mine; m; m = m->next) fire |= simba__zk_answer_one(zk, m, &e, name, st, head);
    if (fire) simba__zk_node_event(zk, ZOO_CHANGED_EVENT, path);
}

/* The library calls this for session state changes (global watcher) and for
   the watches we set. Only flags and wake-ups here: the core hears of them
   after zookeeper_process() returns. */
static void simba__zk_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    simba__zk *zk = (simba__zk *)ctx;
    if (!zk || zk->magic != SIMBA__ZK_MAGIC || zk->closing || zh != zk->zh) return;
    if (type == ZOO_SESSION_EVENT) simba__zk_on_session_event(zk, zh, state);
    else if (path && *path && (type == ZOO_CREATED_EVENT || type == ZOO_DELETED_EVENT || type == ZOO_CHANGED_EVENT ||
                               type == ZOO_CHILD_EVENT))
        simba__zk_node_event(zk, type, path);   /* not the library's own "watch removed" */
}

static simba__zk_mine *simba__zk_mine_by_node(simba__zk *zk, const char *path, const char *node) {
    uint32_t key = simba__zk_entry_key(path, node);
    simba__zk_link *l;
    for (l = simba__zk_ix_first(zk, SIMBA__ZK_K_OWN, key); l; l = simba__zk_ix_match(l->next, SIMBA__ZK_K_OWN, key)) {
        simba__zk_mine *m = l->m;
        if (m->nres == 1 && m->path[0] && m->node[0] && strcmp(m->node[0], node) == 0 && strcmp(m->path[0], path) == 0)
            return m;
    }
    return NULL;
}

/* One waiter of ours at position k of a refresh's read. Returns 1 if it is
   granted now (told to the core with its fence in simba__zk_deliver_grants). */
static int simba__zk_refresh_one(simba__zk_op *op, simba__zk_mine *m, int k, int granted, int pred_granted) {
    simba__zk *zk = op->zk;
    simba__zk_rs *r = &op->res[0];
    m->stale = 0;
    if (m->granted) return 0;
    if (granted) {
        if (!m->czxid[0] || m->owner != zk->zsid || zk->zsid == 0) {
            simba__zk_queue_wake(zk, r->name);      /* fence or owner unknown: the core's POLL finds out */
            return 0;
        }
        simba__zk_forget_pred(zk, m);
        m->granted = 1;
        simba__zk_mine_due(zk, m, 1);
        return 1;
    }
    m->cap1 = r->capacity == 1;
    if (r->capacity == 1 && k == 1 && r->nkids > 1 && m->czxid[0] && m->owner == zk->zsid && zk->zsid != 0) {
        if (!m->pred || strcmp(m->pred, r->kids[0].node) != 0) simba__zk_set_pred(zk, m, r);
    } else {
        simba__zk_forget_pred(zk, m);
    }
    simba__zk_arm_mine(zk, m, r, simba__zk_target(r, k, pred_granted));
    return 0;
}

/* The read of a refresh: walk the queue once, answer every stale waiter of
   ours from it (and a waiter of ours right behind one granted now), mark
   new grants that have a foreign successor. A stale waiter not in the
   queue lost its entry: the core's POLL says so. */
static void simba__zk_refresh_done(simba__zk_op *op) {
    simba__zk *zk = op->zk;
    simba__zk_rs *r = &op->res[0];
    simba__zk_mine *m;
    int64_t ahead = 0;
    int k, prev_granted = 1, cascade = 0, stale = 0;
    if (op->status != SIMBA_OK || !r->exists) {
        simba__zk_queue_wake(zk, r->name);
        simba__zk_finish(op);
        return;
    }
    for (m = zk->mine; m; m = m->next) if (m->stale && m->nres == 1 && m->path[0] && strcmp(m->path[0], r->path) == 0) stale++;
    for (k = 0; k < r->nkids && (stale > 0 || cascade); k++) {
        simba__zk_kid *kid = &r->kids[k];
        int granted = simba_grant_step(&ahead, kid->weight, r->capacity), now = 0;
        m = NULL;
        if (cascade || (stale > 0 && strcmp(kid->session, zk->session) == 0)) m = simba__zk_mine_by_node(zk, r->path, kid->node);
        if (m && (m->stale || cascade)) {
            if (m->stale) stale--;
            now = simba__zk_refresh_one(op, m, k, granted, prev_granted);
        }
        cascade = 0;
        if (now && r->capacity == 1 && k == 0 && k + 1 < r->nkids) simba__zk_mark_head(zk, r->path, kid->node);
        if (now && r->capacity > 1 && k + 1 < r->nkids) {
            if (strcmp(r->kids[k + 1].session, zk->session) == 0) cascade = 1;   /* ours: answered from this read */
            else simba__zk_issue_mark(zk, r, kid->node);
        }
        prev_granted = granted;
    }
    if (stale > 0) {
        for (m = zk->mine; m; m = m->next)
            if (m->stale && m->nres == 1 && m->path[0] && strcmp(m->path[0], r->path) == 0) m->stale = 0;
        simba__zk_queue_wake(zk, r->name);
    }
    simba__zk_finish(op);
}

/* A read of one resource for the waiters of ours its events concerned: an
   op of our own (internal: no reply to the core). */
static void simba__zk_start_refresh(simba__zk *zk, const char *name) {
    simba__zk_op *op = simba__zk_op_new(zk);
    simba__zk_rs *r;
    if (!op) { simba__zk_queue_wake(zk, name); return; }
    r = &op->res[0];
    op->zk = zk;
    op->internal = 1;
    op->kind = SIMBA_OP_POLL;
    op->req_n = -1;
    op->nres = 1;
    op->tenant = simba__zk_strdup(zk, simba_tenant(zk->s));
    op->session = simba__zk_strdup(zk, "");
    r->name = simba__zk_strdup(zk, name);
    r->path = op->tenant ? simba__zk_res_path(zk, op->tenant, name) : NULL;
    r->want_capacity = r->capacity = r->weight = 1;
    r->pos = -1;
    if (!op->tenant || !op->session || !r->name || !r->path) {
        simba__zk_op_free(zk, op);
        simba__zk_queue_wake(zk, name);
        return;
    }
    op->next = zk->ops;
    if (zk->ops) zk->ops->prev = op;
    zk->ops = op;
    zk->refreshes_sent++;
    simba__zk_op_advance(op);
}

static void simba__zk_start_refreshes(simba__zk *zk) {
    while (zk->refreshes) {
        simba__zk_wake *w = zk->refreshes;
        zk->refreshes = w->next;
        if (zk->zh && zk->up) simba__zk_start_refresh(zk, w->name);
        else simba__zk_queue_wake(zk, w->name);   /* down: the core re-polls when we are back */
        simba__zk_free(zk, w->name);
        simba__zk_free(zk, w);
    }
}

/*>>wakeups.deliver: to the core: grants with their fence (simba_backend_granted), the mutex hand-off from a watch, hints (simba_backend_changed) */

/* A name on a list (once): the core's wake-ups, the refreshes. */
static void simba__zk_queue_name(simba__zk *zk, simba__zk_wake **list, const char *name) {
    simba__zk_wake *w;
    for (w = *list; w; w = w->next) if (strcmp(w->name, name) == 0) return;
    w = (simba__zk_wake *)simba__zk_alloc(zk, sizeof *w);
    if (!w) return;
    w->name = simba__zk_strdup(zk, name);
    if (!w->name) { simba__zk_free(zk, w); return; }
    w->next = *list;
    *list = w;
}

/* The core re-polls every handle on the name (a hint: request NULL). */
static void simba__zk_queue_wake(simba__zk *zk, const char *name) { simba__zk_queue_name(zk, &zk->wakes, name); }

static void simba__zk_free_names(simba__zk *zk, simba__zk_wake **list) {
    while (*list) {
        simba__zk_wake *w = *list;
        *list = w->next;
        simba__zk_free(zk, w->name);
        simba__zk_free(zk, w);
    }
}

static void simba__zk_deliver_wakes(simba__zk *zk) {
    while (zk->wakes) {
        simba__zk_wake *w = zk->wakes;
        zk->wakes = w->next;
        zk->wakes_sent++;
        simba_backend_changed(zk->s, w->name);
        simba__zk_free(zk, w->name);
        simba__zk_free(zk, w);
    }
}

/* Grants found by a refresh or by a predecessor's deletion, told to the core
   with the fence: ACQUIRED with no POLL. Checked again here: an event after
   the one that granted (a change of the resource node, a session event)
   makes simba__zk_forget_pred take a watch grant back; a watch grant (2) is
   then confirmed on our own entry first, told as 3 once it is. */
static void simba__zk_deliver_grants(simba__zk *zk) {
    simba__zk_mine *m;
    if (!zk->grants_due) return;
    zk->grants_due = 0;
    while ((m = zk->due) != NULL) {
        int due = m->grant_due;
        zk->due = m->due_next;
        m->due_next = NULL;
        m->on_due = 0;
        if (!due) continue;
        m->grant_due = 0;
        if (due == 2) {
            if (!m->pred || !m->pred_gone || m->probe || !m->czxid[0] || m->owner != zk->zsid || zk->zsid == 0) continue;
            simba__zk_forget_pred(zk, m);
            if (m->self == 2) {
                /* our entry watched: its deletion would have come first */
                simba__zk_grant_unread(zk, m);
            } else {
                /* told once our entry is known to be there (simba__zk_confirmed) */
                if (!simba__zk_confirm_head(zk, m, NULL) && m->name) simba__zk_queue_wake(zk, m->name);
                continue;
            }
        }
        if (due == 3) {
            if (m->granted || m->releasing) continue;
            m->granted = 1;
            zk->watch_grants++;
        }
        if (!m->name) continue;                 /* no memory: the core's recheck finds the grant */
        zk->wakes_sent++;
        simba_backend_granted(zk->s, m->name, m->session, m->request, m->czxid[0]);
    }
}

/* A mutex waiter's predecessor (the head) is gone: we are the head if our
   own entry is still there. Nothing told us it went (a client with write
   access can delete it by hand, and we watch only our predecessor), so the
   grant waits for an `exists` of our own entry: ZOK proves it is there after
   the predecessor's deletion (a client's calls are answered in order, after
   the event we react to), ZNONODE that it is gone. A read, the round trip
   kazoo's Lock makes too (its getChildren): the head mark our successor
   needs (simba__zk_mark_head) goes out right behind it and is not waited
   for (a write took about twice a read here). op: the POLL to answer
   (NULL: tell the core with simba_backend_granted). Returns 0 if the call
   could not be sent (the caller reads instead). */
static int simba__zk_confirm_head(simba__zk *zk, simba__zk_mine *m, simba__zk_op *op) {
    char path[SIMBA__ZK_PATH_MAX];
    simba__zk_call *c;
    if (!zk->zh || !m->path[0] || !m->node[0]) return 0;
    c = simba__zk_call_new(zk, op, SIMBA__ZK_C_CONFIRM, 0);
    if (!c) return 0;
    c->name = simba__zk_strdup(zk, m->path[0]);
    c->path = simba__zk_strdup(zk, m->node[0]);
    snprintf(path, sizeof path, "%s/%s", m->path[0], m->node[0]);
    if (!c->name || !c->path || zoo_aexists(zk->zh, path, 0, simba__zk_on_stat, c) != ZOK) {
        if (op) op->pending--;
        simba__zk_call_free(zk, c);
        return 0;
    }
    simba__zk_mark_head(zk, m->path[0], m->node[0]);
    return 1;
}

/* A mutex waiter whose predecessor (the head) went, with its own entry
   watched since before (simba__zk_watch_self): granted on that event. The
   head mark its successor needs goes out (our watch taken off first). */
static void simba__zk_grant_unread(simba__zk *zk, simba__zk_mine *m) {
    simba__zk_mark_head(zk, m->path[0], m->node[0]);
    if (!m->granted) { zk->watch_grants++; zk->unread_grants++; }
    m->granted = 1;
}

/* An op (POLL) answered granted from what we know of our entry. */
static void simba__zk_answer_granted(simba__zk_op *op, const simba__zk_mine *m) {
    op->granted = 1;
    op->fence[0] = m->czxid[0];
    op->ahead = 0;
    op->held = 1;
    op->capacity = 1;
    snprintf(op->owner, sizeof op->owner, "%s", op->session);
    simba__zk_finish(op);
}

/* The answer to simba__zk_confirm_head. ZOK: granted. Anything else: not
   told; the POLL goes on with a read (ENOTFOUND if our entry is gone), or
   the core is woken to re-poll. */
static void simba__zk_confirmed(simba__zk_call *c, simba__zk_op *op, int rc) {
    simba__zk *zk = c->zk;
    simba__zk_mine *m;
    if (zk->closing || c->gen != zk->gen || !c->name || !c->path) return;
    m = simba__zk_mine_by_node(zk, c->name, c->path);
    if (!m || m->releasing) return;
    if (rc != ZOK) {
        if (!op && m->name) simba__zk_queue_wake(zk, m->name);
        return;
    }
    if (!op) {
        if (!m->granted) simba__zk_mine_due(zk, m, 3);
        return;
    }
    if (!m->granted) zk->watch_grants++;
    m->granted = 1;
    simba__zk_answer_granted(op, m);
}

/* POLL of a mutex waiter whose only predecessor is gone: granted with no
   read once our own entry is confirmed (simba__zk_confirm_head); the answer
   goes out in the process() after that. */
static int simba__zk_grant_from_watch(simba__zk_op *op) {
    simba__zk *zk = op->zk;
    simba__zk_mine *m = simba__zk_mine_find(zk, op->request, op->session);
    simba__zk_rs *r = &op->res[0];
    if (!m || !m->pred || !m->pred_gone || m->probe || op->nres != 1 || m->nres != 1 || !r->mine || !m->czxid[0] ||
        m->owner != zk->zsid || zk->zsid == 0)
        return 0;
    simba__zk_forget_pred(zk, m);
    if (m->self == 2) {
        simba__zk_grant_unread(zk, m);
        simba__zk_answer_granted(op, m);
        return 1;
    }
    return simba__zk_confirm_head(zk, m, op);   /* answered in simba__zk_confirmed; 0: read */
}

/*>>stats: simba_zk_stats */

SIMBADEF int simba_zk_stats(simba_backend b, struct simba_zk_stats *out) {
    simba__zk *zk = simba__zk_of(b);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (!zk || !out) return SIMBA_EINVAL;
    memset(out, 0, sizeof *out);
    out->connected = zk->up;
    out->reconnects = zk->connects > 0 ? zk->connects - 1 : 0;
    out->ops_sent = zk->ops_sent;
    out->ops_completed = zk->ops_completed;
    out->wakes = zk->wakes_sent;
    out->session_id = zk->zsid;
    memcpy(out->password, zk->passwd, sizeof out->password);
    out->timeout_ms = zk->up ? zk->negotiated : 0;
    out->handles = zk->handles;
    out->watch_grants = zk->watch_grants;
    out->unread_grants = zk->unread_grants;
    out->names_read = zk->names_read;
    if (zk->zh && zk->up && zookeeper_get_connected_host(zk->zh, (struct sockaddr *)&ss, &len)) {
        char ip[48];              /* INET6_ADDRSTRLEN: "[ip]:port" fits out->server */
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
            snprintf(out->server, sizeof out->server, "%s:%u", ip, (unsigned)ntohs(in->sin_port));
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
            snprintf(out->server, sizeof out->server, "[%s]:%u", ip, (unsigned)ntohs(in6->sin6_port));
        }
    }
    return SIMBA_OK;
}

/*>>vtable: attach, submit, pollfds, deadline_ms, process, reset, destroy (glue only) */

static int simba__zk_attach(void *impl, simba *s) {
    simba__zk *zk = (simba__zk *)impl;
    char enc[SIMBA_MAX_TENANT * 3 + 1];
    size_t len = 0;
    int lease;
    zk->s = s;
    lease = simba_lease_ms(s);
    zk->lease_ms = lease;
    if (zk->timeout_ms < lease) zk->timeout_ms = lease;
    if (!simba__zk_encode(enc, sizeof enc, &len, simba_tenant(s))) return SIMBA_ENAME;
    zk->tenant_enc = simba__zk_strdup(zk, enc);
    if (!zk->tenant_enc) return SIMBA_ENOMEM;
    if (zk->log_level > 0) zoo_set_debug_level((ZooLogLevel)zk->log_level);
    simba__zk_open_handle(zk);
    if (!zk->zh && errno == EINVAL) return SIMBA_EINVAL;
    return SIMBA_OK;
}

static int simba__zk_submit(void *impl, const simba_op *src) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_op *op;
    int rc;
    if (!zk->zh || !zk->up || zk->close_wanted) return SIMBA_EDISCONNECTED;
    op = simba__zk_op_new(zk);
    if (!op) return SIMBA_ENOMEM;
    rc = simba__zk_op_copy(zk, op, src);
    if (rc != SIMBA_OK) { simba__zk_op_free(zk, op); return rc; }
    op->next = zk->ops;
    if (zk->ops) zk->ops->prev = op;
    zk->ops = op;
    zk->ops_sent++;                              /* from here on, exactly one reply follows */
    rc = simba__zk_start_session_op(zk, op);
    if (rc != SIMBA_OK || op->kind == SIMBA_OP_CLOSE) {
        simba__zk_finish_status(op, rc, NULL);     /* answered in the next process() */
        return SIMBA_OK;
    }
    if (op->kind == SIMBA_OP_POLL) {
        simba__zk_mine_load(op);
        if (simba__zk_grant_from_watch(op)) return SIMBA_OK;
        if (simba__zk_join_read(op)) return SIMBA_OK;
    }
    op->fast = simba__zk_can_skip_read(op);
    simba__zk_op_advance(op);
    return SIMBA_OK;
}

static int simba__zk_pollfds(void *impl, struct pollfd *fds, int max) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_refresh(zk);
    if (!zk->zh || zk->fd < 0) return 0;
    if (fds && max >= 1) {
        fds[0].fd = zk->fd;
        fds[0].events = (short)(((zk->interest & ZOOKEEPER_READ) ? POLLIN : 0) |
                                ((zk->interest & ZOOKEEPER_WRITE) ? POLLOUT : 0));
        fds[0].revents = 0;
    }
    return 1;
}

static int64_t simba__zk_deadline(void *impl) {
    simba__zk *zk = (simba__zk *)impl;
    int64_t now = simba__zk_now(zk), d = -1;
    simba__zk_refresh(zk);
    if (zk->done || zk->wakes || zk->refreshes || zk->grants_due || zk->expired || zk->auth_failed || zk->close_wanted ||
        simba__zk_want_up(zk, now) != zk->up) return now;
    if (zk->zh) d = zk->next_ms;
    else if (zk->reinit_at >= 0) d = zk->reinit_at;
    if (zk->resetting_until > now && (d < 0 || zk->resetting_until < d)) d = zk->resetting_until;
    return d;
}

/* zookeeper_process() reads one packet per call: with a watch event, a
   reply and another reply waiting in the socket (a hand-off), each would
   cost the caller's loop another poll and tick. So read on while the socket
   has more, a bounded number of packets per tick (the other fds of the
   caller's loop get their turn). */
enum { SIMBA__ZK_DRAIN_MAX = 64 };
static void simba__zk_drain(simba__zk *zk) {
    int k;
    for (k = 0; k < SIMBA__ZK_DRAIN_MAX && zk->zh && zk->fd >= 0; k++) {
        struct pollfd p;
        p.fd = zk->fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 0) != 1 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) return;
        if (zookeeper_process(zk->zh, ZOOKEEPER_READ) == ZCONNECTIONLOSS) {
            simba__zk_connect_failed(zk, ZCONNECTIONLOSS);
            return;
        }
    }
}

static void simba__zk_process(void *impl, const struct pollfd *fds, int nfds) {
    simba__zk *zk = (simba__zk *)impl;
    zk->batch++;
    if (zk->zh && zk->fd >= 0) {
        int events = 0, i;
        if (!fds) events = zk->interest;
        for (i = 0; fds && i < nfds; i++) {
            if (fds[i].fd != zk->fd) continue;
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
            if (fds[i].revents & POLLOUT) events |= ZOOKEEPER_WRITE;
        }
        if (events && zookeeper_process(zk->zh, events) == ZCONNECTIONLOSS) simba__zk_connect_failed(zk, ZCONNECTIONLOSS);
        else if (events & ZOOKEEPER_READ) simba__zk_drain(zk);
    }
    simba__zk_housekeeping(zk);
    simba__zk_refresh(zk);          /* connects, pings and times out; may complete calls */
    simba__zk_report(zk);
    simba__zk_deliver(zk);
    simba__zk_deliver_grants(zk);
    simba__zk_start_refreshes(zk);
    simba__zk_deliver_wakes(zk);
}

static void simba__zk_reset(void *impl, int why) {
    simba__zk *zk = (simba__zk *)impl;
    (void)why;
    simba__zk_fail_all(zk, SIMBA_EDISCONNECTED, 0);
    if (zk->zh && zoo_state(zk->zh) == ZOO_CONNECTED_STATE) {
        /* Drop the TCP connection but keep the session: the library sees the
           connection end, reconnects (to the next server of an ensemble) and
           re-attaches the same session and its watches. */
        simba__zk_refresh(zk);
        if (zk->fd >= 0) {
            shutdown(zk->fd, SHUT_RDWR);
            zk->resetting_until = simba__zk_now(zk) + 2000;
        }
    }
    simba__zk_report(zk);
    simba__zk_deliver(zk);
}

static void simba__zk_destroy(void *impl) {
    simba__zk *zk = (simba__zk *)impl;
    simba__zk_fail_all(zk, SIMBA_EDISCONNECTED, 0);
    simba__zk_deliver(zk);
    simba__zk_close_handle(zk, 1);
    simba__zk_free_names(zk, &zk->wakes);
    simba__zk_free_names(zk, &zk->refreshes);
    simba__zk_mine_clear(zk);
    simba__zk_free_spares(zk);
    simba__zk_free(zk, zk->ix);
    simba__zk_free(zk, zk->hosts);
    simba__zk_free(zk, zk->base);
    simba__zk_free(zk, zk->digest);
    simba__zk_free(zk, zk->tenant_enc);
    zk->magic = 0;
    simba__zk_free(zk, zk);
}

static const simba_backend_vtable simba__zk_vtable = {
    "zookeeper",
    simba__zk_attach,
    simba__zk_submit,
    simba__zk_pollfds,
    simba__zk_deadline,
    simba__zk_process,
    simba__zk_reset,
    simba__zk_destroy
};

/* The backend behind a simba_backend value; NULL if it is not a ZooKeeper one. */
static simba__zk *simba__zk_of(simba_backend b) {
    simba__zk *zk = (simba__zk *)b.impl;
    return b.vt == &simba__zk_vtable && zk && zk->magic == SIMBA__ZK_MAGIC ? zk : NULL;
}

/*>>constructor: desc checks, allocation, simba_zk_from_url */

static int simba__zk_numeric_host(const char *h, size_t n) {
    char buf[64];
    unsigned char addr[16];
    if (n == 0 || n >= sizeof buf) return 0;
    if (h[0] == '[') {
        if (n < 3 || h[n - 1] != ']') return 0;
        memcpy(buf, h + 1, n - 2);
        buf[n - 2] = 0;
        return inet_pton(AF_INET6, buf, addr) == 1;
    }
    memcpy(buf, h, n);
    buf[n] = 0;
    return inet_pton(AF_INET, buf, addr) == 1;
}

/* "host:port,host:port[/chroot]": every host numeric unless names are allowed,
   every port 1..65535. */
/* why (cap bytes) gets what is wrong, naming the field, when 0 is returned. */
static int simba__zk_check_hosts(const char *hosts, int allow_names, char *why, size_t cap) {
    const char *p = hosts, *end;
    const char *slash = hosts ? strchr(hosts, '/') : NULL;
    if (!hosts || !*hosts) {
        snprintf(why, cap, "hosts: empty (want \"ip:port[,ip:port...]\")");
        return 0;
    }
    end = slash ? slash : hosts + strlen(hosts);
    if (p == end) {
        snprintf(why, cap, "hosts: no server before the chroot '/'");
        return 0;
    }
    while (p < end) {
        const char *comma = (const char *)memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma ? comma : end;
        const char *colon = NULL, *q;
        int n = (int)(item_end - p > 100 ? 100 : item_end - p);
        long port = 0;
        for (q = p; q < item_end; q++) if (*q == ':') colon = q;
        if (!colon || colon == p || colon + 1 >= item_end) {
            snprintf(why, cap, "hosts: \"%.*s\" is not ip:port", n, p);
            return 0;
        }
        for (q = colon + 1; q < item_end; q++) {
            if (*q < '0' || *q > '9' || port > 65535) break;
            port = port * 10 + (*q - '0');
        }
        if (q < item_end || port < 1 || port > 65535) {
            snprintf(why, cap, "hosts: the port of \"%.*s\" is not a number in 1..65535", n, p);
            return 0;
        }
        if (!allow_names && !simba__zk_numeric_host(p, (size_t)(colon - p))) {
            snprintf(why, cap, "hosts: \"%.*s\" is a host name, not a numeric IPv4/IPv6 address (use e.g. "
                     "127.0.0.1 for localhost, or set allow_hostnames: the library then resolves it, blocking)", n, p);
            return 0;
        }
        p = comma ? comma + 1 : end;
        if (comma && p >= end) {
            snprintf(why, cap, "hosts: empty entry after the last ','");
            return 0;
        }
    }
    return 1;
}

/* An absolute path of plain components, no trailing '/', not under /zookeeper. */
static int simba__zk_check_base(const char *b) {
    size_t n = strlen(b), i, comp = 0;
    if (n < 2 || n > SIMBA__ZK_BASE_MAX || b[0] != '/' || b[n - 1] == '/') return 0;
    if (strncmp(b, "/zookeeper", 10) == 0 && (b[10] == 0 || b[10] == '/')) return 0;
    for (i = 1; i <= n; i++) {
        if (i == n || b[i] == '/') {
            const char *c = b + i - comp;
            if (comp == 0) return 0;
            if ((comp == 1 && c[0] == '.') || (comp == 2 && c[0] == '.' && c[1] == '.')) return 0;
            comp = 0;
        } else {
            unsigned char ch = (unsigned char)b[i];
            if (ch < 0x21 || ch > 0x7e) return 0;
            comp++;
        }
    }
    return 1;
}

static int simba__zk_check_digest(const char *d) {
    const char *colon = strchr(d, ':');
    const unsigned char *p;
    if (!colon || colon == d || !colon[1]) return 0;
    for (p = (const unsigned char *)d; *p; p++) if (*p < 0x20 || *p == 0x7f) return 0;
    return 1;
}

/* The host-name policy (docs/design.md, simba_backend_resolve): every name in
   "host:port,...[/chroot]" is resolved here, once, into `out`, so that the
   client library's (re)connects inside simba_tick() never wait for DNS.
   "localhost" becomes 127.0.0.1. Returns 0, or 0 with `why` set when a name
   does not resolve or the string does not fit. With allow_hostnames the
   names are left to the client library (it resolves at each connect). */
static int simba__zk_resolve_hosts(const char *in, char *out, size_t cap, char *why, size_t wcap) {
    const char *p = in, *chroot = strchr(in, '/');
    const char *end = chroot ? chroot : in + strlen(in);
    size_t n = 0;
    out[0] = 0;
    while (p < end) {
        const char *comma = (const char *)memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end, *colon = NULL, *q;
        char host[256], numeric[64];
        const char *use;
        size_t hl;
        int rc, w;
        for (q = p; q < e; q++) if (*q == ':') colon = q;        /* the last ':' starts the port */
        if (*p == '[' || !colon || colon == p || (size_t)(colon - p) >= sizeof host) {
            host[0] = 0;                  /* bracketed IPv6, or malformed: copied as is for the check */
            use = NULL;
        } else {
            hl = (size_t)(colon - p);
            memcpy(host, p, hl);
            host[hl] = 0;
            rc = simba_backend_resolve(host, numeric, sizeof numeric);
            if (rc != 0) {
                snprintf(why, wcap, "hosts: cannot resolve '%.100s': %s", host, simba_backend_resolve_error(rc));
                return 0;
            }
            use = strcmp(host, "localhost") == 0 ? "127.0.0.1" : numeric[0] ? numeric : NULL;
        }
        if (use)
            w = snprintf(out + n, cap - n, "%s%s%s%s%.*s", n ? "," : "", strchr(use, ':') ? "[" : "", use,
                         strchr(use, ':') ? "]" : "", (int)(e - colon), colon);
        else
            w = snprintf(out + n, cap - n, "%s%.*s", n ? "," : "", (int)(e - p), p);
        if (w < 0 || (size_t)w >= cap - n) { snprintf(why, wcap, "hosts: too long once resolved"); return 0; }
        n += (size_t)w;
        p = comma ? comma + 1 : end;
    }
    if (end > in && end[-1] == ',' && n + 1 < cap) { out[n++] = ','; out[n] = 0; }   /* kept for the check */
    if (chroot) {
        int w = snprintf(out + n, cap - n, "%s", chroot);
        if (w < 0 || (size_t)w >= cap - n) { snprintf(why, wcap, "hosts: too long once resolved"); return 0; }
    }
    return 1;
}

/* Every check of a desc, before anything is allocated. Returns 0 with `why`
   = "<field>: what is wrong"; `hosts` gets desc->hosts with every name
   resolved (the host-name policy), unless allow_hostnames. */
static int simba__zk_check_desc(const simba_zk_desc *desc, char *hosts, size_t cap, char *why, size_t wcap) {
    hosts[0] = 0;
    if (desc->hosts && !desc->allow_hostnames && !simba__zk_resolve_hosts(desc->hosts, hosts, cap, why, wcap))
        return 0;
    if (!simba__zk_check_hosts(desc->hosts && !desc->allow_hostnames ? hosts : desc->hosts,
                               desc->allow_hostnames, why, wcap))
        return 0;
    if (desc->base_path && !simba__zk_check_base(desc->base_path)) {
        snprintf(why, wcap, "base_path: \"%.100s\" is not an absolute path of plain components (no trailing "
                 "'/', no . or .., not under /zookeeper, at most %d bytes)", desc->base_path, (int)SIMBA__ZK_BASE_MAX);
        return 0;
    }
    if (desc->digest && !simba__zk_check_digest(desc->digest)) {
        snprintf(why, wcap, "digest: want \"user:password\" (both non-empty, no control characters)");
        return 0;
    }
    if (desc->session_timeout_ms < 0) { snprintf(why, wcap, "session_timeout_ms: negative"); return 0; }
    if (desc->zk_log_level < 0 || desc->zk_log_level > 4) { snprintf(why, wcap, "zk_log_level: want 0..4"); return 0; }
    return 1;
}

SIMBADEF simba_backend simba_zk(const simba_zk_desc *desc) {
    simba_backend b;
    simba__zk *zk;
    char hosts[2048], why[300];       /* desc->hosts with every name resolved; what is wrong */
    if (!desc) return simba_backend_error(SIMBA_EINVAL, "simba_zk_desc: NULL");
    if (simba_allocator_check(&desc->allocator) != SIMBA_OK)
        return simba_backend_error(SIMBA_EINVAL, "simba_zk_desc.allocator: set both alloc and free, or neither");
    why[0] = 0;
    if (!simba__zk_check_desc(desc, hosts, sizeof hosts, why, sizeof why))
        return simba_backend_error(SIMBA_EINVAL, "simba_zk_desc.%s", why);
    zk = (simba__zk *)simba_allocator_alloc(&desc->allocator, sizeof *zk);
    if (!zk) return simba_backend_error(SIMBA_ENOMEM, "simba_zk: out of memory");
    zk->magic = SIMBA__ZK_MAGIC;
    zk->a = desc->allocator;
    zk->fd = -1;
    zk->reinit_at = -1;
    zk->fast_max_n = -1;
    zk->ix_cap = SIMBA__ZK_IX_MIN;
    zk->ix = (simba__zk_link **)simba__zk_alloc(zk, zk->ix_cap * sizeof *zk->ix);
    zk->hosts = simba__zk_strdup(zk, desc->allow_hostnames ? desc->hosts : hosts);
    zk->base = simba__zk_strdup(zk, desc->base_path ? desc->base_path : "/simba");
    zk->digest = desc->digest ? simba__zk_strdup(zk, desc->digest) : NULL;
    zk->timeout_ms = desc->session_timeout_ms;
    zk->log_level = desc->zk_log_level;
    if (!zk->ix || !zk->hosts || !zk->base || (desc->digest && !zk->digest)) {
        simba__zk_destroy(zk);
        return simba_backend_error(SIMBA_ENOMEM, "simba_zk: out of memory");
    }
    b.vt = &simba__zk_vtable;
    b.impl = zk;
    return b;
}

SIMBADEF int simba_zk_from_url(simba_url *u, simba_backend *out, simba_url_error *err) {
    simba_zk_desc d;
    char why[192], resolved[2048];   /* what simba__zk_resolve_hosts found wrong; its output */
    char hosts[SIMBA_URL_MAX + 64], digest[1024];
    size_t len = 0;
    int i, rc;
    memset(&d, 0, sizeof d);
    if (!u || !out) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: no URL or no output");
    if (strcmp(u->scheme, "zk") != 0)
        return simba_url_fail(err, SIMBA_EINVAL, "scheme", "URL scheme: '%s' is not zk", u->scheme);
    if (!u->has_authority || u->nhosts == 0)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: missing (zk://host1:2181,host2:2181[/chroot])");
    hosts[0] = '\0';
    for (i = 0; i < u->nhosts; i++) {
        /* ZooKeeper's own connection string: "h:p,h:p/chroot" */
        int n = snprintf(hosts + len, sizeof hosts - len, "%s%s:%d", i ? "," : "", u->hosts[i].host,
                         u->hosts[i].port ? u->hosts[i].port : 2181);
        if (n < 0 || (size_t)n >= sizeof hosts - len)
            return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: the host list is too long");
        len += (size_t)n;
    }
    if (u->path[0] && strcmp(u->path, "/") != 0) {
        if (len + strlen(u->path) + 1 > sizeof hosts)
            return simba_url_fail(err, SIMBA_EINVAL, "path", "URL path: too long");
        memcpy(hosts + len, u->path, strlen(u->path) + 1);
    }
    d.hosts = hosts;
    if (u->user || u->password) {
        int n;
        if (!u->user || !u->password)
            return simba_url_fail(err, SIMBA_EINVAL, "userinfo", "URL userinfo: ZooKeeper digest auth needs user:password");
        n = snprintf(digest, sizeof digest, "%s:%s", u->user, u->password);
        if (n < 0 || (size_t)n >= sizeof digest)
            return simba_url_fail(err, SIMBA_EINVAL, "userinfo", "URL userinfo: too long");
        d.digest = digest;
    }
    d.base_path = simba_url_param(u, "base_path");
    if ((rc = simba_url_duration(u, "session_timeout", 1, 86400000, &d.session_timeout_ms, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_int(u, "allow_hostnames", 0, 1, &d.allow_hostnames, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_int(u, "log_level", 0, 4, &d.zk_log_level, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_check_used(u, err)) != SIMBA_OK) return rc;
    if (!d.allow_hostnames && !simba__zk_resolve_hosts(hosts, resolved, sizeof resolved, why, sizeof why))
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: %s", why);
    if (d.base_path && !simba__zk_check_base(d.base_path))
        return simba_url_fail(err, SIMBA_EINVAL, "base_path", "URL parameter base_path: not a ZooKeeper path ('/a/b')");
    *out = simba_zk(&d);
    memset(digest, 0, sizeof digest);
    return SIMBA_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_ZK_IMPL_INCLUDED */
#endif /* SIMBA_ZK_IMPLEMENTATION */
