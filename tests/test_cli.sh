#!/usr/bin/env bash
# tests/test_cli.sh -- the `simba` tool and the URL syntax, against real
# servers started by tests/servers/*.sh (throw-away, 127.0.0.1, temp dirs).
#
#   tests/test_cli.sh                     everything; last line "N passed, N failed"
#   SIMBA_CLI=build/asan/simba tests/test_cli.sh   the same with another binary
#
# Parts: the URL unit test (plain and ASan), a bounded libFuzzer run of the
# URL parser, the docs against the help (tests/cli_docs.sh), the tool on mem:, then on Redis (most tests), MySQL,
# ZooKeeper (the no-overlap test on each) and SQLite (no server: a file). The script runs itself under
# each server script with `--part NAME`; results are added up in a file.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
SIMBA=$(realpath "${SIMBA_CLI:-build/simba}")

pass() { echo "ok - $1"; echo pass >> "$RESULTS"; }
fail() { echo "not ok - $1${2:+: $2}"; echo fail >> "$RESULTS"; }
check() { # check NAME CONDITION-EXIT-CODE [detail]
    if [ "$2" -eq 0 ]; then pass "$1"; else fail "$1" "${3:-}"; fi
}
now_ms() { date +%s%3N; }

# wait_gone PID SECONDS: 0 when the process is gone in time
wait_gone() {
    local i
    for i in $(seq 1 $(( $2 * 20 ))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
    return 1
}
# wait_file FILE SECONDS: 0 when the file exists (non-empty) in time
wait_file() {
    local i
    for i in $(seq 1 $(( $2 * 20 ))); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}
# finish PID SECONDS: waits for a background simba; its exit code in $FIN
# (255 after a kill -9 when it does not end in time). Not in $(...): a
# subshell cannot wait for our children.
finish() {
    if wait_gone "$1" "$2"; then wait "$1"; FIN=$?; else kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; FIN=255; fi
}

# max_conc FILE: how many jobs ran at once at most (lines "s|e ID NS")
max_conc() {
    python3 - "$1" <<'EOF'
import sys
ev = []
for line in open(sys.argv[1]):
    k, _, t = line.split()
    ev.append((int(t), 0 if k == 'e' else 1))   # an end before a start at the same ns
ev.sort()
cur = best = 0
for _, d in ev:
    cur += 1 if d else -1
    best = max(best, cur)
print(best)
EOF
}

mkjob() {   # the job: records its start and end, sleeps in between
    cat > "$T/job" <<'EOF'
#!/bin/sh
echo "s $$ $(date +%s%N)" >> "$1"
sleep "$2"
echo "e $$ $(date +%s%N)" >> "$1"
EOF
    chmod +x "$T/job"
}

# The job of no_inherit_test: prints the fds it has open other than 0, 1 and
# 2 that could be simba's (none: simba's own are close-on-exec): sockets,
# anon inodes (eventfd, inotify, epoll, timerfd) and SQLite's files; and
# whether the variable named by $1 is in its environment.
mkfdsjob() {
    cat > "$T/fds" <<'EOF'
#!/bin/sh
s=""
for f in /proc/$$/fd/*; do
    n=${f##*/}
    case $n in 0|1|2) continue ;; esac
    case $(readlink "$f" 2>/dev/null) in socket:*|anon_inode:*|*.db|*.db-*) s="$s $n" ;; esac
done
e=unset
if [ -n "${1:-}" ] && env | grep -q "^$1="; then e=set; fi
echo "sockets:[${s# }] env:$e"
EOF
    chmod +x "$T/fds"
}

# no_inherit_test URL WHAT [VAR]: the job has none of simba's fds open,
# and VAR (the URL's password_env) is not in its environment
no_inherit_test() {
    local out rc
    out=$("$SIMBA" run "$1" "fds-$2" -- "$T/fds" "${3:-}" 2> "$T/nie.err"); rc=$?
    check "$2: the job has no fd of simba's open (socket, eventfd/inotify, database file)" \
        $([ $rc -eq 0 ] && [[ "$out" == "sockets:[] "* ]]; echo $?) "rc $rc, $out $(cat "$T/nie.err")"
    [ -n "${3:-}" ] || return 0
    check "$2: the job's environment has no \$$3 (the URL's password_env)" \
        $([ $rc -eq 0 ] && [[ "$out" == *" env:unset" ]]; echo $?) "rc $rc, $out"
}

# ghost_test URL WHAT: a --wait that runs out withdraws its request, so when
# the holder ends the lock is free at once, not held by the gone waiter's
# entry until its lease (ttl + transition, 16 s) runs out on the server
ghost_test() {
    local url=$1 what=$2 name="ghost-$2" p rc hold t_ok gap
    rm -f "$T/held" "$T/a_end"
    "$SIMBA" run "$url" "$name" -- sh -c "echo 1 > '$T/held'; sleep 2; date +%s%3N > '$T/a_end'" & p=$!
    wait_file "$T/held" 10
    "$SIMBA" run --wait 500ms "$url" "$name" -- true 2>/dev/null; rc=$?
    check "$what: --wait 500ms while held: exit 75" $([ $rc -eq 75 ]; echo $?) "rc $rc"
    finish $p 20; hold=$FIN
    t_ok=""
    for _ in $(seq 1 100); do      # ~25 s at most: past the gone waiter's lease
        if "$SIMBA" run --try "$url" "$name" -- true 2>/dev/null; then t_ok=$(now_ms); break; fi
        sleep 0.2
    done
    gap=$(( ${t_ok:-99999999999999} - $(cat "$T/a_end" 2>/dev/null || echo 0) ))
    [ -n "$t_ok" ] || gap="more than 25000"
    check "$what: after a --wait ran out, the lock is free within 3 s of the holder's end" \
        $([ "$hold" -eq 0 ] && [ -n "$t_ok" ] && [ "$gap" -lt 3000 ]; echo $?) "holder $hold, free after $gap ms"
}

# overlap URL NAME: 4 runs at once never overlap, all exit 0
overlap_test() {
    local url=$1 what=$2 f="$T/ovl-$2" pids="" p rc bad=0 n
    : > "$f"
    for _ in 1 2 3 4; do
        "$SIMBA" run "$url" "ovl-$what" -- "$T/job" "$f" 0.3 2>>"$T/err" &
        pids="$pids $!"
    done
    for p in $pids; do finish "$p" 60; rc=$FIN; [ "$rc" -eq 0 ] || bad=1; done
    n=$(grep -c '^s' "$f")
    check "$what: 4 simba run of one job all exit 0" $bad
    check "$what: all 4 jobs ran" $([ "$n" -eq 4 ]; echo $?) "$n ran"
    check "$what: no two jobs overlapped" $([ "$(max_conc "$f")" -eq 1 ]; echo $?) "max concurrency $(max_conc "$f")"
}

part_mem() {
    local out rc
    "$SIMBA" --help > "$T/help" 2>&1; rc=$?
    check "--help exits 0 and documents the exit codes" $([ $rc -eq 0 ] && grep -q '75 busy' "$T/help" && grep -q '79 lock lost' "$T/help"; echo $?)
    for c in run elect status delete set-capacity init-server; do
        "$SIMBA" $c --help > "$T/help" 2>&1; rc=$?
        check "$c --help" $([ $rc -eq 0 ] && grep -q "usage: simba $c" "$T/help"; echo $?)
    done
    out=$("$SIMBA" --version); check "--version" $([[ "$out" =~ ^simba\ [0-9]+\.[0-9]+\.[0-9]+$ ]]; echo $?) "$out"
    "$SIMBA" frobnicate 2> "$T/e1"; rc=$?
    check "unknown command: exit 64, one line 'simba: what (why)'" \
        $([ $rc -eq 64 ] && [ "$(wc -l < "$T/e1")" -eq 1 ] && grep -Eq '^simba: .+ \(.+\)$' "$T/e1"; echo $?) "$rc $(cat "$T/e1")"
    "$SIMBA" run mem: x 2> "$T/e1"; rc=$?
    check "run without a command: 64" $([ $rc -eq 64 ] && grep -Eq '^simba: .+ \(.+\)$' "$T/e1"; echo $?) "$rc"
    "$SIMBA" run --wait 10 mem: x -- true 2> "$T/e1"; rc=$?
    check "--wait without a unit: 64 naming the option" $([ $rc -eq 64 ] && grep -q -- '--wait' "$T/e1"; echo $?) "$rc"
    "$SIMBA" run --wait 1.5s mem: x -- true 2> "$T/e1"; rc=$?
    check "--wait 1.5s (a decimal fraction) is accepted" $([ $rc -eq 0 ]; echo $?) "rc $rc $(cat "$T/e1")"
    "$SIMBA" run --wait 1.5q mem: x -- true 2> "$T/e1"; rc=$?
    check "--wait 1.5q: 64, the message shows the form (1.5s)" $([ $rc -eq 64 ] && grep -q -- "--wait.*1\.5s" "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    "$SIMBA" run 'nosuch://h' x -- true 2> "$T/e1"; rc=$?
    check "unknown scheme: 64, lists the compiled-in schemes" \
        $([ $rc -eq 64 ] && grep -q 'redis://, redis+unix://, redis+sentinel://, redis+cluster://, mysql://, zk://, postgres://, postgresql://, sqlite://, mem:' "$T/e1" && [ "$(wc -l < "$T/e1")" -eq 1 ]; echo $?) "$(cat "$T/e1")"
    "$SIMBA" run 'redis://127.0.0.1:99999' x -- true 2> "$T/e1"; rc=$?
    check "bad port: 64, names the port" $([ $rc -eq 64 ] && grep -q 'URL port' "$T/e1"; echo $?) "$(cat "$T/e1")"
    "$SIMBA" run --try --wait 1s mem: x -- true 2> "$T/e1"; rc=$?
    check "--try with --wait: 64 (contradictory)" $([ $rc -eq 64 ] && grep -q -- "--try and --wait" "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    "$SIMBA" elect --try mem: x -- true 2> "$T/e1"; rc=$?
    check "elect --try: 64 (elect does not take it)" $([ $rc -eq 64 ] && grep -q -- "--try (not an option of simba elect" "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    "$SIMBA" status --once mem: x > /dev/null 2> "$T/e1"; rc=$?
    check "status --once: 64" $([ $rc -eq 64 ]; echo $?) "rc $rc $(cat "$T/e1")"
    out=$("$SIMBA" status mem: x); rc=$?
    check "status of a NAME that does not exist: 2, says so" $([ $rc -eq 2 ] && [ "$out" = "x: no such resource" ]; echo $?) "rc $rc $out"
    "$SIMBA" run --kill-after 7s --transition 6s mem: x -- true 2> "$T/e1"; rc=$?
    check "--kill-after >= transition is refused" $([ $rc -eq 64 ]; echo $?) "$rc"
    "$SIMBA" run mem: x -- sh -c 'exit 3'; rc=$?
    check "mem: the command's exit status comes back" $([ $rc -eq 3 ]; echo $?) "$rc"
    "$SIMBA" run mem: x -- sh -c 'kill -9 $$'; rc=$?
    check "mem: killed by signal 9 gives 137" $([ $rc -eq 137 ]; echo $?) "$rc"
    # a signal that reaches the child between fork and its reset of simba's
    # handlers is the child's (SIGUSR1: it dies before exec), not simba's:
    # simba neither hears nor forwards it (tests/tools/signal_in_fork.c)
    SIMBA_TEST_SIGNAL_IN_FORK=10 LD_PRELOAD="$ROOT/build/signal_in_fork.so" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$SIMBA" run -v mem: x -- sh -c "echo ran > '$T/sigfork'" 2> "$T/e1"; rc=$?
    check "a signal in the child before its handlers are reset is the child's, not simba's" \
        $([ $rc -eq 138 ] && ! grep -q "forwarding" "$T/e1" && [ ! -e "$T/sigfork" ]; echo $?) \
        "rc $rc; $(grep forwarding "$T/e1")"
    "$SIMBA" run mem: x -- /nonexistent/cmd 2> "$T/e1"; rc=$?
    check "command not found: 127" $([ $rc -eq 127 ] && grep -q "cannot run" "$T/e1"; echo $?) "$rc"
    "$SIMBA" run mem: x -- /dev/null 2> "$T/e1"; rc=$?
    check "command not executable: 126" $([ $rc -eq 126 ]; echo $?) "$rc"
    out=$("$SIMBA" run 'mem:?client_id=me-1' nm -- sh -c 'echo "$SIMBA_NAME|$SIMBA_CLIENT_ID|$SIMBA_FENCE"')
    check "the command gets SIMBA_NAME, SIMBA_CLIENT_ID, SIMBA_FENCE" $([[ "$out" =~ ^nm\|me-1\|[0-9]+$ ]]; echo $?) "$out"
    SIMBA_URL='mem:' "$SIMBA" run - x -- true; rc=$?
    check "URL '-' is taken from \$SIMBA_URL" $([ $rc -eq 0 ]; echo $?) "$rc"
    # more NAMEs than a request takes (8): refused by the parser, before
    # they are copied anywhere
    for n in "a b c d e f g h i" "a b c d e f g h i j" "a b c d e f g h i j k l"; do
        for c in status run; do
            # shellcheck disable=SC2086
            if [ $c = run ]; then "$SIMBA" run mem: $n -- true 2> "$T/e1"; rc=$?
            else "$SIMBA" status mem: $n > /dev/null 2> "$T/e1"; rc=$?; fi
            check "$c with $(echo $n | wc -w) NAMEs: 64, says at most 8" \
                $([ $rc -eq 64 ] && grep -q 'at most 8' "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
        done
    done
    "$SIMBA" run mem: a b c d e f g h -- true; rc=$?
    check "run with 8 NAMEs (the most) is granted" $([ $rc -eq 0 ]; echo $?) "rc $rc"
    # 0 is not "the default": a lease of 0 is refused, as in the URL
    for opt in --ttl --transition --connect-timeout; do
        "$SIMBA" run $opt 0s mem: x -- true 2> "$T/e1"; rc=$?
        check "run $opt 0s: 64, not the default silently" $([ $rc -eq 64 ] && grep -q -- "$opt" "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    done
    simba_net_missing_test
}

# A simba built without the network backends (make cli's) execs simba-net for
# their URLs; alone in a directory it says where it looked, and serves its own.
simba_net_missing_test() {
    local rc
    "$SIMBA" --help | grep -q 'through simba-net' || return 0   # $SIMBA has every backend itself
    mkdir -p "$T/alone"; cp "$SIMBA" "$T/alone/simba"
    "$T/alone/simba" run 'redis://127.0.0.1:1' x -- true 2> "$T/e1"; rc=$?
    check "a simba without simba-net next to it: a redis:// URL exits 70 naming both places looked in" \
        $([ $rc -eq 70 ] && grep -q "redis:// URLs are served by simba-net" "$T/e1" && grep -q "$T/alone/simba-net" "$T/e1" \
          && grep -q "$T/alone/../libexec/simba/simba-net" "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    "$T/alone/simba" run "sqlite://$T/alone/l.db" x -- true 2> "$T/e1"; rc=$?
    check "a simba without simba-net next to it serves sqlite:// itself" $([ $rc -eq 0 ]; echo $?) "rc $rc $(cat "$T/e1")"
    "$T/alone/simba" --help > "$T/help" 2>&1
    check "its --help says simba-net is not found, and where" \
        $(grep -q "through simba-net (not found at $T/alone/simba-net)" "$T/help"; echo $?) "$(tail -n 2 "$T/help")"
}

part_redis() {
    local U="redis://127.0.0.1:$SIMBA_REDIS_PORT" rc rc2 t0 t1 p pids f out srv_pid
    local RDIR; RDIR=$(dirname "$SIMBA_REDIS_CTL")
    overlap_test "$U" redis
    overlap_test "redis+unix://$SIMBA_REDIS_SOCKET" redis-unix
    PW="$SIMBA_REDIS_AUTH_PASSWORD" no_inherit_test "redis://127.0.0.1:$SIMBA_REDIS_AUTH_PORT?password_env=PW" redis PW
    ghost_test "$U" redis
    job_group_test "$U" redis
    nested_test "$U" redis
    # a network URL is served by simba-net in the same process (exec): the
    # job's parent is the simba that was started, which signals and waits for it
    rm -f "$T/ppid"
    "$SIMBA" run "$U" same-pid -- sh -c "echo \$PPID > '$T/ppid'" & p=$!
    finish $p 20; rc=$FIN
    check "run on redis://: the job's parent is the simba started (simba-net by exec, same pid)" \
        $([ "$rc" -eq 0 ] && [ "$(cat "$T/ppid" 2>/dev/null)" = "$p" ]; echo $?) "rc $rc, ppid $(cat "$T/ppid" 2>/dev/null) vs $p"

    # --try and --wait while held
    rm -f "$T/held"
    "$SIMBA" run "$U" busy -- sh -c "echo 1 > '$T/held'; sleep 4" & p=$!
    wait_file "$T/held" 10 || touch "$T/held.missing"
    : > "$T/held.x"
    t0=$(now_ms); "$SIMBA" run --try "$U" busy -- true 2>/dev/null; rc=$?; t1=$(now_ms)
    check "--try while held: exit 75 at once" $([ $rc -eq 75 ] && [ $((t1 - t0)) -lt 1500 ]; echo $?) "rc $rc after $((t1 - t0)) ms"
    t0=$(now_ms); "$SIMBA" run --wait 200ms "$U" busy -- true 2>/dev/null; rc=$?; t1=$(now_ms)
    check "--wait 200ms while held: exit 75 after ~200 ms" $([ $rc -eq 75 ] && [ $((t1 - t0)) -ge 200 ] && [ $((t1 - t0)) -lt 3000 ]; echo $?) "rc $rc after $((t1 - t0)) ms"
    "$SIMBA" run "$U" busy -- true & pids=$!
    sleep 0.3; t0=$(now_ms); kill -TERM $pids; finish $pids 10; rc=$FIN; t1=$(now_ms)
    check "SIGTERM while waiting: the request is withdrawn, exit 143 at once" $([ "$rc" -eq 143 ] && [ $((t1 - t0)) -lt 2000 ]; echo $?) "rc $rc after $((t1 - t0)) ms"
    finish $p 20; rc=$FIN; check "the holder ends normally" $([ "$rc" -eq 0 ]; echo $?) "$rc"

    # the next waiter gets it at once when the job ends (not at expiry: ttl is 10 s)
    rm -f "$T/a_end" "$T/b_start" "$T/held"
    "$SIMBA" run "$U" handoff -- sh -c "echo 1 > '$T/held'; sleep 1; date +%s%3N > '$T/a_end'" & p=$!
    wait_file "$T/held" 10
    "$SIMBA" run "$U" handoff -- sh -c "date +%s%3N > '$T/b_start'"; rc=$?
    finish $p 20 >/dev/null
    out=$(( $(cat "$T/b_start" 2>/dev/null || echo 99999999999999) - $(cat "$T/a_end" 2>/dev/null || echo 0) ))
    check "release when the job exits: the waiter starts within 1.5 s (ttl 10 s)" $([ $rc -eq 0 ] && [ $out -lt 1500 ]; echo $?) "gap $out ms"

    # semaphore: exactly 3 of 6 at once
    f="$T/sem"; : > "$f"; pids=""
    for _ in 1 2 3 4 5 6; do "$SIMBA" run --capacity 3 "$U" sem -- "$T/job" "$f" 1.5 & pids="$pids $!"; done
    for p in $pids; do finish $p 60 >/dev/null; done
    out=$(max_conc "$f")
    check "semaphore --capacity 3: exactly 3 of 6 at once" $([ "$out" -eq 3 ] && [ "$(grep -c '^e' "$f")" -eq 6 ]; echo $?) "max $out, $(grep -c '^e' "$f") ended"
    # --permits: 2 + 2 do not fit in 3
    f="$T/perm"; : > "$f"; pids=""
    for _ in 1 2; do "$SIMBA" run --capacity 3 --permits 2 "$U" perm -- "$T/job" "$f" 0.7 & pids="$pids $!"; done
    for p in $pids; do finish $p 60 >/dev/null; done
    check "--permits 2 of capacity 3: one at a time" $([ "$(max_conc "$f")" -eq 1 ]; echo $?) "max $(max_conc "$f")"
    permits_test "$U"

    # read/write: readers together, the writer alone
    f="$T/rw"; : > "$f"; : > "$T/rw-w"; pids=""
    for _ in 1 2 3; do "$SIMBA" run --shared "$U" rw -- "$T/job" "$f" 1.5 & pids="$pids $!"; done
    sleep 0.3
    "$SIMBA" run --exclusive "$U" rw -- sh -c "'$T/job' '$f' 0.5; '$T/job' '$T/rw-w' 0" & pids="$pids $!"
    sleep 0.3
    "$SIMBA" run --shared "$U" rw -- "$T/job" "$f" 0.3 & pids="$pids $!"
    for p in $pids; do finish $p 60 >/dev/null; done
    out=$(python3 - "$f" "$T/rw-w" <<'EOF'
import sys
ev = {}
for line in open(sys.argv[1]):
    k, pid, t = line.split(); ev.setdefault(pid, {})[k] = int(t)
w = [line.split() for line in open(sys.argv[2])]
ws = [int(t) for k, _, t in w if k == 's'][0]
iv = sorted((v['s'], v['e']) for v in ev.values())
# the writer's interval is the one that started at or just before ws (its job file is f too)
writer = max((i for i in iv if i[0] <= ws), key=lambda i: i[0])
readers = [i for i in iv if i != writer]
conc = max(sum(1 for a in readers if a[0] <= r[0] < a[1]) for r in readers)
over = any(r[0] < writer[1] and writer[0] < r[1] for r in readers)
late = readers[-1][0] >= writer[1]   # the reader that came after the writer waited for it
print(f"{conc} {int(over)} {int(late)}")
EOF
)
    check "--shared: 3 readers at once" $([ "${out%% *}" -ge 3 ]; echo $?) "$out"
    check "--exclusive: the writer overlaps no reader" $([ "$(echo "$out" | cut -d' ' -f2)" -eq 0 ]; echo $?) "$out"
    check "a reader that came after a waiting writer runs after it (FIFO)" $([ "$(echo "$out" | cut -d' ' -f3)" -eq 1 ]; echo $?) "$out"

    # several names: all or nothing
    rm -f "$T/held"
    "$SIMBA" run "$U" mb -- sh -c "echo 1 > '$T/held'; sleep 2" & p=$!
    wait_file "$T/held" 10
    "$SIMBA" run --try "$U" ma mb -- true 2>/dev/null; rc=$?
    check "several names: --try fails when one is held" $([ $rc -eq 75 ]; echo $?) "$rc"
    finish $p 20 >/dev/null
    out=$("$SIMBA" run "$U" ma mb -- sh -c 'echo "$SIMBA_FENCES"'); rc=$?
    check "several names: granted together, SIMBA_FENCES has both" $([ $rc -eq 0 ] && [[ "$out" =~ ^[0-9]+\ [0-9]+$ ]]; echo $?) "$rc '$out'"

    # fences strictly increase across runs
    out=""
    for _ in 1 2 3; do out="$out $("$SIMBA" run "$U" fence -- sh -c 'echo $SIMBA_FENCE')"; done
    check "SIMBA_FENCE strictly increases across runs" $(python3 -c "import sys; f=[int(x) for x in sys.argv[1:]]; sys.exit(0 if len(f)==3 and f[0]<f[1]<f[2] else 1)" $out; echo $?) "$out"

    # exit status and signals come back
    "$SIMBA" run "$U" st -- sh -c 'exit 42'; rc=$?
    check "the command's exit status comes back" $([ $rc -eq 42 ]; echo $?) "$rc"
    "$SIMBA" run "$U" st -- sh -c 'kill -TERM $$'; rc=$?
    check "killed by SIGTERM gives 143" $([ $rc -eq 143 ]; echo $?) "$rc"
    rm -f "$T/pid"
    "$SIMBA" run "$U" sig -- sh -c "echo \$\$ > '$T/pid'; trap 'exit 7' TERM; while :; do sleep 0.1; done" & p=$!
    wait_file "$T/pid" 10; sleep 0.2
    kill -TERM $p; finish $p 10; rc=$FIN
    check "SIGTERM to simba is forwarded to the command (its trap exits 7)" $([ "$rc" -eq 7 ]; echo $?) "$rc"
    rm -f "$T/pid"
    "$SIMBA" run "$U" sig -- sh -c "echo \$\$ > '$T/pid'; trap 'exit 9' HUP; while :; do sleep 0.1; done" & p=$!
    wait_file "$T/pid" 10; sleep 0.2
    kill -HUP $p; finish $p 10; rc=$FIN
    check "SIGHUP is forwarded too" $([ "$rc" -eq 9 ]; echo $?) "$rc"
    "$SIMBA" run --try "$U" sig -- true; rc=$?
    check "after the forwarded signal the lock is free" $([ $rc -eq 0 ]; echo $?) "$rc"

    # kill -9 simba: the command dies with it
    rm -f "$T/pid"
    "$SIMBA" run "$U" k9 -- sh -c "echo \$\$ > '$T/pid'; exec sleep 60" & p=$!
    wait_file "$T/pid" 10
    kill -9 $p; wait $p 2>/dev/null
    check "kill -9 simba: the command dies with it" $(wait_gone "$(cat "$T/pid")" 5; echo $?)

    # LOST: the server freezes longer than ttl; the command is killed
    srv_pid=$(cat "$RDIR/main.pid")
    rm -f "$T/pid"
    "$SIMBA" run --ttl 1500ms --transition 1500ms "$U" lost -- sh -c "echo \$\$ > '$T/pid'; exec sleep 60" 2> "$T/lost.err" & p=$!
    wait_file "$T/pid" 10
    t0=$(now_ms); kill -STOP "$srv_pid"
    finish $p 20; rc=$FIN; t1=$(now_ms)
    kill -CONT "$srv_pid"
    check "LOST (server frozen past ttl): simba exits 79" $([ "$rc" -eq 79 ]; echo $?) "rc $rc"
    check "LOST: the command was killed before ttl + transition" $(! kill -0 "$(cat "$T/pid")" 2>/dev/null && [ $((t1 - t0)) -lt 3000 ]; echo $?) "$((t1 - t0)) ms"
    check "LOST: stderr says so with the reason" $(grep -q "lost 'lost' (" "$T/lost.err"; echo $?) "$(cat "$T/lost.err")"
    # ... and a command that ignores SIGTERM gets SIGKILL after --kill-after
    rm -f "$T/pid"
    "$SIMBA" run --ttl 1500ms --transition 1500ms --kill-after 300ms "$U" lost2 -- \
        sh -c "echo \$\$ > '$T/pid'; trap '' TERM; exec sleep 60" 2> "$T/lost.err" & p=$!
    wait_file "$T/pid" 10
    kill -STOP "$srv_pid"
    finish $p 20; rc=$FIN
    kill -CONT "$srv_pid"
    check "LOST: a command that ignores SIGTERM is SIGKILLed after --kill-after" \
        $([ "$rc" -eq 79 ] && ! kill -0 "$(cat "$T/pid")" 2>/dev/null && grep -q SIGKILL "$T/lost.err"; echo $?) "rc $rc"

    # status --json matches what is held and who waits
    rm -f "$T/held"
    "$SIMBA" run --client-id holder-1 "$U" stat -- sh -c "echo 1 > '$T/held'; sleep 6" & p=$!
    wait_file "$T/held" 10
    "$SIMBA" run --client-id waiter-1 "$U" stat -- true & pids=$!
    sleep 0.5
    "$SIMBA" status --json "$U" stat nothing-here > "$T/status.json"; rc=$?
    "$SIMBA" status "$U" stat > "$T/status.txt"; rc2=$?     # now: the holder sleeps only so long
    check "status --json of a held and a missing NAME exits 2 (absent)" $([ $rc -eq 2 ]; echo $?) "$rc"
    check "status --json parses (python3 -m json.tool, line by line)" \
        $(while read -r line; do echo "$line" | python3 -m json.tool >/dev/null || exit 1; done < "$T/status.json"; echo $?)
    python3 - "$T/status.json" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
a, b = lines
ok = (a["name"] == "stat" and a["exists"] and a["capacity"] == 1 and a["held"] == 1 and a["queued"] == 2
      and [h["client"] for h in a["holders"]] == ["holder-1"] and a["holders"][0]["fence"] > 0
      and a["holders"][0]["permits"] == 1 and a["holders"][0]["session"].startswith("holder-1")
      and [w["client"] for w in a["waiters"]] == ["waiter-1"] and a["waiters"][0]["fence"] == 0
      and b["name"] == "nothing-here" and not b["exists"])
sys.exit(0 if ok else 1)
EOF
    check "status --json: holder, waiter, capacity and a missing resource as they are" $? "$(cat "$T/status.json")"
    check "status (text)" $([ $rc2 -eq 0 ] && grep -q 'holder holder-1' "$T/status.txt" && grep -q 'waiter waiter-1' "$T/status.txt"; echo $?) "$(cat "$T/status.txt")"
    finish $p 20 >/dev/null; finish $pids 20 >/dev/null

    # set-capacity, delete
    "$SIMBA" run "$U" cap -- true
    "$SIMBA" set-capacity "$U" cap 3; rc=$?
    out=$("$SIMBA" status --json "$U" cap | python3 -c 'import json,sys; print(json.load(sys.stdin)["capacity"])')
    check "set-capacity 3" $([ $rc -eq 0 ] && [ "$out" = 3 ]; echo $?) "rc $rc capacity $out"
    "$SIMBA" set-capacity "$U" cap 0 2>/dev/null; rc=$?
    check "set-capacity 0 is bad usage" $([ $rc -eq 64 ]; echo $?) "$rc"
    setcap_create_test "$U"
    rm -f "$T/held"
    "$SIMBA" run --ttl 1500ms --transition 1500ms "$U" del -- sh -c "echo 1 > '$T/held'; exec sleep 60" 2>"$T/del.err" & p=$!
    wait_file "$T/held" 10
    "$SIMBA" delete "$U" del; rc=$?
    finish $p 20; out=$FIN
    check "delete while held: the holder loses it (79)" $([ $rc -eq 0 ] && [ "$out" -eq 79 ]; echo $?) "delete $rc, holder $out"

    # connection and credentials
    t0=$(now_ms); "$SIMBA" run --connect-timeout 1s redis://127.0.0.1:1 x -- true 2> "$T/e1"; rc=$?; t1=$(now_ms)
    check "cannot connect: 69 after --connect-timeout" $([ $rc -eq 69 ] && [ $((t1 - t0)) -lt 5000 ] && grep -Eq '^simba: cannot connect \(.+\)$' "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    for u in redis://127.0.0.1:1 "mysql://root@127.0.0.1:1/db" zk://127.0.0.1:1; do
        t0=$(now_ms); "$SIMBA" run --try "$u" x -- true 2> "$T/e1"; rc=$?; t1=$(now_ms)
        check "--try, one host that refuses ($u): 69 within 1 s, with the cause" \
            $([ $rc -eq 69 ] && [ $((t1 - t0)) -lt 1000 ] && grep -Eq '^simba: cannot connect \(.+\)$' "$T/e1"; echo $?) "rc $rc after $((t1 - t0)) ms: $(cat "$T/e1")"
    done
    "$SIMBA" run --connect-timeout 1s "mysql://root@127.0.0.1:$SIMBA_REDIS_PORT/db" x -- true 2> "$T/e1"; rc=$?
    check "a MySQL URL on a Redis port: 69, says the port may be another service's" \
        $([ $rc -eq 69 ] && grep -q "is the URL's port that of a mysql server" "$T/e1"; echo $?) "rc $rc: $(cat "$T/e1")"
    t0=$(now_ms); "$SIMBA" run --try "redis://127.0.0.1:$SIMBA_REDIS_AUTH_PORT" x -- true 2> "$T/e1"; rc=$?; t1=$(now_ms)
    check "no password for a requirepass server: 77 within 1 s" \
        $([ $rc -eq 77 ] && [ $((t1 - t0)) -lt 1000 ]; echo $?) "rc $rc after $((t1 - t0)) ms: $(cat "$T/e1")"
    "$SIMBA" run "redis://127.0.0.1:$SIMBA_REDIS_AUTH_PORT?password_env=SIMBA_NOT_SET_X" x -- true 2> "$T/e1"; rc=$?
    check "password_env naming an unset variable: 77, said as a password problem, not a bad URL" \
        $([ $rc -eq 77 ] && grep -q "password" "$T/e1" && ! grep -q "bad URL" "$T/e1"; echo $?) "rc $rc: $(cat "$T/e1")"
    "$SIMBA" run "redis://:wrong-s3cret@127.0.0.1:$SIMBA_REDIS_AUTH_PORT" x -- true 2> "$T/e1"; rc=$?
    check "wrong password: 77, the password is not printed" $([ $rc -eq 77 ] && ! grep -q s3cret "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    PW="$SIMBA_REDIS_AUTH_PASSWORD" "$SIMBA" run "redis://127.0.0.1:$SIMBA_REDIS_AUTH_PORT?password_env=PW" x -- true; rc=$?
    check "password_env: the password stays out of argv" $([ $rc -eq 0 ]; echo $?) "$rc"
    printf '%s\n' "$SIMBA_REDIS_AUTH_PASSWORD" > "$T/pwfile"
    "$SIMBA" run "redis://127.0.0.1:$SIMBA_REDIS_AUTH_PORT?password_file=$T/pwfile" x -- true; rc=$?
    check "password_file" $([ $rc -eq 0 ]; echo $?) "$rc"
    "$SIMBA" run "redis://127.0.0.1:$SIMBA_REDIS_PORT?tenant=t-a&ttl=3s&prefix=cli" x -- true; rc=$?
    check "client options and backend parameters in the URL" $([ $rc -eq 0 ]; echo $?) "$rc"

    # elect: one leader at a time; the next takes over when it goes
    f="$T/elect"; : > "$f"
    "$SIMBA" elect "$U" ldr -- sh -c "echo A >> '$f'; exec sleep 60" & p=$!
    wait_file "$f" 10
    "$SIMBA" elect -v "$U" ldr -- sh -c "echo B >> '$f'; exec sleep 60" 2> "$T/elect.err" & pids=$!
    sleep 1
    out=$(tr -d '\n' < "$f")
    check "elect: one leader runs its command" $([ "$out" = A ]; echo $?) "$out"
    kill -TERM $p; finish $p 10; rc=$FIN
    for _ in $(seq 1 60); do grep -q B "$f" && break; sleep 0.05; done
    out=$(tr -d '\n' < "$f")
    check "elect: the leader's command ends with the signal (143)" $([ "$rc" -eq 143 ]; echo $?) "$rc"
    check "elect: the other one takes over within 3 s" $([ "$out" = AB ]; echo $?) "$out"
    kill -TERM $pids; finish $pids 10 >/dev/null
    check "elect --verbose prints owner changes" $(grep -q "leader of 'ldr' is now" "$T/elect.err"; echo $?) "$(cat "$T/elect.err")"
    # elect: on LOST the command is killed and it contends again; --once exits 79
    srv_pid=$(cat "$RDIR/main.pid")
    : > "$f"
    "$SIMBA" elect --once --ttl 1500ms --transition 1500ms "$U" ldr2 -- sh -c "echo X >> '$f'; exec sleep 60" 2>/dev/null & p=$!
    wait_file "$f" 10
    kill -STOP "$srv_pid"; finish $p 20; rc=$FIN; kill -CONT "$srv_pid"
    check "elect --once: LOST exits 79" $([ "$rc" -eq 79 ]; echo $?) "$rc"
    : > "$f"
    "$SIMBA" elect --ttl 1500ms --transition 1500ms "$U" ldr3 -- sh -c "echo Y >> '$f'; exec sleep 60" 2>/dev/null & p=$!
    wait_file "$f" 10
    kill -STOP "$srv_pid"; sleep 3; kill -CONT "$srv_pid"
    for _ in $(seq 1 200); do [ "$(grep -c Y "$f")" -ge 2 ] && break; sleep 0.05; done
    check "elect: after LOST it contends again and reruns the command" $([ "$(grep -c Y "$f")" -ge 2 ]; echo $?) "$(grep -c Y "$f") runs"
    kill -TERM $p; finish $p 10 >/dev/null

    hold_at_least_test "$U"
    status_test "$U" redis all
    grace_test "$U"
}

# status_test URL WHAT TIMES: `simba status` per holder, by the server's
# clock: a live holder renews, one whose simba was killed -9 does not (its
# renewal ages and its expiry nears between two looks); exit codes 0 held,
# 1 free, 2 absent (several NAMEs: the highest); the JSON fields. TIMES:
# what the backend reports: all, or none (ZooKeeper: no time at all).
status_test() {
    local U=$1 what=$2 times=$3 p q rc1 rc2 rc3 rc4 rc5
    rm -f "$T/st-live" "$T/st-dead"
    "$SIMBA" run --client-id live-1 --ttl 6s --transition 6s "$U" st-live -- \
        sh -c "echo \$\$ > '$T/st-live'; exec sleep 30" & p=$!
    "$SIMBA" run --client-id dead-1 --ttl 6s --transition 6s "$U" st-dead -- \
        sh -c "echo \$\$ > '$T/st-dead'; exec sleep 30" & q=$!
    wait_file "$T/st-live" 10; wait_file "$T/st-dead" 10
    kill -9 $q; wait $q 2>/dev/null
    kill -9 "$(cat "$T/st-dead")" 2>/dev/null       # its job, in its own process group
    "$SIMBA" status --json "$U" st-live st-dead > "$T/st1.json"; rc1=$?
    sleep 5.5                                        # past a third of the lease (12 s) and 1 s
    "$SIMBA" status --json "$U" st-live st-dead > "$T/st2.json"; rc2=$?
    "$SIMBA" status "$U" st-live st-dead > "$T/st2.txt"; rc3=$?
    check "$what: status of two held NAMEs exits 0" $([ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ]; echo $?) \
        "rc $rc1 $rc2 $rc3"
    python3 - "$T/st1.json" "$T/st2.json" "$times" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
times = sys.argv[3]
keys = {"client", "session", "fence", "permits", "exclusive", "held_ms", "renewed_ago_ms", "expires_in_ms", "renewing"}
top = {"name", "exists", "state", "capacity", "queued", "held", "held_permits", "waiting", "grace_ms", "holders", "waiters"}
bad = []
for r in a + b:
    if set(r) != top: bad.append("resource keys %s" % sorted(r))
    if r["state"] != "held" or r["held"] != 1 or r["held_permits"] != 1 or r["waiting"] != 0 or r["queued"] != 1:
        bad.append("counts of %s" % r["name"])
    for h in r["holders"]:
        if set(h) != keys: bad.append("holder keys %s" % sorted(h))
live1, dead1 = a[0]["holders"][0], a[1]["holders"][0]
live2, dead2 = b[0]["holders"][0], b[1]["holders"][0]
if live2["client"] != "live-1" or dead2["client"] != "dead-1": bad.append("clients")
if times == "none":
    for h in (live1, dead1, live2, dead2):
        if any(h[k] is not None for k in ("held_ms", "renewed_ago_ms", "expires_in_ms", "renewing")):
            bad.append("times of %s: want null" % h["client"])
else:
    # held since before the first look; the dead one's expiry nears between the looks,
    # the live one's stays above what is left of a lease renewed within ttl/3 (2 s)
    if not (live2["held_ms"] >= 5000 and dead2["held_ms"] >= 5000): bad.append("held_ms")
    if not (dead2["expires_in_ms"] < dead1["expires_in_ms"] and dead2["expires_in_ms"] <= 12000 - 5000):
        bad.append("dead expires_in_ms %s then %s" % (dead1["expires_in_ms"], dead2["expires_in_ms"]))
    if not live2["expires_in_ms"] > 8000: bad.append("live expires_in_ms %s" % live2["expires_in_ms"])
    if not (dead2["renewed_ago_ms"] > dead1["renewed_ago_ms"] and dead2["renewed_ago_ms"] >= 5000):
        bad.append("dead renewed_ago_ms %s then %s" % (dead1["renewed_ago_ms"], dead2["renewed_ago_ms"]))
    if not live2["renewed_ago_ms"] < 6000: bad.append("live renewed_ago_ms %s" % live2["renewed_ago_ms"])
    if not (live2["renewing"] is True and dead2["renewing"] is False): bad.append("renewing")
print("; ".join(bad))
sys.exit(1 if bad else 0)
EOF
    check "$what: status --json: the server's times tell the killed holder from the live one ($times)" $? \
        "$(cat "$T/st1.json" "$T/st2.json")"
    if [ "$times" = all ]; then
        check "$what: status (text) marks the killed holder NOT RENEWING, not the live one" \
            $(grep -q 'holder dead-1 .*NOT RENEWING.*renewed [0-9.]* s ago, expires in [0-9.]* s' "$T/st2.txt" &&
              grep 'holder live-1' "$T/st2.txt" | grep -v -q 'NOT RENEWING' &&
              grep -q 'holder live-1 .*held for [0-9.]* s, renewed [0-9.]* s ago, expires in' "$T/st2.txt"; echo $?) \
            "$(cat "$T/st2.txt")"
    fi
    "$SIMBA" run "$U" st-free -- true
    "$SIMBA" status "$U" st-free > "$T/st3.txt"; rc1=$?
    "$SIMBA" status "$U" st-none > "$T/st4.txt"; rc2=$?
    "$SIMBA" status "$U" st-live st-free > /dev/null; rc3=$?
    "$SIMBA" status --json "$U" st-live st-none st-free > "$T/st5.json"; rc4=$?
    "$SIMBA" status "$U" "bad"$'\001' > /dev/null 2>&1; rc5=$?
    check "$what: status exits 1 free, 2 absent; several NAMEs: the highest; bad usage 64" \
        $([ $rc1 -eq 1 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 1 ] && [ $rc4 -eq 2 ] && [ $rc5 -eq 64 ] &&
          grep -q '^st-free: capacity 1, held 0 (0 permits), waiting 0, queued 0$' "$T/st3.txt" &&
          grep -q '^st-none: no such resource$' "$T/st4.txt" &&
          [ "$(python3 -c 'import json,sys; print(" ".join(json.loads(l)["state"] for l in open(sys.argv[1])))' "$T/st5.json")" = "held absent free" ]
          echo $?) "rc $rc1 $rc2 $rc3 $rc4 $rc5: $(cat "$T/st3.txt" "$T/st4.txt" "$T/st5.json")"
    kill -TERM $p; finish $p 10
}

# hold_at_least_test URL: --hold-at-least keeps the lock after a quick job
# until that long after the grant, so another host's --try of the same
# schedule is refused; simba then exits with the job's status
hold_at_least_test() {
    local U=$1 p rc t0 t1
    t0=$(now_ms)
    "$SIMBA" run --try --hold-at-least 2s "$U" cron-once -- true & p=$!
    sleep 1
    "$SIMBA" run --try "$U" cron-once -- true 2>/dev/null; rc=$?
    check "--hold-at-least 2s, job true: a second run --try 1 s later is busy (75)" $([ $rc -eq 75 ]; echo $?) "rc $rc"
    finish $p 10; t1=$(now_ms)
    check "--hold-at-least 2s: simba exits with the job's status >= 2 s after the grant" \
        $([ "$FIN" -eq 0 ] && [ $((t1 - t0)) -ge 2000 ] && [ $((t1 - t0)) -lt 4000 ]; echo $?) "rc $FIN after $((t1 - t0)) ms"
    "$SIMBA" run --try "$U" cron-once -- true; rc=$?
    check "--hold-at-least: released at its end (the next --try is granted)" $([ $rc -eq 0 ]; echo $?) "rc $rc"
    "$SIMBA" run --hold-at-least 500ms "$U" cron-once -- sh -c 'exit 3'; rc=$?
    check "--hold-at-least: the job's own status comes back (3)" $([ $rc -eq 3 ]; echo $?) "rc $rc"
}

# permits_test URL: --permits without --capacity is checked against the
# capacity the resource has on the server, not against the default 1
permits_test() {
    local U=$1 rc
    "$SIMBA" run --capacity 5 "$U" cap5 -- true
    "$SIMBA" run --permits 2 "$U" cap5 -- true 2> "$T/e1"; rc=$?
    check "--permits 2 on an existing capacity-5 resource, no --capacity: granted" $([ $rc -eq 0 ]; echo $?) "rc $rc $(cat "$T/e1")"
    "$SIMBA" run --permits 6 "$U" cap5 -- true 2> "$T/e1"; rc=$?
    check "--permits 6 on capacity 5: 64 naming the capacity" $([ $rc -eq 64 ] && grep -q "capacity 5" "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    "$SIMBA" run --permits 2 "$U" no-such-cap -- true 2> "$T/e1"; rc=$?
    check "--permits 2 on a resource that does not exist, no --capacity: 64 asking for --capacity" \
        $([ $rc -eq 64 ] && grep -q -- "--capacity" "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
}

# setcap_create_test URL: set-capacity does not create a resource (a typo)
# unless --create says so
setcap_create_test() {
    local U=$1 rc out
    "$SIMBA" set-capacity "$U" cpa-typo 3 2> "$T/e1"; rc=$?
    out=$("$SIMBA" status "$U" cpa-typo)
    check "set-capacity on a missing resource: 70, says so, creates nothing" \
        $([ $rc -eq 70 ] && grep -q "no such resource" "$T/e1" && [ "$out" = "cpa-typo: no such resource" ]; echo $?) \
        "rc $rc $(cat "$T/e1") / $out"
    "$SIMBA" set-capacity --create "$U" cpa-new 3; rc=$?
    out=$("$SIMBA" status "$U" cpa-new)
    check "set-capacity --create makes it" $([ $rc -eq 0 ] && [[ "$out" == "cpa-new: capacity 3,"* ]]; echo $?) "rc $rc $out"
}

# grace_test URL: a server that lost its data (here: restarted empty)
# grants nothing for a lease; simba says so, and init-server ends it
grace_test() {
    local U=$1 rc rc2 p t0 t1 out
    "$SIMBA_REDIS_CTL" restart >/dev/null 2>&1
    out=$("$SIMBA" status "$U" grace); rc=$?
    check "restart grace: status shows it, with what is left of it and init-server" \
        $([ $rc -eq 2 ] && [[ "$out" == *"restart grace: the server grants nothing for "*" s more"*"init-server"* ]]; echo $?) \
        "rc $rc $out"
    out=$("$SIMBA" status --json "$U" grace | python3 -c 'import json,sys; print(json.load(sys.stdin)["grace_ms"])')
    check "restart grace: status --json grace_ms > 0" $([ "${out:-0}" -gt 0 ]; echo $?) "grace_ms $out"
    "$SIMBA" run --try "$U" grace -- true 2> "$T/e1"; rc=$?
    check "restart grace: --try exits 75 naming the grace, its end and init-server, not 'busy'" \
        $([ $rc -eq 75 ] && grep -q "restart grace .* until [0-9:]* .*init-server" "$T/e1" && ! grep -q busy "$T/e1"; echo $?) \
        "rc $rc $(cat "$T/e1")"
    "$SIMBA" run "$U" grace -- true 2> "$T/e2" & p=$!
    sleep 1.5; kill -TERM $p; finish $p 10
    check "restart grace: a plain run says once, without -v, that it waits for it" \
        $([ "$(grep -c "waiting for 'grace': the server's restart grace" "$T/e2")" -eq 1 ]; echo $?) "$(cat "$T/e2")"
    "$SIMBA" init-server "$U" 2> "$T/e1"; rc=$?
    t0=$(now_ms); "$SIMBA" run --try "$U" grace -- true 2>> "$T/e1"; rc2=$?; t1=$(now_ms)
    check "init-server on the fresh server: then run --try is granted at once" \
        $([ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ $((t1 - t0)) -lt 1500 ]; echo $?) "init $rc, run $rc2 after $((t1 - t0)) ms: $(cat "$T/e1")"
    "$SIMBA" init-server "zk://127.0.0.1:1" 2> "$T/e1"; rc=$?
    check "init-server on a backend without an init: 64, says why" \
        $([ $rc -eq 64 ] && grep -q "only a Redis server" "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
}

part_mysql() {
    local U="mysql://${SIMBA_MYSQL_USER}@127.0.0.1:$SIMBA_MYSQL_PORT/$SIMBA_MYSQL_DATABASE?create_schema=1"
    overlap_test "$U" mysql
    overlap_test "mysql://${SIMBA_MYSQL_USER}@/$SIMBA_MYSQL_DATABASE?socket=$SIMBA_MYSQL_SOCKET&create_schema=1" mysql-socket
    PW="$SIMBA_MYSQL_PASSWORD" no_inherit_test \
        "mysql://${SIMBA_MYSQL_USER}@127.0.0.1:$SIMBA_MYSQL_PORT/$SIMBA_MYSQL_DATABASE?create_schema=1&password_env=PW" mysql PW
    ghost_test "$U" mysql
    status_test "$U" mysql all

    # a database without simba's tables: the message says how to create them
    local rc
    "$SIMBA_MYSQL_CTL" sql 'CREATE DATABASE IF NOT EXISTS simba_cli_noschema' >/dev/null 2>&1
    "$SIMBA" run --connect-timeout 2s "mysql://${SIMBA_MYSQL_USER}@127.0.0.1:$SIMBA_MYSQL_PORT/simba_cli_noschema" \
        x -- true 2> "$T/e1"; rc=$?
    check "mysql: no tables: 69, the hint names simba_mysql.sql and create_schema=1" \
        $([ $rc -eq 69 ] && grep -q 'simba_mysql\.sql' "$T/e1" && grep -q 'create_schema=1' "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
}

part_pg() {
    local B="${SIMBA_PG_USER}@127.0.0.1:$SIMBA_PG_PORT/$SIMBA_PG_DATABASE" U rc out p f
    U="postgres://$B?create_schema=1&password_env=PW"
    export PW="$SIMBA_PG_PASSWORD"
    overlap_test "$U" pg
    overlap_test "postgresql://$B?password_env=PW&target_session_attrs=read-write&sslmode=disable" pg-libpq-params
    no_inherit_test "$U" pg PW
    ghost_test "$U" pg

    # passwords as libpq users keep them: a file of simba's, PGPASSFILE
    printf '%s\n' "$SIMBA_PG_PASSWORD" > "$T/pgpw"
    "$SIMBA" run "postgres://$B?password_file=$T/pgpw" pwf -- true; rc=$?
    check "pg: password_file" $([ $rc -eq 0 ]; echo $?) "rc $rc"
    printf '127.0.0.1:%s:%s:%s:%s\n' "$SIMBA_PG_PORT" "$SIMBA_PG_DATABASE" "$SIMBA_PG_USER" "$SIMBA_PG_PASSWORD" > "$T/pgpass"
    chmod 600 "$T/pgpass"
    PGPASSFILE="$T/pgpass" "$SIMBA" run "postgres://$B" pgpass -- true; rc=$?
    check "pg: PGPASSFILE (libpq's own)" $([ $rc -eq 0 ]; echo $?) "rc $rc"
    "$SIMBA" run "postgres://${SIMBA_PG_USER}:wrong@127.0.0.1:$SIMBA_PG_PORT/$SIMBA_PG_DATABASE" x -- true 2> "$T/e1"; rc=$?
    check "pg: a wrong password: 77 in the server's words, the password not shown" \
        $([ $rc -eq 77 ] && grep -q 'password authentication failed' "$T/e1" && ! grep -q wrong "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    "$SIMBA" run "postgres://$B?password_env=PW&no_such_param=1" x -- true 2> "$T/e1"; rc=$?
    check "pg: a parameter libpq does not know: 64 in libpq's words" \
        $([ $rc -eq 64 ] && grep -q 'no_such_param' "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    "$SIMBA" run --connect-timeout 3s "postgres://$B?password_env=PW&schema=not_here" x -- true 2> "$T/e1"; rc=$?
    check "pg: no schema: 69, the hint names simba_pg.sql and create_schema=1" \
        $([ $rc -eq 69 ] && grep -q 'simba_pg\.sql' "$T/e1" && grep -q 'create_schema=1' "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"

    # status while held; elect: one leader, the next takes over
    "$SIMBA" run "$U" pgst -- sleep 3 & p=$!
    sleep 1
    out=$("$SIMBA" status "$U" pgst)
    check "pg: status names the holder and its server times" \
        $([[ "$out" == "pgst: capacity 1, held 1"* ]] && [[ "$out" == *"expires in"* ]]; echo $?) "$out"
    finish $p 10
    f="$T/pgelect"; : > "$f"
    "$SIMBA" elect "$U" pgldr -- sh -c "echo A >> '$f'; exec sleep 60" & p=$!
    wait_file "$f" 10
    "$SIMBA" elect "$U" pgldr -- sh -c "echo B >> '$f'; exec sleep 60" & pids=$!
    sleep 1
    out=$(tr -d '\n' < "$f")
    check "pg: elect: one leader runs its command" $([ "$out" = A ]; echo $?) "$out"
    kill -TERM $p; finish $p 10
    for _ in $(seq 1 100); do grep -q B "$f" && break; sleep 0.05; done
    out=$(tr -d '\n' < "$f")
    check "pg: elect: the other one takes over" $([ "$out" = AB ]; echo $?) "$out"
    kill -TERM $pids; finish $pids 10 >/dev/null
}

part_zk() {
    overlap_test "zk://$SIMBA_ZK_HOSTS" zk
    # (a /chroot must exist on the server already; the URL form is in test_url)
    overlap_test "zk://$SIMBA_ZK_HOSTS?base_path=/cli-locks&session_timeout=10s" zk-base-path
    no_inherit_test "zk://$SIMBA_ZK_HOSTS" zk
    status_test "zk://$SIMBA_ZK_HOSTS" zk none

    # a chroot that is not there: the library's message, not a generic text
    local rc
    "$SIMBA" run --connect-timeout 5s "zk://$SIMBA_ZK_HOSTS/no-such-chroot" x -- true 2> "$T/e1"; rc=$?
    check "zk: a missing chroot is named: 'chroot /no-such-chroot does not exist: create it first'" \
        $([ $rc -ne 0 ] && grep -q 'chroot /no-such-chroot does not exist: create it first' "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
}

# job_group_test URL WHAT: the job is its whole process group. A process the
# command started in it (here one that ignores SIGTERM) is stopped on LOST
# even when the command itself is gone, and while one still runs after the
# command exited, NAME stays held (it would run unguarded after a release).
job_group_test() {
    local url=$1 what=$2 p rc gc
    rm -f "$T/gc"
    "$SIMBA" run --transition 2s --kill-after 500ms "$url" grp-lost -- sh -c \
        "sh -c 'trap \"\" TERM; echo \$\$ > \"$T/gc\"; exec sleep 60' & exec sleep 60" 2> "$T/grp.err" & p=$!
    wait_file "$T/gc" 10; gc=$(cat "$T/gc")
    "$SIMBA" delete "$url" grp-lost
    finish $p 20; rc=$FIN
    check "$what: LOST: a process of the job's group that ignores SIGTERM is gone when simba exits 79" \
        $([ "$rc" -eq 79 ] && ! kill -0 "$gc" 2>/dev/null; echo $?) "rc $rc, $(ps -o pid=,stat=,cmd= -p "$gc")"
    kill -9 "$gc" 2>/dev/null
    rm -f "$T/gc"
    "$SIMBA" run --kill-after 0ms "$url" grp-k0 -- sh -c "trap '' TERM; echo \$\$ > '$T/gc'; exec sleep 60" 2> "$T/grp.err" & p=$!
    wait_file "$T/gc" 10
    "$SIMBA" delete "$url" grp-k0
    finish $p 20; rc=$FIN
    check "$what: LOST with --kill-after 0ms: SIGKILL with the SIGTERM, not after the default" \
        $([ "$rc" -eq 79 ] && grep -q 'SIGKILL in 0 ms' "$T/grp.err"; echo $?) "rc $rc, $(cat "$T/grp.err")"
    rm -f "$T/gc"
    "$SIMBA" run "$url" grp-bg -- sh -c "sh -c 'echo \$\$ > \"$T/gc\"; sleep 2' & exit 3" 2> "$T/grp.err" & p=$!
    wait_file "$T/gc" 10; gc=$(cat "$T/gc")
    sleep 0.5
    "$SIMBA" run --try "$url" grp-bg -- true 2>/dev/null; rc=$?
    check "$what: the command exited, a process it started in its group runs on: NAME is still held (75)" \
        $([ "$rc" -eq 75 ] && kill -0 "$gc" 2>/dev/null; echo $?) "try $rc, $(cat "$T/grp.err")"
    finish $p 20; rc=$FIN
    check "$what: ... and simba exits with the command's status once the group is empty" \
        $([ "$rc" -eq 3 ] && ! kill -0 "$gc" 2>/dev/null; echo $?) "rc $rc"
    "$SIMBA" run --try "$url" grp-bg -- true; rc=$?
    check "$what: ... then NAME is free" $([ "$rc" -eq 0 ]; echo $?) "rc $rc"
}

# tstp_test URL WHAT: Ctrl-Z (SIGTSTP) stops simba, and a stopped simba
# renews nothing: its job must stop with it, or it runs on past the lease
# while another host holds NAME. On SIGCONT the job goes on only if the lock
# was not lost meanwhile; if it was, the job gets SIGTERM before it runs.
tstp_test() {
    local url=$1 what=$2 p rc a b c
    # simba in a process group of its own whose parent (this script) is in
    # the same session: SIGTSTP stops only a member of a group that is not
    # orphaned (the kernel drops it otherwise), and this script's own group
    # may be orphaned when the suite runs in the background
    local own_group=(python3 -c 'import os, sys; os.setpgid(0, 0); os.execv(sys.argv[1], sys.argv[1:])')
    rm -f "$T/ticks"
    "${own_group[@]}" "$SIMBA" run --ttl 1s --transition 1s "$url" tstp -- sh -c "while :; do echo x >> '$T/ticks'; sleep 0.1; done" \
        2> "$T/tstp.err" & p=$!
    wait_file "$T/ticks" 10
    kill -TSTP $p; sleep 0.5
    a=$(wc -l < "$T/ticks"); sleep 3; b=$(wc -l < "$T/ticks")
    check "$what: SIGTSTP to simba stops its job too (no tick in 3 s, past the 2 s lease)" \
        $([ "$a" -eq "$b" ]; echo $?) "$((b - a)) ticks while simba was stopped"
    kill -CONT $p
    finish $p 10; rc=$FIN; sleep 0.3; c=$(wc -l < "$T/ticks")
    check "$what: SIGCONT after the lease ran out: LOST, the job ends without running on, exit 79" \
        $([ "$rc" -eq 79 ] && [ "$c" -eq "$b" ]; echo $?) "rc $rc, $((c - b)) ticks after SIGCONT: $(cat "$T/tstp.err")"
    rm -f "$T/ticks"
    "${own_group[@]}" "$SIMBA" run --ttl 5s "$url" tstp2 -- sh -c "while :; do echo x >> '$T/ticks'; sleep 0.1; done" & p=$!
    wait_file "$T/ticks" 10
    kill -TSTP $p; sleep 0.5; kill -CONT $p
    a=$(wc -l < "$T/ticks"); sleep 1; b=$(wc -l < "$T/ticks")
    kill -TERM $p; finish $p 10; rc=$FIN
    check "$what: SIGCONT within the lease: the job goes on, then ends with the forwarded SIGTERM (143)" \
        $([ "$b" -gt "$a" ] && [ "$rc" -eq 143 ]; echo $?) "$((b - a)) ticks after SIGCONT, rc $rc"
}

# nested_test URL WHAT: a `simba run` inside the job of another that holds
# the same NAME would wait for ever (the outer one releases only when its
# job, the inner run included, has ended): it is refused at once, exit 64.
# With room left (a semaphore), the inner run is granted as any other.
nested_test() {
    local url=$1 what=$2 rc t0 t1
    t0=$(now_ms)
    "$SIMBA" run --connect-timeout 5s "$url" nest -- "$SIMBA" run "$url" nest -- echo inner > "$T/nest.out" 2> "$T/nest.err" &
    finish $! 10; rc=$FIN; t1=$(now_ms)
    check "$what: simba run of NAME inside the job of a simba run holding NAME: 64 at once, says why" \
        $([ "$rc" -eq 64 ] && ! grep -q inner "$T/nest.out" && grep -q 'would wait for ever' "$T/nest.err"; echo $?) \
        "rc $rc after $((t1 - t0)) ms: $(cat "$T/nest.err")"
    "$SIMBA" run --capacity 2 "$url" nest-sem -- "$SIMBA" run --capacity 2 "$url" nest-sem -- echo inner > "$T/nest.out" 2> "$T/nest.err" &
    finish $! 10; rc=$FIN
    check "$what: ... with a permit left (capacity 2), the inner run is granted" \
        $([ "$rc" -eq 0 ] && grep -q inner "$T/nest.out"; echo $?) "rc $rc: $(cat "$T/nest.err")"
    "$SIMBA" run "$url" nest-a -- "$SIMBA" run "$url" nest-b -- echo inner > "$T/nest.out" 2> "$T/nest.err" &
    finish $! 10; rc=$FIN
    check "$what: ... and another NAME is granted" $([ "$rc" -eq 0 ] && grep -q inner "$T/nest.out"; echo $?) "rc $rc: $(cat "$T/nest.err")"
}

# elect_overlap_test URL WHAT: after a LOST, elect contends again and may be
# granted at once (here: an admin deleted the entry, nobody else contends);
# the command it starts then must not overlap the previous one, which is
# still in its --kill-after window (it ignores SIGTERM).
elect_overlap_test() {
    local url=$1 what=$2 p rc
    : > "$T/el.pids"; : > "$T/el.log"
    printf '%s\n' '#!/bin/sh' \
        "[ -s '$T/el.pids' ] || trap '' TERM" \
        "first=\$(head -n 1 '$T/el.pids')" \
        "echo \$\$ >> '$T/el.pids'" \
        "if [ -n \"\$first\" ] && kill -0 \"\$first\" 2>/dev/null; then echo overlap >> '$T/el.log'; fi" \
        'exec sleep 60' > "$T/eljob"
    chmod +x "$T/eljob"
    "$SIMBA" elect --transition 4s --kill-after 2s "$url" el-ovl -- "$T/eljob" 2> "$T/el.err" & p=$!
    wait_file "$T/el.pids" 10
    "$SIMBA" delete "$url" el-ovl
    for _ in $(seq 1 100); do [ "$(wc -l < "$T/el.pids")" -ge 2 ] && break; sleep 0.05; done
    check "$what: elect after LOST: the rerun waits for the previous command to end (no overlap)" \
        $([ "$(wc -l < "$T/el.pids")" -ge 2 ] && ! grep -q overlap "$T/el.log"; echo $?) \
        "$(wc -l < "$T/el.pids") runs, $(cat "$T/el.log"), $(cat "$T/el.err")"
    kill -TERM $p; finish $p 10; rc=$FIN
    check "$what: ... and SIGTERM then ends the rerun (143)" $([ "$rc" -eq 143 ]; echo $?) "rc $rc"
    while read -r q; do kill -9 "$q" 2>/dev/null; done < "$T/el.pids"
}

# ttou_test URL WHAT: with `stty tostop`, a background process that writes
# to the terminal gets SIGTTOU, which stops it. A stopped simba renews
# nothing while its job runs on, so simba's own messages do not stop it:
# simba in the background of a terminal (a pty) with tostop, whose command
# exits and leaves a process in its group (simba says so on the terminal),
# is still running, not stopped, after its lease.
ttou_test() {
    local url=$1 what=$2 out
    rm -f "$T/ttou.pg"
    out=$(python3 - "$SIMBA" "$url" "$T" <<'EOF'
import os, pty, sys, termios, time
simba, url, d = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    t = termios.tcgetattr(0)
    t[3] |= termios.TOSTOP
    termios.tcsetattr(0, termios.TCSANOW, t)
    p = os.fork()
    if p == 0:
        os.setpgid(0, 0)                       # a background group of this terminal
        os.execv(simba, [simba, "run", "--ttl", "1s", "--transition", "1s", url, "ttou", "--", "sh", "-c",
                         "echo $$ > %s/ttou.pg; (while :; do sleep 0.1; done) & exit 0" % d])
    os.setpgid(p, p)
    time.sleep(3.5)                            # past the lease (2 s)
    state = open("/proc/%d/stat" % p).read().split()[2]
    try:
        os.killpg(int(open(d + "/ttou.pg").read()), 9)
    except (OSError, ValueError):
        pass
    try:
        os.killpg(p, 9)
    except OSError:
        pass
    print("simba-state:%s" % state, flush=True)
    os._exit(0)
out = b""
while True:
    try:
        b = os.read(fd, 1024)
    except OSError:
        break
    if not b:
        break
    out += b
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
EOF
)
    check "$what: simba in the background of a tty with tostop is not stopped by its own message" \
        $([[ "$out" == *"still run in its process group"* ]] &&
          [[ "$out" == *"simba-state:S"* || "$out" == *"simba-state:R"* ]]; echo $?) "$(echo "$out" | tr '\r\n' '  ')"
}

# No server: the database is a file in the part's temporary directory.
# status --json of a name that is not UTF-8 (names are bytes, JSON text is
# UTF-8): strict JSON, the odd byte as U+FFFD, the exact bytes in name_hex;
# a UTF-8 name as it is, without name_hex
json_bytes_test() {
    local U=$1 what=$2 p
    rm -f "$T/held"
    "$SIMBA" run "$U" $'n\xffme-\xc3\xa9' -- sh -c "echo 1 > '$T/held'; sleep 5" 2>/dev/null & p=$!
    wait_file "$T/held" 10
    # and one of each other case: an overlong form, a surrogate, a 4-byte
    # character, a sequence cut short by the end
    "$SIMBA" status --json "$U" $'n\xffme-\xc3\xa9' $'caf\xc3\xa9' \
        $'\xc0\xaf-\xed\xa0\x80-\xf0\x9f\x94\x92-\xe2\x82' > "$T/bytes.json"
    python3 - "$T/bytes.json" <<'EOF'
import json, sys
a, b, c = [json.loads(l.decode("utf-8")) for l in open(sys.argv[1], "rb")]
ok = (a["name"] == "n\ufffdme-\u00e9" and a["name_hex"] == "6eff6d652dc3a9" and a["state"] == "held"
      and b["name"] == "caf\u00e9" and "name_hex" not in b and b["state"] == "absent"
      and c["name"] == "\ufffd\ufffd-\ufffd\ufffd\ufffd-\U0001f512-\ufffd\ufffd"
      and c["name_hex"] == "c0af2deda0802df09f94922de282")
sys.exit(0 if ok else 1)
EOF
    check "$what: status --json of a name that is not UTF-8: strict JSON, U+FFFD, name_hex" $? \
        "$(od -c "$T/bytes.json" | head -5)"
    kill "$p" 2>/dev/null; finish $p 20 >/dev/null
}

part_sqlite() {
    local U="sqlite://$T/locks.db" rc p out t0 t1
    overlap_test "$U" sqlite
    no_inherit_test "$U" sqlite
    ghost_test "$U" sqlite
    job_group_test "$U" sqlite
    tstp_test "$U" sqlite
    ttou_test "$U" sqlite
    nested_test "$U" sqlite
    elect_overlap_test "$U" sqlite
    json_bytes_test "$U" sqlite
    rm -f "$T/held"
    "$SIMBA" run "$U" busy -- sh -c "echo 1 > '$T/held'; sleep 1" & p=$!
    wait_file "$T/held" 10
    "$SIMBA" run --try "$U" busy -- true 2>/dev/null; rc=$?
    check "sqlite: --try while held: exit 75" $([ $rc -eq 75 ]; echo $?) "rc $rc"
    out=$("$SIMBA" status "$U" busy 2>&1)
    check "sqlite: status shows the holder and its server times" $([[ "$out" == *"held 1"* && "$out" == *"expires in"* ]]; echo $?) "$out"
    "$SIMBA" run --wait 10s "$U" busy -- true; rc=$?
    check "sqlite: --wait gets the lock when the holder ends" $([ $rc -eq 0 ]; echo $?) "rc $rc"
    finish $p 10
    # a holder killed with -9: the kernel ends its mark, the lease (16 s) is not waited for
    rm -f "$T/held"
    "$SIMBA" run "$U" k9 -- sh -c "echo \$\$ > '$T/held'; exec sleep 60" & p=$!
    wait_file "$T/held" 10
    kill -9 $p; wait $p 2>/dev/null
    "$SIMBA" run --wait 5s "$U" k9 -- true; rc=$?
    check "sqlite: after kill -9 of the holding simba, --wait 5s gets the lock (lease 16 s)" $([ $rc -eq 0 ]; echo $?) "rc $rc"
    kill "$(cat "$T/held")" 2>/dev/null   # the job the killed simba left behind
    "$SIMBA" run "sqlite://host$T/x.db" x -- true 2> "$T/e1"; rc=$?
    check "sqlite: a host in the URL: 64, says three slashes" $([ $rc -eq 64 ] && grep -q 'three slashes' "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
    printf 'not a database at all, just words. %.0s' $(seq 1 200) > "$T/junk.db"
    "$SIMBA" run --connect-timeout 2s "sqlite://$T/junk.db" x -- true 2> "$T/e1"; rc=$?
    check "sqlite: a corrupt file: 69, says so" $([ $rc -eq 69 ] && grep -q 'corrupt or not an SQLite file' "$T/e1"; echo $?) "rc $rc $(cat "$T/e1")"
}

if [ "${1:-}" = --part ]; then
    T=$(mktemp -d "${TMPDIR:-/tmp}/simba-cli.XXXXXX")
    trap 'rm -rf "$T"' EXIT
    mkjob
    mkfdsjob
    "part_$2"
    exit 0
fi

RESULTS=$(mktemp "${TMPDIR:-/tmp}/simba-cli-results.XXXXXX")
export RESULTS
trap 'rm -f "$RESULTS"' EXIT
[ -x "$SIMBA" ] || { echo "no $SIMBA: run make cli"; echo "0 passed, 1 failed"; exit 1; }

# the URL syntax: unit test, under ASan too, and a bounded fuzz run
for t in build/test_url build/asan/test_url; do
    if [ -x "$t" ]; then "$t" > "$RESULTS.url" 2>&1; rc=$?; grep -E '^  FAIL' "$RESULTS.url"
        check "$t: every URL form and malformed ones with their messages" $rc "$(tail -n 1 "$RESULTS.url")"
    else fail "$t" "not built (make test-cli builds it)"; fi
done
rm -f "$RESULTS.url"
# the docs name what the tool takes: --help, docs/simba.1, docs/cli.md
SIMBA_CLI=$SIMBA tests/cli_docs.sh
check "help, man page and docs/cli.md name the same commands, options, schemes" $?
if [ -x build/fuzz/fuzz_url ]; then
    mkdir -p build/fuzz/corpus-url
    build/fuzz/fuzz_url -max_total_time="${FUZZ_URL_SECONDS:-15}" -max_len=1024 -dict=tests/fuzz/url.dict \
        build/fuzz/corpus-url > build/fuzz/fuzz_url.log 2>&1
    check "libFuzzer on the URL parser (${FUZZ_URL_SECONDS:-15} s): no crash, no over-read" $? "see build/fuzz/fuzz_url.log"
else
    fail "fuzz_url" "not built (make test-cli builds it; needs clang's libFuzzer)"
fi

"$0" --part mem
tests/servers/redis.sh run "$0" --part redis || fail "redis part" "the server script failed"
tests/servers/mysql.sh run "$0" --part mysql || fail "mysql part" "the server script failed"
tests/servers/zk.sh run "$0" --part zk || fail "zk part" "the server script failed"
tests/servers/pg.sh run "$0" --part pg || fail "pg part" "the server script failed"
"$0" --part sqlite

p=$(grep -c pass "$RESULTS"); f=$(grep -c fail "$RESULTS")
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
