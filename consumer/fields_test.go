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

// TestDecodeNestedFields: a name with dots reads a nested member, as
// Segment's and RudderStack's track events hold the product id
// (properties.product_id), when the record has no member of the whole
// name (a flattened export's "properties.product_id" wins); the member
// that holds it is carried through whole.
func TestDecodeNestedFields(t *testing.T) {
	dec := NewDecoder(Fields{User: "userId", Item: "properties.product_id", TS: "timestamp", DwellMS: "context.page.dwell_ms"})
	var ev Event
	for _, tc := range []struct {
		name, line string
		want       Event
		say        string
	}{
		{name: "segment track event",
			line: `{"type":"track","userId":"u1","event":"Product Viewed","properties":{"price":3,"product_id":"p9"},"timestamp":"2023-11-14T22:13:20Z"}`,
			want: Event{User: "u1", Item: "p9", Kind: "Product Viewed", TS: 1700000000000, HasTS: true,
				Extra: []byte(`"type":"track","userId":"u1","properties":{"price":3,"product_id":"p9"},"timestamp":"2023-11-14T22:13:20Z"`)}},
		{name: "two levels, a number id, an escaped key and spaces",
			line: `{"userId":"u1","properties" : { "product\u005fid" : 42 },"context":{"page":{"url":"/x","dwell_ms":800}}}`,
			want: Event{User: "u1", Item: "42", DwellMS: 800, HasDwell: true,
				Extra: []byte(`"userId":"u1","properties" : { "product\u005fid" : 42 },"context":{"page":{"url":"/x","dwell_ms":800}}`)}},
		{name: "the flattened name wins",
			line: `{"userId":"u1","properties.product_id":"flat","properties":{"product_id":"nested"}}`,
			want: Event{User: "u1", Item: "flat", Extra: []byte(`"userId":"u1","properties.product_id":"flat","properties":{"product_id":"nested"}`)}},
		{name: "a repeated key: the last wins", line: `{"userId":"u1","properties":{"product_id":"a","product_id":"b"}}`,
			want: Event{User: "u1", Item: "b", Extra: []byte(`"userId":"u1","properties":{"product_id":"a","product_id":"b"}`)}},
		{name: "missing within", line: `{"userId":"u1","properties":{"sku":"p9"}}`, say: `item: missing (read from "properties.product_id": fields.item)`},
		{name: "null within", line: `{"userId":"u1","properties":{"product_id":null}}`, say: "item: missing"},
		{name: "not an object on the way", line: `{"userId":"u1","properties":["product_id","p9"]}`, say: "item: missing"},
		{name: "a nested object where a string is wanted", line: `{"userId":"u1","properties":{"product_id":{"id":1}}}`, say: "item: is a JSON object"},
	} {
		err := dec.Decode([]byte(tc.line), &ev)
		switch {
		case tc.say != "" && (err == nil || !strings.Contains(err.Error(), tc.say)):
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.say)
		case tc.say == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.say == "" && !ev.Equal(&tc.want):
			t.Errorf("%s: decoded %+v\nwant %+v", tc.name, ev, tc.want)
		}
	}
	// GA4's BigQuery export: the items an event names are an array.
	for _, tc := range []struct{ path, want, say string }{
		{path: "items.0.item_id", want: "SKU1"},
		{path: "items.1.item_id", want: "SKU2"},
		{path: "items.2.item_id", say: "item: missing"},
		{path: "items.01.item_id", say: "item: missing"},
		{path: "items.-1.item_id", say: "item: missing"},
		{path: "items.x.item_id", say: "item: missing"},
		{path: "items.0", say: "item: is a JSON object"},
		{path: "params.0", want: "7"},
		{path: "params.1", say: "item: missing"},
		{path: "params.0.value", say: "item: missing"},
	} {
		ga4 := NewDecoder(Fields{User: "user_pseudo_id", Item: tc.path, TS: "event_timestamp", Event: "event_name"})
		line := `{"event_timestamp":1700000000123456,"event_name":"view_item","user_pseudo_id":"u1",` +
			`"items":[ {"item_id":"SKU1","price":3} , {"item_id":"SKU2"} ],"params":[7,null]}`
		err := ga4.Decode([]byte(line), &ev)
		switch {
		case tc.say != "" && (err == nil || !strings.Contains(err.Error(), tc.say)):
			t.Errorf("%s: %v, want it to say %q", tc.path, err, tc.say)
		case tc.say == "" && (err != nil || ev.Item != tc.want || ev.User != "u1" || ev.TS != 1700000000123 || ev.Kind != "view_item"):
			t.Errorf("%s: %+v, %v; want item %q", tc.path, ev, err, tc.want)
		}
	}
	line := []byte(`{"userId":"u1","properties":{"price":3,"product_id":"p9"},"context":{"page":{"dwell_ms":800}}}`)
	if allocs := testing.AllocsPerRun(100, func() { _ = dec.Decode(line, &ev) }); allocs != 0 {
		t.Errorf("Decode of nested fields: %v allocations, want 0", allocs)
	}
	ga4, line := NewDecoder(Fields{User: "user_pseudo_id", Item: "items.1.item_id"}), []byte(`{"user_pseudo_id":"u1","items":[{"item_id":"a"},{"item_id":"b"}]}`)
	if allocs := testing.AllocsPerRun(100, func() { _ = ga4.Decode(line, &ev) }); allocs != 0 || ev.Item != "b" {
		t.Errorf("Decode of an array's element: %v allocations, item %q; want 0, b", allocs, ev.Item)
	}
	// A name with an empty part is only ever a member's whole name.
	if m := (Fields{Item: "a..b"}).compile(); m.nested {
		t.Error(`"a..b" compiled as a path`)
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
