package consumer

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func readAll(t *testing.T, s Source) []Message {
	t.Helper()
	var out []Message
	for {
		m, err := s.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Value = append([]byte(nil), m.Value...)
		out = append(out, m)
	}
}

func TestFileSourceLines(t *testing.T) {
	huge := strings.Repeat("x", MaxLineBytes+100)
	exact := strings.Repeat("y", MaxLineBytes)
	in := "a\r\n\nb\n" + huge + "\n" + exact + "\r\nlast"
	got := readAll(t, NewFileSource(strings.NewReader(in), "in"))
	want := []struct {
		line   int64
		offset int64
		n      int
		prefix string
	}{
		{1, 0, 1, "a"},
		{2, 3, 0, ""},
		{3, 4, 1, "b"},
		{4, 6, MaxLineBytes + 1, "xxx"},
		{5, 6 + int64(len(huge)) + 1, MaxLineBytes, "yyy"},
		{6, 6 + int64(len(huge)) + 1 + int64(len(exact)) + 2, 4, "last"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i, w := range want {
		m := got[i]
		if m.Pos.File != "in" || m.Pos.Line != w.line || m.Pos.Offset != w.offset || len(m.Value) != w.n || !strings.HasPrefix(string(m.Value), w.prefix) {
			t.Errorf("message %d: pos %+v, %d bytes %.5q; want line %d offset %d, %d bytes %q...", i, m.Pos, len(m.Value), m.Value, w.line, w.offset, w.n, w.prefix)
		}
	}
	// The oversized lines say their real length, the others none; so does
	// one at the end of the input, without a newline.
	for i, size := range []int{0, 0, 0, len(huge), 0, 0} {
		if got[i].Size != size {
			t.Errorf("message %d: Size %d, want %d", i, got[i].Size, size)
		}
	}
	if tail := readAll(t, NewFileSource(strings.NewReader("a\n"+huge), "in")); len(tail) != 2 || tail[1].Size != len(huge) {
		t.Errorf("an oversized last line without a newline: %d messages, Size %d, want %d", len(tail), tail[len(tail)-1].Size, len(huge))
	}
	// The oversized line is rejected as too_large, the exact one is not.
	var ev Event
	if ReasonOf(Decode(got[3].Value, &ev)) != ReasonTooLarge {
		t.Errorf("oversized line not too_large")
	}
	if ReasonOf(Decode(got[4].Value, &ev)) != ReasonNotJSON {
		t.Errorf("1 MiB line rejected for its size")
	}
}

// TestFileSourceReady: Ready reports a line that Next returns without
// reading, not a line's start nor the end of the input.
func TestFileSourceReady(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, "a\nb\nc") // one write: the reader buffers it whole
		pw.Close()
	}()
	s := NewFileSource(pr, "in") // peeks for gzip's magic bytes
	for i, want := range []struct {
		line  string
		ready bool
	}{{"a", true}, {"b", false}, {"c", false}} {
		m, err := s.Next(context.Background())
		if err != nil || string(m.Value) != want.line {
			t.Fatalf("line %d = %q, %v; want %q", i+1, m.Value, err, want.line)
		}
		if got := s.Ready(); got != want.ready {
			t.Fatalf("Ready after %q = %v, want %v", want.line, got, want.ready)
		}
	}
	if _, err := s.Next(context.Background()); err != io.EOF {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
}

// TestFileSourceGzip: a gzip-compressed input reads as its text, from a
// file or a stream; a stream that only starts like gzip is an error.
func TestFileSourceGzip(t *testing.T) {
	text := "{\"user\":\"u\",\"item\":\"i\"}\nsecond\n"
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(text))
	w.Close()
	got := readAll(t, NewFileSource(bytes.NewReader(gz.Bytes()), "in.gz"))
	if len(got) != 2 || string(got[0].Value) != `{"user":"u","item":"i"}` || string(got[1].Value) != "second" {
		t.Fatalf("gzip stream read as %+v", got)
	}
	path := filepath.Join(t.TempDir(), "in.jsonl.gz")
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m, err := s.Next(context.Background()); err != nil || m.Pos.Line != 1 || s.Size() != -1 {
		t.Errorf("OpenFile of gzip: %q %v, size %d (want -1: the text's size is unknown)", m.Value, err, s.Size())
	}
	bad := NewFileSource(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), "bad.gz")
	if _, err := bad.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Errorf("truncated gzip header: %v", err)
	}
}

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(path, []byte("{}\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Size() != 6 {
		t.Errorf("Size = %d", s.Size())
	}
	if n := len(readAll(t, s)); n != 2 {
		t.Errorf("read %d lines", n)
	}
	if s.BytesRead() != 6 {
		t.Errorf("BytesRead = %d", s.BytesRead())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := OpenFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenFile(missing) = %v", err)
	}
	// A directory is refused when it is opened, not read as an input
	// that ends early.
	if _, err := OpenFile(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("OpenFile(a directory) = %v", err)
	}
}

func TestFileSourceCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewFileSource(strings.NewReader("{}\n"), "f").Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v", err)
	}
}

// cutGzip is gzip of text, cut to its first keep bytes.
func cutGzip(t *testing.T, text string, keep int) []byte {
	t.Helper()
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(text))
	w.Close()
	if keep >= gz.Len() {
		t.Fatalf("gzip of %d bytes, cut at %d", gz.Len(), keep)
	}
	return gz.Bytes()[:keep]
}

// TestFileSourceCutGzip: a gzip file cut short (a download that stopped)
// gives its whole lines, then the line it cut as a record to dead-letter,
// then a *ReadError that says where the input ended, on every later call.
func TestFileSourceCutGzip(t *testing.T) {
	var text strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&text, "{\"user\":\"u%d\",\"item\":\"i%d\",\"ts\":%d}\n", i%97, i%13, 1700000000000+int64(i)*7919)
	}
	in := cutGzip(t, text.String(), 4000)
	s := NewFileSource(bytes.NewReader(in), "in.jsonl.gz")
	var whole []string
	var cut Message
	for {
		m, err := s.Next(context.Background())
		if err != nil {
			t.Fatalf("after %d lines: %v, before the cut line", len(whole), err)
		}
		if m.Err != nil {
			cut = m
			break
		}
		whole = append(whole, string(m.Value))
	}
	want := strings.Split(text.String(), "\n")
	if len(whole) == 0 || len(whole) >= len(want)-1 {
		t.Fatalf("%d whole lines of %d before the cut", len(whole), len(want)-1)
	}
	if !slices.Equal(whole, want[:len(whole)]) {
		t.Fatal("the whole lines differ from the text's")
	}
	next := want[len(whole)]
	if len(cut.Value) == 0 || !strings.HasPrefix(next, string(cut.Value)) || len(cut.Value) >= len(next) {
		t.Errorf("cut line %q, want a proper start of %q", cut.Value, next)
	}
	if ReasonOf(cut.Err) != ReasonNotJSON || !strings.Contains(cut.Err.Error(), "the line is cut") || cut.Pos.Line != int64(len(whole))+1 {
		t.Errorf("cut line: line %d, %v (%s)", cut.Pos.Line, cut.Err, ReasonOf(cut.Err))
	}
	offset := int64(len(strings.Join(whole, "\n")) + 1)
	for range 2 {
		_, err := s.Next(context.Background())
		var re *ReadError
		if !errors.As(err, &re) || re.Lines != int64(len(whole)) || re.Offset != offset || !errors.Is(err, io.ErrUnexpectedEOF) ||
			!strings.Contains(err.Error(), "the input ends early") {
			t.Fatalf("after the cut line: %v (%+v), want a ReadError after line %d, byte %d", err, re, len(whole), offset)
		}
	}
}
