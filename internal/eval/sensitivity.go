package eval

import (
	"context"
	"fmt"
	"slices"

	"denoiser/online"
)

// SensitivityConfig configures the paper's RQ3 (sensitivity to λ and ρ)
// and RQ4 (distilled share over passes, progressive against fixed ρ).
type SensitivityConfig struct {
	// Lambdas are the weights of L_cal tried with the progressive ρ
	// schedule (default 0.1, 0.3, 1, 3, 10).
	Lambdas []float64
	// Rhos are the fixed ρ tried with λ = 1 (default 0.4 … 0.9 in steps
	// of 0.1).
	Rhos []float64
	// Curves are the fixed ρ whose distilled share is drawn beside the
	// progressive schedule's (default 0.4, 0.6, 0.8); each must be in Rhos.
	Curves    []float64
	Seeds     int // default 2
	FirstSeed int // default 1
	// Passes is the number of passes of the denoiser over the training
	// stream (default 5, as in eval recommend).
	Passes int
	// Segments is the number of points per pass of the distilled-share
	// curve (default 10).
	Segments int
	Workers  int // default 2
	Progress *Counter
}

func (c *SensitivityConfig) defaults() error {
	if c.Lambdas == nil {
		c.Lambdas = []float64{0.1, 0.3, 1, 3, 10}
	}
	if c.Rhos == nil {
		c.Rhos = []float64{0.4, 0.5, 0.6, 0.7, 0.8, 0.9}
	}
	if c.Curves == nil {
		c.Curves = []float64{0.4, 0.6, 0.8}
	}
	if c.Seeds == 0 {
		c.Seeds = 2
	}
	if c.FirstSeed == 0 {
		c.FirstSeed = 1
	}
	if c.Passes == 0 {
		c.Passes = 5
	}
	if c.Segments == 0 {
		c.Segments = 10
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Seeds < 1 || c.FirstSeed < 1 || c.Passes < 1 || c.Segments < 1 || c.Workers < 1 {
		return fmt.Errorf("sensitivity: seeds, first seed, passes, segments and workers must be positive")
	}
	if len(c.Lambdas) == 0 || len(c.Rhos) == 0 {
		return fmt.Errorf("sensitivity: no λ or no ρ to try")
	}
	for _, r := range c.Curves {
		if !slices.Contains(c.Rhos, r) {
			return fmt.Errorf("sensitivity: curve ρ = %v is not among the ρ tried %v", r, c.Rhos)
		}
	}
	for _, v := range c.variants() {
		if err := v.Config.Validate(); err != nil {
			return fmt.Errorf("sensitivity: %s: %w", v.Name, err)
		}
	}
	return nil
}

// sensitivityPoint is one configuration of the sweep.
type sensitivityPoint struct {
	param string // "lambda" or "rho"
	value float64
}

func (c *SensitivityConfig) points() []sensitivityPoint {
	var ps []sensitivityPoint
	for _, l := range c.Lambdas {
		ps = append(ps, sensitivityPoint{"lambda", l})
	}
	for _, r := range c.Rhos {
		ps = append(ps, sensitivityPoint{"rho", r})
	}
	return ps
}

// variants are the denoiser configurations of the points, in order.
func (c *SensitivityConfig) variants() []Variant {
	var vs []Variant
	for _, p := range c.points() {
		cfg := online.DefaultConfig()
		cfg.Mode = online.ModeBinary
		var name string
		if p.param == "lambda" {
			cfg.Lambda = p.value
			name = fmt.Sprintf("λ = %g, progressive ρ", p.value)
		} else {
			cfg.RhoSchedule, cfg.RhoStart = online.RhoFixed, p.value
			name = fmt.Sprintf("fixed ρ = %g, λ = 1", p.value)
		}
		vs = append(vs, Variant{name, cfg})
	}
	return vs
}

// SensitivityPoint is the denoiser's f as a recommender at one setting,
// mean and std over seeds, with the share of events distilled over the
// whole run.
type SensitivityPoint struct {
	Param      string    `json:"param"` // lambda or rho
	Value      float64   `json:"value"`
	Variant    string    `json:"variant"`
	RecallMean []float64 `json:"recall_mean"`
	RecallStd  []float64 `json:"recall_std"`
	NDCGMean   []float64 `json:"ndcg_mean"`
	NDCGStd    []float64 `json:"ndcg_std"`
	Distilled  float64   `json:"distilled"`
}

// SensitivityResult is the outcome of RunSensitivity.
type SensitivityResult struct {
	Meta      Meta               `json:"meta"`
	Seeds     int                `json:"seeds"`
	FirstSeed int                `json:"first_seed"`
	Passes    int                `json:"passes"`
	Cutoffs   []int              `json:"cutoffs"`
	Train     int                `json:"train"`
	TestClean int                `json:"test_clean"`
	Points    []SensitivityPoint `json:"points"`
	// Curves are the distilled share per tenth of a pass of the
	// progressive schedule (λ = 1) and of the fixed ρ of Config.Curves.
	Curves []Curve `json:"curves"`
}

// RunSensitivity trains the denoiser (binary mode) on each seed's random
// 8:1:1 split at every λ (progressive ρ) and every fixed ρ (λ = 1), ranks
// the clean test with its classifier f, and records the distilled share
// over the passes.
func RunSensitivity(ctx context.Context, d *Dataset, cfg SensitivityConfig) (*SensitivityResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if !slices.Contains(cfg.Lambdas, 1) {
		return nil, fmt.Errorf("sensitivity: λ = 1 (the default, whose run gives the progressive curve) is not among %v", cfg.Lambdas)
	}
	vs := cfg.variants()
	points := cfg.points()
	splits := make([]Split, cfg.Seeds)
	tests := make([][]Interaction, cfg.Seeds)
	for s := range splits {
		sp, err := SplitData(d, SplitRandom, uint64(cfg.FirstSeed+s))
		if err != nil {
			return nil, err
		}
		splits[s], tests[s] = sp, CleanTest(sp.Test, 5)
	}
	type out struct {
		m     RankMetrics
		curve []float64
	}
	n := len(vs) * cfg.Seeds
	if cfg.Progress != nil {
		cfg.Progress.Total.Store(int64(n))
	}
	outs, err := parallel(ctx, n, cfg.Workers, func(k int) (out, error) {
		v, s := vs[k%len(vs)], k/len(vs)
		defer cfg.Progress.job()
		m, curve, err := trainDenoiser(v, splits[s].Train, nil, true, cfg.Passes, cfg.Segments, uint64(cfg.FirstSeed+s), nil)
		if err != nil {
			return out{}, err
		}
		cfg.Progress.events(len(splits[s].Train) * cfg.Passes)
		return out{Evaluate(modelScorer(m, d.Items), d.Users, d.Items, splits[s].Seen, tests[s]), curve}, nil
	})
	if err != nil {
		return nil, err
	}
	res := &SensitivityResult{Seeds: cfg.Seeds, FirstSeed: cfg.FirstSeed, Passes: cfg.Passes, Cutoffs: Cutoffs,
		Train: len(splits[0].Train), TestClean: len(tests[0])}
	curves := make([][]float64, len(vs))
	for v := range vs {
		p := SensitivityPoint{Param: points[v].param, Value: points[v].value, Variant: vs[v].Name}
		var perSeed []RankMetrics
		for s := range cfg.Seeds {
			perSeed = append(perSeed, outs[s*len(vs)+v].m)
		}
		p.RecallMean, p.RecallStd, p.NDCGMean, p.NDCGStd = summarize(perSeed)
		for s := range cfg.Seeds {
			c := outs[s*len(vs)+v].curve
			if curves[v] == nil {
				curves[v] = make([]float64, len(c))
			}
			for j, x := range c {
				curves[v][j] += x / float64(cfg.Seeds)
			}
		}
		for _, x := range curves[v] {
			p.Distilled += x / float64(len(curves[v]))
		}
		res.Points = append(res.Points, p)
	}
	for v, p := range points {
		if (p.param == "lambda" && p.value == 1) || (p.param == "rho" && slices.Contains(cfg.Curves, p.value)) {
			c := Curve{Variant: vs[v].Name}
			for j, s := range curves[v] {
				c.Passes = append(c.Passes, float64(j+1)/float64(cfg.Segments))
				c.Share = append(c.Share, s)
			}
			res.Curves = append(res.Curves, c)
		}
	}
	return res, nil
}
