package report

import (
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"gonum.org/v1/gonum/integrate"
	"gonum.org/v1/gonum/stat"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestMetricsHandComputed(t *testing.T) {
	tests := []struct {
		name    string
		scores  []float64
		pos     []bool
		auc, ap float64
	}{
		// scikit-learn's documented example: roc_auc_score 0.75, average_precision_score 0.8333.
		{"sklearn example", []float64{0.1, 0.4, 0.35, 0.8}, []bool{false, false, true, true}, 0.75, 5.0 / 6},
		{"perfect", []float64{3, 2, 1, 0}, []bool{true, true, false, false}, 1, 1},
		{"reversed", []float64{3, 2, 1, 0}, []bool{false, false, true, true}, 0, (1.0/3 + 2.0/4) / 2},
		// All tied: every pair counts one half; one threshold with precision 1/2.
		{"all tied", []float64{0.5, 0.5, 0.5, 0.5}, []bool{true, false, true, false}, 0.5, 0.5},
		// Positives {1, 0}, negative {1}: pairs (1,1) tie = 1/2, (0,1) lose = 0 -> 1/4.
		// Thresholds: >=1 recall 1/2 precision 1/2; >=0 recall 1 precision 2/3.
		{"partial tie", []float64{1, 1, 0}, []bool{true, false, true}, 0.25, 0.5*0.5 + 0.5*2.0/3},
		// Ranks (ascending) 1..5 for 0.1,0.2,0.2,0.3,0.4; midranks of the tie 2.5.
		// Positives 0.2 (2.5) and 0.4 (5): (7.5 - 3) / (2*3) = 0.75.
		{"midranks", []float64{0.2, 0.1, 0.4, 0.2, 0.3}, []bool{true, false, true, false, false}, 0.75, 0.5*1 + 0.5*(2.0/4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			auc, err := ROCAUC(tt.scores, tt.pos)
			if err != nil || !near(auc, tt.auc) {
				t.Errorf("ROCAUC = %v, %v; want %v", auc, err, tt.auc)
			}
			ap, err := AveragePrecision(tt.scores, tt.pos)
			if err != nil || !near(ap, tt.ap) {
				t.Errorf("AveragePrecision = %v, %v; want %v", ap, err, tt.ap)
			}
		})
	}
}

// TestMetricsKnownAnswer: scores 1..2m, positive when even. A positive 2k
// beats the k odd scores below it, so AUC = Σk / m² = (m+1)/(2m); ranked
// from the top the labels alternate pos, neg, ..., so the j-th positive
// comes at rank 2j−1 and AP = (1/m) Σ j/(2j−1).
func TestMetricsKnownAnswer(t *testing.T) {
	const m = 1000
	scores := make([]float64, 2*m)
	pos := make([]bool, 2*m)
	for i := range scores {
		scores[i] = float64(i + 1)
		pos[i] = (i+1)%2 == 0
	}
	// Shuffle: the answer must not depend on input order.
	rnd := rand.New(rand.NewPCG(1, 2))
	rnd.Shuffle(len(scores), func(i, j int) {
		scores[i], scores[j] = scores[j], scores[i]
		pos[i], pos[j] = pos[j], pos[i]
	})
	wantAP := 0.0
	for j := 1; j <= m; j++ {
		wantAP += float64(j) / float64(2*j-1)
	}
	wantAP /= m
	auc, err := ROCAUC(scores, pos)
	if err != nil || !near(auc, float64(m+1)/(2*m)) {
		t.Errorf("ROCAUC = %v, %v; want %v", auc, err, float64(m+1)/(2*m))
	}
	ap, err := AveragePrecision(scores, pos)
	if err != nil || !near(ap, wantAP) {
		t.Errorf("AveragePrecision = %v, %v; want %v", ap, err, wantAP)
	}
}

// TestMetricsBruteForce compares against the definitions computed the slow
// way, on data with many ties.
func TestMetricsBruteForce(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for trial := range 50 {
		n := 2 + rnd.IntN(60)
		scores := make([]float64, n)
		pos := make([]bool, n)
		for i := range n {
			scores[i] = float64(rnd.IntN(8)) / 4
			pos[i] = rnd.IntN(3) == 0
		}
		pos[0], pos[1] = true, false
		var wins, p, q float64
		for i := range n {
			if !pos[i] {
				q++
				continue
			}
			p++
			for j := range n {
				if pos[j] {
					continue
				}
				switch {
				case scores[i] > scores[j]:
					wins++
				case scores[i] == scores[j]:
					wins += 0.5
				}
			}
		}
		// AP: for each distinct threshold, precision × recall gain.
		seen := map[float64]bool{}
		var ap float64
		for _, th := range scores {
			if seen[th] {
				continue
			}
			seen[th] = true
			var tp, fp, gain float64
			for i := range n {
				if scores[i] >= th {
					if pos[i] {
						tp++
					} else {
						fp++
					}
				}
				if scores[i] == th && pos[i] {
					gain++
				}
			}
			if gain > 0 {
				ap += gain / p * tp / (tp + fp)
			}
		}
		auc, err1 := ROCAUC(scores, pos)
		gotAP, err2 := AveragePrecision(scores, pos)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if !near(auc, wins/(p*q)) || !near(gotAP, ap) {
			t.Fatalf("trial %d: ROCAUC %v want %v, AP %v want %v", trial, auc, wins/(p*q), gotAP, ap)
		}
	}
}

func TestMetricsErrors(t *testing.T) {
	if _, err := ROCAUC([]float64{1, 2}, []bool{true, true}); !errors.Is(err, ErrOneClass) {
		t.Errorf("one class: %v", err)
	}
	if _, err := AveragePrecision(nil, nil); !errors.Is(err, ErrOneClass) {
		t.Errorf("empty: %v", err)
	}
	if _, err := ROCAUC([]float64{1, math.NaN()}, []bool{true, false}); !errors.Is(err, ErrNaN) {
		t.Errorf("NaN: %v", err)
	}
	if _, err := ROCAUC([]float64{1}, []bool{true, false}); err == nil {
		t.Error("length mismatch accepted")
	}
	// Infinities are ordinary extreme scores.
	if auc, err := ROCAUC([]float64{math.Inf(1), math.Inf(-1)}, []bool{true, false}); err != nil || auc != 1 {
		t.Errorf("infinities: %v, %v", auc, err)
	}
}

func BenchmarkROCAUC(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 1))
	s := make([]float64, 200000)
	p := make([]bool, len(s))
	for i := range s {
		s[i], p[i] = rnd.Float64(), rnd.IntN(5) > 0
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ROCAUC(s, p); err != nil {
			b.Fatal(err)
		}
	}
}

// TestROCAUCMatchesGonum cross-checks ROCAUC against gonum's ROC curve
// integrated with the trapezoid rule, on random scores with many ties.
// ROCAUC counts pairs exactly and shares its tie grouping with
// AveragePrecision (which gonum does not provide); gonum is the reference.
func TestROCAUCMatchesGonum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 20; trial++ {
		n := 50 + r.IntN(500)
		scores := make([]float64, n)
		pos := make([]bool, n)
		for i := range scores {
			pos[i] = r.Float64() < 0.3
			s := float64(r.IntN(20)) // ties
			if pos[i] {
				s += 3
			}
			scores[i] = s
		}
		got, err := ROCAUC(scores, pos)
		if err != nil {
			t.Fatal(err)
		}
		// gonum wants the scores sorted ascending, with the classes
		// alongside.
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
		ys, cs := make([]float64, n), make([]bool, n)
		for k, i := range idx {
			ys[k], cs[k] = scores[i], pos[i]
		}
		tpr, fpr, _ := stat.ROC(nil, ys, cs, nil)
		want := integrate.Trapezoidal(fpr, tpr)
		if math.Abs(got-want) > 1e-12 {
			t.Fatalf("trial %d: ROCAUC %.15f, gonum %.15f", trial, got, want)
		}
	}
}

// TestECE on data with a known answer: probabilities that match the
// outcome shares exactly have ECE 0; a constant 0.9 on a 50/50 set has 0.4.
func TestECE(t *testing.T) {
	var p []float64
	var g []bool
	for i := range 100 {
		p = append(p, 0.25, 0.75)
		g = append(g, i%4 == 0, i%4 != 0)
	}
	if e, _, _, _ := ECE(p, g, 10); math.Abs(e) > 1e-12 {
		t.Errorf("calibrated: ECE %v, want 0", e)
	}
	p, g = []float64{0.9, 0.9, 0.9, 0.9}, []bool{true, false, true, false}
	e, meanP, share, count := ECE(p, g, 10)
	if math.Abs(e-0.4) > 1e-12 || count[9] != 4 || math.Abs(meanP[9]-0.9) > 1e-12 || share[9] != 0.5 {
		t.Errorf("over-confident: ECE %v, bin 9 (%v, %v, %d), want 0.4, (0.9, 0.5, 4)", e, meanP[9], share[9], count[9])
	}
}

// TestReliabilityDiagram: the diagram is ECE's bins that hold events, with
// their bounds, in order; empty bins are left out.
func TestReliabilityDiagram(t *testing.T) {
	p := []float64{0.05, 0.05, 0.55, 0.95, 1}
	g := []bool{false, true, true, true, true}
	ece, d := ReliabilityDiagram(p, g, 10)
	want := []CalibrationBin{{0, 0.1, 0.05, 0.5, 2}, {0.5, 0.6, 0.55, 1, 1}, {0.9, 1, 0.975, 1, 2}}
	if e, _, _, _ := ECE(p, g, 10); ece != e {
		t.Errorf("ECE %v, ReliabilityDiagram's %v", e, ece)
	}
	if len(d) != len(want) {
		t.Fatalf("diagram %+v, want %+v", d, want)
	}
	for i := range want {
		if math.Abs(d[i].Lower-want[i].Lower) > 1e-12 || math.Abs(d[i].Upper-want[i].Upper) > 1e-12 ||
			math.Abs(d[i].MeanPredicted-want[i].MeanPredicted) > 1e-12 || d[i].ShareGenuine != want[i].ShareGenuine || d[i].Count != want[i].Count {
			t.Errorf("bin %d: %+v, want %+v", i, d[i], want[i])
		}
	}
}
