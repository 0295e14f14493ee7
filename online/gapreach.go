package online

// The gap's reach: how much the gap has said of the noise over the
// stream's history, which the gap path's weight keeps reading when the
// instrument's moments of the moment stop saying it.
//
// The gap path (gapWeight) blends the level, p_clean calibrated, with the
// gap instrument's posterior by λ, the correlation of logit(p_clean) with
// the gap over the instrument's window, scaled by gapCorrelationScale:
// the two move together only if both say something of the class. λ stands
// for the gap's worth, but it is a product: where p_clean says nothing,
// λ is 0 whatever the gap says. On the v2 streams of 10,000 to 20,000
// users and 5,000 to 10,000 items (200k events, neither dwell nor types)
// p_clean turns over the stream from backwards (ROC-AUC 0.43, the
// classifier learns the items' popularity, and the popular items there
// are the clickbait and trending ones) to forwards (0.57); through the
// turn its correlation with the gap passes 0, λ fell from 1 to 0.16–0.42
// in the stream's second half, and the weight became the level with the
// item's popularity read p_clean's way (popularityEvidence until stop
// 64, which reads it by the gap since): ROC-AUC 0.50 there, where the
// gap instrument's posterior ranked 0.60–0.63 and the gap alone
// 0.63–0.65 (`denoiser-lab gen --profile v2 --users 20000 --items
// 10000 --seed 1`, types and dwell removed; docs/design/model.md, "The
// gap's reach").
//
// Whether a stream's gaps say something of its noise is the stream's
// behaviour (bounce chains, corrected misclicks, bots' pace), which does
// not turn as the classifier learns. So the blend is at least the running
// mean of λ over the stream: a gap that has said something keeps its part
// while p_clean turns, and a stream whose gaps never said anything (the
// v1 generator's, whose gaps are the same for both classes) keeps a small
// mean and a small blend. It states a premise as the level does (level.go):
// the gap's worth is stationary; where it changes, the blend follows at
// the speed of a running mean over gapReachWindow events.

// gapReachWindow is the number of events the running mean of λ counts
// before it moves as an exponential mean: a million events, so that on
// the streams it was built for it is the mean over the stream's history.
// The 100,000 of the users' priors' stream means (priorLevelWindow) forgot
// the first half's reading of the 200k mid-sparse stream it was chosen on
// (ROC-AUC of the weight 0.6485 against 0.6597 with no window;
// docs/design/model.md, "The gap's reach").
const gapReachWindow = 1e6

// gapReach is the running mean of the gap path's λ, over the events whose
// weight the gap path gave. The partition model's own, as level: not
// merged, and a checkpoint's delta carries it whole.
type gapReach struct {
	mean float64 // running mean of λ
	n    float64 // events it counts, up to gapReachWindow
}

// learn adds the λ of an event the gap path weighed.
func (r *gapReach) learn(lambda float64) {
	r.n = min(r.n+1, gapReachWindow)
	r.mean += (lambda - r.mean) / r.n
}

// blend is the gap path's blend for an event whose moments give λ: at
// least the running mean.
func (r *gapReach) blend(lambda float64) float64 {
	return max(lambda, r.mean)
}

func (r *gapReach) encode(e *encoder) {
	e.f64(r.mean)
	e.f64(r.n)
}

// decode reads what encode writes, refusing a mean outside [0, 1] or a
// count outside [0, gapReachWindow].
func (r *gapReach) decode(d *decoder) {
	r.mean, r.n = d.f64(), d.f64()
	if d.err == nil && !(unit(r.mean) && r.n >= 0 && r.n <= gapReachWindow) {
		d.fail("gap reach out of range")
	}
}
