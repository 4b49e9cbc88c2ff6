package docs

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseMarkers(t *testing.T) {
	md := "# t\n\n" +
		"<!-- doc-test: one cluster=3 expect=\"a b\" timeout=2m -->\n" +
		"```sh\nringlog topic list\n```\n\n" +
		"<!-- doc-test: skip (needs root) -->\n\n" +
		"```bash\nsudo x\n```\n\n" +
		"- item\n\n" +
		"  <!-- doc-test: one -->\n" +
		"  ```sh\n  echo indented\n  ```\n\n" +
		"```text\noutput\n```\n\n" +
		"```\nunmarked\n```\n"
	bs, err := Parse("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 5 {
		t.Fatalf("%d blocks: %+v", len(bs), bs)
	}
	if b := bs[0]; b.Scenario != "one" || b.Cluster != 3 || len(b.Expect) != 1 || b.Expect[0].String() != "a b" || b.Timeout.Minutes() != 2 || b.Line != 4 || b.Body != "ringlog topic list\n" {
		t.Errorf("block 0: %+v", b)
	}
	if b := bs[1]; !b.Skip || b.Reason != "needs root" || b.Lang != "bash" {
		t.Errorf("block 1: %+v", b)
	}
	if b := bs[2]; b.Scenario != "one" || b.Body != "echo indented\n" {
		t.Errorf("block 2: %+v", b)
	}
	if b := bs[3]; b.Marked || needsMarker(b.Lang) {
		t.Errorf("block 3: %+v", b)
	}
	if b := bs[4]; b.Marked || !needsMarker(b.Lang) {
		t.Errorf("block 4: %+v", b)
	}
	for _, bad := range []string{
		"<!-- doc-test: one -->\ntext\n```sh\nx\n```\n",        // marker not before a fence
		"<!-- doc-test: skip -->\n```sh\nx\n```\n",             // skip without a reason
		"<!-- doc-test: one nosuch=1 -->\n```sh\nx\n```\n",     // unknown option
		"<!-- doc-test: One -->\n```sh\nx\n```\n",              // bad name
		"<!-- doc-test: one -->\n```go\nx\n```\n",              // a block that is not run
		"<!-- doc-test: one expect=\"(\" -->\n```sh\nx\n```\n", // bad regexp
		"```sh\nx\n",               // unclosed
		"<!-- doc-test: one -->\n", // dangling marker
		"<!-- doc-test: one -->\n<!-- doc-test: two -->\n```sh\n```", // two markers
	} {
		if _, err := Parse("bad.md", bad); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestCommands(t *testing.T) {
	body := "# lead\n" +
		"make cluster   # 3 brokers\n" +
		"               # until Ctrl-C\n" +
		"ringlog topic create \\\n  -p 3 x   # create\n" +
		"\n" +
		"cat <<EOF > f   # here\nline # not a comment\nEOF\n" +
		"kcat -b 127.0.0.1:9092 -t demo -P <<< 'hello'\n" +
		"for p in 1 2; do   # each\n  if [ $p = 1 ]; then echo a; fi\n  echo $p\ndone\n" +
		"echo end\n"
	cs := Commands(body)
	var texts []string
	for _, c := range cs {
		texts = append(texts, c.Text)
	}
	want := []string{
		"# lead\nmake cluster   # 3 brokers\n               # until Ctrl-C",
		"ringlog topic create \\\n  -p 3 x   # create",
		"\ncat <<EOF > f   # here\nline # not a comment\nEOF",
		"kcat -b 127.0.0.1:9092 -t demo -P <<< 'hello'",
		"for p in 1 2; do   # each\n  if [ $p = 1 ]; then echo a; fi\n  echo $p\ndone",
		"echo end",
	}
	if !reflect.DeepEqual(texts, want) {
		t.Fatalf("commands:\n%q\nwant\n%q", texts, want)
	}
	if cs[1].Line != 4 || cs[2].Line != 6 {
		t.Errorf("lines %d %d", cs[1].Line, cs[2].Line)
	}
	if w := cs[1].words(); strings.Join(w, " ") != "ringlog topic create -p 3 x" {
		t.Errorf("words %q", w)
	}
	if !strings.Contains(cs[0].comment(), "until Ctrl-C") || strings.Contains(cs[1].comment(), "until") {
		t.Errorf("comments %q %q", cs[0].comment(), cs[1].comment())
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		line  string
		kind  bgKind
		ready []string
	}{
		{"./bin/ringlog serve --data-dir ./data", server, []string{"127.0.0.1:9644"}},
		{"RINGLOG_FSYNC=never ringlog serve --admin-listen 127.0.0.1:9645 --data-dir n2", server, []string{"127.0.0.1:9645"}},
		{"ringlog dev cluster --nodes 2 --object-store -- --retention-check-interval 5s", cluster, []string{"127.0.0.1:9644", "127.0.0.1:9645"}},
		{"./bin/ringlog dev join --base-dir ./cluster-data --node-id 4", cluster, []string{"127.0.0.1:9647"}},
		{"./bin/ringlog topic list", fg, nil},
		{"kcat -L -b 127.0.0.1:9092", fg, nil},
	} {
		k, ready := classifyRinglog(Command{Text: tc.line}.words())
		if k != tc.kind || !reflect.DeepEqual(ready, tc.ready) {
			t.Errorf("%s: %v %v, want %v %v", tc.line, k, ready, tc.kind, tc.ready)
		}
	}
}
