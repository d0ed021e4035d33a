#!/usr/bin/env bash
# GPU check of bench-collective's NCCL backend on one GPU (written for one H200; about
# 2-4 minutes there, well under 8). It builds with the CUDA features, then runs every
# collective (the ten of nccl-tests' set) with --check over a size sweep, every datatype
# and every reduction, checks nccl-tests' time with -a 3, and fails on any wrong element,
# any non-zero exit, or a missing library.
#
# Usage: scripts/gpu-check.sh                 (from anywhere in the repository)
# Env:   OUT        where logs and JSON go (default: ./gpu-check-out)
#        BIN        a prebuilt bench-collective to use instead of building (machines
#                   without cargo or crates.io access)
#        MPIRUN     launcher (default: mpirun -np 1 when present, else the binary alone:
#                   MPI then runs as a singleton)
#        MAXBYTES   top of the checked sweep (default 256M)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT"
MAXBYTES=${MAXBYTES:-256M}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
START=$(date +%s)
FAILED=0

say() { echo "== $*" | tee -a "$OUT/summary.txt"; }

say "gpu-check $(date -u +%FT%TZ) on $(hostname)"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv \
        | tee -a "$OUT/summary.txt"
else
    say "nvidia-smi not found: is there an NVIDIA driver?"
fi

# cudarc loads libnccl.so (the development name); a runtime-only install has just
# libnccl.so.2 (Debian/Ubuntu libnccl2, or pip's nvidia-nccl-cu12). Link it.
find_nccl() {
    ldconfig -p 2>/dev/null | awk '/libnccl\.so(\.2)? /{print $NF}' | head -1
    for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu /opt/nccl/lib \
        $(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null); do
        ls "$d"/libnccl.so* 2>/dev/null | head -1
    done
}
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so '; then
    NCCL=$(find_nccl | head -1)
    if [[ -n "$NCCL" ]]; then
        mkdir -p "$OUT/lib"
        ln -sf "$NCCL" "$OUT/lib/libnccl.so"
        export LD_LIBRARY_PATH="$OUT/lib:$(dirname "$NCCL"):${LD_LIBRARY_PATH:-}"
        say "using NCCL $NCCL (linked as libnccl.so)"
    else
        say "no libnccl found: bench-collective must report that with exit code 2"
    fi
fi

if [[ -z "${BIN:-}" ]]; then
    say "building: cargo build --release -p bench-collective --features cuda"
    if ! cargo build --release -p bench-collective --features cuda 2>&1 | tail -3 | tee -a "$OUT/summary.txt"; then
        say "FAILED: build"; exit 1
    fi
    BIN=$ROOT/target/release/bench-collective
fi
if ldd "$BIN" | grep -q "not found"; then
    say "FAILED: $BIN misses shared libraries (MPI must be installed):"
    ldd "$BIN" | grep "not found" | tee -a "$OUT/summary.txt"
    exit 1
fi
if [[ -z "${MPIRUN:-}" ]]; then
    if command -v mpirun >/dev/null; then MPIRUN="mpirun --bind-to none -np 1"; else MPIRUN=""; fi
fi

# Can this machine run the NCCL backend at all? Without a GPU, CUDA driver or NCCL the
# tool must say so with exit code 2 (never a panic); then nothing else can be checked.
# shellcheck disable=SC2086
timeout 120 $MPIRUN "$BIN" all_reduce --backend nccl -b 8 -e 8 -n 1 -w 0 >"$OUT/probe.txt" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
    if [[ $rc -eq 2 ]] && ! grep -q panicked "$OUT/probe.txt"; then
        say "no usable GPU/NCCL here (exit 2, as it must be):"
    else
        say "FAILED probe: exit $rc"
    fi
    grep -m3 "error" "$OUT/probe.txt" | tee -a "$OUT/summary.txt"
    say "RESULT: FAILED (nothing checked)"
    exit 1
fi

# One checked run: NAME then bench-collective arguments. Fails on a non-zero exit or any
# wrong element reported in the JSON.
check() {
    local name=$1; shift
    local t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout 300 $MPIRUN "$BIN" "$@" --backend nccl -c --json "$OUT/$name.json" \
        >"$OUT/$name.txt" 2>"$OUT/$name.err"
    local rc=$?
    local wrong
    wrong=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(r["out_of_place"]["wrong"]+r["in_place"]["wrong"] for r in d["results"]))' "$OUT/$name.json" 2>/dev/null || echo "?")
    if [[ $rc -ne 0 || "$wrong" != "0" ]]; then
        say "FAILED $name: exit $rc, wrong elements $wrong ($(( $(date +%s) - t0 )) s)"
        tail -5 "$OUT/$name.err" | tee -a "$OUT/summary.txt"
        FAILED=1
    else
        say "ok     $name: $(grep -c '^ *[0-9]' "$OUT/$name.txt") rows, 0 wrong ($(( $(date +%s) - t0 )) s)"
    fi
}

# Every collective, float32 sum, 8 B .. MAXBYTES doubling; the full table goes to the log.
check sweep all -b 8 -e "$MAXBYTES" -f 2 -n 20 -w 5
cat "$OUT/sweep.txt"
# Every datatype over every collective.
for dt in int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32 float64; do
    check "dtype-$dt" all -b 8 -e 16M -f 16 -n 5 -w 1 -d "$dt"
done
# Every reduction on the reducing collectives, with a float and an integer type.
for op in sum prod min max avg; do
    for dt in float32 int32; do
        check "op-$op-$dt" all_reduce reduce_scatter reduce -b 8 -e 16M -f 16 -n 5 -w 1 -o "$op" -d "$dt"
    done
done
# nccl-tests' time: -a 3 reports the slowest rank's loop time / iterations.
check avg-max all_reduce -b 1M -e 1M -n 50 -a 3
if ! python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]["out_of_place"]; sys.exit(abs(r["time_us"]-r["rank_time_us"]["max"])>1e-9)' "$OUT/avg-max.json" 2>/dev/null; then
    say "FAILED avg-max: time_us is not rank_time_us.max with -a 3"; FAILED=1
fi
# Broadcast and reduce are rooted; with one GPU the only root is 0. A bad root must be
# refused with exit code 2.
timeout 60 $MPIRUN "$BIN" broadcast --backend nccl -r 1 -b 8 -e 8 >"$OUT/bad-root.txt" 2>&1
rc=$?
if [[ $rc -eq 2 ]]; then say "ok     bad root refused (exit 2)"; else say "FAILED bad root: exit $rc"; FAILED=1; fi

say "elapsed $(( $(date +%s) - START )) s"
if [[ $FAILED -ne 0 ]]; then say "RESULT: FAILED"; exit 1; fi
say "RESULT: ok"
