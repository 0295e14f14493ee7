package eval

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"denoiser/internal/report"
	"denoiser/internal/synth"
	"denoiser/online"
)

// Scores compared by the detect experiment: the model's (weight, the
// recommended one, first), then the label-free baselines (each in its
// better direction, per seed), then the offline ceiling.
var detectScores = []string{report.RecommendedScore, "p_clean", "reliability", report.BaselineLoss,
	report.BaselineItemPopularity, report.BaselineUserActivity, report.BaselinePairCount, report.BaselineDwell,
	report.BaselineUserGap, report.BaselineUserGapEvents, BaselineEventType, OfflineCeiling}

// Indices in detectScores.
const (
	probabilityScores = 2 // weight and p_clean, the first two, are probabilities: their calibration is reported
	reliabilityScore  = 2
	firstBaseline     = 3  // the first label-free baseline
	dwellScore        = 7  // reported only where at least half the events carry a dwell time
	gapScore          = 8  // reported only where at least half the events have a user gap
	gapEventsScore    = 9  // reported only where gapScore is not and half the events have one in events
	typeScore         = 10 // reported only where the stream has more than one event type
	ceilingScore      = 11 // not a baseline: it sees the whole stream
	numScores         = 12
)

// BaselineEventType ranks an event by the engagement its type shows
// (return < view < click < cart < purchase); OfflineCeiling is a batch
// matrix factorisation trained on the whole stream, each event scored by
// its loss: what a model that sees everything, many times, reaches.
const (
	BaselineEventType = "event_type"
	OfflineCeiling    = "offline_ceiling"
)

// DetectConfig configures the detection experiment.
type DetectConfig struct {
	// Thresholds are the rating thresholds R of the ML-100k and DeCA
	// cases (rating <= R is noise; default 2 and 3). No such case without
	// a dataset.
	Thresholds []int
	// SynthNoise are the noise shares of the synthetic streams (default
	// 0.2); SynthEvents their length (default 200000).
	SynthNoise  []float64
	SynthEvents int
	// SynthProfile is the generator's profile (default synth.ProfileV2).
	SynthProfile string
	// DwellShares are the shares of synthetic events that carry a dwell
	// time; every noise share is run with each (default 1, 0.3, 0).
	DwellShares []float64
	// SparseDwellShares are the dwell shares of the sparse synthetic
	// streams (default 1, 0; empty: none): the same generator with
	// SynthEvents·3/10 users and SynthEvents/5 items, about 5 events per
	// item, where the classifier learns the items' popularity rather than
	// the users' taste (docs/design/model.md, "Sparse streams").
	SparseDwellShares []float64
	// Seeds is the number of seeds (default 2), from FirstSeed (default
	// 1). Seed n seeds the model and, on synthetic streams, the generator
	// too, so the spread of a synthetic case covers both worlds and models.
	Seeds     int
	FirstSeed int
	// Passes over each stream; scores come from the last (default 1: the
	// stream stage's own prequential scores).
	Passes int
	// CeilingEpochs are the epoch counts of the offline ceiling's matrix
	// factorisations (default 1, 2, 4). A batch model trains on the events
	// it scores, so with more epochs it memorises the noise and ranks it as
	// genuine, and the best count differs from stream to stream (v2, no
	// dwell: 1 epoch is best at 100k events, 2 at 200k). The ceiling of a
	// seed is the best of them by ROC-AUC: chosen with the truth, which a
	// ceiling may be.
	CeilingEpochs []int
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
		c.SynthNoise = []float64{0.2}
	}
	if c.SynthEvents == 0 {
		c.SynthEvents = 200000
	}
	if c.SynthProfile == "" {
		c.SynthProfile = synth.ProfileV2
	}
	if c.DwellShares == nil {
		c.DwellShares = []float64{1, 0.3, 0}
	}
	if c.SparseDwellShares == nil {
		c.SparseDwellShares = []float64{1, 0}
	}
	if c.Seeds == 0 {
		c.Seeds = 2
	}
	if c.FirstSeed == 0 {
		c.FirstSeed = 1
	}
	if c.Passes == 0 {
		c.Passes = 1
	}
	if c.CeilingEpochs == nil {
		c.CeilingEpochs = []int{1, 2, 4}
	}
	if c.Bins == 0 {
		c.Bins = 20
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Seeds < 1 || c.FirstSeed < 1 || c.Passes < 1 || c.Workers < 1 || c.Bins < 2 || c.SynthEvents < 1 || len(c.CeilingEpochs) == 0 || slices.Min(c.CeilingEpochs) < 1 {
		return fmt.Errorf("detect: seeds, first seed, passes, workers, synthetic events, ceiling epochs must be positive and bins at least 2")
	}
	for _, d := range slices.Concat(c.DwellShares, c.SparseDwellShares) {
		if !(d >= 0 && d <= 1) {
			return fmt.Errorf("detect: dwell share %v outside [0, 1]", d)
		}
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
	// ECE is the expected calibration error (report.CalibrationBins bins)
	// of the scores that are probabilities (weight, p_clean); absent for
	// the others.
	ECE    *float64 `json:"ece,omitempty"`
	ECEStd *float64 `json:"ece_std,omitempty"`
}

// DetectCase is one stream with known truth.
type DetectCase struct {
	Name string `json:"name"`
	// Events and NoiseShare are means over the seeds (synthetic streams
	// differ per seed).
	Events     int            `json:"events"`
	NoiseShare float64        `json:"noise_share"`
	DwellShare float64        `json:"dwell_share"`
	Metrics    []DetectMetric `json:"metrics"`
	// BestBaseline names the label-free baseline with the highest mean
	// ROC-AUC.
	BestBaseline string `json:"best_baseline"`
	// OfflineCeiling is the offline ceiling's mean ROC-AUC.
	OfflineCeiling float64 `json:"offline_ceiling"`
	// HistGenuine and HistNoise are the reliability histograms (shares of
	// each class per bin over [0,1]) of the first seed.
	HistGenuine []float64 `json:"hist_genuine"`
	HistNoise   []float64 `json:"hist_noise"`
	// ReliabilityDiagrams holds, for weight and p_clean, the reliability
	// diagram (non-empty bins of report.CalibrationBins) of the first seed.
	ReliabilityDiagrams map[string][]report.CalibrationBin `json:"reliability_diagrams"`
}

// DetectResult is the outcome of RunDetect.
type DetectResult struct {
	Meta          Meta         `json:"meta"`
	Seeds         int          `json:"seeds"`
	FirstSeed     int          `json:"first_seed"`
	Passes        int          `json:"passes"`
	CeilingEpochs []int        `json:"ceiling_epochs"`
	Cases         []DetectCase `json:"cases"`

	// TransitionUserOffset and DwellDirection are the denoiser's settings
	// of those names (the only ones eval detect can change from the
	// defaults).
	TransitionUserOffset bool   `json:"transition_user_offset,omitempty"`
	DwellDirection       string `json:"dwell_direction,omitempty"`
}

// stream is a case's events and truth.
type stream struct {
	events  []online.Event // with their times where the stream has them (TimeMS)
	types   []synth.Type   // nil: the stream has no event types
	genuine []bool
}

// detectCase is a stream to score: fixed, or drawn per seed.
type detectCase struct {
	name   string
	fixed  *stream
	config synth.Config // used when fixed is nil, with Seed set per seed
	// bare drops the generated events' types: events of (user, item,
	// time) only, as many real logs are (a news site's clicks, a shop's
	// reviews).
	bare bool
	// untimed drops the times too: a log of (user, item) pairs, whose
	// order is its only clock.
	untimed bool
}

func (c detectCase) stream(seed uint64) (*stream, error) {
	if c.fixed != nil {
		return c.fixed, nil
	}
	sc := c.config
	sc.Seed = seed
	g, err := synth.New(sc)
	if err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	s := &stream{}
	for {
		e, ok := g.Next()
		if !ok {
			return s, nil
		}
		ev := online.Event{User: "u" + strconv.Itoa(e.User+1), Item: "i" + strconv.Itoa(e.Item+1),
			DwellMS: e.DwellMS, HasDwell: !e.NoDwell, TimeMS: e.TS, HasTime: !c.untimed}
		if !c.bare {
			ev.Kind = e.Type.String()
			s.types = append(s.types, e.Type)
		}
		s.events = append(s.events, ev)
		s.genuine = append(s.genuine, !e.Cause.Noise())
	}
}

// ratingStream is d's interactions in time order with rating <= th as
// noise, each with its Seconds as its time where timed.
func ratingStream(d *Dataset, th int, timed bool) *stream {
	rows := append([]Interaction(nil), d.Rows...)
	SortByTime(rows)
	s := &stream{}
	for _, x := range rows {
		s.events = append(s.events, online.Event{User: UserID(x.User), Item: ItemID(x.Item), TimeMS: x.Seconds * 1000, HasTime: timed})
		s.genuine = append(s.genuine, x.Rating > th)
	}
	return s
}

// engagement orders event types for the event_type baseline.
var engagement = map[synth.Type]float64{synth.ReturnType: 0, synth.View: 1, synth.Click: 2, synth.Cart: 3, synth.PurchaseType: 4}

// RunDetect scores ML-100k (d may be nil to skip it) and the DeCA split
// of it (deca may be nil) with rating thresholds as truth, and synthetic
// streams with their generator's truth.
func RunDetect(ctx context.Context, d, deca *Dataset, cfg DetectConfig) (*DetectResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var cases []detectCase
	for _, ds := range []struct {
		name  string
		d     *Dataset
		timed bool // Seconds is a time (DeCA's is the line's index)
	}{{"ML-100k", d, true}, {"DeCA ML-100k train (file order)", deca, false}} {
		if ds.d == nil {
			continue
		}
		for _, th := range cfg.Thresholds {
			cases = append(cases, detectCase{name: fmt.Sprintf("%s, rating ≤ %d as noise", ds.name, th), fixed: ratingStream(ds.d, th, ds.timed)})
		}
	}
	for _, noise := range cfg.SynthNoise {
		for _, sparse := range []bool{false, true} {
			shares, kind := cfg.DwellShares, ""
			if sparse {
				shares, kind = cfg.SparseDwellShares, fmt.Sprintf(" sparse (%d users, %d items)", cfg.SynthEvents*3/10, cfg.SynthEvents/5)
			}
			for _, dwell := range shares {
				sc := synth.Config{Events: cfg.SynthEvents, Noise: noise, Profile: cfg.SynthProfile, DwellShare: dwell}
				if sparse {
					sc.Users, sc.Items = cfg.SynthEvents*3/10, cfg.SynthEvents/5
				}
				if dwell == 0 {
					sc.DwellShare = -1 // synth: negative means none
				}
				if err := sc.Resolve().Validate(); err != nil {
					return nil, fmt.Errorf("detect: %w", err)
				}
				name := fmt.Sprintf("synthetic %s%s, %d events, noise %.2g, dwell on %.0f%%", cfg.SynthProfile, kind, cfg.SynthEvents, noise, 100*dwell)
				cases = append(cases, detectCase{name: name, config: sc})
				if dwell == 0 {
					cases = append(cases, detectCase{name: name + ", no event types", config: sc, bare: true},
						detectCase{name: name + ", no event types, no times", config: sc, bare: true, untimed: true})
				}
			}
		}
	}
	type job struct{ stream, seed int }
	var jobs []job
	for s := range cases {
		for seed := range cfg.Seeds {
			jobs = append(jobs, job{s, cfg.FirstSeed + seed})
		}
	}
	if cfg.Progress != nil {
		cfg.Progress.Total.Store(int64(len(jobs)))
	}
	type metric struct{ roc, ap, apn, ece float64 }
	type out struct {
		metrics    [numScores]*metric // nil: not reported
		diagrams   [probabilityScores][]report.CalibrationBin
		events     int
		noise      float64
		dwellShare float64
		histG      []float64
		histN      []float64
	}
	outs, err := parallel(ctx, len(jobs), cfg.Workers, func(n int) (out, error) {
		j := jobs[n]
		c := cases[j.stream]
		seed := uint64(j.seed)
		s, err := c.stream(seed)
		if err != nil {
			return out{}, err
		}
		scores, dwellShare, err := detectScoresOf(ctx, s, cfg, seed)
		if err != nil {
			return out{}, fmt.Errorf("detect %s: %w", c.name, err)
		}
		o := out{events: len(s.events), dwellShare: dwellShare}
		noise := make([]bool, len(s.genuine))
		for k, g := range s.genuine {
			noise[k] = !g
			if !g {
				o.noise++
			}
		}
		o.noise /= float64(len(s.genuine))
		for k, sc := range scores {
			if sc == nil {
				continue
			}
			if k >= firstBaseline && k < ceilingScore {
				sc, _ = report.BetterDirection(sc, s.genuine)
			}
			roc, err := report.ROCAUC(sc, s.genuine)
			if err != nil {
				return out{}, fmt.Errorf("detect %s %s: %w", c.name, detectScores[k], err)
			}
			ap, _ := report.AveragePrecision(sc, s.genuine)
			neg := make([]float64, len(sc))
			for x, v := range sc {
				neg[x] = -v
			}
			apn, _ := report.AveragePrecision(neg, noise)
			o.metrics[k] = &metric{roc: roc, ap: ap, apn: apn}
			if k < probabilityScores {
				o.metrics[k].ece, o.diagrams[k] = report.ReliabilityDiagram(sc, s.genuine, report.CalibrationBins)
			}
		}
		o.histG, o.histN = histogram(scores[reliabilityScore], s.genuine, cfg.Bins)
		ceilingEpochs := 0
		for _, e := range cfg.CeilingEpochs {
			ceilingEpochs += e
		}
		cfg.Progress.events((2*cfg.Passes + ceilingEpochs) * len(s.events))
		cfg.Progress.job()
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	res := &DetectResult{Seeds: cfg.Seeds, FirstSeed: cfg.FirstSeed, Passes: cfg.Passes, CeilingEpochs: cfg.CeilingEpochs,
		TransitionUserOffset: cfg.Model.TransitionUserOffset, DwellDirection: cfg.Model.DwellDirection}
	for si, sc := range cases {
		c := DetectCase{Name: sc.name}
		var events, noise, dwell []float64
		for n, j := range jobs {
			if j.stream != si {
				continue
			}
			events, noise, dwell = append(events, float64(outs[n].events)), append(noise, outs[n].noise), append(dwell, outs[n].dwellShare)
			if j.seed == cfg.FirstSeed {
				c.HistGenuine, c.HistNoise = outs[n].histG, outs[n].histN
				c.ReliabilityDiagrams = map[string][]report.CalibrationBin{}
				for k, d := range outs[n].diagrams {
					c.ReliabilityDiagrams[detectScores[k]] = d
				}
			}
		}
		ev, _ := MeanStd(events)
		c.Events = int(math.Round(ev))
		c.NoiseShare, _ = MeanStd(noise)
		c.DwellShare, _ = MeanStd(dwell)
		best := 0.0
		for k, name := range detectScores {
			var roc, ap, apn, ece []float64
			for n, j := range jobs {
				if j.stream != si || outs[n].metrics[k] == nil {
					continue
				}
				m := outs[n].metrics[k]
				roc, ap, apn, ece = append(roc, m.roc), append(ap, m.ap), append(apn, m.apn), append(ece, m.ece)
			}
			if len(roc) == 0 {
				continue
			}
			dm := DetectMetric{Score: name}
			dm.ROCAUC, dm.ROCAUCStd = MeanStd(roc)
			dm.PRAUC, dm.PRAUCStd = MeanStd(ap)
			dm.PRAUCNoise, dm.PRAUCNoiseS = MeanStd(apn)
			if k < probabilityScores {
				mean, std := MeanStd(ece)
				dm.ECE, dm.ECEStd = &mean, &std
			}
			c.Metrics = append(c.Metrics, dm)
			switch {
			case k == ceilingScore:
				c.OfflineCeiling = dm.ROCAUC
			case k >= firstBaseline && (c.BestBaseline == "" || dm.ROCAUC > best):
				c.BestBaseline, best = name, dm.ROCAUC
			}
		}
		res.Cases = append(res.Cases, c)
	}
	return res, nil
}

// detectScoresOf computes every score of detectScores on s (nil where a
// score is not reported: dwell and user_gap where less than half the
// events carry one) and the share of events with a dwell time.
func detectScoresOf(ctx context.Context, s *stream, cfg DetectConfig, seed uint64) ([numScores][]float64, float64, error) {
	var scores [numScores][]float64
	m, err := online.New(cfg.Model, online.NewSource(seed))
	if err != nil {
		return scores, 0, err
	}
	base, err := online.New(cfg.Model.Baseline(), online.NewSource(seed))
	if err != nil {
		return scores, 0, err
	}
	for k := range ceilingScore {
		scores[k] = make([]float64, len(s.events))
	}
	counter := report.NewCounter()
	for e, ev := range s.events {
		c := counter.Observe(ev.User, ev.Item, ev.DwellMS, ev.HasDwell, ev.TimeMS, ev.HasTime)
		for k, v := range c {
			scores[firstBaseline+1+k][e] = v
		}
	}
	dwellShare := counter.DwellShare()
	if !counter.Reported(report.BaselineDwell) {
		scores[dwellScore] = nil
	}
	if !counter.Reported(report.BaselineUserGap) {
		scores[gapScore] = nil
	}
	if !counter.Reported(report.BaselineUserGapEvents) {
		scores[gapEventsScore] = nil
	}
	types := map[synth.Type]bool{}
	for e, t := range s.types {
		scores[typeScore][e] = engagement[t]
		types[t] = true
	}
	if len(types) < 2 {
		scores[typeScore] = nil
	}
	var sc, sb online.Score
	for pass := range cfg.Passes {
		for e, ev := range s.events {
			if err := m.Step(ev, &sc); err != nil {
				return scores, 0, err
			}
			if err := base.Step(ev, &sb); err != nil {
				return scores, 0, fmt.Errorf("baseline: %w", err)
			}
			if pass == cfg.Passes-1 {
				scores[0][e], scores[1][e], scores[2][e], scores[3][e] = sc.Weight, sc.PClean, sc.Reliability, -sb.Loss
			}
		}
		if err := ctx.Err(); err != nil {
			return scores, 0, err
		}
		m.ForgetTimes() // the next pass's times start over, as in replay --passes
	}
	scores[ceilingScore], err = offlineCeiling(s, cfg.CeilingEpochs, seed)
	return scores, dwellShare, err
}

// offlineCeiling trains a GMF for each count of epochs over every event of
// s (sampled negatives, no early stopping), scores each event by the
// final logit (a higher logit is a lower loss) and returns the scores of
// the count with the best ROC-AUC.
func offlineCeiling(s *stream, epochs []int, seed uint64) ([]float64, error) {
	users, items := map[string]int32{}, map[string]int32{}
	rows := make([]Interaction, len(s.events))
	for e, ev := range s.events {
		rows[e] = Interaction{User: denseID(users, ev.User), Item: denseID(items, ev.Item), Rating: 1, Clean: 1}
	}
	var best []float64
	bestROC := -1.0
	for _, n := range epochs {
		g, err := TrainGMF(GMFConfig{Epochs: n, EvalEvery: n}, len(users), len(items), rows, nil, nil, seed)
		if err != nil {
			return nil, fmt.Errorf("offline ceiling: %w", err)
		}
		out := make([]float64, len(rows))
		for e, x := range rows {
			out[e] = g.score(x.User, x.Item)
		}
		roc, err := report.ROCAUC(out, s.genuine)
		if err != nil {
			return nil, fmt.Errorf("offline ceiling: %w", err)
		}
		if roc > bestROC {
			best, bestROC = out, roc
		}
	}
	return best, nil
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
