// Command benchratio passes the output of `go test -bench` through and
// then prints ratios between results of that same run, so that a figure
// comes with its baseline (make bench; docs/perf.md):
//
//	go test -run '^$' -bench 'Step$' ./online 2>&1 | go run ./internal/benchratio \
//		-ratio 'step, RGBT over plain (events/cpu-s): BenchmarkStep/rgbt events/cpu-s / BenchmarkStep/plain events/cpu-s'
//
// A ratio is "LABEL: NAME UNIT / NAME UNIT", NAME a benchmark's full name
// without its -GOMAXPROCS suffix and UNIT one of its result units (ns/op,
// or a b.ReportMetric unit). With -count > 1 each side is the median of
// its results. It exits 1 when the input has a FAIL line or a ratio has no
// result for one of its sides, so that a failed benchmark run fails the
// make target that pipes into it.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ratio is one -ratio flag: Label = Num / Den.
type ratio struct {
	Label    string
	Num, Den metric
}

// metric names one unit of one benchmark's results.
type metric struct{ Name, Unit string }

func (m metric) String() string { return m.Name + " " + m.Unit }

// ratioFlags collects repeated -ratio flags.
type ratioFlags []ratio

func (r *ratioFlags) String() string { return fmt.Sprint(len(*r), " ratios") }

func (r *ratioFlags) Set(s string) error {
	q, err := parseRatio(s)
	if err != nil {
		return err
	}
	*r = append(*r, q)
	return nil
}

// parseRatio parses "LABEL: NAME UNIT / NAME UNIT".
func parseRatio(s string) (ratio, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return ratio{}, fmt.Errorf("ratio %q: want \"LABEL: NAME UNIT / NAME UNIT\"", s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) != 5 || f[2] != "/" {
		return ratio{}, fmt.Errorf("ratio %q: want \"LABEL: NAME UNIT / NAME UNIT\" after the last colon", s)
	}
	return ratio{Label: strings.TrimSpace(s[:i]), Num: metric{f[0], f[1]}, Den: metric{f[3], f[4]}}, nil
}

// results holds every value of every metric seen, in input order.
type results map[metric][]float64

// procSuffix is the -GOMAXPROCS suffix go test appends to a name.
var procSuffix = regexp.MustCompile(`-\d+$`)

// errFailed is returned by scan when the benchmark run reported a failure.
var errFailed = errors.New("the benchmark run failed")

// scan copies r to w line by line and collects the benchmark results.
// A result line is "BenchmarkName-P  N  value unit  value unit ...".
func scan(r io.Reader, w io.Writer) (results, error) {
	res := results{}
	var failed bool
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if _, err := fmt.Fprintln(w, line); err != nil {
			return nil, err
		}
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") {
			failed = true
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		for j := 2; j+1 < len(f); j += 2 {
			v, err := strconv.ParseFloat(f[j], 64)
			if err != nil {
				continue
			}
			m := metric{name, f[j+1]}
			res[m] = append(res[m], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if failed {
		return res, errFailed
	}
	return res, nil
}

// median returns the median of vs (the mean of the middle two for an even
// count).
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// report writes one line per ratio and returns an error naming those it
// could not compute.
func report(w io.Writer, res results, ratios []ratio) error {
	var missing []string
	if len(ratios) > 0 {
		fmt.Fprintln(w, "\nratios (results of this run; the median where a benchmark ran more than once):")
	}
	for _, q := range ratios {
		num, den := res[q.Num], res[q.Den]
		switch {
		case len(num) == 0:
			missing = append(missing, q.Num.String())
			continue
		case len(den) == 0:
			missing = append(missing, q.Den.String())
			continue
		}
		n, d := median(num), median(den)
		if d == 0 {
			missing = append(missing, q.Den.String()+" (zero)")
			continue
		}
		fmt.Fprintf(w, "  %-52s %7.3f   (%s %.4g / %s %.4g, n=%d/%d)\n", q.Label, n/d, q.Num, n, q.Den, d, len(num), len(den))
	}
	if len(missing) > 0 {
		return fmt.Errorf("no result for %s", strings.Join(missing, ", "))
	}
	return nil
}

func main() {
	var ratios ratioFlags
	flag.Var(&ratios, "ratio", "`\"LABEL: NAME UNIT / NAME UNIT\"` to print after the run (repeatable)")
	flag.Parse()
	res, err := scan(os.Stdin, os.Stdout)
	if err != nil && !errors.Is(err, errFailed) {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
	if rerr := report(os.Stdout, res, ratios); rerr != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", rerr)
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}
