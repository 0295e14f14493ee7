package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"denoiser/consumer/input"
)

func TestMain(m *testing.M) {
	if os.Getenv(saverEnv) != "" {
		os.Exit(runSaver(os.Getenv(saverEnv)))
	}
	goleak.VerifyTestMain(m)
}

// openT opens a store in dir and closes it at the end of the test.
func openT(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// noGC disables the background collector, so tests control it.
var noGC = Options{GCInterval: -1}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"ratio", Options{GCDiscardRatio: 0.7}, true},
		{"ratio one", Options{GCDiscardRatio: 1}, false},
		{"ratio negative", Options{GCDiscardRatio: -0.1}, false},
		{"vlog too small", Options{valueLogFileSize: 1 << 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				if _, oerr := Open(t.TempDir(), tc.opts); oerr == nil {
					t.Fatal("Open accepted invalid options")
				}
			}
		})
	}
}

func TestCloseIdempotent(t *testing.T) {
	s, err := Open(t.TempDir(), Options{GCInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Save(ctx, Checkpoint{Model: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	if err := s.Save(ctx, Checkpoint{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Save after Close = %v, want ErrClosed", err)
	}
	if _, _, err := s.Load(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Load after Close = %v, want ErrClosed", err)
	}
	if _, _, err := s.Position(ctx, "t", 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Position after Close = %v, want ErrClosed", err)
	}
}

func TestCloseConcurrent(t *testing.T) {
	s, err := Open(t.TempDir(), Options{GCInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- s.Close() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// TestOpenLocked: a second Open of a held directory fails with ErrLocked
// (Badger says so only in its error's text).
func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	openT(t, dir, noGC)
	s, err := Open(dir, noGC)
	if err == nil {
		s.Close()
		t.Fatal("second Open of the same directory succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}

// TestBadgerLogsRouted checks that Badger's own logger goes to the injected
// slog.Logger, tagged as such.
func TestBadgerLogsRouted(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := Open(t.TempDir(), Options{Logger: log, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "library=badger") {
		t.Fatalf("no Badger log line reached the logger; got:\n%s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// vlogBytes is the total size of the value-log files in dir. Badger
// preallocates the active file to twice ValueLogFileSize (sparse); finished
// files are truncated to their content.
func vlogBytes(t testing.TB, dir string) (files int, size int64) {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		fi, err := os.Stat(m)
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	return len(ms), size
}

// TestGCReclaimsSupersededModels: without collection, every Save leaves its
// model in the value log; one collection drops the superseded generations
// and rewrites the value-log files they filled.
func TestGCReclaimsSupersededModels(t *testing.T) {
	const (
		vlogSize = 4 << 20
		model    = 3 << 20
		saves    = 12
	)
	dir := t.TempDir()
	s := openT(t, dir, Options{GCInterval: -1, NoSync: true, valueLogFileSize: vlogSize})
	ctx := context.Background()
	for i := 1; i <= saves; i++ {
		if err := s.Save(ctx, genCheckpoint(uint64(i), model)); err != nil {
			t.Fatal(err)
		}
	}
	filesBefore, _ := vlogBytes(t, dir)
	r := s.collect()
	if r.err != nil {
		t.Fatal(r.err)
	}
	// More rewrites may be needed than one call allows; keep going.
	for range 10 {
		if next := s.collect(); next.err != nil || next.rewrites == 0 {
			break
		} else {
			r.rewrites += next.rewrites
		}
	}
	filesAfter, _ := vlogBytes(t, dir)
	t.Logf("%d saves of %d MiB: %d vlog files before GC, %d after (generations dropped %d, files rewritten %d)",
		saves, model>>20, filesBefore, filesAfter, r.dropped, r.rewrites)
	if r.dropped != saves-1 {
		t.Errorf("dropped %d generations, want %d", r.dropped, saves-1)
	}
	if filesAfter >= filesBefore || filesAfter > 3 {
		t.Errorf("value log not reclaimed: %d files before, %d after", filesBefore, filesAfter)
	}
	cp, ok, err := s.Load(ctx)
	if err != nil || !ok {
		t.Fatalf("Load after GC: ok=%v err=%v", ok, err)
	}
	if err := checkGenCheckpoint(cp); err != nil || cp.Version != saves {
		t.Fatalf("Load after GC: version %d, %v", cp.Version, err)
	}
	// Nothing left to drop.
	if r := s.collect(); r.err != nil || r.dropped != 0 {
		t.Fatalf("second collect: %+v", r)
	}
}

// TestGCBackground: the background loop runs and drops superseded
// generations by itself.
func TestGCBackground(t *testing.T) {
	dropped := make(chan int, 100)
	s := openT(t, t.TempDir(), Options{
		GCInterval: 5 * time.Millisecond,
		NoSync:     true,
		onGC: func(r gcResult) {
			if r.err != nil {
				t.Errorf("background gc: %v", r.err)
			}
			select {
			case dropped <- r.dropped:
			default:
			}
		},
	})
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if err := s.Save(ctx, genCheckpoint(uint64(i), 1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(10 * time.Second)
	for total := 0; total < 2; {
		select {
		case n := <-dropped:
			total += n
		case <-deadline:
			t.Fatalf("background GC dropped %d generations in 10s, want 2", total)
		}
	}
	if cp, ok, err := s.Load(ctx); err != nil || !ok || cp.Version != 3 {
		t.Fatalf("Load: version %d ok=%v err=%v", cp.Version, ok, err)
	}
}

// genCheckpoint builds checkpoint number v whose every part is derived from
// v, so that a reader can tell a consistent checkpoint from a mix of two.
func genCheckpoint(v uint64, modelSize int) Checkpoint {
	m := make([]byte, modelSize+int(v%7)) // size varies with v too
	for i := range m {
		m[i] = byte(v) ^ byte(i>>12)
	}
	cp := Checkpoint{Model: m, Version: v}
	for p := range 1 + int(v%3) { // the set of partitions varies too
		cp.Positions = append(cp.Positions, input.Position{Topic: "clicks", Partition: int32(p), Offset: int64(v)*1000 + int64(p)})
	}
	return cp
}

// checkGenCheckpoint reports whether cp is exactly genCheckpoint(cp.Version).
func checkGenCheckpoint(cp Checkpoint) error {
	v := cp.Version
	if len(cp.Model) < int(v%7) {
		return fmt.Errorf("version %d: model of %d bytes is too short", v, len(cp.Model))
	}
	want := genCheckpoint(v, len(cp.Model)-int(v%7))
	if !bytes.Equal(cp.Model, want.Model) {
		return fmt.Errorf("version %d: model of %d bytes does not belong to it", v, len(cp.Model))
	}
	if fmt.Sprint(cp.Positions) != fmt.Sprint(want.Positions) {
		return fmt.Errorf("version %d: positions %v, want %v", v, cp.Positions, want.Positions)
	}
	return nil
}

// TestOpenAfterCrashLeftEmptyLogs reproduces what a SIGKILL between Badger's
// creating a log file and sizing it leaves behind: a zero-length .vlog or
// .mem file, which badger.Open (v4.9.6) refuses: "Open existing file:
// ...000042.vlog: Create a new file". Open removes them and opens.
func TestOpenAfterCrashLeftEmptyLogs(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"000042.vlog", "00042.mem"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cp := genCheckpoint(5, chunkSize+1000)
			s := openT(t, dir, noGC)
			if err := s.Save(ctx, cp); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			empty := filepath.Join(dir, name)
			if err := os.WriteFile(empty, nil, 0o644); err != nil {
				t.Fatal(err)
			}

			s = openT(t, dir, noGC)
			got, ok, err := s.Load(ctx)
			if err != nil || !ok {
				t.Fatalf("Load: ok=%v err=%v", ok, err)
			}
			if err := checkGenCheckpoint(got); err != nil || got.Version != 5 {
				t.Fatalf("Load: version %d, %v", got.Version, err)
			}
			if err := s.Save(ctx, genCheckpoint(6, chunkSize+2000)); err != nil {
				t.Fatalf("Save after repair: %v", err)
			}
		})
	}
}

// TestRemoveEmptyLogsLeavesAnOpenStoreAlone checks that the repair never
// touches the directory of a running Badger: a file it is creating is empty
// for a moment too.
func TestRemoveEmptyLogsLeavesAnOpenStoreAlone(t *testing.T) {
	dir := t.TempDir()
	openT(t, dir, noGC)
	empty := filepath.Join(dir, "000077.vlog")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := removeEmptyLogs(dir, slog.New(slog.DiscardHandler))
	if err != nil || len(removed) != 0 {
		t.Fatalf("removeEmptyLogs on an open store: removed %v, err %v", removed, err)
	}
	if _, err := os.Stat(empty); err != nil {
		t.Fatalf("the empty file is gone: %v", err)
	}
	if err := os.Remove(empty); err != nil {
		t.Fatal(err)
	}
}

// TestExists: a directory Open has made holds a store; a missing one, an
// empty one or one of other files does not, and asking creates nothing.
func TestExists(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	s, err := Open(store, Options{GCInterval: -1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		want      bool
	}{
		{"missing", filepath.Join(dir, "missing"), false},
		{"empty", t.TempDir(), false},
		{"other files", other, false},
		{"a store", store, true},
	} {
		before, _ := os.ReadDir(tc.dir)
		got, err := Exists(tc.dir)
		if err != nil || got != tc.want {
			t.Errorf("%s: Exists = %v, %v; want %v", tc.name, got, err, tc.want)
		}
		if after, _ := os.ReadDir(tc.dir); len(after) != len(before) {
			t.Errorf("%s: Exists changed the directory: %d entries, were %d", tc.name, len(after), len(before))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("Exists created a missing directory: %v", err)
	}
}

// TestBadgerLogLinesKeepOneComponent: Badger's lines, through a logger
// that has a component already, carry it once, with library=badger.
func TestBadgerLogLinesKeepOneComponent(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "state")
	badgerLogger{l}.Warningf("value log %d truncated\n", 3)
	line := buf.String()
	if strings.Count(line, `"component"`) != 1 || !strings.Contains(line, `"library":"badger"`) || !strings.Contains(line, `"msg":"value log 3 truncated"`) {
		t.Fatalf("Badger's line: %s", line)
	}
}
