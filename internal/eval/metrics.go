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
	seen := byUser(train, users)
	rel := make([]map[int32]bool, users)
	for _, x := range test {
		if rel[x.User] == nil {
			rel[x.User] = map[int32]bool{}
		}
		rel[x.User][x.Item] = true
	}
	maxK := slices.Max(Cutoffs)
	m := RankMetrics{Recall: make([]float64, len(Cutoffs)), NDCG: make([]float64, len(Cutoffs))}
	s := make([]float64, items)
	cand := make([]int32, 0, items)
	for u := range users {
		if len(rel[u]) == 0 {
			continue
		}
		score(int32(u), s)
		cand = cand[:0]
		for i := range int32(items) {
			if !seen[u][i] {
				cand = append(cand, i)
			}
		}
		top := topK(cand, s, maxK)
		for c, k := range Cutoffs {
			r, n := UserRecallNDCG(top, rel[u], k)
			m.Recall[c] += r
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
