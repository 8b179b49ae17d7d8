#!/bin/bash
# A 300 MB Geo put through the CLI (coordinator and 8 node processes on loopback) with the
# object's home node killed (-9) halfway: the put must succeed and read back byte-exact,
# before and after sealing. Usage: scripts/geo_put_node_kill.sh [PORT] (after cargo build --release).
set -u
B=$(dirname "$0")/../target/release/kintsugi
D=$(mktemp -d)
P=${1:-27400}
trap 'for f in $D/*.pid; do kill -9 $(cat $f) 2>/dev/null; done; rm -rf $D' EXIT
$B coordinator --listen 127.0.0.1:$P --data-dir $D/coord > $D/coord.log 2>&1 &
echo $! > $D/coord.pid
sleep 0.5
for i in 0 1 2 3 4 5 6 7; do
  $B node --id $i --listen 127.0.0.1:$((P+10+i)) --data-dir $D/n$i --coordinator 127.0.0.1:$P > $D/n$i.log 2>&1 &
  echo $! > $D/n$i.pid
done
until $B status --coordinator 127.0.0.1:$P --json 2>/dev/null | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if sum(n["alive"] for n in s["nodes"])==8 else 1)'; do sleep 0.2; done
head -c 300000000 /dev/urandom > $D/in.bin
( $B put obj $D/in.bin --coordinator 127.0.0.1:$P --code clay:4,2,5 --layout geo --s0 4MiB --q 2 --max-chunk 32MiB --json > $D/put.json 2> $D/put.err; echo "put rc=$?" > $D/put.rc ) &
# Halfway: the node holding bucket files of the largest class so far is the home.
while true; do
  used=$(du -sb $D/n*/ 2>/dev/null | awk '{s+=$1} END {print s}')
  [ "$used" -gt 450000000 ] && break
  sleep 0.05
done
home=$(for i in 0 1 2 3 4 5 6 7; do echo "$(ls $D/n$i/*.bucket 2>/dev/null | wc -l) $i"; done | sort -n | tail -1 | cut -d' ' -f2)
echo "killing node $home (the home) at $used bytes on disk"
kill -9 $(cat $D/n$home.pid)
while [ ! -f $D/put.rc ]; do sleep 0.2; done
cat $D/put.rc; tail -3 $D/put.err
python3 -c 'import json,sys; l=json.load(open(sys.argv[1])); print("homes of the chunks:", sorted({l["stripes"][e["stripe"]]["chunks"][e["index"]]["node"] for e in l["extents"]}))' $D/put.json
$B get obj --out $D/out.bin --coordinator 127.0.0.1:$P > /dev/null && cmp $D/in.bin $D/out.bin && echo "read back byte-exact"
$B seal --coordinator 127.0.0.1:$P
$B get obj --out $D/out2.bin --coordinator 127.0.0.1:$P > /dev/null && cmp $D/in.bin $D/out2.bin && echo "after sealing: byte-exact"
