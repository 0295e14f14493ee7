package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/state"
)

// TestRestoreCancelled: restoring a checkpoint stops once the context
// ends, in the store's read and in the model's decoding, with an error
// wrapping the context's.
func TestRestoreCancelled(t *testing.T) {
	m, err := online.New(online.Config{}.WithDefaults(), online.NewSource(1))
	if err != nil {
		t.Fatal(err)
	}
	var model bytes.Buffer
	if _, err := m.WriteTo(&model); err != nil {
		t.Fatal(err)
	}
	store, err := state.Open(t.TempDir(), state.Options{GCInterval: -1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Save(context.Background(), state.Checkpoint{Model: model.Bytes(),
		Positions: []input.Position{{Topic: "t", Offset: 3}}}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &Service{cfg: Config{StateLayout: online.LayoutPartition}.WithDefaults(), log: slog.New(slog.DiscardHandler), store: store}
	if _, _, err := s.restore(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("restore with a cancelled context: %v", err)
	}
	if _, err := online.ReadModel(&ctxReader{ctx: ctx, r: bytes.NewReader(model.Bytes())}); !errors.Is(err, context.Canceled) {
		t.Fatalf("decode with a cancelled context: %v", err)
	}
	// Not cancelled, the same reader decodes the model whole.
	got, err := online.ReadModel(&ctxReader{ctx: context.Background(), r: bytes.NewReader(model.Bytes())})
	if err != nil || got.Version() != m.Version() {
		t.Fatalf("decode: %v", err)
	}
	// A checkpoint of one model (before model sets) restores as the model
	// every partition starts from; generation 0 makes the next checkpoint
	// whole, since a set's delta cannot follow it.
	if ps, gen, err := s.restore(context.Background(), nil); err != nil || len(ps) != 1 || ps[0].Offset != 3 || gen != 0 {
		t.Fatalf("restore: %v, generation %d, %v", ps, gen, err)
	}
	p3, err := s.set.For(3)
	if err != nil || p3.Version() != m.Version() {
		t.Fatalf("partition 3 does not start from the restored model: %v", err)
	}
}
