#!/usr/bin/env bash
# The time model of an all-pairs sweep: measures here what a round costs beyond measuring
# (the barrier that opens it, each pair's control connection and its data connections or
# queue pairs, the exchanges, the gather of results at the root), at 4 to 16 ranks, and
# projects the sweep time of 8 to 1024 nodes with 8 rails at a per-pair budget.
#
#   scripts/sweep-time-model.sh [REPEATS=3] [BUDGET_S=0.5]
#
# Each rank counts as a node (--include-local), so all-pairs at P ranks runs P-1 (or P)
# rounds of P/2 pairs; a round's overhead is its wall time (sweep.round_seconds) minus the
# longest measuring time of its pairs (duration_s). Runs are interleaved across rank
# counts and repeated; medians are reported with their spread. On a real cluster the
# rails of a node run at once (8 ranks per node, one per NIC), so a sweep of N nodes is
# N-1 rounds at 8N ranks; the fitted overhead(P) = a + b*log2(P) is extrapolated to 8N.
# Ranks here share 2 cores (16 ranks are 8x oversubscribed), so the figures are upper
# bounds for nodes with a core per rank. A benchmark: it prints figures, never fails on them.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
BUDGET=${2:-0.5}
RANKS=${RANKS:-4 8 12 16}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cargo build --release --workspace --bins --examples -q
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for ((i = 0; i < REPEATS; i++)); do
  for np in $RANKS; do
    timeout 300 mpirun --bind-to none -np "$np" target/release/bench-lat -s 8 -n 100 \
      --pattern all-pairs --include-local --timeout 30 --json "$work/lat-$np-$i.json" >/dev/null 2>&1 ||
      echo "warning: the latency sweep at $np ranks failed" >&2
    # Bandwidth at the budget: a round is the budget, the drain of what is in flight and
    # the side reports, plus the overhead.
    timeout 300 mpirun --bind-to none -np "$np" target/release/bench-bw -s 64K -D "$BUDGET" \
      --pattern all-pairs --include-local --timeout 30 --json "$work/bw-$np-$i.json" >/dev/null 2>&1 ||
      echo "warning: the bandwidth sweep at $np ranks failed" >&2
  done
done
root_cost=$(cargo run --release -q --example round_cost -p p2p 4096 2>/dev/null | sed -n 1p)
python3 - "$work" "$BUDGET" "$root_cost" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import glob, json, math, os, statistics as st, sys
work, budget, root_cost, cores, load = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def rounds(path):
    """(wall, overhead) of every round: overhead = wall - the longest pair's measuring time."""
    d = json.load(open(path))
    longest = {}
    for r in d["results"]:
        k = r["pair"].get("round", 0)
        longest[k] = max(longest.get(k, 0.0), r["duration_s"])
    return [(t, t - longest.get(i, 0.0)) for i, t in enumerate(d["sweep"]["round_seconds"])]
print(f"machine: {cores} cores, load average {load}")
print(f"root, per round of 4096 pairs: {root_cost} (decoded off the critical path)")
for tool, what in (("lat", "bench-lat -s 8 -n 100"), ("bw", f"bench-bw -s 64K -D {budget}")):
    by_np = {}
    for f in glob.glob(os.path.join(work, f"{tool}-*.json")):
        np_ = int(os.path.basename(f).split("-")[1])
        by_np.setdefault(np_, []).extend(rounds(f))
    if not by_np:
        continue
    print()
    print(f"{what}, all-pairs over TCP: per-round cost beyond measuring, every round of every repeat")
    print(f"{'ranks':>6} {'rounds':>7} {'wall median s':>14} {'overhead median ms':>19} {'p10 ms':>8} {'p90 ms':>8}")
    xs, ys = [], []
    for np_ in sorted(by_np):
        o = sorted(x[1] for x in by_np[np_])
        q = lambda p: o[min(len(o) - 1, int(p * len(o)))]
        wall = st.median(x[0] for x in by_np[np_])
        print(f"{np_:>6} {len(o):>7} {wall:>14.3f} {st.median(o)*1e3:>19.2f} {q(0.1)*1e3:>8.2f} {q(0.9)*1e3:>8.2f}")
        xs.append(math.log2(np_)); ys.append(st.median(o))
    if len(xs) >= 2:
        mx, my = st.mean(xs), st.mean(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        a = my - b * mx
    else:
        a, b = ys[0], 0.0
    b = max(b, 0.0)
    print(f"fit: overhead(P) = {a*1e3:.2f} ms + {b*1e3:.2f} ms x log2(P)")
    print(f"all-pairs sweep time with this overhead, 8 rails (ranks = 8 x nodes, rails at once), {budget} s per pair:")
    print(f"{'nodes':>6} {'ranks':>6} {'rounds':>7} {'overhead/round':>15} {'sweep time':>11}")
    for n in (8, 64, 128, 512, 1024):
        p = 8 * n
        rnds = n - 1 if n % 2 == 0 else n
        o = a + b * math.log2(p)
        t = rnds * (budget + o)
        print(f"{n:>6} {p:>6} {rnds:>7} {o*1e3:>12.1f} ms {t/60:>8.1f} min")
PY
