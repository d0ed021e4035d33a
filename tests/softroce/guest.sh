#!/bin/bash
# Stage 2 of a Soft-RoCE test VM: runs as root inside the VM, chrooted into the host's
# root filesystem (see init). Brings up the netdev and rxe0, waits for the port to be
# ACTIVE (and, in the two-VM shape, for the peer to answer), then runs the guest script
# with the SOFTROCE_* environment and records its exit status in /run/softroce/rc.
#
# Files in /run/softroce (the per-VM run dir, shared read-write with the host):
#   job.env  written by vm.sh: settings, the script and its arguments
#   stage    the stage we are in; vm.sh names it when something times out
#   error    written when a harness stage fails (then no rc file)
#   rc       the guest script's exit status (only when the script ran)
#   out/     SOFTROCE_OUT
# shellcheck disable=SC2317 # functions passed to wait_for look unreachable to shellcheck
set -u
CTL=/run/softroce
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
BB=/run/softroce-bin/busybox

# shellcheck source=/dev/null
source "$CTL/job.env"
# shellcheck source=gid.sh
source "$SOFTROCE_HARNESS/gid.sh"

log() { echo "softroce[$SOFTROCE_VM]: $*"; }
stage() {
    echo "$1" > "$CTL/stage"
    log "stage $1 at $(cut -d' ' -f1 /proc/uptime)s"
}
fail() {
    log "FAILED in stage $(cat "$CTL/stage"): $*"
    echo "stage $(cat "$CTL/stage"): $*" > "$CTL/error"
    exit 2
}

# Polls "$@" every 0.2 s for up to $1 seconds; true when it succeeded.
wait_for() {
    local secs=$1
    shift
    local end=$((SECONDS + secs))
    until "$@"; do
        ((SECONDS >= end)) && return 1
        sleep 0.2
    done
}

setup_names() {
    echo "softroce-$SOFTROCE_VM" > /proc/sys/kernel/hostname
    # MPI and friends like to resolve their own host name.
    {
        echo "10.99.0.1 softroce-a"
        echo "10.99.0.2 softroce-b"
    } >> /etc/hosts
    ip link set lo up
}

# One VM: a dummy netdev (rxe loops back inside the driver). Two VMs: virtio-net eth0.
setup_netdev() {
    stage netdev
    if [[ $SOFTROCE_SHAPE == one ]]; then
        modprobe dummy || fail "modprobe dummy failed"
        ip link add "$SOFTROCE_NETDEV" type dummy || fail "cannot create dummy netdev"
    else
        modprobe virtio_net || fail "modprobe virtio_net failed"
        wait_for 10 test -e "/sys/class/net/$SOFTROCE_NETDEV" \
            || fail "no $SOFTROCE_NETDEV after loading virtio_net (is the qemu NIC there?)"
    fi
    ip link set dev "$SOFTROCE_NETDEV" mtu "$SOFTROCE_MTU" \
        || fail "cannot set MTU $SOFTROCE_MTU on $SOFTROCE_NETDEV"
    ip addr add "$SOFTROCE_IP/24" dev "$SOFTROCE_NETDEV" || fail "cannot add $SOFTROCE_IP"
    ip link set dev "$SOFTROCE_NETDEV" up || fail "cannot bring $SOFTROCE_NETDEV up"
}

port_active() { grep -q ACTIVE "/sys/class/infiniband/$SOFTROCE_DEV/ports/1/state" 2>/dev/null; }
have_gid() { softroce_gid_index "$SOFTROCE_DEV" 1 "$SOFTROCE_IP" > /dev/null 2>&1; }

setup_rxe() {
    stage rxe
    # rdma_rxe pulls crc32 through the kernel's module auto-loader (see init).
    modprobe -a rdma_rxe ib_uverbs rdma_ucm || fail "modprobe rdma_rxe ib_uverbs rdma_ucm failed"
    rdma link add "$SOFTROCE_DEV" type rxe netdev "$SOFTROCE_NETDEV" \
        || fail "rdma link add $SOFTROCE_DEV type rxe netdev $SOFTROCE_NETDEV failed"
    stage port-active
    wait_for "$SOFTROCE_PORT_TIMEOUT" port_active \
        || fail "port 1 of $SOFTROCE_DEV not ACTIVE after ${SOFTROCE_PORT_TIMEOUT}s: $(cat "/sys/class/infiniband/$SOFTROCE_DEV/ports/1/state")"
    wait_for "$SOFTROCE_PORT_TIMEOUT" have_gid \
        || fail "no IPv4-mapped RoCE v2 GID on $SOFTROCE_DEV after ${SOFTROCE_PORT_TIMEOUT}s"
    SOFTROCE_GID_INDEX=$(softroce_gid_index "$SOFTROCE_DEV" 1 "$SOFTROCE_IP")
    SOFTROCE_ACTIVE_MTU=$(ibv_devinfo -d "$SOFTROCE_DEV" | awk '/active_mtu/ {print $2; exit}')
    export SOFTROCE_GID_INDEX SOFTROCE_ACTIVE_MTU
    log "$SOFTROCE_DEV on $SOFTROCE_NETDEV $SOFTROCE_IP: port ACTIVE, GID index $SOFTROCE_GID_INDEX, netdev MTU $SOFTROCE_MTU, active MTU $SOFTROCE_ACTIVE_MTU"
}

# Two VMs: sshd with the run's key for root, so mpirun in one VM starts its daemon in the
# other (OpenMPI's rsh launcher). The host's root is this VM's root (read-only, with a
# tmpfs overlay): keys and config written here stay in this VM.
setup_ssh() {
    [[ -f $CTL/ssh_key && -x /usr/sbin/sshd ]] || return 0
    stage ssh
    mkdir -p /root/.ssh /run/sshd || fail "cannot make /root/.ssh"
    install -m 600 "$CTL/ssh_key" /root/.ssh/id_ed25519
    install -m 644 "$CTL/ssh_key.pub" /root/.ssh/id_ed25519.pub
    install -m 600 "$CTL/ssh_key.pub" /root/.ssh/authorized_keys
    printf 'Host softroce-*\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  ConnectTimeout 20\n' \
        > /root/.ssh/config
    chmod 700 /root/.ssh
    ssh-keygen -A > /dev/null 2>&1 || fail "ssh-keygen -A failed"
    /usr/sbin/sshd -o PermitRootLogin=prohibit-password -o UseDNS=no \
        || fail "sshd did not start"
}

peer_answers() { "$BB" ping -c 1 -W 1 "$SOFTROCE_PEER_IP" > /dev/null 2>&1; }

# Two VMs boot at slightly different speeds: do not start the script before the link works.
wait_peer() {
    stage peer
    wait_for "$SOFTROCE_PEER_TIMEOUT" peer_answers \
        || fail "peer $SOFTROCE_PEER_IP did not answer ping within ${SOFTROCE_PEER_TIMEOUT}s (did the other VM boot? UDP link on 127.0.0.1)"
}

run_script() {
    stage script
    ulimit -l unlimited
    # Stop the script in time to power off cleanly before vm.sh's overall timeout kills
    # the VM. SOFTROCE_DEADLINE is the host's clock; the guest's clock comes from the
    # emulated RTC, so it agrees to a second. /proc/uptime alone would miss the seconds
    # qemu and the firmware spend before the kernel starts.
    local remaining
    remaining=$((SOFTROCE_DEADLINE - $(date +%s) - 10))
    ((remaining < 5)) && remaining=5
    cd "$SOFTROCE_CWD" 2> /dev/null || cd /
    local rc start=$SECONDS
    if [[ -x $SOFTROCE_SCRIPT ]]; then
        timeout -k 5 "$remaining" "$SOFTROCE_SCRIPT" "${SOFTROCE_ARGS[@]}" < /dev/null
    else
        timeout -k 5 "$remaining" bash "$SOFTROCE_SCRIPT" "${SOFTROCE_ARGS[@]}" < /dev/null
    fi
    rc=$?
    if ((rc == 124 || rc == 137)) && ((SECONDS - start >= remaining)); then
        echo "script-timeout" > "$CTL/stage"
        log "guest script killed after ${remaining}s (SOFTROCE_TIMEOUT=$SOFTROCE_TIMEOUT)"
    else
        echo "done" > "$CTL/stage"
    fi
    sync
    echo "$rc" > "$CTL/rc"
    log "guest script exited $rc after $((SECONDS - start))s"
}

main() {
    setup_names
    setup_netdev
    setup_rxe
    if [[ $SOFTROCE_SHAPE == two ]]; then
        setup_ssh
        wait_peer
    fi
    run_script
    exit 0
}

main
