package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"denoiser/internal/eval"
)

// tinyUData writes a small u.data-format file: 30 users × 20 ratings.
func tinyUData(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	ts := 880000000
	for u := 1; u <= 30; u++ {
		for k := 0; k < 20; k++ {
			item := 1 + (u*7+k*3)%45
			rating := 1 + (u+item)%5
			ts += 13
			fmt.Fprintf(&b, "%d\t%d\t%d\t%d\n", u, item, rating, ts)
		}
	}
	path := filepath.Join(t.TempDir(), "u.data")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tinyDecaSplit writes a small split in the DeCA format: 30 users × 20
// training ratings over 45 items, and per user one clean validation item
// that is also one of its two test items.
func tinyDecaSplit(t *testing.T) string {
	t.Helper()
	var train, valid, test strings.Builder
	for u := 1; u <= 30; u++ {
		for k := 0; k < 20; k++ {
			item := (u*7 + k*3) % 45
			fmt.Fprintf(&train, "%d\t%d\t%d\n", u, item, 1+(u+item)%5)
		}
		v, w := (u*7+20*3)%45, (u*7+21*3)%45
		fmt.Fprintf(&valid, "%d\t%d\t5\n", u, v)
		fmt.Fprintf(&test, "%d\t%d\t5\n%d\t%d\t5\n", u, v, u, w)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{eval.DecaTrainFile: train.String(), eval.DecaValidFile: valid.String(), eval.DecaTestFile: test.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestEvalCommands(t *testing.T) {
	data, deca := tinyUData(t), tinyDecaSplit(t)
	tests := []struct {
		name  string
		args  []string
		files []string
		key   string // top-level JSON key that must be a non-empty list
		data  string // --data; default the u.data file
	}{
		{"transition", []string{"transition", "--noise", "pairflip", "--noise", "symmetric", "--rates", "0.2", "--seeds", "1", "--passes", "1"},
			[]string{"transition.md", "transition.png"}, "cells", ""},
		{"transition rgbt only", []string{"transition", "--estimator", "rgbt", "--rates", "0.1", "--seeds", "1", "--passes", "1"},
			[]string{"transition.md"}, "cells", ""},
		{"recommend", []string{"recommend", "--seeds", "1", "--passes", "1", "--split", "chrono"},
			[]string{"recommend.md", "recommend.png", "rho.png"}, "rows", ""},
		{"recommend deca", []string{"recommend", "--seeds", "2", "--passes", "1", "--split", "deca", "--backbone", "gmf", "--backbone", "NeuMF"},
			[]string{"recommend.md", "recommend.png", "rho.png"}, "paired", deca},
		{"sensitivity", []string{"sensitivity", "--seeds", "1", "--passes", "2", "--lambdas", "0.5,1", "--rhos", "0.4,0.6,0.8"},
			[]string{"sensitivity.md", "sensitivity.png", "distilled.png"}, "points", ""},
		{"detect", []string{"detect", "--seeds", "1", "--synth-events", "2000", "--synth-noise", "0.2"},
			[]string{"detect.md", "detect.png", "detect_calibration.png"}, "cases", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rep := filepath.Join(dir, "r.json")
			var stdout, stderr bytes.Buffer
			args := append([]string{"eval"}, tc.args...)
			args = append(args, "--data", cmp.Or(tc.data, data), "--out", dir, "--report", rep)
			if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			for _, f := range tc.files {
				if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
					t.Errorf("%s: %v", f, err)
				}
			}
			md, _ := os.ReadFile(filepath.Join(dir, tc.files[0]))
			if !bytes.Contains(md, []byte("Produced by `denoiser-lab eval "+tc.args[0])) {
				t.Errorf("report does not name its command:\n%.300s", md)
			}
			var js map[string]json.RawMessage
			b, err := os.ReadFile(rep)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &js); err != nil {
				t.Fatal(err)
			}
			var list []json.RawMessage
			if err := json.Unmarshal(js[tc.key], &list); err != nil || len(list) == 0 {
				t.Errorf("JSON %q: %v, %d entries", tc.key, err, len(list))
			}
		})
	}
}

func TestEvalUsageErrors(t *testing.T) {
	data := tinyUData(t)
	for _, args := range [][]string{
		{"eval"},
		{"eval", "bogus"},
		{"eval", "transition", "--data", data, "--out", "", "--noise", "bogus"},
		{"eval", "transition", "--data", data, "--out", "", "--rates", "x"},
		{"eval", "transition", "--data", data, "--out", "", "--estimator", "nope"},
		{"eval", "recommend", "--data", data, "--out", "", "--split", "sideways"},
		{"eval", "sensitivity", "--data", data, "--out", "", "--lambdas", "0.5,2"},
		{"eval", "sensitivity", "--data", data, "--out", "", "--rhos", "0.4,0.6"},
		{"eval", "recommend", "--data", data, "--out", "", "--backbone", "lightgcn"},
		{"eval", "recommend", "--data", data, "--out", "", "--backbone", "gmf,gmf"},
		{"eval", "recommend", "--data", data, "--out", "", "--negatives", "-1"},
		{"eval", "detect", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"eval", "transition", "--data", filepath.Join(t.TempDir(), "missing"), "--out", ""}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "grouplens") {
		t.Errorf("missing data: exit %d, want 1 and where to get it:\n%s", code, stderr.String())
	}
	for _, args := range [][]string{
		{"eval", "recommend", "--split", "deca", "--out", ""},
		{"eval", "recommend", "--split", "deca", "--out", "", "--data", filepath.Join(t.TempDir(), "missing")},
	} {
		stderr.Reset()
		if code := run(context.Background(), args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "wangyu-ustc/DeCA") ||
			!strings.Contains(stderr.String(), eval.DecaTrainFile) {
			t.Errorf("%v: exit %d, want non-zero, the file and where to get it:\n%s", args, code, stderr.String())
		}
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"eval", "recommend", "--out", ""}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "grouplens") {
		t.Errorf("no --data: exit %d, want 2 and where to get it:\n%s", code, stderr.String())
	}
}

// TestEvalRecommendLog: eval recommend --in runs RQ1 on an event log with
// its truth (gen's output), says so in its report, and refuses --in with
// --data or the deca split.
func TestEvalRecommendLog(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "s.jsonl")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"gen", "--events", "3000", "--users", "60", "--items", "40", "--seed", "3", "--out", log}, &stdout, &stderr); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, stderr.String())
	}
	out, rep := filepath.Join(dir, "out"), filepath.Join(dir, "r.json")
	args := []string{"eval", "recommend", "--in", log, "--seeds", "2", "--passes", "1", "--backbone", "gmf", "--ablations=false", "--oracle", "--out", out, "--report", rep}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(out, "recommend.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"an event log with a truth field", "genuine test events", "| weighted by | all | genuine | noise |",
		"The weighted rows weigh by `weight`", "| " + eval.OracleWeightedLog + " |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, not := range []string{"MovieLens", "rating ≤ 2", "NeuMF"} {
		if bytes.Contains(md, []byte(not)) {
			t.Errorf("the report of an event log (GMF only) says %q", not)
		}
	}
	var res eval.RecommendResult
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Log || res.Meta.Data != log || len(res.Rows) == 0 || res.Train != 2400 {
		t.Errorf("report: log %v, data %q, %d rows, train %d; want true, %q, rows, 2400", res.Log, res.Meta.Data, len(res.Rows), res.Train, log)
	}
	for _, extra := range [][]string{{"--data", tinyUData(t)}, {"--split", "deca"}} {
		stderr.Reset()
		args := append([]string{"eval", "recommend", "--in", log, "--out", ""}, extra...)
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", extra, code, stderr.String())
		}
	}
}
