package online

import "math"

// The three networks on the interaction vector z = p_u ⊙ q_i (nets.go
// has their math): the classifier f and the noisy-posterior head η̃, both
// a head, and the transition T̂.

// head is a softmax layer over z with a reference class:
// softmax(W z + b), W K×d and b K; row 0 of W and b[0] stay zero.
type head struct {
	weights []float64 // W, K×d row-major
	bias    []float64 // b, K
}

func newHead(k, dim int) head {
	return head{weights: make([]float64, k*dim), bias: make([]float64, k)}
}

// forward writes softmax(W z + b) into out (K values).
func (h *head) forward(out, z []float64) { classForward(out, h.weights, h.bias, z) }

// forwardPair writes z = p ⊙ q and forward(out, z); for a binary head,
// whose one free row is one dot product, in one pass over the vectors.
func (h *head) forwardPair(out, z, p, q []float64) {
	if len(h.bias) != 2 {
		hadamard(z, p, q)
		h.forward(out, z)
		return
	}
	d := len(z)
	h.fromLogit(out, hadamardDot(z, p, q, h.weights[d:2*d]))
}

// fromLogit writes softmax(0, dot + b_1) into out: forward for a binary
// head whose one free row's dot product with z is dot.
func (h *head) fromLogit(out []float64, dot float64) {
	out[0] = 0
	out[1] = dot + h.bias[1]
	softmax(out[:2], out[:2])
}

// backprop adds to dz the gradient that the logit gradient g sends back
// to z: Σ_c g_c W_c over the non-reference classes.
func (h *head) backprop(dz, g []float64) {
	d := len(dz)
	for c := 1; c < len(h.bias); c++ {
		axpy(dz, g[c], h.weights[c*d:(c+1)*d])
	}
}

// step takes a plain SGD step of size rate along the logit gradient g:
// W_c −= rate·g_c·z, b_c −= rate·g_c.
func (h *head) step(g, z []float64, rate float64) {
	d := len(z)
	for c := 1; c < len(h.bias); c++ {
		axpy(h.weights[c*d:(c+1)*d], -rate*g[c], z)
		h.bias[c] -= rate * g[c]
	}
}

func (h *head) encode(e *encoder) {
	e.floats(h.weights)
	e.floats(h.bias)
}

func (h *head) decode(d *decoder, k, dim int) {
	h.weights, h.bias = d.floats(k*dim), d.floats(k)
}

func (h *head) copyFrom(src *head) {
	h.weights = append(h.weights[:0], src.weights...)
	h.bias = append(h.bias[:0], src.bias...)
}

// transition is T̂(x)_j = softmax_k(A_jk · z + C_jk + o_i,jk [+ u_u,jk]):
// a linear head per clean class j plus a per-item offset o_i and, with
// Config.TransitionUserOffset, a per-user offset u_u. In binary mode it is
// one-sided: row 1 is fixed at (0, 1) and only row 0 is computed.
type transition struct {
	k, dim   int
	oneSided bool      // binary mode
	weights  []float64 // A, K·K×d: row j·K+c for clean class j, observed c
	bias     []float64 // C, K·K
	offsets  []float64 // o, K·K per item
	// perUser is Config.TransitionUserOffset; userOffsets, u, K·K per
	// user, is nil without it.
	perUser     bool
	userOffsets []float64
}

func newTransition(k, dim int, oneSided, perUser bool) transition {
	return transition{k: k, dim: dim, oneSided: oneSided, perUser: perUser}
}

// init sets A = 0 and C to the log-odds that put transitionInitDiag on
// the diagonal and spread the rest evenly; logits are relative to column
// 0, the reference.
func (t *transition) init() {
	k := t.k
	t.weights = make([]float64, k*k*t.dim)
	t.bias = make([]float64, k*k)
	diag := math.Log(transitionInitDiag * float64(k-1) / (1 - transitionInitDiag))
	for j := 0; j < k; j++ {
		for c := 1; c < k; c++ {
			switch {
			case j == 0:
				t.bias[j*k+c] = -diag
			case c == j:
				t.bias[j*k+c] = diag
			}
		}
	}
}

// addItem appends the zero offsets of a new item.
func (t *transition) addItem() { t.offsets = appendZeros(t.offsets, t.k*t.k) }

// addUser appends the zero offsets of a new user (with perUser).
func (t *transition) addUser() {
	if t.perUser {
		t.userOffsets = appendZeros(t.userOffsets, t.k*t.k)
	}
}

func appendZeros(s []float64, n int) []float64 {
	for range n {
		s = append(s, 0)
	}
	return s
}

// resetItem zeroes the offsets of item row i, reused for a new item.
func (t *transition) resetItem(i int32) { clear(t.itemOffsets(i)) }

// resetUser zeroes the offsets of user row u, reused for a new user.
func (t *transition) resetUser(u int32) {
	if t.perUser {
		clear(t.userOffsetsOf(u))
	}
}

// itemOffsets is item i's K·K offsets.
func (t *transition) itemOffsets(i int32) []float64 {
	kk := t.k * t.k
	return t.offsets[int(i)*kk : int(i+1)*kk]
}

// userOffsetsOf is user u's K·K offsets; only with perUser.
func (t *transition) userOffsetsOf(u int32) []float64 {
	kk := t.k * t.k
	return t.userOffsets[int(u)*kk : int(u+1)*kk]
}

// forward writes T̂(x) for z, user u and item i into out (K×K, row-major).
func (t *transition) forward(out, z []float64, u, i int32) {
	k, d := t.k, t.dim
	rows := k
	if t.oneSided {
		rows = 1
		out[2], out[3] = 0, 1
	}
	offsets := t.itemOffsets(i)
	var users []float64
	if t.perUser {
		users = t.userOffsetsOf(u)
	}
	for j := 0; j < rows; j++ {
		row := out[j*k : (j+1)*k]
		refLogits(row, t.weights[j*k*d:(j+1)*k*d], t.bias[j*k:(j+1)*k], z)
		for c := 1; c < k; c++ {
			row[c] += offsets[j*k+c]
		}
		if users != nil {
			for c := 1; c < k; c++ {
				row[c] += users[j*k+c]
			}
		}
		softmax(row, row)
	}
}

// fromLogit writes T̂(x) for user u and item i into out (2×2) when T̂ is
// one-sided with K = 2: forward, given the dot product of A_01 with z.
func (t *transition) fromLogit(out []float64, dot float64, u, i int32) {
	out[2], out[3] = 0, 1
	out[0] = 0
	out[1] = dot + t.bias[1] + t.itemOffsets(i)[1]
	if t.perUser {
		out[1] += t.userOffsets[int(u)*4+1]
	}
	softmax(out[:2], out[:2])
}

// step takes a plain SGD step along g, the gradient of row ystar's
// logits: A and C at rate, item i's offsets at itemRate and, with
// perUser, user u's at userRate. An offset enters the logit as C does, so
// its gradient is g.
func (t *transition) step(g, z []float64, u, i int32, ystar int, rate, itemRate, userRate float64) {
	k, d := t.k, t.dim
	offsets := t.itemOffsets(i)
	var users []float64
	if t.perUser {
		users = t.userOffsetsOf(u)
	}
	for c := 1; c < k; c++ {
		r, gc := ystar*k+c, g[c]
		axpy(t.weights[r*d:(r+1)*d], -rate*gc, z)
		t.bias[r] -= rate * gc
		offsets[r] -= itemRate * gc
		if users != nil {
			users[r] -= userRate * gc
		}
	}
}

// encode writes A and C; the offsets go with the items and users
// (encodeOffsets, encodeUserOffsets).
func (t *transition) encode(e *encoder) {
	e.floats(t.weights)
	e.floats(t.bias)
}

func (t *transition) decode(d *decoder) {
	kk := t.k * t.k
	t.weights, t.bias = d.floats(kk*t.dim), d.floats(kk)
}

func (t *transition) encodeOffsets(e *encoder) { e.floats(t.offsets) }

func (t *transition) decodeOffsets(d *decoder, items int) {
	t.offsets = d.floats(items * t.k * t.k)
}

// encodeUserOffsets writes the users' offsets, if perUser.
func (t *transition) encodeUserOffsets(e *encoder) {
	if t.perUser {
		e.floats(t.userOffsets)
	}
}

func (t *transition) decodeUserOffsets(d *decoder, users int) {
	if t.perUser {
		t.userOffsets = d.floats(users * t.k * t.k)
	}
}

// copyFrom makes t a copy of src; t holds the offsets of src's first
// items items and users users as they were at its last sync, and the
// rows in itemSpans and userSpans and after those are copied.
func (t *transition) copyFrom(src *transition, userSpans []rowSpan, users int, itemSpans []rowSpan, items int) {
	t.k, t.dim, t.oneSided, t.perUser = src.k, src.dim, src.oneSided, src.perUser
	t.weights = append(t.weights[:0], src.weights...)
	t.bias = append(t.bias[:0], src.bias...)
	t.offsets = syncRows(t.offsets, src.offsets, src.k*src.k, itemSpans, items)
	if src.perUser {
		t.userOffsets = syncRows(t.userOffsets, src.userOffsets, src.k*src.k, userSpans, users)
	} else {
		t.userOffsets = nil
	}
}
