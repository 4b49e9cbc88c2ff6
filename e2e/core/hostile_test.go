package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// hostileMemoryBound is the peak resident memory the broker may reach
// under attack (VmHWM). The limits that keep it there: 64 MiB of budget
// for large frames (bodies also grow only as bytes arrive), 2 s per
// request body, 50 connections per address. Without them the 24
// slowloris connections alone would pin 24 x 30 MiB = 720 MiB.
const hostileMemoryBound = 256 << 20

type attackStats struct {
	attempts, closedByBroker atomic.Int64
}

// dialFrom opens a TCP connection to addr from a given loopback source.
func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return d.Dial("tcp", addr)
}

// attackPause paces each attacker (RINGLOG_HOSTILE_PAUSE, default 2ms
// between connections): the attackers share the test machine's cores with
// the broker and the good client, and an unpaced attacker measures CPU
// starvation of the whole machine rather than the broker's defenses.
func attackPause() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("RINGLOG_HOSTILE_PAUSE")); err == nil {
		return d
	}
	return 2 * time.Millisecond
}

// attack runs fn on fresh connections from src until stop.
func attack(wg *sync.WaitGroup, stop <-chan struct{}, st *attackStats, src, addr string, fn func(c net.Conn, rnd *rand.Rand)) {
	pause := attackPause()
	wg.Add(1)
	go func() {
		defer wg.Done()
		rnd := rand.New(rand.NewPCG(uint64(len(src)), uint64(time.Now().UnixNano())))
		for n := 0; n < 100000; n++ {
			select {
			case <-stop:
				return
			default:
			}
			c, err := dialFrom(src, addr)
			if err != nil {
				// Backs off from a failed dial instead of spinning on it.
				time.Sleep(50 * time.Millisecond)
				continue
			}
			st.attempts.Add(1)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fn(c, rnd)
			// Real time: the attacker's pace (see attackPause).
			time.Sleep(pause)
			// Did the broker hang up on us?
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
				st.closedByBroker.Add(1)
			}
			c.Close()
		}
	}()
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// vmHWM reads a process's peak resident set size.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM")
}

func TestHostileClients(t *testing.T) {
	harness.Processes(t) // the broker's peak RSS (VmHWM)
	if testing.Short() {
		t.Skip("process-level test")
	}
	dir := t.TempDir()
	b := harness.StartBroker(t, dir, "--queued-max-request-bytes", strconv.Itoa(64<<20), "--max-request-bytes", strconv.Itoa(32<<20),
		"--request-read-timeout", "2s", "--max-connections-per-ip", "50", "--log-level", "info")
	adm := kadm.NewClient(b.Client(t))
	harness.CreateTopic(t, adm, "good", 1, 1)
	harness.CreateTopic(t, adm, "stored", 1, 1)
	// Records stored before the attack; their segment must not change.
	seed := b.Client(t)
	for i := range 200 {
		if err := seed.ProduceSync(harness.Context(t, 10*time.Second), &kgo.Record{Topic: "stored", Value: []byte(fmt.Sprintf("stored-%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	segHash := func() [32]byte {
		data, err := os.ReadFile(filepath.Join(dir, "stored-0", "00000000000000000000.log"))
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(data)
	}
	before := segHash()

	// The good client: one record every 10 ms, latency per record.
	good := b.Client(t, kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	var (
		mu        sync.Mutex
		phase     atomic.Int32 // 0 baseline, 1 attack, 2 done
		goodSent  []string
		goodFails atomic.Int64
	)
	byPhase := map[int32][]time.Duration{}
	goodDone := make(chan struct{})
	go func() {
		defer close(goodDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; phase.Load() < 2 && i < 100000; i++ {
			<-tick.C
			v := fmt.Sprintf("good-%d", i)
			start := time.Now()
			err := good.ProduceSync(harness.Context(t, 10*time.Second), &kgo.Record{Topic: "good", Value: []byte(v)}).FirstErr()
			d := time.Since(start)
			mu.Lock()
			if err != nil {
				goodFails.Add(1)
			} else {
				goodSent = append(goodSent, v)
				byPhase[phase.Load()] = append(byPhase[phase.Load()], d)
			}
			mu.Unlock()
		}
	}()
	// Real time: the good client's baseline latencies are 4 s of samples.
	time.Sleep(4 * time.Second)
	hwmBaseline, _ := vmHWM(b.Pid())

	phase.Store(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	kinds := map[string]*attackStats{}
	run := func(name, src string, fn func(c net.Conn, rnd *rand.Rand)) {
		st := kinds[name]
		if st == nil {
			st = &attackStats{}
			kinds[name] = st
		}
		attack(&wg, stop, st, src, b.Addr, fn)
	}
	run("garbage", "127.0.0.2", func(c net.Conn, rnd *rand.Rand) {
		body := make([]byte, 8+rnd.IntN(4096))
		for i := range body {
			body[i] = byte(rnd.Uint32())
		}
		c.Write(frame(body))
	})
	run("2GiB-prefix", "127.0.0.3", func(c net.Conn, _ *rand.Rand) {
		c.Write([]byte{0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 1})
	})
	run("2^31-array", "127.0.0.4", func(c net.Conn, _ *rand.Rand) {
		// Metadata v1 whose topics array claims 2^31-1 entries.
		c.Write(frame([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0x7f, 0xff, 0xff, 0xff}))
	})
	run("20M-tagged-fields", "127.0.0.5", func(c net.Conn, _ *rand.Rand) {
		// Metadata v9 (flexible header) with a tagged-field count of 20M.
		hdr := []byte{0, 3, 0, 9, 0, 0, 0, 1, 0, 0}
		c.Write(frame(binary.AppendUvarint(hdr, 20_000_000)))
	})
	run("truncated", "127.0.0.6", func(c net.Conn, _ *rand.Rand) {
		c.Write([]byte{0, 0, 4, 0, 0, 3, 0, 1, 0, 0})
	})
	for i := range 24 {
		// Slowloris: a 30 MiB body sent one byte per second.
		run("slowloris", "127.0.1."+strconv.Itoa(i+1), func(c net.Conn, _ *rand.Rand) {
			c.Write(binary.BigEndian.AppendUint32(nil, 30<<20))
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for range 4 {
				if _, err := c.Write([]byte{0}); err != nil {
					return
				}
				<-tick.C
			}
		})
	}
	// Connection flood: 200 idle connections from one address.
	var flood []net.Conn
	refused := 0
	for range 200 {
		c, err := dialFrom("127.0.0.9", b.Addr)
		if err != nil {
			refused++
			continue
		}
		flood = append(flood, c)
	}
	// Real time: the attack lasts 8 s, against the good client's pace.
	time.Sleep(8 * time.Second)
	close(stop)
	wg.Wait()
	// The flood beyond the per-address cap was closed by the broker.
	floodClosed := 0
	for _, c := range flood {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			floodClosed++
		}
		c.Close()
	}
	phase.Store(2)
	<-goodDone

	select {
	case <-b.Exited():
		t.Fatalf("broker died under attack: %v\n%s", b.ExitErr(), b.Out.String())
	default:
	}
	if h, err := b.Health(); err != nil || h["status"] != "ok" {
		t.Fatalf("broker unhealthy after the attack: %v %v", h, err)
	}
	hwm, err := vmHWM(b.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if after := segHash(); !bytes.Equal(after[:], before[:]) {
		t.Fatal("a stored segment changed during the attack")
	}
	mu.Lock()
	sent := append([]string(nil), goodSent...)
	base, under := harness.Percentile(byPhase[0], 0.99), harness.Percentile(byPhase[1], 0.99)
	nBase, nUnder := len(byPhase[0]), len(byPhase[1])
	mu.Unlock()
	recs := harness.ConsumeAll(harness.Context(t, 30*time.Second), t, b.Addr, "good", len(sent))
	for i, r := range recs[:len(sent)] {
		if string(r.Value) != sent[i] {
			t.Fatalf("good record %d reads back %q, want %q", i, r.Value, sent[i])
		}
	}
	var attempts []string
	total := int64(0)
	for name, st := range kinds {
		attempts = append(attempts, fmt.Sprintf("%s=%d(closed %d)", name, st.attempts.Load(), st.closedByBroker.Load()))
		total += st.attempts.Load()
	}
	sort.Strings(attempts)
	fmt.Printf("hostile: pause=%v attack_connections=%d %s flood=200(refused_or_closed %d) broker_peak_rss_mib=%d baseline_rss_mib=%d bound_mib=%d good_p99_baseline_ms=%.2f good_p99_attack_ms=%.2f ratio=%.2f good_records=%d/%d good_failures=%d stored_segment_unchanged=true\n",
		attackPause(), total, strings.Join(attempts, " "), refused+floodClosed, hwm>>20, hwmBaseline>>20, hostileMemoryBound>>20,
		float64(base.Microseconds())/1000, float64(under.Microseconds())/1000, float64(under)/float64(max(base, time.Microsecond)), nBase, nUnder, goodFails.Load())
	if hwm > hostileMemoryBound {
		t.Fatalf("broker peak RSS %d MiB over the %d MiB bound", hwm>>20, hostileMemoryBound>>20)
	}
	if refused+floodClosed < 200-50 {
		t.Fatalf("only %d of 200 flood connections refused or closed with a per-address cap of 50", refused+floodClosed)
	}
	for _, name := range []string{"2GiB-prefix", "2^31-array", "20M-tagged-fields"} {
		if st := kinds[name]; st.closedByBroker.Load() < st.attempts.Load()*9/10 {
			t.Fatalf("%s: broker closed %d of %d connections", name, st.closedByBroker.Load(), st.attempts.Load())
		}
	}
	if goodFails.Load() > 0 {
		t.Fatalf("%d good produces failed under attack", goodFails.Load())
	}
	if os.Getenv("RINGLOG_HOSTILE_STRICT") == "1" && under > 2*base {
		t.Fatalf("good client's p99 %v under attack is over twice its baseline %v", under, base)
	}
}
