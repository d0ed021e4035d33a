#!/bin/bash
# Side by side with perftest (a benchmark, not a test): on one RDMA device, run perftest's
# ib_send_lat, ib_write_lat, ib_write_bw, ib_read_bw and our bench-lat / bench-bw with the
# same sizes, iterations and queue depth, in rounds of perftest, ours, perftest again,
# REPEAT rounds, and judge them with the shared method (scripts/lib/fidelity.py, issue 34):
#   latency:   ours / perftest of t_typical, the median one-way latency as perftest figures
#              it (two largest samples dropped; ours is `perftest_us.t_typical`)
#              (target <= 1.10 in a VM, 1.03 on hardware)
#   bandwidth: ours / perftest of the average bandwidth      (target >= 0.90 in a VM, 0.97 on hardware)
#   BW peak:   the same runs' "BW peak" (perftest's fastest run of messages, post to
#              completion; ours is `bw_gbit_s.perftest_peak`)   (same targets)
#   msg rate:  write_bw_list, SMALL_SIZE-byte writes in post lists of LIST (-l, both
#              tools): ours / perftest of the message rate   (same targets as bandwidth)
# Each ratio is the median of the rounds' paired ratios with its 95 % bootstrap interval,
# beside perftest's own A/A interval (its second run of a round over its first): a ratio's
# distance from 1 means something only where the interval clears that.
#
# Server and client run on this host over the device's loopback (Soft-RoCE's rxe loops back
# in the driver; real adapters loop back in hardware), so the script runs unchanged inside
# the Soft-RoCE VM and on a real RDMA host:
#   tests/softroce/vm.sh one scripts/bench-verbs-vs-perftest.sh     # in the VM
#   scripts/bench-verbs-vs-perftest.sh                              # on an RDMA host
# Settings (environment): DEV (default: first device with port 1 ACTIVE), GID (default: the
# IPv4-mapped RoCE v2 GID, via tests/softroce/gid.sh; empty on InfiniBand), REPEAT (7),
# LAT_ITERS (1000), BW_ITERS (2000), LAT_SIZE (2), BW_SIZE (65536), TX_DEPTH (128),
# SMALL_SIZE (64), LIST (8), FABCHECK_BIN (target/release). Results also go to $OUT/bench-verbs-vs-perftest.json.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${FABCHECK_BIN:-$REPO/target/release}
REPEAT=${REPEAT:-7}
LAT_ITERS=${LAT_ITERS:-1000}
BW_ITERS=${BW_ITERS:-2000}
LAT_SIZE=${LAT_SIZE:-2}
BW_SIZE=${BW_SIZE:-65536}
TX_DEPTH=${TX_DEPTH:-128}
SMALL_SIZE=${SMALL_SIZE:-64}
LIST=${LIST:-8}
OUT=${SOFTROCE_OUT:-${OUT:-/tmp/bench-verbs-vs-perftest}}
WORK=$(mktemp -d /tmp/bvp.XXXXXX)
mkdir -p "$OUT"

die() {
    echo "bench-verbs-vs-perftest: $*" >&2
    exit 2
}
for t in ib_send_lat ib_write_lat ib_write_bw ib_read_bw; do
    command -v "$t" > /dev/null || die "$t not found: install perftest (apt-get install perftest)"
done
[[ -x $BIN/bench-lat && -x $BIN/bench-bw ]] || die "no bench-lat/bench-bw in $BIN: cargo build --release"

if [[ -z ${DEV:-} ]]; then
    for d in /sys/class/infiniband/*; do
        [[ -e $d ]] || continue
        grep -q ACTIVE "$d/ports/1/state" 2> /dev/null && DEV=$(basename "$d") && break
    done
fi
[[ -n ${DEV:-} ]] || die "no RDMA device with port 1 ACTIVE (set DEV=...)"
if [[ -z ${GID+x} ]]; then
    GID=$(bash "$REPO/tests/softroce/gid.sh" "$DEV" 1 2> /dev/null || true)
fi
GIDARG=()
[[ -n $GID ]] && GIDARG=(-x "$GID")
echo "device $DEV, GID index ${GID:-none}, $REPEAT rounds, latency $LAT_SIZE B x $LAT_ITERS, bandwidth $BW_SIZE B x $BW_ITERS (tx depth $TX_DEPTH)"

# perftest's client gives up at once if the server is not listening yet: retry.
perftest_run() {
    local tool=$1 log=$2
    shift 2
    timeout 300 "$tool" "$@" > "$log.server" 2>&1 &
    local spid=$! try
    for try in $(seq 1 100); do
        if timeout 300 "$tool" "$@" 127.0.0.1 > "$log" 2>&1; then
            wait "$spid"
            return 0
        fi
        grep -q "Couldn't connect" "$log" || break
        sleep 0.1
    done
    kill "$spid" 2> /dev/null
    wait "$spid" 2> /dev/null
    cat "$log" "$log.server" >&2
    return 1
}

ours_run() {
    local tool=$1 json=$2
    shift 2
    timeout 300 "$BIN/$tool" --transport verbs "$@" > "$json.server" 2>&1 &
    local spid=$!
    if ! timeout 300 "$BIN/$tool" --transport verbs "$@" --json "$json" 127.0.0.1 > "$json.log" 2>&1; then
        kill "$spid" 2> /dev/null
        wait "$spid" 2> /dev/null
        cat "$json.log" "$json.server" >&2
        return 1
    fi
    wait "$spid"
}

# The first row under perftest's "#bytes" header; column $2 of it.
perftest_col() { awk -v c="$2" '/^ *#bytes/ {getline; print $c; exit}' "$1"; }
ours_value() {
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
k = sys.argv[2]
if k == "lat":
    print((r.get("perftest_us") or {}).get("t_typical", r["latency_us"]["p50"]))
elif k == "rate":
    print(r["msg_rate_mpps"])
elif k == "peak":
    print(r["bw_gbit_s"]["perftest_peak"])
else:
    print(r["bw_gbit_s"]["avg"])' "$1" "$2"
}

RESULTS=$WORK/results.tsv
: > "$RESULTS"
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$RESULTS"; }

one_round() {
    local r=$1 name ptool otool op kind args oargs v
    for name in send_lat write_lat write_bw read_bw write_bw_list; do
        case $name in
        send_lat) ptool=ib_send_lat otool=bench-lat op=send kind=lat ;;
        write_lat) ptool=ib_write_lat otool=bench-lat op=write kind=lat ;;
        write_bw) ptool=ib_write_bw otool=bench-bw op=write kind=bw ;;
        read_bw) ptool=ib_read_bw otool=bench-bw op=read kind=bw ;;
        write_bw_list) ptool=ib_write_bw otool=bench-bw op=write kind=rate ;;
        esac
        if [[ $kind == lat ]]; then
            args=(-d "$DEV" "${GIDARG[@]}" -s "$LAT_SIZE" -n "$LAT_ITERS")
            oargs=(-d "$DEV" "${GIDARG[@]}" -s "$LAT_SIZE" -n "$LAT_ITERS" --test "$op")
        elif [[ $kind == rate ]]; then
            args=(-d "$DEV" "${GIDARG[@]}" -s "$SMALL_SIZE" -n "$BW_ITERS" -t "$TX_DEPTH" -l "$LIST" --report_gbits)
            oargs=(-d "$DEV" "${GIDARG[@]}" -s "$SMALL_SIZE" -n "$BW_ITERS" -t "$TX_DEPTH" -l "$LIST" --test "$op")
        else
            args=(-d "$DEV" "${GIDARG[@]}" -s "$BW_SIZE" -n "$BW_ITERS" -t "$TX_DEPTH" --report_gbits)
            oargs=(-d "$DEV" "${GIDARG[@]}" -s "$BW_SIZE" -n "$BW_ITERS" -t "$TX_DEPTH" --test "$op")
        fi
        # perftest, ours, perftest again: each of ours is paired with the reference runs
        # around it, and perftest's second run over its first is the A/A ratio.
        local who k=0
        for who in perftest ours perftest; do
            k=$((k + 1))
            if [[ $who == perftest ]]; then
                perftest_run "$ptool" "$WORK/$name.$r.$k.perftest" "${args[@]}" || die "$ptool failed (round $r)"
                # lat: t_typical (the median, column 5); bw: BW average (column 4), Gb/s;
                # rate: MsgRate (column 5), Mpps.
                v=$(perftest_col "$WORK/$name.$r.$k.perftest" "$([[ $kind == bw ]] && echo 4 || echo 5)")
            else
                ours_run "$otool" "$WORK/$name.$r.json" "${oargs[@]}" || die "$otool --test $op failed (round $r)"
                v=$(ours_value "$WORK/$name.$r.json" "$kind")
            fi
            [[ -n $v ]] || die "no figure parsed from $who $name (round $r); logs in $WORK"
            record "$name" "$who" "$v" "$r"
            printf '  round %s %-9s %-8s %s\n' "$r" "$name" "$who" "$v"
            if [[ $kind == bw ]]; then
                # The same run's BW peak: perftest's column 3, ours perftest_peak.
                if [[ $who == perftest ]]; then
                    v=$(perftest_col "$WORK/$name.$r.$k.perftest" 3)
                else
                    v=$(ours_value "$WORK/$name.$r.json" peak)
                fi
                [[ -n $v && $v != None ]] || die "no BW peak from $who $name (round $r); logs in $WORK"
                record "${name}_peak" "$who" "$v" "$r"
            fi
        done
    done
}

for r in $(seq 1 "$REPEAT"); do
    one_round "$r"
done

# The shared method (scripts/lib/fidelity.py): per test, the paired ratio ours / perftest
# with its 95 % bootstrap interval, perftest's A/A interval, and a verdict against 5 %.
awk -F'\t' '{ print $1, $4, ($2 == "perftest" ? "ref" : "ours"), $3 }' "$RESULTS" > "$WORK/paired.txt"
python3 "$REPO/scripts/lib/fidelity.py" --json "$OUT/fidelity.verbs.json" \
    --title "$DEV: *_lat t_typical us (above = ours slower), *_bw average and *_peak Gb/s, write_bw_list Mpps (below = ours slower); targets ratio <= 1.10 / >= 0.90 in a VM, 1.03 / 0.97 on hardware" \
    "$WORK/paired.txt"
python3 - "$RESULTS" "$OUT/bench-verbs-vs-perftest.json" "$DEV" "$OUT/fidelity.verbs.json" << 'PY'
import json, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {}
for name, who, v, _ in rows:
    by.setdefault(name, {}).setdefault(who, []).append(float(v))
fid = json.load(open(sys.argv[4]))["rows"]
out = {"device": sys.argv[3], "tests": {}}
for name, f in fid.items():
    out["tests"][name] = {"perftest": by[name]["perftest"], "fabcheck": by[name]["ours"],
                          "perftest_median": f["ref_median"], "fabcheck_median": f["ours_median"],
                          "ratio": f["ratio"], "ratio_interval": f["ratio_interval"],
                          "aa_interval": f["aa_interval"], "verdict": f["verdict"]}
json.dump(out, open(sys.argv[2], "w"), indent=2)
print("\nwrote", sys.argv[2])
PY
rm -rf "$WORK"
