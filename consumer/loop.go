package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"denoiser/consumer/input"
	"denoiser/online"
)

// Model scores an event with the model as it was, then learns from it
// (test-then-train). *online.Model implements it. Step returns an error
// wrapping online.ErrInvalidEvent when the event does not fit the model (the
// model is unchanged), or one wrapping online.ErrNumerical when learning
// failed numerically (the score is still valid).
type Model interface {
	Step(ev online.Event, sc *online.Score) error
}

// Sink receives scored records in input order. Write must not retain r.
// Flush makes every record written so far durable (or delivered).
type Sink interface {
	Write(ctx context.Context, r *Result) error
	Flush(ctx context.Context) error
}

// DeadLetter receives rejected records, with their reason, in input order.
// Reject must not retain r.
type DeadLetter interface {
	Reject(ctx context.Context, r *Result) error
	Flush(ctx context.Context) error
}

// Flusher waits until everything handed to the sinks so far has been written
// and flushed.
type Flusher interface {
	Flush(ctx context.Context) error
}

// MaxRawBytes bounds the raw bytes a Result keeps for the dead-letter sink.
const MaxRawBytes = 64 << 10

// Result is one processed input record, handed to the Sink (when scored) or
// the DeadLetter (when rejected), and to Options.After.
type Result struct {
	Pos   input.Position
	Event Event // decoded fields; valid unless Reason is a decoding reason
	// Raw is the record as read, up to MaxRawBytes (RawSize is its full
	// length). It is kept for the dead-letter sink.
	Raw     []byte
	RawSize int

	// Err is nil for a clean score. For a rejected record it is a
	// *RecordError and Reason is set. For a scored record it may wrap
	// online.ErrNumerical: the score is valid, the update was discarded.
	Err    error
	Reason Reason

	Score online.Score // valid when Scored()

	// Shadow is the score of Options.Shadow, when set and it accepted the
	// event (HasShadow). Sinks ignore it; reports compare against it.
	Shadow    online.Score
	HasShadow bool

	// Emitted is Message.Emitted: the record already has output, so the
	// writer does not send it (or its dead letter) again.
	Emitted bool

	// BatchEnd reports that no record after this one has been stepped yet:
	// the models are exactly as this record left them, so a checkpoint
	// taken in Options.After covers it and nothing later. It is set on
	// every record of the sequential path, and on the last record of each
	// batch when partitions are stepped in parallel (Options.Workers).
	BatchEnd bool

	skip      SkipReason                           // set inside the loop on a record with nothing to score
	spent     bool                                 // a barrier's result, past its task: the writer only recycles it
	undecoded bool                                 // Raw (the whole record) is still to be decoded, by the record's lane
	shadowErr error                                // the shadow's numerical failure, when HasShadow
	flush     chan error                           // set on a flush marker (flusher.Flush), whose answer it takes
	task      func(context.Context, Flusher) error // set on a barrier (Message.Task)
}

// SkipReason says why a record held nothing to score. Skipped records are
// neither scored nor dead-lettered; they are counted (Stats.Skipped,
// Options.Skipped), so that every record read is accounted for.
type SkipReason string

// Reasons a record is skipped.
const (
	SkipEmpty     SkipReason = "empty"     // a value of no bytes (an empty line of a file)
	SkipBlank     SkipReason = "blank"     // a value of white space only
	SkipTombstone SkipReason = "tombstone" // a Kafka record with a null value (a delete marker of a compacted topic)
)

// SkipReasons returns every SkipReason, in a fixed order.
func SkipReasons() []SkipReason { return []SkipReason{SkipEmpty, SkipBlank, SkipTombstone} }

// skipReason classifies a record with nothing to score, "" for one with
// something.
func skipReason(m *Message) SkipReason {
	switch {
	case m.Null:
		return SkipTombstone
	case len(m.Value) == 0:
		return SkipEmpty
	case len(bytes.TrimSpace(m.Value)) == 0:
		return SkipBlank
	}
	return ""
}

// Scored reports whether r carries a score (and goes to the Sink).
func (r *Result) Scored() bool { return r.Reason == "" }

// RawTruncated reports whether Raw is shorter than the record.
func (r *Result) RawTruncated() bool { return len(r.Raw) < r.RawSize }

// Options configures Run. The zero value is ready to use.
type Options struct {
	// Buffer bounds the records in flight (default 256): the reader, the
	// model and the writer hold at most 2·Buffer+2 between them. With
	// parallel partitions a batch is at most Buffer records, and two
	// batches may be in flight while a third is formed: 4·Buffer+2
	// records between them.
	Buffer int
	// Fields names the members the fields are read from (zero: the event
	// format's names).
	Fields Fields
	// Shadow, if set, is a second model stepped on every event the main
	// model accepted (the replay's plain baseline). When partitions are
	// stepped in parallel, the shadow steps a batch once the main models
	// have: a Partitioned shadow its partitions at the same time, any other
	// shadow on the model goroutine, in input order.
	Shadow Model
	// Workers is the number of goroutines, the model goroutine included,
	// that step the models of different partitions at the same time when
	// the model is Partitioned (runtime.GOMAXPROCS(0) uses every core).
	// The default, 0 or 1, steps every record on the model goroutine as it
	// comes. With more, the model goroutine takes the records already
	// read, up to Buffer and up to the next barrier, as one batch: each
	// partition's records are stepped in input order on one goroutine at a
	// time, so the scores do not depend on the batching or on Workers; then
	// Skipped, After and the sinks see the batch's records in input order,
	// as on the sequential path. While every worker has a partition's
	// records to step, each record is decoded on its partition's
	// goroutine rather than on the reader (with fewer partitions than
	// workers the reader decodes, beside them). But After may then find
	// the models past its record (Result.BatchEnd), which is why parallel
	// stepping is not the default: a checkpointer in After must wait for
	// BatchEnd.
	Workers int
	// After, if set, is called on the model goroutine after each record
	// (blank records excluded), in input order, once the model has stepped
	// on it and before it is handed to its sink. out.Flush hands r to its
	// sink, then waits until the sinks have written and flushed everything
	// up to and including r: a checkpointer reads r.Pos, calls out.Flush,
	// then commits the model and the position after r, which it may do
	// only when r.BatchEnd (with parallel partitions the models may have
	// stepped later records of r's batch already). r must not be used
	// after out.Flush, nor after After returns. An error from After stops
	// the loop (the models may have stepped later records of the batch,
	// which are neither counted nor handed on).
	After func(ctx context.Context, r *Result, out Flusher) error
	// Before, if set, is called before the model steps a record (one with
	// an event to score), on the goroutine that steps it: the replay
	// merges the shared parameters there that the live partition model
	// merged (service.Merges), and the service those that a previous owner
	// of the partition merged among the records it had emitted. On the
	// sequential path it runs on the model goroutine, in input order; with
	// parallel partitions (Workers) the calls for the records of one
	// partition's model come in their input order, on one goroutine at a
	// time, and those of different models at the same time, so Before may
	// touch r's model and nothing another model's calls touch without a
	// lock.
	Before func(r *Result)
	// Drain, if set, is called on the model goroutine when partitions are
	// stepped in parallel (Workers), before the loop starts a batch while
	// the batches before it are still in flight; ahead is the number of
	// records in those batches, which After has not seen yet. True makes
	// the loop finish them first, the last record with BatchEnd, so that
	// After may checkpoint or publish there. A caller that counts records
	// in After and wants a batch end every N records asks for one once
	// its count plus ahead reaches N: the end then comes at most one batch
	// (Buffer records) past the N-th, where counting After's records alone
	// would come up to batchDepth batches past. Without Drain, a record
	// gets BatchEnd only where the loop waits for input, runs a task or
	// meets a barrier: under a backlog, seldom.
	Drain func(ahead int) bool
	// Skipped, if set, is called on the model goroutine for each record
	// with nothing to score (see SkipReason), in input order.
	Skipped func(SkipReason)
	// Tasks, if set, delivers functions to run on the model goroutine
	// between two records, also while no input arrives: a task may read or
	// copy the model (a consistent snapshot, an idle checkpoint). out.Flush
	// waits until the sinks have written and flushed every record processed
	// so far. An error from a task stops the loop.
	Tasks <-chan func(ctx context.Context, out Flusher) error
}

// Stats counts what Run did.
type Stats struct {
	Records uint64 // records read: Skipped + Scored + Rejected
	Skipped uint64 // records with nothing to score (SkippedByReason)
	// SkippedByReason counts skipped records per SkipReason.
	SkippedByReason map[SkipReason]uint64
	Scored          uint64 // records scored and written to the sink (unless AlreadyEmitted)
	Rejected        uint64 // records dead-lettered (unless AlreadyEmitted)
	// FirstRejected is the first dead-lettered record's position and
	// error, "" before one: the example an operator reads first.
	FirstRejected string
	// AlreadyEmitted counts the records of Scored and Rejected that were
	// not written again because they already had output (Result.Emitted).
	AlreadyEmitted uint64
	// ByReason counts rejected records per Reason.
	ByReason map[Reason]uint64
	// Numerical counts scored records whose update the model discarded for
	// a numerical failure.
	Numerical uint64
	// ShadowRejected counts events the main model accepted and the shadow
	// model refused; ShadowNumerical its numerical failures.
	ShadowRejected  uint64
	ShadowNumerical uint64
	// Unread counts, per name of Aliases, the records that carry a member
	// so named without the field it names elsewhere (Event.Unread): a
	// "timestamp" in records without "ts" leaves the model without times.
	Unread map[string]uint64
	// Shadowed counts, per field, the records that lack the member Fields
	// reads the field from and carry the field under its own name, which
	// is not read (Event.Shadowed).
	Shadowed map[string]uint64
	// Replaced counts, per name of OutputFields, the records that carried
	// a member so named, which the output's own field replaced
	// (Event.Replaced).
	Replaced map[string]uint64
	// TruthUnread counts the records whose truth was neither "genuine"
	// nor "noise", scored without it (Event.TruthUnread).
	TruthUnread uint64
}

// countNamed adds 1 to counts[names[i]] for each bit i set in bits, and
// returns counts (made if nil): the per-name counts of Stats.
func countNamed(counts map[string]uint64, bits uint8, names []string) map[string]uint64 {
	if counts == nil {
		counts = map[string]uint64{}
	}
	for i, name := range names {
		if bits&(1<<i) != 0 {
			counts[name]++
		}
	}
	return counts
}

// countUnread counts a record's unread members (Event.Unread).
func (s *Stats) countUnread(unread uint32) {
	if s.Unread == nil {
		s.Unread = map[string]uint64{}
	}
	for i := range Aliases {
		if unread&(1<<i) != 0 {
			s.Unread[Aliases[i].Name]++
		}
	}
}

// Add adds o's counts to s's (the runs of several members, say).
func (s *Stats) Add(o Stats) {
	s.Records += o.Records
	s.Skipped += o.Skipped
	s.Scored += o.Scored
	s.Rejected += o.Rejected
	if s.FirstRejected == "" {
		s.FirstRejected = o.FirstRejected
	}
	s.AlreadyEmitted += o.AlreadyEmitted
	s.Numerical += o.Numerical
	s.ShadowRejected += o.ShadowRejected
	s.ShadowNumerical += o.ShadowNumerical
	s.Unread = addCounts(s.Unread, o.Unread)
	s.Shadowed = addCounts(s.Shadowed, o.Shadowed)
	s.Replaced = addCounts(s.Replaced, o.Replaced)
	s.TruthUnread += o.TruthUnread
	s.SkippedByReason = addCounts(s.SkippedByReason, o.SkippedByReason)
	s.ByReason = addCounts(s.ByReason, o.ByReason)
}

func addCounts[K comparable](dst, src map[K]uint64) map[K]uint64 {
	for k, n := range src {
		if dst == nil {
			dst = map[K]uint64{}
		}
		dst[k] += n
	}
	return dst
}

// Run reads src until it is exhausted (io.EOF), ctx is cancelled or a sink
// fails. Each record is decoded, scored by model (score, then learn) and
// written to sink; a record that fails to decode or that the model refuses
// goes to dlq with its reason. Bad records never stop the loop. At the end
// of the input, sink and dlq are flushed. The goroutine that calls Run owns
// model until Run returns (it lends the models of a Partitioned model's
// partitions to its workers while it waits for them: Options.Workers); Run
// returns only after its helper goroutines have exited. The returned Stats
// are valid even with an error. A source's *ReadError ends the input as
// io.EOF does (everything before it processed and flushed), and Run then
// returns it, unwrapped, if nothing else failed.
func Run(ctx context.Context, src Source, model Model, sink Sink, dlq DeadLetter, opts Options) (Stats, error) {
	if src == nil || model == nil || sink == nil || dlq == nil {
		return Stats{}, errors.New("run loop: nil source, model, sink or dead-letter")
	}
	if err := opts.Fields.Validate(); err != nil {
		return Stats{}, fmt.Errorf("run loop: %w", err)
	}
	n := opts.Buffer
	if n <= 0 {
		n = 256
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	pool := 2*n + 2
	parted, parallel := model.(Partitioned)
	if parallel = parallel && opts.Workers > 1; parallel {
		pool += (batchDepth - 1) * n // the batches in flight
	}
	l := &loop{
		free:    make(chan []*Result, pool),
		decoded: make(chan []*Result, n),
		out:     make(chan []*Result, n),
		spare:   make(chan []*Result, 2*n/chunkLen+8),
		sink:    sink,
		dlq:     dlq,
	}
	for left := pool; left > 0; left -= chunkLen {
		c := make([]*Result, min(left, chunkLen), chunkLen)
		for i := range c {
			c[i] = new(Result)
		}
		l.free <- c
	}
	l.outBuf = l.chunk()
	for i := range l.batches {
		l.batches[i] = make([]*Result, 0, n)
	}
	l.flying = make([]*flight, 0, batchDepth)
	if parallel {
		l.workers = startWorkers(opts.Workers, parted, opts.Shadow, opts.Fields, opts.Before)
		defer l.workers.stop()
	}

	var wg sync.WaitGroup
	var readErr, writeErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(l.decoded)
		readErr = l.read(ctx, src, opts.Fields) // on error the records already read are still processed
	}()
	go func() {
		defer wg.Done()
		writeErr = l.write(ctx, cancel)
	}()

	st := Stats{ByReason: map[Reason]uint64{}, SkippedByReason: map[SkipReason]uint64{}}
	stepErr := l.step(ctx, model, opts, &st)
	// What was handed on goes to the writer, also when After or a task
	// failed (sendOut fails only once ctx is done, which Run reports).
	l.sendOut(ctx)
	if stepErr != nil {
		cancel() // unblock the reader
	}
	close(l.out)
	wg.Wait()

	// Records read but not processed (after a failure) are not counted.
	st.Records = st.Skipped + st.Scored + st.Rejected
	if _, ok := readErr.(*ReadError); ok && stepErr == nil && writeErr == nil {
		return st, readErr // as at the end of the input, flushed: the caller keeps what was read
	}
	err := errors.Join(readErr, stepErr, writeErr)
	if err == nil {
		err = ctx.Err()
		if err != nil {
			err = fmt.Errorf("run loop: %w", err)
		}
	}
	return st, err
}

type loop struct {
	free    chan []*Result // recycled results, in chunks: bounded memory, no allocation per record
	decoded chan []*Result // reader -> model: chunks of records, in input order
	out     chan []*Result // model -> writer: chunks of records (and flush markers), in input order
	spare   chan []*Result // empty chunks to reuse
	pending *Result        // the record being processed, until handed on; model goroutine only
	workers *workers       // steps partitions in parallel; nil on the sequential path

	// Model goroutine only: the batches being processed (with parallel
	// partitions, those in flight and the one being formed), used in turn
	// (side); the batches taken and not yet finished (flying); a task that
	// came while a batch was in flight, run next (held).
	batches [batchDepth][]*Result
	flights [batchDepth]flight
	side    int
	flying  []*flight // oldest first, at most batchDepth-1
	held    func(context.Context, Flusher) error
	sink    Sink
	dlq     DeadLetter

	// Model goroutine only: the rest of the chunk being taken (in, its
	// whole slice, recycled once taken), and the records handed on but
	// not yet sent to the writer.
	cur, in []*Result
	outBuf  []*Result
}

// chunkLen is the most records that the reader hands the model goroutine
// at once, and the model goroutine the writer. Handing records on one at a
// time cost a channel operation each way per record, and, while the
// other side waits, a wake-up of its goroutine per record (docs/perf.md,
// "Records handed on in chunks"). The reader hands on a chunk as soon as
// its source has no record ready (Ready), and the model goroutine sends
// its chunk before it waits for input, so a record waits for no later one.
const chunkLen = 32

// Ready is implemented by sources that can tell whether Next would return
// a record without waiting for its input (FileSource, CSVSource,
// KafkaSource). Run's reader hands on the records it has read only when
// Ready is false or a chunk is full; a source without Ready has each
// record handed on alone.
type Ready interface {
	Ready() bool
}

// chunk returns an empty chunk, reused if one is spare.
func (l *loop) chunk() []*Result {
	select {
	case c := <-l.spare:
		return c
	default:
		return make([]*Result, 0, chunkLen)
	}
}

// recycle keeps chunk c, whose records have gone on, for reuse.
func (l *loop) recycle(c []*Result) {
	clear(c[:cap(c)]) // no pointer into recycled results
	select {
	case l.spare <- c[:0]:
	default: // enough are spare
	}
}

// read runs on the reader goroutine: it reads and decodes records, and
// hands them on in chunks.
func (l *loop) read(ctx context.Context, src Source, fields Fields) error {
	dec := NewDecoder(fields)
	ready, _ := src.(Ready)
	chunk := l.chunk()
	var avail []*Result // free results to fill
	// sendChunk sends the records read so far, if any; false once ctx is
	// done.
	sendChunk := func() bool {
		if len(chunk) == 0 {
			return true
		}
		if !send(ctx, l.decoded, chunk) {
			return false
		}
		chunk = l.chunk()
		return true
	}
	for {
		m, err := src.Next(ctx)
		if err == io.EOF {
			sendChunk()
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // cancellation is reported by Run
			}
			sendChunk() // the records already read are still processed
			if _, ok := err.(*ReadError); ok {
				return err // says what it is; Run returns it alone
			}
			return fmt.Errorf("read source: %w", err)
		}
		if len(avail) == 0 {
			if avail != nil {
				l.recycle(avail)
			}
			select {
			case avail = <-l.free:
			default: // every result is in flight: hand on what is read before waiting for some
				var ok bool
				if !sendChunk() {
					return nil
				}
				if avail, ok = recv(ctx, l.free); !ok {
					return nil
				}
			}
		}
		r := avail[len(avail)-1]
		avail = avail[:len(avail)-1]
		if m.Task != nil {
			r.task = m.Task
			chunk = append(chunk, r)
			if !sendChunk() {
				return nil
			}
			continue
		}
		raw := r.Raw[:0]
		if cap(raw) > MaxRawBytes {
			raw = nil
		}
		post, shadow := r.Score.Posterior[:0], r.Shadow.Posterior[:0] // keep the backing arrays
		*r = Result{Pos: m.Pos, RawSize: max(len(m.Value), m.Size), Emitted: m.Emitted}
		r.Score.Posterior, r.Shadow.Posterior = post, shadow
		r.Raw = append(raw, m.Value[:min(len(m.Value), MaxRawBytes)]...)
		if r.skip = skipReason(&m); r.skip != "" {
			// nothing to decode
		} else if m.Err != nil {
			r.Err, r.Reason = m.Err, ReasonOf(m.Err)
		} else if m.Size > len(m.Value) {
			// Value holds the line's start only: the error names the
			// line's length, not the start's.
			r.Err = tooLarge(m.Size)
			r.Reason = ReasonOf(r.Err)
		} else if l.workers != nil && l.workers.busy.Load() && len(r.Raw) == len(m.Value) {
			r.undecoded = true // decoded on its partition's lane, beside the other partitions
		} else if err := dec.Decode(m.Value, &r.Event); err != nil {
			r.Err, r.Reason = err, ReasonOf(err)
		}
		chunk = append(chunk, r)
		if len(chunk) == chunkLen || ready == nil || !ready.Ready() {
			if !sendChunk() {
				return nil
			}
		}
	}
}

// step runs on the caller's goroutine, which owns the model. It takes the
// records a batch at a time: one record on the sequential path; with
// parallel partitions (l.workers), the first record it waits for and those
// already read after it, up to Buffer and up to the next barrier. There it
// starts the next batch while those before it are still being stepped, if
// its records are read already and neither a task, a barrier nor
// Options.Drain needs the models at the end of the batches before; with
// batchDepth batches held, it then finishes the oldest (its records lack
// BatchEnd: the models are past them). Otherwise it waits for the batches
// in flight and finishes them, the last one's last record with BatchEnd.
func (l *loop) step(ctx context.Context, model Model, opts Options, st *Stats) error {
	defer l.settle()
	for {
		var r *Result
		if len(l.flying) > 0 {
			if r = l.overlap(opts); r == nil {
				if ok, err := l.landAll(ctx, opts, st); !ok || err != nil {
					return err
				}
				continue
			}
		} else {
			var task func(context.Context, Flusher) error
			var ok bool
			if r, task, ok = l.next(ctx, opts.Tasks); !ok {
				return nil
			}
			if task != nil {
				if err := task(ctx, (*flusher)(l)); err != nil {
					return fmt.Errorf("task: %w", err)
				}
				continue
			}
			if r == nil {
				return nil
			}
			if r.task != nil {
				if err := l.barrier(ctx, r); err != nil {
					return err
				}
				continue
			}
		}
		l.side = (l.side + 1) % batchDepth
		batch := append(l.batches[l.side][:0], r)
		f := &l.flights[l.side]
		if l.workers == nil {
			if r.skip == "" && r.Reason == "" {
				p := PartitionOf(r.Pos)
				m := partitionModel(model, p) // made first, so that Before finds it
				if opts.Before != nil {
					opts.Before(r)
				}
				stepRecord(m, partitionModel(opts.Shadow, p), r)
			}
			*f = flight{batch: batch}
			if ok, err := l.land(ctx, f, opts, st, true); !ok || err != nil {
				return err
			}
			continue
		}
		var barrier *Result
		for len(batch) < cap(batch) {
			var ok bool
			if r, ok = l.poll(); !ok || r == nil { // none read yet, or the input has ended (the next poll says so again)
				break
			}
			if r.task != nil {
				barrier = r
				break
			}
			batch = append(batch, r)
		}
		*f = flight{batch: batch}
		if l.workers.shadow != nil {
			l.workers.stepBatch(batch) // the shadow's phase needs the main models' of the same batch: no overlap
		} else {
			f.set = l.workers.dispatch(batch, l.workers.model, false)
		}
		l.flying = append(l.flying, f)
		if len(l.flying) == batchDepth {
			if ok, err := l.land(ctx, l.oldest(), opts, st, false); !ok || err != nil {
				return err
			}
		}
		if barrier != nil {
			if ok, err := l.landAll(ctx, opts, st); !ok || err != nil {
				return err
			}
			if err := l.barrier(ctx, barrier); err != nil {
				return err
			}
		}
	}
}

// batchDepth is the most batches the model goroutine holds with parallel
// partitions: those in flight (being stepped, or stepped and not yet
// finished) and the one being formed.
const batchDepth = 3

// flight is a batch that the model goroutine took: being stepped (set),
// or stepped already (set nil), not yet finished.
type flight struct {
	batch []*Result
	set   *laneSet
}

// overlap returns the next record if it is read already and the batches
// in flight may stay in flight while the next one starts with it: no task
// waits (a task that came is held for next), the next record is not a
// barrier, and Options.Drain does not ask for a batch end. Otherwise it
// returns nil and takes nothing. When nothing is read yet it yields once
// first: the reader may be runnable but waiting for a core that the
// lanes hold (without the yield, a quarter of the batches of
// BenchmarkRunPartitions's two partitions ended so; with it, 1–5 %).
func (l *loop) overlap(opts Options) *Result {
	if l.held != nil {
		return nil
	}
	select {
	case task := <-opts.Tasks: // a nil channel never delivers
		l.held = task
		return nil
	default:
	}
	r, ok := l.peek()
	if !ok {
		runtime.Gosched()
		r, ok = l.peek()
	}
	if !ok || r == nil || r.task != nil {
		return nil
	}
	if opts.Drain != nil {
		ahead := 0
		for _, f := range l.flying {
			ahead += len(f.batch)
		}
		if opts.Drain(ahead) {
			return nil
		}
	}
	r, _ = l.poll()
	return r
}

// land waits until batch f has been stepped, then finishes its records in
// input order, the last with BatchEnd if end (no later record has been
// stepped). It reports false, with finish, when the loop must stop; the
// batch's records after the one that failed are neither counted nor
// handed on.
func (l *loop) land(ctx context.Context, f *flight, opts Options, st *Stats, end bool) (bool, error) {
	if l.workers != nil {
		l.workers.wait(f.set)
		f.set = nil
	}
	batch := f.batch
	batch[len(batch)-1].BatchEnd = end
	for _, r := range batch {
		if ok, err := l.finish(ctx, r, opts, st); !ok || err != nil {
			clear(batch)
			return false, err
		}
	}
	clear(batch) // no pointer into recycled results
	return true, nil
}

// landAll lands the batches in flight, oldest first, the last one's last
// record with BatchEnd.
func (l *loop) landAll(ctx context.Context, opts Options, st *Stats) (bool, error) {
	for len(l.flying) > 0 {
		f := l.oldest()
		if ok, err := l.land(ctx, f, opts, st, len(l.flying) == 0); !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

// oldest takes the oldest batch in flight off the list.
func (l *loop) oldest() *flight {
	f := l.flying[0]
	l.flying = append(l.flying[:0], l.flying[1:]...)
	return f
}

// settle waits for the batches in flight, if any, when step returns
// early: no lane steps once Run has returned.
func (l *loop) settle() {
	if l.workers != nil {
		for _, f := range l.flying {
			l.workers.wait(f.set)
		}
	}
	l.flying = l.flying[:0]
}

// peek returns the next record read without taking it, as poll would.
func (l *loop) peek() (*Result, bool) {
	if len(l.cur) > 0 {
		return l.cur[0], true
	}
	select {
	case c, ok := <-l.decoded:
		if !ok {
			return nil, true // the input has ended: poll says so again
		}
		l.in, l.cur = c, c
		return c[0], true
	default:
		return nil, false
	}
}

// next waits for the model goroutine's next piece of work: a task (of
// tasks; a nil channel never delivers), else the next record (nil once
// the reader has ended). It reports false once ctx is done. What is ready
// is taken by a priority, ctx, then a task, then a record, each tried
// with a single-case select, the runtime's cheap path; only when none is
// ready does it block on all three.
func (l *loop) next(ctx context.Context, tasks <-chan func(context.Context, Flusher) error) (*Result, func(context.Context, Flusher) error, bool) {
	done := ctx.Done()
	select {
	case <-done:
		return nil, nil, false
	default:
	}
	if task := l.held; task != nil {
		l.held = nil
		return nil, task, true
	}
	select {
	case task := <-tasks:
		return nil, task, true
	default:
	}
	if r, ok := l.poll(); ok {
		return r, nil, true
	}
	// Nothing is read yet: send the writer what was handed on before
	// waiting, so that no output waits for later input.
	if !l.sendOut(ctx) {
		return nil, nil, false
	}
	select {
	case c, ok := <-l.decoded:
		return l.take(c, ok), nil, true
	case task := <-tasks:
		return nil, task, true
	case <-done:
		return nil, nil, false
	}
}

// poll returns the next record read, if there is one, without waiting:
// the next of the current chunk, else the first of the next chunk. It
// reports false when none is read yet, and returns nil once the input has
// ended (and again on every later call).
func (l *loop) poll() (*Result, bool) {
	if len(l.cur) > 0 {
		r := l.cur[0]
		l.cur = l.cur[1:]
		if len(l.cur) == 0 {
			l.recycle(l.in)
			l.in, l.cur = nil, nil
		}
		return r, true
	}
	select {
	case c, ok := <-l.decoded:
		return l.take(c, ok), true
	default:
		return nil, false
	}
}

// take makes c, received from l.decoded (ok false once it is closed), the
// current chunk and returns its first record; nil once the input has
// ended. A chunk is never empty.
func (l *loop) take(c []*Result, ok bool) *Result {
	if !ok {
		return nil
	}
	l.in, l.cur = c, c
	r, _ := l.poll()
	return r
}

// recv receives from c, or reports false once ctx is done (ctx first).
// The common case, ctx live and a value ready, takes the runtime's cheap
// paths (single-case selects), not a blocking select over both: per
// record, that is most of what handing a record between goroutines costs.
func recv[T any](ctx context.Context, c <-chan T) (T, bool) {
	var v T
	done := ctx.Done()
	select {
	case <-done:
		return v, false
	default:
	}
	select {
	case v = <-c:
		return v, true
	default:
	}
	select {
	case v = <-c:
		return v, true
	case <-done:
		return v, false
	}
}

// send sends v on c, or reports false once ctx is done (ctx first), as
// recv receives.
func send[T any](ctx context.Context, c chan<- T, v T) bool {
	done := ctx.Done()
	select {
	case <-done:
		return false
	default:
	}
	select {
	case c <- v:
		return true
	default:
	}
	select {
	case c <- v:
		return true
	case <-done:
		return false
	}
}

// barrier runs the task of barrier r on the model goroutine.
func (l *loop) barrier(ctx context.Context, r *Result) error {
	task := r.task
	r.task, r.spent = nil, true
	l.pending = r // recycled by the writer, in order
	if !l.handOn(ctx) {
		return ctx.Err()
	}
	if err := task(ctx, (*flusher)(l)); err != nil {
		return fmt.Errorf("barrier task: %w", err)
	}
	return nil
}

// finish counts stepped record r, calls Skipped or After on it and hands it
// on, in input order. It reports false when the loop must stop: on an error
// from After, or when ctx was cancelled.
func (l *loop) finish(ctx context.Context, r *Result, opts Options, st *Stats) (bool, error) {
	if r.skip != "" {
		st.Skipped++
		st.SkippedByReason[r.skip]++
		if opts.Skipped != nil {
			opts.Skipped(r.skip)
		}
		l.pending = r // recycled by the writer, in order
		return l.handOn(ctx), nil
	}
	if r.Scored() {
		st.Scored++
		if r.Err != nil {
			st.Numerical++
		}
		if opts.Shadow != nil {
			switch {
			case !r.HasShadow:
				st.ShadowRejected++
			case r.shadowErr != nil:
				st.ShadowNumerical++
			}
		}
	} else {
		st.Rejected++
		if st.FirstRejected == "" && r.Err != nil {
			st.FirstRejected = r.Pos.String() + ": " + r.Err.Error()
		}
		st.ByReason[r.Reason]++
	}
	if r.Emitted {
		st.AlreadyEmitted++
	}
	if r.Event.Shadowed != 0 {
		st.Shadowed = countNamed(st.Shadowed, r.Event.Shadowed, fieldNames[:])
	}
	if r.Event.Unread != 0 {
		st.countUnread(r.Event.Unread)
	}
	if r.Event.Replaced != 0 {
		st.Replaced = countNamed(st.Replaced, r.Event.Replaced, OutputFields)
	}
	if r.Event.TruthUnread {
		st.TruthUnread++
	}
	pos := r.Pos
	l.pending = r
	if opts.After != nil {
		if err := opts.After(ctx, r, (*flusher)(l)); err != nil {
			l.pending = nil
			return false, fmt.Errorf("after record %s: %w", pos, err)
		}
	}
	return l.handOn(ctx), nil
}

// handOn hands the pending record, if any, on to the writer: into the
// chunk being filled, which goes to the writer once full (or when the
// model goroutine waits for input, or flushes). It reports false when ctx
// was cancelled first.
func (l *loop) handOn(ctx context.Context) bool {
	r := l.pending
	if r == nil {
		return true
	}
	l.pending = nil
	l.outBuf = append(l.outBuf, r)
	if len(l.outBuf) >= chunkLen {
		return l.sendOut(ctx)
	}
	return true
}

// sendOut sends the chunk of records handed on, if any, to the writer. It
// reports false when ctx was done first, and keeps the chunk then: a
// Flush whose own deadline passed (a handover's) leaves its records, and
// its marker, to be sent later, in order.
func (l *loop) sendOut(ctx context.Context) bool {
	if len(l.outBuf) == 0 {
		return true
	}
	if !send(ctx, l.out, l.outBuf) {
		return false
	}
	l.outBuf = l.chunk()
	return true
}

// stepRecord steps model, then shadow if set, on record r, which has an
// event to score, and notes the outcome in r (finish counts it). It runs on
// the model goroutine, or on a worker that owns r's partition for the batch.
func stepRecord(model, shadow Model, r *Result) {
	err := model.Step(r.Event.Model(), &r.Score)
	switch {
	case err == nil:
	case errors.Is(err, online.ErrNumerical):
		r.Err = err
	default: // online.ErrInvalidEvent, or anything else the model refuses
		r.Err = &RecordError{Reason: ReasonModelRejected, Msg: err.Error(), Err: err}
		r.Reason = ReasonModelRejected
		return
	}
	if shadow != nil {
		stepShadow(shadow, r)
	}
}

// stepShadow steps shadow on record r, which the main model accepted.
func stepShadow(shadow Model, r *Result) {
	err := shadow.Step(r.Event.Model(), &r.Shadow)
	switch {
	case err == nil:
		r.HasShadow = true
	case errors.Is(err, online.ErrNumerical):
		r.HasShadow, r.shadowErr = true, err
	}
}

// write runs on the writer goroutine. It drains l.out until it is closed,
// then flushes both sinks. After a sink error it stops writing, cancels the
// loop and only recycles what is still in flight.
func (l *loop) write(ctx context.Context, cancel context.CancelFunc) error {
	var failed error
	for c := range l.out {
		results := c[:0] // c's results, which go back to the pool as a chunk
		for _, r := range c {
			if r.flush != nil {
				if failed != nil {
					r.flush <- fmt.Errorf("flush sinks: writer stopped: %w", failed)
				} else {
					r.flush <- l.flush(ctx)
				}
				continue
			}
			results = append(results, r)
			if r.skip != "" || r.spent {
				continue // nothing to write
			}
			if failed == nil && !r.Emitted {
				if r.Scored() {
					if err := l.sink.Write(ctx, r); err != nil {
						failed = fmt.Errorf("write record %s: %w", r.Pos, err)
					}
				} else if err := l.dlq.Reject(ctx, r); err != nil {
					failed = fmt.Errorf("dead-letter record %s: %w", r.Pos, err)
				}
				if failed != nil {
					cancel()
				}
			}
		}
		if len(results) == 0 {
			l.recycle(c)
		} else {
			clear(c[len(results):cap(c)])
			l.free <- results // never blocks: the pool has room for every result
		}
	}
	if failed != nil || ctx.Err() != nil {
		return failed
	}
	return l.flush(ctx)
}

func (l *loop) flush(ctx context.Context) error {
	err := errors.Join(l.sink.Flush(ctx), l.dlq.Flush(ctx))
	if err != nil {
		return fmt.Errorf("flush sinks: %w", err)
	}
	return nil
}

// flusher is the Flusher handed to Options.After.
type flusher loop

// Flush sends a marker after the records handed on so far and waits for
// the writer's answer. Each call has a marker of its own, with room for
// its answer: the writer never waits for a caller that left at its
// deadline, and a later call never takes an earlier call's answer.
func (f *flusher) Flush(ctx context.Context) error {
	l := (*loop)(f)
	if !l.handOn(ctx) {
		return ctx.Err()
	}
	marker := &Result{flush: make(chan error, 1)}
	l.outBuf = append(l.outBuf, marker)
	if !l.sendOut(ctx) {
		return ctx.Err()
	}
	select {
	case err := <-marker.flush:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
