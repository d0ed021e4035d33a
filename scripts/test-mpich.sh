#!/usr/bin/env bash
# The MPI binaries built against MPICH instead of Open MPI, and one collective test and
# one point-to-point test run under MPICH's mpiexec (part of scripts/test.sh).
#
# MPICH has its own target directory (target/mpich): mpi-sys does not rebuild when MPICC
# changes, so one directory for both MPIs would silently keep the first one's build. Only
# what the two tests need is built (bench-lat, bench-bw, bench-collective with the `mpi`
# feature alone: no verbs, no CUDA), which keeps the extra CI time to a few minutes.
# MPICH is named explicitly (mpicc.mpich, mpiexec.mpich): `mpicc` and `mpirun` stay Open
# MPI's for everything else.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/deps.sh
need_packages "${BUILD_PACKAGES[@]}"
need_mpich

export MPICC=mpicc.mpich CARGO_TARGET_DIR=target/mpich FABCHECK_MPIEXEC=mpiexec.mpich
cargo build -p bench-lat -p bench-bw -p bench-collective --no-default-features --features mpi
for b in bench-lat bench-bw bench-collective; do
  libs=$(ldd "target/mpich/debug/$b")
  if ! grep -q libmpich <<<"$libs"; then
    echo "error: target/mpich/debug/$b is not linked against MPICH:" >&2
    grep -i mpi <<<"$libs" >&2 || true
    exit 1
  fi
done
TESTS=(two_ranks_every_collective mpirun_pairs_ranks_and_rank0_writes_one_document)
out=$(cargo test -p integration --test collective_mpi --test p2p_tcp -- "${TESTS[@]}" 2>&1) \
  || { echo "$out"; exit 1; }
echo "$out" | grep -E "^test |test result"
# A filter that matches nothing passes silently: make sure each test ran.
for t in "${TESTS[@]}"; do
  echo "$out" | grep -q "^test $t \.\.\. ok$" || { echo "error: MPICH test $t did not run" >&2; exit 1; }
done
echo "MPICH: ok"
