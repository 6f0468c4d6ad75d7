#!/usr/bin/env bash
# run_all.sh -- every test suite that can run here, one after the other.
# Each suite prints "N passed, N failed" as its last line; this script adds
# them up and prints the total as its own last line. A suite that crashes or
# prints no summary counts as one failure. A backend whose header does not
# exist is reported as "skipped" and counts as neither.
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
    if [ -z "$line" ]; then
        echo "   no summary (exit $rc); last lines:"; tail -n 15 "$log" | sed 's/^/   | /'
        total_fail=$((total_fail + 1))
        return
    fi
    local p f
    p=$(echo "$line" | sed -E 's/^([A-Za-z]+: )?([0-9]+) passed.*/\2/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "   exit $rc with no failed test: counted as a failure"; fi
    echo "   $name: $p passed, $f failed ($((SECONDS - start)) s)"
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
}

backend() {  # backend NAME HEADER
    if [ ! -f "$2" ]; then echo "== $1: skipped ($2 does not exist)"; skipped=$((skipped + 1)); return 1; fi
    return 0
}

suite compile tests/compile_matrix.sh
make -s build/test_mem build/test_sim >build/logs/build-mem.log 2>&1 || cat build/logs/build-mem.log
suite mem ./build/test_mem
suite sim ./build/test_sim
suite asan-mem make -s asan-mem
suite asan-sim make -s asan-sim
suite valgrind-mem make -s valgrind-mem
suite valgrind-sim make -s valgrind-sim
suite examples tests/run_examples.sh
suite readme tests/readme_snippets.sh
suite install tests/check_install.sh
suite cli make -s test-cli
backend redis simba_redis.h && suite redis make -s test-redis
backend mysql simba_mysql.h && suite mysql make -s test-mysql
backend zk simba_zk.h && suite zk make -s test-zk
suite fuzz make -s fuzz-ci
# push mode: the epoll, libevent and libuv adapters with each backend
suite loop-mem make -s test-loop-mem
backend redis simba_redis.h && suite loop-redis make -s test-loop-redis
backend mysql simba_mysql.h && suite loop-mysql make -s test-loop-mysql
backend zk simba_zk.h && suite loop-zk make -s test-loop-zk
# the backend suites once more under ASan+UBSan (leaks included): real
# servers, reconnects and kills exercise paths the mem suites cannot
backend redis simba_redis.h && suite asan-redis make -s asan-redis
backend mysql simba_mysql.h && suite asan-mysql make -s asan-mysql
backend zk simba_zk.h && suite asan-zk make -s asan-zk
# real server and client processes under faults, checked for double holds
suite chaos make -s chaos-ci

echo "== total (skipped suites: $skipped)"
echo "$total_pass passed, $total_fail failed" | tee build/logs/total.txt
[ "$total_fail" -eq 0 ]
