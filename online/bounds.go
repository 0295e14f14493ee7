package online

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Bounded tables: a cap on the rows of each side, admission after a few
// sightings, and least-recently-seen eviction (Config.MaxUsers, MaxItems,
// AdmitAfter). With none of them set the tables grow with every new id,
// as they always did, and nothing here runs.
//
// Admission. An id not in its table is looked up in a count-min sketch
// (admission) with conservative update; at its AdmitAfter-th sighting it
// gets a row. Until then its events are scored with its side's cold row:
// row 0 of each table, id "", shared by every unadmitted id. The cold row
// is zero and stays zero, so a pair with one is scored by the shared
// parameters alone (the biases, T̂'s bias and, for an admitted item, its
// offsets), which go on learning from it; neither embedding of such a
// pair learns from it (apply). A cold row keeps no co-occurrence state, no
// recent items and no place in the popularity ring, and is never a
// sampled negative: it stands for many ids at once.
//
// Eviction. A capped table keeps its rows in a doubly linked list, most
// recently seen first, threaded through per-row prev/next indices: a
// sighting moves its row to the front, and an id admitted to a full table
// takes the row at the back, whose id is evicted. The order is the
// model's own clock (one tick per event), never the wall clock, so
// eviction is deterministic; each row's last tick is kept (and encoded),
// and the list is rebuilt from it on reading. A reused row starts as a new
// id's would: a fresh random vector, no step history, no recent items, no
// transition offsets (o_i, and u_u with Config.TransitionUserOffset),
// empty co-occurrence state. What other rows recorded
// about the evicted id is not scrubbed (it would cost a scan of every
// row): a user's ring of recent items and the popularity ring may name an
// item row now held by another item, and an item's sketch reservoir a user
// row now held by another user, until they are overwritten. The exact
// co-occurrence sets, which are cheap to clean, are cleaned.

const (
	// maxRows bounds max_users and max_items: a row index is an int32 and
	// the cold row takes one.
	maxRows = math.MaxInt32 - 1
	// maxAdmitAfter is the largest admission threshold: the sketch's
	// counters are bytes.
	maxAdmitAfter = 255
	// admitDepth is the number of rows (hash functions) of the admission
	// sketch; the width is Config.AdmitSketchWidth.
	admitDepth = 4
	// The range of Config.AdmitSketchWidth.
	minSketchWidth = 1 << 10
	maxSketchWidth = 1 << 26
)

// coldRow is the row of the shared cold row in a table that has one.
const coldRow int32 = 0

// Salts that keep a user and an item of the same id apart in the
// admission sketch.
const (
	saltUser byte = 'u'
	saltItem byte = 'i'
)

// bounds are the counters of admission and eviction.
type bounds struct {
	// clock ticks once per event that reaches the tables; a row's
	// lastSeen is the tick of its latest sighting.
	clock                      uint64
	usersEvicted, itemsEvicted uint64
	coldUsers, coldItems       uint64 // events scored with a cold row, per side
}

// recency is a capped table's order of last sightings.
type recency struct {
	lastSeen []uint64 // per row, the clock at its latest sighting; 0 for the cold row
	// prev and next link the rows most recent first, -1 ending the list;
	// head is the most recently seen row, tail the least, -1 when empty.
	// Rebuilt from lastSeen on reading; a frozen copy has none.
	prev, next []int32
	head, tail int32
}

// grow appends an unlinked row.
func (l *recency) grow() {
	l.lastSeen = append(l.lastSeen, 0)
	l.prev = append(l.prev, -1)
	l.next = append(l.next, -1)
}

func (l *recency) unlink(r int32) {
	p, n := l.prev[r], l.next[r]
	if p >= 0 {
		l.next[p] = n
	} else {
		l.head = n
	}
	if n >= 0 {
		l.prev[n] = p
	} else {
		l.tail = p
	}
}

func (l *recency) pushFront(r int32) {
	l.prev[r], l.next[r] = -1, l.head
	if l.head >= 0 {
		l.prev[l.head] = r
	} else {
		l.tail = r
	}
	l.head = r
}

// touch records a sighting at tick now of row r, which is in the list.
func (l *recency) touch(r int32, now uint64) {
	l.lastSeen[r] = now
	if l.head != r {
		l.unlink(r)
		l.pushFront(r)
	}
}

// rebuild links rows base..len-1 in the order of their last sightings
// (ties, which a model never writes, by row).
func (l *recency) rebuild(base int32) {
	n := len(l.lastSeen)
	l.prev, l.next = make([]int32, n), make([]int32, n)
	l.head, l.tail = -1, -1
	order := make([]int32, 0, max(n-int(base), 0))
	for r := base; int(r) < n; r++ {
		order = append(order, r)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmpUint64(l.lastSeen[a], l.lastSeen[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	for _, r := range order {
		l.pushFront(r)
	}
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// touch records a sighting of row r at tick now, if the table is capped,
// and stamps the row changed in epoch: its last tick is part of it, even
// if the event then teaches the row nothing.
func (t *table) touch(r int32, now, epoch uint64) {
	if t.capacity > 0 {
		t.lru.touch(r, now)
		t.stamps[r] = epoch
	}
}

// resident is the number of ids with a row of their own.
func (t *table) resident() int { return t.len() - int(t.base) }

// place gives id a row and reports whether that evicted another id: a new
// row while the table has room, else the least recently seen id's row,
// reset as a new row would start.
func (t *table) place(id string, rnd *rand.Rand, scale float64, epoch, now uint64) (r int32, evicted bool) {
	if t.capacity == 0 || t.resident() < t.capacity {
		r = t.add(id, rnd, scale, epoch)
		if t.capacity > 0 {
			t.lru.lastSeen[r] = now
			t.lru.pushFront(r)
		}
		return r, false
	}
	r = t.lru.tail
	delete(t.index, t.ids[r])
	t.ids[r] = id
	t.index[id] = r
	row := t.row(r)
	for j := range row {
		row[j] = rnd.NormFloat64() * scale
	}
	t.stepSums[r] = 0
	t.stamps[r] = epoch
	t.lru.touch(r, now)
	return r, true
}

func (t *userTable) place(id string, rnd *rand.Rand, scale float64, epoch, now uint64) (int32, bool) {
	u, evicted := t.table.place(id, rnd, scale, epoch, now)
	if !evicted {
		t.growRing()
		return u, false
	}
	t.pushed[u] = 0
	if t.times != nil {
		t.times[u] = noTime
	}
	if t.prior != nil {
		clear(t.prior[int(u)*userPriorWidth : int(u+1)*userPriorWidth])
	}
	ring := t.recentOf(u)
	for j := range ring {
		ring[j] = -1
	}
	return u, true
}

// userID returns the row of user id: its own if it has one or is
// admitted now, else the cold row.
func (m *Model) userID(id string) int32 {
	if u, ok := m.users.index[id]; ok {
		m.users.touch(u, m.bounds.clock, m.epoch)
		return u
	}
	if m.admission != nil && !m.admission.see(idHash(saltUser, id), m.cfg.AdmitAfter, m.epoch) {
		m.bounds.coldUsers++
		return coldRow
	}
	u, evicted := m.users.place(id, m.rnd, m.cfg.InitScale, m.epoch, m.bounds.clock)
	if evicted {
		m.bounds.usersEvicted++
		m.transition.resetUser(u)
		m.cooc.dropUser(u, m.items.stamps, m.epoch)
	} else {
		m.transition.addUser()
		m.cooc.grow(m.users.len(), m.items.len())
	}
	return u
}

// itemID returns the row of item id, as userID does for users.
func (m *Model) itemID(id string) int32 {
	if i, ok := m.items.index[id]; ok {
		m.items.touch(i, m.bounds.clock, m.epoch)
		return i
	}
	if m.admission != nil && !m.admission.see(idHash(saltItem, id), m.cfg.AdmitAfter, m.epoch) {
		m.bounds.coldItems++
		return coldRow
	}
	return m.addItemRow(id)
}

// addItemRow gives item id a row (itemID, and Merge for an item it has
// not seen): a new one, or the row of the least recently seen item.
func (m *Model) addItemRow(id string) int32 {
	i, evicted := m.items.place(id, m.rnd, m.cfg.InitScale, m.epoch, m.bounds.clock)
	if evicted {
		m.bounds.itemsEvicted++
		m.transition.resetItem(i)
		m.cooc.dropItem(i, m.users.stamps, m.epoch)
		if m.itemPriors != nil {
			clear(m.itemPriors[int(i)*userPriorWidth : int(i+1)*userPriorWidth])
		}
	} else {
		m.transition.addItem()
		m.growItemPriors()
		m.cooc.grow(m.users.len(), m.items.len())
	}
	m.shareRowAdded(i)
	return i
}

// addColdRows gives each table its cold row, row 0, zero (New, with
// admission).
func (m *Model) addColdRows() {
	clear(m.users.row(m.users.add("", m.rnd, 0, m.epoch)))
	clear(m.items.row(m.items.add("", m.rnd, 0, m.epoch)))
	m.transition.addUser()
	m.transition.addItem()
	m.growItemPriors()
	m.cooc.grow(m.users.len(), m.items.len())
}

// growItemPriors appends an empty prior row for a new item row, where the
// model keeps the items' priors.
func (m *Model) growItemPriors() {
	if m.itemPriors != nil {
		m.itemPriors = append(m.itemPriors, make([]float64, userPriorWidth)...)
	}
}

// admission is a count-min sketch of the sightings of ids that have no
// row (Cormode & Muthukrishnan 2005), with conservative update (a
// sighting raises only the id's smallest counters, Estan & Varghese
// 2002), and halving of every counter each width sightings (TinyLFU's
// reset, Einziger et al. 2017), so that old sightings fade and counters do
// not fill up. Its estimate of an id's sightings is never below the true
// count since the last halving and exceeds it only by collisions.
type admission struct {
	width int     // columns per row, a power of two
	cells []uint8 // admitDepth rows of width counters, saturating at 255
	added uint64  // sightings since the last halving
	// stamps[b] is the epoch in which block b (admitBlock cells) of cells
	// last changed, as a table's row stamps (FrozenCopy, WriteDelta).
	// Not encoded; a frozen copy has none.
	stamps []uint64
}

// admitBlock is the number of sketch cells one change stamp covers: a
// delta writes the blocks that changed, not the whole sketch. The
// smallest sketch (4 rows of minSketchWidth) is one block.
const admitBlock = 4096

// newAdmission returns the sketch of width columns, its cells zero.
func newAdmission(width int) *admission {
	return &admission{width: width, cells: make([]uint8, admitDepth*width), stamps: make([]uint64, admitDepth*width/admitBlock)}
}

// admitSeeds make the admitDepth column hashes of an id's hash.
var admitSeeds = [admitDepth]uint64{
	0x8f3b1c5a2d7e9f01, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1, 0x510e527fade682d1,
}

// idHash is FNV-1a (64 bits) of salt and id: fixed, so that a model's
// admissions do not depend on the process.
func idHash(salt byte, id string) uint64 {
	h := uint64(14695981039346656037)
	h = (h ^ uint64(salt)) * 1099511628211
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 1099511628211
	}
	return h
}

// columns writes the cell index of each row for hash h.
func (a *admission) columns(h uint64, cols *[admitDepth]int) {
	mask := uint64(a.width - 1)
	for r, seed := range admitSeeds {
		cols[r] = r*a.width + int(mix64(h^seed)&mask)
	}
}

// estimate is the sketch's count for hash h.
func (a *admission) estimate(h uint64) int {
	var cols [admitDepth]int
	a.columns(h, &cols)
	est := uint8(math.MaxUint8)
	for _, c := range cols {
		est = min(est, a.cells[c])
	}
	return int(est)
}

// see counts a sighting of hash h in epoch and reports whether its count
// has reached threshold.
func (a *admission) see(h uint64, threshold int, epoch uint64) bool {
	var cols [admitDepth]int
	a.columns(h, &cols)
	est := uint8(math.MaxUint8)
	for _, c := range cols {
		est = min(est, a.cells[c])
	}
	if est < math.MaxUint8 {
		for _, c := range cols {
			if a.cells[c] == est {
				a.cells[c] = est + 1
				a.stamps[c/admitBlock] = epoch
			}
		}
		est++
	}
	if a.added++; a.added >= uint64(a.width) {
		for j, v := range a.cells {
			a.cells[j] = v >> 1
		}
		for b := range a.stamps {
			a.stamps[b] = epoch
		}
		a.added = 0
	}
	return int(est) >= threshold
}

// copyFrom makes a a copy of src. If incremental, a holds src as it was
// but for the cells of the listed blocks, and only those are copied.
func (a *admission) copyFrom(src *admission, blocks []rowSpan, incremental bool) {
	a.width, a.added = src.width, src.added
	if incremental && len(a.cells) == len(src.cells) {
		syncRows(a.cells, src.cells, admitBlock, blocks, len(src.cells)/admitBlock)
		return
	}
	a.cells = append(a.cells[:0], src.cells...)
}

// encodeBounds writes the BNDS section (FORMAT.md): the counters, the
// last sightings of each capped table, the admission sketch.
func (m *Model) encodeBounds(e *encoder) {
	b := &m.bounds
	for _, v := range [...]uint64{b.clock, b.usersEvicted, b.itemsEvicted, b.coldUsers, b.coldItems} {
		e.u64(v)
	}
	if m.users.capacity > 0 {
		e.uint64s(m.users.lru.lastSeen)
	}
	if m.items.capacity > 0 {
		e.uint64s(m.items.lru.lastSeen)
	}
	if a := m.admission; a != nil {
		e.u64(a.added)
		e.write(a.cells)
	}
}

// decodeBounds reads what encodeBounds writes and links the capped
// tables' rows in the order of their last sightings.
func (m *Model) decodeBounds(d *decoder) {
	b := &m.bounds
	b.clock, b.usersEvicted, b.itemsEvicted, b.coldUsers, b.coldItems = d.u64(), d.u64(), d.u64(), d.u64(), d.u64()
	for _, t := range [...]*table{&m.users.table, &m.items} {
		if t.capacity > 0 {
			t.lru.lastSeen = d.uint64s(t.len())
			if d.err == nil {
				t.lru.rebuild(t.base)
			}
		}
	}
	if a := m.admission; a != nil {
		a.added = d.u64()
		a.cells = readSlice(d, admitDepth*a.width, 1, func(b []byte) uint8 { return b[0] })
		if d.err == nil && a.added >= uint64(a.width) {
			d.fail("admission sketch counted %d sightings of %d before halving", a.added, a.width)
		}
	}
}

// checkRows fails d unless each table holds at most its capacity of ids,
// its cold row (id "") if it has one, and no other empty id.
func (m *Model) checkRows(d *decoder) {
	for _, t := range [...]*table{&m.users.table, &m.items} {
		switch {
		case d.err != nil:
		case t.base > 0 && (t.len() == 0 || t.ids[coldRow] != ""):
			d.fail("no cold row")
		case t.capacity > 0 && t.resident() > t.capacity:
			d.fail("%d rows over a cap of %d", t.resident(), t.capacity)
		case slices.Contains(t.ids[t.base:], ""):
			d.fail("empty id")
		}
	}
}

// RowBytes is the memory of one user row and one item row of a model of
// configuration c in its per-row arrays: the embedding, the step
// accumulator and change stamp, the id's string header, the recent items
// (users), the transition offsets (items, and users with
// TransitionUserOffset), the co-occurrence sketch's
// share (the exact estimator's sets are counted as empty), and the
// recency of a capped table. Not counted: the id's bytes, its entry in
// the id → row map (about 30 bytes with a short id), the slack of
// growing arrays, and a frozen copy, which holds the arrays again.
func (c Config) RowBytes() (user, item int) {
	c = c.WithDefaults()
	const f64, i32, u32, u64, i64, str, slice = 8, 4, 4, 8, 8, 16, 24
	row := c.Dim*f64 + f64 + u64 + str // vector, step sum, stamp, id
	user = row + recentItems*i32 + u32 // recent items, pushed
	item = row + c.K()*c.K()*f64       // transition offsets
	if c.DwellDirection == DwellLong {
		user += i64 + userPriorWidth*f64 // latest event time, prior
		item += userPriorWidth * f64     // prior
	}
	if c.TransitionUserOffset {
		user += c.K() * c.K() * f64 // transition offsets
	}
	if c.Cooccurrence == CoocExact {
		user += slice
		item += slice
	} else {
		user += u32 + c.SketchHashes/4*u64                     // count, signature
		item += u32 + c.SketchUsers*i32 + c.SketchHashes/4*u64 // count, reservoir, hashes
	}
	const recency = u64 + 2*i32 // last sighting, prev, next
	if c.MaxUsers > 0 {
		user += recency
	}
	if c.MaxItems > 0 {
		item += recency
	}
	return user, item
}

// maxReserveBytes bounds what New reserves for a capped table (see
// reserve).
const maxReserveBytes = 16 << 30

// reserve gives each capped table's arrays room for the cap's rows up
// front (New), when they take at most maxReserveBytes: the arrays then
// never grow by copying, which would hold an old and a new array at once,
// and never overshoot the cap. The room is address space; memory is
// touched as rows are added.
func (m *Model) reserve() {
	base := 0
	if m.cfg.admits() {
		base = 1
	}
	userBytes, itemBytes := m.cfg.RowBytes()
	if n := m.cfg.MaxUsers + base; m.cfg.MaxUsers > 0 && n*userBytes <= maxReserveBytes {
		m.users.reserve(n)
		m.users.recent = reserveRows(m.users.recent, n*recentItems)
		m.users.pushed = reserveRows(m.users.pushed, n)
		if m.users.times != nil {
			m.users.times = reserveRows(m.users.times, n)
		}
		if m.users.prior != nil {
			m.users.prior = reserveRows(m.users.prior, n*userPriorWidth)
		}
		if m.transition.perUser {
			m.transition.userOffsets = reserveRows(m.transition.userOffsets, n*m.k*m.k)
		}
		m.cooc.reserve(n, 0)
	}
	if n := m.cfg.MaxItems + base; m.cfg.MaxItems > 0 && n*itemBytes <= maxReserveBytes {
		m.items.reserve(n)
		m.transition.offsets = reserveRows(m.transition.offsets, n*m.k*m.k)
		if m.itemPriors != nil {
			m.itemPriors = reserveRows(m.itemPriors, n*userPriorWidth)
		}
		m.cooc.reserve(0, n)
	}
}

// reserve gives the table's arrays room for n rows.
func (t *table) reserve(n int) {
	t.ids = reserveRows(t.ids, n)
	t.vectors = reserveRows(t.vectors, n*t.dim)
	t.stepSums = reserveRows(t.stepSums, n)
	t.stamps = reserveRows(t.stamps, n)
	t.lru.lastSeen = reserveRows(t.lru.lastSeen, n)
	t.lru.prev = reserveRows(t.lru.prev, n)
	t.lru.next = reserveRows(t.lru.next, n)
}

// reserveRows returns s with capacity for n more values. Unlike
// slices.Grow it does not write the room (a large make comes as untouched
// pages), so the reservation costs no resident memory until it is used.
func reserveRows[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	r := make([]T, len(s), len(s)+n)
	copy(r, s)
	return r
}
