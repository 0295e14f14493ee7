package service

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"denoiser/online"
)

// TestBurstGauge: denoiser_burst_share is the share of the burst the
// model's summary names, and absent where it names none.
func TestBurstGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, noLag{})
	if err != nil {
		t.Fatal(err)
	}
	share := func() (float64, bool) {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "denoiser_burst_share" {
				return f.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	m.setSummary(online.Summary{})
	if v, ok := share(); ok {
		t.Fatalf("without a burst: denoiser_burst_share %v, want none", v)
	}
	m.setSummary(online.Summary{Burst: &online.BurstSummary{CentreSeconds: 1.6, Share: 0.19}})
	if v, ok := share(); !ok || v != 0.19 {
		t.Fatalf("with a burst of share 0.19: denoiser_burst_share %v (present %v)", v, ok)
	}
}
