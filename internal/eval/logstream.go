package eval

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"

	"denoiser/consumer"
)

// readLogStream reads a JSON-lines event log, as replay reads it, into a
// stream: each event as the model sees it, genuine where its truth field
// says so. A blank line holds no record and is skipped, as replay skips
// it. A line that does not decode, or an event without a truth
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
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue // no record, as replay skips it
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

// LoadEventLog reads an event log with a truth field on every event
// (readLogStream) as a data set for eval recommend: every event is a
// positive, rated 5 where it is genuine and 1 where it is noise, so that
// the clean test (CleanTest(·, 5)) is the genuine events and a rating ≤ 2
// is noise. Ids are dense in the order of their first event. The log's
// order is its clock: Rows[n].Seconds is n (SortByTime keeps the order),
// and Events[n] is the event as replay gives it to the model, its user
// and item renamed UserID and ItemID of the dense ids, so that the
// denoiser's f can rank them (modelScorer).
func LoadEventLog(ctx context.Context, path string) (*Dataset, error) {
	s, err := readLogStream(ctx, path)
	if err != nil {
		return nil, err
	}
	users, items := map[string]int32{}, map[string]int32{}
	d := &Dataset{Rows: make([]Interaction, len(s.events)), Events: s.events}
	for n := range s.events {
		e := &d.Events[n]
		u, i := denseID(users, e.User), denseID(items, e.Item)
		e.User, e.Item = UserID(u), ItemID(i)
		r := 1
		if s.genuine[n] {
			r = 5
		}
		d.Rows[n] = Interaction{User: u, Item: i, Rating: r, Clean: r, Seconds: int64(n)}
	}
	d.Users, d.Items = len(users), len(items)
	return d, nil
}

// denseID is id's index in m, the next free one (len(m)) for an id not
// yet in it: ids dense in the order of their first appearance.
func denseID(m map[string]int32, id string) int32 {
	k, ok := m[id]
	if !ok {
		k = int32(len(m))
		m[id] = k
	}
	return k
}
