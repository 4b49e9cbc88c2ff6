package netpath

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/engine/batchtest"
	"github.com/ringlog/ringlog/internal/records"
)

func TestRecordCount(t *testing.T) {
	b := append(batchtest.Values("a", "b", "c"), batchtest.Values("d")...)
	if n := recordCount(records.ParseSet(b)); n != 4 {
		t.Fatalf("record count %d, want 4", n)
	}
	// A torn second batch is not counted, and garbage counts nothing.
	if n := recordCount(records.ParseSet(b[:len(b)-3])); n != 3 {
		t.Fatalf("torn: %d, want 3", n)
	}
	if n := recordCount(records.ParseSet([]byte("short"))); n != 0 {
		t.Fatalf("garbage: %d", n)
	}
}

func TestErrorSlot(t *testing.T) {
	for code, want := range map[int16]int{-1: 0, 0: 1, 6: 7, maxErrorCode: maxErrorCode + 1, 500: maxErrorCode + 1, -5: maxErrorCode + 1} {
		if got := errorSlot(code); got != want {
			t.Errorf("errorSlot(%d) = %d, want %d", code, got, want)
		}
	}
}

func testServer(t *testing.T, topics ...string) *Server {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.IOMode = "sync"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	for _, tp := range topics {
		if _, err := eng.CreateTopic(tp, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	return &Server{engine: eng, log: cfg.Logger}
}

// Produce accounting counts appended bytes and records per hosted topic,
// errors by code, and never creates series for topics this broker lacks
// or for a response that does not line up with its request.
func TestProducedAccounting(t *testing.T) {
	s := testServer(t, "t")
	m := &s.metrics
	recs := batchtest.Values("x", "y")
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	for _, name := range []string{"t", "ghost"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = name
		for p := int32(0); p < 2; p++ {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, recs
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for range rt.Partitions {
			st.Partitions = append(st.Partitions, kmsg.NewProduceResponseTopicPartition())
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.Topics[0].Partitions[1].ErrorCode = kerr.NotLeaderForPartition.Code
	resp.Topics[1].Partitions[0].ErrorCode = kerr.UnknownTopicOrPartition.Code
	resp.Topics[1].Partitions[1].ErrorCode = kerr.UnknownTopicOrPartition.Code

	m.produced(s, req, parseProduceRecords(req), resp)
	tc := m.topic(s, "t")
	if tc.bytesIn.Load() != uint64(len(recs)) || tc.messagesIn.Load() != 2 || tc.produceErrors.Load() != 1 {
		t.Fatalf("topic t: bytes %d msgs %d errors %d", tc.bytesIn.Load(), tc.messagesIn.Load(), tc.produceErrors.Load())
	}
	if m.topic(s, "ghost") != nil || len(*m.topics.Load()) != 1 {
		t.Fatal("counters created for a topic this broker does not host")
	}
	if m.produceErrors[errorSlot(kerr.UnknownTopicOrPartition.Code)].Load() != 2 || m.produceErrors[errorSlot(kerr.NotLeaderForPartition.Code)].Load() != 1 {
		t.Fatal("produce errors by code not counted")
	}
	// acks=0 (no response): counted as received.
	m.produced(s, req, parseProduceRecords(req), nil)
	if tc.messagesIn.Load() != 6 {
		t.Fatalf("acks=0: %d messages", tc.messagesIn.Load())
	}
	// A response that does not line up is skipped.
	resp.Topics[0].Topic = "other"
	m.produced(s, req, parseProduceRecords(req), resp)
	if tc.messagesIn.Load() != 6 {
		t.Fatalf("misaligned response counted: %d", tc.messagesIn.Load())
	}

	// The collector exports them.
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "ringlog_topic_messages_in_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if len(mt.GetLabel()) == 1 && mt.GetLabel()[0].GetValue() == "t" && mt.GetCounter().GetValue() == 6 {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("ringlog_topic_messages_in_total{topic=\"t\"} 6 not gathered")
	}
}
