package online

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"
)

// untimedEvents is bareEvents without times: a log of (user, item) pairs.
func untimedEvents(n int, seed uint64) []Event {
	evs := bareEvents(n, seed)
	for j := range evs {
		evs[j].TimeMS, evs[j].HasTime = 0, false
	}
	return evs
}

// withoutCountGap rewrites a model encoding of version 18 or a delta of
// version 14 into the given older version without the users' priors and
// the counted gaps' scale (withoutPrior, then CGAP left out).
func withoutCountGap(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	return withoutSection(t, withoutPrior(t, b, version), "CGAP", version)
}

// TestCountGapScale: the scale is the geometric mean of (1 + count) over
// the window, read as 30 seconds, and a count k times longer (in 1 + count)
// as k times that; nothing before countGapMinMass.
func TestCountGapScale(t *testing.T) {
	var s countGapStats
	for k := 0; s.mass < countGapMinMass; k++ {
		if _, ok := s.seconds(math.Log1p(9)); ok || k > 10*countGapMinMass {
			t.Fatalf("a gap read with a scale of mass %v (%v ok) after %d counts", s.mass, ok, k)
		}
		s.learn(math.Log1p(9))
	}
	for _, tc := range []struct{ count, want float64 }{{9, 30}, {39, 120}, {0, 3}, {4, 15}} {
		if got, ok := s.seconds(math.Log1p(tc.count)); !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("a count of %v: %v s (%v), want %v", tc.count, got, ok, tc.want)
		}
	}
	// Counts of 3 and 15 in turn: a geometric mean of 1 + count of 8.
	var two countGapStats
	for k := range 4 * contextWindow {
		two.learn(math.Log1p([2]float64{3, 15}[k%2]))
	}
	if got, _ := two.seconds(math.Log1p(7)); math.Abs(got-30) > 0.05 {
		t.Errorf("counts of 3 and 15: a count of 7 reads %v s, want 30", got)
	}
}

// TestCountGap: an event without a time whose user's latest had none
// either reads the events learned between them, as seconds once the scale
// has the mass; a time replaces the count, and an event without a time
// after one with a time has no gap, as before.
func TestCountGap(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	m, err := New(cfg, NewSource(3))
	if err != nil {
		t.Fatal(err)
	}
	const t0 = int64(1_700_000_000_000)
	step := func(user string, time int64, wantCount float64, counted bool) contextFeatures {
		t.Helper()
		ev := Event{User: user, Item: "i1", TimeMS: time, HasTime: time != 0}
		var x contextFeatures
		m.instrumentFeatures(m.userID(ev.User), m.itemID(ev.Item), &ev, &x)
		if x.counted != counted || counted && x.countGap != math.Log1p(wantCount) {
			t.Errorf("%s at event %d: count log1p %v (%v), want log1p(%v) (%v)", user, m.schedule.events, x.countGap, x.counted, wantCount, counted)
		}
		var sc Score
		if err := m.Step(ev, &sc); err != nil {
			t.Fatal(err)
		}
		return x
	}
	step("a", 0, 0, false) // the user's first
	step("b", 0, 0, false)
	step("c", 0, 0, false)
	if x := step("a", 0, 2, true); x.hasGap {
		t.Error("a count read as a gap before the scale has the mass")
	}
	step("a", 0, 0, true) // right after
	step("b", 0, 3, true)
	step("b", t0, 0, false) // a time: no gap, and it replaces the count
	step("b", 0, 0, false)  // no time after a time: none
	if got := m.users.times[m.users.index["b"]]; got != t0 {
		t.Errorf("b's latest %d, want the time %d", got, t0)
	}

	step("d", 0, 0, false)
	for range 4 {
		step("d", 0, 0, true) // each right after the one before
	}
	// Once the scale has the mass, the count is a gap in seconds: a's
	// count of 8 (b's three and the d's five) at the scale's mean reads 30 s.
	m.context.countGap = countGapStats{}
	for m.context.countGap.mass < countGapMinMass {
		m.context.countGap.learn(math.Log1p(8))
	}
	if x := step("a", 0, 8, true); !x.hasGap || math.Abs(x.z[gapFeature]-math.Log1p(30)) > 1e-12 {
		t.Errorf("a count at the scale's mean reads %v (%v), want log(1 + 30)", x.z[gapFeature], x.hasGap)
	}
	if x := step("a", 0, 0, true); !x.hasGap || math.Abs(x.z[gapFeature]-math.Log1p(30.0/9)) > 1e-12 {
		t.Errorf("a count of 0 reads %v (%v), want log(1 + 30/9)", x.z[gapFeature], x.hasGap)
	}
}

// TestCountGapEncoding: a model whose scale holds counts encodes it
// (CGAP), reads back to the same bytes and goes on scoring bit for bit; a
// chain of deltas restores it; a CGAP that is not finite or out of range
// is refused. A model of version 16 (no CGAP) loads with an empty scale
// and encodes in version 17; a delta of version 12 leaves the base's
// scale as it was.
func TestCountGapEncoding(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection, cfg.EventOrder = DwellLong, DefaultEventOrder()
	instrumentRoundTrip(t, cfg, untimedEvents, "CGAP", func(m *Model) error {
		if s := &m.context.countGap; s.mass < countGapMinMass {
			return fmt.Errorf("the scale holds a mass of %v", s.mass)
		} else if g := &m.context.gap; g.stats.mass < contextMinMass {
			return fmt.Errorf("the gap instrument learned a mass of %v from the counted gaps", g.stats.mass)
		}
		return nil
	}, func(got, m *Model) error {
		if got.context.countGap != m.context.countGap {
			return fmt.Errorf("scale %+v, want %+v", got.context.countGap, m.context.countGap)
		}
		return nil
	})

	m, _ := New(cfg, NewSource(11))
	runScores(t, m, untimedEvents(3000, 1))
	refusesFields(t, encode(t, m), "CGAP", []badField{
		{0, math.NaN(), "count gap's scale not finite"},
		{0, -1, "count gap's scale out of range"},
		{0, 2 * contextWindow, "count gap's scale out of range"},
		{1, 1e9, "count gap's scale out of range"},
	})

	cp := m.FrozenCopy(nil)
	base := encode(t, cp)
	cp.MarkSaved()
	got, err := ReadModel(bytes.NewReader(withoutCountGap(t, base, levelVersion)))
	if err != nil {
		t.Fatal(err)
	}
	if got.context.countGap != (countGapStats{}) {
		t.Fatalf("scale read from version 16: %+v, want empty", got.context.countGap)
	}
	got.context.countGap = m.context.countGap
	withPriorOf(got, m)
	if !bytes.Equal(encode(t, got), base) {
		t.Fatal("version 16 read back with other parts than the model's")
	}
	scale := cp.context.countGap
	runScores(t, m, untimedEvents(10, 4))
	delta := withoutCountGap(t, writeDelta(t, m.FrozenCopy(cp)), deltaLevelVersion)
	applied, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)})
	if err != nil {
		t.Fatal(err)
	}
	if applied.context.countGap != scale || scale == m.context.countGap {
		t.Errorf("a version-12 delta: scale %+v, want the base's %+v", applied.context.countGap, scale)
	}
}

// TestCountGapFindsBursts: on a log without times whose noise comes in
// bursts (a user's noisy events right after the user's previous one) and
// whose p_clean says nothing, the counted gap carries the weight: it
// ranks the events better than p_clean, as the same log with times does.
func TestCountGapFindsBursts(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	evs, genuine := burstEvents(30000, 5)
	timed := make([]Event, len(evs))
	for j, ev := range evs {
		ev.TimeMS, ev.HasTime = 1_700_000_000_000+int64(j)*500, true
		timed[j] = ev
	}
	for _, tc := range []struct {
		name   string
		stream []Event
	}{{"untimed", evs}, {"timed, 0.5 s apart", timed}} {
		m, _ := New(cfg, NewSource(5))
		scores := runScores(t, m, tc.stream)
		half := len(scores) / 2
		w, p := make([]float64, 0, half), make([]float64, 0, half)
		for _, sc := range scores[half:] {
			w, p = append(w, sc.Weight), append(p, sc.PClean)
		}
		weight, pClean := pairsRanked(w, genuine[half:]), pairsRanked(p, genuine[half:])
		t.Logf("%s: the second half's weight ranks %.4f, p_clean %.4f", tc.name, weight, pClean)
		if weight < pClean+0.05 {
			t.Errorf("%s: the weight ranks %.4f, p_clean %.4f: the gap added less than 0.05", tc.name, weight, pClean)
		}
	}
}

// burstEvents is a log of n (user, item) pairs of 300 users and 2,000
// items, drawn at random (so p_clean has no taste to learn); a fifth of
// the events are noise, each following its user's previous event at once
// (the next event of the log), as a bounce chain's clicks follow each
// other.
func burstEvents(n int, seed uint64) ([]Event, []bool) {
	r := rand.New(rand.NewPCG(seed, 31))
	evs, genuine := make([]Event, 0, n), make([]bool, 0, n)
	for len(evs) < n {
		u := fmt.Sprint("u", r.IntN(300))
		evs = append(evs, Event{User: u, Item: fmt.Sprint("i", r.IntN(2000))})
		genuine = append(genuine, true)
		if r.Float64() < 0.25 && len(evs) < n {
			evs = append(evs, Event{User: u, Item: fmt.Sprint("i", r.IntN(2000))})
			genuine = append(genuine, false)
		}
	}
	return evs, genuine
}

// TestCountGapStepDoesNotAllocate: a step of an untimed event, its gap
// counted, allocates nothing.
func TestCountGapStepDoesNotAllocate(t *testing.T) {
	cfg := Config{Mode: ModeBinary, Dim: 16, Negatives: 4, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256,
		TransitionUserOffset: true, DwellDirection: DwellLong, EventOrder: DefaultEventOrder()}
	m, err := New(cfg, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	evs := untimedEvents(4000, 12)
	runScores(t, m, evs)
	if m.context.countGap.mass < countGapMinMass {
		t.Fatalf("the scale has a mass of %v", m.context.countGap.mass)
	}
	j := 0
	var sc Score
	if allocs := testing.AllocsPerRun(98, func() {
		m.Step(evs[j%len(evs)], &sc)
		j++
	}); allocs != 0 {
		t.Errorf("Step allocates %.1f times per event", allocs)
	}
}
