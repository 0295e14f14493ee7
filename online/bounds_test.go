package online

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"denoiser/internal/heapstat"
)

// checkRows fails t unless every per-row array of m has one entry (or
// block) per row of its table, and returns the rows of each table.
func checkRows(t *testing.T, m *Model) (users, items int) {
	t.Helper()
	nu, ni, d, kk := m.users.len(), m.items.len(), m.d, m.k*m.k
	check := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Fatalf("%s has %d entries, want %d", what, got, want)
		}
	}
	for _, tb := range []struct {
		name string
		t    *table
	}{{"users", &m.users.table}, {"items", &m.items}} {
		n := tb.t.len()
		check(tb.name+" index", len(tb.t.index), n)
		check(tb.name+" vectors", len(tb.t.vectors), n*d)
		check(tb.name+" step sums", len(tb.t.stepSums), n)
		check(tb.name+" stamps", len(tb.t.stamps), n)
		if tb.t.capacity > 0 {
			check(tb.name+" last seen", len(tb.t.lru.lastSeen), n)
			check(tb.name+" prev", len(tb.t.lru.prev), n)
			check(tb.name+" next", len(tb.t.lru.next), n)
		}
	}
	check("recent items", len(m.users.recent), nu*recentItems)
	check("pushed", len(m.users.pushed), nu)
	check("transition offsets", len(m.transition.offsets), ni*kk)
	switch c := m.cooc.(type) {
	case *sketchCooc:
		check("sketch user counts", len(c.userN), nu)
		check("sketch signatures", len(c.userSig), nu*c.h/4)
		check("sketch item counts", len(c.itemN), ni)
		check("sketch reservoirs", len(c.itemRes), ni*c.s)
	case *exactCooc:
		check("exact user sets", len(c.userItems), nu)
		check("exact item sets", len(c.itemUsers), ni)
	}
	return nu, ni
}

// residents returns the ids with a row of their own, sorted.
func residents(tb *table) []string {
	ids := slices.Clone(tb.ids[tb.base:])
	slices.Sort(ids)
	return ids
}

// TestLRUEvictsLeastRecentlySeen: a capped table holds exactly the ids a
// naive least-recently-seen cache holds (the cap most recently seen
// ids), event by event, on both sides, and counts each eviction.
func TestLRUEvictsLeastRecentlySeen(t *testing.T) {
	for _, exact := range []bool{false, true} {
		t.Run(fmt.Sprintf("exact=%v", exact), func(t *testing.T) {
			cfg := smallConfig(ModeBinary)
			cfg.MaxUsers, cfg.MaxItems = 10, 7
			if exact {
				cfg.Cooccurrence = CoocExact
			}
			m, _ := New(cfg, rand.NewPCG(1, 1))
			r := rand.New(rand.NewPCG(2, 2))
			lastUser, lastItem := map[string]int{}, map[string]int{}
			// naive: the cap ids with the latest sightings.
			naive := func(last map[string]int, capacity int) []string {
				ids := make([]string, 0, len(last))
				for id := range last {
					ids = append(ids, id)
				}
				slices.SortFunc(ids, func(a, b string) int { return last[b] - last[a] })
				ids = ids[:min(capacity, len(ids))]
				slices.Sort(ids)
				return ids
			}
			var sc Score
			evictedUsers, evictedItems := 0, 0
			for j := 0; j < 3000; j++ {
				// A skewed stream: some ids come back often, others rarely.
				u, i := fmt.Sprint("u", int(math.Sqrt(float64(r.IntN(900))))), fmt.Sprint("i", r.IntN(15))
				if _, ok := lastUser[u]; ok && !slices.Contains(naive(lastUser, cfg.MaxUsers), u) || !ok && len(lastUser) >= cfg.MaxUsers {
					evictedUsers++
				}
				if _, ok := lastItem[i]; ok && !slices.Contains(naive(lastItem, cfg.MaxItems), i) || !ok && len(lastItem) >= cfg.MaxItems {
					evictedItems++
				}
				lastUser[u], lastItem[i] = j, j
				if err := m.Step(Event{User: u, Item: i}, &sc); err != nil {
					t.Fatal(err)
				}
				if got, want := residents(&m.users.table), naive(lastUser, cfg.MaxUsers); !slices.Equal(got, want) {
					t.Fatalf("event %d: users %v, want the latest seen %v", j, got, want)
				}
				if got, want := residents(&m.items), naive(lastItem, cfg.MaxItems); !slices.Equal(got, want) {
					t.Fatalf("event %d: items %v, want the latest seen %v", j, got, want)
				}
			}
			s := m.Summary()
			if s.UsersEvicted != uint64(evictedUsers) || s.ItemsEvicted != uint64(evictedItems) || evictedUsers == 0 || evictedItems == 0 {
				t.Fatalf("evicted %d users, %d items; want %d, %d (not 0)", s.UsersEvicted, s.ItemsEvicted, evictedUsers, evictedItems)
			}
			if s.Users != cfg.MaxUsers || s.Items != cfg.MaxItems {
				t.Fatalf("%d users, %d items resident; want the caps %d, %d", s.Users, s.Items, cfg.MaxUsers, cfg.MaxItems)
			}
			checkRows(t, m)
		})
	}
}

// TestEvictedIDStartsFresh: an id evicted and seen again is, from then on,
// what a never-seen id would be in its place: the same scores, event by
// event, and the same model but for the id. (Without admission: with it,
// the sketch remembers the id's past sightings, and so admits it sooner
// than a new id.)
func TestEvictedIDStartsFresh(t *testing.T) {
	for _, cfg := range []Config{
		func() Config { c := smallConfig(ModeBinary); c.MaxUsers, c.MaxItems = 40, 30; return c }(),
		func() Config { c := smallConfig(ModeRating); c.MaxUsers, c.MaxItems = 20, 10; return c }(),
		// Per-user T̂ offsets; caps a little below the stream's 60 users
		// and 40 items, so that T̂ learns before the eviction.
		func() Config {
			c := smallConfig(ModeBinary)
			c.MaxUsers, c.MaxItems, c.TransitionUserOffset = 55, 38, true
			return c
		}(),
		func() Config {
			c := smallConfig(ModeBinary)
			c.Cooccurrence, c.NegativeSampling = CoocExact, NegPopularity
			c.MaxUsers, c.MaxItems = 25, 20
			return c
		}(),
	} {
		t.Run(configName(cfg), func(t *testing.T) {
			evs := testStream(3000, 4) // 60 users, 40 items: both tables are full
			a, _ := New(cfg, rand.NewPCG(3, 3))
			runScores(t, a, evs[:2000])
			// Evict the least recently seen user and item with a new pair.
			oldUser, oldItem := a.users.ids[a.users.lru.tail], a.items.ids[a.items.lru.tail]
			var sc Score
			if err := a.Step(Event{User: "evicts-u", Item: "evicts-i", Rating: 3}, &sc); err != nil {
				t.Fatal(err)
			}
			if _, ok := a.users.index[oldUser]; ok {
				t.Fatalf("user %s not evicted", oldUser)
			}
			if _, ok := a.items.index[oldItem]; ok {
				t.Fatalf("item %s not evicted", oldItem)
			}
			b, err := ReadModel(bytes.NewReader(encode(t, a)))
			if err != nil {
				t.Fatal(err)
			}
			// a goes on with the evicted ids, b with new ids in their place.
			const newUser, newItem = "never-seen-u", "never-seen-i"
			rename := func(ev Event) Event {
				if ev.User == oldUser {
					ev.User = newUser
				}
				if ev.Item == oldItem {
					ev.Item = newItem
				}
				return ev
			}
			rest := append([]Event{{User: oldUser, Item: oldItem, Rating: 4}}, evs[2000:]...)
			for j, ev := range rest {
				var sa, sb Score
				if err := a.Step(ev, &sa); err != nil {
					t.Fatal(err)
				}
				if err := b.Step(rename(ev), &sb); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(sa) != fmt.Sprint(sb) {
					t.Fatalf("event %d after the eviction: %v with the evicted ids back, %v with new ids", j, sa, sb)
				}
			}
			for _, tb := range []*table{&a.users.table, &a.items} {
				for r, id := range tb.ids {
					if id == oldUser && tb == &a.users.table {
						tb.ids[r] = newUser
					} else if id == oldItem && tb == &a.items {
						tb.ids[r] = newItem
					}
				}
			}
			if !bytes.Equal(encode(t, a), encode(t, b)) {
				t.Fatal("the model with the evicted ids back differs from the one with new ids")
			}
		})
	}
}

// TestEvictedRowIsReset: the row an evicted id leaves is reset, in every
// part that keeps per-row state, before its new id learns.
func TestEvictedRowIsReset(t *testing.T) {
	for _, exact := range []bool{false, true} {
		cfg := smallConfig(ModeBinary)
		cfg.MaxUsers, cfg.MaxItems, cfg.TransitionUserOffset = 55, 38, true
		if exact {
			cfg.Cooccurrence = CoocExact
		}
		m, _ := New(cfg, rand.NewPCG(3, 3))
		runScores(t, m, testStream(4000, 5))
		u, i := m.users.lru.tail, m.items.lru.tail
		oldUser := slices.Clone(m.users.row(u))
		if m.users.stepSums[u] == 0 || m.users.pushed[u] == 0 || m.transition.userOffsetsOf(u)[1] == 0 {
			t.Fatal("the user to evict has no state")
		}
		if u2 := m.userID("new-user"); u2 != u {
			t.Fatalf("new user took row %d, not the least recently seen %d", u2, u)
		}
		if i2 := m.itemID("new-item"); i2 != i {
			t.Fatalf("new item took row %d, not the least recently seen %d", i2, i)
		}
		if slices.Equal(m.users.row(u), oldUser) || m.users.stepSums[u] != 0 || m.items.stepSums[i] != 0 || m.users.pushed[u] != 0 ||
			slices.ContainsFunc(m.users.recentOf(u), func(v int32) bool { return v != -1 }) ||
			slices.ContainsFunc(m.transition.itemOffsets(i), func(v float64) bool { return v != 0 }) ||
			slices.ContainsFunc(m.transition.userOffsetsOf(u), func(v float64) bool { return v != 0 }) {
			t.Fatal("the reused rows keep state of the evicted ids")
		}
		switch c := m.cooc.(type) {
		case *sketchCooc:
			if c.userN[u] != 0 || c.itemN[i] != 0 || c.userSig[int(u)*c.h/4] != ^uint64(0) || c.itemRes[int(i)*c.s] != -1 {
				t.Fatal("the sketch keeps state of the evicted ids")
			}
		case *exactCooc:
			if len(c.userItems[u]) != 0 || len(c.itemUsers[i]) != 0 {
				t.Fatal("the exact sets keep the evicted ids' sets")
			}
			for _, s := range c.itemUsers {
				if slices.Contains(s, u) {
					t.Fatal("an item's set still holds the evicted user")
				}
			}
			for _, s := range c.userItems {
				if slices.Contains(s, i) {
					t.Fatal("a user's set still holds the evicted item")
				}
			}
		}
	}
}

// TestRowsStayWithinCap: under a stream where every user is new, and
// items keep coming, a capped model's tables and every per-row array stop
// growing at the caps.
func TestRowsStayWithinCap(t *testing.T) {
	for _, admit := range []int{0, 2} {
		cfg := smallConfig(ModeBinary)
		cfg.MaxUsers, cfg.MaxItems, cfg.AdmitAfter = 300, 50, admit
		if admit > 1 {
			cfg.AdmitSketchWidth = 1024
		}
		base := 0
		if admit > 1 {
			base = 1
		}
		m, _ := New(cfg, rand.NewPCG(1, 1))
		var sc Score
		for j := 0; j < 5000; j++ {
			// Every user new; with admission, seen twice in a row.
			ev := Event{User: fmt.Sprint("u", j/max(admit, 1)), Item: fmt.Sprint("i", j%400)}
			if err := m.Step(ev, &sc); err != nil {
				t.Fatal(err)
			}
			if j%250 == 0 || j == 4999 {
				nu, ni := checkRows(t, m)
				if nu > cfg.MaxUsers+base || ni > cfg.MaxItems+base {
					t.Fatalf("event %d: %d user and %d item rows, over the caps %d, %d", j, nu, ni, cfg.MaxUsers, cfg.MaxItems)
				}
			}
		}
		if s := m.Summary(); s.Users != cfg.MaxUsers || s.UsersEvicted == 0 || s.ItemsEvicted == 0 {
			t.Fatalf("admit_after=%d: %+v", admit, s)
		}
		// New reserved the caps' room: the arrays never grew past it.
		if c := cap(m.users.vectors); c != (cfg.MaxUsers+base)*m.d {
			t.Fatalf("user vectors hold room for %d values, want the cap's %d", c, (cfg.MaxUsers+base)*m.d)
		}
		if c := cap(m.transition.offsets); c != (cfg.MaxItems+base)*m.k*m.k {
			t.Fatalf("transition offsets hold room for %d values, want the cap's %d", c, (cfg.MaxItems+base)*m.k*m.k)
		}
	}
}

// TestAdmitAtThreshold: an id is scored with its side's cold row, and has
// no row, until its admit_after-th sighting, which gives it one; the
// cold events are counted.
func TestAdmitAtThreshold(t *testing.T) {
	for _, admit := range []int{2, 3, 5} {
		cfg := smallConfig(ModeBinary)
		cfg.AdmitAfter, cfg.AdmitSketchWidth = admit, 1024
		m, _ := New(cfg, rand.NewPCG(1, 1))
		var sc Score
		for j := 1; j <= admit; j++ {
			if err := m.Step(Event{User: "u", Item: "i"}, &sc); err != nil {
				t.Fatal(err)
			}
			_, user := m.UserIndex("u")
			_, item := m.ItemIndex("i")
			if user != (j >= admit) || item != (j >= admit) {
				t.Fatalf("admit_after=%d, sighting %d: user admitted %v, item %v", admit, j, user, item)
			}
		}
		s := m.Summary()
		if s.ColdUserEvents != uint64(admit-1) || s.ColdItemEvents != uint64(admit-1) || s.Users != 1 || s.Items != 1 {
			t.Fatalf("admit_after=%d: %+v", admit, s)
		}
		if m.NumUsers() != 2 || m.UserID(0) != "" {
			t.Fatalf("row 0 is not the cold row: %d rows, row 0 %q", m.NumUsers(), m.UserID(0))
		}
	}
}

// TestColdRowScores: a pair with an unadmitted id is scored with the
// cold row, which is zero: by the shared parameters alone. It teaches no
// embedding, neither the cold row's nor the admitted partner's, and gives
// the unadmitted id no row; the shared parameters learn from it.
func TestColdRowScores(t *testing.T) {
	cfg := smallConfig(ModeRating)
	cfg.AdmitAfter, cfg.AdmitSketchWidth = 4, 1024
	m, _ := New(cfg, rand.NewPCG(1, 1))
	runScores(t, m, testStream(1000, 6))
	users, items := m.users.len(), m.items.len()
	item, ok := m.items.index["i1"]
	if !ok {
		t.Fatal("i1 not admitted")
	}
	itemRow, bias := slices.Clone(m.items.row(item)), slices.Clone(m.classifier.bias)
	want := make([]float64, m.k)
	m.Predict("", "i1", want) // the cold user row: id ""
	var sc Score
	if err := m.Step(Event{User: "unseen", Item: "i1", Rating: 3}, &sc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sc.Posterior, want) {
		t.Fatalf("unadmitted user scored %v; the cold row gives %v", sc.Posterior, want)
	}
	if m.users.len() != users || m.items.len() != items {
		t.Fatal("an unadmitted id got a row")
	}
	if !slices.Equal(m.items.row(item), itemRow) {
		t.Fatal("the admitted item learned from a pair with a cold row")
	}
	for _, row := range [][]float64{m.users.row(coldRow), m.items.row(coldRow)} {
		if slices.ContainsFunc(row, func(v float64) bool { return v != 0 }) {
			t.Fatalf("a cold row is not zero: %v", row)
		}
	}
	if slices.Equal(m.classifier.bias, bias) {
		t.Fatal("the classifier's bias did not learn from the cold pair")
	}
}

// TestColdItemOffsetsStayZero: T̂'s per-item offsets learn for admitted
// items, never for the cold item row, which stands for every unadmitted
// item and sees only observed events (never a sampled negative).
func TestColdItemOffsetsStayZero(t *testing.T) {
	// Rating mode with nearly every rating a 5: η̃ becomes confident from
	// its bias alone, so pairs with the cold item (z = 0) are distilled
	// and train T̂. (In binary mode η̃ of a cold pair stays near ½ and such
	// a pair is never distilled.)
	cfg := smallConfig(ModeRating)
	cfg.AdmitAfter, cfg.AdmitSketchWidth = 3, 1024
	m, _ := New(cfg, rand.NewPCG(1, 1))
	evs := testStream(6000, 8)
	for j := range evs {
		evs[j].Rating = 5
		if j%10 == 0 {
			evs[j].Rating = 4
		}
		if j%3 == 0 { // a stream of one-off items keeps the cold item busy
			evs[j].Item = fmt.Sprintf("once%d", j)
		}
	}
	runScores(t, m, evs)
	if m.bounds.coldItems == 0 {
		t.Fatal("no event was scored with the cold item row")
	}
	if slices.ContainsFunc(m.transition.itemOffsets(coldRow), func(v float64) bool { return v != 0 }) {
		t.Fatalf("the cold item's offsets learned: %v", m.transition.itemOffsets(coldRow))
	}
	learned := false
	for i := m.items.base; int(i) < m.items.len(); i++ {
		learned = learned || slices.ContainsFunc(m.transition.itemOffsets(i), func(v float64) bool { return v != 0 })
	}
	if !learned {
		t.Fatal("no admitted item's offsets learned: the check above cannot fail")
	}
}

// TestAdmissionSketchKnownAnswer: the count-min sketch never counts an id
// below its sightings; a cell is non-zero exactly when a counted id maps
// to it, so with D distinct ids each row's share of non-zero cells is
// 1 − (1 − 1/w)^D, and an id never counted reads non-zero in every row
// with probability Π_r share_r; and the count-min bound holds: an
// overestimate above e·N/w is rarer than e^−depth (Cormode &
// Muthukrishnan 2005).
func TestAdmissionSketchKnownAnswer(t *testing.T) {
	const w, distinct, repeated = 4096, 3000, 500
	a := newAdmission(w)
	key := func(j int) uint64 { return idHash(saltUser, fmt.Sprint("id", j)) }
	n := 0
	for j := 0; j < distinct; j++ {
		times := 1
		if j < repeated {
			times = 3
		}
		for range times {
			a.see(key(j), 255, 0)
			n++
		}
	}
	if n >= w {
		t.Fatalf("%d sightings reach the halving at %d", n, w)
	}
	for j := 0; j < distinct; j++ {
		want := 1
		if j < repeated {
			want = 3
		}
		if got := a.estimate(key(j)); got < want {
			t.Fatalf("id %d seen %d times, estimated %d", j, want, got)
		}
	}
	fillWant := 1 - math.Pow(1-1.0/w, distinct)
	probeWant := 1.0
	for r := range admitDepth {
		filled := 0
		for _, v := range a.cells[r*w : (r+1)*w] {
			if v > 0 {
				filled++
			}
		}
		share := float64(filled) / w
		// The share is a sum of w nearly independent cells: its standard
		// deviation is about sqrt(p(1−p)/w) = 0.0075.
		if math.Abs(share-fillWant) > 0.03 {
			t.Errorf("row %d: %.4f of the cells filled, want %.4f", r, share, fillWant)
		}
		probeWant *= share
	}
	const probes = 200000
	nonzero, over := 0, 0
	bound := math.E * float64(n) / w
	for j := 0; j < probes; j++ {
		est := a.estimate(key(distinct + j))
		if est > 0 {
			nonzero++
		}
		if float64(est) > bound {
			over++
		}
	}
	rate := float64(nonzero) / probes
	sd := math.Sqrt(probeWant * (1 - probeWant) / probes)
	t.Logf("unseen ids read non-zero: %.4f, want %.4f ± %.4f; over e·N/w = %.2f: %d of %d", rate, probeWant, sd, bound, over, probes)
	if math.Abs(rate-probeWant) > 4*sd {
		t.Errorf("unseen ids read non-zero at %.4f, want %.4f (4 sd = %.4f)", rate, probeWant, 4*sd)
	}
	if float64(over)/probes > math.Exp(-admitDepth) {
		t.Errorf("%d of %d estimates exceed the count-min bound, more than e^-%d", over, probes, admitDepth)
	}

}

// TestAdmissionSketchHalving: the width-th sighting since the last
// halving halves every counter, after counting itself.
func TestAdmissionSketchHalving(t *testing.T) {
	const w = 1024
	a := newAdmission(w)
	a.added = w - 1
	r := rand.New(rand.NewPCG(1, 1))
	for j := range a.cells {
		a.cells[j] = uint8(r.IntN(256))
	}
	before := slices.Clone(a.cells)
	h := idHash(saltItem, "x")
	var cols [admitDepth]int
	a.columns(h, &cols)
	est := a.estimate(h)
	a.see(h, 255, 0)
	if a.added != 0 {
		t.Fatalf("%d sightings counted after the halving", a.added)
	}
	for j, v := range a.cells {
		want := before[j]
		if slices.Contains(cols[:], j) && int(want) == est && est < 255 {
			want++ // the sighting's conservative update
		}
		if v != want>>1 {
			t.Fatalf("cell %d: %d, want %d halved", j, v, want)
		}
	}
}

// TestBoundsEncoding: a model is encoded in version 4, with the bounds
// section exactly when it has bounds, in version 5 when it has per-user
// transition offsets, or in version 8 (the newest) when it reads dwell as
// longer-is-genuine (the dwell mixture); a version is refused with the
// kind of configuration it never held (version 3 without bounds, 2 with
// them, 5 without per-user offsets, 4 with them, 7 or 6 with the dwell
// mixture).
func TestBoundsEncoding(t *testing.T) {
	plain, _ := New(smallConfig(ModeBinary), rand.NewPCG(1, 1))
	bcfg := smallConfig(ModeBinary)
	bcfg.MaxUsers = 10
	bounded, _ := New(bcfg, rand.NewPCG(1, 1))
	ucfg := bcfg
	ucfg.TransitionUserOffset = true
	perUser, _ := New(ucfg, rand.NewPCG(1, 1))
	longCfg := DefaultConfig().WithDefaults()
	longCfg.EventOrder = nil
	long, _ := New(longCfg, rand.NewPCG(1, 1))
	ranked, _ := New(DefaultConfig().WithDefaults(), rand.NewPCG(1, 1))
	evs := testStream(500, 1)
	runScores(t, plain, evs)
	runScores(t, bounded, evs)
	runScores(t, perUser, evs)
	runScores(t, long, evs)
	runScores(t, ranked, evs)
	for _, tc := range []struct {
		m       *Model
		version uint32
		wrong   []uint32
		refusal string
	}{
		{plain, 4, []uint32{3}, "bounds the tables"},
		{bounded, 4, []uint32{2}, "bounds the tables"},
		{plain, 4, []uint32{5}, "transition_user_offset"},
		{perUser, userOffsetVersion, []uint32{4, 3}, "transition_user_offset"},
		{long, burstVersion, []uint32{typesVersion, cursorVersion}, "dwell_direction"},
		{ranked, burstVersion, []uint32{typesVersion}, "dwell_direction"},
	} {
		b := encode(t, tc.m)
		if v := binary.LittleEndian.Uint32(b[8:]); v != tc.version || tc.m.Encoding() != tc.version {
			t.Fatalf("encoded as version %d (Encoding %d), want %d", v, tc.m.Encoding(), tc.version)
		}
		if _, err := ReadModel(bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		for _, wrong := range tc.wrong {
			binary.LittleEndian.PutUint32(b[8:], wrong)
			if _, err := ReadModel(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), tc.refusal) {
				t.Fatalf("version %d of a model with bounds %v, user offsets %v: %v, want the refusal",
					wrong, tc.m.cfg.bounded(), tc.m.cfg.TransitionUserOffset, err)
			}
		}
	}
}

// TestBoundsConfigValidate: bad bounds are refused, naming the setting.
func TestBoundsConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{MaxUsers: -1}, "max_users"},
		{Config{MaxItems: -5}, "max_items"},
		{Config{MaxUsers: math.MaxInt32}, "max_users"},
		{Config{AdmitAfter: -1}, "admit_after"},
		{Config{AdmitAfter: 256}, "admit_after"},
		{Config{AdmitAfter: 2, AdmitSketchWidth: 1000}, "admit_sketch_width"},
		{Config{AdmitAfter: 2, AdmitSketchWidth: 512}, "admit_sketch_width"},
		{Config{AdmitAfter: 2, AdmitSketchWidth: 1 << 27}, "admit_sketch_width"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.field)
		}
	}
	for _, ok := range []Config{{MaxUsers: 1, MaxItems: 1}, {AdmitAfter: 1}, {AdmitAfter: 255}, {AdmitAfter: 2, AdmitSketchWidth: 1 << 10}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v refused: %v", ok, err)
		}
	}
}

// TestCapAboveWorkingSetChangesNothing: caps the stream never reaches
// leave every score as it is without them.
func TestCapAboveWorkingSetChangesNothing(t *testing.T) {
	evs := testStream(3000, 7) // 60 users, 40 items
	for _, cfg := range allModes {
		if cfg.bounded() {
			continue
		}
		t.Run(configName(cfg), func(t *testing.T) {
			capped := cfg
			capped.MaxUsers, capped.MaxItems = 60, 40
			a, _ := New(cfg, rand.NewPCG(5, 5))
			b, _ := New(capped, rand.NewPCG(5, 5))
			sa, sb := runScores(t, a, evs), runScores(t, b, evs)
			for j := range sa {
				if fmt.Sprint(sa[j]) != fmt.Sprint(sb[j]) {
					t.Fatalf("event %d: %v without caps, %v with caps above the working set", j, sa[j], sb[j])
				}
			}
			if s := b.Summary(); s.UsersEvicted != 0 || s.ItemsEvicted != 0 {
				t.Fatalf("evicted below the cap: %+v", s)
			}
		})
	}
}

// BenchmarkMemoryPerID measures the live heap per resident user of a
// model capped at 100,000 users that has seen 200,000, each once (every
// event a new user, over 2,000 items, d = 32; also with the per-user
// offsets that DefaultConfig turns on), beside Config.RowBytes'
// count of the per-row arrays: the rest is the id → row map, the ids'
// bytes and the slack of grown arrays.
func BenchmarkMemoryPerID(b *testing.B) {
	const users, items = 100000, 2000
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"capped", Config{MaxUsers: users}},
		{"uncapped", Config{}},
		{"capped-user-offset", Config{MaxUsers: users, TransitionUserOffset: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perUser float64
			for range b.N {
				before := heapstat.Now()
				m, _ := New(tc.cfg, rand.NewPCG(1, 1))
				var sc Score
				for j := 0; j < 2*users; j++ {
					m.Step(Event{User: fmt.Sprint("user-", j), Item: fmt.Sprint("item-", j%items)}, &sc)
				}
				live := heapstat.Now() - before
				_, itemBytes := tc.cfg.RowBytes()
				perUser = (float64(live) - float64(items*itemBytes)) / float64(m.users.len())
				runtime.KeepAlive(m)
			}
			userBytes, _ := tc.cfg.RowBytes()
			b.ReportMetric(perUser, "live-bytes/user")
			b.ReportMetric(float64(userBytes), "row-bytes/user")
		})
	}
}
