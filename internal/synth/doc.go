// Package synth generates synthetic click streams with ground truth: every
// event says whether it is a genuine click or noise, so that a denoiser can
// be scored against the truth it never sees.
//
// # The generative model
//
// Users with topic tastes, items with topics and a long-tailed popularity,
// genuine clicks that follow taste, and a share of noise (misclicks,
// clickbait, curiosity) with overlapping dwell; sessions interleave in
// time. ProfileV2 adds event types, a rotating trending slot, bots and
// low-quality users, bounce chains and purchase-then-return, with wide,
// overlapping dwell. docs/design/generator.md sets out every distribution
// and the figures it gives.
//
// # Determinism
//
// All randomness comes from math/rand/v2 PCG streams seeded from
// Config.Seed — the world, the events, and (only when used) the dwell mask,
// the v2 world and the trending slots — each consumed in a fixed order; the encoding is hand-written with a fixed field order. The same
// Config therefore gives a byte-identical stream (on a given platform:
// math.Exp and math.Log may differ in the last bit across architectures).
//
// # Output
//
// One JSON object per line, in the field order of the event format:
//
//	{"user":"u12","item":"i345","ts":1700000012345,"event":"click","dwell_ms":38211,"truth":"genuine"}
//
// Ids are "u1".."uN" and "i1".."iM"; there is no rating field. ProfileV1
// writes "event":"click" only; dwell_ms is left out of the events that
// Config.DwellShare hides.
//
// # Bounds
//
// Memory grows with the world and with the (user, item) pairs clicked
// genuinely, never with the events: open sessions and pending returns sit
// in one heap, and a trending slot is recomputed from its period's index.
//
// The package does no file handling: Write takes an io.Writer; the CLI does
// the atomic file write.
package synth
