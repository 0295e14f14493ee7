package eval

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"denoiser/internal/report"
	"denoiser/online"
)

// WriteReport writes detect.md, detect.png and detect_calibration.png
// into dir.
func (r *DetectResult) WriteReport(dir string, meta Meta) error {
	var b bytes.Buffer
	meta.header(&b, "Detection — how well the scores find noisy interactions")
	dwell := r.DwellDirection
	if dwell == "" {
		dwell = online.DwellLearned
	}
	settings := fmt.Sprintf("transition_user_offset: %v, dwell_direction: %s, the rest at their defaults", r.TransitionUserOffset, dwell)
	fmt.Fprintf(&b, "Each stream is scored by the denoiser (binary mode, %s) and, for the loss baseline, by a plain "+
		"model with the same seed (its per-event cross-entropy, negated: a high loss means likely noise — the signal T-CE "+
		"uses). Scores are the stream stage's own: each event is scored before the model learns from it (%d pass(es), scores "+
		"from the last). Mean ± std over %d seeds (%s); on the synthetic streams seed n seeds the generator as well as the model, so "+
		"the spread covers different worlds, not only different models. p_clean, the classifier's posterior, reads only "+
		"(user, item), so on synthetic streams that differ only in their dwell share p_clean is the same; weight adds dwell "+
		"and the event type as evidence and, where events carry dwell, weighs p_clean, the user's activity, the pair's "+
		"repeats and the item's training so far by what dwell says they carry (the context and the instrument, docs/design/model.md), "+
		"where no event carries dwell, by what the event type's rank in model.event_order says (return < view < click < cart < "+
		"purchase, the same order as the event_type baseline; \"The event type as the instrument\"), where events carry "+
		"neither dwell nor a type (the streams marked \"no event types\", MovieLens), by what the gap since the user's previous "+
		"event says, as far as the gap correlates with p_clean (\"The gap as the instrument of streams without dwell or type\"; "+
		"on the streams marked \"no times\" and DeCA's, whose events carry no time, the gap is counted in events, the "+
		"stream's order its clock: \"The gap of a stream without time\"), "+
		"and the dwell share "+
		"changes what it and the baselines see. ROC-AUC is the probability that a genuine event scores above a noisy one; "+
		"PR-AUC is average precision with genuine events as the positive class (as in the replay report), and PR-AUC(noise) "+
		"with noisy events as the positive class and the score negated. The label-free baselines count what the stream "+
		"itself tells, each from the events before the one it scores: the item's popularity, the user's activity, the "+
		"(user, item) repeat count, dwell where at least half the events carry it, the time since the user's previous "+
		"event (log(1 + seconds); the mean so far where there is none) where at least half the events have one, else the "+
		"events since the user's previous one (user_gap_events, log(1 + count)) where at least half have one, and the event type's engagement "+
		"(return < view < click < cart < purchase) where the stream has event types; each is taken in its better "+
		"direction per seed, so the comparison is conservative. The best baseline of each stream is marked. "+
		"offline_ceiling is not a baseline but a ceiling: a GMF (dimension 32, 4 sampled negatives) trained on the whole "+
		"stream for each of %s epochs, each event scored by its final logit (a low loss ranks as genuine), the best of them "+
		"by ROC-AUC per seed (chosen with the truth) — what a batch model that sees everything reaches.\n\n", settings, r.Passes, r.Seeds, seedRange(max(r.FirstSeed, 1), r.Seeds),
		strings.Trim(strings.Join(strings.Fields(fmt.Sprint(r.CeilingEpochs)), ", "), "[]"))
	fmt.Fprintf(&b, "| stream | noise share | score | ROC-AUC | PR-AUC (genuine) | PR-AUC (noise) | ECE |\n|---|---|---|---|---|---|---|\n")
	for _, c := range r.Cases {
		for _, m := range c.Metrics {
			name := m.Score
			if name == c.BestBaseline {
				name += " (best baseline)"
			}
			ece := ""
			if m.ECE != nil {
				ece = pm(*m.ECE, *m.ECEStd)
			}
			fmt.Fprintf(&b, "| %s | %.3f | %s | %s | %s | %s | %s |\n", c.Name, c.NoiseShare, name, pm(m.ROCAUC, m.ROCAUCStd), pm(m.PRAUC, m.PRAUCStd), pm(m.PRAUCNoise, m.PRAUCNoiseS), ece)
		}
	}
	fmt.Fprintf(&b, "\nA score that does not separate the classes has ROC-AUC 0.5 and PR-AUC equal to the class's share. "+
		"ECE is the expected calibration error of the scores that are probabilities of being genuine (weight, p_clean): "+
		"over %d equal-width bins of [0, 1], the event-weighted mean of |mean score − share genuine| of each bin; 0 is "+
		"calibrated. A score can rank well and be miscalibrated, or the reverse.\n\n", report.CalibrationBins)
	b.WriteString(r.againstBaselines())
	fmt.Fprintf(&b, "![reliability histograms split by truth](detect.png)\n\n")
	fmt.Fprintf(&b, "The histograms are of the reliability score (the GMM weight w) of the first seed, each class normalised to sum to 1.\n\n")
	fmt.Fprintf(&b, "![reliability diagrams of weight and p_clean](detect_calibration.png)\n\n")
	fmt.Fprintf(&b, "Reliability diagrams of the first seed: per non-empty bin of the score (%d equal-width bins), the bin's mean score "+
		"against the share of its events that are genuine; a calibrated score lies on the diagonal, below it is over-confident "+
		"that events are genuine. The bins' counts are in detect.json (reliability_diagrams): the low bins hold few events.\n",
		report.CalibrationBins)
	b.WriteString(detectNotes)
	if err := writeAtomic(filepath.Join(dir, "detect.md"), b.Bytes()); err != nil {
		return err
	}
	var titles []string
	var plots [][]series
	for _, c := range r.Cases {
		bins := len(c.HistGenuine)
		g, n := series{name: "genuine"}, series{name: "noise", dashed: true}
		for k := range bins {
			x := (float64(k) + 0.5) / float64(bins)
			g.xs, g.ys = append(g.xs, x), append(g.ys, c.HistGenuine[k])
			n.xs, n.ys = append(n.xs, x), append(n.ys, c.HistNoise[k])
		}
		titles = append(titles, c.Name)
		plots = append(plots, []series{g, n})
	}
	if len(plots) == 0 {
		return nil
	}
	if err := gridFigureRows(filepath.Join(dir, "detect.png"), titles, "reliability", "share of class", plots, 3); err != nil {
		return err
	}
	return gridFigureRows(filepath.Join(dir, "detect_calibration.png"), titles, "mean predicted (bin)", "share genuine", r.calibrationPlots(), 3)
}

// calibrationPlots is, per case, the reliability diagrams of weight and
// p_clean of the first seed, and the diagonal of a calibrated score.
func (r *DetectResult) calibrationPlots() [][]series {
	var plots [][]series
	for _, c := range r.Cases {
		var ss []series
		for _, name := range []string{report.RecommendedScore, "p_clean"} {
			s := series{name: name}
			for _, bin := range c.ReliabilityDiagrams[name] {
				s.xs, s.ys = append(s.xs, bin.MeanPredicted), append(s.ys, bin.ShareGenuine)
			}
			ss = append(ss, s)
		}
		ss = append(ss, series{name: "calibrated", xs: []float64{0, 1}, ys: []float64{0, 1}, dashed: true})
		plots = append(plots, ss)
	}
	return plots
}

// againstBaselines says, per stream, how the recommended weight stands
// against the best
// label-free baseline of the same run: computed, so it cannot contradict
// the table.
func (r *DetectResult) againstBaselines() string {
	var b bytes.Buffer
	b.WriteString("The recommended weight against the best baseline of the same run (ROC-AUC):\n\n")
	for _, c := range r.Cases {
		var model, best *DetectMetric
		for i := range c.Metrics {
			switch c.Metrics[i].Score {
			case report.RecommendedScore:
				model = &c.Metrics[i]
			case c.BestBaseline:
				best = &c.Metrics[i]
			}
		}
		if model == nil || best == nil {
			continue
		}
		d := model.ROCAUC - best.ROCAUC
		verdict := "ahead"
		if d < 0 {
			verdict = "behind"
		}
		fmt.Fprintf(&b, "- %s: weight %.3f, %s %.3f: %s by %.3f; offline ceiling %.3f\n", c.Name, model.ROCAUC, best.Score,
			best.ROCAUC, verdict, math.Abs(d), c.OfflineCeiling)
	}
	b.WriteString("\n")
	return b.String()
}
