package consumer

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"denoiser/online"
)

// Limits of the event format.
const (
	MaxLineBytes = 1 << 20          // a record longer than 1 MiB is too_large
	MaxIDBytes   = 256              // user, item and event longer than this are too_large
	MaxDwellMS   = 24 * 3600 * 1000 // one day
	MaxRating    = 100
	// MinTS and MaxTS bound ts: 1970-01-01 .. 2100-01-01 (unix ms).
	MinTS = 0
	MaxTS = 4102444800000
)

// Reason classifies why a record was rejected. The set is small and fixed so
// that it can be used as a metric label.
type Reason string

// Reasons a record is dead-lettered.
const (
	ReasonNotJSON       Reason = "not_json"       // not valid JSON
	ReasonMissingField  Reason = "missing_field"  // user or item absent, null or empty
	ReasonBadType       Reason = "bad_type"       // a field, or the record, has the wrong JSON type
	ReasonOutOfRange    Reason = "out_of_range"   // a value outside its sane range, a non-integer count, an unknown enum value
	ReasonTooLarge      Reason = "too_large"      // the record or an id is over its size limit
	ReasonModelRejected Reason = "model_rejected" // the model refused the event (it does not fit the label mode)
)

// Reasons returns every Reason, in a fixed order.
func Reasons() []Reason {
	return []Reason{ReasonNotJSON, ReasonMissingField, ReasonBadType, ReasonOutOfRange, ReasonTooLarge, ReasonModelRejected}
}

// RecordError describes why one record was rejected. Bad records are data,
// not failures: the loop routes them to the dead-letter sink and goes on.
type RecordError struct {
	Reason Reason
	Field  string // the offending field, "" when the record as a whole is bad
	Msg    string
	Err    error // the underlying error, if any (for model_rejected: the model's)
}

func (e *RecordError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

func (e *RecordError) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of a record-level error: the Reason of a
// *RecordError in err's chain, ReasonModelRejected for an error wrapping
// online.ErrInvalidEvent, and "" otherwise.
func ReasonOf(err error) Reason {
	var re *RecordError
	if errors.As(err, &re) {
		return re.Reason
	}
	if errors.Is(err, online.ErrInvalidEvent) {
		return ReasonModelRejected
	}
	return ""
}

func reject(r Reason, field, msg string) error {
	return &RecordError{Reason: r, Field: field, Msg: msg}
}

// Decode parses one JSON line into ev, overwriting it, and validates it. A
// bad line returns a *RecordError; ev is then unspecified. Keys are matched
// exactly (case-sensitive); other keys are kept, as they came, in
// ev.Extra; for a repeated key the last value wins; null means absent.
// Decode does not retain line.
func Decode(line []byte, ev *Event) error {
	*ev = Event{Extra: ev.Extra[:0]}
	if len(line) > MaxLineBytes {
		return reject(ReasonTooLarge, "", "record of "+strconv.Itoa(len(line))+" bytes is over the limit of "+strconv.Itoa(MaxLineBytes))
	}
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		return reject(ReasonNotJSON, "", notJSON(line))
	}
	if line[0] != '{' {
		return reject(ReasonBadType, "", "record is a JSON "+kindOf(line)+", want an object")
	}
	var user, item, ts, kind, dwell, rating, truth []byte
	s := scanner{b: line, i: 1}
	for {
		s.space()
		if s.b[s.i] == '}' {
			break
		}
		if s.b[s.i] == ',' {
			s.i++
			s.space()
		}
		memberStart := s.i
		key := s.value()
		if bytes.IndexByte(key, '\\') >= 0 { // an escaped key: compare its decoded form
			k, _ := decodeString(key)
			key = strconv.AppendQuote(nil, k)
		}
		s.space()
		s.i++ // ':'
		s.space()
		val := s.value()
		member := s.b[memberStart:s.i]
		if bytes.Equal(val, nullLit) {
			val = nil
		}
		switch string(key) { // no allocation: the compiler converts in place
		case `"user"`:
			user = val
		case `"item"`:
			item = val
		case `"ts"`:
			ts = val
		case `"event"`:
			kind = val
		case `"dwell_ms"`:
			dwell = val
		case `"rating"`:
			rating = val
		case `"truth"`:
			truth = val
		default:
			if !isOutputField(key) {
				if len(ev.Extra) > 0 {
					ev.Extra = append(ev.Extra, ',')
				}
				ev.Extra = append(ev.Extra, member...)
			}
		}
		s.space()
	}

	var err error
	if ev.User, err = decodeID("user", user); err != nil {
		return err
	}
	if ev.Item, err = decodeID("item", item); err != nil {
		return err
	}
	if ts != nil {
		if ev.TS, err = decodeTS(ts); err != nil {
			return err
		}
		ev.HasTS = true
	}
	if kind != nil {
		if kind[0] != '"' {
			return reject(ReasonBadType, "event", "is a JSON "+kindOf(kind)+", want a string")
		}
		if ev.Kind, err = decodeString(kind); err != nil {
			return err
		}
		if len(ev.Kind) > MaxIDBytes {
			return reject(ReasonTooLarge, "event", strconv.Itoa(len(ev.Kind))+" bytes, over the limit of "+strconv.Itoa(MaxIDBytes))
		}
	}
	if dwell != nil {
		if ev.DwellMS, err = decodeInt("dwell_ms", dwell, 0, MaxDwellMS); err != nil {
			return err
		}
		ev.HasDwell = true
	}
	if rating != nil {
		if ev.Rating, err = decodeRating(rating); err != nil {
			return err
		}
		ev.HasRating = true
	}
	if truth != nil {
		if truth[0] != '"' {
			return reject(ReasonBadType, "truth", "is a JSON "+kindOf(truth)+", want a string")
		}
		switch {
		case bytes.Equal(truth, []byte(`"`+TruthGenuine+`"`)):
			ev.Truth = TruthGenuine
		case bytes.Equal(truth, []byte(`"`+TruthNoise+`"`)):
			ev.Truth = TruthNoise
		default:
			return reject(ReasonOutOfRange, "truth", clip(truth)+" is not \"genuine\" or \"noise\"")
		}
	}
	return nil
}

var nullLit = []byte("null")

// bom is the UTF-8 byte-order mark.
var bom = []byte{0xef, 0xbb, 0xbf}

// notJSON says why line (trimmed, not valid JSON) is not, and where. It
// runs on bad records only.
func notJSON(line []byte) string {
	if bytes.HasPrefix(line, bom) {
		return "not valid JSON: starts with a byte-order mark (EF BB BF); write UTF-8 without one"
	}
	var syn *json.SyntaxError
	err := json.Unmarshal(line, new(json.RawMessage))
	if !errors.As(err, &syn) {
		return "not valid JSON"
	}
	at := " at byte " + strconv.FormatInt(syn.Offset, 10)
	switch {
	case strings.Contains(syn.Error(), "after top-level value"):
		return "not valid JSON: data after the first value" + at + " (one JSON object per line)"
	case strings.Contains(syn.Error(), "unexpected end"):
		return "not valid JSON: truncated" + at + " (the record ends inside a value; a pretty-printed object spans lines: write one object per line)"
	}
	return "not valid JSON: " + syn.Error() + at
}

// isOutputField reports whether the quoted key names one of OutputFields.
func isOutputField(quoted []byte) bool {
	for _, f := range OutputFields {
		if len(quoted) == len(f)+2 && string(quoted[1:len(quoted)-1]) == f {
			return true
		}
	}
	return false
}

// decodeID accepts a non-empty string or a JSON number, whose literal text
// becomes the id (42 -> "42").
func decodeID(field string, v []byte) (string, error) {
	if v == nil {
		return "", reject(ReasonMissingField, field, "missing")
	}
	var id string
	switch c := v[0]; {
	case c == '"':
		if msg := notText(v[1 : len(v)-1]); msg != "" {
			// Decoding would replace the bad bytes by U+FFFD and merge
			// distinct ids ("a\xff" and "a\xfe") into one.
			return "", reject(ReasonBadType, field, msg+": an id must be text (UTF-8); distinct ids would merge")
		}
		var err error
		if id, err = decodeString(v); err != nil {
			return "", err
		}
	case c == '-' || (c >= '0' && c <= '9'):
		id = string(v)
	default:
		return "", reject(ReasonBadType, field, "is a JSON "+kindOf(v)+", want a string or a number")
	}
	if id == "" {
		return "", reject(ReasonMissingField, field, "empty")
	}
	if len(id) > MaxIDBytes {
		return "", reject(ReasonTooLarge, field, strconv.Itoa(len(id))+" bytes, over the limit of "+strconv.Itoa(MaxIDBytes))
	}
	return id, nil
}

// notText says why the inside of a JSON string literal is not text, ""
// when it is: invalid UTF-8, or a \u escape of half a surrogate pair.
func notText(inner []byte) string {
	if !utf8.Valid(inner) {
		for i := 0; i < len(inner); {
			r, size := utf8.DecodeRune(inner[i:])
			if r == utf8.RuneError && size == 1 {
				return "byte 0x" + strconv.FormatUint(uint64(inner[i]), 16) + " at " + strconv.Itoa(i) + " is not UTF-8"
			}
			i += size
		}
	}
	for i := 0; i+1 < len(inner); i++ {
		if inner[i] != '\\' {
			continue
		}
		if inner[i+1] != 'u' || i+6 > len(inner) {
			i++ // a two-byte escape
			continue
		}
		r, _ := strconv.ParseUint(string(inner[i+2:i+6]), 16, 32)
		switch {
		case r >= 0xd800 && r < 0xdc00: // high half: a low half must follow
			if i+12 > len(inner) || inner[i+6] != '\\' || inner[i+7] != 'u' {
				return `\u` + string(inner[i+2:i+6]) + " is half a surrogate pair"
			}
			lo, _ := strconv.ParseUint(string(inner[i+8:i+12]), 16, 32)
			if lo < 0xdc00 || lo > 0xdfff {
				return `\u` + string(inner[i+2:i+6]) + " is half a surrogate pair"
			}
			i += 11
		case r >= 0xdc00 && r <= 0xdfff:
			return `\u` + string(inner[i+2:i+6]) + " is half a surrogate pair"
		default:
			i += 5
		}
	}
	return ""
}

// decodeString decodes a JSON string literal. Invalid UTF-8 is replaced by
// U+FFFD, as encoding/json does, so the output is always valid UTF-8.
func decodeString(v []byte) (string, error) {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil { // cannot fail on a valid literal
		return "", reject(ReasonNotJSON, "", "bad string literal")
	}
	return s, nil
}

// decodeTS accepts unix milliseconds (an integer) or an RFC 3339 string.
func decodeTS(v []byte) (int64, error) {
	if v[0] == '"' {
		s, err := decodeString(v)
		if err != nil {
			return 0, err
		}
		t, perr := time.Parse(time.RFC3339Nano, s)
		if perr != nil {
			return 0, reject(ReasonBadType, "ts", clip(v)+" is neither unix milliseconds nor RFC 3339")
		}
		ms := t.UnixMilli()
		if t.Year() < 1970 || ms < MinTS || ms > MaxTS {
			return 0, reject(ReasonOutOfRange, "ts", clip(v)+" is outside 1970-01-01..2100-01-01")
		}
		return ms, nil
	}
	return decodeInt("ts", v, MinTS, MaxTS)
}

// decodeInt accepts a JSON number with an integral value in [lo, hi]
// (4 and 4.0 and 4e0 are all 4).
func decodeInt(field string, v []byte, lo, hi int64) (int64, error) {
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, reject(ReasonBadType, field, "is a JSON "+kindOf(v)+", want a number")
	}
	if bytes.IndexAny(v, ".eE") < 0 {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < lo || n > hi {
			return 0, reject(ReasonOutOfRange, field, clip(v)+" is outside "+strconv.FormatInt(lo, 10)+".."+strconv.FormatInt(hi, 10))
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) {
		return 0, reject(ReasonOutOfRange, field, clip(v)+" is not an integer")
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, reject(ReasonOutOfRange, field, clip(v)+" is outside "+strconv.FormatInt(lo, 10)+".."+strconv.FormatInt(hi, 10))
	}
	return int64(f), nil
}

// decodeRating accepts a JSON number in [0, MaxRating], integral or not
// (4, 4.0 and 3.5 are ratings; a half-star scale needs no conversion). -0
// is 0, so that the output writes it back as 0.
func decodeRating(v []byte) (float64, error) {
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, reject(ReasonBadType, "rating", "is a JSON "+kindOf(v)+", want a number")
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || !(f >= 0 && f <= MaxRating) {
		return 0, reject(ReasonOutOfRange, "rating", clip(v)+" is outside 0.."+strconv.Itoa(MaxRating))
	}
	if f == 0 {
		f = 0 // not -0
	}
	return f, nil
}

// kindOf names the JSON type of a valid JSON value.
func kindOf(v []byte) string {
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// clip shortens a value quoted in an error message.
func clip(v []byte) string {
	const max = 64
	if len(v) <= max {
		return string(v)
	}
	return string(v[:max]) + "..."
}

// scanner walks a JSON text already checked by json.Valid, so it needs no
// error handling of its own.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value returns the next value (string, number, literal, object or array)
// and moves past it.
func (s *scanner) value() []byte {
	start := s.i
	switch s.b[s.i] {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				break
			}
		}
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.b[start:s.i]
			}
			s.i++
		}
	}
	return s.b[start:s.i]
}

// str moves past a string literal starting at s.i.
func (s *scanner) str() {
	s.i++
	for {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return
		}
		s.i++
	}
}
