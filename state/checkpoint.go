package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"denoiser/consumer/input"
)

// MaxModelSize is the largest model Save accepts. Load allocates the model
// length a commit record states, so this also bounds what a damaged record
// can make it allocate.
const MaxModelSize = 2 << 30

// maxTopicLen bounds topic names (Kafka allows 249 bytes; file sources may
// use longer names, Badger keys may not exceed 65000 bytes).
const maxTopicLen = 4096

// chunkSize is the size of the model's value-log entries. It is above
// Badger's ValueThreshold (1 MiB) so that only the last, shorter chunk can be
// stored inline in the LSM tree and count fully against the transaction
// limit.
const chunkSize = 4 << 20

// chunksPerTxn is how many chunks one transaction writes. Badger starts a
// new value-log file after every transaction that writes to the value log
// (ValueLogMaxEntries 0, in Open), and each new file costs a sync and a
// truncation of the last one: four chunks to a file bring a large model's
// save to 1.1–1.3 × its time with 64 MiB files, where one chunk to a file
// took about 2 ×, for 12 MiB more buffer while it is saved.
const chunksPerTxn = 4

// Checkpoint is the unit of durable state: the model and, for every input
// partition the model has consumed, the next offset to read.
type Checkpoint struct {
	// Model is the serialised model, opaque to this package. Load sets it
	// to the base of the checkpoint: the last model written whole.
	Model []byte
	// Deltas, set by Load, are the deltas saved after the base, oldest
	// first (opaque; see SaveModel): the checkpoint's model is Model with
	// each applied in order. Empty when the last save wrote the model
	// whole. Save and SaveFrom ignore it.
	Deltas [][]byte
	// Positions holds, for each partition, the position of the next record
	// to read (Offset is the next offset; File and Line are not stored).
	// Save rejects file positions and duplicates; Load returns them sorted
	// by topic, then partition.
	Positions []input.Position
	// Version is the model version (for example the number of events
	// learned), stored as given.
	Version uint64

	// Generation numbers committed checkpoints 1, 2, 3, ... Set by Load;
	// ignored by Save, which assigns the next one.
	Generation uint64
	// Base is the generation of the base (Model): Generation minus the
	// number of deltas. Set by Load.
	Base uint64
	// SavedAt is the wall-clock time of the Save. Set by Load; ignored by Save.
	SavedAt time.Time
}

const (
	recordKey   = "meta/checkpoint"
	recordMagic = "DNCP"
	// recordLayout is the layout this build writes; it reads
	// recordLayoutV1 too (FORMAT.md, "Compatibility").
	recordLayout   = 2
	recordLayoutV1 = 1
	recordLenV1    = 4 + 1 + 8 + 8 + 8 + 8 + 4 + 4 + 4
	recordLen      = 4 + 1 + 8 + 8 + 8 + 8 + 8 + 8 + 4
	modelPrefix    = "model/"
	blobPrefix     = "blob/"
	blobLen        = 1 + 8 + 4 + 4
	posPrefix      = "pos/"
	// maxChain bounds the deltas a commit record may name (Load allocates
	// a slice of them).
	maxChain = 1 << 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is the commit record of a checkpoint (see FORMAT.md for its format).
type record struct {
	layout     uint8
	generation uint64
	version    uint64
	savedAt    int64
	base       uint64 // generation of the base; the deltas are base+1 .. generation
	baseLen    uint64 // bytes of the base
	deltaBytes uint64 // bytes of the deltas
	positions  uint32
	// v1 is the model of a layout-1 record, whose generation is its own
	// base, with no blob record.
	v1 blob
}

// chainBytes is what the committed checkpoint's model takes: base and
// deltas.
func (r record) chainBytes() uint64 { return r.baseLen + r.deltaBytes }

// deltas is the number of deltas of the checkpoint.
func (r record) deltas() uint64 { return r.generation - r.base }

func (r record) encode() []byte {
	b := make([]byte, 0, recordLen)
	b = append(b, recordMagic...)
	b = append(b, recordLayout)
	b = binary.BigEndian.AppendUint64(b, r.generation)
	b = binary.BigEndian.AppendUint64(b, r.version)
	b = binary.BigEndian.AppendUint64(b, uint64(r.savedAt))
	b = binary.BigEndian.AppendUint64(b, r.base)
	b = binary.BigEndian.AppendUint64(b, r.baseLen)
	b = binary.BigEndian.AppendUint64(b, r.deltaBytes)
	b = binary.BigEndian.AppendUint32(b, r.positions)
	return b
}

func decodeRecord(b []byte) (record, error) {
	if len(b) < 5 || string(b[:4]) != recordMagic {
		return record{}, fmt.Errorf("%w: commit record of %d bytes is malformed", ErrCorrupt, len(b))
	}
	switch {
	case b[4] == recordLayoutV1 && len(b) == recordLenV1:
		return decodeRecordV1(b[5:])
	case b[4] == recordLayout && len(b) == recordLen:
	case b[4] == recordLayoutV1 || b[4] == recordLayout:
		return record{}, fmt.Errorf("%w: commit record of layout %d has %d bytes", ErrCorrupt, b[4], len(b))
	default:
		return record{}, fmt.Errorf("%w: layout version %d, this build reads %d and %d", ErrCorrupt, b[4], recordLayoutV1, recordLayout)
	}
	b = b[5:]
	r := record{layout: recordLayout}
	r.generation = binary.BigEndian.Uint64(b[0:])
	r.version = binary.BigEndian.Uint64(b[8:])
	r.savedAt = int64(binary.BigEndian.Uint64(b[16:]))
	r.base = binary.BigEndian.Uint64(b[24:])
	r.baseLen = binary.BigEndian.Uint64(b[32:])
	r.deltaBytes = binary.BigEndian.Uint64(b[40:])
	r.positions = binary.BigEndian.Uint32(b[48:])
	if r.base == 0 || r.base > r.generation || r.deltas() > maxChain ||
		r.baseLen > MaxModelSize || r.deltaBytes > MaxModelSize {
		return record{}, fmt.Errorf("%w: commit record of generation %d names base %d of %d bytes and %d delta bytes",
			ErrCorrupt, r.generation, r.base, r.baseLen, r.deltaBytes)
	}
	return r, nil
}

// decodeRecordV1 reads a layout-1 record (after its magic and layout):
// the model is its own generation's, whole, described in the record.
func decodeRecordV1(b []byte) (record, error) {
	r := record{layout: recordLayoutV1}
	r.generation = binary.BigEndian.Uint64(b[0:])
	r.version = binary.BigEndian.Uint64(b[8:])
	r.savedAt = int64(binary.BigEndian.Uint64(b[16:]))
	r.v1 = blob{
		length: binary.BigEndian.Uint64(b[24:]),
		chunks: binary.BigEndian.Uint32(b[32:]),
		crc:    binary.BigEndian.Uint32(b[36:]),
	}
	r.positions = binary.BigEndian.Uint32(b[40:])
	r.base, r.baseLen = r.generation, r.v1.length
	if err := r.v1.check(r.generation); err != nil {
		return record{}, err
	}
	return r, nil
}

// blob describes the model bytes one generation wrote: a base (the whole
// model) or a delta. Its record is written with the commit record of that
// generation.
type blob struct {
	delta  bool
	length uint64
	chunks uint32
	crc    uint32
}

func (b blob) encode() []byte {
	out := make([]byte, 0, blobLen)
	out = append(out, boolByte(b.delta))
	out = binary.BigEndian.AppendUint64(out, b.length)
	out = binary.BigEndian.AppendUint32(out, b.chunks)
	return binary.BigEndian.AppendUint32(out, b.crc)
}

func decodeBlob(gen uint64, v []byte) (blob, error) {
	if len(v) != blobLen || v[0] > 1 {
		return blob{}, fmt.Errorf("%w: blob record of generation %d is malformed", ErrCorrupt, gen)
	}
	b := blob{
		delta:  v[0] == 1,
		length: binary.BigEndian.Uint64(v[1:]),
		chunks: binary.BigEndian.Uint32(v[9:]),
		crc:    binary.BigEndian.Uint32(v[13:]),
	}
	return b, b.check(gen)
}

func (b blob) check(gen uint64) error {
	if b.length > MaxModelSize || uint64(b.chunks) != chunksFor(b.length) {
		return fmt.Errorf("%w: generation %d says %d model bytes in %d chunks", ErrCorrupt, gen, b.length, b.chunks)
	}
	return nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func blobKey(gen uint64) []byte {
	return fmt.Appendf(nil, "%s%020d", blobPrefix, gen)
}

func chunksFor(n uint64) uint64 { return (n + chunkSize - 1) / chunkSize }

// readRecord reads the commit record; ok is false when there is none.
func readRecord(txn *badger.Txn) (record, bool, error) {
	item, err := txn.Get([]byte(recordKey))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, fmt.Errorf("state: read commit record: %w", err)
	}
	var r record
	err = item.Value(func(v []byte) error {
		r, err = decodeRecord(v)
		return err
	})
	if err != nil {
		return record{}, false, err
	}
	return r, true, nil
}

func modelGenPrefix(gen uint64) []byte {
	return fmt.Appendf(nil, "%s%020d/", modelPrefix, gen)
}

func modelKey(gen uint64, chunk int) []byte {
	return fmt.Appendf(nil, "%s%020d/%08d", modelPrefix, gen, chunk)
}

func parseModelKey(k []byte) (gen uint64, chunk int, err error) {
	rest, ok := bytes.CutPrefix(k, []byte(modelPrefix))
	g, c, ok2 := bytes.Cut(rest, []byte("/"))
	if ok && ok2 {
		gen, err = strconv.ParseUint(string(g), 10, 64)
		if err == nil {
			var c64 uint64
			c64, err = strconv.ParseUint(string(c), 10, 31)
			chunk = int(c64)
		}
		if err == nil {
			return gen, chunk, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: model key %q", ErrCorrupt, k)
}

var topicEscaper = strings.NewReplacer("%", "%25", "/", "%2F")
var topicUnescaper = strings.NewReplacer("%25", "%", "%2F", "/")

func posTopicPrefix(topic string) []byte {
	return []byte(posPrefix + topicEscaper.Replace(topic) + "/")
}

func posKey(topic string, partition int32) []byte {
	return fmt.Appendf(posTopicPrefix(topic), "%010d", partition)
}

func parsePosKey(k []byte) (topic string, partition int32, err error) {
	rest, ok := bytes.CutPrefix(k, []byte(posPrefix))
	i := bytes.LastIndexByte(rest, '/')
	if ok && i > 0 {
		var p uint64
		p, err = strconv.ParseUint(string(rest[i+1:]), 10, 31)
		if err == nil {
			return topicUnescaper.Replace(string(rest[:i])), int32(p), nil
		}
	}
	return "", 0, fmt.Errorf("%w: position key %q", ErrCorrupt, k)
}

func decodeNext(k, v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: position %q has %d bytes", ErrCorrupt, k, len(v))
	}
	n := int64(binary.BigEndian.Uint64(v))
	if n < 0 {
		return 0, fmt.Errorf("%w: position %q is negative", ErrCorrupt, k)
	}
	return n, nil
}

func validate(cp *Checkpoint) error {
	if len(cp.Model) > MaxModelSize {
		return fmt.Errorf("%w: model of %d bytes exceeds %d", ErrInvalidCheckpoint, len(cp.Model), MaxModelSize)
	}
	seen := make(map[input.Position]struct{}, len(cp.Positions))
	for _, p := range cp.Positions {
		switch {
		case p.Topic == "":
			return fmt.Errorf("%w: empty topic", ErrInvalidCheckpoint)
		case len(p.Topic) > maxTopicLen:
			return fmt.Errorf("%w: topic of %d bytes exceeds %d", ErrInvalidCheckpoint, len(p.Topic), maxTopicLen)
		case p.Partition < 0:
			return fmt.Errorf("%w: %s partition %d out of range", ErrInvalidCheckpoint, p.Topic, p.Partition)
		case p.Offset < 0:
			return fmt.Errorf("%w: %s/%d next offset %d is negative", ErrInvalidCheckpoint, p.Topic, p.Partition, p.Offset)
		}
		tp := input.Position{Topic: p.Topic, Partition: p.Partition}
		if _, dup := seen[tp]; dup {
			return fmt.Errorf("%w: %s/%d appears twice", ErrInvalidCheckpoint, p.Topic, p.Partition)
		}
		seen[tp] = struct{}{}
	}
	return nil
}

// Save commits cp as the new checkpoint, replacing the previous one (see
// doc.go): it is SaveFrom with cp.Model as what is written.
func (s *Store) Save(ctx context.Context, cp Checkpoint) error {
	model := cp.Model
	cp.Model = nil
	return s.SaveFrom(ctx, cp, func(w io.Writer) error {
		_, err := w.Write(model)
		return err
	})
}

// SaveFrom commits a new checkpoint, replacing the previous one: the model
// is what write writes, whole (SaveModel with ModelWriter.Full only).
func (s *Store) SaveFrom(ctx context.Context, cp Checkpoint, write func(io.Writer) error) error {
	_, err := s.SaveModel(ctx, cp, ModelWriter{Full: write})
	return err
}

// ModelWriter writes the model of a checkpoint: whole, or as a delta
// against the last checkpoint.
type ModelWriter struct {
	// Full writes the whole model. Required.
	Full func(io.Writer) error
	// Delta, if set, writes what changed in the model since the
	// checkpoint of generation Since, in DeltaSize bytes. The store
	// writes the delta only if Since is the generation it has committed
	// and the chain of deltas has room (Options.MaxDeltas,
	// Options.DeltaShare); otherwise it calls Full.
	Delta     func(io.Writer) error
	DeltaSize int64
	Since     uint64
}

// Saved describes a committed checkpoint.
type Saved struct {
	Generation uint64
	// Delta: the model was written as a delta, not whole.
	Delta bool
	// Bytes is the number of model bytes written.
	Bytes int64
	// BaseBytes is the size of the checkpoint's base (Bytes for a base),
	// Deltas the number of deltas after it (0 for a base) and DeltaBytes
	// their size: the model takes BaseBytes + DeltaBytes in the store.
	BaseBytes  int64
	Deltas     int
	DeltaBytes int64
}

// SaveModel commits a new checkpoint, replacing the previous one: its model
// is what w writes, the rest comes from cp (whose Model must be nil;
// Generation, Base and SavedAt are ignored). The store writes the model as
// a delta when w offers one against the committed checkpoint and the chain
// has room, else whole, as a new base; a new base supersedes the old one
// and its deltas, which the collector then removes. The model goes to the
// store as it is written, chunksPerTxn chunks to a transaction, so a
// checkpoint costs that many chunks of memory (one for a model of one
// chunk) and not a serialised copy of the model; the positions and the
// commit record follow in one last transaction, and only that makes the
// checkpoint visible (see doc.go). It returns once that transaction is
// committed and, unless Options.NoSync, fsynced. ctx is checked between
// transactions and before the last commit, not during one. Saves are
// serialised. A failed SaveModel leaves the previous checkpoint in place;
// what it had written is collected as garbage.
func (s *Store) SaveModel(ctx context.Context, cp Checkpoint, w ModelWriter) (Saved, error) {
	if cp.Model != nil {
		return Saved{}, fmt.Errorf("%w: SaveModel with Model set", ErrInvalidCheckpoint)
	}
	if w.Full == nil {
		return Saved{}, fmt.Errorf("%w: SaveModel without a writer of the whole model", ErrInvalidCheckpoint)
	}
	if err := validate(&cp); err != nil {
		return Saved{}, err
	}
	if err := ctx.Err(); err != nil {
		return Saved{}, fmt.Errorf("state: save: %w", err)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed {
		return Saved{}, ErrClosed
	}

	var prev record
	var found bool
	if err := s.db.View(func(txn *badger.Txn) (err error) {
		prev, found, err = readRecord(txn)
		return err
	}); err != nil {
		return Saved{}, fmt.Errorf("state: save: %w", err)
	}
	gen := prev.generation + 1
	delta := s.deltaFits(prev, found, w)
	// Refuse a save that cannot fit before it writes anything: a base is
	// likely about as large as the last one. Each transaction and the commit
	// are checked again as they go.
	expect, write := int64(prev.baseLen), w.Full
	if delta {
		expect, write = w.DeltaSize, w.Delta
	}
	keep := s.gcNeed(prev)
	if err := s.ensureSpace(expect+int64(chunksFor(uint64(max(expect, 0))))*entryOverhead, keep); err != nil {
		return Saved{}, fmt.Errorf("state: save generation %d: %w", gen, err)
	}
	cw := &chunkWriter{ctx: ctx, db: s.db, gen: gen, buf: s.chunkBuf[:0],
		space: func(n int64) error { return s.ensureSpace(n, keep) }}
	if err := write(cw); err != nil {
		if cw.err != nil {
			err = cw.err
		}
		return Saved{}, fmt.Errorf("state: save generation %d: model: %w", gen, err)
	}
	if err := cw.flush(); err != nil {
		return Saved{}, fmt.Errorf("state: save generation %d: model: %w", gen, err)
	}
	s.chunkBuf = cw.buf[:0]
	rec := record{
		layout:     recordLayout,
		generation: gen,
		version:    cp.Version,
		savedAt:    time.Now().UnixNano(),
		base:       gen,
		baseLen:    cw.n,
		positions:  uint32(len(cp.Positions)),
	}
	if delta {
		rec.base, rec.baseLen, rec.deltaBytes = prev.base, prev.baseLen, prev.deltaBytes+cw.n
	}
	if rec.deltaBytes > MaxModelSize {
		return Saved{}, fmt.Errorf("%w: deltas over %d bytes", ErrInvalidCheckpoint, MaxModelSize)
	}
	b := blob{delta: delta, length: cw.n, chunks: uint32(cw.chunks), crc: cw.crc}
	// A new base supersedes the old chain: its blob records go with this
	// commit, its chunks with the collector.
	var superseded []uint64
	if !delta && found && prev.layout == recordLayout {
		for g := prev.base; g <= prev.generation; g++ {
			superseded = append(superseded, g)
		}
	}
	if err := s.commit(ctx, rec, b, superseded, cp.Positions, keep); err != nil {
		return Saved{}, err
	}
	if !delta && found {
		s.requestGC()
	}
	return Saved{Generation: gen, Delta: delta, Bytes: int64(cw.n),
		BaseBytes: int64(rec.baseLen), Deltas: int(rec.deltas()), DeltaBytes: int64(rec.deltaBytes)}, nil
}

// deltaFits reports whether w's delta may follow prev, the committed
// record (found: there is one): it is a delta against prev, of a layout
// with deltas, and the chain stays within Options.MaxDeltas deltas and
// Options.DeltaShare of the base.
func (s *Store) deltaFits(prev record, found bool, w ModelWriter) bool {
	return w.Delta != nil && found && prev.layout == recordLayout && w.Since == prev.generation &&
		w.DeltaSize >= 0 && prev.deltas() < uint64(s.opts.MaxDeltas) &&
		float64(prev.deltaBytes)+float64(w.DeltaSize) <= s.opts.DeltaShare*float64(prev.baseLen)
}

// requestGC asks the collector to run now, if it runs at all.
func (s *Store) requestGC() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// ensureSpace checks that the store's filesystem has room for a write of n
// bytes, the reserve of Badger's own writes and keep more (room for the
// collector). When it has not, it asks the collector to run now: what it
// frees lets a later save through.
func (s *Store) ensureSpace(n, keep int64) error {
	usage, err := readUsage(s.dir)
	if err != nil {
		return fmt.Errorf("measure %s: %w", s.dir, err)
	}
	err = ensureSpace(s.dir, n, usage.reserve()+keep)
	if errors.Is(err, ErrNoSpace) {
		s.requestGC()
	}
	return err
}

// chunkWriter writes a model into the store under its generation's
// prefix, in chunks of chunkSize bytes, chunksPerTxn chunks to a
// transaction.
type chunkWriter struct {
	ctx    context.Context
	db     *badger.DB
	gen    uint64
	buf    []byte // the chunks being filled: one chunk's room, then chunksPerTxn's
	chunks int    // chunks written
	n      uint64 // model bytes written
	crc    uint32
	err    error
	// space checks, before each transaction, that the filesystem has room
	// for its chunks.
	space func(n int64) error
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.n+uint64(len(p)) > MaxModelSize {
		w.err = fmt.Errorf("%w: model over %d bytes", ErrInvalidCheckpoint, MaxModelSize)
		return 0, w.err
	}
	written := 0
	const group = chunksPerTxn * chunkSize
	for len(p) > 0 {
		switch {
		case w.buf == nil:
			w.buf = make([]byte, 0, chunkSize) // a model of one chunk needs no more
		case len(w.buf) == cap(w.buf) && cap(w.buf) < group:
			w.buf = append(make([]byte, 0, group), w.buf...)
		}
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+k]
		w.crc = crc32.Update(w.crc, castagnoli, p[:k])
		w.n += uint64(k)
		p = p[k:]
		written += k
		if len(w.buf) == group {
			if err := w.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// flush writes the chunks being filled, if any, in one transaction: every
// chunk but a model's last is chunkSize long. Badger copies the values
// before Commit returns (into the value log, or the memtable's arena for a
// short last chunk), so the buffer is reused.
func (w *chunkWriter) flush() error {
	if w.err != nil || len(w.buf) == 0 {
		return w.err
	}
	if err := w.ctx.Err(); err != nil {
		w.err = err
		return err
	}
	chunks := int(chunksFor(uint64(len(w.buf))))
	if err := w.space(int64(len(w.buf)) + int64(chunks)*entryOverhead); err != nil {
		w.err = err
		return err
	}
	w.err = w.db.Update(func(txn *badger.Txn) error {
		for k := range chunks {
			if err := txn.Set(modelKey(w.gen, w.chunks+k), w.buf[k*chunkSize:min((k+1)*chunkSize, len(w.buf))]); err != nil {
				return err
			}
		}
		return nil
	})
	if w.err != nil {
		return w.err
	}
	w.chunks += chunks
	w.buf = w.buf[:0]
	return nil
}

// commit writes the positions, the blob record b of rec's generation and
// the commit record rec in one transaction, deleting the positions not in
// ps (invariant 3) and the blob records of the superseded generations.
// gcRoom is the free space to leave beyond Badger's reserve.
func (s *Store) commit(ctx context.Context, rec record, b blob, superseded []uint64, ps []input.Position, gcRoom int64) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	// Collect first: a read-write transaction allows one iterator and no
	// writes under it.
	keep := make(map[string]struct{}, len(ps))
	for _, p := range ps {
		keep[string(posKey(p.Topic, p.Partition))] = struct{}{}
	}
	var stale [][]byte
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(posPrefix)})
	for it.Rewind(); it.Valid(); it.Next() {
		if _, ok := keep[string(it.Item().Key())]; !ok {
			stale = append(stale, it.Item().KeyCopy(nil))
		}
	}
	it.Close()

	set := func(k, v []byte) error {
		err := txn.Set(k, v)
		if errors.Is(err, badger.ErrTxnTooBig) {
			return fmt.Errorf("state: save generation %d: %w (%d positions): %w",
				rec.generation, ErrTooLarge, len(ps), err)
		}
		if err != nil {
			return fmt.Errorf("state: save generation %d: %w", rec.generation, err)
		}
		return nil
	}
	for _, g := range superseded {
		stale = append(stale, blobKey(g))
	}
	for _, k := range stale {
		if err := txn.Delete(k); err != nil {
			return fmt.Errorf("state: save: delete %q: %w", k, err)
		}
	}
	if err := set(blobKey(rec.generation), b.encode()); err != nil {
		return err
	}
	for _, p := range ps {
		if err := set(posKey(p.Topic, p.Partition), binary.BigEndian.AppendUint64(nil, uint64(p.Offset))); err != nil {
			return err
		}
	}
	if err := set([]byte(recordKey), rec.encode()); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("state: save: %w", err)
	}
	size := int64(len(stale)+len(ps)+2) * entryOverhead
	for _, p := range ps {
		size += int64(len(p.Topic))
	}
	if err := s.ensureSpace(size, gcRoom); err != nil {
		return fmt.Errorf("state: save generation %d: %w", rec.generation, err)
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("state: save: commit generation %d: %w", rec.generation, err)
	}
	return nil
}

// Load returns the last committed checkpoint, read from one consistent
// snapshot. ok is false, with a nil error, when no checkpoint was ever
// saved. A mismatch between the data and its commit record is ErrCorrupt.
func (s *Store) Load(ctx context.Context) (cp Checkpoint, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return Checkpoint{}, false, fmt.Errorf("state: load: %w", err)
	}
	s.readMu.RLock()
	defer s.readMu.RUnlock()
	if s.closed {
		return Checkpoint{}, false, ErrClosed
	}
	err = s.db.View(func(txn *badger.Txn) error {
		rec, found, err := readRecord(txn)
		if err != nil || !found {
			return err
		}
		cp, err = loadIn(ctx, txn, rec)
		ok = err == nil
		return err
	})
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("state: load: %w", err)
	}
	return cp, ok, nil
}

func loadIn(ctx context.Context, txn *badger.Txn, rec record) (Checkpoint, error) {
	cp := Checkpoint{
		Version:    rec.version,
		Generation: rec.generation,
		Base:       rec.base,
		SavedAt:    time.Unix(0, rec.savedAt),
	}
	var deltaBytes uint64
	for gen := rec.base; gen <= rec.generation; gen++ {
		b := rec.v1
		if rec.layout != recordLayoutV1 {
			var err error
			if b, err = readBlob(txn, gen); err != nil {
				return Checkpoint{}, err
			}
		}
		if b.delta != (gen != rec.base) {
			return Checkpoint{}, fmt.Errorf("%w: generation %d of the chain from %d is a delta: %v", ErrCorrupt, gen, rec.base, b.delta)
		}
		if gen == rec.base && b.length != rec.baseLen {
			return Checkpoint{}, fmt.Errorf("%w: base of %d bytes, commit record says %d", ErrCorrupt, b.length, rec.baseLen)
		}
		if gen != rec.base {
			deltaBytes += b.length
			if deltaBytes > rec.deltaBytes {
				return Checkpoint{}, fmt.Errorf("%w: deltas over the %d bytes the commit record says", ErrCorrupt, rec.deltaBytes)
			}
		}
		model, err := readModel(ctx, txn, gen, b)
		if err != nil {
			return Checkpoint{}, err
		}
		if gen == rec.base {
			cp.Model = model
		} else {
			cp.Deltas = append(cp.Deltas, model)
		}
	}
	if deltaBytes != rec.deltaBytes {
		return Checkpoint{}, fmt.Errorf("%w: %d delta bytes, commit record says %d", ErrCorrupt, deltaBytes, rec.deltaBytes)
	}

	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(posPrefix), PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		topic, partition, err := parsePosKey(item.Key())
		if err != nil {
			return Checkpoint{}, err
		}
		var next int64
		if err := item.Value(func(v []byte) error {
			next, err = decodeNext(item.Key(), v)
			return err
		}); err != nil {
			return Checkpoint{}, err
		}
		cp.Positions = append(cp.Positions, input.Position{Topic: topic, Partition: partition, Offset: next})
	}
	if len(cp.Positions) != int(rec.positions) {
		return Checkpoint{}, fmt.Errorf("%w: %d positions, commit record says %d", ErrCorrupt, len(cp.Positions), rec.positions)
	}
	// Keys sort by escaped topic, then zero-padded partition; escaping can
	// reorder topics containing '%' or '/', so sort explicitly.
	slices.SortFunc(cp.Positions, input.ComparePartitions)
	return cp, nil
}

// readBlob reads the blob record of generation gen.
func readBlob(txn *badger.Txn, gen uint64) (blob, error) {
	item, err := txn.Get(blobKey(gen))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return blob{}, fmt.Errorf("%w: generation %d of the chain has no blob record", ErrCorrupt, gen)
	}
	if err != nil {
		return blob{}, fmt.Errorf("read blob record %d: %w", gen, err)
	}
	var b blob
	err = item.Value(func(v []byte) (err error) {
		b, err = decodeBlob(gen, v)
		return err
	})
	return b, err
}

// readModel reads the model bytes generation gen wrote, as b describes
// them, and checks their CRC.
func readModel(ctx context.Context, txn *badger.Txn, gen uint64, b blob) ([]byte, error) {
	model := make([]byte, b.length)
	off := 0
	for i := 0; i < int(b.chunks); i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k := modelKey(gen, i)
		item, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil, fmt.Errorf("%w: generation %d lacks model chunk %d of %d", ErrCorrupt, gen, i, b.chunks)
		}
		if err != nil {
			return nil, fmt.Errorf("read %q: %w", k, err)
		}
		// item.ValueSize is only an estimate for value-log entries: check
		// the length of the value itself.
		want := min(chunkSize, len(model)-off)
		if err := item.Value(func(v []byte) error {
			if len(v) != want {
				return fmt.Errorf("%w: model chunk %q has %d bytes, want %d", ErrCorrupt, k, len(v), want)
			}
			copy(model[off:], v)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("read %q: %w", k, err)
		}
		off += want
	}
	if got := crc32.Checksum(model, castagnoli); got != b.crc {
		return nil, fmt.Errorf("%w: generation %d: model CRC-32C %08x, its record says %08x", ErrCorrupt, gen, got, b.crc)
	}
	return model, nil
}

// Position returns the next offset stored for one partition in the last
// committed checkpoint; ok is false if it has none. It reads only that
// partition's key.
func (s *Store) Position(ctx context.Context, topic string, partition int32) (next int64, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("state: position: %w", err)
	}
	s.readMu.RLock()
	defer s.readMu.RUnlock()
	if s.closed {
		return 0, false, ErrClosed
	}
	k := posKey(topic, partition)
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			next, err = decodeNext(k, v)
			ok = err == nil
			return err
		})
	})
	if err != nil {
		return 0, false, fmt.Errorf("state: position %s/%d: %w", topic, partition, err)
	}
	return next, ok, nil
}
