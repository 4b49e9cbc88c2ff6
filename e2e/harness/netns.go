package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// NftOrSkip returns the path of nft(8), or skips the test.
func (tn *Net) NftOrSkip() string {
	tn.t.Helper()
	nft := LookTool("nft")
	if nft == "" {
		tn.t.Skip("network fault tests need nft (Debian package nftables)")
	}
	tn.nftRun(nft, fmt.Sprintf("table bridge %s {\n chain fw {\n  type filter hook forward priority 0; policy accept;\n }\n}\n", NftTable))
	return nft
}

func (tn *Net) nftRun(nft, script string) {
	tn.t.Helper()
	cmd := exec.Command(nft, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		tn.t.Fatalf("nft -f -: %v %s\nscript:\n%s", err, out, script)
	}
}

// SetRules replaces the fault rules with rules (each an nft rule body).
func (tn *Net) SetRules(nft string, rules ...string) {
	tn.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "flush chain bridge %s fw\n", NftTable)
	for _, r := range rules {
		fmt.Fprintf(&b, "add rule bridge %s fw %s\n", NftTable, r)
	}
	tn.nftRun(nft, b.String())
}

// Port is the bridge-side interface of node i (0-based).
func (tn *Net) Port(i int) string { return tn.nodes[i].port }

// DropRule drops frames from node a to node b, counted under name.
func (tn *Net) DropRule(a, b int, name string) string {
	return fmt.Sprintf(`iifname "%s" oifname "%s" counter drop comment "%s"`, tn.Port(a), tn.Port(b), name)
}

// CutRules cut every node of as off from every node of bs, both ways.
func (tn *Net) CutRules(as, bs []int) []string {
	var out []string
	for _, a := range as {
		for _, b := range bs {
			out = append(out, tn.DropRule(a, b, fmt.Sprintf("cut-%d-%d", a+1, b+1)), tn.DropRule(b, a, fmt.Sprintf("cut-%d-%d", b+1, a+1)))
		}
	}
	return out
}

// LossRules drop pct% of the frames node i sends to or receives from
// other brokers (i < 0: of every broker-to-broker frame). The count-only
// rules before them give the probe its denominator.
func (tn *Net) LossRules(i, pct int) []string {
	match := []string{""}
	if i >= 0 {
		match = []string{fmt.Sprintf(`iifname "%s" `, tn.Port(i)), fmt.Sprintf(`oifname "%s" `, tn.Port(i))}
	}
	var out []string
	for k, m := range match {
		out = append(out, fmt.Sprintf(`%scounter comment "seen-%d"`, m, k))
		out = append(out, fmt.Sprintf(`%snumgen random mod 100 < %d counter drop comment "loss-%d"`, m, pct, k))
	}
	return out
}

// Counters reads the fault rules' packet counters by comment.
func (tn *Net) Counters(nft string) map[string]int64 {
	tn.t.Helper()
	out, err := exec.Command(nft, "list", "chain", "bridge", NftTable, "fw").CombinedOutput()
	if err != nil {
		tn.t.Fatalf("nft list chain: %v %s", err, out)
	}
	m := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if g := NftCounterRE.FindStringSubmatch(sc.Text()); g != nil {
			n, _ := strconv.ParseInt(g[1], 10, 64)
			m[g[2]] += n
		}
	}
	return m
}

// Reachable reports whether node from (0-based; -1: the clients' side)
// can open a TCP connection to node to's admin port within limit.
func (tn *Net) Reachable(c *Cluster, from, to int, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	addr := c.Node(int32(to + 1)).Admin
	var nd net.Dialer
	d := nd.DialContext
	if from >= 0 {
		d = tn.Dialer(from)
	}
	conn, err := d(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// NetnsChildEnv marks the re-executed child; its value is the test name.
const NetnsChildEnv = "RINGLOG_TEST_NETNS_CHILD"

// The bridge's /24 and the bridge's own address (used inside the private
// namespace only).
const (
	NetnsSubnet = "169.254.77."
	BridgeMAC   = "02:00:0a:4d:00:fe"
)

// LookTool finds an iproute2/util-linux tool in PATH or the sbin dirs
// (root's PATH may lack them).
func LookTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// InNetnsChildFor is inNetnsChild with the child's test timeout.
func InNetnsChildFor(t *testing.T, limit time.Duration) bool {
	t.Helper()
	if os.Getenv(NetnsChildEnv) == t.Name() {
		return true
	}
	unshare, ip := LookTool("unshare"), LookTool("ip")
	if unshare == "" || ip == "" {
		t.Skipf("network partition tests need unshare and ip (iproute2); found unshare=%q ip=%q", unshare, ip)
	}
	if out, err := exec.Command(unshare, "-n", "true").CombinedOutput(); err != nil {
		t.Skipf("network partition tests need CAP_NET_ADMIN (unshare -n: %v %s)", err, strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "-n", "--", os.Args[0],
		"-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout="+limit.String())
	cmd.Env = append(os.Environ(), NetnsChildEnv+"="+t.Name(), "RINGLOG_TEST_BIN="+RinglogBin)
	out := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A child killed at the timeout cannot clean up: its brokers and
	// named namespaces are found by its pid.
	pid := cmd.Process.Pid
	t.Cleanup(func() { ReapNetns(t, ip, pid) })
	err := cmd.Wait()
	text := out.String()
	for _, ln := range strings.Split(text, "\n") {
		if IsSummaryLine(ln) {
			fmt.Println(ln)
		}
	}
	switch {
	case err != nil:
		t.Fatalf("child in a private network namespace: %v\n%s", err, text)
	case strings.Contains(text, "--- SKIP: "+t.Name()):
		t.Skipf("child skipped:\n%s", text)
	case !strings.Contains(text, "--- PASS: "+t.Name()):
		t.Fatalf("child did not run %s:\n%s", t.Name(), text)
	}
	t.Logf("child output:\n%s", text)
	return false
}

// IsSummaryLine matches the one-line results tests print with fmt.Printf.
func IsSummaryLine(ln string) bool {
	return strings.HasPrefix(ln, "partition: ") || strings.HasPrefix(ln, "netfaults: ")
}

// ReapNetns kills what is left in the namespaces a child (by pid) created,
// and deletes them.
func ReapNetns(t *testing.T, ip string, pid int) {
	ents, _ := os.ReadDir("/run/netns")
	prefix := fmt.Sprintf("rlpart-%d-", pid)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		out, _ := exec.Command(ip, "netns", "pids", e.Name()).Output()
		for _, f := range strings.Fields(string(out)) {
			if p, err := strconv.Atoi(f); err == nil {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if out, err := exec.Command(ip, "netns", "del", e.Name()).CombinedOutput(); err != nil {
			t.Logf("ip netns del %s: %v %s", e.Name(), err, out)
		}
	}
}

// Net is the bridge and the brokers' namespaces inside the child.
type Net struct {
	t        *testing.T
	ip       string // path of ip(8)
	bridge   string // path of bridge(8), "" to partition by link down
	nodes    []NetNode
	isolated map[int]bool
}

type NetNode struct {
	ns   string // named netns
	port string // bridge-side veth
	ip   string
	mac  string
}

// NewNet builds n broker namespaces on a bridge in the current
// (private) namespace; it skips the test where namespaces cannot be made.
func NewNet(t *testing.T, n int) *Net {
	t.Helper()
	tn := &Net{t: t, ip: LookTool("ip"), bridge: LookTool("bridge"), isolated: map[int]bool{}}
	if tn.ip == "" {
		t.Skip("network partition tests need ip (iproute2)")
	}
	pid := os.Getpid()
	for i := range n {
		tn.nodes = append(tn.nodes, NetNode{
			ns:   fmt.Sprintf("rlpart-%d-%d", pid, i+1),
			port: fmt.Sprintf("rlp%d", i+1),
			ip:   fmt.Sprintf("%s%d", NetnsSubnet, i+1),
			mac:  fmt.Sprintf("02:00:0a:4d:00:%02x", i+1),
		})
	}
	// Deleting the namespaces ends their veths; the bridge goes with this
	// process's namespace.
	t.Cleanup(func() {
		for _, nd := range tn.nodes {
			if _, err := os.Stat("/run/netns/" + nd.ns); err == nil {
				tn.run("netns", "del", nd.ns)
			}
		}
	})
	if out, err := exec.Command(tn.ip, "netns", "add", tn.nodes[0].ns).CombinedOutput(); err != nil {
		msg := strings.TrimSpace(string(out))
		if errors.Is(err, os.ErrPermission) || strings.Contains(msg, "ermission") || strings.Contains(msg, "not permitted") {
			t.Skipf("network partition tests need CAP_NET_ADMIN (ip netns add: %v %s)", err, msg)
		}
		t.Fatalf("ip netns add %s: %v %s", tn.nodes[0].ns, err, msg)
	}
	tn.run("link", "set", "lo", "up")
	tn.run("link", "add", "rlbr0", "address", BridgeMAC, "type", "bridge")
	tn.run("addr", "add", NetnsSubnet+"254/24", "dev", "rlbr0")
	tn.run("link", "set", "rlbr0", "up")
	for i, nd := range tn.nodes {
		if i > 0 {
			tn.run("netns", "add", nd.ns)
		}
		tn.run("link", "add", nd.port, "type", "veth", "peer", "name", nd.port+"x", "address", nd.mac)
		tn.run("link", "set", nd.port, "master", "rlbr0", "up")
		tn.run("link", "set", nd.port+"x", "netns", nd.ns)
		in := []string{"-n", nd.ns}
		tn.run(append(in, "link", "set", "lo", "up")...)
		tn.run(append(in, "link", "set", nd.port+"x", "name", "eth0")...)
		tn.run(append(in, "addr", "add", nd.ip+"/24", "dev", "eth0")...)
		tn.run(append(in, "link", "set", "eth0", "up")...)
	}
	// Static neighbours: no ARP, so a cut link is pure packet loss.
	for i, nd := range tn.nodes {
		tn.run("neigh", "replace", nd.ip, "lladdr", nd.mac, "dev", "rlbr0", "nud", "permanent")
		tn.run("-n", nd.ns, "neigh", "replace", NetnsSubnet+"254", "lladdr", BridgeMAC, "dev", "eth0", "nud", "permanent")
		for j, peer := range tn.nodes {
			if i != j {
				tn.run("-n", nd.ns, "neigh", "replace", peer.ip, "lladdr", peer.mac, "dev", "eth0", "nud", "permanent")
			}
		}
	}
	return tn
}

func (tn *Net) run(args ...string) {
	tn.t.Helper()
	if out, err := exec.Command(tn.ip, args...).CombinedOutput(); err != nil {
		tn.t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// Specs are cluster nodes listening on their namespace's address, with the
// same ports everywhere (each namespace has its own port space).
func (tn *Net) Specs() []NodeSpec {
	var out []NodeSpec
	for _, nd := range tn.nodes {
		out = append(out, NodeSpec{
			Addr: nd.ip + ":9092", Ctrl: nd.ip + ":9093", admin: nd.ip + ":9644",
			prefix: []string{tn.ip, "netns", "exec", nd.ns},
		})
	}
	return out
}

// Isolate cuts node i (0-based) off from everyone, test clients included:
// its bridge port stops forwarding.
func (tn *Net) Isolate(i int) {
	tn.t.Helper()
	tn.setPort(i, false)
	tn.isolated[i] = true
}

// Heal reconnects node i.
func (tn *Net) Heal(i int) {
	tn.t.Helper()
	tn.setPort(i, true)
	delete(tn.isolated, i)
}

// HealAll reconnects every isolated node (cleanup: brokers then shut down
// with their peers reachable).
func (tn *Net) HealAll() {
	for i := range tn.isolated {
		tn.Heal(i)
	}
}

func (tn *Net) setPort(i int, up bool) {
	tn.t.Helper()
	port := tn.nodes[i].port
	if tn.bridge == "" {
		state := map[bool]string{true: "up", false: "down"}[up]
		tn.run("link", "set", port, state)
		return
	}
	// STP is off, so the port state is ours to set: 0 disabled, 3
	// forwarding.
	state := map[bool]string{true: "3", false: "0"}[up]
	if out, err := exec.Command(tn.bridge, "link", "set", "dev", port, "state", state).CombinedOutput(); err != nil {
		tn.t.Fatalf("bridge link set dev %s state %s: %v %s", port, state, err, out)
	}
}

// Dialer dials from inside node i's namespace: a client there is on the
// isolated node's side of a partition.
func (tn *Net) Dialer(i int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	path := "/run/netns/" + tn.nodes[i].ns
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			// The socket belongs to the namespace of the thread that
			// creates it: switch this thread there and back. A thread
			// that cannot switch back stays locked and exits with the
			// goroutine. (Threads must not exit otherwise: a broker
			// started from one gets its Pdeathsig when it does.)
			runtime.LockOSThread()
			orig, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, err}
				return
			}
			defer orig.Close()
			f, err := os.Open(path)
			if err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, err}
				return
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, fmt.Errorf("setns %s: %w", path, err)}
				return
			}
			// Bounded: across a partition a SYN is never answered.
			d := net.Dialer{Timeout: 3 * time.Second}
			c, err := d.DialContext(ctx, network, addr)
			if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}
