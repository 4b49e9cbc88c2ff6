#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME (default 30s). A target fails the run
# when it finds something (a failing input written to testdata/fuzz, a
# panic, a test error). Go's fuzz coordinator also fails, now and then, with
# a bare "context deadline exceeded" when -fuzztime expires while a worker
# is mid-input (golang/go#51484, #75804): no input is written and nothing
# reproduces. Such a run is retried once; a second one fails the run.
set -uo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

deadline_flake() {
	grep -q 'context deadline exceeded' "$log" &&
		! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$log"
}

# The targets are found in the test sources, not with `go test -list` on
# every package: that links one test binary per package (about a minute
# here) only to list the few that have fuzz targets.
targets=$(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
	sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*).*|./\1 \2|' | sort -u)
[ -n "$targets" ] || { echo "no fuzz targets found"; exit 1; }
while read -r pkg f; do
	{
		echo "== $pkg $f"
		for attempt in 1 2; do
			$GO test -run '^$' -fuzz "^$f\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$log"
			rc=${PIPESTATUS[0]}
			[ "$rc" -eq 0 ] && break
			if [ "$attempt" -eq 1 ] && deadline_flake; then
				echo "== $f: fuzz coordinator deadline race, no input found; retrying once"
				continue
			fi
			exit "$rc"
		done
	} </dev/null
done <<<"$targets"
