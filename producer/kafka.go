package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"denoiser/consumer"
	"denoiser/consumer/input"
)

// Header keys of the Kafka records written by KafkaSink and
// KafkaDeadLetter. Values are UTF-8 text; numbers are decimal.
const (
	HeaderSourceTopic     = "source_topic"     // input topic
	HeaderSourcePartition = "source_partition" // input partition
	HeaderSourceOffset    = "source_offset"    // input offset
	HeaderSourceFile      = "source_file"      // input file (file sources, instead of the three above)
	HeaderSourceLine      = "source_line"      // input line (file sources)
	HeaderModelVersion    = "model_version"    // scored records: events the model had learned before this one
	HeaderReason          = "reason"           // dead letters: the consumer.Reason
	HeaderError           = "error"            // dead letters: the error message
)

// ErrWriterClosed is returned by writes to a closed Kafka writer.
var ErrWriterClosed = errors.New("kafka writer closed")

// ErrWriterFailed wraps the error that made a Kafka writer give up: a batch
// could not be written for KafkaConfig.RetryFor. The writer then accepts
// nothing more, so that no record is dropped silently.
var ErrWriterFailed = errors.New("kafka writer failed")

// KafkaConfig configures a KafkaSink or KafkaDeadLetter. Zero values mean
// the default written in each field's comment; WithDefaults applies them.
//
// The yaml tags are the keys of the settings in the kafka section of
// `denoiser run`'s configuration, which embeds this struct (package
// service); the output and the dead-letter writer share them. Fields
// tagged "-" are not settings there: the service sets them itself.
type KafkaConfig struct {
	// Brokers are the bootstrap addresses, host:port (required).
	Brokers []string `yaml:"-"`
	// Topic is the output topic (required).
	Topic string `yaml:"-"`
	// BatchSize is the number of records sent in one batch (default 1000).
	BatchSize int `yaml:"batch_size"`
	// BatchTimeout is how long a partial batch waits for more records
	// before it is sent (default 10ms; kafka-go's own default is 1s).
	BatchTimeout time.Duration `yaml:"batch_timeout"`
	// MaxBatches is the number of batches filling, queued or in flight;
	// Write blocks when all are taken (default 4). Memory is bounded by
	// MaxBatches × BatchSize records.
	MaxBatches int `yaml:"max_batches"`
	// RetryFor is how long a failing batch is retried before the writer
	// gives up with ErrWriterFailed (default 1m). It should cover a
	// broker restart.
	RetryFor time.Duration `yaml:"retry_for"`
	// RequiredAcks is "all" (default: every in-sync replica) or "leader".
	RequiredAcks string `yaml:"required_acks"`
	// Compression is "none" (default), "gzip", "snappy", "lz4" or "zstd".
	Compression string `yaml:"compression"`
	// WriteTimeout bounds one produce request (default 10s).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// Logger receives the writer's log lines (default: discard).
	Logger *slog.Logger `yaml:"-"`
	// OnDelivered, if set, is called with the number of records of each
	// batch the broker acknowledged, from the writer's goroutine.
	OnDelivered func(records int) `yaml:"-"`
}

// WithDefaults returns c with every zero field that has a default set to
// it; the required fields stay as they are.
func (c KafkaConfig) WithDefaults() KafkaConfig {
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = 10 * time.Millisecond
	}
	if c.MaxBatches == 0 {
		c.MaxBatches = 4
	}
	if c.RetryFor == 0 {
		c.RetryFor = time.Minute
	}
	if c.RequiredAcks == "" {
		c.RequiredAcks = "all"
	}
	if c.Compression == "" {
		c.Compression = "none"
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

var compressions = map[string]kafka.Compression{
	"none": 0, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd,
}

// Validate reports the first unusable field, naming it.
func (c KafkaConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0 || slices.Contains(c.Brokers, ""):
		return errors.New("kafka writer: Brokers: at least one host:port is required")
	case c.Topic == "":
		return errors.New("kafka writer: Topic is required")
	case c.BatchSize < 0 || c.MaxBatches < 0:
		return errors.New("kafka writer: BatchSize and MaxBatches must not be negative")
	case c.BatchTimeout < 0 || c.RetryFor < 0 || c.WriteTimeout < 0:
		return errors.New("kafka writer: durations must not be negative")
	case c.RequiredAcks != "" && c.RequiredAcks != "all" && c.RequiredAcks != "leader":
		return fmt.Errorf("kafka writer: RequiredAcks = %q: want \"all\" or \"leader\"", c.RequiredAcks)
	}
	if !ValidCompression(c.Compression) {
		return fmt.Errorf("kafka writer: Compression = %q: want none, gzip, snappy, lz4 or zstd", c.Compression)
	}
	return nil
}

// ValidCompression reports whether name is a KafkaConfig.Compression the
// writer knows ("" is none).
func ValidCompression(name string) bool {
	_, ok := compressions[name]
	return name == "" || ok
}

var (
	_ consumer.Sink       = (*KafkaSink)(nil)
	_ consumer.DeadLetter = (*KafkaDeadLetter)(nil)
)

// KafkaSink writes scored records to a Kafka topic: key = user (so that
// records of a user stay in one partition, with the Java client's murmur2
// partitioner), value = the JSON encoding of AppendScored, headers = the
// source position and the model version. Records are batched; Flush waits
// until the broker has acknowledged everything written so far.
type KafkaSink struct{ w *kafkaWriter }

// NewKafkaSink returns a sink writing to cfg.Topic. It does not contact the
// broker before the first batch.
func NewKafkaSink(cfg KafkaConfig) (*KafkaSink, error) {
	w, err := newKafkaWriter(cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	return &KafkaSink{w: w}, nil
}

// Write encodes r (which must be scored) and queues it. It blocks while
// MaxBatches batches are taken (backpressure) and returns the writer's
// error once it has failed.
func (s *KafkaSink) Write(ctx context.Context, r *consumer.Result) error {
	return s.w.add(ctx, func(b *batch, m *kafka.Message) {
		b.scratch = AppendScored(b.scratch[:0], r)
		m.Value = b.copy(b.scratch)
		m.Key = b.copy(append(b.scratch[:0], r.Event.User...))
		b.positionHeaders(m, r.Pos)
		b.scratch = strconv.AppendUint(b.scratch[:0], r.Score.Version, 10)
		m.Headers = append(m.Headers, kafka.Header{Key: HeaderModelVersion, Value: b.copy(b.scratch)})
	})
}

// Flush sends the partial batch and waits until the broker has
// acknowledged every record written so far.
func (s *KafkaSink) Flush(ctx context.Context) error { return s.w.flush(ctx) }

// Failing returns, while a batch is being retried, its topic and the
// latest attempt's error; "" once an attempt succeeds.
func (s *KafkaSink) Failing() string { return s.w.failingNow() }

// Close flushes, then releases the writer. It returns when done or when
// ctx is done. It is idempotent.
func (s *KafkaSink) Close(ctx context.Context) error { return s.w.close(ctx) }

// KafkaDeadLetter writes rejected records to a Kafka topic: no key, value =
// the JSON encoding of AppendRejected (reason, error, source, raw record),
// headers = reason, error and the source position.
type KafkaDeadLetter struct{ w *kafkaWriter }

// NewKafkaDeadLetter returns a dead-letter writer to cfg.Topic.
func NewKafkaDeadLetter(cfg KafkaConfig) (*KafkaDeadLetter, error) {
	w, err := newKafkaWriter(cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka dead-letter: %w", err)
	}
	return &KafkaDeadLetter{w: w}, nil
}

// Reject encodes r (which must be rejected) and queues it.
func (d *KafkaDeadLetter) Reject(ctx context.Context, r *consumer.Result) error {
	return d.w.add(ctx, func(b *batch, m *kafka.Message) {
		b.scratch = AppendRejected(b.scratch[:0], r)
		m.Value = b.copy(b.scratch)
		m.Headers = append(m.Headers, kafka.Header{Key: HeaderReason, Value: b.copy(append(b.scratch[:0], r.Reason...))})
		msg := ""
		if r.Err != nil {
			msg = r.Err.Error()
		}
		m.Headers = append(m.Headers, kafka.Header{Key: HeaderError, Value: b.copy(append(b.scratch[:0], msg...))})
		b.positionHeaders(m, r.Pos)
	})
}

// Flush sends the partial batch and waits until the broker has
// acknowledged every record rejected so far.
func (d *KafkaDeadLetter) Flush(ctx context.Context) error { return d.w.flush(ctx) }

// Failing is KafkaSink.Failing for the dead-letter topic.
func (d *KafkaDeadLetter) Failing() string { return d.w.failingNow() }

// Close flushes, then releases the writer. It is idempotent.
func (d *KafkaDeadLetter) Close(ctx context.Context) error { return d.w.close(ctx) }

// maxHeaders is the number of headers a record carries at most.
const maxHeaders = 5

// batch is a set of records sent together. Its bytes live in an arena of
// chunks reused from batch to batch, so that steady-state writing does not
// allocate per record.
type batch struct {
	msgs    []kafka.Message
	headers []kafka.Header // maxHeaders per record, sliced into msgs
	chunks  [][]byte       // arena; chunks[cur] is filling
	cur     int
	scratch []byte
	seq     uint64
	started time.Time
}

const chunkSize = 64 << 10

func (b *batch) reset() {
	clear(b.msgs) // drop references for the GC
	b.msgs = b.msgs[:0]
	for i := range b.chunks {
		b.chunks[i] = b.chunks[i][:0]
	}
	b.cur = 0
}

// copy copies p into the arena and returns the copy.
func (b *batch) copy(p []byte) []byte {
	if len(p) == 0 {
		return []byte{}
	}
	for {
		if b.cur == len(b.chunks) {
			b.chunks = append(b.chunks, make([]byte, 0, max(chunkSize, len(p))))
		}
		c := b.chunks[b.cur]
		if cap(c)-len(c) >= len(p) {
			n := len(c)
			c = append(c, p...)
			b.chunks[b.cur] = c
			return c[n : n+len(p) : n+len(p)]
		}
		b.cur++
	}
}

// positionHeaders appends the source position headers.
func (b *batch) positionHeaders(m *kafka.Message, p input.Position) {
	add := func(k string, v []byte) {
		m.Headers = append(m.Headers, kafka.Header{Key: k, Value: b.copy(v)})
	}
	if p.IsFile() {
		add(HeaderSourceFile, append(b.scratch[:0], p.File...))
		add(HeaderSourceLine, strconv.AppendInt(b.scratch[:0], p.Line, 10))
		return
	}
	add(HeaderSourceTopic, append(b.scratch[:0], p.Topic...))
	add(HeaderSourcePartition, strconv.AppendInt(b.scratch[:0], int64(p.Partition), 10))
	add(HeaderSourceOffset, strconv.AppendInt(b.scratch[:0], p.Offset, 10))
}

// kafkaWriter batches records and sends the batches, in order, from one
// goroutine with kafka-go's Writer in synchronous mode; a failed batch is
// retried (only its failed records) until RetryFor has passed.
type kafkaWriter struct {
	cfg KafkaConfig
	log *slog.Logger
	tr  *kafka.Transport
	kw  *kafka.Writer

	free   chan *batch   // batches not in use; MaxBatches in all
	kick   chan struct{} // wakes the sender
	failed chan struct{} // closed when the writer gives up
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}

	// failing is the error of the latest failed write attempt, nil once an
	// attempt succeeds: what readiness reports while batches are retried.
	failing atomic.Pointer[string]

	mu struct {
		sync.Mutex
		cur     *batch   // filling; owned by add, sealed by add or the sender
		queue   []*batch // sealed, not yet sent
		seq     uint64   // sequence number of the last sealed batch
		done    uint64   // every batch up to this one is acknowledged
		err     error    // sticky: set once the writer has given up
		changed chan struct{}
		closing bool
	}
}

func newKafkaWriter(cfg KafkaConfig) (*kafkaWriter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	acks := kafka.RequireAll
	if cfg.RequiredAcks == "leader" {
		acks = kafka.RequireOne
	}
	tr := &kafka.Transport{DialTimeout: 5 * time.Second, ClientID: "denoiser"}
	ctx, cancel := context.WithCancel(context.Background())
	w := &kafkaWriter{
		cfg: cfg,
		log: cfg.Logger.With("topic", cfg.Topic),
		tr:  tr,
		kw: &kafka.Writer{
			Addr:      kafka.TCP(cfg.Brokers...),
			Topic:     cfg.Topic,
			Balancer:  kafka.Murmur2Balancer{},
			Transport: &metadataCache{next: tr, now: time.Now},
			// One WriteMessages call gets one batch: a partition that
			// receives all of it sends at once; the others after 1 ms.
			BatchSize:       cfg.BatchSize,
			BatchTimeout:    time.Millisecond,
			MaxAttempts:     3,
			WriteBackoffMin: 20 * time.Millisecond,
			WriteBackoffMax: 200 * time.Millisecond,
			WriteTimeout:    cfg.WriteTimeout,
			ReadTimeout:     cfg.WriteTimeout,
			RequiredAcks:    acks,
			Compression:     compressions[cfg.Compression],
		},
		free:   make(chan *batch, cfg.MaxBatches),
		kick:   make(chan struct{}, 1),
		failed: make(chan struct{}),
		closed: make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
	w.mu.changed = make(chan struct{})
	for range cfg.MaxBatches {
		w.free <- &batch{
			msgs:    make([]kafka.Message, 0, cfg.BatchSize),
			headers: make([]kafka.Header, cfg.BatchSize*maxHeaders),
		}
	}
	w.wg.Add(1)
	go w.send()
	return w, nil
}

// add appends one record, built by fill, to the filling batch.
func (w *kafkaWriter) add(ctx context.Context, fill func(*batch, *kafka.Message)) error {
	w.mu.Lock()
	if err := w.usableLocked(); err != nil {
		w.mu.Unlock()
		return err
	}
	if w.mu.cur == nil {
		w.mu.Unlock()
		var b *batch
		select {
		case b = <-w.free:
		case <-w.failed:
			return w.stickyErr()
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
		if err := w.usableLocked(); err != nil {
			w.mu.Unlock()
			w.free <- b
			return err
		}
		b.reset()
		b.started = time.Now()
		w.mu.cur = b
		w.wake() // the sender arms the batch timeout
	}
	b := w.mu.cur
	i := len(b.msgs)
	b.msgs = append(b.msgs, kafka.Message{Headers: b.headers[i*maxHeaders : i*maxHeaders : (i+1)*maxHeaders]})
	fill(b, &b.msgs[i])
	if len(b.msgs) >= w.cfg.BatchSize {
		w.sealLocked()
	}
	w.mu.Unlock()
	return nil
}

func (w *kafkaWriter) usableLocked() error {
	if w.mu.err != nil {
		return w.mu.err
	}
	if w.mu.closing {
		return ErrWriterClosed
	}
	return nil
}

func (w *kafkaWriter) stickyErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.err
}

// sealLocked moves the filling batch to the send queue.
func (w *kafkaWriter) sealLocked() {
	b := w.mu.cur
	if b == nil {
		return
	}
	w.mu.cur = nil
	w.mu.seq++
	b.seq = w.mu.seq
	w.mu.queue = append(w.mu.queue, b)
	w.wake()
}

func (w *kafkaWriter) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// send runs on the writer's goroutine: it seals batches that waited
// BatchTimeout and writes sealed batches in order.
func (w *kafkaWriter) send() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		w.mu.Lock()
		if b := w.mu.cur; b != nil && time.Since(b.started) >= w.cfg.BatchTimeout {
			w.sealLocked()
		}
		queue := w.mu.queue
		w.mu.queue = nil
		wait := time.Duration(-1)
		if b := w.mu.cur; b != nil {
			wait = w.cfg.BatchTimeout - time.Since(b.started)
		}
		w.mu.Unlock()

		for _, b := range queue {
			w.write(b)
		}
		if len(queue) > 0 {
			continue
		}
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-w.kick:
		case <-timer.C:
		case <-w.ctx.Done():
			return
		}
		timer.Stop()
	}
}

// writeError is a failed batch's error as logged: the count of records
// that failed and the first one's error, where kafka-go's WriteErrors
// writes every record's (a line of 80 KB for a batch of 1,000 while a
// broker was down). Unwrap gives kafka-go's error.
type writeError struct {
	err error
	msg string
}

func (e writeError) Error() string { return e.msg }
func (e writeError) Unwrap() error { return e.err }

// summarizeWrite is err with a message that names a batch's failed
// records by count and the first one's error (writeError); any other
// error as it is.
func summarizeWrite(err error) error {
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) {
		return err
	}
	var first error
	n := 0
	for _, e := range werrs {
		if e != nil {
			n++
			if first == nil {
				first = e
			}
		}
	}
	return writeError{err: err, msg: fmt.Sprintf("%d of %d records failed, the first with: %v", n, len(werrs), first)}
}

// failingNow returns the latest failed attempt's topic and error, "" when
// the latest attempt succeeded (or none failed).
func (w *kafkaWriter) failingNow() string {
	if p := w.failing.Load(); p != nil {
		return *p
	}
	return ""
}

// write sends one batch, retrying its failed records until RetryFor has
// passed, then marks it done (or the writer failed) and frees it.
func (w *kafkaWriter) write(b *batch) {
	defer func() { w.free <- b }()
	if w.stickyErr() != nil {
		w.finish(b.seq, nil) // discarded: the writer already failed and said so
		return
	}
	msgs := b.msgs
	start := time.Now()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := w.kw.WriteMessages(w.ctx, msgs...)
		if err == nil {
			w.failing.Store(nil)
			if w.cfg.OnDelivered != nil {
				w.cfg.OnDelivered(len(b.msgs))
			}
			if attempt > 1 {
				w.log.Info("write succeeded after retries", "attempts", attempt, "records", len(b.msgs))
			}
			w.finish(b.seq, nil)
			return
		}
		var werrs kafka.WriteErrors
		if errors.As(err, &werrs) && len(werrs) == len(msgs) {
			var failed []kafka.Message
			for i, e := range werrs {
				if e != nil {
					failed = append(failed, msgs[i])
				}
			}
			if len(failed) > 0 {
				msgs = failed // the others are written: retry only these, in order
			}
		}
		var tooLarge kafka.MessageTooLargeError
		permanent := errors.As(err, &tooLarge)
		if w.ctx.Err() != nil {
			w.finish(b.seq, fmt.Errorf("%w: %d records of %s not written", ErrWriterClosed, len(msgs), w.cfg.Topic))
			return
		}
		missing := ""
		if errors.Is(err, kafka.UnknownTopicOrPartition) {
			missing = "; the topic " + w.cfg.Topic + " does not exist on the brokers: create it (denoiser topics creates the missing ones; docs/operations.md, \"Try it\")"
		}
		err = summarizeWrite(err)
		elapsed := time.Since(start)
		if permanent || elapsed >= w.cfg.RetryFor {
			w.finish(b.seq, fmt.Errorf("%w: write %d records to %s (attempt %d, %v): %w%s",
				ErrWriterFailed, len(msgs), w.cfg.Topic, attempt, elapsed.Round(time.Millisecond), err, missing))
			return
		}
		// The last wait ends at RetryFor, with an attempt then: a batch is
		// retried for all of RetryFor (it gave up at 3.1 s of 5 s when a
		// wait that would pass RetryFor ended the retries).
		wait := min(backoff, w.cfg.RetryFor-elapsed)
		why := fmt.Sprintf("%s: %v%s", w.cfg.Topic, err, missing)
		w.failing.Store(&why)
		w.log.Warn("write failed, retrying"+missing, "err", err, "attempt", attempt, "records", len(msgs), "retry_in", wait)
		select {
		case <-time.After(wait):
		case <-w.ctx.Done():
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// finish records that batch seq is done; err, if set, fails the writer.
func (w *kafkaWriter) finish(seq uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && w.mu.err == nil {
		w.mu.err = err
		close(w.failed)
		if errors.Is(err, ErrWriterFailed) {
			w.log.Error("kafka writer gave up; no more records are accepted", "err", err)
		}
	}
	w.mu.done = seq
	close(w.mu.changed)
	w.mu.changed = make(chan struct{})
}

// flush seals the filling batch and waits until every sealed batch is
// done.
func (w *kafkaWriter) flush(ctx context.Context) error {
	w.mu.Lock()
	w.sealLocked()
	target := w.mu.seq
	for {
		if w.mu.err != nil {
			err := w.mu.err
			w.mu.Unlock()
			return err
		}
		if w.mu.done >= target {
			w.mu.Unlock()
			return nil
		}
		ch := w.mu.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("flush %s: %w", w.cfg.Topic, ctx.Err())
		}
		w.mu.Lock()
	}
}

// close flushes (unless the writer failed), stops the sender and closes
// kafka-go's writer, waiting at most until ctx is done.
func (w *kafkaWriter) close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		err := w.flush(ctx)
		if errors.Is(err, ErrWriterFailed) || errors.Is(err, ErrWriterClosed) {
			err = nil // reported by Write or Flush already
		}
		w.mu.Lock()
		w.mu.closing = true
		w.mu.Unlock()
		w.cancel()
		go func() {
			defer close(w.closed)
			w.wg.Wait()
			w.kw.Close()
			w.tr.CloseIdleConnections()
		}()
		w.closeErr = err
	})
	select {
	case <-w.closed:
		return w.closeErr
	case <-ctx.Done():
		return errors.Join(w.closeErr, fmt.Errorf("close %s: %w", w.cfg.Topic, ctx.Err()))
	}
}
