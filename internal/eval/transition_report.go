package eval

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	o := r.Ordinal
	fmt.Fprintf(&b, "Ratings are K = 5 classes. Flip noise is injected into the training ratings (random 8:1:1 split per seed; "+
		"%d training interactions); each estimator is trained on the noisy training ratings and scored on the %d held-out (test) "+
		"interactions by the mean over instances of Σ_ij |T̂_ij(x) − T_ij|, T the true flip matrix. Mean ± std over seeds %s; "+
		"the online model makes %d passes over the training stream.\n\n", r.Train, r.HeldOut, seedRange(r.FirstSeed, r.Seeds), r.Passes)
	fmt.Fprintf(&b, "Estimators: **rgbt** — the model's own instance-level T̂(x); **anchor** — class-level anchor points on a plain "+
		"model's noisy posterior (97th percentile); **ordinal** — class-level EM with an ordinal (cumulative-logit) clean model "+
		"with a spread per user (%d epochs, d = %d, L2 %g); EM runs from each starting diagonal %s (off-diagonal mass even) on "+
		"%.0f%% of the noisy training ratings and keeps the fit whose likelihood of the other %.0f%% is highest. "+
		"*identity* is T̂ = I (error 10η). The paper's column is the best published number for the cell and the method that has it.\n\n",
		o.Epochs, o.Dim, o.L2, startsRange(o.Starts), 100*(1-o.HoldOut), 100*o.HoldOut)
	fmt.Fprintf(&b, "**%s** is the project's estimator for rating data: the goal (below the best published number in every cell) "+
		"is judged on it alone, not on the best estimator per cell. Its settings (the epochs above, the grid of starts, "+
		"the hold-out share) were chosen on seed 1, which this table leaves out when it starts at seed 2.\n\n", r.RatingEstimator)
	for _, noise := range noises {
		fmt.Fprintf(&b, "## %s noise\n\n", noise)
		fmt.Fprintf(&b, "| η | identity |")
		for _, e := range r.Estimators {
			fmt.Fprintf(&b, " %s |", e)
		}
		fmt.Fprintf(&b, " paper best | paper RGBT | %s below paper best? |\n|---|---|", r.RatingEstimator)
		for range r.Estimators {
			fmt.Fprintf(&b, "---|")
		}
		fmt.Fprintf(&b, "---|---|---|\n")
		for _, rate := range rates {
			id := r.cell(noise, rate, r.Estimators[0]).IdentityL1
			fmt.Fprintf(&b, "| %.1f | %.4f |", rate, id)
			for _, e := range r.Estimators {
				c := r.cell(noise, rate, e)
				fmt.Fprintf(&b, " %s |", pm(c.L1Mean, c.L1Std))
			}
			p, ok := PaperTransition(noise, rate)
			if !ok {
				fmt.Fprintf(&b, " — | — | — |\n")
				continue
			}
			rg := "—"
			if p.RGBT > 0 {
				rg = fmt.Sprintf("%.4f", p.RGBT)
			}
			verdict := "— (not run)"
			if c := r.cell(noise, rate, r.RatingEstimator); c != nil {
				verdict = fmt.Sprintf("%s (%.4f; per seed %s)", mark(c.L1Mean < p.Best), c.L1Mean, perSeed(c.L1PerSeed, 4))
			}
			fmt.Fprintf(&b, " %.4f (%s) | %s | %s |\n", p.Best, p.BestMethod, rg, verdict)
		}
		fmt.Fprintln(&b)
		if c := r.cell(noise, rates[0], EstimatorOrdinal); c != nil {
			fmt.Fprintf(&b, "Starting diagonal the ordinal estimator kept, per seed:")
			for _, rate := range rates {
				fmt.Fprintf(&b, " η=%.1f: %s;", rate, perSeed(r.cell(noise, rate, EstimatorOrdinal).Starts, 2))
			}
			fmt.Fprintln(&b)
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
	b.WriteString(r.averagesTable())
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

// averagesTable is the mean over rates per noise kind and estimator,
// beside the same mean of the paper's cells.
func (r *TransitionResult) averagesTable() string {
	var b bytes.Buffer
	b.WriteString("## Averages over η\n\nMean L1 over the rates of each noise kind. The paper's columns are the mean of the cells quoted " +
		"above (issue 4), not a column of the paper; the issue quotes no RGBT number for symmetric η = 0.1, so that mean is missing.\n\n")
	b.WriteString("| noise | rates |")
	for _, e := range r.Estimators {
		fmt.Fprintf(&b, " %s |", e)
	}
	b.WriteString(" paper best | paper RGBT |\n|---|---|")
	for range r.Estimators {
		b.WriteString("---|")
	}
	b.WriteString("---|---|\n")
	noises, _ := r.noises()
	for _, noise := range noises {
		var first *TransitionAverage
		fmt.Fprintf(&b, "| %s |", noise)
		for _, e := range r.Estimators {
			for k := range r.Averages {
				if a := &r.Averages[k]; a.Noise == noise && a.Estimator == e {
					if first == nil {
						first = a
						fmt.Fprintf(&b, " %d |", a.Rates)
					}
					fmt.Fprintf(&b, " %.4f |", a.L1)
				}
			}
		}
		fmt.Fprintf(&b, " %s | %s |\n", orDash(first.PaperBest), orDash(first.PaperRGBT))
	}
	b.WriteString("\n")
	return b.String()
}

func orDash(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.4f", v)
}

// perSeed lists values with prec decimals.
func perSeed(vs []float64, prec int) string {
	parts := make([]string, len(vs))
	for n, v := range vs {
		parts[n] = strconv.FormatFloat(v, 'f', prec, 64)
	}
	return strings.Join(parts, ", ")
}

// seedRange names seeds first … first+n−1.
func seedRange(first, n int) string {
	if n == 1 {
		return strconv.Itoa(first)
	}
	return fmt.Sprintf("%d–%d", first, first+n-1)
}

// startsRange names a grid of starts.
func startsRange(starts []float64) string {
	if len(starts) == 1 {
		return fmt.Sprintf("%g", starts[0])
	}
	return fmt.Sprintf("%g … %g (%d values)", starts[0], starts[len(starts)-1], len(starts))
}
