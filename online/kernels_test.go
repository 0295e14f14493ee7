package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// kernelValue draws an entry for the kernels' inputs: mostly ordinary
// values over several magnitudes, sometimes a signed zero, a subnormal, an
// infinity or a NaN, so that rounding and the special values are compared.
func kernelValue(r *rand.Rand) float64 {
	switch r.IntN(40) {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return 5e-324 * float64(1+r.IntN(1000))
	case 3:
		return math.Inf(1 - 2*r.IntN(2))
	case 4:
		return math.NaN()
	}
	return r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4))
}

func kernelVector(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for j := range v {
		v[j] = kernelValue(r)
	}
	return v
}

// sameBits reports whether a and b are the same floats bit for bit, but
// for the payload of a NaN, which no result of the model depends on.
func sameBits(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Float64bits(a) == math.Float64bits(b)
}

func sameVectors(t *testing.T, what string, n int, got, want []float64) {
	t.Helper()
	for j := range want {
		if !sameBits(got[j], want[j]) {
			t.Fatalf("n=%d: %s[%d] = %v (%#x), the Go loop gives %v (%#x)", n, what, j,
				got[j], math.Float64bits(got[j]), want[j], math.Float64bits(want[j]))
		}
	}
}

// forEachKernelSet runs check once with each set of kernels this build
// and this processor can run (kernelSets: AVX2 and SSE2 assembly on
// amd64, the Go loops elsewhere or with the purego tag).
func forEachKernelSet(t *testing.T, check func(t *testing.T)) {
	for _, set := range kernelSets() {
		t.Run(set.name, func(t *testing.T) {
			t.Cleanup(set.use())
			check(t)
		})
	}
}

// TestKernelsMatchGo checks that each set of kernels gives the same bits
// as the Go loops of kernels.go: the outputs written, and the accumulators
// left, for lengths 0 to 70, inputs that start off the 16-byte alignment,
// accumulators that do not start at zero, and special values.
func TestKernelsMatchGo(t *testing.T) {
	forEachKernelSet(t, checkKernelsMatchGo)
}

func checkKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for n := 0; n <= 70; n++ {
		for trial := 0; trial < 20; trial++ {
			off := trial % 2 // a slice that starts one element in: off the alignment
			in := func() []float64 { return kernelVector(r, n+off)[off:] }
			p, q, w1, w2, w3 := in(), in(), in(), in(), in()
			start := func(k int) []float64 {
				if trial%3 == 0 {
					return make([]float64, k)
				}
				return kernelVector(r, k)
			}

			z1, z2 := make([]float64, n), make([]float64, n)
			acc1, acc2 := (*[4]float64)(start(4)), new([4]float64)
			*acc2 = *acc1
			hadamardDotBlocks(z1, p, q, w1, acc1)
			hadamardDotBlocksGo(z2, p, q, w1, acc2)
			sameVectors(t, "hadamardDot z", n, z1, z2)
			sameVectors(t, "hadamardDot acc", n, acc1[:], acc2[:])

			a1, a2 := (*[12]float64)(start(12)), new([12]float64)
			*a2 = *a1
			hadamardDot3Blocks(z1, p, q, w1, w2, w3, a1)
			hadamardDot3BlocksGo(z2, p, q, w1, w2, w3, a2)
			sameVectors(t, "hadamardDot3 z", n, z1, z2)
			sameVectors(t, "hadamardDot3 acc", n, a1[:], a2[:])

			dp1, dq1, dp2, dq2 := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
			gain, l2 := kernelValue(r), kernelValue(r)
			if trial%4 == 0 {
				gain = 0 // a pair with no gradient: dz = +0, whatever the sign of w
			}
			acc1, acc2 = (*[4]float64)(start(4)), new([4]float64)
			*acc2 = *acc1
			embeddingGradsBlocks(dp1, dq1, gain, w1, p, q, l2, acc1)
			embeddingGradsBlocksGo(dp2, dq2, gain, w1, p, q, l2, acc2)
			sameVectors(t, "embeddingGrads dp", n, dp1, dp2)
			sameVectors(t, "embeddingGrads dq", n, dq1, dq2)
			sameVectors(t, "embeddingGrads acc", n, acc1[:], acc2[:])
		}
	}
}

// TestKernelsWholeBlocksOnly checks that the kernels leave the tail (the
// last n mod 4 elements) to their caller: nothing past the whole blocks is
// written.
func TestKernelsWholeBlocksOnly(t *testing.T) {
	forEachKernelSet(t, checkKernelsWholeBlocksOnly)
}

func checkKernelsWholeBlocksOnly(t *testing.T) {
	for n := 0; n <= 9; n++ {
		ones := func() []float64 {
			v := make([]float64, n)
			for j := range v {
				v[j] = 1
			}
			return v
		}
		z, dp, dq := make([]float64, n), make([]float64, n), make([]float64, n)
		for j := range z {
			z[j], dp[j], dq[j] = -7, -7, -7
		}
		var acc [4]float64
		var acc12 [12]float64
		hadamardDotBlocks(z, ones(), ones(), ones(), &acc)
		hadamardDot3Blocks(z, ones(), ones(), ones(), ones(), ones(), &acc12)
		embeddingGradsBlocks(dp, dq, 1, ones(), ones(), ones(), 0, &acc)
		whole := n &^ 3
		for j := 0; j < n; j++ {
			want := -7.0
			if j < whole {
				want = 1
			}
			if z[j] != want || dp[j] != want || dq[j] != want {
				t.Fatalf("n=%d: element %d is z=%v dp=%v dq=%v, want %v", n, j, z[j], dp[j], dq[j], want)
			}
		}
	}
}

// TestAxpyMatchesGo checks that axpy gives the bits of the loop
// y[j] += a·x[j] for every length up to 70, on slices that start off the
// alignment, with x longer than y and special values, and that it writes
// nothing past len(y).
func TestAxpyMatchesGo(t *testing.T) {
	forEachKernelSet(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(25, 26))
		for n := 0; n <= 70; n++ {
			for trial := 0; trial < 20; trial++ {
				off := trial % 3
				buf := kernelVector(r, off+n+2)
				y := buf[off : off+n]
				want := append([]float64(nil), buf...)
				x := kernelVector(r, n+trial%2)
				a := kernelValue(r)
				if trial%5 == 0 {
					a = 1
				}
				for j := range n {
					want[off+j] += a * x[j]
				}
				axpy(y, a, x)
				sameVectors(t, "axpy y and the elements around it", n, buf, want)
			}
		}
	})
}

// TestContainsBlocksMatchesGo: the kernel answers as the Go loop for
// every length that is a multiple of 8 up to 64, with v at every
// position, at none, and in the elements past the whole blocks (which it
// must not read), on slices that start off the 16-byte alignment, with
// negative ids and ids that differ from v in one lane's bits only.
func TestContainsBlocksMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for n := 0; n <= 64; n += 8 {
		for off := 0; off < 4; off++ {
			buf := make([]int32, off+n+8)
			for j := range buf {
				buf[j] = int32(r.Uint32())
			}
			s := buf[off : off+n]
			v := int32(r.Uint32())
			for j := range s {
				if s[j] == v {
					s[j] = ^v
				}
			}
			check := func(what string) {
				t.Helper()
				if got, want := containsBlocks(s, v), containsBlocksGo(s, v); got != want {
					t.Fatalf("n=%d off=%d %s: containsBlocks = %v, the Go loop %v", n, off, what, got, want)
				}
			}
			check("absent")
			if containsBlocks(s, v) {
				t.Fatalf("n=%d off=%d: found an absent v", n, off)
			}
			buf[off+n] = v // past the blocks: not to be read
			check("past the end")
			for j := range s {
				old := s[j]
				s[j] = v
				check(fmt.Sprintf("at %d", j))
				if !containsBlocks(s, v) {
					t.Fatalf("n=%d off=%d: v at %d not found", n, off, j)
				}
				s[j] = v ^ math.MinInt32 // the same but the sign bit
				check(fmt.Sprintf("near miss at %d", j))
				s[j] = old
			}
		}
	}
}

// TestHits16MatchesGo checks that sketchCooc.hits16 counts as its Go loop
// on signatures whose lanes agree from none to all sixteen, with counts
// that put the estimate on both sides of its threshold, samples that end
// early at an empty slot or hold u itself; and that a sampled user outside
// the signatures is left to the Go loop.
func TestHits16MatchesGo(t *testing.T) {
	forEachKernelSet(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(27, 28))
		overlap := (*[17]float64)(overlapShares(16))
		const users = 40
		for trial := 0; trial < 400; trial++ {
			sigs := make([]uint64, 4*users)
			userN := make([]uint32, users)
			for v := range users {
				userN[v] = uint32(r.IntN(6))
			}
			u := int32(r.IntN(users))
			agree := r.IntN(17) // how many lanes of u the others share, about
			for v := range users {
				for k := range 4 {
					sigs[4*v+k] = r.Uint64()
				}
				if int32(v) == u {
					continue
				}
				for lane := range 16 {
					if r.IntN(16) < agree {
						word, shift := lane/4, 16*(lane%4)
						mask := uint64(0xffff) << shift
						sigs[4*v+word] = sigs[4*v+word]&^mask | sigs[4*int(u)+word]&mask
					}
				}
			}
			res := make([]int32, 1+r.IntN(24))
			for k := range res {
				res[k] = int32(r.IntN(users))
			}
			if trial%3 == 0 {
				res[r.IntN(len(res))] = -1
			}
			nu := float64(r.IntN(6))
			wantHits, wantSampled := hits16Go(sigs, userN, overlap, res, u, nu)
			c := &sketchCooc{userSig: sigs, userN: userN, overlap: overlap[:]}
			hits, sampled := c.hits16(res, u, nu)
			if hits != wantHits || sampled != wantSampled {
				t.Fatalf("trial %d: hits16 = %d of %d, the Go loop %d of %d", trial, hits, sampled, wantHits, wantSampled)
			}
		}
		// A sampled user past the signatures: the kernel declines.
		sigs, userN := make([]uint64, 8), make([]uint32, 2)
		if _, _, ok := hits16Kernel(sigs, userN, overlap, []int32{1, 2}, 0, 1); ok {
			t.Fatal("hits16Kernel took a sample with a user past the signatures")
		}
		if _, _, ok := hits16Kernel(sigs, userN, overlap, []int32{1}, 2, 1); ok {
			t.Fatal("hits16Kernel took a u past the signatures")
		}
	})
}
