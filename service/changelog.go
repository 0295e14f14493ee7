package service

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"

	"denoiser/state"
)

// openChangelog opens the changelog topic (Config.Checkpoint.
// ChangelogTopic) with a partition per input partition, creating it if
// absent, the first time the model goroutine restores an assignment:
// New does not wait for the brokers. Model goroutine only.
func (s *Service) openChangelog(ctx context.Context) (changelog, error) {
	if s.changelog != nil {
		return s.changelog, nil
	}
	k := s.cfg.Kafka
	n, err := topicPartitions(ctx, k.Brokers, k.InputTopic)
	if err != nil {
		return nil, fmt.Errorf("changelog: %w", err)
	}
	cl, err := state.OpenChangelog(ctx, state.ChangelogConfig{
		Brokers: k.Brokers, Topic: s.cfg.Checkpoint.ChangelogTopic, Partitions: n,
		Timeout: k.RequestTimeout, Logger: s.log.With("component", "changelog"),
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("changelog open", "topic", s.cfg.Checkpoint.ChangelogTopic, "partitions", n)
	s.changelog = cl
	return cl, nil
}

// openShared opens the shared topic (Config.Sharing.Topic), creating it
// if absent. The sharer's reader goroutine calls it, until it succeeds.
func (s *Service) openShared(ctx context.Context) (sharedLog, error) {
	k := s.cfg.Kafka
	lg, err := state.OpenShared(ctx, state.SharedConfig{
		Brokers: k.Brokers, Topic: s.cfg.Sharing.Topic, Retention: s.cfg.Sharing.Retention,
		Timeout: k.RequestTimeout, Logger: s.log.With("component", "sharing"),
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("shared topic open", "topic", s.cfg.Sharing.Topic, "interval", s.cfg.Sharing.Interval)
	return lg, nil
}

// topicPartitions returns the number of partitions of topic.
func topicPartitions(ctx context.Context, brokers []string, topic string) (int, error) {
	tr := &kafka.Transport{ClientID: "denoiser"}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr}
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	for _, t := range md.Topics {
		if t.Name == topic {
			if t.Error != nil {
				return 0, fmt.Errorf("metadata of %s: %w", topic, t.Error)
			}
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("metadata of %s: topic not found", topic)
}
