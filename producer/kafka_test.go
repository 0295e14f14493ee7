package producer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"denoiser/consumer"
	"denoiser/input"
	"denoiser/internal/kafkatest"
	"denoiser/online"
	"denoiser/producer"
)

// scored returns a scored result at topic/partition@offset.
func scored(i int) *consumer.Result {
	return &consumer.Result{
		Pos:   input.Position{Topic: "in", Partition: int32(i % 3), Offset: int64(i)},
		Event: consumer.Event{User: fmt.Sprintf("u%d", i%41), Item: fmt.Sprintf("i%d", i), TS: int64(i), HasTS: true, Truth: "genuine"},
		Score: online.Score{Reliability: 0.5, PClean: float64(i%100) / 100, Posterior: []float64{0.25, 0.75}, Label: 1, Distilled: -1, Version: uint64(i)},
	}
}

func header(t *testing.T, m kafka.Message, key string) string {
	t.Helper()
	v, ok := kafkatest.Header(m, key)
	if !ok {
		t.Fatalf("record %s/%d@%d has no header %q", m.Topic, m.Partition, m.Offset, key)
	}
	return v
}

func TestKafkaSink(t *testing.T) {
	b := kafkatest.New(t)
	topic := b.Topic(t, "scored", 3)
	delivered := 0
	sink, err := producer.NewKafkaSink(producer.KafkaConfig{
		Brokers: b.Addrs, Topic: topic, BatchSize: 100, MaxBatches: 2,
		OnDelivered: func(n int) { delivered += n },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 2500
	for i := range n {
		if err := sink.Write(ctx, scored(i)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if delivered != n {
		t.Errorf("OnDelivered counted %d records after Flush, want %d", delivered, n)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := sink.Write(ctx, scored(0)); !errors.Is(err, producer.ErrWriterClosed) {
		t.Fatalf("Write after Close = %v, want ErrWriterClosed", err)
	}

	msgs := b.NewReader(t, topic).Until(t, 30*time.Second, kafkatest.AtLeast(n))
	if len(msgs) != n {
		t.Fatalf("read %d records, want %d", len(msgs), n)
	}
	partitionOf := map[string]int{}
	seen := map[int]bool{}
	for _, m := range msgs {
		off, err := strconv.Atoi(header(t, m, producer.HeaderSourceOffset))
		if err != nil || off < 0 || off >= n || seen[off] {
			t.Fatalf("bad or repeated source offset header in %+v", m.Headers)
		}
		seen[off] = true
		r := scored(off)
		if want := producer.AppendScored(nil, r); !bytes.Equal(m.Value, want) {
			t.Fatalf("value %s, want %s", m.Value, want)
		}
		if string(m.Key) != r.Event.User {
			t.Fatalf("key %q, want the user %q", m.Key, r.Event.User)
		}
		if p, ok := partitionOf[string(m.Key)]; ok && p != m.Partition {
			t.Fatalf("user %s in partitions %d and %d", m.Key, p, m.Partition)
		}
		partitionOf[string(m.Key)] = m.Partition
		for key, want := range map[string]string{
			producer.HeaderSourceTopic:     "in",
			producer.HeaderSourcePartition: strconv.Itoa(off % 3),
			producer.HeaderModelVersion:    strconv.Itoa(off),
		} {
			if got := header(t, m, key); got != want {
				t.Fatalf("header %s = %q, want %q", key, got, want)
			}
		}
	}
	if len(partitionOf) < 2 {
		t.Errorf("all users in one partition: keys do not spread")
	}
}

func TestKafkaDeadLetter(t *testing.T) {
	b := kafkatest.New(t)
	topic := b.Topic(t, "dlq", 1)
	dlq, err := producer.NewKafkaDeadLetter(producer.KafkaConfig{Brokers: b.Addrs, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bad := []*consumer.Result{
		{Pos: input.Position{Topic: "in", Partition: 2, Offset: 7}, Raw: []byte("not json"), RawSize: 8,
			Reason: consumer.ReasonNotJSON, Err: &consumer.RecordError{Reason: consumer.ReasonNotJSON, Msg: "not valid JSON"}},
		{Pos: input.Position{File: "f.jsonl", Line: 3}, Raw: []byte(`{"user":1}`), RawSize: 10,
			Reason: consumer.ReasonMissingField, Err: &consumer.RecordError{Reason: consumer.ReasonMissingField, Field: "item", Msg: "missing"}},
	}
	for _, r := range bad {
		if err := dlq.Reject(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// No Flush: the batch timeout alone must send a partial batch.
	msgs := b.NewReader(t, topic).Until(t, 30*time.Second, kafkatest.AtLeast(2))
	if err := dlq.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{producer.HeaderReason: "not_json", producer.HeaderError: "not valid JSON", producer.HeaderSourceTopic: "in",
			producer.HeaderSourcePartition: "2", producer.HeaderSourceOffset: "7"},
		{producer.HeaderReason: "missing_field", producer.HeaderError: "item: missing", producer.HeaderSourceFile: "f.jsonl",
			producer.HeaderSourceLine: "3"},
	}
	for i, m := range msgs {
		for k, v := range want[i] {
			if got := header(t, m, k); got != v {
				t.Errorf("record %d: header %s = %q, want %q", i, k, got, v)
			}
		}
		if wantV := producer.AppendRejected(nil, bad[i]); !bytes.Equal(m.Value, wantV) {
			t.Errorf("record %d: value %s, want %s", i, m.Value, wantV)
		}
		if m.Key != nil {
			t.Errorf("record %d: key %q, want none", i, m.Key)
		}
	}
}

// unreachable is an address nothing listens on.
const unreachable = "127.0.0.1:1"

func TestKafkaWriterGivesUp(t *testing.T) {
	sink, err := producer.NewKafkaSink(producer.KafkaConfig{
		Brokers: []string{unreachable}, Topic: "t", RetryFor: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sink.Write(ctx, scored(1)); err != nil {
		t.Fatalf("first Write: %v", err)
	}
	start := time.Now()
	if err := sink.Flush(ctx); !errors.Is(err, producer.ErrWriterFailed) {
		t.Fatalf("Flush = %v, want ErrWriterFailed", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("gave up after %v, RetryFor is 300ms", d)
	}
	if err := sink.Write(ctx, scored(2)); !errors.Is(err, producer.ErrWriterFailed) {
		t.Fatalf("Write after failure = %v, want ErrWriterFailed", err)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatalf("Close after failure: %v", err)
	}
}

func TestKafkaWriterBackpressure(t *testing.T) {
	sink, err := producer.NewKafkaSink(producer.KafkaConfig{
		Brokers: []string{unreachable}, Topic: "t", BatchSize: 1, MaxBatches: 2, RetryFor: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		if err := sink.Write(ctx, scored(i)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := sink.Write(short, scored(3)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third Write with both batches taken = %v, want it to block until its deadline", err)
	}
	closeCtx, cancelClose := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelClose()
	start := time.Now()
	if err := sink.Close(closeCtx); err == nil {
		t.Fatal("Close with undeliverable records succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v, bound 300ms", d)
	}
	// Let the abandoned kafka-go goroutines end before goleak looks.
	time.Sleep(time.Second)
}
