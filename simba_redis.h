/*
    simba_redis.h -- the Redis backend of simba (hiredis, asynchronous API).

    Project: simba. License: MIT (see simba.h).

    Do this:
        #define SIMBA_REDIS_IMPLEMENTATION
    before you include this file in *one* C or C++ file, after simba.h:

        #define SIMBA_IMPLEMENTATION
        #include "simba.h"
        #define SIMBA_REDIS_IMPLEMENTATION
        #include "simba_redis.h"

        simba_redis_desc rd = {0};
        rd.host = "127.0.0.1";
        rd.port = 6379;
        simba_desc d = {0};
        d.backend = simba_redis(&rd);
        simba *s = simba_create(&d, NULL);

    and link with -lhiredis (hiredis 0.14 or 1.x; the include path must find
    <hiredis/hiredis.h>).

    CONTENTS (every section starts with a comment ">>name", grep for it;
    --------  a sub-section with ">>name.sub", named as in docs/backends.md)
    Declarations:
        >>options       simba_redis_desc: what the caller sets
        >>constructor   simba_redis(), simba_redis_from_url(),
                        simba_redis_init_server(), simba_redis_resource_key()
        >>stats         struct simba_redis_stats and simba_redis_stats()
    Implementation (SIMBA_REDIS_IMPLEMENTATION; guard SIMBA_REDIS_IMPL_INCLUDED):
        >>internals     includes, the Lua script (the server side of every
                        operation, the grant rule's server copy), limits,
                        private types, memory, keys, reply limits, SIGPIPE
        >>connection    .connect  the hiredis adapter, connect, handshake (AUTH,
                                  SELECT, SCRIPT LOAD, INFO), a drop, the retry
                        .io       one connection's reads and writes in a tick
                        .sentinel where the master is
                        .node     the options and controls a Cluster drives a node with
                        .cluster  slots, the map, redirects, a backend per master
                                  driven through its vtable and a relay (simba.h)
        >>session       every operation as one script call; OPEN, KEEPALIVE
                        (the session's renewal), CLOSE
        >>locks         ENQUEUE, POLL, RELEASE, INSPECT, SET_CAPACITY, DELETE:
                        their answers, WAIT, and where every answer arrives
        >>wakeups       .deliver  a SUBSCRIBE push -> simba_backend_granted & co
        >>stats         simba_redis_stats()
        >>vtable        attach, submit, pollfds, deadline_ms, process, reset, destroy;
                        a Redis Cluster's own vtable (the same steps, to .cluster)
        >>constructor   desc checks, allocation, the script text, simba_redis(),
                        simba_redis_from_url(), simba_redis_init_server()

    WHAT IT DOES
    ============
    Every operation of the backend contract (simba.h, "WRITING A BACKEND") is
    one call of one Lua script (EVALSHA, loaded with SCRIPT LOAD on connect,
    sent again as EVAL after NOSCRIPT), so each operation is atomic on the
    server and judged by the server's clock (TIME) only. A second connection
    SUBSCRIBEs to this client's channel: when a release (or a purge of a dead
    session) grants a waiting entry, the script that did it PUBLISHes
    "<session> <request> <fence> <name>" to the new holder's client, which reports
    ACQUIRED without another round trip. Lost messages only cost latency: the
    core re-checks waiters at the earliest expiry ahead of them and on its
    fallback period.

    Nothing blocks: connects are non-blocking (a host name is resolved once,
    in simba_redis(), the only blocking step; every connect then uses the
    address), the fds are driven from simba_pollfds()/simba_tick(), and simba
    times out every request itself (hiredis 0.14 has no async timeouts).

    Key layout, scripts, guarantees, WAIT and the Redis Cluster rule:
    docs/redis.md.

    Servers: Redis 5 or newer (scripts that read TIME and then write need
    effects replication, the default since 5.0); ACL users need Redis 6.
    Tested with Redis 7.0.

    hiredis versions: written against the 0.14 async API (Debian 12); the
    parts where 1.x differs are behind HIREDIS_MAJOR (1.x is not tested).

    Memory: everything this backend allocates (its state, the desc strings,
    the script text, the requests in flight, INSPECT answers) follows
    simba_redis_desc.allocator. hiredis keeps its own allocator: 0.14 has no
    per-context one (its contexts and replies come from malloc), and 1.x's
    hiredisSetAllocators is process-wide, so simba leaves it alone.

    Signals: hiredis writes with write(), which raises SIGPIPE on a
    connection the server closed. simba never changes the process's signal
    dispositions; it blocks SIGPIPE in the calling thread around its own
    writes and consumes one that they raised (the libpq approach), so the
    host survives with the default disposition. Replies are bounded (2^20
    array elements, 64 MiB of one unfinished reply): more drops the
    connection with SIMBA_EPROTO (docs/redis.md, failure behaviour).

    Known hiredis limitation: hiredis's async layer assert()s on a reply that
    answers no request (only a server that is not Redis sends one). Every
    reply simba is given is checked for shape and answered with SIMBA_EPROTO
    when it is not what the script returns.
*/
#ifndef SIMBA_REDIS_INCLUDED
#define SIMBA_REDIS_INCLUDED

#ifndef SIMBA_INCLUDED
#error "simba_redis.h needs simba.h: include simba.h first"
#endif

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*>>options: what the caller sets */

/* Options of simba_redis(). Zero means the default; every string is copied. */
typedef struct simba_redis_desc {
    const char *host;          /* server address (default "127.0.0.1"): numeric, "localhost", or a
                                  name resolved once by simba_redis() (blocking; docs/design.md) */
    int port;                  /* TCP port (default 6379), 1..65535 */
    const char *unix_socket;   /* path of a unix socket; when set, host and port are not used */
    const char *user;          /* ACL user (Redis 6+): "AUTH user password"; needs password */
    const char *password;      /* NULL: no AUTH */
    int db;                    /* SELECT this database index (default 0) */
    const char *prefix;        /* first part of every key and channel (default "simba");
                                  1..64 bytes of [A-Za-z0-9._:-] */
    int connect_timeout_ms;    /* connect + AUTH + SCRIPT LOAD must be done by then (default 2000) */
    int wait_replicas;         /* > 0: confirm a grant only after WAIT says this many replicas
                                  have it (see docs/redis.md for what that does and does not
                                  guarantee) */
    int wait_timeout_ms;       /* the timeout given to WAIT (default 200) */
    /* Redis Sentinel (docs/redis.md, "Sentinel"): when `sentinels` is set, the
       master is asked of the sentinels (host, port and unix_socket are not used) */
    const char *sentinels;     /* "host:port,host:port,..." (1..16 sentinels; port default 26379) */
    const char *sentinel_master;   /* the master's name in the sentinels' config (needed with sentinels) */
    const char *sentinel_user;     /* the sentinels' own ACL user; needs sentinel_password */
    const char *sentinel_password; /* the sentinels' own AUTH password (NULL: none); `user` and
                                      `password` are the master's */
    const char *cluster_seeds; /* Redis Cluster: "host:port,host:port,..." (numeric addresses or
                                  localhost; at most 16) of some of its nodes; host, port,
                                  unix_socket and db are then not used (docs/redis.md, Cluster) */
    int cluster_idle_ms;       /* Redis Cluster: a master's push connection is opened when an
                                  operation is routed to it and closed once nothing of ours
                                  there has needed pushes for this long: no waiting request
                                  queued there, no operation routed there (default 30000;
                                  < 0: never closed once opened). Every master's main
                                  connection stays (docs/redis.md, Cluster) */
    simba_allocator allocator; /* for the backend's memory (not hiredis's); zero = malloc/free */
} simba_redis_desc;

/*>>constructor: simba_redis(), from a URL, and the operator's tools */

/* simba_redis: a Redis backend for one simba client (pass it in
   simba_desc.backend; simba owns it from then on). A bad desc (NULL, port out
   of range, bad prefix, negative db or timeouts, a user without password, a
   host that does not resolve, half an allocator) gives
   simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.<field>: ..."), out of
   memory simba_backend_error(SIMBA_ENOMEM, ...): simba_create then fails with
   that code and its simba_error says which field and why. */
SIMBADEF simba_backend simba_redis(const simba_redis_desc *desc);

/* ---- connection URLs ----
   simba_redis_from_url: the backend for a parsed URL (simba_url_parse in
   simba_url.h) of scheme redis or redis+unix:
       redis://[user[:password]@]host[:port][/db][?parameters]
       redis+unix://[user[:password]@]/path/to/socket[?db=N&parameters]
       redis+sentinel://[user[:password]@]s1:26379,s2:26379/mastername[?parameters]
   (the hosts are sentinels; user and password are the master's; parameters
   sentinel_user, sentinel_password, sentinel_password_env are the sentinels')
       redis+cluster://[user[:password]@]host1:port1[,host2:port2...][?parameters]
   (the hosts are seed nodes of a Redis Cluster: simba_redis_desc.cluster_seeds;
   parameter cluster_idle, a duration or "never": simba_redis_desc.cluster_idle_ms)
   parameters: prefix, wait_replicas, wait_timeout (duration),
   connect_timeout (duration), db (redis+unix and redis+sentinel), plus password_env /
   password_file (simba_url.h). Read the client options (simba_url_client_options)
   first: a parameter nobody read is an error here. */
SIMBADEF int simba_redis_from_url(simba_url *u, simba_backend *out, simba_url_error *err);

/* simba_redis_init_server: an operator's statement that no client of
   `tenant` (NULL: "default") holds or can hold a lock on the server of
   `desc` right now, e.g. a fresh server before any client started: it
   writes the tenant's epoch for the server's current run with no restart
   grace, so the first acquires are granted at once instead of waiting a
   lease (docs/redis.md, "Restart grace"). Wrong while a client of the
   tenant may hold a lock the server forgot (it could then be granted
   twice). Blocking: connects (desc's host/port or unix socket, password,
   db; connect_timeout_ms for every step), runs INFO and one HSET, and
   disconnects. Returns SIMBA_OK, SIMBA_EINVAL (bad desc or tenant),
   SIMBA_EDISCONNECTED, SIMBA_EAUTH or SIMBA_EBACKEND; `msg` (msg_size bytes,
   may be NULL) gets a line saying what went wrong. The same with redis-cli:
     redis-cli HSET 'simba:epoch:{TENANT}' run RUN_ID grace 0
   where RUN_ID is the run_id line of `redis-cli INFO server`. With
   cluster_seeds: every master of the cluster's map, each with its own
   run_id and the tenant's key of that master (docs/redis.md, Cluster). */
SIMBADEF int simba_redis_init_server(const simba_redis_desc *desc, const char *tenant, char *msg,
                                     size_t msg_size);
/* simba_redis_init_server_url: the same for the server of a parsed URL
   (redis://, redis+unix://, redis+cluster://; its parameters as for
   simba_redis_from_url, after simba_url_client_options). redis+sentinel is
   refused (SIMBA_EUNSUPPORTED): init the master by its own address. A
   failure of the server step has err->part "server" and the message of
   simba_redis_init_server. */
SIMBADEF int simba_redis_init_server_url(simba_url *u, const char *tenant, simba_url_error *err);

/* simba_redis_resource_key: the base key of resource `name` of `tenant`
   under `prefix` (NULL: "simba"), written into out (size bytes, NUL
   terminated when size > 0). The resource's keys are this base plus ":m",
   ":q", ":e" and ":t:<request>"; all hash to the base's cluster slot.
   Returns the length of the key (without the NUL; like snprintf, it may be
   more than size - 1), or SIMBA_EINVAL / SIMBA_ENAME for bad arguments.
   For tools and tests: the backend computes its keys itself. */
SIMBADEF int simba_redis_resource_key(const char *prefix, const char *tenant, const char *name,
                                      char *out, size_t size);

/* simba_redis_key_slot: the Redis Cluster hash slot (0..16383) of the `len`
   bytes of `key`: CRC16 (XMODEM) of the key's hash tag (the bytes between
   its first '{' and the next '}', when not empty) or of the whole key, mod
   16384, as CLUSTER KEYSLOT says. SIMBA_EINVAL when key is NULL. For tools
   and tests: multi-resource requests on a cluster need all names to share
   a slot (docs/redis.md, Cluster). */
SIMBADEF int simba_redis_key_slot(const char *key, size_t len);

/*>>stats: counters of one backend */

/* Counters of one backend, for tests, benchmarks and monitoring (the POSIX
   struct stat / stat() pattern: the struct tag and the function share the
   name). The first fields are the same on every backend. */
struct simba_redis_stats {
    int connected;              /* the main connection is ready (handshake done) */
    int64_t reconnects;         /* main connections made ready after the first one */
    int64_t ops_sent;           /* operations the core submitted (one script call each) */
    int64_t ops_completed;      /* operations completed, whatever the status (resets included) */
    int64_t wakes;              /* simba_backend_granted/_recheck/_changed calls made for pushes */
    /* Redis only */
    int push_connected;         /* the push connection is subscribed (a cluster: every push
                                   connection that is needed now is subscribed) */
    int64_t scripts_sent;       /* EVALSHA/EVAL commands written (an op sent again counts again) */
    int64_t pushes;             /* messages received on the push connection */
    int64_t noscript_reloads;   /* NOSCRIPT answers (the server lost the script): the op went again as EVAL */
    int64_t transient_errors;   /* LOADING/BUSY/MASTERDOWN/TRYAGAIN answers: reconnect and send again */
    int64_t waits;              /* WAIT commands sent (wait_replicas > 0) */
    int64_t master_changes;     /* Sentinel: times the master's address changed (first answer excluded) */
    int connections;            /* connections open or opening now (main, push, sentinel; a cluster:
                                   every master's and the probe's) */
};
/* simba_redis_stats: copies the counters of backend b (the value simba_redis()
   returned; valid until the simba instance that owns it is destroyed).
   Returns SIMBA_OK, or SIMBA_EINVAL when b is not a Redis backend (a rejected
   desc's error backend included) or out is NULL. */
SIMBADEF int simba_redis_stats(simba_backend b, struct simba_redis_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_REDIS_INCLUDED */

/*--- IMPLEMENTATION ---------------------------------------------------------*/
#ifdef SIMBA_REDIS_IMPLEMENTATION
#ifndef SIMBA_REDIS_IMPL_INCLUDED
#define SIMBA_REDIS_IMPL_INCLUDED

/*>>internals: includes, the server-side script, limits, private types, memory, keys, completions */

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <limits.h>
#include <signal.h>
#include <errno.h>
#include <time.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#ifndef HIREDIS_MAJOR
#error "simba_redis.h: hiredis.h does not define HIREDIS_MAJOR"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*>>internals.text: the server side: the Lua script, one entry point per operation */

/*--- the server side: one Lua script, one entry point per operation ----------
   KEYS: the base key of each resource of the operation. ARGV: op, prefix,
   tenant, session, request, lease_ms, run ("<run_id> <master_replid>",
   "<run_id>" or "" as far as INFO told), try_only ('1', '0', or 'c':
   a contend entry), wait, gen, then name, capacity, weight of each resource. Answers are arrays that start
   with a status (0 ok, 1 ESESSION, 2 ENOTFOUND, 3 ECAPACITY, 4 EKEYBUSY);
   garbage in a key raises an error that contains "SIMBA_EPROTO".

   Keys (B is a resource's base key, see simba__redis_key):
     B:m    hash: cap = 'v2' (the layout; older versions refuse it), c (the
            capacity), ctr (the fence counter), seq (the enqueue counter), name;
            on a cluster l (the longest lease of a request enqueued on it, ms)
     B:h    zset: request -> seq of the holders (at most the capacity of them)
     B:w    zset: request -> seq of the waiters (the rest of the queue, in order)
     B:e    hash: request -> "session weight fence gen nres owner[ first-name]"
            (fence 0: waiting; owner 1: a contend entry; the request's first
            name when it has several resources)
     B:o    hash: request -> session of the contend entries (told of owner changes)
     B:q    the queue of the previous layout: migrated by the first script
     B:t:R  string, PX lease: "session gen" of a released request R (tombstone;
            written only by a client that has reconnected: gen > 1)
     P:s:{T:S}  hash of session S: exp (server ms) and "e <request> <B>" per entry
                (on a cluster one copy per master, kept KEPT ms past exp)
     P:epoch:{T} hash of tenant T: run (the server's run_id), rid (its
                master_replid), grace (no grants before, ms)
     P:epoch    run, rid, grace, at (server ms it was written), server-wide: only a
                marker that this server run kept its data since `at` (then a new
                tenant waits until at + lease at most); read and written with
                pcall (the tenant users of docs/redis.md have no rights on it)
     P:a:{T}    string: the DELETEs and SET_CAPACITYs of tenant T (INCR); OPEN and
                KEEPALIVE answer 1 + it as the admin epoch
   On a Redis Cluster ARGV[3] is "T@k@m": P:epoch:{T@k}, P:a:{T@k} and the
   marker P:epoch:{@m} are then per master (docs/redis.md, Cluster).
   Channel P:c:T:<client id>: "<session> <request> <fence> <name>" (a grant
   of a single-resource request, to the session that owns the entry: a keyed
   request id k~<key> is the same in every session of a client),
   "<session> <request> 0 <name>" (that request looks again: the owner
   changed; to contend entries only) or "- - 0 <name>" (every request on the
   name looks again: a multi-resource grant, a DELETE).
   Cost: O(log Q + C + k) per operation (C the capacity, k the grants):
   the holders and the head of B:w only, never the whole queue (INSPECT and
   DELETE excepted); docs/redis.md says why.

   Each element below stays under C99's 4095-byte limit for one literal. */
static const char *const simba__redis_lua[] = {
"local OP, P, T, SESS, REQ = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]\n"
"-- on a Redis Cluster the tenant comes as T@k@m: @k makes the tenant's epoch and\n"
"-- admin keys per node, @m the server-wide epoch marker (docs/redis.md, Cluster);\n"
"-- sessions use T and the same session id on every master: the session's copy on\n"
"-- this master is P:s:{T@k}:S, in the slot of its tag, so an entry moved here with\n"
"-- a migrated slot still names a session this master can read\n"
"local ET, MT = '', ''\n"
"if string.find(T, '@', 1, true) then T, ET, MT = string.match(T, '^([^@]*)(@%d+)(@%d+)$') end\n"
"-- pushes: a cluster publishes in this node's shard ({T@k} is on it)\n"
"local PUB, CH = 'PUBLISH', P .. ':c:' .. T .. ':'\n"
"if ET ~= '' then PUB, CH = 'SPUBLISH', P .. ':c:{' .. T .. ET .. '}:' end\n"
"local LEASE, GEN = tonumber(ARGV[6]), tonumber(ARGV[10])\n"
"-- the server run: its run_id (RUN) and master_replid (RID), '' when unknown; a\n"
"-- master made a replica (its data replaced by a full resync) and then master\n"
"-- again keeps its run_id but not its replid. RUN is the epoch's 'run' (older\n"
"-- versions write and compare it alone), RID its 'rid'\n"
"local RUN, RID = string.match(ARGV[7], '^(%S*) ?(%S*)$')\n"
"RUN, RID = RUN or '', RID or ''\n"
"-- the client's RID is the one it read last (at connect, before a keepalive);\n"
"-- a REPLICAOF flip keeps its connection, so where a grant depends on the run\n"
"-- the server's own is read (when the client could read one: INFO allowed)\n"
"local LIVE = RID == ''\n"
"local function rid()\n"
"  if not LIVE then\n"
"    LIVE = true\n"
"    local i = redis.pcall('INFO', 'replication')\n"
"    if type(i) == 'string' then RID = string.match(i, 'master_replid:(%x+)') or RID end\n"
"  end\n"
"  return RID\n"
"end\n"
"-- stored run `run` (and replid `rid`) name another run than this one\n"
"local function other_run(run, r)\n"
"  return (RUN ~= '' and run ~= '' and run ~= RUN) or (rid() ~= '' and r ~= RID)\n"
"end\n"
"local function fmt(n) return string.format('%.0f', n) end\n"
"local function skey(s)\n"
"  if ET ~= '' then return P .. ':s:{' .. T .. ET .. '}:' .. s end\n"
"  return P .. ':s:{' .. T .. ':' .. s .. '}'\n"
"end\n"
"-- RELEASE of the only holder of a resource (ours, made by this or an older\n"
"-- connection), answered here, before anything else is defined (the general\n"
"-- part's definitions cost more server time than the commands). Nobody waits:\n"
"-- removed, nobody is left to grant or tell, so not even TIME is needed.\n"
"if OP == 'release' and #KEYS == 1 then\n"
"  local k = KEYS[1]\n"
"  local h, wq, e = redis.call('ZRANGE', k .. ':h', 0, 1)\n"
"  if #h == 1 and h[1] == REQ then\n"
"    wq = redis.call('ZRANGE', k .. ':w', 0, 0, 'WITHSCORES')\n"
"    if #wq == 2 then e = redis.call('HMGET', k .. ':e', REQ, wq[1]) else e = {redis.call('HGET', k .. ':e', REQ)} end\n"
"  end\n"
"  local s, g, o = string.match(e and e[1] or '', '^(%S+) %d+ %d+ (%d+) 1 ([01])$')\n"
"  if not (s == SESS and tonumber(g) <= GEN) then wq = nil end\n"
"  local function out()\n"
"    redis.call('ZREM', k .. ':h', REQ)\n"
"    redis.call('HDEL', k .. ':e', REQ)\n"
"    redis.call('HDEL', skey(SESS), 'e ' .. REQ .. ' ' .. k)\n"
"    if o == '1' then redis.call('HDEL', k .. ':o', REQ) end\n"
"    if GEN > 1 then redis.call('SET', k .. ':t:' .. REQ, SESS .. ' ' .. ARGV[10], 'PX', ARGV[6]) end\n"
"  end\n"
"  if wq and #wq == 0 then out() return {0} end\n",
"  -- The hand-off: the head waiter W, a request on this resource alone, takes\n"
"  -- the whole capacity once we are gone (weight 0 or >= the capacity), so the\n"
"  -- grant rule (`evaluate` below, the server's copy of simba_grant_step in\n"
"  -- simba.h) grants W, with the fence max(counter + 1, TIME in us), and\n"
"  -- nobody after it: decided from W alone, O(1). Granted here unless anything\n"
"  -- needs the general part (W's session dead or unknown here, the restart\n"
"  -- grace, garbage, many contend entries): everything is read and checked\n"
"  -- before the first write, so falling through to the general part is exact.\n"
"  if wq and #wq == 2 then\n"
"    local W = wq[1]\n"
"    local m = redis.call('HMGET', k .. ':m', 'cap', 'c', 'ctr', 'name')\n"
"    local cap, ctr = tonumber(m[2]), tonumber(m[3] or 0)\n"
"    local ws, wws, wg, wo = string.match(e[2] or '', '^(%S+) (%d+) 0 (%d+) 1 ([01])$')\n"
"    local ww = tonumber(wws)\n"
"    if m[1] == 'v2' and m[4] and cap and cap >= 1 and cap == math.floor(cap) and ctr and ctr >= 0\n"
"       and ctr == math.floor(ctr) and ws and (ww == 0 or ww >= cap) then\n"
"      local x = tonumber(redis.call('HGET', skey(ws), 'exp'))\n"
"      local ep = redis.call('HMGET', P .. ':epoch:{' .. T .. ET .. '}', 'run', 'grace', 'rid')\n"
"      local tm = redis.call('TIME')\n"
"      local now_us = tonumber(tm[1]) * 1000000 + tonumber(tm[2])\n"
"      local gr = tonumber(ep[2])\n"
"      -- the owner changes (W's session is not ours): the contend entries are told\n"
"      local ids = ws ~= SESS and redis.call('HKEYS', k .. ':o') or {}\n"
"      if x and x > math.floor(now_us / 1000) and ep[1] and gr and math.floor(now_us / 1000) >= gr\n"
"         and (RUN == '' or ep[1] == RUN) and (rid() == '' or ep[3] == RID) and #ids <= 1000 then\n"
"        out()\n"
"        local fs = string.format('%.0f', math.max(ctr + 1, now_us))\n"
"        redis.call('ZREM', k .. ':w', W)\n"
"        redis.call('ZADD', k .. ':h', wq[2], W)\n"
"        redis.call('HSET', k .. ':e', W, ws .. ' ' .. wws .. ' ' .. fs .. ' ' .. wg .. ' 1 ' .. wo)\n"
"        redis.call('HSET', k .. ':m', 'ctr', fs)\n"
"        local function chan(c) return CH .. (string.match(c, '^(.*)~[^~]*$') or c) end\n"
"        redis.pcall(PUB, chan(ws), ws .. ' ' .. W .. ' ' .. fs .. ' ' .. m[4])\n"
"        if #ids > 0 then\n"
"          local ss = redis.call('HMGET', k .. ':o', unpack(ids))\n"
"          for j, id in ipairs(ids) do\n"
"            if ss[j] and id ~= REQ then redis.pcall(PUB, chan(ss[j]), ss[j] .. ' ' .. id .. ' 0 ' .. m[4]) end\n"
"          end\n"
"        end\n"
"        return {0}\n"
"      end\n"
"    end\n"
"  end\n"
"end\n",
"local tm = redis.call('TIME')\n"
"local NOW_US = tonumber(tm[1]) * 1000000 + tonumber(tm[2])\n"
"local NOW = math.floor(NOW_US / 1000)\n"
"local function proto(what) error('SIMBA_EPROTO ' .. what) end\n"
"local function num(v, what)\n"
"  local n = tonumber(v)\n"
"  if not n or n < 0 or n ~= math.floor(n) then proto(what) end\n"
"  return n\n"
"end\n",
"-- the tenant's leases in use: a field l<lease> of its epoch per lease, whose\n"
"-- value is a horizon (server ms) past every expiry given to a session of\n"
"-- that lease; a restart grace outlasts the longest lease whose horizon has\n"
"-- not passed, not only the lease of the client that starts it\n"
"local EKEY = P .. ':epoch:{' .. T .. ET .. '}'\n"
"local function lease_classes(drop)\n"
"  local names, longest, dead = {}, 0, {}\n"
"  for _, n in ipairs(redis.call('HKEYS', EKEY)) do\n"
"    if string.match(n, '^l%d+$') then names[#names + 1] = n end\n"
"  end\n"
"  for i = 1, #names, 500 do\n"
"    local part = {unpack(names, i, math.min(i + 499, #names))}\n"
"    local h = redis.call('HMGET', EKEY, unpack(part))\n"
"    for j, n in ipairs(part) do\n"
"      local l = tonumber(string.sub(n, 2))\n"
"      if tonumber(h[j]) and tonumber(h[j]) > NOW then\n"
"        if l > longest then longest = l end\n"
"      else\n"
"        dead[#dead + 1] = n\n"
"      end\n"
"    end\n"
"  end\n"
"  if drop then\n"
"    for i = 1, #dead, 500 do redis.call('HDEL', EKEY, unpack(dead, i, math.min(i + 499, #dead))) end\n"
"  end\n"
"  return longest\n"
"end\n"
"-- OPEN and KEEPALIVE: this session's lease is in use until NOW + LEASE; a\n"
"-- horizon written one lease ahead of that covers it and every expiry given\n"
"-- with this lease for one lease more: written at most once a lease per lease\n"
"-- in use, not per keepalive (a new lease also sweeps the horizons that passed)\n"
"local function note_lease()\n"
"  local n = 'l' .. fmt(LEASE)\n"
"  local h = tonumber(redis.call('HGET', EKEY, n))\n"
"  if h and NOW + LEASE <= h then return end\n"
"  if not h then lease_classes(true) end\n"
"  redis.call('HSET', EKEY, n, fmt(NOW + 2 * LEASE))\n"
"end\n"
"-- sessions: alive while the stored expiry (server ms) is ahead of TIME. On a\n"
"-- cluster a copy outlives its expiry by KEPT, so that a missing copy is not\n"
"-- a dead session but one this master cannot vouch for: an entry that came\n"
"-- with a migrated slot, or a copy left under a tag whose slot moved away.\n"
"-- Its owner may still believe, renewing its copies on masters it knows, so\n"
"-- it is unknown, never dead: it gets a copy here that lives the longest\n"
"-- lease in use (what a restart grace lasts: the tenant's lease notes here,\n"
"-- and the resource's own, 'l' of B:m, which moved with its slot while the\n"
"-- notes may not have), in which the owner's keepalive reaches this master\n"
"-- and renews it, or it ends and the session is dead. The caller's own\n"
"-- session is never unknown: its copy is written by its OPEN and KEEPALIVE.\n"
"local KEPT = 600000\n"
"local SX = {}\n"
"local function unknown(s, R)\n"
"  local e = NOW + math.max(LEASE, lease_classes(false), R and R.lease or 0)\n"
"  redis.call('HSET', skey(s), 'exp', fmt(e))\n"
"  redis.call('PEXPIREAT', skey(s), fmt(e + KEPT))\n"
"  return e\n"
"end\n"
"local function alive(s, R)\n"
"  local e = SX[s]\n"
"  if e == nil then\n"
"    e = false\n"
"    local v = redis.call('HGET', skey(s), 'exp')\n"
"    if v then\n"
"      e = num(v, 'session expiry')\n"
"      if e <= NOW then e = false end\n"
"    elseif ET ~= '' and s ~= SESS then\n"
"      e = unknown(s, R)\n"
"    end\n"
"    SX[s] = e\n"
"  end\n"
"  return e\n"
"end\n"
"-- 'l' of B:m on a cluster: the longest lease of a request enqueued on the\n"
"-- resource, as the HSET arguments that raise it to the caller's (none when\n"
"-- `had` covers it)\n"
"local function lease_note(had)\n"
"  if ET ~= '' and LEASE > (tonumber(had) or 0) then return {'l', fmt(LEASE)} end\n"
"  return {}\n"
"end\n",
"-- restart grace: a missing epoch of the tenant (data lost) or another run_id\n"
"-- (restart, failover) holds every grant of the tenant back for the longest\n"
"-- lease in use (lease_classes; at least the caller's). The\n"
"-- epoch is per tenant: no key is shared between tenants, so none can poison it\n"
"-- for the others. P:epoch (the epoch of older versions) is only a marker: when\n"
"-- it says this server run kept its data since 'at', a missing tenant epoch is a\n"
"-- new tenant (or one lost before 'at'), whose grants wait only until at + lease.\n"
"-- A user without rights on it (pcall) waits one lease at its tenant's first use.\n"
"local GRACE\n"
"local function grace()\n"
"  if GRACE == nil then\n"
"    local v = redis.call('HMGET', EKEY, 'run', 'grace', 'rid')\n"
"    local run = v[1]\n"
"    GRACE = tonumber(v[2])\n"
"    -- a missing rid (written by an older version) is another run too: one\n"
"    -- grace, then it is there (older versions never remove it)\n"
"    if not run or not GRACE or other_run(run, v[3]) then\n"
"      GRACE = NOW + math.max(LEASE, lease_classes(false))\n"
"      local mk = P .. ':epoch' .. (MT ~= '' and ':{' .. MT .. '}' or '')\n"
"      -- 'at': when the marker saw this server run first; a tenant lost before\n"
"      -- then needs one lease (ours) from it, as its own epoch would have given\n"
"      local m = redis.pcall('HMGET', mk, 'run', 'grace', 'at', 'rid')\n"
"      if type(m) == 'table' and not m.err then\n"
"        local at = tonumber(m[3])\n"
"        if m[1] and tonumber(m[2]) and not other_run(m[1], m[4]) then\n"
"          if not run and at and at + LEASE < GRACE then GRACE = at + LEASE end\n"
"        else\n"
"          redis.pcall('HSET', mk, 'run', RUN, 'grace', fmt(GRACE), 'at', fmt(NOW), 'rid', rid())\n"
"        end\n"
"      end\n"
"      redis.call('HSET', EKEY, 'run', RUN, 'grace', fmt(GRACE), 'rid', rid())\n"
"    elseif run == '' and RUN ~= '' then\n"
"      redis.call('HSET', EKEY, 'run', RUN)\n"
"    end\n"
"  end\n"
"  return GRACE\n"
"end\n"
"-- the admin epoch of the tenant: 1 + the DELETEs and SET_CAPACITYs it has seen;\n"
"-- holders re-check their holds when it moves (a lost push hides no delete)\n"
"local AKEY = P .. ':a:{' .. T .. ET .. '}'\n"
"-- the session operations need nothing more: answer them before the rest is defined\n"
"if OP == 'open' or OP == 'keepalive' then\n"
"  if OP == 'keepalive' and not alive(SESS) then return {1} end\n"
"  local sk, x = skey(SESS), fmt(NOW + LEASE)\n"
"  redis.call('HSET', sk, 'exp', x, 'rn', fmt(NOW))\n"
"  redis.call('PEXPIREAT', sk, ET ~= '' and fmt(NOW + LEASE + KEPT) or x)\n"
"  local ae = num(redis.call('GET', AKEY) or 0, 'admin epoch') + 1\n"
"  -- OPEN also says whether a restart grace runs: its end and what is left of it\n"
"  -- (the grace is read before this session's lease is noted)\n"
"  local g = OP == 'open' and grace() or 0\n"
"  note_lease()\n"
"  if NOW < g then return {0, ae, GRACE, GRACE - NOW} end\n"
"  return {0, ae}\n"
"end\n"
"local TRY, WAITF = ARGV[8] == '1', ARGV[9] == '1'\n",
"local CONT = ARGV[8] == 'c'\n"
"-- ENQUEUE of one resource that nobody holds or waits for (an uncontended\n"
"-- acquire): granted here, before the general machinery below is even defined\n"
"-- (its closures cost more server time than the commands), unless the session\n"
"-- is gone, the weight does not fit, a tombstone exists or the restart grace\n"
"-- runs (the general path answers those). Both zsets empty means no entry at\n"
"-- all, so the request is new. Resources of the previous layout go the general\n"
"-- way (it migrates them).\n"
"if OP == 'enqueue' and #KEYS == 1 then\n"
"  local k = KEYS[1]\n"
"  local m = redis.call('HMGET', k .. ':m', 'cap', 'c', 'ctr', 'seq', 'name', 'l')\n"
"  if (m[1] == 'v2' or not m[1]) and #redis.call('ZRANGE', k .. ':h', 0, 0) == 0\n"
"     and #redis.call('ZRANGE', k .. ':w', 0, 0) == 0 then\n"
"    local cap, w, caps = tonumber(ARGV[12]), tonumber(ARGV[13]), ARGV[12]\n"
"    if m[1] then\n"
"      caps = m[2]\n"
"      cap = num(m[2], 'capacity')\n"
"      if cap < 1 then proto('capacity') end\n"
"    end\n"
"    local ctr, seq = num(m[3] or 0, 'fence counter'), num(m[4] or 0, 'sequence') + 1\n"
"    if not alive(SESS) then return {1} end\n"
"    if w > cap then return {3} end\n"
"    if not redis.call('GET', k .. ':t:' .. REQ) and NOW >= grace() then\n"
"      -- (string.format is the slow part of Lua here: one call; ARGV are decimal already;\n"
"      -- tostring writes 1e+14 from 10^14 on: fmt there, never a rounded counter)\n"
"      local f = math.max(ctr + 1, NOW_US)\n"
"      local fs, seqs = fmt(f), seq < 1e14 and tostring(seq) or fmt(seq)\n"
"      redis.call('ZADD', k .. ':h', seqs, REQ)\n"
"      redis.call('HSET', skey(SESS), 'e ' .. REQ .. ' ' .. k, '1')\n"
"      redis.call('HSET', k .. ':e', REQ, SESS .. ' ' .. ARGV[13] .. ' ' .. fs .. ' ' .. ARGV[10] .. (CONT and ' 1 1' or ' 1 0'))\n"
"      if CONT then redis.call('HSET', k .. ':o', REQ, SESS) end\n"
"      redis.call('HSET', k .. ':m', 'cap', 'v2', 'c', caps, 'ctr', fs, 'seq', seqs, 'name', m[5] or ARGV[11],\n"
"                 unpack(lease_note(m[6])))\n"
"      if not m[1] and m[3] then redis.call('PERSIST', k .. ':m') end\n"
"      if WAITF then redis.call('HSET', skey(SESS), 'w', fmt(NOW)) end\n"
"      return {0, 1, 0, 1, -1, SESS, f, cap, 0, 0}\n"
"    end\n"
"  end\n"
"end\n"
"-- PUBLISH is always redis.pcall: a push is a hint, and a user without the channel\n"
"-- (an ACL user with no &pattern) must not fail the script half-way through its writes\n"
"local function client_of(s) return string.match(s, '^(.*)~[^~]*$') or s end\n"
"local function chan(s) return CH .. client_of(s) end\n"
"local function eff(w, cap) if w == 0 or w > cap then return cap end return w end\n"
"local function arg(i)\n"
"  local b = 10 + 3 * (i - 1)\n"
"  return ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])\n"
"end\n"
"local function chunks(list, f)\n"
"  for i = 1, #list, 1000 do f({unpack(list, i, math.min(i + 999, #list))}) end\n"
"end\n"
"-- an entry: \"session weight fence gen nres owner-events[ first-name]\"\n"
"local function parse(id, v)\n"
"  local s, w, f, g, n, o, first = string.match(v or '', '^(%S+) (%d+) (%d+) (%d+) (%d+) ([01]) ?(.*)$')\n"
"  if not s then proto('entry ' .. id) end\n"
"  return {s = s, w = tonumber(w), f = tonumber(f), g = tonumber(g), n = tonumber(n), o = o == '1', first = first}\n"
"end\n"
"local function enc(e)\n"
"  local v = e.s .. ' ' .. fmt(e.w) .. ' ' .. fmt(e.f) .. ' ' .. fmt(e.g) .. ' ' .. fmt(e.n) .. (e.o and ' 1' or ' 0')\n"
"  if e.n > 1 then v = v .. ' ' .. e.first end\n"
"  return v\n"
"end\n"
"local function put(R, id)\n"
"  R.ent[id].new = nil\n"
"  redis.call('HSET', R.k .. ':e', id, enc(R.ent[id]))\n"
"end\n"
"-- the entries of ids not read yet, into R.ent (checked: garbage aborts before any write)\n"
"local function fetch(R, ids)\n"
"  local todo = {}\n"
"  for _, id in ipairs(ids) do if not R.ent[id] then todo[#todo + 1] = id end end\n"
"  chunks(todo, function(part)\n"
"    local got = redis.call('HMGET', R.k .. ':e', unpack(part))\n",
"    for j = 1, #part do R.ent[part[j]] = parse(part[j], got[j]) end\n"
"  end)\n"
"end\n"
"-- a ZRANGE ... WITHSCORES answer: ids appended to ids, their scores into sc\n"
"local function split(flat, ids, sc)\n"
"  for i = 1, #flat, 2 do ids[#ids + 1] = flat[i]; sc[flat[i]] = flat[i + 1] end\n"
"  return ids\n"
"end\n"
"-- a resource of a version before 2 (one zset B:q of holders and waiters, 'cap' a\n"
"-- number): moved once into B:h and B:w, read and checked whole before any write\n"
"local function migrate(k, m)\n"
"  local cap = num(m[1], 'capacity')\n"
"  if cap < 1 then proto('capacity') end\n"
"  local ids, sc, old = {}, {}, {}\n"
"  split(redis.call('ZRANGE', k .. ':q', 0, -1, 'WITHSCORES'), ids, sc)\n"
"  chunks(ids, function(part)\n"
"    local got = redis.call('HMGET', k .. ':e', unpack(part))\n"
"    for j = 1, #part do\n"
"      local s, w, f, g, n, first = string.match(got[j] or '', '^(%S+) (%d+) (%d+) (%d+) (%d+) ?(.*)$')\n"
"      if not s then proto('entry ' .. part[j]) end\n"
"      old[part[j]] = {s = s, w = tonumber(w), f = tonumber(f), g = tonumber(g), n = tonumber(n), o = false, first = first}\n"
"    end\n"
"  end)\n"
"  if #ids > 0 and not m[5] then proto('a queue without name') end\n"
"  for _, id in ipairs(ids) do\n"
"    redis.call('ZADD', k .. (old[id].f > 0 and ':h' or ':w'), sc[id], id)\n"
"    redis.call('HSET', k .. ':e', id, enc(old[id]))\n"
"  end\n"
"  redis.call('DEL', k .. ':q')\n"
"  redis.call('HSET', k .. ':m', 'cap', 'v2', 'c', m[1])\n"
"  m[2], m[1] = m[1], 'v2'\n"
"end\n"
"local function owner_of(R)\n"
"  local h = R.hs[1]\n"
"  if h then return R.ent[h].s end\n"
"  return ''\n"
"end\n"
"-- the header and the holders (at most the capacity of them), never the waiters\n"
"local function load(k, name)\n"
"  local m = redis.call('HMGET', k .. ':m', 'cap', 'c', 'ctr', 'seq', 'name', 'l')\n"
"  local R = {k = k, ent = {}, hs = {}, cap = false, ctr = 0, seq = 0, name = m[5] or name, lease = tonumber(m[6]) or 0}\n"
"  if m[3] then R.ctr = num(m[3], 'fence counter') end\n"
"  if m[4] then R.seq = num(m[4], 'sequence') end\n"
"  R.leftover = not m[1] and m[3]\n"
"  if m[1] and m[1] ~= 'v2' then migrate(k, m) end\n"
"  if m[1] then\n"
"    R.cap = num(m[2], 'capacity')\n"
"    if R.cap < 1 then proto('capacity') end\n"
"    if not m[5] then proto('a resource without name') end\n"
"    R.hs = redis.call('ZRANGE', k .. ':h', 0, -1)\n"
"    fetch(R, R.hs)\n"
"  end\n"
"  R.owner = owner_of(R)\n"
"  return R\n"
"end\n"
"-- the entry of REQ (a holder is read already; a waiter is one HGET)\n"
"local function own(R)\n"
"  if not R.ent[REQ] and R.cap then\n"
"    local v = redis.call('HGET', R.k .. ':e', REQ)\n"
"    if v then R.ent[REQ] = parse(REQ, v) end\n"
"  end\n"
"  return R.ent[REQ]\n"
"end\n"
"-- out of the resource; the field in its session stays (the session is dead, or remove() does it)\n"
"local function drop(R, id)\n"
"  local e = R.ent[id]\n"
"  if e.f > 0 then\n"
"    redis.call('ZREM', R.k .. ':h', id)\n"
"    for i, x in ipairs(R.hs) do if x == id then table.remove(R.hs, i) break end end\n"
"  else\n"
"    redis.call('ZREM', R.k .. ':w', id)\n"
"  end\n"
"  redis.call('HDEL', R.k .. ':e', id)\n"
"  if e.o then redis.call('HDEL', R.k .. ':o', id) end\n"
"  R.ent[id] = nil\n"
"end\n"
"local function remove(R, id)\n"
"  local s = R.ent[id].s\n"
"  drop(R, id)\n"
"  redis.call('HDEL', skey(s), 'e ' .. id .. ' ' .. R.k)\n"
"end\n"
"-- dead holders go as soon as anyone looks (dead waiters when they reach the head)\n"
"local function purge(R)\n"
"  local i = 1\n"
"  while R.hs[i] do\n"
"    local id = R.hs[i]\n"
"    if alive(R.ent[id].s, R) then i = i + 1 else drop(R, id) end\n"
"  end\n"
"end\n"
"-- an owner change: to the entries that asked for OWNER events (contend\n"
"-- entries, B:o: request -> session), each named, so that only its handle looks\n"
"-- again; never to the caller's own request (self), which is answered\n"
"local function tell(R, self)\n"
"  local ids = redis.call('HKEYS', R.k .. ':o')\n"
"  chunks(ids, function(part)\n"
"    local ss = redis.call('HMGET', R.k .. ':o', unpack(part))\n"
"    for j, id in ipairs(part) do\n"
"      local s = ss[j]\n",
"      if s and not (id == self and s == SESS) then\n"
"        redis.pcall(PUB, chan(s), s .. ' ' .. id .. ' 0 ' .. R.name)\n"
"      end\n"
"    end\n"
"  end)\n"
"end\n"
"local function grant(R, id, score)\n"
"  local e = R.ent[id]\n"
"  e.f = math.max(R.ctr + 1, NOW_US)\n"
"  R.ctr = e.f\n"
"  R.dirty = true\n"
"  redis.call('ZADD', R.k .. ':h', score, id)\n"
"  R.hs[#R.hs + 1] = id\n"
"end\n"
"-- the grant rule, the server's copy of simba_grant_weight/_step/_fence in\n"
"-- simba.h (docs/design.md): holders are a prefix of the queue, so their\n"
"-- weights are what is ahead of the first waiter; the waiters are read from the\n"
"-- head of B:w a window at a time, only while one can still be granted (a dead\n"
"-- one met on the way is purged). A new grant takes max(counter + 1, server time\n"
"-- in us), moves to B:h and is published to its client (but the caller's own\n"
"-- request, which is answered); a request on several resources is only told to\n"
"-- look (one fence is not its grant), under its first name\n"
"local function evaluate(R, self)\n"
"  if not R.cap then return end\n"
"  local sum, cap, new, win = 0, R.cap, {}, 2\n"
"  for _, id in ipairs(R.hs) do sum = sum + eff(R.ent[id].w, cap) end\n"
"  R.block = nil\n"
"  while not R.block do\n"
"    local sc = {}\n"
"    local ids = split(redis.call('ZRANGE', R.k .. ':w', 0, win - 1, 'WITHSCORES'), {}, sc)\n"
"    fetch(R, ids)\n"
"    for _, id in ipairs(ids) do\n"
"      local e = R.ent[id]\n"
"      if not alive(e.s, R) then drop(R, id)\n"
"      elseif sum + eff(e.w, cap) > cap then R.block = id break\n"
"      elseif NOW < grace() then R.grace = GRACE; R.block = id break\n"
"      else\n"
"        sum = sum + eff(e.w, cap)\n"
"        redis.call('ZREM', R.k .. ':w', id)\n"
"        grant(R, id, sc[id])\n"
"        put(R, id)\n"
"        new[#new + 1] = id\n"
"      end\n"
"    end\n"
"    if #ids < win then break end\n"
"    if win < 128 then win = win * 2 end\n"
"  end\n"
"  R.sum = sum\n"
"  for _, id in ipairs(new) do\n"
"    local e = R.ent[id]\n"
"    if id ~= self then\n"
"      if e.n > 1 then redis.pcall(PUB, chan(e.s), '- - 0 ' .. e.first)\n"
"      else redis.pcall(PUB, chan(e.s), e.s .. ' ' .. id .. ' ' .. fmt(e.f) .. ' ' .. R.name) end\n"
"    end\n"
"  end\n"
"  local owner = owner_of(R)\n"
"  if owner ~= R.owner then R.owner = owner; tell(R, self) end\n"
"end\n"
"-- one write of the resource's header per operation ('cap' = 'v2' marks the\n"
"-- layout: older versions read it as a bad capacity and refuse with SIMBA_EPROTO)\n"
"local function save(R)\n"
"  local e = R.ent[REQ]\n"
"  if e and e.new then put(R, REQ) end\n"
"  if R.dirty then\n"
"    redis.call('HSET', R.k .. ':m', 'cap', 'v2', 'c', fmt(R.cap), 'ctr', fmt(R.ctr), 'seq', fmt(R.seq), 'name', R.name,\n"
"               unpack(R.note or {}))\n"
"    if R.leftover then redis.call('PERSIST', R.k .. ':m') end\n"
"  end\n"
"end\n"
"-- the waiters ahead of id in the zset k (all of them when id is nil): ZRANK and\n"
"-- ZCARD, O(log Q); an ACL user of the recipe of older versions may lack them:\n"
"-- then counted from the whole zset, O(Q) (docs/redis.md)\n"
"local function position(k, id)\n"
"  local n = id and redis.pcall('ZRANK', k, id) or redis.pcall('ZCARD', k)\n"
"  if type(n) == 'number' then return n end\n"
"  local ids = redis.call('ZRANGE', k, 0, -1)\n"
"  if not id then return #ids end\n"
"  for i, x in ipairs(ids) do if x == id then return i - 1 end end\n"
"  return #ids\n"
"end\n"
"-- recheck: what can end the wait without a push is a holder's session or the\n"
"-- first waiter's (ahead of REQ) expiring, or the restart grace ending\n"
"local function answer(RS)\n"
"  local granted, fences, recheck = 1, {}, -1\n"
"  local function soon(x) if x and (recheck < 0 or x - NOW < recheck) then recheck = x - NOW end end\n"
"  for _, R in ipairs(RS) do save(R) end\n"
"  for i, R in ipairs(RS) do\n"
"    local e = R.ent[REQ]\n"
"    fences[i] = e and e.f or 0\n"
"    if fences[i] == 0 then\n"
"      granted = 0\n"
"      soon(R.grace)\n"
"      for _, id in ipairs(R.hs) do soon(alive(R.ent[id].s, R)) end\n"
"      if R.block and R.block ~= REQ and R.ent[R.block] then soon(alive(R.ent[R.block].s, R)) end\n"
"    end\n"
"  end\n"
"  if recheck < -1 then recheck = 0 end\n",
"  if granted == 1 and WAITF then redis.call('HSET', skey(SESS), 'w', fmt(NOW)) end\n"
"  local R0, ahead = RS[1], 0\n"
"  local e0 = R0.ent[REQ]\n"
"  if e0 and e0.f > 0 then\n"
"    for i, id in ipairs(R0.hs) do if id == REQ then ahead = i - 1 break end end\n"
"  else\n"
"    ahead = #R0.hs + position(R0.k .. ':w', e0 and REQ)\n"
"  end\n"
"  local out = {0, granted, ahead, #R0.hs, recheck, owner_of(R0)}\n"
"  for i = 1, #RS do out[6 + i] = fences[i] end\n"
"  -- then the stored capacity of the first resource and, when the restart grace\n"
"  -- held a grant back, its end and what is left of it (server ms; 0 0 none)\n"
"  local gend = 0\n"
"  for _, R in ipairs(RS) do if R.grace and R.grace > gend then gend = R.grace end end\n"
"  out[#out + 1] = R0.cap or 0\n"
"  out[#out + 1] = gend\n"
"  out[#out + 1] = gend > NOW and gend - NOW or 0\n"
"  return out\n"
"end\n",
"local RS = {}\n"
"if OP == 'close' then\n"
"  local sk = skey(SESS)\n"
"  local fields = redis.call('HKEYS', sk)\n"
"  redis.call('DEL', sk)\n"
"  -- on a cluster a dead copy stays (see alive): an entry of the session that\n"
"  -- came here with a migrated slot is then purged at once, not waited for\n"
"  if ET ~= '' then redis.call('HSET', sk, 'exp', fmt(NOW)); redis.call('PEXPIREAT', sk, fmt(NOW + KEPT)) end\n"
"  SX[SESS] = false\n"
"  local byk, order = {}, {}\n"
"  for _, f in ipairs(fields) do\n"
"    local id, k = string.match(f, '^e (%S+) (%S+)$')\n"
"    -- on a cluster, a resource whose slot moved to another master since is left\n"
"    -- to that master (its entry is purged there once the session is gone there)\n"
"    if k and ET ~= '' and type(redis.pcall('EXISTS', k .. ':m')) ~= 'number' then k = nil end\n"
"    if k then\n"
"      local R = byk[k]\n"
"      if not R then R = load(k, nil); byk[k] = R; order[#order + 1] = R end\n"
"      if R.cap then\n"
"        local v = not R.ent[id] and redis.call('HGET', k .. ':e', id)\n"
"        if v then R.ent[id] = parse(id, v) end\n"
"        if R.ent[id] and R.ent[id].s == SESS then drop(R, id) end\n"
"      end\n"
"    end\n"
"  end\n"
"  for _, R in ipairs(order) do purge(R); evaluate(R, nil); save(R) end\n"
"  return {0}\n"
"end\n"
"for i = 1, #KEYS do RS[i] = load(KEYS[i], (arg(i))) end\n"
"if OP == 'enqueue' then\n"
"  if not alive(SESS) then return {1} end\n"
"  local mine = 0\n"
"  for i, R in ipairs(RS) do\n"
"    local e = own(R)\n"
"    if e and e.s == SESS then mine = mine + 1\n"
"    else\n"
"      if e and alive(e.s, R) then return {4} end\n"
"      local _, cap, w = arg(i)\n"
"      if w > (R.cap or cap) then return {3} end\n"
"    end\n"
"  end\n"
"  if mine > 0 and mine < #RS then return {2} end\n"
"  if mine == 0 then\n"
"    -- a RELEASE left a tombstone: this ENQUEUE was sent before it on an older connection\n"
"    for _, R in ipairs(RS) do\n"
"      local v = redis.call('GET', R.k .. ':t:' .. REQ)\n"
"      local s, g = string.match(v or '', '^(%S+) (%d+)$')\n"
"      if s == SESS and tonumber(g) > GEN then return {2} end\n"
"    end\n"
"  end\n"
"  for _, R in ipairs(RS) do\n"
"    if R.ent[REQ] and R.ent[REQ].s ~= SESS then drop(R, REQ) end\n"
"    purge(R); evaluate(R, REQ)\n"
"  end\n"
"  if mine == 0 then\n"
"    -- a new entry is granted at once where nothing waits (the walk reached the\n"
"    -- end of B:w) and its weight fits beside the holders\n"
"    local fit, all = {}, true\n"
"    for i, R in ipairs(RS) do\n"
"      local name, cap, w = arg(i)\n"
"      local c = R.cap or cap\n"
"      fit[i] = not R.block and (R.sum or 0) + eff(w, c) <= c\n"
"      if fit[i] and NOW < grace() then fit[i] = false; R.grace = GRACE end\n"
"      all = all and fit[i]\n"
"    end\n"
"    if TRY and not all then return answer(RS) end\n"
"    for i, R in ipairs(RS) do\n"
"      local name, cap, w = arg(i)\n"
"      if not R.cap then R.cap, R.name = cap, name end\n"
"      R.seq = R.seq + 1\n"
"      R.dirty = true\n"
"      R.note = lease_note(R.lease)\n"
"      R.ent[REQ] = {s = SESS, w = w, f = 0, g = GEN, n = #RS, o = CONT, first = (arg(1)), new = true}\n"
"      redis.call('HSET', skey(SESS), 'e ' .. REQ .. ' ' .. R.k, '1')\n"
"      if CONT then redis.call('HSET', R.k .. ':o', REQ, SESS) end\n"
"      if fit[i] then grant(R, REQ, fmt(R.seq)) else redis.call('ZADD', R.k .. ':w', fmt(R.seq), REQ) end\n"
"      local owner = owner_of(R)\n"
"      if owner ~= R.owner then R.owner = owner; tell(R, REQ) end\n"
"    end\n"
"  end\n"
"  return answer(RS)\n"
"elseif OP == 'poll' then\n"
"  if not alive(SESS) then return {1} end\n"
"  for _, R in ipairs(RS) do\n"
"    local e = own(R)\n"
"    if not e or e.s ~= SESS then return {2} end\n"
"  end\n"
"  for _, R in ipairs(RS) do purge(R); evaluate(R, REQ) end\n"
"  return answer(RS)\n"
"elseif OP == 'release' then\n",
"  for _, R in ipairs(RS) do\n"
"    local e = own(R)\n"
"    -- an entry made by a newer connection than this RELEASE was sent on stays\n"
"    if not (e and e.s == SESS and e.g > GEN) then\n"
"      if e and e.s == SESS then remove(R, REQ) end\n"
"      -- a client still on its first connection has no older one that could be late\n"
"      if GEN > 1 then redis.call('SET', R.k .. ':t:' .. REQ, SESS .. ' ' .. fmt(GEN), 'PX', fmt(LEASE)) end\n"
"    end\n"
"  end\n"
"  for _, R in ipairs(RS) do purge(R); evaluate(R, nil); save(R) end\n"
"  return {0}\n"
"end\n"
"local R = RS[1]\n"
"-- every waiter, in order (INSPECT and DELETE list them all: O(Q) by nature)\n"
"local function waiters(R)\n"
"  local ids = split(redis.call('ZRANGE', R.k .. ':w', 0, -1, 'WITHSCORES'), {}, {})\n"
"  fetch(R, ids)\n"
"  return ids\n"
"end\n"
"if OP == 'inspect' then\n"
"  -- the restart grace left (ms), then per entry the server's times: until its\n"
"  -- session expires, since the session's last renewal ('rn' of OPEN and\n"
"  -- KEEPALIVE; -1 for a session of an older version, or one this master only\n"
"  -- vouches for), since the grant: the fence is max(counter + 1, TIME in us),\n"
"  -- the grant time unless the counter ran ahead (then less, or -1)\n"
"  local gl = NOW < grace() and GRACE - NOW or 0\n"
"  if not R.cap then return {0, 0, 0, '', 0, gl} end\n"
"  purge(R); evaluate(R, nil); save(R)\n"
"  local list = {}\n"
"  for _, id in ipairs(R.hs) do list[#list + 1] = id end\n"
"  for _, id in ipairs(waiters(R)) do\n"
"    if alive(R.ent[id].s, R) then list[#list + 1] = id else drop(R, id) end\n"
"  end\n"
"  local out, rns = {0, R.cap, #R.hs, owner_of(R), #list, gl}, {}\n"
"  for _, id in ipairs(list) do\n"
"    local e = R.ent[id]\n"
"    local x = alive(e.s, R)\n"
"    if rns[e.s] == nil then rns[e.s] = tonumber(redis.call('HGET', skey(e.s), 'rn')) or false end\n"
"    local rn = rns[e.s]\n"
"    out[#out + 1] = e.s\n"
"    out[#out + 1] = e.f\n"
"    out[#out + 1] = e.w\n"
"    out[#out + 1] = (e.f > 0) and 1 or 0\n"
"    out[#out + 1] = x and x - NOW or -1\n"
"    out[#out + 1] = (rn and rn <= NOW) and NOW - rn or -1\n"
"    out[#out + 1] = (e.f > 0 and e.f <= NOW_US) and math.floor((NOW_US - e.f) / 1000) or -1\n"
"  end\n"
"  return out\n"
"elseif OP == 'capacity' then\n"
"  local name, cap = arg(1)\n"
"  if not cap or cap < 1 then return {3} end\n"
"  purge(R)\n"
"  R.cap, R.name, R.dirty = cap, R.name or name, true\n"
"  redis.call('INCR', AKEY)\n"
"  evaluate(R, nil); save(R)\n"
"  return {0}\n"
"elseif OP == 'delete' then\n"
"  -- the fence counter stays for a minute: fences of a re-created resource stay above the old ones\n"
"  if not R.cap then return {0} end\n"
"  local seen = {}\n"
"  for _, list in ipairs({R.hs, waiters(R)}) do\n"
"    for _, id in ipairs(list) do\n"
"      local e = R.ent[id]\n"
"      local c, name = client_of(e.s), e.n > 1 and e.first or R.name\n"
"      redis.call('HDEL', skey(e.s), 'e ' .. id .. ' ' .. R.k)\n"
"      if not seen[c .. ' ' .. name] then\n"
"        seen[c .. ' ' .. name] = true\n"
"        redis.pcall(PUB, chan(e.s), '- - 0 ' .. name)\n"
"      end\n"
"    end\n"
"  end\n"
"  redis.call('INCR', AKEY)\n"
"  redis.call('DEL', R.k .. ':h', R.k .. ':w', R.k .. ':e', R.k .. ':o', R.k .. ':m')\n"
"  redis.call('HSET', R.k .. ':m', 'ctr', fmt(R.ctr))\n"
"  redis.call('PEXPIRE', R.k .. ':m', 60000)\n"
"  return {0}\n"
"end\n"
"return redis.error_reply('SIMBA_EINVAL unknown operation')\n",
NULL
};

/* Script statuses (the first element of every answer). */
enum {
    SIMBA__REDIS_ST_OK = 0,
    SIMBA__REDIS_ST_SESSION = 1,
    SIMBA__REDIS_ST_NOTFOUND = 2,
    SIMBA__REDIS_ST_CAPACITY = 3,
    SIMBA__REDIS_ST_KEYBUSY = 4
};

enum {
    SIMBA__REDIS_MAIN = 0,          /* commands */
    SIMBA__REDIS_SUB = 1,           /* SUBSCRIBE: grant pushes */
    SIMBA__REDIS_SENTINEL = 2,      /* Sentinel mode: asks for the master, then SUBSCRIBE +switch-master +promoted-slave */
    SIMBA__REDIS_MAX_SENTINELS = 16,
    SIMBA__REDIS_FIXED_ARGS = 10,   /* ARGV before the per-resource triples */
    SIMBA__REDIS_MAX_ARGC = 3 + SIMBA_MAX_RESOURCES + SIMBA__REDIS_FIXED_ARGS + 3 * SIMBA_MAX_RESOURCES,
    SIMBA__REDIS_MAX_PREFIX = 64,
    SIMBA__REDIS_MAX_REQUEST = SIMBA_MAX_SESSION + SIMBA_MAX_ID + 32
};

typedef struct simba__redis simba__redis;

/* One of the connections (main, push and, with Sentinel, the sentinel). */
typedef struct simba__redis_conn {
    simba__redis *r;
    redisAsyncContext *ac;
    int role;
    int want_write;             /* hiredis has output pending (its addWrite/delWrite) */
    int connected;              /* the non-blocking connect completed */
    int ready;                  /* main: handshake done; sub: subscribed */
    int lost;                   /* hiredis freed the context by itself (EOF, error) */
    int drop_err;               /* set from a callback: drop after the current I/O */
    char why[160];              /* what went wrong, for the log and DISCONNECTED */
    int64_t deadline;           /* connect + handshake must be done by then; -1 none */
    int64_t retry_at;           /* next connect attempt; -1 none scheduled */
    int attempt;                /* failed attempts in a row, for the backoff */
    long long too_big;          /* != 0: the reader refused a reply of this many array elements */
    int bad_shape;              /* the reader refused a pub/sub reply hiredis would abort on */
    long long reply_elements;   /* array elements of the reply being read so far */
    const redisReplyObjectFunctions *dflt_fn;   /* hiredis's own (0.14: wrapped, see limits) */
} simba__redis_conn;

/* One operation in flight on the main connection. */
typedef struct simba__redis_req {
    struct simba__redis_req *prev, *next;
    simba__redis *r;
    uint64_t id;
    int kind, nres;
    int done;                   /* already completed (reset); hiredis still owes a callback */
    int evaled;                 /* sent again as EVAL after NOSCRIPT */
    int withdrawn;              /* an ENQUEUE whose RELEASE the core sent since: never sent again */
    int waiting;                /* in the WAIT stage: `saved` is the answer */
    simba_reply saved;
    char owner[SIMBA_MAX_SESSION + 1];
    int argc;
    const char *argv[SIMBA__REDIS_MAX_ARGC];
    size_t argvlen[SIMBA__REDIS_MAX_ARGC];
    /* the argument bytes follow the struct */
} simba__redis_req;

struct simba__redis {
    simba *s;
    simba_allocator alloc;      /* simba_redis_desc.allocator */
    char *host, *unix_socket, *user, *password, *prefix;
    int port, db, connect_timeout_ms, wait_replicas, wait_timeout_ms;
    simba__redis_conn conn[3];  /* main, push, sentinel (used when nsentinels > 0) */
    int nconn;                  /* 2, or 3 with Sentinel */
    simba__redis_req *reqs;     /* in flight and not completed yet */
    char *script;
    size_t script_len;
    char sha[41];               /* "" until SCRIPT LOAD answered: then EVAL is used */
    char run_id[41];            /* the server's run_id ("" unknown) */
    char replid[41];            /* its master_replid ("" unknown) */
    char run[83];               /* ARGV[7]: "<run_id> <replid>", "<run_id>" or "" */
    unsigned long gen;          /* main connections made ready so far */
    unsigned long *shared_gen;  /* a cluster's node or probe: the cluster's count, the GEN of its ops */
    int reported, reported_err; /* the last connection state told to the core */
    int warned_push;            /* the push connection's refusal was logged */
    char last_fail[200];        /* the last connection failure logged ("" none) */
    int last_fail_level;        /* its log level */
    long repeats;               /* the same failure since, not logged again */
    long long grace_logged;     /* end (server ms) of the restart grace last logged */
    int warned_policy;          /* the maxmemory-policy was looked at (and warned about) */
    int warned_cluster;         /* a MOVED/ASK (a cluster node behind a one-server URL) was logged */
    int cluster_node;           /* a cluster's node: redirects are answered to the cluster (node_redirect) */
    struct simba__redis_cluster *cl; /* redis+cluster: the map, the node backends (else NULL) */
    simba__redis *parent;       /* a cluster's node or probe backend: the cluster's backend */
    int node;                   /* a node backend: its index in the map */
    char node_tenant[SIMBA_MAX_TENANT + 24];   /* a node backend: "T@k@m", the script's tenant */
    int push_off;               /* a node backend: its push connection is not wanted (closed, no retry) */
    void (*on_subscribed)(simba__redis *node);   /* a node backend: its push connection subscribed (again) */
    int64_t push_used;          /* a node backend: when an op was last routed to it (-1 never) */
    unsigned long push_gen;     /* a node backend: subscriptions confirmed so far + 1 */
    int cluster_idle_ms;        /* the cluster's backend: simba_redis_desc.cluster_idle_ms (< 0 never) */
    int destroying;
    char seen_run[83];          /* the run (run_id and replid) of the last server we were ready on */
    long runs, session_runs;    /* changes of that run seen; `runs` when the session was opened */
    int fresh;                  /* a cluster's node new to a later map: INFO replication decides `join` */
    int join;                   /* a cluster's node: the session is opened here by its next keepalive */
    int64_t admin_seen;         /* a cluster's node: the admin epoch it answered last (0: none yet) */
    /* Sentinel (nsentinels > 0): where the master is */
    struct { char host[64]; int port; } sentinels[SIMBA__REDIS_MAX_SENTINELS];
    int nsentinels, sentinel_next;    /* the sentinel the next attempt asks */
    char *sentinel_master, *sentinel_user, *sentinel_password;
    char master_host[64];       /* what the sentinels named last ("" never yet) */
    int master_port;
    int switching;              /* dropping main and push for a sentinel's event: do not ask again */
    int master_known;           /* master_host is the sentinels' current answer */
    struct simba_redis_stats stats; /* connected, push_connected and reconnects: filled when read */
};

/* Frees what the constructor allocated (also a half-built backend). */
static void simba__redis_free(simba__redis *r) {
    simba_allocator a = r->alloc;
    simba_allocator_free(&a, r->script);
    simba_allocator_free(&a, r->host);
    simba_allocator_free(&a, r->unix_socket);
    simba_allocator_free(&a, r->user);
    if (r->password) memset(r->password, 0, strlen(r->password));
    simba_allocator_free(&a, r->password);
    simba_allocator_free(&a, r->prefix);
    simba_allocator_free(&a, r->sentinel_master);
    simba_allocator_free(&a, r->sentinel_user);
    if (r->sentinel_password) memset(r->sentinel_password, 0, strlen(r->sentinel_password));
    simba_allocator_free(&a, r->sentinel_password);
    simba_allocator_free(&a, r);
}

static void simba__redis_copy(char *dst, size_t cap, const char *src, size_t n) {
    if (!src) n = 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
}

static int simba__redis_prefix_ok(const char *p) {
    size_t n = 0;
    for (; p[n]; n++) {
        char c = p[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-' || c == ':';
        if (!ok || n >= SIMBA__REDIS_MAX_PREFIX) return 0;
    }
    return n > 0;
}

/*>>internals.names: keys and names */

/*--- keys ---------------------------------------------------------------------
   The base key of a resource is  <prefix>:{<tenant>:<hex of tag>}  or, when
   the name carries a hash tag of its own ("{order-42}:items": the bytes
   between the first '{' and the next '}', if any), <prefix>:{<tenant>:<hex
   of that tag>}:<hex of the whole name>. Hex keeps it injective for any
   name (a '}' in a name cannot end the tag early), and names that share a
   tag share a cluster slot. */

/* The name's own hash tag, as Redis Cluster would find it. */
static int simba__redis_user_tag(const char *name, size_t n, size_t *off, size_t *len) {
    const char *open = (const char *)memchr(name, '{', n), *close;
    if (!open) return 0;
    close = (const char *)memchr(open + 1, '}', n - (size_t)(open + 1 - name));
    if (!close || close == open + 1) return 0;
    *off = (size_t)(open + 1 - name);
    *len = (size_t)(close - open - 1);
    return 1;
}

/* Appends hex of n bytes at out (if out) and returns 2n. */
static size_t simba__redis_hex(char *out, const char *s, size_t n) {
    static const char digits[] = "0123456789abcdef";
    size_t i;
    if (out)
        for (i = 0; i < n; i++) {
            out[2 * i] = digits[((unsigned char)s[i]) >> 4];
            out[2 * i + 1] = digits[((unsigned char)s[i]) & 15];
        }
    return 2 * n;
}

static size_t simba__redis_put(char *out, size_t at, const char *s, size_t n) {
    if (out) memcpy(out + at, s, n);
    return n;
}

/* Writes the base key (no NUL) at out if out is not NULL; returns its length. */
static size_t simba__redis_key(char *out, const char *prefix, const char *tenant, const char *name) {
    size_t n = strlen(name), at = 0, off = 0, len = n;
    int tagged = simba__redis_user_tag(name, n, &off, &len);
    at += simba__redis_put(out, at, prefix, strlen(prefix));
    at += simba__redis_put(out, at, ":{", 2);
    at += simba__redis_put(out, at, tenant, strlen(tenant));
    at += simba__redis_put(out, at, ":", 1);
    at += simba__redis_hex(out ? out + at : NULL, name + off, len);
    at += simba__redis_put(out, at, "}", 1);
    if (tagged) {
        at += simba__redis_put(out, at, ":", 1);
        at += simba__redis_hex(out ? out + at : NULL, name, n);
    }
    return at;
}

SIMBADEF int simba_redis_resource_key(const char *prefix, const char *tenant, const char *name,
                                      char *out, size_t size) {
    size_t need;
    char *tmp;
    if (!tenant || !name || (size && !out)) return SIMBA_EINVAL;
    if (!prefix) prefix = "simba";
    if (!simba__redis_prefix_ok(prefix)) return SIMBA_EINVAL;
    if (simba_check_tenant(tenant) != SIMBA_OK || simba_check_name(name) != SIMBA_OK) return SIMBA_ENAME;
    need = simba__redis_key(NULL, prefix, tenant, name);
    if (size == 0) return (int)need;
    tmp = (char *)simba_allocator_alloc(NULL, need + 1);   /* no backend here: malloc */
    if (!tmp) return SIMBA_ENOMEM;
    simba__redis_key(tmp, prefix, tenant, name);
    simba__redis_copy(out, size, tmp, need);
    simba_allocator_free(NULL, tmp);
    return (int)need;
}

static int64_t simba__redis_now(simba__redis *r) { return simba_now_ms(r->s); }

/* Tell the core about the connection, once per change (and again when a
   failing connection fails for another reason, e.g. EAUTH). */
static void simba__redis_report(simba__redis *r, int up, int err, const char *msg) {
    if (r->reported == up && (up || r->reported_err == err)) return;
    r->reported = up;
    r->reported_err = err;
    simba_backend_state(r->s, up, err, msg);   /* a cluster's node or probe: to the cluster (its relay) */
}

/* Error replies of Redis and of our script, as SIMBA_E* codes. */
static int simba__redis_error_code(const char *msg) {
    if (!msg) return SIMBA_EBACKEND;
    if (strstr(msg, "SIMBA_EPROTO") || strstr(msg, "WRONGTYPE")) return SIMBA_EPROTO;
    /* Redis 7 words an ACL refusal inside a script "The user executing the
       script can't access/run/publish ..." (no NOPERM) */
    if (strstr(msg, "NOPERM") || strstr(msg, "NOAUTH") || strstr(msg, "WRONGPASS") ||
        strstr(msg, "invalid password") || strstr(msg, "invalid username") ||
        strstr(msg, "The user executing the script can't"))
        return SIMBA_EAUTH;
    return SIMBA_EBACKEND;
}

/* Errors that say "not now" rather than "no": a server loading its data
   set (LOADING), running a script past lua-time-limit (BUSY), a replica
   that lost its master (MASTERDOWN), a cluster slot on the move (TRYAGAIN).
   They are retried like a disconnect: the connection is dropped and made
   again with the backoff, so every op in flight (a RELEASE included) is
   sent again once the server answers, and no op ends in an ERROR event.
   (On a cluster's master, TRYAGAIN is a pause on the same connection:
   simba__redis_cluster_redirected.) */
static int simba__redis_transient(const char *msg) {
    static const char *const words[] = {"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN"};
    size_t i;
    if (!msg) return 0;
    for (i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i]);
        if (strncmp(msg, words[i], n) == 0 && (msg[n] == ' ' || msg[n] == 0)) return 1;
    }
    return 0;
}

static void simba__redis_unlink(simba__redis *r, simba__redis_req *q) {
    if (q->prev) q->prev->next = q->next;
    else if (r->reqs == q) r->reqs = q->next;
    if (q->next) q->next->prev = q->prev;
    q->prev = q->next = NULL;
}

/* Complete an op (exactly once): unlink it and hand the reply to the core.
   The request itself is freed by whoever holds it (the hiredis callback). */
static void simba__redis_complete(simba__redis *r, simba__redis_req *q, simba_reply *rep) {
    simba__redis_unlink(r, q);
    q->done = 1;
    r->stats.ops_completed++;
    rep->id = q->id;
    if (q->kind == SIMBA_OP_OPEN && rep->status == SIMBA_OK) r->join = 0;   /* a cluster's node has a copy now */
    simba_backend_complete(r->s, rep);   /* a cluster's node: to the cluster (its relay) */
}

static void simba__redis_complete_status(simba__redis *r, simba__redis_req *q, int status, const char *msg) {
    simba_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.status = status;
    rep.message = msg;
    rep.recheck_ms = -1;
    simba__redis_complete(r, q, &rep);
}

/* Complete every op in flight (the connection is going away). Completions may
   submit again; submit refuses while the main connection is not ready, so
   the list only shrinks. */
static void simba__redis_fail_all(simba__redis *r, int status, const char *msg) {
    while (r->reqs) simba__redis_complete_status(r, r->reqs, status, msg);
}

/*>>internals.limits: reply limits */

/*--- reply limits ------------------------------------------------------------------
   hiredis 0.14 has no maxelements: it allocates the element pointers of an
   array as soon as it reads the header, so "*2147483647" from a hostile or
   broken server costs 16 GB (or a stall) before a single element arrives.
   The reader's object functions are wrapped: an array header above what any
   simba reply can be is refused (the reader fails, hiredis disconnects, we
   report why), and an input buffer above SIMBA__REDIS_MAX_BUF is dropped
   after the read that grew it. The largest replies simba asks for are
   INSPECT (6 + 7 per entry of one queue) and the script text (SCRIPT LOAD
   answers 40 bytes), so both bounds are far above honest traffic. */
enum {
    SIMBA__REDIS_MAX_ELEMENTS = 1 << 20,           /* an INSPECT of 149,000 entries */
    SIMBA__REDIS_MAX_BUF = 64 * 1024 * 1024        /* unparsed input bytes */
};

#if HIREDIS_MAJOR < 1
/* On the push and sentinel connections (subscribed contexts) hiredis 0.14
   assert()s that a reply nobody waits for is an array of at least 2
   elements whose first two are strings: a hostile or broken server would
   abort the process. Such a reply is refused here instead (the connection
   is dropped with SIMBA_EPROTO). `kind` 's' string, 'a' array, 'o' other. */
static int simba__redis_sub_bad(const redisReadTask *task, char kind, int elements) {
    simba__redis_conn *c = (simba__redis_conn *)task->privdata;
    if (c->role == SIMBA__REDIS_MAIN) return 0;
    if ((!task->parent && kind == 'a' && elements < 2) ||
        (task->parent && !task->parent->parent && task->idx < 2 && kind != 's'))
        c->bad_shape = 1;
    return c->bad_shape;
}

/* The reader's privdata is the connection (it reaches every read task). */
static void *simba__redis_create_array(const redisReadTask *task, int elements) {
    simba__redis_conn *c = (simba__redis_conn *)task->privdata;
    if (simba__redis_sub_bad(task, 'a', elements)) return NULL;
    /* the bound is on the whole reply (nested arrays add up), not one header */
    if (!task->parent) c->reply_elements = 0;
    c->reply_elements += elements;
    if (elements < 0 || c->reply_elements > SIMBA__REDIS_MAX_ELEMENTS) {
        c->too_big = c->reply_elements;
        return NULL;                               /* the reader fails: hiredis disconnects */
    }
    return c->dflt_fn->createArray(task, elements);
}
static void *simba__redis_create_string(const redisReadTask *task, char *str, size_t len) {
    return ((simba__redis_conn *)task->privdata)->dflt_fn->createString(task, str, len);
}
static void *simba__redis_create_integer(const redisReadTask *task, long long value) {
    if (simba__redis_sub_bad(task, 'o', 0)) return NULL;
    return ((simba__redis_conn *)task->privdata)->dflt_fn->createInteger(task, value);
}
static void *simba__redis_create_nil(const redisReadTask *task) {
    if (simba__redis_sub_bad(task, 'o', 0)) return NULL;
    return ((simba__redis_conn *)task->privdata)->dflt_fn->createNil(task);
}
/* freeObject gets no task: hiredis's default freeReplyObject is what every
   0.14 context uses (and is public) */
static void simba__redis_free_object(void *obj) { freeReplyObject(obj); }

static redisReplyObjectFunctions simba__redis_limited_fn = {
    simba__redis_create_string,
    simba__redis_create_array,
    simba__redis_create_integer,
    simba__redis_create_nil,
    simba__redis_free_object
};
#endif

/* Put the limits on a new context's reader. */
static void simba__redis_limit_reader(simba__redis_conn *c, redisAsyncContext *ac) {
    redisReader *rd = ac->c.reader;
    c->too_big = c->reply_elements = 0;
    c->bad_shape = 0;
    if (!rd) return;
#if HIREDIS_MAJOR < 1
    if (!rd->fn) return;            /* no object functions: replies are never built */
    c->dflt_fn = rd->fn;
    rd->fn = &simba__redis_limited_fn;
    rd->privdata = c;
#else
    rd->maxelements = SIMBA__REDIS_MAX_ELEMENTS;
#endif
}

/*>>internals.signals: SIGPIPE */

/*--- SIGPIPE ------------------------------------------------------------------------
   hiredis writes with write(): on a connection the server has closed, that
   raises SIGPIPE, whose default action kills the host. A library must not
   change the process's dispositions, so (as libpq does) SIGPIPE is blocked in
   the calling thread around our writes; one that became pending because of
   them is consumed (sigtimedwait, zero timeout) before the mask is restored.
   A SIGPIPE that was pending before is left alone. */
#if defined(_POSIX_C_SOURCE) || defined(_XOPEN_SOURCE) || defined(_GNU_SOURCE)
#define SIMBA__REDIS_NOPIPE 1
typedef struct simba__redis_nopipe {
    sigset_t old;
    int active, was_pending;
} simba__redis_nopipe;

static void simba__redis_nopipe_begin(simba__redis_nopipe *g) {
    sigset_t set, pend;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    g->active = pthread_sigmask(SIG_BLOCK, &set, &g->old) == 0;
    g->was_pending = g->active && sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE) == 1;
}

static void simba__redis_nopipe_end(simba__redis_nopipe *g) {
    sigset_t set, pend;
    if (!g->active) return;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    if (!g->was_pending && sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE) == 1) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}
#else
/* Built without POSIX declarations (strict C99 with no feature macro and
   simba.h's implementation not in this file): the signal mask cannot be
   touched. attach() says so at WARN; the application must then ignore
   SIGPIPE itself. simba.h's implementation turns POSIX on, so defining
   SIMBA_IMPLEMENTATION in this file (as documented) avoids this. */
#define SIMBA__REDIS_NOPIPE 0
typedef struct simba__redis_nopipe { int unused; } simba__redis_nopipe;
static void simba__redis_nopipe_begin(simba__redis_nopipe *g) { g->unused = 0; }
static void simba__redis_nopipe_end(simba__redis_nopipe *g) { (void)g; }
#endif

/*>>connection: the hiredis adapter, connect, handshake, reconnect with backoff, drop, I/O */

/*>>connection.connect: the hiredis adapter, connect, the handshake, a drop and the retry after it */

/*--- hiredis event adapter: hiredis sets interest flags, pollfds reports them,
   process calls redisAsyncHandleRead/Write -------------------------------------*/

static void simba__redis_ev_add_read(void *p) { (void)p; /* we always read while connected */ }
static void simba__redis_ev_del_read(void *p) { (void)p; }
static void simba__redis_ev_add_write(void *p) {
    if (p) ((simba__redis_conn *)p)->want_write = 1;
}
static void simba__redis_ev_del_write(void *p) {
    if (p) ((simba__redis_conn *)p)->want_write = 0;
}
/* hiredis is freeing the context (EOF, error, or our redisAsyncFree). When
   we free it ourselves we detach first (ev.data = NULL), so this only fires
   for the context hiredis gave up by itself. */
static void simba__redis_ev_cleanup(void *p) {
    simba__redis_conn *c = (simba__redis_conn *)p;
    if (!c) return;
    if (c->ac && c->ac->err && !c->why[0] && c->ac->errstr)
        simba__redis_copy(c->why, sizeof c->why, c->ac->errstr, strlen(c->ac->errstr));
    c->ac = NULL;
    c->lost = 1;
    c->want_write = 0;
}

static void simba__redis_on_connect(const redisAsyncContext *ac, int status) {
    simba__redis_conn *c = (simba__redis_conn *)ac->data;
    if (!c) return;
    if (status == REDIS_OK) { c->connected = 1; return; }
    if (!c->why[0] && ac->errstr) simba__redis_copy(c->why, sizeof c->why, ac->errstr, strlen(ac->errstr));
}

static void simba__redis_on_disconnect(const redisAsyncContext *ac, int status) {
    simba__redis_conn *c = (simba__redis_conn *)ac->data;
    (void)status;
    if (!c) return;
    if (!c->why[0]) {
        const char *m = (ac->err && ac->errstr) ? ac->errstr : "connection closed by the server";
        simba__redis_copy(c->why, sizeof c->why, m, strlen(m));
    }
}

/* From a callback: remember why, drop after the I/O call returns (freeing a
   context from inside its own callback is deferred by hiredis anyway). */
static void simba__redis_fail_conn(simba__redis_conn *c, int err, const char *msg, size_t len) {
    if (c->drop_err) return;
    c->drop_err = err;
    simba__redis_copy(c->why, sizeof c->why, msg, len);
}

static void simba__redis_send_auth(simba__redis_conn *c, redisCallbackFn *fn);
static void simba__redis_on_auth(redisAsyncContext *ac, void *reply, void *privdata);
static void simba__redis_on_select(redisAsyncContext *ac, void *reply, void *privdata);
static void simba__redis_on_name(redisAsyncContext *ac, void *reply, void *privdata);
static void simba__redis_on_load(redisAsyncContext *ac, void *reply, void *privdata);
static void simba__redis_on_info(redisAsyncContext *ac, void *reply, void *privdata);
static void simba__redis_on_memory(redisAsyncContext *ac, void *reply, void *privdata);
static void simba__redis_on_sub(redisAsyncContext *ac, void *reply, void *privdata);
static int simba__redis_target(simba__redis *r, simba__redis_conn *c, const char **host, int *port);
static void simba__redis_sentinel_handshake(simba__redis *r, simba__redis_conn *c);
static void simba__redis_sentinel_dropped(simba__redis *r, simba__redis_conn *c, int err, const char *why);
static void simba__redis_sentinel_lost_master(simba__redis *r);
static void simba__redis_sentinel_on_role(redisAsyncContext *ac, void *reply, void *privdata);

static void simba__redis_schedule_retry(simba__redis *r, simba__redis_conn *c) {
    c->retry_at = simba__redis_now(r) + simba_backend_backoff_ms(r->s, c->attempt);
    c->attempt++;
}

/* A connection that keeps failing the same way (a wrong password, a refused
   port) is retried with the backoff for as long as it takes: its failure is
   logged once, and the count of identical repeats when it changes or when
   the connection succeeds, instead of a line at every attempt. */
static void simba__redis_flush_repeats(simba__redis *r) {
    if (r->repeats > 0)
        simba_backend_log(r->s, (simba_log_level)r->last_fail_level, "%s (repeated %ld times)", r->last_fail,
                          r->repeats);
    r->repeats = 0;
}

static void simba__redis_log_failure(simba__redis *r, int level, const char *line) {
    if (r->last_fail[0] && strcmp(r->last_fail, line) == 0) {
        r->repeats++;
        return;
    }
    simba__redis_flush_repeats(r);
    simba__redis_copy(r->last_fail, sizeof r->last_fail, line, strlen(line));
    r->last_fail_level = level;
    simba_backend_log(r->s, (simba_log_level)level, "%s", line);
}

/* Drop a connection: complete its ops, free the context, plan a reconnect. */
static void simba__redis_drop(simba__redis *r, simba__redis_conn *c, int err, const char *msg) {
    redisAsyncContext *ac = c->ac;
    char why[160];
    int was_ready = c->ready;
    simba__redis_copy(why, sizeof why, msg, msg ? strlen(msg) : 0);
    c->ac = NULL;
    c->ready = c->connected = c->lost = c->drop_err = c->bad_shape = 0;
    c->want_write = 0;
    c->why[0] = 0;
    c->deadline = -1;
    if (c->role == SIMBA__REDIS_MAIN) simba__redis_fail_all(r, SIMBA_EDISCONNECTED, why);
    if (ac) {
        ac->data = NULL;          /* our callbacks ignore what follows */
        ac->ev.data = NULL;
        redisAsyncFree(ac);       /* op callbacks run with NULL: they free their requests */
    }
    if (r->destroying) return;
    if (c->role == SIMBA__REDIS_SUB && r->push_off) {   /* a cluster node's idle push connection: closed */
        c->retry_at = -1;
        c->attempt = 0;
        return;
    }
    /* a server that answers "not now" (LOADING, BUSY, ...) is up and will
       serve soon: try again at the shortest interval, not after a backoff
       grown while it was loading (the first good answer would wait for it) */
    if (err == SIMBA_EDISCONNECTED && simba__redis_transient(why)) c->attempt = 0;
    simba__redis_schedule_retry(r, c);
    if (c->role == SIMBA__REDIS_SENTINEL) {
        simba__redis_sentinel_dropped(r, c, err, why);
        return;
    }
    if (c->role == SIMBA__REDIS_MAIN && r->nsentinels) simba__redis_sentinel_lost_master(r);
    if (c->role == SIMBA__REDIS_MAIN) {
        /* a refused password or a missing permission is an operator's
           problem: say it loudly even when we never got connected */
        char line[sizeof r->last_fail];
        snprintf(line, sizeof line, "simba_redis: connection %s: %.150s (%s)", was_ready ? "lost" : "failed",
                 why[0] ? why : "-", simba_strerror(err));
        simba__redis_log_failure(r, err == SIMBA_EAUTH ? SIMBA_LOG_ERROR : was_ready ? SIMBA_LOG_WARN : SIMBA_LOG_INFO,
                                 line);
        simba__redis_report(r, 0, err, why[0] ? why : NULL);
    } else if (was_ready || ((err == SIMBA_EAUTH || strstr(why, "NOPERM")) && !r->warned_push)) {
        /* a refused SUBSCRIBE (e.g. an ACL user without the channel) is said
           once: locks still work, waiters just learn of grants by re-checking */
        if (!was_ready) r->warned_push = 1;
        simba_backend_log(r->s, SIMBA_LOG_WARN,
                          "simba_redis: push connection %s (%s); waiters re-check until it is back",
                          was_ready ? "lost" : "refused", why[0] ? why : "-");
    }
}

static void simba__redis_client_name(simba__redis *r, simba__redis_conn *c, char *out, size_t cap) {
    snprintf(out, cap, "simba%s:%s", c->role == SIMBA__REDIS_SUB ? "-sub" : "", simba_client_id(r->s));
}

static void simba__redis_channel(simba__redis *r, char *out, size_t cap) {
    if (r->node_tenant[0]) {   /* a cluster's node: its shard channel {T@k} (docs/redis.md, Cluster) */
        const char *m = strrchr(r->node_tenant, '@');
        snprintf(out, cap, "%s:c:{%.*s}:%s", r->prefix, (int)(m - r->node_tenant), r->node_tenant,
                 simba_client_id(r->s));
        return;
    }
    snprintf(out, cap, "%s:c:%s:%s", r->prefix, simba_tenant(r->s), simba_client_id(r->s));
}

static void simba__redis_node_on_replication(redisAsyncContext *ac, void *reply, void *privdata);


/* Queue the handshake; hiredis sends it once the connect completes. */
static void simba__redis_handshake(simba__redis *r, simba__redis_conn *c) {
    redisAsyncContext *ac = c->ac;
    char name[SIMBA_MAX_ID + 16];
    if (c->role == SIMBA__REDIS_SENTINEL) {
        simba__redis_sentinel_handshake(r, c);
        return;
    }
    simba__redis_send_auth(c, simba__redis_on_auth);
    /* a sentinel's answer may be stale: use only a server that says it is the master */
    if (c->role == SIMBA__REDIS_MAIN && r->nsentinels) redisAsyncCommand(ac, simba__redis_sentinel_on_role, c, "ROLE");
    simba__redis_client_name(r, c, name, sizeof name);
    /* a name shows up in CLIENT LIST; a user without the right may not set
       it. The main connection sends the rest once it is answered */
    redisAsyncCommand(ac, simba__redis_on_name, c, "CLIENT SETNAME %s", name);
    if (c->role == SIMBA__REDIS_MAIN) {
        if (r->db) redisAsyncCommand(ac, simba__redis_on_select, c, "SELECT %d", r->db);
    } else {
        char ch[SIMBA__REDIS_MAX_PREFIX + SIMBA_MAX_TENANT + SIMBA_MAX_ID + 40];
        simba__redis_channel(r, ch, sizeof ch);
        redisAsyncCommand(ac, simba__redis_on_sub, c, "SUBSCRIBE %s", ch);
        /* a cluster's node: the script SPUBLISHes in its shard. hiredis 0.14
           knows only SUBSCRIBE, whose channel table routes the "smessage"
           pushes of the same name to us (nobody PUBLISHes on it) */
        if (r->node_tenant[0]) redisAsyncCommand(ac, simba__redis_on_sub, c, "SSUBSCRIBE %s", ch);
    }
}

static void simba__redis_connect(simba__redis *r, simba__redis_conn *c) {
    redisAsyncContext *ac;
    const char *host;
    int port;
    c->retry_at = -1;
    c->why[0] = 0;
    c->lost = c->drop_err = c->connected = c->ready = 0;
    if (!simba__redis_target(r, c, &host, &port)) return;   /* the sentinels will say where */
    ac = r->unix_socket ? redisAsyncConnectUnix(r->unix_socket) : redisAsyncConnect(host, port);
    if (!ac) {
        simba__redis_drop(r, c, SIMBA_ENOMEM, "out of memory");
        return;
    }
    if (ac->err) {
        char why[160];
        simba__redis_copy(why, sizeof why, ac->errstr, strlen(ac->errstr));
        redisAsyncFree(ac);
        simba__redis_drop(r, c, SIMBA_EDISCONNECTED, why);
        return;
    }
    c->ac = ac;
    ac->data = c;
    ac->ev.data = c;
    simba__redis_limit_reader(c, ac);
    ac->ev.addRead = simba__redis_ev_add_read;
    ac->ev.delRead = simba__redis_ev_del_read;
    ac->ev.addWrite = simba__redis_ev_add_write;
    ac->ev.delWrite = simba__redis_ev_del_write;
    ac->ev.cleanup = simba__redis_ev_cleanup;
#if HIREDIS_MAJOR >= 1
    ac->ev.scheduleTimer = NULL;   /* 1.x: simba times requests out itself */
#endif
    redisAsyncSetConnectCallback(ac, simba__redis_on_connect);
    redisAsyncSetDisconnectCallback(ac, simba__redis_on_disconnect);
    c->deadline = simba__redis_now(r) + r->connect_timeout_ms;
    simba__redis_handshake(r, c);
}

static void simba__redis_send_auth(simba__redis_conn *c, redisCallbackFn *fn) {
    simba__redis *r = c->r;
    if (!r->password) return;
    if (r->user) redisAsyncCommand(c->ac, fn, c, "AUTH %s %s", r->user, r->password);
    else redisAsyncCommand(c->ac, fn, c, "AUTH %s", r->password);
}

/* Handshake callbacks: privdata is the connection; a NULL reply or a detached
   context means the connection is already gone. */
static simba__redis_conn *simba__redis_live_conn(redisAsyncContext *ac, void *reply, void *privdata) {
    if (!reply || !ac->data) return NULL;
    return (simba__redis_conn *)privdata;
}

static int simba__redis_is_sha(const char *s, size_t n) {
    size_t i;
    if (n != 40) return 0;
    for (i = 0; i < n; i++) if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* The 40 hex digits of INFO line `field` ("run_id:", "master_replid:")
   into out[41]; "" when the answer has no such line. */
static void simba__redis_info_id(const char *info, size_t len, const char *field, char *out) {
    const char *p = info, *end = info + len;
    size_t fl = strlen(field);
    out[0] = 0;
    while (p < end) {
        const char *nl = (const char *)memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        if ((size_t)(eol - p) >= fl + 40 && memcmp(p, field, fl) == 0 && simba__redis_is_sha(p + fl, 40)) {
            memcpy(out, p + fl, 40);
            out[40] = 0;
            return;
        }
        p = nl ? nl + 1 : end;
    }
}

/* The run_id tells a restarted (or failed-over) server from the one the
   epoch key was written on; without it, only a lost epoch key starts the
   restart grace. */
static void simba__redis_parse_run_id(simba__redis *r, const char *info, size_t len) {
    simba__redis_info_id(info, len, "run_id:", r->run_id);
}

/* The master_replid tells apart two runs of one process whose data was
   replaced in between: a master made a replica (a full resync loads its
   master's data, which may lack a grant) and master again keeps its run_id
   but takes a new replid. A refused INFO leaves it unknown (""). */
static void simba__redis_on_replid(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    const redisReply *rp = (const redisReply *)reply;
    if (!c) return;
    c->r->replid[0] = 0;
    if (rp->type == REDIS_REPLY_STRING) simba__redis_info_id(rp->str, rp->len, "master_replid:", c->r->replid);
}

/* ARGV[7] of every op, and what tells one server run from another. */
static void simba__redis_make_run(simba__redis *r) {
    if (r->run_id[0] && r->replid[0]) snprintf(r->run, sizeof r->run, "%s %s", r->run_id, r->replid);
    else snprintf(r->run, sizeof r->run, "%s", r->run_id);
}

/* Another server run (a fail-over, a restart, a master that was a replica
   in between) may lack the session's last writes: counted, and
   simba__redis_parse_session ends the session at its next answer. */
static void simba__redis_note_run(simba__redis *r) {
    simba__redis_make_run(r);
    if (r->run[0] && r->seen_run[0] && strcmp(r->run, r->seen_run) != 0) { r->runs++; r->join = 0; }
    if (r->run[0]) memcpy(r->seen_run, r->run, sizeof r->seen_run);
}

/* The INFO replication sent ahead of each KEEPALIVE: a master made a
   replica and master again may keep the connection (Sentinel drops it,
   REPLICAOF alone does not), so a new replid is looked for on a live
   connection too; the KEEPALIVE's answer, read after this one, then ends
   the session. */
static void simba__redis_on_replid_check(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    const redisReply *rp = (const redisReply *)reply;
    char replid[41];
    if (!c || rp->type != REDIS_REPLY_STRING) return;
    simba__redis_info_id(rp->str, rp->len, "master_replid:", replid);
    if (!replid[0] || strcmp(replid, c->r->replid) == 0) return;
    memcpy(c->r->replid, replid, sizeof replid);
    simba__redis_note_run(c->r);
}

/* Before a KEEPALIVE: ask for the replid again when INFO answered it at
   the connect (a user without the right to INFO is not asked). */
static void simba__redis_check_replid(simba__redis *r, const simba_op *op) {
    simba__redis_conn *c = &r->conn[SIMBA__REDIS_MAIN];
    if (op->kind != SIMBA_OP_KEEPALIVE || !r->replid[0] || !c->ac) return;
    redisAsyncCommand(c->ac, simba__redis_on_replid_check, c, "INFO replication");
}

/* A cluster's node new to a later map (the node option `fresh`), told
   apart by its INFO replication before its main connection counts as ready:
   * one that never was a replica in its run (second_repl_offset:-1) has
     only its own writes and the keys migrated to it (MIGRATE moves a key
     whole): nothing of a session can be missing there, so the session is
     opened there at its next keepalive (`join`), which its entries that
     came with a migrated slot need (docs/redis.md, Cluster, "A master
     added");
   * a promoted replica (or an answer that does not say) may lack a grant
     its copy of the session outlived: as for a changed run_id on one
     server, the first KEEPALIVE of a session opened before ends the
     session there (ESESSION), inside the restart grace its run_id starts. */
static void simba__redis_node_on_replication(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    const redisReply *rp = (const redisReply *)reply;
    const char *at;
    if (!c) return;
    c->r->fresh = 0;
    at = rp->type == REDIS_REPLY_STRING ? strstr(rp->str, "\nsecond_repl_offset:") : NULL;
    if (at && strncmp(at + 20, "-1\r", 3) == 0 && strstr(rp->str, "\nrole:master")) c->r->join = 1;
    else c->r->runs = 1;
}

/* CLIENT SETNAME answered. A server that wants a password we did not give
   says NOAUTH here. Only then does the main connection send the script:
   Redis answers a long request of a client that has not authenticated with
   a protocol error and closes the connection with the script still unread,
   and the reset that follows can overtake its words. */
static void simba__redis_on_name(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    simba__redis *r;
    if (!c) return;
    r = c->r;
    if (rp->type == REDIS_REPLY_ERROR && strstr(rp->str, "NOAUTH"))
        simba__redis_fail_conn(c, SIMBA_EAUTH, rp->str, rp->len);
    if (c->drop_err || c->role != SIMBA__REDIS_MAIN) return;
    redisAsyncCommand(ac, simba__redis_on_load, c, "SCRIPT LOAD %b", r->script, r->script_len);
    if (!r->warned_policy) redisAsyncCommand(ac, simba__redis_on_memory, c, "INFO memory");
    if (r->fresh) redisAsyncCommand(ac, simba__redis_node_on_replication, c, "INFO replication");
    redisAsyncCommand(ac, simba__redis_on_replid, c, "INFO replication");
    redisAsyncCommand(ac, simba__redis_on_info, c, "INFO server");
}

static void simba__redis_on_auth(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    if (!c) return;
    if (rp->type == REDIS_REPLY_ERROR) simba__redis_fail_conn(c, SIMBA_EAUTH, rp->str, rp->len);
}

static void simba__redis_on_select(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    if (!c) return;
    if (rp->type == REDIS_REPLY_ERROR) simba__redis_fail_conn(c, simba__redis_error_code(rp->str), rp->str, rp->len);
}

static void simba__redis_on_load(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    simba__redis *r;
    if (!c) return;
    r = c->r;
    if (c->drop_err) return;   /* e.g. a refused AUTH: SCRIPT LOAD failed for that reason */
    if (rp->type == REDIS_REPLY_STRING && simba__redis_is_sha(rp->str, rp->len)) {
        memcpy(r->sha, rp->str, 40);
        r->sha[40] = 0;
    } else if (rp->type == REDIS_REPLY_ERROR && simba__redis_transient(rp->str)) {
        /* not a refusal: EVAL would fail the same way now; connect again later */
        r->stats.transient_errors++;
        simba__redis_fail_conn(c, SIMBA_EDISCONNECTED, rp->str, rp->len);
    } else if (rp->type == REDIS_REPLY_ERROR && simba__redis_error_code(rp->str) == SIMBA_EAUTH &&
               !strstr(rp->str, "NOPERM")) {
        simba__redis_fail_conn(c, SIMBA_EAUTH, rp->str, rp->len);
    } else if (rp->type == REDIS_REPLY_ERROR) {
        /* SCRIPT LOAD not allowed (ACL) or not available: send the script with EVAL */
        r->sha[0] = 0;
        simba_backend_log(r->s, SIMBA_LOG_WARN, "simba_redis: SCRIPT LOAD failed (%s); using EVAL", rp->str);
    } else {
        simba__redis_fail_conn(c, SIMBA_EPROTO, "SCRIPT LOAD answered something that is not a SHA1", 50);
    }
}

/* An eviction policy other than noeviction can silently drop simba's keys
   when the server reaches maxmemory: the volatile-* ones evict the session
   keys (they have a TTL: a holder's session then looks dead and its lock is
   granted again while it still believes it holds it), the allkeys-* ones
   any key, a queue included. Said once, at the first connect. */
static void simba__redis_on_memory(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    const char *p;
    char policy[64];
    long long maxmemory = -1;
    if (!c || c->drop_err || rp->type != REDIS_REPLY_STRING) return;   /* INFO refused: nothing known */
    c->r->warned_policy = 1;
    p = strstr(rp->str, "maxmemory_policy:");
    if (!p) return;
    p += strlen("maxmemory_policy:");
    simba__redis_copy(policy, sizeof policy, p, strcspn(p, "\r\n"));
    if (strcmp(policy, "noeviction") == 0) return;
    if ((p = strstr(rp->str, "\nmaxmemory:")) != NULL) maxmemory = atoll(p + strlen("\nmaxmemory:"));
    simba_backend_log(c->r->s, SIMBA_LOG_WARN,
                      "simba_redis: the server runs with maxmemory-policy %s (maxmemory %lld): once it is full it "
                      "may evict simba's keys (sessions have a TTL, queues do not), and an evicted key is a lock "
                      "silently granted twice; use maxmemory-policy noeviction (docs/redis.md)", policy, maxmemory);
}

static void simba__redis_on_info(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    simba__redis *r;
    if (!c) return;
    r = c->r;
    if (c->drop_err) return;   /* an earlier step failed: no CONNECTED */
    if (rp->type == REDIS_REPLY_STRING) simba__redis_parse_run_id(r, rp->str, rp->len);
    else r->run_id[0] = 0;
    if (!r->run_id[0])
        simba_backend_log(r->s, SIMBA_LOG_WARN, "simba_redis: no run_id from INFO; only a lost epoch key "
                          "starts the restart grace");
    simba__redis_note_run(r);
    c->ready = 1;
    c->attempt = 0;
    c->deadline = -1;
    r->gen++;
    if (r->shared_gen) (*r->shared_gen)++;
    simba__redis_flush_repeats(r);
    r->last_fail[0] = 0;
    simba__redis_report(r, 1, 0, NULL);
}

/*>>connection.io: write what is queued, read what came, settle: one connection's I/O in a tick */

/* Requests submitted during a tick sit in hiredis's output buffer. Writing
   them just before the caller sleeps saves a whole poll() round per request
   (and sends everything of one tick in one write). redisBufferWrite runs no
   callbacks; an error stays in the context and is acted on by the next
   process() (the fd then polls as ready). */
static void simba__redis_flush(simba__redis_conn *c) {
    int done = 0;
    simba__redis_nopipe g;
    if (!c->ac || !c->connected || !c->want_write || c->ac->c.err) return;
    simba__redis_nopipe_begin(&g);
    if (redisBufferWrite(&c->ac->c, &done) == REDIS_OK && done) c->want_write = 0;
    simba__redis_nopipe_end(&g);
}

/* What poll() said about c's fd (everything, when fds is NULL). */
static short simba__redis_revents(const simba__redis_conn *c, const struct pollfd *fds, int nfds) {
    int i;
    if (!fds) return POLLIN | POLLOUT;
    for (i = 0; i < nfds; i++) if (fds[i].fd == c->ac->c.fd) return fds[i].revents;
    return 0;
}

/* After hiredis ran: act on what its callbacks noted. */
static void simba__redis_settle(simba__redis *r, simba__redis_conn *c) {
    if (c->too_big) {
        char why[160];
        snprintf(why, sizeof why, "the server sent a reply of %lld array elements (more than %d: not an "
                 "answer of simba's); connection dropped", c->too_big, (int)SIMBA__REDIS_MAX_ELEMENTS);
        c->too_big = 0;             /* (drop resets the rest) */
        simba__redis_drop(r, c, SIMBA_EPROTO, why);
    } else if (c->bad_shape) {
        simba__redis_drop(r, c, SIMBA_EPROTO, "the server sent a pub/sub reply of a shape hiredis would abort on "
                          "(an array of fewer than 2 elements, or a name that is not a string); connection dropped");
    } else if (c->ac && c->ac->c.reader && c->ac->c.reader->len - c->ac->c.reader->pos > SIMBA__REDIS_MAX_BUF) {
        char why[160];
        snprintf(why, sizeof why, "more than %d bytes of one unfinished reply: not an answer of simba's; "
                 "connection dropped", (int)SIMBA__REDIS_MAX_BUF);
        simba__redis_drop(r, c, SIMBA_EPROTO, why);
    } else if (c->lost) {
        char why[160];
        simba__redis_copy(why, sizeof why, c->why[0] ? c->why : "connection closed", strlen(c->why[0] ? c->why : "connection closed"));
        simba__redis_drop(r, c, SIMBA_EDISCONNECTED, why);
    } else if (c->drop_err) {
        char why[160];
        simba__redis_copy(why, sizeof why, c->why, strlen(c->why));
        simba__redis_drop(r, c, c->drop_err, why);
    }
}

static void simba__redis_io(simba__redis *r, simba__redis_conn *c, const struct pollfd *fds, int nfds) {
    short ev;
    if (!c->ac) return;
    ev = simba__redis_revents(c, fds, nfds);
    if (ev & POLLNVAL) { simba__redis_drop(r, c, SIMBA_EDISCONNECTED, "bad file descriptor"); return; }
    if ((ev & (POLLOUT | POLLERR | POLLHUP)) && (c->want_write || !c->connected)) {
        simba__redis_nopipe g;
        simba__redis_nopipe_begin(&g);
        redisAsyncHandleWrite(c->ac);
        simba__redis_nopipe_end(&g);
    }
    if (c->ac && (ev & (POLLIN | POLLERR | POLLHUP))) redisAsyncHandleRead(c->ac);
    simba__redis_settle(r, c);
}

/*>>connection.node: what a Redis Cluster drives one of its masters' backends with */

/* A cluster's node backend is this one-server backend with node options
   (set when the Cluster makes it, >>connection.cluster): cluster_node
   (redirects are answers, simba__redis_cluster_node_redirect), shared_gen,
   fresh, on_subscribed; the Cluster reads and steers it with the functions
   below and submits through its vtable; it reports to the Cluster through
   a relay like any backend to the core. */

/* The node's script tenant "T@k@m" (tag: "" none yet): a new one is
   another shard channel, so the push connection subscribes again. */
static void simba__redis_node_set_tag(simba__redis *r, const char *tag) {
    if (strcmp(r->node_tenant, tag) == 0) return;
    simba__redis_copy(r->node_tenant, sizeof r->node_tenant, tag, strlen(tag));
    if (r->conn[SIMBA__REDIS_SUB].ac)
        simba__redis_drop(r, &r->conn[SIMBA__REDIS_SUB], SIMBA_EDISCONNECTED, "the node's tag changed");
}

/* The node's main connection is ready (the Cluster is up when every node's is). */
static int simba__redis_node_connected(const simba__redis *r) { return r->conn[SIMBA__REDIS_MAIN].ready; }

/* The node takes ops: connected, and its script tenant known. */
static int simba__redis_node_ready(const simba__redis *r) {
    return simba__redis_node_connected(r) && r->node_tenant[0];
}

/* The node's push subscriptions so far (counted from 2), 0 while its push
   connection is not subscribed: an op sent under one mark and answered
   "waiting" under another may have missed a grant published in between. */
static unsigned long simba__redis_node_push_mark(const simba__redis *r) {
    return r->conn[SIMBA__REDIS_SUB].ready ? r->push_gen : 0;
}

/* Whether the node's push connection is wanted now (simba__redis_node_push). */
static int simba__redis_node_push_wanted(const simba__redis *r) { return !r->push_off; }

/* The node's push connection wanted (on: it connects at once, an op just
   routed here is sent on the main connection meanwhile) or not (closed,
   and not made again until wanted). */
static void simba__redis_node_push(simba__redis *r, int on) {
    simba__redis_conn *sc = &r->conn[SIMBA__REDIS_SUB];
    if (on) {
        if (!r->push_off) return;
        r->push_off = 0;
        if (!sc->ac && sc->retry_at < 0) simba__redis_connect(r, sc);
        return;
    }
    r->push_off = 1;   /* (drop then plans no reconnect) */
    if (sc->ac) simba__redis_drop(r, sc, SIMBA_EDISCONNECTED, "idle");
    sc->retry_at = -1;
    sc->attempt = 0;
}

/*>>connection.sentinel: where the master is, from the sentinels */

/*--- Sentinel: where the master is (docs/redis.md, "Sentinel") -----------------
   With desc.sentinels, the main and push connections go to the address the
   sentinels name, and a third connection goes to one sentinel at a time:
   [AUTH], SENTINEL get-master-addr-by-name, then SUBSCRIBE +switch-master
   +promoted-slave, and it stays subscribed while it lives. A sentinel that
   fails (refused, garbage, no such master) is left for the next one in the
   list, with the shared backoff. The main connection confirms with ROLE that it reached a
   master; after any failure of it the sentinels are asked again, and a
   +switch-master or +promoted-slave naming our master moves both
   connections at once. */

/* Where connection c connects: 0 when no master is known (it then waits
   until simba__redis_sentinel_use wakes it). */
static int simba__redis_target(simba__redis *r, simba__redis_conn *c, const char **host, int *port) {
    if (c->role == SIMBA__REDIS_SENTINEL) {
        *host = r->sentinels[r->sentinel_next].host;
        *port = r->sentinels[r->sentinel_next].port;
        return 1;
    }
    if (!r->nsentinels) {
        *host = r->host;
        *port = r->port;
        return 1;
    }
    if (!r->master_known) return 0;
    *host = r->master_host;
    *port = r->master_port;
    return 1;
}

static void simba__redis_sentinel_on_addr(redisAsyncContext *ac, void *reply, void *privdata);
static void simba__redis_sentinel_on_sub(redisAsyncContext *ac, void *reply, void *privdata);

static void simba__redis_sentinel_handshake(simba__redis *r, simba__redis_conn *c) {
    if (r->sentinel_password && r->sentinel_user)
        redisAsyncCommand(c->ac, simba__redis_on_auth, c, "AUTH %s %s", r->sentinel_user, r->sentinel_password);
    else if (r->sentinel_password)
        redisAsyncCommand(c->ac, simba__redis_on_auth, c, "AUTH %s", r->sentinel_password);
    redisAsyncCommand(c->ac, simba__redis_sentinel_on_addr, c, "SENTINEL get-master-addr-by-name %s",
                      r->sentinel_master);
    redisAsyncCommand(c->ac, simba__redis_sentinel_on_sub, c, "SUBSCRIBE +switch-master +promoted-slave");
}

/* An address as a sentinel gives it: numeric only (a host name would need
   DNS, which never happens inside simba_tick()) and a port 1..65535. */
static int simba__redis_sentinel_addr_ok(const char *host, size_t hl, const char *port, size_t pl, int *out) {
    size_t i;
    long v = 0;
    /* IPv4 digits and dots; hex letters only with a ':' (IPv6), else "cafe" passes */
    const char *ok = memchr(host, ':', hl) ? "0123456789abcdefABCDEF.:" : "0123456789.";
    if (hl == 0 || hl > 63 || pl == 0 || pl > 5) return 0;
    for (i = 0; i < hl; i++)
        if (!host[i] || !strchr(ok, host[i])) return 0;
    for (i = 0; i < pl; i++) {
        if (port[i] < '0' || port[i] > '9') return 0;
        v = v * 10 + (port[i] - '0');
    }
    if (v < 1 || v > 65535) return 0;
    *out = (int)v;
    return 1;
}

/* The master is (now) at host:port: wake the connections that wait for an
   address; if it moved, drop the ones still on the old master first. */
static void simba__redis_sentinel_use(simba__redis *r, const char *host, int port) {
    int i, moved = r->master_host[0] && (strcmp(host, r->master_host) != 0 || port != r->master_port);
    if (moved) {
        r->stats.master_changes++;
        simba_backend_log(r->s, SIMBA_LOG_WARN, "simba_redis: sentinel: master '%s' moved from %s:%d to %s:%d",
                          r->sentinel_master, r->master_host, r->master_port, host, port);
    } else if (!r->master_host[0]) {
        simba_backend_log(r->s, SIMBA_LOG_INFO, "simba_redis: sentinel: master '%s' is at %s:%d", r->sentinel_master,
                          host, port);
    }
    simba__redis_copy(r->master_host, sizeof r->master_host, host, strlen(host));
    r->master_port = port;
    r->master_known = 1;
    for (i = SIMBA__REDIS_MAIN; i <= SIMBA__REDIS_SUB; i++) {
        simba__redis_conn *c = &r->conn[i];
        if (moved && c->ac) {
            r->switching = 1;    /* we know where to go: no need to ask again */
            simba__redis_drop(r, c, SIMBA_EDISCONNECTED, "the sentinels moved the master");
            r->switching = 0;
            c->retry_at = simba__redis_now(r);
        } else if (!c->ac && c->retry_at < 0) {
            c->retry_at = simba__redis_now(r);   /* it waited for an address (its backoff is spent) */
        }
    }
}

static void simba__redis_sentinel_on_addr(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    char why[160];
    int port = 0;
    if (!c || c->drop_err) return;
    if (rp->type == REDIS_REPLY_NIL || (rp->type == REDIS_REPLY_ARRAY && rp->elements == 0)) {
        snprintf(why, sizeof why, "the sentinel knows no master named '%.60s'", c->r->sentinel_master);
        simba__redis_fail_conn(c, SIMBA_EDISCONNECTED, why, strlen(why));
    } else if (rp->type == REDIS_REPLY_ERROR) {
        simba__redis_fail_conn(c, simba__redis_error_code(rp->str), rp->str, rp->len);
    } else if (rp->type != REDIS_REPLY_ARRAY || rp->elements != 2 || rp->element[0]->type != REDIS_REPLY_STRING ||
               rp->element[1]->type != REDIS_REPLY_STRING ||
               !simba__redis_sentinel_addr_ok(rp->element[0]->str, rp->element[0]->len, rp->element[1]->str,
                                              rp->element[1]->len, &port)) {
        snprintf(why, sizeof why, "the sentinel's answer to get-master-addr-by-name is not a numeric host and port");
        simba__redis_fail_conn(c, SIMBA_EPROTO, why, strlen(why));
    } else {
        simba__redis_sentinel_use(c->r, rp->element[0]->str, port);
    }
}

/* Splits a sentinel event into exactly n space-separated fields; 0 when it
   has another count or an empty field. */
static int simba__redis_sentinel_fields(const char *msg, size_t len, int n, const char **f, size_t *flen) {
    const char *p = msg, *end = msg + len;
    int k;
    for (k = 0; k < n; k++) {
        const char *sp = (const char *)memchr(p, ' ', (size_t)(end - p));
        const char *e = k < n - 1 ? sp : end;
        if (!e || e == p || (k == n - 1 && sp)) return 0;
        f[k] = p;
        flen[k] = (size_t)(e - p);
        p = e + (k < n - 1);
    }
    return 1;
}

/* A sentinel event naming our master (field `name`) moves it to the
   address in fields ip, ip + 1; events of other masters, and addresses that
   are not numeric, are ignored (the next failure asks again). */
static void simba__redis_sentinel_move(simba__redis *r, const char **f, const size_t *n, int name, int ip) {
    int port;
    char host[64];
    if (n[name] != strlen(r->sentinel_master) || memcmp(f[name], r->sentinel_master, n[name]) != 0) return;
    if (!simba__redis_sentinel_addr_ok(f[ip], n[ip], f[ip + 1], n[ip + 1], &port)) return;
    simba__redis_copy(host, sizeof host, f[ip], n[ip]);
    simba__redis_sentinel_use(r, host, port);
}

/* The events that move our master:
     +switch-master   "<name> <old ip> <old port> <new ip> <new port>"
     +promoted-slave  "slave <ip:port> <ip> <port> @ <name> <old ip> <old port>"
   The sentinel that runs a fail-over names the promoted replica from the
   moment it answers as master, which is when it publishes +promoted-slave,
   but publishes +switch-master only once the other replicas follow it
   (about a second here). Until then new clients go to the new master while
   the old one still serves whoever stayed (t_sentinel_failover_window). */
static void simba__redis_sentinel_event(simba__redis *r, const char *channel, const char *msg, size_t len) {
    const char *f[8];
    size_t n[8];
    if (strcmp(channel, "+switch-master") == 0 && simba__redis_sentinel_fields(msg, len, 5, f, n))
        simba__redis_sentinel_move(r, f, n, 0, 3);
    else if (strcmp(channel, "+promoted-slave") == 0 && simba__redis_sentinel_fields(msg, len, 8, f, n) &&
             n[0] == 5 && memcmp(f[0], "slave", 5) == 0 && n[4] == 1 && f[4][0] == '@')
        simba__redis_sentinel_move(r, f, n, 5, 2);
}

static void simba__redis_sentinel_on_sub(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    if (!c || c->drop_err) return;
    if (rp->type != REDIS_REPLY_ARRAY || rp->elements < 3 || rp->element[0]->type != REDIS_REPLY_STRING) return;
    if (strcmp(rp->element[0]->str, "subscribe") == 0) {
        c->ready = 1;
        c->attempt = 0;
        c->deadline = -1;
    } else if (strcmp(rp->element[0]->str, "message") == 0 && rp->element[1]->type == REDIS_REPLY_STRING &&
               rp->element[2]->type == REDIS_REPLY_STRING) {
        simba__redis_sentinel_event(c->r, rp->element[1]->str, rp->element[2]->str, rp->element[2]->len);
    }
}

/* ROLE on the main connection: anything but "master" (a replica, a stale
   answer of a sentinel) drops it, and the drop asks the sentinels again. */
static void simba__redis_sentinel_on_role(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    char why[160];
    if (!c || c->drop_err) return;
    if (rp->type == REDIS_REPLY_ARRAY && rp->elements >= 1 && rp->element[0]->type == REDIS_REPLY_STRING &&
        strcmp(rp->element[0]->str, "master") == 0)
        return;
    if (rp->type == REDIS_REPLY_ERROR) {
        simba__redis_fail_conn(c, simba__redis_error_code(rp->str), rp->str, rp->len);
        return;
    }
    snprintf(why, sizeof why, "%s:%d named by the sentinels is not a master (ROLE: %.20s)", c->r->master_host,
             c->r->master_port, rp->type == REDIS_REPLY_ARRAY && rp->elements >= 1 &&
             rp->element[0]->type == REDIS_REPLY_STRING ? rp->element[0]->str : "?");
    simba__redis_fail_conn(c, SIMBA_EDISCONNECTED, why, strlen(why));
}

/* The main connection failed: its master may be gone. Ask again (a new
   connection to the next sentinel: the subscribed one cannot ask), and move
   the push connection along with the main one. Bounded by the main
   connection's backoff, which is what calls it. */
static void simba__redis_sentinel_lost_master(simba__redis *r) {
    simba__redis_conn *sc = &r->conn[SIMBA__REDIS_SENTINEL];
    if (r->switching || r->destroying) return;
    r->master_known = 0;
    if (r->conn[SIMBA__REDIS_SUB].ac)
        simba__redis_drop(r, &r->conn[SIMBA__REDIS_SUB], SIMBA_EDISCONNECTED, "the master connection failed");
    if (sc->ac) {
        simba__redis_drop(r, sc, 0, NULL);
        sc->retry_at = simba__redis_now(r);
    }
}

/* A sentinel connection ended (err 0: on purpose, to ask again). The next
   attempt goes to the next sentinel; while the main connection is not up,
   the failure is what the core reports as the connection's state. */
static void simba__redis_sentinel_dropped(simba__redis *r, simba__redis_conn *c, int err, const char *why) {
    char line[sizeof r->last_fail + 200];
    int at = r->sentinel_next;
    (void)c;
    r->sentinel_next = (r->sentinel_next + 1) % r->nsentinels;
    if (!err) return;
    snprintf(line, sizeof line, "simba_redis: sentinel %s:%d: %.120s (%s)", r->sentinels[at].host,
             r->sentinels[at].port, why && why[0] ? why : "-", simba_strerror(err));
    simba__redis_log_failure(r, err == SIMBA_EAUTH ? SIMBA_LOG_ERROR : SIMBA_LOG_WARN, line);
    if (!r->conn[SIMBA__REDIS_MAIN].ready) simba__redis_report(r, 0, err, line + strlen("simba_redis: "));
}

/*>>connection.cluster: hash slots, the map, redirects, one plain backend per master, push connections on demand */

/*--- Redis Cluster (simba__redis_cluster_*): hash slots, seed lists, the slot
   map of CLUSTER SLOTS, MOVED/ASK redirects, the per-node key names; then
   the runtime that uses them (docs/redis.md, "Cluster"). */

#ifdef __GNUC__
#define SIMBA__REDIS_CLUSTER_FN static __attribute__((unused))   /* the tests call them all */
#else
#define SIMBA__REDIS_CLUSTER_FN static
#endif

enum {
    SIMBA__REDIS_CLUSTER_SLOTS = 16384,
    SIMBA__REDIS_CLUSTER_MAX_SEEDS = 16,
    SIMBA__REDIS_CLUSTER_MAX_NODES = 256,    /* masters of one map (Redis's advice: up to 1000 nodes) */
    SIMBA__REDIS_CLUSTER_MAX_HOST = 63       /* a numeric IPv6 address is at most 45 */
};

typedef struct simba__redis_cluster_node {
    char host[SIMBA__REDIS_CLUSTER_MAX_HOST + 1];
    int port;
} simba__redis_cluster_node;

/* Which master serves each slot: owner[slot] indexes node[], -1 when the map
   names nobody (a slot no node claims: an op on it waits as on a disconnect). */
typedef struct simba__redis_cluster_map {
    int nnodes;
    simba__redis_cluster_node node[SIMBA__REDIS_CLUSTER_MAX_NODES];
    short owner[SIMBA__REDIS_CLUSTER_SLOTS];
} simba__redis_cluster_map;

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), the one Redis Cluster
   hashes keys with; bitwise (a key is hashed once per op: no table). */
static unsigned simba__redis_cluster_crc16(const char *s, size_t n) {
    unsigned crc = 0;
    size_t i;
    int b;
    for (i = 0; i < n; i++) {
        crc ^= (unsigned)(unsigned char)s[i] << 8;
        for (b = 0; b < 8; b++) crc = (crc & 0x8000u) ? ((crc << 1) ^ 0x1021u) & 0xffffu : (crc << 1) & 0xffffu;
    }
    return crc;
}

SIMBADEF int simba_redis_key_slot(const char *key, size_t len) {
    size_t off = 0, n = len;
    if (!key) return SIMBA_EINVAL;
    /* the same tag rule as simba__redis_key's (an empty "{}" tags nothing) */
    if (!simba__redis_user_tag(key, len, &off, &n)) { off = 0; n = len; }
    return (int)(simba__redis_cluster_crc16(key + off, n) & (SIMBA__REDIS_CLUSTER_SLOTS - 1));
}

/* One "host:port" (IPv6 as "[addr]:port") of n bytes into *out; 0 or -1. */
static int simba__redis_cluster_addr(const char *s, size_t n, simba__redis_cluster_node *out) {
    const char *colon = NULL, *hs = s, *he;
    size_t i;
    long port = 0;
    for (i = 0; i < n; i++) if (s[i] == ':') colon = s + i;
    if (!colon || colon + 1 == s + n || (size_t)(s + n - colon - 1) > 5) return -1;
    he = colon;
    if (n > 0 && s[0] == '[') {
        if (he - hs < 2 || he[-1] != ']') return -1;
        hs++;
        he--;
    }
    if (he == hs || (size_t)(he - hs) > SIMBA__REDIS_CLUSTER_MAX_HOST) return -1;
    for (i = 0; i < (size_t)(he - hs); i++)
        if (!((hs[i] >= '0' && hs[i] <= '9') || (hs[i] >= 'a' && hs[i] <= 'z') || (hs[i] >= 'A' && hs[i] <= 'Z') ||
              hs[i] == '.' || hs[i] == ':' || hs[i] == '-' || hs[i] == '_'))
            return -1;
    for (i = (size_t)(colon + 1 - s); i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        port = port * 10 + (s[i] - '0');
    }
    if (port < 1 || port > 65535) return -1;
    simba__redis_copy(out->host, sizeof out->host, hs, (size_t)(he - hs));
    out->port = (int)port;
    return 0;
}

/* The seed list "h1:p1,h2:p2,..." into out[max]: the count, or -1 with
   why (a bad entry, none, too many, a host name that would need DNS). */
static int simba__redis_cluster_seeds(const char *list, simba__redis_cluster_node *out, int max, char *why,
                                      size_t cap) {
    int count = 0;
    const char *p = list;
    if (!*p) {
        snprintf(why, cap, "no seed node (want host:port,host:port,...)");
        return -1;
    }
    while (p) {   /* an empty entry (",", a trailing comma) is a bad entry */
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        simba__redis_cluster_node tmp;
        char numeric[64];
        if (count >= max) {
            snprintf(why, cap, "more than %d seed nodes", max);
            return -1;
        }
        if (simba__redis_cluster_addr(p, n, &tmp) != 0) {
            snprintf(why, cap, "'%.*s' is not host:port", (int)(n > 80 ? 80 : n), p);
            return -1;
        }
        /* the host-name policy (docs/design.md): a name would be looked up
           at every redirect inside simba_tick(); seeds are addresses */
        numeric[0] = 0;
        if (simba_backend_resolve(tmp.host, numeric, sizeof numeric) != 0 ||
            (numeric[0] && strcmp(tmp.host, "localhost") != 0)) {
            snprintf(why, cap, "'%s' is a host name: give seed nodes as numeric addresses (or localhost)", tmp.host);
            return -1;
        }
        if (strcmp(tmp.host, "localhost") == 0) simba__redis_copy(tmp.host, sizeof tmp.host, "127.0.0.1", 9);
        out[count++] = tmp;
        p = end ? end + 1 : NULL;
    }
    return count;
}

/* The index of host:port in m's nodes, added when new; -1 when full. */
static int simba__redis_cluster_node_index(simba__redis_cluster_map *m, const char *host, size_t hlen, long port) {
    int i;
    simba__redis_cluster_node n;
    simba__redis_copy(n.host, sizeof n.host, host, hlen);
    n.port = (int)port;
    for (i = 0; i < m->nnodes; i++)
        if (m->node[i].port == n.port && strcmp(m->node[i].host, n.host) == 0) return i;
    if (m->nnodes >= SIMBA__REDIS_CLUSTER_MAX_NODES) return -1;
    m->node[m->nnodes] = n;
    return m->nnodes++;
}

/* One CLUSTER SLOTS range: {start, end, {host, port, id, ...}, replicas...}.
   An empty host means "the node you asked" (Redis 7: cluster-preferred-
   endpoint-type unknown), so `from` stands in for it. 0, or -1 with why. */
static int simba__redis_cluster_range(simba__redis_cluster_map *m, const redisReply *e, const char *from, char *why,
                                      size_t cap) {
    const redisReply *mn;
    const char *h;
    size_t hl;
    int idx;
    long long s, t, i;
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER || (s = e->element[0]->integer) < 0 ||
        (t = e->element[1]->integer) < s || t > 16383) {
        snprintf(why, cap, "CLUSTER SLOTS: a range that is not {start, end, master, ...} with 0 <= start <= end < 16384");
        return -1;
    }
    mn = e->element[2];
    if (mn->type != REDIS_REPLY_ARRAY || mn->elements < 2 || mn->element[0]->type != REDIS_REPLY_STRING ||
        mn->element[1]->type != REDIS_REPLY_INTEGER || mn->element[1]->integer < 1 || mn->element[1]->integer > 65535) {
        snprintf(why, cap, "CLUSTER SLOTS: slots %lld-%lld: the master is not {host, port, ...}", s, t);
        return -1;
    }
    h = mn->element[0]->str;
    hl = mn->element[0]->len;
    if (hl == 0 || (hl == 1 && h[0] == '?')) { h = from; hl = strlen(from); }
    if (hl > SIMBA__REDIS_CLUSTER_MAX_HOST || memchr(h, 0, hl)) {
        snprintf(why, cap, "CLUSTER SLOTS: slots %lld-%lld: a master address longer than %d bytes", s, t,
                 (int)SIMBA__REDIS_CLUSTER_MAX_HOST);
        return -1;
    }
    idx = simba__redis_cluster_node_index(m, h, hl, (long)mn->element[1]->integer);
    if (idx < 0) {
        snprintf(why, cap, "CLUSTER SLOTS: more than %d masters", (int)SIMBA__REDIS_CLUSTER_MAX_NODES);
        return -1;
    }
    for (i = s; i <= t; i++) {
        if (m->owner[i] >= 0 && m->owner[i] != idx) {
            snprintf(why, cap, "CLUSTER SLOTS: slot %lld claimed by two masters", i);
            return -1;
        }
        m->owner[i] = (short)idx;
    }
    return 0;
}

/* A whole CLUSTER SLOTS answer (of the node at `from`) into m; SIMBA_OK,
   or SIMBA_EPROTO with why when it is not a slot map. Slots no range names
   stay -1. */
SIMBA__REDIS_CLUSTER_FN int simba__redis_cluster_parse_slots(simba__redis_cluster_map *m, const redisReply *rp,
                                                             const char *from, char *why, size_t cap) {
    size_t i;
    m->nnodes = 0;
    for (i = 0; i < SIMBA__REDIS_CLUSTER_SLOTS; i++) m->owner[i] = -1;
    if (!rp || rp->type != REDIS_REPLY_ARRAY) {
        snprintf(why, cap, "CLUSTER SLOTS: the answer is not an array (%s)",
                 rp && rp->type == REDIS_REPLY_ERROR ? rp->str : "not a cluster node?");
        return SIMBA_EPROTO;
    }
    for (i = 0; i < rp->elements; i++)
        if (simba__redis_cluster_range(m, rp->element[i], from, why, cap) != 0) return SIMBA_EPROTO;
    return SIMBA_OK;
}

/* The node tag of master `node` for tenant `tenant` (docs/redis.md,
   Cluster): "<tenant>@<k>" with the smallest k whose slot `node` serves in
   m, so every client with the same map picks the same one. The tenant's
   epoch and admin keys built from it ({<tenant>@<k>}) are on that node.
   Writes it into out (cap bytes); its length, or -1 when the node serves no
   slot (or out is too small). */
SIMBA__REDIS_CLUSTER_FN int simba__redis_cluster_node_tag(const simba__redis_cluster_map *m, int node,
                                                          const char *tenant, char *out, size_t cap) {
    size_t tl = strlen(tenant);
    long k;
    if (tl >= cap) return -1;
    memcpy(out, tenant, tl);
    for (k = 0; k < 16L * SIMBA__REDIS_CLUSTER_SLOTS; k++) {
        char at[24];   /* "@<k>" always fits: nothing is cut, the caller's room is checked below */
        int a = snprintf(at, sizeof at, "@%ld", k);
        if (a < 0 || tl + (size_t)a >= cap) return -1;
        memcpy(out + tl, at, (size_t)a + 1);
        if (m->owner[simba_redis_key_slot(out, tl + (size_t)a)] == node) return (int)(tl + (size_t)a);
    }
    return -1;   /* a node with one slot of 16384 is missed after 16 x 16384 tries with odds e^-16 */
}

/* The one slot of a request's resources (their base keys), or -1 when they
   span several: a multi-resource request on a cluster must name one slot
   (a shared {tag} in the names), checked before anything is sent. */
SIMBA__REDIS_CLUSTER_FN int simba__redis_cluster_op_slot(const char *prefix, const char *tenant,
                                                         const char *const *names, int n) {
    char key[SIMBA__REDIS_MAX_PREFIX + SIMBA_MAX_TENANT + 2 * SIMBA_MAX_NAME + 16];
    int i, slot = -1;
    for (i = 0; i < n; i++) {
        size_t len = simba__redis_key(NULL, prefix, tenant, names[i]);
        int s;
        if (len >= sizeof key) return -1;
        simba__redis_key(key, prefix, tenant, names[i]);
        s = simba_redis_key_slot(key, len);
        if (slot >= 0 && s != slot) return -1;
        slot = s;
    }
    return slot;
}

/* "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>" (an error
   reply's text): 1 with its parts, 0 when msg is neither (or malformed). */
static int simba__redis_cluster_redirect(const char *msg, size_t len, int *ask, int *slot,
                                         simba__redis_cluster_node *to) {
    size_t at, i;
    long s = 0;
    if (len > 5 && memcmp(msg, "MOVED ", 6) == 0) { *ask = 0; at = 6; }
    else if (len > 3 && memcmp(msg, "ASK ", 4) == 0) { *ask = 1; at = 4; }
    else return 0;
    for (i = at; i < len && msg[i] >= '0' && msg[i] <= '9' && i - at < 5; i++) s = s * 10 + (msg[i] - '0');
    if (i == at || i >= len || msg[i] != ' ' || s >= SIMBA__REDIS_CLUSTER_SLOTS) return 0;
    if (simba__redis_cluster_addr(msg + i + 1, len - i - 1, to) != 0) return 0;
    *slot = (int)s;
    return 1;
}

/*--- Redis Cluster: answers held back. An op that meets a slot on the move
   (ASK, TRYAGAIN: a migration under way; a script that met a key of another
   node: our node tag is behind a slot that moved) cannot be judged now. It
   is answered EDISCONNECTED, which makes the core send it again (routed by
   the map of then), but only after a pause that grows with the answers of
   that kind in a row on its slot (10 ms doubling to 100 ms): the connection
   stays (a pause is not a fault of the master: its other ops, the
   keepalives and the holds on it go on), nothing is ever answered on a
   guess (a RELEASE is done only once a master said the entry is gone), and
   the retries cost a few round trips a second. Each try is one op of the
   core, answered well inside its op timeout. */
typedef struct simba__redis_cluster_later {
    struct simba__redis_cluster_later *next;
    uint64_t id;
    int fan;                    /* a part of an OPEN/KEEPALIVE/CLOSE fan-out */
    int64_t due;
    char msg[160];
} simba__redis_cluster_later;

enum { SIMBA__REDIS_CLUSTER_PAUSE_MS = 10, SIMBA__REDIS_CLUSTER_PAUSE_MAX_MS = 100 };

/* The pause before the n-th answer in a row of a slot on the move is given. */
static int simba__redis_cluster_pause_ms(int n) {
    int ms = SIMBA__REDIS_CLUSTER_PAUSE_MS;
    while (--n > 0 && ms < SIMBA__REDIS_CLUSTER_PAUSE_MAX_MS) ms *= 2;
    return ms < SIMBA__REDIS_CLUSTER_PAUSE_MAX_MS ? ms : SIMBA__REDIS_CLUSTER_PAUSE_MAX_MS;
}

/*--- Redis Cluster: the runtime. The cluster's backend (r->cl set) owns one
   node backend per master of the slot map (a simba__redis each, with the
   whole one-server machinery: connect, handshake, SCRIPT LOAD, INFO run_id,
   reconnect with backoff, requests; its push connection SSUBSCRIBEs to its
   shard channel, opened on demand and closed when idle, see below) and a
   probe backend, connected to a seed or a known master, that asks CLUSTER
   SLOTS. Ops on resources go to the master of their slot; OPEN/KEEPALIVE/
   CLOSE go to every master and are answered once all did. */

enum { SIMBA__REDIS_CLUSTER_FANS = 8, SIMBA__REDIS_CLUSTER_MAX_MOVED = 30, SIMBA__REDIS_CLUSTER_REFRESH_MS = 250,
       SIMBA__REDIS_CLUSTER_STALE_MS = 4 * SIMBA__REDIS_CLUSTER_REFRESH_MS };

/* A chained hash of entries that begin with a simba__redis_link: the
   Cluster's waiters and the requests it routed. */
typedef struct simba__redis_link {
    struct simba__redis_link *next;
    uint64_t hash;
} simba__redis_link;

typedef struct simba__redis_table {
    simba__redis_link **b;      /* nb buckets (a power of two, or 0), n entries */
    size_t nb, n;
} simba__redis_table;

/* One waiting request of ours (an ENQUEUE or POLL answered "not granted"):
   what keeps the push connection of its slot's master open (see "push
   connections on demand" below). */
typedef struct simba__redis_waiter {
    simba__redis_link link;     /* hash: of "<session> <request>" */
    int slot;                   /* the hash slot of its resources */
    int counted;                /* the master it counts for in waiting[] (-1: none) */
    int contend;                /* a contend handle's request: kept while it holds too */
    char *key;                  /* "<session> <request>" (ids have no spaces) */
    char *name;                 /* its first resource: what a wake-up names */
} simba__redis_waiter;

/* A request the cluster routed to one master, from submit to its answer:
   what the answer is read against (the child's answer carries only the
   op id). Kept in a hash by op id. */
typedef struct simba__redis_cluster_sent {
    simba__redis_link link;     /* hash: of id */
    uint64_t id;
    int slot;                   /* the hash slot of its resources */
    int kind, try_only, contend;
    unsigned long push_gen;     /* the master's push_gen when sent, 0 if not subscribed then */
    char *session, *request, *name;   /* name: its first resource (the bytes follow the struct) */
} simba__redis_cluster_sent;

typedef struct simba__redis_fanout {
    uint64_t id;
    int used, left, status, deferred;
    char msg[160];
} simba__redis_fanout;

struct simba__redis_cluster {
    simba__redis_cluster_node seeds[SIMBA__REDIS_CLUSTER_MAX_SEEDS];
    int nseeds, next_probe;
    int have_map, refreshing, want_refresh;
    int stale;                  /* a MOVED named a master the map does not know: down until the next map */
    int64_t stale_until;        /* a map the same as the stale one ends stale only from then on */
    int maps;                   /* maps applied so far */
    int64_t next_refresh;       /* while not every master is connected: ask the map again then */
    int64_t hold_until;         /* != 0: the completion under way is held back until then (park) */
    simba__redis *probe;
    simba__redis *node[SIMBA__REDIS_CLUSTER_MAX_NODES];
    simba__redis_fanout fan[SIMBA__REDIS_CLUSTER_FANS];
    unsigned char moved[SIMBA__REDIS_CLUSTER_SLOTS];   /* MOVEDs in a row per slot (a loop is capped) */
    simba__redis_cluster_map map;
    simba__redis_cluster_map next;                      /* a CLUSTER SLOTS answer being applied */
    simba__redis_table waiters; /* our waiting requests (simba__redis_waiter) */
    int waiting[SIMBA__REDIS_CLUSTER_MAX_NODES];        /* of them, queued on each master of the map */
    int pinned;                 /* a waiter could not be recorded (out of memory): no push connection closes */
    simba__redis_table sent;    /* requests routed and not answered yet (simba__redis_cluster_sent) */
    unsigned long gen;          /* main connections of the masters made ready so far (the GEN of every op) */
    struct simba__redis_cluster_later *later;   /* answers held back (simba__redis_cluster_park), oldest first */
    unsigned char asked[SIMBA__REDIS_CLUSTER_SLOTS];   /* ASK/TRYAGAIN/non-local answers in a row per slot */
    unsigned char asked_fan;    /* the same for the session ops (no slot) */
    int64_t admin_gen;          /* the admin epoch the Cluster answers: + 1 whenever a master's
                                   differs from the one it answered before, or a master leaves */
};

static int simba__redis_submit(void *impl, const simba_op *op);
static int simba__redis_has_res(int kind);
static void simba__redis_retry_later(simba__redis *r, simba__redis_req *q, const redisReply *rp);
static void simba__redis_destroy(void *impl);
static void simba__redis_process(void *impl, const struct pollfd *fds, int nfds);
static int simba__redis_pollfds(void *impl, struct pollfd *fds, int max);
static int64_t simba__redis_deadline(void *impl);
static void simba__redis_reset(void *impl, int why);
static int simba__redis_build_script(simba__redis *r);

static int simba__redis_cluster_relay(simba__redis *c);
static void simba__redis_cluster_subscribed(simba__redis *c);

/* A node or probe backend at host:port with the cluster's settings; its
   main connection starts at the next process() (a node's push connection
   when an op is routed to it; the probe's never). Made before attach (the
   probe), it reports to the cluster once attach gave it its relay. NULL
   when out of memory. */
static simba__redis *simba__redis_cluster_child(simba__redis *p, const char *host, int port) {
    simba__redis *c = (simba__redis *)simba_allocator_alloc(&p->alloc, sizeof *c);
    int i;
    if (!c) return NULL;
    memset(c, 0, sizeof *c);
    c->alloc = p->alloc;
    c->parent = p;
    c->cluster_node = 1;
    c->shared_gen = &p->cl->gen;
    c->reported = -1;
    c->node = -1;
    c->nconn = 2;
    for (i = 0; i < 2; i++) {
        c->conn[i].r = c;
        c->conn[i].role = i;
        c->conn[i].deadline = -1;
        c->conn[i].retry_at = -1;
    }
    c->port = port;
    c->connect_timeout_ms = p->connect_timeout_ms;
    c->wait_replicas = p->wait_replicas;
    c->wait_timeout_ms = p->wait_timeout_ms;
    c->warned_policy = p->warned_policy;
    c->host = simba_allocator_strdup(&c->alloc, host);
    c->prefix = simba_allocator_strdup(&c->alloc, p->prefix);
    c->user = simba_allocator_strdup(&c->alloc, p->user);
    c->password = simba_allocator_strdup(&c->alloc, p->password);
    if (!c->host || !c->prefix || (p->user && !c->user) || (p->password && !c->password) ||
        simba__redis_build_script(c) != SIMBA_OK || (p->s && simba__redis_cluster_relay(c) != SIMBA_OK)) {
        simba__redis_free(c);
        return NULL;
    }
    /* the push connection (its shard's pushes) opens when an op is routed here */
    c->push_off = 1;
    c->push_used = -1;
    c->push_gen = 1;
    c->on_subscribed = simba__redis_cluster_subscribed;
    if (p->s) c->conn[SIMBA__REDIS_MAIN].retry_at = simba__redis_now(c);
    return c;
}

/*--- Redis Cluster: push connections on demand (docs/redis.md, Cluster, "Idle
   push connections"). A master's push connection (SUBSCRIBE + SSUBSCRIBE
   of its shard channel) is opened when an op is routed to that master and
   closed once nothing of ours there has needed pushes for cluster_idle_ms:
   no waiting request of ours is queued there and no op was routed there.
   A waiting request is one whose ENQUEUE or POLL was answered "not granted";
   it stops waiting when an answer or a push grants it, when it is released,
   when the server says it is gone (ESESSION, ENOTFOUND, ECAPACITY,
   EKEYBUSY), or when its session ends (CLOSE, or OPEN of the next one).
   Any other answer (a disconnect, a timeout, a server error) keeps it: the
   bookkeeping may keep a connection open too long, never close one a
   waiter needs. Holders do not keep it open: pushes to a holder are hints
   (a DELETE or SET_CAPACITY is also seen by the KEEPALIVE's admin epoch),
   except a contend handle's request, holding or not, until it is released
   or its session ends: its OWNER events come by push only.
   The main connections all stay: every master keeps a copy of the
   session, renewed by every KEEPALIVE. */

/* The link that starts the bucket of hash h; NULL when there are no buckets. */
static simba__redis_link **simba__redis_table_bucket(const simba__redis_table *t, uint64_t h) {
    return t->nb ? &t->b[h & (t->nb - 1)] : NULL;
}

/* Twice the buckets (at least 64) when there are as many entries as
   buckets: call it before an add (SIMBA_ENOMEM: nothing changed). */
static int simba__redis_table_grow(const simba_allocator *a, simba__redis_table *t) {
    size_t n = t->nb ? t->nb * 2 : 64, i;
    simba__redis_link **nb;
    if (t->n < t->nb) return SIMBA_OK;
    nb = (simba__redis_link **)simba_allocator_alloc(a, n * sizeof *nb);
    if (!nb) return SIMBA_ENOMEM;
    for (i = 0; i < t->nb; i++)
        while (t->b[i]) {
            simba__redis_link *l = t->b[i];
            t->b[i] = l->next;
            l->next = nb[l->hash & (n - 1)];
            nb[l->hash & (n - 1)] = l;
        }
    simba_allocator_free(a, t->b);
    t->b = nb;
    t->nb = n;
    return SIMBA_OK;
}

static void simba__redis_table_add(simba__redis_table *t, simba__redis_link *l) {
    simba__redis_link **at = simba__redis_table_bucket(t, l->hash);
    l->next = *at;
    *at = l;
    t->n++;
}

/* The entry *at, taken out (the caller frees it). */
static simba__redis_link *simba__redis_table_take(simba__redis_table *t, simba__redis_link **at) {
    simba__redis_link *l = *at;
    *at = l->next;
    t->n--;
    return l;
}

/* Every entry and the buckets freed (destroy). */
static void simba__redis_table_free(const simba_allocator *a, simba__redis_table *t) {
    size_t i;
    for (i = 0; i < t->nb; i++)
        while (t->b[i]) simba_allocator_free(a, simba__redis_table_take(t, &t->b[i]));
    simba_allocator_free(a, t->b);
    t->b = NULL;
    t->nb = t->n = 0;
}

/* FNV-1a of "<session> <request>". */
static uint32_t simba__redis_cluster_hash(const char *session, const char *request) {
    uint32_t h = 2166136261u;
    const char *p;
    for (p = session; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    h = (h ^ (unsigned char)' ') * 16777619u;
    for (p = request; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

/* The link that points at the waiter (session, request), or at the NULL
   that ends its bucket; NULL when there are no buckets. */
static simba__redis_link **simba__redis_cluster_waiter_at(struct simba__redis_cluster *cl, const char *session,
                                                         const char *request, uint32_t h) {
    simba__redis_link **at = simba__redis_table_bucket(&cl->waiters, h);
    size_t sl = strlen(session);
    for (; at && *at; at = &(*at)->next) {
        const simba__redis_waiter *w = (const simba__redis_waiter *)*at;
        if (w->link.hash == h && strncmp(w->key, session, sl) == 0 && w->key[sl] == ' ' &&
            strcmp(w->key + sl + 1, request) == 0)
            break;
    }
    return at;
}

/* Counts waiter w for the master that serves its slot in the map now. */
static void simba__redis_cluster_count(struct simba__redis_cluster *cl, simba__redis_waiter *w, int add) {
    if (!add) {
        if (w->counted >= 0) cl->waiting[w->counted]--;
        w->counted = -1;
        return;
    }
    w->counted = cl->have_map ? cl->map.owner[w->slot] : -1;
    if (w->counted >= 0) cl->waiting[w->counted]++;
}

/* The map changed (a new map, a MOVED): every waiter counts for its slot's
   master of now (that master's shard channel carries its pushes). */
static void simba__redis_cluster_recount(struct simba__redis_cluster *cl) {
    size_t b;
    simba__redis_link *l;
    memset(cl->waiting, 0, sizeof cl->waiting);
    for (b = 0; b < cl->waiters.nb; b++)
        for (l = cl->waiters.b[b]; l; l = l->next) simba__redis_cluster_count(cl, (simba__redis_waiter *)l, 1);
}

static void simba__redis_cluster_unwait_at(simba__redis *p, simba__redis_link **at) {
    simba__redis_waiter *w = (simba__redis_waiter *)simba__redis_table_take(&p->cl->waiters, at);
    simba__redis_cluster_count(p->cl, w, 0);
    simba_allocator_free(&p->alloc, w);
}

/* (session, request) waits no more (granted, released, gone). */
static void simba__redis_cluster_unwait(simba__redis *p, const char *session, const char *request) {
    simba__redis_link **at = simba__redis_cluster_waiter_at(p->cl, session, request,
                                                           simba__redis_cluster_hash(session, request));
    if (at && *at) simba__redis_cluster_unwait_at(p, at);
}

/* Every waiter of session `session` (other: of every other session) waits no more. */
static void simba__redis_cluster_unwait_session(simba__redis *p, const char *session, int other) {
    struct simba__redis_cluster *cl = p->cl;
    size_t b, sl = strlen(session);
    for (b = 0; b < cl->waiters.nb; b++) {
        simba__redis_link **at = &cl->waiters.b[b];
        while (*at) {
            const simba__redis_waiter *w = (const simba__redis_waiter *)*at;
            int mine = strncmp(w->key, session, sl) == 0 && w->key[sl] == ' ';
            if (mine != other) simba__redis_cluster_unwait_at(p, at);
            else at = &(*at)->next;
        }
    }
}

/* (session, request) on `name` (its first resource) in `slot` waits. Out
   of memory: nothing closes any more (pinned), so no waiter loses pushes. */
static void simba__redis_cluster_wait(simba__redis *p, const char *session, const char *request, const char *name,
                                      int slot, int contend) {
    struct simba__redis_cluster *cl = p->cl;
    uint32_t h = simba__redis_cluster_hash(session, request);
    size_t sl = strlen(session), rl = strlen(request), nl = strlen(name);
    simba__redis_link **at = simba__redis_cluster_waiter_at(cl, session, request, h);
    simba__redis_waiter *w = at && *at ? (simba__redis_waiter *)*at : NULL;
    if (w) {
        if (w->slot == slot && strcmp(w->name, name) == 0) return;
        simba__redis_cluster_unwait_at(p, at);   /* a keyed request on another name: recorded anew */
    }
    w = simba__redis_table_grow(&p->alloc, &cl->waiters) == SIMBA_OK
            ? (simba__redis_waiter *)simba_allocator_alloc(&p->alloc, sizeof *w + sl + rl + nl + 3)
            : NULL;
    if (!w) {
        cl->pinned = 1;
        return;
    }
    w->link.hash = h;
    w->slot = slot;
    w->contend = contend;
    w->key = (char *)(w + 1);
    memcpy(w->key, session, sl);
    w->key[sl] = ' ';
    memcpy(w->key + sl + 1, request, rl + 1);
    w->name = w->key + sl + rl + 2;
    memcpy(w->name, name, nl + 1);
    simba__redis_table_add(&cl->waiters, &w->link);
    simba__redis_cluster_count(cl, w, 1);
}

/*--- Redis Cluster: the requests routed to a master, by op id, until answered */

/* splitmix64's finalizer: an op id's bits all reach the bucket. */
static uint64_t simba__redis_id_hash(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A record of op (to `slot`), not in the hash yet; NULL when out of memory. */
static simba__redis_cluster_sent *simba__redis_cluster_sent_new(simba__redis *p, const simba_op *op, int slot) {
    /* (an admin op, INSPECT, SET_CAPACITY, DELETE, has no session nor request) */
    const char *session = op->session ? op->session : "", *request = op->request ? op->request : "";
    const char *name = op->nres > 0 ? op->res[0].name : "";
    size_t sl = strlen(session), rl = strlen(request), nl = strlen(name);
    simba__redis_cluster_sent *t;
    if (simba__redis_table_grow(&p->alloc, &p->cl->sent) != SIMBA_OK) return NULL;
    t = (simba__redis_cluster_sent *)simba_allocator_alloc(&p->alloc, sizeof *t + sl + rl + nl + 3);
    if (!t) return NULL;
    t->id = op->id;
    t->link.hash = simba__redis_id_hash(op->id);
    t->slot = slot;
    t->kind = op->kind;
    t->try_only = op->try_only;
    t->contend = op->watch_owner && !op->try_only;   /* its OWNER events come by push only, holding or not */
    t->session = (char *)(t + 1);
    t->request = t->session + sl + 1;
    t->name = t->request + rl + 1;
    memcpy(t->session, session, sl + 1);
    memcpy(t->request, request, rl + 1);
    memcpy(t->name, name, nl + 1);
    return t;
}

/* The record of the request answered as op `id`, taken out of the hash
   (the caller frees it); NULL: not a routed request (a fan-out's part). */
static simba__redis_cluster_sent *simba__redis_cluster_sent_take(struct simba__redis_cluster *cl, uint64_t id) {
    simba__redis_link **at = simba__redis_table_bucket(&cl->sent, simba__redis_id_hash(id));
    for (; at && *at; at = &(*at)->next)
        if (((const simba__redis_cluster_sent *)*at)->id == id)
            return (simba__redis_cluster_sent *)simba__redis_table_take(&cl->sent, at);
    return NULL;
}

/* What an ENQUEUE/POLL answer says about its request's waiting; the name
   to wake when it waits and may have missed a push: sent before the push
   connection's current subscription was confirmed (a grant published in
   between reached nobody). NULL: nothing to wake. */
static const char *simba__redis_cluster_note(simba__redis *c, const simba__redis_cluster_sent *t,
                                             const simba_reply *rep) {
    if (t->kind != SIMBA_OP_ENQUEUE && t->kind != SIMBA_OP_POLL) return NULL;
    if (rep->status == SIMBA_OK && (!rep->granted || t->contend)) {
        if (t->kind == SIMBA_OP_ENQUEUE && t->try_only) return NULL;   /* not queued */
        simba__redis_cluster_wait(c->parent, t->session, t->request, t->name, t->slot, t->contend);
        if (!rep->granted && simba__redis_node_push_mark(c) && t->push_gen != simba__redis_node_push_mark(c))
            return t->name;
        return NULL;   /* subscribed all along, or woken once it is (simba__redis_cluster_subscribed) */
    }
    if (rep->status == SIMBA_OK || rep->status == SIMBA_ESESSION || rep->status == SIMBA_ENOTFOUND ||
        rep->status == SIMBA_ECAPACITY || rep->status == SIMBA_EKEYBUSY)
        simba__redis_cluster_unwait(c->parent, t->session, t->request);
    return NULL;
}

/* A push granted (session, request) on node c (a contend handle's stays). */
static void simba__redis_cluster_granted(simba__redis *c, const char *session, const char *request) {
    struct simba__redis_cluster *cl = c->parent->cl;
    simba__redis_link **at = simba__redis_cluster_waiter_at(cl, session, request,
                                                           simba__redis_cluster_hash(session, request));
    if (at && *at && !((const simba__redis_waiter *)*at)->contend) simba__redis_cluster_unwait_at(c->parent, at);
}

/* Node c's push connection subscribed (again): a grant published for one
   of our waiters there before this moment reached nobody, so each of them
   looks once (one POLL each; the core re-polls a handle woken while its
   op is in flight, and simba__redis_cluster_note wakes those answered
   later). */
static void simba__redis_cluster_subscribed(simba__redis *c) {
    struct simba__redis_cluster *cl = c->parent->cl;
    size_t b;
    simba__redis_link *l;
    if (c->node < 0 || cl->waiting[c->node] == 0) return;
    for (b = 0; b < cl->waiters.nb; b++)
        for (l = cl->waiters.b[b]; l; l = l->next)
            if (((const simba__redis_waiter *)l)->counted == c->node)
                simba_backend_changed(c->s, ((const simba__redis_waiter *)l)->name);
}

/* Whether master i's push connection is needed now. */
static int simba__redis_cluster_push_needed(simba__redis *p, int i, int64_t now) {
    const simba__redis *c = p->cl->node[i];
    if (p->cl->pinned || p->cl->waiting[i] > 0) return 1;
    if (c->push_used < 0) return 0;
    return p->cluster_idle_ms < 0 || now - c->push_used < p->cluster_idle_ms;
}

/* Every master's push connection opened or closed as needed now. */
static void simba__redis_cluster_idle(simba__redis *p) {
    struct simba__redis_cluster *cl = p->cl;
    int64_t now = simba__redis_now(p);
    int i;
    for (i = 0; i < cl->map.nnodes; i++) {
        simba__redis *c = cl->node[i];
        if (!c) continue;
        if (simba__redis_cluster_push_needed(p, i, now)) simba__redis_node_push(c, 1);
        else if (simba__redis_node_push_wanted(c)) simba__redis_node_push(c, 0);
    }
}

/* When the next push connection becomes idle (-1: none will). */
static int64_t simba__redis_cluster_idle_at(simba__redis *p) {
    struct simba__redis_cluster *cl = p->cl;
    int64_t at = -1;
    int i;
    if (p->cluster_idle_ms < 0 || cl->pinned) return -1;
    for (i = 0; i < cl->map.nnodes; i++) {
        const simba__redis *c = cl->node[i];
        int64_t t;
        if (!c || !simba__redis_node_push_wanted(c) || cl->waiting[i] > 0 || c->push_used < 0) continue;
        t = c->push_used + p->cluster_idle_ms;
        if (at < 0 || t < at) at = t;
    }
    return at;
}

/* The cluster is up when it has a map and every master's main connection
   is ready: session operations need all of them. */
static void simba__redis_cluster_state(simba__redis *p, int err, const char *msg) {
    struct simba__redis_cluster *cl = p->cl;
    int i, up = cl->have_map && cl->map.nnodes > 0 && !cl->stale;
    for (i = 0; up && i < cl->map.nnodes; i++)
        if (!cl->node[i] || !simba__redis_node_connected(cl->node[i])) up = 0;
    if (up) { simba__redis_report(p, 1, 0, NULL); return; }
    if (p->reported < 0 && !err) return;   /* still connecting to the masters: nothing failed yet */
    simba__redis_report(p, 0, err ? err : (p->reported_err ? p->reported_err : SIMBA_EDISCONNECTED),
                        msg ? msg : "Redis Cluster: not every master is connected");
}

static void simba__redis_cluster_ask_map(simba__redis *p);

/* A node's or the probe's connection state changed (report() of a child). */
static void simba__redis_cluster_child_state(simba__redis *c, int up, int err, const char *msg) {
    simba__redis *p = c->parent;
    if (!up) p->cl->want_refresh = 1;   /* a master gone may be a fail-over: look again */
    if (c == p->cl->probe) {
        if (up) simba__redis_cluster_ask_map(p);
        else if (!p->cl->have_map) simba__redis_report(p, 0, err, msg);
        return;
    }
    simba__redis_cluster_state(p, up ? 0 : err, up ? NULL : msg);
}

/* What a child reports comes here through its relay (the kit's
   simba_backend_relay): its connection state, and its pushes, of which a
   grant also ends the request's waiting; recheck and changed pass on. */
static void simba__redis_cluster_on_state(void *user, int up, int err, const char *msg) {
    simba__redis_cluster_child_state((simba__redis *)user, up, err, msg);
}
static void simba__redis_cluster_on_granted(void *user, const char *name, const char *session, const char *request,
                                            int64_t fence) {
    simba__redis *c = (simba__redis *)user;
    simba__redis_cluster_granted(c, session, request);
    simba_backend_granted(c->parent->s, name, session, request, fence);
}

static void simba__redis_cluster_on_complete(void *user, const simba_reply *rep);

/* The child's simba: a relay of the cluster's (SIMBA_ENOMEM without one). */
static int simba__redis_cluster_relay(simba__redis *c) {
    simba_backend_relay relay;
    memset(&relay, 0, sizeof relay);
    relay.user = c;
    relay.complete = simba__redis_cluster_on_complete;
    relay.state = simba__redis_cluster_on_state;
    relay.granted = simba__redis_cluster_on_granted;
    c->s = simba_backend_relay_open(c->parent->s, &relay);
    return c->s ? SIMBA_OK : SIMBA_ENOMEM;
}

/* Make node i of the new map point at a backend: the old one for the same
   address, else a new one. Its tenant tag follows the map. */
static int simba__redis_cluster_adopt(simba__redis *p, simba__redis **old, int nold, int i) {
    struct simba__redis_cluster *cl = p->cl;
    const simba__redis_cluster_node *n = &cl->map.node[i];
    simba__redis *c = NULL;
    int j;
    for (j = 0; j < nold; j++)
        if (old[j] && old[j]->port == n->port && strcmp(old[j]->host, n->host) == 0) {
            c = old[j];
            old[j] = NULL;
            break;
        }
    if (!c) {
        if (!(c = simba__redis_cluster_child(p, n->host, n->port))) return SIMBA_ENOMEM;
        /* A master that was not in the first map: a promoted replica or a
           master added to the cluster; its INFO replication tells them apart
           (simba__redis_node_on_replication) before it counts as ready. */
        if (cl->maps > 0) c->fresh = 1;
    }
    c->node = i;
    /* "T@k" (the tenant's epoch and admin keys, the shard channel) then "@m"
       (the node's epoch marker) */
    {
        char tag[sizeof c->node_tenant];
        int n = simba__redis_cluster_node_tag(&cl->map, i, simba_tenant(p->s), tag, sizeof tag);
        if (n < 0 || simba__redis_cluster_node_tag(&cl->map, i, "", tag + n, sizeof tag - (size_t)n) < 0) tag[0] = 0;
        simba__redis_node_set_tag(c, tag);
    }
    cl->node[i] = c;
    return SIMBA_OK;
}

/* Whether two maps name the same masters (in the same order) for every slot. */
static int simba__redis_cluster_same_map(const simba__redis_cluster_map *a, const simba__redis_cluster_map *b) {
    int i;
    if (a->nnodes != b->nnodes) return 0;
    for (i = 0; i < a->nnodes; i++)
        if (a->node[i].port != b->node[i].port || strcmp(a->node[i].host, b->node[i].host) != 0) return 0;
    return memcmp(a->owner, b->owner, sizeof a->owner) == 0;
}

/* A new map (in cl->next) replaces the old: node backends are kept by
   address, new masters get one, those no longer masters are destroyed
   (their ops end EDISCONNECTED and the core sends them again, routed by
   the new map). */
static void simba__redis_cluster_apply(simba__redis *p) {
    struct simba__redis_cluster *cl = p->cl;
    simba__redis *old[SIMBA__REDIS_CLUSTER_MAX_NODES];
    int nold = cl->have_map ? cl->map.nnodes : 0, i;
    if (cl->have_map && simba__redis_cluster_same_map(&cl->map, &cl->next)) {   /* (asked at every keepalive) */
        /* the map is as behind as the MOVED found it: stay down and ask again
           in SIMBA__REDIS_CLUSTER_REFRESH_MS, for a while, rather than go up
           and meet the same MOVED (a storm of events at two round trips each) */
        if (cl->stale && simba__redis_now(p) < cl->stale_until) return;
        cl->stale = 0;
        simba__redis_cluster_state(p, 0, NULL);
        return;
    }
    memcpy(old, cl->node, sizeof old);
    memset(cl->node, 0, sizeof cl->node);
    cl->map = cl->next;
    cl->have_map = 1;
    cl->stale = 0;
    for (i = 0; i < cl->map.nnodes; i++)
        if (simba__redis_cluster_adopt(p, old, nold, i) != SIMBA_OK) {
            cl->have_map = 0;
            cl->want_refresh = 1;
            simba_backend_log(p->s, SIMBA_LOG_ERROR, "simba_redis: Redis Cluster: out of memory for a node");
            break;
        }
    /* a master that leaves takes the admin epoch it answered with it: the
       holds are looked at again (a DELETE there may not have been seen) */
    for (i = 0; i < nold; i++)
        if (old[i]) {
            simba__redis_destroy(old[i]);
            cl->admin_gen++;
        }
    simba__redis_cluster_recount(cl);   /* (the idle pass opens the push connections waiters need) */
    cl->maps++;
    simba__redis_cluster_state(p, 0, NULL);
}

/* Whether map m names a master for every slot: 1, or 0 with why. A
   session is renewed only where its map sends the KEEPALIVE; a slot
   without a master in the map (a node that forgot a master, slots deleted
   on it) hides the master that judges the entries of that slot, which
   would see the session expire while its keepalives to the others
   succeeded. So such a map is never the one to renew by. */
static int simba__redis_cluster_whole(const simba__redis_cluster_map *m, char *why, size_t cap) {
    int i;
    for (i = 0; i < SIMBA__REDIS_CLUSTER_SLOTS; i++)
        if (m->owner[i] < 0) {
            snprintf(why, cap, "CLUSTER SLOTS: slot %d has no master (this node's view of the cluster "
                     "lacks one): another node is asked", i);
            return 0;
        }
    return 1;
}

static void simba__redis_cluster_on_slots(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    simba__redis *p;
    char why[200];
    if (!privdata) return;
    p = ((simba__redis_conn *)privdata)->r->parent;
    p->cl->refreshing = 0;
    if (!c) return;
    if (simba__redis_cluster_parse_slots(&p->cl->next, (redisReply *)reply, c->r->host, why, sizeof why) != SIMBA_OK ||
        p->cl->next.nnodes == 0 || !simba__redis_cluster_whole(&p->cl->next, why, sizeof why)) {
        /* not a cluster node, a broken answer, or a view with a master
           missing: another node, later (a map had is kept meanwhile) */
        if (p->cl->next.nnodes == 0) snprintf(why, sizeof why, "CLUSTER SLOTS names no master");
        simba_backend_log(p->s, SIMBA_LOG_WARN, "simba_redis: Redis Cluster: %s:%d: %s", c->r->host, c->r->port,
                          why);
        p->cl->want_refresh = 1;
        simba__redis_fail_conn(c, SIMBA_EPROTO, why, strlen(why));
        return;
    }
    simba__redis_cluster_apply(p);
}

/* Ask the probe for the slot map (one question at a time). */
static void simba__redis_cluster_ask_map(simba__redis *p) {
    struct simba__redis_cluster *cl = p->cl;
    simba__redis_conn *c = &cl->probe->conn[SIMBA__REDIS_MAIN];
    if (cl->refreshing || !c->ready || !c->ac) return;
    if (redisAsyncCommand(c->ac, simba__redis_cluster_on_slots, c, "CLUSTER SLOTS") != REDIS_OK) return;
    cl->refreshing = 1;
    cl->want_refresh = 0;
}

/* Where the probe connects next: the seeds, then the masters of the map, in turn. */
static void simba__redis_cluster_aim_probe(simba__redis *p) {
    struct simba__redis_cluster *cl = p->cl;
    int total = cl->nseeds + (cl->have_map ? cl->map.nnodes : 0), k = cl->next_probe++ % total;
    const simba__redis_cluster_node *n = k < cl->nseeds ? &cl->seeds[k] : &cl->map.node[k - cl->nseeds];
    char *h = simba_allocator_strdup(&p->alloc, n->host);
    if (!h) return;
    simba_allocator_free(&p->alloc, cl->probe->host);
    cl->probe->host = h;
    cl->probe->port = n->port;
}

/* Node c answered admin epoch `epoch` (0: none): the Cluster's own
   epoch moves when it differs from c's last one. A sum of the masters'
   epochs could stay the same while a DELETE raised one of them and a
   master left the map (its epoch left the sum) or a master's tag moved
   (its count restarted): a holder that learns of a DELETE by its admin
   epoch only would never be told. */
static void simba__redis_cluster_admin_seen(simba__redis *c, int64_t epoch) {
    if (!c || !epoch || epoch == c->admin_seen) return;
    c->admin_seen = epoch;
    c->parent->cl->admin_gen++;
}

/* One fan-out's part is in: the op is answered once all are, with the
   first failure (ESESSION before any other) or the Cluster's admin epoch,
   which moves whenever a master's does (simba__redis_cluster_admin_seen). */
static void simba__redis_cluster_fan_done(simba__redis *p, simba__redis *c, uint64_t id, const simba_reply *rep) {
    struct simba__redis_cluster *cl = p->cl;
    simba__redis_fanout *f = NULL;
    int i;
    for (i = 0; i < SIMBA__REDIS_CLUSTER_FANS; i++) if (cl->fan[i].used && cl->fan[i].id == id) f = &cl->fan[i];
    if (!f) return;
    if (rep->status != SIMBA_OK && (f->status == SIMBA_OK || rep->status == SIMBA_ESESSION)) {
        f->status = rep->status;
        simba__redis_copy(f->msg, sizeof f->msg, rep->message, rep->message ? strlen(rep->message) : 0);
    }
    if (rep->status == SIMBA_OK) simba__redis_cluster_admin_seen(c, rep->epoch);
    if (--f->left > 0) return;
    {
        simba_reply out;
        memset(&out, 0, sizeof out);
        out.id = f->id;
        out.status = f->status;
        out.message = f->msg[0] ? f->msg : NULL;
        out.recheck_ms = -1;
        out.epoch = f->status == SIMBA_OK ? cl->admin_gen : 0;
        f->used = 0;
        simba_backend_complete(p->s, &out);
    }
}

/* A node backend's answer (through its relay): a routed request's goes to
   the core, a session op's part to the fan-out it is part of. */
static int simba__redis_cluster_hold(simba__redis *p, uint64_t id, int fan, const simba_reply *rep);
static int simba__redis_cluster_redirected(simba__redis *p, simba__redis *c, const simba__redis_cluster_sent *t,
                                           const simba_reply *rep);

static void simba__redis_cluster_on_complete(void *user, const simba_reply *rep) {
    simba__redis *c = (simba__redis *)user, *p = c->parent;
    simba__redis_cluster_sent *t = simba__redis_cluster_sent_take(p->cl, rep->id);
    const char *wake = NULL;
    char name[SIMBA_MAX_NAME + 1];
    if (simba__redis_cluster_redirected(p, c, t, rep)) {
        simba_allocator_free(&p->alloc, t);
        return;
    }
    if (t && rep->status != SIMBA_EDISCONNECTED) p->cl->moved[t->slot] = p->cl->asked[t->slot] = 0;
    if (!t && rep->status != SIMBA_EDISCONNECTED) p->cl->asked_fan = 0;
    if (t && (wake = simba__redis_cluster_note(c, t, rep)) != NULL) {
        simba__redis_copy(name, sizeof name, wake, strlen(wake));
        wake = name;
    }
    simba_allocator_free(&p->alloc, t);
    if (p->cl->hold_until && simba__redis_cluster_hold(p, rep->id, !t, rep)) return;
    if (!t) simba__redis_cluster_fan_done(p, c, rep->id, rep);
    else simba_backend_complete(p->s, rep);
    /* after the answer: the core then re-polls a request that is waiting */
    if (wake) simba_backend_changed(p->s, wake);
}

/* OPEN/KEEPALIVE/CLOSE: to every master; none is sent unless all can be. */
static int simba__redis_cluster_fan_out(simba__redis *p, const simba_op *op) {
    struct simba__redis_cluster *cl = p->cl;
    simba__redis_fanout *f = NULL;
    int i;
    for (i = 0; i < cl->map.nnodes; i++)
        if (!cl->node[i] || !simba__redis_node_ready(cl->node[i]))
            return SIMBA_EDISCONNECTED;
    for (i = 0; i < SIMBA__REDIS_CLUSTER_FANS && !f; i++) if (!cl->fan[i].used) f = &cl->fan[i];
    if (!f) return SIMBA_EBUSY;
    /* a session's end ends its waiters (the core believes no grant of another session) */
    if (op->kind == SIMBA_OP_OPEN) simba__redis_cluster_unwait_session(p, op->session, 1);
    if (op->kind == SIMBA_OP_CLOSE) simba__redis_cluster_unwait_session(p, op->session, 0);
    /* every master that may judge the session's entries must be in the map
       its next keepalive goes by: the map is read again once a period */
    if (op->kind == SIMBA_OP_KEEPALIVE) cl->want_refresh = 1;
    memset(f, 0, sizeof *f);
    f->used = 1;
    f->id = op->id;
    for (i = 0; i < cl->map.nnodes; i++) {
        simba__redis *c = cl->node[i];
        if (simba__redis_submit(c, op) == SIMBA_OK) {
            f->left++;
        } else if (f->status == SIMBA_OK) {
            f->status = SIMBA_EDISCONNECTED;
        }
    }
    if (f->left == 0) f->deferred = 1;   /* answered in process(): never from submit */
    else if (f->status != SIMBA_OK) f->left++, f->deferred = 1;   /* (the failed part, in process) */
    return SIMBA_OK;
}

/* A request on resources: to the master of their one slot. */
static int simba__redis_cluster_route(simba__redis *p, const simba_op *op) {
    struct simba__redis_cluster *cl = p->cl;
    const char *names[SIMBA_MAX_RESOURCES];
    simba__redis_cluster_sent *t;
    simba__redis *c;
    int i, slot, owner;
    for (i = 0; i < op->nres; i++) names[i] = op->res[i].name;
    slot = simba__redis_cluster_op_slot(p->prefix, op->tenant, names, op->nres);
    if (slot < 0) {
        /* names in several slots: refused here, before anything is sent */
        simba__redis_fanout *f = NULL;
        for (i = 0; i < SIMBA__REDIS_CLUSTER_FANS && !f; i++) if (!cl->fan[i].used) f = &cl->fan[i];
        if (!f) return SIMBA_EBUSY;
        memset(f, 0, sizeof *f);
        f->used = f->deferred = f->left = 1;
        f->id = op->id;
        f->status = SIMBA_EUNSUPPORTED;
        snprintf(f->msg, sizeof f->msg, "Redis Cluster: the names of one request must share a hash slot (give "
                 "them one {tag}, e.g. {order-42}:a and {order-42}:b)");
        return SIMBA_OK;
    }
    owner = cl->map.owner[slot];
    if (owner < 0 || !(c = cl->node[owner]) || !simba__redis_node_ready(c)) {
        cl->want_refresh = 1;
        return SIMBA_EDISCONNECTED;
    }
    if (!(t = simba__redis_cluster_sent_new(p, op, slot))) return SIMBA_ENOMEM;
    if (simba__redis_submit(c, op) != SIMBA_OK) {
        simba_allocator_free(&p->alloc, t);
        return SIMBA_EDISCONNECTED;
    }
    /* (start puts the new request first) */
    t->push_gen = simba__redis_node_push_mark(c);
    simba__redis_table_add(&cl->sent, &t->link);
    c->push_used = simba__redis_now(p);
    if (op->kind == SIMBA_OP_RELEASE) simba__redis_cluster_unwait(p, op->session, op->request);
    simba__redis_node_push(c, 1);
    return SIMBA_OK;
}

static int simba__redis_cluster_submit(simba__redis *p, const simba_op *op) {
    if (!p->cl->have_map) return SIMBA_EDISCONNECTED;
    if (!simba__redis_has_res(op->kind)) return simba__redis_cluster_fan_out(p, op);
    return simba__redis_cluster_route(p, op);
}

/* Keeps the answer under way (rep, of op id) until cl->hold_until: 0 when
   it cannot (out of memory: it is given now, only without the pause). */
static int simba__redis_cluster_hold(simba__redis *p, uint64_t id, int fan, const simba_reply *rep) {
    struct simba__redis_cluster *cl = p->cl;
    simba__redis_cluster_later *l = (simba__redis_cluster_later *)simba_allocator_alloc(&p->alloc, sizeof *l), **at;
    if (!l) return 0;
    memset(l, 0, sizeof *l);
    l->id = id;
    l->fan = fan;
    l->due = cl->hold_until;
    simba__redis_copy(l->msg, sizeof l->msg, rep->message, rep->message ? strlen(rep->message) : 0);
    for (at = &cl->later; *at; at = &(*at)->next) {}
    *at = l;
    return 1;
}

/* The answers held back whose pause is over, in the order they were held. */
static void simba__redis_cluster_give_later(simba__redis *p) {
    struct simba__redis_cluster *cl = p->cl;
    int64_t now = simba__redis_now(p);
    simba__redis_cluster_later **at = &cl->later;
    while (*at) {
        simba__redis_cluster_later *l = *at;
        simba_reply rep;
        if (l->due > now) { at = &l->next; continue; }
        *at = l->next;
        memset(&rep, 0, sizeof rep);
        rep.id = l->id;
        rep.status = SIMBA_EDISCONNECTED;
        rep.message = l->msg[0] ? l->msg : NULL;
        rep.recheck_ms = -1;
        if (l->fan) simba__redis_cluster_fan_done(p, NULL, l->id, &rep);
        else simba_backend_complete(p->s, &rep);
        simba_allocator_free(&p->alloc, l);
        at = &cl->later;   /* a completion may have held another answer back */
    }
}

static int64_t simba__redis_cluster_later_at(const simba__redis *p) {
    const simba__redis_cluster_later *l;
    int64_t at = -1;
    for (l = p->cl->later; l; l = l->next) if (at < 0 || l->due < at) at = l->due;
    return at;
}

/* An answer of the cluster's (to the core, or the fan-out's part), held
   back until cl->hold_until when a pause is under way. */
static void simba__redis_cluster_give(simba__redis *p, uint64_t id, int fan, int status, const char *msg) {
    simba_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.id = id;
    rep.status = status;
    rep.message = msg;
    rep.recheck_ms = -1;
    if (p->cl->hold_until && simba__redis_cluster_hold(p, id, fan, &rep)) return;
    if (fan) simba__redis_cluster_fan_done(p, NULL, id, &rep);
    else simba_backend_complete(p->s, &rep);
}

/* Op `id` (on `slot`, -1 for a session op) on node c met a slot on the
   move (see "answers held back" above), the n-th time in a row: answered
   EDISCONNECTED after the pause, the map asked again. */
static void simba__redis_cluster_park(simba__redis *p, simba__redis *c, uint64_t id, int slot, const char *why, int n) {
    struct simba__redis_cluster *cl = p->cl;
    if (n == 1)
        simba_backend_log(p->s, SIMBA_LOG_INFO, "simba_redis: Redis Cluster: %s:%d: %.100s: slot %d is on the move; "
                          "its ops are sent again until it has settled", c->host, c->port, why, slot);
    cl->want_refresh = 1;
    cl->hold_until = simba__redis_now(p) + simba__redis_cluster_pause_ms(n);
    simba__redis_cluster_give(p, id, slot < 0, SIMBA_EDISCONNECTED, why);
    cl->hold_until = 0;
}

/* The ASK/TRYAGAIN/"non local key" answers in a row of a slot (-1: of the session ops), this one counted. */
static int simba__redis_cluster_asked(struct simba__redis_cluster *cl, int slot) {
    unsigned char *n = slot >= 0 ? &cl->asked[slot] : &cl->asked_fan;
    if (*n < 255) (*n)++;
    return *n;
}

/* A node answered MOVED, ASK, TRYAGAIN or "non local key" (a node backend
   answers them EDISCONNECTED with the server's words, for the cluster to
   route): the map is behind, or a slot is on the move. MOVED names the
   slot's master: routed there, the map asked again, the op answered
   EDISCONNECTED (the core sends it again): at once the first time, after
   a pause from the second MOVED in a row for the slot on (the masters
   disagree for the moment a migration's end takes to reach them all: the
   source already names the target, the target not yet itself). More than
   SIMBA__REDIS_CLUSTER_MAX_MOVED in a row (about 3 s of pauses) is a loop
   between disagreeing nodes: SIMBA_EBACKEND, except for a RELEASE, which
   goes on (given up, it would leave the entry held until the session
   ends). ASK and TRYAGAIN (a slot being migrated) and "non local key" (a
   key of the script's in a slot that moved or is moving: our node tag is
   behind the map) are answered the same way after a pause
   (simba__redis_cluster_park). ASK is never followed with ASKING: the
   script names only the resource's base key, which never exists, so a
   migrating source answers ASK while the queue may still be there, and
   the target would run on half-moved keys (a double grant); an op on a
   slot on the move waits until the migration ends and MOVED points at
   the new master. A script stopped by "non local key" may have written
   part of its work: each op is safe to run again (a RELEASE whose entry
   is gone still grants the next waiter). `t`: the routed request (NULL: a
   session op's part). Returns 1 when the answer was one of these. */
static int simba__redis_cluster_redirected(simba__redis *p, simba__redis *c, const simba__redis_cluster_sent *t,
                                           const simba_reply *rep) {
    struct simba__redis_cluster *cl = p->cl;
    const char *msg = rep->message;
    simba__redis_cluster_node to;
    int ask, slot, i, at = t ? t->slot : -1;
    char why[200];
    if (rep->status != SIMBA_EDISCONNECTED || !msg) return 0;
    if (!simba__redis_cluster_redirect(msg, strlen(msg), &ask, &slot, &to)) {
        if (!strstr(msg, "non local key") && strncmp(msg, "TRYAGAIN", 8) != 0) return 0;
        simba__redis_cluster_park(p, c, rep->id, at, msg, simba__redis_cluster_asked(cl, at));
        return 1;
    }
    cl->want_refresh = 1;
    if (ask) {
        simba__redis_cluster_park(p, c, rep->id, at, msg, simba__redis_cluster_asked(cl, at));
        return 1;
    }
    for (i = 0; i < cl->map.nnodes; i++)
        if (cl->map.node[i].port == to.port && strcmp(cl->map.node[i].host, to.host) == 0) break;
    if (i == cl->map.nnodes) {
        /* a master the map does not know (a replica just promoted): the map
           is behind; nothing is sent until the next one (no retry storm) */
        if (!cl->stale) cl->stale_until = simba__redis_now(p) + SIMBA__REDIS_CLUSTER_STALE_MS;
        cl->stale = 1;
        simba__redis_cluster_give(p, rep->id, !t, SIMBA_EDISCONNECTED, msg);
        simba__redis_cluster_state(p, SIMBA_EDISCONNECTED, "Redis Cluster: a MOVED to a master not in the map");
        return 1;
    }
    if (cl->moved[slot] < 255) cl->moved[slot]++;
    if (cl->moved[slot] > SIMBA__REDIS_CLUSTER_MAX_MOVED && (!t || t->kind != SIMBA_OP_RELEASE)) {
        cl->moved[slot] = 0;
        snprintf(why, sizeof why, "Redis Cluster: more than %d MOVED in a row for slot %d (last to %s:%d): the "
                 "nodes disagree about its master", (int)SIMBA__REDIS_CLUSTER_MAX_MOVED, slot, to.host, to.port);
        simba_backend_log(p->s, SIMBA_LOG_ERROR, "simba_redis: %s", why);
        simba__redis_cluster_give(p, rep->id, !t, SIMBA_EBACKEND, why);
        return 1;
    }
    cl->map.owner[slot] = (short)i;
    simba__redis_cluster_recount(cl);
    if (cl->moved[slot] > 1) simba__redis_cluster_park(p, c, rep->id, at, msg, cl->moved[slot] - 1);
    else simba__redis_cluster_give(p, rep->id, !t, SIMBA_EDISCONNECTED, msg);
    return 1;
}

/* The cluster's vtable work: every child in turn. */
static int simba__redis_cluster_pollfds(simba__redis *p, struct pollfd *fds, int max) {
    struct simba__redis_cluster *cl = p->cl;
    int i, n = simba__redis_pollfds(cl->probe, fds, max);
    for (i = 0; i < cl->map.nnodes; i++)
        if (cl->node[i]) n += simba__redis_pollfds(cl->node[i], fds + (n < max ? n : max), n < max ? max - n : 0);
    return n;
}

static int64_t simba__redis_cluster_deadline(simba__redis *p) {
    struct simba__redis_cluster *cl = p->cl;
    int64_t at = simba__redis_deadline(cl->probe);
    int i;
    for (i = 0; i < SIMBA__REDIS_CLUSTER_FANS; i++) if (cl->fan[i].used && cl->fan[i].deferred) return simba__redis_now(p);
    if (p->reported != 1 && cl->have_map) at = at < 0 || cl->next_refresh < at ? cl->next_refresh : at;
    if (cl->want_refresh && cl->probe->conn[SIMBA__REDIS_MAIN].ready && !cl->refreshing) return simba__redis_now(p);
    {
        int64_t idle = simba__redis_cluster_idle_at(p), later = simba__redis_cluster_later_at(p);
        if (idle >= 0 && (at < 0 || idle < at)) at = idle;
        if (later >= 0 && (at < 0 || later < at)) at = later;
    }
    for (i = 0; i < cl->map.nnodes; i++) {
        int64_t t = cl->node[i] ? simba__redis_deadline(cl->node[i]) : -1;
        if (t >= 0 && (at < 0 || t < at)) at = t;
    }
    return at;
}

static void simba__redis_cluster_process(simba__redis *p, const struct pollfd *fds, int nfds) {
    struct simba__redis_cluster *cl = p->cl;
    int i;
    if (!cl->probe->conn[SIMBA__REDIS_MAIN].ac && cl->probe->conn[SIMBA__REDIS_MAIN].retry_at >= 0 &&
        simba__redis_now(p) >= cl->probe->conn[SIMBA__REDIS_MAIN].retry_at)
        simba__redis_cluster_aim_probe(p);
    simba__redis_process(cl->probe, fds, nfds);
    for (i = 0; i < cl->map.nnodes; i++) if (cl->node[i]) simba__redis_process(cl->node[i], fds, nfds);
    /* a master that stays unreachable is a fail-over under way: the map is
       asked again every SIMBA__REDIS_CLUSTER_REFRESH_MS until it names a
       master that answers */
    if (p->reported != 1 && cl->have_map && simba__redis_now(p) >= cl->next_refresh) {
        cl->want_refresh = 1;
        cl->next_refresh = simba__redis_now(p) + SIMBA__REDIS_CLUSTER_REFRESH_MS;
    }
    if (cl->want_refresh) simba__redis_cluster_ask_map(p);
    simba__redis_cluster_give_later(p);
    simba__redis_cluster_idle(p);
    for (i = 0; i < SIMBA__REDIS_CLUSTER_FANS; i++)
        if (cl->fan[i].used && cl->fan[i].deferred) {
            simba_reply rep;
            cl->fan[i].deferred = 0;
            memset(&rep, 0, sizeof rep);
            rep.status = cl->fan[i].status;
            rep.message = cl->fan[i].msg[0] ? cl->fan[i].msg : NULL;
            simba__redis_cluster_fan_done(p, NULL, cl->fan[i].id, &rep);
        }
}

static void simba__redis_cluster_reset(simba__redis *p, int why) {
    struct simba__redis_cluster *cl = p->cl;
    int i;
    simba__redis_reset(cl->probe, why);
    for (i = 0; i < cl->map.nnodes; i++) if (cl->node[i]) simba__redis_reset(cl->node[i], why);
}

/* Frees the children and the cluster state (destroy of the cluster's backend). */
static void simba__redis_cluster_free(simba__redis *p) {
    struct simba__redis_cluster *cl = p->cl;
    int i;
    if (!cl) return;
    for (i = 0; i < SIMBA__REDIS_CLUSTER_MAX_NODES; i++) if (cl->node[i]) simba__redis_destroy(cl->node[i]);
    if (cl->probe) simba__redis_destroy(cl->probe);
    simba__redis_table_free(&p->alloc, &cl->waiters);
    simba__redis_table_free(&p->alloc, &cl->sent);
    while (cl->later) {
        simba__redis_cluster_later *l = cl->later;
        cl->later = l->next;
        simba_allocator_free(&p->alloc, l);
    }
    simba_allocator_free(&p->alloc, cl);
    p->cl = NULL;
}

/*>>session: every operation is one script call; OPEN, KEEPALIVE, CLOSE */
/* What every operation shares (the arguments of its EVALSHA, the send, the
   errors any answer may be) comes first; then the session operations'
   answer. Their server side is the script's 'open'/'keepalive'/'close'. */

static const char *simba__redis_op_name(int kind) {
    switch (kind) {
    case SIMBA_OP_OPEN: return "open";
    case SIMBA_OP_KEEPALIVE: return "keepalive";
    case SIMBA_OP_CLOSE: return "close";
    case SIMBA_OP_ENQUEUE: return "enqueue";
    case SIMBA_OP_POLL: return "poll";
    case SIMBA_OP_RELEASE: return "release";
    case SIMBA_OP_INSPECT: return "inspect";
    case SIMBA_OP_SET_CAPACITY: return "capacity";
    case SIMBA_OP_DELETE: return "delete";
    default: return NULL;
    }
}

/* Does this kind of op name resources? */
static int simba__redis_has_res(int kind) {
    return kind != SIMBA_OP_OPEN && kind != SIMBA_OP_KEEPALIVE && kind != SIMBA_OP_CLOSE;
}

/* The bytes of one argument: appended to the request's buffer (if buf). */
typedef struct simba__redis_args {
    simba__redis_req *q;        /* NULL while measuring */
    char *buf;
    size_t used;
} simba__redis_args;

static void simba__redis_arg(simba__redis_args *a, const char *s, size_t n) {
    if (a->q) {
        memcpy(a->buf + a->used, s, n);
        a->buf[a->used + n] = 0;
        a->q->argv[a->q->argc] = a->buf + a->used;
        a->q->argvlen[a->q->argc] = n;
        a->q->argc++;
    }
    a->used += n + 1;
}

static void simba__redis_arg_str(simba__redis_args *a, const char *s) {
    simba__redis_arg(a, s ? s : "", s ? strlen(s) : 0);
}

static void simba__redis_arg_num(simba__redis_args *a, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", v);
    simba__redis_arg(a, tmp, (size_t)n);
}

static void simba__redis_arg_key(simba__redis_args *a, simba__redis *r, const char *tenant, const char *name) {
    size_t n = simba__redis_key(NULL, r->prefix, tenant, name);
    if (a->q) {
        simba__redis_key(a->buf + a->used, r->prefix, tenant, name);
        a->buf[a->used + n] = 0;
        a->q->argv[a->q->argc] = a->buf + a->used;
        a->q->argvlen[a->q->argc] = n;
        a->q->argc++;
    }
    a->used += n + 1;
}

/* The GEN an op carries (the script's ARGV[10]): the main connections made
   ready so far, of this server or, on a cluster, of all its masters
   together. An entry keeps the GEN of the op that made it, and the script
   keeps an entry made with a greater GEN than a RELEASE's (made by a newer
   connection than the one the RELEASE was sent on). An entry moves with its
   slot to another master: counted per master, a RELEASE sent there after
   the ENQUEUE could carry less than it and leave the entry for good; the
   cluster's one count never goes back, so an op sent after another never
   carries less, and an op sent again after a reconnect carries more than
   every op sent before it. */
static unsigned long simba__redis_op_gen(const simba__redis *r) {
    return r->shared_gen ? *r->shared_gen : r->gen;
}

/* EVALSHA sha numkeys KEYS... ARGV... (argv[0..1] are set when sending). */
static void simba__redis_build_args(simba__redis_args *a, simba__redis *r, const simba_op *op) {
    int i, nres = simba__redis_has_res(op->kind) ? op->nres : 0;
    simba__redis_arg_str(a, "EVALSHA");
    simba__redis_arg_str(a, "");
    simba__redis_arg_num(a, nres);
    for (i = 0; i < nres; i++) simba__redis_arg_key(a, r, op->tenant, op->res[i].name);
    simba__redis_arg_str(a, simba__redis_op_name(op->kind));
    simba__redis_arg_str(a, r->prefix);
    simba__redis_arg_str(a, r->node_tenant[0] ? r->node_tenant : op->tenant);
    simba__redis_arg_str(a, op->session);
    simba__redis_arg_str(a, op->request);
    simba__redis_arg_num(a, op->lease_ms);
    simba__redis_arg_str(a, r->run);
    /* "c": a contend handle (never try_only): the script lists it for owner-change pushes */
    simba__redis_arg_str(a, op->try_only ? "1" : op->watch_owner ? "c" : "0");
    simba__redis_arg_str(a, r->wait_replicas > 0 ? "1" : "0");
    simba__redis_arg_num(a, (long long)simba__redis_op_gen(r));
    for (i = 0; i < nres; i++) {
        simba__redis_arg_str(a, op->res[i].name);
        simba__redis_arg_num(a, op->res[i].capacity);
        simba__redis_arg_num(a, op->res[i].weight);
    }
}

static void simba__redis_on_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* (Re)send a request's command: EVALSHA while we know the SHA, else EVAL. */
static int simba__redis_send(simba__redis *r, simba__redis_req *q) {
    redisAsyncContext *ac = r->conn[SIMBA__REDIS_MAIN].ac;
    if (!ac) return SIMBA_EDISCONNECTED;
    if (r->sha[0] && !q->evaled) {
        q->argv[0] = "EVALSHA"; q->argvlen[0] = 7;
        q->argv[1] = r->sha; q->argvlen[1] = 40;
    } else {
        q->argv[0] = "EVAL"; q->argvlen[0] = 4;
        q->argv[1] = r->script; q->argvlen[1] = r->script_len;
    }
    if (redisAsyncCommandArgv(ac, simba__redis_on_reply, q, q->argc, q->argv, q->argvlen) != REDIS_OK)
        return SIMBA_EDISCONNECTED;
    r->stats.scripts_sent++;
    return SIMBA_OK;
}

/* The session op a cluster's node sends: a KEEPALIVE is an OPEN on a
   master added since the session was opened, which has no copy of it yet
   (`join`, see simba__redis_node_on_replication), unless its run_id changed
   since: that run may lack the session's writes (the KEEPALIVE ends the
   session). */
static const simba_op *simba__redis_node_session_op(const simba__redis *r, const simba_op *op, simba_op *joined) {
    if (op->kind != SIMBA_OP_KEEPALIVE || !r->join || r->runs != r->session_runs) return op;
    *joined = *op;
    joined->kind = SIMBA_OP_OPEN;
    return joined;
}

/* The session (ARGV[4]) and request id (ARGV[5]) a request was built with:
   argv is EVALSHA, sha, numkeys, the keys, then the ARGV of build_args. */
static int simba__redis_req_is(const simba__redis_req *q, const char *session, const char *request) {
    int at = 3 + q->nres + 3;
    if (at + 1 >= q->argc) return 0;
    return strlen(session) == q->argvlen[at] && memcmp(q->argv[at], session, q->argvlen[at]) == 0 &&
           strlen(request) == q->argvlen[at + 1] && memcmp(q->argv[at + 1], request, q->argvlen[at + 1]) == 0;
}

/* A RELEASE makes the ENQUEUEs of its request still in flight stale (the
   core ignores their answers). One of them must not run again after the
   RELEASE: answers on a connection come in the order sent, so an ENQUEUE
   that meets NOSCRIPT is answered before the RELEASE, which then may have
   run already; sent again as EVAL it would make an entry nobody releases
   while the session lives. Such an ENQUEUE is marked here and answered with
   an error instead of being sent again. A keyed request (k~<key>) reuses
   its id across handles, but the core sends the next handle's ENQUEUE only
   after the RELEASE is answered, so only ENQUEUEs sent before it are marked. */
static void simba__redis_withdraw_enqueues(simba__redis *r, const simba_op *op) {
    simba__redis_req *q;
    if (op->kind != SIMBA_OP_RELEASE || !op->session || !op->request) return;
    for (q = r->reqs; q; q = q->next)
        if (q->kind == SIMBA_OP_ENQUEUE && !q->done && simba__redis_req_is(q, op->session, op->request))
            q->withdrawn = 1;
}

/* An operation from the core: built into one request (one allocation: the
   struct and its argument bytes), sent, and kept until its answer. */
static int simba__redis_start(simba__redis *r, const simba_op *op) {
    simba__redis_args a;
    simba__redis_req *q;
    simba_op joined;
    op = simba__redis_node_session_op(r, op, &joined);
    /* the core validated op (names, tenant, ids, kind): it is trusted here */
    if (!r->conn[SIMBA__REDIS_MAIN].ready || !r->conn[SIMBA__REDIS_MAIN].ac) return SIMBA_EDISCONNECTED;
    simba__redis_withdraw_enqueues(r, op);
    simba__redis_check_replid(r, op);
    memset(&a, 0, sizeof a);
    simba__redis_build_args(&a, r, op);                      /* measure */
    q = (simba__redis_req *)simba_allocator_alloc(&r->alloc, sizeof *q + a.used);
    if (!q) return SIMBA_ENOMEM;
    q->r = r;
    q->id = op->id;
    q->kind = op->kind;
    q->nres = simba__redis_has_res(op->kind) ? op->nres : 0;
    a.q = q;
    a.buf = (char *)(q + 1);
    a.used = 0;
    simba__redis_build_args(&a, r, op);                      /* fill */
    if (simba__redis_send(r, q) != SIMBA_OK) {
        simba_allocator_free(&r->alloc, q);
        return SIMBA_EDISCONNECTED;
    }
    q->next = r->reqs;
    if (r->reqs) r->reqs->prev = q;
    r->reqs = q;
    r->stats.ops_sent++;
    return SIMBA_OK;
}

static int simba__redis_int(const redisReply *e, long long lo, long long hi, long long *out) {
    if (!e || e->type != REDIS_REPLY_INTEGER || e->integer < lo || e->integer > hi) return 0;
    *out = e->integer;
    return 1;
}

static int simba__redis_status_code(long long st) {
    switch (st) {
    case SIMBA__REDIS_ST_OK: return SIMBA_OK;
    case SIMBA__REDIS_ST_SESSION: return SIMBA_ESESSION;
    case SIMBA__REDIS_ST_NOTFOUND: return SIMBA_ENOTFOUND;
    case SIMBA__REDIS_ST_CAPACITY: return SIMBA_ECAPACITY;
    case SIMBA__REDIS_ST_KEYBUSY: return SIMBA_EKEYBUSY;
    default: return SIMBA_EPROTO;
    }
}

/* A transient error (see simba__redis_transient): the op is answered
   EDISCONNECTED (the core sends it again after the reconnect) and the
   connection is dropped once hiredis's read returns. */
static void simba__redis_retry_later(simba__redis *r, simba__redis_req *q, const redisReply *rp) {
    simba__redis_conn *c = &r->conn[SIMBA__REDIS_MAIN];
    r->stats.transient_errors++;
    if (c->ac) simba__redis_fail_conn(c, SIMBA_EDISCONNECTED, rp->str, rp->len);
    simba__redis_complete_status(r, q, SIMBA_EDISCONNECTED, rp->str);
}

/* A restart grace (no grants of the tenant until `end`, server ms; `left` ms
   from now) is said once per grace at WARN: without it, a first acquire on a
   fresh or restarted server waits a lease and a try-lock times out with no
   word why. */
static void simba__redis_grace_log(simba__redis *r, long long end, long long left) {
    long long day;
    if (end <= 0 || left <= 0 || end == r->grace_logged) return;
    r->grace_logged = end;
    day = end % 86400000LL;
    simba_backend_log(r->s, SIMBA_LOG_WARN,
                      "simba_redis: restart grace of tenant '%s': no lock is granted until %02d:%02d:%02d.%03d UTC "
                      "(server clock, %lld ms from now): the server has no epoch for it (fresh server, restart, "
                      "failover or FLUSHALL), so a holder it forgot may still run; docs/redis.md says how to "
                      "skip it on a fresh server (simba_redis_init_server)",
                      simba_tenant(r->s), (int)(day / 3600000), (int)(day / 60000 % 60), (int)(day / 1000 % 60),
                      (int)(day % 1000), left);
}

/* OPEN, KEEPALIVE: {0, admin epoch} or, when OPEN finds a restart grace
   running, {0, admin epoch, grace end (server ms), ms left of it}. CLOSE
   answers {0} only. */
static int simba__redis_parse_session(simba__redis *r, int kind, const redisReply *rp, simba_reply *rep) {
    long long epoch, gend = 0, gleft = 0;
    if ((rp->elements != 2 && rp->elements != 4) || !simba__redis_int(rp->element[1], 1, LLONG_MAX, &epoch) ||
        (rp->elements == 4 && (!simba__redis_int(rp->element[2], 0, LLONG_MAX, &gend) ||
                               !simba__redis_int(rp->element[3], 0, LLONG_MAX, &gleft))))
        return SIMBA_EPROTO;
    rep->epoch = (int64_t)epoch;
    /* Another server run (a fail-over, a restart) than the one the session
       was opened on may lack its last writes: a grant (a holder would keep
       believing), a release (its entry would hold the lock for ever). The
       session ends there (ESESSION: holders LOST, the core CLOSEs it, which
       removes its entries, and opens a new one), inside the restart grace. */
    if (kind == SIMBA_OP_OPEN) r->session_runs = r->runs;
    else if (r->runs != r->session_runs) {
        rep->status = SIMBA_ESESSION;
        rep->message = "the server changed (fail-over or restart): the session's last writes may be missing there";
    }
    simba__redis_grace_log(r, gend, gleft);
    return SIMBA_OK;
}

/*>>locks: ENQUEUE, POLL, RELEASE, INSPECT, SET_CAPACITY, DELETE: answers, WAIT */
/* The grant rule and the fences live in the script (server side) only;
   here the answers are checked for shape and handed to the core.
   RELEASE, SET_CAPACITY and DELETE answer {0}. */

/* {0, granted, ahead, held, recheck_ms, owner, fence...} into rep. */
static int simba__redis_parse_state(simba__redis_req *q, const redisReply *rp, simba_reply *rep,
                                    long long *grace_end, long long *grace_left) {
    long long v;
    int i;
    if (rp->elements != (size_t)(6 + q->nres + 3)) return SIMBA_EPROTO;
    if (!simba__redis_int(rp->element[1], 0, 1, &v)) return SIMBA_EPROTO;
    rep->granted = (int)v;
    if (!simba__redis_int(rp->element[2], 0, INT_MAX, &v)) return SIMBA_EPROTO;
    rep->ahead = (int)v;
    if (!simba__redis_int(rp->element[3], 0, INT_MAX, &v)) return SIMBA_EPROTO;
    rep->held = (int)v;
    if (!simba__redis_int(rp->element[4], -1, LLONG_MAX, &v)) return SIMBA_EPROTO;
    rep->recheck_ms = v > INT_MAX ? INT_MAX : (int)v;
    if (rp->element[5]->type != REDIS_REPLY_STRING || rp->element[5]->len > SIMBA_MAX_SESSION) return SIMBA_EPROTO;
    simba__redis_copy(q->owner, sizeof q->owner, rp->element[5]->str, rp->element[5]->len);
    rep->owner = q->owner[0] ? q->owner : NULL;
    for (i = 0; i < q->nres; i++) {
        if (!simba__redis_int(rp->element[6 + i], 0, LLONG_MAX, &v)) return SIMBA_EPROTO;
        rep->fence[i] = (int64_t)v;
        if (rep->granted && v == 0) return SIMBA_EPROTO;   /* granted means granted everywhere */
    }
    /* the stored capacity of res[0] (0: no resource), the restart grace */
    if (!simba__redis_int(rp->element[6 + q->nres], 0, INT_MAX, &v)) return SIMBA_EPROTO;
    rep->capacity = (int)v;
    if (!simba__redis_int(rp->element[7 + q->nres], 0, LLONG_MAX, &v)) return SIMBA_EPROTO;
    *grace_end = v;
    if (!simba__redis_int(rp->element[8 + q->nres], 0, LLONG_MAX, &v)) return SIMBA_EPROTO;
    *grace_left = v;
    return SIMBA_OK;
}

/* {0, capacity, held, owner, n, grace left, (session, fence, weight,
   granted, expires in, renewed ago, held for) x n}. The holders array is
   ours until the completion returns. */
static int simba__redis_parse_inspect(simba__redis *r, simba__redis_req *q, const redisReply *rp,
                                      simba_reply *rep, simba_holder **out) {
    long long v, n;
    size_t i;
    simba_holder *hs = NULL;
    if (rp->elements < 6) return SIMBA_EPROTO;
    if (!simba__redis_int(rp->element[1], 0, INT_MAX, &v)) return SIMBA_EPROTO;
    rep->capacity = (int)v;
    if (!simba__redis_int(rp->element[2], 0, INT_MAX, &v)) return SIMBA_EPROTO;
    rep->held = (int)v;
    if (rp->element[3]->type != REDIS_REPLY_STRING || rp->element[3]->len > SIMBA_MAX_SESSION) return SIMBA_EPROTO;
    simba__redis_copy(q->owner, sizeof q->owner, rp->element[3]->str, rp->element[3]->len);
    rep->owner = q->owner[0] ? q->owner : NULL;
    if (!simba__redis_int(rp->element[4], 0, INT_MAX / 8, &n)) return SIMBA_EPROTO;
    if (!simba__redis_int(rp->element[5], 0, LLONG_MAX, &v)) return SIMBA_EPROTO;
    rep->grace_ms = v > 0x3fffffff ? 0x3fffffff : (int)v;
    if (rp->elements != (size_t)(6 + 7 * n)) return SIMBA_EPROTO;
    if (n > 0) {
        hs = (simba_holder *)simba_allocator_alloc(&r->alloc, sizeof(simba_holder) * (size_t)n);
        if (!hs) return SIMBA_ENOMEM;
    }
    *out = hs;
    for (i = 0; i < (size_t)n; i++) {
        const redisReply *const *e = (const redisReply *const *)rp->element + 6 + 7 * i;
        const char *tilde;
        size_t cl;
        if (e[0]->type != REDIS_REPLY_STRING || e[0]->len == 0 || e[0]->len > SIMBA_MAX_SESSION) return SIMBA_EPROTO;
        simba__redis_copy(hs[i].session, sizeof hs[i].session, e[0]->str, e[0]->len);
        if (strlen(hs[i].session) != e[0]->len) return SIMBA_EPROTO;
        tilde = strrchr(hs[i].session, '~');
        cl = tilde ? (size_t)(tilde - hs[i].session) : e[0]->len;
        if (cl > SIMBA_MAX_ID) return SIMBA_EPROTO;
        simba__redis_copy(hs[i].client, sizeof hs[i].client, hs[i].session, cl);
        if (!simba__redis_int(e[1], 0, LLONG_MAX, &v)) return SIMBA_EPROTO;
        hs[i].fence = (int64_t)v;
        if (!simba__redis_int(e[2], 0, INT_MAX, &v)) return SIMBA_EPROTO;
        hs[i].weight = (int)v;
        if (!simba__redis_int(e[3], 0, 1, &v)) return SIMBA_EPROTO;
        hs[i].granted = (int)v;
        if (!simba__redis_int(e[4], -1, LLONG_MAX, &v)) return SIMBA_EPROTO;
        hs[i].expires_in_ms = (int64_t)v;
        if (!simba__redis_int(e[5], -1, LLONG_MAX, &v)) return SIMBA_EPROTO;
        hs[i].renewed_ago_ms = (int64_t)v;
        if (!simba__redis_int(e[6], -1, LLONG_MAX, &v)) return SIMBA_EPROTO;
        hs[i].held_ms = (int64_t)v;
    }
    rep->entry_times = 1;
    rep->nentries = (int)n;
    rep->entries = hs;
    return SIMBA_OK;
}

/* The WAIT stage: the grant is reported only when enough replicas have it. */
static void simba__redis_on_wait(simba__redis *r, simba__redis_req *q, const redisReply *rp) {
    char msg[96];
    if (rp->type == REDIS_REPLY_INTEGER && rp->integer >= r->wait_replicas) {
        simba__redis_complete(r, q, &q->saved);
        return;
    }
    if (rp->type == REDIS_REPLY_ERROR && simba__redis_transient(rp->str)) {
        simba__redis_retry_later(r, q, rp);
        return;
    }
    if (rp->type == REDIS_REPLY_ERROR) {
        simba__redis_complete_status(r, q, simba__redis_error_code(rp->str), rp->str);
        return;
    }
    /* not confirmed yet: ETIMEDOUT makes the core ask again (same request) */
    snprintf(msg, sizeof msg, "WAIT: %lld of %d replicas acknowledged the grant",
             rp->type == REDIS_REPLY_INTEGER ? rp->integer : -1LL, r->wait_replicas);
    simba_backend_log(r->s, SIMBA_LOG_WARN, "simba_redis: %s", msg);
    simba__redis_complete_status(r, q, SIMBA_ETIMEDOUT, msg);
}

/* A cluster's node backend (the option cluster_node): MOVED, ASK, TRYAGAIN
   and "non local key" are answered EDISCONNECTED with the server's words,
   for the cluster to route (simba__redis_cluster_redirected); CLUSTERDOWN
   and READONLY (a master turned replica: a fail-over) are "not now" on this
   node: the connection is made again, and its drop makes the cluster read
   the map again. A script without keys (OPEN, KEEPALIVE, CLOSE) runs while
   the cluster is down and meets it at its first key: "ERR Script attempted
   to execute a command while the cluster is down", the same CLUSTERDOWN.
   Returns 1 when it took the answer. */
static int simba__redis_cluster_node_redirect(simba__redis *r, simba__redis_req *q, const redisReply *rp) {
    simba__redis_cluster_node to;
    int ask, slot;
    if (simba__redis_cluster_redirect(rp->str, rp->len, &ask, &slot, &to) || strstr(rp->str, "non local key") ||
        strncmp(rp->str, "TRYAGAIN", 8) == 0) {
        r->stats.transient_errors++;
        simba__redis_complete_status(r, q, SIMBA_EDISCONNECTED, rp->str);
        return 1;
    }
    if (strncmp(rp->str, "CLUSTERDOWN", 11) != 0 && strncmp(rp->str, "READONLY", 8) != 0 &&
        !strstr(rp->str, "while the cluster is down"))
        return 0;
    simba__redis_retry_later(r, q, rp);
    return 1;
}

/* A MOVED or ASK to a backend made for one server: it was pointed at a
   Redis Cluster node. Said as what it is (EUNSUPPORTED, once at ERROR),
   not as a server error the caller cannot act on. */
static int simba__redis_cluster_misrouted(simba__redis *r, simba__redis_req *q, const redisReply *rp) {
    simba__redis_cluster_node to;
    int ask, slot;
    char why[200];
    if (r->cluster_node) return simba__redis_cluster_node_redirect(r, q, rp);
    if (simba__redis_cluster_redirect(rp->str, rp->len, &ask, &slot, &to))
        snprintf(why, sizeof why, "the server is a Redis Cluster node (%s: slot %d is on %s:%d): use a "
                 "redis+cluster:// URL (simba_redis_desc.cluster_seeds)", ask ? "ASK" : "MOVED", slot, to.host,
                 to.port);
    else if (strstr(rp->str, "non local key in a cluster node") || strncmp(rp->str, "CROSSSLOT", 9) == 0)
        snprintf(why, sizeof why, "the server is a Redis Cluster node (it refused the script's keys: %.60s): "
                 "use a redis+cluster:// URL (simba_redis_desc.cluster_seeds)", rp->str);
    else
        return 0;
    if (!r->warned_cluster) simba_backend_log(r->s, SIMBA_LOG_ERROR, "simba_redis: %s", why);
    r->warned_cluster = 1;
    simba__redis_complete_status(r, q, SIMBA_EUNSUPPORTED, why);
    return 1;
}

static void simba__redis_on_answer(simba__redis *r, simba__redis_req *q, const redisReply *rp) {
    simba_reply rep;
    simba_holder *hs = NULL;
    long long st;
    int rc;
    memset(&rep, 0, sizeof rep);
    rep.recheck_ms = -1;
    if (rp->type == REDIS_REPLY_ERROR) {
        if (strncmp(rp->str, "NOSCRIPT", 8) == 0 && q->withdrawn) {
            simba__redis_complete_status(r, q, SIMBA_EDISCONNECTED, "withdrawn: its RELEASE was sent since");
            return;
        }
        if (strncmp(rp->str, "NOSCRIPT", 8) == 0 && !q->evaled) {
            q->evaled = 1;            /* the server lost the script (SCRIPT FLUSH, failover) */
            r->stats.noscript_reloads++;
            if (simba__redis_send(r, q) != SIMBA_OK) simba__redis_complete_status(r, q, SIMBA_EDISCONNECTED, NULL);
            return;
        }
        if (simba__redis_cluster_misrouted(r, q, rp)) return;
        if (simba__redis_transient(rp->str)) {
            simba__redis_retry_later(r, q, rp);
            return;
        }
        simba__redis_complete_status(r, q, simba__redis_error_code(rp->str), rp->str);
        return;
    }
    if (rp->type != REDIS_REPLY_ARRAY || rp->elements < 1 || !simba__redis_int(rp->element[0], 0, 99, &st)) {
        simba__redis_complete_status(r, q, SIMBA_EPROTO, "the script's answer is not a status array");
        return;
    }
    rep.status = simba__redis_status_code(st);
    if (rep.status == SIMBA_OK && (q->kind == SIMBA_OP_OPEN || q->kind == SIMBA_OP_KEEPALIVE)) {
        if (simba__redis_parse_session(r, q->kind, rp, &rep) != SIMBA_OK) {
            simba__redis_complete_status(r, q, SIMBA_EPROTO, "malformed OPEN/KEEPALIVE answer (no admin epoch)");
            return;
        }
    } else if (rep.status == SIMBA_OK && (q->kind == SIMBA_OP_ENQUEUE || q->kind == SIMBA_OP_POLL)) {
        long long gend = 0, gleft = 0;
        rc = simba__redis_parse_state(q, rp, &rep, &gend, &gleft);
        if (rc != SIMBA_OK) { simba__redis_complete_status(r, q, rc, "malformed ENQUEUE/POLL answer"); return; }
        /* the core makes it the TIMEOUT's cause (SIMBA_EGRACE) */
        rep.grace_ms = gleft > INT_MAX ? INT_MAX : (int)gleft;
        simba__redis_grace_log(r, gend, gleft);   /* no-op when OPEN already said it */
        if (rep.granted && r->wait_replicas > 0) {
            q->saved = rep;
            q->waiting = 1;
            r->stats.waits++;
            if (!r->conn[SIMBA__REDIS_MAIN].ac ||
                redisAsyncCommand(r->conn[SIMBA__REDIS_MAIN].ac, simba__redis_on_reply, q, "WAIT %d %d",
                                  r->wait_replicas, r->wait_timeout_ms) != REDIS_OK)
                simba__redis_complete_status(r, q, SIMBA_EDISCONNECTED, NULL);
            return;
        }
    } else if (rep.status == SIMBA_OK && q->kind == SIMBA_OP_INSPECT) {
        rc = simba__redis_parse_inspect(r, q, rp, &rep, &hs);
        if (rc != SIMBA_OK) {
            simba_allocator_free(&r->alloc, hs);
            simba__redis_complete_status(r, q, rc, "malformed INSPECT answer");
            return;
        }
    }
    simba__redis_complete(r, q, &rep);
    simba_allocator_free(&r->alloc, hs);
}

/* Every op's callback: privdata is the request; a NULL reply means the
   context is being freed. The request is freed here, always. */
static void simba__redis_on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_req *q = (simba__redis_req *)privdata;
    simba__redis *r = q->r;
    redisReply *rp = (redisReply *)reply;
    (void)ac;
    if (!q->done) {
        if (!rp) simba__redis_complete_status(r, q, SIMBA_EDISCONNECTED, "connection lost");
        else if (q->waiting) simba__redis_on_wait(r, q, rp);
        else simba__redis_on_answer(r, q, rp);
    }
    /* still not done: the same request was sent again (EVAL, WAIT) */
    if (q->done) simba_allocator_free(&r->alloc, q);
}

/*>>wakeups: pushes on the SUBSCRIBE connection -> simba_backend_granted, _recheck, _changed */

/*>>wakeups.deliver: a push on the SUBSCRIBE connection, parsed and handed to the core */

/* One space-free field of a push at *p (advanced past it and its space). */
static int simba__redis_push_field(const char **p, const char *end, size_t max, const char **f, size_t *n) {
    const char *sp = (const char *)memchr(*p, ' ', (size_t)(end - *p));
    if (!sp || sp == *p || (size_t)(sp - *p) > max) return 0;
    *f = *p;
    *n = (size_t)(sp - *p);
    *p = sp + 1;
    return 1;
}

/* "<session> <request> <fence> <name>" (a grant), "<session> <request> 0
   <name>" (that request looks again) or "- - 0 <name>" (every request on the
   name looks again). Parsed strictly: anything else is ignored (a push is only a hint;
   the re-checks find what a lost one would have said). The session goes to
   the core, which believes a grant only for its current session. */
static void simba__redis_push(simba__redis *r, const char *msg, size_t len) {
    char session[SIMBA_MAX_SESSION + 1], request[SIMBA__REDIS_MAX_REQUEST + 1], name[SIMBA_MAX_NAME + 1];
    const char *p = msg, *end = msg + len, *sf, *rf, *ff;
    size_t sl, rl, fl, nl, i;
    int64_t fence = 0;
    if (!simba__redis_push_field(&p, end, SIMBA_MAX_SESSION, &sf, &sl) ||
        !simba__redis_push_field(&p, end, SIMBA__REDIS_MAX_REQUEST, &rf, &rl) ||
        !simba__redis_push_field(&p, end, 19, &ff, &fl))
        return;
    for (i = 0; i < fl; i++) {
        if (ff[i] < '0' || ff[i] > '9' || fence > (INT64_MAX - 9) / 10) return;
        fence = fence * 10 + (ff[i] - '0');
    }
    nl = (size_t)(end - p);
    if (nl == 0 || nl > SIMBA_MAX_NAME) return;
    simba__redis_copy(name, sizeof name, p, nl);
    if (strlen(name) != nl || simba_check_name(name) != SIMBA_OK) return;
    if (sl == 1 && sf[0] == '-' && rl == 1 && rf[0] == '-' && fence == 0) {
        r->stats.wakes++;
        simba_backend_changed(r->s, name);
        return;
    }
    simba__redis_copy(session, sizeof session, sf, sl);
    simba__redis_copy(request, sizeof request, rf, rl);
    if (strlen(session) != sl || strlen(request) != rl) return;
    r->stats.wakes++;
    /* with WAIT, a grant counts only once our own WAIT confirmed it: look */
    if (r->wait_replicas > 0 && fence > 0) simba_backend_changed(r->s, name);
    else if (fence > 0) simba_backend_granted(r->s, name, session, request, fence);
    else simba_backend_recheck(r->s, name, session, request);
}

static void simba__redis_on_sub(redisAsyncContext *ac, void *reply, void *privdata) {
    simba__redis_conn *c = simba__redis_live_conn(ac, reply, privdata);
    redisReply *rp = (redisReply *)reply;
    if (!c) return;
    if (rp->type != REDIS_REPLY_ARRAY || rp->elements < 3 || rp->element[0]->type != REDIS_REPLY_STRING) return;
    if (strcmp(rp->element[0]->str, "subscribe") == 0 || strcmp(rp->element[0]->str, "ssubscribe") == 0) {
        /* a cluster's node is pushed to by SPUBLISH only: subscribed once SSUBSCRIBE is */
        int node = c->r->cluster_node && c->r->node_tenant[0];
        if (node && strcmp(rp->element[0]->str, "ssubscribe") != 0) return;
        c->ready = 1;
        c->attempt = 0;
        c->deadline = -1;
        if (node) {
            c->r->push_gen++;
            if (c->r->on_subscribed) c->r->on_subscribed(c->r);
        }
        return;
    }
    if ((strcmp(rp->element[0]->str, "message") == 0 || strcmp(rp->element[0]->str, "smessage") == 0) &&
        rp->element[2]->type == REDIS_REPLY_STRING) {
        c->r->stats.pushes++;
        simba__redis_push(c->r, rp->element[2]->str, rp->element[2]->len);
    }
}

/*>>stats: simba_redis_stats */

/* (the vtable is defined below; its destroy tells a Redis backend from others) */
static void simba__redis_destroy(void *impl);

/* Connections of r open or opening now. */
static int simba__redis_open_conns(const simba__redis *r) {
    int i, n = 0;
    for (i = 0; i < r->nconn; i++) n += r->conn[i].ac != NULL;
    return n;
}

SIMBADEF int simba_redis_stats(simba_backend b, struct simba_redis_stats *out) {
    const simba__redis *r = (const simba__redis *)b.impl;
    if (!b.vt || b.vt->destroy != simba__redis_destroy || !r || !out) return SIMBA_EINVAL;
    *out = r->stats;
    out->connected = r->conn[SIMBA__REDIS_MAIN].ready;
    out->push_connected = r->conn[SIMBA__REDIS_SUB].ready;
    out->reconnects = r->gen > 1 ? (int64_t)(r->gen - 1) : 0;
    out->connections = simba__redis_open_conns(r);
    if (r->cl) {   /* a cluster: up as reported; the counters of its masters' backends, summed */
        int i;
        out->connected = r->reported == 1;
        /* every push connection needed now (a master in use, or with waiters of ours) is subscribed */
        out->push_connected = r->cl->have_map && r->cl->map.nnodes > 0;
        out->connections += simba__redis_open_conns(r->cl->probe);
        for (i = 0; i < r->cl->map.nnodes; i++) {
            const simba__redis *n = r->cl->node[i];
            if (!n || (!n->push_off && !n->conn[SIMBA__REDIS_SUB].ready)) out->push_connected = 0;
            if (!n) continue;
            out->connections += simba__redis_open_conns(n);
            out->reconnects += n->gen > 1 ? (int64_t)(n->gen - 1) : 0;
            out->ops_sent += n->stats.ops_sent;
            out->ops_completed += n->stats.ops_completed;
            out->wakes += n->stats.wakes;
            out->scripts_sent += n->stats.scripts_sent;
            out->pushes += n->stats.pushes;
            out->noscript_reloads += n->stats.noscript_reloads;
            out->transient_errors += n->stats.transient_errors;
            out->waits += n->stats.waits;
        }
    }
    return SIMBA_OK;
}

/*>>vtable: glue between the core and the sections above */

/* The constructor checked the desc and built everything: attach only
   schedules the first connects. */
static int simba__redis_attach(void *impl, simba *s) {
    simba__redis *r = (simba__redis *)impl;
    r->s = s;
    if (!SIMBA__REDIS_NOPIPE)
        simba_backend_log(s, SIMBA_LOG_WARN, "simba_redis: built without POSIX signal functions: SIGPIPE is not "
                          "blocked around writes; ignore SIGPIPE in the application (or define SIMBA_IMPLEMENTATION "
                          "in this file)");
    /* connect on the first process(): inside attach, simba_client_id() (which
       names our connections and channel) is not available yet */
    r->conn[SIMBA__REDIS_MAIN].retry_at = simba__redis_now(r);
    r->conn[SIMBA__REDIS_SUB].retry_at = simba__redis_now(r);
    if (r->nsentinels) r->conn[SIMBA__REDIS_SENTINEL].retry_at = simba__redis_now(r);
    return SIMBA_OK;
}

static int simba__redis_submit(void *impl, const simba_op *op) {
    return simba__redis_start((simba__redis *)impl, op);
}

static int simba__redis_pollfds(void *impl, struct pollfd *fds, int max) {
    simba__redis *r = (simba__redis *)impl;
    int i, n = 0;
    for (i = 0; i < r->nconn; i++) {
        simba__redis_conn *c = &r->conn[i];
        simba__redis_flush(c);
        if (!c->ac || c->ac->c.fd < 0) continue;
        if (n < max) {
            fds[n].fd = c->ac->c.fd;
            /* always read: a server that closes an idle connection is noticed at once */
            fds[n].events = POLLIN;
            if (c->want_write || !c->connected) fds[n].events |= POLLOUT;
            fds[n].revents = 0;
        }
        n++;
    }
    return n;
}

static int64_t simba__redis_deadline(void *impl) {
    simba__redis *r = (simba__redis *)impl;
    int64_t at = -1;
    int i;
    for (i = 0; i < r->nconn; i++) {
        simba__redis_conn *c = &r->conn[i];
        int64_t t = -1;
        if (c->ac && !c->ready) t = c->deadline;
        else if (!c->ac) t = c->retry_at;
        if (t >= 0 && (at < 0 || t < at)) at = t;
    }
    return at;
}

static void simba__redis_process(void *impl, const struct pollfd *fds, int nfds) {
    simba__redis *r = (simba__redis *)impl;
    int64_t now;
    int i;
    /* replies before pushes: a grant answered on both reaches the core in order */
    simba__redis_io(r, &r->conn[SIMBA__REDIS_MAIN], fds, nfds);
    simba__redis_io(r, &r->conn[SIMBA__REDIS_SUB], fds, nfds);
    if (r->nsentinels) simba__redis_io(r, &r->conn[SIMBA__REDIS_SENTINEL], fds, nfds);
    now = simba__redis_now(r);
    for (i = 0; i < r->nconn; i++) {
        simba__redis_conn *c = &r->conn[i];
        if (c->ac && !c->ready && c->deadline >= 0 && now >= c->deadline)
            simba__redis_drop(r, c, SIMBA_ETIMEDOUT, c->connected ? "handshake timed out" : "connect timed out");
        else if (!c->ac && c->retry_at >= 0 && now >= c->retry_at)
            simba__redis_connect(r, c);
    }
}

static void simba__redis_reset(void *impl, int why) {
    simba__redis *r = (simba__redis *)impl;
    int i;
    for (i = 0; i < 2; i++) {
        simba__redis_conn *c = &r->conn[i];
        if (c->ac) simba__redis_drop(r, c, why < 0 ? why : SIMBA_EDISCONNECTED, "reset by simba (no answer in time)");
    }
}

static void simba__redis_destroy(void *impl) {
    simba__redis *r = (simba__redis *)impl;
    int i;
    r->destroying = 1;
    simba__redis_cluster_free(r);
    if (r->s) {                   /* attached (simba_create may destroy it before) */
        simba__redis_flush_repeats(r);
        for (i = 0; i < r->nconn; i++) simba__redis_drop(r, &r->conn[i], SIMBA_EDISCONNECTED, "destroyed");
    }
    if (r->cluster_node) simba_backend_relay_close(r->s);   /* a cluster's child: its relay */
    simba__redis_free(r);
}

static const simba_backend_vtable simba__redis_vtable = {
    "redis",
    simba__redis_attach,
    simba__redis_submit,
    simba__redis_pollfds,
    simba__redis_deadline,
    simba__redis_process,
    simba__redis_reset,
    simba__redis_destroy
};

/* Redis Cluster: the same struct, its own vtable. Everything goes to the
   Cluster's functions (>>connection.cluster), which drive the probe and one
   node backend per master; destroy is shared (it frees the children). */
static int simba__redis_cluster_attach_vt(void *impl, simba *s) {
    simba__redis *r = (simba__redis *)impl;
    r->s = s;
    /* the probe connects first; the masters once it told the map */
    if (simba__redis_cluster_relay(r->cl->probe) != SIMBA_OK) {
        simba_backend_fail(s, SIMBA_ENOMEM, "simba_redis: out of memory");
        return SIMBA_ENOMEM;
    }
    simba__redis_cluster_aim_probe(r);
    r->cl->probe->conn[SIMBA__REDIS_MAIN].retry_at = simba__redis_now(r);
    return SIMBA_OK;
}
static int simba__redis_cluster_submit_vt(void *impl, const simba_op *op) {
    return simba__redis_cluster_submit((simba__redis *)impl, op);
}
static int simba__redis_cluster_pollfds_vt(void *impl, struct pollfd *fds, int max) {
    return simba__redis_cluster_pollfds((simba__redis *)impl, fds, max);
}
static int64_t simba__redis_cluster_deadline_vt(void *impl) {
    return simba__redis_cluster_deadline((simba__redis *)impl);
}
static void simba__redis_cluster_process_vt(void *impl, const struct pollfd *fds, int nfds) {
    simba__redis_cluster_process((simba__redis *)impl, fds, nfds);
}
static void simba__redis_cluster_reset_vt(void *impl, int why) {
    simba__redis_cluster_reset((simba__redis *)impl, why);
}

static const simba_backend_vtable simba__redis_cluster_vtable = {
    "redis-cluster",
    simba__redis_cluster_attach_vt,
    simba__redis_cluster_submit_vt,
    simba__redis_cluster_pollfds_vt,
    simba__redis_cluster_deadline_vt,
    simba__redis_cluster_process_vt,
    simba__redis_cluster_reset_vt,
    simba__redis_destroy
};

/*>>constructor: desc checks, allocation, from_url, the operator's init */

/* The desc's first problem, as the backend simba_create reports it; a
   zero vt when the desc is fine. */
static simba_backend simba__redis_check_desc(const simba_redis_desc *d) {
    simba_backend ok;
    memset(&ok, 0, sizeof ok);
    if (!d) return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc: NULL");
    if (simba_allocator_check(&d->allocator) != SIMBA_OK)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.allocator: alloc and free must be set together "
                                   "(or neither: malloc/free)");
    if (d->port < 0 || d->port > 65535)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.port: %d: want 1..65535 (0: 6379)", d->port);
    if (d->db < 0) return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.db: %d is negative", d->db);
    if (d->connect_timeout_ms < 0)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.connect_timeout_ms: %d is negative",
                                   d->connect_timeout_ms);
    if (d->wait_replicas < 0)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.wait_replicas: %d is negative", d->wait_replicas);
    if (d->wait_timeout_ms < 0)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.wait_timeout_ms: %d is negative",
                                   d->wait_timeout_ms);
    if (d->user && !d->password)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.user: given without a password");
    if (d->prefix && !simba__redis_prefix_ok(d->prefix))
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.prefix: want 1..64 characters of A-Z a-z 0-9 . _ "
                                   "- : (no braces, no spaces)");
    if (d->unix_socket && !d->unix_socket[0])
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.unix_socket: empty (NULL: TCP)");
    if (d->host && !d->host[0]) return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.host: empty (NULL: 127.0.0.1)");
    if (d->host && strlen(d->host) > 255)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.host: longer than 255");
    if (!d->sentinels && (d->sentinel_master || d->sentinel_user || d->sentinel_password))
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.sentinels: not set, but sentinel_master, "
                                   "sentinel_user or sentinel_password is");
    if (d->sentinels && d->unix_socket)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.unix_socket: not with sentinels (the sentinels "
                                   "name the master)");
    if (d->sentinels && (!d->sentinel_master || !d->sentinel_master[0] || strlen(d->sentinel_master) > 200 ||
                         strpbrk(d->sentinel_master, " \t\r\n")))
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.sentinel_master: want the master's name as the "
                                   "sentinels know it (1..200 bytes, no spaces)");
    if (d->sentinel_user && !d->sentinel_password)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.sentinel_user: given without a sentinel_password");
    if (d->cluster_seeds && d->sentinels)
        return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.cluster_seeds: not with sentinels (a cluster "
                                   "fails over by itself)");
    if (d->cluster_seeds) {
        simba__redis_cluster_node seeds[SIMBA__REDIS_CLUSTER_MAX_SEEDS];
        char why[160];
        if (simba__redis_cluster_seeds(d->cluster_seeds, seeds, SIMBA__REDIS_CLUSTER_MAX_SEEDS, why, sizeof why) < 0)
            return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.cluster_seeds: %s", why);
        if (d->unix_socket || d->db)
            return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.cluster_seeds: a cluster has no %s",
                                       d->unix_socket ? "unix socket" : "database but 0");
    }
    return ok;
}

/* desc.sentinels, "host:port,host:port,..." ("[v6]:port" too; port default
   26379), into r->sentinels; each host resolved once, here (blocking, like
   desc.host). A zero vt when it is fine. */
static simba_backend simba__redis_sentinel_parse(simba__redis *r, const char *list) {
    simba_backend ok;
    const char *p = list;
    memset(&ok, 0, sizeof ok);
    r->nsentinels = 0;
    for (;;) {
        const char *end = p + strcspn(p, ","), *colon, *h = p, *he;
        char host[256], numeric[64];
        long port = 26379;
        int rc;
        if (r->nsentinels == SIMBA__REDIS_MAX_SENTINELS)
            return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.sentinels: more than %d",
                                       (int)SIMBA__REDIS_MAX_SENTINELS);
        if (*h == '[') {
            he = (const char *)memchr(h, ']', (size_t)(end - h));
            if (!he) return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.sentinels: '[' without ']'");
            h++;
            colon = he + 1 < end && he[1] == ':' ? he + 1 : NULL;
        } else {
            colon = (const char *)memchr(h, ':', (size_t)(end - h));
            he = colon ? colon : end;
        }
        if (colon) {
            const char *q;
            port = 0;
            for (q = colon + 1; q < end && port <= 65535; q++)
                port = *q >= '0' && *q <= '9' ? port * 10 + (*q - '0') : 99999;
            if (q == colon + 1) port = 0;
        }
        if (he == h || (size_t)(he - h) >= sizeof host || port < 1 || port > 65535)
            return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.sentinels: '%.*s' is not host:port "
                                       "(want \"host:port,host:port\")", (int)(end - p > 100 ? 100 : end - p), p);
        simba__redis_copy(host, sizeof host, h, (size_t)(he - h));
        if ((rc = simba_backend_resolve(host, numeric, sizeof numeric)) != 0)
            return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.sentinels: cannot resolve '%.100s': %s", host,
                                       simba_backend_resolve_error(rc));
        if (!numeric[0]) simba__redis_copy(numeric, sizeof numeric, host, strlen(host));   /* already numeric */
        simba__redis_copy(r->sentinels[r->nsentinels].host, sizeof r->sentinels[0].host, numeric, strlen(numeric));
        r->sentinels[r->nsentinels++].port = (int)port;
        if (!*end) return ok;
        p = end + 1;
    }
}

/* The script text, the Lua elements joined (sent by SCRIPT LOAD and EVAL). */
static int simba__redis_build_script(simba__redis *r) {
    /* on a cluster the script touches keys of several slots of its node
       (the resource's, the session's, the tenant epoch's) */
    static const char shebang[] = "#!lua flags=allow-cross-slot-keys\n";
    size_t n = 0, i;
    for (i = 0; simba__redis_lua[i]; i++) n += strlen(simba__redis_lua[i]);
    r->script = (char *)simba_allocator_alloc(&r->alloc, n + sizeof shebang);
    if (!r->script) return SIMBA_ENOMEM;
    r->script_len = 0;
    if (r->cluster_node) {
        memcpy(r->script, shebang, sizeof shebang - 1);
        r->script_len = sizeof shebang - 1;
    }
    for (i = 0; simba__redis_lua[i]; i++) {
        size_t k = strlen(simba__redis_lua[i]);
        memcpy(r->script + r->script_len, simba__redis_lua[i], k);
        r->script_len += k;
    }
    r->script[r->script_len] = 0;
    return SIMBA_OK;
}

/* The cluster part of a backend made with cluster_seeds: the seeds and the probe. */
static int simba__redis_cluster_init(simba__redis *r, const char *seeds) {
    char why[160];
    r->cl = (struct simba__redis_cluster *)simba_allocator_alloc(&r->alloc, sizeof *r->cl);
    if (!r->cl) return SIMBA_ENOMEM;
    memset(r->cl, 0, sizeof *r->cl);
    r->cl->nseeds = simba__redis_cluster_seeds(seeds, r->cl->seeds, SIMBA__REDIS_CLUSTER_MAX_SEEDS, why, sizeof why);
    if (r->cl->nseeds < 1) return SIMBA_EINVAL;   /* (checked already) */
    r->cl->probe = simba__redis_cluster_child(r, r->cl->seeds[0].host, r->cl->seeds[0].port);
    return r->cl->probe ? SIMBA_OK : SIMBA_ENOMEM;
}

SIMBADEF simba_backend simba_redis(const simba_redis_desc *d) {
    simba_backend b = simba__redis_check_desc(d);
    simba__redis *r;
    char numeric[64];
    int i, rc;
    if (b.vt) return b;
    numeric[0] = 0;
    if (d->host && !d->unix_socket && !d->cluster_seeds) {
        /* the host-name policy (docs/design.md): a name is resolved here, once,
           so that no (re)connect inside simba_tick() waits for DNS */
        rc = simba_backend_resolve(d->host, numeric, sizeof numeric);
        if (rc != 0)
            return simba_backend_error(SIMBA_EINVAL, "simba_redis_desc.host: cannot resolve '%.100s': %s", d->host,
                                       simba_backend_resolve_error(rc));
    }
    r = (simba__redis *)simba_allocator_alloc(&d->allocator, sizeof *r);
    if (!r) return simba_backend_error(SIMBA_ENOMEM, "simba_redis: out of memory");
    r->alloc = d->allocator;
    r->reported = -1;
    r->nconn = d->sentinels ? 3 : 2;
    for (i = 0; i < 3; i++) {
        r->conn[i].r = r;
        r->conn[i].role = i;
        r->conn[i].deadline = -1;
        r->conn[i].retry_at = -1;
    }
    r->port = d->port ? d->port : 6379;
    r->db = d->db;
    r->connect_timeout_ms = d->connect_timeout_ms ? d->connect_timeout_ms : 2000;
    r->wait_replicas = d->wait_replicas;
    r->wait_timeout_ms = d->wait_timeout_ms ? d->wait_timeout_ms : 200;
    r->cluster_idle_ms = d->cluster_idle_ms ? d->cluster_idle_ms : 30000;
    r->host = simba_allocator_strdup(&r->alloc, numeric[0] ? numeric : d->host ? d->host : "127.0.0.1");
    r->prefix = simba_allocator_strdup(&r->alloc, d->prefix ? d->prefix : "simba");
    /* (strdup of NULL is NULL: an unset optional string stays unset) */
    r->unix_socket = simba_allocator_strdup(&r->alloc, d->unix_socket);
    r->user = simba_allocator_strdup(&r->alloc, d->user);
    r->password = simba_allocator_strdup(&r->alloc, d->password);
    r->sentinel_master = simba_allocator_strdup(&r->alloc, d->sentinel_master);
    r->sentinel_user = simba_allocator_strdup(&r->alloc, d->sentinel_user);
    r->sentinel_password = simba_allocator_strdup(&r->alloc, d->sentinel_password);
    if (!r->host || !r->prefix || (d->unix_socket && !r->unix_socket) || (d->user && !r->user) ||
        (d->password && !r->password) || (d->sentinel_master && !r->sentinel_master) ||
        (d->sentinel_user && !r->sentinel_user) || (d->sentinel_password && !r->sentinel_password) ||
        simba__redis_build_script(r) != SIMBA_OK) {
        simba__redis_free(r);
        return simba_backend_error(SIMBA_ENOMEM, "simba_redis: out of memory");
    }
    if (d->sentinels) {
        b = simba__redis_sentinel_parse(r, d->sentinels);
        if (b.vt) {
            simba__redis_free(r);
            return b;
        }
    }
    if (d->cluster_seeds && simba__redis_cluster_init(r, d->cluster_seeds) != SIMBA_OK) {
        simba__redis_destroy(r);
        return simba_backend_error(SIMBA_ENOMEM, "simba_redis: out of memory");
    }
    b.vt = r->cl ? &simba__redis_cluster_vtable : &simba__redis_vtable;
    b.impl = r;
    return b;
}

/* redis+sentinel://[user:pass@]s1:26379,s2:26379/mastername[?db=N&sentinel_user=..&
   sentinel_password_env=..]: the hosts are the sentinels, the path the master's name. */
static int simba__redis_sentinel_url(simba_url *u, simba_redis_desc *d, char *list, size_t cap,
                                     simba_url_error *err) {
    size_t at = 0;
    int i, rc;
    const char *env;
    if (u->nhosts < 1)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: redis+sentinel needs the sentinels "
                              "(redis+sentinel://host:port,host:port/mastername)");
    for (i = 0; i < u->nhosts; i++) {
        const char *h = u->hosts[i].host;
        int n = snprintf(list + at, cap - at, strchr(h, ':') ? "%s[%s]:%d" : "%s%s:%d", i ? "," : "", h,
                         u->hosts[i].port ? u->hosts[i].port : 26379);
        if (n < 0 || (size_t)n >= cap - at) return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: too long");
        at += (size_t)n;
    }
    d->sentinels = list;
    if (!u->path[0] || strcmp(u->path, "/") == 0)
        return simba_url_fail(err, SIMBA_EINVAL, "path", "URL path: redis+sentinel needs the master's name "
                              "(redis+sentinel://host:port/mastername)");
    d->sentinel_master = u->path + 1;
    if ((rc = simba_url_int(u, "db", 0, 1000000, &d->db, err)) != SIMBA_OK) return rc;
    d->sentinel_user = simba_url_param(u, "sentinel_user");
    d->sentinel_password = simba_url_param(u, "sentinel_password");
    if ((env = simba_url_param(u, "sentinel_password_env")) != NULL) {
        if (d->sentinel_password)
            return simba_url_fail(err, SIMBA_EINVAL, "sentinel_password_env",
                                  "URL sentinel_password: given twice (sentinel_password, sentinel_password_env)");
        if (!(d->sentinel_password = getenv(env)))
            return simba_url_fail(err, SIMBA_EAUTH, "sentinel_password_env",
                                  "URL sentinel_password_env: variable '%.60s' is not set", env);
    }
    if (d->sentinel_user && !d->sentinel_password)
        return simba_url_fail(err, SIMBA_EINVAL, "sentinel_user",
                              "URL sentinel_user: needs sentinel_password or sentinel_password_env");
    return SIMBA_OK;
}

/* The parameters every Redis scheme shares (prefix, WAIT, timeouts; the
   credentials), then the check that nothing else was given. */
static int simba__redis_url_common(simba_url *u, simba_redis_desc *d, simba_url_error *err) {
    const char *v;
    int rc;
    d->user = u->user;
    d->password = u->password;
    if (d->user && !d->password)
        return simba_url_fail(err, SIMBA_EINVAL, "userinfo",
                              "URL userinfo: a Redis user needs a password (user:password@, password_env= or password_file=)");
    if ((v = simba_url_param(u, "prefix")) != NULL) {
        if (!simba__redis_prefix_ok(v))
            return simba_url_fail(err, SIMBA_EINVAL, "prefix", "URL parameter prefix: 1..64 bytes of [A-Za-z0-9._:-]");
        d->prefix = v;
    }
    if ((rc = simba_url_int(u, "wait_replicas", 0, 1000, &d->wait_replicas, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_duration(u, "wait_timeout", 1, 3600000, &d->wait_timeout_ms, err)) != SIMBA_OK) return rc;
    if ((rc = simba_url_duration(u, "connect_timeout", 1, 3600000, &d->connect_timeout_ms, err)) != SIMBA_OK) return rc;
    return simba_url_check_used(u, err);
}

/* The strings a desc made from a URL points to besides the URL itself. */
typedef struct simba__redis_url_strings {
    char sentinels[SIMBA_URL_MAX_HOSTS * 80];
    char seeds[SIMBA__REDIS_CLUSTER_MAX_SEEDS * (SIMBA__REDIS_CLUSTER_MAX_HOST + 9) + 1];
} simba__redis_url_strings;

/* redis+cluster://[user:pass@]h1:p1,h2:p2[?params]: the hosts are the seeds
   (port 6379 when not given), written back as one "h:p,h:p" list. */
static int simba__redis_cluster_url(simba_url *u, simba_redis_desc *d, char *seeds, size_t cap,
                                    simba_url_error *err) {
    size_t at = 0;
    int i, rc;
    const char *v;
    if (!u->has_authority || u->nhosts == 0)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: redis+cluster needs seed nodes "
                              "(redis+cluster://host1:port1,host2:port2)");
    if (u->nhosts > SIMBA__REDIS_CLUSTER_MAX_SEEDS)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: more than %d seed nodes",
                              (int)SIMBA__REDIS_CLUSTER_MAX_SEEDS);
    if (u->path[0] && strcmp(u->path, "/") != 0 && strcmp(u->path, "/0") != 0)
        return simba_url_fail(err, SIMBA_EINVAL, "path", "URL path: a Redis Cluster has database 0 only");
    for (i = 0; i < u->nhosts; i++) {
        const char *h = u->hosts[i].host;
        int v6 = strchr(h, ':') != NULL;
        if (strlen(h) > SIMBA__REDIS_CLUSTER_MAX_HOST)
            return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: a seed's address is longer than %d bytes",
                                  (int)SIMBA__REDIS_CLUSTER_MAX_HOST);
        at += (size_t)snprintf(seeds + at, cap - at, "%s%s%s%s:%d", i ? "," : "", v6 ? "[" : "", h,
                               v6 ? "]" : "", u->hosts[i].port ? u->hosts[i].port : 6379);
    }
    d->cluster_seeds = seeds;
    if ((v = simba_url_param(u, "cluster_idle")) != NULL && strcmp(v, "never") == 0) d->cluster_idle_ms = -1;
    else if ((rc = simba_url_duration(u, "cluster_idle", 1, 86400000, &d->cluster_idle_ms, err)) != SIMBA_OK) return rc;
    return simba__redis_url_common(u, d, err);
}

/* The desc of a redis, redis+unix, redis+sentinel or redis+cluster URL;
   its strings point into u and str. */
static int simba__redis_url_desc(simba_url *u, simba_redis_desc *d, simba__redis_url_strings *str,
                                 simba_url_error *err) {
    int unix_sock, sentinel, rc;
    memset(d, 0, sizeof *d);
    unix_sock = strcmp(u->scheme, "redis+unix") == 0;
    sentinel = strcmp(u->scheme, "redis+sentinel") == 0;
    if (strcmp(u->scheme, "redis+cluster") == 0) return simba__redis_cluster_url(u, d, str->seeds, sizeof str->seeds, err);
    if (!unix_sock && !sentinel && strcmp(u->scheme, "redis") != 0)
        return simba_url_fail(err, SIMBA_EINVAL, "scheme", "URL scheme: '%s' is not redis, redis+unix, "
                              "redis+sentinel or redis+cluster", u->scheme);
    if (!u->has_authority)
        return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: %s needs '//' (%s)", u->scheme,
                              unix_sock ? "redis+unix:///path/to/socket"
                                        : sentinel ? "redis+sentinel://host:port/mastername" : "redis://host:port");
    if (sentinel) {
        if ((rc = simba__redis_sentinel_url(u, d, str->sentinels, sizeof str->sentinels, err)) != SIMBA_OK) return rc;
    } else if (unix_sock) {
        if (u->nhosts)
            return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: redis+unix takes no host (redis+unix:///path/to/socket)");
        if (!u->path[0] || strcmp(u->path, "/") == 0)
            return simba_url_fail(err, SIMBA_EINVAL, "path", "URL path: redis+unix needs the socket's path");
        d->unix_socket = u->path;
        if ((rc = simba_url_int(u, "db", 0, 1000000, &d->db, err)) != SIMBA_OK) return rc;
    } else {
        if (u->nhosts != 1)
            return simba_url_fail(err, SIMBA_EINVAL, "host", "URL host: %s",
                                  u->nhosts ? "redis takes one host" : "missing (redis://host[:port])");
        d->host = u->hosts[0].host;
        d->port = u->hosts[0].port ? u->hosts[0].port : 6379;
        if (u->path[0] && strcmp(u->path, "/") != 0) {
            const char *c = u->path + 1;
            long db = 0;
            for (; *c; c++) {
                if (*c < '0' || *c > '9' || db > 1000000)
                    return simba_url_fail(err, SIMBA_EINVAL, "path",
                                          "URL path: '%.40s' is not a database number (/0, /1, ...)", u->path);
                db = db * 10 + (*c - '0');
            }
            d->db = (int)db;
        }
    }
    return simba__redis_url_common(u, d, err);
}

SIMBADEF int simba_redis_from_url(simba_url *u, simba_backend *out, simba_url_error *err) {
    simba_redis_desc d;
    simba__redis_url_strings str;
    int rc;
    if (!u || !out) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: no URL or no output");
    if ((rc = simba__redis_url_desc(u, &d, &str, err)) != SIMBA_OK) return rc;
    *out = simba_redis(&d);
    return SIMBA_OK;
}

static int simba__redis_init_fail(char *msg, size_t cap, int err, const char *what, const char *detail) {
    if (msg && cap) snprintf(msg, cap, "simba_redis_init_server: %s%s%s", what, detail ? ": " : "",
                             detail ? detail : "");
    return err;
}

/* A blocking connection for the operator's init (AUTH done): NULL with msg set. */
static redisContext *simba__redis_init_connect(const simba_redis_desc *desc, const char *host, int port, char *msg,
                                               size_t cap, int *err) {
    int ms = desc->connect_timeout_ms > 0 ? desc->connect_timeout_ms : 2000;
    struct timeval tv;
    redisContext *c;
    redisReply *rp;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    c = redisConnectWithTimeout(host, port, tv);
    if (!c || c->err) {
        *err = simba__redis_init_fail(msg, cap, c ? SIMBA_EDISCONNECTED : SIMBA_ENOMEM, "cannot connect",
                                      c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (!desc->password) return c;
    rp = desc->user ? (redisReply *)redisCommand(c, "AUTH %s %s", desc->user, desc->password)
                    : (redisReply *)redisCommand(c, "AUTH %s", desc->password);
    if (!rp || rp->type == REDIS_REPLY_ERROR) {
        *err = simba__redis_init_fail(msg, cap, rp ? SIMBA_EAUTH : SIMBA_EDISCONNECTED, "AUTH failed",
                                      rp ? rp->str : c->errstr);
        if (rp) freeReplyObject(rp);
        redisFree(c);
        return NULL;
    }
    freeReplyObject(rp);
    return c;
}

/* The server's master_replid into out[41] ("" when INFO does not say): the
   epoch an init writes names the run by run_id and replid, as clients do. */
static void simba__redis_init_replid(redisContext *c, char *out) {
    redisReply *rp = (redisReply *)redisCommand(c, "INFO replication");
    out[0] = 0;
    if (rp && rp->type == REDIS_REPLY_STRING) simba__redis_info_id(rp->str, rp->len, "master_replid:", out);
    if (rp) freeReplyObject(rp);
}

/* On one master of a cluster: its run_id, then its tenant epoch (the node
   tag's key, docs/redis.md, Cluster) with no grace. */
static int simba__redis_init_master(const simba_redis_desc *desc, const simba__redis_cluster_map *m, int i,
                                    const char *prefix, const char *tenant, char *msg, size_t cap) {
    char tag[SIMBA_MAX_TENANT + 24], key[SIMBA__REDIS_MAX_PREFIX + SIMBA_MAX_TENANT + 40], run_id[41] = "";
    char replid[41];
    const char *p;
    int err = SIMBA_OK;
    redisReply *rp;
    redisContext *c;
    if (simba__redis_cluster_node_tag(m, i, tenant, tag, sizeof tag) < 0)
        return simba__redis_init_fail(msg, cap, SIMBA_EBACKEND, "a master with no slot", m->node[i].host);
    if (!(c = simba__redis_init_connect(desc, m->node[i].host, m->node[i].port, msg, cap, &err))) return err;
    rp = (redisReply *)redisCommand(c, "INFO server");
    if (rp && rp->type == REDIS_REPLY_STRING && (p = strstr(rp->str, "run_id:")) != NULL &&
        simba__redis_is_sha(p + 7, strspn(p + 7, "0123456789abcdef")))
        memcpy(run_id, p + 7, 40);
    else
        err = simba__redis_init_fail(msg, cap, rp ? SIMBA_EBACKEND : SIMBA_EDISCONNECTED, "no run_id from INFO server",
                                     rp && rp->type == REDIS_REPLY_ERROR ? rp->str : NULL);
    if (rp) freeReplyObject(rp);
    if (!err) {
        snprintf(key, sizeof key, "%s:epoch:{%s}", prefix, tag);
        simba__redis_init_replid(c, replid);
        rp = (redisReply *)redisCommand(c, "HSET %s run %s grace 0 rid %s", key, run_id, replid);
        if (!rp || rp->type == REDIS_REPLY_ERROR)
            err = simba__redis_init_fail(msg, cap, rp ? simba__redis_error_code(rp->str) : SIMBA_EDISCONNECTED,
                                         "HSET of the epoch failed", rp ? rp->str : c->errstr);
        if (rp) freeReplyObject(rp);
    }
    redisFree(c);
    return err;
}

/* simba_redis_init_server on a cluster: the map from the first seed that
   answers CLUSTER SLOTS, then every master's epoch of the tenant. */
static int simba__redis_cluster_init_server(const simba_redis_desc *desc, const char *prefix, const char *tenant,
                                            char *msg, size_t cap) {
    simba__redis_cluster_node seeds[SIMBA__REDIS_CLUSTER_MAX_SEEDS];
    simba__redis_cluster_map *m;
    char why[200];
    int n = simba__redis_cluster_seeds(desc->cluster_seeds, seeds, SIMBA__REDIS_CLUSTER_MAX_SEEDS, why, sizeof why);
    int i, err = SIMBA_EDISCONNECTED;
    if (n < 0) return simba__redis_init_fail(msg, cap, SIMBA_EINVAL, "bad cluster_seeds", why);
    m = (simba__redis_cluster_map *)simba_allocator_alloc(&desc->allocator, sizeof *m);
    if (!m) return simba__redis_init_fail(msg, cap, SIMBA_ENOMEM, "out of memory", NULL);
    for (i = 0; i < n && err != SIMBA_OK; i++) {
        redisContext *c = simba__redis_init_connect(desc, seeds[i].host, seeds[i].port, msg, cap, &err);
        redisReply *rp;
        if (!c) continue;
        rp = (redisReply *)redisCommand(c, "CLUSTER SLOTS");
        err = simba__redis_cluster_parse_slots(m, rp, seeds[i].host, why, sizeof why);
        if (err == SIMBA_OK && m->nnodes == 0) err = SIMBA_EPROTO;
        if (err != SIMBA_OK) simba__redis_init_fail(msg, cap, err, "no slot map", why);
        if (rp) freeReplyObject(rp);
        redisFree(c);
    }
    for (i = 0; err == SIMBA_OK && i < m->nnodes; i++) err = simba__redis_init_master(desc, m, i, prefix, tenant, msg, cap);
    simba_allocator_free(&desc->allocator, m);
    return err;
}

SIMBADEF int simba_redis_init_server(const simba_redis_desc *desc, const char *tenant, char *msg,
                                     size_t msg_size) {
    struct timeval tv;
    redisContext *c;
    redisReply *rp;
    char run_id[41] = "", replid[41], key[SIMBA__REDIS_MAX_PREFIX + SIMBA_MAX_TENANT + 16];
    const char *prefix, *p;
    int ms, err = SIMBA_OK;
    if (msg && msg_size) msg[0] = 0;
    if (!desc) return simba__redis_init_fail(msg, msg_size, SIMBA_EINVAL, "desc is NULL", NULL);
    if (!tenant) tenant = "default";
    prefix = desc->prefix ? desc->prefix : "simba";
    if (!simba__redis_prefix_ok(prefix)) return simba__redis_init_fail(msg, msg_size, SIMBA_EINVAL, "bad prefix", prefix);
    if (simba_check_tenant(tenant) != SIMBA_OK)
        return simba__redis_init_fail(msg, msg_size, SIMBA_EINVAL, "bad tenant", tenant);
    if (desc->user && !desc->password)
        return simba__redis_init_fail(msg, msg_size, SIMBA_EINVAL, "user without password", NULL);
    if (!desc->unix_socket && (desc->port < 0 || desc->port > 65535))
        return simba__redis_init_fail(msg, msg_size, SIMBA_EINVAL, "port out of range", NULL);
    if (desc->cluster_seeds) return simba__redis_cluster_init_server(desc, prefix, tenant, msg, msg_size);
    ms = desc->connect_timeout_ms > 0 ? desc->connect_timeout_ms : 2000;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    c = desc->unix_socket ? redisConnectUnixWithTimeout(desc->unix_socket, tv)
                          : redisConnectWithTimeout(desc->host ? desc->host : "127.0.0.1",
                                                    desc->port ? desc->port : 6379, tv);
    if (!c) return simba__redis_init_fail(msg, msg_size, SIMBA_ENOMEM, "out of memory", NULL);
    if (c->err) {
        err = simba__redis_init_fail(msg, msg_size, SIMBA_EDISCONNECTED, "cannot connect", c->errstr);
        redisFree(c);
        return err;
    }
    redisSetTimeout(c, tv);
    if (desc->password) {
        rp = desc->user ? (redisReply *)redisCommand(c, "AUTH %s %s", desc->user, desc->password)
                        : (redisReply *)redisCommand(c, "AUTH %s", desc->password);
        if (!rp || rp->type == REDIS_REPLY_ERROR)
            err = simba__redis_init_fail(msg, msg_size, rp ? SIMBA_EAUTH : SIMBA_EDISCONNECTED, "AUTH failed",
                                         rp ? rp->str : c->errstr);
        if (rp) freeReplyObject(rp);
    }
    if (!err && desc->db > 0) {
        rp = (redisReply *)redisCommand(c, "SELECT %d", desc->db);
        if (!rp || rp->type == REDIS_REPLY_ERROR)
            err = simba__redis_init_fail(msg, msg_size, rp ? simba__redis_error_code(rp->str) : SIMBA_EDISCONNECTED,
                                         "SELECT failed", rp ? rp->str : c->errstr);
        if (rp) freeReplyObject(rp);
    }
    if (!err) {
        /* the epoch must name this server run: a restart (or a failover)
           later still starts a grace, as without the init */
        rp = (redisReply *)redisCommand(c, "INFO server");
        if (rp && rp->type == REDIS_REPLY_STRING && (p = strstr(rp->str, "run_id:")) != NULL &&
            simba__redis_is_sha(p + 7, strspn(p + 7, "0123456789abcdef")))
            memcpy(run_id, p + 7, 40);
        else
            err = simba__redis_init_fail(msg, msg_size, rp ? SIMBA_EBACKEND : SIMBA_EDISCONNECTED,
                                         "no run_id from INFO server", rp && rp->type == REDIS_REPLY_ERROR ? rp->str : NULL);
        if (rp) freeReplyObject(rp);
    }
    if (!err) {
        snprintf(key, sizeof key, "%s:epoch:{%s}", prefix, tenant);
        simba__redis_init_replid(c, replid);
        rp = (redisReply *)redisCommand(c, "HSET %s run %s grace 0 rid %s", key, run_id, replid);
        if (!rp || rp->type == REDIS_REPLY_ERROR)
            err = simba__redis_init_fail(msg, msg_size, rp ? simba__redis_error_code(rp->str) : SIMBA_EDISCONNECTED,
                                         "HSET of the epoch failed", rp ? rp->str : c->errstr);
        if (rp) freeReplyObject(rp);
    }
    redisFree(c);
    return err;
}

SIMBADEF int simba_redis_init_server_url(simba_url *u, const char *tenant, simba_url_error *err) {
    simba_redis_desc d;
    simba__redis_url_strings str;
    char msg[256];
    int rc;
    if (!u) return simba_url_fail(err, SIMBA_EINVAL, "url", "URL: no URL");
    if (strcmp(u->scheme, "redis+sentinel") == 0)
        return simba_url_fail(err, SIMBA_EUNSUPPORTED, "scheme", "URL scheme: redis+sentinel: init the master "
                              "itself (redis://host:port of the master); a replica promoted later starts a grace anyway");
    if ((rc = simba__redis_url_desc(u, &d, &str, err)) != SIMBA_OK) return rc;
    if ((rc = simba_redis_init_server(&d, tenant, msg, sizeof msg)) != SIMBA_OK)
        return simba_url_fail(err, rc, "server", "%s", msg);
    return SIMBA_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* SIMBA_REDIS_IMPL_INCLUDED */
#endif /* SIMBA_REDIS_IMPLEMENTATION */
