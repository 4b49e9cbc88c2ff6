package core

import (
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A franz-go consumer reads every record of a keyed topic in order from
// a broker that hands out incremental fetch sessions (the default), and
// /metrics shows they were used; with
// --max-incremental-fetch-session-cache-slots 0 the same consumer works
// on full fetches and no session exists.
func TestFetchSessionsConsumer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		extra []string
		used  bool
	}{
		{"sessions", nil, true},
		{"no-sessions", []string{"--max-incremental-fetch-session-cache-slots", "0"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := harness.StartBroker(t, t.TempDir(), c.extra...)
			cl := b.Client(t)
			ctx := harness.Context(t, 60*time.Second)
			const parts, n = 6, 600
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, "sess"); err != nil {
				t.Fatal(err)
			}
			cons := b.Client(t, kgo.ConsumeTopics("sess"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
			next := map[int32]int64{}
			got := 0
			for round := range 3 {
				harness.ProduceN(t, cl, "sess", n/3)
				for got < (round+1)*n/3 {
					fs := cons.PollFetches(ctx)
					if err := ctx.Err(); err != nil {
						t.Fatalf("%d of %d records consumed: %v", got, n, err)
					}
					fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
					fs.EachRecord(func(r *kgo.Record) {
						if r.Offset != next[r.Partition] {
							t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
						}
						next[r.Partition]++
						got++
					})
				}
			}
			m := b.Metrics(t)
			sessions, incremental := m[`ringlog_fetch_sessions{what="sessions"}`], m["ringlog_fetch_session_incremental_total"]
			if c.used != (sessions > 0 && incremental > 0) || !c.used && sessions+incremental > 0 {
				t.Fatalf("%s: %v sessions, %v incremental fetches", c.name, sessions, incremental)
			}
			t.Logf("%v sessions, %v incremental fetches", sessions, incremental)
		})
	}
}
