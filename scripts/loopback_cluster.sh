# Sourced by the benchmark scripts: a coordinator on port $P and 12 node processes on
# loopback, data under a fresh $D; `cluster_down` stops them and removes $D.
K=${KINTSUGI:-target/release/kintsugi}
D=$(mktemp -d)
# COORD_ARGS: more flags for the coordinator (e.g. --meta etcd://...).
$K coordinator --listen 127.0.0.1:$P --data-dir $D/coord ${COORD_ARGS:-} 2>/dev/null & CP=$!
export KINTSUGI_COORDINATOR=127.0.0.1:$P
PIDS=()
for i in $(seq 0 11); do $K node --id $i --data-dir $D/n$i --coordinator 127.0.0.1:$P 2>/dev/null & PIDS+=($!); done
sleep 3
cluster_down() { kill "${PIDS[@]}" $CP 2>/dev/null; wait 2>/dev/null; rm -rf "$D"; }
