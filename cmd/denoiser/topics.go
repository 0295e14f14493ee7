package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"denoiser/consumer"
	command "denoiser/internal/cli"

	"github.com/segmentio/kafka-go"
)

// runTopics implements
//
//	denoiser topics [--config FILE] [--set PATH=VALUE]... [--brokers B] [--input-topic T] [--partitions N] [--replication R]
//
// It creates the topics `denoiser run` reads and writes, from the same
// configuration, where they do not exist: the input and output topics
// with N partitions (the input's own count where it exists and --partitions
// is not given) and the dead-letter topic with one. run never creates
// them (a misspelt name would become a new, empty topic), and a Kafka
// distribution's kafka-topics.sh is not at hand beside scripts/kafka.sh,
// which installs only the broker.
func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("topics", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sets command.SetFlags
	configPath := fs.String("config", "", "YAML configuration `file`, as run reads it")
	fs.Var(&sets, "set", "override one setting, `PATH=VALUE` (repeatable)")
	brokers := fs.String("brokers", "", "kafka.brokers: bootstrap `host:port` list, comma-separated")
	input := fs.String("input-topic", "", "kafka.input_topic: the `topic` of raw events")
	partitions := fs.Int("partitions", 0, "partitions of the input and output topics (default: the input's where it exists, else 1)")
	replication := fs.Int("replication", -1, "replication factor (-1: the brokers' default.replication.factor)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, "usage: denoiser topics [--config FILE] [--set PATH=VALUE]... [flags]\n\n")
		fmt.Fprintln(w, command.Wrap("Creates the topics run reads and writes, from the same configuration, where they do not exist: "+
			"the input and output topics with --partitions partitions (the input's own count where it exists), the dead-letter topic with one. "+
			"run never creates them.", command.HelpWidth, ""))
		fmt.Fprint(w, "\nflags:\n")
		command.PrintFlags(w, fs, command.HelpWidth)
	}
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("topics: unexpected arguments %q: %w", fs.Args(), errUsage)
	}
	if *partitions < 0 || *replication == 0 || *replication < -1 {
		return fmt.Errorf("topics: --partitions must be at least 1 and --replication at least 1 (or -1): %w", errUsage)
	}
	flags := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "brokers":
			flags["kafka.brokers"] = *brokers
		case "input-topic":
			flags["kafka.input_topic"] = *input
		}
	})
	cfg, unknownEnv, err := loadLayers("topics", *configPath, sets, flags)
	if err != nil {
		return err
	}
	k := cfg.WithDefaults().Kafka
	if len(k.Brokers) == 0 || k.InputTopic == "" {
		return fmt.Errorf("topics: kafka.brokers and kafka.input_topic are needed (--brokers, --input-topic, or the config)%s: %w", ignoredEnv(unknownEnv), errUsage)
	}
	if len(unknownEnv) > 0 {
		fmt.Fprintf(stderr, "topics: ignoring %s\n", command.UnknownEnv(unknownEnv))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tr := &kafka.Transport{DialTimeout: 5 * time.Second, ClientID: "denoiser"}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: tr}
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{k.InputTopic, k.OutputTopic, k.DeadLetterTopic}})
	if err != nil {
		return fmt.Errorf("topics: metadata of %v: %w", k.Brokers, consumer.ExplainBrokerError(err))
	}
	existing := map[string]int{}
	for _, t := range meta.Topics {
		if t.Error == nil {
			existing[t.Name] = len(t.Partitions)
		}
	}
	n := *partitions
	if n == 0 {
		n = max(existing[k.InputTopic], 1)
	}
	var create []kafka.TopicConfig
	for _, t := range []kafka.TopicConfig{
		{Topic: k.InputTopic, NumPartitions: n},
		{Topic: k.OutputTopic, NumPartitions: n},
		{Topic: k.DeadLetterTopic, NumPartitions: 1},
	} {
		if p, ok := existing[t.Topic]; ok {
			note := ""
			if *partitions > 0 && t.NumPartitions != 1 && p != *partitions {
				note = fmt.Sprintf("; --partitions %d not applied: topics changes no existing topic", *partitions)
			}
			fmt.Fprintf(stdout, "%s: exists (%s%s)\n", t.Topic, partitionCount(p), note)
			continue
		}
		t.ReplicationFactor = *replication
		create = append(create, t)
	}
	if len(create) == 0 {
		return nil
	}
	resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: create})
	if err != nil {
		return fmt.Errorf("topics: create: %w", err)
	}
	var errs []error
	for _, t := range create {
		if err := resp.Errors[t.Topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("topics: create %s: %w", t.Topic, err))
			continue
		}
		fmt.Fprintf(stdout, "%s: created (%s)\n", t.Topic, partitionCount(t.NumPartitions))
	}
	return errors.Join(errs...)
}

func partitionCount(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}
