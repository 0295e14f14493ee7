package online

// The user's prior: how much of a user's traffic is genuine, learned from
// the user's own events. Noise is often a user's, not an event's: a bot,
// a careless or compulsive clicker, a shared account. The weight of each
// event is a posterior formed with the stream's prior, the genuine share
// of all events; a user whose earlier events were mostly weighed as noise
// is the more likely to send noise again. So the weight is moved from the
// stream's prior to the user's (empirical Bayes, each user's genuine
// share shrunk towards the stream's):
//
//	π_u = (n_u·m_u + k·g) / (n_u + k)
//	logit(w′) = logit(w) + logit(π_u) − logit(g)
//
// where w is the weight before, g the running mean of the weights w′ of
// all the model's events, m_u the mean of w′ over the user's events so
// far (n_u of them, counted up to userPriorWindow, after which the mean
// is a moving one that follows a user who changes), and k the prior's
// strength in events, estimated from the stream (priorLevel.strength):
// large where the users' genuine shares hardly differ, small where a few
// users send most of the noise. A new user's π_u is g: the weight does
// not move. m_u is of the weights w′ themselves, so π_u is the fixed
// point of the user's share given the events' evidence, as an EM step
// for a mixing proportion finds it; it stays within (0, 1) and cannot run
// away, where a mean of log-odds would (its fixed point grows with n_u).
//
// It states a premise: a user's events are independent given the user's
// genuine share. Where the weight's errors are the user's (a user whose
// taste the classifier reads badly has every event's p_clean low), the
// prior counts them again, and the estimate of k, which reads the same
// covariance, is the smaller for it.
//
// Only models with the context instrument (Config.DwellDirection "long")
// keep it; the user's means and count are rows of the user table
// (userTable.prior, encoded from version 18 and delta version 14), the
// stream's side is the partition model's own (contextModel.prior, PRIR),
// not merged, as the posterior's level is not (mergecontext.go).
// docs/design/model.md, "The user's prior", has what was measured.

const (
	// userPriorMinMass is the events of users seen before (the pairs of
	// the covariance) the estimate of k needs; until then k is
	// UserPriorMax.
	userPriorMinMass = 1000.0
	// userPriorWindow is the most events a user's means count: after it,
	// each event moves them by 1/userPriorWindow of its difference.
	userPriorWindow = 1000.0
	// priorLevelWindow is the same for the stream's means and the
	// covariance.
	priorLevelWindow = 100000.0
	// userPriorWidth is a user's slots in userTable.prior: the mean of
	// the weights after the prior (m_u), the mean of the weights before
	// it, and the count n_u.
	userPriorWidth = 3
)

// UserPriorMin and UserPriorMax bound k, the users' prior's strength in
// events (priorLevel.strength, Summary.UserPriorStrength): a user's share
// is never taken from fewer than 2 of the stream's events, and at 1000
// the prior moves no weight of a user with fewer than about 100 events by
// more than a tenth of the user's difference.
const (
	UserPriorMin = 2.0
	UserPriorMax = 1000.0
)

// priorLevel is the stream's side of the users' priors: g, the running
// mean of the weights after the prior, g₀ that of the weights before it,
// the events they count (up to priorLevelWindow), and the covariance
// between an event's weight before the prior and its user's mean of the
// earlier ones, with the events it counts.
type priorLevel struct {
	mean, mean0, n float64
	cov, pairs     float64
}

// strength is k: how many of the stream's events a user's prior counts,
// from the spread of the users' genuine shares. If events are independent
// given their user's share π_u, an event's weight w and the mean of its
// user's earlier weights covary by var(π_u), the users' spread; a beta
// prior of mean g₀ and that variance has strength k = g₀(1 − g₀)/var − 1
// (the method of moments of the beta-binomial model). A stream whose
// noise is the events', not the users' (a misclick is anybody's), has
// little spread, a large k, and the prior moves little; one whose noise
// is a few users' (bots) has a small k. The weight before the prior is
// read, not after, so that the prior does not feed its own estimate.
func (g *priorLevel) strength() float64 {
	if g.pairs < userPriorMinMass || !(g.cov > 0) {
		return UserPriorMax
	}
	return min(max(g.mean0*(1-g.mean0)/g.cov-1, UserPriorMin), UserPriorMax)
}

// userPrior returns the weight w of an event of user u moved from the
// stream's prior to the user's, by pool of the log-odds (priorOf). u
// must be an admitted user's row and the model keep the prior
// (userTable.prior not nil).
func (m *Model) userPrior(u int32, w, pool float64) float64 {
	return priorOf(m.users.prior[int(u)*userPriorWidth:], &m.context.prior, w, pool)
}

// priorOf returns w moved from the stream's prior (g) to that of the row's
// user or item: the odds ratio of π to g, within e^±contextClamp, to the
// power pool (in [0, 1]), times w's odds (the log-odds' sum without a
// logarithm).
//
// pool is the share of the weight's log-odds that the classifier does
// not already pool by user and by item. The classifier's user and item
// biases pool p_clean over a user's and an item's events; a prior that
// pools the weight again counts p_clean's reading twice, and, as its
// means learn the weight after it, again and again: where the classifier
// reads an item's popularity as taste on a stream whose popular items
// are the noisy ones, the item's prior took the v1 generator's stream at
// 40 % noise without dwell from 0.743 to 0.705 (p_clean 0.747). What the
// classifier does not pool is the instruments' evidence, read per event.
// So on the gap path the prior moves the weight by the gap's blend b
// (gapWeight: the weight's log-odds is (1 − b)·logit(level) + b·logit(g)),
// and by all of it where the dwell or the type instrument gave the weight
// or where the gap has no spread (flatGap: the weight is the level and
// the classifier's popularity, which the prior reads whole as before
// stop 64). docs/design/model.md, "The popularity read by the gap".
func priorOf(row []float64, g *priorLevel, w, pool float64) float64 {
	if row[2] == 0 || !(g.mean > 0 && g.mean < 1) {
		return w // a new row's π is g
	}
	k := g.strength()
	p := (row[2]*row[0] + k*g.mean) / (row[2] + k)
	r := min(max(p*(1-g.mean)/((1-p)*g.mean), priorRatioMin), priorRatioMax)
	if pool < 1 {
		r = powPositive(r, max(pool, 0))
	}
	return w * r / (w*r + 1 - w)
}

// priorRatioMin and priorRatioMax bound the odds ratio by which the prior
// moves a weight, as contextClamp bounds a feature's evidence.
var priorRatioMin, priorRatioMax = exp(-contextClamp), exp(contextClamp)

// learnUserPrior adds an event of user u, of weight w0 before the priors
// and w after them, to the user's means and to the stream's.
func (m *Model) learnUserPrior(u int32, w0, w float64) {
	learnPrior(m.users.prior[int(u)*userPriorWidth:], &m.context.prior, w0, w)
}

// learnPrior adds an event of weight w0 before the priors and w after them
// to a user's or an item's means (row) and to the stream's (g).
func learnPrior(row []float64, g *priorLevel, w0, w float64) {
	if row[2] > 0 {
		g.pairs = min(g.pairs+1, priorLevelWindow)
		g.cov += ((w0-g.mean0)*(row[1]-g.mean0) - g.cov) / g.pairs
	}
	row[2] = min(row[2]+1, userPriorWindow)
	row[0] += (w - row[0]) / row[2]
	row[1] += (w0 - row[1]) / row[2]
	g.n = min(g.n+1, priorLevelWindow)
	g.mean += (w - g.mean) / g.n
	g.mean0 += (w0 - g.mean0) / g.n
}

func (g *priorLevel) encode(e *encoder) {
	for _, v := range [...]float64{g.mean, g.mean0, g.n, g.cov, g.pairs} {
		e.f64(v)
	}
}

// decode reads what encode writes, refusing means outside [0, 1], counts
// outside [0, priorLevelWindow] or a covariance beyond ±1/4; whose ("user"
// or "item") names the prior in the error.
func (g *priorLevel) decode(d *decoder, whose string) {
	g.mean, g.mean0, g.n, g.cov, g.pairs = d.f64(), d.f64(), d.f64(), d.f64(), d.f64()
	if !(unit(g.mean) && unit(g.mean0) && g.n >= 0 && g.n <= priorLevelWindow &&
		g.cov >= -0.25 && g.cov <= 0.25 && g.pairs >= 0 && g.pairs <= priorLevelWindow) {
		d.fail("%s prior level: means %v, %v over %v events, covariance %v over %v", whose, g.mean, g.mean0, g.n, g.cov, g.pairs)
	}
}

// checkPrior fails d unless every user's (or item's: whose) means in rows
// (whole prior rows: those a model or a delta read) lie in [0, 1] and
// count in [0, userPriorWindow].
func checkPrior(d *decoder, rows []float64, whose string) {
	for r := 0; r+userPriorWidth <= len(rows); r += userPriorWidth {
		if m, m0, n := rows[r], rows[r+1], rows[r+2]; !(unit(m) && unit(m0) && n >= 0 && n <= userPriorWindow) {
			d.fail("%s prior: means %v, %v over %v events", whose, m, m0, n)
			return
		}
	}
}

// decodePriorRows reads the prior rows of a table of rows rows (users' or
// items': whose) where the model keeps them (prior not nil): from the
// encoding if it has them (has), else none learned.
func decodePriorRows(d *decoder, prior []float64, rows int, has bool, whose string) []float64 {
	switch {
	case prior == nil:
		return nil
	case has:
		prior = d.floats(rows * userPriorWidth)
		checkPrior(d, prior, whose)
		return prior
	}
	return make([]float64, rows*userPriorWidth)
}

// unit reports whether v lies in [0, 1] (NaN does not).
func unit(v float64) bool { return v >= 0 && v <= 1 }
