package online

import "gonum.org/v1/gonum/mat"

// mixture is the reliability model: the two-component gmm (gmm.go), the
// buffers its fits reuse, and the sliding window of distilled samples it
// is fitted on, a ring of (f_ỹ(x), log(1 + c_ui)) pairs.
type mixture struct {
	gmm    gmm
	fitter gmmFitter
	window []float64 // 2 per slot, GMMWindow slots
	filled int       // slots filled
	next   int       // slot the next pair goes to
	// pushed counts the pairs pushed since the model was made or read
	// (not encoded): a delta writes the slots pushed since the last save.
	pushed uint64
}

func newMixture(window int) mixture {
	return mixture{window: make([]float64, 2*window)}
}

// push adds the pair (x0, x1) to the window, over the oldest when full.
func (x *mixture) push(x0, x1 float64) {
	size := len(x.window) / 2
	x.window[2*x.next], x.window[2*x.next+1] = x0, x1
	x.next = (x.next + 1) % size
	x.pushed++
	if x.filled < size {
		x.filled++
	}
}

// refit fits the gmm on the window, warm-started, if it holds at least
// minSamples pairs.
func (x *mixture) refit(minSamples, iterations int) {
	if x.filled < minSamples {
		return
	}
	if x.fitter.x == nil || x.fitter.x.RawMatrix().Rows != x.filled {
		x.fitter.x = mat.NewDense(x.filled, 2, nil)
	}
	copy(x.fitter.x.RawMatrix().Data, x.window[:2*x.filled])
	x.gmm.fit(x.fitter.x, &x.fitter, iterations)
}

// encodeGMM writes the gmm's parameters: fitted, reliable, weights,
// means, covariances.
func (x *mixture) encodeGMM(e *encoder) {
	g := &x.gmm
	e.u8(boolByte(g.fitted))
	e.u8(uint8(g.reliable))
	e.floats(g.weight[:])
	for c := 0; c < 2; c++ {
		e.floats(g.mean[c][:])
	}
	for c := 0; c < 2; c++ {
		for r := 0; r < 2; r++ {
			e.floats(g.cov[c][r][:])
		}
	}
}

// decodeGMM reads what encodeGMM writes and checks that a fitted mixture
// can score.
func (x *mixture) decodeGMM(d *decoder) {
	g := &x.gmm
	g.fitted = d.u8() == 1
	g.reliable = int(d.u8())
	copy(g.weight[:], d.floats(2))
	for c := 0; c < 2; c++ {
		copy(g.mean[c][:], d.floats(2))
	}
	for c := 0; c < 2; c++ {
		for r := 0; r < 2; r++ {
			copy(g.cov[c][r][:], d.floats(2))
		}
	}
	if d.err == nil && g.reliable > 1 {
		d.fail("gmm reliable component %d", g.reliable)
	}
	if d.err == nil && g.fitted && !g.cache() {
		d.fail("gmm covariance not positive definite")
	}
}

// encodeWindow writes the window's slots; filled and next are counters.
func (x *mixture) encodeWindow(e *encoder) { e.floats(x.window) }

func (x *mixture) decodeWindow(d *decoder, size int) { x.window = d.floats(2 * size) }

// copyFrom makes x a copy of src, except the fitter's buffers.
func (x *mixture) copyFrom(src *mixture) {
	x.gmm = src.gmm
	x.window = append(x.window[:0], src.window...)
	x.filled, x.next, x.pushed = src.filled, src.next, src.pushed
}
