package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"denoiser/consumer"
	"denoiser/online"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseTruth(t *testing.T) {
	good := map[string]Truth{
		"":            {Mode: TruthField},
		"field":       {Mode: TruthField},
		"dwell:10000": {Mode: TruthDwell, Threshold: 10000},
		"rating:2":    {Mode: TruthRating, Threshold: 2},
		"rating:2.5":  {Mode: TruthRating, Threshold: 2.5},
		"rating:0.5":  {Mode: TruthRating, Threshold: 0.5},
		"none":        {Mode: TruthNone},
	}
	for s, want := range good {
		got, err := ParseTruth(s)
		if err != nil || got != want {
			t.Errorf("ParseTruth(%q) = %+v, %v", s, got, err)
		}
		if s != "" && got.String() != s {
			t.Errorf("String() = %q, want %q", got.String(), s)
		}
	}
	for _, s := range []string{"dwell", "dwell:", "dwell:x", "rating:-1", "rating:-0.5", "rating:NaN", "rating:Inf", "rating:1e400", "rating:0x1p1", "rating:1_0", "dwell:2.5", "field:1", "label", "Rating:2", "none:1"} {
		if _, err := ParseTruth(s); !errors.Is(err, ErrTruthMode) {
			t.Errorf("ParseTruth(%q) = %v, want ErrTruthMode", s, err)
		}
	}
}

func TestTruthGenuine(t *testing.T) {
	dwell := Truth{Mode: TruthDwell, Threshold: 10000}
	rating := Truth{Mode: TruthRating, Threshold: 2}
	halfStar := Truth{Mode: TruthRating, Threshold: 2.5}
	field := Truth{Mode: TruthField}
	tests := []struct {
		truth   Truth
		ev      consumer.Event
		genuine bool
		ok      bool
	}{
		{dwell, consumer.Event{DwellMS: 9999, HasDwell: true}, false, true},
		{dwell, consumer.Event{DwellMS: 10000, HasDwell: true}, true, true},
		{dwell, consumer.Event{Truth: "genuine"}, false, false},
		{rating, consumer.Event{Rating: 2, HasRating: true}, false, true},
		{rating, consumer.Event{Rating: 3, HasRating: true}, true, true},
		{rating, consumer.Event{}, false, false},
		{rating, consumer.Event{Rating: 2.5, HasRating: true}, true, true},
		{rating, consumer.Event{Rating: 1.5, HasRating: true}, false, true},
		{halfStar, consumer.Event{Rating: 2.5, HasRating: true}, false, true},
		{halfStar, consumer.Event{Rating: 3, HasRating: true}, true, true},
		{halfStar, consumer.Event{Rating: 2, HasRating: true}, false, true},
		{field, consumer.Event{Truth: "genuine"}, true, true},
		{field, consumer.Event{Truth: "noise", DwellMS: 50000, HasDwell: true}, false, true},
		{field, consumer.Event{}, false, false},
		{Truth{Mode: TruthNone}, consumer.Event{Truth: "genuine", DwellMS: 50000, HasDwell: true, Rating: 5, HasRating: true}, false, false},
	}
	for _, tt := range tests {
		g, ok := tt.truth.Genuine(&tt.ev)
		if g != tt.genuine || ok != tt.ok {
			t.Errorf("%v.Genuine(%+v) = %v, %v; want %v, %v", tt.truth, tt.ev, g, ok, tt.genuine, tt.ok)
		}
	}
}

type countSink struct{ writes, flushes int }

func (s *countSink) Write(context.Context, *consumer.Result) error { s.writes++; return nil }
func (s *countSink) Flush(context.Context) error                   { s.flushes++; return nil }

func TestCollectorAndBuild(t *testing.T) {
	next := &countSink{}
	c := NewCollector(Truth{Mode: TruthField}, next)
	// Four events with truth, one without. p_clean ranks perfectly,
	// reliability is tied, the baseline loss ranks perfectly once negated.
	evs := []struct {
		truth    string
		pClean   float64
		loss     float64
		distill  int
		noShadow bool
	}{
		{"genuine", 0.9, 0.1, 1, false},
		{"noise", 0.2, 2.0, -1, false},
		{"genuine", 0.8, 0.3, -1, false},
		{"", 0.5, 1.0, 0, false},
		{"noise", 0.1, 3.0, -1, true},
	}
	// The weights' sources: the first event's p_clean, then dwell's
	// instrument, the last two the gap's.
	sources := []online.WeightSource{online.SourcePClean, online.SourceDwell, online.SourceDwell, online.SourceGap, online.SourceGap}
	for k, e := range evs {
		r := &consumer.Result{
			Event:     consumer.Event{User: "u", Item: "i", Truth: e.truth},
			Score:     online.Score{Weight: e.pClean, PClean: e.pClean, Reliability: 1, Distilled: e.distill, Source: sources[k]},
			Shadow:    online.Score{Loss: e.loss},
			HasShadow: !e.noShadow,
		}
		if err := c.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if next.writes != 5 || next.flushes != 1 || c.Scored() != 5 {
		t.Fatalf("next sink saw %d writes, %d flushes; Scored %d", next.writes, next.flushes, c.Scored())
	}
	sum := online.Summary{Events: 5, GMM: online.GMMSummary{Fitted: true, Reliable: 1}, MeanTransition: [][]float64{{0.9, 0.1}, {0.2, 0.8}}}
	r := Build(Inputs{
		Input: "in.jsonl", Collector: c, Model: sum, Baseline: &online.Summary{},
		Stats:   consumer.Stats{Records: 7, Skipped: 1, SkippedByReason: map[consumer.SkipReason]uint64{consumer.SkipBlank: 1}, Scored: 5, Rejected: 1, ByReason: map[consumer.Reason]uint64{consumer.ReasonNotJSON: 1}},
		Elapsed: 2 * time.Second, Passes: 2,
	})
	if r.Events != 5 || r.Invalid != 1 || r.InvalidByReason["not_json"] != 1 || r.EventsPerSec != 2.5 || r.Seconds != 2 {
		t.Errorf("counts: %+v", r)
	}
	if r.WithTruth != 4 || r.WithoutTruth != 1 || r.Genuine != 2 || r.Noise != 2 || r.DistilledShare != 0.4 {
		t.Errorf("truth counts: %+v", r)
	}
	wantSources := map[string]uint64{"p_clean": 1, "context": 0, "dwell_instrument": 2, "type_instrument": 0, "gap_instrument": 2}
	if !maps.Equal(r.WeightSources, wantSources) {
		t.Errorf("weight sources %v, want %v", r.WeightSources, wantSources)
	}
	if *r.AUC.PClean != 1 || *r.PRAUC.PClean != 1 || *r.AUC.Reliability != 0.5 || *r.PRAUC.Reliability != 0.5 {
		t.Errorf("metrics: auc %v %v, pr %v %v", *r.AUC.PClean, *r.AUC.Reliability, *r.PRAUC.PClean, *r.PRAUC.Reliability)
	}
	// weight (here = p_clean) 0.1 and 0.2 on noise, 0.8 and 0.9 on genuine
	// events: four bins of one event each, each off by its distance to 0 or 1.
	wantDiagram := []CalibrationBin{{0.1, 0.2, 0.1, 0, 1}, {0.2, 0.3, 0.2, 0, 1}, {0.8, 0.9, 0.8, 1, 1}, {0.9, 1, 0.9, 1, 1}}
	if len(r.ReliabilityDiagram) != len(wantDiagram) || math.Abs(r.ECE["weight"]-0.15) > 1e-12 {
		t.Errorf("weight: ECE %v, reliability diagram %+v; want 0.15, %+v", r.ECE["weight"], r.ReliabilityDiagram, wantDiagram)
	} else {
		for i, b := range r.ReliabilityDiagram {
			w := wantDiagram[i]
			if math.Abs(b.Lower-w.Lower) > 1e-12 || math.Abs(b.Upper-w.Upper) > 1e-12 || math.Abs(b.MeanPredicted-w.MeanPredicted) > 1e-12 || b.ShareGenuine != w.ShareGenuine || b.Count != w.Count {
				t.Errorf("reliability diagram bin %d: %+v, want %+v", i, b, w)
			}
		}
	}
	// The baseline covers the three events with a shadow score: perfect.
	if r.AUC.LossBaseline == nil || *r.AUC.LossBaseline != 1 {
		t.Errorf("loss_baseline AUC %v", r.AUC.LossBaseline)
	}

	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"passes", "events", "invalid", "seconds", "events_per_sec", "distilled_share", "weight_sources", "auc", "pr_auc", "ece", "reliability_diagram", "gmm", "mean_transition"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report JSON lacks %q", k)
		}
	}
	for _, k := range []string{"auc", "pr_auc"} {
		obj := m[k].(map[string]any)
		for _, s := range []string{"p_clean", "reliability", "loss_baseline"} {
			if _, ok := obj[s]; !ok {
				t.Errorf("%s lacks %q", k, s)
			}
		}
	}

	path := filepath.Join(t.TempDir(), "report.json")
	if err := r.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, js.Bytes()) {
		t.Fatalf("WriteFile wrote %q, %v", b, err)
	}

	human := printed(t, &r)
	for _, want := range []string{"5 events scored, 1 invalid (not_json 1)", "scored in pass 2 of 2", "calibration error 0.150", "weight formed by: p_clean 20.0%, dwell_instrument 40.0%, gap_instrument 40.0%", "p_clean            1.0000   1.0000", "(reliable)", "0.900 0.100"} {
		if !strings.Contains(human, want) {
			t.Errorf("summary lacks %q:\n%s", want, human)
		}
	}
}

// TestCollectorWithoutTruth: with truth mode none a Collector passes
// every record on, counts it as without truth, and keeps nothing per
// event or per id: its memory does not grow with the stream.
func TestCollectorWithoutTruth(t *testing.T) {
	next := &countSink{}
	c := NewCollector(Truth{Mode: TruthNone}, next)
	r := &consumer.Result{Event: consumer.Event{Truth: "genuine"}}
	for j := range 10000 {
		r.Event.User, r.Event.Item = fmt.Sprint("u", j), fmt.Sprint("i", j)
		if err := c.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if next.writes != 10000 || c.withoutTruth != 10000 || len(c.genuine) != 0 || len(c.counter.users) != 0 || len(c.counter.pairs) != 0 {
		t.Fatalf("passed on %d, %d without truth; kept %d events, %d users, %d pairs",
			next.writes, c.withoutTruth, len(c.genuine), len(c.counter.users), len(c.counter.pairs))
	}
	rep := Build(Inputs{Input: "in.jsonl", Collector: c, Model: online.Summary{Events: 10000}, Elapsed: time.Second})
	if rep.WithTruth != 0 || rep.WithoutTruth != 10000 || rep.Truth != TruthNone {
		t.Fatalf("report: %d with truth, %d without, truth %q", rep.WithTruth, rep.WithoutTruth, rep.Truth)
	}
	// The summary evaluates nothing: no hint to give a truth (it was
	// asked for none), no table of n/a.
	human := printed(t, &rep)
	if !strings.Contains(human, "truth none: the scores are not evaluated") ||
		strings.Contains(human, "no event has a truth") || strings.Contains(human, "ROC-AUC") {
		t.Fatalf("summary with --truth none:\n%s", human)
	}
}

// TestPrintUnfittedMixture: a summary whose mixture is not fitted says
// why beside the count of refits, which ran and fitted nothing ("2 GMM
// refits" beside "GMM: not fitted" read as a contradiction).
func TestPrintUnfittedMixture(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Inputs
		say  string
	}{
		{"too few distilled", Inputs{Model: online.Summary{Refits: 2, Distilled: 80}, Config: online.Config{GMMMinSamples: 256}},
			"2 GMM refit runs, none fitted (each found too few distilled events to fit: 80 of the 256 the first fit needs, model.gmm_min_samples)"},
		{"configuration unknown", Inputs{Model: online.Summary{Refits: 2, Distilled: 80}}, "2 GMM refit runs, none fitted (each found too few distilled events to fit)"},
		{"mixture off", Inputs{Model: online.Summary{Refits: 2}, Config: online.Config{NoGMM: true}}, "2 GMM refit runs, none fitted (the mixture is off: model.no_gmm or model.plain)"},
		{"fitted", Inputs{Model: online.Summary{Refits: 2, GMM: online.GMMSummary{Fitted: true}}, Config: online.Config{GMMMinSamples: 256}}, "2 GMM refits\n"},
	} {
		tc.in.Collector = NewCollector(Truth{Mode: TruthField}, nil)
		rep := Build(tc.in)
		human := printed(t, &rep)
		if !strings.Contains(human, tc.say) {
			t.Errorf("%s: summary lacks %q:\n%s", tc.name, tc.say, human)
		}
	}
}

func TestBuildUndefinedMetrics(t *testing.T) {
	c := NewCollector(Truth{Mode: TruthDwell, Threshold: 10}, nil)
	_ = c.Write(context.Background(), &consumer.Result{Event: consumer.Event{DwellMS: 50, HasDwell: true}, Score: online.Score{Distilled: -1}})
	r := Build(Inputs{Collector: c})
	if r.AUC.PClean != nil || r.AUC.LossBaseline != nil || r.PRAUC.Reliability != nil {
		t.Fatalf("metrics defined on one class: %+v", r.AUC)
	}
	var js, human bytes.Buffer
	if err := errors.Join(r.WriteJSON(&js), r.Print(&human)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"p_clean": null`) || !strings.Contains(human.String(), "n/a") {
		t.Fatalf("undefined metrics not shown as null / n/a:\n%s\n%s", js.String(), human.String())
	}
	// A score that Step did not write (read back from the scored output)
	// has no source: the report's weight_sources is then null, and the
	// summary has no line of them.
	if r.WeightSources != nil || !strings.Contains(js.String(), `"weight_sources": null`) || strings.Contains(human.String(), "weight formed by") {
		t.Errorf("weight sources of scores without one: %v\n%s", r.WeightSources, human.String())
	}
}

func TestProgress(t *testing.T) {
	var buf syncBuffer
	var read atomic.Int64
	p := StartProgress(&buf, time.Millisecond, 100, read.Load, func() uint64 { return uint64(read.Load()) })
	read.Store(50)
	time.Sleep(20 * time.Millisecond)
	read.Store(100)
	p.Stop()
	p.Stop()
	out := buf.String()
	if !strings.Contains(out, "100.0%") || !strings.HasSuffix(out, "\n") || !strings.Contains(out, "\r[") {
		t.Fatalf("progress output %q", out)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPrintOutOfOrder: a log whose times run backwards for more than
// outOfOrderShare of its events with a gap is pointed out (sort it by
// ts), and counted in the report; one in time order is not.
func TestPrintOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shuffled bool
	}{{"in time order", false}, {"in another order", true}} {
		c := NewCollector(Truth{Mode: TruthField}, nil)
		for i := range 200 {
			ts := int64(1_700_000_000_000 + i*1000)
			if tc.shuffled && i%4 == 1 {
				ts -= 100_000
			}
			ev := consumer.Event{User: fmt.Sprint("u", i%10), Item: "i", TS: ts, HasTS: true, Truth: consumer.TruthGenuine}
			if err := c.Write(context.Background(), &consumer.Result{Event: ev, Score: online.Score{Distilled: -1}}); err != nil {
				t.Fatal(err)
			}
		}
		rep := Build(Inputs{Collector: c})
		human := printed(t, &rep)
		said := strings.Contains(human, "out of time order: ")
		if said != tc.shuffled || tc.shuffled != (rep.OutOfOrder > 0) || rep.WithGap != 190 {
			t.Errorf("%s: said %v, %d of %d out of order:\n%s", tc.name, said, rep.OutOfOrder, rep.WithGap, human)
		}
	}
}

// TestPrintRate: a rate is printed where one was measured; events over a
// span too short to measure it (the demo gives none under 50 ms) say so
// instead of "0 events/s".
func TestPrintRate(t *testing.T) {
	for _, tc := range []struct {
		rep  Report
		want string
	}{
		{Report{Events: 20000, Seconds: 0.2, EventsPerSec: 100000}, "; 0.2 s, 100000 events/s\n"},
		{Report{Events: 14, Seconds: 0.002}, "; 0.002 s, too short to measure a rate\n"},
		{Report{}, "; 0.0 s, 0 events/s\n"},
	} {
		var b bytes.Buffer
		if err := tc.rep.Print(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%+v prints:\n%s\nwant %q in it", tc.rep, b.String(), tc.want)
		}
	}
}

// TestEventCount: a prior's strength is written without an exponent
// (the summary read "strength 1e+03 events").
func TestEventCount(t *testing.T) {
	for x, want := range map[float64]string{1000: "1000", 1234.4: "1234", 100: "100", 6.758295: "6.76", 15.599: "15.6", 0.5: "0.5"} {
		if got := eventCount(x); got != want {
			t.Errorf("eventCount(%v) = %q, want %q", x, got, want)
		}
	}
}

// TestPrintNotes: a dwell truth, which the weight reads itself, and a
// model that learned from fewer events than its warm-up are each pointed
// out under the table; a field truth on a model past its warm-up is not.
func TestPrintNotes(t *testing.T) {
	const circular, young = "these figures do not test the weight", "fewer than its warm-up (model.warm_up 1000)"
	for _, tc := range []struct {
		name   string
		truth  Truth
		events int
		say    []string
		not    []string
	}{
		{"dwell truth", Truth{Mode: TruthDwell, Threshold: 10000}, 1200, []string{circular}, []string{young}},
		{"field truth, 300 events", Truth{Mode: TruthField}, 300, []string{young}, []string{circular}},
		{"field truth, 1200 events", Truth{Mode: TruthField}, 1200, nil, []string{circular, young}},
	} {
		c := NewCollector(tc.truth, nil)
		for n := range tc.events {
			ev := consumer.Event{DwellMS: int64(1000 + 20000*(n%2)), HasDwell: true, Truth: []string{consumer.TruthNoise, consumer.TruthGenuine}[n%2]}
			_ = c.Write(context.Background(), &consumer.Result{Event: ev, Score: online.Score{Distilled: -1, Weight: 0.5, PClean: 0.5}})
		}
		rep := Build(Inputs{Collector: c, Config: online.Config{WarmUp: 1000}, Stats: consumer.Stats{Scored: uint64(tc.events)}})
		human := printed(t, &rep)
		for _, s := range tc.say {
			if !strings.Contains(human, s) {
				t.Errorf("%s: summary lacks %q:\n%s", tc.name, s, human)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(human, s) {
				t.Errorf("%s: summary says %q", tc.name, s)
			}
		}
	}
}

// TestPrintCountsAsSentences: the summary's lines that count records say
// "1 record has" for one and "2 records have" for more.
func TestPrintCountsAsSentences(t *testing.T) {
	alias, field, out := consumer.Aliases[0], consumer.FieldNames()[0], consumer.OutputFields[0]
	for _, tc := range []struct {
		n    uint64
		want []string
	}{
		{1, []string{
			fmt.Sprintf("not read: 1 record lacks the member fields.%s names and has %q", field, field),
			`truth not read: 1 record has a truth that is neither "genuine" nor "noise" (case ignored): it is scored without one`,
			fmt.Sprintf("replaced: 1 record has %q, a field the output writes itself, so its own value", out),
			fmt.Sprintf("not read: 1 record has %q and no %q", alias.Name, alias.Field),
		}},
		{2, []string{
			fmt.Sprintf("not read: 2 records lack the member fields.%s names and have %q", field, field),
			`truth not read: 2 records have a truth that is neither "genuine" nor "noise" (case ignored): they are scored without one`,
			fmt.Sprintf("replaced: 2 records have %q, a field the output writes itself, so their own value", out),
			fmt.Sprintf("not read: 2 records have %q and no %q", alias.Name, alias.Field),
		}},
	} {
		rep := Report{
			Truth: TruthField, TruthUnread: tc.n,
			Shadowed: map[string]uint64{field: tc.n},
			Replaced: map[string]uint64{out: tc.n},
			Unread:   map[string]uint64{alias.Name: tc.n},
		}
		human := printed(t, &rep)
		for _, w := range tc.want {
			if !strings.Contains(human, w) {
				t.Errorf("n=%d: no %q in:\n%s", tc.n, w, human)
			}
		}
	}
}

// printed is rep's human summary (Report.Print).
func printed(t *testing.T, rep *Report) string {
	t.Helper()
	var human bytes.Buffer
	if err := rep.Print(&human); err != nil {
		t.Fatal(err)
	}
	return human.String()
}

// TestPrintBurst: a burst the weight reads is named as read; one the
// classifier disputes is named with the setting that drops the premise;
// without one the report says nothing of bursts.
func TestPrintBurst(t *testing.T) {
	for _, tc := range []struct {
		burst *online.BurstSummary
		want  []string
	}{
		{nil, nil},
		{&online.BurstSummary{CentreSeconds: 1.6, Share: 0.19, PCleanSlope: 0.14}, []string{"bursts: 19% of the gaps", "about 1.6 s after", "the weight reads as the more often noise", "p_clean's log-odds count 0.14 of themselves"}},
		{&online.BurstSummary{CentreSeconds: 1.5, Share: 0.12, Disputed: true}, []string{"bursts: 12% of the gaps", "the classifier places above the others", "model.dwell_direction: learned"}},
	} {
		out := printed(t, &Report{Events: 10, Model: online.Summary{Burst: tc.burst}})
		if tc.want == nil && strings.Contains(out, "bursts:") {
			t.Errorf("no burst: the report says\n%s", out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("burst %+v: the report lacks %q:\n%s", *tc.burst, w, out)
			}
		}
	}
}
