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
