package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
)

// `ringlog produce` and `ringlog consume`: records from stdin to a topic and
// back, with keys, headers, a partition, a starting point, a group and
// read_committed, so the quick starts need no other client.

func produceCommand() *cli.Command {
	return &cli.Command{
		Name:      "produce",
		Usage:     "produce one record per line of stdin (or --value) to a topic",
		ArgsUsage: "TOPIC",
		Flags: append(clientFlags(),
			&cli.StringFlag{Name: "key", Usage: "the key of every record"},
			&cli.StringFlag{Name: "key-separator", Usage: "split each line at the first SEP into key and value (e.g. ':')"},
			&cli.StringSliceFlag{Name: "header", Usage: "header key=value of every record (repeatable)"},
			&cli.IntFlag{Name: "partition", Value: -1, Usage: "the partition (-1: by key hash, keyless records spread)"},
			&cli.StringFlag{Name: "value", Usage: "produce this one record instead of reading stdin"},
			&cli.StringFlag{Name: "acks", Value: "all", Usage: "all | 1 | 0"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "how long a record may wait for its acknowledgement"},
		),
		Action: produceRecords,
	}
}

func produceRecords(c *cli.Context) error {
	topic := c.Args().First()
	if topic == "" || c.NArg() > 1 {
		return errors.New("usage: ringlog produce [--key K] [--header k=v]... [--partition P] TOPIC < lines")
	}
	hdrs, err := parseKVs("header", c.StringSlice("header"))
	if err != nil {
		return err
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(c.Duration("timeout")), kgo.ProducerLinger(5 * time.Millisecond)}
	switch c.String("acks") {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return fmt.Errorf("--acks %q: want all, 1 or 0", c.String("acks"))
	}
	p := c.Int("partition")
	if p >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := recordClient(c, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	record := func(line string) *kgo.Record {
		r := &kgo.Record{Value: []byte(line), Partition: int32(p)}
		if k := c.String("key"); c.IsSet("key") {
			r.Key = []byte(k)
		}
		if sep := c.String("key-separator"); sep != "" {
			if k, v, ok := strings.Cut(line, sep); ok {
				r.Key, r.Value = []byte(k), []byte(v)
			}
		}
		for k, v := range hdrs {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(*v)})
		}
		return r
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Acknowledgements arrive on the client's goroutines.
	var mu sync.Mutex
	var acked int
	var firstErr error
	promise := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if err == nil {
			acked++
		}
	}
	if c.IsSet("value") {
		cl.Produce(ctx, record(c.String("value")), promise)
	} else {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			cl.Produce(ctx, record(sc.Text()), promise)
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return opsError("produce to "+topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return opsError("produce to "+topic, firstErr)
	}
	fmt.Fprintf(c.App.ErrWriter, "produced %d records to %s\n", acked, topic)
	return nil
}

// recordClient is a kgo client with the connection flags and opts.
func recordClient(c *cli.Context, opts ...kgo.Opt) (*kgo.Client, error) {
	base, err := clientOpts(c)
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(append(base, opts...)...)
}

func consumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "consume",
		Usage:     "print a topic's records, one per line",
		ArgsUsage: "TOPIC",
		Flags: append(clientFlags(),
			&cli.StringFlag{Name: "from", Value: "start", Usage: "start | end | offset:N | timestamp:UNIX_MS (with --group: only where the group has no committed offset)"},
			&cli.IntFlag{Name: "partition", Value: -1, Usage: "read only this partition (-1: all)"},
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Usage: "stop after this many records (0: no limit)"},
			&cli.StringFlag{Name: "group", Usage: "consume as this consumer group and commit what was printed"},
			&cli.BoolFlag{Name: "read-committed", Usage: "skip records of open and aborted transactions"},
			&cli.StringFlag{Name: "print", Value: "%v\\n", Usage: "format of each record: %t topic, %p partition, %o offset, %k key, %v value, %h headers, %T timestamp (ms), \\n, \\t"},
			&cli.DurationFlag{Name: "idle", Usage: "stop once no record arrived for this long (0: wait for more until --count or Ctrl-C)"},
		),
		Action: consumeRecords,
	}
}

func consumeRecords(c *cli.Context) error {
	topic := c.Args().First()
	if topic == "" || c.NArg() > 1 {
		return errors.New("usage: ringlog consume [--from start|end|offset:N|timestamp:MS] [--count N] [--group G] TOPIC")
	}
	from := c.String("from")
	kind, arg, _ := strings.Cut(from, ":")
	var start kgo.Offset
	switch kind {
	case "start":
		start = kgo.NewOffset().AtStart()
	case "end":
		start = kgo.NewOffset().AtEnd()
	case "offset", "timestamp":
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("--from %q: want %s:N with N >= 0", from, kind)
		}
		if kind == "offset" {
			start = kgo.NewOffset().At(n)
		} else {
			start = kgo.NewOffset().AfterMilli(n)
		}
	default:
		return fmt.Errorf("--from %q: want start, end, offset:N or timestamp:UNIX_MS", from)
	}
	group, p := c.String("group"), c.Int("partition")
	if group != "" && p >= 0 {
		return errors.New("--partition and --group do not go together: a group's partitions are assigned")
	}
	var opts []kgo.Opt
	switch {
	case group != "":
		opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start), kgo.DisableAutoCommit())
	case p >= 0:
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {int32(p): start}}))
	default:
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start))
	}
	if c.Bool("read-committed") {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := recordClient(c, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	format := unescape(c.String("print"))
	limit, idle := c.Int("count"), c.Duration("idle")
	out := bufio.NewWriter(c.App.Writer)
	defer out.Flush()
	printed, first := 0, true
	for limit == 0 || printed < limit {
		pctx := ctx
		var cancel context.CancelFunc = func() {}
		if idle > 0 {
			// A group member has nothing to fetch until it has joined and
			// been assigned partitions: the first poll waits for that too.
			wait := idle
			if group != "" && printed == 0 && first {
				wait += groupJoinGrace
			}
			first = false
			pctx, cancel = context.WithTimeout(ctx, wait)
		}
		fs := cl.PollRecords(pctx, max(0, limit-printed))
		cancel()
		if ctx.Err() != nil || (idle > 0 && pctx.Err() != nil && fs.NumRecords() == 0) {
			break
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = opsError(fmt.Sprintf("consume %s partition %d", t, p), err)
			}
		})
		if ferr != nil {
			return ferr
		}
		var batch []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if limit == 0 || printed < limit {
				printRecord(out, format, r)
				printed++
				batch = append(batch, r)
			}
		})
		out.Flush()
		if group != "" && len(batch) > 0 {
			if err := cl.CommitRecords(ctx, batch...); err != nil {
				return opsError("commit offsets of "+group, err)
			}
		}
	}
	return nil
}

// groupJoinGrace is how long consume --idle waits, on top of --idle, for a
// group member's first assignment (a join and a sync, or a rebalance).
const groupJoinGrace = 10 * time.Second

// unescape turns the two escapes shells make awkward, \n and \t, into
// their characters.
func unescape(s string) string {
	return strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(s)
}

// printRecord writes r as format says.
func printRecord(w io.Writer, format string, r *kgo.Record) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 't':
			b.WriteString(r.Topic)
		case 'p':
			b.WriteString(strconv.Itoa(int(r.Partition)))
		case 'o':
			b.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'k':
			b.Write(r.Key)
		case 'v':
			b.Write(r.Value)
		case 'T':
			b.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'h':
			for j, h := range r.Headers {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(h.Key + "=" + string(h.Value))
			}
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	io.WriteString(w, b.String())
}
