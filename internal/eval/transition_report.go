package eval

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
)

// cell returns the cell for (noise, rate, estimator), or nil.
func (r *TransitionResult) cell(noise string, rate float64, est string) *TransitionCell {
	for k := range r.Cells {
		c := &r.Cells[k]
		if c.Noise == noise && c.Rate == rate && c.Estimator == est {
			return c
		}
	}
	return nil
}

func (r *TransitionResult) noises() (ns []string, rates []float64) {
	for _, c := range r.Cells {
		if !slices.Contains(ns, c.Noise) {
			ns = append(ns, c.Noise)
		}
		if !slices.Contains(rates, c.Rate) {
			rates = append(rates, c.Rate)
		}
	}
	return ns, rates
}

// WriteReport writes transition.md and transition.png into dir.
func (r *TransitionResult) WriteReport(dir string, meta Meta) error {
	var b bytes.Buffer
	meta.header(&b, "RQ2 — transition-matrix estimation error on ML-100k")
	noises, rates := r.noises()
	fmt.Fprintf(&b, "Ratings are K = 5 classes. Flip noise is injected into the training ratings (random 8:1:1 split per seed; "+
		"%d training interactions); each estimator is trained on the noisy training ratings and scored on the %d held-out (test) "+
		"interactions by the mean over instances of Σ_ij |T̂_ij(x) − T_ij|, T the true flip matrix. Mean ± std over %d seeds; "+
		"the online model makes %d passes over the training stream.\n\n", r.Train, r.HeldOut, r.Seeds, r.Passes)
	fmt.Fprintf(&b, "Estimators: **rgbt** — the model's own instance-level T̂(x); **anchor** — class-level anchor points on a plain "+
		"model's noisy posterior (97th percentile); **ordinal** — class-level EM with an ordinal (cumulative-logit) clean model. "+
		"*identity* is T̂ = I (error 10η). The paper's column is the best published number for the cell and the method that has it.\n\n")
	for _, noise := range noises {
		fmt.Fprintf(&b, "## %s noise\n\n", noise)
		fmt.Fprintf(&b, "| η | identity |")
		for _, e := range r.Estimators {
			fmt.Fprintf(&b, " %s |", e)
		}
		fmt.Fprintf(&b, " paper best | paper RGBT | best here below paper best? |\n|---|---|")
		for range r.Estimators {
			fmt.Fprintf(&b, "---|")
		}
		fmt.Fprintf(&b, "---|---|---|\n")
		for _, rate := range rates {
			id := r.cell(noise, rate, r.Estimators[0]).IdentityL1
			fmt.Fprintf(&b, "| %.1f | %.4f |", rate, id)
			best := ""
			bestV := 0.0
			for _, e := range r.Estimators {
				c := r.cell(noise, rate, e)
				fmt.Fprintf(&b, " %s |", pm(c.L1Mean, c.L1Std))
				if best == "" || c.L1Mean < bestV {
					best, bestV = e, c.L1Mean
				}
			}
			if p, ok := PaperTransition(noise, rate); ok {
				rg := "—"
				if p.RGBT > 0 {
					rg = fmt.Sprintf("%.4f", p.RGBT)
				}
				fmt.Fprintf(&b, " %.4f (%s) | %s | %s (%s %.4f) |\n", p.Best, p.BestMethod, rg, mark(bestV < p.Best), best, bestV)
			} else {
				fmt.Fprintf(&b, " — | — | — |\n")
			}
		}
		fmt.Fprintln(&b)
		if c := r.cell(noise, rates[0], EstimatorRGBT); c != nil {
			fmt.Fprintf(&b, "Share of training events the online model distilled (rgbt):")
			for _, rate := range rates {
				fmt.Fprintf(&b, " η=%.1f: %.3f;", rate, r.cell(noise, rate, EstimatorRGBT).Distilled)
			}
			fmt.Fprintln(&b)
			fmt.Fprintln(&b)
		}
	}
	fmt.Fprintf(&b, "![L1 error against η](transition.png)\n\n")
	fmt.Fprintf(&b, "### Mean estimates at η = %.1f (rows: clean class 1..5)\n\n", rates[len(rates)-1])
	for _, noise := range noises {
		T, _ := NoiseMatrix(noise, rates[len(rates)-1], 5)
		fmt.Fprintf(&b, "%s, true T:\n\n%s\n", noise, matrixTable(T, 5))
		for _, e := range r.Estimators {
			fmt.Fprintf(&b, "%s, mean T̂:\n\n%s\n", e, matrixTable(r.cell(noise, rates[len(rates)-1], e).MeanT, 5))
		}
	}
	b.WriteString(transitionNotes)
	if err := writeAtomic(filepath.Join(dir, "transition.md"), b.Bytes()); err != nil {
		return err
	}
	return r.figure(filepath.Join(dir, "transition.png"))
}

func matrixTable(t []float64, k int) string {
	var b bytes.Buffer
	b.WriteString("|")
	for j := range k {
		fmt.Fprintf(&b, " ỹ=%d |", j+1)
	}
	b.WriteString("\n|")
	for range k {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for i := range k {
		b.WriteString("|")
		for j := range k {
			fmt.Fprintf(&b, " %.3f |", t[i*k+j])
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (r *TransitionResult) figure(path string) error {
	noises, rates := r.noises()
	var plots [][]series
	for _, noise := range noises {
		var ss []series
		id := series{name: "identity (10η)", dashed: true}
		pb := series{name: "paper best", dashed: true}
		for _, rate := range rates {
			id.xs, id.ys = append(id.xs, rate), append(id.ys, r.cell(noise, rate, r.Estimators[0]).IdentityL1)
			p, _ := PaperTransition(noise, rate)
			v := p.Best
			if v == 0 {
				v = nan
			}
			pb.xs, pb.ys = append(pb.xs, rate), append(pb.ys, v)
		}
		for _, e := range r.Estimators {
			s := series{name: e}
			for _, rate := range rates {
				c := r.cell(noise, rate, e)
				s.xs, s.ys, s.err = append(s.xs, rate), append(s.ys, c.L1Mean), append(s.err, c.L1Std)
			}
			ss = append(ss, s)
		}
		ss = append(ss, id, pb)
		plots = append(plots, ss)
	}
	return gridFigure(path, noises, "noise rate η", "L1 error of T̂", plots)
}
