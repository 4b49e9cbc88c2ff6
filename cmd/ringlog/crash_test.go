package main

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKill9UnderAcksAllLoad kills the broker with SIGKILL while producers
// run with acks=all and --fsync always, restarts it on the same data dir,
// and checks that every acknowledged record is read back exactly once and
// in order within its partition.
func TestKill9UnderAcksAllLoad(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, "--fsync", "always")
	ctx := testContext(t, 120*time.Second)
	const topic, partitions = "crash", 8
	if _, err := kadm.NewClient(b.client(t)).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
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
		clients[p] = b.client(t,
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
					time.Sleep(time.Millisecond)
				}
			}
			inflight.Wait()
		}(p)
	}

	// Let acknowledged records pile up, then kill mid-stream.
	deadline := time.Now().Add(30 * time.Second)
	for total.Load() < 20000 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	b.kill9()
	stop.Store(true)
	wg.Wait()
	for _, c := range clients {
		c.Close()
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged before the kill")
	}
	t.Logf("acknowledged before kill -9: %d", len(acked))

	b.restart()
	log := b.out.String()
	got := map[[2]uint32]int{}
	lastSeq := map[string]uint32{}
	records := consumeAll(ctx, t, b.addr, topic, len(acked), kgo.FetchMaxWait(200*time.Millisecond))
	// Drain whatever else is there (unacknowledged records may also have
	// survived) with a short extra poll.
	records = append(records, drain(t, b.addr, topic, records)...)
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
	ctx := testContext(t, 2*time.Second)
	var out []*kgo.Record
	for ctx.Err() == nil {
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	return out
}
