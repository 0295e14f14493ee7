package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/state"
)

// committer commits next offsets to the consumer group (the KafkaSource).
type committer interface {
	Commit(ctx context.Context, positions []input.Position) error
}

// saver commits checkpoints (the state.Store).
type saver interface {
	SaveModel(ctx context.Context, cp state.Checkpoint, w state.ModelWriter) (state.Saved, error)
}

type partitionKey struct {
	topic     string
	partition int32
}

// checkpointer takes checkpoints. Its fields without a lock belong to the
// model goroutine: it tracks the next input position of every partition
// the model has read, and every EveryEvents records (or on a timer task)
// it flushes the output, brings a reused shadow model up to date
// (online.Set.FrozenCopy copies what changed) and hands the shadow and
// the positions to its saver goroutine, which encodes the shadow straight
// into the store (state.Store.SaveModel, a chunk at a time): what changed
// since the last committed checkpoint (online.Set.WriteDelta), or the
// whole model when the store starts a new base. Then it commits the
// offsets to the group. The model loop pauses for the flush and the copy
// only, not for the encoding or the store. While a save is in flight, a
// due checkpoint is postponed to the next record, so the shadow is never
// updated while it is being encoded; the shadow and since belong to the
// saver goroutine while a save is in flight.
type checkpointer struct {
	store   saver
	model   *online.Set
	commit  committer
	metrics *metrics
	log     *slog.Logger
	every   int
	timeout time.Duration // for the offset commit

	positions map[partitionKey]*int64
	lastKey   partitionKey // the partition of the previous record...
	lastNext  *int64       // ...and its entry: most records follow one of the same partition
	pending   int          // records since the last checkpoint
	saving    bool
	shadow    *online.Set // the copy a save in flight encodes
	since     uint64      // the generation the shadow was last marked saved at (0: none)
	last      time.Time   // when the last checkpoint was taken

	jobs      chan saveJob
	results   chan error
	wg        sync.WaitGroup
	failing   atomic.Bool   // the last save failed...
	failure   atomic.Value  // ...with this error message (a string)
	processed atomic.Uint64 // records processed, read by any goroutine
}

// newCheckpointer starts the checkpointer of model, which the store holds
// as committed generation restored (0: none, or not known). With one, it
// copies the model into the shadow now, so that the first checkpoint can
// be a delta.
func newCheckpointer(store saver, model *online.Set, commit committer, m *metrics, log *slog.Logger,
	every int, timeout time.Duration, positions []input.Position, restored uint64) *checkpointer {
	c := &checkpointer{
		store: store, model: model, commit: commit, metrics: m, log: log, every: every, timeout: timeout,
		positions: map[partitionKey]*int64{},
		last:      time.Now(),
		jobs:      make(chan saveJob),
		results:   make(chan error, 1),
	}
	for _, p := range positions {
		next := p.Offset
		c.positions[partitionKey{p.Topic, p.Partition}] = &next
	}
	if restored > 0 {
		c.shadow = model.FrozenCopy(nil)
		c.shadow.MarkSaved()
		c.since = restored
	}
	c.wg.Add(1)
	go c.saveLoop()
	return c
}

// after is consumer.Options.After: it runs on the model goroutine after
// each record.
func (c *checkpointer) after(ctx context.Context, r *consumer.Result, out consumer.Flusher) error {
	c.metrics.record(r)
	c.processed.Add(1)
	if !r.Pos.IsFile() {
		if c.lastNext == nil || r.Pos.Partition != c.lastKey.partition || r.Pos.Topic != c.lastKey.topic {
			k := partitionKey{r.Pos.Topic, r.Pos.Partition}
			next := c.positions[k]
			if next == nil {
				next = new(int64)
				c.positions[k] = next
			}
			c.lastKey, c.lastNext = k, next
		}
		*c.lastNext = r.Pos.Offset + 1
	}
	c.pending++
	// Within a batch of partitions stepped in parallel the models are
	// past r: a checkpoint waits for the batch's last record.
	if c.pending >= c.every && r.BatchEnd {
		return c.checkpoint(ctx, out)
	}
	return nil
}

// tick runs as a task on the model goroutine: it publishes the model's
// summary and takes a checkpoint when interval has passed since the last.
func (c *checkpointer) tick(interval time.Duration) func(context.Context, consumer.Flusher) error {
	return func(ctx context.Context, out consumer.Flusher) error {
		c.metrics.setSummary(c.model.Summary())
		if time.Since(c.last) >= interval {
			return c.checkpoint(ctx, out)
		}
		c.poll()
		return nil
	}
}

// poll notes a finished save without waiting.
func (c *checkpointer) poll() {
	if !c.saving {
		return
	}
	select {
	case <-c.results:
		c.saving = false
	default:
	}
}

// checkpoint flushes the output and hands the model and positions to the
// saver, unless a save is still in flight or nothing changed since the last
// save that succeeded: after a failed save (a full disk) it tries again at
// each interval even when no record has come since, so that the state
// catches up by itself once the cause is gone.
func (c *checkpointer) checkpoint(ctx context.Context, out consumer.Flusher) error {
	c.poll()
	if (c.pending == 0 && !c.failing.Load()) || c.saving {
		return nil
	}
	start := time.Now()
	// Output first: the checkpoint must not cover a record whose output
	// could still be lost.
	if err := out.Flush(ctx); err != nil {
		return fmt.Errorf("checkpoint: flush output: %w", err)
	}
	cp, err := c.snapshot()
	if err != nil {
		return err
	}
	c.pending, c.saving, c.last = 0, true, time.Now()
	c.metrics.checkpointPause.Observe(time.Since(start).Seconds())
	select {
	case c.jobs <- cp:
	case <-ctx.Done():
		c.saving = false
		return ctx.Err()
	}
	return nil
}

// saveJob is a checkpoint for the saver goroutine: the model copy to
// encode into cp.Model, and the rest of the checkpoint.
type saveJob struct {
	model *online.Set
	cp    state.Checkpoint
}

// snapshot copies the model into the shadow and copies the positions.
func (c *checkpointer) snapshot() (saveJob, error) {
	c.shadow = c.model.FrozenCopy(c.shadow)
	return saveJob{c.shadow, state.Checkpoint{Positions: c.sortedPositions(), Version: c.model.Version()}}, nil
}

// sortedPositions returns the next position of every partition, sorted.
func (c *checkpointer) sortedPositions() []input.Position {
	out := make([]input.Position, 0, len(c.positions))
	for k, next := range c.positions {
		out = append(out, input.Position{Topic: k.topic, Partition: k.partition, Offset: *next})
	}
	slices.SortFunc(out, input.ComparePartitions)
	return out
}

// saveLoop runs on the saver goroutine.
func (c *checkpointer) saveLoop() {
	defer c.wg.Done()
	for job := range c.jobs {
		c.results <- c.save(job)
	}
}

func (c *checkpointer) save(job saveJob) error {
	cp, shadow := job.cp, job.model
	start := time.Now()
	w := state.ModelWriter{Full: func(w io.Writer) error {
		_, err := shadow.WriteTo(w)
		return err
	}}
	if shadow.HasDeltaBase() {
		w.Delta = func(w io.Writer) error {
			_, err := shadow.WriteDelta(w)
			return err
		}
		w.DeltaSize, w.Since = shadow.DeltaSize(), c.since
	}
	saved, err := c.store.SaveModel(context.Background(), cp, w)
	d := time.Since(start)
	if err != nil {
		c.failure.Store(err.Error())
		c.failing.Store(true)
		c.metrics.checkpointFailures.Inc()
		c.log.Error("checkpoint failed", "err", err, "model_version", cp.Version)
		return err
	}
	shadow.MarkSaved()
	c.since = saved.Generation
	c.failing.Store(false)
	c.metrics.checkpoints.Inc()
	c.metrics.checkpointDuration.Observe(d.Seconds())
	c.metrics.checkpointBytes.Set(float64(saved.Bytes))
	c.metrics.checkpointBase.Set(float64(saved.BaseBytes))
	c.metrics.checkpointDeltas.Set(float64(saved.Deltas))
	if !saved.Delta {
		c.metrics.checkpointBases.Inc()
	}
	c.metrics.saved(time.Now())
	c.log.Debug("checkpoint saved", "generation", saved.Generation, "delta", saved.Delta, "model_version", cp.Version,
		"bytes", saved.Bytes, "positions", len(cp.Positions), "duration", d)
	// Offsets follow the checkpoint; they serve lag monitoring and members
	// without a checkpoint, so a failure is only logged.
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := c.commit.Commit(ctx, cp.Positions); err != nil {
		c.log.Warn("commit offsets (lag monitoring only)", "err", err)
	}
	return nil
}

// finish runs on the model goroutine once the loop has returned. It waits
// for the save in flight and, if final is set (the loop drained cleanly,
// so every record's output is flushed), takes a last checkpoint of what is
// left. It returns early when ctx ends.
func (c *checkpointer) finish(ctx context.Context, final bool) error {
	c.metrics.setSummary(c.model.Summary())
	if c.saving {
		select {
		case <-c.results:
			c.saving = false
		case <-ctx.Done():
			return fmt.Errorf("final checkpoint: wait for the save in flight: %w", ctx.Err())
		}
	}
	if !final || (c.pending == 0 && !c.failing.Load()) {
		return nil
	}
	cp, err := c.snapshot()
	if err != nil {
		return err
	}
	select {
	case c.jobs <- cp:
	case <-ctx.Done():
		return fmt.Errorf("final checkpoint: %w", ctx.Err())
	}
	select {
	case err := <-c.results:
		if err != nil {
			return fmt.Errorf("final checkpoint: %w", err)
		}
		c.pending = 0
		return nil
	case <-ctx.Done():
		c.saving = true
		return fmt.Errorf("final checkpoint: %w", ctx.Err())
	}
}

// handover runs on the model goroutine when a rebalance takes the
// partitions away (consumer.KafkaConfig.Handover): it flushes the output,
// saves a checkpoint and commits its offsets before it returns, so that
// the next owner of each partition starts where this member's output ends.
func (c *checkpointer) handover(ctx context.Context, out consumer.Flusher) error {
	err := out.Flush(ctx)
	if err == nil {
		err = c.finish(ctx, true)
	}
	if err == nil && c.failing.Load() {
		err = errors.New("the last checkpoint failed")
	}
	outcome := "ok"
	if err != nil {
		outcome = "failed"
		err = fmt.Errorf("handover: %w", err)
	}
	c.metrics.handovers.WithLabelValues(outcome).Inc()
	return err
}

// failed returns why the last save failed, "" if it did not.
func (c *checkpointer) failed() string {
	if !c.failing.Load() {
		return ""
	}
	msg, _ := c.failure.Load().(string)
	return msg
}

// close stops the saver, waiting for a save in flight. Idempotence is the
// caller's (Service.Run calls it once).
func (c *checkpointer) close() {
	close(c.jobs)
	c.wg.Wait()
}

// currentPositions returns the model's positions (model goroutine only).
func (c *checkpointer) currentPositions() []input.Position { return c.sortedPositions() }
