#!/usr/bin/env bash
# The loadgen table of BENCHMARKS.md: find-max and fixed-rate p99 for ringlog
# (fsync always and never) with kfake (franz-go's in-memory fake broker) run
# side by side in the same session. Every broker runs on loopback in a temp
# dir and is stopped at the end. Results land in $OUT (default
# ./bench-results/table-<time>); `ringlog report compare` tables them.
#
#   scripts/bench-loadgen.sh            # full table (~15 min)
#   DURATION=5s WARMUP=2s scripts/bench-loadgen.sh   # quicker, noisier
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-3s}
SIZE=${SIZE:-1000}
PARTS=${PARTS:-8}
OUT=${OUT:-bench-results/table-$(date -u +%Y%m%dT%H%M%SZ)}
BIN=./bin/ringlog
# Find-max pushes hundreds of MB/s: keep the brokers' disk use bounded.
RETENTION="--segment-bytes 67108864 --retention-bytes 268435456 --retention-check-interval 5s"
mkdir -p "$OUT" bin
make -s build
go build -o bin/fakebroker ./loadgen/internal/fakebroker

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS=()
DIRS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for d in "${DIRS[@]}"; do rm -rf "$d"; done
}
trap cleanup EXIT

# start_broker NAME BINARY ARGS...: sets ADDR and ADMIN.
start_broker() {
  local name=$1 bin=$2; shift 2
  ADDR=127.0.0.1:$(free_port); ADMIN=127.0.0.1:$(free_port)
  local dir; dir=$(mktemp -d); DIRS+=("$dir")
  "$bin" serve --listen "$ADDR" --admin-listen "$ADMIN" --data-dir "$dir" "$@" >"$OUT/$name.broker.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do curl -sf "http://$ADMIN/healthz" >/dev/null && return 0; sleep 0.1; done
  echo "broker $name did not start" >&2; exit 1
}

run() { # run LABEL ARGS...
  local label=$1; shift
  echo "== $label"
  $BIN loadgen --bootstrap "$ADDR" --broker-admin "$ADMIN" --topic "t-$label" --partitions "$PARTS" \
    --message-size "$SIZE" --acks all --duration "$DURATION" --warmup "$WARMUP" --quiet \
    --label "$label" --out "$OUT/$label" "$@" | tail -12
}

for target in ringlog-always ringlog-never kfake; do
  case $target in
    ringlog-always) start_broker "$target" $BIN --fsync always $RETENTION ;;
    ringlog-never)  start_broker "$target" $BIN --fsync never $RETENTION ;;
    kfake)          start_broker "$target" ./bin/fakebroker ;;
  esac
  run "$target-findmax" --find-max --rate 20000
  for rate in 10000 50000 100000; do
    run "$target-$rate" --rate "$rate"
  done
  kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true
done

$BIN report compare --html "$OUT/findmax-compare.html" "$OUT"/*-findmax
$BIN report compare --html "$OUT/fixed-compare.html" "$OUT"/*-10000 "$OUT"/*-50000 "$OUT"/*-100000
echo "results in $OUT"
