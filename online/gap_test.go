package online

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// timedEvents is rankedEvents with times: 1 to 120 s apart, every tenth
// event without one, a stream of a later seed later (by 10⁹ ms, about
// 12 days: a stream of fewer than 16,000 events ends before the next
// seed's begins).
func timedEvents(n int, seed uint64) []Event {
	evs := rankedEvents(n, seed)
	r := rand.New(rand.NewPCG(seed, 13))
	now := int64(1_700_000_000_000) + int64(seed)*1_000_000_000
	for j := range evs {
		now += 1000 + r.Int64N(119_000)
		evs[j].TimeMS, evs[j].HasTime = now, j%10 != 9
	}
	return evs
}

// timedDwellEvents is timedEvents with testStream's dwell on every other
// event, so that both instruments learn.
func timedDwellEvents(n int, seed uint64) []Event {
	evs, dwelt := timedEvents(n, seed), testStream(n, seed)
	for j := 0; j < n; j += 2 {
		evs[j].HasDwell, evs[j].DwellMS = dwelt[j].HasDwell, dwelt[j].DwellMS
	}
	return evs
}

// section returns the offset of the section tag in b and the offsets of
// its body's start and end.
func section(t *testing.T, b []byte, tag string) (at, start, end int) {
	t.Helper()
	at = bytes.Index(b, []byte(tag))
	if at < 0 {
		t.Fatalf("no %s section", tag)
	}
	start = at + 12
	return at, start, start + int(binary.LittleEndian.Uint64(b[at+4:]))
}

// withoutSection rewrites a model encoding or a delta into the given
// older version without the section tag.
func withoutSection(t *testing.T, b []byte, tag string, version uint32) []byte {
	t.Helper()
	at, _, end := section(t, b, tag)
	out := append(append([]byte(nil), b[:at]...), b[end:]...)
	binary.LittleEndian.PutUint32(out[8:], version)
	return out
}

// badField is a value written over the f64 at index field of a section's
// body, and the error ReadModel is to give then.
type badField struct {
	field int
	v     float64
	want  string
}

// refusesFields checks that ReadModel refuses the model encoding b with
// each of bad written into its section tag.
func refusesFields(t *testing.T, b []byte, tag string, bad []badField) {
	t.Helper()
	_, start, _ := section(t, b, tag)
	for _, f := range bad {
		c := bytes.Clone(b)
		binary.LittleEndian.PutUint64(c[start+8*f.field:], math.Float64bits(f.v))
		if _, err := ReadModel(bytes.NewReader(c)); err == nil || !bytes.Contains([]byte(err.Error()), []byte(f.want)) {
			t.Errorf("%s with field %d = %v: %v, want %q", tag, f.field, f.v, err, f.want)
		}
	}
}

// withBody returns b with the body of the section at (at, start, end)
// replaced by body, its length set.
func withBody(b []byte, at, start, end int, body []byte) []byte {
	out := append([]byte(nil), b[:start]...)
	binary.LittleEndian.PutUint64(out[at+4:], uint64(len(body)))
	out = append(out, body...)
	return append(out, b[end:]...)
}

// oldInstrumentStats rewrites the body of instrument statistics of
// instrumented features (DINS, and the head of RINS) into the layout of
// oldInstrumented, as versions 9 to 12 wrote them.
func oldInstrumentStats(body []byte) []byte {
	var s instrumentStats
	for k, p := range s.fields() {
		*p = math.Float64frombits(binary.LittleEndian.Uint64(body[8*k:]))
	}
	var out []byte
	for _, p := range s.fieldsOf(oldInstrumented) {
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(*p))
	}
	return out
}

// withoutGap rewrites a model encoding of version 15 or a delta of version
// 11 into the given older version, as stop 39 wrote them: no user times at
// the end of USER, and DINS and RINS of four features.
func withoutGap(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	b = withoutGapInstrument(t, b, version)
	at, start, end := section(t, b, "USER")
	b = withBody(b, at, start, end, b[start:end-8*userRows(b, start)])
	full := 8 * len(new(instrumentStats).fields())
	at, start, end = section(t, b, "DINS")
	if end-start != full {
		t.Fatalf("DINS of %d bytes, want %d", end-start, full)
	}
	b = withBody(b, at, start, end, oldInstrumentStats(b[start:end]))
	if bytes.Contains(b, []byte("RINS")) {
		at, start, end = section(t, b, "RINS")
		b = withBody(b, at, start, end, append(oldInstrumentStats(b[start:start+full]), b[start+full:end]...))
	}
	binary.LittleEndian.PutUint32(b[8:], version)
	return b
}

// userRows is the number of rows in the USER (or ITEM) section whose body
// starts at start of b: a model's users (items), or the rows of a delta's
// spans.
func userRows(b []byte, start int) int {
	if !bytes.Equal(b[:8], deltaMagic[:]) {
		return int(binary.LittleEndian.Uint32(b[start:]))
	}
	rows := 0
	for k := range int(binary.LittleEndian.Uint32(b[start:])) {
		lo := binary.LittleEndian.Uint32(b[start+4+8*k:])
		rows += int(binary.LittleEndian.Uint32(b[start+8+8*k:]) - lo)
	}
	return rows
}

// gapMoments reports whether instrument statistics hold moments of the
// gap.
func gapMoments(s *instrumentStats) bool {
	return s.sum[gapFeature+1] != 0 || s.cross[gapFeature+1] != 0 || s.squares[len(s.squares)-1] != 0
}

// withoutGapMoments is s with the gap's moments zeroed: what version 12
// holds of it.
func withoutGapMoments(s instrumentStats) instrumentStats {
	s.forgetGap()
	return s
}

// withVersion returns b, a model encoding or a delta of the newest
// version, marked as version 13 (delta 9), whose layout is version 14's
// (delta 10's): GINS left out.
func withVersion(t *testing.T, b []byte, version uint32) []byte {
	return withoutGapInstrument(t, b, version)
}

// TestReadModelVersion13: a model encoded in version 13, whose rank
// instrument read the gap up to 30 minutes, loads with the rank
// instrument's gap moments dropped and everything else as it was (the
// dwell instrument's gap moments, the users' times); the rank instrument
// learns the gap again, now capped at 30 s, and the model encodes in
// version 14; a delta of version 9 applies the same way.
func TestReadModelVersion13(t *testing.T) {
	readsOlderVersion(t, olderVersion{
		stream: timedDwellEvents, strip: withVersion, version: gapVersion, delta: deltaGapVersion,
		part:  "rank instrument's gap",
		ready: func(m *Model) bool { return gapMoments(&m.context.rank.stats) },
		kept: func(got, m *Model) bool {
			return got.context.rank.stats == withoutGapMoments(m.context.rank.stats) && got.context.inst == m.context.inst &&
				gapMoments(&got.context.inst) && slices.Equal(got.users.times, m.users.times) &&
				got.context.rank.offset == m.context.rank.offset && got.context.gate == m.context.gate
		},
		empty:  func(m *Model) bool { return !gapMoments(&m.context.rank.stats) },
		ranked: true,
	})
}

// TestReadModelVersion12: a model encoded in version 12 (no user times,
// instruments of four features) loads with the four features' moments as
// they were, no gap moments and no user times; the gap's moments are
// learned from the events that follow, and the model goes on scoring; a
// delta of version 8 applies to it the same way.
func TestReadModelVersion12(t *testing.T) {
	readsOlderVersion(t, olderVersion{
		stream: timedEvents, strip: withoutGap, version: rankVersion, delta: deltaRankVersion,
		part:  "gap",
		ready: func(m *Model) bool { return gapMoments(&m.context.rank.stats) },
		kept: func(got, m *Model) bool {
			return got.context.rank.stats == withoutGapMoments(m.context.rank.stats) && got.context.inst == withoutGapMoments(m.context.inst) &&
				got.context.rank.offset == m.context.rank.offset && got.context.gate == m.context.gate
		},
		empty: func(m *Model) bool {
			for _, v := range m.users.times {
				if v != noTime {
					return false
				}
			}
			return !gapMoments(&m.context.rank.stats) && !gapMoments(&m.context.inst) && len(m.users.times) == m.users.len()
		},
		ranked: true,
	})
}

// TestGapFeature: the gap is log(1 + seconds) since the user's latest
// event with a time, at most 30 minutes' (sessionGapMS), which the dwell
// instrument reads as it is and the rank instrument capped at 30 s
// (shortClickMS): none for the
// user's first, for an event without a time or after events without one;
// 0 for an event out of order, which leaves the latest time as it is; an
// evicted user's row starts with none.
func TestGapFeature(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection, cfg.MaxUsers = DwellLong, 2
	m, err := New(cfg, NewSource(3))
	if err != nil {
		t.Fatal(err)
	}
	const t0 = int64(1_700_000_000_000)
	for j, tc := range []struct {
		user    string
		time    int64 // 0: none
		gap     float64
		has     bool
		latest  int64
		comment string
	}{
		{"a", 0, 0, false, untimed(1), "no time, no earlier one: the count starts after it"},
		{"a", t0, 0, false, t0, "the user's first time: it replaces the count"},
		{"a", t0 + 9000, math.Log1p(9), true, t0 + 9000, "9 s later"},
		{"a", 0, 0, false, t0 + 9000, "no time: the latest stays"},
		{"a", t0 + 5000, 0, true, t0 + 9000, "out of order: 0, the latest stays"},
		{"b", t0 + 1000, 0, false, t0 + 1000, "another user's first"},
		{"a", t0 + 69_000, math.Log1p(60), true, t0 + 69_000, "a minute after the latest"},
		{"a", t0 + 69_000 + 7_200_000, math.Log1p(1800), true, t0 + 69_000 + 7_200_000, "two hours later: a new session, read as 30 minutes"},
		{"c", t0 + 7_300_000, 0, false, t0 + 7_300_000, "evicts b (capped at 2): c's row has no time"},
	} {
		ev := Event{User: tc.user, Item: "i1", TimeMS: tc.time, HasTime: tc.time != 0}
		u, i := m.userID(ev.User), m.itemID(ev.Item)
		var x contextFeatures
		m.instrumentFeatures(u, i, &ev, &x)
		if !x.hasZ || x.hasGap != tc.has || math.Abs(x.z[gapFeature]-tc.gap) > 1e-12 {
			t.Errorf("event %d (%s): gap %v (%v, z %v), want %v (%v)", j, tc.comment, x.z[gapFeature], x.hasGap, x.hasZ, tc.gap, tc.has)
		}
		if tc.has {
			dwell, rank := m.context.inst.impute(&x, dwellGapCap), m.context.rank.stats.impute(&x, rankGapCap)
			if want := min(tc.gap, math.Log1p(30)); math.Abs(rank[gapFeature]-want) > 1e-12 || dwell[gapFeature] != tc.gap {
				t.Errorf("event %d (%s): the rank instrument reads %v (want %v, at most 30 s), the dwell instrument %v (want %v)",
					j, tc.comment, rank[gapFeature], want, dwell[gapFeature], tc.gap)
			}
		}
		var sc Score
		if err := m.Step(ev, &sc); err != nil {
			t.Fatal(err)
		}
		if got := m.users.times[m.users.index[tc.user]]; got != tc.latest {
			t.Errorf("event %d (%s): latest time %d, want %d", j, tc.comment, got, tc.latest)
		}
	}
	if b := encode(t, m); !bytes.Contains(b, []byte("USER")) {
		t.Fatal("no USER section")
	} else if got, err := ReadModel(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	} else if !slices.Equal(got.users.times, m.users.times) {
		t.Errorf("times read back %v, want %v", got.users.times, m.users.times)
	}

	plain, _ := New(smallConfig(ModeBinary), NewSource(3))
	var sc Score
	if err := plain.Step(Event{User: "a", Item: "i", TimeMS: t0, HasTime: true}, &sc); err != nil {
		t.Fatal(err)
	}
	if plain.users.times != nil {
		t.Errorf("a model without the instrument keeps times: %v", plain.users.times)
	}
}

// TestInstrumentFindsTheGapsDirection: the gap enters the instrument as a
// feature whose direction no rule states. Where noise comes in quick
// succession (short gaps) and where it comes after long pauses, the
// instrument's slope on the gap takes the stream's sign, from its
// covariance with dwell alone; and where the gap says nothing its slope
// stays near 0. Events with no gap (one in five) stand at the mean and
// move nothing.
func TestInstrumentFindsTheGapsDirection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shift    float64 // genuine minus noise, in log gap
		min, max float64
	}{
		{"noise quick", 1, 0.3, 3},
		{"noise after pauses", -1, -3, -0.3},
		{"no signal", 0, -0.1, 0.1},
	} {
		r := rand.New(rand.NewPCG(21, 4))
		c := contextModel{long: true}
		for range 30000 {
			g := 0.0
			if r.Float64() < 0.8 {
				g = 1
			}
			x := contextFeatures{logDwell: 7 + g + 0.5*r.NormFloat64(), hasDwell: true, bucket: -1, hasZ: true}
			for j := range gapFeature {
				x.z[j] = r.NormFloat64()
			}
			if r.Float64() < 0.8 {
				x.z[gapFeature], x.hasGap = 4+tc.shift*g+r.NormFloat64(), true
			}
			p := sigmoid(1.4 + 0.5*r.NormFloat64())
			w, ranked := c.posterior(p, x, 0.8)
			c.learn(x, w, p, ranked)
		}
		f, ok := c.instrument(0.8, 0.8, true)
		if !ok {
			t.Fatalf("%s: no instrument", tc.name)
		}
		if s := f.slope[gapFeature+1]; s < tc.min || s > tc.max || math.IsNaN(s) {
			t.Errorf("%s: the gap's slope %.3f, want in [%.1f, %.1f]", tc.name, s, tc.min, tc.max)
		}
	}
}

// TestForgetTimes: after ForgetTimes every user's time is forgotten, so
// a second pass over the same log reads the same gaps as the first (each
// user's first event none); without it every gap of the second pass reads
// as out of order (0). A delta written after it carries the forgotten
// times.
func TestForgetTimes(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	m, err := New(cfg, NewSource(5))
	if err != nil {
		t.Fatal(err)
	}
	evs := timedEvents(300, 1)
	gaps := func() (got []float64) {
		for _, ev := range evs {
			var x contextFeatures
			m.instrumentFeatures(m.userID(ev.User), m.itemID(ev.Item), &ev, &x)
			if x.hasGap {
				got = append(got, x.z[gapFeature])
			} else {
				got = append(got, -1)
			}
			var sc Score
			if err := m.Step(ev, &sc); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}
	first := gaps()
	if again := gaps(); slices.ContainsFunc(again, func(g float64) bool { return g > 0 }) {
		t.Fatalf("a second pass without ForgetTimes read a gap above 0: %v", again[:20])
	}
	cp := m.FrozenCopy(nil)
	base := encode(t, cp)
	cp.MarkSaved()
	m.ForgetTimes()
	for u, v := range m.users.times {
		if v != noTime {
			t.Fatalf("user %d keeps time %d", u, v)
		}
	}
	delta := writeDelta(t, m.FrozenCopy(cp))
	applied, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied.users.times, m.users.times) {
		t.Error("the delta after ForgetTimes does not carry the forgotten times")
	}
	if third := gaps(); !slices.Equal(third, first) {
		t.Errorf("gaps after ForgetTimes differ from the first pass's")
	}
}

// TestFlatGapKeepsPopularity: where the gap instrument has its moments
// but every gap is the same (a log without time whose users' events come
// in bursts), the weight is the level with the item's popularity, λ 0,
// and the instrument's level offset stays; before the moments have the
// mass, there is no gap weight.
func TestFlatGapKeepsPopularity(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	c := newContextModel(cfg)
	x := contextFeatures{hasZ: true, hasGap: true}
	x.z[gapFeature] = math.Log1p(22)
	if _, ok := c.gapWeight(0.8, 0.8, x, 0.8); ok {
		t.Fatal("a gap weight before the instrument has any moments")
	}
	r := rand.New(rand.NewPCG(4, 4))
	for k := 0; c.gap.stats.mass < 2*contextMinMass; k++ {
		if k > 20*contextWindow {
			t.Fatalf("the moments' mass is %v after %d events", c.gap.stats.mass, k)
		}
		p := r.Float64() * 3 // the item's popularity, log(1 + step)
		var z [instrumented - 1]float64
		z[itemFeature-1] = p
		c.gap.learn(math.Log1p(22), 0.5*p+r.NormFloat64()*0.3, z, nil) // p_clean rises with it
	}
	if _, ok := c.gap.fit(0.8, 0.8, rankSeparation, false, gapPCleanFloor); ok {
		t.Fatal("the instrument fitted a gap without spread")
	}
	for _, p := range []float64{0.5, 2.5} {
		x.z[itemFeature-1] = p
		r, ok := c.gapWeight(0.8, 0.8, x, 0.8)
		w, g := r.w, r.g
		want := sigmoid(logOdds(0.8) + c.gap.classifierPopularity(x))
		if !ok || r.lambda != 0 || r.blend != 0 || g != 0.8 || math.Abs(w-want) > 1e-12 {
			t.Errorf("popularity %v: %+v ok %v, want w %v, g the level, λ and the blend 0", p, r, ok, want)
		}
	}
	x.z[itemFeature-1] = 2.5
	hi, _ := c.gapWeight(0.8, 0.8, x, 0.8)
	x.z[itemFeature-1] = 0.5
	if lo, _ := c.gapWeight(0.8, 0.8, x, 0.8); !(hi.w > lo.w) {
		t.Errorf("where p_clean rises with popularity the popular item weighs %v, the other %v", hi, lo)
	}
}
