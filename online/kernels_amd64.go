//go:build !purego

package online

// The SSE2 kernels of kernels_amd64.s: see kernels.go. Each reads len(p)
// and needs the other slices at least as long (its caller reslices them).

//go:noescape
func hadamardDotBlocks(z, p, q, w []float64, acc *[4]float64)

//go:noescape
func hadamardDot3Blocks(z, p, q, w1, w2, w3 []float64, acc *[12]float64)

//go:noescape
func embeddingGradsBlocks(dp, dq []float64, gain float64, w, p, q []float64, l2 float64, acc *[4]float64)

//go:noescape
func containsBlocks(s []int32, v int32) bool
