package main

import (
	"bytes"
	"context"
	"denoiser/internal/cli"
	"denoiser/internal/cli/clitest"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDemo runs `denoiser-lab demo` on a small log (its own embedded broker)
// and checks that its report has the fields of replay's and sensible
// values.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	in := clitest.ReplayInput(t, dir)
	cfg := clitest.WriteFile(t, filepath.Join(dir, "c.yaml"), clitest.SmallConfig)
	var stderr bytes.Buffer
	demoReport := filepath.Join(dir, "demo.json")
	args := []string{"demo", "--in", in, "--config", cfg, "--report", demoReport, "--http", "127.0.0.1:0", "--partitions", "2"}
	if code := run(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, stderr.String())
	}
	for _, want := range []string{"embedded Kafka broker", "metrics at http://127.0.0.1:", fmt.Sprintf("demo: %d events scored, 2 invalid", clitest.ReplayLines), "ROC-AUC", "mean T̂"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stderr.String())
		}
	}
	replayReport := filepath.Join(dir, "replay.json")
	args = []string{"--in", in, "--out", filepath.Join(dir, "out.jsonl"), "--config", cfg, "--report", replayReport}
	if err := cli.Replay(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	var d, r map[string]any
	for p, m := range map[string]*map[string]any{demoReport: &d, replayReport: &r} {
		if err := json.Unmarshal([]byte(clitest.ReadFile(t, p)), m); err != nil {
			t.Fatal(err)
		}
	}
	if dk, rk := slices.Sorted(maps.Keys(d)), slices.Sorted(maps.Keys(r)); !slices.Equal(dk, rk) {
		t.Errorf("demo report keys %v, replay's %v", dk, rk)
	}
	if d["events"] != float64(clitest.ReplayLines) || d["invalid"] != 2.0 || d["blank"] != 1.0 || d["events_per_sec"].(float64) <= 0 {
		t.Errorf("demo report: events %v invalid %v blank %v events/s %v", d["events"], d["invalid"], d["blank"], d["events_per_sec"])
	}
	if d["recommended_score"] != "weight" {
		t.Errorf("recommended_score %v, want weight", d["recommended_score"])
	}
	for _, k := range []string{"weight", "p_clean", "loss_baseline", "dwell"} {
		auc := d["auc"].(map[string]any)[k]
		if v, ok := auc.(float64); !ok || v <= 0.5 || v >= 1 {
			t.Errorf("demo ROC-AUC of %s = %v, want in (0.5, 1)", k, auc)
		}
	}
}

// TestDemoSeed checks that --seed reaches the demo's models: the scores of
// the service's model and of the loss baseline beside it both change with it.
func TestDemoSeed(t *testing.T) {
	dir := t.TempDir()
	in := clitest.ReplayInput(t, dir)
	cfg := clitest.WriteFile(t, filepath.Join(dir, "c.yaml"), clitest.SmallConfig)
	summaries := map[string]map[string]any{}
	for _, seed := range []string{"3", "4"} {
		path := filepath.Join(dir, "demo"+seed+".json")
		args := []string{"demo", "--in", in, "--config", cfg, "--seed", seed, "--report", path, "--http", "off", "--partitions", "1"}
		var stderr bytes.Buffer
		if code := run(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
			t.Fatalf("demo --seed %s: exit %d:\n%s", seed, code, stderr.String())
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(clitest.ReadFile(t, path)), &rep); err != nil {
			t.Fatal(err)
		}
		summaries[seed] = rep
	}
	// One partition: the demo reads its scored records back in one order,
	// so only the seed can move the scores.
	for _, k := range []string{"p_clean", "loss_baseline"} {
		a := summaries["3"]["auc"].(map[string]any)[k]
		b := summaries["4"]["auc"].(map[string]any)[k]
		if a == nil || a == b {
			t.Errorf("ROC-AUC of %s is %v with --seed 3 and %v with --seed 4: the seed does not reach it", k, a, b)
		}
	}
}
