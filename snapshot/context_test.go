package snapshot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestReadFileContext: a read whose context has ended stops with an error
// wrapping the context's; otherwise it reads as ReadFile does.
func TestReadFileContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := os.WriteFile(path, testSnapshot(t), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ReadFileContext(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReadFile(path)
	if err != nil || s.ChecksumHex() != want.ChecksumHex() || s.Model.Version() != want.Model.Version() {
		t.Fatalf("ReadFileContext and ReadFile differ: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadFileContext(ctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with a cancelled context: %v", err)
	}

	// Cancelled in the middle: the read stops at the next read of the input.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	b := testSnapshot(t)
	in := &cancelAfter{r: bytes.NewReader(b), n: int64(len(b) / 2), cancel: cancel}
	if _, err := read(ctxReader{ctx: ctx, r: in}, -1); !errors.Is(err, context.Canceled) {
		t.Fatalf("read cancelled half way: %v", err)
	}
}

// cancelAfter reads r, calling cancel once n bytes have been read.
type cancelAfter struct {
	r      io.Reader
	n      int64
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), 4096)])
	if c.n -= int64(n); c.n <= 0 {
		c.cancel()
	}
	return n, err
}
