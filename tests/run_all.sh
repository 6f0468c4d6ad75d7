#!/usr/bin/env bash
# run_all.sh -- every test suite that can run here, one after the other.
# Each suite prints "N passed, N failed" as its last line; this script adds
# them up and prints the total as its own last line. A suite that crashes or
# prints no summary counts as one failure. A backend whose header does not
# exist is reported as "skipped" and counts as neither.
#
# Most suites spend their time waiting on lease timers, not on the CPU, so
# the backends run in lanes side by side (one lane per backend: its suite,
# its loop suite, its ASan suite), next to the mem lane; the CPU-bound steps
# (the compile matrix and the fuzzers) run side by side first, then the
# builds, then the lanes, and chaos alone at the end. Each lane
# writes its report to build/logs/lane-<name>.out; they are printed in a
# fixed order once all are done. SIMBA_SERIAL=1 runs every lane in turn.
set -u
cd "$(dirname "$0")/.."
mkdir -p build/logs
total_pass=0 total_fail=0 skipped=0

suite() {   # suite NAME COMMAND...
    local name=$1; shift
    local log=build/logs/$name.log
    echo "== $name: $*"
    local start=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    local line
    line=$(grep -E '^([A-Za-z]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    grep -E '^(not ok|  FAIL|  #)' "$log" | head -n 40
    # a chaos round that fails says why in its own lines
    grep -E '^chaos [a-z-]+: (FAIL|VIOLATION|NO RECOVERY|SLOW RECOVERY|no |state |client |fault .* never|failed|.*NOT caught|[0-9]+ (grants|request|client|unreadable))' "$log" | head -n 60
    if [ -z "$line" ]; then
        echo "   no summary (exit $rc); last lines:"; tail -n 15 "$log" | sed 's/^/   | /'
        total_fail=$((total_fail + 1))
        echo "0 1" >> build/logs/counts.txt
        return
    fi
    local p f
    p=$(echo "$line" | sed -E 's/^([A-Za-z]+: )?([0-9]+) passed.*/\2/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "   exit $rc with no failed test: counted as a failure"; fi
    echo "   $name: $p passed, $f failed ($((SECONDS - start)) s)"
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    echo "$p $f" >> build/logs/counts.txt
}

backend() {  # backend NAME HEADER
    if [ ! -f "$2" ]; then echo "== $1: skipped ($2 does not exist)"; skipped=$((skipped + 1)); return 1; fi
    return 0
}

rm -f build/logs/counts.txt build/logs/lane-*.out

# lane NAME FUNCTION: runs FUNCTION (a list of suites) in the background,
# its report in build/logs/lane-NAME.out
lanes=""
lane() {
    if [ "${SIMBA_SERIAL:-0}" = 1 ]; then "$2" > "build/logs/lane-$1.out" 2>&1; else "$2" > "build/logs/lane-$1.out" 2>&1 & fi
    lanes="$lanes $1"
}

lane_mem() {
    suite mem ./build/test_mem
    suite sim ./build/test_sim
    suite asan-mem make -s asan-mem
    suite asan-sim make -s asan-sim
    suite valgrind-mem make -s valgrind-mem
    suite valgrind-sim make -s valgrind-sim
    suite examples tests/run_examples.sh
    suite readme tests/readme_snippets.sh
    suite install tests/check_install.sh
    # push mode: the epoll, libevent and libuv adapters on the mem backend
    suite loop-mem make -s test-loop-mem
    # issue #15: work per hand-off and notifications per grant do not grow with the queue
    suite scale-mem ./build/test_scale mem
}
# per backend: its suite, the adapters with it, and the suite once more
# under ASan+UBSan (leaks included): real servers, reconnects and kills
# exercise paths the mem suites cannot
lane_cli() {
    suite cli make -s test-cli
    suite servers tests/test_servers.sh   # the server scripts end with their command on SIGTERM
}
lane_redis() {
    suite redis make -s test-redis
    suite loop-redis make -s test-loop-redis
    suite scale-redis tests/servers/redis.sh run ./build/test_scale redis
    suite asan-redis make -s asan-redis
}
# Sentinel and Cluster start their own server sets: a lane of their own, so
# that Redis is not the one lane still running long after the others
lane_redis_topology() {
    suite redis-sentinel make -s test-redis-sentinel
    suite redis-cluster make -s test-redis-cluster
}
lane_mysql() {
    suite mysql make -s test-mysql
    suite loop-mysql make -s test-loop-mysql
    suite scale-mysql tests/servers/mysql.sh run ./build/test_scale mysql
    suite asan-mysql make -s asan-mysql
}
lane_pg() {
    suite pg make -s test-pg
    suite asan-pg make -s asan-pg
}
lane_sqlite() {
    suite sqlite make -s test-sqlite
    suite sqlite-nowatch make -s test-sqlite-nowatch
    suite asan-sqlite make -s asan-sqlite
}
lane_zk() {
    suite zk make -s test-zk
    suite loop-zk make -s test-loop-zk
    suite scale-zk tests/servers/zk.sh run ./build/test_scale zk
    suite asan-zk make -s asan-zk
}

# the two CPU-bound suites side by side (each keeps one core busy)
lane_compile() { suite compile tests/compile_matrix.sh; }
lane_fuzz() {
    suite fuzz make -s fuzz-ci
    suite programs-O3 tests/compile_programs.sh gcc -O3
}
lane compile lane_compile
lane fuzz lane_fuzz
wait
for l in $lanes; do cat "build/logs/lane-$l.out"; done
lanes=""
# every binary the lanes run, built once here (lanes never build at once)
if ! make -s -j2 test-build >build/logs/build.log 2>&1; then
    echo "== build: make test-build failed"; tail -n 30 build/logs/build.log | sed 's/^/   | /'
    echo "0 1" >> build/logs/counts.txt
fi
lane mem lane_mem
lane cli lane_cli
backend redis simba_redis.h && lane redis lane_redis && lane redis-topology lane_redis_topology
backend mysql simba_mysql.h && lane mysql lane_mysql
backend zk simba_zk.h && lane zk lane_zk
backend pg simba_pg.h && lane pg lane_pg
backend sqlite simba_sqlite.h && lane sqlite lane_sqlite
wait
for l in $lanes; do cat "build/logs/lane-$l.out"; done
# real server and client processes under faults, checked for double holds
suite chaos make -s chaos-ci

total_pass=0 total_fail=0
while read -r p f; do total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); done < build/logs/counts.txt
echo "== total (skipped suites: $skipped)"
echo "$total_pass passed, $total_fail failed" | tee build/logs/total.txt
[ "$total_fail" -eq 0 ]
