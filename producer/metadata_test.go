package producer

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/listoffsets"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/internal/kafkatest"
)

// countingTransport answers metadata requests with resp (or err) and
// counts the requests it is given.
type countingTransport struct {
	calls int
	resp  kafka.Response
	err   error
}

func (c *countingTransport) RoundTrip(context.Context, net.Addr, kafka.Request) (kafka.Response, error) {
	c.calls++
	return c.resp, c.err
}

func metadataOf(topic string, code int16, partitions int) *metadataAPI.Response {
	return &metadataAPI.Response{Topics: []metadataAPI.ResponseTopic{{
		Name: topic, ErrorCode: code, Partitions: make([]metadataAPI.ResponsePartition, partitions),
	}}}
}

// TestMetadataCache: the Writer's question (the metadata of one topic)
// is answered from the cache for metadataTTL once the transport has
// answered it without error; an answer with an error, another topic,
// another kind of metadata request and any other request go to the
// transport every time.
func TestMetadataCache(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	next := &countingTransport{resp: metadataOf("out", 0, 3)}
	c := &metadataCache{next: next, now: func() time.Time { return now }}
	ask := func(req kafka.Request) kafka.Response {
		t.Helper()
		r, err := c.RoundTrip(ctx, nil, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	question := &metadataAPI.Request{TopicNames: []string{"out"}}
	first := ask(question)
	for range 1000 {
		if r := ask(question); r != first {
			t.Fatalf("answer %v, want the cached %v", r, first)
		}
	}
	if next.calls != 1 || c.hits != 1000 {
		t.Fatalf("transport asked %d times, %d cache hits; want 1 and 1000", next.calls, c.hits)
	}
	now = now.Add(metadataTTL)
	ask(question)
	if next.calls != 2 {
		t.Fatalf("after the TTL the transport was asked %d times in all, want 2", next.calls)
	}
	for _, req := range []kafka.Request{
		&metadataAPI.Request{TopicNames: []string{"other"}},
		&metadataAPI.Request{TopicNames: []string{"out", "other"}},
		&metadataAPI.Request{},
		&metadataAPI.Request{TopicNames: []string{"out"}, AllowAutoTopicCreation: true},
		&listoffsets.Request{},
	} {
		before := next.calls
		ask(req)
		if next.calls != before+1 {
			t.Fatalf("%T %+v answered from the cache", req, req)
		}
	}

	// Not cached: an answer with an error, without the topic, or a failure.
	for _, tc := range []struct {
		resp kafka.Response
		err  error
	}{
		{metadataOf("fresh", 3, 0), nil}, // UNKNOWN_TOPIC_OR_PARTITION
		{metadataOf("elsewhere", 0, 1), nil},
		{nil, errors.New("broker down")},
	} {
		next := &countingTransport{resp: tc.resp, err: tc.err}
		c := &metadataCache{next: next, now: time.Now}
		for range 3 {
			r, err := c.RoundTrip(ctx, nil, &metadataAPI.Request{TopicNames: []string{"fresh"}})
			if r != tc.resp || !errors.Is(err, tc.err) {
				t.Fatalf("answer %v, %v; want the transport's %v, %v", r, err, tc.resp, tc.err)
			}
		}
		if next.calls != 3 {
			t.Fatalf("%+v: transport asked %d times, want 3 (nothing cached)", tc, next.calls)
		}
	}
}

// TestWriterAsksTheCache: the output Writer's question, asked for every
// record, goes through the cache and is answered from it (a kafka-go that
// asked otherwise would leave the cache unused, and this test fails): of
// 500 records' questions, all but the first few, one per TTL.
func TestWriterAsksTheCache(t *testing.T) {
	b := kafkatest.New(t)
	topic := b.Topic(t, "scored", 3)
	w, err := newKafkaWriter(KafkaConfig{Brokers: b.Addrs, Topic: topic, BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := &KafkaSink{w: w}
	defer sink.Close(ctx)
	const n = 500
	for i := range n {
		r := &consumer.Result{Pos: input.Position{Topic: "in", Partition: 0, Offset: int64(i)}, Raw: []byte(`{"user":"u","item":"i"}`)}
		r.Event.User, r.Event.Item = "u"+string(rune('a'+i%26)), "i"
		if err := sink.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c := w.kw.Transport.(*metadataCache)
	c.mu.Lock()
	hits := c.hits
	c.mu.Unlock()
	if hits < n-n/10 {
		t.Fatalf("%d of %d records' questions answered from the cache", hits, n)
	}
	if got := len(b.NewReader(t, topic).Until(t, 30*time.Second, kafkatest.AtLeast(n))); got != n {
		t.Fatalf("%d records written, want %d", got, n)
	}
}
