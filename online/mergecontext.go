package online

import (
	"fmt"
	"math"
	"slices"
)

// Merging the context's statistics (docs/design/partitions.md, "Built:
// the context merged").
//
// The context part (context.go, dwellgate.go) learns decayed sums: the EM
// and anchored class moments, the dwell mixture, the instrument and the
// dwell gate. They describe the stream, not a partition's users, so a
// partition model that learns them from its own events alone sees a
// third of the stream with 3 partitions, and a window of 5,000 of its
// events spans 15,000 of the stream. Sums merge exactly: while a model
// shares, an accumulator (contextModel.acc) takes every step its own
// events take, with the decay of the statistics it follows, so that it
// holds what the model's own events added since its last Publish,
// decayed as they are in the model. Publish hands it on (Shared.Context)
// and starts it afresh.
//
// The merge rule: a model that merges another's accumulator A, which
// holds n events (its mass), first decays each group of its statistics
// by what n of its own events would (contextKeep of the group's mass,
// to the power n; the gate's window rule for its slots), then adds A.
// Each group's statistics then decay once per event of the stream, as
// one model's do, so they cover the same window of the stream; the
// events of other partitions enter up to one merge interval late. The
// dwell mixture's components stay ordered (component 1 the longer), as
// after each learning step. The type slots are matched by name: the
// partitions' models number the types in the order they first saw them.
//
// The rank and gap instruments' moments (rankInstrument: the instrument
// statistics and the decayed Σ x²) are sums too and merge by the same
// rule, since stop 44; until then each partition model learned them from
// its own events, and with 3 partitions the weight of the v2 stream
// without dwell stood 0.024 below one model's (docs/design/partitions.md,
// "Built: the instruments merged"). Their level offsets are not merged:
// each is a controller that holds its own model's posterior mean at its
// own level, not a sum.
//
// What is not merged: the reliability mixture (its window of distilled
// samples, refitted every RefitEvery events of the partition), the
// instruments' level offsets, the context posterior's level (level.go),
// and the accumulator itself (in memory only,
// like what a model last published of its item rows).

// contextAcc is the accumulator of a sharing model (contextModel.acc):
// what its own events added to the context's statistics and to the rank
// and gap instruments' moments (their offsets stay 0) since its last
// Publish.
type contextAcc struct {
	contextSums
	rank, gap rankInstrument
}

// contextDeltaLen is the values of an encoded context delta
// (contextAcc.fields); contextSumsLen those of one from a build before
// stop 44 (shared delta version 2), which has no instruments' moments.
var (
	contextDeltaLen = len(new(contextAcc).fields())
	contextSumsLen  = len(new(contextSums).fields())
)

// fields lists the values of an encoded context delta (Shared.Context):
// the statistics (contextSums.fields), then the rank instrument's
// moments and the gap instrument's (rankInstrument.moments).
func (c *contextAcc) fields() []*float64 {
	return append(append(c.contextSums.fields(), c.rank.moments()...), c.gap.moments()...)
}

// moments lists the instrument's moments, those merged: the statistics
// (instrumentStats.fields), then Σ x².
func (r *rankInstrument) moments() []*float64 {
	return append(r.stats.fields(), &r.squares)
}

// fields lists the statistics in the order of an encoded context delta
// (Shared.Context): the EM's and the anchor's (contextStats.fields), the
// dwell mixture's, the instrument's, then the gate's slot after slot.
func (c *contextSums) fields() []*float64 {
	f := append(c.em.fields(), c.anchor.fields()...)
	for _, p := range c.mix.fields() {
		f = append(f, p)
	}
	f = append(f, c.inst.fields()...)
	for b := range c.gate.slots {
		for _, p := range c.gate.slots[b].fields() {
			f = append(f, p)
		}
	}
	return f
}

// startSharing starts the accumulator, empty.
func (c *contextModel) startSharing() {
	if c.acc == nil {
		c.acc = new(contextAcc)
	}
}

// publish appends the accumulator's values to dst (contextDeltaLen of
// them) and empties it; an empty accumulator (no event since the last
// publication) appends nothing.
func (c *contextModel) publish(dst []float64) []float64 {
	if *c.acc == (contextAcc{}) {
		return dst
	}
	for _, p := range c.acc.fields() {
		dst = append(dst, *p)
	}
	*c.acc = contextAcc{}
	return dst
}

// checkContextDelta reports whether values and types make a context delta
// that merge may add: contextDeltaLen finite values, no negative mass or
// sum of squares, at most namedTypes distinct non-empty type names, and
// no type mass in a slot without a name (but the shared last one).
func checkContextDelta(values []float64, types []string) error {
	if len(values) != contextDeltaLen && len(values) != contextSumsLen {
		return fmt.Errorf("context delta of %d values, want %d (or %d, without the instruments' moments)", len(values), contextDeltaLen, contextSumsLen)
	}
	if len(types) > namedTypes {
		return fmt.Errorf("context delta with %d event types, at most %d", len(types), namedTypes)
	}
	for j, t := range types {
		if t == "" || len(t) > maxIDBytes || slices.Contains(types[:j], t) {
			return fmt.Errorf("context delta: event type %q empty, too long or repeated", t)
		}
	}
	var d contextAcc
	for n, p := range d.fields()[:len(values)] {
		*p = values[n]
		if math.IsNaN(*p) || math.IsInf(*p, 0) {
			return fmt.Errorf("context delta: value %d not finite", n)
		}
	}
	nonNegative := []float64{d.mix.mass[0], d.mix.mass[1], d.mix.squares, d.inst.mass,
		d.rank.stats.mass, d.rank.squares, d.gap.stats.mass, d.gap.squares}
	for _, s := range []*contextStats{&d.em, &d.anchor} {
		nonNegative = append(nonNegative, s.dwellMass[0], s.dwellMass[1], s.dwellSquares[0], s.dwellSquares[1], s.typeTotal[0], s.typeTotal[1])
		for k := range 2 {
			nonNegative = append(nonNegative, s.typeMass[k][:]...)
			for b := len(types); b < namedTypes; b++ {
				if s.typeMass[k][b] != 0 {
					return fmt.Errorf("context delta: mass in event-type slot %d, which has no name", b)
				}
			}
		}
	}
	for b := range d.gate.slots {
		g := &d.gate.slots[b]
		nonNegative = append(nonNegative, g.mass, g.dwellSq, g.logitSq, g.pClean)
		if b >= len(types) && b < namedTypes && g.mass != 0 {
			return fmt.Errorf("context delta: gate mass in event-type slot %d, which has no name", b)
		}
	}
	if slices.ContainsFunc(nonNegative, func(v float64) bool { return v < 0 }) {
		return fmt.Errorf("context delta with a negative mass or sum of squares")
	}
	return nil
}

// merge adds a context delta (checked by checkContextDelta) of another
// partition's model whose event types are types (the merge rule above).
// A type c has no slot for gets one, as a first sighting would.
func (c *contextModel) merge(values []float64, types []string) {
	var d contextAcc
	for n, p := range d.fields()[:len(values)] {
		*p = values[n]
	}
	var slot [typeBuckets]int // slot[b] is c's slot of the delta's slot b; -1: empty
	for b := range slot {
		switch {
		case b < len(types):
			slot[b] = c.typeSlot(types[b])
		case b == namedTypes:
			slot[b] = namedTypes
		default:
			slot[b] = -1
		}
	}
	c.em.merge(&d.em, &slot)
	c.anchor.merge(&d.anchor, &slot)
	c.mix.merge(&d.mix)
	c.inst.merge(&d.inst)
	c.rank.merge(&d.rank)
	c.gap.merge(&d.gap)
	for b, to := range slot {
		if to >= 0 {
			c.gate.slots[to].merge(&d.gate.slots[b])
		}
	}
}

// merge decays each feature's statistics by what o's events would (the
// merge rule) and adds o's, o's type slot b going to slot[b].
func (s *contextStats) merge(o *contextStats, slot *[typeBuckets]int) {
	if n := o.dwellMass[0] + o.dwellMass[1]; n > 0 {
		keep := powPositive(contextKeep(s.dwellMass[0]+s.dwellMass[1]), n)
		for k := range 2 {
			s.dwellMass[k] = keep*s.dwellMass[k] + o.dwellMass[k]
			s.dwellSum[k] = keep*s.dwellSum[k] + o.dwellSum[k]
			s.dwellSquares[k] = keep*s.dwellSquares[k] + o.dwellSquares[k]
		}
	}
	if n := o.typeTotal[0] + o.typeTotal[1]; n > 0 {
		keep := powPositive(contextKeep(s.typeTotal[0]+s.typeTotal[1]), n)
		for k := range 2 {
			for b := range s.typeMass[k] {
				s.typeMass[k][b] *= keep
			}
			for b, to := range slot {
				if to >= 0 {
					s.typeMass[k][to] += o.typeMass[k][b]
				}
			}
			s.typeTotal[k] = keep*s.typeTotal[k] + o.typeTotal[k]
		}
	}
}

// merge decays m by what o's events would and adds o, keeping component
// 1 the longer.
func (m *dwellMixture) merge(o *dwellMixture) {
	n := o.mass[0] + o.mass[1]
	if n <= 0 {
		return
	}
	keep := powPositive(contextKeep(m.mass[0]+m.mass[1]), n)
	for k := range 2 {
		m.mass[k] = keep*m.mass[k] + o.mass[k]
		m.sum[k] = keep*m.sum[k] + o.sum[k]
	}
	m.squares = keep*m.squares + o.squares
	if m.swapped() {
		m.swap()
	}
}

// merge decays s by what o's events would and adds o.
func (s *instrumentStats) merge(o *instrumentStats) {
	if o.mass <= 0 {
		return
	}
	keep := powPositive(contextKeep(s.mass), o.mass)
	from := o.fields()
	for n, p := range s.fields() {
		*p = keep**p + *from[n]
	}
}

// merge decays r's moments by what o's events would and adds o's; r's
// level offset stays as it is.
func (r *rankInstrument) merge(o *rankInstrument) {
	if o.stats.mass <= 0 {
		return
	}
	keep := powPositive(contextKeep(r.stats.mass), o.stats.mass)
	r.squares = keep*r.squares + o.squares
	r.stats.merge(&o.stats)
}

// merge adds o's sums to s's and then, past the gate's window, scales
// them back to it: the mass the decay of learn holds them at.
func (s *gateMoments) merge(o *gateMoments) {
	if o.mass <= 0 {
		return
	}
	s.add(o)
	if s.mass > dwellGateWindow {
		scale := dwellGateWindow / s.mass
		for _, p := range s.fields() {
			*p *= scale
		}
	}
}
