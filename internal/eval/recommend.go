package eval

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"denoiser/online"
)

// Weight scores: which of the denoiser's outputs weighs a positive in the
// downstream recommender.
const (
	// WeightProduct is reliability × p_clean: the GMM's reliability and
	// the transition-based posterior that the observed positive is clean.
	// Each ablation removes one factor (w = 1 leaves p_clean, T̂ = I
	// leaves the reliability, since p_clean ≡ 1 there).
	WeightProduct     = "product"
	WeightPClean      = "p_clean"
	WeightReliability = "reliability"
	// WeightRecommended is the output's recommended weight (online.Score.Weight,
	// the field `weight`, the one the README says to train on): p_clean
	// updated by what the event carries beside (user, item) and by the
	// user's and the item's earlier weights. The default.
	WeightRecommended = "weight"
)

// Variant is one configuration of the denoiser in the recommend
// experiment.
type Variant struct {
	Name   string
	Config online.Config
}

// DefaultVariants are the full model (progressive ρ), the ablations and the
// fixed-ρ schedules of the paper's RQ3 and RQ4.
func DefaultVariants() []Variant {
	base := online.DefaultConfig()
	base.Mode = online.ModeBinary
	v := func(name string, f func(*online.Config)) Variant {
		c := base
		f(&c)
		return Variant{name, c}
	}
	return []Variant{
		v("RGBT (progressive ρ)", func(*online.Config) {}),
		v("w = 1 (no GMM)", func(c *online.Config) { c.NoGMM = true }),
		v("T̂ = I (no transition)", func(c *online.Config) { c.NoTransition = true }),
		v("fixed ρ = 0.4", func(c *online.Config) { c.RhoSchedule, c.RhoStart = online.RhoFixed, 0.4 }),
		v("fixed ρ = 0.6", func(c *online.Config) { c.RhoSchedule, c.RhoStart = online.RhoFixed, 0.6 }),
		v("fixed ρ = 0.8", func(c *online.Config) { c.RhoSchedule, c.RhoStart = online.RhoFixed, 0.8 }),
	}
}

// RecommendConfig configures the RQ1/RQ3/RQ4 experiment.
type RecommendConfig struct {
	// Split is random (default), chrono or deca; deca needs Fixed.
	Split string
	// Fixed is the split of SplitDeca (LoadDecaSplit), the same for every
	// seed; nil for the other splits.
	Fixed *Split
	Seeds int // default 3
	// Passes is the number of passes of the denoiser over the training
	// stream; scores come from the last pass (default 5).
	Passes int
	// Weight is the score that weighs positives downstream: product
	// (default), weight, p_clean or reliability.
	Weight string
	// GMF configures the downstream model; on SplitDeca its Negatives
	// default to 1, the one sampled negative per positive of DeCA's code
	// (NSR = 1), elsewhere to GMFConfig's 4.
	GMF GMFConfig
	// Backbones are the downstream models, BackboneGMF and BackboneNeuMF
	// (default both).
	Backbones []string
	Variants  []Variant // default DefaultVariants
	// Oracle adds a row per backbone weighted by the truth: a training
	// positive with rating <= 2 weighs 0, every other 1. It reads the
	// labels no denoiser has, so it bounds what weighting can gain on the
	// split; it is a diagnosis, not a method.
	Oracle bool
	// TCEDrop is T-CE's final drop rate (default 0.2).
	TCEDrop float64
	// Segments is the number of points per pass of the distilled-share
	// curve (default 10).
	Segments int
	Workers  int // default 2
	Progress *Counter
}

func (c *RecommendConfig) defaults() error {
	if c.Split == "" {
		c.Split = SplitRandom
	}
	if c.Seeds == 0 {
		c.Seeds = 3
	}
	if c.Passes == 0 {
		c.Passes = 5
	}
	if c.Weight == "" {
		c.Weight = WeightRecommended
	}
	if c.Variants == nil {
		c.Variants = DefaultVariants()
	}
	if c.Backbones == nil {
		c.Backbones = []string{BackboneGMF, BackboneNeuMF}
	}
	for k, b := range c.Backbones {
		if b != BackboneGMF && b != BackboneNeuMF {
			return fmt.Errorf("recommend: unknown backbone %q (use %s or %s)", b, BackboneGMF, BackboneNeuMF)
		}
		if slices.Contains(c.Backbones[:k], b) {
			return fmt.Errorf("recommend: backbone %s given twice", b)
		}
	}
	if len(c.Backbones) == 0 {
		return fmt.Errorf("recommend: no backbone")
	}
	if c.TCEDrop == 0 {
		c.TCEDrop = 0.2
	}
	if c.Segments == 0 {
		c.Segments = 10
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Split == SplitDeca && c.GMF.Negatives == 0 {
		c.GMF.Negatives = 1
	}
	switch {
	case c.Split != SplitRandom && c.Split != SplitChrono && c.Split != SplitDeca:
		return fmt.Errorf("recommend: unknown split %q (use random, chrono or deca)", c.Split)
	case (c.Split == SplitDeca) != (c.Fixed != nil):
		return fmt.Errorf("recommend: split %s with fixed split %v: the deca split, and only it, needs its files (LoadDecaSplit)", c.Split, c.Fixed != nil)
	case c.Weight != WeightProduct && c.Weight != WeightPClean && c.Weight != WeightReliability && c.Weight != WeightRecommended:
		return fmt.Errorf("recommend: unknown weight %q (use product, weight, p_clean or reliability)", c.Weight)
	case c.Seeds < 1 || c.Passes < 1 || c.Workers < 1 || c.Segments < 1:
		return fmt.Errorf("recommend: seeds, passes, workers and segments must be positive")
	}
	for _, v := range c.Variants {
		if err := v.Config.Validate(); err != nil {
			return fmt.Errorf("recommend: variant %s: %w", v.Name, err)
		}
	}
	return nil
}

// Row is one method's metrics, mean and std over seeds.
type Row struct {
	Method     string        `json:"method"`
	Group      string        `json:"group"`
	RecallMean []float64     `json:"recall_mean"`
	RecallStd  []float64     `json:"recall_std"`
	NDCGMean   []float64     `json:"ndcg_mean"`
	NDCGStd    []float64     `json:"ndcg_std"`
	PerSeed    []RankMetrics `json:"per_seed"`
	// WeightMean is the mean raw weight the denoiser gave the training
	// positives (weighted rows), and WeightRating5 / WeightRating12 the
	// mean weight of the rating-5 and rating-1/2 positives.
	WeightMean     float64 `json:"weight_mean,omitempty"`
	WeightRating5  float64 `json:"weight_rating5,omitempty"`
	WeightRating12 float64 `json:"weight_rating12,omitempty"`
}

// Curve is the share of events distilled over the denoiser's run.
type Curve struct {
	Variant string    `json:"variant"`
	Passes  []float64 `json:"passes"` // x: passes over the stream so far
	Share   []float64 `json:"share"`  // y: share of the segment's events distilled
}

// RecommendResult is the outcome of RunRecommend.
type RecommendResult struct {
	Meta  Meta   `json:"meta"`
	Split string `json:"split"`
	// Log is set for an event log's data set (LoadEventLog): genuine
	// events are its rating 5, noise its rating 1.
	Log       bool     `json:"log,omitempty"`
	Seeds     int      `json:"seeds"`
	Passes    int      `json:"passes"`
	Weight    string   `json:"weight"`
	Negatives int      `json:"negatives"`
	Backbones []string `json:"backbones"`
	Dim       int      `json:"dim"`
	Hidden    []int    `json:"hidden"`
	Cutoffs   []int    `json:"cutoffs"`
	Train     int      `json:"train"`
	Valid     int      `json:"valid"`
	TestClean int      `json:"test_clean"`
	// TestUsers is the number of users averaged (those with a test item);
	// TestMasked the number of test interactions among the user's Seen
	// ones, never ranked; RecallCeiling the mean Recall a perfect ranking
	// would reach, the share of each user's test items that are ranked.
	TestUsers     int     `json:"test_users"`
	TestMasked    int     `json:"test_masked"`
	RecallCeiling float64 `json:"recall_ceiling"`
	Rows          []Row   `json:"rows"`
	// Paired compares the full model's weighted rows with Normal and T-CE
	// seed by seed.
	Paired []Paired `json:"paired"`
	Curves []Curve  `json:"curves"`
}

// FullWeighted is the row of the downstream model weighted by the full
// model (DefaultVariants' first).
var FullWeighted = DefaultVariants()[0].Name + "-weighted"

// OracleWeighted is the row of RecommendConfig.Oracle, OracleWeightedLog
// its name on an event log (LoadEventLog: noise is rating 1).
const (
	OracleWeighted    = "oracle-weighted (rating ≤ 2 weighs 0)"
	OracleWeightedLog = "oracle-weighted (noise weighs 0)"
)

// oracleRow is the oracle row's name on d.
func oracleRow(d *Dataset) string {
	if d.Events != nil {
		return OracleWeightedLog
	}
	return OracleWeighted
}

// Downstream models.
const (
	BackboneGMF   = "GMF"
	BackboneNeuMF = "NeuMF"
)

// Groups of rows: one per backbone (DownstreamGroup) and the denoiser's f.
const (
	GroupDownstream      = "downstream GMF"
	GroupDownstreamNeuMF = "downstream NeuMF"
	GroupDenoiserF       = "denoiser's f as the recommender"
)

// DownstreamGroup is the group of the rows of a backbone.
func DownstreamGroup(backbone string) string { return "downstream " + backbone }

type recTask struct {
	seed     uint64
	kind     string // normal, tce, variant
	variant  int
	backbone string // normal and tce
}

// cost ranks the task's running time: 1 for a task that trains a NeuMF
// (a variant trains every backbone), 0 for the others.
func (t recTask) cost(backbones []string) int {
	if t.backbone == BackboneNeuMF || (t.kind == "variant" && slices.Contains(backbones, BackboneNeuMF)) {
		return 1
	}
	return 0
}

type recOut struct {
	rows  []recRow // downstream and f rows
	curve []float64
}

type recRow struct {
	method, group string
	m             RankMetrics
	w, w5, w12    float64
}

// RunRecommend runs the downstream experiment on d.
func RunRecommend(ctx context.Context, d *Dataset, cfg RecommendConfig) (*RecommendResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if d.Events != nil && cfg.Split == SplitDeca {
		return nil, fmt.Errorf("recommend: an event log has no deca split (use random or chrono)")
	}
	var tasks []recTask
	for s := range cfg.Seeds {
		seed := uint64(s + 1)
		for _, b := range cfg.Backbones {
			tasks = append(tasks, recTask{seed, "normal", 0, b}, recTask{seed, "tce", 0, b})
			if cfg.Oracle {
				tasks = append(tasks, recTask{seed, "oracle", 0, b})
			}
		}
		for v := range cfg.Variants {
			tasks = append(tasks, recTask{seed, "variant", v, ""})
		}
	}
	if cfg.Progress != nil {
		cfg.Progress.Total.Store(int64(len(tasks)))
	}
	splits := make([]Split, cfg.Seeds)
	tests := make([][]Interaction, cfg.Seeds)
	for s := range splits {
		if cfg.Fixed != nil {
			// The test file is the clean test.
			splits[s], tests[s] = *cfg.Fixed, cfg.Fixed.Test
			continue
		}
		sp, err := SplitData(d, cfg.Split, uint64(s+1))
		if err != nil {
			return nil, err
		}
		splits[s], tests[s] = sp, CleanTest(sp.Test, 5)
	}
	// The tasks that train a NeuMF take ten times as long as the others:
	// they run first, so that the workers finish together rather than one
	// of them on a NeuMF while the others are done. The results keep the
	// task order.
	run := make([]int, len(tasks))
	for n := range run {
		run[n] = n
	}
	slices.SortStableFunc(run, func(a, b int) int { return cmp.Compare(tasks[b].cost(cfg.Backbones), tasks[a].cost(cfg.Backbones)) })
	ran, err := parallel(ctx, len(tasks), cfg.Workers, func(k int) (recOut, error) {
		t := tasks[run[k]]
		sp, test := splits[t.seed-1], tests[t.seed-1]
		defer cfg.Progress.job()
		switch t.kind {
		case "normal", "tce":
			gc, name := cfg.GMF, "Normal"
			if t.kind == "tce" {
				gc.DropRate, name = cfg.TCEDrop, "T-CE"
			}
			score, epochs, err := trainDownstream(t.backbone, gc, d, sp.Train, nil, sp.Valid, t.seed)
			if err != nil {
				return recOut{}, err
			}
			cfg.Progress.events(len(sp.Train) * epochs)
			return recOut{rows: []recRow{{method: name, group: DownstreamGroup(t.backbone), m: Evaluate(score, d.Users, d.Items, sp.Seen, test)}}}, nil
		case "oracle":
			weights := make([]float64, len(sp.Train))
			for n, x := range sp.Train {
				if x.Rating > 2 {
					weights[n] = 1
				}
			}
			score, epochs, err := trainDownstream(t.backbone, cfg.GMF, d, sp.Train, weights, sp.Valid, t.seed)
			if err != nil {
				return recOut{}, err
			}
			cfg.Progress.events(len(sp.Train) * epochs)
			return recOut{rows: []recRow{{method: oracleRow(d), group: DownstreamGroup(t.backbone), m: Evaluate(score, d.Users, d.Items, sp.Seen, test)}}}, nil
		}
		v := cfg.Variants[t.variant]
		return runVariant(cfg, d, v, sp, test, t.seed)
	})
	if err != nil {
		return nil, err
	}
	outs := make([]recOut, len(tasks))
	for k, n := range run {
		outs[n] = ran[k]
	}
	res := &RecommendResult{Split: cfg.Split, Log: d.Events != nil, Seeds: cfg.Seeds, Passes: cfg.Passes, Weight: cfg.Weight, Negatives: cfg.GMF.withDefaults().Negatives, Backbones: cfg.Backbones,
		Dim: cfg.GMF.withDefaults().Dim, Hidden: cfg.GMF.withDefaults().Hidden,
		Cutoffs: Cutoffs, Train: len(splits[0].Train), Valid: len(splits[0].Valid), TestClean: len(tests[0])}
	res.TestUsers, res.TestMasked, res.RecallCeiling = recallCeiling(d.Users, splits[0].Seen, tests[0])
	// Gather rows by (group, method) in task order of the first seed.
	type key struct{ group, method string }
	var order []key
	acc := map[key]*Row{}
	curves := map[int][]float64{}
	for n, t := range tasks {
		for _, r := range outs[n].rows {
			k := key{r.group, r.method}
			row, ok := acc[k]
			if !ok {
				row = &Row{Method: r.method, Group: r.group}
				acc[k] = row
				order = append(order, k)
			}
			row.PerSeed = append(row.PerSeed, r.m)
			row.WeightMean += r.w / float64(cfg.Seeds)
			row.WeightRating5 += r.w5 / float64(cfg.Seeds)
			row.WeightRating12 += r.w12 / float64(cfg.Seeds)
		}
		if t.kind == "variant" {
			c := curves[t.variant]
			if c == nil {
				c = make([]float64, len(outs[n].curve))
			}
			for j, v := range outs[n].curve {
				c[j] += v / float64(cfg.Seeds)
			}
			curves[t.variant] = c
		}
	}
	var groups []string
	for _, b := range cfg.Backbones {
		groups = append(groups, DownstreamGroup(b))
	}
	for _, g := range append(groups, GroupDenoiserF) {
		for _, k := range order {
			if k.group != g {
				continue
			}
			row := acc[k]
			row.RecallMean, row.RecallStd, row.NDCGMean, row.NDCGStd = summarize(row.PerSeed)
			res.Rows = append(res.Rows, *row)
		}
	}
	for _, b := range cfg.Backbones {
		res.Paired = append(res.Paired, pairedComparisons(res.Rows, Cutoffs, b, DownstreamGroup(b), FullWeighted, []string{"Normal", "T-CE"})...)
		if cfg.Oracle {
			res.Paired = append(res.Paired, pairedComparisons(res.Rows, Cutoffs, b, DownstreamGroup(b), oracleRow(d), []string{"Normal", FullWeighted})...)
		}
	}
	for v := range cfg.Variants {
		c := Curve{Variant: cfg.Variants[v].Name}
		for j, s := range curves[v] {
			c.Passes = append(c.Passes, float64(j+1)/float64(cfg.Segments))
			c.Share = append(c.Share, s)
		}
		res.Curves = append(res.Curves, c)
	}
	return res, nil
}

// runVariant trains one denoiser variant on the training stream, ranks
// with its classifier f, and trains the downstream GMF on the positives
// weighted by its last-pass scores.
func runVariant(cfg RecommendConfig, d *Dataset, v Variant, sp Split, test []Interaction, seed uint64) (recOut, error) {
	train := sp.Train
	weights := make([]float64, len(train))
	m, curve, err := trainDenoiser(v, train, d.Events, cfg.Split != SplitDeca, cfg.Passes, cfg.Segments, seed, func(n int, sc *online.Score) {
		switch cfg.Weight {
		case WeightReliability:
			weights[n] = sc.Reliability
		case WeightPClean:
			weights[n] = sc.PClean
		case WeightRecommended:
			weights[n] = sc.Weight
		default:
			weights[n] = sc.Reliability * sc.PClean
		}
	})
	if err != nil {
		return recOut{}, err
	}
	cfg.Progress.events(len(train) * cfg.Passes)
	fm := Evaluate(modelScorer(m, d.Items), d.Users, d.Items, sp.Seen, test)
	var w, w5, w12 float64
	var n5, n12 int
	for n, x := range train {
		w += weights[n]
		switch {
		case x.Rating == 5:
			w5 += weights[n]
			n5++
		case x.Rating <= 2:
			w12 += weights[n]
			n12++
		}
	}
	mean := w / float64(len(train))
	// Weights are rescaled to mean 1 so that weighting changes the mix of
	// positives, not the overall step size.
	norm := make([]float64, len(weights))
	for n, x := range weights {
		norm[n] = x / max(mean, 1e-12)
	}
	out := recOut{curve: curve}
	for _, b := range cfg.Backbones {
		score, epochs, err := trainDownstream(b, cfg.GMF, d, train, norm, sp.Valid, seed)
		if err != nil {
			return recOut{}, err
		}
		cfg.Progress.events(len(train) * epochs)
		out.rows = append(out.rows, recRow{method: v.Name + "-weighted", group: DownstreamGroup(b), m: Evaluate(score, d.Users, d.Items, sp.Seen, test),
			w: mean, w5: w5 / float64(max(n5, 1)), w12: w12 / float64(max(n12, 1))})
	}
	out.rows = append(out.rows, recRow{method: v.Name, group: GroupDenoiserF, m: fm})
	return out, nil
}

// summarize returns the mean and std over seeds of Recall and NDCG at
// each cutoff.
func summarize(perSeed []RankMetrics) (recallMean, recallStd, ndcgMean, ndcgStd []float64) {
	for c := range Cutoffs {
		var rs, ns []float64
		for _, m := range perSeed {
			rs, ns = append(rs, m.Recall[c]), append(ns, m.NDCG[c])
		}
		rm, rsd := MeanStd(rs)
		nm, nsd := MeanStd(ns)
		recallMean, recallStd = append(recallMean, rm), append(recallStd, rsd)
		ndcgMean, ndcgStd = append(ndcgMean, nm), append(ndcgStd, nsd)
	}
	return recallMean, recallStd, ndcgMean, ndcgStd
}

// trainDenoiser runs passes of the denoiser variant v (binary mode) over
// train and returns the model and the distilled share of each of the
// segments per pass (min(segments, len(train)) of them, segment j the
// events from j·len/segments on, so that their sizes differ by at most
// one); last, if not nil, sees every event's score in the last pass.
//
// The denoiser steps each interaction as `denoiser replay` of the log
// would give it: an event log's event (events, LoadEventLog) with every
// field it has; otherwise (user, item), with the interaction's time where
// timed (the gap since the user's previous event; without it the model
// counts events). Each pass's times start over (online.Model.ForgetTimes,
// as in replay --passes). The deca split's Seconds are line indices, not
// times: it is not timed.
func trainDenoiser(v Variant, train []Interaction, events []online.Event, timed bool, passes, segments int, seed uint64, last func(n int, sc *online.Score)) (*online.Model, []float64, error) {
	m, err := online.New(v.Config, online.NewSource(seed))
	if err != nil {
		return nil, nil, err
	}
	segments = max(1, min(segments, len(train)))
	var curve []float64
	var sc online.Score
	for pass := range passes {
		distilled, start, next := 0, 0, 1
		for n, x := range train {
			var ev online.Event
			if events != nil {
				ev = events[x.Seconds]
			} else {
				ev = online.Event{User: UserID(x.User), Item: ItemID(x.Item), TimeMS: x.Seconds * 1000, HasTime: timed}
			}
			if err := m.Step(ev, &sc); err != nil {
				return nil, nil, fmt.Errorf("variant %s: step: %w", v.Name, err)
			}
			if sc.Distilled >= 0 {
				distilled++
			}
			if end := next * len(train) / segments; n+1 == end {
				curve = append(curve, float64(distilled)/float64(end-start))
				distilled, start = 0, end
				next++
			}
			if last != nil && pass == passes-1 {
				last(n, &sc)
			}
		}
		m.ForgetTimes()
	}
	return m, curve, nil
}

// trainDownstream trains the backbone on train (positive n weighted by
// weights[n], nil: 1) with early stopping on valid, and returns its scorer
// and the epoch kept.
func trainDownstream(backbone string, cfg GMFConfig, d *Dataset, train []Interaction, weights []float64, valid []Interaction, seed uint64) (Scorer, int, error) {
	if backbone == BackboneNeuMF {
		n, err := TrainNeuMF(cfg, d.Users, d.Items, train, weights, valid, seed)
		if err != nil {
			return nil, 0, err
		}
		return n.Score, n.Epochs, nil
	}
	g, err := TrainGMF(cfg, d.Users, d.Items, train, weights, valid, seed)
	if err != nil {
		return nil, 0, err
	}
	return g.Score, g.Epochs, nil
}

// modelScorer ranks items by the denoiser's clean posterior f_1(x).
func modelScorer(m *online.Model, items int) Scorer {
	f := make([]float64, m.K())
	return func(u int32, dst []float64) {
		uid := UserID(u)
		for i := range dst {
			if m.Predict(uid, ItemID(int32(i)), f) {
				dst[i] = f[len(f)-1]
			} else {
				dst[i] = -1 // unseen item: last
			}
		}
	}
}

// recallCeiling returns the number of users with a test item, the number
// of test interactions among the seen ones (never ranked), and the mean
// over those users of the share of their test items that are ranked: the
// Recall at any cutoff of a perfect ranking with the cutoff at least the
// user's test list.
func recallCeiling(users int, seen, test []Interaction) (testUsers, masked int, ceiling float64) {
	seenBy := byUser(seen, users)
	rel := byUser(test, users)
	for u, items := range rel {
		if len(items) == 0 {
			continue
		}
		ranked := 0
		for i := range items {
			if seenBy[u][i] {
				masked++
			} else {
				ranked++
			}
		}
		testUsers++
		ceiling += float64(ranked) / float64(len(items))
	}
	if testUsers > 0 {
		ceiling /= float64(testUsers)
	}
	return testUsers, masked, ceiling
}
