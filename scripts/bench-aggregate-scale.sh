#!/usr/bin/env bash
# Scale benchmark of `aggregate report` (issue 5, item 9): a result set shaped like a
# 1024-GPU acceptance (1024 ranks, 512 pairs, send/write/read latency and bandwidth,
# every collective, 26 sizes, a histogram in every latency row) is generated, then
# aggregated and signed. Prints wall time and peak memory (max RSS).
# Target on a 2-core machine: under 5 s and under 1 GiB.
#
# Usage: scripts/bench-aggregate-scale.sh [RANKS] [SIZES]
set -euo pipefail

RANKS=${1:-1024}
SIZES=${2:-26}
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

echo "generating a synthetic ${RANKS}-rank result set with ${SIZES} sizes..."
"$SYNTH" scale --ranks "$RANKS" --sizes "$SIZES" "$WORK/data" >/dev/null
INPUT_BYTES=$(du -sb "$WORK/data" | cut -f1)
echo "input: $(find "$WORK/data" -name "*.json" | wc -l) files, $((INPUT_BYTES / 1024 / 1024)) MiB"

"$BIN" keygen "$WORK/key" >/dev/null
set +e
/usr/bin/time -v -o "$WORK/time.txt" \
    "$BIN" report "$WORK/data" --profile roce-100g --out "$WORK/report" --sign "$WORK/key" \
    >"$WORK/stdout.txt" 2>"$WORK/stderr.txt"
rc=$?
set -e
if [[ $rc -ge 2 ]]; then
    echo "aggregate report failed (exit $rc):" >&2
    cat "$WORK/stderr.txt" >&2
    exit "$rc"
fi
WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/time.txt")
RSS_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
CPU=$(awk -F': ' '/Percent of CPU/ {print $2}' "$WORK/time.txt")
grep '^verdict' "$WORK/stdout.txt"
echo "report files: html $(stat -c %s "$WORK/report/report.html") B, md $(stat -c %s "$WORK/report/report.md") B, junit $(stat -c %s "$WORK/report/report.junit.xml") B, bundle $(du -sb "$WORK/report" | cut -f1) B"
echo "wall time: $WALL (m:ss)   max RSS: $((RSS_KB / 1024)) MiB   CPU: $CPU"
"$BIN" verify "$WORK/report" --key "$WORK/key.pub" | tail -1
