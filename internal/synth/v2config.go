package synth

import "math"

// Defaults of V2Config.
const (
	DefaultV2Misclick       = 0.15
	DefaultV2Clickbait      = 0.15
	DefaultV2Curiosity      = 0.15
	DefaultV2Trending       = 0.20
	DefaultV2Bounce         = 0.25
	DefaultV2PurchaseReturn = 0.10
	DefaultBotUsers         = 0.01
	DefaultLowQualityUsers  = 0.05
	DefaultBotNoise         = 0.9
	DefaultLowQualityNoise  = 0.6
	DefaultTrendingItems    = 5
	DefaultTrendingPeriodMS = int64(60 * 60 * 1000)
	DefaultBounceMean       = 4.0
	DefaultReturnDelayMS    = int64(2 * 60 * 60 * 1000)
	DefaultBotSessionMean   = 20.0
	DefaultBotActivity      = 2.0
)

// V2Config configures what ProfileV2 adds to the world. The zero value of
// every field means its default, written in the field's comment; a
// negative share means 0.
type V2Config struct {
	// Misclick, Clickbait, Curiosity, Trending, Bounce and PurchaseReturn
	// are the shares of the noise events of ordinary and low-quality users
	// that each mechanism produces; they are normalised to sum to 1
	// (defaults 0.15, 0.15, 0.15, 0.20, 0.25, 0.10; all zero means the
	// defaults). A bounce chain's events and a purchase's later return
	// count toward their mechanism's share.
	Misclick, Clickbait, Curiosity, Trending, Bounce, PurchaseReturn float64

	// BotUsers is the share of users that are bots (default 0.01);
	// LowQualityUsers the share that are low-quality humans (default 0.05).
	BotUsers, LowQualityUsers float64
	// BotNoise is the share of a bot's events that are noise (default
	// 0.9); LowQualityNoise the share of a low-quality user's (default 0.6).
	BotNoise, LowQualityNoise float64
	// BotSessionMean is the mean number of events in a bot's session
	// (default 20); BotActivity multiplies a bot's activity weight
	// (default 2).
	BotSessionMean, BotActivity float64

	// TrendingItems is the size of the trending slot (default 5);
	// TrendingPeriodMS how long a slot lasts before it rotates (default
	// 1 h of stream time; a default stream spans about 13 h).
	TrendingItems    int
	TrendingPeriodMS int64
	// BounceMean is the mean number of events of a bounce chain
	// (default 4, geometric, at least 2).
	BounceMean float64
	// ReturnDelayMS is the mean delay from a purchase to its return
	// (default 2 h, exponential); returns that would fall after the
	// stream's last event are not emitted.
	ReturnDelayMS int64
}

func (v V2Config) resolve(c Config) V2Config {
	share := func(p *float64, def float64) {
		switch {
		case *p == 0:
			*p = def
		case *p < 0:
			*p = 0
		}
	}
	if v.Misclick == 0 && v.Clickbait == 0 && v.Curiosity == 0 && v.Trending == 0 && v.Bounce == 0 && v.PurchaseReturn == 0 {
		v.Misclick, v.Clickbait, v.Curiosity = DefaultV2Misclick, DefaultV2Clickbait, DefaultV2Curiosity
		v.Trending, v.Bounce, v.PurchaseReturn = DefaultV2Trending, DefaultV2Bounce, DefaultV2PurchaseReturn
	}
	share(&v.BotUsers, DefaultBotUsers)
	share(&v.LowQualityUsers, DefaultLowQualityUsers)
	share(&v.BotNoise, DefaultBotNoise)
	share(&v.LowQualityNoise, DefaultLowQualityNoise)
	if v.BotSessionMean == 0 {
		v.BotSessionMean = DefaultBotSessionMean
	}
	if v.BotActivity == 0 {
		v.BotActivity = DefaultBotActivity
	}
	if v.TrendingItems == 0 {
		v.TrendingItems = min(DefaultTrendingItems, c.Items)
	}
	if v.TrendingPeriodMS == 0 {
		v.TrendingPeriodMS = DefaultTrendingPeriodMS
	}
	if v.BounceMean == 0 {
		v.BounceMean = DefaultBounceMean
	}
	if v.ReturnDelayMS == 0 {
		v.ReturnDelayMS = DefaultReturnDelayMS
	}
	return v
}

func (v V2Config) validate(c Config, bad func(string, ...any)) {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	for _, m := range []struct {
		name string
		w    float64
	}{{"misclick", v.Misclick}, {"clickbait", v.Clickbait}, {"curiosity", v.Curiosity},
		{"trending", v.Trending}, {"bounce", v.Bounce}, {"purchase-return", v.PurchaseReturn}} {
		if !finite(m.w) || m.w < 0 {
			bad("v2 %s share must be >= 0, got %v", m.name, m.w)
		}
	}
	if !(v.Misclick+v.Clickbait+v.Curiosity+v.Trending+v.Bounce+v.PurchaseReturn > 0) {
		bad("v2 noise mechanism shares must not all be zero")
	}
	for _, m := range []struct {
		name string
		p    float64
	}{{"bot users", v.BotUsers}, {"low-quality users", v.LowQualityUsers}, {"bot noise", v.BotNoise}, {"low-quality noise", v.LowQualityNoise}} {
		if !finite(m.p) || m.p < 0 || m.p > 1 {
			bad("v2 %s must be in [0, 1], got %v", m.name, m.p)
		}
	}
	if v.BotUsers+v.LowQualityUsers > 0.5 {
		bad("v2 bot and low-quality users must be at most half the users, got %v", v.BotUsers+v.LowQualityUsers)
	}
	if !finite(v.BotSessionMean) || v.BotSessionMean < 1 {
		bad("v2 bot session mean must be >= 1, got %v", v.BotSessionMean)
	}
	if !finite(v.BotActivity) || v.BotActivity <= 0 {
		bad("v2 bot activity must be > 0, got %v", v.BotActivity)
	}
	if v.TrendingItems < 1 || v.TrendingItems > c.Items {
		bad("v2 trending items must be in [1, items=%d], got %d", c.Items, v.TrendingItems)
	}
	if v.TrendingPeriodMS < 1 {
		bad("v2 trending period must be >= 1 ms, got %d", v.TrendingPeriodMS)
	}
	if !finite(v.BounceMean) || v.BounceMean < 2 {
		bad("v2 bounce mean must be >= 2, got %v", v.BounceMean)
	}
	if v.ReturnDelayMS < 1 {
		bad("v2 return delay must be >= 1 ms, got %d", v.ReturnDelayMS)
	}
}
