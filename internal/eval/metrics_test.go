package eval

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestUserRecallNDCG(t *testing.T) {
	l3, l5 := math.Log2(3), math.Log2(5)
	ranked := []int32{3, 1, 2, 5}
	rel := map[int32]bool{1: true, 5: true}
	tests := []struct {
		name         string
		ranked       []int32
		rel          map[int32]bool
		k            int
		recall, ndcg float64
	}{
		{"one hit at rank 2 of 2", ranked, rel, 2, 0.5, (1 / l3) / (1 + 1/l3)},
		{"both hits within 4", ranked, rel, 4, 1, (1/l3 + 1/l5) / (1 + 1/l3)},
		{"no hit at 1", ranked, rel, 1, 0, 0},
		{"perfect list", []int32{5, 1, 9}, rel, 2, 1, 1},
		{"k beyond the list", []int32{1}, rel, 10, 0.5, 1 / (1 + 1/l3)},
		{"single relevant at rank 3", []int32{7, 8, 4}, map[int32]bool{4: true}, 5, 1, 1 / math.Log2(4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, n := UserRecallNDCG(tc.ranked, tc.rel, tc.k)
			if !near(r, tc.recall, 1e-12) || !near(n, tc.ndcg, 1e-12) {
				t.Errorf("got recall %v ndcg %v, want %v %v", r, n, tc.recall, tc.ndcg)
			}
		})
	}
}

// TestEvaluateExcludesTrain checks the full ranking on a 2-user, 8-item
// case worked by hand: training items are never ranked, users without
// test items are not averaged.
func TestEvaluateExcludesTrain(t *testing.T) {
	// Scores: item i scores 10−i for everyone, so the order is 0,1,2,...
	score := func(u int32, dst []float64) {
		for i := range dst {
			dst[i] = float64(10 - i)
		}
	}
	train := []Interaction{{User: 0, Item: 0}, {User: 0, Item: 1}, {User: 1, Item: 2}}
	// User 0 ranks 2,3,4,5,6,7: test item 3 is at rank 2.
	// User 1 ranks 0,1,3,4,...: test items 0 (rank 1) and 7 (rank 7).
	// User 2 has no test item.
	test := []Interaction{{User: 0, Item: 3}, {User: 1, Item: 0}, {User: 1, Item: 7}}
	m := Evaluate(score, 3, 8, train, test)
	if m.Users != 2 {
		t.Fatalf("users = %d, want 2", m.Users)
	}
	l := func(r int) float64 { return 1 / math.Log2(float64(r)+1) }
	// @5: user 0 recall 1, ndcg l(2)/l(1); user 1 recall 1/2, ndcg 1/(1+l(2)).
	wantR5 := (1 + 0.5) / 2
	wantN5 := (l(2) + 1/(1+l(2))) / 2
	// @10 (all ranked): user 1 gets both: ndcg (1+l(7))/(1+l(2)).
	wantN10 := (l(2) + (1+l(7))/(1+l(2))) / 2
	if !near(m.Recall[0], wantR5, 1e-12) || !near(m.NDCG[0], wantN5, 1e-12) {
		t.Errorf("@5 = %v %v, want %v %v", m.Recall[0], m.NDCG[0], wantR5, wantN5)
	}
	if !near(m.Recall[1], 1, 1e-12) || !near(m.NDCG[1], wantN10, 1e-12) {
		t.Errorf("@10 = %v %v, want 1 %v", m.Recall[1], m.NDCG[1], wantN10)
	}
}

func TestTopKMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		n := 1 + r.IntN(300)
		s := make([]float64, n)
		for i := range s {
			s[i] = float64(r.IntN(20)) // many ties
		}
		cand := make([]int32, 0, n)
		for i := range int32(n) {
			if r.IntN(4) > 0 {
				cand = append(cand, i)
			}
		}
		want := slices.Clone(cand)
		slices.SortStableFunc(want, func(a, b int32) int {
			if s[a] != s[b] {
				if s[a] > s[b] {
					return -1
				}
				return 1
			}
			return int(a - b)
		})
		k := 1 + r.IntN(60)
		got := topK(slices.Clone(cand), s, k)
		if !slices.Equal(got, want[:min(k, len(want))]) {
			t.Fatalf("trial %d: topK = %v, want %v", trial, got, want[:min(k, len(want))])
		}
	}
}

func TestMeanStd(t *testing.T) {
	m, s := MeanStd([]float64{1, 2, 3, 4})
	if m != 2.5 || !near(s, math.Sqrt(5.0/3), 1e-12) {
		t.Errorf("MeanStd = %v %v, want 2.5 %v", m, s, math.Sqrt(5.0/3))
	}
	if m, s := MeanStd([]float64{7}); m != 7 || s != 0 {
		t.Errorf("MeanStd of one = %v %v", m, s)
	}
}
