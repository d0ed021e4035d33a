#!/usr/bin/env bash
# bench-congestion's figures under its two launchers: mpirun (MPI gives the barriers and
# gathers) against the agents (`bench-congestion --hosts` over `bench-bw --serve`), the
# same seed, split and flows over TCP on loopback, 10 ranks each a node, interleaved round
# by round. Prints each canary test's isolated and loaded mean per round, then the medians,
# the ratio agents/mpirun and each launcher's own spread across rounds ((max - min) /
# median); never fails on the figures. The allreduce canary is MPI's and has no agents'
# figure. On one machine the launcher's idle ranks share the CPUs with the canaries, so
# this is where a launcher that polls while it waits shows.
# Usage: scripts/bench-congestion-launchers.sh [ROUNDS=5] [SECONDS=1]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-1}
PORT=${PORT:-18700}
command -v python3 > /dev/null || { echo "missing python3" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "missing mpirun (scripts/test.sh installs OpenMPI)" >&2; exit 2; }
cargo build --release -q -p bench-bw -p bench-congestion
BIN=target/release
work=$(mktemp -d)
trap 'pkill -P $$ 2> /dev/null || true; rm -rf "$work"' EXIT
export FABCHECK_SECRET="launchers-$RANDOM$RANDOM"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for ((i = 1; i <= 10; i++)); do
    "$BIN/bench-bw" --serve -p $((PORT + i)) --transport tcp --bind-addr 127.0.0.1 \
        --timeout 30 > "$work/agent$i.log" 2>&1 &
    echo "127.0.0.1:$((PORT + i))" >> "$work/hosts"
done
# Wait for every agent's port (each one opens its device before it listens), up to 30 s.
end=$((SECONDS + 30))
for ((i = 1; i <= 10; i++)); do
    until [[ -n $(ss -Hltn "sport = :$((PORT + i))") ]] || ((SECONDS >= end)); do sleep 0.2; done
done
common=(--include-local --transport tcp --phase-seconds "$SECS" --seed 3 --timeout 30)
echo "round  launcher  lat8_iso_us  lat8_loaded_us  bw128k_iso_gbit_s  bw128k_loaded_gbit_s"
for r in $(seq 1 "$ROUNDS"); do
    "$BIN/bench-congestion" --hosts "$work/hosts" "${common[@]}" --json "$work/agents$r.json" > /dev/null 2>&1 ||
        { echo "round $r: the agents' run failed" >&2; exit 1; }
    mpirun -np 10 --oversubscribe --bind-to none "$BIN/bench-congestion" --bind-addr 127.0.0.1 \
        "${common[@]}" --json "$work/mpi$r.json" > /dev/null 2>&1 ||
        { echo "round $r: the mpirun run failed" >&2; exit 1; }
    for l in agents mpi; do
        python3 - "$r" "$l" "$work/$l$r.json" << 'PY'
import json, sys
t = {x["test"]: x for x in json.load(open(sys.argv[3]))["congestion"]["canary_tests"]}
lat, bw = t["ring_latency_8b"], t["ring_bandwidth_128kib"]
print(f'{sys.argv[1]:>5}  {sys.argv[2]:<8}  {lat["isolated"]["mean"]:11.2f}  {lat["loaded"]["mean"]:14.2f}'
      f'  {bw["isolated"]["mean"]:17.3f}  {bw["loaded"]["mean"]:20.3f}')
PY
    done
done
python3 - "$work" "$ROUNDS" << 'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def figures(l, test, phase):
    out = []
    for r in range(1, rounds + 1):
        t = {x["test"]: x for x in json.load(open(f"{work}/{l}{r}.json"))["congestion"]["canary_tests"]}
        out.append(t[test][phase]["mean"])
    return out
def spread(v):
    m = statistics.median(v)
    return (max(v) - min(v)) / m if m else float("nan")
print()
for test, unit in (("ring_latency_8b", "us"), ("ring_bandwidth_128kib", "Gbit/s")):
    for phase in ("isolated", "loaded"):
        a, m = figures("agents", test, phase), figures("mpi", test, phase)
        ma, mm = statistics.median(a), statistics.median(m)
        print(f"{test} {phase:<8} ({unit:>6})  agents {ma:9.3f}  mpirun {mm:9.3f}  ratio {ma / mm:6.3f}"
              f"  spread agents {spread(a):.2f}  mpirun {spread(m):.2f}")
PY
