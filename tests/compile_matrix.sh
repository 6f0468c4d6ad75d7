#!/bin/sh
# compile_matrix.sh -- builds every simba header that exists in every way a
# user may build it, with -Wall -Wextra -Werror:
#   - with its implementation: C99 and C11 -pedantic with gcc and clang,
#     C++11 with g++ and clang++, and with SIMBA_STATIC (gcc, clang, g++);
#     each one compiled and linked (gcc/g++ at -O2 so that their flow
#     warnings such as -Wmaybe-uninitialized run; clang at -O0);
#   - C99 with gcc and clang at every other -O level (-O0 -O1 -O2 -O3 -Os),
#     compiled only: -Wformat-truncation and friends depend on the level;
#   - declarations only, each header included twice (the include guard);
#   - a backend header included without simba.h first must stop at its #error;
#   - a two-translation-unit link (tests/link_a.c has the implementation,
#     tests/link_b.c only includes the headers and calls the API), as C, as
#     C++, and C implementation + C++ user; the binary is run;
#   - the same two translation units with the core, mem and URL headers only
#     for a 32-bit target (gcc -m32) and for musl libc (musl-gcc), run.
# A missing backend header prints a "skip" line that counts as nothing.
# Prints "ok - ..." / "not ok - ..." per combination, ends with
# "N passed, N failed", exits non-zero on any failure.
# Usage: tests/compile_matrix.sh   (from anywhere; works in the repo root)
set -u
cd "$(dirname "$0")/.." || exit 2

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

INC="-I. -I/usr/include/hiredis -I/usr/include/mariadb -I/usr/include/zookeeper -I/usr/include/postgresql"
WARN="-Wall -Wextra -Werror"
passed=0
failed=0

ok() { echo "ok - $1"; passed=$((passed + 1)); }
not_ok() {
    echo "not ok - $1"
    sed -n '1,15s/^/    /p' "$tmp/log"
    failed=$((failed + 1))
}
# check DESCRIPTION COMMAND...: one line for one command that must succeed
check() {
    what=$1; shift
    if "$@" >"$tmp/log" 2>&1; then ok "$what"; else not_ok "$what"; fi
}

# The implementation macro and libraries of each header.
impl_macro() {
    case $1 in
        simba.h) echo SIMBA_IMPLEMENTATION ;;
        simba_mem.h) echo SIMBA_MEM_IMPLEMENTATION ;;
        simba_url.h) echo SIMBA_URL_IMPLEMENTATION ;;
        simba_redis.h) echo SIMBA_REDIS_IMPLEMENTATION ;;
        simba_mysql.h) echo SIMBA_MYSQL_IMPLEMENTATION ;;
        simba_zk.h) echo SIMBA_ZK_IMPLEMENTATION ;;
        simba_pg.h) echo SIMBA_PG_IMPLEMENTATION ;;
        simba_sqlite.h) echo SIMBA_SQLITE_IMPLEMENTATION ;;
    esac
}
libs_of() {
    case $1 in
        simba_redis.h) echo -lhiredis ;;
        simba_mysql.h) echo -lmariadb ;;
        simba_zk.h) echo -lzookeeper_st ;;
        simba_pg.h) echo -lpq ;;
        simba_sqlite.h) echo -lsqlite3 ;;
    esac
}

# Sources: the implementation, and declarations only (included twice).
write_sources() {
    h=$1 base=$2
    {
        echo "#define SIMBA_IMPLEMENTATION"
        echo "#include \"simba.h\""
        if [ "$h" != simba.h ]; then
            echo "#define $(impl_macro "$h")"
            echo "#include \"$h\""
        fi
        echo "int main(void) { return simba_version()[0] == 0; }"
    } >"$tmp/$base.impl.c"
    {
        echo "#include \"simba.h\""
        [ "$h" != simba.h ] && echo "#include \"$h\""
        echo "#include \"simba.h\""
        [ "$h" != simba.h ] && echo "#include \"$h\""
        echo "int main(void) { return 0; }"
    } >"$tmp/$base.decl.c"
    {
        echo "#define $(impl_macro "$h")"
        echo "#include \"$h\""
        echo "int main(void) { return 0; }"
    } >"$tmp/$base.noerror.c"
}

# compile_variants HEADER BASE LIBS: the implementation in every mode.
compile_variants() {
    h=$1 base=$2 libs=$3 src="$tmp/$base.impl.c" out="$tmp/$base.bin"
    # shellcheck disable=SC2086
    {
        check "$h: gcc -std=c99 -pedantic" gcc -std=c99 -pedantic -O2 $WARN $INC -o "$out" "$src" $libs
        check "$h: gcc -std=c11 -pedantic" gcc -std=c11 -pedantic -O2 $WARN $INC -o "$out" "$src" $libs
        check "$h: clang -std=c99 -pedantic" clang -std=c99 -pedantic $WARN $INC -o "$out" "$src" $libs
        check "$h: clang -std=c11 -pedantic" clang -std=c11 -pedantic $WARN $INC -o "$out" "$src" $libs
        check "$h: g++ -std=c++11" g++ -x c++ -std=c++11 -O2 $WARN $INC -o "$out" "$src" $libs
        check "$h: clang++ -std=c++11" clang++ -x c++ -std=c++11 $WARN $INC -o "$out" "$src" $libs
        check "$h: gcc -std=c99 -pedantic SIMBA_STATIC" gcc -std=c99 -pedantic -O2 -DSIMBA_STATIC $WARN $INC -o "$out" "$src" $libs
        check "$h: clang -std=c99 -pedantic SIMBA_STATIC" clang -std=c99 -pedantic -DSIMBA_STATIC $WARN $INC -o "$out" "$src" $libs
        check "$h: g++ -std=c++11 SIMBA_STATIC" g++ -x c++ -std=c++11 -O2 -DSIMBA_STATIC $WARN $INC -o "$out" "$src" $libs
        # gcc's flow warnings (-Wformat-truncation, -Wmaybe-uninitialized)
        # change with the optimization level: every level, compile only
        for opt in -O0 -O1 -O3 -Os; do
            check "$h: gcc -std=c99 -pedantic $opt" gcc -std=c99 -pedantic $opt $WARN $INC -c -o "$tmp/opt.o" "$src"
        done
        for opt in -O1 -O2 -O3 -Os; do
            check "$h: clang -std=c99 -pedantic $opt" clang -std=c99 -pedantic $opt $WARN $INC -c -o "$tmp/opt.o" "$src"
        done
        check "$h: declarations only, included twice (gcc c99)" gcc -std=c99 -pedantic $WARN $INC -c -o "$tmp/decl.o" "$tmp/$base.decl.c"
        check "$h: declarations only, included twice (g++)" g++ -x c++ -std=c++11 $WARN $INC -c -o "$tmp/decl.o" "$tmp/$base.decl.c"
    }
}

# A backend header without simba.h before it must fail at its own #error.
check_error_without_core() {
    h=$1 base=$2
    if gcc -std=c99 $INC -c -o "$tmp/noerror.o" "$tmp/$base.noerror.c" >"$tmp/log" 2>&1; then
        echo "(compiled without simba.h)" >"$tmp/log"
        not_ok "$h: #error when simba.h was not included first"
    elif grep -q '#error' "$tmp/log"; then
        ok "$h: #error when simba.h was not included first"
    else
        not_ok "$h: #error when simba.h was not included first (failed, but not at an #error)"
    fi
}

link_defs=""
link_libs=""
for h in simba.h simba_mem.h simba_url.h simba_redis.h simba_mysql.h simba_zk.h simba_sqlite.h simba_pg.h; do
    if [ ! -f "$h" ]; then
        echo "skip - $h (not in this tree)"
        continue
    fi
    base=$(basename "$h" .h)
    write_sources "$h" "$base"
    compile_variants "$h" "$base" "$(libs_of "$h")"
    if [ "$h" != simba.h ]; then
        check_error_without_core "$h" "$base"
        macro=$(echo "$base" | sed 's/^simba_//' | tr 'a-z' 'A-Z')
        link_defs="$link_defs -DSIMBA_LINK_$macro"
        link_libs="$link_libs $(libs_of "$h")"
    fi
done

# Two translation units: implementation in link_a, use in link_b.
# link_run NAME CC_A FLAGS_A CC_B FLAGS_B LINKER
link_run() {
    what=$1 cca=$2 fa=$3 ccb=$4 fb=$5 ld=$6
    # shellcheck disable=SC2086
    if $cca $fa $WARN $INC $link_defs -c -o "$tmp/link_a.o" tests/link_a.c >"$tmp/log" 2>&1 &&
       $ccb $fb $WARN $INC $link_defs -c -o "$tmp/link_b.o" tests/link_b.c >>"$tmp/log" 2>&1 &&
       $ld -o "$tmp/link" "$tmp/link_a.o" "$tmp/link_b.o" $link_libs >>"$tmp/log" 2>&1 &&
       "$tmp/link" >>"$tmp/log" 2>&1; then
        ok "two translation units: $what"
    else
        not_ok "two translation units: $what"
    fi
}
link_run "gcc c99" gcc "-std=c99 -pedantic -O2" gcc "-std=c99 -pedantic -O2" gcc
link_run "clang c11" clang "-std=c11 -pedantic -O2" clang "-std=c11 -pedantic -O2" clang
link_run "g++ c++11" g++ "-x c++ -std=c++11 -O2" g++ "-x c++ -std=c++11 -O2" g++
link_run "gcc implementation, g++ user" gcc "-std=c99 -pedantic -O2" g++ "-x c++ -std=c++11 -O2" g++

# Other targets: 32-bit and musl, with the headers that need no library.
# A kernel built without IA32 emulation (some VMs) cannot exec an i386
# binary ("Exec format error"): it then runs under qemu-i386 (qemu-user,
# make deps), so the 32-bit build is still run, not only linked.
port_exec() {   # BINARY [ARCH]
    local rc
    "$1"; rc=$?
    if [ "$rc" -eq 126 ] && [ "${2:-}" = i386 ] && command -v qemu-i386 >/dev/null; then
        echo "(the kernel cannot exec i386: run under qemu-i386)"
        qemu-i386 "$1"; rc=$?
    fi
    return "$rc"
}
port_run() {
    what=$1 cc=$2 flags=$3 arch=${4:-}
    # shellcheck disable=SC2086
    if $cc $flags $WARN -I. -c -o "$tmp/pa.o" tests/link_a.c >"$tmp/log" 2>&1 &&
       $cc $flags $WARN -I. -c -o "$tmp/pb.o" tests/link_b.c >>"$tmp/log" 2>&1 &&
       $cc $flags -o "$tmp/port" "$tmp/pa.o" "$tmp/pb.o" >>"$tmp/log" 2>&1 &&
       port_exec "$tmp/port" "$arch" >>"$tmp/log" 2>&1; then
        ok "core, mem and url headers: $what"
    else
        not_ok "core, mem and url headers: $what"
    fi
}
port_run "gcc -m32 (i386)" gcc "-m32 -std=c99 -pedantic -O2" i386
port_run "musl-gcc" musl-gcc "-std=c99 -pedantic -O2"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
