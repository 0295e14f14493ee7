package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/producer"
	"denoiser/state"
)

// Errors.
var (
	// ErrNotRunning is returned by Submit when the model loop is not
	// running (it has stopped, or Run was never called).
	ErrNotRunning = errors.New("service: model loop not running")
	// ErrStarted is returned by a second call to Run.
	ErrStarted = errors.New("service: already started")
	// ErrShutdownTimeout is returned by Run when a graceful stop did not
	// finish within Config.ShutdownTimeout; what was left was abandoned
	// (the output of the records after the last checkpoint is re-emitted
	// on restart).
	ErrShutdownTimeout = errors.New("service: shutdown timeout")
)

// Task runs on the model goroutine between two records; see
// consumer.Options.Tasks.
type Task = func(ctx context.Context, out consumer.Flusher) error

// Initial supplies the model and positions to start from when the state
// directory holds no checkpoint (for example from a snapshot file). A nil
// model means: start a new one from the configuration.
type Initial func(ctx context.Context) (*online.Model, []input.Position, error)

// Options are the service's dependencies.
type Options struct {
	// Logger receives the log (default: discard).
	Logger *slog.Logger
	// Registerer receives the metrics and Gatherer serves them at /metrics
	// (default Gatherer: the Registerer, if it is one). Default: a new
	// registry of the service's own, with the Go and process collectors.
	// Never the global registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Initial, if set, is called by New when the state holds no
	// checkpoint; the model and positions it returns are saved as the
	// first checkpoint at once.
	Initial Initial
	// Handlers are extra HTTP routes on the service's server, by pattern
	// ("/debug/x", "POST /x"); see Submit and ModelState.
	Handlers map[string]http.Handler
	// LiveSnapshots, if set, serves live snapshots of the running model at
	// /snapshot (see LiveSnapshots.ServeHTTP). Default nil: no /snapshot.
	LiveSnapshots *LiveSnapshotOptions
}

// Service is the stream stage: a consumer-group member that scores every
// input record with the model and writes it to the output topic, with
// checkpoints, metrics and a bounded graceful stop. See doc.go.
type Service struct {
	cfg   Config
	log   *slog.Logger
	store *state.Store
	set   *online.Set // the member's models, one per input partition (StateLayout)
	src   *consumer.KafkaSource
	sink  *producer.KafkaSink
	dlq   *producer.KafkaDeadLetter
	cp    *checkpointer
	// changelog is the store of record of partition state (state_layout
	// partition), opened by the model goroutine on the first assignment
	// (openChangelog); nil: none yet, or none configured.
	changelog *state.Changelog
	// share exchanges the partition models' shared parameters (state_layout
	// partition, Config.Sharing); nil: they do not share.
	share *sharer
	m     *metrics
	live  *LiveSnapshots // nil without Options.LiveSnapshots

	server *http.Server
	ln     net.Listener
	served chan struct{}

	tasks    chan Task
	loopDone chan struct{} // closed when the model loop has returned
	running  atomic.Bool
	started  atomic.Bool

	closeOnce sync.Once
	closeErr  error

	stats consumer.Stats // set when Run returns
}

// New opens the state, restores the model and positions from the last
// checkpoint (or Options.Initial, or a new model), starts the HTTP server
// and starts joining the consumer group in the background; Run processes
// the records. Call Run, or Close if Run will not be called.
//
// ctx bounds only the start, mostly a long restore (a large checkpoint or
// snapshot): once it ends, New stops between two chunks read and returns
// an error wrapping ctx's, having released what it opened. Run's context
// governs the service afterwards.
func New(ctx context.Context, cfg Config, opts Options) (_ *Service, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	cfg = cfg.WithDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg, gath := opts.Registerer, opts.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg, gath = r, r
	}
	if gath == nil {
		g, ok := reg.(prometheus.Gatherer)
		if !ok {
			return nil, errors.New("service: Options.Gatherer is required with a Registerer that is not a Gatherer")
		}
		gath = g
	}

	// s is local, not the named result: a failed New returns nil, and the
	// cleanups below must still reach what was opened.
	s := &Service{cfg: cfg, log: log, tasks: make(chan Task, 1), loopDone: make(chan struct{}), served: make(chan struct{})}
	var cleanup []func() error
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				err = errors.Join(err, cleanup[i]())
			}
		}
	}()

	s.store, err = state.Open(cfg.Checkpoint.Dir, state.Options{
		Logger: log.With("component", "state"), GCInterval: cfg.Checkpoint.GCInterval, NoSync: cfg.Checkpoint.NoSync,
	})
	if err != nil {
		if errors.Is(err, state.ErrLocked) {
			err = fmt.Errorf("checkpoint.dir %s: %w (another process holds it: each member needs a state directory of its own)", cfg.Checkpoint.Dir, err)
		}
		return nil, fmt.Errorf("service: %w", err)
	}
	cleanup = append(cleanup, s.store.Close)

	positions, restored, err := s.restore(ctx, opts.Initial)
	if err != nil {
		return nil, err
	}

	k := cfg.Kafka
	src := k.SourceConfig
	src.Brokers, src.Topic, src.Group, src.Positions = k.Brokers, k.InputTopic, k.Group, positions
	src.Logger = log.With("component", "source")
	src.Handover = func(ctx context.Context, out consumer.Flusher) error { return s.cp.handover(ctx, out) }
	useChangelog := cfg.StateLayout == online.LayoutPartition && cfg.Checkpoint.ChangelogTopic != "" && cfg.Checkpoint.ChangelogTopic != ChangelogOff
	if useChangelog {
		src.Restore = func(ctx context.Context, gen int32, parts []int) (map[int]int64, error) {
			return s.cp.assign(ctx, gen, parts)
		}
	}
	tail := producer.TailScan{Brokers: k.Brokers, Topics: []string{k.OutputTopic, k.DeadLetterTopic}, Window: producer.DefaultTailWindow, Timeout: k.RequestTimeout}
	src.Emitted = func(ctx context.Context, from map[int]int64) (map[int]map[int64]bool, error) {
		found, complete, err := tail.Emitted(ctx, k.InputTopic, from)
		if err == nil && !complete {
			log.Warn("output topics read back as far as allowed without finding every partition's start: records older than that may be emitted again", "window", tail.Window)
		}
		if err == nil && s.share != nil {
			s.share.emitted(from, found)
		}
		return found, err
	}
	s.src, err = consumer.NewKafkaSource(src)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	cleanup = append(cleanup, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		return s.src.Close(ctx)
	})

	s.m, err = newMetrics(reg, s.src)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	s.m.mu.restoredAt = time.Now()
	s.m.setSummary(s.set.Summary())

	wcfg := k.WriterConfig
	wcfg.Brokers = k.Brokers
	scfg := wcfg
	scfg.Topic, scfg.Logger, scfg.OnDelivered = k.OutputTopic, log.With("component", "output"), func(n int) { s.m.emitted.Add(float64(n)) }
	if s.sink, err = producer.NewKafkaSink(scfg); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	cleanup = append(cleanup, func() error { return s.sink.Close(context.Background()) })
	dcfg := wcfg
	dcfg.Topic, dcfg.Logger = k.DeadLetterTopic, log.With("component", "dead-letter")
	if s.dlq, err = producer.NewKafkaDeadLetter(dcfg); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	cleanup = append(cleanup, func() error { return s.dlq.Close(context.Background()) })

	s.cp = newCheckpointer(s.store, s.set, s.src, s.m, log.With("component", "checkpoint"),
		cfg.Checkpoint.EveryEvents, k.RequestTimeout, positions, restored)
	s.cp.topic = k.InputTopic
	if useChangelog {
		s.cp.open = s.openChangelog
	}
	cleanup = append(cleanup, func() error { s.cp.close(); return nil })
	if cfg.StateLayout == online.LayoutPartition && cfg.Sharing.Topic != SharingOff {
		s.share = newSharer(s.set, s.cp.next, cfg.Sharing.Interval, cfg.Sharing.EveryEvents, cfg.Sharing.Wait, s.m, log.With("component", "sharing"), s.openShared, k.RequestTimeout)
		s.cp.share = s.share
		cleanup = append(cleanup, s.share.close)
	}
	s.m.readiness(s.Ready)

	if opts.LiveSnapshots != nil {
		if s.live, err = NewLiveSnapshots(s, *opts.LiveSnapshots); err != nil {
			return nil, fmt.Errorf("service: %w", err)
		}
		cleanup = append(cleanup, s.live.Close)
	}

	if cfg.HTTP.Addr != HTTPOff {
		s.ln, err = net.Listen("tcp", cfg.HTTP.Addr)
		if err != nil {
			return nil, fmt.Errorf("service: http.addr %s: %w (each member on one host needs an address of its own; %q turns the endpoint off)", cfg.HTTP.Addr, err, HTTPOff)
		}
		s.server = &http.Server{Handler: s.handler(gath, opts.Handlers), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			defer close(s.served)
			if err := s.server.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server stopped", "err", err)
			}
		}()
		log.Info("serving /metrics, /healthz, /readyz", "addr", s.ln.Addr().String())
	} else {
		close(s.served)
	}
	return s, nil
}

func positionsString(ps []input.Position) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Run processes the input until ctx is done, then stops gracefully: stop
// fetching, drain what was fetched, flush the output, take a last
// checkpoint, commit the offsets, leave the group and close everything,
// all within Config.ShutdownTimeout (the broker may be gone). It returns
// nil after a graceful stop, the error that stopped the stream otherwise
// (a persistent output failure, ...). Run may be called once; the
// goroutine calling it owns the model until it returns.
func (s *Service) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	loopCtx, hardStop := context.WithCancel(context.Background())
	defer hardStop()
	runDone := make(chan struct{})
	stopAt := make(chan time.Time, 1)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // graceful stop
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-runDone:
			return
		}
		now := time.Now()
		stopAt <- now
		s.log.Info("stopping: no more fetching, draining", "bound", s.cfg.ShutdownTimeout)
		s.src.StopFetching()
		// Keep a reserve of the bound for checkpoint, commit and close.
		reserve := min(s.cfg.ShutdownTimeout/2, 3*time.Second)
		t := time.NewTimer(s.cfg.ShutdownTimeout - reserve)
		defer t.Stop()
		select {
		case <-t.C:
			s.log.Warn("drain did not finish in time: abandoning the records in flight (re-emitted on restart)")
			hardStop()
		case <-runDone:
		}
	}()
	go func() { // timer: metrics summary and time-based checkpoints
		defer wg.Done()
		tick := min(s.cfg.Checkpoint.Interval, time.Second)
		t := time.NewTicker(tick)
		defer t.Stop()
		task := s.cp.tick(s.cfg.Checkpoint.Interval)
		for {
			select {
			case <-t.C:
				select {
				case s.tasks <- task:
				default: // a task is pending already
				}
			case <-runDone:
				return
			}
		}
	}()

	s.running.Store(true)
	s.log.Info("running", "input", s.cfg.Kafka.InputTopic, "group", s.cfg.Kafka.Group,
		"output", s.cfg.Kafka.OutputTopic, "dead_letter", s.cfg.Kafka.DeadLetterTopic)
	// With a model per partition, the partitions step on every core.
	workers := 1
	if s.set.Layout() == online.LayoutPartition {
		workers = runtime.GOMAXPROCS(0)
	}
	steps := newTimedSet(s.set, s.m.step)
	var before func(*consumer.Result)
	if s.share != nil {
		steps.track, before = s.share.track, s.share.before
	}
	s.cp.evicted = steps.forget
	st, runErr := consumer.Run(loopCtx, s.src, steps, s.sink, s.dlq, consumer.Options{
		Buffer: s.cfg.Buffer, Fields: s.cfg.Fields, After: s.cp.after, Drain: s.cp.drain, Tasks: s.tasks, Skipped: s.m.skip, Workers: workers, Before: before,
	})
	s.running.Store(false)
	close(s.loopDone)
	close(runDone)
	wg.Wait()
	s.stats = st
	// Tasks handed over but not run: their output flush fails at once, so
	// that their submitters learn it now rather than at their deadline.
	for drained := false; !drained; {
		select {
		case task := <-s.tasks:
			_ = task(context.Background(), stoppedFlusher{})
		default:
			drained = true
		}
	}

	start := time.Now()
	select {
	case start = <-stopAt:
	default:
	}
	// A margin under the bound leaves time for the process to exit.
	sctx, cancel := context.WithDeadline(context.Background(), start.Add(s.cfg.ShutdownTimeout-s.cfg.ShutdownTimeout/20))
	defer cancel()
	graceful := runErr == nil
	if runErr != nil && ctx.Err() != nil && loopCtx.Err() != nil {
		runErr = fmt.Errorf("%w: drain: %w", ErrShutdownTimeout, runErr)
	} else if runErr != nil {
		s.log.Error("stream stopped", "err", runErr)
	}
	err := errors.Join(runErr, s.cp.finish(sctx, graceful))
	err = errors.Join(err, s.close(sctx, graceful))
	if sctx.Err() != nil && !errors.Is(err, ErrShutdownTimeout) {
		err = errors.Join(err, ErrShutdownTimeout)
	}
	s.log.Info("stopped", "records", st.Records, "scored", st.Scored, "dead_lettered", st.Rejected, "skipped", st.Skipped,
		"shutdown", time.Since(start).Round(time.Millisecond), "err", err)
	return err
}

// close releases everything, within ctx for what talks to the broker; the
// state store and the HTTP server are closed in any case.
func (s *Service) close(ctx context.Context, graceful bool) error {
	s.closeOnce.Do(func() {
		s.cp.close()
		var errs []error
		// After a graceful drain the sinks are flushed already; otherwise
		// what they still hold is not covered by any checkpoint and will be
		// re-emitted: do not wait for it.
		sctx := ctx
		if !graceful {
			var cancel context.CancelFunc
			sctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
		}
		if err := errors.Join(s.sink.Close(sctx), s.dlq.Close(sctx)); graceful {
			errs = append(errs, err)
		}
		if s.share != nil {
			if graceful { // the last publications, of the final checkpoint
				s.share.flush(sctx)
			}
			errs = append(errs, s.share.close())
		}
		errs = append(errs, s.src.Close(ctx)) // leaves the group
		if s.changelog != nil {
			errs = append(errs, s.changelog.Close())
		}
		errs = append(errs, s.store.Close())
		if s.server != nil {
			if err := s.server.Shutdown(ctx); err != nil {
				errs = append(errs, s.server.Close())
			}
			<-s.served
		}
		if s.live != nil {
			errs = append(errs, s.live.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Close releases a Service whose Run was never called; once Run has been
// called, Run closes everything before it returns and Close does nothing.
// It is idempotent.
func (s *Service) Close() error {
	if !s.started.CompareAndSwap(false, true) {
		return nil
	}
	close(s.loopDone)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	return s.close(ctx, true)
}

// Submit hands task to the model goroutine, which runs it between two
// records (also while the input is idle), and returns once it is handed
// over; the task reports its own result (for example through a channel).
// It returns ErrNotRunning once the loop has stopped, or ctx's error.
func (s *Service) Submit(ctx context.Context, task Task) error {
	select {
	case <-s.loopDone:
		return ErrNotRunning
	default:
	}
	select {
	case s.tasks <- task:
		return nil
	case <-s.loopDone:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ModelState returns the member's models and the next input position of
// every partition they have consumed: a consistent pair. It may be called
// only on the model goroutine, i.e. inside a Task, or while Run is not
// running.
func (s *Service) ModelState() (*online.Set, []input.Position) {
	return s.set, s.cp.currentPositions()
}

// Processed is the number of records the model loop has processed so far
// (scored or dead-lettered; blank records excluded). It is safe to call
// from any goroutine.
func (s *Service) Processed() uint64 { return s.cp.processed.Load() }

// Stats returns what the loop counted; valid after Run has returned.
func (s *Service) Stats() consumer.Stats { return s.stats }

// Assignment returns the input partitions assigned to this member now, and
// whether it has joined the group yet.
func (s *Service) Assignment() ([]int, bool) { return s.src.Assignment() }

// HTTPAddr is the address the HTTP server listens on ("" when off).
func (s *Service) HTTPAddr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Ready reports whether the service is ready: its state restored, the loop
// running, a member of the group with an assignment, its last checkpoint
// (if any) succeeded, and no batch of the output or the dead letters is
// being retried (a missing topic, brokers that refuse writes). The reason
// says what is missing.
func (s *Service) Ready() (bool, string) {
	if !s.running.Load() {
		return false, "model loop not running"
	}
	if _, joined := s.src.Assignment(); !joined {
		return false, "not yet a member of the consumer group"
	}
	if err := s.src.OutOfGroup(); err != nil {
		return false, "out of the consumer group, rejoining: " + err.Error()
	}
	if why := s.cp.failed(); why != "" {
		return false, "the last checkpoint failed: " + why
	}
	if why := s.sink.Failing(); why != "" {
		return false, "writes to the output topic fail, retrying: " + why
	}
	if why := s.dlq.Failing(); why != "" {
		return false, "writes to the dead-letter topic fail, retrying: " + why
	}
	return true, "ready"
}

func (s *Service) handler(g prometheus.Gatherer, extra map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := s.Ready()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(why + "\n"))
	})
	if s.live != nil {
		mux.Handle("/snapshot", s.live)
	}
	for pattern, h := range extra {
		mux.Handle(pattern, h)
	}
	return mux
}

// stoppedFlusher is the Flusher of tasks that arrive after the loop.
type stoppedFlusher struct{}

func (stoppedFlusher) Flush(context.Context) error { return ErrNotRunning }
