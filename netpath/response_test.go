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
	"testing"
	"time"

	"github.com/ringlog/ringlog/internal/sockio"
	"github.com/ringlog/ringlog/internal/testwait"
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
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
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
	s, err := New(DefaultConfig(), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{name: "plaintext", fetchPath: path}
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
	// splice through a pipe: cover both.
	for _, tc := range []struct {
		path string
		n    int32
	}{{"sendfile", 100<<10 + 3}, {"sendfile", 2<<20 + 17}, {"copy", 2<<20 + 17}} {
		path := tc.path
		t.Run(fmt.Sprintf("%s-%d", path, tc.n), func(t *testing.T) {
			f := tempFile(t, data, int64(len(data)))
			fr := &osRange{f: f, pos: 12345, n: tc.n}
			sc, cc := tcpPair(t)
			head := []byte("partition-headers")
			s, c, done := startWriter(t, path, sc, fr, head)
			want := binary.BigEndian.AppendUint32(nil, uint32(4+len(head)+int(fr.n)))
			want = binary.BigEndian.AppendUint32(want, 7)
			want = append(want, head...)
			want = append(want, data[fr.pos:fr.pos+int64(fr.n)]...)
			got := make([]byte, len(want))
			cc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(cc, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("response bytes differ from the file range")
			}
			close(c.pending)
			<-done
			if n := fr.released.Load(); n != 1 {
				t.Fatalf("range released %d times, want 1", n)
			}
			st := s.Stats()
			zc, cp := st.ZeroCopyBytes, st.CopiedBytes
			if path == "copy" {
				zc, cp = cp, zc
			}
			if zc != uint64(fr.n) || cp != 0 {
				t.Fatalf("%s path counted %d/%d bytes, want %d/0", path, zc, cp, fr.n)
			}
		})
	}
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
