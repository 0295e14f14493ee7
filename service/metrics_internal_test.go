package service

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"denoiser/online"
)

// TestBurstGauge: denoiser_burst_share is the share of the burst the
// model's summary names and the weight reads, and absent where it names
// none or one the classifier disputes.
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
	m.setSummary(online.Summary{Burst: &online.BurstSummary{CentreSeconds: 1.6, Share: 0.19, Disputed: true}})
	if v, ok := share(); ok {
		t.Fatalf("with a disputed burst (not read): denoiser_burst_share %v, want none", v)
	}
}

// TestWarnDisputed: a burst the classifier disputes is warned of once,
// with its centre and share; one it does not dispute, or none, not at all.
func TestWarnDisputed(t *testing.T) {
	var logs bytes.Buffer
	c := &checkpointer{log: slog.New(slog.NewTextHandler(&logs, nil))}
	c.warnDisputed(nil)
	c.warnDisputed(&online.BurstSummary{CentreSeconds: 1.6, Share: 0.19})
	if logs.Len() != 0 {
		t.Fatalf("without a disputed burst: %s", logs.String())
	}
	for range 3 {
		c.warnDisputed(&online.BurstSummary{CentreSeconds: 1.5, Share: 0.12, Disputed: true})
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "model.dwell_direction: learned") || !strings.Contains(logs.String(), "share=0.12") {
		t.Fatalf("three disputed ticks: %d warnings, want 1 naming the setting and the share:\n%s", n, logs.String())
	}
}
