#!/usr/bin/env bash
# tests/backends_table.sh -- the table of docs/backends.md: for each backend
# header, its sections (the one skeleton, in order) and the sub-sections
# inside each (/*>>section.sub: markers), named from one vocabulary.
#
#   tests/backends_table.sh           print the table (Markdown)
#   tests/backends_table.sh --check   exit 1 (and say what is wrong) when a
#                                     header lacks a section, has them out of
#                                     order, names a sub-section outside the
#                                     vocabulary or twice, or
#                                     docs/backends.md does not hold the table
set -u
cd "$(dirname "$0")/.." || exit 2
SECTIONS="options constructor stats internals connection session locks wakeups stats vtable constructor"
# The sub-section vocabulary, per section (a header uses each name once).
vocabulary() {
    case $1 in
        connection) echo "connect io queue recover sentinel cluster" ;;
        session) echo "open renew close" ;;
        locks) echo "calls queue rule write enqueue poll release withdraw admin dispatch" ;;
        wakeups) echo "arm fire deliver" ;;
        internals) echo "types memory text names limits signals errors cache calls queue" ;;
        *) echo "" ;;
    esac
}
HEADERS=""
for h in simba_mem.h simba_redis.h simba_mysql.h simba_zk.h simba_pg.h simba_sqlite.h; do
    [ -f "$h" ] && HEADERS="$HEADERS $h"
done

problems=""
# markers H: "section" or "section.sub", one per line, in file order
markers() { grep -o '^/\*>>[a-z_]*\(\.[a-z_]*\)\?[: ]' "$1" | sed 's|^/\*>>||; s|[: ]$||'; }

# subs H I: the sub-sections of the I-th section of H, comma-separated;
# records problems (order, presence, vocabulary)
subs() {
    local h=$1 want=$2 i=0 cur="" out="" m s allowed pos used=" "
    while read -r m; do
        case $m in
            *.*) s=${m#*.}
                 [ "${m%%.*}" = "$cur" ] || { problems="$problems\n$h: >>$m is not inside >>${m%%.*}"; continue; }
                 [ "$i" = "$want" ] || continue
                 allowed=$(vocabulary "$cur"); pos=-1; local k=0 v
                 for v in $allowed; do [ "$v" = "$s" ] && pos=$k; k=$((k + 1)); done
                 if [ $pos -lt 0 ]; then problems="$problems\n$h: >>$m: '$s' is not in the vocabulary of >>$cur ($allowed)"
                 elif [ "${used#* $s }" != "$used" ]; then problems="$problems\n$h: >>$m appears twice"
                 else used="$used$s "; fi
                 out="$out${out:+, }$s" ;;
            *) i=$((i + 1)); cur=$m ;;
        esac
    done < <(markers "$h")
    echo "${out:-·}"
}

table() {
    local h s i got
    printf '| section |'; for h in $HEADERS; do printf ' `%s` |' "$h"; done; echo
    printf '|---|'; for h in $HEADERS; do printf -- '---|'; done; echo
    i=0
    for s in $SECTIONS; do
        i=$((i + 1))
        printf '| `>>%s` |' "$s"
        for h in $HEADERS; do
            got=$(markers "$h" | grep -v '\.' | sed -n "${i}p")
            if [ "$got" = "$s" ]; then printf ' %s |' "$(subs "$h" "$i")"
            else printf ' MISSING |'; problems="$problems\n$h: section $i is '>>$got', not '>>$s'"; fi
        done
        echo
    done
    for h in $HEADERS; do
        [ "$(markers "$h" | grep -vc '\.')" = "$(echo $SECTIONS | wc -w)" ] ||
            problems="$problems\n$h: $(markers "$h" | grep -vc '\.') sections, not $(echo $SECTIONS | wc -w)"
    done
}

out=$(table; printf '%b' "$problems" > /tmp/backends_table.$$)
problems=$(cat /tmp/backends_table.$$); rm -f /tmp/backends_table.$$
if [ "${1:-}" = --check ]; then
    if [ -n "$problems" ]; then echo "the headers break the skeleton:$problems"; exit 1; fi
    have=$(awk '/^\| section \| `simba_/{p=1} p&&/^\|/{print} p&&!/^\|/{exit}' docs/backends.md)
    if [ "$have" != "$out" ]; then
        echo "docs/backends.md is out of date; tests/backends_table.sh prints:"
        echo "$out"
        exit 1
    fi
    echo "ok - docs/backends.md matches the headers"
    exit 0
fi
echo "$out"
[ -z "$problems" ] || { printf 'problems:%b\n' "$problems" >&2; exit 1; }
