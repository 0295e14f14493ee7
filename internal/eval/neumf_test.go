package eval

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// tinyNeuMF is a NeuMF of 3 users, 4 items, Dim 3 and hidden layers 4, 2,
// with random biases so that the finite differences cross every kind of
// parameter.
func tinyNeuMF(seed uint64) *NeuMF {
	r := rand.New(rand.NewPCG(seed, 9))
	cfg := GMFConfig{Dim: 3, Hidden: []int{4, 2}, L2: 0.01}.withDefaults()
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

// TestNeuMFGradient checks lossGrad against central finite differences of
// the loss in every parameter that the sample touches.
func TestNeuMFGradient(t *testing.T) {
	for _, tc := range []struct {
		name string
		u, i int32
		y, w float64
		seed uint64
	}{{"positive", 1, 2, 1, 0.7, 1}, {"negative", 2, 0, 0, 1, 2}, {"positive, other init", 0, 3, 1, 1.3, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			n := tinyNeuMF(tc.seed)
			n.lossGrad(tc.u, tc.i, tc.y, tc.w)
			g := n.grad
			d := n.d
			type param struct {
				name string
				v    []float64 // the parameters, perturbed in place
				grad []float64
			}
			ps := []param{
				{"p_u", n.p[int(tc.u)*d : int(tc.u+1)*d], slices.Clone(g.p)},
				{"q_i", n.q[int(tc.i)*d : int(tc.i+1)*d], slices.Clone(g.q)},
				{"m_u", n.mu[int(tc.u)*d : int(tc.u+1)*d], slices.Clone(g.mu)},
				{"n_i", n.ni[int(tc.i)*d : int(tc.i+1)*d], slices.Clone(g.ni)},
				{"h", n.h, slices.Clone(g.h)},
			}
			for l := range n.w {
				ps = append(ps, param{"W" + string(rune('1'+l)), n.w[l], slices.Clone(g.w[l])}, param{"c" + string(rune('1'+l)), n.c[l], slices.Clone(g.c[l])})
			}
			bias := []float64{n.b}
			ps = append(ps, param{"b", bias, []float64{g.b}})
			loss := func() float64 {
				n.b = bias[0]
				return n.lossGrad(tc.u, tc.i, tc.y, tc.w)
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

// TestNeuMFScore checks that the catalogue scorer (item side cached)
// agrees with the per-pair forward pass, before and after steps, and that
// a frozen copy does not move with later steps.
func TestNeuMFScore(t *testing.T) {
	n := tinyNeuMF(4)
	check := func(m *NeuMF, when string) {
		t.Helper()
		dst := make([]float64, 4)
		for u := range int32(3) {
			m.Score(u, dst)
			for i := range int32(4) {
				if s := m.score(u, i); !near(dst[i], s, 1e-12) {
					t.Errorf("%s: Score(%d)[%d] = %v, score = %v", when, u, i, dst[i], s)
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
		t.Error("the frozen copy moved with the model's steps")
	}
	if n.score(1, 1) == before {
		t.Error("20 steps did not move the model")
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

func BenchmarkNeuMFStep(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	n := newNeuMF(GMFConfig{}.withDefaults(), 943, 1611, r.NormFloat64)
	b.ReportAllocs()
	for k := range b.N {
		n.step(int32(k%943), int32(k%1611), float64(k%2), 1)
	}
}

func BenchmarkNeuMFScore(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	n := newNeuMF(GMFConfig{}.withDefaults(), 943, 1611, r.NormFloat64)
	dst := make([]float64, 1611)
	n.Score(0, dst)
	b.ReportAllocs()
	for k := range b.N {
		n.Score(int32(k%943), dst)
	}
}
