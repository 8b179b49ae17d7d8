#!/bin/bash
# (root) RepairBoost vs RAN on the netns testbed: 16 nodes, 200 Mbit/s tc links, 48 objects of 6 MiB (rs:6,3, 1 MiB chunks).
# Usage: sudo scripts/repro_testbed_repairboost.sh random repairboost
K=${KINTSUGI:-target/release/kintsugi}
head -c 6291456 /dev/urandom > /tmp/tb_obj
for sched in $@; do
  for m in cr ppr; do
    $K testbed down >/dev/null 2>&1
    $K testbed up --nodes 16 --link 200mbit >/dev/null || exit 1
    export KINTSUGI_COORDINATOR=10.213.0.1:7400
    sleep 2
    for i in $(seq 1 48); do $K put obj$i /tmp/tb_obj --code rs:6,3 --chunk-size 1MiB >/dev/null || exit 1; done
    $K fail 0 >/dev/null
    sleep 12
    echo "$sched $m $($K repair --method $m --scheduler $sched --parallel 48 --slice 32KiB --json 2>&1 | head -1)"
    $K get obj7 --out /tmp/tb_back >/dev/null && cmp -s /tmp/tb_back /tmp/tb_obj && echo "  verified obj7"
  done
done
$K testbed down >/dev/null 2>&1
