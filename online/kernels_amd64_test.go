//go:build !purego

package online

type kernelSet struct {
	name string
	use  func() (restore func()) // chooses the set; restore undoes it
}

// kernelSets are the assembly kernels this processor runs: SSE2 always,
// AVX2 where it has AVX2 and POPCNT (haveAVX2).
func kernelSets() []kernelSet {
	choose := func(avx2 bool) func() func() {
		return func() func() {
			old := useAVX2
			useAVX2 = avx2
			return func() { useAVX2 = old }
		}
	}
	sets := []kernelSet{{"SSE2", choose(false)}}
	if haveAVX2 {
		sets = append(sets, kernelSet{"AVX2", choose(true)})
	}
	return sets
}
