#!/usr/bin/env bash
# rotate.sh: several ringlog binaries side by side, in rotated order.
#
#   scripts/rotate.sh N TAG BIN [TAG BIN ...] -- [ringlog bench flags...]
#
# Runs N rounds. Each round runs `ringlog bench` once with every binary,
# in the order given on odd rounds and reversed on even ones, so neither
# end of a round always meets the machine first. Each run prints its
# brokers' cores, CPU-µs and context switches per acknowledged message
# and its ack p50/p99. Compare the binaries within a round: a shared VM
# drifts by more than the differences measured here between rounds.
# The bench flags go to every run (--rate, --duration, --partitions,
# ...); results stay in $OUT/TAG-ROUND (default OUT /tmp/rotate).
set -euo pipefail
if [ $# -lt 3 ]; then
	sed -n '2,13p' "$0"
	exit 2
fi
N=$1
shift
tags=() bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	if [ $# -lt 2 ]; then
		echo "rotate.sh: TAG without BIN: $1" >&2
		exit 2
	fi
	tags+=("$1") bins+=("$2")
	shift 2
done
[ $# -gt 0 ] && shift # the --
OUT=${OUT:-/tmp/rotate}
mkdir -p "$OUT"
for i in $(seq 1 "$N"); do
	order=$(seq 0 $((${#tags[@]} - 1)))
	if [ $((i % 2)) = 0 ]; then
		order=$(echo "$order" | tac)
	fi
	for k in $order; do
		o="$OUT/${tags[$k]}-$i"
		rm -rf "$o"
		timeout 300 "${bins[$k]}" bench --quiet --out "$o" "$@" >"$o.log" 2>&1 || true
		python3 - "$o/result.json" "${tags[$k]}" "$i" <<'PY'
import json, sys
path, tag, rnd = sys.argv[1:]
try:
    d = json.load(open(path))
except (OSError, ValueError) as e:
    print(f"{tag:12s} round {rnd}  no result: {e}")
    sys.exit(0)
c = d["broker_cpu"]
print(f"{tag:12s} round {rnd}  cores {c['cpu_s'] / c['window_s']:.3f} cpu-us/msg {c['cpu_us_per_msg']:7.1f} "
      f"ctx/msg {c['ctx_switches']['per_msg']:6.2f} p50 {d['ack_latency_ms']['p50']:.2f} p99 {d['ack_latency_ms']['p99']:.2f}")
PY
	done
done
