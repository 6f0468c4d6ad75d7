#!/usr/bin/env bash
# tests/cli_docs.sh -- the help text, docs/simba.1 and docs/cli.md in step.
#
#   tests/cli_docs.sh                  exit 0 when they agree; else it lists
#   SIMBA_CLI=path tests/cli_docs.sh   what is missing where and exits 1
#
# From the binary: the commands (`simba --help`), every long option that
# `simba --help` and `simba COMMAND --help` print, and the URL schemes the
# parser accepts (the list in its "unknown scheme" message), and every
# option the parser takes: the rows of its options table in
# cli/simba_cli.c, which `simba --list-options` prints. Checks:
#   - every option of the table is in the help text, in docs/simba.1 and
#     in docs/cli.md (as below);
#   - every command is in docs/simba.1 and docs/cli.md;
#   - every help option (and table option) has an entry: in the man page's OPTIONS section the
#     tag line of a .TP paragraph (--help and --version: the SYNOPSIS), in
#     docs/cli.md the first cell of an options table row ("| `--x` | ...";
#     --help and --version: any table row);
#   - every scheme is in `simba --help`, the man page's URL section and
#     docs/cli.md's "Connection URLs" section;
#   - every --option docs/simba.1 or docs/cli.md names is in the help text,
#     except the words in NOT_OPTIONS (a job's own options in examples).
set -u
cd "$(dirname "$0")/.."
SIMBA=${SIMBA_CLI:-build/simba}
MAN=docs/simba.1
MD=docs/cli.md
# --foreground: `./scheduler --foreground`, the job's option in an example
NOT_OPTIONS="--foreground"

[ -x "$SIMBA" ] || { echo "cli_docs: no $SIMBA (make build/simba)"; exit 1; }
missing=0
miss() { echo "cli_docs: $1"; missing=$((missing + 1)); }

# the man page as text a grep can read: \- is -, font changes dropped
man_text() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(->/->/g' "$MAN"; }
opts_in() { grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; }

main_help=$("$SIMBA" --help)
cmds=$(printf '%s\n' "$main_help" | sed -nE 's/^(usage:)? +simba ([a-z][a-z-]*).*/\2/p' | sort -u)
[ -n "$cmds" ] || miss "no commands found in 'simba --help'"
all_help=$main_help
for c in $cmds; do
    h=$("$SIMBA" "$c" --help) || miss "'simba $c --help' failed"
    all_help=$all_help$'\n'$h
done
help_opts=$(printf '%s\n' "$all_help" | opts_in)
src_opts=$("$SIMBA" --list-options | awk '{ print $1 }' | opts_in)
[ -n "$src_opts" ] || miss "no options from 'simba --list-options'"
# the schemes: simba-net's (every backend) when it sits next to $SIMBA, as
# `make cli` builds them; a simba without it accepts only its own
NET=$(dirname "$SIMBA")/simba-net; [ -x "$NET" ] || NET=$SIMBA
schemes=$("$NET" run zzunknown://x n -- true 2>&1 | sed -nE 's/.*accepts ([^)]*)\).*/\1/p' | tr -d ',')
[ -n "$schemes" ] || miss "no scheme list in the unknown-scheme message"

man_t=$(man_text); md_t=$(cat "$MD")
# the man page's sections: OPTIONS tag lines (the line after .TP), SYNOPSIS, URL
man_sec() { printf '%s\n' "$man_t" | awk -v s="$1" '/^\.SH/ { on = ($2 == s); next } on'; }
man_tags=$(man_sec OPTIONS | awk 'tp { print; tp = 0 } /^\.TP/ { tp = 1 }')
man_syn=$(man_sec SYNOPSIS); man_url=$(man_sec URL)
md_rows=$(printf '%s\n' "$md_t" | grep -E '^\|')
# the first cells of the options table's rows ("| `--x D`, `-y` | ...")
md_opt_cells=$(printf '%s\n' "$md_rows" | grep -E '^\| `-' | cut -d'|' -f2)
md_url=$(printf '%s\n' "$md_t" | awk '/^## / { on = ($0 ~ /^## Connection URLs/); next } on')
has() { printf '%s\n' "$2" | grep -qF -- "$1"; }
hasword() { printf '%s\n' "$2" | grep -qE -- "(^|[^a-z-])$1([^a-z-]|\$)"; }

for o in $src_opts; do hasword "$o" "$all_help" || miss "$o: in the options table of cli/simba_cli.c, not in any --help"; done
for c in $cmds; do
    has "simba $c" "$man_t" || miss "command $c: not in $MAN"
    has "simba $c" "$md_t" || miss "command $c: not in $MD"
done
for o in $(printf '%s\n%s\n' "$help_opts" "$src_opts" | sort -u); do
    case $o in
    --help|--version)
        hasword "$o" "$man_syn" || miss "$o: an option, not in the SYNOPSIS of $MAN"
        hasword "$o" "$md_rows" || miss "$o: an option, in no table row of $MD" ;;
    *)
        hasword "$o" "$man_tags" || miss "$o: an option, no entry (.TP) in OPTIONS of $MAN"
        hasword "$o" "$md_opt_cells" || miss "$o: an option, no row of its own in the options table of $MD" ;;
    esac
done
for s in $schemes; do
    has "$s" "$main_help" || miss "scheme $s: not in 'simba --help'"
    has "$s" "$man_url" || miss "scheme $s: not in the URL section of $MAN"
    has "$s" "$md_url" || miss "scheme $s: not in the Connection URLs section of $MD"
done
for f in "$MAN" "$MD"; do
    if [ "$f" = "$MAN" ]; then t=$man_t; else t=$md_t; fi
    for o in $(printf '%s\n' "$t" | opts_in); do
        case " $NOT_OPTIONS " in *" $o "*) continue ;; esac
        hasword "$o" "$all_help" || miss "$o: in $f, not in any --help"
    done
done

n_cmds=$(printf '%s\n' "$cmds" | wc -w); n_opts=$(printf '%s\n' "$help_opts" | wc -w)
n_sch=$(printf '%s\n' "$schemes" | wc -w)
if [ "$missing" -eq 0 ]; then
    echo "cli_docs: $n_cmds commands, $n_opts options, $n_sch URL schemes: help, $MAN and $MD agree"
    exit 0
fi
echo "cli_docs: $missing missing ($n_cmds commands, $n_opts options, $n_sch URL schemes checked)"
exit 1
