package consumertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"denoiser/consumer"
	"denoiser/consumer/input"
)

// SourceFactory returns a Source that yields records, in order, as its
// first len(records) records. Finite reports whether the source then ends
// with io.EOF (a file does; a Kafka topic does not).
type SourceFactory func(t *testing.T, records [][]byte) (src consumer.Source, finite bool)

// TestSource runs the shared Source suite against newSource.
func TestSource(t *testing.T, newSource SourceFactory) {
	t.Run("order and values", func(t *testing.T) {
		var records [][]byte
		for i := range 100 {
			records = append(records, fmt.Appendf(nil, `{"user":"u%d","item":"i%d","pad":"%s"}`, i, i, bytes.Repeat([]byte("x"), i*37)))
		}
		src, finite := newSource(t, records)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var prev input.Position
		for i, want := range records {
			m, err := src.Next(ctx)
			if err != nil {
				t.Fatalf("record %d: Next: %v", i, err)
			}
			if !bytes.Equal(m.Value, want) {
				t.Fatalf("record %d: value %.40q..., want %.40q...", i, m.Value, want)
			}
			if i > 0 && !after(m.Pos, prev) {
				t.Fatalf("record %d: position %s does not follow %s", i, m.Pos, prev)
			}
			prev = m.Pos
		}
		if finite {
			for range 2 {
				if _, err := src.Next(ctx); err != io.EOF {
					t.Fatalf("Next after the last record = %v, want io.EOF", err)
				}
			}
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		src, _ := newSource(t, [][]byte{[]byte(`{"user":"u","item":"i"}`)})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := src.Next(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Next with a cancelled context = %v, want context.Canceled", err)
		}
	})
}

// after reports whether b comes after a in the same input.
func after(b, a input.Position) bool {
	if a.IsFile() != b.IsFile() {
		return false
	}
	if b.IsFile() {
		return b.File == a.File && b.Line > a.Line && b.Offset > a.Offset
	}
	if b.Topic != a.Topic || b.Partition != a.Partition {
		return true // another partition: no order between partitions
	}
	return b.Offset > a.Offset
}
