package report

import (
	"denoiser/internal/atomicfile"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"denoiser/consumer"
	"denoiser/online"
)

// Metrics holds one ranking metric for each score: the model's, then the
// label-free baselines (see baselines.go), each in its better direction. A
// nil value means the metric is undefined (one class only, no baseline
// model, too few dwell times, or too few user gaps).
type Metrics struct {
	Weight         *float64 `json:"weight"`
	PClean         *float64 `json:"p_clean"`
	Reliability    *float64 `json:"reliability"`
	LossBaseline   *float64 `json:"loss_baseline"`
	ItemPopularity *float64 `json:"item_popularity"`
	UserActivity   *float64 `json:"user_activity"`
	PairCount      *float64 `json:"pair_count"`
	Dwell          *float64 `json:"dwell"`
	UserGap        *float64 `json:"user_gap"`
	UserGapEvents  *float64 `json:"user_gap_events"`
}

// baseline returns the field of m that holds the named baseline.
func (m *Metrics) baseline(name string) **float64 {
	switch name {
	case BaselineLoss:
		return &m.LossBaseline
	case BaselineItemPopularity:
		return &m.ItemPopularity
	case BaselineUserActivity:
		return &m.UserActivity
	case BaselinePairCount:
		return &m.PairCount
	case BaselineDwell:
		return &m.Dwell
	case BaselineUserGap:
		return &m.UserGap
	case BaselineUserGapEvents:
		return &m.UserGapEvents
	}
	panic("report: unknown baseline " + name)
}

// RecommendedScore names the score to train on, the output's weight: the
// model's posterior that an event is genuine given all it reads.
const RecommendedScore = "weight"

// CalibrationBins is the number of equal-width bins of [0, 1] of the
// calibration error and the reliability diagram.
const CalibrationBins = 10

// Report is the result of a replay.
type Report struct {
	Input string `json:"input,omitempty"`
	// InputError says where the input ended early, when it could not be
	// read to its end (a truncated gzip file): the report counts the
	// records before it.
	InputError string `json:"input_error,omitempty"`
	// Unread counts, per member name, the records that carry a member
	// named as other formats name a field ("timestamp" for ts) and lack
	// the field itself: the model did not read it (consumer.Aliases).
	Unread map[string]uint64 `json:"unread_members,omitempty"`
	// Shadowed counts, per field, the records that lack the member
	// fields.FIELD names and carry the field under the event format's own
	// name, which is then not read (consumer.Event.Shadowed).
	Shadowed map[string]uint64 `json:"shadowed_fields,omitempty"`
	// Replaced counts, per output field, the records that carried a
	// member so named, which the output's own field replaced
	// (consumer.Event.Replaced).
	Replaced map[string]uint64 `json:"replaced_members,omitempty"`
	// TruthUnread counts the records whose truth was neither "genuine"
	// nor "noise", scored without one (consumer.Event.TruthUnread).
	TruthUnread uint64 `json:"truth_unread,omitempty"`
	// OutOfOrder counts the events whose time is earlier than their
	// user's previous event's (Counter.OutOfOrder); the summary points
	// it out beyond outOfOrderShare of the events with a gap.
	OutOfOrder uint64 `json:"out_of_time_order,omitempty"`
	// WithGap counts the events with a time whose user had an earlier
	// event with one.
	WithGap uint64 `json:"events_with_gap,omitempty"`
	Truth   string `json:"truth"`
	// Passes is how many times the input was read: the models learned
	// from it Passes−1 times, then the last pass was scored (and is all
	// the rest of the report counts). 1 but for replay --passes.
	Passes int `json:"passes"`

	Records         uint64            `json:"records"` // lines read, blank ones included
	Events          uint64            `json:"events"`  // events scored
	Invalid         uint64            `json:"invalid"` // records dead-lettered
	InvalidByReason map[string]uint64 `json:"invalid_by_reason"`
	// Blank counts the records with nothing to score (empty, blank,
	// tombstones), SkippedByReason each reason.
	Blank           uint64            `json:"blank"`
	SkippedByReason map[string]uint64 `json:"skipped_by_reason"`
	NumericalErrors uint64            `json:"numerical_errors"`
	Seconds         float64           `json:"seconds"`
	EventsPerSec    float64           `json:"events_per_sec"`
	// DistilledShare is the share of scored events whose output carries a
	// distilled label.
	DistilledShare float64 `json:"distilled_share"`
	// WeightSources counts the scored events by what formed their weight
	// (online.WeightSource): p_clean alone (calibrated), the context's
	// learned evidence beside it, or the instrument that weighed it (dwell,
	// the event type's rank, the gap since the user's previous event).
	// Null where the scores came without it (the demo reads them back
	// from the scored topic, whose records do not carry it).
	WeightSources map[string]uint64 `json:"weight_sources"`

	WithTruth    uint64 `json:"with_truth"`    // events in the metrics
	WithoutTruth uint64 `json:"without_truth"` // events left out: no answer under the truth mode
	Genuine      uint64 `json:"genuine"`
	Noise        uint64 `json:"noise"`

	AUC   Metrics `json:"auc"`    // ROC-AUC, genuine = positive
	PRAUC Metrics `json:"pr_auc"` // average precision, genuine = positive
	// RecommendedScore is the key of auc and pr_auc that holds the score
	// to train on: the output's weight field.
	RecommendedScore string `json:"recommended_score"`
	// ECE is the expected calibration error (10 bins) of the scores that
	// are probabilities: weight and p_clean.
	ECE map[string]float64 `json:"ece"`
	// ReliabilityDiagram is the recommended score's (weight's) reliability
	// diagram: per non-empty bin of CalibrationBins, its mean predicted
	// probability, observed share genuine and count. A calibrated score
	// has mean_predicted ≈ share_genuine in every bin.
	ReliabilityDiagram []CalibrationBin `json:"reliability_diagram,omitempty"`
	// BestBaseline names the baseline with the highest ROC-AUC ("" when
	// none is defined); BaselineDirection says, per baseline reported,
	// whether a higher or a lower value was taken as genuine.
	BestBaseline      string            `json:"best_baseline"`
	BaselineDirection map[string]string `json:"baseline_direction"`

	GMM            online.GMMSummary `json:"gmm"`
	MeanTransition [][]float64       `json:"mean_transition"`
	Model          online.Summary    `json:"model"`
	Baseline       *online.Summary   `json:"baseline,omitempty"`

	// mixture says why the mixture is not fitted, for the summary: it is
	// off (model.no_gmm, plain), or the distilled events are fewer than
	// its first fit needs (model.gmm_min_samples; 0 when unknown).
	mixture struct {
		off        bool
		minSamples int
	}
	warmUp int // model.warm_up
}

// Inputs gathers what Build needs.
type Inputs struct {
	Input     string              // the input's name, for the record
	InputErr  *consumer.ReadError // the input ended early, or nil
	Collector *Collector          // what the sink saw; required
	Stats     consumer.Stats      // what the loop counted
	Model     online.Summary      // the model at the end
	Baseline  *online.Summary     // the plain baseline at the end, if one ran
	Elapsed   time.Duration       // wall time of the loop (the scoring pass)
	Passes    int                 // replay's passes over the input (0 is taken as 1)
	// Config is the model's configuration (online.Model.Config), for the
	// summary's note on why the mixture is not fitted; zero when unknown.
	Config online.Config
}

// Build computes the report.
func Build(in Inputs) Report {
	c := in.Collector
	r := Report{
		Input:           in.Input,
		InputError:      inputError(in.InputErr),
		Passes:          max(in.Passes, 1),
		Truth:           c.truth.String(),
		Records:         in.Stats.Records,
		Events:          in.Stats.Scored,
		Invalid:         in.Stats.Rejected,
		InvalidByReason: map[string]uint64{},
		Blank:           in.Stats.Skipped,
		SkippedByReason: map[string]uint64{},
		NumericalErrors: in.Stats.Numerical,
		Seconds:         in.Elapsed.Seconds(),
		WithTruth:       uint64(len(c.genuine)),
		WithoutTruth:    c.withoutTruth,
		GMM:             in.Model.GMM,
		MeanTransition:  in.Model.MeanTransition,
		Model:           in.Model,
		Baseline:        in.Baseline,
	}
	r.mixture.off = in.Config.NoGMM || in.Config.Plain
	r.mixture.minSamples = in.Config.GMMMinSamples
	r.warmUp = in.Config.WarmUp
	for reason, n := range in.Stats.ByReason {
		r.InvalidByReason[string(reason)] = n
	}
	for reason, n := range in.Stats.SkippedByReason {
		r.SkippedByReason[string(reason)] = n
	}
	if len(in.Stats.Unread) > 0 {
		r.Unread = maps.Clone(in.Stats.Unread)
	}
	r.TruthUnread = in.Stats.TruthUnread
	if len(in.Stats.Replaced) > 0 {
		r.Replaced = maps.Clone(in.Stats.Replaced)
	}
	if len(in.Stats.Shadowed) > 0 {
		r.Shadowed = maps.Clone(in.Stats.Shadowed)
	}
	if r.Seconds > 0 {
		r.EventsPerSec = float64(r.Events) / r.Seconds
	}
	if n := c.Scored(); n > 0 {
		r.DistilledShare = float64(c.distilled) / float64(n)
	}
	if c.sources[online.SourceUnknown] < c.Scored() {
		r.WeightSources = map[string]uint64{}
		for _, src := range online.WeightSources() {
			r.WeightSources[src.String()] = c.sources[src]
		}
	}
	for _, g := range c.genuine {
		if g {
			r.Genuine++
		} else {
			r.Noise++
		}
	}
	r.OutOfOrder, r.WithGap = c.counter.OutOfOrder(), c.counter.withGap
	r.RecommendedScore = RecommendedScore
	r.AUC.Weight, r.PRAUC.Weight = metrics(c.weight, c.genuine)
	if len(c.genuine) > 0 {
		r.ECE = map[string]float64{}
		r.ECE["weight"], r.ReliabilityDiagram = ReliabilityDiagram(c.weight, c.genuine, CalibrationBins)
		r.ECE["p_clean"], _, _, _ = ECE(c.pClean, c.genuine, CalibrationBins)
	}
	r.AUC.PClean, r.PRAUC.PClean = metrics(c.pClean, c.genuine)
	r.AUC.Reliability, r.PRAUC.Reliability = metrics(c.reliability, c.genuine)
	if in.Baseline != nil {
		var s []float64
		var g []bool
		for i, ok := range c.hasShadow {
			if ok {
				s = append(s, c.negLoss[i])
				g = append(g, c.genuine[i])
			}
		}
		r.baseline(BaselineLoss, s, g)
	}
	for k, name := range countBaselines {
		if !c.counter.Reported(name) || name == BaselineDwell && c.truth.Mode == TruthDwell {
			continue // too few dwell times or gaps, or dwell is the truth itself
		}
		r.baseline(name, c.counts[k], c.genuine)
	}
	return r
}

// baseline records the metrics of the named baseline's scores s against
// genuine, in the better direction, and keeps BestBaseline up to date.
func (r *Report) baseline(name string, s []float64, genuine []bool) {
	s, negated := BetterDirection(s, genuine)
	auc, ap := metrics(s, genuine)
	*r.AUC.baseline(name), *r.PRAUC.baseline(name) = auc, ap
	if auc == nil {
		return
	}
	if r.BaselineDirection == nil {
		r.BaselineDirection = map[string]string{}
	}
	r.BaselineDirection[name] = "higher_is_genuine"
	if negated {
		r.BaselineDirection[name] = "lower_is_genuine"
	}
	if r.BestBaseline == "" || *auc > **r.AUC.baseline(r.BestBaseline) {
		r.BestBaseline = name
	}
}

func metrics(s []float64, g []bool) (auc, ap *float64) {
	if v, err := ROCAUC(s, g); err == nil {
		auc = &v
	}
	if v, err := AveragePrecision(s, g); err == nil {
		ap = &v
	}
	return auc, ap
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteFile writes r as JSON to path atomically (temporary file, fsync,
// rename).
func (r *Report) WriteFile(path string) error {
	return atomicfile.WriteFile(path, r.WriteJSON)
}

// outOfOrderShare is the share of the events with a gap whose times run
// backwards beyond which the summary says the log may not be in time
// order: a log in time order has next to none (producers' clocks that
// disagree by a little), one in another order about half.
const outOfOrderShare = 0.05

// InvalidReasons lists the dead-letter reasons with their counts, by
// name: "bad_type 2, model_rejected 18".
func (r *Report) InvalidReasons() string {
	reasons := make([]string, 0, len(r.InvalidByReason))
	for k := range r.InvalidByReason {
		reasons = append(reasons, k)
	}
	slices.Sort(reasons)
	for i, k := range reasons {
		reasons[i] = fmt.Sprintf("%s %d", k, r.InvalidByReason[k])
	}
	return strings.Join(reasons, ", ")
}

// Print writes a human summary of r.
func (r *Report) Print(w io.Writer) error { return r.PrintAs(w, "replay") }

// PrintAs is Print with the first line naming command instead of replay.
func (r *Report) PrintAs(w io.Writer, command string) error {
	var b strings.Builder
	events := "events"
	if r.Events == 1 {
		events = "event"
	}
	fmt.Fprintf(&b, "%s: %d %s scored, %d invalid", command, r.Events, events, r.Invalid)
	if r.Invalid > 0 {
		fmt.Fprintf(&b, " (%s)", r.InvalidReasons())
	}
	if r.Blank > 0 {
		fmt.Fprintf(&b, ", %d blank", r.Blank)
	}
	if r.EventsPerSec > 0 || r.Events == 0 {
		fmt.Fprintf(&b, "; %.1f s, %.0f events/s\n", r.Seconds, r.EventsPerSec)
	} else { // a span too short to measure a rate over (the demo's, under 50 ms)
		fmt.Fprintf(&b, "; %.3f s, too short to measure a rate\n", r.Seconds)
	}
	if r.Passes > 1 {
		times := "once"
		if r.Passes > 2 {
			times = fmt.Sprintf("%d times", r.Passes-1)
		}
		fmt.Fprintf(&b, "scored in pass %d of %d: the models had learned from every event %s before (in-sample scores)\n", r.Passes, r.Passes, times)
	}
	if r.NumericalErrors > 0 {
		fmt.Fprintf(&b, "numerical errors: %d updates discarded\n", r.NumericalErrors)
	}
	refits := fmt.Sprintf("%d GMM refits", r.Model.Refits)
	if !r.GMM.Fitted && r.Model.Refits > 0 {
		refits = fmt.Sprintf("%d GMM refit runs, none fitted", r.Model.Refits)
	}
	fmt.Fprintf(&b, "distilled: %.1f%% of events; rho %.3g; %s%s\n", 100*r.DistilledShare, r.Model.Rho, refits, r.unfitted())
	if r.Events > 0 && r.WeightSources != nil {
		b.WriteString("weight formed by:")
		sep := " "
		for _, src := range online.WeightSources() {
			if n := r.WeightSources[src.String()]; n > 0 {
				fmt.Fprintf(&b, "%s%s %.1f%%", sep, src, 100*float64(n)/float64(r.Events))
				sep = ", "
			}
		}
		b.WriteString("\n")
	}
	if k := r.Model.UserPriorStrength; k > 0 {
		fmt.Fprintf(&b, "user prior: strength %s events (%g: the users' genuine shares do not differ; the smaller, the more a few users send the noise)\n", eventCount(k), online.UserPriorMax)
	}
	if k := r.Model.ItemPriorStrength; k > 0 {
		fmt.Fprintf(&b, "item prior: strength %s events (%g: the items' genuine shares do not differ; the smaller, the more a few items draw the noise)\n", eventCount(k), online.UserPriorMax)
	}
	switch burst := r.Model.Burst; {
	case burst != nil && burst.Disputed:
		fmt.Fprintf(&b, "bursts: %.0f%% of the gaps between a user's clicks are a burst about %.1f s after the previous click, whose clicks the classifier places above the others: the premise that quick clicks are the more often noise is in doubt on this stream: the gap is read by it all the same, but not on the events an event type weighs; if quick clicks are the genuine ones here (items opened in tabs), set model.dwell_direction: learned, which drops it (docs/design/model.md, \"Bursts\")\n", 100*burst.Share, burst.CentreSeconds)
	case burst != nil:
		fmt.Fprintf(&b, "bursts: %.0f%% of the gaps between a user's clicks are a burst about %.1f s after the previous click, whose clicks the weight reads as the more often noise (the premise of dwell_direction long; docs/design/model.md, \"Bursts\"); where dwell does not weigh an event, the gap is read the more strongly for it, and p_clean's log-odds count %.2f of themselves in the weight's level, as much as they tell the burst's clicks from the others\n", 100*burst.Share, burst.CentreSeconds, burst.PCleanSlope)
	}
	if len(r.Model.UnrankedTypes) > 0 {
		fmt.Fprintf(&b, "event types without a rank in model.event_order: %s (add them to the order, least engaged first, to rank them)\n",
			strings.Join(r.Model.UnrankedTypes, ", "))
	}
	if len(r.Model.OutOfOrderTypes) > 0 {
		fmt.Fprintf(&b, "event types read without their rank in model.event_order, the classifier ranking their events well below a lower-ranked type's: %s (weighed by p_clean and the context's evidence while it does, by neither instrument; docs/design/model.md, \"Purchases that are the noise\")\n",
			strings.Join(r.Model.OutOfOrderTypes, ", "))
	}
	if r.WithGap > 0 && float64(r.OutOfOrder) > outOfOrderShare*float64(r.WithGap) {
		fmt.Fprintf(&b, "out of time order: %d of the %d events after an earlier one of their user (%.0f%%) have an earlier time than it: if the log is not in time order (a file in another order, such as MovieLens' u.data), sort it by ts, for the weight reads the gap since the user's previous event (denoiser-lab convert movielens sorts u.data)\n",
			r.OutOfOrder, r.WithGap, 100*float64(r.OutOfOrder)/float64(r.WithGap))
	}
	for _, f := range consumer.FieldNames() {
		if n := r.Shadowed[f]; n > 0 {
			fmt.Fprintf(&b, "not read: %s the member fields.%s names and %s %q, which is read only without fields.%s: drop the setting, or name the member the records carry (consumer/FORMAT.md)\n", records(n, "lack", "lacks"), f, verb(n, "have", "has"), f, f)
		}
	}
	if r.TruthUnread > 0 {
		fmt.Fprintf(&b, "truth not read: %s a truth that is neither \"genuine\" nor \"noise\" (case ignored): %s scored without one, the member carried as it came (consumer/FORMAT.md)\n", records(r.TruthUnread, "have", "has"), verb(r.TruthUnread, "they are", "it is"))
	}
	for _, f := range consumer.OutputFields {
		if n := r.Replaced[f]; n > 0 {
			fmt.Fprintf(&b, "replaced: %s %q, a field the output writes itself, so %s own value is not in the output: rename the member to keep it (consumer/FORMAT.md)\n", records(n, "have", "has"), f, verb(n, "their", "its"))
		}
	}
	for _, a := range consumer.Aliases { // in the table's order
		if n := r.Unread[a.Name]; n > 0 {
			fmt.Fprintf(&b, "not read: %s %q and no %q: rename the member, or read it with fields.%s: %s (consumer/FORMAT.md)\n", records(n, "have", "has"), a.Name, a.Field, a.Field, a.Name)
		}
	}
	if r.Truth == TruthNone {
		b.WriteString("truth none: the scores are not evaluated\n")
	} else {
		r.printMetrics(&b)
	}
	if g := r.GMM; g.Fitted {
		for i, c := range g.Components {
			tag := ""
			if i == g.Reliable {
				tag = " (reliable)"
			}
			fmt.Fprintf(&b, "GMM component %d%s: weight %.3f, mean (%.3g, %.3g)\n", i, tag, c.Weight, c.Mean[0], c.Mean[1])
		}
	} else {
		b.WriteString("GMM: not fitted\n")
	}
	if len(r.MeanTransition) > 0 {
		b.WriteString("mean T̂ (rows: clean class, columns: observed class):\n")
		for _, row := range r.MeanTransition {
			b.WriteString("  ")
			for j, v := range row {
				if j > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "%.3f", v)
			}
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printMetrics writes the truth line and the table of ROC-AUC and PR-AUC.
func (r *Report) printMetrics(b *strings.Builder) {
	fmt.Fprintf(b, "truth %s: %d events (%d genuine, %d noise), %d without truth\n", r.Truth, r.WithTruth, r.Genuine, r.Noise, r.WithoutTruth)
	if r.WithTruth == 0 && r.Events > 0 {
		b.WriteString("  no event has a truth to evaluate by: --truth field reads a \"truth\" member (\"genuine\" or \"noise\"), rating:R a \"rating\", dwell:MS a \"dwell_ms\"\n")
	}
	fmt.Fprintf(b, "  %-16s %8s %8s\n", "score", "ROC-AUC", "PR-AUC")
	row := func(name string, auc, ap *float64) {
		fmt.Fprintf(b, "  %-16s %8s %8s\n", name, num(auc), num(ap))
	}
	calibration := ""
	if e, ok := r.ECE["weight"]; ok {
		calibration = fmt.Sprintf("; calibration error %.3f", e)
	}
	fmt.Fprintf(b, "  %-16s %8s %8s  (recommended: train on it%s)\n", "weight", num(r.AUC.Weight), num(r.PRAUC.Weight), calibration)
	row("p_clean", r.AUC.PClean, r.PRAUC.PClean)
	row("reliability", r.AUC.Reliability, r.PRAUC.Reliability)
	for _, name := range baselineNames {
		auc, ap := *r.AUC.baseline(name), *r.PRAUC.baseline(name)
		if auc == nil && name != BaselineLoss {
			continue
		}
		tag := ""
		if name == r.BestBaseline {
			tag = "  (best baseline)"
		}
		fmt.Fprintf(b, "  %-16s %8s %8s%s\n", name, num(auc), num(ap), tag)
	}
	if strings.HasPrefix(r.Truth, TruthDwell) && r.WithTruth > 0 {
		b.WriteString("  note: this truth is dwell_ms, which weight reads itself (and the dwell baseline would be the truth, so it is left out): " +
			"these figures do not test the weight; a truth from elsewhere (--truth field, rating:R) does\n")
	}
	if learned := r.Events * uint64(r.Passes); r.WithTruth > 0 && learned < uint64(r.warmUp) {
		fmt.Fprintf(b, "  note: the model learned from %d events, fewer than its warm-up (model.warm_up %d): it has barely started, "+
			"and these figures say little of what it does on a longer stream\n", learned, r.warmUp)
	}
}

// unfitted says, after the count of refits, why the mixture is not fitted
// ("" when it is): a refit runs every model.refit_every events, and fits
// nothing until the mixture's window holds model.gmm_min_samples
// distilled events.
func (r *Report) unfitted() string {
	switch {
	case r.GMM.Fitted:
		return ""
	case r.mixture.off:
		return " (the mixture is off: model.no_gmm or model.plain)"
	case r.mixture.minSamples > 0 && r.Model.Distilled < uint64(r.mixture.minSamples):
		return fmt.Sprintf(" (each found too few distilled events to fit: %d of the %d the first fit needs, model.gmm_min_samples)", r.Model.Distilled, r.mixture.minSamples)
	case r.mixture.minSamples == 0 && r.Model.Refits > 0:
		return " (each found too few distilled events to fit)"
	}
	return " (not fitted yet)"
}

func num(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.4f", *v)
}

// inputError is err's message, "" for nil.
func inputError(err *consumer.ReadError) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// eventCount writes a count of events to three significant digits, and
// one of 100 or more whole, without an exponent: the summary read "1e+03
// events" for the strength at its cap.
func eventCount(x float64) string {
	if math.Abs(x) >= 100 {
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

// records is "n records " and the plural verb, or "1 record " and the
// singular one: the summary's counts of records read as a sentence.
func records(n uint64, plural, singular string) string {
	return fmt.Sprintf("%d %s %s", n, verb(n, "records", "record"), verb(n, plural, singular))
}

// verb is plural, or singular where n is 1.
func verb(n uint64, plural, singular string) string {
	if n == 1 {
		return singular
	}
	return plural
}
