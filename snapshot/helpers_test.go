package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/online/onlinetest"
)

var testConfigs = []struct {
	name string
	cfg  online.Config
}{
	{"binary", onlinetest.SmallConfig(online.ModeBinary)},
	{"rating", onlinetest.SmallConfig(online.ModeRating)},
	{"dwell", onlinetest.SmallConfig(online.ModeDwell)},
	{"binary-exact-popularity", func() online.Config {
		c := onlinetest.SmallConfig(online.ModeBinary)
		c.Cooccurrence, c.NegativeSampling = online.CoocExact, online.NegPopularity
		return c
	}()},
	{"binary-bounded", func() online.Config { // model encoding 3: caps, admission, eviction
		c := onlinetest.SmallConfig(online.ModeBinary)
		c.MaxUsers, c.MaxItems, c.AdmitAfter, c.AdmitSketchWidth = 40, 30, 2, 1024
		return c
	}()},
}

// step runs evs through m and returns the scores, formatted, one per line.
func step(t testing.TB, m *online.Model, evs []online.Event) []byte {
	t.Helper()
	var out []byte
	for _, sc := range onlinetest.Step(t, m, evs) {
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
	m := onlinetest.New(t, onlinetest.SmallConfig(online.ModeBinary))
	step(t, m, onlinetest.Stream(2000, 1))
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
