package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Workload is an OpenMessaging Benchmark (OMB) workload file: the format
// Kafka, Redpanda and Pulsar publish their numbers with. Field names and
// meanings follow OMB's Workload class. Pointer fields are optional: nil
// means the file does not set them (OMB's default applies).
//
// What ringlog cannot honour is refused by name (Apply), never ignored: a
// run that silently measured something else would be worse than none.
type Workload struct {
	Name               string   `yaml:"name"`
	Topics             *int     `yaml:"topics"`
	PartitionsPerTopic *int     `yaml:"partitionsPerTopic"`
	MessageSize        *int     `yaml:"messageSize"`
	PayloadFile        string   `yaml:"payloadFile"`
	KeyDistributor     string   `yaml:"keyDistributor"`
	ProducersPerTopic  *int     `yaml:"producersPerTopic"`
	ProducerRate       *float64 `yaml:"producerRate"`
	// SubscriptionsPerTopic is consumer groups; ConsumerPerSubscription
	// the consumers in each.
	SubscriptionsPerTopic   *int `yaml:"subscriptionsPerTopic"`
	ConsumerPerSubscription *int `yaml:"consumerPerSubscription"`
	// ConsumerBacklogSizeGB (GiB, as OMB computes it) > 0 makes a
	// backlog-drain run; a fraction is allowed so tests can use MBs.
	ConsumerBacklogSizeGB *float64 `yaml:"consumerBacklogSizeGB"`
	BacklogDrainRatio     *float64 `yaml:"backlogDrainRatio"`
	TestDurationMinutes   *float64 `yaml:"testDurationMinutes"`
	WarmupDurationMinutes *float64 `yaml:"warmupDurationMinutes"`

	UseRandomizedPayloads     *bool    `yaml:"useRandomizedPayloads"`
	RandomBytesRatio          *float64 `yaml:"randomBytesRatio"`
	RandomizedPayloadPoolSize *int     `yaml:"randomizedPayloadPoolSize"`

	// path is the file read; payloadFile is relative to its directory.
	path string
	// lines maps a top-level key to its line, for errors about values.
	lines map[string]int
}

// workloadMaxBytes bounds a workload file: they are a few hundred bytes,
// and a mistaken path to a large file should not be read whole.
const workloadMaxBytes = 1 << 20

// payloadMaxBytes bounds payloadFile (OMB's are 100 B to 100 KB).
const payloadMaxBytes = 16 << 20

// LoadWorkload reads an OMB workload file.
func LoadWorkload(path string) (*Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, workloadMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", path, err)
	}
	if len(data) > workloadMaxBytes {
		return nil, fmt.Errorf("workload %s: larger than %d bytes; not a workload file", path, workloadMaxBytes)
	}
	w, err := ParseWorkload(data)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", path, err)
	}
	w.path = path
	return w, nil
}

// ParseWorkload decodes an OMB workload. A field OMB does not define is an
// error naming it and its line.
func ParseWorkload(data []byte) (*Workload, error) {
	var w Workload
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		return nil, workloadYAMLError(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil && len(doc.Content) == 1 {
		m := doc.Content[0]
		w.lines = map[string]int{}
		for i := 0; i+1 < len(m.Content); i += 2 {
			w.lines[m.Content[i].Value] = m.Content[i].Line
		}
	}
	return &w, nil
}

// workloadYAMLError rewords yaml's "field x not found in type
// loadgen.Workload" for people who wrote an OMB file, not Go.
func workloadYAMLError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			// "line 3: field foo not found in type loadgen.Workload"
			if f, ok := strings.CutSuffix(m, " not found in type loadgen.Workload"); ok {
				if line, name, ok := strings.Cut(strings.TrimPrefix(f, "line "), ": field "); ok {
					m = fmt.Sprintf("unknown field %s (line %s): not an OpenMessaging Benchmark workload field", name, line)
				}
			}
			msgs[i] = m
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	if errors.Is(err, io.EOF) {
		return errors.New("empty file: no workload fields")
	}
	return err
}

// unsupported names a field ringlog cannot honour, with its line.
func (w *Workload) unsupported(field, why string) error {
	if line := w.lines[field]; line > 0 {
		return fmt.Errorf("field %s (line %d): %s", field, line, why)
	}
	return fmt.Errorf("field %s: %s", field, why)
}

// Bounds on a workload's values, so that a mistaken one is an error rather
// than an overflow or an attempt to start millions of clients.
const (
	workloadMaxCount     = 100_000
	workloadMaxBacklogGB = 1 << 20
	workloadMaxMinutes   = 100_000
)

// defaultPayloadPool is the randomized payloads kept when the file names
// no pool size (OMB's workloads use 1000).
const defaultPayloadPool = 1000

// ombGiB is OMB's GB: consumerBacklogSizeGB * 1024^3 bytes.
const ombGiB = 1 << 30

// ombDefaultWarmup is OMB's warmup when the file sets none.
const ombDefaultWarmup = time.Minute

// Apply sets cfg from the workload. findMax reports producerRate 0, which
// OMB runs as "as fast as it balances": ringlog runs its find-max search
// from cfg's rate instead. The command line applies explicitly given
// flags after Apply, so they override the file.
func (w *Workload) Apply(cfg *Config) (findMax bool, err error) {
	if w.Topics != nil && *w.Topics != 1 {
		return false, w.unsupported("topics", fmt.Sprintf("%d: ringlog's generator drives one topic; run one workload per topic", *w.Topics))
	}
	if w.Name != "" {
		cfg.Label = w.Name
	}
	if v := w.PartitionsPerTopic; v != nil {
		if *v < 1 || *v > workloadMaxCount {
			return false, w.unsupported("partitionsPerTopic", fmt.Sprintf("%d: need 1..%d", *v, workloadMaxCount))
		}
		cfg.Partitions = int32(*v)
	}
	if v := w.MessageSize; v != nil {
		if *v < valueHeaderLen {
			return false, w.unsupported("messageSize", fmt.Sprintf("%d: ringlog carries a %d-byte run id and send time in every value (end-to-end latency); need >= %d", *v, valueHeaderLen, valueHeaderLen))
		}
		cfg.MessageSize = *v
	}
	if v := w.RandomBytesRatio; v != nil && (*v < 0 || *v > 1) {
		return false, w.unsupported("randomBytesRatio", fmt.Sprintf("%v: need 0..1", *v))
	}
	if v := w.RandomizedPayloadPoolSize; v != nil && *v < 0 {
		return false, w.unsupported("randomizedPayloadPoolSize", fmt.Sprintf("%d: need >= 0", *v))
	}
	switch {
	case w.UseRandomizedPayloads != nil && *w.UseRandomizedPayloads:
		// As OMB: a pool of values, each randomBytesRatio random bytes
		// then zeros (the ratio sets how well they compress).
		cfg.RandomPayloads = defaultPayloadPool
		if v := w.RandomizedPayloadPoolSize; v != nil && *v > 0 {
			cfg.RandomPayloads = *v
		}
		if v := w.RandomBytesRatio; v != nil {
			cfg.RandomBytesRatio = *v
		}
	case w.PayloadFile != "":
		if err := w.applyPayload(cfg); err != nil {
			return false, err
		}
	}
	switch w.KeyDistributor {
	case "", "NO_KEY":
		cfg.Keys, cfg.RandomKeys = 0, false
	case "KEY_ROUND_ROBIN":
		cfg.Keys, cfg.RandomKeys = KeysAuto, false
	case "RANDOM_NANO":
		cfg.Keys, cfg.RandomKeys = KeysAuto, true
	default:
		return false, w.unsupported("keyDistributor", fmt.Sprintf("%q: need NO_KEY, KEY_ROUND_ROBIN or RANDOM_NANO", w.KeyDistributor))
	}
	if v := w.ProducersPerTopic; v != nil {
		if *v < 1 || *v > workloadMaxCount {
			return false, w.unsupported("producersPerTopic", fmt.Sprintf("%d: need 1..%d", *v, workloadMaxCount))
		}
		cfg.Producers = *v
	}
	if v := w.ProducerRate; v != nil {
		switch {
		case *v < 0:
			return false, w.unsupported("producerRate", fmt.Sprintf("%v: need >= 0", *v))
		case *v == 0:
			findMax = true
		default:
			cfg.Rate = *v
		}
	}
	subs, per := 0, 0
	if w.SubscriptionsPerTopic != nil {
		subs = *w.SubscriptionsPerTopic
	}
	if w.ConsumerPerSubscription != nil {
		per = *w.ConsumerPerSubscription
	}
	switch {
	case subs < 0 || subs > workloadMaxCount:
		return false, w.unsupported("subscriptionsPerTopic", fmt.Sprintf("%d: need 0..%d", subs, workloadMaxCount))
	case per < 0 || per > workloadMaxCount:
		return false, w.unsupported("consumerPerSubscription", fmt.Sprintf("%d: need 0..%d", per, workloadMaxCount))
	case subs > 0 && per == 0:
		return false, w.unsupported("consumerPerSubscription", fmt.Sprintf("0 with subscriptionsPerTopic %d: a subscription needs a consumer", subs))
	}
	cfg.ConsumerGroups, cfg.Consumers = subs, 0
	if subs > 0 {
		cfg.Consumers = per
	}
	if v := w.ConsumerBacklogSizeGB; v != nil && *v != 0 {
		if *v < 0 || *v > workloadMaxBacklogGB {
			return false, w.unsupported("consumerBacklogSizeGB", fmt.Sprintf("%v: need 0..%d", *v, workloadMaxBacklogGB))
		}
		if subs == 0 {
			return false, w.unsupported("consumerBacklogSizeGB", "a backlog drains into consumers: needs subscriptionsPerTopic >= 1")
		}
		cfg.BacklogBytes = int64(*v * ombGiB)
	}
	if v := w.BacklogDrainRatio; v != nil {
		if *v <= 0 || *v > 1 {
			return false, w.unsupported("backlogDrainRatio", fmt.Sprintf("%v: need 0 < ratio <= 1", *v))
		}
		cfg.BacklogDrainRatio = *v
	}
	if v := w.TestDurationMinutes; v != nil {
		if *v <= 0 || *v > workloadMaxMinutes {
			return false, w.unsupported("testDurationMinutes", fmt.Sprintf("%v: need 0 < minutes <= %d", *v, workloadMaxMinutes))
		}
		cfg.Duration = minutes(*v)
	}
	cfg.Warmup = ombDefaultWarmup
	if v := w.WarmupDurationMinutes; v != nil {
		if *v < 0 || *v > workloadMaxMinutes {
			return false, w.unsupported("warmupDurationMinutes", fmt.Sprintf("%v: need 0..%d", *v, workloadMaxMinutes))
		}
		cfg.Warmup = minutes(*v)
	}
	cfg.WorkloadValues = w.Values()
	return findMax, nil
}

func minutes(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }

// applyPayload makes the file's bytes the value of every message (after
// ringlog's 16-byte header), repeated or cut to messageSize; without
// messageSize the file's length is the size, as in OMB.
func (w *Workload) applyPayload(cfg *Config) error {
	// Next to the workload file first; then as given (OMB resolves it
	// from the directory it runs in).
	p := w.PayloadFile
	if rel := filepath.Join(filepath.Dir(w.path), p); !filepath.IsAbs(p) && w.path != "" {
		if _, err := os.Stat(rel); err == nil {
			p = rel
		}
	}
	st, err := os.Stat(p)
	if err != nil {
		return w.unsupported("payloadFile", err.Error())
	}
	if st.Size() > payloadMaxBytes || st.Size() == 0 {
		return w.unsupported("payloadFile", fmt.Sprintf("%s is %d bytes: need 1..%d", p, st.Size(), payloadMaxBytes))
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return w.unsupported("payloadFile", err.Error())
	}
	if w.MessageSize == nil {
		if len(data) < valueHeaderLen {
			return w.unsupported("payloadFile", fmt.Sprintf("%d bytes: ringlog needs >= %d per value", len(data), valueHeaderLen))
		}
		cfg.MessageSize = len(data)
	}
	cfg.Payload = data
	return nil
}

// Values are the file's fields as set, for the result's workload map
// (keys "omb.<field>").
func (w *Workload) Values() map[string]string {
	v := map[string]string{}
	put := func(k, s string) { v["omb."+k] = s }
	if w.path != "" {
		v["workload_file"] = w.path
	}
	if w.Name != "" {
		put("name", w.Name)
	}
	ints := map[string]*int{"topics": w.Topics, "partitionsPerTopic": w.PartitionsPerTopic, "messageSize": w.MessageSize,
		"producersPerTopic": w.ProducersPerTopic, "subscriptionsPerTopic": w.SubscriptionsPerTopic,
		"consumerPerSubscription": w.ConsumerPerSubscription, "randomizedPayloadPoolSize": w.RandomizedPayloadPoolSize}
	for k, p := range ints {
		if p != nil {
			put(k, strconv.Itoa(*p))
		}
	}
	floats := map[string]*float64{"producerRate": w.ProducerRate, "consumerBacklogSizeGB": w.ConsumerBacklogSizeGB,
		"backlogDrainRatio": w.BacklogDrainRatio, "testDurationMinutes": w.TestDurationMinutes,
		"warmupDurationMinutes": w.WarmupDurationMinutes, "randomBytesRatio": w.RandomBytesRatio}
	for k, p := range floats {
		if p != nil {
			put(k, strconv.FormatFloat(*p, 'g', -1, 64))
		}
	}
	if w.PayloadFile != "" {
		put("payloadFile", w.PayloadFile)
	}
	if w.KeyDistributor != "" {
		put("keyDistributor", w.KeyDistributor)
	}
	if w.UseRandomizedPayloads != nil {
		put("useRandomizedPayloads", strconv.FormatBool(*w.UseRandomizedPayloads))
	}
	return v
}
