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
cat > "$tmp/m.c" <<'EOF'
#define SIMBA_IMPLEMENTATION
#include <simba.h>
#define SIMBA_MEM_IMPLEMENTATION
#include <simba_mem.h>
#define SIMBA_URL_IMPLEMENTATION
#include <simba_url.h>
int main(void) {
    simba_url_error err;
    simba *s = simba_create_url("mem:?tenant=installed", NULL, &err);
    simba_destroy(s);
    return s == NULL;
}
EOF
name="simba_mem.h and simba_url.h are installed; a mem: URL makes a client"
check sh -c "cc -std=c99 -Wall -Wextra -Werror -pedantic \$(pkg-config --cflags simba) '$tmp/m.c' -o '$tmp/m' && '$tmp/m'"
name="the MySQL schema for DBAs is installed in share/simba"; check test -s "$tmp/prefix/share/simba/simba_mysql.sql"
name="the PostgreSQL schema for DBAs is installed in share/simba"; check test -s "$tmp/prefix/share/simba/simba_pg.sql"
name="the simba tool is installed in bin and runs"; check sh -c "'$tmp/prefix/bin/simba' --version | grep -q '^simba 0.1.0$'"
name="simba-net (every backend) is installed in libexec/simba and runs"
check sh -c "'$tmp/prefix/libexec/simba/simba-net' --help | grep -q 'schemes compiled in: redis://'"
# the installed simba hands a redis:// URL to it: no server on port 1, so
# simba-net's "cannot connect" (69), not "no simba-net" (70)
name="the installed simba runs a redis:// URL through libexec/simba/simba-net"
check sh -c "'$tmp/prefix/bin/simba' status 'redis://127.0.0.1:1?op_timeout=300ms' x; [ \$? -eq 69 ]"
name="its man page is installed"; check test -s "$tmp/prefix/share/man/man1/simba.1"
cat > "$tmp/a.c" <<'EOF'
#define _GNU_SOURCE
#define SIMBA_IMPLEMENTATION
#include <simba_adapters/simba_epoll.h>
#include <simba_adapters/simba_libevent.h>
#include <simba_adapters/simba_libuv.h>
int main(void) {
    simba_epoll *(*a)(simba *, int, simba_epoll_cb, void *) = simba_epoll_attach;
    simba_libevent *(*b)(simba *, struct event_base *, simba_libevent_cb, void *) = simba_libevent_attach;
    simba_libuv *(*c)(simba *, uv_loop_t *, simba_libuv_cb, void *) = simba_libuv_attach;
    return !a || !b || !c;
}
EOF
name="the loop adapters are installed and build against the installed headers"
check sh -c "cc -std=c99 -Wall -Wextra -Werror -pedantic \$(pkg-config --cflags simba) '$tmp/a.c' -o '$tmp/a' -levent -luv && '$tmp/a'"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
