#!/usr/bin/env bash
# Builds the GPU check's binaries here and gathers them, with every shared library they
# need that a bare GPU machine lacks, into one folder that runs there unchanged:
#
#   scripts/gpu-bundle.sh [DIR]          (default DIR: gpu-bundle/ in the repository, ignored by git)
#
# A lent GPU machine has the NVIDIA driver, CUDA and NCCL (a Python wheel), but no Rust
# toolchain, no rdma-core (libibverbs, librdmacm, the providers), no MPI and no network,
# so nothing can be built or installed there. The bundle holds:
#   libexec/   the stripped release binaries: bench-bw, bench-lat, bench-collective,
#              aggregate, gpudirect_probe; Open MPI's orterun (mpirun) and orted, which a
#              singleton or `mpirun -np 1` starts
#   bin/       one wrapper per binary: sets the bundle's environment for that process only,
#              then execs the binary (the bundle's libraries never leak into nvidia-smi or
#              python3 of the host)
#   lib/       every library the binaries, Open MPI's and PMIx's plugins and the verbs
#              providers link, except glibc's own (the loader must match the host's libc):
#              libmpi and the Open MPI runtime, PMIx, hwloc, libevent, libibverbs,
#              librdmacm, the providers (libmlx5-rdmav34.so, ...), ...
#   mpi/       Open MPI's plugins (openmpi3/), help texts (share/openmpi) and settings
#              (etc/), PMIx's plugins and help texts (pmix2/), found through OPAL_* and
#              PMIX_* variables
#   env.sh     the environment (PATH, LD_LIBRARY_PATH, OPAL_*, PMIX_*, RDMAV_DRIVERS);
#              source it to use the bundle by hand
#   scripts/gpu-check.sh, MANIFEST (what came from where), SOURCE (the git commit)
#
# The glibc the binaries were built against (Debian 12: 2.36) must not be newer than the
# GPU machine's (Ubuntu 22.04 has 2.35: build on the oldest distribution you target, or
# check `ldd --version` there; scripts/gpu-check.sh reports a loader error plainly).
# tests/gpu-bundle/chroot-check.sh proves the bundle in a minimal Debian chroot without
# rdma-core or MPI. Fails if the bundle exceeds LIMIT_MIB (default 60).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/gpu-bundle}
LIMIT_MIB=${LIMIT_MIB:-60}
# PROFILE=debug makes a quick bundle from the debug build (larger; for trying the chroot
# check on a busy machine), release is what goes to a GPU machine.
PROFILE=${PROFILE:-release}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
MULTIARCH=$(gcc -print-multiarch 2> /dev/null || echo x86_64-linux-gnu)
SYSLIB=/usr/lib/$MULTIARCH

die() {
    echo "gpu-bundle: $*" >&2
    exit 2
}
for t in cargo strip ldd; do
    command -v $t > /dev/null || die "needs $t (cargo from rustup, strip from binutils, ldd from libc-bin)"
done
OMPI_PKGLIB=$SYSLIB/openmpi/lib/openmpi3
PMIX_DIR=$SYSLIB/pmix2
[[ -d $OMPI_PKGLIB ]] || die "Open MPI's plugins are not at $OMPI_PKGLIB: install openmpi-bin and libopenmpi-dev (Debian 12)"
[[ -d $PMIX_DIR ]] || die "PMIx is not at $PMIX_DIR: install libpmix2 (Debian 12)"
[[ -d $SYSLIB/libibverbs ]] || die "the verbs providers are not at $SYSLIB/libibverbs: install ibverbs-providers"

cd "$ROOT"
echo "gpu-bundle: building ($PROFILE) in $TARGET"
. "$ROOT/scripts/lib/release-packages.sh"
cargo build --profile "$([[ $PROFILE == debug ]] && echo dev || echo "$PROFILE")" --quiet \
    "${RELEASE_PACKAGES[@]}"
cargo build --profile "$([[ $PROFILE == debug ]] && echo dev || echo "$PROFILE")" --quiet \
    -p transport --features cuda,verbs --example gpudirect_probe

STAGE=$DEST.tmp
rm -rf "$STAGE"
mkdir -p "$STAGE"/{bin,libexec,lib,mpi/etc,mpi/share,scripts}
MANIFEST=$STAGE/MANIFEST

TOOLS=(bench-bw bench-lat bench-collective aggregate gpudirect_probe)
for t in "${TOOLS[@]}"; do
    src=$TARGET/$PROFILE/$t
    [[ $t == gpudirect_probe ]] && src=$TARGET/$PROFILE/examples/$t
    cp "$src" "$STAGE/libexec/$t"
    strip "$STAGE/libexec/$t"
    echo "libexec/$t <- $src (stripped)" >> "$MANIFEST"
done
for t in orterun orted; do
    cp "$(command -v $t)" "$STAGE/libexec/$t"
    echo "libexec/$t <- $(command -v $t)" >> "$MANIFEST"
done

# Open MPI's and PMIx's run-time files, in the places the OPAL_* / PMIX_* variables of
# env.sh name.
cp -a "$OMPI_PKGLIB" "$STAGE/mpi/openmpi3"
cp -a /usr/share/openmpi "$STAGE/mpi/share/openmpi"
cp -a /etc/openmpi/. "$STAGE/mpi/etc/"
mkdir -p "$STAGE/mpi/pmix2/lib" "$STAGE/mpi/pmix2/share"
cp -a "$PMIX_DIR/lib/pmix" "$STAGE/mpi/pmix2/lib/pmix"
cp -a "$PMIX_DIR/share/pmix" "$STAGE/mpi/pmix2/share/pmix"
echo "mpi/ <- $OMPI_PKGLIB, /usr/share/openmpi, /etc/openmpi, $PMIX_DIR/{lib/pmix,share/pmix}" >> "$MANIFEST"

# The verbs providers: libibverbs dlopens lib<name>-rdmav34.so from its own directory,
# then from the library path; RDMAV_DRIVERS names them (there is no /etc/libibverbs.d on
# a bare machine).
PROVIDERS=()
for p in "$SYSLIB"/libibverbs/lib*-rdmav*.so; do
    cp -L "$p" "$STAGE/lib/"
    n=$(basename "$p")
    n=${n#lib}
    PROVIDERS+=("${n%-rdmav*}")
done
echo "lib/ <- verbs providers: ${PROVIDERS[*]}" >> "$MANIFEST"

# Every library any of those links, transitively (ldd resolves the closure), but glibc's.
is_glibc() {
    case "$1" in
        linux-vdso.so* | ld-linux*.so* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | \
            librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libmvec.so.* | \
            libBrokenLocale.so.* | libnss_*.so.* | libthread_db.so.*) return 0 ;;
    esac
    return 1
}
MISSING=()
while read -r obj; do
    while read -r name arrow path _; do
        [[ $arrow == "=>" ]] || continue
        is_glibc "$name" && continue
        if [[ $path == "not" ]]; then
            MISSING+=("$name (for $obj)")
            continue
        fi
        [[ -e $STAGE/lib/$name ]] && continue
        cp -L "$path" "$STAGE/lib/$name"
        echo "lib/$name <- $path" >> "$MANIFEST"
    done < <(ldd "$obj" 2> /dev/null)
done < <(find "$STAGE/libexec" "$STAGE/mpi" "$STAGE/lib" -type f \( -perm -u+x -o -name '*.so*' \))
# Plugins whose own libraries the build host lacks cannot load here either; Open MPI
# skips them. Listed so the manifest says what was left out.
for m in "${MISSING[@]}"; do echo "not bundled (not on this host either): $m" >> "$MANIFEST"; done
strip --strip-unneeded "$STAGE"/lib/*.so* 2> /dev/null || true

cat > "$STAGE/env.sh" << EOF
# The bundle's environment: source it from bash (or from sh with B set to the bundle's
# directory) to run the bundled tools by hand. The wrappers in bin/ set B and source it
# for their own process only.
if [ -z "\${B:-}" ] && [ -n "\${BASH_VERSION:-}" ]; then
    eval 'B=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)'
fi
: "\${B:?set B to the bundle directory before sourcing env.sh from sh}"
export PATH="\$B/bin:\$PATH"
export LD_LIBRARY_PATH="\$B/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
# Open MPI (Debian's 4.1, relocated: every install directory it reads at run time).
export OPAL_PREFIX="\$B/mpi" OPAL_EXEC_PREFIX="\$B/mpi" OPAL_BINDIR="\$B/bin"
export OPAL_LIBDIR="\$B/lib" OPAL_PKGLIBDIR="\$B/mpi/openmpi3"
export OPAL_DATADIR="\$B/mpi/share" OPAL_DATAROOTDIR="\$B/mpi/share"
export OPAL_PKGDATADIR="\$B/mpi/share/openmpi" OPAL_SYSCONFDIR="\$B/mpi/etc"
# mpirun refuses to start, even on this node alone, when its remote-launch agent (ssh)
# is missing, as on a bare GPU machine: any existing program satisfies that check, and
# local launches never call it.
command -v ssh > /dev/null 2>&1 || export OMPI_MCA_plm_rsh_agent="\${OMPI_MCA_plm_rsh_agent:-false}"
# PMIx (its plugins and help texts).
export PMIX_INSTALL_PREFIX="\$B/mpi/pmix2" PMIX_PREFIX="\$B/mpi/pmix2"
export PMIX_MCA_mca_base_component_path="\$B/mpi/pmix2/lib/pmix"
# libibverbs: the bundled providers, found on LD_LIBRARY_PATH by name.
export RDMAV_DRIVERS="$(IFS=:; echo "${PROVIDERS[*]}")"
EOF
for t in "${TOOLS[@]}" orterun orted; do
    cat > "$STAGE/bin/$t" << EOF
#!/bin/sh
# Runs the bundled $t with the bundle's libraries (env.sh), for this process only.
B=\$(cd "\$(dirname "\$(readlink -f "\$0")")/.." && pwd)
. "\$B/env.sh"
exec "\$B/libexec/$t" "\$@"
EOF
    chmod +x "$STAGE/bin/$t"
done
ln -s orterun "$STAGE/bin/mpirun"
ln -s orterun "$STAGE/bin/mpiexec"
cp "$ROOT/scripts/gpu-check.sh" "$STAGE/scripts/"
git -C "$ROOT" describe --always --dirty > "$STAGE/SOURCE" 2> /dev/null || echo unknown > "$STAGE/SOURCE"

SIZE=$(du -sm "$STAGE" | cut -f1)
((SIZE <= LIMIT_MIB)) || die "the bundle is $SIZE MiB, over the limit of $LIMIT_MIB MiB (see $STAGE/MANIFEST)"
rm -rf "$DEST"
mv "$STAGE" "$DEST"
echo "gpu-bundle: $DEST ($SIZE MiB, $(ls "$DEST/lib" | wc -l) libraries, ${#MISSING[@]} plugin libraries absent here too)"
