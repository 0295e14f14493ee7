package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// smallConfig keeps the tests fast.
const smallConfig = `seed: 3
model:
  dim: 8
  warm_up: 200
  refit_every: 200
  gmm_min_samples: 64
  gmm_window: 512
`

// replayLines is how much of the shipped log replayInput takes: all of it,
// so that distillation and the mixture start.
const replayLines = 20000

// replayInput is the shipped log plus two bad lines and a blank one.
func replayInput(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("../../testdata/synthetic-20k.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))[:replayLines]
	lines = append(lines, []byte("not json\n"), []byte(`{"user":"u1","item":"i1","dwell_ms":-4}`+"\n"), []byte("\n"))
	return writeFile(t, filepath.Join(dir, "in.jsonl"), string(bytes.Join(lines, nil)))
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
