#!/usr/bin/env bash
# Scale benchmark of `aggregate trend` (issue 12): a year of nightly history of a 1024-GPU
# cluster (365 nights in the layout deploy/nightly.sbatch writes: the cross-node pass
# over 128 nodes with every latency size and histograms, bandwidth at 64 KiB and 1 MiB,
# every rank at once, four collectives over 1024 ranks; about 7 MiB a night) is generated
# by the development generator (`synth history`, never the product), then trended against
# roce-100g and signed. Prints wall time, CPU and peak memory (max RSS).
#
# Usage: scripts/bench-aggregate-trend.sh [NIGHTS] [RANKS]
#   HISTORY=DIR keeps (or reuses) the generated history instead of a temporary one.
set -euo pipefail

NIGHTS=${1:-365}
RANKS=${2:-1024}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/bench.sh
. "$ROOT/scripts/lib/bench.sh"
need_release_bins

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
HISTORY=${HISTORY:-$WORK/history}
if [[ ! -d $HISTORY ]]; then
    echo "generating $NIGHTS synthetic nights of a ${RANKS}-GPU cluster (a drift, bad nights, a busy night, a weakening node built in)..."
    # A slow latency drift of 0.3% a night from night 200 (2% a week), the fabric 30%
    # slower on nights 100 and 250, node0000 busy on night 120, node0002's links 15%
    # slower from night 300.
    "$SYNTH" history "$HISTORY" --nights "$NIGHTS" --ranks "$RANKS" --start 2025-01-01 \
        --drift-pct 0.3 --drift-from 200 --bad-nights 100,250 --busy-nights 120 \
        --weak-node-from 300 >/dev/null
fi
INPUT_BYTES=$(du -sb "$HISTORY" | cut -f1)
echo "history: $(find "$HISTORY" -mindepth 1 -maxdepth 1 -type d | wc -l) nights, $(find "$HISTORY" -name "*.json" | wc -l) files, $((INPUT_BYTES / 1024 / 1024)) MiB"

"$BIN" keygen "$WORK/key" >/dev/null
AGGREGATE_TIMINGS=1 timed_aggregate trend "$HISTORY" --profile roce-100g --out "$WORK/trend" \
    --sign "$WORK/key"
grep -E '^(DRIFT|FAILED|REGRESSED)' "$WORK/stdout.txt" | head -20 || true
grep '^verdict' "$WORK/stdout.txt"
grep '^aggregate:' "$WORK/stderr.txt" || true
echo "trend files: html $(stat -c %s "$WORK/trend/trend.html") B, md $(stat -c %s "$WORK/trend/trend.md") B, summary $(stat -c %s "$WORK/trend/summary.json") B, bundle $(du -sb "$WORK/trend" | cut -f1) B"
echo "wall time: $WALL (m:ss)   user CPU: ${USER} s   CPU: $CPU   max RSS: $((RSS_KB / 1024)) MiB   load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" verify "$WORK/trend" --key "$WORK/key.pub" | tail -1
