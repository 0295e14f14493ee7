package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"denoiser/consumer/input"
	"denoiser/online"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeModel scores deterministically from a counter, refuses item "refuse"
// and fails numerically on item "nan".
type fakeModel struct {
	steps   int
	stepped atomic.Int64 // steps, for the model goroutine to read while a worker steps the model
	seen    []online.Event
	spin    time.Duration // each step takes at least this long: the reader runs ahead
}

func (m *fakeModel) Step(ev online.Event, sc *online.Score) error {
	if ev.Item == "refuse" {
		return fmt.Errorf("step: %w: no rating", online.ErrInvalidEvent)
	}
	for start := time.Now(); time.Since(start) < m.spin; {
	}
	m.seen = append(m.seen, ev)
	sc.Version = uint64(m.steps)
	sc.PClean = float64(m.steps) / 10
	sc.Reliability = 1
	sc.Label = 1
	sc.Distilled = -1
	sc.Posterior = append(sc.Posterior[:0], 1-sc.PClean, sc.PClean)
	m.steps++
	m.stepped.Add(1)
	if ev.Item == "nan" {
		return fmt.Errorf("step: %w", online.ErrNumerical)
	}
	return nil
}

// memSink records what it receives.
type memSink struct {
	mu       sync.Mutex
	scored   []string // pos + user
	rejected []string // pos + reason
	flushes  int
	failAt   int // fail the n-th write (1-based); 0 never
	writes   int
}

func (s *memSink) Write(_ context.Context, r *Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if s.failAt > 0 && s.writes == s.failAt {
		return errors.New("disk full")
	}
	if !r.Scored() {
		panic("sink got a rejected record")
	}
	s.scored = append(s.scored, fmt.Sprintf("%s %s v%d", r.Pos, r.Event.User, r.Score.Version))
	return nil
}

func (s *memSink) Reject(_ context.Context, r *Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Scored() || r.Err == nil {
		panic("dead-letter got a scored record")
	}
	s.rejected = append(s.rejected, fmt.Sprintf("%s %s", r.Pos, r.Reason))
	return nil
}

func (s *memSink) Flush(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushes++
	return nil
}

const mixed = `{"user":"a","item":"i1"}
not json

{"user":"b"}
{"user":"c","item":"refuse"}
{"user":"d","item":"nan"}
{"user":"e","item":"i2","rating":101}
{"user":"f","item":"i3","dwell_ms":true}
   
{"user":"g","item":"i4"}`

func TestRunRoutesBadRecords(t *testing.T) {
	for _, buf := range []int{1, 2, 256} {
		t.Run(fmt.Sprint("buffer", buf), func(t *testing.T) {
			model := &fakeModel{}
			sink := &memSink{}
			var after []string
			var skipped []SkipReason
			st, err := Run(context.Background(), NewFileSource(strings.NewReader(mixed), "in.jsonl"), model, sink, sink, Options{
				Buffer:  buf,
				Skipped: func(r SkipReason) { skipped = append(skipped, r) },
				After: func(_ context.Context, r *Result, _ Flusher) error {
					after = append(after, fmt.Sprintf("%d:%s", r.Pos.Line, r.Reason))
					return nil
				},
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			wantScored := []string{"in.jsonl:1 a v0", "in.jsonl:6 d v1", "in.jsonl:10 g v2"}
			wantRejected := []string{
				"in.jsonl:2 not_json", "in.jsonl:4 missing_field", "in.jsonl:5 model_rejected",
				"in.jsonl:7 out_of_range", "in.jsonl:8 bad_type",
			}
			if fmt.Sprint(sink.scored) != fmt.Sprint(wantScored) {
				t.Errorf("scored = %q, want %q", sink.scored, wantScored)
			}
			if fmt.Sprint(sink.rejected) != fmt.Sprint(wantRejected) {
				t.Errorf("rejected = %q, want %q", sink.rejected, wantRejected)
			}
			wantAfter := "[1: 2:not_json 4:missing_field 5:model_rejected 6: 7:out_of_range 8:bad_type 10:]"
			if fmt.Sprint(after) != wantAfter {
				t.Errorf("After saw %v, want %s", after, wantAfter)
			}
			want := Stats{Records: 10, Skipped: 2, SkippedByReason: map[SkipReason]uint64{SkipEmpty: 1, SkipBlank: 1},
				Scored: 3, Rejected: 5, Numerical: 1, ByReason: map[Reason]uint64{
					ReasonNotJSON: 1, ReasonMissingField: 1, ReasonModelRejected: 1, ReasonOutOfRange: 1, ReasonBadType: 1,
				}, FirstRejected: "in.jsonl:2: not valid JSON: invalid character 'o' in literal null (expecting 'u') at byte 2"}
			if fmt.Sprint(st) != fmt.Sprint(want) {
				t.Errorf("Stats = %+v, want %+v", st, want)
			}
			if fmt.Sprint(skipped) != "[empty blank]" {
				t.Errorf("Skipped saw %v, want [empty blank]", skipped)
			}
			if sink.flushes != 2 { // sink and dead-letter are the same object here
				t.Errorf("flushes = %d, want 2", sink.flushes)
			}
		})
	}
}

func TestRunShadow(t *testing.T) {
	in := "{\"user\":\"a\",\"item\":\"i\"}\n{\"user\":\"b\",\"item\":\"j\"}\n"
	model, shadow := &fakeModel{}, &fakeModel{steps: 100}
	var got []float64
	_, err := Run(context.Background(), NewFileSource(strings.NewReader(in), "f"), model, &memSink{}, &memSink{}, Options{
		Shadow: shadow,
		After: func(_ context.Context, r *Result, _ Flusher) error {
			if !r.HasShadow {
				t.Errorf("record %s has no shadow score", r.Pos)
			}
			got = append(got, r.Score.PClean, r.Shadow.PClean)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[0 10 0.1 10.1]" {
		t.Fatalf("scores = %v", got)
	}
	if len(shadow.seen) != 2 {
		t.Fatalf("shadow saw %d events", len(shadow.seen))
	}
}

// TestRunBefore: Before sees each record to score before the model steps
// it, in input order; not a record that is not stepped (a bad one).
func TestRunBefore(t *testing.T) {
	in := "{\"user\":\"a\",\"item\":\"i\"}\nnot json\n{\"user\":\"b\",\"item\":\"j\"}\n"
	model := &fakeModel{}
	var got []string
	_, err := Run(context.Background(), NewFileSource(strings.NewReader(in), "f"), model, &memSink{}, &memSink{}, Options{
		Before: func(r *Result) { got = append(got, fmt.Sprintf("%d:%d", r.Pos.Line, len(model.seen))) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1:0 3:1]" { // line:events the model had stepped
		t.Fatalf("Before saw %v", got)
	}
}

func TestRunAfterFlushAndError(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "{\"user\":\"u%d\",\"item\":\"i\"}\n", i)
	}
	// Stop at 35 (record not handed on yet) and at 40 (handed on by Flush).
	for _, stopAt := range []int64{35, 40} {
		sink := &memSink{}
		stop := errors.New("stop here")
		st, err := Run(context.Background(), NewFileSource(strings.NewReader(b.String()), "f"), &fakeModel{}, sink, sink, Options{
			Buffer: 4,
			After: func(ctx context.Context, r *Result, out Flusher) error {
				line := r.Pos.Line
				if line%10 == 0 {
					if err := out.Flush(ctx); err != nil {
						return err
					}
					sink.mu.Lock()
					n := len(sink.scored)
					sink.mu.Unlock()
					// Everything up to and including this record is written.
					if n != int(line) {
						t.Errorf("after flush at line %d the sink has %d records", line, n)
					}
				}
				if line == stopAt {
					return stop
				}
				return nil
			},
		})
		if !errors.Is(err, stop) || !strings.Contains(err.Error(), fmt.Sprintf("f:%d", stopAt)) {
			t.Fatalf("Run error = %v, want %v at f:%d", err, stop, stopAt)
		}
		if st.Scored != uint64(stopAt) {
			t.Fatalf("Scored = %d, want %d", st.Scored, stopAt)
		}
	}
}

func TestRunSinkError(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "{\"user\":\"u%d\",\"item\":\"i\"}\n", i)
	}
	sink := &memSink{failAt: 3}
	_, err := Run(context.Background(), NewFileSource(strings.NewReader(b.String()), "f"), &fakeModel{}, sink, &memSink{}, Options{Buffer: 2})
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "f:3") {
		t.Fatalf("Run error = %v, want the sink error at f:3", err)
	}
}

// endless yields the same good record forever, spread over its partitions
// in turn (one when 0).
type endless struct {
	n          int64
	partitions int64
}

func (e *endless) Next(ctx context.Context) (Message, error) {
	if err := ctx.Err(); err != nil {
		return Message{}, err
	}
	e.n++
	p := e.n % max(e.partitions, 1)
	return Message{Pos: input.Position{Topic: "t", Partition: int32(p), Offset: e.n}, Value: []byte(`{"user":"u","item":"i"}`)}, nil
}

func TestRunCancel(t *testing.T) {
	for _, c := range []struct {
		name       string
		model      Model
		partitions int64
	}{
		{"sequential", &fakeModel{}, 1},
		{"parallel partitions", fakeSet(), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sink := &memSink{}
			done := make(chan error)
			go func() {
				seen := 0
				_, err := Run(ctx, &endless{partitions: c.partitions}, c.model, sink, sink, Options{
					Workers: 2,
					After: func(context.Context, *Result, Flusher) error {
						if seen++; seen == 1000 {
							cancel()
						}
						return nil
					},
				})
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Run error = %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not stop after cancel")
			}
		})
	}
}

// failing yields two records, then a read error.
type failing struct{ n int }

func (f *failing) Next(context.Context) (Message, error) {
	f.n++
	if f.n > 2 {
		return Message{}, io.ErrUnexpectedEOF
	}
	return Message{Pos: input.Position{File: "f", Line: int64(f.n)}, Value: []byte(`{"user":"u","item":"i"}`)}, nil
}

func TestRunReadErrorKeepsWhatWasRead(t *testing.T) {
	sink := &memSink{}
	st, err := Run(context.Background(), &failing{}, &fakeModel{}, sink, sink, Options{})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Run error = %v", err)
	}
	if st.Scored != 2 || len(sink.scored) != 2 || sink.flushes != 2 {
		t.Fatalf("Scored = %d, sink has %d, flushes %d; want 2, 2, 2", st.Scored, len(sink.scored), sink.flushes)
	}
}

type discard struct{}

func (discard) Write(context.Context, *Result) error  { return nil }
func (discard) Reject(context.Context, *Result) error { return nil }
func (discard) Flush(context.Context) error           { return nil }

type constModel struct{}

func (constModel) Step(_ online.Event, sc *online.Score) error {
	sc.Posterior = append(sc.Posterior[:0], 0.5, 0.5)
	return nil
}

// BenchmarkRun measures the loop's own cost per record: reading, decoding,
// hand-offs between goroutines, with a model and sinks that do nothing.
func BenchmarkRun(b *testing.B) {
	var buf strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&buf, "{\"user\":\"u%d\",\"item\":\"i%d\",\"ts\":1700000000000,\"event\":\"click\",\"dwell_ms\":8300,\"truth\":\"genuine\"}\n", i%97, i%1013)
	}
	in := buf.String()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		st, err := Run(context.Background(), NewFileSource(strings.NewReader(in), "f"), constModel{}, discard{}, discard{}, Options{})
		if err != nil || st.Scored != 10000 {
			b.Fatal(st, err)
		}
	}
}

func TestRunTasksRunBetweenRecordsWhileIdle(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	model := &fakeModel{}
	sink := &memSink{}
	tasks := make(chan func(context.Context, Flusher) error)
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), NewFileSource(pr, "in"), model, sink, sink, Options{Tasks: tasks})
		done <- err
	}()
	if _, err := io.WriteString(pw, "{\"user\":\"a\",\"item\":\"i1\"}\n{\"user\":\"b\",\"item\":\"i2\"}\n"); err != nil {
		t.Fatal(err)
	}
	// The input is now idle (the pipe stays open): a task must still run,
	// on the model goroutine, and its Flush must cover both records.
	deadline := time.Now().Add(10 * time.Second)
	for {
		seen := make(chan int, 1)
		tasks <- func(ctx context.Context, out Flusher) error {
			if err := out.Flush(ctx); err != nil {
				return err
			}
			sink.mu.Lock()
			defer sink.mu.Unlock()
			seen <- len(sink.scored)
			return nil
		}
		if n := <-seen; n == 2 {
			if model.steps != 2 {
				t.Fatalf("model stepped %d times when the task ran, want 2", model.steps)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the records never reached the model")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop := errors.New("stop")
	tasks <- func(context.Context, Flusher) error { return stop }
	pw.Close() // a FileSource blocked in a read ignores cancellation
	select {
	case err := <-done:
		if !errors.Is(err, stop) {
			t.Fatalf("Run = %v, want the task's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after a task failed")
	}
}

// TestRunHandsOnWithoutWaitingForInput: records read are handed on in
// chunks (chunkLen), yet none waits for a later record: with the next line
// only half written, every record before it reaches the sink, on the
// sequential path and with parallel partitions.
func TestRunHandsOnWithoutWaitingForInput(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			sink := &memSink{}
			done := make(chan error, 1)
			go func() {
				_, err := Run(context.Background(), NewFileSource(pr, "in"), fakeSet(), sink, sink, Options{Workers: workers})
				done <- err
			}()
			var lines strings.Builder
			for i := range 3 * chunkLen / 2 { // a chunk and a half
				fmt.Fprintf(&lines, "{\"user\":\"u%d\",\"item\":\"i\"}\n", i)
			}
			lines.WriteString(`{"user":"late",`) // the next line, half written
			if _, err := io.WriteString(pw, lines.String()); err != nil {
				t.Fatal(err)
			}
			waitScored := func(n int) {
				t.Helper()
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					sink.mu.Lock()
					got := len(sink.scored)
					sink.mu.Unlock()
					if got == n {
						return
					}
					if got > n || time.Now().After(deadline) {
						t.Fatalf("the sink has %d records, want %d", got, n)
					}
				}
			}
			waitScored(3 * chunkLen / 2)
			if _, err := io.WriteString(pw, "\"item\":\"i\"}\n"); err != nil {
				t.Fatal(err)
			}
			waitScored(3*chunkLen/2 + 1)
			pw.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// chunked is a Source that returns the messages of each slice sent on c,
// Ready within a slice, then io.EOF once c is closed.
type chunked struct {
	c   chan []Message
	cur []Message
}

func (s *chunked) Ready() bool { return len(s.cur) > 0 }

func (s *chunked) Next(ctx context.Context) (Message, error) {
	for len(s.cur) == 0 {
		select {
		case c, ok := <-s.c:
			if !ok {
				return Message{}, io.EOF
			}
			s.cur = c
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
	m := s.cur[0]
	s.cur = s.cur[1:]
	return m, nil
}

// gatedSink is a memSink whose writes wait for gate to be closed; entered
// gets a value as each write starts.
type gatedSink struct {
	memSink
	gate, entered chan struct{}
}

func (s *gatedSink) Write(ctx context.Context, r *Result) error {
	s.entered <- struct{}{}
	<-s.gate
	return s.memSink.Write(ctx, r)
}

// TestRunFlushPastItsDeadlineKeepsTheRecords: a Flush that gives up at its
// own deadline, as a handover's does while the writer is stuck, leaves the
// records handed on before it to be written later, in order (found by a
// review of the chunked hand-offs: they were dropped, and the pool
// shrank).
func TestRunFlushPastItsDeadlineKeepsTheRecords(t *testing.T) {
	rec := func(i int) Message {
		return Message{Pos: input.Position{Topic: "t", Offset: int64(i)}, Value: fmt.Appendf(nil, `{"user":"u%d","item":"i"}`, i)}
	}
	sink := &gatedSink{gate: make(chan struct{}), entered: make(chan struct{}, 8)}
	src := &chunked{c: make(chan []Message)}
	type result struct {
		st  Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := Run(context.Background(), src, &fakeModel{}, sink, sink, Options{Buffer: 1})
		done <- result{st, err}
	}()
	src.c <- []Message{rec(0)}
	<-sink.entered // the writer is stuck on record 0
	// Record 1 alone: the model goroutine sends it on before it waits for
	// input, which fills the channel to the writer (Buffer 1). Were record
	// 2 read before that, the Flush below would find room and the test
	// would pass without testing anything: the pause makes that unlikely.
	src.c <- []Message{rec(1)}
	time.Sleep(50 * time.Millisecond)
	flushed := make(chan error, 1)
	src.c <- []Message{rec(2), {Task: func(ctx context.Context, out Flusher) error {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		flushed <- out.Flush(short)
		return nil // as KafkaSource's handover goes on after its deadline
	}}}
	select {
	case err := <-flushed:
		if err == nil {
			t.Fatal("Flush returned nil while the writer was stuck")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Flush did not return at its deadline")
	}
	close(sink.gate)
	src.c <- []Message{rec(3)}
	close(src.c)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := []string{"t/0@0 u0 v0", "t/0@1 u1 v1", "t/0@2 u2 v2", "t/0@3 u3 v3"}
	if res.st.Scored != 4 || !reflect.DeepEqual(sink.scored, want) {
		t.Fatalf("Scored = %d, the sink has %q; want 4 and %q", res.st.Scored, sink.scored, want)
	}
}

// script is a Source that returns its messages, then io.EOF.
type script []Message

func (s *script) Next(context.Context) (Message, error) {
	if len(*s) == 0 {
		return Message{}, io.EOF
	}
	m := (*s)[0]
	*s = (*s)[1:]
	return m, nil
}

// TestRunBarrier: a message with a Task runs it on the model goroutine in
// input order: after every record read before it has been stepped and
// written, before any read after it.
func TestRunBarrier(t *testing.T) {
	rec := func(i int) Message {
		return Message{Pos: input.Position{Topic: "t", Offset: int64(i)}, Value: fmt.Appendf(nil, `{"user":"u%d","item":"i%d"}`, i, i)}
	}
	model, sink := &fakeModel{}, &memSink{}
	var steps, written []int
	barrier := func(ctx context.Context, out Flusher) error {
		if err := out.Flush(ctx); err != nil {
			return err
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		steps, written = append(steps, model.steps), append(written, len(sink.scored))
		return nil
	}
	src := script{}
	for i := range 600 { // more than the loop's buffers: the barrier must wait for them
		src = append(src, rec(i))
		if i == 299 || i == 599 {
			src = append(src, Message{Task: barrier})
		}
	}
	st, err := Run(context.Background(), &src, model, sink, sink, Options{Buffer: 16})
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 600 || st.Scored != 600 {
		t.Fatalf("stats %+v: want 600 records scored (a barrier is not a record)", st)
	}
	if fmt.Sprint(steps, written) != "[300 600] [300 600]" {
		t.Fatalf("at the barriers the model had stepped %v and the sink held %v records, want [300 600] both", steps, written)
	}

	failing := script{rec(0), {Task: func(context.Context, Flusher) error { return errors.New("no") }}, rec(1)}
	if _, err := Run(context.Background(), &failing, &fakeModel{}, &memSink{}, &memSink{}, Options{}); err == nil || !strings.Contains(err.Error(), "barrier task: no") {
		t.Fatalf("a failing barrier: Run returned %v, want the task's error", err)
	}
}

// stuckSink is memSink with a Flush that cannot finish: its broker is
// gone. It returns when ctx ends.
type stuckSink struct{ memSink }

func (s *stuckSink) Flush(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestRunAbandonedFlushes: a Flush abandoned at its own deadline (a
// handover that ran out of time) and a second Flush after it, both on a
// sink that cannot flush, do not keep Run from returning once it is
// cancelled. Each Flush gets its own answer: the writer never waits for a
// caller that left.
func TestRunAbandonedFlushes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &stuckSink{}
	tasks := make(chan func(context.Context, Flusher) error)
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, &blocking{}, &fakeModel{}, sink, sink, Options{Tasks: tasks})
		done <- err
	}()
	flushed := make(chan error, 2)
	tasks <- func(ctx context.Context, out Flusher) error {
		short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		defer stop()
		flushed <- out.Flush(short)
		return nil
	}
	if err := <-flushed; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first Flush = %v, want its deadline", err)
	}
	tasks <- func(ctx context.Context, out Flusher) error {
		flushed <- out.Flush(ctx)
		return nil
	}
	time.Sleep(50 * time.Millisecond) // the second Flush waits for the writer
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel: the writer waits to answer a Flush nobody waits for")
	}
	if err := <-flushed; !errors.Is(err, context.Canceled) {
		t.Fatalf("second Flush = %v, want context.Canceled", err)
	}
}

// blocking is a Source with nothing to read: Next waits for ctx.
type blocking struct{}

func (blocking) Next(ctx context.Context) (Message, error) {
	<-ctx.Done()
	return Message{}, ctx.Err()
}

func TestStatsAdd(t *testing.T) {
	var sum Stats
	a := Stats{Records: 5, Skipped: 1, Scored: 3, Rejected: 1, AlreadyEmitted: 1, Numerical: 2, ShadowRejected: 1, ShadowNumerical: 1,
		SkippedByReason: map[SkipReason]uint64{"blank": 1}, ByReason: map[Reason]uint64{"not_json": 1}}
	b := Stats{Records: 2, Scored: 1, Rejected: 1, ByReason: map[Reason]uint64{"not_json": 1}}
	sum.Add(a)
	sum.Add(b)
	want := Stats{Records: 7, Skipped: 1, Scored: 4, Rejected: 2, AlreadyEmitted: 1, Numerical: 2, ShadowRejected: 1, ShadowNumerical: 1,
		SkippedByReason: map[SkipReason]uint64{"blank": 1}, ByReason: map[Reason]uint64{"not_json": 2}}
	if !reflect.DeepEqual(sum, want) {
		t.Fatalf("sum %+v, want %+v", sum, want)
	}
	if a.ByReason["not_json"] != 1 {
		t.Fatal("Add changed its argument's counts")
	}
}
