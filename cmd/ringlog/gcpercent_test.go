package main

import (
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ringlog/ringlog/broker/serveflags"
	"github.com/ringlog/ringlog/e2e/harness"
)

// A broker started without flags runs with the default GC target, as the
// Go runtime reports it (go_gc_gogc_percent).
func TestGCPercentDefault(t *testing.T) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		t.Skip("GOGC is set in the test environment; it overrides the default")
	}
	b := harness.StartBroker(t, t.TempDir())
	if got := harness.Scrape(t, b.Admin)["go_gc_gogc_percent"]; got != serveflags.DefaultGCPercent {
		t.Fatalf("go_gc_gogc_percent %v, want %v", got, serveflags.DefaultGCPercent)
	}
}

// --gc-percent applies unless GOGC is set.
func TestSetGCPercentYieldsToGOGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	old, had := os.LookupEnv("GOGC")
	defer func() {
		if had {
			os.Setenv("GOGC", old)
		} else {
			os.Unsetenv("GOGC")
		}
	}()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	os.Unsetenv("GOGC")
	setGCPercent(150, log)
	if got := debug.SetGCPercent(100); got != 150 {
		t.Fatalf("GC percent %d after setGCPercent(150), want 150", got)
	}
	os.Setenv("GOGC", "250")
	setGCPercent(150, log)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent %d with GOGC set, want it left alone (100)", got)
	}
}

// An unknown --sched-policy stops serve before anything starts, with an
// error naming the flag and the policies it takes.
func TestServeRefusesUnknownSchedPolicy(t *testing.T) {
	_, err := runApp(t, serveCommand(), "--sched-policy", "fifo", "--data-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--sched-policy") || !strings.Contains(err.Error(), "batch") {
		t.Fatalf("serve --sched-policy fifo: %v; want an error naming the flag and its policies", err)
	}
}
