package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDemo runs `denoiser demo` on a small log (its own embedded broker)
// and checks that its report has the fields of replay's and sensible
// values.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	in := replayInput(t, dir)
	cfg := writeFile(t, filepath.Join(dir, "c.yaml"), smallConfig)
	var stderr bytes.Buffer
	demoReport := filepath.Join(dir, "demo.json")
	args := []string{"demo", "--in", in, "--config", cfg, "--report", demoReport, "--http", "127.0.0.1:0", "--partitions", "2"}
	if code := run(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, stderr.String())
	}
	for _, want := range []string{"embedded Kafka broker", "metrics at http://127.0.0.1:", fmt.Sprintf("demo: %d events scored, 2 invalid", replayLines), "ROC-AUC", "mean T̂"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stderr.String())
		}
	}
	replayReport := filepath.Join(dir, "replay.json")
	args = []string{"replay", "--in", in, "--out", filepath.Join(dir, "out.jsonl"), "--config", cfg, "--report", replayReport}
	if code := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatal("replay failed")
	}
	var d, r map[string]any
	for p, m := range map[string]*map[string]any{demoReport: &d, replayReport: &r} {
		if err := json.Unmarshal([]byte(readFile(t, p)), m); err != nil {
			t.Fatal(err)
		}
	}
	if dk, rk := slices.Sorted(maps.Keys(d)), slices.Sorted(maps.Keys(r)); !slices.Equal(dk, rk) {
		t.Errorf("demo report keys %v, replay's %v", dk, rk)
	}
	if d["events"] != float64(replayLines) || d["invalid"] != 2.0 || d["blank"] != 1.0 || d["events_per_sec"].(float64) <= 0 {
		t.Errorf("demo report: events %v invalid %v blank %v events/s %v", d["events"], d["invalid"], d["blank"], d["events_per_sec"])
	}
	for _, k := range []string{"p_clean", "loss_baseline"} {
		auc := d["auc"].(map[string]any)[k]
		if v, ok := auc.(float64); !ok || v <= 0.5 || v >= 1 {
			t.Errorf("demo ROC-AUC of %s = %v, want in (0.5, 1)", k, auc)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
