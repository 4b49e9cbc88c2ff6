package core

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
)

// The idle timeout (connections.max.idle.ms) is kept lazily (netpath
// idleDeadline): a connection with a request at least every timeout stays
// open however long it lives, and one that goes quiet is closed after the
// timeout, not before and at most an eighth (plus scheduling) after. A
// request body that stalls is cut by --request-read-timeout.
func TestIdleAndRequestReadTimeouts(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	const idle = 800 * time.Millisecond
	b := harness.StartBroker(t, t.TempDir(), "--connections-max-idle", idle.String(), "--request-read-timeout", "500ms")
	c, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	// Busy for three timeouts, a request every third of one: never closed.
	pace := time.NewTicker(idle / 3)
	defer pace.Stop()
	var corr int32
	for start := time.Now(); ; corr++ {
		if _, err := c.Write(harness.APIVersionsV0(corr)); err != nil {
			t.Fatal(err)
		}
		if got, err := harness.ReadCorrelation(c); err != nil || got != corr {
			t.Fatalf("response %d: correlation %d, %v", corr, got, err)
		}
		if time.Since(start) > 3*idle {
			break
		}
		<-pace.C
	}
	// Then quiet: closed between idle and idle + idle/8 (plus slack).
	quietFrom := time.Now()
	var one [1]byte
	_, err = c.Read(one[:])
	quiet := time.Since(quietFrom)
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("quiet connection: read %v, want the broker to close it", err)
	}
	if quiet < idle || quiet > idle+idle/8+time.Second {
		t.Fatalf("quiet connection closed after %v, want within [%v, %v]", quiet, idle, idle+idle/8+time.Second)
	}
	t.Logf("quiet connection closed after %v (timeout %v)", quiet, idle)

	// A frame whose body never completes: cut by the request read
	// timeout, well before the idle timeout.
	c2, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(30 * time.Second))
	frame := harness.APIVersionsV0(1)
	binary.BigEndian.PutUint32(frame, 100) // declares 100 bytes, sends 10
	sent := time.Now()
	if _, err := c2.Write(frame); err != nil {
		t.Fatal(err)
	}
	_, err = c2.Read(one[:])
	if !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("stalled body: read %v, want the broker to close", err)
	}
	if d := time.Since(sent); d < 500*time.Millisecond || d >= idle+time.Second {
		t.Fatalf("stalled body cut after %v, want about the 500ms request read timeout", d)
	}
}

func isReset(err error) bool {
	var se *os.SyscallError
	return errors.As(err, &se)
}
