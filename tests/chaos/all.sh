#!/usr/bin/env bash
# tests/chaos/all.sh SECONDS -- the checker's self-test, then tests/chaos/run.sh
# for each backend whose header exists (and redis-cluster, the Redis Cluster
# round, and zk-partition, the proxied ZooKeeper round), SECONDS each. One result per run; the
# last line is "chaos: N passed, N failed" (tests/run_all.sh counts it).
# The figures of each run (grants, faults, violations, recovery) are printed
# as the checker writes them; the logs stay in build/chaos/.
set -u
cd "$(dirname "$0")/../.."
SECS=${1:-120}
pass=0 fail=0
mkdir -p build/chaos
if python3 tests/chaos/check_selftest.py >build/chaos/selftest.out 2>&1; then
    pass=$((pass + 1)); echo "chaos selftest: $(tail -n 1 build/chaos/selftest.out)"
else
    fail=$((fail + 1)); echo "chaos selftest: FAIL"; sed 's/^/  | /' build/chaos/selftest.out
fi
# The whole pipeline must be able to fail: a client that ignores
# simba_valid_ms (CHAOS_CHEAT=1) with a holder stopped past its lease must
# give violations, through real processes, the real log and the checker.
if [ -f simba_redis.h ] && [ "${CHAOS_NO_CHEAT:-0}" != 1 ]; then
    if CHAOS_CHEAT=1 CHAOS_FAULTS=holder_stop CHAOS_LOGDIR=build/chaos/cheat \
        timeout 200 tests/chaos/run.sh redis 5 >build/chaos/cheat.out 2>&1; then
        fail=$((fail + 1)); echo "chaos cheat: a client ignoring its validity was NOT caught"
    elif grep -qE "VIOLATION [ms]: [0-9]+ permits believed" build/chaos/cheat.out; then
        pass=$((pass + 1)); echo "chaos cheat: a client ignoring its validity is caught ($(grep -c VIOLATION build/chaos/cheat.out) violations reported, as it must)"
    else
        fail=$((fail + 1)); echo "chaos cheat: failed without the expected violation"; tail -n 15 build/chaos/cheat.out | sed 's/^/  | /'
    fi
fi
for b in ${CHAOS_BACKENDS:-redis redis-cluster mysql pg zk zk-partition sqlite}; do
    hdr=simba_${b%%-*}.h   # zk-partition: the second ZooKeeper round (run.sh)
    [ -f "$hdr" ] || { echo "chaos $b: skipped ($hdr does not exist)"; continue; }
    if timeout $((SECS * 3 + 240)) tests/chaos/run.sh "$b" "$SECS" >"build/chaos/$b.out" 2>&1; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
    fi
    grep -E "^chaos $b: " "build/chaos/$b.out" | grep -v ': fault [a-z_0-9]* (' 
    grep -qE "^chaos $b: (PASS|FAIL)" "build/chaos/$b.out" || { echo "chaos $b: no result; last lines:"; tail -n 15 "build/chaos/$b.out" | sed 's/^/  | /'; }
done
echo "chaos: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
