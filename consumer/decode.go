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
	ReasonMissingField  Reason = "missing_field"  // user or item absent, null, empty or white space only
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
// Decode does not retain line. It accepts as JSON exactly what json.Valid
// accepts (encoding/json's nesting limit included), in one pass.
func Decode(line []byte, ev *Event) error { return decode(line, ev, nil, nil) }

// Decoder decodes records as Decode does, and reuses the strings of the
// ids it decoded recently (user, item, event type) instead of allocating
// them again: a record's ids then cost no allocation when they were seen
// shortly before. The strings are copies, never views of the record, so
// they outlive it. The zero value is ready to use; a Decoder is used by
// one goroutine at a time. It holds at most a few thousand ids of at most
// MaxIDBytes each (the memory of a Decoder is bounded).
type Decoder struct {
	ids   *interner
	names *memberNames // nil: the event format's names
}

// NewDecoder returns a Decoder that reads each field from the member that
// fields names (Fields); a zero Fields gives the zero Decoder.
func NewDecoder(fields Fields) Decoder { return Decoder{names: fields.compile()} }

// Decode is Decode, with the Decoder's recent ids reused.
func (d *Decoder) Decode(line []byte, ev *Event) error {
	if d.ids == nil {
		d.ids = new(interner)
	}
	err := decode(line, ev, d.ids, d.names)
	if re, ok := err.(*RecordError); ok && d.names != nil {
		d.names.hint(re)
	}
	return err
}

// tooLarge is the error of a record of n bytes, over MaxLineBytes.
func tooLarge(n int) error {
	return reject(ReasonTooLarge, "", "record of "+strconv.Itoa(n)+" bytes is over the limit of "+strconv.Itoa(MaxLineBytes))
}

// decode is Decode; ids, when not nil, supplies the strings of ids, and
// names, when not nil, the members the fields are read from.
func decode(line []byte, ev *Event, ids *interner, names *memberNames) error {
	*ev = Event{Extra: ev.Extra[:0]}
	if len(line) > MaxLineBytes {
		return tooLarge(len(line))
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' { // rare: let encoding/json judge
		if !json.Valid(line) {
			return reject(ReasonNotJSON, "", notJSON(line))
		}
		return reject(ReasonBadType, "", "record is a JSON "+kindOf(line)+", want an object")
	}
	var user, item, ts, kind, dwell, rating, truth []byte
	var outer [numFields][]byte // the members holding dotted names' values (memberNames.outer)
	var truthMember []byte      // the member truth came in, carried if not read
	var aliases uint32          // members named as other formats name the fields (Aliases)
	var shadowed uint8          // fields' own names, not read: Fields reads them from others
	i := skipSpace(line, 1)
	if at(line, i) == '}' {
		i++
	} else {
		for {
			memberStart := i
			if at(line, i) != '"' {
				return reject(ReasonNotJSON, "", notJSON(line))
			}
			var escapedKey, ok bool
			if i, escapedKey, ok = scanString(line, i); !ok {
				return reject(ReasonNotJSON, "", notJSON(line))
			}
			key := line[memberStart:i]
			i = skipSpace(line, i)
			if at(line, i) != ':' {
				return reject(ReasonNotJSON, "", notJSON(line))
			}
			i = skipSpace(line, i+1)
			valStart := i
			if i, ok = scanValue(line, i, 1); !ok {
				return reject(ReasonNotJSON, "", notJSON(line))
			}
			val, member := line[valStart:i], line[memberStart:i]
			if escapedKey { // compare the key's decoded form
				k, _ := decodeString(key)
				key = strconv.AppendQuote(nil, k)
			}
			if isNull(val) {
				val = nil
			}
			carry := false // the member goes to Extra
			if names == nil {
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
					truth, truthMember = val, member
				default:
					carry = true
				}
			} else {
				var field int
				field, carry = names.field(key)
				if field < 0 && !carry {
					shadowed |= 1 << names.own(key)
				}
				if names.nested && val != nil && (val[0] == '{' || val[0] == '[') {
					names.nestedIn(key, val, &outer)
				}
				switch field {
				case fieldUser:
					user = val
				case fieldItem:
					item = val
				case fieldTS:
					ts = val
				case fieldEvent:
					kind = val
				case fieldDwell:
					dwell = val
				case fieldRating:
					rating = val
				case fieldTruth:
					truth, truthMember = val, member
				}
			}
			if carry {
				aliases |= aliasBit(key)
				if f := outputField(key); f >= 0 {
					ev.Replaced |= 1 << f
				} else {
					if len(ev.Extra) > 0 {
						ev.Extra = append(ev.Extra, ',')
					}
					if utf8.Valid(member) {
						ev.Extra = append(ev.Extra, member...)
					} else { // bad bytes can only be within its strings
						ev.Extra = append(ev.Extra, bytes.ToValidUTF8(member, []byte("\uFFFD"))...)
					}
				}
			}
			i = skipSpace(line, i)
			if c := at(line, i); c == '}' {
				i++
				break
			} else if c != ',' {
				return reject(ReasonNotJSON, "", notJSON(line))
			}
			i = skipSpace(line, i+1)
		}
	}
	if i = skipSpace(line, i); i != len(line) { // data after the object
		return reject(ReasonNotJSON, "", notJSON(line))
	}

	if names != nil && names.nested {
		fields := [numFields]*[]byte{&user, &item, &ts, &kind, &dwell, &rating, &truth}
		for f, obj := range outer {
			if obj != nil && *fields[f] == nil {
				*fields[f] = lookupPath(obj, names.inner[f])
			}
		}
	}
	if aliases != 0 {
		ev.Unread = aliases & missingFields(user, item, ts, kind, dwell)
	}
	if shadowed != 0 {
		for i, v := range [numFields][]byte{user, item, ts, kind, dwell, rating, truth} {
			if v != nil {
				shadowed &^= 1 << i
			}
		}
		ev.Shadowed = shadowed
	}
	var err error
	if ev.User, err = decodeID("user", user, ids); err != nil {
		return unreadHint(err, ev.Unread, "user")
	}
	if ev.Item, err = decodeID("item", item, ids); err != nil {
		return unreadHint(err, ev.Unread, "item")
	}
	if ts != nil {
		if ev.TS, err = decodeTS(ts); err != nil {
			return err
		}
		ev.HasTS = true
	}
	if kind != nil {
		switch c := kind[0]; {
		case c == '-' || (c >= '0' && c <= '9'): // a numeric action code: its literal text, as an id's
			ev.Kind = ids.str(kind)
		case c != '"':
			return reject(ReasonBadType, "event", "is a JSON "+kindOf(kind)+", want a string or a number")
		case plainText(kind[1:len(kind)-1]) && len(kind)-2 <= MaxIDBytes:
			ev.Kind = ids.str(kind[1 : len(kind)-1])
		default:
			if ev.Kind, err = decodeString(kind); err != nil {
				return err
			}
		}
		if len(ev.Kind) > MaxIDBytes {
			return reject(ReasonTooLarge, "event", strconv.Itoa(len(ev.Kind))+" bytes, over the limit of "+strconv.Itoa(MaxIDBytes))
		}
	}
	if dwell != nil {
		if ev.DwellMS, err = decodeDwell(quotedNumber(dwell)); err != nil {
			return err
		}
		ev.HasDwell = true
	}
	if rating != nil {
		if ev.Rating, err = decodeRating(quotedNumber(rating)); err != nil {
			return err
		}
		ev.HasRating = true
	}
	if truth != nil {
		var inner []byte // a string's inside; nil for any other value
		if truth[0] == '"' {
			inner = truth[1 : len(truth)-1]
		}
		switch { // case ignored: "Noise" is noise
		case inner != nil && bytes.EqualFold(inner, []byte(TruthGenuine)):
			ev.Truth = TruthGenuine
		case inner != nil && bytes.EqualFold(inner, []byte(TruthNoise)):
			ev.Truth = TruthNoise
		default:
			// Evaluation only: an event is not lost for it. The member
			// goes on as it came, and the record is marked.
			ev.TruthUnread = true
			if len(ev.Extra) > 0 {
				ev.Extra = append(ev.Extra, ',')
			}
			ev.Extra = append(ev.Extra, bytes.ToValidUTF8(truthMember, []byte("\uFFFD"))...)
		}
	}
	return nil
}

// quotedNumber returns the inside of v where v is a JSON string that
// holds a JSON number ("5000": exports quote numbers), else v.
func quotedNumber(v []byte) []byte {
	if len(v) > 2 && v[0] == '"' {
		if inner := v[1 : len(v)-1]; (inner[0] == '-' || inner[0] >= '0' && inner[0] <= '9') && json.Valid(inner) {
			return inner
		}
	}
	return v
}

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

// Aliases are names that other formats give the fields a record of the
// event format names user, item, ts, event and dwell_ms (Taobao's
// user_id and behavior_type, RetailRocket's visitorid and itemid, REES46's
// event_time and product_id, and their like). A member so named is not
// read as the field unless Fields names it: its unit or meaning may
// differ. It is carried through as any other member, and counted where the
// record lacks the field (Event.Unread), so that a user is told to rename
// it or to name it in Fields.
var Aliases = [...]struct{ Name, Field string }{
	{"user_id", "user"}, {"userId", "user"}, {"userid", "user"}, {"visitorid", "user"}, {"uid", "user"},
	{"item_id", "item"}, {"itemId", "item"}, {"itemid", "item"}, {"product_id", "item"}, {"movie_id", "item"},
	{"timestamp", "ts"}, {"time", "ts"}, {"event_time", "ts"}, {"eventTime", "ts"}, {"created_at", "ts"}, {"datetime", "ts"},
	{"event_type", "event"}, {"eventType", "event"}, {"behavior", "event"}, {"behavior_type", "event"}, {"action", "event"},
	{"dwell", "dwell_ms"}, {"dwell_time", "dwell_ms"}, {"dwell_time_ms", "dwell_ms"}, {"duration", "dwell_ms"}, {"duration_ms", "dwell_ms"},
}

// Event.Unread has a bit for each of Aliases.
var _ [32 - len(Aliases)]struct{}

// aliasBits maps each name of Aliases to its Event.Unread bit.
var aliasBits = func() map[string]uint32 {
	m := make(map[string]uint32, len(Aliases))
	for i, a := range Aliases {
		m[a.Name] = 1 << i
	}
	return m
}()

// aliasBit is the Event.Unread bit of the quoted key if Aliases names it,
// else 0. It allocates nothing, and costs one map lookup for every member
// the event format does not name (a loop over the names cost 40 % more
// decoding on a record with four such members).
func aliasBit(quoted []byte) uint32 {
	return aliasBits[string(quoted[1:len(quoted)-1])]
}

// aliasMasks are the Event.Unread bits of each field's aliases.
var aliasMasks = func() (m struct{ user, item, ts, event, dwell uint32 }) {
	for i, a := range Aliases {
		switch a.Field {
		case "user":
			m.user |= 1 << i
		case "item":
			m.item |= 1 << i
		case "ts":
			m.ts |= 1 << i
		case "event":
			m.event |= 1 << i
		case "dwell_ms":
			m.dwell |= 1 << i
		}
	}
	return m
}()

// missingFields is the Event.Unread bits of the aliases of the fields that
// are absent (nil).
func missingFields(user, item, ts, kind, dwell []byte) uint32 {
	var m uint32
	if user == nil {
		m |= aliasMasks.user
	}
	if item == nil {
		m |= aliasMasks.item
	}
	if ts == nil {
		m |= aliasMasks.ts
	}
	if kind == nil {
		m |= aliasMasks.event
	}
	if dwell == nil {
		m |= aliasMasks.dwell
	}
	return m
}

// unreadHint adds to err, a missing field's, the member named as another
// format names field, if the record has one.
func unreadHint(err error, unread uint32, field string) error {
	re, ok := err.(*RecordError)
	if !ok || re.Reason != ReasonMissingField || unread == 0 {
		return err
	}
	for i, a := range Aliases {
		if unread&(1<<i) != 0 && a.Field == field {
			re.Msg += " (the record has " + strconv.Quote(a.Name) + ": rename it " + strconv.Quote(field) + ", or read it with fields." + field + ": " + a.Name + ")"
			break
		}
	}
	return err
}

// outputField is the index in OutputFields of the field the quoted key
// names, -1 for none.
func outputField(quoted []byte) int {
	for i, f := range OutputFields {
		if len(quoted) == len(f)+2 && string(quoted[1:len(quoted)-1]) == f {
			return i
		}
	}
	return -1
}

// decodeID accepts a non-empty string or a JSON number, whose literal text
// becomes the id (42 -> "42"). ids, when not nil, supplies the string.
func decodeID(field string, v []byte, ids *interner) (string, error) {
	if v == nil {
		return "", reject(ReasonMissingField, field, "missing")
	}
	var id string
	switch c := v[0]; {
	case c == '"':
		inner := v[1 : len(v)-1]
		if plainText(inner) { // the common case: the id is the literal's inside
			if len(inner) == 0 {
				return "", reject(ReasonMissingField, field, "empty")
			}
			if inner[0] <= ' ' && blank(string(inner)) {
				return "", reject(ReasonMissingField, field, "blank (white space only)")
			}
			if len(inner) > MaxIDBytes {
				return "", reject(ReasonTooLarge, field, strconv.Itoa(len(inner))+" bytes, over the limit of "+strconv.Itoa(MaxIDBytes))
			}
			return ids.str(inner), nil
		}
		if msg := notText(inner); msg != "" {
			// Decoding would replace the bad bytes by U+FFFD and merge
			// distinct ids ("a\xff" and "a\xfe") into one.
			return "", reject(ReasonBadType, field, msg+": an id must be text (UTF-8); distinct ids would merge")
		}
		var err error
		if id, err = decodeString(v); err != nil {
			return "", err
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if len(v) > MaxIDBytes {
			return "", reject(ReasonTooLarge, field, strconv.Itoa(len(v))+" bytes, over the limit of "+strconv.Itoa(MaxIDBytes))
		}
		return ids.str(v), nil
	default:
		return "", reject(ReasonBadType, field, "is a JSON "+kindOf(v)+", want a string or a number")
	}
	if id == "" {
		return "", reject(ReasonMissingField, field, "empty")
	}
	if blank(id) {
		return "", reject(ReasonMissingField, field, "blank (white space only)")
	}
	if len(id) > MaxIDBytes {
		return "", reject(ReasonTooLarge, field, strconv.Itoa(len(id))+" bytes, over the limit of "+strconv.Itoa(MaxIDBytes))
	}
	return id, nil
}

// blank reports whether id is white space only: a field left blank
// (a CSV export's "  "), not an id.
func blank(id string) bool { return strings.TrimSpace(id) == "" }

// plainText reports whether the inside of a valid JSON string literal is
// ASCII without escapes, and so is the string itself.
func plainText(inner []byte) bool {
	for _, c := range inner {
		if c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// interner hands out the strings of recently seen byte strings, so that a
// repeated id costs no allocation: a cache of internSlots strings in sets
// of two (the hash of a string picks its set), the more recently used of
// each set first. It only saves allocations; what it returns equals
// string(b) whatever the cache holds.
type interner struct {
	slots [internSlots / 2][2]string
}

// internSlots bounds an interner: 4096 strings of at most MaxIDBytes.
const (
	internSlots = 1 << internBits
	internBits  = 12
)

// internSet is the set of a string of hash h: the high bits of h times
// 2^32/φ (FNV-1a's low bits alone mix short ids poorly).
func internSet(h uint32) uint32 { return (h * 0x9e3779b1) >> (32 - internBits + 1) }

// str returns string(b), reusing the string of an earlier equal b when the
// cache still holds it. A nil interner allocates every time.
func (t *interner) str(b []byte) string {
	if t == nil {
		return string(b)
	}
	h := uint32(2166136261) // FNV-1a
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	set := &t.slots[internSet(h)]
	// Comparisons, not a switch on string(b): the compiler compares
	// string(b) in place, where a switch first copies b (runtime
	// slicebytetostring, 44 instructions an id).
	if string(b) == set[0] {
		return set[0]
	}
	if string(b) == set[1] {
		set[0], set[1] = set[1], set[0]
	} else {
		set[0], set[1] = string(b), set[0]
	}
	return set[0]
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

// minSecondsTS is the least integer ts read as unix seconds: 10^8 s is
// 1973-03-03; as milliseconds 10^8 to 10^11 would be 1970-01-02 to
// 1973-03-03, a time no click stream has.
const minSecondsTS = 100_000_000

// tsUnits are the units an integer ts is read in, told apart by its
// magnitude (decodeTS): their ranges, from 1973-03-03 to 2100-01-01 in
// each, do not overlap, and the milliseconds' takes in 1970-01-01 to
// 1973-03-03 as well, below the seconds' range.
var tsUnits = []struct {
	name     string
	from, to float64 // the range, in the unit
	toMS     float64 // milliseconds per unit
}{
	{"milliseconds", 0, minSecondsTS - 1, 1},
	{"seconds", minSecondsTS, MaxTS / 1000, 1000},
	{"milliseconds", minSecondsTS * 1000, MaxTS, 1},
	{"microseconds", minSecondsTS * 1e6, MaxTS * 1e3, 1e-3},
	{"nanoseconds", minSecondsTS * 1e9, MaxTS * 1e6, 1e-6},
}

// decodeTS accepts an RFC 3339 string or a unix time: milliseconds or
// seconds (with a fraction or not), an integer of microseconds or
// nanoseconds, told apart by its magnitude (tsUnits; FORMAT.md): 10^8 to
// about 4.1·10^9 is seconds, 10^11 to 4.1·10^12 milliseconds, and so on;
// the time is returned in milliseconds. Below 10^8 it is milliseconds
// (1970-01-01 .. 1970-01-02: a toy stream's 1, 2, 3 keep their meaning).
// Seconds and milliseconds are rounded to the millisecond (a fraction is
// what Python's time.time() and time.time()*1000 give), microseconds and
// nanoseconds truncated, and must be whole.
func decodeTS(v []byte) (int64, error) {
	if v[0] == '"' {
		s, err := decodeString(v)
		if err != nil {
			return 0, err
		}
		if s != "" && s[0] >= '0' && s[0] <= '9' && json.Valid([]byte(s)) {
			return decodeTS([]byte(s)) // a unix time written as a string: a JSON number inside
		}
		t, ok := parseDateTime(s)
		if !ok {
			return 0, reject(ReasonBadType, "ts", clip(v)+" is neither a unix time (seconds, milliseconds, microseconds or nanoseconds) nor a date and time (RFC 3339, or 2006-01-02 15:04:05 with an optional zone: Z, UTC, +01:00, +0100)")
		}
		ms := t.UnixMilli()
		if t.Year() < 1970 || ms < MinTS || ms > MaxTS {
			return 0, reject(ReasonOutOfRange, "ts", clip(v)+" is outside 1970-01-01..2100-01-01")
		}
		return ms, nil
	}
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, reject(ReasonBadType, "ts", "is a JSON "+kindOf(v)+", want a number")
	}
	if n, ok := smallInt(v); ok { // the common cases, with no allocation
		switch {
		case n >= 0 && n < minSecondsTS, n >= minSecondsTS*1000 && n <= MaxTS:
			return n, nil
		case n >= minSecondsTS && n <= MaxTS/1000:
			return n * 1000, nil
		}
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 {
		return 0, reject(ReasonOutOfRange, "ts", clip(v)+" is outside 1970-01-01..2100-01-01")
	}
	for _, u := range tsUnits {
		switch {
		case f < u.from || f > u.to:
		case u.toMS < 1 && f != math.Trunc(f):
			return 0, reject(ReasonOutOfRange, "ts", clip(v)+" is not a whole number of "+u.name)
		case u.toMS >= 1: // seconds and milliseconds may have a fraction (Python's time.time(), its time.time()*1000)
			return int64(math.Round(f * u.toMS)), nil
		default:
			return int64(math.Floor(f * u.toMS)), nil
		}
	}
	return 0, reject(ReasonOutOfRange, "ts", clip(v)+" is outside 1970-01-01..2100-01-01 as unix milliseconds, and outside 1973-03-03..2100-01-01 as seconds, microseconds or nanoseconds")
}

// dateTimeLayouts are the layouts of a ts string (parseDateTime): RFC 3339,
// ISO 8601 with a basic offset ("2019-10-01T00:00:00+0000": Java's
// SimpleDateFormat Z, Python's strftime %z) and the SQL-style date and
// time that exports write (REES46's "2019-10-01 00:00:00 UTC", pandas'
// "2019-10-01 00:00:00"), with a zone as Z or a numeric offset, or none,
// which is read as UTC. A fraction of a second is accepted after the
// seconds in each (time.Parse).
var dateTimeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05 Z07:00",
	"2006-01-02 15:04:05 -0700",
	"2006-01-02 15:04:05-0700",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04:05",
	"2006-01-02T15:04:05-0700", // ISO 8601's basic offset: Java's SimpleDateFormat Z, Python's %z
}

// parseDateTime reads s in the first of dateTimeLayouts that fits; a
// trailing " UTC" is read as the zone UTC (no other zone name is
// accepted: time.Parse would make up a zero offset for one it does not
// know).
func parseDateTime(s string) (time.Time, bool) {
	if strings.ContainsAny(s, "tz") {
		// RFC 3339 allows the T and the Z in lower case (§5.6, NOTE);
		// time.Parse does not. No other letter is read.
		s = strings.ToUpper(s)
	}
	if t, ok := strings.CutSuffix(s, " UTC"); ok {
		s = t
		if len(s) < 19 || strings.ContainsAny(s[19:], "Z+-") { // a zone given twice
			return time.Time{}, false
		}
	}
	for _, layout := range dateTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// decodeDwell reads dwell_ms: a JSON number in [0, MaxDwellMS], a fraction
// rounded to the nearest millisecond (half away from zero): a browser's
// timer (performance.now) gives fractional milliseconds, and 8300.25 ms
// is a dwell as much as 8300. 4, 4.0 and 4e0 are all 4.
func decodeDwell(v []byte) (int64, error) {
	const field = "dwell_ms"
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, notANumber(field, v)
	}
	outside := func() error {
		return reject(ReasonOutOfRange, field, clip(v)+" is outside 0.."+strconv.FormatInt(MaxDwellMS, 10))
	}
	if n, ok := smallInt(v); ok {
		if n < 0 || n > MaxDwellMS {
			return 0, outside()
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if f = math.Round(f); err != nil || !(f >= 0 && f <= MaxDwellMS) { // ErrRange: ±Inf
		return 0, outside()
	}
	return int64(f), nil
}

// smallInt parses v when it is an integer of at most 18 digits (which
// int64 holds), as strconv.ParseInt would, without its generality.
func smallInt(v []byte) (int64, bool) {
	digits := v
	if len(v) > 0 && v[0] == '-' {
		digits = v[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(v) {
		n = -n
	}
	return n, true
}

// decodeRating accepts a JSON number in [0, MaxRating], integral or not
// (4, 4.0 and 3.5 are ratings; a half-star scale needs no conversion). -0
// is 0, so that the output writes it back as 0.
func decodeRating(v []byte) (float64, error) {
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, notANumber("rating", v)
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

// notANumber is the error of a numeric field whose value v is no number.
// A string there is one that holds none (quotedNumber unwraps "1200"), so
// the error quotes it: a CSV export's NULL or NA for a missing value is a
// string to the event format, where an empty cell is no value.
func notANumber(field string, v []byte) error {
	if v[0] == '"' {
		return reject(ReasonBadType, field, clip(v)+" is a string that holds no number; want a number (or a string holding one), and no value (the field left out, null, an empty CSV cell) where there is none")
	}
	return reject(ReasonBadType, field, "is a JSON "+kindOf(v)+", want a number")
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

// maxDepth is encoding/json's limit on nested objects and arrays (the
// record's own object counts): json.Valid rejects a deeper text, and so
// does Decode.
const maxDepth = 10000

// The scanner walks a JSON text and checks it as it goes, by the grammar
// of RFC 8259 as encoding/json reads it: a string may hold any byte but
// '"', '\' and control characters (invalid UTF-8 included); escapes are
// the JSON ones. Each function takes the text b and a position i and
// returns the position after what it moved past, and false when it found
// the text invalid there. Functions of (b, i) rather than methods of a
// scanner struct: the decoder's loop then keeps its position in a
// register rather than in memory (BenchmarkDecoder: 4,491 → 4,089
// instructions per record, callgrind).

// at returns the byte at i, 0 at the end (never valid where peeked).
func at(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}

// skipSpace moves past white space.
func skipSpace(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' { // the common case: no space
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanValue moves past the value at i (string, number, literal, object or
// array), inside depth containers.
func scanValue(b []byte, i, depth int) (int, bool) {
	switch c := at(b, i); {
	case c == '"':
		i, _, ok := scanString(b, i)
		return i, ok
	case c == '{' || c == '[':
		return scanContainer(b, i, depth+1)
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return i, false
}

// scanContainer moves past the object or array at i, the depth-th
// container.
func scanContainer(b []byte, i, depth int) (int, bool) {
	if depth > maxDepth {
		return i, false
	}
	object, end := b[i] == '{', b[i]+2 // '{'+2 is '}', '['+2 is ']'
	i = skipSpace(b, i+1)
	if at(b, i) == end {
		return i + 1, true
	}
	for {
		var ok bool
		if object { // a member: "key" : value
			if at(b, i) != '"' {
				return i, false
			}
			if i, _, ok = scanString(b, i); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if at(b, i) != ':' {
				return i, false
			}
			i = skipSpace(b, i+1)
		}
		if i, ok = scanValue(b, i, depth); !ok {
			return i, false
		}
		i = skipSpace(b, i)
		switch at(b, i) {
		case ',':
			i = skipSpace(b, i+1)
		case end:
			return i + 1, true
		default:
			return i, false
		}
	}
}

// lookupPath returns the value at path within obj, a JSON object or array
// already scanned as valid: the member path[0] of obj (of an array, the
// element of that index from 0: GA4's items.0.item_id), the member
// path[1] of that, and so on; nil where one is missing, is neither an
// object nor an array on the way, or is null.
func lookupPath(obj []byte, path []string) []byte {
	for _, name := range path {
		if at(obj, 0) == '[' {
			if obj = element(obj, name); obj == nil {
				return nil
			}
			continue
		}
		if at(obj, 0) != '{' {
			return nil
		}
		var found []byte
		i := skipSpace(obj, 1)
		for at(obj, i) == '"' {
			keyStart := i
			end, escaped, _ := scanString(obj, i)
			key := obj[keyStart+1 : end-1]
			i = skipSpace(obj, skipSpace(obj, end)+1) // past the colon
			valStart := i
			i, _ = scanValue(obj, i, 1)
			match := string(key) == name
			if escaped { // compare the key's decoded form
				k, _ := decodeString(obj[keyStart:end])
				match = k == name
			}
			if match {
				found = obj[valStart:i] // the last of a repeated key wins, as at the top
			}
			if i = skipSpace(obj, i); at(obj, i) != ',' {
				break
			}
			i = skipSpace(obj, i+1)
		}
		if found == nil || isNull(found) {
			return nil
		}
		obj = found
	}
	return obj
}

// isNull reports whether the valid JSON value v is null (the only valid
// value of four bytes that starts with n).
func isNull(v []byte) bool { return len(v) == 4 && v[0] == 'n' }

// element returns the element of the JSON array arr (scanned as valid)
// whose index from 0 is written in index, nil if it has none or null.
func element(arr []byte, index string) []byte {
	n, err := strconv.Atoi(index)
	if err != nil || n < 0 || strconv.Itoa(n) != index { // digits only: no sign, no leading 0
		return nil
	}
	i := skipSpace(arr, 1)
	for k := 0; at(arr, i) != ']' && at(arr, i) != 0; k++ {
		start := i
		i, _ = scanValue(arr, i, 1)
		if k == n {
			if v := arr[start:i]; !isNull(v) {
				return v
			}
			return nil
		}
		if i = skipSpace(arr, i); at(arr, i) != ',' {
			return nil
		}
		i = skipSpace(arr, i+1)
	}
	return nil
}

// scanString moves past the string literal at i, and reports whether it
// holds an escape.
func scanString(b []byte, i int) (end int, escaped, ok bool) {
	i++
	for {
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i == len(b) {
			return i, escaped, false // no closing quote
		}
		switch b[i] {
		case '"':
			return i + 1, escaped, true
		case '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, escaped, false
				}
				for _, h := range b[i+2 : i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return i, escaped, false
					}
				}
				i += 6
			default:
				return i, escaped, false
			}
		default: // a control character
			return i, escaped, false
		}
	}
}

// plainByte marks the bytes that stand for themselves in a JSON string:
// all but '"', '\' and control characters.
var plainByte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

// scanNumber moves past the number at i: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	if at(b, i) == '-' {
		i++
	}
	switch c := at(b, i); {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i = scanDigits(b, i)
	default:
		return i, false
	}
	if at(b, i) == '.' {
		start := i + 1
		if i = scanDigits(b, start); i == start {
			return i, false
		}
	}
	if c := at(b, i); c == 'e' || c == 'E' {
		i++
		if c := at(b, i); c == '+' || c == '-' {
			i++
		}
		start := i
		if i = scanDigits(b, start); i == start {
			return i, false
		}
	}
	return i, true
}

// scanDigits moves past a run of digits, if any.
func scanDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// scanLiteral moves past lit (true, false or null) at i.
func scanLiteral(b []byte, i int, lit string) (int, bool) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return i, false
	}
	return i + len(lit), true
}
