package netpath

import (
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request quotas (KIP-124 request_percentage).
//
// A request_percentage quota bounds the share of one request handler's
// time a user / client id may use: 50 is half a handler, 200 two. ringlog
// has no handler thread pool; a request is handled on its connection's
// reader goroutine (decode and handler) and then its reply resolved on the
// writer goroutine. What is charged per request is therefore:
//
//	(frame read -> handler returned, on the reader)
//	+ (resolve started -> response ready, on the writer)
//	- the time resolve spent parked (request.parked)
//
// Parked is time a resolve waits on something other than its own work:
// produce waiting for its appends to be written and, with acks=all, for
// the high watermark (00_produce.go); a fetch long poll waiting for data
// or the replication throttle (01_fetch.go); DeleteRecords waiting for
// the low watermark (21_delete_records.go); group and transaction
// requests waiting for their coordinator (a rebalance, a commit's append:
// waitFuture). Not charged either: the wait in the connection's queue
// between reader and writer (the previous response being resolved or
// written) and the write to the socket. Admin requests that wait for the
// controller (CreateTopics, AlterConfigs, AlterClientQuotas...) are not
// split: their wait is charged, a small error for rare requests.
// Charged: decoding, authorization, the handler's own work (appends are
// handed to the io loop; metadata, offsets, group work run inline), the
// reads and the encoding of a fetch.
//
// The time goes into the same sampled window as the byte rates, in
// percent-seconds, so the window's rate is the percentage itself and
// Kafka's throttle formula applies unchanged. When over, the response's
// throttle_time_ms becomes the larger of the byte-rate throttle already
// in it and the request throttle, and the connection is muted for the
// request throttle (KIP-219). Unlike Kafka, responses of versions before
// KIP-219 are not held back as well: the mute alone holds the client.

// requestQuotaExempt tells the requests a request quota neither charges
// nor throttles: what a client needs to connect (ApiVersions and SASL, as
// Kafka exempts them) and inter-broker requests (replica fetches, a
// follower's OffsetForLeaderEpoch, transaction markers).
func requestQuotaExempt(key int16, kreq kmsg.Request) bool {
	switch req := kreq.(type) {
	case nil:
		return true
	case *kmsg.ApiVersionsRequest, *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest, *kmsg.WriteTxnMarkersRequest:
		return true
	case *kmsg.FetchRequest:
		return req.ReplicaID >= 0
	case *kmsg.OffsetForLeaderEpochRequest:
		return req.ReplicaID >= 0
	}
	return key == apiVersionsKey
}

// handlerTime is what a request is charged: its time on the reader and on
// the writer, less the time it was parked; never negative.
func handlerTime(onReader, onWriter, parked time.Duration) time.Duration {
	return max(onReader+onWriter-parked, 0)
}

// percentSeconds is d as a request quota value: one second of handler
// time in a one second window is 100 percent.
func percentSeconds(d time.Duration) float64 { return d.Seconds() * 100 }

// chargeRequest charges a served request's handler time to the request
// quota of its connection; when throttled it writes the throttle into
// resp (nil for acks=0 produce) and mutes the connection.
func (c *conn) chargeRequest(p *pendingReply, onWriter time.Duration, resp *response) {
	if p.r == nil || requestQuotaExempt(p.hdr.key, p.req) {
		return
	}
	// Most clusters store no quota: skip the arithmetic and the clock
	// read for every request then (chargeQuota checks the same flag).
	if img := c.s.node.MetadataImage(); img == nil || !img.HasClientQuotas() {
		return
	}
	spent := handlerTime(p.handled, onWriter, p.r.parked)
	d := c.s.chargeQuota(quotaTypeRequest, c, p.hdr.clientID, percentSeconds(spent), uint64(spent), time.Now())
	if d <= 0 {
		return
	}
	if resp != nil {
		setThrottle(resp, d)
	}
	c.mute(d)
}

// setThrottle raises a response's throttle_time_ms to d unless a byte-rate
// throttle already set it higher.
func setThrottle(resp *response, d time.Duration) {
	ms := throttleMillis(d)
	if resp.msg != nil {
		tr, ok := resp.msg.(kmsg.SetThrottleResponse)
		if !ok {
			return
		}
		if th, ok := resp.msg.(kmsg.ThrottleResponse); ok {
			if old, _ := th.Throttle(); old >= ms {
				return
			}
		}
		tr.SetThrottle(ms)
		return
	}
	// A pre-encoded body is a fetch response (v4+): throttle_time_ms is
	// its first field.
	if len(resp.parts) == 0 || resp.parts[0].file != nil || len(resp.parts[0].buf) < 4 {
		return
	}
	b := resp.parts[0].buf[0:4]
	if int32(binary.BigEndian.Uint32(b)) < ms {
		binary.BigEndian.PutUint32(b, uint32(ms))
	}
}
