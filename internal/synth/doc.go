// Package synth generates synthetic click streams with ground truth: every
// event says whether it is a genuine click or noise, so that a denoiser can
// be scored against the truth it never sees.
//
// # The generative model
//
// The world has users, items and K latent topics. Each user u has a taste
// θ_u, a distribution over topics drawn from a symmetric Dirichlet(0.05):
// most users care about one topic, some about two or three. Each item i has
// a primary topic and a topic vector φ_i with 98% of its mass on the primary
// topic and the rest spread at random, and a popularity weight
// pop_i ∝ rank^-0.6 over a random ranking (a long tail: a few hits, many
// niche items). One item in twenty is clickbait.
//
// A genuine click of user u picks a topic k from θ_u, then an item with
// probability ∝ pop_i·φ_ik. So P(i | u) = Σ_k θ_uk π_k(i), a rank-K matrix
// shaped by popularity: what a matrix-factorisation model can learn. A user
// rarely clicks the same item twice as genuine: the draw is repeated (up to
// ten times) when it lands on an item the user already clicked genuinely,
// much like reading without replacement. Genuine dwell is log-normal with
// median 40 s.
//
// A share --noise of all events is noise: exactly round(noise·events) of
// them, spread uniformly over the stream. A noisy click comes from one of
// three mechanisms:
//   - misclick (45%): a uniformly random item; dwell median 1.5 s;
//   - clickbait (20%): an item of the clickbait set, whatever the user's
//     taste, weighted so that some clickbait is among the most clicked
//     items; dwell median 4 s (a bounce);
//   - curiosity (35%): a popular item from a topic the user does not care
//     about (topic drawn ∝ (1-θ_uk)², item ∝ pop_i·φ_ik); dwell median 5 s.
//
// Dwell is deliberately not a perfect oracle: 10% of genuine clicks get a
// short "glance" dwell (median 4 s: the user already knew the story) and 10%
// of noisy clicks a long one (median 45 s: the tab stayed open). Against the
// usual 10 s threshold about 10.5% of genuine clicks look like noise and
// about 11.5% of noisy clicks look genuine.
//
// The noise is learnable from (user, item) alone, but not trivially: on the
// default 200,000-event stream at noise 0.2 the Bayes posterior under the
// true model reaches a ROC-AUC of about 0.94 against the truth, and a plain
// one-pass logistic matrix factorisation about 0.84 after its first 50,000
// events. Clickbait is the hard case for a factorisation model: it is
// popular across all tastes, which is what a popularity-biased model
// rewards.
//
// Time: users arrive in sessions (mean 8 clicks, geometric). A fixed number
// of session slots (one per 10 users, 2 to 256) run side by side, so
// sessions of different users interleave; a user is drawn for a new session
// by activity (log-normal, σ 0.3), avoiding users who already have a session
// open. Within a session the next click comes after the dwell plus an
// exponential pause (mean 8 s); a slot opens its next session after an
// exponential gap (mean 30 s). Timestamps are unix milliseconds from a
// fixed epoch (1700000000000 by default) and strictly increase along the
// stream.
//
// Sizes scale with the number of events: users = events/100 (at least 20),
// items = events/200 (at least min(events/20, 500) and at least 50), topics
// = items/100 clamped to [4, 16], so each user has about a hundred events
// (5th percentile about 40 on the default stream) — enough for an online
// factorisation model to learn their taste in one pass. Every size and
// weight can be overridden in Config.
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
