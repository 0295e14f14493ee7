package eval

import (
	"math"
	"slices"
	"testing"

	"denoiser/internal/movielens"
)

func TestNoiseMatrixDefinition(t *testing.T) {
	for _, kind := range []string{NoiseSymmetric, NoisePairflip} {
		for _, eta := range []float64{0, 0.1, 0.4} {
			tm, err := NoiseMatrix(kind, eta, 5)
			if err != nil {
				t.Fatal(err)
			}
			for y := range 5 {
				row := tm[y*5 : (y+1)*5]
				sum := 0.0
				for j, p := range row {
					sum += p
					var want float64
					switch {
					case j == y:
						want = 1 - eta
					case kind == NoiseSymmetric:
						want = eta / 4
					case j == (y+1)%5:
						want = eta
					}
					if !near(p, want, 1e-15) {
						t.Errorf("%s %v: T[%d][%d] = %v, want %v", kind, eta, y, j, p, want)
					}
				}
				if !near(sum, 1, 1e-12) {
					t.Errorf("%s %v: row %d sums to %v", kind, eta, y, sum)
				}
			}
			// The identity estimator's error is 10η for K = 5.
			if id := L1(identity(5), tm); !near(id, 10*eta, 1e-12) {
				t.Errorf("%s %v: identity L1 = %v, want %v", kind, eta, id, 10*eta)
			}
		}
	}
	if _, err := NoiseMatrix("bogus", 0.1, 5); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := NoiseMatrix(NoiseSymmetric, 1, 5); err == nil {
		t.Error("rate 1 accepted")
	}
}

// TestInjectNoiseEmpirical injects noise into 100k ratings spread over the
// five classes and checks that the empirical flip matrix matches the
// definition within sampling error (4 standard errors).
func TestInjectNoiseEmpirical(t *testing.T) {
	const n = 100000
	rows := make([]Interaction, n)
	for k := range rows {
		rows[k].Rating = 1 + k%5
	}
	for _, kind := range []string{NoiseSymmetric, NoisePairflip} {
		tm, _ := NoiseMatrix(kind, 0.3, 5)
		noisy := InjectNoise(rows, tm, 5, 7)
		count := make([]float64, 25)
		for k, x := range noisy {
			if x.Clean != rows[k].Rating {
				t.Fatalf("row %d: clean rating %d, want %d", k, x.Clean, rows[k].Rating)
			}
			count[(x.Clean-1)*5+x.Rating-1]++
		}
		per := float64(n / 5)
		for c, v := range count {
			p := v / per
			se := math.Sqrt(tm[c]*(1-tm[c])/per) + 1e-9
			if math.Abs(p-tm[c]) > 4*se {
				t.Errorf("%s: empirical T[%d][%d] = %.4f, want %.4f ± %.4f", kind, c/5, c%5, p, tm[c], 4*se)
			}
		}
		again := InjectNoise(rows, tm, 5, 7)
		if !slices.Equal(noisy, again) {
			t.Errorf("%s: same seed, different noise", kind)
		}
	}
}

func TestSplitSizesAndCover(t *testing.T) {
	for _, tc := range []struct{ n, tr, va, te int }{
		{100000, 80000, 10000, 10000},
		{10, 8, 1, 1},
		{7, 5, 0, 2},
		{99, 79, 9, 11},
	} {
		tr, va, te := SplitSizes(tc.n)
		if tr != tc.tr || va != tc.va || te != tc.te {
			t.Errorf("SplitSizes(%d) = %d %d %d, want %d %d %d", tc.n, tr, va, te, tc.tr, tc.va, tc.te)
		}
	}
	var rs []movielens.Rating
	for k := range 1000 {
		rs = append(rs, movielens.Rating{User: int64(k % 37), Item: int64(k % 101), Rating: float64(1 + k%5), Seconds: int64(1000 - k)})
	}
	d := FromRatings(rs)
	for _, mode := range []string{SplitRandom, SplitChrono} {
		s, err := SplitData(d, mode, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Train) != 800 || len(s.Valid) != 100 || len(s.Test) != 100 {
			t.Fatalf("%s: sizes %d %d %d", mode, len(s.Train), len(s.Valid), len(s.Test))
		}
		all := slices.Concat(s.Train, s.Valid, s.Test)
		key := func(x Interaction) int64 { return x.Seconds }
		ks := make([]int64, len(all))
		for k, x := range all {
			ks[k] = key(x)
		}
		slices.Sort(ks)
		for k := range ks {
			if ks[k] != int64(k+1) {
				t.Fatalf("%s: the split is not a partition (at %d: %d)", mode, k, ks[k])
			}
		}
		if mode == SplitChrono {
			last := s.Train[len(s.Train)-1].Seconds
			for _, x := range append(s.Valid, s.Test...) {
				if x.Seconds < last {
					t.Fatalf("chrono: held-out interaction at %d before the last training one at %d", x.Seconds, last)
				}
			}
		}
		s2, _ := SplitData(d, mode, 3)
		if !slices.Equal(s.Test, s2.Test) {
			t.Errorf("%s: same seed, different split", mode)
		}
	}
	if _, err := SplitData(d, "bogus", 1); err == nil {
		t.Error("unknown split mode accepted")
	}
	if got := CleanTest([]Interaction{{Rating: 5}, {Rating: 4}, {Rating: 5}}, 5); len(got) != 2 {
		t.Errorf("CleanTest kept %d, want 2", len(got))
	}
}

// TestFromRatingsHalfStars: the evaluations work on integer levels; a
// half-star rating (MovieLens latest) takes the class rating mode gives
// it, rounded half up.
func TestFromRatingsHalfStars(t *testing.T) {
	rs := []movielens.Rating{{User: 1, Item: 1, Rating: 0.5}, {User: 1, Item: 2, Rating: 1}, {User: 2, Item: 1, Rating: 2.5}, {User: 2, Item: 2, Rating: 4.5}, {User: 3, Item: 3, Rating: 4}}
	d := FromRatings(rs)
	for k, want := range []int{1, 1, 3, 5, 4} {
		if got := d.Rows[k]; got.Rating != want || got.Clean != want {
			t.Errorf("rating %v: row %+v, want rating and clean %d", rs[k].Rating, got, want)
		}
	}
}
