#!/usr/bin/env bash
# tests/backends_table.sh -- the table of docs/backends.md: for each backend
# header, the line where each section of the one skeleton starts (the
# /*>>name markers).
#
#   tests/backends_table.sh           print the table (Markdown)
#   tests/backends_table.sh --check   exit 1 (and say what differs) when
#                                     docs/backends.md does not hold it, or a
#                                     header lacks a section or has them out
#                                     of order
set -u
cd "$(dirname "$0")/.." || exit 2
SECTIONS="options constructor stats internals connection session locks wakeups stats vtable constructor"
HEADERS="simba_redis.h simba_mysql.h simba_zk.h simba_sqlite.h"

table() {
    local h s i bad=0
    printf '| section |'; for h in $HEADERS; do printf ' `%s` |' "$h"; done; echo
    printf '|---|'; for h in $HEADERS; do printf -- '---|'; done; echo
    i=0
    for s in $SECTIONS; do
        i=$((i + 1))
        printf '| `>>%s` |' "$s"
        for h in $HEADERS; do
            # the i-th marker of the header must be this section
            local got
            # (sub-section markers /*>>section.sub: ... */ are not counted)
            got=$(grep -n '^/\*>>[a-z_]*[: ]' "$h" | sed -n "${i}p")
            case "$got" in
                *"/*>>$s:"*|*"/*>>$s "*) printf ' %s |' "${got%%:*}" ;;
                *) printf ' MISSING |'; bad=1 ;;
            esac
        done
        echo
    done
    return $bad
}

if [ "${1:-}" = --check ]; then
    want=$(table) || { echo "a header lacks a section or has them out of order:"; echo "$want"; exit 1; }
    have=$(awk '/^\| section \| `simba_/{p=1} p&&/^\|/{print} p&&!/^\|/{exit}' docs/backends.md)
    if [ "$have" != "$want" ]; then
        echo "docs/backends.md is out of date; tests/backends_table.sh prints:"
        echo "$want"
        exit 1
    fi
    echo "ok - docs/backends.md matches the headers"
    exit 0
fi
table
