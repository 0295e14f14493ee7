package producer

import (
	"context"
	"path/filepath"
	"testing"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
)

// TestEncodeAllocs holds the per-record output path to zero allocations:
// the encoders append to a buffer the caller reuses, and the file writers
// reuse theirs. A dead letter's "error" is its error's Error(), which is
// the error's to build: a consumer.RecordError naming a field concatenates
// (one allocation, outside this package), so the cases here carry a
// message that is built already.
func TestEncodeAllocs(t *testing.T) {
	scored := &consumer.Result{
		Pos: input.Position{Topic: "clicks", Partition: 3, Offset: 1234},
		Event: consumer.Event{User: "u\"1234\n", Item: "i98765\u2028", TS: 1700000000000, HasTS: true, Kind: "click",
			DwellMS: 8300, HasDwell: true, Rating: 3.5, HasRating: true, Truth: "noise"},
		Score: online.Score{Reliability: 0.9312, PClean: 0.81234, Posterior: []float64{0.18766, 0.81234}, Label: 1, Distilled: 1, Version: 41},
	}
	text := &consumer.Result{
		Pos: input.Position{File: "clicks.jsonl", Line: 7}, Reason: consumer.ReasonOutOfRange,
		Err: &consumer.RecordError{Reason: consumer.ReasonOutOfRange, Msg: "dwell_ms: -5 is outside 0..86400000"},
		Raw: []byte(`{"user":"u1234","item":"i98765","ts":1700000000000,"dwell_ms":-5}`), RawSize: 64,
	}
	binary := &consumer.Result{
		Pos: input.Position{Topic: "clicks", Offset: 5}, Reason: consumer.ReasonNotJSON,
		Err: &consumer.RecordError{Reason: consumer.ReasonNotJSON, Msg: "not valid JSON"},
		Raw: []byte{0xff, 0xfe, 'a'}, RawSize: 1 << 20,
	}
	buf := make([]byte, 0, 4096)
	dir := t.TempDir()
	sink, err := CreateFileSink(filepath.Join(dir, "scored.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Abort()
	dlq, err := CreateFileDeadLetter(filepath.Join(dir, "dead.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Abort()
	ctx := context.Background()
	tests := []struct {
		name string
		f    func()
	}{
		{"AppendScored", func() { buf = AppendScored(buf[:0], scored) }},
		{"AppendRejected text", func() { buf = AppendRejected(buf[:0], text) }},
		{"AppendRejected binary truncated", func() { buf = AppendRejected(buf[:0], binary) }},
		{"AppendPosition", func() { buf = AppendPosition(buf[:0], scored.Pos) }},
		{"FileSink.Write", func() {
			if err := sink.Write(ctx, scored); err != nil {
				t.Fatal(err)
			}
		}},
		{"FileDeadLetter.Reject", func() {
			if err := dlq.Reject(ctx, binary); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f() // grow the reused buffers
			if n := testing.AllocsPerRun(1000, tt.f); n != 0 {
				t.Fatalf("%.1f allocations per record, want 0", n)
			}
		})
	}
}
