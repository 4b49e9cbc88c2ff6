package netfaults

import (
	"strconv"
	"strings"
)

func parseFailoverValue(v string) (producer, seq int, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(v, "p"), "-")
	if !found {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(a)
	s, err2 := strconv.Atoi(b)
	return p, s, err1 == nil && err2 == nil
}
