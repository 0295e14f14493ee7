package service_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"denoiser/consumer"
	"denoiser/consumer/input"
	"denoiser/internal/kafkatest"
	"denoiser/online"
	"denoiser/producer"
	"denoiser/service"
)

// TestPartitionState: with state_layout partition, each input
// partition's output is that of a model of its own (seeded for the
// partition) stepped on that partition's records alone, byte for byte,
// across a stop and a restart that restores the models from the
// checkpoint, while the member steps the partitions in parallel.
func TestPartitionState(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "parts", 3)
	lines := events(t, 3000, 4)
	cfg := testConfig(t, b, in)
	cfg.StateLayout = online.LayoutPartition
	out := b.NewReader(t, cfg.WithDefaults().Kafka.OutputTopic)
	produced := 0
	for _, part := range [][][]byte{lines[:2000], lines[2000:]} {
		b.Produce(t, in, keyed(part)...)
		produced += len(part)
		r := start(t, cfg)
		out.Until(t, 2*time.Minute, kafkatest.AtLeast(produced)) // what the reader read so far
		if err, _ := r.stop(t); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	got := map[[2]int64][]byte{}
	for _, m := range out.Until(t, time.Second, kafkatest.AtLeast(0)) {
		p, o := sourceOffset(t, m)
		k := [2]int64{int64(p), o}
		if got[k] != nil {
			t.Fatalf("offset %d/%d emitted twice", p, o)
		}
		got[k] = m.Value
	}

	// The reference: each partition's records, in offset order, through
	// a model of its own.
	inputs := b.NewReader(t, in).Until(t, time.Minute, kafkatest.AtLeast(len(lines)))
	slices.SortFunc(inputs, func(a, b kafka.Message) int {
		if a.Partition != b.Partition {
			return a.Partition - b.Partition
		}
		return int(a.Offset - b.Offset)
	})
	c := cfg.WithDefaults()
	models := map[int]*online.Model{}
	perPartition := map[int]int{}
	for _, m := range inputs {
		model := models[m.Partition]
		if model == nil {
			var err error
			if model, err = online.New(c.Model, online.NewPartitionSource(c.Seed, int32(m.Partition))); err != nil {
				t.Fatal(err)
			}
			models[m.Partition] = model
		}
		r := consumer.Result{Pos: input.Position{Topic: in, Partition: int32(m.Partition), Offset: m.Offset}}
		if err := consumer.Decode(m.Value, &r.Event); err != nil {
			t.Fatalf("input %d/%d: %v", m.Partition, m.Offset, err)
		}
		if err := model.Step(r.Event.Model(), &r.Score); err != nil && !errors.Is(err, online.ErrNumerical) {
			t.Fatalf("input %d/%d: %v", m.Partition, m.Offset, err)
		}
		want := producer.AppendScored(nil, &r)
		if !bytes.Equal(got[[2]int64{int64(m.Partition), m.Offset}], want) {
			t.Fatalf("output of %d/%d:\n got %s\nwant %s", m.Partition, m.Offset, got[[2]int64{int64(m.Partition), m.Offset}], want)
		}
		perPartition[m.Partition]++
	}
	if len(got) != len(lines) || len(perPartition) != 3 {
		t.Fatalf("%d outputs for %d inputs; partitions %v", len(got), len(lines), perPartition)
	}
	cp := loadCheckpoint(t, cfg.Checkpoint.Dir)
	for p, model := range models {
		snap, err := service.CheckpointModel(context.Background(), cp, int32(p))
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if _, err := model.WriteTo(&want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(snap.Model, want.Bytes()) || snap.Version != model.Version() {
			t.Fatalf("checkpointed model of partition %d (version %d) differs from the reference (version %d)", p, snap.Version, model.Version())
		}
		wantPos := []input.Position{{Topic: in, Partition: int32(p), Offset: int64(perPartition[p])}}
		if !slices.Equal(snap.Positions, wantPos) {
			t.Fatalf("snapshot of partition %d: positions %v, want %v", p, snap.Positions, wantPos)
		}
	}
	t.Logf("3 partitions %v, 2 runs: every output byte-identical to its partition's own model; the checkpoint holds the 3 models", perPartition)
}
