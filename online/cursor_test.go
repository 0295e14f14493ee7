package online

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
)

// cursorModel is a sharing model of mergeConfig (source seed) after 300
// events of mergeStream(300, seed), and a partner of the same
// configuration whose publications it can merge: the partner's first
// delta.
func cursorModel(t *testing.T, seed uint64) (m, partner *Model, d Shared) {
	t.Helper()
	partner, d = publishedModel(t)
	m, err := New(mergeConfig(), NewSource(seed))
	if err != nil {
		t.Fatal(err)
	}
	m.StartSharing()
	stepAll(t, m, mergeStream(300, seed))
	return m, partner, d
}

// TestMergeFromCursors: MergeFrom merges as Merge does and records the
// cursor; an unknown partition is -1; the same seq twice merges twice and
// keeps the cursor; a refused delta leaves the cursor (and the rows) as
// they were; MergedFrom is a sorted copy; a known partition's cursor is
// set without allocating.
func TestMergeFromCursors(t *testing.T) {
	m, _, d := cursorModel(t, 2)
	if m.Merged(2) != -1 || m.MergedFrom() != nil {
		t.Fatalf("a fresh model: Merged(2) %d, MergedFrom %v", m.Merged(2), m.MergedFrom())
	}
	before := sharedValues(m)
	if err := m.MergeFrom(2, 100, &d); err != nil {
		t.Fatal(err)
	}
	once := sharedValues(m)
	id := d.Items[0]
	if m.Merged(2) != 100 || slices.Equal(once[id], before[id]) {
		t.Fatalf("after MergeFrom(2, 100): Merged %d, item %s moved: %v", m.Merged(2), id, !slices.Equal(once[id], before[id]))
	}
	empty := Shared{K: d.K, Dim: d.Dim}
	if err := m.MergeFrom(0, 7, &empty); err != nil {
		t.Fatal(err)
	}
	// Another chunk of the same publication: merged, the cursor stays.
	if err := m.MergeFrom(2, 100, &d); err != nil {
		t.Fatal(err)
	}
	twice := sharedValues(m)
	if m.Merged(2) != 100 || slices.Equal(twice[id], once[id]) {
		t.Fatalf("the same seq again: Merged %d, merged again: %v", m.Merged(2), !slices.Equal(twice[id], once[id]))
	}
	want := []Cursor{{0, 7}, {2, 100}}
	got := m.MergedFrom()
	if !slices.Equal(got, want) {
		t.Fatalf("MergedFrom %v, want %v", got, want)
	}
	got[0].Seq = 99
	if m.Merged(0) != 7 {
		t.Fatal("MergedFrom's slice is the model's")
	}

	bad := Shared{K: d.K, Dim: d.Dim, Items: slices.Clone(d.Items), Rows: slices.Clone(d.Rows)}
	bad.Rows[len(bad.Rows)-1] = math.NaN()
	for _, q := range []int32{2, 5} {
		if err := m.MergeFrom(q, 200, &bad); !errors.Is(err, ErrNumerical) {
			t.Fatalf("a NaN delta of partition %d: %v, want ErrNumerical", q, err)
		}
	}
	for name, call := range map[string]func() error{
		"negative partition": func() error { return m.MergeFrom(-1, 300, &d) },
		"negative seq":       func() error { return m.MergeFrom(3, -1, &d) },
		"another shape":      func() error { return m.MergeFrom(3, 300, &Shared{K: d.K, Dim: d.Dim + 1}) },
	} {
		if err := call(); err == nil {
			t.Fatalf("%s: merged", name)
		}
	}
	if !slices.Equal(m.MergedFrom(), want) {
		t.Fatalf("after refused deltas: %v, want %v", m.MergedFrom(), want)
	}
	after := sharedValues(m)
	for id, v := range twice {
		if !slices.Equal(after[id], v) {
			t.Fatalf("a refused delta changed item %s", id)
		}
	}
	u := newUnshared()
	if err := u.MergeFrom(1, 1, &d); err == nil || u.Merged(1) != -1 {
		t.Fatalf("a model that does not share: %v, Merged %d", err, u.Merged(1))
	}

	seq := int64(100)
	if n := testing.AllocsPerRun(100, func() { seq++; m.setCursor(2, seq) }); n != 0 {
		t.Fatalf("setting a known partition's cursor allocates %v times", n)
	}
}

// TestCursorEncoding: a model that never called MergeFrom encodes as
// before cursors (version 4, 5 with per-user offsets; Merge alone adds
// none); one with cursors encodes as version 6, with or without per-user
// offsets, reads back with its cursors and encodes to the same bytes. A
// frozen copy carries the cursors and keeps them when its model moves on.
func TestCursorEncoding(t *testing.T) {
	for _, perUser := range []bool{false, true} {
		cfg := mergeConfig()
		cfg.TransitionUserOffset = perUser
		m, err := New(cfg, NewSource(4))
		if err != nil {
			t.Fatal(err)
		}
		m.StartSharing()
		stepAll(t, m, mergeStream(300, 4))
		a := cloneModel(t, m)
		a.StartSharing()
		stepAll(t, a, mergeStream(300, 5))
		var d Shared
		if err := a.Publish(&d); err != nil {
			t.Fatal(err)
		}
		d.Events = 0 // no clock: TestClockEncoding has it
		if err := m.Merge(&d); err != nil {
			t.Fatal(err)
		}
		plain := encodingFor(perUser, false, false, false, false)
		if v := binary.LittleEndian.Uint32(encode(t, m)[8:]); v != plain || m.Encoding() != plain {
			t.Fatalf("user offsets %v, no cursor: version %d (Encoding %d), want %d", perUser, v, m.Encoding(), plain)
		}
		if err := m.MergeFrom(3, 41, &d); err != nil {
			t.Fatal(err)
		}
		if err := m.MergeFrom(1, 9, &Shared{K: d.K, Dim: d.Dim}); err != nil {
			t.Fatal(err)
		}
		want := []Cursor{{1, 9}, {3, 41}}
		b := encode(t, m)
		if v := binary.LittleEndian.Uint32(b[8:]); v != cursorVersion || m.Encoding() != cursorVersion {
			t.Fatalf("user offsets %v, cursors: version %d (Encoding %d), want %d", perUser, v, m.Encoding(), cursorVersion)
		}
		back := cloneModel(t, m)
		if !slices.Equal(back.MergedFrom(), want) || !bytes.Equal(encode(t, back), b) {
			t.Fatalf("user offsets %v: read back with cursors %v, want %v; same bytes: %v",
				perUser, back.MergedFrom(), want, bytes.Equal(encode(t, back), b))
		}
		// Labelled as the version without cursors, the CURS section is
		// where USER belongs.
		binary.LittleEndian.PutUint32(b[8:], plain)
		if _, err := ReadModel(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("version 6 relabelled %d: %v, want ErrCorrupt", plain, err)
		}

		cp := m.FrozenCopy(nil)
		if !slices.Equal(cp.MergedFrom(), want) || !bytes.Equal(encode(t, cp), encode(t, m)) {
			t.Fatalf("frozen copy: cursors %v, want %v", cp.MergedFrom(), want)
		}
		if err := m.MergeFrom(1, 10, &Shared{K: d.K, Dim: d.Dim}); err != nil {
			t.Fatal(err)
		}
		if cp.Merged(1) != 9 {
			t.Fatalf("the copy's cursor followed its model: %d", cp.Merged(1))
		}
		if cp = m.FrozenCopy(cp); cp.Merged(1) != 10 {
			t.Fatalf("a refreshed copy: cursor %d, want 10", cp.Merged(1))
		}
	}
}

// cursorSection returns the offset of the count of the CURS section in
// an encoding (model or delta).
func cursorSection(t *testing.T, b []byte) int {
	t.Helper()
	j := bytes.Index(b, []byte("CURS"))
	if j < 0 {
		t.Fatal("no CURS section")
	}
	return j + 12
}

// TestCursorsCorrupt: a cursor section that is empty, unsorted, repeats a
// partition or holds a negative value is refused with ErrCorrupt, in a
// model encoding and in a delta.
func TestCursorsCorrupt(t *testing.T) {
	m, _, d := cursorModel(t, 2)
	cp := m.FrozenCopy(nil)
	base := encode(t, cp)
	cp.MarkSaved()
	for _, c := range []Cursor{{2, 5}, {4, 8}} {
		if err := m.MergeFrom(c.Partition, c.Seq, &d); err != nil {
			t.Fatal(err)
		}
	}
	cp = m.FrozenCopy(cp)
	model, delta := encode(t, cp), writeDelta(t, cp)
	// Each cursor is 12 bytes after the count: partition u32, seq u64.
	spoil := map[string]func(b []byte, at int){
		"unsorted":           func(b []byte, at int) { binary.LittleEndian.PutUint32(b[at+4:], 5) },
		"repeated":           func(b []byte, at int) { binary.LittleEndian.PutUint32(b[at+4+12:], 2) },
		"negative partition": func(b []byte, at int) { binary.LittleEndian.PutUint32(b[at+4:], math.MaxUint32) },
		"negative seq":       func(b []byte, at int) { binary.LittleEndian.PutUint64(b[at+4+12+4:], math.MaxUint64) },
		"count 0":            func(b []byte, at int) { binary.LittleEndian.PutUint32(b[at:], 0) },
		"count over section": func(b []byte, at int) { binary.LittleEndian.PutUint32(b[at:], 3) },
	}
	for name, f := range spoil {
		b := slices.Clone(model)
		f(b, cursorSection(t, b))
		if _, err := ReadModel(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("model, %s: %v, want ErrCorrupt", name, err)
		}
		b = slices.Clone(delta)
		f(b, cursorSection(t, b))
		c := deltaChain{base: base, deltas: [][]byte{b}}
		if _, err := ReadModelDeltas(bytes.NewReader(c.base), readersOf(c.deltas)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("delta, %s: %v, want ErrCorrupt", name, err)
		}
	}
	// Unspoilt, both read.
	if got := cloneModel(t, cp); !slices.Equal(got.MergedFrom(), []Cursor{{2, 5}, {4, 8}}) {
		t.Fatalf("model read back with %v", got.MergedFrom())
	}
	c := deltaChain{base: base, deltas: [][]byte{delta}}
	if got := c.restore(t); !slices.Equal(got.MergedFrom(), []Cursor{{2, 5}, {4, 8}}) {
		t.Fatalf("delta read back with %v", got.MergedFrom())
	}
}

func readersOf(bs [][]byte) []io.Reader {
	rs := make([]io.Reader, len(bs))
	for j, b := range bs {
		rs[j] = bytes.NewReader(b)
	}
	return rs
}

// TestCursorDeltaChain: a base without cursors, a delta before any
// MergeFrom (delta version 1, as before cursors), then deltas after
// MergeFrom (version 2; 7 once a merged delta counted events, with the
// clock) read back, through ReadModelDeltas, as the model
// that wrote the last one, with its newest cursors; the model's
// restored copy goes on merging from them.
func TestCursorDeltaChain(t *testing.T) {
	m, partner, d := cursorModel(t, 3)
	cp := m.FrozenCopy(nil)
	c := deltaChain{base: encode(t, cp)}
	cp.MarkSaved()
	if v := binary.LittleEndian.Uint32(c.base[8:]); v != 4 {
		t.Fatalf("base of a model without cursors: version %d", v)
	}
	save := func(wantVersion uint32) {
		t.Helper()
		stepAll(t, m, mergeStream(100, uint64(10+len(c.deltas))))
		cp = m.FrozenCopy(cp)
		b := writeDelta(t, cp)
		if v := binary.LittleEndian.Uint32(b[8:]); v != wantVersion {
			t.Fatalf("delta %d: version %d, want %d", len(c.deltas)+1, v, wantVersion)
		}
		c.deltas = append(c.deltas, b)
		cp.MarkSaved()
	}
	save(1)
	d.Events = 0 // cursors alone: version 2
	if err := m.MergeFrom(1, 50, &d); err != nil {
		t.Fatal(err)
	}
	save(deltaCursorVersion)
	stepAll(t, partner, mergeStream(200, 7))
	if err := partner.Publish(&d); err != nil {
		t.Fatal(err)
	}
	if err := m.MergeFrom(1, 80, &d); err != nil {
		t.Fatal(err)
	}
	if err := m.MergeFrom(0, 12, &Shared{K: d.K, Dim: d.Dim}); err != nil {
		t.Fatal(err)
	}
	save(deltaClockVersion) // the partner's second delta counted its events
	got := c.restore(t)
	want := []Cursor{{0, 12}, {1, 80}}
	if !slices.Equal(got.MergedFrom(), want) || !bytes.Equal(encode(t, got), encode(t, cp)) {
		t.Fatalf("restored cursors %v, want %v; same bytes as the copy: %v",
			got.MergedFrom(), want, bytes.Equal(encode(t, got), encode(t, cp)))
	}
	// Only the first two deltas: the cursors of then.
	c.deltas = c.deltas[:2]
	if got := c.restore(t); !slices.Equal(got.MergedFrom(), []Cursor{{1, 50}}) {
		t.Fatalf("base + 2 deltas: cursors %v, want [{1 50}]", got.MergedFrom())
	}
}

// TestSetCursors: the cursors of a set's partition models survive a set
// checkpoint chain (a base without cursors, deltas after MergeFrom) read
// back with ReadSet.
func TestSetCursors(t *testing.T) {
	_, evs, ps, s, cp, base := savedSet(t, 5, 9)
	var deltas [][]byte
	for j, chunk := range [][]int{span(1000, 2000), span(2000, 3000)} {
		stepSet(t, s, evs, ps, chunk)
		for _, k := range s.Keys() {
			m := s.Model(k)
			m.StartSharing()
			d := Shared{K: m.k, Dim: m.d} // a delta that changes no row
			if err := m.MergeFrom((k+1)%3, int64(1000*(j+1))+int64(k), &d); err != nil {
				t.Fatal(err)
			}
		}
		cp = s.FrozenCopy(cp)
		var b bytes.Buffer
		if _, err := cp.WriteDelta(&b); err != nil {
			t.Fatal(err)
		}
		deltas = append(deltas, b.Bytes())
		cp.MarkSaved()
	}
	got, err := ReadSet(base, deltas, 0, LayoutPartition, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Keys(), []int32{0, 1, 2}) {
		t.Fatalf("keys %v", got.Keys())
	}
	for _, k := range got.Keys() {
		want := []Cursor{{(k + 1) % 3, 2000 + int64(k)}}
		if c := got.Model(k).MergedFrom(); !slices.Equal(c, want) {
			t.Fatalf("model %d: cursors %v, want %v", k, c, want)
		}
	}
	if !bytes.Equal(setBytes(t, got), setBytes(t, s)) {
		t.Fatal("base + deltas do not read back to the set")
	}
}
