#!/usr/bin/env bash
# bench-pairs.sh: compare two ringlog binaries side by side, interleaved.
#
#   scripts/bench-pairs.sh N RATE BROKERS BIN_A BIN_B [ringlog bench flags...]
#
# Runs `ringlog bench` N times with each binary, alternating A, B, A, B
# (so a slow or fast period of a shared machine hits both alike), and
# prints each run's broker CPU-µs and context switches per acknowledged
# message, ack p50/p99, then the means and the B/A ratio of every pair.
# Timings on a shared VM drift by up to 2x between periods: compare the
# ratios, not absolute numbers across invocations. DUR (default 12s) sets
# the measured time of each run; results stay in $OUT (default
# /tmp/bench-pairs).
set -euo pipefail
if [ $# -lt 5 ]; then
	sed -n '2,13p' "$0"
	exit 2
fi
N=$1 RATE=$2 BROKERS=$3 A=$4 B=$5
shift 5
OUT=${OUT:-/tmp/bench-pairs}
rm -rf "$OUT"
mkdir -p "$OUT"
for i in $(seq 1 "$N"); do
	for bin in "$A" "$B"; do
		tag=$(basename "$bin")-$i
		timeout 300 "$bin" bench --brokers "$BROKERS" --rate "$RATE" --duration "${DUR:-12s}" \
			--warmup 3s --consumers 0 --quiet --out "$OUT/$tag" "$@" >"$OUT/$tag.log" 2>&1 || true
		python3 - "$OUT/$tag/result.json" "$tag" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); c = d["broker_cpu"]
print("%-20s cpu-us/msg %7.1f ctx/msg %6.2f p50 %6.3f p99 %7.3f acked %d broker cores %.2f" % (
    sys.argv[2], c["cpu_us_per_msg"], c["ctx_switches"]["per_msg"], d["ack_latency_ms"]["p50"],
    d["ack_latency_ms"]["p99"], c["messages_acked"], c["cpu_s"] / c["window_s"]))
PY
	done
done
python3 - "$OUT" "$(basename "$A")" "$(basename "$B")" "$N" <<'PY'
import json, sys, statistics as st
out, a, b, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def get(tag):
    d = json.load(open(f"{out}/{tag}/result.json")); c = d["broker_cpu"]
    return (c["cpu_us_per_msg"], c["ctx_switches"]["per_msg"], d["ack_latency_ms"]["p50"], d["ack_latency_ms"]["p99"])
pairs = [(get(f"{a}-{i}"), get(f"{b}-{i}")) for i in range(1, n + 1)]
for k, name in enumerate(["cpu-us/msg", "ctx/msg", "p50 ms", "p99 ms"]):
    print("%-10s A mean %8.2f  B mean %8.2f  B/A per pair %s" % (name, st.mean(p[0][k] for p in pairs),
        st.mean(p[1][k] for p in pairs), " ".join("%.2f" % (p[1][k] / p[0][k]) for p in pairs)))
PY
