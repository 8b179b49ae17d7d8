#!/usr/bin/env bash
# Client peak RSS for put and get of a large object (default 1 GiB), 12 node processes on
# loopback, RS(6,3), the coordinator's default 4 MiB chunks. Target: under 256 MiB each.
# Usage: scripts/bench_client_memory.sh [SIZE_MIB]
set -u
MIB=${1:-1024}
P=7413
source "$(dirname "$0")/loopback_cluster.sh"
head -c $((MIB << 20)) /dev/urandom > $D/obj
rss() { grep "Maximum resident" "$1" | awk '{print $6}'; }
secs() { grep "Elapsed (wall" "$1" | awk '{print $8}'; }
/usr/bin/time -v $K put big $D/obj >/dev/null 2>$D/put.time || { echo "put failed"; cat $D/put.time; }
/usr/bin/time -v $K get big --out $D/back >/dev/null 2>$D/get.time || { echo "get failed"; cat $D/get.time; }
cmp -s $D/obj $D/back && same=byte-exact || same=DIFFERENT
echo "object ${MIB} MiB: put peak RSS $(( $(rss $D/put.time) / 1024 )) MiB in $(secs $D/put.time), get peak RSS $(( $(rss $D/get.time) / 1024 )) MiB in $(secs $D/get.time), read back $same"
cluster_down
