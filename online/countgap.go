package online

import "math"

// The gap of a stream without time. The gap since the user's previous
// event is the instrument of streams with neither dwell nor ranked event
// types (gapWeight) and a feature of the other instruments, read from
// the events' times. A stream whose events carry no time at all (a log of
// (user, item) pairs) had no gap, and on a sparse catalogue, where
// p_clean ranks backwards, its weight ranked below chance (0.426 on the
// sparse v2 stream of seed 1 stripped of its times, where the same stream
// with them scored 0.634).
//
// A log's order is its clock. For an event without a time whose user's
// previous event had none either, the gap is counted in events: how many
// the model learned between the two (its own events, not those it merged
// from other partitions, whose batches would make the clock jump; a
// partition keyed by user holds each user's events, which is the layout
// the gap is read in). A count has no unit: how many events pass in 30
// seconds depends on the stream's rate, which a log without time does not
// tell. So the count is scaled to the stream's own typical gap: the
// geometric mean of (1 + count) over the context's window (contextKeep),
// which is read as shortClickMS, the gap instrument's cap, and a count
// k times longer as k times that. On the generator's streams the
// geometric mean of the counts lies where 30 seconds does in their times
// (the median gap in time is 30 s to within 10 %: docs/design/model.md,
// "The gap of a stream without time"), so a count reads about as the time
// would have; on other streams it is a stated premise: the shorter half of
// a user's gaps are the short ones.
//
// The scale is the model's own, as the level is: not merged across
// partitions; a checkpoint's delta carries it whole (CGAP).

// untimedBase marks, in userTable.times, a user whose latest event carried
// no time: times[u] is then untimedBase plus the model's own events
// learned up to and including it, so that the count of the user's next
// event is the events learned between the two. Times of events below
// minTimeMS are read as minTimeMS, so the two ranges never meet.
const (
	untimedBase = math.MinInt64 / 2 // −2⁶²
	minTimeMS   = math.MinInt64 / 4 // −2⁶¹ ms, 73 million years before 1970
)

// countGapMinMass is the decayed mass of counted gaps the scale needs
// before a count is read as a gap.
const countGapMinMass = 100

// countGapStats is the decayed mean of log(1 + count) over the counted
// gaps of the context's window: the stream's typical gap in events.
type countGapStats struct {
	mass, sum float64
}

// learn adds a counted gap of log(1 + count) lg.
func (s *countGapStats) learn(lg float64) {
	keep := contextKeep(s.mass)
	s.mass = keep*s.mass + 1
	s.sum = keep*s.sum + lg
}

// seconds is the gap, in seconds, that a count of log(1 + count) lg is
// read as: shortClickMS at the scale's mean, in proportion around it; ok
// is false until the scale has countGapMinMass.
func (s *countGapStats) seconds(lg float64) (float64, bool) {
	if s.mass < countGapMinMass {
		return 0, false
	}
	return shortClickMS / 1000 * exp(lg-s.sum/s.mass), true
}

func (s *countGapStats) encode(e *encoder) {
	e.f64(s.mass)
	e.f64(s.sum)
}

// decode reads what encode writes, refusing statistics no stream gives:
// not finite, negative, a mass beyond contextWindow or a sum beyond what
// gaps of at most 2⁶³ events give.
func (s *countGapStats) decode(d *decoder) {
	s.mass, s.sum = d.f64(), d.f64()
	switch {
	case d.err != nil:
	case !finite([]float64{s.mass, s.sum}):
		d.fail("count gap's scale not finite")
	case s.mass < 0 || s.sum < 0 || s.mass > contextWindow || s.sum > 64*s.mass:
		d.fail("count gap's scale out of range")
	}
}

// untimed is the mark of a clock of events learned, in [untimedBase,
// minTimeMS): what userTable.times holds for a user whose latest event
// carried no time (untimed(events learned up to and including it)), and
// what a count is read against (untimed(events learned so far)).
func untimed(events uint64) int64 { return untimedBase + int64(min(events, math.MaxInt64/4)) }

// isUntimed reports whether a value of userTable.times is untimed's.
func isUntimed(t int64) bool { return t >= untimedBase && t < minTimeMS }
