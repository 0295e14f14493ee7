package online

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// deltaChain is what a store holds of a model: a base and the deltas
// saved after it.
type deltaChain struct {
	base   []byte
	deltas [][]byte
}

func (c *deltaChain) restore(t *testing.T) *Model {
	t.Helper()
	readers := make([]io.Reader, len(c.deltas))
	for j, d := range c.deltas {
		readers[j] = bytes.NewReader(d)
	}
	m, err := ReadModelDeltas(bytes.NewReader(c.base), readers)
	if err != nil {
		t.Fatalf("restore base + %d deltas: %v", len(c.deltas), err)
	}
	return m
}

func writeDelta(t *testing.T, cp *Model) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := cp.WriteDelta(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) || n != cp.DeltaSize() {
		t.Fatalf("WriteDelta reported %d bytes, wrote %d, DeltaSize said %d", n, buf.Len(), cp.DeltaSize())
	}
	return buf.Bytes()
}

// churnStream is testStream with new users and items arriving all along,
// so that tables grow and capped ones evict and reuse rows.
func churnStream(n int, seed uint64) []Event {
	evs := testStream(n, seed)
	for j := range evs {
		if j%9 == 0 {
			evs[j].User, evs[j].Item = fmt.Sprint("new-u", j), fmt.Sprint("new-i", j/2)
		}
	}
	return evs
}

// TestDeltaRestoresExactly: a base and the deltas saved after it restore
// the model byte for byte (WriteTo), for every kind of model, with and
// without caps (evictions reuse rows), admission and popularity
// sampling, after chunks of every size (none, one event, many), with
// saves that fail in between (their delta is lost and the next covers
// it), and with new bases now and then. The restored model then goes on
// exactly as the original.
func TestDeltaRestoresExactly(t *testing.T) {
	evs := churnStream(4000, 8)
	for _, cfg := range allModes {
		t.Run(configName(cfg), func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, 9))
			m, _ := New(cfg, rand.NewPCG(4, 4))
			var cp *Model
			var chain deltaChain
			var saves, deltas, failed int
			n := 0
			for chunk := 0; n < len(evs)-500; chunk++ {
				size := []int{0, 1, 2, 17, 300}[r.IntN(5)]
				end := min(n+size, len(evs)-500)
				runScores(t, m, evs[n:end])
				n = end
				cp = m.FrozenCopy(cp)
				switch {
				case !cp.HasDeltaBase() || r.IntN(10) == 0:
					chain = deltaChain{base: encode(t, cp)}
				case r.IntN(5) == 0: // the save fails: the delta is lost
					writeDelta(t, cp)
					failed++
					continue
				default:
					chain.deltas = append(chain.deltas, writeDelta(t, cp))
					deltas++
				}
				cp.MarkSaved()
				saves++
				got := encode(t, chain.restore(t))
				if want := encode(t, m); !bytes.Equal(got, want) {
					t.Fatalf("after %d events (chunk %d of %d, %d deltas): the restored model differs from the model",
						n, chunk, size, len(chain.deltas))
				}
			}
			if deltas < 10 || failed < 3 {
				t.Fatalf("only %d deltas, %d failed saves", deltas, failed)
			}
			// The restored model continues as the model does.
			restored := chain.restore(t)
			want, got := runScores(t, m, evs[n:]), runScores(t, restored, evs[n:])
			for j := range want {
				if fmt.Sprint(want[j]) != fmt.Sprint(got[j]) {
					t.Fatalf("event %d after the restore: %v, want %v", j, got[j], want[j])
				}
			}
			if !bytes.Equal(encode(t, restored), encode(t, m)) {
				t.Fatal("the restored model diverged as it learned")
			}
		})
	}
}

// TestDeltaNeedsASavedCopy: only a frozen copy marked saved writes a
// delta; a copy switched to another model forgets what was saved.
func TestDeltaNeedsASavedCopy(t *testing.T) {
	evs := testStream(500, 3)
	m, _ := New(smallConfig(ModeBinary), rand.NewPCG(1, 1))
	runScores(t, m, evs[:100])
	if _, err := m.WriteDelta(io.Discard); !errors.Is(err, ErrNoDeltaBase) {
		t.Fatalf("WriteDelta of a live model: %v", err)
	}
	cp := m.FrozenCopy(nil)
	if _, err := cp.WriteDelta(io.Discard); !errors.Is(err, ErrNoDeltaBase) {
		t.Fatalf("WriteDelta of a copy never saved: %v", err)
	}
	cp.MarkSaved()
	runScores(t, m, evs[100:200])
	cp = m.FrozenCopy(cp)
	if !cp.HasDeltaBase() {
		t.Fatal("a saved copy has no delta base")
	}
	other, _ := New(smallConfig(ModeBinary), rand.NewPCG(2, 2))
	cp = other.FrozenCopy(cp)
	if cp.HasDeltaBase() || cp.DeltaSize() != 0 {
		t.Fatal("a copy switched to another model kept its delta base")
	}
}

// TestDeltaRefusesTheWrongBase: a delta applies only to the state it was
// written against; a truncated or damaged delta is refused with
// ErrCorrupt, never applied in part as good.
func TestDeltaRefusesTheWrongBase(t *testing.T) {
	evs := testStream(900, 5)
	cfg := smallConfig(ModeBinary)
	m, _ := New(cfg, rand.NewPCG(1, 1))
	runScores(t, m, evs[:300])
	cp := m.FrozenCopy(nil)
	base := encode(t, cp)
	cp.MarkSaved()
	runScores(t, m, evs[300:600])
	cp = m.FrozenCopy(cp)
	first := writeDelta(t, cp)
	cp.MarkSaved()
	runScores(t, m, evs[600:])
	cp = m.FrozenCopy(cp)
	second := writeDelta(t, cp)

	otherCfg := cfg
	otherCfg.LearningRate = 0.123
	other, _ := New(otherCfg, rand.NewPCG(1, 1))
	runScores(t, other, evs[:300])
	otherBase := encode(t, other)

	cases := []struct {
		name   string
		base   []byte
		deltas [][]byte
	}{
		{"second without the first", base, [][]byte{second}},
		{"out of order", base, [][]byte{second, first}},
		{"twice", base, [][]byte{first, first}},
		{"another configuration", otherBase, [][]byte{first}},
		{"truncated", base, [][]byte{first[:len(first)-5]}},
		{"trailing bytes", base, [][]byte{append(append([]byte(nil), first...), 0)}},
		{"bad magic", base, [][]byte{append([]byte("RGBTMODL"), first[8:]...)}},
		{"empty", base, [][]byte{{}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			readers := make([]io.Reader, len(c.deltas))
			for j, d := range c.deltas {
				readers[j] = bytes.NewReader(d)
			}
			if _, err := ReadModelDeltas(bytes.NewReader(c.base), readers); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
	chain := deltaChain{base: base, deltas: [][]byte{first, second}}
	if !bytes.Equal(encode(t, chain.restore(t)), encode(t, m)) {
		t.Fatal("the right chain does not restore the model")
	}
}

// TestDeltaBytesFollowRowsChanged: a delta's size is a fixed part (the
// shared parameters, counters and section headers) plus, per changed row,
// that row's bytes: with no event it is the fixed part alone, and it grows
// with the rows a stream touches, not with the model.
func TestDeltaBytesFollowRowsChanged(t *testing.T) {
	cfg := Config{Dim: 32}.WithDefaults()
	const users, items = 20000, 2000
	m, _ := New(cfg, rand.NewPCG(1, 1))
	var sc Score
	for j := range users {
		m.Step(Event{User: fmt.Sprintf("u%07d", j), Item: fmt.Sprintf("i%07d", j%items)}, &sc)
	}
	model := int64(len(encode(t, m)))
	cp := m.FrozenCopy(nil)
	cp.MarkSaved()
	cp = m.FrozenCopy(cp)
	fixed := cp.DeltaSize()
	if u, i := cp.DeltaRows(); u != 0 || i != 0 {
		t.Fatalf("no event, yet %d users and %d items changed", u, i)
	}
	// A user row: id (4+8), vector, step sum, pushed, recent items, sketch
	// count and signature; an item row: id, vector, step sum, offsets,
	// sketch count and reservoir.
	userRow := int64(4 + 8 + 8*cfg.Dim + 8 + 4 + 4*recentItems + 4 + 8*cfg.SketchHashes/4)
	itemRow := int64(4 + 8 + 8*cfg.Dim + 8 + 8*cfg.K()*cfg.K() + 4 + 4*cfg.SketchUsers)
	r := rand.New(rand.NewPCG(2, 2))
	for _, events := range []int{1, 10, 100, 1000, 5000} {
		cp.MarkSaved()
		for range events {
			m.Step(Event{User: fmt.Sprintf("u%07d", r.IntN(users)), Item: fmt.Sprintf("i%07d", r.IntN(items))}, &sc)
		}
		cp = m.FrozenCopy(cp)
		u, i := cp.DeltaRows()
		rowBytes := int64(u)*userRow + int64(i)*itemRow
		spans := int64(8 * (len(cp.changedUsers) + len(cp.changedItems)))
		size := cp.DeltaSize()
		t.Logf("%5d events: %5d users, %4d items changed: delta %8d bytes (fixed %d, model %d)", events, u, i, size, fixed, model)
		if size != fixed+rowBytes+spans {
			t.Fatalf("%d events: delta of %d bytes, want fixed %d + rows %d + spans %d", events, size, fixed, rowBytes, spans)
		}
		if u > events {
			t.Fatalf("%d events changed %d users", events, u)
		}
	}
	if fixed > model/10 {
		t.Fatalf("the fixed part of a delta, %d bytes, is over a tenth of the model's %d", fixed, model)
	}
}
