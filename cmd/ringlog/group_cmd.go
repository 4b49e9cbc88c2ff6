package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/urfave/cli/v2"
)

// `ringlog group`: list, describe (members and lag per partition), seek and
// delete consumer groups, classic and KIP-848 ("consumer") alike, and
// share groups (KIP-932, group_share.go), over the Kafka protocol.

func groupCommand() *cli.Command {
	return &cli.Command{
		Name:  "group",
		Usage: "list, describe, seek and delete consumer groups (classic and consumer protocol) and share groups (any Kafka-compatible cluster)",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list groups with their type, state and coordinator",
				Flags: opsFlags(),
				Action: func(c *cli.Context) error {
					return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
						ls, err := adm.ListGroups(ctx)
						if err != nil {
							return opsError("list groups", err)
						}
						type row struct {
							Group        string `json:"group"`
							Type         string `json:"type"`
							State        string `json:"state"`
							ProtocolType string `json:"protocol_type"`
							Coordinator  int32  `json:"coordinator"`
						}
						var out []row
						for _, g := range ls.Sorted() {
							out = append(out, row{g.Group, groupType(g), g.State, g.ProtocolType, g.Coordinator})
						}
						return emit(c, out, func(w io.Writer) {
							fmt.Fprintln(w, "GROUP\tTYPE\tSTATE\tPROTOCOL-TYPE\tCOORDINATOR")
							for _, r := range out {
								fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", r.Group, r.Type, r.State, r.ProtocolType, r.Coordinator)
							}
						})
					})
				},
			},
			{
				Name:      "describe",
				Usage:     "show a group's state, members and, per partition, its committed offset (a share group: its start offset), the log end and the lag",
				ArgsUsage: "GROUP...",
				Flags:     opsFlags(),
				Action:    groupDescribe,
			},
			{
				Name:      "seek",
				Usage:     "move an empty group's committed offsets, or a share group's start offsets (its consumers stopped)",
				ArgsUsage: "GROUP",
				Flags: opsFlags(
					&cli.StringFlag{Name: "to", Required: true, Usage: "start | end | offset:N | timestamp:UNIX_MS (the first record at or after it)"},
					&cli.StringSliceFlag{Name: "topic", Usage: "topics to move (repeatable; default: every topic the group has committed offsets, or share state, for)"},
				),
				Action: groupSeek,
			},
			{
				Name:      "delete",
				Usage:     "delete empty groups and their committed offsets",
				ArgsUsage: "GROUP...",
				Flags:     opsFlags(),
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return errors.New("usage: ringlog group delete GROUP...")
					}
					return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
						rs, err := adm.DeleteGroups(ctx, c.Args().Slice()...)
						if err != nil {
							return opsError("delete groups", err)
						}
						for _, r := range rs.Sorted() {
							if r.Err != nil {
								return opsError("delete "+r.Group, r.Err)
							}
							fmt.Fprintf(c.App.Writer, "deleted %s\n", r.Group)
						}
						return nil
					})
				},
			},
		},
	}
}

// groupType is "classic" unless the broker says otherwise (older list
// versions carry no type).
func groupType(g kadm.ListedGroup) string {
	if g.GroupType == "" {
		return "classic"
	}
	return g.GroupType
}

type groupMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"`
	Partitions int    `json:"partitions"`
	// Share groups: the subscribed topics, and the assigned partitions
	// per topic (members may share partitions).
	Subscribed []string           `json:"subscribed_topics,omitempty"`
	Assignment map[string][]int32 `json:"assignment,omitempty"`
}

func newGroupMember(id string, instance *string, clientID, host string) groupMember {
	m := groupMember{MemberID: id, ClientID: clientID, ClientHost: host}
	if instance != nil {
		m.InstanceID = *instance
	}
	return m
}

type groupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: none
	LogStart  int64  `json:"log_start"`
	LogEnd    int64  `json:"log_end"`
	Lag       int64  `json:"lag"` // -1: unknown (no commit)
	MemberID  string `json:"member_id,omitempty"`
	// StartOffset is a share group's share-partition start offset (its
	// Committed is -1); nil for other groups, or before the group has
	// state for the partition.
	StartOffset *int64 `json:"start_offset,omitempty"`
}

type groupDescription struct {
	Group      string           `json:"group"`
	Type       string           `json:"type"`
	State      string           `json:"state"`
	Members    []groupMember    `json:"members"`
	Partitions []groupPartition `json:"partitions"`
	TotalLag   int64            `json:"total_lag"`
}

func groupDescribe(c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("usage: ringlog group describe GROUP...")
	}
	return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
		var out []groupDescription
		for _, g := range c.Args().Slice() {
			d, err := describeGroup(ctx, adm, g)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return emit(c, out, func(w io.Writer) {
			for i, d := range out {
				if i > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprintf(w, "group %s  type %s  state %s  members %d  total lag %d\n", d.Group, d.Type, d.State, len(d.Members), d.TotalLag)
				if d.Type == groupTypeShare {
					printShareGroup(w, d)
					continue
				}
				if len(d.Members) > 0 {
					fmt.Fprintln(w, "MEMBER\tINSTANCE\tCLIENT-ID\tHOST\tPARTITIONS")
					for _, m := range d.Members {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", m.MemberID, orDash(m.InstanceID), m.ClientID, m.ClientHost, m.Partitions)
					}
				}
				fmt.Fprintln(w, "TOPIC\tPARTITION\tCOMMITTED\tLOG-START\tLOG-END\tLAG\tMEMBER")
				for _, p := range d.Partitions {
					fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%s\t%s\n", p.Topic, p.Partition, offsetOrDash(p.Committed), p.LogStart, p.LogEnd, offsetOrDash(p.Lag), orDash(p.MemberID))
				}
			}
		})
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func offsetOrDash(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

// describeGroup gathers one group's members (through DescribeGroups or,
// for a consumer-protocol group, ConsumerGroupDescribe), its committed
// offsets and the log ends of every partition it commits for or is
// assigned.
func describeGroup(ctx context.Context, adm *kadm.Client, group string) (groupDescription, error) {
	d := groupDescription{Group: group, Type: "classic"}
	ls, err := adm.ListGroups(ctx)
	if err != nil {
		return d, opsError("list groups", err)
	}
	lg, listed := ls[group]
	if listed {
		d.Type = groupType(lg)
	}
	if d.Type == groupTypeShare {
		return describeShareGroup(ctx, adm, d)
	}
	owner := map[string]map[int32]string{} // topic -> partition -> member
	own := func(member, t string, p int32) {
		if owner[t] == nil {
			owner[t] = map[int32]string{}
		}
		owner[t][p] = member
	}
	if d.Type == "consumer" {
		dgs, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return d, opsError("describe "+group, err)
		}
		dg := dgs[group]
		if dg.Err != nil {
			return d, opsError("describe "+group, dg.Err)
		}
		d.State = dg.State
		for _, m := range dg.Members {
			gm := newGroupMember(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost)
			for t, ps := range m.Assignment {
				for p := range ps {
					own(m.MemberID, t, p)
					gm.Partitions++
				}
			}
			d.Members = append(d.Members, gm)
		}
	} else {
		dgs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return d, opsError("describe "+group, err)
		}
		dg := dgs[group]
		if dg.Err != nil {
			return d, opsError("describe "+group, dg.Err)
		}
		d.State = dg.State
		for _, m := range dg.Members {
			gm := newGroupMember(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost)
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					for _, p := range t.Partitions {
						own(m.MemberID, t.Topic, p)
						gm.Partitions++
					}
				}
			}
			d.Members = append(d.Members, gm)
		}
	}
	if d.State == "Dead" && !listed {
		return d, opsError("describe "+group, kerr.GroupIDNotFound)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return d, opsError("fetch offsets of "+group, err)
	}
	topicSet := map[string]bool{}
	committed.Each(func(o kadm.OffsetResponse) { topicSet[o.Topic] = true })
	for t := range owner {
		topicSet[t] = true
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	d.Members = nonNilSlice(d.Members)
	d.Partitions, err = partitionOffsets(ctx, adm, topics, func(gp *groupPartition) bool {
		gp.MemberID = owner[gp.Topic][gp.Partition]
		o, ok := committed.Lookup(gp.Topic, gp.Partition)
		if !ok && gp.MemberID == "" {
			return false // neither committed nor assigned
		}
		if ok && o.At >= 0 {
			gp.Committed = o.At
			gp.Lag = max(0, gp.LogEnd-o.At)
		}
		return true
	})
	d.TotalLag = totalLag(d.Partitions)
	return d, err
}

// partitionOffsets lists the log start and end of every partition of
// topics and keeps those fill accepts (fill sets the group's offset and
// lag), sorted by topic and partition; never nil, for JSON's [].
func partitionOffsets(ctx context.Context, adm *kadm.Client, topics []string, fill func(gp *groupPartition) bool) ([]groupPartition, error) {
	out := []groupPartition{}
	if len(topics) == 0 {
		return out, nil
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return out, opsError("list start offsets", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return out, opsError("list end offsets", err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			return
		}
		gp := groupPartition{Topic: e.Topic, Partition: e.Partition, Committed: -1, LogStart: -1, LogEnd: e.Offset, Lag: -1}
		if s, ok := starts.Lookup(e.Topic, e.Partition); ok && s.Err == nil {
			gp.LogStart = s.Offset
		}
		if fill(&gp) {
			out = append(out, gp)
		}
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return out, nil
}

// totalLag sums the known lags.
func totalLag(ps []groupPartition) int64 {
	var n int64
	for _, p := range ps {
		n += max(0, p.Lag)
	}
	return n
}

func nonNilSlice(v []groupMember) []groupMember {
	if v == nil {
		return []groupMember{}
	}
	return v
}

// groupSeek commits new offsets for an empty group: the start or end of
// each partition, one offset for all, or the first offset at or after a
// timestamp.
func groupSeek(c *cli.Context) error {
	group := c.Args().First()
	if group == "" || c.NArg() > 1 {
		return errors.New("usage: ringlog group seek --to start|end|offset:N|timestamp:UNIX_MS [--topic T]... GROUP")
	}
	to := c.String("to")
	kind, arg, _ := strings.Cut(to, ":")
	var n int64
	switch kind {
	case "start", "end":
	case "offset", "timestamp":
		var err error
		if n, err = strconv.ParseInt(arg, 10, 64); err != nil || n < 0 {
			return fmt.Errorf("--to %q: want %s:N with N >= 0", to, kind)
		}
	default:
		return fmt.Errorf("--to %q: want start, end, offset:N or timestamp:UNIX_MS", to)
	}
	return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
		d, err := describeGroup(ctx, adm, group)
		if err != nil {
			return err
		}
		if len(d.Members) > 0 {
			return opsError("seek "+group, kerr.NonEmptyGroup)
		}
		topics := c.StringSlice("topic")
		if len(topics) == 0 {
			seen := map[string]bool{}
			for _, p := range d.Partitions {
				if !seen[p.Topic] {
					seen[p.Topic] = true
					topics = append(topics, p.Topic)
				}
			}
		}
		if len(topics) == 0 {
			return fmt.Errorf("seek %s: the group has no committed offsets; name the topics with --topic", group)
		}
		var listed kadm.ListedOffsets
		switch kind {
		case "start", "offset":
			listed, err = adm.ListStartOffsets(ctx, topics...)
		case "end":
			listed, err = adm.ListEndOffsets(ctx, topics...)
		case "timestamp":
			listed, err = adm.ListOffsetsAfterMilli(ctx, n, topics...)
		}
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return opsError("list offsets", err)
		}
		// Every new offset lies within the partition's log: an offset past
		// the end, or a timestamp after the last record, means the end.
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return opsError("list end offsets", err)
		}
		offsets := kadm.Offsets{}
		listed.Each(func(l kadm.ListedOffset) {
			at := l.Offset
			if kind == "offset" {
				at = max(n, l.Offset)
			}
			if e, ok := ends.Lookup(l.Topic, l.Partition); ok && (at < 0 || at > e.Offset) {
				at = e.Offset
			}
			offsets.Add(kadm.Offset{Topic: l.Topic, Partition: l.Partition, At: at, LeaderEpoch: -1})
		})
		type moved struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
		}
		var out []moved
		if d.Type == groupTypeShare {
			set, err := alterShareStarts(ctx, adm, group, offsets)
			if err != nil {
				return err
			}
			for _, o := range set {
				out = append(out, moved{o.Topic, o.Partition, o.At})
			}
		} else {
			rs, err := adm.CommitOffsets(ctx, group, offsets)
			if err == nil {
				err = rs.Error()
			}
			if err != nil {
				return opsError("seek "+group, err)
			}
			rs.Each(func(o kadm.OffsetResponse) { out = append(out, moved{o.Topic, o.Partition, o.At}) })
		}
		sort.Slice(out, func(i, j int) bool {
			return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
		})
		return emit(c, out, func(w io.Writer) {
			fmt.Fprintln(w, "TOPIC\tPARTITION\tNEW-OFFSET")
			for _, m := range out {
				fmt.Fprintf(w, "%s\t%d\t%d\n", m.Topic, m.Partition, m.Offset)
			}
		})
	})
}
