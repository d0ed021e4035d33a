#!/usr/bin/env bash
# Fidelity of the TCP baseline: bench-lat against `sockperf ping-pong --tcp` and bench-bw
# against iperf3 on loopback, same message size, in rounds of reference, ours, reference
# again (so drift and noise hit both alike). The shared method (scripts/lib/fidelity.py,
# issue 34) gives each ratio a 95 % bootstrap interval over the rounds beside the
# reference's own A/A interval, and a verdict: within 5 % (or the A/A reach), above,
# below or undecided. Also prints the measured loop overhead (two clock reads + a
# histogram record).
#
# A benchmark, not a test: it prints figures and never fails on them.
# Usage: scripts/bench-p2p-fidelity.sh [ROUNDS=9] [SECONDS_PER_RUN=3]
# Env: OUT (a directory: fidelity.p2p.json is written there), LAT_SIZE, BW_SIZE, PORT_BASE.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${OUT:-}" ] && mkdir -p "$OUT"
ROUNDS=${1:-9}
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

# Each round: reference, ours, reference again, for latency and for bandwidth; the
# shared method (scripts/lib/fidelity.py) pairs each of ours with the runs around it.
echo "round  sockperf_p50_us  bench-lat_p50_us  sockperf_p50_us  iperf3_gbit_s  bench-bw_gbit_s  iperf3_gbit_s"
for r in $(seq 1 "$ROUNDS"); do
  a=$(sockperf_p50); b=$(ours_p50); a2=$(sockperf_p50)
  c=$(iperf_gbit); d=$(ours_gbit); c2=$(iperf_gbit)
  printf '%5d  %15s  %16s  %15s  %13.2f  %15.2f  %13.2f\n' "$r" "$a" "$b" "$a2" "$c" "$d" "$c2"
  printf 'lat_p50_us %s ref %s\nlat_p50_us %s ours %s\nlat_p50_us %s ref %s\n' "$r" "$a" "$r" "$b" "$r" "$a2" >> "$work/paired.txt"
  printf 'bw_gbit_s %s ref %s\nbw_gbit_s %s ours %s\nbw_gbit_s %s ref %s\n' "$r" "$c" "$r" "$d" "$r" "$c2" >> "$work/paired.txt"
done
echo
python3 scripts/lib/fidelity.py ${OUT:+--json "$OUT/fidelity.p2p.json"} \
  --title "TCP loopback: lat = median one-way latency against sockperf (above = ours slower), bw = single-stream bandwidth against iperf3 (below = ours slower)" \
  "$work/paired.txt"
overhead=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["loop_overhead_ns"],1))' "$work/lat.json")
echo "loop overhead: $overhead ns per iteration (two clock reads and a histogram record; target < 30 ns)"
