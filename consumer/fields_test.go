package consumer

import (
	"context"
	"strings"
	"testing"
)

// TestDecodeFields: with Fields, each field is read from the member it
// names; that member is carried through as it came, a member of the
// field's own name is dropped (the output writes it), the other fields
// keep their names, and errors say where a field was read from.
func TestDecodeFields(t *testing.T) {
	dec := NewDecoder(Fields{User: "user_id", Item: "item_id", TS: "timestamp", Event: "behavior_type"})
	var ev Event
	line := []byte(`{"user_id":42,"item_id":"i9","category_id":7,"behavior_type":"pv","timestamp":1511544070,"user":"stale","dwell_ms":800}`)
	if err := dec.Decode(line, &ev); err != nil {
		t.Fatal(err)
	}
	want := Event{User: "42", Item: "i9", Kind: "pv", TS: 1511544070000, HasTS: true, DwellMS: 800, HasDwell: true,
		Extra: []byte(`"user_id":42,"item_id":"i9","category_id":7,"behavior_type":"pv","timestamp":1511544070`)}
	if !ev.Equal(&want) {
		t.Errorf("decoded %+v\nwant %+v", ev, want)
	}
	for _, tc := range []struct{ line, say string }{
		{`{"user":"u","item_id":"i"}`, `user: missing (read from "user_id": fields.user)`},
		{`{"user_id":"u","item_id":"i","timestamp":"yesterday"}`, `(read from "timestamp": fields.ts)`},
	} {
		if err := dec.Decode([]byte(tc.line), &ev); err == nil || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("%s: %v, want it to say %q", tc.line, err, tc.say)
		}
	}
	// The event format's names need no Fields, and a zero Fields is them.
	var plain Decoder
	if err := plain.Decode([]byte(`{"user":"u","item":"i","user_id":"x"}`), &ev); err != nil || ev.User != "u" || string(ev.Extra) != `"user_id":"x"` {
		t.Errorf("default names: %+v, %v", ev, err)
	}
	if NewDecoder(Fields{User: "user"}).names != nil || !(Fields{Item: "item"}).IsDefault() {
		t.Error("Fields naming the event format's own names is not the default")
	}
	if err := dec.Decode(line, &ev); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = dec.Decode(line, &ev) }); allocs != 0 {
		t.Errorf("Decode with Fields: %v allocations, want 0", allocs)
	}
}

func TestFieldsValidate(t *testing.T) {
	for _, tc := range []struct {
		f   Fields
		say string
	}{
		{Fields{}, ""},
		{Fields{User: "user_id", TS: "timestamp"}, ""},
		{Fields{User: "id", Item: "id"}, `fields.item: "id" is read for fields.user already`},
		{Fields{User: "item"}, `fields.item: "item" is read for fields.user already`},
		{Fields{Truth: "label"}, `fields.truth: "label" is a field the output writes`},
		{Fields{TS: strings.Repeat("t", MaxIDBytes+1)}, "fields.ts"},
		{Fields{Event: "\xff"}, "not a member name"},
	} {
		err := tc.f.Validate()
		if tc.say == "" && err != nil || tc.say != "" && (err == nil || !strings.Contains(err.Error(), tc.say)) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.say)
		}
	}
}

// TestCSVFields: a CSV header with other names is read with Fields.
func TestCSVFields(t *testing.T) {
	src := NewCSVSource(NewFileSource(strings.NewReader("user_id,item_id,behavior_type\nu1,i1,pv\n"), "in.csv"), Fields{User: "user_id", Item: "item_id", Event: "behavior_type"})
	m, err := src.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	dec := NewDecoder(src.fields)
	if err := dec.Decode(m.Value, &ev); err != nil || ev.User != "u1" || ev.Item != "i1" || ev.Kind != "pv" {
		t.Errorf("row %s: %+v, %v", m.Value, ev, err)
	}
	bad := NewCSVSource(NewFileSource(strings.NewReader("user,item\nu1,i1\n"), "in.csv"), Fields{User: "user_id"})
	if _, err := bad.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "no user_id and item column") {
		t.Errorf("header without fields.user's column: %v", err)
	}
}
