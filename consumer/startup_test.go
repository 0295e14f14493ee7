package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"denoiser/consumer"
)

// closedPort is a 127.0.0.1 address on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestKafkaSourceUnreachableBrokers: with no broker to reach, the failures
// are logged with waits that double (not every second), each line saying
// when it retries, and after StartupTimeout Next returns ErrNotJoined.
func TestKafkaSourceUnreachableBrokers(t *testing.T) {
	var log syncBuffer
	addr := closedPort(t)
	src, err := consumer.NewKafkaSource(consumer.KafkaConfig{
		Brokers: []string{addr}, Topic: "t", Group: "g", RequestTimeout: time.Second,
		StartupTimeout: 7 * time.Second, Logger: slog.New(slog.NewTextHandler(&log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = src.Close(ctx)
	}()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = src.Next(ctx)
	took := time.Since(start)
	if !errors.Is(err, consumer.ErrNotJoined) || !strings.Contains(err.Error(), "kafka.startup_timeout (7s)") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Next = %v after %v, want ErrNotJoined naming kafka.startup_timeout and the broker", err, took)
	}
	if took < 6*time.Second || took > 12*time.Second {
		t.Errorf("gave up after %v, want about 7s", took)
	}
	var waits []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "cannot reach the brokers") {
			_, after, ok := strings.Cut(line, "retry_in=")
			if !ok {
				t.Errorf("log line does not say when it retries: %s", line)
			}
			waits = append(waits, strings.Fields(after)[0])
		}
	}
	// Waits of 1s, 2s, 4s: three or four lines in 7s, where one a second
	// would be seven.
	if len(waits) < 2 || len(waits) > 4 || waits[0] != "1s" || waits[1] != "2s" {
		t.Errorf("retry waits %q, want 1s, 2s, 4s...; log:\n%s", waits, log.String())
	}
}

// TestKafkaSourceSessionTimeoutBelowBrokerFloor: a session timeout the
// broker refuses (below its group.min.session.timeout.ms, 6s by default)
// stops the source with a message that says so.
func TestKafkaSourceSessionTimeoutBelowBrokerFloor(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	src, err := consumer.NewKafkaSource(consumer.KafkaConfig{
		Brokers: cluster.ListenAddrs(), Topic: "t", Group: "g",
		SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = src.Close(ctx)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err = src.Next(ctx)
	if !errors.Is(err, consumer.ErrNotJoined) || !strings.Contains(err.Error(), "kafka.session_timeout 2s") || !strings.Contains(err.Error(), "at least 6s") {
		t.Fatalf("Next = %v, want ErrNotJoined naming kafka.session_timeout and the 6s floor", err)
	}
}
