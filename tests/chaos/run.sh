#!/usr/bin/env bash
# tests/chaos/run.sh -- process-level chaos against a real server (`make chaos`).
#
#   tests/chaos/run.sh BACKEND SECONDS      BACKEND: redis, redis-cluster,
#                                            mysql, pg, zk, zk-partition or sqlite
#
# Starts the backend's throw-away servers (tests/servers/BACKEND.sh run; for zk
# also the 3-node ensemble; zk-partition is its own ZooKeeper round, see
# below), CHAOS_CLIENTS (default 5) chaos_client processes
# that acquire/hold/release the mutex "m" and the semaphore "s" (capacity 2)
# and log every believed hold, then injects faults one after the other for
# about SECONDS, each followed by a wait for a grant on both names (the
# recovery), and finally runs tests/chaos/check.py on the log. Every fault
# kind is injected at least once, even when SECONDS is short.
#
# Faults (F records in the log: kind, start, end in CLOCK_MONOTONIC ns):
#   all       holder_stop   SIGSTOP a holder for ttl + transition + 1 s
#             holder_stop_ttl  SIGSTOP a holder for ttl + transition/2 (past its
#                           own deadline, not its server lease)
#             kill9         kill -9 a holder and a waiter, start two new clients
#   redis     restart       crash + restart without persistence (data gone)
#             restart_aof   crash + restart with appendonly (data kept)
#             conn_kill     CLIENT KILL of every client connection
#             server_pause  SIGSTOP redis-server for lease + 1 s
#             loading       restart from a big RDB: -LOADING for seconds
#   redis-cluster  (tests/servers/redis.sh cluster: 3 masters + 3 replicas and
#             a spare node; m and s live in two slots of two masters)
#             migrate       the slots of m and s move (keys and all, one key at
#                           a time, as redis-cli --cluster reshard does) to
#                           other masters: back and forth over the rounds
#             add_master    a new empty master joins; m's slot moves to it
#             remove_master m's slot moves back to a first master; the added
#                           master is stopped and forgotten
#             cluster_failover  CLUSTER FAILOVER on the replica of s's master
#             master_kill   kill -9 of s's master; once its replica took over,
#                           it is started again (empty: it joins as a replica)
#   mysql     restart       crash + restart of mariadbd
#             conn_kill     KILL of every connection to the database
#             server_pause  SIGSTOP mariadbd for lease + 1 s
#   pg        restart       crash (kill -9 of postgres and its backends) + restart
#             conn_kill     pg_terminate_backend of every simba connection
#             server_pause  SIGSTOP postgres and its backends for lease + 1 s
#   zk        follower_kill crash + restart of a follower of the ensemble
#             leader_kill   crash + restart of the leader
#             leader_pause  SIGSTOP the leader for lease + 1 s
#             follower_pause  SIGSTOP a follower for lease + 1 s (its clients
#                           hear nothing, not even a close)
#             conn_kill     the server ends of every client connection closed (ss -K)
#   sqlite    file_deleted  the database file (and -wal, -shm) deleted under
#                           running clients (no server: tests/servers is not used)
#   zk-partition  (a second ZooKeeper round: the ensemble with every member
#             link and client port behind tests/tools/tcp_proxy, `zk.sh
#             proxied`; elections through the proxies are slow, 7-23 s, so
#             the zk round above stays direct. A follower F is picked at the
#             start; clients 1 and 2 connect only to F, the others only to the
#             leader and the other follower.)
#             partition     once one of F's clients holds (or 5 s passed), F
#                           and its clients cut off from the leader and the
#                           other follower, silently (frozen proxies: no FIN,
#                           no RST), for lease + 2 s; then healed, and F serves
#                           again (issue #9 item 6). F's clients keep their
#                           holds meanwhile (SIGUSR1/SIGUSR2, chaos_client.c),
#                           and one of them must be granted again within 30 s
#                           of the heal, else the run fails. With simba_zk.h
#                           from before the fix (4862574^) this round gives
#                           violations (two believing holders for ~0.3-1 s).
#             holder_stop, holder_stop_ttl  as above
#
# Environment: CHAOS_TTL_MS (1500), CHAOS_TRANSITION_MS (1000), CHAOS_CLIENTS
# (5), CHAOS_FAULTS (a space-separated subset of kinds), CHAOS_RECOVERY_MS
# (the longest recovery the checker accepts; redis-cluster: two leases + 1 s),
# CHAOS_BIN (build/chaos_client; build/asan/chaos_client for ASan+UBSan clients, made by
# `make build/asan/chaos_client`), CHAOS_LOGDIR (build/chaos: the log is kept
# there as BACKEND.log, the clients' stderr as BACKEND.client.err, and the
# server's keys when a fault was not followed by a grant within 30 s as
# BACKEND.state), CHAOS_LOG_LEVEL (0-3: the library's messages up to that
# level on the clients' stderr, with their CLOCK_MONOTONIC time; unset: none).
# Exit status 0 when the checker passes.
set -u
cd "$(dirname "$0")/../.."

die() { echo "chaos: $*" >&2; exit 2; }

B=${1:-}
SECS=${2:-120}
case "$B" in redis|redis-cluster|mysql|pg|zk|zk-partition|sqlite) ;; *) die "usage: $0 redis|redis-cluster|mysql|pg|zk|zk-partition|sqlite SECONDS" ;; esac
SRV=${B%%-*}    # the server script: zk-partition runs ZooKeeper's, redis-cluster Redis's
MODE=run        # its mode: redis-cluster runs `redis.sh cluster`
KIND=$SRV       # the chaos_client backend
[ "$B" = redis-cluster ] && MODE=cluster && KIND=redis-cluster

if [ -z "${CHAOS_INNER:-}" ] && [ "$B" != sqlite ]; then   # sqlite: no server
    export CHAOS_INNER=1
    # zk-partition: zk.sh's `proxied` needs the proxy (make build/tcp_proxy)
    [ "$B" = zk-partition ] && export SIMBA_ZK_PROXY=${SIMBA_ZK_PROXY:-$PWD/build/tcp_proxy}
    exec tests/servers/$SRV.sh "$MODE" "$0" "$@"
fi

BIN=${CHAOS_BIN:-build/chaos_client}
[ -x "$BIN" ] || die "$BIN not built (make build/chaos_client)"
export CHAOS_TTL_MS=${CHAOS_TTL_MS:-1500}
export CHAOS_TRANSITION_MS=${CHAOS_TRANSITION_MS:-1000}
LEASE_MS=$((CHAOS_TTL_MS + CHAOS_TRANSITION_MS))
NCLIENTS=${CHAOS_CLIENTS:-5}
LOGDIR=${CHAOS_LOGDIR:-build/chaos}
mkdir -p "$LOGDIR"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/simba-chaos.XXXXXX") || die "mktemp failed"
LOG=$WORK/holds.log
STATE=$WORK/holding
mkdir -p "$STATE"
: >"$LOG"

declare -a PIDS=()
STOPPED=()      # pids we SIGSTOPped and must SIGCONT whatever happens

cleanup() {
    local p
    for p in "${STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null   # not a bare wait: a redis-server we started is a child too
    done
    [ -f "$LOG" ] && cp "$LOG" "$LOGDIR/$B.log"
    [ -f "$WORK/client.err" ] && cp "$WORK/client.err" "$LOGDIR/$B.client.err"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

now() { "$BIN" now; }
ms() { echo $(( $1 / 1000 )).$(printf '%03d' $(( $1 % 1000 ))); }   # ms -> "s.mmm" for sleep

# ---- the backend: where the server is and how to hurt it ----
case "$B" in
redis)
    SRV_DIR=$(dirname "$SIMBA_REDIS_CTL")
    CLI=(redis-cli -h 127.0.0.1 -p "$SIMBA_REDIS_PORT")
    server_pid() { cat "$SRV_DIR/main.pid" 2>/dev/null; }
    FAULTS="holder_stop holder_stop_ttl kill9 restart restart_aof conn_kill server_pause loading"
    ;;
redis-cluster)
    CTL=$SIMBA_REDIS_CTL
    rcli() { redis-cli -h 127.0.0.1 -p "$@"; }
    SEED=${SIMBA_REDIS_CLUSTER_SEEDS%%,*}; SEED=${SEED##*:}
    SLOT_M=$(rcli "$SEED" cluster keyslot 'chaos:{chaos:6d}')
    SLOT_S=$(rcli "$SEED" cluster keyslot 'chaos:{chaos:73}')
    FAULTS="migrate add_master cluster_failover migrate master_kill remove_master"
    # grants resume within two leases of each fault's end, plus 1 s: a new
    # or promoted master holds its grants back for one lease (the restart
    # grace), counted from its first script after the fault; and while any
    # master of its map is unreachable a client is down as a whole (one
    # session on every master), so its keepalives stop everywhere and
    # entries on the other masters wait until their sessions are judged
    # dead, up to a lease after the client is back (docs/redis.md, Chaos)
    RECOVERY_MS=${CHAOS_RECOVERY_MS:-$((2 * LEASE_MS + 1000))}
    ;;
mysql)
    SRV_DIR=$(dirname "$SIMBA_MYSQL_CTL")
    server_pid() { cat "$SRV_DIR/pid" 2>/dev/null; }
    FAULTS="holder_stop holder_stop_ttl kill9 restart conn_kill server_pause"
    ;;
pg)
    # the postmaster and its backends: a pause stops them all (a stopped
    # postmaster alone would leave the connections served)
    SRV_DIR=$(dirname "$SIMBA_PG_CTL")
    server_pid() { local p; p=$(cat "$SRV_DIR/pid" 2>/dev/null) && echo "$p $(pgrep -P "$p" | tr '\n' ' ')"; }
    FAULTS="holder_stop holder_stop_ttl kill9 restart conn_kill server_pause"
    ;;
zk)
    # a member can lose its quorum or election port to another program of
    # this busy machine between zk.sh picking it and java binding it: retry
    for try in 1 2 3; do
        CHAOS_ZK_HOSTS=$("$SIMBA_ZK_CTL" ensemble 2>>"$WORK/ensemble.err") && break
        CHAOS_ZK_HOSTS=
        for n in 1 2 3; do "$SIMBA_ZK_CTL" kill "$n"; done
        echo "chaos $B: the ZooKeeper ensemble did not start (try $try)"
        sleep 2
    done
    [ -n "$CHAOS_ZK_HOSTS" ] || { tail -n 5 "$WORK/ensemble.err" >&2; die "the ZooKeeper ensemble did not start"; }
    export CHAOS_ZK_HOSTS
    FAULTS="holder_stop holder_stop_ttl kill9 follower_kill leader_kill leader_pause follower_pause conn_kill"
    ;;
sqlite)
    # no server: one database file in the run's directory, and what can
    # happen to a file under running clients
    export SIMBA_SQLITE_PATH=$WORK/locks.db
    FAULTS="holder_stop holder_stop_ttl kill9 file_deleted"
    ;;
zk-partition)
    [ -x "${SIMBA_ZK_PROXY:-}" ] || die "SIMBA_ZK_PROXY=${SIMBA_ZK_PROXY:-} is not executable (make build/tcp_proxy)"
    for try in 1 2 3; do
        "$SIMBA_ZK_CTL" proxied >/dev/null 2>>"$WORK/ensemble.err" && break
        for n in 1 2 3; do "$SIMBA_ZK_CTL" kill "$n"; done
        echo "chaos $B: the proxied ZooKeeper ensemble did not start (try $try)"
        sleep 2
    done
    for n in 1 2 3; do "$SIMBA_ZK_CTL" wait "$n" >/dev/null 2>&1 || { tail -n 5 "$WORK/ensemble.err" >&2; die "the proxied ZooKeeper ensemble did not start"; }; done
    ZK_LEADER=
    for n in 1 2 3; do [ "$("$SIMBA_ZK_CTL" mode "$n")" = leader ] && ZK_LEADER=$n; done
    [ -n "$ZK_LEADER" ] || die "the proxied ensemble has no leader"
    ZK_F= ZK_OTHERS=
    for n in 1 2 3; do
        [ "$n" = "$ZK_LEADER" ] && continue
        if [ -z "$ZK_F" ]; then ZK_F=$n; else ZK_OTHERS=$n; fi
    done
    # clients 1 and 2 see only F (through its client proxy); the others only
    # the leader and the other follower (so they are on the majority side)
    ZK_F_HOSTS=$("$SIMBA_ZK_CTL" phosts "$ZK_F")
    ZK_MAJ_HOSTS=$("$SIMBA_ZK_CTL" phosts "$ZK_LEADER"),$("$SIMBA_ZK_CTL" phosts "$ZK_OTHERS")
    echo "chaos $B: leader $ZK_LEADER, partitioned follower $ZK_F (clients 1 and 2)"
    FAULTS="partition holder_stop partition holder_stop_ttl"
    ;;
esac
[ -n "${CHAOS_FAULTS:-}" ] && FAULTS=$CHAOS_FAULTS

# ---- clients ----
start_client() {   # $1 index
    if [ "$B" = zk-partition ]; then
        if [ "$1" -le 2 ]; then CHAOS_ZK_HOSTS=$ZK_F_HOSTS; else CHAOS_ZK_HOSTS=$ZK_MAJ_HOSTS; fi
        export CHAOS_ZK_HOSTS
    fi
    "$BIN" "$KIND" "$1" "$LOG" "$STATE" "$RANDOM$1" 2>>"$WORK/client.err" &
    PIDS[$1]=$!
}
for i in $(seq 1 "$NCLIENTS"); do start_client "$i"; done

holder_pid() {     # a client that holds now ("" if none within 5 s)
    local p
    for _ in $(seq 1 50); do
        for f in "$STATE"/*; do
            [ -f "$f" ] || continue
            p=${f##*/}
            if kill -0 "$p" 2>/dev/null; then echo "$p"; return 0; fi
            rm -f "$f"
        done
        sleep 0.1
    done
}
index_of() { local i; for i in "${!PIDS[@]}"; do [ "${PIDS[$i]}" = "$1" ] && echo "$i"; done; }

# ---- faults: each prints nothing, appends its F record ----
LAST_END=0
record() { LAST_END=$3; echo "F $1 $2 $3" >>"$LOG"; echo "chaos $B: fault $1 ($(( ($3 - $2) / 1000000 )) ms)"; }

f_holder_stop() {
    local p t0
    # stopped, a process cannot change state: its state file still there
    # after the STOP means it is stopped as a holder (else try another)
    for _ in $(seq 1 20); do
        p=$(holder_pid)
        [ -n "$p" ] || continue
        t0=$(now)
        kill -STOP "$p"; STOPPED+=("$p")
        [ -f "$STATE/$p" ] && break
        kill -CONT "$p"; p=
    done
    [ -n "$p" ] || { echo "chaos $B: no holder to stop"; return; }
    sleep "$(ms $((LEASE_MS + 1000)))"
    kill -CONT "$p"
    record holder_stop "$t0" "$(now)"
}

# A holder stopped past its ttl but not its lease: on waking its local
# deadline has passed while the server may still know its session, so the
# next tick must say LOST before anything else; a validity renewed for the
# old hold shows in the log as a hold that came back to life.
f_holder_stop_ttl() {
    local p t0
    for _ in $(seq 1 20); do
        p=$(holder_pid)
        [ -n "$p" ] || continue
        t0=$(now)
        kill -STOP "$p"; STOPPED+=("$p")
        [ -f "$STATE/$p" ] && break
        kill -CONT "$p"; p=
    done
    [ -n "$p" ] || { echo "chaos $B: no holder to stop"; return; }
    sleep "$(ms $((CHAOS_TTL_MS + CHAOS_TRANSITION_MS / 2)))"
    kill -CONT "$p"
    record holder_stop_ttl "$t0" "$(now)"
}

# Stops p and waits (up to 1 s) until the kernel shows it stopped: from then
# on p writes nothing to the log. kill -STOP returns before the signal is
# acted on, and a process that runs on meanwhile can still log a grant.
freeze() {   # pid
    local st
    kill -STOP "$1" 2>/dev/null || return
    STOPPED+=("$1")
    for _ in $(seq 1 100); do
        st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return
        [ "$st" = T ] || [ "$st" = t ] || [ -z "$st" ] && return
        sleep 0.01
    done
}

f_kill9() {
    local h w i t0
    for _ in $(seq 1 20); do   # a holder, checked while it is stopped (see above)
        h=$(holder_pid)
        [ -n "$h" ] || continue
        kill -STOP "$h"; STOPPED+=("$h")
        [ -f "$STATE/$h" ] && break
        kill -CONT "$h"; h=
    done
    t0=$(now)
    for i in "${!PIDS[@]}"; do
        [ "${PIDS[$i]}" = "$h" ] && continue
        [ -f "$STATE/${PIDS[$i]}" ] && continue
        w=${PIDS[$i]}; break
    done
    for p in $h ${w:-}; do
        i=$(index_of "$p")
        freeze "$p"   # the waiter runs until here: stopped, it can log no grant after K
        echo "K $p $(now)" >>"$LOG"   # the checker: no belief of p after this
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
        rm -f "$STATE/$p"
        start_client "$i"
    done
    record kill9 "$t0" "$(now)"
}

# sqlite: the database file (with its -wal and -shm) deleted under running
# clients: holders are told (DISCONNECTED, LOST) and whoever makes the file
# again grants nothing for a lease (docs/sqlite.md, "a replaced file")
f_file_deleted() {
    local t0
    t0=$(now)
    rm -f "$SIMBA_SQLITE_PATH" "$SIMBA_SQLITE_PATH-wal" "$SIMBA_SQLITE_PATH-shm"
    record file_deleted "$t0" "$(now)"
}

f_server_pause() {
    local p t0
    p=$(server_pid)
    t0=$(now)
    # shellcheck disable=SC2086
    kill -STOP $p; STOPPED+=($p)
    sleep "$(ms $((LEASE_MS + 1000)))"
    # shellcheck disable=SC2086
    kill -CONT $p
    record server_pause "$t0" "$(now)"
}

f_restart() {
    local t0
    t0=$(now)
    case "$B" in
    redis) "$SIMBA_REDIS_CTL" restart >/dev/null ;;
    mysql) "$SIMBA_MYSQL_CTL" restart >/dev/null ;;
    pg) "$SIMBA_PG_CTL" restart >/dev/null ;;
    esac || echo "chaos $B: the server did not restart"
    record restart "$t0" "$(now)"
}

# Redis with its data: start redis-server ourselves with the arguments
# redis.sh uses (its ctl wipes the dir on start), appendonly on, and put the
# pid where redis.sh's ctl and clean-up find it.
redis_start_keep() {   # extra args...
    local args
    mapfile -t args <"$SRV_DIR/main.args"
    setsid redis-server "${args[@]}" "$@" </dev/null >>"$SRV_DIR/main.out" 2>&1 &
    echo $! >"$SRV_DIR/main.pid"
    disown $!   # redis.sh kills it by pid; no "Killed" notice from this shell
}
redis_wait_pong() {    # up to $1 deciseconds
    for _ in $(seq 1 "$1"); do
        "${CLI[@]}" ping 2>/dev/null | grep -q PONG && return 0
        sleep 0.1
    done
    return 1
}
redis_crash() {
    local p
    p=$(server_pid)
    kill -9 "$p" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
}

f_restart_aof() {
    local t0
    "${CLI[@]}" config set appendonly yes >/dev/null
    "${CLI[@]}" config set appendfsync always >/dev/null
    for _ in $(seq 1 100); do   # the first rewrite makes the AOF complete
        "${CLI[@]}" info persistence | grep -q 'aof_rewrite_in_progress:0' &&
            "${CLI[@]}" info persistence | grep -q 'aof_rewrite_scheduled:0' && break
        sleep 0.1
    done
    t0=$(now)
    redis_crash
    redis_start_keep --appendonly yes --appendfsync always
    redis_wait_pong 100 || echo "chaos $B: redis did not come back with its AOF"
    record restart_aof "$t0" "$(now)"
}

f_loading() {
    local t0
    # a big RDB (in db 1, simba uses db 0) loaded slowly: -LOADING for seconds
    "${CLI[@]}" config set appendonly no >/dev/null
    "${CLI[@]}" -n 1 debug populate 30000 chaospad 16 >/dev/null
    "${CLI[@]}" save >/dev/null
    t0=$(now)
    redis_crash
    redis_start_keep --appendonly no --key-load-delay 50 --loading-process-events-interval-bytes 1024
    redis_wait_pong 300 || echo "chaos $B: redis did not finish loading"
    "${CLI[@]}" -n 1 flushdb >/dev/null
    record loading "$t0" "$(now)"
}

f_conn_kill() {
    local t0 ids id
    t0=$(now)
    case "$B" in
    redis)
        "${CLI[@]}" client kill type normal skipme yes >/dev/null
        "${CLI[@]}" client kill type pubsub >/dev/null ;;
    mysql)
        ids=$("$SIMBA_MYSQL_CTL" sql "SELECT id FROM information_schema.processlist WHERE db='$SIMBA_MYSQL_DATABASE' AND id <> CONNECTION_ID()")
        for id in $ids; do "$SIMBA_MYSQL_CTL" sql "KILL $id" 2>/dev/null; done ;;
    pg)
        "$SIMBA_PG_CTL" sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'simba'" \
            >/dev/null 2>&1 ;;
    zk) # ZooKeeper has no command for it: close the server ends of every
        # client connection (ss -K, SOCK_DESTROY) so that the clients see a reset
        for n in 1 2 3; do
            ss -K -tn "sport = :$("$SIMBA_ZK_CTL" port "$n")" >/dev/null 2>&1
        done ;;
    esac
    record conn_kill "$t0" "$(now)"
}

zk_node_with_mode() {   # $1 leader|follower: the first such node
    local n
    for n in 1 2 3; do
        "$SIMBA_ZK_CTL" srvr "$n" | grep -q "^Mode: $1" && { echo "$n"; return 0; }
    done
    return 1
}
f_zk_kill() {   # $1 leader|follower
    local n t0
    n=$(zk_node_with_mode "$1") || { echo "chaos $B: no $1 found"; return; }
    t0=$(now)
    "$SIMBA_ZK_CTL" kill "$n"
    sleep 1
    "$SIMBA_ZK_CTL" start "$n" >/dev/null || echo "chaos $B: node $n did not come back"
    record "$1_kill" "$t0" "$(now)"
}
f_follower_kill() { f_zk_kill follower; }
f_leader_kill() { f_zk_kill leader; }
f_leader_pause() { zk_pause leader; }
f_follower_pause() { zk_pause follower; }
zk_pause() {    # $1 leader|follower
    local n p t0
    n=$(zk_node_with_mode "$1") || { echo "chaos $B: no $1 found"; return; }
    p=$("$SIMBA_ZK_CTL" pid "$n")
    t0=$(now)
    kill -STOP "$p"; STOPPED+=("$p")
    sleep "$(ms $((LEASE_MS + 1000)))"
    kill -CONT "$p"
    "$SIMBA_ZK_CTL" wait "$n" >/dev/null || echo "chaos $B: node $n does not serve after the pause"
    record "$1_pause" "$t0" "$(now)"
}

# Item 6 of issue #9: F and its clients cut off from the leader and the other
# follower, silently, right after one of F's clients is granted (the window
# where a keepalive answered locally by F would extend a validity the leader
# no longer backs), for longer than the lease, then healed.
# F's clients keep their holds (SIGUSR1, see chaos_client.c) from just before
# the cut until the heal: a short hold would end in a release that F cannot
# commit, and its client would stall instead of believing on keepalives.
f_partition() {
    local p i t0 held=
    [ -n "${ZK_F:-}" ] || { echo "chaos $B: partition is a fault of the zk-partition round"; return; }
    kill -USR1 "${PIDS[1]}" "${PIDS[2]}" 2>/dev/null
    for _ in $(seq 1 100); do   # up to ~10 s for a holder among F's clients
        for i in 1 2; do
            p=${PIDS[$i]}
            [ -f "$STATE/$p" ] && { held=$p; break 2; }
        done
        sleep 0.1
    done
    [ -n "$held" ] || echo "chaos $B: no client of follower $ZK_F holds; partitioned anyway"
    t0=$(now)
    "$SIMBA_ZK_CTL" partition "$ZK_F" || echo "chaos $B: partition $ZK_F failed"
    sleep "$(ms $((LEASE_MS + 2000)))"
    "$SIMBA_ZK_CTL" heal "$ZK_F" || echo "chaos $B: heal $ZK_F failed"
    kill -USR2 "${PIDS[1]}" "${PIDS[2]}" 2>/dev/null
    "$SIMBA_ZK_CTL" wait "$ZK_F" >/dev/null 2>&1 || echo "chaos $B: node $ZK_F does not serve after the heal"
    record partition "$t0" "$(now)"
    # recovery on F's side too: one of its clients granted again (30 s at most)
    for _ in $(seq 1 300); do
        awk -v t="$LAST_END" '$1 == "A" && ($2 == "c1" || $2 == "c2") && $9 > t { ok = 1 } END { exit !ok }' "$LOG" && {
            echo "chaos $B: a client of follower $ZK_F granted again $(( ($(now) - LAST_END) / 1000000 )) ms (or less) after the heal"; return; }
        sleep 0.1
    done
    echo "chaos $B: FAIL: no client of follower $ZK_F granted within 30 s of the heal"
    PART_FAIL=1
}
PART_FAIL=0

# ---- Redis Cluster: slots that move, masters that come, go and fail over ----
# Redis 7.0 turns a master that migrated its last slot away into a replica
# of the slot's new master, and in that race the new master was seen to
# drop the slot from its own view (cluster_state:fail on it, every other
# node naming it the owner): the topology is kept predictable by turning
# that off (cluster-allow-replica-migration no) on every node that starts.
no_replica_migration() {
    local p
    for p in "$@"; do rcli "$p" config set cluster-allow-replica-migration no >/dev/null 2>&1; done
}
# A migration of slot $1 to the master at port $2, bounded (redis_topo_ctl.sh
# retries a MIGRATE that a target refuses for as long as it refuses).
ctl_migrate() {
    local rc
    timeout 60 "$CTL" migrate "$1" "$2" 2>"$WORK/migrate.err"
    rc=$?
    sed "s/^/chaos $B: /" "$WORK/migrate.err"
    [ "$rc" = 124 ] && echo "chaos $B: the migration of slot $1 to $2 still ran after 60 s: the slot is left half moved"
    return "$rc"
}
# (the slots of m and s: SLOT_M, SLOT_S; a master serving no slot is skipped)
masters_now() {    # the ports of the masters that serve a slot, one a line
    local p
    for p in $(node_ports_now); do
        rcli "$p" role 2>/dev/null | head -n 1 | grep -q master || continue
        rcli "$p" cluster nodes 2>/dev/null | grep myself | awk '{ exit !($9 != "") }' && echo "$p"
    done
}
node_ports_now() { local f; for f in "$(dirname "$CTL")"/n[0-9].port; do [ -f "$f" ] && cat "$f"; done; }
replica_of() {     # the port of a replica of the master at port $1
    local id
    id=$(rcli "$1" cluster myid)
    rcli "$1" cluster nodes | awk -v id="$id" '$4 == id && $3 ~ /slave/ && $3 !~ /fail/ { split($2, a, "[:@]"); print a[2]; exit }'
}
# The next master of the first ones (with a replica) after the one serving $1.
next_master() {
    local now p pick= seen=0
    now=$("$CTL" slot-port "$1")
    for p in $(masters_now) $(masters_now); do
        echo " $FIRST_MASTERS_NOW " | grep -q " $p " || continue
        if [ "$seen" = 1 ] && [ "$p" != "$now" ]; then pick=$p; break; fi
        [ "$p" = "$now" ] && seen=1
    done
    [ -n "$pick" ] || pick=$(masters_now | head -n 1)
    echo "$pick"
}
first_masters_now() {   # the masters now that have a replica (the spare never has one)
    local p
    FIRST_MASTERS_NOW=
    for p in $(masters_now); do [ -n "$(replica_of "$p")" ] && FIRST_MASTERS_NOW="$FIRST_MASTERS_NOW $p"; done
}
# A fault is over when the nodes agree (redis_topo_ctl.sh wait-settled): a
# migration picked while the demoted master of a fail-over still calls itself
# master moved a slot into it, and its keys stayed on it as a replica while
# the others named the new master the owner (the slot's locks stopped for
# good, and every client's keepalives with them).
settle() {
    "$CTL" wait-settled && return 0
    echo "chaos $B: failed to settle (the nodes' views differ) $1; the nodes say:"
    cluster_says
}
f_migrate() {
    local t0 to
    settle "before a migration"
    first_masters_now
    t0=$(now)
    to=$(next_master "$SLOT_M"); ctl_migrate "$SLOT_M" "$to" || echo "chaos $B: failed to migrate m's slot $SLOT_M to $to"
    to=$(next_master "$SLOT_S"); ctl_migrate "$SLOT_S" "$to" || echo "chaos $B: failed to migrate s's slot $SLOT_S to $to"
    record migrate "$t0" "$(now)"
}
f_add_master() {
    local t0 p
    t0=$(now)
    p=$("$CTL" add-master) || { echo "chaos $B: failed to add a master"; return; }
    no_replica_migration "$p"
    ctl_migrate "$SLOT_M" "$p" || echo "chaos $B: failed to migrate m's slot to the new master $p"
    record add_master "$t0" "$(now)"
}
cluster_says() {   # every node's state and its view of the masters
    local p
    for p in $(node_ports_now); do
        echo "  | $p: $(rcli "$p" cluster info 2>/dev/null | grep cluster_state | tr -d '\r')"
        rcli "$p" cluster nodes 2>/dev/null | awk '$3 ~ /master|fail/ { print "  |   " $2, $3, $9, $10 }'
    done
}
f_remove_master() {
    local t0 p
    first_masters_now
    t0=$(now)
    p=$(echo $FIRST_MASTERS_NOW | awk '{ print $1 }')
    ctl_migrate "$SLOT_M" "$p" || echo "chaos $B: failed to migrate m's slot back to $p"
    ctl_migrate "$SLOT_S" "$p" || echo "chaos $B: failed to migrate s's slot back to $p"
    "$CTL" remove-master || { echo "chaos $B: failed to remove the added master; the nodes say:"; cluster_says; }
    record remove_master "$t0" "$(now)"
}
f_cluster_failover() {
    local t0 m r
    m=$("$CTL" slot-port "$SLOT_S")
    r=$(replica_of "$m")
    [ -n "$r" ] || { echo "chaos $B: s's master $m has no replica"; return; }
    t0=$(now)
    "$CTL" cluster-failover "$r" || echo "chaos $B: CLUSTER FAILOVER on $r failed"
    for _ in $(seq 1 100); do
        rcli "$r" role 2>/dev/null | head -n 1 | grep -q master && break
        sleep 0.1
    done
    "$CTL" wait-ok || echo "chaos $B: the cluster is not ok after the fail-over"
    settle "after the fail-over"
    record cluster_failover "$t0" "$(now)"
}
f_master_kill() {
    local t0 t1 m r p
    m=$("$CTL" slot-port "$SLOT_S")
    r=$(replica_of "$m")
    [ -n "$r" ] || { echo "chaos $B: s's master $m has no replica"; return; }
    t0=$(now)
    "$CTL" kill "$m"
    # a replica of it takes over (any: replica migration may have given it
    # two, and the one with the freshest data wins the election)
    for _ in $(seq 1 200); do
        p=$("$CTL" slot-port "$SLOT_S" 2>/dev/null)
        [ -n "$p" ] && [ "$p" != "$m" ] && rcli "$p" role 2>/dev/null | head -n 1 | grep -q master && break
        p=
        sleep 0.1
    done
    # the fault ends when a replica took over; the killed node then comes
    # back (empty, as a replica) before the next fault
    record master_kill "$t0" "$(now)"
    if [ -z "$p" ]; then
        echo "chaos $B: no replica of the killed master $m took over within 20 s; the log of $r:"
        grep -iE "fail|elect|vote|replica of" "$(dirname "$CTL")/$(basename "$(grep -lx "$r" "$(dirname "$CTL")"/n[0-9].port)" .port).log" | tail -n 12 | sed "s/^/  | /"
    fi
    t1=$(now)
    "$CTL" start "$m" >/dev/null || echo "chaos $B: the killed master $m did not start again"
    no_replica_migration "$m"
    "$CTL" wait-ok || echo "chaos $B: the cluster is not ok after the kill"
    settle "after the kill"
    echo "chaos $B: the killed master is back as a replica after $(( ($(now) - t1) / 1000000 )) ms"
}

# After a fault: wait (at most 30 s) for a grant on both names, so that every
# fault's recovery is measured on its own. The checker measures it from the log.
wait_recovery() {   # $1 fault end ns
    for _ in $(seq 1 300); do
        awk -v t="$1" '$1 == "A" && $9 > t { seen[$5] = 1 } END { exit !(seen["m"] && seen["s"]) }' "$LOG" && return 0
        sleep 0.1
    done
    echo "chaos $B: no grant on both names within 30 s of the last fault"
    if dump_state >"$LOGDIR/$B.state" 2>&1; then
        # the queues of m and s as lines the run's summary keeps (tests/run_all.sh)
        awk '/^== node/ { node = $3 } /^-- / { show = ($2 ~ /\{chaos:(6d|73)\}/) } show && !/^-- .*none pttl/ { print "chaos '"$B"': state " node " " $0 }' "$LOGDIR/$B.state" | head -n 30
        echo "chaos $B: the whole state then is in $LOGDIR/$B.state"
    fi
}

# What the server holds for the chaos tenant, for a round that did not
# recover (Redis: every node's role and view of the cluster, and every key
# with its content and ttl, read by tests/chaos/dump_keys.lua on a READONLY
# connection, so that a replica's keys show too).
dump_state() {
    local p lua
    case "$B" in
    redis|redis-cluster)
        if [ "$B" = redis ]; then set -- "$SIMBA_REDIS_PORT"; else set -- $(node_ports_now); fi
        # the script as one double-quoted argument of redis-cli's command line
        lua=$(sed 's/\\/\\\\/g; s/"/\\"/g' tests/chaos/dump_keys.lua | awk '{ printf "%s\\n", $0 }')
        for p in "$@"; do
            echo "== node $p: $(redis-cli -h 127.0.0.1 -p "$p" role 2>&1 | head -n 1)"
            # its view of the cluster, with the slots it migrates or imports ([slot->-id], [slot-<-id])
            [ "$B" = redis-cluster ] && redis-cli -h 127.0.0.1 -p "$p" cluster nodes 2>&1 | sed 's/^/   nodes: /'
            printf 'READONLY\nEVAL "%s" 0\n' "$lua" | redis-cli -h 127.0.0.1 -p "$p" 2>&1 | sed 1d
        done
        echo "== time $(now)" ;;
    *) return 1 ;;
    esac
}

keep_clients() {    # a client that died by itself is a finding: say so, start another
    local i rc
    for i in "${!PIDS[@]}"; do
        if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
            wait "${PIDS[$i]}" 2>/dev/null
            rc=$?
            echo "chaos $B: client $i (pid ${PIDS[$i]}) exited by itself (exit $rc)"
            echo "X c$i ${PIDS[$i]} - EXITED $rc $(now)" >>"$LOG"
            start_client "$i"
        fi
    done
}

[ "$B" = redis-cluster ] && no_replica_migration $(node_ports_now)
echo "chaos $B: $NCLIENTS clients, ttl $CHAOS_TTL_MS ms, transition $CHAOS_TRANSITION_MS ms, ~$SECS s, faults: $FAULTS"
START=$SECONDS
sleep 2
round=0
while :; do
    for f in $FAULTS; do
        if [ $round -gt 0 ] && [ $((SECONDS - START)) -ge "$SECS" ]; then break 2; fi
        keep_clients
        LAST_END=$(now)
        "f_$f"
        wait_recovery "$LAST_END"
        keep_clients
        sleep 0.5
    done
    round=$((round + 1))
    [ $((SECONDS - START)) -ge "$SECS" ] && break
done
sleep 1

# stop the clients (their beliefs end with an "exit" record), then check
# (a client that hangs on SIGTERM, or exits non-zero, e.g. with an ASan report
# from CHAOS_BIN=build/asan/chaos_client, is a finding like a crash)
for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
for i in "${!PIDS[@]}"; do
    p=${PIDS[$i]}
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then
        echo "chaos $B: client $i (pid $p) did not exit within 10 s of SIGTERM"
        kill -9 "$p" 2>/dev/null
    fi
    wait "$p" 2>/dev/null
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "chaos $B: client $i (pid $p) ended with exit $rc"
        echo "X c$i $p - EXITED $rc $(now)" >>"$LOG"
    fi
done
if [ -s "$WORK/client.err" ]; then
    echo "chaos $B: client stderr (last lines):"; tail -n 5 "$WORK/client.err" | sed 's/^/  | /'
fi
python3 tests/chaos/check.py "$LOG" "$B" --ttl-ms "$CHAOS_TTL_MS" --lease-ms "$LEASE_MS" --expect "$FAULTS" \
    ${RECOVERY_MS:+--recovery-ms "$RECOVERY_MS"} || exit 1
[ "$PART_FAIL" = 0 ] || { echo "chaos $B: FAIL (follower $ZK_F's clients did not recover after a heal)"; exit 1; }
