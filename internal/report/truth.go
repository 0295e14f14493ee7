package report

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"denoiser/consumer"
)

// ErrTruthMode is returned by ParseTruth for a mode it does not know or
// one whose argument is missing or wrong.
var ErrTruthMode = errors.New("invalid truth mode")

// Truth modes.
const (
	TruthField  = "field"  // the event's "truth" field
	TruthDwell  = "dwell"  // dwell_ms < Threshold is noise
	TruthRating = "rating" // rating <= Threshold is noise
	// TruthNone evaluates nothing: no event has an answer, and a
	// Collector keeps no per-event or per-id state (a replay's memory is
	// then its models').
	TruthNone = "none"
)

// Truth says where the ground truth of an event comes from. It is used by
// reports only, never by the model.
type Truth struct {
	Mode string
	// Threshold is, in dwell mode, milliseconds (an integer); in rating
	// mode the highest noisy rating, compared as a number (2.5: 0.5..2.5
	// are noise, 3 is genuine).
	Threshold float64
}

// ParseTruth parses "field", "dwell:MS", "rating:R" or "none". An empty
// string is "field".
func ParseTruth(s string) (Truth, error) {
	mode, arg, hasArg := strings.Cut(s, ":")
	switch mode {
	case "", TruthField:
		if hasArg {
			return Truth{}, fmt.Errorf("parse truth %q: field takes no argument: %w", s, ErrTruthMode)
		}
		return Truth{Mode: TruthField}, nil
	case TruthDwell:
		v, err := strconv.ParseInt(arg, 10, 64)
		if !hasArg || err != nil || v < 0 {
			return Truth{}, fmt.Errorf("parse truth %q: want dwell:MS with MS a non-negative integer: %w", s, ErrTruthMode)
		}
		return Truth{Mode: mode, Threshold: float64(v)}, nil
	case TruthRating:
		v, err := strconv.ParseFloat(arg, 64)
		if !hasArg || err != nil || !isDecimal(arg) {
			return Truth{}, fmt.Errorf("parse truth %q: want rating:R with R a non-negative decimal number (2, 2.5): %w", s, ErrTruthMode)
		}
		return Truth{Mode: mode, Threshold: v}, nil
	case TruthNone:
		if hasArg {
			return Truth{}, fmt.Errorf("parse truth %q: none takes no argument: %w", s, ErrTruthMode)
		}
		return Truth{Mode: TruthNone}, nil
	default:
		return Truth{}, fmt.Errorf("parse truth %q: use field, dwell:MS, rating:R or none: %w", s, ErrTruthMode)
	}
}

// String is the inverse of ParseTruth.
func (t Truth) String() string {
	if t.Mode == TruthField || t.Mode == "" {
		return TruthField
	}
	if t.Mode == TruthNone {
		return TruthNone
	}
	return t.Mode + ":" + strconv.FormatFloat(t.Threshold, 'f', -1, 64)
}

// isDecimal reports whether s is digits with at most one decimal point
// inside them: no sign, exponent, hex, Inf or NaN.
func isDecimal(s string) bool {
	digits, point := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !point && digits > 0 && i < len(s)-1:
			point = true
		default:
			return false
		}
	}
	return digits > 0
}

// Genuine reports whether ev is genuine under t; ok is false when ev carries
// no answer (no truth field, no dwell, no rating).
func (t Truth) Genuine(ev *consumer.Event) (genuine, ok bool) {
	switch t.Mode {
	case TruthNone:
		return false, false
	case TruthDwell:
		if !ev.HasDwell {
			return false, false
		}
		return float64(ev.DwellMS) >= t.Threshold, true
	case TruthRating:
		if !ev.HasRating {
			return false, false
		}
		return ev.Rating > t.Threshold, true
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
