//go:build !amd64 || purego

package online

import "gonum.org/v1/gonum/floats"

func hadamardDotBlocks(z, p, q, w []float64, acc *[4]float64) {
	hadamardDotBlocksGo(z, p, q, w, acc)
}

func hadamardDot3Blocks(z, p, q, w1, w2, w3 []float64, acc *[12]float64) {
	hadamardDot3BlocksGo(z, p, q, w1, w2, w3, acc)
}

func embeddingGradsBlocks(dp, dq []float64, gain float64, w, p, q []float64, l2 float64, acc *[4]float64) {
	embeddingGradsBlocksGo(dp, dq, gain, w, p, q, l2, acc)
}

func containsBlocks(s []int32, v int32) bool { return containsBlocksGo(s, v) }

// axpy does y += a·x over len(y) elements (x at least as long), with
// gonum's kernel: each element is y + a·x, rounded once after the product
// and once after the sum, as a loop would round it.
func axpy(y []float64, a float64, x []float64) {
	floats.AddScaled(y, a, x[:len(y)])
}

// hits16Kernel has no assembly here: sketchCooc.hits16 runs its Go loop.
func hits16Kernel(_ []uint64, _ []uint32, _ *[17]float64, _ []int32, _ int32, _ float64) (hits, sampled int, ok bool) {
	return 0, 0, false
}
