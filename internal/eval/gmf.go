package eval

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	blasapi "gonum.org/v1/gonum/blas"
)

// GMFConfig configures the downstream recommenders: GMF (score
// h·(p_u ⊙ q_i) + b) and NeuMF (GMF and an MLP tower), trained with binary
// cross-entropy on the positives and sampled negatives, per-sample SGD with
// per-row adaptive steps, and early stopping on validation Recall@20.
type GMFConfig struct {
	// Dim is the embedding dimension (default 32); NeuMF's MLP tower has
	// embeddings of Dim per user and per item.
	Dim int
	// Hidden are the sizes of NeuMF's MLP layers above its 2·Dim input
	// (default Dim, Dim/2: a tower halving at each layer).
	Hidden []int
	// Epochs bounds the passes over the training positives (default 60).
	Epochs int
	// Patience stops training after this many evaluations without a
	// better validation Recall@20 (default 4); the best parameters are
	// kept.
	Patience int
	// EvalEvery is the number of epochs between validation evaluations
	// (default 2).
	EvalEvery int
	// LearningRate is the base SGD step (default 0.05).
	LearningRate float64
	// L2 is the weight decay on the rows a sample touches (default 1e-4).
	L2 float64
	// Negatives is the number of negatives sampled per positive and epoch,
	// uniformly among the items the user has no training interaction with
	// (default 4).
	Negatives int
	// BatchSize is the mini-batch over which T-CE ranks losses
	// (default 1024).
	BatchSize int
	// DropRate is T-CE's final drop rate: the share of the positives of a
	// batch with the largest loss that are left out of the update (default
	// 0: Normal training).
	DropRate float64
	// DropEpochs is the number of epochs over which the drop rate rises
	// linearly from 0 to DropRate (T-CE's num_gradual; default 10).
	DropEpochs int
}

func (c GMFConfig) withDefaults() GMFConfig {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Dim, 32)
	def(&c.Epochs, 60)
	def(&c.Patience, 4)
	def(&c.EvalEvery, 2)
	def(&c.Negatives, 4)
	def(&c.BatchSize, 1024)
	def(&c.DropEpochs, 10)
	if c.Hidden == nil {
		c.Hidden = []int{c.Dim, max(c.Dim/2, 1)}
	}
	if c.LearningRate == 0 {
		c.LearningRate = 0.05
	}
	if c.L2 == 0 {
		c.L2 = 1e-4
	}
	return c
}

// GMF is a trained generalized matrix factorisation model.
type GMF struct {
	d    int
	p, q []float64
	h    []float64
	b    float64
	// Epochs is the epoch whose parameters were kept; Valid the
	// validation Recall@20 there.
	Epochs int
	Valid  float64

	// Training state: the step sizes and the per-row accumulators of the
	// squared gradients.
	lr, l2     float64
	accP, accQ []float64
	dp, dq, dh []float64
}

// Score writes the score of every item for user u into dst.
func (g *GMF) Score(u int32, dst []float64) {
	pu := g.p[int(u)*g.d : int(u+1)*g.d]
	z := make([]float64, g.d)
	for k := range z {
		z[k] = pu[k] * g.h[k]
	}
	for i := range dst {
		dst[i] = g.b
	}
	blas.Dgemv(blasapi.NoTrans, len(dst), g.d, 1, g.q, g.d, z, 1, 1, dst, 1)
}

func dot(a, b []float64) float64 {
	s := 0.0
	for k, v := range a {
		s += v * b[k]
	}
	return s
}

// TrainGMF trains a GMF on the training positives, the positive n
// weighted by weights[n] (nil: all 1), with early stopping on valid (all
// its interactions count as relevant).
func TrainGMF(cfg GMFConfig, users, items int, train []Interaction, weights []float64, valid []Interaction, seed uint64) (*GMF, error) {
	cfg = cfg.withDefaults()
	if weights != nil && len(weights) != len(train) {
		return nil, fmt.Errorf("train gmf: %d weights for %d interactions", len(weights), len(train))
	}
	r := newRand(seed, 3)
	d := cfg.Dim
	g := &GMF{d: d, p: make([]float64, users*d), q: make([]float64, items*d), h: make([]float64, d),
		lr: cfg.LearningRate, l2: cfg.L2, accP: make([]float64, users), accQ: make([]float64, items),
		dp: make([]float64, d), dq: make([]float64, d), dh: make([]float64, d)}
	for k := range g.p {
		g.p[k] = r.NormFloat64() * 0.1
	}
	for k := range g.q {
		g.q[k] = r.NormFloat64() * 0.1
	}
	for k := range g.h {
		g.h[k] = 1
	}
	best, epochs, v := fit(cfg, g, users, items, train, weights, valid, r)
	kept := best.(*GMF)
	kept.Epochs, kept.Valid = epochs, v
	return kept, nil
}

// step takes one SGD step on the weighted BCE of label y for (u, i): per-row
// adaptive steps for the embeddings (with weight decay on the two rows), a
// tenth of the base step for h and b.
func (g *GMF) step(u, i int32, y, w float64) {
	d := g.d
	pu, qi := g.p[int(u)*d:int(u+1)*d], g.q[int(i)*d:int(i+1)*d]
	dp, dq, dh := g.dp, g.dq, g.dh
	s := g.b
	for k := range d {
		s += g.h[k] * pu[k] * qi[k]
	}
	e := w * (sigmoid(s) - y) // d BCE / d s
	gp, gq := 0.0, 0.0
	for k := range d {
		dp[k] = e*g.h[k]*qi[k] + g.l2*pu[k]
		dq[k] = e*g.h[k]*pu[k] + g.l2*qi[k]
		dh[k] = e * pu[k] * qi[k]
		gp += dp[k] * dp[k]
		gq += dq[k] * dq[k]
	}
	g.accP[u] += gp / float64(d)
	g.accQ[i] += gq / float64(d)
	lp := g.lr / math.Sqrt(1+g.accP[u])
	lq := g.lr / math.Sqrt(1+g.accQ[i])
	for k := range d {
		pu[k] -= lp * dp[k]
		qi[k] -= lq * dq[k]
		g.h[k] -= 0.1 * g.lr * dh[k]
	}
	g.b -= 0.1 * g.lr * e
}

// frozen returns a copy of the parameters, without the training state.
func (g *GMF) frozen() pointwise {
	return &GMF{d: g.d, p: slices.Clone(g.p), q: slices.Clone(g.q), h: slices.Clone(g.h), b: g.b}
}

// pointwise is a downstream model that fit trains: a score per (user,
// item) and an SGD step on the binary cross-entropy of one sample.
type pointwise interface {
	Score(u int32, dst []float64)
	score(u, i int32) float64
	// step takes one SGD step on w·BCE(σ(score(u, i)), y).
	step(u, i int32, y, w float64)
	// frozen returns a copy of the parameters that later steps leave
	// alone.
	frozen() pointwise
}

// fit trains m on the training positives, the positive n weighted by
// weights[n] (nil: all 1), cfg.Negatives sampled negatives per positive and
// epoch, T-CE's drop when cfg.DropRate > 0, and early stopping on valid's
// Recall@20. It returns the kept parameters, their epoch and their
// validation Recall@20 (0 without valid, the last epoch's parameters then).
// r must be the stream that initialised m.
func fit(cfg GMFConfig, m pointwise, users, items int, train []Interaction, weights []float64, valid []Interaction, r *rand.Rand) (pointwise, int, float64) {
	seen := newItemSets(train, users, items)
	var validation *ranking
	if len(valid) > 0 {
		validation = newRanking(users, items, train, valid)
	}
	order := make([]int, len(train))
	for n := range order {
		order[n] = n
	}
	best := -1.0
	var keep pointwise
	keptEpoch, stale := 0, 0
	loss := make([]float64, 0, cfg.BatchSize)
	idx := make([]int, 0, cfg.BatchSize)
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		r.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		drop := 0.0
		if cfg.DropRate > 0 {
			drop = cfg.DropRate * math.Min(1, float64(epoch-1)/float64(cfg.DropEpochs))
		}
		for start := 0; start < len(order); start += cfg.BatchSize {
			batch := order[start:min(start+cfg.BatchSize, len(order))]
			idx = append(idx[:0], batch...)
			if drop > 0 {
				// T-CE: rank the batch's positives by their current loss and
				// leave the largest drop share out.
				loss = loss[:0]
				for _, n := range batch {
					x := train[n]
					loss = append(loss, softplus(-m.score(x.User, x.Item)))
				}
				perm := make([]int, len(batch))
				for k := range perm {
					perm[k] = k
				}
				slices.SortStableFunc(perm, func(a, b int) int { return cmp.Compare(loss[a], loss[b]) })
				keepN := len(batch) - int(drop*float64(len(batch)))
				idx = idx[:0]
				for _, k := range perm[:keepN] {
					idx = append(idx, batch[k])
				}
			}
			for _, n := range idx {
				x := train[n]
				w := 1.0
				if weights != nil {
					w = weights[n]
				}
				m.step(x.User, x.Item, 1, w)
				for range cfg.Negatives {
					j := sampleUnseen(r, items, seen, x.User)
					if j >= 0 {
						m.step(x.User, j, 0, 1)
					}
				}
			}
		}
		if epoch%cfg.EvalEvery != 0 && epoch != cfg.Epochs {
			continue
		}
		if len(valid) == 0 {
			keep, keptEpoch = m, epoch
			continue
		}
		v := validation.evaluate(m.Score).Recall[slices.Index(Cutoffs, 20)]
		if v > best {
			best, stale = v, 0
			keep, keptEpoch = m.frozen(), epoch
		} else if stale++; stale >= cfg.Patience {
			break
		}
	}
	if keep == nil {
		return m, cfg.Epochs, 0
	}
	return keep, keptEpoch, max(best, 0)
}

func (g *GMF) score(u, i int32) float64 {
	pu, qi := g.p[int(u)*g.d:int(u+1)*g.d], g.q[int(i)*g.d:int(i+1)*g.d]
	s := g.b
	for k := range g.d {
		s += g.h[k] * pu[k] * qi[k]
	}
	return s
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// softplus is log(1+e^x), the BCE of a positive with score −x.
func softplus(x float64) float64 {
	if x > 30 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// sampleUnseen draws an item not in user u's seen set, or −1 after 50
// tries.
func sampleUnseen(r *rand.Rand, items int, seen itemSets, u int32) int32 {
	for range 50 {
		j := int32(r.IntN(items))
		if !seen.has(u, j) {
			return j
		}
	}
	return -1
}
