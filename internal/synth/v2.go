package synth

import (
	"container/heap"
	"math"
	"math/rand/v2"
)

// userKind is what kind of user a ProfileV2 user is.
type userKind uint8

const (
	ordinaryUser userKind = iota
	lowQualityUser
	botUser
)

// Dwell of ProfileV2, in milliseconds: wide log-normals whose ranges
// overlap, so that dwell alone ranks genuine above noise with a ROC-AUC of
// about 0.8, not near 1 (docs/design/generator.md).
var (
	v2DwellGenuine   = logNormal{25_000, 1.0}
	v2DwellMisclick  = logNormal{4_000, 1.0}
	v2DwellClickbait = logNormal{9_000, 1.0}
	v2DwellCuriosity = logNormal{12_000, 1.0}
	v2DwellTrending  = logNormal{12_000, 1.0}
	v2DwellBot       = logNormal{5_000, 0.25} // machine-regular
	v2DwellBounce    = logNormal{5_000, 0.8}
	v2DwellPurchase  = logNormal{25_000, 1.0} // a deliberate act: looks genuine
	v2DwellReturn    = logNormal{15_000, 1.0}
)

// Rhythm of ProfileV2 beyond the v1 constants.
const (
	bounceGapMeanMS = 1_500 // pause between the events of a bounce chain
	botThinkMeanMS  = 1_200 // a bot's pause between events
)

// typeWeights are P(event type | cause) in the order view, click, cart,
// purchase; a Purchase is always a purchase and a Return a return.
var typeWeights = map[Cause][4]float64{
	Genuine:   {0.30, 0.45, 0.15, 0.10},
	Misclick:  {0.20, 0.80, 0, 0},
	Clickbait: {0.10, 0.90, 0, 0},
	Curiosity: {0.50, 0.45, 0.05, 0},
	Trending:  {0.30, 0.60, 0.10, 0},
	Bot:       {0.70, 0.30, 0, 0},
	Bounce:    {0.40, 0.60, 0, 0},
}

// worldV2 is what ProfileV2 adds to the world, drawn from its own random
// stream so that the v1 world of a seed is unchanged.
type worldV2 struct {
	cfg  V2Config
	seed uint64
	kind []userKind
	// activityCDF weighs users for a new session (bots are more active).
	activityCDF []float64
	// popCDF is the cumulative popularity over the whole catalogue.
	popCDF []float64
	// mechCDF draws a noise decision's mechanism: Misclick, Clickbait,
	// Curiosity, Trending, Bounce, Purchase; the weights are the event
	// shares divided by the events one decision produces.
	mechCDF []float64
	// pNoise is the probability that an event of each user kind is noise
	// (for bots) or starts a noise decision (for the others).
	pNoise [3]float64
	// typeCDF caches the cumulative typeWeights.
	typeCDF map[Cause][]float64
	// The trending slot of period slotPeriod.
	slotPeriod int64
	slot       []int
	items      int
}

func newWorldV2(c Config, w *world) *worldV2 {
	v := c.V2
	r := rand.New(rand.NewPCG(c.Seed, v2Stream))
	x := &worldV2{cfg: v, seed: c.Seed, kind: make([]userKind, c.Users), slotPeriod: -1, items: c.Items,
		typeCDF: map[Cause][]float64{}}
	for cause, ws := range typeWeights {
		x.typeCDF[cause] = cumulative(ws[:])
	}
	// Flag users: a random permutation, bots first, then low-quality users.
	perm := r.Perm(c.Users)
	nBots := int(math.Round(v.BotUsers * float64(c.Users)))
	nLow := int(math.Round(v.LowQualityUsers * float64(c.Users)))
	for k, u := range perm {
		switch {
		case k < nBots:
			x.kind[u] = botUser
		case k < nBots+nLow:
			x.kind[u] = lowQualityUser
		}
	}
	// Activity: the v1 weights (recovered from the cumulative form), bots
	// multiplied by BotActivity. The expected share of events of each kind
	// follows from activity × session length.
	act := make([]float64, c.Users)
	var events [3]float64
	prev := 0.0
	for u, cdf := range w.activityCDF {
		act[u] = cdf - prev
		prev = cdf
		length := c.SessionMean
		if x.kind[u] == botUser {
			act[u] *= v.BotActivity
			length = v.BotSessionMean
		}
		events[x.kind[u]] += act[u] * length
	}
	x.activityCDF = cumulative(act)
	x.popCDF = cumulative(w.pop)

	shares := []float64{v.Misclick, v.Clickbait, v.Curiosity, v.Trending, v.Bounce, v.PurchaseReturn}
	perDecision := []float64{1, 1, 1, 1, v.BounceMean, 2}
	total := sum(shares)
	weights := make([]float64, len(shares))
	var decisions float64 // Σ share/events: decisions per noise event
	for k := range shares {
		weights[k] = shares[k] / total / perDecision[k]
		decisions += weights[k]
	}
	x.mechCDF = cumulative(weights)
	eventsPerDecision := 1 / decisions
	// A share h of noise events among a user's events needs a noise
	// decision with probability q = h / (n̄(1-h) + h), n̄ events per decision.
	stepShare := func(h float64) float64 { return h / (eventsPerDecision*(1-h) + h) }

	all := events[0] + events[1] + events[2]
	fBot, fLow, fOrd := events[botUser]/all, events[lowQualityUser]/all, events[ordinaryUser]/all
	h := c.Noise
	if fOrd > 0 {
		h = (c.Noise - fBot*v.BotNoise - fLow*v.LowQualityNoise) / fOrd
	}
	h = min(max(h, 0), 0.9)
	x.pNoise[ordinaryUser] = stepShare(h)
	x.pNoise[lowQualityUser] = stepShare(v.LowQualityNoise)
	x.pNoise[botUser] = v.BotNoise
	return x
}

// trending returns the items of the trending slot at time ts. A slot
// depends only on the seed and its period's index, so it needs no memory
// beyond the current one.
func (x *worldV2) trending(epoch, ts int64) []int {
	period := (ts - epoch) / x.cfg.TrendingPeriodMS
	if period != x.slotPeriod {
		r := rand.New(rand.NewPCG(x.seed^uint64(period)*0x9e3779b97f4a7c15, trendStream))
		x.slot = r.Perm(x.items)[:x.cfg.TrendingItems]
		x.slotPeriod = period
	}
	return x.slot
}

// openV2 starts a session at time t for a user drawn by the v2 activity.
func (g *Generator) openV2(t int64) {
	x := g.v2
	u := draw(g.r, x.activityCDF)
	for i := 0; i < userRedraws && g.active[u]; i++ {
		u = draw(g.r, x.activityCDF)
	}
	g.active[u] = true
	m := g.cfg.SessionMean
	if x.kind[u] == botUser {
		m = x.cfg.BotSessionMean
	}
	heap.Push(&g.sessions, &session{id: g.nextID, user: u, next: t, left: 1 + g.geometric(m)})
	g.nextID++
}

// geometric draws a count ≥ 0 with mean m-1 (0 when m ≤ 1).
func (g *Generator) geometric(m float64) int {
	if m <= 1 {
		return 0
	}
	p := 1 / m
	return int(math.Floor(math.Log(1-g.r.Float64()) / math.Log(1-p)))
}

func (g *Generator) nextV2() (Event, bool) {
	if g.emitted >= g.cfg.Events {
		return Event{}, false
	}
	x := g.v2
	s := g.sessions[0]
	ts := max(s.next, g.lastTS+1)
	e := Event{User: s.user, TS: ts}
	g.emitted++
	g.lastTS = ts

	if s.ret > 0 { // a pending return: emit it and drop the entry
		e.Item, e.Cause, e.Type = s.ret-1, Return, ReturnType
		e.DwellMS = g.dwellOf(v2DwellReturn)
		heap.Pop(&g.sessions)
		return e, true
	}
	think := float64(thinkMeanMS)
	switch {
	case s.chain > 0: // inside a bounce chain
		s.chain--
		e.Cause = Bounce
		e.Item = draw(g.r, x.popCDF)
	case x.kind[s.user] == botUser:
		s.left--
		think = botThinkMeanMS
		e.Cause = Genuine
		if g.r.Float64() < x.pNoise[botUser] {
			e.Cause = Bot
			if g.r.Float64() < 0.5 {
				e.Item = g.r.IntN(g.cfg.Items)
			} else {
				slot := x.trending(g.cfg.EpochMS, ts)
				e.Item = slot[g.r.IntN(len(slot))]
			}
		}
	default:
		s.left--
		e.Cause = Genuine
		if g.r.Float64() < x.pNoise[x.kind[s.user]] {
			switch draw(g.r, x.mechCDF) {
			case 0:
				e.Cause = Misclick
			case 1:
				e.Cause = Clickbait
			case 2:
				e.Cause = Curiosity
			case 3:
				e.Cause = Trending
				slot := x.trending(g.cfg.EpochMS, ts)
				e.Item = slot[g.r.IntN(len(slot))]
			case 4:
				e.Cause = Bounce
				e.Item = draw(g.r, x.popCDF)
				s.chain = 1 + g.geometric(x.cfg.BounceMean-1) // the chain's other events
			default:
				e.Cause = Purchase
			}
		}
	}
	switch e.Cause {
	case Genuine, Misclick, Clickbait, Curiosity:
		e.Item = g.item(s.user, e.Cause)
	case Purchase:
		// Bought on impulse, against taste: a popular off-taste item.
		e.Item = g.item(s.user, Curiosity)
	}
	if e.Cause == Purchase {
		e.Type = PurchaseType
		heap.Push(&g.sessions, &session{id: g.nextID, user: s.user, next: ts + g.exp(float64(x.cfg.ReturnDelayMS)), left: 1, ret: e.Item + 1})
		g.nextID++
	} else {
		e.Type = [4]Type{View, Click, Cart, PurchaseType}[draw(g.r, x.typeCDF[e.Cause])]
	}
	e.DwellMS = g.dwellOf(v2Dwell(e.Cause))
	if s.chain > 0 {
		think = bounceGapMeanMS
	}
	// s is still the heap's top: a pushed return comes at ts or later and
	// has a larger id.
	if s.left > 0 || s.chain > 0 {
		s.next = ts + e.DwellMS + g.exp(think)
		heap.Fix(&g.sessions, 0)
	} else {
		heap.Pop(&g.sessions)
		g.active[s.user] = false
		g.open(ts + e.DwellMS + g.exp(sessionGapMeanMS))
	}
	return e, true
}

func v2Dwell(c Cause) logNormal {
	switch c {
	case Genuine:
		return v2DwellGenuine
	case Misclick:
		return v2DwellMisclick
	case Clickbait:
		return v2DwellClickbait
	case Curiosity:
		return v2DwellCuriosity
	case Trending:
		return v2DwellTrending
	case Bot:
		return v2DwellBot
	case Bounce:
		return v2DwellBounce
	case Purchase:
		return v2DwellPurchase
	}
	return v2DwellReturn
}

func (g *Generator) dwellOf(d logNormal) int64 {
	ms := d.median * math.Exp(d.sigma*g.r.NormFloat64())
	return min(max(int64(math.Round(ms)), minDwellMS), maxDwellMS)
}
