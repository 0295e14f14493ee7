package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"denoiser/consumer/input"
	"denoiser/online"
)

// smallConfig makes every phase of the model (warm-up, distillation, GMM
// refits, ρ relaxation) happen within a few thousand events, with small
// buffers, so that test snapshots stay a few tens of kilobytes.
func smallConfig(mode string) online.Config {
	return online.Config{Mode: mode, Dim: 8, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256}
}

var testConfigs = []struct {
	name string
	cfg  online.Config
}{
	{"binary", smallConfig(online.ModeBinary)},
	{"rating", smallConfig(online.ModeRating)},
	{"dwell", smallConfig(online.ModeDwell)},
	{"binary-exact-popularity", func() online.Config {
		c := smallConfig(online.ModeBinary)
		c.Cooccurrence, c.NegativeSampling = online.CoocExact, online.NegPopularity
		return c
	}()},
}

// testStream is a deterministic stream of n events over 60 users in four
// taste groups, 40 items, with ratings and dwell times.
func testStream(n int, seed uint64) []online.Event {
	r := rand.New(rand.NewPCG(seed, seed+1))
	evs := make([]online.Event, n)
	for j := range evs {
		u := r.IntN(60)
		i := (u%4)*10 + r.IntN(10)
		if r.Float64() < 0.2 {
			i = r.IntN(40)
		}
		evs[j] = online.Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", i),
			Rating: 1 + r.IntN(5), DwellMS: int64(r.IntN(60000)), HasDwell: true}
	}
	return evs
}

func newModel(t testing.TB, cfg online.Config) *online.Model {
	t.Helper()
	m, err := online.New(cfg, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// step runs evs through m and returns the scores, formatted, one per line.
func step(t testing.TB, m *online.Model, evs []online.Event) []byte {
	t.Helper()
	var out []byte
	var sc online.Score
	for j, ev := range evs {
		if err := m.Step(ev, &sc); err != nil {
			t.Fatalf("event %d: %v", j, err)
		}
		out = fmt.Appendf(out, "%+v\n", sc)
	}
	return out
}

func encodeModel(t testing.TB, m *online.Model) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var testMeta = Meta{
	CreatedAt:  time.Date(2025, 11, 21, 15, 0, 0, 0, time.UTC),
	Source:     "test",
	Generation: 7,
}

var testPositions = []input.Position{
	{Topic: "clicks", Partition: 1, Offset: 500},
	{Topic: "clicks", Partition: 0, Offset: 1000},
	{Topic: "views", Partition: 3, Offset: 0},
}

// testSnapshot returns the bytes of a snapshot of a small binary model that
// has learned from 2000 events.
func testSnapshot(t testing.TB) []byte {
	t.Helper()
	m := newModel(t, smallConfig(online.ModeBinary))
	step(t, m, testStream(2000, 1))
	var b bytes.Buffer
	if _, err := Write(&b, Contents{Model: m, Positions: testPositions, Meta: testMeta}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// frameAt describes one frame found by frames.
type frameAt struct {
	tag     string
	off     int // offset of the frame header
	payload []byte
}

// frames splits a well-formed version-1 snapshot into its frames.
func frames(t testing.TB, b []byte) []frameAt {
	t.Helper()
	var out []frameAt
	for off := headerLen; off < len(b); {
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		out = append(out, frameAt{tag: string(b[off : off+4]), off: off, payload: b[off+8 : off+8+n]})
		off += frameHeaderLen + n + 4
	}
	return out
}

// fixChecksums rewrites, in place, the header CRC, every frame CRC and the
// END. whole-file CRC of b for whatever structure b still has, so that damage to
// the content gets past the checksums to the decoders. It stops at the
// first frame that does not fit.
func fixChecksums(b []byte) { fixSomeChecksums(b, true) }

// fixSomeChecksums is fixChecksums, leaving the CRCs of MODL frames alone
// unless model: damage to the model encoding then stops at its frame CRC.
func fixSomeChecksums(b []byte, model bool) {
	if len(b) < headerLen {
		return
	}
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	for off := headerLen; off+frameHeaderLen <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		end := off + frameHeaderLen + n
		if n < 0 || end+4 > len(b) {
			return
		}
		if string(b[off:off+4]) == tagEnd && n == endLen {
			binary.LittleEndian.PutUint32(b[off+8+8:], crc32.Checksum(b[:off], castagnoli))
		}
		if model || string(b[off:off+4]) != tagModl {
			binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[off:end], castagnoli))
		}
		off = end + 4
	}
}
