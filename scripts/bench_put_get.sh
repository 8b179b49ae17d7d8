#!/usr/bin/env bash
# Put and get throughput of one object (default 256 MiB, RS(6,3), 4 MiB chunks) on 12 node
# processes on loopback, healthy cluster, RUNS times each; prints MB/s per run and the
# median. Compare two builds by running it with KINTSUGI=path/to/kintsugi for each, in turn.
# Usage: scripts/bench_put_get.sh [SIZE_MIB] [RUNS]
set -u
MIB=${1:-256}
RUNS=${2:-5}
P=${PORT:-7417}
source "$(dirname "$0")/loopback_cluster.sh"
head -c $((MIB << 20)) /dev/urandom > $D/obj
put=(); get=()
for r in $(seq 1 "$RUNS"); do
  t0=$(date +%s.%N); $K put big $D/obj >/dev/null || { echo "put failed"; cluster_down; exit 1; }
  t1=$(date +%s.%N); $K get big --out $D/back >/dev/null || { echo "get failed"; cluster_down; exit 1; }
  t2=$(date +%s.%N)
  cmp -s $D/obj $D/back || { echo "get returned other bytes"; cluster_down; exit 1; }
  put+=("$(echo "$MIB * 1.048576 / ($t1 - $t0)" | bc -l)"); get+=("$(echo "$MIB * 1.048576 / ($t2 - $t1)" | bc -l)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf 'put MB/s: %s  median %.1f\n' "$(printf '%.1f ' "${put[@]}")" "$(median "${put[@]}")"
printf 'get MB/s: %s  median %.1f\n' "$(printf '%.1f ' "${get[@]}")" "$(median "${get[@]}")"
cluster_down
