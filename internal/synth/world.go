package synth

import (
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// world holds the latent structure the stream is drawn from. It is built
// once from its own random stream, so it depends only on the seed and the
// sizes.
type world struct {
	// taste[u] is user u's distribution over topics (θ_u); tasteCDF is its
	// cumulative form, offTasteCDF the cumulative form of (1-θ_u)² — the
	// topics the user does not care about.
	taste       [][]float64
	tasteCDF    [][]float64
	offTasteCDF [][]float64
	// activityCDF is the cumulative user activity (log-normal weights).
	activityCDF []float64
	// topicOf[i] is item i's primary topic; itemTopic[i] its topic vector φ_i.
	topicOf   []int
	itemTopic [][]float64
	// pop[i] is item i's popularity weight (Zipf over a random ranking).
	pop []float64
	// topicItemCDF[k] is the cumulative p(i | k) ∝ pop_i φ_ik.
	topicItemCDF [][]float64
	// clickbait lists the clickbait items; clickbaitCDF weighs them.
	clickbait    []int
	clickbaitCDF []float64
	isClickbait  []bool
}

// Stream identifiers of the two PCG streams derived from a seed.
const (
	worldStream = 0x776f726c64 // "world"
	eventStream = 0x6576656e74 // "event"
	dwellStream = 0x6477656c6c // "dwell": which events hide their dwell
	v2Stream    = 0x7632776f72 // "v2wor": what ProfileV2 adds to the world
	trendStream = 0x7472656e64 // "trend": the trending slot of a period
)

func newWorld(c Config) *world {
	src := rand.NewPCG(c.Seed, worldStream)
	r := rand.New(src)
	w := &world{}

	// Users: tastes θ_u ~ Dirichlet(α), activity ~ LogNormal(0, 0.3).
	dir := dirichlet{alpha: c.TasteAlpha, n: c.Topics, src: src}
	w.taste = make([][]float64, c.Users)
	w.tasteCDF = make([][]float64, c.Users)
	w.offTasteCDF = make([][]float64, c.Users)
	activity := make([]float64, c.Users)
	off := make([]float64, c.Topics)
	for u := range c.Users {
		th := dir.rand()
		// Guard against a degenerate draw (all mass underflowed to zero
		// with a tiny α): fall back to one random favourite topic.
		if s := sum(th); !(s > 0) || math.IsNaN(s) {
			clear(th)
			th[r.IntN(c.Topics)] = 1
		}
		w.taste[u] = th
		w.tasteCDF[u] = cumulative(th)
		for k, t := range th {
			off[k] = (1 - t) * (1 - t)
		}
		if !(sum(off) > 0) { // one topic only: off-taste is that topic
			copy(off, th)
		}
		w.offTasteCDF[u] = cumulative(off)
		activity[u] = math.Exp(0.3 * r.NormFloat64())
	}
	w.activityCDF = cumulative(activity)

	// Items: a primary topic, a topic vector with TopicPurity on it and the
	// rest spread by a flat Dirichlet, and a Zipf popularity.
	spread := dirichlet{alpha: 1, n: c.Topics, src: src}
	w.topicOf = make([]int, c.Items)
	w.itemTopic = make([][]float64, c.Items)
	for i := range c.Items {
		k := r.IntN(c.Topics)
		phi := spread.rand()
		for j := range phi {
			phi[j] *= 1 - c.TopicPurity
		}
		phi[k] += c.TopicPurity
		w.topicOf[i] = k
		w.itemTopic[i] = phi
	}
	w.pop = make([]float64, c.Items)
	for rank, i := range r.Perm(c.Items) {
		w.pop[i] = math.Pow(float64(rank+1), -c.Popularity)
	}
	w.topicItemCDF = make([][]float64, c.Topics)
	weights := make([]float64, c.Items)
	for k := range c.Topics {
		for i := range c.Items {
			weights[i] = w.pop[i] * w.itemTopic[i][k]
		}
		w.topicItemCDF[k] = cumulative(weights)
	}

	// Clickbait: a random subset of the catalogue, with a Zipf(0.5)
	// attractiveness among themselves.
	w.clickbait = r.Perm(c.Items)[:c.ClickbaitItems]
	sort.Ints(w.clickbait)
	w.isClickbait = make([]bool, c.Items)
	cb := make([]float64, len(w.clickbait))
	for rank, j := range r.Perm(len(w.clickbait)) {
		cb[j] = math.Pow(float64(rank+1), -0.5)
	}
	for _, i := range w.clickbait {
		w.isClickbait[i] = true
	}
	w.clickbaitCDF = cumulative(cb)
	return w
}

// dirichlet draws from the symmetric Dirichlet(alpha) on n categories by
// normalising n Gamma(alpha, 1) draws. (gonum's distmv.Dirichlet does the
// same but pulls in a dependency this module does not carry.)
type dirichlet struct {
	alpha float64
	n     int
	src   rand.Source
}

func (d dirichlet) rand() []float64 {
	g := distuv.Gamma{Alpha: d.alpha, Beta: 1, Src: d.src}
	x := make([]float64, d.n)
	for k := range x {
		x[k] = g.Rand()
	}
	s := sum(x)
	for k := range x {
		x[k] /= s
	}
	return x
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// cumulative returns the running sums of ws, normalised so that the last
// one is 1.
func cumulative(ws []float64) []float64 {
	cdf := make([]float64, len(ws))
	var s float64
	for i, x := range ws {
		s += x
		cdf[i] = s
	}
	for i := range cdf {
		cdf[i] /= s
	}
	return cdf
}

// draw returns an index distributed as the weights whose cumulative form is
// cdf: the first i with cdf[i] > x for x uniform in [0, 1), so entries of
// zero weight are never returned.
func draw(r *rand.Rand, cdf []float64) int {
	x := r.Float64()
	i := sort.Search(len(cdf), func(i int) bool { return cdf[i] > x })
	return min(i, len(cdf)-1) // rounding can leave cdf[len-1] just below 1
}
