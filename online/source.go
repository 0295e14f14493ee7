package online

import "math/rand/v2"

// SeedStream is xored into the seed to form the second word of the PCG
// state, so that seed 0 still starts from a non-degenerate stream.
const SeedStream = 0x9e3779b97f4a7c15

// NewSource returns the random source a model is built with for a
// configured seed. Every place that builds a model from a seed (the
// service, replay, the demo's baseline, the evaluation lab) uses it, so one
// seed means one stream everywhere.
func NewSource(seed uint64) *rand.PCG {
	return rand.NewPCG(seed, seed^SeedStream)
}

// partitionMix spreads partition numbers over the PCG's second word (the
// multiplier of SplitMix64's first mixing step).
const partitionMix = 0xbf58476d1ce4e5b9

// NewPartitionSource returns the random source of the model of input
// partition p for a configured seed: partition 0's is NewSource(seed), so
// one partition's run is the single model's, and every other partition's
// is a stream of its own.
func NewPartitionSource(seed uint64, p int32) *rand.PCG {
	return rand.NewPCG(seed, seed^SeedStream^(uint64(uint32(p))*partitionMix))
}
