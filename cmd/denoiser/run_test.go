package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/internal/cli/clitest"
	"denoiser/internal/kafkatest"
	"denoiser/internal/synth"
	"denoiser/online"
	"denoiser/producer"
	"denoiser/service"
	"denoiser/state"
)

func TestRunConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no topic", []string{"run", "--brokers", "127.0.0.1:1", "--state-dir", t.TempDir()}, "kafka.input_topic: required"},
		{"bad set", []string{"run", "--set", "kafka.nope=1"}, `kafka.nope: unknown setting`},
		{"set without value", []string{"run", "--set", "kafka.group"}, "want PATH=VALUE"},
		{"set of a section", []string{"run", "--set", "kafka={group: g}"}, "kafka is a section, not a setting: give one --set per setting, --set kafka.group=g"},
		{"bad duration", []string{"run", "--brokers", "b:1", "--input-topic", "t", "--state-dir", "d", "--set", "kafka.batch_timeout=fast"}, "kafka.batch_timeout"},
		{"no state dir", []string{"run", "--brokers", "b:1", "--input-topic", "t"}, "checkpoint.dir: required"},
		{"missing file", []string{"run", "--config", "/nonexistent/denoiser.yaml"}, "read config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &bytes.Buffer{}, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr %q lacks %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestRunPrintConfigLayers(t *testing.T) {
	cfg := clitest.WriteFile(t, filepath.Join(t.TempDir(), "c.yaml"), "kafka:\n  input_topic: from-file\n  group: file-group\nmodel:\n  dim: 8\n")
	t.Setenv("DENOISER_KAFKA_GROUP", "env-group")
	t.Setenv("DENOISER_CHECKPOINT_INTERVAL", "3s")
	t.Setenv("DENOISER_KAFKA_GRUOP", "typo")                              // pointed out, as a run would
	t.Setenv("DENOISER_HTTP_SNAPSHOT_DIR", "/var/lib/denoiser/snapshots") // --snapshot-dir, from the environment
	var stdout, stderr bytes.Buffer
	args := []string{"run", "--config", cfg, "--group", "flag-group", "--set", "kafka.batch_size=7", "--print-config"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "DENOISER_KAFKA_GRUOP (did you mean DENOISER_KAFKA_GROUP?) names no setting") {
		t.Errorf("stderr does not point out the misspelt variable:\n%s", stderr.String())
	}
	for _, want := range []string{"input_topic: from-file", "group: flag-group", "interval: 3s", "batch_size: 7", "dim: 8", "output_topic: from-file.scored", "snapshot_dir: /var/lib/denoiser/snapshots"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("effective config lacks %q:\n%s", want, stdout.String())
		}
	}
	// Printed as asked, with what a run would refuse of it.
	if !strings.Contains(stderr.String(), "would not start") || !strings.Contains(stderr.String(), "kafka.brokers") {
		t.Errorf("stderr does not say the config lacks the brokers:\n%s", stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	args = append(args, "--set", "kafka.brokers=127.0.0.1:9092", "--set", "kafka.start=beginning")
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "start: beginning") {
		t.Fatalf("exit %d: %s\n%s", code, stderr.String(), stdout.String())
	}
	if !strings.Contains(stderr.String(), `would not start: configuration: kafka.start: "beginning" is not earliest or latest`) {
		t.Errorf("stderr does not name the bad value:\n%s", stderr.String())
	}
}

// TestRunRefusalNamesMisspeltEnv: a run refused for a missing setting
// names the DENOISER_* variable that was most likely meant to give it
// (the did-you-mean came only in the log of a run that started); so does
// topics.
func TestRunRefusalNamesMisspeltEnv(t *testing.T) {
	t.Setenv("DENOISER_KAFKA_BROKER", "127.0.0.1:9092")
	t.Setenv("DENOISER_KAFKA_INPUT_TOPIC", "clicks")
	want := "DENOISER_KAFKA_BROKER (did you mean DENOISER_KAFKA_BROKERS?)"
	for _, args := range [][]string{{"run"}, {"topics"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Fatalf("%s: exit %d, want 2; stderr:\n%s", args[0], code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "kafka.brokers") || !strings.Contains(stderr.String(), want) {
			t.Errorf("%s: the refusal does not name the misspelt variable:\n%s", args[0], stderr.String())
		}
	}
}

// child is a `denoiser run` process: the test binary run as the command.
type child struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

func startChild(t *testing.T, logPath string, args ...string) *child {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	// GOTRACEBACK=all: stacks (SIGQUIT) dumps every goroutine.
	cmd.Env = append(os.Environ(), envAsDenoiser+"=1", "GOTRACEBACK=all")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	c := &child{cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() {
		c.done <- cmd.Wait()
		f.Close()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// tail returns the end of the child's log.
func (c *child) tail() string {
	b, _ := os.ReadFile(c.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// stacks is for a child that does not stop: it sends SIGQUIT, waits for
// the exit, and returns the goroutines of its dump that run this
// project's code (where it hangs), blank-line separated as Go prints them.
func (c *child) stacks() string {
	if err := c.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return fmt.Sprintf("SIGQUIT: %v", err)
	}
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		return "no exit 10s after SIGQUIT"
	}
	b, _ := os.ReadFile(c.log)
	_, dump, ok := strings.Cut(string(b), "SIGQUIT: quit")
	if !ok {
		return "no goroutine dump in the log"
	}
	var out []string
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "denoiser/") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// runConfig writes the configuration of a `denoiser run` child.
func runConfig(t *testing.T, b *kafkatest.Broker, in, dir string) string {
	t.Helper()
	session := "2s"
	if b.Real {
		session = "6s" // the broker's group.min.session.timeout.ms
	}
	return clitest.WriteFile(t, filepath.Join(dir, "run.yaml"), fmt.Sprintf(`kafka:
  brokers: [%s]
  input_topic: %s
  group: %s-g
  session_timeout: %s
  heartbeat_interval: 300ms
  rebalance_timeout: 5s
  request_timeout: 2s
  fetch_max_wait: 100ms
checkpoint:
  dir: %s
  every_events: 2000
  interval: 300ms
http:
  addr: off
log:
  level: info
`, strings.Join(b.Addrs, ", "), in, in, session, filepath.Join(dir, "state")))
}

// setLayout adds state_layout to the config file at path (runConfig's
// has none: member).
func setLayout(t *testing.T, path string, layout online.Layout) {
	t.Helper()
	appendConfig(t, path, fmt.Sprintf("state_layout: %s\n", layout))
}

// appendConfig adds text to the config file at path.
func appendConfig(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(text)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// crashInput is n synthetic events with a bad record every 9973 events.
func crashInput(t *testing.T, n int) [][]byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := synth.Write(context.Background(), &buf, synth.Config{Events: n, Noise: 0.2, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	for i := 9973; i < len(lines); i += 9973 {
		lines[i] = []byte(`{"user":"poison","item":"x","dwell_ms":-1}`)
	}
	return lines
}

// referenceModel steps a model over lines in order, as a run without
// crashes does, and returns its encoding and the output value per offset.
func referenceModel(t *testing.T, topic string, lines [][]byte) ([]byte, map[int64][]byte) {
	t.Helper()
	cfg := service.BaseConfig().WithDefaults()
	m, err := online.New(cfg.Model, online.NewSource(cfg.Seed))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]byte{}
	for i, l := range lines {
		r := consumer.Result{Pos: input.Position{Topic: topic, Offset: int64(i)}}
		if err := consumer.Decode(l, &r.Event); err != nil {
			continue
		}
		if err := m.Step(r.Event.Model(), &r.Score); err != nil && !errors.Is(err, online.ErrNumerical) {
			continue
		}
		out[int64(i)] = producer.AppendScored(nil, &r)
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), out
}

func sourceOffsetOf(t *testing.T, m kafka.Message) int64 {
	t.Helper()
	v, ok := kafkatest.Header(m, producer.HeaderSourceOffset)
	o, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil {
		t.Fatalf("record without source offset: %+v", m.Headers)
	}
	return o
}

// coverage counts the distinct input offsets below n with an output
// record in the scored or the dead-letter topic.
func coverage(t *testing.T, scored, dead []kafka.Message, n int) int {
	seen := make([]bool, n)
	c := 0
	for _, ms := range [][]kafka.Message{scored, dead} {
		for _, m := range ms {
			if o := sourceOffsetOf(t, m); o >= 0 && o < int64(n) && !seen[o] {
				seen[o] = true
				c++
			}
		}
	}
	return c
}

// TestRunCrashRecovery kills `denoiser run` with SIGKILL at random points,
// at least five times, while 100,000 events flow through a one-partition
// topic. After the last restart every input offset has an output record,
// re-emitted records are byte-identical to the first emission and to a run
// without crashes, and the final model is byte-identical to the model of a
// run without crashes.
func TestRunCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: about a minute")
	}
	const n, kills = 100_000, 5
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DENOISER_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rnd := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d (DENOISER_CRASH_SEED=%d reproduces the kill times)", seed, seed)

	b := kafkatest.New(t)
	in := b.Topic(t, "crash", 1)
	b.CreateTopic(t, in+".scored", 2)
	b.CreateTopic(t, in+".dead-letter", 1)
	dir := t.TempDir()
	cfg := runConfig(t, b, in, dir)
	lines := crashInput(t, n)
	wantModel, wantOut := referenceModel(t, in, lines)

	// Events flow in over ~25 s while the process is killed and restarted.
	produced := make(chan error, 1)
	go func() {
		const chunk = 2000
		for i := 0; i < n; i += chunk {
			if err := b.ProduceErr(in, kafkatest.Values(lines[i:min(i+chunk, n)]...)...); err != nil {
				produced <- err
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		produced <- nil
	}()

	scored, dead, poll := outputReaders(t, b, in)

	for k := 1; k <= kills; k++ {
		c := startChild(t, filepath.Join(dir, fmt.Sprintf("run-%d.log", k)), "run", "--config", cfg)
		// Wait until this process emits, then kill it at a random point.
		before := poll()
		deadline := time.Now().Add(90 * time.Second)
		for poll() == before {
			if time.Now().After(deadline) {
				t.Fatalf("run %d emitted nothing in 90s; its log:\n%s", k, c.tail())
			}
			select {
			case err := <-c.done:
				t.Fatalf("run %d exited by itself: %v\n%s", k, err, c.tail())
			case <-time.After(100 * time.Millisecond):
			}
		}
		delay := time.Duration(rnd.Int64N(int64(1500 * time.Millisecond)))
		time.Sleep(delay)
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-c.done
		t.Logf("kill %d: %v after the first output of this run; %d output records so far", k, delay.Round(time.Millisecond), poll())
	}
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}

	// The last run goes to the end and stops gracefully. Every offset
	// having an output is not enough: the outputs of a crashed run beyond
	// its last checkpoint cover offsets the last run has yet to process. The
	// last run is at the end once its model has learned every event the
	// run without crashes learned (denoiser_model_events, read from its
	// /metrics).
	addr := freeAddr(t)
	last := startChild(t, filepath.Join(dir, "run-last.log"), "run", "--config", cfg, "--set", "http.addr="+addr)
	learnedAll := fmt.Sprintf("\ndenoiser_model_events %d\n", len(wantOut))
	deadline := time.Now().Add(3 * time.Minute)
	for {
		poll()
		if coverage(t, scored.Msgs, dead.Msgs, n) == n && strings.Contains(metricsText("http://"+addr+"/metrics"), learnedAll) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the last restart only %d of %d input offsets have an output; log:\n%s",
				coverage(t, scored.Msgs, dead.Msgs, n), n, last.tail())
		}
		select {
		case err := <-last.done:
			t.Fatalf("last run exited by itself: %v\n%s", err, last.tail())
		case <-time.After(200 * time.Millisecond):
		}
	}
	stopStart := time.Now()
	if err := last.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-last.done; err != nil {
		t.Fatalf("last run after SIGTERM: %v\n%s", err, last.tail())
	}
	t.Logf("last run stopped %v after SIGTERM", time.Since(stopStart).Round(time.Millisecond))

	// Every emission of an offset, first or repeated, is the reference's.
	dups := 0
	for _, m := range scored.Msgs {
		o := sourceOffsetOf(t, m)
		want, ok := wantOut[o]
		if !ok {
			t.Fatalf("scored output for offset %d, which the reference dead-letters", o)
		}
		if !bytes.Equal(m.Value, want) {
			t.Fatalf("output of offset %d differs from a run without crashes:\n got %s\nwant %s", o, m.Value, want)
		}
	}
	dups = len(scored.Msgs) + len(dead.Msgs) - n
	t.Logf("%d input events, %d scored and %d dead-letter records: %d re-emitted after crashes", n, len(scored.Msgs), len(dead.Msgs), dups)
	if len(dead.Msgs) < n/9973 {
		t.Errorf("%d dead letters, want at least %d", len(dead.Msgs), n/9973)
	}

	st, err := state.Open(filepath.Join(dir, "state"), state.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cp, ok, err := st.Load(context.Background())
	if err != nil || !ok {
		t.Fatalf("load final checkpoint: %v %v", ok, err)
	}
	if !slices.Equal(cp.Positions, []input.Position{{Topic: in, Partition: 0, Offset: int64(n)}}) {
		t.Errorf("final positions %v, want %s/0 at %d", cp.Positions, in, n)
	}
	// The checkpoint's model (of partition 0, the only one) is its base
	// with its deltas applied: cp.Model alone is the base, an older model
	// whenever the last save was a delta.
	snap, err := service.CheckpointModel(context.Background(), cp, 0)
	if err != nil {
		t.Fatalf("decode final checkpoint (base %d + %d deltas): %v", cp.Base, len(cp.Deltas), err)
	}
	if model := snap.Model; !bytes.Equal(model, wantModel) {
		t.Fatalf("final model (%d bytes, version %d, generation %d = base %d + %d deltas) differs from a run without crashes (%d bytes)",
			len(model), cp.Version, cp.Generation, cp.Base, len(cp.Deltas), len(wantModel))
	}
	t.Logf("final model: %d bytes, version %d, checkpoint generation %d = base %d + %d deltas: byte-identical to a run without crashes",
		len(snap.Model), cp.Version, cp.Generation, cp.Base, len(cp.Deltas))
}

// TestRunShutdownBrokerGone stops the broker under a running `denoiser
// run` that has a backlog, then sends SIGTERM: the process must exit within
// its shutdown bound (10s). After the broker is back, a new run resumes
// and every input offset gets its output.
func TestRunShutdownBrokerGone(t *testing.T) {
	for _, layout := range []online.Layout{online.LayoutMember, online.LayoutPartition} {
		t.Run(string(layout), func(t *testing.T) {
			testShutdownBrokerDown(t, "gone", layout, (*kafkatest.Broker).Stop, (*kafkatest.Broker).Start)
		})
	}
}

// TestRunShutdownBrokerHung is TestRunShutdownBrokerGone with a broker that
// hangs instead: its connections stay open and accept requests, but nothing
// answers (SIGSTOP for the real broker), so no call fails fast.
func TestRunShutdownBrokerHung(t *testing.T) {
	for _, layout := range []online.Layout{online.LayoutMember, online.LayoutPartition} {
		t.Run(string(layout), func(t *testing.T) {
			testShutdownBrokerDown(t, "hung", layout, (*kafkatest.Broker).Freeze, (*kafkatest.Broker).Thaw)
		})
	}
}

func testShutdownBrokerDown(t *testing.T, name string, layout online.Layout, down, up func(*kafkatest.Broker, testing.TB)) {
	if testing.Short() {
		t.Skip("stops the broker")
	}
	b := kafkatest.Exclusive(t)
	in := b.Topic(t, name, 1)
	b.CreateTopic(t, in+".scored", 1)
	b.CreateTopic(t, in+".dead-letter", 1)
	dir := t.TempDir()
	cfg := runConfig(t, b, in, dir)
	setLayout(t, cfg, layout)
	const n = 60_000
	lines := crashInput(t, n)
	b.Produce(t, in, kafkatest.Values(lines...)...)

	c := startChild(t, filepath.Join(dir, "run-1.log"), "run", "--config", cfg)
	out := b.NewReader(t, in+".scored")
	out.Until(t, 90*time.Second, kafkatest.AtLeast(1))
	down(b, t)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	select {
	case exitErr = <-c.done:
	case <-time.After(30 * time.Second):
		log := c.tail()
		t.Fatalf("still running 30s after SIGTERM with the broker %s:\n%s\ngoroutines:\n%s", name, log, c.stacks())
	}
	took := time.Since(start)
	t.Logf("SIGTERM with the broker %s: exit after %v (%v)", name, took.Round(time.Millisecond), exitErr)
	if took > 10*time.Second {
		t.Errorf("shutdown took %v, bound 10s\n%s", took, c.tail())
	}

	up(b, t)
	dead := b.NewReader(t, in+".dead-letter")
	c2 := startChild(t, filepath.Join(dir, "run-2.log"), "run", "--config", cfg)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = out.Poll(ctx)
		_ = dead.Poll(ctx)
		cancel()
		if coverage(t, out.Msgs, dead.Msgs, n) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart only %d of %d offsets have an output:\n%s", coverage(t, out.Msgs, dead.Msgs, n), n, c2.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = c2.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-c2.done; err != nil {
		t.Errorf("second run: %v\n%s", err, c2.tail())
	}
}

// freeAddr returns a 127.0.0.1 address nothing listens on now.
// metricsText returns the body of a GET of url, "" when it fails.
func metricsText(url string) string {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runInProcess runs `denoiser run` args in this process until the returned
// stop is called; stop returns the exit code.
func runInProcess(t *testing.T, args ...string) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	var stderr bytes.Buffer
	go func() { code <- run(ctx, append([]string{"run"}, args...), &bytes.Buffer{}, &stderr) }()
	var once sync.Once
	var c int
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case c = <-code:
			case <-time.After(30 * time.Second):
				t.Fatal("run did not stop")
			}
			if c != 0 {
				t.Logf("run exited %d:\n%s", c, stderr.String())
			}
		})
		return c
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestRunLiveSnapshotAndFromSnapshot: POST /snapshot on a running service
// writes a snapshot of the model and its positions; a new instance with an
// empty state started --from-snapshot resumes at those positions.
func TestRunLiveSnapshotAndFromSnapshot(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "snap", 1)
	b.CreateTopic(t, in+".scored", 1)
	b.CreateTopic(t, in+".dead-letter", 1)
	lines := crashInput(t, 600)
	b.Produce(t, in, kafkatest.Values(lines[:500]...)...)
	dir := t.TempDir()
	cfg := runConfig(t, b, in, dir)
	addr := freeAddr(t)
	stop := runInProcess(t, "--config", cfg, "--http", addr, "--snapshot-dir", dir)
	b.NewReader(t, in+".scored").Until(t, time.Minute, kafkatest.AtLeast(500))

	var res struct {
		Path         string `json:"path"`
		ModelVersion uint64 `json:"model_version"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post("http://"+addr+"/snapshot", "", nil)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if err := json.Unmarshal(body, &res); err != nil {
					t.Fatalf("POST /snapshot: %v: %s", err, body)
				}
				break
			}
			err = fmt.Errorf("%s: %s", resp.Status, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("POST /snapshot: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res.ModelVersion != 500 {
		t.Fatalf("snapshot of model version %d, want 500", res.ModelVersion)
	}
	if code := stop(); code != 0 {
		t.Fatalf("first run exit %d", code)
	}

	// A new instance: new state, new group, new output topic; the snapshot
	// says where to start.
	b.Produce(t, in, kafkatest.Values(lines[500:]...)...)
	b.CreateTopic(t, in+".scored2", 1)
	cfg2 := clitest.WriteFile(t, filepath.Join(dir, "run2.yaml"), strings.NewReplacer(
		"group: "+in+"-g", "group: "+in+"-g2",
		filepath.Join(dir, "state"), filepath.Join(dir, "state2"),
	).Replace(clitest.ReadFile(t, cfg)))
	stop2 := runInProcess(t, "--config", cfg2, "--output-topic", in+".scored2", "--from-snapshot", res.Path)
	out := b.NewReader(t, in+".scored2").Until(t, time.Minute, kafkatest.AtLeast(100))
	if code := stop2(); code != 0 {
		t.Fatalf("second run exit %d", code)
	}
	for _, m := range out {
		if o := sourceOffsetOf(t, m); o < 500 {
			t.Fatalf("the instance started from the snapshot scored offset %d, before the snapshot's position 500", o)
		}
	}
	if len(out) != 100 {
		t.Fatalf("%d records from the second instance, want 100", len(out))
	}
	st, err := state.Open(filepath.Join(dir, "state2"), state.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cp, ok, err := st.Load(context.Background())
	if err != nil || !ok || cp.Version != 600 {
		t.Fatalf("second instance's checkpoint: version %d, %v, %v; want 600", cp.Version, ok, err)
	}
}

// TestRunHelpIsWrapped: `denoiser run --help` exits 0 and no line of it is
// wider than 80 columns.
func TestRunHelpIsWrapped(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	help := stdout.String() + stderr.String()
	for _, line := range strings.Split(help, "\n") {
		if len([]rune(line)) > 80 {
			t.Errorf("line of %d columns: %q", len([]rune(line)), line)
		}
	}
	for _, want := range []string{"--set PATH=VALUE", "--print-config", "kafka.brokers", "model.dim"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestRunUsageErrorHasNoSuffix: a configuration error is printed without a
// trailing ": usage", and exits with 2.
func TestRunUsageErrorHasNoSuffix(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "--brokers", "b:1", "--input-topic", "t"}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if s := strings.TrimSpace(stderr.String()); strings.HasSuffix(s, ": usage") || !strings.HasPrefix(s, "denoiser: run: ") {
		t.Fatalf("stderr %q", s)
	}
}

// TestRunStartupTimeout: with no reachable broker and kafka.startup_timeout
// set, `denoiser run` exits with 1 and says why, within the bound.
func TestRunStartupTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var stderr bytes.Buffer
	args := []string{"run", "--brokers", addr, "--input-topic", "clicks", "--state-dir", t.TempDir(), "--http", "off",
		"--set", "kafka.startup_timeout=2s", "--set", "kafka.request_timeout=1s"}
	start := time.Now()
	code := run(context.Background(), args, &bytes.Buffer{}, &stderr)
	took := time.Since(start)
	if code != 1 || took > 10*time.Second {
		t.Fatalf("exit %d after %v, want 1 within 10s; stderr:\n%s", code, took, stderr.String())
	}
	last := strings.TrimSpace(stderr.String())
	last = last[strings.LastIndex(last, "\n")+1:]
	if !strings.HasPrefix(last, "denoiser: run: ") || !strings.Contains(last, "could not join the consumer group within kafka.startup_timeout (2s)") {
		t.Fatalf("last line %q does not say that the brokers could not be reached in time", last)
	}
}

// TestRunCrashRecoveryGroup runs three `denoiser run` members of one
// consumer group, each with its own state directory, over a six-partition
// topic, and kills a random member with SIGKILL five times while the
// events flow in, restarting it each time with the same configuration and
// state. When every member is at the end of every partition they stop
// gracefully. Every input offset must then have an output record (scored
// or dead letter), and no input record may have more than one: on
// assignment a member starts at the later of its checkpoint and the
// committed offset, and reads the output topics back to find what a
// crashed owner emitted after the committed offset (producer.TailScan),
// so as not to emit it again.
//
// With state_layout partition (the subtest "partition") each partition's
// state follows it through the changelog topic, and every scored record is
// also byte-identical to what a model of its partition's own writes,
// stepped on that partition's records alone: a restarted or new owner
// resumes from the newest checkpoint, wherever it was written, and what
// it emits again is what the crashed member emitted.
//
// DENOISER_GROUP_CRASH_EVENTS sets the number of events (60,000);
// DENOISER_CRASH_SEED reproduces the choice of members and kill times.
func TestRunCrashRecoveryGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test of a group of three members: about 30 s (a minute on a real broker)")
	}
	for _, layout := range []online.Layout{online.LayoutMember, online.LayoutPartition} {
		t.Run(string(layout), func(t *testing.T) { crashRecoveryGroup(t, layout, false) })
	}
	t.Run("partition-shared", func(t *testing.T) { crashRecoveryGroup(t, online.LayoutPartition, true) })
}

// crashRecoveryGroup runs the crash test with layout; with
// state_layout partition, the partition models share their item rows
// through the shared topic only if shared (they are then not the models
// of their partitions alone, and only losses and duplicates are checked).
func crashRecoveryGroup(t *testing.T, layout online.Layout, shared bool) {
	began := time.Now()
	n := 60_000
	if s := os.Getenv("DENOISER_GROUP_CRASH_EVENTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("DENOISER_GROUP_CRASH_EVENTS=%q: want a positive number", s)
		}
		n = v
	}
	const members, kills, parts = 3, 5, 6
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DENOISER_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rnd := rand.New(rand.NewPCG(seed, 3))
	t.Logf("seed %d (DENOISER_CRASH_SEED=%d reproduces the members killed and the kill times); %d events", seed, seed, n)

	b := kafkatest.New(t)
	in := b.Topic(t, "gcrash", parts)
	b.CreateTopic(t, in+".scored", 3)
	b.CreateTopic(t, in+".dead-letter", 1)
	root := t.TempDir()
	cfgs := make([]string, members)
	for i := range cfgs {
		dir := filepath.Join(root, fmt.Sprintf("m%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfgs[i] = runConfig(t, b, in, dir) // same topic, so the same group
		setLayout(t, cfgs[i], layout)
		if layout == online.LayoutPartition && !shared {
			appendConfig(t, cfgs[i], "sharing:\n  topic: off\n")
		}
	}
	msgs := keyedByUser(t, crashInput(t, n))

	// Events flow in, in 60 chunks, while members are killed: over ~24 s,
	// or ~48 s on a real broker, where each kill takes longer to be noticed
	// (its session timeout is 6 s rather than 2 s).
	pace := 400 * time.Millisecond
	if b.Real {
		pace *= 2
	}
	var sent sync.WaitGroup
	var producedCount atomic.Int64
	produced := make(chan error, 1)
	quit := make(chan struct{})
	sent.Add(1)
	t.Cleanup(func() { close(quit); sent.Wait() })
	go func() {
		defer sent.Done()
		chunk := max(n/60, 1)
		for i := 0; i < n; i += chunk {
			if err := b.ProduceErr(in, msgs[i:min(i+chunk, n)]...); err != nil {
				produced <- err
				return
			}
			producedCount.Store(int64(min(i+chunk, n)))
			select {
			case <-time.After(pace):
			case <-quit:
				produced <- errors.New("test ended")
				return
			}
		}
		produced <- nil
	}()

	scored, dead, poll := outputReaders(t, b, in)

	procs := make([]*child, members)
	runs := make([]int, members)
	var logs []string
	start := func(i int) {
		runs[i]++
		path := filepath.Join(root, fmt.Sprintf("m%d-run%d.log", i, runs[i]))
		logs = append(logs, path)
		procs[i] = startChild(t, path, "run", "--config", cfgs[i])
	}
	alive := func() {
		t.Helper()
		for i, c := range procs {
			select {
			case err := <-c.done:
				t.Fatalf("member %d exited by itself: %v\n%s", i, err, c.tail())
			default:
			}
		}
	}
	for i := range members {
		start(i)
	}
	restarted := 0
	deadline := time.Now().Add(90 * time.Second)
	for poll() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no output in 90s; the first member's log:\n%s", procs[0].tail())
		}
		alive()
		time.Sleep(100 * time.Millisecond)
	}

	// Five kills of a random member, each a random delay after the member
	// restarted last has been given its partitions (the group processes
	// again: on a real broker that takes the killed member's session
	// timeout).
	for k := 1; k <= kills; k++ {
		if k > 1 {
			last := procs[restarted]
			deadline := time.Now().Add(90 * time.Second)
			for {
				if b, _ := os.ReadFile(last.log); bytes.Contains(b, []byte(`msg="partitions assigned"`)) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("member %d was given no partitions within 90s of its restart:\n%s", restarted, last.tail())
				}
				alive()
				time.Sleep(50 * time.Millisecond)
			}
		}
		delay := 300*time.Millisecond + time.Duration(rnd.Int64N(int64(3*time.Second)))
		i := rnd.IntN(members)
		time.Sleep(delay)
		alive()
		c := procs[i]
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("member %d still running 10s after SIGKILL", i)
		}
		t.Logf("kill %d: member %d (run %d) after %v; %d of %d events produced, %d output records so far",
			k, i, runs[i], delay.Round(time.Millisecond), producedCount.Load(), n, poll())
		start(i)
		restarted = i
	}
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("producing the input took more than 2 minutes after the last kill")
	}

	// The members are at the end once every input offset has an output and
	// the group has committed every partition's end: then each partition's
	// owner has processed it to the end (output of a killed member may
	// cover offsets that the next owner has yet to go through).
	ends := partitionEnds(t, b, in, parts)
	total := int64(0)
	for _, e := range ends {
		total += e
	}
	if total != int64(n) {
		t.Fatalf("the input partitions hold %d records (%v), want %d", total, ends, n)
	}
	group := in + "-g"
	covered := map[srcPos]bool{}
	seenMsgs := [2]int{}
	cover := func() int {
		for j, r := range []*kafkatest.Reader{scored, dead} {
			for _, m := range r.Msgs[seenMsgs[j]:] {
				covered[sourcePosOf(t, m)] = true
			}
			seenMsgs[j] = len(r.Msgs)
		}
		return len(covered)
	}
	var committed map[int]int64
	atEnd := func() bool {
		committed = committedOffsets(t, b, group, in, parts)
		for p, e := range ends {
			if committed[p] != e {
				return false
			}
		}
		return true
	}
	waitStart := time.Now()
	deadline = time.Now().Add(3 * time.Minute)
	for {
		poll()
		if cover() == n && atEnd() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 minutes after the input was produced: %d of %d input offsets have an output; committed %v, ends %v\n%s",
				len(covered), n, committed, ends, relevantLogLines(logs))
		}
		alive()
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("every input offset has an output and the group committed every end %v after the input was produced", time.Since(waitStart).Round(time.Millisecond))

	stopStart := time.Now()
	for _, c := range procs {
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range procs {
		select {
		case err := <-c.done:
			if err != nil {
				t.Errorf("member %d after SIGTERM: %v\n%s", i, err, c.tail())
			}
		case <-time.After(30 * time.Second):
			log := c.tail()
			t.Errorf("member %d still running 30s after SIGTERM\n%s\ngoroutines:\n%s", i, log, c.stacks())
		}
	}
	t.Logf("members stopped %v after SIGTERM", time.Since(stopStart).Round(time.Millisecond))
	poll()

	// Every copy of every input record, in output order per topic and
	// partition: scored first, then dead letters.
	copies := map[srcPos][]outCopy{}
	for _, r := range []*kafkatest.Reader{scored, dead} {
		ms := slices.Clone(r.Msgs)
		kafkatest.SortByPosition(ms)
		for _, m := range ms {
			v, _ := kafkatest.Header(m, producer.HeaderModelVersion)
			pos := sourcePosOf(t, m)
			copies[pos] = append(copies[pos], outCopy{m.Topic, m.Partition, m.Offset, v, m.Value})
		}
	}
	lost := 0
	var lostAt []srcPos
	for p := range parts {
		for o := int64(0); o < ends[p]; o++ {
			if len(copies[srcPos{p, o}]) == 0 {
				lost++
				if len(lostAt) < 10 {
					lostAt = append(lostAt, srcPos{p, o})
				}
			}
		}
	}
	dups, differing := 0, 0
	var dupAt []srcPos
	for pos, cs := range copies {
		if len(cs) < 2 {
			continue
		}
		dupAt = append(dupAt, pos)
		dups += len(cs) - 1
		for _, c := range cs[1:] {
			if !bytes.Equal(c.value, cs[0].value) {
				differing++
			}
		}
	}
	slices.SortFunc(dupAt, func(a, b srcPos) int {
		if a.partition != b.partition {
			return a.partition - b.partition
		}
		return int(a.offset - b.offset)
	})
	found, handovers, failures := logFigures(logs)
	t.Logf("%d events in %d partitions %v, %d kills, %d member runs: %d scored and %d dead-letter records; %d lost, %d duplicates (%d differ in bytes from the first copy); %d records found already emitted, %d handovers, %d handover or scan failures; %v in all",
		n, parts, ends, kills, len(logs), len(scored.Msgs), len(dead.Msgs), lost, dups, differing, found, handovers, failures, time.Since(began).Round(time.Millisecond))
	if lost > 0 {
		t.Errorf("%d input records have no output, the first at %v", lost, lostAt)
	}
	if layout == online.LayoutPartition && !shared {
		if wrong := partitionMismatches(t, b, in, n, copies, nil); len(wrong) > 0 {
			t.Errorf("%d scored records differ from their partition's own model, the first: %s", len(wrong), strings.Join(wrong[:min(len(wrong), 5)], "; "))
		} else {
			t.Logf("every scored record is byte-identical to its partition's own model")
		}
	}
	if shared {
		// A figure, and a bound. The successor steps the records a killed
		// member emitted after its last checkpoint again with the merges
		// that member recorded there (service/window.go), and a replay
		// follows the successor, so every record is its replay's; but a
		// merge point the killed member queued and had not sent is lost,
		// while records it scored after that merge may have reached the
		// output. Such records are among those found already emitted.
		hist := service.NewSharedHistory()
		for _, m := range b.NewReader(t, in+"-g."+in+".shared").Until(t, time.Minute, kafkatest.AtLeast(1)) {
			if err := hist.Add(m.Value); err != nil {
				t.Errorf("shared topic record %d: %v", m.Offset, err)
			}
		}
		wrong := partitionMismatches(t, b, in, n, copies, hist)
		t.Logf("%d of %d scored records differ from a replay of their partition with the recorded merges (the crash windows), the first: %s",
			len(wrong), len(scored.Msgs), strings.Join(wrong[:min(len(wrong), 3)], "; "))
		if len(wrong) > found {
			t.Errorf("%d scored records differ from a replay of their partition with the recorded merges, more than the %d found already emitted (the crash windows)", len(wrong), found)
		}
	}
	if dups > 0 {
		var sb strings.Builder
		for _, pos := range dupAt[:min(len(dupAt), 10)] {
			fmt.Fprintf(&sb, "  input %s/%d@%d:", in, pos.partition, pos.offset)
			for _, c := range copies[pos] {
				fmt.Fprintf(&sb, " %s/%d@%d (model_version %s)", c.topic, c.part, c.off, c.version)
			}
			sb.WriteByte('\n')
		}
		t.Errorf("%d duplicate output records (%d differ in bytes from the first copy) at %d input positions; the first:\n%s\nmember logs:\n%s",
			dups, differing, len(dupAt), sb.String(), relevantLogLines(logs))
	}
}

// srcPos is an input position: partition and offset.
type srcPos struct {
	partition int
	offset    int64
}

// outCopy is one output record of an input position.
type outCopy struct {
	topic   string
	part    int
	off     int64
	version string
	value   []byte
}

// partitionMismatches steps a model of each input partition's own (the
// default configuration, seed 1, online.NewPartition) on that
// partition's records (the n records of topic in), in offset order, and
// returns where a scored copy in copies differs from what it writes.
//
// With shared, the history of the run's shared topic, each model merges
// what the partition's latest live model merged, where it merged it, as
// `denoiser replay --shared` does.
func partitionMismatches(t *testing.T, b *kafkatest.Broker, in string, n int, copies map[srcPos][]outCopy, shared *service.SharedHistory) []string {
	t.Helper()
	inputs := b.NewReader(t, in).Until(t, time.Minute, kafkatest.AtLeast(n))
	kafkatest.SortByPosition(inputs)
	models := map[int]*online.Model{}
	merges := map[int]*service.Merges{}
	var wrong []string
	for _, msg := range inputs {
		p, o := msg.Partition, msg.Offset
		m := models[p]
		if m == nil {
			var err error
			if m, err = online.NewPartition(online.DefaultConfig(), 1, int32(p)); err != nil {
				t.Fatal(err)
			}
			models[p] = m
			if shared != nil {
				m.StartSharing()
				if merges[p], err = shared.Merges(int32(p)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if ms := merges[p]; ms != nil {
			ms.Apply(m, o)
		}
		{
			r := consumer.Result{Pos: input.Position{Topic: in, Partition: int32(p), Offset: o}}
			if consumer.Decode(msg.Value, &r.Event) != nil {
				continue // a dead letter
			}
			if err := m.Step(r.Event.Model(), &r.Score); err != nil && !errors.Is(err, online.ErrNumerical) {
				continue // refused by the model: a dead letter
			}
			want := producer.AppendScored(nil, &r)
			for _, c := range copies[srcPos{p, o}] {
				if c.topic == in+".scored" && !bytes.Equal(c.value, want) {
					wrong = append(wrong, fmt.Sprintf("%d@%d (model_version %s, want %d)", p, o, c.version, r.Score.Version))
				}
			}
		}
	}
	return wrong
}

// sourcePosOf returns the source position headers of an output record.
func sourcePosOf(t *testing.T, m kafka.Message) srcPos {
	t.Helper()
	v, ok := kafkatest.Header(m, producer.HeaderSourcePartition)
	p, err := strconv.Atoi(v)
	if !ok || err != nil {
		t.Fatalf("record without source partition: %+v", m.Headers)
	}
	return srcPos{p, sourceOffsetOf(t, m)}
}

// keyedByUser turns event lines into messages keyed by their user, so that
// the users spread over the partitions.
func keyedByUser(t *testing.T, lines [][]byte) []kafka.Message {
	t.Helper()
	msgs := make([]kafka.Message, len(lines))
	for i, l := range lines {
		var e struct {
			User string `json:"user"`
		}
		if err := json.Unmarshal(l, &e); err != nil || e.User == "" {
			t.Fatalf("line %d has no user: %s", i, l)
		}
		msgs[i] = kafka.Message{Key: []byte(e.User), Value: l}
	}
	return msgs
}

// partitionEnds returns the high watermark of each partition of topic.
func partitionEnds(t *testing.T, b *kafkatest.Broker, topic string, parts int) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(b.Addrs...), Transport: tr}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range parts {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	resp, err := c.ListOffsets(ctx, req)
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	ends := map[int]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			t.Fatalf("list offsets of %s/%d: %v", topic, po.Partition, po.Error)
		}
		ends[po.Partition] = po.LastOffset
	}
	if len(ends) != parts {
		t.Fatalf("list offsets of %s: %d partitions answered, want %d", topic, len(ends), parts)
	}
	return ends
}

// committedOffsets returns the group's committed offset of each partition
// of topic (-1 where none, or when the broker cannot tell now).
func committedOffsets(t *testing.T, b *kafkatest.Broker, group, topic string, parts int) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(b.Addrs...), Transport: tr}
	req := &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{}}
	for p := range parts {
		req.Topics[topic] = append(req.Topics[topic], p)
	}
	out := map[int]int64{}
	for p := range parts {
		out[p] = -1
	}
	resp, err := c.OffsetFetch(ctx, req)
	if err != nil || resp.Error != nil {
		return out
	}
	for _, po := range resp.Topics[topic] {
		if po.Error == nil {
			out[po.Partition] = po.CommittedOffset
		}
	}
	return out
}

// groupLogMarks are the parts of the members' log lines that tell how a
// partition changed hands.
var groupLogMarks = []string{
	"partitions assigned", "fetching partition", "records that already have output", "handed over",
	"handover", "cannot tell", "read back as far", "giving up", "level=ERROR",
}

// relevantLogLines returns the lines of the member logs that tell how the
// partitions changed hands, at most 80 per log.
func relevantLogLines(logs []string) string {
	var sb strings.Builder
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		fmt.Fprintf(&sb, "== %s\n", filepath.Base(path))
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			if !slices.ContainsFunc(groupLogMarks, func(m string) bool { return strings.Contains(line, m) }) {
				continue
			}
			if n++; n > 80 {
				sb.WriteString("  ...\n")
				break
			}
			sb.WriteString("  " + line + "\n")
		}
	}
	return sb.String()
}

// logFigures reads the member logs: the records found already emitted
// (sum over "records that already have output"), the handovers done, and
// the handovers and tail scans that failed.
func logFigures(logs []string) (found, handovers, failures int) {
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.Contains(line, "records that already have output"):
				if _, v, ok := strings.Cut(line, " records="); ok {
					v, _, _ = strings.Cut(v, " ")
					k, _ := strconv.Atoi(v)
					found += k
				}
			case strings.Contains(line, "partitions handed over"):
				handovers++
			case strings.Contains(line, "handover"), strings.Contains(line, "cannot tell"), strings.Contains(line, "read back as far"):
				failures++
			}
		}
	}
	return found, handovers, failures
}

// outputReaders reads the scored and dead-letter topics of input topic in;
// poll reads what arrived since and returns how many records both hold.
func outputReaders(t *testing.T, b *kafkatest.Broker, in string) (scored, dead *kafkatest.Reader, poll func() int) {
	scored = b.NewReader(t, in+".scored")
	dead = b.NewReader(t, in+".dead-letter")
	return scored, dead, func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := scored.Poll(ctx); err != nil {
			t.Logf("poll output: %v", err)
		}
		if err := dead.Poll(ctx); err != nil {
			t.Logf("poll dead letters: %v", err)
		}
		return len(scored.Msgs) + len(dead.Msgs)
	}
}
