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
	// nil. Run calls it on the model goroutine only, while no partition
	// model is being stepped: once per partition per batch (per record on
	// the sequential path), so that a task may replace or drop a
	// partition's model between two batches.
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
	dec     Decoder // decodes the lane's records; it knows the ids of the partitions stepped here
}

// step decodes the lane's records that the reader left undecoded, then
// steps them, in order, on whichever goroutine runs it. A record that does
// not decode is rejected here (finish hands it on in input order).
func (ln *lane) step() {
	for _, r := range ln.records {
		if !decodeRecord(&ln.dec, r) {
			continue
		}
		if ln.shadow {
			stepShadow(ln.model, r)
		} else {
			stepRecord(ln.model, nil, r)
		}
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

// workers steps the lanes of a batch at the same time. It belongs to the
// model goroutine, except that while a phase waits, each lane sent on work
// belongs to the worker that received it.
type workers struct {
	model  Partitioned
	shadow Model
	lanes  []*lane         // lanes[:active] are the current phase's, the rest kept for reuse
	active int             // lanes in use
	byPart map[int32]*lane // the current phase's lane of each partition
	recent map[int32]*lane // the lane each partition's records went to last, whose Decoder knows its ids
	dec    Decoder         // decodes a partition's very first record

	// busy reports that the last batch gave every goroutine a lane: the
	// reader then leaves decoding to the lanes, which the cores already
	// run in parallel; with fewer lanes (one partition on two cores) a
	// core is free for the reader to decode beside them.
	busy    atomic.Bool
	n       int // goroutines that step lanes, the model goroutine included
	work    chan *lane
	phase   sync.WaitGroup // the lanes of the current phase
	running sync.WaitGroup // the worker goroutines
}

// startWorkers starts n-1 worker goroutines; the model goroutine is the
// n-th. stop ends them.
func startWorkers(n int, model Partitioned, shadow Model) *workers {
	w := &workers{n: n, model: model, shadow: shadow, byPart: map[int32]*lane{}, recent: map[int32]*lane{}, work: make(chan *lane, 4*n)}
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

// run steps one lane of the current phase.
func (w *workers) run(ln *lane) {
	ln.step()
	w.phase.Done()
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
	w.stepPhase(batch, w.model, false)
	if w.shadow != nil {
		w.stepPhase(batch, w.shadow, true)
	}
}

func (w *workers) stepPhase(batch []*Result, model Model, shadow bool) {
	for _, r := range batch {
		if r.skip != "" || r.Reason != "" { // nothing to score, or rejected
			continue
		}
		p := PartitionOf(r.Pos)
		ln := w.byPart[p]
		if ln == nil {
			// For makes p's model if p has none; as on the sequential
			// path, call it only once p has an event to step: decode
			// p's first record here (no lane runs yet: with the
			// Decoder of p's last lane), its lane decodes the others.
			dec := &w.dec
			if last := w.recent[p]; last != nil {
				dec = &last.dec
			}
			if !decodeRecord(dec, r) {
				continue
			}
			ln = w.laneOf(partitionModel(model, p), shadow, w.recent[p])
			w.byPart[p] = ln
			if !shadow {
				w.recent[p] = ln
			}
		}
		ln.records = append(ln.records, r)
	}
	if !shadow {
		w.busy.Store(w.active >= w.n)
	}
	if w.active == 0 {
		return
	}
	// The model goroutine queues the lanes but one, which it steps, then
	// those no worker has taken yet; a lane that does not fit in the queue
	// it steps at once.
	active := w.lanes[:w.active]
	w.phase.Add(len(active))
	for _, ln := range active[:len(active)-1] {
		select {
		case w.work <- ln:
		default:
			w.run(ln)
		}
	}
	w.run(active[len(active)-1])
	for done := false; !done; {
		select {
		case ln := <-w.work:
			w.run(ln)
		default:
			done = true
		}
	}
	w.phase.Wait()
	for _, ln := range active {
		clear(ln.records) // no pointer into recycled results
		ln.records, ln.model = ln.records[:0], nil
	}
	w.active = 0
	clear(w.byPart)
}

// laneOf returns the current phase's lane of model m, taking a free one if
// m has none yet: partitions that share a model share its lane. Of the
// free lanes it takes prefer, if free, whose Decoder knows the ids of m's
// partition.
func (w *workers) laneOf(m Model, shadow bool, prefer *lane) *lane {
	for _, ln := range w.lanes[:w.active] {
		if ln.model == m {
			return ln
		}
	}
	if i := slices.Index(w.lanes[w.active:], prefer); prefer != nil && i >= 0 {
		w.lanes[w.active], w.lanes[w.active+i] = prefer, w.lanes[w.active]
	} else if w.active == len(w.lanes) {
		w.lanes = append(w.lanes, &lane{})
	}
	ln := w.lanes[w.active]
	ln.model, ln.shadow = m, shadow
	w.active++
	return ln
}
