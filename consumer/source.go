package consumer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"denoiser/consumer/input"
)

// Source yields raw input records in order. Next returns io.EOF when a
// finite source is exhausted. Message.Value is valid only until the next
// call to Next. Next is called from one goroutine only.
type Source interface {
	Next(ctx context.Context) (Message, error)
}

// Message is one raw input record and where it came from.
type Message struct {
	Pos   input.Position
	Value []byte
	// Null marks a record without a value (a Kafka tombstone), as opposed
	// to one whose value has no bytes.
	Null bool
}

// FileSource reads JSON lines from a file or any io.Reader. Lines end in
// "\n" (a trailing "\r" is dropped); the last line needs no newline. A line
// longer than MaxLineBytes is not buffered whole: its first MaxLineBytes+1
// bytes are returned, so that Decode rejects it as too_large, and the rest is
// skipped.
type FileSource struct {
	name   string
	r      *bufio.Reader
	closer io.Closer
	size   int64

	line   int64
	offset atomic.Int64 // bytes consumed so far, read by progress reporters
	buf    []byte
}

// OpenFile opens path as a FileSource. Positions carry path as given.
func OpenFile(path string) (*FileSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open source: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("stat source: %w", err), f.Close())
	}
	s := NewFileSource(f, path)
	s.closer = f
	s.size = fi.Size()
	return s, nil
}

// NewFileSource reads JSON lines from r; name is the file name positions
// carry. Close does not close r.
func NewFileSource(r io.Reader, name string) *FileSource {
	return &FileSource{name: name, r: bufio.NewReaderSize(r, 64<<10), size: -1}
}

// Next returns the next line. Blank lines are returned too (the loop counts
// and skips them) so that line numbers stay true.
func (s *FileSource) Next(ctx context.Context) (Message, error) {
	if err := ctx.Err(); err != nil {
		return Message{}, err
	}
	start := s.offset.Load()
	s.buf = s.buf[:0]
	var n int64
	for {
		chunk, err := s.r.ReadSlice('\n')
		n += int64(len(chunk))
		if room := MaxLineBytes + 1 - len(s.buf); room > 0 {
			s.buf = append(s.buf, chunk[:min(len(chunk), room)]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && n == 0 {
			return Message{}, io.EOF
		}
		if err != nil && err != io.EOF {
			s.offset.Add(n)
			return Message{}, fmt.Errorf("read %s: %w", s.name, err)
		}
		break
	}
	s.offset.Add(n)
	s.line++
	v := s.buf
	if len(v) > 0 && v[len(v)-1] == '\n' && n <= MaxLineBytes+1 {
		v = v[:len(v)-1]
	}
	if len(v) > 0 && v[len(v)-1] == '\r' && n <= MaxLineBytes+2 {
		v = v[:len(v)-1]
	}
	return Message{Pos: input.Position{File: s.name, Line: s.line, Offset: start}, Value: v}, nil
}

// BytesRead is the number of bytes consumed so far. It is safe to call from
// any goroutine.
func (s *FileSource) BytesRead() int64 { return s.offset.Load() }

// Size is the size of the file in bytes, or -1 when unknown.
func (s *FileSource) Size() int64 { return s.size }

// Close closes the file opened by OpenFile. It is idempotent.
func (s *FileSource) Close() error {
	c := s.closer
	s.closer = nil
	if c == nil {
		return nil
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("close source: %w", err)
	}
	return nil
}
