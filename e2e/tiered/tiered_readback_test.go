package tiered

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readBackResult is what a full read of the log found against the acks.
type readBackResult struct {
	records  int64 // read
	acked    int64 // acknowledged records found, identical
	unacked  int   // records in the log whose produce was not acknowledged (failed or never answered)
	problems []string
	checkers map[int32]*partitionChecker
}

func (r *readBackResult) problem(format string, args ...any) {
	if len(r.problems) < 20 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	} else if len(r.problems) == 20 {
		r.problems = append(r.problems, "... (more)")
	}
}

// partitionChecker compares one partition's records, in the order read,
// with what was acknowledged: offsets contiguous from 0, each acknowledged
// offset holding the same key and value hash, no key twice, keys in
// produce order.
type partitionChecker struct {
	p       int32
	byOff   map[int64]ackRec
	next    int64
	lastSeq int64
	seen    map[uint64]bool
	found   int64
	// What the whole-log lookups are checked against (ListOffsets by
	// timestamp, OffsetForLeaderEpoch): the first offset of each leader
	// epoch, and sampled records with where their timestamp's run of
	// records began.
	epochs                 []epochStart
	lastTs, runStart, prev int64
	tsBackwards            bool
	tsSamples              []tsSample
}

type epochStart struct {
	epoch  int32
	offset int64
}

// tsSample: the record at offset has timestamp ts; the records stamped ts
// start at runStart, and the run before them at prevRun.
type tsSample struct {
	offset, ts, runStart, prevRun int64
}

// tsSampleEvery picks the records whose timestamps are looked up.
const tsSampleEvery = 10_000

// track notes a record's timestamp (ms; <0 unknown) and leader epoch.
func (c *partitionChecker) track(offset, ts int64, epoch int32) {
	if n := len(c.epochs); n == 0 || c.epochs[n-1].epoch != epoch {
		c.epochs = append(c.epochs, epochStart{epoch, offset})
	}
	if ts < 0 {
		return
	}
	switch {
	case ts < c.lastTs:
		c.tsBackwards = true
	case ts > c.lastTs || offset == 0:
		c.prev, c.runStart, c.lastTs = c.runStart, offset, ts
	}
	if offset%tsSampleEvery == tsSampleEvery/2 && !c.tsBackwards {
		c.tsSamples = append(c.tsSamples, tsSample{offset, ts, c.runStart, c.prev})
	}
}

// newPartitionChecker checks a read starting at from: acknowledged
// records below it are not expected.
func newPartitionChecker(p int32, from int64, acks []ackRec) *partitionChecker {
	m := make(map[int64]ackRec, len(acks))
	for _, a := range acks {
		if a.offset >= from {
			m[a.offset] = a
		}
	}
	return &partitionChecker{p: p, byOff: m, next: from, lastSeq: -1, seen: map[uint64]bool{}}
}

func (c *partitionChecker) check(res *readBackResult, offset int64, key, value []byte, valueSize int) {
	res.records++
	if offset != c.next {
		res.problem("p%d: offset %d read after %d (gap or reorder)", c.p, offset, c.next-1)
	}
	c.next = offset + 1
	seq, ok := parseTieredKey(key)
	if !ok {
		res.problem("p%d@%d: foreign key %q", c.p, offset, key)
		return
	}
	if c.seen[seq] {
		res.problem("p%d@%d: key %s duplicated", c.p, offset, key)
	}
	c.seen[seq] = true
	if int64(seq) < c.lastSeq {
		res.problem("p%d@%d: key %s after seq %d: order not kept", c.p, offset, key, c.lastSeq)
	}
	c.lastSeq = int64(seq)
	a, wasAcked := c.byOff[offset]
	if !wasAcked {
		res.unacked++
		// Not acknowledged, yet it must still be the value of its key.
		if len(value) != valueSize || valueHash(value) != valueHash(tieredValue(seq, valueSize)) {
			res.problem("p%d@%d: unacknowledged record %s has a value that was never produced", c.p, offset, key)
		}
		return
	}
	if a.seq != seq {
		res.problem("p%d@%d: acknowledged key k%011d, read %s", c.p, offset, a.seq, key)
		return
	}
	if valueHash(value) != a.hash {
		res.problem("p%d@%d: value of %s differs from the acknowledged one (%d bytes read)", c.p, offset, key, len(value))
		return
	}
	c.found++
	res.acked++
}

// finish reports acknowledged records never read.
func (c *partitionChecker) finish(res *readBackResult) {
	if int64(len(c.byOff)) == c.found {
		return
	}
	missing := 0
	var first int64 = -1
	for off := range c.byOff {
		if off >= c.next {
			missing++
			if first < 0 || off < first {
				first = off
			}
		}
	}
	res.problem("p%d: %d acknowledged records not read (%d found of %d; %d past the read end %d, first %d)", c.p, int64(len(c.byOff))-c.found, c.found, len(c.byOff), missing, c.next, first)
}

// readBackAll consumes the topic from offset from to ends with a fresh
// franz-go client and checks every partition against the acks.
func readBackAll(ctx context.Context, seeds []string, topic string, from int64, ends map[int32]int64, acks map[int32][]ackRec, valueSize int) (*readBackResult, error) {
	offs := map[int32]kgo.Offset{}
	checkers := map[int32]*partitionChecker{}
	for p := range ends {
		offs[p] = kgo.NewOffset().At(from)
		checkers[p] = newPartitionChecker(p, from, acks[p])
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxBytes(32<<20), kgo.FetchMaxPartitionBytes(8<<20),
		// A remote read error must surface, not be retried silently.
		kgo.KeepRetryableFetchErrors())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	res := &readBackResult{checkers: checkers}
	done := func() bool {
		for p, e := range ends {
			if checkers[p].next < e {
				return false
			}
		}
		return true
	}
	lastErr := map[int32]error{}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var at []string
			for p, e := range ends {
				at = append(at, fmt.Sprintf("p%d %d/%d (last error %v)", p, checkers[p].next, e, lastErr[p]))
			}
			sort.Strings(at)
			return res, fmt.Errorf("read-back stuck: %s", strings.Join(at, ", "))
		}
		fs.EachError(func(_ string, p int32, err error) { lastErr[p] = err })
		fs.EachRecord(func(r *kgo.Record) {
			if c := checkers[r.Partition]; c != nil && r.Offset < ends[r.Partition] {
				c.track(r.Offset, r.Timestamp.UnixMilli(), r.LeaderEpoch)
				c.check(res, r.Offset, r.Key, r.Value, valueSize)
			}
		})
	}
	for _, c := range checkers {
		c.finish(res)
	}
	return res, nil
}

// readBackKcat reads one partition from offset 0 to end with kcat
// (librdkafka) and checks it like readBackAll. Values are read by length
// (%S), so binary values with newlines parse.
func readBackKcat(ctx context.Context, addr, topic string, p int32, end int64, acks []ackRec, valueSize int) (*readBackResult, error) {
	cmd := exec.CommandContext(ctx, "/usr/bin/kcat", "-C", "-b", addr, "-t", topic, "-p", strconv.Itoa(int(p)),
		"-o", "beginning", "-c", strconv.FormatInt(end, 10), "-e", "-f", "%o %k %S %s\n")
	var stderr harness.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	res := &readBackResult{}
	c := newPartitionChecker(p, 0, acks)
	br := bufio.NewReaderSize(stdout, 1<<20)
	var perr error
	for c.next < end {
		off, err1 := readField(br)
		key, err2 := readFieldString(br)
		size, err3 := readField(br)
		if err := errors.Join(err1, err2, err3); err != nil {
			perr = fmt.Errorf("kcat output at offset %d: %v", c.next, err)
			break
		}
		if size < 0 || size > 1<<20 {
			perr = fmt.Errorf("kcat: value size %d at offset %d", size, off)
			break
		}
		v := make([]byte, size+1) // the value and its newline
		if _, err := io.ReadFull(br, v); err != nil {
			perr = fmt.Errorf("kcat value at offset %d: %v", off, err)
			break
		}
		c.check(res, off, []byte(key), v[:size], valueSize)
	}
	io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	c.finish(res)
	if perr != nil {
		return res, fmt.Errorf("%v (kcat: %v; stderr: %.2000s)", perr, werr, stderr.String())
	}
	if c.next < end {
		return res, fmt.Errorf("kcat read to %d of %d: %v; stderr: %.2000s", c.next, end, werr, stderr.String())
	}
	return res, nil
}

// readFieldString reads up to the next space (dropped).
func readFieldString(br *bufio.Reader) (string, error) {
	f, err := br.ReadString(' ')
	if err != nil {
		return "", err
	}
	if len(f) > 64 {
		return "", fmt.Errorf("field %.64q too long", f)
	}
	return strings.TrimSuffix(f, " "), nil
}

// readField reads a decimal field up to the next space.
func readField(br *bufio.Reader) (int64, error) {
	f, err := readFieldString(br)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(f, 10, 64)
}
