package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"denoiser/internal/cli/clitest"
	"denoiser/internal/disktest"
	"denoiser/internal/kafkatest"
)

// TestRunDiskFull runs `denoiser run` with its state on a small tmpfs and
// fills that filesystem under it (as root; skipped otherwise):
//
//   - while the disk is full the process does not fault: checkpoints fail,
//     denoiser_checkpoint_failures_total counts them, /readyz answers 503
//     with the reason, and the stream goes on (every record is scored and
//     emitted); a live snapshot into the full disk fails and leaves no
//     file behind;
//   - once space is freed the next checkpoint succeeds by itself, with no
//     new record, and /readyz answers 200;
//   - its checkpoints then write more than twice the filesystem's size
//     (bases and deltas): superseded copies are collected, they never
//     fill it again, and the state directory stays within 3 × the model;
//   - stopped while the disk is full, it exits 1 with the reason, no fault;
//     started on the full disk, it exits 1 with a clear error, no fault;
//   - with space back, it restores its last checkpoint and catches up.
func TestRunDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a tmpfs under a running service: about a minute")
	}
	const disk = 112 << 20
	mnt := disktest.Tmpfs(t, disk)
	b := kafkatest.New(t)
	in := b.Topic(t, "disk", 1)
	b.CreateTopic(t, in+".scored", 1)
	b.CreateTopic(t, in+".dead-letter", 1)
	dir := t.TempDir() // logs and configuration, off the small filesystem
	state := filepath.Join(mnt, "state")
	snapshots := filepath.Join(mnt, "snapshots")
	if err := os.Mkdir(snapshots, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := clitest.WriteFile(t, filepath.Join(dir, "disk.yaml"), strings.NewReplacer(
		"dir: "+filepath.Join(dir, "state"), "dir: "+state,
		"  interval: 300ms\n", "  interval: 150ms\n  gc_interval: 1s\n",
	).Replace(clitest.ReadFile(t, runConfig(t, b, in, dir)))+"model:\n  dim: 128\n")
	lines := crashInput(t, 80_000)
	addr := freeAddr(t)
	base := "http://" + addr
	args := []string{"run", "--config", cfg, "--http", addr, "--snapshot-dir", snapshots}

	// Up and idle, its last checkpoint taken, its collector done.
	produced := 20_000
	b.Produce(t, in, kafkatest.Values(lines[:produced]...)...)
	c := startChild(t, filepath.Join(dir, "run-1.log"), args...)
	settle(t, c, base, produced)
	modelBytes := metric(t, base, "denoiser_checkpoint_base_bytes")
	t.Logf("model: %.1f MiB; filesystem: %d MiB", modelBytes/(1<<20), disk>>20)

	// The disk fills up; records keep coming.
	ballast := disktest.Fill(t, mnt)
	failures := metric(t, base, "denoiser_checkpoint_failures_total")
	emitted := metric(t, base, "denoiser_events_emitted_total")
	b.Produce(t, in, kafkatest.Values(lines[produced:produced+5000]...)...)
	produced += 5000
	waitMetrics(t, c, base, "records scored and a checkpoint failed on the full disk", func(m func(string) float64) bool {
		return m("denoiser_events_consumed_total") == float64(produced) &&
			m("denoiser_checkpoint_failures_total") > failures && m("denoiser_ready") == 0
	})
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not enough free disk space") {
		t.Fatalf("/readyz on a full disk: %d %q, want 503 and the reason", code, body)
	} else {
		t.Logf("/readyz on a full disk: %d %s", code, strings.TrimSpace(body))
	}
	// The stream goes on: the records after the last checkpoint are
	// emitted (dead letters aside).
	waitMetrics(t, c, base, "the records read on the full disk emitted", func(m func(string) float64) bool {
		return m("denoiser_events_emitted_total") >= emitted+5000
	})
	if resp, err := http.Post(base+"/snapshot", "", nil); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("a live snapshot into the full disk succeeded: %s", body)
		}
		t.Logf("live snapshot on a full disk: %s %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if left, _ := os.ReadDir(snapshots); len(left) != 0 {
		t.Fatalf("a failed snapshot left %d files in %s (%s...)", len(left), snapshots, left[0].Name())
	}

	// Space comes back: the checkpoint catches up by itself.
	checkpoints := metric(t, base, "denoiser_checkpoints_total")
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitMetrics(t, c, base, "a checkpoint once space is back, no record since", func(m func(string) float64) bool {
		return m("denoiser_checkpoints_total") > checkpoints && m("denoiser_ready") == 1
	})
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after space came back: %d %q", code, body)
	}

	// Checkpoint more than twice the filesystem's size (bases and deltas
	// together): the collector keeps up, nothing is refused for space.
	failures = metric(t, base, "denoiser_checkpoint_failures_total")
	checkpoints = metric(t, base, "denoiser_checkpoints_total")
	written := metric(t, base, "denoiser_checkpoint_written_bytes_total")
	want := written + 2*disk
	maxUsed := int64(0)
	const patience = 5 * time.Minute
	deadline := time.Now().Add(patience)
	for metric(t, base, "denoiser_checkpoint_written_bytes_total") < want {
		if time.Now().After(deadline) {
			t.Fatalf("%.0f of %.0f MiB checkpointed after %v", (metric(t, base, "denoiser_checkpoint_written_bytes_total")-written)/(1<<20),
				float64(2*disk)/(1<<20), patience)
		}
		if produced+20 > len(lines)-1000 {
			t.Fatalf("out of input after %d records", produced)
		}
		b.Produce(t, in, kafkatest.Values(lines[produced:produced+20]...)...)
		produced += 20
		maxUsed = max(maxUsed, disktest.Used(t, state))
		time.Sleep(100 * time.Millisecond)
		alive(t, c)
	}
	committed := metric(t, base, "denoiser_checkpoints_total") - checkpoints
	if f := metric(t, base, "denoiser_checkpoint_failures_total"); f != failures {
		t.Errorf("%v checkpoints failed after space came back (%.0f committed)\n%s", f-failures, committed, c.tail())
	}
	t.Logf("after recovery: %.0f checkpoints (%.0f MiB, bases of %.1f MiB and deltas) through a %d MiB filesystem; state directory at most %.1f MiB",
		committed, (metric(t, base, "denoiser_checkpoint_written_bytes_total")-written)/(1<<20), modelBytes/(1<<20), disk>>20, float64(maxUsed)/(1<<20))
	// The directory holds about 2.5 × the model at most, and Badger's
	// memtable logs; with 64 MiB value-log files (before stop 31) it
	// reached 64.3 MiB here.
	if limit := 3*metric(t, base, "denoiser_checkpoint_base_bytes") + 8<<20; float64(maxUsed) > limit {
		t.Errorf("state directory reached %.1f MiB, want at most 3 × the model + 8 MiB = %.1f MiB", float64(maxUsed)/(1<<20), limit/(1<<20))
	}

	// Stopped while the disk is full: exit 1, the reason, no fault.
	settle(t, c, base, produced)
	ballast = disktest.Fill(t, mnt)
	b.Produce(t, in, kafkatest.Values(lines[produced:produced+1000]...)...)
	produced += 1000
	waitMetrics(t, c, base, "the last records read on the full disk", func(m func(string) float64) bool {
		return m("denoiser_events_consumed_total") == float64(produced) && m("denoiser_ready") == 0
	})
	time.Sleep(1500 * time.Millisecond) // model gauges are refreshed every second
	learned := metric(t, base, "denoiser_model_events")
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exitsCleanlyWith(t, c, 1, "not enough free disk space")

	// Started on the full disk: exit 1 with a clear error, no fault.
	c = startChild(t, filepath.Join(dir, "run-2.log"), args...)
	exitsCleanlyWith(t, c, 1, "not enough free disk space")

	// Space back: it restores the last checkpoint and catches up.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	c = startChild(t, filepath.Join(dir, "run-3.log"), args...)
	waitMetrics(t, c, base, "the restarted model learning what the first one had", func(m func(string) float64) bool {
		return m("denoiser_model_events") == learned && m("denoiser_ready") == 1
	})
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exitsCleanlyWith(t, c, 0, "")
}

// settle waits until the child has consumed at least n records and is
// ready, and then until it has been idle for 3s: no checkpoint in its last 2.5s
// means that the last one covers every record (a record pending would have
// been checkpointed within the 150ms interval), and its collector
// (gc_interval 1s) has run since. An idle service writes nothing more, so
// a disk filled now is not raced by its own writes.
func settle(t *testing.T, c *child, base string, n int) {
	t.Helper()
	waitMetrics(t, c, base, fmt.Sprintf("%d records consumed and a checkpoint", n), func(m func(string) float64) bool {
		return m("denoiser_events_consumed_total") >= float64(n) && m("denoiser_ready") == 1 && m("denoiser_checkpoints_total") >= 1
	})
	consumed := metric(t, base, "denoiser_events_consumed_total")
	time.Sleep(3 * time.Second)
	if age := metric(t, base, "denoiser_checkpoint_age_seconds"); age < 2.5 || metric(t, base, "denoiser_ready") != 1 ||
		metric(t, base, "denoiser_events_consumed_total") != consumed {
		t.Fatalf("not idle: a checkpoint %.1fs ago, ready %v, %v records consumed (%v 3s ago); log:\n%s", age,
			metric(t, base, "denoiser_ready"), metric(t, base, "denoiser_events_consumed_total"), consumed, c.tail())
	}
}

// waitMetrics polls the child's /metrics until cond holds (one minute).
func waitMetrics(t *testing.T, c *child, base, what string, cond func(m func(string) float64) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		text := metricsText(base + "/metrics")
		if text != "" && cond(func(name string) float64 { return metricIn(text, name) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute; log:\n%s", what, c.tail())
		}
		alive(t, c)
		time.Sleep(100 * time.Millisecond)
	}
}

// alive fails the test if the child has exited.
func alive(t *testing.T, c *child) {
	t.Helper()
	select {
	case err := <-c.done:
		t.Fatalf("the service exited: %v; log:\n%s", err, c.tail())
	default:
	}
}

// exitsCleanlyWith waits for the child to exit with code, its log naming
// want and holding no runtime fault.
func exitsCleanlyWith(t *testing.T, c *child, code int, want string) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running after 30s; log:\n%s", c.tail())
	}
	log := c.tail()
	if got := c.cmd.ProcessState.ExitCode(); got != code {
		t.Errorf("exit status %d, want %d; log:\n%s", got, code, log)
	}
	for _, fault := range []string{"fatal error", "SIGBUS", "panic:"} {
		if strings.Contains(log, fault) {
			t.Errorf("the log shows %q:\n%s", fault, log)
		}
	}
	if !strings.Contains(log, want) {
		t.Errorf("the log lacks %q:\n%s", want, log)
	}
	t.Logf("exit %d: %s", code, lastLine(log))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// metric reads one unlabelled metric of the child.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	text := metricsText(base + "/metrics")
	if text == "" {
		t.Fatalf("no /metrics at %s", base)
	}
	return metricIn(text, name)
}

// metricIn returns the value of the unlabelled metric name in a text
// exposition, -1 when absent.
func metricIn(text, name string) float64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
