#!/usr/bin/env bash
# tests/servers/redis.sh -- throw-away Redis servers for simba's tests and benchmarks.
#
#   tests/servers/redis.sh run CMD ARGS...
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
# Works as root or as any user. Needs redis-server and redis-tools (`make deps`).
set -u

die() { echo "redis.sh: $*" >&2; exit 2; }

[ "${1:-}" = run ] || die "usage: $0 run CMD ARGS..."
shift
[ $# -gt 0 ] || die "usage: $0 run CMD ARGS..."

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
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

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
    *) echo "usage: \$0 kill|start|restart [name]" >&2; exit 2 ;;
esac
EOF
chmod +x "$TMP/ctl.sh"

# start_server NAME EXTRA_ARGS...: on a free port; prints the port.
start_server() {
    local name=$1 port try
    shift
    for try in $(seq 1 40); do
        port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
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

"$@"
rc=$?
exit $rc
