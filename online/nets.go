package online

import "math"

// The classifier f and the transition network T̂ both read the interaction
// vector z = p_u ⊙ q_i (length d).
//
//	f(x)     = softmax(W z + b)                 W: K×d, b: K
//	T̂(x)_j   = softmax_k(A_jk · z + C_jk)       A: K·K×d, C: K·K (row j = clean class)
//
// Every softmax block has a reference class (column 0) whose logit is 0;
// row 0 of W and column 0 of each row of A stay zero (refLogits).
//
// T̂ is a linear head on z rather than an MLP on [p_u; q_i]: it costs K²·d
// multiply-adds per pair (128 at K=2, d=32), shares the representation the
// classifier already computes, and still depends on the instance. C starts
// at log-odds that put transitionInitDiag on the diagonal, so T̂ starts near
// the identity.

// transitionInitDiag is the initial diagonal of T̂.
const transitionInitDiag = 0.9

// probFloor keeps probabilities away from 0 inside logarithms.
const probFloor = 1e-12

// The vector loops below work in blocks of four, each block a subslice
// of capacity 4 indexed by constants: one bounds check per block rather
// than one per element.

// hadamard writes p⊙q into z.
func hadamard(z, p, q []float64) {
	q, z = q[:len(p)], z[:len(p)]
	i := 0
	for ; i+4 <= len(p); i += 4 {
		p4, q4, z4 := p[i:i+4:i+4], q[i:i+4:i+4], z[i:i+4:i+4]
		z4[0] = p4[0] * q4[0]
		z4[1] = p4[1] * q4[1]
		z4[2] = p4[2] * q4[2]
		z4[3] = p4[3] * q4[3]
	}
	for ; i < len(p); i++ {
		z[i] = p[i] * q[i]
	}
}

// hadamardDot writes p⊙q into z and returns w·z, summed as dot sums it:
// hadamard and dot in one pass (its whole blocks in kernels.go).
func hadamardDot(z, p, q, w []float64) float64 {
	n := len(p)
	q, z, w = q[:n], z[:n], w[:n]
	var s [4]float64
	hadamardDotBlocks(z, p, q, w, &s)
	for i := n &^ 3; i < n; i++ {
		z[i] = p[i] * q[i]
		s[0] += w[i] * z[i]
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

// hadamardDot3 is hadamardDot for three vectors w1, w2, w3 at once.
func hadamardDot3(z, p, q, w1, w2, w3 []float64) (d1, d2, d3 float64) {
	n := len(p)
	q, z, w1, w2, w3 = q[:n], z[:n], w1[:n], w2[:n], w3[:n]
	var s [12]float64
	hadamardDot3Blocks(z, p, q, w1, w2, w3, &s)
	for i := n &^ 3; i < n; i++ {
		z[i] = p[i] * q[i]
		s[0] += w1[i] * z[i]
		s[4] += w2[i] * z[i]
		s[8] += w3[i] * z[i]
	}
	return (s[0] + s[1]) + (s[2] + s[3]), (s[4] + s[5]) + (s[6] + s[7]), (s[8] + s[9]) + (s[10] + s[11])
}

// dot is a·b, unrolled four ways with independent accumulators.
func dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		a4, b4 := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += a4[0] * b4[0]
		s1 += a4[1] * b4[1]
		s2 += a4[2] * b4[2]
		s3 += a4[3] * b4[3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// softmax writes softmax(x) into dst (which may alias x).
func softmax(dst, x []float64) {
	if len(x) == 2 { // the logistic function: one exponential
		e := exp(-math.Abs(x[1] - x[0]))
		hi, lo := 1/(1+e), e/(1+e)
		if x[1] >= x[0] {
			dst[0], dst[1] = lo, hi
		} else {
			dst[0], dst[1] = hi, lo
		}
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	s := 0.0
	for i, v := range x {
		e := exp(v - m)
		dst[i] = e
		s += e
	}
	for i := range dst[:len(x)] {
		dst[i] /= s
	}
}

// refLogits writes the logits of one softmax block into out: out[0] = 0
// (the reference class) and out[c] = W_c · z + b_c for c >= 1. Row 0 of W
// and b[0] are not parameters; they stay zero. With the reference class a
// K-way softmax has K−1 free rows, as in multinomial logistic regression,
// and a binary head costs one dot product.
func refLogits(out, W, b, z []float64) {
	d := len(z)
	out[0] = 0
	for c := 1; c < len(out); c++ {
		out[c] = dot(W[c*d:(c+1)*d], z) + b[c]
	}
}

// classForward writes f = softmax(W z + b) into f.
func classForward(f, W, b, z []float64) {
	refLogits(f, W, b, z)
	softmax(f, f)
}

// observedProb is g = Σ_k f_k T_ky, the probability of observing y.
func observedProb(f, t []float64, k, y int) float64 {
	g := 0.0
	for j := 0; j < k; j++ {
		g += f[j] * t[j*k+y]
	}
	return g
}

// pClean is the posterior that the observed label y is the clean one:
// f_y T_yy / Σ_k f_k T_ky.
func pClean(f, t []float64, k, y int) float64 {
	g := observedProb(f, t, k, y)
	if g < probFloor {
		return 0
	}
	return f[y] * t[y*k+y] / g
}

// classGrad writes into g the gradient, with respect to the classifier
// logits, of
//
//	L = −log(T̂ᵀ f)_y  +  lw · (−log f_ystar)      (second term only if ystar >= 0)
//
// (classLoss) with T̂ held constant. lw is λ·w.
//
// d/dlogit_j of the first term is f_j − f_j T_jy / Σ_k f_k T_ky: the
// classifier is pulled toward the posterior of the clean label, not toward
// the noisy one. With T̂ = I it is the ordinary cross-entropy gradient.
func classGrad(g, f, t []float64, k, y, ystar int, lw float64) {
	obs := observedProb(f, t, k, y)
	if obs < probFloor {
		obs = probFloor
	}
	for j := 0; j < k; j++ {
		g[j] = f[j] - f[j]*t[j*k+y]/obs
	}
	if ystar >= 0 && lw > 0 {
		for j := 0; j < k; j++ {
			g[j] += lw * f[j]
		}
		g[ystar] -= lw
	}
}

// classLoss is the loss whose gradient classGrad computes.
func classLoss(f, t []float64, k, y, ystar int, lw float64) float64 {
	loss := -math.Log(math.Max(observedProb(f, t, k, y), probFloor))
	if ystar >= 0 && lw > 0 {
		loss -= lw * math.Log(math.Max(f[ystar], probFloor))
	}
	return loss
}

// transGrad writes into g (K values) the gradient of −log T̂_{ystar,y}
// with respect to row ystar of the transition logits.
func transGrad(g, t []float64, k, ystar, y int) {
	copy(g, t[ystar*k:(ystar+1)*k])
	g[y]--
}

// clipNorm scales v so that its L2 norm is at most c, and returns the
// squared norm after clipping.
func clipNorm(v []float64, c float64) float64 {
	return clipTo(v, dot(v, v), c)
}

// clipTo is clipNorm for a v whose squared norm n2 is known.
func clipTo(v []float64, n2, c float64) float64 {
	if n2 > c*c {
		s := c / math.Sqrt(n2)
		for i := range v {
			v[i] *= s
		}
		return c * c
	}
	return n2
}

// finite3 is finite(a, b, c) without building the variadic list: the same
// sum, in the same order.
func finite3(a, b, c []float64) bool {
	s := 0.0
	for _, e := range a {
		s += e
	}
	for _, e := range b {
		s += e
	}
	for _, e := range c {
		s += e
	}
	return !math.IsNaN(s) && !math.IsInf(s, 0)
}

// finite reports whether every element of every v is finite. A NaN or an
// Inf anywhere makes the sum NaN or Inf; a sum that overflows although
// every element is finite is reported too, which is as much a failure.
func finite(v ...[]float64) bool {
	s := 0.0
	for _, x := range v {
		for _, e := range x {
			s += e
		}
	}
	return !math.IsNaN(s) && !math.IsInf(s, 0)
}
