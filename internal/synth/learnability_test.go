package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The tests in this file check that the noise is learnable from (user,
// item) alone, which is what a denoiser that never reads dwell has to work
// with, and that it is not trivially separable.

// pdf returns the weight of entry i of a cumulative distribution.
func pdf(cdf []float64, i int) float64 {
	if i == 0 {
		return cdf[0]
	}
	return cdf[i] - cdf[i-1]
}

// aucs returns the ROC-AUC of genuine against all noise, and against each
// noise mechanism alone.
func aucs(score []float64, cause []Cause) (all float64, by [numCauses]float64) {
	pos := make([]bool, len(score))
	for i, c := range cause {
		pos[i] = c == Genuine
	}
	all = rocAUC(score, pos)
	for m := Misclick; m < numCauses; m++ {
		var s []float64
		var p []bool
		for i, c := range cause {
			if c == Genuine || c == m {
				s = append(s, score[i])
				p = append(p, c == Genuine)
			}
		}
		by[m] = rocAUC(s, p)
	}
	return all, by
}

// TestBayesOracle scores every event with the true posterior of "genuine"
// given (user, item) under the generative model. This is the ceiling any
// learned denoiser can reach without dwell.
func TestBayesOracle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events int
		seed   uint64
	}{
		{"20k", 20_000, 1},
		{"200k", 200_000, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.events > 20_000 {
				t.Skip("large stream")
			}
			const rho = 0.2
			g, err := New(Config{Events: tc.events, Noise: rho, Seed: tc.seed})
			if err != nil {
				t.Fatal(err)
			}
			c, w := g.Config(), g.w
			cbIndex := make(map[int]int)
			for j, i := range w.clickbait {
				cbIndex[i] = j
			}
			var (
				score []float64
				cause []Cause
			)
			for {
				e, ok := g.Next()
				if !ok {
					break
				}
				var pg, pc, pb float64
				for k := range c.Topics {
					pi := pdf(w.topicItemCDF[k], e.Item)
					pg += w.taste[e.User][k] * pi
					pc += pdf(w.offTasteCDF[e.User], k) * pi
				}
				if j, ok := cbIndex[e.Item]; ok {
					pb = pdf(w.clickbaitCDF, j)
				}
				pn := pdf(g.mechCDF, 0)/float64(c.Items) + pdf(g.mechCDF, 1)*pb + pdf(g.mechCDF, 2)*pc
				score = append(score, (1-rho)*pg/((1-rho)*pg+rho*pn))
				cause = append(cause, e.Cause)
			}
			all, by := aucs(score, cause)
			t.Logf("Bayes-oracle ROC-AUC: all %.4f; misclick %.4f, clickbait %.4f, curiosity %.4f",
				all, by[Misclick], by[Clickbait], by[Curiosity])
			if all < 0.9 {
				t.Errorf("oracle AUC = %.4f, want >= 0.9: the noise would not be learnable", all)
			}
			if all > 0.99 {
				t.Errorf("oracle AUC = %.4f, want <= 0.99: the task would be trivially separable", all)
			}
		})
	}
}

// TestLearnableByOnlineMF runs the simplest learner the stream is meant
// for: logistic matrix factorisation (d=32, AdaGrad per row, 4 uniform
// negatives per event), one pass, scoring each event before learning from
// it. Its score must rank genuine above noise well once users have been
// seen a few times. This is a floor for the real model, not its target.
func TestLearnableByOnlineMF(t *testing.T) {
	if testing.Short() {
		t.Skip("200k events")
	}
	const (
		d      = 32
		lr     = 0.2
		l2     = 1e-4
		negs   = 4
		warmUp = 50_000
	)
	g, err := New(Config{Events: 200_000, Noise: 0.2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	c := g.Config()
	r := rand.New(rand.NewPCG(1, 2))
	newRows := func(n int) [][]float64 {
		m := make([][]float64, n)
		for i := range m {
			m[i] = make([]float64, d)
			for k := range m[i] {
				m[i][k] = 0.1 * r.NormFloat64()
			}
		}
		return m
	}
	P, Q := newRows(c.Users), newRows(c.Items)
	GP, GQ := make([]float64, c.Users), make([]float64, c.Items)
	dot := func(a, b []float64) float64 {
		var s float64
		for k := range a {
			s += a[k] * b[k]
		}
		return s
	}
	step := func(u, i int, y float64) {
		p, q := P[u], Q[i]
		gr := 1/(1+math.Exp(-dot(p, q))) - y
		GP[u] += gr * gr * dot(q, q) / d
		GQ[i] += gr * gr * dot(p, p) / d
		sp, sq := lr/math.Sqrt(GP[u]+1e-8), lr/math.Sqrt(GQ[i]+1e-8)
		for k := range p {
			pk := p[k]
			p[k] -= sp * (gr*q[k] + l2*pk)
			q[k] -= sq * (gr*pk + l2*q[k])
		}
	}
	var (
		score []float64
		cause []Cause
	)
	for n := 0; ; n++ {
		e, ok := g.Next()
		if !ok {
			break
		}
		if n >= warmUp {
			score = append(score, dot(P[e.User], Q[e.Item]))
			cause = append(cause, e.Cause)
		}
		step(e.User, e.Item, 1)
		for range negs {
			step(e.User, r.IntN(c.Items), 0)
		}
	}
	all, by := aucs(score, cause)
	t.Logf("online MF ROC-AUC after %d events: all %.4f; misclick %.4f, clickbait %.4f, curiosity %.4f",
		warmUp, all, by[Misclick], by[Clickbait], by[Curiosity])
	if all < 0.8 {
		t.Errorf("online MF AUC = %.4f, want >= 0.8", all)
	}
}

// rocAUC is the Mann-Whitney statistic, ties counted half.
func rocAUC(scores []float64, pos []bool) float64 {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case scores[a] < scores[b]:
			return -1
		case scores[a] > scores[b]:
			return 1
		}
		return 0
	})
	var rankSum, nPos float64
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			j++
		}
		mid := float64(i+j+1) / 2 // mean 1-based rank of the tie group
		for _, k := range idx[i:j] {
			if pos[k] {
				rankSum += mid
				nPos++
			}
		}
		i = j
	}
	nNeg := float64(len(scores)) - nPos
	return (rankSum - nPos*(nPos+1)/2) / (nPos * nNeg)
}

func TestRocAUC(t *testing.T) {
	for _, tc := range []struct {
		name  string
		score []float64
		pos   []bool
		want  float64
	}{
		{"perfect", []float64{1, 2, 3, 4}, []bool{false, false, true, true}, 1},
		{"inverted", []float64{1, 2, 3, 4}, []bool{true, true, false, false}, 0},
		{"all tied", []float64{5, 5, 5, 5}, []bool{true, false, true, false}, 0.5},
		{"one swap", []float64{1, 2, 3, 4}, []bool{false, true, false, true}, 0.75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rocAUC(tc.score, tc.pos); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("rocAUC = %v, want %v", got, tc.want)
			}
		})
	}
}
