package eval

import (
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
		_, curve, err := trainDenoiser(Variant{Name: "t", Config: online.Config{Dim: 4}}, train, 2, tc.segments, 1, nil)
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
