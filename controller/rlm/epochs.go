package rlm

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/ringlog/ringlog/engine/epochcache"
)

// The "epochs" object of an uploaded segment holds the partition's whole
// leader-epoch history up to the segment's NextOffset (every entry whose
// StartOffset is below it), not only the entries inside the segment: a
// replica that restarts its log at NextOffset from the remote tier (the
// follower's OFFSET_MOVED_TO_TIERED_STORAGE path) rebuilds its epoch cache
// from this one object, as Kafka's follower does from the remote
// leader-epoch checkpoint.
//
// Format (text, like Kafka's checkpoint files, so an operator can read it
// with any S3 tool):
//
//	rlm-epochs 1
//	<count>
//	<epoch> <startOffset>     (count lines, epochs and offsets ascending)

// MaxEpochEntries bounds what DecodeEpochs accepts: an epoch history is a
// few entries per leader change, so anything near this is damage.
const MaxEpochEntries = 1 << 20

// EncodeEpochs writes entries in the epochs object format.
func EncodeEpochs(entries []epochcache.Entry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "rlm-epochs 1\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// DecodeEpochs parses an epochs object; it refuses a wrong header, a
// count that disagrees with the lines, and entries out of order.
func DecodeEpochs(b []byte) ([]epochcache.Entry, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	if h, ok := line(); !ok || h != "rlm-epochs 1" {
		return nil, fmt.Errorf("rlm: epochs object: bad header %q", h)
	}
	cs, ok := line()
	if !ok {
		return nil, fmt.Errorf("rlm: epochs object: no count")
	}
	n, err := strconv.Atoi(cs)
	if err != nil || n < 0 || n > MaxEpochEntries {
		return nil, fmt.Errorf("rlm: epochs object: bad count %q", cs)
	}
	out := make([]epochcache.Entry, 0, min(n, 1024))
	for i := 0; i < n; i++ {
		l, ok := line()
		if !ok {
			return nil, fmt.Errorf("rlm: epochs object: %d of %d entries", i, n)
		}
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("rlm: epochs object: bad entry %q", l)
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 {
			return nil, fmt.Errorf("rlm: epochs object: bad entry %q", l)
		}
		e := epochcache.Entry{Epoch: int32(ep), StartOffset: off}
		if len(out) > 0 && (e.Epoch <= out[len(out)-1].Epoch || e.StartOffset < out[len(out)-1].StartOffset) {
			return nil, fmt.Errorf("rlm: epochs object: entry %q out of order", l)
		}
		out = append(out, e)
	}
	if sc.Scan() {
		return nil, fmt.Errorf("rlm: epochs object: data after %d entries", n)
	}
	return out, sc.Err()
}
