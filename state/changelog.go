package state

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Errors of the changelog.
var (
	// ErrFenced is returned by Changelog.Save for an entry older than what
	// the changelog knows of the partition: a lower epoch than one it has
	// seen, or the same epoch with a lower next offset. The writer is a
	// zombie; it must stop writing the partition.
	ErrFenced = errors.New("state: changelog fenced by a newer epoch")
	// ErrNeedBase is returned by Changelog.Save for a delta that has no
	// chain to extend: no base of the entry's epoch was saved or loaded, or
	// an earlier save of the chain failed. Save a base.
	ErrNeedBase = errors.New("state: changelog delta without a chain to extend")
	// ErrChangelogTopic is returned by OpenChangelog when the topic exists
	// with settings that would lose checkpoints; the message says how to
	// fix them.
	ErrChangelogTopic = errors.New("state: changelog topic misconfigured")
)

// DefaultChunkBytes is ChangelogConfig.ChunkBytes' default.
const DefaultChunkBytes = 512 << 10

const (
	// changelogMaxMessage is the max.message.bytes of a topic
	// OpenChangelog creates (or twice ChunkBytes, if larger): a produce
	// request carries several chunks in one record batch.
	changelogMaxMessage = 4 << 20
	// recordOverhead bounds what Kafka adds to a record (header, key,
	// lengths) and batchOverhead what it adds to a batch.
	recordOverhead = 256
	batchOverhead  = 1 << 10
	// compactionLag is the min.compaction.lag.ms of a topic
	// OpenChangelog creates (see docs/design/changelog.md).
	compactionLag = 5 * time.Minute
	// segmentTime is its segment.ms: the active segment is never
	// compacted, so this bounds how long superseded chains wait.
	segmentTime = time.Hour
	// maxBlobs bounds the blobs (a base and its deltas) of a chain.
	maxBlobs = 1 << 16
	// produceAttempts bounds the sends of one batch.
	produceAttempts = 3
	endMagic        = "DNCL"
	endLayout       = 1
	endLen          = 4 + 1 + 1 + 8 + 8 + 4 + 4 + 8 + 4
)

// ChangelogConfig configures a Changelog.
type ChangelogConfig struct {
	// Brokers are the bootstrap addresses. Required.
	Brokers []string
	// Topic is the changelog topic (the service names it
	// "<group>.<input>.state"). Required.
	Topic string
	// Partitions is the input topic's partition count: changelog
	// partition p holds input partition p's checkpoints. Required; the
	// topic is created with this many and must have at least this many.
	Partitions int
	// ReplicationFactor of a topic OpenChangelog creates. Default 0: the
	// broker's default.replication.factor.
	ReplicationFactor int
	// ChunkBytes is the size of one record of checkpoint bytes. Default
	// DefaultChunkBytes (512 KiB); it must stay below the topic's
	// max.message.bytes.
	ChunkBytes int
	// Timeout bounds each request to the brokers. Default 10s.
	Timeout time.Duration
	// Logger receives Debug lines of every save and load, and Warn lines
	// for records that are not the changelog's. Default nil: discard.
	Logger *slog.Logger
}

func (c ChangelogConfig) withDefaults() ChangelogConfig {
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.ChunkBytes == 0 {
		c.ChunkBytes = DefaultChunkBytes
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports what is wrong with c (defaults applied).
func (c ChangelogConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case len(c.Brokers) == 0:
		return errors.New("state: changelog: no brokers")
	case c.Topic == "":
		return errors.New("state: changelog: no topic")
	case c.Partitions <= 0:
		return fmt.Errorf("state: changelog: %d partitions", c.Partitions)
	case c.ReplicationFactor < -1:
		return fmt.Errorf("state: changelog: replication factor %d", c.ReplicationFactor)
	case c.ChunkBytes <= 0 || c.ChunkBytes > MaxModelSize:
		return fmt.Errorf("state: changelog: chunk of %d bytes", c.ChunkBytes)
	case c.Timeout < 0:
		return fmt.Errorf("state: changelog: timeout %v", c.Timeout)
	}
	return nil
}

// ChangelogEntry is one checkpoint of a partition: a base (the whole
// model) or a delta that extends the chain of the last base.
type ChangelogEntry struct {
	// Epoch is the writer's generation: a save of a lower epoch than one
	// the partition has seen is fenced, and Load prefers higher epochs.
	Epoch uint64
	// Next is the input partition's next offset the checkpoint covers.
	Next int64
	// Base: the entry is the whole model and starts a new chain.
	// Otherwise it is a delta on the chain of the last base of the same
	// epoch.
	Base bool
	// Write writes the entry's bytes (see WriteBytes). Required.
	Write func(io.Writer) error
}

// WriteBytes returns a ChangelogEntry.Write that writes b.
func WriteBytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

// ChangelogState is a partition's newest complete checkpoint.
type ChangelogState struct {
	// Epoch and Next are those of the newest entry of the chain.
	Epoch uint64
	Next  int64
	// Base is the chain's base; Deltas are the deltas saved after it,
	// oldest first. The model is Base with each delta applied in order.
	Base   []byte
	Deltas [][]byte
	// Skipped counts records of the partition that are not the
	// changelog's (bad key or end record); they were ignored.
	Skipped int
}

// Changelog keeps per-partition checkpoints in a compacted Kafka topic,
// the store of record from which any member restores a partition. The
// record layout and why compaction cannot lose a needed record are in
// docs/design/changelog.md. Methods are safe for concurrent use; calls on
// one partition are serialised.
type Changelog struct {
	cfg        ChangelogConfig
	tr         *kafka.Transport
	client     *kafka.Client
	batchBytes int // bound of the records of one produce request
	parts      []*clPartition

	mu     sync.Mutex
	closed bool
}

// clPartition is what the changelog knows of one partition: from its
// own saves and the last Load.
type clPartition struct {
	mu sync.Mutex
	// newest is the highest (epoch, next) loaded or saved (or attempted),
	// maxEpoch the highest epoch of any chain seen: Save fences below them.
	newest   position
	known    bool
	maxEpoch uint64
	// chain is the chain a delta extends (nil: none); broken: a delta of
	// it failed, or it has blobs past its last complete one.
	chain  *clChain
	broken bool
	// garbage are chains to tombstone once a new base is complete.
	garbage []*clChain
}

// position orders checkpoints: by epoch, then next offset.
type position struct {
	epoch uint64
	next  int64
}

func (a position) compare(b position) int {
	return cmp.Or(cmp.Compare(a.epoch, b.epoch), cmp.Compare(a.next, b.next))
}

// chainID names a chain: its epoch and a random nonce, so that no two
// chains share a record key.
type chainID struct {
	epoch uint64
	nonce uint64
}

// clChain is a chain's record keys: for each blob (0 is the base), the
// number of chunk records written or seen.
type clChain struct {
	id    chainID
	blobs []uint32
}

// OpenChangelog connects to the brokers and makes sure the topic exists
// with the settings the changelog needs, creating it if absent.
func OpenChangelog(ctx context.Context, cfg ChangelogConfig) (*Changelog, error) {
	c, err := newChangelog(cfg, "denoiser-changelog")
	if err != nil {
		return nil, err
	}
	maxMessage, err := c.ensureTopic(ctx)
	if err != nil {
		c.tr.CloseIdleConnections()
		return nil, err
	}
	c.batchBytes = maxMessage - batchOverhead
	return c, nil
}

// newChangelog returns a Changelog of cfg (checked, defaults applied)
// that has not talked to the brokers yet.
func newChangelog(cfg ChangelogConfig, clientID string) (*Changelog, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tr := &kafka.Transport{DialTimeout: cfg.Timeout, ClientID: clientID}
	c := &Changelog{
		cfg:    cfg,
		tr:     tr,
		client: &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: cfg.Timeout},
		parts:  make([]*clPartition, cfg.Partitions),
	}
	for p := range c.parts {
		c.parts[p] = &clPartition{}
	}
	return c, nil
}

// Close releases the connections. Calls after Close return ErrClosed.
func (c *Changelog) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.tr.CloseIdleConnections()
	}
	return nil
}

func (c *Changelog) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// topicSettings are the settings of a topic OpenChangelog creates.
func (c *Changelog) topicSettings() []kafka.ConfigEntry {
	return []kafka.ConfigEntry{
		{ConfigName: "cleanup.policy", ConfigValue: "compact"},
		{ConfigName: "min.compaction.lag.ms", ConfigValue: strconv.FormatInt(compactionLag.Milliseconds(), 10)},
		{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(max(changelogMaxMessage, 2*c.cfg.ChunkBytes+batchOverhead))},
		{ConfigName: "segment.ms", ConfigValue: strconv.FormatInt(segmentTime.Milliseconds(), 10)},
	}
}

// ensureTopic creates the topic or checks the one there, waits until
// every partition is served and returns its max.message.bytes.
func (c *Changelog) ensureTopic(ctx context.Context) (int, error) {
	if err := c.createTopic(ctx, c.topicSettings()); err != nil {
		return 0, err
	}
	maxMessage, err := c.checkTopic(ctx)
	if err != nil {
		return 0, err
	}
	return maxMessage, c.waitServed(ctx)
}

// partitions returns the topic's partition count. A topic just created
// (by this or another member) may take a moment to show in the metadata:
// at most 50 tries.
func (c *Changelog) partitions(ctx context.Context) (int, error) {
	var md *kafka.MetadataResponse
	var err error
	for try := 0; ; try++ {
		md, err = c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{c.cfg.Topic}})
		if err == nil && (len(md.Topics) != 1 || md.Topics[0].Error != nil) {
			err = fmt.Errorf("topics %v", md.Topics)
			if len(md.Topics) == 1 {
				err = md.Topics[0].Error
			}
		}
		if err == nil {
			return len(md.Topics[0].Partitions), nil
		}
		if try == 50 || ctx.Err() != nil {
			return 0, fmt.Errorf("state: topic %s: metadata: %w", c.cfg.Topic, err)
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// createTopic creates the topic with c.cfg.Partitions partitions and
// settings; one that exists already is left as it is.
func (c *Changelog) createTopic(ctx context.Context, settings []kafka.ConfigEntry) error {
	topic := c.cfg.Topic
	resp, err := c.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: c.cfg.Partitions, ReplicationFactor: c.cfg.ReplicationFactor,
		ConfigEntries: settings,
	}}})
	if err == nil {
		err = resp.Errors[topic]
	}
	switch {
	case err == nil:
		c.cfg.Logger.Info("topic created", "topic", topic, "partitions", c.cfg.Partitions)
	case errors.Is(err, kafka.TopicAlreadyExists):
	default:
		return fmt.Errorf("state: create topic %s: %w", topic, err)
	}
	return nil
}

// checkTopic checks the topic's partitions and settings.
func (c *Changelog) checkTopic(ctx context.Context) (int, error) {
	topic := c.cfg.Topic
	n, err := c.partitions(ctx)
	if err != nil {
		return 0, err
	}
	if n < c.cfg.Partitions {
		return 0, fmt.Errorf("%w: %s has %d partitions, the input has %d: add partitions "+
			"(kafka-topics.sh --alter --topic %s --partitions %d); changelog records are not routed by key, so this is safe",
			ErrChangelogTopic, topic, n, c.cfg.Partitions, topic, c.cfg.Partitions)
	}
	dc, err := c.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
		ConfigNames: []string{"cleanup.policy", "max.message.bytes"},
	}}})
	if err != nil {
		return 0, fmt.Errorf("state: changelog topic %s: describe configs: %w", topic, err)
	}
	settings := map[string]string{}
	for _, r := range dc.Resources {
		if r.Error != nil {
			return 0, fmt.Errorf("state: changelog topic %s: describe configs: %w", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			settings[e.ConfigName] = e.ConfigValue
		}
	}
	fix := "kafka-configs.sh --alter --entity-type topics --entity-name " + topic + " --add-config "
	if policy := settings["cleanup.policy"]; policy != "compact" {
		return 0, fmt.Errorf("%w: %s has cleanup.policy=%q; the changelog needs cleanup.policy=compact, "+
			"or retention deletes the checkpoints of idle partitions (%scleanup.policy=compact)",
			ErrChangelogTopic, topic, policy, fix)
	}
	need := c.cfg.ChunkBytes + recordOverhead + batchOverhead
	maxMessage, err := strconv.Atoi(settings["max.message.bytes"])
	if err != nil || maxMessage < need {
		return 0, fmt.Errorf("%w: %s has max.message.bytes=%q, below a chunk of %d bytes and its overhead: "+
			"lower the chunk size or raise it (%smax.message.bytes=%d)",
			ErrChangelogTopic, topic, settings["max.message.bytes"], c.cfg.ChunkBytes, fix, max(changelogMaxMessage, need))
	}
	return maxMessage, nil
}

// waitServed waits until every partition has a leader that answers, at
// most 50 tries of one Timeout each.
func (c *Changelog) waitServed(ctx context.Context) error {
	for p := range c.cfg.Partitions {
		var err error
		for try := 0; ; try++ {
			if _, _, err = c.bounds(ctx, int32(p)); err == nil {
				break
			}
			if try == 50 || ctx.Err() != nil {
				return fmt.Errorf("state: changelog topic %s partition %d not served: %w", c.cfg.Topic, p, err)
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}
	return nil
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// bounds returns partition p's first offset and its end (the offset the
// next record will get).
func (c *Changelog) bounds(ctx context.Context, p int32) (first, end int64, err error) {
	resp, err := c.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		c.cfg.Topic: {kafka.FirstOffsetOf(int(p)), kafka.LastOffsetOf(int(p))},
	}})
	if err != nil {
		return 0, 0, err
	}
	for _, po := range resp.Topics[c.cfg.Topic] {
		if po.Partition == int(p) {
			return po.FirstOffset, po.LastOffset, po.Error
		}
	}
	return 0, 0, errors.New("no answer")
}

// partition returns p's state, or an error for a partition out of range.
func (c *Changelog) partition(p int32) (*clPartition, error) {
	if p < 0 || int(p) >= len(c.parts) {
		return nil, fmt.Errorf("state: changelog %s: partition %d out of range [0, %d)", c.cfg.Topic, p, len(c.parts))
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	return c.parts[p], nil
}

// Save writes e as partition p's newest checkpoint and returns once every
// record is acknowledged by all in-sync replicas. Its bytes go out a
// chunk at a time as e.Write writes them, a few chunks to a request, and
// a closing end record, sent after (or with) the last chunk, makes the
// checkpoint complete; a Save that fails or is cut short leaves chunks
// without an end record, which Load ignores. After a base is complete,
// Save writes tombstones for the chains it superseded (see
// docs/design/changelog.md); a failure there is logged and retried
// after the next base, not returned. ctx bounds the whole save.
func (c *Changelog) Save(ctx context.Context, p int32, e ChangelogEntry) error {
	part, err := c.partition(p)
	if err != nil {
		return err
	}
	if e.Write == nil || e.Next < 0 {
		return fmt.Errorf("%w: changelog entry without a writer or with next offset %d", ErrInvalidCheckpoint, e.Next)
	}
	part.mu.Lock()
	defer part.mu.Unlock()
	at := position{e.Epoch, e.Next}
	if e.Epoch < part.maxEpoch || (part.known && at.compare(part.newest) < 0) {
		return fmt.Errorf("%w: partition %d: entry of epoch %d at %d, the changelog has epoch %d at %d",
			ErrFenced, p, e.Epoch, e.Next, max(part.maxEpoch, part.newest.epoch), part.newest.next)
	}
	chain := part.chain
	if e.Base {
		nonce, err := newNonce()
		if err != nil {
			return err
		}
		chain = &clChain{id: chainID{e.Epoch, nonce}}
	} else if chain == nil || chain.id.epoch != e.Epoch || part.broken || len(chain.blobs) >= maxBlobs {
		return fmt.Errorf("%w: partition %d, epoch %d", ErrNeedBase, p, e.Epoch)
	}
	seq := uint32(len(chain.blobs))
	chain.blobs = append(chain.blobs, 0)
	part.newest, part.known, part.maxEpoch = at, true, max(part.maxEpoch, e.Epoch)

	w := &blobWriter{c: c, ctx: ctx, p: p, chain: chain, seq: seq}
	err = e.Write(w)
	if err == nil {
		err = w.err
	}
	if err == nil {
		err = w.finish(e)
	}
	if err != nil {
		if e.Base {
			part.garbage = append(part.garbage, chain) // its records may be in the log
		} else {
			part.broken = true
		}
		return fmt.Errorf("state: changelog save of partition %d (epoch %d, next %d): %w", p, e.Epoch, e.Next, err)
	}
	c.cfg.Logger.Debug("changelog saved", "topic", c.cfg.Topic, "partition", p, "epoch", e.Epoch, "next", e.Next,
		"base", e.Base, "blob", seq, "bytes", w.n, "chunks", w.chunks)
	if e.Base {
		if part.chain != nil {
			part.garbage = append(part.garbage, part.chain)
		}
		part.chain, part.broken = chain, false
		part.garbage = c.tombstone(ctx, p, e.Epoch, part.garbage)
	}
	return nil
}

// tombstone writes tombstones for the records of the chains of epoch at
// most epoch, and returns the chains it left (a higher epoch, or the
// writes failed).
func (c *Changelog) tombstone(ctx context.Context, p int32, epoch uint64, chains []*clChain) []*clChain {
	var left []*clChain
	var ends, chunks []rawRecord
	for _, ch := range chains {
		if ch.id.epoch > epoch {
			left = append(left, ch)
			continue
		}
		for seq, n := range ch.blobs {
			ends = append(ends, rawRecord{key: endKey(p, ch.id, uint32(seq))})
			for i := range n {
				chunks = append(chunks, rawRecord{key: chunkKey(p, ch.id, uint32(seq), i)})
			}
		}
	}
	// End records first: a chain that lost some tombstoned records has no
	// end record left to name them.
	records := append(ends, chunks...)
	for len(records) > 0 {
		n := min(len(records), max(1, c.batchBytes/recordOverhead))
		if err := c.produce(ctx, p, records[:n]); err != nil {
			c.cfg.Logger.Warn("changelog tombstones not written; retried after the next base",
				"topic", c.cfg.Topic, "partition", p, "err", err)
			return append(left, chains...)
		}
		records = records[n:]
	}
	if len(ends) > 0 {
		c.cfg.Logger.Debug("changelog chains tombstoned", "topic", c.cfg.Topic, "partition", p,
			"chains", len(chains)-len(left), "records", len(ends)+len(chunks))
	}
	return left
}

// rawRecord is a record to produce; a nil value is a tombstone.
type rawRecord struct{ key, value []byte }

// produce sends records to partition p as one batch, acknowledged by all
// in-sync replicas, at most produceAttempts times. A batch sent again
// after an unanswered attempt may be appended twice: its records are the
// same keys and values, so a second copy changes nothing Load returns.
func (c *Changelog) produce(ctx context.Context, p int32, records []rawRecord) error {
	var err error
	for attempt := 1; ; attempt++ {
		batch := make([]kafka.Record, len(records))
		for i, r := range records {
			batch[i] = kafka.Record{Key: kafka.NewBytes(r.key), Value: kafka.NewBytes(r.value)}
		}
		var resp *kafka.ProduceResponse
		resp, err = c.client.Produce(ctx, &kafka.ProduceRequest{
			Topic: c.cfg.Topic, Partition: int(p), RequiredAcks: kafka.RequireAll,
			Records: kafka.NewRecordReader(batch...),
		})
		if err == nil {
			err = resp.Error
		}
		if err == nil {
			for _, e := range resp.RecordErrors {
				err = e
				break
			}
		}
		if err == nil {
			return nil
		}
		var kerr kafka.Error
		if attempt == produceAttempts || ctx.Err() != nil || (errors.As(err, &kerr) && !kerr.Temporary()) {
			return err
		}
		sleep(ctx, time.Duration(attempt)*200*time.Millisecond)
	}
}

// blobWriter cuts a blob into chunk records and sends them, a batch at a
// time.
type blobWriter struct {
	c     *Changelog
	ctx   context.Context
	p     int32
	chain *clChain
	seq   uint32

	chunk  []byte      // the chunk being filled
	batch  []rawRecord // chunks not yet sent
	size   int         // bytes of batch
	chunks uint32      // chunk records made
	n      uint64
	crc    uint32
	err    error
}

func (w *blobWriter) Write(b []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.n+uint64(len(b)) > MaxModelSize {
		w.err = fmt.Errorf("%w: blob over %d bytes", ErrInvalidCheckpoint, MaxModelSize)
		return 0, w.err
	}
	written := 0
	for len(b) > 0 {
		if w.chunk == nil {
			w.chunk = make([]byte, 0, w.c.cfg.ChunkBytes)
		}
		n := min(len(b), cap(w.chunk)-len(w.chunk))
		w.chunk = append(w.chunk, b[:n]...)
		b, written = b[n:], written+n
		if len(w.chunk) == cap(w.chunk) {
			if w.err = w.addChunk(); w.err != nil {
				return written, w.err
			}
		}
	}
	return written, nil
}

// addChunk moves the chunk being filled to the batch, and sends the batch
// when the next chunk might not fit.
func (w *blobWriter) addChunk() error {
	w.crc = crc32.Update(w.crc, castagnoli, w.chunk)
	w.n += uint64(len(w.chunk))
	w.add(chunkKey(w.p, w.chain.id, w.seq, w.chunks), w.chunk)
	w.chunks++
	w.chain.blobs[w.seq] = w.chunks // tombstoned later, even if this save fails
	w.chunk = nil
	if w.size+w.c.cfg.ChunkBytes+recordOverhead > w.c.batchBytes {
		return w.send()
	}
	return nil
}

func (w *blobWriter) add(key, value []byte) {
	w.batch = append(w.batch, rawRecord{key, value})
	w.size += len(key) + len(value) + recordOverhead
}

func (w *blobWriter) send() error {
	if len(w.batch) == 0 {
		return nil
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if err := w.c.produce(w.ctx, w.p, w.batch); err != nil {
		return fmt.Errorf("produce %d records: %w", len(w.batch), err)
	}
	w.batch, w.size = w.batch[:0], 0
	return nil
}

// finish sends the last chunk and the end record, in one batch: a batch is
// appended to the log whole or not at all, so the end record is in the
// log only after every chunk of the blob.
func (w *blobWriter) finish(e ChangelogEntry) error {
	if len(w.chunk) > 0 {
		if err := w.addChunk(); err != nil {
			return err
		}
	}
	end := endRecord{base: e.Base, epoch: e.Epoch, next: e.Next, seq: w.seq, chunks: w.chunks, length: w.n, crc: w.crc}
	w.add(endKey(w.p, w.chain.id, w.seq), end.encode())
	return w.send()
}

// endRecord closes a blob: what it holds and the checkpoint it completes.
type endRecord struct {
	base   bool
	epoch  uint64
	next   int64
	seq    uint32
	chunks uint32
	length uint64
	crc    uint32
}

func (r endRecord) encode() []byte {
	b := make([]byte, 0, endLen)
	b = append(b, endMagic...)
	b = append(b, endLayout, boolByte(r.base))
	b = binary.BigEndian.AppendUint64(b, r.epoch)
	b = binary.BigEndian.AppendUint64(b, uint64(r.next))
	b = binary.BigEndian.AppendUint32(b, r.seq)
	b = binary.BigEndian.AppendUint32(b, r.chunks)
	b = binary.BigEndian.AppendUint64(b, r.length)
	return binary.BigEndian.AppendUint32(b, r.crc)
}

func decodeEnd(b []byte) (endRecord, error) {
	if len(b) != endLen || string(b[:4]) != endMagic || b[4] != endLayout || b[5] > 1 {
		return endRecord{}, fmt.Errorf("%w: end record of %d bytes is malformed", ErrCorrupt, len(b))
	}
	base := b[5] == 1
	b = b[6:]
	r := endRecord{
		base:   base,
		epoch:  binary.BigEndian.Uint64(b[0:]),
		next:   int64(binary.BigEndian.Uint64(b[8:])),
		seq:    binary.BigEndian.Uint32(b[16:]),
		chunks: binary.BigEndian.Uint32(b[20:]),
		length: binary.BigEndian.Uint64(b[24:]),
		crc:    binary.BigEndian.Uint32(b[32:]),
	}
	return r, nil
}

// Record keys are text, readable with kafka-console-consumer:
// "<partition>/<epoch>/<nonce, 16 hex digits>/<blob>/<chunk>" for chunks
// and ".../<blob>/end" for end records.
func chainPrefix(p int32, id chainID) string {
	return fmt.Sprintf("%d/%d/%016x/", p, id.epoch, id.nonce)
}

func chunkKey(p int32, id chainID, seq, chunk uint32) []byte {
	return fmt.Appendf(nil, "%s%d/%d", chainPrefix(p, id), seq, chunk)
}

func endKey(p int32, id chainID, seq uint32) []byte {
	return fmt.Appendf(nil, "%s%d/end", chainPrefix(p, id), seq)
}

// changelogKey is a parsed record key.
type changelogKey struct {
	p     int32
	id    chainID
	seq   uint32
	chunk uint32
	end   bool
}

func parseChangelogKey(k []byte) (changelogKey, bool) {
	f := strings.Split(string(k), "/")
	if len(f) != 5 || len(f[2]) != 16 {
		return changelogKey{}, false
	}
	p, err1 := strconv.ParseInt(f[0], 10, 32)
	epoch, err2 := strconv.ParseUint(f[1], 10, 64)
	nonce, err3 := strconv.ParseUint(f[2], 16, 64)
	seq, err4 := strconv.ParseUint(f[3], 10, 32)
	key := changelogKey{p: int32(p), id: chainID{epoch, nonce}, seq: uint32(seq), end: f[4] == "end"}
	var err5 error
	if !key.end {
		var chunk uint64
		chunk, err5 = strconv.ParseUint(f[4], 10, 32)
		key.chunk = uint32(chunk)
	}
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil || seq >= maxBlobs {
		return changelogKey{}, false
	}
	return key, true
}

func newNonce() (uint64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("state: changelog nonce: %w", err)
	}
	return binary.BigEndian.Uint64(b[:]), nil
}
