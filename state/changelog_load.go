package state

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
)

// fetchBytes is the most a fetch of Load asks for (a broker returns a
// larger first batch whole).
const fetchBytes = 8 << 20

// Load reads partition p from its first offset to its end, both taken
// when Load starts, and returns the newest complete checkpoint: the end
// record with the largest (epoch, next offset), the later one on a tie,
// whose chain has the end records of its base and of every delta before
// it. Chunks without their end record (a torn save) are ignored, and so is
// everything a tombstone removed. ok is false when the partition holds no
// checkpoint. When the chunks of that newest checkpoint do not match its
// end records (missing, wrong length or CRC), Load returns ErrCorrupt,
// never an older checkpoint instead. Load holds every chain it reads in memory until it has read
// the partition: the newest chain, and torn or zombie chains until a new
// base tombstones them. What it read also tells later Saves of p which
// chains to tombstone and which epochs fence them. ctx bounds the whole
// load.
func (c *Changelog) Load(ctx context.Context, p int32) (ChangelogState, bool, error) {
	part, err := c.partition(p)
	if err != nil {
		return ChangelogState{}, false, err
	}
	part.mu.Lock()
	defer part.mu.Unlock()
	first, end, err := c.bounds(ctx, p)
	if err != nil {
		return ChangelogState{}, false, fmt.Errorf("state: changelog load of partition %d: offsets: %w", p, err)
	}
	s := &changelogScan{p: p, chains: map[chainID]*scanChain{}}
	if err := c.read(ctx, p, first, end, s.add); err != nil {
		return ChangelogState{}, false, fmt.Errorf("state: changelog load of partition %d: %w", p, err)
	}
	if s.skipped > 0 {
		c.cfg.Logger.Warn("changelog records ignored: not the changelog's", "topic", c.cfg.Topic, "partition", p, "records", s.skipped)
	}
	best, found := s.newest()
	var st ChangelogState
	if found {
		if st, err = s.assemble(best); err != nil {
			return ChangelogState{}, false, fmt.Errorf("state: changelog load of partition %d: %w", p, err)
		}
	}
	st.Skipped = s.skipped

	part.chain, part.broken, part.garbage = nil, false, nil
	part.newest, part.known = position{best.end.epoch, best.end.next}, found
	for id, ch := range s.chains {
		part.maxEpoch = max(part.maxEpoch, id.epoch)
		keys, live := ch.keys(id)
		switch {
		case found && id == best.id:
			part.chain, part.broken = keys, len(keys.blobs) > int(best.end.seq)+1
		case live:
			part.garbage = append(part.garbage, keys)
		}
	}
	c.cfg.Logger.Debug("changelog loaded", "topic", c.cfg.Topic, "partition", p, "first", first, "end", end,
		"found", found, "epoch", st.Epoch, "next", st.Next, "deltas", len(st.Deltas), "chains", len(s.chains))
	return st, found, nil
}

// wait fetches partition p at offset from, a fetch the broker holds until
// a record is there or maxWait has passed, and reports whether its answer
// holds a record. The answer is at most one batch (MaxBytes 1: a broker
// returns the first batch whatever its size), which is dropped.
func (c *Changelog) wait(ctx context.Context, p int32, from int64, maxWait time.Duration) (bool, error) {
	resp, err := c.client.Fetch(ctx, &kafka.FetchRequest{
		Topic: c.cfg.Topic, Partition: int(p), Offset: from,
		MinBytes: 1, MaxBytes: 1, MaxWait: maxWait,
	})
	if err == nil {
		err = resp.Error
	}
	if err != nil || resp.Records == nil {
		return false, err
	}
	r, err := resp.Records.ReadRecord()
	if err != nil { // io.EOF: nothing arrived in time
		return false, nil
	}
	closeBytes(r.Key, r.Value)
	return true, nil
}

// read calls fn on every record of partition p from first up to end.
// Each fetch moves past at least one offset, so it makes at most
// end-first+1 of them.
func (c *Changelog) read(ctx context.Context, p int32, first, end int64, fn func(off int64, key, value []byte)) error {
	for off := first; off < end; {
		resp, err := c.client.Fetch(ctx, &kafka.FetchRequest{
			Topic: c.cfg.Topic, Partition: int(p), Offset: off,
			MinBytes: 1, MaxBytes: fetchBytes, MaxWait: 100 * time.Millisecond,
		})
		if err == nil {
			err = resp.Error
		}
		if err != nil {
			return fmt.Errorf("fetch at %d: %w", off, err)
		}
		n := 0
		for {
			r, err := resp.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read at %d: %w", off, err)
			}
			if r.Offset >= end {
				closeBytes(r.Key, r.Value)
				return nil
			}
			if r.Offset < off { // a batch may start before off
				closeBytes(r.Key, r.Value)
				continue
			}
			key, err1 := readAll(r.Key)
			value, err2 := readAll(r.Value)
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("read record %d: %w", r.Offset, err)
			}
			fn(r.Offset, key, value)
			off = r.Offset + 1
			n++
		}
		if n == 0 {
			// Nothing at off: compacted away. The high watermark bounds
			// what there is.
			if resp.HighWatermark <= off {
				return nil
			}
			off++
		}
	}
	return nil
}

func readAll(b kafka.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	defer b.Close()
	out := make([]byte, b.Len())
	_, err := io.ReadFull(b, out)
	return out, err
}

func closeBytes(bs ...kafka.Bytes) {
	for _, b := range bs {
		if b != nil {
			b.Close()
		}
	}
}

// changelogScan is what Load has read of a partition: the live records of
// every chain.
type changelogScan struct {
	p       int32
	chains  map[chainID]*scanChain
	skipped int
}

type scanChain struct {
	blobs map[uint32]*scanBlob
}

type scanBlob struct {
	chunks    map[uint32][]byte
	keys      uint32 // chunk keys seen: one past the highest index
	end       *endRecord
	endOffset int64
}

// add takes one record, in offset order: a later record of a key replaces
// an earlier one, and a tombstone (nil value) removes it.
func (s *changelogScan) add(off int64, key, value []byte) {
	k, ok := parseChangelogKey(key)
	if !ok || k.p != s.p {
		s.skipped++
		return
	}
	var end endRecord
	if k.end && value != nil {
		var err error
		end, err = decodeEnd(value)
		if err != nil || end.epoch != k.id.epoch || end.seq != k.seq || end.base != (k.seq == 0) {
			s.skipped++
			return
		}
	}
	ch := s.chains[k.id]
	if ch == nil {
		ch = &scanChain{blobs: map[uint32]*scanBlob{}}
		s.chains[k.id] = ch
	}
	b := ch.blobs[k.seq]
	if b == nil {
		b = &scanBlob{chunks: map[uint32][]byte{}}
		ch.blobs[k.seq] = b
	}
	switch {
	case k.end && value == nil:
		b.end = nil
	case k.end:
		b.end, b.endOffset = &end, off
	case value == nil:
		delete(b.chunks, k.chunk)
	default:
		b.chunks[k.chunk] = value
		b.keys = max(b.keys, k.chunk+1)
	}
}

// candidate is an end record that may close the newest checkpoint.
type candidate struct {
	id     chainID
	end    endRecord
	offset int64
}

// newest returns the end record of the largest (epoch, next), the latest
// on a tie, among those whose chain has the end records of every blob
// before it. (An end record without them belongs to a chain that was
// tombstoned, which happens only after a newer base is complete.)
func (s *changelogScan) newest() (candidate, bool) {
	var best candidate
	found := false
	for id, ch := range s.chains {
		for _, b := range ch.blobs {
			if b.end == nil || !ch.ended(b.end.seq) {
				continue
			}
			c := candidate{id, *b.end, b.endOffset}
			if !found || cmp.Or(position{c.end.epoch, c.end.next}.compare(position{best.end.epoch, best.end.next}),
				cmp.Compare(c.offset, best.offset)) > 0 {
				best, found = c, true
			}
		}
	}
	return best, found
}

// ended reports whether blobs 0 to seq have their end records.
func (ch *scanChain) ended(seq uint32) bool {
	for i := range seq + 1 {
		if b := ch.blobs[i]; b == nil || b.end == nil {
			return false
		}
	}
	return true
}

// assemble returns the checkpoint best closes: its chain's base and every
// delta up to it, checked against their end records.
func (s *changelogScan) assemble(best candidate) (ChangelogState, error) {
	st := ChangelogState{Epoch: best.end.epoch, Next: best.end.next}
	ch := s.chains[best.id]
	for seq := range best.end.seq + 1 {
		b := ch.blobs[seq]
		if b == nil || b.end == nil {
			return ChangelogState{}, fmt.Errorf("%w: chain %s has no end record for blob %d of %d",
				ErrCorrupt, chainPrefix(s.p, best.id), seq, best.end.seq)
		}
		blob, err := b.join()
		if err != nil {
			return ChangelogState{}, fmt.Errorf("%w: chain %s blob %d: %v", ErrCorrupt, chainPrefix(s.p, best.id), seq, err)
		}
		if seq == 0 {
			st.Base = blob
		} else {
			st.Deltas = append(st.Deltas, blob)
		}
	}
	return st, nil
}

// join returns the blob's bytes, checked against its end record.
func (b *scanBlob) join() ([]byte, error) {
	e := b.end
	if e.length > MaxModelSize {
		return nil, fmt.Errorf("%d bytes", e.length)
	}
	out := make([]byte, 0, e.length)
	for i := range e.chunks {
		chunk, ok := b.chunks[i]
		if !ok {
			return nil, fmt.Errorf("chunk %d of %d missing", i, e.chunks)
		}
		out = append(out, chunk...)
	}
	if uint64(len(out)) != e.length || crc32.Checksum(out, castagnoli) != e.crc {
		return nil, fmt.Errorf("%d bytes in %d chunks do not match the end record (%d bytes, CRC %08x)", len(out), e.chunks, e.length, e.crc)
	}
	return out, nil
}

// keys returns the record keys of the chain to tombstone it, and whether
// any record of it is live.
func (ch *scanChain) keys(id chainID) (*clChain, bool) {
	keys := &clChain{id: id}
	live := false
	for seq, b := range ch.blobs {
		for int(seq) >= len(keys.blobs) {
			keys.blobs = append(keys.blobs, 0)
		}
		keys.blobs[seq] = b.keys
		live = live || b.end != nil || len(b.chunks) > 0
	}
	return keys, live
}
