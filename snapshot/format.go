package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"denoiser/consumer/input"
)

// FormatVersion is the snapshot format version Write writes. Read reads
// every version from 1 up to this one.
const FormatVersion = 3

// magic starts every snapshot file (see FORMAT.md).
var magic = [12]byte{0x89, 'D', 'E', 'N', 'O', 'I', 'S', 'E', '\r', '\n', 0x1a, '\n'}

// headerLen is the length of magic, version and header CRC: the part of the
// file every format version keeps.
const headerLen = 12 + 4 + 4

// Frame tags and limits of format version 1.
const (
	tagMeta = "META"
	tagPosn = "POSN"
	tagModl = "MODL"
	tagEnd  = "END."

	frameHeaderLen = 4 + 4
	maxMetaLen     = 1 << 20
	maxPosnLen     = 16 << 20
	maxModlLen     = 1 << 20
	endLen         = 8 + 4

	// MaxTopicLen bounds a position's topic (as the state package does).
	MaxTopicLen = 4096
)

// Errors returned by Read and the functions built on it. Each error wraps
// exactly one of them; test with errors.Is.
var (
	// ErrBadMagic: the input is not a snapshot file.
	ErrBadMagic = errors.New("not a snapshot file (bad magic)")
	// ErrUnsupportedVersion: the header is intact but names a format
	// version this build does not read: a newer one, or 0.
	ErrUnsupportedVersion = errors.New("unsupported format version")
	// ErrTruncated: the input ends before the snapshot does.
	ErrTruncated = errors.New("truncated")
	// ErrChecksum: a header, frame or whole-file checksum does not match.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrCorrupt: the checksums match but the content is invalid (frame
	// order, a length over its limit, bad positions or metadata, or a model
	// encoding online.ReadModel refuses).
	ErrCorrupt = errors.New("corrupt snapshot")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Meta describes where a snapshot came from. It is informational: nothing
// in it changes how the model is read.
type Meta struct {
	// CreatedAt is when the snapshot was taken; zero if unknown.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Source is what it was taken from, e.g. "state /var/lib/denoiser" or
	// "live"; free text.
	Source string `json:"source,omitempty"`
	// Generation is the checkpoint generation of the state it was exported
	// from; 0 if none.
	Generation uint64 `json:"generation,omitempty"`
}

// Info describes a written or read snapshot file.
type Info struct {
	// FormatVersion is the snapshot format version of the file.
	FormatVersion uint32 `json:"format_version"`
	// Bytes is the length of the file.
	Bytes int64 `json:"bytes"`
	// ModelBytes is the length of the model encoding inside it.
	ModelBytes int64 `json:"model_bytes"`
	// Checksum is the whole-file checksum stored in the END. frame: the
	// CRC-32C of every byte before that frame.
	Checksum uint32 `json:"-"`
}

// ChecksumHex is Info.Checksum as 8 hex digits.
func (i Info) ChecksumHex() string { return fmt.Sprintf("%08x", i.Checksum) }

// validatePositions checks ps as Write and Read require (see FORMAT.md)
// and returns a sorted copy.
func validatePositions(ps []input.Position) ([]input.Position, error) {
	out := slices.Clone(ps)
	slices.SortFunc(out, input.ComparePartitions)
	for j, p := range out {
		switch {
		case p.Topic == "" || len(p.Topic) > MaxTopicLen:
			return nil, fmt.Errorf("position %d: topic of %d bytes; use 1..%d", j, len(p.Topic), MaxTopicLen)
		case p.Partition < 0:
			return nil, fmt.Errorf("position %s/%d: partition out of range", p.Topic, p.Partition)
		case p.Offset < 0:
			return nil, fmt.Errorf("position %s/%d: negative next offset %d", p.Topic, p.Partition, p.Offset)
		case j > 0 && input.ComparePartitions(out[j-1], p) == 0:
			return nil, fmt.Errorf("position %s/%d appears twice", p.Topic, p.Partition)
		}
	}
	return out, nil
}

// appendPositions appends the POSN payload of sorted, valid positions.
func appendPositions(b []byte, ps []input.Position) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ps)))
	for _, p := range ps {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(p.Topic)))
		b = append(b, p.Topic...)
		b = binary.LittleEndian.AppendUint32(b, uint32(p.Partition))
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Offset))
	}
	return b
}

// parsePositions parses a POSN payload; the result is sorted and valid.
func parsePositions(b []byte) ([]input.Position, error) {
	if len(b) < 4 {
		return nil, errors.New("positions frame shorter than its count")
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	// Each position takes at least 2+1+4+8 bytes: the count is bounded by
	// the payload before anything is allocated.
	if uint64(n)*15 > uint64(len(b)) {
		return nil, fmt.Errorf("%d positions cannot fit in %d bytes", n, len(b))
	}
	ps := make([]input.Position, 0, n)
	for j := uint32(0); j < n; j++ {
		if len(b) < 2 {
			return nil, fmt.Errorf("position %d truncated", j)
		}
		tl := int(binary.LittleEndian.Uint16(b))
		b = b[2:]
		if len(b) < tl+12 {
			return nil, fmt.Errorf("position %d truncated", j)
		}
		p := input.Position{Topic: string(b[:tl])}
		p.Partition = int32(binary.LittleEndian.Uint32(b[tl:]))
		p.Offset = int64(binary.LittleEndian.Uint64(b[tl+4:]))
		b = b[tl+12:]
		if j > 0 && input.ComparePartitions(ps[j-1], p) >= 0 {
			return nil, fmt.Errorf("positions not sorted or duplicated at %s/%d", p.Topic, p.Partition)
		}
		ps = append(ps, p)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last position", len(b))
	}
	if _, err := validatePositions(ps); err != nil {
		return nil, err
	}
	return ps, nil
}
