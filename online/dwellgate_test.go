package online

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestDwellGateKnownSeparations: three event types with the same share of
// genuine events and the same separation of logit(p_clean), 2, where
// dwell's class means lie 2, 0.5 and 0 apart. Pooled, dwell separates them
// by their mean, 0.833, so the gate's ratio is 2.4 (a gate of 1), 0.6
// and 0, each far beyond three standard errors below the pooled
// separation, so the gate is the ratio itself. Its standard error here
// is about 0.07; the tolerance 0.15. A stream of one type has a gate of 1
// exactly, as has an event without a type.
func TestDwellGateKnownSeparations(t *testing.T) {
	const share, da = 0.8, 2.0
	dx := [3]float64{2, 0.5, 0}
	r := rand.New(rand.NewPCG(31, 7))
	var g, one dwellGate
	for range 30000 {
		b := r.IntN(3)
		genuine := r.Float64() < share
		a, x := r.NormFloat64(), 3+r.NormFloat64()
		if genuine {
			a += da
			x += dx[b]
		}
		p := 1 / (1 + math.Exp(-a))
		g.learn(b, x, p, nil)
		one.learn(0, x, p, nil)
	}
	for b, want := range [3]float64{1, 0.6, 0} {
		got := g.factor(b, typeBuckets)
		t.Logf("type %d: gate %.3f, want %.3f", b, got, want)
		if math.Abs(got-want) > 0.15 {
			t.Errorf("type %d: gate %.3f, want %.3f", b, got, want)
		}
	}
	if got := g.factor(0, typeBuckets); got != 1 {
		t.Errorf("the type dwell says most of: gate %v, want 1 exactly", got)
	}
	if got := one.factor(0, typeBuckets); got != 1 {
		t.Errorf("one type: gate %v, want 1 exactly", got)
	}
	if got := g.factor(-1, typeBuckets); got != 1 {
		t.Errorf("no type: gate %v, want 1", got)
	}
	if got := (&dwellGate{}).factor(0, typeBuckets); got != 1 {
		t.Errorf("no statistics: gate %v, want 1", got)
	}
}

// TestDwellGateWaitsForEvidence: while p_clean says nothing (its classes
// do not differ), the covariances are noise, and the gate stays near 1 in
// every type, whatever dwell says within each: it weakens dwell only on
// evidence.
func TestDwellGateWaitsForEvidence(t *testing.T) {
	dx := [3]float64{2, 0.5, 0}
	for seed := range uint64(5) {
		r := rand.New(rand.NewPCG(seed, 9))
		var g dwellGate
		for range 6000 {
			b := r.IntN(3)
			x := 3 + r.NormFloat64()
			if r.Float64() < 0.8 {
				x += dx[b]
			}
			g.learn(b, x, 1/(1+math.Exp(-r.NormFloat64())), nil)
		}
		for b := range 3 {
			if f := g.factor(b, typeBuckets); f < 0.7 {
				t.Errorf("seed %d, type %d: gate %.3f with an uninformative p_clean, want near 1", seed, b, f)
			}
		}
	}
}

// TestDwellGateNeverFlipsDwell: where dwell and p_clean disagree overall
// (dwell's direction is stated, p_clean may be wrong), the gate is 1: it
// only ever weakens dwell within a type that says less than the others,
// and never turns its evidence round.
func TestDwellGateNeverFlipsDwell(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	var g dwellGate
	for range 20000 {
		b := r.IntN(2)
		genuine := r.Float64() < 0.8
		a, x := r.NormFloat64(), 3+r.NormFloat64()
		if genuine {
			a -= 1 // p_clean ranks backwards
			x += 1
		}
		g.learn(b, x, 1/(1+math.Exp(-a)), nil)
	}
	for b := range 2 {
		if got := g.factor(b, typeBuckets); got != 1 {
			t.Errorf("type %d: gate %v, want 1", b, got)
		}
	}
	for b := range typeBuckets {
		if f := g.factor(b, typeBuckets); f < 0 || f > 1 {
			t.Errorf("type %d: gate %v outside [0, 1]", b, f)
		}
	}
}

// TestReadModelRefusesBadDwellGate: a model whose dwell gate is not
// finite, has a negative mass or a p_clean sum above its mass loads
// neither whole nor from a delta.
func TestReadModelRefusesBadDwellGate(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	for name, spoil := range map[string]func(*dwellGate){
		"NaN":      func(g *dwellGate) { g.slots[0].cross = math.NaN() },
		"Inf":      func(g *dwellGate) { g.slots[1].dwell = math.Inf(-1) },
		"negative": func(g *dwellGate) { g.slots[2].mass = -1 },
		"p_clean":  func(g *dwellGate) { g.slots[0].pClean = g.slots[0].mass + 1 },
	} {
		m, base, delta := spoiledDelta(t, cfg, func(m *Model) { spoil(&m.context.gate) })
		if _, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: a delta: %v, want ErrCorrupt", name, err)
		}
		if _, err := ReadModel(bytes.NewReader(encode(t, m))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "dwell gate") {
			t.Errorf("%s: a model: %v, want ErrCorrupt naming the dwell gate", name, err)
		}
	}
}

// TestDwellReach: dwell's instrument weighs the events by as much as
// dwell covaries with p_clean or the gap (dwellReach), and the gap path
// the rest (readsGap). On a stream whose noise is a click on a random
// item, short in dwell and gap, dwell is read whole, and on one whose
// noise is on the user's own items, which p_clean cannot tell, too (the
// gap covaries with dwell). Where every event's dwell is drawn from one
// lognormal it is read by next to nothing: the weight ranks about as
// p_clean does where the gap says nothing either (dwell's instrument
// alone drops p_clean and ranks at chance), and the gap gives most of the
// weight where it tells the noise.
func TestDwellReach(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	stream := reachStream
	for _, tc := range []struct {
		name                   string
		says, gapSays, inTaste bool
		minReach, maxReach     float64
		minGain                float64 // pairs ranked right by the weight less by p_clean
	}{
		{"dwell short for the noise", true, true, false, 1, 1, 0},
		// The noise on items of the user's taste: p_clean cannot tell it,
		// and dwell covaries with it little; the gap, short for the noise
		// as dwell is, keeps dwell read.
		{"dwell and the gap short for noise in the user's taste", true, true, true, 1, 1, 0.3},
		{"dwell drawn at random", false, false, false, 0, 0.5, -0.05},
		// The gap path weighs what dwell does not reach (readsGap).
		{"dwell drawn at random, the gap short for the noise", false, true, false, 0, 0.5, 0.03},
	} {
		m, _ := New(cfg, NewSource(3))
		evs := stream(tc.says, tc.gapSays, tc.inTaste)
		scores := runScores(t, m, evs)
		half := scores[len(scores)/2:]
		weights, pClean, genuine := make([]float64, len(half)), make([]float64, len(half)), make([]bool, len(half))
		dwelt, gapped := 0, 0
		for j, sc := range half {
			weights[j], pClean[j], genuine[j] = sc.Weight, sc.PClean, evs[len(scores)/2+j].Rating > 0
			switch sc.Source {
			case SourceGap:
				gapped++
				dwelt++
			case SourceDwell:
				dwelt++
			}
		}
		reach, w, p := m.context.dwellReach(), pairsRanked(weights, genuine), pairsRanked(pClean, genuine)
		t.Logf("%s: reach %.3f; pairs ranked right %.4f by the weight, %.4f by p_clean; %d of %d weights from dwell or the gap", tc.name, reach, w, p, dwelt, len(half))
		if !(reach >= tc.minReach && reach <= tc.maxReach) {
			t.Errorf("%s: dwell's reach %.3f, want [%v, %v]", tc.name, reach, tc.minReach, tc.maxReach)
		}
		if dwelt < len(half)*9/10 {
			t.Errorf("%s: %d of %d weights from dwell's instrument or the gap, want 90 %%", tc.name, dwelt, len(half))
		}
		// Where dwell reaches, the gap's posterior gives no weight; where
		// dwell is drawn at random and the gap tells the noise, most.
		if gap := float64(gapped) / float64(len(half)); tc.maxReach == 1 && gapped > 0 || tc.gapSays && !tc.says && gap < 0.5 {
			t.Errorf("%s: %.3f of the weights from the gap", tc.name, gap)
		}
		if w < p+tc.minGain {
			t.Errorf("%s: the weight ranks %.4f of the pairs right, p_clean %.4f: want %+v at least", tc.name, w, p, tc.minGain)
		}
	}
}

// reachStream is TestDwellReach's stream of 12,000 timed events with
// dwell, a fifth of them noise (Rating 0): with says, short in dwell and
// gap (a median of 3 s against 30 s, 1–4 s after the user's previous
// event against 20–40 s), on a random item, or with inTaste on an item of
// the user's taste as a genuine event's; without says, dwell drawn alike
// for both, and the gap too unless gapSays.
func reachStream(says, gapSays, inTaste bool) []Event {
	r := rand.New(rand.NewPCG(4, 31))
	evs := make([]Event, 12000)
	now, last := int64(1_700_000_000_000), map[int]int64{}
	for j := range evs {
		u := r.IntN(60)
		ev := Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", (u%4)*10+r.IntN(10)), Rating: 1, HasTime: true, HasDwell: true}
		median, gap := 30_000.0, int64(20_000+r.IntN(20_000))
		if r.Float64() < 0.2 {
			ev.Rating, median, gap = 0, 3_000, int64(1_000+r.IntN(3_000))
			if !inTaste {
				ev.Item = fmt.Sprint("i", r.IntN(40))
			}
		}
		if !says { // dwell does not tell the noise
			median = 10_000
		}
		if !says && !gapSays { // nor does the gap
			gap = int64(20_000 + r.IntN(20_000))
		}
		now += 300
		ev.TimeMS = max(now, last[u]+gap)
		last[u] = ev.TimeMS
		ev.DwellMS = int64(median * math.Exp(0.8*r.NormFloat64()))
		evs[j] = ev
	}
	return evs
}
