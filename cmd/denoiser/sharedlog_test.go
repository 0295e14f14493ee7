package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"denoiser/internal/kafkatest"
	"denoiser/online"
)

// TestReplaySharedLog: `denoiser run` with state_layout partition and
// the shared topic, 3 partitions; `denoiser shared-log` copies the shared
// topic to a file, and `denoiser replay --partition P --shared FILE` of
// each partition's records, as recorded from the input topic, writes the
// output the live model of that partition wrote, byte for byte but for
// the source position (a file's line, where the live record names the
// topic's offset). A replay without --shared differs: the merges are what
// it reproduces.
func TestReplaySharedLog(t *testing.T) {
	b := kafkatest.New(t)
	const parts = 3
	in := b.Topic(t, "sharedlog", parts)
	b.CreateTopic(t, in+".scored", parts)
	b.CreateTopic(t, in+".dead-letter", 1)
	lines := crashInput(t, 6000) // no poison record below 9973
	dir := t.TempDir()
	cfg := runConfig(t, b, in, dir)
	setLayout(t, cfg, online.LayoutPartition)
	appendConfig(t, cfg, "sharing:\n  interval: 100ms\n  every_events: 200\n")
	stop := runInProcess(t, "--config", cfg)
	scored := b.NewReader(t, in+".scored")
	msgs := keyedByUser(t, lines)
	// Two bursts: the models merge where they step, so the second merges
	// what the first published.
	b.Produce(t, in, msgs[:3000]...)
	scored.Until(t, 2*time.Minute, kafkatest.AtLeast(3000))
	time.Sleep(time.Second)
	b.Produce(t, in, msgs[3000:]...)
	scored.Until(t, 2*time.Minute, kafkatest.AtLeast(len(lines)))
	if code := stop(); code != 0 {
		t.Fatalf("run exit %d", code)
	}

	shared := filepath.Join(dir, "shared.jsonl")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"shared-log", "--config", cfg, "--out", shared}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("shared-log exit %d: %s", code, stderr.String())
	}
	t.Log(stderr.String())
	// A shared topic that does not exist is an error, and is not created.
	stderr.Reset()
	if code := run(context.Background(), []string{"shared-log", "--config", cfg, "--set", "sharing.topic=" + in + ".nope", "--out", filepath.Join(dir, "nope.jsonl")}, &bytes.Buffer{}, &stderr); code != 1 || !strings.Contains(stderr.String(), in+".nope") {
		t.Fatalf("shared-log of a topic that does not exist: exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "nope.jsonl")); !os.IsNotExist(err) {
		t.Fatalf("shared-log that failed left its output: %v", err)
	}

	live := map[int]map[int64][]byte{}
	for _, m := range scored.Msgs {
		pos := sourcePosOf(t, m)
		if live[pos.partition] == nil {
			live[pos.partition] = map[int64][]byte{}
		}
		live[pos.partition][pos.offset] = m.Value
	}
	inputs := b.NewReader(t, in).Until(t, time.Minute, kafkatest.AtLeast(len(lines)))
	kafkatest.SortByPosition(inputs)
	logs := map[int]*bytes.Buffer{}
	for _, m := range inputs {
		if logs[m.Partition] == nil {
			logs[m.Partition] = &bytes.Buffer{}
		}
		if int64(bytes.Count(logs[m.Partition].Bytes(), []byte("\n"))) != m.Offset {
			t.Fatalf("input %d/%d is not the partition's next line", m.Partition, m.Offset)
		}
		logs[m.Partition].Write(append(m.Value, '\n'))
	}
	merged := regexp.MustCompile(`partition \d+ merges (\d+) deltas`)
	for p := range parts {
		log := filepath.Join(dir, fmt.Sprintf("in-%d.jsonl", p))
		if err := os.WriteFile(log, logs[p].Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		replay := func(shared bool) [][]byte {
			out := filepath.Join(dir, fmt.Sprintf("out-%d-%v.jsonl", p, shared))
			args := []string{"replay", "--config", cfg, "--partition", strconv.Itoa(p), "--in", log, "--out", out, "--truth", "none"}
			if shared {
				args = append(args, "--shared", filepath.Join(dir, "shared.jsonl"))
			}
			stderr.Reset()
			if code := run(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
				t.Fatalf("replay of partition %d exit %d: %s", p, code, stderr.String())
			}
			if shared {
				m := merged.FindStringSubmatch(stderr.String())
				if m == nil || m[1] == "0" {
					t.Fatalf("replay of partition %d merged nothing: %s", p, stderr.String())
				}
				t.Logf("partition %d: %s", p, m[0])
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
		}
		got := replay(true)
		if len(got) != len(live[p]) {
			t.Fatalf("partition %d: replay wrote %d records, the live run %d", p, len(got), len(live[p]))
		}
		for o, line := range got {
			if want := live[p][int64(o)]; !bytes.Equal(withoutSource(line), withoutSource(want)) {
				t.Fatalf("partition %d, offset %d:\nreplay %s\n  live %s", p, o, line, want)
			}
		}
		if p == 0 {
			differ := 0
			for o, line := range replay(false) {
				if !bytes.Equal(withoutSource(line), withoutSource(live[p][int64(o)])) {
					differ++
				}
			}
			if differ == 0 {
				t.Fatal("a replay without --shared writes the live output too: the check cannot tell")
			}
			t.Logf("partition 0 without --shared: %d of %d records differ", differ, len(got))
		}
	}
}

// withoutSource cuts a scored record's source position (its last field).
func withoutSource(line []byte) []byte {
	if i := bytes.LastIndex(line, []byte(`,"source":`)); i >= 0 {
		return line[:i]
	}
	return line
}

// TestSharedLogConfiguration: shared-log without what it needs is a usage
// error (exit 2) that names the setting. Without brokers it said "state:
// shared log: no brokers" (exit 1), and under the default state_layout
// "no topic", with no word that only partition models share.
func TestSharedLogConfiguration(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		say  string
	}{
		{nil, "kafka.brokers: none given"},
		{[]string{"kafka.brokers=127.0.0.1:1", "kafka.input_topic=clicks"}, "state_layout: member: only the models of state_layout partition share"},
		{[]string{"kafka.brokers=127.0.0.1:1", "state_layout=partition"}, "kafka.input_topic: none given"},
		{[]string{"kafka.brokers=127.0.0.1:1", "state_layout=partition", "kafka.input_topic=clicks", "sharing.topic=off"}, "sharing.topic: is off"},
	} {
		args := []string{"shared-log", "--out", filepath.Join(t.TempDir(), "s.jsonl")}
		for _, s := range tc.sets {
			args = append(args, "--set", s)
		}
		var stderr bytes.Buffer
		if code := run(context.Background(), args, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.say) {
			t.Errorf("%v: exit %d, want 2 saying %q:\n%s", tc.sets, code, tc.say, stderr.String())
		}
	}
}
