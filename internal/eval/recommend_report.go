package eval

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// PaperRQ1 is one row of the paper's ML-100k table: R@10, R@50, N@10,
// N@50.
type PaperRQ1 struct {
	Method             string
	R10, R50, N10, N50 float64
}

// PaperRecommend are the paper's ML-100k numbers (issue 4).
var PaperRecommend = []PaperRQ1{
	{"NeuMF-end, base", 0.0742, 0.1167, 0.0633, 0.0760},
	{"NeuMF-end, full RGBT", 0.0800, 0.1212, 0.0698, 0.0826},
	{"GMF, base", 0.0744, 0.1222, 0.0638, 0.0783},
	{"GMF, full RGBT", 0.0748, 0.1181, 0.0652, 0.0779},
}

// PaperDecaNormal is the paper's Normal GMF on ML-100k as issue 14 quotes
// it, the figures that DeCA's split and test protocol reproduce.
var PaperDecaNormal = PaperRQ1{"GMF, Normal (as quoted in issue 14)", 0.0672, 0.2004, 0.0552, 0.0953}

func (r *RecommendResult) row(group, method string) *Row {
	for k := range r.Rows {
		if r.Rows[k].Group == group && r.Rows[k].Method == method {
			return &r.Rows[k]
		}
	}
	return nil
}

// WriteReport writes recommend.md, recommend.png and rho.png into dir.
func (r *RecommendResult) WriteReport(dir string, meta Meta) error {
	var b bytes.Buffer
	if r.Log {
		data := meta.Data
		meta.Data = "" // not MovieLens
		meta.header(&b, "RQ1 / RQ3 / RQ4 — recommendation from a noisy event log")
		fmt.Fprintf(&b, "Data: `%s`, an event log with a truth field on every event.\n\n", data)
	} else {
		meta.header(&b, "RQ1 / RQ3 / RQ4 — recommendation from noisy implicit feedback on ML-100k")
	}
	switch {
	case r.Log:
		fmt.Fprintf(&b, "Every event is an implicit positive; a genuine one counts as rating 5, noise as rating 1. Split 8:1:1 by "+
			"event (%s, seeded): %d train, %d validation (both noisy), and a clean test of the %d genuine test events. The "+
			"denoiser reads every field of a training event as replay does (its time, dwell and event type, where the log has them); the downstream models "+
			"read (user, item). Recommenders rank every item the user has no training event with: %d test events repeat a training "+
			"pair and can never be hit, so a perfect ranking reaches a mean Recall of %.4f. Mean ± std over %d seeds.\n\n",
			r.Split, r.Train, r.Valid, r.TestClean, r.TestMasked, r.RecallCeiling, r.Seeds)
	case r.Split == SplitDeca:
		fmt.Fprintf(&b, "Every rating is an implicit positive. The DeCA paper's split (github.com/wangyu-ustc/DeCA, data/ml-100k/): "+
			"%d training interactions of every rating (noisy), %d clean (rating-5) validation and %d clean test interactions "+
			"of %d users. Every validation pair is also a test pair (%d of the test pairs are). As in DeCA's code, the test "+
			"ranks every item except the user's **training and validation items** (its user_pos = train ∪ valid), and Recall@K "+
			"divides the hits by the user's whole test list, the masked validation items included, so a perfect ranking reaches "+
			"a mean Recall of %.4f; NDCG's ideal list has min(K, whole test list) hits. Users with a test item are averaged. "+
			"Validation (early stopping) ranks every item except the training ones. The split is fixed; the %d seeds vary the "+
			"models' initialisation, sampling and the denoiser. Mean ± std over seeds.\n\n",
			r.Train, r.Valid, r.TestClean, r.TestUsers, r.TestMasked, r.RecallCeiling, r.Seeds)
	default:
		fmt.Fprintf(&b, "Every rating is an implicit positive. Split 8:1:1 by interaction (%s, seeded): %d train, %d validation "+
			"(both noisy), and a clean test of the %d rating-5 test interactions. Recommenders rank every item the user has no "+
			"training interaction with. Mean ± std over %d seeds.\n\n", r.Split, r.Train, r.Valid, r.TestClean, r.Seeds)
	}
	fmt.Fprintf(&b, "- **Downstream models** (%s): ", strings.Join(r.Backbones, ", "))
	if slices.Contains(r.Backbones, BackboneNeuMF) {
		fmt.Fprintf(&b, "GMF with d = %d, and NeuMF trained end to end (NeuMF-end: the same GMF tower "+
			"beside an MLP tower on [m_u; n_i] of 2 × %d inputs, ReLU layers %v, one output over both towers). Both: ", r.Dim, r.Dim, r.Hidden)
	} else {
		fmt.Fprintf(&b, "GMF with d = %d: ", r.Dim)
	}
	stream := "time-ordered training stream, each event with its time" // ML-100k's random or chrono split
	switch {
	case r.Log:
		stream = "training events in the log's order, each with every field the log gives it"
	case r.Split == SplitDeca:
		stream = "training file in its order (it has no times)"
	}
	fmt.Fprintf(&b, "BCE, %d uniform negative(s) per positive and epoch, per-sample SGD with per-row adaptive steps, early stopping on "+
		"validation Recall@20. *Normal* trains on the raw stream; *T-CE* drops the largest-loss share of each batch's positives, "+
		"the rate rising linearly to 0.2 over 10 epochs; *…-weighted* weighs each positive by the denoiser's score "+
		"(`%s`, rescaled to mean 1), taken from the last of %d passes of the denoiser (binary mode) over the "+
		"%s, each pass's times starting over — each score is computed before the model learns from that event.\n", r.Negatives, r.Weight, r.Passes, stream)
	fmt.Fprintf(&b, "- **Denoiser's f**: the online model's clean posterior f(x) used directly as the recommender after the same "+
		"%d passes (the paper's setting).\n\n", r.Passes)
	fmt.Fprintf(&b, "The weighted rows weigh by `%s`. `weight` (the default) is the output's recommended weight, the field to train on", r.Weight)
	if r.Log {
		fmt.Fprintf(&b, ": p_clean weighed with everything else the events carry. ")
	} else {
		fmt.Fprintf(&b, "; on (user, item, rating) data such as this it is p_clean "+
			"weighed with the time since the user's previous event, the user's activity, the item's popularity and the user's and the item's "+
			"earlier weights (the gap path, docs/design/model.md). ")
	}
	fmt.Fprintf(&b, "`product` is the paper's: p_clean, the posterior under T̂ that the observed positive is genuine, times the "+
		"reliability w, the GMM's posterior of the reliable component; each ablation removes one factor (w = 1 leaves p_clean; "+
		"T̂ = I makes p_clean ≡ 1 and leaves w). `--weight p_clean|reliability` selects one alone.\n\n")
	var groups []string
	for _, bb := range r.Backbones {
		groups = append(groups, DownstreamGroup(bb))
	}
	for _, g := range append(groups, GroupDenoiserF) {
		fmt.Fprintf(&b, "## %s\n\n| method |", g)
		for _, k := range r.Cutoffs {
			fmt.Fprintf(&b, " R@%d |", k)
		}
		for _, k := range r.Cutoffs {
			fmt.Fprintf(&b, " N@%d |", k)
		}
		fmt.Fprintf(&b, "\n|---|")
		for range 2 * len(r.Cutoffs) {
			fmt.Fprintf(&b, "---|")
		}
		fmt.Fprintln(&b)
		for _, row := range r.Rows {
			if row.Group != g {
				continue
			}
			fmt.Fprintf(&b, "| %s |", row.Method)
			for c := range r.Cutoffs {
				fmt.Fprintf(&b, " %s |", pm(row.RecallMean[c], row.RecallStd[c]))
			}
			for c := range r.Cutoffs {
				fmt.Fprintf(&b, " %s |", pm(row.NDCGMean[c], row.NDCGStd[c]))
			}
			fmt.Fprintln(&b)
		}
		fmt.Fprintln(&b)
	}
	good, bad := "rating 5", "rating ≤ 2"
	if r.Log {
		good, bad = "genuine", "noise"
	}
	fmt.Fprintf(&b, "Mean raw weight the denoiser gave the training positives (before rescaling), overall / %s / %s:\n\n", good, bad)
	fmt.Fprintf(&b, "| weighted by | all | %s | %s |\n|---|---|---|---|\n", good, bad)
	for _, row := range r.Rows {
		if len(groups) > 0 && row.Group == groups[0] && row.WeightMean > 0 {
			fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.3f |\n", row.Method, row.WeightMean, row.WeightRating5, row.WeightRating12)
		}
	}
	fmt.Fprintf(&b, "\n![Recall@K and NDCG@K](recommend.png)\n\n")
	if r.Log {
		r.pairedTable(&b)
		r.distilledTable(&b)
		fmt.Fprintf(&b, recommendLogNotes, weightSeparation(r, good, bad), r.Seeds)
		return r.writeFigures(dir, b.Bytes())
	}
	fmt.Fprintf(&b, "## The paper's ML-100k numbers\n\n| paper | R@10 | R@50 | N@10 | N@50 |\n|---|---|---|---|---|\n")
	papers := PaperRecommend
	if r.Split == SplitDeca {
		papers = append(slices.Clone(papers), PaperDecaNormal)
	}
	for _, p := range papers {
		fmt.Fprintf(&b, "| %s | %.4f | %.4f | %.4f | %.4f |\n", p.Method, p.R10, p.R50, p.N10, p.N50)
	}
	i10, i50 := slices.Index(r.Cutoffs, 10), slices.Index(r.Cutoffs, 50)
	type check struct {
		backbone          string
		full, normal, tce *Row
	}
	var checks []check
	for _, bb := range r.Backbones {
		g := DownstreamGroup(bb)
		c := check{bb, r.row(g, FullWeighted), r.row(g, "Normal"), r.row(g, "T-CE")}
		if c.full == nil || c.normal == nil || c.tce == nil || i10 < 0 || i50 < 0 {
			continue
		}
		checks = append(checks, c)
		for _, x := range []struct {
			name string
			row  *Row
		}{{"Normal", c.normal}, {"T-CE", c.tce}, {"RGBT-weighted", c.full}} {
			fmt.Fprintf(&b, "| **here: %s %s** | %.4f | %.4f | %.4f | %.4f |\n", x.name, bb,
				x.row.RecallMean[i10], x.row.RecallMean[i50], x.row.NDCGMean[i10], x.row.NDCGMean[i50])
		}
	}
	fmt.Fprintln(&b)
	if len(checks) > 0 {
		fmt.Fprintf(&b, "### Goal check (RQ1)\n\n| goal | measured | met? |\n|---|---|---|\n")
		for _, c := range checks {
			full, normal, tce := c.full, c.normal, c.tce
			fmt.Fprintf(&b, "| %s: RGBT-weighted R@10 > Normal | %.4f vs %.4f | %s |\n", c.backbone, full.RecallMean[i10], normal.RecallMean[i10], mark(full.RecallMean[i10] > normal.RecallMean[i10]))
			fmt.Fprintf(&b, "| %s: RGBT-weighted R@10 > T-CE | %.4f vs %.4f | %s |\n", c.backbone, full.RecallMean[i10], tce.RecallMean[i10], mark(full.RecallMean[i10] > tce.RecallMean[i10]))
			fmt.Fprintf(&b, "| %s: RGBT-weighted N@10 > Normal | %.4f vs %.4f | %s |\n", c.backbone, full.NDCGMean[i10], normal.NDCGMean[i10], mark(full.NDCGMean[i10] > normal.NDCGMean[i10]))
			fmt.Fprintf(&b, "| %s: RGBT-weighted N@10 > T-CE | %.4f vs %.4f | %s |\n", c.backbone, full.NDCGMean[i10], tce.NDCGMean[i10], mark(full.NDCGMean[i10] > tce.NDCGMean[i10]))
			fmt.Fprintf(&b, "| %s: R@10 ≥ paper full RGBT (NeuMF-end 0.0800) | %.4f | %s (see note on comparability) |\n", c.backbone, full.RecallMean[i10], mark(full.RecallMean[i10] >= 0.0800))
			fmt.Fprintf(&b, "| %s: N@10 ≥ paper full RGBT (NeuMF-end 0.0698) | %.4f | %s (see note on comparability) |\n", c.backbone, full.NDCGMean[i10], mark(full.NDCGMean[i10] >= 0.0698))
		}
		fmt.Fprintf(&b, "\n\"Above\" in the goal check is a comparison of means; whether a difference is more than seed-to-seed noise "+
			"is the paired comparison's question, below.\n\n")
	}
	r.pairedTable(&b)
	r.distilledTable(&b)
	if r.Split == SplitDeca {
		b.WriteString(recommendDecaNotes)
	} else {
		fmt.Fprintf(&b, recommendNotes, weightSeparation(r, good, bad), r.Seeds)
	}
	return r.writeFigures(dir, b.Bytes())
}

// distilledTable writes RQ4: the share of each tenth of a pass that the
// denoiser distilled.
func (r *RecommendResult) distilledTable(b *bytes.Buffer) {
	fmt.Fprintf(b, "## RQ4 — share of samples used over time\n\nShare of the events of each tenth of a pass that the denoiser "+
		"distilled (the samples L_cal and T̂ learn from), averaged over seeds:\n\n![distilled share](rho.png)\n\n")
	fmt.Fprintf(b, "| variant | first tenth | end of pass 1 | end of last pass |\n|---|---|---|---|\n")
	for _, c := range r.Curves {
		if len(c.Share) == 0 {
			continue
		}
		per := len(c.Share) / max(r.Passes, 1)
		fmt.Fprintf(b, "| %s | %.3f | %.3f | %.3f |\n", c.Variant, c.Share[0], c.Share[max(per-1, 0)], c.Share[len(c.Share)-1])
	}
}

// writeFigures writes the report md into dir as recommend.md, and its
// figures beside it.
func (r *RecommendResult) writeFigures(dir string, md []byte) error {
	if err := writeAtomic(filepath.Join(dir, "recommend.md"), md); err != nil {
		return err
	}
	return r.figures(dir)
}

func (r *RecommendResult) figures(dir string) error {
	var rec, ndcg []series
	for _, row := range r.Rows {
		name := row.Method
		switch {
		case row.Group == GroupDenoiserF:
			name = "f: " + name
		case len(r.Backbones) > 1:
			name = strings.TrimPrefix(row.Group, "downstream ") + ": " + name
		}
		s1 := series{name: name, dashed: row.Group == GroupDenoiserF}
		s2 := s1
		for c, k := range r.Cutoffs {
			s1.xs, s1.ys = append(s1.xs, float64(k)), append(s1.ys, row.RecallMean[c])
			s2.xs, s2.ys = append(s2.xs, float64(k)), append(s2.ys, row.NDCGMean[c])
		}
		rec, ndcg = append(rec, s1), append(ndcg, s2)
	}
	if err := gridFigure(filepath.Join(dir, "recommend.png"), []string{"Recall@K", "NDCG@K"}, "K", "", [][]series{rec, ndcg}); err != nil {
		return err
	}
	var ss []series
	for _, c := range r.Curves {
		ss = append(ss, series{name: c.Variant, xs: c.Passes, ys: c.Share})
	}
	return gridFigure(filepath.Join(dir, "rho.png"), []string{"distilled share per tenth of a pass"}, "passes over the training stream", "share distilled", [][]series{ss})
}

// pairedTable writes the paired comparisons: mean difference over seeds
// and the paired t-test's two-sided p-value.
func (r *RecommendResult) pairedTable(b *bytes.Buffer) {
	if len(r.Paired) == 0 {
		return
	}
	fmt.Fprintf(b, "### Paired comparisons over seeds\n\nFor each seed, the weighted model's metric minus the baseline's (same seed: same "+
		"initialisation and sampling stream of the downstream model); the mean of those differences, Student's t with n − 1 "+
		"degrees of freedom and its two-sided p-value. With %d seeds a p-value under 0.05 needs a difference consistent in "+
		"sign and size across seeds; nothing is corrected for the %d tests in this table.\n\n", r.Seeds, len(r.Paired))
	fmt.Fprintf(b, "| backbone | method | baseline | metric | mean diff | t | p |\n|---|---|---|---|---|---|---|\n")
	for _, p := range r.Paired {
		metric := "R"
		if p.Metric == "ndcg" {
			metric = "N"
		}
		ts, ps := "—", "—"
		if p.T != nil {
			ts, ps = fmt.Sprintf("%.2f", *p.T), fmt.Sprintf("%.3f", *p.PValue)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s@%d | %+.4f | %s | %s |\n", p.Backbone, p.Method, p.Baseline, metric, p.Cutoff, p.MeanDiff, ts, ps)
	}
	fmt.Fprintln(b)
}

// weightSeparation says how far apart the first weighted row's mean raw
// weights of the good (rating-5, genuine) and the bad (rating ≤ 2, noise)
// positives are (the table of mean weights).
func weightSeparation(r *RecommendResult, good, bad string) string {
	for _, row := range r.Rows {
		if row.WeightMean > 0 {
			return fmt.Sprintf("The mean raw weight of %s positives is %.3f and of %s positives %.3f (%s, table above): "+
				"a difference of %.3f.",
				good, row.WeightRating5, bad, row.WeightRating12, row.Method, row.WeightRating5-row.WeightRating12)
		}
	}
	return "No weighted row."
}
