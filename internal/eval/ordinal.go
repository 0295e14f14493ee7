package eval

import (
	"math"
	"slices"
)

// OrdinalConfig configures the ordinal estimator of the flip matrix.
// The defaults were chosen on seed 1 of the RQ2 experiment (docs/results/transition.md).
type OrdinalConfig struct {
	// Dim is the embedding dimension of the clean model (default 16).
	Dim int `json:"dim"`
	// Epochs is the number of EM passes over the training ratings
	// (default 12).
	Epochs int `json:"epochs"`
	// WarmUp is the number of first passes that fit the clean model with
	// the flip matrix held at its start (default 2).
	WarmUp int `json:"warm_up"`
	// LearningRate is the SGD step of the clean model (default 0.02).
	LearningRate float64 `json:"learning_rate"`
	// L2 is the weight decay of the clean model's parameters (default 0.02).
	L2 float64 `json:"l2"`
	// ScaleRate is the step of the users' log scales relative to
	// LearningRate (default 0.2).
	ScaleRate float64 `json:"scale_rate"`
	// Starts are the starting diagonals of T, the off-diagonal mass spread
	// evenly (default DefaultOrdinalStarts). With more than one, EM runs
	// from each on the rows less a held-out share, and the fit whose
	// held-out likelihood of the noisy ratings is highest is kept; with
	// one, EM runs on every row.
	Starts []float64 `json:"starts"`
	// HoldOut is the share of rows held out to choose among Starts
	// (default 0.1).
	HoldOut float64 `json:"hold_out"`
}

// DefaultOrdinalStarts are the starting diagonals the ordinal estimator
// tries: 0.95 down to 0.30 in steps of 0.05.
var DefaultOrdinalStarts = []float64{0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5, 0.45, 0.4, 0.35, 0.3}

func (c OrdinalConfig) withDefaults() OrdinalConfig {
	if c.Dim == 0 {
		c.Dim = 16
	}
	if c.Epochs == 0 {
		c.Epochs = 12
	}
	if c.WarmUp == 0 {
		c.WarmUp = 2
	}
	if c.LearningRate == 0 {
		c.LearningRate = 0.02
	}
	if c.L2 == 0 {
		c.L2 = 0.02
	}
	if c.ScaleRate == 0 {
		c.ScaleRate = 0.2
	}
	if len(c.Starts) == 0 {
		c.Starts = DefaultOrdinalStarts
	}
	if c.HoldOut == 0 {
		c.HoldOut = 0.1
	}
	return c
}

// Ordinal estimates a class-level flip matrix T for ratings 1..K by
// maximum likelihood of the noisy ratings under
//
//	P(ỹ | x) = Σ_k P(y = k | x) T_kỹ,
//
// where the clean model P(y | x) is a cumulative-logit (ordinal)
// regression, P(y ≤ k | x) = σ(e^{a_u}(θ_k − s(x))), on the score
// s(x) = b_u + c_i + p_u·q_i, with K−1 increasing cut points θ and a
// spread e^{-a_u} per user (users who rate consistently have a sharp
// clean posterior, and there any mass far from it is noise).
// The ordinal model is unimodal in the rating scale, so it cannot take up
// mass that flip noise moves far from an interaction's typical rating
// (pairflip's K→1, the uniform floor of symmetric noise); the transition
// matrix must. That restriction of the clean class is what separates
// P(ỹ | y) from P(ỹ | Bayes label), which an unrestricted clean
// posterior (the anchor estimator, BLTM's distillation) cannot do when
// clean ratings are themselves uncertain.
//
// Fitting is EM: the E-step is the clean-class posterior
// r_k ∝ P(y=k|x) T_kỹ, the M-step an SGD pass of the clean model on the
// soft targets r and the closed-form T_kj ∝ Σ r_k [ỹ=j]. The likelihood is
// nearly flat along the amount of noise (a broader clean model explains
// the noisy ratings almost as well as more noise does), so EM moves T
// slowly from where it starts: the estimator runs EM from several starting
// diagonals and keeps the fit with the best held-out likelihood.
type Ordinal struct {
	k, d   int
	bu, bi []float64
	au     []float64 // per-user log scale
	p, q   []float64
	cut    []float64 // K−1 increasing cut points
	T      []float64 // K×K, row-major
	// Start is the starting diagonal of the fit kept.
	Start float64
	// Profile is the held-out log-likelihood (mean per rating) of the fit
	// from each start, in Starts order; nil with a single start.
	Profile []float64
}

// FitOrdinal fits the estimator to the (noisy) ratings in rows.
func FitOrdinal(cfg OrdinalConfig, users, items, k int, rows []Interaction, seed uint64) *Ordinal {
	cfg = cfg.withDefaults()
	if len(cfg.Starts) == 1 {
		return fitOrdinal(cfg, cfg.Starts[0], users, items, k, rows, seed)
	}
	shuffled := slices.Clone(rows)
	r := newRand(seed, 5)
	r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
	nHeld := max(1, int(cfg.HoldOut*float64(len(rows))))
	held, fitRows := shuffled[:nHeld], shuffled[nHeld:]
	var best *Ordinal
	bestLL := math.Inf(-1)
	profile := make([]float64, len(cfg.Starts))
	for n, start := range cfg.Starts {
		o := fitOrdinal(cfg, start, users, items, k, fitRows, seed)
		profile[n] = o.LogLik(held)
		if best == nil || profile[n] > bestLL {
			best, bestLL = o, profile[n]
		}
	}
	best.Profile = profile
	return best
}

// fitOrdinal runs EM from T with diagonal start.
func fitOrdinal(cfg OrdinalConfig, start float64, users, items, k int, rows []Interaction, seed uint64) *Ordinal {
	r := newRand(seed, 4)
	d := cfg.Dim
	o := &Ordinal{k: k, d: d, bu: make([]float64, users), bi: make([]float64, items), au: make([]float64, users),
		p: make([]float64, users*d), q: make([]float64, items*d), cut: make([]float64, k-1), T: make([]float64, k*k)}
	o.Start = start
	for j := range o.p {
		o.p[j] = r.NormFloat64() * 0.1
	}
	for j := range o.q {
		o.q[j] = r.NormFloat64() * 0.1
	}
	// Cut points at the logits of the empirical cumulative shares.
	counts := make([]float64, k)
	for _, x := range rows {
		counts[x.Rating-1]++
	}
	cum := 0.0
	for j := range o.cut {
		cum += counts[j] / float64(len(rows))
		c := math.Min(math.Max(cum, 1e-3), 1-1e-3)
		o.cut[j] = math.Log(c / (1 - c))
		if j > 0 && o.cut[j] <= o.cut[j-1] {
			o.cut[j] = o.cut[j-1] + 0.1
		}
	}
	// T starts at start on the diagonal.
	for a := range k {
		for b := range k {
			if a == b {
				o.T[a*k+b] = start
			} else {
				o.T[a*k+b] = (1 - start) / float64(k-1)
			}
		}
	}
	order := make([]int, len(rows))
	for n := range order {
		order[n] = n
	}
	pk := make([]float64, k)
	resp := make([]float64, k)
	acc := make([]float64, k*k)
	gcut := make([]float64, k-1)
	lr := cfg.LearningRate
	for epoch := range cfg.Epochs {
		r.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		clear(acc)
		for _, n := range order {
			x := rows[n]
			u, i, y := int(x.User), int(x.Item), x.Rating-1
			pu, qi := o.p[u*d:(u+1)*d], o.q[i*d:(i+1)*d]
			s := o.bu[u] + o.bi[i] + dot(pu, qi)
			g := math.Exp(o.au[u])
			o.probsScaled(s, g, pk)
			// E-step: posterior of the clean class.
			z := 0.0
			for c := range k {
				resp[c] = pk[c] * o.T[c*k+y]
				z += resp[c]
			}
			if z <= 0 {
				continue
			}
			for c := range k {
				resp[c] /= z
				acc[c*k+y] += resp[c]
			}
			// M-step for the clean model: one SGD step on Σ_c r_c log P_c.
			gs, ga := o.gradClean(s, g, resp, gcut)
			// Ascend the log-likelihood.
			o.bu[u] += lr * (gs - cfg.L2*o.bu[u])
			o.bi[i] += lr * (gs - cfg.L2*o.bi[i])
			for j := range d {
				pj, qj := pu[j], qi[j]
				pu[j] += lr * (gs*qj - cfg.L2*pj)
				qi[j] += lr * (gs*pj - cfg.L2*qj)
			}
			o.au[u] += cfg.ScaleRate * lr * (ga - cfg.L2*o.au[u])
			for j := range o.cut {
				o.cut[j] += 0.1 * lr * gcut[j]
			}
			for j := 1; j < len(o.cut); j++ {
				if o.cut[j] < o.cut[j-1]+1e-3 {
					o.cut[j] = o.cut[j-1] + 1e-3
				}
			}
		}
		if epoch+1 < cfg.WarmUp {
			continue
		}
		// M-step for T (a small pseudo-count keeps rows defined).
		for a := range k {
			row := acc[a*k : (a+1)*k]
			sum := 0.0
			for b := range k {
				sum += row[b] + 1e-3
			}
			for b := range k {
				o.T[a*k+b] = (row[b] + 1e-3) / sum
			}
		}
	}
	return o
}

// probsScaled writes the ordinal clean posterior at score s and scale g
// into pk: P(y ≤ c) = σ(g·(cut_c − s)).
func (o *Ordinal) probsScaled(s, g float64, pk []float64) {
	prev := 0.0
	for c := range o.k {
		f := 1.0
		if c < o.k-1 {
			f = sigmoid(g * (o.cut[c] - s))
		}
		pk[c] = math.Max(f-prev, 0)
		prev = f
	}
}

// gradClean returns the gradient of Σ_c r_c log P_c(s, g) with respect to
// s and to a = log g, and writes the gradient with respect to the cut
// points into gcut.
func (o *Ordinal) gradClean(s, g float64, resp, gcut []float64) (gs, ga float64) {
	k := o.k
	clear(gcut)
	for c := range k {
		if resp[c] == 0 {
			continue
		}
		fk, fk1 := 1.0, 0.0
		dk, dk1 := 0.0, 0.0 // σ' at the upper and lower cut
		zk, zk1 := 0.0, 0.0
		if c < k-1 {
			zk = g * (o.cut[c] - s)
			fk = sigmoid(zk)
			dk = fk * (1 - fk)
		}
		if c > 0 {
			zk1 = g * (o.cut[c-1] - s)
			fk1 = sigmoid(zk1)
			dk1 = fk1 * (1 - fk1)
		}
		pc := math.Max(fk-fk1, 1e-12)
		gs += resp[c] * -g * (dk - dk1) / pc
		ga += resp[c] * (dk*zk - dk1*zk1) / pc
		if c < k-1 {
			gcut[c] += resp[c] * g * dk / pc
		}
		if c > 0 {
			gcut[c-1] -= resp[c] * g * dk1 / pc
		}
	}
	return gs, ga
}

// LogLik is the mean log-likelihood of the (noisy) ratings in rows under
// the fitted model.
func (o *Ordinal) LogLik(rows []Interaction) float64 {
	k, d := o.k, o.d
	pk := make([]float64, k)
	ll := 0.0
	for _, x := range rows {
		u, i, y := int(x.User), int(x.Item), x.Rating-1
		s := o.bu[u] + o.bi[i] + dot(o.p[u*d:(u+1)*d], o.q[i*d:(i+1)*d])
		o.probsScaled(s, math.Exp(o.au[u]), pk)
		p := 0.0
		for c := range k {
			p += pk[c] * o.T[c*k+y]
		}
		ll += math.Log(math.Max(p, 1e-300))
	}
	return ll / float64(len(rows))
}
