//go:build !purego

package online

import (
	"golang.org/x/sys/cpu"
	"gonum.org/v1/gonum/floats"
)

// The kernels of kernels_amd64.s: see kernels.go. Each reads len(p)
// and needs the other slices at least as long (its caller reslices them).
// The AVX2 versions run where the processor and the operating system
// have AVX2 (useAVX2), the SSE2 ones elsewhere; both give the Go loops'
// bits (TestKernelsMatchGo runs each).

// useAVX2 chooses the AVX2 kernels; tests switch it off to run the SSE2
// ones (and sketchCooc.hits16's Go loop). Every processor with AVX2 has
// POPCNT, which hits16AVX2 uses as well.
var useAVX2 = haveAVX2

// haveAVX2 is whether this processor and operating system run the AVX2
// kernels (AVX2 and POPCNT).
var haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT

func hadamardDotBlocks(z, p, q, w []float64, acc *[4]float64) {
	if useAVX2 {
		hadamardDotBlocksAVX2(z, p, q, w, acc)
		return
	}
	hadamardDotBlocksSSE2(z, p, q, w, acc)
}

func hadamardDot3Blocks(z, p, q, w1, w2, w3 []float64, acc *[12]float64) {
	if useAVX2 {
		hadamardDot3BlocksAVX2(z, p, q, w1, w2, w3, acc)
		return
	}
	hadamardDot3BlocksSSE2(z, p, q, w1, w2, w3, acc)
}

func embeddingGradsBlocks(dp, dq []float64, gain float64, w, p, q []float64, l2 float64, acc *[4]float64) {
	if useAVX2 {
		embeddingGradsBlocksAVX2(dp, dq, gain, w, p, q, l2, acc)
		return
	}
	embeddingGradsBlocksSSE2(dp, dq, gain, w, p, q, l2, acc)
}

// axpy does y += a·x over len(y) elements (x at least as long): AVX2
// where there is AVX2, else gonum's kernel (SSE2). Each element is
// y + a·x, rounded once after the product and once after the sum, as a
// loop would round it.
func axpy(y []float64, a float64, x []float64) {
	x = x[:len(y)]
	if useAVX2 {
		axpyAVX2(y, a, x)
		return
	}
	floats.AddScaled(y, a, x)
}

// hits16Kernel runs sketchCooc.hits16's loop in AVX2 where there is
// AVX2; ok false where there is not, or where u or a sampled user lies
// outside sigs or userN, for the Go loop to run (and fail as it fails).
func hits16Kernel(sigs []uint64, userN []uint32, overlap *[17]float64, res []int32, u int32, nu float64) (hits, sampled int, ok bool) {
	limit := min(len(sigs)/4, len(userN))
	if !useAVX2 || u < 0 || int(u) >= limit {
		return 0, 0, false
	}
	return hits16AVX2(sigs, userN, overlap, res, u, limit, nu)
}

//go:noescape
func hits16AVX2(sigs []uint64, userN []uint32, overlap *[17]float64, res []int32, u int32, limit int, nu float64) (hits, sampled int, ok bool)

//go:noescape
func hadamardDotBlocksSSE2(z, p, q, w []float64, acc *[4]float64)

//go:noescape
func hadamardDot3BlocksSSE2(z, p, q, w1, w2, w3 []float64, acc *[12]float64)

//go:noescape
func embeddingGradsBlocksSSE2(dp, dq []float64, gain float64, w, p, q []float64, l2 float64, acc *[4]float64)

//go:noescape
func hadamardDotBlocksAVX2(z, p, q, w []float64, acc *[4]float64)

//go:noescape
func hadamardDot3BlocksAVX2(z, p, q, w1, w2, w3 []float64, acc *[12]float64)

//go:noescape
func embeddingGradsBlocksAVX2(dp, dq []float64, gain float64, w, p, q []float64, l2 float64, acc *[4]float64)

//go:noescape
func axpyAVX2(y []float64, a float64, x []float64)

//go:noescape
func containsBlocks(s []int32, v int32) bool
