package snapshot

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"denoiser/consumer/input"
	"denoiser/internal/atomicfile"
	"denoiser/online"
)

// Contents is what a snapshot holds. Exactly one of Model and ModelBytes
// is set.
type Contents struct {
	// Model is a live model; Write encodes it straight into the file. The
	// caller must not Step it while Write runs.
	Model *online.Model
	// ModelBytes is a model already encoded by online.Model.WriteTo, for
	// example the model of a checkpoint store. Write copies it as is.
	ModelBytes []byte
	// Positions are the next input offsets the model has consumed up to.
	// Write stores them sorted; they must be valid (see FORMAT.md).
	Positions []input.Position
	// Meta describes the snapshot's origin.
	Meta Meta
}

// frameWriter writes frames to w and checksums everything it writes.
type frameWriter struct {
	w   *bufio.Writer
	sum hash.Hash32
	n   int64
	err error
}

func (f *frameWriter) write(b []byte) {
	if f.err != nil {
		return
	}
	n, err := f.w.Write(b)
	f.sum.Write(b[:n])
	f.n += int64(n)
	f.err = err
}

// frame writes one frame with payload p.
func (f *frameWriter) frame(tag string, p []byte) {
	var h [frameHeaderLen]byte
	copy(h[:4], tag)
	binary.LittleEndian.PutUint32(h[4:], uint32(len(p)))
	crc := crc32.Update(crc32.Update(0, castagnoli, h[:]), castagnoli, p)
	f.write(h[:])
	f.write(p)
	f.write(binary.LittleEndian.AppendUint32(h[:0], crc))
}

// modelFrames is the io.Writer the model encoding is written to: it cuts
// it into MODL frames of maxModlLen bytes.
type modelFrames struct {
	f   *frameWriter
	buf []byte
	n   int64
}

func (m *modelFrames) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 && m.f.err == nil {
		k := min(len(p), maxModlLen-len(m.buf))
		m.buf = append(m.buf, p[:k]...)
		p = p[k:]
		written += k
		if len(m.buf) == maxModlLen {
			m.flush()
		}
	}
	m.n += int64(written)
	return written, m.f.err
}

func (m *modelFrames) flush() {
	if len(m.buf) > 0 {
		m.f.frame(tagModl, m.buf)
		m.buf = m.buf[:0]
	}
}

// Write writes c to w as a snapshot of the current FormatVersion (see
// FORMAT.md) and returns what it wrote. It streams: beside the model itself
// it holds one 1 MiB frame buffer. The same contents always give the same
// bytes.
func Write(w io.Writer, c Contents) (Info, error) {
	if (c.Model == nil) == (c.ModelBytes == nil) {
		return Info{}, errors.New("write snapshot: set exactly one of Model and ModelBytes")
	}
	if c.Model == nil && len(c.ModelBytes) == 0 {
		return Info{}, errors.New("write snapshot: empty model encoding")
	}
	ps, err := validatePositions(c.Positions)
	if err != nil {
		return Info{}, fmt.Errorf("write snapshot: %w", err)
	}
	posn := appendPositions(nil, ps)
	if len(posn) > maxPosnLen {
		return Info{}, fmt.Errorf("write snapshot: %d positions take %d bytes, more than %d", len(ps), len(posn), maxPosnLen)
	}
	meta, err := json.Marshal(c.Meta)
	if err != nil {
		return Info{}, fmt.Errorf("write snapshot: encode meta: %w", err)
	}
	if len(meta) > maxMetaLen {
		return Info{}, fmt.Errorf("write snapshot: meta of %d bytes, more than %d", len(meta), maxMetaLen)
	}

	f := &frameWriter{w: bufio.NewWriterSize(w, 1<<16), sum: crc32.New(castagnoli)}
	var h [headerLen]byte
	copy(h[:], magic[:])
	binary.LittleEndian.PutUint32(h[12:], FormatVersion)
	binary.LittleEndian.PutUint32(h[16:], crc32.Checksum(h[:16], castagnoli))
	f.write(h[:])
	f.frame(tagMeta, meta)
	f.frame(tagPosn, posn)

	mf := &modelFrames{f: f, buf: make([]byte, 0, maxModlLen)}
	if c.Model != nil {
		if _, err := c.Model.WriteTo(mf); err != nil && f.err == nil {
			f.err = err
		}
	} else {
		_, _ = mf.Write(c.ModelBytes)
	}
	mf.flush()

	info := Info{FormatVersion: FormatVersion, ModelBytes: mf.n}
	info.Checksum = f.sum.Sum32()
	end := binary.LittleEndian.AppendUint64(make([]byte, 0, endLen), uint64(mf.n))
	f.frame(tagEnd, binary.LittleEndian.AppendUint32(end, info.Checksum))
	if f.err == nil {
		f.err = f.w.Flush()
	}
	info.Bytes = f.n
	if f.err != nil {
		return info, fmt.Errorf("write snapshot: %w", f.err)
	}
	return info, nil
}

// WriteFile writes c to path atomically (package atomicfile: a temporary
// file in the same directory, fsynced, renamed over path, the directory
// fsynced). On error path is left as it was.
func WriteFile(path string, c Contents) (Info, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return Info{}, fmt.Errorf("write snapshot: %w", err)
	}
	info, err := Write(f, c)
	if err != nil {
		return Info{}, errors.Join(err, f.Abort())
	}
	if err := f.Commit(); err != nil {
		return Info{}, fmt.Errorf("write snapshot: %w", err)
	}
	return info, nil
}

// CopyFile copies the snapshot streamed by r (a download, a pipe) to path,
// atomically as WriteFile, once Read has verified it whole while it was
// copied: a damaged or truncated stream leaves path as it was. It returns
// the snapshot as read. If r knows its length (see WithLength), the model's
// tables are allocated once.
func CopyFile(path string, r io.Reader) (*Snapshot, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("copy snapshot: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	s, err := read(io.TeeReader(r, w), inputSize(r))
	if err != nil {
		err = fmt.Errorf("read snapshot: %w", err)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("copy snapshot to %s: %w", path, err), f.Abort())
	}
	if err := f.Commit(); err != nil {
		return nil, fmt.Errorf("copy snapshot: %w", err)
	}
	return s, nil
}
