package netfaults

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// delayProxy forwards TCP connections from its listener to target,
// holding each direction's bytes for delay ± jitter (0: pass-through).
type delayProxy struct {
	ln            net.Listener
	target        string
	delay, jitter atomic.Int64 // nanoseconds
	wg            sync.WaitGroup
	mu            sync.Mutex
	conns         []net.Conn
}

func newDelayProxy(t *testing.T, target string) *delayProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *delayProxy) addr() string { return p.ln.Addr().String() }

// set changes the delay and jitter of data forwarded from now on.
func (p *delayProxy) set(delay, jitter time.Duration) {
	p.delay.Store(int64(delay))
	p.jitter.Store(int64(jitter))
}

func (p *delayProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		d, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, d)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(c, d)
		go p.pump(d, c)
	}
}

// pump copies src to dst, each chunk written no earlier than its arrival
// plus the delay and a uniform jitter in [-jitter, +jitter], and never
// before the chunk ahead of it (TCP keeps order; netem with jitter would
// reorder packets, which TCP then puts back in order the same way).
func (p *delayProxy) pump(src, dst net.Conn) {
	defer p.wg.Done()
	type chunk struct {
		due time.Time
		b   []byte
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			time.Sleep(time.Until(c.due)) // real time: the delay itself
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				for range q {
				}
				return
			}
		}
		// src ended: pass the half-close on.
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	var last time.Time
	for {
		b := make([]byte, 64<<10)
		n, err := src.Read(b)
		if n > 0 {
			due := time.Now()
			if d := time.Duration(p.delay.Load()); d > 0 {
				j := time.Duration(p.jitter.Load())
				if j > 0 {
					d += time.Duration(rand.Int64N(int64(2*j)+1)) - j
				}
				due = due.Add(d)
			}
			if due.Before(last) {
				due = last
			}
			last = due
			q <- chunk{due, b[:n]}
		}
		if err != nil {
			close(q)
			<-done
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

// ackLatencies are the latencies of the acknowledgements given in
// [from, to], sorted, and the same per partition.
func (h *netHistory) ackLatencies(from, to time.Time) ([]time.Duration, map[int32][]time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []time.Duration
	byPart := map[int32][]time.Duration{}
	for _, a := range h.acks {
		if !a.at.Before(from) && !a.at.After(to) {
			out = append(out, a.lat)
			byPart[a.partition] = append(byPart[a.partition], a.lat)
		}
	}
	slices.Sort(out)
	return out, byPart
}

// rttVia is the median of 5 ApiVersions round trips to addr.
func rttVia(t *testing.T, addr string) time.Duration {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	b := cl.SeedBrokers()[0]
	var rtts []time.Duration
	for range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		_, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, b)
		cancel()
		if err != nil {
			t.Fatalf("ApiVersions via %s: %v", addr, err)
		}
		rtts = append(rtts, time.Since(start))
	}
	rtts = rtts[1:] // the first one pays for the connection
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}

// TestNetworkDelay runs three brokers (RF=3, min.insync.replicas 2) whose
// every link, theirs with each other and the clients', goes through a
// delay proxy, under idempotent acks=all load: no delay, then 50 ms ±
// 20 ms on every link, then on every connection to one broker (its
// clients', its followers' fetches from it, raft to it; its own fetches
// from the other leaders are not delayed). acks=all produce
// must keep working throughout, and the checker must find nothing; the
// summary lines report each phase's ack p50 and p99.
func TestNetworkDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault test")
	}
	const n = 3
	specs := harness.FreshNodeSpecs(t, n)
	var kafkaProxies, ctrlProxies []*delayProxy
	var voters []string
	for i, s := range specs {
		kp, cp := newDelayProxy(t, s.Addr), newDelayProxy(t, s.Ctrl)
		kafkaProxies, ctrlProxies = append(kafkaProxies, kp), append(ctrlProxies, cp)
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, cp.addr()))
	}
	all := append(slices.Clone(kafkaProxies), ctrlProxies...)
	setAll := func(d, j time.Duration) {
		for _, p := range all {
			p.set(d, j)
		}
	}
	c := &harness.Cluster{T: t, Voters: strings.Join(voters, ",")}
	for i, s := range specs {
		b := c.NewNode(int32(i+1), s, []string{"--advertised-addr", kafkaProxies[i].addr(),
			"--replica-lag-time-max", harness.PartitionLag.String()})
		c.Nodes = append(c.Nodes, b)
	}
	for _, b := range c.Nodes {
		b.Launch()
		t.Cleanup(func() { b.Stop() })
	}
	for _, b := range c.Nodes {
		b.WaitReady(60 * time.Second)
	}
	harness.LogTailsOnFailure(t, c)
	var seeds []string
	for _, p := range kafkaProxies {
		seeds = append(seeds, p.addr())
	}
	adm := kadm.NewClient(c.Node(1).Client(t, kgo.SeedBrokers(seeds...)))
	const topic, partitions = "netdelay", 4
	harness.CreateRF3Topic(t, adm, topic, partitions)

	h := newNetHistory()
	h.runIdempotent(t, seeds, topic, partitions)
	stopLoad := sync.OnceFunc(func() { h.stopped.Store(true); h.wg.Wait() })
	t.Cleanup(stopLoad)
	h.waitAcked(t, partitions, time.Now(), 30*time.Second)

	type phase struct {
		name     string
		hold     time.Duration
		set      func()
		rttLo    time.Duration // the probe's round trip must be at least this
		p50, p99 time.Duration
		acked    int
		rtt      time.Duration
		isr      string // the ISRs at the phase's end
		worstP99 time.Duration
	}
	phases := []*phase{
		{name: "no-delay", hold: 8 * time.Second, set: func() { setAll(0, 0) }},
		{name: "50ms±20ms-every-link", hold: 15 * time.Second, set: func() { setAll(50*time.Millisecond, 20*time.Millisecond) }, rttLo: 60 * time.Millisecond},
		{name: "50ms±20ms-one-broker", hold: 12 * time.Second, set: func() {
			setAll(0, 0)
			kafkaProxies[1].set(50*time.Millisecond, 20*time.Millisecond)
			ctrlProxies[1].set(50*time.Millisecond, 20*time.Millisecond)
		}, rttLo: 60 * time.Millisecond},
	}
	for _, ph := range phases {
		ph.set()
		// The probe: a round trip through the second broker's proxy
		// crosses the delay twice.
		ph.rtt = rttVia(t, kafkaProxies[1].addr())
		if ph.rtt < ph.rttLo || (ph.rttLo == 0 && ph.rtt > 50*time.Millisecond) {
			t.Fatalf("phase %s: probe round trip %v, want at least %v (and under 50ms without delay)", ph.name, ph.rtt, ph.rttLo)
		}
		start := time.Now()
		time.Sleep(ph.hold) // real time: the phase's measurement window
		lats, byPart := h.ackLatencies(start.Add(time.Second), time.Now())
		ph.p50, ph.p99, ph.acked = harness.Quantile(lats, 0.50), harness.Quantile(lats, 0.99), len(lats)
		// Each producer sends one record at a time, so a slow partition
		// gives few acknowledgements: its own p99 is reported too.
		for _, ds := range byPart {
			ph.worstP99 = max(ph.worstP99, harness.Quantile(ds, 0.99))
		}
		if m, err := adm.Metadata(harness.Context(t, 10*time.Second), topic); err == nil {
			for p := range int32(partitions) {
				pd := m.Topics[topic].Partitions[p]
				ph.isr += fmt.Sprintf("p%d:%d%v ", p, pd.Leader, pd.ISR)
			}
		}
		t.Logf("phase %s: probe round trip %v, %d acknowledged, ack p50 %v p99 %v (worst partition's p99 %v), leaders and ISRs at the end %s",
			ph.name, ph.rtt, ph.acked, ph.p50.Round(time.Millisecond), ph.p99.Round(time.Millisecond), ph.worstP99.Round(time.Millisecond), ph.isr)
		if ph.acked == 0 {
			t.Errorf("phase %s: nothing acknowledged in %v", ph.name, ph.hold)
		}
	}
	setAll(0, 0)
	stopLoad()
	harness.WaitMetadata(t, adm, 60*time.Second, "full ISRs at the end", harness.FullISR(topic, partitions))
	harness.WaitIdentical(t, c, topic, partitions, 30*time.Second)
	logs := harness.ReadBack(t, c, topic, partitions)
	h.mu.Lock()
	chk := checkNetHistory(h.acks, logs, nil, nil)
	errs := fmt.Sprint(h.errs)
	h.mu.Unlock()
	for _, ph := range phases {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fmt.Printf("netfaults: delay=%s rtt_ms=%.1f acknowledged=%d ack_p50_ms=%.1f ack_p99_ms=%.1f worst_partition_p99_ms=%.1f isr=%q\n",
			ph.name, ms(ph.rtt), ph.acked, ms(ph.p50), ms(ph.p99), ms(ph.worstP99), ph.isr)
	}
	fmt.Printf("netfaults: delay io=%s attempts=%d acknowledged=%d in_log=%d lost=%d moved=%d duplicated=%d reordered=%d offset_conflicts=%d errors=%s\n",
		harness.IOMode(), h.attempts.Load(), chk.acked, chk.inLog, chk.lost, chk.moved, chk.duplicated, chk.reordered, chk.offsetConflicts, errs)
	for _, p := range chk.problems {
		t.Error(p)
	}
	if chk.bad() {
		t.Fatal("the checker found anomalies")
	}
}
