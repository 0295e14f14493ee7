package state

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Errors returned by the package. Wrapped errors name the operation; test
// with errors.Is.
var (
	// ErrClosed is returned by calls on a Store after Close.
	ErrClosed = errors.New("state: store closed")
	// ErrInvalidCheckpoint is returned by Save for a checkpoint that cannot
	// be stored (bad topic, negative partition or offset, duplicate
	// partition, model over MaxModelSize).
	ErrInvalidCheckpoint = errors.New("state: invalid checkpoint")
	// ErrTooLarge is returned by Save when the checkpoint does not fit into
	// one Badger transaction (in practice: tens of thousands of positions).
	ErrTooLarge = errors.New("state: checkpoint too large for one transaction")
	// ErrCorrupt is returned by Load when what is on disk does not match its
	// commit record, or was written by an unknown layout version.
	ErrCorrupt = errors.New("state: corrupt checkpoint")
	// ErrNoSpace is returned by Open, Save, SaveFrom, SaveModel and Close when the
	// store's filesystem lacks the free space a write needs plus the
	// reserve Badger's own flushes and compactions need (see doc.go). The
	// write was not made; a later call succeeds once space is freed.
	ErrNoSpace = errors.New("state: not enough free disk space")
	// ErrLocked is returned by Open for a directory another Store holds,
	// in this process or another (Badger's directory lock).
	ErrLocked = errors.New("state: directory held by another store")
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// Logger receives the store's and Badger's log lines (Badger's Info
	// lines at Debug level). Default nil: discard.
	Logger *slog.Logger
	// GCInterval is the period of the background garbage collection of
	// superseded model generations and of the value log. Default 0: one
	// minute. Negative: no background collection.
	GCInterval time.Duration
	// GCDiscardRatio is passed to Badger's RunValueLogGC: a value-log file is
	// rewritten when at least this share of it is garbage. Default 0: 0.5.
	// Must be in (0, 1).
	GCDiscardRatio float64
	// NoSync skips the fsync at the end of each Save. Default false: a Save
	// that returned nil survives a machine crash.
	NoSync bool
	// MaxDeltas is the most deltas (SaveModel) a checkpoint may have
	// after its base; the next save writes a new base. Default 0: 256.
	// Negative: never a delta.
	MaxDeltas int
	// DeltaShare bounds the deltas of a checkpoint, together, to this
	// share of its base: a delta that would pass it is written as a new
	// base instead. So the model takes at most 1 + DeltaShare times its
	// base in the store, and 2 + DeltaShare while a new base replaces it
	// (docs/design/state.md, "Deltas"). Default 0: 0.5. Must be in
	// (0, 1].
	DeltaShare float64

	// valueLogFileSize overrides the value-log file size (tests).
	// Default 0: defaultValueLogFileSize.
	valueLogFileSize int64
	// onGC, if set, is called after each background collection (tests).
	onGC func(gcResult)
}

const (
	defaultGCInterval     = time.Minute
	defaultGCDiscardRatio = 0.5
	defaultMaxDeltas      = 256
	defaultDeltaShare     = 0.5
	// defaultValueLogFileSize is 8 MiB. The store has Badger start a new
	// value-log file after every transaction that puts a value in one
	// (ValueLogMaxEntries 0, in Open), so a file holds one transaction's
	// chunks (up to chunksPerTxn, 16 MiB: Badger grows the file for them),
	// and the size matters only as the largest value and for the space
	// one rewrite of the collector needs (half a file and a chunk:
	// docs/design/state.md, "A full disk").
	defaultValueLogFileSize = 8 << 20
	// maxRewritesPerGC bounds the value-log rewrites of one collection
	// (16 GiB of files of one transaction, 16 MiB, as 256 files of 64 MiB
	// before stop 31). A collection goes on while files are mostly
	// garbage: a new base supersedes a whole chain, often more files than
	// a few rewrites free, and what one collection leaves waits a whole
	// GCInterval. Close waits for one rewrite at most: the loop stops
	// between two.
	maxRewritesPerGC = 1024
)

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if o.GCDiscardRatio != 0 && (o.GCDiscardRatio <= 0 || o.GCDiscardRatio >= 1) {
		return fmt.Errorf("state: Options.GCDiscardRatio = %v: must be in (0, 1); 0 means %v",
			o.GCDiscardRatio, defaultGCDiscardRatio)
	}
	if o.DeltaShare != 0 && !(o.DeltaShare > 0 && o.DeltaShare <= 1) {
		return fmt.Errorf("state: Options.DeltaShare = %v: must be in (0, 1]; 0 means %v", o.DeltaShare, defaultDeltaShare)
	}
	if o.MaxDeltas > maxChain {
		return fmt.Errorf("state: Options.MaxDeltas = %d: at most %d", o.MaxDeltas, maxChain)
	}
	if o.valueLogFileSize != 0 && (o.valueLogFileSize < 1<<20 || o.valueLogFileSize >= 2<<30) {
		return fmt.Errorf("state: value log file size %d: must be in [1 MiB, 2 GiB)", o.valueLogFileSize)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.GCInterval == 0 {
		o.GCInterval = defaultGCInterval
	}
	if o.GCDiscardRatio == 0 {
		o.GCDiscardRatio = defaultGCDiscardRatio
	}
	if o.valueLogFileSize == 0 {
		o.valueLogFileSize = defaultValueLogFileSize
	}
	if o.MaxDeltas == 0 {
		o.MaxDeltas = defaultMaxDeltas
	}
	if o.MaxDeltas < 0 {
		o.MaxDeltas = 0
	}
	if o.DeltaShare == 0 {
		o.DeltaShare = defaultDeltaShare
	}
	return o
}

// Store is a checkpoint store backed by one Badger database. Its methods are
// safe for concurrent use: Saves are serialised, Loads run beside them.
type Store struct {
	db   *badger.DB
	dir  string
	opts Options
	log  *slog.Logger

	stop      chan struct{} // closed by Close: stops the GC goroutine
	kick      chan struct{} // a Save refused for space asks for a collection now
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// writeMu serialises Save, a whole collection and Close.
	// readMu is held shared by Load and Position, exclusively by DropPrefix
	// (it ignores MVCC snapshots) and Close.
	// closed is written holding both, so reading it under either is safe.
	writeMu sync.Mutex
	readMu  sync.RWMutex
	closed  bool

	chunkBuf []byte // the model chunk buffer, reused by Saves (writeMu)
}

// Open opens (creating if needed) the checkpoint store in dir and starts its
// background garbage collection. Only one Store, in one process, may have a
// directory open at a time (Badger holds a directory lock).
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("state: open: empty directory")
	}
	opts = opts.withDefaults()

	// Badger's Open writes through memory maps (new log files, the flush
	// of replayed memtables): on a full filesystem it would fault.
	usage, err := readUsage(dir)
	if err == nil {
		err = ensureSpace(dir, 0, usage.reserve())
	}
	if err != nil {
		return nil, fmt.Errorf("state: open %s: %w", dir, err)
	}

	bopts := badger.DefaultOptions(dir).
		WithLogger(badgerLogger{opts.Logger}).
		WithSyncWrites(!opts.NoSync).
		WithValueLogFileSize(opts.valueLogFileSize).
		// A new value-log file after every transaction that puts a
		// value in one: Badger never collects the file it is writing, so
		// superseded copies of a small model used to pile up in it
		// until it reached its size (64 MiB then, 40 × a 1.5 MiB model).
		// The price, a file per transaction: docs/design/state.md, "One
		// transaction per value-log file".
		WithValueLogMaxEntries(0).
		// Saves are serialised by the Store: no conflict tracking needed.
		WithDetectConflicts(false).
		// No global expvar metrics: several stores may share a process.
		WithMetricsEnabled(false).
		// A checkpoint store holds few keys; Badger's defaults (64 MiB
		// memtables x5, 256 MiB block cache, 4 compactors) are sized for a
		// database. 16 MiB memtables still allow a 2.4 MiB transaction
		// (inline values and keys), far more than a checkpoint needs.
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(8 << 20).
		WithNumCompactors(2)

	// A crash can leave empty log files that Badger refuses; see
	// removeEmptyLogs.
	if _, err := removeEmptyLogs(dir, opts.Logger); err != nil {
		return nil, fmt.Errorf("state: open %s: %w", dir, err)
	}
	db, err := badger.Open(bopts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			// Badger formats its lock's error into text outside its debug
			// mode (y.Wrap): there is no error value to test.
			err = fmt.Errorf("%w: %w", ErrLocked, err)
		}
		return nil, fmt.Errorf("state: open %s: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, opts: opts, log: opts.Logger, stop: make(chan struct{}), kick: make(chan struct{}, 1)}
	if opts.GCInterval > 0 {
		s.wg.Add(1)
		go s.gcLoop()
	}
	return s, nil
}

// Exists reports whether dir holds a store: a directory Open has made
// (Badger's manifest is in it). Open on any other directory creates one
// there, so a caller that only reads asks Exists first. A missing dir
// holds none.
func Exists(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, badger.ManifestFilename))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("state: %w", err)
}

// Close stops the garbage collector, waits for it and for running Saves and
// Loads, and closes the database. It is idempotent: later calls return the
// first call's result.
//
// Badger flushes its memtable into a table when it closes. When the
// filesystem lacks the space for that, Close does not close Badger and
// returns an error wrapping ErrNoSpace: Badger's files stay open and
// mapped until the process exits, as after a crash, and the next Open
// recovers everything committed from the memtable logs. The process
// should exit soon after such a Close.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()

		s.writeMu.Lock()
		s.readMu.Lock()
		s.closed = true
		s.readMu.Unlock()
		s.writeMu.Unlock()

		usage, err := readUsage(s.dir)
		if err == nil {
			err = ensureSpace(s.dir, 0, usage.flushNeed())
		}
		if errors.Is(err, ErrNoSpace) || errors.Is(err, errReadOnly) {
			s.closeErr = fmt.Errorf("state: close: Badger left open until the process exits (the next Open recovers what was committed): %w", err)
			return
		}
		// A failure to measure is no reason to keep Badger open.
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("state: close: %w", err)
		}
	})
	return s.closeErr
}

// gcResult describes one background collection.
type gcResult struct {
	dropped  int // superseded model generations dropped
	rewrites int // value-log files rewritten
	err      error
}

func (s *Store) gcLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.kick:
		}
		r := s.collect()
		if errors.Is(r.err, ErrNoSpace) {
			// The refused Save that asked for it says so already.
			s.log.Debug("state: garbage collection postponed", "err", r.err)
		} else if r.err != nil {
			s.log.Warn("state: garbage collection failed", "err", r.err)
		} else if r.dropped > 0 || r.rewrites > 0 {
			s.log.Debug("state: garbage collected",
				"generations_dropped", r.dropped, "vlog_rewrites", r.rewrites)
		}
		if s.opts.onGC != nil {
			s.opts.onGC(r)
		}
	}
}

// collect drops superseded model generations, then rewrites value-log files
// that are mostly garbage (at most maxRewritesPerGC per call). It holds
// writeMu throughout, so that saves wait for it: a collection that took
// the lock once per rewrite got one rewrite in between two saves, and a
// store whose saves wrote whole models of several value-log files each
// grew faster than it freed (docs/design/state.md, "Deltas").
func (s *Store) collect() gcResult {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var r gcResult
	if s.closed {
		r.err = ErrClosed
		return r
	}
	r.dropped, r.err = s.dropSupersededLocked()
	if r.err != nil {
		return r
	}
	for r.rewrites < maxRewritesPerGC {
		select {
		case <-s.stop:
			return r
		default:
		}
		err := s.rewriteValueLog()
		switch {
		case err == nil:
			r.rewrites++
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			return r
		default:
			r.err = fmt.Errorf("state: value log gc: %w", err)
			return r
		}
	}
	return r
}

// rewriteValueLog runs one value-log rewrite when the filesystem has room
// for it: it writes the live entries of the file it collects. The caller
// holds writeMu, so that no Save spends the space it counted on.
func (s *Store) rewriteValueLog() error {
	var committed record
	if err := s.db.View(func(txn *badger.Txn) (err error) {
		committed, _, err = readRecord(txn)
		return err
	}); err != nil {
		return err
	}
	usage, err := readUsage(s.dir)
	if err != nil {
		return err
	}
	if err := ensureSpace(s.dir, s.gcNeed(committed), usage.reserve()); err != nil {
		return err
	}
	return s.db.RunValueLogGC(s.opts.GCDiscardRatio)
}

// gcNeed is what one value-log rewrite may write while rec is committed.
func (s *Store) gcNeed(rec record) int64 {
	return gcNeed(int64(rec.chainBytes()), s.opts.valueLogFileSize, s.opts.GCDiscardRatio)
}

// dropSuperseded removes every model generation other than those of the
// committed checkpoint (its base and deltas) with DropPrefix. See
// docs/design/state.md for why this, and not a Delete in Save.
func (s *Store) dropSuperseded() (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.dropSupersededLocked()
}

// dropSupersededLocked is dropSuperseded with writeMu held.
func (s *Store) dropSupersededLocked() (int, error) {
	var stale [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		rec, ok, err := readRecord(txn)
		if err != nil {
			return err
		}
		live := func(gen uint64) bool { return ok && gen >= rec.base && gen <= rec.generation }
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(modelPrefix)})
		defer it.Close()
		var last uint64
		for it.Rewind(); it.Valid(); it.Next() {
			gen, _, err := parseModelKey(it.Item().Key())
			if err != nil {
				return err
			}
			if !live(gen) && gen != last {
				stale = append(stale, modelGenPrefix(gen))
				last = gen
			}
		}
		return nil
	})
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	// DropPrefix flushes the memtable and compacts the tables.
	usage, err := readUsage(s.dir)
	if err == nil {
		err = ensureSpace(s.dir, 0, usage.reserve())
	}
	if err != nil {
		return 0, fmt.Errorf("state: drop superseded generations: %w", err)
	}
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if err := s.db.DropPrefix(stale...); err != nil {
		return 0, fmt.Errorf("state: drop superseded generations: %w", err)
	}
	return len(stale), nil
}

// badgerLogger routes Badger's logger to slog. Badger's Info lines (table
// and compaction chatter) go to Debug. Its lines carry library=badger: the
// store's logger has a component of its own (the service's is "state"),
// and a second one would repeat the key in a JSON line.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) emit(level slog.Level, format string, args ...any) {
	if !b.l.Enabled(context.Background(), level) {
		return
	}
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if msg == "" {
		return
	}
	b.l.Log(context.Background(), level, msg, "library", "badger")
}

func (b badgerLogger) Errorf(f string, a ...any)   { b.emit(slog.LevelError, f, a...) }
func (b badgerLogger) Warningf(f string, a ...any) { b.emit(slog.LevelWarn, f, a...) }
func (b badgerLogger) Infof(f string, a ...any)    { b.emit(slog.LevelDebug, f, a...) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.emit(slog.LevelDebug-4, f, a...) }

var _ badger.Logger = badgerLogger{}
