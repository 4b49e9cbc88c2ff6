package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKill9UnderAcksAllLoad kills the broker with SIGKILL while producers
// run with acks=all and --fsync always, restarts it on the same data dir,
// and checks that every acknowledged record is read back exactly once and
// in order within its partition.
func TestKill9UnderAcksAllLoad(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // kill -9 and restart
	dir := t.TempDir()
	b := harness.StartBroker(t, dir, "--fsync", "always")
	ctx := harness.Context(t, 120*time.Second)
	const topic, partitions = "crash", 8
	if _, err := kadm.NewClient(b.Client(t)).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	// Records carry (producer, seq); the delivery timeout is short so that
	// every record in flight at the kill has failed (and cannot be retried
	// into the restarted broker) before the restart.
	const producers = 4
	var (
		mu    sync.Mutex
		acked = map[[2]uint32]bool{}
		stop  atomic.Bool
		wg    sync.WaitGroup
		total atomic.Int64
	)
	clients := make([]*kgo.Client, producers)
	for p := 0; p < producers; p++ {
		clients[p] = b.Client(t,
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.DisableIdempotentWrite(),
			kgo.RecordDeliveryTimeout(2*time.Second),
			kgo.ProducerLinger(time.Millisecond),
		)
	}
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			cl := clients[p]
			var inflight sync.WaitGroup
			// At most 256 records a millisecond per producer.
			pace := time.NewTicker(time.Millisecond)
			defer pace.Stop()
			for seq := uint32(0); !stop.Load() && seq < 1_000_000; seq++ {
				v := make([]byte, 64)
				binary.BigEndian.PutUint32(v[0:], uint32(p))
				binary.BigEndian.PutUint32(v[4:], seq)
				inflight.Add(1)
				cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d-%d", p, seq%64)), Value: v}, func(r *kgo.Record, err error) {
					defer inflight.Done()
					if err == nil {
						mu.Lock()
						acked[[2]uint32{uint32(p), seq}] = true
						mu.Unlock()
						total.Add(1)
					}
				})
				if seq%256 == 255 {
					<-pace.C
				}
			}
			inflight.Wait()
		}(p)
	}

	// Let acknowledged records pile up, then kill mid-stream.
	harness.WaitUpTo(30*time.Second, func() bool { return total.Load() >= 20000 })
	b.Kill9()
	stop.Store(true)
	wg.Wait()
	for _, c := range clients {
		c.Close()
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged before the kill")
	}
	t.Logf("acknowledged before kill -9: %d", len(acked))

	b.Restart()
	log := b.Out.String()
	got := map[[2]uint32]int{}
	lastSeq := map[string]uint32{}
	records := harness.ConsumeAll(ctx, t, b.Addr, topic, len(acked), kgo.FetchMaxWait(200*time.Millisecond))
	// Drain whatever else is there (unacknowledged records may also have
	// survived) with a short extra poll.
	records = append(records, drain(t, b.Addr, topic, records)...)
	for _, r := range records {
		id := [2]uint32{binary.BigEndian.Uint32(r.Value[0:]), binary.BigEndian.Uint32(r.Value[4:])}
		got[id]++
		k := string(r.Key)
		if prev, ok := lastSeq[k]; ok && id[1] <= prev {
			t.Fatalf("key %s: seq %d read after %d (order broken)", k, id[1], prev)
		}
		lastSeq[k] = id[1]
	}
	for id := range acked {
		switch got[id] {
		case 1:
		case 0:
			t.Fatalf("acknowledged record %v lost after kill -9\nbroker log:\n%s", id, log)
		default:
			t.Fatalf("acknowledged record %v read %d times", id, got[id])
		}
	}
	for id, n := range got {
		if n > 1 {
			t.Fatalf("record %v read %d times", id, n)
		}
	}
}

// drain polls once more past the records already read.
func drain(t *testing.T, addr, topic string, already []*kgo.Record) []*kgo.Record {
	next := map[int32]kgo.Offset{}
	for _, r := range already {
		next[r.Partition] = kgo.NewOffset().At(r.Offset + 1)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: next}), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := harness.Context(t, 2*time.Second)
	var out []*kgo.Record
	for ctx.Err() == nil {
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	return out
}

// TestCorruptSealedSegmentRefusesStart flips one byte inside a record of a
// sealed segment: recovery must refuse to start, naming the .log file and
// the byte position of the damaged batch, instead of truncating there and
// dropping every acknowledged record after it.
func TestCorruptSealedSegmentRefusesStart(t *testing.T) {
	t.Parallel()
	harness.Processes(t) // restarted on a corrupt segment, must exit
	dir := t.TempDir()
	b := harness.StartBroker(t, dir, "--fsync", "always")
	ctx := harness.Context(t, 60*time.Second)
	const topic = "corrupt"
	if _, err := kadm.NewClient(b.Client(t)).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("16384")}, topic); err != nil {
		t.Fatal(err)
	}
	// One batch per request: many batches in every segment.
	prod := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	for i := 0; i < 200; i++ {
		v := testValue(i)
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: v[:min(len(v), 500)]}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	b.Stop()

	logs, err := filepath.Glob(filepath.Join(dir, topic+"-0", "*.log"))
	if err != nil || len(logs) < 3 {
		t.Fatalf("%d segments (%v), want at least 3", len(logs), err)
	}
	sort.Strings(logs) // base offsets, zero-padded: the last is the active one
	victim := logs[len(logs)/2-1]
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	// Find the batch holding the file's middle byte and flip a byte in its
	// records, past the 61-byte header: only the CRC can tell.
	mid, batchAt := len(data)/2, -1
	for pos := 0; pos+61 <= len(data); {
		size := 12 + int(binary.BigEndian.Uint32(data[pos+8:]))
		if mid < pos+size {
			batchAt = pos
			if mid < pos+61 {
				mid = pos + 61
			}
			break
		}
		pos += size
	}
	if batchAt <= 0 {
		t.Fatalf("no batch after the first holds byte %d of %s (%d bytes)", mid, victim, len(data))
	}
	data[mid] ^= 0xff
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// A clean shutdown marks every segment verified: a start after it
	// trusts sealed segments without reading them (as Kafka does). Remove
	// the marker and the recovery point, as a crash before the first
	// checkpoint leaves them, so recovery validates every batch.
	for _, f := range []string{".ringlog-clean-shutdown", "recovery-point-offset-checkpoint"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}

	b.Launch()
	deadline := time.Now().Add(30 * time.Second)
	for exited := false; !exited; {
		select {
		case <-b.Exited():
			exited = true
			continue
		case <-time.After(50 * time.Millisecond):
		}
		if h, err := b.Health(); (err == nil && h["status"] == "ok") || time.Now().After(deadline) {
			t.Fatalf("broker started on a corrupt sealed segment:\n%s", b.Out.String())
		}
	}
	var ee *exec.ExitError
	if !errors.As(b.ExitErr(), &ee) || ee.ExitCode() == 0 {
		t.Fatalf("exit %v, want non-zero:\n%s", b.ExitErr(), b.Out.String())
	}
	want := fmt.Sprintf("%s at byte %d", victim, batchAt)
	if out := b.Out.String(); !strings.Contains(out, want) {
		t.Fatalf("output does not name %q:\n%s", want, out)
	}
	t.Logf("refused to start: ...%s...", want)
	// Nothing was truncated to get going.
	if st, err := os.Stat(victim); err != nil || st.Size() != int64(len(data)) {
		t.Fatalf("%s changed size after the refused start: %v %v", victim, st, err)
	}
}
