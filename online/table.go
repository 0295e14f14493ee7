package online

import (
	"math"
	"math/rand/v2"
)

// table is the embedding table of one side, users or items: the id of
// each row, the id → row index, and per row a vector of dim values, the
// accumulator of its adaptive step and its change stamp. Rows are added in
// order of first appearance; a capped table reuses the rows of evicted ids
// (bounds.go).
type table struct {
	dim int
	// capacity is the most ids the table holds a row for (0: no cap);
	// base is the first row of an id: 1 when row 0 is the cold row, else 0.
	capacity int
	base     int32
	lru      recency // capped tables only
	ids      []string
	index    map[string]int32
	vectors  []float64 // dim per row
	stepSums []float64 // per row: G, the accumulated mean squared gradient
	// stamps[r] is the epoch in which row r last changed (see
	// Model.FrozenCopy). Not encoded; a frozen copy has none.
	stamps []uint64
}

func newTable(dim int) table {
	return table{dim: dim, index: map[string]int32{}}
}

// len is the number of rows.
func (t *table) len() int { return len(t.ids) }

// row is the vector of row r.
func (t *table) row(r int32) []float64 {
	return t.vectors[int(r)*t.dim : int(r+1)*t.dim]
}

// add appends a row for id, with a vector drawn from N(0, scale²) and
// stamped epoch, and returns its index.
func (t *table) add(id string, rnd *rand.Rand, scale float64, epoch uint64) int32 {
	r := int32(len(t.ids))
	t.index[id] = r
	t.ids = append(t.ids, id)
	for j := 0; j < t.dim; j++ {
		t.vectors = append(t.vectors, rnd.NormFloat64()*scale)
	}
	t.stepSums = append(t.stepSums, 0)
	t.stamps = append(t.stamps, epoch)
	if t.capacity > 0 {
		t.lru.grow()
	}
	return r
}

// stepRate adds a gradient's mean square (norm2/dim) to row r's G and
// returns the factor −rate/sqrt(1+G) the row moves by along the gradient
// (row += factor · grad): rows seen often move less.
func (t *table) stepRate(r int32, norm2, rate float64) float64 {
	t.stepSums[r] += norm2 / float64(t.dim)
	return -rate / math.Sqrt(1+t.stepSums[r])
}

// encode writes ids, vectors and step sums.
func (t *table) encode(e *encoder) {
	e.ids(t.ids)
	e.floats(t.vectors)
	e.floats(t.stepSums)
}

// decode reads what encode writes. The index is built by buildIndex once
// the whole model has been read.
func (t *table) decode(d *decoder) {
	t.ids = d.ids()
	n := len(t.ids)
	t.vectors = d.floats(n * t.dim)
	t.stepSums = d.floats(n)
	t.stamps = make([]uint64, n)
}

// buildIndex maps every id to its row; it reports false if an id repeats.
func (t *table) buildIndex() bool {
	t.index = make(map[string]int32, len(t.ids))
	for r, id := range t.ids {
		t.index[id] = int32(r)
	}
	return len(t.index) == len(t.ids)
}

// copyFrom makes t, which holds src's first n rows as they were at its
// last sync, a copy of src: the rows in spans and the rows after n are
// copied. The ids of a table without a cap never change and are shared;
// a capped table reuses rows, so its copy has ids of its own. The index,
// the stamps and the recency list are not copied (a frozen copy looks
// nothing up and does not change); the last sightings are.
func (t *table) copyFrom(src *table, spans []rowSpan, n int) {
	t.dim, t.capacity, t.base = src.dim, src.capacity, src.base
	if src.capacity == 0 {
		t.ids = src.ids[:len(src.ids):len(src.ids)]
	} else {
		if n == 0 {
			t.ids = nil // it may share another model's ids
		}
		t.ids = syncRows(t.ids, src.ids, 1, spans, n)
		t.lru.lastSeen = syncRows(t.lru.lastSeen, src.lru.lastSeen, 1, spans, n)
	}
	t.vectors = syncRows(t.vectors, src.vectors, src.dim, spans, n)
	t.stepSums = syncRows(t.stepSums, src.stepSums, 1, spans, n)
}

// recentItems is how many of a user's latest items the sketch mode keeps to
// keep them out of that user's negative samples.
const recentItems = 32

// userTable is the users' table and, per user, a ring of their latest
// items.
type userTable struct {
	table
	recent []int32  // recentItems per user, the latest items, -1 empty
	pushed []uint32 // items pushed into each user's ring
	// times is each user's latest event time (Event.TimeMS), noTime for
	// none: the gap before the user's next event is read from it
	// (instrumentFeatures). Kept and encoded only in a model with the
	// instrument (Config.DwellDirection "long"); nil else.
	times []int64
	// prior is each user's means of the weight, after the user's prior
	// and before it, and the events they count (userPriorWidth slots a
	// user: userprior.go). Kept and encoded as times is; nil else.
	prior []float64
}

// noTime is a user's latest event time before any event with a time.
const noTime = math.MinInt64

func (t *userTable) add(id string, rnd *rand.Rand, scale float64, epoch uint64) int32 {
	u := t.table.add(id, rnd, scale, epoch)
	t.growRing()
	return u
}

// growRing appends an empty ring of recent items.
func (t *userTable) growRing() {
	t.pushed = append(t.pushed, 0)
	if t.times != nil {
		t.times = append(t.times, noTime)
	}
	if t.prior != nil {
		t.prior = append(t.prior, make([]float64, userPriorWidth)...)
	}
	for j := 0; j < recentItems; j++ {
		t.recent = append(t.recent, -1)
	}
}

// recentOf is user u's ring of latest items.
func (t *userTable) recentOf(u int32) []int32 {
	return t.recent[int(u)*recentItems : int(u+1)*recentItems]
}

// push records item i as user u's latest.
func (t *userTable) push(u, i int32) {
	t.recent[int(u)*recentItems+int(t.pushed[u]%recentItems)] = i
	t.pushed[u]++
}

func (t *userTable) encode(e *encoder) {
	t.table.encode(e)
	e.uint32s(t.pushed)
	e.int32s(t.recent)
}

func (t *userTable) decode(d *decoder) {
	t.table.decode(d)
	n := t.len()
	t.pushed = d.uint32s(n)
	t.recent = d.int32s(n * recentItems)
}

// decodeTimes reads the users' latest event times where the model keeps
// them (times not nil): from the encoding if it has them (has), else
// none known.
func (t *userTable) decodeTimes(d *decoder, has bool) {
	switch {
	case t.times == nil:
	case has:
		t.times = d.int64s(t.len())
	default:
		t.times = make([]int64, t.len())
		for u := range t.times {
			t.times[u] = noTime
		}
	}
}

// checkRecent fails d unless every recent item is -1 or below items.
func (t *userTable) checkRecent(d *decoder, items int) {
	for _, v := range t.recent {
		if v < -1 || int(v) >= items {
			d.fail("item index %d in recent items", v)
			return
		}
	}
}

func (t *userTable) copyFrom(src *userTable, spans []rowSpan, n int) {
	t.table.copyFrom(&src.table, spans, n)
	t.recent = syncRows(t.recent, src.recent, recentItems, spans, n)
	t.pushed = syncRows(t.pushed, src.pushed, 1, spans, n)
	if src.times != nil {
		t.times = syncRows(t.times, src.times, 1, spans, n)
	}
	if src.prior != nil {
		t.prior = syncRows(t.prior, src.prior, userPriorWidth, spans, n)
	}
}

// rowSpan is the rows [lo, hi) of a table.
type rowSpan struct{ lo, hi int32 }

// changedRows appends to dst the spans of consecutive rows whose stamp is
// at least since: a table whose rows all changed is copied in one piece.
func changedRows(dst []rowSpan, stamps []uint64, since uint64) []rowSpan {
	for r, e := range stamps {
		if e < since {
			continue
		}
		if n := len(dst); n > 0 && dst[n-1].hi == int32(r) {
			dst[n-1].hi++
		} else {
			dst = append(dst, rowSpan{int32(r), int32(r) + 1})
		}
	}
	return dst
}

// syncRows makes dst, which holds the first n rows (w values each) of src
// as they were at its last sync, a copy of src: it copies the listed spans
// (those below n; the spans may list new rows too) and appends the rows
// dst lacks.
func syncRows[T any](dst, src []T, w int, spans []rowSpan, n int) []T {
	for _, s := range spans {
		if int(s.lo) >= n {
			break
		}
		hi := min(int(s.hi), n)
		copy(dst[int(s.lo)*w:hi*w], src[int(s.lo)*w:hi*w])
	}
	return append(dst[:n*w], src[n*w:]...)
}
