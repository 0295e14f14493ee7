package online

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"denoiser/internal/heapstat"
)

// testStream is a small deterministic binary stream with some structure.
func testStream(n int, seed uint64) []Event {
	r := rand.New(rand.NewPCG(seed, seed+1))
	evs := make([]Event, n)
	for j := range evs {
		u := r.IntN(60)
		i := (u%4)*10 + r.IntN(10)
		if r.Float64() < 0.2 {
			i = r.IntN(40)
		}
		evs[j] = Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", i), Rating: float64(1 + r.IntN(5)), DwellMS: int64(r.IntN(60000)), HasDwell: true}
	}
	return evs
}

// smallConfig makes every phase (warm-up, distillation, refits, ρ
// relaxation) happen within a few thousand events.
func smallConfig(mode string) Config {
	return Config{Mode: mode, Dim: 8, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256}
}

func runScores(t *testing.T, m *Model, evs []Event) []Score {
	t.Helper()
	out := make([]Score, len(evs))
	for j, ev := range evs {
		if err := m.Step(ev, &out[j]); err != nil {
			t.Fatalf("event %d: %v", j, err)
		}
	}
	return out
}

func encode(t *testing.T, m *Model) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := m.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

var allModes = []Config{
	smallConfig(ModeBinary),
	smallConfig(ModeRating),
	smallConfig(ModeDwell),
	func() Config {
		c := smallConfig(ModeBinary)
		c.Cooccurrence = CoocExact
		c.NegativeSampling = NegPopularity
		return c
	}(),
	func() Config { c := smallConfig(ModeBinary); c.RhoSchedule = RhoFixed; c.RhoStart = 0.4; return c }(),
	func() Config { c := smallConfig(ModeBinary); c.Plain = true; return c }(),
	func() Config { c := smallConfig(ModeRating); c.NoGMM = true; c.NoTransition = true; return c }(),
	// Bounds: caps below the stream's 60 users and 40 items, so that ids
	// are evicted all along; admission after two sightings.
	func() Config {
		c := smallConfig(ModeBinary)
		c.MaxUsers, c.MaxItems, c.AdmitAfter, c.AdmitSketchWidth = 40, 30, 2, 1024
		return c
	}(),
	func() Config {
		c := smallConfig(ModeBinary)
		c.Cooccurrence, c.NegativeSampling = CoocExact, NegPopularity
		c.MaxUsers, c.MaxItems = 25, 20
		return c
	}(),
	func() Config { c := smallConfig(ModeRating); c.AdmitAfter, c.AdmitSketchWidth = 3, 1024; return c }(),
	// Per-user transition offsets (encoding version 5): in rating mode
	// (K·K offsets per user, though this stream distils nothing there);
	// in binary mode with a cap a little below the stream's users and
	// admission, so that T̂ learns (on churnStream about 1,200 events are
	// distilled and 50 of 56 user rows' offsets move) while users are
	// evicted (about 300) and the cold row exists.
	func() Config { c := smallConfig(ModeRating); c.TransitionUserOffset = true; return c }(),
	func() Config {
		c := smallConfig(ModeBinary)
		c.TransitionUserOffset = true
		c.MaxUsers, c.AdmitAfter, c.AdmitSketchWidth = 55, 2, 1024
		return c
	}(),
	// Dwell read as longer-is-genuine (encoding version 8, the dwell
	// mixture), with DefaultConfig's per-user offsets.
	func() Config {
		c := smallConfig(ModeBinary)
		c.TransitionUserOffset, c.DwellDirection = true, DwellLong
		return c
	}(),
}

func configName(c Config) string {
	name := fmt.Sprintf("%s/%s/%s/plain=%v", c.Mode, c.Cooccurrence, c.RhoSchedule, c.Plain)
	if c.bounded() {
		name += fmt.Sprintf("/max=%d,%d/admit=%d", c.MaxUsers, c.MaxItems, c.AdmitAfter)
	}
	if c.TransitionUserOffset {
		name += "/user-offset"
	}
	if c.DwellDirection != "" {
		name += "/dwell-" + c.DwellDirection
	}
	return name
}

// TestDeterminism: same config, same source state, same events give the
// same scores and the same encoded model, bit for bit.
func TestDeterminism(t *testing.T) {
	evs := testStream(3000, 1)
	for _, cfg := range allModes {
		t.Run(configName(cfg), func(t *testing.T) {
			a, _ := New(cfg, rand.NewPCG(7, 8))
			b, _ := New(cfg, rand.NewPCG(7, 8))
			sa, sb := runScores(t, a, evs), runScores(t, b, evs)
			for j := range sa {
				if fmt.Sprint(sa[j]) != fmt.Sprint(sb[j]) {
					t.Fatalf("event %d: %v vs %v", j, sa[j], sb[j])
				}
			}
			if !bytes.Equal(encode(t, a), encode(t, b)) {
				t.Fatal("encodings differ")
			}
			c, _ := New(cfg, rand.NewPCG(9, 9))
			runScores(t, c, evs)
			if bytes.Equal(encode(t, a), encode(t, c)) {
				t.Fatal("a different random source gave the same model")
			}
		})
	}
}

// TestRoundTripContinues: a model written and read back mid-stream
// continues exactly as the one that never stopped.
func TestRoundTripContinues(t *testing.T) {
	evs := testStream(3000, 2)
	for _, cfg := range allModes {
		t.Run(configName(cfg), func(t *testing.T) {
			whole, _ := New(cfg, rand.NewPCG(1, 1))
			want := runScores(t, whole, evs)

			first, _ := New(cfg, rand.NewPCG(1, 1))
			runScores(t, first, evs[:1700])
			blob := encode(t, first)
			second, err := ReadModel(bytes.NewReader(blob))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(encode(t, second), blob) {
				t.Fatal("re-encoding a read model changed its bytes")
			}
			got := runScores(t, second, evs[1700:])
			for j := range got {
				if fmt.Sprint(got[j]) != fmt.Sprint(want[1700+j]) {
					t.Fatalf("event %d after restore: %v, want %v", 1700+j, got[j], want[1700+j])
				}
			}
			if !bytes.Equal(encode(t, second), encode(t, whole)) {
				t.Fatal("final models differ")
			}
		})
	}
}

// TestReadModelRejectsDamage: every truncation and a spread of bit flips
// are refused with an error, never a panic.
// TestReadModelAllocatesOnce: from an input that knows its length
// (bytes.Reader), decoding allocates its tables once; from one that does
// not, they grow as data arrives, which costs more. Both give the same
// model.
func TestReadModelAllocatesOnce(t *testing.T) {
	m, _ := New(Config{Dim: 32}, rand.NewPCG(1, 1))
	var sc Score
	for j := 0; j < 60000; j++ {
		m.Step(Event{User: fmt.Sprint("u", j), Item: fmt.Sprint("i", j%3000)}, &sc)
	}
	b := encode(t, m)
	allocated := func(r io.Reader) (uint64, []byte) {
		var got *Model
		var err error
		n := heapstat.Allocated(func() { got, err = ReadModel(r) })
		if err != nil {
			t.Fatal(err)
		}
		return n, encode(t, got)
	}
	sized, enc1 := allocated(bytes.NewReader(b))
	grown, enc2 := allocated(struct{ io.Reader }{bytes.NewReader(b)})
	if !bytes.Equal(enc1, b) || !bytes.Equal(enc2, b) {
		t.Fatal("a decoded model does not encode as the original")
	}
	t.Logf("encoded %d bytes; allocated %d with the length known, %d without", len(b), sized, grown)
	if float64(sized) > 0.8*float64(grown) {
		t.Errorf("knowing the length saved little: %d bytes allocated against %d", sized, grown)
	}
	if sized > uint64(len(b))*3/2 {
		t.Errorf("allocated %d bytes to decode %d", sized, len(b))
	}
}

// TestReadModelRefusesNonFiniteUserOffset: a per-user T̂ offset that is
// not finite does not load, whole or in a delta.
func TestReadModelRefusesNonFiniteUserOffset(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.TransitionUserOffset = true
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		m, base, delta := spoiledDelta(t, cfg, func(m *Model) {
			m.transition.userOffsetsOf(m.users.index["u1"])[1] = bad
			m.users.stamps[m.users.index["u1"]] = m.epoch
		})
		if _, err := ReadModelDeltas(bytes.NewReader(base), []io.Reader{bytes.NewReader(delta)}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a delta with a user offset %v: %v, want ErrCorrupt", bad, err)
		}
		if _, err := ReadModel(bytes.NewReader(encode(t, m))); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a model with a user offset %v: %v, want ErrCorrupt", bad, err)
		}
	}
}

// spoiledDelta steps a model of cfg over 500 events, encodes it (base),
// steps it over 10 more, spoils it and writes the delta since base.
func spoiledDelta(t *testing.T, cfg Config, spoil func(*Model)) (m *Model, base, delta []byte) {
	t.Helper()
	m, _ = New(cfg, rand.NewPCG(1, 2))
	runScores(t, m, testStream(500, 3))
	cp := m.FrozenCopy(nil)
	base = encode(t, cp)
	cp.MarkSaved()
	runScores(t, m, testStream(10, 4))
	spoil(m)
	return m, base, writeDelta(t, m.FrozenCopy(cp))
}

func TestReadModelRejectsDamage(t *testing.T) {
	m, _ := New(smallConfig(ModeBinary), rand.NewPCG(1, 2))
	runScores(t, m, testStream(500, 3))
	blob := encode(t, m)
	for n := 0; n < len(blob); n += 1 + n/50 {
		if _, err := ReadModel(bytes.NewReader(blob[:n])); err == nil {
			t.Fatalf("truncation to %d of %d bytes accepted", n, len(blob))
		}
	}
	r := rand.New(rand.NewPCG(5, 5))
	for k := 0; k < 300; k++ {
		bad := bytes.Clone(blob)
		bad[r.IntN(len(bad))] ^= byte(1 << r.IntN(8))
		m2, err := ReadModel(bytes.NewReader(bad))
		if err == nil {
			// A flip inside a float or a counter can decode; it must still
			// give a usable model. The snapshot checksum catches the rest.
			var sc Score
			if err := m2.Step(Event{User: "u1", Item: "i1"}, &sc); err != nil && !errors.Is(err, ErrNumerical) {
				t.Fatalf("flip %d: decoded model fails: %v", k, err)
			}
		}
	}
	huge := bytes.Clone(blob)
	copy(huge[12+4:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}) // CONF length
	if _, err := ReadModel(bytes.NewReader(huge)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("huge section length: %v", err)
	}
	if _, err := ReadModel(bytes.NewReader([]byte("not a model at all"))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad magic: %v", err)
	}
}

func TestInvalidEventsChangeNothing(t *testing.T) {
	tests := []struct {
		name string
		mode string
		ev   Event
		say  string // in the error
	}{
		{"empty user", ModeBinary, Event{Item: "i"}, "empty"},
		{"empty item", ModeBinary, Event{User: "u"}, "empty"},
		{"rating missing", ModeRating, Event{User: "u", Item: "i"}, "none given, or 0"},
		{"rating too high", ModeRating, Event{User: "u", Item: "i", Rating: 6}, "rating 6 outside 1..5"},
		{"rating rounds above K", ModeRating, Event{User: "u", Item: "i", Rating: 5.5}, "rating 5.5 outside 1..5"},
		{"rating rounds to 0", ModeRating, Event{User: "u", Item: "i", Rating: 0.25}, "rating 0.25 outside 1..5"},
		{"rating negative", ModeRating, Event{User: "u", Item: "i", Rating: -1}, "rating -1 outside 1..5"},
		{"rating NaN", ModeRating, Event{User: "u", Item: "i", Rating: math.NaN()}, "rating NaN outside 1..5"},
		{"dwell missing", ModeDwell, Event{User: "u", Item: "i"}, "dwell_ms"},
		{"dwell negative", ModeDwell, Event{User: "u", Item: "i", DwellMS: -1, HasDwell: true}, "dwell_ms"},
		{"weight negative", ModeBinary, Event{User: "u", Item: "i", Weight: -1}, "weight"},
		{"weight NaN", ModeBinary, Event{User: "u", Item: "i", Weight: math.NaN()}, "weight"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := New(smallConfig(tc.mode), rand.NewPCG(1, 1))
			before := encode(t, m)
			var sc Score
			err := m.Step(tc.ev, &sc)
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("got %v, want ErrInvalidEvent", err)
			}
			if !strings.Contains(err.Error(), tc.say) {
				t.Errorf("error %q does not say %q", err, tc.say)
			}
			if !bytes.Equal(before, encode(t, m)) {
				t.Fatal("a rejected event changed the model")
			}
		})
	}
}

// TestNoNonFiniteOutput drives the model with the largest step sizes
// Validate allows; whatever
// happens inside, every score it reports is finite and in range.
func TestNoNonFiniteOutput(t *testing.T) {
	for _, lr := range []float64{1, 10, -1, -10} { // negative: the same rate with per-user T̂ offsets
		cfg := smallConfig(ModeBinary)
		if lr < 0 {
			lr, cfg.TransitionUserOffset = -lr, true
		}
		cfg.LearningRate, cfg.EmbeddingRate, cfg.TransitionRate, cfg.Clip, cfg.InitScale = lr, lr, lr, 1e6, 10
		m, err := New(cfg, rand.NewPCG(1, 1))
		if err != nil {
			t.Fatal(err)
		}
		var sc Score
		for j, ev := range testStream(1500, 4) {
			err := m.Step(ev, &sc)
			if err != nil && !errors.Is(err, ErrNumerical) {
				t.Fatal(err)
			}
			vals := append([]float64{sc.PClean, sc.Reliability, sc.Loss, sc.Weight}, sc.Posterior...)
			if !finite(vals) || sc.PClean < 0 || sc.PClean > 1 || sc.Reliability < 0 || sc.Reliability > 1 || sc.Weight < 0 || sc.Weight > 1 {
				t.Fatalf("lr %g event %d: score %+v", lr, j, sc)
			}
		}
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadModel(&buf); err != nil {
			t.Fatalf("lr %g: model does not read back (non-finite parameter?): %v", lr, err)
		}
	}
}

// TestWeightGuard: a weight that the context's statistics make non-finite
// (here a user's prior, poisoned by hand: no stream gives one) leaves the
// model as p_clean, counted as a numerical error and reported as
// ErrNumerical (the score valid), and neither the user's prior nor the
// item's learns it.
func TestWeightGuard(t *testing.T) {
	cfg := smallConfig(ModeBinary)
	cfg.DwellDirection = DwellLong
	m, _ := New(cfg, NewSource(3))
	evs := burstStream(3000, 4, noiseOffTaste)
	runScores(t, m, evs[:2999])
	ev := evs[2999]
	u, uok := m.users.index[ev.User]
	i, iok := m.items.index[ev.Item]
	if !uok || !iok {
		t.Fatalf("user %s or item %s not in the tables", ev.User, ev.Item)
	}
	userRow := m.users.prior[int(u)*userPriorWidth : int(u+1)*userPriorWidth]
	itemRow := m.itemPriors[int(i)*userPriorWidth : int(i+1)*userPriorWidth]
	userRow[0] = math.NaN()
	userBefore, itemBefore := slices.Clone(userRow), slices.Clone(itemRow)
	before := m.Summary().NumericalErrors
	var sc Score
	if err := m.Step(ev, &sc); !errors.Is(err, ErrNumerical) {
		t.Fatalf("step: %v, want ErrNumerical", err)
	}
	if sc.Weight != sc.PClean || m.Summary().NumericalErrors != before+1 {
		t.Errorf("weight %v (p_clean %v), numerical errors %d → %d: want p_clean and one more", sc.Weight, sc.PClean, before, m.Summary().NumericalErrors)
	}
	if userRow[2] != userBefore[2] || !slices.Equal(itemRow, itemBefore) {
		t.Errorf("a prior learned from the guarded event: the user's %v → %v, the item's %v → %v", userBefore, userRow, itemBefore, itemRow)
	}
}

func TestPhases(t *testing.T) {
	m, _ := New(smallConfig(ModeBinary), rand.NewPCG(3, 3))
	scores := runScores(t, m, testStream(4000, 5))
	for j, sc := range scores[:300] {
		if sc.Distilled != -1 {
			t.Fatalf("event %d distilled during warm-up", j)
		}
	}
	s := m.Summary()
	if s.Events != 4000 || s.Refits != 40 || !s.GMM.Fitted || s.Distilled == 0 {
		t.Fatalf("summary %+v", s)
	}
	if s.Rho >= smallConfig(ModeBinary).WithDefaults().RhoStart {
		t.Errorf("progressive ρ did not relax: %v", s.Rho)
	}
	for j, row := range s.MeanTransition {
		if sum := row[0] + row[1]; math.Abs(sum-1) > 1e-9 {
			t.Errorf("mean T̂ row %d sums to %v", j, sum)
		}
	}
	if s.MeanTransition[1][1] != 1 {
		t.Errorf("binary T̂ row 1 = %v, want one-sided (0, 1)", s.MeanTransition[1])
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	bad := []Config{{Mode: "x"}, {Dim: -1}, {LearningRate: math.NaN()}, {LearningRate: 1e300}, {Clip: math.Inf(1)}, {RhoStart: 1.5}, {GMMWindow: 4}, {Cooccurrence: "y"}, {Mode: ModeRating, Classes: 1}}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
		if _, err := New(c, rand.NewPCG(1, 1)); err == nil {
			t.Errorf("New accepted %+v", c)
		}
	}
}

// BenchmarkStep measures one event (score, then learn) in binary mode,
// d=32, 4 negatives, with dwell, an event type and a time (1.5 s after
// the event before), on a warm model, without I/O.
func BenchmarkStep(b *testing.B) {
	for _, cfg := range []struct {
		name    string
		c       Config
		share   bool
		noDwell bool
		bare    bool // neither dwell nor an event type
		untimed bool // no times either: the gap counted in events
	}{
		{"rgbt", DefaultConfig(), false, false, false, false},
		// rgbt on a stream without dwell: the event type's rank is the
		// instrument (rankInstrument), fitted on every event.
		{"rgbt-no-dwell", DefaultConfig(), false, true, false, false},
		// rgbt on a stream of (user, item, time) only: the gap since the
		// user's previous event is the instrument (gapWeight); the events
		// come closer together, so that the gaps spread about its cap.
		{"rgbt-bare", DefaultConfig(), false, true, true, false},
		// rgbt on a log of (user, item) only: the gap is counted in
		// events (countgap.go).
		{"rgbt-untimed", DefaultConfig(), false, true, true, true},
		// rgbt as a partition model that shares (state_layout partition):
		// the context's accumulator steps beside its statistics, and a
		// delta is published every 2,000 events (Publish, into a reused
		// Shared).
		{"rgbt-sharing", DefaultConfig(), true, false, false, false},
		{"plain", DefaultConfig().Baseline(), false, false, false, false},
		// rgbt without the per-user offset in T̂ (on by default): one
		// addition less per T̂ logit, and no offset step.
		{"rgbt-no-user-offset", Config{DwellDirection: DwellLong}, false, false, false, false},
		// rgbt with dwell's direction learned (the anchored rule) instead
		// of the dwell mixture (long, the default).
		{"rgbt-dwell-learned", Config{TransitionUserOffset: true, DwellDirection: DwellLearned}, false, false, false, false},
		// Caps at the stream's 2,000 users and 1,000 items: the same
		// model as rgbt (TestCapAboveWorkingSetChangesNothing), plus the
		// bookkeeping of recency on every event.
		{"rgbt-cap-above", Config{MaxUsers: 2000, MaxItems: 1000, TransitionUserOffset: true}, false, false, false, false},
		// Caps below the stream's 2,000 users and 1,000 items: most
		// events meet an evicted id and take the least recently seen
		// one's row.
		{"rgbt-capped", Config{MaxUsers: 500, MaxItems: 500, TransitionUserOffset: true}, false, false, false, false},
		// Admission after two sightings as well (a 4 MiB sketch).
		{"rgbt-capped-admit", Config{MaxUsers: 500, MaxItems: 500, AdmitAfter: 2, TransitionUserOffset: true}, false, false, false, false},
	} {
		b.Run(cfg.name, func(b *testing.B) {
			m, err := New(cfg.c, rand.NewPCG(1, 2))
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 4))
			evs := make([]Event, 1<<16)
			for j := range evs {
				u := r.IntN(2000)
				// Every context feature on: dwell and an event type.
				evs[j] = Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", (u%10)*100+r.IntN(100)),
					DwellMS: int64(r.IntN(120000)), HasDwell: !cfg.noDwell, Kind: [...]string{"click", "view", "cart"}[r.IntN(3)]}
				if cfg.bare {
					evs[j].Kind = ""
				}
			}
			var sc Score
			var d Shared
			if cfg.share {
				m.StartSharing()
			}
			now := int64(1_700_000_000_000)
			step := func(j int) {
				ev := evs[j%len(evs)]
				if cfg.bare { // 1–30 ms apart: a user's gaps spread about the 30 s cap
					now += 1 + int64(j*7919%30)
				} else {
					now += 1500
				}
				ev.TimeMS, ev.HasTime = now, !cfg.untimed
				m.Step(ev, &sc)
				if cfg.share && j%2000 == 1999 {
					m.Publish(&d)
				}
			}
			for j := 0; j < 3*len(evs); j++ { // warm: past warm-up, GMM fitted
				step(j)
			}
			if _, ok := m.context.gap.fit(0.8, 0.8, rankSeparation, false, gapPCleanFloor); cfg.bare && !ok {
				b.Fatal("the gap instrument is not fitted: the benchmark would not weigh by it")
			}
			if cfg.untimed && m.context.countGap.mass < countGapMinMass {
				b.Fatal("no gap counted: the benchmark would not count them")
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for j := 0; j < b.N; j++ {
				step(j)
			}
			cpu := cpuTime(b) - cpu0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			// On a shared machine wall time includes waiting for a core;
			// events per CPU-second is the per-core throughput.
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
		})
	}
}

// TestRatingClass pins the rule of rating mode: a rating is rounded half
// up to its class, and a class outside 1..K is no class.
func TestRatingClass(t *testing.T) {
	for _, tc := range []struct {
		rating float64
		k      int
		class  int // 0: none
	}{
		{0.5, 5, 1}, {1, 5, 1}, {1.5, 5, 2}, {2, 5, 2}, {2.49, 5, 2}, {2.5, 5, 3}, {3.5, 5, 4}, {4.5, 5, 5}, {5, 5, 5}, {5.49, 5, 5},
		{0.49999999999999994, 5, 0}, // the largest double below 0.5: floor(r+0.5) would say 1
		{0, 5, 0}, {0.25, 5, 0}, {5.5, 5, 0}, {-0.5, 5, 0}, {math.NaN(), 5, 0}, {math.Inf(1), 5, 0}, {math.Inf(-1), 5, 0},
		{9.5, 10, 10}, {10, 10, 10}, {10.5, 10, 0}, {1e300, 32, 0},
	} {
		class, ok := RatingClass(tc.rating, tc.k)
		if ok != (tc.class != 0) || (ok && class != tc.class) {
			t.Errorf("RatingClass(%v, %d) = %d, %v; want class %d (0: none)", tc.rating, tc.k, class, ok, tc.class)
		}
	}
}

// TestHalfStarRatingIsItsClass: in rating mode the observed class of a
// half-star rating is its rounded class.
func TestHalfStarRatingIsItsClass(t *testing.T) {
	m, err := New(smallConfig(ModeRating), rand.NewPCG(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	var sc Score
	for rating, label := range map[float64]int{0.5: 0, 1: 0, 1.5: 1, 2.5: 2, 3.5: 3, 4: 3, 4.5: 4, 5: 4} {
		if err := m.Step(Event{User: "u", Item: "i", Rating: rating}, &sc); err != nil {
			t.Fatalf("rating %v: %v", rating, err)
		}
		if sc.Label != label {
			t.Errorf("rating %v: observed class %d, want %d", rating, sc.Label, label)
		}
	}
}

// TestStepDoesNotAllocate: on a warm model (past warm-up, mixture fitted,
// every id known), Step allocates nothing, in binary mode with negatives
// and in rating mode. The measured events fall between two refits: a
// refit (every RefitEvery events) allocates in gonum's Cholesky, about 50
// times, which BenchmarkStep's allocs/op averages away.
func TestStepDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"binary", Config{Mode: ModeBinary, Dim: 16, Negatives: 4, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256}},
		{"binary-user-offset", Config{Mode: ModeBinary, Dim: 16, Negatives: 4, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256,
			TransitionUserOffset: true}},
		{"rating", Config{Mode: ModeRating, Dim: 16, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256}},
		{"binary-dwell-long", Config{Mode: ModeBinary, Dim: 16, Negatives: 4, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256,
			TransitionUserOffset: true, DwellDirection: DwellLong}},
		// Tables capped below the stream's 60 users and 40 items: ids are
		// evicted and their rows reused on most events.
		{"binary-capped", Config{Mode: ModeBinary, Dim: 16, Negatives: 4, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256,
			MaxUsers: 50, MaxItems: 36, AdmitAfter: 2, AdmitSketchWidth: 1024, TransitionUserOffset: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.cfg, rand.NewPCG(1, 2))
			if err != nil {
				t.Fatal(err)
			}
			evs := testStream(4000, 12)
			for j := range evs { // a half-star rating the item decides: learnable
				id := evs[j].Item
				evs[j].Rating = float64(1+int(id[len(id)-1]-'0')%10) / 2
			}
			var sc Score
			for _, ev := range evs { // warm: every id known, refits done
				if err := m.Step(ev, &sc); err != nil {
					t.Fatal(err)
				}
			}
			if s := m.Summary(); !s.GMM.Fitted || s.Distilled == 0 {
				t.Fatalf("model not warm: %+v", s)
			}
			// 4000 events end on a refit; 1 + 98 more stay before the next.
			j := 0
			evicted := m.Summary().UsersEvicted
			allocs := testing.AllocsPerRun(98, func() {
				m.Step(evs[j%len(evs)], &sc)
				j++
			})
			if allocs != 0 {
				t.Fatalf("Step allocates %v times per event on a warm model", allocs)
			}
			if tc.cfg.MaxUsers > 0 && m.Summary().UsersEvicted-evicted < 5 {
				t.Fatalf("%d users evicted in 99 events: the capped case is not measured", m.Summary().UsersEvicted-evicted)
			}
		})
	}
}

// TestWeightScalesLearning: an event weighted 2 moves the model as two
// events' worth of gradient would, on the positive; weight 0 is weight 1.
func TestWeightScalesLearning(t *testing.T) {
	cfg := smallConfig(ModeRating)
	var sc Score
	prob := func(w float64) float64 {
		m, _ := New(cfg, rand.NewPCG(1, 1))
		m.Step(Event{User: "u", Item: "i", Rating: 4, Weight: w}, &sc)
		dst := make([]float64, m.K())
		m.Predict("u", "i", dst)
		return dst[3]
	}
	p0, p1, p2 := prob(0), prob(1), prob(2)
	if p0 != p1 {
		t.Errorf("weight 0 gave %v, weight 1 gave %v", p0, p1)
	}
	if !(p2 > p1) {
		t.Errorf("weight 2 gave f_y %v, not above weight 1's %v", p2, p1)
	}
}

// cpuTime is the process's user + system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestSnapshotCopy: a Snapshot copy encodes exactly as the model did when
// it was taken, whatever the model does afterwards, and a reused copy is
// as good as a new one.
func TestSnapshotCopy(t *testing.T) {
	evs := testStream(3000, 6)
	for _, cfg := range allModes {
		t.Run(configName(cfg), func(t *testing.T) {
			m, _ := New(cfg, rand.NewPCG(4, 4))
			runScores(t, m, evs[:1000])
			want := encode(t, m)
			cp := m.FrozenCopy(nil)
			runScores(t, m, evs[1000:2000]) // the model goes on; the copy must not
			if got := encode(t, cp); !bytes.Equal(got, want) {
				t.Fatal("the copy changed as the model learned")
			}
			want2 := encode(t, m)
			cp2 := m.FrozenCopy(cp) // reuse
			runScores(t, m, evs[2000:])
			if got := encode(t, cp2); !bytes.Equal(got, want2) {
				t.Fatal("a reused copy differs from the model it copied")
			}
			var sc Score
			if err := cp2.Step(evs[0], &sc); !errors.Is(err, ErrFrozen) {
				t.Fatalf("Step on a copy: %v", err)
			}
			if s := cp2.Summary(); s.Events != 2000 {
				t.Fatalf("copy summary events %d", s.Events)
			}
		})
	}
}

// TestSnapshotIncremental: a copy refreshed with only what changed encodes
// exactly as the model does, after chunks of every size (none, one event,
// many), with new users and items arriving, with two copies taken in turn,
// and after the copy was taken from another model.
func TestSnapshotIncremental(t *testing.T) {
	evs := testStream(4000, 8)
	for j := range evs {
		if j%9 == 0 { // new users and items keep arriving
			evs[j].User, evs[j].Item = fmt.Sprint("new-u", j), fmt.Sprint("new-i", j/2)
		}
	}
	r := rand.New(rand.NewPCG(9, 9))
	for _, cfg := range allModes {
		t.Run(configName(cfg), func(t *testing.T) {
			m, _ := New(cfg, rand.NewPCG(4, 4))
			var copies [2]*Model
			for n, chunk := 0, 0; n < len(evs); chunk++ {
				size := []int{0, 1, 2, 17, 300}[r.IntN(5)]
				end := min(n+size, len(evs))
				runScores(t, m, evs[n:end])
				n = end
				c := &copies[chunk%2]
				*c = m.FrozenCopy(*c)
				if got, want := encode(t, *c), encode(t, m); !bytes.Equal(got, want) {
					t.Fatalf("after %d events (chunk %d of %d): the copy differs from the model", n, chunk, size)
				}
			}
			// A copy of another model is copied whole.
			other, err := ReadModel(bytes.NewReader(encode(t, m)))
			if err != nil {
				t.Fatal(err)
			}
			runScores(t, other, evs[:50])
			copies[0] = other.FrozenCopy(copies[0])
			if !bytes.Equal(encode(t, copies[0]), encode(t, other)) {
				t.Fatal("a copy switched to another model differs from it")
			}
			// So is a copy of a copy.
			cc := copies[0].FrozenCopy(copies[1])
			if !bytes.Equal(encode(t, cc), encode(t, other)) {
				t.Fatal("a copy of a copy differs")
			}
		})
	}
}

// BenchmarkCheckpointPause compares what a checkpoint costs the model
// goroutine: encoding the model there, copying it whole for another
// goroutine to encode, or copying what changed since the last checkpoint
// (the service's way: the copy is marked saved after each checkpoint, so
// its changes are listed since then), with 20,000 events (uniform over
// users and items, the worst case for the last) between checkpoints.
// 20,000 items at d=32; 100,000 users (52 MB encoded) and 1,000,000 users
// (450 MB). delta-write is the saver goroutine's encoding of the delta
// that copy-changed lists, off the model loop, with its size.
func BenchmarkCheckpointPause(b *testing.B) {
	const items, between = 20000, 20000
	for _, users := range []int{100000, 1000000} {
		m, _ := New(Config{}, rand.NewPCG(1, 1))
		var sc Score
		r := rand.New(rand.NewPCG(2, 2))
		for j := 0; j < users; j++ {
			m.Step(Event{User: fmt.Sprint("u", j), Item: fmt.Sprint("i", j%items)}, &sc)
		}
		step := func(n int) {
			for j := 0; j < n; j++ {
				m.Step(Event{User: fmt.Sprint("u", r.IntN(users)), Item: fmt.Sprint("i", r.IntN(items))}, &sc)
			}
		}
		var modelBytes int64
		b.Run(fmt.Sprintf("users=%d/encode", users), func(b *testing.B) {
			var buf bytes.Buffer
			for j := 0; j < b.N; j++ {
				buf.Reset()
				m.WriteTo(&buf)
			}
			modelBytes = int64(buf.Len())
			b.ReportMetric(float64(buf.Len())/1e6, "MB")
		})
		for _, whole := range []bool{true, false} {
			name := "copy-changed"
			if whole {
				name = "copy-whole"
			}
			b.Run(fmt.Sprintf("users=%d/%s", users, name), func(b *testing.B) {
				cp := m.FrozenCopy(nil)
				cp.MarkSaved()
				for j := 0; j < b.N; j++ {
					b.StopTimer()
					cp.MarkSaved()
					step(between)
					if whole {
						cp.origin = nil // forget the last sync: copy all
					}
					b.StartTimer()
					cp = m.FrozenCopy(cp)
				}
				u, i := cp.DeltaRows()
				b.ReportMetric(float64(u), "users-copied")
				b.ReportMetric(float64(i), "items-copied")
			})
		}
		b.Run(fmt.Sprintf("users=%d/delta-write", users), func(b *testing.B) {
			cp := m.FrozenCopy(nil)
			cp.MarkSaved()
			step(between)
			cp = m.FrozenCopy(cp)
			var n int64
			for j := 0; j < b.N; j++ {
				n, _ = cp.WriteDelta(io.Discard)
			}
			b.ReportMetric(float64(n)/1e6, "MB")
			b.ReportMetric(float64(n)/float64(max(modelBytes, 1)), "of-model")
		})
	}
}

// BenchmarkDeltaBytes: a delta's size against the rows it changed, at
// 1,000,000 users and 20,000 items (d=32), for 0 to 200,000 uniform
// events since the last save. bytes/row is (delta − the delta of no
// event) per changed row; of-model the delta's share of the encoding.
func BenchmarkDeltaBytes(b *testing.B) {
	const users, items = 1000000, 20000
	m, _ := New(Config{}, rand.NewPCG(1, 1))
	var sc Score
	r := rand.New(rand.NewPCG(2, 2))
	for j := 0; j < users; j++ {
		m.Step(Event{User: fmt.Sprint("u", j), Item: fmt.Sprint("i", j%items)}, &sc)
	}
	var enc countWriter
	m.WriteTo(&enc)
	cp := m.FrozenCopy(nil)
	cp.MarkSaved()
	cp = m.FrozenCopy(cp)
	fixed := cp.DeltaSize()
	for _, events := range []int{0, 200, 2000, 20000, 200000} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			var size int64
			var rows int
			for j := 0; j < b.N; j++ {
				cp.MarkSaved()
				for range events {
					m.Step(Event{User: fmt.Sprint("u", r.IntN(users)), Item: fmt.Sprint("i", r.IntN(items))}, &sc)
				}
				cp = m.FrozenCopy(cp)
				size = cp.DeltaSize()
				u, i := cp.DeltaRows()
				rows = u + i
			}
			b.ReportMetric(float64(size)/1e6, "MB")
			b.ReportMetric(float64(rows), "rows")
			if rows > 0 {
				b.ReportMetric(float64(size-fixed)/float64(rows), "bytes/row")
			}
			b.ReportMetric(float64(size)/float64(enc.n), "of-model")
		})
	}
}

// countWriter counts what is written to it.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
