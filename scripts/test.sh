#!/usr/bin/env bash
# The project's test command (the README's second command, and what CI runs): installs the
# Debian packages the tests need when missing, checks formatting and lints, builds every
# binary, runs every test against the real binaries and peers, then the Soft-RoCE suite
# (real verbs in qemu VMs) when present. Fails on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/deps.sh
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
