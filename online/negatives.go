package online

import "slices"

// popRingSize is the number of recent interactions popularity sampling
// draws from.
const popRingSize = 1 << 16

// negativeTries bounds the rejection sampling of one negative.
const negativeTries = 10

// popularRing is the ring of the latest interactions' items, which
// popularity sampling draws negatives from: an item is drawn in
// proportion to its recent interactions.
type popularRing struct {
	items  []int32 // popRingSize slots; nil unless popularity sampling
	pushed uint64  // items pushed
}

func (r *popularRing) push(i int32) {
	r.items[r.pushed%popRingSize] = i
	r.pushed++
}

// filled is the number of slots that hold an item.
func (r *popularRing) filled() int { return int(min(r.pushed, popRingSize)) }

func (r *popularRing) encode(e *encoder) { e.int32s(r.items) }

// decode reads the ring and checks that its filled slots hold items below
// items.
func (r *popularRing) decode(d *decoder, items int) {
	r.items = d.int32s(popRingSize)
	for _, v := range r.items[:min(r.pushed, uint64(len(r.items)))] {
		if v < 0 || int(v) >= items {
			d.fail("item index %d in popularity ring", v)
			return
		}
	}
}

func (r *popularRing) copyFrom(src *popularRing) {
	if src.items != nil {
		r.items = append(r.items[:0], src.items...)
	} else {
		r.items = nil
	}
	r.pushed = src.pushed
}

// sampleNegative draws an item the user has not interacted with (as far as
// the model remembers), or returns -1 after negativeTries draws.
func (m *Model) sampleNegative(u, pos int32) int32 {
	for try := 0; try < negativeTries; try++ {
		var j int32
		if m.popular.items != nil && m.popular.pushed > 0 {
			j = m.popular.items[m.rnd.IntN(m.popular.filled())]
		} else {
			j = m.items.base + int32(m.rnd.IntN(m.items.resident()))
		}
		if j != pos && !m.seen(u, j) {
			return j
		}
	}
	return -1
}

// seen reports whether u interacted with i: exactly in exact mode, among the
// user's last recentItems items in sketch mode.
func (m *Model) seen(u, i int32) bool {
	if ex, ok := m.cooc.(*exactCooc); ok {
		_, found := slices.BinarySearch(ex.userItems[u], i)
		return found
	}
	return containsItem(m.users.recentOf(u), i)
}

// remember records (u,i) in the co-occurrence estimator, the user's recent
// items and the popularity ring and, where the model keeps times, ev's
// time as the user's latest (the later of it and the one before); for an
// event without a time whose user has none either, the count mark of the
// events learned so far (countgap.go). A cold row (bounds.go) stands for many ids: it is remembered in
// none of them, and a pair with one is not co-occurrence evidence.
func (m *Model) remember(u, i int32, ev *Event) {
	m.users.stamps[u], m.items.stamps[i] = m.epoch, m.epoch
	coldUser, coldItem := u < m.users.base, i < m.items.base
	if !coldUser && !coldItem {
		m.cooc.add(u, i, m.rnd)
		m.users.push(u, i)
	}
	if m.users.times != nil && !coldUser {
		switch t := &m.users.times[u]; {
		case ev.HasTime:
			*t = max(*t, max(ev.TimeMS, minTimeMS)) // a time replaces an untimed mark
		case *t == noTime || isUntimed(*t):
			*t = untimed(m.schedule.events + 1) // the count of the user's next event starts after this one
		}
	}
	if m.popular.items != nil && !coldItem {
		m.popular.push(i)
	}
}

// containsItem reports whether s holds v, as slices.Contains does: the
// blocks of eight by containsBlocks (SSE2 on amd64, kernels.go), the rest
// here. The miss, the common answer, reads the whole ring.
func containsItem(s []int32, v int32) bool {
	n := len(s) &^ 7
	if containsBlocks(s[:n], v) {
		return true
	}
	for _, x := range s[n:] {
		if x == v {
			return true
		}
	}
	return false
}
