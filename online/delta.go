package online

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The delta encoding (FORMAT.md, "Delta encoding"): what changed in a
// model since a frozen copy of it was saved. A store keeps a base (the
// model encoding, WriteTo) and the deltas written after it; ReadModelDeltas
// reads the base and applies the deltas in order. The model encoding
// itself does not change: snapshots and WriteTo stay whole.

// DeltaVersion is the newest version of the delta encoding, which
// WriteDelta writes for a model with event types: version 2 with the
// cursors exactly when the model has some and the context's event types
// (TYPE) after CTXT. For a model without event types it writes version 2
// (version 1 with the cursors after the counters) when the model has merge
// cursors (MergeFrom), else version 1, as before either existed
// (deltaVersionFor). A model with the dwell mixture (Config.DwellDirection
// "long") writes version 4: version 3 with TYPE exactly when the model has
// event types and the mixture's DMIX after them (encode.go, version 8);
// version 5 is version 4 with DMIX and DINS as encoding version 9 has
// them, version 6 is version 5 with DGAT after DINS as encoding version 10
// has it, and is written for those models from then on. ReadModelDeltas
// reads all eight; a delta before version 3 had hashed
// event-type buckets, and the model forgets what it read of them
// (encode.go, version 7). Version 7 is version 6 with the clock (CLCK
// after CURS, as encoding version 11 has it), written for models that
// merged events. Version 8 is version 7 with the rank instrument (RINS
// after DGAT, as encoding version 12 has it), written for models with an
// event order. Version 9 is version 8 with the changed users' latest event
// times (i64 per user at the end of USER) and the instrument's gap (DINS
// and RINS as encoding version 13 has them), written exactly for models
// with the dwell mixture. Version 10 is version 9 with the rank
// instrument's gap as encoding version 14 has it (the same layout),
// written exactly for models with the dwell mixture. Version 11 is version
// 10 with the gap instrument (GINS, as encoding version 15 has it),
// written exactly for models with the dwell mixture. Version 12 is version
// 11 with the context posterior's level (LEVL after GINS, as encoding
// version 16 has it), written exactly for models with the dwell mixture;
// a delta of version 11 leaves the level as the base had it. Version 13
// is version 12 with the scale of the counted gaps (CGAP after LEVL, as
// encoding version 17 has it), written exactly for models with the dwell
// mixture; a delta of version 12 leaves the scale as the base had it.
// Version 14 is version 13 with the users' priors (three f64 per changed
// user after the times in USER, and PRIR after CGAP, as encoding version
// 18 has them: userprior.go), written exactly for models with the dwell
// mixture; a delta of version 13 leaves the priors as the base had them.
// Version 15 is version 14 with the gap's reach (GLAM after PRIR) and the
// items' priors (three f64 per changed item after the offsets in ITEM,
// and IPRI after GLAM), as encoding version 19 has them (gapreach.go,
// itemprior.go), written exactly for models with the dwell mixture; a
// delta of version 14 leaves them as the base had them. Version 16 is
// version 15 with the tail (TAIL after IPRI, as encoding version 20 has
// it: tail.go), written exactly for models with the dwell mixture; a
// delta of version 15 leaves the tail as the base had it. Version 17 is
// version 16 with the bursts' mixture (BRST after TAIL, as encoding
// version 21 has it: burst.go), written exactly for models with the dwell
// mixture; a delta of version 16 leaves the mixture as the base had it.
const DeltaVersion = 17

// deltaCursorVersion is the first delta version with merge cursors,
// deltaTypesVersion the first with event types, deltaDwellMixVersion the
// first with the dwell mixture.
const (
	deltaCursorVersion     = 2
	deltaTypesVersion      = 3
	deltaDwellMixVersion   = 4
	deltaInstrumentVersion = 5
	deltaGateVersion       = 6
	deltaClockVersion      = 7
	deltaRankVersion       = 8
	deltaGapVersion        = 9
	deltaShortGapVersion   = 10
	deltaGapInstVersion    = 11
	deltaLevelVersion      = 12
	deltaCountGapVersion   = 13
	deltaPriorVersion      = 14
	deltaGapReachVersion   = 15
	deltaTailVersion       = 16
	deltaBurstVersion      = 17
)

// deltaVersionFor is the delta version of a model with merge cursors or
// not, event types or not, the dwell mixture or not and a clock or not
// (the rank instrument, version 8, comes only with the dwell mixture).
func deltaVersionFor(cursors, types, dwellMix, clock bool) uint32 {
	switch {
	case dwellMix:
		return deltaBurstVersion
	case clock:
		return deltaClockVersion
	case types:
		return deltaTypesVersion
	case cursors:
		return deltaCursorVersion
	}
	return deltaCursorVersion - 1
}

var deltaMagic = [8]byte{'R', 'G', 'B', 'T', 'D', 'L', 'T', 'A'}

// ErrNoDeltaBase is returned by WriteDelta for a model that is not a
// frozen copy marked saved (MarkSaved) since it last became a copy of its
// model: nothing says what the store holds.
var ErrNoDeltaBase = errors.New("no saved state to write a delta against")

// deltaBase is what a frozen copy knows of the state of its model a
// store holds: the copy as it was when MarkSaved was last called.
type deltaBase struct {
	saved           bool   // MarkSaved was called since the copy last became a copy of its model
	sync            uint64 // the copy's synced epoch then: rows stamped since changed after it
	events          uint64 // the model's events then
	users, items    int    // the tables' rows then
	popular, window uint64 // pushes into the popularity ring and the mixture window then
}

// MarkSaved records that m, a frozen copy (FrozenCopy), is as a store now
// holds it: the next WriteDelta, after the next FrozenCopy into m, writes
// what its model changed since. Call it after every save that succeeded,
// whole (WriteTo) or delta; after a failed save do not, and the next delta
// covers the changes of both. On anything but a frozen copy of a model
// that learns it does nothing.
func (m *Model) MarkSaved() {
	if !m.frozen || m.origin == nil {
		return
	}
	m.delta = deltaBase{
		saved: true, sync: m.synced, events: m.schedule.events,
		users: m.users.len(), items: m.items.len(),
		popular: m.popular.pushed, window: m.mixture.pushed,
	}
}

// HasDeltaBase reports whether WriteDelta can write a delta of m: it is a
// frozen copy marked saved.
func (m *Model) HasDeltaBase() bool { return m.frozen && m.delta.saved }

// WriteDelta writes, to w, what changed in m, a frozen copy, since it was
// last marked saved: the user and item rows that changed or are new,
// whole, with every per-row part (embedding, step sum, recent items,
// transition offsets, last sighting, co-occurrence state); the slots of
// the mixture window and the popularity ring pushed since; the admission
// sketch's changed blocks; and every shared part (random source,
// counters, merge cursors, heads, T̂, mixture, context). Applied to the model as it was
// saved (ReadModelDeltas), it gives m, encoding for encoding. It returns
// ErrNoDeltaBase unless HasDeltaBase.
func (m *Model) WriteDelta(w io.Writer) (int64, error) {
	if !m.HasDeltaBase() {
		return 0, ErrNoDeltaBase
	}
	crc, err := m.confCRC()
	if err != nil {
		return 0, err
	}
	e := &encoder{w: bufio.NewWriterSize(w, 1<<16)}
	m.encodeDelta(e, crc)
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return e.n, fmt.Errorf("write model delta: %w", e.err)
	}
	return e.n, nil
}

// DeltaSize is the number of bytes WriteDelta would write now, 0 unless
// HasDeltaBase. It costs a pass over the changed rows' ids, not an
// encoding.
func (m *Model) DeltaSize() int64 {
	if !m.HasDeltaBase() {
		return 0
	}
	e := &encoder{}
	m.encodeDelta(e, 0)
	return e.n
}

// DeltaRows returns the user and item rows the next delta writes.
func (m *Model) DeltaRows() (users, items int) {
	return spanRows(m.changedUsers), spanRows(m.changedItems)
}

func spanRows(spans []rowSpan) (n int) {
	for _, s := range spans {
		n += int(s.hi - s.lo)
	}
	return n
}

// confCRC is the CRC-32C of the configuration as CONF encodes it: a delta
// names the configuration of the model it applies to.
func (m *Model) confCRC() (uint32, error) {
	conf, err := json.Marshal(m.cfg)
	if err != nil {
		return 0, fmt.Errorf("encode config: %w", err)
	}
	return crc32.Checksum(conf, castagnoli), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (m *Model) encodeDelta(e *encoder, confCRC uint32) {
	b := &m.delta
	e.write(deltaMagic[:])
	e.u32(deltaVersionFor(len(m.cursors) > 0, len(m.context.types) > 0, m.context.long, m.hasClock()))
	e.section("HEAD", func(e *encoder) {
		e.u64(b.events)
		e.u64(m.schedule.events)
		e.u32(confCRC)
		e.u32(uint32(b.users))
		e.u32(uint32(b.items))
		e.u32(uint32(m.users.len()))
		e.u32(uint32(m.items.len()))
	})
	source, err := m.src.MarshalBinary()
	if err != nil && e.err == nil {
		e.err = fmt.Errorf("encode random source: %w", err)
	}
	e.section("RAND", func(e *encoder) { e.write(source) })
	e.section("CTRS", m.encodeCounters)
	if len(m.cursors) > 0 {
		e.section("CURS", m.encodeCursors)
	}
	if m.hasClock() {
		e.section("CLCK", m.encodeClock)
	}
	users, items := m.changedUsers, m.changedItems
	e.section("USER", func(e *encoder) {
		encodeSpans(e, users)
		m.users.encodeRows(e, users)
		eachSpan(users, 1, func(lo, hi int) { e.uint32s(m.users.pushed[lo:hi]) })
		eachSpan(users, recentItems, func(lo, hi int) { e.int32s(m.users.recent[lo:hi]) })
		if m.transition.perUser {
			eachSpan(users, m.k*m.k, func(lo, hi int) { e.floats(m.transition.userOffsets[lo:hi]) })
		}
		if m.users.times != nil {
			eachSpan(users, 1, func(lo, hi int) { e.int64s(m.users.times[lo:hi]) })
		}
		if m.users.prior != nil {
			eachSpan(users, userPriorWidth, func(lo, hi int) { e.floats(m.users.prior[lo:hi]) })
		}
	})
	e.section("ITEM", func(e *encoder) {
		encodeSpans(e, items)
		m.items.encodeRows(e, items)
		eachSpan(items, m.k*m.k, func(lo, hi int) { e.floats(m.transition.offsets[lo:hi]) })
		if m.itemPriors != nil {
			eachSpan(items, userPriorWidth, func(lo, hi int) { e.floats(m.itemPriors[lo:hi]) })
		}
	})
	m.encodeNets(e)
	e.section("WIND", func(e *encoder) {
		x := &m.mixture
		size := len(x.window) / 2
		n := int(min(x.pushed-b.window, uint64(size)))
		e.u32(uint32(n))
		eachRingRange(x.next, n, size, func(lo, hi int) { e.floats(x.window[2*lo : 2*hi]) })
	})
	e.section("COOC", func(e *encoder) { e.u8(m.cooc.kind()); m.cooc.encodeRows(e, users, items) })
	m.encodeContext(e)
	if r := &m.popular; r.items != nil {
		e.section("POPR", func(e *encoder) {
			n := int(min(r.pushed-b.popular, popRingSize))
			e.u32(uint32(n))
			eachRingRange(int(r.pushed%popRingSize), n, popRingSize, func(lo, hi int) { e.int32s(r.items[lo:hi]) })
		})
	}
	if m.cfg.bounded() {
		e.section("BNDS", func(e *encoder) {
			bd := &m.bounds
			for _, v := range [...]uint64{bd.clock, bd.usersEvicted, bd.itemsEvicted, bd.coldUsers, bd.coldItems} {
				e.u64(v)
			}
			if a := m.admission; a != nil {
				e.u64(a.added)
				encodeSpans(e, m.changedBlocks)
				eachSpan(m.changedBlocks, admitBlock, func(lo, hi int) { e.write(a.cells[lo:hi]) })
			}
		})
	}
	e.section("END.", func(*encoder) {})
}

// eachSpan calls f with the value range [lo, hi) of each span's rows of
// w values.
func eachSpan(spans []rowSpan, w int, f func(lo, hi int)) {
	for _, s := range spans {
		f(int(s.lo)*w, int(s.hi)*w)
	}
}

// eachRingRange calls f with the slot ranges [lo, hi), oldest first, of
// the n slots (n <= size) of a ring of size slots that precede slot next.
func eachRingRange(next, n, size int, f func(lo, hi int)) {
	start := next - n
	if start < 0 {
		f(start+size, size)
		start = 0
	}
	if start < next {
		f(start, next)
	}
}

func encodeSpans(e *encoder, spans []rowSpan) {
	e.u32(uint32(len(spans)))
	for _, s := range spans {
		e.u32(uint32(s.lo))
		e.u32(uint32(s.hi))
	}
}

// decodeSpans reads what encodeSpans writes: spans in ascending order,
// apart, within [0, n), that cover [from, n) (the new rows).
func (d *decoder) spans(n, from int) []rowSpan {
	count := int(d.u32())
	if !d.fits(count, 8) {
		return nil
	}
	spans := make([]rowSpan, 0, d.capFor(count, 8))
	prev, covered := -1, 0
	for range count {
		lo, hi := int(d.u32()), int(d.u32())
		if d.err != nil {
			return nil
		}
		if lo <= prev || hi <= lo || hi > n {
			d.fail("row span [%d, %d) out of order or range", lo, hi)
			return nil
		}
		covered += max(hi, from) - max(lo, from)
		prev = hi
		spans = append(spans, rowSpan{int32(lo), int32(hi)})
	}
	if covered != n-from {
		d.fail("the delta lacks new rows")
		return nil
	}
	return spans
}

// encodeRows writes the listed rows: ids, vectors, step sums and, in a
// capped table, last sightings.
func (t *table) encodeRows(e *encoder, spans []rowSpan) {
	for _, s := range spans {
		for _, id := range t.ids[s.lo:s.hi] {
			e.id(id)
		}
	}
	eachSpan(spans, t.dim, func(lo, hi int) { e.floats(t.vectors[lo:hi]) })
	eachSpan(spans, 1, func(lo, hi int) { e.floats(t.stepSums[lo:hi]) })
	if t.capacity > 0 {
		eachSpan(spans, 1, func(lo, hi int) { e.uint64s(t.lru.lastSeen[lo:hi]) })
	}
}

// decodeRows reads what encodeRows writes into the listed rows.
func (t *table) decodeRows(d *decoder, spans []rowSpan) {
	for _, s := range spans {
		for r := s.lo; r < s.hi && d.err == nil; r++ {
			t.ids[r] = d.id()
		}
	}
	eachSpan(spans, t.dim, func(lo, hi int) { d.floatsInto(t.vectors[lo:hi]) })
	eachSpan(spans, 1, func(lo, hi int) { d.floatsInto(t.stepSums[lo:hi]) })
	if t.capacity > 0 {
		eachSpan(spans, 1, func(lo, hi int) { d.uint64sInto(t.lru.lastSeen[lo:hi]) })
	}
}

func (c *sketchCooc) encodeRows(e *encoder, users, items []rowSpan) {
	eachSpan(users, 1, func(lo, hi int) { e.uint32s(c.userN[lo:hi]) })
	eachSpan(users, c.h/4, func(lo, hi int) { e.uint64s(c.userSig[lo:hi]) })
	eachSpan(items, 1, func(lo, hi int) { e.uint32s(c.itemN[lo:hi]) })
	eachSpan(items, c.s, func(lo, hi int) { e.int32s(c.itemRes[lo:hi]) })
}

func (c *sketchCooc) decodeRows(d *decoder, users, items []rowSpan, nu, _ int) {
	eachSpan(users, 1, func(lo, hi int) { d.uint32sInto(c.userN[lo:hi]) })
	eachSpan(users, c.h/4, func(lo, hi int) { d.uint64sInto(c.userSig[lo:hi]) })
	eachSpan(items, 1, func(lo, hi int) { d.uint32sInto(c.itemN[lo:hi]) })
	eachSpan(items, c.s, func(lo, hi int) {
		res := c.itemRes[lo:hi]
		d.int32sInto(res)
		for _, v := range res {
			if d.err == nil && (v < -1 || int(v) >= nu) {
				d.fail("user index %d in sketch", v)
			}
		}
	})
}

func (c *exactCooc) encodeRows(e *encoder, users, items []rowSpan) {
	for _, sets := range [...]struct {
		rows  [][]int32
		spans []rowSpan
	}{{c.userItems, users}, {c.itemUsers, items}} {
		for _, s := range sets.spans {
			for _, set := range sets.rows[s.lo:s.hi] {
				e.u32(uint32(len(set)))
				e.int32s(set)
			}
		}
	}
}

func (c *exactCooc) decodeRows(d *decoder, users, items []rowSpan, nu, ni int) {
	for _, s := range users {
		for u := s.lo; u < s.hi && d.err == nil; u++ {
			c.userItems[u] = d.int32s(int(d.u32()))
			checkIndices(d, c.userItems[u], ni)
		}
	}
	for _, s := range items {
		for i := s.lo; i < s.hi && d.err == nil; i++ {
			c.itemUsers[i] = d.int32s(int(d.u32()))
			checkIndices(d, c.itemUsers[i], nu)
		}
	}
}

// ReadModelDeltas reads a model encoding (WriteTo) from base and applies
// the deltas (WriteDelta) in order: the model as it was when the last
// delta was written, which encodes to the same bytes and continues
// exactly as that model would. Every delta must have been written against
// the state the ones before it leave (same configuration, events and
// table sizes), or the result is an error wrapping ErrCorrupt. If base is
// a Lener, its tables are allocated once (ReadModel).
func ReadModelDeltas(base io.Reader, deltas []io.Reader) (*Model, error) {
	m, err := ReadModel(base)
	if err != nil || len(deltas) == 0 {
		return m, err
	}
	crc, err := m.confCRC()
	if err != nil {
		return nil, err
	}
	for j, r := range deltas {
		if err := m.applyDelta(r, crc); err != nil {
			return nil, fmt.Errorf("delta %d of %d: %w", j+1, len(deltas), err)
		}
	}
	if err := m.finishDeltas(); err != nil {
		return nil, fmt.Errorf("after %d deltas: %w", len(deltas), err)
	}
	return m, nil
}

// applyDelta applies one delta to m, whose configuration has CRC-32C
// confCRC. The id indices and recency lists are left to finishDeltas.
func (m *Model) applyDelta(r io.Reader, confCRC uint32) error {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<16), left: 12, avail: -1}
	if l, ok := r.(Lener); ok {
		d.avail = int64(l.Len())
	}
	var magic [8]byte
	d.read(magic[:])
	if d.err == nil && magic != deltaMagic {
		return fmt.Errorf("%w: bad delta magic", ErrCorrupt)
	}
	version := d.u32()
	if d.err == nil && (version < 1 || version > DeltaVersion) {
		return fmt.Errorf("%w: delta version %d, this build reads 1 to %d", ErrCorrupt, version, DeltaVersion)
	}
	d.section("HEAD")
	from, to, crc := d.u64(), d.u64(), d.u32()
	fromUsers, fromItems, nu, ni := int(d.u32()), int(d.u32()), int(d.u32()), int(d.u32())
	switch {
	case d.err != nil:
		return d.err
	case crc != confCRC:
		return fmt.Errorf("%w: delta of a model of another configuration", ErrCorrupt)
	case from != m.schedule.events || fromUsers != m.users.len() || fromItems != m.items.len():
		return fmt.Errorf("%w: delta from %d events, %d users, %d items applied to a model of %d, %d, %d",
			ErrCorrupt, from, fromUsers, fromItems, m.schedule.events, m.users.len(), m.items.len())
	case nu < fromUsers || ni < fromItems || nu > maxRows || ni > maxRows:
		return fmt.Errorf("%w: delta shrinks or overgrows the tables (%d users, %d items)", ErrCorrupt, nu, ni)
	case d.avail >= 0 && uint64(nu-fromUsers+ni-fromItems)*uint64(8*m.d) > uint64(d.avail):
		return fmt.Errorf("%w: delta declares more new rows than it holds", ErrCorrupt)
	}
	m.growTo(nu, ni)
	d.section("RAND")
	d.randomSource(m.src)
	d.section("CTRS")
	m.decodeCounters(d)
	if d.err == nil && m.schedule.events != to {
		d.fail("delta to %d events holds counters of %d", to, m.schedule.events)
	}
	// The cursors are written whole: a version-1 delta is one of a model
	// without any.
	if version == deltaCursorVersion || (version >= deltaTypesVersion && d.has("CURS")) {
		d.section("CURS")
		m.decodeCursors(d)
	} else {
		m.cursors = m.cursors[:0]
	}
	if version >= deltaClockVersion && d.has("CLCK") {
		d.section("CLCK")
		m.decodeClock(d)
	}
	d.section("USER")
	users := d.spans(nu, fromUsers)
	m.users.decodeRows(d, users)
	eachSpan(users, 1, func(lo, hi int) { d.uint32sInto(m.users.pushed[lo:hi]) })
	eachSpan(users, recentItems, func(lo, hi int) { d.int32sInto(m.users.recent[lo:hi]) })
	if m.transition.perUser {
		eachSpan(users, m.k*m.k, func(lo, hi int) { d.floatsInto(m.transition.userOffsets[lo:hi]) })
	}
	if m.users.times != nil && version >= deltaGapVersion {
		eachSpan(users, 1, func(lo, hi int) { d.int64sInto(m.users.times[lo:hi]) })
	}
	if m.users.prior != nil && version >= deltaPriorVersion {
		eachSpan(users, userPriorWidth, func(lo, hi int) {
			d.floatsInto(m.users.prior[lo:hi])
			checkPrior(d, m.users.prior[lo:hi], "user")
		})
	}
	d.section("ITEM")
	items := d.spans(ni, fromItems)
	m.items.decodeRows(d, items)
	eachSpan(items, m.k*m.k, func(lo, hi int) { d.floatsInto(m.transition.offsets[lo:hi]) })
	if m.itemPriors != nil && version >= deltaGapReachVersion {
		eachSpan(items, userPriorWidth, func(lo, hi int) {
			d.floatsInto(m.itemPriors[lo:hi])
			checkPrior(d, m.itemPriors[lo:hi], "item")
		})
	}
	m.decodeNets(d)
	d.section("WIND")
	x := &m.mixture
	size := len(x.window) / 2
	if n := int(d.u32()); d.err == nil && n > size {
		d.fail("%d window slots of %d", n, size)
	} else if d.err == nil {
		eachRingRange(x.next, n, size, func(lo, hi int) { d.floatsInto(x.window[2*lo : 2*hi]) })
	}
	d.section("COOC")
	if kind := d.u8(); d.err == nil && kind != m.cooc.kind() {
		d.fail("co-occurrence kind %d does not match the config", kind)
	}
	m.cooc.decodeRows(d, users, items, nu, ni)
	d.section("CTXT")
	m.context.decode(d)
	m.decodeContextAfter(d, version, deltaContext)
	if p := &m.popular; p.items != nil {
		d.section("POPR")
		if n := int(d.u32()); d.err == nil && n > popRingSize {
			d.fail("%d popularity slots of %d", n, popRingSize)
		} else if d.err == nil {
			eachRingRange(int(p.pushed%popRingSize), n, popRingSize, func(lo, hi int) {
				d.int32sInto(p.items[lo:hi])
				for _, v := range p.items[lo:hi] {
					if d.err == nil && (v < 0 || int(v) >= ni) {
						d.fail("item index %d in popularity ring", v)
					}
				}
			})
		}
	}
	if m.cfg.bounded() {
		d.section("BNDS")
		b := &m.bounds
		b.clock, b.usersEvicted, b.itemsEvicted, b.coldUsers, b.coldItems = d.u64(), d.u64(), d.u64(), d.u64(), d.u64()
		if a := m.admission; a != nil {
			a.added = d.u64()
			if d.err == nil && a.added >= uint64(a.width) {
				d.fail("admission sketch counted %d sightings of %d before halving", a.added, a.width)
			}
			blocks := d.spans(len(a.cells)/admitBlock, len(a.cells)/admitBlock)
			eachSpan(blocks, admitBlock, func(lo, hi int) { d.read(a.cells[lo:hi]) })
		}
	}
	d.end()
	return d.err
}

// growTo gives the tables nu user and ni item rows, the new ones empty:
// a delta fills them.
func (m *Model) growTo(nu, ni int) {
	for m.users.len() < nu {
		m.users.appendEmpty()
		m.users.growRing()
		m.transition.addUser()
	}
	for m.items.len() < ni {
		m.items.appendEmpty()
		m.transition.addItem()
		m.growItemPriors()
	}
	m.cooc.grow(nu, ni)
}

// appendEmpty appends a zero row without an id.
func (t *table) appendEmpty() {
	t.ids = append(t.ids, "")
	for range t.dim {
		t.vectors = append(t.vectors, 0)
	}
	t.stepSums = append(t.stepSums, 0)
	t.stamps = append(t.stamps, 0)
	if t.capacity > 0 {
		t.lru.grow()
	}
}

// finishDeltas checks the model the deltas left and rebuilds what the
// encoding does not hold: the id indices and the recency lists.
func (m *Model) finishDeltas() error {
	d := &decoder{}
	m.users.checkRecent(d, m.items.len())
	m.checkRows(d)
	if d.err != nil {
		return d.err
	}
	if !m.users.buildIndex() || !m.items.buildIndex() {
		return fmt.Errorf("%w: duplicate ids", ErrCorrupt)
	}
	for _, t := range [...]*table{&m.users.table, &m.items} {
		if t.capacity > 0 {
			t.lru.rebuild(t.base)
		}
	}
	return nil
}
