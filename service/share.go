package service

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"denoiser/online"
	"denoiser/state"
)

// sharedLog is the shared topic (state.SharedLog).
type sharedLog interface {
	Append(ctx context.Context, records []state.SharedRecord) error
	Read(ctx context.Context, from int64, fn func(off int64, key, value []byte)) (int64, error)
	Close() error
}

// sharer exchanges what the partition models learn of the shared
// parameters (their item rows: online.Model.Publish and MergeFrom)
// through the shared topic, with state_layout partition
// (docs/design/partitions.md, "The merge in the service").
//
// Every Sharing.Interval or Sharing.EveryEvents records, whichever comes
// first, and at every checkpoint before the model is copied, each
// partition model of this member publishes what its own
// steps changed since its last publication: a delta tagged with its
// partition q, the next input offset at which it published (seq) and the
// one of its previous publication (from). Then each merges, in the log's
// order, the deltas of the other partitions that it has not merged: a
// delta of q whose seq is above the model's cursor of q (Model.Merged,
// part of the model's checkpoint) and whose from is not below it. A
// delta that starts before the cursor overlaps one the model merged
// already: after a restore, the new owner of q steps again the events
// after q's checkpoint, which the old owner may have published; that
// delta is skipped (counted), so that no step is counted twice, at the
// cost of the steps it holds beyond the overlap.
//
// The model goroutine publishes and merges; a reader goroutine reads the
// topic into memory (at most keepBytes of complete deltas, the oldest
// dropped first), and a sender goroutine appends the publications, so
// that the model goroutine never waits for the brokers. A publication
// that finds the send queue full is dropped (counted): its steps are not
// shared.
type sharer struct {
	set      *online.Set
	next     func(p int32) int64 // the partition's next input offset (checkpointer.next)
	interval time.Duration
	every    int // records of the member between two publications
	metrics  *metrics
	log      *slog.Logger
	open     func(context.Context) (sharedLog, error)
	timeout  time.Duration // of one append
	writer   uint64        // tags this instance's records
	keep     int           // bytes of complete deltas kept in memory

	// Model goroutine.
	last   time.Time
	events int                     // records since the last publication
	models map[int32]*online.Model // the models sharing, by partition
	from   map[int32]int64         // each one's previous publication (seq), or where it started
	seen   map[int32]int           // the index (in the log's order) of the first delta each has not looked at
	pub    online.Shared
	keys   []int32

	// The reader's, under mu.
	mu      sync.Mutex
	deltas  []*sharedDelta // complete, in the log's order
	base    int            // the index of deltas[0] in the log's order
	held    int            // bytes of deltas
	partial map[deltaID]*sharedDelta

	out      chan []state.SharedRecord
	inflight atomic.Int64  // publications queued or being sent
	ready    chan struct{} // closed once lg is open
	lg       sharedLog
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

// sharedDelta is one publication of a partition model, read back.
type sharedDelta struct {
	id     deltaID
	from   int64
	chunks []*online.Shared
	bytes  int
}

// deltaID names a publication: its writer, its partition and its seq.
type deltaID struct {
	writer uint64
	q      int32
	seq    int64
}

// The shared record: sharedMagic, version (u32), writer (u64), partition
// (u32), from (i64), seq (i64), chunk and chunks (u32 each), all
// little-endian, then the chunk's online.Shared encoding. Its key is
// "partition/seq/chunk", for people reading the topic.
const (
	sharedMagic       = "DNSR"
	sharedVersion     = 1
	sharedHeaderBytes = 4 + 4 + 8 + 4 + 8 + 8 + 4 + 4
	// sharedChunkBytes is the size a publication is cut at.
	sharedChunkBytes = 1 << 20
	// sharedQueue bounds the publications waiting to be sent.
	sharedQueue = 64
	// defaultSharedKeep is the memory of deltas read back.
	defaultSharedKeep = 64 << 20
	// sharedPoll is the wait between two reads that found nothing new,
	// and sharedRetry the wait after an error.
	sharedPoll  = 200 * time.Millisecond
	sharedRetry = time.Second
)

func newSharer(set *online.Set, next func(int32) int64, interval time.Duration, every int, m *metrics, log *slog.Logger,
	open func(context.Context) (sharedLog, error), timeout time.Duration) *sharer {
	s := &sharer{
		set: set, next: next, interval: interval, every: every, metrics: m, log: log, open: open, timeout: timeout,
		writer: rand.Uint64(), keep: defaultSharedKeep, last: time.Now(),
		models: map[int32]*online.Model{}, from: map[int32]int64{}, seen: map[int32]int{},
		partial: map[deltaID]*sharedDelta{},
		out:     make(chan []state.SharedRecord, sharedQueue),
		ready:   make(chan struct{}),
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.wg.Add(2)
	go s.read()
	go s.send()
	return s
}

// track makes partition p's model m share, if it does not yet: from the
// partition's position now. timedSet.For calls it for every model it
// hands to the loop, before the model steps.
func (s *sharer) track(p int32, m *online.Model) {
	if s.models[p] == m {
		return
	}
	m.StartSharing()
	s.models[p] = m
	s.from[p] = s.next(p)
	s.mu.Lock()
	s.seen[p] = s.base
	s.mu.Unlock()
}

// record counts a record of the member, and publishes and merges after
// every-th (at the end of a batch: batchEnd). Model goroutine.
func (s *sharer) record(batchEnd bool) {
	s.events++
	if s.events >= s.every && batchEnd {
		s.tick(true)
	}
}

// tick publishes and merges if the interval has passed since the last
// time, or now with force. Model goroutine, while no partition model
// steps.
func (s *sharer) tick(force bool) {
	now := time.Now()
	if !force && now.Sub(s.last) < s.interval {
		return
	}
	s.last, s.events = now, 0
	s.keys = s.keys[:0]
	for p, m := range s.models {
		if s.set.Model(p) != m { // evicted or replaced: a new model is tracked when it steps
			delete(s.models, p)
			delete(s.from, p)
			delete(s.seen, p)
			continue
		}
		s.keys = append(s.keys, p)
	}
	slices.Sort(s.keys)
	for _, p := range s.keys {
		s.publish(p)
	}
	s.mu.Lock()
	deltas, base := s.deltas, s.base
	s.mu.Unlock()
	for _, p := range s.keys {
		s.merge(p, deltas, base)
	}
}

// publish sends what partition p's model changed since its last
// publication.
func (s *sharer) publish(p int32) {
	m := s.models[p]
	if err := m.Publish(&s.pub); err != nil {
		s.log.Warn("shared parameters not published", "partition", p, "err", err)
		return
	}
	seq := s.next(p)
	if len(s.pub.Items) == 0 || seq < 0 {
		return
	}
	from := s.from[p]
	s.from[p] = seq
	recs, err := s.records(p, from, seq)
	if err != nil {
		s.metrics.shared.WithLabelValues("dropped").Inc()
		s.log.Warn("shared parameters not published", "partition", p, "seq", seq, "err", err)
		return
	}
	s.inflight.Add(1)
	select {
	case s.out <- recs:
		s.metrics.shared.WithLabelValues("published").Inc()
	default:
		s.inflight.Add(-1)
		s.metrics.shared.WithLabelValues("dropped").Inc()
		s.log.Warn("shared parameters not published: the send queue is full (the shared topic is slow or unreachable)", "partition", p, "seq", seq)
	}
}

// records encodes s.pub as the records of one publication, cut into
// chunks of about sharedChunkBytes.
func (s *sharer) records(p int32, from, seq int64) ([]state.SharedRecord, error) {
	stride := s.pub.ItemStride()
	var cuts []int // the end of each chunk's items
	size := 0
	for i, id := range s.pub.Items {
		n := 8*stride + 8 + len(id)
		if size > 0 && size+n > sharedChunkBytes {
			cuts = append(cuts, i)
			size = 0
		}
		size += n
	}
	cuts = append(cuts, len(s.pub.Items))
	recs := make([]state.SharedRecord, len(cuts))
	lo := 0
	for c, hi := range cuts {
		chunk := online.Shared{K: s.pub.K, Dim: s.pub.Dim, Items: s.pub.Items[lo:hi], Rows: s.pub.Rows[lo*stride : hi*stride]}
		body, err := chunk.MarshalBinary()
		if err != nil {
			return nil, err
		}
		v := make([]byte, sharedHeaderBytes, sharedHeaderBytes+len(body))
		copy(v, sharedMagic)
		le := binary.LittleEndian
		le.PutUint32(v[4:], sharedVersion)
		le.PutUint64(v[8:], s.writer)
		le.PutUint32(v[16:], uint32(p))
		le.PutUint64(v[20:], uint64(from))
		le.PutUint64(v[28:], uint64(seq))
		le.PutUint32(v[36:], uint32(c))
		le.PutUint32(v[40:], uint32(len(cuts)))
		recs[c] = state.SharedRecord{
			Key:   []byte(strconv.Itoa(int(p)) + "/" + strconv.FormatInt(seq, 10) + "/" + strconv.Itoa(c)),
			Value: append(v, body...),
		}
		lo = hi
	}
	return recs, nil
}

// merge merges into partition p's model the deltas it has not looked at
// (deltas[i] is the (base+i)-th of the log).
func (s *sharer) merge(p int32, deltas []*sharedDelta, base int) {
	m := s.models[p]
	for i := max(s.seen[p]-base, 0); i < len(deltas); i++ {
		d := deltas[i]
		if d.id.q == p {
			continue
		}
		cur := m.Merged(d.id.q)
		if d.id.seq <= cur {
			continue // merged already (before a checkpoint this model was restored from)
		}
		if d.from < cur {
			s.metrics.shared.WithLabelValues("overlapping").Inc()
			continue
		}
		outcome := "merged"
		for _, c := range d.chunks {
			if err := m.MergeFrom(d.id.q, d.id.seq, c); err != nil {
				outcome = "refused"
				s.log.Warn("shared delta refused", "partition", p, "from_partition", d.id.q, "seq", d.id.seq, "err", err)
				break
			}
		}
		s.metrics.shared.WithLabelValues(outcome).Inc()
	}
	s.seen[p] = base + len(deltas)
}

// read opens the shared topic and reads it into memory until the sharer
// closes.
func (s *sharer) read() {
	defer s.wg.Done()
	next := int64(-1)
	for s.ctx.Err() == nil {
		if s.lg == nil {
			lg, err := s.open(s.ctx)
			if err != nil {
				if s.ctx.Err() == nil {
					s.metrics.shared.WithLabelValues("read_failed").Inc()
					s.log.Warn("shared topic not open", "err", err)
				}
				sleepCtx(s.ctx, sharedRetry)
				continue
			}
			s.lg = lg
			close(s.ready)
		}
		n, err := s.lg.Read(s.ctx, next, s.add)
		switch {
		case err != nil && s.ctx.Err() == nil:
			s.metrics.shared.WithLabelValues("read_failed").Inc()
			s.log.Warn("shared topic not read", "offset", next, "err", err)
			sleepCtx(s.ctx, sharedRetry)
		case n == next || err != nil:
			sleepCtx(s.ctx, sharedPoll)
		}
		next = n
	}
}

// add takes one record of the shared topic (reader goroutine).
func (s *sharer) add(off int64, _, value []byte) {
	id, from, chunk, chunks, shared, err := parseShared(value)
	if err != nil {
		s.metrics.shared.WithLabelValues("unreadable").Inc()
		s.log.Warn("shared topic: record skipped", "offset", off, "err", err)
		return
	}
	d := s.partial[id]
	if d == nil {
		if chunk != 0 {
			return // its first chunks were not read (retention, or a send that failed)
		}
		d = &sharedDelta{id: id, from: from}
		s.partial[id] = d
	}
	if chunk != len(d.chunks) {
		delete(s.partial, id)
		return
	}
	d.chunks = append(d.chunks, shared)
	d.bytes += len(value)
	if len(d.chunks) < chunks {
		return
	}
	delete(s.partial, id)
	s.mu.Lock()
	s.deltas = append(s.deltas, d)
	s.held += d.bytes
	for s.held > s.keep && len(s.deltas) > 1 {
		s.held -= s.deltas[0].bytes
		s.deltas[0] = nil
		s.deltas = s.deltas[1:]
		s.base++
	}
	s.mu.Unlock()
}

// parseShared decodes a shared record.
func parseShared(v []byte) (id deltaID, from int64, chunk, chunks int, sh *online.Shared, err error) {
	if len(v) < sharedHeaderBytes || string(v[:4]) != sharedMagic {
		return id, 0, 0, 0, nil, errors.New("not a shared delta")
	}
	le := binary.LittleEndian
	if ver := le.Uint32(v[4:]); ver != sharedVersion {
		return id, 0, 0, 0, nil, fmt.Errorf("shared delta version %d, this build reads %d", ver, sharedVersion)
	}
	id = deltaID{writer: le.Uint64(v[8:]), q: int32(le.Uint32(v[16:])), seq: int64(le.Uint64(v[28:]))}
	from = int64(le.Uint64(v[20:]))
	chunk, chunks = int(le.Uint32(v[36:])), int(le.Uint32(v[40:]))
	if id.q < 0 || id.seq < 0 || from >= id.seq || chunks < 1 || chunk >= chunks {
		return id, 0, 0, 0, nil, fmt.Errorf("shared delta header: partition %d, from %d, seq %d, chunk %d of %d", id.q, from, id.seq, chunk, chunks)
	}
	sh = new(online.Shared)
	if err := sh.UnmarshalBinary(v[sharedHeaderBytes:]); err != nil {
		return id, 0, 0, 0, nil, err
	}
	return id, from, chunk, chunks, sh, nil
}

// send appends the publications until the sharer closes.
func (s *sharer) send() {
	defer s.wg.Done()
	select {
	case <-s.ready:
	case <-s.ctx.Done():
		return
	}
	for {
		select {
		case recs := <-s.out:
			ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
			for _, r := range recs { // a record each: a chunk is as large as a batch may be
				if err := s.lg.Append(ctx, []state.SharedRecord{r}); err != nil {
					s.metrics.shared.WithLabelValues("send_failed").Inc()
					s.log.Warn("shared delta not sent", "key", string(r.Key), "err", err)
					break
				}
			}
			cancel()
			s.inflight.Add(-1)
		case <-s.ctx.Done():
			return
		}
	}
}

// flush waits until every publication queued has been sent (or failed),
// or ctx ends.
func (s *sharer) flush(ctx context.Context) {
	for s.inflight.Load() > 0 && ctx.Err() == nil {
		sleepCtx(ctx, 10*time.Millisecond)
	}
}

// close stops the goroutines and closes the topic.
func (s *sharer) close() error {
	s.stop()
	s.wg.Wait()
	if s.lg != nil {
		return s.lg.Close()
	}
	return nil
}

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
