package synth

import "strconv"

// Cause says why an event happened: a genuine click or one of the noise
// mechanisms. Only the genuine/noise split is written out (as "truth"); the
// cause is for tests and statistics.
type Cause uint8

// Causes.
const (
	Genuine   Cause = iota // follows the user's taste
	Misclick               // a uniformly random item
	Clickbait              // an item of the clickbait set, regardless of taste
	Curiosity              // a popular item from a topic the user does not care about
	numCauses
)

var causeNames = [numCauses]string{"genuine", "misclick", "clickbait", "curiosity"}

func (c Cause) String() string {
	if c < numCauses {
		return causeNames[c]
	}
	return "cause(" + strconv.Itoa(int(c)) + ")"
}

// Noise reports whether the cause is a noise mechanism.
func (c Cause) Noise() bool { return c != Genuine }

// Event is one generated click.
type Event struct {
	// User and Item are 0-based indices; they are written as "u<User+1>"
	// and "i<Item+1>".
	User, Item int
	// TS is the unix time in milliseconds; it strictly increases along the
	// stream.
	TS int64
	// DwellMS is the dwell time in milliseconds.
	DwellMS int64
	// Cause is the mechanism that produced the event.
	Cause Cause
}

// AppendJSON appends the event as one JSON object and a newline, in the
// field order of the event format:
//
//	{"user":"u1","item":"i9","ts":1700000000000,"event":"click","dwell_ms":8300,"truth":"noise"}
//
// There is no "rating": synthetic clicks carry none.
func (e Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"user":"u`...)
	dst = strconv.AppendInt(dst, int64(e.User)+1, 10)
	dst = append(dst, `","item":"i`...)
	dst = strconv.AppendInt(dst, int64(e.Item)+1, 10)
	dst = append(dst, `","ts":`...)
	dst = strconv.AppendInt(dst, e.TS, 10)
	dst = append(dst, `,"event":"click","dwell_ms":`...)
	dst = strconv.AppendInt(dst, e.DwellMS, 10)
	if e.Cause.Noise() {
		dst = append(dst, `,"truth":"noise"}`...)
	} else {
		dst = append(dst, `,"truth":"genuine"}`...)
	}
	return append(dst, '\n')
}
