package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"denoiser/internal/kafkatest"
)

func openShared(t *testing.T, b *kafkatest.Broker, topic string) *SharedLog {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := OpenShared(ctx, SharedConfig{Brokers: b.Addrs, Topic: topic, Retention: 2 * time.Hour, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("OpenShared: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// readAllShared reads l from from to its end.
func readAllShared(t *testing.T, l *SharedLog, from int64) (keys []string, next int64) {
	t.Helper()
	next, err := l.Read(ctxT(t), from, func(off int64, key, value []byte) {
		if want := "v" + string(key); string(value) != want {
			t.Errorf("record %d: value %q, want %q", off, value, want)
		}
		keys = append(keys, string(key))
	})
	if err != nil {
		t.Fatalf("Read from %d: %v", from, err)
	}
	return keys, next
}

func TestSharedLog(t *testing.T) {
	b := kafkatest.New(t)
	topic := changelogTopic("shared") + ".shared"
	a := openShared(t, b, topic)
	if n := partitionCount(t, b, topic); n != 1 {
		t.Errorf("%d partitions, want 1", n)
	}
	got := describe(t, b, topic)
	for k, v := range map[string]string{"cleanup.policy": "delete", "retention.ms": "7200000", "max.message.bytes": strconv.Itoa(4 << 20)} {
		if g, ok := got[k]; (ok || b.Real) && g != v {
			t.Errorf("%s = %q, want %q", k, g, v)
		}
	}
	// Empty: nothing to read, and the next read starts at 0.
	keys, next := readAllShared(t, a, -1)
	if len(keys) != 0 || next != 0 {
		t.Fatalf("empty log: %v, next %d", keys, next)
	}
	// Two members append; each reads every record, in the same order.
	other := openShared(t, b, topic)
	send := func(l *SharedLog, ks ...string) {
		recs := make([]SharedRecord, len(ks))
		for i, k := range ks {
			recs[i] = SharedRecord{Key: []byte(k), Value: []byte("v" + k)}
		}
		if err := l.Append(ctxT(t), recs); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	send(a, "1", "2")
	send(other, "3")
	send(a, "4")
	keys, next = readAllShared(t, other, -1)
	if fmt.Sprint(keys) != "[1 2 3 4]" || next != 4 {
		t.Fatalf("read %v, next %d; want [1 2 3 4], next 4", keys, next)
	}
	// Reading on from a position returns what came since.
	send(other, "5")
	keys, next = readAllShared(t, a, 2)
	if fmt.Sprint(keys) != "[3 4 5]" || next != 5 {
		t.Fatalf("read from 2: %v, next %d; want [3 4 5], next 5", keys, next)
	}
	keys, next = readAllShared(t, a, next)
	if len(keys) != 0 || next != 5 {
		t.Fatalf("read at the end: %v, next %d", keys, next)
	}
	// A record above the topic's limit is refused before it is sent.
	big := SharedRecord{Key: []byte("big"), Value: make([]byte, SharedRecordBytes)}
	if err := a.Append(ctxT(t), []SharedRecord{big}); err == nil {
		t.Error("a record above SharedRecordBytes was accepted")
	}
	a.Close()
	if err := a.Append(ctxT(t), []SharedRecord{{Key: []byte("6")}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
}

// Wait answers when a record arrives, not when it times out: a waiter at
// the end of the log wakes for a record appended during its wait, long
// before its maxWait; with nothing appended it reports false; at an
// offset that holds a record it answers at once.
func TestSharedLogWait(t *testing.T) {
	b := kafkatest.New(t)
	l := openShared(t, b, changelogTopic("wait")+".shared")
	ctx := ctxT(t)
	if ok, err := l.Wait(ctx, 0, 100*time.Millisecond); err != nil || ok {
		t.Fatalf("empty log: Wait = %v, %v; want false", ok, err)
	}
	const maxWait = 20 * time.Second
	type answer struct {
		ok     bool
		err    error
		waited time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		start := time.Now()
		ok, err := l.Wait(ctx, 0, maxWait)
		done <- answer{ok, err, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond) // the fetch is at the broker by then, as a rule; if not, it answers at once
	if err := l.Append(ctx, []SharedRecord{{Key: []byte("k"), Value: []byte("vk")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.err != nil || !a.ok {
			t.Fatalf("Wait = %v, %v; want true", a.ok, a.err)
		}
		if a.waited >= maxWait/2 {
			t.Fatalf("Wait answered after %v: it timed out rather than woke", a.waited)
		}
	case <-time.After(maxWait + 10*time.Second):
		t.Fatal("Wait did not answer")
	}
	if ok, err := l.Wait(ctx, 0, maxWait); err != nil || !ok {
		t.Fatalf("Wait at a record = %v, %v; want true", ok, err)
	}
}
