package loadgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every field OMB's Workload class defines, in one file.
const fullWorkload = `name: every field
topics: 1
partitionsPerTopic: 100
messageSize: 1024
payloadFile: payload/payload-1Kb.data
useRandomizedPayloads: true
randomBytesRatio: 0.5
randomizedPayloadPoolSize: 200
keyDistributor: RANDOM_NANO
producersPerTopic: 4
producerRate: 200000
subscriptionsPerTopic: 2
consumerPerSubscription: 3
consumerBacklogSizeGB: 0.5
backlogDrainRatio: 0.8
testDurationMinutes: 5
warmupDurationMinutes: 0.5
`

// applyYAML parses a workload and applies it to the default config.
func applyYAML(t *testing.T, doc string) (Config, bool) {
	t.Helper()
	w, err := ParseWorkload([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	findMax, err := w.Apply(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, findMax
}

func TestWorkloadEveryField(t *testing.T) {
	cfg, findMax := applyYAML(t, fullWorkload)
	if findMax {
		t.Error("findMax with producerRate 200000")
	}
	want := DefaultConfig()
	want.Label, want.Partitions, want.MessageSize = "every field", 100, 1024
	want.RandomPayloads, want.RandomBytesRatio = 200, 0.5
	want.Keys, want.RandomKeys = KeysAuto, true
	want.Producers, want.Rate = 4, 200000
	want.ConsumerGroups, want.Consumers = 2, 3
	want.BacklogBytes, want.BacklogDrainRatio = 1<<29, 0.8
	want.Duration, want.Warmup = 5*time.Minute, 30*time.Second
	got := cfg
	got.WorkloadValues = nil
	if !equalConfig(got, want) {
		t.Errorf("applied:\n%+v\nwant\n%+v", got, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("applied config does not validate: %v", err)
	}
	v := cfg.WorkloadValues
	for k, want := range map[string]string{"omb.name": "every field", "omb.partitionsPerTopic": "100",
		"omb.producerRate": "200000", "omb.keyDistributor": "RANDOM_NANO", "omb.consumerBacklogSizeGB": "0.5",
		"omb.useRandomizedPayloads": "true", "omb.payloadFile": "payload/payload-1Kb.data", "omb.topics": "1"} {
		if v[k] != want {
			t.Errorf("workload values %s = %q, want %q", k, v[k], want)
		}
	}
	if len(v) != 17 {
		t.Errorf("%d workload values, want the 17 fields set: %v", len(v), v)
	}
	if m := cfg.workload(); m["omb.name"] != "every field" || m["consumer_groups"] != "2" || m["backlog_bytes"] != "536870912" {
		t.Errorf("result workload map lacks the file's values: %v", m)
	}
}

func equalConfig(a, b Config) bool {
	return a.Label == b.Label && a.Partitions == b.Partitions && a.MessageSize == b.MessageSize &&
		a.RandomPayloads == b.RandomPayloads && a.RandomBytesRatio == b.RandomBytesRatio &&
		a.Keys == b.Keys && a.RandomKeys == b.RandomKeys && a.Producers == b.Producers && a.Rate == b.Rate &&
		a.ConsumerGroups == b.ConsumerGroups && a.Consumers == b.Consumers && a.BacklogBytes == b.BacklogBytes &&
		a.BacklogDrainRatio == b.BacklogDrainRatio && a.Duration == b.Duration && a.Warmup == b.Warmup &&
		(a.Payload == nil) == (b.Payload == nil)
}

func TestWorkloadUnknownFieldNamed(t *testing.T) {
	_, err := ParseWorkload([]byte("name: x\ntopics: 1\nproducerRatee: 5\n"))
	if err == nil || !strings.Contains(err.Error(), "producerRatee") || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want the unknown field and its line", err)
	}
	if _, err := ParseWorkload(nil); err == nil {
		t.Error("empty file accepted")
	}
	if _, err := ParseWorkload([]byte("partitionsPerTopic: many\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad value: err = %v", err)
	}
}

func TestWorkloadUnsupportedNamed(t *testing.T) {
	for _, tc := range []struct{ yaml, field string }{
		{"topics: 4\n", "topics"},
		{"name: a\nkeyDistributor: ZIP_LATENT\n", "keyDistributor"},
		{"messageSize: 8\n", "messageSize"},
		{"consumerBacklogSizeGB: 1\n", "consumerBacklogSizeGB"},
		{"randomBytesRatio: 2\n", "randomBytesRatio"},
		{"backlogDrainRatio: 0\n", "backlogDrainRatio"},
		{"subscriptionsPerTopic: 1\nconsumerPerSubscription: 0\n", "consumerPerSubscription"},
		{"testDurationMinutes: 0\n", "testDurationMinutes"},
		{"producersPerTopic: 0\n", "producersPerTopic"},
		{"payloadFile: /nonexistent/payload.data\n", "payloadFile"},
		{"partitionsPerTopic: 3000000000\n", "partitionsPerTopic"},
		{"producersPerTopic: 100000000\n", "producersPerTopic"},
		{"subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nconsumerBacklogSizeGB: 1e12\n", "consumerBacklogSizeGB"},
		{"testDurationMinutes: 1e9\n", "testDurationMinutes"},
		{"warmupDurationMinutes: -1\n", "warmupDurationMinutes"},
	} {
		w, err := ParseWorkload([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		cfg := DefaultConfig()
		_, err = w.Apply(&cfg)
		if err == nil || !strings.Contains(err.Error(), "field "+tc.field) {
			t.Errorf("%q: err = %v, want one naming %s", tc.yaml, err, tc.field)
		}
	}
	// The line is named when the parser knows it.
	w, _ := ParseWorkload([]byte("name: a\n\ntopics: 3\n"))
	cfg := DefaultConfig()
	if _, err := w.Apply(&cfg); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("err = %v, want line 3", err)
	}
}

func TestWorkloadKeyDistributor(t *testing.T) {
	for _, tc := range []struct {
		dist   string
		keys   int
		random bool
	}{
		{"", 0, false}, {"NO_KEY", 0, false}, {"KEY_ROUND_ROBIN", KeysAuto, false}, {"RANDOM_NANO", KeysAuto, true},
	} {
		cfg, _ := applyYAML(t, "keyDistributor: \""+tc.dist+"\"\n")
		if cfg.Keys != tc.keys || cfg.RandomKeys != tc.random {
			t.Errorf("%q: keys %d random %v, want %d %v", tc.dist, cfg.Keys, cfg.RandomKeys, tc.keys, tc.random)
		}
	}
}

func TestWorkloadDefaultsAndMaxRate(t *testing.T) {
	cfg, findMax := applyYAML(t, "name: max\nproducerRate: 0\n")
	if !findMax || cfg.Rate != DefaultConfig().Rate {
		t.Errorf("producerRate 0: findMax %v rate %v, want a find-max search from the default rate", findMax, cfg.Rate)
	}
	if cfg.Warmup != time.Minute {
		t.Errorf("warmup %v, want OMB's default 1m", cfg.Warmup)
	}
	if cfg.Consumers != 0 || cfg.ConsumerGroups != 0 {
		t.Errorf("no subscriptions: consumers %d groups %d", cfg.Consumers, cfg.ConsumerGroups)
	}
}

func TestWorkloadPayloadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "payload"), 0o755); err != nil {
		t.Fatal(err)
	}
	payload := []byte(strings.Repeat("0123456789", 10)) // 100 bytes
	if err := os.WriteFile(filepath.Join(dir, "payload", "p.data"), payload, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(path, []byte("payloadFile: payload/p.data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := LoadWorkload(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if _, err := w.Apply(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.MessageSize != 100 || string(cfg.Payload) != string(payload) {
		t.Fatalf("message size %d payload %q: want the file's", cfg.MessageSize, cfg.Payload)
	}
	st := newRunState(cfg)
	if got := string(st.fillerFor(7)); got != string(payload[valueHeaderLen:]) {
		t.Errorf("value tail %q, want the file's bytes after the header", got)
	}
}

func TestPayloadPool(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MessageSize, cfg.RandomPayloads, cfg.RandomBytesRatio = 116, 10, 0.5
	st := newRunState(cfg)
	if len(st.pool) != 10 {
		t.Fatalf("pool of %d", len(st.pool))
	}
	v := st.fillerFor(3)
	if len(v) != 100 {
		t.Fatalf("value tail %d bytes", len(v))
	}
	for i, b := range v[50:] {
		if b != 0 {
			t.Fatalf("byte %d of the zero half is %d", 50+i, b)
		}
	}
	nonzero := 0
	for _, b := range v[:50] {
		if b != 0 {
			nonzero++
		}
	}
	if nonzero < 40 {
		t.Errorf("random half has %d non-zero bytes of 50", nonzero)
	}
}

// TestWorkloadsDir: every file shipped in workloads/ parses and applies
// to a valid config.
func TestWorkloadsDir(t *testing.T) {
	files, err := filepath.Glob("../workloads/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("%d workload files in workloads/, want the shipped set", len(files))
	}
	for _, f := range files {
		w, err := LoadWorkload(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		cfg := DefaultConfig()
		if _, err := w.Apply(&cfg); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if w.Name == "" {
			t.Errorf("%s: no name (it becomes the run label)", f)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
