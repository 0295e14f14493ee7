package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"denoiser/consumer/input"
	"denoiser/internal/heapstat"
	"denoiser/online"
	"denoiser/online/onlinetest"
)

// TestRoundTrip: what is written is read back, for every label mode and
// co-occurrence kind: the model re-encodes to the same bytes, positions come
// back sorted, meta and Info match; writing the model's encoding instead of
// the model gives the same file.
func TestRoundTrip(t *testing.T) {
	for _, tc := range testConfigs {
		t.Run(tc.name, func(t *testing.T) {
			m := onlinetest.New(t, tc.cfg)
			step(t, m, onlinetest.Stream(1500, 3))
			var b bytes.Buffer
			info, err := Write(&b, Contents{Model: m, Positions: testPositions, Meta: testMeta})
			if err != nil {
				t.Fatal(err)
			}
			enc := encodeModel(t, m)
			if info.Bytes != int64(b.Len()) || info.ModelBytes != int64(len(enc)) || info.FormatVersion != FormatVersion {
				t.Fatalf("info %+v for %d file bytes, %d model bytes", info, b.Len(), len(enc))
			}

			s, err := Read(bytes.NewReader(b.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(encodeModel(t, s.Model), enc) {
				t.Fatal("the model read back encodes differently")
			}
			want := slices.Clone(testPositions)
			slices.SortFunc(want, input.ComparePartitions)
			if !reflect.DeepEqual(s.Positions, want) {
				t.Fatalf("positions %v, want %v", s.Positions, want)
			}
			if !s.Meta.CreatedAt.Equal(testMeta.CreatedAt) || s.Meta.Source != testMeta.Source || s.Meta.Generation != testMeta.Generation {
				t.Fatalf("meta %+v, want %+v", s.Meta, testMeta)
			}
			if s.Info != info || s.ModelEncoding != m.Encoding() {
				t.Fatalf("read info %+v encoding %d, wrote %+v", s.Info, s.ModelEncoding, info)
			}

			var fromBytes bytes.Buffer
			if _, err := Write(&fromBytes, Contents{ModelBytes: enc, Positions: testPositions, Meta: testMeta}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fromBytes.Bytes(), b.Bytes()) {
				t.Fatal("writing the encoded model gave a different file than writing the model")
			}
		})
	}
}

// manyUsers returns a binary model at d=64 that has seen users users once
// each, over items items: its encoding spans several MODL frames.
func manyUsers(t *testing.T, users, items int) *online.Model {
	t.Helper()
	cfg := onlinetest.SmallConfig(online.ModeBinary)
	cfg.Dim = 64
	m := onlinetest.New(t, cfg)
	evs := make([]online.Event, users)
	for j := range evs {
		evs[j] = online.Event{User: fmt.Sprint("user-", j), Item: fmt.Sprint("item-", j%items)}
	}
	step(t, m, evs)
	return m
}

// TestFramesCutAtOneMiB: a model larger than a frame is cut into full
// 1 MiB MODL frames and a shorter last one, and reads back.
func TestFramesCutAtOneMiB(t *testing.T) {
	m := manyUsers(t, 3000, 7)
	var b bytes.Buffer
	info, err := Write(&b, Contents{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	var modl []int
	for _, f := range frames(t, b.Bytes()) {
		if f.tag == tagModl {
			modl = append(modl, len(f.payload))
		}
	}
	if len(modl) < 2 {
		t.Fatalf("model of %d bytes in %d frames; the test needs more than one", info.ModelBytes, len(modl))
	}
	for j, n := range modl[:len(modl)-1] {
		if n != maxModlLen {
			t.Fatalf("frame %d holds %d bytes, want %d", j, n, maxModlLen)
		}
	}
	if last := modl[len(modl)-1]; last < 1 || last > maxModlLen {
		t.Fatalf("last frame holds %d bytes", last)
	}
	s, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Model.NumUsers() != m.NumUsers() || s.ModelBytes != info.ModelBytes {
		t.Fatalf("read %d users, %d model bytes; wrote %d, %d", s.Model.NumUsers(), s.ModelBytes, m.NumUsers(), info.ModelBytes)
	}
}

// TestWithLength: a stream that tells its length (WithLength, as an HTTP
// download or Export's pipe does) is read with the model's tables
// allocated once; a wrong length changes what is allocated, never what is
// read.
func TestWithLength(t *testing.T) {
	m := manyUsers(t, 6000, 50)
	var b bytes.Buffer
	if _, err := Write(&b, Contents{Model: m}); err != nil {
		t.Fatal(err)
	}
	want := encodeModel(t, m)
	read := func(r io.Reader) uint64 {
		var s *Snapshot
		var err error
		n := heapstat.Allocated(func() { s, err = Read(r) })
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(encodeModel(t, s.Model), want) {
			t.Fatal("the model read differs from the one written")
		}
		return n
	}
	plain := func() io.Reader { return struct{ io.Reader }{bytes.NewReader(b.Bytes())} }
	unknown := read(plain())
	exact := read(WithLength(plain(), int64(b.Len())))
	read(WithLength(plain(), int64(b.Len()/2)))
	read(WithLength(plain(), 10*int64(b.Len())))
	t.Logf("%d-byte snapshot: %d bytes allocated with the length, %d without", b.Len(), exact, unknown)
	if float64(exact) > 0.8*float64(unknown) {
		t.Errorf("the length saved little: %d bytes allocated against %d", exact, unknown)
	}
}

// TestContinueAfterSnapshot: a model snapshotted to a file mid-stream, read
// back and fed the rest of the stream scores every later event exactly as
// the model that never stopped, and ends in the same state.
func TestContinueAfterSnapshot(t *testing.T) {
	evs := onlinetest.Stream(3000, 4)
	for _, tc := range testConfigs {
		t.Run(tc.name, func(t *testing.T) {
			whole := onlinetest.New(t, tc.cfg)
			want := step(t, whole, evs)

			first := onlinetest.New(t, tc.cfg)
			got := step(t, first, evs[:1234])
			path := filepath.Join(t.TempDir(), "mid.snap")
			if _, err := WriteFile(path, Contents{Model: first, Positions: []input.Position{{Topic: "t", Offset: 1234}}}); err != nil {
				t.Fatal(err)
			}
			first = nil
			s, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.Positions[0].Offset != 1234 || s.Model.Version() != 1234 {
				t.Fatalf("position %d, model version %d; want 1234", s.Positions[0].Offset, s.Model.Version())
			}
			got = append(got, step(t, s.Model, evs[s.Positions[0].Offset:])...)
			if !bytes.Equal(got, want) {
				t.Fatal("scores after the snapshot differ from the uninterrupted run")
			}
			if !bytes.Equal(encodeModel(t, s.Model), encodeModel(t, whole)) {
				t.Fatal("final models differ")
			}
		})
	}
}

// TestWriteFileAtomic: WriteFile replaces a file whole; a failed write
// leaves the old file and no temporary file behind.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.snap")
	m := onlinetest.New(t, onlinetest.SmallConfig(online.ModeBinary))
	step(t, m, onlinetest.Stream(500, 5))
	if _, err := WriteFile(path, Contents{Model: m}); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)

	step(t, m, onlinetest.Stream(100, 6))
	bad := Contents{Model: m, Positions: []input.Position{{Topic: "", Offset: 1}}}
	if _, err := WriteFile(path, bad); err == nil {
		t.Fatal("WriteFile accepted an empty topic")
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
		t.Fatal("a failed WriteFile changed the file")
	}
	if _, err := WriteFile(path, Contents{Model: m}); err != nil {
		t.Fatal(err)
	}
	s, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Model.Version() != 600 {
		t.Fatalf("model version %d after the replacement, want 600", s.Model.Version())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the snapshot", len(entries))
	}
	if _, err := WriteFile(filepath.Join(dir, "missing", "x.snap"), Contents{Model: m}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("WriteFile into a missing directory: %v", err)
	}
}

// TestWriteRefuses: bad contents are refused before anything is written.
func TestWriteRefuses(t *testing.T) {
	m := onlinetest.New(t, onlinetest.SmallConfig(online.ModeBinary))
	long := string(make([]byte, MaxTopicLen+1))
	for _, tc := range []struct {
		name string
		c    Contents
	}{
		{"no model", Contents{}},
		{"both models", Contents{Model: m, ModelBytes: []byte{1}}},
		{"empty model bytes", Contents{ModelBytes: []byte{}}},
		{"empty topic", Contents{Model: m, Positions: []input.Position{{Topic: ""}}}},
		{"long topic", Contents{Model: m, Positions: []input.Position{{Topic: long}}}},
		{"negative partition", Contents{Model: m, Positions: []input.Position{{Topic: "t", Partition: -1}}}},
		{"negative offset", Contents{Model: m, Positions: []input.Position{{Topic: "t", Offset: -1}}}},
		{"duplicate", Contents{Model: m, Positions: []input.Position{{Topic: "t", Offset: 1}, {Topic: "t", Offset: 2}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if _, err := Write(&b, tc.c); err == nil {
				t.Fatal("Write accepted it")
			}
			if b.Len() != 0 {
				t.Fatalf("Write wrote %d bytes before refusing", b.Len())
			}
		})
	}
}
