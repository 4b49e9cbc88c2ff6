package loadgen

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBackoffSchedule: retry n waits Base*2^(n-1) capped at Max, shortened
// by at most 20% jitter, never more than Max.
func TestBackoffSchedule(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	ms := time.Millisecond
	// Without jitter (u = 0): the exponential and its cap.
	for n, want := range map[int]time.Duration{0: 100 * ms, 1: 100 * ms, 2: 200 * ms, 3: 400 * ms, 4: 800 * ms,
		5: time.Second, 6: time.Second, 63: time.Second, 64: time.Second, 1 << 20: time.Second} {
		if got := b.Delay(n, 0); got != want {
			t.Errorf("Delay(%d, 0) = %v, want %v", n, got, want)
		}
	}
	// Full jitter (u -> 1) takes 20% off, at the cap too.
	if got := b.Delay(2, 1); got != 160*ms {
		t.Errorf("Delay(2, 1) = %v, want 160ms", got)
	}
	if got := b.Delay(9, 1); got != 800*ms {
		t.Errorf("Delay(9, 1) = %v, want 800ms", got)
	}
	// Random draws stay within [0.8, 1] of the unjittered wait and spread
	// over it (producers that failed together do not retry together).
	for n := 1; n <= 8; n++ {
		hi := b.Delay(n, 0)
		lo := hi * 8 / 10
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.Delay(n, rand.Float64())
			if d < lo || d > hi {
				t.Fatalf("Delay(%d) = %v outside [%v, %v]", n, d, lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Fatalf("Delay(%d): only %d distinct waits in 200 draws", n, len(seen))
		}
	}
	// A base whose doubling overflows int64 stays at the cap.
	huge := Backoff{Base: time.Hour, Max: 2 * time.Hour}
	for _, n := range []int{2, 30, 40, 62} {
		if got := huge.Delay(n, 0); got != 2*time.Hour {
			t.Errorf("huge Delay(%d) = %v, want 2h", n, got)
		}
	}
	// kgo's RetryBackoffFn gets the same schedule.
	fn := b.kgoBackoff()
	for fails := 1; fails <= 12; fails++ {
		hi := b.Delay(fails, 0)
		if d := fn(fails); d < hi*8/10 || d > hi {
			t.Fatalf("kgo backoff(%d) = %v outside [%v, %v]", fails, d, hi*8/10, hi)
		}
	}
}

func TestRetryConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(c *Config)
		want string
	}{
		{func(c *Config) { c.RetryBackoff = 0 }, "retry-backoff 0s: need > 0"},
		{func(c *Config) { c.RetryBackoffMax = 50 * time.Millisecond }, "retry-backoff-max 50ms must be at least retry-backoff 100ms"},
		{func(c *Config) { c.Retries = -1 }, "retries -1"},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
	if cfg := DefaultConfig(); cfg.Validate() != nil || cfg.RetryBackoff != 100*time.Millisecond || cfg.RetryBackoffMax != time.Second {
		t.Fatalf("defaults: %v %v %v", cfg.Validate(), cfg.RetryBackoff, cfg.RetryBackoffMax)
	}
}

func TestErrorName(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("%w: disk full", kerr.KafkaStorageError):              "KAFKA_STORAGE_ERROR",
		kerr.NotLeaderForPartition:                                       "NOT_LEADER_OR_FOLLOWER",
		fmt.Errorf("gave up: %w", kerr.NotEnoughReplicas):                "NOT_ENOUGH_REPLICAS",
		fmt.Errorf("%w: read: %v", errConnLost, io.EOF):                  mixConnectionLost,
		fmt.Errorf("dial: %w", io.ErrUnexpectedEOF):                      mixConnectionLost,
		errors.New("produce response does not echo one topic partition"): mixOther,
	} {
		if got := errorName(err); got != want {
			t.Errorf("errorName(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestKafkaErrorCode(t *testing.T) {
	for in, want := range map[string]int16{"": 0, "0": 0, "56": 56, "KAFKA_STORAGE_ERROR": kerr.KafkaStorageError.Code,
		"not_enough_replicas": kerr.NotEnoughReplicas.Code, "NOT_LEADER_OR_FOLLOWER": 6, "NOT_LEADER_FOR_PARTITION": 6} {
		if got, err := kafkaErrorCode(in); err != nil || got != want {
			t.Errorf("kafkaErrorCode(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"NO_SUCH_ERROR", "31000", "99999"} {
		if _, err := kafkaErrorCode(bad); err == nil {
			t.Errorf("kafkaErrorCode(%q) accepted", bad)
		}
	}
}

// TestKgoRetryLog: franz-go's log lines for failed produce attempts feed
// the error mix and the retry counts; other lines are ignored.
func TestKgoRetryLog(t *testing.T) {
	st := newRunState(DefaultConfig())
	l := kgoRetryLog{st}
	// One response: partition 0 acked, 1 and 2 to be retried (20 and 7
	// records), in the format of kgo's sink.go.
	l.Log(kgo.LogLevelDebug, "produced", "broker", "1", "to",
		"t[0{5=>25}, 1{retrying@-1,20(KAFKA_STORAGE_ERROR: Disk error when trying to access log file on the disk.)}, "+
			"2{retrying@-1,7(NOT_LEADER_FOR_PARTITION: This server is not the leader for that topic-partition.)}], u[0{9=>10}]")
	l.Log(kgo.LogLevelDebug, "produced", "broker", "1", "to", "t[0{25=>45}]")
	l.Log(kgo.LogLevelInfo, "batch in a produce request failed", "broker", "1", "topic", "t", "partition", int32(0),
		"err", kerr.MessageTooLarge, "err_is_retryable", false, "max_retries_reached", false)
	l.Log(kgo.LogLevelWarn, "random error while producing, requeueing unattempted request", "broker", "1", "err", io.EOF)
	l.Log(kgo.LogLevelInfo, "produce request failed, triggering metadata update", "broker", "1", "err", io.EOF)
	l.Log(kgo.LogLevelDebug, "wrote Produce v8", "broker", "1")
	mix := st.c.mix.snapshot()
	if len(mix) != 4 || mix["KAFKA_STORAGE_ERROR"] != 1 || mix["NOT_LEADER_OR_FOLLOWER"] != 1 ||
		mix["MESSAGE_TOO_LARGE"] != 1 || mix[mixConnectionLost] != 1 {
		t.Fatalf("mix %v", mix)
	}
	if r, m := st.c.retries.Load(), st.c.retried.Load(); r != 3 || m != 27 {
		t.Fatalf("retries %d, messages retried %d: want 3 (two batches, one request) and 27", r, m)
	}
	if l.Level() != kgo.LogLevelDebug {
		t.Fatalf("level %v: kgo lists retried batches at debug", l.Level())
	}
}
