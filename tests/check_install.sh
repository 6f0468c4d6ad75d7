#!/usr/bin/env bash
# check_install.sh -- `make install` into a temp prefix, then build a program
# against the installed headers through pkg-config.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { if "$@" >"$tmp/log" 2>&1; then echo "ok - $name"; pass=$((pass+1)); else echo "not ok - $name"; sed 's/^/   | /' "$tmp/log" | tail -n 10; fail=$((fail+1)); fi; }
name="make install PREFIX=tmp"; check make -s install PREFIX="$tmp/prefix"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
name="pkg-config knows simba"; check pkg-config --exact-version=0.1.0 simba
printf '#define SIMBA_IMPLEMENTATION\n#include <simba.h>\n#include <string.h>\nint main(void){ return strcmp(simba_version(), SIMBA_VERSION_STRING) != 0; }\n' > "$tmp/t.c"
name="a program builds and runs against the installed header"
check sh -c "cc -std=c99 -Wall -Wextra -Werror -pedantic \$(pkg-config --cflags simba) '$tmp/t.c' -o '$tmp/t' && '$tmp/t'"
name="the MySQL schema for DBAs is installed in share/simba"; check test -s "$tmp/prefix/share/simba/simba_mysql.sql"
name="the simba tool is installed in bin and runs"; check sh -c "'$tmp/prefix/bin/simba' --version | grep -q '^simba 0.1.0$'"
name="its man page is installed"; check test -s "$tmp/prefix/share/man/man1/simba.1"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
