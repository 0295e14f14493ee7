package eval

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeDecaSplit writes a tiny split in DeCA's format into a new
// directory: raw user ids 1–3, raw item ids 10–19 (dense 0–9).
//
//	user 1: train 10 (rating 1), 11; valid 12; test 12 (also valid), 13
//	user 2: train 10, 12, 13;      valid 14; test 14 (also valid), 11, 19
//	user 3: train 14–19;           no valid, no test
func writeDecaSplit(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		DecaTrainFile: "1\t10\t1\n1\t11\t4\n2\t10\t3\n2\t12\t5\n2\t13\t2\n3\t14\t5\n3\t15\t5\n3\t16\t4\n3\t17\t3\n3\t18\t2\n3\t19\t1\n",
		DecaValidFile: "1\t12\t5\n2\t14\t5\n",
		DecaTestFile:  "1\t12\t5\n1\t13\t5\n2\t14\t5\n2\t11\t5\n2\t19\t5\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDecaProtocol checks the DeCA test protocol on a split worked by
// hand: the user's training and validation items are not ranked, and
// Recall divides by the whole test list, masked items included.
func TestDecaProtocol(t *testing.T) {
	d, sp, err := LoadDecaSplit(context.Background(), writeDecaSplit(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.Users != 3 || d.Items != 10 || len(sp.Train) != 11 || len(sp.Valid) != 2 || len(sp.Test) != 5 || len(sp.Seen) != 13 {
		t.Fatalf("users %d items %d, train %d valid %d test %d seen %d", d.Users, d.Items, len(sp.Train), len(sp.Valid), len(sp.Test), len(sp.Seen))
	}
	if x := sp.Test[4]; x.User != 1 || x.Item != 9 || x.Rating != 5 {
		t.Errorf("last test row %+v, want dense user 1, item 9, rating 5", x)
	}
	// Item i (dense) scores 10 − i: every user ranks by item index.
	score := func(u int32, dst []float64) {
		for i := range dst {
			dst[i] = float64(10 - i)
		}
	}
	// User 1 ranks 13, 14, …, 19 (10, 11 trained, 12 validated): test item
	// 13 is first, 12 is never ranked. Recall 1/2 at every cutoff; NDCG
	// 1 / (1 + 1/log2 3), the ideal list having both test items on top.
	// User 2 ranks 11, 15, 16, 17, 18, 19 (10, 12, 13 trained, 14
	// validated): 11 first, 19 sixth. Recall@5 1/3, from 10 on 2/3; NDCG@5
	// 1 / (1 + 1/log2 3 + 1/2), from 10 on (1 + 1/log2 7) / (same).
	l3, l7 := 1/math.Log2(3), 1/math.Log2(7)
	u1n := 1 / (1 + l3)
	ideal2 := 1 + l3 + 0.5
	wantRecall := []float64{(0.5 + 1.0/3) / 2, (0.5 + 2.0/3) / 2, (0.5 + 2.0/3) / 2, (0.5 + 2.0/3) / 2}
	wantNDCG := []float64{(u1n + 1/ideal2) / 2, (u1n + (1+l7)/ideal2) / 2, (u1n + (1+l7)/ideal2) / 2, (u1n + (1+l7)/ideal2) / 2}
	m := Evaluate(score, d.Users, d.Items, sp.Seen, sp.Test)
	if m.Users != 2 {
		t.Fatalf("%d users averaged, want 2", m.Users)
	}
	for c, k := range Cutoffs {
		if !near(m.Recall[c], wantRecall[c], 1e-12) || !near(m.NDCG[c], wantNDCG[c], 1e-12) {
			t.Errorf("@%d: recall %v ndcg %v, want %v %v", k, m.Recall[c], m.NDCG[c], wantRecall[c], wantNDCG[c])
		}
	}
	// Masking the training items only ranks 12 first for user 1 (recall
	// 1) and 14 second for user 2: a different, higher number.
	if m2 := Evaluate(score, d.Users, d.Items, sp.Train, sp.Test); !(m2.Recall[1] > m.Recall[1]) {
		t.Errorf("train-only masking gives R@10 %v, not above %v", m2.Recall[1], m.Recall[1])
	}
	users, masked, ceiling := recallCeiling(d.Users, sp.Seen, sp.Test)
	if users != 2 || masked != 2 || !near(ceiling, (0.5+2.0/3)/2, 1e-12) {
		t.Errorf("recall ceiling: %d users, %d masked, %v; want 2, 2, %v", users, masked, ceiling, (0.5+2.0/3)/2)
	}
}

func TestLoadDecaSplitErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, file, text string
		want             []string // substrings of the error
	}{
		{"missing test file", DecaTestFile, "", []string{DecaTestFile, "github.com/wangyu-ustc/DeCA"}},
		{"unknown item in validation", DecaValidFile, "1\t12\t5\n1\t99\t5\n", []string{DecaValidFile + ":2", "item 99"}},
		{"two columns", DecaTrainFile, "1\t10\n", []string{DecaTrainFile + ":1", "2 fields"}},
		{"rating 6", DecaTestFile, "1\t12\t6\n", []string{DecaTestFile + ":1", "rating 6"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDecaSplit(t)
			path := filepath.Join(dir, tc.file)
			var err error
			if tc.text == "" {
				err = os.Remove(path)
			} else {
				err = os.WriteFile(path, []byte(tc.text), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = LoadDecaSplit(ctx, dir)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
	if _, _, err := LoadDecaSplit(ctx, filepath.Join(t.TempDir(), "nowhere")); err == nil || !strings.Contains(err.Error(), DecaTrainFile) ||
		!strings.Contains(err.Error(), "github.com/wangyu-ustc/DeCA") {
		t.Errorf("missing directory: %v", err)
	}
}

// TestRecommendDeca runs the experiment on the tiny DeCA split: the split
// is the same for every seed and the report states the protocol.
func TestRecommendDeca(t *testing.T) {
	d, sp, err := LoadDecaSplit(context.Background(), writeDecaSplit(t))
	if err != nil {
		t.Fatal(err)
	}
	vs := DefaultVariants()[:1]
	vs[0].Config.WarmUp = 5
	res, err := RunRecommend(context.Background(), d, RecommendConfig{
		Split: SplitDeca, Fixed: &sp, Seeds: 2, Passes: 1, Variants: vs, GMF: GMFConfig{Epochs: 2, EvalEvery: 1}, Segments: 2, Oracle: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	oracleRows, oraclePaired := 0, 0
	for _, r := range res.Rows {
		if r.Method == OracleWeighted {
			oracleRows++
		}
	}
	for _, p := range res.Paired {
		if p.Method == OracleWeighted && (p.Baseline == "Normal" || p.Baseline == FullWeighted) {
			oraclePaired++
		}
	}
	if want := len(res.Backbones); oracleRows != want || oraclePaired != want*2*2*2 {
		t.Errorf("oracle: %d rows, %d paired comparisons; want %d and %d (2 baselines, 2 metrics, 2 cutoffs per backbone)", oracleRows, oraclePaired, want, want*8)
	}
	if res.Negatives != 1 || res.Train != 11 || res.Valid != 2 || res.TestClean != 5 || res.TestUsers != 2 || res.TestMasked != 2 {
		t.Errorf("result header %+v", res)
	}
	for _, r := range res.Rows {
		for c := range Cutoffs {
			if r.RecallMean[c] > res.RecallCeiling+1e-12 {
				t.Errorf("%s: R@%d %v above the ceiling %v", r.Method, Cutoffs[c], r.RecallMean[c], res.RecallCeiling)
			}
		}
	}
	dir := t.TempDir()
	if err := res.WriteReport(dir, Meta{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "recommend.md"))
	for _, w := range []string{"training and validation items", "0.5833", PaperDecaNormal.Method} {
		if !strings.Contains(string(md), w) {
			t.Errorf("report lacks %q", w)
		}
	}
	if _, err := RunRecommend(context.Background(), d, RecommendConfig{Split: SplitDeca}); err == nil {
		t.Error("deca split without its files accepted")
	}
	if _, err := RunRecommend(context.Background(), d, RecommendConfig{Split: SplitRandom, Fixed: &sp}); err == nil {
		t.Error("random split with a fixed split accepted")
	}
}
