package service

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"denoiser/online"
	"denoiser/state"
)

// The records of the shared topic (the sharer writes them) and
// SharedHistory, which reads them back for a replay.
//
// Two kinds of record, all integers little-endian:
//   - a chunk of a delta (a publication): sharedMagic, version (u32),
//     writer (u64), partition (u32), from (i64), seq (i64), chunk and
//     chunks (u32 each), then the chunk's online.Shared encoding; key
//     "partition/seq/chunk";
//   - a merge point: mergeMagic, version (u32), writer (u64), chain (u32),
//     k (u32), partition (u32), start (i64), at (i64), cursors and count
//     (u32 each), then the cursors (partition u32, seq i64 each), then
//     count deltas merged, in the order merged (writer u64, partition
//     u32, seq i64 each); key "partition/merge/at". It is the k-th merge
//     point of partition p's model, the chain-th that this writer began
//     to share, at p's position start and with those cursors (what the
//     checkpoint it was restored from had merged): it merged the deltas
//     after stepping p's records below offset at and before stepping the
//     record at at.
//
// The keys are for people reading the topic.
const (
	sharedMagic       = "DNSR"
	sharedVersion     = 1
	sharedHeaderBytes = 4 + 4 + 8 + 4 + 8 + 8 + 4 + 4
	mergeMagic        = "DNSM"
	mergeVersion      = 1
	mergeHeaderBytes  = 4 + 4 + 8 + 4 + 4 + 4 + 8 + 8 + 4 + 4
	mergeCursorBytes  = 4 + 8
	mergeIDBytes      = 8 + 4 + 8
	// sharedChunkBytes is the size a publication is cut at.
	sharedChunkBytes = 1 << 20
)

// sharedDelta is one publication of a partition model, read back.
type sharedDelta struct {
	id     deltaID
	from   int64
	chunks []*online.Shared
	bytes  int
	start  int64 // deltaChunks.read when its first chunk came
	first  int64 // the shared topic's offset of its first chunk (-1: not known)
}

// deltaID names a publication: its writer, its partition and its seq.
type deltaID struct {
	writer uint64
	q      int32
	seq    int64
}

// chainID names a model's chain of merge points: its writer (a member's
// run) and its number among the writer's.
type chainID struct {
	writer uint64
	n      uint32
}

// mergePoint is the k-th merge point of a chain of partition p's model.
type mergePoint struct {
	chain   chainID
	k       uint32
	p       int32
	start   int64           // the chain's
	cursors []online.Cursor // the chain's at its start
	at      int64
	ids     []deltaID
}

// encodeMergePoint is mp's record.
func encodeMergePoint(mp *mergePoint) state.SharedRecord {
	le := binary.LittleEndian
	v := make([]byte, mergeHeaderBytes, mergeHeaderBytes+len(mp.cursors)*mergeCursorBytes+len(mp.ids)*mergeIDBytes)
	copy(v, mergeMagic)
	le.PutUint32(v[4:], mergeVersion)
	le.PutUint64(v[8:], mp.chain.writer)
	le.PutUint32(v[16:], mp.chain.n)
	le.PutUint32(v[20:], mp.k)
	le.PutUint32(v[24:], uint32(mp.p))
	le.PutUint64(v[28:], uint64(mp.start))
	le.PutUint64(v[36:], uint64(mp.at))
	le.PutUint32(v[44:], uint32(len(mp.cursors)))
	le.PutUint32(v[48:], uint32(len(mp.ids)))
	for _, c := range mp.cursors {
		v = le.AppendUint32(v, uint32(c.Partition))
		v = le.AppendUint64(v, uint64(c.Seq))
	}
	for _, id := range mp.ids {
		v = le.AppendUint64(v, id.writer)
		v = le.AppendUint32(v, uint32(id.q))
		v = le.AppendUint64(v, uint64(id.seq))
	}
	key := strconv.Itoa(int(mp.p)) + "/merge/" + strconv.FormatInt(mp.at, 10)
	return state.SharedRecord{Key: []byte(key), Value: v}
}

// parseMergePoint decodes a merge point's record.
func parseMergePoint(v []byte) (*mergePoint, error) {
	le := binary.LittleEndian
	if len(v) < mergeHeaderBytes {
		return nil, errors.New("merge point: short record")
	}
	if ver := le.Uint32(v[4:]); ver != mergeVersion {
		return nil, fmt.Errorf("merge point version %d, this build reads %d", ver, mergeVersion)
	}
	mp := &mergePoint{chain: chainID{writer: le.Uint64(v[8:]), n: le.Uint32(v[16:])}, k: le.Uint32(v[20:]), p: int32(le.Uint32(v[24:]))}
	mp.start, mp.at = int64(le.Uint64(v[28:])), int64(le.Uint64(v[36:]))
	nc, n := uint64(le.Uint32(v[44:])), uint64(le.Uint32(v[48:]))
	if mp.p < 0 || mp.start < -1 || mp.at < max(mp.start, 0) || uint64(len(v)) != mergeHeaderBytes+nc*mergeCursorBytes+n*mergeIDBytes {
		return nil, fmt.Errorf("merge point header: partition %d, start %d, at %d, %d cursors and %d deltas in %d bytes", mp.p, mp.start, mp.at, nc, n, len(v))
	}
	b := v[mergeHeaderBytes:]
	mp.cursors = make([]online.Cursor, nc)
	for i := range mp.cursors {
		mp.cursors[i] = online.Cursor{Partition: int32(le.Uint32(b)), Seq: int64(le.Uint64(b[4:]))}
		b = b[mergeCursorBytes:]
	}
	mp.ids = make([]deltaID, n)
	for i := range mp.ids {
		mp.ids[i] = deltaID{writer: le.Uint64(b), q: int32(le.Uint32(b[8:])), seq: int64(le.Uint64(b[12:]))}
		b = b[mergeIDBytes:]
	}
	return mp, nil
}

// parseShared decodes a chunk of a delta.
func parseShared(v []byte) (id deltaID, from int64, chunk, chunks int, sh *online.Shared, err error) {
	if len(v) < sharedHeaderBytes || string(v[:4]) != sharedMagic {
		return id, 0, 0, 0, nil, errors.New("not a shared delta")
	}
	le := binary.LittleEndian
	if ver := le.Uint32(v[4:]); ver != sharedVersion {
		return id, 0, 0, 0, nil, fmt.Errorf("shared delta version %d, this build reads %d", ver, sharedVersion)
	}
	id = deltaID{writer: le.Uint64(v[8:]), q: int32(le.Uint32(v[16:])), seq: int64(le.Uint64(v[28:]))}
	from = int64(le.Uint64(v[20:]))
	chunk, chunks = int(le.Uint32(v[36:])), int(le.Uint32(v[40:]))
	if id.q < 0 || id.seq < 0 || from >= id.seq || chunks < 1 || chunk >= chunks {
		return id, 0, 0, 0, nil, fmt.Errorf("shared delta header: partition %d, from %d, seq %d, chunk %d of %d", id.q, from, id.seq, chunk, chunks)
	}
	sh = new(online.Shared)
	if err := sh.UnmarshalBinary(v[sharedHeaderBytes:]); err != nil {
		return id, 0, 0, 0, nil, err
	}
	return id, from, chunk, chunks, sh, nil
}

// isMergePoint reports whether v is a merge point's record.
func isMergePoint(v []byte) bool { return len(v) >= 4 && string(v[:4]) == mergeMagic }

// deltaChunks puts the chunks of each delta back together, in the topic's
// order.
type deltaChunks struct {
	partial map[deltaID]*sharedDelta
	read    int64 // bytes of chunks read so far
}

// add takes the value of the topic's next record, at offset off (-1: not
// known), and returns the delta it completes, if any. A merge point is not
// a delta (nil, nil). A delta whose first chunks were not read
// (retention, a send that failed) is never complete.
func (c *deltaChunks) add(off int64, v []byte) (*sharedDelta, error) {
	if isMergePoint(v) {
		return nil, nil
	}
	id, from, chunk, chunks, shared, err := parseShared(v)
	if err != nil {
		return nil, err
	}
	if c.partial == nil {
		c.partial = map[deltaID]*sharedDelta{}
	}
	c.read += int64(len(v))
	d := c.partial[id]
	if d == nil {
		if chunk != 0 {
			return nil, nil
		}
		d = &sharedDelta{id: id, from: from, start: c.read, first: off}
		c.partial[id] = d
	}
	if chunk != len(d.chunks) {
		delete(c.partial, id)
		return nil, nil
	}
	d.chunks = append(d.chunks, shared)
	d.bytes += len(v)
	if len(d.chunks) < chunks {
		return nil, nil
	}
	delete(c.partial, id)
	return d, nil
}

// prune drops the incomplete deltas whose first chunk came more than
// horizon bytes of chunks ago, and returns how many it dropped. A delta
// whose writer stopped sending it (a failed append, a crash between two
// chunks) never completes; without pruning, a reader that runs for long
// would keep its chunks for ever. The chunks of one delta are appended
// one after another by one sender, so those of a delta still being sent
// lie far closer together than the horizon the sharer uses (its memory
// of complete deltas, 64 MiB).
func (c *deltaChunks) prune(horizon int64) int {
	n := 0
	for id, d := range c.partial {
		if c.read-d.start > horizon {
			delete(c.partial, id)
			n++
		}
	}
	return n
}

// SharedHistory is what a shared topic recorded (state_layout partition,
// docs/design/partitions.md): every delta and every merge point, read back
// in the topic's order, so that a replay of one input partition merges
// what the live partition model merged, where it merged it (Merges). It
// holds every delta it is given.
type SharedHistory struct {
	chunks deltaChunks
	deltas map[deltaID]*sharedDelta
	chains map[chainID]*mergeChain
	n      int // chains
}

// mergeChain is one model's merge points.
type mergeChain struct {
	first  *mergePoint // its first record read: p, start and cursors
	order  int         // of that record in the topic
	points []*mergePoint
	// Of the sharer's recentPoints only: the points dropped from the
	// front, the offset of the last of them (-1: none), and whether a
	// point is missing between two read back.
	dropped int
	lowAt   int64
	gap     bool
}

// NewSharedHistory returns an empty history.
func NewSharedHistory() *SharedHistory {
	return &SharedHistory{deltas: map[deltaID]*sharedDelta{}, chains: map[chainID]*mergeChain{}}
}

// Add takes the value of the shared topic's next record, in the topic's
// order. A record it cannot read is an error, and changes nothing. A
// record appended twice (a send tried again) counts once.
func (h *SharedHistory) Add(v []byte) error {
	if !isMergePoint(v) {
		d, err := h.chunks.add(-1, v)
		if d != nil && h.deltas[d.id] == nil {
			h.deltas[d.id] = d
		}
		return err
	}
	mp, err := parseMergePoint(v)
	if err != nil {
		return err
	}
	c := h.chains[mp.chain]
	if c == nil {
		c = &mergeChain{first: mp, order: h.n}
		h.chains[mp.chain] = c
		h.n++
	}
	if c.first.p != mp.p || c.first.start != mp.start {
		return fmt.Errorf("merge point of partition %d from %d in the chain of partition %d from %d", mp.p, mp.start, c.first.p, c.first.start)
	}
	switch k := int(mp.k); {
	case k < len(c.points):
		return nil // sent twice
	case k > len(c.points):
		return fmt.Errorf("partition %d: merge point %d of a chain follows point %d: the points between are not in the log", mp.p, k, len(c.points)-1)
	}
	c.points = append(c.points, mp)
	return nil
}

// Merges returns the merge points of partition p's model. A model that
// began at p's position s with cursors C (a restore from the checkpoint
// at s) holds the points of the chain before it that are below s, and
// those at s that merged nothing beyond C; it goes on with its own. The
// chains are taken by their start, then in the topic's order, and the
// last one's points, with the points of those it began from, are the
// merges of the model that wrote p's latest output. A merge point that
// names a delta the history does not hold (retention deleted it, or it
// was never read back) is an error.
func (h *SharedHistory) Merges(p int32) (*Merges, error) {
	var chains []*mergeChain
	for _, c := range h.chains {
		if c.first.p == p {
			chains = append(chains, c)
		}
	}
	points, err := withDeltas(resolveChains(chains), h.deltas)
	if err != nil {
		return nil, fmt.Errorf("partition %d %w: it is not in the shared log", p, err)
	}
	return &Merges{points: points}, nil
}

// withDeltas returns points with the deltas they name, an error if deltas
// lacks one.
func withDeltas(points []*mergePoint, deltas map[deltaID]*sharedDelta) ([]resolvedPoint, error) {
	out := make([]resolvedPoint, len(points))
	for i, mp := range points {
		out[i] = resolvedPoint{at: mp.at, ids: mp.ids}
		for _, id := range mp.ids {
			d := deltas[id]
			if d == nil {
				return nil, fmt.Errorf("merged the delta of partition %d at seq %d at offset %d", id.q, id.seq, mp.at)
			}
			out[i].deltas = append(out[i].deltas, d)
		}
	}
	return out, nil
}

// resolveChains returns the merge points of the model that wrote a
// partition's latest output, given the partition's chains
// (SharedHistory.Merges). It sorts chains by their start, then in the
// topic's order.
func resolveChains(chains []*mergeChain) []*mergePoint {
	slices.SortFunc(chains, func(a, b *mergeChain) int {
		if a.first.start != b.first.start {
			return cmp.Compare(a.first.start, b.first.start)
		}
		return a.order - b.order
	})
	var points []*mergePoint
	for _, c := range chains {
		keep := 0
		for keep < len(points) && heldBy(points[keep], c.first) {
			keep++
		}
		points = append(points[:keep], c.points...)
	}
	return points
}

// heldBy reports whether the checkpoint that a chain began from (c, its
// first point) holds merge point mp of an earlier chain: mp is below c's
// start, or at it and merged nothing past c's cursors.
func heldBy(mp, c *mergePoint) bool {
	if mp.at != c.start {
		return mp.at < c.start
	}
	for _, id := range mp.ids {
		j, ok := slices.BinarySearchFunc(c.cursors, id.q, func(cu online.Cursor, q int32) int { return cmp.Compare(cu.Partition, q) })
		if !ok || id.seq > c.cursors[j].Seq {
			return false
		}
	}
	return true
}

// Merges are one partition model's merge points (SharedHistory.Merges),
// applied in order as a replay steps the partition's records.
type Merges struct {
	points []resolvedPoint
	next   int
}

type resolvedPoint struct {
	at     int64
	deltas []*sharedDelta
	ids    []deltaID // the deltas' (recorded again by a window: recordWindow)
}

// Len returns the number of merge points.
func (ms *Merges) Len() int { return len(ms.points) }

// Deltas returns the deltas the merge points merge in all.
func (ms *Merges) Deltas() int {
	n := 0
	for _, pt := range ms.points {
		n += len(pt.deltas)
	}
	return n
}

// Apply merges into m every merge point not applied yet at or before
// offset, the input offset of the record m steps next, as the live model
// did (a refused delta is refused again), and returns how many deltas it
// merged and refused. m must share (online.Model.StartSharing).
func (ms *Merges) Apply(m *online.Model, offset int64) (merged, refused int) {
	for ; ms.next < len(ms.points) && ms.points[ms.next].at <= offset; ms.next++ {
		for _, d := range ms.points[ms.next].deltas {
			if mergeDelta(m, d) != nil { // the live model's refusal, reproduced
				refused++
			} else {
				merged++
			}
		}
	}
	return merged, refused
}

// sharedLine is one record of the shared topic in a file (DumpShared,
// ReadSharedHistory): a JSON line, the value base64-encoded.
type sharedLine struct {
	Offset int64  `json:"offset"`
	Key    string `json:"key"`
	Value  []byte `json:"value"`
}

// DumpShared writes every record that cfg's shared topic (sharing.topic)
// holds now, from the first it retains to its end, to w as JSON lines
// ({"offset", "key", "value" in base64}), and returns how many. It is
// what `denoiser replay --shared` reads. A topic that does not exist is an
// error (it is not created).
func DumpShared(ctx context.Context, cfg Config, w io.Writer) (int, error) {
	cfg = cfg.WithDefaults()
	if err := CheckSharedLog(cfg); err != nil {
		return 0, err
	}
	lg, err := state.OpenShared(ctx, state.SharedConfig{
		Brokers: cfg.Kafka.Brokers, Topic: cfg.Sharing.Topic, Existing: true, Timeout: cfg.Kafka.RequestTimeout,
	})
	if err != nil {
		return 0, err
	}
	enc := json.NewEncoder(w)
	n := 0
	var werr error
	_, err = lg.Read(ctx, -1, func(off int64, key, value []byte) {
		if werr == nil {
			werr = enc.Encode(sharedLine{Offset: off, Key: string(key), Value: value})
			n++
		}
	})
	return n, errors.Join(err, werr, lg.Close())
}

// CheckSharedLog says what a configuration lacks for DumpShared to read
// its shared topic, naming the setting (errors wrap ErrConfig): only the
// models of state_layout partition share, so under the default layout
// there is no shared topic, and its name defaults from the input topic.
func CheckSharedLog(cfg Config) error {
	cfg = cfg.WithDefaults()
	var errs []error
	if len(cfg.Kafka.Brokers) == 0 {
		errs = append(errs, fieldError("kafka.brokers", "none given: the shared topic is read from the brokers of denoiser run", "127.0.0.1:9092"))
	}
	switch {
	case cfg.StateLayout != online.LayoutPartition:
		errs = append(errs, fieldError("state_layout", string(cfg.StateLayout)+": only the models of state_layout partition share what they learn, so there is no shared topic to read; give the configuration of the run that shared", string(online.LayoutPartition)))
	case cfg.Sharing.Topic == SharingOff:
		errs = append(errs, fieldError("sharing.topic", "is off: the run shared nothing", "GROUP.INPUT.shared"))
	case cfg.Sharing.Topic == "":
		errs = append(errs, fieldError("kafka.input_topic", "none given: the shared topic's name is GROUP.INPUT.shared unless sharing.topic names it", "clicks"))
	}
	return errors.Join(errs...)
}

// ReadSharedHistory reads a file that DumpShared wrote into a history.
func ReadSharedHistory(r io.Reader) (*SharedHistory, error) {
	h := NewSharedHistory()
	dec := json.NewDecoder(r)
	for line := 1; ; line++ {
		var l sharedLine
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			return h, nil
		} else if err != nil {
			return nil, fmt.Errorf("record %d: %w", line, err)
		}
		if err := h.Add(l.Value); err != nil {
			return nil, fmt.Errorf("record %d (offset %d): %w", line, l.Offset, err)
		}
	}
}
