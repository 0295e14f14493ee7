package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// SharedConfig configures a SharedLog.
type SharedConfig struct {
	// Brokers are the bootstrap addresses. Required.
	Brokers []string
	// Topic is the shared topic (the service names it
	// "<group>.<input>.shared"). Required.
	Topic string
	// Retention is the retention.ms of a topic OpenShared creates: how
	// long a delta stays for a member that starts, or restores a
	// partition, to merge. Default DefaultSharedRetention.
	Retention time.Duration
	// ReplicationFactor of a topic OpenShared creates. Default 0: the
	// broker's default.replication.factor.
	ReplicationFactor int
	// Existing opens only a topic that exists (a reader such as
	// `denoiser shared-log`): OpenShared then neither creates it nor
	// waits for it to appear beyond its metadata retries.
	Existing bool
	// Timeout bounds each request to the brokers. Default 10s.
	Timeout time.Duration
	// Logger receives an Info line when the topic is created. Default
	// nil: discard.
	Logger *slog.Logger
}

// DefaultSharedRetention is SharedConfig.Retention's default.
const DefaultSharedRetention = time.Hour

// SharedRecordBytes bounds the key and value of one record Append sends:
// the topic's max.message.bytes (4 MiB) less a batch's overhead.
const SharedRecordBytes = changelogMaxMessage - batchOverhead - recordOverhead

// SharedLog is the log through which the members of a group exchange
// what their partition models learned of the shared parameters
// (docs/design/partitions.md): a topic of one partition, so that every
// member reads every delta in the same order, with time-based retention
// (cleanup.policy=delete), since a delta that every model merged is of
// no further use. It knows nothing of what its records hold.
//
// A SharedLog is safe for concurrent use.
type SharedLog struct {
	c *Changelog // one partition of a topic, read and written as a changelog partition is
}

// OpenShared creates the topic if it does not exist (one partition,
// cleanup.policy=delete, retention.ms Retention, max.message.bytes 4 MiB)
// and waits until it is served. A topic that exists is used as it is;
// records beyond its first partition are not read.
func OpenShared(ctx context.Context, cfg SharedConfig) (*SharedLog, error) {
	if cfg.Retention == 0 {
		cfg.Retention = DefaultSharedRetention
	}
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("state: shared log: no brokers")
	case cfg.Topic == "":
		return nil, errors.New("state: shared log: no topic")
	case cfg.Retention < time.Second:
		return nil, fmt.Errorf("state: shared log: retention %v", cfg.Retention)
	}
	c, err := newChangelog(ChangelogConfig{
		Brokers: cfg.Brokers, Topic: cfg.Topic, Partitions: 1, ReplicationFactor: cfg.ReplicationFactor,
		Timeout: cfg.Timeout, Logger: cfg.Logger,
	}, "denoiser-shared")
	if err != nil {
		return nil, err
	}
	if !cfg.Existing {
		err = c.createTopic(ctx, []kafka.ConfigEntry{
			{ConfigName: "cleanup.policy", ConfigValue: "delete"},
			{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(cfg.Retention.Milliseconds(), 10)},
			{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(changelogMaxMessage)},
		})
	}
	if err == nil {
		_, err = c.partitions(ctx)
	}
	if err == nil {
		err = c.waitServed(ctx)
	}
	if err != nil {
		c.tr.CloseIdleConnections()
		return nil, err
	}
	return &SharedLog{c: c}, nil
}

// SharedRecord is one record of the shared log.
type SharedRecord struct{ Key, Value []byte }

// Append sends records as one batch, acknowledged by all in-sync
// replicas, trying again a few times after an error that may pass. A
// batch sent again after an unanswered attempt may be appended twice.
func (l *SharedLog) Append(ctx context.Context, records []SharedRecord) error {
	raw := make([]rawRecord, len(records))
	for i, r := range records {
		if len(r.Key)+len(r.Value) > SharedRecordBytes {
			return fmt.Errorf("state: shared log: a record of %d bytes, above %d", len(r.Key)+len(r.Value), SharedRecordBytes)
		}
		raw[i] = rawRecord{key: r.Key, value: r.Value}
	}
	if l.c.isClosed() {
		return ErrClosed
	}
	if err := l.c.produce(ctx, 0, raw); err != nil {
		return fmt.Errorf("state: shared log %s: %w", l.c.cfg.Topic, err)
	}
	return nil
}

// Read calls fn with every record from offset from (negative: the first
// the topic retains) to the end of the log as it is now, in order, and
// returns the offset after the last record it read: where the next Read
// goes on. A from below what the topic retains reads from there on.
func (l *SharedLog) Read(ctx context.Context, from int64, fn func(off int64, key, value []byte)) (int64, error) {
	if l.c.isClosed() {
		return from, ErrClosed
	}
	first, end, err := l.c.bounds(ctx, 0)
	if err != nil {
		return from, fmt.Errorf("state: shared log %s: offsets: %w", l.c.cfg.Topic, err)
	}
	from = max(from, first)
	next := from
	err = l.c.read(ctx, 0, from, end, func(off int64, key, value []byte) {
		fn(off, key, value)
		next = off + 1
	})
	if err != nil {
		return next, fmt.Errorf("state: shared log %s: %w", l.c.cfg.Topic, err)
	}
	return max(next, end), nil
}

// Wait returns true once the log holds a record at offset from or after
// it, false when maxWait passes first, and an error when the broker
// refuses or ctx ends. It is one fetch that the broker holds until a
// record arrives (MinBytes 1, MaxWait maxWait): a reader that has read to
// the end learns of the next record within a round trip, not a polling
// interval later, and an idle topic costs one request per maxWait.
func (l *SharedLog) Wait(ctx context.Context, from int64, maxWait time.Duration) (bool, error) {
	if l.c.isClosed() {
		return false, ErrClosed
	}
	ok, err := l.c.wait(ctx, 0, from, maxWait)
	if err != nil {
		return false, fmt.Errorf("state: shared log %s: wait at %d: %w", l.c.cfg.Topic, from, err)
	}
	return ok, nil
}

// Close releases the connections. Calls after Close return ErrClosed.
func (l *SharedLog) Close() error { return l.c.Close() }
