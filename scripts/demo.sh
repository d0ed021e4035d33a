#!/usr/bin/env bash
# The main job on a built-in default (the README's first command): a local acceptance run
# over loopback. Builds the suite, runs bench-lat and bench-bw as server and client on
# 127.0.0.1, and leaves their JSON (and the report, when aggregate is built) in out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/deps.sh
need_packages "${BUILD_PACKAGES[@]}"

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
echo
echo "results: $OUT/*.json"
