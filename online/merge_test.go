package online

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// mergeStream is a small stream over 40 users and 30 items.
func mergeStream(n int, seed uint64) []Event {
	r := rand.New(rand.NewPCG(seed, seed+7))
	evs := make([]Event, n)
	for j := range evs {
		u := r.IntN(40)
		evs[j] = Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", (u%3)*10+r.IntN(10)),
			DwellMS: int64(r.IntN(60000)), HasDwell: true}
	}
	return evs
}

func mergeConfig() Config {
	return Config{Dim: 8, WarmUp: 100, RefitEvery: 50, GMMMinSamples: 32, GMMWindow: 128}
}

// cloneModel is m encoded and read back: the same parameters and random
// source state.
func cloneModel(t *testing.T, m *Model) *Model {
	t.Helper()
	var b bytes.Buffer
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	c, err := ReadModel(&b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func stepAll(t *testing.T, m *Model, evs []Event) {
	t.Helper()
	var sc Score
	for j, ev := range evs {
		if err := m.Step(ev, &sc); err != nil {
			t.Fatalf("event %d: %v", j, err)
		}
	}
}

// sharedValues is every shared value of m by item id.
func sharedValues(m *Model) map[string][]float64 {
	items := map[string][]float64{}
	for r := m.items.base; r < int32(m.items.len()); r++ {
		items[m.items.ids[r]] = m.appendItem(nil, r)
	}
	return items
}

// localValues is what m does not share: user rows and the networks.
func localValues(m *Model) []float64 {
	v := append([]float64(nil), m.users.vectors...)
	for _, p := range [][]float64{m.classifier.weights, m.classifier.bias, m.noisyHead.weights, m.noisyHead.bias,
		m.transition.weights, m.transition.bias} {
		v = append(v, p...)
	}
	return v
}

func allClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for k := range got {
		if math.Abs(got[k]-want[k]) > tol*(1+math.Abs(want[k])) {
			t.Fatalf("%s[%d] = %v, want %v", what, k, got[k], want[k])
		}
	}
}

// A model that merges the delta of one that stepped, starting from the
// same parameters and taking no step of its own, ends with the stepper's
// shared parameters; its own are untouched.
func TestMergeCarriesTheSteps(t *testing.T) {
	a, err := New(mergeConfig(), NewSource(3))
	if err != nil {
		t.Fatal(err)
	}
	stepAll(t, a, mergeStream(500, 1)) // every item has a row
	b := cloneModel(t, a)
	a.StartSharing()
	b.StartSharing()
	stepAll(t, a, mergeStream(2000, 2))

	var d Shared
	if err := a.Publish(&d); err != nil {
		t.Fatal(err)
	}
	if len(d.Items) == 0 {
		t.Fatal("published no item: the steps changed some")
	}
	localBefore := localValues(b)
	if err := b.Merge(&d); err != nil {
		t.Fatal(err)
	}
	ai, bi := sharedValues(a), sharedValues(b)
	if len(ai) != len(bi) {
		t.Fatalf("%d item rows against %d", len(bi), len(ai))
	}
	for id, v := range ai {
		allClose(t, "item "+id, bi[id], v, 1e-12)
	}
	if !slices.Equal(localValues(b), localBefore) {
		t.Fatal("merging moved user rows or the networks")
	}
	// What was merged is not published again; nothing was stepped.
	var again Shared
	if err := b.Publish(&again); err != nil {
		t.Fatal(err)
	}
	if len(again.Items) != 0 {
		t.Fatalf("republished %d merged items", len(again.Items))
	}
}

// Two models that step on their own events and exchange deltas hold the
// same shared parameters: θ₀ + Δa + Δb (the sum rule).
func TestMergeSumRule(t *testing.T) {
	a, err := New(mergeConfig(), NewSource(5))
	if err != nil {
		t.Fatal(err)
	}
	stepAll(t, a, mergeStream(500, 1))
	b := cloneModel(t, a)
	a.StartSharing()
	b.StartSharing()
	ref0 := sharedValues(a)
	evs := mergeStream(3000, 9)
	for round := range 3 {
		part := evs[round*1000 : (round+1)*1000]
		var ea, eb []Event
		for _, ev := range part {
			if ev.User < "u2" { // the users whose id sorts first go to a
				ea = append(ea, ev)
			} else {
				eb = append(eb, ev)
			}
		}
		stepAll(t, a, ea)
		stepAll(t, b, eb)
		var da, db Shared
		if err := a.Publish(&da); err != nil {
			t.Fatal(err)
		}
		if err := b.Publish(&db); err != nil {
			t.Fatal(err)
		}
		// Each delta is its own model's change since the last merge.
		if err := a.Merge(&db); err != nil {
			t.Fatal(err)
		}
		if err := b.Merge(&da); err != nil {
			t.Fatal(err)
		}
		ai, bi := sharedValues(a), sharedValues(b)
		for id, v := range ai {
			allClose(t, fmt.Sprint("round ", round, " item ", id), bi[id], v, 1e-9)
		}
	}
	// And the replicas moved: the sum is not θ₀.
	moved := 0
	for id, v := range sharedValues(a) {
		if !slices.Equal(v, ref0[id]) {
			moved++
		}
	}
	if moved < 20 {
		t.Fatalf("%d items moved", moved)
	}
}

// An item the merging model has no row for gets one; with a capped table
// it takes the least recently seen item's row, whose unpublished steps go
// with it.
func TestMergeNewItemsAndEviction(t *testing.T) {
	cfg := mergeConfig()
	a, err := New(cfg, NewSource(1))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxItems = 12
	b, err := New(cfg, NewSource(2))
	if err != nil {
		t.Fatal(err)
	}
	a.StartSharing()
	b.StartSharing()
	stepAll(t, a, mergeStream(800, 3))
	stepAll(t, b, mergeStream(800, 4))
	var d Shared
	if err := a.Publish(&d); err != nil {
		t.Fatal(err)
	}
	if err := b.Merge(&d); err != nil {
		t.Fatal(err)
	}
	if got := b.items.resident(); got != 12 {
		t.Fatalf("b holds %d items, want its cap 12", got)
	}
	// Every row b holds is published by the next Publish only if b
	// stepped it after the merge; a merged row is not.
	var again Shared
	if err := b.Publish(&again); err != nil {
		t.Fatal(err)
	}
	if len(again.Items) != 0 {
		t.Fatalf("b republished %v", again.Items)
	}
	stepAll(t, b, mergeStream(50, 5))
	if err := b.Publish(&again); err != nil {
		t.Fatal(err)
	}
	for n, id := range again.Items {
		r, ok := b.items.index[id]
		if !ok {
			t.Fatalf("published item %s has no row", id)
		}
		if r < b.items.base {
			t.Fatal("published the cold row")
		}
		_ = n
	}
}

// A delta that would make a parameter non-finite or a step sum negative
// is refused whole; a delta of another shape too.
func TestMergeRefusesBadDeltas(t *testing.T) {
	a, d := publishedModel(t)
	b := cloneModel(t, a)
	b.StartSharing()
	before := sharedValues(b)
	stride := d.ItemStride()
	for name, spoil := range map[string]func(s *Shared){
		"NaN in a row":       func(s *Shared) { s.Rows[len(s.Rows)-1] = math.NaN() },
		"Inf in a row":       func(s *Shared) { s.Rows[2] = math.Inf(-1) },
		"negative step sum":  func(s *Shared) { s.Rows[len(s.Rows)-stride+s.Dim] = -1e9 },
		"another dimension":  func(s *Shared) { s.Dim++ },
		"rows for fewer ids": func(s *Shared) { s.Items = s.Items[1:] },
		"another K":          func(s *Shared) { s.K = 3 },
	} {
		bad := Shared{K: d.K, Dim: d.Dim, Items: append([]string(nil), d.Items...),
			Rows: append([]float64(nil), d.Rows...)}
		spoil(&bad)
		err := b.Merge(&bad)
		if err == nil {
			t.Fatalf("%s: merged", name)
		}
		if name == "NaN in a row" && !errors.Is(err, ErrNumerical) {
			t.Fatalf("%s: %v, want ErrNumerical", name, err)
		}
		after := sharedValues(b)
		if len(after) != len(before) {
			t.Fatalf("%s: the refused delta changed the model", name)
		}
		for id, v := range before {
			if !slices.Equal(after[id], v) {
				t.Fatalf("%s: the refused delta changed item %s", name, id)
			}
		}
	}
	if err := newUnshared().Merge(&d); err == nil {
		t.Fatal("a model that does not share merged")
	}
}

// publishedModel is a sharing model that stepped 300 events, and what it
// published of them.
func publishedModel(t *testing.T) (*Model, Shared) {
	t.Helper()
	a, err := New(mergeConfig(), NewSource(1))
	if err != nil {
		t.Fatal(err)
	}
	a.StartSharing()
	stepAll(t, a, mergeStream(300, 1))
	var d Shared
	if err := a.Publish(&d); err != nil {
		t.Fatal(err)
	}
	return a, d
}

// newUnshared is a model without StartSharing.
func newUnshared() *Model {
	m, _ := New(mergeConfig(), NewSource(1))
	return m
}

func TestSharedEncoding(t *testing.T) {
	_, d := publishedModel(t)
	b, err := d.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Shared
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if got.K != d.K || got.Dim != d.Dim || fmt.Sprint(got.Items) != fmt.Sprint(d.Items) ||
		!slices.Equal(got.Rows, d.Rows) {
		t.Fatal("round trip changed the delta")
	}
	for _, cut := range []int{0, 3, 10, len(b) / 2, len(b) - 1} {
		if err := new(Shared).UnmarshalBinary(b[:cut]); err == nil {
			t.Fatalf("%d of %d bytes decoded", cut, len(b))
		}
	}
	if err := new(Shared).UnmarshalBinary(append(b, 0)); err == nil {
		t.Fatal("a trailing byte decoded")
	}
	bad := append([]byte(nil), b...)
	bad[4] = 9 // version
	if err := new(Shared).UnmarshalBinary(bad); err == nil {
		t.Fatal("version 9 decoded")
	}
}

// TestNewPartition: partition 0's model is the single model; every other
// partition's starts from the same networks and draws the rest from its
// own source.
func TestNewPartition(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	one, err := New(cfg, NewSource(5))
	if err != nil {
		t.Fatal(err)
	}
	zero, err := NewPartition(cfg, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	ev := Event{User: "u", Item: "i"}
	var sc Score
	if err := zero.Step(ev, &sc); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		m, err := NewPartition(cfg, 5, p)
		if err != nil {
			t.Fatal(err)
		}
		if p == 0 && !bytes.Equal(encode(t, m), encode(t, one)) {
			t.Fatal("partition 0's model is not the single model")
		}
		if !slices.Equal(m.classifier.weights, one.classifier.weights) || !slices.Equal(m.noisyHead.weights, one.noisyHead.weights) {
			t.Fatalf("partition %d's networks are not partition 0's", p)
		}
		if p == 0 {
			continue
		}
		// The rest is drawn from the partition's source, untouched by the
		// networks' draws, and the first event's rows from it differ from
		// partition 0's.
		got, _ := m.src.MarshalBinary()
		fresh, _ := NewPartitionSource(5, p).MarshalBinary()
		if !bytes.Equal(got, fresh) {
			t.Fatalf("partition %d's source was drawn from making it", p)
		}
		if err := m.Step(ev, &sc); err != nil {
			t.Fatal(err)
		}
		if slices.Equal(m.users.row(m.users.index["u"]), zero.users.row(zero.users.index["u"])) {
			t.Fatalf("partition %d drew partition 0's user row", p)
		}
	}
	if _, err := NewPartition(Config{Dim: -1}, 5, 1); err == nil {
		t.Fatal("a bad configuration made a partition model")
	}
}

// Partition 0's source is the single model's; the others differ.
func TestNewPartitionSource(t *testing.T) {
	draw := func(src *rand.PCG) uint64 { return src.Uint64() }
	if draw(NewPartitionSource(5, 0)) != draw(NewSource(5)) {
		t.Fatal("partition 0 is not the single model's source")
	}
	seen := map[uint64]bool{}
	for p := range int32(4) {
		v := draw(NewPartitionSource(5, p))
		if seen[v] {
			t.Fatalf("partition %d draws what another drew", p)
		}
		seen[v] = true
	}
}
