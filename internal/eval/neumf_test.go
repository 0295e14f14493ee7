package eval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// tinyNeuMF is a NeuMF of 3 users, 4 items, Dim 3 and the given hidden
// layers (nil: 4, 2), with random biases so that the finite differences
// cross every kind of parameter.
func tinyNeuMF(seed uint64, hidden ...int) *NeuMF {
	r := rand.New(rand.NewPCG(seed, 9))
	if hidden == nil {
		hidden = []int{4, 2}
	}
	cfg := GMFConfig{Dim: 3, Hidden: hidden, L2: 0.01}.withDefaults()
	n := newNeuMF(cfg, 3, 4, r.NormFloat64)
	for _, emb := range [][]float64{n.p, n.q, n.mu, n.ni} {
		for k := range emb {
			emb[k] *= 5 // away from 0: more units on, a gradient worth checking
		}
	}
	for l := range n.c {
		for j := range n.c[l] {
			n.c[l][j] = 0.5 + 0.2*r.NormFloat64() // mostly on
		}
	}
	n.b = 0.3
	return n
}

// neumfLoss is the loss whose gradient the step follows: w·BCE(σ(s), y) +
// l2/2·(|p_u|² + |q_i|² + |m_u|² + |n_i|²).
func neumfLoss(n *NeuMF, u, i int32, y, w float64) float64 {
	s := n.score(u, i)
	loss := w * (softplus(s) - y*s)
	d := n.d
	for _, row := range [][]float64{n.p[int(u)*d : int(u+1)*d], n.q[int(i)*d : int(i+1)*d], n.mu[int(u)*d : int(u+1)*d], n.ni[int(i)*d : int(i+1)*d]} {
		for _, v := range row {
			loss += n.l2 / 2 * v * v
		}
	}
	return loss
}

// neumfParam is one group of parameters of a NeuMF with its gradient.
type neumfParam struct {
	name string
	v    []float64 // the parameters, perturbed in place
	grad []float64
}

// neumfParams lists the parameters of n that a sample (u, i) touches;
// grad(name, k) gives each one's gradient.
func neumfParams(n *NeuMF, u, i int32, grad func(name string, rows ...int) []float64) []neumfParam {
	d := n.d
	ps := []neumfParam{
		{"p_u", n.p[int(u)*d : int(u+1)*d], grad("p_u")},
		{"q_i", n.q[int(i)*d : int(i+1)*d], grad("q_i")},
		{"m_u", n.mu[int(u)*d : int(u+1)*d], grad("m_u")},
		{"n_i", n.ni[int(i)*d : int(i+1)*d], grad("n_i")},
		{"h", n.h, grad("h")},
	}
	for l := range n.w {
		ps = append(ps, neumfParam{"W" + string(rune('1'+l)), n.w[l], grad("W", l)}, neumfParam{"c" + string(rune('1'+l)), n.c[l], grad("c", l)})
	}
	return ps
}

// referenceGradient is the gradient of the reference step (lossGrad).
func referenceGradient(n *NeuMF, u, i int32, y, w float64) (ps []neumfParam, b float64) {
	r := newNeuMFReference(n)
	r.lossGrad(u, i, y, w)
	g := r.grad
	ps = neumfParams(n, u, i, func(name string, rows ...int) []float64 {
		switch name {
		case "p_u":
			return slices.Clone(g.p)
		case "q_i":
			return slices.Clone(g.q)
		case "m_u":
			return slices.Clone(g.mu)
		case "n_i":
			return slices.Clone(g.ni)
		case "h":
			return slices.Clone(g.h)
		case "W":
			return slices.Clone(g.w[rows[0]])
		}
		return slices.Clone(g.c[rows[0]])
	})
	return ps, g.b
}

// stepGradient is the gradient the fused step followed, read back from
// what the step did on a copy of n with its accumulators at 0: a row
// with step size lr/√(1+acc) moved by that times its gradient, and h and b
// by a tenth of lr times theirs.
func stepGradient(n *NeuMF, u, i int32, y, w float64) (ps []neumfParam, b float64) {
	c := n.frozen().(*NeuMF)
	c.lr, c.l2 = n.lr, n.l2
	c.accP, c.accQ, c.accM, c.accN = make([]float64, len(n.accP)), make([]float64, len(n.accQ)), make([]float64, len(n.accM)), make([]float64, len(n.accN))
	c.accW = nil
	for l := range n.w {
		c.accW, c.da = append(c.accW, make([]float64, len(n.c[l]))), append(c.da, make([]float64, len(n.c[l])))
	}
	c.gp, c.gq, c.gh, c.dz0 = make([]float64, n.d), make([]float64, n.d), make([]float64, n.d), make([]float64, 2*n.d)
	c.step(u, i, y, w)
	d := n.d
	moved := func(before, after []float64, scale float64) []float64 {
		g := make([]float64, len(before))
		for k := range g {
			g[k] = (before[k] - after[k]) * scale
		}
		return g
	}
	row := func(acc float64) float64 { return math.Sqrt(1+acc) / n.lr }
	ps = neumfParams(n, u, i, func(name string, rows ...int) []float64 {
		switch name {
		case "p_u":
			return moved(n.p[int(u)*d:int(u+1)*d], c.p[int(u)*d:int(u+1)*d], row(c.accP[u]))
		case "q_i":
			return moved(n.q[int(i)*d:int(i+1)*d], c.q[int(i)*d:int(i+1)*d], row(c.accQ[i]))
		case "m_u":
			return moved(n.mu[int(u)*d:int(u+1)*d], c.mu[int(u)*d:int(u+1)*d], row(c.accM[u]))
		case "n_i":
			return moved(n.ni[int(i)*d:int(i+1)*d], c.ni[int(i)*d:int(i+1)*d], row(c.accN[i]))
		case "h":
			return moved(n.h, c.h, 1/(0.1*n.lr))
		}
		l := rows[0]
		in, g := n.sizes[l], []float64{}
		for j := range n.c[l] {
			if name == "W" {
				g = append(g, moved(n.w[l][j*in:(j+1)*in], c.w[l][j*in:(j+1)*in], row(c.accW[l][j]))...)
			} else {
				g = append(g, moved(n.c[l][j:j+1], c.c[l][j:j+1], row(c.accW[l][j]))...)
			}
		}
		return g
	})
	return ps, (n.b - c.b) / (0.1 * n.lr)
}

// TestNeuMFGradient checks the gradient of the fused step (read back from
// the step) and of the reference step against central finite differences
// of the loss in every parameter that the sample touches.
func TestNeuMFGradient(t *testing.T) {
	dead := 0 // units off for a sample, over every case
	for _, gc := range []struct {
		name string
		grad func(n *NeuMF, u, i int32, y, w float64) ([]neumfParam, float64)
	}{{"step", stepGradient}, {"reference", referenceGradient}} {
		for _, tc := range []struct {
			name string
			u, i int32
			y, w float64
			seed uint64
		}{{"positive", 1, 2, 1, 0.7, 1}, {"negative", 2, 0, 0, 1, 2}, {"positive, other init", 0, 3, 1, 1.3, 3}, {"negative, units off", 2, 3, 0, 0.4, 1}} {
			t.Run(gc.name+"/"+tc.name, func(t *testing.T) {
				n := tinyNeuMF(tc.seed)
				ps, gb := gc.grad(n, tc.u, tc.i, tc.y, tc.w)
				bias := []float64{n.b}
				ps = append(ps, neumfParam{"b", bias, []float64{gb}})
				loss := func() float64 {
					n.b = bias[0]
					return neumfLoss(n, tc.u, tc.i, tc.y, tc.w)
				}
				const eps = 1e-6
				nonzero := 0
				for _, p := range ps {
					for k := range p.v {
						v := p.v[k]
						p.v[k] = v + eps
						up := loss()
						p.v[k] = v - eps
						down := loss()
						p.v[k] = v
						fd := (up - down) / (2 * eps)
						if math.Abs(fd-p.grad[k]) > 1e-6*max(1, math.Abs(fd)) {
							t.Errorf("%s[%d]: gradient %.9f, finite difference %.9f", p.name, k, p.grad[k], fd)
						}
						if p.grad[k] != 0 {
							nonzero++
						}
						if p.name[0] == 'c' && p.grad[k] == 0 {
							dead++
						}
					}
				}
				// Over half of the 56 entries must be non-zero (units on) for the test
				// to say much.
				if nonzero < 30 {
					t.Errorf("only %d non-zero gradient entries", nonzero)
				}
			})
		}
	}
	// A unit off for the sample is one the fused step skips: some case
	// must have one.
	if dead == 0 {
		t.Error("no case has a unit off")
	}
}

// TestNeuMFStepMatchesReference checks that the fused step moves every
// parameter and accumulator as the reference step does (same gradient,
// same updates; the sums in another order), over 300 steps.
func TestNeuMFStepMatchesReference(t *testing.T) {
	for _, hidden := range [][]int{{4, 2}, {5}, {4, 3, 2}} {
		fused, ref := tinyNeuMF(5, hidden...), tinyNeuMF(5, hidden...)
		r := rand.New(rand.NewPCG(7, 7))
		reference := newNeuMFReference(ref)
		for k := range 300 {
			u, i, y, w := int32(r.IntN(3)), int32(r.IntN(4)), float64(r.IntN(2)), 0.5+r.Float64()
			fused.step(u, i, y, w)
			reference.step(u, i, y, w)
			got, want := neumfState(fused), neumfState(ref)
			for name, g := range got {
				for j, v := range g {
					if !near(v, want[name][j], 1e-9*max(1, math.Abs(v))) {
						t.Fatalf("hidden %v, step %d: %s[%d] = %v, reference %v", hidden, k, name, j, v, want[name][j])
					}
				}
			}
		}
	}
}

// neumfState lists every parameter and accumulator of n by name.
func neumfState(n *NeuMF) map[string][]float64 {
	s := map[string][]float64{"p": n.p, "q": n.q, "mu": n.mu, "ni": n.ni, "h": n.h, "b": {n.b},
		"accP": n.accP, "accQ": n.accQ, "accM": n.accM, "accN": n.accN}
	for l := range n.w {
		s[fmt.Sprint("W", l)], s[fmt.Sprint("c", l)], s[fmt.Sprint("accW", l)] = n.w[l], n.c[l], n.accW[l]
	}
	return s
}

// TestNeuMFScore checks that the catalogue scorer agrees with the per-pair
// forward pass and with the reference scorer, before and after steps, and
// that a frozen copy does not move with later steps.
func TestNeuMFScore(t *testing.T) {
	for _, hidden := range [][]int{{4, 2}, {5}, {4, 3, 2}} {
		n := tinyNeuMF(4, hidden...)
		check := func(m *NeuMF, when string) {
			t.Helper()
			dst, ref := make([]float64, 4), make([]float64, 4)
			for u := range int32(3) {
				m.Score(u, dst)
				newNeuMFReference(m).Score(u, ref)
				for i := range int32(4) {
					if s := m.score(u, i); !near(dst[i], s, 1e-12) || !near(dst[i], ref[i], 1e-12) {
						t.Errorf("hidden %v, %s: Score(%d)[%d] = %v, score = %v, reference Score %v", hidden, when, u, i, dst[i], s, ref[i])
					}
				}
			}
		}
		check(n, "initial")
		frozen := n.frozen().(*NeuMF)
		before := frozen.score(1, 1)
		for k := range 20 {
			n.step(int32(k%3), int32(k%4), float64(k%2), 1)
		}
		check(n, "after steps")
		check(frozen, "frozen")
		if frozen.score(1, 1) != before {
			t.Errorf("hidden %v: the frozen copy moved with the model's steps", hidden)
		}
		if n.score(1, 1) == before {
			t.Errorf("hidden %v: 20 steps did not move the model", hidden)
		}
	}
}

// TestNeuMFLearns checks that NeuMF ranks held-out items of the clustered
// data set of TestGMFLearns far above chance, deterministically.
func TestNeuMFLearns(t *testing.T) {
	const users, items = 80, 80
	train, test := clustered()
	cfg := GMFConfig{Epochs: 20, EvalEvery: 20}
	m, err := TrainNeuMF(cfg, users, items, train, nil, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := Evaluate(m.Score, users, items, train, test)
	if got.Recall[1] < 0.8 {
		t.Errorf("Recall@10 = %.3f, want > 0.8 (chance ≈ 0.14)", got.Recall[1])
	}
	again, _ := TrainNeuMF(cfg, users, items, train, nil, nil, 1)
	if m2 := Evaluate(again.Score, users, items, train, test); !slices.Equal(m2.Recall, got.Recall) {
		t.Errorf("same seed, different models: %v vs %v", m2.Recall, got.Recall)
	}
	if _, err := TrainNeuMF(cfg, users, items, train, []float64{1}, nil, 1); err == nil {
		t.Error("mismatched weights accepted")
	}
	if _, err := TrainNeuMF(GMFConfig{Hidden: []int{8, 0}}, users, items, train, nil, nil, 1); err == nil {
		t.Error("a hidden layer of size 0 accepted")
	}
}

// BenchmarkNeuMFStep times one training step of the default NeuMF on
// ML-100k's shape (943 users, 1,682 items) at random pairs, the fused
// step against the reference step of commit dcc0585 in the same run.
func BenchmarkNeuMFStep(b *testing.B) {
	const users, items = 943, 1682
	r := rand.New(rand.NewPCG(3, 4))
	pairs := make([][2]int32, 1<<16)
	for k := range pairs {
		pairs[k] = [2]int32{int32(r.IntN(users)), int32(r.IntN(items))}
	}
	for _, bc := range []struct {
		name string
		step func(n *NeuMF) func(u, i int32, y, w float64)
	}{
		{"fused", func(n *NeuMF) func(u, i int32, y, w float64) { return n.step }},
		{"reference", func(n *NeuMF) func(u, i int32, y, w float64) { return newNeuMFReference(n).step }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			step := bc.step(newNeuMF(GMFConfig{}.withDefaults(), users, items, r.NormFloat64))
			b.ReportAllocs()
			for k := range b.N {
				p := pairs[k%len(pairs)]
				step(p[0], p[1], float64(k%2), 1)
			}
		})
	}
}

// BenchmarkNeuMFScore times scoring the catalogue for one user, the item
// side cached, against the reference scorer of commit dcc0585.
func BenchmarkNeuMFScore(b *testing.B) {
	const users, items = 943, 1682
	for _, bc := range []struct {
		name  string
		score func(n *NeuMF) Scorer
	}{
		{"blocked", func(n *NeuMF) Scorer { return n.Score }},
		{"reference", func(n *NeuMF) Scorer { return newNeuMFReference(n).Score }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			score := bc.score(newNeuMF(GMFConfig{}.withDefaults(), users, items, r.NormFloat64))
			dst := make([]float64, items)
			score(0, dst)
			b.ReportAllocs()
			for k := range b.N {
				score(int32(k%users), dst)
			}
		})
	}
}
