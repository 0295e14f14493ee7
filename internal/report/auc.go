package report

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrOneClass is returned when the labels hold only one class, so that a
// ranking metric is undefined.
var ErrOneClass = errors.New("need both positive and negative examples")

// ErrNaN is returned when a score is NaN.
var ErrNaN = errors.New("score is NaN")

type scored struct {
	s   float64
	pos bool
}

// groups sorts the examples by descending score and calls fn for every
// group of tied scores with its counts of positives and negatives.
func groups(scores []float64, positive []bool, fn func(tp, fp uint64)) (p, n uint64, err error) {
	if len(scores) != len(positive) {
		return 0, 0, fmt.Errorf("rank scores: %d scores but %d labels", len(scores), len(positive))
	}
	xs := make([]scored, len(scores))
	for i, s := range scores {
		if math.IsNaN(s) {
			return 0, 0, fmt.Errorf("rank scores: example %d: %w", i, ErrNaN)
		}
		xs[i] = scored{s, positive[i]}
		if positive[i] {
			p++
		} else {
			n++
		}
	}
	if p == 0 || n == 0 {
		return p, n, fmt.Errorf("rank scores: %d positives, %d negatives: %w", p, n, ErrOneClass)
	}
	slices.SortFunc(xs, func(a, b scored) int { return cmp.Compare(b.s, a.s) })
	for i := 0; i < len(xs); {
		var tp, fp uint64
		j := i
		for ; j < len(xs) && xs[j].s == xs[i].s; j++ {
			if xs[j].pos {
				tp++
			} else {
				fp++
			}
		}
		fn(tp, fp)
		i = j
	}
	return p, n, nil
}

// ROCAUC is the area under the ROC curve: the probability that a random
// positive scores above a random negative, a tie counting one half. It is
// exact (integer counting) for up to about 4·10⁹ examples.
func ROCAUC(scores []float64, positive []bool) (float64, error) {
	var above, twice uint64 // positives seen so far; 2 × winning pairs
	p, n, err := groups(scores, positive, func(tp, fp uint64) {
		twice += fp * (2*above + tp)
		above += tp
	})
	if err != nil {
		return math.NaN(), err
	}
	return float64(twice) / (2 * float64(p) * float64(n)), nil
}

// AveragePrecision is the area under the precision-recall curve as the
// step-wise sum Σ (R_k − R_{k−1}) P_k over the distinct score thresholds
// from high to low, tied scores forming a single threshold.
func AveragePrecision(scores []float64, positive []bool) (float64, error) {
	var tpSum, fpSum uint64
	var sum float64
	p, _, err := groups(scores, positive, func(tp, fp uint64) {
		tpSum += tp
		fpSum += fp
		if tp > 0 {
			sum += float64(tp) * float64(tpSum) / float64(tpSum+fpSum)
		}
	})
	if err != nil {
		return math.NaN(), err
	}
	return sum / float64(p), nil
}

// ECE is the expected calibration error of probabilities p against the
// outcomes genuine, over bins equal-width bins of [0, 1]: the mean, over
// events, of |mean probability − share genuine| of each event's bin. It
// also returns the per-bin mean probability, share genuine and count (the
// reliability diagram). A calibrated score has ECE near 0.
func ECE(p []float64, genuine []bool, bins int) (ece float64, meanP, share []float64, count []int) {
	meanP, share, count = make([]float64, bins), make([]float64, bins), make([]int, bins)
	for i, v := range p {
		b := min(max(int(v*float64(bins)), 0), bins-1)
		meanP[b] += v
		if genuine[i] {
			share[b]++
		}
		count[b]++
	}
	for b := range bins {
		if count[b] == 0 {
			continue
		}
		ece += math.Abs(meanP[b]-share[b]) / float64(len(p))
		meanP[b] /= float64(count[b])
		share[b] /= float64(count[b])
	}
	return ece, meanP, share, count
}

// CalibrationBin is one bin of a reliability diagram: the events whose
// probability falls in [Lower, Upper) ([Lower, 1] for the last bin).
type CalibrationBin struct {
	Lower         float64 `json:"lower"`
	Upper         float64 `json:"upper"`
	MeanPredicted float64 `json:"mean_predicted"` // mean probability of the bin's events
	ShareGenuine  float64 `json:"share_genuine"`  // observed share of genuine events among them
	Count         int     `json:"count"`
}

// ReliabilityDiagram is ECE with its diagram: the expected calibration
// error of p against genuine over bins equal-width bins of [0, 1], and
// the bins that hold at least one event, in order.
func ReliabilityDiagram(p []float64, genuine []bool, bins int) (ece float64, diagram []CalibrationBin) {
	ece, meanP, share, count := ECE(p, genuine, bins)
	for b := range bins {
		if count[b] == 0 {
			continue
		}
		diagram = append(diagram, CalibrationBin{
			Lower: float64(b) / float64(bins), Upper: float64(b+1) / float64(bins),
			MeanPredicted: meanP[b], ShareGenuine: share[b], Count: count[b],
		})
	}
	return ece, diagram
}
