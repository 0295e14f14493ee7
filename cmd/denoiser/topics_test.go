package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"denoiser/internal/kafkatest"
)

// TestTopicsCreatesWhatRunNeeds: `denoiser topics` creates the output and
// dead-letter topics of the configured input, the output with the input's
// partitions, leaves existing topics alone, and says what it did; a
// second call finds them all.
func TestTopicsCreatesWhatRunNeeds(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "topics-in", 3)
	args := []string{"topics", "--brokers", strings.Join(b.Addrs, ","), "--input-topic", in}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := in + ": exists (3 partitions)\n" + in + ".scored: created (3 partitions)\n" + in + ".dead-letter: created (1 partition)\n"
	if stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(b.Addrs...), Transport: tr}
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{in + ".scored", in + ".dead-letter"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range meta.Topics {
		if want := map[string]int{in + ".scored": 3, in + ".dead-letter": 1}[tp.Name]; tp.Error != nil || len(tp.Partitions) != want {
			t.Errorf("%s: %d partitions (%v), want %d", tp.Name, len(tp.Partitions), tp.Error, want)
		}
	}
	stdout.Reset()
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 || strings.Count(stdout.String(), ": exists") != 3 {
		t.Errorf("second call: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run(context.Background(), append(args, "--partitions", "8"), &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), in+": exists (3 partitions; --partitions 8 not applied: topics changes no existing topic)") ||
		!strings.Contains(stdout.String(), in+".dead-letter: exists (1 partition)\n") {
		t.Errorf("--partitions 8 on existing topics: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if code := run(context.Background(), []string{"topics", "--brokers", strings.Join(b.Addrs, ",")}, &stdout, &stderr); code != 2 {
		t.Errorf("without an input topic: exit %d, want 2", code)
	}
}
