#!/bin/bash
# The verbs tests of bench-lat and bench-bw, run for real on Soft-RoCE inside the VM:
#   tests/softroce/vm.sh one tests/softroce/verbs-suite.sh [FILTER]
#   tests/softroce/vm.sh two tests/softroce/verbs-suite.sh [FILTER]
# (run-all.sh runs both shapes). One VM: server and client share rxe0. Two VMs: VM a runs
# the servers, VM b the clients, over a real (emulated) wire.
#
# Covered: the six tests (send/write/read x lat/bw) standalone, bidirectional bandwidth,
# all sizes (-a) over one connection per pair (re-armed between sizes), duration mode (-D), --check, several QPs (-q), completion events (-e), perftest's -l and -Q,
# perftest's BW peak (and -N), MTU choice (-m), mpirun -np 2 (one VM), the JSON fields and the device counters, and the
# error cases (wrong device, bad GID index, missing port, bad MTU, -R, memlock too low),
# and the GPU memory paths Soft-RoCE can run: dma-buf registration refused by rxe (host
# memory exported through vgem: the diagnostic GPU memory would get), GPU buffers without
# a CUDA driver, write latency with GPU buffers, and the verbs_errors integration test on
# a host that has an RDMA device (its real-device branch).
# Under load (one VM): the incast over RDMA WRITE and sends, bench-congestion's canaries and
# four congestor patterns over verbs, with rxe's counters moving.
# Sweeps (one VM): all-pairs over verbs at an odd rank count with the port inventory in the
# document, and the port taken down in the middle of a sweep (failed pairs recorded with
# the port state, the sweep finishing its rounds). Two VMs: 5% netem loss on the wire
# raises the retransmission counters, and `aggregate` fails the link-loss check naming the
# link, and an incast over verbs under one mpirun across both VMs (ssh-launched), each
# round's receiver and senders with their rxe counters moving.
# Each case runs in one shape (CI runs both, one after the other): over the wire what the
# wire can change (the six tests, bidirectional, per-QP flows, --check, the shared budget,
# the lossy link, the incast across VMs); in the one VM the tools' own behaviour (perftest's
# flags, -D, -e, -m, -a), MPI, sweeps, load and the error cases. The driver counters run in
# both (each shape has its own answer), fabric-doctor too.
# FILTER (a regex) runs only the cases whose name matches. Exit status 1 if any case failed.
set -uo pipefail

: "${SOFTROCE_DEV:?run me through tests/softroce/vm.sh}"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -n ${FABCHECK_BIN:-} ]]; then
    BIN=$FABCHECK_BIN
elif [[ -x $REPO/target/release/bench-lat ]]; then
    BIN=$REPO/target/release
else
    BIN=$REPO/target/debug
fi
# FABCHECK_BIN reaches the guest only through SOFTROCE_ENV=FABCHECK_BIN; without it the
# release build runs, so say so when the sources changed after it was built (a check of a
# change on stale binaries proves nothing).
newer=$(find "$REPO" -path "$REPO/target" -prune -o -name '*.rs' -newer "$BIN/bench-bw" -print -quit 2> /dev/null)
if [[ -n $newer ]]; then
    echo "WARNING: $BIN is older than the sources ($newer changed since); rebuild it, or pass SOFTROCE_ENV=FABCHECK_BIN FABCHECK_BIN=..." >&2
fi
FILTER=${1:-.}
DEV=$SOFTROCE_DEV
ROLE=${SOFTROCE_ROLE:-both}
OUT=${SOFTROCE_OUT:-/tmp/verbs-suite}
LOGS=$OUT/logs
mkdir -p "$LOGS"
SERVER_IP=$SOFTROCE_IP
[[ $ROLE == client ]] && SERVER_IP=$SOFTROCE_PEER_IP
RUN_TIMEOUT=${VERBS_RUN_TIMEOUT:-150}
PORT=19100
PASSED=0
FAILED=0
FAILS=()
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

say() { printf '[%4ss] %s\n' "$SECONDS" "$*"; }
pass() {
    PASSED=$((PASSED + 1))
    say "PASS $1"
}
fail() {
    FAILED=$((FAILED + 1))
    FAILS+=("$1")
    say "FAIL $1: $2"
}
selected() { [[ $1 =~ $FILTER ]]; }
# wire: a case the two-VM shape runs (over the emulated wire); local_only: one the one-VM
# shape runs (server and client on one device).
wire() { [[ $SOFTROCE_SHAPE == two ]]; }
local_only() { [[ $SOFTROCE_SHAPE == one ]]; }

# check_json FILE TEST [EXPR]: checks a client's JSON document (tests/softroce/check_doc.py
# says what: every result is TEST over verbs, complete, with both sides' counters, and the
# python EXPR holds over each result `r` and the document `d`). Sets WHY to the reason when
# it fails. One python serves every check of the suite (a coprocess started at the first
# one): a python start-up per check cost 1-2.5 s under TCG. Never called in a $(...): the
# coprocess's pipes do not reach subshells.
check_json() {
    local file=$1 test=$2 expr=${3:-True} answer=
    WHY=
    if [[ -z ${CHECKER_PID:-} ]] || ! kill -0 "$CHECKER_PID" 2> /dev/null; then
        coproc CHECKER { exec python3 "$REPO/tests/softroce/check_doc.py" --serve; }
    fi
    if ! printf '%s\t%s\t%s\n' "$file" "$test" "$expr" >&"${CHECKER[1]}" \
        || ! read -r -t 120 answer <&"${CHECKER[0]}"; then
        WHY="the JSON checker (check_doc.py --serve) did not answer"
        [[ -n ${CHECKER_PID:-} ]] && kill "$CHECKER_PID" 2> /dev/null
        return 1
    fi
    [[ $answer == ok ]] && return 0
    WHY=${answer#fail }
    return 1
}

# pair NAME TOOL CHECK_TEST CHECK_EXPR ARGS...: one test, server and client per the role.
# The client writes $OUT/NAME.json, which is checked with check_json.
pair() {
    local name=$1 tool=$2 test=$3 expr=$4
    shift 4
    PORT=$((PORT + 1))
    selected "$name" || return 0
    local args=(--transport verbs -d "$DEV" -p "$PORT" --timeout 60 "$@")
    local slog=$LOGS/$name.server.log clog=$LOGS/$name.client.log json=$OUT/$name.json
    local src=0 crc=0
    say "run  $name: $tool ${args[*]}"
    [[ $ROLE == client && -n ${CLIENT_PRE:-} ]] && eval "$CLIENT_PRE"
    case $ROLE in
    both)
        timeout "$RUN_TIMEOUT" "$BIN/$tool" "${args[@]}" > "$slog" 2>&1 &
        local spid=$!
        timeout "$RUN_TIMEOUT" "$BIN/$tool" "${args[@]}" --json "$json" "$SERVER_IP" > "$clog" 2>&1
        crc=$?
        wait "$spid"
        src=$?
        ;;
    server)
        timeout "$RUN_TIMEOUT" "$BIN/$tool" "${args[@]}" > "$slog" 2>&1
        src=$?
        ;;
    client)
        timeout "$RUN_TIMEOUT" "$BIN/$tool" "${args[@]}" --json "$json" "$SERVER_IP" > "$clog" 2>&1
        crc=$?
        [[ -n ${CLIENT_POST:-} ]] && eval "$CLIENT_POST"
        ;;
    esac
    if ((src != 0 || crc != 0)); then
        [[ -f $slog ]] && sed 's/^/    server| /' "$slog" | tail -n 15
        [[ -f $clog ]] && sed 's/^/    client| /' "$clog" | tail -n 15
        fail "$name" "exit status server $src, client $crc"
        return 0
    fi
    [[ -f $clog ]] && sed 's/^/    /' "$clog" | grep -v '^    -*$' | tail -n 6
    if [[ $ROLE != server ]]; then
        if ! check_json "$json" "$test" "$expr"; then
            fail "$name" "JSON check: $WHY"
            return 0
        fi
    fi
    pass "$name"
}

# mpi NAME TOOL TEST EXPR ARGS...: the same under mpirun -np 2 (one VM: both ranks here).
mpi() {
    local name=$1 tool=$2 test=$3 expr=$4
    shift 4
    selected "$name" || return 0
    local log=$LOGS/$name.log json=$OUT/$name.json
    say "run  $name: mpirun -np 2 $tool $*"
    if ! timeout "$RUN_TIMEOUT" mpirun -np 2 --oversubscribe --bind-to none \
        "$BIN/$tool" --transport verbs -d "$DEV" --timeout 60 --json "$json" "$@" > "$log" 2>&1; then
        sed 's/^/    | /' "$log" | tail -n 20
        fail "$name" "mpirun exit status non-zero"
        return 0
    fi
    # The launcher and rank count are the document's: checked with the rest.
    if ! check_json "$json" "$test" "d[\"launcher\"] == \"mpi\" and d[\"ranks\"] == 2 and ($expr)"; then
        fail "$name" "JSON check: $WHY"
        return 0
    fi
    pass "$name"
}

# refuse NAME WANT_RC PATTERN CMD...: CMD must fail with WANT_RC and say PATTERN (an ERE).
refuse() {
    local name=$1 want=$2 pattern=$3
    shift 3
    selected "$name" || return 0
    local out rc
    out=$(timeout 60 "$@" 2>&1)
    rc=$?
    echo "$out" | sed 's/^/    | /' | tail -n 4
    if ((rc != want)); then
        fail "$name" "exit status $rc, want $want"
    elif ! grep -Eq "$pattern" <<< "$out"; then
        fail "$name" "message does not match /$pattern/"
    elif grep -q "panicked" <<< "$out"; then
        fail "$name" "panicked"
    else
        pass "$name"
    fi
}

LAT=(-s 64 -n 200 --warmup 20)
BW=(-s 65536 -n 200)

run_pairs() {
    say "binaries: $BIN; device $DEV; role $ROLE; shape $SOFTROCE_SHAPE"
    # Each case runs in one shape: what the wire can change (the six tests, bidirectional
    # and per-QP flows, the data checked across it, the shared budget whose hang showed
    # across the two VMs) over the wire; what is the tool's own behaviour (perftest's
    # flags, duration mode, events, MTU choice) in the one VM, where a case takes half
    # the time. The driver counters run in both: each shape has its own answer.
    # The six tests.
    wire && pair send_lat bench-lat send_lat 'r["latency_us"]["p50"] > 0' --test send "${LAT[@]}"
    wire && pair write_lat bench-lat write_lat 'r["latency_us"]["p50"] > 0' --test write "${LAT[@]}"
    wire && pair read_lat bench-lat read_lat 'r["latency_us"]["p50"] > 0' --test read "${LAT[@]}"
    wire && pair send_bw bench-bw send_bw 'r["bw_gbit_s"]["avg"] > 0 and perftest_peak(r)' --test send "${BW[@]}"
    # 64 KiB is above perftest's 8 KiB limit: every request signaled (cq_mod 1).
    wire && pair write_bw bench-bw write_bw 'r["bw_gbit_s"]["avg"] > 0 and r["cq_mod"] == 1 and r["post_list"] == 1 and perftest_peak(r)' --test write "${BW[@]}"
    wire && pair read_bw bench-bw read_bw 'r["bw_gbit_s"]["avg"] > 0 and perftest_peak(r)' --test read "${BW[@]}"
    # perftest's -N: no stamps, no perftest peak.
    local_only && pair write_bw_no_peak bench-bw write_bw '"perftest_peak" not in r["bw_gbit_s"]' --test write -N "${BW[@]}"
    # Bidirectional, several QPs, --check. perftest -b adds the two sides' peaks.
    wire && pair send_bw_bidir bench-bw send_bw 'r["bidirectional"] and r["bw_gbit_s"]["avg"] > 0 and perftest_peak(r, False)' --test send -b "${BW[@]}"
    wire && pair write_bw_bidir bench-bw write_bw 'r["bidirectional"] and r["bw_gbit_s"]["avg"] > 0 and perftest_peak(r, False)' --test write -b "${BW[@]}"
    # -n counts per QP, as perftest's: 2 QPs x 200 = 400 messages.
    wire && pair write_bw_check bench-bw write_bw 'r.get("check_wrong_bytes") == 0 and r["streams"] == 2 and r["iterations"] == 400' --test write --check -q 2 "${BW[@]}"
    local_only && pair read_bw_check bench-bw read_bw 'r.get("check_wrong_bytes") == 0 and r["streams"] == 2' --test read --check -q 2 "${BW[@]}"
    # Per-QP flows both ways (what tells an ECMP path from a NIC): 2 QPs a side, each flow
    # with its sender, its QP number and the GRH flow label its packets carried (distinct
    # per QP), each moving data.
    wire && pair write_bw_flows bench-bw write_bw 'len(r["flows"]) == 4 and len({f["flow_label"] for f in r["flows"]}) == 2 and all(f.get("flow_label") is not None and f.get("qp_num") and f.get("from") and f["bw_gbit_s"] > 0 for f in r["flows"])' --test write -b -q 2 -s 4096 -n 200
    # The QPs share the budget: here QP 0 fills its 256-deep queue in the first step and
    # QP 1 takes the rest, so QP 0 ends on 56 unsignaled requests (moderation 100) that
    # only a fence can report. Before the fence this hung every time (the loop waiting for
    # QP 0's completion 256); across the two VMs it was the flows case's intermittent hang.
    wire && pair write_bw_shared_budget bench-bw write_bw 'r["iterations"] == 1024 and r["cq_mod"] == 100' --test write -b -q 2 -t 256 -s 64 -n 256
    # The driver's counters (ethtool -S of rxe's netdev) around each run: virtio-net counts
    # the RoCE bytes it carried (two VMs); a dummy netdev keeps no statistics, and each
    # side says so (one VM).
    local driver=driver_unknown
    [[ $SOFTROCE_SHAPE == two ]] && driver=driver_moved
    pair write_bw_driver_counters bench-bw write_bw "$driver(r)" --test write "${BW[@]}"
    wire && pair read_bw_bidir_check bench-bw read_bw 'r["bidirectional"] and r.get("check_wrong_bytes") == 0' --test read -b --check -s 4096 -n 200
    # All sizes (2 B .. 8 MiB: about 2 minutes across the emulated wire, so only in the
    # one-VM shape), duration mode.
    if [[ $SOFTROCE_SHAPE == one ]]; then
        pair write_lat_all bench-lat write_lat 'len(d["results"]) == 23 and one_connection(d)' --test write -a -n 2 --warmup 0
        pair write_bw_all bench-bw write_bw 'len(d["results"]) == 23 and one_connection(d)' --test write -a -n 6 -t 2
        pair send_lat_all bench-lat send_lat 'len(d["results"]) == 23 and one_connection(d)' --test send -a -n 2 --warmup 0
        pair read_lat_all bench-lat read_lat 'len(d["results"]) == 23 and one_connection(d)' --test read -a -n 2 --warmup 0
        pair send_bw_all_events bench-bw send_bw 'len(d["results"]) == 23 and one_connection(d)' --test send -a -n 6 -t 2 -q 2 -e
        pair send_bw_all_bidir bench-bw send_bw 'r["bidirectional"] and one_connection(d)' --test send -b -a -n 6 -t 2
        # Every size over one connection, each size checked byte by byte (the source
        # pattern and the zeroed destination are redone for each size), two QPs, a
        # passive responder.
        pair read_bw_all_check bench-bw read_bw 'r.get("check_wrong_bytes") == 0 and one_connection(d)' --test read -a --check -q 2 -n 4 -t 2
    else
        # Across the emulated wire the 2-8 MiB sizes alone take about a minute.
        say "note: -a over 2 B .. 8 MiB runs in the one-VM shape only, to keep CI short"
    fi
    local_only && pair send_lat_duration bench-lat send_lat 'd["options"]["duration_s"] == 1.0 and r["duration_s"] >= 0.9' --test send -s 8 -D 1
    local_only && pair send_bw_duration bench-bw send_bw 'r["duration_s"] >= 1.4 and "perftest_peak" not in r["bw_gbit_s"]' --test send -s 16384 -D 1.5
    local_only && pair read_lat_duration bench-lat read_lat 'r["duration_s"] >= 0.9' --test read -s 8 -D 1
    # Completion events, small messages inline, path MTU, tx depth.
    local_only && pair send_lat_events bench-lat send_lat 'd["options"]["events"] is True' --test send -e "${LAT[@]}"
    local_only && pair send_bw_events bench-bw send_bw 'd["options"]["events"] is True' --test send -e "${BW[@]}"
    # perftest's moderation of 100, held to the queue depth of 64.
    local_only && pair write_bw_small bench-bw write_bw 'r["msg_rate_mpps"] > 0 and r["iterations"] == 2000 and r["cq_mod"] == 64' --test write -s 8 -n 1000 -t 64 -q 2
    # perftest's -l (post list: chains of 8 requests per ibv_post_send, each chain ending
    # signaled, so the moderation follows the list) with -n not a multiple of it (the
    # budget's last chain is shorter): 2 QPs x 1001; -Q alone on sends; both on reads.
    local_only && pair write_bw_post_list bench-bw write_bw 'r["post_list"] == 8 and r["cq_mod"] == 8 and r["iterations"] == 2002 and d["options"]["post_list"] == 8 and perftest_peak(r)' --test write -s 64 -n 1001 -l 8 -q 2
    local_only && pair send_bw_cq_mod bench-bw send_bw 'r["cq_mod"] == 10 and r["post_list"] == 1 and r["iterations"] == 200 and d["options"]["cq_mod"] == 10' --test send -Q 10 "${BW[@]}"
    local_only && pair read_bw_post_list bench-bw read_bw 'r["post_list"] == 4 and r["cq_mod"] == 2 and r["iterations"] == 500' --test read -s 4096 -n 500 -l 4 -Q 2 -t 16
    local_only && pair send_lat_mtu1024 bench-lat send_lat 'd["options"]["mtu"] == 1024' --test send -m 1024 -s 4096 -n 100
}

run_mpi() {
    mpi mpi_send_lat bench-lat send_lat 'True' --test send -s 64 -n 200
    mpi mpi_write_lat bench-lat write_lat 'True' --test write -s 64 -n 200
    mpi mpi_read_lat bench-lat read_lat 'True' --test read -s 64 -n 200
    mpi mpi_send_bw bench-bw send_bw 'True' --test send -s 65536 -n 300
    mpi mpi_write_bw bench-bw write_bw 'True' --test write -s 65536 -n 300
    mpi mpi_read_bw bench-bw read_bw 'r.get("check_wrong_bytes") == 0' --test read --check -s 65536 -n 300
}

# The sweeps, one VM (every rank a node with --include-local; all share rxe0).
run_sweeps() {
    if selected sweep_all_pairs; then
        local json=$OUT/sweep_all_pairs.json log=$LOGS/sweep_all_pairs.log
        say "run  sweep_all_pairs: mpirun -np 3 bench-lat --pattern all-pairs --include-local"
        if ! timeout "$RUN_TIMEOUT" mpirun -np 3 --oversubscribe --bind-to none "$BIN/bench-lat" \
            --transport verbs -d "$DEV" --test write -s 64 -n 200 --pattern all-pairs --include-local \
            --timeout 60 --json "$json" > "$log" 2>&1; then
            sed 's/^/    | /' "$log" | tail -n 20
            fail sweep_all_pairs "mpirun exit status non-zero"
        elif why=$(python3 - "$json" "$DEV" << 'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1])); dev = sys.argv[2]
s = d["sweep"]
assert s["pattern"] == "all-pairs" and s["rounds"] == 3 and s["rounds_done"] == 3, s
met = sorted(tuple(sorted((r["pair"]["initiator"]["rank"], r["pair"]["responder"]["rank"]))) for r in d["results"])
assert met == [(0, 1), (0, 2), (1, 2)], met
for r in d["results"]:
    for side in ("initiator", "responder"):
        assert r["pair"][side]["device"] == dev and r["pair"][side]["port"] == 1, r["pair"]
assert all(h.get("device") == dev for h in d["hosts"]), [h.get("device") for h in d["hosts"]]
p = d["hosts"][0]["rdma_devices"][0]["ports"][0]
for k in ("state", "phys_state", "rate", "link_layer", "netdev", "netdev_mtu"):
    assert p.get(k), "inventory %s missing: %s" % (k, p)
PY
        ); then
            pass sweep_all_pairs
        else
            fail sweep_all_pairs "JSON check: $(tail -n 1 <<< "$why")"
        fi
    fi
    if selected sweep_port_down; then
        local json=$OUT/sweep_port_down.json log=$LOGS/sweep_port_down.log
        say "run  sweep_port_down: all-pairs over 4 ranks, $SOFTROCE_NETDEV taken down after round 0"
        rm -f "$json"
        # Rounds of 2 s; the fault goes in as soon as rank 0 reports round 0 done. The
        # progress line is watched with grep, not the checkpoint with python: a python
        # start-up under TCG can take longer than a round, and the fault then came after
        # the sweep had ended.
        timeout "$RUN_TIMEOUT" mpirun -np 4 --oversubscribe --bind-to none "$BIN/bench-bw" \
            --transport verbs -d "$DEV" --test write -s 65536 -D 2 --pattern all-pairs --include-local \
            --timeout 10 --json "$json" > "$log" 2>&1 &
        local mpid=$! i
        for ((i = 0; i < 3000; i++)); do
            grep -q "round 0 done" "$log" 2> /dev/null && break
            sleep 0.05
        done
        ip link set "$SOFTROCE_NETDEV" down
        say "     $SOFTROCE_NETDEV down after: $(grep -o 'round [0-9]* done' "$log" | tail -n 1); port: $(cat /sys/class/infiniband/$DEV/ports/1/state)"
        wait "$mpid"
        local rc=$?
        ip link set "$SOFTROCE_NETDEV" up
        for ((i = 0; i < 100; i++)); do grep -q ACTIVE "/sys/class/infiniband/$DEV/ports/1/state" && break; sleep 0.1; done
        sed 's/^/    | /' "$log" | grep -E "FAILED|failed|sweep done" | head -n 8
        if ((rc != 1)); then
            sed 's/^/    | /' "$log" | tail -n 20
            fail sweep_port_down "exit status $rc, want 1 (pairs failed, sweep finished)"
        elif why=$(python3 - "$json" << 'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
s = d["sweep"]
assert d["complete"] and s["rounds_done"] == s["rounds"] == 3, s
f = d.get("failed_pairs", [])
assert f, "no failed pair recorded"
states = " ".join(str(x.get(k)) for x in f for k in ("initiator_port_state", "responder_port_state"))
assert "DOWN" in states, "port state not recorded as DOWN: " + states
assert all(x.get("initiator_error") or x.get("responder_error") for x in f), f
assert any(r["pair"]["round"] == 0 for r in d["results"]), "round 0 measured before the fault"
PY
        ); then
            pass sweep_port_down
        else
            fail sweep_port_down "JSON check: $(tail -n 1 <<< "$why")"
        fi
    fi
}

# judge NAME RC WHAT LOG JSON CHECK: the verdict on a run: WHAT's exit status RC (the log's
# tail when it failed), then the python CHECK on JSON (argv[1]; argv[2] the device).
judge() {
    local name=$1 rc=$2 what=$3 log=$4 json=$5 check=$6
    if ((rc != 0)); then
        sed 's/^/    | /' "$log" | tail -n 20
        fail "$name" "$what exit status $rc"
        return 0
    fi
    sed 's/^/    | /' "$log" | grep -vE '^    \| *$' | tail -n 8
    local why
    if ! why=$(python3 -c "$check" "$json" "$DEV" 2>&1); then
        fail "$name" "JSON check: $(tail -n 1 <<< "$why")"
        return 0
    fi
    pass "$name"
}

# load NAME RANKS TOOL ARGS... -- CHECK: a many-to-one run under mpirun in this VM (every
# rank shares rxe0, whose counters see all of them), its JSON checked by the python CHECK.
load() {
    local name=$1 np=$2 tool=$3
    shift 3
    local args=()
    while [[ $1 != -- ]]; do
        args+=("$1")
        shift
    done
    local check=$2
    selected "$name" || return 0
    local log=$LOGS/$name.log json=$OUT/$name.json
    say "run  $name: mpirun -np $np $tool ${args[*]}"
    local rc=0
    timeout "$RUN_TIMEOUT" mpirun -np "$np" --oversubscribe --bind-to none "$BIN/$tool" \
        --transport verbs -d "$DEV" --bind-addr "$SOFTROCE_IP" --timeout 60 --json "$json" \
        "${args[@]}" > "$log" 2>&1 || rc=$?
    judge "$name" "$rc" mpirun "$log" "$json" "$check"
}

# Under load, over verbs (one VM): bench-bw's incast with RDMA WRITE and with sends (each
# sender's figure from its completions, the victim ping-ponging sends and writing 128 KiB
# one at a time), and bench-congestion's canaries and GPCNeT's four congestors (sends,
# RDMA WRITE puts, RDMA READ gets). rxe's hw_counters move in every loaded window.
run_load() {
    load incast_write 5 bench-bw --pattern incast:2 --test write -D 1 -- '
import json, sys
d = json.load(open(sys.argv[1])); i = d["congestion"]["incast"]
assert (i["transport"], i["op"], i["counted_at"]) == ("verbs", "write", "sender completions"), i
assert d["options"]["transport"] == "verbs" and d["options"]["test"] == "write", d["options"]
assert len(i["rounds"]) == 5, len(i["rounds"])
for r in i["rounds"]:
    assert len(r["senders"]) == 2 and all(x > 0 for x in r["sender_gbit_s"]), r
    assert abs(r["aggregate_gbit_s"] - sum(r["sender_gbit_s"])) < 1e-9, r
    v = r["victim"]
    for w in ("alone", "loaded"):
        assert v[w]["latency"]["samples"] > 0 and v[w]["bandwidth"]["mean"] > 0, v
    moved = [c for c in r["counters"] for p in c["ports"] for k, x in p.get("hw_counters", {}).items() if k in ("rcvd_pkts", "sent_pkts") and x > 0]
    assert moved, "rxe counters did not move in the loaded window: %s" % r["counters"]
'
    load incast_send 4 bench-bw --pattern incast:3 --test send -D 1 -- '
import json, sys
d = json.load(open(sys.argv[1])); i = d["congestion"]["incast"]
assert (i["transport"], i["op"]) == ("verbs", "send"), i
assert "no victim" in i["no_victim"], i
for r in i["rounds"]:
    assert len(r["senders"]) == 3 and all(x > 0 for x in r["sender_gbit_s"]), r
    assert 1 / 3 - 1e-9 <= r["jain_fairness"] <= 1 + 1e-9, r
'
    load congestion_verbs 10 bench-congestion --include-local --phase-seconds 0.5 --seed 3 -- '
import json, sys
d = json.load(open(sys.argv[1])); c = d["congestion"]
assert c["transport"] == "verbs" and d["options"]["transport"] == "verbs", c["transport"]
got = {g["pattern"]: (g["op"], g["counted_at"], g["bytes"]) for g in c["congestor_throughput"]}
want = {"alltoall": "send", "incast": "send", "put_incast": "write", "get_bcast": "read"}
assert set(got) == set(want), got
for p, op in want.items():
    assert got[p][0] == op and got[p][1] == "initiator completions" and got[p][2] > 0, (p, got[p])
assert not any("one-sided" in w for w in d.get("warnings", [])), d.get("warnings")
for t in c["canary_tests"]:
    assert t["isolated"]["samples"] > 0 and t["loaded"]["samples"] > 0, t
moved = [k for p in c["counters_loaded"] for k, x in p.get("hw_counters", {}).items() if k in ("rcvd_pkts", "sent_pkts") and x > 0]
assert moved, "rxe counters did not move while loaded: %s" % c["counters_loaded"]
'
    congestion_agents
}

# bench-congestion over ten bench-bw agents on rxe0, no MPI: the agents' verbs flows carry
# the two canaries and the four congestor groups (puts as RDMA WRITE, gets as RDMA READ);
# the allreduce canary, MPI's, is listed as not run.
congestion_agents() {
    local name=congestion_agents_verbs
    selected "$name" || return 0
    local log=$LOGS/$name.log json=$OUT/$name.json hosts=$OUT/$name.hosts pids=() p
    : > "$hosts"
    for p in $(seq 18601 18610); do
        FABCHECK_SECRET=softroce-agents "$BIN/bench-bw" --serve -p "$p" --transport verbs -d "$DEV" \
            --bind-addr "$SOFTROCE_IP" --timeout 30 > "$LOGS/$name.agent$p.log" 2>&1 &
        pids+=($!)
        echo "$SOFTROCE_IP:$p" >> "$hosts"
    done
    say "run  $name: bench-congestion --hosts (10 bench-bw agents over verbs)"
    # Each agent opens its device before it listens: wait for every port (a busy VM took
    # over a second), up to 30 s; one that never listens fails the run, named.
    local end=$((SECONDS + 30))
    for p in $(seq 18601 18610); do
        until [[ -n $(ss -Hltn "sport = :$p") ]] || ((SECONDS >= end)); do sleep 0.2; done
    done
    local rc=0
    FABCHECK_SECRET=softroce-agents timeout "$RUN_TIMEOUT" "$BIN/bench-congestion" --hosts "$hosts" \
        --include-local --phase-seconds 0.5 --seed 3 --timeout 30 --json "$json" > "$log" 2>&1 || rc=$?
    kill "${pids[@]}" 2> /dev/null
    wait "${pids[@]}" 2> /dev/null
    judge "$name" "$rc" "bench-congestion --hosts" "$log" "$json" '
import json, sys
d = json.load(open(sys.argv[1])); c = d["congestion"]
assert d["launcher"] == "agents" and d["ranks"] == 10, (d["launcher"], d["ranks"])
assert c["transport"] == "verbs", c["transport"]
got = {g["pattern"]: (g["op"], g["bytes"]) for g in c["congestor_throughput"]}
assert set(got) == {"alltoall", "incast", "put_incast", "get_bcast"}, got
for p, (op, n) in got.items():
    assert op == {"put_incast": "write", "get_bcast": "read"}.get(p, "send") and n > 0, (p, got[p])
assert [t["test"] for t in c["canary_tests"]] == ["ring_latency_8b", "ring_bandwidth_128kib"], c["canary_tests"]
for t in c["canary_tests"]:
    assert t["isolated"]["samples"] > 0 and t["loaded"]["samples"] > 0, t
assert [s["test"] for s in c["skipped_tests"]] == ["allreduce_8b"], c.get("skipped_tests")
'
}

# Two VMs: an incast over verbs under one mpirun across both (ranks 0-1 in VM b, 2-3 in VM
# a; OpenMPI's daemon in a is started over ssh, see guest.sh), so every round has a sender
# on the other side of the wire and both VMs' rxe counters move for real. The server VM
# keeps its sshd up until the client says its mpirun has ended (a TCP word on DONE_PORT).
DONE_PORT=19998
run_two_hosts() {
    local name=incast_two_hosts
    selected "$name" || return 0
    if [[ $ROLE == server ]]; then
        say "wait $name: until the client's mpirun across both VMs ends"
        if python3 - "$DONE_PORT" "$RUN_TIMEOUT" << 'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(1)
s.settimeout(float(sys.argv[2]))
c, _ = s.accept()
c.recv(16)
PY
        then
            pass "$name (server: stayed up for it)"
        else
            fail "$name" "the client never said its mpirun ended"
        fi
        return 0
    fi
    local log=$LOGS/$name.log json=$OUT/$name.json rc
    say "run  $name: mpirun -np 4 --host softroce-b:2,softroce-a:2 bench-bw --pattern incast:2 --test write"
    timeout "$RUN_TIMEOUT" mpirun -np 4 --host softroce-b:2,softroce-a:2 --bind-to none \
        --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
        "$BIN/bench-bw" --pattern incast:2 --transport verbs -d "$DEV" --test write -D 1 \
        --timeout 60 --json "$json" > "$log" 2>&1
    rc=$?
    python3 - "$SERVER_IP" "$DONE_PORT" << 'PY' || say "could not tell the server VM (it waits out its timeout)"
import socket, sys, time
for _ in range(50):
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).sendall(b"done")
        break
    except OSError:
        time.sleep(0.2)
else:
    sys.exit(1)
PY
    judge "$name" "$rc" mpirun "$log" "$json" '
import json, sys
d = json.load(open(sys.argv[1]))
hosts = sorted({h["hostname"] for h in d["hosts"]})
assert hosts == ["softroce-a", "softroce-b"], hosts
i = d["congestion"]["incast"]
assert (i["transport"], i["op"]) == ("verbs", "write"), i
assert len(i["rounds"]) == 4, len(i["rounds"])
for r in i["rounds"]:
    assert len(r["senders"]) == 2 and all(x > 0 for x in r["sender_gbit_s"]), r
    host = lambda n: n.split("#")[0]
    assert {host(s) for s in r["senders"] + [r["receiver"]]} == set(hosts), r
    moved = {}
    for c in r["counters"]:
        for p in c["ports"]:
            for k in ("rcvd_pkts", "sent_pkts"):
                moved[(c["role"], host(c["node"]), k)] = max(moved.get((c["role"], host(c["node"]), k), 0), p["hw_counters"].get(k, 0))
    assert moved.get(("receiver", host(r["receiver"]), "rcvd_pkts"), 0) > 0, ("the receiver rxe received nothing", r["receiver"], moved)
    for s in r["senders"]:
        assert moved.get(("sender", host(s), "sent_pkts"), 0) > 0, ("a sender rxe sent nothing", s, moved)
'
}

# Two VMs: 5% loss on the wire (netem on the client VM's eth0). The transfer still
# completes (RC retransmits); the counters show it and aggregate's link-loss check fails.
run_lossy_link() {
    CLIENT_PRE='tc qdisc add dev eth0 root netem loss 5%' \
    CLIENT_POST='tc qdisc del dev eth0 root' \
        pair lossy_write_bw bench-bw write_bw 'r["bw_gbit_s"]["avg"] > 0' --test write -s 65536 -n 300
    [[ $ROLE == client ]] && selected lossy_write_bw || return 0
    local json=$OUT/lossy_write_bw.json report=$OUT/lossy-report profile=$OUT/link-loss.toml
    cat > "$profile" << 'TOML'
name = "link-loss-only"
description = "Soft-RoCE test: only the link-loss check"
[[check]]
id = "link-loss"
description = "Retransmitted or erroneous packets under 0.01% of packets sent"
metric = "link_loss"
unit = "%"
max = 0.01
transport = "verbs"
TOML
    "$BIN/aggregate" report "$json" --profile "$profile" --out "$report" --force > "$LOGS/lossy-aggregate.log" 2>&1
    local rc=$?
    if ((rc != 1)); then
        sed 's/^/    | /' "$LOGS/lossy-aggregate.log" | tail -n 10
        fail lossy_link_named "aggregate exit $rc, want 1 (link-loss FAIL)"
    elif ! grep -q "link-loss" "$report/report.md" || ! grep -q "FAIL" "$report/report.md" \
        || ! grep -q "softroce-b" "$report/report.md"; then
        fail lossy_link_named "report.md does not show link-loss FAIL naming the link"
    else
        grep -E "link-loss|softroce" "$report/report.md" | head -n 4 | sed 's/^/    | /'
        pass lossy_link_named
    fi
}

# What -l changes on the wire to the adapter: one doorbell per chain. rxe's provider rings
# its doorbell with a write(2) to the uverbs device for each ibv_post_send, so the client's
# write calls under strace count the posts: 4000 messages one at a time are ~4000 writes,
# in chains of 8 ~500 (plus the few of the control exchange). One VM, both sides here.
run_post_list_doorbells() {
    selected post_list_doorbells || return 0
    if ! command -v strace > /dev/null; then
        fail post_list_doorbells "strace is not installed (scripts/lib/deps.sh installs it)"
        return 0
    fi
    local l writes=() port
    for l in 1 8; do
        PORT=$((PORT + 1))
        port=$PORT
        local args=(--transport verbs -d "$DEV" -p "$port" --timeout 60 --test write -s 64 -n 4000 -l "$l")
        timeout "$RUN_TIMEOUT" "$BIN/bench-bw" "${args[@]}" > "$LOGS/doorbells-$l.server.log" 2>&1 &
        local spid=$!
        if ! timeout "$RUN_TIMEOUT" strace -f -c -e trace=write -o "$LOGS/doorbells-$l.strace" \
            "$BIN/bench-bw" "${args[@]}" 127.0.0.1 > "$LOGS/doorbells-$l.client.log" 2>&1; then
            wait "$spid"
            sed 's/^/    | /' "$LOGS/doorbells-$l.client.log" | tail -n 10
            fail post_list_doorbells "client with -l $l failed"
            return 0
        fi
        wait "$spid"
        writes+=("$(awk '$NF == "write" { print $4 }' "$LOGS/doorbells-$l.strace")")
    done
    say "write(2) calls of the client: -l 1: ${writes[0]:-?}, -l 8: ${writes[1]:-?}"
    if [[ -z ${writes[0]} || -z ${writes[1]} ]]; then
        fail post_list_doorbells "no write count in the strace summary"
    elif ((writes[0] < 4000 || writes[1] * 4 > writes[0])); then
        fail post_list_doorbells "want >= 4000 posts one at a time and under a quarter of that in chains of 8"
    else
        pass post_list_doorbells
    fi
}

run_errors() {
    local lat=$BIN/bench-lat bw=$BIN/bench-bw
    refuse err_unknown_device 2 "no RDMA device named nosuch0; found: .*$DEV" \
        "$lat" --transport verbs -d nosuch0
    refuse err_gid_out_of_range 2 "GID index 100000 is out of range.*IPv4|GID index 100000 is out of range" \
        "$lat" --transport verbs -d "$DEV" -x 100000
    refuse err_gid_unused 2 "GID index 77 of $DEV port 1 is an unused entry" \
        "$lat" --transport verbs -d "$DEV" -x 77
    refuse err_no_port 2 "$DEV has no port 2" "$lat" --transport verbs -d "$DEV" -i 2
    refuse err_bad_mtu 2 "not a path MTU" "$bw" --transport verbs -d "$DEV" -m 1500
    refuse err_rdma_cm 2 "not implemented yet" "$lat" --transport verbs -d "$DEV" -R
    refuse err_check_send 2 "use it with --test write or --test read" "$bw" --transport verbs --check --test send
    refuse err_tcp_write 2 "needs RDMA" "$lat" --transport tcp --test write
    # -d auto gives each rank of a host the NIC at its place: the second rank here has none.
    if [[ $ROLE == both ]]; then
        refuse err_auto_second_rank 2 "local rank 1 has none: this host has 1 \\($DEV\\)" \
            mpirun -np 2 --oversubscribe --bind-to none "$lat" --transport verbs -d auto -n 10 --timeout 30
    fi
    # GPU memory: rxe takes no dma-buf, so the dma-buf path is exercised through host memory
    # exported by vgem and must end in the diagnostic for a provider that refuses dma-buf.
    if selected err_host_dmabuf_rxe; then
        if modprobe vgem 2> /dev/null; then
            refuse err_host_dmabuf_rxe 2 "refused the dma-buf registration .*Soft-RoCE \(rxe\) never takes dma-buf" \
                "$bw" --transport verbs -d "$DEV" --test write --host-dmabuf
        else
            refuse err_host_dmabuf_rxe 2 "no host dma-buf exporter.*modprobe vgem" \
                "$bw" --transport verbs -d "$DEV" --test write --host-dmabuf
        fi
    fi
    refuse err_gpu_no_cuda 2 "no CUDA driver.*libcuda" "$bw" --transport verbs -d "$DEV" --test write --use-cuda 0
    refuse err_gpu_write_lat 2 "write latency polls" "$lat" --transport verbs -d "$DEV" --test write --use-cuda 0
    # The integration test's real-device branch (built by run-all.sh): unknown device
    # refused with the list, a loopback ping-pong measured.
    if selected itest_verbs_errors && [[ $SOFTROCE_SHAPE == one ]]; then
        local t
        t=${VERBS_ERRORS_TEST:-$(ls -t "$REPO"/target/{release,debug}/deps/verbs_errors-* 2> /dev/null | grep -v '\.d$' | head -n 1)}
        if [[ -x $t ]]; then
            if out=$(timeout 300 "$t" --test-threads 1 2>&1); then
                echo "$out" | grep -E '^test ' | sed 's/^/    | /'
                pass itest_verbs_errors
            else
                echo "$out" | tail -n 20 | sed 's/^/    | /'
                fail itest_verbs_errors "the integration test failed on the device"
            fi
        else
            fail itest_verbs_errors "not built: cargo test -p integration --test verbs_errors --no-run"
        fi
    fi
    # memlock: an unprivileged user with a 64 KiB limit cannot pin 4 MiB buffers; the
    # error must say the limit, the size and how to raise it (both sides fail the same way).
    if selected err_memlock && command -v setpriv > /dev/null; then
        local port=$((PORT + 50))
        setpriv --reuid=65534 --regid=65534 --clear-groups bash -c \
            "ulimit -l 64; exec timeout 60 $bw --transport verbs -d $DEV -s 4M -n 10 -p $port" \
            > "$LOGS/err_memlock.server.log" 2>&1 &
        local spid=$!
        refuse err_memlock 2 "locked-memory limit .* is 64 KiB but the buffers need" \
            setpriv --reuid=65534 --regid=65534 --clear-groups bash -c \
            "ulimit -l 64; exec $bw --transport verbs -d $DEV -s 4M -n 10 -p $port 127.0.0.1"
        wait "$spid"
    fi
}

# fabric-doctor in the VM: real iproute2 and ethtool against rxe and its netdev. Exit 0,
# the rxe netdev audited with the suite's traffic on it (RoCE v2 GID), and every fact a
# value or "unknown: why": DCB answers "not supported" on virtio and dummy netdevs; the
# driver's counters are read on virtio-net (two VMs) and explained on a dummy (one VM).
run_doctor() {
    selected doctor || return 0
    local json=$OUT/doctor.json log=$LOGS/doctor.log
    say "run  doctor: fabric-doctor --json $json"
    if ! timeout 60 "$BIN/fabric-doctor" --json "$json" > "$log" 2>&1; then
        sed 's/^/    | /' "$log" | tail -n 20
        fail doctor "fabric-doctor exit status non-zero"
        return 0
    fi
    sed 's/^/    | /' "$log" | grep -E "^    \| (port|  PFC|  suite traffic|  driver counters)" | head -n 8
    local why
    if ! why=$(python3 - "$json" "$SOFTROCE_NETDEV" "$SOFTROCE_SHAPE" << 'PY' 2>&1
import json, sys
path, netdev, shape = sys.argv[1:4]
a = json.load(open(path))["hosts"][0]["audit"]
ports = {p["interface"]: p for p in a["ports"]}
assert netdev in ports, "no audit of %s: %s" % (netdev, sorted(ports))
p = ports[netdev]
for k in ("pfc", "ets", "trust", "ecn", "fec", "driver_counters", "traffic"):
    f = p[k]
    assert "value" in f or f.get("unknown"), "%s: neither a value nor why: %s" % (k, f)
assert "unknown" in p["pfc"], "PFC known on a netdev without DCB: %s" % p["pfc"]
t = p["traffic"].get("value")
assert t, "the suite's traffic on %s unknown: %s" % (netdev, p["traffic"])
dc = p["driver_counters"]
if shape == "two":
    assert dc.get("value"), "no driver counters on virtio-net: %s" % dc
else:
    assert dc.get("unknown") and "ethtool" in dc.get("source", ""), "dummy netdev: no reason given: %s" % dc
PY
    ); then
        fail doctor "audit check: $(tail -n 1 <<< "$why")"
        return 0
    fi
    pass doctor
}

case $ROLE in
both)
    run_doctor
    run_pairs
    run_post_list_doorbells
    run_mpi
    run_sweeps
    run_load
    run_errors
    ;;
server | client)
    # The error cases are the tools' own checks: the one VM runs them.
    run_doctor
    run_pairs
    run_lossy_link
    run_two_hosts
    ;;
esac

say "verbs suite ($SOFTROCE_SHAPE, $ROLE): $PASSED passed, $FAILED failed${FAILS[*]:+: ${FAILS[*]}}"
python3 -c 'import json, sys
json.dump({"passed": int(sys.argv[2]), "failed": int(sys.argv[3]), "failures": sys.argv[4:]}, open(sys.argv[1], "w"))' \
    "$OUT/verbs-suite.json" "$PASSED" "$FAILED" "${FAILS[@]}" || true
((FAILED == 0))
