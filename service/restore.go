package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/snapshot"
	"denoiser/state"
)

// restore sets s.set from the last checkpoint, Initial or the config,
// and returns the positions it has consumed up to and the generation of
// the checkpoint that holds s.set as it would encode it (0: none, or a
// checkpoint of another layout or of before sets, so that the next
// checkpoint is whole).
func (s *Service) restore(ctx context.Context, initial Initial) ([]input.Position, uint64, error) {
	cp, ok, err := s.store.Load(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("service: restore: %w", err)
	}
	layout := s.cfg.StateLayout
	if ok {
		s.set, err = readCheckpoint(ctx, cp, s.cfg.Seed, layout)
		if err != nil {
			return nil, 0, fmt.Errorf("service: restore checkpoint generation %d: %w", cp.Generation, err)
		}
		stored, isSet := online.SetLayoutOf(cp.Model)
		s.log.Info("restored checkpoint", "generation", cp.Generation, "deltas", len(cp.Deltas), "model_version", cp.Version,
			"layout", stored, "models", s.set.Len(), "saved_at", cp.SavedAt, "positions", positionsString(cp.Positions))
		s.warnIgnoredModel("the restored model", "start with an empty state directory to apply it")
		if initial != nil {
			s.log.Warn("the state directory holds a checkpoint, which the service resumes from; the initial state (--from-snapshot) is not read (start with an empty state directory to use it)")
		}
		if !isSet || stored != layout {
			s.log.Info("the restored state becomes the model every partition starts from", "layout", layout)
			return cp.Positions, 0, nil
		}
		return cp.Positions, cp.Generation, nil
	}
	if initial != nil {
		m, positions, err := initial(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("service: initial state: %w", err)
		}
		if m != nil {
			if s.set, err = online.NewSetFrom(m, s.cfg.Seed, layout); err != nil {
				return nil, 0, fmt.Errorf("service: initial state: %w", err)
			}
			s.warnIgnoredModel("the initial model", "start without --from-snapshot to apply it")
			write := func(w io.Writer) error {
				_, err := s.set.WriteTo(w)
				return err
			}
			saved, err := s.store.SaveModel(ctx, state.Checkpoint{Positions: positions, Version: m.Version()}, state.ModelWriter{Full: write})
			if err != nil {
				return nil, 0, fmt.Errorf("service: save initial state: %w", err)
			}
			s.log.Info("started from the initial state and saved it as the first checkpoint",
				"model_version", m.Version(), "layout", layout, "positions", positionsString(positions))
			return positions, saved.Generation, nil
		}
	}
	seed := s.cfg.Seed
	s.set, err = online.NewSet(s.cfg.Model, seed, layout)
	if err != nil {
		return nil, 0, fmt.Errorf("service: %w", err)
	}
	s.log.Info("no checkpoint: starting new models", "seed", seed, "mode", s.set.Config().WithDefaults().Mode, "layout", layout)
	return nil, 0, nil
}

// warnIgnoredModel warns, when the model section of the config sets what
// s.set's models, restored or initial (which: "the restored model"), do
// not take, that it is ignored, naming each such setting with the value
// the model keeps; hint says how to apply it.
func (s *Service) warnIgnoredModel(which, hint string) {
	ignored := ignoredModelSettings(s.cfg.Model, s.set.Config())
	if len(ignored) == 0 {
		return
	}
	s.log.Warn(which+" keeps its own configuration; the model section of the config is ignored ("+hint+")",
		"ignored", strings.Join(ignored, ", "))
}

// ignoredModelSettings lists the settings of the model section cfg (its
// defaults filled in) that differ from kept, the configuration of a model
// restored or started from a snapshot, in declaration order, each as
// "model.dim=16 (the model has 32)".
func ignoredModelSettings(cfg, kept online.Config) []string {
	want, have := reflect.ValueOf(effectiveModel(cfg)), reflect.ValueOf(effectiveModel(kept))
	var ignored []string
	walk(want.Type(), "model", func(path string, index []int) {
		w, h := want.FieldByIndex(index), have.FieldByIndex(index)
		if !reflect.DeepEqual(w.Interface(), h.Interface()) {
			ignored = append(ignored, fmt.Sprintf("%s=%s (the model has %s)", path, formatValue(w), formatValue(h)))
		}
	})
	return ignored
}

// CheckpointModel returns what a snapshot file of a loaded checkpoint
// holds: the model that serves partition p (-1: the only model the
// checkpoint holds), encoded whole (online.Model.WriteTo), its version,
// and its positions (PartitionPositions). It stops when ctx ends.
func CheckpointModel(ctx context.Context, cp state.Checkpoint, p int32) (snapshot.Checkpoint, error) {
	out := snapshot.Checkpoint{Model: cp.Model, Positions: cp.Positions, Version: cp.Version, Generation: cp.Generation}
	if _, isSet := online.SetLayoutOf(cp.Model); !isSet && len(cp.Deltas) == 0 {
		return out, nil
	}
	set, err := readCheckpoint(ctx, cp, 0, "")
	if err != nil {
		return snapshot.Checkpoint{}, err
	}
	m, key, err := SetModel(set, p)
	if err != nil {
		return snapshot.Checkpoint{}, err
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		return snapshot.Checkpoint{}, err
	}
	out.Model, out.Version, out.Positions = buf.Bytes(), m.Version(), PartitionPositions(set, key, cp.Positions)
	return out, nil
}

// ErrNoSuchModel wraps SetModel's errors: no partition named where the
// state holds several models, or one it holds no model of (the live
// endpoint answers them 400 and 404, not as a fault of its own).
var ErrNoSuchModel = errors.New("no such partition model")

// SetModel returns the model of set that serves partition p, or with p
// -1 its only model, and its key; the error says which partitions there
// are to choose from.
func SetModel(set *online.Set, p int32) (*online.Model, int32, error) {
	if p < 0 {
		if set.Len() == 1 {
			k := set.Keys()[0]
			return set.Model(k), k, nil
		}
		return nil, 0, fmt.Errorf("the state holds a model per input partition (%s): choose one (snapshot export --partition N, or /snapshot?partition=N): %w",
			keysString(set.Keys()), ErrNoSuchModel)
	}
	k := set.Key(p)
	m := set.Model(k)
	if m == nil {
		return nil, 0, fmt.Errorf("the state holds no model of partition %d (it holds %s): %w", p, keysString(set.Keys()), ErrNoSuchModel)
	}
	return m, k, nil
}

// PartitionPositions returns the positions that the model of key covers:
// with a model per partition, those of partition key only; with one model
// for the member, all of them.
func PartitionPositions(set *online.Set, key int32, ps []input.Position) []input.Position {
	if set.Layout() != online.LayoutPartition {
		return ps
	}
	return slices.DeleteFunc(slices.Clone(ps), func(p input.Position) bool { return p.Partition != key })
}

func keysString(keys []int32) string {
	if len(keys) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(int(k)))
	}
	return b.String()
}

// readCheckpoint decodes the models of cp: its base with its deltas
// applied, as layout asks ("": as stored), until ctx ends. seed is that
// of a checkpoint of before sets.
func readCheckpoint(ctx context.Context, cp state.Checkpoint, seed uint64, layout online.Layout) (*online.Set, error) {
	return online.ReadSet(cp.Model, cp.Deltas, seed, layout, func(b []byte) io.Reader {
		return &ctxReader{ctx: ctx, r: bytes.NewReader(b)}
	})
}

// FromSnapshot is an Initial that starts from the snapshot file at path
// (`denoiser run --from-snapshot`), read until ctx ends. log (nil: discard)
// says which file and model version it starts from.
func FromSnapshot(path string, log *slog.Logger) Initial {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context) (*online.Model, []input.Position, error) {
		s, err := snapshot.ReadFileContext(ctx, path)
		if err != nil {
			return nil, nil, err
		}
		log.Info("starting from a snapshot", "file", path, "model_version", s.Model.Version())
		return s.Model, s.Positions, nil
	}
}

// ctxReader reads r until ctx ends, so that a long decode stops between two
// reads. It passes on r's Len (online.Lener), so that the decoder still
// sizes the model's tables at once.
type ctxReader struct {
	ctx context.Context
	r   *bytes.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (c *ctxReader) Len() int { return c.r.Len() }

var _ online.Lener = (*ctxReader)(nil)
