package consumer

import (
	"context"
	"testing"
)

// TestKafkaSourceReadySkipsStaleRecords: records fetched in a generation
// that has ended, which Next skips, do not make Ready true (the reader
// would hold what it read waiting for a record that Next never returns);
// a live record does, and Next returns it first.
func TestKafkaSourceReadySkipsStaleRecords(t *testing.T) {
	s := &KafkaSource{recs: make(chan fetched, 4)}
	s.cfg.Topic = "in"
	s.mu.live = 2
	s.mu.next = map[int]int64{0: 10}
	s.mu.emitted = map[int]map[int64]bool{}
	s.recs <- fetched{partition: 0, offset: 3, value: []byte("stale generation"), gen: 1}
	s.recs <- fetched{partition: 0, offset: 9, value: []byte("fetched again"), gen: 2}
	if s.Ready() {
		t.Fatal("Ready with only stale records buffered")
	}
	s.recs <- fetched{partition: 0, offset: 4, value: []byte("stale again"), gen: 1}
	s.recs <- fetched{partition: 0, offset: 10, value: []byte("live"), gen: 2}
	if !s.Ready() || !s.Ready() {
		t.Fatal("not Ready with a live record buffered")
	}
	m, err := s.Next(context.Background())
	if err != nil || string(m.Value) != "live" || m.Pos.Offset != 10 {
		t.Fatalf("Next = %q at %d, %v; want the live record at 10", m.Value, m.Pos.Offset, err)
	}
	if s.Ready() {
		t.Fatal("Ready after the only live record was returned")
	}
}
