package loadgen

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumerGroups is how many times every message is read: once per group
// (OMB's subscriptions), once in all with assigned partitions.
func (c Config) consumerGroups() int { return max(1, c.ConsumerGroups) }

// groupID names consumer group g of this run: fresh per run, so no
// committed offsets of an earlier run decide where it starts.
func (s *runState) groupID(g int) string {
	return fmt.Sprintf("%s-%016x-g%d", clientID, s.runID, g)
}

// startConsumers starts the run's consumers on wg, reading from the
// offsets the topic had before the run (start). Without consumer groups
// the consumers split the partitions between them by assignment; with
// groups, each group first has start committed as its offsets, then its
// members join it and the group coordinator assigns the partitions, as an
// application's consumers would.
func (s *runState) startConsumers(ctx context.Context, wg *sync.WaitGroup, start map[int32]int64) error {
	cfg := s.cfg
	run := func(opts ...kgo.Opt) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.consume(ctx, opts...); err != nil {
				s.c.fail(0, fmt.Errorf("consumer: %w", err))
			}
		}()
	}
	if cfg.ConsumerGroups == 0 {
		for c := 0; c < cfg.Consumers; c++ {
			mine := map[int32]kgo.Offset{}
			for p, o := range start {
				if int(p)%cfg.Consumers == c {
					mine[p] = kgo.NewOffset().At(o)
				}
			}
			if len(mine) > 0 {
				run(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: mine}))
			}
		}
		return nil
	}
	adm, _, actx, done, err := cfg.adminClient(ctx)
	if err != nil {
		return err
	}
	defer done()
	s.owned = make([]atomic.Int64, cfg.ConsumerGroups*cfg.Consumers)
	var offsets kadm.Offsets
	for p, o := range start {
		offsets.Add(kadm.Offset{Topic: cfg.Topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	for g := 0; g < cfg.ConsumerGroups; g++ {
		id := s.groupID(g)
		resp, err := adm.CommitOffsets(actx, id, offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("consumer group %s: commit start offsets: %w", id, cfg.Security.wrapErr(err))
		}
		for c := 0; c < cfg.Consumers; c++ {
			owned := &s.owned[g*cfg.Consumers+c]
			run(kgo.ConsumerGroup(id), kgo.ConsumeTopics(cfg.Topic),
				kgo.OnPartitionsAssigned(s.countOwned(owned, 1)),
				kgo.OnPartitionsRevoked(s.countOwned(owned, -1)),
				kgo.OnPartitionsLost(s.countOwned(owned, -1)),
				// Only reached if the commit above were lost: the run's
				// messages are all after the start, never before it.
				kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
		}
	}
	return nil
}

// groupJoinTimeout bounds the wait for the consumer groups to have every
// partition assigned before the schedule starts.
const groupJoinTimeout = 30 * time.Second

// awaitGroups waits until every group is settled: all partitions owned,
// by as many members as can own one. A group whose members have not all
// joined yet rebalances when they do, and a partition that moves is read
// again from the last commit: the run would count its messages twice and
// measure the rebalance. The first join also waits out the coordinator's
// initial rebalance delay. OMB likewise subscribes before it produces.
func (s *runState) awaitGroups(ctx context.Context) error {
	cfg := s.cfg
	deadline := time.Now().Add(groupJoinTimeout)
	for {
		settled := 0
		for g := 0; g < cfg.ConsumerGroups; g++ {
			var parts, holders int64
			for c := 0; c < cfg.Consumers; c++ {
				if n := s.owned[g*cfg.Consumers+c].Load(); n > 0 {
					parts += n
					holders++
				}
			}
			if parts == int64(cfg.Partitions) && holders == int64(min(cfg.Consumers, int(cfg.Partitions))) {
				settled++
			}
		}
		if settled == cfg.ConsumerGroups {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer groups: %d of %d settled (every partition owned, by every member that can own one) after %v", settled, cfg.ConsumerGroups, groupJoinTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// countOwned returns a group callback that adds sign times the partitions
// of the topic it is handed to owned.
func (s *runState) countOwned(owned *atomic.Int64, sign int64) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		owned.Add(sign * int64(len(m[s.cfg.Topic])))
	}
}

// consume reads with the client options given (partitions or a group),
// recording end-to-end latency from each message's intended send time
// (carried in the value) to its arrival here.
func (s *runState) consume(ctx context.Context, how ...kgo.Opt) error {
	opts, err := s.cfg.kgoOpts(clientID + "-consumer")
	if err != nil {
		return err
	}
	opts = append(opts, how...)
	cl, err := kgo.NewClient(append(opts,
		kgo.FetchMaxWait(100e6), // 100ms: a quiet topic should not hold a fetch long
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if s.resume != nil {
		cl.PauseFetchTopics(s.cfg.Topic)
		go func() {
			select {
			case <-s.resume:
				cl.ResumeFetchTopics(s.cfg.Topic)
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-s.begun:
	case <-ctx.Done():
		return nil
	}
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
