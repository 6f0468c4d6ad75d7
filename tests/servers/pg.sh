#!/usr/bin/env bash
# tests/servers/pg.sh -- a throw-away PostgreSQL server for simba's tests.
#
#   tests/servers/pg.sh run CMD ARGS...
#
# Creates a fresh cluster (initdb) in a new temp dir (mktemp -d), starts
# postgres on a free loopback port (127.0.0.1 only, plus a unix socket in the
# temp dir), creates the database, runs CMD with the variables below, then
# stops the server and deletes the temp dir, also when CMD fails or the script
# is interrupted. Exits with CMD's exit code. Never touches the system service,
# its data, its config files or any fixed port.
#
# PostgreSQL refuses to run as root: when this script runs as root, initdb and
# postgres run as the unprivileged user $SIMBA_PG_OS_USER (default nobody),
# which owns the temp dir's data directory.
#
# Exported to CMD:
#   SIMBA_PG_HOST      127.0.0.1
#   SIMBA_PG_PORT      the TCP port
#   SIMBA_PG_SOCKET    the directory of the unix socket
#   SIMBA_PG_USER      simba (a superuser, password "simba"; tests create
#                      least-privilege roles of their own)
#   SIMBA_PG_PASSWORD  simba
#   SIMBA_PG_DATABASE  simba_test (created empty)
#   SIMBA_PG_URL       postgres://simba:simba@127.0.0.1:PORT/simba_test
#   SIMBA_PG_CTL       a script that controls this server:
#                        $SIMBA_PG_CTL kill      SIGKILL the postmaster and its backends (a crash)
#                        $SIMBA_PG_CTL start     start it again (same port, same data)
#                                                and wait until it answers
#                        $SIMBA_PG_CTL restart   kill + start
#                        $SIMBA_PG_CTL stop      SIGSTOP the server (it hangs, sockets stay open)
#                        $SIMBA_PG_CTL cont      SIGCONT it
#                        $SIMBA_PG_CTL sql 'SQL' run SQL as the superuser (psql), rows on stdout
#                        $SIMBA_PG_CTL standby-start    a streaming-replication standby of
#                                                the server (pg_basebackup -R), started on
#                                                $SIMBA_PG_STANDBY_PORT, read-only (hot standby)
#                        $SIMBA_PG_CTL standby-detach   wait until the standby has replayed all
#                                                the server wrote, then cut it off: the
#                                                server's later commits never reach it (an
#                                                asynchronous standby's lag at a fail-over)
#                        $SIMBA_PG_CTL standby-promote  promote it (pg_ctl promote, waits):
#                                                from then on a primary of its own
#                        $SIMBA_PG_CTL standby-kill     SIGKILL it and delete its data
#                        $SIMBA_PG_CTL standby-sql 'SQL' run SQL on the standby
#   SIMBA_PG_STANDBY_PORT  the standby's TCP port (a standby runs only after standby-start)
#   SIMBA_PG_STANDBY_URL   postgres://simba:simba@127.0.0.1:STANDBY_PORT/simba_test
#
# Server settings from the environment: SIMBA_PG_MAX_CONNECTIONS (100),
# SIMBA_PG_FSYNC (on). Needs postgresql (`make deps`).
set -u

die() { echo "pg.sh: $*" >&2; exit 2; }
. "$(dirname "$0")/ports.sh"     # port_claim, ports_release
. "$(dirname "$0")/run_cmd.sh"   # run_cmd, run_cmd_stop

[ "${1:-}" = run ] || die "usage: $0 run CMD ARGS..."
shift
[ $# -gt 0 ] || die "usage: $0 run CMD ARGS..."

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PGBIN" ] && [ -x "$PGBIN/postgres" ] || PGBIN=$(dirname "$(command -v postgres 2>/dev/null || echo /nonexistent/x)")
[ -x "$PGBIN/postgres" ] && [ -x "$PGBIN/initdb" ] || die "postgres/initdb not found (apt-get install postgresql)"
PSQL=$(command -v psql) || PSQL="$PGBIN/psql"
[ -x "$PSQL" ] || die "psql not found (apt-get install postgresql-client)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/simba-pg.XXXXXX") || die "mktemp failed"
chmod 755 "$TMP"
cleanup() {
    for f in "$TMP/pid" "$TMP/standby_pid"; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        # a test may have left the server stopped (ctl stop): its children
        # too, or they would outlive it, stopped, once it is killed
        kids=$(pgrep -P "$pid" 2>/dev/null)
        kill -CONT "$pid" $kids 2>/dev/null
        kill -INT "$pid" 2>/dev/null          # fast shutdown
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" $kids 2>/dev/null
    done
    rm -rf "$TMP"
    ports_release
}
trap cleanup EXIT
trap run_cmd_stop INT TERM HUP

# Run as the server's OS user: ourselves, or an unprivileged one when root.
AS=()
if [ "$(id -u)" = 0 ]; then
    OSUSER=${SIMBA_PG_OS_USER:-nobody}
    id "$OSUSER" >/dev/null 2>&1 || die "user $OSUSER not found (set SIMBA_PG_OS_USER)"
    command -v setpriv >/dev/null || die "setpriv not found (util-linux)"
    AS=(setpriv --reuid="$OSUSER" --regid="$(id -g "$OSUSER")" --clear-groups --)
    # the OS user must be able to pass through the temp dir's parent (a
    # TMPDIR made by mktemp is 0700): add search permission there, nothing more
    "${AS[@]}" test -x "$(dirname "$TMP")" 2>/dev/null || chmod o+x "$(dirname "$TMP")" \
        || die "$OSUSER cannot reach $TMP"
fi
mkdir -p "$TMP/data" "$TMP/sock"
echo simba >"$TMP/pwfile"
[ ${#AS[@]} -gt 0 ] && chown -R "$OSUSER" "$TMP/data" "$TMP/sock" "$TMP/pwfile"
chmod 700 "$TMP/data"

# HOME and cwd the OS user can read: initdb and postgres look at them.
(cd "$TMP" && HOME="$TMP" "${AS[@]}" "$PGBIN/initdb" -D "$TMP/data" -U simba --pwfile="$TMP/pwfile" \
    --auth=scram-sha-256 --encoding=UTF8 --locale=C --no-sync >"$TMP/initdb.log" 2>&1) \
    || { cat "$TMP/initdb.log" >&2; die "initdb failed"; }
# the socket directory is trusted for the superuser's psql in ctl (tests use TCP + password)
# (and for a standby's pg_basebackup and streaming, over that socket too)
sed -i '1i local all simba trust\nlocal replication simba trust' "$TMP/data/pg_hba.conf"

# The control script: everything about starting the server lives here, so the
# tests can kill and restart it the same way this script first starts it.
cat >"$TMP/ctl" <<EOF
#!/usr/bin/env bash
set -u
TMP='$TMP'
AS=(${AS[*]:-})
# run_pg DATA PORT PIDFILE: postgres on DATA at PORT; waits until it answers
run_pg() {
    (cd "\$TMP" && export HOME="\$TMP" && exec "\${AS[@]}" '$PGBIN/postgres' -D "\$1" -p "\$2" \\
        -c listen_addresses=127.0.0.1 -c unix_socket_directories="\$TMP/sock" \\
        -c max_connections=\${SIMBA_PG_MAX_CONNECTIONS:-100} -c fsync=\${SIMBA_PG_FSYNC:-on} \\
        -c shared_buffers=32MB -c logging_collector=off -c log_min_messages=fatal \\
        </dev/null >>"\$TMP/server.log" 2>&1) &
    # the pid of postgres itself (the subshell and setpriv exec it)
    echo \$! >"\$3"
    for _ in \$(seq 1 300); do
        if '$PSQL' -h "\$TMP/sock" -p "\$2" -U simba -d postgres -XAtqc 'SELECT 1' >/dev/null 2>&1; then
            return 0
        fi
        kill -0 "\$(cat "\$3")" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
start() { run_pg "\$TMP/data" "\$(cat "\$TMP/port")" "\$TMP/pid"; }
sql_at() { '$PSQL' -h "\$TMP/sock" -p "\$1" -U simba -d simba_test -XAtq -v ON_ERROR_STOP=1 -c "\$2"; }
sport() { cat "\$TMP/standby_port"; }
standby_start() {
    standby_kill
    mkdir -m 700 "\$TMP/standby" && chown --reference="\$TMP/data" "\$TMP/standby" || return 1
    (cd "\$TMP" && HOME="\$TMP" "\${AS[@]}" '$PGBIN/pg_basebackup' -h "\$TMP/sock" -p "\$(cat "\$TMP/port")" \\
        -U simba -D "\$TMP/standby" -R -X stream -c fast --no-sync) >>"\$TMP/server.log" 2>&1 || return 1
    run_pg "\$TMP/standby" "\$(sport)" "\$TMP/standby_pid"
}
# until the standby has replayed what the server wrote; then no more streaming
standby_detach() {
    want=\$(sql_at "\$(cat "\$TMP/port")" 'SELECT pg_current_wal_lsn()') || return 1
    for _ in \$(seq 1 200); do
        [ "\$(sql_at "\$(sport)" "SELECT pg_last_wal_replay_lsn() >= '\$want'::pg_lsn")" = t ] && break
        sleep 0.05
    done
    sql_at "\$(sport)" "ALTER SYSTEM SET primary_conninfo = ''" >/dev/null || return 1
    sql_at "\$(sport)" 'SELECT pg_reload_conf()' >/dev/null || return 1
    for _ in \$(seq 1 200); do
        [ "\$(sql_at "\$(sport)" 'SELECT count(*) FROM pg_stat_wal_receiver')" = 0 ] && return 0
        sleep 0.05
    done
    return 1
}
standby_promote() { (cd "\$TMP" && HOME="\$TMP" "\${AS[@]}" '$PGBIN/pg_ctl' promote -w -t 30 -D "\$TMP/standby" >/dev/null); }
standby_kill() {
    if [ -f "\$TMP/standby_pid" ]; then
        kill -9 "\$(cat "\$TMP/standby_pid")" 2>/dev/null
        for _ in \$(seq 1 100); do kill -0 "\$(cat "\$TMP/standby_pid")" 2>/dev/null || break; sleep 0.05; done
    fi
    rm -rf "\$TMP/standby" "\$TMP/standby_pid"
}
pids() {
    # the postmaster and its children (backends die with it only after a while)
    [ -f "\$TMP/pid" ] || return 0
    pid=\$(cat "\$TMP/pid")
    echo "\$pid"
    pgrep -P "\$pid" 2>/dev/null
}
kill9() {
    [ -f "\$TMP/pid" ] || return 0
    ps=\$(pids)
    kill -9 \$ps 2>/dev/null
    for p in \$ps; do
        for _ in \$(seq 1 100); do kill -0 "\$p" 2>/dev/null || break; sleep 0.05; done
    done
    rm -f "\$TMP/pid" "\$TMP/data/postmaster.pid"
}
# SIGSTOP / SIGCONT: a server that hangs without closing its connections
pause_srv() { kill -STOP \$(pids) 2>/dev/null; }
resume_srv() { kill -CONT \$(pids) 2>/dev/null; }
case "\${1:-}" in
    start) start ;;
    stop) pause_srv ;;
    cont) resume_srv ;;
    kill) kill9 ;;
    restart) kill9; start ;;
    sql) shift; sql_at "\$(cat "\$TMP/port")" "\$1" ;;
    standby-start) standby_start ;;
    standby-detach) standby_detach ;;
    standby-promote) standby_promote ;;
    standby-kill) standby_kill ;;
    standby-sql) shift; sql_at "\$(sport)" "\$1" ;;
    *) echo "usage: \$0 start|kill|restart|stop|cont|sql SQL|standby-start|standby-detach|standby-promote|standby-kill|standby-sql SQL" >&2; exit 2 ;;
esac
EOF
chmod 755 "$TMP/ctl"

# The standby's port, claimed now (a test may start one), and the server's: a
# free port (tests/servers/ports.sh), retried when the server cannot bind it.
port_claim >"$TMP/standby_port" || die "no free port"
started=0
for _ in 1 2 3 4 5 6 7 8; do
    port=$(port_claim) || die "no free port"
    echo "$port" >"$TMP/port"
    if "$TMP/ctl" start; then started=1; break; fi
    "$TMP/ctl" kill
done
if [ $started = 0 ]; then
    tail -20 "$TMP/server.log" >&2 2>/dev/null
    die "postgres did not start"
fi

"$PSQL" -h "$TMP/sock" -p "$port" -U simba -d postgres -XAtq -c "CREATE DATABASE simba_test" >/dev/null \
    || die "CREATE DATABASE failed"

export SIMBA_PG_HOST=127.0.0.1
export SIMBA_PG_PORT=$port
export SIMBA_PG_SOCKET="$TMP/sock"
export SIMBA_PG_USER=simba
export SIMBA_PG_PASSWORD=simba
export SIMBA_PG_DATABASE=simba_test
export SIMBA_PG_URL="postgres://simba:simba@127.0.0.1:$port/simba_test"
export SIMBA_PG_CTL="$TMP/ctl"
export SIMBA_PG_STANDBY_PORT=$(cat "$TMP/standby_port")
export SIMBA_PG_STANDBY_URL="postgres://simba:simba@127.0.0.1:$SIMBA_PG_STANDBY_PORT/simba_test"

run_cmd "$@"
rc=$?
exit $rc
