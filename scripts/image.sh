#!/usr/bin/env bash
# Builds the suite's OCI image without a container daemon, for Kubernetes (the agents'
# DaemonSet, the sweep Job), Slurm under pyxis/enroot, and Apptainer:
#
#   scripts/image.sh [OUT]          (default OUT: target/image; needs root)
#
# What it holds, in two layers:
#   1. base   Debian 12 minbase (debootstrap) with the runtime packages the suite calls
#             or links (RUNTIME_PACKAGES below: rdma-core's libraries and providers,
#             ibverbs-utils, Open MPI, iproute2 with dcb, ethtool, lldpd's lldpcli,
#             infiniband-diags, openssh-client for mpirun's remote launches), a non-root
#             user `fabcheck` (uid and gid 10001); apt's caches, logs, manuals, locales
#             and documentation other than the copyright files removed.
#   2. suite  the stripped release binaries in /usr/local/bin (bench-bw, bench-lat,
#             bench-collective, bench-congestion, fabric-doctor, aggregate, fabcheck),
#             the profiles and templates in /usr/local/share/fabcheck, the entrypoint
#             (scripts/lib/image-entrypoint.sh) and IMAGE (commit, package versions).
# Config: entrypoint /usr/local/bin/fabcheck-entrypoint (no arguments: what the image
# holds; otherwise runs its arguments), user fabcheck, the OCI labels version, revision,
# source, created, licenses, title, base.name.
#
# Written to OUT:
#   oci/                   the OCI image layout, tagged with the workspace version
#   fabcheck-VERSION.tar   the same image as a docker-archive (`docker load`, `podman
#                          load`, `apptainer build x.sif docker-archive:...`)
#   MANIFEST               layer digests and sizes, the package versions
#
# Reproducible: the same commit, built with the same base, gives the same layer and
# config digests: every file of the suite's layer has the time SOURCE_DATE_EPOCH (default:
# the commit's time), every file of the base BASE_EPOCH (Debian 12's release day, so the
# base layer is the same for every commit and a registry stores it once), umoci writes
# entries in path order, the history and creation dates are the commit's. The base is debootstrapped once and cached in FABCHECK_IMAGE_BASE (default
# /var/cache/fabcheck/image-base-HASH, HASH of the package list and this script's base
# recipe); two debootstraps on one day give the same files (tests/image/check.sh says
# how that was checked), but Debian's bookworm moves on (point releases, security
# fixes), so a base made on another day may hold newer packages: IMAGE inside lists them.
#
# Environment: SOURCE_DATE_EPOCH, FABCHECK_IMAGE_BASE, LIMIT_MIB (default 400: the
# unpacked root filesystem's bound), CARGO_TARGET_DIR (the release build's directory).
# Exit 0 on success, 2 when it cannot run here (not root, a tool missing, no mirror).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(realpath -m "${1:-$ROOT/target/image}")
LIMIT_MIB=${LIMIT_MIB:-400}
# Absolute (the script changes directory) and exported, so cargo builds where it copies from.
export CARGO_TARGET_DIR=$(realpath -m "${CARGO_TARGET_DIR:-$ROOT/target}")
TARGET=$CARGO_TARGET_DIR
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
RUNTIME_PACKAGES=(libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils openmpi-bin libopenmpi3
    iproute2 ethtool lldpd infiniband-diags openssh-client)
TOOLS=(bench-bw bench-lat bench-collective bench-congestion fabric-doctor aggregate fabcheck)
USER_ID=10001

die() {
    echo "image: $*" >&2
    exit 2
}
[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, and files owned by root in the image)"
# What the build and the image need from Debian, installed when missing (as the README's
# commands do).
. "$ROOT/scripts/lib/deps.sh"
need_packages "${BUILD_PACKAGES[@]}" debootstrap umoci skopeo binutils ||
    die "could not install the Debian packages it needs (debootstrap umoci skopeo binutils and the build's)"
for t in cargo debootstrap umoci skopeo strip git; do
    command -v $t > /dev/null || die "needs $t (Debian 12: apt-get install debootstrap umoci skopeo binutils git)"
done

cd "$ROOT"
VERSION=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "fabcheck"))')
REVISION=$(git rev-parse HEAD 2> /dev/null || echo unknown)
git diff --quiet HEAD 2> /dev/null || REVISION=$REVISION-dirty
SOURCE_URL=$(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -1)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2> /dev/null || echo 0)}
CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
# The base's files' times, whatever the commit: Debian 12.0's release, 2023-06-10.
BASE_EPOCH=1686355200

# The base recipe: a change to the package list or to normalise_base makes a new cache.
BASE_RECIPE="bookworm minbase ${RUNTIME_PACKAGES[*]} user $USER_ID normalise 4"
BASE_HASH=$(sha256sum <<< "$BASE_RECIPE" | cut -c1-12)
BASE=${FABCHECK_IMAGE_BASE:-/var/cache/fabcheck/image-base-$BASE_HASH}

# normalise_base DIR: what debootstrap leaves that is not the same twice, or not needed
# at run time, out; the user added.
normalise_base() {
    local r=$1 day=$((BASE_EPOCH / 86400))
    rm -rf "$r"/var/cache/apt/* "$r"/var/lib/apt/lists/* "$r"/var/log/* \
        "$r"/var/cache/ldconfig/aux-cache "$r"/var/lib/dpkg/*-old "$r"/var/cache/debconf/*-old \
        "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/locale/* "$r"/debootstrap
    find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
    # The container runtime writes these; debootstrap copied the build host's.
    : > "$r/etc/hostname"
    : > "$r/etc/resolv.conf"
    # The day of the last password change is the day the base was made.
    sed -i -E "s/^([^:]*:[^:]*:)[0-9]+:/\1$day:/" "$r/etc/shadow"
    echo "fabcheck:x:$USER_ID:$USER_ID:fabcheck suite:/home/fabcheck:/bin/sh" >> "$r/etc/passwd"
    echo "fabcheck:x:$USER_ID:" >> "$r/etc/group"
    echo "fabcheck:!:$day:0:99999:7:::" >> "$r/etc/shadow"
    echo "fabcheck:!::" >> "$r/etc/gshadow"
    # lldpcli is setuid _lldpd and runnable by group adm only (lldpd's postinst sets that
    # with dpkg-statoverride): the user joins adm to run it against the host's lldpd
    # (its socket, /run/lldpd.socket, mounted into the container).
    sed -i -E 's/^(adm:[^:]*:[0-9]+:)(.*)$/\1\2,fabcheck/; s/^(adm:[^:]*:[0-9]+:),/\1/' "$r/etc/group"
    sed -i -E 's/^(adm:[^:]*:[^:]*:)(.*)$/\1\2,fabcheck/; s/^(adm:[^:]*:[^:]*:),/\1/' "$r/etc/gshadow"
    install -d -o "$USER_ID" -g "$USER_ID" -m 0755 "$r/home/fabcheck"
    chroot "$r" dpkg-query -W -f '${Package} ${Version}\n' > "$r.packages"
}

# base_digest DIR: one digest of every path's name, mode, owner, size, link target and
# content (not its time: pin_times sets those for each build).
base_digest() {
    (
        cd "$1" &&
            find . -printf '%p %m %U %G %s %l\n' | LC_ALL=C sort &&
            find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    ) | sha256sum | cut -d' ' -f1
}

# The cached base as it was made, or a new one. A base changed since (a chroot into it to
# look around leaves apt's caches behind) would give another layer for the same commit:
# refused, with the way out.
make_base() {
    if [[ -x $BASE/bin/sh && -f $BASE.packages && -f $BASE.digest ]]; then
        [[ $(base_digest "$BASE") == "$(cat "$BASE.digest")" ]] ||
            die "the cached base $BASE changed since it was made (a file added, removed or edited): delete it (rm -rf $BASE*) and run again"
        return 0
    fi
    echo "image: making the base $BASE (debootstrap, once; about 2 minutes)"
    rm -rf "$BASE.tmp"
    mkdir -p "$(dirname "$BASE")"
    local include
    include=$(IFS=,; echo "${RUNTIME_PACKAGES[*]}")
    debootstrap --variant=minbase --include="$include" bookworm "$BASE.tmp" "$MIRROR" \
        > "$BASE.log" 2>&1 || die "debootstrap failed (see $BASE.log): is $MIRROR reachable?"
    normalise_base "$BASE.tmp"
    mv "$BASE.tmp.packages" "$BASE.packages"
    mv "$BASE.tmp" "$BASE"
    base_digest "$BASE" > "$BASE.digest"
}

build_suite() {
    . "$ROOT/scripts/lib/release-packages.sh"
    echo "image: building the release binaries in $TARGET"
    # Without SOURCE_DATE_EPOCH: a dependency's build reads it, and with it set cargo
    # compiled the suite again instead of taking the release build already made (the
    # binaries are the same for one commit without it).
    env -u SOURCE_DATE_EPOCH cargo build --release --quiet "${RELEASE_PACKAGES[@]}"
}

# stage_suite DIR: the suite's layer, as the image's root sees it.
stage_suite() {
    local s=$1 t
    rm -rf "$s"
    install -d -m 0755 "$s/usr/local/bin" "$s/usr/local/share/fabcheck"
    for t in "${TOOLS[@]}"; do
        install -m 0755 "$TARGET/release/$t" "$s/usr/local/bin/$t"
        strip "$s/usr/local/bin/$t"
    done
    install -m 0755 scripts/lib/image-entrypoint.sh "$s/usr/local/bin/fabcheck-entrypoint"
    cp -r profiles templates "$s/usr/local/share/fabcheck/"
    {
        echo "fabcheck $VERSION, commit $REVISION, built $CREATED"
        echo "source: $SOURCE_URL"
        echo "base: Debian 12 (bookworm) minbase, recipe $BASE_HASH; packages:"
        sed 's/^/  /' "$BASE.packages"
    } > "$s/usr/local/share/fabcheck/IMAGE"
    chown -R 0:0 "$s"
    chmod -R u=rwX,go=rX "$s/usr/local/share/fabcheck"
}

# pin_times DIR EPOCH: every file's time set to EPOCH (links themselves, not their
# targets), so the layer's bytes depend on the content alone.
pin_times() {
    find "$1" -depth -exec touch -h -d "@$2" {} +
}

assemble() {
    local layout=$1 stage=$2 image="$1:$VERSION"
    local history=(--history.created "$CREATED" --history.author fabcheck)
    umoci init --layout "$layout"
    umoci new --image "$image"
    umoci insert --image "$image" "${history[@]}" --history.created_by "debootstrap minbase bookworm + ${RUNTIME_PACKAGES[*]}" \
        "$BASE" /
    umoci insert --image "$image" "${history[@]}" --history.created_by "scripts/image.sh: the suite $VERSION ($REVISION)" \
        "$stage" /
    local labels=() l
    for l in "version=$VERSION" "revision=$REVISION" "source=$SOURCE_URL" "created=$CREATED" \
        "licenses=Apache-2.0" "title=fabcheck" "base.name=debian:bookworm (minbase)" \
        "description=RDMA GPU cluster acceptance suite: bench-bw, bench-lat, bench-collective, bench-congestion, fabric-doctor, aggregate, fabcheck"; do
        labels+=(--config.label "org.opencontainers.image.$l")
    done
    umoci config --image "$image" "${history[@]}" --history.created_by "scripts/image.sh: config" \
        --created "$CREATED" --author fabcheck --architecture amd64 --os linux \
        --config.user fabcheck --config.workingdir /home/fabcheck \
        --config.env PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin \
        --config.entrypoint /usr/local/bin/fabcheck-entrypoint "${labels[@]}"
    umoci gc --layout "$layout"
}

# The root filesystem's size, unpacked: what a node's disk holds.
check_size() {
    local base_mib suite_mib
    base_mib=$(du -sm "$BASE" | cut -f1)
    suite_mib=$(du -sm "$1" | cut -f1)
    echo "image: root filesystem $((base_mib + suite_mib)) MiB unpacked (base $base_mib, suite $suite_mib; bound $LIMIT_MIB)"
    ((base_mib + suite_mib <= LIMIT_MIB)) ||
        die "the image is $((base_mib + suite_mib)) MiB unpacked, over the bound of $LIMIT_MIB MiB: see du -sm $BASE/usr/lib/*/* | sort -n"
}

write_manifest() {
    local layout=$1 m=$2
    {
        echo "fabcheck $VERSION, commit $REVISION, created $CREATED"
        echo "oci: $layout (tag $VERSION); docker-archive: $OUT/fabcheck-$VERSION.tar"
        skopeo inspect --raw "oci:$layout:$VERSION" |
            python3 -c 'import json,sys; m=json.load(sys.stdin)
print("config", m["config"]["digest"])
for l in m["layers"]: print("layer", l["digest"], l["size"], "bytes compressed")'
        echo "packages:"
        sed 's/^/  /' "$BASE.packages"
    } > "$m"
}

make_base
build_suite
mkdir -p "$OUT"
STAGE=$OUT/suite.tmp
LAYOUT=$OUT/oci.tmp
stage_suite "$STAGE"
check_size "$STAGE"
pin_times "$BASE" "$BASE_EPOCH"
pin_times "$STAGE" "$SOURCE_DATE_EPOCH"
rm -rf "$LAYOUT"
assemble "$LAYOUT" "$STAGE"
rm -rf "$OUT/oci" "$OUT/fabcheck-$VERSION.tar"
mv "$LAYOUT" "$OUT/oci"
skopeo copy --quiet "oci:$OUT/oci:$VERSION" "docker-archive:$OUT/fabcheck-$VERSION.tar:fabcheck:$VERSION"
write_manifest "$OUT/oci" "$OUT/MANIFEST"
# How the binaries were built, so that tests/image/check.sh builds again the same way.
{
    printf 'export CARGO_TARGET_DIR=%q SOURCE_DATE_EPOCH=%q\n' "$TARGET" "$SOURCE_DATE_EPOCH"
    env | grep -E '^CARGO_(PROFILE|BUILD|ENCODED)_[A-Z_]*=' | while IFS='=' read -r k v; do printf 'export %s=%q\n' "$k" "$v"; done
} > "$OUT/build-env"
rm -rf "$STAGE"
echo "image: $OUT/oci (tag $VERSION), $OUT/fabcheck-$VERSION.tar ($(du -m "$OUT/fabcheck-$VERSION.tar" | cut -f1) MiB); layers:"
grep -E '^(config|layer)' "$OUT/MANIFEST" | sed 's/^/  /'
