package loadgen

import (
	"crypto/tls"
	"encoding/binary"
	"math/rand"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
)

// runState is shared by the producers, connections and consumers of one run.
type runState struct {
	cfg Config
	// t0 is the run clock's zero; intended times are ns since t0.
	t0        time.Time
	t0WallNs  int64
	measureNs int64 // intended times before this are warmup
	endNs     int64 // no message is scheduled at or after this
	runID     uint64
	filler    []byte
	// payload is the fixed value tail of every message (Config.Payload
	// fitted to MessageSize); pool the randomized values
	// (Config.RandomPayloads); both nil: slide over filler.
	payload []byte
	pool    [][]byte

	c        counters
	ack, e2e *recorder
	// keys are the key bytes by key index (keyTable); partAcked counts
	// the measured acknowledged messages of each partition, for the
	// report's partition spread.
	keys      [][]byte
	partAcked []atomic.Int64

	// leaders maps partition to broker address (lean client) at the start;
	// refreshLeaders re-reads it after leader moves.
	leaders        []string
	refreshLeaders func() ([]string, error)

	// tlsConfig and saslMech secure the lean client's connections (nil:
	// plaintext, no SASL).
	tlsConfig *tls.Config
	saslMech  sasl.Mechanism

	// resume, when set, holds the consumers' fetches until it is closed
	// (the backlog drain).
	resume chan struct{}
	// begun is closed by start: consumers created before the schedule
	// (to join their groups first) read the run clock only after it.
	begun chan struct{}
	// owned counts the partitions each group member (group g, member c
	// at g*Consumers+c) owns, kept by the group callbacks (awaitGroups).
	owned []atomic.Int64

	// stop is closed when the run is interrupted (nil: never); emitters
	// waiting for request memory give up on it.
	stop <-chan struct{}
	// interruptedAt is the run clock when the run was interrupted, +1 so
	// that 0 means not interrupted.
	interruptedAt atomic.Int64
	// lastSentNs is the run clock of the latest hand-over to the client: a
	// generator that falls behind sends past endNs, and its rates must be
	// over the time it really took.
	lastSentNs atomic.Int64
}

func newRunState(cfg Config) *runState {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	// Printable random filler: compressible about like text, not trivially.
	filler := make([]byte, 64<<10+cfg.MessageSize)
	for i := range filler {
		filler[i] = 'a' + byte(rng.Intn(26))
	}
	var payload []byte
	if len(cfg.Payload) > 0 {
		payload = make([]byte, cfg.MessageSize-valueHeaderLen)
		for i := range payload {
			payload[i] = cfg.Payload[(valueHeaderLen+i)%len(cfg.Payload)]
		}
	}
	return &runState{
		cfg:       cfg,
		payload:   payload,
		pool:      payloadPool(cfg, rng),
		begun:     make(chan struct{}),
		measureNs: int64(cfg.Warmup),
		endNs:     int64(cfg.Warmup + cfg.Duration),
		runID:     rng.Uint64() | 1,
		filler:    filler,
		ack:       newRecorder(),
		e2e:       newRecorder(),
		keys:      keyTable(cfg.Keys, cfg.Partitions),
		partAcked: make([]atomic.Int64, max(cfg.Partitions, 0)),
	}
}

func (s *runState) start(t0 time.Time) {
	s.t0 = t0
	s.t0WallNs = t0.UnixNano()
	close(s.begun)
}

// now is ns since t0 on the monotonic clock.
func (s *runState) now() int64 { return int64(time.Since(s.t0)) }

// valueHead fills the 16-byte value header: run id and intended wall ns.
func (s *runState) valueHead(dst []byte, intended int64) {
	binary.BigEndian.PutUint64(dst[0:], s.runID)
	binary.BigEndian.PutUint64(dst[8:], uint64(s.t0WallNs+intended))
}

// fillerFor returns the value tail of message i, a window sliding over the
// filler so consecutive values differ.
func (s *runState) fillerFor(i uint64) []byte {
	if s.payload != nil {
		return s.payload
	}
	if s.pool != nil {
		return s.pool[i%uint64(len(s.pool))]
	}
	n := s.cfg.MessageSize - valueHeaderLen
	off := int((i * 977) % uint64(len(s.filler)-n))
	return s.filler[off : off+n]
}

// keyFor returns the key index of message i (its bytes: s.keys), or -1
// for a null key.
func (s *runState) keyFor(i uint64, rng *uint64) int64 {
	switch {
	case s.cfg.Keys == 0:
		return -1
	case s.cfg.RandomKeys:
		// xorshift64: cheap, allocation-free and private to one producer.
		x := *rng
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		*rng = x
		return int64(x % uint64(s.cfg.Keys))
	default:
		return int64(i % uint64(s.cfg.Keys))
	}
}

// sleepUntil waits on timer (stopped, drained) until run-clock time t; it
// returns false, early, when done is closed.
func (s *runState) sleepUntil(timer *time.Timer, done <-chan struct{}, t int64) bool {
	d := t - s.now()
	if d <= 0 {
		return !isDone(done)
	}
	timer.Reset(time.Duration(d))
	select {
	case <-timer.C:
		return true
	case <-done:
		timer.Stop()
		return false
	}
}

// payloadPoolMaxBytes bounds the randomized payload pool: beyond a few
// thousand values more of them change nothing the broker sees.
const payloadPoolMaxBytes = 64 << 20

// payloadPool builds cfg.RandomPayloads value tails, each with its first
// RandomBytesRatio random and the rest zero, as OMB's randomized payloads.
func payloadPool(cfg Config, rng *rand.Rand) [][]byte {
	n := cfg.MessageSize - valueHeaderLen
	if cfg.RandomPayloads <= 0 || n <= 0 {
		return nil
	}
	pool := make([][]byte, min(cfg.RandomPayloads, max(1, payloadPoolMaxBytes/n)))
	random := int(cfg.RandomBytesRatio * float64(n))
	for i := range pool {
		pool[i] = make([]byte, n)
		rng.Read(pool[i][:random])
	}
	return pool
}
