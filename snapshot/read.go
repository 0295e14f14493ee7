package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"denoiser/consumer/input"
	"denoiser/online"
)

// Snapshot is a snapshot as read: the model ready to go on learning, the
// positions it has consumed up to, and where it came from.
type Snapshot struct {
	Info
	// ModelEncoding is the version of the model encoding inside
	// (online.EncodingVersion when it was written).
	ModelEncoding uint32 `json:"model_encoding"`
	Meta          Meta   `json:"meta"`
	// Positions are sorted by topic, then partition.
	Positions []input.Position `json:"positions"`
	// Model continues exactly where the exported model stopped, random
	// source included.
	Model *online.Model `json:"-"`
}

// readers holds one reader per format version this build reads. A new
// version adds an entry and keeps the old ones (see FORMAT.md).
var readers = map[uint32]func(*reader, *Snapshot) error{
	1: readV1,
	2: readV1, // the frames of version 1; the model inside is encoding 2 (context statistics)
	3: readV1, // the frames of version 1; the model inside is encoding 4 (the context's anchor statistics)
}

// Read reads a snapshot of any supported format version from r, verifying
// every checksum. It reads r to its end and refuses trailing data. Errors
// wrap one of ErrBadMagic, ErrUnsupportedVersion, ErrTruncated, ErrChecksum
// or ErrCorrupt (see FORMAT.md), or are I/O errors of r. Memory grows only
// with the bytes actually read, whatever lengths the file declares; when r
// is a regular file or knows its length (online.Lener), the model's tables
// are allocated once, at their size, instead of grown.
func Read(r io.Reader) (*Snapshot, error) {
	s, err := read(r, inputSize(r))
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return s, nil
}

// ReadFile reads the snapshot file at path (see Read).
func ReadFile(path string) (*Snapshot, error) {
	return ReadFileContext(context.Background(), path)
}

// ReadFileContext is ReadFile, which stops between two reads of the file
// once ctx ends, with an error wrapping ctx's: a large snapshot's read can
// be interrupted.
func ReadFileContext(ctx context.Context, path string) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if ctx.Done() != nil {
		r = ctxReader{ctx: ctx, r: f}
	}
	s, err := read(r, inputSize(f))
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	return s, nil
}

// ctxReader reads r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// read reads a snapshot from r, which holds at most size bytes (-1:
// unknown).
func read(r io.Reader, size int64) (*Snapshot, error) {
	rd := &reader{r: bufio.NewReaderSize(r, 1<<16), sum: crc32.New(castagnoli), size: size}
	var h [headerLen]byte
	if err := rd.readFull(h[:]); err != nil {
		if n := min(int(rd.n), len(magic)); !bytes.Equal(h[:n], magic[:n]) {
			return nil, ErrBadMagic
		}
		if rd.n == 0 {
			return nil, fmt.Errorf("%w: empty input", ErrTruncated)
		}
		return nil, err
	}
	if !bytes.Equal(h[:12], magic[:]) {
		return nil, ErrBadMagic
	}
	version := binary.LittleEndian.Uint32(h[12:])
	if got, want := crc32.Checksum(h[:16], castagnoli), binary.LittleEndian.Uint32(h[16:]); got != want {
		return nil, fmt.Errorf("%w: header CRC-32C %08x, stored %08x", ErrChecksum, got, want)
	}
	readV, ok := readers[version]
	if !ok {
		return nil, fmt.Errorf("%w: format version %d; this build reads versions 1 to %d (a newer denoiser wrote it?)",
			ErrUnsupportedVersion, version, FormatVersion)
	}
	s := &Snapshot{Info: Info{FormatVersion: version}}
	if err := readV(rd, s); err != nil {
		return nil, err
	}
	// Nothing may follow the snapshot.
	var b [1]byte
	if n, err := rd.r.Read(b[:]); n > 0 {
		return nil, fmt.Errorf("%w: data after the end of the snapshot at offset %d", ErrCorrupt, rd.n)
	} else if err != nil && err != io.EOF {
		return nil, err
	}
	s.Bytes = rd.n
	return s, nil
}

// reader reads frames, checksumming every byte it consumes.
type reader struct {
	r    *bufio.Reader
	sum  hash.Hash32
	n    int64 // bytes consumed
	size int64 // bytes in the input from where reading began; -1 unknown
	buf  []byte
	// before is the CRC-32C of the bytes before the last frame read.
	before uint32
}

// readFull reads len(b) bytes; running out of input is ErrTruncated.
func (r *reader) readFull(b []byte) error {
	n, err := io.ReadFull(r.r, b)
	r.sum.Write(b[:n])
	r.n += int64(n)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: input ends at offset %d", ErrTruncated, r.n)
	}
	return err
}

// payload reads n bytes into the reused buffer, growing it only as bytes
// arrive, so that a declared length costs nothing until it is backed by
// data.
func (r *reader) payload(n int) ([]byte, error) {
	b := r.buf[:0]
	for len(b) < n {
		k := min(n-len(b), 64<<10)
		b = slices.Grow(b, k)[:len(b)+k]
		if err := r.readFull(b[len(b)-k:]); err != nil {
			return nil, err
		}
	}
	r.buf = b
	return b, nil
}

// limitV1 is the largest payload of a version-1 frame with this tag.
func limitV1(tag string) int {
	switch tag {
	case tagMeta:
		return maxMetaLen
	case tagPosn:
		return maxPosnLen
	case tagEnd:
		return endLen
	default:
		return maxModlLen
	}
}

// frame reads the next frame and checks its CRC, then that its tag is one
// of want. The payload is valid until the next call.
func (r *reader) frame(want ...string) (string, []byte, error) {
	r.before = r.sum.Sum32()
	at := r.n
	var h [frameHeaderLen]byte
	if err := r.readFull(h[:]); err != nil {
		return "", nil, err
	}
	tag := string(h[:4])
	n := binary.LittleEndian.Uint32(h[4:])
	if limit := limitV1(tag); uint64(n) > uint64(limit) {
		return "", nil, fmt.Errorf("%w: frame %q at offset %d declares %d bytes, more than its limit %d",
			ErrCorrupt, tag, at, n, limit)
	}
	p, err := r.payload(int(n))
	if err != nil {
		return "", nil, err
	}
	var c [4]byte
	if err := r.readFull(c[:]); err != nil {
		return "", nil, err
	}
	crc := crc32.Update(crc32.Update(0, castagnoli, h[:]), castagnoli, p)
	if stored := binary.LittleEndian.Uint32(c[:]); crc != stored {
		return "", nil, fmt.Errorf("%w: frame %q at offset %d: CRC-32C %08x, stored %08x", ErrChecksum, tag, at, crc, stored)
	}
	if !slices.Contains(want, tag) {
		return "", nil, fmt.Errorf("%w: frame %q at offset %d where %q belongs", ErrCorrupt, tag, at, want)
	}
	return tag, p, nil
}

// WithLength returns r, telling Read's and CopyFile's reader that it
// delivers at most n bytes, so that the model's tables are allocated once
// instead of grown. n must be a length you trust (Export knows the size of
// the checkpoint it streams; an HTTP Content-Length is the sender's word):
// a wrong n costs memory, never correctness. Too small, and tables grow;
// too large, and a damaged file's declared counts may be allocated up to n
// bytes.
func WithLength(r io.Reader, n int64) io.Reader {
	if n < 0 {
		return r
	}
	return &lengthReader{r: r, left: n}
}

type lengthReader struct {
	r    io.Reader
	left int64
}

func (l *lengthReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.left = max(l.left-int64(n), 0)
	return n, err
}

func (l *lengthReader) Len() int { return int(l.left) }

// inputSize returns the bytes r can still deliver if it says (a
// bytes.Reader, an online.Lener, WithLength) or is a regular file, else -1.
func inputSize(r io.Reader) int64 {
	if l, ok := r.(online.Lener); ok {
		return int64(l.Len())
	}
	f, ok := r.(*os.File)
	if !ok {
		return -1
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil || off > fi.Size() {
		return -1
	}
	return fi.Size() - off
}

// readV1 reads the frames of format version 1 after the header.
func readV1(r *reader, s *Snapshot) error {
	_, p, err := r.frame(tagMeta)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(p, &s.Meta); err != nil {
		return fmt.Errorf("%w: meta: %v", ErrCorrupt, err)
	}
	_, p, err = r.frame(tagPosn)
	if err != nil {
		return err
	}
	if s.Positions, err = parsePositions(p); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}

	mr := &modelReader{r: r}
	m, err := online.ReadModel(mr)
	if mr.err != nil {
		return mr.err // the framing failed first; the decoder saw its error
	}
	if err != nil {
		return fmt.Errorf("%w: model: %w", ErrCorrupt, err)
	}
	// ReadModel reads to the end of the model frames and refuses bytes
	// after its END. section.
	if mr.headN == len(mr.head) {
		s.ModelEncoding = binary.LittleEndian.Uint32(mr.head[8:])
	}
	modelLen := binary.LittleEndian.Uint64(mr.end[:8])
	if modelLen != uint64(mr.n) {
		return fmt.Errorf("%w: END. says %d model bytes, the frames hold %d", ErrCorrupt, modelLen, mr.n)
	}
	s.Checksum = binary.LittleEndian.Uint32(mr.end[8:])
	if s.Checksum != mr.before {
		return fmt.Errorf("%w: whole-file CRC-32C %08x, END. says %08x", ErrChecksum, mr.before, s.Checksum)
	}
	s.ModelBytes = mr.n
	s.Model = m
	return nil
}

// modelReader presents the payloads of consecutive MODL frames as one
// stream, ending at the END. frame.
type modelReader struct {
	r      *reader
	cur    []byte // unread part of the current frame
	n      int64  // model bytes delivered
	done   bool
	end    [endLen]byte
	before uint32 // CRC-32C of the file before END.
	err    error
	head   [12]byte // the model encoding's magic and version
	headN  int
}

// Len bounds the model bytes still to come by the input bytes still to
// come, when the input's size is known (a file), so that online.ReadModel
// can allocate each table once; -1 otherwise.
func (m *modelReader) Len() int {
	if m.r.size < 0 {
		return -1
	}
	return len(m.cur) + int(max(m.r.size-m.r.n, 0))
}

func (m *modelReader) Read(p []byte) (int, error) {
	for len(m.cur) == 0 {
		switch {
		case m.err != nil:
			return 0, m.err
		case m.done:
			return 0, io.EOF
		}
		tag, payload, err := m.r.frame(tagModl, tagEnd)
		switch {
		case err != nil:
			m.err = err
		case tag == tagEnd:
			if len(payload) != endLen {
				m.err = fmt.Errorf("%w: END. frame of %d bytes, want %d", ErrCorrupt, len(payload), endLen)
				break
			}
			copy(m.end[:], payload)
			m.before = m.r.before
			m.done = true
			if m.n == 0 {
				m.err = fmt.Errorf("%w: no model frames", ErrCorrupt)
			}
		case len(payload) == 0:
			m.err = fmt.Errorf("%w: empty MODL frame at offset %d", ErrCorrupt, m.r.n-frameHeaderLen-4)
		default:
			m.cur = payload
		}
	}
	n := copy(p, m.cur)
	if m.headN < len(m.head) {
		m.headN += copy(m.head[m.headN:], m.cur[:n])
	}
	m.cur = m.cur[n:]
	m.n += int64(n)
	return n, nil
}
