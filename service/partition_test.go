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
	cfg.Sharing.Topic = service.SharingOff // each partition's model learns alone
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
	got := checkPartitionOutputs(t, b, cfg, out.Until(t, time.Second, kafkatest.AtLeast(0)), len(lines), nil)
	models, perPartition := got.models, got.perPartition
	if len(perPartition) != 3 {
		t.Fatalf("partitions %v", perPartition)
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

// checkPartitionOutputs checks that msgs, the output of a run with
// state_layout partition over the first n records of cfg's input topic,
// holds every input offset once, each byte-identical to what a model of
// its own partition (seeded for it) writes when stepped on that
// partition's records alone, in offset order. It returns those models and
// the records per partition.
//
// With shared, the history of the run's shared topic (sharing on), each
// model merges what the live model of its partition merged, where it
// merged it (service.SharedHistory.Merges), as a replay does.
func checkPartitionOutputs(t *testing.T, b *kafkatest.Broker, cfg service.Config, msgs []kafka.Message, n int, shared *service.SharedHistory) partitionOutputs {
	t.Helper()
	got := map[[2]int64][]byte{}
	for _, m := range msgs {
		p, o := sourceOffset(t, m)
		k := [2]int64{int64(p), o}
		if got[k] != nil {
			t.Fatalf("offset %d/%d emitted twice", p, o)
		}
		got[k] = m.Value
	}
	c := cfg.WithDefaults()
	in := c.Kafka.InputTopic
	inputs := b.NewReader(t, in).Until(t, time.Minute, kafkatest.AtLeast(n))
	kafkatest.SortByPosition(inputs)
	dec := consumer.NewDecoder(c.Fields)
	models := map[int]*online.Model{}
	merges := map[int]*service.Merges{}
	perPartition := map[int]int{}
	var sources [online.NumWeightSources]int
	for _, m := range inputs {
		model := models[m.Partition]
		if model == nil {
			var err error
			if model, err = online.NewPartition(c.Model, c.Seed, int32(m.Partition)); err != nil {
				t.Fatal(err)
			}
			models[m.Partition] = model
			if shared != nil {
				model.StartSharing()
				if merges[m.Partition], err = shared.Merges(int32(m.Partition)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if ms := merges[m.Partition]; ms != nil {
			ms.Apply(model, m.Offset)
		}
		r := consumer.Result{Pos: input.Position{Topic: in, Partition: int32(m.Partition), Offset: m.Offset}}
		if err := dec.Decode(m.Value, &r.Event); err != nil {
			t.Fatalf("input %d/%d: %v", m.Partition, m.Offset, err)
		}
		if err := model.Step(r.Event.Model(), &r.Score); err != nil && !errors.Is(err, online.ErrNumerical) {
			t.Fatalf("input %d/%d: %v", m.Partition, m.Offset, err)
		}
		want := producer.AppendScored(nil, &r)
		if g := got[[2]int64{int64(m.Partition), m.Offset}]; !bytes.Equal(g, want) {
			t.Fatalf("output of %d/%d:\n got %s\nwant %s", m.Partition, m.Offset, g, want)
		}
		perPartition[m.Partition]++
		sources[r.Score.Source]++
	}
	if len(got) != len(inputs) {
		t.Fatalf("%d outputs for %d inputs", len(got), len(inputs))
	}
	return partitionOutputs{models, perPartition, sources}
}

// partitionOutputs is what checkPartitionOutputs found: the models of
// the partitions, the records of each, and how many of their weights each
// source formed (online.Score.Source).
type partitionOutputs struct {
	models       map[int]*online.Model
	perPartition map[int]int
	sources      [online.NumWeightSources]int
}

// TestPartitionStateFollowsThePartition: with state_layout partition a
// partition's state goes where the partition goes, through the changelog
// topic. Member A reads the four partitions alone; member B joins with an
// empty state directory and takes some of them over; A leaves and B takes
// the rest; A comes back with its own, now stale, state and gets some
// back. Every output record, whichever member wrote it, is byte-identical
// to what a model of its partition writes stepped on that partition's
// records alone: each member restored each partition it was given from
// the newest checkpoint, wherever it was written, and went on from its
// offset. No offset is emitted twice. A drops the models of the
// partitions it hands over (their state is in the changelog).
func TestPartitionStateFollowsThePartition(t *testing.T) {
	followThePartition(t, "follow", typedEvents(t, 8000, 6), online.SourceEventType, false, consumer.Fields{})
}

// TestPartitionStateFollowsThePartitionBare: as
// TestPartitionStateFollowsThePartition, on events of (user, item, time)
// only, whose weights the gap instrument forms: its moments and level
// offset, and each user's latest time, go with the partition through the
// changelog.
func TestPartitionStateFollowsThePartitionBare(t *testing.T) {
	followThePartition(t, "follow-bare", bareEvents(t, 40000, 6), online.SourceGap, false, consumer.Fields{})
}

// TestPartitionStateFollowsThePartitionUntimed: as
// TestPartitionStateFollowsThePartitionBare, on a log of (user, item)
// pairs in time order, without times: each partition model counts its
// users' gaps in its own events, and the users' count marks and the
// counts' scale go with the partition through the changelog.
func TestPartitionStateFollowsThePartitionUntimed(t *testing.T) {
	followThePartition(t, "follow-untimed", withoutMembers(t, bareEvents(t, 40000, 6), "ts"), online.SourceGap, false, consumer.Fields{})
}

// TestPartitionsShareReplayedUntimed: as TestPartitionsShareReplayed, on
// the log of TestPartitionStateFollowsThePartitionUntimed: a partition
// model's counts are of its own events, so merging what the others
// published moves no user's count, and a replay of one partition with the
// shared log reproduces it.
func TestPartitionsShareReplayedUntimed(t *testing.T) {
	followThePartition(t, "follow-share-untimed", withoutMembers(t, bareEvents(t, 40000, 6), "ts"), online.SourceGap, true, consumer.Fields{})
}

// TestPartitionsShareReplayed: as TestPartitionStateFollowsThePartition,
// with the partition models sharing (every 100 ms and every 250 records):
// every output record is byte-identical to what a model of its partition
// writes stepped on that partition's records alone, merging what the
// shared topic recorded that the live models merged, where they merged it
// (service.SharedHistory), across the handovers between the two members.
// That is what a replay of one partition with the shared log does.
func TestPartitionsShareReplayed(t *testing.T) {
	followThePartition(t, "follow-share", typedEvents(t, 8000, 6), online.SourceEventType, true, consumer.Fields{})
}

// TestPartitionsShareReplayedFields: as TestPartitionsShareReplayed, on
// records whose user, item, time and event type are in members of other
// names (a Taobao-style log: user_id, item_id, timestamp,
// behavior_type), read with fields.*: both members and the handovers
// read them, and every output is its partition's own model's, the
// renamed members carried through.
func TestPartitionsShareReplayedFields(t *testing.T) {
	names := map[string]string{"user": "user_id", "item": "item_id", "ts": "timestamp", "event": "behavior_type"}
	fields := consumer.Fields{User: "user_id", Item: "item_id", TS: "timestamp", Event: "behavior_type"}
	followThePartition(t, "follow-share-fields", renamedMembers(t, typedEvents(t, 8000, 6), names), online.SourceEventType, true, fields)
}

// twoMembers is the set-up of the tests in which members A and B of
// partition state pass the 4 partitions of an input topic between them.
type twoMembers struct {
	b          *kafkatest.Broker
	lines      [][]byte
	cfgA, cfgB service.Config // B's own state directory
	out        *kafkatest.Reader
	produce    func(n int) // the next n lines, waiting until their output is read
	owns       func(r *running, n int) func() bool
	bothOwn    func(a, b *running) func() bool // A and B split the partitions
}

// newTwoMembers makes a topic of 4 partitions for the events of lines
// and members of partition state, with sharing off unless share. Events
// with types and no dwell (typedEvents) the partitions' models weigh by
// the rank instrument, events without types (bareEvents) by the gap
// instrument; the handovers save and restore either.
func newTwoMembers(t *testing.T, topic string, lines [][]byte, share bool) *twoMembers {
	const parts = 4
	tm := &twoMembers{b: kafkatest.New(t), lines: lines}
	in := tm.b.Topic(t, topic, parts)
	tm.cfgA = testConfig(t, tm.b, in)
	tm.cfgA.StateLayout = online.LayoutPartition
	tm.cfgA.Sharing.Topic = service.SharingOff // each partition's model learns alone
	if share {
		tm.cfgA.Sharing = service.SharingConfig{Interval: 100 * time.Millisecond, EveryEvents: 250}
	}
	tm.cfgB = tm.cfgA
	tm.cfgB.Checkpoint.Dir = t.TempDir()
	tm.out = tm.b.NewReader(t, tm.cfgA.WithDefaults().Kafka.OutputTopic)
	tm.owns = func(r *running, n int) func() bool {
		return func() bool { p, _ := r.svc.Assignment(); return len(p) == n }
	}
	tm.bothOwn = func(a, b *running) func() bool {
		return func() bool {
			pa, _ := a.svc.Assignment()
			pb, _ := b.svc.Assignment()
			return len(pa) > 0 && len(pb) > 0 && len(pa)+len(pb) == parts
		}
	}
	produced := 0
	tm.produce = func(n int) {
		tm.b.Produce(t, in, keyedBy(tm.cfgA.Fields, tm.lines[produced:produced+n])...)
		produced += n
		tm.out.Until(t, 2*time.Minute, kafkatest.AtLeast(produced))
	}
	return tm
}

// followThePartition runs the test of TestPartitionStateFollowsThePartition
// on lines, and fails if no weight was formed by the source instrument
// (the handovers would then not have carried its state).
func followThePartition(t *testing.T, topic string, lines [][]byte, instrument online.WeightSource, share bool, fields consumer.Fields) {
	const parts = 4
	tm := newTwoMembers(t, topic, lines, share)
	tm.cfgA.Fields, tm.cfgB.Fields = fields, fields
	b, cfgA, cfgB, out, owns, produce := tm.b, tm.cfgA, tm.cfgB, tm.out, tm.owns, tm.produce
	quarter := len(lines) / 4 // produced at each of the four assignments

	a := start(t, cfgA)
	waitFor(t, time.Minute, "A owns the 4 partitions", owns(a, parts))
	produce(quarter)
	bm := start(t, cfgB)
	waitFor(t, time.Minute, "A and B split the partitions", tm.bothOwn(a, bm))
	// A handed partitions over to B; their changelog saves (the
	// handover's) hold them, so A drops their models. A failed handover
	// leaves its models in place (their state is only A's then).
	pa, _ := a.svc.Assignment()
	m := waitMetrics(t, "http://"+a.svc.HTTPAddr()+"/metrics", time.Minute, "A drops the models of the partitions it handed over", func(m map[string]float64) bool {
		return m["denoiser_changelog_evictions_total"] >= float64(parts-len(pa)) || m[`denoiser_handovers_total{outcome="failed"}`] > 0
	})
	t.Logf("A owns %v: %v models evicted, %v handovers failed", pa, m["denoiser_changelog_evictions_total"], m[`denoiser_handovers_total{outcome="failed"}`])
	produce(quarter)
	if err, _ := a.stop(t); err != nil {
		t.Fatalf("A's stop: %v", err)
	}
	waitFor(t, time.Minute, "B owns the 4 partitions", owns(bm, parts))
	produce(quarter)
	a = start(t, cfgA)
	waitFor(t, time.Minute, "A and B split the partitions again", tm.bothOwn(a, bm))
	produce(quarter)
	for _, r := range []*running{a, bm} {
		if err, _ := r.stop(t); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	msgs := out.Until(t, time.Second, kafkatest.AtLeast(0))
	var hist *service.SharedHistory
	if share {
		hist = service.NewSharedHistory()
		for _, m := range b.NewReader(t, cfgA.WithDefaults().Sharing.Topic).Until(t, time.Minute, kafkatest.AtLeast(1)) {
			if err := hist.Add(m.Value); err != nil {
				t.Fatalf("shared record %d: %v", m.Offset, err)
			}
		}
		for p := range int32(parts) {
			ms, err := hist.Merges(p)
			if err != nil {
				t.Fatal(err)
			}
			if ms.Deltas() == 0 {
				t.Fatalf("partition %d merged nothing", p)
			}
			t.Logf("partition %d: %d merge points, %d deltas merged", p, ms.Len(), ms.Deltas())
		}
	}
	got := checkPartitionOutputs(t, b, cfgA, msgs, len(lines), hist)
	if len(got.perPartition) != parts {
		t.Fatalf("partitions %v", got.perPartition)
	}
	if got.sources[instrument] == 0 {
		t.Fatalf("no weight was formed by %v (weights by source %v): the test tests nothing of it", instrument, got.sources)
	}
	t.Logf("%d partitions %v across 4 assignments of two members (sharing %v): every output byte-identical to its partition's own model; %d weights formed by %v",
		parts, got.perPartition, share, got.sources[instrument], instrument)
}

// TestRestoredPartitionsNotGivenLeave: a member restores every partition
// of its local state at start-up, and drops those its first generation
// does not give it once the changelog holds them at least as far in the
// input. A reads the 4 partitions alone and stops; B reads them alone
// and goes further; A comes back beside B and gets some of them: it
// drops the others (B's changelog saves are further on). Every output
// is still its partition's own model's, byte for byte.
func TestRestoredPartitionsNotGivenLeave(t *testing.T) {
	const parts = 4
	tm := newTwoMembers(t, "leftover", typedEvents(t, 4000, 6), false)
	cfgA, owns, produce := tm.cfgA, tm.owns, tm.produce

	a := start(t, cfgA)
	waitFor(t, time.Minute, "A owns the 4 partitions", owns(a, parts))
	produce(1500)
	if err, _ := a.stop(t); err != nil {
		t.Fatalf("A's stop: %v", err)
	}
	bm := start(t, tm.cfgB)
	waitFor(t, time.Minute, "B owns the 4 partitions", owns(bm, parts))
	produce(1500)
	a = start(t, cfgA)
	waitFor(t, time.Minute, "A and B split the partitions", tm.bothOwn(a, bm))
	pa, _ := a.svc.Assignment()
	m := waitMetrics(t, "http://"+a.svc.HTTPAddr()+"/metrics", time.Minute, "A drops the partitions it restored and was not given", func(m map[string]float64) bool {
		return m["denoiser_changelog_evictions_total"] >= float64(parts-len(pa))
	})
	t.Logf("A restored 4 partitions, was given %v: %v models evicted", pa, m["denoiser_changelog_evictions_total"])
	produce(1000)
	for _, r := range []*running{a, bm} {
		if err, _ := r.stop(t); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	// A's last checkpoint holds the partitions it was given, and no other.
	cp := loadCheckpoint(t, cfgA.Checkpoint.Dir)
	for p := range int32(parts) {
		_, err := service.CheckpointModel(context.Background(), cp, p)
		if given := slices.Contains(pa, int(p)); given != (err == nil) {
			t.Errorf("partition %d: given to A %v, in A's last checkpoint: %v", p, given, err)
		}
	}
	checkPartitionOutputs(t, tm.b, cfgA, tm.out.Until(t, time.Second, kafkatest.AtLeast(0)), len(tm.lines), nil)
}
