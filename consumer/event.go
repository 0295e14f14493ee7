package consumer

import (
	"bytes"
	"denoiser/online"
	"reflect"
)

// Ground-truth values of the optional "truth" field.
const (
	TruthGenuine = "genuine"
	TruthNoise   = "noise"
)

// Event is one decoded and validated input record. Optional fields carry a
// Has flag (or are empty) when absent, so that the output echoes only the
// fields that were present.
type Event struct {
	User string // required, 1..MaxIDBytes bytes
	Item string // required, 1..MaxIDBytes bytes

	TS    int64 // unix milliseconds, normalised from an integer or RFC 3339
	HasTS bool

	Kind string // the "event" field ("click", "view", ...); "" when absent

	DwellMS  int64 // 0..MaxDwellMS
	HasDwell bool

	Rating    float64 // 0..MaxRating, not only integers (3.5); never -0
	HasRating bool

	// Truth is "genuine", "noise" or "" (absent). It is for evaluation only
	// and is never given to the model.
	Truth string

	// Extra holds the record's other members, key and value byte for byte
	// as they came, joined by commas (`"session_id":"s1","page":3`), so
	// that the output carries every input field. Members named like a
	// field the output writes (OutputFields) are left out: the output's
	// value replaces them. Decode reuses its backing array.
	Extra []byte

	// Unread marks the members named as another format names one of the
	// fields above ("timestamp", "user_id": Aliases) in a record without
	// that field: a bit per Aliases entry. They are carried through in
	// Extra, and the model does not read them; Run counts them
	// (Stats.Unread), so that a user learns why times or types are missing.
	Unread uint32

	// Shadowed marks, a bit per field (FieldNames' order), the fields that
	// Fields reads from another member which the record lacks, while it
	// carries the field under the event format's own name: that member is
	// not read, and the output's value (none) replaces it. Run counts them
	// (Stats.Shadowed): a setting such as fields.ts: timestamp on records
	// that have "ts" and no "timestamp" leaves the model without times.
	Shadowed uint8

	// TruthUnread marks a record whose truth is neither "genuine" nor
	// "noise" (1, true, "clean"): the event is scored without a truth, the
	// member carried in Extra as it came, and Run counts it
	// (Stats.TruthUnread). Until stop 61 the record was dead-lettered, so
	// that a field for evaluation only cost the event.
	TruthUnread bool

	// Replaced marks, a bit per OutputFields entry, the members named like
	// a field the output writes ("source", "label", "weight"), which are
	// left out of Extra: the output's value replaces them. Run counts them
	// (Stats.Replaced), so that a column so named is not lost unseen.
	Replaced uint8
}

// OutputFields are the names of the fields a scored record adds to its
// input's. An input member of one of these names is replaced, not
// repeated (scoring a scored stream again gives one p_clean per record).
var OutputFields = []string{"weight", "reliability", "p_clean", "clean_posterior", "label", "distilled", "model_version", "source"}

// Model returns the event as the model sees it: ids, rating, dwell, event
// type and timestamp. The ground truth is left out (it is never given to
// the model).
func (e *Event) Model() online.Event {
	ev := online.Event{User: e.User, Item: e.Item, DwellMS: e.DwellMS, HasDwell: e.HasDwell, Kind: e.Kind, TimeMS: e.TS, HasTime: e.HasTS}
	if e.HasRating {
		ev.Rating = e.Rating
	}
	return ev
}

// Equal reports whether e and o hold the same fields (Extra compared by
// its bytes). Replaced is not compared: a scored record decoded again
// has the output's fields, which an input need not have had.
func (e *Event) Equal(o *Event) bool {
	a, b := *e, *o
	a.Extra, b.Extra = nil, nil // nil and empty are the same
	a.Replaced, b.Replaced = 0, 0
	return reflect.DeepEqual(a, b) && bytes.Equal(e.Extra, o.Extra)
}
