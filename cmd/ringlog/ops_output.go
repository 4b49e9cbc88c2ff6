package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/urfave/cli/v2"
)

// What the operator commands (topic, group, cluster, produce, consume)
// share: a table or JSON on stdout, and Kafka errors as one line that names
// the error and says what to do.

func formatFlag() cli.Flag {
	return &cli.StringFlag{Name: "format", Value: "table", Usage: "table | json", EnvVars: env("format")}
}

// opsFlags are the connection flags plus --format.
func opsFlags(extra ...cli.Flag) []cli.Flag {
	return append(append(clientFlags(), formatFlag()), extra...)
}

// emit writes v as indented JSON with --format json, else calls table
// with a tab writer that is flushed afterwards.
func emit(c *cli.Context, v any, table func(w io.Writer)) error {
	switch c.String("format") {
	case "json":
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "table", "":
		tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	default:
		return fmt.Errorf("--format %q: want table or json", c.String("format"))
	}
}

// kafkaHints says what to do about the Kafka errors operators meet most.
var kafkaHints = map[error]string{
	kerr.TopicAlreadyExists:           "pass --if-not-exists to accept an existing topic",
	kerr.UnknownTopicOrPartition:      "`ringlog topic list` shows the topics",
	kerr.InvalidReplicationFactor:     "the replication factor must be at most the number of live brokers (`ringlog cluster info`)",
	kerr.InvalidPartitions:            "give more partitions than the topic has",
	kerr.InvalidConfig:                "`ringlog topic describe` and `ringlog cluster config get` list the configs and their values",
	kerr.InvalidTopicException:        "topic names are 1 to 249 of [a-zA-Z0-9._-]",
	kerr.PolicyViolation:              "the broker's policy refused it; see its log",
	kerr.TopicAuthorizationFailed:     "authenticate (--sasl-user) as a user whose ACLs allow it (`ringlog acls list`)",
	kerr.GroupAuthorizationFailed:     "authenticate (--sasl-user) as a user whose ACLs allow it (`ringlog acls list`)",
	kerr.ClusterAuthorizationFailed:   "authenticate (--sasl-user) as a super user or a user with a cluster ACL (`ringlog acls list`)",
	kerr.SaslAuthenticationFailed:     "check --sasl-user, --sasl-password and --sasl-mechanism",
	kerr.NonEmptyGroup:                "stop the group's consumers first: a group with members cannot be changed",
	kerr.GroupIDNotFound:              "`ringlog group list` shows the groups",
	kerr.NotEnoughReplicas:            "fewer in-sync replicas than min.insync.replicas: bring brokers back, or lower the setting",
	kerr.NotEnoughReplicasAfterAppend: "fewer in-sync replicas than min.insync.replicas: bring brokers back, or lower the setting",
	kerr.ReassignmentInProgress:       "wait for the reassignment to finish (`ringlog admin reassign list`)",
	kerr.LeaderNotAvailable:           "the partition has no leader right now; retry, or see `ringlog topic describe`",
	kerr.KafkaStorageError:            "the broker's disk failed or is full; see its log and /healthz",
	kerr.OffsetOutOfRange:             "the offset is outside the partition's log; `ringlog topic describe` shows its start and end",
	kerr.MessageTooLarge:              "the record is larger than the topic's max.message.bytes",
	kerr.RecordListTooLarge:           "the batch is larger than the topic's max.message.bytes",
	kerr.UnsupportedVersion:           "the broker does not serve this request",
	kerr.RequestTimedOut:              "the broker did not answer in time; retry, or see its log",
}

// opsError turns err into one line: what failed, the Kafka error's name,
// and what to do about it.
func opsError(what string, err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		msg := fmt.Sprintf("%s: %s", what, ke.Message)
		// What the broker said beyond the code (its ErrorMessage), if any.
		if _, detail, ok := strings.Cut(err.Error(), ke.Error()); ok && strings.TrimSpace(detail) != "" {
			msg += " " + strings.TrimSpace(detail)
		}
		if hint, ok := kafkaHints[ke]; ok {
			msg += ": " + hint
		}
		return errors.New(msg)
	}
	if strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "unable to dial") {
		return fmt.Errorf("%s: %v: is a broker listening at --bootstrap?", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
