#!/usr/bin/env bash
# tests/test_servers.sh -- the throw-away server scripts end with their
# command: a SIGTERM to tests/servers/{redis,mysql,zk,pg}.sh while the command
# runs ends the command and every server at once (not when the command
# ends by itself), as their header promises. Last line "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $1: $2"; fail=$((fail + 1)); }

# term_ends_all NAME: start NAME.sh with a command that sleeps, SIGTERM the
# script once the command runs, and check that the script, the command and
# the servers (every process naming the script's temp dir) are gone in 5 s
term_ends_all() {
    local name=$1 dir script cmd i left
    dir=$(mktemp -d "${TMPDIR:-/tmp}/simba-term.XXXXXX")
    TMPDIR=$dir tests/servers/$name.sh run sh -c "echo \$\$ > $dir/cmd.pid; exec sleep 300" >"$dir/out" 2>&1 &
    script=$!
    for i in $(seq 1 1200); do [ -s "$dir/cmd.pid" ] && break; sleep 0.05; done
    if [ ! -s "$dir/cmd.pid" ]; then
        kill -9 "$script" 2>/dev/null
        not_ok "$name.sh ends on SIGTERM" "its command never started"; tail -n 5 "$dir/out"; rm -rf "$dir"; return
    fi
    cmd=$(cat "$dir/cmd.pid")
    kill -TERM "$script"
    for i in $(seq 1 100); do kill -0 "$script" 2>/dev/null || break; sleep 0.05; done
    left=""
    kill -0 "$script" 2>/dev/null && left="$left script"
    kill -0 "$cmd" 2>/dev/null && left="$left command"
    pgrep -f "$dir" >/dev/null && left="$left servers"
    if [ -z "$left" ]; then ok "$name.sh ends its command and servers on SIGTERM"
    else not_ok "$name.sh ends on SIGTERM" "still running after 5 s:$left"; fi
    kill -9 "$script" "$cmd" 2>/dev/null
    pkill -9 -f "$dir" 2>/dev/null
    rm -rf "$dir"
}

term_ends_all redis
term_ends_all mysql
term_ends_all pg
term_ends_all zk
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
