package online

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// fuzzModel is a model of cfg made tiny, so that each fuzz execution
// decodes a whole one, after the events evs.
func fuzzModel(f *testing.F, cfg Config, evs []Event) *Model {
	cfg.Dim, cfg.GMMWindow, cfg.GMMMinSamples, cfg.WarmUp, cfg.RefitEvery = 2, 16, 8, 50, 40
	cfg.SketchUsers, cfg.SketchHashes = 2, 4
	m, err := New(cfg, rand.NewPCG(1, 2))
	if err != nil {
		f.Fatal(err)
	}
	var sc Score
	for _, ev := range evs {
		m.Step(ev, &sc)
	}
	return m
}

// FuzzReadModel: no input makes ReadModel panic, hang or allocate without
// bound; a refusal wraps ErrCorrupt; a model it accepts encodes to bytes
// that read back and encode to the same bytes (the input itself may differ,
// e.g. in the config JSON's spacing), and it can go on learning. The seeds are small
// models of every kind, so that each execution decodes a whole model.
//
// `go test` runs the seeds; `make fuzz-model FUZZTIME=10m` fuzzes.
func FuzzReadModel(f *testing.F) {
	evs := testStream(200, 9)
	for j, cfg := range allModes {
		m := fuzzModel(f, cfg, evs)
		if j%2 == 1 {
			withCursors(f, m) // encoding version 6
		}
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte("RGBTMODL"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadModel(bytes.NewReader(b))
		m2, out := readsBack(t, m, err)
		if m2 == nil {
			return
		}
		var out2 bytes.Buffer
		if _, err := m2.WriteTo(&out2); err != nil || !bytes.Equal(out, out2.Bytes()) {
			t.Fatalf("encoding is not a fixed point (%v)", err)
		}
		var sc Score
		if err := m.Step(Event{User: "fuzz-user", Item: "fuzz-item", Rating: 1, HasDwell: true}, &sc); err != nil &&
			!errors.Is(err, ErrNumerical) && !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("an accepted model fails to learn: %v", err)
		}
	})
}

// FuzzReadModelDeltas: no delta makes ReadModelDeltas panic, hang or
// allocate without bound; a refusal wraps ErrCorrupt; a model it accepts
// encodes to bytes that read back. The seeds are deltas of small models
// of every kind, each applied to its own base.
func FuzzReadModelDeltas(f *testing.F) {
	evs := testStream(200, 9)
	var bases [][]byte
	for k, cfg := range allModes {
		m := fuzzModel(f, cfg, evs[:100])
		cp := m.FrozenCopy(nil)
		var base bytes.Buffer
		if _, err := cp.WriteTo(&base); err != nil {
			f.Fatal(err)
		}
		bases = append(bases, base.Bytes())
		cp.MarkSaved()
		var sc Score
		for _, ev := range evs[100:] {
			m.Step(ev, &sc)
		}
		if k%2 == 1 {
			withCursors(f, m) // delta version 2
		}
		cp = m.FrozenCopy(cp)
		var delta bytes.Buffer
		if _, err := cp.WriteDelta(&delta); err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(k), delta.Bytes())
	}
	f.Add(uint8(0), []byte("RGBTDLTA"))
	f.Fuzz(func(t *testing.T, k uint8, b []byte) {
		base := bases[int(k)%len(bases)]
		m, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(b)})
		readsBack(t, m, err)
	})
}

// withCursors gives m two merge cursors (MergeFrom of deltas that change
// no row).
func withCursors(f *testing.F, m *Model) {
	m.StartSharing()
	for _, c := range []Cursor{{1, 40}, {3, 7}} {
		if err := m.MergeFrom(c.Partition, c.Seq, &Shared{K: m.k, Dim: m.d}); err != nil {
			f.Fatal(err)
		}
	}
}

// readsBack checks what a fuzzed read returned: a refusal wraps
// ErrCorrupt; an accepted model encodes to bytes that read back. It
// returns the model read back and the encoding, nil for a refusal.
func readsBack(t *testing.T, m *Model, err error) (*Model, []byte) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("refusal does not wrap ErrCorrupt: %v", err)
		}
		return nil, nil
	}
	var out bytes.Buffer
	if _, err := m.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	again, err := ReadModel(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("the encoding of an accepted model does not read back: %v", err)
	}
	return again, out.Bytes()
}
