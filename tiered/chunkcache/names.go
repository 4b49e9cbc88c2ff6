package chunkcache

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
)

// On-disk names (doc.go describes the layout).
const (
	chunkSuffix  = ".chunk"
	tmpPrefix    = "chunk-"
	tmpSuffix    = ".tmp"
	tmpPattern   = tmpPrefix + "*" + tmpSuffix // for os.CreateTemp
	hashHexLen   = 32
	offHexLen    = 16
	lenHexLen    = 8
	crcHexLen    = 8
	chunkNameLen = hashHexLen + 1 + offHexLen + 1 + lenHexLen + 1 + crcHexLen + len(chunkSuffix)
)

// keyHash names an object key in file names.
type keyHash [16]byte

func hashKey(key string) keyHash {
	sum := sha256.Sum256([]byte(key))
	var h keyHash
	copy(h[:], sum[:])
	return h
}

// chunkID identifies a chunk: the object (by key hash) and the chunk's
// byte offset in it.
type chunkID struct {
	hash keyHash
	off  int64
}

// chunkName is the file name of a complete chunk.
func chunkName(id chunkID, size int64, crc uint32) string {
	return fmt.Sprintf("%x-%016x-%08x-%08x%s", id.hash[:], id.off, size, crc, chunkSuffix)
}

// parseChunkName reverses chunkName; ok is false for any other name.
func parseChunkName(name string) (id chunkID, size int64, crc uint32, ok bool) {
	if len(name) != chunkNameLen || !strings.HasSuffix(name, chunkSuffix) {
		return id, 0, 0, false
	}
	parts := strings.Split(strings.TrimSuffix(name, chunkSuffix), "-")
	if len(parts) != 4 || len(parts[0]) != hashHexLen {
		return id, 0, 0, false
	}
	for i := range id.hash {
		b, err := strconv.ParseUint(parts[0][2*i:2*i+2], 16, 8)
		if err != nil {
			return id, 0, 0, false
		}
		id.hash[i] = byte(b)
	}
	off, err1 := strconv.ParseUint(parts[1], 16, 63)
	n, err2 := strconv.ParseUint(parts[2], 16, 32)
	c, err3 := strconv.ParseUint(parts[3], 16, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return id, 0, 0, false
	}
	id.off = int64(off)
	return id, int64(n), uint32(c), true
}

// isTempName says whether name is one of the cache's temp files.
func isTempName(name string) bool {
	return strings.HasPrefix(name, tmpPrefix) && strings.HasSuffix(name, tmpSuffix)
}
