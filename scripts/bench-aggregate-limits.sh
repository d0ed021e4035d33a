#!/usr/bin/env bash
# Peak memory of `aggregate` at its input ceilings (issue 13): for each of the costliest
# shapes a document can take (tiny strings, zeros in a free-form option, interval
# samples, a free-form map of tiny keys, nested empty arrays, whole latency and
# bandwidth rows, host entries, 1 MiB strings), a file as large as the default ceilings
# let through (--max-input-bytes 256M: 256 MiB a file, an estimated 576 MiB decoded) is
# generated from the real documents in tests/corpus/real and judged with `aggregate
# report` and `aggregate export` under /usr/bin/time. Target: every run under 1 GiB.
# Then the same shapes at twice the ceiling must be refused, in little time and memory.
#
# Usage: scripts/bench-aggregate-limits.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${AGGREGATE:-$ROOT/target/release/aggregate}
if [[ ! -x $BIN ]]; then
    echo "building aggregate (release)..." >&2
    cargo build --release -p aggregate --manifest-path "$ROOT/Cargo.toml" >&2
fi
for tool in /usr/bin/time python3; do
    command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install -y time python3" >&2; exit 2; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Writes the shapes into $1, sized to fill $2 times the decoded-memory ceiling.
make_shapes() {
    python3 - "$ROOT/tests/corpus/real" "$1" "$2" <<'PY'
import json, os, sys
real, out, scale = sys.argv[1], sys.argv[2], float(sys.argv[3])
os.makedirs(out, exist_ok=True)
BUDGET = int(576 * 2**20 * 0.97 * scale)   # 9/4 x 256 MiB, the default decoded ceiling
LIMIT = int(256 * 2**20 * min(scale, 1.0)) - 4096
lat = json.load(open(os.path.join(real, "bench-lat.json")))
bw = json.load(open(os.path.join(real, "bench-bw.json")))
def est(x):   # results::limits::decoded_estimate
    if isinstance(x, dict):
        return 80 + sum(80 + len(k) + est(v) for k, v in x.items())
    if isinstance(x, list):
        return 80 + sum(est(e) for e in x)
    if isinstance(x, str):
        return 80 + 32 + len(x)
    return 80
def write(name, doc, path, units):
    """`doc` with the list at `path` (keys) filled with `units` (a generator of JSON text)."""
    t = json.dumps(doc)
    marker = json.dumps("@@FILL@@")
    head, tail = t.split(marker)
    with open(os.path.join(out, name + ".json"), "w") as f:
        f.write(head)
        size = len(head) + len(tail)
        first = True
        for u in units:
            if size + len(u) + 1 > LIMIT:
                break
            f.write(u if first else "," + u)
            size += len(u) + 1
            first = False
        f.write(tail)
def fill(doc, path):
    d = json.loads(json.dumps(doc))
    x = d
    for k in path[:-1]:
        x = x[k]
    x[path[-1]] = ["@@FILL@@"]
    return d
def repeat(unit, cost, base):
    n = (BUDGET - base) // cost
    return (unit for _ in range(max(n, 0)))
def keys(cost, base):
    n = (BUDGET - base) // cost
    return ('"%07x":0' % i for i in range(max(n, 0)))
b = est(lat)
write("strings", fill(lat, ["warnings"]), None, repeat('""', 112, b))
d = fill(lat, ["options"]); d["options"] = {"z": ["@@FILL@@"]}
write("option-zeros", d, None, repeat("0", 80, b))
write("intervals", fill(bw, ["results", 0, "interval_gbit_s"]), None, repeat("1.5", 80, est(bw)))
d = json.loads(json.dumps(lat)); d["options"] = {"@@": 0}
t = json.dumps(d).replace('{"@@": 0}', '{"@@FILL@@"}')
head, tail = t.split('"@@FILL@@"')
n = (BUDGET - b) // (80 + 7 + 80)
with open(os.path.join(out, "option-keys.json"), "w") as f:
    f.write(head)
    f.write(",".join('"%07x":0' % i for i in range(min(n, LIMIT // 12))))
    f.write(tail)
d = fill(lat, ["options"]); d["options"] = {"z": ["@@FILL@@"]}
write("option-arrays", d, None, repeat("[]", 80, b))
row = lat["results"][0]
write("latency-rows", fill(lat, ["results"]), None, repeat(json.dumps(row), est(row), b))
row = bw["results"][0]
write("bandwidth-rows", fill(bw, ["results"]), None, repeat(json.dumps(row), est(row), est(bw)))
host = json.dumps(lat["hosts"][0])
n = (BUDGET - b) // est(lat["hosts"][0])
write("hosts", fill(lat, ["hosts"]), None, (host.replace('"hostname": "', '"hostname": "n%07d' % i, 1) for i in range(n)))
big = '"' + "w" * (2**20 - 64) + '"'
write("mib-strings", fill(lat, ["warnings"]), None, repeat(big, 80 + 32 + 2**20, b))
PY
}

run() {  # label, files...: prints wall, peak RSS and exit code of report and export
    local label=$1; shift
    for cmd in report export; do
        local args=("$cmd" "$@")
        [[ $cmd == report ]] && args+=(--profile roce-100g --out "$WORK/out" --force)
        set +e
        /usr/bin/time -f "%e %M" -o "$WORK/t" "$BIN" "${args[@]}" >/dev/null 2>"$WORK/err"
        local rc=$?
        set -e
        read -r wall rss <<<"$(tail -1 "$WORK/t")"
        printf '%-16s %-7s exit %d  %6.2f s  %5d MiB  %s\n' "$label" "$cmd" "$rc" "$wall" $((rss / 1024)) \
            "$(head -c 90 "$WORK/err" | tr '\n' ' ')"
    done
}

echo "== at the default ceilings (must be judged, each run under 1 GiB)"
make_shapes "$WORK/at" 1
for f in "$WORK"/at/*.json; do
    run "$(basename "$f" .json) $(($(stat -c %s "$f") >> 20))M" "$f"
done
echo "== at twice the decoded ceiling (must be refused, exit 2)"
make_shapes "$WORK/over" 2
for f in "$WORK"/over/*.json; do
    run "$(basename "$f" .json) $(($(stat -c %s "$f") >> 20))M" "$f"
done
