package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

const fdStep = 1e-6

// numGrad is the central finite difference of loss with respect to v[j].
func numGrad(v []float64, j int, loss func() float64) float64 {
	old := v[j]
	v[j] = old + fdStep
	up := loss()
	v[j] = old - fdStep
	down := loss()
	v[j] = old
	return (up - down) / (2 * fdStep)
}

func closeTo(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
		t.Errorf("%s: analytic %.9g, finite difference %.9g", what, got, want)
	}
}

// randomStochastic returns a random K×K row-stochastic matrix.
func randomStochastic(r *rand.Rand, k int) []float64 {
	t := make([]float64, k*k)
	for j := 0; j < k; j++ {
		for c := 0; c < k; c++ {
			t[j*k+c] = r.NormFloat64()
		}
		softmax(t[j*k:(j+1)*k], t[j*k:(j+1)*k])
	}
	return t
}

func TestClassGradFiniteDifference(t *testing.T) {
	tests := []struct {
		name     string
		k, y, ys int
		lw       float64
	}{
		{"binary positive", 2, 1, -1, 0},
		{"binary positive distilled noise", 2, 1, 0, 0.7},
		{"binary negative distilled", 2, 0, 0, 1.3},
		{"rating 5 classes", 5, 3, -1, 0},
		{"rating 5 classes distilled elsewhere", 5, 3, 1, 0.4},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logits := make([]float64, tc.k)
			for j := range logits {
				logits[j] = r.NormFloat64()
			}
			tr := randomStochastic(r, tc.k)
			f := make([]float64, tc.k)
			g := make([]float64, tc.k)
			loss := func() float64 {
				softmax(f, logits)
				classGrad(g, f, tr, tc.k, tc.y, tc.ys, tc.lw)
				return classLoss(f, tr, tc.k, tc.y, tc.ys, tc.lw)
			}
			loss()
			want := append([]float64(nil), g...)
			for j := range logits {
				closeTo(t, "dL/dlogit", want[j], numGrad(logits, j, loss))
			}
		})
	}
}

func TestTransGradFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{2, 5} {
		logits := make([]float64, k*k)
		for j := range logits {
			logits[j] = r.NormFloat64()
		}
		tm := make([]float64, k*k)
		g := make([]float64, k)
		ystar, y := k-1, 0
		loss := func() float64 {
			for j := 0; j < k; j++ {
				softmax(tm[j*k:(j+1)*k], logits[j*k:(j+1)*k])
			}
			transGrad(g, tm, k, ystar, y)
			return -math.Log(tm[ystar*k+y])
		}
		loss()
		want := append([]float64(nil), g...)
		for c := 0; c < k; c++ {
			closeTo(t, "dL/dtlogit", want[c], numGrad(logits, ystar*k+c, loss))
		}
		// Rows other than ystar do not enter the loss.
		if got := numGrad(logits, 0, loss); math.Abs(got) > 1e-9 {
			t.Errorf("row 0 gradient %g, want 0", got)
		}
	}
}

// TestPairGradFiniteDifference checks the whole backward pass of one pair
// (classifier weights, bias, both embedding rows, weight decay) against
// finite differences of the loss, with T̂ held constant as Step holds it.
func TestPairGradFiniteDifference(t *testing.T) {
	for _, tc := range []struct {
		mode       string
		noisyEmbed bool
		weight     float64
	}{{ModeBinary, false, 1}, {ModeBinary, true, 0.25}, {ModeRating, false, 1}, {ModeRating, true, 1}} {
		mode := tc.mode
		t.Run(fmt.Sprintf("%s/noisy-head-embeddings=%v", mode, tc.noisyEmbed), func(t *testing.T) {
			m, err := New(Config{Mode: mode, Dim: 6, Clip: 1e6, L2: 0.01, WarmUp: 1, NoisyHeadTrainsEmbeddings: tc.noisyEmbed}, rand.NewPCG(5, 6))
			if err != nil {
				t.Fatal(err)
			}
			var sc Score
			if err := m.Step(Event{User: "u", Item: "i", Rating: 2}, &sc); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, 8))
			for j := range m.classifier.weights {
				m.classifier.weights[j] = r.NormFloat64()
				m.noisyHead.weights[j] = r.NormFloat64()
			}
			u, i := m.users.index["u"], m.items.index["i"]
			y, ystar, w := 1, 0, 0.6
			m.forward(u, i)
			tFixed := append([]float64(nil), m.scratch.t...)
			p, q := m.users.row(u), m.items.row(i)
			fn := make([]float64, m.k)
			// noisyLoss is the noisy head's cross-entropy; it reaches p and
			// q only when the head trains the embeddings.
			noisyLoss := func() float64 {
				m.noisyHead.forward(fn, m.scratch.z)
				return -math.Log(fn[y])
			}
			loss := func() float64 {
				hadamard(m.scratch.z, p, q)
				m.classifier.forward(m.scratch.f, m.scratch.z)
				l := tc.weight * classLoss(m.scratch.f, tFixed, m.k, y, ystar, m.cfg.Lambda*w)
				if tc.noisyEmbed {
					l += tc.weight * noisyLoss()
				}
				return l + m.cfg.L2/2*(dot(p, p)+dot(q, q))
			}
			loss()
			m.noisyHead.forward(m.scratch.noisy, m.scratch.z)
			copy(m.scratch.t, tFixed)
			if _, ok := m.grads(y, ystar, w, tc.weight, tc.weight); !ok {
				t.Fatal("gradients not finite")
			}
			g, z := append([]float64(nil), m.scratch.dClass...), append([]float64(nil), m.scratch.z...)
			gn := append([]float64(nil), m.scratch.dNoisy...)
			headLoss := func() float64 { hadamard(m.scratch.z, p, q); return tc.weight * noisyLoss() }
			// Row 0 is the reference class: not a parameter, no gradient.
			for j := 0; j < m.d; j++ {
				if g := numGrad(m.classifier.weights, j, loss); g != 0 {
					t.Fatalf("reference row of W has gradient %g", g)
				}
			}
			for k := 1; k < m.k; k++ {
				closeTo(t, "dL/dbn", gn[k], numGrad(m.noisyHead.bias, k, headLoss))
				for j := 0; j < m.d; j++ {
					closeTo(t, "dL/dWn", gn[k]*z[j], numGrad(m.noisyHead.weights, k*m.d+j, headLoss))
				}
			}
			dp, dq := append([]float64(nil), m.scratch.dUser...), append([]float64(nil), m.scratch.dItem...)
			// The weight decay is not scaled by the pair's weight.
			reg := func() float64 { return m.cfg.L2 / 2 * (dot(p, p) + dot(q, q)) }
			full := func() float64 { return loss() }
			_ = reg
			for j := range p {
				closeTo(t, "dL/dp", dp[j], numGrad(p, j, full))
				closeTo(t, "dL/dq", dq[j], numGrad(q, j, loss))
			}
			for k := 1; k < m.k; k++ {
				closeTo(t, "dL/db", g[k], numGrad(m.classifier.bias, k, loss))
				for j := 0; j < m.d; j++ {
					closeTo(t, "dL/dW", g[k]*z[j], numGrad(m.classifier.weights, k*m.d+j, loss))
				}
			}
		})
	}
}

// TestTransitionChainFiniteDifference checks the transition update's
// gradient with respect to the head's weights A, biases C, the item's
// offsets o_i and, with TransitionUserOffset, the user's offsets u_u: in
// rating mode (forward) and in binary mode (the one-logit fromLogit path).
func TestTransitionChainFiniteDifference(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		perUser  bool
		y, ystar int
		events   []Event
	}{
		{ModeRating, false, 2, 0, []Event{{User: "u", Item: "i", Rating: 1}, {User: "v", Item: "i", Rating: 3}, {User: "u", Item: "i", Rating: 2}}},
		{ModeRating, true, 2, 0, []Event{{User: "u", Item: "i", Rating: 1}, {User: "v", Item: "i", Rating: 3}, {User: "u", Item: "i", Rating: 2}}},
		{ModeBinary, true, 1, 0, []Event{{User: "u", Item: "i"}, {User: "v", Item: "i"}, {User: "u", Item: "j"}}},
	} {
		t.Run(fmt.Sprintf("%s/user-offset=%v", tc.mode, tc.perUser), func(t *testing.T) {
			m, err := New(Config{Mode: tc.mode, Classes: 3, Dim: 4, Clip: 1e6, WarmUp: 1, TransitionUserOffset: tc.perUser}, rand.NewPCG(9, 10))
			if err != nil {
				t.Fatal(err)
			}
			var sc Score
			for _, ev := range tc.events {
				if err := m.Step(ev, &sc); err != nil {
					t.Fatal(err)
				}
			}
			u, i := m.users.index["u"], m.items.index["i"]
			k, d := m.k, m.d
			// Offsets away from zero, so that they enter the loss at a
			// point of their own.
			r := rand.New(rand.NewPCG(11, 12))
			for j := range m.transition.offsets {
				m.transition.offsets[j] = r.NormFloat64()
			}
			for j := range m.transition.userOffsets {
				m.transition.userOffsets[j] = r.NormFloat64()
			}
			m.forward(u, i)
			trans, ok := m.grads(tc.y, tc.ystar, 1, 1, 1)
			if !trans || !ok {
				t.Fatalf("transition not active (%v) or gradient not finite (%v)", trans, ok)
			}
			gt, z := append([]float64(nil), m.scratch.dTrans...), append([]float64(nil), m.scratch.z...)
			loss := func() float64 {
				m.forward(u, i) // z from the unchanged rows; T̂ from the parameters
				return -math.Log(m.scratch.t[tc.ystar*k+tc.y])
			}
			if g := numGrad(m.transition.bias, tc.ystar*k, loss); g != 0 {
				t.Fatalf("reference column of C has gradient %g", g)
			}
			ti := m.transition.itemOffsets(i)
			for c := 1; c < k; c++ {
				row := tc.ystar*k + c
				closeTo(t, "dL/dC", gt[c], numGrad(m.transition.bias, row, loss))
				closeTo(t, "dL/d(item offset)", gt[c], numGrad(ti, row, loss))
				if tc.perUser {
					closeTo(t, "dL/d(user offset)", gt[c], numGrad(m.transition.userOffsetsOf(u), row, loss))
				}
				for j := 0; j < d; j++ {
					closeTo(t, "dL/dA", gt[c]*z[j], numGrad(m.transition.weights, row*d+j, loss))
				}
			}
			if tc.perUser {
				// Another user's offsets do not enter this pair's loss.
				other := m.transition.userOffsetsOf(m.users.index["v"])
				for j := range other {
					if g := numGrad(other, j, loss); g != 0 {
						t.Fatalf("user v's offset %d has gradient %g in user u's loss", j, g)
					}
				}
			}
			// The step moves each offset by its rate times the gradient.
			before := append([]float64(nil), ti...)
			var ub []float64
			if tc.perUser {
				ub = append(ub, m.transition.userOffsetsOf(u)...)
			}
			m.transition.step(gt, z, u, i, tc.ystar, 0, 0.5, 0.25)
			for c := 1; c < k; c++ {
				row := tc.ystar*k + c
				closeTo(t, "item offset step", ti[row]-before[row], -0.5*gt[c])
				if tc.perUser {
					closeTo(t, "user offset step", m.transition.userOffsetsOf(u)[row]-ub[row], -0.25*gt[c])
				}
			}
		})
	}
}

// TestClassGradIdentityIsCrossEntropy: with T̂ = I the corrected loss is
// the ordinary cross-entropy, whose gradient is f − onehot(y).
func TestClassGradIdentityIsCrossEntropy(t *testing.T) {
	f := []float64{0.2, 0.5, 0.3}
	eye := []float64{1, 0, 0, 0, 1, 0, 0, 0, 1}
	g := make([]float64, 3)
	classGrad(g, f, eye, 3, 1, -1, 0)
	closeTo(t, "loss", classLoss(f, eye, 3, 1, -1, 0), -math.Log(0.5))
	for j, want := range []float64{0.2, -0.5, 0.3} {
		closeTo(t, "gradient", g[j], want)
	}
}
