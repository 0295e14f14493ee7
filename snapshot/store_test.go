package snapshot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/online/onlinetest"
)

// memStore is an in-memory checkpoint store with state.Store's semantics:
// Save replaces the checkpoint and numbers generations 1, 2, ...
type memStore struct {
	cp    Checkpoint
	ok    bool
	saves int
}

func (s *memStore) Load(ctx context.Context) (Checkpoint, bool, error) {
	if err := ctx.Err(); err != nil {
		return Checkpoint{}, false, err
	}
	return s.cp, s.ok, nil
}

func (s *memStore) SaveFrom(ctx context.Context, cp Checkpoint, write func(io.Writer) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	cp.Model = buf.Bytes()
	s.put(cp)
	return nil
}

// put stores cp as the next checkpoint.
func (s *memStore) put(cp Checkpoint) {
	s.saves++
	cp.Generation = s.cp.Generation + 1
	s.cp, s.ok = cp, true
}

// TestExportImport: a checkpoint exported and imported into another store
// arrives byte for byte, with its positions and version; the exported
// file's meta names the generation.
func TestExportImport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := onlinetest.New(t, onlinetest.SmallConfig(online.ModeBinary))
	step(t, m, onlinetest.Stream(1500, 10))
	from := &memStore{}
	from.put(Checkpoint{Model: encodeModel(t, m), Positions: testPositions[:2], Version: m.Version()})
	from.put(Checkpoint{Model: encodeModel(t, m), Positions: testPositions, Version: m.Version()})

	path := filepath.Join(dir, "m.snap")
	exp, err := Export(ctx, from, path, Meta{Source: "state test"})
	if err != nil {
		t.Fatal(err)
	}
	if exp.Meta.Generation != 2 || exp.Meta.Source != "state test" || exp.Model.Version() != 1500 {
		t.Fatalf("exported meta %+v, model version %d", exp.Meta, exp.Model.Version())
	}

	to := &memStore{}
	imp, err := Import(ctx, path, to, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.SortedFunc(slices.Values(from.cp.Positions), input.ComparePartitions)
	if !bytes.Equal(to.cp.Model, from.cp.Model) || to.cp.Version != 1500 || !reflect.DeepEqual(to.cp.Positions, sorted) {
		t.Fatalf("imported checkpoint differs: version %d, positions %v", to.cp.Version, to.cp.Positions)
	}
	if imp.Model.Version() != 1500 {
		t.Fatalf("imported snapshot's model version %d", imp.Model.Version())
	}

	// A second import needs Replace.
	if _, err := Import(ctx, path, to, ImportOptions{}); !errors.Is(err, ErrStateNotEmpty) || to.saves != 1 {
		t.Fatalf("import into a non-empty store: %v (%d saves)", err, to.saves)
	}
	if _, err := Import(ctx, path, to, ImportOptions{Replace: true}); err != nil || to.saves != 2 {
		t.Fatalf("import with Replace: %v (%d saves)", err, to.saves)
	}
}

// TestExportRefuses: an empty store or a checkpoint that does not decode
// leaves the destination as it was; a damaged file imports nothing.
func TestExportRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "m.snap")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(ctx, &memStore{}, path, Meta{}); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("export of an empty store: %v", err)
	}
	bad := &memStore{}
	bad.put(Checkpoint{Model: []byte("RGBTMODL garbage")})
	if _, err := Export(ctx, bad, path, Meta{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("export of an undecodable checkpoint: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatal("a failed export replaced the destination")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a failed export left %d files", len(entries))
	}

	good := testSnapshot(t)
	good[len(good)/2] ^= 1
	if err := os.WriteFile(path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	to := &memStore{}
	if _, err := Import(ctx, path, to, ImportOptions{}); !errors.Is(err, ErrChecksum) || to.saves != 0 {
		t.Fatalf("import of a damaged file: %v (%d saves)", err, to.saves)
	}
	if _, err := Import(ctx, filepath.Join(dir, "missing.snap"), to, ImportOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("import of a missing file: %v", err)
	}
}

// TestCopyFile: a stream is copied only if it verifies; a damaged one
// leaves the destination as it was.
func TestCopyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "copy.snap")
	good := testSnapshot(t)
	s, err := CopyFile(path, bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, good) || s.Model.Version() != 2000 {
		t.Fatal("the copy differs from the stream")
	}
	for name, bad := range map[string][]byte{"truncated": good[:len(good)-3], "not a snapshot": []byte("<html>")} {
		if _, err := CopyFile(path, bytes.NewReader(bad)); err == nil {
			t.Fatalf("%s stream copied", name)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, good) {
			t.Fatalf("a failed copy (%s) changed the destination", name)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("failed copies left %d files", len(entries))
	}
}
