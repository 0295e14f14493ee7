package service

import (
	"fmt"
	"strings"
	"testing"

	"denoiser/online"
)

// TestSharedHistoryChains: SharedHistory.Merges follows the model that
// wrote a partition's latest output through the chains of merge points
// of the models it was restored from, on a history where the answer is
// known. Partition 0's first model (writer A) merges at 100 and 200, is
// checkpointed at 200, merges at 200 again (as a model that merged at an
// unchanged position would) and at 300; a crash; writer B restores the
// checkpoint at 200 (its cursors: what A had merged then) and merges at
// 250 and 400. Of A's points, those the checkpoint holds are B's; the
// second at 200 and the one at 300 are not.
func TestSharedHistoryChains(t *testing.T) {
	d := func(w uint64, q int32, seq int64) deltaID { return deltaID{writer: w, q: q, seq: seq} }
	const A, B, C = 0xa, 0xb, 0xc
	h := NewSharedHistory()
	add := func(v []byte) {
		t.Helper()
		if err := h.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	// The deltas of partitions 1 and 2 (writer C), one chunk each.
	for _, id := range []deltaID{d(C, 1, 50), d(C, 2, 60), d(C, 1, 150), d(C, 2, 260), d(C, 1, 350)} {
		add(deltaRecord(t, id, id.seq-10))
	}
	a := chainID{writer: A}
	add(encodeMergePoint(&mergePoint{chain: a, k: 0, p: 0, start: -1, at: 100, ids: []deltaID{d(C, 1, 50)}}).Value)
	add(encodeMergePoint(&mergePoint{chain: a, k: 1, p: 0, start: -1, at: 200, ids: []deltaID{d(C, 2, 60), d(C, 1, 150)}}).Value)
	add(encodeMergePoint(&mergePoint{chain: a, k: 1, p: 0, start: -1, at: 200, ids: []deltaID{d(C, 2, 60), d(C, 1, 150)}}).Value) // sent twice
	add(encodeMergePoint(&mergePoint{chain: a, k: 2, p: 0, start: -1, at: 200, ids: []deltaID{d(C, 2, 260)}}).Value)
	add(encodeMergePoint(&mergePoint{chain: a, k: 3, p: 0, start: -1, at: 300, ids: []deltaID{d(C, 1, 350)}}).Value)
	b := chainID{writer: B}
	cursors := []online.Cursor{{Partition: 1, Seq: 150}, {Partition: 2, Seq: 60}}
	add(encodeMergePoint(&mergePoint{chain: b, k: 0, p: 0, start: 200, cursors: cursors, at: 250, ids: []deltaID{d(C, 2, 260)}}).Value)
	add(encodeMergePoint(&mergePoint{chain: b, k: 1, p: 0, start: 200, cursors: cursors, at: 400, ids: []deltaID{d(C, 1, 350)}}).Value)

	ms, err := h.Merges(0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describe(ms), "100:[1/50] 200:[2/60 1/150] 250:[2/260] 400:[1/350]"; got != want {
		t.Fatalf("merges of partition 0: %s, want %s", got, want)
	}
	// Applied as a replay steps: nothing before offset 100, everything up
	// to 250 before the record at 250.
	if ms.Apply(nil, 99); ms.next != 0 {
		t.Fatalf("applied %d points before offset 100", ms.next)
	}
	// A partition without merge points merges nothing.
	if none, err := h.Merges(5); err != nil || none.Len() != 0 {
		t.Fatalf("partition 5: %v, %v", none, err)
	}

	// A chain with a point missing, and a point that names a delta the
	// history does not hold, are errors.
	gap := NewSharedHistory()
	if err := gap.Add(encodeMergePoint(&mergePoint{chain: a, k: 1, p: 0, start: -1, at: 100}).Value); err == nil || !strings.Contains(err.Error(), "not in the log") {
		t.Fatalf("a chain's second point without its first: %v", err)
	}
	missing := NewSharedHistory()
	if err := missing.Add(encodeMergePoint(&mergePoint{chain: a, k: 0, p: 0, start: -1, at: 100, ids: []deltaID{d(C, 1, 50)}}).Value); err != nil {
		t.Fatal(err)
	}
	if _, err := missing.Merges(0); err == nil || !strings.Contains(err.Error(), "not in the shared log") {
		t.Fatalf("a merged delta that the log lacks: %v", err)
	}
	// A record that is neither: an error, not a panic.
	for _, v := range [][]byte{[]byte("DNSM"), []byte("DNSMxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), []byte("{}")} {
		if err := NewSharedHistory().Add(v); err == nil {
			t.Errorf("record %q read without an error", v)
		}
	}
}

// TestMergePointEncoding: a merge point reads back as written.
func TestMergePointEncoding(t *testing.T) {
	mp := &mergePoint{
		chain: chainID{writer: 1 << 60, n: 7}, k: 3, p: 2, start: 41, at: 99,
		cursors: []online.Cursor{{Partition: 0, Seq: 12}, {Partition: 1, Seq: 40}},
		ids:     []deltaID{{writer: 5, q: 1, seq: 40}, {writer: 6, q: 0, seq: 12}},
	}
	got, err := parseMergePoint(encodeMergePoint(mp).Value)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*got) != fmt.Sprint(*mp) {
		t.Fatalf("read back %+v, wrote %+v", *got, *mp)
	}
}

// deltaRecord is the record of a one-chunk delta of id with an item row.
func deltaRecord(t *testing.T, id deltaID, from int64) []byte {
	t.Helper()
	s := &sharer{writer: id.writer, pub: online.Shared{K: 2, Dim: 1, Items: []string{"i"}, Rows: make([]float64, 1+1+4)}}
	recs, err := s.records(id.q, from, id.seq)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records: %v, %d", err, len(recs))
	}
	return recs[0].Value
}

// describe lists the merge points as "at:[q/seq ...]".
func describe(ms *Merges) string {
	var parts []string
	for _, pt := range ms.points {
		var ids []string
		for _, d := range pt.deltas {
			ids = append(ids, fmt.Sprintf("%d/%d", d.id.q, d.id.seq))
		}
		parts = append(parts, fmt.Sprintf("%d:[%s]", pt.at, strings.Join(ids, " ")))
	}
	return strings.Join(parts, " ")
}
