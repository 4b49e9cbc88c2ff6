#!/usr/bin/env bash
# `make profile`: the standard profiled workload of BENCHMARKS.md. Three
# local brokers (RF=3, min.insync.replicas=2, fsync always), one lean
# producer at RATE msg/s of 1,000 bytes with acks=all and one consumer,
# DURATION measured after WARMUP. Every broker is profiled for exactly the
# measured window (CPU, heap, mutex, block, goroutine profiles), and
# perf records each broker process too when perf works here (the run says
# so when it does not). Then `ringlog report` prints the latency report,
# the CPU by path and the top functions.
#
#   make profile
#   DURATION=20s WARMUP=5s RATE=10000 scripts/profile.sh
#
# LOADGEN_FLAGS adds flags to the load generator's (a later flag wins),
# e.g. LOADGEN_FLAGS="--client kgo --linger 0 --consumers 0". PERF=0
# skips perf.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-60s}
WARMUP=${WARMUP:-10s}
RATE=${RATE:-20000}
OUT=${OUT:-bench-results/profile-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=./bin/ringlog
mkdir -p "$OUT"
make -s build

BOOT=127.0.0.1:49092,127.0.0.1:49093,127.0.0.1:49094
ADMINS=(127.0.0.1:49644 127.0.0.1:49645 127.0.0.1:49646)
NODE_PIDS=()
CLUSTER_DIR=$(mktemp -d)
stop_cluster() {
  for p in "${NODE_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${NODE_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$CLUSTER_DIR"
}
trap stop_cluster EXIT

voters=1@127.0.0.1:49192,2@127.0.0.1:49193,3@127.0.0.1:49194
for n in 1 2 3; do
  # Bound the disk: 60 s at 20 MB/s is 1.2 GB per copy.
  $BIN serve --node-id $n --listen 127.0.0.1:$((49091 + n)) --admin-listen "${ADMINS[$((n - 1))]}" \
    --controller-listen 127.0.0.1:$((49191 + n)) --controller-voters $voters \
    --data-dir "$CLUSTER_DIR/node-$n" --fsync always \
    --segment-bytes 67108864 --retention-bytes 268435456 --retention-check-interval 5s \
    >"$OUT/node-$n.log" 2>&1 &
  NODE_PIDS+=($!)
done
for _ in $(seq 300); do
  ok=0
  for a in "${ADMINS[@]}"; do
    curl -sf "http://$a/healthz" | grep -q '"status": "ok"' && ok=$((ok + 1))
  done
  [ $ok = 3 ] && break
  sleep 0.2
done
[ $ok = 3 ] || { echo "cluster did not start" >&2; exit 1; }

PERF_ON=true
[ "${PERF:-1}" = 0 ] && PERF_ON=false
echo "== profile: $RATE msg/s x 1000 B, acks=all, RF=3, 1 consumer, $DURATION after $WARMUP warmup${LOADGEN_FLAGS:+, then $LOADGEN_FLAGS} -> $OUT"
$BIN loadgen --bootstrap "$BOOT" --broker-admin "${ADMINS[0]}" --topic ringlog-profile --partitions 8 \
  --replication-factor 3 --topic-config min.insync.replicas=2 --acks all --message-size 1000 \
  --rate "$RATE" --consumers 1 --duration "$DURATION" --warmup "$WARMUP" --label profile --quiet \
  --profile-broker "${ADMINS[0]}" --profile-broker "${ADMINS[1]}" --profile-broker "${ADMINS[2]}" \
  --perf="$PERF_ON" ${LOADGEN_FLAGS:-} \
  --out "$OUT" >"$OUT/loadgen.txt"
$BIN report "$OUT" | tee "$OUT/report.txt"
