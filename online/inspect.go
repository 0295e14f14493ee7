package online

import "math"

// Read-only accessors for inspecting a model from outside the package
// (snapshot inspect and diff). None of them changes the model, consumes
// randomness or allocates beyond what the caller's dst needs. Like every
// other method they must not run concurrently with Step.

// Dim is the embedding dimension d.
func (m *Model) Dim() int { return m.d }

// NumUsers is the number of user rows; user indices are 0..NumUsers()-1,
// in order of first appearance, but that a capped table reuses an evicted
// user's row, and that with admission (Config.AdmitAfter) row 0 is the
// shared cold row, whose id is "".
func (m *Model) NumUsers() int { return m.users.len() }

// NumItems is the number of item rows, indexed as users are (NumUsers).
func (m *Model) NumItems() int { return m.items.len() }

// UserID returns the id of user index u (0 <= u < NumUsers()).
func (m *Model) UserID(u int) string { return m.users.ids[u] }

// ItemID returns the id of item index i (0 <= i < NumItems()).
func (m *Model) ItemID(i int) string { return m.items.ids[i] }

// UserIndex returns the index of the user with the given id.
func (m *Model) UserIndex(id string) (int, bool) {
	u, ok := m.users.index[id]
	return int(u), ok
}

// ItemIndex returns the index of the item with the given id.
func (m *Model) ItemIndex(id string) (int, bool) {
	i, ok := m.items.index[id]
	return int(i), ok
}

// UserEmbedding copies p_u, the embedding of user index u, into dst (reusing
// its capacity) and returns it.
func (m *Model) UserEmbedding(dst []float64, u int) []float64 {
	return append(dst[:0], m.users.row(int32(u))...)
}

// ItemEmbedding copies q_i, the embedding of item index i, into dst (reusing
// its capacity) and returns it.
func (m *Model) ItemEmbedding(dst []float64, i int) []float64 {
	return append(dst[:0], m.items.row(int32(i))...)
}

// OutOfOrderTypes lists, in order of first appearance, the event types
// Config.EventOrder lists that the model reads as unranked for now,
// the classifier ranking their events below a lower-ranked type's by
// more than orderSlack (outOfOrder); nil where there is none. A caller
// tells of them: the order is the user's, and the model sets it aside for
// these types.
func (m *Model) OutOfOrderTypes() []string {
	var out []string
	for j, r := range m.context.slotRanks {
		if !math.IsNaN(r) && j < len(m.context.types) && m.context.outOfOrder(j) {
			out = append(out, m.context.types[j])
		}
	}
	return out
}

// UnrankedTypes lists, in order of first appearance, the event types the
// model has given a slot of their own (the first 15 it saw) that
// Config.EventOrder does not list, so that they carry no rank; nil for a
// model without an order (or without DwellDirection "long", which reads
// none), and nil while it has seen one type only: a stream of one type
// (MovieLens' "rating") has nothing to rank it against. A caller warns of
// them: a stream whose types are all unranked goes without the rank
// instrument, in silence otherwise.
func (m *Model) UnrankedTypes() []string {
	if len(m.context.types) < 2 {
		return nil
	}
	var out []string
	for j, r := range m.context.slotRanks {
		if math.IsNaN(r) {
			out = append(out, m.context.types[j])
		}
	}
	return out
}
