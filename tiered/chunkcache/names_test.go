package chunkcache

import "testing"

func TestChunkNames(t *testing.T) {
	id := chunkID{hashKey("0a1b/3/00000000000000001000-ab.log"), 12 << 20}
	name := chunkName(id, 4<<20, 0xdeadbeef)
	got, size, crc, ok := parseChunkName(name)
	if !ok || got != id || size != 4<<20 || crc != 0xdeadbeef {
		t.Fatalf("parse(%s) = %v %d %x %v", name, got, size, crc, ok)
	}
	if isTempName(name) {
		t.Fatal("a chunk name is a temp name")
	}
	for _, bad := range []string{
		"",
		"notes.txt",
		name[1:],
		name[:len(name)-1] + "x",
		"g" + name[1:], // not hex
		name[:33] + "-" + name[34:],
		name[:32] + "+" + name[33:],
		"00000000000000000000000000000000-0000000000000000-0000000z-00000000.chunk",
	} {
		if _, _, _, ok := parseChunkName(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
	if !isTempName("chunk-123.tmp") || isTempName("chunk-123.tmpx") || isTempName("x-123.tmp") {
		t.Fatal("isTempName")
	}
}
