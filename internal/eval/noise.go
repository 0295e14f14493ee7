package eval

import (
	"fmt"
	"math/rand/v2"
)

// Noise kinds of the flip experiments (RQ2).
const (
	NoiseSymmetric = "symmetric" // y flips to each other class with probability η/(K−1)
	NoisePairflip  = "pairflip"  // y flips to (y+1) mod K with probability η (BLTM's noisify_pairflip)
)

// NoiseMatrix returns the K×K row-stochastic flip matrix T, row-major,
// T[y*K+j] = P(ỹ = j | y).
func NoiseMatrix(kind string, eta float64, k int) ([]float64, error) {
	if k < 2 {
		return nil, fmt.Errorf("noise matrix: %d classes; need at least 2", k)
	}
	if !(eta >= 0 && eta < 1) {
		return nil, fmt.Errorf("noise matrix: rate %v outside [0, 1)", eta)
	}
	t := make([]float64, k*k)
	for y := 0; y < k; y++ {
		t[y*k+y] = 1 - eta
		switch kind {
		case NoiseSymmetric:
			for j := 0; j < k; j++ {
				if j != y {
					t[y*k+j] = eta / float64(k-1)
				}
			}
		case NoisePairflip:
			t[y*k+(y+1)%k] += eta
		default:
			return nil, fmt.Errorf("noise matrix: unknown kind %q (use symmetric or pairflip)", kind)
		}
	}
	return t, nil
}

// Flip draws a noisy class for clean class y (0-based) from row y of t.
func Flip(r *rand.Rand, t []float64, k, y int) int {
	u := r.Float64()
	row := t[y*k : (y+1)*k]
	for j, p := range row {
		if u < p {
			return j
		}
		u -= p
	}
	return y // rounding: the remaining mass
}

// InjectNoise returns a copy of rows whose ratings (1..k) are flipped
// through t with a generator seeded by seed; Clean keeps the original.
func InjectNoise(rows []Interaction, t []float64, k int, seed uint64) []Interaction {
	r := newRand(seed, 2)
	out := make([]Interaction, len(rows))
	for n, x := range rows {
		x.Clean = x.Rating
		x.Rating = Flip(r, t, k, x.Rating-1) + 1
		out[n] = x
	}
	return out
}

// L1 is Σ_ij |a_ij − b_ij|.
func L1(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		d := a[i] - b[i]
		if d < 0 {
			d = -d
		}
		s += d
	}
	return s
}
