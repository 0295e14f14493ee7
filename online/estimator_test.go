package online

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distmv"
)

// TestGMMRecoversKnownMixture fits the mixture on samples from a known
// two-component mixture and compares every parameter.
func TestGMMRecoversKnownMixture(t *testing.T) {
	want := gmm{
		weight: [2]float64{0.3, 0.7},
		mean:   [2][2]float64{{0.2, 0.5}, {0.8, 1.6}},
		cov: [2][2][2]float64{
			{{0.010, 0.003}, {0.003, 0.020}},
			{{0.020, -0.006}, {-0.006, 0.050}},
		},
	}
	src := rand.NewPCG(11, 12)
	r := rand.New(src)
	var comps [2]*distmv.Normal
	for c := 0; c < 2; c++ {
		cv := want.cov[c]
		n, ok := distmv.NewNormal(want.mean[c][:], mat.NewSymDense(2, []float64{cv[0][0], cv[0][1], cv[1][0], cv[1][1]}), src)
		if !ok {
			t.Fatal("test covariance not positive definite")
		}
		comps[c] = n
	}
	const n = 6000
	x := mat.NewDense(n, 2, nil)
	for i := 0; i < n; i++ {
		c := 0
		if r.Float64() >= want.weight[0] {
			c = 1
		}
		x.SetRow(i, comps[c].Rand(nil))
	}
	var g gmm
	var f gmmFitter
	if !g.fit(x, &f, 200) {
		t.Fatal("fit failed")
	}
	// Component order follows the median split: 0 low, 1 high.
	for c := 0; c < 2; c++ {
		if d := math.Abs(g.weight[c] - want.weight[c]); d > 0.03 {
			t.Errorf("weight[%d] = %.4f, want %.4f", c, g.weight[c], want.weight[c])
		}
		for j := 0; j < 2; j++ {
			if d := math.Abs(g.mean[c][j] - want.mean[c][j]); d > 0.02 {
				t.Errorf("mean[%d][%d] = %.4f, want %.4f", c, j, g.mean[c][j], want.mean[c][j])
			}
			for k := 0; k < 2; k++ {
				if d := math.Abs(g.cov[c][j][k] - want.cov[c][j][k]); d > 0.15*math.Abs(want.cov[c][j][j]) {
					t.Errorf("cov[%d][%d][%d] = %.5f, want %.5f", c, j, k, g.cov[c][j][k], want.cov[c][j][k])
				}
			}
		}
	}
	if g.reliable != 1 {
		t.Errorf("reliable component %d, want 1 (larger mean norm)", g.reliable)
	}
	// Posteriors agree with Bayes' rule under the true parameters.
	want.fitted = true
	if !want.cache() {
		t.Fatal("cache")
	}
	for _, pt := range [][2]float64{{0.2, 0.5}, {0.5, 1.0}, {0.8, 1.6}} {
		got, exp := g.posterior(1, pt[0], pt[1]), want.posterior(1, pt[0], pt[1])
		if math.Abs(got-exp) > 0.05 {
			t.Errorf("posterior at %v = %.3f, want %.3f", pt, got, exp)
		}
	}
}

// TestGMMWarmStartKeepsFit: a refit on the same data from the fitted
// parameters leaves them where they are.
func TestGMMWarmStartKeepsFit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	x := mat.NewDense(1000, 2, nil)
	for i := 0; i < 1000; i++ {
		off := 0.0
		if i%2 == 0 {
			off = 3
		}
		x.Set(i, 0, off+r.NormFloat64()*0.3)
		x.Set(i, 1, off+r.NormFloat64()*0.3)
	}
	var g gmm
	var f gmmFitter
	if !g.fit(x, &f, 100) {
		t.Fatal("fit")
	}
	before := g.mean
	if !g.fit(x, &f, 100) {
		t.Fatal("refit")
	}
	for c := 0; c < 2; c++ {
		for j := 0; j < 2; j++ {
			if math.Abs(g.mean[c][j]-before[c][j]) > 1e-4 {
				t.Errorf("mean moved on warm refit: %v -> %v", before, g.mean)
			}
		}
	}
}

// TestGMMRejectsDegenerateData: one repeated point cannot support two
// components; the fit reports it and no NaN appears.
func TestGMMRejectsDegenerateData(t *testing.T) {
	x := mat.NewDense(100, 2, nil)
	var g gmm
	var f gmmFitter
	if g.fit(x, &f, 10) && (!finite(g.weight[:]) || !finite(g.mean[0][:])) {
		t.Fatal("degenerate fit produced non-finite parameters")
	}
	if p := g.posterior(0, 1, 1); math.IsNaN(p) {
		t.Fatal("posterior NaN")
	}
}

// clusteredStream yields (user, item) pairs where users of a group pick
// items of their group most of the time: co-occurrence is plentiful and
// varies.
func clusteredStream(r *rand.Rand, users, items, groups, n int) [][2]int32 {
	out := make([][2]int32, n)
	for e := range out {
		u := r.IntN(users)
		g := u % groups
		var i int
		if r.Float64() < 0.8 {
			i = g + groups*r.IntN(items/groups)
		} else {
			i = r.IntN(items)
		}
		out[e] = [2]int32{int32(u), int32(i)}
	}
	return out
}

// TestSketchCooccurrenceError measures the sketch against the exact count
// on a clustered stream and bounds its error.
func TestSketchCooccurrenceError(t *testing.T) {
	const users, items = 400, 300
	r := rand.New(rand.NewPCG(21, 22))
	stream := clusteredStream(r, users, items, 6, 12000)
	def := Config{}.WithDefaults()
	sk := newSketchCooc(def.SketchUsers, def.SketchHashes)
	ex := &exactCooc{}
	sk.grow(users, items)
	ex.grow(users, items)
	rs := rand.New(rand.NewPCG(1, 2))
	var est, exact []float64
	for n, e := range stream {
		if n > 4000 && n%10 == 0 {
			est = append(est, sk.count(e[0], e[1]))
			exact = append(exact, ex.count(e[0], e[1]))
		}
		sk.add(e[0], e[1], rs)
		ex.add(e[0], e[1], nil)
	}
	mae, meanExact := 0.0, stat.Mean(exact, nil)
	for j := range est {
		mae += math.Abs(est[j] - exact[j])
	}
	mae /= float64(len(est))
	corr := stat.Correlation(est, exact, nil)
	t.Logf("sketch vs exact c_ui over %d events: mean exact %.1f, mean estimate %.1f, MAE %.2f (%.1f%%), Pearson %.3f",
		len(est), meanExact, stat.Mean(est, nil), mae, 100*mae/meanExact, corr)
	if mae/meanExact > 0.25 {
		t.Errorf("relative MAE %.3f > 0.25", mae/meanExact)
	}
	if corr < 0.9 {
		t.Errorf("correlation %.3f < 0.9", corr)
	}
}

// TestExactCooccurrenceByHand checks the exact count on a tiny example.
func TestExactCooccurrenceByHand(t *testing.T) {
	ex := &exactCooc{}
	ex.grow(4, 5)
	// user 0: items 0,1,2; user 1: items 0,1 (shares 2 with 0); user 2:
	// items 1,3 (shares 1 with 0); user 3: item 4.
	for _, p := range [][2]int32{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {2, 1}, {2, 3}, {3, 4}} {
		ex.add(p[0], p[1], nil)
	}
	// U_1 = {0,1,2}; for u=0: u'=1 shares {0,1} (>1) counts, u'=2 shares {1}.
	if got := ex.count(0, 1); got != 1 {
		t.Errorf("c(0,1) = %v, want 1", got)
	}
	if got := ex.count(3, 1); got != 0 {
		t.Errorf("c(3,1) = %v, want 0", got)
	}
}

func TestEqualLanes(t *testing.T) {
	tests := []struct {
		a, b uint64
		want int
	}{
		{0, 0, 4},
		{0x0001000200030004, 0x0001000200030004, 4},
		{0x0001000200030004, 0x0001000200030005, 3},
		{0xffff000000000000, 0x7fff000000000000, 3},
		{0x8000800080008000, 0x0000000000000000, 0},
		{0x1234ffff00000001, 0x1234ffff00010001, 3},
	}
	for _, tc := range tests {
		if got := equalLanes(tc.a, tc.b); got != tc.want {
			t.Errorf("equalLanes(%#x, %#x) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestMinLanes: minLanes is the unsigned minimum of each 16-bit lane.
func TestMinLanes(t *testing.T) {
	lanes := []uint64{0, 1, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff, 0x1234, 0xabcd}
	r := rand.New(rand.NewPCG(11, 12))
	for range 20000 {
		var a, b, want uint64
		for k := 0; k < 4; k++ {
			x, y := lanes[r.IntN(len(lanes))], lanes[r.IntN(len(lanes))]
			if r.IntN(2) == 0 {
				x, y = r.Uint64()&0xffff, r.Uint64()&0xffff
			}
			a |= x << (16 * k)
			b |= y << (16 * k)
			want |= min(x, y) << (16 * k)
		}
		if got := minLanes(a, b); got != want {
			t.Fatalf("minLanes(%#x, %#x) = %#x, want %#x", a, b, got, want)
		}
	}
}
