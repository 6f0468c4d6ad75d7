#!/bin/sh
# compile_programs.sh -- compiles every program of the repository (tests/,
# bench/, cli/, examples/: each .c file) with -std=c99 -pedantic -Wall
# -Wextra -Werror, compiled only, with each compiler at each level given.
# The headers' own matrix is compile_matrix.sh; this one is for the code
# that calls them, where gcc's flow warnings (-Wformat-truncation,
# -Wstringop-overflow, -Wmaybe-uninitialized) see through the inlined calls
# and depend on the level.
# Prints "ok - ..." / "not ok - ..." per file and level, ends with
# "N passed, N failed", exits non-zero on any failure.
# Usage: tests/compile_programs.sh [COMPILERS [LEVELS]]
#   default "gcc clang" "-O0 -O1 -O2 -O3 -Os" (make compile-programs, about
#   8 minutes on 2 cores); CI runs "gcc" "-O3", the level where gcc's flow
#   warnings see the most, beside the fuzzers.
set -u
cd "$(dirname "$0")/.." || exit 2
compilers=${1:-gcc clang}
levels=${2:-"-O0 -O1 -O2 -O3 -Os"}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
INC="-I. -Ibench -Itests -I/usr/include/hiredis -I/usr/include/mariadb -I/usr/include/zookeeper -I/usr/include/postgresql"
passed=0
failed=0
for f in tests/*.c bench/*.c cli/*.c examples/*.c; do
    [ -f "$f" ] || continue
    for cc in $compilers; do
        for opt in $levels; do
            # shellcheck disable=SC2086
            if $cc -std=c99 -pedantic $opt -Wall -Wextra -Werror $INC -c -o "$tmp/p.o" "$f" >"$tmp/log" 2>&1; then
                echo "ok - $f: $cc $opt"
                passed=$((passed + 1))
            else
                echo "not ok - $f: $cc $opt"
                sed -n '1,15s/^/    /p' "$tmp/log"
                failed=$((failed + 1))
            fi
        done
    done
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
