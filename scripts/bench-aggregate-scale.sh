#!/usr/bin/env bash
# Scale benchmark of `aggregate report` (issue 5, item 9): a result set shaped like a
# 1024-GPU acceptance (1024 ranks, 512 pairs, send/write/read latency and bandwidth,
# every collective, 26 sizes, a histogram in every latency row) is generated, then
# aggregated and signed. Prints wall time and peak memory (max RSS), the time of each
# phase of the report (AGGREGATE_TIMINGS=1: load = read, hash, estimate, parse, decode
# every latency histogram once into its group, write the bytes into the bundle; tables;
# judge; matrix; plots; copy inputs = rename the copies; render; sign), the load average
# beside them, and two floors: reading the input once (cat > /dev/null), and reading and
# parsing it into the result schema on every core with nothing else (the example
# parse_floor). docs/benchmarks-aggregate.md.
# Target on a 2-core machine: under 5 s and under 1 GiB.
#
# Usage: scripts/bench-aggregate-scale.sh [RANKS] [SIZES]
set -euo pipefail

RANKS=${1:-1024}
SIZES=${2:-26}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/bench.sh
. "$ROOT/scripts/lib/bench.sh"
need_release_bins

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "generating a synthetic ${RANKS}-rank result set with ${SIZES} sizes..."
"$SYNTH" scale --ranks "$RANKS" --sizes "$SIZES" "$WORK/data" >/dev/null
INPUT_BYTES=$(du -sb "$WORK/data" | cut -f1)
echo "input: $(find "$WORK/data" -name "*.json" | wc -l) files, $((INPUT_BYTES / 1024 / 1024)) MiB"

"$BIN" keygen "$WORK/key" >/dev/null
# The generated set is written back to disk before the clock starts, so that writeback
# does not share the timed run's cores.
sync
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
FLOOR_START=$(date +%s.%N)
cat "$WORK"/data/*.json >/dev/null
echo "floor, reading the input once (cat > /dev/null, page cache): $(awk -v a="$FLOOR_START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }') s"
if [[ -z ${PARSE_FLOOR:-} ]]; then
    cargo build --release -q -p verdict --example parse_floor --manifest-path "$ROOT/Cargo.toml" >&2
    PARSE_FLOOR=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/parse_floor
fi
echo "floor, reading and parsing it (serde into the schema, every core, nothing else): $("$PARSE_FLOOR" "$WORK"/data/*.json)"
AGGREGATE_TIMINGS=1 timed_aggregate report "$WORK/data" --profile roce-100g --out "$WORK/report" --sign "$WORK/key"
grep '^verdict' "$WORK/stdout.txt"
echo "phases (wall s, AGGREGATE_TIMINGS=1):"
sed -n 's/^aggregate: \([a-z ]*\): \([0-9.]* s\)$/  \1: \2/p' "$WORK/stderr.txt"
echo "report files: html $(stat -c %s "$WORK/report/report.html") B, md $(stat -c %s "$WORK/report/report.md") B, junit $(stat -c %s "$WORK/report/report.junit.xml") B, bundle $(du -sb "$WORK/report" | cut -f1) B"
echo "wall time: $WALL (m:ss)   max RSS: $((RSS_KB / 1024)) MiB   CPU: $CPU"
"$BIN" verify "$WORK/report" --key "$WORK/key.pub" | tail -1
