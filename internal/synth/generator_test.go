package synth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/synthetic-20k.jsonl from the generator")

func generate(t *testing.T, c Config) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Write(context.Background(), &buf, c)
	if err != nil {
		t.Fatalf("Write(%+v): %v", c, err)
	}
	return buf.Bytes(), st
}

func TestDeterminism(t *testing.T) {
	c := Config{Events: 5000, Noise: 0.2, Seed: 42}
	a, _ := generate(t, c)
	b, _ := generate(t, c)
	if !bytes.Equal(a, b) {
		t.Fatal("same config gave different bytes")
	}
	c.Seed = 43
	d, _ := generate(t, c)
	if bytes.Equal(a, d) {
		t.Fatal("seeds 42 and 43 gave identical streams")
	}
	// A different seed must change the world, not only the event order:
	// the first lines differ.
	if bytes.Equal(firstLine(a), firstLine(d)) {
		t.Errorf("seeds 42 and 43 start with the same event %s", firstLine(a))
	}
}

func firstLine(b []byte) []byte {
	i := bytes.IndexByte(b, '\n')
	return b[:i]
}

func TestNoiseShare(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events int
		noise  float64
	}{
		{"clean", 3000, 0},
		{"light", 3000, 0.05},
		{"default", 20000, 0.2},
		{"heavy", 3001, 0.5},
		{"odd", 777, 0.33},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, st := generate(t, Config{Events: tc.events, Noise: tc.noise, Seed: 3})
			if st.Events != tc.events {
				t.Fatalf("events = %d, want %d", st.Events, tc.events)
			}
			// The share is exact up to rounding to a whole event.
			if got, want := st.Noise(), int(math.Round(tc.noise*float64(tc.events))); got != want {
				t.Errorf("noise events = %d, want %d (share %.4f, want %.4f)", got, want, st.NoiseShare(), tc.noise)
			}
			if tc.noise == 0 {
				return
			}
			// Each mechanism gets its weight, within sampling error.
			n := float64(st.Noise())
			for _, m := range []struct {
				c    Cause
				want float64
			}{{Misclick, DefaultMisclick}, {Clickbait, DefaultClickbait}, {Curiosity, DefaultCuriosity}} {
				got := float64(st.ByCause[m.c]) / n
				if tol := 4 * math.Sqrt(m.want*(1-m.want)/n); math.Abs(got-m.want) > tol {
					t.Errorf("%v share of noise = %.3f, want %.3f ± %.3f", m.c, got, m.want, tol)
				}
			}
		})
	}
}

func TestNoiseIsSpreadOverTheStream(t *testing.T) {
	// Selection sampling must not bunch the noise at either end.
	g, err := New(Config{Events: 20000, Noise: 0.2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	var half [2]int
	for n := 0; ; n++ {
		e, ok := g.Next()
		if !ok {
			break
		}
		if e.Cause.Noise() {
			half[n*2/20000]++
		}
	}
	if half[0] < 1800 || half[1] < 1800 {
		t.Errorf("noise per half = %v, want about 2000 each", half)
	}
}

func TestDwellOverlap(t *testing.T) {
	_, st := generate(t, Config{Events: 50000, Noise: 0.2, Seed: 11})
	// Both ways, near the 10% Overlap plus the tails of the main
	// distributions: dwell alone is not a perfect oracle.
	if s := st.ShortGenuineShare(); s < 0.08 || s > 0.14 {
		t.Errorf("genuine clicks with dwell < 10 s: %.3f, want in [0.08, 0.14]", s)
	}
	if s := st.LongNoiseShare(); s < 0.08 || s > 0.15 {
		t.Errorf("noisy clicks with dwell >= 10 s: %.3f, want in [0.08, 0.15]", s)
	}
	t.Logf("short genuine %.4f, long noise %.4f", st.ShortGenuineShare(), st.LongNoiseShare())

	// With the overlap switched off dwell is almost an oracle: only the
	// tails of the log-normals cross the threshold.
	_, st = generate(t, Config{Events: 50000, Noise: 0.2, Seed: 11, Overlap: -1})
	if s := st.ShortGenuineShare(); s > 0.03 {
		t.Errorf("no overlap: genuine clicks with dwell < 10 s: %.3f, want < 0.03", s)
	}
	if s := st.LongNoiseShare(); s > 0.03 {
		t.Errorf("no overlap: noisy clicks with dwell >= 10 s: %.3f, want < 0.03", s)
	}
}

var lineRE = regexp.MustCompile(`^\{"user":"u[1-9][0-9]*","item":"i[1-9][0-9]*","ts":[0-9]+,"event":"click","dwell_ms":[0-9]+,"truth":"(genuine|noise)"\}$`)

func TestEncoding(t *testing.T) {
	c := Config{Events: 4000, Noise: 0.3, Seed: 9, Users: 50, Items: 80, Topics: 5}
	out, st := generate(t, c)
	sc := bufio.NewScanner(bytes.NewReader(out))
	var (
		n      int
		lastTS int64
		noise  int
	)
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if !lineRE.Match(line) {
			t.Fatalf("line %d does not have the event format's fields in order: %s", n, line)
		}
		var e struct {
			User, Item, Event, Truth string
			TS                       int64
			DwellMS                  int64 `json:"dwell_ms"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if e.TS <= lastTS || e.TS < DefaultEpochMS {
			t.Fatalf("line %d: ts %d after %d: want strictly increasing from the epoch", n, e.TS, lastTS)
		}
		lastTS = e.TS
		if e.DwellMS < minDwellMS || e.DwellMS > maxDwellMS {
			t.Errorf("line %d: dwell %d out of [%d, %d]", n, e.DwellMS, minDwellMS, maxDwellMS)
		}
		if e.Truth == "noise" {
			noise++
		}
	}
	if n != c.Events || noise != st.Noise() {
		t.Errorf("read %d lines with %d noise, want %d with %d", n, noise, c.Events, st.Noise())
	}
	if st.Users > c.Users || st.Items > c.Items {
		t.Errorf("ids beyond the configured sizes: %d users, %d items", st.Users, st.Items)
	}
}

func TestScale(t *testing.T) {
	// The stream the acceptance test uses: every user needs tens of events
	// for an online factorisation model to learn their taste in one pass,
	// and genuine repeats of a (user, item) pair stay rare.
	if testing.Short() {
		t.Skip("200k events")
	}
	g, err := New(Config{Events: 200_000, Noise: 0.2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	c := g.Config()
	if c.Users != 2000 || c.Items != 1000 || c.Topics != 10 || c.ClickbaitItems != 50 {
		t.Errorf("sizes = %d users, %d items, %d topics, %d clickbait; want 2000, 1000, 10, 50",
			c.Users, c.Items, c.Topics, c.ClickbaitItems)
	}
	perUser := make([]int, c.Users)
	perItem := make([]int, c.Items)
	seen := make(map[[2]int]bool)
	var genuine, repeats int
	for {
		e, ok := g.Next()
		if !ok {
			break
		}
		perUser[e.User]++
		perItem[e.Item]++
		if e.Cause == Genuine {
			genuine++
			k := [2]int{e.User, e.Item}
			if seen[k] {
				repeats++
			}
			seen[k] = true
		}
	}
	slices.Sort(perUser)
	slices.Sort(perItem)
	if p5 := perUser[len(perUser)/20]; p5 < 20 {
		t.Errorf("5th percentile of events per user = %d, want >= 20", p5)
	}
	if med := perItem[len(perItem)/2]; med < 50 {
		t.Errorf("median events per item = %d, want >= 50", med)
	}
	// Long tail: the busiest item gets far more than the median one.
	if top, med := perItem[len(perItem)-1], perItem[len(perItem)/2]; top < 5*med {
		t.Errorf("busiest item %d events, median %d: want a long tail", top, med)
	}
	if share := float64(repeats) / float64(genuine); share > 0.05 {
		t.Errorf("genuine repeats = %.3f of genuine clicks, want <= 0.05", share)
	}
	t.Logf("events per user: p5 %d, median %d; per item: median %d, max %d; genuine repeats %.4f",
		perUser[len(perUser)/20], perUser[len(perUser)/2], perItem[len(perItem)/2], perItem[len(perItem)-1],
		float64(repeats)/float64(genuine))
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
	}{
		{"no events", Config{}},
		{"negative events", Config{Events: -1}},
		{"noise one", Config{Events: 10, Noise: 1}},
		{"negative noise", Config{Events: 10, Noise: -0.1}},
		{"NaN noise", Config{Events: 10, Noise: math.NaN()}},
		{"one item", Config{Events: 10, Items: 1}},
		{"negative users", Config{Events: 10, Users: -3}},
		{"clickbait beyond catalogue", Config{Events: 10, Items: 5, ClickbaitItems: 6}},
		{"purity above one", Config{Events: 10, TopicPurity: 1.5}},
		{"overlap above half", Config{Events: 10, Overlap: 0.6}},
		{"negative mechanism", Config{Events: 10, Misclick: -1, Clickbait: 1}},
		{"short sessions", Config{Events: 10, SessionMean: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.c)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("New(%+v) = %v, want ErrConfig", tc.c, err)
			}
		})
	}
	if _, err := New(Config{Events: 1}); err != nil {
		t.Errorf("one event: %v", err)
	}
}

func TestWriteHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Write(ctx, io.Discard, Config{Events: 100, Noise: 0.2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Write with a cancelled context = %v, want context.Canceled", err)
	}
}

const goldenPath = "../../testdata/synthetic-20k.jsonl"

// TestGolden keeps the recorded log reproducible: it is exactly what
// `denoiser-lab gen --events 20000 --noise 0.2 --seed 1` writes. Refresh with
// go test ./synth -run TestGolden -update.
func TestGolden(t *testing.T) {
	got, st := generate(t, Config{Events: 20000, Noise: 0.2, Seed: 1})
	if *update {
		if err := os.WriteFile(filepath.FromSlash(goldenPath), got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d bytes; %v", goldenPath, len(got), st)
	}
	want, err := os.ReadFile(filepath.FromSlash(goldenPath))
	if err != nil {
		t.Fatalf("read golden file (regenerate with -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("generator output (%d bytes) differs from %s (%d bytes); if the change is intended, rerun with -update",
			len(got), goldenPath, len(want))
	}
	if len(want) > 5<<20 {
		t.Errorf("%s is %d bytes, want < 5 MB", goldenPath, len(want))
	}
}
