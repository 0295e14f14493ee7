package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/snapshot"
)

// ModelOwner is the goroutine that owns running models, as *Service is:
// Submit runs a task on it between two records, and inside that task
// ModelState returns the models and the positions they have consumed up
// to.
type ModelOwner interface {
	Submit(ctx context.Context, task Task) error
	ModelState() (*online.Set, []input.Position)
}

var _ ModelOwner = (*Service)(nil)

// LiveSnapshotOptions configures LiveSnapshots.
type LiveSnapshotOptions struct {
	// Dir is where snapshots requested without a path (POST /snapshot,
	// signals) are written, as snapshot-<model version>-<UTC time>.snap.
	// Default "": such requests fail with ErrNoSnapshotDir, and GET
	// /snapshot stages its download in the system's temporary directory.
	Dir string
	// Source is written to snapshot.Meta.Source (default "live").
	Source string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// LiveSnapshots writes consistent snapshots of a running stream's model
// without stopping it: the stream pauses only while the output is flushed
// and the model copied in memory; encoding, fsync and rename happen beside
// the stream (snapshot.WriteFile). Any goroutine may call Export; Close
// waits for writes under way. It serves /snapshot (ServeHTTP).
type LiveSnapshots struct {
	owner ModelOwner
	opts  LiveSnapshotOptions

	mu struct {
		sync.Mutex
		closed bool
	}
	wg sync.WaitGroup
}

// ErrSnapshotsClosed is returned by LiveSnapshots.Export after Close.
var ErrSnapshotsClosed = errors.New("live snapshots closed")

// ErrNoSnapshotDir is returned by LiveSnapshots.Export for a snapshot
// without a path when no LiveSnapshotOptions.Dir is configured.
var ErrNoSnapshotDir = errors.New("no snapshot directory configured: start denoiser run with --snapshot-dir DIR (http.snapshot_dir), or download one with GET /snapshot (denoiser snapshot export --url)")

// NewLiveSnapshots returns the live snapshots of the model that owner owns.
func NewLiveSnapshots(owner ModelOwner, opts LiveSnapshotOptions) (*LiveSnapshots, error) {
	if owner == nil {
		return nil, errors.New("new live snapshots: a model owner is required")
	}
	if opts.Dir != "" {
		// Found out at start rather than at the first request.
		if fi, err := os.Stat(opts.Dir); err != nil {
			return nil, fmt.Errorf("new live snapshots: %w", err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("new live snapshots: %s is not a directory", opts.Dir)
		}
	}
	if opts.Source == "" {
		opts.Source = "live"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &LiveSnapshots{owner: owner, opts: opts}, nil
}

// SnapshotResult describes a snapshot a running instance wrote; it is the
// JSON answer of POST /snapshot.
type SnapshotResult struct {
	Path string `json:"path"`
	snapshot.Info
	Checksum     string `json:"crc32c"`
	ModelVersion uint64 `json:"model_version"`
	Positions    int    `json:"positions"`
	// Paused is how long the stream was held: output flush plus a memory
	// copy of the model (the encoding runs beside the stream).
	Paused time.Duration `json:"paused_ns"`
}

// Export writes a snapshot of the running model to path ("" = a new file
// in LiveSnapshotOptions.Dir) and returns once it is durable, or when ctx
// ends. A failed snapshot never stops the stream: the error goes to the
// caller. A snapshot holds one model: with a model per input partition,
// partition says whose (with its position only); -1 means the only
// model there is (an error when there are several).
func (l *LiveSnapshots) Export(ctx context.Context, path string, partition int32) (SnapshotResult, error) {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return SnapshotResult{}, fmt.Errorf("export live snapshot: %w", ErrSnapshotsClosed)
	}
	if path == "" && l.opts.Dir == "" {
		// Refused before the stream is held for a copy with nowhere to go.
		l.mu.Unlock()
		return SnapshotResult{}, fmt.Errorf("export live snapshot: %w", ErrNoSnapshotDir)
	}
	l.wg.Add(1) // released by the task's commit, or below if it never runs
	l.mu.Unlock()

	done := make(chan liveResult, 1)
	var once sync.Once
	release := func() { once.Do(l.wg.Done) }
	// state: 0 waiting, 1 running (the task releases wg), 2 abandoned by
	// Export (which released wg; the task does nothing if it runs late).
	var state atomic.Int32
	task := func(ctx context.Context, out consumer.Flusher) error {
		if state.CompareAndSwap(0, 1) {
			l.run(ctx, out, path, partition, done, release)
		}
		return nil // a failed snapshot must not stop the stream
	}
	if err := l.owner.Submit(ctx, task); err != nil {
		release()
		return SnapshotResult{}, fmt.Errorf("export live snapshot: %w", err)
	}
	select {
	case r := <-done:
		return r.res, r.err
	case <-ctx.Done():
		// A task that has started finishes (Close waits for it) and its
		// result is dropped; one that has not is abandoned.
		if state.CompareAndSwap(0, 2) {
			release()
		}
		return SnapshotResult{}, fmt.Errorf("export live snapshot: %w", ctx.Err())
	}
}

type liveResult struct {
	res SnapshotResult
	err error
}

// run is the task body, on the model goroutine.
func (l *LiveSnapshots) run(ctx context.Context, out consumer.Flusher, path string, partition int32, done chan<- liveResult, release func()) {
	start := time.Now()
	fail := func(err error) {
		done <- liveResult{err: fmt.Errorf("export live snapshot: %w", err)}
		release()
	}
	// The positions say every event before them is in the model; flush
	// their output first, as a checkpoint does, so that a pipeline restored
	// from this snapshot loses no output.
	if out != nil {
		if err := out.Flush(ctx); err != nil {
			fail(fmt.Errorf("flush output: %w", err))
			return
		}
	}
	set, ps := l.owner.ModelState()
	m, key, err := SetModel(set, partition)
	if err != nil {
		fail(err)
		return
	}
	c := snapshot.Contents{Model: m, Positions: PartitionPositions(set, key, ps)}
	c.Meta.Source, c.Meta.CreatedAt = l.opts.Source, l.opts.Now().UTC()
	res := SnapshotResult{Path: path, Positions: len(c.Positions)}
	if c.Model != nil {
		res.ModelVersion = c.Model.Version()
		// A memory copy: the stream goes on while the copy is encoded.
		c.Model = c.Model.FrozenCopy(nil)
	}
	if res.Path == "" {
		res.Path = filepath.Join(l.opts.Dir, fmt.Sprintf("snapshot-%d-%s.snap",
			res.ModelVersion, c.Meta.CreatedAt.Format("20060102T150405.000Z")))
	}
	res.Paused = time.Since(start)
	// Encode the copy and make the file durable beside the stream.
	go func() {
		info, err := snapshot.WriteFile(res.Path, c)
		if err != nil {
			fail(err)
			return
		}
		res.Info, res.Checksum = info, info.ChecksumHex()
		done <- liveResult{res: res}
		release()
	}()
}

// Close refuses new exports and waits for those under way to finish
// (those whose task has not run yet end when their Export's ctx does). It
// is idempotent.
func (l *LiveSnapshots) Close() error {
	l.mu.Lock()
	l.mu.closed = true
	l.mu.Unlock()
	l.wg.Wait()
	return nil
}

// ServeHTTP serves the live export endpoint:
//
// With a model per input partition, ?partition=N says whose model.
//
//	POST /snapshot   write a snapshot into LiveSnapshotOptions.Dir; the
//	                 response is the SnapshotResult as JSON
//	GET  /snapshot   write one to a temporary file in Dir (without Dir,
//	                 in the system's temporary directory) and stream it
//	                 as the response body (application/octet-stream),
//	                 then remove it: `denoiser snapshot export --url`
//	                 uses this
//
// POST without Dir answers 409 Conflict with ErrNoSnapshotDir's fix.
func (l *LiveSnapshots) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	partition := int32(-1)
	if v := r.URL.Query().Get("partition"); v != "" {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil || p < 0 {
			http.Error(w, fmt.Sprintf("partition=%q: want an input partition number", v), http.StatusBadRequest)
			return
		}
		partition = int32(p)
	}
	switch r.Method {
	case http.MethodPost:
		res, err := l.Export(r.Context(), "", partition)
		if err != nil {
			http.Error(w, err.Error(), snapshotStatus(err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	case http.MethodGet:
		f, err := os.CreateTemp(l.opts.Dir, ".download-*.snap") // Dir "": os.TempDir()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		name := f.Name()
		_ = f.Close()
		defer os.Remove(name)
		res, err := l.Export(r.Context(), name, partition)
		if err != nil {
			http.Error(w, err.Error(), snapshotStatus(err))
			return
		}
		f, err = os.Open(name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		_ = os.Remove(name) // where the system allows it, gone before the body is sent
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(res.Bytes, 10))
		w.Header().Set("X-Denoiser-Snapshot-Crc32c", res.Checksum)
		w.Header().Set("X-Denoiser-Model-Version", strconv.FormatUint(res.ModelVersion, 10))
		_, _ = io.Copy(w, f)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "use GET (download) or POST (write into the snapshot directory)", http.StatusMethodNotAllowed)
	}
}

func snapshotStatus(err error) int {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrSnapshotsClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrNoSnapshotDir):
		return http.StatusConflict
	case errors.Is(err, ErrNoSuchModel):
		return http.StatusNotFound
	default:
		return http.StatusInternalServerError
	}
}
