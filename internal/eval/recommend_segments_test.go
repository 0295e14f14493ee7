package eval

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"denoiser/online"
)

// TestTrainDenoiserSegments: each pass gives exactly min(segments, events)
// points, also when the events do not divide evenly (29 events in 10
// segments once gave 14 points a pass, drawn against the wrong passes).
func TestTrainDenoiserSegments(t *testing.T) {
	for _, tc := range []struct{ events, segments, want int }{{29, 10, 10}, {100, 10, 10}, {7, 10, 7}, {1, 3, 1}} {
		train := make([]Interaction, tc.events)
		for n := range train {
			train[n] = Interaction{User: int32(n % 5), Item: int32(n % 7)}
		}
		_, curve, err := trainDenoiser(Variant{Name: "t", Config: online.Config{Dim: 4}}, train, nil, false, 2, tc.segments, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(curve) != 2*tc.want {
			t.Errorf("%d events in %d segments, 2 passes: %d points, want %d", tc.events, tc.segments, len(curve), 2*tc.want)
		}
		for _, v := range curve {
			if v < 0 || v > 1 {
				t.Errorf("share %v outside [0, 1]", v)
			}
		}
	}
}

// TestTrainDenoiserTimes: a timed training stream reaches the denoiser as
// `denoiser replay --passes` gives a log, each event with its time and
// each pass's times starting over, so that the last pass's weights are a
// hand-stepped model's; the weights of the untimed stream (the deca
// split's) differ from them, so time reaches the weight.
func TestTrainDenoiserTimes(t *testing.T) {
	d := FromRatings(tinyRatings(300, 200, 60, 1)) // past the level's burn-in
	train := append([]Interaction(nil), d.Rows...)
	SortByTime(train)
	const passes, seed = 2, 3
	v := DefaultVariants()[0]
	weights := func(timed bool) []float64 {
		w := make([]float64, len(train))
		if _, _, err := trainDenoiser(v, train, nil, timed, passes, 10, seed, func(n int, sc *online.Score) { w[n] = sc.Weight }); err != nil {
			t.Fatal(err)
		}
		return w
	}
	byHand := func(timed bool) []float64 {
		m, err := online.New(v.Config, online.NewSource(seed))
		if err != nil {
			t.Fatal(err)
		}
		w := make([]float64, len(train))
		var sc online.Score
		for range passes {
			for n, x := range train {
				if err := m.Step(online.Event{User: UserID(x.User), Item: ItemID(x.Item), TimeMS: x.Seconds * 1000, HasTime: timed}, &sc); err != nil {
					t.Fatal(err)
				}
				w[n] = sc.Weight
			}
			m.ForgetTimes()
		}
		return w
	}
	timed, untimed := weights(true), weights(false)
	if want := byHand(true); !slices.Equal(timed, want) {
		t.Fatal("timed: the last pass's weights differ from a model stepped by hand with the times")
	}
	if want := byHand(false); !slices.Equal(untimed, want) {
		t.Fatal("untimed: the last pass's weights differ from a model stepped by hand without times")
	}
	if slices.Equal(timed, untimed) {
		t.Error("the weights with and without times are the same: the times do not reach the weight")
	}
}

// TestLoadEventLog: an event log becomes rows rated 5 (genuine) and 1
// (noise) in file order, ids dense in order of appearance, each row's
// event as replay reads it under the dense names; a blank line is
// skipped, a line without truth refused.
func TestLoadEventLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log.jsonl")
	lines := `{"user":"b","item":"x","ts":1700000000000,"event":"click","dwell_ms":1200,"truth":"noise"}
{"user":"a","item":"y","ts":1700000001000,"truth":"genuine"}
  
{"user":"b","item":"y","ts":1700000002000,"event":"purchase","dwell_ms":64000,"truth":"genuine"}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := LoadEventLog(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Interaction{{User: 0, Item: 0, Rating: 1, Clean: 1, Seconds: 0}, {User: 1, Item: 1, Rating: 5, Clean: 5, Seconds: 1}, {User: 0, Item: 1, Rating: 5, Clean: 5, Seconds: 2}}
	if d.Users != 2 || d.Items != 2 || !slices.Equal(d.Rows, want) {
		t.Fatalf("users %d, items %d, rows %+v; want 2, 2, %+v", d.Users, d.Items, d.Rows, want)
	}
	e := d.Events[2]
	if e.User != UserID(0) || e.Item != ItemID(1) || !e.HasDwell || e.DwellMS != 64000 || e.Kind != "purchase" || !e.HasTime || e.TimeMS != 1700000002000 {
		t.Errorf("event 3: %+v", e)
	}
	if d.Events[1].HasDwell || d.Events[1].Kind != "" {
		t.Errorf("event 2 has dwell or a type it was not given: %+v", d.Events[1])
	}
	if err := os.WriteFile(path, []byte(lines+`{"user":"c","item":"z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadEventLog(context.Background(), path); err == nil || !strings.Contains(err.Error(), ":5: no truth field") {
		t.Errorf("a line without truth: %v", err)
	}
}
