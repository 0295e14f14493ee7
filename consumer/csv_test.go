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
		{"tabs", "user\titem\tts\n", "not separated by commas"},
		{"semicolons", "user;item\n", "not separated by commas"},
		{"another format's names", "user_id,item_id,behavior_type,timestamp\n", "rename user_id to user, item_id to item, timestamp to ts, behavior_type to event"},
		{"capitals", "User,Item,TS\n", "case-sensitive"},
		{"MovieLens ratings.csv", "userId,movieId,rating,timestamp\n", "convert movielens"},
		{"other names", "uid,iid\n", "names no user and item column"},
	} {
		src := NewCSVSource(NewFileSource(strings.NewReader(tc.text), "in.csv"), Fields{})
		_, err := src.Next(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.say) || !strings.Contains(src.Describe(), tc.say) {
			t.Errorf("%s: %v, want an error that says %q", tc.name, err, tc.say)
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
