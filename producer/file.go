package producer

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"denoiser/consumer"
	"denoiser/internal/atomicfile"
)

// ErrClosed is returned by writes to a closed or aborted file.
var ErrClosed = errors.New("file closed")

var (
	_ consumer.Sink       = (*FileSink)(nil)
	_ consumer.DeadLetter = (*FileDeadLetter)(nil)
)

// FileSink writes scored records as JSON lines. The file appears under its
// name only on Close (temporary file, fsync, rename).
type FileSink struct{ f atomicFile }

// CreateFileSink starts a scored-record file at path, replacing any file
// there when it is closed.
func CreateFileSink(path string) (*FileSink, error) {
	s := &FileSink{}
	if err := s.f.create(path); err != nil {
		return nil, fmt.Errorf("create sink: %w", err)
	}
	return s, nil
}

// Write encodes r (which must be scored) and buffers it.
func (s *FileSink) Write(_ context.Context, r *consumer.Result) error {
	if s.f.w == nil {
		return ErrClosed
	}
	s.f.buf = AppendScored(s.f.buf[:0], r)
	return s.f.writeLine()
}

// Flush writes the buffer out and fsyncs the temporary file.
func (s *FileSink) Flush(context.Context) error { return s.f.flush() }

// Records is the number of records written so far.
func (s *FileSink) Records() uint64 { return s.f.records }

// Close flushes, fsyncs and renames the file into place. It is idempotent.
func (s *FileSink) Close() error { return s.f.close() }

// Abort discards the file: nothing appears under its name. It is
// idempotent, and a no-op after Close.
func (s *FileSink) Abort() error { return s.f.abort() }

// FileDeadLetter writes rejected records as JSON lines, atomically like
// FileSink.
type FileDeadLetter struct{ f atomicFile }

// CreateFileDeadLetter starts a dead-letter file at path.
func CreateFileDeadLetter(path string) (*FileDeadLetter, error) {
	d := &FileDeadLetter{}
	if err := d.f.create(path); err != nil {
		return nil, fmt.Errorf("create dead-letter: %w", err)
	}
	return d, nil
}

// Reject encodes r (which must be rejected) and buffers it.
func (d *FileDeadLetter) Reject(_ context.Context, r *consumer.Result) error {
	if d.f.w == nil {
		return ErrClosed
	}
	d.f.buf = AppendRejected(d.f.buf[:0], r)
	return d.f.writeLine()
}

// Flush writes the buffer out and fsyncs the temporary file.
func (d *FileDeadLetter) Flush(context.Context) error { return d.f.flush() }

// Records is the number of records written so far.
func (d *FileDeadLetter) Records() uint64 { return d.f.records }

// Close flushes, fsyncs and renames the file into place. It is idempotent.
func (d *FileDeadLetter) Close() error { return d.f.close() }

// Abort discards the file. It is idempotent, and a no-op after Close.
func (d *FileDeadLetter) Abort() error { return d.f.abort() }

// atomicFile is a buffered temporary file renamed into place on close,
// gzip-compressed when its name ends in ".gz" (as the input side reads
// gzip by its content).
type atomicFile struct {
	path    string
	tmp     *atomicfile.File
	gz      *gzip.Writer  // nil unless compressed
	w       *bufio.Writer // nil once closed or aborted
	buf     []byte
	records uint64
}

func (f *atomicFile) create(path string) error {
	tmp, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	f.path, f.tmp = path, tmp
	var w io.Writer = tmp
	if strings.HasSuffix(path, ".gz") {
		f.gz = gzip.NewWriter(tmp)
		w = f.gz
	}
	f.w = bufio.NewWriterSize(w, 256<<10)
	return nil
}

// flushGzip ends the compressed data so far (Flush) or for good (Close).
func (f *atomicFile) flushGzip(end bool) error {
	switch {
	case f.gz == nil:
		return nil
	case end:
		return f.gz.Close()
	}
	return f.gz.Flush()
}

func (f *atomicFile) writeLine() error {
	f.buf = append(f.buf, '\n')
	if _, err := f.w.Write(f.buf); err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	f.records++
	return nil
}

func (f *atomicFile) flush() error {
	if f.w == nil {
		return ErrClosed
	}
	if err := errors.Join(f.w.Flush(), f.flushGzip(false)); err != nil {
		return fmt.Errorf("flush %s: %w", f.path, err)
	}
	if err := f.tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.path, err)
	}
	return nil
}

func (f *atomicFile) close() error {
	if f.w == nil {
		return nil
	}
	err := errors.Join(f.w.Flush(), f.flushGzip(true))
	f.w = nil
	if err != nil {
		return errors.Join(fmt.Errorf("close %s: %w", f.path, err), f.tmp.Abort())
	}
	return f.tmp.Commit()
}

func (f *atomicFile) abort() error {
	if f.w == nil {
		return nil
	}
	f.w = nil
	return f.tmp.Abort()
}
