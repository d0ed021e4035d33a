#!/usr/bin/env bash
# Proves the GPU bundle (scripts/gpu-bundle.sh) on a machine that has none of what the
# build host has: a minimal Debian 12 chroot (`debootstrap --variant=minbase bookworm`),
# with no rdma-core, no MPI, no CUDA and no Rust. Inside it, from the bundle alone:
#   - every bundled binary starts (no loader error: exit 127 / "error while loading
#     shared libraries" fails the check);
#   - gpudirect_probe, bench-bw --test h2d and bench-collective --backend nccl (as an MPI
#     singleton and under the bundled mpirun) reach their "no GPU" diagnostics, exit 2;
#   - bench-bw --transport verbs loads libibverbs and its providers and says "no RDMA
#     device", exit 2;
#   - real MPI works: mpirun -np 2 bench-collective all_reduce --backend mpi -c, exit 0;
#   - scripts/gpu-check.sh, run from the bundle, ends in its "no usable GPU" verdict.
#
#   tests/gpu-bundle/chroot-check.sh [BUNDLE]     (default: gpu-bundle/; built if absent)
#
# Needs root (chroot, mounts in a private mount namespace) and, the first time, Debian's
# mirror: the chroot is cached in $FABCHECK_CHROOT (default
# /var/cache/fabcheck/bookworm-minbase, about 190 MiB; made once, about 2 minutes).
# The chroot itself is never changed: the bundle is bind-mounted read-only at /opt/bundle.
# Exit 0 when every check passes, 1 when one fails, 2 when it cannot run here.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUNDLE=$(readlink -f "${1:-$ROOT/gpu-bundle}")
CHROOT=${FABCHECK_CHROOT:-/var/cache/fabcheck/bookworm-minbase}

if [[ $(id -u) -ne 0 ]]; then
    echo "chroot-check: needs root (chroot and bind mounts)" >&2
    exit 2
fi
if [[ "${1:-}" != "__inside" && -z "${CHROOT_CHECK_NS:-}" ]]; then
    # Everything below runs in a private mount namespace: its mounts vanish with it.
    [[ -x $BUNDLE/bin/bench-bw ]] || "$ROOT/scripts/gpu-bundle.sh" "$BUNDLE" || exit 2
    if [[ ! -x $CHROOT/bin/sh ]]; then
        command -v debootstrap > /dev/null || { echo "chroot-check: needs debootstrap" >&2; exit 2; }
        echo "chroot-check: making the minimal chroot $CHROOT (debootstrap, once)"
        rm -rf "$CHROOT.tmp"
        mkdir -p "$(dirname "$CHROOT")"
        debootstrap --variant=minbase bookworm "$CHROOT.tmp" http://deb.debian.org/debian \
            > "$CHROOT.log" 2>&1 || { echo "chroot-check: debootstrap failed, see $CHROOT.log" >&2; exit 2; }
        mv "$CHROOT.tmp" "$CHROOT"
    fi
    CHROOT_CHECK_NS=1 exec unshare --mount --propagation private "$0" "$BUNDLE"
fi

mkdir -p "$CHROOT/opt/bundle"
mount --bind -o ro "$BUNDLE" "$CHROOT/opt/bundle" &&
    mount --bind -o remount,ro,bind "$CHROOT/opt/bundle" &&
    mount -t proc proc "$CHROOT/proc" &&
    mount -t sysfs sys "$CHROOT/sys" &&
    mount --bind /dev "$CHROOT/dev" &&
    mount -t tmpfs tmpfs "$CHROOT/dev/shm" &&
    mount -t tmpfs tmpfs "$CHROOT/tmp" || { echo "chroot-check: mounts failed" >&2; exit 2; }

. "$ROOT/tests/lib/expect.sh"
START=$(date +%s)
# inside CMD...: runs CMD in the chroot with a clean environment; output in $OUTPUT.
inside() {
    OUTPUT=$(timeout 120 chroot "$CHROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$@" 2>&1)
}

# The chroot really lacks what the bundle brings.
inside sh -c 'ls /usr/lib/*/libibverbs.so.1 /usr/lib/*/libmpi.so.40 /usr/lib/*/librdmacm.so.1 /usr/bin/mpirun 2>/dev/null; command -v cargo nvidia-smi'
if [[ -n $OUTPUT ]]; then
    echo "FAILED the chroot is not bare: $OUTPUT"
    exit 2
fi
echo "ok     chroot $CHROOT: no rdma-core, no MPI, no CUDA, no Rust; bundle $(du -sm "$BUNDLE" | cut -f1) MiB"

B=/opt/bundle/bin
for t in bench-bw bench-lat bench-collective aggregate; do
    expect "$t starts" 0 "Usage" $B/$t --help
done
expect "gpudirect_probe without a GPU (a report, exit 0)" 0 "no usable CUDA driver" $B/gpudirect_probe
expect "bench-bw --test h2d without a GPU" 2 "no CUDA driver" $B/bench-bw --test h2d -s 1M
expect "bench-bw verbs without a NIC (libibverbs loads)" 2 "no RDMA device" \
    $B/bench-bw --transport verbs -s 64 -n 10
expect "bench-lat verbs without a NIC" 2 "no RDMA device" $B/bench-lat --transport verbs -n 10
expect "bench-collective nccl, MPI singleton" 2 "no CUDA driver" \
    $B/bench-collective all_reduce --backend nccl -b 8 -e 8
expect "bench-collective nccl under the bundled mpirun -np 1" 2 "no CUDA driver" \
    $B/mpirun -np 1 $B/bench-collective all_reduce --backend nccl -b 8 -e 8
expect "bench-collective mpi, mpirun -np 2, checked" 0 "Avg bus bandwidth" \
    $B/mpirun --oversubscribe -np 2 $B/bench-collective all_reduce --backend mpi -b 8 -e 1K -c
expect "aggregate refuses an incomplete command" 2 "Usage: aggregate report" $B/aggregate report /nonexistent
expect "gpu-check.sh from the bundle" 1 "no usable GPU" \
    env OUT=/tmp/gpu-check-out /bin/bash /opt/bundle/scripts/gpu-check.sh
echo "chroot-check: $(($(date +%s) - START)) s"
exit $FAILED
