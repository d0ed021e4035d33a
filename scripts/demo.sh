#!/usr/bin/env bash
# The main job on a built-in default (the README's first command): a whole local acceptance
# run over loopback. Builds the suite; runs bench-lat and bench-bw as server and client on
# 127.0.0.1, bench-collective under `mpirun -np 2`, and an all-pairs bench-bw sweep of five
# ranks (each rank a node); judges all of it against the loopback-demo-cluster profile with
# aggregate (the sweep as a node-by-node matrix); signs the report with a demo key it
# creates; prints where the report is and the verdict. Exit code: aggregate's (0 PASS, 1 FAIL, 2 error).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/deps.sh
need_packages "${BUILD_PACKAGES[@]}" openssh-client

OUT=${OUT:-out/demo}
PORT=${PORT:-18555}
mkdir -p "$OUT"
: > "$OUT/servers.log"
cargo build --release --workspace --bins -q
BIN=target/release

pair() { # tool, then the options both sides share, then -- and the client's own
  local tool=$1; shift
  local common=() own=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do common+=("$1"); shift; done
  [ $# -gt 0 ] && shift && own=("$@")
  "$BIN/$tool" -p "$PORT" --timeout 30 "${common[@]}" >>"$OUT/servers.log" 2>&1 &
  local server=$!
  "$BIN/$tool" 127.0.0.1 -p "$PORT" --timeout 30 "${common[@]}" "${own[@]}"
  wait "$server"
}

echo "== bench-lat: TCP ping-pong, 2 B .. 8 MiB"
pair bench-lat -a --transport tcp -- -n 1000 --json "$OUT/lat.json"
echo "== bench-bw: TCP stream, 4 KiB .. 1 MiB sizes, 1 s each"
for s in 4K 64K 1M; do
  pair bench-bw -s "$s" --transport tcp -- -D 1 --json "$OUT/bw-$s.json"
done
echo "== bench-collective: every collective over MPI, 2 ranks, 8 B .. 1 MiB, checked"
mpirun --oversubscribe -np 2 "$BIN/bench-collective" all -b 8 -e 1M -f 4 -c --json "$OUT/coll.json"

echo "== bench-bw: an all-pairs sweep of 5 ranks under mpirun, each rank a node (--include-local)"
mpirun --oversubscribe --bind-to none -np 5 "$BIN/bench-bw" -s 64K -D 0.3 --transport tcp \
  --pattern all-pairs --include-local --timeout 30 --json "$OUT/sweep.json"

echo "== aggregate: judge against profiles/loopback-demo-cluster.toml, sign, render"
KEY=${KEY:-out/demo.key}
[ -f "$KEY" ] || "$BIN/aggregate" keygen "$KEY"
set +e
"$BIN/aggregate" report "$OUT" --profile loopback-demo-cluster --out "$OUT/report" --sign "$KEY" --force
verdict=$?
set -e
echo
echo "results: $OUT/*.json"
echo "report:  $OUT/report/report.html (also report.md, report.junit.xml; signed: MANIFEST.sha256.sig)"
# The customer's side: an allowed_signers file made from the published key (here the demo
# key's .pub), never the bundle's own copy.
SIGNERS=$(realpath -m "$KEY.allowed_signers")
echo "fabcheck $(cat "$KEY.pub")" > "$SIGNERS"
echo "verify:  (cd $OUT/report && SIGNERS=$SIGNERS && ssh-keygen -Y verify -f \"\$SIGNERS\" -I fabcheck -n fabcheck-report -s MANIFEST.sha256.sig < MANIFEST.sha256 && sha256sum -c MANIFEST.sha256)"
exit $verdict
