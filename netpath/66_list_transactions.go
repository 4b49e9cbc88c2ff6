package netpath

import (
	"fmt"
	"regexp"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/coordinator/txn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListTransactions: v0-2
//
// Behavior:
//   - Lists the transactional ids this broker coordinates (clients ask
//     every broker), Dead ones excluded, with producer id and Kafka's state
//     name (KIP-664), sorted by id.
//   - state_filters are Kafka's state names, matched exactly; names that
//     are not states come back in unknown_state_filters. As in Kafka, a
//     non-empty filter none of whose names is a state matches nothing.
//     producer_id_filters keeps the given producer ids. v1's
//     duration_filter (KIP-994), when >= 0, keeps transactions running
//     longer than that many ms. v2's transactional_id_pattern (KIP-1152) is
//     an RE2 expression searched in the id (Go's regexp is RE2, as Kafka's
//     re2j); an invalid one is INVALID_REGULAR_EXPRESSION.
//   - COORDINATOR_LOAD_IN_PROGRESS, with no listing, while any owned
//     __transaction_state partition is loading (a partial list could hide
//     the transaction being looked for).
//   - With ACLs on: without DESCRIBE on the cluster, ids the caller may
//     not DESCRIBE are left out.

func init() { register(66, 0, 2, handleListTransactions) }

// errInvalidRegex: INVALID_REGULAR_EXPRESSION.
var errInvalidRegex = fmt.Errorf("invalid regular expression")

func handleListTransactions(s *Server, r *request) reply {
	req := r.kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	if err := s.txns.Stale(); err != nil {
		resp.ErrorCode = errorCode(err)
		return immediate(resp)
	}
	f := txn.ListFilter{ProducerIDs: req.ProducerIDFilters, MinDurationMs: req.DurationFilterMillis}
	for _, name := range req.StateFilters {
		if st, ok := txn.ParseState(name); ok {
			f.States = append(f.States, st)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if p := req.TransactionalIDPattern; p != nil && *p != "" {
		re, err := regexp.Compile(*p)
		if err != nil {
			resp.ErrorCode = errorCode(fmt.Errorf("%w: %v", errInvalidRegex, err))
			return immediate(resp)
		}
		f.IDPattern = re
	}
	list, err := s.txns.List(f)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return immediate(resp)
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		list = nil // only unknown names: nothing is in such a state
	}
	clusterOK := s.authorizeCluster(r, metadata.OpDescribe)
	for _, l := range list {
		if !clusterOK && !s.authorize(r, metadata.OpDescribe, metadata.ResourceTransactionalID, l.TransactionalID) {
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = l.TransactionalID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return immediate(resp)
}
