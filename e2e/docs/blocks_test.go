package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// A Block is one fenced code block of a Markdown file with the doc-test
// marker before it, read from the file at test time.
type Block struct {
	File string // path relative to the repository root
	Line int    // line number of the opening fence
	Lang string // the fence's info string (first word)
	Body string // the lines between the fences, the fence's indent removed

	Marked   bool   // a doc-test marker precedes the fence
	Skip     bool   // doc-test: skip (reason)
	Reason   string // the skip's reason
	Scenario string // doc-test: NAME ...: blocks of one file with one NAME share a directory and processes
	Cluster  int    // cluster=N: `ringlog dev cluster --nodes N` runs before the block
	Expect   []*regexp.Regexp
	Timeout  time.Duration
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// shellLangs are the info strings of blocks that hold commands; a block
// without an info string counts as one. Each needs a doc-test marker:
// other blocks (output, diagrams, code) say what they are (text, go,
// json, ...) and are left alone.
var shellLangs = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true, "zsh": true, "shell-session": true}

func needsMarker(lang string) bool { return shellLangs[lang] }

var (
	fenceRe  = regexp.MustCompile("^([ \t]*)(```+|~~~+)[ \t]*([^ \t`]*)")
	markerRe = regexp.MustCompile(`^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$`)
	nameRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	skipRe   = regexp.MustCompile(`^skip\s*\((.*\S.*)\)$`)
)

// DocFiles are the Markdown files whose blocks are checked: README.md and
// docs/*.md.
func DocFiles(root string) ([]string, error) {
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, f := range more {
		rel, _ := filepath.Rel(root, f)
		files = append(files, rel)
	}
	return files, nil
}

// ParseFile reads the fenced blocks of root/rel.
func ParseFile(root, rel string) ([]Block, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	return Parse(rel, string(data))
}

// Parse returns every fenced block of a Markdown text, each with the
// doc-test marker on the last non-blank line before its fence, if any. A
// marker that is not followed by a fence, or that cannot be read, is an
// error.
func Parse(file, text string) ([]Block, error) {
	lines := strings.Split(text, "\n")
	var blocks []Block
	marker, markerLine := "", 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := markerRe.FindStringSubmatch(line); m != nil {
			if marker != "" {
				return nil, fmt.Errorf("%s:%d: doc-test marker not followed by a code block", file, markerLine)
			}
			marker, markerLine = m[1], i+1
			continue
		}
		f := fenceRe.FindStringSubmatch(line)
		if f == nil {
			if marker != "" && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%s:%d: doc-test marker not followed by a code block", file, markerLine)
			}
			continue
		}
		indent, fence, lang := f[1], f[2], f[3]
		b := Block{File: file, Line: i + 1, Lang: lang}
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			l := lines[i]
			t := strings.TrimSpace(l)
			if strings.HasPrefix(t, fence[:1]) && strings.Trim(t, fence[:1]) == "" && len(t) >= len(fence) {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(l, indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s: code block opened at line %d is never closed", file, b.Line)
		}
		b.Body = strings.Join(body, "\n") + "\n"
		if marker != "" {
			if err := b.setMarker(marker); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, markerLine, err)
			}
			if !needsMarker(lang) {
				return nil, fmt.Errorf("%s:%d: doc-test marker before a %q block, which is not run", file, markerLine, lang)
			}
		}
		marker = ""
		blocks = append(blocks, b)
	}
	if marker != "" {
		return nil, fmt.Errorf("%s:%d: doc-test marker not followed by a code block", file, markerLine)
	}
	return blocks, nil
}

// setMarker reads a marker's text: "skip (reason)", or a scenario name
// followed by options:
//
//	cluster=N       start `ringlog dev cluster --nodes N` (on its default
//	                ports, data in ./cluster-data) before the block
//	expect="RE"     the block's output must match the regular expression
//	                (repeatable)
//	timeout=DUR     limit of each part of the block (default 60s)
func (b *Block) setMarker(s string) error {
	b.Marked = true
	b.Timeout = 60 * time.Second
	if m := skipRe.FindStringSubmatch(s); m != nil {
		b.Skip, b.Reason = true, strings.TrimSpace(m[1])
		return nil
	}
	if strings.HasPrefix(s, "skip") {
		return fmt.Errorf("doc-test skip needs a reason: skip (why)")
	}
	toks, err := tokens(s)
	if err != nil {
		return err
	}
	if len(toks) == 0 || !nameRe.MatchString(toks[0]) {
		return fmt.Errorf("doc-test marker %q: want skip (reason) or a scenario name ([a-z0-9-]+) and options", s)
	}
	b.Scenario = toks[0]
	for _, t := range toks[1:] {
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			return fmt.Errorf("doc-test option %q: want key=value", t)
		}
		switch k {
		case "cluster":
			if _, err := fmt.Sscanf(v, "%d", &b.Cluster); err != nil || b.Cluster < 1 {
				return fmt.Errorf("doc-test option cluster=%s: want a node count", v)
			}
		case "expect":
			re, err := regexp.Compile(v)
			if err != nil {
				return fmt.Errorf("doc-test option expect: %v", err)
			}
			b.Expect = append(b.Expect, re)
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("doc-test option timeout: %v", err)
			}
			b.Timeout = d
		default:
			return fmt.Errorf("doc-test option %q unknown (cluster, expect, timeout)", k)
		}
	}
	return nil
}

// tokens splits a marker at spaces; a value in double quotes may hold
// spaces (key="a b"), and \" is a quote inside it.
func tokens(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(s) && s[i+1] == '"':
			cur.WriteByte('"')
			i++
		case c == '"':
			inQuote, have = !inQuote, true
		case !inQuote && (c == ' ' || c == '\t'):
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("doc-test marker %q: unclosed quote", s)
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}

// A Command is one logical command line of a block: lines joined where
// they end in a backslash, a here-document kept with the line that opens
// it.
type Command struct {
	Text string // as written, line breaks included
	Line int    // its first line within the block (1-based)
}

var heredocRe = regexp.MustCompile(`(?:^|[^<])<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)

// Commands splits a block body into logical command lines; blank and
// comment-only lines are kept with the command after them, except an
// indented comment line right after a command, which continues its
// comment.
func Commands(body string) []Command {
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	var out []Command
	var cur []string
	start, depth := 0, 0
	for i := 0; i < len(lines); i++ {
		if len(cur) == 0 {
			start = i + 1
		}
		l := lines[i]
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			// An indented comment right after a command continues that
			// command's comment.
			if len(cur) == 0 && len(out) > 0 && t != "" && (l[0] == ' ' || l[0] == '\t') {
				out[len(out)-1].Text += "\n" + l
				continue
			}
			cur = append(cur, l)
			continue
		}
		cur = append(cur, l)
		if strings.HasSuffix(l, "\\") {
			continue
		}
		// A for/while/if/case spanning lines is one command.
		depth += nesting(stripComment(l))
		if depth > 0 {
			continue
		}
		depth = 0
		if m := heredocRe.FindStringSubmatch(stripComment(l)); m != nil {
			for i++; i < len(lines); i++ {
				cur = append(cur, lines[i])
				if strings.TrimSpace(lines[i]) == m[1] {
					break
				}
			}
		}
		out = append(out, Command{Text: strings.Join(cur, "\n"), Line: start})
		cur = nil
	}
	if len(cur) > 0 {
		out = append(out, Command{Text: strings.Join(cur, "\n"), Line: start})
	}
	return out
}

// nesting is how many compound commands a line opens (do, then, case)
// less those it closes (done, fi, esac; elif both closes and reopens).
func nesting(l string) int {
	n := 0
	for _, w := range strings.Fields(l) {
		switch strings.TrimRight(w, ";") {
		case "do", "then", "case":
			n++
		case "done", "fi", "esac", "elif":
			n--
		}
	}
	return n
}

// stripComment drops a trailing shell comment (a # after a blank, outside
// quotes) from one line.
func stripComment(l string) string {
	var q byte
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '\'' || c == '"':
			q = c
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i]
		}
	}
	return l
}

// words are a command's words without comments, continuation backslashes
// and leading VAR=value assignments; quotes are not interpreted (the
// flags read here hold none).
func (c Command) words() []string {
	var ws []string
	for _, l := range strings.Split(c.Text, "\n") {
		l = strings.TrimSuffix(strings.TrimRight(stripComment(l), " \t"), "\\")
		ws = append(ws, strings.Fields(l)...)
	}
	for len(ws) > 0 && assignRe.MatchString(ws[0]) {
		ws = ws[1:]
	}
	return ws
}

// comment is the text of the command's comments.
func (c Command) comment() string {
	var s []string
	for _, l := range strings.Split(c.Text, "\n") {
		if rest := l[len(stripComment(l)):]; rest != "" {
			s = append(s, rest)
		}
	}
	return strings.Join(s, " ")
}

var assignRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// flagValue is the value of --name in args (--name v or --name=v), or def.
func flagValue(args []string, name, def string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return def
}
