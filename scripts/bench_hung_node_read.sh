#!/usr/bin/env bash
# get of a 150 MB object with all nodes up vs one node SIGSTOPped (processes on loopback).
set -u
P=7411
source "$(dirname "$0")/loopback_cluster.sh"
head -c 150000000 /dev/urandom > $D/obj
$K put obj $D/obj --code rs:6,3 >/dev/null
for run in 1 2 3; do
  t0=$(date +%s.%N); $K get obj --out $D/o1 >/dev/null; t1=$(date +%s.%N)
  node=$($K stat obj --json | python3 -c "import json,sys; print(json.load(sys.stdin)['stripes'][0]['chunks'][0]['node'])")
  kill -STOP ${PIDS[$node]}; sleep 0.5
  t2=$(date +%s.%N); $K get obj --out $D/o2 >/dev/null; t3=$(date +%s.%N)
  kill -CONT ${PIDS[$node]}
  cmp -s $D/obj $D/o2 && ok=same || ok=DIFFERENT
  python3 -c "up=$t1-$t0; hung=$t3-$t2; print(f'run $run: all up {up:.2f} s, node $node stopped {hung:.2f} s, ratio {hung/up:.2f}, bytes $ok')"
  sleep 2
done
cluster_down
