package eval

import (
	"math"
)

// OrdinalConfig configures the ordinal estimator of the flip matrix.
type OrdinalConfig struct {
	// Dim is the embedding dimension of the clean model (default 16).
	Dim int
	// Epochs is the number of EM passes over the training ratings
	// (default 12).
	Epochs int
	// WarmUp is the number of first passes that fit the clean model with
	// the flip matrix held at its start (default 2).
	WarmUp int
	// LearningRate is the SGD step of the clean model (default 0.02).
	LearningRate float64
	// L2 is the weight decay of the embeddings (default 0.02).
	L2 float64
}

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
	return c
}

// Ordinal estimates a class-level flip matrix T for ratings 1..K by
// maximum likelihood of the noisy ratings under
//
//	P(ỹ | x) = Σ_k P(y = k | x) T_kỹ,
//
// where the clean model P(y | x) is a cumulative-logit (ordinal)
// regression on s(x) = b_u + c_i + p_u·q_i with K−1 increasing cut points.
// The ordinal model is unimodal in the rating scale, so it cannot take up
// mass that flip noise moves far from an interaction's typical rating
// (pairflip's K→1, the uniform floor of symmetric noise); the transition
// matrix must. That restriction of the clean class is what separates
// P(ỹ | y) from P(ỹ | Bayes label), which an unrestricted clean
// posterior (the anchor estimator, BLTM's distillation) cannot do when
// clean ratings are themselves uncertain. Fitting is EM: the E-step is the
// clean-class posterior r_k ∝ P(y=k|x) T_kỹ, the M-step an SGD pass of the
// clean model on the soft targets r and the closed-form T_kj ∝ Σ r_k [ỹ=j].
type Ordinal struct {
	k, d   int
	bu, bi []float64
	p, q   []float64
	cut    []float64 // K−1 increasing cut points
	T      []float64 // K×K, row-major
}

// FitOrdinal fits the estimator to the (noisy) ratings in rows.
func FitOrdinal(cfg OrdinalConfig, users, items, k int, rows []Interaction, seed uint64) *Ordinal {
	cfg = cfg.withDefaults()
	r := newRand(seed, 4)
	d := cfg.Dim
	o := &Ordinal{k: k, d: d, bu: make([]float64, users), bi: make([]float64, items),
		p: make([]float64, users*d), q: make([]float64, items*d), cut: make([]float64, k-1), T: make([]float64, k*k)}
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
	// T starts at 0.9 on the diagonal.
	for a := range k {
		for b := range k {
			if a == b {
				o.T[a*k+b] = 0.9
			} else {
				o.T[a*k+b] = 0.1 / float64(k-1)
			}
		}
	}
	order := make([]int, len(rows))
	for n := range order {
		order[n] = n
	}
	pk := make([]float64, k)
	dlogP := make([]float64, k) // d log P_k / d s
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
			o.probs(s, pk)
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
			gs := 0.0
			clear(gcut)
			for c := range k {
				if resp[c] == 0 {
					continue
				}
				fk, fk1 := 1.0, 0.0
				dk, dk1 := 0.0, 0.0
				if c < k-1 {
					fk = sigmoid(o.cut[c] - s)
					dk = fk * (1 - fk)
				}
				if c > 0 {
					fk1 = sigmoid(o.cut[c-1] - s)
					dk1 = fk1 * (1 - fk1)
				}
				pc := math.Max(fk-fk1, 1e-12)
				dlogP[c] = -(dk - dk1) / pc
				gs += resp[c] * dlogP[c]
				if c < k-1 {
					gcut[c] += resp[c] * dk / pc
				}
				if c > 0 {
					gcut[c-1] -= resp[c] * dk1 / pc
				}
			}
			// Ascend the log-likelihood.
			o.bu[u] += lr * (gs - cfg.L2*o.bu[u])
			o.bi[i] += lr * (gs - cfg.L2*o.bi[i])
			for j := range d {
				pj, qj := pu[j], qi[j]
				pu[j] += lr * (gs*qj - cfg.L2*pj)
				qi[j] += lr * (gs*pj - cfg.L2*qj)
			}
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

// probs writes the ordinal clean posterior at score s into pk.
func (o *Ordinal) probs(s float64, pk []float64) {
	prev := 0.0
	for c := range o.k {
		f := 1.0
		if c < o.k-1 {
			f = sigmoid(o.cut[c] - s)
		}
		pk[c] = math.Max(f-prev, 0)
		prev = f
	}
}
