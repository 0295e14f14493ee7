package consumer

import (
	"denoiser/online"
)

// Ground-truth values of the optional "truth" field.
const (
	TruthGenuine = "genuine"
	TruthNoise   = "noise"
)

// Event is one decoded and validated input record. Optional fields carry a
// Has flag (or are empty) when absent, so that the output echoes only the
// fields that were present.
type Event struct {
	User string // required, 1..MaxIDBytes bytes
	Item string // required, 1..MaxIDBytes bytes

	TS    int64 // unix milliseconds, normalised from an integer or RFC 3339
	HasTS bool

	Kind string // the "event" field ("click", "view", ...); "" when absent

	DwellMS  int64 // 0..MaxDwellMS
	HasDwell bool

	Rating    int // 0..MaxRating
	HasRating bool

	// Truth is "genuine", "noise" or "" (absent). It is for evaluation only
	// and is never given to the model.
	Truth string
}

// Model returns the event as the model sees it: ids, rating and dwell. The
// timestamp, kind and ground truth are deliberately left out.
func (e *Event) Model() online.Event {
	ev := online.Event{User: e.User, Item: e.Item, DwellMS: e.DwellMS, HasDwell: e.HasDwell}
	if e.HasRating {
		ev.Rating = e.Rating
	}
	return ev
}
