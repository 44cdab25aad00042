#!/bin/sh
# Fails the trainer-efa image build when NCCL would not find its network plugin at run time.
#
# NCCL dlopens libnccl-net.so, or libnccl-net-<NAME>.so when NCCL_NET_PLUGIN=<NAME> (NCCL docs,
# Environment Variables: NCCL_NET_PLUGIN); finding none, it logs "No plugin found" and trains
# over TCP sockets without failing. aws-ofi-nccl, which the EFA installer ships, needs
# libfabric. Where the installer puts the plugin has moved: under lib/x86_64-linux-gnu on Ubuntu
# in some releases (awslabs/awsome-distributed-training #862 and #935), under lib/ in others
# (#894). So this looks for both libraries in the LD_LIBRARY_PATH the image sets, as the
# dynamic loader will; a dangling symlink counts as missing.
#
# Usage: check_nccl_net.sh   (reads LD_LIBRARY_PATH and NCCL_NET_PLUGIN; exit 1 if missing)
set -eu

plugin="libnccl-net.so"
if [ -n "${NCCL_NET_PLUGIN:-}" ]; then
    plugin="libnccl-net-${NCCL_NET_PLUGIN}.so"
fi

find_on_path() {
    old_ifs=$IFS
    IFS=:
    for dir in ${LD_LIBRARY_PATH:-}; do
        for candidate in "$dir"/$1; do
            if [ -n "$dir" ] && [ -f "$candidate" ]; then
                IFS=$old_ifs
                echo "$candidate"
                return 0
            fi
        done
    done
    IFS=$old_ifs
    return 1
}

status=0
for wanted in "$plugin" "libfabric.so*"; do
    if found=$(find_on_path "$wanted"); then
        echo "check_nccl_net: $wanted: $found"
    else
        echo "check_nccl_net: error: $wanted is in none of the LD_LIBRARY_PATH folders (${LD_LIBRARY_PATH:-unset}); NCCL would fall back to TCP sockets" >&2
        status=1
    fi
done
exit $status
