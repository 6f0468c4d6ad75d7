#!/usr/bin/env bash
# readme_snippets.sh -- the README's C code must compile and do what it says.
# Every ```c block of README.md is extracted. A block with a main() is a whole
# program: it is built with gcc and clang (-std=c99 -Wall -Wextra -Werror
# -pedantic) and run (it must exit 0 within 20 s). A block without main() is a
# fragment: it is compiled (syntax only) inside a function that has `s` and
# `lock` in scope, after simba.h.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { echo "ok - $1"; pass=$((pass + 1)); }
bad() { echo "not ok - $1"; sed 's/^/   | /' "$tmp/log" | tail -n 15; fail=$((fail + 1)); }

python3 - "$tmp" <<'PY'
import sys, re
out = sys.argv[1]
text = open("README.md").read()
blocks = re.findall(r"^```c\n(.*?)^```", text, flags=re.S | re.M)
for i, b in enumerate(blocks, 1):
    open(f"{out}/snippet{i}.c", "w").write(b)
print(len(blocks), file=open(f"{out}/count", "w"))
PY
n=$(cat "$tmp/count")
[ "$n" -gt 0 ] || { echo "not ok - README.md has no C snippet"; echo "0 passed, 1 failed"; exit 1; }
flags="-std=c99 -Wall -Wextra -Werror -pedantic -I. -I/usr/include/hiredis -I/usr/include/mariadb -I/usr/include/zookeeper"
for i in $(seq 1 "$n"); do
    src="$tmp/snippet$i.c"
    if grep -q 'int main' "$src"; then
        for cc in gcc clang; do
            if $cc $flags -o "$tmp/s$i-$cc" "$src" -levent -luv >"$tmp/log" 2>&1; then ok "README snippet $i builds with $cc"
            else bad "README snippet $i builds with $cc"; continue; fi
            if timeout 20 "$tmp/s$i-$cc" >"$tmp/log" 2>&1; then ok "README snippet $i runs to the end ($cc)"
            else bad "README snippet $i runs to the end ($cc)"; fi
        done
    else
        { printf '#define SIMBA_IMPLEMENTATION\n#include "simba.h"\n#include <poll.h>\n'
          printf 'void snippet(simba *s, simba_lock lock);\nvoid snippet(simba *s, simba_lock lock) {\n(void)s; (void)lock;\n'
          cat "$src"; printf '}\n'; } >"$tmp/frag$i.c"
        if gcc $flags -fsyntax-only "$tmp/frag$i.c" >"$tmp/log" 2>&1; then ok "README fragment $i compiles"
        else bad "README fragment $i compiles"; fi
    fi
done
# The backends table's "build with" column: a program including that header
# must build with exactly those flags (and -I. for the headers themselves).
grep -E '^\| `simba_[a-z]+\.h` \|' README.md | while IFS='|' read -r _ hdr _ flags _; do
    h=$(echo "$hdr" | tr -d ' `'); f=$(echo "$flags" | tr -d '`')
    [ "$(echo "$f" | tr -d ' ')" = nothing ] && f=""
    up=$(echo "${h%.h}" | tr a-z A-Z)
    printf '#define SIMBA_IMPLEMENTATION\n#include "simba.h"\n#define %s_IMPLEMENTATION\n#include "%s"\nint main(void) { return 0; }\n' "$up" "$h" >"$tmp/flags_${h%.h}.c"
    echo "$h|$f"
done >"$tmp/flags.list"
while IFS='|' read -r h f; do
    # shellcheck disable=SC2086 # the README's flags are words
    if sh -c "cc -std=c99 -Wall -Wextra -Werror -pedantic -I. '$tmp/flags_${h%.h}.c' -o '$tmp/flags_${h%.h}' $f" >"$tmp/log" 2>&1
    then ok "$h builds with the README's flags ($f)"; else bad "$h builds with the README's flags ($f)"; fi
done <"$tmp/flags.list"
[ -s "$tmp/flags.list" ] || { echo "not ok - README has no backends table"; fail=$((fail + 1)); }
# docs/backends.md: the sections and sub-sections of each backend header
if tests/backends_table.sh --check >"$tmp/log" 2>&1; then ok "docs/backends.md matches the headers' sections"
else bad "docs/backends.md matches the headers' sections"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
