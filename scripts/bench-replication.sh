#!/usr/bin/env bash
# Replication benchmark of BENCHMARKS.md: 3 local brokers, RF=3, acks=all,
# min.insync.replicas=2, 1,000-byte messages. For fsync always and never:
# find-max under the 10 ms p99 target, then the p99 at 50 % of that rate;
# then (fsync always) a run at 50 % of the rate during which a broker that
# leads partitions (not the controller) is killed with SIGKILL mid-run.
#
#   scripts/bench-replication.sh
#   DURATION=6s WARMUP=2s KILL_RUN=30s scripts/bench-replication.sh
#   KILL_ONLY_RATE=20000 scripts/bench-replication.sh    # only the leader-kill run
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-8s}
WARMUP=${WARMUP:-2s}
KILL_RUN=${KILL_RUN:-30s}
KILL_AT=${KILL_AT:-12}
OUT=${OUT:-bench-results/replication-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=./bin/ringlog
mkdir -p "$OUT"
make -s build

BOOT=127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094
NODE_PIDS=()
CLUSTER_DIR=
stop_cluster() {
  for p in "${NODE_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${NODE_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  NODE_PIDS=()
  if [ -n "$CLUSTER_DIR" ]; then rm -rf "$CLUSTER_DIR"; fi
  CLUSTER_DIR=
}
trap stop_cluster EXIT

# start_cluster FSYNC: three `ringlog serve` processes, each a controller
# voter and a broker (not `ringlog dev cluster`, which stops every node
# when one exits: here one is killed on purpose).
start_cluster() {
  CLUSTER_DIR=$(mktemp -d)
  local voters=1@127.0.0.1:39192,2@127.0.0.1:39193,3@127.0.0.1:39194
  for n in 1 2 3; do
    # Find-max pushes hundreds of MB/s times 3 copies: bound the disk use.
    $BIN serve --node-id $n --listen 127.0.0.1:$((39091 + n)) --admin-listen 127.0.0.1:$((39643 + n)) \
      --controller-listen 127.0.0.1:$((39191 + n)) --controller-voters $voters \
      --data-dir "$CLUSTER_DIR/node-$n" --fsync "$1" \
      --segment-bytes 67108864 --retention-bytes 268435456 --retention-check-interval 5s \
      >"$OUT/node-$n-$1.log" 2>&1 &
    NODE_PIDS+=($!)
  done
  for _ in $(seq 300); do
    local ok=0
    for p in 39644 39645 39646; do
      curl -sf "http://127.0.0.1:$p/healthz" | grep -q '"status": "ok"' && ok=$((ok+1))
    done
    [ $ok = 3 ] && return 0
    sleep 0.2
  done
  echo "cluster did not start" >&2; exit 1
}

lg() { # lg LABEL ARGS...
  local label=$1; shift
  $BIN loadgen --bootstrap "$BOOT" --broker-admin 127.0.0.1:39644 --topic "t-$label" --partitions 8 \
    --replication-factor 3 --topic-config min.insync.replicas=2 --acks all --message-size 1000 \
    --duration "$DURATION" --warmup "$WARMUP" --label "$label" --out "$OUT/$label" "$@"
}

maxrate() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]+"/result.json")); print(int(r["find_max"]["max_passing_rate"]))' "$1"; }

for fsync in always never; do
  start_cluster "$fsync"
  if [ -n "${KILL_ONLY_RATE:-}" ]; then
    # Only the leader-kill run, at a rate from an earlier find-max.
    [ "$fsync" = always ] || { stop_cluster; continue; }
    half=$KILL_ONLY_RATE
  else
    echo "== fsync $fsync: find-max"
    lg "rf3-$fsync-findmax" --find-max --find-max-retries 1 --rate 5000 --quiet | tail -20
    max=$(maxrate "$OUT/rf3-$fsync-findmax")
    half=$((max / 2))
    echo "== fsync $fsync: 50% of $max = $half msg/s"
    lg "rf3-$fsync-half" --rate "$half" --quiet | tail -8
  fi
  if [ "$fsync" = always ]; then
    ctrl=$(curl -s http://127.0.0.1:39644/healthz | python3 -c 'import json,sys; print(json.load(sys.stdin)["controller_id"])')
    victim=3; [ "$ctrl" = 3 ] && victim=2
    echo "== fsync always: $half msg/s for $KILL_RUN, kill -9 node $victim (controller is $ctrl) at +${KILL_AT}s after warmup"
    (sleep $(( ${WARMUP%s} + KILL_AT )); kill -KILL "${NODE_PIDS[$((victim - 1))]}" && echo "killed node $victim at $(date +%T)") &
    killer=$!
    DURATION=$KILL_RUN lg "rf3-always-leaderkill" --rate "$half" | tee "$OUT/leaderkill.progress" | tail -12
    # Only the killer: a bare wait would also wait for the brokers.
    wait "$killer"
  fi
  stop_cluster
done
echo "results in $OUT"
