package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"denoiser/consumer/input"
)

// deltaBlob is a delta for the tests: the version it brings the model to,
// the version it applies to, then a pattern of the first, size bytes in
// all.
func deltaBlob(v, from uint64, size int) []byte {
	b := make([]byte, max(size, 16))
	binary.BigEndian.PutUint64(b, v)
	binary.BigEndian.PutUint64(b[8:], from)
	for i := 16; i < len(b); i++ {
		b[i] = byte(v*7) ^ byte(i>>10)
	}
	return b
}

// checkChain checks a checkpoint whose base is a genCheckpoint model and
// whose deltas are deltaBlobs, each applying to the version before it: a
// whole chain ending at cp.Version, not a mix of two.
func checkChain(cp Checkpoint, baseSize func(v uint64) int) error {
	if len(cp.Deltas) == 0 {
		return checkGenCheckpoint(cp)
	}
	from := binary.BigEndian.Uint64(cp.Deltas[0][8:])
	if want := genCheckpoint(from, baseSize(from)).Model; !bytes.Equal(cp.Model, want) {
		return fmt.Errorf("version %d: the base is not version %d's model", cp.Version, from)
	}
	for j, d := range cp.Deltas {
		v := binary.BigEndian.Uint64(d)
		if binary.BigEndian.Uint64(d[8:]) != from || v != from+1 {
			return fmt.Errorf("version %d: delta %d brings %d to %d, after %d", cp.Version, j, binary.BigEndian.Uint64(d[8:]), v, from)
		}
		if !bytes.Equal(d, deltaBlob(v, from, len(d))) {
			return fmt.Errorf("version %d: delta %d is damaged", cp.Version, j)
		}
		from = v
	}
	if from != cp.Version {
		return fmt.Errorf("the chain ends at version %d, the checkpoint is version %d", from, cp.Version)
	}
	if cp.Base != cp.Generation-uint64(len(cp.Deltas)) {
		return fmt.Errorf("base generation %d with %d deltas to generation %d", cp.Base, len(cp.Deltas), cp.Generation)
	}
	return nil
}

// saveChained saves version v with the model genCheckpoint(v, baseSize)
// as its base writer and deltaBlob(v, v-1, deltaSize) as its delta
// against generation since.
func saveChained(ctx context.Context, s *Store, v uint64, baseSize, deltaSize int, since uint64) (Saved, error) {
	cp := genCheckpoint(v, baseSize)
	model := cp.Model
	cp.Model = nil
	delta := deltaBlob(v, v-1, deltaSize)
	return s.SaveModel(ctx, cp, ModelWriter{
		Full:      func(w io.Writer) error { _, err := w.Write(model); return err },
		Delta:     func(w io.Writer) error { _, err := w.Write(delta); return err },
		DeltaSize: int64(len(delta)),
		Since:     since,
	})
}

// keysUnder counts the keys under prefix.
func keysUnder(t *testing.T, s *Store, prefix string) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDeltaChain: a save writes a delta when it offers one against the
// committed generation and the chain has room, else a new base; Load
// returns the base and the deltas in order; a new base takes the old
// chain's blob records with it and the collector its chunks.
func TestDeltaChain(t *testing.T) {
	ctx := context.Background()
	const base = 3*chunkSize + 1000 // four chunks
	baseSize := func(uint64) int { return base }
	s := openT(t, t.TempDir(), Options{GCInterval: -1, MaxDeltas: 3, DeltaShare: 0.5})
	var since uint64
	save := func(v uint64, deltaSize int, wantDelta bool) {
		t.Helper()
		saved, err := saveChained(ctx, s, v, base, deltaSize, since)
		if err != nil {
			t.Fatal(err)
		}
		if saved.Delta != wantDelta || saved.Generation != v {
			t.Fatalf("version %d: saved %+v, want a delta: %v", v, saved, wantDelta)
		}
		cp, ok, err := s.Load(ctx)
		if err != nil || !ok {
			t.Fatalf("Load: ok=%v err=%v", ok, err)
		}
		if err := checkChain(cp, baseSize); err != nil {
			t.Fatal(err)
		}
		since = saved.Generation
	}
	save(1, 100, false)                                             // nothing to apply a delta to
	save(2, 100, true)                                              // a small delta
	save(3, chunkSize+5, true)                                      // a delta of two chunks
	save(4, 200, true)                                              // the third
	save(5, 100, false)                                             // MaxDeltas reached: a new base
	save(6, base/2-100, true)                                       // up to DeltaShare of the base...
	save(7, 200, false)                                             // ...and not beyond
	since = 3                                                       // a delta against a generation not committed
	save(8, 100, false)                                             // is written whole
	if _, err := saveChained(ctx, s, 9, base, 100, 0); err != nil { // no Since: whole
		t.Fatal(err)
	}
	cp, _, _ := s.Load(ctx)
	if len(cp.Deltas) != 0 {
		t.Fatalf("a delta against generation 0 was written: %d deltas", len(cp.Deltas))
	}
	if n := keysUnder(t, s, blobPrefix); n != 1 {
		t.Fatalf("%d blob records after a new base, want 1", n)
	}
	// The collector drops every generation but the committed one's.
	if r := s.collect(); r.err != nil || r.dropped == 0 {
		t.Fatalf("collect: %+v", r)
	}
	if n, want := keysUnder(t, s, modelPrefix), 4; n != want {
		t.Fatalf("%d model chunks after the collection, want %d", n, want)
	}
	since = 9
	save(10, 100, true)
	if r := s.collect(); r.err != nil || r.dropped != 0 {
		t.Fatalf("collect dropped part of the chain: %+v", r)
	}
	cp, _, _ = s.Load(ctx)
	if err := checkChain(cp, baseSize); err != nil || len(cp.Deltas) != 1 {
		t.Fatalf("after a collection: %d deltas, %v", len(cp.Deltas), err)
	}
}

// TestDeltaCorruption: a chain that lacks a part or does not match its
// records is ErrCorrupt.
func TestDeltaCorruption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(txn *badger.Txn) error
	}{
		{"delta chunk missing", func(txn *badger.Txn) error { return txn.Delete(modelKey(3, 1)) }},
		{"delta chunk rewritten", func(txn *badger.Txn) error { return txn.Set(modelKey(2, 0), deltaBlob(9, 9, 100)) }},
		{"blob record missing", func(txn *badger.Txn) error { return txn.Delete(blobKey(2)) }},
		{"base blob record missing", func(txn *badger.Txn) error { return txn.Delete(blobKey(1)) }},
		{"delta named a base", func(txn *badger.Txn) error {
			b := blob{length: 100, chunks: 1}
			return txn.Set(blobKey(2), b.encode())
		}},
		{"blob record malformed", func(txn *badger.Txn) error { return txn.Set(blobKey(3), []byte{1, 2}) }},
		{"delta bytes miscounted", func(txn *badger.Txn) error {
			item, err := txn.Get([]byte(recordKey))
			if err != nil {
				return err
			}
			v, _ := item.ValueCopy(nil)
			binary.BigEndian.PutUint64(v[45:], 1)
			return txn.Set([]byte(recordKey), v)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t, t.TempDir(), noGC)
			ctx := context.Background()
			var since uint64
			for v, size := range []int{0, 100, chunkSize + 10} {
				saved, err := saveChained(ctx, s, uint64(v+1), 3*chunkSize+10, size, since)
				if err != nil {
					t.Fatal(err)
				}
				since = saved.Generation
			}
			if cp, _, err := s.Load(ctx); err != nil || len(cp.Deltas) != 2 {
				t.Fatalf("before the damage: %d deltas, %v", len(cp.Deltas), err)
			}
			if err := s.db.Update(tc.damage); err != nil {
				t.Fatal(err)
			}
			if cp, ok, err := s.Load(ctx); !errors.Is(err, ErrCorrupt) || ok {
				t.Fatalf("Load of a damaged chain: %d deltas, ok=%v, err=%v; want ErrCorrupt", len(cp.Deltas), ok, err)
			}
		})
	}
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestLayout1Directory: a state directory written before deltas existed
// (layout 1) still loads, and the next saves go on from it, first whole
// (a layout-1 checkpoint cannot start a chain), then as deltas.
//
// testdata/layout1 was written by the checkpoint code of main at 6de4b68
// (testdata/layout1-writer.go.txt: three saves of a small online model
// with two positions, no collection); testdata/layout1.model is the model
// of the last save.
func TestLayout1Directory(t *testing.T) {
	dir := copyDir(t, filepath.Join("testdata", "layout1"))
	want, err := os.ReadFile(filepath.Join("testdata", "layout1.model"))
	if err != nil {
		t.Fatal(err)
	}
	s := openT(t, dir, Options{GCInterval: -1})
	ctx := context.Background()
	cp, ok, err := s.Load(ctx)
	if err != nil || !ok {
		t.Fatalf("Load: ok=%v err=%v", ok, err)
	}
	wantPos := []input.Position{{Topic: "clicks", Partition: 0, Offset: 300}, {Topic: "clicks", Partition: 1, Offset: 150}}
	if !bytes.Equal(cp.Model, want) || len(cp.Deltas) != 0 || cp.Generation != 3 || cp.Base != 3 || cp.Version != 600 ||
		fmt.Sprint(cp.Positions) != fmt.Sprint(wantPos) {
		t.Fatalf("loaded generation %d (base %d), version %d, %d model bytes (equal: %v), %d deltas, positions %v",
			cp.Generation, cp.Base, cp.Version, len(cp.Model), bytes.Equal(cp.Model, want), len(cp.Deltas), cp.Positions)
	}
	if time.Since(cp.SavedAt) < 0 || cp.SavedAt.Year() < 2024 {
		t.Fatalf("saved at %v", cp.SavedAt)
	}
	baseSize := func(uint64) int { return 1000 }
	since := cp.Generation
	for v, wantDelta := range []bool{false, true, true} {
		saved, err := saveChained(ctx, s, uint64(601+v), 1000, 50, since)
		if err != nil {
			t.Fatal(err)
		}
		if saved.Delta != wantDelta {
			t.Fatalf("save %d after a layout-1 checkpoint: delta %v, want %v", v+1, saved.Delta, wantDelta)
		}
		since = saved.Generation
	}
	cp, _, err = s.Load(ctx)
	if err != nil || cp.Generation != 6 || len(cp.Deltas) != 2 {
		t.Fatalf("after three saves: generation %d, %d deltas, %v", cp.Generation, len(cp.Deltas), err)
	}
	if err := checkChain(cp, baseSize); err != nil {
		t.Fatal(err)
	}
	// The collector drops layout 1's generations with the rest.
	if r := s.collect(); r.err != nil || r.dropped != 3 {
		t.Fatalf("collect: %+v, want the three layout-1 generations dropped", r)
	}
}

// TestIdleStoreWritesNothing: with nothing new to save, the collector's
// runs change no file of the directory (an idle stream takes no
// checkpoint, and its store must not write either).
func TestIdleStoreWritesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, noGC)
	ctx := context.Background()
	var since uint64
	for v := uint64(1); v <= 4; v++ {
		saved, err := saveChained(ctx, s, v, 3*chunkSize, 1000, since)
		if err != nil {
			t.Fatal(err)
		}
		since = saved.Generation
	}
	if r := s.collect(); r.err != nil {
		t.Fatal(r.err)
	}
	files := func() map[string]string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = fmt.Sprint(info.Size(), info.ModTime().UnixNano())
		}
		return out
	}
	before := files()
	for range 3 {
		if r := s.collect(); r.err != nil || r.dropped != 0 || r.rewrites != 0 {
			t.Fatalf("an idle collection: %+v", r)
		}
	}
	if after := files(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("idle collections changed the directory:\nbefore %v\n after %v", before, after)
	}
}
