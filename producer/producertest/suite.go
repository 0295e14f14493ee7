package producertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/producer"
)

// Output is one record of an output, read back.
type Output struct {
	Value []byte
	// Key is the record key (Kafka); nil when the record has none.
	Key []byte
	// Headers are the record headers (Kafka); nil for a file.
	Headers map[string]string
	// Stream names the ordered stream the record was read from: records
	// of one stream come back in the order they were written (a Kafka
	// partition; "" for a file, which is one stream).
	Stream string
}

// Harness is what the suites need besides the writer itself.
type Harness struct {
	// Close closes the writer; ctx bounds it where the writer takes one.
	Close func(ctx context.Context) error
	// Delivered is the number of records the writer reports as written
	// (a file's Records) or acknowledged (the sum of KafkaConfig.OnDelivered).
	Delivered func() uint64
	// ReadBack returns the output, once at least n records are readable,
	// per stream in the order read. It is called after Close.
	ReadBack func(t *testing.T, n int) []Output
	// ErrClosed is the error a write after Close wraps.
	ErrClosed error
	// Streams is the number of output streams (Kafka partitions): when
	// over 1, records of different users must not all use one.
	Streams int
	// Kafka says the output carries keys and headers, which are then held
	// to the contract of package producer: scored records keyed by user,
	// dead letters without key, headers giving the source position (and
	// the model version, or the reason and error).
	Kafka bool
}

// SinkFactory returns a new, empty scored-record sink and its harness.
type SinkFactory func(t *testing.T) (consumer.Sink, Harness)

// DeadLetterFactory returns a new, empty dead-letter writer and its harness.
type DeadLetterFactory func(t *testing.T) (consumer.DeadLetter, Harness)

// Scored returns the i-th scored result of the suites: Kafka positions over
// three partitions and file positions in turn, 13 users, every optional
// input field present or absent in turn, posteriors of 2 or 3 classes,
// distilled or not, now and then a non-finite score.
func Scored(i int) *consumer.Result {
	r := &consumer.Result{
		Event: consumer.Event{User: fmt.Sprintf("u%d", i%13), Item: fmt.Sprintf("i%d", i*7%101)},
		Score: online.Score{
			Reliability: float64(i%10) / 10, PClean: 1 / float64(i+3),
			Posterior: []float64{0.25, 0.75}, Label: 1, Distilled: -1, Version: uint64(i),
		},
	}
	if i%40 < 30 {
		r.Pos = input.Position{Topic: "clicks", Partition: int32(i % 3), Offset: int64(1000 + i)}
	} else {
		r.Pos = input.Position{File: "clicks.jsonl", Line: int64(i + 1), Offset: int64(100 * i)}
	}
	ev := &r.Event
	if i%2 == 0 {
		ev.TS, ev.HasTS = 1700000000000+int64(i), true
	}
	if i%3 == 0 {
		ev.Kind = "click"
	}
	if i%5 != 0 {
		ev.DwellMS, ev.HasDwell = int64(i*37), true
	}
	if i%7 == 0 {
		ev.Rating, ev.HasRating = float64(i%6)/2, true // half stars too
		r.Score.Posterior = []float64{0.1, 0.2, 0.7}
		r.Score.Label = 2
	}
	switch i % 4 {
	case 1:
		ev.Truth = consumer.TruthGenuine
	case 2:
		ev.Truth = consumer.TruthNoise
		r.Score.Distilled = 0
	}
	if i%50 == 49 {
		r.Score.PClean = math.NaN()
	}
	return r
}

// Rejected returns the i-th rejected result of the suites: every reason in
// turn, raw records that are UTF-8 text, binary, empty or truncated, Kafka
// and file positions.
func Rejected(i int) *consumer.Result {
	reasons := []consumer.Reason{
		consumer.ReasonNotJSON, consumer.ReasonMissingField, consumer.ReasonBadType,
		consumer.ReasonOutOfRange, consumer.ReasonTooLarge, consumer.ReasonModelRejected,
	}
	reason := reasons[i%len(reasons)]
	r := &consumer.Result{
		Reason: reason,
		Err:    &consumer.RecordError{Reason: reason, Field: "dwell_ms", Msg: fmt.Sprintf("case %d: \"quoted\"\n", i)},
	}
	if i%2 == 0 {
		r.Pos = input.Position{Topic: "clicks", Partition: int32(i % 3), Offset: int64(i)}
	} else {
		r.Pos = input.Position{File: "clicks.jsonl", Line: int64(i + 1)}
	}
	switch i % 5 {
	case 0:
		r.Raw = fmt.Appendf(nil, `{"user":"u%d","item":"i","dwell_ms":-5}`, i)
	case 1:
		r.Raw = []byte{'g', 0xff, byte(i), 0xfe}
	case 2:
		r.Raw = []byte{} // an empty raw record is still written, as ""
	case 3:
		r.Raw = bytes.Repeat([]byte("é"), 100) // cut from a longer record
		r.RawSize = 1 << 20
	case 4:
		r.Raw = fmt.Appendf(nil, "line %d\twith\u2028separators", i)
	}
	if r.RawSize == 0 {
		r.RawSize = len(r.Raw)
	}
	if i%11 == 10 {
		r.Err = nil // written with "error":""
	}
	return r
}

const timeout = 60 * time.Second

// RunSinkSuite runs the shared suite of consumer.Sink implementations
// against newSink.
func RunSinkSuite(t *testing.T, newSink SinkFactory) {
	runSuite(t, kindScored, func(t *testing.T) (writer, Harness) {
		s, h := newSink(t)
		return writer{write: s.Write, flush: s.Flush}, h
	})
}

// RunDeadLetterSuite runs the shared suite of consumer.DeadLetter
// implementations against newDeadLetter.
func RunDeadLetterSuite(t *testing.T, newDeadLetter DeadLetterFactory) {
	runSuite(t, kindRejected, func(t *testing.T) (writer, Harness) {
		d, h := newDeadLetter(t)
		return writer{write: d.Reject, flush: d.Flush}, h
	})
}

// writer is a Sink or a DeadLetter: Write or Reject, and Flush.
type writer struct {
	write func(context.Context, *consumer.Result) error
	flush func(context.Context) error
}

// kind is what a suite writes: scored records or dead letters.
type kind struct {
	name   string
	result func(i int) *consumer.Result
	encode func(dst []byte, r *consumer.Result) []byte
	check  func(t *testing.T, o Output, r *consumer.Result, h Harness)
}

var (
	kindScored   = kind{name: "scored", result: Scored, encode: producer.AppendScored, check: checkScored}
	kindRejected = kind{name: "dead letter", result: Rejected, encode: producer.AppendRejected, check: checkRejected}
)

// opener opens a writer under test and the harness that reads it back.
type opener func(t *testing.T) (writer, Harness)

// suiteCases are the suite's subtests, each a function of the kind of
// record and the opener.
var suiteCases = []struct {
	name string
	run  func(t *testing.T, k kind, open opener)
}{
	{"every record in order with its position", suiteEveryRecordInOrderWithItsPosition},
	{"write does not retain the record", suiteWriteDoesNotRetainTheRecord},
	{"same record, same bytes", suiteSameRecordSameBytes},
	{"flush with nothing pending", suiteFlushWithNothingPending},
	{"close flushes", suiteCloseFlushes},
	{"close is idempotent and final", suiteCloseIsIdempotentAndFinal},
	{"cancelled context", suiteCancelledContext},
}

func runSuite(t *testing.T, k kind, open opener) {
	for _, c := range suiteCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, k, open) })
	}
}

func suiteEveryRecordInOrderWithItsPosition(t *testing.T, k kind, open opener) {
	w, h := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	const n = 600
	var want []*consumer.Result
	for i := range n {
		r := k.result(i)
		if err := w.write(ctx, r); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		want = append(want, r)
		if got := h.Delivered(); got > uint64(i+1) {
			t.Fatalf("after %d writes, %d delivered", i+1, got)
		}
	}
	if err := w.flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := h.Delivered(); got != n {
		t.Fatalf("after Flush, %d of %d records delivered", got, n)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	out := h.ReadBack(t, n)
	checkOutput(t, k, h, out, want)
	streams := map[string]bool{}
	for _, o := range out {
		streams[o.Stream] = true
	}
	if k.result(0).Scored() && h.Streams > 1 && len(streams) < 2 {
		t.Errorf("every record in stream %q of %d: keys do not spread", out[0].Stream, h.Streams)
	}
}

func suiteWriteDoesNotRetainTheRecord(t *testing.T, k kind, open opener) {
	w, h := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var r consumer.Result // one Result reused, as the processing loop does
	var want []*consumer.Result
	for i := range 50 {
		src := k.result(i)
		post := append(r.Score.Posterior[:0], src.Score.Posterior...)
		raw := append(r.Raw[:0], src.Raw...)
		r = *src
		r.Score.Posterior, r.Raw = post, raw
		if err := w.write(ctx, &r); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		want = append(want, k.result(i))
	}
	if err := errors.Join(w.flush(ctx), h.Close(ctx)); err != nil {
		t.Fatal(err)
	}
	checkOutput(t, k, h, h.ReadBack(t, len(want)), want)
}

func suiteSameRecordSameBytes(t *testing.T, k kind, open opener) {
	w, h := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := k.result(4)
	for range 3 {
		if err := w.write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := h.ReadBack(t, 3)
	checkOutput(t, k, h, out, []*consumer.Result{r, r, r})
	for _, o := range out[1:] {
		if !bytes.Equal(o.Value, out[0].Value) || !bytes.Equal(o.Key, out[0].Key) || fmt.Sprint(o.Headers) != fmt.Sprint(out[0].Headers) {
			t.Fatalf("re-emitted record differs:\n%+v\n%+v", o, out[0])
		}
	}
}

func suiteFlushWithNothingPending(t *testing.T, k kind, open opener) {
	w, h := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := errors.Join(w.flush(ctx), w.flush(ctx)); err != nil {
		t.Fatalf("Flush of an empty writer: %v", err)
	}
	if err := w.write(ctx, k.result(0)); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(w.flush(ctx), w.flush(ctx)); err != nil {
		t.Fatalf("Flush, Flush: %v", err)
	}
	if got := h.Delivered(); got != 1 {
		t.Fatalf("%d delivered after a second Flush, want 1", got)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkOutput(t, k, h, h.ReadBack(t, 1), []*consumer.Result{k.result(0)})
}

func suiteCloseFlushes(t *testing.T, k kind, open opener) {
	w, h := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var want []*consumer.Result
	for i := range 25 {
		want = append(want, k.result(i))
		if err := w.write(ctx, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Close(ctx); err != nil { // no Flush
		t.Fatalf("Close: %v", err)
	}
	if got := h.Delivered(); got != uint64(len(want)) {
		t.Fatalf("after Close, %d of %d records delivered", got, len(want))
	}
	checkOutput(t, k, h, h.ReadBack(t, len(want)), want)
}

func suiteCloseIsIdempotentAndFinal(t *testing.T, k kind, open opener) {
	w, h := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := w.write(ctx, k.result(0)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := h.Close(ctx); err != nil {
			t.Fatalf("Close %d: %v", i+1, err)
		}
	}
	if err := w.write(ctx, k.result(1)); !errors.Is(err, h.ErrClosed) {
		t.Fatalf("write after Close = %v, want %v", err, h.ErrClosed)
	}
	// Flush after Close has nothing left to do: it may say so with
	// ErrClosed, or succeed, but it must return.
	if err := w.flush(ctx); err != nil && !errors.Is(err, h.ErrClosed) {
		t.Fatalf("Flush after Close = %v, want nil or %v", err, h.ErrClosed)
	}
	checkOutput(t, k, h, h.ReadBack(t, 1), []*consumer.Result{k.result(0)})
}

func suiteCancelledContext(t *testing.T, k kind, open opener) {
	// A write or flush with a cancelled context returns at once,
	// having either taken the record (it is then delivered like any
	// other) or refused it with the context's error (it is then not
	// written at all): never a lost or half-written record.
	w, h := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	var want []*consumer.Result
	for i := range 20 {
		r := k.result(i)
		var err error
		if i%2 == 1 {
			err = w.write(cancelled, r)
		} else {
			err = w.write(ctx, r)
		}
		switch {
		case err == nil:
			want = append(want, r)
		case errors.Is(err, context.Canceled):
		default:
			t.Fatalf("write %d with a cancelled context = %v, want nil or context.Canceled", i, err)
		}
		if i == 10 {
			if err := w.flush(cancelled); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("Flush with a cancelled context = %v, want nil or context.Canceled", err)
			}
		}
	}
	if err := w.flush(ctx); err != nil {
		t.Fatalf("Flush after a cancelled one: %v", err)
	}
	if got := h.Delivered(); got != uint64(len(want)) {
		t.Fatalf("%d delivered, %d writes accepted", got, len(want))
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkOutput(t, k, h, h.ReadBack(t, len(want)), want)
}

// checkOutput checks that out holds exactly want: every record once, with
// the encoding of package producer and its source position, each stream in
// write order, a user's records in one stream.
func checkOutput(t *testing.T, k kind, h Harness, out []Output, want []*consumer.Result) {
	t.Helper()
	if len(out) != len(want) {
		t.Fatalf("read back %d %s records, want %d", len(out), k.name, len(want))
	}
	// Records are matched to writes by value; equal values (re-emits)
	// match the writes in order.
	index := map[string][]int{}
	for i, r := range want {
		v := string(k.encode(nil, r))
		index[v] = append(index[v], i)
	}
	last := map[string]int{} // stream -> write index of its last record
	streamOf := map[string]string{}
	for j, o := range out {
		idx := index[string(o.Value)]
		if len(idx) == 0 {
			t.Fatalf("record %d of stream %q was not written, or not as the encoding of package producer: %s", j, o.Stream, o.Value)
		}
		i := idx[0]
		index[string(o.Value)] = idx[1:]
		r := want[i]
		if !json.Valid(o.Value) {
			t.Fatalf("record %d: not valid JSON: %s", i, o.Value)
		}
		pos, err := SourceOf(o.Value)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !samePosition(pos, r.Pos) {
			t.Fatalf("record %d: source %s, want %s", i, pos, r.Pos)
		}
		if prev, ok := last[o.Stream]; ok && i <= prev {
			t.Fatalf("stream %q: write %d read after write %d", o.Stream, i, prev)
		}
		last[o.Stream] = i
		if r.Scored() {
			if s, ok := streamOf[r.Event.User]; ok && s != o.Stream {
				t.Fatalf("user %s in streams %q and %q", r.Event.User, s, o.Stream)
			}
			streamOf[r.Event.User] = o.Stream
		}
		k.check(t, o, r, h)
	}
}

func checkScored(t *testing.T, o Output, r *consumer.Result, h Harness) {
	t.Helper()
	var back consumer.Event
	if err := consumer.Decode(o.Value, &back); err != nil {
		t.Fatalf("scored record %s does not decode as an input event: %v", r.Pos, err)
	}
	if !back.Equal(&r.Event) {
		t.Fatalf("scored record %s decodes to %+v, want the input event %+v", r.Pos, back, r.Event)
	}
	if !h.Kafka {
		return
	}
	if string(o.Key) != r.Event.User {
		t.Fatalf("record %s: key %q, want the user %q", r.Pos, o.Key, r.Event.User)
	}
	want := positionHeaders(r.Pos)
	want[producer.HeaderModelVersion] = strconv.FormatUint(r.Score.Version, 10)
	checkHeaders(t, r.Pos, o.Headers, want)
}

func checkRejected(t *testing.T, o Output, r *consumer.Result, h Harness) {
	t.Helper()
	var fields map[string]json.RawMessage
	var back struct {
		Reason    string `json:"reason"`
		Error     string `json:"error"`
		Raw       string `json:"raw"`
		Base64    []byte `json:"raw_base64"`
		Truncated bool   `json:"raw_truncated"`
		Bytes     int    `json:"raw_bytes"`
	}
	if err := errors.Join(json.Unmarshal(o.Value, &fields), json.Unmarshal(o.Value, &back)); err != nil {
		t.Fatalf("dead letter %s: %v", r.Pos, err)
	}
	_, hasRaw := fields["raw"]
	_, hasBase64 := fields["raw_base64"]
	_, hasError := fields["error"]
	_, hasBytes := fields["raw_bytes"]
	raw := []byte(back.Raw)
	if hasBase64 {
		raw = back.Base64
	}
	msg := ""
	if r.Err != nil {
		msg = r.Err.Error()
	}
	switch {
	case back.Reason != string(r.Reason):
		t.Fatalf("dead letter %s: reason %q, want %q", r.Pos, back.Reason, r.Reason)
	case !hasError || back.Error != msg:
		t.Fatalf("dead letter %s: error %q, want %q", r.Pos, back.Error, msg)
	case hasRaw == hasBase64:
		t.Fatalf("dead letter %s: want exactly one of raw and raw_base64: %s", r.Pos, o.Value)
	case hasRaw != utf8.Valid(r.Raw):
		t.Fatalf("dead letter %s: raw for valid UTF-8, raw_base64 otherwise: %s", r.Pos, o.Value)
	case !bytes.Equal(raw, r.Raw):
		t.Fatalf("dead letter %s: raw record %q, want %q", r.Pos, raw, r.Raw)
	case back.Truncated != r.RawTruncated() || hasBytes != r.RawTruncated():
		t.Fatalf("dead letter %s: raw_truncated %v (raw_bytes present: %v), want %v", r.Pos, back.Truncated, hasBytes, r.RawTruncated())
	case r.RawTruncated() && back.Bytes != r.RawSize:
		t.Fatalf("dead letter %s: raw_bytes %d, want %d", r.Pos, back.Bytes, r.RawSize)
	}
	if !h.Kafka {
		return
	}
	if o.Key != nil {
		t.Fatalf("dead letter %s: key %q, want none", r.Pos, o.Key)
	}
	want := positionHeaders(r.Pos)
	want[producer.HeaderReason] = string(r.Reason)
	want[producer.HeaderError] = msg
	checkHeaders(t, r.Pos, o.Headers, want)
}

func positionHeaders(p input.Position) map[string]string {
	if p.IsFile() {
		return map[string]string{
			producer.HeaderSourceFile: p.File,
			producer.HeaderSourceLine: strconv.FormatInt(p.Line, 10),
		}
	}
	return map[string]string{
		producer.HeaderSourceTopic:     p.Topic,
		producer.HeaderSourcePartition: strconv.Itoa(int(p.Partition)),
		producer.HeaderSourceOffset:    strconv.FormatInt(p.Offset, 10),
	}
}

func checkHeaders(t *testing.T, pos input.Position, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("record %s: headers %v, want %v", pos, got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("record %s: header %s = %q, want %q (headers %v)", pos, k, g, v, got)
		}
	}
}

// SourceOf returns the source position written in an output record's
// "source" object: file and line, or topic, partition and offset, nothing
// else. A file position's byte offset is not written; it is zero.
func SourceOf(value []byte) (input.Position, error) {
	var rec struct {
		Source map[string]json.RawMessage `json:"source"`
	}
	if err := json.Unmarshal(value, &rec); err != nil {
		return input.Position{}, fmt.Errorf("read source: %w", err)
	}
	var p input.Position
	field := func(name string, v any) error {
		raw, ok := rec.Source[name]
		if !ok {
			return fmt.Errorf("read source: no %q in %s", name, value)
		}
		return json.Unmarshal(raw, v)
	}
	var err error
	switch {
	case len(rec.Source) == 2:
		err = errors.Join(field("file", &p.File), field("line", &p.Line))
		if err == nil && p.File == "" {
			err = errors.New("read source: empty file")
		}
	case len(rec.Source) == 3:
		err = errors.Join(field("topic", &p.Topic), field("partition", &p.Partition), field("offset", &p.Offset))
		if err == nil && p.Topic == "" {
			err = errors.New("read source: empty topic")
		}
	default:
		err = fmt.Errorf("read source: want {file,line} or {topic,partition,offset}: %s", value)
	}
	return p, err
}

// samePosition compares positions as an output carries them: a file
// position without its byte offset.
func samePosition(got, want input.Position) bool {
	if want.IsFile() {
		want.Offset = 0
	}
	return got == want
}
