package netpath

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The precomputed table answers as the codec does for every API key and
// version it knows, and no version above them is flexible.
func TestHeaderIsFlexibleMatchesCodec(t *testing.T) {
	n := 0
	for key := int16(0); key < 1024; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			if headerIsFlexible(key, 0) {
				t.Errorf("unknown key %d flexible", key)
			}
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			if got, want := headerIsFlexible(key, v), req.IsFlexible(); got != want {
				t.Errorf("key %d version %d: flexible %v, codec says %v", key, v, got, want)
			}
			n++
		}
		if headerIsFlexible(key, req.MaxVersion()+1) {
			t.Errorf("key %d: a version above the codec's is flexible", key)
		}
	}
	if n < 300 {
		t.Fatalf("only %d key/version pairs checked", n)
	}
	if headerIsFlexible(-1, 0) || headerIsFlexible(0, -1) {
		t.Error("negative key or version flexible")
	}
}
