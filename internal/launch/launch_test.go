package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the broker under launch: with FAKE_BROKER set
// it behaves as that variable says (see fakeBroker).
func TestMain(m *testing.M) {
	if mode := os.Getenv("FAKE_BROKER"); mode != "" {
		fakeBroker(mode, os.Args[len(os.Args)-2], os.Args[len(os.Args)-1])
		return
	}
	os.Exit(m.Run())
}

// fakeBroker: "ok" serves /healthz with status "starting" for 200 ms, then
// "ok"; "nostatus" serves a /healthz without a status, and a Kafka
// listener once /healthz was asked twice; "exit" exits 3 at once;
// "stubborn" is ready but ignores SIGTERM. Every mode but stubborn exits 0
// on SIGTERM.
func fakeBroker(mode, kafka, admin string) {
	if mode == "exit" {
		os.Exit(3)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	start := time.Now()
	var asked atomic.Int32
	askedAgain := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case mode == "nostatus":
			if asked.Add(1) == 2 {
				close(askedAgain)
			}
			fmt.Fprint(w, `{"io_path":"memory"}`)
		case mode == "ok" && time.Since(start) < 200*time.Millisecond:
			fmt.Fprint(w, `{"status":"starting"}`)
		default:
			fmt.Fprint(w, `{"status":"ok"}`)
		}
	})
	go http.ListenAndServe(admin, mux)
	if mode == "nostatus" {
		// The Kafka listener comes up after the admin one, once the
		// launcher, having found no listener, asked /healthz again: one
		// that took the status-less answer alone for ready is gone by then.
		<-askedAgain
		ln, err := net.Listen("tcp", kafka)
		if err != nil {
			os.Exit(4)
		}
		defer ln.Close()
	}
	for {
		<-sig
		if mode != "stubborn" {
			os.Exit(0)
		}
	}
}

func fake(t *testing.T, mode string) *Broker {
	t.Helper()
	kafka, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	b := &Broker{Bin: os.Args[0], Args: []string{"-test.run=^$", kafka, admin}, Addr: kafka, Admin: admin,
		Env: []string{"FAKE_BROKER=" + mode}, Output: &out, DieWithParent: true}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-b.Exited():
		default:
			b.Kill()
		}
	})
	return b
}

func TestWaitReadyWaitsForStatusOK(t *testing.T) {
	b := fake(t, "ok")
	start := time.Now()
	h, err := b.WaitReady(context.Background(), 10*time.Second)
	if err != nil || h["status"] != "ok" {
		t.Fatalf("WaitReady: %v %v", h, err)
	}
	// The fake says "starting" for its first 200 ms.
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("ready after %v, before the broker said ok", d)
	}
	if err := b.Stop(10 * time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestWaitReadyWithoutStatusNeedsKafkaListener(t *testing.T) {
	b := fake(t, "nostatus")
	if _, err := b.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatalf("ready, but the Kafka listener refuses: %v", err)
	}
	c.Close()
}

func TestWaitReadyReportsExit(t *testing.T) {
	b := fake(t, "exit")
	_, err := b.WaitReady(context.Background(), 10*time.Second)
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("err %v, want ErrExited with exit status 3", err)
	}
}

func TestWaitReadyHonoursContextAndLimit(t *testing.T) {
	b := fake(t, "stubborn")
	b.Admin = "127.0.0.1:1" // nothing answers there
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.WaitReady(ctx, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err %v", err)
	}
	if _, err := b.WaitReady(context.Background(), 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("limit: err %v", err)
	}
}

func TestStopKillsABrokerIgnoringSIGTERM(t *testing.T) {
	b := fake(t, "stubborn")
	if _, err := b.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(300 * time.Millisecond); !errors.Is(err, ErrKilled) {
		t.Fatalf("Stop: %v, want ErrKilled", err)
	}
	select {
	case <-b.Exited():
	default:
		t.Fatal("process still running after Stop")
	}
}

func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		a, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
	base, err := FreePortRun(3)
	if err != nil {
		t.Fatal(err)
	}
	for p := base; p < base+3; p++ {
		if seen[fmt.Sprintf("127.0.0.1:%d", p)] {
			t.Fatalf("run at %d reuses a handed-out port", base)
		}
	}
}

func TestMaxProcsEnv(t *testing.T) {
	if MaxProcsEnv(0) != nil {
		t.Fatal("0 must add nothing")
	}
	if got := MaxProcsEnv(2); len(got) != 1 || got[0] != "GOMAXPROCS=2" {
		t.Fatalf("MaxProcsEnv(2) = %v", got)
	}
	if SplitMaxProcs(1) != 0 || SplitMaxProcs(1000) != 1 {
		t.Fatalf("SplitMaxProcs: 1 -> %d, 1000 -> %d", SplitMaxProcs(1), SplitMaxProcs(1000))
	}
}
