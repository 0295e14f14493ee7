package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"

	"denoiser/consumer/input"
)

// Checkpoint is a checkpoint as a store keeps it: the model encoding
// (online.Model.WriteTo), the positions it has consumed up to, and its
// version. It mirrors state.Checkpoint, so that this package need not
// depend on Badger; cmd/denoiser adapts *state.Store to Loader and Saver.
type Checkpoint struct {
	Model     []byte
	Positions []input.Position
	// Version is the model version (online.Model.Version: events learned).
	Version uint64
	// Generation is set by Load; Save ignores it.
	Generation uint64
}

// Loader loads the last committed checkpoint; ok is false when there is
// none.
type Loader interface {
	Load(ctx context.Context) (cp Checkpoint, ok bool, err error)
}

// Saver commits a checkpoint atomically, its model being what write
// writes (cp.Model is nil), as state.Store.SaveFrom does: the model goes to
// the store as it is encoded, never as a second copy in memory.
type Saver interface {
	SaveFrom(ctx context.Context, cp Checkpoint, write func(io.Writer) error) error
}

// LoadSaver is a checkpoint store Import can check and write.
type LoadSaver interface {
	Loader
	Saver
}

var (
	// ErrNoCheckpoint: Export found no checkpoint in the store.
	ErrNoCheckpoint = errors.New("no checkpoint in the state")
	// ErrStateNotEmpty: Import refused to replace an existing checkpoint
	// without ImportOptions.Replace.
	ErrStateNotEmpty = errors.New("state already holds a checkpoint")
)

// Export writes the last checkpoint of store to path, verifying it whole
// (decoding the model) as it is written, before it takes path's place
// atomically: a checkpoint that does not decode leaves path as it was.
// meta.Generation is set from the checkpoint. It returns the snapshot as
// read, model included.
func Export(ctx context.Context, store Loader, path string, meta Meta) (*Snapshot, error) {
	cp, ok, err := store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("export snapshot: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("export snapshot: %w", ErrNoCheckpoint)
	}
	meta.Generation = cp.Generation
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("export snapshot: %w", err)
	}
	// Write into a pipe; CopyFile reads it back, verifying, into the file.
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		_, err := Write(pw, Contents{ModelBytes: cp.Model, Positions: cp.Positions, Meta: meta})
		pw.CloseWithError(err) // nil: EOF
		wrote <- err
	}()
	// What Write writes is at most the model plus its framing, the meta and
	// the positions: tell the verifying reader, so that it sizes the
	// model's tables at once.
	bound := int64(len(cp.Model)) + 1<<20 + int64(len(cp.Model))/64 + int64(len(cp.Positions))*(MaxTopicLen+64)
	s, err := CopyFile(path, WithLength(pr, bound))
	pr.CloseWithError(io.ErrClosedPipe) // unblocks the writer if the reader stopped early
	if werr := <-wrote; werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return nil, fmt.Errorf("export snapshot: %w", err)
	}
	return s, nil
}

// ImportOptions configures Import. The zero value refuses to replace an
// existing checkpoint.
type ImportOptions struct {
	// Replace lets Import replace a checkpoint already in the store
	// (default false: ErrStateNotEmpty).
	Replace bool
}

// Import reads the snapshot at path, verifying it whole, and commits its
// model and positions to store as one checkpoint. It returns the snapshot,
// whose Model is ready to go on learning. Nothing is written unless the
// snapshot is valid.
func Import(ctx context.Context, path string, store LoadSaver, opts ImportOptions) (*Snapshot, error) {
	s, err := ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("import snapshot: %w", err)
	}
	if err := ImportSnapshot(ctx, s, store, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// ImportSnapshot commits s, a snapshot already read (ReadFile), to store
// as Import does, for a caller that reads the file before it opens the
// store: a file that does not read then creates no state. A store that
// holds a checkpoint is refused unless opts replaces it.
func ImportSnapshot(ctx context.Context, s *Snapshot, store LoadSaver, opts ImportOptions) error {
	if !opts.Replace {
		_, ok, err := store.Load(ctx)
		if err != nil {
			return fmt.Errorf("import snapshot: %w", err)
		}
		if ok {
			return fmt.Errorf("import snapshot: %w (replace it explicitly)", ErrStateNotEmpty)
		}
	}
	return save(ctx, s, store)
}

// save commits s's model and positions to store as one checkpoint.
func save(ctx context.Context, s *Snapshot, store LoadSaver) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("import snapshot: %w", err)
	}
	cp := Checkpoint{Positions: s.Positions, Version: s.Model.Version()}
	if err := store.SaveFrom(ctx, cp, func(w io.Writer) error {
		_, err := s.Model.WriteTo(w)
		return err
	}); err != nil {
		return fmt.Errorf("import snapshot: save: %w", err)
	}
	return nil
}
