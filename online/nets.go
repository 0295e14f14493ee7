package online

import "math"

// The classifier f and the transition network T̂ both read the interaction
// vector z = p_u ⊙ q_i (length d).
//
//	f(x)     = softmax(W z + b)                 W: K×d, b: K
//	T̂(x)_j   = softmax_k(A_jk · z + C_jk)       A: K·K×d, C: K·K (row j = clean class)
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

// hadamard writes p⊙q into z and returns p·q.
func hadamard(z, p, q []float64) float64 {
	q = q[:len(p)]
	z = z[:len(p)]
	s := 0.0
	for i, v := range p {
		z[i] = v * q[i]
		s += z[i]
	}
	return s
}

// dot is a·b, unrolled four ways with independent accumulators.
func dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// softmax writes softmax(x) into dst (which may alias x).
func softmax(dst, x []float64) {
	if len(x) == 2 { // the logistic function: one exponential
		e := math.Exp(-math.Abs(x[1] - x[0]))
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
		e := math.Exp(v - m)
		dst[i] = e
		s += e
	}
	for i := range dst[:len(x)] {
		dst[i] /= s
	}
}

// linear writes W z + b into out (len(out) rows of W, each len(z) long).
func linear(out, W, b, z []float64) {
	d := len(z)
	for k := range out {
		out[k] = dot(W[k*d:(k+1)*d], z) + b[k]
	}
}

// classForward writes f = softmax(W z + b) into f.
func classForward(f, W, b, z []float64) {
	linear(f, W, b, z)
	softmax(f, f)
}

// transitionForward writes T̂ (K×K, row-major) into t.
func transitionForward(t, A, C, z []float64, k int) {
	linear(t, A, C, z)
	for j := 0; j < k; j++ {
		softmax(t[j*k:(j+1)*k], t[j*k:(j+1)*k])
	}
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
// with T̂ held constant, and returns L. lw is λ·w.
//
// d/dlogit_j of the first term is f_j − f_j T_jy / Σ_k f_k T_ky: the
// classifier is pulled toward the posterior of the clean label, not toward
// the noisy one. With T̂ = I it is the ordinary cross-entropy gradient.
func classGrad(g, f, t []float64, k, y, ystar int, lw float64) float64 {
	obs := observedProb(f, t, k, y)
	if obs < probFloor {
		obs = probFloor
	}
	loss := -math.Log(obs)
	for j := 0; j < k; j++ {
		g[j] = f[j] - f[j]*t[j*k+y]/obs
	}
	if ystar >= 0 && lw > 0 {
		loss += -lw * math.Log(math.Max(f[ystar], probFloor))
		for j := 0; j < k; j++ {
			g[j] += lw * f[j]
		}
		g[ystar] -= lw
	}
	return loss
}

// transGrad writes into g (K values) the gradient of −log T̂_{ystar,y} with
// respect to row ystar of the transition logits, and returns the loss.
func transGrad(g, t []float64, k, ystar, y int) float64 {
	row := t[ystar*k : (ystar+1)*k]
	for j, v := range row {
		g[j] = v
	}
	g[y]--
	return -math.Log(math.Max(row[y], probFloor))
}

// clipNorm scales v so that its L2 norm is at most c, and returns the
// squared norm after clipping.
func clipNorm(v []float64, c float64) float64 {
	n2 := dot(v, v)
	if n2 > c*c {
		s := c / math.Sqrt(n2)
		for i := range v {
			v[i] *= s
		}
		return c * c
	}
	return n2
}

// axpy does y += a·x.
func axpy(y []float64, a float64, x []float64) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += a * x[i]
		y[i+1] += a * x[i+1]
		y[i+2] += a * x[i+2]
		y[i+3] += a * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
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
