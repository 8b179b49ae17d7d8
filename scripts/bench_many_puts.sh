#!/usr/bin/env bash
# Put throughput as the store fills: COUNT puts of 1 KiB objects (RS(6,3)) by CLIENTS
# concurrent clients into a fresh loopback cluster (a coordinator and 12 node processes),
# reporting the put rate over each tenth of them. A rate that falls as objects accumulate
# is a per-put cost that grows with the store (issue 38 asks last/first tenth >= 0.8).
# Usage: scripts/bench_many_puts.sh [COUNT] [CLIENTS]
set -u
COUNT=${1:-100000}
CLIENTS=${2:-4}
P=${PORT:-7419}
source "$(dirname "$0")/loopback_cluster.sh"
$K load --records "$COUNT" --value-size 1KiB --clients "$CLIENTS" --seconds 0 --prefix many 2>&1 | grep -v "records written:" | tail -1
rc=${PIPESTATUS[0]}
$K status | head -3
cluster_down
exit "$rc"
