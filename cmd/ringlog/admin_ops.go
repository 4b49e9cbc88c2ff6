package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ringlog/ringlog/controller/balance"
)

// The cluster side of `ringlog admin`: reading the assignment through
// Metadata, applying moves with AlterPartitionReassignments, waiting with
// ListPartitionReassignments, and the throttle configs around a move.

// Throttle configs (Kafka's names); the broker throttles the replicas being
// added by a reassignment at these rates.
const (
	leaderThrottleRate   = "leader.replication.throttled.rate"
	followerThrottleRate = "follower.replication.throttled.rate"
)

// pollInterval is how often --wait asks for the reassignments still in
// progress: one small request per second costs the controller nothing and
// a move of real data takes seconds at least.
const pollInterval = time.Second

// errReassignUnsupported: the cluster does not serve the reassignment
// APIs (45/46), so nothing can be moved.
var errReassignUnsupported = errors.New("UNSUPPORTED_VERSION: the cluster does not serve AlterPartitionReassignments (45) / ListPartitionReassignments (46)")

// adminConn is one connected `ringlog admin` invocation.
type adminConn struct {
	adm *kadm.Client
	cl  *kgo.Client
	out io.Writer
}

// clusterState is the assignment as Metadata reports it.
type clusterState struct {
	brokers []balance.Broker // live brokers, by id
	parts   []balance.Partition
	live    map[int32]bool
}

// readCluster asks for every topic's assignment. It sends Metadata itself
// rather than through kadm.Metadata, which may answer from the client's
// cache (up to kgo's MetadataMinAge old): a decommission re-reads right
// after its moves complete and must see them.
func (a *adminConn) readCluster(ctx context.Context) (clusterState, error) {
	req := kmsg.NewPtrMetadataRequest() // null topics: all
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return clusterState{}, fmt.Errorf("metadata: %w", err)
	}
	st := clusterState{live: map[int32]bool{}}
	for _, b := range resp.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		st.brokers = append(st.brokers, balance.Broker{ID: b.NodeID, Rack: rack})
		st.live[b.NodeID] = true
	}
	sort.Slice(st.brokers, func(i, j int) bool { return st.brokers[i].ID < st.brokers[j].ID })
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return clusterState{}, fmt.Errorf("metadata of topic %q: %w", name, err)
		}
		for _, p := range t.Partitions {
			st.parts = append(st.parts, balance.Partition{Topic: name, Index: p.Partition, Replicas: slices.Clone(p.Replicas)})
		}
	}
	sort.Slice(st.parts, func(i, j int) bool {
		a, b := st.parts[i], st.parts[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Index < b.Index
	})
	return st, nil
}

// reassignSupported reports whether every live broker serves 45 and 46.
func (a *adminConn) reassignSupported(ctx context.Context) (bool, error) {
	vs, err := a.adm.ApiVersions(ctx)
	if err != nil {
		return false, err
	}
	ok := len(vs) > 0
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			ok = false
			return
		}
		for _, key := range []int16{45, 46} {
			if _, has := v.KeyMaxVersion(key); !has {
				ok = false
			}
		}
	})
	return ok, nil
}

func (a *adminConn) requireReassign(ctx context.Context) error {
	ok, err := a.reassignSupported(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errReassignUnsupported
	}
	return nil
}

// reassignment is one partition's reassignment in progress.
type reassignment struct {
	Topic                      string
	Partition                  int32
	Replicas, Adding, Removing []int32
}

// listReassignments returns every reassignment in progress (a null topic
// list asks for all, which kadm cannot send).
func (a *adminConn) listReassignments(ctx context.Context) ([]reassignment, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return nil, fmt.Errorf("list reassignments: %w%s", err, msg)
	}
	var out []reassignment
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, reassignment{Topic: t.Topic, Partition: p.Partition,
				Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out, nil
}

// moveOpts are the options shared by every command that moves replicas.
type moveOpts struct {
	throttle int64 // bytes/s; 0: none
	wait     bool
	timeout  time.Duration
	// maxMoves is how many moves may involve one broker at a time when
	// waiting (balance.NextWave); 0: all at once.
	maxMoves int
}

// setThrottle sets (rate > 0) or removes (rate 0) the cluster-default
// replication throttle.
func (a *adminConn) setThrottle(ctx context.Context, rate int64) error {
	var cfgs []kadm.AlterConfig
	for _, name := range []string{leaderThrottleRate, followerThrottleRate} {
		if rate > 0 {
			v := strconv.FormatInt(rate, 10)
			cfgs = append(cfgs, kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &v})
		} else {
			cfgs = append(cfgs, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name})
		}
	}
	resps, err := a.adm.AlterBrokerConfigs(ctx, cfgs)
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("replication throttle (%s, %s): %w", leaderThrottleRate, followerThrottleRate, err)
	}
	return nil
}

// apply submits moves and, with --wait, waits for them, removes the
// throttle and elects the preferred leaders of the moved partitions.
func (a *adminConn) apply(ctx context.Context, moves []balance.Move, o moveOpts) error {
	if len(moves) == 0 {
		fmt.Fprintln(a.out, "nothing to move")
		return nil
	}
	if err := a.requireReassign(ctx); err != nil {
		return err
	}
	if o.throttle > 0 {
		if err := a.setThrottle(ctx, o.throttle); err != nil {
			return err
		}
		fmt.Fprintf(a.out, "replication throttle set to %d bytes/s (%s, %s)\n", o.throttle, leaderThrottleRate, followerThrottleRate)
	}
	if o.wait && o.maxMoves > 0 {
		return a.applyPaced(ctx, moves, o)
	}
	if o.maxMoves > 0 && len(moves) > o.maxMoves {
		fmt.Fprintf(a.out, "--max-moves paces a move only with --wait: starting all %d at once\n", len(moves))
	}
	accepted, err := a.submit(ctx, moves)
	if err != nil {
		return err
	}
	failed := len(moves) - len(accepted)
	if failed == len(moves) && o.throttle > 0 {
		// Nothing moves: the throttle would only slow normal replication.
		if err := a.setThrottle(ctx, 0); err != nil {
			fmt.Fprintf(a.out, "removing the throttle: %v\n", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d reassignments refused (the others were started)", failed, len(moves))
	}
	fmt.Fprintf(a.out, "started %d reassignments\n", len(moves))
	if !o.wait {
		if o.throttle > 0 {
			fmt.Fprintln(a.out, "the throttle stays set until `ringlog admin reassignments --verify` finds no reassignment in progress")
		}
		return nil
	}
	if err := a.waitDone(ctx, o.timeout); err != nil {
		return err
	}
	if o.throttle > 0 {
		if err := a.setThrottle(ctx, 0); err != nil {
			return err
		}
		fmt.Fprintln(a.out, "replication throttle removed")
	}
	return a.electPreferred(ctx, moves)
}

// submit starts moves with AlterPartitionReassignments, prints the refused
// ones and returns the accepted ones.
func (a *adminConn) submit(ctx context.Context, moves []balance.Move) ([]balance.Move, error) {
	var req kadm.AlterPartitionAssignmentsReq
	for _, m := range moves {
		req.Assign(m.Topic, m.Index, m.To)
	}
	resps, err := a.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("alter partition reassignments: %w", err)
	}
	refused := map[topicPart]bool{}
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			refused[topicPart{r.Topic, r.Partition}] = true
			fmt.Fprintf(a.out, "%s-%d: %v %s\n", r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
	var ok []balance.Move
	for _, m := range moves {
		if !refused[topicPart{m.Topic, m.Index}] {
			ok = append(ok, m)
		}
	}
	return ok, nil
}

type topicPart struct {
	topic string
	part  int32
}

// pacedPoll is how often a paced move looks for finished moves: a slot
// left idle costs throughput, a request costs the controller little.
const pacedPoll = 500 * time.Millisecond

// applyPaced runs moves at most o.maxMoves per broker at a time (see
// balance/pace.go): it starts what fits, and each poll elects the
// preferred leaders of the moves that finished (at most o.maxMoves per
// poll, so leaderships move a few at a time too) and starts the next ones.
func (a *adminConn) applyPaced(ctx context.Context, moves []balance.Move, o moveOpts) error {
	deadline := time.Now().Add(o.timeout)
	pending := slices.Clone(moves)
	running := map[topicPart]balance.Move{}
	var toElect []balance.Move
	total, refused, elected, notYet := len(moves), 0, 0, 0
	fmt.Fprintf(a.out, "pacing %d moves: at most %d per broker at a time (--max-moves)\n", total, o.maxMoves)
	for {
		rs, err := a.listReassignments(ctx)
		if err != nil {
			return err
		}
		inProgress := map[topicPart]bool{}
		busy := balance.Busy{}
		for _, r := range rs {
			inProgress[topicPart{r.Topic, r.Partition}] = true
			busy.Add(r.Adding)
			busy.Add(r.Removing)
		}
		// In plan order, so elections follow the plan's order too.
		for _, m := range moves {
			k := topicPart{m.Topic, m.Index}
			if _, ok := running[k]; ok && !inProgress[k] {
				delete(running, k)
				toElect = append(toElect, m)
			}
		}
		if n := min(len(toElect), o.maxMoves); n > 0 {
			e, f, err := a.elect(ctx, toElect[:n])
			if err != nil {
				return err
			}
			elected, notYet, toElect = elected+e, notYet+f, toElect[n:]
		}
		if len(pending) == 0 && len(running) == 0 && len(toElect) == 0 {
			break
		}
		var wave []balance.Move
		wave, pending = balance.NextWave(pending, busy, o.maxMoves)
		if len(wave) > 0 {
			ok, err := a.submit(ctx, wave)
			if err != nil {
				return err
			}
			refused += len(wave) - len(ok)
			for _, m := range ok {
				running[topicPart{m.Topic, m.Index}] = m
			}
			fmt.Fprintf(a.out, "started %d reassignments (%d waiting, %d in progress)\n", len(ok), len(pending), len(running))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d reassignments in progress and %d not started after %v (those started continue; see `ringlog admin reassignments`)", len(running), len(pending), o.timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pacedPoll):
		}
	}
	fmt.Fprintln(a.out, "all reassignments complete")
	if o.throttle > 0 {
		if err := a.setThrottle(ctx, 0); err != nil {
			return err
		}
		fmt.Fprintln(a.out, "replication throttle removed")
	}
	a.printElected(elected, notYet)
	if refused > 0 {
		return fmt.Errorf("%d of %d reassignments refused (the others were done)", refused, total)
	}
	return nil
}

// waitDone polls until no reassignment is in progress, at most timeout.
func (a *adminConn) waitDone(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := -1
	for {
		rs, err := a.listReassignments(ctx)
		if err != nil {
			return err
		}
		if len(rs) == 0 {
			fmt.Fprintln(a.out, "all reassignments complete")
			return nil
		}
		if len(rs) != last {
			fmt.Fprintf(a.out, "%d reassignments in progress\n", len(rs))
			last = len(rs)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d reassignments still in progress after %v (they continue; see `ringlog admin reassignments`)", len(rs), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// electPreferred runs a preferred-leader election for the moved partitions
// so leadership follows the new preferred replicas now rather than at the
// controller's next periodic rebalance.
func (a *adminConn) electPreferred(ctx context.Context, moves []balance.Move) error {
	elected, failed, err := a.elect(ctx, moves)
	if err != nil {
		return err
	}
	a.printElected(elected, failed)
	return nil
}

// elect runs the preferred-leader election of moves' partitions and counts
// the partitions whose leader changed and those where it could not yet
// (printed one by one).
func (a *adminConn) elect(ctx context.Context, moves []balance.Move) (elected, failed int, err error) {
	set := kadm.TopicsSet{}
	for _, m := range moves {
		set.Add(m.Topic, m.Index)
	}
	rs, err := a.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		return 0, 0, fmt.Errorf("preferred leader election: %w", err)
	}
	for _, ps := range rs {
		for _, r := range ps {
			switch {
			case r.Err == nil:
				elected++
			case errors.Is(r.Err, kerr.ElectionNotNeeded):
			default:
				failed++
				fmt.Fprintf(a.out, "%s-%d: preferred leader election: %v %s\n", r.Topic, r.Partition, r.Err, r.ErrMessage)
			}
		}
	}
	return elected, failed, nil
}

func (a *adminConn) printElected(elected, failed int) {
	fmt.Fprintf(a.out, "preferred leaders elected: %d", elected)
	if failed > 0 {
		// Not fatal: the controller's periodic rebalance retries them.
		fmt.Fprintf(a.out, " (%d not yet possible; the controller retries them every --leader-rebalance-interval)", failed)
	}
	fmt.Fprintln(a.out)
}

// printPlan writes the moves and the per-broker summary.
func printPlan(w io.Writer, pl balance.Plan) {
	in, out := map[int32]int{}, map[int32]int{}
	for _, m := range pl.Moves {
		for _, b := range m.To {
			if !slices.Contains(m.From, b) {
				in[b]++
			}
		}
		for _, b := range m.From {
			if !slices.Contains(m.To, b) {
				out[b]++
			}
		}
		fmt.Fprintf(w, "%s-%d: %v -> %v\n", m.Topic, m.Index, m.From, m.To)
	}
	fmt.Fprint(w, pl.Summary())
	ids := make([]int32, 0, len(pl.After))
	for id := range pl.After {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if in[id] > 0 || out[id] > 0 {
			fmt.Fprintf(w, "broker %d: %d replicas in, %d out\n", id, in[id], out[id])
		}
	}
}

// kafkaPlan is Kafka's reassignment JSON (kafka-reassign-partitions.sh
// --reassignment-json-file), so plans move between the tools.
type kafkaPlan struct {
	Version    int                  `json:"version"`
	Partitions []kafkaPlanPartition `json:"partitions"`
}

type kafkaPlanPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// maxPlanBytes bounds a plan file: 1 MiB per ~20k partitions is plenty.
const maxPlanBytes = 64 << 20

// readKafkaPlan reads and validates a reassignment JSON file against the
// current assignment (every partition must exist; the replica list is
// checked by the controller as well).
func readKafkaPlan(path string, st clusterState) ([]balance.Move, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPlanBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPlanBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxPlanBytes)
	}
	var p kafkaPlan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: not a reassignment plan (want {\"version\":1,\"partitions\":[{\"topic\":...,\"partition\":...,\"replicas\":[...]}]}): %w", path, err)
	}
	if p.Version != 1 {
		return nil, fmt.Errorf("%s: version %d, want 1", path, p.Version)
	}
	if len(p.Partitions) == 0 {
		return nil, fmt.Errorf("%s: no partitions", path)
	}
	current := map[string][]int32{}
	for _, cp := range st.parts {
		current[fmt.Sprintf("%s-%d", cp.Topic, cp.Index)] = cp.Replicas
	}
	seen := map[string]bool{}
	var moves []balance.Move
	for i, pp := range p.Partitions {
		key := fmt.Sprintf("%s-%d", pp.Topic, pp.Partition)
		switch {
		case pp.Topic == "":
			return nil, fmt.Errorf("%s: entry %d has no topic", path, i)
		case seen[key]:
			return nil, fmt.Errorf("%s: %s listed twice", path, key)
		case len(pp.Replicas) == 0:
			return nil, fmt.Errorf("%s: %s has no replicas", path, key)
		case len(pp.LogDirs) > 0 && slices.ContainsFunc(pp.LogDirs, func(d string) bool { return d != "any" }):
			return nil, fmt.Errorf("%s: %s: log_dirs other than \"any\" are not supported (one data directory per broker)", path, key)
		}
		seen[key] = true
		for j, r := range pp.Replicas {
			if slices.Contains(pp.Replicas[:j], r) {
				return nil, fmt.Errorf("%s: %s lists broker %d twice", path, key, r)
			}
		}
		from, ok := current[key]
		if !ok {
			return nil, fmt.Errorf("%s: %s: no such partition", path, key)
		}
		moves = append(moves, balance.Move{Topic: pp.Topic, Index: pp.Partition, From: from, To: pp.Replicas})
	}
	return moves, nil
}

// writeKafkaPlan writes moves as Kafka's reassignment JSON.
func writeKafkaPlan(path string, moves []balance.Move) error {
	p := kafkaPlan{Version: 1, Partitions: []kafkaPlanPartition{}}
	for _, m := range moves {
		p.Partitions = append(p.Partitions, kafkaPlanPartition{Topic: m.Topic, Partition: m.Index, Replicas: m.To})
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
