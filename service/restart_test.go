package service

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/state"
)

// tearingStore is a state.Store whose next save, once tear is set, dies
// half-way: its model is written, then one more chunk's worth of bytes so
// that a chunk reaches the store, and then the save fails before its
// commit, as a process killed between two of a save's transactions leaves
// the store.
type tearingStore struct {
	*state.Store
	tear atomic.Bool
	torn atomic.Int64
}

var errTorn = errors.New("save torn on purpose")

func (s *tearingStore) SaveModel(ctx context.Context, cp state.Checkpoint, w state.ModelWriter) (state.Saved, error) {
	if !s.tear.CompareAndSwap(true, false) {
		return s.Store.SaveModel(ctx, cp, w)
	}
	s.torn.Add(1)
	tear := func(write func(io.Writer) error) func(io.Writer) error {
		return func(out io.Writer) error {
			if err := write(out); err != nil {
				return err
			}
			if _, err := out.Write(make([]byte, 4<<20)); err != nil {
				return err
			}
			return errTorn
		}
	}
	w.Full = tear(w.Full)
	if w.Delta != nil {
		w.Delta = tear(w.Delta)
	}
	return s.Store.SaveModel(ctx, cp, w)
}

// TestRestartsRestoreExactly is the crash test of `denoiser run` made
// deterministic, without Kafka: a stream of events goes through the
// model and the checkpointer with a real store, and the process "dies"
// at several points (the model, its shadow and the checkpointer are
// dropped, the store closed), after a plain checkpoint or in the middle
// of a save (chunks of the next generation written, no commit); some
// saves also fail while the process goes on. Each restart restores as
// New does (Service.restore: the base and its deltas, the shadow taken
// at once) and goes on from the checkpoint's position. Every score, first
// or repeated after a restart, and the model the last checkpoint holds
// (base and deltas decoded) must equal those of one model that stepped
// over the stream without a restart.
func TestRestartsRestoreExactly(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  online.Config
		bare bool // events of (user, item, time) only: the gap instrument
		// untimed: bare events in time order with no times, a log of
		// (user, item) pairs: the gap is counted in events.
		untimed bool
	}{
		{"zero model settings", Config{}.WithDefaults().Model, false, false},
		// What the service runs by default (BaseConfig: DefaultConfig's
		// dwell read as longer-is-genuine and event order): on these
		// events, two ranked types, times and no dwell, the rank
		// instrument (the gap among its features) and its level offset
		// are learned, saved and restored.
		{"service defaults", BaseConfig().WithDefaults().Model, false, false},
		// The same on events without a type whose gaps carry the
		// bounces (testRestarts): the gap instrument learns, and forms
		// weights (Score.Source), across the crashes.
		{"service defaults, (user, item, time) only", BaseConfig().WithDefaults().Model, true, false},
		// And without times: the users' count marks and the counts'
		// scale are saved and restored.
		{"service defaults, (user, item) only", BaseConfig().WithDefaults().Model, true, true},
		{"capped, admission, popularity", online.Config{Dim: 8, MaxUsers: 3000, MaxItems: 1000, AdmitAfter: 2,
			AdmitSketchWidth: 1 << 14, NegativeSampling: "popularity", WarmUp: 300, RefitEvery: 200, GMMMinSamples: 64}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) { testRestarts(t, tc.cfg, tc.bare, tc.untimed) })
	}
}

func testRestarts(t *testing.T, mc online.Config, bare, untimed bool) {
	const n, every, seed = 6000, 50, 7
	ctx := context.Background()
	events := make([]online.Event, n)
	for j := range events {
		// Times on all but every 13th event: each user's latest time
		// is saved, torn and restored with the rows, and the gap read
		// from it.
		events[j] = online.Event{User: fmt.Sprint("u", j*7919%5000), Item: fmt.Sprint("i", j*104729%2000),
			Kind: []string{"click", "view"}[j%2], TimeMS: 1_700_000_000_000 + int64(j)*2000 + int64(j*31%7)*300, HasTime: j%13 != 0}
		if bare {
			// 3,000 users in turn (a model as large as the typed
			// stream's, so that saves chain deltas as there), one event
			// each 5 ms, so a user's gap is about 15 s, plus up to 20 s
			// of delay; an event delayed by less than 3 s comes sooner
			// after the user's previous one and is an item off the
			// user's taste (a bounce), the others are one of the user's
			// group's 20 items.
			u, delay := j%3000, int64(j*7919%20_000)
			item := (u%10)*20 + j*31%20
			if delay < 3000 {
				item = j * 104729 % 2000
			}
			events[j] = online.Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", item),
				TimeMS: 1_700_000_000_000 + int64(j)*5 + delay, HasTime: j%13 != 0}
		}
	}
	if untimed {
		slices.SortStableFunc(events, func(a, b online.Event) int { return cmp.Compare(a.TimeMS, b.TimeMS) })
		for j := range events {
			events[j].TimeMS, events[j].HasTime = 0, false
		}
	}
	ref, err := online.New(mc, online.NewSource(seed))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, n)
	var sc online.Score
	gapped := 0
	for j, ev := range events {
		if err := ref.Step(ev, &sc); err != nil {
			t.Fatal(err)
		}
		want[j] = fmt.Sprint(sc)
		if sc.Source == online.SourceGap {
			gapped++
		}
	}
	if bare {
		if gapped == 0 {
			t.Fatal("no weight was formed by the gap instrument: the case tests nothing of it")
		}
		t.Logf("%d of %d weights formed by the gap instrument", gapped, n)
	}
	wantModel := encodeModel(t, ref)

	dir := t.TempDir()
	r := rand.New(rand.NewPCG(seed, 1))
	var restoredWithDeltas, failedAndWentOn int
	offset := int64(0)
	for life := 0; ; life++ {
		// Start as New does: open the store, restore, take the shadow.
		// Deltas may grow to the whole base (the most the store allows),
		// so that chains are long enough for restarts to restore from a
		// base with deltas whatever the timing of the saves.
		st, err := state.Open(dir, state.Options{GCInterval: time.Hour, NoSync: true, DeltaShare: 1})
		if err != nil {
			t.Fatal(err)
		}
		store := &tearingStore{Store: st}
		if cp, ok, err := st.Load(ctx); err != nil {
			t.Fatal(err)
		} else if ok && len(cp.Deltas) > 0 {
			restoredWithDeltas++
		}
		// The state of partition 0, as the service keeps it: a model of
		// its own, whose source is the one model's (NewPartitionSource).
		s := &Service{cfg: Config{Model: mc, Seed: seed, StateLayout: online.LayoutPartition}, log: slog.New(slog.DiscardHandler), store: st}
		positions, restored, err := s.restore(ctx, nil)
		if err != nil {
			t.Fatalf("life %d: %v", life, err)
		}
		model, err := s.set.For(0)
		if err != nil {
			t.Fatal(err)
		}
		if len(positions) == 1 {
			offset = positions[0].Offset
		}
		met, err := newMetrics(prometheus.NewRegistry(), noLag{})
		if err != nil {
			t.Fatal(err)
		}
		c := newCheckpointer(store, s.set, noCommit{}, met, slog.New(slog.DiscardHandler), every, time.Second, positions, restored)

		// Lives 0-5 end with a kill after 300-800 records (lives 2 and 5
		// in the middle of a save); life 6 runs to the end of the stream
		// and stops cleanly. Odd lives wait for each save, so that
		// checkpoints fall every `every` records; even ones go on
		// learning while a save runs, as the service does (rows change
		// between the copy and MarkSaved).
		last, paced, dieInSave := life == 6, life%2 == 1, life%3 == 2
		end := int64(n)
		if !last {
			end = min(offset+int64(300+r.IntN(500)), n-4*every)
		}
		// In odd lives and the last, a save fails and the process goes on
		// for one to three saves before it ends, so that the chain the
		// next start reads (or the last) holds deltas saved after the
		// failure.
		failAt := int64(-1)
		if life%2 == 1 || last {
			failAt = end - int64(2*every+r.IntN(2*every))
		}
		for ; offset < end || (dieInSave && c.pending == 0); offset++ {
			if err := model.Step(events[offset], &sc); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(sc); got != want[offset] {
				t.Fatalf("life %d, offset %d: score %s, want %s", life, offset, got, want[offset])
			}
			if err := c.after(ctx, &consumer.Result{Pos: input.Position{Topic: "t", Offset: offset}, BatchEnd: true}, noFlush{}); err != nil {
				t.Fatal(err)
			}
			if paced {
				waitSave(t, c)
			} else {
				c.poll()
			}
			if failAt >= 0 && offset >= failAt && c.pending > 0 {
				tornSave(t, c, store)
				failAt = -1
			}
		}
		waitSave(t, c)
		if store.torn.Load() == 1 && c.failed() == "" {
			failedAndWentOn++ // and a later save of this life committed
		}
		if dieInSave {
			tornSave(t, c, store)
		}
		if last {
			if err := c.finish(ctx, true); err != nil {
				t.Fatal(err)
			}
		}
		c.close()
		if !last {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		cp, ok, err := st.Load(ctx)
		if err != nil || !ok {
			t.Fatalf("Load: ok=%v err=%v", ok, err)
		}
		snap, err := CheckpointModel(ctx, cp, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d lives, %d restored from a base with deltas, %d saves failed with the process going on; last checkpoint: generation %d = base %d + %d deltas",
			life+1, restoredWithDeltas, failedAndWentOn, cp.Generation, cp.Base, len(cp.Deltas))
		if cp.Positions[0].Offset != n {
			t.Fatalf("last checkpoint at offset %d, want %d", cp.Positions[0].Offset, n)
		}
		if !bytes.Equal(snap.Model, wantModel) {
			t.Fatalf("the last checkpoint (generation %d = base %d + %d deltas) differs from the model of a run without restarts",
				cp.Generation, cp.Base, len(cp.Deltas))
		}
		// The cases this test is for happened.
		if restoredWithDeltas < 2 || failedAndWentOn < 3 {
			t.Fatalf("%d restores from deltas, %d failed saves the process survived: want at least 2 and 3", restoredWithDeltas, failedAndWentOn)
		}
		return
	}
}

// tornSave waits for the save in flight, then has c take a checkpoint
// that store tears.
func tornSave(t *testing.T, c *checkpointer, store *tearingStore) {
	t.Helper()
	waitSave(t, c)
	store.tear.Store(true)
	if err := c.checkpoint(context.Background(), noFlush{}); err != nil {
		t.Fatal(err)
	}
	waitSave(t, c)
	if c.pending > 0 || c.failed() == "" || store.tear.Load() {
		t.Fatal("the torn save did not fail")
	}
}

// waitSave waits for the save in flight, if any, to end.
func waitSave(t *testing.T, c *checkpointer) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.saving; {
		if time.Now().After(deadline) {
			t.Fatal("a save did not end in 10s")
		}
		time.Sleep(time.Millisecond)
		c.poll()
	}
}

// memberSet is m as the one model of a member's state (online.LayoutMember).
func memberSet(tb testing.TB, m *online.Model) *online.Set {
	tb.Helper()
	s, err := online.NewSetFrom(m, 1, online.LayoutMember)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func encodeModel(t *testing.T, m *online.Model) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
