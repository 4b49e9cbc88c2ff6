package loadgen

import (
	"context"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consume reads the partitions assigned to it from the offsets the topic had
// before the run, recording end-to-end latency from each message's intended
// send time (carried in the value) to its arrival here.
func (s *runState) consume(ctx context.Context, start map[int32]int64) error {
	offsets := make(map[int32]kgo.Offset, len(start))
	for p, o := range start {
		offsets[p] = kgo.NewOffset().At(o)
	}
	opts, err := s.cfg.kgoOpts(clientID + "-consumer")
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.cfg.Topic: offsets}),
		kgo.FetchMaxWait(100e6), // 100ms: a quiet topic should not hold a fetch long
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var batch []int64
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := s.now()
		batch = batch[:0]
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) < valueHeaderLen || binary.BigEndian.Uint64(r.Value) != s.runID {
				return // not ours: an earlier run or another writer
			}
			batch = append(batch, int64(binary.BigEndian.Uint64(r.Value[8:]))-s.t0WallNs)
		})
		s.e2e.recordSince(now, batch, s.measureNs)
		s.c.consumed.Add(int64(len(batch)))
		measured := 0
		for _, t := range batch {
			if t >= s.measureNs {
				measured++
			}
		}
		s.c.measuredConsumed.Add(int64(measured))
	}
	return nil
}
