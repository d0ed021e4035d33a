# Sourced by the scripts: installs the Debian packages a step needs, only when missing.
# One place for the package lists, so the demo, the tests and CI agree.

# Build: MPI headers for the mpi crate, libibverbs/librdmacm for rdma-sys, clang for bindgen.
BUILD_PACKAGES=(pkg-config libclang-dev libibverbs-dev librdmacm-dev libopenmpi-dev openmpi-bin)
# MPICH beside Open MPI: the test command also builds the MPI binaries against it.
MPICH_PACKAGES=(libmpich-dev mpich)
# Tests beyond the build: reference tools and real peers.
TEST_PACKAGES=(openssh-client chromium prometheus sockperf iperf3 slurm-wlm munge python3 time cmark-gfm lldpd ibsim-utils infiniband-diags iproute2 strace ethtool debootstrap umoci skopeo python3-venv)

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

# The alternatives that say which MPI `mpirun`, `mpicc` and the unversioned headers and
# libraries are.
MPI_ALTERNATIVES=(mpirun mpi mpi-x86_64-linux-gnu)

# Installs MPICH without changing what `mpirun` and `mpicc` mean: Debian ranks Open MPI
# first (alternatives priority 50 against MPICH's 40), but a machine whose choice was set
# by hand, or a future package, may not; every choice is put back as it was, so the
# default (Open MPI) build and every `mpirun` keep working. MPICH is then used by its own
# names (mpicc.mpich, mpiexec.mpich).
need_mpich() {
  local before=() name i
  for name in "${MPI_ALTERNATIVES[@]}"; do
    before+=("$(readlink "/etc/alternatives/$name" 2>/dev/null || true)")
  done
  need_packages "${MPICH_PACKAGES[@]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  for i in "${!MPI_ALTERNATIVES[@]}"; do
    name=${MPI_ALTERNATIVES[$i]}
    if [ -n "${before[$i]}" ] && [ "$(readlink "/etc/alternatives/$name" 2>/dev/null)" != "${before[$i]}" ]; then
      echo "restoring the $name alternative to ${before[$i]} (installing MPICH changed it)" >&2
      "${sudo[@]}" update-alternatives --quiet --set "$name" "${before[$i]}"
    fi
  done
}

# OpenMPI refuses to run as root unless told twice; CI runs as root.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# This 2-core machine runs more ranks than cores in tests.
export OMPI_MCA_rmaps_base_oversubscribe=1
