package results

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"html"
	"sort"
	"strings"
)

// A flame graph of folded stacks ("root;...;leaf count"): one box per
// frame, as wide as the samples under it, callers below callees. It is a
// static SVG (hover a box for its name and share), so it opens in any
// browser next to the report.

type flameNode struct {
	name     string
	value    int
	children map[string]*flameNode
}

func (n *flameNode) child(name string) *flameNode {
	if n.children == nil {
		n.children = map[string]*flameNode{}
	}
	c := n.children[name]
	if c == nil {
		c = &flameNode{name: name}
		n.children[name] = c
	}
	return c
}

func (n *flameNode) depth() int {
	d := 0
	for _, c := range n.children {
		d = max(d, c.depth())
	}
	return d + 1
}

const (
	flameWidth   = 1200.0
	flameFrameH  = 16.0
	flamePadTop  = 36.0
	flameMinBoxW = 0.3 // narrower boxes are dropped: invisible, and they bloat the file
	flameCharW   = 6.5
)

// RenderFlameGraph draws folded stacks as an SVG flame graph titled title.
func RenderFlameGraph(title string, folded map[string]int) []byte {
	root := &flameNode{name: "all"}
	for stack, n := range folded {
		if n <= 0 {
			continue
		}
		root.value += n
		node := root
		for _, f := range strings.Split(stack, ";") {
			node = node.child(f)
			node.value += n
		}
	}
	depth := root.depth()
	height := flamePadTop + float64(depth)*flameFrameH + 8
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="monospace" font-size="11">`+"\n", flameWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fdfdf6"/><text x="%.0f" y="20" font-size="14" text-anchor="middle" font-family="sans-serif">%s (%d samples)</text>`+"\n",
		flameWidth/2, html.EscapeString(title), root.value)
	if root.value > 0 {
		scale := (flameWidth - 20) / float64(root.value)
		drawFlame(&b, root, 10, height-8-flameFrameH, scale, root.value)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// drawFlame draws n at (x, y) and its children above it, alphabetically
// (so the same stacks line up across graphs).
func drawFlame(b *bytes.Buffer, n *flameNode, x, y, scale float64, total int) {
	w := float64(n.value) * scale
	if w < flameMinBoxW {
		return
	}
	label := fmt.Sprintf("%s (%d samples, %.2f%%)", n.name, n.value, 100*float64(n.value)/float64(total))
	fmt.Fprintf(b, `<g><title>%s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="%s" rx="2"/>`,
		html.EscapeString(label), x, y, w, flameFrameH-1, flameColor(n.name))
	if chars := int((w - 6) / flameCharW); chars >= 3 {
		text := n.name
		if len(text) > chars {
			text = text[:chars-2] + ".."
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`, x+3, y+flameFrameH-5, html.EscapeString(text))
	}
	b.WriteString("</g>\n")
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	sort.Strings(names)
	cx := x
	for _, name := range names {
		c := n.children[name]
		drawFlame(b, c, cx, y-flameFrameH, scale, total)
		cx += float64(c.value) * scale
	}
}

// flameColor picks a hue by kind (ringlog code green, kernel orange, Go
// runtime and libraries yellow-red) and a shade from the name, so a
// function keeps its color across graphs.
func flameColor(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := int(h.Sum32() % 55)
	switch {
	case strings.Contains(name, "ringlog/ringlog"):
		return fmt.Sprintf("rgb(%d,%d,%d)", 80+v, 190+v/2, 110+v)
	case strings.HasSuffix(name, "_[k]"):
		return fmt.Sprintf("rgb(%d,%d,%d)", 230, 130+v, 40+v/2)
	default:
		return fmt.Sprintf("rgb(%d,%d,%d)", 225+v/2, 90+2*v, 50+v/2)
	}
}
