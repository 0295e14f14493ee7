package demo

import (
	"bytes"
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
