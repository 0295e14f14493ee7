package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"denoiser/internal/movielens"
	"denoiser/internal/report"
	"denoiser/internal/synth"
	"denoiser/online"
)

// tinyRatings makes a small ordinal rating set: rating = round(3 + user
// bias + item bias + small noise), clamped to 1..5; each user rates
// perUser distinct items.
func tinyRatings(users, items, perUser int, seed uint64) []movielens.Rating {
	r := rand.New(rand.NewPCG(seed, 1))
	ub, ib := make([]float64, users), make([]float64, items)
	for u := range ub {
		ub[u] = r.NormFloat64() * 0.8
	}
	for i := range ib {
		ib[i] = r.NormFloat64() * 0.8
	}
	var out []movielens.Rating
	ts := int64(0)
	for u := range users {
		for _, i := range r.Perm(items)[:perUser] {
			v := int(math.Round(3 + ub[u] + ib[i] + 0.3*r.NormFloat64()))
			v = min(max(v, 1), 5)
			ts++
			out = append(out, movielens.Rating{User: int64(u + 1), Item: int64(i + 1), Rating: float64(v), Seconds: ts*37%10007 + ts})
		}
	}
	return out
}

func TestOrdinalRecoversPairflip(t *testing.T) {
	d := FromRatings(tinyRatings(150, 120, 60, 1))
	T, _ := NoiseMatrix(NoisePairflip, 0.3, 5)
	noisy := InjectNoise(d.Rows, T, 5, 1)
	o := FitOrdinal(OrdinalConfig{}, d.Users, d.Items, 5, noisy, 1)
	if got := o.T[4*5+0]; got < 0.1 {
		t.Errorf("estimated P(ỹ=1 | y=5) = %.3f, want at least 0.1 (true 0.3)", got)
	}
	if l1, id := L1(o.T, T), L1(identity(5), T); l1 >= id {
		t.Errorf("ordinal L1 %.3f not below the identity's %.3f", l1, id)
	}
}

func TestTransitionEndToEnd(t *testing.T) {
	d := FromRatings(tinyRatings(60, 50, 30, 2))
	res, err := RunTransition(context.Background(), d, TransitionConfig{
		Noises: []string{NoisePairflip}, Rates: []float64{0.2}, Seeds: 2, Passes: 1,
		Ordinal: OrdinalConfig{Epochs: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != len(AllEstimators) {
		t.Fatalf("%d cells, want %d", len(res.Cells), len(AllEstimators))
	}
	for _, c := range res.Cells {
		if !near(c.IdentityL1, 2, 1e-12) || len(c.L1PerSeed) != 2 || !(c.L1Mean >= 0 && c.L1Mean <= 10) || c.Paper == nil || c.Paper.Best != 1.7048 {
			t.Errorf("cell %+v", c)
		}
	}
	dir := t.TempDir()
	if err := res.WriteReport(dir, Meta{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dir, "transition.md", "transition.png")
	if err := WriteJSON(filepath.Join(dir, "t.json"), res); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Cells []map[string]any `json:"cells"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "t.json"))
	if err := json.Unmarshal(b, &js); err != nil || len(js.Cells) == 0 {
		t.Fatalf("json: %v, %d cells", err, len(js.Cells))
	}
	for _, k := range []string{"noise", "rate", "l1_mean", "l1_std", "identity_l1"} {
		if _, ok := js.Cells[0][k]; !ok {
			t.Errorf("json cell lacks %q", k)
		}
	}
	again, _ := RunTransition(context.Background(), d, TransitionConfig{
		Noises: []string{NoisePairflip}, Rates: []float64{0.2}, Seeds: 2, Passes: 1,
		Ordinal: OrdinalConfig{Epochs: 3}, Workers: 1,
	})
	for k := range res.Cells {
		if res.Cells[k].L1Mean != again.Cells[k].L1Mean {
			t.Errorf("%s: not deterministic across worker counts: %v vs %v", res.Cells[k].Estimator, res.Cells[k].L1Mean, again.Cells[k].L1Mean)
		}
	}
}

func TestRecommendEndToEnd(t *testing.T) {
	d := FromRatings(tinyRatings(60, 80, 30, 3))
	vs := DefaultVariants()[:3]
	for k := range vs {
		vs[k].Config.WarmUp = 200
		vs[k].Config.RefitEvery = 200
	}
	res, err := RunRecommend(context.Background(), d, RecommendConfig{
		Seeds: 2, Passes: 1, Variants: vs, GMF: GMFConfig{Epochs: 2, EvalEvery: 1}, Segments: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Per backbone (GMF, NeuMF) Normal, T-CE and three weighted rows;
	// three f rows.
	if len(res.Rows) != 13 || len(res.Curves) != 3 {
		t.Fatalf("%d rows, %d curves", len(res.Rows), len(res.Curves))
	}
	for _, r := range res.Rows {
		if len(r.PerSeed) != 2 {
			t.Errorf("%s: %d seeds", r.Method, len(r.PerSeed))
		}
		for c := range Cutoffs {
			if !(r.RecallMean[c] >= 0 && r.RecallMean[c] <= 1 && r.NDCGMean[c] >= 0 && r.NDCGMean[c] <= 1) {
				t.Errorf("%s: metric out of range: %v %v", r.Method, r.RecallMean, r.NDCGMean)
			}
			if c > 0 && r.RecallMean[c] < r.RecallMean[c-1] {
				t.Errorf("%s: recall not monotone in K: %v", r.Method, r.RecallMean)
			}
		}
	}
	// The full model's weighted row against Normal and T-CE, recall and
	// NDCG at 10 and 50, for each backbone.
	if len(res.Paired) != 16 || res.Paired[0].Backbone != BackboneGMF || res.Paired[15].Backbone != BackboneNeuMF {
		t.Errorf("%d paired comparisons, want 8 for GMF then 8 for NeuMF", len(res.Paired))
	}
	dir := t.TempDir()
	if err := res.WriteReport(dir, Meta{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dir, "recommend.md", "recommend.png", "rho.png")
	md, _ := os.ReadFile(filepath.Join(dir, "recommend.md"))
	for _, w := range []string{"| NeuMF | " + FullWeighted + " | T-CE | N@50 |", "## downstream NeuMF", "**here: RGBT-weighted NeuMF**", "| NeuMF: RGBT-weighted R@10 > T-CE |"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("report lacks %q", w)
		}
	}
	// The tasks run NeuMF first and in any interleaving; the result is the
	// same on one worker.
	serial, err := RunRecommend(context.Background(), d, RecommendConfig{
		Seeds: 2, Passes: 1, Variants: vs, GMF: GMFConfig{Epochs: 2, EvalEvery: 1}, Segments: 4, Workers: 1,
	})
	if err != nil || !reflect.DeepEqual(serial.Rows, res.Rows) || !reflect.DeepEqual(serial.Curves, res.Curves) {
		t.Errorf("one worker (err %v) gives other rows or curves than two", err)
	}
	gmfOnly, err := RunRecommend(context.Background(), d, RecommendConfig{
		Seeds: 1, Passes: 1, Variants: vs[:1], Backbones: []string{BackboneGMF}, GMF: GMFConfig{Epochs: 1}, Segments: 4,
	})
	if err != nil || len(gmfOnly.Rows) != 4 || len(gmfOnly.Paired) != 8 || gmfOnly.Paired[0].PValue != nil {
		t.Errorf("GMF only, one seed: %v, %d rows, paired %+v (want 4 rows, 8 comparisons without p)", err, len(gmfOnly.Rows), gmfOnly.Paired)
	}
	for _, bad := range [][]string{{}, {"GMF", "GMF"}, {"MF"}} {
		if _, err := RunRecommend(context.Background(), d, RecommendConfig{Backbones: bad}); err == nil {
			t.Errorf("backbones %q accepted", bad)
		}
	}
	if err := WriteJSON(filepath.Join(dir, "r.json"), res); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Paired []map[string]any `json:"paired"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "r.json"))
	if err := json.Unmarshal(b, &js); err != nil || len(js.Paired) != 16 {
		t.Fatalf("json: %v, %d paired", err, len(js.Paired))
	}
	for _, k := range []string{"backbone", "method", "baseline", "metric", "cutoff", "mean_diff", "p_value"} {
		if _, ok := js.Paired[0][k]; !ok {
			t.Errorf("json paired entry lacks %q", k)
		}
	}
}

func TestDetectEndToEnd(t *testing.T) {
	d := FromRatings(tinyRatings(40, 50, 25, 4))
	res, err := RunDetect(context.Background(), d, d, DetectConfig{
		Thresholds: []int{2}, SynthNoise: []float64{0.2}, SynthEvents: 3000, DwellShares: []float64{1, 0.3, 0},
		Seeds: 2, Bins: 5, CeilingEpochs: []int{1, 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	// ML-100k, DeCA, three dwell shares and the sparse streams' two
	// (SparseDwellShares' default), each without dwell also without
	// event types, and without times either.
	if len(res.Cases) != 11 {
		t.Fatalf("%d cases, want 11", len(res.Cases))
	}
	if name := res.Cases[7].Name; !strings.Contains(name, "sparse (900 users, 600 items)") || res.Cases[8].DwellShare != 0 {
		t.Errorf("the sparse cases: %q, dwell on %.2f and %.2f", name, res.Cases[7].DwellShare, res.Cases[8].DwellShare)
	}
	for k, c := range res.Cases {
		bare := strings.Contains(c.Name, ", no event types")
		untimed := strings.HasSuffix(c.Name, ", no event types, no times")
		if bare != (k == 5 || k == 6 || k == 9 || k == 10) || untimed != (k == 6 || k == 10) ||
			bare && !untimed && (c.DwellShare != 0 || res.Cases[k-1].Name+", no event types" != c.Name) ||
			untimed && res.Cases[k-1].Name+", no times" != c.Name {
			t.Errorf("case %d %q: the stream without types should follow the stream without dwell, and the one without times it", k, c.Name)
		}
		names := map[string]bool{}
		for _, m := range c.Metrics {
			names[m.Score] = true
		}
		synthetic := k >= 2
		if names[report.BaselineDwell] != (synthetic && c.DwellShare >= 0.5) {
			t.Errorf("%s (dwell on %.2f): dwell baseline reported = %v", c.Name, c.DwellShare, names[report.BaselineDwell])
		}
		// ML-100k and the synthetic streams carry timestamps but those
		// marked "no times"; DeCA's split (file order) does not. Those
		// without report the gap in events.
		timed := k != 1 && !untimed
		if names[report.BaselineUserGap] != timed || names[report.BaselineUserGapEvents] == timed {
			t.Errorf("%s: user_gap baseline reported = %v, user_gap_events %v", c.Name, names[report.BaselineUserGap], names[report.BaselineUserGapEvents])
		}
		if names[BaselineEventType] != (synthetic && !bare) {
			t.Errorf("%s: event_type baseline reported = %v", c.Name, names[BaselineEventType])
		}
		// On a sparse stream the batch factorisation learns the items'
		// popularity too, and on v2 the popular items are the noisy ones:
		// its ceiling may rank below chance there.
		if sparse := k >= 7; !names[OfflineCeiling] || !(c.OfflineCeiling > 0.5 || sparse && c.OfflineCeiling > 0) {
			t.Errorf("%s: offline ceiling %v", c.Name, c.OfflineCeiling)
		}
		if c.BestBaseline == OfflineCeiling || c.BestBaseline == "" {
			t.Errorf("%s: best baseline %q", c.Name, c.BestBaseline)
		}
		if synthetic && math.Abs(c.NoiseShare-0.2) > 0.05 {
			t.Errorf("%s: noise share %v", c.Name, c.NoiseShare)
		}
		for _, m := range c.Metrics {
			if !(m.ROCAUC >= 0 && m.ROCAUC <= 1 && m.PRAUC > 0 && m.PRAUC <= 1) {
				t.Errorf("%s %s: %+v", c.Name, m.Score, m)
			}
			// Baselines are reported in their better direction.
			if m.Score != "weight" && m.Score != "p_clean" && m.Score != "reliability" && m.Score != OfflineCeiling && m.ROCAUC < 0.5 {
				t.Errorf("%s %s: ROC-AUC %v below 0.5", c.Name, m.Score, m.ROCAUC)
			}
		}
		// weight and p_clean, the probabilities, carry a calibration error
		// and, from the first seed, a reliability diagram of every event.
		for i, m := range c.Metrics {
			if (m.ECE != nil) != (i < 2) || m.ECE != nil && !(*m.ECE >= 0 && *m.ECE <= 1 && *m.ECEStd >= 0) {
				t.Errorf("%s %s: ECE %v ± %v", c.Name, m.Score, m.ECE, m.ECEStd)
			}
		}
		for _, name := range []string{"weight", "p_clean"} {
			n := 0
			for _, b := range c.ReliabilityDiagrams[name] {
				n += b.Count
				if !(b.MeanPredicted >= b.Lower && b.MeanPredicted <= b.Upper && b.ShareGenuine >= 0 && b.ShareGenuine <= 1) {
					t.Errorf("%s %s: reliability diagram bin %+v", c.Name, name, b)
				}
			}
			if n != c.Events {
				t.Errorf("%s %s: the reliability diagram counts %d events of %d", c.Name, name, n, c.Events)
			}
		}
		sum := 0.0
		for _, v := range c.HistGenuine {
			sum += v
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: genuine histogram sums to %v", c.Name, sum)
		}
	}
	// Hiding dwell leaves the events, so p_clean, unchanged (the weight
	// reads dwell).
	pclean := func(c DetectCase) float64 { return c.Metrics[1].ROCAUC }
	if c := res.Cases[2]; c.Metrics[0].Score != "weight" || c.Metrics[1].Score != "p_clean" {
		t.Fatalf("scores %s, %s; want weight, p_clean first", c.Metrics[0].Score, c.Metrics[1].Score)
	}
	if pclean(res.Cases[2]) != pclean(res.Cases[4]) {
		t.Errorf("p_clean %v with dwell, %v without", pclean(res.Cases[2]), pclean(res.Cases[4]))
	}
	dir := t.TempDir()
	if err := res.WriteReport(dir, Meta{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dir, "detect.md", "detect.png", "detect_calibration.png")
}

func TestLoadDeca(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, DecaTrainFile), []byte("0\t5\t3\n2\t1\t1\n0\t1\t5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := LoadDeca(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.Users != 2 || d.Items != 2 || len(d.Rows) != 3 || d.Rows[1].Rating != 1 || d.Rows[2].Seconds != 2 {
		t.Errorf("dataset %+v", d)
	}
	if err := os.WriteFile(filepath.Join(dir, DecaTrainFile), []byte("0\t5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDeca(context.Background(), dir); err == nil {
		t.Error("two columns accepted")
	}
}

// TestGMFLearns checks that the downstream GMF ranks held-out items of a
// clustered data set far above chance.
func TestGMFLearns(t *testing.T) {
	const users, items = 80, 80
	train, test := clustered()
	g, err := TrainGMF(GMFConfig{Epochs: 20, EvalEvery: 20}, users, items, train, nil, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := Evaluate(g.Score, users, items, train, test)
	// Chance Recall@10 is about 10/70; the group structure puts every
	// test item among the user's 8 remaining in-group items.
	if m.Recall[1] < 0.8 {
		t.Errorf("Recall@10 = %.3f, want > 0.8 (chance ≈ 0.14)", m.Recall[1])
	}
	if _, err := TrainGMF(GMFConfig{}, users, items, train, []float64{1}, nil, 1); err == nil {
		t.Error("mismatched weights accepted")
	}
}

func checkFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// clustered is a data set of 80 users in 4 groups, each interacting only
// with its own quarter of 80 items, split 8:2 at random (seeded).
func clustered() (train, test []Interaction) {
	const users = 80
	r := rand.New(rand.NewPCG(5, 5))
	var rows []Interaction
	for u := range users {
		g := u % 4
		for _, k := range r.Perm(20)[:12] {
			rows = append(rows, Interaction{User: int32(u), Item: int32(g*20 + k), Rating: 5})
		}
	}
	r.Shuffle(len(rows), func(a, b int) { rows[a], rows[b] = rows[b], rows[a] })
	n := len(rows) * 8 / 10
	return rows[:n], rows[n:]
}

// TestOrdinalGradient checks gradClean against central differences of
// Σ_c r_c log P_c(s, a, θ).
func TestOrdinalGradient(t *testing.T) {
	o := &Ordinal{k: 5, cut: []float64{-1.3, -0.2, 0.4, 1.7}}
	resp := []float64{0.1, 0.05, 0.5, 0.3, 0.05}
	obj := func(o *Ordinal, s, a float64) float64 {
		pk := make([]float64, o.k)
		o.probsScaled(s, math.Exp(a), pk)
		v := 0.0
		for c, r := range resp {
			v += r * math.Log(pk[c])
		}
		return v
	}
	const h = 1e-6
	for _, tc := range []struct {
		name string
		s, a float64
	}{{"centre", 0.3, 0}, {"sharp user", -0.8, 0.7}, {"broad user", 1.2, -0.9}} {
		t.Run(tc.name, func(t *testing.T) {
			gcut := make([]float64, 4)
			gs, ga := o.gradClean(tc.s, math.Exp(tc.a), resp, gcut)
			if n := (obj(o, tc.s+h, tc.a) - obj(o, tc.s-h, tc.a)) / (2 * h); !near(gs, n, 1e-6) {
				t.Errorf("d/ds %.8f, numeric %.8f", gs, n)
			}
			if n := (obj(o, tc.s, tc.a+h) - obj(o, tc.s, tc.a-h)) / (2 * h); !near(ga, n, 1e-6) {
				t.Errorf("d/da %.8f, numeric %.8f", ga, n)
			}
			for j := range o.cut {
				keep := o.cut[j]
				o.cut[j] = keep + h
				up := obj(o, tc.s, tc.a)
				o.cut[j] = keep - h
				down := obj(o, tc.s, tc.a)
				o.cut[j] = keep
				if n := (up - down) / (2 * h); !near(gcut[j], n, 1e-6) {
					t.Errorf("d/dθ_%d %.8f, numeric %.8f", j, gcut[j], n)
				}
			}
		})
	}
}

// TestOrdinalRecoversKnownFlips fits the estimator to ordinal ratings
// flipped through a known T and checks that it recovers part of the noise.
// The bound is loose on purpose: on this well-specified data the estimator
// stays biased towards the identity (it recovers about 40% of symmetric
// η = 0.3 and 20% of pairflip η = 0.3; docs/results/transition.md, notes).
func TestOrdinalRecoversKnownFlips(t *testing.T) {
	d := FromRatings(tinyRatings(150, 120, 60, 1))
	for _, tc := range []struct {
		noise string
		rate  float64
	}{{NoiseSymmetric, 0.1}, {NoiseSymmetric, 0.3}, {NoisePairflip, 0.3}} {
		t.Run(fmt.Sprintf("%s %.1f", tc.noise, tc.rate), func(t *testing.T) {
			T, _ := NoiseMatrix(tc.noise, tc.rate, 5)
			noisy := InjectNoise(d.Rows, T, 5, 1)
			o := FitOrdinal(OrdinalConfig{}, d.Users, d.Items, 5, noisy, 1)
			l1, id := L1(o.T, T), L1(identity(5), T)
			t.Logf("L1 %.3f (identity %.3f), start %.2f, diagonal %.3f %.3f %.3f %.3f %.3f", l1, id, o.Start, o.T[0], o.T[6], o.T[12], o.T[18], o.T[24])
			if l1 > 0.85*id {
				t.Errorf("L1 %.3f, want at most 0.85 × the identity's %.3f", l1, id)
			}
			if len(o.Profile) != len(DefaultOrdinalStarts) {
				t.Errorf("profile of %d starts, want %d", len(o.Profile), len(DefaultOrdinalStarts))
			}
		})
	}
}

func TestSensitivityEndToEnd(t *testing.T) {
	d := FromRatings(tinyRatings(60, 80, 30, 4))
	res, err := RunSensitivity(context.Background(), d, SensitivityConfig{
		Lambdas: []float64{0.3, 1}, Rhos: []float64{0.4, 0.6, 0.8}, Seeds: 2, Passes: 2, Segments: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != 5 {
		t.Fatalf("%d points, want 5", len(res.Points))
	}
	// The progressive schedule's curve and the three fixed ρ.
	if len(res.Curves) != 4 || res.Curves[0].Variant != "λ = 1, progressive ρ" {
		t.Fatalf("curves %+v", res.Curves)
	}
	for _, c := range res.Curves {
		if len(c.Share) != 2*4 || c.Passes[len(c.Passes)-1] != 2 {
			t.Errorf("%s: %d points ending at pass %v, want 8 ending at 2", c.Variant, len(c.Share), c.Passes[len(c.Passes)-1])
		}
		for _, s := range c.Share {
			if !(s >= 0 && s <= 1) {
				t.Errorf("%s: share %v outside [0, 1]", c.Variant, s)
			}
		}
	}
	for _, p := range res.Points {
		if len(p.RecallMean) != len(Cutoffs) || !(p.RecallMean[len(Cutoffs)-1] > 0) {
			t.Errorf("%s: recall %v", p.Variant, p.RecallMean)
		}
	}
	dir := t.TempDir()
	if err := res.WriteReport(dir, Meta{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dir, "sensitivity.md", "sensitivity.png", "distilled.png")
	if _, err := RunSensitivity(context.Background(), d, SensitivityConfig{Rhos: []float64{0.5}}); err == nil {
		t.Error("curves at ρ not tried: no error")
	}
}

// The offline ceiling is the best of its epoch counts by ROC-AUC: a list
// scores at least as well as each of its counts alone, and as well as one
// of them.
func TestOfflineCeilingTakesTheBestCount(t *testing.T) {
	s := ratingStream(FromRatings(tinyRatings(40, 50, 25, 4)), 2, true)
	roc := func(epochs ...int) float64 {
		t.Helper()
		sc, err := offlineCeiling(s, epochs, 3)
		if err != nil {
			t.Fatal(err)
		}
		r, err := report.ROCAUC(sc, s.genuine)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one, four, both := roc(1), roc(4), roc(1, 4)
	if one == four {
		t.Fatalf("1 and 4 epochs score the same (%.4f): the test cannot tell which was taken", one)
	}
	if both != max(one, four) {
		t.Errorf("ceiling over 1 and 4 epochs: ROC-AUC %.4f, want the better of %.4f and %.4f", both, one, four)
	}
}

// TestDetectPassesRestartTimes: with Passes 2, eval detect's scored pass
// reads the users' gaps afresh: its weights equal those of a model
// stepped over the stream twice with its users' times forgotten in
// between (online.Model.ForgetTimes). Kept, every gap of the second pass
// would read as out of order and the weights would differ.
func TestDetectPassesRestartTimes(t *testing.T) {
	c := detectCase{config: synth.Config{Events: 3000, Noise: 0.2, Profile: synth.ProfileV2, DwellShare: -1}}
	s, err := c.stream(7)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DetectConfig{Model: online.DefaultConfig(), Passes: 2, CeilingEpochs: []int{1}}
	scores, _, err := detectScoresOf(context.Background(), s, cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	weights := func(forget bool) []float64 {
		m, err := online.New(cfg.Model, online.NewSource(7))
		if err != nil {
			t.Fatal(err)
		}
		w := make([]float64, len(s.events))
		var sc online.Score
		for range 2 {
			for e, ev := range s.events {
				if err := m.Step(ev, &sc); err != nil {
					t.Fatal(err)
				}
				w[e] = sc.Weight
			}
			if forget {
				m.ForgetTimes()
			}
		}
		return w
	}
	want, kept := weights(true), weights(false)
	differ := 0
	for e := range want {
		if scores[0][e] != want[e] {
			t.Fatalf("event %d: weight %v, want %v (a model stepped twice, its times forgotten in between)", e, scores[0][e], want[e])
		}
		if want[e] != kept[e] {
			differ++
		}
	}
	if differ < len(want)/2 {
		t.Errorf("only %d of %d weights depend on forgetting the times: the stream does not test it", differ, len(want))
	}
}
