package online

import (
	"math"
	"slices"
	"strings"
)

// The context part: what an event carries beside (user, item) that the
// classifier cannot see, turned into evidence about whether the event is
// genuine. Two features today, both of an observed event only:
//
//   - log(1 + dwell_ms), a Gaussian per class, left out (marginalised) when
//     the event has no dwell: a missing dwell is never read as zero;
//   - the event type ("click", "view", ...), a categorical per class over
//     typeBuckets slots: the first namedTypes distinct types of the stream
//     get a slot each, in the order they first appear, and any further
//     type shares the last. Until encoding version 7 the slot was an
//     FNV-1a hash of the type mod 16, and the five types of a shop's
//     stream (view, click, cart, purchase, return) fell into three
//     buckets: click, cart and return shared one, though a cart is the
//     surest sign of a genuine event and a return the surest of noise
//     (docs/design/model.md, "Event types: a slot each").
//
// The two classes are anchored by the classifier: an event's prior of being
// genuine is its p_clean, and the class-conditional densities are fitted by
// online EM from the posterior, with statistics that decay over about
// contextWindow events once they have learned from about 20,000 events
// (contextGrowth: young statistics forget faster). The genuine class is
// by construction the one the classifier calls clean, so no feature's
// direction is assumed (long dwell = genuine is learned, not written in)
// and the classes cannot swap. Once the context is informed, the
// posterior, which is Score.Weight then, is p_clean updated by the
// evidence, with m the log-odds of the mean p_clean:
//
//	logit(posterior) = m + pCleanTemper·(logit(p_clean) − m) + Σ log p(c | genuine) / p(c | noise)
//
// EM sharpens: it fits the classes to the posterior it computes from
// them, so it finds the direction the anchor points to and separates the
// classes further than p_clean alone could. When p_clean is near chance
// (a cap far below the working set leaves the classifier nothing to
// learn), the anchor points nowhere and EM can settle the wrong way round:
// it ranked noise above genuine events (ROC-AUC 0.12) on such a stream. So
// a second set of statistics, the anchor's, is fitted to p_clean alone,
// with no feedback from the context. Each feature's EM evidence is used
// only while it points the way the anchor's does (dwell: the sign of the
// difference of the class means; event type: the mass-weighted agreement
// of the per-type log ratios); otherwise the anchor's own, weaker,
// evidence is used. The anchor's direction is the direction p_clean
// carries, and no feature's direction is assumed.
//
// Dwell is the exception when the configuration says so
// (Config.DwellDirection "long", the default): its evidence is then a
// two-component mixture on log dwell fitted to dwell alone, its longer
// component the genuine one (dwellMixture). That states dwell's direction,
// the premise of dwell-based denoising (a short dwell is a bounce or a
// misclick), and frees dwell from p_clean: on a stream where the
// classifier's classes barely differ in dwell, or differ the wrong way (a
// sparse catalogue, where p_clean learns popularity), the anchored
// statistics learn dwell with p_clean's error and EM sharpens it, while
// the mixture reads dwell as it is
// (docs/design/model.md, "Dwell read as the premise says"). With dwell's
// direction stated, dwell also serves as an instrument (instrumentStats):
// its covariance with a feature reveals how far the feature's classes lie
// apart, and in which direction, with no label and no direction assumed.
// The posterior then weighs p_clean, the user's activity so far, the
// pair's repeats and the item's accumulated step by a linear discriminant
// fitted that way:
//
//	logit(posterior) = m + Σ_j s_j·(z_j − mid_j) + evidence of dwell and type
//
// in place of pCleanTemper·(logit(p_clean) − m) (docs/design/model.md,
// "The instrument"). The event type's evidence keeps the learned
// statistics, its direction the stream's, but with an event order
// (Config.EventOrder) the order, not the anchor, says which statistics'
// direction holds (typeEvidence), and on a stream without dwell the
// type's rank is the instrument (rankInstrument); on a stream with neither
// dwell nor ranked types, the gap since the user's previous event, as far
// as it moves with p_clean (gapWeight). Dwell's evidence is scaled, per event type,
// by how far dwell's classes lie apart within the type against all types
// (dwellGate, dwellgate.go): within a type where dwell says nothing, it
// adds only noise.
const (
	// contextWindow is the number of events the statistics decay over
	// once they have learned long enough (contextGrowth).
	contextWindow = 5000
	// contextGrowth sets the statistics' window while they are young: the
	// newest event weighs 1/L, with L = contextGrowth·(mass so far) + 1
	// (at least contextMinWindow, at most contextWindow). The mass then
	// grows by 1 − 1/contextGrowth = 0.2 per event and the window with it,
	// about a quarter of the events seen, until it reaches contextWindow
	// after about 20,000 events. Online EM (Cappé and Moulines, "Online
	// EM algorithm for latent data models", 2009) moves each statistic a
	// step γ towards the newest event's; a step that falls off slower than
	// 1/n forgets the posteriors computed with the first, poorer fits
	// sooner: the fit makes about fifteen EM rounds in the first 10,000
	// events where a plain running mean (γ = 1/n) makes about four.
	// Batch EM over the first 10,000 events of the v2 stream needed about
	// twenty rounds to converge (docs/design/model.md, "The context's
	// first events"). Chosen on seed 1 of the v2 100k stream and the
	// demo's log (20k events) among 1.1, 1.25, 1.5 and 2.
	contextGrowth    = 1.25
	contextMinWindow = 20
	// pCleanTemper is the factor on p_clean's log-odds in the posterior,
	// once the context has evidence to add (contextModel.weight). p_clean
	// is over-dispersed: its log-odds spread further than its ranking
	// supports (see weightTemper, which draws the posterior's in for the
	// same reason), and added at full strength it outvotes the context's
	// evidence. Chosen on seed 1 of the v2 100k stream and the demo's log
	// among 0.6, 0.8 and 1 (docs/design/model.md, "The context's first
	// events").
	pCleanTemper = 0.8
	// instrumentWithinFloor is the least share of a feature's variance
	// that the instrument leaves within the classes (instrumentStats.fit):
	// where dwell is weak the estimated class separation is noisy, and a
	// within-class variance near zero would turn that noise into a steep
	// slope. Chosen on seed 1 of the v2 200k stream among 0.2 and 0.5 (no
	// difference there: the floor holds only while the stream is young).
	instrumentWithinFloor = 0.2
	// contextMinMass is the decayed mass each class needs in a feature
	// before the feature counts as evidence.
	contextMinMass = 50
	// typeBuckets is the number of event-type slots: namedTypes named
	// ones and one for every type after them.
	typeBuckets = 16
	namedTypes  = typeBuckets - 1
	// contextClamp bounds the context's summed log-likelihood ratio (the
	// evidence), so that the context can move p_clean's odds by at most
	// e³ ≈ 20 either way. A Gaussian's log-likelihood ratio grows with the
	// square of the distance in the tails, where its fit has the fewest
	// events; unbounded, it outvotes p_clean on exactly the events the
	// densities describe worst. Chosen on seed 1 of the v1 (200k) and v2
	// (100k, dwell on every event) generated streams among 2…6 and 8 per
	// feature (docs/design/model.md, "The weight to train on").
	contextClamp = 3.0
	// pCleanFloor keeps logit(p_clean) finite.
	pCleanFloor = 1e-6
	// varianceFloor keeps a class's dwell variance positive.
	varianceFloor = 1e-3
)

// contextModel is the context part: the EM statistics, fitted to the
// posterior (the weight), and the anchor's, fitted to p_clean.
type contextModel struct {
	contextSums
	// long is Config.DwellDirection == DwellLong: dwell's evidence is
	// then mix's, and the anchored statistics' is not read.
	long bool
	// types names the event-type slots, in the order the types first
	// appeared (at most namedTypes; slot namedTypes is every later type).
	// It only grows, so a frozen copy may share its array.
	types []string
	// acc, while the model shares (StartSharing), accumulates what the
	// model's own events add to the statistics and to the rank and gap
	// instruments' moments since its last Publish (mergecontext.go); nil
	// otherwise. Not encoded.
	acc *contextAcc
	// ranks is each type name's place in Config.EventOrder, keyed in
	// lower case (rankOf), nil without an order or without long (read
	// only then). It never changes, so a frozen copy shares it.
	ranks map[string]float64
	// slotRanks is the rank of each of types, NaN for a type the order
	// does not list; nil without ranks. It grows with types. spread
	// reports that it holds two ranks or more: until then the rank has no
	// spread to be an instrument with, and its moments are not learned
	// (a stream of clicks only would pay for them on every event).
	slotRanks []float64
	spread    bool
	// rank is the instrument of streams without dwell: the event type's
	// rank in place of log dwell (rankInstrument). Its moments are merged
	// across partitions, its level offset is the partition model's own
	// (mergecontext.go).
	rank rankInstrument
	// gap is the instrument of streams with neither dwell nor event
	// types the order ranks apart: the gap since the user's previous
	// event in place of log dwell (gapWeight). Merged as rank.
	gap rankInstrument
	// level moves the posterior of a model with long to the running
	// mean of p_clean (level.go). The partition model's own, as the
	// instruments' level offsets are: not merged.
	level levelStats
	// countGap is the scale of the gaps counted in events, on streams
	// without time (countgap.go). The partition model's own, as level.
	countGap countGapStats
	// prior is the stream's mean weight behind the users' priors
	// (userprior.go). The partition model's own, as level.
	prior priorLevel
	// reach is the running mean of the gap path's blend (gapreach.go).
	// The partition model's own, as level.
	reach gapReach
	// itemLevel is the stream's mean weight behind the items' priors
	// (itemprior.go). The partition model's own, as level.
	itemLevel priorLevel
	// tail is the share of the stream that looks like random pairs, which
	// tempers p_clean on the gap path (tail.go). The partition model's
	// own, as level.
	tail tailStats
	// burst is the mixture of the gaps that finds clicks in bursts
	// (burst.go). The partition model's own, as level.
	burst burstMixture
}

// newContextModel is the context part of a model of configuration cfg.
func newContextModel(cfg Config) contextModel {
	c := contextModel{long: cfg.DwellDirection == DwellLong}
	if c.long {
		c.burst.start()
	}
	if c.long && len(cfg.EventOrder) > 0 {
		c.ranks = make(map[string]float64, len(cfg.EventOrder))
		for r, entry := range cfg.EventOrder {
			for _, t := range strings.Split(entry, typeSynonyms) {
				c.ranks[strings.ToLower(t)] = float64(r)
			}
		}
	}
	return c
}

// rankOf is kind's rank in the order, its case ignored, and whether the
// order lists it. The lookup allocates nothing: a kind in lower case (the
// common one) is found in ranks at once, any other by folding.
func (c *contextModel) rankOf(kind string) (float64, bool) {
	if r, ok := c.ranks[kind]; ok {
		return r, true
	}
	for t, r := range c.ranks {
		if strings.EqualFold(t, kind) {
			return r, true // the names differ when folded (Config.Validate), so one at most
		}
	}
	return 0, false
}

// contextSums are the context's decayed statistics.
type contextSums struct {
	em, anchor contextStats
	mix        dwellMixture
	// inst is the instrument, learned with mix.
	inst instrumentStats
	// gate scales mix's evidence by event type (dwellgate.go), learned
	// with mix.
	gate dwellGate
}

// contextStats holds the decayed sufficient statistics of the two classes
// (index 0: noise, 1: genuine).
type contextStats struct {
	dwellMass, dwellSum, dwellSquares [2]float64
	typeMass                          [2][typeBuckets]float64
	typeTotal                         [2]float64
}

// contextFeatures is what the context part reads of one event.
type contextFeatures struct {
	logDwell float64
	hasDwell bool
	bucket   int // -1: no event type
	// z holds the instrument's features (instrumentFeatures) other than
	// logit(p_clean), which the posterior is given: the user's events so
	// far, the pair's repeats among the user's latest items, the item
	// row's accumulated step and the seconds since the user's previous
	// event, each as log(1 + v). hasZ is false for a cold user or item,
	// which has none; hasGap is false where the event or the user's
	// previous events carry no time, and the gap then stands at its mean
	// (instrumentStats.impute).
	z      [instrumented - 1]float64
	hasZ   bool
	hasGap bool
	// rank is the event type's place in Config.EventOrder; ranked is
	// false for an event without a type or with one the order does not
	// list.
	rank   float64
	ranked bool
	// outOfOrder is true for an event of a listed type that the classifier
	// ranks out of order (contextModel.outOfOrder): ranked is then false,
	// and the posterior is the anchored one on every path.
	outOfOrder bool
	// countGap is log(1 + the events learned since the user's previous
	// event) where neither that event nor this one carries a time; counted
	// is false otherwise (countgap.go). The gap in z is then this count
	// read as seconds, once the scale has the mass.
	countGap float64
	counted  bool
}

// features extracts the context of ev, giving its event type a slot if
// it is new and a slot is free. Dwell is left out in dwell mode, where it
// is the label itself.
func (c *contextModel) features(ev *Event, mode string) contextFeatures {
	x := contextFeatures{bucket: -1}
	if ev.HasDwell && ev.DwellMS >= 0 && mode != ModeDwell {
		x.logDwell, x.hasDwell = math.Log1p(float64(ev.DwellMS)), true
	}
	if ev.Kind != "" {
		x.bucket = c.typeSlot(ev.Kind)
		switch {
		case c.ranks == nil:
		case x.bucket == namedTypes: // the shared last slot
			x.rank, x.ranked = c.rankOf(ev.Kind)
		default:
			x.rank = c.slotRanks[x.bucket]
			x.ranked = !math.IsNaN(x.rank)
			if x.ranked && c.outOfOrder(x.bucket) {
				x.ranked, x.outOfOrder = false, true
			}
		}
	}
	return x
}

// outOfOrder reports whether the classifier ranks slot b's events below
// those of a type the order ranks below b by more than orderSlack: the
// anchor's type evidence of b (the log-odds of its mean p_clean, up to
// the stream's) is below that of a lower-ranked slot by more than
// orderSlack, both slots with the mass (contextMinMass). Such a type is
// read as unranked: the rank instrument neither learns nor scores its
// events, and neither
// instrument weighs them (posterior): their posterior is the anchored
// one, p_clean with the context's evidence, as before the context is
// informed. Dwell's instrument reads p_clean's separation through its
// covariance with dwell as the rank's does with the rank, and a type
// whose noise carries a genuine event's dwell breaks it as it breaks the
// order (purchases later returned, on a stream with dwell: 0.788 with
// the dwell instrument, 0.958 without it for them). The order is a
// premise; a stream can break it for one type, as a stream whose noise
// is purchases later returned breaks it for purchases (half of them noise,
// their mean p_clean 0.62 against carts' 0.86): the rank then gave them
// the most engaged type's weight, and the weight ranked 0.66 against
// p_clean's 0.85 (docs/design/model.md, "Purchases that are the noise").
// It compares the slots' mass ratios, with no logarithm (typeEvidence's
// smoothing, exponentiated).
func (c *contextModel) outOfOrder(b int) bool {
	s := &c.anchor
	if !s.typeReady() {
		return false
	}
	rb := c.slotRanks[b]
	if s.typeMass[0][b]+s.typeMass[1][b] < contextMinMass {
		return false // too few of b's events to rank them (one purchase among 5,000 events was out of order)
	}
	p1b, p0b := s.typeMass[1][b]+1, s.typeMass[0][b]+1
	for a, ra := range c.slotRanks {
		if !(ra < rb) || s.typeMass[0][a]+s.typeMass[1][a] < contextMinMass {
			continue // NaN (unlisted) or not lower; or without the mass
		}
		// evidence(a) − evidence(b) > orderSlack, the totals cancelling
		if (s.typeMass[1][a]+1)*p0b > orderSlackRatio*(s.typeMass[0][a]+1)*p1b {
			return true
		}
	}
	return false
}

// orderSlack is how far, in log-odds, the classifier may rank a type
// below a lower-ranked one before the type counts as out of order
// (outOfOrder): the generated streams' types break the default order by
// up to 0.18–0.23 in their mean p_clean's log-odds where it holds for the
// truth or nearly (v2 dense: carts 0.845 against purchases 0.816; the
// misclick stream: views 0.806 against clicks 0.768; the sparse stream,
// where p_clean ranks backwards: returns 0.781 against purchases 0.749),
// and by 1.3 where a type is half noise (purchases later returned).
// Chosen on that stream (seed 606) among 0.25, 0.5, 1 and 2 (the weight
// 0.9379 / 0.9349 / 0.9237 / 0.6614) as the least with twice the ordinary
// streams' gap; no other stream tried moved at 0.5 (docs/design/model.md).
const orderSlack = 0.5

var orderSlackRatio = exp(orderSlack)

// slots is the number of event-type slots in use or ever used: the named
// ones, and the shared last one once every named slot is taken.
func (c *contextModel) slots() int {
	if len(c.types) == namedTypes {
		return typeBuckets
	}
	return len(c.types)
}

// typeSlot is kind's slot: its own if it has one or one is free (a copy
// of kind is kept then), else the shared last slot.
func (c *contextModel) typeSlot(kind string) int {
	for j, t := range c.types {
		if t == kind {
			return j
		}
	}
	if len(c.types) == namedTypes || len(kind) > maxIDBytes {
		return namedTypes
	}
	c.types = append(c.types, strings.Clone(kind))
	c.rankSlots()
	return len(c.types) - 1
}

// rankSlots brings slotRanks up to types: the rank of each, NaN for a
// type the order does not list.
func (c *contextModel) rankSlots() {
	if c.ranks == nil {
		return
	}
	c.slotRanks = c.slotRanks[:min(len(c.slotRanks), len(c.types))]
	for _, t := range c.types[len(c.slotRanks):] {
		r, ok := c.rankOf(t)
		if !ok {
			r = math.NaN()
		}
		c.slotRanks = append(c.slotRanks, r)
	}
	c.spread = false
	first := math.NaN()
	for _, r := range c.slotRanks {
		switch {
		case math.IsNaN(r):
		case math.IsNaN(first):
			first = r
		case r != first:
			c.spread = true
		}
	}
}

// levelShare is the share the posterior's mean is to have: the anchor's
// share moved by the level (level.go).
func (c *contextModel) levelShare() float64 {
	centre := c.anchor.share()
	if c.long {
		centre += c.level.shift(centre)
	}
	return sigmoid(centre)
}

// weight returns the posterior that the event is genuine given its p_clean
// and its context: p_clean until the context has evidence to add
// (informed), posterior after.
func (c *contextModel) weight(pClean float64, x contextFeatures) float64 {
	if !c.informed() {
		return pClean
	}
	p, _ := c.posterior(pClean, x, 0)
	return p
}

// posterior is the informed context's posterior (the formula at the top).
// share is the genuine share π that the instrument divides the classes'
// covariances by: the mixture's reliable share once it is fitted
// (Model.reliableShare), else 0, and then the mean p_clean of the anchor's
// statistics. The mean p_clean is the worse estimate there: T̂ explains
// part of the observed events as noise, and on the v2 stream it stayed at
// 0.69–0.75 where the genuine share was 0.80 (the mixture's: 0.84). The
// class separations are cov/(π(1 − π)·Δx), so a π too far from the middle
// shrank them, and with them p_clean's slope in the posterior, by about a
// third. The posterior's level, its prior log-odds (the centre) and the
// midpoints of the class means, keeps the mean p_clean: it follows the
// stream's noise share, which the mixture's share, 0.81–0.84 at every
// noise share tried, does not (docs/design/model.md, "The instrument's
// share"). With long, the level then moves the posterior's log-odds by
// its shift (level.go): from the mean p_clean of the statistics' window
// to that of the stream's history.
func (c *contextModel) posterior(pClean float64, x contextFeatures, share float64) (p float64, path contextPath) {
	r := c.read(pClean, x, share)
	return r.p, r.path
}

// dwellReach is how far dwell's instrument weighs an event, in [0, 1]:
// the larger of |corr(logit p_clean, log dwell)| and corr(capped log gap,
// log dwell), over gapCorrelationScale, as the gap path's λ is (gapWeight);
// 1 until the statistics give the correlations. Below 1 the posterior's
// log-odds are blended with the anchored posterior's without dwell's
// evidence (read).
//
// Dwell's instrument takes its direction from the premise (a long dwell
// is genuine) and its separation from the dwell mixture's two components,
// which a dwell that says nothing of the class splits as readily as one
// that does; p_clean's class means then come from its covariance with
// dwell, about 0, and p_clean drops out of the weight. Until stop 72 a
// dwell drawn at random (one lognormal for every event) took gen v2
// stripped of dwell and types, and a uniform-misclick stream, from 0.889
// and 0.856 to 0.513, and the independent generator's idle tabs (noise
// that dwells longer: probe D, E) ranked backwards at 0.25–0.26. Two views
// that both carry the class covary: p_clean, in either direction (on a
// sparse catalogue it ranks backwards), and the gap before the event, in
// the premise's (a short gap and a short dwell are both the noise's); the
// gap keeps dwell where the classifier is fooled (clickbait: probe G,
// where p_clean and dwell barely covary). Dwell that covaries with
// neither is read by as much as it does (docs/design/model.md, "Dwell's
// reach (stop 72)").
func (c *contextModel) dwellReach() float64 {
	s, m := &c.inst, &c.mix
	n := m.mass[0] + m.mass[1]
	if s.mass < contextMinMass || !(n > 0) {
		return 1
	}
	// dwell's variance from the mixture's moments: the instrument keeps
	// Σ x but not Σ x².
	md := (m.sum[0] + m.sum[1]) / n
	vd := m.squares/n - md*md
	ma, mx := s.sum[0]/s.mass, s.dwell/s.mass
	va := s.squares[0]/s.mass - ma*ma
	if !(va > 0 && vd > 0) {
		return 1
	}
	r := math.Abs(s.cross[0]/s.mass-ma*mx) / math.Sqrt(va*vd)
	const g = gapFeature + 1 // the gap's index among the instrument's features
	mg := s.sum[g] / s.mass
	if vg := s.squares[g*instrumented-g*(g-1)/2]/s.mass - mg*mg; vg > 0 {
		r = max(r, (s.cross[g]/s.mass-mg*mx)/math.Sqrt(vg*vd))
	}
	return min(1, r/gapCorrelationScale)
}

// contextReading is the context's posterior p of an event and the path
// that gave it, and what the gap path takes of it (readsGap). For an event
// that the rank instrument read: level, the anchored posterior without
// the type's evidence, the gap path's level, and own, the type's own
// evidence (the rank's log-likelihood ratio at pCleanTemper), which the
// gap path adds to its weight whole rather than blend it away with the
// level. For one that dwell's instrument read: reach, dwellReach; where it
// is below 1, level, the anchored posterior without dwell's evidence (the
// type's kept), and dwell, the instrument's log-odds, which the gap
// path's weight is blended with by reach.
type contextReading struct {
	p, level, own, dwell, reach float64
	path                        contextPath
}

// read is posterior with what the gap path takes of it (contextReading).
func (c *contextModel) read(pClean float64, x contextFeatures, share float64) contextReading {
	centre, a := c.anchor.share(), logOdds(pClean)
	shift := 0.0
	if c.long {
		shift = c.level.shift(centre)
		level := sigmoid(centre)
		if share <= 0 {
			share = level
		}
		// A type out of order gets the anchored posterior below, neither
		// instrument's (outOfOrder).
		if !x.outOfOrder {
			if t, ok := c.instrument(share, level, x.hasZ); ok {
				p := shift + centre + t.evidence(a, c.inst.impute(&x, dwellGapCap)) + c.evidence(x)
				reach := c.dwellReach()
				if reach >= 1 {
					return contextReading{p: sigmoid(p), path: pathDwell, reach: 1}
				}
				without := x
				without.hasDwell = false
				level := shift + centre + pCleanTemper*(a-centre) + c.evidence(without)
				return contextReading{p: sigmoid((1-reach)*level + reach*p), level: sigmoid(level), dwell: p, reach: reach, path: pathDwell}
			}
			if t, ok := c.rank.fit(share, level, rankSeparation, x.hasZ, 0); ok {
				own := c.rankEvidence(x, &t)
				without := x
				without.bucket = -1
				return contextReading{
					p:     sigmoid(shift + centre + c.rank.offset + pCleanTemper*(t.evidence(a, c.rank.stats.impute(&x, rankGapCap))+own)),
					level: sigmoid(shift + centre + pCleanTemper*(a-centre) + c.evidence(without)),
					own:   pCleanTemper * own,
					path:  pathRank,
				}
			}
		}
	}
	return contextReading{p: sigmoid(shift + centre + pCleanTemper*(a-centre) + c.evidence(x)), path: pathAnchored}
}

// contextPath says which formula gave a posterior: the anchored one
// (p_clean and the learned evidence; also p_clean calibrated, before the
// context is informed), dwell's instrument or the rank instrument's.
type contextPath uint8

const (
	pathAnchored contextPath = iota
	pathDwell
	pathRank
)

// source is the WeightSource of a posterior of path p.
func (p contextPath) source() WeightSource {
	switch p {
	case pathDwell:
		return SourceDwell
	case pathRank:
		return SourceEventType
	}
	return SourceContext
}

// gapReading is what gapWeight gives for an event: the weight w, the gap
// instrument's posterior g, λ (the correlation's blend of the moments as
// they are, which gapReach learns), the blend b used, the larger of λ
// and its running mean, and pool, the share of the priors' shift the
// weight takes (priorOf).
type gapReading struct {
	w, g, lambda, blend, pool float64
}

// gapWeight is the weight of an event that readsGap gives the gap path:
// one of a stream whose events carry neither dwell nor an event type the
// order ranks apart (none at all, or clicks only), and since stop 72 one
// whose type the rank instrument read, or whose dwell does not reach
// (dwellReach), with the anchored posterior without the type's or dwell's
// evidence as its level (contextReading). Until stop 43 its weight was
// level: the classifier's p_clean drawn towards the mixture's share
// (Model.calibrate), or, once the context has seen event types, the
// anchored posterior; on a sparse catalogue p_clean ranks backwards
// (docs/design/model.md, "The gap as the instrument of streams without
// dwell or type"). The gap since the user's previous event, capped at
// shortClickMS (rankGapCap), takes the event type's rank's place in a
// rankInstrument over p_clean alone, its direction stated as dwell's is:
// a short gap is the more often noise (the rapid clicks of a bounce
// chain, a misclick corrected). p_clean's slope may fall below 0, to
// gapPCleanFloor, where the gap says p_clean ranks backwards (a sparse
// catalogue). The counts are left out: a user's
// activity and a pair's repeats move with the gap within a class (an
// active user's events come close together), against the premise that a
// feature and the instrument are independent given the class.
//
// An instrument that covaries with nothing cannot say how much p_clean
// carries, and the separation it assumes (rankSeparation) would then give
// p_clean no weight. So the instrument's posterior g is blended with the
// level by b, the larger of λ = min(1, |corr(logit p_clean, gap)| /
// gapCorrelationScale) and λ's running mean over the stream (gapReach):
//
//	logit(w) = (1 − b)·logit(level) + b·logit(g)
//
// The reading holds λ for the running mean to learn (Step). share is the
// instrument's own mean p_clean (pCleanShare), 0 (no fit) before it has
// the mass. Until stop 46 it was the mixture's reliable
// share, which on a sparse catalogue is no genuine share at all: the
// mixture's reliable component held 0.38 of the events of the sparse v2
// stream (seed 5) whose genuine share was 0.80, where the mean p_clean
// was 0.745, and the weight's mean stood at 0.70 (ECE 0.10). ok is
// false until the instrument has the mass and the gap a spread, and
// without the dwell mixture (Config.DwellDirection "learned" reads no
// instrument); the caller then keeps the level, and after learning moves
// the instrument's level offset (rankInstrument.followGap) from g
// towards the level.
func (c *contextModel) gapWeight(level, pClean float64, x contextFeatures, share float64) (r gapReading, ok bool) {
	if !c.long {
		return gapReading{}, false
	}
	sep := c.gapSeparation(share)
	t, ok := c.gap.fit(share, share, sep, false, gapPCleanFloor)
	if !ok {
		return c.gap.flatGap(level, share, x)
	}
	s := &c.gap.stats
	ma, mg := s.sum[0]/s.mass, s.dwell/s.mass
	va, vg := s.squares[0]/s.mass-ma*ma, c.gap.squares/s.mass-mg*mg // vg ≥ rankMinVariance (fit)
	if !(va > 0) {
		return gapReading{}, false
	}
	dx := sep * math.Sqrt(vg)
	lambda := min(1, math.Abs(s.cross[0]/s.mass-ma*mg)/math.Sqrt(va*vg)/gapCorrelationScale)
	evidence := t.evidence(logOdds(pClean), x.z)
	if x.hasGap {
		evidence += clampAbs(t.rankSlope*(min(x.z[gapFeature], rankGapCap)-t.rankMid), contextClamp)
	}
	g := sigmoid(c.gap.offset + pCleanTemper*evidence)
	b := c.reach.blend(lambda)
	w := sigmoid((1-b)*logOdds(level) + b*logOdds(g) + c.gap.activityEvidence(share, mg, vg, dx, x) + c.gap.popularityEvidence(share, mg, vg, dx, x))
	return gapReading{w: w, g: g, lambda: lambda, blend: b, pool: b}, true
}

// readsGap reports whether the gap path (gapWeight) weighs an event read
// as r: one that no instrument read (anchored); one that the event type's
// rank read (rank) unless the classifier disputes the burst
// (burstMixture.verdict, side +1: quick clicks placed above the others);
// and one that dwell's instrument read, as far as dwell does not reach
// (dwellReach below 1; dwell's instrument reads the gap as its fifth
// feature, but weighs it as it weighs dwell).
//
// Until stop 72 the rank's events were not read by the gap: on streams
// with event types and no dwell the type's instrument gave the weight,
// with p_clean in it at the strength of a calibrated score, and the gap
// only as a feature whose class means came from the rank. On the
// independent generator's typed streams (scripts/probe_generator.py)
// that left the weight 0.13–0.42 below user_gap. Their events are now
// weighed as an untyped stream's are, from the anchored posterior
// without the type's evidence, and the type's own evidence is added to
// that weight whole (contextReading): they gained 0.03–0.30
// (docs/design/model.md, "The gap on the event type's path"). Where the
// burst is disputed the types keep the weight alone: on this project's
// typed stream with 15 % of its genuine clicks made quick, reading the
// gap there too cost 0.017, the gate 0.001.
func (c *contextModel) readsGap(r *contextReading) bool {
	switch r.path {
	case pathRank:
		return !c.burst.disputed()
	case pathDwell:
		return r.reach < 1
	}
	return true
}

// gapLevel is the gap path's level at share (the gap instrument's mean
// p_clean, positive): posterior, p_clean, calibrated, where fromPClean,
// else the context's anchored posterior weight (a stream of one event
// type, whose p_clean term is all that varies there), drawn towards the
// share by the part of the noise that looks like random pairs (tail.go)
// and, where a burst is read, by the slope at which p_clean's log-odds
// tell the burst's clicks from the others (burstMixture.pCleanSlope).
// Both 1 leave the bits as they were.
func (c *contextModel) gapLevel(posterior, weight, share float64, fromPClean bool) float64 {
	switch k := c.tail.temper(share) * c.burst.pCleanSlope(); {
	case fromPClean:
		return temperTo(posterior, share, k*weightTemper)
	case k < 1:
		return temperTo(weight, share, k)
	}
	return weight
}

// gapSeparation is the gap instrument's Δx, the classes' distance in the
// capped log gap, in standard deviations of it: rankSeparation, assumed,
// unless a burst is read (burst.go). A burst's clicks against the others
// give a distance in logit(p_clean), D (burstMixture.pCleanDistance), and
// two views independent given the class covary by q·Δa·Δx (q = π(1 − π),
// π the instrument's share), so that
//
//	Δx_b = cov(logit p_clean, gap) / (q·D)
//
// is the gap's separation where the burst is all noise and the other
// clicks genuine (D = Δa). Where the burst holds genuine clicks too, or
// the others noise, D is Δa times the burst's share of noise less the
// others' and Δx_b too large by as much, which nothing here measures:
// Δx_b is an upper bound, the assumed rankSeparation the reading
// without the burst. The separation read is their geometric mean, which
// is off by at most the square root of their ratio whichever holds,
// Δx_b taken within [rankSeparation, what leaves instrumentWithinFloor of
// the gap's variance within the classes]. The fit then reads p_clean,
// the gap, the activity and the popularity at it. On the independent
// generator's bursty streams without dwell or types (C, H; their bursts
// 98–99 % noise) Δx_b comes out at 1.5–1.8 s.d. where the labels give
// 1.5–2.0; on streams whose bursts hold a quarter or more of genuine
// clicks and whose classifier is strong, Δx_b alone cost up to 0.07 of
// the weight's ROC-AUC (a review's streams; docs/design/model.md, "The
// gap's separation from a burst").
func (c *contextModel) gapSeparation(share float64) float64 {
	d, _, ok := c.burst.pCleanDistance()
	s := &c.gap.stats
	if !ok || s.mass < contextMinMass || share <= 0 || share >= 1 {
		return rankSeparation
	}
	ma, mg := s.sum[0]/s.mass, s.dwell/s.mass
	vg := c.gap.squares/s.mass - mg*mg
	if !(vg >= rankMinVariance) {
		return rankSeparation
	}
	q := share * (1 - share)
	sep := (s.cross[0]/s.mass - ma*mg) / (q * d) / math.Sqrt(vg)
	sep = min(max(sep, rankSeparation), math.Sqrt((1-instrumentWithinFloor)/q))
	return math.Sqrt(sep * rankSeparation)
}

// flatGap is gapWeight where the gap instrument has its moments but the
// gap no spread to weigh p_clean with: a log without time whose users'
// events come in bursts (MovieLens in time order, its times removed) has
// nearly every counted gap 0, read as the same few seconds. The gap then
// says nothing, as where λ is 0, and the weight is the level with the
// item's popularity (popularityEvidence), which does not read the gap;
// before stop 62 the weight was the level alone there, and the
// popularity's reading came and went with the gap's spread. g is the
// level, so the instrument's level offset does not move (followGap), and
// λ and the blend are 0: the running mean learns that the gap says
// nothing. ok is false, as before, until the moments have the mass.
func (r *rankInstrument) flatGap(level, share float64, x contextFeatures) (gapReading, bool) {
	if r.stats.mass < contextMinMass || !(share > 0 && share < 1) {
		return gapReading{}, false
	}
	return gapReading{w: sigmoid(logOdds(level) + r.classifierPopularity(x)), g: level, pool: 1}, true
}

// activityEvidence is the evidence of the user's activity so far, a =
// log(1 + the user's events before this one), on the gap path: a user's
// events are the more often noise the more events the user has had (bots,
// careless and compulsive clickers, a rater who rates everything), the
// direction stated as the gap's is. Its separation comes from its
// covariance with the gap, read as the gap instrument reads p_clean's:
// Δa = cov(a, gap) / (π(1 − π)·Δgap), and its slope Δa / W (W the
// within-class variance) is kept within [−activityCap, 0], so that a
// stream whose active users come with long gaps gets none (the direction
// never flips). The gap and the activity move together within a class
// too (an active user's events come close together), so the slope that
// covariance gives overstates the activity's 4 to 5 times on the v2
// streams (2.8–4 where a fit with the labels puts it near 0.3–0.5): the
// cap decides there, and the slope, scaled down by the correlation's
// size as the blend is (gapCorrelationScale), decides where the activity
// moves with the gap little (ML-100k: corr −0.02) or not at all (the v1
// streams). Centred on the moments' mean activity, it moves an event's
// log-odds, not the stream's level (docs/design/model.md, "The user's
// activity on the gap path").
//
// mg and vg are the gap's mean and variance in the moments (gapWeight has
// them, after fit has checked the mass, the share and the gap's spread).
func (r *rankInstrument) activityEvidence(share, mg, vg, dx float64, x contextFeatures) float64 {
	return r.gapRead(activityFeature, activitySquare, -activityCap, 0, share, mg, vg, dx, x)
}

// gapRead is the evidence of the instrument's feature f (its square at
// index sq of the moments' squares) read through its covariance with the
// gap, as activityEvidence states it: the separation Δ = cov(f, gap) /
// (π(1 − π)·Δgap), the slope Δ / W (W the feature's within-class
// variance, at least instrumentWithinFloor of its variance) kept within
// [lo, hi], scaled down by the correlation's size (gapCorrelationScale),
// centred on the moments' mean of f and kept within contextClamp; 0
// where f has no spread or the event no f.
func (r *rankInstrument) gapRead(f, sq int, lo, hi, share, mg, vg, dx float64, x contextFeatures) float64 {
	s := &r.stats
	mf := s.sum[f] / s.mass
	vf := s.squares[sq]/s.mass - mf*mf
	if !x.hasZ || !(vf > gapReadMinVariance) {
		return 0
	}
	cov := s.cross[f]/s.mass - mf*mg
	q := share * (1 - share)
	delta := cov / (q * dx)
	slope := min(max(delta/max(vf-q*delta*delta, instrumentWithinFloor*vf), lo), hi)
	slope *= min(1, math.Abs(cov)/math.Sqrt(vf*vg)/gapCorrelationScale)
	return clampAbs(slope*(x.z[f-1]-mf), contextClamp)
}

const (
	// activityFeature is the activity's index among the instrument's
	// features (instrumentStats.add: logit(p_clean), then z), and
	// activitySquare that of its square in the upper triangle of squares.
	activityFeature = 1
	activitySquare  = instrumented
	// activityCap bounds the activity's slope on the gap path
	// (activityEvidence), per unit of log(1 + events). Chosen on seed 1
	// of the sparse v2 stream and seed 3 of the dense one, both without
	// dwell or types, among 0.2, 0.3 and 0.5 (ROC-AUC of the weight
	// 0.6318 / 0.6345 / 0.6354 and 0.8636 / 0.8655 / 0.8676; ECE of the
	// sparse one 0.025 / 0.027 / 0.038).
	activityCap = 0.3
)

// gapCorrelationScale is the correlation of logit(p_clean) with the gap
// at which the gap instrument's posterior is the whole weight
// (gapWeight). Chosen on seed 3 of the v2 streams (dense and sparse,
// neither dwell nor event type) and on the v1 stream of seed 7 and the
// demo's log without them (where the gap says nothing of the noise)
// among 0.05, 0.1 and 0.2 (docs/design/model.md).
const gapCorrelationScale = 0.1

// gapPCleanFloor is the least slope of logit(p_clean) in the gap
// instrument's posterior (gapWeight): the gap, whose direction is stated
// (a short gap is the more often noise), may turn p_clean round, by at
// most this share of its log-odds. On a sparse catalogue the classifier
// learns the items' popularity, the popular items there are the clickbait
// and trending ones, and p_clean ranks backwards (0.43 on the sparse v2
// streams): held at 0, the instrument could only leave it out. The
// covariance overstates the slope as it does the activity's (an active
// user's events come close together and move p_clean), so it is bounded;
// where p_clean ranks the right way (every dense stream, MovieLens) its
// slope is positive and the floor changes nothing. Chosen on seed 1 of
// the sparse v2 stream (200k events, 60,000 users, 40,000 items, neither
// dwell nor types) among 0, −0.1, −0.15, −0.25, −0.35, −0.5 and −1 by
// the weight's ROC-AUC (0.6343, 0.6478, 0.6520, 0.6570, 0.6588, 0.6576,
// 0.6450; ECE 0.026–0.032, 0.063 at −1); the dense stream of seed 1 moved
// by at most 0.0005 (docs/design/model.md, "p_clean turned round by the
// gap").
const gapPCleanFloor = -0.35

// learnGap adds an event to the gap instrument: one whose user and item
// are not cold and that carries a gap, whatever its type and whether or
// not it carries dwell (readsGap). Only the moments of p_clean, the gap,
// the user's activity and the item row's step are learned (gapWeight,
// activityEvidence, popularityEvidence). Until stop 72 an event with dwell
// or of a type the rank instrument reads was left out, as the gap was not
// read there.
func (c *contextModel) learnGap(x *contextFeatures, pClean float64) {
	if c.long && x.hasZ && x.hasGap {
		var acc *rankInstrument
		if c.acc != nil {
			acc = &c.acc.gap
		}
		z := [instrumented - 1]float64{activityFeature - 1: x.z[activityFeature-1], itemFeature - 1: x.z[itemFeature-1]}
		c.gap.learn(min(x.z[gapFeature], rankGapCap), logOdds(pClean), z, acc)
	}
}

// popularityEvidence is the evidence of the item's popularity so far, p =
// log(1 + the item row's accumulated step), which grows with the item's
// events (instrumentFeatures), on the gap path. No rule states its
// direction: on MovieLens the more popular films are the better rated
// (item_popularity ranks rating ≤ 2 as noise at 0.589), on the v2 streams
// the clickbait and the trending slot are popular and noisy (0.41, so 0.59
// the other way), and on the v1 generator's at 40 % noise too. So its
// direction and size are read as the activity's are, through its
// covariance with the gap (gapRead), an instrument whose direction is
// stated and which the classifier does not read, with the slope kept
// within ±popularityCap. Where the gap says nothing of the class, the
// popularity gets next to nothing.
//
// From stop 60 to 63 it was the weight's own regression on p, k·cov(logit
// p_clean, p)/var(p) with k the weight's slope in logit p_clean, added
// twice: the classifier's reading of the popularity counted three times.
// The classifier reads popularity as taste (its item bias grows with the
// item's events against uniform negatives), which MovieLens bears out
// and a stream whose popular items are the noisy ones does not: on the v1
// generator's stream at 40 % noise without dwell it took the weight from
// 0.705 to 0.570 (p_clean 0.747). Centred on the moments' mean p, it moves
// an event's log-odds, not the stream's level (docs/design/model.md,
// "The popularity read by the gap"). A model read from an encoding before
// stop 60 holds no moments of p in its gap instrument (those slots 0): it
// adds nothing until they have a spread, and reads p against too small a
// variance for about contextWindow events after ("The item's popularity
// on the gap path").
func (r *rankInstrument) popularityEvidence(share, mg, vg, dx float64, x contextFeatures) float64 {
	return r.gapRead(itemFeature, itemSquare, -popularityCap, popularityCap, share, mg, vg, dx, x)
}

// classifierPopularity is the popularity's evidence where the gap has no
// spread to read it by (flatGap: a log without time, or whose users'
// events all come in one burst): the weight's own regression on p,
// weightTemper·cov(logit p_clean, p)/var(p), added popularityGain times,
// as the gap path read it until stop 63. Nothing else in such a stream
// says which way the popularity goes; the classifier's reading is kept
// (MovieLens without its times, seed 1: 0.601 with it added twice, 0.569
// once).
func (r *rankInstrument) classifierPopularity(x contextFeatures) float64 {
	s := &r.stats
	mp := s.sum[itemFeature] / s.mass
	vp := s.squares[itemSquare]/s.mass - mp*mp
	if !x.hasZ || !(vp > gapReadMinVariance) {
		return 0
	}
	cov := s.squares[itemCross]/s.mass - s.sum[0]/s.mass*mp
	return clampAbs(popularityGain*weightTemper*cov/vp*(x.z[itemFeature-1]-mp), contextClamp)
}

const (
	// itemFeature is the item row's step's index among the instrument's
	// features (instrumentStats.add: logit(p_clean), then z); itemSquare
	// is that of its square in the upper triangle of squares, itemCross
	// that of its product with logit(p_clean) (the first row's).
	itemFeature = 3
	itemSquare  = itemFeature*instrumented - itemFeature*(itemFeature-1)/2
	itemCross   = itemFeature
	// popularityCap bounds the gap's reading of the popularity's slope
	// per unit of p (popularityEvidence). Chosen on seed 1 (the v1
	// generator's 100k streams at 20 % and 40 % noise without dwell, the
	// v2 200k streams dense, 20,000 users and sparse without dwell or
	// types, and ML-100k) as the least of 0.3, 1 and 2 at which the
	// weight ranks above item_popularity (0.5887) on ML-100k: 0.5572 /
	// 0.5807 / 0.6016. The v2 streams gain a little with the cap (dense
	// 0.8876 / 0.8903 / 0.8931, sparse 0.7062 / 0.7104 / 0.7135), the v1
	// streams move by at most 0.0004 (docs/design/model.md).
	popularityCap = 2.0
	// popularityGain is how many times the classifier's reading of the
	// popularity is added again where the gap cannot read it
	// (classifierPopularity). Chosen among 1, 2 and 3 at stop 60 as the
	// least at which the weight ranks above every label-free baseline on
	// ML-100k (0.5766 / 0.5993 / 0.6129 against item_popularity 0.5887),
	// when it was the gap path's reading.
	popularityGain = 2.0
	// gapReadMinVariance is the least variance of a feature read by
	// the gap (gapRead) or of p (classifierPopularity) for it to count: a
	// catalogue whose items are all new has none.
	gapReadMinVariance = 1e-6
)

// logOdds is the log-odds of p_clean, kept finite by pCleanFloor.
func logOdds(pClean float64) float64 {
	p := min(max(pClean, pCleanFloor), 1-pCleanFloor)
	return math.Log(p / (1 - p))
}

// share is the log-odds of the genuine class's share of the mass, of the
// feature with the more mass: for the anchor's statistics, the mean
// p_clean of the events they hold. Drawing p_clean's log-odds towards it
// (weight) keeps the classes' shares where p_clean puts them.
func (s *contextStats) share() float64 {
	g, n := s.dwellMass[1], s.dwellMass[0]
	if s.typeTotal[0]+s.typeTotal[1] > g+n {
		g, n = s.typeTotal[1], s.typeTotal[0]
	}
	g, n = max(g, pCleanFloor), max(n, pCleanFloor)
	return math.Log(g / n)
}

// informed reports whether some feature's statistics, the EM's, the
// anchor's or the dwell mixture's, have the mass to count as evidence. A
// stream that carries no dwell and no event type never informs the
// context, and its posterior stays p_clean.
func (c *contextModel) informed() bool {
	return c.em.dwellReady() || c.em.typeReady() || c.anchor.dwellReady() || c.anchor.typeReady() || c.mix.ready()
}

// evidence is the log-likelihood ratio, genuine against noise, of x. Of
// dwell, the dwell mixture's when dwell is read as longer-is-genuine
// (long); else, as of the event type, the EM statistics' where they point
// the anchor's way, the anchor's where they do not. Of the event type,
// typeEvidence: that rule, or with an event order, the order's.
func (c *contextModel) evidence(x contextFeatures) float64 {
	llr := 0.0
	if x.hasDwell {
		if c.long {
			llr += c.gate.factor(x.bucket, c.slots()) * c.mix.evidence(x.logDwell)
		} else {
			s := &c.em
			if c.em.dwellDirection()*c.anchor.dwellDirection() <= 0 {
				s = &c.anchor
			}
			llr += s.dwellEvidence(x.logDwell)
		}
	}
	if x.bucket >= 0 {
		llr += c.typeEvidence(x.bucket)
	}
	return clampAbs(llr, contextClamp)
}

// typeEvidence is the event-type evidence of slot b: the EM statistics'
// where they point the anchor's way, the anchor's where they do not;
// with an event order, the order arbitrates in the anchor's place: the
// EM statistics' where they rank the types as the order does, else the
// anchor's where they do, else none where either ranks them against it.
// Where the order says nothing (fewer than two ranked types with mass:
// the demo's log has clicks only), the rule without it holds.
func (c *contextModel) typeEvidence(b int) float64 {
	if c.spread { // else the order ranks one type at most, and says nothing
		em := c.orderAgreement(&c.em)
		if em > 0 {
			return c.em.typeEvidence(b)
		}
		switch anchor := c.orderAgreement(&c.anchor); {
		case anchor > 0:
			return c.anchor.typeEvidence(b)
		case em < 0 || anchor < 0:
			return 0
		}
	}
	s := &c.em
	if typeAgreement(&c.em, &c.anchor) <= 0 {
		s = &c.anchor
	}
	return s.typeEvidence(b)
}

// orderAgreement is the covariance, over s's mass of the ranked slots, of
// s's type evidence with the slots' ranks: positive when s ranks the
// types as the order does; exactly 0 with fewer than two ranked slots
// with mass (the covariance of a single rank is zero up to rounding,
// whose sign would otherwise decide).
func (c *contextModel) orderAgreement(s *contextStats) float64 {
	if !s.typeReady() {
		return 0
	}
	var mass, rank, ev, cross float64
	slots := 0
	for b, r := range c.slotRanks {
		m := s.typeMass[0][b] + s.typeMass[1][b]
		if math.IsNaN(r) || m == 0 {
			continue
		}
		e := s.typeEvidence(b)
		mass += m
		rank += m * r
		ev += m * e
		cross += m * r * e
		slots++
	}
	if slots < 2 {
		return 0
	}
	return cross/mass - (rank/mass)*(ev/mass)
}

// learn adds x to the EM statistics with posterior w of being genuine
// (the EM step) and to the anchor's with p_clean.
// While the model shares, acc takes the same steps, with the decay of the
// statistics it follows.
func (c *contextModel) learn(x contextFeatures, w, pClean float64, path contextPath) {
	var (
		em, anchor *contextStats
		mix        *dwellMixture
		inst       *instrumentStats
		gate       *dwellGate
	)
	var rank *rankInstrument
	if a := c.acc; a != nil {
		em, anchor, mix, inst, gate, rank = &a.em, &a.anchor, &a.mix, &a.inst, &a.gate, &a.rank
	}
	if path == pathRank {
		c.rank.follow(w, c.levelShare())
	}
	c.em.learn(x, w, em)
	c.anchor.learn(x, pClean, anchor)
	if c.long {
		c.level.learn(pClean)
	}
	if x.ranked && x.hasZ && c.spread {
		c.rank.learn(x.rank, logOdds(pClean), c.rank.stats.impute(&x, rankGapCap), rank)
	}
	if x.hasDwell && c.long {
		c.mix.learn(x.logDwell, mix)
		if x.hasZ {
			c.inst.learn(x.logDwell, logOdds(pClean), c.inst.impute(&x, dwellGapCap), inst)
		}
		if x.bucket >= 0 {
			c.gate.learn(x.bucket, x.logDwell, pClean, gate)
		}
	}
}

// dwellMixture is the dwell evidence of a model that reads dwell as the
// premise says (Config.DwellDirection "long"): a two-component Gaussian
// mixture on log(1 + dwell_ms) with one variance for both, fitted by
// online EM to its own responsibilities, with the context's decay
// (contextKeep). Its fit reads nothing but dwell, so the classifier
// cannot turn it: on a stream where p_clean ranks backwards the anchored
// statistics learn dwell backwards with it, and this does not
// (docs/design/model.md, "Dwell read as the premise says"). Component 1
// is the one of the longer mean, by construction (learn keeps it so),
// and it is the genuine one. With one variance the log-likelihood ratio
// is linear in log dwell, so the evidence ranks events as dwell does and
// a sparse tail cannot turn it round.
type dwellMixture struct {
	// mass and sum are each component's decayed Σ r and Σ r·x; squares is
	// the decayed Σ x² of every event (the components' r sum to 1).
	mass, sum [2]float64
	squares   float64
}

// ready reports whether each component has the mass to count as evidence.
func (m *dwellMixture) ready() bool {
	return m.mass[0] >= contextMinMass && m.mass[1] >= contextMinMass
}

// params returns the components' means and their (floored) variance.
func (m *dwellMixture) params() (mu0, mu1, variance float64) {
	mu0, mu1 = m.sum[0]/m.mass[0], m.sum[1]/m.mass[1]
	v := (m.squares - m.sum[0]*mu0 - m.sum[1]*mu1) / (m.mass[0] + m.mass[1])
	return mu0, mu1, max(v, 0) + varianceFloor
}

// evidence is the log-likelihood ratio of component 1 (genuine) against
// component 0 at log dwell x, 0 before the mixture is ready.
func (m *dwellMixture) evidence(x float64) float64 {
	if !m.ready() {
		return 0
	}
	mu0, mu1, v := m.params()
	return (mu1 - mu0) / v * (x - (mu0+mu1)/2)
}

// responsibility is component 1's posterior at x. Until the mixture is
// ready it splits at the mean of what it has seen (1 above, 0 at or
// below; ½ for the first event), which starts the components apart.
func (m *dwellMixture) responsibility(x float64) float64 {
	if !m.ready() {
		n := m.mass[0] + m.mass[1]
		switch {
		case n == 0:
			return 0.5
		case x > (m.sum[0]+m.sum[1])/n:
			return 1
		}
		return 0
	}
	return sigmoid(math.Log(m.mass[1]/m.mass[0]) + m.evidence(x))
}

// learn is one online EM step at log dwell x: the statistics decay by
// contextKeep of their mass and take x with its responsibilities. If
// component 0's mean has passed component 1's, the components swap, so
// that component 1 stays the longer. acc, if not nil (an accumulator,
// contextModel.acc), takes the same step, and swaps with m.
func (m *dwellMixture) learn(x float64, acc *dwellMixture) {
	r := m.responsibility(x)
	keep := contextKeep(m.mass[0] + m.mass[1])
	m.add(keep, r, x)
	if acc != nil {
		acc.add(keep, r, x)
	}
	if m.swapped() {
		m.swap()
		if acc != nil {
			acc.swap()
		}
	}
}

// add decays the statistics by keep and adds x with responsibility r of
// component 1.
func (m *dwellMixture) add(keep, r, x float64) {
	for k, rk := range [2]float64{1 - r, r} {
		m.mass[k] = keep*m.mass[k] + rk
		m.sum[k] = keep*m.sum[k] + rk*x
	}
	m.squares = keep*m.squares + x*x
}

// swapped reports whether component 0's mean has passed component 1's,
// without dividing by a zero mass.
func (m *dwellMixture) swapped() bool { return m.sum[0]*m.mass[1] > m.sum[1]*m.mass[0] }

// swap exchanges the components.
func (m *dwellMixture) swap() {
	m.mass[0], m.mass[1] = m.mass[1], m.mass[0]
	m.sum[0], m.sum[1] = m.sum[1], m.sum[0]
}

// finite reports whether every statistic is finite.
func (m *dwellMixture) finite() bool {
	s := 0.0
	for _, p := range m.fields() {
		s += *p
	}
	return !math.IsNaN(s) && !math.IsInf(s, 0)
}

// encode writes the statistics: f64[2] mass, f64[2] sum, f64 squares.
func (m *dwellMixture) encode(e *encoder) {
	for _, p := range m.fields() {
		e.f64(*p)
	}
}

// fields lists the statistics in their encoding's order.
func (m *dwellMixture) fields() [5]*float64 {
	return [...]*float64{&m.mass[0], &m.mass[1], &m.sum[0], &m.sum[1], &m.squares}
}

// decode reads what encode writes, and with correlation the three
// statistics of logit(p_clean) that encoding version 8 (delta version 4)
// wrote after them for a correlation no longer read, refusing statistics
// that are not finite, a negative mass or squares, or components out of
// order.
func (m *dwellMixture) decode(d *decoder, correlation bool) {
	for _, p := range m.fields() {
		*p = d.f64()
	}
	var old [3]float64 // Σ a, Σ a², Σ a·x
	if correlation {
		for j := range old {
			old[j] = d.f64()
		}
	}
	switch {
	case d.err != nil:
	case !m.finite() || !finite(old[:]):
		d.fail("dwell mixture not finite")
	case m.mass[0] < 0 || m.mass[1] < 0 || m.squares < 0 || old[1] < 0:
		d.fail("dwell mixture with a negative mass")
	case m.sum[0]*m.mass[1] > m.sum[1]*m.mass[0]:
		d.fail("dwell mixture's components out of order")
	}
}

// instrumented is the number of features the instrument weighs: logit
// (p_clean), the user's events so far, the pair's repeats among the
// user's latest items, the item row's accumulated step and the gap since
// the user's previous event (contextFeatures.z), in that order; gapFeature
// is the gap's index in z. Encodings before version 13 (delta 9) have the
// first four (oldInstrumented).
const (
	instrumented    = 5
	oldInstrumented = 4
	gapFeature      = 3
)

// instrumentStats is the instrument: the decayed moments of features
// whose direction no rule states, over the events that carry dwell, with
// log dwell as the instrument that reveals how far each feature's classes
// lie apart. If a feature z and log dwell x are independent given the
// class (genuine with share π), their covariance is
//
//	cov(z, x) = π(1 − π)·Δz·Δx,
//
// with Δ the difference of the class means (genuine minus noise); the
// dwell mixture gives Δx (its components' means, the longer the genuine,
// the premise) and the reliability mixture's reliable share gives π
// (contextModel.posterior; the midpoints below take the mean p_clean's),
// so Δz = cov(z, x) / (π(1 − π)·Δx), with its sign: the direction comes
// from the stream. The
// features' covariance within the classes is their covariance less the
// classes' part, W = C − π(1 − π)·Δz·Δzᵀ, and the log-likelihood ratio of
// two Gaussians of covariance W (linear discriminant analysis) is
// W⁻¹Δz · (z − midpoint of the class means) (fit, evidence). The
// classifier's p_clean is the first feature, so its weight in the
// posterior is what dwell says it carries, not a constant: a p_clean that
// dwell does not back counts for little, one that ranks against dwell for
// nothing (docs/design/model.md, "The instrument").
type instrumentStats struct {
	// mass and dwell are the decayed Σ 1 and Σ x; sum, squares and cross
	// the decayed Σ z, Σ z·zᵀ (upper triangle, row by row) and Σ z·x.
	mass, dwell float64
	sum         [instrumented]float64
	squares     [instrumented * (instrumented + 1) / 2]float64
	cross       [instrumented]float64
}

// instrumentFit is what fit derives from the statistics: the slopes of
// the log-likelihood ratio and the midpoints of the class means.
type instrumentFit struct {
	slope, mid [instrumented]float64
	// features is 1 where only p_clean is weighed, instrumented else.
	features int
}

// instrumentFeatures sets x's further features for the instrument of the
// pair (u, i) and event ev, before the event is remembered: log(1 + v) of
// the user's events so far, of the item's count among the user's latest
// recentItems items, of the item row's accumulated step (its G,
// table.stepRate: it grows with the steps the row takes, so with the
// item's events, and is merged across partitions with the row) and of the
// seconds since the user's latest event time (0 for an earlier time: out
// of order; at most sessionGapMS), where ev and the user's latest event
// carry a time, or of the events learned since, read as seconds
// (countgap.go), where neither does. A cold user or item has none (hasZ
// false), nor has a model without the instrument.
func (m *Model) instrumentFeatures(u, i int32, ev *Event, x *contextFeatures) {
	if !m.context.long || u < m.users.base || i < m.items.base {
		return
	}
	repeats := 0
	for _, v := range m.users.recentOf(u) {
		if v == i {
			repeats++
		}
	}
	x.z = [...]float64{math.Log1p(float64(m.users.pushed[u])), math.Log1p(float64(repeats)), math.Log1p(m.items.stepSums[i]), 0}
	x.hasZ = true
	switch last := m.users.times[u]; {
	case last == noTime:
	case ev.HasTime && !isUntimed(last):
		gap := min(max(max(ev.TimeMS, minTimeMS)-last, 0), sessionGapMS)
		x.z[gapFeature], x.hasGap = math.Log1p(float64(gap)/1000), true
	case !ev.HasTime && isUntimed(last):
		x.countGap, x.counted = math.Log1p(float64(max(untimed(m.schedule.events)-last, 0))), true
		if s, ok := m.context.countGap.seconds(x.countGap); ok {
			x.z[gapFeature], x.hasGap = math.Log1p(min(s, sessionGapMS/1000)), true
		}
	}
}

// sessionGapMS caps the gap the instrument reads: a user who comes back
// after more than 30 minutes starts a new session, and how much longer
// the pause was says nothing more. 30 minutes is the web analytics'
// customary session timeout (Google Analytics' default: "a session ends
// after 30 minutes of inactivity", support.google.com/analytics/answer/2731565);
// it was not chosen on this project's streams (docs/design/model.md, "The
// gap as the instrument's fifth feature").
const sessionGapMS = 30 * 60 * 1000

// shortClickMS caps the gap the rank instrument reads (rankGapCap): a
// pause of 30 s or more since the user's previous event means the user
// stayed on the previous item at least that long, a satisfied click, and
// how much longer says nothing more of this event; below it lie the
// rapid clicks of a bounce chain. 30 s is the dwell threshold of a
// satisfied click that web-search studies have used since S. Fox et al.,
// "Evaluating implicit measures to improve web search", ACM TOIS 23(2),
// 2005 (for example Y. Kim et al., "Modeling dwell time to predict
// click-level satisfaction", WSDM 2014); it was not chosen on this
// project's streams, only the choice between it and sessionGapMS for
// each instrument was, on one seed (docs/design/model.md). The dwell
// instrument reads the gap up to sessionGapMS: below 30 s the gap is
// mostly the previous event's dwell, which within the noise class moves
// with this event's dwell (bounces follow bounces), against the
// instrument's premise that a feature and the instrument are independent
// given the class (docs/design/model.md, "The gap's cap, per
// instrument").
const shortClickMS = 30 * 1000

// dwellGapCap and rankGapCap are the largest gaps, as log(1 + seconds),
// that the dwell instrument and the rank instrument read (impute).
var (
	dwellGapCap = math.Log1p(sessionGapMS / 1000)
	rankGapCap  = math.Log1p(shortClickMS / 1000)
)

// impute returns x's further features as an instrument reads them: the
// gap at most gapCap (log(1 + seconds)), and a missing gap (hasGap false)
// at the statistics' mean of it, 0 before they have any: a gap that is
// not known counts for neither class, and adds nothing to the gap's
// covariance with the instrument.
func (s *instrumentStats) impute(x *contextFeatures, gapCap float64) [instrumented - 1]float64 {
	z := x.z
	switch {
	case x.hasGap:
		z[gapFeature] = min(z[gapFeature], gapCap)
	case s.mass > 0:
		z[gapFeature] = s.sum[gapFeature+1] / s.mass
	}
	return z
}

// forgetGap zeroes the gap's moments, keeping the other features': what
// a model read from an encoding whose gap was another feature holds.
func (s *instrumentStats) forgetGap() {
	var kept instrumentStats
	src, dst := s.fieldsOf(oldInstrumented), kept.fieldsOf(oldInstrumented)
	for k := range src {
		*dst[k] = *src[k]
	}
	*s = kept
}

// learn adds an event of log dwell x, logit(p_clean) a and further
// features z, decaying the statistics by contextKeep of their mass; acc,
// if not nil (an accumulator, contextModel.acc), takes the same step.
func (s *instrumentStats) learn(x, a float64, z [instrumented - 1]float64, acc *instrumentStats) {
	keep := contextKeep(s.mass)
	s.add(keep, x, a, z)
	if acc != nil {
		acc.add(keep, x, a, z)
	}
}

// add decays the statistics by keep and adds an event.
func (s *instrumentStats) add(keep, x, a float64, z [instrumented - 1]float64) {
	v := [instrumented]float64{a, z[0], z[1], z[2], z[3]}
	s.mass = keep*s.mass + 1
	s.dwell = keep*s.dwell + x
	k := 0
	for i := range v {
		s.sum[i] = keep*s.sum[i] + v[i]
		s.cross[i] = keep*s.cross[i] + v[i]*x
		for j := i; j < instrumented; j++ {
			s.squares[k] = keep*s.squares[k] + v[i]*v[j]
			k++
		}
	}
}

// encode writes the statistics (FORMAT.md, DINS): f64 mass, f64 dwell,
// then f64[instrumented] sum, the upper triangle of squares, cross.
func (s *instrumentStats) encode(e *encoder) {
	for _, p := range s.fields() {
		e.f64(*p)
	}
}

// fields lists the statistics in their encoding's order.
func (s *instrumentStats) fields() []*float64 {
	return s.fieldsOf(instrumented)
}

// fieldsOf lists the statistics of the first n features in the order of
// an encoding of n features: mass, dwell, sum, the upper triangle of
// squares row by row, cross.
func (s *instrumentStats) fieldsOf(n int) []*float64 {
	f := []*float64{&s.mass, &s.dwell}
	for i := range n {
		f = append(f, &s.sum[i])
	}
	k := 0
	for i := range instrumented {
		for j := i; j < instrumented; j++ {
			if i < n && j < n {
				f = append(f, &s.squares[k])
			}
			k++
		}
	}
	for i := range n {
		f = append(f, &s.cross[i])
	}
	return f
}

// decode reads what encode writes, of n features (oldInstrumented before
// encoding version 13, whose gap then starts with no moments), refusing
// statistics that are not finite or a negative mass.
func (s *instrumentStats) decode(d *decoder, n int) {
	for _, p := range s.fieldsOf(n) {
		*p = d.f64()
	}
	switch {
	case d.err != nil:
	case !finite([]float64{s.mass, s.dwell}, s.sum[:], s.squares[:], s.cross[:]):
		d.fail("instrument not finite")
	case s.mass < 0:
		d.fail("instrument with a negative mass")
	}
}

// instrument fits the instrument for an event with the further features
// (withZ) or p_clean alone, given the genuine share of the separations and
// that of the level (fit); false until the dwell mixture and the
// instrument have the mass to, or where the mixture's components do not
// lie apart.
func (c *contextModel) instrument(share, level float64, withZ bool) (instrumentFit, bool) {
	if !c.mix.ready() || c.inst.mass < contextMinMass {
		return instrumentFit{}, false
	}
	mu0, mu1, _ := c.mix.params()
	if mu1-mu0 <= 0 || share <= 0 || share >= 1 || level <= 0 || level >= 1 {
		return instrumentFit{}, false
	}
	n := 1
	if withZ {
		n = instrumented
	}
	return c.inst.fit(share, level, mu1-mu0, n, 0), true
}

// fit is the instrument's linear discriminant over its first n features
// (the type's comment), with Δx = dx, the separations Δ divided by
// π(1 − π) with π = share, and the midpoints of the class means,
// mean + (½ − π)·Δ, with π = level, the share whose log-odds are the
// posterior's prior (posterior). A feature with no
// spread gets no slope; each within-class variance is at least
// instrumentWithinFloor of the feature's variance. If W is still not
// positive definite its off-diagonal terms are dropped (naive Bayes).
// p_clean's slope is kept within [floor, 1]: at 1 its log-odds count as
// they are. Dwell's and the rank's instruments pass 0, so that they
// cannot make p_clean count against its own ranking; the gap's passes
// gapPCleanFloor (gapWeight).
func (s *instrumentStats) fit(share, level, dx float64, n int, floor float64) instrumentFit {
	f := instrumentFit{features: n}
	n = len(f.slope[:n])     // n ≤ instrumented, which spares the loops' bounds checks
	q := share * (1 - share) // the classes' part of a variance, per Δ²
	var mean, delta [instrumented]float64
	// w's lower triangle, the diagonal's included, is all that
	// solveSymmetric reads; the upper one is left at 0.
	var w [instrumented][instrumented]float64
	mx := s.dwell / s.mass
	for i := range n {
		mean[i] = s.sum[i] / s.mass
	}
	for i := range n {
		delta[i] = (s.cross[i]/s.mass - mean[i]*mx) / (q * dx)
	}
	for i := range n {
		// squares is the upper triangle row by row: (j, i) for j ≤ i is
		// read down column i, from index i at row 0.
		k := i
		for j := 0; j <= i; j++ {
			w[i][j] = s.squares[k]/s.mass - mean[j]*mean[i]
			k += instrumented - 1 - j
		}
	}
	var total, qDelta [instrumented]float64
	for i := range n {
		total[i] = w[i][i]
		if total[i] <= 0 {
			delta[i], total[i] = 0, 1
		}
	}
	for i := range n {
		qDelta[i] = q * delta[i]
	}
	for i := range n {
		row := &w[i]
		for j := 0; j <= i; j++ {
			row[j] -= qDelta[i] * delta[j]
		}
		row[i] = max(row[i], instrumentWithinFloor*total[i])
	}
	if !solveSymmetric(&w, &delta, &f.slope, n) {
		for i := range n {
			f.slope[i] = delta[i] / w[i][i]
		}
	}
	f.slope[0] = min(max(f.slope[0], floor), 1)
	for i := range n {
		f.mid[i] = mean[i] + (0.5-level)*delta[i]
	}
	return f
}

// evidence is the fit's log-likelihood ratio, genuine against noise, of
// an event with logit(p_clean) a and further features z: p_clean's term
// and, where the fit weighs them, the further features' terms, whose sum
// is bounded by contextClamp as the context's evidence is.
func (f *instrumentFit) evidence(a float64, z [instrumented - 1]float64) float64 {
	further := 0.0
	for i := 1; i < f.features; i++ {
		further += f.slope[i] * (z[i-1] - f.mid[i])
	}
	return f.slope[0]*(a-f.mid[0]) + clampAbs(further, contextClamp)
}

// solveSymmetric solves w·x = b for its leading n×n block by Cholesky's
// factorisation, with no allocation (gonum's mat.Cholesky allocates its
// factor, and this runs on every event); false if the block is not
// positive definite, x then unset.
func solveSymmetric(w *[instrumented][instrumented]float64, b, x *[instrumented]float64, n int) bool {
	n = len(x[:n]) // n ≤ instrumented, which spares the loops' bounds checks
	var l [instrumented][instrumented]float64
	for i := range n {
		li := &l[i]
		for j := 0; j <= i; j++ {
			lj := &l[j]
			v := w[i][j]
			for k := range j {
				v -= li[k] * lj[k]
			}
			if i == j {
				if v <= 0 {
					return false
				}
				li[i] = math.Sqrt(v)
			} else {
				li[j] = v / lj[j]
			}
		}
	}
	var y [instrumented]float64
	for i := range n {
		li := &l[i]
		v := b[i]
		for k := range i {
			v -= li[k] * y[k]
		}
		y[i] = v / li[i]
	}
	for i := n - 1; i >= 0; i-- {
		v := y[i]
		for k := i + 1; k < n; k++ {
			v -= l[k][i] * x[k]
		}
		x[i] = v / l[i][i]
	}
	return true
}

// rankInstrument is the instrument of a stream without dwell: the event
// type's rank in Config.EventOrder in place of log dwell, read as dwell
// is (instrumentStats: the features' covariance with the rank reveals how
// far their classes lie apart, and in which direction), over the events
// of a ranked type whose user and item are not cold. The order states
// the rank's direction (a purchase is more often genuine than a view), as
// DwellDirection "long" states dwell's. Dwell's mixture gives Δx, the
// difference of the classes' mean log dwell; the rank has no such mixture
// (a handful of values), so Δx is taken as rankSeparation of the rank's
// standard deviation. The posterior is then
//
//	logit(posterior) = m + b + pCleanTemper·(Σ_j s_j·(z_j − mid_j) + s_r·(rank − mid_r))
//
// with the rank's own log-likelihood ratio (s_r, mid_r: rankFit's
// rankSlope, rankMid) and a
// level offset b that keeps the posterior's mean at the anchor's share,
// as the formula at the top does without it (follow). It is read only
// where dwell's instrument is not fitted: on a stream without dwell, and
// on one with dwell until dwell's instrument has the mass, whatever the
// share of events that carry dwell (once fitted, dwell's instrument
// scores every event, with dwell or not). An event it scores is weighed
// by its rank, not by its dwell. Its moments are merged across
// partitions as the dwell instrument's are; its level offset is not: each
// partition model follows its own level (mergecontext.go;
// docs/design/model.md, "The event type as the instrument").
type rankInstrument struct {
	// stats are the instrument's moments, the rank in place of log dwell
	// (stats.dwell is the decayed Σ rank); squares is the decayed Σ rank².
	stats   instrumentStats
	squares float64
	// offset is b, the posterior's level offset (follow).
	offset float64
}

// rankFit is the rank instrument's fit: the features' linear
// discriminant, and the rank's own slope and midpoint.
type rankFit struct {
	instrumentFit
	rankSlope, rankMid float64
}

const (
	// rankSeparation is Δx, the difference of the classes' mean rank, in
	// standard deviations of the rank. The separations the instrument
	// finds are inversely proportional to it, so it sets how far the
	// posterior leans on the features. Chosen on seed 5 of the v2 100k
	// stream without dwell and seed 3 of its sparse variant among 0.5, 1
	// and 2 (the true Δx, with the labels, was 0.41 and 0.44 standard
	// deviations there).
	rankSeparation = 0.5
	// rankMinVariance is the least variance of the rank for the rank to
	// count as an instrument: a stream of one type (the demo's log has
	// only clicks) has none.
	rankMinVariance = 0.01
	// rankLevelRate is the step of the level offset towards the anchor's
	// share (follow): about 500 events' memory. Chosen on the streams of
	// rankSeparation among 0.0005, 0.002 and 0.01: 0.0005 lagged (the
	// posterior's mean 0.02 above the share), and faster steps made the
	// offset a short-term signal of the stream's bursts (bots, bounce
	// chains), which is not what it is for.
	rankLevelRate = 0.002
)

// learn adds an event of rank x, logit(p_clean) a and further features z,
// decaying the moments by contextKeep of their mass; acc, if not nil (an
// accumulator, contextModel.acc), takes the same step.
func (r *rankInstrument) learn(x, a float64, z [instrumented - 1]float64, acc *rankInstrument) {
	keep := contextKeep(r.stats.mass)
	r.add(keep, x, a, z)
	if acc != nil {
		acc.add(keep, x, a, z)
	}
}

// add decays the moments by keep and adds an event.
func (r *rankInstrument) add(keep, x, a float64, z [instrumented - 1]float64) {
	r.squares = keep*r.squares + x*x
	r.stats.add(keep, x, a, z)
}

// follow moves the level offset a step towards a posterior mean of level,
// after an event whose posterior w the rank instrument gave: stochastic
// approximation of the offset at which the posterior's mean is the
// anchor's share moved by the level (levelShare). The sigmoid of the linear discriminant is the posterior
// only where the features are Gaussian with one covariance; counts and
// log-odds are not, and without the offset the posterior's mean stood
// 0.09 above the genuine share on the v2 stream without dwell. Bounded
// by contextClamp.
func (r *rankInstrument) follow(w, level float64) {
	r.step(rankLevelRate, w, level)
}

// step moves the level offset by rate of level − w, bounded by
// contextClamp.
func (r *rankInstrument) step(rate, w, level float64) {
	r.offset = clampAbs(r.offset+rate*(level-w), contextClamp)
}

// followGap is follow for the gap instrument, whose step falls with the
// moments' mass, 1/(mass + gapLevelWarm): fast while the instrument is
// young, about 1/5,500 once its moments hold contextWindow events. The
// gap since the user's previous event comes in bursts (a bot's session,
// a bounce chain), and an offset of about 500 events' memory
// (rankLevelRate) followed them: during a burst of short gaps it rose and
// lifted the weights of the burst's events, most of them noise. With the
// offset held at 0 the weight's ROC-AUC on the sparse v2 stream without
// dwell or types (seed 5, 200k events) was 0.639 against 0.604, but its
// mean stood far from the share (ECE 0.30); the falling step kept the
// level (docs/design/model.md, "The gap instrument's level").
func (r *rankInstrument) followGap(w, level float64) {
	r.step(1/(r.stats.mass+gapLevelWarm), w, level)
}

// gapLevelWarm sets how fast the gap instrument's level offset starts
// (followGap). Chosen on seed 5 of the sparse v2 stream without dwell or
// types and on seed 3 of the dense one among 50 and 500.
const gapLevelWarm = 500

// pCleanShare is the mean p_clean of the events the instrument's moments
// hold, from the mean μ and variance σ² of their logit(p_clean) (stats
// feature 0) by the probit approximation E[σ(a)] ≈ σ(μ / √(1 + πσ²/8))
// (D. J. C. MacKay, "The evidence framework applied to classification
// networks", Neural Computation 4(5), 1992); 0 without mass. On the
// streams of followGap it was within 0.015 of the mean p_clean.
func (r *rankInstrument) pCleanShare() float64 {
	s := &r.stats
	if s.mass < contextMinMass {
		return 0
	}
	mu := s.sum[0] / s.mass
	v := max(s.squares[0]/s.mass-mu*mu, 0)
	return min(max(sigmoid(mu/math.Sqrt(1+math.Pi*v/8)), reliableShareFloor), 1-reliableShareFloor)
}

// fit is the rank instrument's fit for an event with the further features
// (withZ) or p_clean alone, given the genuine shares of the separations
// and of the level and p_clean's least slope (instrumentStats.fit); false
// until the moments have the mass, or where the rank has no spread.
func (r *rankInstrument) fit(share, level, sep float64, withZ bool, floor float64) (rankFit, bool) {
	s := &r.stats
	if s.mass < contextMinMass || share <= 0 || share >= 1 || level <= 0 || level >= 1 {
		return rankFit{}, false
	}
	mean := s.dwell / s.mass
	v := r.squares/s.mass - mean*mean
	if !(v >= rankMinVariance) {
		return rankFit{}, false
	}
	dx := sep * math.Sqrt(v)
	n := 1
	if withZ {
		n = instrumented
	}
	f := rankFit{instrumentFit: s.fit(share, level, dx, n, floor)}
	f.rankSlope = dx / max(v-share*(1-share)*dx*dx, instrumentWithinFloor*v)
	f.rankMid = mean + (0.5-level)*dx
	return f, true
}

// rankEvidence is the evidence of x's own features in the rank
// instrument's posterior: the rank's log-likelihood ratio under fit t,
// bounded by contextClamp; for an event whose type has no rank, the
// context's evidence as without the instrument (evidence).
func (c *contextModel) rankEvidence(x contextFeatures, t *rankFit) float64 {
	if !x.ranked {
		return c.evidence(x)
	}
	return clampAbs(t.rankSlope*(x.rank-t.rankMid), contextClamp)
}

// encode writes the rank instrument (FORMAT.md, RINS): its moments as
// DINS has them, then f64 squares, f64 offset.
func (r *rankInstrument) encode(e *encoder) {
	r.stats.encode(e)
	e.f64(r.squares)
	e.f64(r.offset)
}

// decode reads what encode writes, with n features (instrumentStats.decode),
// refusing values that are not finite, a negative Σ x² or an offset
// beyond contextClamp; name (the rank or the gap instrument) says which in
// the error.
func (r *rankInstrument) decode(d *decoder, n int, name string) {
	r.stats.decode(d, n)
	r.squares, r.offset = d.f64(), d.f64()
	switch {
	case d.err != nil:
	case !finite([]float64{r.squares, r.offset}):
		d.fail("%s not finite", name)
	case r.squares < 0 || math.Abs(r.offset) > contextClamp:
		d.fail("%s out of range", name)
	}
}

// dwellReady reports whether each class has the mass to count as evidence.
func (s *contextStats) dwellReady() bool {
	return s.dwellMass[0] >= contextMinMass && s.dwellMass[1] >= contextMinMass
}

func (s *contextStats) typeReady() bool {
	return s.typeTotal[0] >= contextMinMass && s.typeTotal[1] >= contextMinMass
}

// dwellMoments returns the mean and the (floored) variance of class k's
// log dwell.
func (s *contextStats) dwellMoments(k int) (mean, variance float64) {
	mean = s.dwellSum[k] / s.dwellMass[k]
	return mean, max(s.dwellSquares[k]/s.dwellMass[k]-mean*mean, 0) + varianceFloor
}

// dwellDirection is the genuine class's mean log dwell minus the noise
// class's, 0 before both classes have the mass.
func (s *contextStats) dwellDirection() float64 {
	if !s.dwellReady() {
		return 0
	}
	m0, _ := s.dwellMoments(0)
	m1, _ := s.dwellMoments(1)
	return m1 - m0
}

// dwellEvidence is the Gaussian log-likelihood ratio of a log dwell, 0
// before both classes have the mass.
func (s *contextStats) dwellEvidence(logDwell float64) float64 {
	if !s.dwellReady() {
		return 0
	}
	var lp [2]float64
	for k := range lp {
		mean, v := s.dwellMoments(k)
		d := logDwell - mean
		lp[k] = -0.5*math.Log(v) - 0.5*d*d/v
	}
	return lp[1] - lp[0]
}

// typeEvidence is the log ratio of the Laplace-smoothed categoricals of
// the two classes at bucket b, 0 before both classes have the mass.
func (s *contextStats) typeEvidence(b int) float64 {
	if !s.typeReady() {
		return 0
	}
	p1 := (s.typeMass[1][b] + 1) / (s.typeTotal[1] + typeBuckets)
	p0 := (s.typeMass[0][b] + 1) / (s.typeTotal[0] + typeBuckets)
	return math.Log(p1 / p0)
}

// typeAgreement is Σ_b mass_b · e_b · a_b over the buckets, with e and a
// the per-bucket evidence of the two sets of statistics and mass_b the
// bucket's share in a: positive when they rank event types the same way.
//
// Only its sign is read (evidence). The terms it leaves out are zeros, so
// the sum is the same to the bit: every term while either set lacks the
// mass (typeEvidence is 0), and those of the buckets no event has reached
// in a (no mass: the stream's types take the first slots, the rest stay
// empty), which spares two logarithms each.
func typeAgreement(e, a *contextStats) float64 {
	if !e.typeReady() || !a.typeReady() {
		return 0
	}
	sum := 0.0
	for b := range typeBuckets {
		if mass := a.typeMass[0][b] + a.typeMass[1][b]; mass != 0 {
			sum += mass * e.typeEvidence(b) * a.typeEvidence(b)
		}
	}
	return sum
}

// learn adds x with responsibility w of the genuine class, after decaying
// what was there: each feature by its own keep (contextKeep of its mass).
// acc, if not nil (an accumulator, contextModel.acc), takes the same step.
func (s *contextStats) learn(x contextFeatures, w float64, acc *contextStats) {
	keepDwell := contextKeep(s.dwellMass[0] + s.dwellMass[1])
	keepType := contextKeep(s.typeTotal[0] + s.typeTotal[1])
	s.add(x, w, keepDwell, keepType)
	if acc != nil {
		acc.add(x, w, keepDwell, keepType)
	}
}

// add decays the dwell statistics by keepDwell and the type statistics
// by keepType, and adds x with responsibility w of the genuine class.
func (s *contextStats) add(x contextFeatures, w, keepDwell, keepType float64) {
	for k, r := range [2]float64{1 - w, w} {
		if x.hasDwell {
			keep := keepDwell
			s.dwellMass[k] = keep*s.dwellMass[k] + r
			s.dwellSum[k] = keep*s.dwellSum[k] + r*x.logDwell
			s.dwellSquares[k] = keep*s.dwellSquares[k] + r*x.logDwell*x.logDwell
		}
		if x.bucket >= 0 {
			keep := keepType
			mass := &s.typeMass[k]
			for b := range mass {
				mass[b] *= keep
			}
			mass[x.bucket] += r
			s.typeTotal[k] = keep*s.typeTotal[k] + r
		}
	}
}

// contextKeep is the factor a feature's statistics keep of what they hold
// before the next event is added, given their mass (both classes): 1 − 1/L
// with the window L = contextGrowth·mass + 1, within [contextMinWindow,
// contextWindow]. It is a function of the statistics alone, so a restored
// model goes on exactly as the one that was saved.
func contextKeep(mass float64) float64 {
	return 1 - 1/min(contextWindow, max(contextMinWindow, contextGrowth*mass+1))
}

// finite reports whether every statistic is finite.
func (c *contextStats) finite() bool {
	s := 0.0
	for k := range 2 {
		s += c.dwellMass[k] + c.dwellSum[k] + c.dwellSquares[k] + c.typeTotal[k]
		for _, v := range c.typeMass[k] {
			s += v
		}
	}
	return !math.IsNaN(s) && !math.IsInf(s, 0)
}

// encode writes the statistics in fields' order: f64[2] dwell mass,
// f64[2] dwell sum, f64[2] dwell squares, f64[2·typeBuckets] type mass,
// f64[2] type total.
func (c *contextStats) encode(e *encoder) {
	for _, p := range c.fields() {
		e.f64(*p)
	}
}

// decode reads what encode writes.
func (c *contextStats) decode(d *decoder) {
	for _, p := range c.fields() {
		*p = d.f64()
	}
	if d.err == nil && !c.finite() {
		d.fail("context statistics not finite")
	}
}

// fields lists the statistics in their encoding's order, which is also
// their order in a context delta (contextSums.fields).
func (s *contextStats) fields() []*float64 {
	f := []*float64{&s.dwellMass[0], &s.dwellMass[1], &s.dwellSum[0], &s.dwellSum[1], &s.dwellSquares[0], &s.dwellSquares[1]}
	for k := range 2 {
		for b := range s.typeMass[k] {
			f = append(f, &s.typeMass[k][b])
		}
	}
	return append(f, &s.typeTotal[0], &s.typeTotal[1])
}

// encode writes the EM statistics, then the anchor's.
func (c *contextModel) encode(e *encoder) {
	c.em.encode(e)
	c.anchor.encode(e)
}

// decode reads what encode writes.
func (c *contextModel) decode(d *decoder) {
	c.em.decode(d)
	c.anchor.decode(d)
}

// encodeTypes writes the slots' names (FORMAT.md, TYPE): count u32, then
// each name as an id.
func (c *contextModel) encodeTypes(e *encoder) { e.ids(c.types) }

// decodeTypes reads what encodeTypes writes: 1 to namedTypes distinct,
// non-empty names.
func (c *contextModel) decodeTypes(d *decoder) {
	c.types, c.slotRanks = d.ids(), nil
	c.rankSlots()
	if d.err != nil {
		return
	}
	if len(c.types) == 0 || len(c.types) > namedTypes {
		d.fail("%d event types, want 1 to %d", len(c.types), namedTypes)
		return
	}
	for j, t := range c.types {
		if t == "" || slices.Contains(c.types[:j], t) {
			d.fail("event type %q empty or repeated", t)
			return
		}
	}
}

// forgetTypes clears the event-type statistics and names: read from an
// encoding before version 7, whose buckets were hashes of the types, they
// mean nothing in slots, and are learned again.
func (c *contextModel) forgetTypes() {
	c.types, c.slotRanks, c.spread = nil, nil, false
	for _, s := range []*contextStats{&c.em, &c.anchor} {
		s.typeMass = [2][typeBuckets]float64{}
		s.typeTotal = [2]float64{}
	}
}

// decodeEM reads the statistics of an encoding before version 4, which
// has no anchor's: the anchor starts as a copy of the EM statistics, so
// that the evidence goes on as it was and the anchor follows p_clean from
// there.
func (c *contextModel) decodeEM(d *decoder) {
	c.em.decode(d)
	c.anchor = c.em
}

// clampAbs bounds v to [−limit, limit]. The built-in min and max treat
// NaN, ±0 and ±Inf as math.Min and math.Max do, without a call.
func clampAbs(v, limit float64) float64 { return max(-limit, min(limit, v)) }

// sigmoid is the logistic function, stable for large |z|.
func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + exp(-z))
	}
	e := exp(z)
	return e / (1 + e)
}
