package movielens

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestConvertSample(t *testing.T) {
	// Out of order, with a timestamp tie broken by user then item, and a
	// blank line.
	in := "196\t242\t3\t881250949\n" +
		"186\t302\t3\t891717742\n" +
		"\n" +
		"22\t377\t1\t878887116\n" +
		"196\t51\t5\t881250949\n" +
		"12\t9\t4\t881250949\n"
	want := `{"user":"22","item":"377","ts":878887116000,"event":"rating","rating":1}
{"user":"12","item":"9","ts":881250949000,"event":"rating","rating":4}
{"user":"196","item":"51","ts":881250949000,"event":"rating","rating":5}
{"user":"196","item":"242","ts":881250949000,"event":"rating","rating":3}
{"user":"186","item":"302","ts":891717742000,"event":"rating","rating":3}
`
	var out bytes.Buffer
	st, err := Convert(context.Background(), strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	if st.Events != 5 || st.Users != 4 || st.Items != 5 {
		t.Errorf("stats = %+v, want 5 events, 4 users, 5 items", st)
	}
	if st.Ratings[3] != 2 || st.Ratings[1] != 1 || st.Ratings[4] != 1 || st.Ratings[5] != 1 || st.Ratings[2] != 0 {
		t.Errorf("rating counts = %v", st.Ratings)
	}
}

// TestConvertHalfStars: u.data may hold half stars too; the rating is
// written back in its shortest form.
func TestConvertHalfStars(t *testing.T) {
	in := "1\t2\t3.5\t100\n1\t3\t0.5\t101\n1\t4\t4.0\t102\n"
	want := `{"user":"1","item":"2","ts":100000,"event":"rating","rating":3.5}
{"user":"1","item":"3","ts":101000,"event":"rating","rating":0.5}
{"user":"1","item":"4","ts":102000,"event":"rating","rating":4}
`
	var out bytes.Buffer
	st, err := Convert(context.Background(), strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if got := st.String(); got != "3 events, 1 users, 3 items; ratings 0.5:1 3.5:1 4:1" {
		t.Errorf("stats %q", got)
	}
}

// TestConvertRatingsCSV reads the layout of MovieLens latest and 25M
// ratings.csv: a header, then userId,movieId,rating,timestamp (seconds),
// half-star ratings from 0.5 to 5.0.
func TestConvertRatingsCSV(t *testing.T) {
	in := "userId,movieId,rating,timestamp\r\n" +
		"1,307,3.5,1256677221\r\n" +
		"1,481,3.5,1256677456\r\n" +
		"\r\n" +
		"2,1091,1.5,1256677471\n" +
		"3,307,0.5,1256677221\n" +
		"3,1,5.0,1112486027\n"
	want := `{"user":"3","item":"1","ts":1112486027000,"event":"rating","rating":5}
{"user":"1","item":"307","ts":1256677221000,"event":"rating","rating":3.5}
{"user":"3","item":"307","ts":1256677221000,"event":"rating","rating":0.5}
{"user":"1","item":"481","ts":1256677456000,"event":"rating","rating":3.5}
{"user":"2","item":"1091","ts":1256677471000,"event":"rating","rating":1.5}
`
	for name, prefix := range map[string]string{"plain": "", "byte-order mark": "\ufeff"} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			st, err := Convert(context.Background(), strings.NewReader(prefix+in), &out)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != want {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
			}
			if st.Events != 5 || st.Users != 3 || st.Items != 4 || st.Ratings[3.5] != 2 || st.Ratings[0.5] != 1 || st.Ratings[5] != 1 {
				t.Errorf("stats = %v", st)
			}
		})
	}
}

func TestConvertRejectsMalformedCSV(t *testing.T) {
	const header = "userId,movieId,rating,timestamp\n"
	for _, tc := range []struct {
		name, line string
	}{
		{"three fields", "1,2,3.5"},
		{"five fields", "1,2,3.5,1256677221,x"},
		{"tab-separated after a header", "1\t2\t3.5\t1256677221"},
		{"zero rating", "1,2,0,1256677221"},
		{"word rating", "1,2,good,1256677221"},
		{"word user", "alice,2,3.5,1256677221"},
		{"negative time", "1,2,3.5,-1"},
		{"header again", "userId,movieId,rating,timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := header + "1,1,4.0,1256677221\n" + tc.line + "\n"
			_, err := Convert(context.Background(), strings.NewReader(in), &bytes.Buffer{})
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "line 3") {
				t.Fatalf("got %v, want ErrFormat at line 3", err)
			}
		})
	}
}

func TestConvertRejectsMalformedLines(t *testing.T) {
	for _, tc := range []struct {
		name, line string
	}{
		{"three fields", "1\t2\t3"},
		{"five fields", "1\t2\t3\t4\t5"},
		{"word user", "alice\t2\t3\t881250949"},
		{"zero rating", "1\t2\t0\t881250949"},
		{"negative rating", "1\t2\t-1\t881250949"},
		{"rating over 10", "1\t2\t10.5\t881250949"},
		{"hex rating", "1\t2\t0x1p1\t881250949"},
		{"exponent rating", "1\t2\t35e-1\t881250949"},
		{"NaN rating", "1\t2\tNaN\t881250949"},
		{"comma-separated without the header", "1,2,3.5,881250949"},
		{"negative id", "-1\t2\t3\t881250949"},
		{"negative time", "1\t2\t3\t-5"},
		{"huge time", "1\t2\t3\t99999999999999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := "1\t1\t1\t881250949\n" + tc.line + "\n"
			_, err := Convert(context.Background(), strings.NewReader(in), &bytes.Buffer{})
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
			if !strings.Contains(err.Error(), "line 2") {
				t.Errorf("err = %v, want it to name line 2", err)
			}
		})
	}
}

// TestConvertRatingOutOfRange: a rating that is a number outside (0, 10]
// says so, a negative one too (it said "not a decimal number").
func TestConvertRatingOutOfRange(t *testing.T) {
	for _, rating := range []string{"-1", "-0.5", "0", "11"} {
		_, err := Convert(context.Background(), strings.NewReader("1\t2\t"+rating+"\t881250949\n"), &bytes.Buffer{})
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "rating "+rating+" out of (0, 10]") {
			t.Errorf("rating %s: %v, want it out of range", rating, err)
		}
	}
	for _, rating := range []string{"-x", "--1", "-NaN", "+1"} {
		_, err := Convert(context.Background(), strings.NewReader("1\t2\t"+rating+"\t881250949\n"), &bytes.Buffer{})
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "not a decimal number") {
			t.Errorf("rating %s: %v, want it not a decimal number", rating, err)
		}
	}
}

// TestConvertGzip: a gzip-compressed u.data or ratings.csv converts as the
// file it holds (replay reads gzip; convert read its bytes as lines).
func TestConvertGzip(t *testing.T) {
	for _, text := range []string{"196\t242\t3\t881250949\n186\t302\t3\t891717742\n", CSVHeader + "\n1,2,3.5,1256677221\n"} {
		var want bytes.Buffer
		if _, err := Convert(context.Background(), strings.NewReader(text), &want); err != nil {
			t.Fatal(err)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		if _, err := zw.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := Convert(context.Background(), bytes.NewReader(gz.Bytes()), &got); err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("gzip: %v\n%s\nwant\n%s", err, got.Bytes(), want.Bytes())
		}
		_, err := Convert(context.Background(), bytes.NewReader(gz.Bytes()[:gz.Len()-10]), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
			t.Errorf("gzip cut short: %v, want an error", err)
		}
	}
}

// TestConvertEmpty: an input without a rating is an error, not an empty
// output that looks converted.
func TestConvertEmpty(t *testing.T) {
	for _, text := range []string{"", "\n\n", CSVHeader + "\n", "\ufeff" + CSVHeader + "\n\n"} {
		var out bytes.Buffer
		if _, err := Convert(context.Background(), strings.NewReader(text), &out); !errors.Is(err, ErrNoRatings) || out.Len() != 0 {
			t.Errorf("%q: %v, wrote %q; want ErrNoRatings and nothing", text, err, out.Bytes())
		}
	}
}

func TestConvertIsDeterministic(t *testing.T) {
	in := "5\t1\t2\t10\n4\t1\t2\t10\n4\t0\t2\t10\n1\t1\t1\t9\n"
	var a, b bytes.Buffer
	if _, err := Convert(context.Background(), strings.NewReader(in), &a); err != nil {
		t.Fatal(err)
	}
	// The same ratings in another input order give the same stream.
	perm := "4\t0\t2\t10\n1\t1\t1\t9\n5\t1\t2\t10\n4\t1\t2\t10\n"
	if _, err := Convert(context.Background(), strings.NewReader(perm), &b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("input order changed the output:\n%s\nvs\n%s", a.String(), b.String())
	}
}

// ml100k is the real MovieLens 100k file, shipped beside the repository;
// DENOISER_ML100K overrides the path.
func ml100k() string {
	if p := os.Getenv("DENOISER_ML100K"); p != "" {
		return p
	}
	return "../../../shared/datasets/ml-100k/u.data"
}

func TestConvertML100k(t *testing.T) {
	f, err := os.Open(ml100k())
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s not present", ml100k())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	st, err := Convert(context.Background(), f, &out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != 100_000 || st.Users != 943 || st.Items != 1682 {
		t.Errorf("stats = %v, want 100000 events, 943 users, 1682 items", st)
	}
	want := map[float64]int{1: 6110, 2: 11370, 3: 27145, 4: 34174, 5: 21201}
	for r, n := range want {
		if st.Ratings[r] != n {
			t.Errorf("rating %v: %d events, want %d", r, st.Ratings[r], n)
		}
	}
	if len(st.Ratings) != len(want) {
		t.Errorf("rating values = %v, want exactly 1..5", st.Ratings)
	}

	// Every line decodes, has no truth, and the stream is chronological.
	sc := bufio.NewScanner(&out)
	var (
		n    int
		last int64
	)
	for sc.Scan() {
		n++
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if _, ok := e["truth"]; ok {
			t.Fatalf("line %d has a truth field: %s", n, sc.Bytes())
		}
		if e["event"] != "rating" {
			t.Fatalf("line %d: event %v, want rating", n, e["event"])
		}
		ts := int64(e["ts"].(float64))
		if ts < last || ts%1000 != 0 {
			t.Fatalf("line %d: ts %d after %d", n, ts, last)
		}
		last = ts
	}
	if n != 100_000 {
		t.Errorf("%d lines, want 100000", n)
	}
}

// FuzzRead: any input either fails with ErrFormat (or a scanner error) or
// yields ratings whose events are valid JSON with the parsed values.
func FuzzRead(f *testing.F) {
	f.Add("196\t242\t3\t881250949\n")
	f.Add("1 2 3 4\n\n5 6 7 8")
	f.Add("x\ty\n")
	f.Add("userId,movieId,rating,timestamp\n1,2,3.5,1112486027\n")
	f.Fuzz(func(t *testing.T, in string) {
		rs, err := Read(context.Background(), strings.NewReader(in))
		if err != nil {
			return
		}
		for _, r := range rs {
			var e struct {
				User, Item string
				TS         int64
				Rating     float64
			}
			if err := json.Unmarshal(r.AppendJSON(nil), &e); err != nil {
				t.Fatalf("rating %+v encodes to invalid JSON: %v", r, err)
			}
			if e.TS != r.Seconds*1000 || e.Rating != r.Rating {
				t.Fatalf("rating %+v round-trips to %+v", r, e)
			}
		}
	})
}
