#!/usr/bin/env bash
# Prints every product function over 80 lines, longest first, with its place
# (tests/tests/function_length.rs does the counting; tests/long-functions.txt is the list
# of those still to be cut into steps, which may only shrink).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test -q -p integration --test function_length -- --nocapture --test-threads 1 \
    no_product_function 2>&1 | grep -E '^( +[0-9]+  |[0-9]+ product functions)' || true
