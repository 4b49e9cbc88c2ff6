package harness

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

// APIVersionsV0 is a framed ApiVersions v0 request with correlation id corr.
func APIVersionsV0(corr int32) []byte {
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	binary.BigEndian.PutUint32(frame[8:], uint32(corr))
	return frame
}

// ReadCorrelation reads one framed response and returns its correlation id.
func ReadCorrelation(c net.Conn) (int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return 0, fmt.Errorf("response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(body)), nil
}
