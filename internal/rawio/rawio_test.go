package rawio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A Reader parks until the pipe has bytes, reads them, honours the read
// deadline, and reports end of file as 0 bytes.
func TestReader(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rd := NewReader(rc)
	b := make([]byte, 16)
	var n int
	read := make(chan error, 1)
	go func() {
		var err error
		n, err = rd.Read(b)
		read <- err
	}()
	// The pipe is empty: the Read parks. 20 ms is ample for a Read that
	// did not park to have returned.
	select {
	case err := <-read:
		t.Fatalf("Read of an empty pipe returned %d bytes, %v", n, err)
	case <-time.After(20 * time.Millisecond):
	}
	if _, e := Write(w.Fd(), []byte("hello")); e != 0 {
		t.Fatal(e)
	}
	if err := <-read; err != nil || string(b[:n]) != "hello" {
		t.Fatalf("Read = %q, %v", b[:n], err)
	}
	r.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := rd.Read(b); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v", err)
	}
	r.SetReadDeadline(time.Time{})
	w.Close()
	if n, err := rd.Read(b); n != 0 || err != nil {
		t.Fatalf("Read at EOF = %d, %v", n, err)
	}
}

// Pwritev writes its buffers in order at the offset, leaving the file
// position and the rest of the file alone.
func TestPwritev(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(bytes.Repeat([]byte{'.'}, 20)); err != nil {
		t.Fatal(err)
	}
	bufs := [][]byte{[]byte("abc"), []byte("defg")}
	iov := make([]unix.Iovec, len(bufs))
	for i, b := range bufs {
		iov[i].Base = &b[0]
		iov[i].SetLen(len(b))
	}
	n, e := Pwritev(int(f.Fd()), iov, bufs, 5)
	if e != 0 || n != 7 {
		t.Fatalf("Pwritev = %d, %v", n, e)
	}
	got, _ := os.ReadFile(f.Name())
	if string(got) != ".....abcdefg........" {
		t.Fatalf("file %q", got)
	}
}
