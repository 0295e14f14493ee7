package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"denoiser/consumer"
	"denoiser/online"
	"denoiser/state"
)

// A new owner's window: the records a previous owner of a partition
// emitted after the partition's checkpoint, then crashed. The new owner
// restores the checkpoint and steps those records again without writing
// them (the tail scan marks them consumer.Message.Emitted). Stepped with
// the merges the new owner happens to make there, its model would leave
// the window other than the previous owner's did, and a replay (which
// follows the new owner's merge points) would not reproduce the output
// those records have. So the new owner makes, while it steps the window,
// the previous owner's merges, recorded in the shared topic, at the same
// offsets, and none of its own (docs/design/partitions.md, "Built: a new
// owner merges what the previous one merged").
//
// When the sharer starts to track a restored model (track) and the last
// tail scan found emitted records of its partition at or after where the
// model stands (emitted), it waits until its reader has read the shared
// topic to its end, resolves the partition's merge points as a replay
// does (SharedHistory.Merges: the points of the model that wrote the
// latest output), takes those the checkpoint does not hold that come
// before the window's end, and records them as the first points of the
// new model's own chain. The loop's Before hook (before) then merges each
// point's deltas just before the record at its offset. When anything is
// missing (a point or a delta the reader no longer holds or never read,
// a chain with a gap, a reader that did not catch up in time) the window
// is not replayed, with a warning, and the model merges freely, as
// before.

// window is a partition's model's window: the previous owner's merge
// points to make, in order, before stepping the records below until.
type window struct {
	m      *online.Model
	until  int64
	points Merges
}

// Bounds of the merge points the sharer keeps (recentPoints).
const (
	maxChainPoints     = 4096 // a chain's newest
	maxPartitionChains = 16   // a partition's newest chains
)

// recentPoints holds the merge points the sharer's reader reads back: of
// each partition, its newest maxPartitionChains chains, each with its
// newest maxChainPoints points. A window needs the points after the
// partition's last checkpoint, a few hundred at the defaults.
type recentPoints struct {
	chains map[chainID]*mergeChain
	parts  map[int32][]*mergeChain // in the topic's order
	n      int                     // chains begun
}

// add takes a merge point read back (reader goroutine, under the
// sharer's mu).
func (r *recentPoints) add(mp *mergePoint) {
	if r.chains == nil {
		r.chains, r.parts = map[chainID]*mergeChain{}, map[int32][]*mergeChain{}
	}
	c := r.chains[mp.chain]
	if c == nil {
		c = &mergeChain{first: mp, order: r.n, lowAt: -1}
		r.n++
		r.chains[mp.chain] = c
		cs := append(r.parts[mp.p], c)
		if len(cs) > maxPartitionChains {
			delete(r.chains, cs[0].first.chain)
			cs = append(cs[:0:0], cs[1:]...)
		}
		r.parts[mp.p] = cs
	}
	switch k := int(mp.k) - c.dropped; {
	case k < len(c.points):
		return // sent twice
	case k > len(c.points):
		c.gap = true // the points between were not read back: a send failed
	}
	c.points = append(c.points, mp)
	if len(c.points) > maxChainPoints {
		half := len(c.points) / 2
		c.lowAt = c.points[half-1].at
		c.dropped += half
		c.points = append(c.points[:0:0], c.points[half:]...)
	}
}

// window returns the merge points of partition p that a model restored at
// start with cursors has to make before the record at until (see above);
// an error says what is missing. Their deltas are withDeltas'.
func (r *recentPoints) window(p int32, start int64, cursors []online.Cursor, until int64) ([]*mergePoint, error) {
	chains := append([]*mergeChain(nil), r.parts[p]...)
	points := resolveChains(chains)
	self := &mergePoint{start: start, cursors: cursors}
	held := 0
	for held < len(points) && heldBy(points[held], self) {
		held++
	}
	points = points[held:]
	for i, mp := range points {
		if mp.at >= until {
			points = points[:i]
			break
		}
		if c := r.chains[mp.chain]; c.gap || c.lowAt >= start {
			return nil, fmt.Errorf("the merge points of a previous owner from offset %d on are not all held (a send failed, or too many to keep)", start)
		}
	}
	return points, nil
}

// droppedDeltas remembers where the deltas the reader dropped from memory
// (sharer.keep) begin in the shared topic, in the topic's order: the
// newest maxDropped, the older half forgotten at once when full (the
// topic's retention drops them too).
type droppedDeltas []droppedDelta

type droppedDelta struct {
	id  deltaID
	off int64 // its first chunk's
}

// maxDropped bounds droppedDeltas: a day of publications at one a second
// (1.5 MiB).
const maxDropped = 1 << 16

func (d *droppedDeltas) add(x *sharedDelta) {
	if x.first < 0 {
		return
	}
	if len(*d) >= maxDropped {
		*d = append((*d)[:0:0], (*d)[len(*d)/2:]...)
	}
	*d = append(*d, droppedDelta{x.id, x.first})
}

// find sets, for each id of missing that d remembers, where it begins in
// the topic, and removes the others: one pass over d.
func (d droppedDeltas) find(missing map[deltaID]int64) {
	for _, x := range d {
		if _, ok := missing[x.id]; ok {
			missing[x.id] = x.off
		}
	}
	maps.DeleteFunc(missing, func(_ deltaID, off int64) bool { return off < 0 })
}

// fetchDropped reads back from the shared topic the deltas that missing
// names, each by where it begins, which the reader dropped from memory:
// from the earliest of them on, until it has them all or reaches the
// topic's end, within s.timeout. A
// window needs the deltas a previous owner merged since its partition's
// checkpoint, and the reader keeps only keep bytes of the newest (at the
// defaults, about 60,000 of the group's events at dimension 32); the
// topic keeps them for sharing.retention. Model goroutine (startWindow):
// the stream waits for the read, once per takeover.
func (s *sharer) fetchDropped(missing map[deltaID]int64) (map[deltaID]*sharedDelta, error) {
	select {
	case <-s.ready:
	default:
		return nil, errors.New("the shared topic is not open")
	}
	from := int64(math.MaxInt64)
	for _, off := range missing {
		from = min(from, off)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	var chunks deltaChunks
	found := make(map[deltaID]*sharedDelta, len(missing))
	_, err := s.lg.Read(ctx, from, func(off int64, _, v []byte) {
		if len(found) == len(missing) {
			return // the read stops at its next fetch (cancel)
		}
		d, err := chunks.add(off, v)
		if len(chunks.partial) > 0 {
			chunks.prune(int64(s.keep))
		}
		if err != nil || d == nil {
			return
		}
		if _, ok := missing[d.id]; ok {
			found[d.id] = d
			if len(found) == len(missing) {
				cancel() // the rest of the topic is not needed
			}
		}
	})
	if len(found) == len(missing) {
		err = nil // the cancel's, if any
	}
	return found, err
}

// emitted takes what a tail scan found (consumer.KafkaSourceConfig's
// Emitted): of each partition scanned from (the offsets it was scanned
// from), where its records with output end. Source goroutine.
func (s *sharer) emitted(from map[int]int64, found map[int]map[int64]bool) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.ends == nil {
		s.ends = map[int32]int64{}
	}
	for p := range from {
		end := int64(-1)
		for off := range found[p] {
			end = max(end, off+1)
		}
		if end < 0 {
			delete(s.ends, int32(p))
		} else {
			s.ends[int32(p)] = end
		}
	}
}

// startWindow sets up the window of partition p's model, which the sharer
// has begun to track (track; model goroutine), if the last tail scan
// found records of p emitted at or after where the model stands.
func (s *sharer) startWindow(p int32, part *sharingPart) {
	s.closeWindow(p)
	s.wmu.Lock()
	until, ok := s.ends[p]
	delete(s.ends, p) // a later model of p needs a scan of its own
	s.wmu.Unlock()
	if !ok || until <= max(part.start, 0) {
		return
	}
	if !s.caughtUp(s.timeout) {
		s.metrics.sharedWindows.WithLabelValues("skipped").Inc()
		s.log.Warn("the shared topic was not read to its end in time: the records a previous owner emitted are stepped again without its merges", "partition", p, "until", until, "wait", s.timeout)
		return
	}
	s.mu.Lock()
	byID := make(map[deltaID]*sharedDelta, len(s.deltas))
	for _, d := range s.deltas {
		byID[d.id] = d
	}
	mps, err := s.points.window(p, part.start, part.cursors, until)
	missing := map[deltaID]int64{} // those the reader dropped: where each begins
	for _, mp := range mps {
		for _, id := range mp.ids {
			if byID[id] == nil {
				missing[id] = -1
			}
		}
	}
	if len(missing) > 0 {
		s.dropped.find(missing)
	}
	s.mu.Unlock()
	if len(missing) > 0 {
		found, ferr := s.fetchDropped(missing)
		maps.Copy(byID, found)
		s.log.Info("shared topic: deltas of a previous owner's window read back", "partition", p, "wanted", len(missing), "read", len(found), "err", ferr)
	}
	var points []resolvedPoint
	if err == nil {
		if points, err = withDeltas(mps, byID); err != nil {
			err = fmt.Errorf("a previous owner %w, which is no longer held", err)
		}
	}
	if err != nil {
		s.metrics.sharedWindows.WithLabelValues("skipped").Inc()
		s.log.Warn("the records a previous owner emitted are stepped again without its merges", "partition", p, "from", part.start, "until", until, "err", err)
		return
	}
	if len(points) > 0 {
		if len(s.out) == cap(s.out) { // only this goroutine queues: room now is room below
			s.metrics.sharedWindows.WithLabelValues("skipped").Inc()
			s.log.Warn("the records a previous owner emitted are stepped again without its merges: the send queue is full (the shared topic is slow or unreachable)", "partition", p, "from", part.start, "until", until)
			return
		}
		s.recordWindow(p, part, points)
	}
	s.wmu.Lock()
	if s.windows == nil {
		s.windows = map[int32]*window{}
	}
	s.windows[p] = &window{m: part.m, until: until, points: Merges{points: points}}
	s.windowsOpen.Add(1)
	s.wmu.Unlock()
	s.metrics.sharedWindows.WithLabelValues("replayed").Inc()
	s.log.Info("stepping again the records a previous owner emitted, with the merges it made there", "partition", p, "from", part.start, "until", until, "merge_points", len(points))
}

// recordWindow records the window's points as the first of part's chain:
// the model makes them before it steps the records they precede
// (before), unless it stops first, and then the window of the next owner,
// which resolves this chain, holds them.
func (s *sharer) recordWindow(p int32, part *sharingPart, points []resolvedPoint) {
	recs := make([]state.SharedRecord, len(points))
	for i, pt := range points {
		recs[i] = encodeMergePoint(&mergePoint{
			chain: chainID{writer: s.writer, n: part.chain}, k: part.points, p: p,
			start: part.start, cursors: part.cursors, at: pt.at, ids: pt.ids,
		})
		part.points++
	}
	part.at = points[len(points)-1].at
	s.inflight.Add(1)
	s.out <- recs
}

// caughtUp waits, for at most wait, until the reader has read the shared
// topic to the end it had when caughtUp was called, and reports whether
// it has.
func (s *sharer) caughtUp(wait time.Duration) bool {
	want := s.readStarts.Load() + 1 // a read that starts from now
	deadline := time.Now().Add(wait)
	for s.readDone.Load() < want {
		if time.Now().After(deadline) || s.ctx.Err() != nil {
			return false
		}
		sleepCtx(s.ctx, 5*time.Millisecond)
	}
	return true
}

// before makes, before the model of r's partition steps r, the window's
// merge points at or before r's offset; a record at or past the window's
// end closes it. It is consumer.Options.Before: on the goroutine that
// steps r's partition.
func (s *sharer) before(r *consumer.Result) {
	if s.windowsOpen.Load() == 0 {
		return
	}
	p := consumer.PartitionOf(r.Pos)
	s.wmu.Lock()
	w := s.windows[p]
	s.wmu.Unlock()
	if w == nil {
		return
	}
	if r.Pos.Offset >= w.until {
		s.closeWindow(p)
		return
	}
	merged, refused := w.points.Apply(w.m, r.Pos.Offset) // a refusal: as the previous owner's model refused it
	s.metrics.shared.WithLabelValues("merged").Add(float64(merged))
	s.metrics.shared.WithLabelValues("refused").Add(float64(refused))
}

// closeWindow forgets partition p's window, if it has one.
func (s *sharer) closeWindow(p int32) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.windows[p] != nil {
		delete(s.windows, p)
		s.windowsOpen.Add(-1)
	}
}

// inWindow reports whether partition p's model, at position at, is still
// in its window: it then merges nothing of its own. Model goroutine.
func (s *sharer) inWindow(p int32, at int64) bool {
	if s.windowsOpen.Load() == 0 {
		return false
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	w := s.windows[p]
	return w != nil && at < w.until
}
