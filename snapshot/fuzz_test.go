package snapshot

import (
	"bytes"
	"os"
	"testing"
)

// FuzzRead: no input makes Read panic, hang or allocate without bound;
// every refusal wraps exactly one sentinel; whatever Read accepts writes
// back and reads again to the same model. Each input is tried as given
// (the checksums stop almost every mutation at the first damaged frame)
// and with the header, META, POSN and END. checksums recomputed, so that
// mutations reach the framing and the META, POSN and END. decoders behind
// them. MODL frame CRCs are not recomputed: the model decoder behind a
// valid CRC is fuzzed where it lives, by online.FuzzReadModel, on small
// models that it can decode thousands of times a second (a whole model per
// execution here runs at a few dozen a second).
//
// `go test` runs the seed corpus; `make fuzz FUZZTIME=10m` fuzzes (every decoder).
func FuzzRead(f *testing.F) {
	good := testSnapshot(f)
	if g, err := os.ReadFile(golden(1, "snap")); err == nil {
		f.Add(g)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:headerLen+20])
	f.Add([]byte{})
	f.Add(magic[:])
	f.Add(header(1))
	f.Add(append(header(2), good[headerLen:]...))
	f.Add(append(bytes.Clone(good), 0))
	flipped := bytes.Clone(good)
	flipped[len(flipped)/3] ^= 0x10
	f.Add(flipped)
	fs := frames(f, good)
	f.Add(bytes.Join([][]byte{header(1), frame(tagMeta, fs[0].payload), frame(tagPosn, fs[1].payload),
		frame(tagModl, []byte("RGBTMODL\x01\x00\x00\x00")), frame(tagEnd, make([]byte, endLen))}, nil))

	f.Fuzz(func(t *testing.T, b []byte) {
		readAndRewrite(t, b)
		fixed := bytes.Clone(b)
		fixSomeChecksums(fixed, false)
		readAndRewrite(t, fixed)
	})
}

func readAndRewrite(t *testing.T, b []byte) {
	s, err := Read(bytes.NewReader(b))
	if err != nil {
		sentinelOf(t, err) // a bytes.Reader has no I/O errors
		return
	}
	var out bytes.Buffer
	if _, err := Write(&out, Contents{Model: s.Model, Positions: s.Positions, Meta: s.Meta}); err != nil {
		t.Fatalf("accepted snapshot does not write back: %v", err)
	}
	s2, err := Read(&out)
	if err != nil {
		t.Fatalf("written-back snapshot does not read: %v", err)
	}
	if !bytes.Equal(encodeModel(t, s2.Model), encodeModel(t, s.Model)) || len(s2.Positions) != len(s.Positions) {
		t.Fatal("written-back snapshot holds a different model or positions")
	}
}
