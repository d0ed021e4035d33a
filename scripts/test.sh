#!/usr/bin/env bash
# The project's test command (the README's second command, and what CI runs): installs the
# Debian packages the tests need when missing, checks formatting and lints, builds every
# binary and test, then runs two lanes side by side and fails if either failed:
#
#   host lane: `cargo test --workspace` (unit tests and the end-to-end tests against the
#              real binaries and peers), then the MPI binaries against MPICH,
#              then the OCI image, built and proven in a chroot, and the Kubernetes
#              manifests against the API's schemas;
#   VM lane:   the release build, the Soft-RoCE suite (real verbs in qemu VMs), the GPU
#              bundle in a bare Debian 12 chroot.
#
# Why two lanes: the host tests mostly wait (shaped links, timeouts, peers starting) and
# left a core idle; the VM lane is compute (the release build, TCG). Run one after the
# other they took 39 minutes on a fresh clone of this 2-core machine; side by side the VM
# lane takes the idle core. The release build runs at the host lane's priority (the host
# tests passed beside it; at nice 10 it starved behind their MPI ranks and took 24 minutes
# instead of 5); the VMs' qemu runs at nice 5 (SOFTROCE_NICE): at the same priority its
# busy vCPUs starved the simulated fabric's shaped TCP sweeps, and a healthy link read as
# one slow direction (0.42 against a rail median of 0.92 Gb/s); at nice 10 (a tenth of a
# busy core's share) the one-VM suite took 892 s beside the host tests against 350 s alone
# and ran into its timeout. The simulated fabric's hosts run at nice -5 (SIMFABRIC_NICE),
# so nice 5 still leaves them nine tenths of a contended core. The VM lane builds
# in a target directory of its own (target/vm: cargo locks a target directory while it
# builds or tests, so one directory would serialise the lanes), without debug info (the
# VM tests need none and the GPU bundle strips it).
# FABCHECK_LANES=serial runs them one after the other (to read one lane's log alone).
# Each phase's time is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/deps.sh

# A fresh clone gains nothing from incremental caches, and they were a third of the disk a
# run took. Set CARGO_INCREMENTAL=1 to keep them while iterating.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

# Everything this command builds (debug, MPICH, release, the CUDA probe) and the Soft-RoCE
# VM image took 7.1 GiB in target/ on a fresh clone (2026-12-03); the OCI image about 0.4
# GiB more (target/image), and the two debootstrap roots (the GPU bundle's chroot, the
# image's base) about 0.45 GiB under /var/cache/fabcheck. FRESH_GIB keeps a margin above that.
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

# phase NAME CMD...: runs CMD, appends "NAME SECONDS STATUS" to $PHASES.
LOGS=$target_dir/test-logs
mkdir -p "$LOGS"
PHASES=$LOGS/phases
: > "$PHASES"
T0=$SECONDS
phase() {
  local name=$1 t0=$SECONDS rc=0
  shift
  echo "== $name"
  "$@" || rc=$?
  echo "$name $((SECONDS - t0)) $rc" >> "$PHASES"
  return "$rc"
}
print_phases() {
  echo "== phase times (wall seconds; the host and VM lanes ran side by side)"
  awk '{ printf "  %-28s %5d s%s\n", $1, $2, ($3 == 0 ? "" : "  FAILED (exit " $3 ")") }' "$PHASES"
  echo "  total                        $((SECONDS - T0)) s"
}
trap print_phases EXIT

# (Steps inside a phase are chained with &&: `set -e` does not hold inside a function
# whose status is tested.)
lints() {
  cargo fmt --all -- --check && cargo clippy --workspace --all-targets -- -D warnings
}

# Every binary and every test executable, so the lanes below only run what is built.
# cargo's JSON report of the test build says where each test executable is.
build() {
  cargo build --workspace --bins \
    && cargo test --workspace --no-run --message-format=json-render-diagnostics > "$LOGS/test-build.json" \
    && idempotent
}

# A second build must compile nothing. A build script that named a missing file in
# `rerun-if-changed` (results' git stamp did) reran on every cargo invocation and rebuilt
# every crate above it: each later phase compiled the workspace again.
idempotent() {
  local again
  again=$(cargo build --workspace --bins 2>&1 | grep -E '^ +Compiling' || true)
  if [ -n "$again" ]; then
    echo "error: a second build compiled again (a build script that reruns every time?):" >&2
    echo "$again" >&2
    return 1
  fi
}

# The path of the debug verbs_errors test executable (built by `build`; asking cargo
# again with `-p integration` would build it anew: features unify per selection).
verbs_errors_test() {
  python3 scripts/lib/test-executable.py verbs_errors < "$LOGS/test-build.json"
}

host_lane() {
  local rc=0
  phase tests cargo test --workspace && phase mpich scripts/test-mpich.sh || rc=1
  if [ "${FABCHECK_IMAGE:-1}" != 0 ]; then
    # The OCI image (docs/image.md), after the host tests: the host lane ends minutes
    # before the VM lane, so it costs no wall time. It takes the release binaries the VM
    # lane built (the same target directory and settings: cargo compiles nothing, or
    # waits for the VM lane's lock). The base is debootstrapped once and cached, as the
    # GPU bundle's chroot is. FABCHECK_IMAGE=0 skips it.
    phase image image || rc=1
  fi
  phase manifests tests/kubernetes/validate.sh || rc=1
  return "$rc"
}

image() {
  (
    export CARGO_TARGET_DIR=$target_dir/vm CARGO_PROFILE_RELEASE_DEBUG=0
    rm -rf "$target_dir/image" \
      && scripts/image.sh "$target_dir/image" \
      && tests/image/check.sh "$target_dir/image"
  )
}

vm_lane() {
  local rc=0
  export CARGO_TARGET_DIR=$target_dir/vm CARGO_PROFILE_RELEASE_DEBUG=0 SOFTROCE_NICE=5
  if [ -x tests/softroce/run-all.sh ]; then
    phase softroce tests/softroce/run-all.sh || rc=1
  fi
  if [ "${FABCHECK_GPU_BUNDLE:-1}" != 0 ]; then
    # The bundle a GPU machine gets, made afresh from the release build above (only the
    # probe example is built again, with cuda and verbs) and run in a bare Debian 12
    # chroot (made once with debootstrap, then cached). When it was opt-in it broke
    # unnoticed (it built a package the layering had removed). FABCHECK_GPU_BUNDLE=0
    # skips it.
    phase gpu-bundle gpu_bundle || rc=1
  fi
  return "$rc"
}

gpu_bundle() {
  rm -rf "$target_dir/gpu-bundle" \
    && scripts/gpu-bundle.sh "$target_dir/gpu-bundle" \
    && tests/gpu-bundle/chroot-check.sh "$target_dir/gpu-bundle"
}

phase packages need_packages "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}"
phase mpich-packages need_mpich
phase lints lints
phase build build

# The verbs_errors integration test runs inside a VM too (its real-device branch): the
# debug build above made it, and the VM lane must not build in target/ while the host
# lane's tests hold it, so its path is found now.
VERBS_ERRORS_TEST=$(verbs_errors_test)
[ -x "$VERBS_ERRORS_TEST" ] || { echo "error: the verbs_errors test executable was not found after the build" >&2; exit 1; }
export VERBS_ERRORS_TEST

host_rc=0
vm_rc=0
if [ "${FABCHECK_LANES:-parallel}" = serial ]; then
  host_lane || host_rc=$?
  vm_lane || vm_rc=$?
else
  echo "== VM lane started beside the host tests (its log: $LOGS/vm-lane.log, printed when it ends)"
  vm_lane > "$LOGS/vm-lane.log" 2>&1 &
  vm_pid=$!
  host_lane || host_rc=$?
  wait "$vm_pid" || vm_rc=$?
  echo "== VM lane's log ($LOGS/vm-lane.log)"
  cat "$LOGS/vm-lane.log"
fi
if [ "$host_rc" -ne 0 ] || [ "$vm_rc" -ne 0 ]; then
  echo "error: a lane failed (host lane exit $host_rc, VM lane exit $vm_rc): see the FAILED phase below and its output above" >&2
  exit 1
fi
echo "all tests passed"
