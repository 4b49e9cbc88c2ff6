package main

import "testing"

func TestFormatAssignment(t *testing.T) {
	for _, c := range []struct {
		in   map[string][]int32
		want string
	}{
		{nil, ""},
		{map[string][]int32{"b": {3}, "a": {0, 1, 2, 5, 7, 8}}, "a:0-2,5,7-8 b:3"},
	} {
		if got := formatAssignment(c.in); got != c.want {
			t.Errorf("formatAssignment(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
