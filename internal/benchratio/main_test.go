package main

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// run is the output of one `go test -bench` run over two packages, with a
// sub-benchmark run twice (-count 2) and a test's log line in between.
const run = `goos: linux
goarch: amd64
pkg: denoiser/online
cpu: AMD EPYC
BenchmarkStep/rgbt-2         	  530827	      7707 ns/op	    240000 events/cpu-s	    129759 events/s	       0 B/op	       0 allocs/op
BenchmarkStep/rgbt-2         	  530827	      7000 ns/op	    260000 events/cpu-s	    129759 events/s	       0 B/op	       0 allocs/op
BenchmarkStep/plain-2        	  175159	      6981 ns/op	    320000 events/cpu-s	    143250 events/s	       0 B/op	       0 allocs/op
ok  	denoiser/online	12.1s
pkg: denoiser/service
    bench_test.go:99: pass-through: 100000 events, 300000 events/s, 3.1 CPU-µs/event
BenchmarkPipeline-2   	       1	         0 ns/op	    150000 denoiser-events/s	    300000 passthrough-events/s	         0.5000 ratio
ok  	denoiser/service	20.5s
`

func TestScanAndReport(t *testing.T) {
	var echo strings.Builder
	res, err := scan(strings.NewReader(run), &echo)
	if err != nil {
		t.Fatal(err)
	}
	if echo.String() != run {
		t.Errorf("the input was not passed through unchanged:\n%s", echo.String())
	}
	for _, tc := range []struct {
		m    metric
		want []float64
	}{
		{metric{"BenchmarkStep/rgbt", "events/cpu-s"}, []float64{240000, 260000}},
		{metric{"BenchmarkStep/plain", "ns/op"}, []float64{6981}},
		{metric{"BenchmarkPipeline", "ratio"}, []float64{0.5}},
	} {
		if got := res[tc.m]; !equal(got, tc.want) {
			t.Errorf("%v = %v, want %v", tc.m, got, tc.want)
		}
	}

	var out strings.Builder
	ratios := []ratio{
		mustParse(t, "step, RGBT over plain: BenchmarkStep/rgbt events/cpu-s / BenchmarkStep/plain events/cpu-s"),
		mustParse(t, "pipeline: BenchmarkPipeline denoiser-events/s / BenchmarkPipeline passthrough-events/s"),
	}
	if err := report(&out, res, ratios); err != nil {
		t.Fatal(err)
	}
	// rgbt: the median of 240000 and 260000 is 250000; over 320000: 0.781.
	for _, want := range []string{"step, RGBT over plain", "0.781", "n=2/1", "pipeline", "0.500"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestMissingAndFailed(t *testing.T) {
	res, err := scan(strings.NewReader(run+"--- FAIL: BenchmarkX\nFAIL\tdenoiser/x\t1.0s\n"), &strings.Builder{})
	if !errors.Is(err, errFailed) {
		t.Errorf("a FAIL line: err %v, want errFailed", err)
	}
	err = report(&strings.Builder{}, res, []ratio{mustParse(t, "x: BenchmarkStep/nope ns/op / BenchmarkStep/plain ns/op")})
	if err == nil || !strings.Contains(err.Error(), "BenchmarkStep/nope ns/op") {
		t.Errorf("a ratio without results: err %v, want one naming the missing side", err)
	}
	err = report(&strings.Builder{}, res, []ratio{mustParse(t, "x: BenchmarkStep/plain ns/op / BenchmarkPipeline ns/op")})
	if err == nil || !strings.Contains(err.Error(), "zero") {
		t.Errorf("a zero denominator: err %v, want one that says so", err)
	}
}

func TestParseRatio(t *testing.T) {
	q, err := parseRatio("a: b (c): BenchmarkA/x events/s / BenchmarkB ns/op")
	if err != nil {
		t.Fatal(err)
	}
	if q.Label != "a: b (c)" || q.Num != (metric{"BenchmarkA/x", "events/s"}) || q.Den != (metric{"BenchmarkB", "ns/op"}) {
		t.Errorf("parsed %+v", q)
	}
	for _, bad := range []string{"", "no colon", "a: BenchmarkA ns/op", "a: BenchmarkA ns/op BenchmarkB ns/op x", "a: A u % B u"} {
		if _, err := parseRatio(bad); err == nil {
			t.Errorf("parseRatio(%q) accepted", bad)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func mustParse(t *testing.T, s string) ratio {
	t.Helper()
	q, err := parseRatio(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-12 {
			return false
		}
	}
	return true
}
