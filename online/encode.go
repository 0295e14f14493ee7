package online

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
)

// The model encoding: FORMAT.md describes it byte by byte; codec.go has
// its primitives, and every part encodes and decodes its own fields.

// EncodingVersion is the version of the binary model encoding that WriteTo
// writes. ReadModel reads every version: version 1 has no context section
// (its models start with empty context statistics); version 2 has the
// context's EM statistics only (the anchor starts as their copy) and no
// bounds; version 3 is version 2 with the bounds section, written for
// bounded models only; version 4 adds the context's anchor statistics and
// has the bounds section exactly when the configuration bounds the
// tables; version 5 is version 4 with the transition's per-user offsets
// in the user section, written exactly for models with
// Config.TransitionUserOffset; version 6 is version 5's layout (per-user
// offsets exactly with Config.TransitionUserOffset) with the merge
// cursors (MergeFrom) after the counters, written exactly for models that
// have cursors; version 7 names the context's event-type slots (a
// TYPE section after CTXT; until then a slot was a hash of the type, and
// a model read from an older version learns its event types again), with
// CURS exactly when the model has cursors, written exactly for models
// that have seen an event type; version 8 is version 7 with the dwell
// mixture (a DMIX section after CTXT and TYPE) and TYPE exactly when the
// model has event types, written exactly for models with
// Config.DwellDirection "long"; version 9 is version 8 with DMIX without
// its correlation's three statistics and the instrument (a DINS section
// after DMIX), written exactly for those models, which read version 8
// with an empty instrument; version 10 is version 9 with the dwell gate
// (a DGAT section after DINS, dwellgate.go), written exactly for those
// models, which read version 9 with an empty gate; version 11 is version
// 10 with the clock of merged events (a CLCK section after CURS, or after
// CTRS without cursors: clock.go), written exactly for models that merged
// events, which read version 10 with none; version 12 is version 11 with
// the rank instrument (a RINS section after DGAT, context.go), written
// exactly for models with Config.EventOrder and the dwell mixture, which
// read version 11 with an empty one; version 13 is version 12 with each
// user's latest event time (i64[n_u] at the end of USER) and the gap
// since it as the instrument's fifth feature (DINS and RINS), written
// exactly for models with the dwell mixture, which read version 12 and
// before with no times and no moments of the gap; version 14 is version
// 13 with the rank instrument's gap capped at 30 s (shortClickMS) instead
// of 30 minutes, the same layout, written exactly for models with the
// dwell mixture, which read version 13 with RINS's moments of the gap
// dropped (the dwell instrument's, DINS, are read as they were); version
// 15 is version 14 with the gap instrument of streams without dwell or
// event types (a GINS section, RINS's layout, after RINS or, without an
// event order, after DGAT: context.go, gapWeight), written exactly for
// models with the dwell mixture, which read version 14 with an empty one;
// version 16 is version 15 with the context posterior's level (a LEVL
// section after the context's sections: level.go), written exactly for
// models with the dwell mixture, which read version 15 with a level that
// starts from the events that follow; version 17 is version 16 with the
// scale of the gaps counted in events on streams without time (a CGAP
// section after LEVL: countgap.go), written exactly for models with the
// dwell mixture, which read version 16 with an empty scale; version 18 is
// version 17 with the users' priors (userprior.go: three f64 per user after
// the times in USER, and a PRIR section after CGAP), written exactly for
// models with the dwell mixture, which read version 17 with no prior
// learned; version 19 is version 18 with the gap's reach (gapreach.go: a
// GLAM section after PRIR) and the items' priors (itemprior.go: three f64
// per item after the offsets in ITEM, and an IPRI section after GLAM),
// written exactly for models with the dwell mixture, which read version
// 18 with a reach and items' priors that start from the events that
// follow; version 20 is version 19 with the share of the stream that
// looks like random pairs (tail.go: a TAIL section after IPRI), written
// exactly for models with the dwell mixture, which read version 19 with
// statistics that start from the events that follow; version 21 is version
// 20 with the mixture of the gaps that finds bursts (burst.go: a BRST
// section after TAIL), written exactly for models with the dwell mixture,
// which read version 20 with the mixture at its start. So a model without
// per-user offsets, cursors, event types, the dwell mixture, merged
// events or an event order encodes as it did before they existed
// (encodingFor).
const EncodingVersion = 21

// userOffsetVersion is the first encoding version with per-user
// transition offsets; cursorVersion the first with merge cursors.
const (
	userOffsetVersion = 5
	cursorVersion     = 6
	typesVersion      = 7
	dwellMixVersion   = 8
	instrumentVersion = 9
	gateVersion       = 10
	clockVersion      = 11
	rankVersion       = 12
	gapVersion        = 13
	shortGapVersion   = 14
	gapInstVersion    = 15
	levelVersion      = 16
	countGapVersion   = 17
	userPriorVersion  = 18
	gapReachVersion   = 19
	tailVersion       = 20
	burstVersion      = 21
)

// encodingFor is the encoding version of a model with per-user transition
// offsets or not, merge cursors or not, event types or not, the dwell
// mixture or not and merged events (a clock) or not (the rank instrument,
// version 12, comes only with the dwell mixture): 21 with the dwell
// mixture, else 11 with a clock, else 7 with event types, else
// 6 with cursors (from 6 on, the USER section holds the offsets exactly
// when the configuration asks for them), else 5 with offsets, else 4. WriteTo writes it; ReadModel checks a version before 6
// against it (versions 1 to 3 count as 4: they have none).
func encodingFor(userOffsets, cursors, types, dwellMix, clock bool) uint32 {
	switch {
	case dwellMix:
		return burstVersion
	case clock:
		return clockVersion
	case types:
		return typesVersion
	case cursors:
		return cursorVersion
	case userOffsets:
		return userOffsetVersion
	}
	return userOffsetVersion - 1
}

// Encoding is the encoding version WriteTo writes for m (encodingFor): 21
// with the dwell mixture, else 11 with merged events, else 7 with event
// types, else 6 with merge cursors, else 5 with per-user transition
// offsets, else 4.
func (m *Model) Encoding() uint32 {
	return encodingFor(m.cfg.TransitionUserOffset, len(m.cursors) > 0, len(m.context.types) > 0, m.context.long, m.hasClock())
}

var modelMagic = [8]byte{'R', 'G', 'B', 'T', 'M', 'O', 'D', 'L'}

// ErrCorrupt is returned by ReadModel for input that is not a model
// encoding of a known version, or is inconsistent.
var ErrCorrupt = errors.New("corrupt model encoding")

// WriteTo writes the whole model, deterministically, to w.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	conf, err := json.Marshal(m.cfg)
	if err != nil {
		return 0, fmt.Errorf("encode config: %w", err)
	}
	source, err := m.src.MarshalBinary()
	if err != nil {
		return 0, fmt.Errorf("encode random source: %w", err)
	}
	e := &encoder{w: bufio.NewWriterSize(w, 1<<16)}
	e.write(modelMagic[:])
	e.u32(m.Encoding())
	e.section("CONF", func(e *encoder) { e.write(conf) })
	e.section("RAND", func(e *encoder) { e.write(source) })
	e.section("CTRS", m.encodeCounters)
	if len(m.cursors) > 0 {
		e.section("CURS", m.encodeCursors)
	}
	if m.hasClock() {
		e.section("CLCK", m.encodeClock)
	}
	e.section("USER", func(e *encoder) {
		m.users.encode(e)
		m.transition.encodeUserOffsets(e)
		if m.users.times != nil {
			e.int64s(m.users.times)
		}
		if m.users.prior != nil {
			e.floats(m.users.prior)
		}
	})
	e.section("ITEM", func(e *encoder) {
		m.items.encode(e)
		m.transition.encodeOffsets(e)
		if m.itemPriors != nil {
			e.floats(m.itemPriors)
		}
	})
	m.encodeNets(e)
	e.section("WIND", m.mixture.encodeWindow)
	e.section("COOC", func(e *encoder) { e.u8(m.cooc.kind()); m.cooc.encode(e) })
	m.encodeContext(e)
	if m.popular.items != nil {
		e.section("POPR", m.popular.encode)
	}
	if m.cfg.bounded() {
		e.section("BNDS", m.encodeBounds)
	}
	e.section("END.", func(*encoder) {})
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return e.n, fmt.Errorf("write model: %w", e.err)
	}
	return e.n, nil
}

// encodeContext writes the context's sections, which a model and a delta
// both hold whole: CTXT, then TYPE when the model has event types, then
// DMIX, DINS and DGAT when it reads dwell as longer-is-genuine, then RINS
// when it has an event order as well, then GINS, LEVL, CGAP, PRIR, GLAM,
// IPRI, TAIL and BRST with DMIX.
func (m *Model) encodeContext(e *encoder) {
	e.section("CTXT", m.context.encode)
	if len(m.context.types) > 0 {
		e.section("TYPE", m.context.encodeTypes)
	}
	if m.context.long {
		e.section("DMIX", m.context.mix.encode)
		e.section("DINS", m.context.inst.encode)
		e.section("DGAT", m.context.gate.encode)
	}
	if m.context.ranks != nil {
		e.section("RINS", m.context.rank.encode)
	}
	if m.context.long {
		e.section("GINS", m.context.gap.encode)
		e.section("LEVL", m.context.level.encode)
		e.section("CGAP", m.context.countGap.encode)
		e.section("PRIR", m.context.prior.encode)
		e.section("GLAM", m.context.reach.encode)
		e.section("IPRI", m.context.itemLevel.encode)
		e.section("TAIL", m.context.tail.encode)
		e.section("BRST", m.context.burst.encode)
	}
}

// contextVersions are the first versions of an encoding kind (a model's
// or a delta's) with each part of the context after CTXT: event types,
// the dwell mixture, the instrument, the dwell gate, the rank instrument,
// the gap as the instruments' fifth feature, the rank instrument's gap
// capped at shortClickMS, the gap instrument, the posterior's level, the
// counted gaps' scale, the users' priors, the gap's reach with the
// items' priors, the tail, and the bursts' mixture.
type contextVersions struct {
	types, mix, inst, gate, ranks, gap, shortGap, gapInst, level, countGap, prior, reach, tail, burst uint32
}

// modelContext and deltaContext are a model's and a delta's.
var (
	modelContext = contextVersions{typesVersion, dwellMixVersion, instrumentVersion, gateVersion, rankVersion, gapVersion, shortGapVersion, gapInstVersion, levelVersion, countGapVersion, userPriorVersion, gapReachVersion, tailVersion, burstVersion}
	deltaContext = contextVersions{deltaTypesVersion, deltaDwellMixVersion, deltaInstrumentVersion, deltaGateVersion, deltaRankVersion, deltaGapVersion, deltaShortGapVersion, deltaGapInstVersion, deltaLevelVersion, deltaCountGapVersion, deltaPriorVersion, deltaGapReachVersion, deltaTailVersion, deltaBurstVersion}
)

// decodeContextAfter reads the context's sections after CTXT of an
// encoding of the given version, whose kind has the parts from the
// versions of v on: TYPE always from v.types to v.mix (exclusive), where
// present from v.mix on; DMIX exactly when the configuration reads dwell
// as longer-is-genuine, which an encoding before v.mix cannot hold, with
// its correlation's statistics before v.inst; DINS with DMIX from v.inst
// on (before, the instrument starts empty); DGAT with DMIX from v.gate on
// (before, the gate starts empty); RINS from v.ranks on exactly when the
// configuration has an event order (before, the rank instrument starts
// empty); DINS and RINS of oldInstrumented features before v.gap (the
// gap's moments then start empty), RINS's gap moments dropped before
// v.shortGap, whose gap was capped at sessionGapMS (instrumentStats.forgetGap),
// GINS with DMIX from v.gapInst on (before, the gap instrument starts
// empty), LEVL with DMIX from v.level on (before, a delta leaves the
// level as it was, and ReadModel starts it), CGAP with DMIX from
// v.countGap on (before, a delta leaves the scale as it was, and a model's
// starts empty), PRIR with DMIX from v.prior on and GLAM and IPRI with
// DMIX from v.reach on, TAIL with DMIX from v.tail on and BRST with DMIX
// from v.burst on (before, the same).
func (m *Model) decodeContextAfter(d *decoder, version uint32, v contextVersions) {
	switch {
	case version >= v.mix && d.has("TYPE"), version >= v.types && version < v.mix:
		d.section("TYPE")
		m.context.decodeTypes(d)
	case version < v.types:
		m.context.forgetTypes()
	}
	if !m.context.long {
		return
	}
	if version < v.mix {
		d.fail("encoding version %d with dwell_direction %q", version, m.cfg.DwellDirection)
		return
	}
	n := instrumented
	if version < v.gap {
		n = oldInstrumented
	}
	d.section("DMIX")
	m.context.mix.decode(d, version < v.inst)
	if version >= v.inst {
		d.section("DINS")
		m.context.inst.decode(d, n)
	}
	if version >= v.gate {
		d.section("DGAT")
		m.context.gate.decode(d)
	}
	if version >= v.ranks && m.context.ranks != nil {
		d.section("RINS")
		m.context.rank.decode(d, n, "rank instrument")
		if version < v.shortGap {
			m.context.rank.stats.forgetGap()
		}
	}
	if version >= v.gapInst {
		d.section("GINS")
		m.context.gap.decode(d, instrumented, "gap instrument")
	}
	if version >= v.level {
		d.section("LEVL")
		m.context.level.decode(d)
	}
	if version >= v.countGap {
		d.section("CGAP")
		m.context.countGap.decode(d)
	}
	if version >= v.prior {
		d.section("PRIR")
		m.context.prior.decode(d, "user")
	}
	if version >= v.reach {
		d.section("GLAM")
		m.context.reach.decode(d)
		d.section("IPRI")
		m.context.itemLevel.decode(d, "item")
	}
	if version >= v.tail {
		d.section("TAIL")
		m.context.tail.decode(d)
	}
	if version >= v.burst {
		d.section("BRST")
		m.context.burst.decode(d)
	}
}

// encodeNets writes the sections of the networks and the mixture, which
// a model and a delta both hold whole: CLSF, TRAN, GMMX.
func (m *Model) encodeNets(e *encoder) {
	e.section("CLSF", func(e *encoder) { m.classifier.encode(e); m.noisyHead.encode(e) })
	e.section("TRAN", func(e *encoder) { m.transition.encode(e); m.schedule.encodeMeans(e) })
	e.section("GMMX", m.mixture.encodeGMM)
}

// decodeNets reads what encodeNets writes.
func (m *Model) decodeNets(d *decoder) {
	d.section("CLSF")
	m.classifier.decode(d, m.k, m.d)
	m.noisyHead.decode(d, m.k, m.d)
	d.section("TRAN")
	m.transition.decode(d)
	m.schedule.decodeMeans(d, m.k)
	d.section("GMMX")
	m.mixture.decodeGMM(d)
}

// encodeCounters writes the scalars of several parts: the schedule's
// counters, the popularity ring's and the mixture window's positions.
func (m *Model) encodeCounters(e *encoder) {
	s := &m.schedule
	for _, v := range []uint64{s.events, s.distilled, s.refits, s.numErrors, s.periodCount, m.popular.pushed} {
		e.u64(v)
	}
	e.f64(s.rho)
	e.u8(boolByte(s.hasLastMean))
	e.u32(uint32(m.mixture.filled))
	e.u32(uint32(m.mixture.next))
}

// decodeCounters reads what encodeCounters writes and checks it against
// the configuration.
func (m *Model) decodeCounters(d *decoder) {
	s := &m.schedule
	s.events, s.distilled, s.refits, s.numErrors = d.u64(), d.u64(), d.u64(), d.u64()
	s.periodCount, m.popular.pushed = d.u64(), d.u64()
	s.merged, s.periods = 0, s.events/uint64(m.cfg.RefitEvery) // no merged events (the CLCK section says otherwise)
	s.rho = d.f64()
	s.hasLastMean = d.u8() == 1
	m.mixture.filled, m.mixture.next = int(d.u32()), int(d.u32())
	window := m.cfg.GMMWindow
	if d.err == nil && (m.mixture.filled > window || m.mixture.next >= window || !(s.rho > 0 && s.rho < 1)) {
		d.fail("counters out of range")
	}
}

// Lener is an input that knows an upper bound of the bytes it can still
// deliver, as bytes.Reader's Len does; a negative Len means unknown.
// ReadModel then allocates each table whose declared size the input can
// still back at once, instead of growing it as data arrives: decoding
// needs about the model's own memory, not twice that.
type Lener interface{ Len() int }

// ReadModel reads a model written by WriteTo. The returned model continues
// exactly where the written one stopped, random source included. If r is a
// Lener, its tables are allocated once rather than grown.
func ReadModel(r io.Reader) (*Model, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<16), left: 12, avail: -1}
	if l, ok := r.(Lener); ok {
		d.avail = int64(l.Len())
	}
	cfg, version, err := d.header()
	if err != nil {
		return nil, err
	}
	m := newModel(cfg, &rand.PCG{})
	d.section("RAND")
	d.randomSource(m.src)
	d.section("CTRS")
	m.decodeCounters(d)
	if version == cursorVersion || (version >= typesVersion && d.has("CURS")) {
		d.section("CURS")
		m.decodeCursors(d)
	}
	if version >= clockVersion && d.has("CLCK") {
		d.section("CLCK")
		m.decodeClock(d)
	}
	d.section("USER")
	m.users.decode(d)
	m.transition.decodeUserOffsets(d, m.users.len())
	m.users.decodeTimes(d, version >= gapVersion)
	m.users.prior = decodePriorRows(d, m.users.prior, m.users.len(), version >= userPriorVersion, "user")
	d.section("ITEM")
	m.items.decode(d)
	m.transition.decodeOffsets(d, m.items.len())
	m.itemPriors = decodePriorRows(d, m.itemPriors, m.items.len(), version >= gapReachVersion, "item")
	m.decodeNets(d)
	d.section("WIND")
	m.mixture.decodeWindow(d, cfg.GMMWindow)
	d.section("COOC")
	m.decodeCooccurrence(d)
	if version >= 2 {
		d.section("CTXT")
		if version >= 4 {
			m.context.decode(d)
		} else {
			m.context.decodeEM(d)
		}
	}
	m.decodeContextAfter(d, version, modelContext)
	if m.context.long && version < levelVersion {
		// The model learned its first events before the level existed:
		// they count towards its burn-in, and its mean starts empty.
		m.context.level.seen = min(float64(m.schedule.events), levelBurnIn)
	}
	m.users.checkRecent(d, m.items.len())
	if m.popular.items != nil {
		d.section("POPR")
		m.popular.decode(d, m.items.len())
	}
	m.checkRows(d)
	if cfg.bounded() {
		d.section("BNDS")
		m.decodeBounds(d)
	}
	if d.end(); d.err != nil {
		return nil, d.err
	}
	if !m.users.buildIndex() || !m.items.buildIndex() {
		return nil, fmt.Errorf("%w: duplicate ids", ErrCorrupt)
	}
	return m, nil
}

// header reads the magic, the version and the configuration.
func (d *decoder) header() (Config, uint32, error) {
	var magic [8]byte
	d.read(magic[:])
	if d.err == nil && magic != modelMagic {
		return Config{}, 0, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	version := d.u32()
	if d.err == nil && (version < 1 || version > EncodingVersion) {
		return Config{}, 0, fmt.Errorf("%w: encoding version %d, this build reads 1 to %d", ErrCorrupt, version, EncodingVersion)
	}
	d.section("CONF")
	if d.err == nil && d.left > 1<<20 {
		d.fail("config of %d bytes", d.left)
	}
	var cfg Config
	if d.err == nil {
		b := make([]byte, d.left)
		d.read(b)
		if err := json.Unmarshal(b, &cfg); err != nil {
			d.fail("config: %v", err)
		} else if err := cfg.Validate(); err != nil {
			d.fail("config: %v", err)
		} else if bounded := cfg.bounded(); version < 4 && bounded != (version == 3) {
			// Version 3 is the encoding of a model with bounds, and only
			// of one; versions 1 and 2 have no bounds.
			d.fail("encoding version %d with a configuration that bounds the tables: %v", version, bounded)
		} else if version < cursorVersion && max(version, 4) != encodingFor(cfg.TransitionUserOffset, false, false, false, false) {
			// Version 5 is the encoding of a model with per-user offsets,
			// and only of one, until version 6, where the configuration
			// says (encodingFor).
			d.fail("encoding version %d with transition_user_offset %v", version, cfg.TransitionUserOffset)
		} else if version < dwellMixVersion && cfg.DwellDirection == DwellLong {
			d.fail("encoding version %d with dwell_direction %q", version, cfg.DwellDirection)
		} else if version == rankVersion && (len(cfg.EventOrder) == 0 || cfg.DwellDirection != DwellLong) {
			// Version 12 is the encoding of a model with the rank
			// instrument, and only of one.
			d.fail("encoding version %d without event_order and dwell_direction long", version)
		} else if version >= gapVersion && cfg.DwellDirection != DwellLong {
			// Versions 13 and 14 are the encodings of a model with the
			// dwell mixture, and only of one.
			d.fail("encoding version %d without dwell_direction long", version)
		}
	}
	if d.err != nil {
		return Config{}, 0, d.err
	}
	return cfg.WithDefaults(), version, nil
}

// randomSource reads the section's bytes into src.
func (d *decoder) randomSource(src *rand.PCG) {
	if d.err == nil && d.left > 64 {
		d.fail("random state of %d bytes", d.left)
	}
	if d.err == nil {
		b := make([]byte, d.left)
		d.read(b)
		if err := src.UnmarshalBinary(b); err != nil {
			d.fail("random state: %v", err)
		}
	}
}

// decodeCooccurrence reads the co-occurrence kind and state; the kind must
// be the configured one.
func (m *Model) decodeCooccurrence(d *decoder) {
	switch kind := d.u8(); {
	case d.err != nil:
	case kind == m.cooc.kind():
		m.cooc.decode(d, m.users.len(), m.items.len())
	default:
		d.fail("co-occurrence kind %d does not match the config", kind)
	}
}

// end reads the empty END. section and checks that nothing follows.
func (d *decoder) end() {
	d.section("END.")
	if d.err == nil && d.left != 0 {
		d.fail("END section is not empty")
	}
	if d.err == nil {
		if _, err := d.r.ReadByte(); err == nil {
			d.fail("data after the END section")
		} else if !errors.Is(err, io.EOF) {
			d.err = err
		}
	}
}
