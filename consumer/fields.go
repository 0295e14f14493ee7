package consumer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Fields names the members that a record's fields are read from, for a
// stream whose producer names them otherwise (Taobao's user_id,
// RetailRocket's visitorid and timestamp): fields.user: user_id reads
// the user from "user_id". An empty name is the event format's own
// (FORMAT.md). The output keeps the event format's names (the cleaned
// topic has one schema, whatever the input's), and a member read as a
// field under another name is carried through as it came too, so that
// the record keeps its own schema beside them; a member named as the
// event format names a field read from elsewhere is replaced by the
// output's value, as an output field is.
type Fields struct {
	User    string `yaml:"user"`     // default "user"
	Item    string `yaml:"item"`     // default "item"
	TS      string `yaml:"ts"`       // default "ts"
	Event   string `yaml:"event"`    // default "event"
	DwellMS string `yaml:"dwell_ms"` // default "dwell_ms"
	Rating  string `yaml:"rating"`   // default "rating"
	Truth   string `yaml:"truth"`    // default "truth"
}

// The fields' indices in memberNames and fieldNames.
const (
	fieldUser = iota
	fieldItem
	fieldTS
	fieldEvent
	fieldDwell
	fieldRating
	fieldTruth
	numFields
)

// fieldNames are the event format's names of the fields, by index.
var fieldNames = [numFields]string{"user", "item", "ts", "event", "dwell_ms", "rating", "truth"}

// names returns the member name of each field, the event format's where
// f leaves it empty.
func (f Fields) names() [numFields]string {
	n := [numFields]string{f.User, f.Item, f.TS, f.Event, f.DwellMS, f.Rating, f.Truth}
	for i := range n {
		if n[i] == "" {
			n[i] = fieldNames[i]
		}
	}
	return n
}

// WithDefaults is f with the event format's name for every field it
// leaves empty.
func (f Fields) WithDefaults() Fields {
	n := f.names()
	return Fields{User: n[fieldUser], Item: n[fieldItem], TS: n[fieldTS], Event: n[fieldEvent], DwellMS: n[fieldDwell], Rating: n[fieldRating], Truth: n[fieldTruth]}
}

// IsDefault reports whether f reads every field from its own name.
func (f Fields) IsDefault() bool { return f.names() == fieldNames }

// Validate refuses a name that no record could hold (invalid UTF-8, over
// MaxIDBytes), one that two fields share, or one that the output writes
// (OutputFields), whose member the output would replace.
func (f Fields) Validate() error {
	n := f.names()
	var errs []error
	for i, name := range n {
		switch {
		case !utf8.ValidString(name) || len(name) > MaxIDBytes:
			errs = append(errs, fmt.Errorf("fields.%s: %q is not a member name (UTF-8, at most %d bytes)", fieldNames[i], name, MaxIDBytes))
		case slices.Contains(OutputFields, name):
			errs = append(errs, fmt.Errorf("fields.%s: %q is a field the output writes (%v); name another member", fieldNames[i], name, OutputFields))
		case slices.Contains(n[:i], name):
			errs = append(errs, fmt.Errorf("fields.%s: %q is read for fields.%s already", fieldNames[i], name, fieldNames[slices.Index(n[:i], name)]))
		}
	}
	return errors.Join(errs...)
}

// memberNames is Fields compiled for the decoder: each field's member
// name, quoted as a key is in a record. nil stands for the event format's
// names (the decoder's fast path).
type memberNames struct {
	quoted [numFields]string
	// renamed marks the fields read from another name: a member of the
	// field's own name is then replaced by the output's value.
	renamed [numFields]bool
	// A name with dots ("properties.product_id") also reads a nested
	// member, where the record has no member of the whole name: outer is
	// the first part, quoted as a key is ("" for a name without dots),
	// inner the parts within it (nestedIn, lookupPath).
	outer [numFields]string
	inner [numFields][]string
	// nested reports whether any field has a dotted name.
	nested bool
}

// compile returns f for the decoder, nil when every name is the event
// format's.
func (f Fields) compile() *memberNames {
	if f.IsDefault() {
		return nil
	}
	var m memberNames
	for i, name := range f.names() {
		m.quoted[i] = strconv.Quote(name)
		m.renamed[i] = name != fieldNames[i]
		if parts := strings.Split(name, "."); len(parts) > 1 && !slices.Contains(parts, "") {
			m.outer[i], m.inner[i], m.nested = strconv.Quote(parts[0]), parts[1:], true
		}
	}
	return &m
}

// nestedIn records val, the value of the member of the quoted key, in
// outer for each field whose dotted name starts with that key.
func (m *memberNames) nestedIn(quoted, val []byte, outer *[numFields][]byte) {
	for i := range m.outer {
		if m.outer[i] != "" && string(quoted) == m.outer[i] {
			outer[i] = val
		}
	}
}

// field returns the index of the field the quoted key names, and whether
// the member is carried through besides (a field read from another
// name); -1 if it names none, or a field's own name that is read from
// another (dropped: the output writes it).
func (m *memberNames) field(quoted []byte) (field int, carry bool) {
	for i := range m.quoted {
		if string(quoted) == m.quoted[i] {
			return i, m.renamed[i]
		}
	}
	if m.own(quoted) >= 0 {
		return -1, false
	}
	return -1, true
}

// own returns the index of the field whose event-format name the quoted
// key is, where that field is read from another name; -1 otherwise.
func (m *memberNames) own(quoted []byte) int {
	for i, name := range fieldNames {
		if m.renamed[i] && len(quoted) == len(name)+2 && string(quoted[1:len(quoted)-1]) == name {
			return i
		}
	}
	return -1
}

// FieldNames returns the event format's names of the fields, in the
// order of Event.Shadowed's bits.
func FieldNames() []string { return fieldNames[:] }

// hint adds to the error of a field read from another name that name.
func (m *memberNames) hint(err *RecordError) {
	for i, name := range fieldNames {
		if err.Field == name && m.renamed[i] {
			err.Msg += " (read from " + m.quoted[i] + ": fields." + name + ")"
			return
		}
	}
}
