package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/urfave/cli/v2"
)

// `ringlog topic`: create, list, describe, reconfigure, grow and delete
// topics over the Kafka protocol (CreateTopics, Metadata, ListOffsets,
// DescribeConfigs, IncrementalAlterConfigs, CreatePartitions,
// DeleteTopics), so it works against any Kafka-compatible cluster.

// opsTimeout bounds one operator command's requests.
const opsTimeout = 30 * time.Second

// withOps connects with the client flags and runs f with a bounded context.
func withOps(c *cli.Context, f func(ctx context.Context, adm *kadm.Client) error) error {
	adm, cl, err := adminClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.Context, opsTimeout)
	defer cancel()
	return f(ctx, adm)
}

// parseKVs reads key=value pairs (-c retention.ms=60000).
//
// The flag library splits each value at commas, so a value that holds
// commas (follower.replication.throttled.replicas=0:2,1:3) arrives in
// pieces: a piece without "=" continues the value before it.
func parseKVs(flag string, kvs []string) (map[string]*string, error) {
	out := make(map[string]*string, len(kvs))
	last := ""
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok && last != "" {
			joined := *out[last] + "," + kv
			out[last] = &joined
			continue
		}
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want key=value", flag, kv)
		}
		out[k] = &v
		last = k
	}
	return out, nil
}

func topicCommand() *cli.Command {
	return &cli.Command{
		Name:  "topic",
		Usage: "create, list, describe, reconfigure, grow and delete topics (any Kafka-compatible cluster)",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create topics",
				ArgsUsage: "TOPIC...",
				Flags: opsFlags(
					&cli.IntFlag{Name: "partitions", Aliases: []string{"p"}, Value: -1, Usage: "partitions (-1: the broker's num.partitions)"},
					&cli.IntFlag{Name: "replication-factor", Aliases: []string{"r"}, Value: -1, Usage: "replicas per partition (-1: the broker's default.replication.factor)"},
					&cli.StringSliceFlag{Name: "config", Aliases: []string{"c"}, Usage: "topic config key=value (repeatable), e.g. -c retention.ms=3600000 -c min.insync.replicas=2"},
					&cli.BoolFlag{Name: "if-not-exists", Usage: "succeed when the topic exists already"},
				),
				Action: topicCreate,
			},
			{
				Name:  "list",
				Usage: "list topics with their partition count and replication factor",
				Flags: opsFlags(&cli.BoolFlag{Name: "internal", Usage: "include internal topics (__consumer_offsets, ...)"}),
				Action: func(c *cli.Context) error {
					return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
						list := adm.ListTopics
						if c.Bool("internal") {
							list = adm.ListTopicsWithInternal
						}
						tds, err := list(ctx)
						if err != nil {
							return opsError("list topics", err)
						}
						return printTopicList(c, tds)
					})
				},
			},
			{
				Name:      "describe",
				Usage:     "show topics' partitions (leader, replicas, ISR, offline replicas, log start and end) and configs with their source",
				ArgsUsage: "TOPIC...",
				Flags:     opsFlags(&cli.BoolFlag{Name: "all-configs", Usage: "show every config, not only those set on the topic or the broker"}),
				Action:    topicDescribe,
			},
			{
				Name:      "alter-config",
				Usage:     "set or delete topic configs",
				ArgsUsage: "TOPIC",
				Flags: opsFlags(
					&cli.StringSliceFlag{Name: "set", Usage: "key=value to set (repeatable)"},
					&cli.StringSliceFlag{Name: "delete", Usage: "key to remove, back to the broker's value (repeatable)"},
				),
				Action: func(c *cli.Context) error {
					topic := c.Args().First()
					if topic == "" || c.NArg() > 1 || len(c.StringSlice("set"))+len(c.StringSlice("delete")) == 0 {
						return errors.New("usage: ringlog topic alter-config [--set key=value]... [--delete key]... TOPIC")
					}
					alters, err := configAlters(c)
					if err != nil {
						return err
					}
					return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
						rs, err := adm.AlterTopicConfigs(ctx, alters, topic)
						if err := firstAlterErr(rs, err); err != nil {
							return opsError("alter configs of "+topic, err)
						}
						fmt.Fprintf(c.App.Writer, "altered %s\n", topic)
						return nil
					})
				},
			},
			{
				Name:      "add-partitions",
				Usage:     "grow a topic to a number of partitions (existing keys may map to other partitions afterwards)",
				ArgsUsage: "TOPIC",
				Flags:     opsFlags(&cli.IntFlag{Name: "to", Usage: "the topic's new partition count", Required: true}),
				Action: func(c *cli.Context) error {
					topic := c.Args().First()
					if topic == "" || c.NArg() > 1 {
						return errors.New("usage: ringlog topic add-partitions --to N TOPIC")
					}
					return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
						rs, err := adm.UpdatePartitions(ctx, c.Int("to"), topic)
						if err == nil {
							err = rs.Error()
						}
						if err != nil {
							return opsError("add partitions to "+topic, err)
						}
						fmt.Fprintf(c.App.Writer, "%s now has %d partitions\n", topic, c.Int("to"))
						return nil
					})
				},
			},
			{
				Name:      "delete",
				Usage:     "delete topics and their data",
				ArgsUsage: "TOPIC...",
				Flags:     opsFlags(&cli.BoolFlag{Name: "if-exists", Usage: "succeed when a topic does not exist"}),
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return errors.New("usage: ringlog topic delete TOPIC...")
					}
					return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
						rs, err := adm.DeleteTopics(ctx, c.Args().Slice()...)
						if err != nil {
							return opsError("delete topics", err)
						}
						for _, r := range rs.Sorted() {
							switch {
							case r.Err == nil:
								fmt.Fprintf(c.App.Writer, "deleted %s\n", r.Topic)
							case errors.Is(r.Err, kerr.UnknownTopicOrPartition) && c.Bool("if-exists"):
								fmt.Fprintf(c.App.Writer, "%s does not exist\n", r.Topic)
							default:
								return opsError("delete "+r.Topic, r.Err)
							}
						}
						return nil
					})
				},
			},
		},
	}
}

func topicCreate(c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("usage: ringlog topic create [-p N] [-r RF] [-c key=value]... TOPIC...")
	}
	p, rf := c.Int("partitions"), c.Int("replication-factor")
	if p == 0 || p < -1 || rf == 0 || rf < -1 || rf > 32767 {
		return fmt.Errorf("--partitions %d, --replication-factor %d: want a positive number, or -1 for the broker's default", p, rf)
	}
	cfgs, err := parseKVs("config", c.StringSlice("config"))
	if err != nil {
		return err
	}
	return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
		rs, err := adm.CreateTopics(ctx, int32(p), int16(rf), cfgs, c.Args().Slice()...)
		if err != nil {
			return opsError("create topics", err)
		}
		for _, r := range rs.Sorted() {
			switch {
			case r.Err == nil:
				fmt.Fprintf(c.App.Writer, "created %s: %d partitions, replication factor %d\n", r.Topic, r.NumPartitions, r.ReplicationFactor)
			case errors.Is(r.Err, kerr.TopicAlreadyExists) && c.Bool("if-not-exists"):
				fmt.Fprintf(c.App.Writer, "%s exists already\n", r.Topic)
			default:
				return opsError("create "+r.Topic, withMessage(r.Err, r.ErrMessage))
			}
		}
		return nil
	})
}

type topicSummary struct {
	Topic             string `json:"topic"`
	ID                string `json:"id"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

func summarize(td kadm.TopicDetail) topicSummary {
	return topicSummary{Topic: td.Topic, ID: td.ID.String(), Partitions: len(td.Partitions),
		ReplicationFactor: td.Partitions.NumReplicas(), Internal: td.IsInternal}
}

func printTopicList(c *cli.Context, tds kadm.TopicDetails) error {
	var out []topicSummary
	for _, td := range tds.Sorted() {
		if td.Err != nil {
			return opsError("list "+td.Topic, td.Err)
		}
		out = append(out, summarize(td))
	}
	return emit(c, out, func(w io.Writer) {
		fmt.Fprintln(w, "TOPIC\tPARTITIONS\tRF\tINTERNAL")
		for _, t := range out {
			fmt.Fprintf(w, "%s\t%d\t%d\t%v\n", t.Topic, t.Partitions, t.ReplicationFactor, t.Internal)
		}
	})
}

type partitionDescription struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	LogStart        int64   `json:"log_start"`
	LogEnd          int64   `json:"log_end"`
	Error           string  `json:"error,omitempty"`
}

type configDescription struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	Source    string `json:"source"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

type topicDescription struct {
	topicSummary
	PartitionList []partitionDescription `json:"partition_list"`
	Configs       []configDescription    `json:"configs"`
}

func topicDescribe(c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("usage: ringlog topic describe TOPIC...")
	}
	topics := c.Args().Slice()
	return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
		tds, err := adm.ListTopicsWithInternal(ctx, topics...)
		if err != nil {
			return opsError("describe topics", err)
		}
		for _, t := range topics {
			td, ok := tds[t]
			if !ok {
				return opsError("describe "+t, kerr.UnknownTopicOrPartition)
			}
			if td.Err != nil {
				return opsError("describe "+t, td.Err)
			}
		}
		starts, err := adm.ListStartOffsets(ctx, topics...)
		if err != nil {
			return opsError("list start offsets", err)
		}
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return opsError("list end offsets", err)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
		if err != nil {
			return opsError("describe configs", err)
		}
		var out []topicDescription
		for _, t := range topics {
			td := tds[t]
			d := topicDescription{topicSummary: summarize(td)}
			for _, pd := range td.Partitions.Sorted() {
				p := partitionDescription{Partition: pd.Partition, Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch,
					Replicas: nonNil(pd.Replicas), ISR: nonNil(pd.ISR), OfflineReplicas: nonNil(pd.OfflineReplicas), LogStart: -1, LogEnd: -1}
				if pd.Err != nil {
					p.Error = pd.Err.Error()
				}
				if o, ok := starts.Lookup(t, pd.Partition); ok && o.Err == nil {
					p.LogStart = o.Offset
				}
				if o, ok := ends.Lookup(t, pd.Partition); ok && o.Err == nil {
					p.LogEnd = o.Offset
				}
				d.PartitionList = append(d.PartitionList, p)
			}
			if rc, err := rcs.On(t, nil); err == nil && rc.Err == nil {
				d.Configs = describeConfigs(rc.Configs, c.Bool("all-configs"))
			}
			out = append(out, d)
		}
		return emit(c, out, func(w io.Writer) {
			for i, d := range out {
				if i > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprintf(w, "topic %s  id %s  partitions %d  replication factor %d\n", d.Topic, d.ID, d.Partitions, d.ReplicationFactor)
				fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tOFFLINE\tLOG-START\tLOG-END")
				for _, p := range d.PartitionList {
					fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d", p.Partition, p.Leader, p.LeaderEpoch, ids(p.Replicas), ids(p.ISR), ids(p.OfflineReplicas), p.LogStart, p.LogEnd)
					if p.Error != "" {
						fmt.Fprintf(w, "\t%s", p.Error)
					}
					fmt.Fprintln(w)
				}
				if len(d.Configs) > 0 {
					fmt.Fprintln(w, "CONFIG\tVALUE\tSOURCE")
					for _, cfg := range d.Configs {
						fmt.Fprintf(w, "%s\t%s\t%s\n", cfg.Key, cfg.Value, cfg.Source)
					}
				}
			}
		})
	})
}

// describeConfigs lists configs sorted by key with their source
// (DYNAMIC_TOPIC, STATIC_BROKER, ...), leaving out those at their default
// unless all, and hiding sensitive values.
func describeConfigs(cfgs []kadm.Config, all bool) []configDescription {
	out := []configDescription{}
	for _, cfg := range cfgs {
		src := strings.TrimSuffix(cfg.Source.String(), "_CONFIG")
		if !all && src == "DEFAULT" {
			continue
		}
		v := cfg.MaybeValue()
		if cfg.Sensitive {
			v = "(sensitive)"
		}
		out = append(out, configDescription{Key: cfg.Key, Value: v, Source: src, Sensitive: cfg.Sensitive})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// ids prints broker ids as 1,2,3 ("-" for none).
func ids(v []int32) string {
	if len(v) == 0 {
		return "-"
	}
	v = slices.Clone(v)
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// configAlters reads --set and --delete into incremental alterations.
func configAlters(c *cli.Context) ([]kadm.AlterConfig, error) {
	sets, err := parseKVs("set", c.StringSlice("set"))
	if err != nil {
		return nil, err
	}
	var out []kadm.AlterConfig
	for k, v := range sets {
		out = append(out, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: v})
	}
	for _, k := range c.StringSlice("delete") {
		out = append(out, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// nonNil keeps JSON lists as [] rather than null.
func nonNil(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}

// withMessage adds the broker's error message to a Kafka error.
func withMessage(err error, msg string) error {
	if msg == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, msg)
}

// firstAlterErr is the request's error or the first resource's.
func firstAlterErr(rs kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != nil {
			return withMessage(r.Err, r.ErrMessage)
		}
	}
	return nil
}
