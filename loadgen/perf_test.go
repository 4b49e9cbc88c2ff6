package loadgen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// perfScriptSample is `perf script` output in the shapes perf 6.x prints:
// a plain header, a space-padded one with pid/tid, kernel frames, an
// unresolved frame and a command name with a space.
const perfScriptSample = `ringlog 19089  1069.142726:    5025125 cpu-clock:pppH: 
	ffffffff816e6178 touch_atime+0x38 ([kernel.kallsyms])
	ffffffff816b9aa3 __x64_sys_pread64+0xa3 ([kernel.kallsyms])
	            de0e internal/runtime/syscall/linux.Syscall6+0xe (/tmp/rl/ringlog)
	          405a85 github.com/ringlog/ringlog/engine.(*Partition).Read+0xe5 (/tmp/rl/ringlog)
	           97fc1 runtime.goexit.abi0+0x1 (/tmp/rl/ringlog)

         ringlog 19086/19468  1069.173876:    5025125 cpu-clock:pppH: 
	           4f486 runtime.(*spanSet).push+0x166 (/tmp/rl/ringlog)
	           26f25 runtime.mallocgc+0x145 (/tmp/rl/ringlog)
	           97fc1 runtime.goexit.abi0+0x1 (/tmp/rl/ringlog)

ringlog 19089  1069.180001:    5025125 cpu-clock:pppH: 
	ffffffff816e6178 touch_atime+0x99 ([kernel.kallsyms])
	ffffffff816b9aa3 __x64_sys_pread64+0xa3 ([kernel.kallsyms])
	            de0e internal/runtime/syscall/linux.Syscall6+0x10 (/tmp/rl/ringlog)
	          405a85 github.com/ringlog/ringlog/engine.(*Partition).Read+0xe7 (/tmp/rl/ringlog)
	           97fc1 runtime.goexit.abi0+0x1 (/tmp/rl/ringlog)

GC worker (idle) 19090  1069.190001:    5025125 cpu-clock:pppH: 
	            1234 [unknown] (/usr/lib/libc.so.6)
	           97fc1 runtime.goexit.abi0+0x1 (/tmp/rl/ringlog)
`

func TestFoldPerfScript(t *testing.T) {
	folded, samples, err := FoldPerfScript(strings.NewReader(perfScriptSample), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if samples != 4 {
		t.Fatalf("samples %d, want 4", samples)
	}
	want := map[string]int{
		// Offsets differ between the two samples: they must merge.
		"ringlog;runtime.goexit.abi0;github.com/ringlog/ringlog/engine.(*Partition).Read;internal/runtime/syscall/linux.Syscall6;__x64_sys_pread64_[k];touch_atime_[k]": 2,
		"ringlog;runtime.goexit.abi0;runtime.mallocgc;runtime.(*spanSet).push":                                                                                          1,
		"GC worker (idle);runtime.goexit.abi0;[unknown libc.so.6]":                                                                                                      1,
	}
	if len(folded) != len(want) {
		t.Fatalf("folded %d stacks, want %d: %v", len(folded), len(want), folded)
	}
	for stack, n := range want {
		if folded[stack] != n {
			t.Errorf("stack %q: %d, want %d (got %v)", stack, folded[stack], n, folded)
		}
	}
	var buf bytes.Buffer
	if err := WriteFolded(&buf, folded); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "GC worker (idle);") || !strings.HasSuffix(lines[2], " 1") {
		t.Fatalf("folded output not sorted or malformed:\n%s", buf.String())
	}
}

func TestFoldPerfScriptEmptyAndTruncated(t *testing.T) {
	folded, samples, err := FoldPerfScript(strings.NewReader(""), 0, 0)
	if err != nil || samples != 0 || len(folded) != 0 {
		t.Fatalf("empty input: %v %d %v", folded, samples, err)
	}
	// A last sample without the closing blank line still counts; a
	// header without frames is a stack of its command alone.
	in := "ringlog 1 1.0: 1 cpu-clock:\n\t1 main.main+0x1 (/x)\nringlog 2 2.0: 1 cpu-clock:\n"
	folded, samples, err = FoldPerfScript(strings.NewReader(in), 0, 0)
	if err != nil || samples != 2 || folded["ringlog;main.main"] != 1 || folded["ringlog"] != 1 {
		t.Fatalf("got %v %d %v", folded, samples, err)
	}
}

func TestPerfFrameNames(t *testing.T) {
	for in, want := range map[string]string{
		"ffffffff8158f476 filemap_read+0x3a6 ([kernel.kallsyms])": "filemap_read_[k]",
		"de0e [unknown] (/usr/bin/x)":                             "[unknown x]",
		"7a757 main.main+0x17 (/tmp/spin)":                        "main.main",
		"7a757 weird;name+0x1 (/tmp/spin)":                        "weird:name",
		"7a757 operator+ (/tmp/cpp)":                              "operator+",
	} {
		if got := perfFrame(in); got != want {
			t.Errorf("perfFrame(%q) = %q, want %q", in, got, want)
		}
	}
}

// The "perf unavailable" path must be deterministic: a missing binary and
// a perf that fails both give a reason, never a panic or a silent skip.
func TestPerfUnavailableSaysWhy(t *testing.T) {
	if why := perfUnavailable(filepath.Join(t.TempDir(), "no-perf-here"), os.Getpid()); !strings.Contains(why, "perf not found") {
		t.Fatalf("missing binary: %q", why)
	}
	fake := filepath.Join(t.TempDir(), "perf")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'perf_event_open(..., PERF_FLAG_FD_CLOEXEC) failed with unexpected error 1 (Operation not permitted)' >&2\nexit 255\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	why := perfUnavailable(fake, os.Getpid())
	if !strings.Contains(why, "failed") || !strings.Contains(why, "Operation not permitted") {
		t.Fatalf("failing perf: %q", why)
	}
	if why := perfUnavailable(fake, 0); !strings.Contains(why, "no pid") {
		t.Fatalf("no pid: %q", why)
	}
	if why := perfUnavailable(fake, 1<<30); !strings.Contains(why, "not on this machine") {
		t.Fatalf("remote pid: %q", why)
	}
}

// Only samples stamped inside the window are folded: perf starts before
// the window to have attached by then.
func TestFoldPerfScriptWindow(t *testing.T) {
	folded, samples, err := FoldPerfScript(strings.NewReader(perfScriptSample), 1069.15, 1069.185)
	if err != nil {
		t.Fatal(err)
	}
	// 1069.173876 (mallocgc) and 1069.180001 (Read) are inside;
	// 1069.142726 and 1069.190001 are not.
	if samples != 2 || len(folded) != 2 || folded["ringlog;runtime.goexit.abi0;runtime.mallocgc;runtime.(*spanSet).push"] != 1 {
		t.Fatalf("window kept %d samples: %v", samples, folded)
	}
}

func TestPerfHeader(t *testing.T) {
	for in, want := range map[string]struct {
		comm string
		ts   float64
	}{
		"ringlog 19089  1069.142726:    5025125 cpu-clock:pppH:":       {"ringlog", 1069.142726},
		"         ringlog 19086/19468 [001] 7.5:    1 cpu-clock:pppH:": {"ringlog", 7.5},
		"GC worker (idle) 19090  3.25:    1 cpu-clock:":                {"GC worker (idle)", 3.25},
		"weird": {"weird", -1},
	} {
		comm, ts := perfHeader(in)
		if comm != want.comm || ts != want.ts {
			t.Errorf("perfHeader(%q) = %q, %v; want %q, %v", in, comm, ts, want.comm, want.ts)
		}
	}
}
