package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ringlog/ringlog/coordinator/sink"
	"github.com/ringlog/ringlog/loadgen"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
	bolt "go.etcd.io/bbolt"
)

// `ringlog example offsets` runs the committed-offsets walkthrough for real:
// a broker it starts itself, a consumer group with manual commits, a
// consumer process killed between its database write and its commit, and
// two destinations that see the replay differently.

const (
	exTopic = "practice-events"
	exGroup = "practice-summary"
	exKey   = "session-7"
)

// Buckets of the practice database. The idempotent destination changes
// exIdem through sink.Apply; the naive one counts in exNaive in a plain
// transaction, without dedupe.
var (
	exIdem  = []byte("practice")
	exNaive = []byte("naive")
)

// exState is the practice database as the example prints it.
type exState struct {
	Rehearsals  int64 `json:"rehearsals"`
	Points      int64 `json:"points"`       // idempotent destination
	NaivePoints int64 `json:"naive_points"` // naive destination
	Reflections int64 `json:"reflections"`
}

func (s exState) String() string {
	return fmt.Sprintf("rehearsals=%d points=%d (naive counter: %d) reflections=%d",
		s.Rehearsals, s.Points, s.NaivePoints, s.Reflections)
}

// exResult is what the walkthrough ends with; the test checks it.
type exResult struct {
	Final            exState
	Committed        int64 // committed next offset at the end (OffsetFetch)
	FirstOffsets     []int64
	ResumedAt        int64 // first offset the restarted consumer received
	DuplicateSkipped bool  // the idempotent destination skipped the replay
}

func exampleCommand() *cli.Command {
	return &cli.Command{
		Name:  "example",
		Usage: "runnable walkthroughs",
		Subcommands: []*cli.Command{{
			Name:  "offsets",
			Usage: "committed offsets, a consumer crash between write and commit, and an idempotent destination",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "dir", Usage: "working directory (default: a new temporary one, removed at the end)"},
			},
			Action: func(c *cli.Context) error {
				_, err := runOffsetsExample(c.Context, c.String("dir"), os.Stdout)
				return err
			},
			Subcommands: []*cli.Command{{
				Name:   "consumer",
				Usage:  "(internal) one consumer process of the walkthrough",
				Hidden: true,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "broker", Required: true},
					&cli.StringFlag{Name: "db", Required: true},
					&cli.Int64Flag{Name: "stop-after", Value: -1, Usage: "exit after committing past this offset"},
					&cli.Int64Flag{Name: "crash-at", Value: -1, Usage: "after writing this offset's effect, report and wait to be killed (no commit)"},
				},
				Action: func(c *cli.Context) error {
					return runExampleConsumer(c.Context, c.String("broker"), c.String("db"), c.Int64("stop-after"), c.Int64("crash-at"), os.Stdout)
				},
			}},
		}},
	}
}

// exEvent is one line a consumer process prints (JSON), read by the parent.
type exEvent struct {
	Kind    string  `json:"kind"` // received, applied, committed, crash-point
	Offset  int64   `json:"offset"`
	Value   string  `json:"value,omitempty"`
	Applied *bool   `json:"applied,omitempty"` // idempotent destination ran the change
	State   exState `json:"state"`
}

func runOffsetsExample(ctx context.Context, dir string, out io.Writer) (*exResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "ringlog-example-offsets-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	// A broker of our own; groups rebalance without the 3 s initial delay
	// and __consumer_offsets is small, so the walkthrough runs in seconds.
	os.Setenv("RINGLOG_GROUP_INITIAL_REBALANCE_DELAY", "200ms")
	os.Setenv("RINGLOG_OFFSETS_TOPIC_PARTITIONS", "5")
	brokerLog, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		return nil, err
	}
	defer brokerLog.Close()
	br, err := loadgen.StartLocalBroker(bin, filepath.Join(dir, "broker"), brokerLog)
	if err != nil {
		return nil, fmt.Errorf("starting the broker (log: %s): %w", brokerLog.Name(), err)
	}
	defer br.Stop()
	say("broker: ringlog serve on %s (data in %s)", br.Addr, br.DataDir)

	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic(exTopic))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(cctx, 1, 1, nil, exTopic); err != nil {
		return nil, fmt.Errorf("creating %s: %w", exTopic, err)
	}
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("filler-%d", i)), Value: []byte("filler")})
	}
	for _, v := range []string{"completed rehearsal", "practice point", "saved reflection"} {
		recs = append(recs, &kgo.Record{Key: []byte(exKey), Value: []byte(v)})
	}
	if err := cl.ProduceSync(cctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("producing: %w", err)
	}
	say("topic %s: 40 filler records at offsets 0-39, then key %s at %d (%s), %d (%s), %d (%s)",
		exTopic, exKey, recs[40].Offset, recs[40].Value, recs[41].Offset, recs[41].Value, recs[42].Offset, recs[42].Value)

	// The group starts at 40: commit it explicitly.
	commit := kadm.Offsets{}
	commit.AddOffset(exTopic, 0, 40, -1)
	if resp, err := adm.CommitOffsets(cctx, exGroup, commit); err != nil || resp.Error() != nil {
		return nil, fmt.Errorf("committing 40: %v %v", err, resp.Error())
	}
	committed := func() (int64, error) {
		fo, err := adm.FetchOffsets(cctx, exGroup)
		if err != nil {
			return -1, err
		}
		if err := fo.Error(); err != nil {
			return -1, err
		}
		o, ok := fo.Lookup(exTopic, 0)
		if !ok {
			return -1, nil
		}
		return o.At, nil
	}
	at, err := committed()
	if err != nil {
		return nil, err
	}
	say("group %s: committed next offset %d (manual commits only)", exGroup, at)

	res := &exResult{ResumedAt: -1}
	db := filepath.Join(dir, "practice.db")
	step := func(title string, stopAfter, crashAt int64) ([]exEvent, error) {
		say("\n== %s", title)
		args := []string{"example", "offsets", "consumer", "--broker", br.Addr, "--db", db,
			"--stop-after", fmt.Sprint(stopAfter), "--crash-at", fmt.Sprint(crashAt)}
		cmd := exec.CommandContext(cctx, bin, args...)
		cmd.Stderr = brokerLog // client noise goes to the log file
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		say("consumer process %d joins group %s", cmd.Process.Pid, exGroup)
		var evs []exEvent
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev exEvent
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			evs = append(evs, ev)
			switch ev.Kind {
			case "received":
				say("  received offset %d: %s=%q", ev.Offset, exKey, ev.Value)
			case "applied":
				what := "applied"
				if ev.Applied != nil && !*ev.Applied {
					what = "idempotent destination SKIPPED it (event id already recorded); naive destination applied it again"
				}
				say("  offset %d written to the practice database: %s\n    database: %s", ev.Offset, what, ev.State)
			case "committed":
				say("  committed next offset %d", ev.Offset)
			case "crash-point":
				say("  offset %d is in the database but NOT committed: SIGKILL consumer process %d now", ev.Offset, cmd.Process.Pid)
				cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		werr := cmd.Wait()
		if crashAt >= 0 {
			var ee *exec.ExitError
			if !errors.As(werr, &ee) {
				return evs, fmt.Errorf("consumer was meant to be killed, exit: %v", werr)
			}
			say("  consumer process killed (%v)", werr)
			return evs, nil
		}
		return evs, werr
	}

	evs, err := step("offset 40: record a completed rehearsal, commit 41", 40, -1)
	if err != nil {
		return nil, err
	}
	for _, ev := range evs {
		if ev.Kind == "received" {
			res.FirstOffsets = append(res.FirstOffsets, ev.Offset)
		}
	}
	if _, err := step("offset 41: add a practice point, then the consumer dies before committing", -1, 41); err != nil {
		return nil, err
	}
	if at, err = committed(); err != nil {
		return nil, err
	}
	say("group %s: committed next offset is still %d", exGroup, at)

	evs, err = step("restart the group: it resumes at the committed offset", 42, -1)
	if err != nil {
		return nil, err
	}
	for _, ev := range evs {
		if ev.Kind == "received" && res.ResumedAt < 0 {
			res.ResumedAt = ev.Offset
		}
		if ev.Kind == "applied" && ev.Offset == 41 && ev.Applied != nil && !*ev.Applied {
			res.DuplicateSkipped = true
		}
	}
	if res.Committed, err = committed(); err != nil {
		return nil, err
	}
	if res.Final, err = readExState(db); err != nil {
		return nil, err
	}
	say("\n== result")
	say("OffsetFetch: group %s committed next offset %d on %s-0", exGroup, res.Committed, exTopic)
	say("practice database: %s", res.Final)
	say("offset 41 was delivered twice: the naive counter says %d points, the idempotent destination (sink.Apply, event id %s) says %d",
		res.Final.NaivePoints, sink.EventID(exTopic, 0, 41), res.Final.Points)
	return res, nil
}

// runExampleConsumer is one consumer process: it joins the group, and for
// each record writes its effect to both destinations, then commits the
// next offset (or, at crashAt, reports and waits to be killed).
func runExampleConsumer(ctx context.Context, broker, dbPath string, stopAfter, crashAt int64, out io.Writer) error {
	emit := func(ev exEvent) {
		b, _ := json.Marshal(ev)
		fmt.Fprintln(out, string(b))
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(broker),
		kgo.ConsumerGroup(exGroup),
		kgo.ConsumeTopics(exTopic),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6*time.Second),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	db, err := sink.Open(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consumer: %w", err)
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("consumer fetch %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		for _, r := range fs.Records() {
			emit(exEvent{Kind: "received", Offset: r.Offset, Value: string(r.Value)})
			applied, err := exApply(db, r)
			if err != nil {
				return err
			}
			st, err := exReadState(db.DB())
			if err != nil {
				return err
			}
			emit(exEvent{Kind: "applied", Offset: r.Offset, Applied: &applied, State: st})
			if r.Offset == crashAt {
				emit(exEvent{Kind: "crash-point", Offset: r.Offset, State: st})
				select {} // the parent kills us here, before any commit
			}
			if err := cl.CommitRecords(ctx, r); err != nil {
				return fmt.Errorf("commit %d: %w", r.Offset+1, err)
			}
			emit(exEvent{Kind: "committed", Offset: r.Offset + 1, State: st})
			if stopAfter >= 0 && r.Offset >= stopAfter {
				return nil
			}
		}
	}
}

// exApply writes one record's effect to both destinations: the naive one
// (a plain counter, in its own transaction, no dedupe) and the idempotent
// one (sink.Apply with the record's position as event id).
func exApply(s *sink.Sink, r *kgo.Record) (bool, error) {
	if string(r.Key) != exKey {
		return true, nil
	}
	var field string
	switch string(r.Value) {
	case "completed rehearsal":
		field = "rehearsals"
	case "practice point":
		field = "points"
		if err := s.DB().Update(func(tx *bolt.Tx) error { return exIncr(tx, exNaive, "points") }); err != nil {
			return false, err
		}
	case "saved reflection":
		field = "reflections"
	default:
		return true, nil
	}
	return s.Apply(sink.EventID(r.Topic, r.Partition, r.Offset), func(tx *bolt.Tx) error {
		return exIncr(tx, exIdem, field)
	})
}

func exIncr(tx *bolt.Tx, bucket []byte, key string) error {
	b, err := tx.CreateBucketIfNotExists(bucket)
	if err != nil {
		return err
	}
	var n uint64
	if v := b.Get([]byte(key)); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	return b.Put([]byte(key), binary.BigEndian.AppendUint64(nil, n+1))
}

func exReadState(db *bolt.DB) (exState, error) {
	var st exState
	err := db.View(func(tx *bolt.Tx) error {
		get := func(bucket []byte, key string) int64 {
			b := tx.Bucket(bucket)
			if b == nil {
				return 0
			}
			if v := b.Get([]byte(key)); len(v) == 8 {
				return int64(binary.BigEndian.Uint64(v))
			}
			return 0
		}
		st = exState{
			Rehearsals:  get(exIdem, "rehearsals"),
			Points:      get(exIdem, "points"),
			NaivePoints: get(exNaive, "points"),
			Reflections: get(exIdem, "reflections"),
		}
		return nil
	})
	return st, err
}

func readExState(path string) (exState, error) {
	s, err := sink.Open(path)
	if err != nil {
		return exState{}, err
	}
	defer s.Close()
	return exReadState(s.DB())
}
