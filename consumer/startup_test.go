package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
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

// openSource starts a source of cfg, closed (within 10 s) when t ends.
func openSource(t *testing.T, cfg consumer.KafkaConfig) *consumer.KafkaSource {
	t.Helper()
	src, err := consumer.NewKafkaSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = src.Close(ctx)
	})
	return src
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
// are warned at attempts 1, 2, 4, ... (not every second), each line
// saying when it retries, and after StartupTimeout Next returns
// ErrNotJoined.
func TestKafkaSourceUnreachableBrokers(t *testing.T) {
	var log syncBuffer
	addr := closedPort(t)
	src := openSource(t, consumer.KafkaConfig{
		Brokers: []string{addr}, Topic: "t", Group: "g", RequestTimeout: time.Second,
		StartupTimeout: 7 * time.Second, Logger: slog.New(slog.NewTextHandler(&log, nil)),
	})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := src.Next(ctx)
	took := time.Since(start)
	if !errors.Is(err, consumer.ErrNotJoined) || !strings.Contains(err.Error(), "kafka.startup_timeout (7s)") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Next = %v after %v, want ErrNotJoined naming kafka.startup_timeout and the broker", err, took)
	}
	if took < 6*time.Second || took > 12*time.Second {
		t.Errorf("gave up after %v, want about 7s", took)
	}
	var attempts []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "cannot reach the brokers") {
			if !strings.Contains(line, "retry_in=1s") {
				t.Errorf("log line does not say when it retries: %s", line)
			}
			_, after, _ := strings.Cut(line, "attempt=")
			attempts = append(attempts, strings.Fields(after)[0])
		}
	}
	// About one attempt a second, warned at 1, 2, 4: three lines in 7s
	// (four if an eighth attempt comes in time), where one a second would
	// be seven.
	if len(attempts) < 3 || len(attempts) > 4 || attempts[0] != "1" || attempts[1] != "2" || attempts[2] != "4" {
		t.Errorf("warned attempts %q, want 1, 2, 4 (8); log:\n%s", attempts, log.String())
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
	src := openSource(t, consumer.KafkaConfig{
		Brokers: cluster.ListenAddrs(), Topic: "t", Group: "g",
		SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err = src.Next(ctx)
	if !errors.Is(err, consumer.ErrNotJoined) || !strings.Contains(err.Error(), "kafka.session_timeout 2s") || !strings.Contains(err.Error(), "at least 6s") {
		t.Fatalf("Next = %v, want ErrNotJoined naming kafka.session_timeout and the 6s floor", err)
	}
}

// TestKafkaSourceOutOfGroupDuringOutage: a member whose broker goes away
// says it is out of the group (OutOfGroup, which fails the service's
// /readyz; it answered 200 through a whole outage), and once a broker
// serves on the address again it rejoins within a few seconds (with the
// waits that doubled up to 30 s until stop 60 it came 10–24 s after the
// broker in this test, up to a minute in an operator's trial).
func TestKafkaSourceOutOfGroupDuringOutage(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	addrs := cluster.ListenAddrs()
	var log syncBuffer
	src := openSource(t, consumer.KafkaConfig{
		Brokers: addrs, Topic: "t", Group: "g", RequestTimeout: time.Second,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
	})
	// waitFor polls cond every 50 ms for at most limit.
	waitFor := func(what string, limit time.Duration, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < limit {
			if cond() {
				return time.Since(start)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: not within %v", what, limit)
		return 0
	}
	waitFor("the first join", 20*time.Second, func() bool { _, joined := src.Assignment(); return joined && src.OutOfGroup() == nil })

	cluster.Close()
	waitFor("out of the group once the broker is gone", 30*time.Second, func() bool { return src.OutOfGroup() != nil })
	// The broker comes back after four failed attempts, when the doubling
	// waits had grown to 8 s.
	waitFor("four failed attempts", 30*time.Second, func() bool { return strings.Contains(log.String(), "attempt=4 ") })
	if err := src.OutOfGroup(); err == nil {
		t.Fatal("OutOfGroup is nil")
	}

	port := addrs[0][strings.LastIndexByte(addrs[0], ':')+1:]
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	back, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(p), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Skipf("cannot serve on %s again: %v", addrs[0], err)
	}
	defer back.Close()
	took := waitFor("back in the group", 40*time.Second, func() bool { return src.OutOfGroup() == nil })
	t.Logf("back in the group %v after the broker", took)
	if took > 4*time.Second {
		t.Errorf("rejoined %v after the broker was back, want within joinBackoff (1 s) and a join or two", took)
	}
}

// TestKafkaSourceClosedAtOnce: an address that closes every connection
// without an answer, as a KRaft controller's listener does to a client,
// is refused after StartupTimeout with the likely cause, not a bare EOF.
func TestKafkaSourceClosedAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for range 1000 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Read the request, then close: the client reads EOF (closed
			// unread, it would get a reset).
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			_, _ = c.Read(make([]byte, 1<<16))
			c.Close()
		}
	}()
	src := openSource(t, consumer.KafkaConfig{
		Brokers: []string{ln.Addr().String()}, Topic: "t", Group: "g", RequestTimeout: time.Second,
		StartupTimeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = src.Next(ctx)
	if !errors.Is(err, consumer.ErrNotJoined) || !strings.Contains(err.Error(), "controller") {
		t.Fatalf("Next = %v, want ErrNotJoined with the likely cause of the closed connection", err)
	}
	if got := consumer.ExplainBrokerError(context.Canceled); got != context.Canceled {
		t.Errorf("ExplainBrokerError changed another error: %v", got)
	}
}
