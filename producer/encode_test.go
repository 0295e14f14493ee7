package producer

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
)

func TestAppendScored(t *testing.T) {
	tests := []struct {
		name string
		r    consumer.Result
		want string
	}{
		{
			name: "all fields",
			r: consumer.Result{
				Pos: input.Position{File: "in.jsonl", Line: 42},
				Event: consumer.Event{User: "u1", Item: "i9", TS: 1700000000000, HasTS: true, Kind: "click",
					DwellMS: 8300, HasDwell: true, Rating: 4, HasRating: true, Truth: "noise"},
				Score: online.Score{Weight: 0.25, Reliability: 0.93, PClean: 1.0 / 3, Posterior: []float64{2.0 / 3, 1.0 / 3}, Label: 1, Distilled: -1, Version: 41},
			},
			want: `{"user":"u1","item":"i9","ts":1700000000000,"event":"click","dwell_ms":8300,"rating":4,"truth":"noise",` +
				`"weight":0.25,"reliability":0.93,"p_clean":0.333333333,"clean_posterior":[0.666666667,0.333333333],` +
				`"label":1,"distilled":null,"model_version":41,"source":{"file":"in.jsonl","line":42}}`,
		},
		{
			name: "minimal, kafka source, zero values present",
			r: consumer.Result{
				Pos:   input.Position{Topic: "clicks", Partition: 3, Offset: 1234},
				Event: consumer.Event{User: "u", Item: "i", HasTS: true, HasDwell: true, HasRating: true},
				Score: online.Score{Weight: 1e-7, Reliability: 1, PClean: 1e-7, Posterior: []float64{0, 1, 0}, Label: 2, Distilled: 0},
			},
			want: `{"user":"u","item":"i","ts":0,"dwell_ms":0,"rating":0,"weight":0.0000001,"reliability":1,"p_clean":0.0000001,"clean_posterior":[0,1,0],` +
				`"label":2,"distilled":0,"model_version":0,"source":{"topic":"clicks","partition":3,"offset":1234}}`,
		},
		{
			name: "fractional rating written back as it came",
			r: consumer.Result{
				Pos:   input.Position{File: "f", Line: 3},
				Event: consumer.Event{User: "u", Item: "i", Rating: 3.5, HasRating: true},
				Score: online.Score{Weight: 0.5, Reliability: 1, PClean: 0.5, Distilled: -1},
			},
			want: `{"user":"u","item":"i","rating":3.5,"weight":0.5,"reliability":1,"p_clean":0.5,"clean_posterior":[],` +
				`"label":0,"distilled":null,"model_version":0,"source":{"file":"f","line":3}}`,
		},
		{
			name: "other input fields carried through",
			r: consumer.Result{
				Pos:   input.Position{File: "f", Line: 2},
				Event: consumer.Event{User: "u", Item: "i", Truth: "noise", Extra: []byte(`"session_id":"s1","page" : 3e0`)},
				Score: online.Score{Weight: 0.25, Reliability: 0.5, PClean: 0.25, Distilled: -1},
			},
			want: `{"user":"u","item":"i","truth":"noise","session_id":"s1","page" : 3e0,"weight":0.25,"reliability":0.5,"p_clean":0.25,"clean_posterior":[],` +
				`"label":0,"distilled":null,"model_version":0,"source":{"file":"f","line":2}}`,
		},
		{
			name: "escapes and non-finite",
			r: consumer.Result{
				Pos:   input.Position{File: "a\"b", Line: 1},
				Event: consumer.Event{User: "q\"\\\n\t\x01é\u2028", Item: "bad\xffutf8"},
				Score: online.Score{Weight: math.NaN(), Reliability: math.NaN(), PClean: math.Inf(1), Distilled: -1},
			},
			want: `{"user":"q\"\\\n\t\u0001é\u2028","item":"bad\ufffdutf8","weight":null,"reliability":null,"p_clean":null,"clean_posterior":[],` +
				`"label":0,"distilled":null,"model_version":0,"source":{"file":"a\"b","line":1}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendScored(nil, &tt.r))
			if got != tt.want {
				t.Fatalf("AppendScored =\n%s\nwant\n%s", got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatal("not valid JSON")
			}
			if again := string(AppendScored([]byte("prefix"), &tt.r)); again != "prefix"+tt.want {
				t.Fatal("not deterministic or does not append")
			}
		})
	}
}

func TestAppendScoredDecodesBack(t *testing.T) {
	for _, tt := range []struct{ line, rating string }{
		{`{"user":"u1","item":"i9","ts":1700000000000,"event":"click","dwell_ms":8300,"rating":4,"truth":"noise"}`, `"rating":4,`},
		{`{"user":"u1","item":"i9","rating":3.5}`, `"rating":3.5,`},
		{`{"user":"u1","item":"i9","rating":4.0}`, `"rating":4,`},
		{`{"user":"u1","item":"i9","rating":0.5}`, `"rating":0.5,`},
		{`{"user":"u1","item":"i9","rating":1e-7}`, `"rating":0.0000001,`},
	} {
		r := consumer.Result{Pos: input.Position{File: "f", Line: 1}, Score: online.Score{Distilled: -1}}
		if err := consumer.Decode([]byte(tt.line), &r.Event); err != nil {
			t.Fatal(err)
		}
		out := AppendScored(nil, &r)
		if !strings.Contains(string(out), tt.rating) {
			t.Errorf("%s: scored record %s does not hold %s", tt.line, out, tt.rating)
		}
		var back consumer.Event
		if err := consumer.Decode(out, &back); err != nil {
			t.Fatal(err)
		}
		if !back.Equal(&r.Event) {
			t.Fatalf("scored record decodes to %+v, want %+v", back, r.Event)
		}
	}
}

func TestAppendRejected(t *testing.T) {
	tests := []struct {
		name string
		r    consumer.Result
		want string
	}{
		{
			name: "text",
			r: consumer.Result{Pos: input.Position{File: "in", Line: 7}, Reason: consumer.ReasonOutOfRange,
				Err: &consumer.RecordError{Reason: consumer.ReasonOutOfRange, Field: "dwell_ms", Msg: "-5 is outside 0..86400000"},
				Raw: []byte(`{"user":"u","dwell_ms":-5}`), RawSize: 26},
			want: `{"reason":"out_of_range","error":"dwell_ms: -5 is outside 0..86400000","source":{"file":"in","line":7},"raw":"{\"user\":\"u\",\"dwell_ms\":-5}"}`,
		},
		{
			name: "binary, truncated, kafka",
			r: consumer.Result{Pos: input.Position{Topic: "t", Offset: 5}, Reason: consumer.ReasonModelRejected,
				Err: errors.New("invalid event: no rating"), Raw: []byte{0xff, 0xfe, 'a'}, RawSize: 1 << 21},
			want: `{"reason":"model_rejected","error":"invalid event: no rating","source":{"topic":"t","partition":0,"offset":5},"raw_base64":"//5h","raw_truncated":true,"raw_bytes":2097152}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendRejected(nil, &tt.r))
			if got != tt.want {
				t.Fatalf("AppendRejected =\n%s\nwant\n%s", got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatal("not valid JSON")
			}
		})
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "\"\\/", "\x00\x1f\x7f", "é😀", "\u2028\u2029", "a\xffb\xc3", strings.Repeat("ab\n", 100)} {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q -> %s: %v", s, got, err)
		}
		want, _ := json.Marshal(s) // encoding/json also replaces invalid UTF-8
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q -> %s decodes to %q, want %q", s, got, back, wantBack)
		}
	}
}

func BenchmarkAppendScored(b *testing.B) {
	r := consumer.Result{
		Pos:   input.Position{File: "in.jsonl", Line: 42},
		Event: consumer.Event{User: "u1234", Item: "i98765", TS: 1700000000000, HasTS: true, Kind: "click", DwellMS: 8300, HasDwell: true, Truth: "noise"},
		Score: online.Score{Reliability: 0.9312, PClean: 0.81234, Posterior: []float64{0.18766, 0.81234}, Label: 1, Distilled: 1, Version: 41},
	}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendScored(buf[:0], &r)
	}
}

// TestAppendFloatAsStrconv: appendFloat's shortcut writes what
// strconv.AppendFloat(f, 'g', -1, 64) writes, so the output's bytes do not
// depend on it.
func TestAppendFloatAsStrconv(t *testing.T) {
	for _, f := range []float64{1, 0, math.Copysign(0, -1), 0.5, 1e-7, math.Nextafter(1, 0), math.Nextafter(1, 2), 0.9851065252247957, 2, -1} {
		want := strconv.AppendFloat(nil, f, 'g', -1, 64)
		if got := appendFloat(nil, f); string(got) != string(want) {
			t.Errorf("appendFloat(%v) = %s, want %s", f, got, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := appendFloat(nil, f); string(got) != "null" {
			t.Errorf("appendFloat(%v) = %s, want null", f, got)
		}
	}
}

// TestAppendProbability: a probability is written at the nearest multiple
// of 10⁻⁹ in as few decimals as that takes, and reads back within half of
// one; a value outside [0, 1] as appendFloat writes it.
func TestAppendProbability(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {0.5, "0.5"}, {0.25, "0.25"},
		{0.9824763424086344, "0.982476342"}, {0.9824763425086344, "0.982476343"},
		{1e-9, "0.000000001"}, {4e-10, "0"}, {6e-10, "0.000000001"}, {1 - 4e-10, "1"},
		{0.1, "0.1"}, {0.123456789, "0.123456789"}, {0.1000000004, "0.1"},
		{2, "2"}, {-0.5, "-0.5"}, {math.NaN(), "null"}, {math.Inf(1), "null"},
	} {
		if got := string(appendProbability([]byte("x"), tc.p)); got != "x"+tc.want {
			t.Errorf("appendProbability(%v) = %s, want %s", tc.p, got[1:], tc.want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		p := r.Float64()
		if r.IntN(4) == 0 {
			p = math.Pow(p, 20) // small values, where the decimals run out
		}
		got := appendProbability(nil, p)
		back, err := strconv.ParseFloat(string(got), 64)
		if err != nil || math.Abs(back-p) > 0.5000001e-9 {
			t.Fatalf("appendProbability(%v) = %s, reads back as %v (%v)", p, got, back, err)
		}
		if s := string(got); len(s) > 2+probabilityDecimals || (strings.Contains(s, ".") && strings.HasSuffix(s, "0")) {
			t.Fatalf("appendProbability(%v) = %s: too long or a trailing zero", p, s)
		}
	}
}

// BenchmarkAppendProbability: a score as the output writes it, against
// the shortest round-trip form it was written in until stop 61, in the
// same run.
func BenchmarkAppendProbability(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	ps := make([]float64, 1024)
	for i := range ps {
		ps[i] = r.Float64()
	}
	for _, c := range []struct {
		name string
		f    func([]byte, float64) []byte
	}{
		{"probability", appendProbability},
		{"shortest", func(d []byte, p float64) []byte { return strconv.AppendFloat(d, p, 'g', -1, 64) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 32)
			for i := 0; i < b.N; i++ {
				buf = c.f(buf[:0], ps[i&1023])
			}
		})
	}
}
