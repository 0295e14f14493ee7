package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// recentItems is how many of a user's latest items the sketch mode keeps to
// keep them out of that user's negative samples.
const recentItems = 32

// popRingSize is the number of recent interactions popularity sampling
// draws from.
const popRingSize = 1 << 16

// negativeTries bounds the rejection sampling of one negative.
const negativeTries = 10

// Model is the online RGBT learner. It is not safe for concurrent use: one
// goroutine owns it.
type Model struct {
	cfg  Config
	k, d int
	src  *rand.PCG
	rnd  *rand.Rand

	userIdx map[string]int32
	users   []string
	itemIdx map[string]int32
	items   []string

	p, q       []float64 // embeddings, d per row
	accP, accQ []float64 // per-row adaptive-step accumulators
	recent     []int32   // recentItems per user, -1 empty (sketch mode)
	recentN    []uint32  // items pushed per user
	pop        []int32   // ring of recent items, for popularity sampling
	popN       uint64

	w, b   []float64 // classifier f: K×d, K
	wn, bn []float64 // noisy-posterior head η̃: K×d, K (the distiller)
	a, c   []float64 // transition: K·K×d, K·K
	ti     []float64 // per-item transition logit offsets: K·K per item
	tcur   int32     // item whose offsets the scratch pass uses

	cooc   cooccurrence
	mix    gmm
	fitter gmmFitter
	win    []float64 // ring of GMMWindow feature pairs
	winN   int       // filled pairs
	winPos int       // next slot

	rho       float64
	sumT      []float64 // Σ T̂ over the observed events of this period
	nT        uint64
	meanT     []float64 // mean T̂ of the last finished period
	hasMeanT  bool
	events    uint64
	distilled uint64
	refits    uint64
	numErrors uint64

	frozen bool // a Snapshot copy: WriteTo and Summary only

	// Change tracking for Snapshot. userEpoch[u] and itemEpoch[i] hold the
	// epoch in which the row last changed; every Snapshot starts a new
	// epoch. On a copy, origin is the model it copies and synced the first
	// epoch whose changes it lacks.
	userEpoch, itemEpoch []uint64
	epoch                uint64
	origin               *Model
	synced               uint64
	dirtyU, dirtyI       []rowSpan // a copy's scratch: the rows to copy

	// scratch, reused by every Step
	z, f, fn, t, g, gn, gt, dz, dp, dq, eye []float64
	dp2, dq2                                float64 // squared norms of dp, dq
}

// New returns an empty model. src is its only source of randomness: the
// same configuration, source state and events give the same model and the
// same scores, bit for bit.
func New(cfg Config, src *rand.PCG) (*Model, error) {
	if src == nil {
		return nil, fmt.Errorf("new model: nil random source")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new model: %w", err)
	}
	cfg = cfg.WithDefaults()
	m := &Model{
		cfg:     cfg,
		k:       cfg.K(),
		d:       cfg.Dim,
		src:     src,
		rnd:     rand.New(src),
		userIdx: map[string]int32{},
		itemIdx: map[string]int32{},
		rho:     cfg.RhoStart,
	}
	m.alloc()
	k, d := m.k, m.d
	m.w = make([]float64, k*d)
	m.b = make([]float64, k)
	m.wn = make([]float64, k*d)
	m.bn = make([]float64, k)
	m.a = make([]float64, k*k*d)
	m.c = make([]float64, k*k)
	// The classifier head starts at unit scale: with both the head and the
	// embeddings near zero, the gradient reaching the embeddings is the
	// product of two small numbers and learning stalls at the bias.
	// Rows 1..K-1 only: row 0 is the reference class. √2 gives the logit
	// differences the spread two free N(0,1) rows would have.
	for i := d; i < k*d; i++ {
		m.w[i] = m.rnd.NormFloat64() * math.Sqrt2
		m.wn[i] = m.rnd.NormFloat64() * math.Sqrt2
	}
	// Each row puts transitionInitDiag on the diagonal and spreads the rest
	// evenly; logits are relative to column 0, the reference.
	diag := math.Log(transitionInitDiag * float64(k-1) / (1 - transitionInitDiag))
	for j := 0; j < k; j++ {
		for c := 1; c < k; c++ {
			switch {
			case j == 0:
				m.c[j*k+c] = -diag
			case c == j:
				m.c[j*k+c] = diag
			}
		}
	}
	return m, nil
}

// alloc sets up everything that follows from the configuration alone.
func (m *Model) alloc() {
	k, d := m.k, m.d
	if m.cfg.Cooccurrence == CoocExact {
		m.cooc = &exactCooc{}
	} else {
		m.cooc = newSketchCooc(m.cfg.SketchUsers, m.cfg.SketchHashes)
	}
	if m.cfg.NegativeSampling == NegPopularity {
		m.pop = make([]int32, popRingSize)
	}
	m.win = make([]float64, 2*m.cfg.GMMWindow)
	m.sumT = make([]float64, k*k)
	m.meanT = make([]float64, k*k)
	m.z = make([]float64, d)
	m.dz = make([]float64, d)
	m.dp = make([]float64, d)
	m.dq = make([]float64, d)
	m.f = make([]float64, k)
	m.fn = make([]float64, k)
	m.g = make([]float64, k)
	m.gn = make([]float64, k)
	m.gt = make([]float64, k)
	m.t = make([]float64, k*k)
	m.eye = make([]float64, k*k)
	for j := 0; j < k; j++ {
		m.eye[j*k+j] = 1
	}
}

// K is the number of label classes.
func (m *Model) K() int { return m.k }

// Config returns the configuration with defaults filled in.
func (m *Model) Config() Config { return m.cfg }

// Version is the number of events the model has learned from.
func (m *Model) Version() uint64 { return m.events }

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
		if ev.Rating < 1 || ev.Rating > m.k {
			return 0, invalid("rating %d outside 1..%d", ev.Rating, m.k)
		}
		return ev.Rating - 1, nil
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

func (m *Model) userID(id string) int32 {
	if u, ok := m.userIdx[id]; ok {
		return u
	}
	u := int32(len(m.users))
	m.userIdx[id] = u
	m.users = append(m.users, id)
	for i := 0; i < m.d; i++ {
		m.p = append(m.p, m.rnd.NormFloat64()*m.cfg.InitScale)
	}
	m.accP = append(m.accP, 0)
	m.userEpoch = append(m.userEpoch, m.epoch)
	m.recentN = append(m.recentN, 0)
	for i := 0; i < recentItems; i++ {
		m.recent = append(m.recent, -1)
	}
	m.cooc.grow(len(m.users), len(m.items))
	return u
}

func (m *Model) itemID(id string) int32 {
	if i, ok := m.itemIdx[id]; ok {
		return i
	}
	i := int32(len(m.items))
	m.itemIdx[id] = i
	m.items = append(m.items, id)
	for j := 0; j < m.d; j++ {
		m.q = append(m.q, m.rnd.NormFloat64()*m.cfg.InitScale)
	}
	m.accQ = append(m.accQ, 0)
	m.itemEpoch = append(m.itemEpoch, m.epoch)
	for j := 0; j < m.k*m.k; j++ {
		m.ti = append(m.ti, 0)
	}
	m.cooc.grow(len(m.users), len(m.items))
	return i
}

func (m *Model) row(v []float64, i int32) []float64 {
	return v[int(i)*m.d : int(i+1)*m.d]
}

// transitionActive reports whether T̂ is used (and trained) now.
func (m *Model) transitionActive() bool {
	return !m.cfg.Plain && !m.cfg.NoTransition && m.events >= uint64(m.cfg.WarmUp)
}

func (m *Model) distilling() bool {
	return !m.cfg.Plain && m.events >= uint64(m.cfg.WarmUp)
}

// forwardNegative is forward for a sampled negative in binary mode. With
// T̂ one-sided, an observed 0 means a clean 0, so the corrected loss of a
// negative is the plain cross-entropy whatever T̂ is, and T̂ is computed only
// when the negative trains η̃ and T̂ (aux) and is distilled. It returns y*,
// which is -1 for a negative that does not train them.
func (m *Model) forwardNegative(u, j int32, aux bool) int {
	hadamard(m.z, m.row(m.p, u), m.row(m.q, j))
	m.tcur = j
	classForward(m.f, m.w, m.b, m.z)
	copy(m.t, m.eye)
	if m.cfg.Plain || !aux {
		return -1
	}
	classForward(m.fn, m.wn, m.bn, m.z)
	ystar := m.distill()
	if ystar == 0 && m.transitionActive() && !m.cfg.NoTransition {
		m.transition(m.t)
	}
	return ystar
}

// forward computes z, f and T̂ for the pair (u,i) into the scratch buffers
// and returns p·q. During warm-up T̂ is the untrained network, near the
// identity, so that warm-up scores are not all tied at p_clean = 1; learning
// then holds it at the identity (see grads).
func (m *Model) forward(u, i int32) float64 {
	s := hadamard(m.z, m.row(m.p, u), m.row(m.q, i))
	m.tcur = i
	classForward(m.f, m.w, m.b, m.z)
	if !m.cfg.Plain {
		classForward(m.fn, m.wn, m.bn, m.z)
	}
	if m.cfg.Plain || m.cfg.NoTransition {
		copy(m.t, m.eye)
	} else {
		m.transition(m.t)
	}
	return s
}

// transition writes T̂(x) for the z in the scratch buffer into t. In binary
// mode T̂ is one-sided: a clean positive is always observed as a positive
// (row 1 is (0, 1)), and the network learns only the instance's
// false-positive rate ε(x) = T̂_01(x). Learning row 1 as well lets the pair
// (f, T̂) explain every sampled negative as a flipped positive, and the
// classifier collapses to f ≡ 1; noisy implicit feedback (misclicks,
// clickbait, bounces) is false positives, which row 0 covers.
func (m *Model) transition(t []float64) {
	k := m.k
	rows := k
	if m.cfg.Mode == ModeBinary {
		rows = 1
		t[2], t[3] = 0, 1
	}
	d, ti := m.d, m.ti[int(m.tcur)*k*k:int(m.tcur+1)*k*k]
	for j := 0; j < rows; j++ {
		row := t[j*k : (j+1)*k]
		refLogits(row, m.a[j*k*d:(j+1)*k*d], m.c[j*k:(j+1)*k], m.z)
		for c := 1; c < k; c++ {
			row[c] += ti[j*k+c]
		}
		softmax(row, row)
	}
}

// distill returns the distilled label y* = argmax η̃(x) if
// max η̃(x) > (1+ρ)/2, else -1. η̃ is the noisy-posterior head, trained with
// plain cross-entropy on the observed labels: BLTM's rule reads the noisy
// posterior (if η̃_y(x) > (1+ρ)/2 then y is the Bayes label of x when the
// noise rate is below ρ). Distilling from f instead closes a loop (f
// trains T̂ trains f) whose fixed point explains every event as noise.
func (m *Model) distill() int {
	if !m.distilling() {
		return -1
	}
	best := 0
	for j, v := range m.fn {
		if v > m.fn[best] {
			best = j
		}
	}
	if m.fn[best] > (1+m.rho)/2 {
		return best
	}
	return -1
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
	u, i := m.userID(ev.User), m.itemID(ev.Item)

	// 1. Score with the model as it was.
	m.forward(u, i)
	if cap(sc.Posterior) < m.k {
		sc.Posterior = make([]float64, m.k)
	}
	sc.Posterior = sc.Posterior[:m.k]
	copy(sc.Posterior, m.f)
	sc.Label = y
	sc.PClean = pClean(m.f, m.t, m.k, y)
	sc.Loss = -math.Log(math.Max(m.f[y], probFloor))
	if !m.cfg.Plain {
		sc.Loss = -math.Log(math.Max(m.fn[y], probFloor))
	}
	sc.Version = m.events
	sc.Reliability = 1
	useGMM := !m.cfg.NoGMM && !m.cfg.Plain
	var x0, x1 float64 // reliability features, only the mixture reads them
	if useGMM {
		x0, x1 = m.f[y], math.Log1p(m.cooc.count(u, i))
		if m.mix.fitted {
			sc.Reliability = m.mix.posterior(m.mix.reliable, x0, x1)
		}
	}
	sc.Distilled = m.distill()
	if !finite(sc.Posterior) || math.IsNaN(sc.PClean+sc.Reliability+sc.Loss) || math.IsInf(sc.Loss, 0) {
		// Unreachable while parameters stay finite; kept as the last guard
		// so that no NaN or Inf leaves the model.
		m.numErrors++
		for j := range sc.Posterior {
			sc.Posterior[j] = 1 / float64(m.k)
		}
		sc.PClean, sc.Reliability, sc.Loss, sc.Distilled = 0.5, 0.5, math.Log(float64(m.k)), -1
		return fmt.Errorf("score event: %w", ErrNumerical)
	}
	axpy(m.sumT, 1, m.t)
	m.nT++

	// 2. Learn.
	ok := true
	w := sc.Reliability
	weight := ev.Weight
	if weight == 0 {
		weight = 1
	}
	ok = m.learnPair(u, i, y, sc.Distilled, w, weight, weight) && ok
	if sc.Distilled >= 0 {
		m.distilled++
		if useGMM {
			m.pushWindow(x0, x1)
		}
	}
	if m.cfg.Mode == ModeBinary && len(m.items) > 1 {
		// Each of the m negatives weighs 1/m, so that the classifier sees
		// the two classes in balance: otherwise f's prior is 1/(1+m) for
		// the positive class, the distillation threshold is easy to pass
		// for class 0 only, and T̂ learns the sampling ratio as noise.
		negWeight := 1 / float64(m.cfg.Negatives)
		for n := 0; n < m.cfg.Negatives; n++ {
			j := m.sampleNegative(u, i)
			if j < 0 {
				continue
			}
			// η̃ and T̂ learn from the first negative only, with weight
			// m·(1/m): the same expected gradient as all m at weight 1/m,
			// for a quarter of the work at m = 4.
			aux := n == 0
			ystar := m.forwardNegative(u, j, aux)
			auxWeight := 0.0
			if aux {
				auxWeight = 1
			}
			ok = m.learnPair(u, j, 0, ystar, 0, negWeight, auxWeight) && ok
		}
	}
	m.remember(u, i)
	m.events++
	if m.events%uint64(m.cfg.RefitEvery) == 0 {
		m.refit()
	}
	if !ok {
		m.numErrors++
		return fmt.Errorf("learn from event: %w", ErrNumerical)
	}
	return nil
}

// learnPair applies one SGD step for the pair whose forward pass is in the
// scratch buffers. It reports false, and changes nothing, if a gradient is
// not finite.
func (m *Model) learnPair(u, i int32, y, ystar int, w, weight, auxWeight float64) bool {
	trans, ok := m.grads(u, i, y, ystar, w, weight, auxWeight)
	if !ok {
		return false
	}
	m.apply(u, i, ystar, trans, auxWeight > 0)
	return true
}

// grads fills the scratch gradients for the pair in the forward buffers:
// m.g (classifier logits; dW_k = g_k z, db = g) and m.dp, m.dq (embedding
// rows, with weight decay), scaled by weight; m.gn (the noisy head η̃'s
// logits, plain cross-entropy on the observed label) and, when trans is
// true, m.gt (row ystar of the transition logits), scaled by auxWeight, and
// zero when auxWeight is 0. Each is clipped to Config.Clip. ok is false if
// any is not finite.
func (m *Model) grads(u, i int32, y, ystar int, w, weight, auxWeight float64) (trans, ok bool) {
	cfg := &m.cfg
	lw := 0.0
	if ystar >= 0 {
		lw = cfg.Lambda * w // w = 0 for sampled negatives: no L_cal
	}
	t := m.t
	if !m.transitionActive() {
		t = m.eye // warm-up: f learns the noisy labels with T̂ = I
	}
	classGrad(m.g, m.f, t, m.k, y, ystar, lw)
	for j := range m.g {
		m.g[j] *= weight
	}
	clipNorm(m.g, cfg.Clip)
	p, q := m.row(m.p, u), m.row(m.q, i)
	d := m.d
	for j := range m.dz {
		m.dz[j] = 0
	}
	for k := 1; k < m.k; k++ { // row 0 is the reference: zero
		axpy(m.dz, m.g[k], m.w[k*d:(k+1)*d])
	}
	for j := range m.gn {
		m.gn[j] = 0
	}
	if !cfg.Plain && auxWeight > 0 {
		for j := range m.gn {
			m.gn[j] = auxWeight * m.fn[j]
		}
		m.gn[y] -= auxWeight
		clipNorm(m.gn, cfg.Clip)
		if cfg.NoisyHeadTrainsEmbeddings {
			for k := 1; k < m.k; k++ {
				axpy(m.dz, m.gn[k], m.wn[k*d:(k+1)*d])
			}
		}
	}
	m.dp2, m.dq2 = embeddingGrads(m.dp, m.dq, m.dz, p, q, cfg.L2, cfg.Clip)
	trans = ystar >= 0 && auxWeight > 0 && m.transitionActive() && !(m.cfg.Mode == ModeBinary && ystar == 1)
	if trans {
		transGrad(m.gt, m.t, m.k, ystar, y)
		for j := range m.gt {
			m.gt[j] *= auxWeight
		}
		clipNorm(m.gt, cfg.Clip)
	}
	// A NaN or Inf in dp or dq shows in its squared norm.
	ok = finite(m.g, m.gn, m.gt) && !math.IsNaN(m.dp2+m.dq2) && !math.IsInf(m.dp2+m.dq2, 0)
	return trans, ok
}

// embeddingGrads writes dp = dz⊙q + l2·p and dq = dz⊙p + l2·q, clips each
// to norm c, and returns their squared norms after clipping.
func embeddingGrads(dp, dq, dz, p, q []float64, l2, c float64) (dp2, dq2 float64) {
	n := len(dz)
	dp, dq, p, q = dp[:n], dq[:n], p[:n], q[:n]
	// Two accumulators per sum: the additions of one chain wait for each
	// other, two chains overlap.
	var p0, p1, q0, q1 float64
	j := 0
	for ; j+2 <= n; j += 2 {
		a0 := dz[j]*q[j] + l2*p[j]
		b0 := dz[j]*p[j] + l2*q[j]
		a1 := dz[j+1]*q[j+1] + l2*p[j+1]
		b1 := dz[j+1]*p[j+1] + l2*q[j+1]
		dp[j], dq[j], dp[j+1], dq[j+1] = a0, b0, a1, b1
		p0 += a0 * a0
		q0 += b0 * b0
		p1 += a1 * a1
		q1 += b1 * b1
	}
	for ; j < n; j++ {
		a := dz[j]*q[j] + l2*p[j]
		b := dz[j]*p[j] + l2*q[j]
		dp[j], dq[j] = a, b
		p0 += a * a
		q0 += b * b
	}
	return clipTo(dp, p0+p1, c), clipTo(dq, q0+q1, c)
}

// apply takes one step along the gradients grads left in the scratch
// buffers: plain SGD for the networks (η̃ only if aux, T̂ only if trans), a
// per-row adaptive step (lr/sqrt(1+G), G the row's accumulated mean
// squared gradient) for the embeddings, so that rows seen often move less.
func (m *Model) apply(u, i int32, ystar int, trans, aux bool) {
	d, lr := m.d, m.cfg.LearningRate
	for k := 1; k < m.k; k++ {
		axpy(m.w[k*d:(k+1)*d], -lr*m.g[k], m.z)
		m.b[k] -= lr * m.g[k]
	}
	if aux && !m.cfg.Plain {
		for k := 1; k < m.k; k++ {
			axpy(m.wn[k*d:(k+1)*d], -lr*m.gn[k], m.z)
			m.bn[k] -= lr * m.gn[k]
		}
	}
	m.userEpoch[u], m.itemEpoch[i] = m.epoch, m.epoch
	m.accP[u] += m.dp2 / float64(d)
	m.accQ[i] += m.dq2 / float64(d)
	le := m.cfg.EmbeddingRate
	axpy(m.row(m.p, u), -le/math.Sqrt(1+m.accP[u]), m.dp)
	axpy(m.row(m.q, i), -le/math.Sqrt(1+m.accQ[i]), m.dq)
	if trans {
		k, lrT := m.k, lr*m.cfg.TransitionRate
		ti := m.ti[int(i)*k*k : int(i+1)*k*k]
		for c := 1; c < k; c++ {
			r, gc := ystar*k+c, m.gt[c]
			axpy(m.a[r*d:(r+1)*d], -lrT*gc, m.z)
			m.c[r] -= lrT * gc
			ti[r] -= lr * gc
		}
	}
}

// sampleNegative draws an item the user has not interacted with (as far as
// the model remembers), or returns -1 after negativeTries draws.
func (m *Model) sampleNegative(u, pos int32) int32 {
	for try := 0; try < negativeTries; try++ {
		var j int32
		if m.pop != nil && m.popN > 0 {
			j = m.pop[m.rnd.IntN(int(min(m.popN, popRingSize)))]
		} else {
			j = int32(m.rnd.IntN(len(m.items)))
		}
		if j != pos && !m.seen(u, j) {
			return j
		}
	}
	return -1
}

// seen reports whether u interacted with i: exactly in exact mode, among the
// user's last recentItems items in sketch mode.
func (m *Model) seen(u, i int32) bool {
	if ex, ok := m.cooc.(*exactCooc); ok {
		_, found := slices.BinarySearch(ex.userItems[u], i)
		return found
	}
	for _, v := range m.recent[int(u)*recentItems : int(u+1)*recentItems] {
		if v == i {
			return true
		}
	}
	return false
}

// remember records (u,i) in the co-occurrence estimator, the user's recent
// items and the popularity ring.
func (m *Model) remember(u, i int32) {
	m.userEpoch[u], m.itemEpoch[i] = m.epoch, m.epoch
	m.cooc.add(u, i, m.rnd)
	m.recent[int(u)*recentItems+int(m.recentN[u]%recentItems)] = i
	m.recentN[u]++
	if m.pop != nil {
		m.pop[m.popN%popRingSize] = i
		m.popN++
	}
}

func (m *Model) pushWindow(x0, x1 float64) {
	m.win[2*m.winPos], m.win[2*m.winPos+1] = x0, x1
	m.winPos = (m.winPos + 1) % m.cfg.GMMWindow
	if m.winN < m.cfg.GMMWindow {
		m.winN++
	}
}

// refit runs every RefitEvery events: it refits the mixture on the window
// and advances the ρ schedule.
func (m *Model) refit() {
	m.refits++
	if !m.cfg.Plain && !m.cfg.NoGMM && m.winN >= m.cfg.GMMMinSamples {
		if m.fitter.x == nil || m.fitter.x.RawMatrix().Rows != m.winN {
			m.fitter.x = mat.NewDense(m.winN, 2, nil)
		}
		copy(m.fitter.x.RawMatrix().Data, m.win[:2*m.winN])
		m.mix.fit(m.fitter.x, &m.fitter, m.cfg.GMMIterations)
	}
	if m.nT == 0 {
		return
	}
	delta := 0.0
	for j, s := range m.sumT {
		mean := s / float64(m.nT)
		delta += math.Abs(mean - m.meanT[j])
		m.meanT[j] = mean
		m.sumT[j] = 0
	}
	m.nT = 0
	had := m.hasMeanT
	m.hasMeanT = true
	if m.cfg.RhoSchedule == RhoProgressive && m.transitionActive() && had &&
		delta/float64(m.k) < m.cfg.RhoTolerance {
		m.rho = math.Max(m.cfg.RhoMin, m.rho-m.cfg.RhoStep)
	}
}

// Summary describes the model's state.
func (m *Model) Summary() Summary {
	s := Summary{
		Events:          m.events,
		Users:           len(m.users),
		Items:           len(m.items),
		Distilled:       m.distilled,
		Rho:             m.rho,
		Refits:          m.refits,
		NumericalErrors: m.numErrors,
		GMM:             m.mix.summary(),
	}
	if m.events > 0 {
		s.DistilledShare = float64(m.distilled) / float64(m.events)
	}
	src := m.meanT
	if !m.hasMeanT {
		src = make([]float64, m.k*m.k)
		if m.nT > 0 {
			for j, v := range m.sumT {
				src[j] = v / float64(m.nT)
			}
		} else {
			copy(src, m.eye)
		}
	}
	s.MeanTransition = make([][]float64, m.k)
	for j := range s.MeanTransition {
		s.MeanTransition[j] = append([]float64(nil), src[j*m.k:(j+1)*m.k]...)
	}
	return s
}

// Snapshot copies m into dst (nil: a new model), reusing dst's buffers, and
// returns dst. The copy shares nothing that m goes on changing (ids are
// immutable strings and are shared), so another goroutine may encode it
// while m learns: a checkpoint pauses the stream for a memory copy, not for
// the encoding. The copy supports WriteTo and Summary; Step refuses it with
// ErrFrozen.
//
// When dst is the last Snapshot of m, only what changed since is copied:
// the user and item rows that m touched in between (their embeddings,
// step accumulators, transition offsets, recent items and co-occurrence
// state), the new rows, and the model's shared parameters, which are small.
// A model kept in two copies alternately works too: each copy knows which
// epoch it was synced at.
func (m *Model) Snapshot(dst *Model) *Model {
	if dst == nil {
		dst = &Model{src: &rand.PCG{}}
	}
	// Rows dst already holds; those that changed since are listed. A
	// frozen m does not change, has no stamps and is only read.
	nu, ni := 0, 0
	dst.dirtyU, dst.dirtyI = dst.dirtyU[:0], dst.dirtyI[:0]
	if m.frozen {
		dst.origin = nil
	} else {
		if dst.origin == m {
			nu, ni = len(dst.users), len(dst.items)
			dst.dirtyU = changedRows(dst.dirtyU, m.userEpoch[:nu], dst.synced)
			dst.dirtyI = changedRows(dst.dirtyI, m.itemEpoch[:ni], dst.synced)
		}
		m.epoch++
		dst.origin, dst.synced = m, m.epoch
	}
	du, di := dst.dirtyU, dst.dirtyI

	dst.frozen = true
	dst.cfg, dst.k, dst.d = m.cfg, m.k, m.d
	*dst.src = *m.src
	dst.users = m.users[:len(m.users):len(m.users)]
	dst.items = m.items[:len(m.items):len(m.items)]
	d, kk := m.d, m.k*m.k
	dst.p, dst.accP = syncRows(dst.p, m.p, d, du, nu), syncRows(dst.accP, m.accP, 1, du, nu)
	dst.recent = syncRows(dst.recent, m.recent, recentItems, du, nu)
	dst.recentN = syncRows(dst.recentN, m.recentN, 1, du, nu)
	dst.q, dst.accQ = syncRows(dst.q, m.q, d, di, ni), syncRows(dst.accQ, m.accQ, 1, di, ni)
	dst.ti = syncRows(dst.ti, m.ti, kk, di, ni)
	dst.cooc = m.cooc.copyInto(dst.cooc, du, di, nu, ni)

	cp := func(dst, src []float64) []float64 { return append(dst[:0], src...) }
	dst.w, dst.b, dst.wn, dst.bn = cp(dst.w, m.w), cp(dst.b, m.b), cp(dst.wn, m.wn), cp(dst.bn, m.bn)
	dst.a, dst.c = cp(dst.a, m.a), cp(dst.c, m.c)
	dst.win, dst.sumT, dst.meanT = cp(dst.win, m.win), cp(dst.sumT, m.sumT), cp(dst.meanT, m.meanT)
	if m.pop != nil {
		dst.pop = append(dst.pop[:0], m.pop...)
	} else {
		dst.pop = nil
	}
	dst.mix = m.mix
	dst.winN, dst.winPos, dst.rho = m.winN, m.winPos, m.rho
	dst.nT, dst.hasMeanT, dst.popN = m.nT, m.hasMeanT, m.popN
	dst.events, dst.distilled, dst.refits, dst.numErrors = m.events, m.distilled, m.refits, m.numErrors
	if len(dst.eye) != len(m.eye) { // Summary reads it
		dst.eye = cp(dst.eye, m.eye)
	}
	return dst
}

// rowSpan is the rows [lo, hi) of a table.
type rowSpan struct{ lo, hi int32 }

// changedRows appends to dst the spans of consecutive rows whose epoch is
// at least since: a table whose rows all changed is copied in one piece.
func changedRows(dst []rowSpan, epochs []uint64, since uint64) []rowSpan {
	for r, e := range epochs {
		if e < since {
			continue
		}
		if n := len(dst); n > 0 && dst[n-1].hi == int32(r) {
			dst[n-1].hi++
		} else {
			dst = append(dst, rowSpan{int32(r), int32(r) + 1})
		}
	}
	return dst
}

// syncRows makes dst, which holds the first n rows (w values each) of src
// as they were at its last sync, a copy of src: it copies the listed spans
// and appends the rows dst lacks.
func syncRows[T any](dst, src []T, w int, spans []rowSpan, n int) []T {
	for _, s := range spans {
		copy(dst[int(s.lo)*w:int(s.hi)*w], src[int(s.lo)*w:int(s.hi)*w])
	}
	return append(dst[:n*w], src[n*w:]...)
}

// pair looks up (user, item) and leaves their z = p_u ⊙ q_i in the scratch
// buffer; ok is false if either is unknown.
func (m *Model) pair(user, item string) (i int32, ok bool) {
	u, ok1 := m.userIdx[user]
	i, ok2 := m.itemIdx[item]
	if !ok1 || !ok2 {
		return 0, false
	}
	hadamard(m.z, m.row(m.p, u), m.row(m.q, i))
	return i, true
}

// Predict writes f(x) for (user, item) into dst (K values) and reports
// whether both are known. It does not change the model.
func (m *Model) Predict(user, item string, dst []float64) bool {
	if _, ok := m.pair(user, item); !ok {
		return false
	}
	classForward(dst[:m.k], m.w, m.b, m.z)
	return true
}

// Transition writes the network's T̂(x) for (user, item) into dst (K×K,
// row-major) and reports whether both are known. It reads the network
// even when T̂ is not active yet.
func (m *Model) Transition(user, item string, dst []float64) bool {
	i, ok := m.pair(user, item)
	if !ok {
		return false
	}
	m.tcur = i
	m.transition(dst[:m.k*m.k])
	return true
}
