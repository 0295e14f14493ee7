package synth

import (
	"errors"
	"fmt"
	"math"
)

// Defaults of the fields of Config that are not derived from Events.
const (
	DefaultEpochMS      = int64(1_700_000_000_000) // 2023-11-14T22:13:20Z
	DefaultTasteAlpha   = 0.05
	DefaultPopularity   = 0.6
	DefaultOverlap      = 0.1
	DefaultMisclick     = 0.45
	DefaultClickbait    = 0.20
	DefaultCuriosity    = 0.35
	DefaultSessionMean  = 8.0
	DefaultTopicPurity  = 0.98
	minUsers            = 20
	minItems            = 50
	smallCatalogue      = 500
	minTopics           = 4
	maxTopics           = 16
	minClickbaitItems   = 3
	eventsPerUser       = 100
	eventsPerItem       = 200
	itemsPerTopic       = 100
	itemsPerClickbait   = 20
	usersPerSession     = 10
	minSessions         = 2
	maxSessions         = 256
	genuineRedrawsLimit = 10
)

// ErrConfig is wrapped by every error Validate returns.
var ErrConfig = errors.New("invalid synth config")

// Config describes a synthetic stream. The zero value of every field except
// Events means its default, written in the field's comment; sizes that
// default from Events are resolved by Resolve.
type Config struct {
	// Events is the number of events to generate (required, > 0).
	Events int
	// Noise is the share of all events that are noise, in [0, 1) (default 0,
	// so a clean stream; the CLI defaults it to 0.2). The realised share is
	// exact: round(Noise * Events) events are noise.
	Noise float64
	// Seed seeds every random draw (default 0, itself a valid seed).
	Seed uint64

	// Users is the number of users (default max(20, Events/100)).
	Users int
	// Items is the number of items (default max(Events/200,
	// min(Events/20, 500)), at least 50: about 200 events per item on large
	// streams, and on small ones a catalogue large enough that a user's
	// clicks rarely repeat an item).
	Items int
	// Topics is the number of latent topics
	// (default Items/100 clamped to [4, 16]).
	Topics int
	// ClickbaitItems is the size of the clickbait set
	// (default max(3, Items/20), at most Items).
	ClickbaitItems int

	// TasteAlpha is the symmetric Dirichlet concentration of user tastes over
	// topics; small values give users few favourite topics (default 0.05:
	// most users care about one topic, some about two or three).
	TasteAlpha float64
	// TopicPurity is the share of an item's topic vector on its primary
	// topic, in (0, 1] (default 0.98).
	TopicPurity float64
	// Popularity is the Zipf exponent s of item popularity, weight ∝ rank^-s
	// (default 0.6; a negative value means 0, every item equally popular).
	Popularity float64
	// Overlap is the share of genuine clicks given a short (bounce-like)
	// dwell and the share of noisy clicks given a long dwell, in [0, 0.5]
	// (default 0.1). It keeps dwell from being a perfect oracle. A negative
	// value means 0.
	Overlap float64
	// Misclick, Clickbait and Curiosity weigh the noise mechanisms; they are
	// normalised to sum to 1 (defaults 0.45, 0.20, 0.35; all zero means the
	// defaults).
	Misclick, Clickbait, Curiosity float64
	// SessionMean is the mean number of events in a session (default 8).
	SessionMean float64
	// EpochMS is the unix-millisecond time the stream starts at
	// (default 1700000000000).
	EpochMS int64

	// DwellShare is the share of events that carry dwell_ms, in [0, 1]
	// (default 1: every event; a negative value means 0, none). Which
	// events lose their dwell is drawn from a stream of its own, so
	// streams that differ only in DwellShare have the same events.
	DwellShare float64

	// Profile selects the generative model: ProfileV1 (the default, "" or
	// "v1") or ProfileV2. V2 configures the noise kinds only ProfileV2
	// has; it is ignored under ProfileV1.
	Profile string
	V2      V2Config
}

// Profiles of the generative model.
const (
	// ProfileV1 is the model of testdata/synthetic-20k.jsonl: clicks only,
	// three noise mechanisms, an exact noise share.
	ProfileV1 = "v1"
	// ProfileV2 adds event types, a rotating trending slot, bots and
	// low-quality users, bounce chains, purchase-then-return and wide,
	// overlapping dwell distributions (docs/design/generator.md).
	ProfileV2 = "v2"
)

// Resolve returns c with every defaulted field filled in. It does not
// validate; call Validate on the result.
func (c Config) Resolve() Config {
	if c.Users == 0 {
		c.Users = max(minUsers, c.Events/eventsPerUser)
	}
	if c.Items == 0 {
		c.Items = max(minItems, c.Events/eventsPerItem, min(c.Events/20, smallCatalogue))
	}
	if c.Topics == 0 {
		c.Topics = min(max(minTopics, c.Items/itemsPerTopic), maxTopics)
	}
	if c.ClickbaitItems == 0 {
		c.ClickbaitItems = min(max(minClickbaitItems, c.Items/itemsPerClickbait), c.Items)
	}
	if c.TasteAlpha == 0 {
		c.TasteAlpha = DefaultTasteAlpha
	}
	if c.TopicPurity == 0 {
		c.TopicPurity = DefaultTopicPurity
	}
	switch {
	case c.Popularity == 0:
		c.Popularity = DefaultPopularity
	case c.Popularity < 0:
		c.Popularity = 0
	}
	switch {
	case c.Overlap == 0:
		c.Overlap = DefaultOverlap
	case c.Overlap < 0:
		c.Overlap = 0
	}
	if c.Misclick == 0 && c.Clickbait == 0 && c.Curiosity == 0 {
		c.Misclick, c.Clickbait, c.Curiosity = DefaultMisclick, DefaultClickbait, DefaultCuriosity
	}
	if c.SessionMean == 0 {
		c.SessionMean = DefaultSessionMean
	}
	if c.EpochMS == 0 {
		c.EpochMS = DefaultEpochMS
	}
	switch {
	case c.DwellShare == 0:
		c.DwellShare = 1
	case c.DwellShare < 0:
		c.DwellShare = 0
	}
	if c.Profile == "" {
		c.Profile = ProfileV1
	}
	if c.Profile == ProfileV2 {
		c.V2 = c.V2.resolve(c)
	}
	return c
}

// Validate reports what is wrong with a resolved Config.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...)))
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if c.Events <= 0 {
		bad("events must be > 0, got %d", c.Events)
	}
	if !finite(c.Noise) || c.Noise < 0 || c.Noise >= 1 {
		bad("noise must be in [0, 1), got %v", c.Noise)
	}
	if c.Users <= 0 {
		bad("users must be > 0, got %d", c.Users)
	}
	if c.Items <= 1 {
		bad("items must be > 1, got %d", c.Items)
	}
	if c.Topics <= 0 {
		bad("topics must be > 0, got %d", c.Topics)
	}
	if c.ClickbaitItems <= 0 || c.ClickbaitItems > c.Items {
		bad("clickbait items must be in [1, items=%d], got %d", c.Items, c.ClickbaitItems)
	}
	if !finite(c.TasteAlpha) || c.TasteAlpha <= 0 {
		bad("taste alpha must be > 0, got %v", c.TasteAlpha)
	}
	if !finite(c.TopicPurity) || c.TopicPurity <= 0 || c.TopicPurity > 1 {
		bad("topic purity must be in (0, 1], got %v", c.TopicPurity)
	}
	if !finite(c.Popularity) || c.Popularity < 0 || c.Popularity > 5 {
		bad("popularity exponent must be in [0, 5], got %v", c.Popularity)
	}
	if !finite(c.Overlap) || c.Overlap < 0 || c.Overlap > 0.5 {
		bad("overlap must be in [0, 0.5], got %v", c.Overlap)
	}
	for _, m := range []struct {
		name string
		w    float64
	}{{"misclick", c.Misclick}, {"clickbait", c.Clickbait}, {"curiosity", c.Curiosity}} {
		if !finite(m.w) || m.w < 0 {
			bad("%s weight must be >= 0, got %v", m.name, m.w)
		}
	}
	if c.Misclick+c.Clickbait+c.Curiosity <= 0 {
		bad("noise mechanism weights must not all be zero")
	}
	if !finite(c.SessionMean) || c.SessionMean < 1 {
		bad("session mean must be >= 1, got %v", c.SessionMean)
	}
	if c.EpochMS < 0 {
		bad("epoch must be >= 0, got %d", c.EpochMS)
	}
	if !finite(c.DwellShare) || c.DwellShare < 0 || c.DwellShare > 1 {
		bad("dwell share must be in [0, 1], got %v", c.DwellShare)
	}
	switch c.Profile {
	case ProfileV1:
	case ProfileV2:
		c.V2.validate(c, bad)
	default:
		bad("profile must be %q or %q, got %q", ProfileV1, ProfileV2, c.Profile)
	}
	return errors.Join(errs...)
}
