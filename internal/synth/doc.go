// Package synth generates synthetic click streams with ground truth: every
// event says whether it is a genuine click or noise, so that a denoiser can
// be scored against the truth it never sees.
//
// # The generative model
//
// Users with topic tastes, items with topics and a long-tailed popularity,
// genuine clicks that follow taste, and a share of noise (misclicks,
// clickbait, curiosity) with overlapping dwell; sessions interleave in
// time. docs/design/generator.md sets out every distribution and the
// figures it gives.
//
// # Determinism
//
// All randomness comes from two math/rand/v2 PCG streams seeded from
// Config.Seed, one for the world and one for the events, consumed in a fixed
// order; the encoding is hand-written with a fixed field order. The same
// Config therefore gives a byte-identical stream (on a given platform:
// math.Exp and math.Log may differ in the last bit across architectures).
//
// # Output
//
// One JSON object per line, in the field order of the event format:
//
//	{"user":"u12","item":"i345","ts":1700000012345,"event":"click","dwell_ms":38211,"truth":"genuine"}
//
// Ids are "u1".."uN" and "i1".."iM"; there is no rating field.
//
// The package does no file handling: Write takes an io.Writer; the CLI does
// the atomic file write.
package synth
