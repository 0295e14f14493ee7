package service

import (
	"bytes"
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

// changelog is the store of record of partition checkpoints (the
// state.Changelog).
type changelog interface {
	Save(ctx context.Context, p int32, e state.ChangelogEntry) error
	Load(ctx context.Context, p int32) (state.ChangelogState, bool, error)
}

// clPart is what the checkpointer knows of an assigned partition's
// changelog.
type clPart struct {
	epoch  uint64 // the generation since which this member owns the partition: its saves' epoch
	saved  int64  // the next offset of its last save to the changelog, -1: none yet
	synced bool   // the changelog holds the partition's model as the shadow was last marked saved: a delta may follow
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
	// unranked holds the event types warned of as missing from
	// model.event_order (warnUnranked), each warned of once.
	unranked map[string]bool
	// outOfOrder holds the listed types warned of as read without their
	// rank (warnOutOfOrder), each warned of once.
	outOfOrder map[string]bool
	// disputed is whether a disputed burst has been warned of
	// (warnDisputed).
	disputed bool
	// unread holds the consumer.Aliases bits warned of (warnUnread),
	// shadowed the fields' (warnShadowed) and replaced the output
	// fields' (warnReplaced).
	unread   uint32
	shadowed uint8
	replaced uint8
	// truthUnread is set once a record's unreadable truth was warned of.
	truthUnread bool

	positions map[partitionKey]*int64
	lastKey   partitionKey // the partition of the previous record...
	lastNext  *int64       // ...and its entry: most records follow one of the same partition
	pending   int          // records since the last checkpoint
	saving    bool
	shadow    *online.Set // the copy a save in flight encodes
	since     uint64      // the generation the shadow was last marked saved at (0: none)
	last      time.Time   // when the last checkpoint was taken

	// With a changelog (state_layout partition): the partitions the
	// current generation assigns, which each checkpoint also saves to the
	// changelog, under clMu (the saver goroutine updates them), and that
	// generation (model goroutine).
	cl    changelog
	open  func(context.Context) (changelog, error) // opens cl on the first assignment
	topic string                                   // the input topic
	clMu  sync.Mutex
	parts map[int32]*clPart
	gen   int32

	jobs      chan saveJob
	results   chan error
	saveCtx   context.Context // of the changelog saves, ended by close
	stopSaves context.CancelFunc
	evicted   func(p int32) // called when partition p's model left the set (model goroutine)
	share     *sharer       // publishes and merges the shared parameters, nil: none
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
	c.saveCtx, c.stopSaves = context.WithCancel(context.Background())
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
	if r.Event.Unread&^c.unread != 0 {
		c.warnUnread(r.Event.Unread)
	}
	if r.Event.Shadowed&^c.shadowed != 0 {
		c.warnShadowed(r.Event.Shadowed)
	}
	if r.Event.Replaced&^c.replaced != 0 {
		c.warnReplaced(r.Event.Replaced)
	}
	if r.Event.TruthUnread && !c.truthUnread {
		c.truthUnread = true
		c.log.Warn("records have a truth that is neither \"genuine\" nor \"noise\": they are scored without one, the member carried as it came (consumer/FORMAT.md)", "position", r.Pos.String())
	}
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
	// past r: a checkpoint, or a publication, waits for the batch's last
	// record.
	if c.share != nil {
		c.share.record(r.BatchEnd)
	}
	if c.pending >= c.every && r.BatchEnd {
		return c.checkpoint(ctx, out)
	}
	return nil
}

// drain is consumer.Options.Drain: the loop ends the batches in flight
// (ahead records that after has not seen) before it starts another when a
// checkpoint (not waiting for the save before it) or the sharer is due
// once they are done, so that after sees a record with BatchEnd.
func (c *checkpointer) drain(ahead int) bool {
	c.poll()
	return c.pending+ahead >= c.every && !c.saving || c.share != nil && c.share.due(ahead)
}

// warnUnranked logs, once each, the event types the models have seen
// that model.event_order does not list: without dwell their events go
// without the rank instrument, which a user would not see otherwise.
func (c *checkpointer) warnUnranked(types []string) {
	warnOnce(c.log, &c.unranked, types, "event types without a rank in model.event_order: add them to the order, least engaged first, to rank them")
}

// warnOutOfOrder logs, once each, the listed event types the models read
// without their rank (online.Model.OutOfOrderTypes): the order is the
// user's, and the model sets it aside for them.
func (c *checkpointer) warnOutOfOrder(types []string) {
	warnOnce(c.log, &c.outOfOrder, types, "event types read without their rank in model.event_order: the classifier ranks their events well below a lower-ranked type's (docs/design/model.md, \"Purchases that are the noise\")")
}

// warnDisputed logs, once, a burst whose clicks the classifier places
// above the others (online.BurstSummary.Disputed): the model's premise
// that quick clicks are the more often noise is in doubt on the stream,
// which a user whose quick clicks are genuine can drop.
func (c *checkpointer) warnDisputed(b *online.BurstSummary) {
	if b == nil || !b.Disputed || c.disputed {
		return
	}
	c.disputed = true
	c.log.Warn("clicks within seconds of the user's previous one form a burst that the classifier places above the other clicks: the premise that quick clicks are the more often noise is in doubt on this stream; if they are genuine here (items opened in tabs), set model.dwell_direction: learned (docs/design/model.md, \"Bursts\")",
		"burst_seconds", b.CentreSeconds, "share", b.Share)
}

// warnOnce logs msg with the types not yet in *seen, and adds them.
func warnOnce(log *slog.Logger, seen *map[string]bool, types []string, msg string) {
	var news []string
	for _, t := range types {
		if !(*seen)[t] {
			news = append(news, t)
		}
	}
	if len(news) == 0 {
		return
	}
	if *seen == nil {
		*seen = make(map[string]bool)
	}
	for _, t := range news {
		(*seen)[t] = true
	}
	log.Warn(msg, "types", news)
}

// warnUnread logs, once each, the members of records named as other
// formats name a field the record lacks ("timestamp" without "ts"): the
// model does not read them, which a user would not see otherwise.
func (c *checkpointer) warnUnread(unread uint32) {
	news := unread &^ c.unread
	c.unread |= news
	for i, a := range consumer.Aliases {
		if news&(1<<i) != 0 {
			c.log.Warn("records have a member named as other formats name a field, and not the field: the model does not read it; rename it, or read it with fields.FIELD: MEMBER (consumer/FORMAT.md)",
				"member", a.Name, "field", a.Field)
		}
	}
}

// warnShadowed logs, once each, the fields read from another member
// (fields.FIELD) that records lack while they carry the field's own name,
// which is not read: a setting that names a member the stream does not
// have.
func (c *checkpointer) warnShadowed(shadowed uint8) {
	news := shadowed &^ c.shadowed
	c.shadowed |= news
	for i, f := range consumer.FieldNames() {
		if news&(1<<i) != 0 {
			c.log.Warn("records lack the member fields."+f+" names and carry "+f+", which is not read while fields."+f+" is set: drop the setting, or name the member the records carry (consumer/FORMAT.md)", "field", f)
		}
	}
}

// warnReplaced logs, once each, the members named like a field the
// output writes, whose value the output's replaces.
func (c *checkpointer) warnReplaced(replaced uint8) {
	news := replaced &^ c.replaced
	c.replaced |= news
	for i, f := range consumer.OutputFields {
		if news&(1<<i) != 0 {
			c.log.Warn("records have a member named like a field the output writes: the output's value replaces it, and its own is not carried; rename the member to keep it (consumer/FORMAT.md)", "member", f)
		}
	}
}

// tick runs as a task on the model goroutine: it publishes the model's
// summary and takes a checkpoint when interval has passed since the last.
func (c *checkpointer) tick(interval time.Duration) func(context.Context, consumer.Flusher) error {
	return func(ctx context.Context, out consumer.Flusher) error {
		s := c.model.Summary()
		c.metrics.setSummary(s)
		c.warnUnranked(s.UnrankedTypes)
		c.warnOutOfOrder(s.OutOfOrderTypes)
		c.warnDisputed(s.Burst)
		if c.share != nil {
			c.share.tick(false)
		}
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
// encode into cp.Model, the rest of the checkpoint, and the partitions
// to save to the changelog after it.
type saveJob struct {
	model *online.Set
	cp    state.Checkpoint
	cl    []clSave
}

// clSave is one partition's changelog entry of a checkpoint.
type clSave struct {
	p     int32
	epoch uint64
	next  int64
	base  bool
}

// snapshot copies the model into the shadow and copies the positions.
// Every model publishes and merges first, so the checkpoint holds every
// model as published (a model restored from it has nothing of its own
// unpublished) and every merge point at or before its positions: a model
// that merged after the copy, at the position it saves, would change
// while its position does not, and the next changelog delta would apply
// to a model it was not taken from. Until stop 29 the handover's and the
// final checkpoint (finish) copied without merging.
func (c *checkpointer) snapshot() (saveJob, error) {
	if c.share != nil {
		c.share.tick(true)
	}
	c.shadow = c.model.FrozenCopy(c.shadow)
	job := saveJob{model: c.shadow, cp: state.Checkpoint{Positions: c.sortedPositions(), Version: c.model.Version()}}
	c.clMu.Lock()
	for p, part := range c.parts {
		if next := c.next(p); next > part.saved { // the partition moved since its last save
			job.cl = append(job.cl, clSave{p: p, epoch: part.epoch, next: next, base: !part.synced})
		}
	}
	c.clMu.Unlock()
	slices.SortFunc(job.cl, func(a, b clSave) int { return int(a.p - b.p) })
	return job, nil
}

// next returns the next input offset of partition p that the model
// reached, -1 if it has none (model goroutine).
func (c *checkpointer) next(p int32) int64 {
	if n := c.positions[partitionKey{c.topic, p}]; n != nil {
		return *n
	}
	return -1
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
	failed := c.saveChangelog(job)
	shadow.MarkSaved()
	c.since = saved.Generation
	c.failing.Store(false)
	c.metrics.checkpoints.Inc()
	c.metrics.checkpointDuration.Observe(d.Seconds())
	c.metrics.checkpointBytes.Set(float64(saved.Bytes))
	c.metrics.checkpointWritten.Add(float64(saved.Bytes))
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
	positions := slices.DeleteFunc(cp.Positions, func(p input.Position) bool { return p.Topic == c.topic && failed[p.Partition] })
	if err := c.commit.Commit(ctx, positions); err != nil {
		c.log.Warn("commit offsets (lag monitoring only)", "err", err)
	}
	return nil
}

// saveChangelog saves job's partition entries to the changelog, each a
// delta of the shadow's partition model when the changelog holds its
// last saved state, else whole, and returns the partitions whose save
// failed: their offsets are not committed (the next owner restores the
// older entry and reads on from its offset, with the records that
// already have output marked by the tail scan), and their next save is
// whole. It runs on the saver goroutine, after the local checkpoint
// committed and before the shadow is marked saved.
func (c *checkpointer) saveChangelog(job saveJob) map[int32]bool {
	var failed map[int32]bool
	for _, j := range job.cl {
		m := job.model.Model(job.model.Key(j.p))
		if m == nil {
			continue
		}
		base := j.base || !m.HasDeltaBase()
		err := c.saveEntry(j, m, base)
		if errors.Is(err, state.ErrNeedBase) && !base { // the chain takes no more deltas
			base = true
			err = c.saveEntry(j, m, base)
		}
		c.clMu.Lock()
		if part := c.parts[j.p]; part != nil && part.epoch == j.epoch {
			part.synced = err == nil
			if err == nil {
				part.saved = j.next
			}
		}
		c.clMu.Unlock()
		if err != nil {
			if failed == nil {
				failed = map[int32]bool{}
			}
			failed[j.p] = true
			c.log.Error("changelog save failed; the partition's offset is not committed", "partition", j.p, "epoch", j.epoch, "next", j.next, "base", base, "err", err)
		}
	}
	return failed
}

func (c *checkpointer) saveEntry(j clSave, m *online.Model, base bool) error {
	write := func(w io.Writer) error {
		_, err := m.WriteDelta(w)
		return err
	}
	kind := "delta"
	if base {
		kind = "base"
		write = func(w io.Writer) error {
			_, err := m.WriteTo(w)
			return err
		}
	}
	ctx, cancel := context.WithTimeout(c.saveCtx, changelogTimeout)
	defer cancel()
	err := c.cl.Save(ctx, j.p, state.ChangelogEntry{Epoch: j.epoch, Next: j.next, Base: base, Write: write})
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	c.metrics.changelogSaves.WithLabelValues(kind, outcome).Inc()
	return err
}

// changelogTimeout bounds one partition's changelog save.
const changelogTimeout = 2 * time.Minute

// assign runs on the model goroutine on each assignment (the source's
// Restore), before any record of generation gen is fetched. For each
// partition of parts that this member did not own in the generation
// before, it loads the partition's newest checkpoint from the changelog
// and, when that is further in the input than the model's own state of
// the partition, puts it in the model's place and returns its next offset
// (the source starts there). Its saves then take the epoch gen, and the
// first is whole. A partition this member owned in the generation just
// before is its own: nobody else can have written it since. A partition
// owned before and not assigned now leaves the model (evict) when the
// changelog holds its state as the model has it; otherwise (its last
// changelog save failed) it keeps its model, saved to the local store
// only. On the first assignment after a start, the partitions restored
// from the local state that parts does not hold leave too (dropLeftover).
func (c *checkpointer) assign(ctx context.Context, gen int32, parts []int) (map[int]int64, error) {
	if c.saving { // the shadow and parts belong to the saver until it is done
		select {
		case <-c.results:
			c.saving = false
		case <-ctx.Done():
			return nil, fmt.Errorf("restore: wait for the save in flight: %w", ctx.Err())
		}
	}
	c.clMu.Lock()
	prev, prevGen := c.parts, c.gen
	c.parts, c.gen = map[int32]*clPart{}, gen
	c.clMu.Unlock()
	first := c.cl == nil
	if first {
		cl, err := c.open(ctx)
		if err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		c.cl = cl
	}
	for p, old := range prev {
		if !slices.Contains(parts, int(p)) {
			c.evict(p, old)
		}
	}
	restored := map[int]int64{}
	var errs []error
	for _, p := range parts {
		p32 := int32(p)
		if old := prev[p32]; old != nil && prevGen == gen-1 {
			c.setPart(p32, old)
			c.metrics.changelogRestores.WithLabelValues("kept").Inc()
			continue
		}
		c.setPart(p32, &clPart{epoch: uint64(gen), saved: -1})
		next, err := c.restorePartition(ctx, p32)
		switch {
		case err != nil:
			errs = append(errs, err)
			c.metrics.changelogRestores.WithLabelValues("failed").Inc()
		case next >= 0:
			restored[p] = next
			c.metrics.changelogRestores.WithLabelValues("changelog").Inc()
		default:
			c.metrics.changelogRestores.WithLabelValues("local").Inc()
		}
	}
	if first {
		// The partitions restored from the local state that this member
		// is not given: their owner restores them from the changelog.
		for _, k := range slices.Clone(c.model.Keys()) {
			if !slices.Contains(parts, int(k)) {
				c.dropLeftover(ctx, k)
			}
		}
	}
	if len(restored) > 0 {
		c.metrics.setSummary(c.model.Summary())
	}
	return restored, errors.Join(errs...)
}

// dropLeftover drops partition p's model, restored from the local state
// at start-up and not given to this member in its first generation, if
// the changelog holds p at least as far in the input: whoever owns p
// restores it from there. Otherwise (the member's last changelog save of
// p failed before it stopped) it keeps the model, its copy being the
// newest.
func (c *checkpointer) dropLeftover(ctx context.Context, p int32) {
	own := c.next(p)
	st, ok, err := c.loadChangelog(ctx, p)
	switch {
	case err != nil:
		c.log.Warn("partition state kept: the changelog could not be read", "partition", p, "next", own, "err", err)
	case own >= 0 && (!ok || st.Next < own):
		c.log.Info("partition state kept: this member's copy is further in the input than the changelog's", "partition", p, "next", own, "changelog", ok, "changelog_next", st.Next)
	default:
		c.drop(p, own)
	}
}

// evict drops partition p's model and position, which this member no
// longer owns, if its last changelog save holds the model as it is: the
// next owner, or this member if p comes back, restores it from there.
// The next local checkpoint records it (a set delta that lists p no
// more).
func (c *checkpointer) evict(p int32, part *clPart) {
	next := c.next(p)
	if !part.synced || next < 0 || part.saved != next {
		c.log.Info("partition state kept: the changelog does not hold it as this member has it", "partition", p, "next", next, "changelog_next", part.saved)
		return
	}
	c.drop(p, next)
}

// drop removes partition p's model and position, at next, from the
// member's state; the next local checkpoint records it.
func (c *checkpointer) drop(p int32, next int64) {
	if err := c.model.Remove(c.model.Key(p)); err != nil {
		c.log.Warn("partition state kept", "partition", p, "err", err)
		return
	}
	delete(c.positions, partitionKey{c.topic, p})
	if c.evicted != nil {
		c.evicted(p)
	}
	c.pending++
	c.metrics.changelogEvictions.Inc()
	c.log.Debug("partition state evicted: the changelog holds it", "partition", p, "next", next)
}

func (c *checkpointer) setPart(p int32, part *clPart) {
	c.clMu.Lock()
	c.parts[p] = part
	c.clMu.Unlock()
}

// restorePartition puts partition p's changelog checkpoint in the model's
// place if it is further in the input than the model's own, and returns
// its next offset; -1 if the model's own stays.
func (c *checkpointer) restorePartition(ctx context.Context, p int32) (int64, error) {
	t := time.Now()
	st, ok, err := c.loadChangelog(ctx, p)
	if err != nil {
		return -1, fmt.Errorf("partition %d: %w", p, err)
	}
	own := c.next(p)
	if !ok || st.Next <= own {
		c.log.Info("partition state: this member's own", "partition", p, "next", own, "changelog", ok, "changelog_next", st.Next)
		return -1, nil
	}
	deltas := make([]io.Reader, len(st.Deltas))
	for i, d := range st.Deltas {
		deltas[i] = &ctxReader{ctx: ctx, r: bytes.NewReader(d)}
	}
	m, err := online.ReadModelDeltas(&ctxReader{ctx: ctx, r: bytes.NewReader(st.Base)}, deltas)
	if err == nil {
		err = c.model.Replace(c.model.Key(p), m)
	}
	if err != nil {
		return -1, fmt.Errorf("partition %d: changelog checkpoint (epoch %d, next %d): %w", p, st.Epoch, st.Next, err)
	}
	k := partitionKey{c.topic, p}
	if c.positions[k] == nil {
		c.positions[k] = new(int64)
	}
	*c.positions[k] = st.Next
	c.lastNext = nil
	c.pending++ // the local store lacks it
	c.log.Info("partition state restored from the changelog", "partition", p, "epoch", st.Epoch, "next", st.Next,
		"own_next", own, "deltas", len(st.Deltas), "bytes", len(st.Base), "model_version", m.Version(), "duration", time.Since(t))
	return st.Next, nil
}

// loadChangelog loads partition p's newest changelog checkpoint, trying
// again after an error that may pass (not a corrupt checkpoint) up to
// restoreAttempts times, with waits that double from 100 ms, until ctx
// ends.
func (c *checkpointer) loadChangelog(ctx context.Context, p int32) (state.ChangelogState, bool, error) {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		st, ok, err := c.cl.Load(ctx, p)
		if err == nil || attempt == restoreAttempts || errors.Is(err, state.ErrCorrupt) || errors.Is(err, state.ErrClosed) {
			return st, ok, err
		}
		c.log.Warn("changelog load failed; trying again", "partition", p, "attempt", attempt, "retry_in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return st, ok, err
		}
		wait *= 2
	}
}

// restoreAttempts bounds the loads of one partition's changelog.
const restoreAttempts = 5

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

// close stops the saver, waiting for a save in flight, whose changelog
// saves it cancels. Idempotence is the caller's (Service.Run calls it
// once).
func (c *checkpointer) close() {
	c.stopSaves() // a changelog save to a broker that is gone must not hold the stop
	close(c.jobs)
	c.wg.Wait()
}

// currentPositions returns the model's positions (model goroutine only).
func (c *checkpointer) currentPositions() []input.Position { return c.sortedPositions() }
