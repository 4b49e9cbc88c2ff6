package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Share groups (KIP-932) in `ringlog group`: describe shows the members
// with their subscriptions and assignments (ShareGroupDescribe) and, per
// partition, the share-partition start offset and lag
// (DescribeShareGroupOffsets); seek moves the start offsets
// (AlterShareGroupOffsets). A share group has no committed offsets and
// no partition owner: every member may be assigned every partition.

const groupTypeShare = "share"

// describeShareGroup fills d (its Group and Type set) for a share group.
func describeShareGroup(ctx context.Context, adm *kadm.Client, d groupDescription) (groupDescription, error) {
	group := d.Group
	dgs, err := adm.DescribeShareGroups(ctx, group)
	if err != nil {
		return d, opsError("describe "+group, err)
	}
	dg := dgs[group]
	if dg.Err != nil {
		return d, opsError("describe "+group, dg.Err)
	}
	d.State = dg.GroupState
	assigned := kadm.TopicsSet{}
	for _, m := range dg.Members {
		gm := newGroupMember(m.MemberID, nil, m.ClientID, m.ClientHost)
		gm.Subscribed = slices.Sorted(slices.Values(m.SubscribedTopicNames))
		gm.Assignment = map[string][]int32{}
		for t, ps := range m.Assignment {
			for p := range ps {
				gm.Assignment[t] = append(gm.Assignment[t], p)
				assigned.Add(t, p)
				gm.Partitions++
			}
			slices.Sort(gm.Assignment[t])
		}
		d.Members = append(d.Members, gm)
	}
	d.Members = nonNilSlice(d.Members)

	described, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return d, opsError("describe share offsets of "+group, err)
	}
	offsets := described[group]
	if offsets.Err != nil {
		return d, opsError("describe share offsets of "+group, offsets.Err)
	}
	topicSet := map[string]bool{}
	for t := range offsets.Offsets {
		topicSet[t] = true
	}
	for t := range assigned {
		topicSet[t] = true
	}
	d.Partitions, err = partitionOffsets(ctx, adm, slices.Sorted(maps.Keys(topicSet)), func(gp *groupPartition) bool {
		so, hasState := offsets.Offsets.Lookup(gp.Topic, gp.Partition)
		if _, isAssigned := assigned[gp.Topic][gp.Partition]; !hasState && !isAssigned {
			return false
		}
		if hasState && so.Err == nil && so.StartOffset >= 0 {
			start := so.StartOffset
			gp.StartOffset = &start
			// The broker's lag leaves out records already finished above
			// the start; a broker that does not lead the partition says
			// -1, and the log end minus the start is the bound then.
			gp.Lag = so.Lag
			if gp.Lag < 0 {
				gp.Lag = max(0, gp.LogEnd-start)
			}
		}
		return true
	})
	d.TotalLag = totalLag(d.Partitions)
	return d, err
}

// printShareGroup is describe's text for a share group.
func printShareGroup(w io.Writer, d groupDescription) {
	if len(d.Members) > 0 {
		fmt.Fprintln(w, "MEMBER\tCLIENT-ID\tHOST\tSUBSCRIBED\tASSIGNMENT")
		for _, m := range d.Members {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, m.ClientID, m.ClientHost, orDash(strings.Join(m.Subscribed, ",")), orDash(formatAssignment(m.Assignment)))
		}
	}
	fmt.Fprintln(w, "TOPIC\tPARTITION\tSTART-OFFSET\tLOG-START\tLOG-END\tLAG")
	for _, p := range d.Partitions {
		start := int64(-1)
		if p.StartOffset != nil {
			start = *p.StartOffset
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%s\n", p.Topic, p.Partition, offsetOrDash(start), p.LogStart, p.LogEnd, offsetOrDash(p.Lag))
	}
}

// formatAssignment writes topic:0-3,7 per topic, topics sorted.
func formatAssignment(a map[string][]int32) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(a)) {
		ps := a[t]
		var runs []string
		for i := 0; i < len(ps); {
			j := i
			for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
				j++
			}
			run := strconv.Itoa(int(ps[i]))
			if j > i {
				run += "-" + strconv.Itoa(int(ps[j]))
			}
			runs = append(runs, run)
			i = j + 1
		}
		parts = append(parts, t+":"+strings.Join(runs, ","))
	}
	return strings.Join(parts, " ")
}

// alterShareStarts sets an empty share group's start offsets and returns
// those set, or the first partition's error.
func alterShareStarts(ctx context.Context, adm *kadm.Client, group string, offsets kadm.Offsets) ([]kadm.Offset, error) {
	rs, err := adm.AlterShareGroupOffsets(ctx, group, offsets)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		return nil, opsError("seek "+group, err)
	}
	var out []kadm.Offset
	offsets.Each(func(o kadm.Offset) {
		if _, ok := rs.Lookup(o.Topic, o.Partition); ok {
			out = append(out, o)
		}
	})
	return out, nil
}
