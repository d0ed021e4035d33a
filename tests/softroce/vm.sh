#!/bin/bash
# Soft-RoCE test harness: boots throw-away qemu VMs (TCG) whose kernel runs rdma_rxe, so
# real RDMA verbs tests run on a machine without RDMA hardware. See README.md.
#
#   vm.sh setup                        install packages, build the initramfs
#   vm.sh one GUEST_SCRIPT [ARGS...]   one VM, rxe0 on a dummy netdev
#   vm.sh two GUEST_SCRIPT [ARGS...]   two VMs (server a, client b) on a UDP link
#
# The VM's root is the host's root (read-only over virtio-9p, tmpfs overlay on top), so
# the host's binaries and libraries run unchanged inside. The guest script's exit status
# comes back through a file in a read-write 9p share, never parsed from the console.
#
# Exit status: the guest script's (two VMs: the first non-zero of a, b); 2 when the
# harness itself fails (missing packages, boot, rxe setup, timeout), with a message
# naming the stage.
set -euo pipefail

HARNESS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HARNESS/../.." && pwd)

SOFTROCE_DIR=${SOFTROCE_DIR:-$REPO/target/softroce}
SOFTROCE_TIMEOUT=${SOFTROCE_TIMEOUT:-600}           # whole VM, boot to poweroff
SOFTROCE_BOOT_TIMEOUT=${SOFTROCE_BOOT_TIMEOUT:-120} # qemu start to guest.sh running
SOFTROCE_PORT_TIMEOUT=${SOFTROCE_PORT_TIMEOUT:-30}  # rxe port ACTIVE, GID present
SOFTROCE_PEER_TIMEOUT=${SOFTROCE_PEER_TIMEOUT:-90}  # two VMs: peer answers ping
SOFTROCE_PEER_GRACE=${SOFTROCE_PEER_GRACE:-20}      # two VMs: wait after one failed
SOFTROCE_BOOT_RETRIES=${SOFTROCE_BOOT_RETRIES:-1}   # boots again when a VM never started
SOFTROCE_MEM=${SOFTROCE_MEM:-2048}                  # MiB per VM
SOFTROCE_SMP=${SOFTROCE_SMP:-2}                     # vCPUs per VM
SOFTROCE_MTU=${SOFTROCE_MTU:-9000}                  # netdev MTU; 9000 gives active MTU 4096
SOFTROCE_ENV=${SOFTROCE_ENV:-}                      # host env var names to pass to guests
SOFTROCE_APPEND=${SOFTROCE_APPEND:-}                # extra kernel command line
SOFTROCE_TSC=${SOFTROCE_TSC:-1}                     # 1: tsc=reliable (cheap guest clock)
SOFTROCE_NICE=${SOFTROCE_NICE:-0}                   # qemu's niceness (the test command: 5)

PACKAGES=(qemu-system-x86 linux-image-amd64 rdma-core ibverbs-providers ibverbs-utils
    perftest busybox-static iproute2 openmpi-bin ethtool openssh-server)
# Modules the initramfs needs to mount its root; their dependencies are added from modinfo.
INITRAMFS_MODULES=(virtio_pci 9pnet_virtio 9p overlay)

say() { echo "softroce: $*" >&2; }
die() {
    local rc=$1
    shift
    say "FAILED: $*"
    exit "$rc"
}

usage() {
    cat >&2 << 'EOF'
usage: vm.sh setup
       vm.sh one GUEST_SCRIPT [ARGS...]
       vm.sh two GUEST_SCRIPT [ARGS...]
Boots qemu VMs with Soft-RoCE (rxe0) and runs GUEST_SCRIPT inside. See tests/softroce/README.md.
EOF
    exit 2
}

# ---------------------------------------------------------------- setup

installed() { dpkg-query -W -f='${Status}' "$1" 2> /dev/null | grep -q 'ok installed'; }

ensure_packages() {
    local p missing=()
    for p in "${PACKAGES[@]}"; do
        installed "$p" || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    ((EUID == 0)) || die 2 "missing packages: ${missing[*]}; run as root, or: sudo apt-get install -y ${missing[*]}"
    say "installing ${missing[*]} (log: $SOFTROCE_DIR/apt.log)"
    mkdir -p "$SOFTROCE_DIR"
    # Another apt may hold the dpkg lock (CI images, unattended upgrades): wait for it,
    # and retry the whole thing a few times for flaky mirrors.
    local try ok=0 apt=(apt-get -q -y -o DPkg::Lock::Timeout=600)
    # openssh-server is for the two VMs' mpirun (sshd runs inside them): no package's
    # service may start on the host while it installs (policy-rc.d 101 says so to
    # invoke-rc.d and deb-systemd-invoke); removed afterwards when this made it.
    local policy=/usr/sbin/policy-rc.d own_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && own_policy=1
    fi
    for try in 1 2 3; do
        if DEBIAN_FRONTEND=noninteractive "${apt[@]}" update > "$SOFTROCE_DIR/apt.log" 2>&1 &&
            DEBIAN_FRONTEND=noninteractive "${apt[@]}" install --no-install-recommends \
                "${missing[@]}" >> "$SOFTROCE_DIR/apt.log" 2>&1; then
            ok=1
            break
        fi
        say "apt-get failed (try $try of 3)"
        sleep 10
    done
    ((own_policy)) && rm -f "$policy"
    ((ok)) && return 0
    tail -n 20 "$SOFTROCE_DIR/apt.log" >&2
    die 2 "cannot install ${missing[*]}; see $SOFTROCE_DIR/apt.log"
}

# The guest kernel: the newest /boot/vmlinuz-* that has its modules installed. Not
# `uname -r`: the host may run another kernel (or none of Debian's, in a container).
find_kernel() {
    local k v
    KVER=${SOFTROCE_KVER:-}
    if [[ -z $KVER ]]; then
        # Oldest to newest; the last one with modules wins.
        while read -r k; do
            v=${k#/boot/vmlinuz-}
            [[ -e /lib/modules/$v/modules.dep ]] && KVER=$v
        done < <(printf '%s\n' /boot/vmlinuz-* | sort -V)
    fi
    [[ -n $KVER ]] || die 2 "no /boot/vmlinuz-* with modules in /lib/modules; run: vm.sh setup (installs linux-image-amd64)"
    KERNEL=/boot/vmlinuz-$KVER
    [[ -r $KERNEL ]] || die 2 "cannot read $KERNEL (run as root?)"
    modinfo -k "$KVER" rdma_rxe > /dev/null 2>&1 || die 2 "kernel $KVER has no rdma_rxe module"
}

# Prints the .ko paths of "$@" and their dependencies, dependencies first.
module_closure() {
    local -A seen=()
    local out=()
    visit() {
        local m=$1 f deps d
        [[ -n ${seen[$m]:-} ]] && return 0
        seen[$m]=1
        # Built into the kernel, or missing (then build_initramfs complains).
        f=$(modinfo -k "$KVER" -F filename "$m" 2> /dev/null) || return 0
        [[ $f == /* ]] || return 0
        deps=$(modinfo -k "$KVER" -F depends "$m")
        for d in ${deps//,/ }; do visit "$d"; done
        out+=("$f")
    }
    local m
    for m in "$@"; do visit "$m"; done
    printf '%s\n' "${out[@]}"
}

# Builds $INITRD from busybox, the modules above and ./init. Rebuilt only when one of
# those inputs changes (key = hash of the kernel version and the input files).
build_initramfs() {
    command -v busybox > /dev/null || die 2 "busybox missing; run: vm.sh setup"
    local busybox
    busybox=$(command -v busybox)
    local mods
    mapfile -t mods < <(module_closure "${INITRAMFS_MODULES[@]}")
    local m
    for m in "${INITRAMFS_MODULES[@]}"; do
        printf '%s\n' "${mods[@]}" | grep -q "/$m.ko" || modinfo -k "$KVER" "$m" > /dev/null 2>&1 ||
            die 2 "kernel $KVER has no module $m (needed to mount the host root)"
    done
    INITRD=$SOFTROCE_DIR/initramfs-$KVER.cpio.gz
    local key
    key=$( {
        echo "$KVER"
        sha256sum "$HARNESS/init" "$busybox" "${mods[@]}"
    } | sha256sum | cut -d' ' -f1)
    if [[ -e $INITRD && "$(cat "$INITRD.key" 2> /dev/null)" == "$key" ]]; then
        return 0
    fi
    say "building $INITRD"
    mkdir -p "$SOFTROCE_DIR"
    local tmp
    tmp=$(mktemp -d "$SOFTROCE_DIR/initramfs.XXXXXX")
    mkdir -p "$tmp"/{bin,sbin,dev,proc,sys,modules,lower,rw,newroot,ctl}
    cp "$busybox" "$tmp/bin/busybox"
    local a
    for a in $("$busybox" --list); do
        [[ $a == busybox ]] || ln -s busybox "$tmp/bin/$a"
    done
    # The kernel runs this for on-demand module loads (rdma_rxe needs crc32): do it with
    # the host root's modprobe and modules.dep.
    printf '#!/bin/sh\nexec /bin/chroot /newroot /sbin/modprobe "$@"\n' > "$tmp/sbin/softroce-modprobe"
    chmod 755 "$tmp/sbin/softroce-modprobe"
    local f
    for f in "${mods[@]}"; do
        cp "$f" "$tmp/modules/"
        basename "$f" >> "$tmp/modules/order"
    done
    install -m 755 "$HARNESS/init" "$tmp/init"
    # The kernel opens /dev/console for init before init can mount devtmpfs.
    mknod "$tmp/dev/console" c 5 1 2> /dev/null || true
    (cd "$tmp" && find . | "$busybox" cpio -o -H newc 2> /dev/null) | gzip -1 > "$INITRD.tmp"
    mv "$INITRD.tmp" "$INITRD"
    echo "$key" > "$INITRD.key"
    rm -rf "$tmp"
}

# The guest kernel as an uncompressed ELF vmlinux, cached. qemu boots it through its PVH
# entry (Debian builds CONFIG_PVH=y), which skips decompressing the bzImage: under TCG the
# XZ decompression alone took about 12 s of every boot. Sets BOOT_KERNEL; falls back to
# the bzImage when extraction fails or SOFTROCE_PVH=0.
prepare_kernel() {
    BOOT_KERNEL=$KERNEL
    [[ ${SOFTROCE_PVH:-1} == 1 ]] || return 0
    local vmlinux=$SOFTROCE_DIR/vmlinux-$KVER key
    key=$(sha256sum "$KERNEL" | cut -d' ' -f1)
    if [[ -e $vmlinux && "$(cat "$vmlinux.key" 2> /dev/null)" == "$key" ]]; then
        BOOT_KERNEL=$vmlinux
        return 0
    fi
    mkdir -p "$SOFTROCE_DIR"
    # Find the compressed payload by its magic and try each candidate offset.
    local magic unpack off
    for magic in '\xfd7zXZ\x00:xz -dc' '\x28\xb5\x2f\xfd:zstd -dcq' '\x1f\x8b\x08:gzip -dc'; do
        unpack=${magic#*:}
        command -v "${unpack%% *}" > /dev/null || continue
        while read -r off; do
            tail -c +$((off + 1)) "$KERNEL" | $unpack > "$vmlinux.tmp.$$" 2> /dev/null || true
            # An ELF with the Xen/PVH note; trailing garbage makes the unpacker fail, so
            # judge the output, not the exit status.
            if [[ "$(head -c 4 "$vmlinux.tmp.$$" | od -An -c | tr -d ' ')" == '177ELF' ]] &&
                LC_ALL=C grep -qa 'Xen' "$vmlinux.tmp.$$"; then
                mv "$vmlinux.tmp.$$" "$vmlinux"
                echo "$key" > "$vmlinux.key"
                BOOT_KERNEL=$vmlinux
                return 0
            fi
        done < <(LC_ALL=C grep -obUaP "${magic%%:*}" "$KERNEL" | cut -d: -f1)
    done
    rm -f "$vmlinux.tmp.$$"
    say "could not extract an uncompressed vmlinux from $KERNEL; booting the bzImage (slower)"
}

cmd_setup() {
    ensure_packages
    find_kernel
    prepare_kernel
    build_initramfs
    say "ready: kernel $BOOT_KERNEL, initramfs $INITRD"
}

# ---------------------------------------------------------------- running VMs

# A UDP port on 127.0.0.1 that nothing listens on now.
free_udp_port() {
    local p _
    for _ in $(seq 100); do
        p=$((20000 + RANDOM % 40000))
        [[ -z "$(ss -Huln "sport = :$p")" ]] && {
            echo "$p"
            return 0
        }
    done
    die 2 "no free UDP port found on 127.0.0.1"
}

# write_job VM ROLE IP PEER_IP NETDEV: the run dir the VM's ctl share exports.
write_job() {
    local vm=$1 role=$2 ip=$3 peer=$4 netdev=$5
    local dir=$RUN/$vm
    mkdir -p "$dir/out"
    echo "$dir" > "$dir/rundir"
    echo "$HARNESS/guest.sh" > "$dir/guest_sh"
    {
        printf 'export SOFTROCE_%s=%q\n' \
            SHAPE "$SHAPE" VM "$vm" DEV rxe0 NETDEV "$netdev" IP "$ip" \
            OUT "$dir/out" MTU "$SOFTROCE_MTU" HARNESS "$HARNESS" CWD "$PWD" \
            TIMEOUT "$SOFTROCE_TIMEOUT" DEADLINE "$(($(date +%s) + SOFTROCE_TIMEOUT))" PORT_TIMEOUT "$SOFTROCE_PORT_TIMEOUT" \
            PEER_TIMEOUT "$SOFTROCE_PEER_TIMEOUT"
        if [[ $SHAPE == two ]]; then
            printf 'export SOFTROCE_%s=%q\n' ROLE "$role" PEER_IP "$peer"
        fi
        printf 'SOFTROCE_SCRIPT=%q\n' "$SCRIPT"
        printf 'SOFTROCE_ARGS=(%s)\n' "${ARGS[*]@Q}"
        local name
        for name in $SOFTROCE_ENV; do
            [[ -n ${!name+x} ]] && printf 'export %s=%q\n' "$name" "${!name}"
        done
    } > "$dir/job.env"
}

# start_vm VM [qemu args...]: starts qemu in the background, console to the terminal
# (prefixed with the VM name in the two-VM shape) and to $RUN/VM/console.log.
start_vm() {
    local vm=$1
    shift
    local dir=$RUN/$vm prefix=""
    [[ $SHAPE == two ]] && prefix="[$vm] "
    local cmdline="console=ttyS0 quiet loglevel=$LOGLEVEL panic=-1 rdinit=/init"
    # Under TCG the guest's TSC is the host's invariant TSC, but the kernel calls it
    # unsynchronized and falls back to hpet, where clock_gettime costs 1-4 us (an MMIO
    # exit per call): timing loops then measure the clock, and perftest's CPU-clock
    # calibration fails under load ("Can't produce a report"). tsc=reliable keeps the TSC:
    # clock_gettime through the vDSO, about 0.3 us.
    [[ $SOFTROCE_TSC == 1 ]] && cmdline+=" tsc=reliable"
    cmdline+=" $SOFTROCE_APPEND"
    # -no-reboot: a kernel panic (panic=-1 reboots) ends qemu instead of looping.
    # Shares: the host root read-only; the run dir read-write. multidevs=remap keeps inode
    # numbers unique across the host's many filesystems.
    # shellcheck disable=SC2054 # commas belong to qemu's option syntax
    local qemu=(nice -n "$SOFTROCE_NICE" qemu-system-x86_64 -name "softroce-$vm"
        -accel tcg,thread=multi -cpu max -smp "$SOFTROCE_SMP" -m "$SOFTROCE_MEM"
        -nodefaults -no-user-config -display none -monitor none -serial stdio -no-reboot
        -pidfile "$dir/qemu.pid"
        -kernel "$BOOT_KERNEL" -initrd "$INITRD" -append "$cmdline"
        -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
        -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
        -fsdev "local,id=ctl,path=$dir,security_model=none,multidevs=remap"
        -device virtio-9p-pci,fsdev=ctl,mount_tag=ctl
        "$@")
    echo "${qemu[*]}" > "$dir/qemu.cmd"
    (
        set +e
        "${qemu[@]}" < /dev/null 2>&1 | sed -u 's/\r$//' | tee -a "$dir/console.log" |
            sed -u "s/^/$prefix/"
        exit "${PIPESTATUS[0]}"
    ) &
    SUB_PID[$vm]=$!
    START[$vm]=$SECONDS
}

qemu_pid() { cat "$RUN/$1/qemu.pid" 2> /dev/null || true; }

# Stops the VM's qemu (TERM, then KILL) and its console pipeline. Only our own pids.
kill_vm() {
    local vm=$1 pid
    pid=$(qemu_pid "$vm")
    if [[ -n $pid ]]; then
        kill "$pid" 2> /dev/null || true
        sleep 1
        kill -9 "$pid" 2> /dev/null || true
    fi
    kill "${SUB_PID[$vm]}" 2> /dev/null || true
}

cleanup() {
    local vm
    for vm in "${!SUB_PID[@]}"; do
        if [[ -z ${FINISHED[$vm]:-} ]]; then kill_vm "$vm"; fi
    done
}

stage_of() { cat "$RUN/$1/stage" 2> /dev/null || echo "none (no output from the initramfs)"; }

# The verdict on a finished VM: sets RESULT[vm] (ok|fail) and MSG[vm].
judge_vm() {
    local vm=$1 dir=$RUN/$1 what="VM $1"
    [[ $SHAPE == two ]] && what="VM $1 (${ROLE[$1]})"
    if [[ -n ${KILLED[$vm]:-} ]]; then
        RESULT[$vm]=fail MSG[$vm]="$what: ${KILLED[$vm]}"
    elif [[ -e $dir/rc ]]; then
        local rc
        rc=$(cat "$dir/rc")
        if [[ $(cat "$dir/stage" 2> /dev/null) == script-timeout ]]; then
            RESULT[$vm]=fail MSG[$vm]="$what: guest script timed out (SOFTROCE_TIMEOUT=${SOFTROCE_TIMEOUT}s)"
            SCRIPT_RC[$vm]=$rc
        elif [[ $rc == 0 ]]; then
            RESULT[$vm]=ok MSG[$vm]="$what: guest script passed"
        else
            RESULT[$vm]=fail MSG[$vm]="$what: guest script exited $rc"
            SCRIPT_RC[$vm]=$rc
        fi
    elif [[ -e $dir/error ]]; then
        RESULT[$vm]=fail MSG[$vm]="$what: harness setup failed: $(cat "$dir/error")"
    elif [[ ! -e $dir/stage ]]; then
        RESULT[$vm]=fail MSG[$vm]="$what: failed to boot (qemu exit ${QEMU_RC[$vm]}, no sign of the initramfs); see $dir/console.log"
    else
        RESULT[$vm]=fail MSG[$vm]="$what: VM stopped in stage $(stage_of "$vm") without a result (qemu exit ${QEMU_RC[$vm]}; kernel panic?); see $dir/console.log"
    fi
}

# Watches the VMs until all have stopped, enforcing the boot and overall timeouts.
watch_vms() {
    local vm st now pending=1
    while ((pending)); do
        pending=0
        now=$SECONDS
        for vm in "${VMS[@]}"; do
            [[ -n ${FINISHED[$vm]:-} ]] && continue
            if ! kill -0 "${SUB_PID[$vm]}" 2> /dev/null; then
                local rc=0
                wait "${SUB_PID[$vm]}" || rc=$?
                FINISHED[$vm]=1 QEMU_RC[$vm]=$rc END[$vm]=$now
                judge_vm "$vm"
                continue
            fi
            pending=1
            st=$(cat "$RUN/$vm/stage" 2> /dev/null || true)
            if [[ -z ${BOOTED[$vm]:-} && -n $st && $st != initramfs ]]; then
                BOOTED[$vm]=$((now - START[$vm]))
            fi
            if [[ -z ${READY[$vm]:-} && $st == script ]]; then
                READY[$vm]=$((now - START[$vm]))
            fi
            if [[ -z ${BOOTED[$vm]:-} ]] && ((now - START[$vm] >= SOFTROCE_BOOT_TIMEOUT)); then
                KILLED[$vm]="boot timed out after ${SOFTROCE_BOOT_TIMEOUT}s (SOFTROCE_BOOT_TIMEOUT) in stage $(stage_of "$vm")"
                kill_vm "$vm"
            elif ((now - START[$vm] >= SOFTROCE_TIMEOUT)); then
                KILLED[$vm]="killed after ${SOFTROCE_TIMEOUT}s (SOFTROCE_TIMEOUT) in stage $(stage_of "$vm")"
                kill_vm "$vm"
            else
                # Two VMs: once one has failed, the other usually waits for it forever.
                local other
                for other in "${VMS[@]}"; do
                    if [[ $other != "$vm" && ${RESULT[$other]:-} == fail ]] &&
                        ((now - END[$other] >= SOFTROCE_PEER_GRACE)); then
                        KILLED[$vm]="killed ${SOFTROCE_PEER_GRACE}s after VM $other failed (stage $(stage_of "$vm"))"
                        kill_vm "$vm"
                    fi
                done
            fi
        done
        if ((pending)); then sleep 0.5; fi
    done
}

# Writes the VMs' jobs and starts them. Two VMs start one after the other: b once a's
# initramfs has begun (a few seconds), so the two TCG boots do not fight for the host's
# cores at once, which is when a boot has been seen to stall on a busy 2-core machine.
boot_vms() {
    if [[ $SHAPE == one ]]; then
        write_job a "" 10.99.0.1 "" sr0
        start_vm a
        return
    fi
    local pa pb
    pa=$(free_udp_port)
    pb=$(free_udp_port)
    while [[ $pb == "$pa" ]]; do pb=$(free_udp_port); done
    write_job a server 10.99.0.1 10.99.0.2 eth0
    write_job b client 10.99.0.2 10.99.0.1 eth0
    cp "$RUN/ssh_key" "$RUN/ssh_key.pub" "$RUN/a/"
    cp "$RUN/ssh_key" "$RUN/ssh_key.pub" "$RUN/b/"
    # Each VM sends to the other's port and listens on its own, only on 127.0.0.1.
    start_vm a -netdev "socket,id=n0,udp=127.0.0.1:$pb,localaddr=127.0.0.1:$pa" \
        -device virtio-net-pci,netdev=n0,mac=52:54:00:99:00:01
    # Up to the boot timeout; a that never starts is judged by watch_vms as usual.
    local waited=0
    while [[ ! -e $RUN/a/stage ]] && kill -0 "${SUB_PID[a]}" 2> /dev/null &&
        ((waited < SOFTROCE_BOOT_TIMEOUT * 2)); do
        sleep 0.5
        waited=$((waited + 1))
    done
    start_vm b -netdev "socket,id=n0,udp=127.0.0.1:$pa,localaddr=127.0.0.1:$pb" \
        -device virtio-net-pci,netdev=n0,mac=52:54:00:99:00:02
}

# True when some VM never reached its initramfs and no guest script ran anywhere.
never_started() {
    local vm silent=1
    for vm in "${VMS[@]}"; do
        if [[ -e $RUN/$vm/rc ]]; then return 1; fi
        if [[ ! -e $RUN/$vm/stage ]]; then silent=0; fi
    done
    return "$silent"
}

cmd_run() {
    SHAPE=$1
    shift
    (($# >= 1)) || usage
    local script=$1
    shift
    ARGS=("$@")
    [[ -f $script ]] || die 2 "guest script not found: $script"
    [[ -r $script ]] || die 2 "guest script not readable: $script"
    SCRIPT=$(realpath "$script")
    [[ $SCRIPT == /proc/* || $SCRIPT == /sys/* || $SCRIPT == /dev/* ]] &&
        die 2 "guest script $SCRIPT is not on a filesystem the VM sees"

    command -v qemu-system-x86_64 > /dev/null || die 2 "qemu-system-x86_64 missing; run: vm.sh setup"
    find_kernel
    prepare_kernel
    build_initramfs

    RUN=${SOFTROCE_RUN:-$SOFTROCE_DIR/runs/$SHAPE-$(date +%Y%m%d-%H%M%S)-$$}
    mkdir -p "$RUN"
    RUN=$(realpath "$RUN")
    ln -sfn "$RUN" "$SOFTROCE_DIR/runs/latest" 2> /dev/null || true

    declare -gA SUB_PID=() START=() FINISHED=() QEMU_RC=() END=() BOOTED=() READY=()
    declare -gA KILLED=() RESULT=() MSG=() SCRIPT_RC=() ROLE=()
    trap cleanup EXIT
    trap 'say "interrupted"; exit 130' INT TERM

    say "$SHAPE VM shape, kernel $KVER, run dir $RUN"
    if [[ $SHAPE == one ]]; then
        VMS=(a)
    else
        VMS=(a b)
        ROLE=([a]=server [b]=client)
        # One key for both VMs' root, so mpirun in one starts its daemon in the other
        # over ssh (guest.sh starts sshd); made afresh for each run, never reused.
        ssh-keygen -q -t ed25519 -N '' -C softroce -f "$RUN/ssh_key" || die 2 "ssh-keygen failed"
    fi
    LOGLEVEL=3
    local attempt=1
    while :; do
        boot_vms
        watch_vms
        # A VM that never reached its initramfs ran nothing: no guest script's result is
        # lost by booting again. Once, with the kernel's messages on the console, so a
        # second hang shows where the kernel stopped.
        if ((attempt <= SOFTROCE_BOOT_RETRIES)) && never_started; then
            local vm
            for vm in "${VMS[@]}"; do
                if [[ -e $RUN/$vm/console.log ]]; then
                    mv "$RUN/$vm/console.log" "$RUN/$vm/console.attempt$attempt.log"
                fi
                rm -f "$RUN/$vm"/{stage,error,rc,qemu.pid}
            done
            say "a VM showed no sign of its initramfs (${MSG[*]}); no guest script ran, so booting again (attempt $((attempt + 1)), kernel messages on: loglevel 7; SOFTROCE_BOOT_RETRIES=$SOFTROCE_BOOT_RETRIES); the first console logs are console.attempt$attempt.log"
            attempt=$((attempt + 1))
            LOGLEVEL=7
            SUB_PID=() START=() FINISHED=() QEMU_RC=() END=() BOOTED=() READY=()
            KILLED=() RESULT=() MSG=() SCRIPT_RC=()
            continue
        fi
        break
    done

    # Exit with the first failing guest script's status; 2 when only the harness failed.
    local vm rc=0 timing
    for vm in "${VMS[@]}"; do
        timing="boot ${BOOTED[$vm]:-?}s, rxe ready ${READY[$vm]:-?}s, total $((END[$vm] - START[$vm]))s"
        say "${MSG[$vm]} [$timing]"
        [[ ${RESULT[$vm]} == ok ]] && continue
        if [[ -n ${SCRIPT_RC[$vm]:-} ]] && ((rc == 0 || rc == 2)); then
            rc=${SCRIPT_RC[$vm]}
        elif ((rc == 0)); then
            rc=2
        fi
    done
    say "outputs in $RUN/{$(
        IFS=,
        echo "${VMS[*]}"
    )}/out, console logs beside them"
    if ((rc == 0)); then
        say "PASS ($SHAPE)"
    else
        say "FAIL ($SHAPE), exit $rc"
    fi
    return "$rc"
}

main() {
    (($# >= 1)) || usage
    case $1 in
    setup) cmd_setup ;;
    one | two) cmd_run "$@" ;;
    -h | --help | help) usage ;;
    *)
        say "unknown command: $1"
        usage
        ;;
    esac
}

main "$@"
