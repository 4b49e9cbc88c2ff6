#!/usr/bin/env bash
# Side-by-side comparison of two broker binaries (BENCHMARKS.md section 11):
# the same keyed workload (8 keys per partition, 1,000-byte values, acks=all,
# --fsync always) at 8/64/256 partitions on 1 broker (20k msg/s) and on 3
# brokers RF=3 min.insync.replicas=2 (10k msg/s), each configuration run on
# A then on B, so both see the same machine state. The load generator is
# B's `ringlog bench` in both cases (--broker-bin picks the broker).
#
#   scripts/bench-ab.sh OLD_BIN NEW_BIN OUTDIR
#   CLIENT=kgo DUR=8s WARM=2s scripts/bench-ab.sh OLD_BIN NEW_BIN OUTDIR
#
# Prints one line per run: p50/p99/p99.9 of the acknowledgement latency.
set -u
A=$1; B=$2; OUT=$3; mkdir -p "$OUT"
DUR=${DUR:-8s}; WARM=${WARM:-2s}
run() { # label bin brokers partitions rate fsync
  local label=$1 bin=$2 brokers=$3 parts=$4 rate=$5 fsync=$6
  local d="$OUT/$label-b$brokers-p$parts-r$rate-$fsync"
  RINGLOG_FSYNC=$fsync timeout 120 "$B" bench --broker-bin "$bin" --brokers "$brokers" --partitions "$parts" \
     --client ${CLIENT:-lean} --keys $((parts*8)) --rate "$rate" --duration "$DUR" --warmup "$WARM" --consumers 0 --quiet --out "$d" >"$d.log" 2>&1
  python3 - "$d/result.json" "$label" "$brokers" "$parts" "$rate" "$fsync" <<'PY'
import json,sys
f,label,b,p,r,fs=sys.argv[1:]
try:
  j=json.load(open(f)); a=j["ack_latency_ms"]
  print(f"{label:5} brokers={b} parts={p:>4} rate={r:>6} fsync={fs:6} achieved={j['achieved_rate']:.0f} p50={a['p50']:.2f} p99={a['p99']:.2f} p99.9={a['p999']:.2f} errors={j['errors']}")
except Exception as e:
  print(f"{label:5} brokers={b} parts={p} rate={r} fsync={fs} FAILED {e}")
PY
}
for cfg in "1 8 20000 always" "1 64 20000 always" "1 256 20000 always" "3 8 10000 always" "3 64 10000 always" "3 256 10000 always"; do
  set -- $cfg
  run A "$A" $1 $2 $3 $4
  run B "$B" $1 $2 $3 $4
done
