package service

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"

	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/snapshot"
	"denoiser/state"
)

// restore sets s.model from the last checkpoint, Initial or the config,
// and returns the positions it has consumed up to and the generation of
// the checkpoint that holds s.model (0: none).
func (s *Service) restore(ctx context.Context, initial Initial) ([]input.Position, uint64, error) {
	cp, ok, err := s.store.Load(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("service: restore: %w", err)
	}
	if ok {
		s.model, err = readCheckpoint(ctx, cp)
		if err != nil {
			return nil, 0, fmt.Errorf("service: restore checkpoint generation %d: %w", cp.Generation, err)
		}
		s.log.Info("restored checkpoint", "generation", cp.Generation, "deltas", len(cp.Deltas), "model_version", cp.Version,
			"saved_at", cp.SavedAt, "positions", positionsString(cp.Positions))
		if !reflect.DeepEqual(effectiveModel(s.cfg.Model), effectiveModel(s.model.Config())) {
			s.log.Warn("the restored model keeps its own configuration; the model section of the config is ignored (start with an empty state directory to apply it)")
		}
		return cp.Positions, cp.Generation, nil
	}
	var positions []input.Position
	if initial != nil {
		s.model, positions, err = initial(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("service: initial state: %w", err)
		}
	}
	if s.model != nil {
		write := func(w io.Writer) error {
			_, err := s.model.WriteTo(w)
			return err
		}
		saved, err := s.store.SaveModel(ctx, state.Checkpoint{Positions: positions, Version: s.model.Version()}, state.ModelWriter{Full: write})
		if err != nil {
			return nil, 0, fmt.Errorf("service: save initial state: %w", err)
		}
		s.log.Info("started from the initial state and saved it as the first checkpoint",
			"model_version", s.model.Version(), "positions", positionsString(positions))
		return positions, saved.Generation, nil
	}
	seed := s.cfg.Seed
	s.model, err = online.New(s.cfg.Model, online.NewSource(seed))
	if err != nil {
		return nil, 0, fmt.Errorf("service: %w", err)
	}
	s.log.Info("no checkpoint: starting a new model", "seed", seed, "mode", s.model.Config().Mode)
	return nil, 0, nil
}

// EncodeCheckpoint returns the whole model encoding (online.Model.WriteTo)
// of a loaded checkpoint: its base with its deltas applied, encoded
// again; the base as it is when it has no delta. It stops when ctx ends.
func EncodeCheckpoint(ctx context.Context, cp state.Checkpoint) ([]byte, error) {
	if len(cp.Deltas) == 0 {
		return cp.Model, nil
	}
	m, err := readCheckpoint(ctx, cp)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(cp.Model) + len(cp.Model)/8)
	if _, err := m.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readCheckpoint decodes the model of cp: its base with its deltas
// applied, until ctx ends.
func readCheckpoint(ctx context.Context, cp state.Checkpoint) (*online.Model, error) {
	deltas := make([]io.Reader, len(cp.Deltas))
	for j, d := range cp.Deltas {
		deltas[j] = &ctxReader{ctx: ctx, r: bytes.NewReader(d)}
	}
	return online.ReadModelDeltas(&ctxReader{ctx: ctx, r: bytes.NewReader(cp.Model)}, deltas)
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
