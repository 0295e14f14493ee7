package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunGenMatchesRecordedLog(t *testing.T) {
	// The shipped log is exactly what the documented command writes.
	dir := t.TempDir()
	out := filepath.Join(dir, "gen.jsonl")
	var stderr bytes.Buffer
	args := []string{"--out", out, "--events", "20000", "--noise", "0.2", "--seed", "1"}
	if err := runGen(context.Background(), args, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatalf("runGen: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../testdata/synthetic-20k.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("gen output (%d bytes) differs from testdata/synthetic-20k.jsonl (%d bytes)", len(got), len(want))
	}
	if !strings.Contains(stderr.String(), "noise 0.2000") {
		t.Errorf("summary %q does not report the noise share", stderr.String())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files in the output directory, want only the output (no temp files)", len(entries))
	}
}

func TestRunGenStdoutAndOverrides(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"--out", "-", "--events", "300", "--noise", "0.1", "--seed", "9",
		"--users", "7", "--items", "11", "--topics", "3", "--clickbait-items", "2", "--overlap", "0"}
	if err := runGen(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("runGen: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 300 {
		t.Fatalf("%d lines on stdout, want 300", len(lines))
	}
	if !strings.Contains(stderr.String(), "7 users, 11 items") {
		t.Errorf("summary %q", stderr.String())
	}
	for _, l := range lines {
		if strings.Contains(l, `"user":"u8"`) || strings.Contains(l, `"item":"i12"`) {
			t.Fatalf("id beyond --users 7 / --items 11: %s", l)
		}
	}
}

func TestRunGenProfileV2(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"--out", "-", "--events", "3000", "--seed", "4", "--profile", "v2", "--dwell-share", "0",
		"--mix", "bounce=1", "--bot-users", "0"}
	if err := runGen(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("runGen: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	if strings.Contains(out, "dwell_ms") {
		t.Error("--dwell-share 0 wrote dwell_ms")
	}
	if !strings.Contains(out, `"event":"view"`) {
		t.Error("v2 wrote no view events")
	}
	for _, want := range []string{"bounce ", "bot 0,", "misclick 0,", "dwell on 0.000"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("summary %q lacks %q", stderr.String(), want)
		}
	}
}

func TestRunGenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no out", []string{"--events", "10"}},
		{"bad noise", []string{"--out", filepath.Join(dir, "x"), "--noise", "1.5"}},
		{"zero events", []string{"--out", filepath.Join(dir, "x"), "--events", "0"}},
		{"unknown flag", []string{"--out", filepath.Join(dir, "x"), "--bogus"}},
		{"stray argument", []string{"--out", filepath.Join(dir, "x"), "extra"}},
		{"missing directory", []string{"--out", filepath.Join(dir, "no", "such", "x"), "--events", "10"}},
		{"unknown profile", []string{"--out", filepath.Join(dir, "x"), "--profile", "v3"}},
		{"bad dwell share", []string{"--out", filepath.Join(dir, "x"), "--dwell-share", "1.5"}},
		{"bad mix", []string{"--out", filepath.Join(dir, "x"), "--profile", "v2", "--mix", "spam=1"}},
		{"no noise kind", []string{"--out", filepath.Join(dir, "x"), "--profile", "v2", "--mix", "misclick=0,clickbait=0,curiosity=0,trending=0,bounce=0,purchase-return=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := runGen(context.Background(), tc.args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
				t.Fatal("runGen succeeded, want an error")
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed runs left %d files behind", len(entries))
	}
}

func TestRunGenCancelledLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "gen.jsonl")
	if err := os.WriteFile(out, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := runGen(ctx, []string{"--out", out, "--events", "1000"}, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// The old file is untouched and no temp file is left.
	if b, _ := os.ReadFile(out); string(b) != "old\n" {
		t.Errorf("output replaced by a failed run: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files left, want 1", len(entries))
	}
}

func TestRunConvert(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "u.data")
	if err := os.WriteFile(in, []byte("2\t5\t4\t20\n1\t7\t1\t10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ml.jsonl")
	var stderr bytes.Buffer
	if err := runConvert(context.Background(), []string{"movielens", "--in", in, "--out", out}, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatalf("runConvert: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"user":"1","item":"7","ts":10000,"event":"rating","rating":1}
{"user":"2","item":"5","ts":20000,"event":"rating","rating":4}
`
	if string(got) != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// TestRunConvertRatingsCSV converts a small ratings.csv of the MovieLens
// latest layout (header, half stars, unix seconds).
func TestRunConvertRatingsCSV(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "ratings.csv")
	csv := "userId,movieId,rating,timestamp\n1,31,2.5,1260759144\n1,1029,3.0,1260759179\n7,31,0.5,1260759100\n"
	if err := os.WriteFile(in, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ml.jsonl")
	var stderr bytes.Buffer
	if err := runConvert(context.Background(), []string{"movielens", "--in", in, "--out", out}, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatalf("runConvert: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"user":"7","item":"31","ts":1260759100000,"event":"rating","rating":0.5}
{"user":"1","item":"31","ts":1260759144000,"event":"rating","rating":2.5}
{"user":"1","item":"1029","ts":1260759179000,"event":"rating","rating":3}
`
	if string(got) != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(stderr.String(), "3 events, 2 users, 2 items; ratings 0.5:1 2.5:1 3:1") {
		t.Errorf("summary %q", stderr.String())
	}
}

func TestRunConvertErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.data")
	if err := os.WriteFile(bad, []byte("1\t2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	const ratings = "196\t242\t3\t881250949\n"
	good := filepath.Join(dir, "u.data")
	if err := os.WriteFile(good, []byte(ratings), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		is   error
	}{
		{"in is out", []string{"movielens", "--in", good, "--out", good}, nil},
		{"no format", nil, nil},
		{"unknown format", []string{"netflix", "--in", bad, "--out", out}, nil},
		{"help", []string{"--help"}, flag.ErrHelp},
		{"no in", []string{"movielens", "--out", out}, nil},
		{"missing input", []string{"movielens", "--in", filepath.Join(dir, "none"), "--out", out}, os.ErrNotExist},
		{"malformed input", []string{"movielens", "--in", bad, "--out", out}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runConvert(context.Background(), tc.args, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("err = %v, want an error (%v)", err, tc.is)
			}
		})
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed conversion created %s", out)
	}
	if b, err := os.ReadFile(good); err != nil || string(b) != ratings {
		t.Errorf("the input was changed: %q, %v", b, err)
	}
}
