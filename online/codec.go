package online

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// The primitives of the model encoding (FORMAT.md): little-endian
// integers and floats, length-prefixed ids, and sections (tag, length,
// payload). Every part of the model encodes and decodes itself with them.

// encoder writes the encoding. An encoder without a writer only counts
// the bytes it would write: section runs each body twice, once so, to
// learn the section's length, then for real.
type encoder struct {
	w       *bufio.Writer // nil: count only
	n       int64
	err     error
	buf     [8]byte
	scratch []byte
}

func (e *encoder) write(b []byte) {
	if e.err != nil {
		return
	}
	if e.w == nil {
		e.n += int64(len(b))
		return
	}
	n, err := e.w.Write(b)
	e.n += int64(n)
	e.err = err
}

func (e *encoder) u8(v uint8)   { e.write([]byte{v}) }
func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.buf[:4], v); e.write(e.buf[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.buf[:8], v); e.write(e.buf[:8]) }
func (e *encoder) f64(v float64) {
	e.u64(math.Float64bits(v))
}

// writeSlice writes v with put, size bytes per value, a chunk at a time.
func writeSlice[T any](e *encoder, v []T, size int, put func([]byte, T)) {
	if e.w == nil {
		e.n += int64(len(v) * size)
		return
	}
	if len(e.scratch) < chunk*8 {
		e.scratch = make([]byte, chunk*8)
	}
	for len(v) > 0 && e.err == nil {
		n := min(len(v), chunk)
		b := e.scratch[:n*size]
		for j, x := range v[:n] {
			put(b[j*size:], x)
		}
		e.write(b)
		v = v[n:]
	}
}

func (e *encoder) floats(v []float64) {
	writeSlice(e, v, 8, func(b []byte, x float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(x)) })
}
func (e *encoder) int32s(v []int32) {
	writeSlice(e, v, 4, func(b []byte, x int32) { binary.LittleEndian.PutUint32(b, uint32(x)) })
}
func (e *encoder) int64s(v []int64) {
	writeSlice(e, v, 8, func(b []byte, x int64) { binary.LittleEndian.PutUint64(b, uint64(x)) })
}
func (e *encoder) uint32s(v []uint32) { writeSlice(e, v, 4, binary.LittleEndian.PutUint32) }
func (e *encoder) uint64s(v []uint64) { writeSlice(e, v, 8, binary.LittleEndian.PutUint64) }

// section writes a section: tag, the length of what body writes, and
// what body writes.
func (e *encoder) section(tag string, body func(e *encoder)) {
	size := encoder{}
	body(&size)
	e.write([]byte(tag))
	e.u64(uint64(size.n))
	body(e)
}

func (e *encoder) ids(ids []string) {
	if e.w == nil {
		e.n += 4
		for _, s := range ids {
			e.n += 4 + int64(len(s))
		}
		return
	}
	e.u32(uint32(len(ids)))
	for _, s := range ids {
		e.id(s)
	}
}

// id writes one id: its length, then its bytes.
func (e *encoder) id(s string) {
	e.u32(uint32(len(s)))
	if e.w == nil {
		e.n += int64(len(s))
		return
	}
	if e.err == nil {
		n, err := e.w.WriteString(s)
		e.n += int64(n)
		e.err = err
	}
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// decoder reads one section at a time; left is what remains of it.
type decoder struct {
	r    *bufio.Reader
	left uint64 // bytes left in the section, as declared
	// avail bounds the bytes the input can still deliver, if it says
	// (Lener); -1 if unknown.
	avail int64
	err   error
	buf   [8]byte
	// scratch is readInto's buffer.
	scratch []byte
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) read(b []byte) {
	if d.err != nil {
		return
	}
	if uint64(len(b)) > d.left {
		d.fail("section shorter than its contents")
		return
	}
	if _, err := io.ReadFull(d.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			d.fail("truncated")
		} else {
			d.err = err
		}
		return
	}
	d.left -= uint64(len(b))
	if d.avail >= 0 {
		d.avail -= int64(len(b))
	}
}

func (d *decoder) u8() uint8 {
	d.read(d.buf[:1])
	return d.buf[0]
}
func (d *decoder) u32() uint32 {
	d.read(d.buf[:4])
	return binary.LittleEndian.Uint32(d.buf[:4])
}
func (d *decoder) u64() uint64 {
	d.read(d.buf[:8])
	return binary.LittleEndian.Uint64(d.buf[:8])
}
func (d *decoder) f64() float64 { return math.Float64frombits(d.u64()) }

// fits checks that n elements of size bytes each can still be in the
// section.
func (d *decoder) fits(n, size int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || uint64(n)*uint64(size) > d.left {
		d.fail("declared count %d exceeds the section", n)
		return false
	}
	return true
}

// chunk is how many elements a slice grows by while it is read; it bounds
// what a declared but unbacked count can cost.
const chunk = 1 << 14

// maxIDBytes bounds one user or item id in the encoding. Ids come from
// the input, where consumer allows 256 bytes; this is far above that and
// far below what could hurt.
const maxIDBytes = 1 << 16

func (d *decoder) floats(n int) []float64 {
	v := readSlice(d, n, 8, func(b []byte) float64 {
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	})
	if !finite(v) {
		d.fail("non-finite parameter")
	}
	return v
}

func (d *decoder) int32s(n int) []int32 {
	return readSlice(d, n, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
}

func (d *decoder) int64s(n int) []int64 {
	return readSlice(d, n, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
}

func (d *decoder) uint32s(n int) []uint32 { return readSlice(d, n, 4, binary.LittleEndian.Uint32) }

func (d *decoder) uint64s(n int) []uint64 { return readSlice(d, n, 8, binary.LittleEndian.Uint64) }

// capFor is the capacity to allocate for n values of size bytes: all n if
// the input can still deliver them, else one chunk, so that what a
// declared count costs is bounded by the bytes actually there.
func (d *decoder) capFor(n, size int) int {
	if d.avail >= 0 && uint64(n)*uint64(size) <= uint64(d.avail) {
		return n
	}
	return min(n, chunk)
}

// readSlice reads n values of size bytes each, decoding each with conv,
// a chunk at a time; the slice grows as data arrives (see capFor).
func readSlice[T any](d *decoder, n, size int, conv func([]byte) T) []T {
	if !d.fits(n, size) {
		return nil
	}
	v := make([]T, 0, d.capFor(n, size))
	buf := make([]byte, min(n, chunk)*size)
	for len(v) < n && d.err == nil {
		b := buf[:min(n-len(v), chunk)*size]
		d.read(b)
		if d.err != nil {
			return nil
		}
		for off := 0; off < len(b); off += size {
			v = append(v, conv(b[off:off+size]))
		}
	}
	return v
}

func (d *decoder) ids() []string {
	n := int(d.u32())
	if !d.fits(n, 4) {
		return nil
	}
	v := make([]string, 0, d.capFor(n, 4))
	for len(v) < n && d.err == nil {
		id := d.id()
		if d.err != nil {
			return nil
		}
		v = append(v, id)
	}
	return v
}

// id reads one id as encoder.id writes it.
func (d *decoder) id() string {
	l := int(d.u32())
	if d.err == nil && l > maxIDBytes {
		d.fail("id of %d bytes, over %d", l, maxIDBytes)
	}
	if !d.fits(l, 1) {
		return ""
	}
	b := make([]byte, l)
	d.read(b)
	return string(b)
}

// readInto reads len(dst) values of size bytes each into dst, decoding
// each with conv, a chunk at a time.
func readInto[T any](d *decoder, dst []T, size int, conv func([]byte) T) {
	if !d.fits(len(dst), size) {
		return
	}
	if n := min(len(dst), chunk) * size; len(d.scratch) < n {
		d.scratch = make([]byte, n)
	}
	for off := 0; off < len(dst) && d.err == nil; {
		n := min(len(dst)-off, chunk)
		b := d.scratch[:n*size]
		d.read(b)
		if d.err != nil {
			return
		}
		for j := range n {
			dst[off+j] = conv(b[j*size:])
		}
		off += n
	}
}

// floatsInto reads len(dst) values into dst; they must be finite.
func (d *decoder) floatsInto(dst []float64) {
	readInto(d, dst, 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
	if d.err == nil && !finite(dst) {
		d.fail("non-finite parameter")
	}
}

func (d *decoder) int32sInto(dst []int32) {
	readInto(d, dst, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
}

func (d *decoder) int64sInto(dst []int64) {
	readInto(d, dst, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
}

func (d *decoder) uint32sInto(dst []uint32) { readInto(d, dst, 4, binary.LittleEndian.Uint32) }

func (d *decoder) uint64sInto(dst []uint64) { readInto(d, dst, 8, binary.LittleEndian.Uint64) }

// section reads the next section header and checks its tag.
func (d *decoder) section(tag string) {
	if d.err != nil {
		return
	}
	if d.left != 0 {
		d.fail("%d unread bytes before section %s", d.left, tag)
		return
	}
	var h [12]byte
	d.left = 12
	d.read(h[:])
	if d.err != nil {
		return
	}
	if string(h[:4]) != tag {
		d.fail("section %q where %q belongs", h[:4], tag)
		return
	}
	d.left = binary.LittleEndian.Uint64(h[4:])
}

// has reports whether the next section is tag's, without reading it: for
// a section that an encoding holds or not, as the model is.
func (d *decoder) has(tag string) bool {
	if d.err != nil || d.left != 0 {
		return false
	}
	b, err := d.r.Peek(len(tag))
	return err == nil && string(b) == tag
}

// checkIndices fails d unless v is strictly ascending within [0,n).
func checkIndices(d *decoder, v []int32, n int) {
	for j, x := range v {
		if x < 0 || int(x) >= n || (j > 0 && x <= v[j-1]) {
			d.fail("index %d out of order or range", x)
			return
		}
	}
}
