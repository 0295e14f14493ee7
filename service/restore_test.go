package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
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

// TestRestoreWarnsIgnoredModel: a model restored from the state or started
// from a snapshot keeps its own configuration; where the config's model
// section sets something else, the warning names each ignored setting,
// and where it matches, there is no warning.
func TestRestoreWarnsIgnoredModel(t *testing.T) {
	m, err := online.New(online.Config{Dim: 8}.WithDefaults(), online.NewSource(1))
	if err != nil {
		t.Fatal(err)
	}
	var model bytes.Buffer
	if _, err := m.WriteTo(&model); err != nil {
		t.Fatal(err)
	}
	initial := func(context.Context) (*online.Model, []input.Position, error) {
		return m, []input.Position{{Topic: "t", Offset: 5}}, nil
	}
	const ignored = "model section of the config is ignored"
	for _, tc := range []struct {
		name       string
		model      online.Config
		checkpoint bool
		want       []string // in the warning; none: no warning
	}{
		{"snapshot, same model", online.Config{Dim: 8}, false, nil},
		{"snapshot, other dim and mode", online.Config{Dim: 16, Mode: online.ModeRating}, false,
			[]string{"the initial model keeps", "model.mode=rating (the model has binary)", "model.dim=16 (the model has 8)", "--from-snapshot"}},
		{"checkpoint, same model", online.Config{Dim: 8}, true, nil},
		{"checkpoint, other dim", online.Config{Dim: 16}, true,
			[]string{"the restored model keeps", "model.dim=16 (the model has 8)", "empty state directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := state.Open(t.TempDir(), state.Options{GCInterval: -1, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			if tc.checkpoint {
				if err := store.Save(context.Background(), state.Checkpoint{Model: model.Bytes(), Version: m.Version()}); err != nil {
					t.Fatal(err)
				}
			}
			var logs bytes.Buffer
			cfg := Config{Model: tc.model}.WithDefaults()
			s := &Service{cfg: cfg, log: slog.New(slog.NewTextHandler(&logs, nil)), store: store}
			if _, _, err := s.restore(context.Background(), initial); err != nil {
				t.Fatal(err)
			}
			if got := s.set.Config().Dim; got != 8 {
				t.Fatalf("the model has dim %d, want the snapshot's 8", got)
			}
			// A checkpoint wins over --from-snapshot, and the log says so.
			if said := strings.Contains(logs.String(), "the initial state (--from-snapshot) is not read"); said != tc.checkpoint {
				t.Errorf("checkpoint %v, the log says the snapshot is not read: %v:\n%s", tc.checkpoint, said, logs.String())
			}
			if len(tc.want) == 0 {
				if strings.Contains(logs.String(), ignored) {
					t.Fatalf("a warning for a config that matches the model:\n%s", logs.String())
				}
				return
			}
			for _, want := range append(tc.want, ignored) {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the log does not say %q:\n%s", want, logs.String())
				}
			}
			if strings.Contains(logs.String(), "model.learning_rate") {
				t.Errorf("the warning names a setting that does not differ:\n%s", logs.String())
			}
		})
	}
}
