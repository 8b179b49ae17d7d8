#!/usr/bin/env bash
# What each connection protection costs on the netns testbed (needs root): a degraded read of
# one RS(10,4) chunk over 1 Gbit/s links (every method against a direct read), and a
# full-node repair (16 nodes, RS(6,3), 200 Mbit/s, 24 lost 8 MiB chunks, RepairBoost), each
# under `encrypted` and under `authenticated`, alternated in one session. Open connections
# are measured by `kintsugi bench relay --protections encrypted,authenticated,open`: the
# testbed's nodes listen beyond loopback, which needs a secret.
# Usage: sudo scripts/bench_protections.sh [ROUNDS]   (default 3; each round runs both)
set -eu
ROUNDS=${1:-3}
K=${KINTSUGI:-$(dirname "$0")/../target/release/kintsugi}
OUT=$(mktemp -d /tmp/kintsugi-protections.XXXX)
for r in $(seq 1 "$ROUNDS"); do
  for p in encrypted authenticated; do
    echo "round $r: $p" >&2
    "$K" --protection "$p" bench degraded-read --testbed --link 1gbit --chunk 64MiB --json > "$OUT/degraded.$p.$r.json"
    "$K" --protection "$p" bench full-node --testbed --methods cr,ppr,ecpipe --json > "$OUT/fullnode.$p.$r.json"
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(kind, p, r):
    return json.load(open(f"{out}/{kind}.{p}.{r}.json"))
print(f"{'protection':<14} {'read':<14} {'seconds (median, min-max)':>28} {'x direct':>9} {'CPU cores':>10}")
for p in ["encrypted", "authenticated"]:
    runs = [load("degraded", p, r) for r in range(1, rounds + 1)]
    d = [x["direct_seconds"] for x in runs]
    print(f"{p:<14} {'direct':<14} {statistics.median(d):>10.3f} ({min(d):.3f}-{max(d):.3f}) {1.0:>9.2f} {statistics.median([x['direct_cpu_cores'] for x in runs]):>10.2f}")
    for i, m in enumerate(runs[0]["methods"]):
        s = [x["methods"][i]["seconds"] for x in runs]
        ratio = [x["methods"][i]["ratio"] for x in runs]
        cpu = [x["methods"][i]["cpu_cores"] for x in runs]
        print(f"{p:<14} {m['method']:<14} {statistics.median(s):>10.3f} ({min(s):.3f}-{max(s):.3f}) {statistics.median(ratio):>9.2f} {statistics.median(cpu):>10.2f}")
print()
print(f"{'protection':<14} {'method':<8} {'repair seconds (median, min-max)':>34} {'x bound':>8} {'CPU cores':>10}")
for p in ["encrypted", "authenticated"]:
    runs = [load("fullnode", p, r) for r in range(1, rounds + 1)]
    for i, m in enumerate(runs[0]["methods"]):
        s = [x["methods"][i]["repair_seconds"] for x in runs]
        b = m["bound_seconds"]
        cpu = [x["methods"][i]["cpu_cores"] for x in runs]
        print(f"{p:<14} {m['method']:<8} {statistics.median(s):>16.2f} ({min(s):.2f}-{max(s):.2f}) {statistics.median(s) / b:>8.2f} {statistics.median(cpu):>10.2f}")
print(f"\nraw JSON: {out}")
PY
