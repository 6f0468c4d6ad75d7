#!/usr/bin/env bash
# tests/fuzz/run.sh -- run the libFuzzer harnesses (built by `make fuzz-build`).
#
#   tests/fuzz/run.sh [SECONDS] [HARNESS...]
#
# For each harness: replay every file of tests/fuzz/regressions/<h>/ (each
# must pass; <input>.seeds lists FZ_SEED values it is replayed with too),
# then fuzz for SECONDS (default $FUZZ_SECONDS or 60) starting
# from the corpus kept in tests/fuzz/corpus/<h>/. New inputs go to
# build/fuzz/corpus-<h>/, never into the repository (`make fuzz-merge` folds
# them back, minimized). A crash, leak, sanitizer report or broken invariant
# is a failure; its input is written to build/fuzz/crash-<h>-*.
# Prints one line of figures per harness and, last, "fuzz: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
secs=${1:-${FUZZ_SECONDS:-60}}
shift || true
harnesses=${*:-mem parse redis}
B=build/fuzz
pass=0 fail=0
for h in $harnesses; do
    bin=$B/fuzz_$h
    log=$B/$h.log
    if [ ! -x "$bin" ]; then echo "fuzz $h: FAIL (no $bin; run make fuzz-build)"; fail=$((fail + 1)); continue; fi
    ok=1
    regs=$(ls tests/fuzz/regressions/$h/* 2>/dev/null | grep -v '\.seeds$')
    if [ -n "$regs" ]; then
        if ! "$bin" $regs >"$B/$h-regressions.log" 2>&1; then
            echo "fuzz $h: a regression input fails again:"; tail -n 20 "$B/$h-regressions.log" | sed 's/^/   | /'
            ok=0
        fi
    fi
    # <input>.seeds: the FZ_SEED values (client seeds, see fuzz_mem.c) with
    # which that input found its bug; it is replayed with each of them too
    for seeds in tests/fuzz/regressions/$h/*.seeds; do
        [ -f "$seeds" ] || continue
        for seed in $(cat "$seeds"); do
            if ! FZ_SEED=$seed "$bin" "${seeds%.seeds}" >"$B/$h-regressions-seed.log" 2>&1; then
                echo "fuzz $h: ${seeds%.seeds} with FZ_SEED=$seed fails again:"
                tail -n 20 "$B/$h-regressions-seed.log" | sed 's/^/   | /'
                ok=0
            fi
        done
    done
    mkdir -p "$B/corpus-$h"
    start=$SECONDS
    "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -max_len=1024 -print_final_stats=1 \
        -artifact_prefix="$B/crash-$h-" "$B/corpus-$h" tests/fuzz/corpus/$h >"$log" 2>&1
    rc=$?
    took=$((SECONDS - start))
    execs=$(grep -a 'stat::number_of_executed_units' "$log" | tail -n 1 | awk '{print $2}')
    last=$(grep -aE '^#[0-9]+' "$log" | tail -n 1)
    cov=$(echo "$last" | sed -nE 's/.* cov: ([0-9]+).*/\1/p')
    ft=$(echo "$last" | sed -nE 's/.* ft: ([0-9]+).*/\1/p')
    if [ "$rc" -ne 0 ]; then
        ok=0
        echo "fuzz $h: the fuzzer stopped with exit $rc; last lines of $log:"
        grep -aE 'invariant|ERROR|SUMMARY|Test unit written' "$log" | head -n 8 | sed 's/^/   | /'
    fi
    printf 'fuzz %s: %s  execs %s  cov %s  ft %s  %ss  regressions %s\n' "$h" "$([ $ok = 1 ] && echo pass || echo FAIL)" \
        "${execs:-?}" "${cov:-?}" "${ft:-?}" "$took" "$(echo $regs | wc -w)"
    if [ $ok = 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
