package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/internal/kafkatest"
	"denoiser/internal/synth"
	"denoiser/online"
	"denoiser/online/onlinetest"
	"denoiser/producer"
	"denoiser/service"
	"denoiser/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// events returns n synthetic JSON-lines events.
func events(t testing.TB, n int, seed uint64) [][]byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := synth.Write(context.Background(), &buf, synth.Config{Events: n, Noise: 0.2, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
}

// typedEvents returns n synthetic JSON-lines events of the generator's
// profile v2 without dwell: event types (view, click, cart, purchase,
// return) and no dwell_ms, the stream on which the model's rank
// instrument (model.event_order) weighs the scores.
func typedEvents(t testing.TB, n int, seed uint64) [][]byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := synth.Write(context.Background(), &buf, synth.Config{Events: n, Noise: 0.2, Seed: seed, Profile: synth.ProfileV2, DwellShare: -1}); err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
}

// bareEvents returns typedEvents without their event types: events of
// (user, item, time) only, the stream on which the model's gap
// instrument weighs the scores (a news site's click log, a shop's
// reviews).
func bareEvents(t testing.TB, n int, seed uint64) [][]byte {
	t.Helper()
	return withoutMembers(t, typedEvents(t, n, seed), "event")
}

// withoutMembers returns lines, JSON objects, each without the named
// members.
func withoutMembers(t testing.TB, lines [][]byte, names ...string) [][]byte {
	t.Helper()
	out := make([][]byte, len(lines))
	for i, l := range lines {
		var ev map[string]any
		d := json.NewDecoder(bytes.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			delete(ev, name)
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// renamedMembers returns lines with each member named in names renamed
// to what it maps to.
func renamedMembers(t testing.TB, lines [][]byte, names map[string]string) [][]byte {
	t.Helper()
	out := make([][]byte, len(lines))
	for i, l := range lines {
		var ev map[string]json.RawMessage
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatal(err)
		}
		for from, to := range names {
			if v, ok := ev[from]; ok {
				delete(ev, from)
				ev[to] = v
			}
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// keyed turns lines into messages keyed by their user (as a producer
// partitioning by user would).
func keyed(lines [][]byte) []kafka.Message { return keyedBy(consumer.Fields{}, lines) }

// keyedBy is keyed for records whose fields are read from the members
// fields names.
func keyedBy(fields consumer.Fields, lines [][]byte) []kafka.Message {
	dec := consumer.NewDecoder(fields)
	msgs := make([]kafka.Message, len(lines))
	for i, l := range lines {
		var ev consumer.Event
		if err := dec.Decode(l, &ev); err == nil {
			msgs[i].Key = []byte(ev.User)
		}
		msgs[i].Value = l
	}
	return msgs
}

// testConfig is a service configuration for a test: quick group timeouts,
// frequent checkpoints, HTTP on a free port. It creates the output topics.
func testConfig(t testing.TB, b *kafkatest.Broker, in string) service.Config {
	b.CreateTopic(t, in+".scored", 3)
	b.CreateTopic(t, in+".dead-letter", 1)
	return service.Config{
		Kafka: service.KafkaConfig{
			Brokers: b.Addrs, InputTopic: in, Group: in + "-g",
			SourceConfig: service.SourceConfig{
				SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
				RebalanceTimeout: 6 * time.Second, RequestTimeout: 3 * time.Second,
				FetchMaxWait: 100 * time.Millisecond,
			},
		},
		Checkpoint: service.CheckpointConfig{Dir: t.TempDir(), EveryEvents: 500, Interval: 200 * time.Millisecond, NoSync: true},
		HTTP:       service.HTTPConfig{Addr: "127.0.0.1:0"},
		Model:      onlinetest.QuickDefaults(), // what the service runs by default, quick to warm up
	}
}

// running is a service running in the background.
type running struct {
	svc    *service.Service
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg service.Config) *running {
	t.Helper()
	var opts service.Options
	if os.Getenv("DENOISER_TEST_LOG") != "" { // the services' logs, for debugging a failure
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("dir", filepath.Base(cfg.Checkpoint.Dir))
	}
	svc, err := service.New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("service.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{svc: svc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("service did not stop")
		}
	})
	return r
}

// stop stops the service gracefully and returns Run's error and how long
// the stop took.
func (r *running) stop(t *testing.T) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err, time.Since(start)
	case <-time.After(30 * time.Second):
		t.Fatal("service did not stop within 30s")
	}
	return nil, 0
}

// sourceOffset reads the source offset header of an output record.
func sourceOffset(t testing.TB, m kafka.Message) (partition int, offset int64) {
	t.Helper()
	p, ok1 := kafkatest.Header(m, producer.HeaderSourcePartition)
	o, ok2 := kafkatest.Header(m, producer.HeaderSourceOffset)
	pi, err1 := strconv.Atoi(p)
	oi, err2 := strconv.ParseInt(o, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		t.Fatalf("output record %d/%d without a source position: %+v", m.Partition, m.Offset, m.Headers)
	}
	return pi, oi
}

// covers is an Until condition: every offset below end[p] of every input
// partition p has an output record.
func covers(t testing.TB, end map[int]int64) func([]kafka.Message) bool {
	return func(msgs []kafka.Message) bool {
		seen := map[[2]int64]bool{}
		for _, m := range msgs {
			p, o := sourceOffset(t, m)
			seen[[2]int64{int64(p), o}] = true
		}
		for p, n := range end {
			for o := int64(0); o < n; o++ {
				if !seen[[2]int64{int64(p), o}] {
					return false
				}
			}
		}
		return true
	}
}

// reference steps a model directly over lines (in order) and returns the
// scored output it should produce at input partition 0 and the model
// bytes.
func reference(t testing.TB, cfg service.Config, topic string, lines [][]byte) ([][]byte, []byte) {
	t.Helper()
	c := cfg.WithDefaults()
	m, err := online.New(c.Model, online.NewSource(c.Seed))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for i, l := range lines {
		r := consumer.Result{Pos: input.Position{Topic: topic, Offset: int64(i)}}
		if err := consumer.Decode(l, &r.Event); err != nil {
			continue
		}
		if err := m.Step(r.Event.Model(), &r.Score); err != nil && !errors.Is(err, online.ErrNumerical) {
			continue
		}
		out = append(out, producer.AppendScored(nil, &r))
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return out, buf.Bytes()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func loadCheckpoint(t *testing.T, dir string) state.Checkpoint {
	t.Helper()
	st, err := state.Open(dir, state.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cp, ok, err := st.Load(context.Background())
	if err != nil || !ok {
		t.Fatalf("Load: %v, %v", ok, err)
	}
	return cp
}

// TestEndToEnd: every input event is scored exactly as a model stepped
// directly over the same events would score it, the output carries the
// source position, the final checkpoint holds that model and the end
// position, and the HTTP endpoints answer.
func TestEndToEnd(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "e2e", 1)
	lines := events(t, 3000, 1)
	b.Produce(t, in, keyed(lines)...)
	cfg := testConfig(t, b, in)
	r := start(t, cfg)
	out := b.NewReader(t, cfg.WithDefaults().Kafka.OutputTopic).Until(t, 2*time.Minute, kafkatest.AtLeast(len(lines)))

	base := "http://" + r.svc.HTTPAddr()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := httpGet(t, base+"/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{
		"denoiser_events_consumed_total 3000", "denoiser_events_scored_total 3000",
		"denoiser_processing_seconds_count 375", // one event in 8 is timed
		"denoiser_reliability_count 3000",
		`denoiser_events_dead_lettered_total{reason="not_json"} 0`, "denoiser_checkpoints_total",
		"denoiser_checkpoint_duration_seconds_bucket", "denoiser_checkpoint_age_seconds",
		`denoiser_consumer_lag{partition="0",topic="` + in + `"} 0`, "denoiser_ready 1", "denoiser_distilled_share",
		"denoiser_gmm_refits_total", `denoiser_gmm_component_mean{component="0",feature="score"}`,
		`denoiser_mean_transition{clean="1",observed="1"}`, "denoiser_user_prior_strength", "denoiser_item_prior_strength", "go_goroutines",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Every scored event is counted under one weight source.
	sources := 0
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, "denoiser_weight_sources_total{source="); ok {
			_, n, _ := strings.Cut(v, "} ")
			k, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			sources += k
		}
	}
	if sources != 3000 {
		t.Errorf("denoiser_weight_sources_total sums to %d, want 3000", sources)
	}
	if err, d := r.stop(t); err != nil {
		t.Fatalf("Run after a graceful stop: %v (%v)", err, d)
	}

	wantOut, wantModel := reference(t, cfg, in, lines)
	if len(out) != len(wantOut) {
		t.Fatalf("%d output records, want %d", len(out), len(wantOut))
	}
	for _, m := range out {
		_, off := sourceOffset(t, m)
		if !bytes.Equal(m.Value, wantOut[off]) {
			t.Fatalf("output of offset %d:\n got %s\nwant %s", off, m.Value, wantOut[off])
		}
	}
	cp := loadCheckpoint(t, cfg.Checkpoint.Dir)
	// The checkpoint's model (of partition 0, the only one) is its base
	// with its deltas applied.
	snap, err := service.CheckpointModel(context.Background(), cp, 0)
	if err != nil {
		t.Fatalf("decode the checkpoint (base %d + %d deltas): %v", cp.Base, len(cp.Deltas), err)
	}
	if model := snap.Model; !bytes.Equal(model, wantModel) {
		t.Errorf("checkpointed model (%d bytes, version %d, base %d + %d deltas) differs from the reference (%d bytes)",
			len(model), cp.Version, cp.Base, len(cp.Deltas), len(wantModel))
	}
	if !slices.Equal(cp.Positions, []input.Position{{Topic: in, Partition: 0, Offset: int64(len(lines))}}) {
		t.Errorf("checkpoint positions %v, want %s/0 at %d", cp.Positions, in, len(lines))
	}
}

// TestPoisonRecords: every bad record lands in the dead-letter topic with
// its reason and source position, and the stream goes on around them.
func TestPoisonRecords(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "poison", 2)
	good := events(t, 400, 2)
	poison := map[string]consumer.Reason{
		`not json`:      consumer.ReasonNotJSON,
		`{"user":"u1"}`: consumer.ReasonMissingField,
		`{"user":"u1","item":"i1","dwell_ms":-5}`: consumer.ReasonOutOfRange,
		`["a"]`: consumer.ReasonBadType,
		"{\"user\":\"u\xff\",\"item\":3,\"truth\":\"maybe\"}":    consumer.ReasonBadType, // the id is not text
		`{"user":"` + strings.Repeat("x", 300) + `","item":"i"}`: consumer.ReasonTooLarge,
	}
	var lines [][]byte
	k := 0
	for raw := range poison {
		for range 3 {
			lines = append(lines, good[k*50:(k+1)*50]...)
			lines = append(lines, []byte(raw))
			k = (k + 1) % 8
		}
	}
	b.Produce(t, in, kafkatest.Values(lines...)...)
	cfg := testConfig(t, b, in)
	start(t, cfg)
	c := cfg.WithDefaults().Kafka
	nBad := 3 * len(poison)
	dead := b.NewReader(t, c.DeadLetterTopic).Until(t, 2*time.Minute, kafkatest.AtLeast(nBad))
	scored := b.NewReader(t, c.OutputTopic).Until(t, 2*time.Minute, kafkatest.AtLeast(len(lines)-nBad))
	if len(dead) != nBad || len(scored) != len(lines)-nBad {
		t.Fatalf("%d dead letters and %d scored, want %d and %d", len(dead), len(scored), nBad, len(lines)-nBad)
	}
	// Map input positions back to the raw records.
	var inMsgs []kafka.Message
	inMsgs = b.NewReader(t, in).Until(t, time.Minute, kafkatest.AtLeast(len(lines)))
	raw := map[[2]int64][]byte{}
	for _, m := range inMsgs {
		raw[[2]int64{int64(m.Partition), m.Offset}] = m.Value
	}
	for _, m := range dead {
		p, o := sourceOffset(t, m)
		rec := raw[[2]int64{int64(p), o}]
		want, ok := poison[string(rec)]
		if !ok {
			t.Fatalf("dead letter for %d@%d is a good record: %s", p, o, rec)
		}
		if reason, _ := kafkatest.Header(m, producer.HeaderReason); reason != string(want) {
			t.Errorf("record %q: reason header %q, want %q", rec, reason, want)
		}
		if e, _ := kafkatest.Header(m, producer.HeaderError); e == "" {
			t.Errorf("record %q: no error header", rec)
		}
		if topic, _ := kafkatest.Header(m, producer.HeaderSourceTopic); topic != in {
			t.Errorf("record %q: source topic header %q, want %q", rec, topic, in)
		}
		if !bytes.Contains(m.Value, []byte(`"reason":"`+string(want)+`"`)) {
			t.Errorf("dead letter value %s lacks its reason", m.Value)
		}
	}
}

// TestSubmitServesTasksWhileIdle: a task submitted while no input arrives
// runs on the model goroutine and sees the model and positions together;
// after the stop Submit refuses.
func TestSubmitServesTasksWhileIdle(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "submit", 1)
	lines := events(t, 200, 6)
	b.Produce(t, in, keyed(lines)...)
	cfg := testConfig(t, b, in)
	r := start(t, cfg)
	waitFor(t, time.Minute, "all records processed", func() bool { return r.svc.Processed() == uint64(len(lines)) })

	type seen struct {
		version   uint64
		positions []input.Position
	}
	got := make(chan seen, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := r.svc.Submit(ctx, func(ctx context.Context, out consumer.Flusher) error {
		if err := out.Flush(ctx); err != nil {
			return err
		}
		m, pos := r.svc.ModelState()
		got <- seen{m.Version(), pos}
		return nil
	})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	select {
	case s := <-got:
		if s.version != uint64(len(lines)) || !slices.Equal(s.positions, []input.Position{{Topic: in, Partition: 0, Offset: int64(len(lines))}}) {
			t.Fatalf("task saw version %d and positions %v, want %d and %s/0@%d", s.version, s.positions, len(lines), in, len(lines))
		}
	case <-ctx.Done():
		t.Fatal("the task never ran while the input was idle")
	}
	if err, _ := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Submit(ctx, func(context.Context, consumer.Flusher) error { return nil }); !errors.Is(err, service.ErrNotRunning) {
		t.Fatalf("Submit after the stop = %v, want ErrNotRunning", err)
	}
}

// TestOutputFailureStopsTheStream: when the output cannot be written for
// kafka.retry_for, Run stops with the writer's error instead of dropping
// output, and no checkpoint covers the records that were not written.
func TestOutputFailureStopsTheStream(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "nowhere", 1)
	b.Produce(t, in, keyed(events(t, 300, 7))...)
	cfg := testConfig(t, b, in)
	cfg.Kafka.OutputTopic = in + ".missing" // never created: every write fails
	cfg.Kafka.RetryFor = time.Second
	r := start(t, cfg)
	select {
	case err := <-r.done:
		r.done <- err
		if !errors.Is(err, producer.ErrWriterFailed) {
			t.Fatalf("Run = %v, want ErrWriterFailed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the service kept running with an output it cannot write")
	}
	st, err := state.Open(cfg.Checkpoint.Dir, state.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if cp, ok, err := st.Load(context.Background()); err != nil || ok {
		t.Fatalf("a checkpoint was saved (positions %v, err %v) although no output was written", cp.Positions, err)
	}
}

// TestRecordsAccountedFor: every input record is scored, dead-lettered or
// skipped with its reason (an empty value, white space, a tombstone), and
// the metrics add up to the records read.
func TestRecordsAccountedFor(t *testing.T) {
	for _, layout := range []online.Layout{online.LayoutMember, online.LayoutPartition} {
		t.Run(string(layout), func(t *testing.T) { recordsAccountedFor(t, layout) })
	}
}

// recordsAccountedFor: with either state layout (a model per partition
// steps its partitions in parallel), every record is scored, skipped or
// dead-lettered, and counted.
func recordsAccountedFor(t *testing.T, layout online.Layout) {
	b := kafkatest.New(t)
	in := b.Topic(t, "accounted-"+string(layout), 2)
	good := events(t, 30, 3)
	msgs := keyed(good)
	msgs = append(msgs,
		kafka.Message{Key: []byte("u1"), Value: []byte{}},       // empty
		kafka.Message{Key: []byte("u1"), Value: []byte(" \t ")}, // blank
		kafka.Message{Key: []byte("u2"), Value: nil},            // tombstone
		kafka.Message{Key: []byte("u2"), Value: []byte("not json")},
	)
	b.Produce(t, in, msgs...)
	cfg := testConfig(t, b, in)
	cfg.StateLayout = layout
	r := start(t, cfg)
	c := cfg.WithDefaults().Kafka
	b.NewReader(t, c.OutputTopic).Until(t, time.Minute, kafkatest.AtLeast(len(good)))
	b.NewReader(t, c.DeadLetterTopic).Until(t, time.Minute, kafkatest.AtLeast(1))

	want := map[string]string{
		"denoiser_events_consumed_total":                         fmt.Sprint(len(msgs)),
		"denoiser_events_scored_total":                           fmt.Sprint(len(good)),
		`denoiser_events_dead_lettered_total{reason="not_json"}`: "1",
		`denoiser_records_skipped_total{reason="empty"}`:         "1",
		`denoiser_records_skipped_total{reason="blank"}`:         "1",
		`denoiser_records_skipped_total{reason="tombstone"}`:     "1",
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := httpGet(t, "http://"+r.svc.HTTPAddr()+"/metrics")
		missing := ""
		for name, v := range want {
			if !strings.Contains(body, "\n"+name+" "+v+"\n") {
				missing = name + " " + v
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q:\n%s", missing, grepLines(body, "denoiser_events_", "denoiser_records_"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// grepLines returns the lines of s that start with one of prefixes.
func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
