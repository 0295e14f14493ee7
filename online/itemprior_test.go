package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// clickbaitEvents is botEvents with the noise an item's instead of a
// user's: 200 users of ten topics of 50 items each, 20 % noise; with
// clickbait, a noisy event is a click on one of 12 items that draw a
// genuine click now and then too (10 %), else on any item. Each event
// carries a dwell that says a little of its class (log-normal, a genuine
// one's median 20 s, a noisy one's 8 s, σ 1.2): the evidence the items'
// prior pools over an item's events.
func clickbaitEvents(n int, seed uint64, clickbait bool) ([]Event, []bool) {
	r := rand.New(rand.NewPCG(seed, 43))
	evs, genuine := make([]Event, n), make([]bool, n)
	now := int64(1_700_000_000_000)
	for j := range evs {
		now += 1000 + r.Int64N(119_000)
		u := r.IntN(200)
		noise := r.Float64() < 0.2
		item := (u%10)*50 + r.IntN(50)
		switch {
		case clickbait && (noise || r.Float64() < 0.1):
			item = 500 + r.IntN(12)
		case noise || r.Float64() < 0.4:
			item = r.IntN(500) // noise, or a genuine click off the topic
		}
		median := 20_000.0
		if noise {
			median = 8_000
		}
		dwell := int64(median * math.Exp(1.2*r.NormFloat64()))
		evs[j] = Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", item), TimeMS: now, HasTime: true, DwellMS: dwell, HasDwell: true}
		genuine[j] = !noise
	}
	return evs, genuine
}

// TestItemPriorFindsNoisyItems: where a few items draw the noise, the
// items' prior's strength is small and the weight ranks the second half's
// events better than the same model's weight without it; where the noise
// is on any item, the strength is large and the weight moves little. The
// prior changes nothing the model learns.
func TestItemPriorFindsNoisyItems(t *testing.T) {
	for _, tc := range []priorCase{
		{"clickbait", true, UserPriorMin, 100, 0.02, 1},
		{"any item's noise", false, 300, UserPriorMax, -0.003, 0.003},
	} {
		evs, genuine := clickbaitEvents(30000, 9, tc.concentrated)
		checkPriorFinds(t, tc, evs, genuine,
			func(m *Model) { m.itemPriors = nil },
			func(m *Model) (float64, float64) {
				return m.context.itemLevel.strength(), m.Summary().ItemPriorStrength
			})
	}
}

// TestItemPriorEviction: an item row that a capped table gives to a new
// item starts with an empty prior.
func TestItemPriorEviction(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	cfg.MaxItems = 50
	m, _ := New(cfg, NewSource(3))
	evs, _ := clickbaitEvents(3000, 4, true)
	runScores(t, m, evs)
	if m.Summary().ItemsEvicted == 0 {
		t.Fatal("no item evicted")
	}
	if len(m.itemPriors) != m.items.len()*userPriorWidth {
		t.Fatalf("%d prior slots for %d item rows", len(m.itemPriors), m.items.len())
	}
	i := m.addItemRow("a new item")
	if row := m.itemPriors[int(i)*userPriorWidth : int(i+1)*userPriorWidth]; row[0] != 0 || row[1] != 0 || row[2] != 0 {
		t.Errorf("the new item's row %d holds the evicted item's prior %v", i, row)
	}
}
