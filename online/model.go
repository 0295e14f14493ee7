package online

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Model is the online RGBT learner. It is not safe for concurrent use: one
// goroutine owns it.
type Model struct {
	cfg  Config
	k, d int
	src  *rand.PCG
	rnd  *rand.Rand

	users userTable
	items table
	// itemPriors is each item row's means of the weight, after the priors
	// and before them, and the events they count (userPriorWidth slots an
	// item: itemprior.go). Kept and encoded as userTable.prior is; nil
	// else.
	itemPriors []float64
	popular    popularRing // popularity sampling's ring of recent items

	classifier head // f, the clean-label posterior
	noisyHead  head // η̃, the noisy-label posterior the distiller reads
	transition transition
	cooc       cooccurrence
	mixture    mixture
	context    contextModel // dwell and event type as evidence (context.go)
	schedule   schedule

	// Bounds on the tables (bounds.go): the admission sketch (nil when
	// ids are admitted at first sight) and the counters.
	admission *admission
	bounds    bounds

	// A frozen copy (FrozenCopy) supports WriteTo and Summary only.
	frozen bool
	// Change tracking for FrozenCopy. Rows are stamped with the epoch in
	// which they last changed; every FrozenCopy starts a new epoch. On a
	// copy, origin is the model it copies, synced the first epoch whose
	// changes it lacks, changedUsers and changedItems the rows it listed
	// as changed last (changedBlocks the admission sketch's blocks), and
	// delta what it knows of its last saved state (delta.go).
	epoch                      uint64
	origin                     *Model
	synced                     uint64
	changedUsers, changedItems []rowSpan
	changedBlocks              []rowSpan
	delta                      deltaBase

	// share, when the model shares its item rows with other partition
	// models, is what it last published (merge.go); cursors, per source
	// partition, the last of its deltas the model merged (MergeFrom),
	// sorted by partition.
	share   *sharing
	cursors []Cursor

	scratch scratch
}

// scratch is one pair's forward pass and gradients; every Step reuses it.
type scratch struct {
	user, item []float64 // the pair's rows p_u and q_i, as forward found them
	z          []float64 // p_u ⊙ q_i
	f          []float64 // classifier posterior f(x), K
	noisy      []float64 // noisy head η̃(x), K
	t          []float64 // T̂(x), K×K row-major
	identity   []float64 // I, K×K
	// Gradients with respect to the classifier's, the noisy head's and
	// one transition row's logits, to z, and to the user and item rows
	// (with their squared norms after clipping).
	dClass, dNoisy, dTrans []float64
	dz, dUser, dItem       []float64
	dUserNorm2, dItemNorm2 float64
}

// New returns an empty model. src is its only source of randomness: the
// same configuration, source state and events give the same model and the
// same scores, bit for bit.
func New(cfg Config, src *rand.PCG) (*Model, error) {
	return newWithNets(cfg, src, nil)
}

// NewPartition returns an empty model for input partition p of a stream
// whose partitions have a model each (LayoutPartition). Partition 0's is
// New(cfg, NewSource(seed)), the one model's. Every other partition's
// draws from NewPartitionSource(seed, p), except its networks (the
// classifier's and the noisy head's weights), which it draws as
// partition 0's model does, from NewSource(seed): every partition model
// starts from the same networks.
//
// Why: the partition models share their item rows (merge.go), and an
// item row's steps follow the heads that read it (a head's W acts on
// p_u ⊙ q_i). Heads drawn apart send each partition's steps of a shared
// row in directions of their own, and the summed rows serve none of
// them; from the same start, the heads drift apart only as the
// partitions' events differ. With 3 members, p_clean ROC-AUC went from
// 0.798 to 0.803 on the demo's log and from 0.723 to 0.731 on another
// 20k-event stream, means over seeds 1–8 (docs/design/partitions.md,
// "Built: partition models start from the same networks").
func NewPartition(cfg Config, seed uint64, p int32) (*Model, error) {
	if p == 0 {
		return New(cfg, NewSource(seed))
	}
	return newWithNets(cfg, NewPartitionSource(seed, p), rand.New(NewSource(seed)))
}

// newWithNets is New, with the networks' weights drawn from nets (nil:
// from the model's own source, before anything else is drawn).
func newWithNets(cfg Config, src *rand.PCG, nets *rand.Rand) (*Model, error) {
	if src == nil {
		return nil, fmt.Errorf("new model: nil random source")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new model: %w", err)
	}
	m := newModel(cfg.WithDefaults(), src)
	if nets == nil {
		nets = m.rnd
	}
	k, d := m.k, m.d
	m.classifier, m.noisyHead = newHead(k, d), newHead(k, d)
	// The classifier head starts at unit scale: with both the head and the
	// embeddings near zero, the gradient reaching the embeddings is the
	// product of two small numbers and learning stalls at the bias.
	// Rows 1..K-1 only: row 0 is the reference class. √2 gives the logit
	// differences the spread two free N(0,1) rows would have.
	for j := d; j < k*d; j++ {
		m.classifier.weights[j] = nets.NormFloat64() * math.Sqrt2
		m.noisyHead.weights[j] = nets.NormFloat64() * math.Sqrt2
	}
	m.transition.init()
	m.reserve()
	if m.cfg.admits() {
		m.addColdRows()
	}
	return m, nil
}

// newModel sets up an empty model with everything that follows from the
// configuration alone (cfg has its defaults): New draws the parameters,
// ReadModel reads them.
func newModel(cfg Config, src *rand.PCG) *Model {
	k, d := cfg.K(), cfg.Dim
	m := &Model{
		cfg:        cfg,
		k:          k,
		d:          d,
		src:        src,
		rnd:        rand.New(src),
		users:      userTable{table: newTable(d)},
		items:      newTable(d),
		transition: newTransition(k, d, cfg.Mode == ModeBinary, cfg.TransitionUserOffset),
		mixture:    newMixture(cfg.GMMWindow),
		schedule:   newSchedule(k, cfg.RhoStart),
		context:    newContextModel(cfg),
		scratch:    newScratch(k, d),
	}
	if cfg.DwellDirection == DwellLong {
		m.users.times = []int64{}
		m.users.prior = []float64{}
		m.itemPriors = []float64{}
	}
	if cfg.Cooccurrence == CoocExact {
		m.cooc = &exactCooc{}
	} else {
		m.cooc = newSketchCooc(cfg.SketchUsers, cfg.SketchHashes)
	}
	if cfg.NegativeSampling == NegPopularity {
		m.popular.items = make([]int32, popRingSize)
	}
	m.users.capacity, m.items.capacity = cfg.MaxUsers, cfg.MaxItems
	m.users.lru.head, m.users.lru.tail = -1, -1
	m.items.lru.head, m.items.lru.tail = -1, -1
	if cfg.admits() {
		m.users.base, m.items.base = 1, 1
		// ReadModel reads the cells over the zero ones.
		m.admission = newAdmission(cfg.AdmitSketchWidth)
	}
	return m
}

func newScratch(k, d int) scratch {
	s := scratch{
		z: make([]float64, d), dz: make([]float64, d),
		dUser: make([]float64, d), dItem: make([]float64, d),
		f: make([]float64, k), noisy: make([]float64, k),
		dClass: make([]float64, k), dNoisy: make([]float64, k), dTrans: make([]float64, k),
		t: make([]float64, k*k), identity: make([]float64, k*k),
	}
	for j := 0; j < k; j++ {
		s.identity[j*k+j] = 1
	}
	return s
}

// K is the number of label classes.
func (m *Model) K() int { return m.k }

// Config returns the configuration with defaults filled in.
func (m *Model) Config() Config { return m.cfg }

// Version is the number of events the model has learned from.
func (m *Model) Version() uint64 { return m.schedule.events }

// label returns the observed class of ev under the label mode.
func (m *Model) label(ev *Event) (int, error) {
	if ev.User == "" || ev.Item == "" {
		return 0, invalid("empty user or item id")
	}
	if ev.Weight < 0 || math.IsNaN(ev.Weight) || math.IsInf(ev.Weight, 0) {
		return 0, invalid("weight %v", ev.Weight)
	}
	switch m.cfg.Mode {
	case ModeRating:
		if ev.Rating == 0 {
			return 0, invalid("rating mode needs a rating that rounds (half up) to 1..%d: none given, or 0", m.k)
		}
		class, ok := RatingClass(ev.Rating, m.k)
		if !ok {
			return 0, invalid("rating %v outside 1..%d (rounded half up)", ev.Rating, m.k)
		}
		return class - 1, nil
	case ModeDwell:
		if !ev.HasDwell || ev.DwellMS < 0 {
			return 0, invalid("dwell mode needs a non-negative dwell_ms")
		}
		y := 0
		for _, th := range m.cfg.DwellBucketsMS {
			if ev.DwellMS >= th {
				y++
			}
		}
		return y, nil
	default:
		return 1, nil
	}
}

// Step scores ev with the model as it is, writes the score into sc, then
// learns from ev. An event that does not fit the label mode returns an
// error wrapping ErrInvalidEvent and changes nothing. A numerical failure
// while learning returns an error wrapping ErrNumerical; sc is valid then.
func (m *Model) Step(ev Event, sc *Score) error {
	if m.frozen {
		return ErrFrozen
	}
	y, err := m.label(&ev)
	if err != nil {
		return err
	}
	m.bounds.clock++
	u, i := m.userID(ev.User), m.itemID(ev.Item)

	// 1. Score with the model as it was.
	x0, x1, err := m.score(u, i, y, sc)
	if err != nil {
		return err
	}
	eta := m.scratch.noisy[1] // η̃₁, the noisy head's observed class in binary mode (tailLearns)
	context := m.context.features(&ev, m.cfg.Mode)
	if m.useContext() {
		m.instrumentFeatures(u, i, &ev, &context)
	}
	posterior, path := sc.PClean, pathAnchored
	var reading contextReading
	sc.Source = SourcePClean
	switch {
	case m.cfg.Plain:
	case m.useContext() && m.context.informed():
		// The context draws p_clean's log-odds in itself (pCleanTemper).
		reading = m.context.read(sc.PClean, context, m.reliableShare())
		posterior, path = reading.p, reading.path
		sc.Weight, sc.Source = posterior, path.source()
	default:
		sc.Weight = m.calibrate(posterior)
	}
	// The gap, where it says something and dwell does not read the event
	// whole (readsGap). Its level is p_clean calibrated towards the gap
	// instrument's mean p_clean, not the mixture's share (gapWeight),
	// unless the context gave the weight: the anchored posterior; where
	// the event type's rank read the event, the anchored posterior
	// without the type's evidence, which is added to the gap's weight
	// whole; where dwell's instrument read it, the anchored posterior
	// without dwell's evidence, the gap's weight then blended with
	// dwell's by dwell's reach (contextReading).
	var gap gapReading
	gapped, level := false, sc.Weight
	if m.useContext() && m.context.readsGap(&reading) {
		share := m.context.gap.pCleanShare()
		if path != pathAnchored {
			level = reading.level
		}
		if share > 0 {
			level = m.context.gapLevel(posterior, level, share, sc.Source == SourcePClean)
		}
		if gap, gapped = m.context.gapWeight(level, sc.PClean, context, share); gapped {
			sc.Weight = gap.w
			switch path {
			case pathRank:
				sc.Weight = sigmoid(logOdds(gap.w) + reading.own)
			case pathDwell:
				sc.Weight = sigmoid((1-reading.reach)*logOdds(gap.w) + reading.reach*reading.dwell)
			}
			if gap.blend >= 0.5 {
				sc.Source = SourceGap
			}
		}
	}

	// A click within seconds of the user's previous one (burst.go), on
	// every path, before the priors, which then learn what it says of
	// the user and the item.
	burstGap, burst, e := m.burstOf(&context, ev.HasTime)
	if e != 0 {
		sc.Weight = sigmoid(logOdds(sc.Weight) + e)
	}

	// The user's prior (userprior.go), then the item's (itemprior.go): from
	// the stream's genuine share to the user's and the item's, as their
	// earlier weights tell them, by the share of the weight that the
	// classifier does not already pool (priorOf).
	before, pool := sc.Weight, 1.0
	if gapped {
		pool = gap.pool
	}
	userPrior := m.useContext() && m.users.prior != nil && u >= m.users.base
	if userPrior {
		sc.Weight = m.userPrior(u, sc.Weight, pool)
	}
	itemPrior := m.useContext() && m.itemPriors != nil && i >= m.items.base
	if itemPrior {
		sc.Weight = m.itemPrior(i, sc.Weight, pool)
	}
	guarded := math.IsNaN(sc.Weight) || math.IsInf(sc.Weight, 0)
	if guarded {
		// Unreachable while the context's statistics stay finite; the
		// last guard, as score's, so that no NaN leaves the model: the
		// weight falls back to p_clean, which score has checked, the
		// priors learn nothing of it, and Step reports ErrNumerical
		// (the score valid) for the service's counter.
		m.schedule.numErrors++
		sc.Weight, userPrior, itemPrior = sc.PClean, false, false
	}

	// 2. Learn. The context learns from its posterior, not the weight.
	// The observed event is counted against the negatives' quantile as
	// it was when it was scored, before its own negatives move it.
	if m.tailLearns() {
		m.context.tail.learnObserved(eta)
	}
	ok := m.learnEvent(u, i, y, ev.Weight, sc, x0, x1)
	if ok && userPrior {
		m.learnUserPrior(u, before, sc.Weight)
	}
	if ok && itemPrior {
		m.learnItemPrior(i, before, sc.Weight)
	}
	if ok && m.useContext() {
		m.context.learn(context, posterior, sc.PClean, path)
		if gapped {
			m.context.gap.followGap(gap.g, level)
			m.context.reach.learn(gap.lambda)
		}
		m.context.learnGap(&context, sc.PClean)
		if burstGap {
			m.context.burst.learn(context.z[gapFeature], logOdds(sc.PClean), &burst)
		}
		if context.counted {
			m.context.countGap.learn(context.countGap)
		}
	}
	m.remember(u, i, &ev)
	m.schedule.events++
	if m.schedule.events%uint64(m.cfg.RefitEvery) == 0 {
		m.refit()
	}
	if m.periodDue() {
		m.endPeriod()
	}
	if !ok {
		m.schedule.numErrors++
		return fmt.Errorf("learn from event: %w", ErrNumerical)
	}
	if guarded {
		return fmt.Errorf("weigh event: not finite, p_clean written instead: %w", ErrNumerical)
	}
	return nil
}

// burstOf reads an event with the bursts' mixture (burst.go): gapped
// when its gap is one the mixture reads and learns (timed, after the
// user's previous event, not 0), the responsibilities of the gap, and
// the evidence by which the weight moves. A timed click with no previous
// one (a user's first, or the first since the user's events had times)
// is no burst: responsibilities 0, and evidence where a burst is read.
func (m *Model) burstOf(x *contextFeatures, timed bool) (gapped bool, r [burstComponents]float64, evidence float64) {
	switch {
	case !m.useContext() || !m.context.long:
		return false, r, 0
	case x.hasGap && !x.counted && x.z[gapFeature] > 0:
		gapped, r = true, m.context.burst.read(x.z[gapFeature])
	case !x.hasZ || x.hasGap || !timed:
		return false, r, 0
	}
	return gapped, r, m.context.burst.evidence(&r)
}

// useContext reports whether the context part turns p_clean into the
// weight.
func (m *Model) useContext() bool { return !m.cfg.NoContext && !m.cfg.Plain }

// useGMM reports whether the mixture weighs events.
func (m *Model) useGMM() bool { return !m.cfg.NoGMM && !m.cfg.Plain }

// score fills sc for the observed pair (u, i) with label y and returns
// the pair's reliability features, which only the mixture reads.
func (m *Model) score(u, i int32, y int, sc *Score) (x0, x1 float64, err error) {
	s := &m.scratch
	m.forward(u, i)
	if cap(sc.Posterior) < m.k {
		sc.Posterior = make([]float64, m.k)
	}
	sc.Posterior = sc.Posterior[:m.k]
	copy(sc.Posterior, s.f)
	sc.Label = y
	sc.PClean = pClean(s.f, s.t, m.k, y)
	sc.Weight = sc.PClean // Step adds the context's evidence and calibrates
	if m.cfg.Plain {
		sc.Loss = -math.Log(max(s.f[y], probFloor))
	} else {
		sc.Loss = -math.Log(max(s.noisy[y], probFloor))
	}
	sc.Version = m.schedule.events
	sc.Reliability = 1
	if m.useGMM() {
		x0, x1 = s.f[y], math.Log1p(m.cooc.count(u, i))
		if g := &m.mixture.gmm; g.fitted {
			sc.Reliability = g.posterior(g.reliable, x0, x1)
		}
	}
	sc.Distilled = m.distill()
	if !finite(sc.Posterior) || math.IsNaN(sc.PClean+sc.Reliability+sc.Loss) || math.IsInf(sc.Loss, 0) {
		// Unreachable while parameters stay finite; kept as the last guard
		// so that no NaN or Inf leaves the model.
		m.schedule.numErrors++
		for j := range sc.Posterior {
			sc.Posterior[j] = 1 / float64(m.k)
		}
		sc.PClean, sc.Weight, sc.Reliability, sc.Loss, sc.Distilled = 0.5, 0.5, 0.5, math.Log(float64(m.k)), -1
		return 0, 0, fmt.Errorf("score event: %w", ErrNumerical)
	}
	m.schedule.observe(s.t)
	return x0, x1, nil
}

// learnEvent learns from the observed pair (u, i), scored into sc, and in
// binary mode from its sampled negatives. It reports false if an update
// was discarded as non-finite.
func (m *Model) learnEvent(u, i int32, y int, weight float64, sc *Score, x0, x1 float64) bool {
	if weight == 0 {
		weight = 1
	}
	ok := m.learnPair(u, i, y, sc.Distilled, sc.Reliability, weight, weight)
	if sc.Distilled >= 0 {
		m.schedule.distilled++
		if m.useGMM() {
			m.mixture.push(x0, x1)
		}
	}
	if m.cfg.Mode == ModeBinary && m.items.resident() > 1 {
		ok = m.learnNegatives(u, i) && ok
	}
	return ok
}

// learnNegatives learns from Config.Negatives items sampled for u as
// observed negatives.
func (m *Model) learnNegatives(u, pos int32) bool {
	ok := true
	// Each of the m negatives weighs 1/m, so that the classifier sees
	// the two classes in balance: otherwise f's prior is 1/(1+m) for
	// the positive class, the distillation threshold is easy to pass
	// for class 0 only, and T̂ learns the sampling ratio as noise.
	negWeight := 1 / float64(m.cfg.Negatives)
	for n := 0; n < m.cfg.Negatives; n++ {
		j := m.sampleNegative(u, pos)
		if j < 0 {
			continue
		}
		// η̃ and T̂ learn from the first negative only, with weight
		// m·(1/m): the same expected gradient as all m at weight 1/m,
		// for a quarter of the work at m = 4. The others train f alone.
		if n == 0 && !m.cfg.Plain {
			ystar := m.forwardNegative(u, j)
			if m.tailLearns() {
				m.context.tail.learnNegative(m.scratch.noisy[1])
			}
			ok = m.learnPair(u, j, 0, ystar, 0, negWeight, 1) && ok
		} else {
			ok = m.learnNegative(u, j, negWeight) && ok
		}
	}
	return ok
}

// tailLearns reports whether the tail's statistics learn from the event
// being stepped: in binary mode, with the context's gap path (long),
// after levelBurnIn events (tail.go).
func (m *Model) tailLearns() bool {
	return m.context.long && m.cfg.Mode == ModeBinary && !m.cfg.Plain && float64(m.schedule.events) >= levelBurnIn
}

// refit runs every RefitEvery events of the model's own: it refits the
// mixture on the window.
func (m *Model) refit() {
	m.schedule.refits++
	if m.useGMM() {
		m.mixture.refit(m.cfg.GMMMinSamples, m.cfg.GMMIterations)
	}
}

// endPeriod ends a ρ period, every RefitEvery events of the clock
// (periodDue): it advances the ρ schedule.
func (m *Model) endPeriod() {
	m.schedule.periods = m.clock() / uint64(m.cfg.RefitEvery)
	moved, compared, ok := m.schedule.endPeriod(m.k)
	if ok && compared && m.cfg.RhoSchedule == RhoProgressive && m.transitionActive() &&
		moved < m.cfg.RhoTolerance {
		m.schedule.relax(m.cfg.RhoStep, m.cfg.RhoMin)
	}
}

// ForgetTimes forgets every user's latest event time, for a caller that
// feeds the model the same log again (replay --passes): the new pass's
// times start over, and each user's first event in it has no gap, as in
// the first pass. Without it every time of the new pass is earlier than
// the last pass's, each gap reads as out of order (0), and the gap says
// nothing in the pass that is scored. The rows it changes are stamped, so
// the next delta carries them.
func (m *Model) ForgetTimes() {
	for u, t := range m.users.times {
		if t != noTime {
			m.users.times[u], m.users.stamps[u] = noTime, m.epoch
		}
	}
}

// Events is the number of events the model has learned, its own and,
// with sharing, those of the deltas it merged (Summary.Events).
func (m *Model) Events() uint64 { return m.schedule.events }

// Summary describes the model's state.
func (m *Model) Summary() Summary {
	sch := &m.schedule
	s := Summary{
		Events:          sch.events,
		Users:           m.users.resident(),
		Items:           m.items.resident(),
		MaxUsers:        m.cfg.MaxUsers,
		MaxItems:        m.cfg.MaxItems,
		UsersEvicted:    m.bounds.usersEvicted,
		ItemsEvicted:    m.bounds.itemsEvicted,
		ColdUserEvents:  m.bounds.coldUsers,
		ColdItemEvents:  m.bounds.coldItems,
		Distilled:       sch.distilled,
		Rho:             sch.rho,
		Refits:          sch.refits,
		NumericalErrors: sch.numErrors,
		GMM:             m.mixture.gmm.summary(),
		MeanTransition:  sch.meanTransition(m.k, m.scratch.identity),
		UnrankedTypes:   m.UnrankedTypes(),
		OutOfOrderTypes: m.OutOfOrderTypes(),
	}
	if sch.events > 0 {
		s.DistilledShare = float64(sch.distilled) / float64(sch.events)
	}
	if m.useContext() && m.users.prior != nil {
		s.UserPriorStrength = m.context.prior.strength()
	}
	if m.useContext() && m.itemPriors != nil {
		s.ItemPriorStrength = m.context.itemLevel.strength()
	}
	if m.useContext() && m.context.long {
		s.Burst = m.context.burst.summary()
	}
	return s
}

// pair looks up (user, item) and leaves their z = p_u ⊙ q_i in the scratch
// buffer; ok is false if either is unknown.
func (m *Model) pair(user, item string) (u, i int32, ok bool) {
	u, ok1 := m.users.index[user]
	i, ok2 := m.items.index[item]
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	hadamard(m.scratch.z, m.users.row(u), m.items.row(i))
	return u, i, true
}

// Predict writes f(x) for (user, item) into dst (K values) and reports
// whether both are known. It does not change the model.
func (m *Model) Predict(user, item string, dst []float64) bool {
	if _, _, ok := m.pair(user, item); !ok {
		return false
	}
	m.classifier.forward(dst[:m.k], m.scratch.z)
	return true
}

// Transition writes the network's T̂(x) for (user, item) into dst (K×K,
// row-major) and reports whether both are known. It reads the network
// even when T̂ is not active yet.
func (m *Model) Transition(user, item string, dst []float64) bool {
	u, i, ok := m.pair(user, item)
	if !ok {
		return false
	}
	m.transition.forward(dst[:m.k*m.k], m.scratch.z, u, i)
	return true
}
