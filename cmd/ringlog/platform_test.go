package main

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestUnsupportedServe: the serve command of non-Linux builds refuses with
// a message naming the platform and what the binary can do there, whatever
// flags it is given.
func TestUnsupportedServe(t *testing.T) {
	out, err := runApp(t, unsupportedServe(), "--data-dir", "/tmp/x", "--io", "uring")
	if !errors.Is(err, errServeUnsupported) {
		t.Fatalf("serve on a non-Linux build: %v\n%s", err, out)
	}
	for _, want := range []string{"Linux only", runtime.GOOS + "/" + runtime.GOARCH, "loadgen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

// TestUnsupportedBrokerStarters: bench (without --broker-bin) and example
// offsets start `ringlog serve` themselves, so on a build that cannot
// serve they refuse before starting anything.
func TestUnsupportedBrokerStarters(t *testing.T) {
	defer func(v bool) { serveSupported = v }(serveSupported)
	serveSupported = false
	if _, err := runApp(t, benchCommand(), "--duration", "1s"); !errors.Is(err, errServeUnsupported) {
		t.Errorf("bench: %v", err)
	}
	if _, err := runApp(t, exampleCommand(), "offsets", "--dir", t.TempDir()); !errors.Is(err, errServeUnsupported) {
		t.Errorf("example offsets: %v", err)
	}
}
