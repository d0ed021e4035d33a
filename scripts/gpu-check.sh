#!/usr/bin/env bash
# GPU check on one machine with an NVIDIA GPU (written for one H200 without an RDMA NIC,
# lent for 15 minutes: NVIDIA driver, CUDA, NCCL as a Python wheel; no Rust, no rdma-core,
# no MPI, no network). It runs from the bundle scripts/gpu-bundle.sh makes here (the
# bundle holds this script as scripts/gpu-check.sh, the binaries and every library they
# need); from a checkout with cargo it builds instead. About 6 minutes on an H200. In order:
#
#   1. facts: nvidia-smi, the driver, GPUs counted as CUDA counts them (cuDeviceGetCount:
#      honours CUDA_VISIBLE_DEVICES and MIG, where `nvidia-smi -L` lists a GPU's MIG
#      devices as extra lines), nvidia_peermem, RDMA devices; NCCL's libnccl.so.2 found in
#      the Python wheel (nvidia.nccl) or the system; as root, Soft-RoCE (rdma_rxe on a
#      dummy netdev) where the kernel has it, so the GPUDirect refusals run on GPU memory;
#   2. the library check (ldd) of every binary: a missing library fails here, by name,
#      not later as an exit 127;
#   3. gpudirect_probe: CUDA allocation, copy in and back, dma-buf export, and a trial
#      registration with its diagnostic on whatever RDMA device exists;
#   4. GPUDirect through the tools: with an RDMA device a loopback write test from GPU
#      memory with --check (or its diagnosed refusal: Soft-RoCE takes neither dma-buf nor
#      peer memory); without one, the start-up error (exit 2, no panic);
#   5. the copy baselines (h2d, d2h, d2d, timed behind the copy gate; an h2d sweep without
#      it beside; p2p with two GPUs, else its refusal);
#   6. TCP staged through pinned memory over loopback with --check (bench-bw, -b too, and
#      bench-lat), beside host-memory TCP at the same sizes;
#   7. aggregate: a profile over the JSON of 5 and 6 must PASS. Its floors catch a real
#      fault on an H200 (PCIe Gen5 x16: about 50 GB/s pinned H2D/D2H; HBM3e: D2D, read
#      plus write counted as bandwidthTest does, in the TB/s): H2D/D2H >= H2D_MIN GB/s
#      (default 20: pageable, wrong-NUMA, Gen4-trained or x8 links fall below), D2D >=
#      D2D_MIN GB/s (default 1000: a MIG slice or a throttled GPU falls below);
#   8. bench-collective's NCCL backend: every collective (nccl-tests' ten), datatype (FP8
#      where the NCCL has it, 2.24 and later) and reduction, --check; nccl-tests' time
#      with -a 3; ep_dispatch and ep_combine on the NCCL path, checked.
# Ends with a summary of every figure (summary.txt).
#
# Fails on any non-zero exit where success is expected, any wrong byte or element, a
# missing library, a panic, or a step over its timeout. Writes everything under OUT.
#
# Usage: scripts/gpu-check.sh       (from the bundle, or from anywhere in the repository)
# Env:   OUT        where logs and JSON go (default: ./gpu-check-out under the current directory)
#        BIN        a directory of binaries (bench-bw, bench-lat, bench-collective, aggregate,
#                   gpudirect_probe, mpirun); default: the bundle's bin/, else a cargo build
#        MPIRUN     launcher (default: mpirun -np 1 from BIN or PATH, else the binary alone:
#                   MPI then runs as a singleton)
#        MAXBYTES   top of the checked collective sweep (default 256M)
#        H2D_MIN, D2D_MIN   the copy floors above, GB/s
#        NO_RXE=1   do not try to load rdma_rxe
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT/json"
OUT=$(cd "$OUT" && pwd)
: > "$OUT/summary.txt"
MAXBYTES=${MAXBYTES:-256M}
H2D_MIN=${H2D_MIN:-20}
D2D_MIN=${D2D_MIN:-1000}
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

# GPUs as CUDA counts them: cuDeviceGetCount through the driver library itself.
cuda_count() {
    python3 - 2> /dev/null << 'PY'
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
n = ctypes.c_int(0)
assert cu.cuInit(0) == 0 and cu.cuDeviceGetCount(ctypes.byref(n)) == 0
print(n.value)
PY
}
NGPU=$(cuda_count)
if [[ -z "$NGPU" ]]; then
    # No python3 or no driver: count only the physical GPUs' lines (MIG devices are
    # indented "  MIG ..." lines under their GPU).
    NGPU=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
fi
say "GPUs CUDA sees: $NGPU (nvidia-smi -L: $(nvidia-smi -L 2> /dev/null | grep -c '^GPU ') GPU line(s), $(nvidia-smi -L 2> /dev/null | grep -c 'MIG ') MIG line(s))"

# Soft-RoCE where the kernel has it (root only): then libibverbs finds an RDMA device and
# the dma-buf and peer-memory refusals run for real on GPU memory.
RXE_MADE=""
cleanup_rxe() {
    if [[ -n "$RXE_MADE" ]]; then
        rdma link delete fcrxe0 2> /dev/null
        ip link delete fcdummy0 2> /dev/null
    fi
}
trap cleanup_rxe EXIT
if [[ -z "${NO_RXE:-}" && $(id -u) -eq 0 && ! -e /sys/class/infiniband/fcrxe0 ]] &&
    command -v rdma > /dev/null && command -v ip > /dev/null &&
    modprobe rdma_rxe 2> /dev/null && modprobe ib_uverbs 2> /dev/null; then
    if ip link add fcdummy0 type dummy 2> /dev/null && ip addr add 198.18.7.1/24 dev fcdummy0 &&
        ip link set fcdummy0 up && rdma link add fcrxe0 type rxe netdev fcdummy0 2> /dev/null; then
        RXE_MADE=1
        say "Soft-RoCE: fcrxe0 on fcdummy0 (rdma_rxe), for the GPUDirect refusal diagnostics"
    else
        ip link delete fcdummy0 2> /dev/null
        say "Soft-RoCE: rdma_rxe loaded but no rxe link could be made"
    fi
else
    say "Soft-RoCE: not used (needs root, iproute2's rdma tool and the rdma_rxe module)"
fi
RDMA=$(ls /sys/class/infiniband 2> /dev/null | tr '\n' ' ')
say "RDMA devices: ${RDMA:-none}"

# cudarc loads libnccl.so (the development name); a runtime-only install has just
# libnccl.so.2 (Debian/Ubuntu libnccl2, or pip's nvidia-nccl-cu12). Link it.
find_nccl() {
    # The wheel (nvidia-nccl-cu12 / -cu13): nvidia/nccl/lib/libnccl.so.2.
    python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2> /dev/null
    # Or any site-packages that holds it, without importing.
    for d in $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2> /dev/null) \
        /usr/local/lib/python3*/dist-packages /usr/lib/python3/dist-packages /opt/conda/lib/python3*/site-packages; do
        ls "$d"/nvidia/nccl/lib/libnccl.so.2 2> /dev/null
    done
    ldconfig -p 2> /dev/null | awk '/libnccl\.so(\.2)? /{print $NF}'
    ls /usr/local/cuda/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2 /opt/nccl/lib/libnccl.so.2 2> /dev/null
}
if ! ldconfig -p 2> /dev/null | grep -q 'libnccl\.so '; then
    NCCL=$(find_nccl | while read -r f; do [[ -e $f ]] && echo "$f"; done | head -1)
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
if [[ -z "${BIN:-}" && -x "$ROOT/bin/bench-collective" ]]; then
    BIN=$ROOT/bin # the bundle (scripts/gpu-bundle.sh)
    say "running from the bundle $ROOT ($(cat "$ROOT/SOURCE" 2> /dev/null))"
fi
if [[ -z "${BIN:-}" ]]; then
    cd "$ROOT"
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
# The library check, on every binary: the bundle's wrappers run libexec/ with the bundle's
# library path, so check those with it.
LIBS_OK=1
for t in bench-bw bench-lat bench-collective aggregate gpudirect_probe; do
    f=$BIN/$t
    libpath=${LD_LIBRARY_PATH:-}
    if [[ -x "$ROOT/libexec/$t" && $BIN == "$ROOT/bin" ]]; then
        f=$ROOT/libexec/$t
        libpath=$ROOT/lib${libpath:+:$libpath}
    fi
    if [[ ! -x $f ]]; then
        failed "library check: $f is missing"
        LIBS_OK=0
        continue
    fi
    missing=$(LD_LIBRARY_PATH=$libpath ldd "$f" 2>&1 | grep -E "not found|not a dynamic|version .* not found")
    if [[ -n $missing ]]; then
        failed "library check: $t cannot load: $missing"
        LIBS_OK=0
    fi
done
((LIBS_OK)) && say "ok     library check: every binary finds every library"
((LIBS_OK)) || { say "RESULT: FAILED (binaries cannot load; build the bundle on a distribution no newer than this one)"; exit 1; }
if [[ -z "${MPIRUN:-}" ]]; then
    if [[ -x $BIN/mpirun ]]; then
        MPIRUN="$BIN/mpirun --bind-to none -np 1"
    elif command -v mpirun > /dev/null; then
        MPIRUN="mpirun --bind-to none -np 1"
    else
        MPIRUN=""
    fi
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
# The gate: copies are queued behind a stream wait the host releases (options.timing
# "gated"). Beside it the same small-size sweep ungated, so the summary shows what the gate
# changes where a copy is shorter than its enqueue (at 4 KiB: the host's rate ungated).
if json_ok "$OUT/json/copy-h2d-sweep.json" 'd["options"]["timing"] == "gated"' 2> /dev/null; then
    say "ok     copies timed behind the gate (options.timing = gated)"
else
    failed "copy gate: $(python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))["options"]; print(o.get("timing"), o.get("timing_why"))' "$OUT/json/copy-h2d-sweep.json" 2>&1 | tail -1)"
fi
if step copy-h2d-ungated 120 env FABCHECK_COPY_UNGATED=1 "$BIN/bench-bw" --test h2d -a -n 50 \
    --json "$OUT/json/copy-h2d-ungated.json"; then
    python3 - "$OUT/json/copy-h2d-sweep.json" "$OUT/json/copy-h2d-ungated.json" << 'PY' | tee -a "$OUT/summary.txt"
import json, sys
gated, ungated = ({r["size_bytes"]: r["bw_gbit_s"]["avg"] for r in json.load(open(f))["results"]} for f in sys.argv[1:3])
for size in (4096, 65536, 1 << 20):
    if size in gated and size in ungated:
        print(f"== h2d {size} B: gated {gated[size] / 8:.2f} GB/s, ungated {ungated[size] / 8:.2f} GB/s")
PY
else
    failed "copy-h2d-ungated"
fi
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
description = "host to GPU copies, 64 MiB and up (about 50 GB/s on PCIe Gen5 x16)"
metric = "copy_bw"
unit = "GB/s"
min = @H2D_MIN@
test = "h2d_bw"
min_size = "64M"
[[check]]
id = "d2h"
description = "GPU to host copies, 64 MiB and up (about 50 GB/s on PCIe Gen5 x16)"
metric = "copy_bw"
unit = "GB/s"
min = @H2D_MIN@
test = "d2h_bw"
min_size = "64M"
[[check]]
id = "d2d"
description = "copies within the GPU, 64 MiB and up, read plus write counted (TB/s on HBM3e)"
metric = "copy_bw"
unit = "GB/s"
min = @D2D_MIN@
test = "d2d_bw"
min_size = "64M"
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
sed -i "s/@H2D_MIN@/$H2D_MIN/; s/@H2D_MIN@/$H2D_MIN/; s/@D2D_MIN@/$D2D_MIN/" "$OUT/gpu-check.toml"
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
# FP8 where NCCL has it (2.24 and later, on sm_90 and newer).
NCCL_VER=$(grep -m1 -oE 'NCCL [0-9]+\.[0-9]+' "$OUT/sweep.txt" | awk '{print $2}')
if [[ -n $NCCL_VER ]] && awk -v v="$NCCL_VER" 'BEGIN{split(v,a,"."); exit !(a[1]>2 || (a[1]==2 && a[2]>=24))}'; then
    for dt in float8e4m3 float8e5m2; do
        check "dtype-$dt" all_reduce all_gather reduce_scatter alltoall broadcast -b 8 -e 16M -f 16 -n 5 -w 1 -d "$dt"
    done
else
    say "skip   FP8 datatypes: NCCL ${NCCL_VER:-?} has none (2.24 and later)"
fi
# Every reduction on the reducing collectives, with a float and an integer type.
for op in sum prod min max avg; do
    for dt in float32 int32; do
        check "op-$op-$dt" all_reduce reduce_scatter reduce -b 8 -e 16M -f 16 -n 5 -w 1 -o "$op" -d "$dt"
    done
done
# Expert-parallel dispatch and combine on the NCCL path (GPU memory, one group of
# ncclSend/ncclRecv per call), checked: FP8 rows out, BF16 weighted sums back. One GPU:
# every copy is the rank's own, so this proves the path and its check, not a network.
check ep-nccl ep_dispatch ep_combine -b 128 -e 4096 -f 4 -n 10 -w 2 --routing uniform
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

# ------------------------------------------------------------------ summary of every figure
say "figures (every JSON under $OUT):"
python3 - "$OUT" << 'PY' | tee -a "$OUT/summary.txt"
import glob, json, os, sys
out = sys.argv[1]
for f in sorted(glob.glob(os.path.join(out, "json", "*.json")) + glob.glob(os.path.join(out, "*.json"))):
    try:
        d = json.load(open(f))
    except Exception as e:
        print(f"  {os.path.basename(f)}: unreadable ({e})")
        continue
    rows = d.get("results", [])
    name = os.path.basename(f)[:-5]
    bw = [r for r in rows if "bw_gbit_s" in r]
    coll = [r for r in rows if "collective" in r]
    lat = [r for r in rows if "latency_us" in r and "bw_gbit_s" not in r and "collective" not in r]
    if bw:
        top = max(bw, key=lambda r: r["size_bytes"])
        best = max(r["bw_gbit_s"]["avg"] for r in bw)
        print(f"  {name:24} {top['test']:8} {top['size_bytes']:>11} B  {top['bw_gbit_s']['avg']/8:10.2f} GB/s"
              f"  (best {best/8:.2f} GB/s over {len(bw)} size(s))")
    for r in lat:
        l = r["latency_us"]
        print(f"  {name:24} {r.get('test','lat'):8} {r['size_bytes']:>11} B  p50 {l.get('p50', 0):.2f} us  p99 {l.get('p99', 0):.2f} us")
    if coll:
        by = {}
        for r in coll:
            if r["size_bytes"] >= by.get(r["collective"], {"size_bytes": -1})["size_bytes"]:
                by[r["collective"]] = r
        wrong = sum(r["out_of_place"]["wrong"] + r["in_place"]["wrong"] for r in coll)
        unchecked = sorted({r["collective"] for r in coll if r["in_place"].get("unchecked_reason")})
        for c, r in by.items():
            print(f"  {name:24} {c:14} {r['datatype']:10} {r['size_bytes']:>11} B  busbw {r['out_of_place']['busbw_gbyte_s']:8.2f} GB/s"
                  f"  time {r['out_of_place']['time_us']:10.1f} us")
        print(f"  {name:24} {len(coll)} rows, {wrong} wrong" + (f", in place not checked (undefined in NCCL): {', '.join(unchecked)}" if unchecked else ""))
PY
say "elapsed $(elapsed)"
if [[ $FAILED -ne 0 ]]; then
    say "RESULT: FAILED"
    exit 1
fi
say "RESULT: ok"
