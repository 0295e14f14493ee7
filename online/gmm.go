package online

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// gmm is a two-component, full-covariance Gaussian mixture over the
// two reliability features. It is fitted by EM; every refit starts from the
// previous parameters (warm start). Scoring a point uses cached precision
// matrices and log-normalisers, so it does not allocate.
type gmm struct {
	fitted   bool
	reliable int
	weight   [2]float64
	mean     [2][2]float64
	cov      [2][2][2]float64

	// cached from cov at the end of every fit
	prec    [2][2][2]float64
	logNorm [2]float64 // log weight − log(2π) − ½ log|Σ|
}

// gmmCovFloor is added to the diagonal of every covariance, so that a
// component collapsing on identical points stays well defined.
const gmmCovFloor = 1e-6

// logComp is log(weight_c · N(x; μ_c, Σ_c)).
func (g *gmm) logComp(c int, x0, x1 float64) float64 {
	d0, d1 := x0-g.mean[c][0], x1-g.mean[c][1]
	p := &g.prec[c]
	q := d0*d0*p[0][0] + 2*d0*d1*p[0][1] + d1*d1*p[1][1]
	return g.logNorm[c] - 0.5*q
}

// posterior returns the responsibility of component c for x.
func (g *gmm) posterior(c int, x0, x1 float64) float64 {
	a, b := g.logComp(0, x0, x1), g.logComp(1, x0, x1)
	var ea, eb float64
	switch {
	case math.IsInf(a, 0) || math.IsInf(b, 0) || math.IsNaN(a) || math.IsNaN(b):
		m := math.Max(a, b)
		ea, eb = exp(a-m), exp(b-m)
	case a >= b:
		// The larger term is exp(0), exactly 1 (a−max(a,b) is ±0): one
		// exponential, not two, for the same values.
		ea, eb = 1, exp(b-a)
	default:
		ea, eb = exp(a-b), 1
	}
	r := ea / (ea + eb)
	if c == 1 {
		r = eb / (ea + eb)
	}
	if math.IsNaN(r) {
		return 0.5
	}
	return r
}

// cache recomputes precisions and log-normalisers with gonum's Cholesky;
// it reports false if a covariance is not positive definite.
func (g *gmm) cache() bool {
	for c := 0; c < 2; c++ {
		s := mat.NewSymDense(2, []float64{
			g.cov[c][0][0] + gmmCovFloor, g.cov[c][0][1],
			g.cov[c][1][0], g.cov[c][1][1] + gmmCovFloor,
		})
		var ch mat.Cholesky
		if !ch.Factorize(s) {
			return false
		}
		var inv mat.SymDense
		if err := ch.InverseTo(&inv); err != nil {
			return false
		}
		for i := 0; i < 2; i++ {
			for j := 0; j < 2; j++ {
				g.prec[c][i][j] = inv.At(i, j)
			}
		}
		g.logNorm[c] = math.Log(g.weight[c]) - math.Log(2*math.Pi) - 0.5*ch.LogDet()
	}
	return true
}

// gmmFitter holds EM's buffers so refits reuse them.
type gmmFitter struct {
	x   *mat.Dense // n×2
	col []float64
}

// moments are a component's sufficient statistics: Σr, Σr·x, Σr·x xᵀ over
// the data, r the component's responsibility. The M-step needs nothing
// else, so the E-step accumulates them in its one pass over the window.
type moments struct {
	w, s0, s1, s00, s01, s11 float64
}

func (m *moments) add(r, x0, x1 float64) {
	m.w += r
	m.s0 += r * x0
	m.s1 += r * x1
	m.s00 += r * x0 * x0
	m.s01 += r * x0 * x1
	m.s11 += r * x1 * x1
}

// initSplit starts EM from the lower and upper halves of the data ordered
// by the first feature: deterministic, and it puts the two components on
// the two sides of the score axis where the reliable and the unreliable
// samples are expected.
func (g *gmm) initSplit(x *mat.Dense, f *gmmFitter) bool {
	n, _ := x.Dims()
	f.col = f.col[:0]
	for i := 0; i < n; i++ {
		f.col = append(f.col, x.At(i, 0))
	}
	slices.Sort(f.col)
	med := f.col[n/2]
	var st [2]moments
	for i := 0; i < n; i++ {
		x0, x1 := x.At(i, 0), x.At(i, 1)
		c := 1
		if x0 < med || (x0 == med && i%2 == 0) {
			c = 0
		}
		st[c].add(1, x0, x1)
	}
	return g.mstep(&st, n)
}

// mstep sets the maximum-likelihood weights, means and covariances from the
// sufficient statistics. It reports false if a component has (almost) no
// mass.
func (g *gmm) mstep(st *[2]moments, n int) bool {
	for c := range st {
		m := &st[c]
		if m.w < 2 {
			return false
		}
		mu0, mu1 := m.s0/m.w, m.s1/m.w
		g.weight[c] = m.w / float64(n)
		g.mean[c] = [2]float64{mu0, mu1}
		c01 := m.s01/m.w - mu0*mu1
		g.cov[c] = [2][2]float64{
			{math.Max(m.s00/m.w-mu0*mu0, 0), c01},
			{c01, math.Max(m.s11/m.w-mu1*mu1, 0)},
		}
	}
	return true
}

// estep computes every point's responsibilities under the current
// parameters and returns the mean log-likelihood (if withLL, else 0) and
// the components' sufficient statistics.
func (g *gmm) estep(x *mat.Dense, withLL bool) (float64, [2]moments) {
	n, _ := x.Dims()
	ll := 0.0
	var st [2]moments
	raw := x.RawMatrix()
	for i := 0; i < n; i++ {
		x0, x1 := raw.Data[i*raw.Stride], raw.Data[i*raw.Stride+1]
		a, b := g.logComp(0, x0, x1), g.logComp(1, x0, x1)
		// With e = exp(−|a−b|): the responsibilities are 1/(1+e) and
		// e/(1+e), and log(e^a + e^b) = max(a,b) + log1p(e). Most points
		// of a fitted mixture are so far from one component that e is 0
		// (exp underflows) or 1+e is 1, and they are 1 and e without dividing.
		e := exp(-math.Abs(a - b))
		hi, lo := 1.0, e
		if den := 1 + e; den != 1 {
			hi, lo = 1/den, e/den
		}
		if a < b {
			hi, lo = lo, hi
		}
		st[0].add(hi, x0, x1)
		st[1].add(lo, x0, x1)
		if withLL {
			ll += max(a, b) + math.Log1p(e)
		}
	}
	return ll / float64(n), st
}

// fit runs at most iters EM iterations on the rows of x (n×2), starting
// from the current parameters if the mixture is fitted, else from a split
// at the median of the first feature. It stops early when the mean
// log-likelihood improves by less than 1e-5 of its magnitude. It reports false, leaving the
// previous parameters in place, if the data cannot support two components.
func (g *gmm) fit(x *mat.Dense, f *gmmFitter, iters int) bool {
	n, _ := x.Dims()
	if cap(f.col) < n {
		f.col = make([]float64, 0, n)
	}
	prev := *g
	if !g.fitted || !g.cache() {
		if !g.initSplit(x, f) || !g.cache() {
			*g = prev
			return false
		}
	}
	// The test to stop can only stop an iteration that has one before it
	// to compare with and one after it to skip: the log-likelihood is
	// computed for those and the ones before them only (for none with
	// the default 2 iterations), as nothing else reads it.
	last := math.Inf(-1)
	for it := 0; it < iters; it++ {
		canStop := it >= 1 && it < iters-1
		ll, st := g.estep(x, canStop || it < iters-2)
		if !g.mstep(&st, n) || !g.cache() {
			*g = prev
			return false
		}
		if canStop && ll-last < 1e-5*math.Abs(ll) {
			break
		}
		last = ll
	}
	if !finite(g.weight[:]) || !finite(g.mean[0][:]) || !finite(g.mean[1][:]) {
		*g = prev
		return false
	}
	g.fitted = true
	// The paper takes the component whose mean has the larger squared norm
	// as the reliable one; both features are non-negative here.
	n0 := g.mean[0][0]*g.mean[0][0] + g.mean[0][1]*g.mean[0][1]
	n1 := g.mean[1][0]*g.mean[1][0] + g.mean[1][1]*g.mean[1][1]
	g.reliable = 0
	if n1 > n0 {
		g.reliable = 1
	}
	return true
}

func (g *gmm) summary() GMMSummary {
	s := GMMSummary{Fitted: g.fitted, Reliable: g.reliable}
	for c := 0; c < 2; c++ {
		s.Components[c] = GMMComponent{Weight: g.weight[c], Mean: g.mean[c], Cov: g.cov[c]}
	}
	return s
}
