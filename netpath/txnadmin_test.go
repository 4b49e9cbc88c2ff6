package netpath

import "github.com/twmb/franz-go/pkg/kmsg"

// txnAdminSeeds are filled-in requests of DescribeProducers,
// DescribeTransactions and ListTransactions for FuzzDecodeRequest (the
// empty ones come from the registry).
func txnAdminSeeds() []kmsg.Request {
	dp := kmsg.NewPtrDescribeProducersRequest()
	t := kmsg.NewDescribeProducersRequestTopic()
	t.Topic, t.Partitions = "orders", []int32{0, 1, 7}
	dp.Topics = append(dp.Topics, t)
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"tx-1", "", "tx-ü"}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.Version = 2
	pattern := "^tx-[0-9]+$"
	lt.StateFilters, lt.ProducerIDFilters, lt.DurationFilterMillis, lt.TransactionalIDPattern =
		[]string{"Ongoing", "NoSuchState"}, []int64{1000, -1}, 60_000, &pattern
	return []kmsg.Request{dp, dt, lt}
}
