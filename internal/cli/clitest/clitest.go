// Package clitest holds the fixtures the tests of both command-line
// binaries share: the shipped event log with bad lines added, and a model
// configuration small enough to keep them fast. It is for tests only.
package clitest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// SmallConfig keeps the replay and demo tests fast.
const SmallConfig = `seed: 3
model:
  dim: 8
  warm_up: 200
  refit_every: 200
  gmm_min_samples: 64
  gmm_window: 512
`

// ReplayLines is how much of the shipped log ReplayInput takes: all of it.
// Distillation, and so the mixture, needs the model to be confident about
// some events, which takes more than a few thousand events (fewer than 15
// per user) to happen.
const ReplayLines = 20000

// ShippedLog is the shipped log's path from a package two levels below
// the repository root (cmd/denoiser, cmd/denoiser-lab).
const ShippedLog = "../../testdata/synthetic-20k.jsonl"

// ReplayInput writes into dir the first ReplayLines lines of the shipped
// log plus two bad lines and a blank one, and returns its path.
func ReplayInput(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(ShippedLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))[:ReplayLines]
	lines = append(lines, []byte("not json\n"), []byte(`{"user":"u1","item":"i1","dwell_ms":-4}`+"\n"), []byte("\n"))
	return WriteFile(t, filepath.Join(dir, "in.jsonl"), string(bytes.Join(lines, nil)))
}

// WriteFile writes content to path and returns path.
func WriteFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ReadFile returns the content of path.
func ReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
