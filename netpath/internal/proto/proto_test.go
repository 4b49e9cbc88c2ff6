package proto

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestSkipTags(t *testing.T) {
	// Two fields (tag 0, 3 bytes; tag 5, 0 bytes), then the body.
	b := binary.AppendUvarint(nil, 2)
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, 3)
	b = append(b, 'a', 'b', 'c')
	b = binary.AppendUvarint(b, 5)
	b = binary.AppendUvarint(b, 0)
	b = append(b, "body"...)
	rest, err := SkipTags(b)
	if err != nil || string(rest) != "body" {
		t.Fatalf("SkipTags = %q, %v; want body", rest, err)
	}
	if rest, err := SkipTags([]byte{0, 'x'}); err != nil || string(rest) != "x" {
		t.Fatalf("no tags: %q, %v", rest, err)
	}
	for name, bad := range map[string][]byte{
		"empty":          nil,
		"huge count":     binary.AppendUvarint(nil, 1<<40),
		"size past end":  {1, 0, 9, 'a'},
		"truncated tag":  {1, 0x80},
		"truncated size": {1, 0, 0x80},
	} {
		if _, err := SkipTags(bad); !errors.Is(err, ErrBadTags) {
			t.Errorf("%s: err %v, want ErrBadTags", name, err)
		}
	}
}
