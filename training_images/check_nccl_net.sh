#!/bin/sh
# Fails the trainer-efa image build when NCCL would not load its network plugin at run time.
#
# NCCL dlopens libnccl-net.so, or what NCCL_NET_PLUGIN names: a suffix (libnccl-net-<NAME>.so),
# a library file name or a path, or a comma-separated list of those, tried in order (NCCL docs,
# Environment Variables: NCCL_NET_PLUGIN). Loading none, it logs "No plugin found" and trains
# over TCP sockets without failing. aws-ofi-nccl, which the EFA installer ships, needs libfabric.
# Where the installer puts the plugin has moved: under lib/x86_64-linux-gnu on Ubuntu in some
# releases (awslabs/awsome-distributed-training #862 and #935), under lib/ in others (#894). So
# this looks for the plugin and libfabric in the LD_LIBRARY_PATH the image sets, as the dynamic
# loader will (a dangling symlink counts as missing), and asks ldd whether the plugin's own
# dependencies resolve: dlopen fails on any "not found" one, or on a file that is no shared
# object, which ldd refuses too. Where the image has no ldd the loadability step is skipped.
#
# Usage: check_nccl_net.sh   (reads LD_LIBRARY_PATH and NCCL_NET_PLUGIN; exit 1 if missing)
set -eu

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

# The file NCCL would open for one NCCL_NET_PLUGIN entry.
find_plugin() {
    case "$1" in
        */*) [ -f "$1" ] && echo "$1" ;;
        *.so | *.so.*) find_on_path "$1" ;;
        *) find_on_path "libnccl-net-$1.so" ;;
    esac
}

loadable() {
    if ! command -v ldd >/dev/null 2>&1; then
        echo "check_nccl_net: no ldd in the image: $1 found, its dependencies not checked"
        return 0
    fi
    if ! deps=$(ldd "$1" 2>&1); then
        echo "check_nccl_net: error: $1 is no shared object the loader can open: $deps" >&2
        return 1
    fi
    missing=$(echo "$deps" | grep "not found" || true)
    if [ -n "$missing" ]; then
        echo "check_nccl_net: error: $1 needs libraries in none of the loader's folders (LD_LIBRARY_PATH ${LD_LIBRARY_PATH:-unset}): $(echo "$missing" | tr -s ' \t\n' ' '); NCCL would fall back to TCP sockets" >&2
        return 1
    fi
    return 0
}

status=0
names=${NCCL_NET_PLUGIN:-}
plugin=""
if [ -z "$names" ]; then
    plugin=$(find_on_path "libnccl-net.so") || true
    wanted="libnccl-net.so"
else
    wanted="NCCL_NET_PLUGIN=$names"
    old_ifs=$IFS
    IFS=,
    for name in $names; do
        name=$(echo "$name" | tr -d ' ')
        if [ -n "$name" ] && found=$(find_plugin "$name"); then
            plugin=$found
            break
        fi
    done
    IFS=$old_ifs
fi
if [ -n "$plugin" ]; then
    echo "check_nccl_net: $wanted: $plugin"
    loadable "$plugin" || status=1
else
    echo "check_nccl_net: error: $wanted is in none of the LD_LIBRARY_PATH folders (${LD_LIBRARY_PATH:-unset}); NCCL would fall back to TCP sockets" >&2
    status=1
fi
if found=$(find_on_path "libfabric.so*"); then
    echo "check_nccl_net: libfabric.so*: $found"
else
    echo "check_nccl_net: error: libfabric.so* is in none of the LD_LIBRARY_PATH folders (${LD_LIBRARY_PATH:-unset}); NCCL would fall back to TCP sockets" >&2
    status=1
fi
exit $status
