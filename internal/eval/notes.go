package eval

// transitionNotes closes the RQ2 report: what was tried and what limits it.
const transitionNotes = `
## Notes

- **rgbt barely moves from its initialisation.** T̂ is trained only on distilled events, and BLTM's rule distils an
  event only when the noisy posterior's largest class exceeds (1+ρ)/2 (0.95 at the starting ρ = 0.9, 0.75 at ρ_min = 0.5).
  Five-class ratings are too uncertain for that: the distilled share above is close to zero, so T̂(x) stays at its
  start, 0.9 on the diagonal and 0.025 elsewhere. Its error is therefore the distance of that start from T — near zero
  for symmetric η = 0.1 (whose T *is* that start), growing by about 1 per 0.1 of η. The small number in that one cell
  is not an estimate, and the rgbt rows are not evidence that the model estimates T.
- **The Bayes-label gap.** Where the rule does fire, BLTM-style estimators learn P(ỹ | Bayes label) = C·T with
  C = P(y | Bayes label). On ratings C is far from the identity (a user who would most likely give a 4 gives a 3 or a 5
  often), so even a perfect estimate of P(ỹ | Bayes label) is far from T. The **anchor** estimator shows the gap
  directly: its rows are noisy posteriors at the most confident instances, whose clean posteriors are themselves broad,
  and its error is far above the identity's at low rates (it beats the identity only at symmetric η = 0.4, where T
  itself is far from the identity).
- **What closes part of it: an ordinal clean model.** The **ordinal** estimator restricts the clean posterior to a
  cumulative-logit (unimodal) distribution over the rating scale, with a spread per user, and fits a class-level T by
  EM. Mass that noise moves far from an interaction's typical rating (pairflip's 5→1, symmetric noise's uniform floor)
  cannot be explained by the clean model and goes into T. Adjacent flips (pairflip's y→y+1) look like ordinary rating
  spread and are largely taken up by the clean model.
- **Why it needs several starts.** The likelihood of the noisy ratings is nearly flat along the amount of noise: a
  broader clean model explains them almost as well as more noise does, so EM moves T only slowly from where it starts
  (the previous version of this estimator, one start at 0.9 and no per-user spread, ended with diagonals 0.90–0.93 at
  symmetric η = 0.4, where the truth is 0.6). The estimator runs EM from starting diagonals 0.95 … 0.30 on 90 % of the
  noisy training ratings and keeps the fit with the best likelihood of the other 10 %. The kept start falls as η rises
  (per-seed values above).
- **Its weakness: the choice depends on the epochs.** The held-out likelihood mixes two things: how much noise T
  holds, and how well the clean model is fitted. The longer EM runs, the more the clean model overfits and the noisier
  the start the held-out likelihood prefers. On seed 1 (` + "`eval transition --first-seed 1 --seeds 1 --estimator ordinal --ordinal-epochs E`" + `),
  12 epochs put all eight cells below the best published numbers; 10 epochs missed symmetric η = 0.2 (0.804 against
  0.7042) and 14 epochs the same cell (0.855). 12 was kept; the table above, on seeds 2–4, tests that choice on data it
  was not made on, but the margin of symmetric η = 0.2 is thin by construction.
- **On data where the model is right, it stays biased towards the identity.** On synthetic ordinal ratings (150 users,
  120 items, 60 ratings each, near-deterministic clean ratings; ` + "`go test ./internal/eval -run TestOrdinalRecoversKnownFlips -v`" + `)
  it reaches L1 0.63 at symmetric η = 0.1 (identity 1), 1.76 at symmetric η = 0.3 (identity 3) and 2.41 at pairflip
  η = 0.3 (identity 3): it recovers only part of the noise. EM's first updates of T come while the regularised clean model
  is still broad, which gives far-off ratings to the clean class, and T then drifts to the diagonal. The ML-100k
  numbers are therefore the result of a balance between regularisation and epochs chosen on seed 1, not of an
  estimator that is consistent for T.
- Model changes that would help the rgbt estimator itself: a distillation rule that fires on rating data (a per-class
  or top-m% threshold instead of the absolute (1+ρ)/2), a T̂ whose class-level part is fitted by EM on all events rather
  than only distilled ones, and an ordinal or minimum-volume prior on f. None is in this change.
`

// recommendNotes closes the recommend report: a format of the weights'
// separation (weightSeparation) and the number of seeds.
const recommendNotes = `
## Notes

- **Comparability with the paper.** The absolute numbers here are about three times the paper's (R@10 ≈ 0.22 against
  0.074 for the GMF base). The protocol in the paper (its split, its candidate set, which test users count, how many
  epochs) is not fully specified, and this harness follows issue 4's protocol: a random 8:1:1 split by interaction, a
  clean test of rating-5 interactions, full ranking over items without a training interaction, users with at least one
  clean test item averaged. The "at or above the paper's full RGBT" goal is therefore met only in the trivial sense that
  every method here scores higher; the meaningful comparison is between rows of the same run.
- **How far the weights separate.** %s Whether a weighted row differs from Normal or T-CE by more than the
  seeds' noise is the paired comparisons' question (above); detect.md gives each score's ROC-AUC for rating ≤ 2.
- **f as the recommender** is weaker than the downstream GMF: the online model learns each event once per pass with
  balanced 1/m-weighted negatives and no early stopping; it is built to score a stream, not to rank a catalogue.
- **ρ schedules (RQ4).** The progressive schedule relaxes ρ from 0.9 to its floor 0.5 within the first pass, so after
  that its curve follows the fixed ρ = 0.5 one; the share of distilled samples rises with each pass as the noisy
  head becomes more confident. Fixed ρ = 0.8 uses the fewest samples and ρ = 0.4 the most. Without T̂ (T̂ = I) far
  fewer events are distilled, because the noisy head then stays less confident.
- Compare the weighted rows with each other only through their means and standard deviations: with %d seeds, a
  difference smaller than about one standard deviation is not a finding.
`

// recommendLogNotes closes the recommend report on an event log: a
// format of the weights' separation (weightSeparation) and the number of
// seeds.
const recommendLogNotes = `
## Notes

- **How far the weights separate.** %s Whether a weighted row differs from Normal or T-CE by more than the
  seeds' noise is the paired comparisons' question (above).
- **f as the recommender** is weaker than the downstream GMF: the online model learns each event once per pass with
  balanced 1/m-weighted negatives and no early stopping; it is built to score a stream, not to rank a catalogue.
- Compare the weighted rows with each other only through their means and standard deviations: with %d seeds, a
  difference smaller than about one standard deviation is not a finding.
`

// recommendDecaNotes closes the recommend report on the DeCA split.
const recommendDecaNotes = `
## Notes

- **The protocol.** Train on every interaction of the training file, stop early on the clean validation file (Recall@20,
  ranking every item but the user's training ones), test on the clean test file ranking every item but the user's
  training and validation items. This is what DeCA's code does (its user_pos is train ∪ valid; compute_acc divides the
  hits by the whole test list). Because all validation pairs are test pairs too, about half of the test list can never
  be hit: the Recall ceiling above. Masking only the training items instead lets the validation items be ranked and
  hit (issue 14 measured R@10 ≈ 0.15 that way for a plain GMF, against 0.06–0.075 with this protocol); the numbers here
  are comparable neither with such a protocol nor with the 8:1:1 report.
- **Negatives.** On this split the downstream model samples one negative per positive and epoch, as DeCA's code does
  (NSR = 1); ` + "`--negatives`" + ` overrides it.
- **Comparability with the paper.** The paper's rows quoted in issue 4 have R@50 only about 1.6 × R@10, which this
  protocol does not give (R@50 is 2.6–3 × R@10 here and in the Normal GMF figures quoted in issue 14): the goal-check
  lines against them compare different protocols. The figures of issue 14 are the ones to set the Normal rows
  against. The models here are the lab's (per-row adaptive SGD, early stopping on validation Recall@20), not DeCA's
  Adam-trained ones.
- **The seeds** vary the models and the denoiser, not the split, which is fixed: the standard deviations measure training
  noise only.
`

// detectNotes closes the detect report.
const detectNotes = `
## Notes

- On ML-100k a low rating is a weak proxy for noise: a user who rated a film 1 did watch it, and implicit feedback alone
  (who interacted with what, and when) carries little about the rating. Every score stays close to 0.5 ROC-AUC there;
  that is the ceiling of the data as much as of the model.
- On the synthetic streams noise is behavioural (misclicks on random items, clickbait, curiosity clicks outside the
  user's topics; under profile v2 also a rotating trending slot, bots and low-quality users, bounce chains and
  purchase-then-return) and is visible in the interaction pattern, so the scores separate it far better. Profile v2's
  dwell is deliberately a weak signal (about 0.8 alone), and the dwell baseline is left out where under half the
  events carry a dwell time.
- The DeCA case is the DeCA paper's training split of ML-100k in file order: the file has no timestamps, so the
  stream's order is not time order. Its truth, like ML-100k's, is rating ≤ R.
- The offline ceiling sees the whole stream many times and scores each event after training on it, including on the
  event itself; it bounds what a batch factorisation model finds, not what a stream stage can. Because it is scored on
  the events it was trained on, more epochs make it worse: it memorises the noise. On a v2 stream (100k events, noise
  0.2, seed 1) its ROC-AUC was 0.864 after 1 epoch, 0.825 after 2, 0.807 after 3, 0.787 after 5, 0.744 after 10 and
  0.717 after 20; on ML-100k (rating ≤ 2) 0.645 after 1, 0.616 after 3 and 0.595 after 10. The default is 1 epoch,
  chosen with the truth in view, so the ceiling is optimistic, as a ceiling may be.
- The reliability is the GMM's posterior of the reliable component over (f(x), log(1 + c_ui)); it is 1 until the first
  fit. The histograms show it is nearly binary: almost every event sits in the lowest or the highest bin, because two
  well-separated Gaussians give posteriors of 0 or 1 everywhere but on a thin boundary. As a ranking score it therefore
  has few distinct levels, which caps its ROC-AUC below p_clean's; a tempered posterior (or the log-likelihood ratio)
  would rank better.
`
