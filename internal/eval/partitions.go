package eval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/segmentio/kafka-go"

	"denoiser/internal/report"
	"denoiser/internal/synth"
	"denoiser/online"
)

// PartitionsConfig configures RunPartitions: what splitting a stream into
// partition models costs, with and without merging their item rows
// (online.Model.Publish and Merge; docs/design/partitions.md).
type PartitionsConfig struct {
	// Model configures every model (the lab passes online.DefaultConfig()).
	Model online.Config
	// Partitions is the number of partitions P (default 3).
	Partitions int
	// Every lists the merge intervals, in events of the whole stream
	// (default 1000): after every such many events, each partition model
	// publishes its item rows' change and merges every other's (a
	// synchronous round, as a barrier at a common merge point gives).
	Every []int
	// Lagged adds, for each interval, a variant whose models merge at
	// each round the deltas of the round before: what a member of the
	// service merges when the other members' publications reach it an
	// interval late.
	Lagged bool
	// Log, when set, is a JSON-lines event log with a truth field on
	// every event (as replay --truth field reads it), scored as one more
	// case.
	Log string
	// SynthEvents, SynthNoise, SynthProfile and DwellShares set the
	// synthetic streams, as in DetectConfig (defaults 200000, 0.2, v2,
	// 1, 0.3, 0).
	SynthEvents  int
	SynthNoise   float64
	SynthProfile string
	DwellShares  []float64
	// Threshold is the rating at or below which an ML-100k rating is noise
	// (default 2).
	Threshold int
	// Seeds is the number of seeds (default 2); Workers the parallel runs.
	Seeds, Workers int
	Progress       *Counter
}

func (c *PartitionsConfig) defaults() error {
	if c.Partitions == 0 {
		c.Partitions = 3
	}
	if len(c.Every) == 0 {
		c.Every = []int{1000}
	}
	if c.SynthEvents == 0 {
		c.SynthEvents = 200000
	}
	if c.SynthNoise == 0 {
		c.SynthNoise = 0.2
	}
	if c.SynthProfile == "" {
		c.SynthProfile = synth.ProfileV2
	}
	if len(c.DwellShares) == 0 {
		c.DwellShares = []float64{1, 0.3, 0}
	}
	if c.Threshold == 0 {
		c.Threshold = 2
	}
	if c.Seeds == 0 {
		c.Seeds = 2
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Partitions < 2 {
		return fmt.Errorf("partitions: %d partitions, want at least 2", c.Partitions)
	}
	for _, e := range c.Every {
		if e < 1 {
			return fmt.Errorf("partitions: merge interval %d, want at least 1 event", e)
		}
	}
	return c.Model.Validate()
}

// PartitionsRow is one variant's ROC-AUC of weight and of p_clean on one
// stream, mean and standard deviation over the seeds.
type PartitionsRow struct {
	Variant   string  `json:"variant"`
	Every     int     `json:"every,omitempty"` // merge interval, 0: no merging
	ROCAUC    float64 `json:"roc_auc"`
	ROCAUCStd float64 `json:"roc_auc_std"`
	PClean    float64 `json:"p_clean_roc_auc"`
	PCleanStd float64 `json:"p_clean_roc_auc_std"`
}

// PartitionsCase is one stream's rows, with the best label-free baseline
// of the same run.
type PartitionsCase struct {
	Name         string          `json:"name"`
	Events       int             `json:"events"`
	Rows         []PartitionsRow `json:"rows"`
	BestBaseline string          `json:"best_baseline"`
	BaselineAUC  float64         `json:"best_baseline_roc_auc"`
}

// PartitionsResult is the outcome of RunPartitions.
type PartitionsResult struct {
	Meta       Meta             `json:"meta"`
	Partitions int              `json:"partitions"`
	Seeds      int              `json:"seeds"`
	Cases      []PartitionsCase `json:"cases"`
}

// partitionOf returns the partition, among p, of each event's user:
// murmur2 of the id, as Kafka's default partitioner
// and the demo's producer (kafka.Murmur2Balancer) spread records keyed
// by user, so that a recorded log splits here as the demo splits it.
func partitionOf(events []online.Event, p int) []int {
	all := make([]int, p)
	for q := range all {
		all[q] = q
	}
	parts := make([]int, len(events))
	var bal kafka.Murmur2Balancer
	for e, ev := range events {
		parts[e] = bal.Balance(kafka.Message{Key: []byte(ev.User)}, all...)
	}
	return parts
}

// partitionVariant is one way of scoring a stream.
type partitionVariant struct {
	name       string
	partitions int  // 1: one model
	every      int  // 0: no merging
	lagged     bool // merge the deltas of the round before
}

// RunPartitions scores ML-100k (d may be nil) and synthetic streams with
// one model, with P partition models that never merge, and with P
// partition models that merge their item rows every N events, and reports
// the ROC-AUC of weight of each, beside the best label-free baseline.
func RunPartitions(ctx context.Context, d *Dataset, cfg PartitionsConfig) (*PartitionsResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var cases []detectCase
	if cfg.Log != "" {
		s, err := readLogStream(ctx, cfg.Log)
		if err != nil {
			return nil, fmt.Errorf("partitions: %w", err)
		}
		cases = append(cases, detectCase{name: "log " + filepath.Base(cfg.Log), fixed: s})
	}
	if d != nil {
		cases = append(cases, detectCase{name: fmt.Sprintf("ML-100k, rating ≤ %d as noise", cfg.Threshold), fixed: ratingStream(d, cfg.Threshold, true)})
	}
	for _, dwell := range cfg.DwellShares {
		sc := synth.Config{Events: cfg.SynthEvents, Noise: cfg.SynthNoise, Profile: cfg.SynthProfile, DwellShare: dwell}
		if dwell == 0 {
			sc.DwellShare = -1 // synth: negative means none
		}
		if err := sc.Resolve().Validate(); err != nil {
			return nil, fmt.Errorf("partitions: %w", err)
		}
		cases = append(cases, detectCase{
			name:   fmt.Sprintf("synthetic %s, %d events, noise %.2g, dwell on %.0f%%", cfg.SynthProfile, cfg.SynthEvents, cfg.SynthNoise, 100*dwell),
			config: sc,
		})
	}
	variants := []partitionVariant{{"one model", 1, 0, false}, {fmt.Sprintf("%d partitions, isolated", cfg.Partitions), cfg.Partitions, 0, false}}
	for _, e := range cfg.Every {
		variants = append(variants, partitionVariant{fmt.Sprintf("%d partitions, merged every %d events", cfg.Partitions, e), cfg.Partitions, e, false})
	}
	if cfg.Lagged {
		for _, e := range cfg.Every {
			variants = append(variants, partitionVariant{fmt.Sprintf("%d partitions, merged every %d events, a round late", cfg.Partitions, e), cfg.Partitions, e, true})
		}
	}
	type job struct{ c, seed, v int } // v = -1: the baselines
	var jobs []job
	for c := range cases {
		for seed := 1; seed <= cfg.Seeds; seed++ {
			for v := -1; v < len(variants); v++ {
				jobs = append(jobs, job{c, seed, v})
			}
		}
	}
	if cfg.Progress != nil {
		cfg.Progress.Total.Store(int64(len(jobs)))
	}
	type out struct {
		auc, pclean float64
		events      int
		baselines   map[string]float64 // the baselines' job
	}
	outs, err := parallel(ctx, len(jobs), cfg.Workers, func(n int) (out, error) {
		j := jobs[n]
		s, err := cases[j.c].stream(uint64(j.seed))
		if err != nil {
			return out{}, err
		}
		defer cfg.Progress.job()
		defer cfg.Progress.events(len(s.events))
		if j.v < 0 {
			b, err := labelFreeBaselines(s, cfg.Model, uint64(j.seed))
			return out{baselines: b, events: len(s.events)}, err
		}
		v := variants[j.v]
		w, pc, err := partitionedScores(s, cfg.Model, uint64(j.seed), v.partitions, v.every, v.lagged)
		if err != nil {
			return out{}, fmt.Errorf("partitions %s, %s: %w", cases[j.c].name, v.name, err)
		}
		o := out{events: len(s.events)}
		if o.auc, err = report.ROCAUC(w, s.genuine); err != nil {
			return out{}, err
		}
		o.pclean, err = report.ROCAUC(pc, s.genuine)
		return o, err
	})
	if err != nil {
		return nil, err
	}
	res := &PartitionsResult{Partitions: cfg.Partitions, Seeds: cfg.Seeds}
	for c := range cases {
		pc := PartitionsCase{Name: cases[c].name}
		base := map[string][]float64{}
		for v := -1; v < len(variants); v++ {
			var aucs, pcs []float64
			for n, j := range jobs {
				if j.c != c || j.v != v {
					continue
				}
				pc.Events = outs[n].events
				aucs, pcs = append(aucs, outs[n].auc), append(pcs, outs[n].pclean)
				for name, auc := range outs[n].baselines {
					base[name] = append(base[name], auc)
				}
			}
			if v < 0 {
				continue
			}
			row := PartitionsRow{Variant: variants[v].name, Every: variants[v].every}
			row.ROCAUC, row.ROCAUCStd = MeanStd(aucs)
			row.PClean, row.PCleanStd = MeanStd(pcs)
			pc.Rows = append(pc.Rows, row)
		}
		for _, name := range append([]string{report.BaselineLoss}, report.CountBaselines()...) { // a fixed order: ties go to the first
			if aucs, ok := base[name]; ok {
				if mean, _ := MeanStd(aucs); pc.BestBaseline == "" || mean > pc.BaselineAUC {
					pc.BestBaseline, pc.BaselineAUC = name, mean
				}
			}
		}
		res.Cases = append(res.Cases, pc)
	}
	return res, nil
}

// partitionedScores scores s with p partition models (seeded from seed
// and their partition) that merge their item rows every `every` events of
// the stream (never when 0), the deltas of that round or, lagged, of the
// round before, and returns each event's weight and p_clean.
func partitionedScores(s *stream, cfg online.Config, seed uint64, p, every int, lagged bool) (w, pclean []float64, err error) {
	models := make([]*online.Model, p)
	for q := range models {
		if models[q], err = online.NewPartition(cfg, seed, int32(q)); err != nil {
			return nil, nil, err
		}
		if every > 0 {
			models[q].StartSharing()
		}
	}
	deltas, before := make([]online.Shared, p), make([]online.Shared, p) // this round's, lagged: the round before's
	parts := partitionOf(s.events, p)
	w, pclean = make([]float64, len(s.events)), make([]float64, len(s.events))
	var sc online.Score
	for e, ev := range s.events {
		if err := models[parts[e]].Step(ev, &sc); err != nil && !errors.Is(err, online.ErrNumerical) {
			return nil, nil, err
		}
		w[e], pclean[e] = sc.Weight, sc.PClean
		if every == 0 || (e+1)%every != 0 {
			continue
		}
		for q, m := range models {
			if err := m.Publish(&deltas[q]); err != nil {
				return nil, nil, err
			}
		}
		merge := deltas
		if lagged {
			merge = before
			deltas, before = before, deltas // this round's are the next round's
			if e+1 == every {
				continue // the first round has no round before
			}
		}
		for q, m := range models {
			for r := range merge {
				if r == q {
					continue
				}
				if err := m.Merge(&merge[r]); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return w, pclean, nil
}

// labelFreeBaselines returns the ROC-AUC of each label-free baseline on s,
// in its better direction: the counting baselines (dwell and user_gap only
// when at least half the events carry one) and the loss baseline (a plain
// model of cfg with seed's source, its per-event loss negated), as eval
// detect computes them.
func labelFreeBaselines(s *stream, cfg online.Config, seed uint64) (map[string]float64, error) {
	counter := report.NewCounter()
	names := report.CountBaselines()
	scores := make([][]float64, len(names))
	for k := range scores {
		scores[k] = make([]float64, len(s.events))
	}
	for e, ev := range s.events {
		for k, v := range counter.Observe(ev.User, ev.Item, ev.DwellMS, ev.HasDwell, ev.TimeMS, ev.HasTime) {
			scores[k][e] = v
		}
	}
	aucs := map[string]float64{}
	for k, name := range names {
		if !counter.Reported(name) {
			continue
		}
		sc, _ := report.BetterDirection(scores[k], s.genuine)
		auc, err := report.ROCAUC(sc, s.genuine)
		if err != nil {
			return nil, err
		}
		aucs[name] = auc
	}
	plain, err := online.New(cfg.Baseline(), online.NewSource(seed))
	if err != nil {
		return nil, err
	}
	loss := make([]float64, len(s.events))
	var sc online.Score
	for e, ev := range s.events {
		if err := plain.Step(ev, &sc); err != nil && !errors.Is(err, online.ErrNumerical) {
			return nil, fmt.Errorf("loss baseline: %w", err)
		}
		loss[e] = -sc.Loss
	}
	better, _ := report.BetterDirection(loss, s.genuine)
	if aucs[report.BaselineLoss], err = report.ROCAUC(better, s.genuine); err != nil {
		return nil, err
	}
	return aucs, nil
}

// WriteReport writes partitions.md into dir.
func (r *PartitionsResult) WriteReport(dir string, meta Meta) error {
	var b bytes.Buffer
	meta.header(&b, "Partition models: what splitting the stream costs, and what merging wins back")
	fmt.Fprintf(&b, "Each stream is split by user (murmur2 of the id, as Kafka's default partitioner and the demo's producer split it) into %d partitions, each scored by a model of its own "+
		"(online.NewPartition: seed and partition; every partition model starts from the same networks), and compared with one model over the whole stream. Merged: after every N "+
		"events of the stream, every partition model publishes the change of its item rows since its last publication and adds "+
		"every other's (online.Model.Publish and Merge, the sum rule of docs/design/partitions.md), and likewise the context's "+
		"statistics (their own rule: online/mergecontext.go); the networks and the mixture stay local. A round late: each round merges the deltas published at the round before (the first merges nothing), as a member of the service merges the others' publications when they reach it an interval late. ROC-AUC of weight and of p_clean, mean ± std over seeds 1–%d, with the best label-free "+
		"baseline of the same run (by its mean over the seeds).\n\n", r.Partitions, r.Seeds)
	for _, c := range r.Cases {
		fmt.Fprintf(&b, "## %s (%d events)\n\n| variant | weight | against one model | p_clean | against one model |\n|---|---|---|---|---|\n", c.Name, c.Events)
		one, onePC := c.Rows[0].ROCAUC, c.Rows[0].PClean
		for _, row := range c.Rows {
			fmt.Fprintf(&b, "| %s | %s | %+.4f | %s | %+.4f |\n", row.Variant, pm(row.ROCAUC, row.ROCAUCStd), row.ROCAUC-one,
				pm(row.PClean, row.PCleanStd), row.PClean-onePC)
		}
		fmt.Fprintf(&b, "| best baseline: %s | %.4f | %+.4f | | |\n\n", c.BestBaseline, c.BaselineAUC, c.BaselineAUC-one)
	}
	return writeAtomic(filepath.Join(dir, "partitions.md"), b.Bytes())
}
