package main

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// usageDefault is a "(default: ...)" a flag's usage spells out itself.
var usageDefault = regexp.MustCompile(`\s*\(default: ([^()]*(?:\([^()]*\)[^()]*)*)\)`)

// tidyHelp makes every flag's help line read once and plainly: a default
// the usage text explains in words replaces the zero value urfave/cli would
// print after it ("(default: the end of the run) (default: 24h0m0s)");
// floats print as written, not as 5e+06; and backquotes, which urfave/cli
// takes for the value's placeholder ("--perf perf record -g"), become
// plain quotes.
func tidyHelp(cmds []*cli.Command) {
	for _, c := range cmds {
		for _, f := range c.Flags {
			tidyFlag(f)
		}
		tidyHelp(c.Subcommands)
	}
}

func tidyFlag(f cli.Flag) {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return
	}
	s := v.Elem()
	usage, text := s.FieldByName("Usage"), s.FieldByName("DefaultText")
	if !usage.IsValid() || !text.IsValid() || usage.Kind() != reflect.String || text.Kind() != reflect.String {
		return
	}
	u := strings.ReplaceAll(usage.String(), "`", "'")
	if m := usageDefault.FindStringSubmatchIndex(u); m != nil && text.String() == "" {
		text.SetString(u[m[2]:m[3]])
		u = u[:m[0]] + u[m[1]:]
	}
	usage.SetString(u)
	if ff, ok := f.(*cli.Float64Flag); ok && ff.DefaultText == "" {
		ff.DefaultText = strconv.FormatFloat(ff.Value, 'f', -1, 64)
	}
}
