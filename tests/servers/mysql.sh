#!/usr/bin/env bash
# tests/servers/mysql.sh -- a throw-away MariaDB server for simba's tests.
#
#   tests/servers/mysql.sh run CMD ARGS...
#
# Creates a fresh data directory in a new temp dir (mktemp -d), starts
# mariadbd on a free loopback port (127.0.0.1 only, plus a unix socket in the
# temp dir), creates the database, runs CMD with the variables below, then
# stops the server and deletes the temp dir, also when CMD fails or the script
# is interrupted. Exits with CMD's exit code. Never touches the system service,
# its data, its config files (--no-defaults) or any fixed port.
#
# Exported to CMD:
#   SIMBA_MYSQL_HOST      127.0.0.1
#   SIMBA_MYSQL_PORT      the TCP port
#   SIMBA_MYSQL_SOCKET    the unix socket path
#   SIMBA_MYSQL_USER      root (no password; grants are enforced, so tests
#                         can create a least-privilege user of their own)
#   SIMBA_MYSQL_PASSWORD  "" (empty)
#   SIMBA_MYSQL_DATABASE  simba_test (created empty)
#   SIMBA_MYSQL_CTL       a script that controls this server:
#                           $SIMBA_MYSQL_CTL kill      SIGKILL the server (a crash)
#                           $SIMBA_MYSQL_CTL start     start it again (same port, same data)
#                                                      and wait until it answers
#                           $SIMBA_MYSQL_CTL restart   kill + start
#                           $SIMBA_MYSQL_CTL stop      SIGSTOP the server (it hangs, sockets stay open)
#                           $SIMBA_MYSQL_CTL cont      SIGCONT it
#                           $SIMBA_MYSQL_CTL sql 'SQL' run SQL as root (mariadb client)
#
# Runs as root (mariadbd --user=root) or as any user. Needs mariadb-server
# and mariadb-client (`make deps`).
set -u

die() { echo "mysql.sh: $*" >&2; exit 2; }
. "$(dirname "$0")/ports.sh"     # port_claim, ports_release
. "$(dirname "$0")/run_cmd.sh"   # run_cmd, run_cmd_stop

[ "${1:-}" = run ] || die "usage: $0 run CMD ARGS..."
shift
[ $# -gt 0 ] || die "usage: $0 run CMD ARGS..."

MARIADBD=$(command -v mariadbd || command -v mysqld || ls /usr/sbin/mariadbd 2>/dev/null) \
    || die "mariadbd not found (apt-get install mariadb-server)"
INSTALL_DB=$(command -v mariadb-install-db || command -v mysql_install_db) \
    || die "mariadb-install-db not found (apt-get install mariadb-server)"
CLIENT=$(command -v mariadb || command -v mysql) || die "mariadb client not found"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/simba-mysql.XXXXXX") || die "mktemp failed"
cleanup() {
    if [ -f "$TMP/pid" ]; then
        pid=$(cat "$TMP/pid")
        kill -CONT "$pid" 2>/dev/null
        kill "$pid" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    fi
    rm -rf "$TMP"
    ports_release
}
trap cleanup EXIT
trap run_cmd_stop INT TERM HUP

USER_OPT=()
[ "$(id -u)" = 0 ] && USER_OPT=(--user=root)

# A tmpdir of our own: a mariadbd that starts deletes the '#sql*' temp files
# it finds in its tmpdir, so servers sharing /tmp (tests in parallel lanes,
# the CLI's tests) would delete each other's and fail mariadb-install-db.
mkdir -p "$TMP/tmp"
"$INSTALL_DB" --no-defaults "${USER_OPT[@]}" --datadir="$TMP/data" --tmpdir="$TMP/tmp" \
    --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
    >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log" >&2; die "mariadb-install-db failed"; }

# The control script: everything about starting the server lives here, so the
# tests can kill and restart it the same way this script first starts it.
cat >"$TMP/ctl" <<EOF
#!/usr/bin/env bash
set -u
TMP='$TMP'
start() {
    port=\$(cat "\$TMP/port")
    '$MARIADBD' --no-defaults ${USER_OPT[*]} --datadir="\$TMP/data" --tmpdir="\$TMP/tmp" \\
        --socket="\$TMP/sock" --port="\$port" --bind-address=127.0.0.1 \\
        --pid-file="\$TMP/mariadbd.pid" --log-error="\$TMP/error.log" \\
        --skip-name-resolve --skip-log-bin --performance-schema=OFF \\
        --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \\
        --max-connections=\${SIMBA_MYSQL_MAX_CONNECTIONS:-400} --max-allowed-packet=64M \\
        --innodb-flush-log-at-trx-commit=\${SIMBA_MYSQL_FLUSH:-1} \\
        </dev/null >>"\$TMP/server.out" 2>&1 &
    echo \$! >"\$TMP/pid"
    for _ in \$(seq 1 300); do
        if '$CLIENT' --no-defaults -uroot --socket="\$TMP/sock" -e 'SELECT 1' >/dev/null 2>&1; then
            return 0
        fi
        kill -0 "\$(cat "\$TMP/pid")" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
kill9() {
    [ -f "\$TMP/pid" ] || return 0
    pid=\$(cat "\$TMP/pid")
    kill -9 "\$pid" 2>/dev/null
    for _ in \$(seq 1 100); do kill -0 "\$pid" 2>/dev/null || break; sleep 0.05; done
    rm -f "\$TMP/pid" "\$TMP/sock"
}
# SIGSTOP / SIGCONT: a server that hangs without closing its connections
pause_srv() { [ -f "\$TMP/pid" ] && kill -STOP "\$(cat "\$TMP/pid")"; }
resume_srv() { [ -f "\$TMP/pid" ] && kill -CONT "\$(cat "\$TMP/pid")"; }
case "\${1:-}" in
    start) start ;;
    stop) pause_srv ;;
    cont) resume_srv ;;
    kill) kill9 ;;
    restart) kill9; start ;;
    sql) shift; '$CLIENT' --no-defaults -uroot --socket="\$TMP/sock" -N -B -e "\$1" ;;
    *) echo "usage: \$0 start|kill|restart|stop|cont|sql SQL" >&2; exit 2 ;;
esac
EOF
chmod +x "$TMP/ctl"

# A free port (tests/servers/ports.sh), retried when the server cannot bind it.
started=0
for _ in 1 2 3 4 5 6 7 8; do
    port=$(port_claim) || die "no free port"
    echo "$port" >"$TMP/port"
    if "$TMP/ctl" start; then started=1; break; fi
    "$TMP/ctl" kill
done
if [ $started = 0 ]; then
    tail -20 "$TMP/error.log" >&2 2>/dev/null
    die "mariadbd did not start"
fi

"$TMP/ctl" sql "CREATE DATABASE simba_test" || die "CREATE DATABASE failed"

export SIMBA_MYSQL_HOST=127.0.0.1
export SIMBA_MYSQL_PORT=$port
export SIMBA_MYSQL_SOCKET="$TMP/sock"
export SIMBA_MYSQL_USER=root
export SIMBA_MYSQL_PASSWORD=
export SIMBA_MYSQL_DATABASE=simba_test
export SIMBA_MYSQL_CTL="$TMP/ctl"

run_cmd "$@"
rc=$?
exit $rc
