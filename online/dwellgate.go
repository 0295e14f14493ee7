package online

import "math"

// The dwell gate: how much dwell says within each event type.
//
// The dwell mixture (dwellMixture) reads dwell the same way whatever the
// event's type. But what dwell means depends on the type: a short view
// is a bounce, while the time spent on a purchase says little of whether
// it will be returned. Where dwell carries nothing within a type, its
// evidence there only adds noise to the posterior: on the v2 stream the
// weight ranked the purchases at 0.836 against p_clean's 0.900, because
// returned purchases have a genuine purchase's dwell (docs/design/model.md,
// "Dwell within each event type").
//
// The gate measures, label-free, how far dwell's classes lie apart within
// each type, against all types together. If log dwell x and a =
// logit(p_clean) are independent given the class (genuine with share π),
// then within type t
//
//	cov_t(x, a) = π_t(1 − π_t)·Δx_t·Δa_t,
//
// with Δ the difference of the class means. p_clean reads only (user,
// item), not the type, so its separation Δa_t is about the same in every
// type, and
//
//	r_t = [cov_t(x, a) / (π_t(1 − π_t))] / [cov(x, a) / (π(1 − π))]
//
// estimates Δx_t/Δx: 1 where dwell separates the classes within the type as
// well as overall, 0 where it does not separate them at all. π_t is the
// type's mean p_clean, as for the instrument's level. The mixture's
// log-likelihood ratio is linear in x with a slope proportional to Δx, so
// the gate scales it by r_t, clamped to [0, 1]: it never reads dwell more
// strongly than the mixture does. A stream of one event type has r = 1
// and its gate is 1 exactly.
//
// Dwell and p_clean are only weakly correlated within a class, so the
// estimate is noisy while a type has few events, and early in a stream,
// while p_clean is barely informative, the covariances are mostly noise:
// a gate taken at face value shut dwell out of the views of the v2
// stream, the type where it says the most, for its first 30,000 events.
// So the gate moves from 1 towards r_t only as far as the evidence that
// dwell says less within the type than overall: with z the distance of
// the type's separation below the pooled one in standard errors of the
// type's covariance (for a bivariate normal, Var(cov̂) = (σ²_x σ²_a +
// cov²)/n),
//
//	g_t = 1 − w·(1 − r_t),   w = clamp((z − 1)/2, 0, 1):
//
// no gate below one standard error, the whole estimate from three.
//
// The statistics are fitted to p_clean alone, with no feedback from the
// posterior (as the context's anchor is), over the events that carry both
// dwell and an event type; the pooled statistics are their sum. Each
// type's are a running sum over its first dwellGateWindow events, then
// decay over that many, the context's window.

// dwellGateWindow is the number of a type's events its statistics decay
// over once they have that many. Chosen on seed 1 of the v2 200k stream
// among 5,000, 20,000 and 50,000 (docs/design/model.md, "Dwell within
// each event type"), where they differed by 0.0008 at most.
const dwellGateWindow = 5000

// dwellGate is the gate's decayed statistics, one set per event-type
// slot.
type dwellGate struct {
	slots [typeBuckets]gateMoments
}

// gateMoments are the sums of one slot, or of several: mass Σ 1, Σ x,
// Σ x², Σ a, Σ a², Σ x·a and Σ p (x log dwell, a logit(p_clean), p
// p_clean).
type gateMoments struct{ mass, dwell, dwellSq, logit, logitSq, cross, pClean float64 }

// learn adds an event of type slot b, log dwell x and p_clean p; acc, if
// not nil (an accumulator, contextModel.acc), takes the same step.
func (g *dwellGate) learn(b int, x, p float64, acc *dwellGate) {
	s, a := &g.slots[b], logOdds(p)
	keep := 1.0 // a running sum, then a decay that holds the mass at the window
	if s.mass > dwellGateWindow-1 {
		keep = 1 - 1.0/dwellGateWindow
	}
	s.add1(keep, x, a, p)
	if acc != nil {
		acc.slots[b].add1(keep, x, a, p)
	}
}

// add1 decays the sums by keep and adds an event of log dwell x,
// logit(p_clean) a and p_clean p.
func (s *gateMoments) add1(keep, x, a, p float64) {
	s.mass = keep*s.mass + 1
	s.dwell = keep*s.dwell + x
	s.dwellSq = keep*s.dwellSq + x*x
	s.logit = keep*s.logit + a
	s.logitSq = keep*s.logitSq + a*a
	s.cross = keep*s.cross + x*a
	s.pClean = keep*s.pClean + p
}

// add adds o's sums to s's.
func (s *gateMoments) add(o *gateMoments) {
	s.mass += o.mass
	s.dwell += o.dwell
	s.dwellSq += o.dwellSq
	s.logit += o.logit
	s.logitSq += o.logitSq
	s.cross += o.cross
	s.pClean += o.pClean
}

// fields lists the sums in their encoding's order.
func (s *gateMoments) fields() [7]*float64 {
	return [...]*float64{&s.mass, &s.dwell, &s.dwellSq, &s.logit, &s.logitSq, &s.cross, &s.pClean}
}

// separation is cov(x, a)/(π(1 − π)) and its standard error; ok is false
// without the mass to count or with π at 0 or 1.
func (s *gateMoments) separation() (rho, se float64, ok bool) {
	if s.mass < contextMinMass {
		return 0, 0, false
	}
	n := s.mass
	pi := s.pClean / n
	if pi <= 0 || pi >= 1 {
		return 0, 0, false
	}
	mx, ma := s.dwell/n, s.logit/n
	cov := s.cross/n - mx*ma
	vx, va := max(s.dwellSq/n-mx*mx, 0), max(s.logitSq/n-ma*ma, 0)
	scale := pi * (1 - pi)
	return cov / scale, math.Sqrt((vx*va+cov*cov)/n) / scale, true
}

// factor is the gate of type slot b: what the dwell mixture's evidence is
// multiplied by for an event of that type. 1 until the pooled statistics
// have the mass and show dwell and p_clean agreeing (a positive
// separation), and for b < 0 (no type). The pooled statistics sum the
// first slots slots (the slots past them are empty: adding their zeros
// would change no bit).
func (g *dwellGate) factor(b, slots int) float64 {
	if b < 0 {
		return 1
	}
	var all gateMoments
	for t := range slots {
		all.add(&g.slots[t])
	}
	pooled, _, ok := all.separation()
	if !ok || pooled <= 0 {
		return 1
	}
	own, se, ok := g.slots[b].separation()
	if !ok || se <= 0 || own >= pooled {
		return 1
	}
	w := min(max(((pooled-own)/se-1)/2, 0), 1)
	r := max(own/pooled, 0)
	return 1 - w*(1-r)
}

// encode writes the statistics (FORMAT.md, DGAT): slot after slot, the
// sums in gateMoments.fields' order.
func (g *dwellGate) encode(e *encoder) {
	for b := range g.slots {
		for _, p := range g.slots[b].fields() {
			e.f64(*p)
		}
	}
}

// decode reads what encode writes, refusing sums that are not finite, a
// negative mass or sum of squares, or a p_clean sum outside [0, mass].
func (g *dwellGate) decode(d *decoder) {
	for b := range g.slots {
		s := &g.slots[b]
		for _, p := range s.fields() {
			*p = d.f64()
		}
		switch {
		case d.err != nil:
			return
		case !finite([]float64{s.mass, s.dwell, s.dwellSq, s.logit, s.logitSq, s.cross, s.pClean}):
			d.fail("dwell gate slot %d not finite", b)
		case s.mass < 0 || s.dwellSq < 0 || s.logitSq < 0 || s.pClean < 0 || s.pClean > s.mass*(1+1e-9):
			d.fail("dwell gate slot %d: mass %g, sums of squares %g and %g, p_clean sum %g", b, s.mass, s.dwellSq, s.logitSq, s.pClean)
		}
	}
}
