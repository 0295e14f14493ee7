package online

import (
	"bytes"
	"io"
	"math"
	"math/rand/v2"
	"testing"
)

// withoutGapReach rewrites a model encoding or a delta into the given
// older version without what version 19 (delta 15) added: GLAM, the gap's
// reach, and the items' priors (the end of ITEM and IPRI), and what came
// after (withoutTail).
func withoutGapReach(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	b = withoutPriorRows(t, withoutTail(t, b, version), "ITEM")
	return withoutSection(t, withoutSection(t, b, "IPRI", version), "GLAM", version)
}

// TestGapReachKnownValues: the reach is the running mean of λ, counting up
// to gapReachWindow events and then moving as an exponential mean, and the
// blend is the larger of λ and that mean.
func TestGapReachKnownValues(t *testing.T) {
	var r gapReach
	for range 300 {
		r.learn(1)
	}
	for range 100 {
		r.learn(0.2)
	}
	if want := (300 + 100*0.2) / 400; math.Abs(r.mean-want) > 1e-12 || r.n != 400 {
		t.Fatalf("mean %v of %v events, want %v of 400", r.mean, r.n, want)
	}
	if b := r.blend(0.1); b != r.mean {
		t.Errorf("blend of λ 0.1: %v, want the mean %v", b, r.mean)
	}
	if b := r.blend(0.95); b != 0.95 {
		t.Errorf("blend of λ 0.95: %v, want 0.95", b)
	}
	r = gapReach{mean: 0.5, n: gapReachWindow}
	r.learn(1)
	if want := 0.5 + 0.5/gapReachWindow; r.n != gapReachWindow || math.Abs(r.mean-want) > 1e-15 {
		t.Errorf("past the window: mean %v of %v events, want %v of %v", r.mean, r.n, want, gapReachWindow)
	}
}

// TestGapReachKeepsTheGap: on a stream whose gaps say the class
// throughout while p_clean, backwards in the first half, says nothing in
// the second (the turn of a mid-sparse catalogue, gapreach.go), λ falls
// with p_clean's correlation, the blend stays at λ's running mean, and the
// weight keeps ranking by the gap: above a model that blends by λ alone,
// and within reach of the gap's own ranking. Where the gaps say nothing,
// the reach stays small and the weight ranks as p_clean does
// (TestGapInstrumentWeighsPClean).
func TestGapReachKeepsTheGap(t *testing.T) {
	first, firstPrior, firstGenuine := gapStream(20000, false, true, 5)
	second, _, secondGenuine := gapStream(20000, true, true, 6)
	r := rand.New(rand.NewPCG(6, 6))
	secondPrior := make([]float64, len(second))
	for i := range secondPrior {
		secondPrior[i] = syntheticPClean(r, r.Float64() < 0.8, true) // of no class
	}
	xs := append(first, second...)
	prior := append(firstPrior, secondPrior...)
	genuine := append(firstGenuine, secondGenuine...)

	var aucs [2]float64
	var lambda, blend float64
	for arm, learns := range []bool{true, false} {
		c := newContextModel(DefaultConfig())
		var weights, gaps []float64
		var tail []bool
		for i, x := range xs {
			reading, ok := c.gapWeight(prior[i], prior[i], x, c.gap.pCleanShare())
			w := reading.w
			if !ok {
				w = prior[i]
			}
			if math.IsNaN(w) || w <= 0 || w >= 1 {
				t.Fatalf("event %d weight %v", i, w)
			}
			if i >= len(xs)-10000 {
				weights = append(weights, w)
				gaps = append(gaps, x.z[gapFeature])
				tail = append(tail, genuine[i])
				if learns {
					lambda += reading.lambda / 10000
					blend += reading.blend / 10000
				}
			}
			if ok {
				c.gap.followGap(reading.g, prior[i])
				if learns {
					c.reach.learn(reading.lambda)
				}
			}
			c.learnGap(&x, prior[i])
		}
		aucs[arm] = pairsRanked(weights, tail)
		if learns {
			gapAUC := pairsRanked(gaps, tail)
			t.Logf("last 10,000 events: λ %.3f, blend %.3f, weight %.3f, the gap alone %.3f", lambda, blend, aucs[0], gapAUC)
			if !(lambda < 0.5 && blend > lambda+0.2) {
				t.Errorf("λ %.3f and the blend %.3f: want λ below 0.5, the blend 0.2 above it", lambda, blend)
			}
			if aucs[0] < gapAUC-0.03 {
				t.Errorf("the weight ranks %.3f, the gap alone %.3f: more than 0.03 below", aucs[0], gapAUC)
			}
		}
	}
	t.Logf("by λ alone: %.3f", aucs[1])
	if aucs[0] < aucs[1]+0.03 {
		t.Errorf("the weight ranks %.3f with the reach, %.3f by λ alone: want 0.03 more", aucs[0], aucs[1])
	}
}

// TestGapReachEncoding: the reach and the items' priors (version 19's
// additions) read back as written; a model of version 18 reads with an
// empty reach and no item's prior, nothing else changed; a delta of
// version 14 leaves the base's, one of version 15 carries them; a reach or
// an item's prior no stream gives is refused.
func TestGapReachEncoding(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	m, _ := New(cfg, NewSource(5))
	evs := bareEvents(4000, 3)
	runScores(t, m, evs[:3000])
	if m.context.reach.n == 0 {
		t.Fatal("the reach learned nothing")
	}
	cp := m.FrozenCopy(nil)
	base := encode(t, cp)
	cp.MarkSaved()
	got, err := ReadModel(bytes.NewReader(base))
	if err != nil {
		t.Fatal(err)
	}
	if got.context.reach != m.context.reach || got.context.itemLevel != m.context.itemLevel || !equalFloats(got.itemPriors, m.itemPriors) {
		t.Fatal("the reach or the items' priors read back differ")
	}
	if m.context.itemLevel.n == 0 || m.itemPriors[userPriorWidth*int(m.items.base)+2] == 0 {
		t.Fatal("nothing learned into the items' priors")
	}

	old, err := ReadModel(bytes.NewReader(withoutGapReach(t, base, userPriorVersion)))
	if err != nil {
		t.Fatal(err)
	}
	if old.context.reach != (gapReach{}) || old.context.itemLevel != (priorLevel{}) || len(old.itemPriors) != len(m.itemPriors) {
		t.Fatalf("version 18 read with a reach %+v, an item prior level %+v and %d item prior slots", old.context.reach, old.context.itemLevel, len(old.itemPriors))
	}
	for _, v := range old.itemPriors {
		if v != 0 {
			t.Fatal("version 18 read with an item's prior learned")
		}
	}
	withReachOf(old, m)
	if !bytes.Equal(encode(t, old), base) {
		t.Fatal("version 18 read back with other parts than the model's")
	}

	reach, itemPriors := cp.context.reach, append([]float64(nil), cp.itemPriors...)
	runScores(t, m, evs[3000:])
	if m.context.reach == reach {
		t.Fatal("the reach learned nothing from 1,000 more events")
	}
	delta := withoutGapReach(t, writeDelta(t, m.FrozenCopy(cp)), deltaPriorVersion)
	applied, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)})
	if err != nil {
		t.Fatal(err)
	}
	if applied.context.reach != reach || !equalFloats(applied.itemPriors[:len(itemPriors)], itemPriors) {
		t.Errorf("a version-14 delta changed the base's reach (to %+v) or its items' priors", applied.context.reach)
	}
	full, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(writeDelta(t, m.FrozenCopy(cp)))})
	if err != nil {
		t.Fatal(err)
	}
	if full.context.reach != m.context.reach || full.context.itemLevel != m.context.itemLevel || !equalFloats(full.itemPriors, m.itemPriors) {
		t.Error("a delta did not carry the reach and the items' priors")
	}

	refusesPriorCount(t, base, writeDelta(t, m.FrozenCopy(cp)), "ITEM", "item")

	refusesFields(t, base, "IPRI", []badField{
		{0, 1.5, "item prior level"},
		{2, -1, "item prior level"},
		{3, 0.3, "item prior level"},
	})
	refusesFields(t, base, "GLAM", []badField{
		{0, 1.5, "gap reach"},
		{0, math.NaN(), "gap reach"},
		{1, -1, "gap reach"},
		{1, 2 * gapReachWindow, "gap reach"},
	})
}

// withReachOf gives got what version 19 added to m, the gap's reach and
// the items' priors, version 20 the tail and version 21 the bursts' mixture.
func withReachOf(got, m *Model) {
	got.context.reach, got.context.itemLevel, got.context.tail, got.context.burst = m.context.reach, m.context.itemLevel, m.context.tail, m.context.burst
	got.itemPriors = append([]float64(nil), m.itemPriors...)
}
