package online

// The item's prior: how much of an item's traffic is genuine, learned from
// the item's own events, as the user's prior learns a user's
// (userprior.go). Noise is often an item's: a clickbait title, a
// trending slot clicked whatever the taste, an accidental tile next to a
// popular one. The weight, after the user's prior, is moved from the
// stream's prior to the item's by the same empirical Bayes:
//
//	π_i = (n_i·m_i + k_i·g_i) / (n_i + k_i)
//	logit(w″) = logit(w′) + logit(π_i) − logit(g_i)
//
// with m_i the mean of the final weights w″ over the item's events so far
// (n_i of them, up to userPriorWindow), g_i the stream's mean of them, and
// k_i read from the stream as the users' k is: the covariance of an
// event's weight before either prior with its item's mean of the earlier
// ones is the spread of the items' genuine shares (priorLevel.strength).
// Both priors' means learn the final weight, so the user's and the item's
// shares are one fixed point, each given the other.
//
// It states a premise: an item's events are independent given the item's
// genuine share. Where the weight's errors are the item's (the classifier
// reads an item's popularity as taste on a stream where the popular items
// are the noisy ones), the prior counts them again: on the v1 generator's
// stream at 40 % noise without dwell the weight ranked 0.67 before it and
// 0.60 after at stop 63 (docs/design/model.md, "The item's prior"). Since
// stop 64 a prior moves a weight on the gap path by the gap's blend only,
// the share the classifier does not already pool (priorOf): that stream
// ranks 0.744 without the item's prior and 0.740 with it (seed 1).
//
// Only models with the context instrument (Config.DwellDirection "long")
// keep it. The item's means and count are Model.itemPriors, userPriorWidth
// slots an item row (encoded from version 19 and delta version 15, at the
// end of ITEM), and the stream's side is contextModel.itemLevel (IPRI).
// Both are the partition model's own: a partition's item means are of the
// item's events in that partition, and merging item rows from other
// partitions (merge.go) leaves them as they are.

// itemPrior returns the weight w of an event of item i moved from the
// stream's prior to the item's, by pool of the log-odds (priorOf). i
// must be an admitted item's row and the model keep the prior
// (Model.itemPriors not nil).
func (m *Model) itemPrior(i int32, w, pool float64) float64 {
	return priorOf(m.itemPriors[int(i)*userPriorWidth:], &m.context.itemLevel, w, pool)
}

// learnItemPrior adds an event of item i, of weight w0 before the priors
// and w after them, to the item's means and to the stream's.
func (m *Model) learnItemPrior(i int32, w0, w float64) {
	learnPrior(m.itemPriors[int(i)*userPriorWidth:], &m.context.itemLevel, w0, w)
}
