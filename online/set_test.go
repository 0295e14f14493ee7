package online

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// partitioned assigns each event of evs to one of n partitions by its
// user (as a keyed input topic does).
func partitioned(evs []Event, n int) []int32 {
	ps := make([]int32, len(evs))
	for j, ev := range evs {
		var h uint32
		for _, c := range []byte(ev.User) {
			h = h*31 + uint32(c)
		}
		ps[j] = int32(h % uint32(n))
	}
	return ps
}

func stepSet(t *testing.T, s *Set, evs []Event, ps []int32, order []int) []Score {
	t.Helper()
	out := make([]Score, len(evs))
	for _, j := range order {
		m, err := s.For(ps[j])
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Step(evs[j], &out[j]); err != nil {
			t.Fatalf("event %d: %v", j, err)
		}
	}
	return out
}

// span returns the event indices lo, lo+1, ..., hi-1.
func span(lo, hi int) []int {
	o := make([]int, 0, hi-lo)
	for j := lo; j < hi; j++ {
		o = append(o, j)
	}
	return o
}

// savedSet returns a partition set (seed seed) stepped on the first 1000
// of 3000 events (churnStream(3000, stream), 3 partitions), its frozen
// copy marked saved and the base that copy wrote.
func savedSet(t *testing.T, seed, stream uint64) (Config, []Event, []int32, *Set, *Set, []byte) {
	t.Helper()
	cfg := smallConfig(ModeBinary)
	evs := churnStream(3000, stream)
	ps := partitioned(evs, 3)
	s, err := NewSet(cfg, seed, LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	stepSet(t, s, evs, ps, span(0, 1000))
	cp := s.FrozenCopy(nil)
	base := setBytes(t, cp)
	cp.MarkSaved()
	return cfg, evs, ps, s, cp, base
}

func setBytes(t *testing.T, s *Set) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := s.WriteTo(&b)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(b.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, b.Len())
	}
	return b.Bytes()
}

// TestSetPartitionsAreIndependent: with LayoutPartition, partition p's
// scores are those of a model of its own (NewPartition(cfg, seed, p))
// that saw only p's events, whatever the interleaving of the partitions.
// With LayoutMember the set is the one model of before.
func TestSetPartitionsAreIndependent(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	evs := testStream(3000, 5)
	ps := partitioned(evs, 3)
	inOrder := make([]int, len(evs))
	for j := range inOrder {
		inOrder[j] = j
	}
	// Another interleaving: partition by partition, each in its order.
	byPartition := slices.Clone(inOrder)
	slices.SortStableFunc(byPartition, func(a, b int) int { return int(ps[a] - ps[b]) })

	want := make([]Score, len(evs))
	for p := range int32(3) {
		m, err := NewPartition(cfg, 9, p)
		if err != nil {
			t.Fatal(err)
		}
		for j, ev := range evs {
			if ps[j] == p {
				if err := m.Step(ev, &want[j]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for name, order := range map[string][]int{"input order": inOrder, "partition by partition": byPartition} {
		s, err := NewSet(cfg, 9, LayoutPartition)
		if err != nil {
			t.Fatal(err)
		}
		got := stepSet(t, s, evs, ps, order)
		for j := range evs {
			if got[j].PClean != want[j].PClean || got[j].Weight != want[j].Weight {
				t.Fatalf("%s: event %d (partition %d): p_clean %v weight %v, alone %v %v", name, j, ps[j],
					got[j].PClean, got[j].Weight, want[j].PClean, want[j].Weight)
			}
		}
		if !slices.Equal(s.Keys(), []int32{0, 1, 2}) || s.Version() != uint64(len(evs)) {
			t.Fatalf("%s: keys %v version %d", name, s.Keys(), s.Version())
		}
	}

	one, err := New(cfg, NewSource(9))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSet(cfg, 9, LayoutMember)
	if err != nil {
		t.Fatal(err)
	}
	want = runScores(t, one, evs)
	got := stepSet(t, s, evs, ps, inOrder)
	for j := range evs {
		if got[j].Weight != want[j].Weight {
			t.Fatalf("member layout: event %d weight %v, one model %v", j, got[j].Weight, want[j].Weight)
		}
	}
	if sum := s.Summary(); sum.Events != one.Summary().Events || s.Len() != 1 {
		t.Fatalf("member layout: %d models, summary %+v", s.Len(), sum)
	}
}

// TestSetCheckpointChain: a base and deltas (models stepped, a partition
// new since the base, a save that failed in between) read back to the
// set, byte for byte, which then goes on exactly as the original.
func TestSetCheckpointChain(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	evs := churnStream(4000, 6)
	ps := partitioned(evs, 4)
	s, err := NewSet(cfg, 3, LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	// The first chunk reaches partitions 0-2 only; 3 arrives later.
	var early, late []int
	for j := range evs {
		if j < 1500 && ps[j] == 3 {
			continue
		}
		if j < 1500 {
			early = append(early, j)
		} else {
			late = append(late, j)
		}
	}
	stepSet(t, s, evs, ps, early)
	cp := s.FrozenCopy(nil)
	if cp.HasDeltaBase() {
		t.Fatal("a copy never saved has a delta base")
	}
	if _, err := cp.WriteDelta(&bytes.Buffer{}); !errors.Is(err, ErrNoDeltaBase) {
		t.Fatalf("WriteDelta before a save: %v", err)
	}
	base := setBytes(t, cp)
	cp.MarkSaved()
	var deltas [][]byte
	for i, chunk := range [][]int{late[:500], late[500:900], late[900:]} {
		stepSet(t, s, evs, ps, chunk)
		cp = s.FrozenCopy(cp)
		var b bytes.Buffer
		n, err := cp.WriteDelta(&b)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(b.Len()) || n != cp.DeltaSize() {
			t.Fatalf("delta %d: wrote %d (reported %d), DeltaSize %d", i, b.Len(), n, cp.DeltaSize())
		}
		if i == 1 {
			continue // a failed save: not marked, the next delta covers it
		}
		deltas = append(deltas, b.Bytes())
		cp.MarkSaved()
	}
	got, err := ReadSet(base, deltas, 0, LayoutPartition, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(setBytes(t, got), setBytes(t, s)) {
		t.Fatal("base + deltas do not read back to the set")
	}
	if got.Seed() != 3 || !slices.Equal(got.Keys(), []int32{0, 1, 2, 3}) {
		t.Fatalf("seed %d keys %v", got.Seed(), got.Keys())
	}
	more := testStream(500, 8)
	mp := partitioned(more, 5) // partition 4 is new to both
	order := make([]int, len(more))
	for j := range order {
		order[j] = j
	}
	a, b := stepSet(t, s, more, mp, order), stepSet(t, got, more, mp, order)
	for j := range a {
		if a[j].Weight != b[j].Weight {
			t.Fatalf("after the restore, event %d: weight %v, original %v", j, b[j].Weight, a[j].Weight)
		}
	}

	// Damage is refused, not half read.
	for name, d := range map[string][]byte{
		"truncated":     base[:len(base)-3],
		"trailing byte": append(slices.Clone(base), 0),
		"a delta":       deltas[0],
	} {
		if _, err := ReadSet(d, nil, 0, LayoutPartition, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := ReadSet(base, [][]byte{deltas[1]}, 0, LayoutPartition, nil); err == nil {
		t.Error("a delta against another state was accepted")
	}
}

// TestSetLayouts: a model encoding of before sets reads as the one model
// of LayoutMember, or as the template every partition's model starts
// from; a set per partition does not read as one model.
func TestSetLayouts(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	evs := testStream(1500, 7)
	m, err := New(cfg, NewSource(4))
	if err != nil {
		t.Fatal(err)
	}
	runScores(t, m, evs)
	old := encode(t, m)

	member, err := ReadSet(old, nil, 4, LayoutMember, nil)
	if err != nil {
		t.Fatal(err)
	}
	if member.Len() != 1 || !bytes.Equal(encode(t, member.Model(0)), old) {
		t.Fatal("a model encoding does not read as the member's one model")
	}
	perPartition, err := ReadSet(old, nil, 4, LayoutPartition, nil)
	if err != nil {
		t.Fatal(err)
	}
	if perPartition.Len() != 0 {
		t.Fatalf("%d models before any partition was asked for", perPartition.Len())
	}
	p2, err := perPartition.For(2)
	if err != nil {
		t.Fatal(err)
	}
	// Partition 2 starts as the old model with partition 2's source.
	want, err := ReadModel(bytes.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	*want.src = *NewPartitionSource(4, 2)
	if !bytes.Equal(encode(t, p2), encode(t, want)) {
		t.Fatal("partition 2 does not start from the template with its own source")
	}
	// The template survives a checkpoint: a partition new after the
	// restore starts from it too.
	again, err := ReadSet(setBytes(t, perPartition.FrozenCopy(nil)), nil, 0, LayoutPartition, nil)
	if err != nil {
		t.Fatal(err)
	}
	p5, err := again.For(5)
	if err != nil {
		t.Fatal(err)
	}
	if p5.Version() != m.Version() {
		t.Fatalf("partition 5 after a restore starts at version %d, the template's is %d", p5.Version(), m.Version())
	}
	// Member state read per partition: the model becomes the template.
	fromMember, err := ReadSet(setBytes(t, member.FrozenCopy(nil)), nil, 0, LayoutPartition, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := fromMember.For(1); err != nil || p.Version() != m.Version() {
		t.Fatalf("member state read per partition: %v, version %d", err, p.Version())
	}
	if _, err := ReadSet(setBytes(t, again.FrozenCopy(nil)), nil, 0, LayoutMember, nil); !errors.Is(err, ErrLayout) {
		t.Fatalf("partition state read as one model: %v, want ErrLayout", err)
	}
	if _, err := NewSet(cfg, 1, Layout("shared")); err == nil {
		t.Fatal("an unknown layout was accepted")
	}
}

// TestSetReplace: a model that Replace swaps in (a partition restored
// from elsewhere) is copied and written whole by the next checkpoint, so
// that base + deltas read back to the set with the new model; the set then
// learns on exactly as the swapped-in model does on its own.
func TestSetReplace(t *testing.T) {
	cfg, evs, ps, s, cp, base := savedSet(t, 5, 7)

	// Partition 1's model, learned elsewhere: another set that saw
	// partition 1's events of the first 2000 events.
	other, err := NewSet(cfg, 5, LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	var ones []int
	for j := range 2000 {
		if ps[j] == 1 {
			ones = append(ones, j)
		}
	}
	stepSet(t, other, evs, ps, ones)
	var enc bytes.Buffer
	if _, err := other.Model(1).WriteTo(&enc); err != nil {
		t.Fatal(err)
	}
	restored, err := ReadModel(bytes.NewReader(enc.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Replace(1, restored); err != nil {
		t.Fatal(err)
	}
	if err := cp.Replace(1, restored); err == nil {
		t.Error("Replace on a frozen copy was accepted")
	}
	var rest []int // partitions 0 and 2 go on from 1000; 1 from 2000
	for j := 1000; j < 2500; j++ {
		if ps[j] != 1 || j >= 2000 {
			rest = append(rest, j)
		}
	}
	got := stepSet(t, s, evs, ps, rest)
	want := stepSet(t, other, evs, ps, slices.DeleteFunc(slices.Clone(rest), func(j int) bool { return ps[j] != 1 }))
	for _, j := range rest {
		if ps[j] == 1 && got[j].Weight != want[j].Weight {
			t.Fatalf("event %d of partition 1: weight %v, the restored model's own %v", j, got[j].Weight, want[j].Weight)
		}
	}
	cp = s.FrozenCopy(cp)
	var d bytes.Buffer
	if _, err := cp.WriteDelta(&d); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSet(base, [][]byte{d.Bytes()}, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(setBytes(t, back), setBytes(t, s)) {
		t.Fatal("base + delta after a Replace do not read back to the set")
	}
	cp.MarkSaved()
	stepSet(t, s, evs, ps, span(2500, 3000))
	cp = s.FrozenCopy(cp)
	var d2 bytes.Buffer
	if _, err := cp.WriteDelta(&d2); err != nil {
		t.Fatal(err)
	}
	back, err = ReadSet(base, [][]byte{d.Bytes(), d2.Bytes()}, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(setBytes(t, back), setBytes(t, s)) {
		t.Fatal("the delta after the one that held the replaced model does not read back")
	}
}

// TestSetRemove: a removed partition leaves the set, its next frozen copy
// and the delta after, which reads back without it; the partitions left
// go on as before, and a removed partition asked for again starts anew.
func TestSetRemove(t *testing.T) {
	cfg, evs, ps, s, cp, base := savedSet(t, 4, 9)

	if err := s.Remove(1); err != nil {
		t.Fatal(err)
	}
	if err := cp.Remove(0); err == nil {
		t.Error("Remove on a frozen copy was accepted")
	}
	if s.Model(1) != nil || !slices.Equal(s.Keys(), []int32{0, 2}) {
		t.Fatalf("after Remove(1): keys %v", s.Keys())
	}
	rest := slices.DeleteFunc(span(1000, 2000), func(j int) bool { return ps[j] == 1 })
	stepSet(t, s, evs, ps, rest)
	cp = s.FrozenCopy(cp)
	if !slices.Equal(cp.Keys(), []int32{0, 2}) {
		t.Fatalf("frozen copy keys %v, want [0 2]", cp.Keys())
	}
	var d bytes.Buffer
	n, err := cp.WriteDelta(&d)
	if err != nil {
		t.Fatal(err)
	}
	if n != cp.DeltaSize() {
		t.Fatalf("delta of %d bytes, DeltaSize %d", n, cp.DeltaSize())
	}
	back, err := ReadSet(base, [][]byte{d.Bytes()}, 0, LayoutPartition, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Keys(), []int32{0, 2}) || !bytes.Equal(setBytes(t, back), setBytes(t, s)) {
		t.Fatalf("base + delta after Remove read back keys %v, not the set", back.Keys())
	}

	// Asked for again, partition 1 starts from the configuration: it
	// scores as a new set's partition 1 on the same events.
	fresh, err := NewSet(cfg, 4, LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	ones := slices.DeleteFunc(span(2000, 3000), func(j int) bool { return ps[j] != 1 })
	got, want := stepSet(t, s, evs, ps, ones), stepSet(t, fresh, evs, ps, ones)
	for _, j := range ones {
		if got[j].Weight != want[j].Weight {
			t.Fatalf("event %d: weight %v, a new model's %v", j, got[j].Weight, want[j].Weight)
		}
	}

	m, err := NewSet(cfg, 4, LayoutMember)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(0); err == nil {
		t.Error("Remove in a member set was accepted")
	}
}
