#!/usr/bin/env bash
# Fidelity of bench-congestion's canaries alone (the isolated phase) against the
# point-to-point benchmark at the same sizes, over TCP on loopback, interleaved round by
# round so drift and noise hit both alike; prints medians, the ratio and each tool's own
# spread across rounds ((max - min) / median), and never fails on the figures.
#
# - Latency: a canary sample is an 8 B round trip; bench-lat reports one-way time (round
#   trip / 2, perftest's convention), so the canary's p50 and mean are halved. A ring of
#   two canaries runs two ping-pongs at once (each canary pings the next while it answers
#   the one before), so the reference runs two bench-lat pairs at once, one each way
#   (LONE=1: one pair alone, to see what the concurrency changes).
# - Bandwidth: a canary sample is one 128 KiB transfer answered by 8 B, one at a time
#   (GPCNeT's random-ring bandwidth), not a stream. Its reference is bench-lat's own
#   one-way times: 128 KiB over (one-way 128 KiB + one-way 8 B), both p50 and mean.
#
# bench-congestion runs 4 ranks (2 canaries; the 2 congestors idle in the isolated phase).
# Usage: scripts/bench-canary-fidelity.sh [ROUNDS=7] [SECONDS=1]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
SECS=${2:-1}
PORT=${PORT:-19700}
. scripts/lib/deps.sh
command -v python3 > /dev/null || { echo "missing python3" >&2; exit 2; }
cargo build --release -q -p bench-lat -p bench-congestion
BIN=target/release
work=$(mktemp -d)
trap 'pkill -P $$ 2> /dev/null || true; rm -rf "$work"' EXIT

# bench-lat over TCP on loopback at SIZE for SECS, as the canaries' ring of two runs: two
# pairs at once, one each way (each canary pings the next while answering the previous
# one). Prints "p50 mean" of one-way us, the mean of the two pairs'. LONE=1: one pair alone.
lat() {
    local size=$1 pairs=2 i
    [[ ${LONE:-0} == 1 ]] && pairs=1
    for ((i = 0; i < pairs; i++)); do
        "$BIN/bench-lat" --transport tcp -p $((PORT + i)) -s "$size" --timeout 30 > /dev/null 2>&1 &
    done
    sleep 0.2
    for ((i = 0; i < pairs; i++)); do
        "$BIN/bench-lat" --transport tcp 127.0.0.1 -p $((PORT + i)) -s "$size" -D "$SECS" \
            --timeout 30 --json "$work/lat$i.json" > /dev/null 2>&1 &
    done
    wait
    python3 - "$work"/lat*.json << 'PY'
import json, sys
l = [json.load(open(f))["results"][0]["latency_us"] for f in sys.argv[1:]]
print(sum(x["p50"] for x in l) / len(l), sum(x["mean"] for x in l) / len(l))
PY
    rm -f "$work"/lat*.json
}

# bench-congestion's isolated canaries; prints "lat_p50_rtt lat_mean_rtt bw_mean_gbit_s".
canaries() {
    mpirun -np 4 --oversubscribe --bind-to none "$BIN/bench-congestion" --include-local \
        --bind-addr 127.0.0.1 --transport tcp --phase-seconds "$SECS" --json "$work/c.json" > /dev/null 2>&1
    python3 - "$work/c.json" << 'PY'
import json, sys
t = {x["test"]: x for x in json.load(open(sys.argv[1]))["congestion"]["canary_tests"]}
lat, bw = t["ring_latency_8b"]["isolated"], t["ring_bandwidth_128kib"]["isolated"]
print(lat["p50"], lat["mean"], bw["mean"])
PY
}

echo "round  lat8_p50  lat8_mean  lat128k_p50  lat128k_mean  canary_rtt_p50  canary_rtt_mean  canary_bw_gbit_s"
for r in $(seq 1 "$ROUNDS"); do
    read -r a b < <(lat 8)
    read -r c d < <(lat 131072)
    read -r e f g < <(canaries)
    printf '%5d  %8.2f  %9.2f  %11.2f  %12.2f  %14.2f  %15.2f  %16.3f\n' "$r" "$a" "$b" "$c" "$d" "$e" "$f" "$g"
    echo "$a $b $c $d $e $f $g" >> "$work/rounds"
done
python3 - "$work/rounds" << 'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
col = lambda i: [r[i] for r in rows]
bits = 131072 * 8
def spread(v):
    m = statistics.median(v)
    return (max(v) - min(v)) / m if m else float("nan")
def show(name, ours, ref):
    mo, mr = statistics.median(ours), statistics.median(ref)
    print(f"{name:<28} ours {mo:10.3f}  reference {mr:10.3f}  ratio {mo / mr:6.3f}"
          f"  spread ours {spread(ours):.2f}  reference {spread(ref):.2f}")
print()
show("latency 8 B p50 (us, one-way)", [x / 2 for x in col(4)], col(0))
show("latency 8 B mean (us, one-way)", [x / 2 for x in col(5)], col(1))
# Reference bandwidth of one 128 KiB transfer answered by 8 B, from bench-lat's times.
ref_p50 = [bits / (c + a) / 1e3 for a, c in zip(col(0), col(2))]
ref_mean = [bits / (d + b) / 1e3 for b, d in zip(col(1), col(3))]
show("bandwidth 128 KiB (Gbit/s, vs p50)", col(6), ref_p50)
show("bandwidth 128 KiB (Gbit/s, vs mean)", col(6), ref_mean)
PY
