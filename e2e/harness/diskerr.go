package harness

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
)

// InjectFault posts one fault to b's /debug/ringlog/faults; method DELETE
// clears them.
func (b *BrokerProc) InjectFault(t *testing.T, method string, f vfs.FaultRequest) {
	t.Helper()
	body, _ := json.Marshal(f)
	req, err := http.NewRequest(method, "http://"+b.Admin+"/debug/ringlog/faults", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var msg bytes.Buffer
		msg.ReadFrom(resp.Body)
		t.Fatalf("%s fault: %s: %s", method, resp.Status, msg.String())
	}
}

// WaitAcks polls until ok accepts the per-partition acknowledged counts.
func WaitAcks(t *testing.T, l *FailoverLoad, limit time.Duration, what string, ok func(map[int32]int) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok(l.AckedByPartition()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (acked per partition %v, failed %d)", what, limit, l.AckedByPartition(), l.Failed.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CheckNoLoss reads topic back and fails on a lost or reordered
// acknowledged record. Duplicates are reported, not failed: the load is
// not idempotent, and a record the failed leader had already replicated
// before its fsync failed is retried by the client (at-least-once, as in
// Kafka without idempotence).
func CheckNoLoss(t *testing.T, c *Cluster, adm *kadm.Client, l *FailoverLoad, topic string, partitions int) FailoverResult {
	t.Helper()
	logs := ReadBackValues(t, c, adm, topic, partitions)
	l.Mu.Lock()
	res, problems := CheckFailover(l.Acked, logs)
	l.Mu.Unlock()
	if res.Lost+res.Reordered > 0 {
		for _, p := range problems {
			t.Error(p)
		}
		t.Fatalf("checker: %+v", res)
	}
	if res.Acked == 0 {
		t.Fatal("nothing acknowledged")
	}
	return res
}

// Latencies returns the sorted latencies of produces acknowledged in
// [from, to).
func (l *FailoverLoad) Latencies(from, to time.Time) []time.Duration {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	var out []time.Duration
	for _, a := range l.Lats {
		if !a.At.Before(from) && a.At.Before(to) {
			out = append(out, a.D)
		}
	}
	slices.Sort(out)
	return out
}
