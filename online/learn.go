package online

import "math"

// The forward pass and the SGD step of one pair (u, i), through the
// scratch buffers.

// transitionActive reports whether T̂ is used (and trained) now.
func (m *Model) transitionActive() bool {
	return !m.cfg.Plain && !m.cfg.NoTransition && m.clock() >= uint64(m.cfg.WarmUp)
}

func (m *Model) distilling() bool {
	return !m.cfg.Plain && m.clock() >= uint64(m.cfg.WarmUp)
}

// forward computes z, f and T̂ for the pair (u,i) into the scratch buffers.
// During warm-up T̂ is the untrained network, near the identity, so that
// warm-up scores are not all tied at p_clean = 1; learning then holds it
// at the identity (see grads).
func (m *Model) forward(u, i int32) {
	s := &m.scratch
	p, q := m.users.row(u), m.items.row(i)
	s.user, s.item = p, q
	if m.oneLogitEach() && !m.cfg.Plain && !m.cfg.NoTransition {
		lf, ln, lt := m.logits(p, q)
		m.classifier.fromLogit(s.f, lf)
		m.noisyHead.fromLogit(s.noisy, ln)
		m.transition.fromLogit(s.t, lt, u, i)
		return
	}
	m.classifier.forwardPair(s.f, s.z, p, q)
	if !m.cfg.Plain {
		m.noisyHead.forward(s.noisy, s.z)
	}
	if m.cfg.Plain || m.cfg.NoTransition {
		copy(s.t, s.identity)
	} else {
		m.transition.forward(s.t, s.z, u, i)
	}
}

// forwardNegative is forward for the sampled negative j that trains η̃
// and T̂ (the first of an event's, learnNegatives), in binary mode. With
// T̂ one-sided, an observed 0 means a clean 0, so the corrected loss of a
// negative is the plain cross-entropy whatever T̂ is, and T̂ is computed
// only when the negative is distilled to 0 (it then trains T̂). It
// returns y*.
func (m *Model) forwardNegative(u, j int32) int {
	s := &m.scratch
	p, q := m.users.row(u), m.items.row(j)
	s.user, s.item = p, q
	copy(s.t, s.identity)
	// T̂'s logit comes with the pass; it is read only if y* = 0.
	lf, ln, lt := m.logits(p, q)
	m.classifier.fromLogit(s.f, lf)
	m.noisyHead.fromLogit(s.noisy, ln)
	ystar := m.distill()
	if ystar == 0 && m.transitionActive() && !m.cfg.NoTransition {
		m.transition.fromLogit(s.t, lt, u, j)
	}
	return ystar
}

// learnNegative learns from a sampled negative j that trains f and the
// embedding rows only (every negative but the first, and all of them in
// the plain model), in binary mode: forwardNegative and learnPair for
// y = 0, no y*, no auxiliary weight, with what is known of them worked
// out. T̂ = I for such a negative, so classGrad's observed probability
// is f_0, and nothing reaches η̃ or T̂. Every value is computed with the
// same operations in the same order as on the general path, so the
// step is the same bits (TestLearnNegativeMatchesLearnPair); what it
// skips is the work of the cases that cannot arise. It reports false,
// and changes nothing, if a gradient is not finite.
func (m *Model) learnNegative(u, j int32, weight float64) bool {
	s, cfg := &m.scratch, &m.cfg
	p, q := m.users.row(u), m.items.row(j)
	s.user, s.item = p, q
	d := m.d
	row := m.classifier.weights[d : 2*d] // f's one free row
	m.classifier.fromLogit(s.f, hadamardDot(s.z, p, q, row))
	// classGrad with T̂ = I and y = 0: observedProb sums f_k T̂_k0 from 0.
	f0, f1 := s.f[0], s.f[1]
	obs := 0 + f0*1 + f1*0
	if obs < probFloor {
		obs = probFloor
	}
	g0, g1 := (f0-f0*1/obs)*weight, (f1-f1*0/obs)*weight
	// clipNorm: dot of two elements sums its four accumulators as
	// (s0 + s1) + (s2 + s3), three of them 0.
	if n2 := 0 + g0*g0 + g1*g1 + 0 + (0 + 0); n2 > cfg.Clip*cfg.Clip {
		c := cfg.Clip / math.Sqrt(n2)
		g0, g1 = g0*c, g1*c
	}
	s.dClass[0], s.dClass[1] = g0, g1
	s.dUserNorm2, s.dItemNorm2 = embeddingGrads(s.dUser, s.dItem, g1, row, p, q, cfg.L2, cfg.Clip)
	if n := g0 + g1 + s.dUserNorm2 + s.dItemNorm2; math.IsNaN(n) || math.IsInf(n, 0) {
		return false
	}
	m.apply(u, j, -1, false, false)
	return true
}

// oneLogitEach reports whether f, η̃ and T̂ each have one free logit, a
// dot product with z plus a bias: K = 2 and T̂ one-sided (binary mode).
func (m *Model) oneLogitEach() bool { return m.k == 2 && m.transition.oneSided }

// logits writes z = p ⊙ q into the scratch buffer and returns the dot
// products with z of the one free row of f, of η̃ and of T̂ (A_01), summed
// in the pass that forms z. Only when oneLogitEach.
func (m *Model) logits(p, q []float64) (class, noisy, trans float64) {
	d := m.d
	return hadamardDot3(m.scratch.z, p, q,
		m.classifier.weights[d:2*d], m.noisyHead.weights[d:2*d], m.transition.weights[d:2*d])
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
	noisy := m.scratch.noisy
	best := 0
	for j, v := range noisy {
		if v > noisy[best] {
			best = j
		}
	}
	if noisy[best] > (1+m.schedule.rho)/2 {
		return best
	}
	return -1
}

// learnPair applies one SGD step for the pair whose forward pass is in the
// scratch buffers. It reports false, and changes nothing, if a gradient is
// not finite.
func (m *Model) learnPair(u, i int32, y, ystar int, w, weight, auxWeight float64) bool {
	trans, ok := m.grads(y, ystar, w, weight, auxWeight)
	if !ok {
		return false
	}
	m.apply(u, i, ystar, trans, auxWeight > 0)
	return true
}

// grads fills the scratch gradients for the pair in the forward buffers:
// dClass (classifier logits; dW_k = g_k z, db = g) and dUser, dItem
// (embedding rows, with weight decay), scaled by weight; dNoisy (the noisy
// head η̃'s logits, plain cross-entropy on the observed label) and, when
// trans is true, dTrans (row ystar of the transition logits), scaled by
// auxWeight, and zero when auxWeight is 0. Each is clipped to Config.Clip.
// ok is false if any is not finite.
func (m *Model) grads(y, ystar int, w, weight, auxWeight float64) (trans, ok bool) {
	cfg, s := &m.cfg, &m.scratch
	lw := 0.0
	if ystar >= 0 {
		lw = cfg.Lambda * w // w = 0 for sampled negatives: no L_cal
	}
	t := s.t
	if !m.transitionActive() {
		t = s.identity // warm-up: f learns the noisy labels with T̂ = I
	}
	classGrad(s.dClass, s.f, t, m.k, y, ystar, lw)
	for j := range s.dClass {
		s.dClass[j] *= weight
	}
	clipNorm(s.dClass, cfg.Clip)
	// dz = Σ_c g_c W_c: with one free row and nothing else reaching z, it is
	// g_1 W_1, which embeddingGrads forms as it goes rather than in a pass
	// of its own.
	dzScale, dz := s.dClass[len(s.dClass)-1], m.classifier.weights[(m.k-1)*m.d:]
	if m.k != 2 || cfg.NoisyHeadTrainsEmbeddings {
		clear(s.dz)
		m.classifier.backprop(s.dz, s.dClass)
		dzScale, dz = 1, s.dz
	}
	clear(s.dNoisy)
	if !cfg.Plain && auxWeight > 0 {
		for j := range s.dNoisy {
			s.dNoisy[j] = auxWeight * s.noisy[j]
		}
		s.dNoisy[y] -= auxWeight
		clipNorm(s.dNoisy, cfg.Clip)
		if cfg.NoisyHeadTrainsEmbeddings {
			m.noisyHead.backprop(s.dz, s.dNoisy)
		}
	}
	s.dUserNorm2, s.dItemNorm2 = embeddingGrads(s.dUser, s.dItem, dzScale, dz, s.user, s.item, cfg.L2, cfg.Clip)
	trans = ystar >= 0 && auxWeight > 0 && m.transitionActive() && !(cfg.Mode == ModeBinary && ystar == 1)
	if trans {
		transGrad(s.dTrans, s.t, m.k, ystar, y)
		for j := range s.dTrans {
			s.dTrans[j] *= auxWeight
		}
		clipNorm(s.dTrans, cfg.Clip)
	}
	// A NaN or Inf in dUser or dItem shows in its squared norm.
	n2 := s.dUserNorm2 + s.dItemNorm2
	ok = finite3(s.dClass, s.dNoisy, s.dTrans) && !math.IsNaN(n2) && !math.IsInf(n2, 0)
	return trans, ok
}

// embeddingGrads writes dp = dz⊙q + l2·p and dq = dz⊙p + l2·q, clips each
// to norm c, and returns their squared norms after clipping. The gradient
// reaching z is dz = g·w: a head row and its logit's gradient, or g = 1
// and w = dz for a dz summed already. Each dz_j is 0 + g·w_j, exactly the
// value clear and axpy would leave in a buffer (a −0 becomes +0), and
// exactly w_j for g = 1 and such a w.
func embeddingGrads(dp, dq []float64, g float64, w, p, q []float64, l2, c float64) (dp2, dq2 float64) {
	n := len(p)
	dp, dq, w, q = dp[:n], dq[:n], w[:n], q[:n]
	// Two accumulators per sum, elements alternating between them: the
	// additions of one chain wait for each other, two chains overlap.
	// The whole blocks of four are in kernels.go.
	var acc [4]float64
	embeddingGradsBlocks(dp, dq, g, w, p, q, l2, &acc)
	p0, p1, q0, q1 := acc[0], acc[1], acc[2], acc[3]
	j := n &^ 3
	for ; j+2 <= n; j += 2 {
		dz0, dz1 := 0+g*w[j], 0+g*w[j+1]
		a0 := dz0*q[j] + l2*p[j]
		b0 := dz0*p[j] + l2*q[j]
		a1 := dz1*q[j+1] + l2*p[j+1]
		b1 := dz1*p[j+1] + l2*q[j+1]
		dp[j], dq[j], dp[j+1], dq[j+1] = a0, b0, a1, b1
		p0 += a0 * a0
		q0 += b0 * b0
		p1 += a1 * a1
		q1 += b1 * b1
	}
	for ; j < n; j++ {
		dz := 0 + g*w[j]
		a := dz*q[j] + l2*p[j]
		b := dz*p[j] + l2*q[j]
		dp[j], dq[j] = a, b
		p0 += a * a
		q0 += b * b
	}
	return clipTo(dp, p0+p1, c), clipTo(dq, q0+q1, c)
}

// itemOffsetGain multiplies the step of T̂'s per-item offsets o_i in
// binary mode: they step at itemOffsetGain·LearningRate, where A and C step
// at TransitionRate·LearningRate and the per-user offsets u_u at
// userOffsetGain·LearningRate. An item's offset is its propensity to noise (clickbait, a
// trending slot clicked regardless of taste), learned from the distilled
// labels of the item's events; at the classifier's rate it had barely
// moved after the few hundred events an item gets. The gain changes what
// the model scores, not what it can represent: nothing is added to the
// state or its encoding. Chosen on seed 1 of the v2 200k stream among 1,
// 2, 4, 8 and 16, as the largest whose cost on ML-100k (rating ≤ 2 as
// noise), where the offsets partly learn "popular = noise", the wrong
// way there, stays under 0.01 ROC-AUC (docs/design/model.md, "The item
// offset's rate"). Rating and dwell modes, whose T̂ has K free rows, keep
// the classifier's rate.
const itemOffsetGain = 4

// userOffsetGain is the same for T̂'s per-user offsets u_u
// (Config.TransitionUserOffset): in binary mode they step at
// userOffsetGain·LearningRate. A user's offset is the user's propensity to
// noise (a bot, a careless user), and a user gets about a hundred events
// on the v2 stream. Chosen on seed 1 among 1, 2, 4 and 8 (stop 36), as
// the largest that keeps every stream of docs/design/model.md, "The item
// offset's rate", at or above its best label-free baseline: at 4 DeCA fell
// 0.0001 below its loss baseline (docs/design/model.md, "The per-user
// offset's rate").
const userOffsetGain = 2

// apply takes one step along the gradients grads left in the scratch
// buffers: plain SGD for the networks (η̃ only if aux, T̂ only if trans), a
// per-row adaptive step for the embeddings (table.stepRate), so that rows seen
// often move less. The rows of a pair with a cold row do not move.
func (m *Model) apply(u, i int32, ystar int, trans, aux bool) {
	s, lr := &m.scratch, m.cfg.LearningRate
	m.users.stamps[u], m.items.stamps[i] = m.epoch, m.epoch
	var userRate, itemRate float64 // 0: a pair with a cold row teaches no embedding (bounds.go)
	if u >= m.users.base && i >= m.items.base {
		userRate = m.users.stepRate(u, s.dUserNorm2, m.cfg.EmbeddingRate)
		itemRate = m.items.stepRate(i, s.dItemNorm2, m.cfg.EmbeddingRate)
	}
	if i >= m.items.base {
		m.shareStepped(i) // the row, its step sum or its T̂ offsets
	}
	m.classifier.step(s.dClass, s.z, lr)
	axpy(s.user, userRate, s.dUser)
	axpy(s.item, itemRate, s.dItem)
	if aux && !m.cfg.Plain {
		m.noisyHead.step(s.dNoisy, s.z, lr)
	}
	if trans {
		// The offsets o_i and u_u step at the classifier's rate, times
		// itemOffsetGain and userOffsetGain where T̂ is one-sided (binary
		// mode); a cold row's stay zero (bounds.go).
		itemRate, userRate := lr, lr
		if m.transition.oneSided {
			itemRate *= itemOffsetGain
			userRate *= userOffsetGain
		}
		if i < m.items.base {
			itemRate = 0
		}
		if u < m.users.base {
			userRate = 0
		}
		m.transition.step(s.dTrans, s.z, u, i, ystar, lr*m.cfg.TransitionRate, itemRate, userRate)
	}
}
