package service_test

import (
	"testing"
	"time"

	"denoiser/consumer"
	"denoiser/internal/kafkatest"
	"denoiser/online"
)

// TestPartitionsShare: with state_layout partition and the shared topic
// (the default), the partition models learn the item rows together: each
// merges what the others published, so it has rows for items that only
// the other partitions' events carry, and a cursor for every other
// partition. The cursors are part of the checkpoint: after a graceful
// stop and a restart, the restored models merge only what came after, and
// no delta overlaps one they merged. Every input offset has one output
// record.
func TestPartitionsShare(t *testing.T) {
	b := kafkatest.New(t)
	const parts = 3
	in := b.Topic(t, "share", parts)
	lines := events(t, 6000, 8)
	cfg := testConfig(t, b, in)
	cfg.StateLayout = online.LayoutPartition
	cfg.Sharing.Interval = 100 * time.Millisecond
	cfg.Sharing.EveryEvents = 250
	out := b.NewReader(t, cfg.WithDefaults().Kafka.OutputTopic)
	metricsOf := func(r *running) string { return "http://" + r.svc.HTTPAddr() + "/metrics" }
	const merged, overlapping = `denoiser_shared_deltas_total{outcome="merged"}`, `denoiser_shared_deltas_total{outcome="overlapping"}`
	const published = `denoiser_shared_deltas_total{outcome="published"}`
	// Every partition has published, and the models merged: a model
	// merges where it stepped since its last merge point, so the last
	// publications wait for its next records.
	caughtUp := func(m map[string]float64) bool {
		return m[published] >= parts && m[merged] >= parts
	}
	// settled waits until r has caught up and published nothing more for
	// a few sharing intervals: the input is processed.
	settled := func(r *running, what string) map[string]float64 {
		t.Helper()
		for range 50 {
			m := waitMetrics(t, metricsOf(r), time.Minute, what, caughtUp)
			time.Sleep(time.Second)
			if again := waitMetrics(t, metricsOf(r), time.Minute, what, caughtUp); again[published] == m[published] {
				return again
			}
		}
		t.Fatalf("%s: the models go on publishing", what)
		return nil
	}

	// feed produces lines[lo:hi] for r in two bursts: the second merges
	// what the first published.
	feed := func(r *running, lo, hi int) {
		t.Helper()
		mid := (lo + hi) / 2
		before := waitMetrics(t, metricsOf(r), time.Minute, "metrics", func(map[string]float64) bool { return true })[published]
		b.Produce(t, in, keyed(lines[lo:mid])...)
		out.Until(t, 2*time.Minute, kafkatest.AtLeast(mid))
		waitMetrics(t, metricsOf(r), time.Minute, "each partition publishes", func(m map[string]float64) bool { return m[published] >= before+parts })
		time.Sleep(time.Second) // the deltas are read back
		b.Produce(t, in, keyed(lines[mid:hi])...)
		out.Until(t, 2*time.Minute, kafkatest.AtLeast(hi))
	}

	r := start(t, cfg)
	feed(r, 0, 3000)
	m := settled(r, "each partition merges the others' deltas")
	t.Logf("first run: %v published, %v merged", m[published], m[merged])
	if err, _ := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// Items per partition, from the input.
	inputs := b.NewReader(t, in).Until(t, time.Minute, kafkatest.AtLeast(3000))
	own := map[int32]map[string]bool{}
	for _, msg := range inputs {
		var ev consumer.Event
		if err := consumer.Decode(msg.Value, &ev); err != nil {
			t.Fatal(err)
		}
		p := int32(msg.Partition)
		if own[p] == nil {
			own[p] = map[string]bool{}
		}
		own[p][ev.Item] = true
	}
	set, _ := r.svc.ModelState()
	cursors := map[int32][]online.Cursor{}
	for p := range int32(parts) {
		model := set.Model(p)
		if model == nil {
			t.Fatalf("no model of partition %d", p)
		}
		others := 0
		for i := range model.NumItems() {
			if id := model.ItemID(i); id != "" && !own[p][id] {
				others++
			}
		}
		if others == 0 {
			t.Errorf("partition %d's model has no row for an item of the other partitions alone (%d rows, %d items of its own)", p, model.NumItems(), len(own[p]))
		}
		for q := range int32(parts) {
			if q != p && model.Merged(q) < 0 {
				t.Errorf("partition %d's model merged nothing of partition %d", p, q)
			}
		}
		cursors[p] = model.MergedFrom()
		t.Logf("partition %d: %d items of its own, %d rows of items only the others had; cursors %v", p, len(own[p]), others, cursors[p])
	}

	r = start(t, cfg)
	feed(r, 3000, len(lines))
	m = settled(r, "the restored models merge the deltas of the second run")
	if m[overlapping] != 0 {
		t.Errorf("%v deltas overlapped what the restored models had merged", m[overlapping])
	}
	if err, _ := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	set, _ = r.svc.ModelState()
	for p := range int32(parts) {
		for _, c := range cursors[p] {
			if got := set.Model(p).Merged(c.Partition); got <= c.Seq {
				t.Errorf("partition %d: cursor of partition %d at %d after the second run, %d after the first", p, c.Partition, got, c.Seq)
			}
		}
	}
	seen := map[[2]int64]bool{}
	for _, msg := range out.Until(t, time.Second, kafkatest.AtLeast(0)) {
		p, o := sourceOffset(t, msg)
		k := [2]int64{int64(p), o}
		if seen[k] {
			t.Fatalf("input %d@%d emitted twice", p, o)
		}
		seen[k] = true
	}
	if len(seen) != len(lines) {
		t.Errorf("%d input offsets emitted, want %d", len(seen), len(lines))
	}
}
