package eval

import (
	"fmt"
	"math"
	"slices"
)

// NeuMF is a trained neural matrix factorisation model (He et al., "Neural
// Collaborative Filtering", WWW 2017, trained end to end without
// pre-training: the papers' NeuMF-end). Two towers share the output:
//
//	GMF: p_u ⊙ q_i                       (Dim each)
//	MLP: z_0 = [m_u; n_i], z_l = ReLU(W_l z_{l−1} + c_l)  (Dim each side, Hidden layers)
//	score = h_G · (p_u ⊙ q_i) + h_M · z_L + b
type NeuMF struct {
	d      int   // GMF embedding size, and MLP embedding size per side
	sizes  []int // MLP layer sizes: sizes[0] = 2d, then Hidden
	p, q   []float64
	mu, ni []float64   // MLP embeddings of users and items
	w      [][]float64 // w[l]: sizes[l+1] × sizes[l], row-major
	c      [][]float64 // c[l]: sizes[l+1] biases
	h      []float64   // d + sizes[last]
	b      float64
	// Epochs is the epoch whose parameters were kept; Valid the
	// validation Recall@20 there.
	Epochs int
	Valid  float64

	// Scoring cache: the item side of the first layer, W_1[:, d:] n_i per
	// item, valid while itemsFresh.
	itemPart   []float64
	itemsFresh bool

	// Training state: the step size, weight decay, per-row accumulators of
	// the squared gradients (embedding rows; the rows of each W_l with
	// their bias) and the gradient and activation buffers.
	lr, l2                 float64
	accP, accQ, accM, accN []float64
	accW                   [][]float64
	grad                   *neumfGrad
	z, a                   [][]float64 // activations z_l (z[0] = input) and pre-activations a_l
	da                     [][]float64 // d loss / d a_l
	dz0                    []float64   // d loss / d z_0
}

// neumfGrad holds the gradient of one sample's loss with respect to the
// parameters it touches.
type neumfGrad struct {
	p, q, mu, ni []float64
	w, c         [][]float64
	h            []float64
	b            float64
}

// TrainNeuMF trains a NeuMF as TrainGMF trains a GMF: the same
// negatives, T-CE drop, weights, step sizes and early stopping; the MLP
// tower's hidden layers are cfg.Hidden.
func TrainNeuMF(cfg GMFConfig, users, items int, train []Interaction, weights []float64, valid []Interaction, seed uint64) (*NeuMF, error) {
	cfg = cfg.withDefaults()
	if weights != nil && len(weights) != len(train) {
		return nil, fmt.Errorf("train neumf: %d weights for %d interactions", len(weights), len(train))
	}
	for _, h := range cfg.Hidden {
		if h < 1 {
			return nil, fmt.Errorf("train neumf: hidden layer sizes %v: each must be positive", cfg.Hidden)
		}
	}
	r := newRand(seed, 4)
	n := newNeuMF(cfg, users, items, r.NormFloat64)
	best, epochs, v := fit(cfg, n, users, items, train, weights, valid, r)
	kept := best.(*NeuMF)
	kept.Epochs, kept.Valid = epochs, v
	return kept, nil
}

// newNeuMF initialises a NeuMF from the standard normal draws of norm:
// embeddings N(0, 0.1²), W_l He-normal N(0, 2/fan_in), biases 0, h_G = 1
// (as GMF's h) and h_M N(0, 1/|z_L|).
func newNeuMF(cfg GMFConfig, users, items int, norm func() float64) *NeuMF {
	d := cfg.Dim
	sizes := append([]int{2 * d}, cfg.Hidden...)
	layers := len(sizes) - 1
	last := sizes[layers]
	n := &NeuMF{d: d, sizes: sizes, p: make([]float64, users*d), q: make([]float64, items*d),
		mu: make([]float64, users*d), ni: make([]float64, items*d), h: make([]float64, d+last),
		lr: cfg.LearningRate, l2: cfg.L2, dz0: make([]float64, 2*d),
		accP: make([]float64, users), accQ: make([]float64, items), accM: make([]float64, users), accN: make([]float64, items),
		grad: &neumfGrad{p: make([]float64, d), q: make([]float64, d), mu: make([]float64, d), ni: make([]float64, d), h: make([]float64, d+last)},
	}
	for _, emb := range [][]float64{n.p, n.q, n.mu, n.ni} {
		for k := range emb {
			emb[k] = norm() * 0.1
		}
	}
	n.z = append(n.z, make([]float64, sizes[0]))
	for l := range layers {
		in, out := sizes[l], sizes[l+1]
		w := make([]float64, out*in)
		sd := math.Sqrt(2 / float64(in))
		for k := range w {
			w[k] = norm() * sd
		}
		n.w, n.c = append(n.w, w), append(n.c, make([]float64, out))
		n.accW = append(n.accW, make([]float64, out))
		n.grad.w, n.grad.c = append(n.grad.w, make([]float64, out*in)), append(n.grad.c, make([]float64, out))
		n.z, n.a, n.da = append(n.z, make([]float64, out)), append(n.a, make([]float64, out)), append(n.da, make([]float64, out))
	}
	for k := range d {
		n.h[k] = 1
	}
	for k := d; k < d+last; k++ {
		n.h[k] = norm() / math.Sqrt(float64(last))
	}
	return n
}

// forward computes the activations of (u, i) into n.z and n.a and returns
// the score.
func (n *NeuMF) forward(u, i int32) float64 {
	d := n.d
	pu, qi := n.p[int(u)*d:int(u+1)*d], n.q[int(i)*d:int(i+1)*d]
	copy(n.z[0][:d], n.mu[int(u)*d:int(u+1)*d])
	copy(n.z[0][d:], n.ni[int(i)*d:int(i+1)*d])
	for l := range n.w {
		in := n.sizes[l]
		for j := range n.a[l] {
			a := n.c[l][j] + dot(n.w[l][j*in:(j+1)*in], n.z[l])
			n.a[l][j] = a
			n.z[l+1][j] = max(a, 0)
		}
	}
	s := n.b
	for k := range d {
		s += n.h[k] * pu[k] * qi[k]
	}
	return s + dot(n.h[d:], n.z[len(n.z)-1])
}

func (n *NeuMF) score(u, i int32) float64 { return n.forward(u, i) }

// lossGrad returns the loss w·BCE(σ(s), y) + l2/2·(|p_u|² + |q_i|² + |m_u|²
// + |n_i|²) of (u, i) and writes its gradient into n.grad.
func (n *NeuMF) lossGrad(u, i int32, y, w float64) float64 {
	d, g := n.d, n.grad
	s := n.forward(u, i)
	pu, qi := n.p[int(u)*d:int(u+1)*d], n.q[int(i)*d:int(i+1)*d]
	mu, ni := n.mu[int(u)*d:int(u+1)*d], n.ni[int(i)*d:int(i+1)*d]
	loss := w * (softplus(s) - y*s)
	e := w * (sigmoid(s) - y) // d loss / d s
	for k := range d {
		loss += n.l2 / 2 * (pu[k]*pu[k] + qi[k]*qi[k] + mu[k]*mu[k] + ni[k]*ni[k])
		g.p[k] = e*n.h[k]*qi[k] + n.l2*pu[k]
		g.q[k] = e*n.h[k]*pu[k] + n.l2*qi[k]
		g.h[k] = e * pu[k] * qi[k]
	}
	top := n.z[len(n.z)-1]
	for k, v := range top {
		g.h[d+k] = e * v
	}
	g.b = e
	// Back through the tower: da_L = e·h_M ⊙ [a_L > 0], then
	// dW_l = da_l z_{l−1}ᵀ, dc_l = da_l, da_{l−1} = (W_lᵀ da_l) ⊙ [a_{l−1} > 0].
	last := len(n.w) - 1
	for j, a := range n.a[last] {
		n.da[last][j] = 0
		if a > 0 {
			n.da[last][j] = e * n.h[d+j]
		}
	}
	for l := last; l >= 0; l-- {
		in := n.sizes[l]
		for j, dj := range n.da[l] {
			g.c[l][j] = dj
			row := g.w[l][j*in : (j+1)*in]
			for k, zk := range n.z[l] {
				row[k] = dj * zk
			}
		}
		// The gradient of the layer's input: into the layer below, or into
		// the embeddings.
		below := n.dz0
		if l > 0 {
			below = n.da[l-1]
		}
		clear(below)
		for j, dj := range n.da[l] {
			if dj == 0 {
				continue
			}
			for k, wk := range n.w[l][j*in : (j+1)*in] {
				below[k] += dj * wk
			}
		}
		if l > 0 {
			for k, a := range n.a[l-1] {
				if a <= 0 {
					below[k] = 0
				}
			}
		}
	}
	for k := range d {
		g.mu[k] = n.dz0[k] + n.l2*mu[k]
		g.ni[k] = n.dz0[d+k] + n.l2*ni[k]
	}
	return loss
}

// step takes one SGD step on the loss of (u, i): per-row adaptive steps
// for the embedding rows and for each unit's incoming weights and bias, a
// tenth of the base step for h and b (as GMF).
func (n *NeuMF) step(u, i int32, y, w float64) {
	n.lossGrad(u, i, y, w)
	n.itemsFresh = false
	d, g := n.d, n.grad
	adapt := func(acc *float64, grad ...[]float64) float64 {
		s, m := 0.0, 0
		for _, v := range grad {
			for _, x := range v {
				s += x * x
			}
			m += len(v)
		}
		*acc += s / float64(m)
		return n.lr / math.Sqrt(1+*acc)
	}
	update := func(dst, grad []float64, lr float64) {
		for k, x := range grad {
			dst[k] -= lr * x
		}
	}
	update(n.p[int(u)*d:int(u+1)*d], g.p, adapt(&n.accP[u], g.p))
	update(n.q[int(i)*d:int(i+1)*d], g.q, adapt(&n.accQ[i], g.q))
	update(n.mu[int(u)*d:int(u+1)*d], g.mu, adapt(&n.accM[u], g.mu))
	update(n.ni[int(i)*d:int(i+1)*d], g.ni, adapt(&n.accN[i], g.ni))
	for l := range n.w {
		in := n.sizes[l]
		for j, dj := range g.c[l] {
			if dj == 0 {
				continue // a unit off for this sample: no gradient
			}
			row := g.w[l][j*in : (j+1)*in]
			lr := adapt(&n.accW[l][j], row, g.c[l][j:j+1])
			update(n.w[l][j*in:(j+1)*in], row, lr)
			n.c[l][j] -= lr * dj
		}
	}
	update(n.h, g.h, 0.1*n.lr)
	n.b -= 0.1 * n.lr * g.b
}

// Score writes the score of every item for user u into dst.
func (n *NeuMF) Score(u int32, dst []float64) {
	d, in := n.d, n.sizes[0]
	h1 := n.sizes[1]
	if !n.itemsFresh {
		// W_1 [m_u; n_i] = W_1[:, :d] m_u + W_1[:, d:] n_i: the item side
		// once per parameter state.
		items := len(n.q) / d
		n.itemPart = slices.Grow(n.itemPart[:0], items*h1)[:items*h1]
		for i := range items {
			ni := n.ni[i*d : (i+1)*d]
			for j := range h1 {
				n.itemPart[i*h1+j] = dot(n.w[0][j*in+d:(j+1)*in], ni)
			}
		}
		n.itemsFresh = true
	}
	userPart := make([]float64, h1)
	mu := n.mu[int(u)*d : int(u+1)*d]
	for j := range h1 {
		userPart[j] = n.c[0][j] + dot(n.w[0][j*in:j*in+d], mu)
	}
	pu := n.p[int(u)*d : int(u+1)*d]
	hp := make([]float64, d)
	for k := range d {
		hp[k] = n.h[k] * pu[k]
	}
	// z buffers of its own: Score does not touch the training buffers.
	z := make([][]float64, len(n.sizes))
	for l := 1; l < len(n.sizes); l++ {
		z[l] = make([]float64, n.sizes[l])
	}
	for i := range dst {
		for j := range h1 {
			z[1][j] = max(userPart[j]+n.itemPart[i*h1+j], 0)
		}
		for l := 1; l < len(n.w); l++ {
			in := n.sizes[l]
			for j := range z[l+1] {
				z[l+1][j] = max(n.c[l][j]+dot(n.w[l][j*in:(j+1)*in], z[l]), 0)
			}
		}
		dst[i] = n.b + dot(hp, n.q[i*d:(i+1)*d]) + dot(n.h[d:], z[len(z)-1])
	}
}

// frozen returns a copy of the parameters, without the training state.
func (n *NeuMF) frozen() pointwise {
	c := &NeuMF{d: n.d, sizes: n.sizes, p: slices.Clone(n.p), q: slices.Clone(n.q), mu: slices.Clone(n.mu), ni: slices.Clone(n.ni),
		h: slices.Clone(n.h), b: n.b}
	for l := range n.w {
		c.w, c.c = append(c.w, slices.Clone(n.w[l])), append(c.c, slices.Clone(n.c[l]))
	}
	// score (forward) needs activation buffers; a frozen copy never steps.
	c.z = append(c.z, make([]float64, n.sizes[0]))
	for l := 1; l < len(n.sizes); l++ {
		c.z, c.a = append(c.z, make([]float64, n.sizes[l])), append(c.a, make([]float64, n.sizes[l]))
	}
	return c
}
