package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"
)

// `ringlog cluster`: the brokers, the controller and the cluster id
// (Metadata, ApiVersions), and broker or cluster-wide dynamic configs
// (DescribeConfigs, IncrementalAlterConfigs on BROKER resources).

func clusterCommand() *cli.Command {
	brokerFlag := &cli.IntFlag{Name: "broker", Value: -1, Usage: "one broker's configs (-1: the cluster-wide defaults every broker takes)"}
	return &cli.Command{
		Name:  "cluster",
		Usage: "show the brokers, controller and cluster id; get and set broker and cluster-wide configs (any Kafka-compatible cluster)",
		Subcommands: []*cli.Command{
			{
				Name:   "info",
				Usage:  "brokers, controller, cluster id and the API versions each broker serves",
				Flags:  opsFlags(&cli.BoolFlag{Name: "api-versions", Usage: "also list every API with the version range each broker serves"}),
				Action: clusterInfo,
			},
			{
				Name:  "config",
				Usage: "broker and cluster-wide dynamic configs",
				Subcommands: []*cli.Command{
					{
						Name:  "get",
						Usage: "show configs with their value and source (without --all, only those not at their default)",
						Flags: opsFlags(brokerFlag, &cli.BoolFlag{Name: "all", Usage: "every config, defaults included"}),
						Action: func(c *cli.Context) error {
							return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
								return clusterConfigGet(ctx, c, adm)
							})
						},
					},
					{
						Name:  "set",
						Usage: "set dynamic configs, cluster-wide or (--broker) on one broker",
						Flags: opsFlags(brokerFlag, &cli.StringSliceFlag{Name: "set", Required: true, Usage: "key=value (repeatable)"}),
						Action: func(c *cli.Context) error {
							return clusterConfigAlter(c)
						},
					},
					{
						Name:  "delete",
						Usage: "remove dynamic configs, back to the static or default value",
						Flags: opsFlags(brokerFlag, &cli.StringSliceFlag{Name: "delete", Required: true, Usage: "key (repeatable)"}),
						Action: func(c *cli.Context) error {
							return clusterConfigAlter(c)
						},
					},
				},
			},
		},
	}
}

type brokerInfo struct {
	NodeID     int32  `json:"node_id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
}

type clusterDescription struct {
	ClusterID   string                      `json:"cluster_id"`
	Controller  int32                       `json:"controller"`
	Brokers     []brokerInfo                `json:"brokers"`
	APIVersions map[int32]map[string]string `json:"api_versions,omitempty"`
}

func clusterInfo(c *cli.Context) error {
	return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
		m, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return opsError("metadata", err)
		}
		d := clusterDescription{ClusterID: m.Cluster, Controller: m.Controller}
		for _, b := range m.Brokers {
			bi := brokerInfo{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == m.Controller}
			if b.Rack != nil {
				bi.Rack = *b.Rack
			}
			d.Brokers = append(d.Brokers, bi)
		}
		sort.Slice(d.Brokers, func(i, j int) bool { return d.Brokers[i].NodeID < d.Brokers[j].NodeID })
		if c.Bool("api-versions") {
			vs, err := adm.ApiVersions(ctx)
			if err != nil {
				return opsError("api versions", err)
			}
			d.APIVersions = map[int32]map[string]string{}
			for _, bv := range vs.Sorted() {
				if bv.Err != nil {
					return opsError(fmt.Sprintf("api versions of broker %d", bv.NodeID), bv.Err)
				}
				keys := map[string]string{}
				bv.EachKeySorted(func(key, minV, maxV int16) {
					keys[kmsg.NameForKey(key)] = fmt.Sprintf("%d-%d", minV, maxV)
				})
				d.APIVersions[bv.NodeID] = keys
			}
		}
		return emit(c, d, func(w io.Writer) {
			fmt.Fprintf(w, "cluster id %s  controller %d  brokers %d\n", d.ClusterID, d.Controller, len(d.Brokers))
			fmt.Fprintln(w, "BROKER\tHOST\tPORT\tRACK\tCONTROLLER")
			for _, b := range d.Brokers {
				fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%v\n", b.NodeID, b.Host, b.Port, orDash(b.Rack), b.Controller)
			}
			for _, id := range sortedIDs(d.APIVersions) {
				fmt.Fprintf(w, "broker %d serves\n", id)
				names := make([]string, 0, len(d.APIVersions[id]))
				for n := range d.APIVersions[id] {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					fmt.Fprintf(w, "  %s\t%s\n", n, d.APIVersions[id][n])
				}
			}
		})
	})
}

func sortedIDs(m map[int32]map[string]string) []int32 {
	ids := make([]int32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// brokerResource is the DescribeConfigs target: one broker, or none (the
// cluster-wide defaults).
func brokerResource(c *cli.Context) (brokers []int32, name string) {
	if b := c.Int("broker"); b >= 0 {
		return []int32{int32(b)}, fmt.Sprintf("broker %d", b)
	}
	return nil, "the cluster-wide defaults"
}

func clusterConfigGet(ctx context.Context, c *cli.Context, adm *kadm.Client) error {
	brokers, name := brokerResource(c)
	rcs, err := adm.DescribeBrokerConfigs(ctx, brokers...)
	if err != nil {
		return opsError("describe configs of "+name, err)
	}
	out := []configDescription{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return opsError("describe configs of "+name, rc.Err)
		}
		out = append(out, describeConfigs(rc.Configs, c.Bool("all"))...)
	}
	return emit(c, out, func(w io.Writer) {
		fmt.Fprintln(w, "CONFIG\tVALUE\tSOURCE")
		for _, cfg := range out {
			fmt.Fprintf(w, "%s\t%s\t%s\n", cfg.Key, cfg.Value, cfg.Source)
		}
	})
}

func clusterConfigAlter(c *cli.Context) error {
	if c.NArg() > 0 {
		return errors.New("cluster config set and delete take no arguments: give --set key=value or --delete key")
	}
	alters, err := configAlters(c)
	if err != nil {
		return err
	}
	brokers, name := brokerResource(c)
	return withOps(c, func(ctx context.Context, adm *kadm.Client) error {
		rs, err := adm.AlterBrokerConfigs(ctx, alters, brokers...)
		if err := firstAlterErr(rs, err); err != nil {
			return opsError("alter configs of "+name, err)
		}
		fmt.Fprintf(c.App.Writer, "altered %s\n", name)
		return nil
	})
}
