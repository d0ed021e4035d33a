#!/bin/sh
# The OCI image's entrypoint (scripts/image.sh installs it as
# /usr/local/bin/fabcheck-entrypoint). With arguments it runs them, so `docker run IMAGE
# bench-bw --serve ...`, a Kubernetes `args:` list and `apptainer run fabcheck.sif
# fabric-doctor` all name the tool first. Without arguments it says what the image holds
# and exits 0. A Kubernetes `command:` replaces this entrypoint altogether, which is fine:
# the tools are on PATH and need nothing from it.
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
cat /usr/local/share/fabcheck/IMAGE 2> /dev/null | head -3
cat << 'EOF'

Tools (each takes --help): bench-bw, bench-lat, bench-collective, bench-congestion,
fabric-doctor, aggregate, fabcheck. Profiles and templates: /usr/local/share/fabcheck.
Also here: mpirun (Open MPI), ibv_devinfo, ibstat, ibnetdiscover, smpquery, perfquery,
ip, dcb, ethtool, lldpcli, ssh.

  docker run --rm IMAGE bench-bw --help
  an agent:  bench-bw --serve -p 18555 -d mlx5_0 --timeout 60   (RDMA needs the device
             and IPC_LOCK, or a large RLIMIT_MEMLOCK; docs/image.md)
EOF
