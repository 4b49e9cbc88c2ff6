package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/internal/launch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDevCluster: `ringlog dev cluster --nodes 3` (what `make cluster`
// runs) prints a bootstrap list that clients use for an RF=3 topic with
// acks=all, and Ctrl-C stops every node.
func TestDevCluster(t *testing.T) {
	kafka, ctrl, admin := harness.FreePortRun(t, 3), harness.FreePortRun(t, 3), harness.FreePortRun(t, 3)
	cmd := exec.Command(harness.RinglogBin, "dev", "cluster", "--nodes", "3", "--base-dir", t.TempDir(),
		"--kafka-port", fmt.Sprint(kafka), "--controller-port", fmt.Sprint(ctrl), "--admin-port", fmt.Sprint(admin),
		"--", "--io", harness.IOMode(), "--group-initial-rebalance-delay", "100ms")
	lines, exited, stderr := startLines(t, cmd, 40*time.Second)
	var boot string
	timeout := time.After(90 * time.Second)
	for boot == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("dev cluster ended before it was ready: %v\n%s", <-exited, stderr.String())
			}
			if rest, found := strings.CutPrefix(l, "cluster ready: bootstrap "); found {
				boot = strings.Fields(rest)[0]
			}
		case <-timeout:
			t.Fatalf("dev cluster not ready after 90s\n%s", stderr.String())
		}
	}
	seeds := strings.Split(boot, ",")
	if len(seeds) != 3 || seeds[0] != fmt.Sprintf("127.0.0.1:%d", kafka) {
		t.Fatalf("bootstrap %q", boot)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("dev"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	harness.CreateTopic(t, adm, "dev", 3, 3)
	ctx := harness.Context(t, 30*time.Second)
	var rs []*kgo.Record
	for i := range 100 {
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := harness.ConsumeAll(ctx, t, seeds[1], "dev", 100); len(got) != 100 {
		t.Fatalf("consumed %d of 100", len(got))
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 3 {
		t.Fatalf("metadata lists %d brokers (%v)", len(md.Brokers), err)
	}
	// The nodes split this machine's cores.
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		h, err := launch.Health(fmt.Sprintf("127.0.0.1:%d", admin))
		if want := float64(max(1, runtime.GOMAXPROCS(0)/3)); err != nil || h["max_procs"] != want {
			t.Fatalf("node 1 /healthz max_procs %v (%v), want %v", h["max_procs"], err, want)
		}
	}

	// Ctrl-C: the command stops all nodes and exits cleanly.
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("dev cluster exit: %v\n%s", err, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("dev cluster still running 40s after SIGINT")
	}
	for i := range 3 {
		addr := fmt.Sprintf("127.0.0.1:%d", admin+i)
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("node %d's admin listener %s still answers after the cluster stopped", i+1, addr)
		}
	}
}
