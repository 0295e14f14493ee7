package report

import "math"

// Label-free baselines: what a user can count from the stream itself, with
// no model. Each is prequential (computed from the events before the one
// it scores), so it is as honest as the model's test-then-train scores.
// They are reported beside p_clean so that a score is never judged alone.
const (
	BaselineLoss           = "loss_baseline"   // −loss of a plain model (T-CE's signal)
	BaselineItemPopularity = "item_popularity" // the item's count so far
	BaselineUserActivity   = "user_activity"   // the user's count so far
	BaselinePairCount      = "pair_count"      // the (user, item) count so far
	BaselineDwell          = "dwell"           // the event's dwell_ms
	BaselineUserGap        = "user_gap"        // log(1 + seconds) since the user's previous event
	// BaselineUserGapEvents is log(1 + the events since the user's previous
	// event): the user gap of a log without times, whose order is its
	// clock. Reported where user_gap is not and most events have one.
	BaselineUserGapEvents = "user_gap_events"
)

// baselineNames are every baseline, in the order reports list them.
var baselineNames = [...]string{BaselineLoss, BaselineItemPopularity, BaselineUserActivity, BaselinePairCount, BaselineDwell, BaselineUserGap, BaselineUserGapEvents}

// countBaselines are the baselines Counter computes, in its Observe order.
var countBaselines = [...]string{BaselineItemPopularity, BaselineUserActivity, BaselinePairCount, BaselineDwell, BaselineUserGap, BaselineUserGapEvents}

// CountBaselines returns the names of the baselines Counter.Observe
// returns, in its order.
func CountBaselines() []string { return countBaselines[:] }

// Counter computes the counting baselines of a stream, event by event.
// Memory grows with the distinct users, items and pairs: it is a lab tool
// for reports, not part of the service.
type Counter struct {
	users, items map[string]uint32
	pairs        map[[2]string]uint32

	// Dwell: events with one, and the running mean of log(1+dwell) that
	// stands in for a missing one (so a missing dwell ranks in the middle,
	// favouring neither side).
	withDwell, events uint64
	logDwellSum       float64

	// User gap: each user's last timestamp (unix ms), the events that had
	// a gap (a timestamp, and an earlier one of their user), and the
	// running mean of log(1+seconds) that stands in for a missing gap, as
	// for dwell.
	lastTS    map[string]int64
	withGap   uint64
	logGapSum float64
	// backwards counts the events with a gap whose time is earlier than
	// their user's previous event's (OutOfOrder).
	backwards uint64

	// User gap in events: each user's last event's index, the events
	// that had an earlier one of their user, and the running mean of
	// log(1 + count) that stands in for a user's first event.
	lastIndex      map[string]uint64
	withCount      uint64
	logCountGapSum float64
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter {
	return &Counter{users: map[string]uint32{}, items: map[string]uint32{}, pairs: map[[2]string]uint32{},
		lastTS: map[string]int64{}, lastIndex: map[string]uint64{}}
}

// Observe returns the baselines' scores of an event from the events before
// it (item popularity, user activity, pair count, log dwell, log user
// gap, log user gap in events), then counts it. tsMS is the event's time in unix milliseconds,
// read only when hasTS is set. The user gap is log(1 + seconds) since the
// user's previous event with a timestamp (a negative gap, from
// out-of-order timestamps, counts as 0); an event without a timestamp, or
// whose user has no earlier one, gets the running mean of the gaps so far,
// and an event without a timestamp leaves its user's last time as it was.
// The user gap in events is log(1 + the events observed since the user's
// previous one), the running mean of them for the user's first.
func (c *Counter) Observe(user, item string, dwellMS int64, hasDwell bool, tsMS int64, hasTS bool) [len(countBaselines)]float64 {
	pair := [2]string{user, item}
	var s [len(countBaselines)]float64
	s[0] = float64(c.items[item])
	s[1] = float64(c.users[user])
	s[2] = float64(c.pairs[pair])
	if hasDwell {
		s[3] = math.Log1p(float64(max(dwellMS, 0)))
	} else if c.withDwell > 0 {
		s[3] = c.logDwellSum / float64(c.withDwell)
	}
	last, hasLast := c.lastTS[user]
	hasGap := hasTS && hasLast
	if hasGap {
		s[4] = math.Log1p(float64(max(tsMS-last, 0)) / 1000)
	} else if c.withGap > 0 {
		s[4] = c.logGapSum / float64(c.withGap)
	}
	if n, ok := c.lastIndex[user]; ok {
		s[5] = math.Log1p(float64(c.events - n - 1))
		c.withCount++
		c.logCountGapSum += s[5]
	} else if c.withCount > 0 {
		s[5] = c.logCountGapSum / float64(c.withCount)
	}
	c.lastIndex[user] = c.events
	c.items[item]++
	c.users[user]++
	c.pairs[pair]++
	c.events++
	if hasDwell {
		c.withDwell++
		c.logDwellSum += s[3]
	}
	if hasTS {
		c.lastTS[user] = tsMS
	}
	if hasGap {
		c.withGap++
		c.logGapSum += s[4]
		if tsMS < last {
			c.backwards++
		}
	}
	return s
}

// OutOfOrder is the number of events whose time is earlier than their
// user's previous event's: a log in time order has none but for clocks
// that disagree a little; one in another order (MovieLens' u.data) has
// about half its events so.
func (c *Counter) OutOfOrder() uint64 { return c.backwards }

// DwellShare is the share of observed events that carried a dwell time.
func (c *Counter) DwellShare() float64 {
	if c.events == 0 {
		return 0
	}
	return float64(c.withDwell) / float64(c.events)
}

// minDwellShare and minGapShare are the shares of events that must carry
// dwell_ms, and have a user gap (a timestamp, and an earlier one of the
// same user), for the dwell and user_gap baselines to be reported.
const (
	minDwellShare = 0.5
	minGapShare   = 0.5
)

// Reported reports whether the named counting baseline is reported for
// the events observed: dwell where at least minDwellShare of them carried
// one, user_gap where at least minGapShare had one, user_gap_events where
// user_gap is not and at least minGapShare had an earlier event of their
// user, the others always.
func (c *Counter) Reported(name string) bool {
	switch name {
	case BaselineDwell:
		return c.DwellShare() >= minDwellShare
	case BaselineUserGap:
		return c.GapShare() >= minGapShare
	case BaselineUserGapEvents:
		return c.GapShare() < minGapShare && c.events > 0 && float64(c.withCount) >= minGapShare*float64(c.events)
	}
	return true
}

// GapShare is the share of observed events that had a user gap: a
// timestamp, and an earlier event of their user with one.
func (c *Counter) GapShare() float64 {
	if c.events == 0 {
		return 0
	}
	return float64(c.withGap) / float64(c.events)
}

// BetterDirection returns s or its negation, whichever has the higher
// ROC-AUC against genuine, and whether it negated. A baseline is reported
// in its better direction so that comparing a model with it is
// conservative: the model must beat the baseline as a user would have
// oriented it with hindsight.
func BetterDirection(s []float64, genuine []bool) ([]float64, bool) {
	auc, err := ROCAUC(s, genuine)
	if err != nil || auc >= 0.5 {
		return s, false
	}
	neg := make([]float64, len(s))
	for i, v := range s {
		neg[i] = -v
	}
	return neg, true
}
