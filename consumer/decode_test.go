package consumer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"denoiser/online"
)

// TestNotJSONSaysWhy: a record that is not JSON says why and where.
func TestNotJSONSaysWhy(t *testing.T) {
	for line, want := range map[string]string{
		"\xef\xbb\xbf{\"user\":\"u\",\"item\":\"i\"}": "byte-order mark",
		`{"user":"u","item":"i"} {"user":"v"}`:        "data after the first value at byte 25",
		`{"user":"u","item":`:                         "truncated at byte 19",
		`{`:                                           "pretty-printed",
		`user,item,ts`:                                "invalid character 'u' looking for beginning of value at byte 1",
	} {
		var ev Event
		err := Decode([]byte(line), &ev)
		if ReasonOf(err) != ReasonNotJSON || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%q) = %v, want not_json saying %q", line, err, want)
		}
	}
}

func TestDecode(t *testing.T) {
	long := strings.Repeat("x", MaxIDBytes+1)
	max := strings.Repeat("x", MaxIDBytes)
	tests := []struct {
		name   string
		line   string
		want   Event
		reason Reason // "" when the line is good
		field  string
	}{
		{name: "full", line: `{"user":"u1","item":"i9","ts":1700000000000,"event":"click","dwell_ms":8300,"rating":4,"truth":"noise"}`,
			want: Event{User: "u1", Item: "i9", TS: 1700000000000, HasTS: true, Kind: "click", DwellMS: 8300, HasDwell: true, Rating: 4, HasRating: true, Truth: TruthNoise}},
		{name: "minimal", line: `{"user":"u","item":"i"}`, want: Event{User: "u", Item: "i"}},
		{name: "numeric ids", line: `{"user":42,"item":-7}`, want: Event{User: "42", Item: "-7"}},
		{name: "numeric id keeps its literal", line: `{"user":1.50,"item":1e3}`, want: Event{User: "1.50", Item: "1e3"}},
		{name: "whitespace and CR", line: " \t{ \"user\" : \"u\" , \"item\" : \"i\" }\r", want: Event{User: "u", Item: "i"}},
		{name: "escapes", line: `{"user":"a\"b\u00e9","item":"\ud83d\ude00"}`, want: Event{User: "a\"bé", Item: "😀"}},
		{name: "escaped key", line: `{"us\u0065r":"u","item":"i"}`, want: Event{User: "u", Item: "i"}},
		{name: "other fields kept as they came", line: `{"user":"u","session_id":"s1","item":"i","extra":{"a":[1,{"b":"}"}]},"n":null, "page" : 3e0}`,
			want: Event{User: "u", Item: "i", Extra: []byte(`"session_id":"s1","extra":{"a":[1,{"b":"}"}]},"n":null,"page" : 3e0`)}},
		{name: "output fields replaced", line: `{"user":"u","item":"i","p_clean":0.3,"source":{"file":"f"},"x":1}`, want: Event{User: "u", Item: "i", Extra: []byte(`"x":1`)}},
		{name: "nulls mean absent", line: `{"user":"u","item":"i","ts":null,"event":null,"dwell_ms":null,"rating":null,"truth":null}`, want: Event{User: "u", Item: "i"}},
		{name: "last duplicate wins", line: `{"user":"a","user":"b","item":"i"}`, want: Event{User: "b", Item: "i"}},
		{name: "bad UTF-8 in other members becomes U+FFFD", line: "{\"user\":\"u\",\"item\":\"i\",\"note\":\"bad\xff\xfebyte\",\"k\xc3\":1}",
			want: Event{User: "u", Item: "i", Extra: []byte("\"note\":\"bad\uFFFDbyte\",\"k\uFFFD\":1")}},
		{name: "keys are case-sensitive", line: `{"User":"a","user":"b","item":"i"}`, want: Event{User: "b", Item: "i", Extra: []byte(`"User":"a"`)}},
		{name: "unix seconds", line: `{"user":"u","item":"i","ts":1700000000}`, want: Event{User: "u", Item: "i", TS: 1700000000000, HasTS: true}},
		{name: "unix seconds with a fraction, rounded to the ms", line: `{"user":"u","item":"i","ts":1700000000.1236}`, want: Event{User: "u", Item: "i", TS: 1700000000124, HasTS: true}},
		{name: "the least unix seconds", line: `{"user":"u","item":"i","ts":100000000}`, want: Event{User: "u", Item: "i", TS: 100000000000, HasTS: true}},
		{name: "below it, milliseconds", line: `{"user":"u","item":"i","ts":99999999}`, want: Event{User: "u", Item: "i", TS: 99999999, HasTS: true}},
		{name: "unix microseconds, truncated", line: `{"user":"u","item":"i","ts":1700000000123999}`, want: Event{User: "u", Item: "i", TS: 1700000000123, HasTS: true}},
		{name: "unix nanoseconds, truncated", line: `{"user":"u","item":"i","ts":1700000000123456789}`, want: Event{User: "u", Item: "i", TS: 1700000000123, HasTS: true}},
		{name: "rfc3339 ts", line: `{"user":"u","item":"i","ts":"2023-11-14T22:13:20Z"}`, want: Event{User: "u", Item: "i", TS: 1700000000000, HasTS: true}},
		{name: "rfc3339 ts with offset and fraction", line: `{"user":"u","item":"i","ts":"2023-11-15T00:13:20.5+02:00"}`, want: Event{User: "u", Item: "i", TS: 1700000000500, HasTS: true}},
		{name: "sql-style ts with UTC (REES46)", line: `{"user":"u","item":"i","ts":"2023-11-14 22:13:20 UTC"}`, want: Event{User: "u", Item: "i", TS: 1700000000000, HasTS: true}},
		{name: "sql-style ts without a zone, read as UTC", line: `{"user":"u","item":"i","ts":"2023-11-14 22:13:20"}`, want: Event{User: "u", Item: "i", TS: 1700000000000, HasTS: true}},
		{name: "sql-style ts with an offset and a fraction", line: `{"user":"u","item":"i","ts":"2023-11-15 00:13:20.25+0200"}`, want: Event{User: "u", Item: "i", TS: 1700000000250, HasTS: true}},
		{name: "iso ts with a basic offset and a fraction (Java's SimpleDateFormat Z)", line: `{"user":"u","item":"i","ts":"2023-11-15T00:13:20.123+0200"}`, want: Event{User: "u", Item: "i", TS: 1700000000123, HasTS: true}},
		{name: "rfc3339 ts in lower case (RFC 3339 allows t and z)", line: `{"user":"u","item":"i","ts":"2023-11-14t22:13:20z"}`, want: Event{User: "u", Item: "i", TS: 1700000000000, HasTS: true}},
		{name: "iso ts with a basic offset (Python's %z)", line: `{"user":"u","item":"i","ts":"2023-11-14T22:13:20+0000"}`, want: Event{User: "u", Item: "i", TS: 1700000000000, HasTS: true}},
		{name: "unix seconds as a string", line: `{"user":"u","item":"i","ts":"1700000000"}`, want: Event{User: "u", Item: "i", TS: 1700000000000, HasTS: true}},
		{name: "unix milliseconds as a string", line: `{"user":"u","item":"i","ts":"1700000000123"}`, want: Event{User: "u", Item: "i", TS: 1700000000123, HasTS: true}},
		{name: "integral float", line: `{"user":"u","item":"i","rating":4.0,"dwell_ms":1e3}`, want: Event{User: "u", Item: "i", Rating: 4, HasRating: true, DwellMS: 1000, HasDwell: true}},
		{name: "half-star rating", line: `{"user":"u","item":"i","rating":3.5}`, want: Event{User: "u", Item: "i", Rating: 3.5, HasRating: true}},
		{name: "lowest half star", line: `{"user":"u","item":"i","rating":0.5}`, want: Event{User: "u", Item: "i", Rating: 0.5, HasRating: true}},
		{name: "fractional rating in exponent form", line: `{"user":"u","item":"i","rating":275e-2}`, want: Event{User: "u", Item: "i", Rating: 2.75, HasRating: true}},
		{name: "negative zero rating is zero", line: `{"user":"u","item":"i","rating":-0.0}`, want: Event{User: "u", Item: "i", HasRating: true}},
		{name: "zero values present", line: `{"user":"u","item":"i","ts":0,"dwell_ms":0,"rating":0}`, want: Event{User: "u", Item: "i", HasTS: true, HasDwell: true, HasRating: true}},
		{name: "limits", line: `{"user":"` + max + `","item":"i","dwell_ms":86400000,"rating":100,"ts":4102444800000,"truth":"genuine"}`,
			want: Event{User: max, Item: "i", DwellMS: 86400000, HasDwell: true, Rating: 100, HasRating: true, TS: 4102444800000, HasTS: true, Truth: TruthGenuine}},

		{name: "id not UTF-8", line: "{\"user\":\"bad\xff\",\"item\":\"i\"}", reason: ReasonBadType, field: "user"},
		{name: "id with a lone high surrogate", line: `{"user":"u","item":"a\ud800"}`, reason: ReasonBadType, field: "item"},
		{name: "id with a lone low surrogate", line: `{"user":"\udc00b","item":"i"}`, reason: ReasonBadType, field: "user"},
		{name: "id with a high surrogate then no low", line: `{"user":"\ud800\u0041","item":"i"}`, reason: ReasonBadType, field: "user"},
		{name: "id with an escaped replacement character", line: `{"user":"a\ufffd","item":"\\u"}`, want: Event{User: "a\ufffd", Item: "\\u"}},

		{name: "empty object", line: `{}`, reason: ReasonMissingField, field: "user"},
		{name: "missing item", line: `{"user":"u"}`, reason: ReasonMissingField, field: "item"},
		{name: "null user", line: `{"user":null,"item":"i"}`, reason: ReasonMissingField, field: "user"},
		{name: "empty user", line: `{"user":"","item":"i"}`, reason: ReasonMissingField, field: "user"},
		{name: "blank user", line: `{"user":"   ","item":"i"}`, reason: ReasonMissingField, field: "user"},
		{name: "blank item, escaped", line: `{"user":"u","item":"\t\u0020"}`, reason: ReasonMissingField, field: "item"},

		{name: "not json", line: `user=u1 item=i9`, reason: ReasonNotJSON},
		{name: "truncated", line: `{"user":"u1","item":"i9"`, reason: ReasonNotJSON},
		{name: "trailing garbage", line: `{"user":"u1","item":"i9"} x`, reason: ReasonNotJSON},
		{name: "two objects", line: `{"user":"u1","item":"i9"}{}`, reason: ReasonNotJSON},
		{name: "NaN", line: `{"user":"u1","item":"i9","rating":NaN}`, reason: ReasonNotJSON},

		{name: "array", line: `[1,2]`, reason: ReasonBadType},
		{name: "string record", line: `"u1"`, reason: ReasonBadType},
		{name: "null record", line: `null`, reason: ReasonBadType},
		{name: "bool user", line: `{"user":true,"item":"i"}`, reason: ReasonBadType, field: "user"},
		{name: "object item", line: `{"user":"u","item":{"id":1}}`, reason: ReasonBadType, field: "item"},
		{name: "a rating quoted", line: `{"user":"u","item":"i","rating":"4"}`, want: Event{User: "u", Item: "i", Rating: 4, HasRating: true}},
		{name: "a dwell quoted", line: `{"user":"u","item":"i","dwell_ms":"8300"}`, want: Event{User: "u", Item: "i", DwellMS: 8300, HasDwell: true}},
		{name: "a numeric event code", line: `{"user":"u","item":"i","event":3}`, want: Event{User: "u", Item: "i", Kind: "3"}},
		{name: "truth in capitals", line: `{"user":"u","item":"i","truth":"Noise"}`, want: Event{User: "u", Item: "i", Truth: TruthNoise}},
		{name: "a non-number quoted rating", line: `{"user":"u","item":"i","rating":"four"}`, reason: ReasonBadType, field: "rating"},
		{name: "string dwell", line: `{"user":"u","item":"i","dwell_ms":"8s"}`, reason: ReasonBadType, field: "dwell_ms"},
		{name: "bad ts string", line: `{"user":"u","item":"i","ts":"yesterday"}`, reason: ReasonBadType, field: "ts"},
		{name: "a zone name other than UTC", line: `{"user":"u","item":"i","ts":"2023-11-14 22:13:20 PST"}`, reason: ReasonBadType, field: "ts"},
		{name: "UTC and an offset", line: `{"user":"u","item":"i","ts":"2023-11-14 22:13:20+01:00 UTC"}`, reason: ReasonBadType, field: "ts"},
		{name: "a date alone", line: `{"user":"u","item":"i","ts":"2023-11-14"}`, reason: ReasonBadType, field: "ts"},
		{name: "a number string out of range", line: `{"user":"u","item":"i","ts":"99999999999999999999999"}`, reason: ReasonOutOfRange, field: "ts"},
		{name: "bool ts", line: `{"user":"u","item":"i","ts":true}`, reason: ReasonBadType, field: "ts"},
		{name: "boolean event", line: `{"user":"u","item":"i","event":true}`, reason: ReasonBadType, field: "event"},
		{name: "bool truth, carried", line: `{"user":"u","item":"i","truth":true,"x":1}`, want: Event{User: "u", Item: "i", TruthUnread: true, Extra: []byte(`"x":1,"truth":true`)}},
		{name: "numeric truth, carried", line: `{"user":"u","item":"i","truth":1}`, want: Event{User: "u", Item: "i", TruthUnread: true, Extra: []byte(`"truth":1`)}},
		{name: "unknown truth, carried", line: `{"user":"u","item":"i","truth" : "maybe"}`, want: Event{User: "u", Item: "i", TruthUnread: true, Extra: []byte(`"truth" : "maybe"`)}},
		{name: "empty truth, carried", line: `{"user":"u","item":"i","truth":""}`, want: Event{User: "u", Item: "i", TruthUnread: true, Extra: []byte(`"truth":""`)}},
		{name: "null truth is none", line: `{"user":"u","item":"i","truth":null}`, want: Event{User: "u", Item: "i"}},

		{name: "negative dwell", line: `{"user":"u","item":"i","dwell_ms":-5}`, reason: ReasonOutOfRange, field: "dwell_ms"},
		{name: "dwell over a day", line: `{"user":"u","item":"i","dwell_ms":86400001}`, reason: ReasonOutOfRange, field: "dwell_ms"},
		{name: "fractional dwell, rounded half away from zero", line: `{"user":"u","item":"i","dwell_ms":10.5}`, want: Event{User: "u", Item: "i", DwellMS: 11, HasDwell: true}},
		{name: "a browser timer's dwell, rounded", line: `{"user":"u","item":"i","dwell_ms":8312.699999999255}`, want: Event{User: "u", Item: "i", DwellMS: 8313, HasDwell: true}},
		{name: "a quoted fractional dwell, rounded down", line: `{"user":"u","item":"i","dwell_ms":"8300.25"}`, want: Event{User: "u", Item: "i", DwellMS: 8300, HasDwell: true}},
		{name: "a dwell below zero that rounds to zero", line: `{"user":"u","item":"i","dwell_ms":-0.4}`, want: Event{User: "u", Item: "i", HasDwell: true}},
		{name: "a dwell below zero that rounds below", line: `{"user":"u","item":"i","dwell_ms":-0.5}`, reason: ReasonOutOfRange, field: "dwell_ms"},
		{name: "a dwell that rounds over a day", line: `{"user":"u","item":"i","dwell_ms":86400000.5}`, reason: ReasonOutOfRange, field: "dwell_ms"},
		{name: "a dwell just under a day's limit, rounded to it", line: `{"user":"u","item":"i","dwell_ms":86400000.4}`, want: Event{User: "u", Item: "i", DwellMS: 86400000, HasDwell: true}},
		{name: "rating over 100", line: `{"user":"u","item":"i","rating":101}`, reason: ReasonOutOfRange, field: "rating"},
		{name: "negative rating", line: `{"user":"u","item":"i","rating":-1}`, reason: ReasonOutOfRange, field: "rating"},
		{name: "rating below zero", line: `{"user":"u","item":"i","rating":-0.5}`, reason: ReasonOutOfRange, field: "rating"},
		{name: "rating just over 100", line: `{"user":"u","item":"i","rating":100.5}`, reason: ReasonOutOfRange, field: "rating"},
		{name: "a quoted rating out of range", line: `{"user":"u","item":"i","rating":"3000"}`, reason: ReasonOutOfRange, field: "rating"},
		{name: "huge rating", line: `{"user":"u","item":"i","rating":1e400}`, reason: ReasonOutOfRange, field: "rating"},
		{name: "int64 overflow", line: `{"user":"u","item":"i","ts":99999999999999999999}`, reason: ReasonOutOfRange, field: "ts"},
		{name: "negative ts", line: `{"user":"u","item":"i","ts":-1}`, reason: ReasonOutOfRange, field: "ts"},
		{name: "fractional ms, rounded half away from zero", line: `{"user":"u","item":"i","ts":1700000000000.5}`, want: Event{User: "u", Item: "i", TS: 1700000000001, HasTS: true}},
		{name: "Python's time.time()*1000, rounded", line: `{"user":"u","item":"i","ts":1700000000123.456}`, want: Event{User: "u", Item: "i", TS: 1700000000123, HasTS: true}},
		{name: "a toy stream's fractional ms, rounded", line: `{"user":"u","item":"i","ts":5.5}`, want: Event{User: "u", Item: "i", TS: 6, HasTS: true}},
		{name: "fractional microseconds", line: `{"user":"u","item":"i","ts":1700000000000000.5}`, reason: ReasonOutOfRange, field: "ts"},
		{name: "between ms and µs", line: `{"user":"u","item":"i","ts":50000000000000}`, reason: ReasonOutOfRange, field: "ts"},
		{name: "ns after 2100", line: `{"user":"u","item":"i","ts":4102444900000000000}`, reason: ReasonOutOfRange, field: "ts"},
		{name: "ts after 2100", line: `{"user":"u","item":"i","ts":4102444800001}`, reason: ReasonOutOfRange, field: "ts"},
		{name: "a zone name in lower case", line: `{"user":"u","item":"i","ts":"2023-11-14 22:13:20 pst"}`, reason: ReasonBadType, field: "ts"},
		{name: "rfc3339 before 1970", line: `{"user":"u","item":"i","ts":"1969-12-31T23:59:59Z"}`, reason: ReasonOutOfRange, field: "ts"},

		{name: "long user", line: `{"user":"` + long + `","item":"i"}`, reason: ReasonTooLarge, field: "user"},
		{name: "long numeric item", line: `{"user":"u","item":` + strings.Repeat("9", MaxIDBytes+1) + `}`, reason: ReasonTooLarge, field: "item"},
		{name: "long event", line: `{"user":"u","item":"i","event":"` + long + `"}`, reason: ReasonTooLarge, field: "event"},
		{name: "line over 1 MiB", line: `{"user":"u","item":"i","pad":"` + strings.Repeat("p", MaxLineBytes) + `"}`, reason: ReasonTooLarge},
	}
	seen := map[Reason]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev Event
			err := Decode([]byte(tt.line), &ev)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if !ev.Equal(&tt.want) {
					t.Fatalf("Decode = %+v, want %+v", ev, tt.want)
				}
				return
			}
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("Decode error = %v, want a *RecordError with reason %s", err, tt.reason)
			}
			seen[re.Reason] = true
			if re.Reason != tt.reason || re.Field != tt.field {
				t.Fatalf("Decode error reason %q field %q (%v), want %q field %q", re.Reason, re.Field, err, tt.reason, tt.field)
			}
			if ReasonOf(err) != tt.reason {
				t.Fatalf("ReasonOf = %q", ReasonOf(err))
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error message too long: %d bytes", len(err.Error()))
			}
		})
	}
	for _, r := range Reasons() {
		if r != ReasonModelRejected && !seen[r] {
			t.Errorf("no test case for reason %s", r)
		}
	}
}

// TestNotANumberSays: a numeric field's string that holds no number is
// quoted in its error (it read "is a JSON string, want a number", although
// a string holding a number is read); another kind is named.
func TestNotANumberSays(t *testing.T) {
	for line, want := range map[string]string{
		`{"user":"u","item":"i","dwell_ms":"abc"}`: `dwell_ms: "abc" is a string that holds no number`,
		`{"user":"u","item":"i","rating":"NULL"}`:  `rating: "NULL" is a string that holds no number`,
		`{"user":"u","item":"i","dwell_ms":true}`:  "dwell_ms: is a JSON boolean, want a number",
		`{"user":"u","item":"i","rating":[4]}`:     "rating: is a JSON array, want a number",
	} {
		var ev Event
		err := Decode([]byte(line), &ev)
		if ReasonOf(err) != ReasonBadType || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%s) = %v, want bad_type saying %q", line, err, want)
		}
	}
}

func TestReasonOfModelError(t *testing.T) {
	err := errors.Join(errors.New("step"), online.ErrInvalidEvent)
	if got := ReasonOf(err); got != ReasonModelRejected {
		t.Fatalf("ReasonOf(model error) = %q", got)
	}
	if got := ReasonOf(errors.New("disk full")); got != "" {
		t.Fatalf("ReasonOf(other) = %q", got)
	}
}

// TestEventModelHidesEvaluationFields: the model gets the event's fields
// and its time, never its truth; an event without a time gives none.
func TestEventModelHidesEvaluationFields(t *testing.T) {
	ev := Event{User: "u", Item: "i", TS: 5, HasTS: true, Kind: "click", DwellMS: 10, HasDwell: true, Rating: 3, HasRating: true, Truth: TruthNoise}
	want := online.Event{User: "u", Item: "i", Rating: 3, DwellMS: 10, HasDwell: true, Kind: "click", TimeMS: 5, HasTime: true}
	if got := ev.Model(); got != want {
		t.Fatalf("Model() = %+v, want %+v", got, want)
	}
	ev.TS, ev.HasTS = 0, false
	want.TimeMS, want.HasTime = 0, false
	if got := ev.Model(); got != want {
		t.Fatalf("without a time: Model() = %+v, want %+v", got, want)
	}
}

func BenchmarkDecode(b *testing.B) {
	line := []byte(`{"user":"u1234","item":"i98765","ts":1700000000000,"event":"click","dwell_ms":8300,"rating":4,"truth":"noise"}`)
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if err := Decode(line, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecoder is BenchmarkDecode with a Decoder, whose ids cache
// holds the record's ids after the first iteration.
func BenchmarkDecoder(b *testing.B) {
	benchDecoder(b, []byte(`{"user":"u1234","item":"i98765","ts":1700000000000,"event":"click","dwell_ms":8300,"rating":4,"truth":"noise"}`))
}

// benchDecoder decodes line with one Decoder, b.N times.
func benchDecoder(b *testing.B, line []byte) {
	var d Decoder
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if err := d.Decode(line, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecode checks that Decode never panics, that what it accepts is within
// the format's limits, and that an accepted event re-encoded decodes to the
// same event.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"user":"u1","item":"i9","ts":1700000000000,"event":"click","dwell_ms":8300,"rating":4,"truth":"noise"}`,
		`{"user":42,"item":-7,"ts":"2023-11-14T22:13:20Z"}`,
		`{"user":"a\"b\u00e9","item":"\ud83d\ude00","x":[{"y":"}"}]}`,
		`{"user":"u","item":"i","rating":3.5}`,
		`{"user":"u","item":"i","dwell_ms":-1}`,
		`{"user":null}`,
		`[1,2,3]`,
		`not json`,
		"{\"user\":\"\xff\",\"item\":\"i\"}",
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var ev Event
		err := Decode(line, &ev)
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) || re.Reason == "" {
				t.Fatalf("Decode error %v is not a *RecordError with a reason", err)
			}
			return
		}
		if ev.User == "" || ev.Item == "" || len(ev.User) > MaxIDBytes || len(ev.Item) > MaxIDBytes || len(ev.Kind) > MaxIDBytes {
			t.Fatalf("accepted bad ids: %+v", ev)
		}
		if ev.DwellMS < 0 || ev.DwellMS > MaxDwellMS || ev.Rating < 0 || ev.Rating > MaxRating || ev.TS < MinTS || ev.TS > MaxTS {
			t.Fatalf("accepted out-of-range values: %+v", ev)
		}
		if ev.Truth != "" && ev.Truth != TruthGenuine && ev.Truth != TruthNoise {
			t.Fatalf("accepted truth %q", ev.Truth)
		}
		// Round trip through encoding/json.
		m := map[string]any{"user": ev.User, "item": ev.Item}
		if ev.HasTS { // as RFC 3339: an integer in 10^8..10^11 ms would read back as seconds
			m["ts"] = time.UnixMilli(ev.TS).UTC().Format(time.RFC3339Nano)
		}
		if ev.Kind != "" {
			m["event"] = ev.Kind
		}
		if ev.HasDwell {
			m["dwell_ms"] = ev.DwellMS
		}
		if ev.HasRating {
			m["rating"] = ev.Rating
		}
		if ev.Truth != "" {
			m["truth"] = ev.Truth
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Extra) > 0 { // the other members, as they came
			if obj := append(append([]byte("{"), ev.Extra...), '}'); !json.Valid(obj) || !utf8.Valid(obj) {
				t.Fatalf("Extra %q is not a list of JSON members in UTF-8", ev.Extra)
			}
			b = append(append(append(b[:len(b)-1], ','), ev.Extra...), '}')
		}
		var again Event
		if err := Decode(b, &again); err != nil {
			t.Fatalf("re-encoded event %s rejected: %v", b, err)
		}
		if !again.Equal(&ev) {
			t.Fatalf("round trip: %+v != %+v (%s)", again, ev, strconv.Quote(string(b)))
		}
	})
}

// jsonVerdictCases are lines on the edges of the JSON grammar, for the
// check that Decode calls not_json exactly what json.Valid rejects.
func jsonVerdictCases() []string {
	const ok = `"user":"u","item":"i"`
	lines := []string{
		`{` + ok + `}`, `{` + ok + `,}`, `{,` + ok + `}`, `{` + ok + `,,"x":1}`, `{"user" "u","item":"i"}`,
		`{"user":"u" "item":"i"}`, `{"user":"u","item":"i"`, `{"user":"u","item":"i"}}`, `{"user":"u","item":"i"}]`,
		`{"user":"u","item":"i",}`, `{"user":"u","item":"i","x":}`, `{"user":"u","item":"i",1:2}`, `{'user':'u'}`,
		`{"user":"u","item":"i"}` + "\x00", "{\"user\":\"u\",\"item\":\"i\"}\v", "\u00a0{\"user\":\"u\",\"item\":\"i\"}\u00a0",
		"{\"user\":\"u\",\"item\":\"i\"\v}", "{\"user\":\"u\",\"item\":\"i\",\f\"x\":1}",
		// strings
		"{\"user\":\"a\x01\",\"item\":\"i\"}", "{\"user\":\"u\",\"item\":\"i\",\"x\":\"\x1f\"}", "{\"user\":\"u\",\"item\":\"i\",\"x\":\" \"}", "{\"user\":\"u\",\"item\":\"i\",\"x\x00\":1}", "{\"user\":\"a\tb\",\"item\":\"i\"}", "{\"user\":\"a\x7f\",\"item\":\"i\"}",
		`{"user":"a\q","item":"i"}`, `{"user":"a\u12","item":"i"}`, `{"user":"a\u12G4","item":"i"}`, `{"user":"a\uABcd","item":"i"}`,
		`{"user":"a\/\b\f\n\r\t\"\\","item":"i"}`, `{"user":"a\`, `{"user":"a\"`, `{"user":"a\u`, `{"user":"a\u00e`,
		"{\"user\":\"\xc3\x28\",\"item\":\"i\",\"x\":\"\xff\xfe\"}", `{"us\u0065r":"u","item":"i","\u0000":1}`, `{"user":"u","item":"i","":""}`,
		// numbers
		`{"user":0,"item":-0}`, `{"user":01,"item":1}`, `{"user":1.,"item":1}`, `{"user":.5,"item":1}`, `{"user":-,"item":1}`,
		`{"user":1e,"item":1}`, `{"user":1e+,"item":1}`, `{"user":1E-7,"item":+1}`, `{"user":1.5e+07,"item":-0.0e0}`, `{"user":--1,"item":1}`,
		`{"user":1x,"item":1}`, `{"user":0x10,"item":1}`, `{"user":Infinity,"item":1}`, `{"user":1,"item":2,"r":1.2.3}`,
		// literals
		`{"user":"u","item":"i","a":true,"b":false,"c":null}`, `{"user":"u","item":"i","a":tru}`, `{"user":"u","item":"i","a":nulll}`,
		`{"user":"u","item":"i","a":True}`, `{"user":"u","item":"i","a":n}`, `{"user":"u","item":"i","a":falsey}`,
		// nested values
		`{"user":"u","item":"i","x":[1,{"a":[]},[[]],{}]}`, `{"user":"u","item":"i","x":[1,]}`, `{"user":"u","item":"i","x":[,1]}`,
		`{"user":"u","item":"i","x":{"a"}}`, `{"user":"u","item":"i","x":{"a":1,}}`, `{"user":"u","item":"i","x":[1 2]}`,
		`{"user":"u","item":"i","x":[}`, `{"user":"u","item":"i","x":{]}`, `{"user":"u","item":"i","x":[[[`, `{"user":"u","item":"i","x":{"a":{"b":`,
		// not objects, and nothing
		``, ` `, `[]`, `[1,]`, `"s"`, `"s`, `1`, `01`, `true`, `nul`, `}`, `{`, `{}`, `{ }`, `{}{}`, `{} x`,
	}
	deep := func(n int, open, end string) string {
		return `{"user":"u","item":"i","x":` + strings.Repeat(open, n-1) + strings.Repeat(end, n-1) + `}`
	}
	// The record's object is the first level: maxDepth levels are valid, one more is not.
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		lines = append(lines, deep(n, "[", "]"), deep(n, `{"a":`, "}"))
	}
	return lines
}

// TestDecodeJudgesJSONAsEncodingJSON: Decode checks the JSON as it parses
// it; it must call not_json exactly the records json.Valid rejects, and
// find every valid record's fields as before.
func TestDecodeJudgesJSONAsEncodingJSON(t *testing.T) {
	for _, line := range jsonVerdictCases() {
		checkJSONVerdict(t, []byte(line))
	}
}

func checkJSONVerdict(t *testing.T, line []byte) {
	t.Helper()
	var ev Event
	err := Decode(line, &ev)
	if len(line) > MaxLineBytes {
		return
	}
	valid := json.Valid(bytes.TrimSpace(line))
	if got := ReasonOf(err) == ReasonNotJSON; got == valid {
		t.Fatalf("Decode(%.80q) = %v; json.Valid says %v", line, err, valid)
	}
}

// TestDecoderReusesIDs: a Decoder returns the same events and errors as
// Decode, allocates nothing for ids it saw shortly before, and its
// strings do not change when the record's bytes are overwritten.
func TestDecoderReusesIDs(t *testing.T) {
	line := []byte(`{"user":"u1","item":"i9","ts":1700000000000,"event":"click","dwell_ms":8300,"rating":4,"truth":"noise"}`)
	var d Decoder
	var ev Event
	if err := d.Decode(line, &ev); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if err := d.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("Decoder.Decode of a record seen before: %v allocations, want 0", allocs)
	}
	var plain Event
	if err := Decode(line, &plain); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = Decode(line, &plain) }); allocs != 3 {
		t.Fatalf("Decode: %v allocations, want 3 (user, item, event)", allocs)
	}
	if !ev.Equal(&plain) {
		t.Fatalf("Decoder: %+v, Decode: %+v", ev, plain)
	}
	copy(line, bytes.Repeat([]byte{'#'}, len(line))) // the source reuses its buffer
	if ev.User != "u1" || ev.Item != "i9" || ev.Kind != "click" {
		t.Fatalf("the decoded ids changed with the record's bytes: %+v", ev)
	}
	for i := range 3 * internSlots { // many ids: the cache forgets, the ids stay right
		l := fmt.Appendf(nil, `{"user":%d,"item":"i%d","event":"e%d"}`, i, i%internSlots, i%7)
		if err := d.Decode(l, &ev); err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(i); ev.User != want || ev.Item != "i"+strconv.Itoa(i%internSlots) || ev.Kind != "e"+strconv.Itoa(i%7) {
			t.Fatalf("record %d decoded as %+v", i, ev)
		}
	}
}

// FuzzDecodeJSONVerdict checks, on any input, that Decode rejects as
// not_json exactly what json.Valid rejects, and that a Decoder (its
// cache warm from the record itself and from the seeds) decodes exactly
// as Decode.
func FuzzDecodeJSONVerdict(f *testing.F) {
	for _, line := range jsonVerdictCases() {
		if len(line) < 1000 {
			f.Add([]byte(line))
		}
	}
	var d Decoder
	f.Fuzz(func(t *testing.T, line []byte) {
		checkJSONVerdict(t, line)
		var want, got Event
		wantErr := Decode(line, &want)
		for range 2 {
			err := d.Decode(line, &got)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || wantErr == nil && !got.Equal(&want) {
				t.Fatalf("Decoder.Decode(%q) = %+v, %v; Decode = %+v, %v", line, got, err, want, wantErr)
			}
		}
	})
}

// TestSmallInt: smallInt parses what it takes as strconv.ParseInt does,
// and leaves to it what it does not take.
func TestSmallInt(t *testing.T) {
	for _, v := range []string{"0", "-0", "7", "-7", "1700000000000", "999999999999999999", "-999999999999999999",
		"1000000000000000000", "9223372036854775807", "-9223372036854775808", "99999999999999999999", "-", "", "1.0", "1e3", "12a"} {
		n, ok := smallInt([]byte(v))
		want, err := strconv.ParseInt(v, 10, 64)
		digits := strings.TrimPrefix(v, "-")
		if takes := err == nil && len(digits) <= 18; ok != takes || ok && n != want {
			t.Errorf("smallInt(%q) = %d, %v; ParseInt = %d, %v", v, n, ok, want, err)
		}
	}
}

// TestArenaSlicesDoNotOverlap: the slices a fetch's values are copied
// into are each of the length asked for, and writing one, or appending to
// it, leaves the others as they were.
func TestArenaSlicesDoNotOverlap(t *testing.T) {
	var a arena
	var vs [][]byte
	for i := range 3000 { // several blocks, and a value larger than a quarter block
		n := 1 + i%200
		if i == 1500 {
			n = arenaBlock/4 + 1
		}
		v := a.next(n)
		if len(v) != n {
			t.Fatalf("value %d has %d bytes, want %d", i, len(v), n)
		}
		for j := range v {
			v[j] = byte(i)
		}
		vs = append(vs, v)
	}
	_ = append(vs[10], 0xff) // must not write into the next value
	for i, v := range vs {
		for _, c := range v {
			if c != byte(i) {
				t.Fatalf("value %d was overwritten", i)
			}
		}
	}
}

// TestDecodeUnread: a member named as another format names a field
// ("timestamp", "user_id") is not read as the field; it is carried through
// and marked in Event.Unread when the record lacks the field, and a
// missing user or item names it. Marking allocates nothing.
func TestDecodeUnread(t *testing.T) {
	bit := func(name string) uint32 {
		for i, a := range Aliases {
			if a.Name == name {
				return 1 << i
			}
		}
		t.Fatalf("%s is not in Aliases", name)
		return 0
	}
	for _, tc := range []struct {
		name, line string
		unread     uint32
	}{
		{"a time named timestamp", `{"user":"u","item":"i","timestamp":1700000000}`, bit("timestamp")},
		{"and ts too", `{"user":"u","item":"i","timestamp":1700000000,"ts":1700000000}`, 0},
		{"Taobao's names", `{"user":"u","item":"i","behavior_type":"pv","time":1511544070,"dwell":3}`, bit("behavior_type") | bit("time") | bit("dwell")},
		{"types and dwell present", `{"user":"u","item":"i","event":"pv","action":"x","dwell_ms":3,"duration":9,"ts":1}`, 0},
		{"no alias", `{"user":"u","item":"i","session_id":"s","page":3}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev Event
			if err := Decode([]byte(tc.line), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Unread != tc.unread {
				t.Errorf("Unread %b, want %b", ev.Unread, tc.unread)
			}
			if tc.unread&bit("timestamp") != 0 && (ev.HasTS || !bytes.Contains(ev.Extra, []byte(`"timestamp":1700000000`))) {
				t.Errorf("timestamp read as the time, or not carried: %+v", ev)
			}
		})
	}
	var ev Event
	err := Decode([]byte(`{"user_id":"u","item":"i"}`), &ev)
	if ReasonOf(err) != ReasonMissingField || !strings.Contains(err.Error(), `the record has "user_id": rename it "user"`) {
		t.Errorf("user_id without user: %v", err)
	}
	err = Decode([]byte(`{"user":"u","product_id":"i"}`), &ev)
	if ReasonOf(err) != ReasonMissingField || !strings.Contains(err.Error(), `"product_id"`) {
		t.Errorf("product_id without item: %v", err)
	}
	var d Decoder
	line := []byte(`{"user":"u","item":"i","timestamp":1700000000,"event_type":"click"}`)
	if allocs := testing.AllocsPerRun(100, func() { _ = d.Decode(line, &ev) }); allocs != 0 || ev.Unread != bit("timestamp")|bit("event_type") {
		t.Errorf("%v allocations, Unread %b", allocs, ev.Unread)
	}
}

// BenchmarkDecoderExtras is BenchmarkDecoder on a record with four
// members the event format does not name (carried through, and looked up
// among Aliases).
func BenchmarkDecoderExtras(b *testing.B) {
	benchDecoder(b, []byte(`{"user":"u1234","item":"i98765","ts":1700000000000,"event":"click","dwell_ms":8300,"session_id":"s-42","page":"home","position":3,"device":"ios"}`))
}

// TestDecodeHugeIntegerIsOutOfRange: a number past float64's range
// (1e400) in an integer field is said to be outside the field's range,
// not "not an integer" (ParseFloat's ErrRange).
func TestDecodeHugeIntegerIsOutOfRange(t *testing.T) {
	for _, v := range []string{"1e400", "-1e400"} {
		var ev Event
		err := Decode([]byte(`{"user":"u","item":"i","dwell_ms":`+v+`}`), &ev)
		if err == nil || !strings.Contains(err.Error(), v+" is outside 0..") {
			t.Errorf("dwell_ms %s: %v, want it outside the range", v, err)
		}
	}
}

// TestDecodeShadowed: a field read from another member (Fields) that the
// record lacks, while it carries the field under the event format's own
// name, is marked (Event.Shadowed): that member is not read. A record
// with the named member, or without either, is not.
func TestDecodeShadowed(t *testing.T) {
	d := NewDecoder(Fields{TS: "timestamp", User: "user_id"})
	ts, user := uint8(1)<<fieldTS, uint8(1)<<fieldUser
	for _, tc := range []struct {
		name, line string
		shadowed   uint8
		hasTS      bool
	}{
		{"ts, no timestamp", `{"user_id":"u","item":"i","ts":1700000000000}`, ts, false},
		{"both", `{"user_id":"u","item":"i","ts":1,"timestamp":1700000000000}`, 0, true},
		{"timestamp only", `{"user_id":"u","item":"i","timestamp":1700000000000}`, 0, true},
		{"neither", `{"user_id":"u","item":"i"}`, 0, false},
		{"user, no user_id", `{"user":"u","item":"i","ts":1700000000000}`, ts | user, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev Event
			err := d.Decode([]byte(tc.line), &ev)
			if ev.Shadowed != tc.shadowed || ev.HasTS != tc.hasTS {
				t.Errorf("Shadowed %b HasTS %v (err %v), want %b and %v", ev.Shadowed, ev.HasTS, err, tc.shadowed, tc.hasTS)
			}
			if tc.shadowed&user != 0 && ReasonOf(err) != ReasonMissingField {
				t.Errorf("user read from user_id, missing: %v", err)
			}
		})
	}
	var plain Event
	if err := Decode([]byte(`{"user":"u","item":"i","ts":1700000000000}`), &plain); err != nil || plain.Shadowed != 0 {
		t.Errorf("the event format's own names: Shadowed %b, %v", plain.Shadowed, err)
	}
}

// TestDecodeMarksReplaced: members named like an output field are left
// out of Extra and marked, a bit per OutputFields entry, whatever the
// Fields setting.
func TestDecodeMarksReplaced(t *testing.T) {
	line := []byte(`{"user":"u","item":"i","p_clean":0.3,"source":{"file":"f"},"weight":2,"x":1}`)
	want := uint8(1<<slices.Index(OutputFields, "p_clean") | 1<<slices.Index(OutputFields, "source") | 1<<slices.Index(OutputFields, "weight"))
	named := NewDecoder(Fields{TS: "when"})
	for _, d := range []*Decoder{{}, &named} {
		var ev Event
		if err := d.Decode(line, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Replaced != want || string(ev.Extra) != `"x":1` {
			t.Errorf("Replaced %08b, Extra %s; want %08b and \"x\":1", ev.Replaced, ev.Extra, want)
		}
		if err := d.Decode([]byte(`{"user":"u","item":"i"}`), &ev); err != nil || ev.Replaced != 0 {
			t.Errorf("a record without them: Replaced %08b (%v)", ev.Replaced, err)
		}
	}
}
