#!/usr/bin/env bash
# bench-floor.sh: ringlog's round against the machine's own floor.
#
#   scripts/bench-floor.sh N BIN
#
# Runs N rounds. Each round runs, one after the other, `ringlog bench`
# (franz-go, linger 0, no consumer, fsync always) and `ringlog floor`
# (all three modes) at RATE msg/s (default 1000), first with three replicas
# (RF=3, min ISR 2) and then with one, and prints each run's CPU-µs and
# context switches per message and its ack p50, then ringlog's CPU per
# message over each floor's. Compare the figures of
# one round: the host drifts between rounds. DUR (default 10s) sets the
# measured time; results stay in $OUT (default /tmp/bench-floor).
set -euo pipefail
if [ $# -lt 2 ]; then
	sed -n '2,13p' "$0"
	exit 2
fi
N=$1 BIN=$2
RATE=${RATE:-1000} DUR=${DUR:-10s}
OUT=${OUT:-/tmp/bench-floor}
rm -rf "$OUT"
mkdir -p "$OUT"
# show KIND FILE R ROUND prints one run's line from its JSON file.
show() {
	python3 - "$@" <<'PY'
import json, sys
kind, path, r, i = sys.argv[1:]
try:
    d = json.load(open(path))
except OSError as e:
    print(f"{kind:6s} R={r} round {i}          no result: {e}")
    sys.exit(0)
if kind == "bench":
    c = d["broker_cpu"]
    rows = [("", c["cpu_us_per_msg"], c["ctx_switches"]["per_msg"], d["ack_latency_ms"]["p50"])]
else:
    rows = [(x["mode"], x["cpu_us_per_msg"], x["ctx_switches_per_msg"], x["p50_ms"]) for x in d]
for mode, cpu, ctx, p50 in rows:
    print(f"{kind:6s} R={r} round {i} {mode:8s} cpu-us/msg {cpu:7.1f} ctx/msg {ctx:6.2f} p50 {p50:.3f}")
PY
}
# ratio BENCH FLOOR R ROUND prints ringlog's CPU per message over each
# floor's, measured seconds apart: the figure that compares across rounds.
ratio() {
	python3 - "$@" <<'PY'
import json, sys
b, f, r, i = sys.argv[1:]
try:
    cpu = json.load(open(b))["broker_cpu"]["cpu_us_per_msg"]
    modes = {x["mode"]: x["cpu_us_per_msg"] for x in json.load(open(f))}
except (OSError, KeyError, ValueError):
    sys.exit(0)
print(f"ratio  R={r} round {i} ringlog over " + ", ".join(f"{m} {cpu / v:.2f}" for m, v in modes.items() if v > 0))
PY
}
for i in $(seq 1 "$N"); do
	for r in 3 1; do
		timeout 300 "$BIN" bench --brokers "$r" --rate "$RATE" --duration "$DUR" --warmup 3s --consumers 0 \
			--quiet --out "$OUT/bench-$r-$i" --client kgo --linger 0 >"$OUT/bench-$r-$i.log" 2>&1 || true
		show bench "$OUT/bench-$r-$i/result.json" "$r" "$i"
		timeout 300 "$BIN" floor --replicas "$r" --rate "$RATE" --duration "$DUR" --warmup 2s \
			--json-file "$OUT/floor-$r-$i.json" >"$OUT/floor-$r-$i.log" 2>&1 || true
		show floor "$OUT/floor-$r-$i.json" "$r" "$i"
		ratio "$OUT/bench-$r-$i/result.json" "$OUT/floor-$r-$i.json" "$r" "$i"
	done
done
