package engine

import (
	"errors"
	"testing"
)

func TestThrottledReplicasConfig(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", ""},
		{"*", "*"},
		{" * ", "*"},
		{"0:1", "0:1"},
		{"0:1, 1:2 ,2:3", "0:1,1:2,2:3"},
		{"0:1,,1:2", "0:1,1:2"}, // Kafka's pattern allows empty entries
	} {
		for _, k := range []string{LeaderThrottledReplicasKey, FollowerThrottledReplicasKey} {
			c, err := ParseTopicConfig(DefaultTopicConfig(), map[string]string{k: tc.in})
			if err != nil {
				t.Fatalf("%s=%q: %v", k, tc.in, err)
			}
			if got := ConfigValue(c, k); got != tc.want {
				t.Fatalf("%s=%q: value %q, want %q", k, tc.in, got, tc.want)
			}
		}
	}
	for _, bad := range []string{"*,0:1", "0", "0:", ":1", "a:1", "-1:2", "1:-2", "0:1:2", "99999999999:1", "**"} {
		if _, err := ParseTopicConfig(DefaultTopicConfig(), map[string]string{LeaderThrottledReplicasKey: bad}); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%q: %v, want ErrInvalidConfig", bad, err)
		}
	}
	tr, err := ParseThrottledReplicas("0:1,2:3")
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Has(0, 1) || !tr.Has(2, 3) || tr.Has(0, 3) || tr.Has(1, 1) || tr.Empty() {
		t.Fatalf("Has on %+v", tr)
	}
	if all, _ := ParseThrottledReplicas("*"); !all.Has(7, 9) {
		t.Fatal(`"*" must throttle every replica`)
	}
	if none, _ := ParseThrottledReplicas(""); !none.Empty() || none.Has(0, 0) {
		t.Fatal(`"" must throttle nothing`)
	}
	// The default shows "" (Kafka's default) and is not an override.
	for _, e := range DefaultTopicConfig().Entries() {
		if e.Name == LeaderThrottledReplicasKey && (e.Value != "" || !e.IsDefault) {
			t.Fatalf("default entry %+v", e)
		}
	}
}

func TestThrottledRateBrokerConfig(t *testing.T) {
	for _, k := range []string{LeaderThrottledRateKey, FollowerThrottledRateKey} {
		if !IsDynamicBrokerKey(k) {
			t.Fatalf("%s is not dynamic", k)
		}
		if d, ok := BrokerOnlyDefault(k); !ok || d != "9223372036854775807" {
			t.Fatalf("%s default %q %v", k, d, ok)
		}
		// Checked, but no topic default: the engine's defaults ignore it.
		out, err := BrokerDefaults(map[string]string{k: "4000000", "log.retention.ms": "1000"})
		if err != nil || len(out) != 1 || out["retention.ms"] != "1000" {
			t.Fatalf("BrokerDefaults: %v %v", out, err)
		}
		for _, bad := range []string{"-1", "fast", "1.5", ""} {
			if _, err := BrokerDefaults(map[string]string{k: bad}); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("%s=%q: %v, want ErrInvalidConfig", k, bad, err)
			}
		}
		if n, err := ParseThrottledRate(k, "0"); err != nil || n != 0 {
			t.Fatalf("0: %d %v", n, err)
		}
	}
	if IsDynamicBrokerKey("replication.throttled.rate") {
		t.Fatal("unknown key accepted")
	}
}
