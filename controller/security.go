package controller

import (
	"context"

	"github.com/ringlog/ringlog/controller/metadata"
)

// SCRAM credentials and ACLs are metadata commands like topic changes:
// any broker forwards them to the active controller, and each item's
// outcome comes back with its sentinel error intact (wireErr).

type (
	scramReq  struct{ metadata.AlterScramCredentials }
	aclsReq   struct{ ACLs []metadata.ACL }
	delReq    struct{ Filters []metadata.ACLFilter }
	itemsResp struct{ Items []wireErr }
	delResp   struct{ Deleted [][]metadata.ACL }
	// wireErr carries one item's error over the RPC (both empty: nil).
	wireErr struct{ Err, Msg string }
)

func toWireErrs(errs []error) []wireErr {
	out := make([]wireErr, len(errs))
	for i, err := range errs {
		if err != nil {
			var r rpcResponse
			errorToWire(err, &r)
			out[i] = wireErr{Err: r.Err, Msg: r.Msg}
		}
	}
	return out
}

func fromWireErrs(ws []wireErr) []error {
	out := make([]error, len(ws))
	for i, w := range ws {
		out[i] = errorFromWire(&rpcResponse{Err: w.Err, Msg: w.Msg})
	}
	return out
}

// AlterScramCredentials applies deletions then upserts; the returned
// errors are per item in that order.
func (n *Node) AlterScramCredentials(ctx context.Context, c metadata.AlterScramCredentials) ([]error, error) {
	var out itemsResp
	if err := n.write(ctx, "AlterScramCredentials", scramReq{c}, &out); err != nil {
		return nil, err
	}
	return fromWireErrs(out.Items), nil
}

// CreateACLs adds bindings; the returned errors are per binding.
func (n *Node) CreateACLs(ctx context.Context, acls []metadata.ACL) ([]error, error) {
	var out itemsResp
	if err := n.write(ctx, "CreateACLs", aclsReq{acls}, &out); err != nil {
		return nil, err
	}
	return fromWireErrs(out.Items), nil
}

// DeleteACLs removes the bindings matching each filter and returns them
// per filter.
func (n *Node) DeleteACLs(ctx context.Context, filters []metadata.ACLFilter) ([][]metadata.ACL, error) {
	var out delResp
	if err := n.write(ctx, "DeleteACLs", delReq{filters}, &out); err != nil {
		return nil, err
	}
	return out.Deleted, nil
}

func (n *Node) handleAlterScram(ctx context.Context, req *scramReq) (any, uint64, error) {
	res, idx, err := n.propose(ctx, metadata.Command{AlterScramCredentials: &req.AlterScramCredentials})
	if err != nil {
		return nil, idx, err
	}
	return itemsResp{toWireErrs(res.ItemErrs)}, idx, nil
}

func (n *Node) handleCreateACLs(ctx context.Context, req *aclsReq) (any, uint64, error) {
	res, idx, err := n.propose(ctx, metadata.Command{CreateACLs: &metadata.CreateACLs{ACLs: req.ACLs}})
	if err != nil {
		return nil, idx, err
	}
	return itemsResp{toWireErrs(res.ItemErrs)}, idx, nil
}

func (n *Node) handleDeleteACLs(ctx context.Context, req *delReq) (any, uint64, error) {
	res, idx, err := n.propose(ctx, metadata.Command{DeleteACLs: &metadata.DeleteACLs{Filters: req.Filters}})
	if err != nil {
		return nil, idx, err
	}
	return delResp{res.Deleted}, idx, nil
}

type configsReq struct{ metadata.AlterConfigs }

// AlterConfigs changes one resource's dynamic configs through the active
// controller (metadata/configs.go). The values must have been validated.
func (n *Node) AlterConfigs(ctx context.Context, c metadata.AlterConfigs) error {
	return n.write(ctx, "AlterConfigs", configsReq{c}, nil)
}

func (n *Node) handleAlterConfigs(ctx context.Context, req *configsReq) (any, uint64, error) {
	_, idx, err := n.propose(ctx, metadata.Command{AlterConfigs: &req.AlterConfigs})
	if err != nil {
		return nil, idx, err
	}
	return emptyResp{}, idx, nil
}

type quotasReq struct{ metadata.AlterClientQuotas }

// AlterClientQuotas applies quota alterations; the returned errors are per
// alteration.
func (n *Node) AlterClientQuotas(ctx context.Context, c metadata.AlterClientQuotas) ([]error, error) {
	var out itemsResp
	if err := n.write(ctx, "AlterClientQuotas", quotasReq{c}, &out); err != nil {
		return nil, err
	}
	return fromWireErrs(out.Items), nil
}

func (n *Node) handleAlterClientQuotas(ctx context.Context, req *quotasReq) (any, uint64, error) {
	res, idx, err := n.propose(ctx, metadata.Command{AlterClientQuotas: &req.AlterClientQuotas})
	if err != nil {
		return nil, idx, err
	}
	return itemsResp{toWireErrs(res.ItemErrs)}, idx, nil
}
