#!/usr/bin/env bash
# pgo.sh: refresh cmd/ringlog/default.pgo, the CPU profile that Go's
# profile-guided optimisation builds the ringlog binary with (`go build`
# picks up default.pgo in the main package's directory by itself).
#
#   scripts/pgo.sh
#
# Profiles three local brokers (scripts/profile.sh: RF=3, min ISR 2,
# fsync always) under two workloads, DURATION (default 30s) each: make
# bench's (20,000 msg/s keyed, lean client, one consumer) and issue 31's
# replication round (1,000 msg/s, franz-go, linger 0, no consumer). Then
# merges every broker's CPU profile of both into default.pgo. Rerun it
# when the hot path changes; a stale profile only optimises less, it is
# never wrong. BENCHMARKS.md section 33 has what it buys.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-30s}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/bench DURATION=$DURATION WARMUP=5s RATE=20000 PERF=0 scripts/profile.sh >"$TMP/bench.txt"
OUT=$TMP/round DURATION=$DURATION WARMUP=5s RATE=1000 PERF=0 \
	LOADGEN_FLAGS="--client kgo --linger 0 --consumers 0" scripts/profile.sh >"$TMP/round.txt"
profiles=("$TMP"/bench/profiles/*/cpu.pprof "$TMP"/round/profiles/*/cpu.pprof)
if [ ${#profiles[@]} -ne 6 ]; then
	echo "pgo: expected 6 broker CPU profiles, found ${#profiles[@]}" >&2
	exit 1
fi
${GO:-go} tool pprof -proto "${profiles[@]}" >"$TMP/default.pgo"
mv "$TMP/default.pgo" cmd/ringlog/default.pgo
echo "pgo: wrote cmd/ringlog/default.pgo ($(wc -c <cmd/ringlog/default.pgo) bytes) from ${#profiles[@]} broker profiles"
