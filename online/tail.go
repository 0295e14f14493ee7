package online

// How much of p_clean the gap path trusts: the share of the stream that
// looks like random pairs.
//
// On a stream whose events carry neither dwell nor a ranked event type,
// the weight's level term is p_clean calibrated to the stream's share
// (calibrateTo) with its spread whole wherever the gap says little
// (gapWeight). That trusts the classifier's premise: noise is an
// interaction the user's taste does not explain, which the classifier
// places among the sampled negatives. Where the noise is a pair the user
// chose (a low rating of a film the user went to see), the classifier
// cannot tell it from taste, and p_clean's log-odds spread about five
// times what they carry (MovieLens 100k with ratings ≤ 2 as the noise: a
// logistic fit of the truth on logit(weight) had slope 0.19;
// docs/design/model.md, "Found at stop 66").
//
// The stream says which case it is. Let q be the tailQuantile-quantile
// of the noisy head's η̃₁ over sampled negatives (random pairs). If a
// share ν·(1 − π) of the observed events were random pairs and the rest
// never fell that low, the share of observed events with η̃₁ below q
// would be ν·(1 − π)·tailQuantile; so
//
//	ν = share below q / tailQuantile / (1 − π)
//
// is the part of the stream's noise (1 − π, π the gap instrument's mean
// p_clean) that looks like random pairs, the part p_clean can find. On
// the generated streams without dwell or types the share below q is
// 0.011 to 0.072 of the events, ν from 0.5 to above 1 (their noise kinds
// are pairs taste does not explain); on MovieLens 0.0031 and on DeCA's
// split 0.0044, ν about 0.2. The gap path then draws the level
// term's log-odds towards the share by κ = ν, within [tailTemperMin, 1]:
// where none of the noise looks random, p_clean's reading of it is mostly
// its reading of taste.
//
// The statistics start after levelBurnIn events (the young classifier's
// η̃ says little), and κ departs from 1 only once tailMinMass negatives
// and tailMinMass observed events have been counted. They are the
// model's own, as the level's are: not merged across partitions; a
// checkpoint's delta carries them whole (TAIL). Chosen on MovieLens
// 100k in time order (rating ≤ 2 as the noise): ROC-AUC of the weight
// 0.6022 with κ = 1 (before stop 67), 0.6223 with κ fixed at 0.15, which
// costs DeCA's split 0.005, and 0.6156 with κ = ν; the other streams are
// in docs/design/model.md, "How much p_clean carries on the gap path
// (stop 67)".

const (
	// tailQuantile is the quantile of the negatives' η̃₁ below which an
	// observed event counts as looking like a random pair (stop 66's
	// probe of the mixture proportion used 0.1).
	tailQuantile = 0.1
	// tailStep is the stochastic quantile's step: each negative moves q
	// by tailStep·tailQuantile up or tailStep·(1 − tailQuantile) down.
	tailStep = 0.001
	// tailMinMass is the negatives, and then the observed events, the
	// statistics count before κ departs from 1.
	tailMinMass = 1000
	// tailTemperMin is κ's least value: p_clean keeps a twentieth of its
	// log-odds however little of the noise looks random.
	tailTemperMin = 0.05
)

// tailStats are the running quantile of η̃₁ on sampled negatives and the
// share of observed events below it.
type tailStats struct {
	negatives float64 // first negatives counted
	q         float64 // the running tailQuantile-quantile of their η̃₁
	mass      float64 // observed events counted (after tailMinMass negatives)
	below     float64 // of them, those whose η̃₁ was below q
}

// learnNegative adds a sampled negative of η̃₁ eta to the quantile.
func (t *tailStats) learnNegative(eta float64) {
	if t.negatives == 0 {
		t.q = eta
	}
	t.negatives++
	if eta < t.q {
		t.q -= tailStep * (1 - tailQuantile)
	} else {
		t.q += tailStep * tailQuantile
	}
}

// learnObserved counts an observed event of η̃₁ eta, once the quantile
// has tailMinMass negatives.
func (t *tailStats) learnObserved(eta float64) {
	if t.negatives < tailMinMass {
		return
	}
	t.mass++
	if eta < t.q {
		t.below++
	}
}

// temper is κ for a stream of genuine share share: the share of its
// noise that looks like random pairs, within [tailTemperMin, 1]; 1 until
// the statistics have the mass.
func (t *tailStats) temper(share float64) float64 {
	if t.mass < tailMinMass || !(share > 0 && share < 1) {
		return 1
	}
	nu := t.below / t.mass / tailQuantile / (1 - share)
	return min(1, max(tailTemperMin, nu))
}

func (t *tailStats) encode(e *encoder) {
	e.f64(t.negatives)
	e.f64(t.q)
	e.f64(t.mass)
	e.f64(t.below)
}

// decode reads what encode writes, refusing statistics that no stream
// gives: not finite, negative counts, a quantile outside what its steps
// reach from probabilities (η̃₁ in [0, 1]: one step beyond), observed
// events counted before
// the negatives' mass, or more below q than counted.
func (t *tailStats) decode(d *decoder) {
	t.negatives, t.q, t.mass, t.below = d.f64(), d.f64(), d.f64(), d.f64()
	switch {
	case d.err != nil:
	case !finite([]float64{t.negatives, t.q, t.mass, t.below}):
		d.fail("tail not finite")
	case t.negatives < 0 || t.mass < 0 || t.below < 0 || t.below > t.mass ||
		t.mass > 0 && t.negatives < tailMinMass || t.q < -tailStep || t.q > 1+tailStep:
		d.fail("tail out of range")
	}
}
