package report

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"denoiser/consumer"
)

// ErrTruthMode is returned by ParseTruth for a mode it does not know.
var ErrTruthMode = errors.New("unknown truth mode")

// Truth modes.
const (
	TruthField  = "field"  // the event's "truth" field
	TruthDwell  = "dwell"  // dwell_ms < Threshold is noise
	TruthRating = "rating" // rating <= Threshold is noise
)

// Truth says where the ground truth of an event comes from. It is used by
// reports only, never by the model.
type Truth struct {
	Mode      string
	Threshold int64 // dwell: milliseconds; rating: the highest noisy rating
}

// ParseTruth parses "field", "dwell:MS" or "rating:R". An empty string is
// "field".
func ParseTruth(s string) (Truth, error) {
	mode, arg, hasArg := strings.Cut(s, ":")
	switch mode {
	case "", TruthField:
		if hasArg {
			return Truth{}, fmt.Errorf("parse truth %q: field takes no argument: %w", s, ErrTruthMode)
		}
		return Truth{Mode: TruthField}, nil
	case TruthDwell, TruthRating:
		v, err := strconv.ParseInt(arg, 10, 64)
		if !hasArg || err != nil || v < 0 {
			return Truth{}, fmt.Errorf("parse truth %q: want %s:N with N a non-negative integer: %w", s, mode, ErrTruthMode)
		}
		return Truth{Mode: mode, Threshold: v}, nil
	default:
		return Truth{}, fmt.Errorf("parse truth %q: use field, dwell:MS or rating:R: %w", s, ErrTruthMode)
	}
}

// String is the inverse of ParseTruth.
func (t Truth) String() string {
	if t.Mode == TruthField || t.Mode == "" {
		return TruthField
	}
	return t.Mode + ":" + strconv.FormatInt(t.Threshold, 10)
}

// Genuine reports whether ev is genuine under t; ok is false when ev carries
// no answer (no truth field, no dwell, no rating).
func (t Truth) Genuine(ev *consumer.Event) (genuine, ok bool) {
	switch t.Mode {
	case TruthDwell:
		if !ev.HasDwell {
			return false, false
		}
		return ev.DwellMS >= t.Threshold, true
	case TruthRating:
		if !ev.HasRating {
			return false, false
		}
		return int64(ev.Rating) > t.Threshold, true
	default:
		switch ev.Truth {
		case consumer.TruthGenuine:
			return true, true
		case consumer.TruthNoise:
			return false, true
		}
		return false, false
	}
}
