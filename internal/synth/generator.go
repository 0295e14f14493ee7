package synth

import (
	"bufio"
	"container/heap"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
)

// Dwell-time model, in milliseconds: log-normal with the given median and
// log-scale sigma.
type logNormal struct{ median, sigma float64 }

var (
	dwellGenuine   = logNormal{40_000, 0.6} // reading: median 40 s
	dwellGlance    = logNormal{4_000, 0.5}  // genuine but brief (already knew it)
	dwellMisclick  = logNormal{1_500, 0.5}  // back button at once
	dwellClickbait = logNormal{4_000, 0.45} // bounce
	dwellCuriosity = logNormal{5_000, 0.4}  // skim, not for me
	dwellLeftOpen  = logNormal{45_000, 0.7} // noise, but the tab stayed open
)

const (
	minDwellMS = 200
	maxDwellMS = 30 * 60 * 1000
	// thinkMeanMS is the mean pause between leaving an item and the next
	// click of the same session (exponential).
	thinkMeanMS = 8_000
	// sessionGapMeanMS is the mean pause between the end of a session and
	// the start of the next one in the same slot (exponential).
	sessionGapMeanMS = 30_000
	// userRedraws bounds the redraws of a user who already has an open
	// session.
	userRedraws = 8
)

// DwellThresholdMS is the dwell time below which a click counts as noise in
// the dwell protocol of the paper (Adressa: 10 s). The generator does not use
// it; Stats reports the overlap against it.
const DwellThresholdMS = 10_000

// Generator draws a synthetic stream event by event. It is deterministic:
// the same Config gives the same events. It is not safe for concurrent use.
type Generator struct {
	cfg      Config
	w        *world
	r        *rand.Rand
	mechCDF  []float64 // over Misclick, Clickbait, Curiosity
	sessions sessionHeap
	active   []bool // user has an open session
	seen     map[uint64]struct{}
	nextID   uint64
	emitted  int
	noise    int // noise events still to emit
	lastTS   int64
	// dwellMask draws which events hide their dwell (nil: all show it).
	dwellMask *rand.Rand
	v2        *worldV2 // nil under ProfileV1
}

type session struct {
	id   uint64
	user int
	next int64 // time of the next click
	left int   // clicks left, including the next one
	// ProfileV2 only: chain is the number of bounce-chain events still to
	// come before the session resumes; ret, when > 0, makes the entry a
	// pending return of item ret-1 rather than a session.
	chain int
	ret   int
}

// New returns a Generator for c, resolved with Config.Resolve.
func New(c Config) (*Generator, error) {
	c = c.Resolve()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:     c,
		w:       newWorld(c),
		r:       rand.New(rand.NewPCG(c.Seed, eventStream)),
		mechCDF: cumulative([]float64{c.Misclick, c.Clickbait, c.Curiosity}),
		active:  make([]bool, c.Users),
		seen:    make(map[uint64]struct{}),
		noise:   int(math.Round(c.Noise * float64(c.Events))),
		lastTS:  c.EpochMS - 1,
	}
	if c.DwellShare < 1 {
		g.dwellMask = rand.New(rand.NewPCG(c.Seed, dwellStream))
	}
	if c.Profile == ProfileV2 {
		g.v2 = newWorldV2(c, g.w)
	}
	slots := min(max(minSessions, c.Users/usersPerSession), maxSessions)
	t := c.EpochMS
	for range slots {
		t += g.exp(sessionGapMeanMS / 4)
		g.open(t)
	}
	return g, nil
}

// Config returns the resolved configuration.
func (g *Generator) Config() Config { return g.cfg }

// Next returns the next event, or false after Config().Events events.
func (g *Generator) Next() (Event, bool) {
	var (
		e  Event
		ok bool
	)
	if g.v2 != nil {
		e, ok = g.nextV2()
	} else {
		e, ok = g.nextV1()
	}
	if ok && g.dwellMask != nil {
		e.NoDwell = g.dwellMask.Float64() >= g.cfg.DwellShare
	}
	return e, ok
}

func (g *Generator) nextV1() (Event, bool) {
	if g.emitted >= g.cfg.Events {
		return Event{}, false
	}
	s := g.sessions[0]
	ts := max(s.next, g.lastTS+1)

	// Exactly round(Noise*Events) noise events, spread uniformly over the
	// stream (selection sampling).
	remaining := g.cfg.Events - g.emitted
	cause := Genuine
	if g.r.Float64()*float64(remaining) < float64(g.noise) {
		g.noise--
		cause = Misclick + Cause(draw(g.r, g.mechCDF))
	}
	e := Event{User: s.user, TS: ts, Cause: cause}
	e.Item = g.item(s.user, cause)
	e.DwellMS = g.dwell(cause)

	g.emitted++
	g.lastTS = ts
	s.left--
	if s.left > 0 {
		s.next = ts + e.DwellMS + g.exp(thinkMeanMS)
		heap.Fix(&g.sessions, 0)
	} else {
		heap.Pop(&g.sessions)
		g.active[s.user] = false
		g.open(ts + e.DwellMS + g.exp(sessionGapMeanMS))
	}
	return e, true
}

// open starts a session at time t for a user drawn by activity, preferring
// one without an open session.
func (g *Generator) open(t int64) {
	if g.v2 != nil {
		g.openV2(t)
		return
	}
	u := draw(g.r, g.w.activityCDF)
	for i := 0; i < userRedraws && g.active[u]; i++ {
		u = draw(g.r, g.w.activityCDF)
	}
	g.active[u] = true
	// Session length: 1 + geometric, mean SessionMean.
	left := 1
	if m := g.cfg.SessionMean; m > 1 {
		p := 1 / m
		left += int(math.Floor(math.Log(1-g.r.Float64()) / math.Log(1-p)))
	}
	heap.Push(&g.sessions, &session{id: g.nextID, user: u, next: t, left: left})
	g.nextID++
}

func (g *Generator) item(u int, c Cause) int {
	w := g.w
	switch c {
	case Misclick:
		return g.r.IntN(g.cfg.Items)
	case Clickbait:
		return w.clickbait[draw(g.r, w.clickbaitCDF)]
	case Curiosity:
		k := draw(g.r, w.offTasteCDF[u])
		return draw(g.r, w.topicItemCDF[k])
	}
	// Genuine: a topic from the user's taste, an item from the topic; redraw
	// a few times if the user already clicked the item genuinely.
	var i int
	for range genuineRedrawsLimit + 1 {
		k := draw(g.r, w.tasteCDF[u])
		i = draw(g.r, w.topicItemCDF[k])
		if _, dup := g.seen[g.key(u, i)]; !dup {
			break
		}
	}
	g.seen[g.key(u, i)] = struct{}{}
	return i
}

func (g *Generator) key(u, i int) uint64 { return uint64(u)*uint64(g.cfg.Items) + uint64(i) }

func (g *Generator) dwell(c Cause) int64 {
	flip := g.r.Float64() < g.cfg.Overlap
	var d logNormal
	switch {
	case c == Genuine && flip:
		d = dwellGlance
	case c == Genuine:
		d = dwellGenuine
	case flip:
		d = dwellLeftOpen
	case c == Misclick:
		d = dwellMisclick
	case c == Clickbait:
		d = dwellClickbait
	default:
		d = dwellCuriosity
	}
	ms := d.median * math.Exp(d.sigma*g.r.NormFloat64())
	return min(max(int64(math.Round(ms)), minDwellMS), maxDwellMS)
}

// exp draws an exponential duration in milliseconds with the given mean.
func (g *Generator) exp(mean float64) int64 {
	return int64(math.Round(g.r.ExpFloat64() * mean))
}

// Stats describes a generated stream.
type Stats struct {
	Events int
	// ByCause counts events by Cause (index Genuine, Misclick, ...).
	ByCause [numCauses]int
	// ShortGenuine counts genuine events with dwell < DwellThresholdMS;
	// LongNoise counts noise events with dwell >= DwellThresholdMS.
	ShortGenuine, LongNoise int
	// Both count only events that carry a dwell time; WithDwell counts
	// those.
	WithDwell int
	// RepeatGenuine counts genuine events on a (user, item) pair that was
	// already clicked genuinely.
	RepeatGenuine int
	// ByType counts events by Type.
	ByType [numTypes]int
	// Users and Items count the distinct users and items that occur.
	Users, Items int
	FirstTS      int64
	LastTS       int64

	genuineWithoutDwell, noiseWithoutDwell int
}

// Noise returns the number of noise events.
func (s Stats) Noise() int { return s.Events - s.ByCause[Genuine] }

// NoiseShare returns the realised share of noise events.
func (s Stats) NoiseShare() float64 { return ratio(s.Noise(), s.Events) }

// ShortGenuineShare returns the share of genuine events with a short dwell,
// among those that carry one.
func (s Stats) ShortGenuineShare() float64 {
	return ratio(s.ShortGenuine, s.ByCause[Genuine]-s.genuineWithoutDwell)
}

// LongNoiseShare returns the share of noise events with a long dwell, among
// those that carry one.
func (s Stats) LongNoiseShare() float64 { return ratio(s.LongNoise, s.Noise()-s.noiseWithoutDwell) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// String is a one-line human summary.
func (s Stats) String() string {
	return fmt.Sprintf("%d events, %d users, %d items; noise %.4f (misclick %d, clickbait %d, curiosity %d); "+
		"dwell<%ds: %.3f of genuine, dwell>=%ds: %.3f of noise; repeated genuine %d",
		s.Events, s.Users, s.Items, s.NoiseShare(), s.ByCause[Misclick], s.ByCause[Clickbait], s.ByCause[Curiosity],
		DwellThresholdMS/1000, s.ShortGenuineShare(), DwellThresholdMS/1000, s.LongNoiseShare(), s.RepeatGenuine) + s.v2String()
}

// v2String is what String adds for the kinds of ProfileV2 and a partial
// dwell, so that a v1 summary reads as before.
func (s Stats) v2String() string {
	var out string
	if n := s.ByCause[Trending] + s.ByCause[Bot] + s.ByCause[Bounce] + s.ByCause[Purchase] + s.ByCause[Return]; n > 0 {
		out += fmt.Sprintf("; trending %d, bot %d, bounce %d, purchase %d, return %d", s.ByCause[Trending], s.ByCause[Bot],
			s.ByCause[Bounce], s.ByCause[Purchase], s.ByCause[Return])
	}
	if s.ByType[Click] < s.Events {
		out += fmt.Sprintf("; events: view %d, click %d, cart %d, purchase %d, return %d", s.ByType[View], s.ByType[Click],
			s.ByType[Cart], s.ByType[PurchaseType], s.ByType[ReturnType])
	}
	if s.WithDwell < s.Events {
		out += fmt.Sprintf("; dwell on %.3f of events", ratio(s.WithDwell, s.Events))
	}
	return out
}

// Write generates the stream described by c and writes it to w as JSON
// lines, buffered. It checks ctx every few thousand events.
func Write(ctx context.Context, w io.Writer, c Config) (Stats, error) {
	g, err := New(c)
	if err != nil {
		return Stats{}, err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var (
		st    Stats
		buf   []byte
		users = make([]bool, g.cfg.Users)
		items = make([]bool, g.cfg.Items)
		pairs = make(map[uint64]struct{})
	)
	for {
		e, ok := g.Next()
		if !ok {
			break
		}
		if st.Events%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return st, fmt.Errorf("generate events: %w", err)
			}
		}
		if st.Events == 0 {
			st.FirstTS = e.TS
		}
		st.LastTS = e.TS
		st.Events++
		st.ByCause[e.Cause]++
		st.ByType[e.Type]++
		if e.NoDwell {
			if e.Cause == Genuine {
				st.genuineWithoutDwell++
			} else {
				st.noiseWithoutDwell++
			}
		} else {
			st.WithDwell++
		}
		if !users[e.User] {
			users[e.User] = true
			st.Users++
		}
		if !items[e.Item] {
			items[e.Item] = true
			st.Items++
		}
		if e.Cause == Genuine {
			if !e.NoDwell && e.DwellMS < DwellThresholdMS {
				st.ShortGenuine++
			}
			k := g.key(e.User, e.Item)
			if _, dup := pairs[k]; dup {
				st.RepeatGenuine++
			}
			pairs[k] = struct{}{}
		} else if !e.NoDwell && e.DwellMS >= DwellThresholdMS {
			st.LongNoise++
		}
		buf = e.AppendJSON(buf[:0])
		if _, err := bw.Write(buf); err != nil {
			return st, fmt.Errorf("write event: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("flush events: %w", err)
	}
	return st, nil
}

// sessionHeap orders open sessions by the time of their next click, then by
// id, so the order is total and deterministic.
type sessionHeap []*session

func (h sessionHeap) Len() int { return len(h) }
func (h sessionHeap) Less(i, j int) bool {
	if h[i].next != h[j].next {
		return h[i].next < h[j].next
	}
	return h[i].id < h[j].id
}
func (h sessionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sessionHeap) Push(x any)   { *h = append(*h, x.(*session)) }
func (h *sessionHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
}
