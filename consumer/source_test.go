package consumer

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
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
	// The oversized line is rejected as too_large, the exact one is not.
	var ev Event
	if ReasonOf(Decode(got[3].Value, &ev)) != ReasonTooLarge {
		t.Errorf("oversized line not too_large")
	}
	if ReasonOf(Decode(got[4].Value, &ev)) != ReasonNotJSON {
		t.Errorf("1 MiB line rejected for its size")
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
}

func TestFileSourceCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewFileSource(strings.NewReader("{}\n"), "f").Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v", err)
	}
}
