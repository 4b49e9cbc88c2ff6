package batchtest

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEncodeMatchesKmsg cross-checks the encoder against franz-go's.
func TestEncodeMatchesKmsg(t *testing.T) {
	recs := []Record{
		{Key: []byte("k"), Value: []byte("hello"), Timestamp: 1000, Headers: []Header{{Key: "h", Value: []byte("v")}}},
		{Key: nil, Value: []byte("world"), Timestamp: 1005},
	}
	b := Encode(Options{BaseOffset: 7, PartitionLeaderEpoch: 3}, recs...)
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if rb.FirstOffset != 7 || rb.NumRecords != 2 || rb.LastOffsetDelta != 1 || rb.MaxTimestamp != 1005 || rb.ProducerID != -1 {
		t.Fatalf("kmsg sees %+v", rb)
	}
	if got := rb.AppendTo(nil); !bytes.Equal(got, b) {
		t.Fatalf("kmsg re-encoding differs:\n%x\n%x", got, b)
	}
	r := kmsg.NewRecord()
	if err := r.ReadFrom(rb.Records); err != nil || string(r.Value) != "hello" || string(r.Headers[0].Value) != "v" {
		t.Fatalf("first record %+v %v", r, err)
	}
	dec, err := Decode(b)
	if err != nil || len(dec) != 1 || len(dec[0].Records) != 2 || dec[0].Records[1].Offset != 8 || dec[0].Records[1].Key != nil {
		t.Fatalf("Decode: %+v %v", dec, err)
	}
	b[len(b)-1] ^= 1
	if _, err := Decode(b); err == nil {
		t.Fatal("Decode accepted a bad CRC")
	}
}
