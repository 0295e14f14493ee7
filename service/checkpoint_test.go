package service

import (
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

func (d *fullDisk) SaveFrom(_ context.Context, _ state.Checkpoint, write func(io.Writer) error) error {
	if d.full.Load() {
		return fmt.Errorf("state: save: %w: 0 B free", state.ErrNoSpace)
	}
	if err := write(io.Discard); err != nil {
		return err
	}
	d.saves.Add(1)
	return nil
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
	c := newCheckpointer(disk, model, noCommit{}, m, slog.New(slog.DiscardHandler), 1000, time.Second, nil)
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
		if err := c.after(ctx, &consumer.Result{Pos: input.Position{Topic: "t", Offset: offset}}, noFlush{}); err != nil {
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
