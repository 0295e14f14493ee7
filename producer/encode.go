package producer

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"denoiser/consumer"
	"denoiser/consumer/input"
)

// AppendScored appends the JSON encoding of a scored record to dst (without a
// trailing newline) and returns the extended buffer.
func AppendScored(dst []byte, r *consumer.Result) []byte {
	ev := &r.Event
	dst = append(dst, `{"user":`...)
	dst = appendString(dst, ev.User)
	dst = append(dst, `,"item":`...)
	dst = appendString(dst, ev.Item)
	if ev.HasTS {
		dst = append(dst, `,"ts":`...)
		dst = strconv.AppendInt(dst, ev.TS, 10)
	}
	if ev.Kind != "" {
		dst = append(dst, `,"event":`...)
		dst = appendString(dst, ev.Kind)
	}
	if ev.HasDwell {
		dst = append(dst, `,"dwell_ms":`...)
		dst = strconv.AppendInt(dst, ev.DwellMS, 10)
	}
	if ev.HasRating {
		dst = append(dst, `,"rating":`...)
		dst = strconv.AppendFloat(dst, ev.Rating, 'f', -1, 64) // as few digits as read back: 3.5, 4, 0.0000001
	}
	if ev.Truth != "" {
		dst = append(dst, `,"truth":`...)
		dst = appendString(dst, ev.Truth)
	}
	if len(ev.Extra) > 0 { // the input's other fields, as they came
		dst = append(dst, ',')
		dst = append(dst, ev.Extra...)
	}
	sc := &r.Score
	dst = append(dst, `,"weight":`...)
	dst = appendProbability(dst, sc.Weight)
	dst = append(dst, `,"reliability":`...)
	dst = appendProbability(dst, sc.Reliability)
	dst = append(dst, `,"p_clean":`...)
	dst = appendProbability(dst, sc.PClean)
	dst = append(dst, `,"clean_posterior":[`...)
	for i, p := range sc.Posterior {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendProbability(dst, p)
	}
	dst = append(dst, `],"label":`...)
	dst = strconv.AppendInt(dst, int64(sc.Label), 10)
	dst = append(dst, `,"distilled":`...)
	if sc.Distilled < 0 {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, int64(sc.Distilled), 10)
	}
	dst = append(dst, `,"model_version":`...)
	dst = strconv.AppendUint(dst, sc.Version, 10)
	dst = append(dst, `,"source":`...)
	dst = AppendPosition(dst, r.Pos)
	return append(dst, '}')
}

// AppendRejected appends the JSON encoding of a dead-lettered record to dst
// (without a trailing newline).
func AppendRejected(dst []byte, r *consumer.Result) []byte {
	dst = append(dst, `{"reason":`...)
	dst = appendString(dst, string(r.Reason))
	dst = append(dst, `,"error":`...)
	msg := ""
	if r.Err != nil {
		msg = r.Err.Error()
	}
	dst = appendString(dst, msg)
	dst = append(dst, `,"source":`...)
	dst = AppendPosition(dst, r.Pos)
	if utf8.Valid(r.Raw) {
		dst = append(dst, `,"raw":`...)
		// A view of Raw, not a copy: appendString only reads it, and a
		// dead letter then costs no allocation (TestEncodeAllocs).
		dst = appendString(dst, unsafe.String(unsafe.SliceData(r.Raw), len(r.Raw)))
	} else {
		dst = append(dst, `,"raw_base64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, r.Raw)
		dst = append(dst, '"')
	}
	if r.RawTruncated() {
		dst = append(dst, `,"raw_truncated":true,"raw_bytes":`...)
		dst = strconv.AppendInt(dst, int64(r.RawSize), 10)
	}
	return append(dst, '}')
}

// AppendPosition appends a source position: {"file":...,"line":...} for a
// file, {"topic":...,"partition":...,"offset":...} for Kafka.
func AppendPosition(dst []byte, p input.Position) []byte {
	if p.IsFile() {
		dst = append(dst, `{"file":`...)
		dst = appendString(dst, p.File)
		dst = append(dst, `,"line":`...)
		dst = strconv.AppendInt(dst, p.Line, 10)
		return append(dst, '}')
	}
	dst = append(dst, `{"topic":`...)
	dst = appendString(dst, p.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(p.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, p.Offset, 10)
	return append(dst, '}')
}

// appendFloat writes the shortest representation that reads back exactly;
// NaN and ±Inf, which JSON cannot carry, become null.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return append(dst, "null"...)
	case f == 1: // a reliability before the mixture's first fit, and often after: as strconv writes it, at a fraction of the cost
		return append(dst, '1')
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

// probabilityDecimals is the number of decimals a probability is written
// with (appendProbability), and probabilityScale 10 to its power.
const (
	probabilityDecimals = 9
	probabilityScale    = 1e9
)

// appendProbability writes a probability, a score of the output, at the
// nearest multiple of 10⁻⁹, in as few decimals as that takes: 0.25,
// 0.982476342, 1. Nine decimals are far finer than anything a weight in
// training or a threshold can tell apart, and writing them from an
// integer costs a fifth of the shortest round-trip form (strconv's
// 'g', −1), which wrote every score's 16–17 digits until stop 61: 4 of
// the 5 floats of a record, 8 % of a replay's CPU
// (BenchmarkAppendProbability). A value outside [0, 1] (none leaves the
// model) is written as appendFloat writes it.
func appendProbability(dst []byte, p float64) []byte {
	if !(p >= 0 && p <= 1) {
		return appendFloat(dst, p)
	}
	v := uint64(p*probabilityScale + 0.5)
	switch {
	case v == 0:
		return append(dst, '0')
	case v >= probabilityScale:
		return append(dst, '1')
	}
	var b [2 + probabilityDecimals]byte
	b[0], b[1] = '0', '.'
	for k := len(b) - 1; k >= 2; k-- {
		b[k] = byte('0' + v%10)
		v /= 10
	}
	n := len(b)
	for b[n-1] == '0' {
		n--
	}
	return append(dst, b[:n]...)
}

const hex = "0123456789abcdef"

// appendString writes s as a JSON string. Invalid UTF-8 becomes U+FFFD;
// control characters, U+2028 and U+2029 are escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
