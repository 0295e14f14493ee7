package online

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Label modes.
const (
	ModeBinary = "binary" // every event is an observed positive; sampled negatives are observed 0
	ModeRating = "rating" // the observed class is the rating rounded half up, minus 1 (RatingClass)
	ModeDwell  = "dwell"  // the observed class is the dwell-time bucket
)

// Rho schedules.
const (
	RhoProgressive = "progressive"
	RhoFixed       = "fixed"
)

// Co-occurrence estimators.
const (
	CoocSketch = "sketch" // bounded memory: per-item user reservoirs + per-user MinHash
	CoocExact  = "exact"  // exact sets; memory grows with the data, for tests and small runs
)

// Directions of dwell (Config.DwellDirection).
const (
	DwellLearned = "learned" // the classifier's classes tell which dwell is genuine
	DwellLong    = "long"    // the longer dwell is the genuine one
)

// Negative sampling distributions.
const (
	NegUniform    = "uniform"
	NegPopularity = "popularity"
)

// Config configures a Model. The zero value of every field means its
// default, written in the field's comment, with exceptions:
// TransitionUserOffset and NoisyHeadTrainsEmbeddings, switches that are
// on unless turned off, and DwellDirection, "long" unless set, are so
// only in DefaultConfig, the
// configuration that `denoiser run`, `denoiser replay` and the lab start
// from. Validate reports what is wrong.
type Config struct {
	// Mode is the label mode: "binary" (default), "rating" or "dwell".
	Mode string `json:"mode" yaml:"mode"`
	// Classes is K in rating mode (default 5). In binary mode K = 2; in
	// dwell mode K = len(DwellBucketsMS) + 1. In rating mode a rating is
	// rounded half up to its class 1..K (RatingClass): integer ratings are
	// their own class; half stars join the class above, so MovieLens'
	// 0.5..5 scale gives 5 classes of two half-star levels each (0.5 and 1
	// are class 1, 4.5 and 5 class 5). A rating that rounds outside 1..K
	// is refused as an invalid event.
	Classes int `json:"classes" yaml:"classes"`
	// DwellBucketsMS are the ascending dwell thresholds of dwell mode
	// (default [10000, 30000]: <10 s, 10-30 s, >=30 s).
	DwellBucketsMS []int64 `json:"dwell_buckets_ms" yaml:"dwell_buckets_ms"`
	// Dim is the embedding dimension d (default 32).
	Dim int `json:"dim" yaml:"dim"`
	// Negatives is m, the negatives sampled per event in binary mode
	// (default 4; other modes default to 0).
	Negatives int `json:"negatives" yaml:"negatives"`
	// NegativeSampling is "uniform" (default) or "popularity".
	NegativeSampling string `json:"negative_sampling" yaml:"negative_sampling"`
	// LearningRate is the SGD step (default 0.05).
	LearningRate float64 `json:"learning_rate" yaml:"learning_rate"`
	// EmbeddingRate is the base step of the per-row adaptive embedding
	// updates (default 0.3 in binary mode, 0.05 otherwise); a row's step is
	// EmbeddingRate/sqrt(1+G), G its accumulated mean squared gradient.
	// Binary mode learns each user from one positive and m negatives
	// weighted 1/m per event and needs the larger step to learn tastes in
	// one pass; rating mode sees every row once per event, and larger
	// steps there make the transition estimate chase the embeddings.
	EmbeddingRate float64 `json:"embedding_rate" yaml:"embedding_rate"`
	// TransitionRate scales the learning rate of the transition network
	// (default 0.1): T̂ moves slower than f, so that one bad stretch of
	// distilled labels cannot tip the pair into explaining every event as
	// noise.
	TransitionRate float64 `json:"transition_rate" yaml:"transition_rate"`
	// Lambda weighs L_cal against L_class (default 1).
	Lambda float64 `json:"lambda" yaml:"lambda"`
	// WarmUp is the number of events f is trained on the noisy labels with
	// T̂ held at the identity, before distillation starts (default 1000;
	// 5000 until stop 36). A partition model counts its own events, a
	// share of the stream's, so a long warm-up holds partition models
	// back longest: docs/design/model.md, "Warm-up".
	WarmUp int `json:"warm_up" yaml:"warm_up"`
	// RhoSchedule is "progressive" (default) or "fixed".
	RhoSchedule string `json:"rho_schedule" yaml:"rho_schedule"`
	// RhoStart is the strict starting ρ of the progressive schedule and the
	// ρ of the fixed one (default 0.9).
	RhoStart float64 `json:"rho_start" yaml:"rho_start"`
	// RhoMin is the most relaxed ρ the progressive schedule reaches
	// (default 0.5).
	RhoMin float64 `json:"rho_min" yaml:"rho_min"`
	// RhoStep is how much ρ relaxes at a refit where T̂ is stable
	// (default 0.05).
	RhoStep float64 `json:"rho_step" yaml:"rho_step"`
	// RhoTolerance is the L1 change of the mean T̂ between two refits below
	// which T̂ counts as stable (default 0.02 per row).
	RhoTolerance float64 `json:"rho_tolerance" yaml:"rho_tolerance"`
	// GMMWindow is the sliding window of distilled samples the mixture is
	// fitted on (default 4096).
	GMMWindow int `json:"gmm_window" yaml:"gmm_window"`
	// RefitEvery is t_ref, the events between two refits (default 1000).
	RefitEvery int `json:"refit_every" yaml:"refit_every"`
	// GMMIterations bounds EM iterations per refit (default 2). EM
	// continues from the previous fit, and the window moves by at most
	// RefitEvery/GMMWindow of itself between refits, so a few iterations
	// track it. On the 200k synthetic stream the reliability ROC-AUC is
	// 0.8219 / 0.8233 / 0.8236 / 0.8237 with 1 / 2 / 3 / 20 iterations,
	// p_clean's 0.8716 throughout, and 20 spends most of the replay's time
	// in EM.
	GMMIterations int `json:"gmm_iterations" yaml:"gmm_iterations"`
	// GMMMinSamples is the window size needed before the first fit
	// (default 256).
	GMMMinSamples int `json:"gmm_min_samples" yaml:"gmm_min_samples"`
	// Cooccurrence is "sketch" (default) or "exact".
	Cooccurrence string `json:"cooccurrence" yaml:"cooccurrence"`
	// SketchUsers is the per-item reservoir of users (default 16).
	SketchUsers int `json:"sketch_users" yaml:"sketch_users"`
	// SketchHashes is the per-user MinHash length, a multiple of 4
	// (default 16). On the clustered test stream 16/16 is as accurate as
	// 32/32 (TestSketchCooccurrenceError) at a quarter of the cost.
	SketchHashes int `json:"sketch_hashes" yaml:"sketch_hashes"`
	// L2 is the weight decay on the embedding rows an event touches
	// (default 1e-4).
	L2 float64 `json:"l2" yaml:"l2"`
	// Clip bounds the L2 norm of every gradient (default 5).
	Clip float64 `json:"clip" yaml:"clip"`
	// InitScale is the standard deviation of initial embeddings (default 0.1).
	InitScale float64 `json:"init_scale" yaml:"init_scale"`
	// Plain trains f on the noisy labels only: T̂ = I, no distillation, no
	// GMM. It is the baseline that loss-based denoisers (T-CE) use.
	Plain bool `json:"plain" yaml:"plain"`
	// NoisyHeadTrainsEmbeddings lets the noisy head's gradient reach the
	// embeddings, as well as the classifier's: on in DefaultConfig since
	// stop 71 (docs/design/model.md, "The noisy head trains the
	// embeddings"); off, the head reads z but does not shape it, and on
	// a stream of uniform misclicks the classifier falls far below a
	// plain model's loss.
	NoisyHeadTrainsEmbeddings bool `json:"noisy_head_trains_embeddings" yaml:"noisy_head_trains_embeddings"`
	// NoGMM fixes the weight w to 1 (ablation).
	NoGMM bool `json:"no_gmm" yaml:"no_gmm"`
	// NoContext leaves the event's dwell and type out of the weight
	// (ablation): Score.Weight is then p_clean.
	NoContext bool `json:"no_context,omitempty" yaml:"no_context"`
	// NoTransition fixes T̂ to the identity (ablation).
	NoTransition bool `json:"no_transition" yaml:"no_transition"`
	// TransitionUserOffset adds a per-user offset u_u to T̂'s logits, as
	// the per-item offset o_i (on in DefaultConfig, so by default in the
	// service, replay and the lab; a Config literal leaves it off, as do
	// models encoded before it existed): T̂(x)_j =
	// softmax_k(A_jk·z + C_jk + o_i,jk + u_u,jk), K·K values per user,
	// trained where o_i is and at its rate, so that T̂ can learn a user's
	// propensity to noise (bots, careless users). It costs K·K values per
	// user row, and a model with it is encoded in version 5. What it gains
	// and costs on each stream is in docs/design/model.md ("The per-user
	// offset").
	TransitionUserOffset bool `json:"transition_user_offset,omitempty" yaml:"transition_user_offset"`
	// DwellDirection states how dwell reads in the weight (context.go):
	// "long" (DefaultConfig, so by default in the service, replay and the
	// lab), the longer dwell is the genuine one, read from a
	// two-component mixture on log dwell fitted to dwell alone; "learned"
	// (what a Config literal, "" here, and a model encoded before the
	// setting existed mean), the classes the classifier calls clean and
	// noisy tell which dwell is genuine, either direction. A model with
	// "long" is encoded in version 13 (online/FORMAT.md). docs/design/model.md ("Dwell
	// read as the premise says") has what each gains and costs.
	DwellDirection string `json:"dwell_direction,omitempty" yaml:"dwell_direction"`
	// EventOrder lists event types from the least engaged to the most:
	// DefaultConfig's (so by default in the service, replay and the lab)
	// is DefaultEventOrder, return < view < click < cart < purchase with
	// the names public click logs give the same kinds; a Config literal,
	// an empty list and a model encoded before the setting existed have
	// none. An entry may name several types that share its place,
	// separated by "|" ("cart|addtocart|fav"), and types match their names
	// with case ignored ("Click" is "click"). It states the event type's
	// direction, as DwellDirection "long" states dwell's: on a stream that
	// carries no dwell, an event's place in the order (its rank) serves as
	// the instrument that dwell is elsewhere, so that p_clean, the user's
	// activity, the pair's repeats, the item's training and the gap since
	// the user's previous event count as far, and in whichever direction,
	// the ranks say (context.go, rankInstrument). Types not in the list
	// have no rank (Model.UnrankedTypes lists those seen). Read only with
	// DwellDirection "long". docs/design/model.md ("The event type as the
	// instrument", "Event-type names") has what it gains and costs.
	EventOrder []string `json:"event_order,omitempty" yaml:"event_order"`
	// MaxUsers caps the users the model holds a row for (default 0: no
	// cap). When a new user is admitted with the table full, the least
	// recently seen user is evicted and its row reused (bounds.go).
	MaxUsers int `json:"max_users,omitempty" yaml:"max_users"`
	// MaxItems caps the items the model holds a row for (default 0: no
	// cap), as MaxUsers does for users.
	MaxItems int `json:"max_items,omitempty" yaml:"max_items"`
	// AdmitAfter is the number of sightings after which an id gets a row
	// of its own (default 1: at first sight; 0 means 1). Until then it is scored
	// with its side's shared cold row, and its sightings are counted in a
	// count-min sketch of AdmitSketchWidth columns.
	AdmitAfter int `json:"admit_after,omitempty" yaml:"admit_after"`
	// AdmitSketchWidth is the number of columns of each of the admission
	// sketch's 4 rows, a power of two (default 1048576: 4 MiB); its
	// counts are halved every AdmitSketchWidth sightings of unadmitted
	// ids. Read only when AdmitAfter > 1.
	AdmitSketchWidth int `json:"admit_sketch_width,omitempty" yaml:"admit_sketch_width"`
}

// maxEventOrder bounds the type names Config.EventOrder lists, synonyms
// counted one each.
const maxEventOrder = 64

// typeSynonyms separates the names of one entry of Config.EventOrder.
const typeSynonyms = "|"

// bounded reports whether c bounds the tables: a cap or an admission
// threshold. A bounded model is encoded in version 3 (FORMAT.md).
func (c *Config) bounded() bool { return c.MaxUsers > 0 || c.MaxItems > 0 || c.AdmitAfter > 1 }

// admits reports whether ids wait for admission, and so whether each
// table has a cold row.
func (c *Config) admits() bool { return c.AdmitAfter > 1 }

// DefaultConfig is the configuration that the service, replay and the lab
// start from before any setting is read: the zero Config with the switches
// that are on by default turned on (TransitionUserOffset,
// NoisyHeadTrainsEmbeddings) and dwell read
// as longer-is-genuine (DwellDirection). Its other fields stay zero, so
// WithDefaults fills them in as for any Config.
func DefaultConfig() Config {
	return Config{TransitionUserOffset: true, NoisyHeadTrainsEmbeddings: true, DwellDirection: DwellLong, EventOrder: DefaultEventOrder()}
}

// DefaultEventOrder is DefaultConfig's EventOrder (a new slice each
// call): the types of the generator's streams, a return the least engaged
// (it undoes a purchase) and a purchase the most, each with the names
// public click logs give the same kind (docs/design/model.md, "Event-type
// names"): Taobao's UserBehavior (pv, fav, cart, buy), RetailRocket's
// (view, addtocart, transaction), REES46's (view, cart, remove_from_cart,
// purchase) and Google Analytics 4's recommended e-commerce events
// (view_item, select_item, add_to_cart, add_to_wishlist, begin_checkout,
// purchase, refund) and the e-commerce spec that Segment, RudderStack and
// PostHog share (Product Viewed, Product Clicked, Product Added, Product
// Added to Wishlist, Checkout Started, Order Completed, Product Removed,
// Order Refunded, Order Cancelled; segment.com's "Spec: V2 Ecommerce
// Events"). A favourite or a wish-list entry shares the cart's place:
// both keep an item for later.
func DefaultEventOrder() []string {
	return []string{
		"return|refund|remove_from_cart|Product Removed|Order Refunded|Order Cancelled",
		"view|pv|pageview|page_view|view_item|detail|Product Viewed",
		"click|select_item|Product Clicked",
		"cart|addtocart|add_to_cart|fav|favorite|favourite|add_to_wishlist|wishlist|begin_checkout|Product Added|Product Added to Wishlist|Checkout Started",
		"purchase|buy|transaction|order|Order Completed",
	}
}

// Baseline is the plain model of c's settings: the loss baseline's model
// (Plain: T̂ = I, no distillation, no mixture), which has no transition
// and so no per-user offsets to hold, and no context, so no dwell
// mixture either.
func (c Config) Baseline() Config {
	c.Plain, c.TransitionUserOffset, c.NoisyHeadTrainsEmbeddings, c.DwellDirection, c.EventOrder = true, false, false, "", nil
	return c
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeBinary
	}
	if len(c.EventOrder) == 0 {
		c.EventOrder = nil // an empty order is none, as an encoded model's (omitempty)
	}
	if c.Classes == 0 && c.Mode == ModeRating {
		c.Classes = 5
	}
	if len(c.DwellBucketsMS) == 0 && c.Mode == ModeDwell {
		c.DwellBucketsMS = []int64{10000, 30000}
	}
	if c.Dim == 0 {
		c.Dim = 32
	}
	if c.Negatives == 0 && c.Mode == ModeBinary {
		c.Negatives = 4
	}
	if c.NegativeSampling == "" {
		c.NegativeSampling = NegUniform
	}
	def := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	defInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.LearningRate, 0.05)
	def(&c.Lambda, 1)
	if c.Mode == ModeBinary {
		def(&c.EmbeddingRate, 0.3)
	} else {
		def(&c.EmbeddingRate, 0.05)
	}
	def(&c.TransitionRate, 0.1)
	defInt(&c.WarmUp, 1000)
	if c.RhoSchedule == "" {
		c.RhoSchedule = RhoProgressive
	}
	def(&c.RhoStart, 0.9)
	def(&c.RhoMin, 0.5)
	def(&c.RhoStep, 0.05)
	def(&c.RhoTolerance, 0.02)
	defInt(&c.GMMWindow, 4096)
	defInt(&c.RefitEvery, 1000)
	defInt(&c.GMMIterations, 2)
	defInt(&c.GMMMinSamples, 256)
	if c.Cooccurrence == "" {
		c.Cooccurrence = CoocSketch
	}
	defInt(&c.SketchUsers, 16)
	defInt(&c.SketchHashes, 16)
	def(&c.L2, 1e-4)
	def(&c.Clip, 5)
	def(&c.InitScale, 0.1)
	// AdmitAfter stays 0 for 1, so that the configuration of a model
	// without bounds encodes as it did before bounds existed.
	if c.AdmitAfter > 1 {
		defInt(&c.AdmitSketchWidth, 1<<20)
	}
	return c
}

// K is the number of label classes the configuration implies.
func (c Config) K() int {
	switch c.Mode {
	case ModeRating:
		return c.Classes
	case ModeDwell:
		return len(c.DwellBucketsMS) + 1
	default:
		return 2
	}
}

// Validate reports every problem with c (after defaults), naming the field
// and the fix.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch c.Mode {
	case ModeBinary, ModeRating, ModeDwell:
	default:
		bad("mode", "%q is not a label mode; use binary, rating or dwell", c.Mode)
	}
	if c.Mode == ModeRating && (c.Classes < 2 || c.Classes > 32) {
		bad("classes", "%d rating levels; use 2..32", c.Classes)
	}
	if len(c.DwellBucketsMS) > 31 {
		bad("dwell_buckets_ms", "%d thresholds; use at most 31", len(c.DwellBucketsMS))
	}
	for i := 1; i < len(c.DwellBucketsMS); i++ {
		if c.DwellBucketsMS[i] <= c.DwellBucketsMS[i-1] {
			bad("dwell_buckets_ms", "thresholds must be strictly ascending")
			break
		}
	}
	if c.Dim < 1 || c.Dim > 1024 {
		bad("dim", "%d; use 1..1024", c.Dim)
	}
	if c.Negatives < 0 || c.Negatives > 1000 {
		bad("negatives", "%d; use 0..1000", c.Negatives)
	}
	if c.DwellDirection != "" && c.DwellDirection != DwellLearned && c.DwellDirection != DwellLong {
		bad("dwell_direction", "%q; use long or learned", c.DwellDirection)
	}
	c.validateEventOrder(bad)
	if c.NegativeSampling != NegUniform && c.NegativeSampling != NegPopularity {
		bad("negative_sampling", "%q; use uniform or popularity", c.NegativeSampling)
	}
	pos := func(field string, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			bad(field, "%v; must be a positive finite number", v)
		}
	}
	pos("learning_rate", c.LearningRate)
	pos("lambda", c.Lambda)
	pos("embedding_rate", c.EmbeddingRate)
	pos("transition_rate", c.TransitionRate)
	pos("rho_step", c.RhoStep)
	pos("rho_tolerance", c.RhoTolerance)
	pos("clip", c.Clip)
	pos("l2", c.L2)
	// Bounded steps keep every update finite: a gradient is at most Clip
	// long, so no single step moves a parameter by more than 10·1e6.
	upTo := func(field string, v, hi float64) {
		if v > hi {
			bad(field, "%v; use at most %v", v, hi)
		}
	}
	upTo("learning_rate", c.LearningRate, 10)
	upTo("embedding_rate", c.EmbeddingRate, 10)
	upTo("transition_rate", c.TransitionRate, 10)
	upTo("lambda", c.Lambda, 100)
	upTo("clip", c.Clip, 1e6)
	upTo("l2", c.L2, 1)
	upTo("init_scale", c.InitScale, 10)
	pos("init_scale", c.InitScale)
	if c.WarmUp < 0 {
		bad("warm_up", "%d; must be >= 0", c.WarmUp)
	}
	if c.RhoSchedule != RhoProgressive && c.RhoSchedule != RhoFixed {
		bad("rho_schedule", "%q; use progressive or fixed", c.RhoSchedule)
	}
	if !(c.RhoStart > 0 && c.RhoStart < 1) {
		bad("rho_start", "%v; use a value in (0,1)", c.RhoStart)
	}
	if c.RhoSchedule == RhoProgressive && !(c.RhoMin > 0 && c.RhoMin <= c.RhoStart) {
		bad("rho_min", "%v; use a value in (0, rho_start]", c.RhoMin)
	}
	if c.GMMWindow < 16 || c.GMMWindow > 1<<20 {
		bad("gmm_window", "%d; use 16..1048576", c.GMMWindow)
	}
	if c.RefitEvery < 1 {
		bad("refit_every", "%d; use at least 1", c.RefitEvery)
	}
	if c.GMMIterations < 1 || c.GMMIterations > 1000 {
		bad("gmm_iterations", "%d; use 1..1000", c.GMMIterations)
	}
	if c.GMMMinSamples < 8 || c.GMMMinSamples > c.GMMWindow {
		bad("gmm_min_samples", "%d; use 8..gmm_window", c.GMMMinSamples)
	}
	if c.Cooccurrence != CoocSketch && c.Cooccurrence != CoocExact {
		bad("cooccurrence", "%q; use sketch or exact", c.Cooccurrence)
	}
	if c.SketchUsers < 1 || c.SketchUsers > 4096 {
		bad("sketch_users", "%d; use 1..4096", c.SketchUsers)
	}
	if c.SketchHashes < 4 || c.SketchHashes > 1024 || c.SketchHashes%4 != 0 {
		bad("sketch_hashes", "%d; use a multiple of 4 in 4..1024", c.SketchHashes)
	}
	if c.MaxUsers < 0 || c.MaxUsers > maxRows {
		bad("max_users", "%d; use 0 (no cap) or 1..%d", c.MaxUsers, maxRows)
	}
	if c.MaxItems < 0 || c.MaxItems > maxRows {
		bad("max_items", "%d; use 0 (no cap) or 1..%d", c.MaxItems, maxRows)
	}
	if c.AdmitAfter < 0 || c.AdmitAfter > maxAdmitAfter {
		bad("admit_after", "%d; use 1 (admit at first sight) .. %d", c.AdmitAfter, maxAdmitAfter)
	}
	if w := c.AdmitSketchWidth; w != 0 && (w < minSketchWidth || w > maxSketchWidth || w&(w-1) != 0) {
		bad("admit_sketch_width", "%d; use a power of two in %d..%d", w, minSketchWidth, maxSketchWidth)
	}
	return errors.Join(errs...)
}

// validateEventOrder reports, through bad, an order that lists more than
// maxEventOrder names, an empty or overlong name, or one name twice (case
// ignored, as types are matched).
func (c *Config) validateEventOrder(bad func(field, format string, args ...any)) {
	seen := make(map[string]bool)
	for i, entry := range c.EventOrder {
		for _, t := range strings.Split(entry, typeSynonyms) {
			switch {
			case t == "" || len(t) > maxIDBytes:
				bad("event_order", "entry %d (%q) has a name that is empty or longer than %d bytes", i, entry, maxIDBytes)
				return
			case seen[strings.ToLower(t)]:
				bad("event_order", "%q is listed twice (case is ignored)", t)
				return
			case len(seen) == maxEventOrder:
				bad("event_order", "more than %d type names; use at most %d", maxEventOrder, maxEventOrder)
				return
			}
			seen[strings.ToLower(t)] = true
		}
	}
}
