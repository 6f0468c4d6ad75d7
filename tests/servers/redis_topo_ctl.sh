#!/usr/bin/env bash
# tests/servers/redis_topo_ctl.sh -- what $SIMBA_REDIS_CTL does in the
# sentinel and cluster modes of tests/servers/redis.sh (which makes a
# wrapper that passes its temp dir and redis-cli first).
#
#   redis_topo_ctl.sh TMP CLI master               the port the sentinels name as master
#   redis_topo_ctl.sh TMP CLI failover             SENTINEL FAILOVER, then wait until a
#                                                  new master answers ROLE as master
#   redis_topo_ctl.sh TMP CLI wait-ok              until every cluster node says cluster_state:ok
#   redis_topo_ctl.sh TMP CLI wait-settled         until every node has the same view of the
#                                                  cluster (roles, slots, none on the move) and
#                                                  says of itself the role the others give it
#   redis_topo_ctl.sh TMP CLI slot-port SLOT       the port of the master serving SLOT
#   redis_topo_ctl.sh TMP CLI migrate SLOT PORT    move SLOT, keys and all, to the master at PORT
#   redis_topo_ctl.sh TMP CLI cluster-failover PORT   CLUSTER FAILOVER on the replica at PORT
#   redis_topo_ctl.sh TMP CLI add-master           start the spare node n7 (empty, no slot),
#                                                  CLUSTER MEET it, wait until every node
#                                                  knows it; prints its port
#   redis_topo_ctl.sh TMP CLI remove-master        stop n7 (move its slots away first) and
#                                                  CLUSTER FORGET it on every other node
#                                                  (add-master may add it again, as a new node)
#   redis_topo_ctl.sh TMP CLI kill|start|restart|stop|cont NAME|PORT
#                                                  as ctl.sh; a port names its server
set -u
TMP=$1 CLI=$2
shift 2

node_ports() { local f; for f in "$TMP"/n[0-9].port; do [ -f "$f" ] && cat "$f"; done; }
sentinel_port() { cat "$TMP/s1.port"; }
rcli() { local p=$1; shift; "$CLI" -h 127.0.0.1 -p "$p" "$@"; }

master_port() {
    rcli "$(sentinel_port)" sentinel get-master-addr-by-name simba 2>/dev/null | sed -n 2p
}

failover() {
    local old new
    old=$(master_port)
    rcli "$(sentinel_port)" sentinel failover simba >/dev/null || return 1
    for _ in $(seq 1 300); do
        new=$(master_port)
        if [ -n "$new" ] && [ "$new" != "$old" ] &&
            rcli "$new" role 2>/dev/null | head -n 1 | grep -q master; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

wait_ok() {
    local p ok
    for _ in $(seq 1 300); do
        ok=1
        for p in $(node_ports); do
            rcli "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || { ok=0; break; }
        done
        [ "$ok" = 1 ] && return 0
        sleep 0.1
    done
    return 1
}

# CLUSTER SLOTS as redis-cli prints it (not a tty): one value a line: start,
# end, then per node ip, port, id (and from 7.0 a metadata block). Walk it
# with "number, number, address" as the anchor of a range.
slot_port() {
    local slot=$1 p
    for p in $(node_ports); do
        rcli "$p" cluster slots 2>/dev/null | awk -v s="$slot" '
            { v[NR] = $0 }
            END {
                for (i = 1; i + 3 <= NR; i++)
                    if (v[i] ~ /^[0-9]+$/ && v[i+1] ~ /^[0-9]+$/ && v[i+2] ~ /^[0-9.]+$/ && v[i+2] ~ /\./ &&
                        v[i] + 0 <= s && s <= v[i+1] + 0) { print v[i+3]; exit }
            }' | grep . && return 0
    done
    return 1
}

node_id() { rcli "$1" cluster myid; }

migrate() {
    local slot=$1 dst=$2 src keys k p r said=
    src=$(slot_port "$slot") || return 1
    [ "$src" = "$dst" ] && return 0
    [ "$(rcli "$dst" role 2>/dev/null | head -n 1)" = master ] || { echo "migrate: $dst is not a master" >&2; return 1; }
    rcli "$dst" cluster setslot "$slot" importing "$(node_id "$src")" | grep -q OK || return 1
    rcli "$src" cluster setslot "$slot" migrating "$(node_id "$dst")" | grep -q OK || return 1
    while :; do
        keys=$(rcli "$src" cluster getkeysinslot "$slot" 100)
        [ -z "$keys" ] && break
        for k in $keys; do
            # redis-cli exits 0 on an error reply: the reply says it. A key
            # that does not move is tried again (getkeysinslot names it
            # again); each refusal is said once on stderr
            r=$(rcli "$src" migrate 127.0.0.1 "$dst" "" 0 5000 keys "$k") || return 1
            case $r in
            OK|NOKEY) ;;
            *) [ "$r" = "$said" ] || echo "migrate: slot $slot, key $k to $dst: $r" >&2
               said=$r; sleep 0.05 ;;
            esac
        done
    done
    for p in $(node_ports); do
        rcli "$p" cluster setslot "$slot" node "$(node_id "$dst")" >/dev/null 2>&1
    done
    return 0
}

# One node's view of the cluster, in a form the others' can be compared with:
# per node its id, role (with a confirmed failure), master and slots, sorted.
view() {
    rcli "$1" cluster nodes 2>/dev/null | awk '{
        role = $3 ~ /master/ ? "master" : $3 ~ /slave/ ? "slave" : "other"
        if ($3 ~ /(^|,)fail(,|$)/) role = role "-fail"
        slots = ""
        for (i = 9; i <= NF; i++) slots = slots " " $i
        print $1, role, (role ~ /slave/ ? $4 : "-"), slots
    }' | sort
}

# Settled: every node has the same view, no slot is migrating or importing,
# and every node's own ROLE is the one the views give it. A fault that
# changes roles (a fail-over) is over only then: a master that has not yet
# heard of its demotion still answers ROLE master and takes a slot given to
# it, whose keys then stay with it as a replica while the cluster names the
# new master as the slot's owner (the slot's data is lost to every client).
settled() {
    local p v0= v id
    for p in $(node_ports); do
        v=$(view "$p")
        [ -n "$v" ] || return 1
        case $v in *"["*) return 1 ;; esac
        if [ -z "$v0" ]; then v0=$v; elif [ "$v" != "$v0" ]; then return 1; fi
        id=$(node_id "$p")
        echo "$v" | awk -v id="$id" '$1 == id { exit !($2 == "master" || $2 == "slave") }' || return 1
        [ "$(rcli "$p" role 2>/dev/null | head -n 1)" = "$(echo "$v" | awk -v id="$id" '$1 == id { print $2 }')" ] || return 1
    done
    [ -n "$v0" ]
}
wait_settled() {
    for _ in $(seq 1 300); do settled && return 0; sleep 0.1; done
    return 1
}

# Every node lists node id $1 as connected (not in handshake, not failing).
all_know() {
    local p
    for p in $(node_ports); do
        rcli "$p" cluster nodes 2>/dev/null | grep "^$1 " | grep -q ' connected' || return 1
        rcli "$p" cluster nodes 2>/dev/null | grep "^$1 " | grep -Eq 'handshake|fail|noaddr' && return 1
    done
    return 0
}

add_master() {
    local p id
    [ -f "$TMP/spare.args" ] || { echo "add-master: no spare node (cluster mode only)" >&2; return 1; }
    [ -f "$TMP/n7.port" ] && { echo "add-master: n7 runs already" >&2; return 1; }
    cp "$TMP/spare.args" "$TMP/n7.args" && cp "$TMP/spare.port" "$TMP/n7.port" || return 1
    p=$(cat "$TMP/n7.port")
    "$TMP/ctl.sh" start n7 || return 1
    id=$(node_id "$p")
    rcli "$(node_ports | head -n 1)" cluster meet 127.0.0.1 "$p" "$(cat "$TMP/spare.bus")" | grep -q OK || return 1
    for _ in $(seq 1 300); do
        all_know "$id" && wait_ok && { echo "$p"; return 0; }
        sleep 0.1
    done
    return 1
}

remove_master() {
    local p id q
    [ -f "$TMP/n7.port" ] || return 0
    p=$(cat "$TMP/n7.port")
    id=$(node_id "$p")
    "$TMP/ctl.sh" kill n7
    # (its cluster config too: added again later, it is a new node, not one
    # the others were told to forget)
    rm -f "$TMP/n7.port" "$TMP/n7.args" "$TMP/n7.nodes.conf"
    [ -n "$id" ] || return 1
    for q in $(node_ports); do rcli "$q" cluster forget "$id" >/dev/null 2>&1; done
    wait_ok
}

server_name() {   # a name as it is, or the name of the server with that port
    local f
    for f in "$TMP"/*.port; do
        [ "$(cat "$f")" = "$1" ] && { basename "$f" .port; return; }
    done
    echo "$1"
}

case "${1:-}" in
    master) master_port ;;
    failover) failover ;;
    wait-ok) wait_ok ;;
    wait-settled) wait_settled ;;
    slot-port) slot_port "${2:?slot}" ;;
    migrate) migrate "${2:?slot}" "${3:?port}" ;;
    cluster-failover) rcli "${2:?port}" cluster failover | grep -q OK ;;
    add-master) add_master ;;
    remove-master) remove_master ;;
    kill|start|restart|stop|cont) exec "$TMP/ctl.sh" "$1" "$(server_name "${2:?name or port}")" ;;
    *) echo "usage: \$SIMBA_REDIS_CTL master|failover|wait-ok|wait-settled|slot-port SLOT|migrate SLOT PORT|cluster-failover PORT|add-master|remove-master|kill|start|restart|stop|cont NAME|PORT" >&2
       exit 2 ;;
esac
