package eval

import (
	"slices"
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
		_, curve, err := trainDenoiser(Variant{Name: "t", Config: online.Config{Dim: 4}}, train, false, 2, tc.segments, 1, nil)
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
		if _, _, err := trainDenoiser(v, train, timed, passes, 10, seed, func(n int, sc *online.Score) { w[n] = sc.Weight }); err != nil {
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
