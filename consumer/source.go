package consumer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"unicode/utf8"

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
	// Size is the record's length in bytes when Value holds only its start
	// (a line over MaxLineBytes); 0 means len(Value).
	Size int
	// Err, if set, is why the source could not make an event of the record
	// (a *RecordError, as Decode returns): the record is dead-lettered
	// with Value as its raw bytes.
	Err error
	// Emitted marks a record that already has output (a previous owner of
	// its partition emitted it, then crashed before committing): the
	// model learns from it as from any record, but it is not written to
	// the sink or the dead-letter again (Result.Emitted).
	Emitted bool
	// Task, if set, makes the message a barrier rather than a record (the
	// other fields are ignored): Run calls it on the model goroutine after
	// every record returned before it and before any returned after it,
	// with a Flusher that waits for the sinks, as it calls Options.Tasks.
	// A KafkaSource hands its partitions over this way when the group
	// takes them away.
	Task func(ctx context.Context, out Flusher) error
}

// FileSource reads JSON lines from a file or any io.Reader, gzip-compressed
// or not (found by its magic bytes, 1f 8b). Lines end in "\n" (a trailing
// "\r" is dropped); the last line needs no newline. A line longer than
// MaxLineBytes is not buffered whole: its first MaxLineBytes+1 bytes are
// returned, so that Decode rejects it as too_large, with its real length in
// Message.Size, and the rest is skipped.
type FileSource struct {
	name   string
	r      *bufio.Reader
	closer io.Closer
	size   int64
	err    error  // returned by every Next: a bad gzip header, or a *ReadError
	gzip   bool   // the input is decompressed (Size and BytesRead count its text)
	head   []byte // the start of the first line, for Describe

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
	if fi.IsDir() {
		return nil, errors.Join(fmt.Errorf("open source: %s is a directory: give the event file", path), f.Close())
	}
	s := NewFileSource(f, path)
	s.closer = f
	if !s.gzip {
		s.size = fi.Size()
	}
	return s, nil
}

// ReadError is a source's input that could not be read to its end: a
// truncated gzip stream, a disk's error. Every line before it was returned
// (a line it cut short as a record with Message.Err, to be dead-lettered),
// so the records read are whole and in order, and the rest is missing. Run
// returns it as its only error when nothing else failed, having processed
// and flushed everything before it as at the end of the input; replay
// then keeps its outputs and says where the input ended.
type ReadError struct {
	Name   string // the input's name
	Lines  int64  // whole lines read before the error
	Offset int64  // bytes of text read before the line it cut, or before the error
	Err    error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("read %s: %v, after line %d (byte %d of its text): the input ends early", e.Name, e.Err, e.Lines, e.Offset)
}

func (e *ReadError) Unwrap() error { return e.Err }

// gzipMagic starts a gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// headBytes is how much of the first line Describe looks at.
const headBytes = 512

// NewFileSource reads JSON lines from r, decompressing it when it is gzip
// and skipping a UTF-8 byte-order mark that starts its text; name is the
// file name positions carry. Close does not close r.
func NewFileSource(r io.Reader, name string) *FileSource {
	s := &FileSource{name: name, r: bufio.NewReaderSize(r, 64<<10), size: -1}
	if magic, _ := s.r.Peek(len(gzipMagic)); bytes.Equal(magic, gzipMagic) {
		gz, err := gzip.NewReader(s.r)
		if err != nil {
			s.err = fmt.Errorf("read %s: gzip: %w", name, err)
			return s
		}
		s.r, s.gzip = bufio.NewReaderSize(gz, 64<<10), true
	}
	if head, _ := s.r.Peek(len(bom)); bytes.Equal(head, bom) {
		s.r.Discard(len(bom)) // as Excel's "CSV UTF-8" writes it; offsets still count it
		s.offset.Add(int64(len(bom)))
	}
	return s
}

// Next returns the next line. Blank lines are returned too (the loop counts
// and skips them) so that line numbers stay true.
func (s *FileSource) Next(ctx context.Context) (Message, error) {
	if err := ctx.Err(); err != nil {
		return Message{}, err
	}
	if s.err != nil {
		return Message{}, s.err
	}
	start := s.offset.Load()
	s.buf = s.buf[:0]
	var n int64
	newline := false // the line ended in "\n" (not at the end of the input)
	for {
		chunk, err := s.r.ReadSlice('\n')
		newline = err == nil
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
			s.err = &ReadError{Name: s.name, Lines: s.line, Offset: start, Err: err}
			if n == 0 {
				return Message{}, s.err
			}
			s.line++ // the part of a line read before the error: dead-lettered
			s.offset.Add(n)
			return Message{Pos: input.Position{File: s.name, Line: s.line, Offset: start}, Value: s.buf,
				Err: reject(ReasonNotJSON, "", "the line is cut: the input ends inside it ("+err.Error()+")")}, nil
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
	if s.line == 1 {
		s.head = append([]byte(nil), v[:min(len(v), headBytes)]...)
	}
	m := Message{Pos: input.Position{File: s.name, Line: s.line, Offset: start}, Value: v}
	if n > MaxLineBytes+2 { // cut at MaxLineBytes: say how long it was
		m.Size = int(n)
		if newline {
			m.Size--
		}
	}
	return m, nil
}

// Ready reports whether a whole line is buffered, which Next returns
// without reading (Run's reader then hands on more records at once).
func (s *FileSource) Ready() bool {
	n := s.r.Buffered()
	if n == 0 || s.err != nil {
		return false
	}
	b, _ := s.r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// BytesRead is the number of bytes consumed so far. It is safe to call from
// any goroutine.
func (s *FileSource) BytesRead() int64 { return s.offset.Load() }

// Size is the size of the file in bytes, or -1 when unknown (a stream, or
// a compressed file).
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

// compressed are the leading bytes of the compressed formats a log may
// come in, other than gzip (which is read as such).
var compressed = []struct{ magic, name, cat string }{
	{"BZh", "bzip2", "bzcat"},
	{"\xfd7zXZ\x00", "xz", "xzcat"},
	{"\x28\xb5\x2f\xfd", "zstd", "zstdcat"},
	{"PK\x03\x04", "zip", "unzip -p"},
}

// unreadableText says why the input's first bytes h are not text the sources
// read (UTF-16, a compressed format other than gzip, binary data), ""
// when they are.
func unreadableText(h []byte) string {
	for _, c := range compressed {
		if bytes.HasPrefix(h, []byte(c.magic)) {
			return "the input is " + c.name + "-compressed (gzip is read as such): decompress it, or pipe it in: " + c.cat + " FILE | denoiser replay --in - ..."
		}
	}
	switch {
	case bytes.HasPrefix(h, []byte{0xff, 0xfe}) || bytes.HasPrefix(h, []byte{0xfe, 0xff}) || len(h) >= 4 && (h[1] == 0 && h[3] == 0 || h[0] == 0 && h[2] == 0) && h[0]|h[1] != 0:
		return "the input is UTF-16 text: convert it to UTF-8, e.g. iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8"
	case !utf8.Valid(h[:max(0, len(h)-utf8.UTFMax)]) || bytes.ContainsAny(h, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f"):
		return "the input is binary data, not text: write JSON lines, one event object per line (gzip is read as such)"
	}
	return ""
}

// Describe says what the start of the input looks like, for a user whose
// input yielded no event: the usual mistakes (a JSON array, pretty-printed
// JSON, CSV, binary data) and how to fix them. It is
// meaningful once Next has returned the first line.
func (s *FileSource) Describe() string {
	h := s.head
	if s.line == 0 {
		return "the input is empty"
	}
	t := bytes.TrimSpace(h)
	if why := unreadableText(h); why != "" {
		return why
	}
	switch {
	case bytes.HasPrefix(t, []byte("[")):
		return "the input is a JSON array: write one event object per line (JSON lines), e.g. jq -c '.[]' FILE"
	case bytes.Equal(t, []byte("{")) || (bytes.HasPrefix(t, []byte("{")) && !bytes.HasSuffix(t, []byte("}"))):
		return "the input looks like pretty-printed JSON (an object spans lines): write one object per line, e.g. jq -c . FILE"
	case !bytes.HasPrefix(t, []byte("{")) && bytes.Count(t, []byte("\t")) == 2:
		return fmt.Sprintf("the input looks like tab-separated values of three columns (first line %q): write JSON lines, one event object per line; for user, item, rating: awk -F'\\t' '{printf \"{\\\"user\\\":\\\"%%s\\\",\\\"item\\\":\\\"%%s\\\",\\\"rating\\\":%%s}\\n\", $1, $2, $3}' FILE", clip(t))
	case !bytes.HasPrefix(t, []byte("{")) && bytes.Count(t, []byte("\t")) > 0:
		return fmt.Sprintf("the input looks like tab-separated values (first line %q): write JSON lines, one event object per line (MovieLens' u.data: denoiser-lab convert movielens --in u.data --out events.jsonl)", clip(t))
	case !bytes.HasPrefix(t, []byte("{")) && bytes.Count(t, []byte(",")) > 0:
		return fmt.Sprintf("the input looks like CSV (first line %q): read it with --format csv (a header line user,item,ts,...)", clip(t))
	}
	if bytes.HasPrefix(t, []byte("{")) && bytes.HasSuffix(t, []byte("}")) {
		return "the lines are JSON objects, and the decoder or the model refused each one"
	}
	return fmt.Sprintf("the first line is %q: write JSON lines, one event object per line (consumer/FORMAT.md)", clip(t))
}
