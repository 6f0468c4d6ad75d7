#!/usr/bin/env bash
# tests/under_load.sh -- run a make target while the machine is busy.
#
#   tests/under_load.sh TARGET [SPINNERS]      e.g. tests/under_load.sh test-mysql
#
# Starts SPINNERS (default 2) CPU-bound loops and one loop that writes 100 MB
# with fsync again and again (slow commits, slow ZooKeeper transaction logs),
# runs `make -s TARGET`, stops the load (also on Ctrl-C) and exits with make's
# exit code. It finds tests that only pass on an idle machine: CI machines are
# shared, and a test must fail for the library's faults, not for a stall.
set -u

[ $# -ge 1 ] || { echo "usage: $0 TARGET [SPINNERS]" >&2; exit 2; }
target=$1
spinners=${2:-2}
scratch=$(mktemp -d)
pids=()

stop_load() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$scratch"
}
trap stop_load EXIT
trap 'exit 130' INT TERM

for ((i = 0; i < spinners; i++)); do
    ( while :; do :; done ) &
    pids+=($!)
done
( while :; do dd if=/dev/zero of="$scratch/fill" bs=1M count=100 conv=fsync 2>/dev/null; done ) &
pids+=($!)

make -s "$target"
