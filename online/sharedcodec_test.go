package online

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// benchShared is a publication of n item rows of the default shape (d =
// 32, K = 2) and a context delta, with values drawn from a fixed source.
func benchShared(n int) *Shared {
	r := rand.New(rand.NewPCG(1, 2))
	s := &Shared{K: 2, Dim: 32, Events: uint64(n)}
	s.Items = make([]string, n)
	s.Rows = make([]float64, n*s.ItemStride())
	for i := range s.Items {
		s.Items[i] = fmt.Sprint("item-", i)
	}
	for i := range s.Rows {
		s.Rows[i] = r.NormFloat64() * 1e-3
	}
	s.Context = make([]float64, 280)
	for i := range s.Context {
		s.Context[i] = r.Float64()
	}
	s.Types = []string{"view", "click", "cart", "purchase", "return"}
	return s
}

// BenchmarkSharedCodec encodes and decodes a publication of 3,400 item
// rows, what a partition model publishes after 1,000 events of a sparse
// catalogue (docs/perf.md, "The shared deltas' codec"); copy is the floor
// of the same run: one copy of the encoded bytes.
func BenchmarkSharedCodec(b *testing.B) {
	s := benchShared(3400)
	enc, err := s.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for range b.N {
			_ = bytes.Clone(enc)
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for range b.N {
			if _, err := s.MarshalBinary(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for range b.N {
			var d Shared
			if err := d.UnmarshalBinary(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// encodeSharedAsModel encodes s with the model encoding's primitives, in
// the layout MarshalBinary documents: what the encoding was written with
// until stop 57.
func encodeSharedAsModel(t *testing.T, s *Shared) []byte {
	t.Helper()
	var b bytes.Buffer
	e := &encoder{w: bufio.NewWriter(&b)}
	e.write([]byte(sharedMagic))
	e.u32(sharedVersion)
	e.u32(uint32(s.K))
	e.u32(uint32(s.Dim))
	e.ids(s.Items)
	e.u64(uint64(len(s.Rows)))
	e.floats(s.Rows)
	e.ids(s.Types)
	e.u64(uint64(len(s.Context)))
	e.floats(s.Context)
	e.u64(s.Events)
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		t.Fatal(e.err)
	}
	return b.Bytes()
}

// TestSharedAppendBinary checks that AppendBinary writes the bytes the
// model encoding's primitives write, after what b holds, and that the
// decoder refuses what the model decoder refuses.
func TestSharedAppendBinary(t *testing.T) {
	_, published := publishedModel(t)
	for name, s := range map[string]*Shared{"published": &published, "bench": benchShared(50), "empty": {K: 2, Dim: 8}} {
		want := encodeSharedAsModel(t, s)
		got, err := s.AppendBinary([]byte("head"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append([]byte("head"), want...)) {
			t.Fatalf("%s: AppendBinary wrote %d bytes that differ from the model encoding's %d", name, len(got)-4, len(want))
		}
		var back Shared
		if err := back.UnmarshalBinary(want); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, _ := back.MarshalBinary()
		if !bytes.Equal(again, want) {
			t.Fatalf("%s: a decoded delta encodes otherwise", name)
		}
	}

	s := benchShared(3)
	enc, _ := s.MarshalBinary()
	rowsAt := len(sharedMagic) + 12 + idsBytes(s.Items) // the rows' count
	le := binary.LittleEndian
	for name, edit := range map[string]func(b []byte){
		"a value not finite":                  func(b []byte) { le.PutUint64(b[rowsAt+8:], math.Float64bits(math.Inf(1))) },
		"a count the bytes cannot hold":       func(b []byte) { le.PutUint64(b[rowsAt:], 1<<60) },
		"an item count the bytes cannot hold": func(b []byte) { le.PutUint32(b[len(sharedMagic)+12:], 1<<30) },
		"an id over the bound":                func(b []byte) { le.PutUint32(b[len(sharedMagic)+16:], maxIDBytes+1) },
		"rows that do not fit the items":      func(b []byte) { le.PutUint64(b[rowsAt:], uint64(len(s.Rows)-1)) },
	} {
		bad := bytes.Clone(enc)
		edit(bad)
		if err := new(Shared).UnmarshalBinary(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
