//go:build linux

package serveflags

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestProfilingEndpointGuards covers the window endpoint without a
// broker: loopback only, bad arguments, one window at a time.
func TestProfilingEndpointGuards(t *testing.T) {
	pw := &profileWindows{}
	h := loopbackOnly(pw)

	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/debug/ringlog/profile?seconds=1", nil)
	req.RemoteAddr = "192.0.2.7:4000"
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("remote client: %d", rec.Code)
	}
	for _, q := range []string{"seconds=0", "seconds=abc", "seconds=7200", "seconds=1&mutex_fraction=-1", "seconds=1&block_rate=fast"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/debug/ringlog/profile?"+q, nil)
		req.RemoteAddr = "127.0.0.1:4000"
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, rec.Code)
		}
	}

	// Two windows at once: one runs, the other is refused.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", fmt.Sprintf("/debug/ringlog/profile?seconds=%s", "0.5"), nil)
			req.RemoteAddr = "[::1]:4000"
			h.ServeHTTP(rec, req)
			codes[i] = rec.Code
		}()
	}
	wg.Wait()
	if !(codes[0] == http.StatusOK && codes[1] == http.StatusConflict || codes[0] == http.StatusConflict && codes[1] == http.StatusOK) {
		t.Fatalf("concurrent windows answered %v, want one 200 and one 409", codes)
	}
}
