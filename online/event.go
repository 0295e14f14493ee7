package online

import (
	"errors"
	"fmt"
	"math"
)

// Event is one observed interaction as the model sees it. Fields that are
// for evaluation only (ground truth, the source position) are not here:
// the model must never read them.
type Event struct {
	User string
	Item string
	// Rating is the explicit rating, any number; 0 means absent. Read only
	// in rating mode, where its class is RatingClass(Rating, Classes).
	Rating float64
	// DwellMS is the dwell time in milliseconds; read only when HasDwell is
	// set, and only in dwell mode.
	DwellMS  int64
	HasDwell bool
	// Kind is the event type ("click", "view", "purchase", ...); "" when
	// absent. Only the context part reads it.
	Kind string
	// TimeMS is the event's time in unix milliseconds, read only when
	// HasTime is set. The model reads nothing of it but the gap since the
	// same user's previous event with a time (instrumentFeatures).
	TimeMS  int64
	HasTime bool
	// Weight scales what the model learns from the observed interaction
	// (not from its sampled negatives); 0 means 1. A downstream trainer
	// uses it to weight events by a reliability score. Negative or
	// non-finite weights are invalid.
	Weight float64
}

// Score is what Step reports for one event. It is computed with the model as
// it was before the event (test-then-train), so it is an honest
// out-of-sample score.
type Score struct {
	// Reliability is the posterior of the reliable GMM component, in [0,1].
	// It is 1 until the mixture has been fitted for the first time.
	Reliability float64
	// PClean is the posterior that the observed label is the clean one:
	// f_y T_yy / sum_k f_k T_ky.
	PClean float64
	// Weight is the score to train on: the posterior that the event is
	// genuine given everything the model reads, p_clean combined with the
	// evidence of the event's dwell and type, or, with neither, of the gap
	// since the user's previous event (context.go), calibrated once
	// the mixture is fitted: its log-odds drawn towards the mixture's
	// share of reliable events (calibration.go), then moved from the
	// stream's genuine share to the user's, as the user's earlier
	// weights tell it (userprior.go). In a Plain model it equals PClean.
	Weight float64
	// Posterior is f(x), the clean-class posterior (K values). Step reuses
	// its backing array when its capacity is at least K.
	Posterior []float64
	// Label is the observed class ỹ (binary mode: always 1).
	Label int
	// Distilled is the distilled clean label y*, or -1 when none.
	Distilled int
	// Loss is -log f_ỹ(x), the plain cross-entropy of the observed label.
	// For a Plain model it is the signal loss-based denoisers (T-CE) use.
	Loss float64
	// Version is the number of events the model had learned from before
	// this one.
	Version uint64
	// Source says what formed Weight (WeightSource): which instrument, if
	// any, weighed p_clean. Reports count it (replay's weight_sources).
	Source WeightSource
}

// WeightSource says what formed an event's weight (Score.Source).
type WeightSource uint8

// The weight sources (docs/design/model.md, "The weight to train on").
const (
	// SourceUnknown is the zero value: a Score that Step did not write
	// (one read back from the scored output, which does not carry it).
	SourceUnknown WeightSource = iota
	// SourcePClean: p_clean, calibrated (nothing else to read yet, or a
	// plain model).
	SourcePClean
	// SourceContext: p_clean with the learned evidence of dwell and event
	// type, anchored by p_clean (no instrument fitted).
	SourceContext
	// SourceDwell: dwell's instrument weighed p_clean and the counts.
	SourceDwell
	// SourceEventType: the event type's rank weighed them.
	SourceEventType
	// SourceGap: the gap since the user's previous event weighed p_clean,
	// and its posterior holds at least half of the weight's log-odds
	// (below, the weight keeps the source it is blended with).
	SourceGap
	// NumWeightSources is the number of weight sources, SourceUnknown
	// included.
	NumWeightSources
)

// WeightSources lists every WeightSource that Step gives, in order
// (SourceUnknown excluded).
func WeightSources() []WeightSource {
	s := make([]WeightSource, 0, NumWeightSources-1)
	for i := SourcePClean; i < NumWeightSources; i++ {
		s = append(s, i)
	}
	return s
}

// String is the source's name in reports: p_clean, context,
// dwell_instrument, type_instrument, gap_instrument (unknown for
// SourceUnknown).
func (s WeightSource) String() string {
	switch s {
	case SourcePClean:
		return "p_clean"
	case SourceContext:
		return "context"
	case SourceDwell:
		return "dwell_instrument"
	case SourceEventType:
		return "type_instrument"
	case SourceGap:
		return "gap_instrument"
	}
	return "unknown"
}

// RatingClass is the rule of rating mode: the class (1..classes) of a
// rating is the rating rounded half up, so that integer ratings are their
// own class and half stars join the class above (0.5 and 1 are class 1,
// 1.5 and 2 class 2, ..., 4.5 and 5 class 5: a MovieLens 0.5..5 scale puts
// two half-star levels in each of 5 classes). ok is false, and the rating
// fits no class, when the rounded rating is outside 1..classes (a rating
// below 0.5 or from classes+0.5 on) or the rating is not finite.
func RatingClass(rating float64, classes int) (class int, ok bool) {
	r := math.Round(rating) // half away from zero: half up for the ratings that can fit
	if !(r >= 1 && r <= float64(classes)) {
		return 0, false
	}
	return int(r), true
}

// ErrInvalidEvent is returned by Step for an event that does not fit the
// configured label mode (no rating in rating mode, a rating out of range, no
// dwell in dwell mode, an empty id). The model is left unchanged.
var ErrInvalidEvent = errors.New("invalid event")

// ErrNumerical is returned by Step when a non-finite value appeared while
// learning from an event. The update is discarded (the model stays as it was
// before the event), the score is still valid, and the failure is counted in
// Summary.NumericalErrors.
var ErrNumerical = errors.New("numerical failure")

// ErrFrozen is returned by Step on a frozen copy (Model.FrozenCopy).
var ErrFrozen = errors.New("model is a snapshot copy")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidEvent, fmt.Sprintf(format, args...))
}
