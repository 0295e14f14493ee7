package online

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Merging the shared parameters of partition models (docs/design/partitions.md).
//
// A stream keyed by user is split into partitions, and each partition has
// a Model of its own: its users' rows are its alone, but every partition
// learns the item rows (with their step sums and T̂ offsets). Sharing
// makes the partition models learn those together: each model publishes
// what its own steps changed in its item rows since its last publication
// (Publish, a Shared delta), and applies the deltas of the others (Merge).
//
// The merge rule is the sum: θ ← θ + Δ_q for every other partition q.
// Every replica then holds θ₀ + Σ_j Δ_j, the item rows of one model
// stepped on every partition's events, each step taken against rows at
// most one merge interval old: asynchronous SGD with bounded staleness, as
// a parameter server applies every worker's update. Why it is stable:
//   - an item row's step sum G is summed too, so a row's adaptive step
//     (rate/√(1+G)) shrinks with its traffic on every partition: a popular
//     item moves by the steps one model would take, never P times more;
//   - an item row is stepped only by its item's events and by the events
//     that sample it as a negative; between two merges a replica drifts
//     from the common rows by one interval of its own partition's steps
//     (bounded staleness; Ho et al., "More Effective Distributed ML via a
//     Stale Synchronous Parallel Parameter Server", NIPS 2013, bound SGD's
//     regret under it).
//
// The dense networks (the heads, T̂'s weights) are not shared. Every event
// steps them at a fixed rate, so the sum of P partitions' stale steps is a
// step P times too long: with the sum rule for them too, the v2 stream's
// ROC-AUC of weight fell from 0.78 to 0.55 (docs/design/partitions.md).
// They start equal, though (NewPartition): the item rows a head reads
// are summed over partitions, and heads drawn apart would step them in
// directions of their own. Each partition fits them on its own events,
// as it fits what else stays
// local: user rows (with their T̂ offsets, Config.TransitionUserOffset: a
// user is in one partition only) and rings, co-occurrence, the popularity ring, the
// admission sketch, the mixture, the schedule and the counters. The
// context's statistics are sums too, and are merged by their own rule
// (mergecontext.go); the schedule follows a clock that counts the merged
// events (clock.go).
//
// Determinism: Publish and Merge change the model only through its item
// rows (and, for an item the model has no row for, a new row drawn from
// its random source), its context's statistics and its clock, so a
// partition model's scores depend on its own events and on the deltas it
// merged, at the points it merged them.
//
// Encoded: which deltas a model merged. MergeFrom records, per source
// partition, the seq of the last delta of it merged (a cursor); the
// cursors are model state, written by WriteTo (encoding version 6) and
// WriteDelta (delta version 2), copied by FrozenCopy and read back by
// ReadModel, ReadModelDeltas and ReadSet, so that a model restored after
// a rebalance or a crash knows where to resume each partition's deltas:
// none merged twice, none missed. A model that never called MergeFrom
// encodes as it did before cursors existed (FORMAT.md).
//
// Not encoded: what a model last published lives in memory only. A model
// read back from its encoding starts sharing afresh (StartSharing), so
// the steps it took after its last publication and before its encoding
// are never published.

// Shared is the change of a model's shared parameters between two
// publications. Its fields are read-only to callers.
type Shared struct {
	// K and Dim are the classes and the embedding dimension of the model
	// that published it; Merge refuses another shape.
	K, Dim int
	// Items are the ids of the item rows that changed; Rows their deltas,
	// ItemStride = Dim + 1 + K·K values each: the vector, the step sum and
	// the T̂ offsets.
	Items []string
	Rows  []float64
	// Context is what the publisher's own events added to its context's
	// statistics since its last publication (mergecontext.go), empty for
	// a model without the context part; Types names the publisher's
	// event-type slots, in its order.
	Context []float64
	Types   []string
	// Events is the events the publisher learned since its last
	// publication; the merger adds them to its clock (clock.go).
	Events uint64
}

// ItemStride is the values of one item row in Shared.Rows.
func (s *Shared) ItemStride() int { return s.Dim + 1 + s.K*s.K }

// sharing is a model's record of what it last published: the value of
// every item row at its last publication (or, for a row added since, at
// its creation), and the rows stepped since.
type sharing struct {
	events uint64    // the model's events at its last publication
	rows   []float64 // per item row: stride values as last published
	// dirty lists the item rows stepped since the last publication; a
	// row may stand in it twice or no longer be dirty (reset since):
	// isDirty is the truth, dirty where to look.
	dirty   []int32
	isDirty []bool // per item row
}

// StartSharing makes m track what Publish needs. It is idempotent; a model
// that never shares pays nothing.
func (m *Model) StartSharing() {
	if m.share != nil {
		return
	}
	m.share = &sharing{events: m.schedule.events}
	if m.useContext() {
		m.context.startSharing()
	}
	for r := range int32(m.items.len()) {
		m.shareRowAdded(r)
	}
}

// itemStride is the shared values of one item row.
func (m *Model) itemStride() int { return m.d + 1 + m.k*m.k }

// appendItem appends item row r's shared values to dst.
func (m *Model) appendItem(dst []float64, r int32) []float64 {
	dst = append(dst, m.items.row(r)...)
	dst = append(dst, m.items.stepSums[r])
	return append(dst, m.transition.itemOffsets(r)...)
}

// shareRowAdded records item row r as published at its current value: a
// new row (or one reset for a new id) starts with nothing to publish.
func (m *Model) shareRowAdded(r int32) {
	s := m.share
	if s == nil {
		return
	}
	stride := m.itemStride()
	if need := int(r+1) * stride; len(s.rows) < need {
		s.rows = append(s.rows, make([]float64, need-len(s.rows))...)
		s.isDirty = append(s.isDirty, make([]bool, int(r+1)-len(s.isDirty))...)
	}
	m.appendItem(s.rows[int(r)*stride:int(r)*stride], r)
	// A row reused for a new id: its old id's unpublished steps are
	// dropped with the id, as the row is (Publish skips it in dirty).
	s.isDirty[r] = false
}

// shareStepped records that a step changed item row r.
func (m *Model) shareStepped(r int32) {
	if s := m.share; s != nil && !s.isDirty[r] {
		s.isDirty[r] = true
		s.dirty = append(s.dirty, r)
	}
}

// Publish fills dst with what m's own steps changed in its item rows
// since its last Publish (since StartSharing for the first), and takes
// that as published. dst's slices are reused. It is an error to Publish
// without StartSharing.
func (m *Model) Publish(dst *Shared) error {
	s := m.share
	if s == nil {
		return errors.New("publish: the model does not share (StartSharing)")
	}
	if m.frozen {
		return errors.New("publish: a frozen copy does not learn")
	}
	stride := m.itemStride()
	dst.K, dst.Dim = m.k, m.d
	dst.Items, dst.Rows = dst.Items[:0], dst.Rows[:0]
	for _, r := range s.dirty {
		if !s.isDirty[r] {
			continue // reset for a new id, or listed twice
		}
		s.isDirty[r] = false
		base := s.rows[int(r)*stride : int(r+1)*stride]
		n := len(dst.Rows)
		dst.Rows = m.appendItem(dst.Rows, r)
		for k := range base {
			cur := dst.Rows[n+k]
			dst.Rows[n+k] = cur - base[k]
			base[k] = cur
		}
		dst.Items = append(dst.Items, m.items.ids[r])
	}
	s.dirty = s.dirty[:0]
	dst.Events, s.events = m.schedule.events-s.events, m.schedule.events
	dst.Context, dst.Types = dst.Context[:0], dst.Types[:0]
	if m.context.acc != nil {
		dst.Context = m.context.publish(dst.Context)
		if len(dst.Context) > 0 {
			dst.Types = append(dst.Types, m.context.types...)
		}
	}
	return nil
}

// Merge adds another partition model's Shared to m's item rows
// (the sum rule above) and to what m takes as published, so that m does
// not publish it again. An item m has no row for gets one (drawn from m's
// random source, as a first sighting would, but without a sighting: the
// admission sketch does not count it); the cold row takes no delta. A
// delta that would leave a value non-finite, or a step sum negative,
// is refused whole, before anything changes.
func (m *Model) Merge(s *Shared) error {
	if m.share == nil {
		return errors.New("merge: the model does not share (StartSharing)")
	}
	if m.frozen {
		return errors.New("merge: a frozen copy does not learn")
	}
	if s.K != m.k || s.Dim != m.d {
		return fmt.Errorf("merge: a delta of K=%d, dim=%d into a model of K=%d, dim=%d", s.K, s.Dim, m.k, m.d)
	}
	stride := m.itemStride()
	if len(s.Rows) != len(s.Items)*stride {
		return fmt.Errorf("merge: %d item rows with %d values, want %d", len(s.Items), len(s.Rows), len(s.Items)*stride)
	}
	if err := m.checkMerge(s); err != nil {
		return err
	}
	for n, id := range s.Items {
		if id == "" {
			continue // the cold row
		}
		r, ok := m.items.index[id]
		if !ok {
			r = m.addItemRow(id)
		}
		delta := s.Rows[n*stride : (n+1)*stride]
		base := m.share.rows[int(r)*stride : int(r+1)*stride]
		d := m.d
		addTo(m.items.row(r), delta[:d])
		m.items.stepSums[r] += delta[d]
		addTo(m.transition.itemOffsets(r), delta[d+1:])
		addTo(base, delta)
		m.items.stamps[r] = m.epoch
	}
	if len(s.Context) > 0 && m.useContext() {
		m.context.merge(s.Context, s.Types)
	}
	m.schedule.merged += s.Events
	return nil
}

// Cursor is where a model stands in one partition's deltas: Seq is the
// seq of the last delta of Partition it merged (MergeFrom).
type Cursor struct {
	Partition int32
	Seq       int64
}

// MergeFrom merges s (Merge's rule and checks), published by partition q,
// whose publication is identified by seq (the next input offset of q when
// it published; increasing along q's publications), and records seq as
// q's cursor. A refused delta (Merge's errors) leaves the cursor
// unchanged.
//
// The cursor becomes seq whatever it was: the caller decides what to
// merge and calls MergeFrom with increasing seqs per partition. Several
// chunks of one publication may be merged with the same seq, each a
// MergeFrom. q and seq must be non-negative (-1 is Merged's "none"). Once
// q has a cursor, recording another allocates nothing.
func (m *Model) MergeFrom(q int32, seq int64, s *Shared) error {
	if q < 0 || seq < 0 {
		return fmt.Errorf("merge: partition %d, seq %d: both must be non-negative", q, seq)
	}
	if err := m.Merge(s); err != nil {
		return err
	}
	m.setCursor(q, seq)
	return nil
}

// setCursor sets q's cursor to seq, inserting it in order if q has none.
func (m *Model) setCursor(q int32, seq int64) {
	j, ok := m.cursorIndex(q)
	if !ok {
		m.cursors = slices.Insert(m.cursors, j, Cursor{Partition: q})
	}
	m.cursors[j].Seq = seq
}

// cursorIndex is the index of q's cursor, or where it belongs and false.
func (m *Model) cursorIndex(q int32) (int, bool) {
	return slices.BinarySearchFunc(m.cursors, q, func(c Cursor, q int32) int { return cmp.Compare(c.Partition, q) })
}

// Merged returns the seq of the last delta of partition q that m merged
// (MergeFrom), -1 if none.
func (m *Model) Merged(q int32) int64 {
	if j, ok := m.cursorIndex(q); ok {
		return m.cursors[j].Seq
	}
	return -1
}

// MergedFrom returns every cursor, sorted by partition (a copy; nil if
// m merged nothing with MergeFrom). For logs, metrics and tests.
func (m *Model) MergedFrom() []Cursor { return slices.Clone(m.cursors) }

// encodeCursors writes the cursors (FORMAT.md, CURS): count u32, then per
// cursor partition u32 and seq u64.
func (m *Model) encodeCursors(e *encoder) {
	e.u32(uint32(len(m.cursors)))
	for _, c := range m.cursors {
		e.u32(uint32(c.Partition))
		e.u64(uint64(c.Seq))
	}
}

// decodeCursors reads what encodeCursors writes into m's cursors (their
// slice reused): at least one cursor (a model without any writes no
// section), partitions strictly ascending, partitions and seqs
// non-negative.
func (m *Model) decodeCursors(d *decoder) {
	m.cursors = m.cursors[:0]
	n := int(d.u32())
	if d.err == nil && n == 0 {
		d.fail("a cursor section without cursors")
	}
	if !d.fits(n, 12) {
		return
	}
	for range n {
		c := Cursor{Partition: int32(d.u32()), Seq: int64(d.u64())}
		if d.err != nil {
			return
		}
		if c.Partition < 0 || c.Seq < 0 || (len(m.cursors) > 0 && c.Partition <= m.cursors[len(m.cursors)-1].Partition) {
			d.fail("cursor (partition %d, seq %d) negative, out of order or repeated", c.Partition, c.Seq)
			return
		}
		m.cursors = append(m.cursors, c)
	}
}

// checkMerge reports whether adding s keeps every value finite and every
// step sum non-negative.
func (m *Model) checkMerge(s *Shared) error {
	stride, d := m.itemStride(), m.d
	cur := make([]float64, 0, stride)
	for n, id := range s.Items {
		delta := s.Rows[n*stride : (n+1)*stride]
		if r, ok := m.items.index[id]; ok {
			cur = m.appendItem(cur[:0], r)
		} else {
			cur = cur[:stride]
			clear(cur) // a new row: its step sum starts at 0
		}
		for k, v := range delta {
			x := cur[k] + v
			if math.IsNaN(x) || math.IsInf(x, 0) || (k == d && x < 0) {
				return fmt.Errorf("merge: %w: item %q would get %v", ErrNumerical, id, x)
			}
		}
	}
	if len(s.Context) > 0 || len(s.Types) > 0 {
		if err := checkContextDelta(s.Context, s.Types); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
	}
	if s.Events > maxSharedEvents || m.schedule.merged+s.Events > maxSharedEvents {
		return fmt.Errorf("merge: a delta of %d events onto %d merged", s.Events, m.schedule.merged)
	}
	return nil
}

func addTo(dst, v []float64) {
	for k := range v {
		dst[k] += v[k]
	}
}

// sharedMagic opens an encoded Shared.
const sharedMagic = "DNSH"

// sharedVersion is the version of the Shared encoding: 2 adds the
// context (Shared.Context and Types) and the publisher's events
// (Shared.Events); version 1 has none of them. 3 (stop 44) appends the
// rank and gap instruments' moments to Context; the layout is 2's, and a
// version-2 Context, without them, still merges (checkContextDelta).
const sharedVersion = 3

// MarshalBinary encodes s: the magic "DNSH", the version (u32), K and Dim
// (u32 each), the ids, the count of row values (u64) and the values, then
// the event types (as ids), the count of context values (u64), the
// values and the events (u64), as the model's encoding writes ids and
// floats (online/FORMAT.md).
func (s *Shared) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// AppendBinary appends MarshalBinary's encoding of s to b, growing b once
// to the encoding's size. A publication of a sparse catalogue holds a few
// thousand rows, about 1 MB: encoded through the model encoding's
// buffered writer it took 10–12 times as long as a copy of its bytes,
// written straight into b 1.5–2 times (docs/perf.md, "What sharing costs
// end to end, and the shared deltas' codec").
func (s *Shared) AppendBinary(b []byte) ([]byte, error) {
	size := len(sharedMagic) + 3*4 + idsBytes(s.Items) + 8 + 8*len(s.Rows) + idsBytes(s.Types) + 8 + 8*len(s.Context) + 8
	b = slices.Grow(b, size)
	le := binary.LittleEndian
	b = append(b, sharedMagic...)
	b = le.AppendUint32(b, sharedVersion)
	b = le.AppendUint32(b, uint32(s.K))
	b = le.AppendUint32(b, uint32(s.Dim))
	b = appendIDs(b, s.Items)
	b = appendFloats(b, s.Rows)
	b = appendIDs(b, s.Types)
	b = appendFloats(b, s.Context)
	return le.AppendUint64(b, s.Events), nil
}

// idsBytes is what appendIDs appends for ids.
func idsBytes(ids []string) int {
	n := 4
	for _, id := range ids {
		n += 4 + len(id)
	}
	return n
}

// appendIDs appends ids as encoder.ids writes them: the count (u32), then
// each id's length (u32) and bytes.
func appendIDs(b []byte, ids []string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(id)))
		b = append(b, id...)
	}
	return b
}

// appendFloats appends the count of v (u64) and its values as
// encoder.floats writes them.
func appendFloats(b []byte, v []float64) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// UnmarshalBinary decodes what MarshalBinary encodes; it checks the shape
// but not the values (Merge does), except that every value must be
// finite, as the model encoding's are.
func (s *Shared) UnmarshalBinary(data []byte) error {
	d := sharedReader{b: data}
	if len(data) >= len(sharedMagic) && string(data[:len(sharedMagic)]) != sharedMagic {
		return fmt.Errorf("shared delta: not one (magic %q)", data[:len(sharedMagic)])
	}
	d.next(len(sharedMagic))
	v := d.u32()
	if d.err == nil && (v < 1 || v > sharedVersion) {
		return fmt.Errorf("shared delta: version %d, this build reads 1 to %d", v, sharedVersion)
	}
	k, dim := int(d.u32()), int(d.u32())
	if d.err == nil && (k < 2 || k > 32 || dim < 1 || dim > 1024) { // Config.Validate's bounds
		return fmt.Errorf("shared delta: K=%d, dim=%d out of range", k, dim)
	}
	items := d.ids()
	rows := d.floats()
	if d.err == nil && len(rows) != len(items)*(dim+1+k*k) {
		d.fail("%d rows values for %d items", len(rows), len(items))
	}
	var types []string
	var context []float64
	var events uint64
	if v >= 2 {
		types = d.ids()
		context = d.floats()
		events = d.u64()
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the end", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("shared delta: %w", d.err)
	}
	*s = Shared{K: k, Dim: dim, Items: items, Rows: rows, Context: context, Types: types, Events: events}
	return nil
}

// sharedReader reads a Shared's encoding from memory, with the model
// decoder's checks (decoder: a count that the bytes left cannot hold, an
// id over maxIDBytes, a value that is not finite, data cut short) and
// one allocation per id and per slice of values.
type sharedReader struct {
	b   []byte // what is left
	err error
}

func (d *sharedReader) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
}

// next consumes n bytes and returns them, nil once it fails.
func (d *sharedReader) next(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *sharedReader) u32() uint32 {
	if v := d.next(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *sharedReader) u64() uint64 {
	if v := d.next(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// count reads a declared count of elements of size bytes each, and fails
// if the bytes left cannot hold them.
func (d *sharedReader) count(n uint64, size int) int {
	if d.err == nil && n > uint64(len(d.b)/size) {
		d.fail("declared count %d exceeds the section", n)
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}

func (d *sharedReader) ids() []string {
	n := d.count(uint64(d.u32()), 4)
	if d.err != nil {
		return nil
	}
	v := make([]string, n)
	for i := range v {
		l := d.u32()
		if d.err == nil && l > maxIDBytes {
			d.fail("id of %d bytes, over %d", l, maxIDBytes)
		}
		v[i] = string(d.next(d.count(uint64(l), 1)))
		if d.err != nil {
			return nil
		}
	}
	return v
}

func (d *sharedReader) floats() []float64 {
	n := d.count(d.u64(), 8)
	b := d.next(8 * n)
	if d.err != nil {
		return nil
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	if !finite(v) {
		d.fail("non-finite parameter")
		return nil
	}
	return v
}
