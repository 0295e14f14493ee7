package online

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// withoutPrior rewrites a model encoding of version 18 or a delta of
// version 14 into the given older version without the users' priors: the
// prior rows at the end of USER and PRIR (the last context section) left
// out.
func withoutPrior(t *testing.T, b []byte, version uint32) []byte {
	t.Helper()
	b = withoutPriorRows(t, b, "USER")
	return withoutSection(t, withoutGapReach(t, b, version), "PRIR", version)
}

// withoutPriorRows is b with the prior rows at the end of section tag (USER
// or ITEM) left out.
func withoutPriorRows(t *testing.T, b []byte, tag string) []byte {
	t.Helper()
	at, start, end := section(t, b, tag)
	return withBody(b, at, start, end, b[start:end-8*userPriorWidth*userRows(b, start)])
}

// TestUserPriorStrength: where each user's events are genuine with the
// user's own probability, drawn from a beta distribution, the strength
// read from the covariance of a user's events is the beta's α + β (the
// method of moments); where every user's probability is the same, there
// is no spread and the prior keeps its largest strength.
func TestUserPriorStrength(t *testing.T) {
	for _, tc := range []struct {
		alpha, beta float64
		lo, hi      float64
	}{
		{4, 1, 4, 6},                             // k = 5: a few users send most of the noise
		{16, 4, 16, 25},                          // k = 20
		{1e6, 2.5e5, UserPriorMax, UserPriorMax}, // one share for all
	} {
		r := rand.New(rand.NewPCG(3, 7))
		m := &Model{}
		users := 400
		m.users.prior = make([]float64, users*userPriorWidth)
		share := make([]float64, users)
		for u := range share {
			share[u] = betaDraw(r, tc.alpha, tc.beta)
		}
		for range 250 * users {
			u := r.IntN(users)
			w := 0.0
			if r.Float64() < share[u] {
				w = 1
			}
			m.learnUserPrior(int32(u), w, w)
		}
		if k := m.context.prior.strength(); k < tc.lo || k > tc.hi {
			t.Errorf("Beta(%v, %v): strength %.2f, want within [%v, %v]", tc.alpha, tc.beta, k, tc.lo, tc.hi)
		}
	}
}

// betaDraw draws from Beta(a, b) as X/(X+Y) of two gamma draws (a and b
// large or integers here: the sum of exponentials, or a normal).
func betaDraw(r *rand.Rand, a, b float64) float64 {
	gamma := func(k float64) float64 {
		if k > 1000 {
			return k + math.Sqrt(k)*r.NormFloat64()
		}
		s := 0.0
		for range int(k) {
			s += r.ExpFloat64()
		}
		return s
	}
	x, y := gamma(a), gamma(b)
	return x / (x + y)
}

// TestUserPriorKnownValues: a new user's weight does not move; a user
// whose earlier weights lie below the stream's is moved down, by the
// log-odds of the shrunk share less the stream's, and one above, up; by
// at most contextClamp in log-odds; by pool of that where pool < 1.
func TestUserPriorKnownValues(t *testing.T) {
	m := &Model{}
	m.users.prior = []float64{
		0, 0, 0, // a new user
		0.2, 0.2, 30, // a user weighed as noise
		0.95, 0.95, 30,
		0, 0, userPriorWindow, // a bot: the prior's odds ratio is bounded
	}
	m.context.prior = priorLevel{mean: 0.8, mean0: 0.8, n: 5000, cov: 0.16 / 11, pairs: 5000} // k = 0.16/cov − 1 = 10
	if k := m.context.prior.strength(); math.Abs(k-10) > 1e-9 {
		t.Fatalf("strength %v, want 10", k)
	}
	if got := m.userPrior(0, 0.7, 1); math.Abs(got-0.7) > 1e-12 {
		t.Errorf("a new user's weight 0.7 became %v", got)
	}
	for _, tc := range []struct {
		u    int32
		mean float64
	}{{1, 0.2}, {2, 0.95}} {
		pu := (30*tc.mean + 10*0.8) / 40
		want := sigmoid(math.Log(0.7/0.3) + math.Log(pu/(1-pu)) - math.Log(0.8/0.2))
		if got := m.userPrior(tc.u, 0.7, 1); math.Abs(got-want) > 1e-12 {
			t.Errorf("user %d (mean %v): 0.7 became %v, want %v", tc.u, tc.mean, got, want)
		}
		// By pool of the log-odds (priorOf): a quarter, none.
		want = sigmoid(math.Log(0.7/0.3) + 0.25*(math.Log(pu/(1-pu))-math.Log(0.8/0.2)))
		if got := m.userPrior(tc.u, 0.7, 0.25); math.Abs(got-want) > 1e-12 {
			t.Errorf("user %d (mean %v), pool 0.25: 0.7 became %v, want %v", tc.u, tc.mean, got, want)
		}
		if got := m.userPrior(tc.u, 0.7, 0); math.Abs(got-0.7) > 1e-12 {
			t.Errorf("user %d (mean %v), pool 0: 0.7 became %v", tc.u, tc.mean, got)
		}
	}
	if got := m.userPrior(1, 0.7, 1); got >= 0.7 {
		t.Errorf("a user weighed as noise: 0.7 became %v", got)
	}
	if got := m.userPrior(2, 0.7, 1); got <= 0.7 {
		t.Errorf("a user weighed as genuine: 0.7 became %v", got)
	}
	if got, want := m.userPrior(3, 0.7, 1), sigmoid(math.Log(0.7/0.3)-contextClamp); math.Abs(got-want) > 1e-12 {
		t.Errorf("a user of weights 0: 0.7 became %v, want %v (the bound)", got, want)
	}
	m.context.prior.pairs = userPriorMinMass - 1
	if k := m.context.prior.strength(); k != UserPriorMax {
		t.Errorf("strength %v before the covariance has the mass, want %v", k, UserPriorMax)
	}
}

// botEvents is a timed stream of 200 users who click the items of their
// topic or, 40 % of the time, any item (genuine) and, where bots is true,
// 12 users who click any item (noise), a fifth of the events; otherwise a
// fifth of every user's events are such random clicks, noise. So an event
// alone tells little; its user tells which. The gaps are 1 to 120 s
// whoever clicks.
func botEvents(n int, seed uint64, bots bool) ([]Event, []bool) {
	r := rand.New(rand.NewPCG(seed, 41))
	evs, genuine := make([]Event, n), make([]bool, n)
	now := int64(1_700_000_000_000)
	for j := range evs {
		now += 1000 + r.Int64N(119_000)
		u := r.IntN(200)
		noise := r.Float64() < 0.2
		if noise && bots {
			u = 200 + r.IntN(12)
		}
		item := (u%10)*50 + r.IntN(50)
		if noise || r.Float64() < 0.4 {
			item = r.IntN(500) // noise, or a genuine click off the topic
		}
		evs[j] = Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", item), TimeMS: now, HasTime: true}
		genuine[j] = !noise
	}
	return evs, genuine
}

// TestUserPriorFindsNoisyUsers: where a few users send the noise, the
// prior's strength is small and the weight ranks the second half's events
// better than the same model's weight without the prior; where the noise
// is every user's, the strength is large and the weight moves little.
func TestUserPriorFindsNoisyUsers(t *testing.T) {
	for _, tc := range []priorCase{
		{"bots", true, UserPriorMin, 300, 0.02, 1},
		{"everybody's noise", false, 500, UserPriorMax, -0.002, 0.002},
	} {
		evs, genuine := botEvents(30000, 9, tc.concentrated)
		checkPriorFinds(t, tc, evs, genuine,
			func(m *Model) { m.users.prior = nil },
			func(m *Model) (float64, float64) { return m.context.prior.strength(), m.Summary().UserPriorStrength })
	}
}

// priorCase is a stream of a prior's test: its noise concentrated on a
// few users (items) or not, the bounds of the strength k it should read,
// and of the gain in the second half's ROC-AUC of the weight.
type priorCase struct {
	name           string
	concentrated   bool
	kLo, kHi       float64
	minWin, maxWin float64
}

// checkPriorFinds scores evs with a model that keeps a prior and with the
// same model without it (strip), and checks that p_clean is the same, that
// the prior's strength (strength: the model's and the Summary's) lies
// within the case's bounds and is 0 without it, and that the prior moved
// the second half's ranking by the case's gain.
func checkPriorFinds(t *testing.T, tc priorCase, evs []Event, genuine []bool, strip func(*Model), strength func(*Model) (float64, float64)) {
	t.Helper()
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	with, _ := New(cfg, NewSource(5))
	without, _ := New(cfg, NewSource(5))
	strip(without) // a model without the prior, the rest the same
	a, b := runScores(t, with, evs), runScores(t, without, evs)
	half := len(evs) / 2
	wa, wb := make([]float64, 0, half), make([]float64, 0, half)
	for j := half; j < len(evs); j++ {
		wa, wb = append(wa, a[j].Weight), append(wb, b[j].Weight)
		if a[j].PClean != b[j].PClean {
			t.Fatalf("%s: event %d: p_clean %v with the prior, %v without: the prior changed what the model learns", tc.name, j, a[j].PClean, b[j].PClean)
		}
	}
	k, summarised := strength(with)
	if summarised != k {
		t.Errorf("%s: Summary's strength %v, the prior's %v", tc.name, summarised, k)
	}
	if _, got := strength(without); got != 0 {
		t.Errorf("%s: a model without the prior summarises a strength of %v", tc.name, got)
	}
	rankWith, rankWithout := pairsRanked(wa, genuine[half:]), pairsRanked(wb, genuine[half:])
	t.Logf("%s: strength %.1f; the second half's weight ranks %.4f with the prior, %.4f without", tc.name, k, rankWith, rankWithout)
	if k < tc.kLo || k > tc.kHi {
		t.Errorf("%s: strength %.1f, want within [%v, %v]", tc.name, k, tc.kLo, tc.kHi)
	}
	if gain := rankWith - rankWithout; gain < tc.minWin || gain > tc.maxWin {
		t.Errorf("%s: the prior moved the weight's ranking by %+.4f, want within [%v, %v]", tc.name, gain, tc.minWin, tc.maxWin)
	}
}

// TestUserPriorEncoding: a model's priors read back as they were; a
// model encoded in version 17 (no priors) loads with none learned and
// everything else as it was, and a delta of version 13 leaves the base's
// priors as they were; ReadModel refuses a prior no stream gives.
func TestUserPriorEncoding(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	m, _ := New(cfg, NewSource(5))
	evs, _ := botEvents(4000, 3, true)
	runScores(t, m, evs[:3000])
	if m.context.prior.n == 0 || m.users.prior[userPriorWidth*int(m.users.base)+2] == 0 {
		t.Fatal("nothing learned into the priors")
	}
	cp := m.FrozenCopy(nil)
	base := encode(t, cp)
	cp.MarkSaved()
	got, err := ReadModel(bytes.NewReader(base))
	if err != nil {
		t.Fatal(err)
	}
	if got.context.prior != m.context.prior || !equalFloats(got.users.prior, m.users.prior) {
		t.Fatal("the priors read back differ")
	}

	old, err := ReadModel(bytes.NewReader(withoutPrior(t, base, countGapVersion)))
	if err != nil {
		t.Fatal(err)
	}
	if old.context.prior != (priorLevel{}) || len(old.users.prior) != len(m.users.prior) {
		t.Fatalf("version 17 read with a prior level %+v and %d prior slots", old.context.prior, len(old.users.prior))
	}
	for _, v := range old.users.prior {
		if v != 0 {
			t.Fatal("version 17 read with a user's prior learned")
		}
	}
	withPriorOf(old, m)
	if !bytes.Equal(encode(t, old), base) {
		t.Fatal("version 17 read back with other parts than the model's")
	}

	priors := append([]float64(nil), cp.users.prior...)
	runScores(t, m, evs[3000:])
	delta := withoutPrior(t, writeDelta(t, m.FrozenCopy(cp)), deltaCountGapVersion)
	applied, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)})
	if err != nil {
		t.Fatal(err)
	}
	if !equalFloats(applied.users.prior[:len(priors)], priors) {
		t.Error("a version-13 delta changed the base's priors")
	}

	refusesPriorCount(t, base, writeDelta(t, m.FrozenCopy(cp)), "USER", "user")

	refusesFields(t, base, "PRIR", []badField{
		{0, 1.5, "user prior level"},
		{1, math.NaN(), "user prior level"},
		{2, -1, "user prior level"},
		{3, 0.3, "user prior level"},
		{4, 2 * priorLevelWindow, "user prior level"},
	})
}

// withPriorOf gives got the users' priors of m and what version 19 added
// (withReachOf): what an encoding before version 18 lacks.
func withPriorOf(got, m *Model) {
	got.context.prior, got.users.prior = m.context.prior, append([]float64(nil), m.users.prior...)
	withReachOf(got, m)
}

// equalFloats reports whether a and b hold the same values bit for bit.
func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for j := range a {
		if math.Float64bits(a[j]) != math.Float64bits(b[j]) {
			return false
		}
	}
	return true
}

// refusesPriorCount checks that a model encoding (base) and a delta on it
// whose last prior row in section tag (USER or ITEM, where the priors end
// it) counts more events than the window are refused, naming whose prior.
func refusesPriorCount(t *testing.T, base, delta []byte, tag, whose string) {
	t.Helper()
	for _, enc := range []struct {
		name string
		b    []byte
		read func([]byte) error
	}{
		{"model", base, func(b []byte) error { _, err := ReadModel(bytes.NewReader(b)); return err }},
		{"delta", delta, func(b []byte) error {
			_, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(b)})
			return err
		}},
	} {
		_, _, end := section(t, enc.b, tag)
		c := bytes.Clone(enc.b)
		binary.LittleEndian.PutUint64(c[end-8:], math.Float64bits(2*userPriorWindow))
		if err := enc.read(c); err == nil || !strings.Contains(err.Error(), whose+" prior") {
			t.Errorf("a %s with a %s's prior count of %v: %v, want a refusal", enc.name, whose, 2*userPriorWindow, err)
		}
	}
}
