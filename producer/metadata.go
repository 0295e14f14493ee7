package producer

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// metadataTTL is how long metadataCache keeps an answer.
const metadataTTL = time.Second

// metadataCache is the output Writer's transport. kafka-go's Writer asks
// how many partitions the topic has once for every message it is given
// (v0.4.51, writer.go, Writer.WriteMessages and Writer.partitions), and
// its Transport answers from the metadata it keeps, but filters and
// copies that metadata for each question: in BenchmarkPipeline against
// Kafka 3.9.1 that was about a tenth of the service's CPU per record.
// metadataCache keeps the answer to that one question (the metadata of
// one topic, found without error) for metadataTTL, and hands every other
// request to the transport. The Transport itself refreshes its metadata
// every 6 s (its MetadataTTL), so the partition count the Writer balances
// on is at most a second staler than it was.
type metadataCache struct {
	next kafka.RoundTripper
	now  func() time.Time

	mu    sync.Mutex
	topic string
	resp  *metadataAPI.Response
	at    time.Time
	hits  uint64 // answers from the cache, for tests
}

func (c *metadataCache) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	m, ok := req.(*metadataAPI.Request)
	if !ok || len(m.TopicNames) != 1 || m.AllowAutoTopicCreation || m.IncludeClusterAuthorizedOperations || m.IncludeTopicAuthorizedOperations {
		return c.next.RoundTrip(ctx, addr, req)
	}
	topic := m.TopicNames[0]
	c.mu.Lock()
	if c.resp != nil && c.topic == topic && c.now().Sub(c.at) < metadataTTL {
		resp := c.resp
		c.hits++
		c.mu.Unlock()
		return resp, nil
	}
	c.mu.Unlock()
	r, err := c.next.RoundTrip(ctx, addr, req)
	if err != nil {
		return r, err
	}
	resp, ok := r.(*metadataAPI.Response)
	if !ok || !topicFound(resp, topic) {
		return r, nil
	}
	c.mu.Lock()
	c.topic, c.resp, c.at = topic, resp, c.now()
	c.mu.Unlock()
	return r, nil
}

// topicFound reports whether resp describes topic without an error.
func topicFound(resp *metadataAPI.Response, topic string) bool {
	for _, t := range resp.Topics {
		if t.Name == topic {
			return t.ErrorCode == 0 && len(t.Partitions) > 0
		}
	}
	return false
}
