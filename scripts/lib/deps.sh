# Sourced by the scripts: installs the Debian packages a step needs, only when missing.
# One place for the package lists, so the demo, the tests and CI agree.

# Build: MPI headers for the mpi crate, libibverbs/librdmacm for rdma-sys, clang for bindgen.
BUILD_PACKAGES=(pkg-config libclang-dev libibverbs-dev librdmacm-dev libopenmpi-dev openmpi-bin)
# Tests beyond the build: reference tools and real peers.
TEST_PACKAGES=(openssh-client chromium prometheus sockperf iperf3 slurm-wlm munge python3 time cmark-gfm)

need_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing missing Debian packages: ${missing[*]}" >&2
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  # The lists may be absent on a fresh machine; a failed update is retried once.
  "${sudo[@]}" apt-get update -qq || "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# OpenMPI refuses to run as root unless told twice; CI runs as root.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# This 2-core machine runs more ranks than cores in tests.
export OMPI_MCA_rmaps_base_oversubscribe=1
