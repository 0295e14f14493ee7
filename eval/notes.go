package eval

// transitionNotes closes the RQ2 report: what was tried and what limits it.
const transitionNotes = `
## Notes

- **rgbt barely moves from its initialisation.** T̂ is trained only on distilled events, and BLTM's rule distils an
  event only when the noisy posterior's largest class exceeds (1+ρ)/2 (0.95 at the starting ρ = 0.9, 0.75 at ρ_min = 0.5).
  Five-class ratings are too uncertain for that: the distilled share above is close to zero, so T̂(x) stays at its
  start, 0.9 on the diagonal and 0.025 elsewhere. Its error is therefore the distance of that start from T — near zero
  for symmetric η = 0.1 (whose T *is* that start), growing by about 2 per 0.1 of η above it. The small numbers in that
  one cell are not an estimate.
- **The Bayes-label gap.** Where the rule does fire, BLTM-style estimators learn P(ỹ | Bayes label) = C·T with
  C = P(y | Bayes label). On ratings C is far from the identity (a user who would most likely give a 4 gives a 3 or a 5
  often), so even a perfect estimate of P(ỹ | Bayes label) is far from T. The **anchor** estimator shows the gap
  directly: its rows are noisy posteriors at the most confident instances, whose clean posteriors are themselves broad,
  and its error stays above the identity's at every rate.
- **What closes part of it: an ordinal clean model.** The **ordinal** estimator restricts the clean posterior to a
  cumulative-logit (unimodal) distribution over the rating scale and fits a class-level T by EM. Mass that noise moves
  far from an interaction's typical rating (pairflip's 5→1, symmetric noise's uniform floor) cannot be explained by the
  clean model and goes into T; it recovers the 5→1 entry of pairflip at about half its size. Its weakness is the
  converse: adjacent flips (pairflip's y→y+1) look like ordinary rating spread and are taken up by the clean model, and
  the longer EM runs, the more of the noise the clean model absorbs (its epoch count, 12, was chosen on seed 1 of a
  small scan, so the table is mildly optimistic for it).
- Model changes that would help the rgbt estimator itself are listed in the issue report: a distillation rule that
  fires on rating data (a per-class or top-m% threshold instead of the absolute (1+ρ)/2), a T̂ whose class-level part
  is fitted by EM on all events rather than only distilled ones, and an ordinal or minimum-volume prior on f.
`
