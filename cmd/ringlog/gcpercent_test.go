package main

import (
	"os"
	"testing"
)

// The broker's GC target as the Go runtime reports it
// (go_gc_gogc_percent): --gc-percent's default, the flag, and GOGC over
// both.
func TestGCPercent(t *testing.T) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		t.Skip("GOGC is set in the test environment; it would override every case")
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want float64
	}{
		{"default", nil, nil, defaultGCPercent},
		{"flag", nil, []string{"--gc-percent", "150"}, 150},
		{"GOGC wins", []string{"GOGC=250"}, []string{"--gc-percent", "150"}, 250},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &brokerProc{t: t, dataDir: t.TempDir(), addr: freePort(t), admin: freePort(t), env: tc.env}
			b.args = append([]string{"serve", "--listen", b.addr, "--admin-listen", b.admin, "--data-dir", b.dataDir, "--io", ioMode()}, tc.args...)
			b.start()
			t.Cleanup(b.stop)
			if got := scrape(t, b.admin)["go_gc_gogc_percent"]; got != tc.want {
				t.Fatalf("go_gc_gogc_percent %v, want %v", got, tc.want)
			}
		})
	}
}
