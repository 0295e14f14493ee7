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
	Trending               // ProfileV2: an item of the rotating trending slot, regardless of taste
	Bot                    // ProfileV2: a bot's noise event (a random or trending item)
	Bounce                 // ProfileV2: an event of a bounce chain (rapid clicks, short dwell)
	Purchase               // ProfileV2: a purchase that will be returned
	Return                 // ProfileV2: the return of such a purchase
	numCauses
)

var causeNames = [numCauses]string{"genuine", "misclick", "clickbait", "curiosity", "trending", "bot", "bounce", "purchase", "return"}

func (c Cause) String() string {
	if c < numCauses {
		return causeNames[c]
	}
	return "cause(" + strconv.Itoa(int(c)) + ")"
}

// Noise reports whether the cause is a noise mechanism.
func (c Cause) Noise() bool { return c != Genuine }

// Type is an event's kind, written as "event". ProfileV1 writes clicks
// only.
type Type uint8

// Event types. The zero value is Click, so that a v1 event is a click.
const (
	Click Type = iota
	View
	Cart
	PurchaseType
	ReturnType
	numTypes
)

var typeNames = [numTypes]string{"click", "view", "cart", "purchase", "return"}

func (t Type) String() string {
	if t < numTypes {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Event is one generated event.
type Event struct {
	// User and Item are 0-based indices; they are written as "u<User+1>"
	// and "i<Item+1>".
	User, Item int
	// TS is the unix time in milliseconds; it strictly increases along the
	// stream.
	TS int64
	// DwellMS is the dwell time in milliseconds. It drives the timing of
	// the session whether or not it is written.
	DwellMS int64
	// NoDwell hides the dwell time: dwell_ms is not written
	// (Config.DwellShare).
	NoDwell bool
	// Type is the event's kind (default Click).
	Type Type
	// Cause is the mechanism that produced the event.
	Cause Cause
}

// AppendJSON appends the event as one JSON object and a newline, in the
// field order of the event format:
//
//	{"user":"u1","item":"i9","ts":1700000000000,"event":"click","dwell_ms":8300,"truth":"noise"}
//
// There is no "rating": synthetic events carry none. dwell_ms is left out
// when NoDwell is set.
func (e Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"user":"u`...)
	dst = strconv.AppendInt(dst, int64(e.User)+1, 10)
	dst = append(dst, `","item":"i`...)
	dst = strconv.AppendInt(dst, int64(e.Item)+1, 10)
	dst = append(dst, `","ts":`...)
	dst = strconv.AppendInt(dst, e.TS, 10)
	dst = append(dst, `,"event":"`...)
	dst = append(dst, e.Type.String()...)
	dst = append(dst, '"')
	if !e.NoDwell {
		dst = append(dst, `,"dwell_ms":`...)
		dst = strconv.AppendInt(dst, e.DwellMS, 10)
	}
	if e.Cause.Noise() {
		dst = append(dst, `,"truth":"noise"}`...)
	} else {
		dst = append(dst, `,"truth":"genuine"}`...)
	}
	return append(dst, '\n')
}
