package results

import (
	"fmt"
	"sort"
	"strings"
)

// What one acknowledged message costs the brokers: CPU time and thread
// context switches over the measured window, divided by the messages
// acknowledged in it. Everything a broker does in the window counts
// (replication, consumer fetches, timers): the per-message numbers are
// the whole cost of the workload, per message. A context switch costs a
// few microseconds of CPU directly and more in cold caches, and a count
// has no timing noise, so it is the number to compare across brokers and
// changes; CPU-µs per message is the total.

// CtxSwitches is context switches over the window: every thread's
// voluntary (it blocked: a futex, a read, epoll) and involuntary (it was
// preempted) switches.
type CtxSwitches struct {
	Voluntary   int64 `json:"voluntary"`
	Involuntary int64 `json:"involuntary"`
	// PerMsg is Voluntary+Involuntary per message acknowledged.
	PerMsg float64 `json:"per_msg"`
	// ByThread breaks the switches down by thread name (comm with a
	// trailing number replaced by "*": Go's threads carry the process's
	// name, io_uring workers are iou-wrk-*), most switches first.
	// ExitedThreadsName is the switches of threads that exited during
	// the window, where they were counted.
	ByThread []ThreadSwitches `json:"by_thread,omitempty"`
	// ThreadsStarted and ThreadsExited count threads that appeared
	// (counted from 0) or were gone at the window's end.
	ThreadsStarted int `json:"threads_started,omitempty"`
	ThreadsExited  int `json:"threads_exited,omitempty"`
	// ExitedCounted says the totals include the switches of threads that
	// exited during the window (getrusage: brokers known by admin
	// address). Without it (brokers known by pid, read from /proc) an
	// exited thread's switches are lost.
	ExitedCounted bool `json:"exited_threads_counted"`
}

// ExitedThreadsName is the ByThread entry of threads that exited during
// the window (known only from getrusage totals).
const ExitedThreadsName = "(exited threads)"

// Total is voluntary plus involuntary switches.
func (c *CtxSwitches) Total() int64 { return c.Voluntary + c.Involuntary }

// ThreadSwitches is the switches of the threads of one name.
type ThreadSwitches struct {
	Name        string `json:"name"`
	Threads     int    `json:"threads"`
	Voluntary   int64  `json:"voluntary"`
	Involuntary int64  `json:"involuntary"`
}

// Total is voluntary plus involuntary switches.
func (t ThreadSwitches) Total() int64 { return t.Voluntary + t.Involuntary }

// BrokerProcess is one broker process over the window.
type BrokerProcess struct {
	// PID is the process id (on the broker's machine); Admin the admin
	// address it was read from, "" for a process read from /proc.
	PID   int    `json:"pid"`
	Admin string `json:"admin,omitempty"`
	// Name is the process's comm.
	Name            string       `json:"name,omitempty"`
	Seconds         float64      `json:"cpu_s"`
	CPUMicrosPerMsg float64      `json:"cpu_us_per_msg,omitempty"`
	CtxSwitches     *CtxSwitches `json:"ctx_switches,omitempty"`
}

// Label names the process in reports: "pid 123 (ringlog)", with the admin
// address it was read from.
func (p BrokerProcess) Label() string {
	s := fmt.Sprintf("pid %d", p.PID)
	if p.Name != "" {
		s += " (" + p.Name + ")"
	}
	if p.Admin != "" {
		s = p.Admin + " " + s
	}
	return s
}

// GeneratorCPU is the load generator's own CPU time over the measured
// window (getrusage: every thread).
type GeneratorCPU struct {
	WindowS     float64 `json:"window_s"`
	Seconds     float64 `json:"cpu_s"`
	Voluntary   int64   `json:"voluntary_ctxt_switches"`
	Involuntary int64   `json:"nonvoluntary_ctxt_switches"`
	// Cores is the CPUs the generator could run on, the machine's for the
	// contention check; 0 for the sum of several generators (a merge).
	Cores int `json:"cores,omitempty"`
	// Processes is how many generators are summed (1 but for merges).
	Processes int `json:"processes"`
	// MachineBusyCores is how many of Cores the whole machine kept busy
	// over the window (/proc/stat): brokers and generator, and also the
	// kernel's own threads (block completions, writeback, softirq) and
	// any other process. 0 when not read, or for a merge.
	MachineBusyCores float64 `json:"machine_busy_cores,omitempty"`
}

// NewBrokerCPU sums brokers measured over windowS seconds in which acked
// messages of bytes payload bytes were acknowledged, and works out the
// per-message and per-GB numbers, summed and per broker. The sum has
// context switches only when every broker has them.
func NewBrokerCPU(windowS float64, brokers []BrokerProcess, acked, bytes int64, sameHost bool) *BrokerCPU {
	c := &BrokerCPU{Processes: len(brokers), WindowS: windowS, MessagesAcked: acked, SameHost: sameHost,
		Brokers: append([]BrokerProcess(nil), brokers...)}
	var sw *CtxSwitches
	byName := map[string]*ThreadSwitches{}
	for i := range c.Brokers {
		b := &c.Brokers[i]
		c.Seconds += b.Seconds
		b.CPUMicrosPerMsg = perMsg(b.Seconds*1e6, acked)
		if b.CtxSwitches == nil {
			continue
		}
		bs := *b.CtxSwitches
		bs.PerMsg = perMsg(float64(bs.Total()), acked)
		b.CtxSwitches = &bs
		if sw == nil {
			sw = &CtxSwitches{ExitedCounted: true}
		}
		sw.Voluntary += bs.Voluntary
		sw.Involuntary += bs.Involuntary
		sw.ThreadsStarted += bs.ThreadsStarted
		sw.ThreadsExited += bs.ThreadsExited
		sw.ExitedCounted = sw.ExitedCounted && bs.ExitedCounted
		for _, t := range bs.ByThread {
			m := byName[t.Name]
			if m == nil {
				m = &ThreadSwitches{Name: t.Name}
				byName[t.Name] = m
			}
			m.Threads += t.Threads
			m.Voluntary += t.Voluntary
			m.Involuntary += t.Involuntary
		}
	}
	for _, b := range c.Brokers {
		if b.CtxSwitches == nil {
			sw = nil // a sum over some brokers would pass for all of them
		}
	}
	if sw != nil {
		for _, t := range byName {
			sw.ByThread = append(sw.ByThread, *t)
		}
		SortThreads(sw.ByThread)
		sw.PerMsg = perMsg(float64(sw.Total()), acked)
		c.CtxSwitches = sw
	}
	c.CPUMicrosPerMsg = perMsg(c.Seconds*1e6, acked)
	if bytes > 0 {
		c.PerGB = c.Seconds / (float64(bytes) / 1e9)
	}
	return c
}

func perMsg(v float64, msgs int64) float64 {
	if msgs <= 0 {
		return 0
	}
	return v / float64(msgs)
}

// SortThreads orders thread groups most switches first, then by name.
func SortThreads(ts []ThreadSwitches) {
	sort.Slice(ts, func(i, j int) bool {
		if ti, tj := ts[i].Total(), ts[j].Total(); ti != tj {
			return ti > tj
		}
		return ts[i].Name < ts[j].Name
	})
}

// threadsCell is the breakdown by thread name per message: "ringlog
// 3.50, iou-wrk-* 0.71", at most max names (the rest summed as "other").
func threadsCell(c *CtxSwitches, acked int64, max int) string {
	if c == nil || len(c.ByThread) == 0 || acked <= 0 {
		return ""
	}
	var parts []string
	var other int64
	for i, t := range c.ByThread {
		if i >= max {
			other += t.Total()
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", t.Name, perMsg(float64(t.Total()), acked)))
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("other %.2f", perMsg(float64(other), acked)))
	}
	return strings.Join(parts, ", ")
}

// exitedNote says what became of the switches of threads that exited.
func exitedNote(c *CtxSwitches) string {
	switch {
	case c == nil || c.ThreadsExited == 0:
		return ""
	case c.ExitedCounted:
		return fmt.Sprintf("%d thread(s) exited in the window, counted", c.ThreadsExited)
	}
	return fmt.Sprintf("%d thread(s) exited in the window: their switches are not counted", c.ThreadsExited)
}

// ContentionShare is the share of the machine's cores, brokers and
// generator together (or the whole machine, where read), above which a
// run measured CPU contention.
const ContentionShare = 0.9

// Contention is the CPU the brokers and the generator used together over
// the window, in cores, against the cores of the machine they share.
type Contention struct {
	Brokers, Generator float64 // cores used (CPU-s per second)
	// Machine is the whole machine's busy cores (0: not read). Above
	// brokers plus generator, the rest is the kernel's own threads and
	// interrupt work (block I/O completions, writeback, softirq) and
	// other processes, which the processes' own CPU times leave out.
	Machine float64
	Cores   int
}

// Used is the cores in use: the machine's where read.
func (c Contention) Used() float64 { return max(c.Brokers+c.Generator, c.Machine) }

// Share is the fraction of the machine's cores used.
func (c Contention) Share() float64 { return c.Used() / float64(c.Cores) }

// Contended says the run used more than ContentionShare of the cores.
func (c Contention) Contended() bool { return c.Share() > ContentionShare }

// Note is the verdict's explanation of a contended run.
func (c Contention) Note() string {
	other := ""
	if o := c.Machine - c.Brokers - c.Generator; o > 0.005 {
		other = fmt.Sprintf(" + the kernel's threads and other work %.2f", o)
	}
	return fmt.Sprintf("CPU contention: brokers %.2f + generator %.2f%s of %d cores (%.0f%%): this run measured the machine, not the broker",
		c.Brokers, c.Generator, other, c.Cores, 100*c.Share())
}

// CPUContention is the CPU use of brokers and generator on their shared
// machine; ok is false when it is not known (brokers elsewhere or not
// measured, the generator spread over several machines).
func CPUContention(b *BrokerCPU, g *GeneratorCPU) (c Contention, ok bool) {
	if b == nil || g == nil || !b.SameHost || g.Cores <= 0 || b.WindowS <= 0 || g.WindowS <= 0 {
		return c, false
	}
	return Contention{Brokers: b.Seconds / b.WindowS, Generator: g.Seconds / g.WindowS, Machine: g.MachineBusyCores, Cores: g.Cores}, true
}

// contentionNote is the note of a contended run, "" otherwise; a sweep
// names its contended rows.
func contentionNote(r *Result) string {
	if len(r.Sweep) == 0 {
		if c, ok := CPUContention(r.BrokerCPU, r.GeneratorCPU); ok && c.Contended() {
			return c.Note()
		}
		return ""
	}
	var rows []string
	cores := 0
	for _, row := range r.Sweep {
		if c, ok := CPUContention(row.BrokerCPU, row.GeneratorCPU); ok && c.Contended() {
			rows = append(rows, fmt.Sprintf("%d partitions (%.0f%%)", row.Partitions, 100*c.Share()))
			cores = c.Cores
		}
	}
	if len(rows) == 0 {
		return ""
	}
	return fmt.Sprintf("CPU contention at %s of %d cores (brokers, generator and, where read, the kernel's own work): those rows measured the machine, not the broker",
		strings.Join(rows, ", "), cores)
}

// mergeGenerators sums the generators of merged runs (nil when none
// measured its own).
func mergeGenerators(runs []*Run) *GeneratorCPU {
	var g *GeneratorCPU
	for _, r := range runs {
		in := r.Result.GeneratorCPU
		if in == nil {
			continue
		}
		if g == nil {
			g = &GeneratorCPU{}
		}
		g.WindowS = max(g.WindowS, in.WindowS)
		g.Seconds += in.Seconds
		g.Voluntary += in.Voluntary
		g.Involuntary += in.Involuntary
		g.Processes += max(in.Processes, 1)
	}
	return g
}

// cpuUsPerMsgCell and switchesPerMsgCell are table cells, "-" when not
// measured.
func cpuUsPerMsgCell(c *BrokerCPU) string {
	if c == nil || c.MessagesAcked <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", c.CPUMicrosPerMsg)
}

func switchesPerMsgCell(c *BrokerCPU) string {
	if c == nil || c.CtxSwitches == nil || c.MessagesAcked <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", c.CtxSwitches.PerMsg)
}

// machineCoresCell is the machine's busy cores over the window, "-"
// when not read.
func machineCoresCell(g *GeneratorCPU) string {
	if g == nil || g.MachineBusyCores <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", g.MachineBusyCores)
}

func generatorCoresCell(g *GeneratorCPU) string {
	if g == nil || g.WindowS <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", g.Seconds/g.WindowS)
}

// machineCell is the share of the shared machine's cores brokers and
// generator used, "-" when they do not share one; "!" marks contention.
func machineCell(b *BrokerCPU, g *GeneratorCPU) string {
	c, ok := CPUContention(b, g)
	if !ok {
		return "-"
	}
	s := fmt.Sprintf("%.0f%% of %d", 100*c.Share(), c.Cores)
	if c.Contended() {
		s += " !"
	}
	return s
}
