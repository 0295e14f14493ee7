package snapshot

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of the current format version (never older ones)")

// golden returns the path of a golden file of a format version.
func golden(version int, ext string) string {
	return filepath.Join("testdata", fmt.Sprintf("v%d.%s", version, ext))
}

func inspectJSON(t *testing.T, s *Snapshot) []byte {
	t.Helper()
	r := Inspect(s, "")
	b, err := json.MarshalIndent(&r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func inspectText(t *testing.T, s *Snapshot) []byte {
	t.Helper()
	r := Inspect(s, "")
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGoldenVersions: this build reads the golden snapshot of every format
// version up to FormatVersion, and sees in each exactly what it saw when
// the file was made (inspect JSON and text). The current version's file is
// also what Write writes for the same contents today, byte for byte.
// -update rewrites only the current version's files.
func TestGoldenVersions(t *testing.T) {
	if *update {
		s, err := Read(bytes.NewReader(testSnapshot(t)))
		if err != nil {
			t.Fatal(err)
		}
		for ext, b := range map[string][]byte{"snap": testSnapshot(t), "inspect.json": inspectJSON(t, s), "inspect.txt": inspectText(t, s)} {
			if err := os.WriteFile(golden(FormatVersion, ext), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for v := 1; v <= FormatVersion; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			raw, err := os.ReadFile(golden(v, "snap"))
			if err != nil {
				t.Fatalf("every format version needs a golden file: %v", err)
			}
			s, err := Read(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if s.FormatVersion != uint32(v) {
				t.Fatalf("golden file of version %d reads as version %d", v, s.FormatVersion)
			}
			for ext, got := range map[string][]byte{"inspect.json": inspectJSON(t, s), "inspect.txt": inspectText(t, s)} {
				want, err := os.ReadFile(golden(v, ext))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from %s:\n%s", ext, golden(v, ext), got)
				}
			}
			if v != FormatVersion {
				return
			}
			var again bytes.Buffer
			if _, err := Write(&again, Contents{Model: s.Model, Positions: s.Positions, Meta: s.Meta}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.Bytes(), raw) {
				t.Fatal("writing what the golden file holds gives different bytes: the format changed without a new version")
			}
		})
	}
}
