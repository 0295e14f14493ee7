package online

import "math"

// schedule is the model's progress: the event counters and the ρ
// schedule of the distillation threshold (1+ρ)/2, which reads how far the
// mean T̂ moved between refit periods.
type schedule struct {
	rho float64
	// periodSum is Σ T̂ (K×K) over the periodCount observed events of the
	// current period; lastMean the mean of the last finished one.
	periodSum   []float64
	periodCount uint64
	lastMean    []float64
	hasLastMean bool

	events    uint64 // events learned from
	distilled uint64 // observed events given a distilled label
	refits    uint64 // refits of the mixture, one per RefitEvery events
	numErrors uint64 // updates or scores discarded as non-finite

	// merged is the events of other partitions' models whose deltas the
	// model merged (Shared.Events), and periods the ρ periods it ended.
	// The clock, events + merged, counts the stream's events as far as
	// the model knows them; the warm-up and the ρ schedule follow it
	// (clock.go). Without merges the clock is events and periods is
	// refits.
	merged  uint64
	periods uint64
}

func newSchedule(k int, rho float64) schedule {
	return schedule{rho: rho, periodSum: make([]float64, k*k), lastMean: make([]float64, k*k)}
}

// observe adds an observed event's T̂ to the period.
func (s *schedule) observe(t []float64) {
	axpy(s.periodSum, 1, t)
	s.periodCount++
}

// endPeriod closes the period: the mean T̂ becomes lastMean. It returns
// the mean absolute change per row, and whether there was a mean to
// compare with; ok is false for an empty period, which changes nothing.
func (s *schedule) endPeriod(k int) (moved float64, compared, ok bool) {
	if s.periodCount == 0 {
		return 0, false, false
	}
	delta := 0.0
	for j, sum := range s.periodSum {
		mean := sum / float64(s.periodCount)
		delta += math.Abs(mean - s.lastMean[j])
		s.lastMean[j] = mean
		s.periodSum[j] = 0
	}
	s.periodCount = 0
	compared = s.hasLastMean
	s.hasLastMean = true
	return delta / float64(k), compared, true
}

// relax lowers ρ by step, not below floor.
func (s *schedule) relax(step, floor float64) {
	s.rho = math.Max(floor, s.rho-step)
}

// meanTransition is the mean T̂ of the last finished period, else of the
// current one so far, else identity.
func (s *schedule) meanTransition(k int, identity []float64) [][]float64 {
	src := s.lastMean
	if !s.hasLastMean {
		src = make([]float64, k*k)
		if s.periodCount > 0 {
			for j, v := range s.periodSum {
				src[j] = v / float64(s.periodCount)
			}
		} else {
			copy(src, identity)
		}
	}
	rows := make([][]float64, k)
	for j := range rows {
		rows[j] = append([]float64(nil), src[j*k:(j+1)*k]...)
	}
	return rows
}

// encodeMeans writes periodSum and lastMean; the scalars are counters.
func (s *schedule) encodeMeans(e *encoder) {
	e.floats(s.periodSum)
	e.floats(s.lastMean)
}

func (s *schedule) decodeMeans(d *decoder, k int) {
	s.periodSum, s.lastMean = d.floats(k*k), d.floats(k*k)
}

func (s *schedule) copyFrom(src *schedule) {
	periodSum := append(s.periodSum[:0], src.periodSum...)
	lastMean := append(s.lastMean[:0], src.lastMean...)
	*s = *src
	s.periodSum, s.lastMean = periodSum, lastMean
}
