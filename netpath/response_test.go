package netpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ringlog/ringlog/internal/rawio"
	"github.com/ringlog/ringlog/internal/sockio"
	"github.com/ringlog/ringlog/internal/testwait"
	"golang.org/x/sys/unix"
)

// osRange is a FileRange over a real file, recording its release.
type osRange struct {
	f        *os.File
	pos      int64
	n        int32
	released atomic.Int32
}

func (r *osRange) Fd() int                                 { return int(r.f.Fd()) }
func (r *osRange) Pos() int64                              { return r.pos }
func (r *osRange) Len() int32                              { return r.n }
func (r *osRange) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
func (r *osRange) Release()                                { r.released.Add(1) }

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t testing.TB) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close(); sc.Close() })
	return sc.(*net.TCPConn), cc.(*net.TCPConn)
}

// startWriter runs a conn's writer over nc with one queued response made
// of a byte part and fr, and returns a channel closed when the writer
// exits.
func startWriter(t *testing.T, path string, nc net.Conn, fr *osRange, head []byte) (*Server, *conn, chan struct{}) {
	t.Helper()
	return startWriterBelow(t, path, 0, nc, fr, head)
}

// startWriterBelow is startWriter on a listener with the given
// Config.FetchCopyBelow.
func startWriterBelow(t *testing.T, path string, copyBelow int64, nc net.Conn, fr *osRange, head []byte) (*Server, *conn, chan struct{}) {
	t.Helper()
	s, err := New(DefaultConfig(), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{name: "plaintext", fetchPath: path, copyBelow: copyBelow}
	s.listeners = append(s.listeners, l)
	c := newConn(s, l, sockio.Wrap(nc))
	c.pending <- pendingReply{
		hdr: requestHeader{key: 1, correlationID: 7},
		reply: reply{resolve: func(<-chan struct{}) *response {
			return &response{parts: []responsePart{{buf: head}, {file: fr}}, release: []func(){fr.Release}}
		}},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	return s, c, done
}

func tempFile(t *testing.T, data []byte, size int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "seg.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestWriteResponseExact checks both fetch paths put exactly the framed
// bytes on the wire, from an offset inside the file, and release the range
// once sent.
func TestWriteResponseExact(t *testing.T) {
	data := make([]byte, 3<<20)
	rand.New(rand.NewSource(1)).Read(data)
	// Below spliceMinBytes the zero-copy path uses sendfile, above it
	// splice through a pipe: cover both. Below FetchCopyBelow a zero-copy
	// listener copies (the range is in the page cache: just written).
	for _, tc := range []struct {
		path   string
		below  int64
		n      int32
		copied bool // counted as copied, not zero-copy
	}{
		{"sendfile", 0, 100<<10 + 3, false},
		{"sendfile", 0, 2<<20 + 17, false},
		{"copy", 0, 2<<20 + 17, true},
		{"sendfile", 0, 1000, false},
		{"sendfile", 64 << 10, 1000, true},
		{"sendfile", 64 << 10, 64 << 10, false},
		{"sendfile", 1 << 20, 1<<20 - 100, true},
	} {
		path := tc.path
		t.Run(fmt.Sprintf("%s-below%d-%d", path, tc.below, tc.n), func(t *testing.T) {
			f := tempFile(t, data, int64(len(data)))
			fr := &osRange{f: f, pos: 12345, n: tc.n}
			sc, cc := tcpPair(t)
			head := []byte("partition-headers")
			s, c, done := startWriterBelow(t, path, tc.below, sc, fr, head)
			expectFrame(t, cc, head, data[fr.pos:fr.pos+int64(fr.n)])
			close(c.pending)
			<-done
			if n := fr.released.Load(); n != 1 {
				t.Fatalf("range released %d times, want 1", n)
			}
			st := s.Stats()
			zc, cp := st.ZeroCopyBytes, st.CopiedBytes
			if tc.copied {
				zc, cp = cp, zc
			}
			if zc != uint64(fr.n) || cp != 0 {
				t.Fatalf("%s path counted %d/%d bytes (zero-copy/copied, swapped when copied=%v), want %d/0", path, st.ZeroCopyBytes, st.CopiedBytes, tc.copied, fr.n)
			}
		})
	}
}

// expectFrame reads one response from cc and checks it is exactly the
// frame startWriter's response makes: size, correlation id 7, head, then
// the range's bytes.
func expectFrame(t *testing.T, cc net.Conn, head, records []byte) {
	t.Helper()
	want := binary.BigEndian.AppendUint32(nil, uint32(4+len(head)+len(records)))
	want = binary.BigEndian.AppendUint32(want, 7)
	want = append(want, head...)
	want = append(want, records...)
	got := make([]byte, len(want))
	cc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(cc, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("response bytes differ from the file range")
	}
}

// TestSmallRefusedReadGoesZeroCopy: when the small path's non-blocking
// read is refused (the range is not in the page cache), nothing has been
// written and the response goes by sendfile, intact.
func TestSmallRefusedReadGoesZeroCopy(t *testing.T) {
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(2)).Read(data)
	f := tempFile(t, data, int64(len(data)))
	asked := 0
	preadNowait = func(fd int, p []byte, off int64) (int, syscall.Errno) {
		asked++
		return 0, syscall.EAGAIN
	}
	defer func() { preadNowait = rawio.PreadNowait }()
	st := sendSmallRange(t, f, data)
	if asked != 1 {
		t.Fatalf("the small path read %d times, want once", asked)
	}
	if st.ZeroCopyBytes != smallRangeLen || st.CopiedBytes != 0 {
		t.Fatalf("zero-copy/copied = %d/%d, want %d/0: a refused read must fall back to sendfile", st.ZeroCopyBytes, st.CopiedBytes, smallRangeLen)
	}
}

// TestSmallUncachedIntact: a small response of a range evicted from the
// page cache arrives intact, by whichever route the kernel allows. Which
// one is not asserted: the read RWF_NOWAIT refuses starts readahead, and
// on this project's VMs (the host caches the disk) that often completes
// before the read looks at the pages, so the read succeeds without having
// waited (TestSmallRefusedReadGoesZeroCopy covers the refusal).
func TestSmallUncachedIntact(t *testing.T) {
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(2)).Read(data)
	f := tempFile(t, data, int64(len(data)))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if cachedPages(t, f, len(data)) > 0 {
		t.Skip("the file system keeps the file in the page cache after FADV_DONTNEED (tmpfs?)")
	}
	st := sendSmallRange(t, f, data)
	if st.ZeroCopyBytes+st.CopiedBytes != smallRangeLen || st.ZeroCopyBytes != 0 && st.CopiedBytes != 0 {
		t.Fatalf("zero-copy/copied = %d/%d, want all of %d one way", st.ZeroCopyBytes, st.CopiedBytes, smallRangeLen)
	}
	t.Logf("zero-copy/copied = %d/%d", st.ZeroCopyBytes, st.CopiedBytes)
}

// smallRangeLen is the record bytes of sendSmallRange's response: under
// the 64 KiB its listener copies below.
const smallRangeLen = 5000

// sendSmallRange sends one response of smallRangeLen bytes of f (which
// holds data) through a zero-copy listener that copies below 64 KiB,
// checks the frame on the wire, and returns the listener's byte counts.
func sendSmallRange(t *testing.T, f *os.File, data []byte) Stats {
	t.Helper()
	fr := &osRange{f: f, pos: 300 << 10, n: smallRangeLen}
	sc, cc := tcpPair(t)
	head := []byte("hdr")
	s, c, done := startWriterBelow(t, "sendfile", 64<<10, sc, fr, head)
	expectFrame(t, cc, head, data[fr.pos:fr.pos+int64(fr.n)])
	close(c.pending)
	<-done
	return s.Stats()
}

// cachedPages counts the file's first n bytes' pages in the page cache.
func cachedPages(t *testing.T, f *os.File, n int) int {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	c := 0
	for _, v := range vec {
		c += int(v & 1)
	}
	return c
}

// TestRangeHeldUntilSendEnds: while a send is blocked on a client that
// stopped reading the range stays held (the engine may not close the
// file), and when the connection dies mid-send it is released exactly once.
func TestRangeHeldUntilSendEnds(t *testing.T) {
	for _, path := range []string{"sendfile", "copy"} {
		for _, killer := range []string{"peer", "server"} {
			t.Run(path+"/"+killer+"-closes", func(t *testing.T) {
				f := tempFile(t, []byte("x"), 64<<20)
				fr := &osRange{f: f, pos: 0, n: 64 << 20}
				sc, cc := tcpPair(t)
				// Small buffers so the send blocks long before 64 MiB.
				sc.SetWriteBuffer(64 << 10)
				cc.SetReadBuffer(64 << 10)
				s, c, done := startWriter(t, path, sc, fr, []byte("hdr"))
				cc.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.ReadFull(cc, make([]byte, 256<<10)); err != nil {
					t.Fatal(err)
				}
				// The writer is stuck on the full socket: for 200 ms the
				// send stays partial and the range stays held (the client
				// reads nothing more, so it cannot finish).
				sent := func() uint64 { st := s.Stats(); return st.ZeroCopyBytes + st.CopiedBytes }
				if !testwait.Holds(200*time.Millisecond, func() bool {
					return sent() < uint64(fr.n) && fr.released.Load() == 0
				}) {
					t.Fatalf("sent %d bytes, range released %d times: expected a partial, blocked send holding its range", sent(), fr.released.Load())
				}
				if sent() == 0 {
					t.Fatal("sent 0 bytes: expected a partial, blocked send")
				}
				if killer == "peer" {
					// RST instead of FIN: the writer sees the failure now.
					cc.SetLinger(0)
					cc.Close()
				} else {
					c.close()
				}
				testwait.Until(10*time.Second, func() bool { return fr.released.Load() != 0 }) // checked below
				if n := fr.released.Load(); n != 1 {
					t.Fatalf("range released %d times after the connection died, want 1", n)
				}
				close(c.pending)
				<-done
				if n := fr.released.Load(); n != 1 {
					t.Fatalf("range released %d times, want 1", n)
				}
			})
		}
	}
}

// BenchmarkFetchResponseWrite: one response of n record bytes from a
// page-cached file written to a loopback socket, copied into one write
// (FetchCopyBelow above n) against cork, sendfile and uncork, with the
// process's CPU per response. Where copying stops paying is the
// FetchCopyBelow default (BENCHMARKS.md §29).
func BenchmarkFetchResponseWrite(b *testing.B) {
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(3)).Read(data)
	for _, n := range []int32{1 << 10, 16 << 10, 64 << 10, 256 << 10} {
		for _, route := range []string{"copy", "zero-copy"} {
			b.Run(fmt.Sprintf("%dKiB/%s", n>>10, route), func(b *testing.B) {
				f, err := os.Create(filepath.Join(b.TempDir(), "seg.log"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if _, err := f.Write(data); err != nil {
					b.Fatal(err)
				}
				sc, cc := tcpPair(b)
				go io.Copy(io.Discard, cc)
				below := int64(0)
				if route == "copy" {
					below = 1 << 20
				}
				s, err := New(DefaultConfig(), Deps{})
				if err != nil {
					b.Fatal(err)
				}
				l := &listener{name: "plaintext", fetchPath: "sendfile", copyBelow: below}
				c := newConn(s, l, sockio.Wrap(sc))
				fr := &osRange{f: f, pos: 4096, n: n}
				head := make([]byte, 120)
				r := &response{parts: []responsePart{{buf: head}, {file: fr}}}
				var ru0, ru1 unix.Rusage
				unix.Getrusage(unix.RUSAGE_SELF, &ru0)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := c.writeResponse(requestHeader{key: 1, correlationID: 7}, r); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				unix.Getrusage(unix.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
