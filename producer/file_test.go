package producer_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"denoiser/consumer"
	"denoiser/online"
	"denoiser/producer"
	"denoiser/producer/producertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeInput writes n synthetic events, with a bad line every 17 lines.
func writeInput(t *testing.T, path string, n int) {
	t.Helper()
	rnd := rand.New(rand.NewPCG(3, 4))
	var b bytes.Buffer
	for i := range n {
		switch {
		case i%17 == 5:
			b.WriteString("{\"user\":\"u1\",\"item\":\"i\",\"dwell_ms\":-1}\n")
		case i%17 == 11:
			b.WriteString("garbage \xff\n")
		default:
			truth := "genuine"
			if rnd.Float64() < 0.2 {
				truth = "noise"
			}
			fmt.Fprintf(&b, "{\"user\":\"u%d\",\"item\":%d,\"ts\":%d,\"event\":\"click\",\"dwell_ms\":%d,\"truth\":%q}\n",
				rnd.IntN(50), rnd.IntN(200), 1700000000000+int64(i)*1000, rnd.IntN(60000), truth)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func replay(t *testing.T, in, out, dead string) consumer.Stats {
	t.Helper()
	src, err := consumer.OpenFile(in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	model, err := online.New(online.Config{Dim: 8, WarmUp: 100, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256}, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	sink, err := producer.CreateFileSink(out)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := producer.CreateFileDeadLetter(dead)
	if err != nil {
		t.Fatal(err)
	}
	st, err := consumer.Run(context.Background(), src, model, sink, dlq, consumer.Options{Buffer: 8})
	if err != nil {
		t.Fatal(errors.Join(err, sink.Abort(), dlq.Abort()))
	}
	if err := errors.Join(sink.Close(), dlq.Close()); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	const n = 3000
	writeInput(t, in, n)
	out1, dead1 := filepath.Join(dir, "out1.jsonl"), filepath.Join(dir, "dead1.jsonl")
	st := replay(t, in, out1, dead1)

	bad := uint64(0)
	for i := range n {
		if i%17 == 5 || i%17 == 11 {
			bad++
		}
	}
	if st.Records != n || st.Rejected != bad || st.Scored != n-bad {
		t.Fatalf("stats %+v, want %d records, %d rejected", st, n, bad)
	}

	// Every scored line is valid JSON, in input order, and echoes its input.
	f, err := os.Open(out1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines, prev int64
	for sc.Scan() {
		var rec struct {
			User           string    `json:"user"`
			Event          string    `json:"event"`
			Truth          string    `json:"truth"`
			PClean         float64   `json:"p_clean"`
			Reliability    float64   `json:"reliability"`
			CleanPosterior []float64 `json:"clean_posterior"`
			Distilled      *int      `json:"distilled"`
			Version        uint64    `json:"model_version"`
			Source         struct {
				File string `json:"file"`
				Line int64  `json:"line"`
			} `json:"source"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d: %v", lines+1, err)
		}
		if rec.Source.File != in || rec.Source.Line <= prev || rec.Event != "click" || rec.Truth == "" || len(rec.CleanPosterior) != 2 {
			t.Fatalf("line %d: bad record %s", lines+1, sc.Bytes())
		}
		if rec.PClean < 0 || rec.PClean > 1 || rec.Reliability < 0 || rec.Reliability > 1 {
			t.Fatalf("line %d: scores out of [0,1]: %s", lines+1, sc.Bytes())
		}
		if rec.Version != uint64(lines) {
			t.Fatalf("line %d: model_version %d", lines+1, rec.Version)
		}
		prev = rec.Source.Line
		lines++
	}
	if uint64(lines) != st.Scored {
		t.Fatalf("%d scored lines, want %d", lines, st.Scored)
	}

	deadBytes, err := os.ReadFile(dead1)
	if err != nil {
		t.Fatal(err)
	}
	dl := bytes.Split(bytes.TrimSuffix(deadBytes, []byte("\n")), []byte("\n"))
	if uint64(len(dl)) != bad {
		t.Fatalf("%d dead-letter lines, want %d", len(dl), bad)
	}
	var first, second struct {
		Reason string `json:"reason"`
		Raw    string `json:"raw"`
		Base64 []byte `json:"raw_base64"`
		Source struct {
			Line int64 `json:"line"`
		} `json:"source"`
	}
	if err := errors.Join(json.Unmarshal(dl[0], &first), json.Unmarshal(dl[1], &second)); err != nil {
		t.Fatal(err)
	}
	if first.Reason != "out_of_range" || first.Source.Line != 6 || first.Raw != `{"user":"u1","item":"i","dwell_ms":-1}` {
		t.Fatalf("first dead letter %s", dl[0])
	}
	if second.Reason != "not_json" || second.Source.Line != 12 || string(second.Base64) != "garbage \xff" {
		t.Fatalf("second dead letter %s", dl[1])
	}

	// Determinism: a second replay gives the same bytes.
	out2, dead2 := filepath.Join(dir, "out2.jsonl"), filepath.Join(dir, "dead2.jsonl")
	replay(t, in, out2, dead2)
	for _, p := range [][2]string{{out1, out2}, {dead1, dead2}} {
		a, _ := os.ReadFile(p[0])
		b, _ := os.ReadFile(p[1])
		if !bytes.Equal(a, b) {
			t.Fatalf("%s and %s differ", p[0], p[1])
		}
	}
}

func TestFileSinkSuite(t *testing.T) {
	producertest.RunSinkSuite(t, func(t *testing.T) (consumer.Sink, producertest.Harness) {
		path := filepath.Join(t.TempDir(), "scored.jsonl")
		s, err := producer.CreateFileSink(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Abort() })
		return s, fileHarness(path, s.Close, s.Records)
	})
}

func TestFileDeadLetterSuite(t *testing.T) {
	producertest.RunDeadLetterSuite(t, func(t *testing.T) (consumer.DeadLetter, producertest.Harness) {
		path := filepath.Join(t.TempDir(), "dead.jsonl")
		d, err := producer.CreateFileDeadLetter(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Abort() })
		return d, fileHarness(path, d.Close, d.Records)
	})
}

// fileHarness reads a closed JSON-lines output back: one stream, every
// line ended by a newline.
func fileHarness(path string, closeFile func() error, records func() uint64) producertest.Harness {
	return producertest.Harness{
		Close:     func(context.Context) error { return closeFile() },
		Delivered: records,
		ErrClosed: producer.ErrClosed,
		ReadBack: func(t *testing.T, n int) []producertest.Output {
			t.Helper()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) > 0 && data[len(data)-1] != '\n' {
				t.Fatalf("%s does not end with a newline", path)
			}
			var out []producertest.Output
			for line := range bytes.Lines(data) {
				out = append(out, producertest.Output{Value: bytes.TrimSuffix(line, []byte("\n"))})
			}
			return out
		},
	}
}

// TestFileSinkAtomic holds what only files do: the output appears under its
// name on Close, not before, with mode 0644; Abort leaves nothing behind.
func TestFileSinkAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	s, err := producer.CreateFileSink(path)
	if err != nil {
		t.Fatal(err)
	}
	r := &consumer.Result{Event: consumer.Event{User: "u", Item: "i"}, Score: online.Score{Distilled: -1}}
	if err := s.Write(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("output visible before Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(); err != nil {
		t.Fatalf("Abort after Close: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("after Close and Abort: %v, %v", fi, err)
	}

	// Abort leaves nothing behind, not even the temporary file.
	d, err := producer.CreateFileDeadLetter(filepath.Join(dir, "dead.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Reject(context.Background(), &consumer.Result{Reason: consumer.ReasonNotJSON, Raw: []byte("x"), RawSize: 1}); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(d.Abort(), d.Abort(), d.Close()); err != nil {
		t.Fatal(err)
	}
	if err := d.Reject(context.Background(), &consumer.Result{Reason: consumer.ReasonNotJSON}); !errors.Is(err, producer.ErrClosed) {
		t.Fatalf("Reject after Abort = %v, want ErrClosed", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries after Abort, want 1", len(entries))
	}
	if _, err := producer.CreateFileSink(filepath.Join(dir, "missing", "out.jsonl")); err == nil {
		t.Fatal("CreateFileSink in a missing directory succeeded")
	}
	if _, err := producer.CreateFileDeadLetter(filepath.Join(dir, "missing", "dead.jsonl")); err == nil {
		t.Fatal("CreateFileDeadLetter in a missing directory succeeded")
	}
}

// TestFileSinkGzip: a sink or dead-letter file whose name ends in ".gz" is
// written gzip-compressed, holding what the plain file holds (Buffer 8:
// many flushes, each a gzip sync point, in the stream).
func TestFileSinkGzip(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeInput(t, in, 500)
	replay(t, in, filepath.Join(dir, "o.jsonl"), filepath.Join(dir, "d.jsonl"))
	replay(t, in, filepath.Join(dir, "o.jsonl.gz"), filepath.Join(dir, "d.jsonl.gz"))
	for _, name := range []string{"o.jsonl", "d.jsonl"} {
		plain, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(dir, name+".gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		f.Close()
		if err != nil || len(plain) == 0 || !bytes.Equal(got, plain) {
			t.Errorf("%s.gz decompressed (%v) is not %s (%d bytes against %d)", name, err, name, len(got), len(plain))
		}
	}
}
