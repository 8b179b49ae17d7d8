#!/usr/bin/env bash
# Put throughput with the metadata in redb against etcd (a 3-member etcd on loopback), same
# machine, same run: COUNT puts of 1 KiB objects (RS(6,3)) by CLIENTS concurrent clients into
# a fresh loopback cluster (a coordinator and 12 nodes) for each, RUNS times, alternating.
# Needs the etcd binary (Debian: etcd-server).
# INLINE (true or false) sets --inline-objects on both coordinators, so that both keep small
# objects the same way; unset, each backend's default (inline with redb, striped with etcd).
# Usage: scripts/bench_meta_backends.sh [COUNT] [CLIENTS] [RUNS] [INLINE]
set -u
COUNT=${1:-3000}
CLIENTS=${2:-16}
RUNS=${3:-3}
INLINE=${4:+--inline-objects $4}
K=${KINTSUGI:-target/release/kintsugi}
command -v etcd >/dev/null || { echo "no etcd binary (apt-get install etcd-server)"; exit 1; }
E=$(mktemp -d)
CL=""; for i in 0 1 2; do CL="$CL,m$i=http://127.0.0.1:$((23890 + i))"; done; CL=${CL#,}
EP=()
for i in 0 1 2; do
  etcd --name m$i --data-dir $E/m$i --listen-client-urls http://127.0.0.1:$((23790 + i)) \
    --advertise-client-urls http://127.0.0.1:$((23790 + i)) --listen-peer-urls http://127.0.0.1:$((23890 + i)) \
    --initial-advertise-peer-urls http://127.0.0.1:$((23890 + i)) --initial-cluster "$CL" --initial-cluster-state new \
    --max-txn-ops 100000 --max-request-bytes 33554432 >$E/m$i.log 2>&1 & EP+=($!)
done
sleep 3
rate() { # $1: extra coordinator flags; prints puts/s over the whole load
  P=$((7430 + RANDOM % 100)) COORD_ARGS="$1" bash -c "
    source $(dirname "$0")/loopback_cluster.sh
    t0=\$(date +%s.%N)
    $K load --records $COUNT --value-size 1KiB --clients $CLIENTS --seconds 0 --prefix b\$RANDOM >/dev/null 2>&1 || echo failed
    t1=\$(date +%s.%N)
    echo \"$COUNT / (\$t1 - \$t0)\" | bc -l
    cluster_down"
}
for r in $(seq 1 "$RUNS"); do
  a=$(rate "$INLINE"); b=$(rate "$INLINE --meta etcd://127.0.0.1:23790,127.0.0.1:23791,127.0.0.1:23792/run$r")
  printf 'run %d: redb %.0f puts/s, etcd %.0f puts/s, etcd/redb %.2f\n' "$r" "$a" "$b" "$(echo "$b / $a" | bc -l)"
done
kill "${EP[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$E"
