#!/usr/bin/env bash
# tests/servers/redis.sh -- throw-away Redis servers for simba's tests and benchmarks.
#
#   tests/servers/redis.sh run CMD ARGS...        one server (+ an auth server and its replica)
#   tests/servers/redis.sh sentinel CMD ARGS...   a master, two replicas, three sentinels
#   tests/servers/redis.sh cluster CMD ARGS...    a Redis Cluster: 3 masters + 3 replicas
#
# Makes a new temp dir (mktemp -d), starts redis-server instances on free
# loopback ports (127.0.0.1 only, no persistence, each with its own dir under
# the temp dir), runs CMD with the variables below, then stops the servers
# and deletes the temp dir, also when CMD fails or the script is interrupted.
# Exits with CMD's exit code. Never uses the system service, its config or a
# fixed port.
#
# Exported to CMD:
#   SIMBA_REDIS_HOST           127.0.0.1
#   SIMBA_REDIS_PORT           the main server (no password; DEBUG allowed from loopback)
#   SIMBA_REDIS_SOCKET         the main server's unix socket
#   SIMBA_REDIS_CTL            controls the main server:
#                                $SIMBA_REDIS_CTL kill      SIGKILL it (a crash; its data is gone)
#                                $SIMBA_REDIS_CTL start     start it again, same port, empty,
#                                                           and wait until it answers PING
#                                $SIMBA_REDIS_CTL restart   kill + start
#   SIMBA_REDIS_AUTH_PORT      a second server with requirepass (for AUTH and ACL tests)
#   SIMBA_REDIS_AUTH_PASSWORD  its password (user "default")
#   SIMBA_REDIS_REPLICA_PORT   a replica of the auth server (for WAIT tests)
#
# Exported in sentinel mode (servers master, r1, r2; sentinels s1 s2 s3,
# quorum 2, down-after 1000 ms, master name "simba"):
#   SIMBA_SENTINEL_ADDRS       "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
#   SIMBA_SENTINEL_MASTER      simba
#   SIMBA_REDIS_HOST, SIMBA_REDIS_PORT   the master at the start
# Exported in cluster mode (servers n1..n6, node timeout 1000 ms; a spare
# node n7, stopped until `$SIMBA_REDIS_CTL add-master` starts it):
#   SIMBA_REDIS_CLUSTER_SEEDS  "127.0.0.1:p1,...,127.0.0.1:p6"
# In both, SIMBA_REDIS_CTL takes the commands of tests/servers/redis_topo_ctl.sh
# (master, failover, wait-ok, slot-port, migrate, cluster-failover,
# add-master, remove-master, and kill/start/restart/stop/cont of a server by
# name or port).
#
# Works as root or as any user. Needs redis-server and redis-tools (`make deps`).
set -u

die() { echo "redis.sh: $*" >&2; exit 2; }
. "$(dirname "$0")/ports.sh"     # port_claim, ports_release
. "$(dirname "$0")/run_cmd.sh"   # run_cmd, run_cmd_stop

MODE=${1:-}
case "$MODE" in run|sentinel|cluster) ;; *) die "usage: $0 run|sentinel|cluster CMD ARGS..." ;; esac
shift
[ $# -gt 0 ] || die "usage: $0 $MODE CMD ARGS..."
HERE=$(cd "$(dirname "$0")" && pwd)

SERVER=$(command -v redis-server || ls /usr/bin/redis-server 2>/dev/null) \
    || die "redis-server not found (apt-get install redis-server)"
CLI=$(command -v redis-cli) || die "redis-cli not found (apt-get install redis-tools)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/simba-redis.XXXXXX") || die "mktemp failed"
cleanup() {
    local f pid
    for f in "$TMP"/*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        kill -9 "$pid" 2>/dev/null
    done
    for f in "$TMP"/*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    done
    rm -rf "$TMP"
    ports_release
}
trap cleanup EXIT
trap run_cmd_stop INT TERM HUP

PASSWORD="pw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"

# The control script: it knows how to (re)start one named server. Each server
# has $TMP/<name>.args (its arguments, one per line) and $TMP/<name>.pid.
cat > "$TMP/ctl.sh" <<EOF
#!/usr/bin/env bash
# usage: ctl.sh kill|start|restart [name]   (name defaults to "main")
set -u
TMP='$TMP'
SERVER='$SERVER'
CLI='$CLI'
cmd=\${1:-}
name=\${2:-main}
[ -f "\$TMP/\$name.args" ] || { echo "ctl.sh: no server \$name" >&2; exit 2; }
port=\$(cat "\$TMP/\$name.port")
do_kill() {
    [ -f "\$TMP/\$name.pid" ] || return 0
    pid=\$(cat "\$TMP/\$name.pid")
    kill -9 "\$pid" 2>/dev/null
    for _ in \$(seq 1 100); do kill -0 "\$pid" 2>/dev/null || break; sleep 0.05; done
    rm -f "\$TMP/\$name.pid"
}
do_start() {
    mapfile -t args < "\$TMP/\$name.args"
    rm -rf "\$TMP/\$name" && mkdir -p "\$TMP/\$name"
    setsid "\$SERVER" "\${args[@]}" </dev/null >>"\$TMP/\$name.out" 2>&1 &
    echo \$! > "\$TMP/\$name.pid"
    for _ in \$(seq 1 100); do
        if "\$CLI" -h 127.0.0.1 -p "\$port" --no-auth-warning \$(cat "\$TMP/\$name.auth" 2>/dev/null) ping 2>/dev/null | grep -q PONG; then
            return 0
        fi
        kill -0 "\$(cat "\$TMP/\$name.pid")" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
case "\$cmd" in
    kill) do_kill ;;
    start) do_start || { echo "ctl.sh: \$name did not start" >&2; exit 1; } ;;
    restart) do_kill; do_start || { echo "ctl.sh: \$name did not start" >&2; exit 1; } ;;
    stop) kill -STOP "\$(cat "\$TMP/\$name.pid")" ;;
    cont) kill -CONT "\$(cat "\$TMP/\$name.pid")" ;;
    *) echo "usage: \$0 kill|start|restart|stop|cont [name]" >&2; exit 2 ;;
esac
EOF
chmod +x "$TMP/ctl.sh"

# start_server NAME EXTRA_ARGS...: on a free port; prints the port.
start_server() {
    local name=$1 port try
    shift
    for try in $(seq 1 40); do
        port=$(port_claim) || return 1
        {
            printf '%s\n' --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
                --dir "$TMP/$name" --logfile "$TMP/$name.log" --daemonize no \
                --protected-mode yes "$@"
        } > "$TMP/$name.args"
        echo "$port" > "$TMP/$name.port"
        if "$TMP/ctl.sh" start "$name" 2>/dev/null; then
            echo "$port"
            return 0
        fi
        "$TMP/ctl.sh" kill "$name" 2>/dev/null
    done
    return 1
}

# ---- sentinel mode: master + r1 + r2, sentinels s1 s2 s3 (quorum 2) ----

# start_sentinel NAME MASTER_PORT: on a free port; prints the port.
start_sentinel() {
    local name=$1 master=$2 port
    for _ in $(seq 1 40); do
        port=$(port_claim) || return 1
        printf '%s\n' "port $port" "bind 127.0.0.1" "daemonize no" "dir $TMP" \
            "logfile $TMP/$name.log" "sentinel resolve-hostnames no" \
            "sentinel monitor simba 127.0.0.1 $master 2" \
            "sentinel down-after-milliseconds simba 1000" \
            "sentinel failover-timeout simba 4000" \
            "sentinel parallel-syncs simba 2" > "$TMP/$name.conf"
        printf '%s\n' "$TMP/$name.conf" --sentinel > "$TMP/$name.args"
        echo "$port" > "$TMP/$name.port"
        if "$TMP/ctl.sh" start "$name" 2>/dev/null; then echo "$port"; return 0; fi
        "$TMP/ctl.sh" kill "$name" 2>/dev/null
    done
    return 1
}

# wait_synced PORT: until that replica's link to its master is up.
wait_synced() {
    for _ in $(seq 1 200); do
        "$CLI" -h 127.0.0.1 -p "$1" info replication 2>/dev/null | grep -q 'master_link_status:up' && return 0
        sleep 0.05
    done
    return 1
}

# sentinel_field PORT FIELD: a field of SENTINEL MASTER simba.
sentinel_field() {
    "$CLI" -h 127.0.0.1 -p "$1" sentinel master simba 2>/dev/null | awk -v f="$2" 'p { print; exit } $0 == f { p = 1 }'
}

make_topo_ctl() {
    printf '#!/usr/bin/env bash\nexec %q %q %q "$@"\n' "$HERE/redis_topo_ctl.sh" "$TMP" "$CLI" > "$TMP/topo.sh"
    chmod +x "$TMP/topo.sh"
    export SIMBA_REDIS_CTL=$TMP/topo.sh
}

start_sentinel_topology() {
    local m r1 r2 s1 s2 s3 s ok
    m=$(start_server master --repl-diskless-sync-delay 0 --enable-debug-command local) || die "could not start the master"
    r1=$(start_server r1 --replicaof 127.0.0.1 "$m" --repl-diskless-sync-delay 0 --enable-debug-command local) || die "could not start r1"
    r2=$(start_server r2 --replicaof 127.0.0.1 "$m" --repl-diskless-sync-delay 0 --enable-debug-command local) || die "could not start r2"
    wait_synced "$r1" && wait_synced "$r2" || die "the replicas did not sync"
    s1=$(start_sentinel s1 "$m") || die "could not start s1"
    s2=$(start_sentinel s2 "$m") || die "could not start s2"
    s3=$(start_sentinel s3 "$m") || die "could not start s3"
    # a fail-over needs sentinels that know each other and both replicas
    for _ in $(seq 1 300); do
        ok=1
        for s in "$s1" "$s2" "$s3"; do
            [ "$(sentinel_field "$s" num-other-sentinels)" = 2 ] && [ "$(sentinel_field "$s" num-slaves)" = 2 ] || ok=0
        done
        [ "$ok" = 1 ] && break
        sleep 0.1
    done
    [ "$ok" = 1 ] || die "the sentinels did not find each other and the replicas"
    make_topo_ctl
    export SIMBA_SENTINEL_ADDRS="127.0.0.1:$s1,127.0.0.1:$s2,127.0.0.1:$s3"
    export SIMBA_SENTINEL_MASTER=simba
    export SIMBA_REDIS_HOST=127.0.0.1
    export SIMBA_REDIS_PORT=$m
}

# ---- cluster mode: n1..n6, three masters with a replica each ----
start_cluster_topology() {
    local i p bus seeds="" addrs=()
    for i in 1 2 3 4 5 6; do
        # The bus port is claimed too: the default (port + 10000) may lie in
        # the ephemeral range, where a restarted node could find it taken.
        bus=$(port_claim) || die "no free port"
        p=$(start_server "n$i" --cluster-enabled yes --cluster-config-file "$TMP/n$i.nodes.conf" \
            --cluster-port "$bus" \
            --cluster-node-timeout 1000 --cluster-replica-validity-factor 0 --enable-debug-command local) || die "could not start n$i"
        addrs+=("127.0.0.1:$p")
        seeds="$seeds${seeds:+,}127.0.0.1:$p"
    done
    "$CLI" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$TMP/create.log" 2>&1 \
        || { cat "$TMP/create.log" >&2; die "redis-cli --cluster create failed"; }
    # a spare node n7 for `add-master` (redis_topo_ctl.sh): its ports are
    # claimed here, so they stay ours until this script ends, and its
    # arguments written; it is started only when a test adds it
    bus=$(port_claim) || die "no free port"
    p=$(port_claim) || die "no free port"
    printf '%s\n' --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$TMP/n7" \
        --logfile "$TMP/n7.log" --daemonize no --protected-mode yes --cluster-enabled yes \
        --cluster-config-file "$TMP/n7.nodes.conf" --cluster-port "$bus" --cluster-node-timeout 1000 \
        --cluster-replica-validity-factor 0 --enable-debug-command local > "$TMP/spare.args"
    echo "$p" > "$TMP/spare.port"
    echo "$bus" > "$TMP/spare.bus"
    make_topo_ctl
    "$TMP/topo.sh" wait-ok || die "the cluster did not reach cluster_state:ok"
    export SIMBA_REDIS_CLUSTER_SEEDS=$seeds
    export SIMBA_REDIS_HOST=127.0.0.1
}

start_single() {
    MAIN_PORT=$(start_server main --unixsocket "$TMP/main.sock" --unixsocketperm 700 \
        --enable-debug-command local) || die "could not start the main redis-server"
    printf '%s\n' -a "$PASSWORD" > "$TMP/auth.auth"
    AUTH_PORT=$(start_server auth --requirepass "$PASSWORD" --enable-debug-command local \
        --repl-diskless-sync-delay 0) \
        || die "could not start the auth redis-server"
    printf '%s\n' -a "$PASSWORD" > "$TMP/replica.auth"
    REPLICA_PORT=$(start_server replica --requirepass "$PASSWORD" --masterauth "$PASSWORD" \
        --replicaof 127.0.0.1 "$AUTH_PORT") || die "could not start the replica"

    # the replica is useful once it has synced
    for _ in $(seq 1 100); do
        "$CLI" -h 127.0.0.1 -p "$REPLICA_PORT" --no-auth-warning -a "$PASSWORD" info replication 2>/dev/null \
            | grep -q 'master_link_status:up' && break
        sleep 0.05
    done

    export SIMBA_REDIS_HOST=127.0.0.1
    export SIMBA_REDIS_PORT=$MAIN_PORT
    export SIMBA_REDIS_SOCKET=$TMP/main.sock
    export SIMBA_REDIS_CTL=$TMP/ctl.sh
    export SIMBA_REDIS_AUTH_PORT=$AUTH_PORT
    export SIMBA_REDIS_AUTH_PASSWORD=$PASSWORD
    export SIMBA_REDIS_REPLICA_PORT=$REPLICA_PORT
}

case "$MODE" in
    run) start_single ;;
    sentinel) start_sentinel_topology ;;
    cluster) start_cluster_topology ;;
esac

run_cmd "$@"
rc=$?
exit $rc
