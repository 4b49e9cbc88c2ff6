package main

import (
	"strings"
	"testing"
)

// Bad flags are refused with status 2 and a message naming the flag,
// before any node starts.
func TestFloorFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fsync", "sometimes"}, "--fsync"},
		{[]string{"--mode", "spin"}, "mode"},
		{[]string{"--mode", "thread", "--node-max-procs", "many"}, "--node-max-procs"},
		{[]string{"--node-max-procs", "-1"}, "--node-max-procs"},
		{[]string{"--rate", "0"}, "rate"},
		{[]string{"--replicas", "9"}, "replicas"},
		{[]string{"--message-size", "4"}, "size"},
		{[]string{"--node-sched-policy", "fifo"}, "scheduling policy"},
	} {
		_, err := runApp(t, floorCommand(), tc.args...)
		if exitStatus(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: status %d, error %v; want status 2 naming %s", tc.args, exitStatus(err), err, tc.want)
		}
	}
}
