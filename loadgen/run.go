package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringlog/ringlog/results"
)

// sendDelaySaturatedMs: a generator whose own p99 lateness exceeds this is
// reported as saturated (CPU-bound, or blocked on its buffer limit).
const sendDelaySaturatedMs = 5.0

// interruptDrain bounds the wait for in-flight acks after an interrupt
// (Ctrl-C, SIGTERM): long enough for a healthy broker's acks, short enough
// that the command still feels like it obeyed.
const interruptDrain = 2 * time.Second

// topicInfo is what a run needs from metadata.
type topicInfo struct {
	leaders []string        // partition -> leader host:port
	ends    map[int32]int64 // partition -> end offset before the run
	// replicas is the topic's replication factor as the metadata shows it
	// (0: not shown); created says this run created the topic, so
	// cfg.TopicConfigs apply to it.
	replicas int
	created  bool
	// brokers is how many brokers the cluster's metadata lists: what
	// `ringlog size --from` divides the measured throughput by.
	brokers int
	// minISR is the topic's effective min.insync.replicas (0: unknown).
	minISR int
}

// prepareTopic creates the topic if missing and returns its leaders and end
// offsets.
func prepareTopic(ctx context.Context, cfg Config) (topicInfo, error) {
	adm, cl, ctx, done, err := cfg.adminClient(ctx)
	if err != nil {
		return topicInfo{}, err
	}
	defer done()
	var info topicInfo
	// Create first: asking metadata for a missing topic makes kgo retry
	// for seconds before reporting it unknown.
	var configs map[string]*string
	for k, v := range cfg.TopicConfigs {
		if configs == nil {
			configs = map[string]*string{}
		}
		configs[k] = kadm.StringPtr(v)
	}
	resp, err := adm.CreateTopic(ctx, cfg.Partitions, cfg.ReplicationFactor, configs, cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return info, fmt.Errorf("create topic %s: %w", cfg.Topic, cfg.Security.wrapErr(err))
	}
	info.created = err == nil
	for {
		leaders, replicas, brokers, err := lookupLeaders(ctx, cl, cfg.Topic)
		if err == nil {
			info.leaders, info.replicas, info.brokers = leaders, replicas, brokers
			break
		}
		if wrapped := cfg.Security.wrapErr(err); wrapped != err {
			// Retrying cannot fix credentials or certificates.
			return info, fmt.Errorf("topic %s metadata: %w", cfg.Topic, wrapped)
		}
		select {
		case <-ctx.Done():
			return info, fmt.Errorf("topic %s: no leaders for all partitions: %v (%w)", cfg.Topic, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	info.minISR = topicMinISR(ctx, adm, cfg.Topic)
	if cfg.Consumers == 0 {
		return info, nil
	}
	// Retried until every partition answers: a partition that failed (a
	// leader just elected) would list offset -1, which the consumer reads
	// as "the end", silently skipping what is produced before its first
	// fetch and then waiting out the drain timeout for it.
	for {
		ends, err := adm.ListEndOffsets(ctx, cfg.Topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil && len(ends[cfg.Topic]) == len(info.leaders) {
			info.ends = map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) { info.ends[o.Partition] = o.Offset })
			return info, nil
		}
		var ke *kerr.Error
		if wrapped := cfg.Security.wrapErr(err); wrapped != err || errors.As(err, &ke) && !ke.Retriable {
			return info, fmt.Errorf("end offsets: %w", wrapped)
		}
		select {
		case <-ctx.Done():
			return info, fmt.Errorf("end offsets: %v (%w)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// topicMinISR is the topic's effective min.insync.replicas (its own
// config or the broker default in force), 0 when the broker does not say:
// a report still renders, with the field shown unknown.
func topicMinISR(ctx context.Context, adm *kadm.Client, topic string) int {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return 0
	}
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" {
			n, _ := strconv.Atoi(c.MaybeValue())
			return n
		}
	}
	return 0
}

// lookupLeaders returns the leader address of every partition of topic and
// the most replicas any partition has, or an error when metadata is
// incomplete (a partition without a leader).
//
// It sends its own Metadata request rather than kadm's Metadata, which
// answers from kgo's topic cache for up to MetadataMinAge (5 s) and which
// ForceMetadataRefresh does not clear: a lookup after a second wave of
// leader moves (a reassignment completes partition by partition) got the
// leaders of the first, and the lean client re-sent to the old leaders
// until the entry expired, about 5 s without an acknowledgement for the
// moved partitions. kgo answers a request of its own from a broker.
func lookupLeaders(ctx context.Context, cl kmsg.Requestor, topic string) ([]string, int, int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, 0, 0, err
	}
	var td *kmsg.MetadataResponseTopic
	for i := range resp.Topics {
		if t := &resp.Topics[i]; t.Topic != nil && *t.Topic == topic {
			td = t
		}
	}
	if td == nil || td.ErrorCode != 0 || len(td.Partitions) == 0 {
		var terr error
		if td != nil {
			terr = kerr.ErrorForCode(td.ErrorCode)
		}
		return nil, 0, 0, fmt.Errorf("topic %s: no metadata (%w)", topic, terr)
	}
	addrs := make(map[int32]string, len(resp.Brokers))
	for _, b := range resp.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	leaders := make([]string, len(td.Partitions))
	replicas := 0
	for _, p := range td.Partitions {
		replicas = max(replicas, len(p.Replicas))
		addr := addrs[p.Leader]
		if p.ErrorCode != 0 || addr == "" || p.Partition < 0 || int(p.Partition) >= len(leaders) {
			return nil, 0, 0, fmt.Errorf("partition %d: no leader (%v)", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
		leaders[p.Partition] = addr
	}
	return leaders, replicas, len(resp.Brokers), nil
}

// waiter is the end-of-run half of an emitter: it waits for outstanding
// acks until ctx ends, then closes the connections.
type waiter interface{ wait(ctx context.Context) }

// waitAll closes emitters at once (a run that did not start).
func waitAll(ws []waiter) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, w := range ws {
		if w != nil {
			w.wait(ctx)
		}
	}
}

// Run executes one workload and returns its result (not yet written).
// Progress lines go to progress unless cfg.Quiet. When ctx ends after the
// start, Run stops scheduling, waits at most interruptDrain for in-flight
// acks and returns the result of the time measured so far, marked
// Interrupted; before the start it returns ctx's error.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*results.Run, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sources, sameHost, err := counterSources(ctx, cfg)
	if err != nil {
		return nil, err
	}
	info, err := prepareTopic(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cfg.Partitions = int32(len(info.leaders))
	if info.replicas > 0 {
		cfg.ReplicationFactor = int16(info.replicas) // what the topic has, not what was asked
	}
	if !info.created {
		cfg.TopicConfigs = nil // an existing topic keeps its own configs
	}
	cfg.clusterBrokers = info.brokers
	cfg.minISR = info.minISR
	cfg.Keys = resolveKeys(cfg.Keys, cfg.Partitions)
	st := newRunState(cfg)
	st.leaders = info.leaders
	// Built once: every lean connection handshakes with the same config.
	if st.tlsConfig, err = cfg.Security.tlsConfig(); err != nil {
		return nil, err
	}
	st.saslMech = cfg.Security.saslMechanism()
	// The lean client re-reads leaders after NOT_LEADER_OR_FOLLOWER or a
	// broken connection, through one metadata client kept for the run.
	metaOpts, err := cfg.kgoOpts(clientID + "-meta")
	if err != nil {
		return nil, err
	}
	metaCl, err := kgo.NewClient(metaOpts...)
	if err != nil {
		return nil, err
	}
	defer metaCl.Close()
	st.refreshLeaders = func() ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		leaders, _, _, err := lookupLeaders(ctx, metaCl, cfg.Topic)
		return leaders, err
	}

	emitters := make([]emitter, cfg.Producers)
	waiters := make([]waiter, cfg.Producers)
	for p := range emitters {
		if cfg.Client == "kgo" {
			e, err := newKgoEmitter(st)
			if err != nil {
				return nil, err
			}
			emitters[p], waiters[p] = e, e
		} else {
			e, err := newLeanEmitter(st, p)
			if err != nil {
				waitAll(waiters[:p])
				return nil, cfg.Security.wrapErr(err)
			}
			emitters[p], waiters[p] = e, e
		}
	}

	var prof *profiler
	if len(cfg.ProfileBrokers) > 0 {
		if progress == nil {
			progress = io.Discard
		}
		if prof, err = newProfiler(cfg, progress); err != nil {
			waitAll(waiters)
			return nil, err
		}
	}

	consumeCtx, stopConsumers := context.WithCancel(context.Background())
	defer stopConsumers()
	var consumers sync.WaitGroup
	var backlog *backlogWatch
	producersDone := make(chan struct{})
	if cfg.BacklogBytes > 0 {
		// The consumers join now and fetch nothing until resumed, as
		// OMB pauses its consumers: the drain measures the catch-up,
		// not the group's first rebalance.
		st.resume = make(chan struct{})
		var out io.Writer
		if !cfg.Quiet {
			out = progress
		}
		backlog = newBacklogWatch(st, func() { close(st.resume) }, out)
	}
	// abort ends a run that did not start.
	abort := func() {
		stopConsumers()
		consumers.Wait()
		waitAll(waiters)
		if prof != nil {
			prof.wait()
		}
	}
	if cfg.Consumers > 0 {
		err := st.startConsumers(consumeCtx, &consumers, info.ends)
		if err == nil && cfg.ConsumerGroups > 0 {
			err = st.awaitGroups(ctx)
		}
		if err != nil {
			abort()
			return nil, err
		}
	}

	if !cfg.StartAt.IsZero() {
		select {
		case <-time.After(time.Until(cfg.StartAt)):
		case <-ctx.Done():
			abort()
			return nil, ctx.Err()
		}
	}
	st.start(time.Now())
	st.stop = ctx.Done()
	if backlog != nil {
		go backlog.run(producersDone)
	}

	noted := make(chan struct{})
	noteInterrupt := context.AfterFunc(ctx, func() {
		st.interruptedAt.Store(st.now() + 1)
		close(noted)
	})
	if prof != nil {
		prof.run(ctx, st.t0.Add(cfg.Warmup), cfg.Duration)
	}
	counters := startCounterWindow(ctx, sources, sameHost, st.t0.Add(cfg.Warmup), cfg.Duration)

	sendDelay := make([]*recorder, cfg.Producers)
	var producers sync.WaitGroup
	for p := range emitters {
		sendDelay[p] = newRecorder()
		producers.Add(1)
		go func() {
			defer producers.Done()
			st.produceLoop(ctx, p, emitters[p], sendDelay[p])
		}()
	}

	iv := newIntervals(st, sendDelay, progress)
	ivDone := make(chan struct{})
	stopIv := make(chan struct{})
	go func() { defer close(ivDone); iv.loop(stopIv) }()

	producers.Wait()
	close(producersDone)
	if backlog != nil {
		<-backlog.done // the consumers have been resumed
	}
	// The drain ends at DrainTimeout, or interruptDrain after an interrupt
	// (one before the drain or during it).
	cutDrain, cutDrainCause := context.WithCancelCause(context.Background())
	drainCtx, endDrain := context.WithTimeoutCause(cutDrain, cfg.DrainTimeout,
		fmt.Errorf("no response within the %v drain timeout", cfg.DrainTimeout))
	defer endDrain()
	stopCut := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(min(interruptDrain, cfg.DrainTimeout), func() {
			cutDrainCause(fmt.Errorf("interrupted: no response within %v after the interrupt", min(interruptDrain, cfg.DrainTimeout)))
		})
		context.AfterFunc(drainCtx, func() { t.Stop() })
	})
	defer stopCut()
	var drain sync.WaitGroup
	for _, w := range waiters {
		drain.Add(1)
		go func() { defer drain.Done(); w.wait(drainCtx) }()
	}
	drain.Wait()
	for cfg.Consumers > 0 && drainCtx.Err() == nil &&
		st.c.measuredConsumed.Load() < int64(cfg.consumerGroups())*st.c.measuredAcked.Load() {
		time.Sleep(20 * time.Millisecond)
	}
	stopConsumers()
	consumers.Wait()
	if !noteInterrupt() { // an interrupt from here on cut nothing short
		<-noted // one before: let it be recorded
	}
	close(stopIv)
	<-ivDone

	run := st.result(iv)
	// A sweep deletes only the topics its runs created.
	run.Result.Workload["topic_created"] = strconv.FormatBool(info.created)
	if backlog != nil {
		run.Result.Backlog = &backlog.res
		if backlog.warn != "" {
			run.Result.Warnings = append(run.Result.Warnings, backlog.warn)
		}
	}
	var warns []string
	run.Result.BrokerCPU, run.Result.GeneratorCPU, warns = counters.result(st.c.measuredAcked.Load(), st.c.bytesAcked.Load())
	run.Result.Warnings = append(run.Result.Warnings, warns...)
	if prof != nil {
		run.Result.Profiles, run.Files = prof.wait()
	}
	return run, nil
}

// result assembles the report of a finished run.
func (s *runState) result(iv *intervals) *results.Run {
	cfg := s.cfg
	// An interrupted run measured only until the interrupt: rates are over
	// that time, not the planned window.
	// A generator that fell behind handed its last messages over after the
	// planned end: the window runs until then, so achieved_rate shows the
	// shortfall instead of crediting the plan.
	endNs, interrupted := max(s.endNs, s.lastSentNs.Load()), false
	if at := s.interruptedAt.Load(); at > 0 {
		interrupted = true
		endNs = min(endNs, at-1)
	}
	measured := max(0, float64(endNs-s.measureNs)/1e9)
	rate := func(n int64) float64 {
		if measured == 0 {
			return 0
		}
		return float64(n) / measured
	}
	res := results.Result{
		Label:            cfg.Label,
		StartedAt:        s.t0.Add(cfg.Warmup),
		DurationS:        measured,
		WarmupS:          cfg.Warmup.Seconds(),
		Interrupted:      interrupted,
		TargetRate:       cfg.Rate,
		AchievedRate:     rate(s.c.measuredAcked.Load()),
		ThroughputMBps:   rate(s.c.bytesAcked.Load()) / 1e6,
		MessageSize:      cfg.MessageSize,
		MessagesSent:     s.c.measuredSent.Load(),
		MessagesAcked:    s.c.measuredAcked.Load(),
		MessagesConsumed: s.c.measuredConsumed.Load(),
		Errors:           s.c.errors.Load(),
		MessagesRetried:  s.c.retried.Load(),
		Retries:          s.c.retries.Load(),
		ErrorMix:         s.c.mix.snapshot(),
		FirstError:       s.c.firstError(),
		SLA:              results.SLA{TargetP99Ms: float64(cfg.TargetP99) / 1e6},
		Workload:         cfg.workload(),
		Spread:           s.spread(),
		// What the run measured against; finish adds host and broker.
		Environment: results.Environment{ReplicationFactor: int(cfg.ReplicationFactor), MinISR: cfg.minISR,
			Partitions: int(cfg.Partitions), Acks: acksName(cfg.Acks), Compression: cfg.Compression.String()},
	}
	if lost := s.c.sent.Load() - s.c.acked.Load() - s.c.errors.Load(); lost > 0 {
		// Neither acked nor failed: count them, or a hung broker would pass.
		res.Errors += lost
		if res.FirstError == "" {
			res.FirstError = fmt.Sprintf("%d messages neither acknowledged nor failed", lost)
		}
	}
	run := &results.Run{Result: res, Ack: iv.ack, SendDelay: iv.send}
	if cfg.Consumers > 0 {
		run.E2E = iv.e2e
	}
	run.Finalize()
	if sd := run.Result.SendDelayMs.P99; sd > sendDelaySaturatedMs {
		run.Result.GeneratorSaturated = true
		run.Result.SaturationReason = fmt.Sprintf("send delay p99 %.2f ms > %.0f ms: the generator fell behind its schedule (CPU-bound, or blocked on its buffer limit by broker backpressure)", sd, sendDelaySaturatedMs)
	}
	return run
}

func (c Config) workload() map[string]string {
	w := map[string]string{
		"bootstrap": fmt.Sprint(c.Bootstrap), "topic": c.Topic,
		"partitions": strconv.Itoa(int(c.Partitions)), "replication_factor": strconv.Itoa(int(c.ReplicationFactor)),
		"rate": strconv.FormatFloat(c.Rate, 'f', -1, 64), "message_size": strconv.Itoa(c.MessageSize),
		"keys": strconv.Itoa(c.Keys), "random_keys": strconv.FormatBool(c.RandomKeys),
		"producers": strconv.Itoa(c.Producers), "consumers": strconv.Itoa(c.Consumers),
		"acks": acksName(c.Acks), "compression": c.Compression.String(), "linger": c.Linger.String(),
		"batch_bytes": strconv.Itoa(c.BatchBytes), "duration": c.Duration.String(),
		"warmup": c.Warmup.String(), "client": c.Client,
		// The retry policy decides what a faulty broker costs the run.
		"retry_backoff": c.RetryBackoff.String(), "retry_backoff_max": c.RetryBackoffMax.String(),
		"retries": strconv.Itoa(c.Retries), "delivery_timeout": c.DeliveryTimeout.String(),
	}
	w["key_distribution"] = keyDistribution(c.Keys, c.Partitions)
	if c.ConsumerGroups > 0 {
		w["consumer_groups"] = strconv.Itoa(c.ConsumerGroups)
	}
	if c.BacklogBytes > 0 {
		w["backlog_bytes"] = strconv.FormatInt(c.BacklogBytes, 10)
		w["backlog_drain_ratio"] = strconv.FormatFloat(c.drainRatio(), 'g', -1, 64)
	}
	if c.RandomPayloads > 0 {
		w["payload"] = fmt.Sprintf("%d random values, %.0f%% random bytes", c.RandomPayloads, 100*c.RandomBytesRatio)
	}
	if c.Payload != nil {
		w["payload"] = fmt.Sprintf("fixed (%d bytes given)", len(c.Payload))
	}
	for k, v := range c.WorkloadValues {
		w[k] = v
	}
	if c.clusterBrokers > 0 {
		w["cluster_brokers"] = strconv.Itoa(c.clusterBrokers)
	}
	// Only configs this run created the topic with (Run drops them for an
	// existing topic), e.g. min.insync.replicas, which acks=all depends on.
	for k, v := range c.TopicConfigs {
		w["topic_config."+k] = v
	}
	// Recorded because TLS changes what is measured; the password never is.
	if c.Security.TLSEnabled() {
		w["tls"] = "true"
		if c.Security.TLSCert != "" {
			w["tls_client_cert"] = "true"
		}
	}
	if m := c.Security.Mechanism(); m != "" {
		w["sasl_mechanism"] = m
		w["sasl_user"] = c.Security.SASLUser
	}
	return w
}

// keyDistribution names the workload's partitioning as reports label it.
func keyDistribution(keys int, partitions int32) string {
	if keys == 0 {
		return "sticky (null keys)"
	}
	return fmt.Sprintf("keyed over %d partitions", partitions)
}

// intervals swaps the recorders once a second, keeps the interval
// histograms and prints the progress line.
type intervals struct {
	st             *runState
	send           []*hdr.Histogram
	ack, e2e       []*hdr.Histogram
	sendRecs       []*recorder
	out            io.Writer
	ackTotal       *hdr.Histogram
	lastSent       int64
	lastAcked      int64
	lastBytesAcked int64
}

func newIntervals(st *runState, sendRecs []*recorder, out io.Writer) *intervals {
	if st.cfg.Quiet {
		out = nil
	}
	return &intervals{st: st, sendRecs: sendRecs, out: out, ackTotal: results.NewHistogram()}
}

func (iv *intervals) loop(stop <-chan struct{}) {
	last := int64(0)
	for k := int64(1); ; k++ {
		tick := k * int64(time.Second)
		select {
		case <-stop:
			iv.cut(last, iv.st.now())
			return
		case <-time.After(time.Duration(tick - iv.st.now())):
		}
		iv.cut(last, tick)
		last = tick
	}
}

// cut closes the interval [from, to) of the run clock.
func (iv *intervals) cut(from, to int64) {
	st := iv.st
	if to > st.measureNs {
		start, end := st.t0.Add(time.Duration(max(from, st.measureNs))), st.t0.Add(time.Duration(to))
		a := st.ack.swap(start, end)
		iv.ack = append(iv.ack, a)
		iv.ackTotal.Merge(a)
		iv.e2e = append(iv.e2e, st.e2e.swap(start, end))
		s := results.NewHistogram()
		for _, r := range iv.sendRecs {
			s.Merge(r.swap(start, end))
		}
		s.SetStartTimeMs(start.UnixMilli())
		s.SetEndTimeMs(end.UnixMilli())
		iv.send = append(iv.send, s)
	}
	if st.cfg.onInterval != nil {
		st.cfg.onInterval(iv.report(to))
	}
	if iv.out == nil {
		return
	}
	secs := float64(to-from) / 1e9
	if secs <= 0 {
		return
	}
	sent, acked := st.c.sent.Load(), st.c.acked.Load()
	phase := ""
	p99, ivP99, sd := "-", "-", "-"
	if to <= st.measureNs {
		phase = "  [warmup]"
	} else {
		p99 = fmt.Sprintf("%.2f", float64(iv.ackTotal.ValueAtQuantile(99))/1000)
		ivP99 = fmt.Sprintf("%.2f", float64(iv.ack[len(iv.ack)-1].ValueAtQuantile(99))/1000)
		sd = fmt.Sprintf("%.2f", float64(iv.send[len(iv.send)-1].ValueAtQuantile(99))/1000)
	}
	// Retries and the error mix only once there are any: a healthy run's
	// line stays short.
	retries := ""
	if mix := st.c.mix.snapshot(); mix != nil {
		retries = fmt.Sprintf("  retries %d (%s)", st.c.retries.Load(), results.FormatErrorMix(mix))
	}
	// Elapsed of the whole run (warm-up included), so a reader sees how
	// far along it is.
	fmt.Fprintf(iv.out, "%6.1fs of %.0fs  %8.0f msg/s sent  %8.0f msg/s acked  %7.1f MB/s  p99 %s ms (this second %s)  send-delay p99 %s ms  errors %d%s%s\n",
		float64(to)/1e9, (st.cfg.Warmup + st.cfg.Duration).Seconds(), float64(sent-iv.lastSent)/secs, float64(acked-iv.lastAcked)/secs,
		float64(acked-iv.lastAcked)*float64(st.cfg.MessageSize)/secs/1e6,
		p99, ivP99, sd, st.c.errors.Load(), retries, phase)
	iv.lastSent, iv.lastAcked = sent, acked
}
