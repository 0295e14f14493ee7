package eval

import (
	"context"
	"fmt"
	"strconv"

	"denoiser/internal/report"
	"denoiser/internal/synth"
	"denoiser/online"
)

// Scores compared by the detect experiment: the model's, then the
// label-free baselines of package report (each in its better direction,
// per seed).
var detectScores = []string{"p_clean", "reliability", report.BaselineLoss,
	report.BaselineItemPopularity, report.BaselineUserActivity, report.BaselinePairCount, report.BaselineDwell}

// firstBaseline is the index in detectScores of the first baseline.
const firstBaseline = 2

// dwellScore is the index in detectScores of the dwell baseline, which is
// reported only where at least half the events carry a dwell time.
const dwellScore = 6

// DetectConfig configures the detection experiment.
type DetectConfig struct {
	// Thresholds are the rating thresholds R of the ML-100k cases (rating
	// <= R is noise; default 2 and 3). No ML-100k case without a dataset.
	Thresholds []int
	// SynthNoise are the noise shares of the synthetic streams (default
	// 0.1, 0.2, 0.3); SynthEvents their length (default 100000).
	SynthNoise  []float64
	SynthEvents int
	Seeds       int // default 3
	// Passes over each stream; scores come from the last (default 1: the
	// stream stage's own prequential scores).
	Passes int
	// Model configures the denoiser (binary mode); the loss baseline is
	// the same configuration with Plain set.
	Model    online.Config
	Bins     int // histogram bins (default 20)
	Workers  int // default 2
	Progress *Counter
}

func (c *DetectConfig) defaults() error {
	if c.Thresholds == nil {
		c.Thresholds = []int{2, 3}
	}
	if c.SynthNoise == nil {
		c.SynthNoise = []float64{0.1, 0.2, 0.3}
	}
	if c.SynthEvents == 0 {
		c.SynthEvents = 100000
	}
	if c.Seeds == 0 {
		c.Seeds = 3
	}
	if c.Passes == 0 {
		c.Passes = 1
	}
	if c.Bins == 0 {
		c.Bins = 20
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Seeds < 1 || c.Passes < 1 || c.Workers < 1 || c.Bins < 2 || c.SynthEvents < 1 {
		return fmt.Errorf("detect: seeds, passes, workers, synthetic events must be positive and bins at least 2")
	}
	c.Model.Mode = online.ModeBinary
	return c.Model.Validate()
}

// DetectMetric is one score's metrics on one case, mean ± std over seeds.
type DetectMetric struct {
	Score       string  `json:"score"`
	ROCAUC      float64 `json:"roc_auc"`
	ROCAUCStd   float64 `json:"roc_auc_std"`
	PRAUC       float64 `json:"pr_auc"` // average precision, genuine as the positive class
	PRAUCStd    float64 `json:"pr_auc_std"`
	PRAUCNoise  float64 `json:"pr_auc_noise"` // average precision of finding noise (score negated)
	PRAUCNoiseS float64 `json:"pr_auc_noise_std"`
}

// DetectCase is one stream with known truth.
type DetectCase struct {
	Name       string         `json:"name"`
	Events     int            `json:"events"`
	NoiseShare float64        `json:"noise_share"`
	Metrics    []DetectMetric `json:"metrics"`
	// BestBaseline names the label-free baseline with the highest mean
	// ROC-AUC.
	BestBaseline string `json:"best_baseline"`
	// HistGenuine and HistNoise are the reliability histograms (shares of
	// each class per bin over [0,1]) of the first seed.
	HistGenuine []float64 `json:"hist_genuine"`
	HistNoise   []float64 `json:"hist_noise"`
}

// DetectResult is the outcome of RunDetect.
type DetectResult struct {
	Meta   Meta         `json:"meta"`
	Seeds  int          `json:"seeds"`
	Passes int          `json:"passes"`
	Cases  []DetectCase `json:"cases"`
}

// stream is a case's events and truth.
type stream struct {
	name    string
	events  []online.Event
	genuine []bool
}

// RunDetect scores ML-100k (d may be nil to skip it) with rating
// thresholds as truth, and synthetic streams with their generator's
// truth.
func RunDetect(ctx context.Context, d *Dataset, cfg DetectConfig) (*DetectResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var streams []stream
	if d != nil {
		rows := append([]Interaction(nil), d.Rows...)
		SortByTime(rows)
		for _, th := range cfg.Thresholds {
			s := stream{name: fmt.Sprintf("ML-100k, rating ≤ %d as noise", th)}
			for _, x := range rows {
				s.events = append(s.events, online.Event{User: UserID(x.User), Item: ItemID(x.Item)})
				s.genuine = append(s.genuine, x.Rating > th)
			}
			streams = append(streams, s)
		}
	}
	for _, noise := range cfg.SynthNoise {
		g, err := synth.New(synth.Config{Events: cfg.SynthEvents, Noise: noise, Seed: 1})
		if err != nil {
			return nil, fmt.Errorf("detect: %w", err)
		}
		s := stream{name: fmt.Sprintf("synthetic, %d events, noise %.1f", cfg.SynthEvents, noise)}
		for {
			e, ok := g.Next()
			if !ok {
				break
			}
			s.events = append(s.events, online.Event{User: "u" + strconv.Itoa(e.User+1), Item: "i" + strconv.Itoa(e.Item+1)})
			s.genuine = append(s.genuine, !e.Cause.Noise())
		}
		streams = append(streams, s)
	}
	type job struct{ stream, seed int }
	var jobs []job
	for s := range streams {
		for seed := range cfg.Seeds {
			jobs = append(jobs, job{s, seed + 1})
		}
	}
	if cfg.Progress != nil {
		cfg.Progress.Total.Store(int64(len(jobs)))
	}
	type out struct {
		scores     [7][]float64 // in detectScores order
		dwellShare float64
	}
	outs, err := parallel(ctx, len(jobs), cfg.Workers, func(n int) (out, error) {
		j := jobs[n]
		s := streams[j.stream]
		seed := uint64(j.seed)
		m, err := online.New(cfg.Model, online.NewSource(seed))
		if err != nil {
			return out{}, err
		}
		pc := cfg.Model
		pc.Plain = true
		base, err := online.New(pc, online.NewSource(seed))
		if err != nil {
			return out{}, err
		}
		var o out
		for k := range o.scores {
			o.scores[k] = make([]float64, len(s.events))
		}
		counter := report.NewCounter()
		for e, ev := range s.events {
			c := counter.Observe(ev.User, ev.Item, ev.DwellMS, ev.HasDwell)
			for k, v := range c {
				o.scores[firstBaseline+1+k][e] = v
			}
		}
		o.dwellShare = counter.DwellShare()
		var sc, sb online.Score
		for pass := range cfg.Passes {
			for e, ev := range s.events {
				if err := m.Step(ev, &sc); err != nil {
					return out{}, fmt.Errorf("detect %s: %w", s.name, err)
				}
				if err := base.Step(ev, &sb); err != nil {
					return out{}, fmt.Errorf("detect %s: baseline: %w", s.name, err)
				}
				if pass == cfg.Passes-1 {
					o.scores[0][e], o.scores[1][e], o.scores[2][e] = sc.PClean, sc.Reliability, -sb.Loss
				}
			}
			if err := ctx.Err(); err != nil {
				return out{}, err
			}
		}
		cfg.Progress.events(2 * len(s.events) * cfg.Passes)
		cfg.Progress.job()
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	res := &DetectResult{Seeds: cfg.Seeds, Passes: cfg.Passes}
	for si, s := range streams {
		c := DetectCase{Name: s.name, Events: len(s.events)}
		noise := make([]bool, len(s.genuine))
		for k, g := range s.genuine {
			noise[k] = !g
			if !g {
				c.NoiseShare++
			}
		}
		c.NoiseShare /= float64(len(s.genuine))
		best := 0.0
		for k, name := range detectScores {
			var roc, ap, apn []float64
			for n, j := range jobs {
				if j.stream != si || (k == dwellScore && outs[n].dwellShare < 0.5) {
					continue
				}
				sc := outs[n].scores[k]
				if k >= firstBaseline {
					sc, _ = report.BetterDirection(sc, s.genuine)
				}
				a, err := report.ROCAUC(sc, s.genuine)
				if err != nil {
					return nil, fmt.Errorf("detect %s %s: %w", s.name, name, err)
				}
				p, _ := report.AveragePrecision(sc, s.genuine)
				neg := make([]float64, len(sc))
				for x, v := range sc {
					neg[x] = -v
				}
				pn, _ := report.AveragePrecision(neg, noise)
				roc, ap, apn = append(roc, a), append(ap, p), append(apn, pn)
			}
			if len(roc) == 0 {
				continue
			}
			dm := DetectMetric{Score: name}
			dm.ROCAUC, dm.ROCAUCStd = MeanStd(roc)
			dm.PRAUC, dm.PRAUCStd = MeanStd(ap)
			dm.PRAUCNoise, dm.PRAUCNoiseS = MeanStd(apn)
			c.Metrics = append(c.Metrics, dm)
			if k >= firstBaseline && (c.BestBaseline == "" || dm.ROCAUC > best) {
				c.BestBaseline, best = name, dm.ROCAUC
			}
		}
		for n, j := range jobs {
			if j.stream == si && j.seed == 1 {
				c.HistGenuine, c.HistNoise = histogram(outs[n].scores[1], s.genuine, cfg.Bins)
			}
		}
		res.Cases = append(res.Cases, c)
	}
	return res, nil
}

// histogram returns the share of genuine and of noisy events per bin of
// [0,1] (values outside are clamped).
func histogram(x []float64, genuine []bool, bins int) (g, n []float64) {
	g, n = make([]float64, bins), make([]float64, bins)
	var ng, nn float64
	for k, v := range x {
		b := min(max(int(v*float64(bins)), 0), bins-1)
		if genuine[k] {
			g[b]++
			ng++
		} else {
			n[b]++
			nn++
		}
	}
	for b := range bins {
		if ng > 0 {
			g[b] /= ng
		}
		if nn > 0 {
			n[b] /= nn
		}
	}
	return g, n
}
