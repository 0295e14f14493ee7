package online

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestInspectAccessors: ids and indices agree both ways, embeddings are
// copies of the model's rows (dst reused, model untouched), and the
// accessors neither change the model nor consume randomness.
func TestInspectAccessors(t *testing.T) {
	m, _ := New(smallConfig(ModeBinary), rand.NewPCG(1, 1))
	runScores(t, m, testStream(800, 3))
	before := encode(t, m)

	if m.Dim() != 8 || m.NumUsers() != m.users.len() || m.NumItems() != m.items.len() || m.NumUsers() == 0 {
		t.Fatalf("dim %d, %d users, %d items", m.Dim(), m.NumUsers(), m.NumItems())
	}
	var row []float64
	for u := range m.NumUsers() {
		j, ok := m.UserIndex(m.UserID(u))
		if !ok || j != u {
			t.Fatalf("user %d: id %q maps back to %d %v", u, m.UserID(u), j, ok)
		}
		row = m.UserEmbedding(row, u)
		if !slices.Equal(row, m.users.vectors[u*m.d:(u+1)*m.d]) {
			t.Fatalf("user %d: embedding %v", u, row)
		}
		row[0] += 1 // a copy: the model must not change
	}
	for i := range m.NumItems() {
		j, ok := m.ItemIndex(m.ItemID(i))
		if !ok || j != i {
			t.Fatalf("item %d: id %q maps back to %d %v", i, m.ItemID(i), j, ok)
		}
		got := m.ItemEmbedding(make([]float64, 0, 1), i)
		if !slices.Equal(got, m.items.vectors[i*m.d:(i+1)*m.d]) {
			t.Fatalf("item %d: embedding %v", i, got)
		}
	}
	if _, ok := m.UserIndex("nobody"); ok {
		t.Fatal("an unknown user has an index")
	}
	if _, ok := m.ItemIndex("nothing"); ok {
		t.Fatal("an unknown item has an index")
	}
	if !bytes.Equal(encode(t, m), before) {
		t.Fatal("the accessors changed the model")
	}
}
