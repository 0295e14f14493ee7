package online

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// flipStream is a rating-mode stream with a known answer: the clean class
// of (u,i) is (group(u) + group(i)) mod K, and the observed class is the
// clean one flipped by the row-stochastic matrix T.
type flipStream struct {
	k, users, items int
	flip            []float64 // K×K
	r               *rand.Rand
}

func pairflip(k int, eta float64) []float64 {
	t := make([]float64, k*k)
	for j := 0; j < k; j++ {
		t[j*k+j] = 1 - eta
		t[j*k+(j+1)%k] = eta
	}
	return t
}

func (s *flipStream) clean(u, i int) int { return (u%s.k + i%s.k) % s.k }

func (s *flipStream) next() (Event, int) {
	u, i := s.r.IntN(s.users), s.r.IntN(s.items)
	y := s.clean(u, i)
	x, obs := s.r.Float64(), s.k-1
	for c := 0; c < s.k; c++ {
		x -= s.flip[y*s.k+c]
		if x < 0 {
			obs = c
			break
		}
	}
	return Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", i), Rating: float64(obs + 1)}, y
}

// TestTransitionRecoversFlipMatrix trains on a stream with a known
// class-conditional flip matrix and compares the mean T̂ with it.
func TestTransitionRecoversFlipMatrix(t *testing.T) {
	const k, eta = 3, 0.25
	s := &flipStream{k: k, users: 150, items: 120, flip: pairflip(k, eta), r: rand.New(rand.NewPCG(31, 32))}
	m, err := New(Config{Mode: ModeRating, Classes: k, Dim: 16, WarmUp: 20000}, rand.NewPCG(33, 34))
	if err != nil {
		t.Fatal(err)
	}
	var sc Score
	correct, total := 0, 0
	for n := 0; n < 120000; n++ {
		ev, y := s.next()
		if err := m.Step(ev, &sc); err != nil {
			t.Fatal(err)
		}
		if n >= 100000 {
			total++
			best := 0
			for c, v := range sc.Posterior {
				if v > sc.Posterior[best] {
					best = c
				}
			}
			if best == y {
				correct++
			}
		}
	}
	// Mean T̂ over every (u,i) pair.
	mean := make([]float64, k*k)
	tm := make([]float64, k*k)
	for u := 0; u < s.users; u++ {
		for i := 0; i < s.items; i++ {
			if !m.Transition(fmt.Sprint("u", u), fmt.Sprint("i", i), tm) {
				t.Fatal("unknown pair")
			}
			axpy(mean, 1/float64(s.users*s.items), tm)
		}
	}
	l1, idl1 := 0.0, 0.0
	for j := range mean {
		l1 += math.Abs(mean[j] - s.flip[j])
		idl1 += math.Abs(s.flip[j] - map[bool]float64{true: 1, false: 0}[j%(k+1) == 0])
	}
	sum := m.Summary()
	t.Logf("clean accuracy of f over the last 20k events: %.3f; distilled share %.3f, rho %.2f", float64(correct)/float64(total), sum.DistilledShare, sum.Rho)
	t.Logf("mean T̂ %v", fmtMatrix(mean, k))
	t.Logf("L1(mean T̂, T) = %.3f; identity estimator %.3f", l1, idl1)
	if l1 > idl1/3 {
		t.Errorf("L1 %.3f, want below a third of the identity's %.3f", l1, idl1)
	}
}

func fmtMatrix(v []float64, k int) string {
	s := ""
	for j := 0; j < k; j++ {
		s += fmt.Sprintf("%.3f ", v[j*k:(j+1)*k])
	}
	return s
}

// TestUserOffsetFindsRandomClicker: on a stream where every user clicks
// within their taste group but one, who clicks uniformly at random, T̂'s
// per-user offset of that user moves toward noise (its logit of a false
// positive, u_u,01, grows) above every taste-driven user's.
func TestUserOffsetFindsRandomClicker(t *testing.T) {
	const users, items, groups, n = 100, 200, 5, 40000
	m, err := New(Config{Dim: 16, WarmUp: 2000, TransitionUserOffset: true}, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	var sc Score
	for range n {
		u := r.IntN(users + 1) // user `users` is the random clicker
		i := r.IntN(items)
		if u < users {
			i = (u%groups)*(items/groups) + r.IntN(items/groups)
		}
		if err := m.Step(Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", i)}, &sc); err != nil {
			t.Fatal(err)
		}
	}
	offsetAboveTheRest(t, "random clicker's u_01", users, func(u int) float64 {
		row, ok := m.users.index[fmt.Sprint("u", u)]
		if !ok {
			t.Fatalf("user %d has no row", u)
		}
		return m.transition.userOffsetsOf(row)[1]
	})
}

// offsetAboveTheRest fails t unless offset(n), the odd one out's, is above
// offset(0..n-1), every other row's.
func offsetAboveTheRest(t *testing.T, name string, n int, offset func(int) float64) {
	t.Helper()
	odd, highest, sum := offset(n), math.Inf(-1), 0.0
	for k := range n {
		highest = max(highest, offset(k))
		sum += offset(k)
	}
	t.Logf("%s %.4f; the others' mean %.4f, highest %.4f", name, odd, sum/float64(n), highest)
	if !(odd > highest) {
		t.Fatalf("%s %.4f is not above every other row's (highest %.4f)", name, odd, highest)
	}
}

// TestItemOffsetFindsClickbait: on a stream where every item is clicked
// within its taste group but one, which is clicked as often by users of
// every group (clickbait, seen as much as any other item, so not by its
// popularity), T̂'s per-item offset of that item moves toward noise (its
// logit of a false positive, o_i,01, grows) above every other item's.
func TestItemOffsetFindsClickbait(t *testing.T) {
	const users, items, groups, n = 100, 200, 5, 40000
	m, err := New(Config{Dim: 16, WarmUp: 2000, TransitionUserOffset: true}, rand.NewPCG(5, 6))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	var sc Score
	for range n {
		u := r.IntN(users)
		i := (u%groups)*(items/groups) + r.IntN(items/groups)
		if r.IntN(items+1) == 0 {
			i = items // the clickbait item, as often as any other
		}
		if err := m.Step(Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", i)}, &sc); err != nil {
			t.Fatal(err)
		}
	}
	offsetAboveTheRest(t, "clickbait's o_01", items, func(i int) float64 {
		row, ok := m.items.index[fmt.Sprint("i", i)]
		if !ok {
			t.Fatalf("item %d has no row", i)
		}
		return m.transition.itemOffsets(row)[1]
	})
}

// TestLearnNegativeMatchesLearnPair checks that learnNegative takes the
// general path's step bit for bit (forward, then learnPair with y = 0, no
// y* and no auxiliary weight): every parameter is the same after a
// thousand negatives, with clipping that bites and clipping that does
// not, in the RGBT and the plain model, before and after warm-up.
func TestLearnNegativeMatchesLearnPair(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"rgbt", Config{WarmUp: 50}},
		{"rgbt-tight-clip", Config{WarmUp: 50, Clip: 0.01}},
		{"rgbt-noisy-head-trains-embeddings", Config{WarmUp: 50, NoisyHeadTrainsEmbeddings: true}},
		{"plain", Config{Plain: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(tc.cfg, rand.NewPCG(31, 32))
			if err != nil {
				t.Fatal(err)
			}
			b, err := New(tc.cfg, rand.NewPCG(31, 32))
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(33, 34))
			var sc Score
			for n := 0; n < 100; n++ { // past warm-up: y* and T̂ active
				ev := Event{User: fmt.Sprint("u", r.IntN(20)), Item: fmt.Sprint("i", r.IntN(30))}
				if err := a.Step(ev, &sc); err != nil {
					t.Fatal(err)
				}
				if err := b.Step(ev, &sc); err != nil {
					t.Fatal(err)
				}
			}
			var before bytes.Buffer
			if _, err := a.WriteTo(&before); err != nil {
				t.Fatal(err)
			}
			for n := 0; n < 1000; n++ {
				u, j := int32(r.IntN(a.users.resident())), int32(r.IntN(a.items.resident()))
				weight := []float64{0.25, 1, 40}[n%3]
				okA := a.learnNegative(u, j, weight)
				s := &b.scratch
				p, q := b.users.row(u), b.items.row(j)
				s.user, s.item = p, q
				copy(s.t, s.identity)
				b.classifier.forwardPair(s.f, s.z, p, q)
				okB := b.learnPair(u, j, 0, -1, 0, weight, 0)
				if okA != okB {
					t.Fatalf("negative %d: learnNegative reports %v, learnPair %v", n, okA, okB)
				}
			}
			var ea, eb bytes.Buffer
			if _, err := a.WriteTo(&ea); err != nil {
				t.Fatal(err)
			}
			if _, err := b.WriteTo(&eb); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ea.Bytes(), eb.Bytes()) {
				t.Fatal("the models differ after the same negatives")
			}
			if bytes.Equal(ea.Bytes(), before.Bytes()) {
				t.Fatal("the negatives changed nothing: the comparison would hold for any step")
			}
		})
	}
}
