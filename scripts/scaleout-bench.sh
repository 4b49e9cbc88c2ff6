#!/bin/bash
# The scale-out scenario under load (BENCHMARKS.md section 15):
# a 3-broker dev cluster with a 64-partition RF=3 min.insync=2 topic under
# `ringlog loadgen` (acks=all, keyed), a 4th broker joins, `ringlog admin
# rebalance` moves replicas onto it, broker 1 is decommissioned, then an
# unthrottled, unpaced rebalance (--max-moves 0) moves replicas back onto
# broker 1 (it still runs)
# for comparison. Each move is measured inside one loadgen run: the first
# 20 s after warmup are the pre-move window, the move starts then, and
# its window is [20 s, 20 s + the CLI's wall time), read with
# `ringlog report window`. Ports 9092-9095, 9192-9195, 9644-9647.
#
#   THR=2000000 THR2=2000000 RATE=1000 PRE=30 MOVES=5 scripts/scaleout-bench.sh
set -eu
R=${RINGLOG:-./bin/ringlog}
D=${BASE_DIR:-./scaleout-data}; OUT=${OUT:-./scaleout-results/$(date +%Y%m%d-%H%M%S)}
THR=${THR:-2000000}; THR2=${THR2:-2000000}; RATE=${RATE:-1000}; PRE=${PRE:-30}
MOVES=${MOVES:-5} # --max-moves of the two throttled phases; the control runs unpaced
rm -rf "$D"; mkdir -p "$OUT"
$R dev cluster --nodes 3 --base-dir "$D" > "$OUT/cluster.log" 2>&1 & CL=$!
trap 'kill $CL ${JN:-} 2>/dev/null || true; wait' EXIT
BS=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094
for _ in $(seq 60); do $R admin reassignments --bootstrap $BS >/dev/null 2>&1 && break; sleep 1; done
LG="$R loadgen --topic scale --partitions 64 --replication-factor 3 --topic-config min.insync.replicas=2 --message-size 1000 --quiet --warmup 3s --rate $RATE"
# Preload: the moves copy real data (PRE MB at 10 MB/s).
$LG --bootstrap $BS --rate 10000 --duration $((PRE / 10))s --label preload --out "$OUT/preload" > "$OUT/preload.txt" 2>&1
$R dev join --base-dir "$D" --node-id 4 > "$OUT/join.log" 2>&1 & JN=$!
sleep 5
phase() { # name bootstrap loadgen-duration admin-args...
	local name=$1 bs=$2 dur=$3
	shift 3
	$LG --bootstrap "$bs" --duration "$dur" --label "$name" --out "$OUT/$name" > "$OUT/$name.txt" 2>&1 & local lg=$!
	sleep 23 # loadgen start-up and warmup, then 20 s of pre-move window
	local t0 t1
	t0=$(date +%s%N)
	$R admin "$@" > "$OUT/$name-cli.txt" 2>&1
	t1=$(date +%s%N)
	wait $lg
	local ms=$(((t1 - t0) / 1000000))
	echo "== $name: move took ${ms} ms"
	$R report window --to 20s "$OUT/$name"
	$R report window --from 20s --to $((20000 + ms))ms "$OUT/$name"
	grep -E "errors" "$OUT/$name.txt" | head -1
}
phase rebalance $BS 100s rebalance --bootstrap $BS --throttle "$THR" --max-moves "$MOVES" --wait
phase decommission 127.0.0.1:9093,127.0.0.1:9094,127.0.0.1:9095 80s decommission --bootstrap 127.0.0.1:9093 --broker 1 --throttle "$THR2" --max-moves "$MOVES" --wait
phase unthrottled $BS,127.0.0.1:9095 50s rebalance --bootstrap 127.0.0.1:9093 --max-moves 0 --wait
echo "results in $OUT"
