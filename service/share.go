package service

import (
	"context"
	"encoding/binary"
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
	Wait(ctx context.Context, from int64, maxWait time.Duration) (bool, error)
	Close() error
}

// sharer exchanges what the partition models learn of the shared
// parameters (their item rows, their context's statistics and the count
// of their events: online.Model.Publish and MergeFrom) through the shared
// topic, with state_layout partition
// (docs/design/partitions.md, "The merge in the service").
//
// Every Sharing.Interval or Sharing.EveryEvents records, whichever comes
// first, and at every checkpoint before the model is copied, each
// partition model of this member publishes what its own
// steps changed since its last publication: a delta tagged with its
// partition q, the next input offset at which it published (seq) and the
// one of its previous publication (from). Then, after waiting (at most
// Sharing.Wait) until the topic hands these publications back
// (awaitPublished), and at the end of every batch of records when deltas
// have been read back since (mergeArrived),
// each model that stepped since its last merge merges, in the log's
// order, the deltas of the other partitions that it has not merged, and
// records where and what it merged (merge, SharedHistory): a
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
// dropped first), and a sender goroutine appends the publications and
// merge points, so that the model goroutine waits for the brokers only
// in awaitPublished, for at most Sharing.Wait. A publication
// that finds the send queue full is dropped (counted): its steps are not
// shared.
type sharer struct {
	set      *online.Set
	next     func(p int32) int64 // the partition's next input offset (checkpointer.next)
	interval time.Duration
	every    int           // records of the member between two publications, once its models are no longer young (cadence)
	wait     time.Duration // the longest a publication waits to be read back (awaitPublished); ≤ 0: never
	metrics  *metrics
	log      *slog.Logger
	open     func(context.Context) (sharedLog, error)
	timeout  time.Duration // of one append
	writer   uint64        // tags this instance's records
	keep     int           // bytes of complete deltas kept in memory

	// Model goroutine.
	last   time.Time
	events int                    // records since the last publication
	parts  map[int32]*sharingPart // the models sharing, by partition
	pub    online.Shared
	keys   []int32
	chains uint32    // the chains of merge points begun
	merged []deltaID // what one merge point merged
	// pending holds the publications of the last tick, which
	// awaitPublished waits for; lateAt is ownRead's count when a wait
	// last expired, -1 if the last did not.
	pending []deltaID
	lateAt  int64

	// A new owner's windows (window.go), under wmu: by partition, and
	// where each partition's emitted records end (the last tail scan's).
	wmu         sync.Mutex
	windows     map[int32]*window
	ends        map[int32]int64
	windowsOpen atomic.Int32 // len(windows), for the hooks to skip the lock

	// The reader's, under mu.
	mu     sync.Mutex
	deltas []*sharedDelta // complete, in the log's order
	base   int            // the index of deltas[0] in the log's order
	held   int            // bytes of deltas
	// dropped is where the deltas dropped from memory begin in the
	// topic, which a new owner's window reads them back from
	// (fetchDropped).
	dropped droppedDeltas
	chunks  deltaChunks     // the reader's
	own     map[int32]int64 // the highest seq of each partition's publications of this writer read back
	points  recentPoints    // the merge points read back

	ownRead    atomic.Int64  // publications of this writer read back
	readStarts atomic.Int64  // reads of the topic begun (caughtUp)
	readDone   atomic.Int64  // the number of the last read that ended without error
	ownArrived chan struct{} // signalled, without blocking, when one is

	out      chan []state.SharedRecord
	inflight atomic.Int64  // publications queued or being sent
	ready    chan struct{} // closed once lg is open
	lg       sharedLog
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

// sharingPart is what the sharer keeps of one partition model.
type sharingPart struct {
	m *online.Model
	// chain numbers the model's chain of merge points among this
	// writer's; start is the partition's position when the model began
	// to share (where it was restored, or -1 if it had none), cursors the
	// model's then (what the checkpoint it was restored from had merged).
	chain   uint32
	start   int64
	cursors []online.Cursor
	from    int64  // its previous publication (seq), or start
	at      int64  // the position of its last merge point, or start
	seen    int    // the index (in the log's order) of the first delta it has not looked at
	points  uint32 // merge points recorded
}

const (
	// sharedQueue bounds the publications and merge points waiting to be
	// sent.
	sharedQueue = 64
	// defaultSharedKeep is the memory of deltas read back.
	defaultSharedKeep = 64 << 20
	// sharedBatchBytes bounds one Append of the sender (sharedBytes), half
	// the shared topic's max.message.bytes: a publication's chunks
	// (sharedChunkBytes) go two at a time, merge points by the hundred.
	sharedBatchBytes = 2 << 20
	// sharedRecordOverhead bounds what a record adds to a batch beyond
	// its key and value.
	sharedRecordOverhead = 256
	// sharedPoll bounds the wait for a new record after a read that found
	// nothing new (waitFor), and sharedRetry is the wait after an error.
	sharedPoll  = 200 * time.Millisecond
	sharedRetry = time.Second
)

func newSharer(set *online.Set, next func(int32) int64, interval time.Duration, every int, wait time.Duration, m *metrics, log *slog.Logger,
	open func(context.Context) (sharedLog, error), timeout time.Duration) *sharer {
	s := &sharer{
		set: set, next: next, interval: interval, every: every, wait: wait, metrics: m, log: log, open: open, timeout: timeout,
		writer: rand.Uint64(), keep: defaultSharedKeep, last: time.Now(), lateAt: -1,
		parts: map[int32]*sharingPart{}, own: map[int32]int64{},
		out:        make(chan []state.SharedRecord, sharedQueue),
		ready:      make(chan struct{}),
		ownArrived: make(chan struct{}, 1),
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
	if part := s.parts[p]; part != nil && part.m == m {
		return
	}
	m.StartSharing()
	start := s.next(p)
	s.mu.Lock()
	seen := s.base
	s.mu.Unlock()
	part := &sharingPart{m: m, chain: s.chains, start: start, cursors: m.MergedFrom(), from: start, at: start, seen: seen}
	s.parts[p] = part
	s.chains++
	s.startWindow(p, part)
}

// record counts a record of the member. At the end of a batch (batchEnd)
// it publishes and merges after every-th, and else merges what was read
// back since (mergeArrived). Model goroutine.
func (s *sharer) record(batchEnd bool) {
	s.events++
	if !batchEnd {
		return
	}
	if s.events >= s.cadence() {
		s.tick(true)
		return
	}
	s.mergeArrived()
}

// due reports whether record, at the end of the batches in flight (ahead
// records not counted yet), would publish (every records will have come
// since the last publication) or merge (a model that moved since its
// last merge point has deltas to look at). The loop asks it before it
// lets batches stay in flight past their end (consumer.Options.Drain), so
// that a backlog's merges are as timely as they were when every batch
// ended, and a publication comes at most one batch past every records.
// Model goroutine.
func (s *sharer) due(ahead int) bool {
	if s.events+ahead >= s.cadence() {
		return true
	}
	s.mu.Lock()
	end := s.base + len(s.deltas)
	s.mu.Unlock()
	for p, part := range s.parts {
		if at := s.next(p); part.seen < end && s.set.Model(p) == part.m && at != part.at && !s.inWindow(p, at) {
			return true
		}
	}
	return false
}

// cadence is the records of the member between two publications:
// every, or, while the youngest of its models has learned fewer than
// youngRatio·every events (its own and those it merged), 1/youngRatio of
// what it has learned, and at least youngEvery. A young model learns the
// most per event, and on a short stream most of what partition models
// gain from each other is in their first merges: the demo's log (20k
// events, 3 members) published every 1,000 records scores p_clean 0.776,
// with this cadence 0.795 (docs/design/partitions.md, "Measured at stop
// 49"). It costs publications while the models are young only (the
// demo's log: 49 in place of 21).
func (s *sharer) cadence() int {
	n := uint64(youngRatio * s.every)
	for _, part := range s.parts {
		n = min(n, part.m.Events())
	}
	return max(min(s.every, int(n/youngRatio)), min(s.every, youngEvery))
}

// youngRatio and youngEvery shape cadence.
const (
	youngRatio = 8
	youngEvery = 100
)

// mergeArrived merges into each model the deltas read since it last
// looked (the models that stepped since their last merge). Model
// goroutine, while no partition model steps.
func (s *sharer) mergeArrived() {
	s.mu.Lock()
	deltas, base := s.deltas, s.base
	s.mu.Unlock()
	end := base + len(deltas)
	s.keys = s.keys[:0]
	for p, part := range s.parts {
		if part.seen < end && s.set.Model(p) == part.m {
			s.keys = append(s.keys, p)
		}
	}
	slices.Sort(s.keys)
	for _, p := range s.keys {
		s.merge(p, deltas, base)
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
	for p, part := range s.parts {
		if s.set.Model(p) != part.m { // evicted or replaced: a new model is tracked when it steps
			delete(s.parts, p)
			s.closeWindow(p)
			continue
		}
		s.keys = append(s.keys, p)
	}
	slices.Sort(s.keys)
	s.pending = s.pending[:0]
	for _, p := range s.keys {
		s.publish(p)
	}
	s.awaitPublished()
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
	part := s.parts[p]
	if err := part.m.Publish(&s.pub); err != nil {
		s.log.Warn("shared parameters not published", "partition", p, "err", err)
		return
	}
	seq := s.next(p)
	if len(s.pub.Items) == 0 && len(s.pub.Context) == 0 && s.pub.Events == 0 || seq < 0 {
		return
	}
	from := part.from
	part.from = seq
	recs, err := s.records(p, from, seq)
	if err != nil {
		s.metrics.shared.WithLabelValues("dropped").Inc()
		s.log.Warn("shared parameters not published", "partition", p, "seq", seq, "err", err)
		return
	}
	s.inflight.Add(1)
	select {
	case s.out <- recs:
		s.pending = append(s.pending, deltaID{writer: s.writer, q: p, seq: seq})
		s.metrics.shared.WithLabelValues("published").Inc()
	default:
		s.inflight.Add(-1)
		s.metrics.shared.WithLabelValues("dropped").Inc()
		s.log.Warn("shared parameters not published: the send queue is full (the shared topic is slow or unreachable)", "partition", p, "seq", seq)
	}
}

// awaitPublished waits, for at most s.wait, until the reader has read back
// the publications of this tick (s.pending). The shared topic is read in
// order, so every delta appended before them has been read too, and the
// merges that follow take in what every member published up to now: a
// partition model's view of the others' item rows is then at most one
// publication old (every records of each member) when it steps on. Without
// the wait, it was also a round trip through the brokers old, which in a
// backlog is thousands of records (docs/design/partitions.md, "Built:
// publications read back before stepping on").
//
// A wait that expires is counted; until the reader hands back a
// publication of this writer again, the next ticks do not wait, so that a
// topic that is slow or down costs one wait, not one per publication.
func (s *sharer) awaitPublished() {
	if s.wait <= 0 || len(s.pending) == 0 || s.readBack(s.pending) {
		return
	}
	if s.lateAt >= 0 && s.ownRead.Load() == s.lateAt {
		s.metrics.sharedWaits.WithLabelValues("skipped").Inc()
		return
	}
	s.lateAt = -1
	start := time.Now()
	timer := time.NewTimer(s.wait)
	defer timer.Stop()
	defer func() { s.metrics.sharedWaitSeconds.Add(time.Since(start).Seconds()) }()
	for !s.readBack(s.pending) {
		select {
		case <-s.ownArrived:
		case <-timer.C:
			s.lateAt = s.ownRead.Load()
			s.metrics.sharedWaits.WithLabelValues("expired").Inc()
			return
		case <-s.ctx.Done():
			return
		}
	}
	s.metrics.sharedWaits.WithLabelValues("read_back").Inc()
}

// readBack reports whether the reader has read back each publication of
// ids, or a later one of its partition.
func (s *sharer) readBack(ids []deltaID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if seq, ok := s.own[id.q]; !ok || seq < id.seq {
			return false
		}
	}
	return true
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
		if c == 0 { // the context and the events go with the first chunk, once
			chunk.Context, chunk.Types, chunk.Events = s.pub.Context, s.pub.Types, s.pub.Events
		}
		v := make([]byte, sharedHeaderBytes)
		copy(v, sharedMagic)
		le := binary.LittleEndian
		le.PutUint32(v[4:], sharedVersion)
		le.PutUint64(v[8:], s.writer)
		le.PutUint32(v[16:], uint32(p))
		le.PutUint64(v[20:], uint64(from))
		le.PutUint64(v[28:], uint64(seq))
		le.PutUint32(v[36:], uint32(c))
		le.PutUint32(v[40:], uint32(len(cuts)))
		v, err := chunk.AppendBinary(v)
		if err != nil {
			return nil, err
		}
		recs[c] = state.SharedRecord{
			Key:   []byte(strconv.Itoa(int(p)) + "/" + strconv.FormatInt(seq, 10) + "/" + strconv.Itoa(c)),
			Value: v,
		}
		lo = hi
	}
	return recs, nil
}

// merge merges into partition p's model the deltas it has not looked at
// (deltas[i] is the (base+i)-th of the log), and records the merge point
// in the shared topic: p's position, the deltas merged there in order, and
// the chain of points it belongs to, so that a replay merges the same at
// the same point (SharedHistory). A model's first merge point is
// recorded even if it merges nothing: it says where the model's chain
// starts, and from which cursors.
//
// A model merges only where it stepped since its last merge point, and
// at most once per position: its state then changes only where its
// position moves. A checkpoint merges before it copies the models, so
// the checkpoint at position c holds every merge point at or before c,
// which is where a model restored from it goes on; and the changelog,
// which saves a partition when its position moved, misses no change (a
// merge at an unchanged position made the next changelog delta apply to
// a model it was not taken from). An idle partition merges when it steps
// again. A merge point that cannot be queued for the topic (the queue is
// full) is skipped: its deltas wait for the next.
func (s *sharer) merge(p int32, deltas []*sharedDelta, base int) {
	part := s.parts[p]
	at := s.next(p)
	if at == part.at || s.inWindow(p, at) {
		return
	}
	part.at = at
	if len(s.out) == cap(s.out) { // only this goroutine queues: room now is room below
		s.metrics.shared.WithLabelValues("deferred").Inc()
		return
	}
	m := part.m
	s.merged = s.merged[:0]
	for i := max(part.seen-base, 0); i < len(deltas); i++ {
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
		s.merged = append(s.merged, d.id)
		outcome := "merged"
		if err := mergeDelta(m, d); err != nil {
			outcome = "refused"
			s.log.Warn("shared delta refused", "partition", p, "from_partition", d.id.q, "seq", d.id.seq, "err", err)
		}
		s.metrics.shared.WithLabelValues(outcome).Inc()
	}
	part.seen = base + len(deltas)
	if len(s.merged) == 0 && part.points > 0 {
		return
	}
	s.inflight.Add(1)
	s.out <- []state.SharedRecord{encodeMergePoint(&mergePoint{
		chain: chainID{writer: s.writer, n: part.chain}, k: part.points, p: p,
		start: part.start, cursors: part.cursors, at: at, ids: s.merged,
	})}
	part.points++
}

// mergeDelta merges every chunk of d into m, and stops at the first it
// refuses (the chunks before it stay merged).
func mergeDelta(m *online.Model, d *sharedDelta) error {
	for _, c := range d.chunks {
		if err := m.MergeFrom(d.id.q, d.id.seq, c); err != nil {
			return err
		}
	}
	return nil
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
		started := s.readStarts.Add(1)
		n, err := s.lg.Read(s.ctx, next, s.add)
		if err == nil {
			s.readDone.Store(started)
		}
		switch {
		case err != nil && s.ctx.Err() == nil:
			s.metrics.shared.WithLabelValues("read_failed").Inc()
			s.log.Warn("shared topic not read", "offset", next, "err", err)
			sleepCtx(s.ctx, sharedRetry)
		case n == next || err != nil:
			s.waitFor(n)
		}
		next = n
	}
}

// waitFor waits until the shared topic holds a record at offset next (a
// fetch the broker holds: SharedLog.Wait), for at most sharedPoll, so
// that a delta is merged a round trip after it was published. A wait
// that ends early with nothing (a broker that does not hold fetches, an
// error) is made up to sharedPoll, so that a read never spins.
func (s *sharer) waitFor(next int64) {
	start := time.Now()
	arrived, err := s.lg.Wait(s.ctx, next, sharedPoll)
	if arrived || s.ctx.Err() != nil {
		return
	}
	if err != nil {
		s.log.Debug("shared topic: wait failed", "offset", next, "err", err)
	}
	sleepCtx(s.ctx, sharedPoll-time.Since(start))
}

// add takes one record of the shared topic (reader goroutine).
func (s *sharer) add(off int64, _, value []byte) {
	if isMergePoint(value) {
		mp, err := parseMergePoint(value)
		if err != nil {
			s.metrics.shared.WithLabelValues("unreadable").Inc()
			s.log.Warn("shared topic: merge point skipped", "offset", off, "err", err)
			return
		}
		s.mu.Lock()
		s.points.add(mp)
		s.mu.Unlock()
		return
	}
	d, err := s.chunks.add(off, value)
	if err != nil {
		s.metrics.shared.WithLabelValues("unreadable").Inc()
		s.log.Warn("shared topic: record skipped", "offset", off, "err", err)
		return
	}
	if len(s.chunks.partial) > 0 {
		if n := s.chunks.prune(int64(s.keep)); n > 0 {
			s.metrics.shared.WithLabelValues("abandoned").Add(float64(n))
			s.log.Warn("shared topic: deltas whose chunks stopped coming dropped", "deltas", n, "offset", off)
		}
	}
	if d == nil {
		return // a chunk of a delta not complete yet, or a merge point
	}
	s.mu.Lock()
	if seq, ok := s.own[d.id.q]; d.id.writer == s.writer && (!ok || d.id.seq > seq) {
		s.own[d.id.q] = d.id.seq
		s.ownRead.Add(1)
		select {
		case s.ownArrived <- struct{}{}:
		default: // signalled already
		}
	}
	s.deltas = append(s.deltas, d)
	s.held += d.bytes
	for s.held > s.keep && len(s.deltas) > 1 {
		s.held -= s.deltas[0].bytes
		s.dropped.add(s.deltas[0])
		s.deltas[0] = nil
		s.deltas = s.deltas[1:]
		s.base++
	}
	s.mu.Unlock()
}

// send appends the publications and merge points until the sharer
// closes. What is queued goes together: each Append is a produce request
// that every in-sync replica acknowledges, and with one per record a
// member's queue, and so the staleness of its deltas, grew with the rate
// of its merge points (docs/design/partitions.md, "Built: the sender
// batches").
func (s *sharer) send() {
	defer s.wg.Done()
	select {
	case <-s.ready:
	case <-s.ctx.Done():
		return
	}
	var items [][]state.SharedRecord
	for {
		select {
		case recs := <-s.out:
			items = append(items[:0], recs)
			size := sharedBytes(recs)
		more:
			for size < sharedBatchBytes {
				select {
				case recs := <-s.out:
					items = append(items, recs)
					size += sharedBytes(recs)
				default:
					break more
				}
			}
			s.sendBatches(items)
			clear(items)
			s.inflight.Add(-int64(len(items)))
		case <-s.ctx.Done():
			return
		}
	}
}

// sendBatches appends the records of items in order, in batches of at
// most sharedBatchBytes (a larger record alone). After a batch fails,
// the later records of the items it held are not sent (a delta that
// misses a chunk is never complete), and each such item counts once as
// send_failed.
func (s *sharer) sendBatches(items [][]state.SharedRecord) {
	var batch []state.SharedRecord
	var owners []int // the item of each record of batch
	failed := make([]bool, len(items))
	size := 0
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
		err := s.lg.Append(ctx, batch)
		cancel()
		if err != nil {
			for _, i := range owners {
				if !failed[i] {
					failed[i] = true
					s.metrics.shared.WithLabelValues("send_failed").Inc()
				}
			}
			s.log.Warn("shared records not sent", "records", len(batch), "first_key", string(batch[0].Key), "err", err)
		}
		clear(batch)
		batch, owners, size = batch[:0], owners[:0], 0
	}
	for i, recs := range items {
		for _, r := range recs {
			n := recordBytes(r)
			if len(batch) > 0 && size+n > sharedBatchBytes {
				flush()
			}
			if failed[i] {
				break
			}
			batch, owners = append(batch, r), append(owners, i)
			size += n
		}
	}
	flush()
}

// sharedBytes bounds what records take in a record batch (recordBytes).
func sharedBytes(records []state.SharedRecord) int {
	n := 0
	for _, r := range records {
		n += recordBytes(r)
	}
	return n
}

// recordBytes bounds what r takes in a record batch: its key and value,
// and a record's overhead.
func recordBytes(r state.SharedRecord) int { return len(r.Key) + len(r.Value) + sharedRecordOverhead }

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
