package online

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEventTypeSlots: each new type takes the next slot, in the order the
// types first appear; a known type keeps its slot; once namedTypes are
// named, every later type shares the last slot. The five types of a shop
// (which FNV-1a mod 16 put into three buckets) get five.
func TestEventTypeSlots(t *testing.T) {
	var c contextModel
	shop := []string{"view", "click", "cart", "purchase", "return"}
	for j, kind := range shop {
		if got := c.features(&Event{Kind: kind}, ModeBinary).bucket; got != j {
			t.Fatalf("%q: slot %d, want %d", kind, got, j)
		}
	}
	if got := c.features(&Event{Kind: "click"}, ModeBinary).bucket; got != 1 {
		t.Fatalf("click again: slot %d, want 1", got)
	}
	for j := len(shop); j < namedTypes+5; j++ {
		want := min(j, namedTypes)
		if got := c.features(&Event{Kind: fmt.Sprint("type", j)}, ModeBinary).bucket; got != want {
			t.Fatalf("type %d: slot %d, want %d", j, got, want)
		}
	}
	if len(c.types) != namedTypes {
		t.Fatalf("%d named types, want %d", len(c.types), namedTypes)
	}
	if got := c.features(&Event{}, ModeBinary).bucket; got != -1 {
		t.Fatalf("no event type: slot %d, want -1", got)
	}
}

// TestEventTypesLearned: genuine events are clicks and carts, noisy ones
// clicks and returns, with no dwell and a weak prior. The weight learns
// that a cart is genuine and a return noise, which the hashed buckets
// (click, cart and return in one) could not tell apart.
func TestEventTypesLearned(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	var c contextModel
	for range 30000 {
		g := r.Float64() >= 0.2
		kind, p := "click", 0.75
		if !g {
			p = 0.65
		}
		if r.IntN(2) == 0 {
			kind = map[bool]string{true: "cart", false: "return"}[g]
		}
		x := c.features(&Event{Kind: kind}, ModeBinary)
		c.learn(x, c.weight(p, x), p, pathAnchored)
	}
	cart := c.evidence(c.features(&Event{Kind: "cart"}, ModeBinary))
	ret := c.evidence(c.features(&Event{Kind: "return"}, ModeBinary))
	click := c.evidence(c.features(&Event{Kind: "click"}, ModeBinary))
	if !(cart > 1 && ret < -1 && cart > click && click > ret) {
		t.Fatalf("evidence: cart %.3f, click %.3f, return %.3f; want cart > 1 > click > -1 > return", cart, click, ret)
	}
}

// typedStream is mergeStream with event types.
func typedStream(n int, seed uint64) []Event {
	evs := mergeStream(n, seed)
	kinds := []string{"view", "click", "cart"}
	for j := range evs {
		evs[j].Kind = kinds[j%len(kinds)]
	}
	return evs
}

// TestEventTypesEncoding: a model that has seen event types writes
// version 7 with their names (and CURS only with cursors), reads back to
// the same bytes, and a delta chain of it (delta version 3) restores it.
// A model encoded without names (as before version 7, when the buckets
// were hashes) is read with its event-type statistics forgotten.
func TestEventTypesEncoding(t *testing.T) {
	m, err := New(mergeConfig(), NewSource(5))
	if err != nil {
		t.Fatal(err)
	}
	stepAll(t, m, mergeStream(200, 1))
	cp := m.FrozenCopy(nil)
	c := deltaChain{base: encode(t, cp)}
	cp.MarkSaved()
	if v := binary.LittleEndian.Uint32(c.base[8:]); v != 4 {
		t.Fatalf("no event types yet: version %d, want 4", v)
	}
	stepAll(t, m, typedStream(300, 2))
	b := encode(t, m)
	if v := binary.LittleEndian.Uint32(b[8:]); v != typesVersion || !bytes.Contains(b, []byte("TYPE")) || bytes.Contains(b, []byte("CURS")) {
		t.Fatalf("with event types: version %d, want %d, a TYPE section and no CURS", v, typesVersion)
	}
	back := cloneModel(t, m)
	if !slices.Equal(back.context.types, []string{"view", "click", "cart"}) || !bytes.Equal(encode(t, back), b) {
		t.Fatalf("read back: types %q; same bytes %v", back.context.types, bytes.Equal(encode(t, back), b))
	}
	cp = m.FrozenCopy(cp)
	d := writeDelta(t, cp)
	if v := binary.LittleEndian.Uint32(d[8:]); v != deltaTypesVersion {
		t.Fatalf("delta with event types: version %d, want %d", v, deltaTypesVersion)
	}
	c.deltas = append(c.deltas, d)
	cp.MarkSaved()
	// With cursors too.
	m.StartSharing()
	if err := m.MergeFrom(2, 7, &Shared{K: m.k, Dim: m.d}); err != nil {
		t.Fatal(err)
	}
	stepAll(t, m, typedStream(100, 3))
	cp = m.FrozenCopy(cp)
	c.deltas = append(c.deltas, writeDelta(t, cp))
	if got := c.restore(t); !bytes.Equal(encode(t, got), encode(t, m)) || got.Merged(2) != 7 {
		t.Fatalf("restored from its deltas: same bytes %v, cursor %d", bytes.Equal(encode(t, got), encode(t, m)), got.Merged(2))
	}
	if back := cloneModel(t, m); !bytes.Equal(encode(t, back), encode(t, m)) {
		t.Fatal("version 7 with cursors does not read back to the same bytes")
	}

	// An older build's model: event-type statistics in hashed buckets, no
	// names.
	old := cloneModel(t, m)
	old.context.types = nil
	old.cursors = nil
	ob := encode(t, old)
	if v := binary.LittleEndian.Uint32(ob[8:]); v != 4 {
		t.Fatalf("no names: version %d, want 4", v)
	}
	got, err := ReadModel(bytes.NewReader(ob))
	if err != nil {
		t.Fatal(err)
	}
	if got.context.em.typeTotal != [2]float64{} || got.context.anchor.typeMass != [2][typeBuckets]float64{} || got.context.em.dwellMass != m.context.em.dwellMass {
		t.Fatalf("read from version 4: type totals %v (want none), dwell mass %v (want %v)", got.context.em.typeTotal, got.context.em.dwellMass, m.context.em.dwellMass)
	}
}

// TestEventTypesCorrupt: a TYPE section with a repeated or empty name, or
// a version 7 encoding without it, is refused with ErrCorrupt.
func TestEventTypesCorrupt(t *testing.T) {
	m, err := New(mergeConfig(), NewSource(5))
	if err != nil {
		t.Fatal(err)
	}
	stepAll(t, m, typedStream(300, 2)) // types view, click, cart
	b := encode(t, m)
	j := bytes.Index(b, []byte("TYPE"))
	if j < 0 {
		t.Fatal("no TYPE section")
	}
	for name, patch := range map[string]func(b []byte){
		"repeated": func(b []byte) { copy(b[j+bytes.Index(b[j:], []byte("cart")):], "view") },
		"empty":    func(b []byte) { binary.LittleEndian.PutUint32(b[j+12+4:], 0) },
		"none":     func(b []byte) { binary.LittleEndian.PutUint32(b[j+12:], 0) },
		"missing":  func(b []byte) { copy(b[j:], "XXXX") },
	} {
		c := bytes.Clone(b)
		patch(c)
		if _, err := ReadModel(bytes.NewReader(c)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
