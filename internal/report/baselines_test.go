package report

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"denoiser/consumer"
	"denoiser/online"
)

// TestCounterPrequential checks the counting baselines on a stream whose
// counts are known: each event is scored from the events before it only.
func TestCounterPrequential(t *testing.T) {
	c := NewCounter()
	type ev struct {
		user, item string
		dwell      int64
		hasDwell   bool
		want       [4]float64 // item, user, pair, log dwell
	}
	stream := []ev{
		{"a", "x", 99, true, [4]float64{0, 0, 0, math.Log(100)}},
		{"a", "x", 0, false, [4]float64{1, 1, 1, math.Log(100)}}, // missing dwell: the mean so far
		{"b", "x", 9, true, [4]float64{2, 0, 0, math.Log(10)}},
		{"a", "y", 0, false, [4]float64{0, 2, 0, (math.Log(100) + math.Log(10)) / 2}},
	}
	for i, e := range stream {
		got := c.Observe(e.user, e.item, e.dwell, e.hasDwell, 0, false)
		for k := range 4 {
			if math.Abs(got[k]-e.want[k]) > 1e-12 {
				t.Errorf("event %d: %s = %v, want %v", i, countBaselines[k], got[k], e.want[k])
			}
		}
	}
	if s := c.DwellShare(); s != 0.5 {
		t.Errorf("dwell share %v, want 0.5", s)
	}
	if s := c.GapShare(); s != 0 {
		t.Errorf("gap share %v without timestamps, want 0", s)
	}
}

// TestCounterUserGap checks the user_gap baseline on two users with known
// timestamps: log(1 + seconds) since the user's previous timestamped
// event, the running mean of the gaps so far where there is none, 0 for a
// timestamp earlier than the user's last.
func TestCounterUserGap(t *testing.T) {
	gap := slices.Index(countBaselines[:], BaselineUserGap)
	if gap < 0 || CountBaselines()[gap] != BaselineUserGap {
		t.Fatalf("user_gap is not a counting baseline: %v", CountBaselines())
	}
	c := NewCounter()
	type ev struct {
		user  string
		ts    int64 // unix ms
		hasTS bool
		want  float64
	}
	stream := []ev{
		{"a", 1_000_000, true, 0},                                                                  // a's first event, no gap yet: 0
		{"b", 1_002_000, true, 0},                                                                  // b's first: still no gap
		{"a", 1_009_000, true, math.Log(10)},                                                       // 9 s after a's first
		{"b", 1_101_000, true, math.Log(100)},                                                      // 99 s after b's first
		{"c", 1_200_000, true, (math.Log(10) + math.Log(100)) / 2},                                 // c's first: the mean of the gaps so far
		{"a", 0, false, (math.Log(10) + math.Log(100)) / 2},                                        // no timestamp: the mean, a's last time kept
		{"a", 1_008_000, true, 0},                                                                  // before a's last (1_009_000): clamped to 0
		{"a", 1_011_000, true, math.Log(4)},                                                        // 3 s after a's last, 1_008_000
		{"b", 0, false, (math.Log(10) + math.Log(100) + 0 + math.Log(4)) / 4},                      // no timestamp: the mean
		{"b", 1_101_500, true, math.Log1p(0.5)},                                                    // 0.5 s after b's last timestamped
		{"d", 0, false, (math.Log(10) + math.Log(100) + math.Log(4) + math.Log1p(0.5)) / 5},        // d, no timestamp ever
		{"d", 5_000_000, true, (math.Log(10) + math.Log(100) + math.Log(4) + math.Log1p(0.5)) / 5}, // d's first timestamp
	}
	for i, e := range stream {
		got := c.Observe(e.user, "x", 0, false, e.ts, e.hasTS)
		if math.Abs(got[gap]-e.want) > 1e-12 {
			t.Errorf("event %d (%s): user_gap %v, want %v", i, e.user, got[gap], e.want)
		}
	}
	// Gaps: a at 2, 6 and 7, b at 3 and 9: 5 of 12 events.
	if s, want := c.GapShare(), 5.0/12; math.Abs(s-want) > 1e-15 {
		t.Errorf("gap share %v, want %v", s, want)
	}
	// One event (a at 1_008_000) came before its user's previous one.
	if n := c.OutOfOrder(); n != 1 {
		t.Errorf("%d events out of time order, want 1", n)
	}
}

func TestBetterDirection(t *testing.T) {
	genuine := []bool{false, false, true, true}
	up := []float64{1, 2, 3, 4}
	if s, neg := BetterDirection(up, genuine); neg || !slices.Equal(s, up) {
		t.Errorf("rising score negated: %v %v", s, neg)
	}
	down := []float64{4, 3, 2, 1}
	s, neg := BetterDirection(down, genuine)
	if auc, _ := ROCAUC(s, genuine); !neg || auc != 1 {
		t.Errorf("falling score: negated %v, AUC %v; want negated, 1", neg, auc)
	}
}

// TestBuildBaselines: a stream where noise comes from busy users on fresh
// items, genuine from returning pairs with long dwell. Every baseline is
// reported in its better direction and the best one is named.
func TestBuildBaselines(t *testing.T) {
	c := NewCollector(Truth{Mode: TruthField}, nil)
	write := func(user, item string, dwell int64, truth string) {
		t.Helper()
		r := &consumer.Result{
			Event: consumer.Event{User: user, Item: item, DwellMS: dwell, HasDwell: dwell > 0, Truth: truth},
			Score: online.Score{PClean: 0.5, Reliability: 0.5, Distilled: -1},
		}
		if err := c.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	// Genuine: long dwell; noise: short dwell. User "bot" is noise and its
	// activity grows with every event.
	for i := range 20 {
		write("u"+string(rune('a'+i%5)), "i1", 30000, consumer.TruthGenuine)
		write("bot", "n"+string(rune('a'+i)), 500, consumer.TruthNoise)
	}
	r := Build(Inputs{Collector: c})
	if r.AUC.Dwell == nil || *r.AUC.Dwell != 1 || r.BaselineDirection[BaselineDwell] != "higher_is_genuine" {
		t.Errorf("dwell AUC %v direction %q, want 1 higher_is_genuine", r.AUC.Dwell, r.BaselineDirection[BaselineDwell])
	}
	if r.AUC.ItemPopularity == nil || *r.AUC.ItemPopularity <= 0.5 {
		t.Errorf("item popularity AUC %v, want above 0.5 (i1 is popular and genuine)", r.AUC.ItemPopularity)
	}
	if r.AUC.UserActivity == nil || *r.AUC.UserActivity < 0.5 || r.BaselineDirection[BaselineUserActivity] != "lower_is_genuine" {
		t.Errorf("user activity AUC %v direction %q, want ≥ 0.5 lower_is_genuine", r.AUC.UserActivity, r.BaselineDirection[BaselineUserActivity])
	}
	if r.AUC.LossBaseline != nil {
		t.Errorf("loss baseline %v without a baseline model", *r.AUC.LossBaseline)
	}
	if r.BestBaseline != BaselineDwell {
		t.Errorf("best baseline %q, want dwell", r.BestBaseline)
	}

	// Dwell as the truth: the dwell baseline is left out.
	c2 := NewCollector(Truth{Mode: TruthDwell, Threshold: 10000}, nil)
	for i := range 10 {
		_ = c2.Write(context.Background(), &consumer.Result{Event: consumer.Event{User: "u", Item: "i", DwellMS: int64(i) * 3000, HasDwell: true}})
	}
	if r2 := Build(Inputs{Collector: c2}); r2.AUC.Dwell != nil {
		t.Errorf("dwell baseline %v reported while dwell is the truth", *r2.AUC.Dwell)
	}
}

// TestBuildUserGap: a bot clicks every second, genuine users every few
// minutes. user_gap is reported where at least half the events have a gap,
// in its better direction, and not at all without timestamps.
func TestBuildUserGap(t *testing.T) {
	build := func(stamped bool) Report {
		t.Helper()
		c := NewCollector(Truth{Mode: TruthField}, nil)
		write := func(user, item string, ts int64, truth string) {
			t.Helper()
			r := &consumer.Result{
				Event: consumer.Event{User: user, Item: item, TS: ts, HasTS: stamped, Truth: truth},
				Score: online.Score{PClean: 0.5, Reliability: 0.5, Distilled: -1},
			}
			if err := c.Write(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 20 {
			write("u"+string(rune('a'+i%2)), "i"+string(rune('a'+i%7)), int64(i)*300_000, consumer.TruthGenuine)
			write("bot", "i"+string(rune('a'+i%5)), int64(i)*300_000+int64(i%3)*1000, consumer.TruthNoise)
		}
		return Build(Inputs{Collector: c})
	}
	r := build(true)
	if r.AUC.UserGap == nil || *r.AUC.UserGap < 0.9 || r.PRAUC.UserGap == nil || r.BaselineDirection[BaselineUserGap] != "higher_is_genuine" {
		t.Errorf("user_gap AUC %v direction %q, want ≥ 0.9 higher_is_genuine", num(r.AUC.UserGap), r.BaselineDirection[BaselineUserGap])
	}
	var b strings.Builder
	if err := r.Print(&b); err != nil || !strings.Contains(b.String(), BaselineUserGap) {
		t.Errorf("summary (err %v) lacks user_gap:\n%s", err, b.String())
	}
	if r.AUC.UserGapEvents != nil {
		t.Errorf("user_gap_events %v reported beside user_gap", num(r.AUC.UserGapEvents))
	}
	// Without timestamps the log's order is the clock: the bot's events
	// come one event apart, the users' three.
	r = build(false)
	if r.AUC.UserGap != nil || r.PRAUC.UserGap != nil {
		t.Errorf("user_gap %v reported without timestamps", num(r.AUC.UserGap))
	}
	if r.AUC.UserGapEvents == nil || *r.AUC.UserGapEvents < 0.9 || r.BaselineDirection[BaselineUserGapEvents] != "higher_is_genuine" {
		t.Errorf("user_gap_events AUC %v direction %q, want ≥ 0.9 higher_is_genuine", num(r.AUC.UserGapEvents), r.BaselineDirection[BaselineUserGapEvents])
	}
}

// TestCounterUserGapEvents: log(1 + the events since the user's previous
// one), the running mean of them for a user's first event.
func TestCounterUserGapEvents(t *testing.T) {
	k := slices.Index(countBaselines[:], BaselineUserGapEvents)
	if k < 0 {
		t.Fatalf("user_gap_events is not a counting baseline: %v", CountBaselines())
	}
	c := NewCounter()
	for i, e := range []struct {
		user string
		want float64
	}{
		{"a", 0},               // a's first, no count yet: 0
		{"b", 0},               // b's first
		{"a", math.Log(2)},     // one event (b) between
		{"a", 0},               // right after
		{"c", math.Log(2) / 2}, // c's first: the mean so far
		{"b", math.Log(4)},     // three between
		{"c", math.Log(2)},     // one between
		{"a", math.Log(4)},     // three between
		{"d", (2*math.Log(2) + 2*math.Log(4)) / 5}, // d's first: the mean of 5
	} {
		if got := c.Observe(e.user, "x", 0, false, 0, false); math.Abs(got[k]-e.want) > 1e-12 {
			t.Errorf("event %d (%s): user_gap_events %v, want %v", i, e.user, got[k], e.want)
		}
	}
	if !c.Reported(BaselineUserGapEvents) || c.Reported(BaselineUserGap) {
		t.Errorf("5 of 9 events counted, none timed: user_gap_events reported %v, user_gap %v", c.Reported(BaselineUserGapEvents), c.Reported(BaselineUserGap))
	}
}
