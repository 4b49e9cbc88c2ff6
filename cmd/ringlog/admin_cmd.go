package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/ringlog/ringlog/controller/balance"
)

// `ringlog admin`: rebalance after brokers join, decommission a broker,
// and the reassignment operations behind them, all over the Kafka
// protocol (Metadata, AlterPartitionReassignments,
// ListPartitionReassignments, ElectLeaders, IncrementalAlterConfigs,
// UnregisterBroker), so they work through any broker and listener. The
// plan is computed here (controller/balance); the controller only
// executes reassignments.

// maxDecommissionRounds bounds decommission's re-planning: each round
// moves what landed on the broker during the previous one (there is no
// draining marker, so a topic created meanwhile may be placed on it).
const maxDecommissionRounds = 5

// defaultMaxMoves is Cruise Control's default for concurrent partition
// movements per broker: enough to keep a throttled copy busy, few enough
// that starting them, and moving their leaderships, are small events.
const defaultMaxMoves = 5

func moveFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Int64Flag{Name: "throttle", Usage: "replication throttle in bytes/s for the move (sets " + leaderThrottleRate + " and " + followerThrottleRate + " cluster-wide; removed when --wait sees the move complete)"},
		&cli.BoolFlag{Name: "wait", Usage: "wait for the reassignments to complete, then elect the preferred leaders of the moved partitions"},
		&cli.DurationFlag{Name: "timeout", Value: 30 * time.Minute, Usage: "how long --wait waits"},
		&cli.IntFlag{Name: "max-moves", Value: defaultMaxMoves, Usage: "with --wait: at most this many moves adding to, removing from or moving a leadership onto one broker at a time; each poll starts more as moves finish and elects the finished ones' preferred leaders (0: all at once)"},
	}
}

func planFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Usage: "print the plan and change nothing"},
		&cli.StringFlag{Name: "plan-out", Usage: "also write the plan as Kafka reassignment JSON to this file"},
	}
}

func adminFlags(extra ...[]cli.Flag) []cli.Flag {
	out := clientFlags()
	for _, e := range extra {
		out = append(out, e...)
	}
	return out
}

// withAdmin connects with the client flags and runs f with a context bound
// by --timeout (when the command has it) plus a margin for the requests
// around the wait.
func withAdmin(c *cli.Context, f func(ctx context.Context, a *adminConn, o moveOpts) error) error {
	adm, cl, err := adminClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	o := moveOpts{throttle: c.Int64("throttle"), wait: c.Bool("wait"), timeout: c.Duration("timeout"), maxMoves: c.Int("max-moves")}
	if o.throttle < 0 {
		return fmt.Errorf("--throttle %d: must be positive", o.throttle)
	}
	if o.maxMoves < 0 {
		return fmt.Errorf("--max-moves %d: must be 0 or more", o.maxMoves)
	}
	if o.timeout <= 0 {
		o.timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(c.Context, o.timeout+2*time.Minute)
	defer cancel()
	return f(ctx, &adminConn{adm: adm, cl: cl, out: c.App.Writer}, o)
}

func adminCommand() *cli.Command {
	return &cli.Command{
		Name:  "admin",
		Usage: "operate the cluster: rebalance, decommission, partition reassignments",
		Subcommands: []*cli.Command{
			{
				Name:  "rebalance",
				Usage: "move replicas so every live broker holds about as many replicas and preferred leaderships as the others (after brokers join)",
				Flags: adminFlags(planFlags(), moveFlags()),
				Action: func(c *cli.Context) error {
					return withAdmin(c, func(ctx context.Context, a *adminConn, o moveOpts) error {
						return a.rebalance(ctx, c.Bool("dry-run"), c.String("plan-out"), o)
					})
				},
			},
			{
				Name:  "decommission",
				Usage: "move every replica off a broker (refused when the others cannot hold the replication factor), optionally unregister it once stopped",
				Flags: adminFlags(planFlags(), moveFlags(), []cli.Flag{
					&cli.IntFlag{Name: "broker", Required: true, Usage: "the broker to empty"},
					&cli.BoolFlag{Name: "unregister", Usage: "after the move (implies --wait), wait for the broker to be stopped and unregister it"},
				}),
				Action: func(c *cli.Context) error {
					return withAdmin(c, func(ctx context.Context, a *adminConn, o moveOpts) error {
						return a.decommission(ctx, int32(c.Int("broker")), c.Bool("dry-run"), c.Bool("unregister"), c.String("plan-out"), o)
					})
				},
			},
			{
				Name:  "reassignments",
				Usage: "list the reassignments in progress (adding and removing replicas, and how much of the log the adding ones copied)",
				Flags: adminFlags([]cli.Flag{
					&cli.BoolFlag{Name: "verify", Usage: "when none is in progress, remove the replication throttle a move set (like Kafka's --verify)"},
				}),
				Action: func(c *cli.Context) error {
					return withAdmin(c, func(ctx context.Context, a *adminConn, _ moveOpts) error {
						return a.showReassignments(ctx, c.Bool("verify"))
					})
				},
			},
			{
				Name:  "cancel",
				Usage: "cancel reassignments in progress (all, a topic's, or one partition's): replicas go back to the original assignment",
				Flags: adminFlags([]cli.Flag{
					&cli.StringFlag{Name: "topic", Usage: "only this topic's reassignments"},
					&cli.IntFlag{Name: "partition", Value: -1, Usage: "only this partition (with --topic)"},
				}),
				Action: func(c *cli.Context) error {
					if c.Int("partition") >= 0 && c.String("topic") == "" {
						return errors.New("--partition needs --topic")
					}
					return withAdmin(c, func(ctx context.Context, a *adminConn, _ moveOpts) error {
						return a.cancel(ctx, c.String("topic"), int32(c.Int("partition")))
					})
				},
			},
			{
				Name:  "reassign",
				Usage: "apply a reassignment plan in Kafka's JSON format ({\"version\":1,\"partitions\":[{\"topic\",\"partition\",\"replicas\"}]})",
				Flags: adminFlags(moveFlags(), []cli.Flag{
					&cli.StringFlag{Name: "plan", Required: true, Usage: "the plan file"},
					&cli.BoolFlag{Name: "dry-run", Usage: "validate and print the plan, change nothing"},
				}),
				Action: func(c *cli.Context) error {
					return withAdmin(c, func(ctx context.Context, a *adminConn, o moveOpts) error {
						st, err := a.readCluster(ctx)
						if err != nil {
							return err
						}
						moves, err := readKafkaPlan(c.String("plan"), st)
						if err != nil {
							return err
						}
						for _, m := range moves {
							fmt.Fprintf(a.out, "%s-%d: %v -> %v\n", m.Topic, m.Index, m.From, m.To)
						}
						if c.Bool("dry-run") {
							fmt.Fprintln(a.out, "dry run: nothing changed")
							return nil
						}
						return a.apply(ctx, moves, o)
					})
				},
			},
			{
				Name:  "unregister",
				Usage: "remove a stopped broker that hosts no replicas from the cluster (UnregisterBroker)",
				Flags: adminFlags([]cli.Flag{
					&cli.IntFlag{Name: "broker", Required: true, Usage: "the broker to unregister"},
				}),
				Action: func(c *cli.Context) error {
					return withAdmin(c, func(ctx context.Context, a *adminConn, _ moveOpts) error {
						return a.unregister(ctx, int32(c.Int("broker")))
					})
				},
			},
		},
	}
}

// checkIdle refuses to plan while reassignments are in progress: Metadata
// then lists adding and removing replicas together, so a plan would count
// both. A dry run on a cluster without the reassignment APIs plans anyway.
func (a *adminConn) checkIdle(ctx context.Context, dryRun bool) error {
	ok, err := a.reassignSupported(ctx)
	if err != nil {
		return err
	}
	if !ok {
		if dryRun {
			return nil
		}
		return errReassignUnsupported
	}
	rs, err := a.listReassignments(ctx)
	if err != nil {
		return err
	}
	if len(rs) > 0 {
		return fmt.Errorf("%d reassignments are in progress (see `ringlog admin reassignments`): wait for them or `ringlog admin cancel`, then plan again", len(rs))
	}
	return nil
}

func (a *adminConn) rebalance(ctx context.Context, dryRun bool, planOut string, o moveOpts) error {
	if err := a.checkIdle(ctx, dryRun); err != nil {
		return err
	}
	st, err := a.readCluster(ctx)
	if err != nil {
		return err
	}
	pl, err := balance.Compute(st.brokers, st.parts)
	if err != nil {
		return err
	}
	printPlan(a.out, pl)
	if planOut != "" {
		if err := writeKafkaPlan(planOut, pl.Moves); err != nil {
			return err
		}
	}
	if dryRun {
		fmt.Fprintln(a.out, "dry run: nothing changed")
		return nil
	}
	return a.apply(ctx, pl.Moves, o)
}

// hosted counts the partitions whose replica list names broker.
func hosted(st clusterState, broker int32) int {
	n := 0
	for _, p := range st.parts {
		if slices.Contains(p.Replicas, broker) {
			n++
		}
	}
	return n
}

func (a *adminConn) decommission(ctx context.Context, broker int32, dryRun, unregister bool, planOut string, o moveOpts) error {
	if unregister {
		o.wait = true
	}
	if err := a.checkIdle(ctx, dryRun); err != nil {
		return err
	}
	for round := 0; ; round++ {
		st, err := a.readCluster(ctx)
		if err != nil {
			return err
		}
		n := hosted(st, broker)
		if !st.live[broker] && n == 0 && round == 0 && !unregister {
			return fmt.Errorf("broker %d is not live and hosts no replicas: nothing to decommission", broker)
		}
		if n == 0 {
			fmt.Fprintf(a.out, "broker %d hosts no replicas\n", broker)
			if dryRun {
				return nil
			}
			break
		}
		if round >= maxDecommissionRounds {
			return fmt.Errorf("broker %d still hosts %d replicas after %d rounds (new partitions keep landing on it; stop creating topics or retry)", broker, n, round)
		}
		if round > 0 {
			fmt.Fprintf(a.out, "broker %d got %d replicas while it was being emptied (no draining marker: new topics may land on it); planning again\n", broker, n)
		}
		brokers := slices.Clone(st.brokers)
		if i := slices.IndexFunc(brokers, func(b balance.Broker) bool { return b.ID == broker }); i >= 0 {
			brokers[i].Excluded = true
		} else {
			brokers = append(brokers, balance.Broker{ID: broker, Excluded: true})
		}
		pl, err := balance.Compute(brokers, st.parts)
		if err != nil {
			return fmt.Errorf("decommission broker %d: %w", broker, err)
		}
		printPlan(a.out, pl)
		if round == 0 && planOut != "" {
			if err := writeKafkaPlan(planOut, pl.Moves); err != nil {
				return err
			}
		}
		if dryRun {
			fmt.Fprintln(a.out, "dry run: nothing changed")
			return nil
		}
		if err := a.apply(ctx, pl.Moves, o); err != nil {
			return err
		}
		if !o.wait {
			fmt.Fprintf(a.out, "broker %d is being emptied; `ringlog admin reassignments` shows progress\n", broker)
			return nil
		}
	}
	if !unregister {
		return nil
	}
	return a.unregisterWhenStopped(ctx, broker, o.timeout)
}

// unregisterWhenStopped waits until broker leaves Metadata (Metadata lists
// only unfenced brokers, so it is stopped, or its session has expired),
// then unregisters it.
func (a *adminConn) unregisterWhenStopped(ctx context.Context, broker int32, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	said := false
	for {
		st, err := a.readCluster(ctx)
		if err != nil {
			return err
		}
		if !st.live[broker] {
			err := a.unregister(ctx, broker)
			if !errors.Is(err, kerr.InvalidRequest) {
				return err
			}
			// Still unfenced on the controller: a heartbeat sent just
			// before the process stopped can unfence it once more,
			// until its session expires.
			fmt.Fprintf(a.out, "%v; retrying\n", err)
		}
		if !said && st.live[broker] {
			fmt.Fprintf(a.out, "broker %d is empty; stop its process now: waiting up to %v for it to be fenced before unregistering\n", broker, timeout)
			said = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker %d still running after %v: stop it, then `ringlog admin unregister --broker %d`", broker, timeout, broker)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

func (a *adminConn) unregister(ctx context.Context, broker int32) error {
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = broker
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return fmt.Errorf("unregister broker %d: %w", broker, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return fmt.Errorf("unregister broker %d: %w%s", broker, err, msg)
	}
	fmt.Fprintf(a.out, "broker %d unregistered\n", broker)
	return nil
}

func (a *adminConn) showReassignments(ctx context.Context, verify bool) error {
	if err := a.requireReassign(ctx); err != nil {
		return err
	}
	rs, err := a.listReassignments(ctx)
	if err != nil {
		return err
	}
	if len(rs) == 0 {
		fmt.Fprintln(a.out, "no reassignments in progress")
		if verify {
			if err := a.setThrottle(ctx, 0); err != nil {
				return err
			}
			fmt.Fprintln(a.out, "replication throttle removed")
		}
		return nil
	}
	sizes := a.replicaSizes(ctx, rs)
	w := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tREPLICAS\tADDING\tREMOVING\tCOPIED (adding replica: bytes of the largest existing replica's)")
	for _, r := range rs {
		// The existing replicas' largest log is what an adding one copies
		// (DescribeLogDirs sizes; "?" where a broker did not answer).
		var full int64 = -1
		for _, b := range r.Replicas {
			if sz, ok := sizes[lagKey{r.Topic, r.Partition, b}]; ok && !slices.Contains(r.Adding, b) {
				full = max(full, sz)
			}
		}
		var prog []string
		for _, b := range r.Adding {
			sz, ok := sizes[lagKey{r.Topic, r.Partition, b}]
			switch {
			case !ok:
				prog = append(prog, fmt.Sprintf("%d:?", b))
			case full < 0:
				prog = append(prog, fmt.Sprintf("%d:%s", b, humanBytes(sz)))
			default:
				prog = append(prog, fmt.Sprintf("%d:%s/%s", b, humanBytes(sz), humanBytes(full)))
			}
		}
		fmt.Fprintf(w, "%s\t%d\t%v\t%v\t%v\t%s\n", r.Topic, r.Partition, r.Replicas, r.Adding, r.Removing, strings.Join(prog, " "))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if verify {
		fmt.Fprintf(a.out, "%d reassignments in progress: the throttle stays\n", len(rs))
	}
	return nil
}

type lagKey struct {
	topic     string
	partition int32
	broker    int32
}

// replicaSizes asks every broker for the log size of its replicas of the
// reassigning partitions (DescribeLogDirs); brokers that do not answer
// are left out.
func (a *adminConn) replicaSizes(ctx context.Context, rs []reassignment) map[lagKey]int64 {
	set := kadm.TopicsSet{}
	for _, r := range rs {
		set.Add(r.Topic, r.Partition)
	}
	out := map[lagKey]int64{}
	all, err := a.adm.DescribeAllLogDirs(ctx, set)
	if err != nil && len(all) == 0 {
		return out
	}
	for b, dirs := range all {
		dirs.EachPartition(func(p kadm.DescribedLogDirPartition) {
			out[lagKey{p.Topic, p.Partition, b}] += p.Size
		})
	}
	return out
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func (a *adminConn) cancel(ctx context.Context, topic string, partition int32) error {
	if err := a.requireReassign(ctx); err != nil {
		return err
	}
	rs, err := a.listReassignments(ctx)
	if err != nil {
		return err
	}
	var req kadm.AlterPartitionAssignmentsReq
	n := 0
	for _, r := range rs {
		if topic != "" && r.Topic != topic || partition >= 0 && r.Partition != partition {
			continue
		}
		req.CancelAssign(r.Topic, r.Partition)
		n++
	}
	if n == 0 {
		fmt.Fprintln(a.out, "no matching reassignment in progress")
		return nil
	}
	resps, err := a.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("cancel reassignments: %w", err)
	}
	failed := 0
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
			failed++
			fmt.Fprintf(a.out, "%s-%d: %v %s\n", r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d cancellations refused", failed, n)
	}
	fmt.Fprintf(a.out, "cancelled %d reassignments\n", n)
	return nil
}
