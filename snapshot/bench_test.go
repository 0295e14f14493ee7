package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"denoiser/consumer/input"
	"denoiser/internal/heapstat"
	"denoiser/online"
)

const (
	benchUsers         = 1_000_000
	benchItems         = 100_000
	benchEventsPerUser = 2
)

var big struct {
	once  sync.Once
	m     *online.Model
	build time.Duration
}

// bigModel builds, once per process, a default-configuration model (binary
// mode, d = 32, 4 negatives per event, sketch co-occurrence) by stepping
// 2,000,000 events: every one of 1,000,000 users clicks 2 items, and the
// item of event e is a bijection of e mod 100,000, so that every item
// appears 20 times. It is a real model, built by the only constructor
// there is; its numbers are not meant to be meaningful.
func bigModel(b *testing.B) *online.Model {
	big.once.Do(func() {
		start := time.Now()
		m, err := online.New(online.Config{}, rand.NewPCG(1, 2))
		if err != nil {
			b.Fatal(err)
		}
		var sc online.Score
		for e := range benchUsers * benchEventsPerUser {
			u := e / benchEventsPerUser
			i := (e % benchItems) * 7919 % benchItems // 7919 is prime to 100,000
			ev := online.Event{User: fmt.Sprint("user-", u), Item: fmt.Sprint("item-", i)}
			if err := m.Step(ev, &sc); err != nil {
				b.Fatal(err)
			}
		}
		big.m, big.build = m, time.Since(start)
	})
	if big.m == nil {
		b.Fatal("building the model failed")
	}
	if big.m.NumUsers() != benchUsers || big.m.NumItems() != benchItems || big.m.Dim() != 32 {
		b.Fatalf("model has %d users, %d items, d=%d", big.m.NumUsers(), big.m.NumItems(), big.m.Dim())
	}
	return big.m
}

// BenchmarkSnapshot1M exports (WriteFile: encode, frame, checksum, fsync,
// rename) and imports (ReadFile: verify and decode) a model of 1,000,000
// users and 100,000 items at d = 32. It reports the file size, the live
// heap before the operation (the model and the benchmark's own data), and
// the heap's peak above that during it.
//
//	go test ./snapshot -run '^$' -bench Snapshot1M -benchtime 3x -timeout 30m
func BenchmarkSnapshot1M(b *testing.B) {
	m := bigModel(b)
	b.Logf("model built from %d events in %v", m.Version(), big.build.Round(time.Second))
	path := filepath.Join(b.TempDir(), "big.snap")

	b.Run("export", func(b *testing.B) {
		base := heapstat.Now()
		stop := heapstat.Peak()
		var info Info
		for b.Loop() {
			var err error
			if info, err = WriteFile(path, Contents{Model: m, Positions: []input.Position{{Topic: "clicks", Offset: int64(m.Version())}}}); err != nil {
				b.Fatal(err)
			}
		}
		peak := stop()
		b.SetBytes(info.Bytes)
		b.ReportMetric(float64(info.Bytes)/(1<<20), "file-MiB")
		b.ReportMetric(float64(base)/(1<<20), "heap-before-MiB")
		b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "heap-peak-above-MiB")
	})

	// The parts: the stream's pause for a live export is about "encode"
	// (written to the page cache instead of io.Discard), of which
	// "frame-encoded-bytes" is this package's framing and checksums; most
	// of "import" is online.ReadModel ("decode-model-only").
	b.Run("encode", func(b *testing.B) {
		var info Info
		for b.Loop() {
			var err error
			if info, err = Write(io.Discard, Contents{Model: m}); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(info.Bytes)
	})
	var enc bytes.Buffer
	if _, err := m.WriteTo(&enc); err != nil {
		b.Fatal(err)
	}
	b.Run("frame-encoded-bytes", func(b *testing.B) {
		var info Info
		for b.Loop() {
			var err error
			if info, err = Write(io.Discard, Contents{ModelBytes: enc.Bytes()}); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(info.Bytes)
	})
	b.Run("decode-model-only", func(b *testing.B) {
		for b.Loop() {
			if _, err := online.ReadModel(bytes.NewReader(enc.Bytes())); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			runtime.GC()
			b.StartTimer()
		}
		b.SetBytes(int64(enc.Len()))
	})
	enc = bytes.Buffer{}

	b.Run("import", func(b *testing.B) {
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		base := heapstat.Now()
		stop := heapstat.Peak()
		for b.Loop() {
			s, err := ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			if s.Model.NumUsers() != benchUsers {
				b.Fatalf("read %d users", s.Model.NumUsers())
			}
			s = nil
			b.StopTimer()
			runtime.GC() // one read model at a time
			b.StartTimer()
		}
		peak := stop()
		b.SetBytes(fi.Size())
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
		b.ReportMetric(float64(base)/(1<<20), "heap-before-MiB")
		b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "heap-peak-above-MiB")
	})
}
