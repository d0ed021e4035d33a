#!/usr/bin/env bash
# Fidelity of the TCP baseline: bench-lat against `sockperf ping-pong --tcp` and bench-bw
# against iperf3 on loopback, interleaved round by round (so drift and noise hit both
# alike), same message size; prints the median of each and the ratios. Targets: median
# one-way latency within 5% of sockperf's, single-stream bandwidth >= 95% of iperf3's.
# Also prints the measured loop overhead (two clock reads + a histogram record).
#
# A benchmark, not a test: it prints figures and never fails on them.
# Usage: scripts/bench-p2p-fidelity.sh [ROUNDS=5] [SECONDS_PER_RUN=3]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-3}
LAT_SIZE=${LAT_SIZE:-64}
BW_SIZE=${BW_SIZE:-131072}   # iperf3's default TCP block (128 KiB)
PORT_BASE=${PORT_BASE:-19600}

for t in sockperf iperf3 python3; do
  command -v "$t" >/dev/null || { echo "missing $t: apt-get install -y sockperf iperf3 python3" >&2; exit 2; }
done
cargo build --release --workspace --bins -q
LAT=target/release/bench-lat BW=target/release/bench-bw
work=$(mktemp -d); trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$work"' EXIT

sockperf_p50() {
  sockperf server --tcp -i 127.0.0.1 -p "$PORT_BASE" >/dev/null 2>&1 & local s=$!
  sleep 0.5
  sockperf ping-pong --tcp -i 127.0.0.1 -p "$PORT_BASE" -m "$LAT_SIZE" -t "$SECS" 2>&1 \
    | sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p'
  kill $s; wait $s 2>/dev/null || true
}
ours_p50() {
  "$LAT" -p $((PORT_BASE+1)) -s "$LAT_SIZE" --timeout 30 >/dev/null 2>&1 & local s=$!
  "$LAT" 127.0.0.1 -p $((PORT_BASE+1)) -s "$LAT_SIZE" -D "$SECS" --timeout 30 --json "$work/lat.json" >/dev/null 2>&1
  wait $s || true
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["latency_us"]["p50"])' "$work/lat.json"
}
iperf_gbit() {
  iperf3 -s -1 -B 127.0.0.1 -p $((PORT_BASE+2)) >/dev/null 2>&1 & local s=$!
  sleep 0.5
  iperf3 -c 127.0.0.1 -p $((PORT_BASE+2)) -l "$BW_SIZE" -t "$SECS" -J > "$work/iperf.json"
  wait $s || true
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/1e9)' "$work/iperf.json"
}
ours_gbit() {
  "$BW" -p $((PORT_BASE+3)) -s "$BW_SIZE" --timeout 30 >/dev/null 2>&1 & local s=$!
  "$BW" 127.0.0.1 -p $((PORT_BASE+3)) -s "$BW_SIZE" -D "$SECS" --timeout 30 --json "$work/bw.json" >/dev/null 2>&1
  wait $s || true
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["bw_gbit_s"]["avg"])' "$work/bw.json"
}

echo "round  sockperf_p50_us  bench-lat_p50_us  iperf3_gbit_s  bench-bw_gbit_s"
for r in $(seq 1 "$ROUNDS"); do
  a=$(sockperf_p50); b=$(ours_p50); c=$(iperf_gbit); d=$(ours_gbit)
  printf '%5d  %15s  %16s  %13.2f  %15.2f\n' "$r" "$a" "$b" "$c" "$d"
  echo "$a $b $c $d" >> "$work/rounds"
done
overhead=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["loop_overhead_ns"],1))' "$work/lat.json")
python3 - "$work/rounds" "$overhead" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = [statistics.median(c) for c in zip(*rows)]
lat_ratio = med[1] / med[0]
bw_ratio = med[3] / med[2]
print(f"\nmedian one-way latency: sockperf {med[0]:.2f} us, bench-lat {med[1]:.2f} us, ratio {lat_ratio:.3f} (target 0.95..1.05)")
print(f"median bandwidth:       iperf3 {med[2]:.2f} Gb/s, bench-bw {med[3]:.2f} Gb/s, ratio {bw_ratio:.3f} (target >= 0.95)")
print(f"loop overhead:          {sys.argv[2]} ns per iteration (target < 30 ns)")
PY
