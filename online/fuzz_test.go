package online

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// FuzzReadModel: no input makes ReadModel panic, hang or allocate without
// bound; a refusal wraps ErrCorrupt; a model it accepts encodes to bytes
// that read back and encode to the same bytes (the input itself may differ,
// e.g. in the config JSON's spacing), and it can go on learning. The seeds are small
// models of every kind, so that each execution decodes a whole model.
//
// `go test` runs the seeds; `make fuzz-model FUZZTIME=10m` fuzzes.
func FuzzReadModel(f *testing.F) {
	evs := testStream(200, 9)
	for _, cfg := range allModes {
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
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("refusal does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if _, err := m.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		m2, err := ReadModel(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("the encoding of an accepted model does not read back: %v", err)
		}
		var out2 bytes.Buffer
		if _, err := m2.WriteTo(&out2); err != nil || !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatalf("encoding is not a fixed point (%v)", err)
		}
		var sc Score
		if err := m.Step(Event{User: "fuzz-user", Item: "fuzz-item", Rating: 1, HasDwell: true}, &sc); err != nil &&
			!errors.Is(err, ErrNumerical) && !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("an accepted model fails to learn: %v", err)
		}
	})
}
