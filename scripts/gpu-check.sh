#!/usr/bin/env bash
# GPU check on one machine with an NVIDIA GPU (written for one H200 without an RDMA NIC;
# budget: under 8 minutes including the build on a 16-core host). In order:
#
#   1. facts: nvidia-smi, the driver (open or proprietary modules), nvidia_peermem, RDMA devices;
#   2. build (release) bench-bw, bench-lat, bench-collective, aggregate and gpudirect_probe;
#   3. gpudirect_probe: CUDA allocation, copy in and back, dma-buf export, and a trial
#      registration with its diagnostic on whatever RDMA device exists;
#   4. GPUDirect through the tools: with an RDMA device a loopback write test from GPU
#      memory with --check; without one, the start-up error (exit 2, no panic);
#   5. the copy baselines (h2d, d2h, d2d; p2p with two GPUs, else its refusal);
#   6. TCP staged through pinned memory over loopback with --check (bench-bw, -b too, and
#      bench-lat), beside host-memory TCP at the same sizes;
#   7. aggregate: a profile over the JSON of 5 and 6 (copy_bw, staged bandwidth, no wrong
#      byte) must PASS;
#   8. bench-collective's NCCL backend: every collective (nccl-tests' ten), datatype and
#      reduction, --check; nccl-tests' time with -a 3.
#
# Fails on any non-zero exit where success is expected, any wrong byte or element, a
# missing library, a panic, or a step over its timeout. Writes everything under OUT.
#
# Usage: scripts/gpu-check.sh                 (from anywhere in the repository)
# Env:   OUT        where logs and JSON go (default: ./gpu-check-out)
#        BIN        a directory of prebuilt binaries (bench-bw, bench-lat, bench-collective,
#                   aggregate, gpudirect_probe) instead of building
#        MPIRUN     launcher (default: mpirun -np 1 when present, else the binary alone:
#                   MPI then runs as a singleton)
#        MAXBYTES   top of the checked collective sweep (default 256M)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT/json"
MAXBYTES=${MAXBYTES:-256M}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
START=$(date +%s)
FAILED=0

say() { echo "== $*" | tee -a "$OUT/summary.txt"; }
failed() {
    say "FAILED $*"
    FAILED=1
}
elapsed() { echo "$(($(date +%s) - START)) s"; }

# ------------------------------------------------------------------ 1. facts
say "gpu-check $(date -u +%FT%TZ) on $(hostname)"
if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv |
        tee -a "$OUT/summary.txt"
    nvidia-smi topo -m 2>&1 | tee "$OUT/topo.txt" | head -20
else
    say "nvidia-smi not found: is there an NVIDIA driver?"
fi
head -1 /proc/driver/nvidia/version 2> /dev/null | tee -a "$OUT/summary.txt"
if [[ -d /sys/module/nvidia_peermem ]]; then say "nvidia_peermem: loaded"; else say "nvidia_peermem: not loaded"; fi
RDMA=$(ls /sys/class/infiniband 2> /dev/null | tr '\n' ' ')
say "RDMA devices: ${RDMA:-none}"

# cudarc loads libnccl.so (the development name); a runtime-only install has just
# libnccl.so.2 (Debian/Ubuntu libnccl2, or pip's nvidia-nccl-cu12). Link it.
find_nccl() {
    ldconfig -p 2> /dev/null | awk '/libnccl\.so(\.2)? /{print $NF}' | head -1
    for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu /opt/nccl/lib \
        $(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2> /dev/null); do
        ls "$d"/libnccl.so* 2> /dev/null | head -1
    done
}
if ! ldconfig -p 2> /dev/null | grep -q 'libnccl\.so '; then
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

# ------------------------------------------------------------------ 2. build
if [[ -z "${BIN:-}" ]]; then
    say "building (release): bench-bw bench-lat bench-collective aggregate gpudirect_probe"
    if ! cargo build --release -p bench-bw -p bench-lat -p bench-collective -p aggregate 2>&1 |
        tail -3 | tee -a "$OUT/summary.txt" ||
        ! cargo build --release -p transport --features cuda,verbs --example gpudirect_probe 2>&1 | tail -1; then
        say "FAILED: build"
        exit 1
    fi
    BIN=$ROOT/target/release
    cp -f "$ROOT/target/release/examples/gpudirect_probe" "$BIN/gpudirect_probe" 2> /dev/null
fi
if ldd "$BIN/bench-collective" | grep -q "not found"; then
    say "FAILED: $BIN/bench-collective misses shared libraries (MPI must be installed):"
    ldd "$BIN/bench-collective" | grep "not found" | tee -a "$OUT/summary.txt"
    exit 1
fi
if [[ -z "${MPIRUN:-}" ]]; then
    if command -v mpirun > /dev/null; then MPIRUN="mpirun --bind-to none -np 1"; else MPIRUN=""; fi
fi
say "build done ($(elapsed))"

# Runs NAME TIMEOUT CMD...: logs to OUT/NAME.{txt,err}; returns the exit status; a panic
# is always a failure.
step() {
    local name=$1 limit=$2
    shift 2
    timeout "$limit" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err"
    local rc=$?
    if grep -q panicked "$OUT/$name.err" "$OUT/$name.txt"; then
        failed "$name: panicked"
        tail -5 "$OUT/$name.err"
    fi
    return $rc
}
# json_ok FILE EXPR: a python expression over each result `r` of the document must hold.
json_ok() {
    python3 - "$1" "$2" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["results"], "no results"
for r in d["results"]:
    assert eval(sys.argv[2], {}, {"r": r, "d": d}), "failed: " + sys.argv[2] + " on " + json.dumps(r)[:400]
PY
}

# ------------------------------------------------------------------ 3. probe
if step probe 120 "$BIN/gpudirect_probe"; then
    say "ok     gpudirect_probe ($(grep -c '^ok ' "$OUT/probe.txt") steps ok)"
else
    failed "gpudirect_probe: exit $?"
fi
grep -E '^(ok|FAILED|skip) |^GPU |^no |^  |cannot register' "$OUT/probe.txt" | tee -a "$OUT/summary.txt"
if grep -q "^no usable CUDA driver" "$OUT/probe.txt"; then
    # Without a GPU the tools must say so (exit 2, no panic); nothing else can be checked.
    step nocuda 60 "$BIN/bench-bw" --transport tcp --use-cuda 0
    rc=$?
    if ((rc == 2)) && grep -q "no CUDA driver" "$OUT/nocuda.err"; then
        say "no usable GPU here; bench-bw --use-cuda says so with exit 2, as it must"
    else
        say "FAILED: bench-bw --use-cuda without CUDA: exit $rc"
    fi
    say "RESULT: FAILED (nothing checked: this machine has no usable GPU)"
    exit 1
fi

# ------------------------------------------------------------------ 4. GPUDirect via the tools
if [[ -n "$RDMA" ]]; then
    P=19400
    step gpudirect-server 120 "$BIN/bench-bw" --transport verbs --use-cuda 0 --test write --check \
        -s 1M -n 2000 -p $P --timeout 60 &
    spid=$!
    step gpudirect-client 120 "$BIN/bench-bw" --transport verbs --use-cuda 0 --test write --check \
        -s 1M -n 2000 -p $P --timeout 60 --json "$OUT/json/gpudirect-write.json" 127.0.0.1
    rc=$?
    wait $spid
    if ((rc == 0)) && json_ok "$OUT/json/gpudirect-write.json" 'r["check_wrong_bytes"] == 0 and r["memory"]["initiator"]["kind"] == "cuda"'; then
        say "ok     GPUDirect write loopback: $(grep -E '^ [0-9]' "$OUT/gpudirect-client.txt")"
    elif ((rc == 2)) && grep -q "cannot register" "$OUT/gpudirect-client.err"; then
        say "GPUDirect refused on this host, diagnosed (exit 2):"
        cat "$OUT/gpudirect-client.err" | tee -a "$OUT/summary.txt"
    else
        failed "GPUDirect write loopback: exit $rc"
        tail -5 "$OUT/gpudirect-client.err"
    fi
else
    step gpudirect-nonic 60 "$BIN/bench-bw" --transport verbs --use-cuda 0 --test write
    rc=$?
    if ((rc == 2)) && grep -q "no RDMA device" "$OUT/gpudirect-nonic.err"; then
        say "ok     no RDMA NIC: --transport verbs --use-cuda 0 exits 2 with: $(head -c 160 "$OUT/gpudirect-nonic.err")"
    else
        failed "verbs without a NIC: exit $rc"
    fi
fi

# ------------------------------------------------------------------ 5. copy baselines
for t in h2d d2h d2d; do
    for shape in "large:-s 256M -n 20" "sweep:-a -n 50"; do
        name=copy-$t-${shape%%:*}
        # shellcheck disable=SC2086
        if step "$name" 120 "$BIN/bench-bw" --test $t ${shape#*:} --json "$OUT/json/$name.json" &&
            json_ok "$OUT/json/$name.json" 'r["transport"] == "cuda" and r["bw_gbit_s"]["avg"] > 0'; then
            say "ok     $name: $(awk '/^ [0-9]/{l=$0} END{print l}' "$OUT/$name.txt")"
        else
            failed "$name"
            tail -3 "$OUT/$name.err"
        fi
    done
done
NGPU=$(nvidia-smi -L 2> /dev/null | wc -l)
step copy-p2p 120 "$BIN/bench-bw" --test p2p -s 256M -n 20 --json "$OUT/json/copy-p2p.json"
rc=$?
if ((NGPU >= 2)); then
    ((rc == 0)) && say "ok     p2p copies" || failed "p2p copies: exit $rc"
elif ((rc == 2)) && grep -q "this host has 1 GPU" "$OUT/copy-p2p.err"; then
    say "ok     p2p on one GPU refused (exit 2)"
    rm -f "$OUT/json/copy-p2p.json"
else
    failed "p2p on one GPU: exit $rc"
fi

# ------------------------------------------------------------------ 6. staged TCP
# pair NAME TOOL ARGS...: server and client on loopback; the client writes json/NAME.json.
pair() {
    local name=$1 tool=$2
    shift 2
    local port=$((19500 + RANDOM % 400))
    step "$name-server" 120 "$BIN/$tool" -p $port --timeout 60 "$@" &
    local spid=$!
    step "$name" 120 "$BIN/$tool" -p $port --timeout 60 "$@" --json "$OUT/json/$name.json" 127.0.0.1
    local rc=$?
    wait $spid
    local src=$?
    return $((rc != 0 || src != 0))
}
for size in 64K 4M; do
    if pair "staged-bw-$size" bench-bw --transport tcp --use-cuda 0 --check -s $size -n 2000 &&
        json_ok "$OUT/json/staged-bw-$size.json" 'r["check_wrong_bytes"] == 0 and r["memory"]["responder"]["path"] == "staged"'; then
        say "ok     staged TCP $size: $(grep -E '^ [0-9]' "$OUT/staged-bw-$size.txt")"
    else
        failed "staged TCP $size"
        tail -3 "$OUT/staged-bw-$size.err"
    fi
    pair "host-bw-$size" bench-bw --transport tcp -s $size -n 2000 ||
        failed "host-memory TCP $size"
    say "       host-memory TCP $size: $(grep -E '^ [0-9]' "$OUT/host-bw-$size.txt")"
done
if pair staged-bw-bidir bench-bw --transport tcp --use-cuda 0 --check -b -s 1M -n 1000 &&
    json_ok "$OUT/json/staged-bw-bidir.json" 'r["check_wrong_bytes"] == 0 and r["bidirectional"]'; then
    say "ok     staged TCP bidirectional: $(grep -E '^ [0-9]' "$OUT/staged-bw-bidir.txt")"
else
    failed "staged TCP bidirectional"
fi
if pair staged-lat bench-lat --transport tcp --use-cuda 0 -s 64 -n 5000 &&
    json_ok "$OUT/json/staged-lat.json" 'r["memory"]["initiator"]["path"] == "staged"'; then
    say "ok     staged TCP latency: $(grep -E '^ [0-9]' "$OUT/staged-lat.txt")"
else
    failed "staged TCP latency"
fi

# ------------------------------------------------------------------ 7. aggregate
cat > "$OUT/gpu-check.toml" << 'EOF'
name = "gpu-check"
description = "What scripts/gpu-check.sh measured on one GPU host: copy baselines and TCP staged through GPU memory"
[[check]]
id = "h2d"
description = "host to GPU copies, 1 MiB and up"
metric = "copy_bw"
unit = "GB/s"
min = 1.0
test = "h2d_bw"
min_size = "1M"
[[check]]
id = "d2h"
description = "GPU to host copies, 1 MiB and up"
metric = "copy_bw"
unit = "GB/s"
min = 1.0
test = "d2h_bw"
min_size = "1M"
[[check]]
id = "d2d"
description = "copies within the GPU, 1 MiB and up"
metric = "copy_bw"
unit = "GB/s"
min = 1.0
test = "d2d_bw"
min_size = "1M"
[[check]]
id = "staged-bw"
description = "TCP staged through pinned memory, GPU memory on both sides"
metric = "bw_avg"
unit = "Gb/s"
min = 0.1
test = "send_bw"
transport = "tcp"
memory = "cuda"
EOF
if step aggregate 120 "$BIN/aggregate" report "$OUT/json" --profile "$OUT/gpu-check.toml" --out "$OUT/report" --force; then
    say "ok     aggregate: $(grep -E '^verdict' "$OUT/aggregate.txt")"
else
    failed "aggregate report over the GPU results: exit $? ($(grep -E '^verdict' "$OUT/aggregate.txt"))"
    grep -E '^(FAIL|MISSING)' "$OUT/aggregate.txt"
fi

# ------------------------------------------------------------------ 8. NCCL collectives
# Can this machine run the NCCL backend at all? Without a GPU, CUDA driver or NCCL the
# tool must say so with exit code 2 (never a panic); then nothing else can be checked.
# shellcheck disable=SC2086
timeout 120 $MPIRUN "$BIN/bench-collective" all_reduce --backend nccl -b 8 -e 8 -n 1 -w 0 > "$OUT/nccl-probe.txt" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
    if [[ $rc -eq 2 ]] && ! grep -q panicked "$OUT/nccl-probe.txt"; then
        say "no usable GPU/NCCL here (exit 2, as it must be):"
    else
        say "FAILED probe: exit $rc"
    fi
    grep -m3 "error" "$OUT/nccl-probe.txt" | tee -a "$OUT/summary.txt"
    say "RESULT: FAILED (collectives not checked)"
    exit 1
fi

# One checked run: NAME then bench-collective arguments. Fails on a non-zero exit or any
# wrong element reported in the JSON.
check() {
    local name=$1
    shift
    local t0
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout 300 $MPIRUN "$BIN/bench-collective" "$@" --backend nccl -c --json "$OUT/$name.json" \
        > "$OUT/$name.txt" 2> "$OUT/$name.err"
    local rc=$?
    local wrong
    wrong=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(r["out_of_place"]["wrong"]+r["in_place"]["wrong"] for r in d["results"]))' "$OUT/$name.json" 2> /dev/null || echo "?")
    if [[ $rc -ne 0 || "$wrong" != "0" ]]; then
        say "FAILED $name: exit $rc, wrong elements $wrong ($(($(date +%s) - t0)) s)"
        tail -5 "$OUT/$name.err" | tee -a "$OUT/summary.txt"
        FAILED=1
    else
        say "ok     $name: $(grep -c '^ *[0-9]' "$OUT/$name.txt") rows, 0 wrong ($(($(date +%s) - t0)) s)"
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
timeout 60 $MPIRUN "$BIN/bench-collective" broadcast --backend nccl -r 1 -b 8 -e 8 > "$OUT/bad-root.txt" 2>&1
rc=$?
if [[ $rc -eq 2 ]]; then say "ok     bad root refused (exit 2)"; else say "FAILED bad root: exit $rc"; FAILED=1; fi

say "elapsed $(elapsed)"
if [[ $FAILED -ne 0 ]]; then
    say "RESULT: FAILED"
    exit 1
fi
say "RESULT: ok"
