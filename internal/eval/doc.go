// Package eval reproduces the RGBT paper's experiments on MovieLens 100K
// and on synthetic streams, with the baselines side by side:
//
//   - transition (RQ2): flip noise (symmetric, pairflip) injected into the
//     ratings as K = 5 classes; the L1 error of the estimated transition
//     matrix on held-out interactions against the true flip matrix, for
//     the model's own T̂(x) and for class-level estimators, of which the
//     ordinal EM estimator (Ordinal) is the one for rating data;
//   - recommend (RQ1, RQ3, RQ4): an 8:1:1 split with a clean (rating-5)
//     test, or the DeCA paper's fixed split with its test protocol (the
//     user's training and validation items unranked, Recall over the
//     whole test list); a downstream GMF trained on the raw stream (Normal), with
//     truncated loss (T-CE), and with each positive weighted by the
//     denoiser's score; the denoiser's own classifier as the recommender;
//     the ablations and the ρ schedules;
//   - sensitivity (RQ3, RQ4): the denoiser's classifier as the recommender
//     against λ and against a fixed ρ, and the share of events distilled
//     over the passes, progressive against fixed ρ;
//   - detect: ROC-AUC and PR-AUC of weight, p_clean, reliability, the
//     loss baseline and the label-free baselines where the truth is known,
//     and the calibration (ECE, reliability diagrams) of weight and p_clean.
//
// Each experiment returns a result value that renders as a Markdown report
// with PNG figures (gonum/plot) and as JSON.
//
// Invariants: every run is deterministic for its seeds (the split, the
// noise, the denoiser and the downstream model draw from separate seeded
// streams); the data set is read, never copied. The package does not
// change the online model: it drives it through its public API.
package eval
