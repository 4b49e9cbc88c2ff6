package sockio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair returns a wrapped client connection and the accepted peer, on
// loopback.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-acc
	if peer == nil {
		t.Fatal("accept failed")
	}
	c, ok := Wrap(nc).(*Conn)
	if !ok {
		t.Fatalf("Wrap(%T) did not wrap", nc)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

func TestWrapLeavesOtherConnsAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := Wrap(a); got != a {
		t.Fatalf("Wrap(pipe) = %T, want the pipe itself", got)
	}
}

// Bytes written in pieces larger than the socket buffers arrive whole and
// in order in both directions, through Read, Write and Writev.
func TestReadWriteWritevLarge(t *testing.T) {
	c, peer := pair(t)
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	var wg sync.WaitGroup
	var got []byte
	var rerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, rerr = io.ReadAll(io.LimitReader(peer, int64(2*len(want))))
	}()
	if n, err := c.Write(want); err != nil || n != len(want) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	// Writev with many small and some empty buffers, more than IOV_MAX.
	var bufs [][]byte
	for off := 0; off < len(want); {
		n := min(len(want)-off, 1+off%3000)
		bufs = append(bufs, want[off:off+n], nil)
		off += n
	}
	if n, err := c.Writev(bufs); err != nil || n != len(want) {
		t.Fatalf("Writev = %d, %v (%d buffers)", n, err, len(bufs))
	}
	wg.Wait()
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !bytes.Equal(got[:len(want)], want) || !bytes.Equal(got[len(want):], want) {
		t.Fatal("bytes differ")
	}

	// And back: Read returns what arrived, then EOF when the peer closes.
	go func() {
		peer.Write(want[:100000])
		peer.Close()
	}()
	back, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, want[:100000]) {
		t.Fatalf("read back %d bytes, want 100000 equal bytes", len(back))
	}
}

// A read deadline ends a Read with os.ErrDeadlineExceeded; a closed
// connection answers net.ErrClosed.
func TestDeadlineAndClose(t *testing.T) {
	c, _ := pair(t)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var b [16]byte
	if _, err := c.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past deadline: %v, want ErrDeadlineExceeded", err)
	}
	c.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(b[:])
		done <- err
	}()
	// Nothing to read and no deadline: the Read parks, and the Close
	// must end it. 20 ms is ample for a Read that did not park to have
	// returned.
	select {
	case err := <-done:
		t.Fatalf("Read with nothing sent returned %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read on closed conn: %v, want net.ErrClosed", err)
	}
	if _, err := c.Write(b[:]); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write on closed conn: %v, want net.ErrClosed", err)
	}
}

// Sendfile sends the range asked for, across socket-buffer stalls, and
// reports a file that ends before the range does.
func TestSendfile(t *testing.T) {
	c, peer := pair(t)
	data := make([]byte, 6<<20)
	for i := range data {
		data[i] = byte(i * 13)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make(chan []byte, 1)
	const off, n = 12345, 5 << 20
	go func() {
		b := make([]byte, n)
		io.ReadFull(peer, b)
		got <- b
	}()
	sent, err := c.Sendfile(int(f.Fd()), off, n)
	if err != nil || sent != n {
		t.Fatalf("Sendfile = %d, %v", sent, err)
	}
	if !bytes.Equal(<-got, data[off:off+n]) {
		t.Fatal("sendfile bytes differ")
	}
	go io.Copy(io.Discard, peer)
	sent, err = c.Sendfile(int(f.Fd()), int64(len(data)-10), 100)
	if !errors.Is(err, io.ErrUnexpectedEOF) || sent != 10 {
		t.Fatalf("Sendfile past EOF = %d, %v; want 10, ErrUnexpectedEOF", sent, err)
	}
}

// dataSegsOut is the count of data segments the socket has sent.
func dataSegsOut(t *testing.T, c *Conn) uint32 {
	t.Helper()
	var segs uint32
	rc, err := c.TCP().SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if serr == nil {
			segs = info.Data_segs_out
		}
	})
	if serr != nil {
		t.Fatal(serr)
	}
	return segs
}

// A response written as writev, sendfile, write (a fetch response: header,
// record bytes, trailer) leaves as (at least) three segments under TCP_NODELAY and
// as one while corked, with the same bytes arriving.
func TestCorkOneSegment(t *testing.T) {
	c, peer := pair(t)
	path := filepath.Join(t.TempDir(), "f")
	file := bytes.Repeat([]byte("record"), 200)
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head, tail := []byte("head:"), []byte(":tail")
	want := append(append(append([]byte{}, head...), file...), tail...)
	send := func(cork bool) uint32 {
		before := dataSegsOut(t, c)
		if cork {
			if err := c.Cork(true); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Writev([][]byte{head[:2], head[2:]}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Sendfile(int(f.Fd()), 0, len(file)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(tail); err != nil {
			t.Fatal(err)
		}
		if cork {
			if err := c.Cork(false); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]byte, len(want))
		peer.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(peer, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("cork %v: bytes differ", cork)
		}
		return dataSegsOut(t, c) - before
	}
	if n := send(false); n < 3 {
		t.Fatalf("uncorked: %d data segments, want at least 3 (one per call under TCP_NODELAY)", n)
	}
	if n := send(true); n != 1 {
		t.Fatalf("corked: %d data segments, want 1", n)
	}
}

// A request handed to the next Read is sent before that read waits: the
// peer answers each of several rounds, a request larger than the socket
// buffers arrives whole (the socket fills, the rest goes the usual way),
// and a peer that never answers leaves the read to its deadline, with
// the request delivered.
func TestSendWithNextRead(t *testing.T) {
	c, peer := pair(t)
	serve := func(n int) {
		go func() {
			req := make([]byte, n)
			if _, err := io.ReadFull(peer, req); err != nil {
				return
			}
			peer.Write(append([]byte("re:"), req[:min(n, 8)]...))
		}()
	}
	for i := range 5 {
		req := []byte{'a' + byte(i), 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
		serve(len(req))
		c.SendWithNextRead(req)
		buf := make([]byte, 64)
		n, err := io.ReadAtLeast(c, buf, 11)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if want := "re:" + string(req); string(buf[:n]) != want {
			t.Fatalf("round %d: got %q, want %q", i, buf[:n], want)
		}
	}

	big := bytes.Repeat([]byte("x"), 16<<20)
	big[0] = 'B'
	serve(len(big))
	c.SendWithNextRead(big)
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(c, buf, 11)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != "re:Bxxxxxxx" {
		t.Fatalf("large request: got %q", buf[:n])
	}

	got := make(chan []byte, 1)
	go func() {
		req := make([]byte, 4)
		io.ReadFull(peer, req)
		got <- req
	}()
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	c.SendWithNextRead([]byte("ping"))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read without an answer: %v, want the deadline", err)
	}
	if req := <-got; string(req) != "ping" {
		t.Fatalf("peer got %q, want the request", req)
	}
}
