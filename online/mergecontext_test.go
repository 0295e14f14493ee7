package online

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sharedRoundTrip is d encoded and decoded, as a delta travels through
// the shared topic.
func sharedRoundTrip(t *testing.T, d *Shared) Shared {
	t.Helper()
	data, err := d.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Shared
	if err := got.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	return got
}

// kindStream is mergeStream with event types, kinds[j%len(kinds)] for
// the j-th event, and dwell long (genuine-like) or short by turns of a
// seeded coin.
func kindStream(n int, seed uint64, kinds ...string) []Event {
	r := rand.New(rand.NewPCG(seed, seed+11))
	evs := mergeStream(n, seed)
	for j := range evs {
		evs[j].Kind = kinds[j%len(kinds)]
		evs[j].DwellMS = int64(math.Exp(9 + r.NormFloat64()))
		if r.Float64() < 0.2 {
			evs[j].DwellMS = int64(math.Exp(6 + r.NormFloat64()))
		}
	}
	return evs
}

func contextMergeConfig() Config {
	cfg := mergeConfig()
	cfg.DwellDirection = DwellLong
	return cfg
}

// typed is the statistics of each named event type, by name, and of the
// shared last slot: the type masses of both classes and the gate's sums.
func typed(c *contextModel) map[string][]float64 {
	out := map[string][]float64{}
	add := func(name string, b int) {
		v := []float64{}
		for _, s := range []*contextStats{&c.em, &c.anchor} {
			v = append(v, s.typeMass[0][b], s.typeMass[1][b])
		}
		for _, p := range c.gate.slots[b].fields() {
			v = append(v, *p)
		}
		out[name] = v
	}
	for b, name := range c.types {
		add(name, b)
	}
	add("(the rest)", namedTypes)
	return out
}

// untyped is every statistic but the per-slot ones (typed).
func untyped(c *contextModel) []float64 {
	v := []float64{}
	for _, s := range []*contextStats{&c.em, &c.anchor} {
		v = append(v, s.dwellMass[:]...)
		v = append(v, s.dwellSum[:]...)
		v = append(v, s.dwellSquares[:]...)
		v = append(v, s.typeTotal[:]...)
	}
	for _, p := range c.mix.fields() {
		v = append(v, *p)
	}
	for _, p := range c.inst.fields() {
		v = append(v, *p)
	}
	return v
}

// A model that shares from its first event publishes its context's
// statistics whole (the accumulator takes every step the statistics take,
// with their decay), so an empty model that merges them holds the same,
// bit for bit, with the event types matched by name: the merger had
// numbered them in another order.
func TestMergeContextCarriesTheStatistics(t *testing.T) {
	a, err := New(contextMergeConfig(), NewSource(3))
	if err != nil {
		t.Fatal(err)
	}
	a.StartSharing()
	stepAll(t, a, kindStream(3000, 1, "view", "click", "cart"))
	if !a.context.mix.ready() || a.context.inst.mass < contextMinMass {
		t.Fatal("the stream did not teach the context: nothing to compare")
	}
	var d Shared
	if err := a.Publish(&d); err != nil {
		t.Fatal(err)
	}
	if len(d.Context) != contextDeltaLen || !slices.Equal(d.Types, []string{"view", "click", "cart"}) {
		t.Fatalf("published %d context values and types %q", len(d.Context), d.Types)
	}
	b, err := New(contextMergeConfig(), NewSource(4))
	if err != nil {
		t.Fatal(err)
	}
	b.StartSharing()
	b.context.typeSlot("cart") // b numbers its types otherwise
	b.context.typeSlot("purchase")
	got := sharedRoundTrip(t, &d)
	if err := b.Merge(&got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(untyped(&b.context), untyped(&a.context)) {
		t.Fatalf("merged statistics differ:\n%v\nwant\n%v", untyped(&b.context), untyped(&a.context))
	}
	at, bt := typed(&a.context), typed(&b.context)
	for name, v := range at {
		if !slices.Equal(bt[name], v) {
			t.Fatalf("type %s: %v, want %v", name, bt[name], v)
		}
	}
	if !slices.Equal(b.context.types, []string{"cart", "purchase", "view", "click"}) {
		t.Fatalf("types %q", b.context.types)
	}
	// Published means taken: the next delta holds only what came after.
	if err := a.Publish(&d); err != nil {
		t.Fatal(err)
	}
	if len(d.Context) != 0 {
		t.Fatalf("republished %d context values with no event since", len(d.Context))
	}
}

// Three partition models that merge their context every 300 events of the
// stream hold statistics over the window one model holds: the merge
// decays what a model has by the merged events, so the dwell mixture's
// mass settles at the window (contextWindow) as one model's does, not at
// three times it, and its components' means are the stream's (log dwell
// 9 and 6, as contextStream draws them). Without the decay (adding alone)
// the mass would grow to about 3 × contextWindow.
func TestMergeContextFollowsOneModel(t *testing.T) {
	const n, every, parts = 30000, 300, 3
	c := contextMergeConfig()
	c.WarmUp, c.MaxUsers = 10, 0
	evs := kindStream(n, 5, "view", "click")
	one, err := New(c, NewSource(1))
	if err != nil {
		t.Fatal(err)
	}
	stepAll(t, one, evs)
	models := make([]*Model, parts)
	for q := range models {
		if models[q], err = NewPartition(c, 1, int32(q)); err != nil {
			t.Fatal(err)
		}
		models[q].StartSharing()
	}
	deltas := make([]Shared, parts)
	var sc Score
	for j, ev := range evs {
		u := 0
		fmt.Sscanf(ev.User, "u%d", &u)
		if err := models[u%parts].Step(ev, &sc); err != nil {
			t.Fatal(err)
		}
		if (j+1)%every != 0 {
			continue
		}
		for q, m := range models {
			if err := m.Publish(&deltas[q]); err != nil {
				t.Fatal(err)
			}
		}
		for q, m := range models {
			for r := range deltas {
				if r != q {
					if err := m.Merge(&deltas[r]); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	oneMass := one.context.mix.mass[0] + one.context.mix.mass[1]
	if math.Abs(oneMass-contextWindow) > 0.05*contextWindow {
		t.Fatalf("one model's mixture mass %.0f, want about %d", oneMass, contextWindow)
	}
	for q, m := range models {
		x := &m.context.mix
		mass := x.mass[0] + x.mass[1]
		mu0, mu1, _ := x.params()
		t.Logf("partition %d: mass %.0f (one model %.0f), means %.3f %.3f", q, mass, oneMass, mu0, mu1)
		if math.Abs(mass-oneMass) > 0.1*oneMass {
			t.Fatalf("partition %d: mixture mass %.0f, one model's %.0f", q, mass, oneMass)
		}
		if math.Abs(mu1-9) > 0.3 || math.Abs(mu0-6) > 0.6 {
			t.Fatalf("partition %d: component means %.2f, %.2f, want about 6 and 9", q, mu0, mu1)
		}
		if g := m.context.gate.slots[0].mass; g > dwellGateWindow*(1+1e-9) {
			t.Fatalf("partition %d: gate mass %.0f past its window %d", q, g, dwellGateWindow)
		}
	}
}

// A context delta that is not finite, has a negative mass, puts mass in a
// slot without a name or has the wrong length is refused whole: nothing
// of the model changes, its item rows included.
func TestMergeRefusesBadContext(t *testing.T) {
	a, err := New(contextMergeConfig(), NewSource(3))
	if err != nil {
		t.Fatal(err)
	}
	a.StartSharing()
	stepAll(t, a, kindStream(500, 1, "view"))
	var d Shared
	if err := a.Publish(&d); err != nil {
		t.Fatal(err)
	}
	b, err := New(contextMergeConfig(), NewSource(4))
	if err != nil {
		t.Fatal(err)
	}
	b.StartSharing()
	stepAll(t, b, kindStream(200, 2, "click"))
	items, ctx := sharedValues(b), untyped(&b.context)
	const slot4 = 6 + 4 // the EM statistics' typeMass[0][4] (contextStats.fields); the delta names 1 type
	for name, spoil := range map[string]func(s *Shared){
		"NaN":                      func(s *Shared) { s.Context[3] = math.NaN() },
		"negative mass":            func(s *Shared) { s.Context[0] = -1 },
		"negative instrument mass": func(s *Shared) { s.Context[contextSumsLen] = -1 },
		"mass in an unnamed slot":  func(s *Shared) { s.Context[slot4] = 1 },
		"short":                    func(s *Shared) { s.Context = s.Context[1:] },
		"an empty type name":       func(s *Shared) { s.Types = []string{""} },
	} {
		bad := d
		bad.Context, bad.Types = slices.Clone(d.Context), slices.Clone(d.Types)
		spoil(&bad)
		if err := b.Merge(&bad); err == nil {
			t.Fatalf("%s: merged", name)
		}
		if !slices.Equal(untyped(&b.context), ctx) || len(b.context.types) != 1 {
			t.Fatalf("%s: the refused delta changed the context", name)
		}
		after := sharedValues(b)
		for id, v := range items {
			if !slices.Equal(after[id], v) {
				t.Fatalf("%s: the refused delta changed item %s", name, id)
			}
		}
	}
}

// A version-1 delta (before the context) still decodes, with no context.
func TestSharedVersion1(t *testing.T) {
	_, d := publishedModel(t)
	d.Context, d.Types = nil, nil
	b, err := d.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Version 2 ends with an empty type list (u32 0), no context value
	// (u64 0) and the events (u64); version 1 ends before them.
	v1 := slices.Clone(b[:len(b)-20])
	binary.LittleEndian.PutUint32(v1[4:], 1)
	var got Shared
	if err := got.UnmarshalBinary(v1); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Items, d.Items) || !slices.Equal(got.Rows, d.Rows) || got.Context != nil {
		t.Fatal("version 1 decoded otherwise")
	}
	if err := new(Shared).UnmarshalBinary(b[:len(b)-20]); err == nil {
		t.Fatal("a version-2 delta without its context decoded")
	}
}

// A type the merger has no slot for, its named slots all taken, goes to
// its shared last slot, as a first sighting would; the publisher's shared
// last slot goes to the merger's.
func TestMergeContextTypesPastTheNamedSlots(t *testing.T) {
	var c contextModel
	for j := range namedTypes {
		c.typeSlot(fmt.Sprint("t", j))
	}
	var d contextSums
	d.em.typeMass[1][0], d.em.typeMass[1][namedTypes], d.em.typeTotal[1] = 5, 2, 7
	values := make([]float64, 0, contextDeltaLen)
	for _, p := range d.fields() {
		values = append(values, *p)
	}
	if err := checkContextDelta(values, []string{"new"}); err != nil {
		t.Fatal(err)
	}
	c.merge(values, []string{"new"})
	if got := c.em.typeMass[1][namedTypes]; got != 7 || len(c.types) != namedTypes || c.em.typeTotal[1] != 7 {
		t.Fatalf("shared last slot %v (want 7), %d types, total %v", got, len(c.types), c.em.typeTotal[1])
	}
	for b := range namedTypes {
		if c.em.typeMass[1][b] != 0 {
			t.Fatalf("named slot %d took %v", b, c.em.typeMass[1][b])
		}
	}
}

// The rank and gap instruments' moments merge as the statistics do: a
// model that shares from its first event publishes them whole, and an
// empty model that merges them holds the same, bit for bit, while its
// level offsets stay its own. A context delta of a build before they
// merged (shared delta version 2: the statistics alone) still merges, and
// leaves them as they were.
func TestMergeContextCarriesTheInstruments(t *testing.T) {
	c := contextMergeConfig()
	c.EventOrder = DefaultEventOrder()
	// No dwell; times 2 s apart on average; every other event a view or
	// a purchase (the rank instrument's), the others without a type (the
	// gap instrument's).
	evs := mergeStream(4000, 7)
	r := rand.New(rand.NewPCG(7, 8))
	ts := int64(1_700_000_000_000)
	for j := range evs {
		ts += int64(r.IntN(4000))
		evs[j].HasDwell, evs[j].DwellMS, evs[j].TimeMS, evs[j].HasTime = false, 0, ts, true
		if j%2 == 0 {
			evs[j].Kind = []string{"view", "purchase"}[j/2%2]
		}
	}
	a, err := New(c, NewSource(3))
	if err != nil {
		t.Fatal(err)
	}
	a.StartSharing()
	stepAll(t, a, evs)
	if a.context.rank.stats.mass < contextMinMass || a.context.gap.stats.mass < contextMinMass {
		t.Fatalf("the stream did not teach the instruments (masses %.0f, %.0f): nothing to compare", a.context.rank.stats.mass, a.context.gap.stats.mass)
	}
	var d Shared
	if err := a.Publish(&d); err != nil {
		t.Fatal(err)
	}
	got := sharedRoundTrip(t, &d)
	moments := func(m *Model) []float64 {
		var v []float64
		for _, p := range append(m.context.rank.moments(), m.context.gap.moments()...) {
			v = append(v, *p)
		}
		return v
	}
	b, err := New(c, NewSource(4))
	if err != nil {
		t.Fatal(err)
	}
	b.StartSharing()
	b.context.rank.offset, b.context.gap.offset = 0.25, -0.5
	if err := b.Merge(&got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(moments(b), moments(a)) {
		t.Fatalf("merged moments differ:\n%v\nwant\n%v", moments(b), moments(a))
	}
	if b.context.rank.offset != 0.25 || b.context.gap.offset != -0.5 {
		t.Fatalf("the merge moved the level offsets to %v, %v", b.context.rank.offset, b.context.gap.offset)
	}
	// A version-2 context: the statistics alone.
	old := got
	old.Context = old.Context[:contextSumsLen]
	e, err := New(c, NewSource(5))
	if err != nil {
		t.Fatal(err)
	}
	e.StartSharing()
	stepAll(t, e, evs[:1000])
	before, stats := moments(e), untyped(&e.context)
	if err := e.Merge(&old); err != nil {
		t.Fatalf("a version-2 context delta: %v", err)
	}
	if !slices.Equal(moments(e), before) {
		t.Fatal("a context delta without the instruments' moments changed them")
	}
	if slices.Equal(untyped(&e.context), stats) {
		t.Fatal("a version-2 context delta merged nothing")
	}
}
