package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// TailScan finds which input records already have a record in the output
// topics (scored records and dead letters), by reading the topics' ends
// back. A member that takes a partition over after its previous owner
// crashed uses it so as not to emit again what the crashed member emitted
// after its last commit (kafka-go has no transactions): the new owner's
// copies would carry other scores.
//
// It relies on one property of the writers: within one output partition
// the records of one input partition appear in input order (the model loop
// emits in input order; a writer sends its batches in order). So, read
// backwards, the first record of input partition p below the start offset
// ends the scan of that output partition for p. A failed batch retried
// after later ones breaks the order; the scan may then miss records, which
// are emitted again: never the other way round.
type TailScan struct {
	// Brokers are the bootstrap addresses (required).
	Brokers []string
	// Topics are the output topics to read: the scored and the
	// dead-letter topic.
	Topics []string
	// Window bounds the records read back per output partition (default
	// DefaultTailWindow). A partition whose scan reaches it without an answer is
	// reported incomplete: the records it did not find are emitted again.
	Window int
	// Timeout bounds each request (default 5s).
	Timeout time.Duration
}

// DefaultTailWindow is TailScan.Window's default.
const DefaultTailWindow = 200_000

// tailChunk is the number of records read back at a time.
const tailChunk = 4096

// Emitted returns, for each input partition p of sourceTopic in from, the
// offsets at or after from[p] that have a record in one of the topics,
// and whether every output partition was read back far enough to be sure.
func (t TailScan) Emitted(ctx context.Context, sourceTopic string, from map[int]int64) (map[int]map[int64]bool, bool, error) {
	if t.Window <= 0 {
		t.Window = DefaultTailWindow
	}
	if t.Timeout <= 0 {
		t.Timeout = 5 * time.Second
	}
	tr := &kafka.Transport{DialTimeout: t.Timeout, ClientID: "denoiser-tail"}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(t.Brokers...), Transport: tr, Timeout: t.Timeout}
	found := map[int]map[int64]bool{}
	for p := range from {
		found[p] = map[int64]bool{}
	}
	if len(from) == 0 {
		return found, true, nil
	}
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: t.Topics})
	if err != nil {
		return nil, false, fmt.Errorf("tail scan: metadata: %w", err)
	}
	complete := true
	for _, topic := range meta.Topics {
		if topic.Error != nil {
			return nil, false, fmt.Errorf("tail scan: topic %s: %w", topic.Name, topic.Error)
		}
		for _, part := range topic.Partitions {
			ok, err := t.scan(ctx, c, topic.Name, part.ID, sourceTopic, from, found)
			if err != nil {
				return nil, false, err
			}
			complete = complete && ok
		}
	}
	return found, complete, nil
}

// scan reads output partition q of topic back from its end, tailChunk
// records at a time, until every input partition of from has shown a
// record below its start offset, the partition's start or Window.
func (t TailScan) scan(ctx context.Context, c *kafka.Client, topic string, q int, sourceTopic string, from map[int]int64, found map[int]map[int64]bool) (bool, error) {
	first, last, err := bounds(ctx, c, topic, q)
	if err != nil {
		return false, err
	}
	open := len(from) // input partitions not yet closed in q
	closed := map[int]bool{}
	for hi := last; hi > first; {
		if int(last-hi) >= t.Window {
			return false, nil
		}
		lo := max(first, hi-tailChunk)
		err := readRange(ctx, c, topic, q, lo, hi, func(r *kafka.Record) {
			p, off, ok := sourceOf(r, sourceTopic)
			if !ok {
				return
			}
			start, want := from[p]
			switch {
			case !want:
			case off >= start:
				found[p][off] = true
			case !closed[p]:
				closed[p] = true
				open--
			}
		})
		if err != nil {
			return false, err
		}
		if open == 0 {
			return true, nil
		}
		hi = lo
	}
	return true, nil // read back to the partition's start
}

// bounds returns the first and the next offset of partition q.
func bounds(ctx context.Context, c *kafka.Client, topic string, q int) (first, last int64, err error) {
	resp, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.FirstOffsetOf(q), kafka.LastOffsetOf(q)},
	}})
	if err != nil {
		return 0, 0, fmt.Errorf("tail scan: list offsets of %s/%d: %w", topic, q, err)
	}
	for _, po := range resp.Topics[topic] {
		if po.Partition != q {
			continue
		}
		if po.Error != nil {
			return 0, 0, fmt.Errorf("tail scan: list offsets of %s/%d: %w", topic, q, po.Error)
		}
		return po.FirstOffset, po.LastOffset, nil
	}
	return 0, 0, fmt.Errorf("tail scan: list offsets of %s/%d: no answer", topic, q)
}

// readRange calls fn on every record of partition q from lo up to hi.
func readRange(ctx context.Context, c *kafka.Client, topic string, q int, lo, hi int64, fn func(*kafka.Record)) error {
	for off := lo; off < hi; {
		resp, err := c.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: q, Offset: off, MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 100 * time.Millisecond})
		if err == nil {
			err = resp.Error
		}
		if err != nil {
			return fmt.Errorf("tail scan: fetch %s/%d at %d: %w", topic, q, off, err)
		}
		n := 0
		for {
			r, err := resp.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("tail scan: read %s/%d at %d: %w", topic, q, off, err)
			}
			if r.Value != nil {
				r.Value.Close() // only the headers are read
			}
			if r.Offset < off {
				continue // a batch may start before the offset asked for
			}
			if r.Offset >= hi {
				return nil
			}
			fn(r)
			off = r.Offset + 1
			n++
		}
		if n == 0 {
			// Nothing at off: compacted or transaction markers. The high
			// watermark bounds what there is to read.
			if resp.HighWatermark <= off {
				return nil
			}
			off++
		}
	}
	return nil
}

// sourceOf reads the source position headers of an output record.
func sourceOf(r *kafka.Record, sourceTopic string) (partition int, offset int64, ok bool) {
	var topic, part, offs []byte
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderSourceTopic:
			topic = h.Value
		case HeaderSourcePartition:
			part = h.Value
		case HeaderSourceOffset:
			offs = h.Value
		}
	}
	if string(topic) != sourceTopic {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(string(part))
	o, err2 := strconv.ParseInt(string(offs), 10, 64)
	return p, o, err1 == nil && err2 == nil
}
