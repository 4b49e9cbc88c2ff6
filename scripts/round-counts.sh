#!/usr/bin/env bash
# round-counts.sh: what one acknowledged message costs the brokers, counted.
#
#   scripts/round-counts.sh BIN RATE BROKERS [ringlog bench flags...]
#
# Runs `ringlog bench` with BIN and, over a 5 s window in the middle of
# the run, counts the machine's TCP data segments sent (/proc/net/snmp
# OutSegs: loopback, so client and inter-broker traffic alike), the
# brokers' system calls and context switches (perf stat on every
# `serve` process), and their heap allocations and Produce and Fetch
# requests (each broker's /metrics on its admin listener: the Go
# runtime's malloc count, ringlog_requests_total), each divided by the
# messages offered in the window;
# then prints the run's own per-message CPU and context switches and its
# ack latency. Counts, unlike timings, compare across runs. Needs perf
# (Debian linux-perf) and root or perf_event_paranoid <= 0. Run it on an
# otherwise idle machine: it counts every serve process it finds.
set -euo pipefail
if [ $# -lt 3 ]; then
	sed -n '2,13p' "$0"
	exit 2
fi
BIN=$1 RATE=$2 BR=$3
shift 3
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$BIN" bench --brokers "$BR" --rate "$RATE" --duration 14s --warmup 3s --consumers 0 --quiet --out "$OUT/run" "$@" >"$OUT/bench.log" 2>&1 &
bp=$!
sleep 8
pids=$(pgrep -f -- "$BIN serve --" | paste -sd, -)
segs() { awk '/^Tcp:/ && $2 ~ /[0-9]/ {print $12}' /proc/net/snmp; }
# Each broker's admin listener: the one of its listening ports that
# serves /metrics.
admins=""
for p in ${pids//,/ }; do
	for port in $(ss -ltnpH | grep "pid=$p," | awk '{print $4}' | sed 's/.*://'); do
		# grep reads to the end: -q would cut curl off, which pipefail counts as a failure.
		if curl -sf -m 2 "http://127.0.0.1:$port/metrics" 2>/dev/null | grep '^go_memstats_mallocs_total' >/dev/null; then
			admins="$admins 127.0.0.1:$port"
			break
		fi
	done
done
# scrape N: the counters of every broker's /metrics, summed, into $OUT/mN.
scrape() {
	for adm in $admins; do
		curl -sf -m 2 "http://$adm/metrics" || true
	done | awk '/^go_memstats_mallocs_total / {m += $2} /^ringlog_requests_total\{api="Produce"\}/ {p += $2} /^ringlog_requests_total\{api="Fetch"\}/ {f += $2} END {printf "%d %d %d\n", m, p, f}' >"$OUT/m$1"
}
a=$(segs)
scrape 0
perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$pids" -- sleep 5 2>"$OUT/stat.txt"
scrape 1
b=$(segs)
wait "$bp" || true
python3 - "$OUT" "$RATE" "$a" "$b" "$(basename "$BIN")" <<'PY'
import json, sys
out, rate, a, b, name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
stat = {l.split(",")[2]: float(l.split(",")[0]) for l in open(f"{out}/stat.txt") if l.count(",") > 2 and l[0].isdigit()}
n = rate * 5
d = json.load(open(f"{out}/run/result.json")); c = d["broker_cpu"]
m0 = [int(x) for x in open(f"{out}/m0").read().split()]
m1 = [int(x) for x in open(f"{out}/m1").read().split()]
allocs, produce, fetch = ((y - x) / n for x, y in zip(m0, m1))
print("%-12s segments/msg %.2f syscalls/msg %.1f ctx/msg %.2f allocs/msg %.1f produce/msg %.2f fetch/msg %.2f | run: cpu-us/msg %.1f ctx/msg %.2f ack p50 %.3f p99 %.3f ms, broker cores %.2f" % (
    name, (b - a) / n, stat.get("raw_syscalls:sys_enter", 0) / n, stat.get("context-switches", 0) / n,
    allocs, produce, fetch,
    c["cpu_us_per_msg"], c["ctx_switches"]["per_msg"], d["ack_latency_ms"]["p50"], d["ack_latency_ms"]["p99"],
    c["cpu_s"] / c["window_s"]))
PY
