// Package docs runs the command blocks of README.md and docs/*.md, read
// from the files at test time, against fresh brokers, so that the
// documentation cannot drift from the binary (docs/TESTING.md, "The
// documentation's commands").
//
// Every shell block (```sh, ```bash, or a fence without a language) has a
// marker on the line before its fence:
//
//	<!-- doc-test: NAME [cluster=N] [expect="RE"] [timeout=DUR] -->
//	<!-- doc-test: skip (why it cannot run here) -->
//
// Blocks of one file with one NAME form a scenario: they run in order, in
// one fresh directory, with the processes the earlier ones started still
// running, as in one reader's terminals. A shell block without a marker
// fails TestDocBlocksMarked.
package docs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringlog/ringlog/e2e/harness"
	"github.com/ringlog/ringlog/internal/launch"
)

func TestMain(m *testing.M) { harness.Main(m) }

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "README.md")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

func parseAll(t *testing.T, root string) map[string][]Block {
	t.Helper()
	files, err := DocFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]Block{}
	for _, f := range files {
		bs, err := ParseFile(root, f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = bs
	}
	return out
}

// TestDocBlocksMarked: every shell block of README.md and docs/*.md is
// either run by TestDocBlocks or skipped with a reason, so a new block
// cannot slip in unchecked.
func TestDocBlocksMarked(t *testing.T) {
	root := repoRoot(t)
	all := parseAll(t, root)
	files, _ := DocFiles(root)
	runs := 0
	var unmarked []string
	for _, f := range files {
		for _, b := range all[f] {
			switch {
			case b.Marked && !b.Skip:
				runs++
			case !b.Marked && needsMarker(b.Lang):
				unmarked = append(unmarked, fmt.Sprintf("%s (```%s)", b, b.Lang))
			}
		}
	}
	if len(unmarked) > 0 {
		t.Errorf("shell blocks without a doc-test marker:\n  %s\n"+
			"put <!-- doc-test: NAME --> on the line before the fence to run the block (e2e/docs, docs/TESTING.md), "+
			"<!-- doc-test: skip (why) --> to leave it out, or give an output or code block its language (```text, ```go)",
			strings.Join(unmarked, "\n  "))
	}
	if runs == 0 {
		t.Error("no block is marked to run")
	}
}

// docPorts are the loopback ports the documentation uses: Kafka 9092-9095,
// controller 9192-9195 and admin 9644-9647 (dev cluster's defaults and a
// fourth node). The blocks run on them as written, so they must be free.
func docPorts() []string {
	var ps []string
	for _, base := range []int{9092, 9192, 9644} {
		for i := range 4 {
			ps = append(ps, net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
		}
	}
	return ps
}

func busyPorts() []string {
	var busy []string
	for _, p := range docPorts() {
		ln, err := net.Listen("tcp", p)
		if err != nil {
			busy = append(busy, p)
			continue
		}
		ln.Close()
	}
	return busy
}

// TestDocBlocks runs every scenario of every file, one at a time.
func TestDocBlocks(t *testing.T) {
	root := repoRoot(t)
	// What the documentation assumes besides `make build`.
	for _, tool := range []string{"bash", "make", "kcat", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("RINGLOG_SKIP_EXTERNAL_CLIENTS") == "1" {
				t.Skipf("%s missing and RINGLOG_SKIP_EXTERNAL_CLIENTS=1", tool)
			}
			t.Fatalf("%s not installed: the documentation's commands need bash, make, kcat and curl (apt-get install kcat curl)", tool)
		}
	}
	all := parseAll(t, root)
	files, _ := DocFiles(root)
	for _, f := range files {
		var order []string
		byName := map[string][]Block{}
		for _, b := range all[f] {
			if !b.Marked || b.Skip {
				continue
			}
			if byName[b.Scenario] == nil {
				order = append(order, b.Scenario)
			}
			byName[b.Scenario] = append(byName[b.Scenario], b)
		}
		for _, name := range order {
			t.Run(f+"/"+name, func(t *testing.T) {
				s := newScenario(t, root)
				for _, b := range byName[name] {
					s.runBlock(b)
				}
				s.stopAll(s.bgs)
				s.bgs = nil
				harness.Eventually(t, 30*time.Second, "the documented ports free again", func() (bool, string) {
					b := busyPorts()
					return len(b) == 0, fmt.Sprintf("in use: %v", b)
				})
			})
		}
	}
}

// A scenario is one directory with the binary at bin/ringlog and on PATH,
// and the background processes its blocks started.
type scenario struct {
	t    *testing.T
	root string
	dir  string // the blocks' working directory
	meta string // scripts and background logs
	env  []string
	bgs  []*bgProc
	n    int
}

type bgKind int

const (
	fg      bgKind = iota
	server         // ringlog serve: nodes of one quorum start together
	cluster        // dev cluster, dev join: ready before the next command
	untilCC        // "until Ctrl-C" in its comment: stopped at the block's end
)

type bgProc struct {
	what   string
	kind   bgKind
	ready  []string // admin addresses whose /healthz must say "ok"
	isUp   bool
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func newScenario(t *testing.T, root string) *scenario {
	if busy := busyPorts(); len(busy) > 0 {
		t.Fatalf("ports %v are in use: the documentation's commands run on its own ports (9092.., 9192.., 9644..); stop what holds them (a `make cluster`?)", busy)
	}
	s := &scenario{t: t, root: root, dir: t.TempDir(), meta: t.TempDir()}
	bin := filepath.Join(s.dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// ./bin/ringlog, bin/ringlog and ringlog (on PATH) are the binary
	// under test; bin/fakebroker too where it was built beside it.
	if err := os.Symlink(harness.RinglogBin, filepath.Join(bin, "ringlog")); err != nil {
		t.Fatal(err)
	}
	if fb := filepath.Join(filepath.Dir(harness.RinglogBin), "fakebroker"); fileExists(fb) {
		os.Symlink(fb, filepath.Join(bin, "fakebroker"))
	}
	// `make build` has been done (the binary is in bin/); other targets
	// run the repository's Makefile here, without rebuilding.
	envFile := filepath.Join(s.meta, "env.sh")
	shim := fmt.Sprintf(`make() {
  case "$*" in
  build) [ -x bin/ringlog ] ;;
  *) command make -s -f %q -o build "$@" ;;
  esac
}
`, filepath.Join(root, "Makefile"))
	if err := os.WriteFile(envFile, []byte(shim), 0o644); err != nil {
		t.Fatal(err)
	}
	// The reader's environment, without RINGLOG_* settings that would
	// change what the commands do (the test journal size stays: it only
	// makes broker starts cheaper).
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		if (strings.HasPrefix(k, "RINGLOG_") && k != "RINGLOG_JOURNAL_BYTES") || k == "BASH_ENV" || k == "PATH" || k == "CDPATH" {
			continue
		}
		s.env = append(s.env, e)
	}
	s.env = append(s.env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "BASH_ENV="+envFile)
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLogs()
		}
		s.stopAll(s.bgs)
	})
	return s
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// runBlock runs one block: its foreground commands as bash scripts (set
// -euo pipefail), its long-running commands in the background, waiting
// for their /healthz before the next command needs them.
func (s *scenario) runBlock(b Block) {
	t := s.t
	t.Logf("== %s (```%s)", b, b.Lang)
	if b.Cluster > 0 && !s.serving() {
		s.startBG(b, Command{Text: fmt.Sprintf("ringlog dev cluster --nodes %d", b.Cluster)}, s.dir)
	}
	var out bytes.Buffer
	var chunk []Command
	var blockBG []*bgProc
	flush := func() {
		if len(chunk) > 0 {
			s.waitReady()
			s.runChunk(b, chunk, &out)
			chunk = nil
		}
	}
	for _, c := range Commands(b.Body) {
		kind, _ := s.classify(c)
		if kind == fg {
			chunk = append(chunk, c)
			continue
		}
		flush()
		if p := s.startBG(b, c, s.dir); p.kind == untilCC {
			blockBG = append(blockBG, p)
		}
	}
	flush()
	s.waitReady()
	for _, p := range blockBG {
		select {
		case <-p.exited:
			t.Fatalf("%s: %q ended by itself before Ctrl-C: %v\n%s", b, p.what, p.err, readTail(p.log, 4000))
		default:
		}
	}
	s.stopAll(blockBG)
	for _, p := range blockBG {
		out.WriteString(readTail(p.log, 1<<20))
	}
	var kept []*bgProc
	for _, p := range s.bgs {
		if p.kind != untilCC {
			kept = append(kept, p)
		}
	}
	s.bgs = kept
	for _, re := range b.Expect {
		if !re.Match(out.Bytes()) {
			t.Fatalf("%s: output does not match expect=%q:\n%s", b, re, out.String())
		}
	}
}

func (s *scenario) serving() bool {
	for _, p := range s.bgs {
		if p.kind == server || p.kind == cluster {
			return true
		}
	}
	return false
}

// classify says whether c runs until Ctrl-C, and which admin listeners
// show it ready: `ringlog serve`, `ringlog dev cluster` and `dev join`,
// make targets whose recipe is one of those, and any command whose
// comment says "until Ctrl-C".
func (s *scenario) classify(c Command) (bgKind, []string) {
	ws := c.words()
	if len(ws) == 0 {
		return fg, nil
	}
	if ws[0] == "make" && len(ws) == 2 && ws[1] != "build" {
		cmd := exec.Command("make", "-s", "-n", "-f", filepath.Join(s.root, "Makefile"), "-o", "build", ws[1])
		cmd.Dir = s.dir
		if recipe, err := cmd.Output(); err == nil {
			if lines := strings.Split(strings.TrimSpace(string(recipe)), "\n"); len(lines) == 1 {
				if k, ready := classifyRinglog(Command{Text: lines[0]}.words()); k != fg {
					return k, ready
				}
			}
		}
	}
	if k, ready := classifyRinglog(ws); k != fg {
		return k, ready
	}
	if strings.Contains(strings.ToLower(c.comment()), "until ctrl-c") {
		return untilCC, nil
	}
	return fg, nil
}

func classifyRinglog(ws []string) (bgKind, []string) {
	if len(ws) < 2 || filepath.Base(ws[0]) != "ringlog" {
		return fg, nil
	}
	args := ws[2:]
	admin := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	switch {
	case ws[1] == "serve":
		return server, []string{flagValue(args, "--admin-listen", "127.0.0.1:9644")}
	case ws[1] == "dev" && len(ws) > 2 && ws[2] == "cluster":
		n, _ := strconv.Atoi(flagValue(ws[3:], "--nodes", "3"))
		base, _ := strconv.Atoi(flagValue(ws[3:], "--admin-port", "9644"))
		var ready []string
		for i := range n {
			ready = append(ready, admin(base+i))
		}
		return cluster, ready
	case ws[1] == "dev" && len(ws) > 2 && ws[2] == "join":
		id, _ := strconv.Atoi(flagValue(ws[3:], "--node-id", "0"))
		return cluster, []string{admin(9644 + id - 1)}
	}
	return fg, nil
}

// script writes commands to a file whose line numbers are the Markdown
// file's, so bash's errors point into the documentation.
func (s *scenario) script(b Block, cs []Command) string {
	s.n++
	var sb strings.Builder
	line := 1
	for _, c := range cs {
		for ; line < b.Line+c.Line; line++ {
			sb.WriteByte('\n')
		}
		sb.WriteString(c.Text)
		sb.WriteByte('\n')
		line += strings.Count(c.Text, "\n") + 1
	}
	name := fmt.Sprintf("%s-%d.sh", strings.ReplaceAll(b.File, "/", "_"), b.Line+cs[0].Line)
	path := filepath.Join(s.meta, fmt.Sprintf("%02d-%s", s.n, name))
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return path
}

func (s *scenario) command(script string, out io.Writer) *exec.Cmd {
	cmd := exec.Command("bash", "-euo", "pipefail", script)
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Stdin = nil
	// Its own process group: a timeout or Ctrl-C reaches all of it. Killed
	// with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// runChunk runs foreground commands in one bash, within the block's
// timeout.
func (s *scenario) runChunk(b Block, cs []Command, out *bytes.Buffer) {
	t := s.t
	for _, c := range cs {
		t.Logf("$ %s", strings.TrimSpace(c.Text))
	}
	var mine bytes.Buffer
	cmd := s.command(s.script(b, cs), io.MultiWriter(out, &mine))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(b.Timeout):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		err = fmt.Errorf("still running after %v (timeout=%v in its marker); killed", b.Timeout, b.Timeout)
	}
	if mine.Len() > 0 {
		t.Logf("%s", strings.TrimRight(mine.String(), "\n"))
	}
	if err != nil {
		t.Fatalf("%s: the block's commands from line %d failed: %v\n%s", b, b.Line+cs[0].Line, err, mine.String())
	}
}

// startBG starts a command that runs until Ctrl-C in its own process
// group, its output in a log.
func (s *scenario) startBG(b Block, c Command, dir string) *bgProc {
	t := s.t
	kind, ready := s.classify(c)
	if kind == fg {
		kind = untilCC
	}
	// Nodes of one quorum start together; anything else waits for what
	// runs already (`dev join` reads the cluster's cluster.json).
	if kind != server || !s.onlyServers() {
		s.waitReady()
	}
	what := strings.TrimSpace(c.Text)
	t.Logf("$ %s &    # until Ctrl-C; ready: %v", what, ready)
	s.n++
	p := &bgProc{what: what, kind: kind, ready: ready, isUp: len(ready) == 0, exited: make(chan struct{})}
	p.log = filepath.Join(s.meta, fmt.Sprintf("%02d-background.log", s.n))
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	script := s.script(b, []Command{c})
	if c.Line == 0 { // the marker's cluster=N
		os.WriteFile(script, []byte(c.Text+"\n"), 0o644)
	}
	p.cmd = s.command(script, f)
	p.cmd.Dir = dir
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	s.bgs = append(s.bgs, p)
	return p
}

func (s *scenario) onlyServers() bool {
	for _, p := range s.bgs {
		if p.kind != server {
			return false
		}
	}
	return true
}

// waitReady waits until every background command's admin listeners answer
// /healthz with status "ok".
func (s *scenario) waitReady() {
	for _, p := range s.bgs {
		if p.isUp {
			continue
		}
		harness.Eventually(s.t, 90*time.Second, fmt.Sprintf("%q ready (/healthz of %v)", p.what, p.ready), func() (bool, string) {
			select {
			case <-p.exited:
				s.t.Fatalf("%q exited: %v\n%s", p.what, p.err, readTail(p.log, 4000))
			default:
			}
			for _, a := range p.ready {
				h, err := launch.Health(a)
				if err != nil {
					return false, fmt.Sprintf("%s: %v", a, err)
				}
				if h["status"] != "ok" {
					return false, fmt.Sprintf("%s: status %v", a, h["status"])
				}
			}
			return true, ""
		})
		p.isUp = true
	}
}

// stopAll presses Ctrl-C: SIGINT to every process group at once (the
// nodes of a quorum stop together), then waits; a command that does not
// stop within 30 s, or stops with an error, fails the test.
func (s *scenario) stopAll(ps []*bgProc) {
	for _, p := range ps {
		select {
		case <-p.exited:
		default:
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
		}
	}
	for _, p := range ps {
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
			s.t.Errorf("%q did not stop within 30 s of Ctrl-C; killed\n%s", p.what, readTail(p.log, 4000))
			continue
		}
		if !stoppedCleanly(p.err) {
			s.t.Errorf("%q stopped with %v after Ctrl-C\n%s", p.what, p.err, readTail(p.log, 4000))
		}
	}
}

// stoppedCleanly: exit status 0 or 130, or killed by the SIGINT itself.
func stoppedCleanly(err error) bool {
	if err == nil {
		return true
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ((ws.Signaled() && ws.Signal() == syscall.SIGINT) || ws.ExitStatus() == 130)
}

func readTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// dumpLogs logs the background commands' output and the tails of the
// brokers' logs under the scenario's directory.
func (s *scenario) dumpLogs() {
	for _, p := range s.bgs {
		s.t.Logf("--- output of %q:\n%s", p.what, readTail(p.log, 4000))
	}
	filepath.WalkDir(s.dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "ringlog.log" {
			s.t.Logf("--- %s (tail):\n%s", path, readTail(path, 3000))
		}
		return nil
	})
}
