#!/usr/bin/env bash
# Foreground latency while a new node is filled: 9 node processes on loopback hold SIZE_MIB
# of RS(6,3) objects (default 1024: 128 objects of 8 MiB); `kintsugi load` (YCSB A, 4
# clients, 512 KiB values) runs SECS seconds alone, then again while a 10th node joins and
# the coordinator rebalances onto it (rebalance_bytes_per_s, default 50 MB/s). Prints both
# runs' P99, the P99 of the seconds the rebalance ran, and what moved; per-second CSVs stay
# in $OUT (default ./rebalance-load).
# Usage: scripts/bench_rebalance_load.sh [SIZE_MIB] [SECS]
set -u
MIB=${1:-1024}
SECS=${2:-30}
OUT=${OUT:-rebalance-load}
K=${KINTSUGI:-target/release/kintsugi}
P=${PORT:-7431}
D=$(mktemp -d)
mkdir -p "$OUT"
cat > $D/coord.toml <<TOML
listen = "127.0.0.1:$P"
data_dir = "$D/coord"
dead_after_ms = 2000
TOML
$K coordinator --config $D/coord.toml 2>$D/coord.log & CP=$!
export KINTSUGI_COORDINATOR=127.0.0.1:$P
PIDS=()
for i in $(seq 0 8); do $K node --id $i --data-dir $D/n$i --coordinator 127.0.0.1:$P 2>/dev/null & PIDS+=($!); done
sleep 3
head -c $((8 << 20)) /dev/urandom > $D/obj
for i in $(seq 1 $((MIB / 8))); do $K put data$i $D/obj --code rs:6,3 >/dev/null || exit 1; done
echo "stored $MIB MiB of RS(6,3) objects on 9 nodes"
$K load --clients 4 --records 40 --seconds "$SECS" --csv "$OUT/alone.csv" --json > "$OUT/alone.json"
( sleep 3; $K node --id 9 --data-dir $D/n9 --coordinator 127.0.0.1:$P 2>/dev/null & echo $! > $D/n9.pid ) &
$K load --clients 4 --records 40 --seconds "$SECS" --no-load --csv "$OUT/rebalance.csv" --json > "$OUT/rebalance.json"
sleep 1
$K status --json > "$OUT/status.json"
python3 - "$OUT" <<'PY'
import csv, json, sys
out = sys.argv[1]
alone = json.load(open(f"{out}/alone.json")); during = json.load(open(f"{out}/rebalance.json"))
st = json.load(open(f"{out}/status.json")); r = st.get("rebalance") or {}
print(f"P99 alone {alone['all']['p99_ms']:.1f} ms, with a node joining {during['all']['p99_ms']:.1f} ms "
      f"({during['all']['p99_ms'] / alone['all']['p99_ms']:.2f}x); ops/s {alone['ops_per_s']:.0f} -> {during['ops_per_s']:.0f}")
print(f"rebalance: {r.get('moved')} chunks, {r.get('bytes', 0) / 1e6:.0f} MB in {r.get('seconds', 0):.1f} s, "
      f"{r.get('failed')} failed, fill spread {100 * r.get('spread', 0):.1f}%")
held = {n['id']: n['chunks'] for n in st['nodes']}
print("chunks per node:", held)
PY
kill "${PIDS[@]}" $(cat $D/n9.pid 2>/dev/null) $CP 2>/dev/null; wait 2>/dev/null; rm -rf "$D"
