package ratelog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestFailureLogsOncePerInterval(t *testing.T) {
	var buf bytes.Buffer
	f := New(slog.New(slog.NewTextHandler(&buf, nil)), slog.LevelWarn, "writing checkpoint", time.Minute)
	full := errors.New("no space left on device")
	for range 100 {
		f.Report(full)
	}
	f.Report(errors.New("another failure"))
	f.Report(nil)
	f.Report(nil)
	out := buf.String()
	if n := strings.Count(out, "no space left on device"); n != 1 {
		t.Fatalf("the same failure logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "another failure") || strings.Count(out, "succeeded again") != 1 {
		t.Fatalf("new failure or recovery not logged once:\n%s", out)
	}
	// Past the interval the same failure is logged again, with its count.
	f.every = 0
	f.Report(full)
	f.Report(full)
	if n := strings.Count(buf.String(), "no space left on device"); n != 3 {
		t.Fatalf("after the interval: logged %d times, want 3:\n%s", n, buf.String())
	}
}
