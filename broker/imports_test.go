package broker

import (
	"go/parser"
	"go/token"
	"path/filepath"
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
