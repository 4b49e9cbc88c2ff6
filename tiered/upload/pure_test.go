package upload

import (
	"reflect"
	"testing"
	"time"

	"github.com/ringlog/ringlog/controller/rlm"
	"github.com/ringlog/ringlog/engine/epochcache"
)

func TestContiguousEnd(t *testing.T) {
	seg := func(b, n int64) rlm.Segment { return rlm.Segment{BaseOffset: b, NextOffset: n} }
	for _, tc := range []struct {
		segs  []rlm.Segment
		start int64
		want  int64
	}{
		{nil, -1, -1},
		{nil, 50, 50}, // start raised before any commit: nothing local below it is needed
		{[]rlm.Segment{seg(0, 10), seg(10, 20)}, 0, 20},
		{[]rlm.Segment{seg(0, 10), seg(5, 30), seg(10, 20)}, 0, 30},   // overlap after a leader change
		{[]rlm.Segment{seg(0, 10), seg(12, 20)}, 0, 10},               // a gap stops it
		{[]rlm.Segment{seg(0, 10), seg(10, 20), seg(20, 30)}, 15, 30}, // expired ones skipped
		{[]rlm.Segment{seg(0, 10)}, 10, 10},
	} {
		if got := contiguousEnd(tc.segs, tc.start); got != tc.want {
			t.Errorf("contiguousEnd(%v, %d) = %d, want %d", ranges(tc.segs), tc.start, got, tc.want)
		}
	}
}

func ep(epoch int32, start int64) epochcache.Entry {
	return epochcache.Entry{Epoch: epoch, StartOffset: start}
}

func TestEpochHistory(t *testing.T) {
	remote := []rlm.Segment{
		{BaseOffset: 0, NextOffset: 100, Epochs: []epochcache.Entry{ep(1, 0), ep(2, 50)}},
		{BaseOffset: 60, NextOffset: 150, Epochs: []epochcache.Entry{ep(2, 60), ep(3, 120)}}, // overlaps: a new leader's boundaries
	}
	// The local cache was trimmed at 130 (local retention).
	local := []epochcache.Entry{{Epoch: 3, StartOffset: 130}, {Epoch: 5, StartOffset: 200}, {Epoch: 6, StartOffset: 300}}
	got := epochHistory(remote, local, 300)
	want := []epochcache.Entry{ep(1, 0), ep(2, 50), ep(3, 120), ep(5, 200)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if got := epochHistory(nil, local, 250); !reflect.DeepEqual(got, []epochcache.Entry{ep(3, 130), ep(5, 200)}) {
		t.Fatalf("local only: %v", got)
	}
	// The result is a valid epochs object.
	if _, err := rlm.DecodeEpochs(rlm.EncodeEpochs(want)); err != nil {
		t.Fatal(err)
	}
}

func TestParseObjectName(t *testing.T) {
	s := rlm.Segment{ID: rlm.SegmentID{1, 2, 3}, TopicID: [16]byte{7}, Partition: 3, BaseOffset: 12345}
	for _, kind := range objectKinds {
		key := rlm.ObjectKey(&s, kind)
		name := key[len(key)-len("00000000000000012345-")-32-1-len(kind):]
		base, id, ok := parseObjectName(name)
		if !ok || base != 12345 || id != s.ID {
			t.Fatalf("%s: %d %s %v", name, base, id, ok)
		}
	}
	for _, bad := range []string{"", "notes.txt", "00000000000000000001-zz.log", "x-0102.log",
		"00000000000000000001-01020300000000000000000000000000.tmp", "-5-01020300000000000000000000000000.log"} {
		if _, _, ok := parseObjectName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPutTimeout(t *testing.T) {
	for _, c := range []struct {
		size int64
		want time.Duration
	}{
		{0, 30 * time.Second},
		{8 << 20, 31 * time.Second},
		{1 << 30, 30*time.Second + 128*time.Second},
	} {
		if got := putTimeout(30*time.Second, 8<<20, c.size); got != c.want {
			t.Errorf("putTimeout(%d) = %v, want %v", c.size, got, c.want)
		}
	}
}
