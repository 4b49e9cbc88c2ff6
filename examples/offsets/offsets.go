// Package offsets is the committed-offsets walkthrough that `ringlog
// example offsets` runs for real: a broker it starts itself, a consumer
// group with manual commits, a consumer process killed between its
// database write and its commit, and two destinations that see the replay
// differently (a naive counter and sink.Apply).
//
// Run drives the walkthrough; each consumer is a child process of the
// ringlog binary (Config.Bin with Config.ConsumerArgs) that calls
// RunConsumer, so that SIGKILL hits a real process between its write and
// its commit.
package offsets

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

	"github.com/ringlog/ringlog/examples/sink"
	"github.com/ringlog/ringlog/loadgen"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	bolt "go.etcd.io/bbolt"
)

// The walkthrough's topic, consumer group and the key whose records change
// the practice database.
const (
	Topic = "practice-events"
	Group = "practice-summary"
	Key   = "session-7"
)

// Buckets of the practice database. The idempotent destination changes
// idemBucket through sink.Apply; the naive one counts in naiveBucket in a
// plain transaction, without dedupe.
var (
	idemBucket  = []byte("practice")
	naiveBucket = []byte("naive")
)

// State is the practice database as the example prints it.
type State struct {
	Rehearsals  int64 `json:"rehearsals"`
	Points      int64 `json:"points"`       // idempotent destination
	NaivePoints int64 `json:"naive_points"` // naive destination
	Reflections int64 `json:"reflections"`
}

func (s State) String() string {
	return fmt.Sprintf("rehearsals=%d points=%d (naive counter: %d) reflections=%d",
		s.Rehearsals, s.Points, s.NaivePoints, s.Reflections)
}

// Result is what the walkthrough ends with.
type Result struct {
	Final            State
	Committed        int64 // committed next offset at the end (OffsetFetch)
	FirstOffsets     []int64
	ResumedAt        int64 // first offset the restarted consumer received
	DuplicateSkipped bool  // the idempotent destination skipped the replay
}

// Config says where the walkthrough runs and how it starts its processes.
type Config struct {
	// Dir is the working directory (broker data, practice database, broker
	// log); "" means a new temporary one, removed at the end.
	Dir string
	// Bin is the ringlog binary: the broker runs as `Bin serve`, each
	// consumer as `Bin ConsumerArgs... --broker A --db D --stop-after N
	// --crash-at M`, which must call RunConsumer.
	Bin          string
	ConsumerArgs []string
}

// ConsumerConfig is one consumer process of the walkthrough.
type ConsumerConfig struct {
	Broker, DB string
	StopAfter  int64 // exit after committing past this offset (-1: never)
	CrashAt    int64 // after writing this offset's effect, report and wait to be killed, no commit (-1: never)
}

// event is one line a consumer process prints (JSON), read by the parent.
type event struct {
	Kind    string `json:"kind"` // received, applied, committed, crash-point
	Offset  int64  `json:"offset"`
	Value   string `json:"value,omitempty"`
	Applied *bool  `json:"applied,omitempty"` // idempotent destination ran the change
	State   State  `json:"state"`
}

// Run runs the walkthrough and narrates it to out.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	dir, bin := cfg.Dir, cfg.Bin
	if dir == "" {
		d, err := os.MkdirTemp("", "ringlog-example-offsets-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
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

	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic(Topic))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(cctx, 1, 1, nil, Topic); err != nil {
		return nil, fmt.Errorf("creating %s: %w", Topic, err)
	}
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("filler-%d", i)), Value: []byte("filler")})
	}
	for _, v := range []string{"completed rehearsal", "practice point", "saved reflection"} {
		recs = append(recs, &kgo.Record{Key: []byte(Key), Value: []byte(v)})
	}
	if err := cl.ProduceSync(cctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("producing: %w", err)
	}
	say("topic %s: 40 filler records at offsets 0-39, then key %s at %d (%s), %d (%s), %d (%s)",
		Topic, Key, recs[40].Offset, recs[40].Value, recs[41].Offset, recs[41].Value, recs[42].Offset, recs[42].Value)

	// The group starts at 40: commit it explicitly.
	commit := kadm.Offsets{}
	commit.AddOffset(Topic, 0, 40, -1)
	if resp, err := adm.CommitOffsets(cctx, Group, commit); err != nil || resp.Error() != nil {
		return nil, fmt.Errorf("committing 40: %v %v", err, resp.Error())
	}
	committed := func() (int64, error) {
		fo, err := adm.FetchOffsets(cctx, Group)
		if err != nil {
			return -1, err
		}
		if err := fo.Error(); err != nil {
			return -1, err
		}
		o, ok := fo.Lookup(Topic, 0)
		if !ok {
			return -1, nil
		}
		return o.At, nil
	}
	at, err := committed()
	if err != nil {
		return nil, err
	}
	say("group %s: committed next offset %d (manual commits only)", Group, at)

	res := &Result{ResumedAt: -1}
	db := filepath.Join(dir, "practice.db")
	step := func(title string, stopAfter, crashAt int64) ([]event, error) {
		say("\n== %s", title)
		args := append(append([]string(nil), cfg.ConsumerArgs...), "--broker", br.Addr, "--db", db,
			"--stop-after", fmt.Sprint(stopAfter), "--crash-at", fmt.Sprint(crashAt))
		cmd := exec.CommandContext(cctx, bin, args...)
		cmd.Stderr = brokerLog // client noise goes to the log file
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		say("consumer process %d joins group %s", cmd.Process.Pid, Group)
		var evs []event
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			evs = append(evs, ev)
			switch ev.Kind {
			case "received":
				say("  received offset %d: %s=%q", ev.Offset, Key, ev.Value)
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
	say("group %s: committed next offset is still %d", Group, at)

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
	if res.Final, err = ReadState(db); err != nil {
		return nil, err
	}
	say("\n== result")
	say("OffsetFetch: group %s committed next offset %d on %s-0", Group, res.Committed, Topic)
	say("practice database: %s", res.Final)
	say("offset 41 was delivered twice: the naive counter says %d points, the idempotent destination (sink.Apply, event id %s) says %d",
		res.Final.NaivePoints, sink.EventID(Topic, 0, 41), res.Final.Points)
	return res, nil
}

// RunConsumer is one consumer process: it joins the group, and for
// each record writes its effect to both destinations, then commits the
// next offset (or, at crashAt, reports and waits to be killed).
func RunConsumer(ctx context.Context, cfg ConsumerConfig, out io.Writer) error {
	broker, dbPath, stopAfter, crashAt := cfg.Broker, cfg.DB, cfg.StopAfter, cfg.CrashAt
	emit := func(ev event) {
		b, _ := json.Marshal(ev)
		fmt.Fprintln(out, string(b))
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(broker),
		kgo.ConsumerGroup(Group),
		kgo.ConsumeTopics(Topic),
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
			emit(event{Kind: "received", Offset: r.Offset, Value: string(r.Value)})
			applied, err := apply(db, r)
			if err != nil {
				return err
			}
			st, err := readState(db.DB())
			if err != nil {
				return err
			}
			emit(event{Kind: "applied", Offset: r.Offset, Applied: &applied, State: st})
			if r.Offset == crashAt {
				emit(event{Kind: "crash-point", Offset: r.Offset, State: st})
				select {} // the parent kills us here, before any commit
			}
			if err := cl.CommitRecords(ctx, r); err != nil {
				return fmt.Errorf("commit %d: %w", r.Offset+1, err)
			}
			emit(event{Kind: "committed", Offset: r.Offset + 1, State: st})
			if stopAfter >= 0 && r.Offset >= stopAfter {
				return nil
			}
		}
	}
}

// apply writes one record's effect to both destinations: the naive one
// (a plain counter, in its own transaction, no dedupe) and the idempotent
// one (sink.Apply with the record's position as event id).
func apply(s *sink.Sink, r *kgo.Record) (bool, error) {
	if string(r.Key) != Key {
		return true, nil
	}
	var field string
	switch string(r.Value) {
	case "completed rehearsal":
		field = "rehearsals"
	case "practice point":
		field = "points"
		if err := s.DB().Update(func(tx *bolt.Tx) error { return incr(tx, naiveBucket, "points") }); err != nil {
			return false, err
		}
	case "saved reflection":
		field = "reflections"
	default:
		return true, nil
	}
	return s.Apply(sink.EventID(r.Topic, r.Partition, r.Offset), func(tx *bolt.Tx) error {
		return incr(tx, idemBucket, field)
	})
}

func incr(tx *bolt.Tx, bucket []byte, key string) error {
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

func readState(db *bolt.DB) (State, error) {
	var st State
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
		st = State{
			Rehearsals:  get(idemBucket, "rehearsals"),
			Points:      get(idemBucket, "points"),
			NaivePoints: get(naiveBucket, "points"),
			Reflections: get(idemBucket, "reflections"),
		}
		return nil
	})
	return st, err
}

// ReadState reads the practice database at path.
func ReadState(path string) (State, error) {
	s, err := sink.Open(path)
	if err != nil {
		return State{}, err
	}
	defer s.Close()
	return readState(s.DB())
}
