package eval

import (
	"math"
	"testing"
)

// TestPairedTTest checks the test against answers known in closed form (1
// and 2 degrees of freedom, whose t distributions have elementary CDFs)
// and against a textbook case.
func TestPairedTTest(t *testing.T) {
	tests := []struct {
		name        string
		a, b        []float64
		mean, tstat float64
		p           float64
	}{
		// d = (1, 3): mean 2, sd √2, t = 2; with 1 df (Cauchy) p = 1 − (2/π) atan 2.
		{"1 df", []float64{1, 3}, []float64{0, 0}, 2, 2, 1 - 2/math.Pi*math.Atan(2)},
		// d = (1, 2, 3): mean 2, sd 1, t = 2√3; with 2 df p = 1 − t/√(2 + t²).
		{"2 df", []float64{2, 4, 6}, []float64{1, 2, 3}, 2, 2 * math.Sqrt(3), 1 - 2*math.Sqrt(3)/math.Sqrt(14)},
		// The same differences the other way round: t changes sign, p stays.
		{"2 df negative", []float64{1, 2, 3}, []float64{2, 4, 6}, -2, -2 * math.Sqrt(3), 1 - 2*math.Sqrt(3)/math.Sqrt(14)},
		// Student's sleep data (Cushny and Peebles), the paired test in R's
		// t.test(extra ~ group, data = sleep, paired = TRUE):
		// t = −4.0621, df = 9, p = 0.002833.
		{"sleep data",
			[]float64{0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0},
			[]float64{1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4},
			-1.58, -4.0621, 0.002833},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mean, ts, p, ok := PairedTTest(tc.a, tc.b)
			if !ok {
				t.Fatal("undefined")
			}
			if !near(mean, tc.mean, 1e-12) || !near(ts, tc.tstat, 5e-5) || !near(p, tc.p, 5e-7) {
				t.Errorf("mean %v t %v p %v, want %v %v %v", mean, ts, p, tc.mean, tc.tstat, tc.p)
			}
		})
	}
	if _, ts, p, ok := PairedTTest([]float64{1, 2}, []float64{1, 2}); !ok || ts != 0 || p != 1 {
		t.Errorf("equal lists: t %v p %v ok %v, want 0, 1, true", ts, p, ok)
	}
	for _, c := range [][2][]float64{{{1}, {0}}, {{2, 3}, {1, 2}}} {
		if _, _, _, ok := PairedTTest(c[0], c[1]); ok {
			t.Errorf("%v − %v: defined", c[0], c[1])
		}
	}
}

func TestPairedComparisons(t *testing.T) {
	seeds := func(r10 ...float64) []RankMetrics {
		var out []RankMetrics
		for _, r := range r10 {
			out = append(out, RankMetrics{Recall: []float64{0, r, 0, 2 * r}, NDCG: []float64{0, r / 2, 0, r}})
		}
		return out
	}
	rows := []Row{
		{Method: "Normal", Group: GroupDownstream, PerSeed: seeds(1, 2, 3)},
		{Method: "full", Group: GroupDownstream, PerSeed: seeds(2, 4, 6)},
		{Method: "full", Group: GroupDenoiserF, PerSeed: seeds(9, 9, 9)},
	}
	ps := pairedComparisons(rows, Cutoffs, "GMF", GroupDownstream, "full", []string{"Normal", "T-CE"})
	// T-CE is missing: recall and NDCG at 10 and 50 against Normal.
	if len(ps) != 4 {
		t.Fatalf("%d comparisons, want 4: %+v", len(ps), ps)
	}
	want := map[[2]any]float64{{"recall", 10}: 2, {"recall", 50}: 4, {"ndcg", 10}: 1, {"ndcg", 50}: 2}
	for _, p := range ps {
		if p.Backbone != "GMF" || p.Method != "full" || p.Baseline != "Normal" || p.N != 3 || p.PValue == nil || p.T == nil {
			t.Fatalf("comparison %+v", p)
		}
		// Every difference list is a multiple of (1, 2, 3): the 2-df case.
		if !near(p.MeanDiff, want[[2]any{p.Metric, p.Cutoff}], 1e-12) || !near(*p.PValue, 1-2*math.Sqrt(3)/math.Sqrt(14), 1e-9) {
			t.Errorf("%s@%d: mean %v p %v", p.Metric, p.Cutoff, p.MeanDiff, *p.PValue)
		}
	}
}
