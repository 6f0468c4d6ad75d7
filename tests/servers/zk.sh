#!/usr/bin/env bash
# tests/servers/zk.sh -- throw-away ZooKeeper servers for simba's tests.
#
#   tests/servers/zk.sh run CMD ARGS...
#
# Creates a new temp dir (mktemp -d), starts one standalone ZooKeeper server
# (java QuorumPeerMain with a generated zoo.cfg) on a free 127.0.0.1 port,
# waits until it serves, runs CMD with the variables below, then stops every
# server it (or CMD through the control script) started and deletes the temp
# dir, also when CMD fails or the script is interrupted. Exits with CMD's exit
# code. Never touches the system service (/etc/zookeeper, /var/lib/zookeeper)
# or any fixed port.
#
# Exported to CMD:
#   SIMBA_ZK_HOSTS   "127.0.0.1:PORT" of the standalone server
#   SIMBA_ZK_CTL     a script that controls the servers of this run. NODE is
#                    "s" (the standalone server) or 1, 2, 3 (ensemble members):
#                      $SIMBA_ZK_CTL ensemble     start a 3-node ensemble on
#                                                 loopback, wait until all three
#                                                 serve, print its connection string
#                      $SIMBA_ZK_CTL hosts NODE|ensemble   print a connection string
#                      $SIMBA_ZK_CTL port NODE    print NODE's client port
#                      $SIMBA_ZK_CTL pid NODE     print NODE's java pid ("" if down)
#                      $SIMBA_ZK_CTL kill NODE    SIGKILL NODE (a crash)
#                      $SIMBA_ZK_CTL start NODE   start NODE again (same port and data)
#                                                 and wait until it serves
#                      $SIMBA_ZK_CTL stop NODE    SIGSTOP NODE (frozen: the port
#                                                 accepts nothing, sessions time out)
#                      $SIMBA_ZK_CTL cont NODE    SIGCONT NODE
#                      $SIMBA_ZK_CTL wait NODE    wait until NODE serves (max 30 s)
#                      $SIMBA_ZK_CTL srvr NODE    print the "srvr" four-letter answer
#   SIMBA_ZK_DIR     the temp dir (logs in $SIMBA_ZK_DIR/<node>/server.log)
#
# Partitions (no iptables needed): with SIMBA_ZK_PROXY set to a tcp_proxy
# binary (tests/tools/tcp_proxy.c),
#   $SIMBA_ZK_CTL proxied          (re)starts the ensemble (same ports and data)
#                                  with every member-to-member link through
#                                  user-space proxies, one proxy process per
#                                  pair of members (each member's zoo.cfg names
#                                  the proxies' ports for the two others), and a
#                                  proxy in front of each member's client port;
#                                  prints the connection string. It stays so.
# Elections are slower through the proxies (a leader's death took 7-23 s to
# a new quorum, 2-3 s direct), so `ensemble` alone does not use them. Then:
#   $SIMBA_ZK_CTL partition NODE   freeze both pair proxies of NODE: it and the
#                                  clients connected to it directly keep
#                                  talking, the rest of the ensemble hears
#                                  silence (no FIN, no RST)
#   $SIMBA_ZK_CTL heal NODE        resume them
#   $SIMBA_ZK_CTL phosts NODE      print the proxied client address of NODE
#   $SIMBA_ZK_CTL freeze-client NODE / thaw-client NODE
#                                  freeze / resume the proxy in front of NODE's
#                                  client port (its clients hear silence)
#   $SIMBA_ZK_CTL stop-client NODE / start-client NODE
#                                  end the proxy in front of NODE's client port
#                                  (its clients' connections close, and new ones
#                                  are refused, so a client moves to another
#                                  member at once) / start it again
#   $SIMBA_ZK_CTL mode NODE        print "leader", "follower" or "" (down)
# Before `proxied` these commands fail. Election links are proxied
# too, but ZooKeeper calls a lower member back on the address that member
# announces (its real port), so election traffic may bypass the proxies:
# a partitioned member still cannot sync with the leader (the quorum port
# goes through the proxy), which is what a partition test needs.
#
# Server settings: tickTime=100 (sessions can be as short as 200 ms),
# maxSessionTimeout=120000, 4lw "srvr,ruok,mntr,cons,stat" on, admin server off,
# a 256 MB heap, forceSync=no unless SIMBA_ZK_FORCESYNC=yes (the benchmark may
# want the production default); SIMBA_ZK_NODE_FORCESYNC=yes|no in the
# environment of a `start` (or `ensemble`, `proxied`) overrides it for the
# members that call starts (a test that needs one slow follower). The standalone server checks container nodes
# every 10 minutes (so no test sees an empty resource vanish under it); the
# ensemble every second (the container clean-up test runs there).
#
# Needs the Debian packages zookeeper and default-jre-headless (`make deps`).
# Works as root or as any user.
set -u

die() { echo "zk.sh: $*" >&2; exit 2; }
. "$(dirname "$0")/ports.sh"     # port_claim, ports_release
. "$(dirname "$0")/run_cmd.sh"   # run_cmd, run_cmd_stop

[ "${1:-}" = run ] || die "usage: $0 run CMD ARGS..."
shift
[ $# -gt 0 ] || die "usage: $0 run CMD ARGS..."

JAVA=$(command -v java) || die "java not found (apt-get install default-jre-headless)"
ZKJAR=/usr/share/java/zookeeper.jar
[ -f "$ZKJAR" ] || die "$ZKJAR not found (apt-get install zookeeper)"
# zookeeper.jar's manifest names its dependencies; add a logging backend so the
# server's log goes to a file instead of slf4j's "no binding" warning.
CP="$ZKJAR"
for j in /usr/share/java/slf4j-simple.jar /usr/share/java/slf4j-nop.jar; do
    if [ -f "$j" ]; then CP="$CP:$j"; break; fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/simba-zk.XXXXXX") || die "mktemp failed"
cleanup() {
    local f pid
    for f in "$TMP"/*/pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        kill -CONT "$pid" 2>/dev/null
        kill "$pid" 2>/dev/null
    done
    for f in "$TMP"/*/pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    done
    rm -rf "$TMP"
    ports_release
}
trap cleanup EXIT
trap run_cmd_stop INT TERM HUP

# Free loopback ports: tests/servers/ports.sh (claimed, below the ephemeral
# range). The ensemble's ports are all picked now, though most are bound only
# later (the proxies' at `proxied`), so the claims matter here.
free_port() { port_claim; }

mkdir -p "$TMP/s/data"
free_port >"$TMP/s/port" || die "no free port"
# The ensemble's ports are picked now (client, quorum, election per node) so
# the control script only has to read files.
for n in 1 2 3; do
    mkdir -p "$TMP/$n/data"
    echo "$n" >"$TMP/$n/data/myid"
    free_port >"$TMP/$n/port" || die "no free port"
    free_port >"$TMP/$n/qport" || die "no free port"
    free_port >"$TMP/$n/eport" || die "no free port"
    free_port >"$TMP/$n/pport" || die "no free port"
    for m in 1 2 3; do
        [ "$m" = "$n" ] && continue
        free_port >"$TMP/$n/to$m.q" || die "no free port"
        free_port >"$TMP/$n/to$m.e" || die "no free port"
    done
done

# The control script: everything about starting a server lives here, so the
# tests can kill and restart servers the same way this script starts them.
cat >"$TMP/ctl" <<EOF
#!/usr/bin/env bash
set -u
TMP='$TMP'
JAVA='$JAVA'
CP='$CP'
FORCESYNC='${SIMBA_ZK_FORCESYNC:-no}'
PROXY='${SIMBA_ZK_PROXY:-}'
EOF
cat >>"$TMP/ctl" <<'EOF'
die() { echo "zk ctl: $*" >&2; exit 2; }
node_ok() { case "${1:-}" in s|1|2|3) return 0 ;; esac; die "unknown node '${1:-}' (s, 1, 2 or 3)"; }

write_cfg() {   # $1 node
    local n=$1 d="$TMP/$1"
    {
        echo "tickTime=100"
        echo "initLimit=50"
        echo "syncLimit=20"
        echo "dataDir=$d/data"
        echo "clientPort=$(cat "$d/port")"
        echo "clientPortAddress=127.0.0.1"
        echo "maxClientCnxns=0"
        echo "minSessionTimeout=200"
        echo "maxSessionTimeout=120000"
        echo "admin.enableServer=false"
        echo "4lw.commands.whitelist=srvr,ruok,mntr,cons,stat"
        echo "autopurge.purgeInterval=0"
        if [ "$n" != s ]; then
            echo "standaloneEnabled=false"
            echo "cnxTimeout=500"
            for m in 1 2 3; do
                if [ -f "$TMP/proxied" ] && [ "$m" != "$n" ]; then
                    echo "server.$m=127.0.0.1:$(cat "$TMP/$n/to$m.q"):$(cat "$TMP/$n/to$m.e")"
                else
                    echo "server.$m=127.0.0.1:$(cat "$TMP/$m/qport"):$(cat "$TMP/$m/eport")"
                fi
            done
        fi
    } >"$d/zoo.cfg"
}

srvr() {        # $1 node: the "srvr" answer, empty when the port does not answer
    local port
    port=$(cat "$TMP/$1/port")
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf srvr >&3 && cat <&3" 2>/dev/null
}

serving() { srvr "$1" | grep -q '^Mode: '; }

pid_of() {
    local f="$TMP/$1/pid"
    [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}

launch() {      # $1 node: start java in the background
    local n=$1 d="$TMP/$1" interval=600000
    [ -n "$(pid_of "$n")" ] && return 0
    [ "$n" != s ] && interval=1000
    write_cfg "$n"
    "$JAVA" -Xmx256m -Xms32m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Dzookeeper.forceSync="${SIMBA_ZK_NODE_FORCESYNC:-$FORCESYNC}" \
        -Dznode.container.checkIntervalMs=$interval \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
        -Dzookeeper.admin.enableServer=false \
        -cp "$CP" org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" \
        </dev/null >>"$d/server.log" 2>&1 &
    echo $! >"$d/pid"
}

wait_serving() { # $1 node, $2 seconds at most (60 by default: CI machines are loaded)
    local n=$1 secs=${2:-60}
    for _ in $(seq 1 $((secs * 10))); do
        serving "$n" && return 0
        [ -n "$(pid_of "$n")" ] || { echo "zk ctl: node $n died; log:" >&2; tail -20 "$TMP/$n/server.log" >&2; return 1; }
        sleep 0.1
    done
    echo "zk ctl: node $n did not serve within $secs s; log:" >&2
    tail -20 "$TMP/$n/server.log" >&2
    return 1
}

# One proxy process: $1 its name (a dir under $TMP), then its links.
start_proxy() {
    local name=$1 ready
    shift
    mkdir -p "$TMP/$name"
    "$PROXY" -p "$TMP/$name/pid" "$@" </dev/null >"$TMP/$name/out" 2>>"$TMP/$name/log" &
    for _ in $(seq 1 400); do
        grep -q '^ready' "$TMP/$name/out" 2>/dev/null && return 0
        sleep 0.05
    done
    die "proxy $name did not start: $(cat "$TMP/$name/log")"
}

# Pair proxies carry the links between members a < b (both directions, quorum
# and election); client proxies c<n> sit in front of member n's client port.
start_proxies() {
    local a b n
    [ -n "$PROXY" ] && [ -x "$PROXY" ] || die "SIMBA_ZK_PROXY is not an executable tcp_proxy"
    for a in 1 2 3; do
        for b in 1 2 3; do
            [ "$a" -lt "$b" ] || continue
            start_proxy "p$a$b" \
                "$(cat "$TMP/$a/to$b.q"):127.0.0.1:$(cat "$TMP/$b/qport")" \
                "$(cat "$TMP/$a/to$b.e"):127.0.0.1:$(cat "$TMP/$b/eport")" \
                "$(cat "$TMP/$b/to$a.q"):127.0.0.1:$(cat "$TMP/$a/qport")" \
                "$(cat "$TMP/$b/to$a.e"):127.0.0.1:$(cat "$TMP/$a/eport")"
        done
    done
    for n in 1 2 3; do
        start_proxy "c$n" "$(cat "$TMP/$n/pport"):127.0.0.1:$(cat "$TMP/$n/port")"
    done
    touch "$TMP/proxied"
}

signal_proxies() { # $1 signal, then proxy names
    local sig=$1 name
    shift
    [ -f "$TMP/proxied" ] || die "the ensemble has no proxies (run 'proxied' first)"
    for name in "$@"; do kill "-$sig" "$(cat "$TMP/$name/pid")" || exit 1; done
}

pair_proxies() { # $1 node: the names of its two pair proxies
    case "$1" in 1) echo p12 p13 ;; 2) echo p12 p23 ;; 3) echo p13 p23 ;; esac
}

hosts() {
    if [ "$1" = ensemble ]; then
        echo "127.0.0.1:$(cat "$TMP/1/port"),127.0.0.1:$(cat "$TMP/2/port"),127.0.0.1:$(cat "$TMP/3/port")"
    else
        echo "127.0.0.1:$(cat "$TMP/$1/port")"
    fi
}

case "${1:-}" in
    proxied)
        if [ ! -f "$TMP/proxied" ]; then
            for n in 1 2 3; do
                p=$(pid_of "$n") || continue
                kill -9 "$p" 2>/dev/null
                for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
                rm -f "$TMP/$n/pid"
            done
            start_proxies
        fi
        # An election through the proxies took up to 23 s on an idle machine;
        # CI runs four lanes at once on two cores, so give it far more.
        launch 1; launch 2; launch 3
        wait_serving 1 120 && wait_serving 2 60 && wait_serving 3 60 || exit 1
        hosts ensemble ;;
    ensemble)
        launch 1; launch 2; launch 3
        wait_serving 1 && wait_serving 2 && wait_serving 3 || exit 1
        hosts ensemble ;;
    hosts) [ "${2:-}" = ensemble ] || node_ok "${2:-}"; hosts "$2" ;;
    port) node_ok "${2:-}"; cat "$TMP/$2/port" ;;
    pid) node_ok "${2:-}"; pid_of "$2"; true ;;
    kill)
        node_ok "${2:-}"
        p=$(pid_of "$2") || exit 0
        kill -9 "$p" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
        rm -f "$TMP/$2/pid" ;;
    start) node_ok "${2:-}"; launch "$2"; wait_serving "$2" ;;
    stop) node_ok "${2:-}"; p=$(pid_of "$2") && kill -STOP "$p" ;;
    cont) node_ok "${2:-}"; p=$(pid_of "$2") && kill -CONT "$p" ;;
    wait) node_ok "${2:-}"; wait_serving "$2" ;;
    srvr) node_ok "${2:-}"; srvr "$2" ;;
    mode) node_ok "${2:-}"; srvr "$2" | sed -n 's/^Mode: //p' ;;
    partition) node_ok "${2:-}"; [ "$2" != s ] || die "partition: 1, 2 or 3"
        signal_proxies USR1 $(pair_proxies "$2") ;;
    heal) node_ok "${2:-}"; [ "$2" != s ] || die "heal: 1, 2 or 3"
        signal_proxies USR2 $(pair_proxies "$2") ;;
    freeze-client) node_ok "${2:-}"; signal_proxies USR1 "c$2" ;;
    thaw-client) node_ok "${2:-}"; signal_proxies USR2 "c$2" ;;
    stop-client) node_ok "${2:-}"; [ "$2" != s ] || die "stop-client: 1, 2 or 3"
        [ -f "$TMP/proxied" ] || die "no proxies"
        p=$(cat "$TMP/c$2/pid") || exit 1
        kill "$p" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
        rm -f "$TMP/c$2/pid" ;;
    start-client) node_ok "${2:-}"; [ "$2" != s ] || die "start-client: 1, 2 or 3"
        [ -f "$TMP/proxied" ] || die "no proxies"
        [ -n "$(pid_of "c$2")" ] && exit 0
        start_proxy "c$2" "$(cat "$TMP/$2/pport"):127.0.0.1:$(cat "$TMP/$2/port")" ;;
    phosts) node_ok "${2:-}"; [ -f "$TMP/proxied" ] || die "no proxies"; echo "127.0.0.1:$(cat "$TMP/$2/pport")" ;;
    *) die "usage: ctl ensemble | proxied | hosts NODE|ensemble | port|pid|kill|start|stop|cont|wait|srvr|mode|partition|heal|phosts|freeze-client|thaw-client|stop-client|start-client NODE" ;;
esac
EOF
chmod +x "$TMP/ctl"

"$TMP/ctl" start s || die "the standalone ZooKeeper server did not start"

export SIMBA_ZK_HOSTS
SIMBA_ZK_HOSTS=$("$TMP/ctl" hosts s)
export SIMBA_ZK_CTL="$TMP/ctl"
export SIMBA_ZK_DIR="$TMP"

run_cmd "$@"
rc=$?
exit $rc
