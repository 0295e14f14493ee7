package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"denoiser/consumer/input"
	"denoiser/internal/heapstat"
	"denoiser/online"
)

var sentinels = []error{ErrBadMagic, ErrUnsupportedVersion, ErrTruncated, ErrChecksum, ErrCorrupt}

// sentinelOf returns the one sentinel err wraps, failing the test if it
// wraps none or several.
func sentinelOf(t *testing.T, err error) error {
	t.Helper()
	var found []error
	for _, s := range sentinels {
		if errors.Is(err, s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("error %q wraps %d sentinels %v, want exactly one", err, len(found), found)
	}
	return found[0]
}

func mustFail(t *testing.T, b []byte, want error) error {
	t.Helper()
	s, err := Read(bytes.NewReader(b))
	if err == nil {
		t.Fatalf("Read accepted it (model version %d)", s.Model.Version())
	}
	if got := sentinelOf(t, err); want != nil && got != want {
		t.Fatalf("error %q, want %v", err, want)
	}
	return err
}

// header returns a snapshot header of the given version with a valid CRC.
func header(version uint32) []byte {
	h := append([]byte(nil), magic[:]...)
	h = binary.LittleEndian.AppendUint32(h, version)
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
}

// frame returns one frame with a valid CRC.
func frame(tag string, p []byte) []byte {
	b := append([]byte(tag), binary.LittleEndian.AppendUint32(nil, uint32(len(p)))...)
	b = append(b, p...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestReadRejectsBadFiles: named kinds of bad input are refused with the
// right sentinel and a message that says what is wrong.
func TestReadRejectsBadFiles(t *testing.T) {
	good := testSnapshot(t)
	fs := frames(t, good)
	meta, posn, end := fs[0], fs[1], fs[len(fs)-1]
	model := []byte{}
	for _, f := range fs[2 : len(fs)-1] {
		model = append(model, f.payload...)
	}
	// rebuild assembles a file from the header and frames, fixing the END.
	// checksum.
	rebuild := func(parts ...[]byte) []byte {
		b := bytes.Join(parts, nil)
		fixChecksums(b)
		return b
	}
	endFrame := func(modelLen uint64) []byte {
		p := binary.LittleEndian.AppendUint64(nil, modelLen)
		return frame(tagEnd, append(p, make([]byte, 4)...))
	}
	onlineModel := model

	for _, tc := range []struct {
		name string
		b    []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrTruncated, "empty"},
		{"text", []byte("hello, world\n"), ErrBadMagic, ""},
		{"json event", []byte(`{"user":"u1","item":"i1"}` + "\n"), ErrBadMagic, ""},
		{"bare model encoding", onlineModel, ErrBadMagic, ""},
		{"magic prefix only", magic[:5], ErrTruncated, ""},
		{"header only", header(1), ErrTruncated, ""},
		{"newer version", append(header(FormatVersion+1), good[headerLen:]...), ErrUnsupportedVersion, fmt.Sprintf("format version %d", FormatVersion+1)},
		{"far newer version", append(header(0xFFFFFFFF), good[headerLen:]...), ErrUnsupportedVersion, "4294967295"},
		{"version 0", append(header(0), good[headerLen:]...), ErrUnsupportedVersion, "format version 0"},
		{"damaged version", func() []byte { b := bytes.Clone(good); b[13] ^= 1; return b }(), ErrChecksum, "header"},
		{"trailing data", append(bytes.Clone(good), 0), ErrCorrupt, "after the end"},
		{"second snapshot appended", append(bytes.Clone(good), good...), ErrCorrupt, "after the end"},
		{"META length over limit", append(header(1), []byte("META\xff\xff\xff\xff")...), ErrCorrupt, "more than its limit"},
		{"MODL length over limit", rebuild(header(1), frame(tagMeta, meta.payload), frame(tagPosn, posn.payload),
			[]byte("MODL\x01\x00\x10\x00")), ErrCorrupt, "more than its limit"},
		{"declared frame longer than the file", append(header(1), []byte("META\x00\x00\x10\x00{}")...), ErrTruncated, ""},
		{"positions count over payload", rebuild(header(1), frame(tagMeta, meta.payload),
			frame(tagPosn, []byte{0xff, 0xff, 0xff, 0xff, 0, 0}), frame(tagModl, model), endFrame(uint64(len(model)))), ErrCorrupt, "positions"},
		{"positions unsorted", rebuild(header(1), frame(tagMeta, meta.payload),
			frame(tagPosn, appendPositionsRaw(input.Position{Topic: "b", Partition: 0, Offset: 1}, input.Position{Topic: "a", Partition: 0, Offset: 1})), frame(tagModl, model), endFrame(uint64(len(model)))), ErrCorrupt, "sorted"},
		{"negative offset", rebuild(header(1), frame(tagMeta, meta.payload),
			frame(tagPosn, appendPositionsRaw(input.Position{Topic: "a", Partition: 0, Offset: -5})), frame(tagModl, model), endFrame(uint64(len(model)))), ErrCorrupt, "negative"},
		{"bad meta JSON", rebuild(header(1), frame(tagMeta, []byte("{")), frame(tagPosn, posn.payload),
			frame(tagModl, model), endFrame(uint64(len(model)))), ErrCorrupt, "meta"},
		{"frames out of order", rebuild(header(1), frame(tagPosn, posn.payload), frame(tagMeta, meta.payload),
			frame(tagModl, model), endFrame(uint64(len(model)))), ErrCorrupt, "belongs"},
		{"unknown frame", rebuild(header(1), frame(tagMeta, meta.payload), frame(tagPosn, posn.payload),
			frame("XTRA", []byte("x")), frame(tagModl, model), endFrame(uint64(len(model)))), ErrCorrupt, "XTRA"},
		{"no model", rebuild(header(1), frame(tagMeta, meta.payload), frame(tagPosn, posn.payload), endFrame(0)), ErrCorrupt, ""},
		{"empty model frame", rebuild(header(1), frame(tagMeta, meta.payload), frame(tagPosn, posn.payload),
			frame(tagModl, nil), frame(tagModl, model), endFrame(uint64(len(model)))), ErrCorrupt, "empty MODL"},
		{"model cut short", rebuild(header(1), frame(tagMeta, meta.payload), frame(tagPosn, posn.payload),
			frame(tagModl, model[:len(model)/2]), endFrame(uint64(len(model)/2))), ErrCorrupt, "model"},
		{"bytes after the model", rebuild(header(1), frame(tagMeta, meta.payload), frame(tagPosn, posn.payload),
			frame(tagModl, append(bytes.Clone(model), make([]byte, 70000)...)), endFrame(uint64(len(model)+70000))), ErrCorrupt, "after the END section"},
		{"wrong model length", rebuild(header(1), frame(tagMeta, meta.payload), frame(tagPosn, posn.payload),
			frame(tagModl, model), endFrame(uint64(len(model)+1))), ErrCorrupt, "model bytes"},
		{"END. too short", rebuild(header(1), frame(tagMeta, meta.payload), frame(tagPosn, posn.payload),
			frame(tagModl, model), frame(tagEnd, []byte{1})), ErrCorrupt, "END."},
		{"no END.", bytes.Join([][]byte{header(1), frame(tagMeta, meta.payload), frame(tagPosn, posn.payload),
			frame(tagModl, model)}, nil), ErrTruncated, ""},
		{"whole-file checksum", func() []byte {
			b := bytes.Clone(good)
			b[end.off+8+8] ^= 0x80
			binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[end.off:len(b)-4], castagnoli))
			return b
		}(), ErrChecksum, "whole-file"},
		{"model content damaged behind valid checksums", func() []byte {
			b := bytes.Clone(good)
			i := bytes.Index(b, []byte("CONF"))
			b[i+12] = '[' // the config JSON
			fixChecksums(b)
			return b
		}(), ErrCorrupt, "config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mustFail(t, tc.b, tc.want)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not mention %q", err, tc.msg)
			}
			if tc.want == ErrCorrupt && strings.Contains(tc.msg, "config") && !errors.Is(err, online.ErrCorrupt) {
				t.Fatalf("error %q does not wrap online.ErrCorrupt", err)
			}
		})
	}
}

func appendPositionsRaw(ps ...input.Position) []byte { return appendPositions(nil, ps) }

// TestReadRejectsEveryTruncation: every prefix of a snapshot is refused as
// truncated (all of the first and last 300 bytes, a spread in between).
func TestReadRejectsEveryTruncation(t *testing.T) {
	good := testSnapshot(t)
	for n := 0; n < len(good); n++ {
		if n > 300 && n < len(good)-300 && n%97 != 0 {
			continue
		}
		if _, err := Read(bytes.NewReader(good[:n])); !errors.Is(err, ErrTruncated) {
			t.Fatalf("prefix of %d of %d bytes: %v, want ErrTruncated", n, len(good), err)
		}
	}
}

// TestReadRejectsBitFlips: a bit flipped anywhere is refused, without a
// panic; inside a frame's payload or CRC it is a checksum mismatch.
func TestReadRejectsBitFlips(t *testing.T) {
	good := testSnapshot(t)
	inPayload := make([]bool, len(good))
	for _, f := range frames(t, good) {
		for i := f.off + frameHeaderLen; i < f.off+frameHeaderLen+len(f.payload)+4; i++ {
			inPayload[i] = true
		}
	}
	for i := 0; i < len(good); i += 1 + i/200 {
		b := bytes.Clone(good)
		b[i] ^= 1 << (i % 8)
		_, err := Read(bytes.NewReader(b))
		if err == nil {
			t.Fatalf("flip at byte %d accepted", i)
		}
		got := sentinelOf(t, err)
		switch {
		case i < len(magic) && got != ErrBadMagic:
			t.Fatalf("flip in the magic at %d: %v", i, err)
		case inPayload[i] && got != ErrChecksum:
			t.Fatalf("flip in a payload at %d: %v, want ErrChecksum", i, err)
		}
	}
}

// TestReadBoundsAllocation: lengths declared but not backed by data cost no
// memory: a frame declaring its limit, a model section declaring 2^62
// bytes and 2^31 users.
func TestReadBoundsAllocation(t *testing.T) {
	good := testSnapshot(t)
	fs := frames(t, good)
	users := bytes.Clone(good)
	i := bytes.Index(users, []byte("USER"))
	binary.LittleEndian.PutUint32(users[i+12:], 1<<31-1) // user count
	fixChecksums(users)
	section := bytes.Clone(users)
	binary.LittleEndian.PutUint64(section[i+4:], 1<<62) // section length
	fixChecksums(section)

	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"META declares 1 MiB", append(header(1), []byte("META\x00\x00\x10\x00{}")...)},
		{"POSN declares 16 MiB", bytes.Join([][]byte{header(1), frame(tagMeta, fs[0].payload), []byte("POSN\x00\x00\x00\x01")}, nil)},
		{"model declares 2^31 users", users},
		{"model declares 2^31 users in a section of 2^62 bytes", section},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := heapstat.Allocated(func() { mustFail(t, tc.b, nil) })
			// The reader's own buffers (64 KiB bufio, payload growth in 64
			// KiB steps) and the model decoder's first chunks.
			if got > 4<<20 {
				t.Fatalf("allocated %d bytes for a %d-byte file", got, len(tc.b))
			}
		})
	}
}
