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
