package loadgen

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Retry backoff. A batch that failed retriably waits before it is re-sent:
// retry n (1-based) waits min(Base*2^(n-1), Max), shortened by a random
// fraction of up to backoffJitter. Base 100 ms and Max 1 s are the Java
// producer's retry.backoff.ms / retry.backoff.max.ms (KIP-580): a leader
// election finishes within a few hundred ms, so the first retries find the
// new leader quickly, while a broker that keeps failing (full disk, ISR
// below min.insync.replicas) sees about one request per batch per second
// instead of one per round trip. Jitter only shortens the wait, so Max is a
// hard bound and producers that failed together still spread out at the cap.
type Backoff struct {
	Base, Max time.Duration
}

// backoffJitter is the largest fraction a wait is shortened by (the Java
// client's and franz-go's default jitter is also 20%).
const backoffJitter = 0.2

// Delay is the wait before retry n (n >= 1); u in [0, 1) draws the jitter.
func (b Backoff) Delay(n int, u float64) time.Duration {
	d := b.Max
	// Doubling Base 62 times overflows; stop once past Max.
	if n < 1 {
		n = 1
	}
	if n <= 62 {
		if e := b.Base << (n - 1); e > 0 && e>>(n-1) == b.Base && e < d {
			d = e
		}
	}
	return d - time.Duration(float64(d)*backoffJitter*u)
}

// kgoBackoff is Backoff as franz-go's RetryBackoffFn (fails counts from 1;
// franz-go calls it from several goroutines).
func (b Backoff) kgoBackoff() func(int) time.Duration {
	return func(fails int) time.Duration { return b.Delay(fails, rand.Float64()) }
}

// Error-mix names for failures that carry no Kafka error code.
const (
	mixConnectionLost = "CONNECTION_LOST"
	mixOther          = "OTHER"
)

// errorName names the cause of a failed produce attempt for the error
// mix: the Kafka error code name, CONNECTION_LOST for a broken connection,
// else OTHER.
func errorName(err error) string {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return kafkaErrorName(ke.Message)
	case errors.Is(err, errConnLost), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE):
		return mixConnectionLost
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return mixConnectionLost
	}
	return mixOther
}

// kafkaErrorName is kerr's name of a code as Kafka names it today: kerr
// still calls code 6 by its pre-2.7 name NOT_LEADER_FOR_PARTITION.
func kafkaErrorName(kerrName string) string {
	if kerrName == kerr.NotLeaderForPartition.Message {
		return "NOT_LEADER_OR_FOLLOWER"
	}
	return kerrName
}

// kafkaErrorCode parses a Kafka error code given by number or by name as
// the error mix prints it ("" is 0, no error).
func kafkaErrorCode(s string) (int16, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(s, 10, 16); err == nil {
		if kerr.ErrorForCode(int16(n)) == kerr.UnknownServerError && n != int64(kerr.UnknownServerError.Code) {
			return 0, fmt.Errorf("unknown Kafka error code %d", n)
		}
		return int16(n), nil
	}
	// Codes run from -1 to about 130; kerr has no lookup by name.
	name := strings.ToUpper(s)
	for code := int16(-1); code < 1000; code++ {
		if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && (ke.Message == name || kafkaErrorName(ke.Message) == name) {
			return code, nil
		}
	}
	return 0, fmt.Errorf("unknown Kafka error %q", s)
}

// errorMix counts failed produce attempts by cause; any goroutine may add.
type errorMix struct {
	mu sync.Mutex
	n  map[string]int64
}

func (m *errorMix) add(err error) { m.addName(errorName(err)) }

func (m *errorMix) addName(name string) {
	m.mu.Lock()
	if m.n == nil {
		m.n = map[string]int64{}
	}
	m.n[name]++
	m.mu.Unlock()
}

// snapshot copies the counts (nil when there were none).
func (m *errorMix) snapshot() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.n) == 0 {
		return nil
	}
	out := make(map[string]int64, len(m.n))
	for k, v := range m.n {
		out[k] = v
	}
	return out
}

// kgoRetryLog counts franz-go's failed produce attempts from its log:
// kgo retries internally and reports a failure to the record's callback
// only once it gives up, and it has no hook for the attempts in between.
// Its log has them (sink.go): the debug line "produced" lists each
// partition's outcome of a response, "retrying@OFFSET,RECORDS(ERROR)" for a
// batch it will re-send; "batch in a produce request failed" (info) is a
// batch it fails; "produce request failed..." is a whole request that
// failed (connection lost) and is re-sent. Debug level costs a string per
// produce response (not per record) on a path that already allocates a
// record per message.
type kgoRetryLog struct{ st *runState }

var _ kgo.Logger = kgoRetryLog{}

func (kgoRetryLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }

// kgoRetrying matches one retried batch in kgo's "produced" line: its
// record count and error name.
var kgoRetrying = regexp.MustCompile(`retrying@-?\d+,(\d+)\(([A-Z_]+)`)

func (l kgoRetryLog) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	c := &l.st.c
	switch {
	case msg == "produced":
		to, _ := kgoLogValue(keyvals, "to").(string)
		if !strings.Contains(to, "retrying@") {
			return
		}
		for _, m := range kgoRetrying.FindAllStringSubmatch(to, -1) {
			nrec, _ := strconv.Atoi(m[1])
			c.mix.addName(kafkaErrorName(m[2]))
			c.retries.Add(1)
			c.retried.Add(int64(nrec))
		}
	case msg == "batch in a produce request failed":
		if err, ok := kgoLogValue(keyvals, "err").(error); ok {
			c.mix.add(err)
		}
	case strings.HasPrefix(msg, "produce request failed"):
		if err, ok := kgoLogValue(keyvals, "err").(error); ok {
			c.mix.add(err)
			c.retries.Add(1)
		}
	}
}

func kgoLogValue(keyvals []any, key string) any {
	for i := 0; i+1 < len(keyvals); i += 2 {
		if keyvals[i] == key {
			return keyvals[i+1]
		}
	}
	return nil
}
