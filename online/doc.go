// Package online is the RGBT model as a single-pass, deterministic online
// learner: user and item embeddings, a classifier f(x) of the clean label,
// an instance-dependent transition matrix T̂(x) from clean to observed
// labels, a two-component Gaussian mixture whose posterior is each event's
// reliability, and a context part that turns p_clean into the weight to
// train on with the evidence of the event's dwell and type.
//
// # What it owns
//
// The event type the model reads and the score it writes; the model's
// parts — the user and item tables, the classifier and the noisy head η̃,
// the transition, the mixture, the context statistics, the ρ schedule, the
// co-occurrence estimator, the popularity ring; the bounds on the tables
// (caps, admission, eviction: bounds.go); the Step loop; frozen copies
// (Model.FrozenCopy); the binary encoding of all of it (WriteTo,
// ReadModel; FORMAT.md); and deltas, what changed since a frozen copy was
// saved (MarkSaved, WriteDelta, ReadModelDeltas; FORMAT.md, "Delta
// encoding"), which a checkpoint store keeps after a base; and the
// sharing of item rows between partition models (StartSharing, Publish,
// Merge; merge.go), with the cursors MergeFrom records of the deltas
// merged, which are model state and encoded (Merged, MergedFrom).
//
// # Per event (Step)
//
//  1. Score with the model as it is (test-then-train): f(x), T̂(x), p_clean,
//     the reliability, the distilled label, then the weight (p_clean with
//     the context's evidence, calibrated towards the mixture's reliable
//     share: calibration.go; on a stream without dwell or types, the gap's
//     posterior blended in by at least the gap's reach: gapreach.go; then
//     moved to the user's prior, the user's genuine share as the user's
//     earlier weights tell it: userprior.go, and to the item's:
//     itemprior.go).
//  2. Learn: the observed pair, then (binary mode) m sampled negatives;
//     then the user's and the item's priors, from the weight before and
//     after them; then the context statistics, from the event's posterior
//     (the weight before calibration), and the gap's reach.
//  3. Every RefitEvery events: refit the mixture, advance the ρ schedule.
//
// # Invariants
//
//   - Deterministic: the same configuration, source state and events give
//     the same scores and the same encoded bytes, on any amd64 CPU (built
//     at GOAMD64=v1, as the Makefile does: kernels.go): the exponential is
//     the package's own (exp.go), as math.Exp's bits depend on whether the
//     CPU has FMA (TestSameBitsWithoutFMA).
//   - No NaN or Inf leaves the model: gradients are clipped and checked
//     before they are applied (a non-finite one is discarded and counted),
//     scores are checked before they are returned, and ReadModel refuses a
//     non-finite parameter.
//   - An event that does not fit the label mode changes nothing.
//   - A table holds a row for at most its cap of ids (Config.MaxUsers,
//     MaxItems), plus its cold row when ids wait for admission
//     (Config.AdmitAfter); a reused row starts as a new id's would. Which
//     id is admitted or evicted depends on the events alone: the order is
//     the model's own count of events, never a clock.
//   - A warm Step allocates nothing.
//   - A model read back continues exactly where the written one stopped;
//     the same model always encodes to the same bytes, and an encoding
//     change is a new EncodingVersion.
//   - A frozen copy encodes exactly as its model did when it was taken,
//     whatever the model does afterwards; every writer of a user or item
//     row (or of a block of the admission sketch) stamps it, so that a
//     refreshed copy copies only what changed.
//   - A base and the deltas written after it, in order, read back
//     (ReadModelDeltas) as the model the last delta was written from,
//     byte for byte; a delta covers every change since the copy was last
//     marked saved, so a lost delta (a failed save) loses nothing.
//   - ReadModel never allocates much beyond what its input holds, and
//     refuses anything but exactly one model with an error wrapping
//     ErrCorrupt.
//
// # What it must not do
//
// No I/O, no clock, no logging: its only source of randomness is the
// *rand.PCG handed to New. A Model is owned by one goroutine; only a
// frozen copy may be read by another while the model learns. It knows
// nothing of Kafka, Badger or files.
//
// Why each choice was made, and what was measured, is in
// docs/design/model.md.
package online
