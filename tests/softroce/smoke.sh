#!/bin/bash
# Guest script that proves the Soft-RoCE harness works: run it with
#   tests/softroce/vm.sh one tests/softroce/smoke.sh
#   tests/softroce/vm.sh two tests/softroce/smoke.sh
# It checks the verbs device, prints the GID table, runs perftest's ib_send_lat and
# ib_write_bw (server and client in one VM, or server in VM a and client in VM b), runs
# mpirun in the one-VM shape, and writes smoke.json into $SOFTROCE_OUT.
set -uo pipefail

: "${SOFTROCE_DEV:?run me through tests/softroce/vm.sh}"
# shellcheck source=gid.sh
source "$SOFTROCE_HARNESS/gid.sh"

DEV=$SOFTROCE_DEV
ROLE=${SOFTROCE_ROLE:-both} # the one-VM shape runs server and client
LAT_ITERS=200
BW_ITERS=1000
FAILED=0
declare -A RESULT=()

section() { printf '\n=== [%ss] %s\n' "$SECONDS" "$*"; }
check_failed() {
    echo "SMOKE FAIL: $*"
    FAILED=1
}

check_device() {
    section "ibv_devices"
    ibv_devices || check_failed "ibv_devices"
    section "ibv_devinfo -d $DEV"
    local info
    info=$(ibv_devinfo -d "$DEV") || check_failed "ibv_devinfo -d $DEV"
    echo "$info"
    grep -q PORT_ACTIVE <<< "$info" || check_failed "port 1 of $DEV is not PORT_ACTIVE"
    RESULT[active_mtu]=$(awk '/active_mtu/ {print $2; exit}' <<< "$info")
}

show_gids() {
    section "GID table of $DEV port 1"
    # Builtins only: rxe has 1024 entries and a fork costs milliseconds under TCG.
    local dir=/sys/class/infiniband/$DEV/ports/1 idx gid type
    for ((idx = 0; ; idx++)); do
        [[ -e $dir/gids/$idx ]] || break
        read -r gid < "$dir/gids/$idx" || continue
        [[ $gid == 0000:0000:0000:0000:0000:0000:0000:0000 ]] && continue
        { read -r type < "$dir/gid_attrs/types/$idx"; } 2> /dev/null || type="?"
        printf '  %-3s %s  %s\n' "$idx" "$gid" "$type"
    done
    GID=$(softroce_gid_index "$DEV" 1 "$SOFTROCE_IP") || {
        check_failed "no IPv4-mapped RoCE v2 GID for $SOFTROCE_IP"
        GID=1
    }
    echo "IPv4-mapped RoCE v2 GID index: $GID"
    RESULT[gid_index]=$GID
}

# perftest's client fails at once when the server is not listening yet: retry it, as
# users do. run_client LOG TOOL HOST ARGS...
run_client() {
    local log=$1 tool=$2 host=$3
    shift 3
    local try
    for try in $(seq 1 60); do
        if timeout 180 "$tool" "$@" "$host" > "$log" 2>&1; then
            cat "$log"
            return 0
        fi
        # A refused connection means "not listening yet"; anything else is a real failure.
        if ! grep -q "Couldn't connect" "$log"; then
            cat "$log"
            return 1
        fi
        sleep 1
    done
    cat "$log"
    echo "gave up after $try tries"
    return 1
}

# perftest times with the CPU cycle counter and calibrates it against gettimeofday first;
# on an overloaded host that calibration can fail after the transfer itself worked.
calibration_failed() { grep -q "Can't produce a report" "$@" 2> /dev/null; }

# perftest_pair NAME TOOL ARGS...: server and/or client of one perftest benchmark,
# depending on the role. Leaves the client's (or the server's) output in $OUT_LOG.
perftest_pair() {
    local name=$1 tool=$2
    shift 2
    local args=(-d "$DEV" -x "$GID" "$@")
    local slog=/tmp/$name.server.log clog=/tmp/$name.client.log
    section "$tool ${args[*]} ($ROLE)"
    case $ROLE in
    both)
        local try spid ok
        for try in 1 2 3; do
            timeout 180 "$tool" "${args[@]}" > "$slog" 2>&1 &
            spid=$!
            ok=1
            # A failed client leaves the server waiting: stop it rather than wait 180 s.
            run_client "$clog" "$tool" "$SOFTROCE_IP" "${args[@]}" || {
                ok=0
                sleep 1
                kill "$spid" 2> /dev/null
            }
            wait "$spid" || ok=0
            ((ok)) && break
            # Rerun only after a calibration failure; anything else is a real failure.
            calibration_failed "$slog" "$clog" || break
            echo "perftest could not calibrate its clock (host busy?); rerunning ($try of 3)"
        done
        if ((!ok)); then
            echo "--- server output"
            cat "$slog"
            check_failed "$tool server and client in one VM"
        fi
        OUT_LOG=$clog
        ;;
    server)
        timeout 300 "$tool" "${args[@]}" > "$slog" 2>&1
        local rc=$?
        cat "$slog"
        if ((rc != 0)); then
            if calibration_failed "$slog"; then
                echo "SMOKE WARN: $tool server ran but could not calibrate its clock (host busy?)"
            else
                check_failed "$tool server (exit $rc)"
            fi
        fi
        OUT_LOG=$slog
        ;;
    client)
        if ! run_client "$clog" "$tool" "$SOFTROCE_PEER_IP" "${args[@]}"; then
            if calibration_failed "$clog"; then
                echo "SMOKE WARN: $tool client ran but could not calibrate its clock (host busy?)"
            else
                check_failed "$tool client"
            fi
        fi
        OUT_LOG=$clog
        ;;
    esac
}

# The first result row of a perftest table: the line after the "#bytes" header.
result_row() { awk '/^ *#bytes/ {getline; print; exit}' "$1"; }

run_perftest() {
    perftest_pair send_lat ib_send_lat -n "$LAT_ITERS"
    # columns: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    local row
    row=$(result_row "$OUT_LOG")
    [[ -n $row ]] && RESULT[send_lat_t_typical_us]=$(awk '{print $5}' <<< "$row") &&
        RESULT[send_lat_t_avg_us]=$(awk '{print $6}' <<< "$row")

    perftest_pair write_bw ib_write_bw -n "$BW_ITERS"
    # columns: #bytes #iterations BW_peak[MB/sec] BW_average[MB/sec] MsgRate[Mpps]
    row=$(result_row "$OUT_LOG")
    [[ -n $row ]] && RESULT[write_bw_bytes]=$(awk '{print $1}' <<< "$row") &&
        RESULT[write_bw_avg_mbyte_s]=$(awk '{print $4}' <<< "$row")
}

# OpenMPI inside the VM: root needs the two ALLOW variables; the VM has 2 vCPUs, so
# --oversubscribe keeps this working with SOFTROCE_SMP=1.
run_mpi() {
    section "mpirun -np 2 hostname"
    local out
    if out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout 120 mpirun -np 2 --oversubscribe hostname 2>&1); then
        echo "$out"
        [[ $(grep -c "^$(hostname)\$" <<< "$out") == 2 ]] || check_failed "mpirun: expected 2 lines of $(hostname)"
        RESULT[mpi_ranks]=2
    else
        echo "$out"
        check_failed "mpirun -np 2 hostname"
    fi
}

write_json() {
    local k
    {
        printf '{"shape": "%s", "role": "%s", "dev": "%s", "ip": "%s", "passed": %s' \
            "$SOFTROCE_SHAPE" "$ROLE" "$DEV" "$SOFTROCE_IP" "$([[ $FAILED == 0 ]] && echo true || echo false)"
        for k in "${!RESULT[@]}"; do
            printf ', "%s": "%s"' "$k" "${RESULT[$k]}"
        done
        echo "}"
    } > "$SOFTROCE_OUT/smoke.json"
    section "$SOFTROCE_OUT/smoke.json"
    cat "$SOFTROCE_OUT/smoke.json"
}

check_device
show_gids
run_perftest
[[ $SOFTROCE_SHAPE == one ]] && run_mpi
section "hw_counters of $DEV"
grep -H . /sys/class/infiniband/"$DEV"/ports/1/hw_counters/{sent_pkts,rcvd_pkts,completer_retry_err,duplicate_request} 2> /dev/null
write_json
if ((FAILED)); then
    echo "SMOKE: FAILED"
    exit 1
fi
echo "SMOKE: OK"
