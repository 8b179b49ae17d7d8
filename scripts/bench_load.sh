#!/usr/bin/env bash
# The load generator's own cost and whether it saturates a loopback cluster: YCSB-A
# (512 KiB values, zipfian 0.99) with 1, 4 and 16 clients against 12 node processes.
# Usage: scripts/bench_load.sh [SECONDS]
set -u
K=${KINTSUGI:-target/release/kintsugi}
S=${1:-10}
D=$(mktemp -d); P=7415
$K coordinator --listen 127.0.0.1:$P --data-dir $D/coord 2>/dev/null & CP=$!
export KINTSUGI_COORDINATOR=127.0.0.1:$P
PIDS=()
for i in $(seq 0 11); do $K node --id $i --data-dir $D/n$i --coordinator 127.0.0.1:$P 2>/dev/null & PIDS+=($!); done
sleep 3
$K load --records 50 --seconds 1 --clients 1 >/dev/null
for c in 1 4 16; do
  $K load --records 50 --no-load --seconds $S --clients $c --json | python3 -c "
import json,sys; r=json.load(sys.stdin)
print(f\"clients {r['clients']:>2}: {r['ops_per_s']:.1f} ops/s, {r['mb_per_s']:.1f} MB/s, p50 {r['all']['p50_ms']:.1f} ms, p99 {r['all']['p99_ms']:.1f} ms, errors {r['errors']}, client CPU {r['client_cpu_us_per_op']:.0f} us/op\")"
done
kill ${PIDS[@]} $CP 2>/dev/null; wait 2>/dev/null; rm -rf $D
