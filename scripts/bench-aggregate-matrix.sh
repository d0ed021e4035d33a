#!/usr/bin/env bash
# Scale benchmark of the cluster matrix (issue 8): one all-pairs bench-bw sweep document
# of NODES nodes x RAILS rails at one size (1024 x 8: 4,190,208 pair results, about
# 4.3 GB as the benchmarks write it, 2.6 GB compact), one node degraded, judged by
# `aggregate report` against roce-100g and signed. Prints wall time, CPU time, peak
# memory, the phases (AGGREGATE_TIMINGS), the suspects and the load average around the
# run (the wall time on a shared machine is mostly the other jobs).
# Target on the 2-core development machine: under 10 s and 2 GiB.
#
# Usage: scripts/bench-aggregate-matrix.sh [NODES] [RAILS] [pretty|compact]
# Needs about twice the document's size of free disk in $TMPDIR (the document, and the
# bundle's link or copy of it when TMPDIR is on another filesystem than the report).
set -euo pipefail

NODES=${1:-1024}
RAILS=${2:-8}
LAYOUT=${3:-pretty}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${AGGREGATE:-$ROOT/target/release/aggregate}
# The generator is a development tool (crate `synth`), never part of the product binary.
SYNTH=${SYNTH:-$ROOT/target/release/synth}
if [[ ! -x $BIN || ! -x $SYNTH ]]; then
    echo "building aggregate and synth (release)..." >&2
    cargo build --release -p aggregate -p synth --manifest-path "$ROOT/Cargo.toml" >&2
fi
if [[ ! -x /usr/bin/time ]]; then
    echo "needs GNU time: apt-get install -y time" >&2
    exit 2
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
extra=()
[[ $LAYOUT == compact ]] && extra=(--compact)

echo "generating a ${NODES}-node, ${RAILS}-rail all-pairs sweep (${LAYOUT} JSON)..."
"$SYNTH" sweep "$WORK/sweep.json" --nodes "$NODES" --rails "$RAILS" --bad-node 77 "${extra[@]}"
BYTES=$(stat -c %s "$WORK/sweep.json")
echo "input: $((BYTES / 1024 / 1024)) MiB"

"$BIN" keygen "$WORK/key" >/dev/null
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
set +e
AGGREGATE_TIMINGS=1 /usr/bin/time -v -o "$WORK/time.txt" \
    "$BIN" report "$WORK/sweep.json" --profile roce-100g --out "$WORK/report" \
    --sign "$WORK/key" --max-input-bytes $((BYTES + (1 << 20))) \
    >"$WORK/stdout.txt" 2>"$WORK/stderr.txt"
rc=$?
set -e
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ $rc -ge 2 ]]; then
    echo "aggregate report failed (exit $rc):" >&2
    cat "$WORK/stderr.txt" >&2
    exit "$rc"
fi
grep -E '^(SUSPECT|verdict)' "$WORK/stdout.txt" | cut -c1-160
grep '^aggregate:' "$WORK/stderr.txt" | sed 's/^aggregate: /  phase /'
WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/time.txt")
RSS_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
USER=$(awk -F': ' '/User time/ {print $2}' "$WORK/time.txt")
SYS=$(awk -F': ' '/System time/ {print $2}' "$WORK/time.txt")
echo "report: html $(stat -c %s "$WORK/report/report.html") B, md $(stat -c %s "$WORK/report/report.md") B, summary.json $(stat -c %s "$WORK/report/summary.json") B"
echo "wall time: $WALL (m:ss)   CPU: ${USER} s user + ${SYS} s sys   max RSS: $((RSS_KB / 1024)) MiB"
"$BIN" verify "$WORK/report" --key "$WORK/key.pub" | tail -1
