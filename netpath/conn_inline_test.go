package netpath

import (
	"bufio"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The reader answers a waiting produce or a replica's fetch itself only
// when the writer has nothing queued and no further request was read
// ahead; everything else keeps the writer, so responses stay in request
// order and consumer long polls hold back nothing.
func TestAnswerInline(t *testing.T) {
	wait := reply{resolve: func(<-chan struct{}) *response { return nil }}
	produce := pendingReply{hdr: requestHeader{key: produceKey}, reply: wait, req: kmsg.NewPtrProduceRequest()}
	replicaFetch := kmsg.NewPtrFetchRequest()
	replicaFetch.ReplicaID = 2
	consumerFetch := kmsg.NewPtrFetchRequest() // ReplicaID -1
	fetchOf := func(r *kmsg.FetchRequest) pendingReply {
		return pendingReply{hdr: requestHeader{key: fetchKey}, reply: wait, req: r}
	}
	idle := func(buffered string) *conn {
		c := &conn{br: bufio.NewReader(strings.NewReader(buffered))}
		if buffered != "" {
			c.br.Peek(1) // read ahead: the bytes are in the buffer now
		}
		return c
	}
	acks0 := produce
	acks0.reply.noResponse = true
	metadata := pendingReply{hdr: requestHeader{key: 3}, reply: wait, req: kmsg.NewPtrMetadataRequest()}

	for _, tc := range []struct {
		name string
		c    *conn
		p    pendingReply
		want bool
	}{
		{"produce, idle", idle(""), produce, true},
		{"replica fetch, idle", idle(""), fetchOf(replicaFetch), true},
		{"consumer fetch", idle(""), fetchOf(consumerFetch), false},
		{"acks=0 produce", idle(""), acks0, false},
		{"metadata", idle(""), metadata, false},
		{"produce, next request read ahead", idle("\x00\x00\x00\x10"), produce, false},
		{"produce, writer busy", func() *conn { c := idle(""); c.queued.Add(1); return c }(), produce, false},
	} {
		if got := tc.c.answerInline(&tc.p); got != tc.want {
			t.Errorf("%s: answerInline = %v, want %v", tc.name, got, tc.want)
		}
	}
}
