package state

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"denoiser/internal/disktest"
)

// TestFullDiskRefusesSave fills the store's filesystem (a small tmpfs):
// Save must return ErrNoSpace, never let Badger fault on a mapped page,
// and leave the last checkpoint as it was; once space is freed the next
// Save commits.
func TestFullDiskRefusesSave(t *testing.T) {
	mnt := disktest.Tmpfs(t, 48<<20)
	s := openT(t, filepath.Join(mnt, "state"), noGC)
	ctx := context.Background()
	first := genCheckpoint(1, 6<<20)
	if err := s.Save(ctx, first); err != nil {
		t.Fatal(err)
	}
	ballast := disktest.Fill(t, mnt)

	err := s.Save(ctx, genCheckpoint(2, 6<<20))
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Save on a full disk: %v, want ErrNoSpace", err)
	}
	if !strings.Contains(err.Error(), "0 B free on the filesystem of") {
		t.Errorf("the error does not say what is free: %v", err)
	}
	t.Logf("refused: %v", err)
	// A small model, a single chunk, is refused as well.
	if err := s.Save(ctx, genCheckpoint(2, 100)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Save of a small model on a full disk: %v, want ErrNoSpace", err)
	}
	cp, ok, err := s.Load(ctx)
	if err != nil || !ok {
		t.Fatalf("Load on a full disk: ok=%v err=%v", ok, err)
	}
	equalCheckpoint(t, cp, first)

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	second := genCheckpoint(2, 6<<20)
	if err := s.Save(ctx, second); err != nil {
		t.Fatalf("Save after space was freed: %v", err)
	}
	cp, _, err = s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	equalCheckpoint(t, cp, second)
}

// TestFullDiskOpen: Open on a full filesystem returns ErrNoSpace, for a new
// store and for one holding a checkpoint, instead of faulting in Badger's
// start (new log files, the flush of replayed memtables). With space back,
// the checkpoint is there.
func TestFullDiskOpen(t *testing.T) {
	mnt := disktest.Tmpfs(t, 32<<20)
	dir := filepath.Join(mnt, "state")
	s, err := Open(dir, noGC)
	if err != nil {
		t.Fatal(err)
	}
	want := genCheckpoint(1, 5<<20)
	if err := s.Save(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ballast := disktest.Fill(t, mnt)
	for _, d := range []string{dir, filepath.Join(mnt, "new")} {
		s, err := Open(d, noGC)
		if !errors.Is(err, ErrNoSpace) {
			if err == nil {
				s.Close()
			}
			t.Fatalf("Open %s on a full disk: %v, want ErrNoSpace", d, err)
		}
		t.Logf("refused: %v", err)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, noGC)
	cp, ok, err := s.Load(context.Background())
	if err != nil || !ok {
		t.Fatalf("Load after space was freed: ok=%v err=%v", ok, err)
	}
	equalCheckpoint(t, cp, want)
}

// TestFullDiskOwnGarbage saves a model many times over on a filesystem that
// holds a few copies of it, with the collector running: superseded copies
// must not fill it for good. A save the free space does not cover is
// refused, the refusal starts a collection, and a later save commits; no
// save faults.
func TestFullDiskOwnGarbage(t *testing.T) {
	const (
		disk      = 128 << 20
		modelSize = 6 << 20
		saves     = 50 // 300 MiB through a 128 MiB filesystem
	)
	mnt := disktest.Tmpfs(t, disk)
	dir := filepath.Join(mnt, "state")
	s := openT(t, dir, Options{GCInterval: time.Second})
	ctx := context.Background()
	refused, maxUsed := 0, int64(0)
	for v := uint64(1); v <= saves; v++ {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := s.Save(ctx, genCheckpoint(v, modelSize))
			if err == nil {
				break
			}
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("Save %d: %v", v, err)
			}
			refused++
			if time.Now().After(deadline) {
				t.Fatalf("Save %d still refused after 30s: the collector freed nothing: %v", v, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		maxUsed = max(maxUsed, disktest.Used(t, dir))
	}
	cp, ok, err := s.Load(ctx)
	if err != nil || !ok || cp.Version != saves {
		t.Fatalf("final Load: version %d ok=%v err=%v", cp.Version, ok, err)
	}
	if err := checkGenCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d saves of %d MiB on a %d MiB filesystem: %d refused for space and retried; state directory at most %.1f MiB",
		saves, modelSize>>20, disk>>20, refused, float64(maxUsed)/(1<<20))
}

// TestReadOnlyOpen: a store on a filesystem mounted read-only is refused by
// Open with EROFS, a clear error rather than Badger's first failed write.
func TestReadOnlyOpen(t *testing.T) {
	mnt := disktest.Tmpfs(t, 16<<20)
	dir := filepath.Join(mnt, "state")
	s, err := Open(dir, noGC)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(context.Background(), genCheckpoint(1, 100)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	disktest.Remount(t, mnt, "ro")
	s, err = Open(dir, noGC)
	if !errors.Is(err, syscall.EROFS) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open on a read-only filesystem: %v, want EROFS", err)
	}
	t.Logf("refused: %v", err)
	disktest.Remount(t, mnt, "rw")
	s = openT(t, dir, noGC)
	if cp, ok, err := s.Load(context.Background()); err != nil || !ok || cp.Version != 1 {
		t.Fatalf("Load once writable again: version %d ok=%v err=%v", cp.Version, ok, err)
	}
}

// BenchmarkSpaceCheck is the check a Save makes before each 4 MiB chunk
// and its commit (statfs and a listing of the directory), on a store that
// holds a few checkpoints: compare with BenchmarkSave's time per save.
func BenchmarkSpaceCheck(b *testing.B) {
	s := openT(b, b.TempDir(), noGC)
	for v := uint64(1); v <= 8; v++ {
		if err := s.Save(context.Background(), genCheckpoint(v, 32<<20)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ensureSpace(chunkSize, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFullDiskRefusesDelta: the free-space checks cover deltas as they
// cover bases. On a full filesystem a delta, small or of several chunks,
// is refused with ErrNoSpace and leaves the chain as it was; once space
// is freed the same delta (against the same generation) commits.
func TestFullDiskRefusesDelta(t *testing.T) {
	mnt := disktest.Tmpfs(t, 48<<20)
	s := openT(t, filepath.Join(mnt, "state"), noGC)
	ctx := context.Background()
	const base = 10 << 20
	baseSize := func(uint64) int { return base }
	saved, err := saveChained(ctx, s, 1, base, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if saved, err = saveChained(ctx, s, 2, base, 1000, saved.Generation); err != nil || !saved.Delta {
		t.Fatalf("first delta: %+v, %v", saved, err)
	}
	ballast := disktest.Fill(t, mnt)
	for _, size := range []int{100, chunkSize + 100} {
		_, err := saveChained(ctx, s, 3, base, size, saved.Generation)
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("a delta of %d bytes on a full disk: %v, want ErrNoSpace", size, err)
		}
	}
	cp, ok, err := s.Load(ctx)
	if err != nil || !ok || len(cp.Deltas) != 1 || checkChain(cp, baseSize) != nil {
		t.Fatalf("Load on a full disk: ok=%v, %d deltas, err=%v, chain %v", ok, len(cp.Deltas), err, checkChain(cp, baseSize))
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if saved, err = saveChained(ctx, s, 3, base, chunkSize+100, saved.Generation); err != nil || !saved.Delta {
		t.Fatalf("the delta after space was freed: %+v, %v", saved, err)
	}
	cp, _, err = s.Load(ctx)
	if err != nil || len(cp.Deltas) != 2 {
		t.Fatalf("after the delta: %d deltas, %v", len(cp.Deltas), err)
	}
	if err := checkChain(cp, baseSize); err != nil {
		t.Fatal(err)
	}
}

// TestSmallModelDirectoryBound saves a model of 1.5 MiB (above Badger's
// value threshold, so in the value log) forty times over, each save a new
// base followed by the collection a new base asks for, and measures the
// directory's allocated size after each save and each collection: it
// stays within 3 × the model. Badger never collects the value-log file it
// is writing; before the store had it start a new file after every
// transaction (ValueLogMaxEntries 0), superseded copies piled up in that
// file until it reached its size (64 MiB then): 41 × this model.
func TestSmallModelDirectoryBound(t *testing.T) {
	const (
		modelSize = 3 << 19 // 1.5 MiB
		saves     = 40
	)
	dir := t.TempDir()
	s := openT(t, dir, Options{GCInterval: -1})
	ctx := context.Background()
	var most int64
	for v := uint64(1); v <= saves; v++ {
		if err := s.Save(ctx, Checkpoint{Model: randModel(modelSize, v), Version: v}); err != nil {
			t.Fatalf("Save %d: %v", v, err)
		}
		most = max(most, disktest.Used(t, dir))
		if r := s.collect(); r.err != nil {
			t.Fatalf("collect after save %d: %v", v, r.err)
		}
		most = max(most, disktest.Used(t, dir))
	}
	cp, ok, err := s.Load(ctx)
	if err != nil || !ok || cp.Version != saves || !bytes.Equal(cp.Model, randModel(modelSize, saves)) {
		t.Fatalf("final Load: version %d ok=%v err=%v", cp.Version, ok, err)
	}
	ratio := float64(most) / modelSize
	t.Logf("%d saves of a %.1f MiB model: the directory at most %.2f MiB, %.2f × the model", saves, float64(modelSize)/(1<<20), float64(most)/(1<<20), ratio)
	if ratio > 3 {
		t.Errorf("the directory reached %.2f × the model, want at most 3 ×", ratio)
	}
}

// TestPseudoFilesystemIsNotFull: a store under /proc is refused as a
// directory on no disk at all, not as a full disk (ErrNoSpace), whose
// fix (free some space) would not help.
func TestPseudoFilesystemIsNotFull(t *testing.T) {
	err := ensureSpace("/proc/denoiser-state", 1<<20, 1<<20)
	if err == nil || errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "no storage") {
		t.Fatalf("ensureSpace under /proc: %v, want the filesystem named as having no storage", err)
	}
	if err := ensureSpace(t.TempDir(), 1, 0); err != nil {
		t.Fatalf("ensureSpace in a temporary directory: %v", err)
	}
}
