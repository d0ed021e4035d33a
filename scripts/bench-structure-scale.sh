#!/usr/bin/env bash
# Scale benchmark of the structure localiser and cabling checks (issue 18, item 9): a
# generated rail-optimised fabric of 8 groups x N nodes x 8 rails x 8 spines (1024 nodes:
# 8.4 million directed pair results) with 20 faults of mixed kinds from a seed, its plan
# and every NIC's neighbour. Prints the time of each phase, wall time and peak memory
# (GNU time), whether exactly the injected faults were named, and how time grows with
# nodes (128, 256, 512, 1024). Target on this 2-core machine: 1024 nodes under 10 s and
# 2 GiB. Exit 1 when a fault was missed or an extra part named.
#
# Usage: scripts/bench-structure-scale.sh [SEED] [FAULTS]
set -euo pipefail

SEED=${1:-7}
FAULTS=${2:-20}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [[ ! -x /usr/bin/time ]]; then
    echo "needs GNU time: apt-get install -y time" >&2
    exit 2
fi
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
echo "building the benchmark (release)..." >&2
cargo build --release -q -p diagnosis --example structure_scale --manifest-path "$ROOT/Cargo.toml" >&2
BIN=$TARGET/release/examples/structure_scale
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) core(s)"
printf '%-6s %-14s %-12s %-10s %s\n' nodes nodes/group wall_s rss_mib localise_s
prev=""
status=0
for per in 16 32 64 128; do
    set +e
    /usr/bin/time -v -o "$WORK/time.txt" "$BIN" 8 "$per" 8 8 "$FAULTS" "$SEED" >"$WORK/out.txt" 2>&1
    rc=$?
    set -e
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/time.txt")
    secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
    rss=$(awk -F': ' '/Maximum resident set size/ {print int($2/1024)}' "$WORK/time.txt")
    loc=$(awk '/^localise:/ {print $2}' "$WORK/out.txt")
    printf '%-6s %-14s %-12s %-10s %s\n' $((per * 8)) "$per" "$secs" "$rss" "$loc"
    if [[ $per == 128 ]]; then
        cat "$WORK/out.txt"
    fi
    if [[ $rc -ne 0 ]]; then
        echo "nodes $((per * 8)): exit $rc" >&2
        grep -E '^(MISSED|EXTRA)' "$WORK/out.txt" >&2 || cat "$WORK/out.txt" >&2
        status=1
    fi
    if [[ -n $prev ]]; then
        echo "  x2 nodes: time x$(awk -v a="$secs" -v b="$prev" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') (directed pairs x4)"
    fi
    prev=$secs
done
exit $status
