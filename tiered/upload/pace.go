package upload

import (
	"context"
	"io"
	"sync"
	"time"
)

// pacer spreads the uploads of one broker over time at most rate bytes
// per second (Config.MaxRate; Kafka's
// remote.log.manager.copy.max.bytes.per.second). Without it a rolled
// segment goes out as one burst of reading, hashing and sending that
// competes with the produce path for CPU and disk.
//
// Each chunk read reserves the next free interval of the shared schedule
// and sleeps until it starts, so concurrent uploads share the rate and a
// broker idle for a while does not earn a burst (at most one chunk of
// credit).
type pacer struct {
	rate float64 // bytes per second

	mu   sync.Mutex
	next time.Time // start of the next free interval
}

// pacedChunk is how much one reservation covers: small enough that the
// sends stay smooth, large enough that the schedule's cost is negligible.
const pacedChunk = 256 << 10

func newPacer(rate int64) *pacer {
	if rate <= 0 {
		return nil
	}
	return &pacer{rate: float64(rate)}
}

// reserve books n bytes and returns how long to wait before sending them.
func (p *pacer) reserve(now time.Time, n int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.next
	if start.Before(now) {
		start = now
	}
	p.next = start.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	return start.Sub(now)
}

// reader paces r; a nil pacer returns r unchanged.
func (p *pacer) reader(ctx context.Context, r io.Reader) io.Reader {
	if p == nil {
		return r
	}
	return &pacedReader{ctx: ctx, r: r, p: p}
}

type pacedReader struct {
	ctx context.Context
	r   io.Reader
	p   *pacer
}

func (pr *pacedReader) Read(b []byte) (int, error) {
	if len(b) > pacedChunk {
		b = b[:pacedChunk]
	}
	if wait := pr.p.reserve(time.Now(), len(b)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-pr.ctx.Done():
			t.Stop()
			return 0, pr.ctx.Err()
		}
	}
	return pr.r.Read(b)
}
