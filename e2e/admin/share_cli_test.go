package admin

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ringlog/ringlog/e2e/harness"
)

// shareConsumer is a franz-go share consumer accepting every record,
// counting them per key, until stop.
type shareConsumer struct {
	mu       sync.Mutex
	accepted map[string]int
	stop     func()
}

func startShareConsumer(t *testing.T, addr, group, topic string) *shareConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sc := &shareConsumer{accepted: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, r := range cl.PollFetches(ctx).Records() {
				r.Ack(kgo.AckAccept)
				sc.mu.Lock()
				sc.accepted[string(r.Key)]++
				sc.mu.Unlock()
			}
			if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("flush acks: %v", err)
			}
		}
	}()
	var once sync.Once
	// Close leaves the group (heartbeat epoch -1) after the poll loop ended.
	sc.stop = func() { once.Do(func() { cancel(); <-done; cl.Close() }) }
	t.Cleanup(sc.stop)
	return sc
}

// keys is how many distinct keys were accepted, and how many
// acceptances in all.
func (sc *shareConsumer) keys() (distinct, total int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, n := range sc.accepted {
		total += n
	}
	return len(sc.accepted), total
}

type shareDesc struct {
	Group   string `json:"group"`
	Type    string `json:"type"`
	State   string `json:"state"`
	Members []struct {
		MemberID   string             `json:"member_id"`
		Subscribed []string           `json:"subscribed_topics"`
		Assignment map[string][]int32 `json:"assignment"`
	} `json:"members"`
	Partitions []struct {
		Topic       string `json:"topic"`
		Partition   int32  `json:"partition"`
		Committed   int64  `json:"committed"`
		StartOffset *int64 `json:"start_offset"`
		LogEnd      int64  `json:"log_end"`
		Lag         int64  `json:"lag"`
	} `json:"partitions"`
	TotalLag int64 `json:"total_lag"`
}

// starts is the share-partition start offsets by partition, -1 where
// the group has no state.
func (d shareDesc) starts() map[int32]int64 {
	out := map[int32]int64{}
	for _, p := range d.Partitions {
		out[p.Partition] = -1
		if p.StartOffset != nil {
			out[p.Partition] = *p.StartOffset
		}
	}
	return out
}

// TestShareGroupCommands runs `ringlog group` against a share group with
// a real share consumer: list shows its type, describe its member with
// the assignment and per partition the start offset and lag, seek (with
// the consumer gone) moves the start offsets back so that a new consumer
// gets every record again, and delete removes the group.
func TestShareGroupCommands(t *testing.T) {
	b := harness.StartBroker(t, filepath.Join(t.TempDir(), "data"))
	const topic, group, n = "sq", "sg", 20
	adm := harness.NewClient(t, []string{b.Addr})
	if _, err := kadm.NewClient(adm).CreateTopic(harness.Context(t, 10*time.Second), 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	describe := func() shareDesc {
		ds := decodeJSON[[]shareDesc](t, ringlogCLI(t, b.Addr, "group", "describe", "--format", "json", group))
		if len(ds) != 1 {
			t.Fatalf("describe returned %d groups", len(ds))
		}
		return ds[0]
	}

	first := startShareConsumer(t, b.Addr, group, topic)
	// The consumer's first fetch of each partition creates its state at
	// the high watermark (share.auto.offset.reset=latest): 0 on the empty
	// topic, so what is produced after that is all delivered.
	harness.Eventually(t, 30*time.Second, "the share group with one member and state on both partitions", func() (bool, string) {
		d := describe()
		st := d.starts()
		return d.Type == "share" && d.State == "Stable" && len(d.Members) == 1 && st[0] == 0 && st[1] == 0, fmt.Sprintf("%+v", d)
	})
	d := describe()
	if m := d.Members[0]; fmt.Sprint(m.Subscribed) != "[sq]" || fmt.Sprint(m.Assignment) != "map[sq:[0 1]]" {
		t.Fatalf("member %+v: want subscribed [sq], assigned sq 0 and 1", m)
	}
	for _, p := range d.Partitions {
		if p.Committed != -1 {
			t.Fatalf("share partition %+v has a committed offset", p)
		}
	}
	list := decodeJSON[[]struct {
		Group string `json:"group"`
		Type  string `json:"type"`
	}](t, ringlogCLI(t, b.Addr, "group", "list", "--format", "json"))
	if fmt.Sprint(list) != "[{sg share}]" {
		t.Fatalf("group list: %+v, want sg of type share", list)
	}

	harness.ProduceN(t, adm, topic, n)
	harness.Eventually(t, 30*time.Second, "every record accepted, the start offsets at the log ends", func() (bool, string) {
		distinct, _ := first.keys()
		d := describe()
		st := d.starts()
		return distinct == n && st[0]+st[1] == n && d.TotalLag == 0, fmt.Sprintf("%d keys accepted; %+v", distinct, d)
	})
	text := ringlogCLI(t, b.Addr, "group", "describe", group)
	for _, want := range []string{"type share", "START-OFFSET", "sq:0-1", d.Members[0].MemberID} {
		if !strings.Contains(text, want) {
			t.Fatalf("describe text lacks %q:\n%s", want, text)
		}
	}
	if _, err := ringlogCLIErr(t, b.Addr, "", "group", "seek", "--to", "start", group); err == nil || !strings.Contains(err.Error(), "NON_EMPTY_GROUP") {
		t.Fatalf("seek of a share group with a member: %v, want NON_EMPTY_GROUP", err)
	}

	first.stop()
	harness.Eventually(t, 30*time.Second, "the group empty after its consumer left", func() (bool, string) {
		d := describe()
		return len(d.Members) == 0 && d.State == "Empty", fmt.Sprintf("%+v", d)
	})
	out := decodeJSON[[]struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	}](t, ringlogCLI(t, b.Addr, "group", "seek", "--format", "json", "--to", "start", group))
	if fmt.Sprint(out) != "[{0 0} {1 0}]" {
		t.Fatalf("seek --to start moved %+v, want both partitions to 0", out)
	}
	if d := describe(); d.starts()[0] != 0 || d.starts()[1] != 0 || d.TotalLag != n {
		t.Fatalf("after seek: %+v, want start offsets 0 and a total lag of %d", d, n)
	}
	second := startShareConsumer(t, b.Addr, group, topic)
	harness.Eventually(t, 30*time.Second, "every record delivered again after the seek", func() (bool, string) {
		distinct, total := second.keys()
		return distinct == n && total == n, fmt.Sprintf("%d keys, %d acceptances", distinct, total)
	})
	second.stop()
	harness.Eventually(t, 30*time.Second, "the group empty again", func() (bool, string) {
		d := describe()
		return len(d.Members) == 0, fmt.Sprintf("%+v", d)
	})
	if got := ringlogCLI(t, b.Addr, "group", "delete", group); got != "deleted sg\n" {
		t.Fatalf("delete: %q", got)
	}
	if got := ringlogCLI(t, b.Addr, "group", "list"); strings.Contains(got, group) {
		t.Fatalf("group list after delete:\n%s", got)
	}
}
