package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runExecute runs Execute (what `ringlog loadgen` runs) against a fresh
// kfake cluster, 2 partitions of 100-byte messages, with the workload as
// mod leaves it, and returns its output and the cluster.
func runExecute(t *testing.T, mod func(*Config)) (string, *kfake.Cluster) {
	t.Helper()
	c := newKfake(t)
	o := DefaultOptions()
	o.Config.Bootstrap, o.Config.Topic, o.Config.Partitions, o.Config.MessageSize = c.ListenAddrs()[:1], "lg-cli", 2, 100
	mod(&o.Config)
	var out bytes.Buffer
	if err := Execute(context.Background(), o, &out, &out); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, out.String())
	}
	return out.String(), c
}

// newKfake is a one-broker in-process kfake cluster, closed with the test.
func newKfake(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

var progressLine = regexp.MustCompile(`(?m)^\s*(\d+\.\d)s of \d+s\s+\d+ msg/s sent\s+\d+ msg/s acked .* errors \d+.*$`)

// TestProgressLines: one line per second of the run (warmup marked), none
// with Quiet (--quiet); the summary is printed either way.
func TestProgressLines(t *testing.T) {
	out, _ := runExecute(t, func(c *Config) { c.Rate, c.Duration, c.Warmup = 1000, 2*time.Second, time.Second })
	lines := progressLine.FindAllStringSubmatch(out, -1)
	// Ticks at 1, 2 and 3 s, and possibly a short final interval.
	if len(lines) < 3 || len(lines) > 4 {
		t.Fatalf("%d progress lines for a 3 s run:\n%s", len(lines), out)
	}
	for i, want := range []string{"1.0", "2.0", "3.0"} {
		if lines[i][1] != want {
			t.Fatalf("progress line %d at %ss, want %ss:\n%s", i, lines[i][1], want, out)
		}
	}
	if !strings.Contains(lines[0][0], "[warmup]") || strings.Contains(lines[1][0], "[warmup]") ||
		!regexp.MustCompile(`p99 \d+\.\d+ ms`).MatchString(lines[1][0]) {
		t.Fatalf("warmup line or measured line wrong:\n%s", out)
	}
	if !strings.Contains(out, "SLA ") {
		t.Fatalf("no summary:\n%s", out)
	}

	quiet, _ := runExecute(t, func(c *Config) { c.Rate, c.Duration, c.Warmup, c.Quiet = 1000, 1500*time.Millisecond, 0, true })
	if progressLine.MatchString(quiet) || strings.Contains(quiet, "msg/s sent") {
		t.Fatalf("--quiet printed progress:\n%s", quiet)
	}
	if !strings.Contains(quiet, "SLA ") {
		t.Fatalf("--quiet dropped the summary:\n%s", quiet)
	}
}

// TestRandomKeys: with RandomKeys (--random-keys) the keys come from the key
// space in random order, not in the cycling order of the default.
func TestRandomKeys(t *testing.T) {
	const keys, n = 50, 1500
	_, c := runExecute(t, func(c *Config) {
		c.Rate, c.Duration, c.Warmup, c.Quiet, c.Keys, c.RandomKeys = 1000, 1500*time.Millisecond, 0, true, keys, true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("lg-cli"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type rec struct {
		sent int64 // intended wall ns from the value header
		key  int
	}
	index := map[string]int{}
	for j, k := range keyTable(keys, 2) {
		index[string(k)] = j
	}
	var recs []rec
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(recs) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			ki, ok := index[string(r.Key)]
			if !ok {
				t.Fatalf("key %q is not one of the run's %d keys", r.Key, keys)
			}
			recs = append(recs, rec{int64(binary.BigEndian.Uint64(r.Value[8:])), ki})
		})
	}
	if len(recs) != n {
		t.Fatalf("consumed %d records, want %d", len(recs), n)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].sent < recs[j].sent })
	distinct := map[int]bool{}
	cycling := 0 // consecutive messages whose keys follow the cycle
	for i, r := range recs {
		distinct[r.key] = true
		if i > 0 && r.key == (recs[i-1].key+1)%keys {
			cycling++
		}
	}
	if len(distinct) < keys*9/10 {
		t.Fatalf("%d distinct keys of %d", len(distinct), keys)
	}
	// Random keys follow the cycle about 1 time in 50; cycling keys always.
	if cycling > n/10 {
		t.Fatalf("%d of %d consecutive keys follow the cycle: keys are not random", cycling, n)
	}
}

// TestKeyForRandomVsCycling pins the two key orders at the unit level.
func TestKeyForRandomVsCycling(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Keys = 100
	st := &runState{cfg: cfg}
	var rng uint64 = 12345
	for i := uint64(0); i < 1000; i++ {
		if k := st.keyFor(i, &rng); k != int64(i%100) {
			t.Fatalf("cycling key %d for message %d", k, i)
		}
	}
	st.cfg.RandomKeys = true
	same := 0
	for i := uint64(0); i < 1000; i++ {
		k := st.keyFor(i, &rng)
		if k < 0 || k >= 100 {
			t.Fatalf("random key %d out of the key space", k)
		}
		if k == int64(i%100) {
			same++
		}
	}
	if same > 50 {
		t.Fatalf("%d of 1000 random keys equal the cycling ones", same)
	}
}

// TestOptionsValidate: the checks of the options against each other, each
// naming the flag that is wrong.
func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(o *Options)
		want string // "" valid
	}{
		{func(o *Options) {}, ""},
		{func(o *Options) { o.Config.ProfileBrokers = []string{"h:1"} }, "--profile-broker needs --out"},
		{func(o *Options) { o.Config.ProfileBrokers, o.Out, o.FindMax = []string{"h:1"}, "d", true }, "does not combine with --find-max"},
		{func(o *Options) { o.Config.ProfileBrokers, o.Out = []string{"h:1"}, "d" }, ""},
		{func(o *Options) { o.NullSinkError = "KAFKA_STORAGE_ERROR" }, "needs --null-sink"},
		{func(o *Options) { o.NullSink, o.NullSinkError = true, "KAFKA_STORAGE_ERROR" }, ""},
		{func(o *Options) { o.NullSink, o.NullSinkError = true, "NOT_AN_ERROR" }, "--null-sink-error"},
		{func(o *Options) { o.NullSink, o.Config.Security.TLS = true, true }, "plaintext sink"},
		{func(o *Options) { o.Config.Rate = 0 }, "rate 0"},
	} {
		o := DefaultOptions()
		tc.mod(&o)
		err := o.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", o, err, tc.want)
		}
	}
}
