//go:build linux

package floor

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/internal/cpusched"
	"github.com/ringlog/ringlog/internal/rawio"
	"github.com/ringlog/ringlog/internal/sockio"
)

// NodeMain runs one node of the model round, with args as Run passes
// them: the leader when -peers names followers (or with one replica), a
// follower otherwise. It prints "listening ADDR" once it takes
// connections, serves exactly one (the client's, or the leader's) and
// returns when that peer closes it.
func NodeMain(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("floor node", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	peers := fs.String("peers", "", "followers' addresses, comma-separated (the leader)")
	file := fs.String("file", "", "data file")
	mode := fs.String("mode", ModeNetpoll, strings.Join(Modes, " | "))
	fsync := fs.Bool("fsync", true, "a durable write per message")
	size := fs.Int("size", 1000, "message bytes")
	sched := fs.String("sched-policy", cpusched.Normal, "scheduling policy of the node's threads: batch | normal")
	follower := fs.Bool("follower", false, "a follower: its upstream (the leader) sends the next message only after this node's answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cpusched.Apply(*sched); err != nil {
		return fmt.Errorf("floor node: %w", err)
	}
	if err := checkNode(*mode, *size); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("floor node: -file is required")
	}
	lg, err := openLog(*file, *size, *fsync)
	if err != nil {
		return err
	}
	defer lg.close()
	var app appender = lg
	if *mode == ModeUring {
		ul, err := newUringLog(lg)
		if err != nil {
			return err
		}
		defer ul.close()
		app = ul
	}
	var fol []net.Conn
	defer func() {
		for _, c := range fol {
			c.Close()
		}
	}()
	for _, a := range strings.Split(*peers, ",") {
		if a == "" {
			continue
		}
		c, err := net.DialTimeout("tcp", a, 5*time.Second)
		if err != nil {
			return fmt.Errorf("floor node: dial follower: %w", err)
		}
		fol = append(fol, c)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("floor node: %w", err)
	}
	fmt.Fprintf(stdout, "listening %s direct=%t\n", ln.Addr(), lg.direct)
	// Run connects at once; a parent that died before it did must not
	// leave this process waiting forever.
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	c, err := ln.Accept()
	ln.Close()
	if err != nil {
		return fmt.Errorf("floor node: accept: %w", err)
	}
	defer c.Close()
	up, err := newLink(c, *mode)
	if err != nil {
		return err
	}
	downs := make([]link, len(fol))
	for i, f := range fol {
		if downs[i], err = newLink(f, *mode); err != nil {
			return err
		}
	}
	if *mode == ModeThread {
		// Every call below is then this thread's own blocking system
		// call, woken by the kernel directly, as a thread-per-connection
		// server written in C would be. The raw calls hold the P while
		// they block, so nothing may need to stop the world: the loop
		// allocates nothing, and with the collector off no periodic
		// collection starts either.
		runtime.LockOSThread()
		debug.SetGCPercent(-1)
	}
	return serve(up, downs, app, *size, *follower)
}

// serve is the round: take a message, send it to every follower, write it
// to the log, wait for every follower's answer and for the write, answer.
// The loop allocates nothing. It returns nil when the upstream peer
// closes between messages: the run is over. A follower in uring mode
// sends its answer inside the next read's wait, as ringlog's follower
// sends its next fetch (sockio.Conn.SendWithNextRead): its leader sends
// nothing before the answer, so the read may park without trying the
// socket first. A leader may not: its client sends open loop.
func serve(up link, downs []link, lg appender, size int, follower bool) error {
	msg := make([]byte, size)
	ack := make([]byte, ackSize)
	for {
		if err := up.readFull(msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("floor node: read: %w", err)
		}
		for i, d := range downs {
			if err := d.write(msg); err != nil {
				return fmt.Errorf("floor node: send to follower %d: %w", i+1, err)
			}
		}
		if err := lg.start(msg); err != nil {
			return err
		}
		for i, d := range downs {
			if err := d.readFull(ack); err != nil {
				return fmt.Errorf("floor node: answer of follower %d: %w", i+1, err)
			}
		}
		if err := lg.wait(); err != nil {
			return err
		}
		if sw, ok := up.(sendWithRead); ok && follower && sw.sendWithNextRead(msg[:ackSize]) {
			continue // sent by the next readFull, before it reads into msg
		}
		if err := up.write(msg[:ackSize]); err != nil {
			return fmt.Errorf("floor node: answer: %w", err)
		}
	}
}

type link interface {
	readFull(p []byte) error
	write(p []byte) error
}

func newLink(c net.Conn, mode string) (link, error) {
	switch mode {
	case ModeNetpoll:
		return netLink{c}, nil
	case ModeUring:
		// The broker's sockets: raw reads and writes inside the
		// netpoller's RawConn (internal/sockio), so a call that does not
		// block pays none of the runtime's system call bookkeeping.
		return netLink{sockio.Wrap(c)}, nil
	}
	// A duplicate of the socket put into blocking mode. O_NONBLOCK belongs
	// to the open file, so the net.Conn shares it; nothing uses the
	// net.Conn for I/O any more, it is kept to close the socket.
	sc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var derr error
	if err := sc.Control(func(s uintptr) {
		fd, derr = unix.Dup(int(s))
		if derr == nil {
			derr = unix.SetNonblock(fd, false)
		}
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("floor node: blocking socket: %w", derr)
	}
	return threadLink{fd: uintptr(fd)}, nil
}

// netLink is Go's own way: reads and writes park the goroutine on the
// netpoller.
type netLink struct{ c net.Conn }

func (l netLink) readFull(p []byte) error { _, err := io.ReadFull(l.c, p); return err }
func (l netLink) write(p []byte) error    { _, err := l.c.Write(p); return err }

// sendWithRead is a link that can hand p to its next read to send
// (serve's follower answer).
type sendWithRead interface {
	sendWithNextRead(p []byte) bool
}

// sendWithNextRead arms p on a sockio connection (uring mode); false for
// Go's own sockets (netpoll mode), which write as before.
func (l netLink) sendWithNextRead(p []byte) bool {
	sc, ok := l.c.(*sockio.Conn)
	if ok {
		sc.SendWithNextRead(p)
	}
	return ok
}

// threadLink blocks the calling thread in read and write.
type threadLink struct{ fd uintptr }

func (l threadLink) readFull(p []byte) error {
	for len(p) > 0 {
		n, e := rawio.Read(l.fd, p)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			return e
		case n == 0:
			return io.EOF
		}
		p = p[n:]
	}
	return nil
}

func (l threadLink) write(p []byte) error {
	for len(p) > 0 {
		n, e := rawio.Write(l.fd, p)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			return e
		}
		p = p[n:]
	}
	return nil
}

// logFile is the node's log: a ring of preallocated, already written
// slots, so a durable write is an overwrite of allocated blocks (no
// metadata to commit), the cheapest durable write the file system has.
type logFile struct {
	fd     int
	buf    []byte // one slot, aligned for O_DIRECT
	iov    []unix.Iovec
	bufs   [][]byte // buf, for rawio's race build
	slots  int64
	next   int64
	direct bool
}

const logBytes = 4 << 20 // the ring's size

func openLog(path string, size int, durable bool) (*logFile, error) {
	slot := (size + blockSize - 1) / blockSize * blockSize
	lg := &logFile{slots: max(16, int64(logBytes/slot))}
	flags := unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC | unix.O_CLOEXEC
	var err error
	if durable {
		lg.fd, err = unix.Open(path, flags|unix.O_DIRECT|unix.O_DSYNC, 0o600)
		lg.direct = err == nil
		if errors.Is(err, unix.EINVAL) {
			// tmpfs and some others refuse O_DIRECT; O_DSYNC alone is
			// still a durable write.
			lg.fd, err = unix.Open(path, flags|unix.O_DSYNC, 0o600)
		}
	} else {
		lg.fd, err = unix.Open(path, flags, 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("floor node: open %s: %w", path, err)
	}
	mem := make([]byte, slot+blockSize)
	off := (blockSize - int(uintptr(unsafe.Pointer(&mem[0]))%blockSize)) % blockSize
	lg.buf = mem[off : off+slot]
	lg.iov = make([]unix.Iovec, 1)
	lg.iov[0].Base = &lg.buf[0]
	lg.iov[0].SetLen(slot)
	lg.bufs = [][]byte{lg.buf}
	// Every slot written once, in one call, so that each append is an
	// overwrite of allocated blocks.
	mem = make([]byte, int(lg.slots)*slot+blockSize)
	off = (blockSize - int(uintptr(unsafe.Pointer(&mem[0]))%blockSize)) % blockSize
	if n, err := unix.Pwrite(lg.fd, mem[off:off+int(lg.slots)*slot], 0); err != nil || n != int(lg.slots)*slot {
		lg.close()
		return nil, fmt.Errorf("floor node: preallocate %s: %d bytes, %v", path, n, err)
	}
	return lg, nil
}

// appender is a node's log: start writes a message (or begins to), wait
// returns once it is written.
type appender interface {
	start(p []byte) error
	wait() error
}

// start writes p into the next slot; with O_DSYNC it returns once the
// device has it, so wait has nothing left to do.
func (lg *logFile) start(p []byte) error {
	return lg.writeSlot(lg.take(p))
}

// take copies p into the slot buffer and hands out the next slot.
func (lg *logFile) take(p []byte) int64 {
	copy(lg.buf, p)
	i := lg.next
	lg.next = (lg.next + 1) % lg.slots
	return i
}

func (lg *logFile) wait() error { return nil }

// writeSlot is a raw pwritev: the model's floor does not pay the
// runtime's system call bookkeeping (internal/rawio).
func (lg *logFile) writeSlot(i int64) error {
	for {
		n, e := rawio.Pwritev(lg.fd, lg.iov, lg.bufs, i*int64(len(lg.buf)))
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			return fmt.Errorf("floor node: write: %w", e)
		case n != len(lg.buf):
			return fmt.Errorf("floor node: short write %d of %d", n, len(lg.buf))
		}
		return nil
	}
}

func (lg *logFile) close() { unix.Close(lg.fd) }
