#!/usr/bin/env bash
# Fidelity of bench-collective's MPI AllReduce timing against a minimal C program that
# times MPI_Allreduce in a loop (benches/mpi_allreduce.c), same ranks, sizes, datatype
# (float32), operation (sum), out of place, iterations and warm-up.
#
# The two run interleaved, sweep by sweep (C, ours, C, ours, ...), ROUNDS times; each
# size's figure is the median over rounds of the per-size mean time, and the script
# prints ours / C per size. Target: within 5% for every size from 8 B to 64 MiB at 2
# ranks. This is a measurement, not a test: on a loaded or oversubscribed machine the
# noise of both programs shows in the ratio.
#
# Usage: scripts/bench-collective-fidelity.sh [NP] [ROUNDS]   (defaults 2 and 5)
# Env:   MPIRUN (default: mpirun), MPIRUN_ARGS (default: --bind-to none, plus
#        --oversubscribe when NP exceeds the cores), CARGO_PROFILE (default: release).
set -euo pipefail

NP=${1:-2}
ROUNDS=${2:-5}
PROFILE=${CARGO_PROFILE:-release}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=${MPIRUN:-mpirun}
if [[ -z "${MPIRUN_ARGS:-}" ]]; then
    MPIRUN_ARGS="--bind-to none"
    if (( NP > $(nproc) )); then MPIRUN_ARGS+=" --oversubscribe"; fi
fi

echo "# building (cargo $PROFILE, mpicc -O2)" >&2
cargo build --quiet --profile "$PROFILE" -p bench-collective
OURS="$ROOT/target/$PROFILE/bench-collective"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mpicc -O2 -o "$WORK/mpi_allreduce" benches/mpi_allreduce.c

# Size bands: (min max iterations warmup), enough iterations that each size runs for
# tens of milliseconds at least.
BANDS=(
    "8 65536 5000 200"
    "131072 4194304 500 20"
    "8388608 67108864 30 3"
)

for round in $(seq 1 "$ROUNDS"); do
    echo "# round $round of $ROUNDS" >&2
    for band in "${BANDS[@]}"; do
        read -r lo hi n w <<<"$band"
        # shellcheck disable=SC2086
        $MPIRUN $MPIRUN_ARGS -np "$NP" "$WORK/mpi_allreduce" "$lo" "$hi" "$n" "$w" \
            >>"$WORK/c.$round"
        # shellcheck disable=SC2086
        $MPIRUN $MPIRUN_ARGS -np "$NP" "$OURS" all_reduce -b "$lo" -e "$hi" -f 2 \
            -n "$n" -w "$w" -c 0 -d float32 -o sum --json "$WORK/ours.$round.$lo.json" \
            >/dev/null 2>"$WORK/ours.$round.$lo.err" \
            || { cat "$WORK/ours.$round.$lo.err" >&2; exit 1; }
    done
done

python3 - "$WORK" "$ROUNDS" "$NP" <<'PY'
import glob, json, statistics, sys
work, rounds, np_ = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c, c_loop, ours = {}, {}, {}
for r in range(1, rounds + 1):
    for line in open(f"{work}/c.{r}"):
        size, per_iter, loop = line.split()
        c.setdefault(int(size), []).append(float(per_iter))
        c_loop.setdefault(int(size), []).append(float(loop))
    for path in glob.glob(f"{work}/ours.{r}.*.json"):
        for res in json.load(open(path))["results"]:
            ours.setdefault(res["size_bytes"], []).append(res["out_of_place"]["time_us"])
print(f"# MPI_Allreduce float32 sum, out of place, {np_} ranks, median of {rounds} interleaved rounds")
print(f"# {'size(B)':>10} {'C(us)':>12} {'C loop(us)':>12} {'ours(us)':>12} {'ours/C':>8}  within 5%")
worst, bad = 0.0, 0
for size in sorted(c):
    if size not in ours:
        continue
    cm, cl, om = (statistics.median(v[size]) for v in (c, c_loop, ours))
    ratio = om / cm
    ok = abs(ratio - 1) <= 0.05
    bad += not ok
    worst = max(worst, abs(ratio - 1))
    print(f"  {size:>10} {cm:12.3f} {cl:12.3f} {om:12.3f} {ratio:8.3f}  {'yes' if ok else 'NO'}")
print(f"# worst deviation {worst*100:.1f}%, {bad} size(s) outside 5%")
PY
