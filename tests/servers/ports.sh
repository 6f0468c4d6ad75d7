# tests/servers/ports.sh -- the one rule for the loopback ports of simba's
# throw-away servers. Sourced by redis.sh, mysql.sh and zk.sh.
#
#   port_claim [ROOM]   print a free port, claimed for this script. With ROOM,
#                       PORT+ROOM is free and below the ephemeral range too
#                       (kept for callers that derive a second port).
#   ports_release       drop every claim this script made (call it on exit)
#
# Why claims: CI runs four lanes at once, each starting its own servers. A
# port that is free when one script picks it may be bound later (a ZooKeeper
# member restarted behind a proxy binds ports its script picked minutes
# earlier; a killed Redis node restarts on its old port). Without a shared
# record, another lane's script could pick that port in between and the
# restart fails. Claims are directories under $SIMBA_PORTS_DIR (mkdir is
# atomic), each holding its owner's pid; a claim whose owner is gone (a
# script killed with SIGKILL) is taken over.
#
# Why the range: ports are picked in [20000, the kernel's ephemeral low) --
# 20000-32767 by default -- so no outgoing connection (a client's, a
# proxy's) can hold one when a server wants to bind it.

SIMBA_PORTS_DIR=${SIMBA_PORTS_DIR:-${TMPDIR:-/tmp}/simba-ports}
simba__ports_low=20000
simba__ports_high=32768
simba__eph=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
if [ -n "$simba__eph" ] && [ "$simba__eph" -gt 25000 ] && [ "$simba__eph" -le 60000 ]; then
    simba__ports_high=$simba__eph
fi

simba__port_listening() {
    command -v ss >/dev/null && ss -ltnH "sport = :$1" 2>/dev/null | grep -q .
}

# Claim one port for this script ($$ is the script's pid, also in subshells).
simba__port_take() {
    local p=$1 d="$SIMBA_PORTS_DIR/$1" owner
    if ! mkdir "$d" 2>/dev/null; then
        owner=$(cat "$d/pid" 2>/dev/null)
        [ -z "$owner" ] && return 1                  # being claimed right now
        kill -0 "$owner" 2>/dev/null && return 1
        # Its owner died without releasing: take it over (mv is atomic, so
        # of two scripts doing this at once only one succeeds).
        mv "$d" "$d.stale.$$" 2>/dev/null || return 1
        rm -rf "$d.stale.$$"
        mkdir "$d" 2>/dev/null || return 1
    fi
    echo "$$" >"$d/pid"
    if simba__port_listening "$p"; then rm -rf "$d"; return 1; fi
    return 0
}

port_claim() {
    local room=${1:-0} p span
    span=$(( simba__ports_high - room - simba__ports_low ))
    [ "$span" -gt 0 ] || return 1
    mkdir -p "$SIMBA_PORTS_DIR" 2>/dev/null
    for _ in $(seq 1 200); do
        p=$(( simba__ports_low + (RANDOM * 32768 + RANDOM) % span ))
        simba__port_take "$p" || continue
        if [ "$room" -gt 0 ] && ! simba__port_take $(( p + room )); then
            rm -rf "${SIMBA_PORTS_DIR:?}/$p"
            continue
        fi
        echo "$p"
        return 0
    done
    return 1
}

ports_release() {
    local f
    for f in "$SIMBA_PORTS_DIR"/*/pid; do
        [ -f "$f" ] || continue
        [ "$(cat "$f" 2>/dev/null)" = "$$" ] && rm -rf "$(dirname "$f")"
    done
    return 0
}
