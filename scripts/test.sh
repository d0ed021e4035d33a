#!/usr/bin/env bash
# The project's test command (the README's second command, and what CI runs): installs the
# Debian packages the tests need when missing, checks formatting and lints, builds every
# binary, runs every test against the real binaries and peers, then the Soft-RoCE suite
# (real verbs in qemu VMs) when present. Fails on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/deps.sh

# A fresh clone gains nothing from incremental caches, and they were a third of the disk a
# run took. Set CARGO_INCREMENTAL=1 to keep them while iterating.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

# Everything this command builds (debug, MPICH, release, the CUDA probe) and the Soft-RoCE
# VM image took 7.1 GiB in target/ on a fresh clone (2026-12-03); the debootstrap chroot
# adds about 0.2 GiB under /var/cache/fabcheck. FRESH_GIB keeps a margin above that.
# Running out mid-build fails with a cargo error deep in the log; say it up front instead,
# counting what target/ already holds.
FRESH_GIB=12
target_dir=${CARGO_TARGET_DIR:-target}
have_kib=0
if [ -d "$target_dir" ]; then have_kib=$(du -sk "$target_dir" | cut -f1); fi
probe_dir=$(realpath -m "$target_dir")
while [ ! -d "$probe_dir" ]; do probe_dir=$(dirname "$probe_dir"); done
free_kib=$(df -Pk "$probe_dir" | awk 'NR == 2 { print $4 }')
need_kib=$((FRESH_GIB * 1024 * 1024 - have_kib))
if [ "$need_kib" -gt "$free_kib" ]; then
  echo "error: not enough disk for the test command: about $((need_kib / 1024 / 1024)) GiB more is needed under $target_dir, $((free_kib / 1024 / 1024)) GiB is free." >&2
  echo "next step: free space on that filesystem, or point CARGO_TARGET_DIR at a larger one." >&2
  exit 1
fi
need_packages "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}"
need_mpich

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

echo "== build"
cargo build --workspace --bins

echo "== unit and end-to-end tests"
cargo test --workspace

echo "== MPICH: the MPI binaries built against MPICH, tested under its mpiexec"
scripts/test-mpich.sh

if [ -x tests/softroce/run-all.sh ]; then
  echo "== verbs on Soft-RoCE (qemu VMs)"
  tests/softroce/run-all.sh
fi
if [ "${FABCHECK_GPU_BUNDLE:-1}" != 0 ]; then
  # The bundle a GPU machine gets, made afresh from the release build above (about a
  # minute: only the probe example is built again, with cuda and verbs) and run in a bare
  # Debian 12 chroot (made once with debootstrap, then cached). When it was opt-in it
  # broke unnoticed (it built a package the layering had removed). FABCHECK_GPU_BUNDLE=0
  # skips it.
  echo "== the GPU bundle in a bare Debian 12 chroot"
  rm -rf target/gpu-bundle
  scripts/gpu-bundle.sh target/gpu-bundle
  tests/gpu-bundle/chroot-check.sh target/gpu-bundle
fi
echo "all tests passed"
