package online

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"
)

// TestTailStatsKnownValues: the running quantile of negatives drawn
// uniformly from [0, 1] settles at tailQuantile; observed events are
// counted only once it has tailMinMass negatives; κ is the share below it
// over tailQuantile and the noise share, within [tailTemperMin, 1], and 1
// until tailMinMass observed events are counted.
func TestTailStatsKnownValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s tailStats
	s.learnObserved(0.01) // before the negatives' mass: not counted
	for range 20000 {
		s.learnNegative(r.Float64())
	}
	if s.mass != 0 || math.Abs(s.q-tailQuantile) > 0.02 {
		t.Fatalf("after 20,000 uniform negatives: q %v (want %v ± 0.02), %v observed counted", s.q, tailQuantile, s.mass)
	}
	for _, tc := range []struct {
		below, of int
		share     float64
		want      float64
	}{
		{6, 999, 0.7, 1},              // below the mass: κ = 1
		{6, 1000, 0.7, 0.2},           // 0.006 / 0.1 / 0.3
		{60, 1000, 0.7, 1},            // ν = 2: capped at 1
		{0, 1000, 0.7, tailTemperMin}, // nothing looks random
		{15, 1000, 0.5, 0.3},          // 0.015 / 0.1 / 0.5
	} {
		c := s
		c.mass, c.below = 0, 0
		for k := range tc.of {
			if k < tc.below {
				c.learnObserved(0.001) // below any q the uniform negatives give
			} else {
				c.learnObserved(0.9)
			}
		}
		if c.mass != float64(tc.of) || c.below != float64(tc.below) {
			t.Fatalf("counted %v below of %v, want %d of %d", c.below, c.mass, tc.below, tc.of)
		}
		if got := c.temper(tc.share); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%d below of %d, share %v: κ %v, want %v", tc.below, tc.of, tc.share, got, tc.want)
		}
	}
	if got := s.temper(0); got != 1 {
		t.Errorf("κ for a share of 0: %v, want 1", got)
	}
}

// tailStream is bareEvents four times as long: the tail learns after
// levelBurnIn events.
func tailStream(n int, seed uint64) []Event { return bareEvents(4*n, seed) }

// TestTailTempersTheGapPath: on a stream of (user, item, time) only, and
// on one whose events are all of one type (the context's anchored
// posterior is then the gap path's level), a model whose tail says
// little of the noise looks random (κ at its floor) weighs the events
// that follow with a narrower spread of log-odds than the same model with
// an empty tail (κ = 1), and a tail that gives κ = 1 changes no weight's
// bits; streams with dwell do not read it.
func TestTailTempersTheGapPath(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	clicks := func(n int, seed uint64) []Event {
		evs := bareEvents(n, seed)
		for j := range evs {
			evs[j].Kind = "click"
		}
		return evs
	}
	for _, tc := range []struct {
		name   string
		stream func(n int, seed uint64) []Event
	}{{"no types", bareEvents}, {"clicks only", clicks}} {
		m, _ := New(cfg, NewSource(7))
		runScores(t, m, tc.stream(6000, 3))
		base := encode(t, m)
		next := tc.stream(400, 4)
		run := func(tail tailStats) []Score {
			c, err := ReadModel(bytes.NewReader(base))
			if err != nil {
				t.Fatal(err)
			}
			c.context.tail = tail
			return runScores(t, c, next)
		}
		// Above levelBurnIn events the statistics would learn during the
		// run; this model has fewer, so each run keeps the tail it was
		// given.
		if float64(m.schedule.events) >= levelBurnIn {
			t.Fatalf("the model has %d events, want fewer than levelBurnIn", m.schedule.events)
		}
		empty := run(tailStats{})
		floor := run(tailStats{negatives: 5000, q: 0.2, mass: 5000, below: 0})
		ones := run(tailStats{negatives: 5000, q: 0.2, mass: 5000, below: 5000})
		for j := range empty {
			if empty[j].Weight != ones[j].Weight {
				t.Fatalf("%s, event %d: κ = 1 changed the weight %v to %v", tc.name, j, empty[j].Weight, ones[j].Weight)
			}
		}
		spread := func(s []Score) float64 {
			var sum, sq float64
			for _, x := range s {
				a := logOdds(x.Weight)
				sum += a
				sq += a * a
			}
			n := float64(len(s))
			return math.Sqrt(sq/n - sum*sum/n/n)
		}
		if a, b := spread(empty), spread(floor); !(b < 0.9*a) {
			t.Errorf("%s: s.d. of the weight's log-odds %v with κ at its floor, %v with κ = 1: want it narrower", tc.name, b, a)
		}
	}

	// A stream whose dwell tells the noise takes the dwell instrument's
	// path whole (dwellReach 1), which does not read the tail.
	d, _ := New(cfg, NewSource(7))
	dwelt := reachStream(true, true, false)
	runScores(t, d, dwelt[:3000])
	if r := d.context.dwellReach(); r != 1 {
		t.Fatalf("dwell's reach %v, want 1", r)
	}
	db := encode(t, d)
	more := dwelt[3000:3200]
	var w [2][]Score
	for k, tail := range []tailStats{{}, {negatives: 5000, q: 0.2, mass: 5000}} {
		c, _ := ReadModel(bytes.NewReader(db))
		c.context.tail = tail
		w[k] = runScores(t, c, more)
	}
	for j := range w[0] {
		if w[0][j].Weight != w[1][j].Weight {
			t.Fatalf("dwell stream, event %d: the tail moved the weight %v to %v", j, w[0][j].Weight, w[1][j].Weight)
		}
	}
}

// TestTailLearns: after levelBurnIn events of a (user, item, time)
// stream, the tail counts each event's first negative and, after
// tailMinMass of them, each observed event; a plain model and one
// without the dwell mixture count nothing.
func TestTailLearns(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	m, _ := New(cfg, NewSource(7))
	evs := tailStream(3500, 3) // 14,000 events
	runScores(t, m, evs[:int(levelBurnIn)])
	if m.context.tail != (tailStats{}) {
		t.Fatalf("the tail learned during the burn-in: %+v", m.context.tail)
	}
	runScores(t, m, evs[int(levelBurnIn):])
	s := m.context.tail
	after := float64(len(evs)) - levelBurnIn
	if s.negatives < 0.9*after || s.negatives > after || s.mass < after-1.2*tailMinMass || s.mass > after-tailMinMass {
		t.Errorf("after %v events past the burn-in: %v negatives, %v observed", after, s.negatives, s.mass)
	}
	if s.mass == 0 || !(s.q > 0 && s.q < 1) || s.below > s.mass {
		t.Errorf("tail %+v", s)
	}
	for _, c := range []Config{{Plain: true}, {DwellDirection: DwellLearned}} {
		cc := smallConfig(ModeBinary)
		cc.Plain, cc.DwellDirection = c.Plain, c.DwellDirection
		if cc.DwellDirection == "" {
			cc.DwellDirection = DwellLong
		}
		p, _ := New(cc, NewSource(7))
		runScores(t, p, evs)
		if p.context.tail != (tailStats{}) {
			t.Errorf("plain %v, dwell_direction %q: the tail learned %+v", cc.Plain, cc.DwellDirection, p.context.tail)
		}
	}
}

// withoutTail rewrites a model encoding or a delta into the given older
// version without what version 20 (delta 16) added and what came after:
// TAIL and BRST.
func withoutTail(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	return withoutSection(t, withoutBurst(t, b, version), "TAIL", version)
}

// TestTailEncoding: a model whose tail has counted encodes it (TAIL),
// reads back to the same bytes and goes on scoring bit for bit, and a
// chain of deltas restores it; a model of version 19 reads with an empty
// tail and nothing else changed, and a delta of version 15 leaves the
// base's; a TAIL no stream gives is refused.
func TestTailEncoding(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	instrumentRoundTrip(t, cfg, tailStream, "TAIL", func(m *Model) error {
		if s := &m.context.tail; s.mass < tailMinMass {
			return fmt.Errorf("the tail counted %v observed events", s.mass)
		}
		return nil
	}, func(got, m *Model) error {
		if got.context.tail != m.context.tail {
			return fmt.Errorf("tail %+v, want %+v", got.context.tail, m.context.tail)
		}
		return nil
	})

	m, _ := New(cfg, NewSource(5))
	evs := tailStream(3500, 3)
	runScores(t, m, evs[:13000])
	cp := m.FrozenCopy(nil)
	base := encode(t, cp)
	cp.MarkSaved()
	old, err := ReadModel(bytes.NewReader(withoutTail(t, base, gapReachVersion)))
	if err != nil {
		t.Fatal(err)
	}
	if old.context.tail != (tailStats{}) {
		t.Fatalf("version 19 read with a tail %+v", old.context.tail)
	}
	old.context.tail, old.context.burst = m.context.tail, m.context.burst
	if !bytes.Equal(encode(t, old), base) {
		t.Fatal("version 19 read back with other parts than the model's")
	}
	tail := cp.context.tail
	runScores(t, m, evs[13000:])
	if m.context.tail == tail {
		t.Fatal("the tail learned nothing from 1,000 more events")
	}
	delta := withoutTail(t, writeDelta(t, m.FrozenCopy(cp)), deltaGapReachVersion)
	applied, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)})
	if err != nil {
		t.Fatal(err)
	}
	if applied.context.tail != tail {
		t.Errorf("a version-15 delta: tail %+v, want the base's %+v", applied.context.tail, tail)
	}

	refusesFields(t, base, "TAIL", []badField{
		{0, math.NaN(), "tail not finite"},
		{0, -1, "tail out of range"},
		{0, 10, "tail out of range"}, // observed events counted before the negatives' mass
		{1, 1.5, "tail out of range"},
		{1, -0.5, "tail out of range"},
		{3, 1e9, "tail out of range"},
	})
}
