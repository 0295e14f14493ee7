package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/internal/heapstat"
	"denoiser/online"
	"denoiser/producer"
	"denoiser/snapshot"
	"denoiser/state"
)

// limitSource ends after n records.
type limitSource struct {
	consumer.Source
	n int
}

func (s *limitSource) Next(ctx context.Context) (consumer.Message, error) {
	if s.n == 0 {
		return consumer.Message{}, io.EOF
	}
	s.n--
	return s.Source.Next(ctx)
}

// replayTo runs src through m into a scored JSON-lines file and returns its
// bytes.
func replayTo(t *testing.T, src consumer.Source, m *online.Model, out string) []byte {
	t.Helper()
	sink, err := producer.CreateFileSink(out)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := producer.CreateFileDeadLetter(out + ".dead")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := consumer.Run(context.Background(), src, m, sink, dlq, consumer.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

// TestSnapshotExportImportContinues: a stream checkpointed into one Badger
// state, exported to a snapshot file, imported into another state and
// resumed from there writes byte for byte the scored output of a replay
// that never stopped.
func TestSnapshotExportImportContinues(t *testing.T) {
	dir := t.TempDir()
	log, err := os.ReadFile("../../testdata/synthetic-20k.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, bytes.Join(bytes.SplitAfter(log, []byte("\n"))[:4000], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := online.Config{Dim: 8, WarmUp: 200, RefitEvery: 200, GMMMinSamples: 64, GMMWindow: 512}
	newModel := func() *online.Model {
		m, err := online.New(cfg, online.NewSource(3))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	open := func() *consumer.FileSource {
		src, err := consumer.OpenFile(in)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		return src
	}

	want := replayTo(t, open(), newModel(), filepath.Join(dir, "whole.jsonl"))

	// Stage 1: the first 1700 records, then a checkpoint in state A.
	const split = 1700
	m := newModel()
	got := replayTo(t, &limitSource{open(), split}, m, filepath.Join(dir, "first.jsonl"))
	var enc bytes.Buffer
	if _, err := m.WriteTo(&enc); err != nil {
		t.Fatal(err)
	}
	// State A holds it as a base (after 1600 records) and a delta, as
	// the service saves it; export writes the model whole. (In a model
	// this small, 100 events change half of it: DeltaShare 1 lets the
	// delta through.)
	stateA, stateB := filepath.Join(dir, "state-a"), filepath.Join(dir, "state-b")
	a, err := state.Open(stateA, state.Options{GCInterval: -1, DeltaShare: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	chained := newModel()
	replayTo(t, &limitSource{open(), 1600}, chained, filepath.Join(dir, "base.jsonl"))
	shadow := chained.FrozenCopy(nil)
	full := func(w io.Writer) error { _, err := shadow.WriteTo(w); return err }
	saved, err := a.SaveModel(ctx, state.Checkpoint{Version: shadow.Version()}, state.ModelWriter{Full: full})
	if err != nil {
		t.Fatal(err)
	}
	shadow.MarkSaved()
	rest := open()
	for range 1600 {
		if _, err := rest.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	replayTo(t, &limitSource{rest, split - 1600}, chained, filepath.Join(dir, "delta.jsonl"))
	shadow = chained.FrozenCopy(shadow)
	pos := []input.Position{{Topic: "file:" + in, Partition: 0, Offset: split}}
	delta := func(w io.Writer) error { _, err := shadow.WriteDelta(w); return err }
	saved, err = a.SaveModel(ctx, state.Checkpoint{Positions: pos, Version: shadow.Version()},
		state.ModelWriter{Full: full, Delta: delta, DeltaSize: shadow.DeltaSize(), Since: saved.Generation})
	if err != nil || !saved.Delta {
		t.Fatalf("save the delta: %+v, %v", saved, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// Export from A, import into B.
	file := filepath.Join(dir, "model.snap")
	if code, _, stderr := cli(t, "snapshot", "export", "--state", stateA, "--out", file); code != 0 {
		t.Fatalf("export exit %d: %s", code, stderr)
	}
	// --partition of a state whose one model serves every partition
	// exports that model, and says so.
	if code, _, stderr := cli(t, "snapshot", "export", "--state", stateA, "--partition", "2", "--out", filepath.Join(dir, "p2.snap")); code != 0 || !strings.Contains(stderr, "serves every partition: --partition 2 exports that model") {
		t.Fatalf("export --partition 2 of a one-model state: exit %d: %s", code, stderr)
	}
	if code, _, stderr := cli(t, "snapshot", "import", "--in", file, "--state", stateB); code != 0 {
		t.Fatalf("import exit %d: %s", code, stderr)
	}
	if code, _, stderr := cli(t, "snapshot", "import", "--in", file, "--state", stateB); code != 1 || !strings.Contains(stderr, "--replace") {
		t.Fatalf("second import: exit %d: %s", code, stderr)
	}

	// Stage 2: restore from B and go on from its position.
	b, err := state.Open(stateB, state.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	cp, ok, err := b.Load(context.Background())
	if err != nil || !ok {
		t.Fatalf("state B: %v %v", ok, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cp.Model, enc.Bytes()) || len(cp.Positions) != 1 || cp.Positions[0] != pos[0] || cp.Version != split {
		t.Fatalf("imported checkpoint differs: positions %v, version %d", cp.Positions, cp.Version)
	}
	restored, err := online.ReadModel(bytes.NewReader(cp.Model))
	if err != nil {
		t.Fatal(err)
	}
	src := open()
	for range cp.Positions[0].Offset {
		if _, err := src.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got = append(got, replayTo(t, src, restored, filepath.Join(dir, "second.jsonl"))...)
	if !bytes.Equal(got, want) {
		t.Fatal("output across export and import differs from the uninterrupted replay")
	}
}

// TestSnapshotCLI: inspect and diff (text and JSON), export from a live
// instance's URL, and the errors an operator meets.
func TestSnapshotCLI(t *testing.T) {
	dir := t.TempDir()
	golden := "../../snapshot/testdata/v1.snap"
	raw, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}

	code, out, stderr := cli(t, "snapshot", "inspect", golden)
	if code != 0 || !strings.Contains(out, "mean T̂") || !strings.Contains(out, "version 2000") || !strings.Contains(out, golden) {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = cli(t, "snapshot", "inspect", "--json", golden)
	var rep snapshot.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.ModelVersion != 2000 || rep.Norms.Users.Count != 60 {
		t.Fatalf("inspect --json: exit %d, %v: %s", code, err, out)
	}
	code, out, _ = cli(t, "snapshot", "diff", golden, golden)
	if code != 0 || !strings.Contains(out, "config\n  unchanged") || !strings.Contains(out, "embedding drift") {
		t.Fatalf("diff: exit %d\n%s", code, out)
	}
	code, out, _ = cli(t, "snapshot", "diff", "--json", golden, golden)
	var d snapshot.DiffReport
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil || d.UserDrift.Max != 0 || d.UserDrift.Common != 60 {
		t.Fatalf("diff --json: exit %d, %v: %s", code, err, out)
	}

	// Export from a running instance: GET its snapshot URL.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/broken" {
			w.Write(raw[:len(raw)/2])
			return
		}
		if r.URL.Path != "/snapshot" {
			http.Error(w, "no such thing", http.StatusNotFound)
			return
		}
		w.Write(raw)
	}))
	defer srv.Close()
	dl := filepath.Join(dir, "dl.snap")
	if code, _, stderr := cli(t, "snapshot", "export", "--url", srv.URL+"/snapshot", "--out", dl); code != 0 {
		t.Fatalf("export --url: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(dl); !bytes.Equal(b, raw) {
		t.Fatal("the downloaded snapshot differs from the served one")
	}

	damaged := filepath.Join(dir, "damaged.snap")
	bad := bytes.Clone(raw)
	bad[len(bad)/2] ^= 4
	if err := os.WriteFile(damaged, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", []string{"snapshot"}, 2, "missing command"},
		{"unknown command", []string{"snapshot", "frobnicate"}, 2, "unknown command"},
		{"export without out", []string{"snapshot", "export", "--state", dir}, 2, "--out"},
		{"export with both sources", []string{"snapshot", "export", "--state", dir, "--url", srv.URL, "--out", dl}, 2, "exactly one"},
		{"export of a missing state", []string{"snapshot", "export", "--state", filepath.Join(dir, "nope"), "--out", dl}, 1, "no such file"},
		{"export of an empty directory", []string{"snapshot", "export", "--state", t.TempDir(), "--out", dl}, 1, "holds no denoiser state"},
		{"export of a missing URL", []string{"snapshot", "export", "--url", srv.URL + "/nope", "--out", dl}, 1, "404"},
		{"export of a truncated download", []string{"snapshot", "export", "--url", srv.URL + "/broken", "--out", dl}, 1, "truncated"},
		{"import without state", []string{"snapshot", "import", "--in", golden}, 2, "--state"},
		{"import of a damaged file", []string{"snapshot", "import", "--in", damaged, "--state", filepath.Join(dir, "s")}, 1, "checksum mismatch"},
		{"inspect without a file", []string{"snapshot", "inspect"}, 2, "one snapshot file"},
		{"inspect of a damaged file", []string{"snapshot", "inspect", damaged}, 1, "checksum mismatch"},
		{"inspect of a non-snapshot", []string{"snapshot", "inspect", "../../testdata/synthetic-20k.jsonl"}, 1, "not a snapshot file"},
		{"diff of one file", []string{"snapshot", "diff", golden}, 2, "two snapshot files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := cli(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Fatalf("exit %d, want %d; stderr does not mention %q:\n%s", code, tc.code, tc.msg, stderr)
			}
		})
	}
	if b, _ := os.ReadFile(dl); !bytes.Equal(b, raw) {
		t.Fatal("failed exports changed an existing output file")
	}
	// The failed import of the damaged file created no state directory
	// (it left one, an empty Badger state), and leaves a directory that
	// was there as it was.
	if _, err := os.Stat(filepath.Join(dir, "s")); !os.IsNotExist(err) {
		t.Errorf("a failed import left its state directory: %v", err)
	}
	existing := t.TempDir()
	if code, _, stderr := cli(t, "snapshot", "import", "--in", damaged, "--state", existing); code != 1 {
		t.Fatalf("import of a damaged file into a directory: exit %d: %s", code, stderr)
	}
	if entries, err := os.ReadDir(existing); err != nil || len(entries) != 0 {
		t.Errorf("a failed import changed the directory that was there: %v, %v", entries, err)
	}
}

// TestSnapshotExportNoState: export from a directory that holds no state
// (an ordinary one, or a several-member demo's, whose states are its
// member-N) says so, names the states in it, and leaves it as it was;
// import into a new or empty directory still makes a state there, and
// export reads it.
func TestSnapshotExportNoState(t *testing.T) {
	golden := "../../snapshot/testdata/v1.snap"
	out := filepath.Join(t.TempDir(), "out.snap")
	demo := t.TempDir()
	for _, member := range []string{"member-0", "member-1"} {
		st, err := state.Open(filepath.Join(demo, member), state.Options{GCInterval: -1, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		want      string
	}{
		{"empty", t.TempDir(), " holds no denoiser state\n"},
		{"other files", other, " holds no denoiser state\n"},
		{"several-member demo", demo, " holds no denoiser state; directories in it do: --state " +
			filepath.Join(demo, "member-0") + " or --state " + filepath.Join(demo, "member-1") + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadDir(tc.dir)
			code, _, stderr := cli(t, "snapshot", "export", "--state", tc.dir, "--out", out)
			if code != 1 || !strings.Contains(stderr, tc.dir+tc.want) {
				t.Errorf("exit %d, want 1; stderr does not say %q:\n%s", code, tc.dir+tc.want, stderr)
			}
			if after, _ := os.ReadDir(tc.dir); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("export changed the directory: %v, was %v", after, before)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed export wrote its file: %v", err)
	}
	for name, dir := range map[string]string{"new": filepath.Join(t.TempDir(), "new"), "empty": t.TempDir()} {
		if code, _, stderr := cli(t, "snapshot", "import", "--in", golden, "--state", dir); code != 0 {
			t.Fatalf("import into a %s directory: exit %d: %s", name, code, stderr)
		}
		if code, _, stderr := cli(t, "snapshot", "export", "--state", dir, "--out", out); code != 0 {
			t.Fatalf("export of the state imported into a %s directory: exit %d: %s", name, code, stderr)
		}
	}
}

// TestSnapshotFlagsAfterFiles: the snapshot commands take their flags
// before, between or after the files; after "--" every argument is a file.
func TestSnapshotFlagsAfterFiles(t *testing.T) {
	golden := "../../snapshot/testdata/v1.snap"
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout, or with a failure in stderr
	}{
		{"inspect, flag before", []string{"inspect", "--json", golden}, 0, `"model_version": 2000`},
		{"inspect, flag after", []string{"inspect", golden, "--json"}, 0, `"model_version": 2000`},
		{"inspect, one dash", []string{"inspect", golden, "-json"}, 0, `"model_version": 2000`},
		{"inspect, flag with a value", []string{"inspect", golden, "--json=false"}, 0, "mean T̂"},
		{"diff, flag between", []string{"diff", golden, "--json", golden}, 0, `"a": "` + golden},
		{"diff, flag after", []string{"diff", golden, golden, "--json"}, 0, `"a": "` + golden},
		{"export, an argument between flags", []string{"export", "--url", "http://127.0.0.1:1/snapshot", "extra", "--out", filepath.Join(dir, "x.snap")}, 2,
			`unexpected arguments ["extra"]`},
		{"after --, a file", []string{"inspect", "--", "--json"}, 1, "open --json"},
		{"a flag after --, a file", []string{"diff", golden, "--", "--json"}, 1, "open --json"},
		{"two files", []string{"inspect", golden, "--json", golden}, 2, "want one snapshot file"},
		{"unknown flag after the file", []string{"inspect", golden, "--nope"}, 2, "flag provided but not defined: -nope"},
		{"a value missing at the end", []string{"import", "--in", golden, "--state"}, 2, "flag needs an argument: -state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := cli(t, append([]string{"snapshot"}, tc.args...)...)
			where := stdout
			if tc.code != 0 {
				where = stderr
			}
			if code != tc.code || !strings.Contains(where, tc.want) {
				t.Fatalf("exit %d, want %d; output does not say %q:\n%s%s", code, tc.code, tc.want, stdout, stderr)
			}
		})
	}
}

// BenchmarkSnapshotState1M: `denoiser snapshot export --state` and
// `import --state` of a model of 1,000,000 users and 100,000 items at
// d = 32 (default configuration), through real Badger state directories.
// The model is built as in snapshot's BenchmarkSnapshot1M: 2,000,000 Steps,
// 2 per user, every item 20 times. Export = Badger load + write + verify
// (a full read back); import = verified read + re-encode + Badger save.
//
//	go test ./cmd/denoiser -run '^$' -bench SnapshotState1M -benchtime 1x -timeout 30m
func BenchmarkSnapshotState1M(b *testing.B) {
	m, err := online.New(online.DefaultConfig(), rand.NewPCG(1, 2))
	if err != nil {
		b.Fatal(err)
	}
	var sc online.Score
	for e := range 2_000_000 {
		ev := online.Event{User: fmt.Sprint("user-", e/2), Item: fmt.Sprint("item-", (e%100_000)*7919%100_000)}
		if err := m.Step(ev, &sc); err != nil {
			b.Fatal(err)
		}
	}
	var enc bytes.Buffer
	if _, err := m.WriteTo(&enc); err != nil {
		b.Fatal(err)
	}
	m = nil
	dir := b.TempDir()
	stateA := filepath.Join(dir, "a")
	st, err := state.Open(stateA, state.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Save(context.Background(), state.Checkpoint{Model: enc.Bytes(), Version: 2_000_000,
		Positions: []input.Position{{Topic: "clicks", Offset: 2_000_000}}}); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	enc = bytes.Buffer{}
	file := filepath.Join(dir, "big.snap")
	// measure runs the command and reports the peak of the live heap
	// (sampled every millisecond) above what was live before.
	measure := func(b *testing.B, args ...string) {
		base := heapstat.Now()
		stop := heapstat.Peak()
		for b.Loop() {
			if code, _, stderr := cli2(args...); code != 0 {
				b.Fatalf("exit %d: %s", code, stderr)
			}
		}
		peak := stop()
		b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "heap-peak-MiB")
	}
	b.Run("export", func(b *testing.B) { measure(b, "snapshot", "export", "--state", stateA, "--out", file) })
	b.Run("import", func(b *testing.B) {
		measure(b, "snapshot", "import", "--replace", "--in", file, "--state", filepath.Join(dir, "b"))
	})
	if fi, err := os.Stat(file); err == nil {
		b.Logf("snapshot file: %d bytes", fi.Size())
	}
}

func cli2(args ...string) (int, string, string) {
	var o, e bytes.Buffer
	code := run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

// TestOpenStateHint: a state directory another store holds (its lock)
// is refused with the hint to export from the running instance; a
// failure of another kind (the path a regular file) is not given that
// hint, which it had whatever the cause.
func TestOpenStateHint(t *testing.T) {
	dir := t.TempDir()
	held, err := state.Open(dir, state.Options{GCInterval: -1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := openState(dir); err == nil || !strings.Contains(err.Error(), "a running instance holds its state directory") {
		t.Errorf("a held state directory: %v, want the running instance named", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openState(file); err == nil || strings.Contains(err.Error(), "running instance") {
		t.Errorf("a regular file as the state directory: %v, want an error without the running instance's hint", err)
	}
}
