package online

import "math"

// Bursts: clicks that come within a few seconds of the user's previous one.
//
// The gap instruments read the gap since the user's previous event as
// dwell is read, short is the more often noise, with a separation they
// assume (rankSeparation) or learn from its covariance with p_clean. Where
// the noise is a click a second or two after a genuine one (a misclick on
// the item beside the one meant, a double tap, a bounce on to the next
// item) and p_clean tells it from taste only weakly (the item beside
// follows taste), that covariance is small and the gap is under-read: on an
// independent generator's streams of that kind (scripts/probe_generator.py,
// stop 69) the weight ranked 0.65–0.73 where the gap alone gave 0.89–0.96.
// Such clicks show in the gap's own distribution: a component of their
// own, centred a second or two after the previous click, apart from the
// gaps of reading (tens of seconds) and of coming back (hours).
//
// So the context keeps a mixture of three Gaussians on log(1 + the gap in
// seconds), capped at sessionGapMS as the instruments read it, learned
// online (a step of EM per event, decayed by contextKeep as the dwell
// mixture is), starting from components at 1.5 s, 30 s and 10 minutes. A
// gap of 0 (two events in the same millisecond, or an event timed before
// the user's previous one) is neither read nor learned, nor is a gap
// counted in events on a stream without time (countgap.go). Once the
// mixture's decayed mass, its start's included, reaches burstMinMass, its
// lowest component is a burst when its centre lies below burstGapSeconds,
// its spread is at least burstMinSpread (a spike of equal gaps is a
// clock's resolution or a batch import, not behaviour), it holds
// between burstMinShare and burstMaxShare of the gaps (a starting
// component that no gap reaches stays where it started, with next to no
// mass), and the classifier, which never reads the gap, agrees: the
// burst's clicks have a mean logit(p_clean) below the other clicks' by
// burstAgreement of its standard deviation and by burstAgreementErrors
// standard errors (verdict: a reader who opens items in tabs within
// seconds sends genuine bursts, which the classifier places no lower than
// the rest). The premise, stated as dwell's direction is (and dropped
// with it: only a model with dwell_direction long has the mixture): a
// click that follows the previous one within seconds of it is more often
// noise. An event's weight then moves by
//
//	burstStrength · (π − r)
//
// in log-odds, r the event's responsibility of the burst component and π
// that component's share: a burst's events down, the others up, so that
// the weight's level (its mean) stays where the rest of the model put it.
// burstStrength is contextClamp, the most one feature's evidence moves a
// weight in this model: not chosen on the streams below, where a larger
// strength ranks the bursty streams higher still.
//
// On the independent generator's bursty streams the burst's clicks lie
// 0.23–0.60 standard deviations of logit(p_clean) below the others; with
// a sixth of the genuine clicks of this project's streams moved to 1–2 s
// after the user's previous one, 0.23–0.28 above, and the agreement keeps
// the mixture from reading them. What it gives up: noise that follows
// taste so closely that the classifier places its clicks no lower than
// the others is not read either (docs/design/model.md, "Bursts"). A burst
// the classifier places above the others is disputed: nothing in the
// model changes (the gap path, which reads quick clicks as noise, still
// runs: where p_clean ranks backwards it is what turns it round), but the
// summary, the replay's report and the service's log say so, for a user
// whose quick clicks are genuine to drop the premise (dwell_direction
// learned).
//
// A burst that is read is also a third view. Its clicks and the others
// are two groups the classifier did not choose, so their distance in
// logit(p_clean), D (pCleanDistance), is the classes' distance where the
// burst is all noise (and less where it is not): the level reads p_clean
// at the discriminant's slope (contextModel.gapLevel, pCleanSlope) and
// the gap instrument reads the gap at a separation between the one its
// covariance with p_clean then gives and the 0.5 s.d. it otherwise
// assumes (contextModel.gapSeparation). A timed click with no previous
// one is no burst (Model.burstOf).
//
// Measured (docs/design/model.md, "Bursts (stop 70)" and "The gap's
// separation from a burst (stop 71)"): on the independent generator's
// streams without dwell or types (C, H) and with types only (F), the
// weight 0.73 → 0.84 → 0.91, 0.69 → 0.74 → 0.78, 0.65 → 0.79 → 0.80;
// on this project's generator, MovieLens and DeCA the lowest component
// lies above burstGapSeconds and no weight moves.
//
// The mixture is the partition model's own, as the level is: not merged
// across partitions; a checkpoint's delta carries it whole (BRST).

const (
	burstComponents = 3
	// burstGapSeconds is the centre below which the lowest component is a
	// burst: about the least time a person takes to look at an item and
	// choose the next (a reading click's gap is tens of seconds).
	burstGapSeconds = 3.0
	// burstMinSpread is the least standard deviation, in log(1 + s), of
	// a burst component: equal gaps (a clock that ticks in seconds, a
	// batch import) make a spike, not a burst.
	burstMinSpread = 0.05
	// burstMinShare and burstMaxShare bound the share of the gaps a
	// burst component holds: a hundredth says too little to read, and
	// most of a stream is not noise.
	burstMinShare = 0.01
	burstMaxShare = 0.5
	// burstMinMass is the gaps' (decayed) mass before the mixture is read.
	burstMinMass = 1000
	// burstStartMass is the mass of the starting components, split
	// evenly: it decays away as gaps are learned.
	burstStartMass = 100
	// burstStrength is the evidence, in log-odds, of a certain burst
	// against a certain non-burst.
	burstStrength = contextClamp
	// burstAgreement is how far, in standard deviations of
	// logit(p_clean), the burst's clicks must lie below the others' for
	// the burst to be read (verdict).
	burstAgreement = 0.1
	// burstAgreementErrors is the same distance in standard errors of the
	// difference of the two means, and burstMinPCleanSpread the least
	// standard deviation of logit(p_clean) the two are measured in (a
	// classifier saturated at its clamp says the same of every click).
	burstAgreementErrors = 3
	burstMinPCleanSpread = 0.25
	// burstMinVariance keeps a component's variance positive, and
	// burstMinComponentMass a component's mass.
	burstMinVariance      = 1e-4
	burstMinComponentMass = 1e-3
)

// burstMaxCentre is burstGapSeconds as the mixture reads a gap, and
// burstMaxX the longest gap it reads (sessionGapMS).
var (
	burstMaxCentre = math.Log1p(burstGapSeconds)
	burstMaxX      = math.Log1p(sessionGapMS / 1000)
)

// burstStart are the starting components' centres and standard
// deviations, in log(1 + seconds): a burst (1.5 s), reading (30 s) and
// coming back (10 minutes).
var burstStart = [burstComponents][2]float64{
	{math.Log1p(1.5), 0.5},
	{math.Log1p(30), 1},
	{math.Log1p(600), 1},
}

// burstMixture holds the mixture's decayed statistics: each component's
// mass, and its sums of x and x² and of a = logit(p_clean) (each event's
// a weighed by its responsibilities), and the sum of a² over all.
type burstMixture struct {
	mass, sum, squares [burstComponents]float64
	pClean             [burstComponents]float64
	pCleanSquares      float64
}

// start sets the starting components.
func (b *burstMixture) start() {
	for k, c := range burstStart {
		m := float64(burstStartMass) / burstComponents
		b.mass[k], b.sum[k], b.squares[k] = m, m*c[0], m*(c[1]*c[1]+c[0]*c[0])
	}
}

// total is the mixture's mass.
func (b *burstMixture) total() float64 {
	return b.mass[0] + b.mass[1] + b.mass[2]
}

// component is component k's centre and variance.
func (b *burstMixture) component(k int) (mean, variance float64) {
	mean = b.sum[k] / b.mass[k]
	return mean, max(b.squares[k]/b.mass[k]-mean*mean, burstMinVariance)
}

// read returns each component's responsibility for x. It starts a
// mixture that has not started.
func (b *burstMixture) read(x float64) (r [burstComponents]float64) {
	if b.total() == 0 {
		b.start()
	}
	// r_k ∝ mass_k/σ_k · exp(−z_k²/2), each exponential taken relative to
	// the largest, whose own is 1: no exponential underflows them all.
	var q, scale [burstComponents]float64
	top := 0
	for k := range q {
		mean, variance := b.component(k)
		d := x - mean
		q[k] = -0.5 * d * d / variance
		scale[k] = b.mass[k] / math.Sqrt(variance)
		if q[k] > q[top] {
			top = k
		}
	}
	s := 0.0
	for k := range r {
		r[k] = scale[k]
		if k != top {
			r[k] *= exp(q[k] - q[top])
		}
		s += r[k]
	}
	for k := range r {
		r[k] /= s
	}
	return r
}

// evidence is the log-odds by which the weight of an event whose
// responsibilities are r (read) moves: burstStrength·(π − r_low) where
// the lowest component is a burst the classifier places below the other
// clicks (verdict), else 0. A timed click with no previous one (a user's
// first) is no burst: its r is all 0, and it moves by burstStrength·π as
// a click long after the previous one does.
func (b *burstMixture) evidence(r *[burstComponents]float64) float64 {
	low, share, side := b.verdict()
	if side >= 0 {
		return 0
	}
	return burstStrength * (share - r[low])
}

// disputed reports whether the classifier places the burst's clicks
// above the others (verdict's side +1).
func (b *burstMixture) disputed() bool {
	_, _, side := b.verdict()
	return side > 0
}

// verdict returns the lowest component and its share, and where the
// classifier places its clicks if it is a burst: side −1 below the other
// clicks (the burst the weight reads), +1 above them (disputed: quick
// clicks the genuine ones, against the premise), 0 neither, or no burst.
// Below or above means the mean logit(p_clean) of the burst's clicks lies
// that side of the rest's by burstAgreement of its standard deviation (at
// least burstMinPCleanSpread) and by burstAgreementErrors standard errors
// of the difference, so that a classifier that tells the burst's clicks
// from the others by no more than chance, or says the same of every
// click, does not move the verdict back and forth.
func (b *burstMixture) verdict() (low int, share float64, side int) {
	low, share, ok := b.candidate()
	if !ok {
		return low, share, 0
	}
	in, out, variance := b.pCleanMoments(low)
	n := b.total()
	sd := math.Sqrt(max(variance, burstMinPCleanSpread*burstMinPCleanSpread))
	se := sd * math.Sqrt(1/b.mass[low]+1/(n-b.mass[low]))
	switch margin := max(burstAgreement*sd, burstAgreementErrors*se); {
	case in-out <= -margin:
		return low, share, -1
	case in-out >= margin:
		return low, share, 1
	}
	return low, share, 0
}

// candidate returns the lowest component and its share, and whether it
// is a burst by the gaps alone: the mixture has the mass, and the
// component lies below burstGapSeconds with a spread and a share.
func (b *burstMixture) candidate() (low int, share float64, ok bool) {
	n := b.total()
	if n < burstMinMass {
		return 0, 0, false
	}
	for k := 1; k < burstComponents; k++ {
		if b.sum[k]/b.mass[k] < b.sum[low]/b.mass[low] {
			low = k
		}
	}
	mean, variance := b.component(low)
	share = b.mass[low] / n
	ok = mean < burstMaxCentre && variance >= burstMinSpread*burstMinSpread && share >= burstMinShare && share <= burstMaxShare
	return low, share, ok
}

// pCleanMoments returns the mean logit(p_clean) of component low's
// clicks and of the other clicks, and its variance over all.
func (b *burstMixture) pCleanMoments(low int) (in, out, variance float64) {
	n := b.total()
	all := b.pClean[0] + b.pClean[1] + b.pClean[2]
	mean := all / n
	return b.pClean[low] / b.mass[low], (all - b.pClean[low]) / (n - b.mass[low]), b.pCleanSquares/n - mean*mean
}

// pCleanSlope is the slope at which the gap path's level
// (contextModel.gapLevel) reads logit(p_clean) where a burst is read, at
// most 1 (the classifier's own log-odds): the
// slope of the Gaussian discriminant, with a variance common to both, of
// the burst's clicks against the others in logit(p_clean),
//
//	D / W,  D = the others' mean − the burst's,  W = var − π(1 − π)·D²
//
// (W the variance within the two groups, at least
// burstMinPCleanSpread²; π the burst's share). If the burst's clicks
// were the noise and the others genuine, D / W would be the slope that
// makes p_clean's log-odds calibrated; the other clicks hold noise too
// (D then understates the classes' distance), so it reads p_clean no
// more steeply than the burst warrants. The classifier's log-odds are
// over-confident on such streams, where the noise follows taste (on the
// independent generator's stream C its logit(p_clean) spreads with
// s.d. 3.2 while its classes' means lie 1.5 apart, and the slope is
// about 0.14). 1 where no burst is read.
func (b *burstMixture) pCleanSlope() float64 {
	d, within, ok := b.pCleanDistance()
	if !ok {
		return 1
	}
	return min(1, d/within)
}

// pCleanDistance is D of pCleanSlope, the others' mean logit(p_clean)
// less the burst's clicks', where a burst is read (then at least the
// verdict's margin, so positive), and W, the variance within the two
// groups; ok false elsewhere.
func (b *burstMixture) pCleanDistance() (d, within float64, ok bool) {
	low, share, side := b.verdict()
	if side >= 0 {
		return 0, 0, false
	}
	in, out, variance := b.pCleanMoments(low)
	d = out - in
	return d, max(variance-share*(1-share)*d*d, burstMinPCleanSpread*burstMinPCleanSpread), true
}

// summary describes the burst the weight reads or the classifier
// disputes, or is nil.
func (b *burstMixture) summary() *BurstSummary {
	low, share, side := b.verdict()
	if side == 0 {
		return nil
	}
	mean, _ := b.component(low)
	if side > 0 {
		return &BurstSummary{CentreSeconds: math.Expm1(mean), Share: share, Disputed: true}
	}
	return &BurstSummary{CentreSeconds: math.Expm1(mean), Share: share, PCleanSlope: b.pCleanSlope()}
}

// learn is one online EM step at x, of an event of a = logit(p_clean),
// whose responsibilities are r (read): the statistics decay by
// contextKeep of their mass and take x and a with r.
func (b *burstMixture) learn(x, a float64, r *[burstComponents]float64) {
	keep := contextKeep(b.total())
	for k, rk := range r {
		if keep*b.mass[k]+rk < burstMinComponentMass {
			continue // a component no gap reaches keeps its place, not decaying to nothing
		}
		b.mass[k] = keep*b.mass[k] + rk
		b.sum[k] = keep*b.sum[k] + rk*x
		b.squares[k] = keep*b.squares[k] + rk*x*x
		b.pClean[k] = keep*b.pClean[k] + rk*a
	}
	b.pCleanSquares = keep*b.pCleanSquares + a*a
}

func (b *burstMixture) encode(e *encoder) {
	for k := range burstComponents {
		e.f64(b.mass[k])
		e.f64(b.sum[k])
		e.f64(b.squares[k])
		e.f64(b.pClean[k])
	}
	e.f64(b.pCleanSquares)
}

// decode reads what encode writes, refusing statistics that no stream
// gives: not finite; in a mixture that has started (one that has not is
// all zeros), a component's mass below burstMinComponentMass, a mass
// above what contextKeep's window holds, or sums that no x in
// [0, log(1 + sessionGapMS in seconds)] gives.
func (b *burstMixture) decode(d *decoder) {
	for k := range burstComponents {
		b.mass[k], b.sum[k], b.squares[k], b.pClean[k] = d.f64(), d.f64(), d.f64(), d.f64()
	}
	b.pCleanSquares = d.f64()
	switch {
	case d.err != nil:
	case !finite(b.mass[:]) || !finite(b.sum[:]) || !finite(b.squares[:]) || !finite(b.pClean[:]) || !finite([]float64{b.pCleanSquares}):
		d.fail("burst mixture not finite")
	case *b == burstMixture{}:
	case min(b.mass[0], b.mass[1], b.mass[2]) < burstMinComponentMass || b.total() > 2*contextWindow:
		d.fail("burst mixture out of range")
	default:
		maxA := logOdds(1) * (1 + 1e-9) // |logit(p_clean)| at most
		for k := range burstComponents {
			top := b.mass[k] * burstMaxX * (1 + 1e-9)
			if b.sum[k] < 0 || b.sum[k] > top || b.squares[k] < 0 || b.squares[k] > top*burstMaxX || math.Abs(b.pClean[k]) > b.mass[k]*maxA {
				d.fail("burst mixture out of range")
				return
			}
		}
		if b.pCleanSquares < 0 || b.pCleanSquares > b.total()*maxA*maxA {
			d.fail("burst mixture out of range")
		}
	}
}
