#!/usr/bin/env bash
# The load generator's own cost and whether it saturates a loopback cluster: YCSB-A
# (512 KiB values, zipfian 0.99) with 1, 4 and 16 clients against 12 node processes; then
# the trace stand-ins (twitter, etc, ibm) with 4 clients, and all four in turn (--switch).
# Usage: scripts/bench_load.sh [SECONDS]
set -u
S=${1:-10}
P=7415
source "$(dirname "$0")/loopback_cluster.sh"
$K load --records 50 --seconds 1 --clients 1 >/dev/null
for c in 1 4 16; do
  $K load --records 50 --no-load --seconds $S --clients $c --json | python3 -c "
import json,sys; r=json.load(sys.stdin)
print(f\"clients {r['clients']:>2}: {r['ops_per_s']:.1f} ops/s, {r['mb_per_s']:.1f} MB/s, p50 {r['all']['p50_ms']:.1f} ms, p99 {r['all']['p99_ms']:.1f} ms, errors {r['errors']}, client CPU {r['client_cpu_us_per_op']:.0f} us/op\")"
done
for w in twitter etc ibm; do
  $K load --workload $w --records 50 --seconds $S --clients 4 --json | python3 -c "
import json,sys; r=json.load(sys.stdin)
print(f\"{r['workload']}: {r['ops_per_s']:.1f} ops/s, {r['mb_per_s']:.2f} MB/s, p50 {r['all']['p50_ms']:.1f} ms, p99 {r['all']['p99_ms']:.1f} ms, errors {r['errors']}, client CPU {r['client_cpu_us_per_op']:.0f} us/op\")"
done
$K load --workload ycsb-a,twitter,etc,ibm --switch 2 --no-load --records 50 --seconds 8 --clients 4 --json | python3 -c "
import json,sys; r=json.load(sys.stdin); print(r['workload'])
for s in r['per_second']: print(f\"  second {s['second']}: {s['workload']:<8} {s['ops_per_s']:>6.0f} ops/s, p99 {s['p99_ms']:.1f} ms\")"
cluster_down
