#!/usr/bin/env bash
# run_examples.sh -- build the examples and run each as a smoke test (they
# exit non-zero when something unexpected happens).
set -u
cd "$(dirname "$0")/.."
mkdir -p build/logs
make -s examples || { echo "0 passed, 1 failed"; exit 1; }
pass=0 fail=0
for x in leader_poll semaphore_pool epoll_loop epoll_service libevent_service libuv_service; do
    if timeout 60 "./build/$x" > "build/logs/example_$x.log" 2>&1; then
        echo "ok - example $x"; pass=$((pass + 1))
    else
        echo "not ok - example $x"; tail -n 10 "build/logs/example_$x.log"; fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
