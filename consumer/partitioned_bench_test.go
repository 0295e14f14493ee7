package consumer

import (
	"context"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"denoiser/online"
)

// BenchmarkRunPartitions measures, in the same run, the events/s of Run
// over one partition and over two, each partition with its own
// online.Model (online.DefaultConfig, as the service runs it; until stop
// 34 the zero Config, without the per-user offset and the dwell mixture),
// the records read from memory and the output discarded, and reports
// their ratio: what stepping the partitions in parallel (Options.Workers
// = GOMAXPROCS) gains.
//
// Beside it, one partition on one core (GOMAXPROCS=1 for that arm: no
// decoding beside the model either), the share of the machine a member of
// a one-partition-per-core deployment gets: "scaling" = 2p ÷ 1p-1core, at
// most 2 on two cores, says whether an instance of two partitions does as
// well as two members of one. And as a ceiling, the same events decoded beforehand and stepped
// on bare goroutines, one per partition, with nothing else running
// ("bare"): the most any loop could gain on this machine, at this moment.
// The arms take turns within each iteration, so that a noisy machine
// weighs on all of them alike. cpu-µs/event is the CPU of the whole
// process per event (every goroutine, the garbage collector included).
//
//	go test ./consumer -run '^$' -bench RunPartitions -benchtime 5x
func BenchmarkRunPartitions(b *testing.B) {
	const n = 40_000
	lines := synthLines(b, n, 5)
	arms := []struct {
		name       string
		partitions int
		procs      int // GOMAXPROCS during the arm; 0 leaves it
	}{{"1p", 1, 0}, {"2p", 2, 0}, {"1p-1core", 1, 1}}
	inputs := [][]Message{spread(lines, 1), spread(lines, 2)}
	decoded := [][][]online.Event{decodeParts(b, inputs[0], 1), decodeParts(b, inputs[1], 2)} // once: the bare arms' garbage would tax the others' collections
	type usage struct{ seconds, cpu float64 }
	loop, bare := make([]usage, len(arms)), make([]usage, 2)
	b.ReportAllocs()
	for b.Loop() {
		for i, arm := range arms {
			set := onlineSet(b, online.DefaultConfig(), 1)
			for p := range int32(arm.partitions) {
				set.For(p) // not timed: an empty model is created once per partition
			}
			procs := runtime.GOMAXPROCS(arm.procs)
			start, cpu0 := time.Now(), cpuSeconds()
			st, err := Run(context.Background(), &messages{msgs: inputs[arm.partitions-1]}, set, discard{}, discard{}, Options{Workers: runtime.GOMAXPROCS(0)})
			loop[i].seconds += time.Since(start).Seconds()
			loop[i].cpu += cpuSeconds() - cpu0
			runtime.GOMAXPROCS(procs)
			if err != nil || st.Scored != n {
				b.Fatal(st, err)
			}
		}
		b.StopTimer() // the bare arms do not count in ns/op nor allocs/op
		for i, events := range decoded {
			s, c := stepBare(b, events)
			bare[i].seconds += s
			bare[i].cpu += c
		}
		b.StartTimer()
	}
	events := float64(b.N * n)
	for i, arm := range arms {
		b.ReportMetric(events/loop[i].seconds, arm.name+"-events/s")
		b.ReportMetric(1e6*loop[i].cpu/events, arm.name+"-cpu-µs/event")
	}
	b.ReportMetric(loop[0].seconds/loop[1].seconds, "ratio")
	b.ReportMetric(loop[2].seconds/loop[1].seconds, "scaling")
	b.ReportMetric(bare[0].seconds/bare[1].seconds, "bare-ratio")
	b.ReportMetric(1e6*bare[0].cpu/events, "bare-1p-cpu-µs/event")
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

// decodeParts decodes msgs and returns the events of each of their
// partitions, in input order.
func decodeParts(b *testing.B, msgs []Message, partitions int) [][]online.Event {
	events := make([][]online.Event, partitions)
	for _, m := range msgs {
		var ev Event
		if err := Decode(m.Value, &ev); err != nil {
			b.Fatal(err)
		}
		events[m.Pos.Partition] = append(events[m.Pos.Partition], ev.Model())
	}
	return events
}

// stepBare steps the events of each partition (decodeParts) on a
// goroutine of its own, each with its own model, and returns the wall and
// CPU seconds it took.
func stepBare(b *testing.B, events [][]online.Event) (seconds, cpu float64) {
	models := make([]*online.Model, len(events))
	for p := range models {
		m, err := online.NewPartition(online.DefaultConfig(), 1, int32(p))
		if err != nil {
			b.Fatal(err)
		}
		models[p] = m
	}
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), cpuSeconds()
	for p, m := range models {
		wg.Go(func() {
			var sc online.Score
			for _, ev := range events[p] {
				if err := m.Step(ev, &sc); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start).Seconds(), cpuSeconds() - cpu0
}

// cpuSeconds is the user+system CPU time of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
