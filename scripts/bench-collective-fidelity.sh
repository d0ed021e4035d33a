#!/usr/bin/env bash
# Fidelity of bench-collective's time against the way nccl-tests times a collective.
#
# The reference (references/mpi_allreduce.c) is the least code that times MPI_Allreduce as
# nccl-tests' common.cu does: warm-up, a barrier, one timer around ITERS back-to-back
# calls, loop time / ITERS per rank, mean over ranks (nccl-tests' default -a 1). Ours is
# `bench-collective all_reduce -c 0`, whose time_us is defined the same way. Both time
# float32 sum, out of place, same sizes (8 B .. 64 MiB), iterations and warm-up.
#
# Method (issue 34; scripts/lib/fidelity.py says it in full), because below a few
# microseconds the noise of a machine is of the order of the target: every round runs
# reference, ours, reference again, back to back (one launch per size group, groups in
# turn), ROUNDS rounds. Per size, each round gives a paired ratio ours / the mean of the
# two reference runs around it, and the reference's second run over its first gives the
# A/A ratio; the median ratio gets a 95 % bootstrap interval over the rounds, and the
# size is called within (the interval inside 1 +- 5 %, or +- the A/A interval's reach
# where wider), above (ours slower), below (ours faster) or undecided. Run it twice on a
# quiet machine: a verdict the second run contradicts was noise.
#
# It also measures what per-iteration stamps would cost the loop at 8 B
# (fabric/examples/collective_stamp_cost.rs: plain loop vs stamped loop, interleaved,
# with a second plain loop as the noise floor), which is why bench-collective times the
# per-iteration view in a pass of its own.
#
# This is a measurement, not a test: the load of the machine shows in every figure, so
# the load average is printed at the start and the end. Run it on an idle node, twice.
#
# Then (unless A2A_NP is empty) alltoall and the uniform ep_dispatch at A2A_NP ranks
# (default 8) against references/mpi_alltoallv.c: MPI_Alltoall at the same sizes, and
# MPI_Alltoallv at equal counts: the count matrix is computed here, in Python, by a third
# implementation of the router's specification (docs/load.md), from the same seed; the
# same three-run rounds, ratios, intervals and verdicts.
#
# Usage: scripts/bench-collective-fidelity.sh [NPS] [ROUNDS]   (defaults "2 4" and 9)
# Env:   MPIRUN (default: mpirun), MPIRUN_ARGS (default: --bind-to none, plus
#        --oversubscribe when NP exceeds the cores), CARGO_PROFILE (default: release),
#        NICE (e.g. "nice -n -5"), MAXBYTES (default 64M, as bytes), SCALE (multiplies
#        every iteration count, default 1; e.g. 0.2 for a quick look on a loaded machine),
#        OUT (directory to keep the raw figures, paired.*.txt and fidelity.*.json in;
#        default a temporary one),
#        A2A_NP (ranks of the alltoall/EP part, default 8; empty skips it), EP_TOKENS
#        (default 512), EP_HIDDEN (default 1024), EP_EXPERTS (64), EP_TOPK (8), EP_SEED (1).
set -euo pipefail

NPS=${1:-"2 4"}
ROUNDS=${2:-9}
PROFILE=${CARGO_PROFILE:-release}
MAXBYTES=${MAXBYTES:-67108864}
SCALE=${SCALE:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
MPIRUN=${MPIRUN:-mpirun}
NICE=${NICE:-}
for tool in cargo mpicc python3 "$MPIRUN"; do
    command -v "$tool" >/dev/null || { echo "error: $tool not found (scripts/lib/deps.sh lists the packages)" >&2; exit 2; }
done

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "# $(date -u +%FT%TZ) $(uname -n): $(nproc) cores, load average $(load) (1, 5, 15 min)"

echo "# building (cargo $PROFILE, mpicc -O2)" >&2
cargo build --quiet --profile "$PROFILE" -p bench-collective
cargo build --quiet --profile "$PROFILE" -p transport --features mpi --example collective_stamp_cost
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
OURS=${OURS:-"$TARGET/$PROFILE/bench-collective"}
STAMPS="$TARGET/$PROFILE/examples/collective_stamp_cost"
if [ -n "${OUT:-}" ]; then
    WORK=$OUT
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
fi
mpicc -O2 -o "$WORK/mpi_allreduce" references/mpi_allreduce.c
mpicc -O2 -o "$WORK/mpi_alltoallv" references/mpi_alltoallv.c

launch() {
    local np=$1
    shift
    local args=${MPIRUN_ARGS:-}
    if [ -z "${MPIRUN_ARGS:-}" ]; then
        args="--bind-to none"
        if ((np > $(nproc))); then args+=" --oversubscribe"; fi
    fi
    # shellcheck disable=SC2086
    $NICE "$MPIRUN" $args -np "$np" "$@"
}

# Size groups: one launch each, with iterations enough for tens of milliseconds or more
# per size: "MIN MAX ITERS WARMUP".
SIZE_GROUPS=(
    "8 4096 10000 1000"
    "8192 131072 2000 200"
    "262144 2097152 200 20"
    "4194304 $MAXBYTES 20 5"
)

echo "# what per-iteration stamps cost the loop at 8 B (stamped / plain; plain / plain = noise)"
"$STAMPS" 8 "$(python3 -c "print(max(1000, round(200000 * $SCALE)))")" 41 | tail -1 | sed 's/^/  1 rank:  /'
for np in $NPS; do
    launch "$np" "$STAMPS" 8 "$(python3 -c "print(max(1000, round(20000 * $SCALE)))")" 41 | tail -1 | sed "s/^/  $np ranks: /"
done

for np in $NPS; do
    for round in $(seq 1 "$ROUNDS"); do
        echo "# $np ranks, round $round of $ROUNDS (load $(load))" >&2
        for g in "${SIZE_GROUPS[@]}"; do
            read -r min max iters warm <<<"$g"
            iters=$(python3 -c "print(max(10, round($iters * $SCALE)))")
            warm=$(python3 -c "print(max(2, round($warm * $SCALE)))")
            ((min > MAXBYTES)) && continue
            ((max > MAXBYTES)) && max=$MAXBYTES
            launch "$np" "$WORK/mpi_allreduce" "$min" "$max" "$iters" "$warm" \
                | sed "s/^/$np $round a /" >>"$WORK/ref.txt"
            launch "$np" "$OURS" all_reduce -b "$min" -e "$max" -f 2 -n "$iters" -w "$warm" \
                -c 0 -d float32 -o sum --json "$WORK/ours.$np.$round.$min.json" \
                >/dev/null 2>"$WORK/ours.err" || { cat "$WORK/ours.err" >&2; exit 1; }
            launch "$np" "$WORK/mpi_allreduce" "$min" "$max" "$iters" "$warm" \
                | sed "s/^/$np $round b /" >>"$WORK/ref.txt"
        done
    done
done

# Per rank count: each size's rounds as `SIZE ROUND ref|ours US` for the shared method.
python3 - "$WORK" "$NPS" <<'PY'
import glob, json, sys
work, nps = sys.argv[1], sys.argv[2].split()
out = {np_: open(f"{work}/paired.{np_}.txt", "w") for np_ in nps}
for line in open(f"{work}/ref.txt"):
    np_, rnd, _, size, us = line.split()
    out[np_].write(f"{size} {rnd} ref {us}\n")
for path in glob.glob(f"{work}/ours.*.json"):
    _, np_, rnd, _, _ = path.rsplit("/", 1)[1].split(".")
    for r in json.load(open(path))["results"]:
        out[np_].write(f"{r['size_bytes']} {rnd} ours {r['out_of_place']['time_us']}\n")
PY
for np in $NPS; do
    python3 scripts/lib/fidelity.py --json "$WORK/fidelity.allreduce.$np.json" \
        --title "MPI_Allreduce float32 sum, out of place, $np ranks: time us (loop time / iterations, mean over ranks); above = ours slower" \
        "$WORK/paired.$np.txt"
done


A2A_NP=${A2A_NP-8}
if [ -n "$A2A_NP" ]; then
    TOK=${EP_TOKENS:-512} HID=${EP_HIDDEN:-1024} NEXP=${EP_EXPERTS:-64} TOPK=${EP_TOPK:-8} SEED=${EP_SEED:-1}
    ROW=$((HID + HID / 128 * 4))
    # The router's specification (docs/load.md), uniform routing, written once more here.
    python3 - "$A2A_NP" "$TOK" "$NEXP" "$TOPK" "$SEED" >"$WORK/counts.txt" <<'PY'
import sys
R, T, E, K, seed = map(int, sys.argv[1:])
M = (1 << 64) - 1
counts = []
for r in range(R):
    state = (seed ^ (r * 0xD1B54A32D192ED03)) & M
    def nxt():
        global state
        state = (state + 0x9E3779B97F4A7C15) & M
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        return z ^ (z >> 31)
    row = [0] * R
    for t in range(T):
        sel = []
        while len(sel) < K:
            x = (nxt() >> 11) * (1.0 / (1 << 53)) * E
            e = E - 1
            acc = 0.0
            for c in range(E):
                acc += 1.0
                if acc > x:
                    e = c
                    break
            if e not in sel:
                sel.append(e)
        for p in sorted({e // (E // R) for e in sel}):
            row[p] += 1
    counts.append(row)
for row in counts:
    print(" ".join(map(str, row)))
PY
    a2a_iters=$(python3 -c "print(max(10, round(200 * $SCALE)))")
    ep_iters=$(python3 -c "print(max(10, round(100 * $SCALE)))")
    for round in $(seq 1 "$ROUNDS"); do
        echo "# alltoall/ep_dispatch at $A2A_NP ranks, round $round of $ROUNDS (load $(load))" >&2
        for which in a b; do
            [ "$which" = b ] && {
                launch "$A2A_NP" "$OURS" alltoall -b 32K -e 1M -f 4 -n "$a2a_iters" -w 5 -c 0 \
                    --json "$WORK/a2a.$round.json" >/dev/null 2>"$WORK/ours.err" || { cat "$WORK/ours.err" >&2; exit 1; }
                launch "$A2A_NP" "$OURS" ep_dispatch -b "$TOK" -e "$TOK" -n "$ep_iters" -w 5 -c 0 \
                    --routing uniform --seed "$SEED" --hidden "$HID" --experts "$NEXP" --topk "$TOPK" \
                    --json "$WORK/ep.$round.json" >/dev/null 2>"$WORK/ours.err" || { cat "$WORK/ours.err" >&2; exit 1; }
            }
            launch "$A2A_NP" "$WORK/mpi_alltoallv" alltoall 32768 1048576 "$a2a_iters" 5 \
                | sed "s/^/a2a $round $which /" >>"$WORK/a2a_ref.txt"
            launch "$A2A_NP" "$WORK/mpi_alltoallv" alltoallv "$ROW" "$ep_iters" 5 "$WORK/counts.txt" \
                | sed "s/^/ep $round $which /" >>"$WORK/a2a_ref.txt"
        done
    done
    python3 - "$WORK" "$TOK" >"$WORK/paired.a2a.txt" <<'PY'
import glob, json, sys
work, tok = sys.argv[1], int(sys.argv[2])
for line in open(f"{work}/a2a_ref.txt"):
    kind, rnd, _, size, us = line.split()
    what = f"a2a:{size}" if kind == "a2a" else f"ep:{tok}tok"
    print(what, rnd, "ref", us)
for kind in ("a2a", "ep"):
    for path in glob.glob(f"{work}/{kind}.*.json"):
        rnd = int(path.rsplit("/", 1)[1].split(".")[1])
        for r in json.load(open(path))["results"]:
            what = f"a2a:{r['size_bytes']}" if kind == "a2a" else f"ep:{r['count']}tok"
            print(what, rnd, "ours", r["out_of_place"]["time_us"])
PY
    python3 scripts/lib/fidelity.py --json "$WORK/fidelity.a2a.json" \
        --title "alltoall (MPI_Alltoall float32) and ep_dispatch uniform (MPI_Alltoallv at equal counts), $A2A_NP ranks: time us; above = ours slower" \
        "$WORK/paired.a2a.txt"
fi
echo "# load average at the end $(load)"
