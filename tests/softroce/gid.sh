#!/bin/bash
# Prints the index of the IPv4-mapped RoCE v2 GID of an RDMA device port, the one to pass
# as perftest's `-x` (and ours). Never assume index 0: on rxe, index 0 is the IPv6
# link-local GID and the IPv4-mapped one is usually 1; real NICs order them differently.
#
# Usage:  gid.sh [DEVICE [PORT [IPV4]]]     (defaults: $SOFTROCE_DEV or rxe0, port 1)
#         source gid.sh; softroce_gid_index DEVICE PORT [IPV4]
# With IPV4, only the GID that maps that address matches. Exit status 1 and a message on
# stderr when there is none (e.g. the address is not configured yet).

softroce_gid_index() {
    local dev=${1:-${SOFTROCE_DEV:-rxe0}} port=${2:-1} want_ip=${3:-}
    local dir=/sys/class/infiniband/$dev/ports/$port
    if [[ ! -d $dir/gids ]]; then
        echo "gid.sh: no RDMA device port $dir" >&2
        return 1
    fi
    local want_gid=""
    if [[ -n $want_ip ]]; then
        local a b c d
        IFS=. read -r a b c d <<< "$want_ip"
        want_gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
    fi
    local f idx gid type
    # Numeric order, so the lowest matching index wins.
    for f in $(ls -v "$dir/gids"); do
        idx=$f
        gid=$(cat "$dir/gids/$idx" 2> /dev/null) || continue
        [[ $gid == 0000:0000:0000:0000:0000:ffff:* ]] || continue
        [[ -z $want_gid || $gid == "$want_gid" ]] || continue
        # Unused entries fail to read (EINVAL); the type must be RoCE v2, not v1.
        type=$(cat "$dir/gid_attrs/types/$idx" 2> /dev/null) || continue
        [[ $type == "RoCE v2" ]] || continue
        echo "$idx"
        return 0
    done
    echo "gid.sh: no IPv4-mapped RoCE v2 GID${want_ip:+ for $want_ip} on $dev port $port" >&2
    return 1
}

# Executed (not sourced): print the index.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    softroce_gid_index "$@"
fi
