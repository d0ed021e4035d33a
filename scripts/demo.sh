#!/usr/bin/env bash
# The main job on a built-in default (the README's first command): the acceptance procedure
# itself, `fabcheck accept`, rehearsed on this host against the built-in loopback profile.
# Builds the suite; the runner derives from profiles/loopback-demo-cluster.toml the runs
# its checks need (all-pairs bench-bw and bench-lat sweeps over five ranks, each counted as
# a node, and bench-collective's AllReduce, checked) and runs them stage by stage under
# mpirun; `aggregate` judges them and signs the report with a demo key it creates; prints
# where the report is, how a customer verifies it, and the verdict. Exit code: the
# verdict's (0 PASS, 1 FAIL, 2 error, 130 interrupted: RESUME=1 goes on).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/deps.sh
need_packages "${BUILD_PACKAGES[@]}" openssh-client

OUT=${OUT:-out/demo}
RANKS=${RANKS:-5}
cargo build --release --workspace --bins -q
BIN=target/release
KEY=${KEY:-out/demo.key}
mkdir -p "$(dirname "$KEY")"
[ -f "$KEY" ] || "$BIN/aggregate" keygen "$KEY"

# A new run replaces the last one's results; RESUME=1 goes on with an interrupted one.
resume=()
if [ "${RESUME:-0}" = 1 ]; then
  resume=(--resume)
else
  rm -rf "$OUT/results" "$OUT/report" "$OUT/links-report" "$OUT/links-report.log" "$OUT/accept.json"
fi
echo "== the plan: fabcheck accept --dry-run"
"$BIN/fabcheck" accept --profile loopback-demo-cluster --local "$RANKS" --out "$OUT" --dry-run
echo
echo "== the run"
set +e
"$BIN/fabcheck" accept --profile loopback-demo-cluster --local "$RANKS" --out "$OUT" \
  --sign "$KEY" "${resume[@]}"
verdict=$?
set -e
echo
echo "results: $OUT/results/*.json (the run's record: $OUT/accept.json)"
echo "report:  $OUT/report/report.html (also report.md, report.junit.xml; signed: MANIFEST.sha256.sig)"
# The customer's side: an allowed_signers file made from the published key (here the demo
# key's .pub), never the bundle's own copy.
SIGNERS=$(realpath -m "$KEY.allowed_signers")
echo "fabcheck $(cat "$KEY.pub")" > "$SIGNERS"
echo "verify:  (cd $OUT/report && SIGNERS=$SIGNERS && ssh-keygen -Y verify -f \"\$SIGNERS\" -I fabcheck -n fabcheck-report -s MANIFEST.sha256.sig < MANIFEST.sha256 && sha256sum -c MANIFEST.sha256)"
exit $verdict
