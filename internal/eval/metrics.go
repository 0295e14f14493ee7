package eval

import (
	"cmp"
	"math"
	"slices"
)

// Cutoffs are the K of Recall@K and NDCG@K that every report prints.
var Cutoffs = []int{5, 10, 20, 50}

// RankMetrics holds Recall@K and NDCG@K for each of Cutoffs, averaged over
// the users that have at least one test item.
type RankMetrics struct {
	Recall []float64 `json:"recall"`
	NDCG   []float64 `json:"ndcg"`
	Users  int       `json:"users"`
}

// UserRecallNDCG returns Recall@k and NDCG@k of a ranked list (best
// first) against the set of relevant items: Recall@k = hits in the top k /
// |relevant|; NDCG@k = Σ_{hits at rank r ≤ k} 1/log2(r+1) divided by the
// same sum for an ideal list, min(k, |relevant|) hits at the top.
func UserRecallNDCG(ranked []int32, relevant map[int32]bool, k int) (recall, ndcg float64) {
	if len(relevant) == 0 {
		return 0, 0
	}
	hits, dcg := 0, 0.0
	for r, it := range ranked[:min(k, len(ranked))] {
		if relevant[it] {
			hits++
			dcg += 1 / math.Log2(float64(r)+2)
		}
	}
	idcg := 0.0
	for r := 0; r < min(k, len(relevant)); r++ {
		idcg += 1 / math.Log2(float64(r)+2)
	}
	return float64(hits) / float64(len(relevant)), dcg / idcg
}

// Scorer scores every item for a user into dst (len = items).
type Scorer func(u int32, dst []float64)

// Evaluate ranks, for each user with test items, every item the user did
// not interact with in train by score (ties broken by item index) and
// averages Recall and NDCG at each of Cutoffs.
func Evaluate(score Scorer, users, items int, train, test []Interaction) RankMetrics {
	return newRanking(users, items, train, test).evaluate(score)
}

// ranking is Evaluate's protocol prepared once for repeated evaluations
// (fit's early stopping): the seen items, the relevant ones and the
// buffers. One goroutine at a time.
type ranking struct {
	users, items int
	seen         itemSets
	rel          []map[int32]bool
	s            []float64
	cand         []int32
}

func newRanking(users, items int, train, test []Interaction) *ranking {
	rel := make([]map[int32]bool, users)
	for _, x := range test {
		if rel[x.User] == nil {
			rel[x.User] = map[int32]bool{}
		}
		rel[x.User][x.Item] = true
	}
	return &ranking{users: users, items: items, seen: newItemSets(train, users, items), rel: rel,
		s: make([]float64, items), cand: make([]int32, 0, items)}
}

func (r *ranking) evaluate(score Scorer) RankMetrics {
	maxK := slices.Max(Cutoffs)
	m := RankMetrics{Recall: make([]float64, len(Cutoffs)), NDCG: make([]float64, len(Cutoffs))}
	for u := range r.users {
		if len(r.rel[u]) == 0 {
			continue
		}
		score(int32(u), r.s)
		r.cand = r.cand[:0]
		for i := range int32(r.items) {
			if !r.seen.has(int32(u), i) {
				r.cand = append(r.cand, i)
			}
		}
		top := topK(r.cand, r.s, maxK)
		for c, k := range Cutoffs {
			rc, n := UserRecallNDCG(top, r.rel[u], k)
			m.Recall[c] += rc
			m.NDCG[c] += n
		}
		m.Users++
	}
	for c := range Cutoffs {
		if m.Users > 0 {
			m.Recall[c] /= float64(m.Users)
			m.NDCG[c] /= float64(m.Users)
		}
	}
	return m
}

// topK returns the k best candidates by score, best first, ties by index.
func topK(cand []int32, s []float64, k int) []int32 {
	better := func(a, b int32) int {
		return cmp.Or(cmp.Compare(s[b], s[a]), cmp.Compare(a, b))
	}
	if len(cand) <= k {
		slices.SortFunc(cand, better)
		return cand
	}
	// Keep a sorted window of the best k; most candidates fail the first
	// comparison against the current k-th.
	top := slices.Clone(cand[:k])
	slices.SortFunc(top, better)
	for _, c := range cand[k:] {
		if better(c, top[k-1]) >= 0 {
			continue
		}
		pos, _ := slices.BinarySearchFunc(top, c, better)
		copy(top[pos+1:], top[pos:k-1])
		top[pos] = c
	}
	return top
}

// itemSets is, per user, a set of items: a bit per (user, item), the
// users' rows of ⌈items/64⌉ words each. A membership test is a load and a
// shift, where a map costs a hash (the negative sampling and the ranking
// ask it for every item).
type itemSets struct {
	words  []uint64
	stride int
}

// newItemSets returns the sets of items of each user in rows; users and
// items bound the ids.
func newItemSets(rows []Interaction, users, items int) itemSets {
	stride := (items + 63) / 64
	s := itemSets{words: make([]uint64, users*stride), stride: stride}
	for _, x := range rows {
		s.words[int(x.User)*stride+int(x.Item)/64] |= 1 << (uint(x.Item) % 64)
	}
	return s
}

// has reports whether item i is in user u's set.
func (s itemSets) has(u, i int32) bool {
	return s.words[int(u)*s.stride+int(i)/64]&(1<<(uint(i)%64)) != 0
}

// byUser returns, per user, the set of items in rows.
func byUser(rows []Interaction, users int) []map[int32]bool {
	out := make([]map[int32]bool, users)
	for u := range out {
		out[u] = map[int32]bool{}
	}
	for _, x := range rows {
		out[x.User][x.Item] = true
	}
	return out
}

// MeanStd returns the mean and the sample standard deviation (n−1; 0 for
// one value).
func MeanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)-1))
}
