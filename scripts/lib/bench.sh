# Sourced by the benchmark scripts of aggregate: the release binaries they time and GNU
# time, which measures wall time and peak memory. Expects ROOT (the checkout).

# Sets BIN (aggregate) and SYNTH (the development generator, never part of the product),
# building both in release mode when missing; AGGREGATE and SYNTH override the paths.
need_release_bins() {
    BIN=${AGGREGATE:-$ROOT/target/release/aggregate}
    SYNTH=${SYNTH:-$ROOT/target/release/synth}
    if [[ ! -x $BIN || ! -x $SYNTH ]]; then
        echo "building aggregate and synth (release)..." >&2
        cargo build --release -p aggregate -p synth --manifest-path "$ROOT/Cargo.toml" >&2
    fi
    if [[ ! -x /usr/bin/time ]]; then
        echo "needs GNU time: apt-get install -y time" >&2
        exit 2
    fi
}

# Runs `aggregate ARGS...` under GNU time with its output in $WORK (stdout.txt,
# stderr.txt, time.txt); stops the script when it could not run (exit 2 or more), and
# sets WALL (m:ss), USER (s of CPU), CPU (%) and RSS_KB (peak).
timed_aggregate() {
    local rc
    set +e
    /usr/bin/time -v -o "$WORK/time.txt" "$BIN" "$@" >"$WORK/stdout.txt" 2>"$WORK/stderr.txt"
    rc=$?
    set -e
    if [[ $rc -ge 2 ]]; then
        echo "aggregate $1 failed (exit $rc):" >&2
        cat "$WORK/stderr.txt" >&2
        exit "$rc"
    fi
    WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/time.txt")
    USER=$(awk -F': ' '/User time/ {print $2}' "$WORK/time.txt")
    CPU=$(awk -F': ' '/Percent of CPU/ {print $2}' "$WORK/time.txt")
    RSS_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
}
