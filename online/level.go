package online

// The context posterior's level: where its mean lies. The posterior's
// prior log-odds, the centre, are the anchor's share: the mean p_clean
// over the statistics' window (contextWindow events). p_clean's level
// is not stationary where the catalogue grows: on the sparse v2 stream
// (60,000 users, 40,000 items, 200k events, seed 1) its mean fell from
// 0.885 in the first eighth of the stream to 0.574 in the last while the
// genuine share stayed at 0.80 (sampled negatives spread over an ever
// larger catalogue), and the weight's mean fell with it, from 0.85 to
// 0.59: its calibration error was 0.090, and events of the stream's end
// ranked below those of its start (ROC-AUC 0.828 over the stream, 0.835
// to 0.848 within each quarter). On the dense stream of the same seed the
// mean fell from 0.851 to 0.749 (genuine share 0.80).
//
// So the level is a statistic of the stream's whole history: the running
// mean of p_clean over every event the model learned after its first
// levelBurnIn, and the posterior is moved by the log-odds of that mean
// less the centre. It states a premise: a stream's genuine share is
// stationary, so what p_clean's mean loses over the stream is the
// model's drift, not the stream's. Where the share changes (a bot
// campaign starts), the level follows the change at the speed of a
// running mean, 1/n, where the centre follows it within contextWindow
// events, and so do the slopes and midpoints, which rank the events of a
// period (docs/design/model.md, "The posterior's level").
//
// The first events are left out: while the classifier is young, p_clean
// sits above the genuine share whatever the noise (0.875 over the first
// 12,500 events of a v2 stream whose genuine share was 0.70), and a
// running mean would carry that for good.

// levelBurnIn is the number of events the model learns before the level
// starts: twice the context statistics' window. Chosen on seed 1 of the
// sparse and the dense v2 200k streams and seed 5 of the v2 100k stream
// at 30 % noise, against a level from the first event (docs/design/model.md).
const levelBurnIn = 2 * contextWindow

// levelMinMass is the number of events the level needs before it moves
// the posterior.
const levelMinMass = 100

// levelStats is the running mean of p_clean behind the level. It is the
// model's own: a partition model's level is of its own events, and it is
// not merged with other partitions' (mergecontext.go); a checkpoint's
// delta carries it whole.
type levelStats struct {
	seen float64 // events learned, the burn-in's included
	mass float64 // events in the mean: seen − levelBurnIn, at least 0
	sum  float64 // Σ p_clean over them
}

// learn adds an event of p_clean pClean.
func (l *levelStats) learn(pClean float64) {
	l.seen++
	if l.seen > levelBurnIn {
		l.mass++
		l.sum += pClean
	}
}

// shift is the log-odds by which the level moves a posterior whose prior
// log-odds are centre: logit(mean p_clean) − centre, 0 until the mean
// holds levelMinMass events.
func (l *levelStats) shift(centre float64) float64 {
	if l.mass < levelMinMass {
		return 0
	}
	return logOdds(l.sum/l.mass) - centre
}

func (l *levelStats) encode(e *encoder) {
	e.f64(l.seen)
	e.f64(l.mass)
	e.f64(l.sum)
}

// decode reads what encode writes, refusing statistics that no stream
// gives: not finite, negative, a mass beyond the events seen less the
// burn-in or a sum beyond the mass.
func (l *levelStats) decode(d *decoder) {
	l.seen, l.mass, l.sum = d.f64(), d.f64(), d.f64()
	switch {
	case d.err != nil:
	case !finite([]float64{l.seen, l.mass, l.sum}):
		d.fail("level not finite")
	case l.seen < 0 || l.mass < 0 || l.sum < 0 || l.mass > max(l.seen-levelBurnIn, 0) || l.sum > l.mass:
		d.fail("level out of range")
	}
}
