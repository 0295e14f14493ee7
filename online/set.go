package online

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
)

// Layout says how a member's state is split between models.
type Layout string

const (
	// LayoutPartition keeps a model per input partition: partition p's
	// model learns from partition p's events only, and draws from its own
	// random source (NewPartition), so its scores depend on
	// that partition's input alone, whichever member reads it and
	// whatever else that member reads.
	LayoutPartition Layout = "partition"
	// LayoutMember keeps one model for every partition a member reads, in
	// the order the member reads them (the state before partition state).
	LayoutMember Layout = "member"
)

// Validate reports an unknown layout.
func (l Layout) Validate() error {
	switch l {
	case LayoutPartition, LayoutMember:
		return nil
	}
	return fmt.Errorf("unknown state layout %q: use %q or %q", string(l), LayoutPartition, LayoutMember)
}

// Set is a member's state: its models by key, the input partition with
// LayoutPartition, 0 for the one model of LayoutMember. A model is made
// the first time its partition is asked for (For): from the template
// when the set has one (a snapshot or a checkpoint of another layout the
// set started from), else new from the configuration.
//
// A Set is owned by one goroutine, except that the models of different
// keys may be stepped at the same time once For returned them. Its frozen
// copy (FrozenCopy) is what a checkpoint encodes: WriteTo writes every
// model; WriteDelta what changed since the copy was last marked saved:
// the delta of every model the store holds, and models new since then
// whole. ReadSet reads both back.
type Set struct {
	cfg      Config
	seed     uint64
	layout   Layout
	template []byte // a model encoding new models start from; nil: New(cfg)
	models   map[int32]*Model
	keys     []int32 // of models, sorted

	// A frozen copy's: the keys whose model the store holds as saved
	// (MarkSaved), and a buffer for encoding one model.
	frozen bool
	saved  map[int32]bool
	buf    bytes.Buffer
}

// NewSet returns an empty set whose models start from cfg: partition p's
// is NewPartition(cfg, seed, p) (LayoutMember: New(cfg, NewSource(seed))).
// It returns cfg's error, if any.
func NewSet(cfg Config, seed uint64, layout Layout) (*Set, error) {
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Set{cfg: cfg, seed: seed, layout: layout, models: map[int32]*Model{}}
	if layout == LayoutMember { // its one model is there from the start
		if _, err := s.For(0); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewSetFrom returns a set whose models start from m (a snapshot, say):
// with LayoutMember, m is the one model; with LayoutPartition, every
// partition's model starts as a copy of m that draws from its own
// partition source.
func NewSetFrom(m *Model, seed uint64, layout Layout) (*Set, error) {
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	s := &Set{cfg: m.cfg, seed: seed, layout: layout, models: map[int32]*Model{}}
	if layout == LayoutMember {
		s.add(0, m)
		return s, nil
	}
	var b bytes.Buffer
	if _, err := m.WriteTo(&b); err != nil {
		return nil, err
	}
	s.template = b.Bytes()
	return s, nil
}

// Layout is the set's layout.
func (s *Set) Layout() Layout { return s.layout }

// Seed is the seed the set's random sources derive from.
func (s *Set) Seed() uint64 { return s.seed }

// Config is the configuration of the set's models.
func (s *Set) Config() Config { return s.cfg }

// Key is the key of partition p's model.
func (s *Set) Key(p int32) int32 {
	if s.layout == LayoutMember {
		return 0
	}
	return p
}

// Keys returns the keys of the models made so far, sorted. The slice is
// the set's: do not change it.
func (s *Set) Keys() []int32 { return s.keys }

// Model returns the model of key k, nil if it was not made.
func (s *Set) Model(k int32) *Model { return s.models[k] }

// Len is the number of models made so far.
func (s *Set) Len() int { return len(s.keys) }

// For returns partition p's model, making it if needed. A frozen set
// makes nothing: it returns nil for a key it lacks.
func (s *Set) For(p int32) (*Model, error) {
	k := s.Key(p)
	if m := s.models[k]; m != nil || s.frozen {
		return m, nil
	}
	var m *Model
	var err error
	if s.template != nil {
		if m, err = ReadModel(bytes.NewReader(s.template)); err != nil {
			return nil, fmt.Errorf("model of partition %d from the template: %w", p, err)
		}
		*m.src = *s.source(k)
	} else if m, err = NewPartition(s.cfg, s.seed, k); err != nil { // LayoutMember's key 0: New(cfg, NewSource(seed))
		return nil, err
	}
	s.add(k, m)
	return m, nil
}

func (s *Set) source(k int32) *rand.PCG {
	if s.layout == LayoutMember {
		return NewSource(s.seed)
	}
	return NewPartitionSource(s.seed, k)
}

func (s *Set) add(k int32, m *Model) {
	s.models[k] = m
	i, _ := slices.BinarySearch(s.keys, k)
	s.keys = slices.Insert(s.keys, i, k)
}

// Replace makes m the model of key k (a partition's model restored from
// elsewhere, a changelog say), in place of the one the set has, if any.
// m keeps its own configuration and random source. The next FrozenCopy
// copies it whole (Model.FrozenCopy knows its copy came from another
// model), and the WriteDelta after writes it whole: what a store holds of
// the old model is no base for it. Not on a frozen copy.
func (s *Set) Replace(k int32, m *Model) error {
	switch {
	case s.frozen:
		return errors.New("online: Replace on a frozen model set")
	case m == nil || m.frozen:
		return errors.New("online: Replace with a nil or frozen model")
	case s.layout == LayoutMember && k != 0:
		return fmt.Errorf("online: Replace of key %d in a set of one model for the member (key 0)", k)
	}
	if s.models[k] == nil {
		s.add(k, m)
	} else {
		s.models[k] = m
	}
	return nil
}

// Remove drops the model of key k, if any: a partition this member no
// longer reads, whose state is held elsewhere (a changelog). The next
// FrozenCopy drops it too, and the WriteDelta after lists it no more,
// which ReadSet reads as its removal. A later For(k) makes a new model.
// Not on a frozen copy, nor in a set of one model for the member.
func (s *Set) Remove(k int32) error {
	switch {
	case s.frozen:
		return errors.New("online: Remove on a frozen model set")
	case s.layout == LayoutMember:
		return errors.New("online: Remove in a set of one model for the member")
	}
	s.remove(k)
	return nil
}

func (s *Set) remove(k int32) {
	if _, ok := s.models[k]; !ok {
		return
	}
	delete(s.models, k)
	if i, ok := slices.BinarySearch(s.keys, k); ok {
		s.keys = slices.Delete(s.keys, i, i+1)
	}
}

// Version is the number of events the set's models learned from, all
// together.
func (s *Set) Version() uint64 {
	var n uint64
	for _, m := range s.models {
		n += m.Version()
	}
	return n
}

// Summary sums the counts of the set's models; the mixture, ρ, the
// mean transition and the users' prior's strength are those of the model
// that learned from the most
// events (the lowest key among equals); the unranked types are every
// model's, each once. An empty set's is the zero
// Summary.
func (s *Set) Summary() Summary {
	var sum Summary
	var top *Model
	for _, k := range s.keys {
		m := s.models[k]
		ms := m.Summary()
		if top == nil || m.Version() > top.Version() {
			top = m
			sum.Rho, sum.GMM, sum.MeanTransition = ms.Rho, ms.GMM, ms.MeanTransition
			sum.UserPriorStrength, sum.ItemPriorStrength, sum.Burst = ms.UserPriorStrength, ms.ItemPriorStrength, ms.Burst
		}
		sum.Events += ms.Events
		sum.Users += ms.Users
		sum.Items += ms.Items
		sum.Distilled += ms.Distilled
		sum.Refits += ms.Refits
		sum.NumericalErrors += ms.NumericalErrors
		sum.MaxUsers += ms.MaxUsers
		sum.MaxItems += ms.MaxItems
		sum.UsersEvicted += ms.UsersEvicted
		sum.ItemsEvicted += ms.ItemsEvicted
		sum.ColdUserEvents += ms.ColdUserEvents
		sum.ColdItemEvents += ms.ColdItemEvents
		for _, t := range ms.UnrankedTypes {
			if !slices.Contains(sum.UnrankedTypes, t) {
				sum.UnrankedTypes = append(sum.UnrankedTypes, t)
			}
		}
		for _, t := range ms.OutOfOrderTypes {
			if !slices.Contains(sum.OutOfOrderTypes, t) {
				sum.OutOfOrderTypes = append(sum.OutOfOrderTypes, t)
			}
		}
	}
	if sum.Events > 0 {
		sum.DistilledShare = float64(sum.Distilled) / float64(sum.Events)
	}
	return sum
}

// FrozenCopy copies s into dst (nil: a new set), each model with
// Model.FrozenCopy (what changed since dst's last copy), and returns dst.
// Another goroutine may encode the copy while s learns.
func (s *Set) FrozenCopy(dst *Set) *Set {
	if dst == nil {
		dst = &Set{models: map[int32]*Model{}, saved: map[int32]bool{}}
	}
	dst.frozen = true
	dst.cfg, dst.seed, dst.layout, dst.template = s.cfg, s.seed, s.layout, s.template
	for _, k := range slices.Clone(dst.keys) { // removed from s since the last copy
		if s.models[k] == nil {
			dst.remove(k)
			delete(dst.saved, k)
		}
	}
	for _, k := range s.keys {
		c := s.models[k].FrozenCopy(dst.models[k])
		if dst.models[k] == nil {
			dst.add(k, c)
		}
	}
	return dst
}

// MarkSaved records that the store holds the frozen copy s as it is, so
// that WriteDelta writes what changes after. See Model.MarkSaved.
func (s *Set) MarkSaved() {
	if !s.frozen {
		return
	}
	for k, m := range s.models {
		m.MarkSaved()
		s.saved[k] = true
	}
}

// HasDeltaBase reports whether WriteDelta can write a delta of s: it is
// a frozen copy marked saved.
func (s *Set) HasDeltaBase() bool { return s.frozen && len(s.saved) > 0 }

// The set encoding: setMagic, a kind byte (setBase or setDelta), the
// layout byte, the seed; a base then holds the template's length and
// bytes (length 0: none); then the entry count and, per model in key
// order, its key, its entry kind (entryWhole: Model.WriteTo; entryDelta:
// Model.WriteDelta against the previous base or delta of that key), its
// length and its bytes. All integers little-endian. A delta lists every
// model the set has: a model of the base (or of an earlier delta) that a
// delta does not list was removed (Remove).
var setMagic = [8]byte{'D', 'N', 'S', 'E', 'T', 0, 0, 1}

const (
	setBase  = 'B'
	setDelta = 'D'

	entryWhole = 'W'
	entryDelta = 'D'
)

func layoutByte(l Layout) byte {
	if l == LayoutMember {
		return 'M'
	}
	return 'P'
}

// WriteTo writes every model of s, whole, with the template.
func (s *Set) WriteTo(w io.Writer) (int64, error) {
	cw := &setWriter{w: w}
	s.header(cw, setBase)
	cw.u64(uint64(len(s.template)))
	cw.write(s.template)
	cw.u32(uint32(len(s.keys)))
	for _, k := range s.keys {
		s.writeWhole(cw, k)
	}
	if cw.err != nil {
		return cw.n, fmt.Errorf("write model set: %w", cw.err)
	}
	return cw.n, nil
}

// WriteDelta writes what changed in s, a frozen copy, since it was last
// marked saved: the delta of every model saved then, and the models new
// since, whole. It returns ErrNoDeltaBase unless HasDeltaBase.
func (s *Set) WriteDelta(w io.Writer) (int64, error) {
	if !s.HasDeltaBase() {
		return 0, ErrNoDeltaBase
	}
	cw := &setWriter{w: w}
	s.header(cw, setDelta)
	cw.u32(uint32(len(s.keys)))
	for _, k := range s.keys {
		m := s.models[k]
		if !s.saved[k] || !m.HasDeltaBase() {
			s.writeWhole(cw, k)
			continue
		}
		cw.u32(uint32(k))
		cw.write([]byte{entryDelta})
		cw.u64(uint64(m.DeltaSize()))
		if cw.err == nil {
			_, cw.err = m.WriteDelta(cw)
		}
	}
	if cw.err != nil {
		return cw.n, fmt.Errorf("write model set delta: %w", cw.err)
	}
	return cw.n, nil
}

// DeltaSize is the number of bytes WriteDelta would write now (0 unless
// HasDeltaBase): the models' delta sizes, and the encoding of those new
// since the last save, which it encodes to count.
func (s *Set) DeltaSize() int64 {
	if !s.HasDeltaBase() {
		return 0
	}
	n := int64(len(setMagic) + 2 + 8 + 4)
	for _, k := range s.keys {
		m := s.models[k]
		n += 4 + 1 + 8
		if s.saved[k] && m.HasDeltaBase() {
			n += m.DeltaSize()
		} else {
			c, _ := m.WriteTo(io.Discard)
			n += c
		}
	}
	return n
}

func (s *Set) header(cw *setWriter, kind byte) {
	cw.write(setMagic[:])
	cw.write([]byte{kind, layoutByte(s.layout)})
	cw.u64(s.seed)
}

// writeWhole writes key k's model as a whole entry, through s's buffer
// (its length comes first).
func (s *Set) writeWhole(cw *setWriter, k int32) {
	if cw.err != nil {
		return
	}
	s.buf.Reset()
	if _, err := s.models[k].WriteTo(&s.buf); err != nil {
		cw.err = err
		return
	}
	cw.u32(uint32(k))
	cw.write([]byte{entryWhole})
	cw.u64(uint64(s.buf.Len()))
	cw.write(s.buf.Bytes())
	if s.buf.Cap() > 64<<20 {
		s.buf = bytes.Buffer{} // do not hold a large partition's encoding between saves
	}
}

type setWriter struct {
	w   io.Writer
	n   int64
	err error
	b   [8]byte
}

func (c *setWriter) write(p []byte) {
	if c.err != nil || len(p) == 0 {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

func (c *setWriter) Write(p []byte) (int, error) {
	c.write(p)
	if c.err != nil {
		return 0, c.err
	}
	return len(p), nil
}

func (c *setWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(c.b[:4], v)
	c.write(c.b[:4])
}

func (c *setWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(c.b[:], v)
	c.write(c.b[:])
}

// ErrLayout is returned by ReadSet when the encoding holds models of
// another layout than asked for and cannot be turned into it.
var ErrLayout = errors.New("state layout")

// ReadSet reads a set written by WriteTo (base) and the deltas written
// after it (WriteDelta), in order, as layout asks. open turns the bytes
// of one model (or model delta) into the reader the decoder reads (nil:
// bytes.NewReader), for example one that stops when a context ends.
//
// A base that is one model encoding (Model.WriteTo, the checkpoints of
// before sets) reads as a set of LayoutMember with seed seed. A member
// set read as LayoutPartition becomes the template of every partition's
// model; a partition set cannot be read as LayoutMember (ErrLayout).
// Otherwise the seed is the encoding's. An empty layout reads the
// encoding as it is (a model encoding: LayoutMember).
func ReadSet(base []byte, deltas [][]byte, seed uint64, layout Layout, open func([]byte) io.Reader) (*Set, error) {
	stored, isSet := SetLayoutOf(base)
	if layout == "" {
		layout = stored
	}
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	if open == nil {
		open = func(b []byte) io.Reader { return bytes.NewReader(b) }
	}
	if !isSet {
		m, err := ReadModelDeltas(open(base), readers(deltas, open))
		if err != nil {
			return nil, err
		}
		return NewSetFrom(m, seed, layout)
	}
	b, err := parseSet(base, setBase)
	if err != nil {
		return nil, err
	}
	// A model's bytes: its last whole entry and the deltas after it.
	chains := map[int32][][]byte{}
	for _, e := range b.entries {
		chains[e.key] = [][]byte{e.data}
	}
	for j, d := range deltas {
		p, err := parseSet(d, setDelta)
		if err != nil {
			return nil, fmt.Errorf("delta %d of %d: %w", j+1, len(deltas), err)
		}
		if p.layout != b.layout || p.seed != b.seed {
			return nil, fmt.Errorf("%w: delta %d of %d: layout or seed differs from the base's", ErrCorrupt, j+1, len(deltas))
		}
		listed := make(map[int32][][]byte, len(p.entries))
		for _, e := range p.entries {
			switch {
			case e.kind == entryWhole:
				listed[e.key] = [][]byte{e.data}
			case chains[e.key] == nil:
				return nil, fmt.Errorf("%w: delta %d of %d: a delta of model %d, which the base lacks", ErrCorrupt, j+1, len(deltas), e.key)
			default:
				listed[e.key] = append(chains[e.key], e.data)
			}
		}
		chains = listed // the models it does not list were removed
	}
	s := &Set{seed: b.seed, layout: b.layout, template: b.template, models: map[int32]*Model{}}
	for _, k := range slices.Sorted(maps.Keys(chains)) {
		c := chains[k]
		m, err := ReadModelDeltas(open(c[0]), readers(c[1:], open))
		if err != nil {
			return nil, fmt.Errorf("model %d: %w", k, err)
		}
		s.add(k, m)
	}
	switch { // every model and the template share one configuration
	case len(s.keys) > 0:
		s.cfg = s.models[s.keys[0]].cfg
	case s.template != nil:
		t, err := ReadModel(bytes.NewReader(s.template))
		if err != nil {
			return nil, fmt.Errorf("template: %w", err)
		}
		s.cfg = t.cfg
	default:
		return nil, fmt.Errorf("%w: a model set with neither models nor template", ErrCorrupt)
	}
	if s.layout == layout {
		return s, nil
	}
	if layout == LayoutMember {
		return nil, fmt.Errorf("%w: the state holds a model per partition (%d); it cannot become one model for the member: keep state.layout %q, or start from an empty state directory",
			ErrLayout, len(s.keys), LayoutPartition)
	}
	if m := s.models[0]; m != nil {
		return NewSetFrom(m, s.seed, layout)
	}
	return NewSet(s.cfg, s.seed, layout)
}

// SetLayoutOf returns the layout of a set encoding (WriteTo, WriteDelta)
// and true; LayoutMember and false for anything else (a model encoding
// of before sets).
func SetLayoutOf(b []byte) (Layout, bool) {
	if !bytes.HasPrefix(b, setMagic[:]) || len(b) < len(setMagic)+2 {
		return LayoutMember, false
	}
	if b[len(setMagic)+1] == 'M' {
		return LayoutMember, true
	}
	return LayoutPartition, true
}

func readers(bs [][]byte, open func([]byte) io.Reader) []io.Reader {
	rs := make([]io.Reader, len(bs))
	for i, b := range bs {
		rs[i] = open(b)
	}
	return rs
}

type setEntry struct {
	key  int32
	kind byte
	data []byte
}

type parsedSet struct {
	layout   Layout
	seed     uint64
	template []byte
	entries  []setEntry
}

// parseSet splits a set encoding of kind into its entries, without
// decoding the models.
func parseSet(b []byte, kind byte) (parsedSet, error) {
	var p parsedSet
	bad := func(what string) (parsedSet, error) {
		return parsedSet{}, fmt.Errorf("%w: model set: %s", ErrCorrupt, what)
	}
	if len(b) < len(setMagic)+2+8+4 || !bytes.HasPrefix(b, setMagic[:]) {
		return bad("truncated header")
	}
	b = b[len(setMagic):]
	if b[0] != kind {
		return bad(fmt.Sprintf("kind %q where %q was expected", b[0], kind))
	}
	switch b[1] {
	case 'P':
		p.layout = LayoutPartition
	case 'M':
		p.layout = LayoutMember
	default:
		return bad(fmt.Sprintf("unknown layout %q", b[1]))
	}
	p.seed = binary.LittleEndian.Uint64(b[2:])
	b = b[10:]
	if kind == setBase {
		if len(b) < 8 {
			return bad("truncated template length")
		}
		n := binary.LittleEndian.Uint64(b)
		if b = b[8:]; uint64(len(b)) < n {
			return bad("truncated template")
		}
		if n > 0 {
			p.template = b[:n]
		}
		b = b[n:]
	}
	if len(b) < 4 {
		return bad("truncated entry count")
	}
	count := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(count) > uint64(len(b))/13 {
		return bad("entry count beyond the bytes present")
	}
	p.entries = make([]setEntry, 0, count)
	for range count {
		if len(b) < 13 {
			return bad("truncated entry")
		}
		e := setEntry{key: int32(binary.LittleEndian.Uint32(b)), kind: b[4]}
		n := binary.LittleEndian.Uint64(b[5:])
		if b = b[13:]; uint64(len(b)) < n {
			return bad(fmt.Sprintf("model %d truncated", e.key))
		}
		if e.kind != entryWhole && (e.kind != entryDelta || kind == setBase) {
			return bad(fmt.Sprintf("model %d: entry kind %q", e.key, e.kind))
		}
		if k := len(p.entries); k > 0 && p.entries[k-1].key >= e.key {
			return bad("keys out of order")
		}
		e.data, b = b[:n], b[n:]
		p.entries = append(p.entries, e)
	}
	if len(b) != 0 {
		return bad(fmt.Sprintf("%d trailing bytes", len(b)))
	}
	return p, nil
}
