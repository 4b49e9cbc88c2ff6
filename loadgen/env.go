package loadgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringlog/ringlog/results"
)

// Version and Commit name this build in result.json. cmd/ringlog sets them
// from the values its Makefile links in (-X main.version/main.commit),
// because builds here use -buildvcs=false and so debug.BuildInfo carries
// no vcs.revision; empty or "unknown" falls back to the build info.
var Version, Commit string

// Environment describes this machine, this binary and, when adminAddr is
// given, the broker (its /healthz JSON).
func Environment(adminAddr, client string) results.Environment {
	env := results.Environment{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Client: client}
	// A local run has one client host; a distributed run replaces these
	// with the sum over its agents.
	env.ClientHosts, env.ClientCPUs = 1, env.Cores
	env.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		env.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				env.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		env.LoadgenVersion = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				env.LoadgenCommit = s.Value
			}
		}
	}
	if Version != "" {
		env.LoadgenVersion = Version
	}
	if Commit != "" && (Commit != "unknown" || env.LoadgenCommit == "") {
		env.LoadgenCommit = Commit
	}
	if adminAddr != "" {
		if err := brokerHealth(adminAddr, &env); err != nil {
			env.BrokerHealthz = err.Error()
		}
	}
	return env
}

func brokerHealth(admin string, env *results.Environment) error {
	url := admin
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	url = strings.TrimSuffix(url, "/")
	if !strings.HasSuffix(url, "/healthz") {
		url += "/healthz"
	}
	cl := http.Client{Timeout: 3 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	var h struct {
		// Raw: the broker may send strings, numbers or objects here.
		IOPath  json.RawMessage `json:"io_path"`
		Fsync   json.RawMessage `json:"fsync"`
		Version json.RawMessage `json:"version"`
		Commit  json.RawMessage `json:"commit"`
		// Absent (0) from brokers that do not report them.
		MaxProcs    int    `json:"max_procs"`
		NumCPU      int    `json:"num_cpu"`
		SchedPolicy string `json:"sched_policy"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	env.BrokerIOPath, env.BrokerFsync, env.BrokerVersion = rawString(h.IOPath), rawString(h.Fsync), rawString(h.Version)
	env.BrokerMaxProcs, env.BrokerCPUs, env.BrokerSchedPolicy = h.MaxProcs, h.NumCPU, h.SchedPolicy
	if len(h.Commit) > 0 {
		env.BrokerCommit = rawString(h.Commit)
	}
	return nil
}

func rawString(m json.RawMessage) string {
	var s string
	if json.Unmarshal(m, &s) == nil {
		return s
	}
	return string(m)
}

// withEnvironment sets run's environment: this machine and the broker's
// /healthz, keeping the topic settings the run itself recorded (RF, min
// ISR, partitions, acks, compression), which only the run knows.
func withEnvironment(run *results.Run, admin, client string) {
	env, t := Environment(admin, client), run.Result.Environment
	env.ReplicationFactor, env.MinISR, env.Partitions = t.ReplicationFactor, t.MinISR, t.Partitions
	env.Acks, env.Compression = t.Acks, t.Compression
	run.Result.Environment = env
}
