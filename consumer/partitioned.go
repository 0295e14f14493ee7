package consumer

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"denoiser/consumer/input"
)

// Partitioned is a Model whose state is split by input partition. Run may
// step the models of different partitions at the same time, each on one
// goroutine at a time (Options.Workers), so different models must share
// nothing mutable. Partitions may share a model (For returns the same
// one): Run then steps their records together, in input order. The models
// For returns are compared with ==, so their dynamic types must be
// comparable (pointers, typically).
//
// Run steps a record of partition p with For(p), never with the
// Partitioned's own Step, whatever the number of workers: a Kafka record's
// partition is its Pos.Partition; every record of a file belongs to
// partition 0 (PartitionOf).
type Partitioned interface {
	Model
	// For returns the model of partition p, creating it if needed; never
	// nil. Run calls it on the model goroutine only, once per partition
	// per batch (per record on the sequential path), so that a task may
	// replace or drop a partition's model between two batches. With
	// parallel partitions the models of the batch before may be stepping
	// meanwhile, so For must not touch them; tasks run only while no
	// model steps.
	For(p int32) Model
}

// PartitionOf is the partition a record at pos belongs to, the p that Run
// passes to Partitioned.For: pos.Partition for a Kafka record, 0 for a
// record read from a file.
func PartitionOf(pos input.Position) int32 {
	if pos.IsFile() {
		return 0
	}
	return pos.Partition
}

// partitionModel is the model that steps the records of partition p: m's
// model of p when m is Partitioned, else m itself (nil stays nil).
func partitionModel(m Model, p int32) Model {
	if pm, ok := m.(Partitioned); ok {
		return pm.For(p)
	}
	return m
}

// lane is the part of one batch that one model steps: the records of the
// partitions whose model it is, in input order.
type lane struct {
	model   Model
	shadow  bool // the lane steps a shadow (stepShadow), not the main model
	records []*Result
	dec     Decoder  // decodes the lane's records; it knows the ids of the partitions stepped here
	set     *laneSet // the batch's lanes, of which this is one
	next    *lane    // the same model's lane of the next batch, chained here while this one is queued or running; under workers.mu
}

// step decodes the lane's records that the reader left undecoded, then
// steps them, in order, on whichever goroutine runs it, calling before
// (Options.Before), if not nil, before the main model steps each. A record that does
// not decode is rejected here (finish hands it on in input order).
//
// All the lane's records are decoded before the first is stepped, not
// each just before its step: the decoder's working set (its id cache, the
// records' bytes) and the model's then stay in the core's cache for a
// whole run of each, where alternating evicted one with the other at
// every record. With two partitions on two cores, the model's step cost
// about 2.5 CPU-µs per event in the loop against 2.26–2.34 on bare
// goroutines, and about 2.2 decoded so (docs/perf.md, "Decoding a lane
// before stepping it").
func (ln *lane) step(before func(*Result)) {
	for _, r := range ln.records {
		decodeRecord(&ln.dec, r)
	}
	for _, r := range ln.records {
		if r.Reason != "" {
			continue
		}
		if ln.shadow {
			stepShadow(ln.model, r)
			continue
		}
		if before != nil {
			before(r)
		}
		stepRecord(ln.model, nil, r)
	}
}

// decodeRecord decodes r if the reader left it undecoded, and reports
// whether r has an event to step (or else is rejected).
func decodeRecord(dec *Decoder, r *Result) bool {
	if r.undecoded {
		r.undecoded = false
		if err := dec.Decode(r.Raw, &r.Event); err != nil {
			r.Err, r.Reason = err, ReasonOf(err)
		}
	}
	return r.Reason == ""
}

// laneSet holds the lanes of one batch (one phase of it: the main models'
// or the shadows'). The workers keep batchDepth of them, so that a batch
// can be formed and started while those before it are still being
// stepped.
type laneSet struct {
	lanes  []*lane         // lanes[:active] are the batch's, the rest kept for reuse
	active int             // lanes in use
	byPart map[int32]*lane // the batch's lane of each partition
	recent map[int32]*lane // the lane of this set each partition's records went to last, whose Decoder knows its ids
	left   atomic.Int32    // lanes not yet stepped
	done   chan struct{}   // receives once left reaches 0
	names  *memberNames    // the Decoder's of a new lane (Options.Fields)
}

// workers steps the lanes of a batch at the same time. It belongs to the
// model goroutine, except that each lane queued (dispatch) belongs to the
// goroutine that steps it until its set is done (wait).
//
// Several batches may be in flight: the loop dispatches a batch while those
// before it are still being stepped (loop.step), so that a worker whose lane
// ended early goes on with the next batch rather than wait for the slowest
// lane. A model's lanes are stepped one after the other in batch order: a
// lane dispatched while the same model's lane of the batch before is
// queued or running is chained to it (lane.next, tail), and whoever
// steps that one steps it next. So each model still steps its records in
// input order, one goroutine at a time, and the scores depend neither on
// the batching nor on the number of workers.
type workers struct {
	model  Partitioned
	shadow Model
	before func(*Result)       // Options.Before
	sets   [batchDepth]laneSet // used in turn
	cur    int                 // the set the next batch takes
	dec    Decoder             // decodes a partition's very first record

	mu   sync.Mutex
	tail map[Model]*lane // each model's last lane dispatched and not yet stepped; under mu

	// busy reports that the last batch gave every goroutine a lane: the
	// reader then leaves decoding to the lanes, which the cores already
	// run in parallel; with fewer lanes (one partition on two cores) a
	// core is free for the reader to decode beside them.
	busy    atomic.Bool
	n       int // goroutines that step lanes, the model goroutine included
	work    chan *lane
	running sync.WaitGroup // the worker goroutines
}

// startWorkers starts n-1 worker goroutines; the model goroutine is the
// n-th. stop ends them.
func startWorkers(n int, model Partitioned, shadow Model, fields Fields, before func(*Result)) *workers {
	names := fields.compile()
	w := &workers{n: n, model: model, shadow: shadow, before: before, dec: Decoder{names: names}, tail: map[Model]*lane{}, work: make(chan *lane, 8*n)} // room for the lanes of the batches in flight, most of the time
	for i := range w.sets {
		w.sets[i] = laneSet{byPart: map[int32]*lane{}, recent: map[int32]*lane{}, done: make(chan struct{}, 1), names: names}
	}
	w.running.Add(n - 1)
	for range n - 1 {
		go func() {
			defer w.running.Done()
			for {
				ln, ok := w.next()
				if !ok {
					return
				}
				w.run(ln)
			}
		}()
	}
	return w
}

// laneSpin is how long a worker that finished a lane keeps looking for
// the next one, yielding its core between looks, before it parks. A
// parked worker woken by the model goroutine's send is queued on the
// model goroutine's own core (the runtime's runnext), which is busy
// stepping a lane, so it started its lane 126–153 µs after it was queued
// on average (BenchmarkRunPartitions, 2 partitions on 2 cores, about 320 µs
// of stepping per lane and batch); looking for 200 µs, it starts within
// 14–16 µs. Chosen among 50 µs, 200 µs and 1 ms (docs/perf.md, "Workers
// that wait"): 1 ms cost a partition alone 0.1–0.3 CPU-µs per event. An
// idle stream costs a worker at most laneSpin of yielding per batch.
const laneSpin = 200 * time.Microsecond

// next returns the next lane for a worker, false once stop closed the
// queue: it looks for laneSpin, yielding between looks, then blocks.
func (w *workers) next() (*lane, bool) {
	for start := time.Now(); time.Since(start) < laneSpin; {
		select {
		case ln, ok := <-w.work:
			return ln, ok
		default:
		}
		runtime.Gosched()
	}
	ln, ok := <-w.work
	return ln, ok
}

// run steps lane ln, then each lane chained to it.
func (w *workers) run(ln *lane) {
	for ln != nil {
		ln.step(w.before)
		w.mu.Lock()
		next := ln.next
		ln.next = nil
		if w.tail[ln.model] == ln {
			delete(w.tail, ln.model)
		}
		w.mu.Unlock()
		if set := ln.set; set.left.Add(-1) == 0 {
			set.done <- struct{}{} // ln is the set's again from here
		}
		ln = next
	}
}

// stop ends the worker goroutines and waits for them. It must not be called
// while a batch is being stepped.
func (w *workers) stop() {
	close(w.work)
	w.running.Wait()
}

// stepBatch steps the records of batch that have something to score, and
// returns when every one has been stepped: first by the main model, then
// those it accepted by the shadow, if any. In each phase, the records of a
// model's partitions are stepped in input order on one goroutine, different
// models at the same time; a shadow that is not Partitioned is one model,
// so it steps every record in input order.
func (w *workers) stepBatch(batch []*Result) {
	w.wait(w.dispatch(batch, w.model, false))
	if w.shadow != nil {
		w.wait(w.dispatch(batch, w.shadow, true))
	}
}

// dispatch forms the lanes of batch's records that have something to
// score and hands them to the workers: each is queued, or chained to its
// model's lane of the batch before if that one is not stepped yet. It
// returns their set, for wait; nil if batch had nothing to step. The sets
// are used in turn, so at most batchDepth-1 batches may be in flight when
// it is called.
func (w *workers) dispatch(batch []*Result, model Model, shadow bool) *laneSet {
	set := &w.sets[w.cur]
	for _, r := range batch {
		if r.skip != "" || r.Reason != "" { // nothing to score, or rejected
			continue
		}
		p := PartitionOf(r.Pos)
		ln := set.byPart[p]
		if ln == nil {
			// For makes p's model if p has none; as on the sequential
			// path, call it only once p has an event to step: decode
			// p's first record here (with the Decoder of p's last lane
			// of this set, which no goroutine steps now), its lane
			// decodes the others.
			dec := &w.dec
			if last := set.recent[p]; last != nil {
				dec = &last.dec
			}
			if !decodeRecord(dec, r) {
				continue
			}
			ln = set.laneOf(partitionModel(model, p), shadow, set.recent[p])
			set.byPart[p] = ln
			if !shadow {
				set.recent[p] = ln
			}
		}
		ln.records = append(ln.records, r)
	}
	if !shadow {
		w.busy.Store(set.active >= w.n)
	}
	if set.active == 0 {
		return nil
	}
	w.cur = (w.cur + 1) % batchDepth
	active := set.lanes[:set.active]
	set.left.Store(int32(len(active)))
	for _, ln := range active {
		ln.set = set
		w.mu.Lock()
		prev := w.tail[ln.model]
		w.tail[ln.model] = ln
		if prev != nil {
			prev.next = ln
		}
		w.mu.Unlock()
		if prev != nil {
			continue // stepped after prev, by whoever steps prev
		}
		select {
		case w.work <- ln:
		default: // the queue is full: step it now
			w.run(ln)
		}
	}
	return set
}

// wait steps queued lanes on the model goroutine until every lane of set
// has been stepped, then makes the set ready for another batch. A nil set
// (a batch with nothing to step) is done already.
func (w *workers) wait(set *laneSet) {
	if set == nil {
		return
	}
	// The set's end first, if it came: a queued lane belongs to a later
	// batch, and stepping it here would delay this one's records.
	for done := false; !done; {
		select {
		case <-set.done:
			done = true
		default:
			select {
			case <-set.done:
				done = true
			case ln := <-w.work:
				w.run(ln)
			}
		}
	}
	for _, ln := range set.lanes[:set.active] {
		clear(ln.records) // no pointer into recycled results
		ln.records, ln.model, ln.set = ln.records[:0], nil, nil
	}
	set.active = 0
	clear(set.byPart)
}

// laneOf returns the batch's lane of model m, taking a free one if m has
// none yet: partitions that share a model share its lane. Of the free
// lanes it takes prefer, if free, whose Decoder knows the ids of m's
// partition.
func (set *laneSet) laneOf(m Model, shadow bool, prefer *lane) *lane {
	for _, ln := range set.lanes[:set.active] {
		if ln.model == m {
			return ln
		}
	}
	if i := slices.Index(set.lanes[set.active:], prefer); prefer != nil && i >= 0 {
		set.lanes[set.active], set.lanes[set.active+i] = prefer, set.lanes[set.active]
	} else if set.active == len(set.lanes) {
		set.lanes = append(set.lanes, &lane{dec: Decoder{names: set.names}})
	}
	ln := set.lanes[set.active]
	ln.model, ln.shadow = m, shadow
	set.active++
	return ln
}
