package service

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/state"
)

// BenchmarkStateDirectory runs the checkpointer against a real store (the
// service's options: fsync, collection every minute) over a long run of a
// model of 1,000,000 users and 20,000 items (d=32, about 450 MB encoded)
// and samples the state directory's size on disk (allocated blocks) every
// 20 ms. Loads:
//
//   - paced/events=20000: a checkpoint every 20,000 uniform events, each
//     save done before the stream goes on (a stream slower than the
//     saves): mostly deltas;
//   - paced/events=500000: a checkpoint every 500,000 events, which
//     change about 40% of the rows: deltas over DeltaShare, so mostly
//     new bases;
//   - flat-out: 20,000 events between checkpoints but the stream never
//     waits: while a save runs, events pile up and the next checkpoint
//     covers them all;
//   - whole/paced/events=20000: as the first, for 30 checkpoints, with
//     deltas turned off (Options.MaxDeltas < 0): every checkpoint writes
//     the whole model, as before deltas.
//
// It reports the model's size, the directory's largest and final size
// against it, the checkpoints and how many were bases, and the mean pause
// of the model loop and duration of a save (the service's metrics).
//
//	go test ./service -run '^$' -bench StateDirectory -benchtime 1x -timeout 60m
func BenchmarkStateDirectory(b *testing.B) {
	const users, items = 1_000_000, 20_000
	model, err := online.New(online.Config{}, online.NewSource(1))
	if err != nil {
		b.Fatal(err)
	}
	var sc online.Score
	for j := range users {
		model.Step(online.Event{User: fmt.Sprint("u", j), Item: fmt.Sprint("i", j%items)}, &sc)
	}
	r := rand.New(rand.NewPCG(2, 2))
	for _, bc := range []struct {
		name            string
		between, events int
		paced, whole    bool
	}{
		{"paced/events=20000", 20_000, 2_000_000, true, false},
		{"paced/events=500000", 500_000, 5_000_000, true, false},
		{"flat-out", 20_000, 4_000_000, false, false},
		{"whole/paced/events=20000", 20_000, 600_000, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				runStateDirectory(b, model, r, users, items, bc.between, bc.events, bc.paced, bc.whole)
			}
		})
	}
}

// BenchmarkStateDirectorySmall is BenchmarkStateDirectory's paced load
// for models of 1.4 to 100 MB (2,000 to 200,000 users at the defaults),
// 2,000 events between checkpoints: the range where superseded copies in
// the value-log file Badger was writing (64 MiB until stop 31) took the
// directory past 3 × the model.
//
//	go test ./service -run '^$' -bench StateDirectorySmall -benchtime 1x
func BenchmarkStateDirectorySmall(b *testing.B) {
	for _, size := range []struct{ users, items int }{{2_000, 1_000}, {20_000, 5_000}, {200_000, 20_000}} {
		model, err := online.New(online.DefaultConfig(), online.NewSource(1))
		if err != nil {
			b.Fatal(err)
		}
		var sc online.Score
		for j := range size.users {
			model.Step(online.Event{User: fmt.Sprint("u", j), Item: fmt.Sprint("i", j%size.items)}, &sc)
		}
		r := rand.New(rand.NewPCG(2, 2))
		b.Run(fmt.Sprintf("users=%d", size.users), func(b *testing.B) {
			for range b.N {
				runStateDirectory(b, model, r, size.users, size.items, 2_000, 400_000, true, false)
			}
		})
	}
}

// countingSaver counts the model bytes its store writes.
type countingSaver struct {
	*state.Store
	written atomic.Int64
}

func (s *countingSaver) SaveModel(ctx context.Context, cp state.Checkpoint, w state.ModelWriter) (state.Saved, error) {
	saved, err := s.Store.SaveModel(ctx, cp, w)
	s.written.Add(saved.Bytes)
	return saved, err
}

func runStateDirectory(b *testing.B, model *online.Model, r *rand.Rand, users, items, between, events int, paced, whole bool) {
	dir := b.TempDir()
	opts := state.Options{}
	if whole {
		opts.MaxDeltas = -1
	}
	st, err := state.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	store := &countingSaver{Store: st}
	met, err := newMetrics(prometheus.NewRegistry(), noLag{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c := newCheckpointer(store, memberSet(b, model), noCommit{}, met, slog.New(slog.DiscardHandler), between, time.Minute, nil, 0)

	var mu sync.Mutex
	var largest int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			n := dirBytes(b, dir)
			mu.Lock()
			largest = max(largest, n)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()

	var sc online.Score
	for k := range events {
		model.Step(online.Event{User: fmt.Sprint("u", r.IntN(users)), Item: fmt.Sprint("i", r.IntN(items))}, &sc)
		if err := c.after(ctx, &consumer.Result{Pos: input.Position{Topic: "t", Offset: int64(k)}, BatchEnd: true}, noFlush{}); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); paced && c.saving && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
			c.poll()
		}
	}
	if err := c.finish(ctx, true); err != nil {
		b.Fatal(err)
	}
	c.close()
	close(stop)
	<-sampled
	final := dirBytes(b, dir)
	b.Logf("at the end: %s", dirSummary(dir))
	if err := store.Close(); err != nil {
		b.Fatal(err)
	}
	var enc countingWriter
	if _, err := model.WriteTo(&enc); err != nil {
		b.Fatal(err)
	}
	mb := func(n int64) float64 { return float64(n) / 1e6 }
	checkpoints := metricValue(b, met.checkpoints).GetCounter().GetValue()
	b.ReportMetric(mb(enc.n), "model-MB")
	b.ReportMetric(mb(largest), "dir-max-MB")
	b.ReportMetric(float64(largest)/float64(enc.n), "dir-max/model")
	b.ReportMetric(float64(final)/float64(enc.n), "dir-end/model")
	b.ReportMetric(checkpoints, "checkpoints")
	b.ReportMetric(metricValue(b, met.checkpointBases).GetCounter().GetValue(), "bases")
	b.ReportMetric(mb(store.written.Load())/checkpoints, "written-MB/checkpoint")
	pause := metricValue(b, met.checkpointPause).GetHistogram()
	save := metricValue(b, met.checkpointDuration).GetHistogram()
	b.ReportMetric(1e3*pause.GetSampleSum()/float64(max(pause.GetSampleCount(), 1)), "pause-ms")
	b.ReportMetric(1e3*save.GetSampleSum()/float64(max(save.GetSampleCount(), 1)), "save-ms")
	b.ReportMetric(0, "ns/op")
}

// dirBytes is the space the files of dir occupy (allocated blocks: Badger's
// logs are sparse until written).
func dirBytes(b *testing.B, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Error(err)
		return 0
	}
	var n int64
	for _, e := range entries {
		info, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
	}
	return n
}

// dirSummary counts the value-log files, tables and memtable logs of a
// Badger directory and their allocated MB.
func dirSummary(dir string) string {
	entries, _ := os.ReadDir(dir)
	count, size := map[string]int{}, map[string]int64{}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		info, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			count[ext]++
			size[ext] += st.Blocks * 512
		}
	}
	out := ""
	for _, ext := range []string{".vlog", ".sst", ".mem"} {
		out += fmt.Sprintf("%d %s files %.0f MB; ", count[ext], ext, float64(size[ext])/1e6)
	}
	return out
}

func metricValue(tb testing.TB, c prometheus.Collector) *dto.Metric {
	tb.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		tb.Fatal(err)
	}
	return &m
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
