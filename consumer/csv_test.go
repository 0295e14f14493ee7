package consumer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestCSVHeader: a header's names may be padded with spaces; a first line
// that names no user and item column stops the read with the likely cause.
func TestCSVHeader(t *testing.T) {
	src := NewCSVSource(NewFileSource(strings.NewReader("user, item ,ts\nu1,i1,1700000000\n"), "in.csv"), Fields{})
	if m, err := src.Next(context.Background()); err != nil || string(m.Value) != `{"user":"u1","item":"i1","ts":1700000000}` {
		t.Errorf("padded header: %q, %v", m.Value, err)
	}
	for _, tc := range []struct{ name, text, say string }{
		{"no header", "u1,i1,1700000000\n", "has no header"},
		{"tabs", "user\titem\tts\n", "not separated by commas; only commas are read (convert the separators, e.g. tr '\\t' ',')"},
		{"semicolons", "user;item\n", "e.g. sed 's/,/./g; s/;/,/g' (a decimal comma, 3,5, becomes 3.5 first"},
		{"bars", "user|item|ts\n", "e.g. tr '|' ',')"},
		{"another format's names", "user_id,item_id,behavior_type,timestamp\n", "rename user_id to user, item_id to item, timestamp to ts, behavior_type to event, " +
			"or read them with --set fields.user=user_id --set fields.item=item_id --set fields.ts=timestamp --set fields.event=behavior_type"},
		{"two names of one field", "user_id,uid,item_id\n", "rename user_id to user, uid to user, item_id to item, or read them with --set fields.user=user_id --set fields.item=item_id"},
		{"capitals", "User,Item,TS\n", "case-sensitive"},
		{"MovieLens ratings.csv", "userId,movieId,rating,timestamp\n", "convert movielens"},
		{"other names", "uid,iid\n", "names no user and item column"},
		{"a column twice", "user,item,user\n", `names the column "user" twice`},
	} {
		src := NewCSVSource(NewFileSource(strings.NewReader(tc.text), "in.csv"), Fields{})
		_, err := src.Next(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.say) || !strings.Contains(src.Describe(), tc.say) {
			t.Errorf("%s: %v, want an error that says %q", tc.name, err, tc.say)
		}
	}
}

// TestCSVHeaderFields: the fields a header error suggests reading with
// --set fields.FIELD=COLUMN read that header's rows.
func TestCSVHeaderFields(t *testing.T) {
	text := "user_id,item_id,timestamp,rating\nu1,i1,1700000000,4\n"
	src := NewCSVSource(NewFileSource(strings.NewReader(text), "in.csv"), Fields{})
	if _, err := src.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "--set fields.user=user_id --set fields.item=item_id --set fields.ts=timestamp") {
		t.Fatalf("header error %v does not suggest the fields", err)
	}
	fields := Fields{User: "user_id", Item: "item_id", TS: "timestamp"}
	src = NewCSVSource(NewFileSource(strings.NewReader(text), "in.csv"), fields)
	m, err := src.Next(context.Background())
	if err != nil || m.Err != nil {
		t.Fatalf("with the suggested fields: %v, %v", err, m.Err)
	}
	var ev Event
	dec := NewDecoder(fields)
	if err := dec.Decode(m.Value, &ev); err != nil || ev.User != "u1" || ev.Item != "i1" || !ev.HasTS {
		t.Fatalf("row %s decodes as %+v, %v", m.Value, ev, err)
	}
}

// TestCSVHeaderOnly: a CSV of a header and no row says so, not that the
// dead letters (there are none) say why nothing was scored; one whose
// rows were all bad still points to the dead letters.
func TestCSVHeaderOnly(t *testing.T) {
	for _, tc := range []struct{ name, text, say string }{
		{"header only", "user,item,ts\n", `the CSV has a header ("user,item,ts") and no row after it`},
		{"header and blank lines", "user,item,ts\n\n  \n", "and no row after it"},
		{"bad rows", "user,item,ts\nu1\n", "the dead letters say why"},
	} {
		src := NewCSVSource(NewFileSource(strings.NewReader(tc.text), "in.csv"), Fields{})
		readAll(t, src)
		if got := src.Describe(); !strings.Contains(got, tc.say) {
			t.Errorf("%s: Describe() = %q, want it to say %q", tc.name, got, tc.say)
		}
	}
}

// TestFileSourceByteOrderMark: a byte-order mark that starts a file (as
// Excel's "CSV UTF-8" writes one) is skipped, not read as the first
// line's; offsets still count its bytes. One later in the text is data.
func TestFileSourceByteOrderMark(t *testing.T) {
	text := "\xef\xbb\xbf{\"user\":\"u\",\"item\":\"i\"}\n\xef\xbb\xbfx\n"
	got := readAll(t, NewFileSource(bytes.NewReader([]byte(text)), "in"))
	if len(got) != 2 || string(got[0].Value) != `{"user":"u","item":"i"}` || got[1].Pos.Offset != int64(len(text)-len("\xef\xbb\xbfx\n")) || string(got[1].Value) != "\xef\xbb\xbfx" {
		t.Fatalf("read %+v", got)
	}
}

// TestCSVFieldsNameColumns: a fields.* setting that names a column the
// header lacks (a misspelling) stops the read naming it, where the field
// would have gone unread on every row; a cell with spaces about a number
// is the number.
func TestCSVFieldsNameColumns(t *testing.T) {
	text := "uid,iid,timestamp,rating\nu1,i1,1700000000000, 4 \n"
	src := NewCSVSource(NewFileSource(strings.NewReader(text), "t.csv"), Fields{User: "uid", Item: "iid", TS: "timestmp"})
	if _, err := src.Next(context.Background()); err == nil || !strings.Contains(err.Error(), `fields.ts names the column "timestmp", which the header "uid,iid,timestamp,rating" lacks`) {
		t.Fatalf("misspelt fields.ts: %v", err)
	}
	src = NewCSVSource(NewFileSource(strings.NewReader(text), "t.csv"), Fields{User: "uid", Item: "iid", TS: "timestamp"})
	m, err := src.Next(context.Background())
	if err != nil || m.Err != nil || string(m.Value) != `{"uid":"u1","iid":"i1","timestamp":1700000000000,"rating":4}` {
		t.Fatalf("read %q, %v, %v", m.Value, m.Err, err)
	}
}

// TestCSVRepeatedHeader: files joined with their headers repeat the
// header within the data; that row is dead-lettered, not scored as the
// event of user "user" and item "item".
func TestCSVRepeatedHeader(t *testing.T) {
	text := "user,item,event\nu1,i1,click\nuser, item ,event\nu3,i3,click\n"
	src := NewCSVSource(NewFileSource(strings.NewReader(text), "cat.csv"), Fields{})
	var got []Message
	for {
		m, err := src.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Value = bytes.Clone(m.Value) // the next Next reuses its buffer
		got = append(got, m)
	}
	if len(got) != 3 || got[0].Err != nil || got[2].Err != nil || string(got[2].Value) != `{"user":"u3","item":"i3","event":"click"}` {
		t.Fatalf("read %+v", got)
	}
	if m := got[1]; ReasonOf(m.Err) != ReasonNotJSON || !strings.Contains(m.Err.Error(), "the header again") || m.Pos.Line != 3 || string(m.Value) != "user, item ,event" {
		t.Fatalf("the repeated header: line %d %q, %v", m.Pos.Line, m.Value, m.Err)
	}
}

// TestCSVCutLine: a row that a read error cut short is dead-lettered, not
// read as a row, though its cells would pass ("u2,i2,17000" is a time in
// 1970), and the error follows it.
func TestCSVCutLine(t *testing.T) {
	diskErr := errors.New("input/output error")
	text := "user,item,ts\nu1,i1,1700000000000\nu2,i2,17000"
	src := NewCSVSource(NewFileSource(io.MultiReader(strings.NewReader(text), iotest.ErrReader(diskErr)), "in.csv"), Fields{})
	if m, err := src.Next(context.Background()); err != nil || m.Err != nil || string(m.Value) != `{"user":"u1","item":"i1","ts":1700000000000}` {
		t.Fatalf("first row: %q, %v, %v", m.Value, m.Err, err)
	}
	if m, err := src.Next(context.Background()); err != nil || ReasonOf(m.Err) != ReasonNotJSON || string(m.Value) != "u2,i2,17000" || m.Pos.Line != 3 {
		t.Fatalf("cut row: line %d %q, %v, %v", m.Pos.Line, m.Value, m.Err, err)
	}
	var re *ReadError
	if _, err := src.Next(context.Background()); !errors.As(err, &re) || !errors.Is(err, diskErr) || re.Lines != 2 {
		t.Fatalf("after the cut row: %v", err)
	}
}

// TestFileSourceDescribe: an input that yields no event is described by
// what its start looks like, with the fix: UTF-16 text (it was called
// binary data), three tab-separated columns (it pointed to convert
// movielens, which wants four) and four (MovieLens' u.data).
func TestFileSourceDescribe(t *testing.T) {
	for _, tc := range []struct{ name, text, say string }{
		{"UTF-16 with a byte-order mark", "\xff\xfeu\x00s\x00e\x00r\x00\n\x00", "UTF-16 text: convert it to UTF-8, e.g. iconv"},
		{"UTF-16 without one", "u\x00s\x00e\x00r\x00\n\x00", "UTF-16 text"},
		{"three tab-separated columns", "196\t242\t3\n", `three columns (first line "196\t242\t3"): write JSON lines, one event object per line; for user, item, rating: awk`},
		{"four tab-separated columns", "196\t242\t3\t881250949\n", "denoiser-lab convert movielens"},
		{"binary", "\x01\x02\x03xx\x00\x01\x02", "binary data"},
		{"bzip2", "BZh91AY&SY\x8a\x00\x01", "bzip2-compressed (gzip is read as such): decompress it, or pipe it in: bzcat FILE"},
		{"xz", "\xfd7zXZ\x00\x00\x04\xe6", "xz-compressed"},
		{"zstd", "\x28\xb5\x2f\xfd\x04\x58", "zstd-compressed"},
		{"zip", "PK\x03\x04\x14\x00", "zip-compressed"},
	} {
		src := NewFileSource(strings.NewReader(tc.text), "in")
		readAll(t, src)
		if got := src.Describe(); !strings.Contains(got, tc.say) {
			t.Errorf("%s: Describe() = %q, want it to say %q", tc.name, got, tc.say)
		}
		// A CSV's header is checked for the same, before its names.
		csv := NewCSVSource(NewFileSource(strings.NewReader(tc.text), "in.csv"), Fields{})
		if _, err := csv.Next(context.Background()); tc.name != "binary" && !strings.HasPrefix(tc.name, "three") && !strings.HasPrefix(tc.name, "four") &&
			(err == nil || !strings.Contains(err.Error(), tc.say)) {
			t.Errorf("%s as CSV: %v, want it to say %q", tc.name, err, tc.say)
		}
	}
}
