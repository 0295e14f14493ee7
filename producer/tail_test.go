package producer_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/segmentio/kafka-go"

	"denoiser/internal/kafkatest"
	"denoiser/producer"
)

// out is an output record of input record (topic, p, off).
func out(topic string, p int, off int64) kafka.Message {
	return kafka.Message{Value: []byte("{}"), Headers: []kafka.Header{
		{Key: producer.HeaderSourceTopic, Value: []byte(topic)},
		{Key: producer.HeaderSourcePartition, Value: []byte(strconv.Itoa(p))},
		{Key: producer.HeaderSourceOffset, Value: []byte(strconv.FormatInt(off, 10))},
	}}
}

func sorted(m map[int64]bool) []int64 { return slices.Sorted(maps.Keys(m)) }

// TestTailScan: on output topics whose content is known, the scan finds
// exactly the input records at or after each start that have output, in
// either topic, and ignores other source topics and records without a
// source.
func TestTailScan(t *testing.T) {
	b := kafkatest.New(t)
	scored := b.Topic(t, "tail-scored", 1)
	dead := b.Topic(t, "tail-dead", 1)
	var msgs []kafka.Message
	for off := range int64(10) {
		msgs = append(msgs, out("in", 0, off), out("in", 1, off), out("other", 0, 100+off))
	}
	msgs = append(msgs, kafka.Message{Value: []byte("no headers")})
	b.Produce(t, scored, msgs...)
	b.Produce(t, dead, out("in", 0, 12))

	scan := producer.TailScan{Brokers: b.Addrs, Topics: []string{scored, dead}}
	found, complete, err := scan.Emitted(context.Background(), "in", map[int]int64{0: 5, 1: 8, 2: 0})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(sorted(found[0]), sorted(found[1]), sorted(found[2]), complete)
	if want := "[5 6 7 8 9 12] [8 9] [] true"; got != want {
		t.Fatalf("found %s, want %s", got, want)
	}

	// More records back than the window without reaching a record of
	// partition 0 below its start: the answer is what was read, marked
	// incomplete.
	long := b.Topic(t, "tail-long", 1)
	msgs = msgs[:0]
	for off := range int64(5000) {
		msgs = append(msgs, out("in", 0, off))
	}
	b.Produce(t, long, msgs...)
	scan = producer.TailScan{Brokers: b.Addrs, Topics: []string{long}, Window: 100}
	found, complete, err = scan.Emitted(context.Background(), "in", map[int]int64{0: 0})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(found[0]); complete || n == 0 || n == 5000 || !found[0][4999] {
		t.Fatalf("window 100: %d found (the latest, 4999: %v), complete %v; want part of the 5000 from the end, incomplete", n, found[0][4999], complete)
	}
	scan.Window = 0 // the default reaches the start
	if found, complete, err = scan.Emitted(context.Background(), "in", map[int]int64{0: 4990}); err != nil || !complete || fmt.Sprint(sorted(found[0])) != "[4990 4991 4992 4993 4994 4995 4996 4997 4998 4999]" {
		t.Fatalf("start 4990: found %v, complete %v, err %v", sorted(found[0]), complete, err)
	}
}
