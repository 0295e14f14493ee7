package producer_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"denoiser/consumer"
	"denoiser/internal/kafkatest"
	"denoiser/producer"
	"denoiser/producer/producertest"
)

// kafkaHarness reads a topic back: one stream per partition, in offset
// order. Each caller gets a fresh topic.
func kafkaHarness(b *kafkatest.Broker, topic string, partitions int, closeWriter func(context.Context) error, delivered *atomic.Uint64) producertest.Harness {
	return producertest.Harness{
		Close:     closeWriter,
		Delivered: delivered.Load,
		ErrClosed: producer.ErrWriterClosed,
		Streams:   partitions,
		Kafka:     true,
		ReadBack: func(t *testing.T, n int) []producertest.Output {
			t.Helper()
			var out []producertest.Output
			for _, m := range b.NewReader(t, topic).Until(t, 30*time.Second, kafkatest.AtLeast(n)) {
				o := producertest.Output{Value: m.Value, Key: m.Key, Headers: map[string]string{}, Stream: strconv.Itoa(m.Partition)}
				for _, h := range m.Headers {
					if _, dup := o.Headers[h.Key]; dup {
						t.Fatalf("record %s/%d@%d: header %q twice", m.Topic, m.Partition, m.Offset, h.Key)
					}
					o.Headers[h.Key] = string(h.Value)
				}
				out = append(out, o)
			}
			return out
		},
	}
}

// closeAtEnd closes a writer when t ends, so that no test leaks its
// goroutine.
func closeAtEnd(t *testing.T, closeWriter func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := closeWriter(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func TestKafkaSinkSuite(t *testing.T) {
	b := kafkatest.New(t)
	producertest.RunSinkSuite(t, func(t *testing.T) (consumer.Sink, producertest.Harness) {
		const partitions = 3
		topic := b.Topic(t, "scored", partitions)
		var delivered atomic.Uint64
		// Small batches, few of them: the suite's 600 records take many.
		s, err := producer.NewKafkaSink(producer.KafkaConfig{
			Brokers: b.Addrs, Topic: topic, BatchSize: 100, MaxBatches: 2,
			OnDelivered: func(n int) { delivered.Add(uint64(n)) },
		})
		if err != nil {
			t.Fatal(err)
		}
		closeAtEnd(t, s.Close)
		return s, kafkaHarness(b, topic, partitions, s.Close, &delivered)
	})
}

func TestKafkaDeadLetterSuite(t *testing.T) {
	b := kafkatest.New(t)
	producertest.RunDeadLetterSuite(t, func(t *testing.T) (consumer.DeadLetter, producertest.Harness) {
		// One partition: dead letters have no key, and kafka-go's murmur2
		// balancer sends keyless records to random partitions.
		topic := b.Topic(t, "dlq", 1)
		var delivered atomic.Uint64
		d, err := producer.NewKafkaDeadLetter(producer.KafkaConfig{
			Brokers: b.Addrs, Topic: topic, BatchSize: 100, MaxBatches: 2,
			OnDelivered: func(n int) { delivered.Add(uint64(n)) },
		})
		if err != nil {
			t.Fatal(err)
		}
		closeAtEnd(t, d.Close)
		return d, kafkaHarness(b, topic, 1, d.Close, &delivered)
	})
}

// TestKafkaBatchTimeout: without Flush, the batch timeout alone sends a
// partial batch.
func TestKafkaBatchTimeout(t *testing.T) {
	b := kafkatest.New(t)
	topic := b.Topic(t, "dlq", 1)
	dlq, err := producer.NewKafkaDeadLetter(producer.KafkaConfig{Brokers: b.Addrs, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, dlq.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bad := []*consumer.Result{producertest.Rejected(0), producertest.Rejected(1)}
	for _, r := range bad {
		if err := dlq.Reject(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	msgs := b.NewReader(t, topic).Until(t, 30*time.Second, kafkatest.AtLeast(2))
	for i, m := range msgs {
		if want := producer.AppendRejected(nil, bad[i]); !bytes.Equal(m.Value, want) {
			t.Errorf("record %d: value %s, want %s", i, m.Value, want)
		}
	}
}

// unreachable is an address nothing listens on.
const unreachable = "127.0.0.1:1"

// writeAndFlush makes a Kafka sink of cfg, writes one record and flushes
// it, and returns the sink, how long Flush took and its error.
func writeAndFlush(t *testing.T, ctx context.Context, cfg producer.KafkaConfig) (*producer.KafkaSink, time.Duration, error) {
	t.Helper()
	sink, err := producer.NewKafkaSink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(ctx, producertest.Scored(1)); err != nil {
		t.Fatalf("first Write: %v", err)
	}
	start := time.Now()
	err = sink.Flush(ctx)
	return sink, time.Since(start), err
}

func TestKafkaWriterGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, d, err := writeAndFlush(t, ctx, producer.KafkaConfig{Brokers: []string{unreachable}, Topic: "t", RetryFor: 300 * time.Millisecond})
	if !errors.Is(err, producer.ErrWriterFailed) {
		t.Fatalf("Flush = %v, want ErrWriterFailed", err)
	}
	if d > 10*time.Second || d < 300*time.Millisecond {
		t.Errorf("gave up after %v, RetryFor is 300ms", d)
	}
	if err := sink.Write(ctx, producertest.Scored(2)); !errors.Is(err, producer.ErrWriterFailed) {
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
		if err := sink.Write(ctx, producertest.Scored(i)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	// While the batches are retried, the sink says so (readiness).
	deadline := time.Now().Add(10 * time.Second)
	for sink.Failing() == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if why := sink.Failing(); !strings.HasPrefix(why, "t: ") {
		t.Errorf("Failing() = %q while the broker is unreachable, want the topic and the error", why)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := sink.Write(short, producertest.Scored(3)); !errors.Is(err, context.DeadlineExceeded) {
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

// TestKafkaWriterFailingClears: while a batch to a missing topic is
// retried the sink reports it (Failing: the service's readiness), and
// once the topic exists and the batch is written it no longer does.
func TestKafkaWriterFailingClears(t *testing.T) {
	b := kafkatest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := "late-topic-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sink, err := producer.NewKafkaSink(producer.KafkaConfig{Brokers: b.Addrs, Topic: topic, BatchSize: 1, RetryFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(ctx)
	if err := sink.Write(ctx, producertest.Scored(1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sink.Failing() == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if why := sink.Failing(); !strings.Contains(why, "does not exist on the brokers") {
		t.Fatalf("Failing() = %q while the topic is missing", why)
	}
	b.CreateTopic(t, topic, 1)
	if err := sink.Flush(ctx); err != nil {
		t.Fatalf("Flush once the topic exists: %v", err)
	}
	if why := sink.Failing(); why != "" {
		t.Errorf("Failing() = %q after the batch was written", why)
	}
}

// TestKafkaWriterMissingTopic: a write to a topic the brokers do not have
// is retried for RetryFor, then gives up saying the topic does not exist and to create
// it (an operator read "Unknown Topic Or Partition" retried for a minute
// and then a crash, with no word of what to do).
func TestKafkaWriterMissingTopic(t *testing.T) {
	b := kafkatest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "no-such-topic-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sink, d, err := writeAndFlush(t, ctx, producer.KafkaConfig{Brokers: b.Addrs, Topic: topic, RetryFor: 2 * time.Second})
	if !errors.Is(err, producer.ErrWriterFailed) || !strings.Contains(err.Error(), "does not exist on the brokers: create it") {
		t.Fatalf("Flush = %v, want ErrWriterFailed saying the topic does not exist", err)
	}
	// Retried for all of RetryFor (it gave up at about 1.5 s of 2 s when a
	// wait that would pass RetryFor ended the retries).
	if d < 2*time.Second {
		t.Errorf("gave up after %v, before RetryFor (2s)", d)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatalf("Close after failure: %v", err)
	}
}
