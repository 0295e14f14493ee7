package eval

import "math"

// neumfReference is NeuMF's training step and scorer as they were before
// the step was fused (commit dcc0585): the whole gradient into a
// neumfGrad, then the updates, with plain Go loops. It is the baseline of
// BenchmarkNeuMFStep and BenchmarkNeuMFScore and the step that
// TestNeuMFStepMatchesReference holds the fused one to. It works on the
// parameters and buffers of n.
type neumfReference struct {
	n    *NeuMF
	grad *neumfGrad
}

// neumfGrad holds the gradient of one sample's loss with respect to the
// parameters it touches.
type neumfGrad struct {
	p, q, mu, ni []float64
	w, c         [][]float64
	h            []float64
	b            float64
}

func newNeuMFReference(n *NeuMF) *neumfReference {
	d := n.d
	g := &neumfGrad{p: make([]float64, d), q: make([]float64, d), mu: make([]float64, d), ni: make([]float64, d), h: make([]float64, len(n.h))}
	for l := range n.w {
		g.w, g.c = append(g.w, make([]float64, len(n.w[l]))), append(g.c, make([]float64, len(n.c[l])))
	}
	return &neumfReference{n: n, grad: g}
}

func (r *neumfReference) forward(u, i int32) float64 {
	n := r.n
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

// lossGrad writes the gradient of the loss w·BCE(σ(s), y) + l2/2·(|p_u|² +
// |q_i|² + |m_u|² + |n_i|²) of (u, i) (neumfLoss) into r.grad.
func (r *neumfReference) lossGrad(u, i int32, y, w float64) {
	n, g := r.n, r.grad
	d := n.d
	s := r.forward(u, i)
	pu, qi := n.p[int(u)*d:int(u+1)*d], n.q[int(i)*d:int(i+1)*d]
	mu, ni := n.mu[int(u)*d:int(u+1)*d], n.ni[int(i)*d:int(i+1)*d]
	e := w * (sigmoid(s) - y)
	for k := range d {
		g.p[k] = e*n.h[k]*qi[k] + n.l2*pu[k]
		g.q[k] = e*n.h[k]*pu[k] + n.l2*qi[k]
		g.h[k] = e * pu[k] * qi[k]
	}
	for k, v := range n.z[len(n.z)-1] {
		g.h[d+k] = e * v
	}
	g.b = e
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
}

func (r *neumfReference) step(u, i int32, y, w float64) {
	r.lossGrad(u, i, y, w)
	n, g := r.n, r.grad
	n.itemsFresh = false
	d := n.d
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
				continue
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

// Score is the scorer of commit dcc0585: the item side of the first layer
// cached, the rest per item with plain Go dot products.
func (r *neumfReference) Score(u int32, dst []float64) {
	n := r.n
	d, in := n.d, n.sizes[0]
	h1 := n.sizes[1]
	if !n.itemsFresh {
		items := len(n.q) / d
		n.itemPart = make([]float64, items*h1)
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
