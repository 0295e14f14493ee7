package synth

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func v2Events(t *testing.T, c Config) ([]Event, *Generator) {
	t.Helper()
	g, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v): %v", c, err)
	}
	var out []Event
	for {
		e, ok := g.Next()
		if !ok {
			return out, g
		}
		out = append(out, e)
	}
}

func TestV2Determinism(t *testing.T) {
	c := Config{Events: 5000, Noise: 0.2, Seed: 3, Profile: ProfileV2, DwellShare: 0.3}
	a, _ := generate(t, c)
	b, _ := generate(t, c)
	if !bytes.Equal(a, b) {
		t.Fatal("same v2 config gave different bytes")
	}
	v1, _ := generate(t, Config{Events: 5000, Noise: 0.2, Seed: 3})
	if bytes.Equal(a, v1) {
		t.Fatal("v2 gave the v1 stream")
	}
}

// TestV2Shape checks the figures docs/design/generator.md quotes for the
// v2 default stream: the noise share, every mechanism present, event
// types, and dwell as an informative but imperfect signal.
func TestV2Shape(t *testing.T) {
	evs, g := v2Events(t, Config{Events: 100_000, Noise: 0.2, Seed: 5, Profile: ProfileV2})
	var (
		by     [numCauses]int
		types  [numCauses][numTypes]int
		dwell  []float64
		gen    []bool
		lastTS int64
	)
	for _, e := range evs {
		if e.TS <= lastTS {
			t.Fatalf("ts %d after %d: not strictly increasing", e.TS, lastTS)
		}
		lastTS = e.TS
		by[e.Cause]++
		types[e.Cause][e.Type]++
		dwell = append(dwell, float64(e.DwellMS))
		gen = append(gen, !e.Cause.Noise())
	}
	noise := 1 - float64(by[Genuine])/float64(len(evs))
	if math.Abs(noise-0.2) > 0.03 {
		t.Errorf("noise share %.3f, want 0.2 ± 0.03", noise)
	}
	for c := Misclick; c < numCauses; c++ {
		if by[c] == 0 {
			t.Errorf("no %v events", c)
		}
	}
	if types[Purchase][PurchaseType] != by[Purchase] || types[Return][ReturnType] != by[Return] {
		t.Errorf("purchase/return types: %v %v", types[Purchase], types[Return])
	}
	if by[Return] > by[Purchase] || by[Return] < by[Purchase]/2 {
		t.Errorf("%d returns for %d purchases", by[Return], by[Purchase])
	}
	auc := rocAUC(dwell, gen)
	if auc < 0.72 || auc > 0.88 {
		t.Errorf("dwell-alone ROC-AUC %.3f, want in [0.72, 0.88]", auc)
	}
	t.Logf("noise %.4f, dwell AUC %.3f, by cause %v, kinds: ordinary p=%.3f", noise, auc, by, g.v2.pNoise[ordinaryUser])
}

// TestV2Returns checks that every return follows a purchase of the same
// user and item.
func TestV2Returns(t *testing.T) {
	evs, _ := v2Events(t, Config{Events: 30_000, Noise: 0.3, Seed: 9, Profile: ProfileV2})
	bought := map[[2]int]int{}
	returns := 0
	for _, e := range evs {
		k := [2]int{e.User, e.Item}
		switch e.Cause {
		case Purchase:
			bought[k]++
		case Return:
			returns++
			if bought[k] == 0 {
				t.Fatalf("return of %v without a purchase", k)
			}
			bought[k]--
		}
	}
	if returns == 0 {
		t.Fatal("no returns")
	}
}

// TestV2TrendingRotates checks that the trending slot changes with time
// and is the same for the same period.
func TestV2TrendingRotates(t *testing.T) {
	g, err := New(Config{Events: 1000, Seed: 1, Profile: ProfileV2})
	if err != nil {
		t.Fatal(err)
	}
	x, epoch, p := g.v2, g.cfg.EpochMS, g.cfg.V2.TrendingPeriodMS
	a := append([]int(nil), x.trending(epoch, epoch)...)
	b := append([]int(nil), x.trending(epoch, epoch+p)...)
	a2 := x.trending(epoch, epoch+p-1)
	if len(a) != DefaultTrendingItems || equalInts(a, b) || !equalInts(a, a2) {
		t.Errorf("slots %v, %v, %v: want 5 items, changing across periods, fixed within one", a, b, a2)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDwellShare checks that a partial dwell hides dwell_ms on about that
// share of events and leaves the events otherwise identical.
func TestDwellShare(t *testing.T) {
	for _, profile := range []string{ProfileV1, ProfileV2} {
		t.Run(profile, func(t *testing.T) {
			full, _ := generate(t, Config{Events: 20_000, Noise: 0.2, Seed: 2, Profile: profile})
			part, st := generate(t, Config{Events: 20_000, Noise: 0.2, Seed: 2, Profile: profile, DwellShare: 0.3})
			none, _ := generate(t, Config{Events: 20_000, Noise: 0.2, Seed: 2, Profile: profile, DwellShare: -1})
			if s := float64(st.WithDwell) / float64(st.Events); math.Abs(s-0.3) > 0.02 {
				t.Errorf("dwell on %.3f of events, want 0.3", s)
			}
			if bytes.Contains(none, []byte("dwell_ms")) {
				t.Error("dwell share 0 still writes dwell_ms")
			}
			strip := func(b []byte) string {
				var out []string
				for _, l := range strings.Split(string(b), "\n") {
					if i := strings.Index(l, `,"dwell_ms"`); i >= 0 {
						j := strings.Index(l, `,"truth"`)
						l = l[:i] + l[j:]
					}
					out = append(out, l)
				}
				return strings.Join(out, "\n")
			}
			if strip(full) != strip(part) || strip(full) != string(none) {
				t.Error("hiding dwell changed the events")
			}
		})
	}
}
