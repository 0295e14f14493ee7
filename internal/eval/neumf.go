package eval

import (
	"fmt"
	"math"
	"slices"

	blasapi "gonum.org/v1/gonum/blas"
	blasgo "gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/floats"
)

// NeuMF is a trained neural matrix factorisation model (He et al., "Neural
// Collaborative Filtering", WWW 2017, trained end to end without
// pre-training: the papers' NeuMF-end). Two towers share the output:
//
//	GMF: p_u ⊙ q_i                       (Dim each)
//	MLP: z_0 = [m_u; n_i], z_l = ReLU(W_l z_{l−1} + c_l)  (Dim each side, Hidden layers)
//	score = h_G · (p_u ⊙ q_i) + h_M · z_L + b
//
// The matrix-vector products go through gonum's BLAS (its assembly
// kernels): training spends nearly all its time in them.
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

	// Scoring state (Score): the item side of the first layer, W_1[:, d:] n_i
	// per item, valid while itemsFresh, and the activations of a block of
	// items.
	itemPart   []float64
	itemsFresh bool
	block      [][]float64 // block[l]: scoreBlock × sizes[l+1], the activations z_{l+1} of a block of items
	userPart   []float64   // c_1 + W_1[:, :d] m_u
	hp         []float64   // h_G ⊙ p_u

	// Training state: the step size, weight decay, per-row accumulators of
	// the squared gradients (embedding rows; the rows of each W_l with
	// their bias) and the gradient and activation buffers.
	lr, l2                 float64
	accP, accQ, accM, accN []float64
	accW                   [][]float64
	gp, gq, gh             []float64   // the gradients of p_u, q_i and h_G
	z, a                   [][]float64 // activations z_l (z[0] = input) and pre-activations a_l
	da                     [][]float64 // d loss / d a_l
	dz0                    []float64   // d loss / d z_0
}

// blas is gonum's pure-Go BLAS (assembly kernels on amd64 and arm64),
// called directly so that no global BLAS choice changes the arithmetic.
var blas = blasgo.Implementation{}

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
		gp: make([]float64, d), gq: make([]float64, d), gh: make([]float64, d),
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
	for l, w := range n.w {
		in, out := n.sizes[l], n.sizes[l+1]
		a, z := n.a[l], n.z[l+1]
		copy(a, n.c[l])
		blas.Dgemv(blasapi.NoTrans, out, in, 1, w, in, n.z[l], 1, 1, a, 1)
		for j, v := range a {
			z[j] = max(v, 0)
		}
	}
	s := n.b
	for k := range d {
		s += n.h[k] * pu[k] * qi[k]
	}
	return s + floats.Dot(n.h[d:], n.z[len(n.z)-1])
}

func (n *NeuMF) score(u, i int32) float64 { return n.forward(u, i) }

// step takes one SGD step on the loss w·BCE(σ(s), y) + l2/2·(|p_u|² +
// |q_i|² + |m_u|² + |n_i|²) of (u, i): per-row adaptive steps for the
// embedding rows and for each unit's incoming weights and bias, a tenth
// of the base step for h and b (as GMF). Every gradient is taken at the
// parameters before the step: each W_l moves only after the gradient
// below it has gone through it.
//
// A unit's row of W_l gets the gradient da_j·z_{l−1} and its bias da_j, so
// the row's squared gradient is da_j²·(|z_{l−1}|² + 1) and its update an
// axpy: the weight gradient is never stored, and a unit that is off for
// the sample (da_j = 0) is left alone.
func (n *NeuMF) step(u, i int32, y, w float64) {
	d := n.d
	s := n.forward(u, i)
	n.itemsFresh = false
	pu, qi := n.p[int(u)*d:int(u+1)*d], n.q[int(i)*d:int(i+1)*d]
	mu, ni := n.mu[int(u)*d:int(u+1)*d], n.ni[int(i)*d:int(i+1)*d]
	e := w * (sigmoid(s) - y) // d loss / d s
	for k := range d {
		n.gp[k] = e*n.h[k]*qi[k] + n.l2*pu[k]
		n.gq[k] = e*n.h[k]*pu[k] + n.l2*qi[k]
		n.gh[k] = e * pu[k] * qi[k]
	}
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
		// The gradient of the layer's input, through W_l before it moves:
		// into the layer below, or into the embeddings.
		below := n.dz0
		if l > 0 {
			below = n.da[l-1]
		}
		clear(below)
		zl := n.z[l]
		sq := (floats.Dot(zl, zl) + 1) / float64(in+1)
		for j, dj := range n.da[l] {
			if dj == 0 {
				continue // a unit off for this sample: no gradient
			}
			row := n.w[l][j*in : (j+1)*in]
			floats.AddScaled(below, dj, row)
			acc := &n.accW[l][j]
			*acc += dj * dj * sq
			lr := n.lr / math.Sqrt(1+*acc)
			floats.AddScaled(row, -lr*dj, zl)
			n.c[l][j] -= lr * dj
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
		n.dz0[k] += n.l2 * mu[k]
		n.dz0[d+k] += n.l2 * ni[k]
	}
	adaptRow(pu, n.gp, &n.accP[u], n.lr)
	adaptRow(qi, n.gq, &n.accQ[i], n.lr)
	adaptRow(mu, n.dz0[:d], &n.accM[u], n.lr)
	adaptRow(ni, n.dz0[d:], &n.accN[i], n.lr)
	floats.AddScaled(n.h[:d], -0.1*n.lr, n.gh)
	floats.AddScaled(n.h[d:], -0.1*n.lr*e, n.z[len(n.z)-1])
	n.b -= 0.1 * n.lr * e
}

// adaptRow takes the per-row adaptive step of row with gradient grad:
// acc, the running sum of the row's mean squared gradient, grows by
// |grad|²/len(grad), and the row moves by −lr/√(1+acc)·grad.
func adaptRow(row, grad []float64, acc *float64, lr float64) {
	*acc += floats.Dot(grad, grad) / float64(len(grad))
	floats.AddScaled(row, -lr/math.Sqrt(1+*acc), grad)
}

// scoreBlock is the number of items whose activations Score computes
// together: a block's activations stay in the L1 cache between layers.
const scoreBlock = 64

// Score writes the score of every item for user u into dst. It keeps its
// buffers in n: one goroutine at a time.
func (n *NeuMF) Score(u int32, dst []float64) {
	d, in := n.d, n.sizes[0]
	h1 := n.sizes[1]
	items := len(n.q) / d
	if !n.itemsFresh {
		// W_1 [m_u; n_i] = W_1[:, :d] m_u + W_1[:, d:] n_i: the item side
		// once per parameter state, column j of the items × h1 matrix
		// from row j of W_1.
		n.itemPart = slices.Grow(n.itemPart[:0], items*h1)[:items*h1]
		for j := range h1 {
			blas.Dgemv(blasapi.NoTrans, items, d, 1, n.ni, d, n.w[0][j*in+d:(j+1)*in], 1, 0, n.itemPart[j:], h1)
		}
		n.itemsFresh = true
	}
	if n.block == nil {
		n.userPart, n.hp = make([]float64, h1), make([]float64, d)
		for l := 1; l < len(n.sizes); l++ {
			n.block = append(n.block, make([]float64, scoreBlock*n.sizes[l]))
		}
	}
	userPart := n.userPart
	copy(userPart, n.c[0])
	blas.Dgemv(blasapi.NoTrans, h1, d, 1, n.w[0], in, n.mu[int(u)*d:int(u+1)*d], 1, 1, userPart, 1)
	pu := n.p[int(u)*d : int(u+1)*d]
	for k := range d {
		n.hp[k] = n.h[k] * pu[k]
	}
	for i := range dst {
		dst[i] = n.b
	}
	blas.Dgemv(blasapi.NoTrans, items, d, 1, n.q, d, n.hp, 1, 1, dst, 1)
	top := n.sizes[len(n.sizes)-1]
	for lo := 0; lo < items; lo += scoreBlock {
		m := min(scoreBlock, items-lo)
		z := n.block[0][:m*h1]
		addRows(z, n.itemPart[lo*h1:(lo+m)*h1], userPart)
		// Each further layer over the block: unit j's column is the
		// block's activations times row j of W_l.
		for l := 1; l < len(n.w); l++ {
			in, out := n.sizes[l], n.sizes[l+1]
			next := n.block[l][:m*out]
			for j := range out {
				blas.Dgemv(blasapi.NoTrans, m, in, 1, z, in, n.w[l][j*in:(j+1)*in], 1, 0, next[j:], out)
			}
			addRows(next, next, n.c[l])
			z = next
		}
		blas.Dgemv(blasapi.NoTrans, m, top, 1, z, top, n.h[d:], 1, 1, dst[lo:lo+m], 1)
	}
}

// addRows sets dst to the matrix x (rows of len(row)) plus row on each
// row, the negative results set to 0: a layer's bias and ReLU. The ReLU
// clears the bits of a negative number instead of branching on its sign,
// which a catalogue of activations makes unpredictable.
func addRows(dst, x, row []float64) {
	for lo := 0; lo < len(x); lo += len(row) {
		xr, dr := x[lo:lo+len(row)], dst[lo:lo+len(row)]
		for k, v := range row {
			b := math.Float64bits(v + xr[k])
			dr[k] = math.Float64frombits(b &^ uint64(int64(b)>>63))
		}
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
