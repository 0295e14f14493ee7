package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"denoiser/consumer/input"
	"denoiser/internal/synth"
	"denoiser/online"
	"denoiser/online/onlinetest"
)

// partitionSet is a Partitioned made of one model per partition, created
// by newModel on first use.
type partitionSet struct {
	newModel func(p int32) Model
	models   map[int32]Model
}

func newPartitionSet(newModel func(p int32) Model) *partitionSet {
	return &partitionSet{newModel: newModel, models: map[int32]Model{}}
}

func (s *partitionSet) Step(online.Event, *online.Score) error {
	panic("Run stepped the set instead of a partition's model")
}

func (s *partitionSet) For(p int32) Model {
	m := s.models[p]
	if m == nil {
		m = s.newModel(p)
		s.models[p] = m
	}
	return m
}

// steps is the number of events the fake models of s have learned from.
func (s *partitionSet) steps() int {
	n := 0
	for _, m := range s.models {
		n += int(m.(*fakeModel).stepped.Load())
	}
	return n
}

func fakeSet() *partitionSet {
	return newPartitionSet(func(int32) Model { return &fakeModel{} })
}

// messages is a Source of fixed messages. hook, if set, is called on the
// reader goroutine before message i is returned.
type messages struct {
	msgs []Message
	next int
	hook func(i int)
}

// Ready lets Run's reader hand the messages on in chunks, unless a hook
// times them one by one.
func (s *messages) Ready() bool { return s.hook == nil && s.next < len(s.msgs) }

func (s *messages) Next(ctx context.Context) (Message, error) {
	if err := ctx.Err(); err != nil {
		return Message{}, err
	}
	if s.next == len(s.msgs) {
		return Message{}, io.EOF
	}
	if s.hook != nil {
		s.hook(s.next)
	}
	s.next++
	return s.msgs[s.next-1], nil
}

// spread lays lines out over partitions as a Kafka source returns them: a
// line goes to the partition its user hashes to (a line without a user to
// partition 0), and the partitions' records come interleaved in runs of 1
// to 13, as fetches of different partitions arrive.
func spread(lines [][]byte, partitions int) []Message {
	queues := make([][][]byte, partitions)
	for _, l := range lines {
		var ev Event
		p := 0
		if Decode(l, &ev) == nil {
			h := fnv.New32a()
			h.Write([]byte(ev.User))
			p = int(h.Sum32() % uint32(partitions))
		}
		queues[p] = append(queues[p], l)
	}
	var out []Message
	offsets := make([]int64, partitions)
	for turn := 0; len(out) < len(lines); turn++ {
		p := turn % partitions
		run := min(1+turn*7%13, len(queues[p]))
		for _, l := range queues[p][:run] {
			out = append(out, Message{Pos: input.Position{Topic: "clicks", Partition: int32(p), Offset: offsets[p]}, Value: l, Null: l == nil})
			offsets[p]++
		}
		queues[p] = queues[p][run:]
	}
	return out
}

// transcript is everything Run shows of one run, in the order it shows it.
type transcript struct {
	after, sink, skipped []string
	stats                Stats
}

// runTranscript runs msgs through model (and shadow) and records the
// transcript.
func runTranscript(t *testing.T, msgs []Message, model, shadow Model, workers, buffer int) transcript {
	t.Helper()
	return runTranscriptWith(t, msgs, model, Options{Workers: workers, Buffer: buffer, Shadow: shadow})
}

// runTranscriptWith is runTranscript with opts (their Skipped and After
// are the transcript's).
func runTranscriptWith(t *testing.T, msgs []Message, model Model, opts Options) transcript {
	t.Helper()
	var tr transcript
	sink := &memSink{}
	opts.Skipped = func(r SkipReason) { tr.skipped = append(tr.skipped, string(r)) }
	opts.After = func(_ context.Context, r *Result, _ Flusher) error {
		line := fmt.Sprintf("%s %s %v", r.Pos, r.Reason, r.Score)
		if r.HasShadow {
			line += fmt.Sprintf(" shadow %v", r.Shadow)
		}
		tr.after = append(tr.after, line)
		return nil
	}
	st, err := Run(context.Background(), &messages{msgs: msgs}, model, sink, sink, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	tr.stats = st
	tr.sink = append(append(tr.sink, sink.scored...), sink.rejected...)
	return tr
}

func (tr transcript) diff(want transcript) string {
	for _, c := range []struct {
		name      string
		got, want []string
	}{{"After", tr.after, want.after}, {"sink", tr.sink, want.sink}, {"Skipped", tr.skipped, want.skipped}} {
		if len(c.got) != len(c.want) {
			return fmt.Sprintf("%s saw %d records, want %d", c.name, len(c.got), len(c.want))
		}
		for i := range c.got {
			if c.got[i] != c.want[i] {
				return fmt.Sprintf("%s record %d:\n got %s\nwant %s", c.name, i, c.got[i], c.want[i])
			}
		}
	}
	if fmt.Sprint(tr.stats) != fmt.Sprint(want.stats) {
		return fmt.Sprintf("Stats = %+v, want %+v", tr.stats, want.stats)
	}
	return ""
}

// onlineConfig is the model configuration the service runs by default,
// refitting early (onlinetest.QuickDefaults), so that a short stream goes
// through warm-up, distillation, mixture refits and the instruments.
var onlineConfig = onlinetest.QuickDefaults()

func onlineSet(t testing.TB, cfg online.Config, seed uint64) *partitionSet {
	return newPartitionSet(func(p int32) Model {
		m, err := online.NewPartition(cfg, seed, p)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// synthLines returns n generated event lines.
func synthLines(t testing.TB, n int, seed uint64) [][]byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := synth.Write(context.Background(), &buf, synth.Config{Events: n, Noise: 0.2, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
}

// TestRunPartitionsAsAlone checks that parallel stepping changes nothing
// but speed: with real models, one per partition, every partition's scores
// are bit for bit those of its model stepped alone on its events, and
// After, the sinks, Skipped and Stats see exactly what the sequential path
// shows, whatever the number of workers and the batch size.
func TestRunPartitionsAsAlone(t *testing.T) {
	lines := synthLines(t, 3000, 7)
	for i := 50; i < len(lines); i += 97 { // bad records and blanks among them
		lines[i] = []byte(`{"user":"x`)
		lines[i+1] = []byte("  ")
		lines[i+2] = nil // a tombstone
	}
	msgs := spread(lines, 3)
	const seed = 11
	plain := onlineConfig
	plain.Plain = true

	// The reference: each partition's model, and the shadows, stepped alone.
	var alone transcript
	{
		models, shadows := onlineSet(t, onlineConfig, seed), onlineSet(t, plain, seed+1)
		for _, m := range msgs {
			var ev Event
			if len(bytes.TrimSpace(m.Value)) == 0 || Decode(m.Value, &ev) != nil {
				continue
			}
			var sc, sh online.Score
			if err := models.For(m.Pos.Partition).Step(ev.Model(), &sc); err != nil && !errors.Is(err, online.ErrNumerical) {
				t.Fatal(err)
			}
			if err := shadows.For(m.Pos.Partition).Step(ev.Model(), &sh); err != nil && !errors.Is(err, online.ErrNumerical) {
				t.Fatal(err)
			}
			alone.after = append(alone.after, fmt.Sprintf("%s  %v shadow %v", m.Pos, sc, sh))
		}
	}

	base := runTranscript(t, msgs, onlineSet(t, onlineConfig, seed), onlineSet(t, plain, seed+1), 1, 0)
	var scored []string
	for _, l := range base.after {
		if !strings.Contains(l, " not_json ") {
			scored = append(scored, l)
		}
	}
	if fmt.Sprint(scored) != fmt.Sprint(alone.after) {
		t.Fatal("the sequential path's scores differ from the partitions' models stepped alone")
	}
	if base.stats.Scored != uint64(len(alone.after)) || base.stats.Rejected == 0 || base.stats.Skipped == 0 {
		t.Fatalf("Stats = %+v: want %d scored and some rejected and skipped", base.stats, len(alone.after))
	}
	for _, workers := range []int{2, 4} {
		for _, buffer := range []int{1, 5, 256} {
			t.Run(fmt.Sprintf("workers%d/buffer%d", workers, buffer), func(t *testing.T) {
				got := runTranscript(t, msgs, onlineSet(t, onlineConfig, seed), onlineSet(t, plain, seed+1), workers, buffer)
				if d := got.diff(base); d != "" {
					t.Fatal(d)
				}
			})
		}
	}
}

// mixedKafka is the records of mixed, laid out over 3 partitions.
func mixedKafka() []Message {
	var lines [][]byte
	for range 20 {
		for l := range strings.SplitSeq(mixed, "\n") {
			lines = append(lines, []byte(l))
		}
	}
	return spread(lines, 3)
}

// sharedSet is a Partitioned whose even partitions share one model, as a
// member's single model is every partition's.
func sharedSet() *partitionSet {
	even := &fakeModel{}
	return newPartitionSet(func(p int32) Model {
		if p%2 == 0 {
			return even
		}
		return &fakeModel{}
	})
}

// TestRunPartitionsShadowAndRejects covers what the real models do not
// produce: refused events, numerical failures, partitions that share a
// model, and shadows (one per partition, shared, or not Partitioned:
// stepped on the model goroutine in input order). The transcript must be
// the sequential path's.
func TestRunPartitionsShadowAndRejects(t *testing.T) {
	msgs := mixedKafka()
	for _, c := range []struct {
		name          string
		model, shadow func() Model
	}{
		{"no shadow", func() Model { return fakeSet() }, func() Model { return nil }},
		{"partitioned shadow", func() Model { return fakeSet() }, func() Model { return fakeSet() }},
		{"one shadow", func() Model { return fakeSet() }, func() Model { return &fakeModel{steps: 500} }},
		{"shared models", func() Model { return sharedSet() }, func() Model { return sharedSet() }},
		{"one model for all", func() Model {
			one := &fakeModel{}
			return newPartitionSet(func(int32) Model { return one })
		}, func() Model { return fakeSet() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := runTranscript(t, msgs, c.model(), c.shadow(), 1, 0)
			if base.stats.Numerical == 0 || base.stats.ByReason[ReasonModelRejected] == 0 {
				t.Fatalf("Stats = %+v: want numerical failures and refused events", base.stats)
			}
			for _, workers := range []int{2, 3} {
				for _, buffer := range []int{1, 4, 256} {
					got := runTranscript(t, msgs, c.model(), c.shadow(), workers, buffer)
					if d := got.diff(base); d != "" {
						t.Fatalf("workers %d, buffer %d: %s", workers, buffer, d)
					}
				}
			}
		})
	}
}

// TestRunPartitionsBefore: with parallel partitions, Before sees each
// record that its partition's model steps, just before the step, and the
// records of a partition in their input order, as on the sequential path;
// not a record that is not stepped (a bad one, a refused one is).
func TestRunPartitionsBefore(t *testing.T) {
	msgs := mixedKafka()
	run := func(workers, buffer int) map[int32][]string {
		var mu sync.Mutex // different partitions' calls come at the same time
		models := map[int32]*fakeModel{}
		set := newPartitionSet(func(p int32) Model {
			m := &fakeModel{}
			mu.Lock()
			models[p] = m
			mu.Unlock()
			return m
		})
		seen := map[int32][]string{}
		before := func(r *Result) {
			p := PartitionOf(r.Pos)
			mu.Lock()
			defer mu.Unlock()
			seen[p] = append(seen[p], fmt.Sprintf("%d:%d", r.Pos.Offset, models[p].stepped.Load()))
		}
		runTranscriptWith(t, msgs, set, Options{Workers: workers, Buffer: buffer, Before: before})
		return seen
	}
	base := run(1, 0)
	if len(base) != 3 {
		t.Fatalf("Before saw the records of %d partitions, want 3", len(base))
	}
	for p, calls := range base {
		prev := -1 // the model's steps at the call before: each call comes after the one step between (none for a refused event)
		for i, c := range calls {
			_, s, _ := strings.Cut(c, ":")
			if steps, _ := strconv.Atoi(s); steps != prev+1 && !(i > 0 && steps == prev) || i == 0 && steps != 0 {
				t.Fatalf("partition %d: call %d saw %s after %d steps at the call before", p, i, c, prev)
			} else {
				prev = steps
			}
		}
	}
	for _, workers := range []int{2, 3} {
		for _, buffer := range []int{1, 4, 256} {
			if got := run(workers, buffer); !reflect.DeepEqual(got, base) {
				t.Fatalf("workers %d, buffer %d: Before saw %v, the sequential path %v", workers, buffer, got, base)
			}
		}
	}
}

// TestRunPartitionsFileIsOnePartition checks that the records of a file
// all go to the model of partition 0.
func TestRunPartitionsFileIsOnePartition(t *testing.T) {
	set := fakeSet()
	st, err := Run(context.Background(), NewFileSource(strings.NewReader(mixed), "in.jsonl"), set, &memSink{}, &memSink{}, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.models) != 1 || set.models[0] == nil || set.steps() != int(st.Scored) {
		t.Fatalf("models %v stepped %d events; want partition 0's only, %d", set.models, set.steps(), st.Scored)
	}
}

// TestRunPartitionsBarriersAndBatchEnd checks the ordering promises with
// parallel partitions: a barrier runs after every earlier record was
// stepped and handed on and before any later one is stepped; a task of
// Options.Tasks runs between batches, when every record stepped has been
// through After; After sees r.BatchEnd exactly when no later record has
// been stepped; Flush covers every record up to r.
func TestRunPartitionsBarriersAndBatchEnd(t *testing.T) {
	var lines [][]byte
	for i := range 600 {
		lines = append(lines, fmt.Appendf(nil, `{"user":"u%d","item":"i%d"}`, i, i%7))
	}
	msgs := spread(lines, 3)
	set, sink := fakeSet(), &memSink{}
	var afterSeen, barriers, tasksRun, batchEnds int
	// check runs on the model goroutine between records; before is the
	// number of records before it in the input, -1 when not known.
	check := func(ctx context.Context, out Flusher, what string, before int) error {
		if set.steps() != afterSeen || before >= 0 && afterSeen != before {
			t.Errorf("%s after %d records: the models stepped %d records, After saw %d", what, before, set.steps(), afterSeen)
		}
		if err := out.Flush(ctx); err != nil {
			return err
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.scored) != afterSeen {
			t.Errorf("%s: after Flush the sink has %d records, want %d", what, len(sink.scored), afterSeen)
		}
		return nil
	}
	for i := len(msgs) - 50; i > 0; i -= 97 {
		barrier := Message{Task: func(ctx context.Context, out Flusher) error {
			barriers++
			return check(ctx, out, "barrier", i)
		}}
		msgs = append(msgs[:i], append([]Message{barrier}, msgs[i:]...)...)
	}
	// The source pauses twice until a task has run: the model goroutine
	// runs it once it has processed every record read so far. And After
	// holds the first record until the reader has read 60 more, so that
	// the next batch is a full one.
	tasks := make(chan func(context.Context, Flusher) error, 1)
	reached := make(chan struct{})
	src := &messages{msgs: msgs, hook: func(i int) {
		switch i {
		case 60:
			close(reached)
		case 300, 450:
			ran := make(chan struct{})
			tasks <- func(ctx context.Context, out Flusher) error {
				defer close(ran)
				tasksRun++
				return check(ctx, out, "task", -1)
			}
			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Error("the task did not run while the input paused")
			}
		}
	}}
	_, err := Run(context.Background(), src, set, sink, sink, Options{
		Workers: 3, Buffer: 64, Tasks: tasks,
		After: func(ctx context.Context, r *Result, out Flusher) error {
			if afterSeen++; afterSeen == 1 {
				select {
				case <-reached:
				case <-time.After(10 * time.Second):
					t.Error("the reader did not read ahead")
				}
			}
			if r.BatchEnd {
				batchEnds++
				if set.steps() != afterSeen {
					t.Errorf("After at %s, the end of a batch: the models stepped %d records, want %d", r.Pos, set.steps(), afterSeen)
				}
			} else if set.steps() < afterSeen {
				// The next batch may or may not have begun to step.
				t.Errorf("After at %s, inside a batch: the models stepped %d records, want at least %d", r.Pos, set.steps(), afterSeen)
			}
			if afterSeen%50 == 0 {
				if err := out.Flush(ctx); err != nil {
					return err
				}
				sink.mu.Lock()
				defer sink.mu.Unlock()
				if len(sink.scored) != afterSeen {
					t.Errorf("after Flush at %s the sink has %d records, want %d", r.Pos, len(sink.scored), afterSeen)
				}
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if afterSeen != len(lines) || barriers != 6 || tasksRun != 2 {
		t.Fatalf("After saw %d records, %d barriers and %d tasks ran; want %d, 6, 2", afterSeen, barriers, tasksRun, len(lines))
	}
	if batchEnds >= afterSeen-50 {
		t.Fatalf("%d batches for %d records: the records were not stepped in batches", batchEnds, afterSeen)
	}
	t.Logf("%d records in %d batches", afterSeen, batchEnds)
}

// TestRunPartitionsDrain reads a backlog (each step takes 20 µs), where a
// batch starts while the one before is still being stepped, so that
// records seldom end a batch:
// Options.Drain asks for a batch end once 100 records will have come
// when the batches in flight are done, and After sees one no later than
// one batch after the 100th (Drain is asked before each batch, with the
// records in flight), each with the models exactly at its record.
func TestRunPartitionsDrain(t *testing.T) {
	var lines [][]byte
	for i := range 3000 {
		lines = append(lines, fmt.Appendf(nil, `{"user":"u%d","item":"i%d"}`, i, i%7))
	}
	const buffer, every = 32, 100
	run := func(drain bool) (ends, longest int) {
		set := newPartitionSet(func(int32) Model { return &fakeModel{spin: 20 * time.Microsecond} })
		seen, last := 0, 0
		opts := Options{Workers: 2, Buffer: buffer, After: func(_ context.Context, r *Result, _ Flusher) error {
			seen++
			if r.BatchEnd {
				if set.steps() != seen {
					t.Errorf("After at %s, the end of a batch: the models stepped %d records, want %d", r.Pos, set.steps(), seen)
				}
				ends, longest, last = ends+1, max(longest, seen-last), seen
			}
			return nil
		}}
		if drain {
			opts.Drain = func(ahead int) bool { return seen+ahead-last >= every }
		}
		st, err := Run(context.Background(), &messages{msgs: spread(lines, 3)}, set, discard{}, discard{}, opts)
		if err != nil || st.Scored != uint64(len(lines)) {
			t.Fatal(st, err)
		}
		return ends, max(longest, seen-last)
	}
	ends, longest := run(true)
	t.Logf("with Drain: %d batch ends, at most %d records apart", ends, longest)
	if bound := every + buffer; longest > bound {
		t.Errorf("with Drain every %d records, batch ends came %d records apart, want at most %d", every, longest, bound)
	}
	if ends < len(lines)/(every+buffer) {
		t.Errorf("with Drain every %d records, %d batch ends in %d records", every, ends, len(lines))
	}
	// Without Drain the ends come where the reader falls behind: 8–14
	// ends, at most 576–1,248 records apart, in six runs here, so the
	// bounds fail without Drain.
	ends, longest = run(false)
	t.Logf("without: %d batch ends, at most %d records apart", ends, longest)
	if longest <= every+buffer {
		t.Errorf("without Drain, batch ends came at most %d records apart: did a batch stay in flight while the next began?", longest)
	}
}

// TestRunPartitionsTaskInBacklog sends a task while a backlog keeps
// batches in flight: the loop holds it, lands the batches and runs it
// with every model at rest, within batchDepth batches.
func TestRunPartitionsTaskInBacklog(t *testing.T) {
	var lines [][]byte
	for i := range 3000 {
		lines = append(lines, fmt.Appendf(nil, `{"user":"u%d","item":"i%d"}`, i, i%7))
	}
	const buffer, at = 32, 500
	set := newPartitionSet(func(int32) Model { return &fakeModel{spin: 20 * time.Microsecond} })
	tasks := make(chan func(context.Context, Flusher) error, 1)
	seen, ranAt := 0, -1
	_, err := Run(context.Background(), &messages{msgs: spread(lines, 3)}, set, discard{}, discard{}, Options{
		Workers: 2, Buffer: buffer, Tasks: tasks,
		After: func(context.Context, *Result, Flusher) error {
			if seen++; seen == at {
				tasks <- func(context.Context, Flusher) error {
					ranAt = seen
					if set.steps() != seen {
						t.Errorf("the task ran after %d records with the models at %d", seen, set.steps())
					}
					return nil
				}
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent after %d records, ran after %d", at, ranAt)
	if ranAt < at || ranAt > at+batchDepth*buffer {
		t.Fatalf("a task sent after %d records ran after %d, want by %d", at, ranAt, at+batchDepth*buffer)
	}
}

// TestRunPartitionsStopInBatch stops the loop from After inside a batch:
// the records after it are not counted nor handed on, and the workers
// exit (goleak in TestMain).
func TestRunPartitionsStopInBatch(t *testing.T) {
	var lines [][]byte
	for i := range 400 {
		lines = append(lines, fmt.Appendf(nil, `{"user":"u%d","item":"i"}`, i))
	}
	stop := errors.New("stop here")
	sink := &memSink{}
	seen := 0
	st, err := Run(context.Background(), &messages{msgs: spread(lines, 2)}, fakeSet(), sink, sink, Options{
		Workers: 2, Buffer: 64,
		After: func(_ context.Context, r *Result, _ Flusher) error {
			if seen++; seen == 150 {
				return stop
			}
			return nil
		},
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Run error = %v, want %v", err, stop)
	}
	if st.Scored != 150 || len(sink.scored) != 149 {
		t.Fatalf("Scored = %d, the sink has %d; want 150 and 149", st.Scored, len(sink.scored))
	}
}

// TestRunPartitionsAllocateNothingPerRecord checks that the parallel path
// allocates nothing per record beyond what the sequential path does
// (decoding): only per run (workers, lanes, batches, the pool of results,
// which is larger with a second batch in flight). So it compares the
// allocations of two runs, of 20,000 and 40,000 records, on each path.
func TestRunPartitionsAllocateNothingPerRecord(t *testing.T) {
	var lines [][]byte
	for i := range 40000 {
		lines = append(lines, fmt.Appendf(nil, `{"user":"u%d","item":"i%d"}`, i%97, i%1013))
	}
	allocs := func(model Model, workers, n int) float64 {
		msgs := spread(lines[:n], 4)
		return testing.AllocsPerRun(3, func() {
			st, err := Run(context.Background(), &messages{msgs: msgs}, model, discard{}, discard{}, Options{Workers: workers})
			if err != nil || st.Scored != uint64(len(msgs)) {
				t.Fatal(st, err)
			}
		})
	}
	set := newPartitionSet(func(int32) Model { return constModel{} })
	sequential := allocs(constModel{}, 1, 40000) - allocs(constModel{}, 1, 20000)
	parallel := allocs(set, 4, 40000) - allocs(set, 4, 20000)
	t.Logf("allocations of 20,000 more records: sequential %.0f, parallel %.0f", sequential, parallel)
	if extra := parallel - sequential; extra > 200 {
		t.Fatalf("the parallel path allocated %.0f more times than the sequential one for 20,000 more records", extra)
	}
}

// TestRunPartitionsModelOnlyForEvents: records are decoded on their
// partition's lane, yet a partition gets a model (For) only once it has a
// record that decodes, as on the sequential path: a partition of bad
// records only makes none, and a partition whose good records come after
// bad ones gets its model then.
func TestRunPartitionsModelOnlyForEvents(t *testing.T) {
	var msgs []Message
	offsets := make([]int64, 3)
	add := func(p int32, value string) {
		msgs = append(msgs, Message{Pos: input.Position{Topic: "t", Partition: p, Offset: offsets[p]}, Value: []byte(value)})
		offsets[p]++
	}
	for i := range 900 {
		add(0, fmt.Sprintf(`{"user":"u%d","item":"i%d"}`, i%13, i%31))
		add(1, `{"user":"u"`) // never an event: not JSON
		if i%2 == 0 {
			add(1, `{"item":"i"}`) // missing user
		}
		if i < 600 {
			add(2, `[1]`)
		} else {
			add(2, fmt.Sprintf(`{"user":"v%d","item":"i"}`, i))
		}
	}
	for _, workers := range []int{1, 2, 3} {
		for _, buffer := range []int{1, 7, 256} {
			set := fakeSet()
			st, err := Run(context.Background(), &messages{msgs: msgs}, set, discard{}, discard{}, Options{Workers: workers, Buffer: buffer})
			if err != nil {
				t.Fatal(err)
			}
			if st.Scored != 1200 || st.Rejected != 900+450+600 || st.ByReason[ReasonNotJSON] != 900 || st.ByReason[ReasonMissingField] != 450 || st.ByReason[ReasonBadType] != 600 {
				t.Fatalf("workers %d, buffer %d: %+v", workers, buffer, st)
			}
			if _, ok := set.models[1]; ok || len(set.models) != 2 || set.steps() != 1200 {
				t.Fatalf("workers %d, buffer %d: models of partitions %v (%d steps), want 0 and 2 only", workers, buffer, keysOf(set.models), set.steps())
			}
		}
	}
}

func keysOf(m map[int32]Model) []int32 {
	var keys []int32
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// TestRunPartitionsFields: records whose fields have other names, read
// with Options.Fields, score as the same records in the event format's
// names, on the sequential path and with partitions stepped in parallel
// (whose lanes decode with their own Decoders).
func TestRunPartitionsFields(t *testing.T) {
	msgs := spread(synthLines(t, 3000, 7), 3)
	renamed := slices.Clone(msgs) // the same records at the same positions
	for i := range renamed {
		r := bytes.Replace(msgs[i].Value, []byte(`"user":`), []byte(`"user_id":`), 1)
		r = bytes.Replace(r, []byte(`"item":`), []byte(`"item_id":`), 1)
		renamed[i].Value = bytes.Replace(r, []byte(`"ts":`), []byte(`"timestamp":`), 1)
	}
	if !bytes.Contains(renamed[0].Value, []byte(`"timestamp":`)) || !bytes.Contains(renamed[0].Value, []byte(`"user_id":`)) {
		t.Fatalf("not renamed: %s", renamed[0].Value)
	}
	const seed = 11
	base := runTranscript(t, msgs, onlineSet(t, onlineConfig, seed), nil, 1, 0)
	fields := Fields{User: "user_id", Item: "item_id", TS: "timestamp"}
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers%d", workers), func(t *testing.T) {
			got := runTranscriptWith(t, renamed, onlineSet(t, onlineConfig, seed), Options{Workers: workers, Buffer: 16, Fields: fields})
			if fmt.Sprint(got.after) != fmt.Sprint(base.after) || got.stats.Scored != base.stats.Scored || got.stats.Scored == 0 {
				t.Fatalf("%d scored with Fields, %d without; the scores differ: %v", got.stats.Scored, base.stats.Scored, fmt.Sprint(got.after) != fmt.Sprint(base.after))
			}
		})
	}
	without := runTranscript(t, renamed, onlineSet(t, onlineConfig, seed), nil, 2, 16)
	if without.stats.Scored != 0 || without.stats.Unread["user_id"] != uint64(len(msgs)) || without.stats.Unread["timestamp"] != uint64(len(msgs)) {
		t.Errorf("without Fields: %d scored, unread %v", without.stats.Scored, without.stats.Unread)
	}
	// The records in the event format's names, read with those Fields,
	// lack the members named and carry the fields' own names: each is
	// counted as shadowed, across the parallel lanes (Stats.Add).
	shadow := runTranscriptWith(t, msgs, onlineSet(t, onlineConfig, seed), Options{Workers: 2, Buffer: 16, Fields: fields})
	if n := uint64(len(msgs)); shadow.stats.Scored != 0 || shadow.stats.Shadowed["user"] != n || shadow.stats.Shadowed["item"] != n || shadow.stats.Shadowed["ts"] != n {
		t.Errorf("event format's names read with Fields: %d scored, shadowed %v", shadow.stats.Scored, shadow.stats.Shadowed)
	}
}
