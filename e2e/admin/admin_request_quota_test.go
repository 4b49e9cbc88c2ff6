package admin

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestLooper sends Metadata requests (one topic) back to back and
// counts the answered ones and those that carried throttle_time_ms.
type requestLooper struct {
	cl        *kgo.Client
	done      atomic.Int64
	throttles atomic.Int64
}

func (l *requestLooper) run(ctx context.Context, topic string) {
	for ctx.Err() == nil {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		// Straight to the broker: kgo may answer a client-level Metadata
		// request from its cache.
		kresp, err := l.cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			continue
		}
		resp := kresp.(*kmsg.MetadataResponse)
		l.done.Add(1)
		if resp.ThrottleMillis > 0 {
			l.throttles.Add(1)
		}
	}
}

// TestAdminRequestQuota: request_percentage is accepted and described; a
// client id with a 0.2 % request quota (2 ms of handler time a second)
// that sends cheap Metadata requests back to back is answered with
// throttle_time_ms and held (its request rate falls well below that of an
// unquoted client measured side by side on the same broker); the unquoted
// one is never throttled.
func TestAdminRequestQuota(t *testing.T) {
	b, adm, _, ctx := quotaBroker(t, "quota-req")
	setClientQuota(ctx, t, adm, "greedy", "request_percentage", 0.2, false)
	d, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: sp("greedy")}})
	if err != nil || len(d) != 1 || len(d[0].Values) != 1 || d[0].Values[0].Key != "request_percentage" || d[0].Values[0].Value != 0.2 {
		t.Fatalf("describe: %v %v", d, err)
	}

	greedy := &requestLooper{cl: b.Client(t, kgo.ClientID("greedy"))}
	free := &requestLooper{cl: b.Client(t, kgo.ClientID("free"))}
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, l := range []*requestLooper{greedy, free} {
		wg.Add(1)
		go func() { defer wg.Done(); l.run(lctx, "quota-req") }()
	}
	defer func() { stop(); wg.Wait() }()

	// Real time: the clients connect and fill the quota's 0.55 s window
	// before the measured window starts.
	time.Sleep(time.Second)
	g0, f0 := greedy.done.Load(), free.done.Load()
	const seconds = 5
	// The measured window: hundreds of unquoted requests at least, any of
	// which would carry throttle_time_ms if the quota leaked onto other
	// clients.
	harness.Holds(t, seconds*time.Second, "the unquoted client is never throttled", func() (bool, string) {
		n := free.throttles.Load()
		return n == 0, fmt.Sprintf("throttled %d times", n)
	})
	g, f := float64(greedy.done.Load()-g0)/seconds, float64(free.done.Load()-f0)/seconds
	t.Logf("greedy (0.2 %%): %.0f requests/s, %d throttled; free: %.0f requests/s, %d throttled", g, greedy.throttles.Load(), f, free.throttles.Load())
	if greedy.throttles.Load() == 0 {
		t.Fatal("the quoted client never saw throttle_time_ms")
	}
	if free.throttles.Load() != 0 {
		t.Fatalf("the unquoted client was throttled %d times", free.throttles.Load())
	}
	if f < 100 || g > f/3 {
		t.Fatalf("quoted client at %.0f requests/s, unquoted at %.0f: want the quoted one below a third", g, f)
	}
	m := harness.Scrape(t, b.Admin)
	if v := m[`ringlog_quota_throttle_seconds_total{entity="client-id=greedy",type="request"}`]; v <= 0 {
		t.Fatalf("request throttle metric %v", v)
	}
	if v := m[`ringlog_quota_request_time_seconds_total{entity="client-id=greedy"}`]; v <= 0 {
		t.Fatalf("request time metric %v", v)
	}
	if _, ok := m[`ringlog_quota_request_percentage{entity="client-id=greedy"}`]; !ok {
		t.Fatal("no request percentage gauge")
	}
}
