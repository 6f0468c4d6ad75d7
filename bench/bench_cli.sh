#!/usr/bin/env bash
# bench_cli.sh -- what guarding a command with `simba run` costs, as a ratio
# to one `redis-cli PING` started the same way in the same run (process start
# + connect + one round trip). Run by `make bench-cli` under
# tests/servers/redis.sh (SIMBA_REDIS_PORT). Interleaves the two in rounds so
# that a machine that gets busier slows both alike; prints medians.
#   usage: bench/bench_cli.sh path/to/simba [rounds]
set -u
SIMBA=${1:?usage: $0 path/to/simba [rounds]}
ROUNDS=${2:-15}
N=20                      # runs per sample
U="redis://127.0.0.1:$SIMBA_REDIS_PORT"
CLI=$(command -v redis-cli) || { echo "redis-cli not found"; exit 2; }

ns() { date +%s%N; }
sample() {   # sample CMD...: mean ns of N sequential runs
    local t0 t1 i
    t0=$(ns)
    for ((i = 0; i < N; i++)); do "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; done
    t1=$(ns)
    echo $(( (t1 - t0) / N ))
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

"$SIMBA" run "$U" bench-cli -- true || { echo "simba run failed"; exit 1; }   # warm-up (script load)
: > /tmp/bench_cli.$$.p; : > /tmp/bench_cli.$$.s; : > /tmp/bench_cli.$$.r
for ((r = 0; r < ROUNDS; r++)); do
    p=$(sample "$CLI" -p "$SIMBA_REDIS_PORT" PING)
    s=$(sample "$SIMBA" run "$U" bench-cli -- true)
    echo "$p" >> /tmp/bench_cli.$$.p; echo "$s" >> /tmp/bench_cli.$$.s
    awk -v s="$s" -v p="$p" 'BEGIN {printf "%.3f\n", s / p}' >> /tmp/bench_cli.$$.r
done
P=$(median < /tmp/bench_cli.$$.p); S=$(median < /tmp/bench_cli.$$.s); R=$(median < /tmp/bench_cli.$$.r)
LO=$(sort -n /tmp/bench_cli.$$.r | head -n 1); HI=$(sort -n /tmp/bench_cli.$$.r | tail -n 1)
rm -f /tmp/bench_cli.$$.*
printf 'redis-cli PING (process + connect + 1 round trip), median: %d us\n' $((P / 1000))
printf 'simba run %s bench-cli -- true, median:          %d us\n' "redis://..." $((S / 1000))
printf 'ratio simba run / redis-cli PING: %s (median of %d rounds; min %s, max %s; target <= 2)\n' "$R" "$ROUNDS" "$LO" "$HI"
