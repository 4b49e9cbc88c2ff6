package tiered

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/tiered/s3test"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	s3BinOnce sync.Once
	s3BinPath string
	s3BinErr  error
)

// s3Binary builds tiered/s3test/cmd/s3test once per test process.
func s3Binary(t *testing.T) string {
	t.Helper()
	s3BinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ringlog-s3test-")
		if err != nil {
			s3BinErr = err
			return
		}
		s3BinPath = filepath.Join(dir, "s3test")
		out, err := exec.Command("go", "build", "-o", s3BinPath, "github.com/ringlog/ringlog/tiered/s3test/cmd/s3test").CombinedOutput()
		if err != nil {
			s3BinErr = fmt.Errorf("building s3test: %v\n%s", err, out)
		}
	})
	if s3BinErr != nil {
		t.Fatal(s3BinErr)
	}
	return s3BinPath
}

// s3Proc is the test S3 server running as its own process over a data
// directory that outlives it: kill and restart on the same address keep
// every object.
type s3Proc struct {
	t      *testing.T
	bin    string
	dir    string
	addr   string // host:port, fixed after the first start
	ready  s3test.Ready
	cmd    *exec.Cmd
	out    *harness.SyncBuffer
	exited chan struct{}
	paused bool
}

func startS3(t *testing.T) *s3Proc {
	t.Helper()
	dir := t.TempDir()
	// RINGLOG_TIERED_S3_DIR puts the server's objects elsewhere (a tmpfs,
	// to take its disk writes off the brokers' disk in the benchmark).
	if base := os.Getenv("RINGLOG_TIERED_S3_DIR"); base != "" {
		d, err := os.MkdirTemp(base, "s3-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	s := &s3Proc{t: t, bin: s3Binary(t), dir: dir, addr: "127.0.0.1:0"}
	s.launch()
	t.Cleanup(func() {
		if s.paused {
			s.cmd.Process.Signal(syscall.SIGCONT)
		}
		s.kill()
	})
	return s
}

// launch starts the server and waits for its ready line (20 s).
func (s *s3Proc) launch() {
	s.t.Helper()
	if !s.tryLaunch() {
		s.t.Fatalf("s3test did not start on %s:\n%s", s.addr, s.out.String())
	}
}

// pause freezes the server (SIGSTOP): connections are accepted by the
// kernel and never answered, the nastier kind of outage.
func (s *s3Proc) pause() {
	s.cmd.Process.Signal(syscall.SIGSTOP)
	s.paused = true
}

// resume continues a paused server.
func (s *s3Proc) resume() {
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.paused = false
}

// kill ends the server (SIGKILL): connections are refused.
func (s *s3Proc) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	if s.paused {
		s.cmd.Process.Signal(syscall.SIGCONT)
		s.paused = false
	}
	<-s.exited
}

// restart starts the server again on the same address and directory.
func (s *s3Proc) restart() {
	s.t.Helper()
	s.kill()
	// The kernel may keep the port a moment after the kill; retry.
	harness.Eventually(s.t, 10*time.Second, "s3test restarts on "+s.addr, func() (bool, string) {
		return s.tryLaunch(), s.out.String()
	})
}

// tryLaunch starts the server and waits for its ready line; false when
// it exits first (the port may still be held) or is not ready in 20 s.
func (s *s3Proc) tryLaunch() bool {
	out := &harness.SyncBuffer{}
	s.out = out
	cmd := exec.Command(s.bin, "-addr", s.addr, "-dir", s.dir)
	cmd.Stderr = out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return false
	}
	if err := cmd.Start(); err != nil {
		return false
	}
	exited := make(chan struct{})
	readyc := make(chan s3test.Ready, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			out.Write([]byte(line + "\n"))
			if r, ok := s3test.ParseReady(line); ok && !sent {
				readyc <- r
				sent = true
			}
		}
	}()
	go func() {
		cmd.Wait()
		close(exited)
	}()
	select {
	case r := <-readyc:
		s.cmd, s.exited = cmd, exited
		s.ready, s.addr = r, r.Endpoint
		return true
	case <-exited:
		return false
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-exited
		return false
	}
}

// brokerFlags are the serve flags that point a broker at this server.
func (s *s3Proc) brokerFlags() []string {
	return []string{
		"--object-store-endpoint", s.ready.Endpoint,
		"--object-store-bucket", s.ready.Bucket,
		"--object-store-access-key", s.ready.AccessKey,
		"--object-store-secret-key", s.ready.SecretKey,
	}
}

// bucketDir is where the server keeps the bucket's objects (one file per
// object, named by the escaped key; see tiered/s3test/dirbackend.go).
func (s *s3Proc) bucketDir() string {
	return filepath.Join(s.dir, url.PathEscape(s.ready.Bucket))
}

type s3Object struct {
	key  string
	size int64 // file size (data plus a small header)
}

// objects lists the bucket's objects whose key starts with prefix.
func (s *s3Proc) objects(prefix string) ([]s3Object, error) {
	ents, err := os.ReadDir(s.bucketDir())
	if err != nil {
		return nil, err
	}
	var out []s3Object
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".obj") {
			continue
		}
		k, err := url.PathUnescape(strings.TrimSuffix(n, ".obj"))
		if err != nil || !strings.HasPrefix(k, prefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, s3Object{key: k, size: info.Size()})
	}
	return out, nil
}

// objectPath is the file of one object key.
func (s *s3Proc) objectPath(key string) string {
	return filepath.Join(s.bucketDir(), url.PathEscape(key)+".obj")
}

// corruptObject replaces an object's data with n bytes of garbage,
// keeping the server's file format valid (data, JSON header, header
// length) so the server serves the garbage instead of failing.
func (s *s3Proc) corruptObject(key string, n int) error {
	path := s.objectPath(key)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(b) < 4 {
		return fmt.Errorf("%s: too short", path)
	}
	hl := int(binary.BigEndian.Uint32(b[len(b)-4:]))
	if hl > len(b)-4 {
		return fmt.Errorf("%s: bad header length %d", path, hl)
	}
	var h map[string]any
	if err := json.Unmarshal(b[len(b)-4-hl:len(b)-4], &h); err != nil {
		return err
	}
	garbage := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(garbage)
	h["size"] = n
	h["md5"] = nil // the server only echoes it as an ETag
	hb, err := json.Marshal(h)
	if err != nil {
		return err
	}
	out := append(garbage, hb...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(hb)))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

type remoteSegJSON struct {
	ID           string `json:"id"`
	BaseOffset   int64  `json:"base_offset"`
	NextOffset   int64  `json:"next_offset"`
	SizeBytes    int64  `json:"size_bytes"`
	LeaderEpoch  int32  `json:"leader_epoch"`
	MaxTimestamp int64  `json:"max_timestamp"`
}

type remotePartJSON struct {
	Partition      int32           `json:"partition"`
	RemoteLogStart int64           `json:"remote_log_start"`
	RemoteEnd      int64           `json:"remote_end"`
	LocalLogStart  int64           `json:"local_log_start"`
	Segments       []remoteSegJSON `json:"segments"`
}

type remoteTopicJSON struct {
	Topic      string           `json:"topic"`
	TopicID    string           `json:"topic_id"`
	Partitions []remotePartJSON `json:"partitions"`
}

func (r remoteTopicJSON) part(p int32) (remotePartJSON, bool) {
	for _, rp := range r.Partitions {
		if rp.Partition == p {
			return rp, true
		}
	}
	return remotePartJSON{}, false
}

// remoteState asks a broker's admin listener for a topic's remote
// segments: GET /v1/remote/segments?topic=NAME.
func remoteState(admin, topic string) (remoteTopicJSON, error) {
	var out remoteTopicJSON
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + admin + "/v1/remote/segments?topic=" + url.QueryEscape(topic))
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return out, err
	}
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("/v1/remote/segments: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, fmt.Errorf("/v1/remote/segments: %v: %.200s", err, body)
	}
	return out, nil
}

// checkRemoteCoverage checks one partition's committed segments: sorted
// by base offset they must cover [remote_log_start, remote_end) with no
// gap, each must add offsets past the ones before (no range committed
// twice), and a segment overlapping the one before must come from a later
// leader epoch (a new leader's boundaries differ from the old one's).
// It returns the number of such overlaps and the offsets they repeat.
func checkRemoteCoverage(rp remotePartJSON) (overlaps int, overlapOffsets int64, err error) {
	segs := slices.Clone(rp.Segments)
	sort.Slice(segs, func(i, j int) bool {
		if segs[i].BaseOffset != segs[j].BaseOffset {
			return segs[i].BaseOffset < segs[j].BaseOffset
		}
		return segs[i].NextOffset < segs[j].NextOffset
	})
	if len(segs) == 0 {
		if rp.RemoteEnd > 0 && rp.RemoteEnd > rp.RemoteLogStart {
			return 0, 0, fmt.Errorf("p%d: no segments but remote [%d, %d)", rp.Partition, rp.RemoteLogStart, rp.RemoteEnd)
		}
		return 0, 0, nil
	}
	// Expired segments (wholly below the log start) may still be listed.
	var live []remoteSegJSON
	for _, s := range segs {
		if s.BaseOffset >= s.NextOffset {
			return 0, 0, fmt.Errorf("p%d: segment %s has range [%d, %d)", rp.Partition, s.ID, s.BaseOffset, s.NextOffset)
		}
		if s.NextOffset > rp.RemoteLogStart {
			live = append(live, s)
		}
	}
	if len(live) == 0 {
		return 0, 0, fmt.Errorf("p%d: no live segment in [%d, %d)", rp.Partition, rp.RemoteLogStart, rp.RemoteEnd)
	}
	if live[0].BaseOffset > rp.RemoteLogStart {
		return 0, 0, fmt.Errorf("p%d: gap [%d, %d) at the remote log start", rp.Partition, rp.RemoteLogStart, live[0].BaseOffset)
	}
	end := live[0].NextOffset
	prev := live[0]
	for _, s := range live[1:] {
		switch {
		case s.BaseOffset > end:
			return overlaps, overlapOffsets, fmt.Errorf("p%d: gap [%d, %d) between segment %s and %s", rp.Partition, end, s.BaseOffset, prev.ID, s.ID)
		case s.NextOffset <= end:
			return overlaps, overlapOffsets, fmt.Errorf("p%d: segment %s [%d, %d) committed twice: already covered up to %d (by %s [%d, %d))",
				rp.Partition, s.ID, s.BaseOffset, s.NextOffset, end, prev.ID, prev.BaseOffset, prev.NextOffset)
		case s.BaseOffset < end:
			if s.LeaderEpoch <= prev.LeaderEpoch {
				return overlaps, overlapOffsets, fmt.Errorf("p%d: segment %s [%d, %d) epoch %d overlaps %s [%d, %d) epoch %d without a leader change",
					rp.Partition, s.ID, s.BaseOffset, s.NextOffset, s.LeaderEpoch, prev.ID, prev.BaseOffset, prev.NextOffset, prev.LeaderEpoch)
			}
			overlaps++
			overlapOffsets += end - s.BaseOffset
		}
		end = s.NextOffset
		prev = s
	}
	if end != rp.RemoteEnd {
		return overlaps, overlapOffsets, fmt.Errorf("p%d: segments end at %d, remote_end is %d", rp.Partition, end, rp.RemoteEnd)
	}
	return overlaps, overlapOffsets, nil
}

// scrapeMetrics reads a broker's /metrics into series -> value.
func scrapeMetrics(admin string) (map[string]float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// metricSum sums the series of one metric name on a broker (0 when the
// broker does not answer or lacks it).
func metricSum(b *harness.BrokerProc, name string, fragments ...string) float64 {
	m, err := scrapeMetrics(b.Admin)
	if err != nil {
		return 0
	}
	v, _ := harness.SumSeries(m, name, fragments...)
	return v
}

// topicDiskBytes is the disk space (allocated blocks) of a topic's
// partition directories under a broker's data directory.
func topicDiskBytes(dataDir, topic string) int64 {
	var n int64
	dirs, _ := filepath.Glob(filepath.Join(dataDir, topic+"-*"))
	for _, d := range dirs {
		filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			info, err := e.Info()
			if err != nil {
				return nil
			}
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			} else {
				n += info.Size()
			}
			return nil
		})
	}
	return n
}

// newestSegmentBase is the base offset of the newest .log file of a
// partition on a broker (-1: none): the active segment, never uploaded.
func newestSegmentBase(dataDir, topic string, p int32) int64 {
	logs, _ := filepath.Glob(filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, p), "*.log"))
	best := int64(-1)
	for _, l := range logs {
		if v, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(l), ".log"), 10, 64); err == nil && v > best {
			best = v
		}
	}
	return best
}

// tieredValue is the value of record seq: valueSize bytes from a
// generator seeded by seq, incompressible (bytes on disk are real bytes)
// and reproducible for the byte-for-byte read-back.
func tieredValue(seq uint64, size int) []byte {
	v := make([]byte, size)
	r := rand.NewChaCha8([32]byte{0: byte(seq), 1: byte(seq >> 8), 2: byte(seq >> 16), 3: byte(seq >> 24), 4: byte(seq >> 32), 5: byte(seq >> 40), 31: 0x21})
	r.Read(v)
	return v
}

func tieredKey(seq uint64) []byte { return []byte(fmt.Sprintf("k%011d", seq)) }

func parseTieredKey(k []byte) (uint64, bool) {
	if len(k) != 12 || k[0] != 'k' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(k[1:]), 10, 64)
	return v, err == nil
}

var valueSeed = maphash.MakeSeed()

func valueHash(v []byte) uint64 { return maphash.Bytes(valueSeed, v) }

// ackRec is one acknowledged record.
type ackRec struct {
	offset int64
	seq    uint64
	hash   uint64
}

// ackLat is one acknowledgement: when it came and how long the record
// took from Produce to its promise.
type ackLat struct {
	at  int64 // unix nanoseconds
	lat int32 // microseconds
}

// tieredLoad produces keyed records with acks=all through an idempotent
// franz-go client, paced to a byte rate, and records every acknowledged
// record and its latency.
type tieredLoad struct {
	valueSize int
	mu        sync.Mutex
	acks      map[int32][]ackRec
	lats      []ackLat
	errs      int
	lastErr   error
	produced  atomic.Uint64 // records handed to Produce
	acked     atomic.Int64  // records acknowledged
	ackedB    atomic.Int64  // value bytes acknowledged
	start     time.Time
	end       time.Time
	done      chan struct{}
}

// runTieredLoad starts producing total bytes of valueSize-byte values at
// rate bytes/s (0: as fast as the brokers take them) in the background,
// keys numbered from firstSeq (loads on one topic must not overlap).
func runTieredLoad(t *testing.T, ctx context.Context, seeds []string, topic string, firstSeq uint64, total int64, valueSize int, rate float64) *tieredLoad {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Incompressible values, no codec: the log holds what we count.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(4096),
		kgo.ProduceRequestTimeout(10*time.Second),
		kgo.MetadataMinAge(200*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
	if err != nil {
		t.Fatal(err)
	}
	l := &tieredLoad{valueSize: valueSize, acks: map[int32][]ackRec{}, start: time.Now(), done: make(chan struct{})}
	n := uint64(total / int64(valueSize))
	go func() {
		defer close(l.done)
		defer cl.Close()
		var perRecord time.Duration
		if rate > 0 {
			perRecord = time.Duration(float64(time.Second) * float64(valueSize) / rate)
		}
		for i := uint64(0); i < n && ctx.Err() == nil; i++ {
			seq := firstSeq + i
			if perRecord > 0 && i%64 == 0 {
				if d := time.Until(l.start.Add(time.Duration(i) * perRecord)); d > 0 {
					// Real time: paces the load to its schedule, catching
					// up after a stall (a ticker would drop the ticks).
					time.Sleep(d)
				}
			}
			v := tieredValue(seq, valueSize)
			h := valueHash(v)
			sent := time.Now()
			l.produced.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: tieredKey(seq), Value: v}, func(r *kgo.Record, err error) {
				now := time.Now()
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					l.errs++
					l.lastErr = err
					return
				}
				l.acks[r.Partition] = append(l.acks[r.Partition], ackRec{offset: r.Offset, seq: seq, hash: h})
				l.lats = append(l.lats, ackLat{at: now.UnixNano(), lat: int32(min(now.Sub(sent).Microseconds(), 1<<31-1))})
				l.acked.Add(1)
				l.ackedB.Add(int64(len(r.Value)))
			})
		}
		cl.Flush(context.Background())
		l.end = time.Now()
	}()
	return l
}

func (l *tieredLoad) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(limit):
		t.Fatalf("load not done after %v: %d of %d produced records acknowledged", limit, l.acked.Load(), l.produced.Load())
	}
}

// latencies returns the ack latencies of acknowledgements in [from, to).
func (l *tieredLoad) latencies(from, to time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	f, e := from.UnixNano(), to.UnixNano()
	for _, a := range l.lats {
		if a.at >= f && a.at < e {
			out = append(out, time.Duration(a.lat)*time.Microsecond)
		}
	}
	return out
}

// acksIn counts acknowledgements in [from, to).
func (l *tieredLoad) acksIn(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	f, e := from.UnixNano(), to.UnixNano()
	for _, a := range l.lats {
		if a.at >= f && a.at < e {
			n++
		}
	}
	return n
}

// envBytes reads a byte count from the environment (plain, or with a
// KiB/MiB/GiB suffix), or def.
func envBytes(t *testing.T, name string, def int64) int64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	mult := int64(1)
	for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(v, suf) {
			v, mult = strings.TrimSuffix(v, suf), m
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive byte count (optionally KiB/MiB/GiB)", name, os.Getenv(name))
	}
	return n * mult
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

// poll calls cond every interval until it returns true or limit passes;
// it returns cond's last message on timeout. Unlike harness.Eventually it
// polls at the caller's pace (0.5-1 s: the conditions scrape brokers'
// metrics and segment listings, which every 50 ms would load the brokers
// under test) and leaves the failure to the caller, some of which report
// it and carry on.
func poll(limit, every time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(limit)
	for {
		ok, msg := cond()
		if ok {
			return true, msg
		}
		if time.Now().After(deadline) {
			return false, msg
		}
		time.Sleep(every)
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func removeFile(path string) error { return os.Remove(path) }
