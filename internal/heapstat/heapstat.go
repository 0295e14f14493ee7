// Package heapstat measures the live heap for benchmarks that report
// memory: the heap after a collection, and the peak while something runs.
package heapstat

import (
	"runtime"
	"runtime/metrics"
	"time"
)

const heapObjects = "/memory/classes/heap/objects:bytes"

// Now collects garbage and returns the bytes of live heap objects.
func Now() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Peak samples the heap every millisecond until stop is called; stop
// returns the largest value seen.
func Peak() (stop func() uint64) {
	s := []metrics.Sample{{Name: heapObjects}}
	var peak uint64
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); <-finished; return peak }
}

// Allocated runs f and returns the bytes it allocated (the growth of the
// runtime's cumulative allocation count, so it counts any goroutine's
// allocations meanwhile: run it where nothing else allocates).
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
