package online

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// contextStream draws n events of which a share noise is noise. Genuine
// events have log-dwell ~ N(genuineMean, 0.5) and type "click"; noisy ones
// N(noiseMean, 0.5) and type "click" or "view" evenly. The prior (the
// classifier's p_clean) is weakly informative: 0.75 for genuine events,
// 0.65 for noise. The event types have the slots of streamKinds.
func contextStream(n int, noise, genuineMean, noiseMean float64, seed uint64) (xs []contextFeatures, prior []float64, genuine []bool) {
	r := rand.New(rand.NewPCG(seed, 1))
	rz := rand.New(rand.NewPCG(seed, 2)) // the instrument's further features: noise
	names := contextModel{types: slices.Clone(streamKinds)}
	for range n {
		g := r.Float64() >= noise
		mean, p, kind := genuineMean, 0.75, "click"
		if !g {
			mean, p = noiseMean, 0.65
			if r.IntN(2) == 0 {
				kind = "view"
			}
		}
		dwell := int64(math.Expm1(mean + 0.5*r.NormFloat64()))
		x := names.features(&Event{DwellMS: max(dwell, 0), HasDwell: true, Kind: kind}, ModeBinary)
		x.z, x.hasZ = [instrumented - 1]float64{rz.NormFloat64(), rz.NormFloat64(), rz.NormFloat64()}, true
		xs = append(xs, x)
		prior = append(prior, p)
		genuine = append(genuine, g)
	}
	return xs, prior, genuine
}

// runContext scores each event (test-then-train) with an empty context
// part and returns the weights and the share of pairs (genuine, noise)
// ranked right over the second half.
func runContext(xs []contextFeatures, prior []float64, genuine []bool) (weights []float64, auc float64) {
	return runContextFrom(&contextModel{}, xs, prior, genuine)
}

// runContextFrom is runContext from the statistics of c.
// Each event is scored as Model.Step scores it once the context is
// informed, the rank instrument included where c has an event order.
func runContextFrom(c *contextModel, xs []contextFeatures, prior []float64, genuine []bool) (weights []float64, auc float64) {
	for i, x := range xs {
		w, ranked := prior[i], pathAnchored
		if c.informed() {
			w, ranked = c.posterior(prior[i], x, 0)
		}
		weights = append(weights, w)
		c.learn(x, w, prior[i], ranked)
	}
	return weights, pairsRanked(weights, genuine)
}

// pairsRanked is the share of (genuine, noise) pairs that weights rank
// right, ties counting half, over a sample of the pairs of the second
// half of the stream.
func pairsRanked(weights []float64, genuine []bool) float64 {
	half := len(weights) / 2
	var right, pairs float64
	for i := half; i < len(weights); i += 7 {
		for j := half; j < len(weights); j += 11 {
			if genuine[i] && !genuine[j] {
				pairs++
				switch {
				case weights[i] > weights[j]:
					right++
				case weights[i] == weights[j]:
					right += 0.5
				}
			}
		}
	}
	return right / pairs
}

// TestContextLearnsEitherDirection: the dwell of genuine events is long in
// one stream and short in the other. The prior is flat but for a weak
// anchor on one event in five; the anchored mixture learns the direction
// from it in both streams (none is assumed), so the weight ranks genuine
// events above noise.
func TestContextLearnsEitherDirection(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		genuineMean, noiseMean float64
	}{
		{"long dwell genuine", 10, 7},
		{"short dwell genuine", 7, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xs, prior, genuine := contextStream(20000, 0.2, tc.genuineMean, tc.noiseMean, 3)
			for i := range prior {
				prior[i] = 0.7 // an uninformative prior: only the context can rank
				if i%5 == 0 {
					prior[i] = map[bool]float64{true: 0.75, false: 0.65}[genuine[i]] // a weak anchor on a fifth
				}
			}
			_, auc := runContext(xs, prior, genuine)
			if auc < 0.9 {
				t.Errorf("ROC-AUC of the weight %.3f, want ≥ 0.9", auc)
			}
		})
	}
}

// TestContextKnownMeans: on a stream with known class-conditional dwell,
// the statistics converge to the classes' means.
func TestContextKnownMeans(t *testing.T) {
	xs, prior, genuine := contextStream(30000, 0.2, 10, 7, 5)
	var c contextModel
	for i, x := range xs {
		c.learn(x, c.weight(prior[i], x), prior[i], pathAnchored)
	}
	_ = genuine
	for k, want := range []float64{7, 10} {
		if got := c.em.dwellSum[k] / c.em.dwellMass[k]; math.Abs(got-want) > 0.3 {
			t.Errorf("class %d: mean log dwell %.3f, want %.1f ± 0.3", k, got, want)
		}
	}
	// The event type: noise is half "view", genuine never.
	c.types = slices.Clone(streamKinds)
	view := c.features(&Event{Kind: "view"}, ModeBinary)
	if e := c.evidence(view); e > -1 {
		t.Errorf("evidence of a view %.3f, want clearly negative (noise)", e)
	}
}

// TestContextNeutralWithout: an empty model, and one that has only seen
// events without dwell or type, give exactly p_clean; once the context
// is informed, an event without dwell or type gets p_clean's log-odds
// drawn towards the mean p_clean by pCleanTemper and nothing else; dwell
// mode never reads dwell (it is the label there).
func TestContextNeutralWithout(t *testing.T) {
	xs, prior, _ := contextStream(5000, 0.2, 10, 7, 7)
	var c contextModel
	if w := c.weight(0.8, xs[0]); math.Abs(w-0.8) > 1e-12 {
		t.Errorf("empty statistics: weight %v, want p_clean 0.8", w)
	}
	bare := ctxOf(&Event{}, ModeBinary)
	for i := range 1000 {
		c.learn(bare, c.weight(prior[i], bare), prior[i], pathAnchored)
	}
	if w := c.weight(0.8, bare); math.Abs(w-0.8) > 1e-12 {
		t.Errorf("after 1000 events without context: weight %v, want p_clean 0.8", w)
	}
	for i, x := range xs {
		c.learn(x, c.weight(prior[i], x), prior[i], pathAnchored)
	}
	// The anchor's genuine share is the mean prior: 0.8·0.75 + 0.2·0.65.
	mean := 0.0
	for _, p := range prior {
		mean += p / float64(len(prior))
	}
	if got := sigmoid(c.anchor.share()); math.Abs(got-mean) > 0.01 {
		t.Errorf("anchor's genuine share %.4f, want about the mean p_clean %.4f", got, mean)
	}
	m := c.anchor.share()
	want := sigmoid(m + pCleanTemper*(math.Log(0.8/0.2)-m))
	if w := c.weight(0.8, bare); math.Abs(w-want) > 1e-12 {
		t.Errorf("no dwell, no type: weight %v, want p_clean tempered %v", w, want)
	}
	if x := ctxOf(&Event{DwellMS: 5, HasDwell: true}, ModeDwell); x.hasDwell {
		t.Error("dwell mode reads dwell as context")
	}
	for _, p := range []float64{0, 1, 1e-300} {
		if w := c.weight(p, xs[1]); math.IsNaN(w) || w < 0 || w > 1 {
			t.Errorf("p_clean %v: weight %v", p, w)
		}
	}
}

// TestContextDoesNotFlip: the classifier's p_clean first points the wrong
// way (noise looks cleaner), then weakly the right way. EM, fitted to its
// own posterior, settles on the wrong direction in the first phase and
// would keep it; the anchor statistics, fitted to p_clean alone, turn with
// p_clean, and the weight follows them, so it ranks genuine events above
// noise once p_clean does.
func TestContextDoesNotFlip(t *testing.T) {
	xs, _, genuine := contextStream(40000, 0.2, 10, 7, 11)
	prior := make([]float64, len(xs))
	for i := range prior {
		switch {
		case i < 10000 && !genuine[i]:
			prior[i] = 0.6 // the wrong way
		case i >= 10000 && genuine[i]:
			prior[i] = 0.52 // weakly the right way
		default:
			prior[i] = 0.5
		}
	}
	var c contextModel
	for i, x := range xs[:10000] {
		c.learn(x, c.weight(prior[i], x), prior[i], pathAnchored)
	}
	if d := c.em.dwellDirection(); d >= 0 {
		t.Fatalf("after the first phase EM's genuine class has the longer dwell (%.2f): the test does not set up a flip", d)
	}
	_, auc := runContextFrom(&c, xs[10000:], prior[10000:], genuine[10000:])
	if d := c.em.dwellDirection(); d >= 0 {
		t.Logf("EM turned by itself (%.2f)", d)
	}
	if auc < 0.9 {
		t.Errorf("ROC-AUC of the weight over the second half of the second phase %.3f, want ≥ 0.9", auc)
	}
}

// streamKinds names contextStream's event-type slots.
var streamKinds = []string{"click", "view"}

// ctxOf is a fresh context model's features of ev.
func ctxOf(ev *Event, mode string) contextFeatures {
	var c contextModel
	return c.features(ev, mode)
}

// TestContextKeep: the statistics' window starts at contextMinWindow,
// grows with their mass to about a quarter of the events seen, and stays at
// contextWindow once it gets there, where the mass settles at
// contextWindow.
func TestContextKeep(t *testing.T) {
	if got, want := contextKeep(0), 1-1.0/contextMinWindow; got != want {
		t.Errorf("keep of empty statistics %v, want %v", got, want)
	}
	if got, want := contextKeep(1e9), 1-1.0/contextWindow; got != want {
		t.Errorf("keep of old statistics %v, want %v", got, want)
	}
	x := contextFeatures{logDwell: 8, hasDwell: true, bucket: 0}
	var s contextStats
	for n := 1; n <= 120000; n++ {
		s.learn(x, 0.7, nil)
		mass := s.dwellMass[0] + s.dwellMass[1]
		if s.typeTotal[0]+s.typeTotal[1] != mass {
			t.Fatalf("event %d: type mass %v, dwell mass %v: the features share one schedule", n, s.typeTotal[0]+s.typeTotal[1], mass)
		}
		switch n {
		case 5000, 15000:
			if lo, hi := 0.19*float64(n), 0.21*float64(n); mass < lo || mass > hi {
				t.Errorf("mass after %d events %.0f, want %.0f to %.0f (about n/5)", n, mass, lo, hi)
			}
		case 120000:
			if math.Abs(mass-contextWindow) > 5 {
				t.Errorf("mass after %d events %.1f, want %d ± 5", n, mass, contextWindow)
			}
		}
	}
	if got := s.dwellSum[1] / s.dwellMass[1]; math.Abs(got-8) > 1e-9 {
		t.Errorf("mean log dwell %v, want 8", got)
	}
}

// TestDwellMixtureKnownMeans: on log dwell drawn from two Gaussians of
// known means, shares and spread, the dwell mixture converges to them,
// its component 1 is the longer, and its evidence rises with dwell.
func TestDwellMixtureKnownMeans(t *testing.T) {
	xs, _, _ := contextStream(30000, 0.3, 10, 7, 11) // σ 0.5 in both classes
	var m dwellMixture
	for _, x := range xs {
		m.learn(x.logDwell, nil)
	}
	mu0, mu1, v := m.params()
	if math.Abs(mu0-7) > 0.2 || math.Abs(mu1-10) > 0.2 {
		t.Errorf("means %.3f, %.3f, want 7 and 10 ± 0.2", mu0, mu1)
	}
	if math.Abs(v-0.25) > 0.05 {
		t.Errorf("variance %.3f, want 0.25 ± 0.05", v)
	}
	if share := m.mass[1] / (m.mass[0] + m.mass[1]); math.Abs(share-0.7) > 0.05 {
		t.Errorf("share of the longer component %.3f, want 0.7 ± 0.05", share)
	}
	prev := math.Inf(-1)
	for x := 5.0; x <= 12; x += 0.5 {
		e := m.evidence(x)
		if e <= prev {
			t.Fatalf("evidence at %.1f is %.3f, not above %.3f at %.1f", x, e, prev, x-0.5)
		}
		prev = e
	}
	if e := m.evidence(8.5); math.Abs(e) > 0.2 {
		t.Errorf("evidence midway between the means %.3f, want about 0", e)
	}
}

// TestDwellMixtureStartsApart: the components are ordered from the first
// events on (component 1 the longer), whatever order the dwells come in,
// and a mixture that has seen no dwell gives no evidence.
func TestDwellMixtureStartsApart(t *testing.T) {
	var empty dwellMixture
	if e := empty.evidence(9); e != 0 {
		t.Errorf("evidence of an empty mixture %v, want 0", e)
	}
	for _, first := range []float64{12, 3} {
		m := dwellMixture{}
		m.learn(first, nil)
		for j := range 400 {
			m.learn(float64(3+9*(j%2)), nil) // 3, 12, 3, 12, ...
			if m.sum[0]*m.mass[1] > m.sum[1]*m.mass[0] {
				t.Fatalf("first %v, event %d: component 0's mean above component 1's", first, j)
			}
		}
		if mu0, mu1, _ := m.params(); math.Abs(mu0-3) > 0.01 || math.Abs(mu1-12) > 0.01 {
			t.Errorf("first %v: means %.3f, %.3f, want 3 and 12", first, mu0, mu1)
		}
	}
}

// TestDwellLongAgainstABackwardAnchor: where the classifier's weak
// signal points the wrong way, the anchored statistics learn dwell
// backwards with it ("learned": the weight ranks noise first) and the
// dwell mixture does not ("long": it ranks by dwell). The price of the
// premise is the other stream: where short dwell is genuine, "long" ranks
// it backwards and "learned" does not (TestContextLearnsEitherDirection).
func TestDwellLongAgainstABackwardAnchor(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		genuineMean, noiseMean float64
		long                   bool
		atLeast, below         float64
	}{
		{"long dwell genuine, long", 10, 7, true, 0.9, 1.01},
		{"long dwell genuine, learned", 10, 7, false, 0, 0.5},
		{"short dwell genuine, long", 7, 10, true, 0, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xs, prior, genuine := contextStream(20000, 0.2, tc.genuineMean, tc.noiseMean, 3)
			for i := range prior {
				prior[i] = 0.7
				if i%5 == 0 {
					prior[i] = map[bool]float64{true: 0.65, false: 0.75}[genuine[i]] // a weak anchor, backwards
				}
			}
			_, auc := runContextFrom(&contextModel{long: tc.long}, xs, prior, genuine)
			if auc < tc.atLeast || auc >= tc.below {
				t.Errorf("ROC-AUC of the weight %.3f, want in [%.2f, %.2f)", auc, tc.atLeast, tc.below)
			}
		})
	}
}

// TestReadModelRefusesBadDwellMixture: a model whose dwell mixture is not
// finite, has a negative mass or has its components out of order loads
// neither whole nor from a delta.
func TestReadModelRefusesBadDwellMixture(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	for name, spoil := range map[string]func(*dwellMixture){
		"NaN":          func(m *dwellMixture) { m.squares = math.NaN() },
		"Inf":          func(m *dwellMixture) { m.sum[1] = math.Inf(1) },
		"negative":     func(m *dwellMixture) { m.mass[0] = -1 },
		"out of order": func(m *dwellMixture) { m.sum[0], m.sum[1] = m.sum[1], m.sum[0] },
	} {
		m, base, delta := spoiledDelta(t, cfg, func(m *Model) { spoil(&m.context.mix) })
		if _, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: a delta: %v, want ErrCorrupt", name, err)
		}
		if _, err := ReadModel(bytes.NewReader(encode(t, m))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "dwell mixture") {
			t.Errorf("%s: a model: %v, want ErrCorrupt naming the dwell mixture", name, err)
		}
	}
}

// TestInstrumentKnownSlopes: on features whose class means and
// within-class covariance are known, independent of log dwell given the
// class, the instrument recovers each feature's class separation from its
// covariance with dwell alone (no label), signs included, and its slopes
// are the linear discriminant's, W⁻¹Δ; p_clean's slope is kept within
// [floor, 1], and with p_clean alone the fit is the one-feature discriminant.
func TestInstrumentKnownSlopes(t *testing.T) {
	const share, dx = 0.8, 3.0
	delta := [instrumented]float64{0.6, -1, 0.5, 0, 0.8} // genuine minus noise
	// Within the classes: unit variances, z₁ and z₂ correlated 0.5, z₁
	// and the gap z₄ −0.3 (an active user's gaps are shorter), so z₂ and
	// z₄ −0.15; z₃ says nothing.
	w := [instrumented][instrumented]float64{{1, 0, 0, 0, 0}, {0, 1, 0.5, 0, -0.3}, {0, 0.5, 1, 0, -0.15}, {0, 0, 0, 1, 0}, {0, -0.3, -0.15, 0, 1}}
	var want [instrumented]float64 // W⁻¹Δ
	if !solveSymmetric(&w, &delta, &want, instrumented) {
		t.Fatal("the known covariance is not positive definite")
	}
	r := rand.New(rand.NewPCG(21, 1))
	var s instrumentStats
	for range 40000 {
		g := 0.0
		if r.Float64() < share {
			g = 1
		}
		x := 7 + dx*g + 0.5*r.NormFloat64()
		e1, e2 := r.NormFloat64(), r.NormFloat64()
		v := [instrumented]float64{
			-1 + delta[0]*g + r.NormFloat64(),
			2 + delta[1]*g + e1,
			delta[2]*g + 0.5*e1 + math.Sqrt(0.75)*e2,
			5 + r.NormFloat64(),
			3 + delta[4]*g - 0.3*e1 + math.Sqrt(0.91)*r.NormFloat64(),
		}
		s.learn(x, v[0], [instrumented - 1]float64{v[1], v[2], v[3], v[4]}, nil)
	}
	f := s.fit(share, share, dx, instrumented, 0)
	t.Logf("slopes %.3f want %.3f mid %.3f", f.slope, want, f.mid)
	for i := range instrumented {
		if math.Abs(f.slope[i]-want[i]) > 0.15 {
			t.Errorf("slope %d: %.3f, want %.3f ± 0.15 (all %.3f, want %.3f)", i, f.slope[i], want[i], f.slope, want)
		}
	}
	// The midpoint of the class means: −1 + 0.3, 2 − 0.5, 0.25, 5, 3.4.
	for i, m := range [instrumented]float64{-0.7, 1.5, 0.25, 5, 3.4} {
		if math.Abs(f.mid[i]-m) > 0.15 {
			t.Errorf("midpoint %d: %.3f, want %.3f ± 0.15", i, f.mid[i], m)
		}
	}
	if one := s.fit(share, share, dx, 1, 0); one.features != 1 || math.Abs(one.slope[0]-delta[0]) > 0.15 {
		t.Errorf("p_clean alone: %d features, slope %.3f, want 1 and %.3f ± 0.15", one.features, one.slope[0], delta[0])
	}
	// The level moves the midpoints only: at ½ they are the features'
	// means (−1 + 0.8·0.6, 2 − 0.8, 0.4, 5, 3 + 0.8·0.8), and the slopes
	// stay.
	half := s.fit(share, 0.5, dx, instrumented, 0)
	for i, m := range [instrumented]float64{-0.52, 1.2, 0.4, 5, 3.64} {
		if half.slope[i] != f.slope[i] || math.Abs(half.mid[i]-m) > 0.15 {
			t.Errorf("level ½, feature %d: slope %.3f (want %.3f), midpoint %.3f (want %.3f ± 0.15)", i, half.slope[i], f.slope[i], half.mid[i], m)
		}
	}
	// The same separation backwards: p_clean's slope is held at 0.
	back := s
	back.cross[0] = -back.cross[0] + 2*back.sum[0]*back.dwell/back.mass // cov(a, x) negated
	if f := back.fit(share, share, dx, instrumented, 0); f.slope[0] != 0 {
		t.Errorf("p_clean ranking against dwell: slope %.3f, want 0", f.slope[0])
	}
	// With a floor below 0 (the gap instrument's) the fit turns p_clean
	// round: alone, by its separation (−0.6) where the floor allows it,
	// by the floor where it does not.
	if f := back.fit(share, share, dx, 1, -1); math.Abs(f.slope[0]+delta[0]) > 0.15 {
		t.Errorf("p_clean backwards, floor −1: slope %.3f, want %.3f ± 0.15", f.slope[0], -delta[0])
	}
	if f := back.fit(share, share, dx, 1, gapPCleanFloor); f.slope[0] != gapPCleanFloor {
		t.Errorf("p_clean backwards, floor %v: slope %.3f, want the floor", gapPCleanFloor, f.slope[0])
	}
}

// TestInstrumentWeighsPCleanByDwell: with dwell read as
// longer-is-genuine, the weight p_clean gets in the posterior is what
// dwell says it carries: none for a p_clean that ranks short dwell as
// genuine, nearly none for one that says nothing of dwell, a clear
// weight for one that agrees; with dwell learned the instrument learns
// nothing and is not read.
func TestInstrumentWeighsPCleanByDwell(t *testing.T) {
	xs, _, genuine := contextStream(20000, 0.2, 10, 7, 13)
	r := rand.New(rand.NewPCG(13, 3))
	for _, tc := range []struct {
		name     string
		long     bool
		prior    func(genuine bool) float64
		min, max float64
	}{
		{"backwards", true, func(g bool) float64 { return map[bool]float64{true: 0.6, false: 0.9}[g] }, 0, 0},
		{"agrees", true, func(g bool) float64 { return map[bool]float64{true: 0.9, false: 0.6}[g] }, 0.5, 1},
		{"says nothing", true, func(bool) float64 { return 0.5 + 0.4*r.Float64() }, 0, 0.1},
		{"backwards, learned", false, func(g bool) float64 { return map[bool]float64{true: 0.6, false: 0.9}[g] }, -1, -1},
	} {
		c := contextModel{long: tc.long}
		for i, x := range xs {
			p := tc.prior(genuine[i])
			c.learn(x, c.weight(p, x), p, pathAnchored)
		}
		share := sigmoid(c.anchor.share())
		f, ok := c.instrument(share, share, true)
		switch {
		case !tc.long:
			if ok || c.inst.mass != 0 {
				t.Errorf("%s: instrument fitted (%v) or learned (mass %v)", tc.name, ok, c.inst.mass)
			}
		case !ok:
			t.Errorf("%s: no instrument after %d events", tc.name, len(xs))
		case f.slope[0] < tc.min || f.slope[0] > tc.max:
			t.Errorf("%s: p_clean's slope %.3f, want in [%.1f, %.1f]", tc.name, f.slope[0], tc.min, tc.max)
		}
	}
}

// TestReadModelVersion8: a model encoded in version 8 (DMIX with the
// three statistics of a correlation since dropped, no DINS) loads with
// its dwell mixture as it was and an empty instrument, which learns from
// the events that follow, and the model goes on scoring; a delta of
// version 4 applies to it the same way.
func TestReadModelVersion8(t *testing.T) {
	readsOlderVersion(t, olderVersion{
		stream: testStream, strip: withoutInstrument, version: dwellMixVersion, delta: deltaDwellMixVersion,
		part:  "instrument",
		ready: func(m *Model) bool { return m.context.inst.mass >= contextMinMass && m.context.mix.ready() },
		kept:  func(got, m *Model) bool { return got.context.mix == m.context.mix },
		empty: func(m *Model) bool { return m.context.inst == (instrumentStats{}) },
	})
}

// olderVersion describes an older encoding that a part of the context
// came after: how to write it (strip rewrites a newest-version model or
// delta into version or delta), the stream that teaches the part, and
// what must hold of a model read from it.
type olderVersion struct {
	stream         func(n int, seed uint64) []Event
	strip          func(t *testing.T, b []byte, version uint32) []byte
	version, delta uint32
	part           string
	// ready: the part (and what it needs) has learned; kept: what the
	// older version holds is read as it was; empty: the part is empty.
	ready func(m *Model) bool
	kept  func(got, m *Model) bool
	empty func(m *Model) bool
	// ranked: the model has an event order (DefaultConfig's), so its
	// newest encoding holds the rank instrument; else it has none, as
	// the configurations of the older versions had not.
	ranked bool
}

// readsOlderVersion checks a model written in the older version o
// describes: it loads with o.kept and o.empty, its part learns again
// from 500 more events, it encodes in the newest version, and a delta of
// o.delta applies to a base of o.version the same way.
func readsOlderVersion(t *testing.T, o olderVersion) {
	t.Helper()
	cfg := DefaultConfig().WithDefaults()
	if !o.ranked {
		cfg.EventOrder = nil
	}
	const newest = EncodingVersion
	m, _ := New(cfg, rand.NewPCG(1, 1))
	runScores(t, m, o.stream(2000, 1))
	if !o.ready(m) {
		t.Fatalf("the %s has not learned after 2,000 events", o.part)
	}
	got, err := ReadModel(bytes.NewReader(o.strip(t, encode(t, m), o.version)))
	if err != nil {
		t.Fatal(err)
	}
	if !o.kept(got, m) || !o.empty(got) {
		t.Fatalf("version %d: what it holds changed, or the %s is not empty", o.version, o.part)
	}
	runScores(t, got, o.stream(500, 2))
	if !o.ready(got) {
		t.Errorf("the %s learned nothing from 500 more events", o.part)
	}
	if got.Encoding() != newest {
		t.Errorf("encodes as version %d, want %d", got.Encoding(), newest)
	}

	cp := m.FrozenCopy(nil)
	base := o.strip(t, encode(t, cp), o.version)
	cp.MarkSaved()
	runScores(t, m, o.stream(10, 4))
	delta := o.strip(t, writeDelta(t, m.FrozenCopy(cp)), o.delta)
	applied, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)})
	if err != nil {
		t.Fatal(err)
	}
	if !o.kept(applied, m) || !o.empty(applied) {
		t.Errorf("after a version-%d delta: what it holds changed, or the %s is not empty", o.delta, o.part)
	}
}

// withoutInstrument rewrites a model encoding of version 9 or a delta of
// version 5 into the given older version, as stop 29 wrote them: DMIX
// with three more statistics (Σ a, Σ a², Σ a·x, read and not used) and
// no DINS.
func withoutInstrument(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	b = withoutGate(t, b, version)
	mixAt, instAt := bytes.Index(b, []byte("DMIX")), bytes.Index(b, []byte("DINS"))
	if mixAt < 0 || instAt != mixAt+12+40 {
		t.Fatalf("DMIX at %d, DINS at %d: not the layout with the instrument", mixAt, instAt)
	}
	instEnd := instAt + 12 + int(binary.LittleEndian.Uint64(b[instAt+4:]))
	var old []byte
	old = append(old, b[:mixAt+4]...)
	old = binary.LittleEndian.AppendUint64(old, 64)
	old = append(old, b[mixAt+12:instAt]...)
	for _, f := range []float64{-3, 9, -1} {
		old = binary.LittleEndian.AppendUint64(old, math.Float64bits(f))
	}
	old = append(old, b[instEnd:]...)
	binary.LittleEndian.PutUint32(old[8:], version)
	return old
}

// withoutRanks rewrites a model encoding of version 15 or a delta of
// version 11 into the given older version without the rank instrument:
// RINS (right after DGAT) left out.
func withoutRanks(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	b = withoutGap(t, b, version)
	gateAt, ranksAt := bytes.Index(b, []byte("DGAT")), bytes.Index(b, []byte("RINS"))
	if gateAt < 0 || ranksAt != gateAt+12+int(binary.LittleEndian.Uint64(b[gateAt+4:])) {
		t.Fatalf("DGAT at %d, RINS at %d: not the layout with the rank instrument", gateAt, ranksAt)
	}
	ranksEnd := ranksAt + 12 + int(binary.LittleEndian.Uint64(b[ranksAt+4:]))
	old := append(append([]byte(nil), b[:ranksAt]...), b[ranksEnd:]...)
	binary.LittleEndian.PutUint32(old[8:], version)
	return old
}

// TestReadModelVersion11: a model with an event order encoded in version
// 11 (no RINS) loads with its dwell gate as it was and an empty rank
// instrument, which learns from the events that follow, and the model
// goes on scoring; a delta of version 7 applies to it the same way.
func TestReadModelVersion11(t *testing.T) {
	readsOlderVersion(t, olderVersion{
		stream: typedStream, strip: withoutRanks, version: clockVersion, delta: deltaClockVersion,
		part:   "rank instrument",
		ready:  func(m *Model) bool { return m.context.rank.stats.mass >= contextMinMass },
		kept:   func(got, m *Model) bool { return got.context.gate == m.context.gate },
		empty:  func(m *Model) bool { return m.context.rank == (rankInstrument{}) },
		ranked: true,
	})
}

// withoutGate rewrites a model encoding of version 15 or a delta of
// version 11 into the given older version without the dwell gate: DGAT
// (right after DINS) left out.
func withoutGate(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	b = withoutGap(t, b, version)
	instAt, gateAt := bytes.Index(b, []byte("DINS")), bytes.Index(b, []byte("DGAT"))
	if instAt < 0 || gateAt != instAt+12+160 {
		t.Fatalf("DINS at %d, DGAT at %d: not the layout with the gate", instAt, gateAt)
	}
	gateEnd := gateAt + 12 + int(binary.LittleEndian.Uint64(b[gateAt+4:]))
	old := append(append([]byte(nil), b[:gateAt]...), b[gateEnd:]...)
	binary.LittleEndian.PutUint32(old[8:], version)
	return old
}

// TestReadModelVersion9: a model encoded in version 9 (no DGAT) loads
// with its instrument as it was and an empty dwell gate, which learns from
// the events that follow, and the model goes on scoring; a delta of
// version 5 applies to it the same way.
func TestReadModelVersion9(t *testing.T) {
	readsOlderVersion(t, olderVersion{
		stream: typedStream, strip: withoutGate, version: instrumentVersion, delta: deltaInstrumentVersion,
		part:  "dwell gate",
		ready: func(m *Model) bool { return m.context.gate != (dwellGate{}) },
		// The stream carries no times: the counted gaps are the gap's
		// moments, which version 9 did not have.
		kept: func(got, m *Model) bool {
			return withoutGapMoments(got.context.inst) == withoutGapMoments(m.context.inst)
		},
		empty: func(m *Model) bool { return m.context.gate == (dwellGate{}) },
	})
}

// TestPosteriorTakesTheGivenShare: the instrument divides the classes by
// the genuine share it is given (the reliability mixture's, from the
// model). On a stream whose mean p_clean (about 0.58) is far below the
// genuine share (0.8), p_clean's slope in the posterior is the truth's
// when the share is given: the classes' distance in logit(p_clean), 0.8,
// over its variance within them, 1. Without it the instrument falls back
// to the mean p_clean and the slope shrinks to about 0.5.
func TestPosteriorTakesTheGivenShare(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	c := contextModel{long: true}
	for range 20000 {
		g := 0.0
		if r.Float64() < 0.8 {
			g = 1
		}
		x := contextFeatures{logDwell: 7 + g + 0.5*r.NormFloat64(), hasDwell: true, bucket: -1, hasZ: true}
		for j := range gapFeature { // no gap: the events carry no time
			x.z[j] = r.NormFloat64()
		}
		p := sigmoid(-0.2 + 0.8*g + r.NormFloat64())
		w, ranked := c.posterior(p, x, 0.8)
		c.learn(x, w, p, ranked)
	}
	bare := contextFeatures{logDwell: 7.5, hasDwell: true, bucket: -1}
	slope := func(share float64) float64 {
		lo, _ := c.posterior(sigmoid(-1), bare, share)
		hi, _ := c.posterior(sigmoid(1), bare, share)
		return (logOdds(hi) - logOdds(lo)) / 2
	}
	given, fallback := slope(0.8), slope(0)
	t.Logf("p_clean's slope: %.3f with the share given, %.3f with the mean p_clean (%.3f)", given, fallback, sigmoid(c.anchor.share()))
	if math.Abs(given-0.8) > 0.1 {
		t.Errorf("slope with the genuine share given: %.3f, want 0.8 ± 0.1", given)
	}
	if fallback > 0.65 {
		t.Errorf("slope with the mean p_clean: %.3f, want the shrunk one, below 0.65", fallback)
	}
}
