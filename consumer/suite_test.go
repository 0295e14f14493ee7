package consumer_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"denoiser/consumer"
	"denoiser/consumer/consumertest"
)

func TestFileSourceSuite(t *testing.T) {
	consumertest.TestSource(t, func(t *testing.T, records [][]byte) (consumer.Source, bool) {
		path := filepath.Join(t.TempDir(), "in.jsonl")
		if err := os.WriteFile(path, append(bytes.Join(records, []byte("\n")), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := consumer.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		return src, true
	})
}
