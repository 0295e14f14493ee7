package demo

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"denoiser/consumer"
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

// TestRunRefuses: options that cannot work are refused before anything
// starts (no broker, no record produced), each naming its flag: among
// them a state directory an earlier demo wrote (its positions are not
// the new broker's: the demo would wait for records that never come),
// more members than partitions (one would wait for a partition forever)
// and a taken HTTP address, with what to do about it. An input of which
// no record can be scored is an error, not an empty report.
func TestRunRefuses(t *testing.T) {
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "MANIFEST"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	in := writeLog(t, 50)
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"used state directory", Options{StateDir: used}, []string{"--state-dir", "not empty"}},
		{"state directory is a file", Options{StateDir: in}, []string{"--state-dir"}},
		{"more members than partitions", Options{Members: 4, Partitions: 2}, []string{"--members 4 is more than --partitions 2", "at most 2 members"}},
		{"negative members", Options{Members: -1}, []string{"--members -1: want at least 1"}},
		{"negative partitions", Options{Partitions: -2}, []string{"--partitions -2: want at least 1"}},
		{"unknown state layout", Options{StateLayout: "bogus"}, []string{`--state-layout "bogus": use member or partition`}},
		{"unknown format", Options{Format: "xml"}, []string{`--format "xml": use jsonl, csv or auto`}},
		{"bad http address", Options{HTTPAddr: "9464"}, []string{`--http "9464"`, "or off"}},
		{"missing input", Options{Input: "no/such.jsonl"}, []string{"--in no/such.jsonl: file does not exist in the working directory"}},
		{"negative sharing events", Options{Sharing: service.SharingConfig{EveryEvents: -1}}, []string{"--sharing-events -1"}},
		{"taken http address", Options{HTTPAddr: taken.Addr().String()}, []string{"address already in use", "--http off", "--http 127.0.0.1:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts.Input == "" {
				opts.Input = in
			}
			if opts.HTTPAddr == "" {
				opts.HTTPAddr = "off"
			}
			var progress strings.Builder
			opts.Progress = &progress
			_, err := Run(context.Background(), opts)
			if err == nil {
				t.Fatal("Run succeeded, want it refused")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to say %q", err, w)
				}
			}
			if progress.Len() > 0 {
				t.Errorf("refused after starting:\n%s", progress.String())
			}
		})
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("user;item\nu1;i1\nu2;i2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Input: bad, HTTPAddr: "off"}); err == nil || !strings.Contains(err.Error(), "none of the 3 records") {
		t.Errorf("an input of which nothing scores: err = %v, want none of the 3 records scored", err)
	}
}

// TestRunTooLarge: a line over consumer.MaxLineBytes does not stop the
// producer: it reaches the service, which dead-letters it as too_large as
// replay does, and every line of the input is accounted for.
func TestRunTooLarge(t *testing.T) {
	const n = 100
	plain, err := os.ReadFile(writeLog(t, n))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(plain, []byte("\n"))
	var b bytes.Buffer
	for i, l := range lines {
		if i == n/2 {
			fmt.Fprintf(&b, `{"user":"u1","item":"i1","pad":"%s"}`+"\n", strings.Repeat("x", 2*consumer.MaxLineBytes))
			b.WriteString("\n") // a blank line, counted as such
		}
		b.Write(l)
	}
	path := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Input: path, Partitions: 2, HTTPAddr: "off", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.InvalidByReason["too_large"] != 1 {
		t.Errorf("invalid by reason %v, want too_large 1", rep.InvalidByReason)
	}
	if rep.Events != n-2 || rep.Invalid != 3 || rep.Blank != 1 || rep.Records != n+2 {
		t.Errorf("report: %d records, %d events, %d invalid, %d blank; want %d, %d, 3, 1", rep.Records, rep.Events, rep.Invalid, rep.Blank, n+2, n-2)
	}
}

// TestRunThroughput: the span the demo measures covers the processing,
// however small the input and however many members, and a rate is given
// only over a span long enough to measure.
func TestRunThroughput(t *testing.T) {
	for _, tc := range []struct {
		name                string
		events              int
		members, partitions int
	}{
		{"one member, 14 events", 14, 1, 1},
		{"two members", 400, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var progress strings.Builder
			rep, err := Run(context.Background(), Options{
				Input: writeLog(t, tc.events), Members: tc.members, Partitions: tc.partitions, HTTPAddr: "off", Seed: 1, Progress: &progress,
			})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Seconds < pollInterval.Seconds()/2 {
				t.Errorf("%d events in %g s: the span misses the processing", rep.Events, rep.Seconds)
			}
			short := rep.Seconds < minRateSpan.Seconds()
			if short && (rep.EventsPerSec != 0 || !strings.Contains(progress.String(), "too short a span")) {
				t.Errorf("%g events/s over %g s, want none and a note:\n%s", rep.EventsPerSec, rep.Seconds, progress.String())
			}
			if !short && math.Abs(rep.EventsPerSec-float64(rep.Events)/rep.Seconds) > 1e-6*rep.EventsPerSec {
				t.Errorf("%g events/s, want %d events over %g s", rep.EventsPerSec, rep.Events, rep.Seconds)
			}
		})
	}
}
