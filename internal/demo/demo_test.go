package demo

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"denoiser/online"
	"denoiser/service"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: the demo runs the
// service on a goroutine of its own, beside an embedded broker, and both
// must be gone when Run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeLog writes n events of 20 users, each with dwell and a time, two
// of them invalid.
func writeLog(t *testing.T, n int) string {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		switch i {
		case 7:
			b.WriteString("not json\n")
		case 11:
			b.WriteString(`{"user":"u1","item":"i1","dwell_ms":-1}` + "\n")
		default:
			truth := "genuine"
			if i%5 == 0 {
				truth = "noise"
			}
			fmt.Fprintf(&b, `{"user":"u%d","item":"i%d","ts":%d,"dwell_ms":%d,"truth":%q}`+"\n", i%20, i%37, 1_700_000_000_000+int64(i)*1500, 1000+i*17%9000, truth)
		}
	}
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRun(t *testing.T) {
	const n = 400
	rep, err := Run(context.Background(), Options{Input: writeLog(t, n), Partitions: 2, HTTPAddr: "off", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != n-2 || rep.Invalid != 2 {
		t.Fatalf("report: %d events, %d invalid; want %d and 2", rep.Events, rep.Invalid, n-2)
	}
	// The records read back carry what the baselines count: dwell and
	// the time of the user's previous event.
	if rep.AUC.Dwell == nil || rep.AUC.UserGap == nil {
		t.Errorf("baselines of the records read back: dwell %v, user_gap %v; want both", rep.AUC.Dwell, rep.AUC.UserGap)
	}
}

// TestRunMembers: two members of partition state that share their item
// rows split the partitions, and the report covers every record once.
func TestRunMembers(t *testing.T) {
	const n = 400
	var progress strings.Builder
	rep, err := Run(context.Background(), Options{
		Input: writeLog(t, n), Partitions: 3, HTTPAddr: "off", Seed: 1, Members: 2,
		StateLayout: online.LayoutPartition, Sharing: service.SharingConfig{EveryEvents: 50},
		Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != n-2 || rep.Invalid != 2 {
		t.Fatalf("report: %d events, %d invalid; want %d and 2", rep.Events, rep.Invalid, n-2)
	}
	// What the shared topic holds is printed: the members published.
	var records, size int
	var perEvent float64
	i := strings.Index(progress.String(), "holds ")
	if i < 0 {
		t.Fatalf("no line of the shared topic in the demo's output:\n%s", progress.String())
	}
	if _, err := fmt.Sscanf(progress.String()[i:], "holds %d records, %d bytes (%g bytes per input event)", &records, &size, &perEvent); err != nil || records == 0 || size == 0 {
		t.Fatalf("shared topic line: %d records, %d bytes (%v):\n%s", records, size, err, progress.String())
	}
}

// TestRunCancelled: a demo cancelled while the service starts returns the
// context's error and leaves nothing running.
func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Run(ctx, Options{Input: writeLog(t, 50), HTTPAddr: "off", Started: func(string, string) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run cancelled = %v, want context.Canceled", err)
	}
}

// TestRunInputFormats: the demo reads its input as replay does: gzip, a
// byte-order mark and CSV with a header score as the JSON lines they
// stand for.
func TestRunInputFormats(t *testing.T) {
	const n = 200
	dir := t.TempDir()
	plain, err := os.ReadFile(writeLog(t, n))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(append([]byte("\uFEFF"), plain...))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	var csv strings.Builder
	csv.WriteString("user,item,ts,truth\n")
	for i := range n {
		fmt.Fprintf(&csv, "u%d,i%d,%d,%s\n", i%20, i%37, 1_700_000_000_000+int64(i)*1500, map[bool]string{true: "noise", false: "genuine"}[i%5 == 0])
	}
	for _, tc := range []struct {
		name, file string
		body       []byte
		events     uint64
	}{
		{"gzip with a byte-order mark", "in.jsonl.gz", gz.Bytes(), n - 2},
		{"csv", "in.csv", []byte(csv.String()), n},
	} {
		path := filepath.Join(dir, tc.file)
		if err := os.WriteFile(path, tc.body, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), Options{Input: path, Partitions: 2, HTTPAddr: "off", Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rep.Events != tc.events {
			t.Errorf("%s: %d events scored (%d invalid), want %d", tc.name, rep.Events, rep.Invalid, tc.events)
		}
	}
}

// TestRunRefuses: a state directory an earlier demo wrote is refused
// before anything starts (its positions are not the new broker's: the
// demo would wait for records that never come), and an input of which no
// record can be scored is an error, not an empty report.
func TestRunRefuses(t *testing.T) {
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "MANIFEST"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Input: writeLog(t, 50), HTTPAddr: "off", StateDir: used}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a used state directory: err = %v, want it refused as not empty", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("user;item\nu1;i1\nu2;i2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Input: bad, HTTPAddr: "off"}); err == nil || !strings.Contains(err.Error(), "none of the 3 records") {
		t.Errorf("an input of which nothing scores: err = %v, want none of the 3 records scored", err)
	}
}
