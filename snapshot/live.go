package snapshot

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

	"denoiser/internal/atomicfile"
)

// Flusher waits until every output record handed on so far is written and
// flushed (consumer.Flusher has this method).
type Flusher interface {
	Flush(ctx context.Context) error
}

// Task runs on the goroutine that owns the model, between two events. It
// matches the tasks consumer.Options.Tasks runs; a Live task always returns
// nil, so that a failed snapshot never stops the stream (the requester gets
// the error).
type Task func(ctx context.Context, out Flusher) error

// LiveOptions configures Live.
type LiveOptions struct {
	// Contents returns the model and the positions it has consumed up to.
	// Required. It is called on the model goroutine, inside a Task, where
	// the two are consistent.
	Contents func() Contents
	// Submit hands a task to the model goroutine (for example by sending
	// it on the channel given to consumer.Options.Tasks). Required. It
	// returns an error if ctx ends first.
	Submit func(ctx context.Context, t Task) error
	// Dir is where snapshots requested without a path (HTTP, signals) are
	// written, as snapshot-<model version>-<UTC time>.snap. Default "":
	// such requests fail.
	Dir string
	// Source is written to Meta.Source (default "live").
	Source string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Live writes consistent snapshots of a running stream's model without
// stopping it: the stream pauses only while the model is encoded into a
// temporary file; fsync and rename happen beside the stream. Any goroutine
// may call Export; Close waits for writes under way.
type Live struct {
	opts LiveOptions

	mu struct {
		sync.Mutex
		closed bool
	}
	wg sync.WaitGroup
}

// ErrClosed is returned by Live.Export after Close.
var ErrClosed = errors.New("live snapshots closed")

// NewLive returns a Live for opts.
func NewLive(opts LiveOptions) (*Live, error) {
	if opts.Contents == nil || opts.Submit == nil {
		return nil, errors.New("new live snapshots: Contents and Submit are required")
	}
	if opts.Source == "" {
		opts.Source = "live"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Live{opts: opts}, nil
}

// ExportResult describes a snapshot a running instance wrote.
type ExportResult struct {
	Path string `json:"path"`
	Info
	Checksum     string `json:"crc32c"`
	ModelVersion uint64 `json:"model_version"`
	Positions    int    `json:"positions"`
	// Paused is how long the stream was held: output flush plus a memory
	// copy of the model (the encoding runs beside the stream).
	Paused time.Duration `json:"paused_ns"`
}

// Export writes a snapshot of the running model to path ("" = a new file
// in LiveOptions.Dir) and returns once it is durable, or when ctx ends.
func (l *Live) Export(ctx context.Context, path string) (ExportResult, error) {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ExportResult{}, fmt.Errorf("export live snapshot: %w", ErrClosed)
	}
	l.wg.Add(1) // released by the task's commit, or below if it never runs
	l.mu.Unlock()

	done := make(chan result, 1)
	var once sync.Once
	release := func() { once.Do(l.wg.Done) }
	// state: 0 waiting, 1 running (the task releases wg), 2 abandoned by
	// Export (which released wg; the task does nothing if it runs late).
	var state atomic.Int32
	task := func(ctx context.Context, out Flusher) error {
		if state.CompareAndSwap(0, 1) {
			l.run(ctx, out, path, done, release)
		}
		return nil
	}
	if err := l.opts.Submit(ctx, task); err != nil {
		release()
		return ExportResult{}, fmt.Errorf("export live snapshot: %w", err)
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
		return ExportResult{}, fmt.Errorf("export live snapshot: %w", ctx.Err())
	}
}

type result struct {
	res ExportResult
	err error
}

// run is the task body, on the model goroutine.
func (l *Live) run(ctx context.Context, out Flusher, path string, done chan<- result, release func()) {
	start := time.Now()
	fail := func(err error) {
		done <- result{err: fmt.Errorf("export live snapshot: %w", err)}
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
	c := l.opts.Contents()
	c.Meta.Source, c.Meta.CreatedAt = l.opts.Source, l.opts.Now().UTC()
	res := ExportResult{Path: path, Positions: len(c.Positions)}
	if c.Model != nil {
		res.ModelVersion = c.Model.Version()
		// A memory copy: the stream goes on while the copy is encoded.
		c.Model = c.Model.FrozenCopy(nil)
	}
	if res.Path == "" {
		if l.opts.Dir == "" {
			fail(errors.New("no snapshot directory configured"))
			return
		}
		res.Path = filepath.Join(l.opts.Dir, fmt.Sprintf("snapshot-%d-%s.snap",
			res.ModelVersion, c.Meta.CreatedAt.Format("20060102T150405.000Z")))
	}
	res.Paused = time.Since(start)
	// Encode the copy and make the file durable beside the stream.
	go func() {
		f, err := atomicfile.Create(res.Path)
		if err != nil {
			fail(err)
			return
		}
		info, err := Write(f, c)
		if err != nil {
			fail(errors.Join(err, f.Abort()))
			return
		}
		res.Info, res.Checksum = info, info.ChecksumHex()
		if err := f.Commit(); err != nil {
			fail(err)
			return
		}
		done <- result{res: res}
		release()
	}()
}

// Close refuses new exports and waits for those under way to finish
// (those whose task has not run yet end when their Export's ctx does). It
// is idempotent.
func (l *Live) Close() error {
	l.mu.Lock()
	l.mu.closed = true
	l.mu.Unlock()
	l.wg.Wait()
	return nil
}

// ServeHTTP serves the live export endpoint:
//
//	POST /snapshot   write a snapshot into LiveOptions.Dir; the response is
//	                 the ExportResult as JSON
//	GET  /snapshot   write one to a temporary file in Dir and stream it as
//	                 the response body (application/octet-stream), then
//	                 remove it: `denoiser snapshot export --url` uses this
func (l *Live) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		res, err := l.Export(r.Context(), "")
		if err != nil {
			http.Error(w, err.Error(), statusOf(err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	case http.MethodGet:
		if l.opts.Dir == "" {
			http.Error(w, "export live snapshot: no snapshot directory configured", http.StatusServiceUnavailable)
			return
		}
		f, err := os.CreateTemp(l.opts.Dir, ".download-*.snap")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		name := f.Name()
		_ = f.Close()
		defer os.Remove(name)
		res, err := l.Export(r.Context(), name)
		if err != nil {
			http.Error(w, err.Error(), statusOf(err))
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

func statusOf(err error) int {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
