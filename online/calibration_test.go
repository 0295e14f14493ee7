package online

import (
	"math"
	"strconv"
	"testing"

	"denoiser/internal/synth"
)

// TestWeightCalibratedEarly runs the model over the first quarter (50,000
// events) of a generated v2 stream of 200,000 (seed 5: not the seed weightTemper was chosen on),
// whose truth the generator knows, and checks the weight's calibration
// from the mixture's first fit on: the expected calibration error over 10
// equal-width bins, which the uncalibrated posterior exceeded there, most
// of it from too many noisy events in its top bin. The top bin is logged.
func TestWeightCalibratedEarly(t *testing.T) {
	if testing.Short() {
		t.Skip("50,000 events")
	}
	g, err := synth.New(synth.Config{Events: 200000, Noise: 0.2, Profile: synth.ProfileV2, DwellShare: 1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Mode: ModeBinary}, NewSource(5))
	if err != nil {
		t.Fatal(err)
	}
	const bins = 10
	var sum, genuine, count [bins]float64
	var sc Score
	for range 50000 {
		e, ok := g.Next()
		if !ok {
			break
		}
		fitted := m.mixture.gmm.fitted
		ev := Event{User: "u" + strconv.Itoa(e.User), Item: "i" + strconv.Itoa(e.Item), DwellMS: e.DwellMS, HasDwell: !e.NoDwell, Kind: e.Type.String()}
		if err := m.Step(ev, &sc); err != nil {
			t.Fatal(err)
		}
		if !fitted {
			continue
		}
		b := min(int(sc.Weight*bins), bins-1)
		sum[b] += sc.Weight
		count[b]++
		if !e.Cause.Noise() {
			genuine[b]++
		}
	}
	total, ece := 0.0, 0.0
	for b := range bins {
		total += count[b]
	}
	if total < 20000 {
		t.Fatalf("%v events after the mixture's first fit, want at least 20000", total)
	}
	for b := range bins {
		if count[b] > 0 {
			ece += math.Abs(sum[b]-genuine[b]) / total
		}
	}
	top := bins - 1
	t.Logf("ECE %.4f over %v events; top bin: %v events, mean weight %.3f, share genuine %.3f",
		ece, total, count[top], sum[top]/count[top], genuine[top]/count[top])
	if ece > 0.05 {
		t.Errorf("ECE of the weight %.4f, want at most 0.05", ece)
	}
}
