package eval

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// PairedTTest returns the mean of the differences a[k] − b[k], Student's t
// statistic of the paired test (n − 1 degrees of freedom) and its
// two-sided p-value. ok is false when the test is undefined: fewer than
// two pairs, or differences that are all equal but not zero (t infinite).
// Equal lists give t = 0 and p = 1. It panics if the lengths differ.
func PairedTTest(a, b []float64) (meanDiff, t, p float64, ok bool) {
	if len(a) != len(b) {
		panic("eval: PairedTTest of lists of different lengths")
	}
	diff := make([]float64, len(a))
	for k := range a {
		diff[k] = a[k] - b[k]
	}
	mean, sd := MeanStd(diff)
	n := float64(len(diff))
	switch {
	case len(diff) < 2:
		return mean, math.NaN(), math.NaN(), false
	case sd == 0 && mean == 0:
		return 0, 0, 1, true
	case sd == 0:
		return mean, math.NaN(), math.NaN(), false
	}
	t = mean / (sd / math.Sqrt(n))
	st := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}
	return mean, t, 2 * st.Survival(math.Abs(t)), true
}

// Paired is one paired comparison over seeds: Method's metric minus
// Baseline's, seed by seed (same seed, same initialisation and sampling
// stream of the downstream model).
type Paired struct {
	Backbone string `json:"backbone"`
	Method   string `json:"method"`
	Baseline string `json:"baseline"`
	Metric   string `json:"metric"` // recall or ndcg
	Cutoff   int    `json:"cutoff"`
	N        int    `json:"n"` // pairs (seeds)
	// MeanDiff is the mean difference; T and PValue the paired t-test's
	// statistic and two-sided p-value, null where the test is undefined
	// (one seed, or identical non-zero differences).
	MeanDiff float64  `json:"mean_diff"`
	T        *float64 `json:"t"`
	PValue   *float64 `json:"p_value"`
}

// PairedCutoffs are the cutoffs of the paired comparisons.
var PairedCutoffs = []int{10, 50}

// pairedComparisons compares method with each baseline within group, at
// recall and NDCG at PairedCutoffs. Rows or cutoffs that are missing are
// skipped.
func pairedComparisons(rows []Row, cutoffs []int, backbone, group, method string, baselines []string) []Paired {
	find := func(name string) *Row {
		for k := range rows {
			if rows[k].Group == group && rows[k].Method == name {
				return &rows[k]
			}
		}
		return nil
	}
	m := find(method)
	if m == nil {
		return nil
	}
	var out []Paired
	for _, base := range baselines {
		b := find(base)
		if b == nil || len(b.PerSeed) != len(m.PerSeed) {
			continue
		}
		for _, metric := range []string{"recall", "ndcg"} {
			for _, k := range PairedCutoffs {
				c := slices.Index(cutoffs, k)
				if c < 0 {
					continue
				}
				get := func(r *Row) []float64 {
					var xs []float64
					for _, s := range r.PerSeed {
						if metric == "recall" {
							xs = append(xs, s.Recall[c])
						} else {
							xs = append(xs, s.NDCG[c])
						}
					}
					return xs
				}
				mean, t, p, ok := PairedTTest(get(m), get(b))
				pr := Paired{Backbone: backbone, Method: method, Baseline: base, Metric: metric, Cutoff: k, N: len(m.PerSeed), MeanDiff: mean}
				if ok {
					pr.T, pr.PValue = &t, &p
				}
				out = append(out, pr)
			}
		}
	}
	return out
}
