package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/state"
)

// fullDisk is a saver whose filesystem is full while full is set.
type fullDisk struct {
	full  atomic.Bool
	saves atomic.Int64 // committed
}

func (d *fullDisk) SaveModel(_ context.Context, _ state.Checkpoint, w state.ModelWriter) (state.Saved, error) {
	if d.full.Load() {
		return state.Saved{}, fmt.Errorf("state: save: %w: 0 B free", state.ErrNoSpace)
	}
	if err := w.Full(io.Discard); err != nil {
		return state.Saved{}, err
	}
	return state.Saved{Generation: uint64(d.saves.Add(1))}, nil
}

type noCommit struct{}

func (noCommit) Commit(context.Context, []input.Position) error { return nil }

type noLag struct{}

func (noLag) Lag() []consumer.PartitionLag { return nil }

type noFlush struct{}

func (noFlush) Flush(context.Context) error { return nil }

// TestCheckpointRetriesAfterFailure: a checkpoint that failed (a full disk)
// is tried again at the next interval even when no record came since, so
// that the state catches up once space is back, and readiness says why it
// failed meanwhile; the final checkpoint of a stop is not skipped either.
// An idle stream whose last checkpoint succeeded writes nothing.
func TestCheckpointRetriesAfterFailure(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry(), noLag{})
	if err != nil {
		t.Fatal(err)
	}
	model, err := online.New(online.Config{}.WithDefaults(), online.NewSource(1))
	if err != nil {
		t.Fatal(err)
	}
	disk := &fullDisk{}
	c := newCheckpointer(disk, memberSet(t, model), noCommit{}, m, slog.New(slog.DiscardHandler), 1000, time.Second, nil, 0)
	defer c.close()
	ctx := context.Background()
	tick := c.tick(0) // every tick is due
	// until ticks until cond holds: the save runs on the saver goroutine.
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10s (saves %d, failures %v, failing %q)", what, disk.saves.Load(),
					counterValue(t, m.checkpointFailures), c.failed())
			}
			if err := tick(ctx, noFlush{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	record := func(offset int64) {
		if err := c.after(ctx, &consumer.Result{Pos: input.Position{Topic: "t", Offset: offset}, BatchEnd: true}, noFlush{}); err != nil {
			t.Fatal(err)
		}
	}

	disk.full.Store(true)
	record(0)
	until("a failed checkpoint", func() bool { return counterValue(t, m.checkpointFailures) >= 1 })
	if why := c.failed(); !strings.Contains(why, "not enough free disk space") {
		t.Fatalf("failed() = %q, want the save's error", why)
	}

	// No record comes; space comes back: the next tick saves.
	disk.full.Store(false)
	until("a checkpoint once space is back", func() bool { return disk.saves.Load() == 1 && c.failed() == "" })

	// Idle and saved: nothing more is written.
	for range 20 {
		if err := tick(ctx, noFlush{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	c.poll()
	if n := disk.saves.Load(); n != 1 {
		t.Fatalf("an idle stream saved %d times, want once", n)
	}

	// The stop's final checkpoint is taken after a failure with nothing
	// pending, and reports the failure when it fails again.
	disk.full.Store(true)
	record(1)
	until("a second failure", func() bool { return counterValue(t, m.checkpointFailures) >= 2 })
	if err := c.finish(ctx, true); !errors.Is(err, state.ErrNoSpace) {
		t.Fatalf("final checkpoint on a full disk: %v, want ErrNoSpace", err)
	}
	disk.full.Store(false)
	if err := c.finish(ctx, true); err != nil {
		t.Fatalf("final checkpoint once space is back: %v", err)
	}
	if n := disk.saves.Load(); n != 2 {
		t.Fatalf("%d saves, want 2", n)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var v dto.Metric
	if err := c.Write(&v); err != nil {
		t.Fatal(err)
	}
	return v.GetCounter().GetValue()
}

// TestCheckpointsWriteDeltas: with a real store, the checkpointer writes
// a base and then deltas; what the store holds (base and deltas) decodes
// to the model byte for byte; after a restart from it the first
// checkpoint is a delta again; an idle stream writes nothing.
func TestCheckpointsWriteDeltas(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cfg := online.Config{Dim: 8, MaxUsers: 3000, MaxItems: 1000}.WithDefaults()
	model, err := online.New(cfg, online.NewSource(1))
	if err != nil {
		t.Fatal(err)
	}
	var offset int64
	var sc online.Score
	// feed steps the model with n events over 5,000 users and 2,000 items
	// (so that the caps evict) and hands each record to c, letting each
	// save finish before the next record, so that every 50 records make
	// a checkpoint.
	feed := func(c *checkpointer, m *online.Model, n int) {
		t.Helper()
		for range n {
			u, i := offset*7919%5000, offset*104729%2000
			if err := m.Step(online.Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", i)}, &sc); err != nil {
				t.Fatal(err)
			}
			if err := c.after(ctx, &consumer.Result{Pos: input.Position{Topic: "t", Offset: offset}, BatchEnd: true}, noFlush{}); err != nil {
				t.Fatal(err)
			}
			offset++
			waitSave(t, c)
		}
	}
	// run feeds n events through a checkpointer of the store in dir, takes
	// the final checkpoint, and returns the checkpointer's metrics and what
	// the store then holds, decoded.
	run := func(m *online.Model, restored uint64, n int) (*metrics, state.Checkpoint, *online.Model) {
		t.Helper()
		store, err := state.Open(dir, state.Options{GCInterval: -1, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		met, err := newMetrics(prometheus.NewRegistry(), noLag{})
		if err != nil {
			t.Fatal(err)
		}
		c := newCheckpointer(store, memberSet(t, m), noCommit{}, met, slog.New(slog.DiscardHandler), 50, time.Second, nil, restored)
		feed(c, m, n)
		if err := c.finish(ctx, true); err != nil {
			t.Fatal(err)
		}
		// Idle: the ticks write nothing.
		for range 5 {
			if err := c.tick(0)(ctx, noFlush{}); err != nil {
				t.Fatal(err)
			}
		}
		c.close()
		cp, ok, err := store.Load(ctx)
		if err != nil || !ok {
			t.Fatalf("Load: ok=%v err=%v", ok, err)
		}
		set, err := readCheckpoint(ctx, cp, 0, online.LayoutMember)
		if err != nil {
			t.Fatal(err)
		}
		got := set.Model(0)
		if !bytes.Equal(encodeModel(t, got), encodeModel(t, m)) {
			t.Fatalf("generation %d (base %d + %d deltas) does not decode to the model", cp.Generation, cp.Base, len(cp.Deltas))
		}
		return met, cp, got
	}

	met, cp, restored := run(model, 0, 6000)
	checkpoints, bases := counterValue(t, met.checkpoints), counterValue(t, met.checkpointBases)
	t.Logf("first run: %v checkpoints, %v bases; generation %d = base %d + %d deltas", checkpoints, bases, cp.Generation, cp.Base, len(cp.Deltas))
	if checkpoints < 100 || bases < 2 || bases > checkpoints/3 || len(cp.Deltas) == 0 {
		t.Fatalf("%v checkpoints, %v of them bases, %d deltas in the last: want mostly deltas", checkpoints, bases, len(cp.Deltas))
	}
	// Restarted from the store: the first checkpoint is a delta.
	met, cp2, _ := run(restored, cp.Generation, 30)
	if counterValue(t, met.checkpoints) != 1 || counterValue(t, met.checkpointBases) != 0 || cp2.Generation != cp.Generation+1 {
		t.Fatalf("after a restart: %v checkpoints, %v bases, generation %d after %d",
			counterValue(t, met.checkpoints), counterValue(t, met.checkpointBases), cp2.Generation, cp.Generation)
	}
	// What it wrote is counted: the delta, less than the model.
	w, d := counterValue(t, met.checkpointWritten), metricValue(t, met.checkpointBytes).GetGauge().GetValue()
	if base := metricValue(t, met.checkpointBase).GetGauge().GetValue(); w != d || w <= 0 || w >= base {
		t.Fatalf("after a restart: %v bytes written, the delta %v, the base %v", w, d, base)
	}
	// Nothing to checkpoint: nothing is written.
	_, cp3, _ := run(restored, cp2.Generation, 0)
	if cp3.Generation != cp2.Generation {
		t.Fatalf("an idle run wrote generation %d after %d", cp3.Generation, cp2.Generation)
	}
}

// afterLog decodes each line with d, passes it through a checkpointer's
// after, as every record passes, and returns the lines it logged.
func afterLog(t *testing.T, d consumer.Decoder, records ...string) []string {
	t.Helper()
	var buf bytes.Buffer
	m, err := newMetrics(prometheus.NewRegistry(), noLag{})
	if err != nil {
		t.Fatal(err)
	}
	c := &checkpointer{log: slog.New(slog.NewTextHandler(&buf, nil)), every: 1 << 30, positions: map[partitionKey]*int64{}, metrics: m}
	for _, line := range records {
		r := &consumer.Result{Pos: input.Position{File: "in", Line: 1}}
		if err := d.Decode([]byte(line), &r.Event); err != nil {
			t.Fatal(err)
		}
		if err := c.after(context.Background(), r, nil); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Split(strings.TrimSpace(buf.String()), "\n")
}

// TestWarnUnread: each member named as other formats name a missing
// field is warned of once, through after, which every record passes.
func TestWarnUnread(t *testing.T) {
	lines := afterLog(t, consumer.Decoder{},
		`{"user":"u","item":"i","timestamp":1700000000}`,
		`{"user":"u","item":"i","timestamp":1700000001,"event_type":"pv"}`,
		`{"user":"u","item":"i","timestamp":1700000002,"event_type":"pv"}`,
		`{"user":"u","item":"i","ts":1700000002}`,
	)
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "member=timestamp field=ts") ||
		!strings.Contains(lines[1], "member=event_type field=event") {
		t.Errorf("log:\n%s", strings.Join(lines, "\n"))
	}
}

// TestWarnShadowed: each field read from a member the records lack, while
// they carry the field's own name, is warned of once, through after.
func TestWarnShadowed(t *testing.T) {
	lines := afterLog(t, consumer.NewDecoder(consumer.Fields{TS: "timestamp"}),
		`{"user":"u","item":"i","ts":1700000000000}`,
		`{"user":"u","item":"i","ts":1700000001000}`,
		`{"user":"u","item":"i","timestamp":1700000002000}`,
	)
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "field=ts") || !strings.Contains(lines[0], "fields.ts") {
		t.Errorf("log:\n%s", strings.Join(lines, "\n"))
	}
}

// TestWarnUnranked: each event type missing from model.event_order is
// warned of once, with the types first seen since the last warning.
func TestWarnUnranked(t *testing.T) {
	var buf bytes.Buffer
	c := &checkpointer{log: slog.New(slog.NewTextHandler(&buf, nil))}
	c.warnUnranked(nil)
	c.warnUnranked([]string{"like", "share"})
	c.warnUnranked([]string{"like", "share"})
	c.warnUnranked([]string{"share", "like", "Save"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "types=\"[like share]\"") ||
		!strings.Contains(lines[1], "types=[Save]") || !strings.Contains(lines[1], "model.event_order") {
		t.Errorf("log:\n%s", buf.String())
	}
}

// TestWarnOutOfOrder: each listed type read without its rank is warned
// of once, apart from the unranked types' warnings.
func TestWarnOutOfOrder(t *testing.T) {
	var buf bytes.Buffer
	c := &checkpointer{log: slog.New(slog.NewTextHandler(&buf, nil))}
	c.warnOutOfOrder(nil)
	c.warnUnranked([]string{"purchase"})
	c.warnOutOfOrder([]string{"purchase"})
	c.warnOutOfOrder([]string{"purchase"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "level=WARN") || !strings.Contains(lines[1], "types=[purchase]") ||
		!strings.Contains(lines[1], "without their rank") {
		t.Errorf("log:\n%s", buf.String())
	}
}
