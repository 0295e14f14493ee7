package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// bareEvents is timedEvents without the event types and with times
// closer together (a user's gaps spread from a second to past the
// instrument's 30 s): events of (user, item, time) only, the streams the
// gap instrument is for.
func bareEvents(n int, seed uint64) []Event {
	evs := timedEvents(n, seed)
	r := rand.New(rand.NewPCG(seed, 19))
	now := evs[0].TimeMS
	for j := range evs {
		now += 20 + r.Int64N(900)
		evs[j].Kind, evs[j].TimeMS = "", now
	}
	return evs
}

// withoutGapInstrument rewrites a model encoding of version 17 or a delta
// of version 13 into the given older version without the gap instrument,
// the level and the counted gaps' scale: GINS, LEVL and CGAP (the last
// context sections) left out.
func withoutGapInstrument(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	return withoutSection(t, withoutLevel(t, b, version), "GINS", version)
}

// TestReadModelVersion14: a model encoded in version 14 (no GINS) loads
// with its rank instrument and dwell gate as they were and an empty gap
// instrument, which learns from the events that follow; a delta of
// version 10 applies to it the same way.
func TestReadModelVersion14(t *testing.T) {
	readsOlderVersion(t, olderVersion{
		stream: bareEvents, strip: withoutGapInstrument, version: shortGapVersion, delta: deltaShortGapVersion,
		part:  "gap instrument",
		ready: func(m *Model) bool { return m.context.gap.stats.mass >= contextMinMass },
		kept: func(got, m *Model) bool {
			return got.context.rank == m.context.rank && got.context.inst == m.context.inst && got.context.gate == m.context.gate
		},
		empty:  func(m *Model) bool { return m.context.gap == (rankInstrument{}) },
		ranked: true,
	})
}

// TestGapInstrumentEncoding: a model whose gap instrument has fitted and
// moved its level offset encodes it (GINS), reads back to the same bytes
// and goes on scoring bit for bit as the model it was written from; a
// chain of deltas (version 11) restores it to the same bytes; a GINS that
// is not finite or out of range is refused. Since stop 72 a stream whose
// events all carry dwell and one of event types the order ranks apart
// fill it, as one of clicks only does.
func TestGapInstrumentEncoding(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection, cfg.EventOrder = DwellLong, DefaultEventOrder()
	instrumentRoundTrip(t, cfg, bareEvents, "GINS", func(m *Model) error {
		if g := &m.context.gap; g.offset == 0 || g.squares == 0 {
			return fmt.Errorf("the gap instrument has not fitted and moved: mass %.1f, offset %v", g.stats.mass, g.offset)
		} else if _, ok := g.fit(0.8, 0.8, rankSeparation, false, gapPCleanFloor); !ok {
			return fmt.Errorf("the gap instrument does not fit: mass %.1f", g.stats.mass)
		}
		return nil
	}, func(got, m *Model) error {
		if got.context.gap != m.context.gap {
			return fmt.Errorf("gap instrument %+v, want %+v", got.context.gap, m.context.gap)
		}
		return nil
	})

	m, _ := New(cfg, NewSource(11))
	runScores(t, m, bareEvents(2000, 1))
	b := encode(t, m)
	// A non-finite or out-of-range GINS is refused.
	refusesFields(t, b, "GINS", []badField{
		{len(new(instrumentStats).fields()), math.NaN(), "gap instrument not finite"},
		{len(new(instrumentStats).fields()) + 1, 4, "gap instrument out of range"},
	})

	clicks := bareEvents(2000, 1)
	for j := range clicks {
		clicks[j].Kind = "click"
	}
	dwelt := timedEvents(2000, 1)
	for j := range dwelt {
		dwelt[j].HasDwell, dwelt[j].DwellMS = true, 1000+int64(j%40)*900
	}
	for _, tc := range []struct {
		name   string
		stream []Event
		learns bool
	}{
		// Since stop 72 the gap reads the rank's events too, and dwell's
		// as far as dwell does not reach (readsGap).
		{"ranked types", timedEvents(2000, 1), true},
		{"dwell on every event", dwelt, true},
		{"clicks only", clicks, true},
	} {
		o, _ := New(cfg, NewSource(11))
		runScores(t, o, tc.stream)
		if learned := o.context.gap.stats.mass >= contextMinMass; learned != tc.learns || !learned && o.context.gap != (rankInstrument{}) {
			t.Errorf("%s stream: the gap instrument's mass %.1f, want it to learn: %v", tc.name, o.context.gap.stats.mass, tc.learns)
		}
	}
}

// gapStream is a stream of events that carry a gap and nothing else
// beside p_clean (prior): 80 % genuine; the gap (log(1 + seconds)) is
// shorter for noise when gapSays (genuine about 16 s, noise about 3 s),
// the same for both classes otherwise; p_clean is syntheticPClean's.
func gapStream(n int, pCleanRight, gapSays bool, seed uint64) (xs []contextFeatures, prior []float64, genuine []bool) {
	r := rand.New(rand.NewPCG(seed, 17))
	for range n {
		g := r.Float64() < 0.8
		gap := 2.8 + 0.7*r.NormFloat64()
		if gapSays && !g {
			gap = 1.5 + 0.8*r.NormFloat64()
		}
		x := contextFeatures{bucket: -1, hasZ: true, hasGap: true}
		x.z[gapFeature] = max(gap, 0)
		xs = append(xs, x)
		prior = append(prior, syntheticPClean(r, g, pCleanRight))
		genuine = append(genuine, g)
	}
	return xs, prior, genuine
}

// TestGapInstrumentWeighsPClean: on a stream with neither dwell nor an
// event type, the weight is p_clean until the gap instrument has the
// mass, then its blend with the instrument (gapWeight), stepped as
// Model.Step steps it. Where the gap carries the classes, the weight
// ranks genuine events above noisy ones whichever way p_clean ranks them,
// and above p_clean, whose slope takes its sign from the gap (bounded
// below by gapPCleanFloor); where it carries nothing, the instrument correlates
// with nothing, λ stays small and the weight ranks as p_clean does. The
// weight's mean stays near p_clean's (the level offset), and it is never
// NaN.
func TestGapInstrumentWeighsPClean(t *testing.T) {
	for _, tc := range []struct {
		name           string
		right, says    bool
		least, closeTo float64 // the weight's least ROC-AUC; within 0.01 of p_clean's if closeTo
	}{
		{"p_clean right, the gap says", true, true, 0.8, 0},
		{"p_clean backwards, the gap says", false, true, 0.88, 0},
		{"p_clean right, the gap says nothing", true, false, 0.7, 1},
	} {
		c := newContextModel(DefaultConfig())
		xs, prior, genuine := gapStream(30000, tc.right, tc.says, 5)
		var weights []float64
		var mean, meanPrior float64
		for i, x := range xs {
			r, ok := c.gapWeight(prior[i], prior[i], x, c.gap.pCleanShare())
			w, g := r.w, r.g
			if !ok {
				w = prior[i]
			}
			if math.IsNaN(w) || w <= 0 || w >= 1 {
				t.Fatalf("%s: event %d weight %v", tc.name, i, w)
			}
			weights = append(weights, w)
			if i >= len(xs)/2 {
				mean += w
				meanPrior += prior[i]
			}
			if ok {
				c.gap.followGap(g, prior[i])
				c.reach.learn(r.lambda)
			}
			c.learnGap(&x, prior[i])
		}
		if c.gap.stats.mass < contextMinMass {
			t.Fatalf("%s: the instrument did not learn", tc.name)
		}
		// Where the gap says, p_clean's slope takes p_clean's direction
		// from it: positive where p_clean ranks right, negative but not
		// below gapPCleanFloor where it ranks backwards.
		if f, ok := c.gap.fit(c.gap.pCleanShare(), c.gap.pCleanShare(), rankSeparation, false, gapPCleanFloor); !ok {
			t.Errorf("%s: the instrument does not fit", tc.name)
		} else if s := f.slope[0]; tc.says && (tc.right && !(s > 0) || !tc.right && !(s < 0 && s >= gapPCleanFloor)) {
			t.Errorf("%s: p_clean's slope %v, want %s", tc.name, s, map[bool]string{true: "> 0", false: fmt.Sprintf("in [%v, 0)", gapPCleanFloor)}[tc.right])
		}
		auc, pAUC := pairsRanked(weights, genuine), pairsRanked(prior, genuine)
		switch {
		case auc < tc.least:
			t.Errorf("%s: the weight ranks %.3f of pairs right (p_clean %.3f), want at least %.2f", tc.name, auc, pAUC, tc.least)
		case tc.closeTo == 0 && auc <= pAUC:
			t.Errorf("%s: the weight ranks %.3f of pairs right, not above p_clean's %.3f", tc.name, auc, pAUC)
		case tc.closeTo != 0 && math.Abs(auc-pAUC) > 0.01:
			t.Errorf("%s: the weight ranks %.3f of pairs right, p_clean %.3f: not within 0.01", tc.name, auc, pAUC)
		}
		n := float64(len(xs) - len(xs)/2)
		if d := math.Abs(mean-meanPrior) / n; d > 0.03 {
			t.Errorf("%s: the weight's mean over the second half is %.3f from p_clean's", tc.name, d)
		}
		t.Logf("%s: weight %.3f, p_clean %.3f", tc.name, auc, pAUC)
	}
}

// TestGapStepDoesNotAllocate: a warm model scoring events of (user, item,
// time) only, through the gap instrument, allocates nothing per event
// (TestStepDoesNotAllocate's rule for the other paths).
func TestGapStepDoesNotAllocate(t *testing.T) {
	cfg := Config{Mode: ModeBinary, Dim: 16, Negatives: 4, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256,
		TransitionUserOffset: true, DwellDirection: DwellLong, EventOrder: DefaultEventOrder()}
	m, err := New(cfg, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	evs := bareEvents(4000, 12)
	runScores(t, m, evs) // warm: every id known, refits done
	if _, ok := m.context.gap.fit(0.8, 0.8, rankSeparation, false, gapPCleanFloor); !ok {
		t.Fatalf("the gap instrument has not fitted: mass %.1f", m.context.gap.stats.mass)
	}
	j := 0
	var sc Score
	allocs := testing.AllocsPerRun(98, func() {
		m.Step(evs[j%len(evs)], &sc)
		j++
	})
	if allocs != 0 {
		t.Errorf("Step allocates %.1f times per event", allocs)
	}
}

// TestWeightSource: Score.Source names what formed the weight, once the
// model has learned: dwell's instrument on a stream with dwell, the
// type's rank on one of ranked types, and on one with neither the gap
// instrument where the gap carries the noise (it then holds at least half
// of the weight's log-odds); p_clean always in a plain model.
func TestWeightSource(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection, cfg.EventOrder = DwellLong, DefaultEventOrder()
	plain := cfg
	plain.Plain = true
	// bareEvents whose gaps carry the noise: an event off the user's
	// taste group (testStream's 20 % of uniform items) comes 1–3 s
	// after the user's previous event, the others 10–40 s after it.
	bounced := bareEvents(6000, 3)
	r := rand.New(rand.NewPCG(3, 21))
	last := map[string]int64{}
	now := bounced[0].TimeMS
	for j := range bounced {
		ev := &bounced[j]
		u, i := 0, 0
		fmt.Sscanf(ev.User, "u%d", &u)
		fmt.Sscanf(ev.Item, "i%d", &i)
		gap := int64(10_000 + r.IntN(30_000))
		if i/10 != u%4 {
			gap = int64(1000 + r.IntN(2000))
		}
		now += 50
		ev.TimeMS, ev.HasTime = max(now, last[ev.User]+gap), true
		now = max(now, ev.TimeMS-20_000)
		last[ev.User] = ev.TimeMS
	}
	for _, tc := range []struct {
		name   string
		cfg    Config
		stream []Event
		want   WeightSource
	}{
		{"dwell", cfg, timedDwellEvents(6000, 1), SourceDwell},
		{"ranked types", cfg, timedEvents(6000, 1), SourceEventType},
		{"neither, the gap carries the noise", cfg, bounced, SourceGap},
		{"plain", plain, timedDwellEvents(3000, 1), SourcePClean},
	} {
		m, err := New(tc.cfg, NewSource(5))
		if err != nil {
			t.Fatal(err)
		}
		scores := runScores(t, m, tc.stream)
		n := 0
		for _, sc := range scores[len(scores)/2:] {
			if sc.Source == tc.want {
				n++
			}
		}
		if half := len(scores) - len(scores)/2; n < half*9/10 {
			t.Errorf("%s: %d of the second half's %d weights from %v, want at least 90 %%", tc.name, n, half, tc.want)
		}
	}
}

// TestActivityEvidence: the user's activity weighs on the gap path in
// its stated direction only (activityEvidence). On a stream whose noise
// comes from the more active users and with the shorter gaps, a more
// active user's event gets less evidence, by at most activityCap per unit
// of log(1 + events), and the weight ranks better with it than without;
// where the active users are the genuine ones it gets none (the direction
// does not flip); where activity says nothing of the class nor moves with
// the gap, next to none.
func TestActivityEvidence(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shift float64 // the noise's mean activity less the genuine's
	}{{"the active are noisier", 1.2}, {"the active are genuine", -1.2}, {"activity says nothing", 0}} {
		c := newContextModel(DefaultConfig())
		xs, prior, genuine := gapStream(30000, true, tc.shift != 0, 7)
		r := rand.New(rand.NewPCG(7, 23))
		for i := range xs {
			a := 2.5 + 0.8*r.NormFloat64()
			if !genuine[i] {
				a += tc.shift
			}
			xs[i].z[activityFeature-1] = max(a, 0)
		}
		var with, without []float64
		for i, x := range xs {
			r, ok := c.gapWeight(prior[i], prior[i], x, c.gap.pCleanShare())
			w, g := r.w, r.g
			if ok {
				with = append(with, w)
				without = append(without, sigmoid(logOdds(w)-c.gap.activityEvidence(c.gap.pCleanShare(), gapMean(&c.gap), gapVariance(&c.gap), rankSeparation*math.Sqrt(gapVariance(&c.gap)), x)))
				c.gap.followGap(g, prior[i])
			}
			c.learnGap(&x, prior[i])
		}
		share := c.gap.pCleanShare()
		at := func(a float64) float64 {
			x := xs[0]
			x.z[activityFeature-1] = a
			return c.gap.activityEvidence(share, gapMean(&c.gap), gapVariance(&c.gap), rankSeparation*math.Sqrt(gapVariance(&c.gap)), x)
		}
		lo, hi := at(1.5), at(3.5)
		t.Logf("%s: evidence at 1.5 %+.3f, at 3.5 %+.3f; weight ranks %.4f with it, %.4f without",
			tc.name, lo, hi, pairsRanked(with, genuine[len(genuine)-len(with):]), pairsRanked(without, genuine[len(genuine)-len(without):]))
		switch {
		case math.IsNaN(lo) || math.IsNaN(hi) || lo-hi > 2*activityCap+1e-12:
			t.Errorf("%s: evidence %v at 1.5 and %v at 3.5, steeper than the cap", tc.name, lo, hi)
		case tc.shift > 0 && !(hi < lo):
			t.Errorf("%s: evidence %v at 1.5 and %v at 3.5, want less for the more active", tc.name, lo, hi)
		case tc.shift > 0 && pairsRanked(with, genuine[len(genuine)-len(with):]) <= pairsRanked(without, genuine[len(genuine)-len(without):]):
			t.Errorf("%s: the weight ranks no better with the activity", tc.name)
		case tc.shift < 0 && (lo != 0 || hi != 0):
			t.Errorf("%s: evidence %v and %v, want none", tc.name, lo, hi)
		case tc.shift == 0 && math.Abs(lo-hi) > 0.05:
			t.Errorf("%s: evidence %v and %v, want next to none", tc.name, lo, hi)
		}
	}
}

// gapMean and gapVariance are the gap's mean and variance in the gap
// instrument's moments, as gapWeight reads them.
func gapMean(r *rankInstrument) float64 { return r.stats.dwell / r.stats.mass }

func gapVariance(r *rankInstrument) float64 {
	m := gapMean(r)
	return r.squares/r.stats.mass - m*m
}

// TestPopularityEvidence: the item's popularity p weighs on the gap path
// in the direction the gap reads it (popularityEvidence), never in the
// classifier's. With p = 2 ± [genuine] + N(0, 0.6²) (a share of 0.8) on a
// stream whose gap carries the classes, the evidence rises with p where
// the genuine events' items are the more popular and falls where they are
// the less, its slope within popularityCap per unit of p (the classes'
// own log-odds slope is 1/0.36 = 2.8), and the weight ranks better with
// it than without. Where p_clean reads the popularity as taste (its
// log-odds rises by 0.8 a unit of p) on a stream whose popular items are
// the noisy ones and whose gap says nothing of the class, the
// classifier's reading (classifierPopularity) would rise with p, and the
// gap's gives next to nothing. Where p says nothing it adds next to
// nothing; a catalogue of new items (p constant) adds nothing. The
// evidence is never NaN.
func TestPopularityEvidence(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gapSays   bool
		popular   float64 // p's shift of the genuine events' items
		taste     float64 // logit(p_clean)'s slope in p
		constant  bool
		direction int // the sign of the evidence's slope; 0: next to none
	}{
		{"the popular are genuine", true, 1, 0, false, 1},
		{"the popular are noisy", true, -1, 0, false, -1},
		{"the classifier reads popularity as taste, the gap nothing", false, -1, 0.8, false, 0},
		{"p says nothing", true, 0, 0, false, 0},
		{"every item new", true, 0, 0, true, 0},
	} {
		c := newContextModel(DefaultConfig())
		xs, prior, genuine := gapStream(30000, true, tc.gapSays, 13)
		r := rand.New(rand.NewPCG(13, 29))
		for i := range xs {
			p := 2 + 0.6*r.NormFloat64()
			if genuine[i] {
				p += tc.popular
			}
			if tc.constant {
				p = 0
			}
			xs[i].z[itemFeature-1] = p
			prior[i] = sigmoid(logOdds(prior[i]) + tc.taste*(p-2))
		}
		var with, without []float64
		var scored []bool
		var slope, classifier float64
		for i, x := range xs {
			r, ok := c.gapWeight(prior[i], prior[i], x, c.gap.pCleanShare())
			if ok {
				share := c.gap.pCleanShare()
				e := c.gap.popularityEvidence(share, gapMean(&c.gap), gapVariance(&c.gap), rankSeparation*math.Sqrt(gapVariance(&c.gap)), x)
				if math.IsNaN(e) || math.IsInf(e, 0) {
					t.Fatalf("%s: evidence %v", tc.name, e)
				}
				if i == len(xs)-1 {
					x0, x1 := x, x
					x0.z[itemFeature-1], x1.z[itemFeature-1] = 1, 3
					at := func(x contextFeatures) float64 {
						return c.gap.popularityEvidence(share, gapMean(&c.gap), gapVariance(&c.gap), rankSeparation*math.Sqrt(gapVariance(&c.gap)), x)
					}
					slope = (at(x1) - at(x0)) / 2
					classifier = (c.gap.classifierPopularity(x1) - c.gap.classifierPopularity(x0)) / 2
					t.Logf("%s: slope of the evidence %+.4f per unit of p (the classifier's reading %+.4f)", tc.name, slope, classifier)
				}
				with = append(with, r.w)
				without = append(without, sigmoid(logOdds(r.w)-e))
				scored = append(scored, genuine[i])
				c.gap.followGap(r.g, prior[i])
			}
			c.learnGap(&x, prior[i])
		}
		aucWith, aucWithout := pairsRanked(with, scored), pairsRanked(without, scored)
		t.Logf("%s: the weight ranks %.4f with p, %.4f without", tc.name, aucWith, aucWithout)
		switch {
		case tc.constant && slope != 0:
			t.Errorf("%s: slope %v, want 0", tc.name, slope)
		case math.Abs(slope) > popularityCap+1e-12:
			t.Errorf("%s: slope %v, beyond the cap %v", tc.name, slope, popularityCap)
		case tc.direction == 0 && math.Abs(slope) > 0.05:
			t.Errorf("%s: slope %v, want next to none", tc.name, slope)
		case tc.direction != 0 && !(slope*float64(tc.direction) > 0.1):
			t.Errorf("%s: slope %v, want its sign %d", tc.name, slope, tc.direction)
		case tc.direction != 0 && !(aucWith > aucWithout):
			t.Errorf("%s: the weight ranks %.4f with p, %.4f without: want better", tc.name, aucWith, aucWithout)
		case tc.taste > 0 && !(classifier > 0.1):
			t.Errorf("%s: the classifier's reading %v: the case does not test what it says", tc.name, classifier)
		}
	}
}
