//go:build linux

package serveflags

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/vfs"
)

// The fault endpoint validates what it is given, maps it onto vfs faults
// that fire on the named partition's files only, and answers loopback
// clients only.
func TestFaultHandler(t *testing.T) {
	efs := vfs.Wrap(vfs.NewMem())
	h := faultHandler(efs, slog.New(slog.NewTextHandler(io.Discard, nil)))
	do := func(method, body, remote string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/debug/ringlog/faults", strings.NewReader(body))
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	const local = "127.0.0.1:5000"
	for _, bad := range []string{
		`{"op":"read","topic":"t","partition":0,"errno":"EIO"}`,
		`{"op":"fsync","topic":"t","partition":0}`,
		`{"op":"fsync","topic":"t","partition":0,"errno":"EPERM"}`,
		`{"op":"fsync","errno":"EIO"}`,
		`{"op":"fsync","topic":"t","path_contains":"x","errno":"EIO"}`,
		`{"op":"fsync","topic":"t","partition":0,"delay_ms":3600000}`,
		`{"op":"fsync","topic":"t","partition":0,"errno":"EIO","extra":1}`,
	} {
		if rec := do(http.MethodPost, bad, local); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", bad, rec.Code, rec.Body)
		}
	}
	if rec := do(http.MethodPost, `{"op":"fsync","topic":"t","partition":0,"errno":"EIO"}`, "10.1.2.3:5000"); rec.Code != http.StatusForbidden {
		t.Fatalf("remote client: %d", rec.Code)
	}
	if rec := do(http.MethodPost, `{"op":"fsync","topic":"t","partition":1,"errno":"EIO","count":1}`, local); rec.Code != http.StatusOK {
		t.Fatalf("good fault: %d %s", rec.Code, rec.Body)
	}
	if _, err := efs.Check(vfs.OpSync, "/data/t-10/00000000000000000000.log"); err != nil {
		t.Fatalf("fault fired on t-10: %v", err)
	}
	if _, err := efs.Check(vfs.OpSync, "/data/t-1/00000000000000000000.log"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fault on t-1: %v", err)
	}
	if rec := do(http.MethodPost, `{"op":"write","path_contains":"/u-","delay_ms":20}`, local); rec.Code != http.StatusOK {
		t.Fatalf("delay fault: %d %s", rec.Code, rec.Body)
	}
	if d, err := efs.Check(vfs.OpWrite, "/data/u-0/x.log"); d != 20*time.Millisecond || err != nil {
		t.Fatalf("delay fault: %v %v", d, err)
	}
	if rec := do(http.MethodGet, "", local); !strings.Contains(rec.Body.String(), `"fired":2`) {
		t.Fatalf("GET: %s", rec.Body)
	}
	do(http.MethodDelete, "", local)
	if d, err := efs.Check(vfs.OpWrite, "/data/u-0/x.log"); d != 0 || err != nil {
		t.Fatalf("after DELETE: %v %v", d, err)
	}
}
