// Package proto holds the few wire facts the Kafka server (netpath) and
// the inter-broker client (netpath/peer) must agree on: listener names in
// the metadata image, the client id of broker-to-broker marker writes, and
// the tagged-field skipper of flexible headers.
package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Endpoint listener names registered with the controller for each kind of
// listener. Brokers talk to each other on the plaintext one.
const (
	EndpointPlaintext = "PLAINTEXT"
	EndpointTLS       = "SSL"
)

// MarkerClientID is the client id of WriteTxnMarkers requests between
// brokers; the WriteTxnMarkers handler accepts no other.
const MarkerClientID = "ringlog-txn-markers"

// ShareStateClientID is the client id of Read/WriteShareGroupState
// requests between brokers; their handlers accept no other.
const ShareStateClientID = "ringlog-share-state"

// ErrBadTags is wrapped by SkipTags' errors.
var ErrBadTags = errors.New("bad tagged fields")

// SkipTags skips a tagged-field section (of a request or response header)
// without allocating, bounded by the bytes that remain: a count claiming
// millions of fields fails fast.
func SkipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad count", ErrBadTags)
	}
	b = b[n:]
	// Each field needs at least two bytes (tag and size).
	if count > uint64(len(b))/2 {
		return nil, fmt.Errorf("%w: count %d exceeds the frame", ErrBadTags, count)
	}
	for i := uint64(0); i < count; i++ {
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad tag", ErrBadTags)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: bad field size", ErrBadTags)
		}
		b = b[n+int(size):]
	}
	return b, nil
}
