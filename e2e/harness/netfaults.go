package harness

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// NftTable is the bridge table the fault rules live in.
const NftTable = "rlfault"

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

var NftCounterRE = regexp.MustCompile(`counter packets (\d+) bytes \d+ .*comment "([^"]+)"`)

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

// MetadataWhole reports whether resp shows every partition of the given
// topics (name -> partition count) with a leader and 3 replicas in sync.
func MetadataWhole(resp *kmsg.MetadataResponse, want map[string]int) bool {
	seen := 0
	for _, t := range resp.Topics {
		if t.Topic == nil {
			return false
		}
		n, ok := want[*t.Topic]
		if !ok || t.ErrorCode != 0 || len(t.Partitions) != n {
			return false
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) != 3 {
				return false
			}
		}
		seen++
	}
	return seen == len(want)
}
