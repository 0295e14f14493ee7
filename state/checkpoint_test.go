package state

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"denoiser/consumer/input"
	"denoiser/internal/heapstat"
)

func randModel(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// equalCheckpoint compares what Save takes (Generation and SavedAt are
// Load's outputs and compared separately).
func equalCheckpoint(t *testing.T, got, want Checkpoint) {
	t.Helper()
	if !bytes.Equal(got.Model, want.Model) {
		t.Errorf("model: got %d bytes, want %d (equal length: %v)", len(got.Model), len(want.Model), len(got.Model) == len(want.Model))
	}
	if got.Version != want.Version {
		t.Errorf("version: got %d, want %d", got.Version, want.Version)
	}
	if len(got.Positions) != 0 || len(want.Positions) != 0 {
		if !reflect.DeepEqual(got.Positions, want.Positions) {
			t.Errorf("positions:\n got %v\nwant %v", got.Positions, want.Positions)
		}
	}
}

func TestLoadEmpty(t *testing.T) {
	s := openT(t, t.TempDir(), noGC)
	cp, ok, err := s.Load(context.Background())
	if err != nil || ok {
		t.Fatalf("Load on empty store: ok=%v err=%v", ok, err)
	}
	if !reflect.DeepEqual(cp, Checkpoint{}) {
		t.Fatalf("Load on empty store returned %+v", cp)
	}
	if _, ok, err := s.Position(context.Background(), "clicks", 0); ok || err != nil {
		t.Fatalf("Position on empty store: ok=%v err=%v", ok, err)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		cp   Checkpoint
	}{
		{"empty", Checkpoint{}},
		{"model only", Checkpoint{Model: []byte("weights"), Version: 1}},
		{"positions only", Checkpoint{Positions: []input.Position{{Topic: "clicks", Partition: 0, Offset: 17}}}},
		{"one chunk exactly", Checkpoint{Model: randModel(chunkSize, 1), Version: 7}},
		{"chunk plus one byte", Checkpoint{Model: randModel(chunkSize+1, 2), Version: 8}},
		{"two and a half chunks", Checkpoint{Model: randModel(chunkSize*5/2, 3), Version: 9}},
		{"small inline model", Checkpoint{Model: randModel(100<<10, 4), Version: 10}},
		{"many partitions and topics", Checkpoint{
			Model:   []byte{1, 2, 3},
			Version: 1 << 40,
			Positions: []input.Position{
				{Topic: "clicks", Partition: 0, Offset: 0},
				{Topic: "clicks", Partition: 1, Offset: 5},
				{Topic: "clicks", Partition: 10, Offset: 1 << 50},
				{Topic: "clicks", Partition: 2, Offset: 7},
				{Topic: "views", Partition: 0, Offset: 3},
				{Topic: "file:testdata/a/b.jsonl", Partition: 0, Offset: 12}, // '/' in a topic
				{Topic: "odd%2Fname", Partition: 0, Offset: 1},               // looks escaped
				{Topic: "odd/name", Partition: 0, Offset: 2},
			},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t, t.TempDir(), noGC)
			ctx := context.Background()
			before := time.Now()
			if err := s.Save(ctx, tc.cp); err != nil {
				t.Fatalf("Save: %v", err)
			}
			got, ok, err := s.Load(ctx)
			if err != nil || !ok {
				t.Fatalf("Load: ok=%v err=%v", ok, err)
			}
			want := tc.cp
			want.Positions = sortedPositions(want.Positions)
			equalCheckpoint(t, got, want)
			if got.Generation != 1 {
				t.Errorf("generation %d, want 1", got.Generation)
			}
			if got.SavedAt.Before(before.Add(-time.Second)) || got.SavedAt.After(time.Now().Add(time.Second)) {
				t.Errorf("SavedAt %v not around now", got.SavedAt)
			}
			for _, p := range tc.cp.Positions {
				next, ok, err := s.Position(ctx, p.Topic, p.Partition)
				if err != nil || !ok || next != p.Offset {
					t.Errorf("Position(%q, %d) = %d, %v, %v; want %d", p.Topic, p.Partition, next, ok, err, p.Offset)
				}
			}
		})
	}
}

func sortedPositions(ps []input.Position) []input.Position {
	if ps == nil {
		return nil
	}
	out := append([]input.Position(nil), ps...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			a, b := out[i], out[j]
			if b.Topic < a.Topic || (b.Topic == a.Topic && b.Partition < a.Partition) {
				out[i], out[j] = b, a
			}
		}
	}
	return out
}

// TestOverwriteKeepsOnlyLatest: a checkpoint replaces the previous one
// entirely, including a smaller model and fewer partitions.
func TestOverwriteKeepsOnlyLatest(t *testing.T) {
	s := openT(t, t.TempDir(), noGC)
	ctx := context.Background()
	first := Checkpoint{
		Model:     randModel(3*chunkSize+5, 1),
		Version:   100,
		Positions: []input.Position{{Topic: "clicks", Partition: 0, Offset: 10}, {Topic: "clicks", Partition: 1, Offset: 11}, {Topic: "clicks", Partition: 2, Offset: 12}},
	}
	second := Checkpoint{
		Model:     randModel(1000, 2),
		Version:   200,
		Positions: []input.Position{{Topic: "clicks", Partition: 1, Offset: 21}, {Topic: "views", Partition: 0, Offset: 1}},
	}
	for _, cp := range []Checkpoint{first, second} {
		if err := s.Save(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := s.Load(ctx)
	if err != nil || !ok {
		t.Fatalf("Load: ok=%v err=%v", ok, err)
	}
	equalCheckpoint(t, got, second)
	if got.Generation != 2 {
		t.Errorf("generation %d, want 2", got.Generation)
	}
	for _, p := range []int32{0, 2} {
		if next, ok, err := s.Position(ctx, "clicks", p); ok || err != nil {
			t.Errorf("clicks/%d still has a position (%d, %v) after it left the checkpoint", p, next, err)
		}
	}
	// The empty checkpoint is a checkpoint too: it clears everything.
	if err := s.Save(ctx, Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	got, ok, err = s.Load(ctx)
	if err != nil || !ok || len(got.Model) != 0 || len(got.Positions) != 0 || got.Generation != 3 {
		t.Fatalf("after empty Save: %+v ok=%v err=%v", got, ok, err)
	}
}

func TestLargeModel(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB model")
	}
	s := openT(t, t.TempDir(), noGC)
	ctx := context.Background()
	cp := Checkpoint{Model: randModel(64<<20, 42), Version: 1, Positions: []input.Position{{Topic: "clicks", Partition: 0, Offset: 99}}}
	start := time.Now()
	if err := s.Save(ctx, cp); err != nil {
		t.Fatal(err)
	}
	saved := time.Since(start)
	start = time.Now()
	got, ok, err := s.Load(ctx)
	if err != nil || !ok {
		t.Fatalf("Load: ok=%v err=%v", ok, err)
	}
	t.Logf("64 MiB: Save %v, Load %v", saved, time.Since(start))
	equalCheckpoint(t, got, cp)
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cp := Checkpoint{Model: randModel(chunkSize+123, 5), Version: 3, Positions: []input.Position{{Topic: "clicks", Partition: 0, Offset: 7}, {Topic: "clicks", Partition: 1, Offset: 8}}}

	s, err := Open(dir, noGC)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Checkpoint{{Model: []byte("old")}, cp} {
		if err := s.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openT(t, dir, noGC)
	got, ok, err := s.Load(ctx)
	if err != nil || !ok {
		t.Fatalf("Load after reopen: ok=%v err=%v", ok, err)
	}
	equalCheckpoint(t, got, cp)
	if got.Generation != 2 {
		t.Errorf("generation %d after reopen, want 2", got.Generation)
	}
	// Generations continue across restarts.
	if err := s.Save(ctx, Checkpoint{Version: 4}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Load(ctx); got.Generation != 3 {
		t.Errorf("generation %d after a Save following reopen, want 3", got.Generation)
	}
}

func TestSaveInvalid(t *testing.T) {
	s := openT(t, t.TempDir(), noGC)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ps   []input.Position
	}{
		{"empty topic", []input.Position{{Topic: "", Partition: 0, Offset: 1}}},
		{"negative partition", []input.Position{{Topic: "t", Partition: -1, Offset: 1}}},
		{"negative offset", []input.Position{{Topic: "t", Partition: 0, Offset: -1}}},
		{"duplicate partition", []input.Position{{Topic: "t", Partition: 0, Offset: 1}, {Topic: "t", Partition: 0, Offset: 2}}},
		{"long topic", []input.Position{{Topic: string(make([]byte, maxTopicLen+1)), Partition: 0, Offset: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Save(ctx, Checkpoint{Positions: tc.ps})
			if !errors.Is(err, ErrInvalidCheckpoint) {
				t.Fatalf("Save = %v, want ErrInvalidCheckpoint", err)
			}
		})
	}
	if _, ok, err := s.Load(ctx); ok || err != nil {
		t.Fatalf("an invalid checkpoint was stored: ok=%v err=%v", ok, err)
	}
}

func TestSaveCanceled(t *testing.T) {
	s := openT(t, t.TempDir(), noGC)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Save(ctx, Checkpoint{Model: []byte("x")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with canceled ctx = %v", err)
	}
	if _, ok, err := s.Load(context.Background()); ok || err != nil {
		t.Fatalf("canceled Save left a checkpoint: ok=%v err=%v", ok, err)
	}
	if _, _, err := s.Load(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Load with canceled ctx = %v", err)
	}
}

// TestSaveFromFailureKeepsPrevious: a SaveFrom that fails after writing
// some chunks (the writer fails, or ctx ends between transactions) leaves the
// previous checkpoint in place; the collector drops what it wrote, and the
// next save takes the generation it would have had.
func TestSaveFromFailureKeepsPrevious(t *testing.T) {
	ctx := context.Background()
	s := openT(t, t.TempDir(), noGC)
	first := genCheckpoint(1, chunkSize+10)
	if err := s.Save(ctx, first); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		write func(io.Writer) error
		want  error
	}{
		{"writer fails", ctx, func(w io.Writer) error {
			if _, err := w.Write(make([]byte, chunksPerTxn*chunkSize+5)); err != nil { // one transaction written
				return err
			}
			return boom
		}, boom},
		{"ctx ends between transactions", cctx, func(w io.Writer) error {
			if _, err := w.Write(make([]byte, chunksPerTxn*chunkSize)); err != nil {
				return err
			}
			cancel()
			_, err := w.Write(make([]byte, chunksPerTxn*chunkSize))
			return err
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.SaveFrom(tc.ctx, Checkpoint{Version: 9}, tc.write)
			if !errors.Is(err, tc.want) {
				t.Fatalf("SaveFrom = %v, want %v", err, tc.want)
			}
			got, ok, err := s.Load(ctx)
			if err != nil || !ok {
				t.Fatalf("Load: ok=%v err=%v", ok, err)
			}
			equalCheckpoint(t, got, first)
			if got.Generation != 1 {
				t.Fatalf("generation %d, want 1", got.Generation)
			}
		})
	}
	if n, err := s.dropSuperseded(); err != nil || n != 1 {
		t.Fatalf("collector dropped %d generations (%v), want the failed one", n, err)
	}
	second := genCheckpoint(2, 10)
	if err := s.Save(ctx, second); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Load(ctx)
	if err != nil || got.Generation != 2 {
		t.Fatalf("after a failed save: generation %d, %v", got.Generation, err)
	}
	equalCheckpoint(t, got, second)
	if err := s.SaveFrom(ctx, Checkpoint{Model: []byte("x")}, func(io.Writer) error { return nil }); !errors.Is(err, ErrInvalidCheckpoint) {
		t.Fatalf("SaveFrom with Model set = %v", err)
	}
}

// TestLoadDetectsCorruption: damage behind the store's back is reported,
// never returned as a checkpoint.
func TestLoadDetectsCorruption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(txn *badger.Txn) error
	}{
		{"chunk rewritten", func(txn *badger.Txn) error {
			return txn.Set(modelKey(1, 1), randModel(chunkSize, 99))
		}},
		{"chunk missing", func(txn *badger.Txn) error {
			return txn.Delete(modelKey(1, 2))
		}},
		{"chunk truncated", func(txn *badger.Txn) error {
			return txn.Set(modelKey(1, 0), []byte("short"))
		}},
		{"position added", func(txn *badger.Txn) error {
			return txn.Set(posKey("intruder", 0), make([]byte, 8))
		}},
		{"position malformed", func(txn *badger.Txn) error {
			return txn.Set(posKey("clicks", 0), []byte{1})
		}},
		{"unknown layout", func(txn *badger.Txn) error {
			rec := record{generation: 1}.encode()
			rec[4] = 9
			return txn.Set([]byte(recordKey), rec)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t, t.TempDir(), noGC)
			ctx := context.Background()
			cp := Checkpoint{Model: randModel(2*chunkSize+10, 1), Positions: []input.Position{{Topic: "clicks", Partition: 0, Offset: 5}}}
			if err := s.Save(ctx, cp); err != nil {
				t.Fatal(err)
			}
			if err := s.db.Update(tc.damage); err != nil {
				t.Fatal(err)
			}
			if got, ok, err := s.Load(ctx); !errors.Is(err, ErrCorrupt) || ok {
				t.Fatalf("Load of damaged store: %d model bytes, ok=%v, err=%v; want ErrCorrupt", len(got.Model), ok, err)
			}
		})
	}
}

// TestConcurrentSaveLoad: one goroutine saves while others load (and the
// collector drops superseded generations beside them). Every checkpoint is
// built so that any mix of two is detectable; every Load must return a
// whole checkpoint, and generations never go back.
func TestConcurrentSaveLoad(t *testing.T) {
	const saves = 40
	s := openT(t, t.TempDir(), Options{GCInterval: 2 * time.Millisecond, NoSync: true})
	ctx := context.Background()

	var (
		done    atomic.Bool
		wg      sync.WaitGroup
		loads   atomic.Int64
		lastGen atomic.Uint64 // generation of the last Save that returned
	)
	wg.Go(func() {
		defer done.Store(true)
		for v := uint64(1); v <= saves; v++ {
			if err := s.Save(ctx, genCheckpoint(v, chunkSize+int(v)*50_000)); err != nil {
				t.Errorf("Save %d: %v", v, err)
				return
			}
			lastGen.Store(v)
		}
	})
	for range 2 {
		wg.Go(func() {
			var prev uint64
			for !done.Load() {
				floor := lastGen.Load()
				cp, ok, err := s.Load(ctx)
				if err != nil {
					t.Errorf("Load: %v", err)
					return
				}
				loads.Add(1)
				if !ok {
					if floor > 0 {
						t.Errorf("Load found nothing after generation %d committed", floor)
					}
					continue
				}
				if err := checkGenCheckpoint(cp); err != nil {
					t.Errorf("torn read: %v", err)
					return
				}
				if cp.Generation != cp.Version {
					t.Errorf("generation %d holds version %d", cp.Generation, cp.Version)
				}
				if cp.Generation < prev || cp.Generation < floor {
					t.Errorf("generation went back: %d after %d (last committed before the Load: %d)", cp.Generation, prev, floor)
				}
				prev = cp.Generation
			}
		})
	}
	wg.Wait()
	t.Logf("%d saves, %d concurrent loads", saves, loads.Load())
	cp, ok, err := s.Load(ctx)
	if err != nil || !ok || cp.Version != saves {
		t.Fatalf("final Load: version %d ok=%v err=%v", cp.Version, ok, err)
	}
}

// The crash test runs a saver in a child process (this test binary, re-run
// with saverEnv set), kills it with SIGKILL at random moments, and checks
// after each kill that the store opens and holds a whole checkpoint at least
// as new as the last one the child reported committed: a base and deltas
// that all belong to one chain.
const saverEnv = "DENOISER_STATE_TEST_SAVER_DIR"

// runSaver saves checkpoints forever, printing each committed generation.
func runSaver(dir string) int {
	s, err := Open(dir, Options{GCInterval: 3 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	cp, _, err := s.Load(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	since := cp.Generation
	for v := cp.Version + 1; ; v++ {
		saved, err := saveChained(ctx, s, v, crashBaseSize(v), crashDeltaSize(v), since)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		since = saved.Generation
		fmt.Println(v)
	}
}

// The crash test's saver writes bases of 8 to 14 MiB and deltas of 100
// bytes to 2.1 MB, so that chains of a few deltas form and are replaced.
func crashBaseSize(v uint64) int  { return 2*chunkSize + int(v%5)*1_500_000 }
func crashDeltaSize(v uint64) int { return 100 + int(v%4)*700_000 }

func TestCrashNeverTearsACheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	const kills = 6
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(7, 7))
	var committed uint64
	deltas := 0
	for k := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), saverEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan uint64)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if v, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
					lines <- v
				}
			}
		}()
		// Wait for the child's first commit (the child may be slow, under
		// -race), then kill it at a random moment.
		before := committed
		var wait <-chan time.Time
		timeout := time.After(60 * time.Second)
	collect:
		for {
			select {
			case v, ok := <-lines:
				if !ok {
					break collect
				}
				committed = v
				if wait == nil {
					wait = time.After(time.Duration(r.IntN(300)) * time.Millisecond)
				}
			case <-wait:
				break collect
			case <-timeout:
				break collect
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		for v := range lines { // a line printed before the kill is a commit too
			committed = v
		}
		_ = cmd.Wait()
		if committed == before {
			t.Fatalf("kill %d: the saver committed nothing; stderr:\n%s", k+1, stderr.String())
		}

		s, err := Open(dir, noGC)
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k+1, err)
		}
		cp, ok, err := s.Load(context.Background())
		if cerr := s.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil || !ok {
			t.Fatalf("kill %d: Load: ok=%v err=%v", k+1, ok, err)
		}
		if err := checkChain(cp, crashBaseSize); err != nil {
			t.Fatalf("kill %d: torn checkpoint: %v", k+1, err)
		}
		deltas += len(cp.Deltas)
		// The child may have committed one more than it printed.
		if cp.Version < committed || cp.Version > committed+1 {
			t.Fatalf("kill %d: loaded version %d, last reported commit %d", k+1, cp.Version, committed)
		}
		t.Logf("kill %d: child reported %d, store holds generation %d version %d (%d deltas)", k+1, committed, cp.Generation, cp.Version, len(cp.Deltas))
		committed = cp.Version
	}
	if deltas == 0 {
		t.Fatal("every kill found a checkpoint without deltas: the chains were not tested")
	}
}

func BenchmarkSave(b *testing.B) {
	for _, bc := range []struct {
		name   string
		size   int
		noSync bool
	}{
		{"model=1MiB", 1 << 20, false},
		{"model=32MiB", 32 << 20, false},
		{"model=32MiB/nosync", 32 << 20, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := openT(b, b.TempDir(), Options{GCInterval: -1, NoSync: bc.noSync})
			ctx := context.Background()
			cp := Checkpoint{Model: randModel(bc.size, 1)}
			for p := range int32(16) {
				cp.Positions = append(cp.Positions, input.Position{Topic: "clicks", Partition: p, Offset: 1 << 20})
			}
			b.SetBytes(int64(bc.size))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				cp.Version = uint64(i)
				if err := s.Save(ctx, cp); err != nil {
					b.Fatal(err)
				}
				if i++; i%8 == 0 { // keep the disk bounded, as the service does
					b.StopTimer()
					if r := s.collect(); r.err != nil {
						b.Fatal(r.err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkCheckpointMemory compares what saving a 256 MiB model costs in
// heap beyond the model's source: encoding it into a buffer and saving
// that (what the service did before SaveFrom), or SaveFrom, which writes
// it into the store a chunk at a time as it is encoded.
func BenchmarkCheckpointMemory(b *testing.B) {
	const size = 256 << 20
	piece := randModel(64<<10, 3)
	encode := func(w io.Writer) error { // a 256 MiB model, 64 KiB per Write
		for n := 0; n < size; n += len(piece) {
			if _, err := w.Write(piece); err != nil {
				return err
			}
		}
		return nil
	}
	for _, streamed := range []bool{false, true} {
		name := "encode-then-save"
		if streamed {
			name = "save-from"
		}
		b.Run(name, func(b *testing.B) {
			s := openT(b, b.TempDir(), Options{GCInterval: -1, NoSync: true})
			ctx := context.Background()
			base := heapstat.Now()
			stop := heapstat.Peak()
			var buf *bytes.Buffer // the encoding buffer, reused as the service did
			if !streamed {
				buf = bytes.NewBuffer(make([]byte, 0, size))
			}
			for b.Loop() {
				var err error
				if streamed {
					err = s.SaveFrom(ctx, Checkpoint{}, encode)
				} else {
					buf.Reset()
					if err = encode(buf); err == nil {
						err = s.Save(ctx, Checkpoint{Model: buf.Bytes()})
					}
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			peak := stop()
			b.SetBytes(size)
			b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "heap-peak-above-MiB")
		})
	}
}

func BenchmarkLoad(b *testing.B) {
	s := openT(b, b.TempDir(), Options{GCInterval: -1})
	ctx := context.Background()
	const size = 32 << 20
	if err := s.Save(ctx, Checkpoint{Model: randModel(size, 1), Positions: []input.Position{{Topic: "clicks", Partition: 0, Offset: 1}}}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Load(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSaveTooLarge: a checkpoint beyond one transaction's limit is refused
// as a whole, and the previous checkpoint stays.
func TestSaveTooLarge(t *testing.T) {
	s := openT(t, t.TempDir(), noGC)
	ctx := context.Background()
	if err := s.Save(ctx, Checkpoint{Version: 1}); err != nil {
		t.Fatal(err)
	}
	n := int(s.db.MaxBatchCount()) + 1
	cp := Checkpoint{Version: 2, Positions: make([]input.Position, n)}
	for i := range cp.Positions {
		cp.Positions[i] = input.Position{Topic: "clicks", Partition: int32(i), Offset: 1}
	}
	if err := s.Save(ctx, cp); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Save of %d positions = %v, want ErrTooLarge", n, err)
	}
	got, ok, err := s.Load(ctx)
	if err != nil || !ok || got.Version != 1 {
		t.Fatalf("after a refused Save: version %d ok=%v err=%v; want version 1", got.Version, ok, err)
	}
	t.Logf("one checkpoint holds fewer than %d positions", n)
}
