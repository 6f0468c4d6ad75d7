#!/usr/bin/env bash
# tests/chaos/all.sh SECONDS -- the checker's self-test, then tests/chaos/run.sh
# for each backend whose header exists, SECONDS each. One result per run; the
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
for b in ${CHAOS_BACKENDS:-redis mysql zk}; do
    hdr=simba_$b.h
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
