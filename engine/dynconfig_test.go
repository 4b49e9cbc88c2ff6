package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/testwait"
)

// Dynamic broker configs reach topics without their own value at once,
// leave topics with their own value alone, and are refused when bad.
func TestDynamicDefaults(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Defaults.RetentionMs = 5000 // a static flag
	e := mustOpen(t, cfg)
	defer e.Close()
	if _, err := e.CreateTopic("plain", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic("own", 1, map[string]string{"retention.ms": "7"}); err != nil {
		t.Fatal(err)
	}
	d, err := BrokerDefaults(map[string]string{"log.retention.ms": "100", "min.insync.replicas": "2"})
	if err != nil {
		t.Fatal(err)
	}
	changed, err := e.SetDynamicDefaults(d)
	if err != nil || !changed {
		t.Fatalf("SetDynamicDefaults: %v changed=%v", err, changed)
	}
	if changed, _ := e.SetDynamicDefaults(d); changed {
		t.Fatal("the same defaults again reported a change")
	}
	plain, _ := e.Topic("plain")
	own, _ := e.Topic("own")
	if plain.Config.RetentionMs != 100 || plain.Config.MinInsyncReplicas != 2 {
		t.Fatalf("plain: retention %d min isr %d", plain.Config.RetentionMs, plain.Config.MinInsyncReplicas)
	}
	if own.Config.RetentionMs != 7 || own.Config.MinInsyncReplicas != 2 {
		t.Fatalf("own: retention %d min isr %d", own.Config.RetentionMs, own.Config.MinInsyncReplicas)
	}
	for _, e := range plain.Config.Entries() {
		if !e.IsDefault {
			t.Fatalf("%s reported as set on the topic", e.Name)
		}
	}
	// Removing them falls back to the static flag.
	if _, err := e.SetDynamicDefaults(nil); err != nil {
		t.Fatal(err)
	}
	if plain, _ = e.Topic("plain"); plain.Config.RetentionMs != 5000 {
		t.Fatalf("after removal: retention %d, want the static 5000", plain.Config.RetentionMs)
	}
	for _, kv := range []map[string]string{{"log.dirs": "/x"}, {"log.retention.ms": "soon"}, {"retention.ms": "1"}} {
		if _, err := BrokerDefaults(kv); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("BrokerDefaults(%v): %v, want ErrInvalidConfig", kv, err)
		}
	}
}

// With AwaitDynamicDefaults the periodic retention pass waits for the
// broker's first SetDynamicDefaults, so the static defaults alone never
// delete what a dynamic broker config may keep; then it runs with them.
func TestRetentionAwaitsDynamicDefaults(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.AwaitDynamicDefaults = true
	cfg.RetentionCheckInterval = 10 * time.Millisecond
	cfg.Defaults.RetentionBytes = 1000 // static: keep about one segment
	e := mustOpen(t, cfg)
	defer e.Close()
	if _, err := e.CreateTopic("t", 1, map[string]string{"segment.bytes": "500"}); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	for i := int64(0); i < 40; i++ {
		appendWait(t, p, batchOf(i, 1))
	}
	// 100 ms is ten retention ticks: retention that would run, ran.
	if !testwait.Holds(100*time.Millisecond, func() bool { return p.LogStartOffset() == 0 }) {
		t.Fatalf("retention ran before the dynamic defaults were known: log start %d", p.LogStartOffset())
	}
	d, err := BrokerDefaults(map[string]string{"log.retention.bytes": "2000"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetDynamicDefaults(d); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "retention to run after SetDynamicDefaults", func() bool { return p.LogStartOffset() != 0 })
}
