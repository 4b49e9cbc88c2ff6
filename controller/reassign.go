package controller

import (
	"context"

	"github.com/ringlog/ringlog/controller/metadata"
)

type reassignReq struct {
	metadata.AlterPartitionReassignments
}

// AlterPartitionReassignments starts, replaces or cancels partition
// reassignments through the active controller (metadata/reassign.go); the
// returned errors are per item.
func (n *Node) AlterPartitionReassignments(ctx context.Context, c metadata.AlterPartitionReassignments) ([]error, error) {
	var out itemsResp
	if err := n.write(ctx, "AlterPartitionReassignments", reassignReq{c}, &out); err != nil {
		return nil, err
	}
	return fromWireErrs(out.Items), nil
}

func (n *Node) handleAlterReassignments(ctx context.Context, req *reassignReq) (any, uint64, error) {
	res, idx, err := n.propose(ctx, metadata.Command{AlterPartitionReassignments: &req.AlterPartitionReassignments})
	if err != nil {
		return nil, idx, err
	}
	return itemsResp{toWireErrs(res.ItemErrs)}, idx, nil
}
