package consumer

import (
	"sync"

	"denoiser/consumer/input"
)

// Partitioned is a Model whose state is split by input partition. The
// models of different partitions share nothing mutable, so Run may step
// them at the same time, each on one goroutine at a time
// (Options.Workers).
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

// lane is the part of one batch that belongs to one partition: its records,
// in input order, and the models that step them.
type lane struct {
	model   Model
	shadow  Model // nil when the shadow is stepped after the join (or absent)
	records []*Result
}

// step steps the lane's records in order, on whichever goroutine runs it.
func (ln *lane) step() {
	for _, r := range ln.records {
		stepRecord(ln.model, ln.shadow, r)
	}
}

// workers steps the lanes of a batch at the same time. It belongs to the
// model goroutine, except that while stepBatch waits, each lane sent on
// work belongs to the worker that received it.
type workers struct {
	model  Partitioned
	shadow Model // stepped per partition when it is Partitioned, else after the join
	lanes  map[int32]*lane
	active []*lane // the lanes of the current batch, in order of first record

	work    chan *lane
	batch   sync.WaitGroup // the lanes of the current batch sent to workers
	running sync.WaitGroup // the worker goroutines
}

// startWorkers starts n-1 worker goroutines; the model goroutine is the
// n-th. stop ends them.
func startWorkers(n int, model Partitioned, shadow Model) *workers {
	w := &workers{model: model, shadow: shadow, lanes: map[int32]*lane{}, work: make(chan *lane, 4*n)}
	w.running.Add(n - 1)
	for range n - 1 {
		go func() {
			defer w.running.Done()
			for ln := range w.work {
				w.run(ln)
			}
		}()
	}
	return w
}

// run steps one lane of the current batch.
func (w *workers) run(ln *lane) {
	ln.step()
	w.batch.Done()
}

// stop ends the worker goroutines and waits for them. It must not be called
// while a batch is being stepped.
func (w *workers) stop() {
	close(w.work)
	w.running.Wait()
}

// stepBatch steps the records of batch that have something to score: each
// partition's records in input order on one goroutine, different partitions
// at the same time. It returns when every record has been stepped. A shadow
// that is not Partitioned then steps the records in input order.
func (w *workers) stepBatch(batch []*Result) {
	shadow, perPartition := w.shadow.(Partitioned)
	for _, r := range batch {
		if r.skip != "" || r.Reason != "" {
			continue
		}
		p := PartitionOf(r.Pos)
		ln := w.lanes[p]
		if ln == nil {
			ln = &lane{}
			w.lanes[p] = ln
		}
		if len(ln.records) == 0 {
			ln.model = w.model.For(p)
			if perPartition {
				ln.shadow = shadow.For(p)
			}
			w.active = append(w.active, ln)
		}
		ln.records = append(ln.records, r)
	}
	if len(w.active) == 0 {
		return
	}
	// The model goroutine queues the lanes, then steps those no worker has
	// taken yet; a lane that does not fit in the queue it steps at once.
	w.batch.Add(len(w.active))
	for _, ln := range w.active[:len(w.active)-1] {
		select {
		case w.work <- ln:
		default:
			w.run(ln)
		}
	}
	w.run(w.active[len(w.active)-1])
	for done := false; !done; {
		select {
		case ln := <-w.work:
			w.run(ln)
		default:
			done = true
		}
	}
	w.batch.Wait()
	for _, ln := range w.active {
		clear(ln.records) // no pointer into recycled results
		ln.records, ln.model, ln.shadow = ln.records[:0], nil, nil
	}
	clear(w.active)
	w.active = w.active[:0]
	if w.shadow != nil && !perPartition {
		for _, r := range batch {
			if r.skip == "" && r.Scored() {
				stepShadow(w.shadow, r)
			}
		}
	}
}
