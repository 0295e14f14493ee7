package report

import (
	"context"
	"math"
	"slices"
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
		got := c.Observe(e.user, e.item, e.dwell, e.hasDwell)
		for k := range got {
			if math.Abs(got[k]-e.want[k]) > 1e-12 {
				t.Errorf("event %d: %s = %v, want %v", i, countBaselines[k], got[k], e.want[k])
			}
		}
	}
	if s := c.DwellShare(); s != 0.5 {
		t.Errorf("dwell share %v, want 0.5", s)
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
