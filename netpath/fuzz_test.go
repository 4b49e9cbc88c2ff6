package netpath

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecodeRequest runs arbitrary frames through the same decoding the
// connection reader uses (header, then the served API's decoder). It must
// never panic; anything it rejects must be a frame error (connection
// closed), never something else.
func FuzzDecodeRequest(f *testing.F) {
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	seed := func(req kmsg.Request) {
		frame := fmtr.AppendRequest(nil, req, 1)
		f.Add(frame[4:]) // the reader strips the size prefix
	}
	for _, key := range registeredKeys() {
		for _, v := range []int16{handlers[key].min, handlers[key].max} {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			seed(req)
		}
	}
	for _, req := range txnAdminSeeds() {
		seed(req)
	}
	for _, req := range reassignSeeds() {
		seed(req)
	}
	for _, req := range consumerSeeds() {
		seed(req)
	}
	// Classic attacks: an array claiming 2^31-1 elements, a tagged-field
	// count of 20 million, a client id longer than the frame.
	md := []byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 0}
	f.Add(binary.BigEndian.AppendUint32(md, 0x7fffffff))
	tagged := []byte{0, 3, 0, 9, 0, 0, 0, 1, 0, 0}
	f.Add(binary.AppendUvarint(tagged, 20_000_000))
	f.Add([]byte{0, 18, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 'x'})
	f.Fuzz(func(t *testing.T, frame []byte) {
		_, req, err := decodeRequest(frame, nil)
		if err != nil && !errors.Is(err, errFrame) {
			t.Fatalf("decode error that is not a frame error: %v", err)
		}
		if err == nil && req != nil {
			// What we accepted must re-encode (a sanity check that the
			// decoder produced a consistent value).
			_ = req.AppendTo(nil)
		}
	})
}

// reassignSeeds are AlterPartitionReassignments requests with a target,
// a cancel (null replicas) and an empty target, and ListPartitionReassignments
// for all and for named partitions.
func reassignSeeds() []kmsg.Request {
	alter := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	at.Topic = "t"
	for _, reps := range [][]int32{{1, 2, 3}, nil, {}} {
		p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		p.Partition = int32(len(at.Partitions))
		p.Replicas = reps
		at.Partitions = append(at.Partitions, p)
	}
	alter.Topics = append(alter.Topics, at)
	all := kmsg.NewPtrListPartitionReassignmentsRequest()
	named := kmsg.NewPtrListPartitionReassignmentsRequest()
	lt := kmsg.NewListPartitionReassignmentsRequestTopic()
	lt.Topic, lt.Partitions = "t", []int32{0, 1}
	named.Topics = append(named.Topics, lt)
	return []kmsg.Request{alter, all, named}
}
