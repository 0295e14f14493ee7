package eval

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
)

// WriteReport writes sensitivity.md, sensitivity.png (RQ3) and
// distilled.png (RQ4) into dir.
func (r *SensitivityResult) WriteReport(dir string, meta Meta) error {
	var b bytes.Buffer
	meta.header(&b, "RQ3 / RQ4 — sensitivity to λ and ρ, and the distilled share over passes, on ML-100k")
	fmt.Fprintf(&b, "Protocol: eval recommend's random split (issue 4): every rating is an implicit positive, split 8:1:1 by "+
		"interaction, %d noisy training interactions, and a clean test of the %d rating-5 test interactions; the denoiser "+
		"(binary mode, the defaults of online.Config but for the parameter varied) makes %d passes over the training stream, "+
		"and its classifier f ranks every item the user has no training interaction with (the paper's setting; no downstream "+
		"model). Seeds %s (each seed its own split and the denoiser's random source); mean ± std over seeds.\n\n",
		r.Train, r.TestClean, r.Passes, seedRange(r.FirstSeed, r.Seeds))
	fmt.Fprintf(&b, "RQ3 varies λ, the weight of L_cal, with the progressive ρ schedule, and ρ, held fixed for the whole run, "+
		"with λ = 1. RQ4 draws the share of events distilled (y* defined, the events L_cal and T̂ learn from) per tenth of a "+
		"pass, for the progressive schedule and fixed ρ. \"distilled\" below is that share over the whole run.\n\n")
	for _, param := range []string{"lambda", "rho"} {
		title := "λ (progressive ρ)"
		if param == "rho" {
			title = "fixed ρ (λ = 1)"
		}
		fmt.Fprintf(&b, "## %s\n\n| %s | R@10 | R@50 | N@10 | N@50 | distilled |\n|---|---|---|---|---|---|\n", title, title)
		c10, c50 := slices.Index(r.Cutoffs, 10), slices.Index(r.Cutoffs, 50)
		for _, p := range r.Points {
			if p.Param != param {
				continue
			}
			fmt.Fprintf(&b, "| %g | %s | %s | %s | %s | %.4f |\n", p.Value, pm(p.RecallMean[c10], p.RecallStd[c10]), pm(p.RecallMean[c50], p.RecallStd[c50]),
				pm(p.NDCGMean[c10], p.NDCGStd[c10]), pm(p.NDCGMean[c50], p.NDCGStd[c50]), p.Distilled)
		}
		fmt.Fprintln(&b)
		b.WriteString(r.spread(param, c10))
	}
	fmt.Fprintf(&b, "![R@10 and N@10 against λ and ρ](sensitivity.png)\n\n## Distilled share over passes (RQ4)\n\n")
	fmt.Fprintf(&b, "| schedule | first pass | last pass | whole run |\n|---|---|---|---|\n")
	for _, c := range r.Curves {
		per := len(c.Share) / max(r.Passes, 1)
		first, last := meanOf(c.Share[:per]), meanOf(c.Share[len(c.Share)-per:])
		fmt.Fprintf(&b, "| %s | %.4f | %.4f | %.4f |\n", c.Variant, first, last, meanOf(c.Share))
	}
	fmt.Fprintf(&b, "\n![distilled share over passes](distilled.png)\n")
	if err := writeAtomic(filepath.Join(dir, "sensitivity.md"), b.Bytes()); err != nil {
		return err
	}
	return r.figures(dir)
}

// spread says how far R@10 moves across the values of param, against
// the seeds' standard deviation.
func (r *SensitivityResult) spread(param string, c10 int) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	var loV, hiV, maxStd float64
	for _, p := range r.Points {
		if p.Param != param {
			continue
		}
		if v := p.RecallMean[c10]; v < lo {
			lo, loV = v, p.Value
		}
		if v := p.RecallMean[c10]; v > hi {
			hi, hiV = v, p.Value
		}
		maxStd = max(maxStd, p.RecallStd[c10])
	}
	return fmt.Sprintf("R@10 ranges from %.4f (at %g) to %.4f (at %g), a spread of %.4f against a largest std over seeds of %.4f.\n\n",
		lo, loV, hi, hiV, hi-lo, maxStd)
}

func meanOf(xs []float64) float64 {
	if len(xs) == 0 {
		return nan
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func (r *SensitivityResult) figures(dir string) error {
	c10 := slices.Index(r.Cutoffs, 10)
	var plots [][]series
	for _, param := range []string{"lambda", "rho"} {
		rec := series{name: "R@10"}
		ndcg := series{name: "N@10"}
		for _, p := range r.Points {
			if p.Param != param {
				continue
			}
			x := p.Value
			if param == "lambda" {
				x = math.Log10(p.Value)
			}
			rec.xs, rec.ys, rec.err = append(rec.xs, x), append(rec.ys, p.RecallMean[c10]), append(rec.err, p.RecallStd[c10])
			ndcg.xs, ndcg.ys, ndcg.err = append(ndcg.xs, x), append(ndcg.ys, p.NDCGMean[c10]), append(ndcg.err, p.NDCGStd[c10])
		}
		plots = append(plots, []series{rec, ndcg})
	}
	if err := gridFigure(filepath.Join(dir, "sensitivity.png"), []string{"log10 λ (progressive ρ)", "fixed ρ (λ = 1)"}, "setting", "f as recommender", plots); err != nil {
		return err
	}
	var ss []series
	for _, c := range r.Curves {
		ss = append(ss, series{name: c.Variant, xs: c.Passes, ys: c.Share})
	}
	return gridFigure(filepath.Join(dir, "distilled.png"), []string{"distilled share per tenth of a pass"}, "passes over the training stream", "share distilled", [][]series{ss})
}
