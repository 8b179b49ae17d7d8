#!/bin/bash
# (root) Full-node repair at high concurrency on the netns testbed: 16 nodes, 200 Mbit/s
# tc links, RS(10,4) with 16 MiB chunks, OBJECTS one-stripe objects (default 16: node 0
# holds about 14 chunks). Node 0 is failed and every method repairs at --parallel 40; the
# report must account for every lost chunk (repaired + failed + skipped = lost) and
# status must show 0 lost afterwards. Usage: sudo scripts/testbed_parallel_repair.sh [METHODS] [OBJECTS]
K=${KINTSUGI:-target/release/kintsugi}
METHODS=${1:-ppr cr ecpipe}
OBJECTS=${2:-16}
head -c $((160 << 20)) /dev/urandom > /tmp/tbp_obj
# Automatic repair off: the repair timed here is the one asked for, with its method.
echo "auto_repair = false" > /tmp/tbp_coord.toml
for m in $METHODS; do
  $K testbed down >/dev/null 2>&1
  up=$($K testbed up --nodes 16 --link 200mbit --coordinator-config /tmp/tbp_coord.toml 2>/dev/null) || { echo "testbed up failed"; exit 1; }
  eval "$(echo "$up" | grep '^export')"
  sleep 2
  for i in $(seq 1 $OBJECTS); do $K put obj$i /tmp/tbp_obj --code rs:10,4 --chunk-size 16MiB >/dev/null || { echo "put failed"; exit 1; }; done
  $K fail 0 >/dev/null
  sleep 12
  t0=$(date +%s.%N)
  r=$($K repair --method $m --parallel 40 --slice 32KiB --json 2>/tmp/tbp_repair_$m.err)
  grep -m 5 "^error" /tmp/tbp_repair_$m.err
  t1=$(date +%s.%N)
  lost=$($K status --json | python3 -c "import json,sys; print(json.load(sys.stdin)['lost_chunks'])")
  $K get obj3 --out /tmp/tbp_back >/dev/null && cmp -s /tmp/tbp_back /tmp/tbp_obj && v=verified || v=NOT-VERIFIED
  python3 -c "
import json; r=json.loads('''$r''')
print(f\"$m: lost {r['lost']}, repaired {r['repaired']}, failed {r['failed']}, skipped {r['skipped']}, {$t1-$t0:.1f} s; status afterwards {$lost} lost; obj3 $v\")"
done
$K testbed down >/dev/null 2>&1
