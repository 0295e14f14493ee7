package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"denoiser/consumer"
	"denoiser/internal/cli"
	"denoiser/internal/report"
	"denoiser/online"
	"denoiser/service"
	"denoiser/state"
)

// Topic names inside the embedded broker.
const (
	InputTopic      = "clicks"
	OutputTopic     = "clicks.scored"
	DeadLetterTopic = "clicks.dead-letter"
	group           = "denoiser-demo"
)

// Options configures Run. Zero values mean the defaults in the comments.
// Validate names each field by its flag of `denoiser-lab demo`, given in
// brackets.
type Options struct {
	// Input is the event file to produce into the input topic
	// (required; --in), read as replay reads it (cli.OpenInput): JSON
	// lines or CSV with a header as Format says, gzip, a byte-order mark.
	// A relative path is read from the working directory.
	Input string
	// Format is the input's format (--format): jsonl, csv, or auto (the
	// default: csv for a name ending in .csv or .csv.gz).
	Format string
	// Partitions is the number of partitions of the input and output
	// topics (--partitions; default 3). It must be at least Members.
	Partitions int
	// Truth is the ground truth the report measures against (--truth;
	// default: the events' "truth" field).
	Truth *report.Truth
	// HTTPAddr is where /metrics, /healthz and /readyz are served while
	// the demo runs (--http; default 127.0.0.1:9464; "off" for none).
	HTTPAddr string
	// StateDir is the Badger state directory (--state-dir; default: a
	// temporary directory, removed at the end). It must be new or empty:
	// the embedded broker is new on every run, so a checkpoint of an
	// earlier run holds positions its topics do not have.
	StateDir string
	// Seed and Model configure the model, as in `denoiser replay`.
	Seed  uint64
	Model online.Config
	// Fields names the members the fields are read from (service.Config).
	Fields consumer.Fields
	// Members is the number of service instances in the consumer group
	// (--members; default 1, at most Partitions: a member with no
	// partition would wait for records forever); the first serves
	// HTTPAddr, each has a state directory of its own.
	Members int
	// StateLayout and Sharing are the services' (service.Config;
	// --state-layout, --sharing-interval, --sharing-events, --sharing-wait).
	StateLayout online.Layout
	Sharing     service.SharingConfig
	// Logger receives the service's log (default: discard).
	Logger *slog.Logger
	// Progress receives one line per step (default: discard).
	Progress io.Writer
	// Started, if set, is called once the service runs, with the
	// broker's and the HTTP server's addresses.
	Started func(broker, httpAddr string)
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.Format == "" {
		o.Format = "auto"
	}
	if o.Partitions == 0 {
		o.Partitions = 3
	}
	if o.Members == 0 {
		o.Members = 1
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = service.DefaultHTTPAddr
	}
	return o
}

// Validate checks o, with its defaults applied, without starting
// anything, and returns the first problem, naming the field by its flag.
// Run calls it first; a command calls it to tell a wrong flag (a usage
// error) from a failure of the run.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Input == "":
		return errors.New("--in: no input file")
	case o.Format != "auto" && o.Format != "jsonl" && o.Format != "csv":
		return fmt.Errorf("--format %q: use jsonl, csv or auto", o.Format)
	case o.Partitions < 1:
		return fmt.Errorf("--partitions %d: want at least 1", o.Partitions)
	case o.Members < 1:
		return fmt.Errorf("--members %d: want at least 1", o.Members)
	case o.Members > o.Partitions:
		return fmt.Errorf("--members %d is more than --partitions %d: a member without a partition would wait for records forever; give at most %d members or more partitions",
			o.Members, o.Partitions, o.Partitions)
	case o.StateLayout != "" && o.StateLayout.Validate() != nil:
		return fmt.Errorf("--state-layout %q: use %s or %s", o.StateLayout, online.LayoutMember, online.LayoutPartition)
	case o.Sharing.Interval < 0:
		return fmt.Errorf("--sharing-interval %v: want a positive duration", o.Sharing.Interval)
	case o.Sharing.EveryEvents < 0:
		return fmt.Errorf("--sharing-events %d: want at least 1", o.Sharing.EveryEvents)
	}
	if o.HTTPAddr != service.HTTPOff {
		if _, _, err := net.SplitHostPort(o.HTTPAddr); err != nil {
			return fmt.Errorf("--http %q: want host:port (port 0: any free one) or off", o.HTTPAddr)
		}
	}
	if o.Input != "-" {
		if _, err := os.Stat(o.Input); errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(o.Input) {
			wd, _ := os.Getwd()
			return fmt.Errorf("--in %s: %w in the working directory %s", o.Input, fs.ErrNotExist, wd)
		} else if err != nil {
			return fmt.Errorf("--in: %w", err)
		}
	}
	if o.StateDir != "" {
		entries, err := os.ReadDir(o.StateDir)
		switch {
		case errors.Is(err, fs.ErrNotExist): // the service makes it
		case err != nil:
			return fmt.Errorf("--state-dir: %w", err)
		case len(entries) > 0:
			return fmt.Errorf("--state-dir %s is not empty: the demo's broker is new on every run, so an earlier run's checkpoint does not fit its topics; give a new or empty directory", o.StateDir)
		}
	}
	// What the service itself checks (the model and fields of --config,
	// the sharing settings), with a stand-in for the broker's address,
	// which is not known before it starts.
	return o.serviceConfig([]string{"127.0.0.1:9092"}, "state").Validate()
}

// serviceConfig is the configuration of the demo's services, with its
// state in dir.
func (o Options) serviceConfig(brokers []string, dir string) service.Config {
	return service.Config{
		Kafka: service.KafkaConfig{
			Brokers: brokers, InputTopic: InputTopic, Group: group, OutputTopic: OutputTopic, DeadLetterTopic: DeadLetterTopic,
			SourceConfig: service.SourceConfig{
				SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond, RebalanceTimeout: 5 * time.Second,
				FetchMaxWait: 100 * time.Millisecond,
			},
		},
		Checkpoint:  service.CheckpointConfig{Dir: dir, EveryEvents: 5000, Interval: 2 * time.Second, NoSync: true},
		HTTP:        service.HTTPConfig{Addr: o.HTTPAddr},
		Seed:        o.Seed,
		StateLayout: o.StateLayout,
		Sharing:     o.Sharing,
		Model:       o.Model,
		Fields:      o.Fields,
	}
}

// Limits of the embedded broker and of the producer that fills it. A
// record the demo produces is at most consumer.MaxLineBytes+1 bytes (the
// input's reader keeps no more of a longer line), so that a line the
// service rejects as too_large reaches it and is dead-lettered, as replay
// does, rather than stopping the producer.
const (
	// batchBytes bounds a batch of the producer: room for one record of
	// the largest with its framing.
	batchBytes = 2 * consumer.MaxLineBytes
	// brokerMaxBytes is the broker's message.max.bytes: room for a batch
	// of batchBytes with its framing.
	brokerMaxBytes = 2 * batchBytes
)

// Clock of the throughput figures: the members' processed counts are
// polled every pollInterval, so a span is known to within two polls; a
// rate is reported only over a span of at least minRateSpan (50 ms),
// where that error is under a tenth of it.
const (
	pollInterval = 2 * time.Millisecond
	minRateSpan  = 25 * pollInterval
)

// Run runs the demo: an embedded Kafka broker, the topics, the input file
// produced into the input topic (keyed by user), the stream service as a
// member of a consumer group until every record is processed, then the
// scored topic read back and turned into a report with the same fields as
// `denoiser replay`'s. Seconds measure the service: from the later of the
// first record produced and the last poll at which no member had processed
// one, to the poll at which they had processed every record. Events/s is
// Events over Seconds when Seconds is at least minRateSpan (50 ms), and
// 0 (not measured) under it, as the progress line says.
func Run(ctx context.Context, opts Options) (rep report.Report, err error) {
	if err := opts.Validate(); err != nil {
		return rep, fmt.Errorf("demo: %w", err)
	}
	opts = opts.withDefaults()
	truth := opts.Truth
	if truth == nil {
		t, err := report.ParseTruth("field")
		if err != nil {
			return rep, err
		}
		truth = &t
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	// The address is tried before anything starts: taken, it would stop
	// the demo once the input is produced.
	if opts.HTTPAddr != service.HTTPOff {
		ln, err := net.Listen("tcp", opts.HTTPAddr)
		if err != nil {
			return rep, fmt.Errorf("demo: %w", httpError(err))
		}
		if err := ln.Close(); err != nil {
			return rep, fmt.Errorf("demo: %w", err)
		}
	}
	lines, err := readLines(ctx, opts.Input, opts.Format, opts.Fields)
	if err != nil {
		return rep, fmt.Errorf("demo: %w", err)
	}

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.GroupMinSessionTimeout(time.Second),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(brokerMaxBytes)}))
	if err != nil {
		return rep, fmt.Errorf("demo: start embedded broker: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fmt.Fprintf(progress, "demo: embedded Kafka broker (kfake) at %s\n", brokers[0])

	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr}
	if err := createTopics(ctx, client, opts.Partitions); err != nil {
		return rep, fmt.Errorf("demo: %w", err)
	}
	// One member finds the input in the topic when it starts, so that its
	// events/s measure the service alone; several members start first and
	// the input waits until each has partitions.
	produceInput := func() error {
		start := time.Now()
		if err := produce(ctx, brokers, tr, lines, opts.Fields); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		fmt.Fprintf(progress, "demo: produced %d records from %s into %q (%d partitions, keyed by user) in %.2fs\n",
			len(lines), opts.Input, InputTopic, opts.Partitions, time.Since(start).Seconds())
		return nil
	}
	if opts.Members == 1 {
		if err := produceInput(); err != nil {
			return rep, err
		}
	}

	dir := opts.StateDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "denoiser-demo-state-"); err != nil {
			return rep, fmt.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	cfg := opts.serviceConfig(brokers, dir)
	svcs := make([]*service.Service, opts.Members)
	defer func() {
		for _, svc := range svcs {
			if svc != nil {
				err = errors.Join(err, svc.Close()) // nothing once Run has run
			}
		}
	}()
	for i := range svcs {
		c := cfg
		if opts.Members > 1 {
			c.Checkpoint.Dir = filepath.Join(dir, fmt.Sprintf("member-%d", i))
		}
		if i > 0 {
			c.HTTP.Addr = service.HTTPOff
		}
		if svcs[i], err = service.New(ctx, c, service.Options{Logger: opts.Logger}); err != nil {
			if errors.Is(err, syscall.EADDRINUSE) { // taken since it was tried
				err = httpError(err)
			}
			return rep, fmt.Errorf("demo: %w", err)
		}
	}
	if a := svcs[0].HTTPAddr(); a != "" {
		fmt.Fprintf(progress, "demo: metrics at http://%s/metrics while the service runs\n", a)
	}
	if opts.Started != nil {
		opts.Started(brokers[0], svcs[0].HTTPAddr())
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, len(svcs))
	// Wait for every member, gracefully stopped (drain, flush, last
	// checkpoint), once: errs gathers what they returned.
	stopped := 0
	var errs []error
	stopAll := func() error {
		stop()
		for ; stopped < len(svcs); stopped++ {
			errs = append(errs, <-done)
		}
		return errors.Join(errs...)
	}
	// from starts the clock: one member has the input from the start; for
	// several, it starts with the first record produced. Either way a poll
	// that finds nothing processed yet moves it on.
	from := time.Now()
	for _, svc := range svcs {
		go func() { done <- svc.Run(runCtx) }()
	}
	if len(svcs) > 1 {
		// The input waits until every member has joined, so that the
		// partitions are split from the first record on.
		joined := time.Now()
		for ready := false; !ready; {
			if time.Since(joined) > time.Minute {
				return rep, errors.Join(errors.New("demo: the members did not all get partitions within a minute"), stopAll())
			}
			time.Sleep(50 * time.Millisecond)
			ready = true
			for _, svc := range svcs {
				if parts, _ := svc.Assignment(); len(parts) == 0 {
					ready = false
				}
			}
		}
		fmt.Fprintf(progress, "demo: %d members share the %d partitions after %.2fs\n", len(svcs), opts.Partitions, time.Since(joined).Seconds())
		from = time.Now()
		if err := produceInput(); err != nil {
			return rep, errors.Join(err, stopAll())
		}
	}
	want := uint64(countRecords(lines))
	tick := time.NewTicker(pollInterval)
	var to time.Time
	moved, seen := time.Now(), uint64(0)
	for n := uint64(0); n < want; {
		if time.Since(moved) > stallTimeout {
			return rep, errors.Join(fmt.Errorf("demo: no record processed for %v, %d of %d in all: the service is stuck (run with --log-level info to see why)", stallTimeout, n, want), stopAll())
		}
		select {
		case err := <-done:
			stopped++
			errs = append(errs, err)
			return rep, fmt.Errorf("demo: a service stopped early: %w", stopAll())
		case <-ctx.Done():
			return rep, errors.Join(fmt.Errorf("demo: %w", ctx.Err()), stopAll())
		case <-tick.C:
		}
		n = 0
		for _, svc := range svcs {
			n += svc.Processed()
		}
		to = time.Now()
		if n == 0 {
			from = to
		}
		if n != seen {
			moved, seen = to, n
		}
	}
	tick.Stop()
	if err := stopAll(); err != nil {
		return rep, fmt.Errorf("demo: %w", err)
	}
	var st consumer.Stats
	for _, svc := range svcs {
		st.Add(svc.Stats())
	}
	model, _ := svcs[0].ModelState()
	elapsed := to.Sub(from)
	rate := fmt.Sprintf("%.0f events/s", float64(st.Scored)/elapsed.Seconds())
	if elapsed < minRateSpan {
		rate = fmt.Sprintf("too short a span to measure a rate (under %v): events/s is left 0", minRateSpan)
	}
	fmt.Fprintf(progress, "demo: %d member(s) processed %d records (%d scored, %d dead-lettered, %d blank) in %.3fs, %s\n",
		len(svcs), st.Records, st.Scored, st.Rejected, st.Skipped, elapsed.Seconds(), rate)
	if st.Scored == 0 {
		return rep, fmt.Errorf("demo: none of the %d records of %s could be scored (%d dead-lettered): is it in the event format? `denoiser replay --in %s --out /dev/null` says why, line by line", st.Records, opts.Input, st.Rejected, opts.Input)
	}

	if err := printShared(ctx, progress, cfg.WithDefaults(), len(lines)); err != nil {
		return rep, fmt.Errorf("demo: %w", err)
	}

	collector := report.NewCollector(*truth, nil)
	// The loss baseline: a plain model (the service's configuration made
	// plain, Config.Baseline) learning, test-then-train, from the scored records as
	// they are read back, as replay's does beside its model.
	baseline, err := online.New(model.Config().Baseline(), online.NewSource(opts.Seed))
	if err != nil {
		return rep, fmt.Errorf("demo: baseline: %w", err)
	}
	if err := readBack(ctx, brokers, int(st.Scored-st.AlreadyEmitted), collector, baseline); err != nil {
		return rep, fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(progress, "demo: read %d scored records back from %q\n", collector.Scored(), OutputTopic)
	rep = report.Build(report.Inputs{
		Input:     fmt.Sprintf("kafka topic %s (embedded broker), from %s", InputTopic, opts.Input),
		Collector: collector,
		Stats:     st,
		Model:     model.Summary(),
		Baseline:  ptr(baseline.Summary()),
		Elapsed:   elapsed,
	})
	if elapsed < minRateSpan {
		rep.EventsPerSec = 0
	}
	return rep, nil
}

// httpError is err, from listening on the HTTP address, with what to do
// about it.
func httpError(err error) error {
	return fmt.Errorf("serve /metrics: %w: another demo or service may hold the address; pass --http off, or --http 127.0.0.1:0 for any free port", err)
}

// stallTimeout bounds the wait for the services: when no record has
// been processed for this long, the demo stops with an error.
const stallTimeout = 2 * time.Minute

// readLines reads the records of the event file at path as replay reads
// them (cli.OpenInput), each a JSON object but for lines that are not
// (the service dead-letters those); blank lines are kept, as the
// service counts and skips them.
func readLines(ctx context.Context, path, format string, fields consumer.Fields) (lines [][]byte, err error) {
	src, err := cli.OpenInput(path, format, fields)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, src.Close()) }()
	for {
		m, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		lines = append(lines, bytes.Clone(m.Value))
	}
	if countRecords(lines) == 0 {
		return nil, fmt.Errorf("%s holds no record", path)
	}
	return lines, nil
}

// countRecords counts the records the service will process (it skips
// blank ones).
func countRecords(lines [][]byte) int {
	n := 0
	for _, l := range lines {
		if len(bytes.TrimSpace(l)) > 0 {
			n++
		}
	}
	return n
}

func createTopics(ctx context.Context, c *kafka.Client, partitions int) error {
	topics := []kafka.TopicConfig{
		{Topic: InputTopic, NumPartitions: partitions, ReplicationFactor: 1},
		{Topic: OutputTopic, NumPartitions: partitions, ReplicationFactor: 1},
		{Topic: DeadLetterTopic, NumPartitions: 1, ReplicationFactor: 1},
	}
	resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: topics})
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for name, err := range resp.Errors {
		if err != nil {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	return nil
}

// produce writes lines to the input topic, keyed by user when the line
// decodes (bad lines go anywhere: the service dead-letters them).
func produce(ctx context.Context, brokers []string, tr *kafka.Transport, lines [][]byte, fields consumer.Fields) error {
	w := &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: InputTopic, Transport: tr, Balancer: kafka.Murmur2Balancer{},
		BatchSize: 1000, BatchBytes: batchBytes, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll,
	}
	msgs := make([]kafka.Message, 0, 5000)
	var ev consumer.Event
	dec := consumer.NewDecoder(fields)
	flush := func() error {
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		msgs = msgs[:0]
		return nil
	}
	for _, l := range lines {
		m := kafka.Message{Value: l}
		if dec.Decode(l, &ev) == nil {
			m.Key = []byte(ev.User)
		}
		msgs = append(msgs, m)
		if len(msgs) == cap(msgs) {
			if err := flush(); err != nil {
				return errors.Join(err, w.Close())
			}
		}
	}
	if err := flush(); err != nil {
		return errors.Join(err, w.Close())
	}
	return w.Close()
}

// scored is what the report needs of a scored output record.
type scored struct {
	Weight      *float64 `json:"weight"`
	Reliability *float64 `json:"reliability"`
	PClean      *float64 `json:"p_clean"`
	Distilled   *int     `json:"distilled"`
}

// readBack reads n records of the scored topic with a consumer of its own
// and hands them to the collector.
func readBack(ctx context.Context, brokers []string, n int, c *report.Collector, baseline *online.Model) (err error) {
	src, err := consumer.NewKafkaSource(consumer.KafkaConfig{
		Brokers: brokers, Topic: OutputTopic, Group: group + "-readback",
		SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond, RebalanceTimeout: 5 * time.Second,
		FetchMaxWait: 100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, src.Close(cctx))
	}()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		m, err := src.Next(ctx)
		if err != nil {
			return fmt.Errorf("read back record %d of %d: %w", i+1, n, err)
		}
		var s scored
		if err := json.Unmarshal(m.Value, &s); err != nil {
			return fmt.Errorf("read back %s: %w", m.Pos, err)
		}
		r := consumer.Result{Pos: m.Pos}
		// The event's fields as the service read them (its time
		// normalised, for the user_gap baseline); the scores from s.
		if err := consumer.Decode(m.Value, &r.Event); err != nil {
			return fmt.Errorf("read back %s: %w", m.Pos, err)
		}
		r.Event.Extra = nil
		r.Score.Weight, r.Score.Reliability, r.Score.PClean, r.Score.Distilled = orNaN(s.Weight), orNaN(s.Reliability), orNaN(s.PClean), -1
		if s.Distilled != nil {
			r.Score.Distilled = *s.Distilled
		}
		if err := baseline.Step(r.Event.Model(), &r.Shadow); err == nil || errors.Is(err, online.ErrNumerical) {
			r.HasShadow = true
		}
		if err := c.Write(ctx, &r); err != nil {
			return err
		}
	}
	return nil
}

func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

// printShared prints what the shared topic holds (state_layout partition
// with sharing): its records and bytes, per input event.
func printShared(ctx context.Context, w io.Writer, cfg service.Config, events int) error {
	if cfg.StateLayout != online.LayoutPartition || cfg.Sharing.Topic == service.SharingOff {
		return nil
	}
	lg, err := state.OpenShared(ctx, state.SharedConfig{
		Brokers: cfg.Kafka.Brokers, Topic: cfg.Sharing.Topic, Existing: true, Timeout: cfg.Kafka.RequestTimeout,
	})
	if err != nil {
		return err
	}
	records, size := 0, 0
	_, err = lg.Read(ctx, -1, func(_ int64, key, value []byte) {
		records++
		size += len(key) + len(value)
	})
	if err := errors.Join(err, lg.Close()); err != nil {
		return fmt.Errorf("shared topic %s: %w", cfg.Sharing.Topic, err)
	}
	fmt.Fprintf(w, "demo: the shared topic %q holds %d records, %d bytes (%.0f bytes per input event)\n",
		cfg.Sharing.Topic, records, size, float64(size)/float64(max(events, 1)))
	return nil
}
