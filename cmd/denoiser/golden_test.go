package main

import (
	"bytes"
	"compress/gzip"
	"context"
	command "denoiser/internal/cli"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

const (
	goldenLog    = "../../testdata/synthetic-20k.jsonl"
	goldenScored = "../../testdata/synthetic-20k.scored.jsonl.gz"
)

// TestReplayGolden replays the recorded synthetic log and requires output
// byte-identical to the golden scored log. The golden file pins the model:
// any change to what it computes shows here. Regenerate it, only when the
// change is meant, with
//
//	go test ./cmd/denoiser -run TestReplayGolden -update
//
// The file is gzip-compressed (the scored log is 6 MB as text); the
// comparison is on the decompressed bytes.
func TestReplayGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 20,000 events")
	}
	out := filepath.Join(t.TempDir(), "scored.jsonl")
	var stderr bytes.Buffer
	args := []string{"--in", goldenLog, "--out", out, "--dead-letter", filepath.Join(t.TempDir(), "dl.jsonl")}
	if err := command.Replay(context.Background(), args, io.Discard, &stderr); err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// The source position names the input file as given; pin it.
	if *update {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(got)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenScored, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes, %d uncompressed)", goldenScored, buf.Len(), len(got))
		return
	}
	f, err := os.Open(goldenScored)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	want, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := 0; i < min(len(gl), len(wl)); i++ {
			if !bytes.Equal(gl[i], wl[i]) {
				t.Fatalf("output differs from %s first at line %d:\n got %s\nwant %s", goldenScored, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("output has %d lines, golden %d", len(gl), len(wl))
	}
}
