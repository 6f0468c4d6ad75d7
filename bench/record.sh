#!/usr/bin/env bash
# bench/record.sh -- run a bench target's commands and write what they print
# into its section of docs/bench.md, with the date, machine and commit.
#
#   bench/record.sh TARGET 'COMMAND' ['COMMAND'...]
#
# TARGET is the make target (bench-mem): its section in docs/bench.md is the
# text between <!-- bench:mem --> and <!-- /bench:mem -->, replaced as a
# whole; a section that is not there yet is added at the end. Each COMMAND
# runs with `bash -c`, in order; its standard output shows on the terminal
# as it comes and goes verbatim into the section's code block (standard
# error only to the terminal). The file is written only when every command
# succeeds, so a failed run never replaces figures with half a run; the exit
# status is the first failing command's. BENCH_RECORD=0: run, do not write.
set -u
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/record.sh TARGET 'COMMAND' ['COMMAND'...]" >&2; exit 64; }
target=$1; shift
section=${target#bench-}
FILE=${BENCH_FILE:-docs/bench.md}
out=$(mktemp "${TMPDIR:-/tmp}/bench_record.XXXXXX")
trap 'rm -f "$out" "$out.new"' EXIT

# the machine: architecture, CPU model, cores, load when the run started
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
[ -n "$cpu" ] || cpu=$(uname -p)
machine="$(uname -m), ${cpu:-unknown CPU}, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
# the commit, and whether the tree differs from it (this file aside: an
# earlier run's figures in it do not change what is measured)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo 'none (not a git checkout)')
git diff-index --quiet HEAD -- . ":(exclude)docs/bench.md" 2>/dev/null ||
    commit="$commit plus uncommitted changes"
started=$(date -u '+%Y-%m-%d %H:%M UTC')

# stdbuf: the programs' output line by line through the pipe, so a run of
# minutes shows its progress
line_buffered=""
command -v stdbuf >/dev/null && line_buffered="stdbuf -oL"
for c in "$@"; do
    printf '$ %s\n' "$c" >> "$out"
    $line_buffered bash -c "$c" | tee -a "$out"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { echo "bench/record.sh: '$c' exited $rc; $FILE not changed" >&2; exit "$rc"; }
done
[ "${BENCH_RECORD:-1}" = 0 ] && exit 0

{
    printf '<!-- bench:%s -->\n' "$section"
    printf '`make %s`, %s; %s; commit %s.\n\n' "$target" "$started" "$machine" "$commit"
    printf '```text\n'
    cat "$out"
    printf '```\n'
    printf '<!-- /bench:%s -->\n' "$section"
} > "$out.block"
trap 'rm -f "$out" "$out.new" "$out.block"' EXIT

[ -f "$FILE" ] || printf '# Benchmark figures\n' > "$FILE"
if grep -qxF "<!-- bench:$section -->" "$FILE"; then
    grep -qxF "<!-- /bench:$section -->" "$FILE" ||
        { echo "bench/record.sh: $FILE has <!-- bench:$section --> but no <!-- /bench:$section -->; not changed" >&2; exit 1; }
    awk -v start="<!-- bench:$section -->" -v end="<!-- /bench:$section -->" -v block="$out.block" '
        $0 == start { while ((getline l < block) > 0) print l; skip = 1; next }
        skip && $0 == end { skip = 0; next }
        !skip' "$FILE" > "$out.new"
else
    { cat "$FILE"; printf '\n## `make %s`\n\n' "$target"; cat "$out.block"; } > "$out.new"
fi
cat "$out.new" > "$FILE"
echo "bench/record.sh: $FILE, section $section: $started, commit $commit"
