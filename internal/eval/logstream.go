package eval

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"denoiser/consumer"
)

// readLogStream reads a JSON-lines event log, as replay reads it, into a
// stream: each event as the model sees it, genuine where its truth field
// says so. A line that does not decode, or an event without a truth
// field, is an error: the log is an evaluation's input, and a record left
// out would change what is measured.
func readLogStream(ctx context.Context, path string) (*stream, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), consumer.MaxLineBytes+1)
	var (
		s   stream
		dec consumer.Decoder
		ev  consumer.Event
	)
	for line := 1; sc.Scan(); line++ {
		if line%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := dec.Decode(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if ev.Truth == "" {
			return nil, fmt.Errorf("%s:%d: no truth field (want %q or %q on every event)", path, line, consumer.TruthGenuine, consumer.TruthNoise)
		}
		s.events = append(s.events, ev.Model())
		s.genuine = append(s.genuine, ev.Truth == consumer.TruthGenuine)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(s.events) == 0 {
		return nil, fmt.Errorf("%s: no events", path)
	}
	return &s, nil
}
