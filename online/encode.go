package online

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
)

// Binary model encoding (all integers little-endian):
//
//	magic   "RGBTMODL"
//	version uint32 (EncodingVersion)
//	sections, each: tag [4]byte, length uint64, payload
//	  CONF  Config as JSON
//	  RAND  the random source's state (math/rand/v2 PCG MarshalBinary)
//	  CTRS  counters: events, distilled, refits, numErrors, nT, popN (uint64),
//	        rho (float64), hasMeanT (uint8), winN, winPos (uint32)
//	  USER  n uint32; n ids (uint32 length + bytes); p (n·d float64);
//	        accP (n float64); recentN (n uint32); recent (n·32 int32)
//	  ITEM  n uint32; n ids; q (n·d float64); accQ (n float64);
//	        per-item transition logit offsets (n·K·K float64)
//	  CLSF  W (K·d), b (K), then the noisy head's Wn (K·d), bn (K) float64
//	  TRAN  A (K·K·d), C (K·K), sumT (K·K), meanT (K·K) float64
//	  GMMX  fitted, reliable (uint8); weight (2), mean (2·2), cov (2·2·2) float64
//	  WIND  the distilled-sample window, 2·GMMWindow float64
//	  COOC  kind uint8 (0 sketch, 1 exact); sketch: itemN (items uint32),
//	        itemRes (items·S int32), userN (users uint32), userSig (users·H/4
//	        uint64, four 16-bit MinHash values each); exact: per user a count uint32 and sorted item indices,
//	        then per item a count and sorted user indices (int32)
//	  POPR  popularity ring (popRingSize int32), present only with
//	        popularity sampling
//	  END.  empty; the last section
//
// Counts are checked against what the configuration and the section length
// allow, an id is at most 64 KiB, and a table is allocated at its declared
// size only if the input (a Lener) can still deliver that many bytes;
// otherwise it grows as data arrives. So a corrupt length cannot cause an
// allocation beyond the input's own size. The reader must hold
// exactly one model: bytes after END. are refused. The same model always
// encodes to the same bytes.

// EncodingVersion is the version of the binary model encoding WriteTo
// writes. ReadModel reads this version only.
const EncodingVersion = 1

var modelMagic = [8]byte{'R', 'G', 'B', 'T', 'M', 'O', 'D', 'L'}

// ErrCorrupt is returned by ReadModel for input that is not a model
// encoding of a known version, or is inconsistent.
var ErrCorrupt = errors.New("corrupt model encoding")

type encoder struct {
	w       *bufio.Writer
	n       int64
	err     error
	buf     [8]byte
	scratch []byte
}

func (e *encoder) write(b []byte) {
	if e.err != nil {
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
func (e *encoder) uint32s(v []uint32) { writeSlice(e, v, 4, binary.LittleEndian.PutUint32) }
func (e *encoder) uint64s(v []uint64) { writeSlice(e, v, 8, binary.LittleEndian.PutUint64) }
func (e *encoder) section(tag string, length int) {
	e.write([]byte(tag))
	e.u64(uint64(length))
}

func idsLen(ids []string) int {
	n := 4
	for _, s := range ids {
		n += 4 + len(s)
	}
	return n
}

func (e *encoder) ids(ids []string) {
	e.u32(uint32(len(ids)))
	for _, s := range ids {
		e.u32(uint32(len(s)))
		e.write([]byte(s))
	}
}

// WriteTo writes the whole model, deterministically, to w.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	e := &encoder{w: bufio.NewWriterSize(w, 1<<16)}
	e.write(modelMagic[:])
	e.u32(EncodingVersion)

	conf, err := json.Marshal(m.cfg)
	if err != nil {
		return 0, fmt.Errorf("encode config: %w", err)
	}
	e.section("CONF", len(conf))
	e.write(conf)

	rs, err := m.src.MarshalBinary()
	if err != nil {
		return 0, fmt.Errorf("encode random source: %w", err)
	}
	e.section("RAND", len(rs))
	e.write(rs)

	e.section("CTRS", 6*8+8+1+2*4)
	for _, v := range []uint64{m.events, m.distilled, m.refits, m.numErrors, m.nT, m.popN} {
		e.u64(v)
	}
	e.f64(m.rho)
	e.u8(boolByte(m.hasMeanT))
	e.u32(uint32(m.winN))
	e.u32(uint32(m.winPos))

	nu, ni := len(m.users), len(m.items)
	e.section("USER", idsLen(m.users)+8*len(m.p)+8*nu+4*nu+4*len(m.recent))
	e.ids(m.users)
	e.floats(m.p)
	e.floats(m.accP)
	e.uint32s(m.recentN)
	e.int32s(m.recent)

	e.section("ITEM", idsLen(m.items)+8*(len(m.q)+ni+len(m.ti)))
	e.ids(m.items)
	e.floats(m.q)
	e.floats(m.accQ)
	e.floats(m.ti)

	e.section("CLSF", 8*(len(m.w)+len(m.b)+len(m.wn)+len(m.bn)))
	e.floats(m.w)
	e.floats(m.b)
	e.floats(m.wn)
	e.floats(m.bn)

	e.section("TRAN", 8*(len(m.a)+len(m.c)+len(m.sumT)+len(m.meanT)))
	e.floats(m.a)
	e.floats(m.c)
	e.floats(m.sumT)
	e.floats(m.meanT)

	e.section("GMMX", 2+8*14)
	e.u8(boolByte(m.mix.fitted))
	e.u8(uint8(m.mix.reliable))
	e.floats(m.mix.weight[:])
	for c := 0; c < 2; c++ {
		e.floats(m.mix.mean[c][:])
	}
	for c := 0; c < 2; c++ {
		for r := 0; r < 2; r++ {
			e.floats(m.mix.cov[c][r][:])
		}
	}

	e.section("WIND", 8*len(m.win))
	e.floats(m.win)

	switch c := m.cooc.(type) {
	case *sketchCooc:
		e.section("COOC", 1+4*(len(c.itemN)+len(c.itemRes)+len(c.userN))+8*len(c.userSig))
		e.u8(0)
		e.uint32s(c.itemN)
		e.int32s(c.itemRes)
		e.uint32s(c.userN)
		e.uint64s(c.userSig)
	case *exactCooc:
		n := 1
		for _, s := range c.userItems {
			n += 4 + 4*len(s)
		}
		for _, s := range c.itemUsers {
			n += 4 + 4*len(s)
		}
		e.section("COOC", n)
		e.u8(1)
		for _, s := range c.userItems {
			e.u32(uint32(len(s)))
			e.int32s(s)
		}
		for _, s := range c.itemUsers {
			e.u32(uint32(len(s)))
			e.int32s(s)
		}
	}
	if m.pop != nil {
		e.section("POPR", 4*len(m.pop))
		e.int32s(m.pop)
	}
	e.section("END.", 0)
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return e.n, fmt.Errorf("write model: %w", e.err)
	}
	return e.n, nil
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
}

// Lener is an input that knows an upper bound of the bytes it can still
// deliver, as bytes.Reader's Len does; a negative Len means unknown.
// ReadModel then allocates each table whose declared size the input can
// still back at once, instead of growing it as data arrives: decoding
// needs about the model's own memory, not twice that.
type Lener interface{ Len() int }

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
		l := int(d.u32())
		if l > maxIDBytes {
			d.fail("id of %d bytes, over %d", l, maxIDBytes)
			return nil
		}
		if !d.fits(l, 1) {
			return nil
		}
		b := make([]byte, l)
		d.read(b)
		v = append(v, string(b))
	}
	return v
}

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

// ReadModel reads a model written by WriteTo. The returned model continues
// exactly where the written one stopped, random source included. If r is a
// Lener, its tables are allocated once rather than grown.
func ReadModel(r io.Reader) (*Model, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<16), left: 12, avail: -1}
	if l, ok := r.(Lener); ok {
		d.avail = int64(l.Len())
	}
	var magic [8]byte
	d.read(magic[:])
	if d.err == nil && magic != modelMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if v := d.u32(); d.err == nil && v != EncodingVersion {
		return nil, fmt.Errorf("%w: encoding version %d, this build reads %d", ErrCorrupt, v, EncodingVersion)
	}

	d.section("CONF")
	if d.err == nil && d.left > 1<<20 {
		d.fail("config of %d bytes", d.left)
	}
	var cfg Config
	if d.err == nil {
		b := make([]byte, d.left)
		d.read(b)
		if err := json.Unmarshal(b, &cfg); err != nil {
			d.fail("config: %v", err)
		} else if err := cfg.Validate(); err != nil {
			d.fail("config: %v", err)
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	cfg = cfg.WithDefaults()
	m := &Model{cfg: cfg, k: cfg.K(), d: cfg.Dim, src: &rand.PCG{}}
	m.rnd = rand.New(m.src)
	m.alloc()
	k, dim := m.k, m.d

	d.section("RAND")
	if d.err == nil && d.left > 64 {
		d.fail("random state of %d bytes", d.left)
	}
	if d.err == nil {
		b := make([]byte, d.left)
		d.read(b)
		if err := m.src.UnmarshalBinary(b); err != nil {
			d.fail("random state: %v", err)
		}
	}

	d.section("CTRS")
	m.events, m.distilled, m.refits, m.numErrors, m.nT, m.popN = d.u64(), d.u64(), d.u64(), d.u64(), d.u64(), d.u64()
	m.rho = d.f64()
	m.hasMeanT = d.u8() == 1
	m.winN, m.winPos = int(d.u32()), int(d.u32())
	if d.err == nil && (m.winN > cfg.GMMWindow || m.winPos >= cfg.GMMWindow || !(m.rho > 0 && m.rho < 1)) {
		d.fail("counters out of range")
	}

	d.section("USER")
	m.users = d.ids()
	nu := len(m.users)
	m.p = d.floats(nu * dim)
	m.accP = d.floats(nu)
	m.recentN = d.uint32s(nu)
	m.recent = d.int32s(nu * recentItems)
	m.userEpoch = make([]uint64, nu)

	d.section("ITEM")
	m.items = d.ids()
	ni := len(m.items)
	m.q = d.floats(ni * dim)
	m.accQ = d.floats(ni)
	m.ti = d.floats(ni * k * k)
	m.itemEpoch = make([]uint64, ni)

	d.section("CLSF")
	m.w, m.b = d.floats(k*dim), d.floats(k)
	m.wn, m.bn = d.floats(k*dim), d.floats(k)
	d.section("TRAN")
	m.a, m.c = d.floats(k*k*dim), d.floats(k*k)
	m.sumT, m.meanT = d.floats(k*k), d.floats(k*k)

	d.section("GMMX")
	m.mix.fitted = d.u8() == 1
	m.mix.reliable = int(d.u8())
	copy(m.mix.weight[:], d.floats(2))
	for c := 0; c < 2; c++ {
		copy(m.mix.mean[c][:], d.floats(2))
	}
	for c := 0; c < 2; c++ {
		for r := 0; r < 2; r++ {
			copy(m.mix.cov[c][r][:], d.floats(2))
		}
	}
	if d.err == nil && m.mix.reliable > 1 {
		d.fail("gmm reliable component %d", m.mix.reliable)
	}
	if d.err == nil && m.mix.fitted && !m.mix.cache() {
		d.fail("gmm covariance not positive definite")
	}

	d.section("WIND")
	m.win = d.floats(2 * cfg.GMMWindow)

	d.section("COOC")
	switch kind := d.u8(); {
	case d.err != nil:
	case kind == 0 && cfg.Cooccurrence == CoocSketch:
		c := m.cooc.(*sketchCooc)
		c.itemN = d.uint32s(ni)
		c.itemRes = d.int32s(ni * c.s)
		c.userN = d.uint32s(nu)
		c.userSig = d.uint64s(nu * c.h / 4)
		for _, v := range c.itemRes {
			if v < -1 || int(v) >= nu {
				d.fail("user index %d in sketch", v)
				break
			}
		}
	case kind == 1 && cfg.Cooccurrence == CoocExact:
		c := m.cooc.(*exactCooc)
		c.grow(nu, ni)
		for u := 0; u < nu && d.err == nil; u++ {
			c.userItems[u] = d.int32s(int(d.u32()))
			checkIndices(d, c.userItems[u], ni)
		}
		for i := 0; i < ni && d.err == nil; i++ {
			c.itemUsers[i] = d.int32s(int(d.u32()))
			checkIndices(d, c.itemUsers[i], nu)
		}
	default:
		d.fail("co-occurrence kind %d does not match the config", kind)
	}
	for _, v := range m.recent {
		if v < -1 || int(v) >= ni {
			d.fail("item index %d in recent items", v)
			break
		}
	}

	if m.pop != nil {
		d.section("POPR")
		m.pop = d.int32s(popRingSize)
		for _, v := range m.pop[:min(m.popN, uint64(len(m.pop)))] {
			if v < 0 || int(v) >= ni {
				d.fail("item index %d in popularity ring", v)
				break
			}
		}
	}
	d.section("END.")
	if d.err == nil && d.left != 0 {
		d.fail("END section is not empty")
	}
	if d.err == nil {
		if _, err := d.r.ReadByte(); err == nil {
			d.fail("data after the END section")
		} else if !errors.Is(err, io.EOF) {
			d.err = err
		}
	}
	if d.err != nil {
		return nil, d.err
	}

	m.userIdx = make(map[string]int32, nu)
	for u, id := range m.users {
		m.userIdx[id] = int32(u)
	}
	m.itemIdx = make(map[string]int32, ni)
	for i, id := range m.items {
		m.itemIdx[id] = int32(i)
	}
	if len(m.userIdx) != nu || len(m.itemIdx) != ni {
		return nil, fmt.Errorf("%w: duplicate ids", ErrCorrupt)
	}
	return m, nil
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
