package broker

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The broker speaks no Kafka protocol: only netpath (and netpath/peer)
// import kmsg and kerr; broker code returns Go errors that netpath maps.
func TestNoKafkaProtocolImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/twmb/franz-go/pkg/k") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}

// The layers, lowest first: internal (test helpers aside) imports nothing
// of engine or replication; engine, replication, iouring and internal
// import nothing of the controller, the coordinators, the wire server,
// tiered storage, the broker or the tools; the controller (with the
// remote-log metadata types it replicates) imports nothing of replication,
// the coordinators, tiered storage, the wire server or the broker (the
// broker adapts one to the other); the two coordinators import neither
// each other nor anything outside coordinator/ (what they share is in
// coordinator/statelog); tiered storage imports nothing of the
// coordinators, replication, the wire server or the broker; the wire
// server nothing of the broker; the load generator and its reports, which
// run against any Kafka cluster, nothing of the broker's packages (the
// floor may use the io_uring binding, as the engine does); and
// nothing but tests imports the end-to-end suites. A new arrow up fails
// here.
func TestLowerLayersImportNothingAbove(t *testing.T) {
	const mod = "github.com/ringlog/ringlog/"
	tools := []string{"loadgen", "cmd", "results", "e2e"}
	lowest := append([]string{"tiered", "coordinator", "controller", "netpath", "broker"}, tools...)
	server := []string{"engine", "replication", "iouring", "controller", "coordinator", "netpath", "broker", "tiered", "e2e"}
	rules := map[string][]string{
		"../engine": lowest, "../replication": lowest, "../iouring": lowest,
		"../internal":          append([]string{"engine", "replication"}, lowest...),
		"../controller":        append([]string{"replication", "coordinator", "tiered", "netpath", "broker"}, tools...),
		"../coordinator":       append([]string{"engine", "replication", "iouring", "controller", "tiered", "netpath", "broker"}, tools...),
		"../coordinator/group": {"coordinator/txn"},
		"../coordinator/txn":   {"coordinator/group"},
		"../tiered":            append([]string{"replication", "coordinator", "netpath", "broker"}, tools...),
		"../netpath":           append([]string{"broker"}, tools...),
		".":                    tools,
		"../loadgen":           server,
		"../results":           server,
	}
	// The floor measures the round the broker's I/O design costs on the
	// machine, so it writes through the same kernel binding the engine
	// uses (iouring is system calls and ring memory, no broker logic).
	allowed := map[string][]string{"../loadgen/floor": {"iouring"}}
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	fset := token.NewFileSet()
	for root, above := range rules {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "brokertest" || d.Name() == "testdata" {
					return filepath.SkipDir // helpers that start brokers for tests
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				rest, ok := strings.CutPrefix(p, mod)
				if !ok {
					continue
				}
				if slices.ContainsFunc(above, func(dir string) bool { return under(rest, dir) }) &&
					!slices.Contains(allowed[filepath.Dir(path)], rest) {
					t.Errorf("%s imports %s, a layer above it", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
