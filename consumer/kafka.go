package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"denoiser/consumer/input"
)

// Where a partition with no known position starts.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// ErrSourceClosed is returned by Next after Close.
var ErrSourceClosed = errors.New("source closed")

// ErrNotJoined is returned by Next when the source could not join the
// consumer group within StartupTimeout, or when the broker refuses the
// session timeout; the message says why.
var ErrNotJoined = errors.New("could not join the consumer group")

// joinBackoff is the wait between two failed attempts to reach the brokers
// and join the group: kafka-go's (JoinGroupBackoff), which it sleeps after
// handing Next a failure. Next is called again at once: an extra wait here
// (doubling up to 30 s, until stop 60) held kafka-go's next result,
// failed while the broker was still down, until it ended, so a member came
// back up to a minute after its broker, its partitions assigned and
// unread (an operator's trial). The warnings are thinned instead.
const joinBackoff = time.Second

// KafkaConfig configures a KafkaSource. Zero values mean the default written
// in each field's comment; WithDefaults applies them.
//
// The yaml tags are the keys of the settings in the kafka section of
// `denoiser run`'s configuration, which embeds this struct (package
// service). Fields tagged "-" are not settings there: the service sets
// them itself.
type KafkaConfig struct {
	// Brokers are the bootstrap addresses, host:port (required).
	Brokers []string `yaml:"-"`
	// Topic is the input topic (required).
	Topic string `yaml:"-"`
	// Group is the consumer group id (required).
	Group string `yaml:"-"`
	// Start is where a partition starts that has neither a position in
	// Positions nor a committed group offset: "earliest" (default) or
	// "latest".
	Start string `yaml:"start"`
	// Positions are the next offsets to read, per partition, of the
	// checkpoint the model was restored from (Offset is the NEXT offset).
	// On assignment a partition starts there, unless the group's committed
	// offset is later: then another member has processed the records in
	// between since the checkpoint, and the committed offset wins.
	Positions []input.Position `yaml:"-"`
	// FetchMaxBytes bounds one fetch response (default 1048576: 1 MiB).
	FetchMaxBytes int `yaml:"fetch_max_bytes"`
	// FetchMaxWait is how long the broker holds a fetch when there is no new
	// data (default 250ms).
	FetchMaxWait time.Duration `yaml:"fetch_max_wait"`
	// Buffer is the number of records fetched ahead of Next, across all
	// partitions (default 1024). With FetchMaxBytes it bounds memory.
	Buffer int `yaml:"fetch_buffer"`
	// SessionTimeout is the group session timeout: a member that stops
	// heartbeating is removed after it (default 10s; the broker's
	// group.min.session.timeout.ms, 6s by default, is the floor).
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// HeartbeatInterval is the period of group heartbeats (default 1s).
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// RebalanceTimeout is how long the coordinator waits for members to
	// rejoin in a rebalance (default 10s).
	RebalanceTimeout time.Duration `yaml:"rebalance_timeout"`
	// RequestTimeout bounds every group request (join, sync, heartbeat,
	// commit, leave) and every dial (default 5s).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// StartupTimeout, if positive, is how long the source may take to
	// reach the brokers and join the group the first time; then Next
	// returns ErrNotJoined (default 0: it keeps trying, with waits that
	// double up to 30s).
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	// RetryBackoff is the longest wait between two failed fetches of a
	// partition; waits start at 50 ms and double (default 2s).
	RetryBackoff time.Duration `yaml:"-"`
	// Logger receives the source's log lines (default: discard).
	Logger *slog.Logger `yaml:"-"`
	// Handover, if set, is called when the group takes the partitions away
	// (a rebalance), on the model goroutine, once every record of theirs
	// that Next returned has been processed (a barrier: Message.Task). It
	// should flush the output, checkpoint and Commit, so that the next
	// owner starts where this member's output ends. The group waits for
	// it up to HandoverTimeout.
	Handover func(ctx context.Context, out Flusher) error `yaml:"-"`
	// Emitted, if set, is asked on each assignment which records at or
	// after each partition's start offset already have output (a previous
	// owner emitted them, then crashed before it committed). Next marks
	// them Message.Emitted: the model learns from them, the output does
	// not get them again. It returns the offsets per partition; an error
	// or a partial answer only costs duplicates. It has scanTimeout: 30 s,
	// or HandoverTimeout if longer.
	Emitted func(ctx context.Context, from map[int]int64) (map[int]map[int64]bool, error) `yaml:"-"`
	// Restore, if set, is called on each assignment before any record of
	// the generation is fetched, on the model goroutine (a barrier), with
	// the generation's id and the assigned partitions. It brings the
	// model's state of those partitions up to date (from wherever another
	// member saved it) and returns the next offset of each partition
	// whose state it replaced, which replaces this member's own position;
	// the committed offset still fences it (startOffset). An error keeps
	// this member's positions. It has RestoreTimeout.
	Restore func(ctx context.Context, generation int32, partitions []int) (map[int]int64, error) `yaml:"-"`
	// RestoreTimeout bounds Restore (default 5m): a large model restored
	// from Kafka takes a while, and the generation's records wait for it.
	RestoreTimeout time.Duration `yaml:"-"`
}

// HandoverTimeout is how long a rebalance waits for Handover: three
// quarters of the shorter of RebalanceTimeout (the time the coordinator
// gives members to rejoin) and SessionTimeout (kafka-go stops heartbeating
// once the generation ends), so that a slow handover costs duplicates
// rather than the membership.
func (c KafkaConfig) HandoverTimeout() time.Duration {
	d := c.WithDefaults()
	return min(d.RebalanceTimeout, d.SessionTimeout) * 3 / 4
}

// WithDefaults returns c with every zero field that has a default set to
// it; the required fields stay as they are.
func (c KafkaConfig) WithDefaults() KafkaConfig {
	if c.Start == "" {
		c.Start = StartEarliest
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = 1 << 20
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = 250 * time.Millisecond
	}
	if c.Buffer == 0 {
		c.Buffer = 1024
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = 10 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 2 * time.Second
	}
	if c.RestoreTimeout == 0 {
		c.RestoreTimeout = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first field that is unusable, naming the field.
func (c KafkaConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0 || slices.Contains(c.Brokers, ""):
		return errors.New("kafka source: Brokers: at least one host:port is required")
	case c.Topic == "":
		return errors.New("kafka source: Topic is required")
	case c.Group == "":
		return errors.New("kafka source: Group is required")
	case c.Start != "" && c.Start != StartEarliest && c.Start != StartLatest:
		return fmt.Errorf("kafka source: Start = %q: want %q or %q", c.Start, StartEarliest, StartLatest)
	case c.FetchMaxBytes < 0, c.Buffer < 0:
		return errors.New("kafka source: FetchMaxBytes and Buffer must not be negative")
	case c.FetchMaxWait < 0, c.SessionTimeout < 0, c.HeartbeatInterval < 0, c.RebalanceTimeout < 0,
		c.RequestTimeout < 0, c.RetryBackoff < 0, c.StartupTimeout < 0, c.RestoreTimeout < 0:
		return errors.New("kafka source: durations must not be negative")
	}
	d := c.WithDefaults()
	if d.HeartbeatInterval >= d.SessionTimeout {
		return fmt.Errorf("kafka source: HeartbeatInterval %v must be shorter than SessionTimeout %v", d.HeartbeatInterval, d.SessionTimeout)
	}
	return nil
}

// KafkaSource is a Source that reads one topic as a member of a consumer
// group (kafka-go's ConsumerGroup, with explicit generations). On each
// assignment every partition starts at the later of the position the model
// has reached (Positions, then what Next has returned since) and the
// committed group offset, then at Start. When a rebalance takes the
// partitions away, Handover runs on the model loop before the group
// rejoins (a barrier message), so that the committed offsets are where the
// output ends. One fetcher goroutine per assigned partition feeds a bounded
// channel that Next reads.
//
// Records of a partition come out of Next in offset order and at most once
// per KafkaSource, even across rebalances that take a partition away and
// give it back.
//
// StopFetching ends the input: Next returns the records already fetched,
// then io.EOF, while the group membership stays alive so that Commit still
// works. Close leaves the group.
type KafkaSource struct {
	cfg    KafkaConfig
	log    *slog.Logger
	tr     *kafka.Transport
	client *kafka.Client
	group  *kafka.ConsumerGroup

	recs    chan fetched
	peeked  fetched // a live record Ready took from recs, which Next returns first (hasPeek); the reader's only
	hasPeek bool
	stop    chan struct{} // closed by StopFetching
	drained chan struct{} // closed once stopped and no fetcher can send any more
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the group loop and commits

	failed  chan struct{} // closed when failErr is set: the source cannot go on
	failErr error

	closeOnce sync.Once
	closed    chan struct{} // closed when Close has finished
	closeErr  error

	mu struct {
		sync.Mutex
		next      map[int]int64          // next offset per partition, as returned by Next (the model's view)
		start     map[int]int64          // where each partition started in the live generation
		emitted   map[int]map[int64]bool // offsets with output already (cfg.Emitted), per partition
		hwm       map[int]int64          // high watermark per partition, from the last fetch
		gen       *kafka.Generation
		assigned  []int
		stopping  bool
		fetching  int // fetchers that may still send
		generated int // generations joined
		live      int // the generation whose records Next returns (s.mu.generated), 0 during a handover
		// outOfGroup is the error of the latest failed attempt to join,
		// nil once a join succeeds (OutOfGroup).
		outOfGroup error
	}
}

// arena hands out the byte slices that a fetch's record values are copied
// into, carved from blocks: one allocation per block rather than one per
// record. A fetch's first block has arenaFirst bytes and each next one
// twice as many, up to arenaBlock, so that a fetch of a record or two
// allocates little. A block is freed once no value in it is referenced:
// the loop copies each value as it reads it.
type arena struct {
	block []byte
	size  int // of the last block
}

const (
	arenaFirst = 2 << 10
	arenaBlock = 64 << 10
)

// next returns a slice of n bytes that no other slice of the arena shares.
func (a *arena) next(n int) []byte {
	if n > arenaBlock/4 {
		return make([]byte, n)
	}
	if n > cap(a.block)-len(a.block) {
		a.size = min(max(2*a.size, arenaFirst), arenaBlock)
		a.block = make([]byte, 0, max(a.size, n))
	}
	v := a.block[len(a.block) : len(a.block)+n : len(a.block)+n]
	a.block = a.block[:len(a.block)+n]
	return v
}

// fetched is one record on its way from a fetcher to Next.
type fetched struct {
	partition int
	offset    int64
	value     []byte
	null      bool                                 // the record has no value: a tombstone
	gen       int                                  // the generation (s.mu.generated) that fetched it
	task      func(context.Context, Flusher) error // a handover barrier instead of a record
}

// PartitionLag is the state of one assigned partition.
type PartitionLag struct {
	Topic     string
	Partition int
	// Next is the next offset Next will return.
	Next int64
	// HighWatermark is the partition's end, from the last fetch (-1 before
	// the first), or from the broker's offsets every second while the
	// fetcher waits for the model.
	HighWatermark int64
}

// Lag is HighWatermark - Next, or -1 when the end is not known yet.
func (p PartitionLag) Lag() int64 {
	if p.HighWatermark < 0 {
		return -1
	}
	return max(p.HighWatermark-p.Next, 0)
}

// NewKafkaSource joins the group in the background and starts fetching as
// soon as partitions are assigned. It does not wait for the broker.
func NewKafkaSource(cfg KafkaConfig) (*KafkaSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	log := cfg.Logger.With("topic", cfg.Topic, "group", cfg.Group)
	tr := &kafka.Transport{DialTimeout: cfg.RequestTimeout, ClientID: "denoiser"}
	dialer := &kafka.Dialer{Timeout: cfg.RequestTimeout, DualStack: true, ClientID: "denoiser"}
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                cfg.Group,
		Brokers:           cfg.Brokers,
		Dialer:            dialer,
		Topics:            []string{cfg.Topic},
		HeartbeatInterval: cfg.HeartbeatInterval,
		SessionTimeout:    cfg.SessionTimeout,
		RebalanceTimeout:  cfg.RebalanceTimeout,
		JoinGroupBackoff:  joinBackoff,
		// Partitions added to the topic trigger a rebalance.
		WatchPartitionChanges:  true,
		PartitionWatchInterval: partitionWatch,
		Timeout:                cfg.RequestTimeout,
		StartOffset:            kafka.FirstOffset, // replaced by Start where no offset is committed
		// The group's own lines are at Debug: what matters is logged here.
		Logger:      kafka.LoggerFunc(func(f string, a ...any) { log.Debug("group: " + strings.TrimSpace(fmt.Sprintf(f, a...))) }),
		ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) { log.Debug("group error: " + strings.TrimSpace(fmt.Sprintf(f, a...))) }),
	})
	if err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &KafkaSource{
		cfg:     cfg,
		log:     log,
		tr:      tr,
		client:  &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: cfg.RequestTimeout},
		group:   group,
		recs:    make(chan fetched, cfg.Buffer),
		stop:    make(chan struct{}),
		drained: make(chan struct{}),
		closed:  make(chan struct{}),
		failed:  make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
	s.mu.next = map[int]int64{}
	s.mu.start = map[int]int64{}
	s.mu.emitted = map[int]map[int64]bool{}
	s.mu.hwm = map[int]int64{}
	for _, p := range cfg.Positions {
		if p.Topic == cfg.Topic && p.Partition >= 0 && p.Offset >= 0 {
			s.mu.next[int(p.Partition)] = p.Offset
		}
	}
	s.wg.Add(1)
	go s.run()
	return s, nil
}

// run follows the group's generations until Close. A failed join is
// retried by kafka-go joinBackoff after Next returns it; Next is called
// again at once, and the warnings thin out (attempts 1, 2, 4, ...).
func (s *KafkaSource) run() {
	defer s.wg.Done()
	joinCtx, cancel := s.ctx, context.CancelFunc(func() {})
	if s.cfg.StartupTimeout > 0 {
		joinCtx, cancel = context.WithTimeout(s.ctx, s.cfg.StartupTimeout)
	}
	defer func() { cancel() }()
	var lastErr error
	for attempt := 1; ; attempt++ {
		gen, err := s.group.Next(joinCtx)
		if s.ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
			return
		}
		if err != nil && joinCtx.Err() != nil {
			s.fail(fmt.Errorf("%w within kafka.startup_timeout (%v) from %s: %v", ErrNotJoined, s.cfg.StartupTimeout, strings.Join(s.cfg.Brokers, ","), lastErr))
			return
		}
		if errors.Is(err, kafka.InvalidSessionTimeout) {
			s.fail(fmt.Errorf("%w: the broker refuses kafka.session_timeout %v: it must lie within the broker's group.min.session.timeout.ms and group.max.session.timeout.ms (6s and 30m by default); set it to at least 6s, such as 10s", ErrNotJoined, s.cfg.SessionTimeout))
			return
		}
		if errors.Is(err, kafka.RebalanceInProgress) {
			s.log.Debug("consumer group: rebalance in progress", "err", err)
			continue
		}
		if err != nil {
			err = ExplainBrokerError(err)
			lastErr = err
			s.mu.Lock()
			s.mu.outOfGroup = err
			s.mu.Unlock()
			// Warned at attempts 1, 2, 4, 8, ...: an outage of an hour
			// logs a dozen lines, not 3,600.
			level := slog.LevelDebug
			if attempt&(attempt-1) == 0 {
				level = slog.LevelWarn
			}
			s.log.Log(s.ctx, level, "consumer group: cannot reach the brokers or join the group; retrying", "err", err, "attempt", attempt, "retry_in", joinBackoff)
			continue
		}
		if attempt > 1 {
			s.log.Info("consumer group: joined", "attempts", attempt)
		}
		attempt = 0
		cancel() // the startup timeout is for the first join only
		joinCtx, cancel = s.ctx, func() {}
		var parts []int
		for _, pa := range gen.Assignments[s.cfg.Topic] {
			parts = append(parts, pa.ID)
		}
		slices.Sort(parts)
		s.mu.Lock()
		s.mu.gen, s.mu.assigned = gen, parts
		s.mu.outOfGroup = nil
		s.mu.generated++
		seq := s.mu.generated
		s.mu.live = seq
		clear(s.mu.start)
		s.mu.Unlock()
		s.log.Info("partitions assigned", "generation", gen.ID, "member", gen.MemberID, "partitions", parts)
		if len(parts) == 0 {
			gen.Start(s.watchUnassigned)
		}
		// The restore, the start offsets and the tail scan run on the
		// generation, not in this loop: a slow restore or scan delays
		// this member's fetching, never its next join, and the end of the
		// generation cancels them. The fetchers wait for them.
		committed := map[int]int64{}
		for _, pa := range gen.Assignments[s.cfg.Topic] {
			committed[pa.ID] = pa.Offset
		}
		starts := map[int]int64{}
		froms := map[int]string{}
		ready := make(chan struct{})
		var fetchers sync.WaitGroup
		for _, p := range parts {
			fetchers.Add(1)
			gen.Start(func(ctx context.Context) {
				defer fetchers.Done()
				select {
				case <-ready:
				case <-ctx.Done():
					return
				}
				s.fetch(ctx, seq, p, starts[p], froms[p])
			})
		}
		gen.Start(func(ctx context.Context) {
			s.restore(ctx, seq, gen.ID, parts)
			for p, off := range committed {
				starts[p], froms[p] = s.startOffset(p, off)
			}
			// The fence holds from here, through the tail scan, not only
			// once a fetcher starts: a checkpoint committed during the
			// scan must not move a partition back. A start that fetch has
			// yet to resolve (earliest, latest) has nothing of this
			// member's to commit. Until here Commit skips these
			// partitions: nothing of theirs was processed in this
			// generation.
			s.mu.Lock()
			if s.mu.live == seq {
				for p, off := range starts {
					if off >= 0 {
						s.mu.start[p] = off
					}
				}
			}
			s.mu.Unlock()
			s.findEmitted(ctx, seq, starts)
			close(ready)
			s.handover(ctx, seq, gen.ID, parts, &fetchers)
		})
	}
}

// restore runs cfg.Restore for generation seq as a barrier on the model
// loop and, for the partitions whose state it replaced, makes the offset
// it returns this member's position. It gives up when the generation
// ends or after RestoreTimeout; once the model loop has begun Restore it
// waits for it (Restore stops when its context ends), so that the
// positions always match the state the model holds.
func (s *KafkaSource) restore(genCtx context.Context, seq int, genID int32, parts []int) {
	if s.cfg.Restore == nil || len(parts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(genCtx, s.cfg.RestoreTimeout)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	type answer struct {
		next map[int]int64
		err  error
	}
	done := make(chan answer, 1)
	var claim atomic.Int32 // 1: the loop began Restore; 2: this side gave up first
	barrier := fetched{task: func(loopCtx context.Context, _ Flusher) error {
		if !claim.CompareAndSwap(0, 1) {
			return nil // too late: given up
		}
		loopCtx, stop := context.WithCancel(loopCtx)
		defer stop()
		defer context.AfterFunc(ctx, stop)()
		next, err := s.cfg.Restore(loopCtx, genID, parts)
		done <- answer{next, err}
		return nil
	}}
	log := s.log.With("generation", genID, "partitions", parts)
	start := time.Now()
	select {
	case s.recs <- barrier:
	case <-ctx.Done():
		log.Warn("restore: the model loop did not take the barrier; this member's own state and positions stay", "err", ctx.Err())
		return
	case <-s.stop:
		return
	}
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		if claim.CompareAndSwap(0, 2) {
			log.Warn("restore: the model loop did not take the barrier in time; this member's own state and positions stay", "timeout", s.cfg.RestoreTimeout)
			return
		}
		a = <-done // begun: it stops now that ctx has ended
	}
	if a.err != nil {
		log.Warn("restore failed; for the partitions it did not restore, this member's own state and positions stay", "err", a.err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, off := range a.next {
		if slices.Contains(parts, p) {
			s.mu.next[p] = off
		}
	}
	log.Info("partition state restored", "restored", len(a.next), "duration", time.Since(start))
}

// scanTimeout bounds the tail scan of one generation. The scan holds back
// only this member's fetching (the generation's end cancels it, and the
// group's heartbeats go on meanwhile), so it may take longer than a
// handover: on a loaded machine the handover's bound (¾ of the shorter
// group timeout, 1.5 s with a 2 s session) was seen to cut the scan short,
// and what it had not settled was emitted twice.
func (c KafkaConfig) scanTimeout() time.Duration { return max(c.HandoverTimeout(), 30*time.Second) }

// findEmitted asks cfg.Emitted which records at or after the known start
// offsets already have output, and keeps the answer for Next. It runs on
// the generation genCtx and gives up when it ends or after scanTimeout.
func (s *KafkaSource) findEmitted(genCtx context.Context, seq int, starts map[int]int64) {
	from := map[int]int64{}
	for p, off := range starts {
		if off >= 0 { // Start (earliest, latest) has no position: nothing of ours was emitted
			from[p] = off
		}
	}
	s.mu.Lock()
	if s.mu.live != seq {
		s.mu.Unlock()
		return // the generation ended before the scan began
	}
	clear(s.mu.emitted)
	s.mu.Unlock()
	if s.cfg.Emitted == nil || len(from) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(genCtx, s.cfg.scanTimeout())
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)() // a stopping member stops scanning
	t := time.Now()
	s.dropIdle(ctx, from)
	if len(from) == 0 {
		return
	}
	found, err := s.cfg.Emitted(ctx, from)
	if err != nil && (genCtx.Err() != nil || s.ctx.Err() != nil) {
		return // the generation ended or the member stops: nothing will be fetched
	}
	if err != nil {
		s.log.Warn("cannot tell which records already have output; those after the committed offsets are emitted again", "err", err)
		return
	}
	n := 0
	s.mu.Lock()
	if s.mu.live != seq {
		s.mu.Unlock()
		return
	}
	for p, offs := range found {
		if len(offs) > 0 {
			s.mu.emitted[p] = offs
			n += len(offs)
		}
	}
	s.mu.Unlock()
	s.log.Info("records that already have output", "records", n, "duration", time.Since(t))
}

// dropIdle removes from from the partitions that hold no record at or
// after their start: nothing of theirs can have output to find, and the
// scan of an idle partition would read the output topics back as far as
// it may. On an error it keeps them all.
func (s *KafkaSource) dropIdle(ctx context.Context, from map[int]int64) {
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range from {
		req.Topics[s.cfg.Topic] = append(req.Topics[s.cfg.Topic], kafka.LastOffsetOf(p))
	}
	resp, err := s.client.ListOffsets(ctx, req)
	if err != nil {
		return
	}
	for _, po := range resp.Topics[s.cfg.Topic] {
		if start, ok := from[po.Partition]; ok && po.Error == nil && po.LastOffset <= start {
			delete(from, po.Partition)
		}
	}
}

// handover runs for the whole of generation seq and, when it ends (a
// rebalance takes every partition away: kafka-go's groups are eager),
// hands the partitions over before the group may rejoin: Next stops
// returning the generation's records (those fetched but not returned are
// dropped, unread: the next owner reads them), then a barrier goes through
// the model loop and calls cfg.Handover there. Without it the next owner
// would start at the last periodic commit and emit again what this member
// emitted since.
func (s *KafkaSource) handover(genCtx context.Context, seq int, genID int32, parts []int, fetchers *sync.WaitGroup) {
	<-genCtx.Done()
	s.mu.Lock()
	if s.mu.live == seq {
		s.mu.live = 0
	}
	stopping := s.mu.stopping
	s.mu.Unlock()
	fetchers.Wait()
	if len(parts) == 0 || s.cfg.Handover == nil || stopping || s.ctx.Err() != nil {
		return // a stopping member checkpoints and commits on its way out
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.HandoverTimeout())
	defer cancel()
	done := make(chan error, 1)
	barrier := fetched{task: func(loopCtx context.Context, out Flusher) error {
		if ctx.Err() != nil {
			return nil // too late: the group has moved on
		}
		deadline, _ := ctx.Deadline()
		loopCtx, cancel := context.WithDeadline(loopCtx, deadline)
		defer cancel()
		done <- s.cfg.Handover(loopCtx, out)
		return nil
	}}
	log := s.log.With("generation", genID, "partitions", parts)
	select {
	case s.recs <- barrier:
	case <-ctx.Done():
		log.Warn("handover: the model loop did not take the barrier in time; the next owners start at the last commit", "timeout", s.cfg.HandoverTimeout())
		return
	case <-s.stop:
		return
	}
	select {
	case err := <-done:
		if err != nil {
			log.Warn("handover failed; the next owners start at the last commit", "err", err)
			return
		}
		log.Info("partitions handed over", "duration", time.Since(start))
	case <-ctx.Done():
		log.Warn("handover: not done in time; the next owners start at the last commit", "timeout", s.cfg.HandoverTimeout())
	}
}

// fail makes Next return err: the source cannot go on.
func (s *KafkaSource) fail(err error) {
	s.log.Error("consumer group: giving up", "err", err)
	s.failErr = err
	close(s.failed)
}

// enter registers a fetcher that may send records; false once stopping.
func (s *KafkaSource) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.stopping {
		return false
	}
	s.mu.fetching++
	return true
}

func (s *KafkaSource) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.fetching--
	if s.mu.stopping && s.mu.fetching == 0 {
		close(s.drained)
	}
}

// startOffset is where partition p starts in a new generation: the later
// of where Next left it (or the checkpoint put it) and the committed offset
// (a negative committed value is kafka-go's "none"), else Start. The
// committed offset fences a member's own position: when it is later,
// another member has processed and emitted the records in between since
// this member last owned p (commits follow checkpoints and handovers), and
// starting earlier would emit them again, with other scores.
func (s *KafkaSource) startOffset(p int, committed int64) (int64, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, ok := s.mu.next[p]
	switch {
	case ok && next >= committed:
		return next, "checkpoint"
	case committed >= 0:
		if ok {
			// Next drops the records below it still buffered from before.
			s.mu.next[p] = committed
			return committed, "committed (later than this member's position " + strconv.FormatInt(next, 10) + ")"
		}
		return committed, "committed"
	case s.cfg.Start == StartLatest:
		return kafka.LastOffset, StartLatest
	default:
		return kafka.FirstOffset, StartEarliest
	}
}

// fetch reads partition p until the generation ends (ctx), sending its
// records to s.recs. Once stopping it sends no more but only returns when
// the generation ends: returning would end the generation early.
func (s *KafkaSource) fetch(genCtx context.Context, seq, p int, off int64, from string) {
	defer func() { <-genCtx.Done() }()
	ctx := genCtx
	if !s.enter() {
		return
	}
	defer s.leave()

	// Stopping cancels a fetch in flight, without ending the generation.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()

	log := s.log.With("partition", p)
	wait := time.Duration(0)
	retry := func(msg string, err error) bool {
		wait = min(max(2*wait, 50*time.Millisecond), s.cfg.RetryBackoff)
		if wait >= s.cfg.RetryBackoff {
			log.Warn(msg, "err", err, "retry_in", wait)
		} else {
			log.Debug(msg, "err", err, "retry_in", wait)
		}
		select {
		case <-time.After(wait):
			return true
		case <-ctx.Done():
		case <-s.stop:
		}
		return false
	}
	for off < 0 {
		resolved, err := s.resolve(ctx, p, off)
		if err == nil {
			off = resolved
			break
		}
		if !retry("resolve start offset", err) {
			return
		}
	}
	log.Info("fetching partition", "offset", off, "from", from)
	saidEmpty := false
	s.mu.Lock()
	if s.mu.live == seq {
		s.mu.start[p] = off
	}
	s.mu.Unlock()

	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		default:
		}
		resp, err := s.client.Fetch(ctx, &kafka.FetchRequest{
			Topic: s.cfg.Topic, Partition: p, Offset: off,
			MinBytes: 1, MaxBytes: int64(s.cfg.FetchMaxBytes), MaxWait: s.cfg.FetchMaxWait,
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !retry("fetch failed", err) {
				return
			}
			continue
		}
		if resp.Error != nil {
			if errors.Is(resp.Error, kafka.OffsetOutOfRange) {
				// The position is gone (retention) or beyond the end: the
				// records in between cannot be read by anyone. Apache Kafka
				// answers this error with -1 for the log's start and end
				// (kfake with both), so they are listed then: with -1 the
				// partition retried for ever, and stalled.
				first, last := resp.LogStartOffset, resp.HighWatermark
				if first < 0 || last < 0 {
					f, ferr := s.resolve(ctx, p, kafka.FirstOffset)
					l, lerr := s.resolve(ctx, p, kafka.LastOffset)
					if ferr == nil && lerr == nil {
						first, last = f, l
					}
				}
				next := first
				if off > last {
					next = last
				}
				log.Error("offset out of range: records were deleted before they were read, or the topic was recreated", "offset", off, "log_start", first, "high_watermark", last, "resume", next)
				if next >= 0 && next < off {
					// Next skips what lies below the partition's position
					// (staleLocked): the position moves back with the read.
					s.mu.Lock()
					if s.mu.live == seq {
						if n, ok := s.mu.next[p]; ok && n > next {
							s.mu.next[p] = next
						}
						s.mu.start[p] = next
					}
					s.mu.Unlock()
				}
				if next < 0 || next == off {
					if !retry("offset out of range", resp.Error) {
						return
					}
					continue
				}
				off = next
				continue
			}
			if !retry("fetch failed", resp.Error) {
				return
			}
			continue
		}
		wait = 0
		s.mu.Lock()
		s.mu.hwm[p] = resp.HighWatermark
		s.mu.Unlock()
		if resp.HighWatermark == 0 && !saidEmpty {
			// A partition never written to. Said once a fetcher: a
			// misspelt kafka.input_topic on a broker that creates topics
			// on first use (auto.create.topics.enable, scripts/kafka.sh's
			// too) gives a member that is ready and reads nothing.
			saidEmpty = true
			log.Info("the input partition has never held a record; waiting for records (if none come, check kafka.input_topic: a broker that creates topics on first use makes a misspelt one, empty)")
		}
		var values arena
		for {
			rec, err := resp.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				log.Warn("read fetched records", "err", err, "offset", off)
				break // fetched again from off
			}
			if rec.Offset < off {
				continue // a batch may start before the offset asked for
			}
			var v []byte
			if rec.Value != nil {
				v = values.next(rec.Value.Len())
				_, err = io.ReadFull(rec.Value, v)
				rec.Value.Close()
				if err != nil {
					log.Warn("read record value", "err", err, "offset", rec.Offset)
					break
				}
			}
			f := fetched{partition: p, offset: rec.Offset, value: v, null: rec.Value == nil, gen: seq}
			select {
			case s.recs <- f:
			default:
				if !s.send(ctx, p, f) {
					return
				}
			}
			off = rec.Offset + 1
		}
	}
}

// hwmRefresh is how often a fetcher waiting for room in the buffer (the
// model is behind) asks the broker for the high watermark, so that the lag
// keeps growing while the records wait rather than freezing at the last
// fetch.
const hwmRefresh = time.Second

// send waits until f has room in the buffer, refreshing the high
// watermark of p every hwmRefresh meanwhile. It returns false when the
// generation ends or fetching stops.
func (s *KafkaSource) send(ctx context.Context, p int, f fetched) bool {
	t := time.NewTimer(hwmRefresh)
	defer t.Stop()
	for {
		select {
		case s.recs <- f:
			return true
		case <-ctx.Done():
			return false
		case <-s.stop:
			return false
		case <-t.C:
			if h, err := s.resolve(ctx, p, kafka.LastOffset); err == nil {
				s.mu.Lock()
				s.mu.hwm[p] = max(s.mu.hwm[p], h)
				s.mu.Unlock()
			}
			t.Reset(hwmRefresh)
		}
	}
}

// resolve turns kafka.FirstOffset or kafka.LastOffset into an offset.
func (s *KafkaSource) resolve(ctx context.Context, p int, which int64) (int64, error) {
	resp, err := s.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		s.cfg.Topic: {{Partition: p, Timestamp: which}},
	}})
	if err != nil {
		return 0, err
	}
	for _, po := range resp.Topics[s.cfg.Topic] {
		if po.Partition != p {
			continue
		}
		if po.Error != nil {
			return 0, po.Error
		}
		if which == kafka.FirstOffset {
			return po.FirstOffset, nil
		}
		return po.LastOffset, nil
	}
	return 0, fmt.Errorf("list offsets: no answer for partition %d", p)
}

// Next returns the next record of any assigned partition. Records of one
// partition come in offset order. After StopFetching it returns the
// records already fetched, then io.EOF. Value is owned by the caller; it
// is carved from a block of its fetch's values (arena), which stays in
// memory while any of them is referenced.
func (s *KafkaSource) Next(ctx context.Context) (Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Message{}, err
		}
		var f fetched
		if s.hasPeek {
			f, s.peeked, s.hasPeek = s.peeked, fetched{}, false
		} else {
			select {
			case f = <-s.recs: // the common case: a record is waiting (a single-case select is the runtime's cheap path)
			default:
				var err error
				if f, err = s.wait(ctx); err != nil {
					return Message{}, err
				}
			}
		}
		if f.task != nil {
			return Message{Task: f.task}, nil
		}
		s.mu.Lock()
		if s.staleLocked(&f) {
			s.mu.Unlock()
			continue
		}
		s.mu.next[f.partition] = f.offset + 1
		emitted := s.mu.emitted[f.partition][f.offset]
		if emitted {
			delete(s.mu.emitted[f.partition], f.offset)
		}
		s.mu.Unlock()
		return Message{Pos: input.Position{Topic: s.cfg.Topic, Partition: int32(f.partition), Offset: f.offset}, Value: f.value, Null: f.null, Emitted: emitted}, nil
	}
}

// Ready reports whether Next has a record (or a barrier) to return
// without waiting. Records fetched in a generation that has ended, which
// Next would skip, do not count: Ready drops them. A generation that ends
// between Ready and Next can still make Next skip the record and wait.
func (s *KafkaSource) Ready() bool {
	for !s.hasPeek {
		select {
		case s.peeked = <-s.recs:
		default:
			return false
		}
		s.hasPeek = s.peeked.task != nil || !s.stale(&s.peeked)
	}
	return true
}

// stale reports whether Next skips record f (staleLocked).
func (s *KafkaSource) stale(f *fetched) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.staleLocked(f)
}

// staleLocked reports whether record f was fetched in a generation that
// has ended (the partition is being handed over), or fetched again after
// a rebalance gave its partition back while its older records were still
// buffered: Next skips it. s.mu is held.
func (s *KafkaSource) staleLocked(f *fetched) bool {
	next, ok := s.mu.next[f.partition]
	return f.gen != s.mu.live || ok && f.offset < next
}

// wait is Next's wait for a record when none is buffered: the next
// record, or why there is none (io.EOF once drained, ErrSourceClosed, the
// source's failure, ctx's error).
func (s *KafkaSource) wait(ctx context.Context) (fetched, error) {
	select {
	case f := <-s.recs:
		return f, nil
	case <-s.drained:
		select {
		case f := <-s.recs:
			return f, nil
		default:
			return fetched{}, io.EOF
		}
	case <-s.ctx.Done():
		return fetched{}, ErrSourceClosed
	case <-s.failed:
		return fetched{}, s.failErr
	case <-ctx.Done():
		return fetched{}, ctx.Err()
	}
}

// StopFetching stops reading from the broker. Next then returns what was
// already fetched and io.EOF. The group membership is kept until Close, so
// that the final positions can still be committed. It is idempotent.
func (s *KafkaSource) StopFetching() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.stopping {
		return
	}
	s.mu.stopping = true
	close(s.stop)
	if s.mu.fetching == 0 {
		close(s.drained)
	}
}

// Assignment returns the partitions of the current generation, and whether
// the source has joined the group at all.
func (s *KafkaSource) Assignment() (partitions []int, joined bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mu.assigned), s.mu.generated > 0
}

// partitionWatch is how often kafka-go reads the topic's partition count
// to rebalance when it changes, and how often a member given no partition
// checks that some member holds each (watchUnassigned).
const partitionWatch = 10 * time.Second

// watchUnassigned runs in a generation that gave this member no
// partition, and ends it (so that kafka-go joins again and the group's
// leader assigns anew) once the topic has partitions that no member of
// the stable group holds. A topic the broker creates on first use (its
// auto.create.topics.enable) is created by the join itself: the leader
// can assign from metadata read before the topic had partitions while
// kafka-go's partition watcher starts from metadata read after, sees no
// change and never rebalances. An operator's trial left a member ready
// with no partition and the topic unread in 3 of 5 starts. A member that
// has none because the group has more members than the topic partitions
// finds every partition held and stays.
func (s *KafkaSource) watchUnassigned(ctx context.Context) {
	t := time.NewTicker(partitionWatch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, held, err := s.coverage(ctx)
		switch {
		case err != nil:
			s.log.Debug("consumer group: cannot tell which partitions the group holds", "err", err)
		case held < n:
			s.log.Info("consumer group: the topic has partitions no member holds; joining again so that the group assigns them", "partitions", n, "held", held)
			return
		}
	}
}

// coverage returns the number of partitions of the topic and how many of
// them the members of the group hold, when the group is stable (held =
// n otherwise: a rebalance is under way and will assign them).
func (s *KafkaSource) coverage(ctx context.Context) (n, held int, err error) {
	md, err := s.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.cfg.Topic}})
	if err != nil {
		return 0, 0, err
	}
	for _, t := range md.Topics {
		if t.Name == s.cfg.Topic && t.Error == nil {
			n = len(t.Partitions)
		}
	}
	if n == 0 {
		return 0, 0, nil
	}
	resp, err := s.client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{s.cfg.Group}})
	if err != nil {
		return 0, 0, err
	}
	held = n
	for _, g := range resp.Groups {
		if g.Error != nil {
			return 0, 0, g.Error
		}
		if g.GroupID != s.cfg.Group || g.GroupState != "Stable" {
			continue
		}
		seen := map[int]bool{}
		for _, m := range g.Members {
			for _, a := range m.MemberAssignments.Topics {
				if a.Topic == s.cfg.Topic {
					for _, p := range a.Partitions {
						seen[p] = true
					}
				}
			}
		}
		held = len(seen)
	}
	return n, held, nil
}

// OutOfGroup returns why the source is out of the consumer group: the
// error of its latest failed attempt to join, since its last generation
// ended (a broker outage, a group it cannot rejoin); nil while it is in a
// generation, and before its first attempt has failed.
func (s *KafkaSource) OutOfGroup() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.outOfGroup
}

// Lag returns the state of every assigned partition.
func (s *KafkaSource) Lag() []PartitionLag {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PartitionLag, 0, len(s.mu.assigned))
	for _, p := range s.mu.assigned {
		l := PartitionLag{Topic: s.cfg.Topic, Partition: p, Next: -1, HighWatermark: -1}
		if n, ok := s.mu.next[p]; ok {
			l.Next = n
		}
		if h, ok := s.mu.hwm[p]; ok {
			l.HighWatermark = h
			if l.Next < 0 {
				l.Next = h // nothing returned yet: unknown start; report no lag rather than all of it
			}
		}
		out = append(out, l)
	}
	return out
}

// Commit commits next offsets to the group, for the partitions of this
// topic that the current generation assigns to this member; the others are
// skipped. Commits are for monitoring (lag) and for members that have no
// checkpoint of a partition; the checkpoint, not the commit, is where a
// restarted member resumes. It returns when the coordinator answered,
// RequestTimeout passed or ctx is done.
func (s *KafkaSource) Commit(ctx context.Context, positions []input.Position) error {
	s.mu.Lock()
	gen, assigned := s.mu.gen, s.mu.assigned
	offsets := map[int]int64{}
	for _, p := range positions {
		start, started := s.mu.start[int(p.Partition)]
		// A position before where the partition started in this
		// generation is stale (the committed offset fenced it): committing
		// it would move the group back. A partition with no start yet has
		// had nothing processed in this generation.
		if p.Topic == s.cfg.Topic && slices.Contains(assigned, int(p.Partition)) && started && p.Offset >= start {
			offsets[int(p.Partition)] = p.Offset
		}
	}
	s.mu.Unlock()
	if gen == nil {
		return nil
	}
	if len(offsets) == 0 {
		return nil
	}
	done := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		done <- gen.CommitOffsets(map[string]map[int]int64{s.cfg.Topic: offsets})
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("commit offsets (generation %d): %w", gen.ID, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("commit offsets: %w", ctx.Err())
	}
}

// Close leaves the group and stops every goroutine. It waits until they
// have stopped or ctx is done, whichever comes first; in the latter case
// they stop on their own within RequestTimeout (and the dial timeout) and
// Close returns ctx's error. It is idempotent.
func (s *KafkaSource) Close(ctx context.Context) error {
	s.StopFetching()
	s.closeOnce.Do(func() {
		go func() {
			defer close(s.closed)
			s.cancel()
			err := s.group.Close() // ends the generation (fetchers return), leaves the group
			s.wg.Wait()
			s.tr.CloseIdleConnections()
			if err != nil {
				s.closeErr = fmt.Errorf("close kafka source: %w", err)
			}
		}()
	})
	select {
	case <-s.closed:
	case <-ctx.Done():
		return fmt.Errorf("close kafka source: %w", ctx.Err())
	}
	return s.closeErr
}

// ExplainBrokerError adds to an error whose connection ended without an
// answer (io.EOF, io.ErrUnexpectedEOF) what most often causes it: an
// address that is not a broker's plain-text client listener. Kafka's
// KRaft controller listener, and a listener that expects TLS or SASL,
// close a client's connection so; the bare "EOF" said nothing of it.
// Other errors are returned as they are.
func ExplainBrokerError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w (the broker closed the connection without an answer: is the address a broker's plain-text listener for clients? A KRaft controller's listener, or one that expects TLS or SASL, closes it so)", err)
	}
	return err
}
