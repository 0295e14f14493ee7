package online

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"testing"
)

// TestLevelStats: the level leaves out the first levelBurnIn events,
// then is the plain mean of p_clean, and moves a posterior of centre c by
// logit(mean) − c once it holds levelMinMass events, by nothing before.
func TestLevelStats(t *testing.T) {
	var l levelStats
	for range int(levelBurnIn) {
		l.learn(0.99) // the young classifier's p_clean: left out
	}
	if l.mass != 0 || l.shift(1) != 0 {
		t.Fatalf("after the burn-in: mass %v, shift %v, want 0, 0", l.mass, l.shift(1))
	}
	for k := range levelMinMass - 1 {
		l.learn(0.6 + 0.2*float64(k%2))
	}
	if l.shift(1) != 0 {
		t.Fatalf("shift %v with %v events, want 0 below %d", l.shift(1), l.mass, levelMinMass)
	}
	l.learn(0.8) // 50 of 0.6, 50 of 0.8: mean 0.7
	const centre = 0.3
	if got, want := l.shift(centre), math.Log(0.7/0.3)-centre; math.Abs(got-want) > 1e-12 {
		t.Fatalf("shift %v, want %v (mean %v)", got, want, l.sum/l.mass)
	}
}

// TestLevelMovesPosterior: with the level's mean above the anchor's share,
// each path of the context's posterior (anchored, dwell's instrument, the
// rank instrument's) gives log-odds higher by exactly the level's shift; a
// model without long has no level.
func TestLevelMovesPosterior(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection, cfg.EventOrder = DwellLong, DefaultEventOrder()
	for _, tc := range []struct {
		name   string
		stream func(n int, seed uint64) []Event
		path   contextPath
	}{{"dwell", timedDwellEvents, pathDwell}, {"rank", timedEvents, pathRank}} {
		m, _ := New(cfg, NewSource(3))
		runScores(t, m, tc.stream(3000, 1))
		c := &m.context
		ev := tc.stream(1, 9)[0]
		x := c.features(&ev, cfg.Mode)
		m.instrumentFeatures(0, 0, &ev, &x)
		centre := c.anchor.share()
		shift := logOdds(0.9) - centre
		without, _ := c.posterior(0.7, x, 0.8)
		c.level = levelStats{seen: levelBurnIn + 1000, mass: 1000, sum: 900} // mean 0.9
		with, path := c.posterior(0.7, x, 0.8)
		if path != tc.path {
			t.Fatalf("%s: path %d, want %d", tc.name, path, tc.path)
		}
		if got := logOdds(with) - logOdds(without); math.Abs(got-shift) > 1e-9 {
			t.Errorf("%s: the level moved the log-odds by %v, want %v", tc.name, got, shift)
		}
		c.long = false
		p, _ := c.posterior(0.7, x, 0.8)
		c.level = levelStats{}
		if q, _ := c.posterior(0.7, x, 0.8); p != q {
			t.Errorf("%s: a model without long reads the level (%v, without it %v)", tc.name, p, q)
		}
	}
	// The anchored path: a context whose instruments have learned nothing.
	c := newContextModel(cfg.WithDefaults())
	without, _ := c.posterior(0.7, contextFeatures{}, 0.8)
	c.level = levelStats{seen: levelBurnIn + 1000, mass: 1000, sum: 900}
	with, path := c.posterior(0.7, contextFeatures{}, 0.8)
	if want := logOdds(0.9) - c.anchor.share(); path != pathAnchored || math.Abs(logOdds(with)-logOdds(without)-want) > 1e-9 {
		t.Errorf("anchored: path %d, the level moved the log-odds by %v, want %v", path, logOdds(with)-logOdds(without), want)
	}
}

// longStream is timedDwellEvents four times as long: the level needs
// levelBurnIn events before it has a mean.
func longStream(n int, seed uint64) []Event { return timedDwellEvents(4*n, seed) }

// TestLevelEncoding: a model whose level holds a mean encodes it (LEVL),
// reads back to the same bytes and goes on scoring bit for bit; a chain of
// deltas restores it; a LEVL that is not finite or out of range is
// refused.
func TestLevelEncoding(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection, cfg.EventOrder = DwellLong, DefaultEventOrder()
	instrumentRoundTrip(t, cfg, longStream, "LEVL", func(m *Model) error {
		if l := &m.context.level; l.mass < levelMinMass {
			return fmt.Errorf("the level holds %v events after %v", l.mass, l.seen)
		}
		return nil
	}, func(got, m *Model) error {
		if got.context.level != m.context.level {
			return fmt.Errorf("level %+v, want %+v", got.context.level, m.context.level)
		}
		return nil
	})

	m, _ := New(cfg, NewSource(11))
	runScores(t, m, longStream(3000, 1))
	refusesFields(t, encode(t, m), "LEVL", []badField{
		{0, math.Inf(1), "level not finite"},
		{1, -1, "level out of range"},
		{1, 1e9, "level out of range"},
		{2, 1e9, "level out of range"},
	})
}

// withoutLevel rewrites a model encoding of version 17 or a delta of
// version 13 into the given older version without the level and the
// counted gaps' scale: LEVL and CGAP (the last context sections) left out.
func withoutLevel(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	return withoutSection(t, withoutCountGap(t, b, version), "LEVL", version)
}

// TestReadModelVersion15: a model encoded in version 15 (no LEVL) loads
// with everything else as it was, its events counted towards the burn-in
// and an empty mean, which the events that follow fill; it encodes in
// version 16. A delta of version 11 leaves the base's level as it was.
func TestReadModelVersion15(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection, cfg.EventOrder = DwellLong, DefaultEventOrder()
	m, _ := New(cfg, NewSource(5))
	runScores(t, m, timedDwellEvents(int(levelBurnIn)+2000, 1))
	cp := m.FrozenCopy(nil)
	base := encode(t, cp)
	cp.MarkSaved()
	got, err := ReadModel(bytes.NewReader(withoutLevel(t, base, gapInstVersion)))
	if err != nil {
		t.Fatal(err)
	}
	if l := got.context.level; l != (levelStats{seen: levelBurnIn}) {
		t.Fatalf("level read from version 15: %+v, want the burn-in done and no mean", l)
	}
	got.context.level, got.context.countGap = m.context.level, m.context.countGap
	withPriorOf(got, m)
	if !bytes.Equal(encode(t, got), base) {
		t.Fatal("version 15 read back with other parts than the model's")
	}
	got.context.level = levelStats{seen: levelBurnIn}
	runScores(t, got, timedDwellEvents(levelMinMass, 2))
	if l := got.context.level; l.mass != levelMinMass || l.shift(0) == 0 {
		t.Errorf("after %d more events the level is %+v", levelMinMass, l)
	}
	if got.Encoding() != EncodingVersion {
		t.Errorf("encodes as version %d, want %d", got.Encoding(), EncodingVersion)
	}

	level := cp.context.level
	runScores(t, m, timedDwellEvents(10, 4))
	delta := withoutLevel(t, writeDelta(t, m.FrozenCopy(cp)), deltaGapInstVersion)
	applied, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)})
	if err != nil {
		t.Fatal(err)
	}
	if applied.context.level != level || level == m.context.level {
		t.Errorf("a version-11 delta: level %+v, want the base's %+v", applied.context.level, level)
	}
}
