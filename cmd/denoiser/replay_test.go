package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"denoiser/consumer"
	command "denoiser/internal/cli"
	"denoiser/internal/cli/clitest"
	"denoiser/online"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestReplay(t *testing.T) {
	dir := t.TempDir()
	in := clitest.ReplayInput(t, dir)
	cfg := clitest.WriteFile(t, filepath.Join(dir, "replay.yaml"), clitest.SmallConfig)

	replay := func(name string) (out, dead, rep []byte, stderr string) {
		t.Helper()
		var errBuf bytes.Buffer
		args := []string{"replay", "--in", in, "--out", filepath.Join(dir, name+".jsonl"),
			"--report", filepath.Join(dir, name+".report.json"), "--config", cfg, "--truth", "dwell:10000"}
		if code := run(context.Background(), args, &bytes.Buffer{}, &errBuf); code != 0 {
			t.Fatalf("replay exit %d:\n%s", code, errBuf.String())
		}
		read := func(p string) []byte {
			b, err := os.ReadFile(filepath.Join(dir, p))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		return read(name + ".jsonl"), read(name + ".dead-letter.jsonl"), read(name + ".report.json"), errBuf.String()
	}
	out1, dead1, rep1, stderr := replay("a")
	out2, dead2, _, _ := replay("b")
	if !bytes.Equal(out1, out2) || !bytes.Equal(dead1, dead2) {
		t.Fatal("two replays of the same input differ")
	}
	if n := bytes.Count(out1, []byte("\n")); n != clitest.ReplayLines {
		t.Fatalf("%d scored lines, want %d", n, clitest.ReplayLines)
	}
	if n := bytes.Count(dead1, []byte("\n")); n != 2 {
		t.Fatalf("%d dead-letter lines, want 2", n)
	}
	if !strings.Contains(string(dead1), `"reason":"not_json"`) || !strings.Contains(string(dead1), fmt.Sprintf(`"line":%d`, clitest.ReplayLines+2)) {
		t.Fatalf("dead letters:\n%s", dead1)
	}
	var rep struct {
		Events, Invalid, Blank uint64
		Truth                  string
		AUC                    map[string]*float64 `json:"auc"`
		PRAUC                  map[string]*float64 `json:"pr_auc"`
		MeanTransition         [][]float64         `json:"mean_transition"`
		GMM                    struct{ Fitted bool }
	}
	if err := json.Unmarshal(rep1, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Events != clitest.ReplayLines || rep.Invalid != 2 || rep.Blank != 1 || rep.Truth != "dwell:10000" || !rep.GMM.Fitted || len(rep.MeanTransition) != 2 {
		t.Fatalf("report: %s", rep1)
	}
	for _, k := range []string{"p_clean", "reliability", "loss_baseline"} {
		for _, m := range []map[string]*float64{rep.AUC, rep.PRAUC} {
			if v := m[k]; v == nil || *v <= 0 || *v >= 1 {
				t.Fatalf("metric %s = %v in %s", k, v, rep1)
			}
		}
	}
	for _, want := range []string{fmt.Sprintf("%d events scored, 2 invalid", clitest.ReplayLines), "loss_baseline", "ROC-AUC"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "\r") {
		t.Error("progress bar drawn on a non-terminal")
	}
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	in := clitest.WriteFile(t, filepath.Join(dir, "in.jsonl"), `{"user":"u","item":"i"}`+"\n")
	out := filepath.Join(dir, "out.jsonl")
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no args", []string{"replay"}, 2, "--in and --out are required"},
		{"extra args", []string{"replay", "--in", in, "--out", out, "x"}, 2, "unexpected arguments"},
		{"bad truth", []string{"replay", "--in", in, "--out", out, "--truth", "dwell"}, 2, "replay: --truth: parse truth \"dwell\": want dwell:MS"},
		{"missing input", []string{"replay", "--in", filepath.Join(dir, "nope"), "--out", out}, 1, "no such file"},
		{"missing config file", []string{"replay", "--in", in, "--out", out, "--config", filepath.Join(dir, "nope.yaml")}, 2, "no such file"},
		{"unknown config key", []string{"replay", "--in", in, "--out", out, "--config",
			clitest.WriteFile(t, filepath.Join(dir, "typo.yaml"), "model:\n  dimm: 8\n")}, 2, "dimm"},
		{"invalid model config", []string{"replay", "--in", in, "--out", out, "--config",
			clitest.WriteFile(t, filepath.Join(dir, "bad.yaml"), "model:\n  mode: ternary\n")}, 2, "ternary"},
		{"set without value", []string{"replay", "--in", in, "--out", out, "--set", "model.dim"}, 2, `--set "model.dim": want PATH=VALUE`},
		{"set of a section", []string{"replay", "--in", in, "--out", out, "--set", "model={dim: 8}"}, 2,
			"--set model={dim: 8}: model is a section, not a setting: give one --set per setting, --set model.dim=8"},
		{"shared with passes", []string{"replay", "--in", in, "--out", out, "--shared", in, "--passes", "2"}, 2, "--shared reproduces one live pass"},
		{"first offset without shared", []string{"replay", "--in", in, "--out", out, "--first-offset", "5"}, 2, "give --shared too"},
		{"shared without partition", []string{"replay", "--in", in, "--out", out, "--shared", in}, 2, "say which with --partition N"},
		{"shared file of no shared topic", []string{"replay", "--in", in, "--out", out, "--shared", in, "--partition", "0"}, 1, "--shared " + in},
		{"shared-log without out", []string{"shared-log"}, 2, "--out is required"},
		{"help", []string{"replay", "-h"}, 0, "usage: denoiser replay"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"no command", nil, 2, "usage: denoiser <command>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), tt.args, &bytes.Buffer{}, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.msg) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr.String(), tt.code, tt.msg)
			}
		})
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed replay left %s: %v", out, err)
	}
}

func TestReplayCancelledLeavesNoOutput(t *testing.T) {
	dir := t.TempDir()
	in := clitest.ReplayInput(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr bytes.Buffer
	out := filepath.Join(dir, "out.jsonl")
	if code := run(ctx, []string{"replay", "--in", in, "--out", out}, &bytes.Buffer{}, &stderr); code != 1 || !strings.Contains(stderr.String(), "canceled") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("cancelled replay left %d files", len(entries))
	}
}

func TestHelp(t *testing.T) {
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &stdout, &bytes.Buffer{}); code != 0 || !strings.Contains(stdout.String(), "replay") {
		t.Fatalf("help: exit %d, %q", code, stdout.String())
	}
}

// TestReplayStdio: "-" reads standard input and writes standard output, and
// an input named again as an output is refused before anything is written.
func TestReplayStdio(t *testing.T) {
	dir := t.TempDir()
	in := clitest.ReplayInput(t, dir)
	orig := clitest.ReadFile(t, in)
	cfg := clitest.WriteFile(t, filepath.Join(dir, "c.yaml"), clitest.SmallConfig)
	dead := filepath.Join(dir, "dead.jsonl")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"in is out", []string{"--in", in, "--out", in}, "same file"},
		{"in is dead letter", []string{"--in", in, "--out", filepath.Join(dir, "o.jsonl"), "--dead-letter", in}, "same file"},
		{"in is report, through a link", []string{"--in", in, "--out", filepath.Join(dir, "o.jsonl"), "--report", symlink(t, in, filepath.Join(dir, "l.json"))}, "same file"},
		{"stdout without dead letter", []string{"--in", in, "--out", "-"}, "--dead-letter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), append([]string{"replay", "--config", cfg}, tc.args...), &bytes.Buffer{}, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tc.want)
			}
			if clitest.ReadFile(t, in) != orig {
				t.Fatal("the input was changed")
			}
		})
	}

	// A file that is not a regular one may be named twice.
	if code := run(context.Background(), []string{"replay", "--config", cfg, "--in", in, "--out", os.DevNull, "--dead-letter", os.DevNull}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Errorf("--out and --dead-letter %s: exit %d", os.DevNull, code)
	}

	// The whole pipeline through standard input and output, in a child
	// process so that its standard streams are real files.
	cmd := exec.Command(os.Args[0], "replay", "--in", "-", "--out", "-", "--dead-letter", dead, "--config", cfg)
	cmd.Env = append(os.Environ(), envAsDenoiser+"=1")
	stdin, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("replay - -: %v\n%s", err, stderr.String())
	}
	if n := bytes.Count(stdout.Bytes(), []byte("\n")); n != clitest.ReplayLines {
		t.Errorf("standard output has %d lines, want %d", n, clitest.ReplayLines)
	}
	if !strings.Contains(clitest.ReadFile(t, dead), `"file":"stdin"`) {
		t.Errorf("dead letters do not name stdin: %s", clitest.ReadFile(t, dead))
	}
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// TestReplayReadsRunConfig: one YAML serves run and replay. Replay takes
// its seed, model and fields sections, notes the sections it ignores, and takes
// DENOISER_* variables and --set like run; an unknown key is an error.
func TestReplayReadsRunConfig(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	lines := strings.SplitAfter(clitest.ReadFile(t, "../../testdata/synthetic-20k.jsonl"), "\n")[:500]
	clitest.WriteFile(t, in, strings.Join(lines, ""))
	cfg := clitest.WriteFile(t, filepath.Join(dir, "run.yaml"), `kafka:
  brokers: [kafka:9092]
  input_topic: clicks
checkpoint:
  dir: /var/lib/denoiser
seed: 3
model:
  dim: 8
`)
	// Outputs are byte-identical exactly when the model configurations are.
	replay := func(args ...string) (code int, out, stderr string) {
		t.Helper()
		o := filepath.Join(dir, "o.jsonl")
		os.Remove(o)
		var errb bytes.Buffer
		args = append([]string{"replay", "--in", in, "--out", o, "--config", cfg}, args...)
		if code = run(context.Background(), args, &bytes.Buffer{}, &errb); code == 0 {
			out = clitest.ReadFile(t, o)
		}
		return code, out, errb.String()
	}

	code, fromFile, stderr := replay()
	if code != 0 || !strings.Contains(stderr, "note: replay reads only seed, model and fields; kafka, checkpoint are for denoiser run") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	t.Setenv("DENOISER_MODEL_DIM", "12")
	if _, fromEnv, _ := replay(); fromEnv == fromFile {
		t.Error("DENOISER_MODEL_DIM=12 gives the output of the file's dim 8")
	}
	if _, fromSet, _ := replay("--set", "model.dim=8"); fromSet != fromFile {
		t.Error("--set model.dim=8 over DENOISER_MODEL_DIM=12 differs from the file's dim 8")
	}
	clitest.WriteFile(t, cfg, "model:\n  dimm: 8\n")
	if code, _, stderr = replay(); code == 0 || !strings.Contains(stderr, "dimm") {
		t.Errorf("unknown key: exit %d, stderr %q", code, stderr)
	}
}

// TestReplayWhollyInvalidInput: an input of which nothing can be scored
// ends with a non-zero exit that says what the input looks like; a gzip
// file is read as its text.
func TestReplayWhollyInvalidInput(t *testing.T) {
	dir := t.TempDir()
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	lines := strings.SplitAfter(clitest.ReadFile(t, "../../testdata/synthetic-20k.jsonl"), "\n")[:50]
	w.Write([]byte(strings.Join(lines, "")))
	w.Close()
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(i*7919 + i/13)
	}
	for _, tc := range []struct {
		name, content string
		code          int
		say           string
	}{
		{"gzip of JSON lines", gz.String(), 0, "50 events scored"},
		{"CSV", "user,item,ts\nu1,i1,1700000000000\n", 1, "looks like CSV"},
		{"tab-separated (MovieLens' u.data)", "196\t242\t3\t881250949\n", 1, "denoiser-lab convert movielens"},
		{"random bytes", string(random), 1, "binary data"},
		{"JSON array", `[{"user":"u","item":"i"},{"user":"v","item":"j"}]`, 1, "JSON array"},
		{"pretty-printed JSON", "{\n  \"user\": \"u\",\n  \"item\": \"i\"\n}\n", 1, "pretty-printed"},
		{"byte-order mark, skipped", "\xef\xbb\xbf{\"user\":\"u\",\"item\":\"i\"}\n", 0, "1 event scored, 0 invalid"},
		{"empty", "", 1, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := clitest.WriteFile(t, filepath.Join(dir, "in"), tc.content)
			var stderr bytes.Buffer
			code := run(context.Background(), []string{"replay", "--in", in, "--out", filepath.Join(dir, "o.jsonl")}, &bytes.Buffer{}, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.say) {
				t.Errorf("exit %d, want %d; stderr does not say %q:\n%s", code, tc.code, tc.say, stderr.String())
			}
		})
	}
}

// TestReplayLongLineRawBytes: the dead letter of a line over the limit
// gives the line's real length, in raw_bytes and in its error (which
// named the length of the start that was kept, 1 MiB + 1).
func TestReplayLongLineRawBytes(t *testing.T) {
	dir := t.TempDir()
	long := `{"user":"` + strings.Repeat("x", 3<<20) + `"}`
	in := clitest.WriteFile(t, filepath.Join(dir, "in.jsonl"), long+"\n"+`{"user":"u","item":"i"}`+"\n")
	dead := filepath.Join(dir, "dead.jsonl")
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", filepath.Join(dir, "o.jsonl"), "--dead-letter", dead}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rec struct {
		Reason    string `json:"reason"`
		Error     string `json:"error"`
		RawBytes  int    `json:"raw_bytes"`
		Truncated bool   `json:"raw_truncated"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(clitest.ReadFile(t, dead))), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Reason != "too_large" || !rec.Truncated || rec.RawBytes != len(long) {
		t.Errorf("dead letter %+v, want too_large, truncated, raw_bytes %d", rec, len(long))
	}
	if want := fmt.Sprintf("record of %d bytes is over the limit", len(long)); !strings.Contains(rec.Error, want) {
		t.Errorf("dead letter's error %q, want it to say %q", rec.Error, want)
	}
}

// TestReplayCSV: CSV with a header is an input format; other columns are
// carried through, a bad row is dead-lettered, and a .csv name is enough.
func TestReplayCSV(t *testing.T) {
	dir := t.TempDir()
	in := clitest.WriteFile(t, filepath.Join(dir, "clicks.csv"), "user,item,ts,dwell_ms,truth,session_id\n"+
		"u1,i1,1700000000000,5000,genuine,s1\n"+
		"u2,\"i,2\",1700000001000,,noise,s2\n"+
		"u3,i3\n"+
		"u4,i4,1700000002000,12,genuine,\"s \"\"4\"\"\"\n")
	out, dead := filepath.Join(dir, "o.jsonl"), filepath.Join(dir, "d.jsonl")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", out, "--dead-letter", dead}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	scored := strings.Split(strings.TrimSpace(clitest.ReadFile(t, out)), "\n")
	if len(scored) != 3 {
		t.Fatalf("%d scored, want 3:\n%s", len(scored), clitest.ReadFile(t, out))
	}
	for i, want := range []string{
		`{"user":"u1","item":"i1","ts":1700000000000,"dwell_ms":5000,"truth":"genuine","session_id":"s1",`,
		`{"user":"u2","item":"i,2","ts":1700000001000,"truth":"noise","session_id":"s2",`,
		`{"user":"u4","item":"i4","ts":1700000002000,"dwell_ms":12,"truth":"genuine","session_id":"s \"4\"",`,
	} {
		if !strings.HasPrefix(scored[i], want) {
			t.Errorf("record %d: %s\nwant it to start %s", i, scored[i], want)
		}
	}
	if d := clitest.ReadFile(t, dead); !strings.Contains(d, `"line":4`) || !strings.Contains(d, "2 cells, the header has 6") {
		t.Errorf("dead letters: %s", d)
	}
}

// TestReplayUnrankedTypes: a Taobao-style stream's types (pv, fav, cart,
// buy, in any case) rank by the default order's synonyms; a type the order
// lacks is named in the summary and the report.
func TestReplayUnrankedTypes(t *testing.T) {
	dir := t.TempDir()
	var lines strings.Builder
	for k := range 40 {
		kind := []string{"pv", "PV", "fav", "cart", "buy", "share", "pv", "Like"}[k%8]
		fmt.Fprintf(&lines, `{"user":"u%d","item":"i%d","ts":%d,"event":%q}`+"\n", k%5, k%7, 1700000000000+int64(k)*1000, kind)
	}
	in := clitest.WriteFile(t, filepath.Join(dir, "taobao.jsonl"), lines.String())
	rep := filepath.Join(dir, "r.json")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", os.DevNull, "--report", rep}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if want := "event types without a rank in model.event_order: share, Like ("; !strings.Contains(stderr.String(), want) {
		t.Errorf("summary:\n%s\nwant a line with %q", stderr.String(), want)
	}
	var r struct {
		Model struct {
			UnrankedTypes []string `json:"unranked_types"`
		} `json:"model"`
	}
	if err := json.Unmarshal([]byte(clitest.ReadFile(t, rep)), &r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Model.UnrankedTypes, []string{"share", "Like"}) {
		t.Errorf("report's unranked_types %q, want [share Like]", r.Model.UnrankedTypes)
	}
}

// TestReplayHalfStarRatings: in rating mode, half-star ratings (MovieLens
// latest) are scored, not dead-lettered, and written back as they came; a
// missing rating and one that rounds outside 1..classes are refused.
func TestReplayHalfStarRatings(t *testing.T) {
	dir := t.TempDir()
	in := clitest.WriteFile(t, filepath.Join(dir, "ratings.jsonl"), `{"user":"u1","item":"i1","rating":0.5}
{"user":"u1","item":"i2","rating":3.5}
{"user":"u2","item":"i1","rating":5.0}
{"user":"u2","item":"i2","rating":4}
{"user":"u3","item":"i1"}
{"user":"u3","item":"i2","rating":6}
`)
	cfg := clitest.WriteFile(t, filepath.Join(dir, "c.yaml"), clitest.SmallConfig)
	out, dead, rep := filepath.Join(dir, "o.jsonl"), filepath.Join(dir, "d.jsonl"), filepath.Join(dir, "r.json")
	var stderr bytes.Buffer
	args := []string{"replay", "--in", in, "--out", out, "--dead-letter", dead, "--report", rep, "--config", cfg,
		"--set", "model.mode=rating", "--truth", "rating:2.5"}
	if code := run(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	scored := strings.Split(strings.TrimSpace(clitest.ReadFile(t, out)), "\n")
	if len(scored) != 4 {
		t.Fatalf("%d scored, want 4:\n%s\ndead letters:\n%s", len(scored), clitest.ReadFile(t, out), clitest.ReadFile(t, dead))
	}
	for i, want := range []string{
		`{"user":"u1","item":"i1","rating":0.5,`,
		`{"user":"u1","item":"i2","rating":3.5,`,
		`{"user":"u2","item":"i1","rating":5,`,
		`{"user":"u2","item":"i2","rating":4,`,
	} {
		if !strings.HasPrefix(scored[i], want) {
			t.Errorf("record %d: %s\nwant it to start %s", i, scored[i], want)
		}
	}
	for i, label := range []string{`"label":0,`, `"label":3,`, `"label":4,`, `"label":3,`} {
		if !strings.Contains(scored[i], label) {
			t.Errorf("record %d: %s\nwant %s", i, scored[i], label)
		}
	}
	d := clitest.ReadFile(t, dead)
	if !strings.Contains(d, "rating mode needs a rating that rounds (half up) to 1..5: none given, or 0") || !strings.Contains(d, "rating 6 outside 1..5") || strings.Count(d, "\n") != 2 {
		t.Errorf("dead letters:\n%s", d)
	}
}

// TestReplayPasses: --passes 2 learns from the log once, then scores it:
// the output holds the same records in the same order (only the scores and
// model_version differ), dead letters are written once, and p_clean ranks
// the noise better than after one pass (on the shipped log with the small
// configuration: ROC-AUC 0.792 with one pass, 0.868 with two). Standard
// input cannot be read twice and is refused.
func TestReplayPasses(t *testing.T) {
	dir := t.TempDir()
	in := clitest.ReplayInput(t, dir)
	cfg := clitest.WriteFile(t, filepath.Join(dir, "c.yaml"), clitest.SmallConfig)
	type record map[string]json.RawMessage
	replay := func(passes string) (recs []record, dead string, pClean float64, stderr string) {
		t.Helper()
		out, rep := filepath.Join(dir, "p"+passes+".jsonl"), filepath.Join(dir, "p"+passes+".report.json")
		var errBuf bytes.Buffer
		args := []string{"replay", "--in", in, "--out", out, "--report", rep, "--config", cfg, "--passes", passes}
		if code := run(context.Background(), args, &bytes.Buffer{}, &errBuf); code != 0 {
			t.Fatalf("--passes %s: exit %d:\n%s", passes, code, errBuf.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(clitest.ReadFile(t, out)), "\n") {
			var r record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("--passes %s: output line %q: %v", passes, line, err)
			}
			recs = append(recs, r)
		}
		var report struct {
			Passes int
			Events uint64
			AUC    struct {
				PClean *float64 `json:"p_clean"`
			} `json:"auc"`
		}
		if err := json.Unmarshal([]byte(clitest.ReadFile(t, rep)), &report); err != nil {
			t.Fatal(err)
		}
		if report.Passes != int(passes[0]-'0') || report.Events != clitest.ReplayLines || report.AUC.PClean == nil {
			t.Fatalf("--passes %s: report has passes %d, events %d, p_clean ROC-AUC %v", passes, report.Passes, report.Events, report.AUC.PClean)
		}
		return recs, clitest.ReadFile(t, filepath.Join(dir, "p"+passes+".dead-letter.jsonl")), *report.AUC.PClean, errBuf.String()
	}
	one, dead1, auc1, _ := replay("1")
	two, dead2, auc2, stderr := replay("2")
	if len(one) != clitest.ReplayLines || len(two) != len(one) {
		t.Fatalf("%d and %d scored records, want %d", len(one), len(two), clitest.ReplayLines)
	}
	scores := []string{"weight", "reliability", "p_clean", "clean_posterior", "label", "distilled", "model_version"}
	for i := range one {
		for k, v := range one[i] {
			if !slices.Contains(scores, k) && !bytes.Equal(v, two[i][k]) {
				t.Fatalf("record %d: %s is %s after one pass, %s after two", i, k, v, two[i][k])
			}
		}
		if len(two[i]) != len(one[i]) {
			t.Fatalf("record %d has fields %v after two passes, %v after one", i, slices.Sorted(maps.Keys(two[i])), slices.Sorted(maps.Keys(one[i])))
		}
	}
	if string(two[0]["model_version"]) != fmt.Sprint(clitest.ReplayLines) {
		t.Errorf("first record of pass 2 has model_version %s, want %d (the events of pass 1)", two[0]["model_version"], clitest.ReplayLines)
	}
	if dead2 != dead1 || strings.Count(dead2, "\n") != 2 {
		t.Errorf("dead letters after two passes:\n%s\nwant the 2 of one pass:\n%s", dead2, dead1)
	}
	if auc2 <= auc1 {
		t.Errorf("ROC-AUC of p_clean %.4f after two passes, %.4f after one: want higher", auc2, auc1)
	}
	for _, want := range []string{"pass 1/2 learned from 20000 events", "scored in pass 2 of 2"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	// A named pipe is refused before it is opened (opening it would wait
	// for a writer).
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"stdin", []string{"--in", "-", "--out", filepath.Join(dir, "o.jsonl"), "--passes", "2"}, "cannot be re-read"},
		{"not a regular file", []string{"--in", dir, "--out", filepath.Join(dir, "o.jsonl"), "--passes", "2"}, "not a regular file"},
		{"a named pipe", []string{"--in", fifo, "--out", filepath.Join(dir, "o.jsonl"), "--passes", "2"}, "not a regular file"},
		{"zero", []string{"--in", in, "--out", filepath.Join(dir, "o.jsonl"), "--passes", "0"}, "at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(context.Background(), append([]string{"replay"}, tc.args...), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "o.jsonl")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused replay left its output: %v", err)
			}
		})
	}
}

// TestReplayPassesRestartTimes: each pass of --passes reads the users'
// gaps afresh. The weights of the scored pass equal those of a model
// stepped over the log twice with its users' times forgotten in between
// (online.Model.ForgetTimes); without that, every event of the second pass
// would read its user's previous event as one that came later (the last
// of the first pass), its gap as out of order, and the shipped log's
// weights would differ.
func TestReplayPassesRestartTimes(t *testing.T) {
	dir := t.TempDir()
	in := clitest.ReplayInput(t, dir)
	cfgPath := clitest.WriteFile(t, filepath.Join(dir, "c.yaml"), clitest.SmallConfig)
	out := filepath.Join(dir, "p2.jsonl")
	var errBuf bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", out, "--config", cfgPath, "--passes", "2"}, &bytes.Buffer{}, &errBuf); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errBuf.String())
	}
	var got []float64
	for _, line := range strings.Split(strings.TrimSpace(clitest.ReadFile(t, out)), "\n") {
		var r struct{ Weight float64 }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		got = append(got, r.Weight)
	}

	cfg, err := command.LoadReplayConfig(cfgPath, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var events []online.Event
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(clitest.ReadFile(t, in))), []byte("\n")) {
		var ev consumer.Event
		if consumer.Decode(line, &ev) == nil {
			events = append(events, ev.Model())
		}
	}
	// weights steps a model as replay builds it over the events twice and
	// returns the second pass's weights; forget forgets the times between.
	weights := func(forget bool) []float64 {
		m, err := online.New(cfg.Model, online.NewPartitionSource(cfg.Seed, 0))
		if err != nil {
			t.Fatal(err)
		}
		w := make([]float64, len(events))
		var sc online.Score
		for range 2 {
			for i, ev := range events {
				if err := m.Step(ev, &sc); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				w[i] = sc.Weight
			}
			if forget {
				m.ForgetTimes()
			}
		}
		return w
	}
	want, kept := weights(true), weights(false)
	if len(got) != len(want) {
		t.Fatalf("%d scored records, want %d", len(got), len(want))
	}
	// The output writes a score to 9 decimals (producer.appendProbability).
	const written = 0.5e-9 + 1e-15
	differ := 0
	for i := range want {
		if math.Abs(got[i]-want[i]) > written {
			t.Fatalf("record %d: weight %v, want %v (a model stepped twice, its times forgotten in between)", i, got[i], want[i])
		}
		if math.Abs(want[i]-kept[i]) > 2*written {
			differ++
		}
	}
	if differ < len(want)/2 {
		t.Errorf("only %d of %d weights depend on forgetting the times: the log does not test it", differ, len(want))
	}
}

// TestReplayTruthNoneStepsNoBaseline: with --truth none the replay steps
// no plain model beside the main one (it serves the loss_baseline only),
// so the report names no baseline model, and the scored output is the
// same bytes as with the truth evaluated.
func TestReplayTruthNoneStepsNoBaseline(t *testing.T) {
	dir := t.TempDir()
	in := clitest.ReplayInput(t, dir)
	cfg := clitest.WriteFile(t, filepath.Join(dir, "c.yaml"), clitest.SmallConfig)
	replay := func(truth string) (out string, rep map[string]json.RawMessage) {
		t.Helper()
		o, r := filepath.Join(dir, truth+".jsonl"), filepath.Join(dir, truth+".report.json")
		var errBuf bytes.Buffer
		args := []string{"replay", "--in", in, "--out", o, "--report", r, "--config", cfg, "--truth", truth}
		if code := run(context.Background(), args, &bytes.Buffer{}, &errBuf); code != 0 {
			t.Fatalf("--truth %s: exit %d:\n%s", truth, code, errBuf.String())
		}
		if err := json.Unmarshal([]byte(clitest.ReadFile(t, r)), &rep); err != nil {
			t.Fatal(err)
		}
		return clitest.ReadFile(t, o), rep
	}
	outField, repField := replay("field")
	outNone, repNone := replay("none")
	if outNone != outField {
		t.Fatal("the scored output with --truth none differs from that with --truth field")
	}
	if _, ok := repField["baseline"]; !ok {
		t.Fatalf("--truth field: the report names no baseline model: %v", slices.Sorted(maps.Keys(repField)))
	}
	if b, ok := repNone["baseline"]; ok {
		t.Fatalf("--truth none: the report has a baseline model %s: a plain model was stepped", b)
	}
}

// TestReplayReportPathFailsFirst: a --report that cannot be written stops
// the replay before it runs, and leaves no output behind.
func TestReplayReportPathFailsFirst(t *testing.T) {
	dir := t.TempDir()
	in := clitest.ReplayInput(t, dir)
	out := filepath.Join(dir, "o.jsonl")
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"replay", "--in", in, "--out", out, "--report", filepath.Join(dir, "none", "r.json")}, &bytes.Buffer{}, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "report") || strings.Contains(stderr.String(), "scored") {
		t.Errorf("exit %d, stderr %q; want a failure about the report before any scoring", code, stderr.String())
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Errorf("left %v in the directory (%v), want only the input", entries, err)
	}
}

// TestReplayCutGzip: a gzip log cut short (a copy that stopped) is scored
// as far as it can be read: the outputs and the report are kept, the line
// it cut is dead-lettered, the report says where the input ended, and the
// exit code is 1, with --passes too.
func TestReplayCutGzip(t *testing.T) {
	dir := t.TempDir()
	lines := strings.SplitAfter(clitest.ReadFile(t, "../../testdata/synthetic-20k.jsonl"), "\n")[:3000]
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(strings.Join(lines, "")))
	w.Close()
	in := clitest.WriteFile(t, filepath.Join(dir, "in.jsonl.gz"), gz.String()[:gz.Len()*3/4])
	for _, passes := range []string{"1", "2"} {
		t.Run("passes "+passes, func(t *testing.T) {
			out, dead, rep := filepath.Join(dir, "o"+passes+".jsonl"), filepath.Join(dir, "d"+passes+".jsonl"), filepath.Join(dir, "r"+passes+".json")
			var stderr bytes.Buffer
			code := run(context.Background(), []string{"replay", "--in", in, "--out", out, "--dead-letter", dead, "--report", rep, "--passes", passes}, &bytes.Buffer{}, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), "unexpected EOF") || !strings.Contains(stderr.String(), "the input ends early") {
				t.Fatalf("exit %d, want 1 naming the cut:\n%s", code, stderr.String())
			}
			scored := strings.Split(strings.TrimSpace(clitest.ReadFile(t, out)), "\n")
			if len(scored) < 1000 || len(scored) >= len(lines) {
				t.Fatalf("%d records scored of %d", len(scored), len(lines))
			}
			for i, s := range scored {
				if want := strings.TrimSuffix(lines[i], "}\n") + ","; !strings.HasPrefix(s, want) {
					t.Fatalf("record %d: %s\nwant it to start %s", i, s, want)
				}
			}
			var d struct {
				Reason string `json:"reason"`
				Raw    string `json:"raw"`
				Source struct {
					Line int `json:"line"`
				} `json:"source"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(clitest.ReadFile(t, dead))), &d); err != nil {
				t.Fatal(err)
			}
			if next := lines[len(scored)]; d.Reason != "not_json" || d.Source.Line != len(scored)+1 || d.Raw == "" || !strings.HasPrefix(next, d.Raw) {
				t.Errorf("dead letter %+v, want the start of line %d: %s", d, len(scored)+1, next)
			}
			var r struct {
				Events     int    `json:"events"`
				Invalid    int    `json:"invalid"`
				InputError string `json:"input_error"`
			}
			if err := json.Unmarshal([]byte(clitest.ReadFile(t, rep)), &r); err != nil {
				t.Fatal(err)
			}
			if r.Events != len(scored) || r.Invalid != 1 || !strings.Contains(r.InputError, fmt.Sprintf("after line %d ", len(scored))) {
				t.Errorf("report: %+v", r)
			}
		})
	}
}

// TestReplayUnreadMembers: a log whose members are named as another
// format names them (Taobao's timestamp and behavior_type) is scored
// without times and types, and replay says so: its summary names each
// member to rename, and the report counts them.
func TestReplayUnreadMembers(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, `{"user":"u%d","item":"i%d","timestamp":%d,"behavior_type":"pv"}`+"\n", i%17, i%23, 1511544070+i)
	}
	b.WriteString(`{"user":"u1","item":"i1","ts":1511544070,"event":"pv"}` + "\n")
	in := clitest.WriteFile(t, filepath.Join(dir, "in.jsonl"), b.String())
	rep := filepath.Join(dir, "r.json")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", filepath.Join(dir, "o.jsonl"), "--report", rep}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	for _, want := range []string{`not read: 200 records have "timestamp" and no "ts"`, `not read: 200 records have "behavior_type" and no "event"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("summary does not say %q:\n%s", want, stderr.String())
		}
	}
	var r struct {
		Unread map[string]uint64 `json:"unread_members"`
	}
	if err := json.Unmarshal([]byte(clitest.ReadFile(t, rep)), &r); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(r.Unread, map[string]uint64{"timestamp": 200, "behavior_type": 200}) {
		t.Errorf("report's unread_members: %v", r.Unread)
	}
}

// TestReplayFields: a log in another format's names (Taobao's) is read
// with fields.*, from --set or the run configuration: its times and types
// reach the model, the output has the event format's names with the
// record's own members beside them, and nothing is reported unread.
func TestReplayFields(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, `{"user_id":%d,"item_id":%d,"behavior_type":"pv","timestamp":%d}`+"\n", i%17, i%23, 1511544070+i)
	}
	in := clitest.WriteFile(t, filepath.Join(dir, "in.jsonl"), b.String())
	conf := clitest.WriteFile(t, filepath.Join(dir, "run.yaml"), "fields:\n  user: user_id\n  item: item_id\n  ts: timestamp\n  event: behavior_type\n")
	var outs []string
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"set", []string{"--set", "fields.user=user_id", "--set", "fields.item=item_id", "--set", "fields.ts=timestamp", "--set", "fields.event=behavior_type"}},
		{"config", []string{"--config", conf}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".jsonl")
			var stderr bytes.Buffer
			if code := run(context.Background(), append([]string{"replay", "--in", in, "--out", out}, tc.args...), &bytes.Buffer{}, &stderr); code != 0 {
				t.Fatalf("exit %d:\n%s", code, stderr.String())
			}
			if strings.Contains(stderr.String(), "not read") || strings.Contains(stderr.String(), "note:") {
				t.Errorf("stderr:\n%s", stderr.String())
			}
			scored := strings.Split(strings.TrimSpace(clitest.ReadFile(t, out)), "\n")
			if want := `{"user":"0","item":"0","ts":1511544070000,"event":"pv","user_id":0,"item_id":0,"behavior_type":"pv","timestamp":1511544070,"weight":`; len(scored) != 300 || !strings.HasPrefix(scored[0], want) {
				t.Fatalf("%d scored; the first %s\nwant it to start %s", len(scored), scored[0], want)
			}
			outs = append(outs, clitest.ReadFile(t, out))
		})
	}
	if len(outs) == 2 && outs[0] != outs[1] {
		t.Error("--set and the configuration file score differently")
	}
	// Without fields.*, the same log has no user: every record is
	// dead-lettered with the member to read.
	var stderr bytes.Buffer
	dead := filepath.Join(dir, "dead.jsonl")
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", filepath.Join(dir, "none.jsonl"), "--dead-letter", dead}, &bytes.Buffer{}, &stderr); code != 1 {
		t.Fatalf("exit %d without fields:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no event could be scored: the records name their fields as another format does") {
		t.Errorf("stderr without fields:\n%s", stderr.String())
	}
	if d := clitest.ReadFile(t, dead); !strings.Contains(d, `or read it with fields.user: user_id`) {
		t.Errorf("dead letters without fields: %.300s", d)
	}
}

// writeTimedEvents writes n events of (user, item, ts) to dir/in.jsonl
// and returns its path.
func writeTimedEvents(t *testing.T, dir string, n int) string {
	t.Helper()
	in := filepath.Join(dir, "in.jsonl")
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"user":"u%d","item":"i%d","ts":%d}`+"\n", i%5, i%7, 1_700_000_000_000+int64(i)*1000)
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestReplayNothingFitsTheMode: a log of valid events without ratings,
// replayed in rating mode, is refused by the model record by record; the
// error says so (not that the input is not JSON lines).
func TestReplayNothingFitsTheMode(t *testing.T) {
	dir := t.TempDir()
	in := writeTimedEvents(t, dir, 20)
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", filepath.Join(dir, "out.jsonl"), "--set", "model.mode=rating"}, &bytes.Buffer{}, &stderr); code != 1 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no event could be scored: the model refused all 20 records (model_rejected)") || strings.Contains(stderr.String(), "write JSON lines") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// TestReplayShadowedFields: fields.ts names a member the records lack
// while they carry "ts": the summary and the report say that "ts" was
// not read (the model ran without times), and where the user is read
// from a member no record has, the error says why nothing scored.
func TestReplayShadowedFields(t *testing.T) {
	dir := t.TempDir()
	in := writeTimedEvents(t, dir, 20)
	report := filepath.Join(dir, "r.json")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", filepath.Join(dir, "out.jsonl"), "--report", report, "--set", "fields.ts=timestamp"}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), `not read: 20 records lack the member fields.ts names and have "ts"`) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	var rep struct {
		Shadowed map[string]uint64 `json:"shadowed_fields"`
	}
	if err := json.Unmarshal([]byte(clitest.ReadFile(t, report)), &rep); err != nil || rep.Shadowed["ts"] != 20 {
		t.Errorf("report shadowed_fields %v (%v), want ts: 20", rep.Shadowed, err)
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", filepath.Join(dir, "none.jsonl"), "--set", "fields.user=user_id"}, &bytes.Buffer{}, &stderr); code != 1 {
		t.Fatalf("exit %d with fields.user=user_id:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no event could be scored: the records lack the members that fields.* names") {
		t.Errorf("stderr with fields.user=user_id:\n%s", stderr.String())
	}
}

// TestReplayReplacedMembers: input members named like fields the output
// writes ("source", "label", "weight": common column names) are replaced
// by the output's own; the summary and the report count them per name,
// so that the loss is not silent, and the other members are carried.
func TestReplayReplacedMembers(t *testing.T) {
	dir := t.TempDir()
	var lines strings.Builder
	for i := range 12 {
		fmt.Fprintf(&lines, `{"user":"u%d","item":"i%d","source":"mobile_app","page":%d`, i%3, i%5, i)
		if i%2 == 0 {
			lines.WriteString(`,"label":"promo","weight":2.5`)
		}
		lines.WriteString("}\n")
	}
	in := clitest.WriteFile(t, filepath.Join(dir, "in.jsonl"), lines.String())
	out, report := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "r.json")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", out, "--report", report, "--truth", "none"}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	for _, want := range []string{`replaced: 12 records have "source"`, `replaced: 6 records have "label"`, `replaced: 6 records have "weight"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	var rep struct {
		Replaced map[string]uint64 `json:"replaced_members"`
	}
	if err := json.Unmarshal([]byte(clitest.ReadFile(t, report)), &rep); err != nil || rep.Replaced["source"] != 12 || rep.Replaced["label"] != 6 || rep.Replaced["weight"] != 6 || len(rep.Replaced) != 3 {
		t.Errorf("report replaced_members %v (%v), want source 12, label 6, weight 6", rep.Replaced, err)
	}
	scored := clitest.ReadFile(t, out)
	if strings.Contains(scored, "mobile_app") || strings.Contains(scored, "promo") || strings.Count(scored, `"page":`) != 12 {
		t.Errorf("scored output:\n%s", scored)
	}
}

// TestReplayTruthUnread: a truth that is neither "genuine" nor "noise"
// (a CSV's 1/0 column) costs no event: every row is scored, the truth
// goes on as it came, the summary and the report count the records, and
// --truth field evaluates only the readable ones.
func TestReplayTruthUnread(t *testing.T) {
	dir := t.TempDir()
	var lines strings.Builder
	lines.WriteString("user,item,truth\n")
	for i := range 40 {
		truth := []string{"genuine", "noise", "1", "0"}[i%4]
		fmt.Fprintf(&lines, "u%d,i%d,%s\n", i%7, i%5, truth)
	}
	in := clitest.WriteFile(t, filepath.Join(dir, "in.csv"), lines.String())
	out, report := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "r.json")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--in", in, "--out", out, "--report", report, "--truth", "field"}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	for _, want := range []string{"40 events scored, 0 invalid", "truth not read: 20 records", "20 events (10 genuine, 10 noise), 20 without truth"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	var rep struct {
		TruthUnread uint64 `json:"truth_unread"`
	}
	if err := json.Unmarshal([]byte(clitest.ReadFile(t, report)), &rep); err != nil || rep.TruthUnread != 20 {
		t.Errorf("report truth_unread %d (%v), want 20", rep.TruthUnread, err)
	}
	if scored := clitest.ReadFile(t, out); strings.Count(scored, `"truth":1,`) != 10 || strings.Count(scored, `"truth":0,`) != 10 {
		t.Errorf("the unread truths are not carried:\n%s", scored)
	}
}

// TestReplayMostlyDeadLettered: a run whose records are mostly refused
// says so beside the summary, with where each one's error is and, in
// rating mode, the classes it reads (a config printed in binary mode and
// edited to rating mode kept classes 2, and 82 % of MovieLens went to
// the dead letters with exit 0); a run of JSON objects that all fail a
// check says so, with the reasons and where the dead letters are, not
// "write JSON lines"; a file of blank lines says that.
func TestReplayMostlyDeadLettered(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf(`{"user":"u%d","item":"i%d","rating":%d}`, i%7, i%5, 1+i%5))
	}
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	args := []string{"replay", "--in", in, "--out", filepath.Join(dir, "out.jsonl"), "--set", "model.mode=rating", "--set", "model.classes=2"}
	if code := run(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if want := "warning: 18 of 30 records (60%) were dead-lettered (model_rejected 18); the dead letters (" + filepath.Join(dir, "out.dead-letter.jsonl") + ") give each one's field and error; rating mode reads ratings 1..2 (model.classes 2)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}

	// In rating mode the truth of --truth rating:R is the model's label.
	stderr.Reset()
	args = []string{"replay", "--in", in, "--out", filepath.Join(dir, "out3.jsonl"), "--set", "model.mode=rating", "--truth", "rating:2"}
	if code := run(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 || !strings.Contains(stderr.String(), "note: in rating mode the model's label is the rating that --truth rating:2 reads") {
		t.Errorf("rating mode against --truth rating:2: exit %d:\n%s", code, stderr.String())
	}

	blank := filepath.Join(dir, "blank.jsonl")
	if err := os.WriteFile(blank, []byte("\n  \n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"replay", "--in", blank, "--out", filepath.Join(dir, "out4.jsonl")}, &bytes.Buffer{}, &stderr); code != 1 || !strings.Contains(stderr.String(), "all 3 lines of the input are blank") {
		t.Errorf("blank lines only: exit %d:\n%s", code, stderr.String())
	}

	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"user":"u","item":"i","ts":"yesterday"}`+"\n"+`{"user":"v","item":"i","ts":"today"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"replay", "--in", bad, "--out", filepath.Join(dir, "out2.jsonl"), "--dead-letter", filepath.Join(dir, "dl.jsonl")}, &bytes.Buffer{}, &stderr); code != 1 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if want := "the lines are JSON objects, and the decoder or the model refused each one (dead-lettered: bad_type 2; the first, " + filepath.Join(dir, "bad.jsonl") + ":1: ts: \"yesterday\" is neither a unix time"; !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "; the dead letters ("+filepath.Join(dir, "dl.jsonl")+") give each one's field and error)") || strings.Contains(stderr.String(), "write JSON lines") {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
}
