package service_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"denoiser/internal/kafkatest"
)

// waitFor polls cond every 50ms until it holds, failing t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inputEnds reads the input topic and returns the number of records per
// partition.
func inputEnds(t *testing.T, b *kafkatest.Broker, topic string, total int) map[int]int64 {
	t.Helper()
	end := map[int]int64{}
	for _, m := range b.NewReader(t, topic).Until(t, time.Minute, kafkatest.AtLeast(total)) {
		end[m.Partition] = max(end[m.Partition], m.Offset+1)
	}
	return end
}

// TestTwoMembersSplitAndOneLeaves: two members of one group split the
// partitions; when one leaves, the other takes its partitions over and no
// event is lost.
func TestTwoMembersSplitAndOneLeaves(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "members", 4)
	lines := events(t, 6000, 3)
	b.Produce(t, in, keyed(lines[:2000])...)
	cfgA := testConfig(t, b, in)
	cfgB := cfgA
	cfgB.Checkpoint.Dir = t.TempDir()

	a := start(t, cfgA)
	waitFor(t, time.Minute, "member A owns all 4 partitions", func() bool {
		p, _ := a.svc.Assignment()
		return len(p) == 4
	})
	bm := start(t, cfgB)
	var pa, pb []int
	waitFor(t, time.Minute, "members A and B split the partitions", func() bool {
		pa, _ = a.svc.Assignment()
		pb, _ = bm.svc.Assignment()
		all := slices.Sorted(slices.Values(append(slices.Clone(pa), pb...)))
		return len(pa) > 0 && len(pb) > 0 && fmt.Sprint(all) == "[0 1 2 3]"
	})
	t.Logf("split: A %v, B %v", pa, pb)
	b.Produce(t, in, keyed(lines[2000:4000])...)
	out := b.NewReader(t, cfgA.WithDefaults().Kafka.OutputTopic)
	out.Until(t, 2*time.Minute, kafkatest.AtLeast(3000))

	err, d := bm.stop(t)
	if err != nil {
		t.Fatalf("member B's graceful stop: %v", err)
	}
	t.Logf("member B stopped in %v", d)
	waitFor(t, time.Minute, "member A takes all 4 partitions back", func() bool {
		p, _ := a.svc.Assignment()
		return len(p) == 4
	})
	b.Produce(t, in, keyed(lines[4000:])...)
	out.Until(t, 2*time.Minute, covers(t, inputEnds(t, b, in, len(lines))))
}

// TestBrokerRestart: the broker restarts mid-stream; the service resumes by
// itself and loses nothing.
func TestBrokerRestart(t *testing.T) {
	b := kafkatest.Exclusive(t)
	in := b.Topic(t, "restart", 2)
	lines := events(t, 4000, 4)
	b.Produce(t, in, keyed(lines[:2000])...)
	cfg := testConfig(t, b, in)
	r := start(t, cfg)
	out := b.NewReader(t, cfg.WithDefaults().Kafka.OutputTopic)
	out.Until(t, 2*time.Minute, kafkatest.AtLeast(1000))

	b.Restart(t)
	b.Produce(t, in, keyed(lines[2000:])...)
	out.Until(t, 3*time.Minute, covers(t, inputEnds(t, b, in, len(lines))))
	select {
	case err := <-r.done:
		r.done <- err
		t.Fatalf("the service stopped during the restart: %v", err)
	default:
	}
	if err, _ := r.stop(t); err != nil {
		t.Fatalf("graceful stop after the restart: %v", err)
	}
}
