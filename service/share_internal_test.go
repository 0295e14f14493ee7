package service

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/state"
)

// TestSharerMergesOnArrival: a delta read back is merged at the end of
// the next batch that its model stepped in, not only at the member's next
// publication (every Sharing.EveryEvents records or Interval), and the
// merge is recorded as a merge point where the model stood. Not in the
// middle of a batch (records stepped in parallel), and not by a model that
// did not step since its last merge point.
func TestSharerMergesOnArrival(t *testing.T) {
	set, m0 := partitionModel(t, 0)
	met, err := newMetrics(prometheus.NewRegistry(), noLag{})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	s := newSharer(set, func(p int32) int64 { return next }, time.Hour, 1<<30, 0, met, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(ctx context.Context) (sharedLog, error) { <-ctx.Done(); return nil, ctx.Err() }, time.Second)
	t.Cleanup(func() { s.stop(); s.wg.Wait() })
	s.track(0, m0)

	// Partition 1's model, of another member, publishes its deltas.
	delta := otherPartition(t, 20, 3)
	var sc online.Score
	step := func() {
		t.Helper()
		if err := m0.Step(online.Event{User: fmt.Sprint("u", next%7), Item: fmt.Sprint("i", next%5)}, &sc); err != nil {
			t.Fatal(err)
		}
		next++
	}
	step()
	s.record(true)
	points := func() int { t.Helper(); return len(s.out) }
	if points() != 0 {
		t.Fatalf("%d records queued with nothing read back", points())
	}

	// A delta of partition 1 arrives (the reader's add).
	s.add(0, nil, delta(0, 40))
	step()
	s.record(false) // mid-batch: no merge
	if got := m0.Merged(1); got >= 0 {
		t.Fatalf("merged partition 1 up to %d in the middle of a batch", got)
	}
	s.record(true)
	if got := m0.Merged(1); got != 40 {
		t.Fatalf("cursor of partition 1 at %d after the batch's end, want 40", got)
	}
	if points() != 1 {
		t.Fatalf("%d records queued, want a merge point", points())
	}
	mp, err := parseMergePoint((<-s.out)[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if mp.k != 0 || mp.at != next || len(mp.ids) != 1 || mp.ids[0].q != 1 || mp.ids[0].seq != 40 {
		t.Fatalf("merge point at %d of %v, want at %d of partition 1's delta 40", mp.at, mp.ids, next)
	}

	// A model that did not step since its last merge point waits for its
	// next record.
	s.add(1, nil, delta(40, 80))
	s.record(true)
	if got := m0.Merged(1); got != 40 {
		t.Fatalf("merged up to %d without a step since the last merge point", got)
	}
	step()
	s.record(true)
	if got := m0.Merged(1); got != 80 {
		t.Fatalf("cursor of partition 1 at %d after the next step, want 80", got)
	}
}

// partitionModel is a new set of partition models and its model of p.
func partitionModel(t *testing.T, p int32) (*online.Set, *online.Model) {
	t.Helper()
	set, err := online.NewSet(online.DefaultConfig(), 1, online.LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	m, err := set.For(p)
	if err != nil {
		t.Fatal(err)
	}
	return set, m
}

// otherPartition returns a function that steps partition 1's model (of
// another member, writer 9) on steps events of its users u mod users,
// then returns its publication from..seq as the shared topic holds it.
func otherPartition(t *testing.T, steps, users int) func(from, seq int64) []byte {
	t.Helper()
	_, m := partitionModel(t, 1)
	m.StartSharing()
	var sc online.Score
	return func(from, seq int64) []byte {
		t.Helper()
		for i := range steps {
			if err := m.Step(online.Event{User: fmt.Sprint("v", i%users), Item: fmt.Sprint("i", i%9)}, &sc); err != nil {
				t.Fatal(err)
			}
		}
		w := &sharer{writer: 9}
		if err := m.Publish(&w.pub); err != nil {
			t.Fatal(err)
		}
		recs, err := w.records(1, from, seq)
		if err != nil || len(recs) != 1 {
			t.Fatalf("records: %v, %d", err, len(recs))
		}
		return recs[0].Value
	}
}

// offlineSharer is a sharer of a new set of partition models that
// publishes every `every` records and whose shared topic never opens.
func offlineSharer(t *testing.T, every int) (*online.Set, *sharer) {
	t.Helper()
	set, err := online.NewSet(online.DefaultConfig(), 1, online.LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	met, err := newMetrics(prometheus.NewRegistry(), noLag{})
	if err != nil {
		t.Fatal(err)
	}
	s := newSharer(set, func(int32) int64 { return 0 }, time.Hour, every, 0, met, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(ctx context.Context) (sharedLog, error) { <-ctx.Done(); return nil, ctx.Err() }, time.Second)
	t.Cleanup(func() { s.stop(); s.wg.Wait() })
	return set, s
}

// TestSharerDueCountsAhead: the sharer asks for a batch end
// (consumer.Options.Drain) once the records it has counted and those in
// flight (ahead) reach Sharing.EveryEvents, so that a publication comes
// at most one batch past it, not once the records in flight have been
// counted too.
func TestSharerDueCountsAhead(t *testing.T) {
	_, s := offlineSharer(t, 100)
	for range 60 {
		s.record(false)
	}
	for ahead, want := range map[int]bool{0: false, 39: false, 40: true, 256: true} {
		if got := s.due(ahead); got != want {
			t.Errorf("60 records counted, %d in flight, every 100: due %v, want %v", ahead, got, want)
		}
	}
}

// TestSharerCadence: a member publishes every Sharing.EveryEvents
// records once its youngest model has learned 8 times as many events,
// and before that every eighth of what it learned, at least every 100.
func TestSharerCadence(t *testing.T) {
	set, s := offlineSharer(t, 1000)
	if got := s.cadence(); got != 1000 {
		t.Fatalf("with no model, cadence %d, want 1000", got)
	}
	m, err := set.For(0)
	if err != nil {
		t.Fatal(err)
	}
	s.track(0, m)
	var sc online.Score
	learned := 0
	for _, c := range []struct{ learned, want int }{{0, 100}, {400, 100}, {2400, 300}, {7992, 999}, {9000, 1000}} {
		for ; learned < c.learned; learned++ {
			if err := m.Step(online.Event{User: fmt.Sprint("u", learned%50), Item: fmt.Sprint("i", learned%70)}, &sc); err != nil {
				t.Fatal(err)
			}
		}
		if got := s.cadence(); got != c.want {
			t.Errorf("the model learned %d events: cadence %d, want %d", c.learned, got, c.want)
		}
	}
	s.every = 50 // below youngEvery: every is the cadence at any age
	if got := s.cadence(); got != 50 {
		t.Errorf("every 50: cadence %d, want 50", got)
	}
}

// TestSharerDropsAbandonedDeltas: a delta whose chunks stopped coming
// (its writer failed or crashed between two) is dropped from the
// reader's memory once more than the sharer's memory of deltas has been
// read after its first chunk, and counted; a delta whose chunks keep
// coming is not.
func TestSharerDropsAbandonedDeltas(t *testing.T) {
	set, err := online.NewSet(online.DefaultConfig(), 1, online.LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	met, err := newMetrics(reg, noLag{})
	if err != nil {
		t.Fatal(err)
	}
	s := newSharer(set, func(int32) int64 { return 0 }, time.Hour, 1<<30, 0, met, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(ctx context.Context) (sharedLog, error) { <-ctx.Done(); return nil, ctx.Err() }, time.Second)
	t.Cleanup(func() { s.stop(); s.wg.Wait() })

	m, err := set.For(1)
	if err != nil {
		t.Fatal(err)
	}
	m.StartSharing()
	var sc online.Score
	w := &sharer{writer: 9}
	// chunk is a delta of partition 1 from `from` to seq, as one record;
	// of, when above 1, relabels it the first of that many chunks.
	chunk := func(from, seq int64, of int) []byte {
		t.Helper()
		for i := range 20 {
			if err := m.Step(online.Event{User: fmt.Sprint("v", i%3), Item: fmt.Sprint("i", i%9)}, &sc); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Publish(&w.pub); err != nil {
			t.Fatal(err)
		}
		recs, err := w.records(1, from, seq)
		if err != nil || len(recs) != 1 {
			t.Fatalf("records: %v, %d", err, len(recs))
		}
		v := recs[0].Value
		if of > 1 {
			binary.LittleEndian.PutUint32(v[40:], uint32(of))
		}
		return v
	}
	abandoned := func() float64 {
		t.Helper()
		return counterValue(t, met.shared.WithLabelValues("abandoned"))
	}

	first := chunk(0, 40, 2) // the first of two chunks; the second never comes
	s.keep = 4 * len(first)
	s.add(0, nil, first)
	if len(s.chunks.partial) != 1 {
		t.Fatalf("%d incomplete deltas, want 1", len(s.chunks.partial))
	}
	seq := int64(40)
	for off := int64(1); off <= 3; off++ { // 3 records more: within the horizon
		s.add(off, nil, chunk(seq, seq+40, 1))
		seq += 40
	}
	if len(s.chunks.partial) != 1 || abandoned() != 0 {
		t.Fatalf("within the horizon: %d incomplete deltas, %v abandoned; want 1 and 0", len(s.chunks.partial), abandoned())
	}
	for off := int64(4); off <= 6; off++ {
		s.add(off, nil, chunk(seq, seq+40, 1))
		seq += 40
	}
	if len(s.chunks.partial) != 0 || abandoned() != 1 {
		t.Fatalf("past the horizon: %d incomplete deltas, %v abandoned; want 0 and 1", len(s.chunks.partial), abandoned())
	}
	s.mu.Lock()
	complete := len(s.deltas) + s.base
	s.mu.Unlock()
	if complete != 6 {
		t.Fatalf("%d complete deltas read, want 6", complete)
	}
}

// memLog is a sharedLog that holds values at offsets 0, 1, ... and
// appends nothing.
type memLog struct{ values [][]byte }

func (l *memLog) Append(context.Context, []state.SharedRecord) error { return nil }
func (l *memLog) Read(_ context.Context, from int64, fn func(int64, []byte, []byte)) (int64, error) {
	for off := max(from, 0); off < int64(len(l.values)); off++ {
		fn(off, nil, l.values[off])
	}
	return int64(len(l.values)), nil
}
func (l *memLog) Wait(context.Context, int64, time.Duration) (bool, error) { return false, nil }
func (l *memLog) Close() error                                             { return nil }

// appendLog is a sharedLog that records each Append and fails those whose
// number (from 1) is in fail.
type appendLog struct {
	calls [][]string // the keys of each Append
	fail  map[int]bool
}

func (l *appendLog) Append(_ context.Context, records []state.SharedRecord) error {
	keys := make([]string, len(records))
	for i, r := range records {
		keys[i] = string(r.Key)
	}
	l.calls = append(l.calls, keys)
	if l.fail[len(l.calls)] {
		return errors.New("refused")
	}
	return nil
}
func (l *appendLog) Read(context.Context, int64, func(int64, []byte, []byte)) (int64, error) {
	return 0, nil
}
func (l *appendLog) Wait(context.Context, int64, time.Duration) (bool, error) { return false, nil }
func (l *appendLog) Close() error                                             { return nil }

// The sender appends what is queued together, in order, in batches of at
// most sharedBatchBytes; after a failed batch, the rest of each item it
// held is not sent, each such item counts once as send_failed, and the
// items after go on.
func TestSharerSendsInBatches(t *testing.T) {
	met, err := newMetrics(prometheus.NewRegistry(), noLag{})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(key string, n int) state.SharedRecord {
		return state.SharedRecord{Key: []byte(key), Value: make([]byte, n)}
	}
	chunk := sharedChunkBytes + sharedHeaderBytes // a publication's full chunk
	items := [][]state.SharedRecord{
		{rec("p0/a", chunk), rec("p0/b", chunk), rec("p0/c", chunk)}, // one publication in 3 chunks
		{rec("m1", 60)}, {rec("m2", 60)}, // merge points
		{rec("p1/a", 1000)},
	}
	run := func(fail map[int]bool) (*appendLog, float64) {
		lg := &appendLog{fail: fail}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &sharer{lg: lg, metrics: met, log: slog.New(slog.NewTextHandler(io.Discard, nil)), timeout: time.Second, ctx: ctx}
		before := counterValue(t, met.shared.WithLabelValues("send_failed"))
		s.sendBatches(items)
		return lg, counterValue(t, met.shared.WithLabelValues("send_failed")) - before
	}
	lg, failed := run(nil)
	want := [][]string{{"p0/a"}, {"p0/b"}, {"p0/c", "m1", "m2", "p1/a"}}
	if fmt.Sprint(lg.calls) != fmt.Sprint(want) || failed != 0 {
		t.Fatalf("Appends %v (%v failed), want %v", lg.calls, failed, want)
	}
	// The second Append fails: the publication's last chunk is not sent
	// (its delta cannot be complete); the merge points and p1 go on.
	lg, failed = run(map[int]bool{2: true})
	want = [][]string{{"p0/a"}, {"p0/b"}, {"m1", "m2", "p1/a"}}
	if fmt.Sprint(lg.calls) != fmt.Sprint(want) || failed != 1 {
		t.Fatalf("Appends %v (%v failed), want %v and 1 failed", lg.calls, failed, want)
	}
}

// TestSharerWaitsForItsPublication: with sharing.wait, a publication
// holds the model goroutine until the reader has read it back (and so
// every delta appended before it), then the tick merges; a wait that
// expires is counted, and the next publications are not waited for until
// the topic hands back something of this member's again.
func TestSharerWaitsForItsPublication(t *testing.T) {
	set, err := online.NewSet(online.DefaultConfig(), 1, online.LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	m0, err := set.For(0)
	if err != nil {
		t.Fatal(err)
	}
	met, err := newMetrics(prometheus.NewRegistry(), noLag{})
	if err != nil {
		t.Fatal(err)
	}
	var next int64
	// The reader never opens the topic: the test hands the sharer what
	// the topic would (add), when it chooses.
	s := newSharer(set, func(int32) int64 { return next }, time.Hour, 1, 10*time.Second, met, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(ctx context.Context) (sharedLog, error) { <-ctx.Done(); return nil, ctx.Err() }, time.Second)
	t.Cleanup(func() { s.stop(); s.wg.Wait() })
	s.track(0, m0)
	var sc online.Score
	off := int64(0)
	// publishAndStep steps one event and runs the end of its batch (a
	// publication: every is 1) on another goroutine; done closes when it
	// returns.
	publishAndStep := func() (done chan struct{}) {
		t.Helper()
		if err := m0.Step(online.Event{User: fmt.Sprint("u", next%7), Item: fmt.Sprint("i", next%5)}, &sc); err != nil {
			t.Fatal(err)
		}
		next++
		done = make(chan struct{})
		go func() { s.record(true); close(done) }()
		return done
	}
	// readBack hands the sharer every record queued for the topic so far,
	// as its reader would read them back.
	readBack := func() {
		for {
			select {
			case recs := <-s.out:
				for _, r := range recs {
					s.add(off, r.Key, r.Value)
					off++
				}
			default:
				return
			}
		}
	}
	returns := func(done chan struct{}, within time.Duration) bool {
		select {
		case <-done:
			return true
		case <-time.After(within):
			return false
		}
	}
	waits := func(o string) float64 { return counterValue(t, met.sharedWaits.WithLabelValues(o)) }

	done := publishAndStep()
	if returns(done, 100*time.Millisecond) {
		t.Fatal("the publication returned before it was read back")
	}
	readBack()
	if !returns(done, 5*time.Second) {
		t.Fatal("the publication did not return once read back")
	}
	if waits("read_back") != 1 {
		t.Fatalf("read_back %v, want 1", waits("read_back"))
	}

	// The topic stops handing back: one wait expires, the next is skipped.
	s.wait = 50 * time.Millisecond
	readBack() // the first merge point, queued after the wait
	if !returns(publishAndStep(), 5*time.Second) || waits("expired") != 1 {
		t.Fatalf("expired %v, want 1", waits("expired"))
	}
	s.wait = 10 * time.Second
	if !returns(publishAndStep(), time.Second) || waits("skipped") != 1 {
		t.Fatalf("skipped %v, want 1 (returned at once, not after %v)", waits("skipped"), s.wait)
	}
	// Once the topic hands back this member's publications again, the
	// next publication is waited for.
	readBack()
	done = publishAndStep()
	if returns(done, 100*time.Millisecond) {
		t.Fatal("the publication after the topic came back returned before it was read back")
	}
	readBack()
	if !returns(done, 5*time.Second) || waits("read_back") != 2 {
		t.Fatalf("read_back %v, want 2", waits("read_back"))
	}
	if m0.Merged(0) >= 0 {
		t.Fatalf("the model merged its own partition's delta (cursor %d)", m0.Merged(0))
	}
}

// TestSharerWindow: a new owner that restores a partition and steps again
// the records a previous owner emitted after the checkpoint makes the
// merges the previous owner recorded there, at the same offsets, and none
// of its own, so that its model scores those records as the first copies
// have them; it records those merges as the first points of its own
// chain. Past the window it merges freely again.
func TestSharerWindow(t *testing.T) {
	newModel := func() (*online.Set, *online.Model) { return partitionModel(t, 0) }
	met, err := newMetrics(prometheus.NewRegistry(), noLag{})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	neverOpen := func(ctx context.Context) (sharedLog, error) { <-ctx.Done(); return nil, ctx.Err() }
	newSharerAt := func(set *online.Set, next *int64) *sharer {
		s := newSharer(set, func(int32) int64 { return *next }, time.Hour, 1<<30, 0, met, logger, neverOpen, time.Second)
		t.Cleanup(func() { s.stop(); s.wg.Wait() })
		return s
	}

	// Partition 1's model, of a third member, publishes two deltas.
	delta := otherPartition(t, 40, 5)
	var sc online.Score
	d1, d2 := delta(0, 40), delta(40, 80)
	event := func(off int64) online.Event {
		return online.Event{User: fmt.Sprint("u", off%4), Item: fmt.Sprint("i", off%9)}
	}
	const emitted = 12 // the previous owner emitted offsets 0..11, then crashed

	// The previous owner, from the partition's start: d1 arrives after
	// offset 3 and d2 after offset 7, each merged at the batch's end.
	setA, mA := newModel()
	nextA := int64(0)
	sA := newSharerAt(setA, &nextA)
	sA.track(0, mA)
	var first []string
	for nextA < emitted {
		switch nextA {
		case 4:
			sA.add(0, nil, d1)
			sA.mergeArrived()
		case 8:
			sA.add(1, nil, d2)
			sA.mergeArrived()
		}
		if err := mA.Step(event(nextA), &sc); err != nil {
			t.Fatal(err)
		}
		first = append(first, fmt.Sprint(sc))
		nextA++
	}
	var pointsA [][]byte
	for len(sA.out) > 0 {
		for _, r := range <-sA.out {
			pointsA = append(pointsA, r.Value)
		}
	}
	if len(pointsA) != 2 {
		t.Fatalf("the previous owner recorded %d merge points, want 2", len(pointsA))
	}

	// stepAgain steps a new owner's model (restored at offset 0, the
	// checkpoint) over the emitted records through s's hook, and returns
	// the offsets whose scores differ from the first copies.
	stepAgain := func(s *sharer, m *online.Model, next *int64) []int64 {
		t.Helper()
		var differ []int64
		for *next < emitted {
			s.before(&consumer.Result{Pos: input.Position{Topic: "clicks", Partition: 0, Offset: *next}, Emitted: true})
			if err := m.Step(event(*next), &sc); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(sc) != first[*next] {
				differ = append(differ, *next)
			}
			*next++
			s.mergeArrived() // its own merges: none in the window
		}
		return differ
	}
	readBack := func(s *sharer) {
		s.add(0, nil, d1)
		s.add(1, nil, d2)
		for i, v := range pointsA {
			s.add(int64(2+i), nil, v)
		}
		s.readDone.Store(1 << 40) // the reader is at the topic's end
	}
	offsets := map[int]map[int64]bool{0: {}}
	for off := range int64(emitted) {
		offsets[0][off] = true
	}

	// Without the tail scan's finding, the new owner merges when deltas
	// arrive, not where the previous owner did: its scores differ.
	setC, mC := newModel()
	nextC := int64(0)
	sC := newSharerAt(setC, &nextC)
	readBack(sC)
	replayed := counterValue(t, met.sharedWindows.WithLabelValues("replayed"))
	sC.track(0, mC)
	if got := counterValue(t, met.sharedWindows.WithLabelValues("replayed")) - replayed; got != 0 {
		t.Fatalf("a window replayed without the tail scan's finding (%v)", got)
	}
	if differ := stepAgain(sC, mC, &nextC); len(differ) == 0 {
		t.Fatal("a new owner merging freely scored the emitted records as the previous owner did: the test shows nothing")
	}

	// With the finding but without the deltas the points name (the reader
	// no longer holds them), the window is not replayed, and counted.
	setD, mD := newModel()
	nextD := int64(0)
	sD := newSharerAt(setD, &nextD)
	for i, v := range pointsA {
		sD.add(int64(i), nil, v)
	}
	sD.readDone.Store(1 << 40)
	sD.emitted(map[int]int64{0: 0}, offsets)
	skipped := counterValue(t, met.sharedWindows.WithLabelValues("skipped"))
	sD.track(0, mD)
	if got := counterValue(t, met.sharedWindows.WithLabelValues("skipped")) - skipped; got != 1 || sD.windowsOpen.Load() != 0 || len(sD.out) != 0 {
		t.Fatalf("a window whose deltas are not held: skipped rose by %v, %d windows open, %d records queued; want 1, 0, 0", got, sD.windowsOpen.Load(), len(sD.out))
	}

	// With the finding and the deltas no longer in memory but in the
	// topic: the reader kept only the newest delta (keep), and the window
	// reads the one it dropped back from the topic (fetchDropped). Before
	// stop 67 the window was skipped there (the default keep held about
	// 60,000 of the group's events, fewer than a checkpoint interval of
	// three members).
	topic := &memLog{values: append([][]byte{d1, d2}, pointsA...)}
	opened := make(chan struct{})
	setE, mE := newModel()
	nextE := int64(0)
	sE := newSharer(setE, func(int32) int64 { return nextE }, time.Hour, 1<<30, 0, met, logger,
		func(ctx context.Context) (sharedLog, error) { <-opened; return topic, nil }, time.Second)
	t.Cleanup(func() { sE.stop(); sE.wg.Wait() })
	sE.keep = 1 // before the reader starts (opened): one delta held
	close(opened)
	if !sE.caughtUp(5 * time.Second) {
		t.Fatal("the reader did not read the topic")
	}
	sE.mu.Lock()
	held, dropped := len(sE.deltas), len(sE.dropped)
	sE.mu.Unlock()
	if held != 1 || dropped != 1 {
		t.Fatalf("the reader holds %d deltas and dropped %d, want 1 and 1", held, dropped)
	}
	sE.emitted(map[int]int64{0: 0}, offsets)
	replayed = counterValue(t, met.sharedWindows.WithLabelValues("replayed"))
	sE.track(0, mE)
	if got := counterValue(t, met.sharedWindows.WithLabelValues("replayed")) - replayed; got != 1 {
		t.Fatalf("a window whose delta was dropped from memory: replayed rose by %v, want 1", got)
	}
	if differ := stepAgain(sE, mE, &nextE); len(differ) > 0 {
		t.Fatalf("the delta read back: offsets %v scored otherwise than by the previous owner", differ)
	}

	setB, mB := newModel()
	nextB := int64(0)
	sB := newSharerAt(setB, &nextB)
	readBack(sB)
	sB.emitted(map[int]int64{0: 0}, offsets)
	replayed = counterValue(t, met.sharedWindows.WithLabelValues("replayed"))
	sB.track(0, mB)
	if got := counterValue(t, met.sharedWindows.WithLabelValues("replayed")) - replayed; got != 1 {
		t.Fatalf("denoiser_shared_windows_total{outcome=\"replayed\"} rose by %v, want 1", got)
	}
	var recorded []*mergePoint
	for len(sB.out) > 0 {
		for _, r := range <-sB.out {
			mp, err := parseMergePoint(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			recorded = append(recorded, mp)
		}
	}
	if len(recorded) != 2 || recorded[0].at != 4 || recorded[1].at != 8 || recorded[0].k != 0 || recorded[1].k != 1 ||
		recorded[0].chain.writer != sB.writer || len(recorded[1].ids) != 1 || recorded[1].ids[0].seq != 80 {
		t.Fatalf("the new owner recorded %+v, want its chain's points 0 and 1 at offsets 4 and 8", recorded)
	}
	if differ := stepAgain(sB, mB, &nextB); len(differ) > 0 {
		t.Fatalf("the new owner scored offsets %v of the emitted records otherwise than the previous owner", differ)
	}
	if len(sB.out) != 0 {
		t.Fatalf("the new owner recorded %d merge points of its own in the window", len(sB.out))
	}

	// Past the window: the record at its end closes it, and a delta that
	// arrives is merged there.
	sB.before(&consumer.Result{Pos: input.Position{Topic: "clicks", Partition: 0, Offset: emitted}})
	if sB.windowsOpen.Load() != 0 {
		t.Fatal("the window is still open past its end")
	}
	sB.add(5, nil, delta(80, 120))
	if err := mB.Step(event(nextB), &sc); err != nil {
		t.Fatal(err)
	}
	nextB++
	sB.mergeArrived()
	if got := mB.Merged(1); got != 120 {
		t.Fatalf("cursor of partition 1 at %d past the window, want 120", got)
	}
}
