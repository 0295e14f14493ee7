package service_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"denoiser/internal/kafkatest"
	"denoiser/online"
	"denoiser/service"
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

// TestRollingDeploy: three members of one group share six partitions, and
// an operator restarts them one after the other (a rolling deploy): each is
// stopped gracefully, the other two take its partitions over, and it comes
// back with the same checkpoint directory and configuration, while events
// keep arriving. Every input offset is scored, and none twice: DESIGN.md §4
// wants nothing already acknowledged to be emitted again.
//
// With state_layout partition, each partition's state follows it through
// the changelog, so every output record is also byte-identical to what a
// model of its partition's own writes (checkPartitionOutputs).
//
// DENOISER_ROLLING_EVENTS sets the number of events (default 30000).
func TestRollingDeploy(t *testing.T) {
	if testing.Short() {
		t.Skip("a rolling deploy of three members: long")
	}
	for _, layout := range []online.Layout{online.LayoutMember, online.LayoutPartition} {
		t.Run(string(layout), func(t *testing.T) { rollingDeploy(t, layout) })
	}
}

func rollingDeploy(t *testing.T, layout online.Layout) {
	n := 30000
	if s := os.Getenv("DENOISER_ROLLING_EVENTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 100 {
			t.Fatalf("DENOISER_ROLLING_EVENTS=%q: want a number of events, at least 100", s)
		}
		n = v
	}
	const partitions, members = 6, 3
	// The producer writes at most 4,000 events/s; a loaded machine writes
	// fewer. The waits for the input and the output grow with n.
	slack := 2*time.Minute + time.Duration(n/1000)*time.Second
	began := time.Now()
	b := kafkatest.New(t)
	in := b.Topic(t, "rolling", partitions)
	msgs := keyed(events(t, n, 9))

	// A tenth of the events is there before the members start; a quarter
	// more may arrive during each restart, the rest once the last member is
	// back. The producer writes a batch every 50ms up to what the current
	// phase allows.
	allowed := make([]int, 0, members+2)
	allowed = append(allowed, n/10)
	for i := range members {
		allowed = append(allowed, n/10+(i+1)*n/4)
	}
	allowed = append(allowed, n)
	var phase, produced atomic.Int64
	producerErr := make(chan error, 1)
	quit := make(chan struct{})
	go func() {
		const batch = 200
		sent := 0
		for sent < n {
			if limit := allowed[phase.Load()]; sent < limit {
				end := min(sent+batch, limit)
				if err := b.ProduceErr(in, msgs[sent:end]...); err != nil {
					producerErr <- err
					return
				}
				sent = end
				produced.Store(int64(sent))
			}
			select {
			case <-quit:
				producerErr <- errors.New("stopped by the end of the test")
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		producerErr <- nil
	}()
	t.Cleanup(func() {
		close(quit)
		select {
		case <-producerErr:
		case <-time.After(time.Minute):
			t.Error("the producer did not stop")
		}
	})

	cfgs := make([]service.Config, members)
	cfgs[0] = testConfig(t, b, in)
	cfgs[0].StateLayout = layout
	cfgs[0].Sharing.Topic = service.SharingOff // each partition's output is its own model's (checkPartitionOutputs)
	for i := 1; i < members; i++ {
		cfgs[i] = cfgs[0]
		cfgs[i].Checkpoint.Dir = t.TempDir()
	}
	// owned reports whether the members named by who, together, own every
	// partition exactly once, each of them some.
	owned := func(rs []*running, who ...int) bool {
		var all []int
		for _, i := range who {
			p, _ := rs[i].svc.Assignment()
			if len(p) == 0 {
				return false
			}
			all = append(all, p...)
		}
		slices.Sort(all)
		return slices.Equal(all, []int{0, 1, 2, 3, 4, 5})
	}
	rs := make([]*running, members)
	for i := range rs {
		rs[i] = start(t, cfgs[i])
	}
	waitFor(t, time.Minute, "the three members split the six partitions", func() bool { return owned(rs, 0, 1, 2) })

	for i := range rs {
		phase.Store(int64(i + 1))
		before, stepStart := produced.Load(), time.Now()
		err, d := rs[i].stop(t)
		if err != nil {
			t.Errorf("member %d's graceful stop: %v", i, err)
		}
		others := slices.DeleteFunc([]int{0, 1, 2}, func(j int) bool { return j == i })
		waitFor(t, time.Minute, fmt.Sprintf("members %v own the partitions of member %d", others, i), func() bool { return owned(rs, others...) })
		handedOver := time.Since(stepStart)
		rs[i] = start(t, cfgs[i])
		waitFor(t, time.Minute, fmt.Sprintf("member %d owns partitions again", i), func() bool { return owned(rs, 0, 1, 2) })
		p, _ := rs[i].svc.Assignment()
		t.Logf("restart of member %d: stopped in %v, partitions handed over after %v, back with %v after %v; %d events produced meanwhile",
			i, d.Round(time.Millisecond), handedOver.Round(time.Millisecond), p, time.Since(stepStart).Round(time.Millisecond), produced.Load()-before)
	}
	if p := produced.Load(); p >= int64(allowed[members]) {
		t.Logf("note: the producer had written all it was allowed (%d) before the last member was back", p)
	}
	phase.Store(members + 1)
	select {
	case err := <-producerErr:
		producerErr <- err // for the cleanup
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(slack):
		t.Fatalf("producing %d events: not done after %v (%d written)", n, slack, produced.Load())
	}

	end := inputEnds(t, b, in, n)
	out := b.NewReader(t, cfgs[0].WithDefaults().Kafka.OutputTopic)
	out.Until(t, time.Minute+slack, covers(t, end))
	t.Logf("every input offset has an output record after %v", time.Since(began).Round(time.Millisecond))
	for i, r := range rs {
		if err, _ := r.stop(t); err != nil {
			t.Errorf("member %d's final graceful stop: %v", i, err)
		}
	}
	// Read whatever else arrived, until nothing has for 2s.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for count, since := -1, time.Now(); time.Since(since) < 2*time.Second; time.Sleep(100 * time.Millisecond) {
		if err := out.Poll(ctx); err != nil && ctx.Err() != nil {
			t.Fatalf("the output keeps growing after 30s (%d records): %v", len(out.Msgs), err)
		}
		if len(out.Msgs) != count {
			count, since = len(out.Msgs), time.Now()
		}
	}

	type position struct {
		partition int
		offset    int64
	}
	// The output is keyed by user, as the input is: the copies of one
	// source position are in one output partition, in the order written.
	first := map[position]kafka.Message{}
	var dups, differ int
	dupsOf := map[int]int{} // by input partition
	var at []string
	for _, m := range out.Msgs {
		p, o := sourceOffset(t, m)
		f, seen := first[position{p, o}]
		if !seen {
			first[position{p, o}] = m
			continue
		}
		dups++
		dupsOf[p]++
		same := bytes.Equal(f.Value, m.Value)
		if !same {
			differ++
		}
		if len(at) < 10 {
			at = append(at, fmt.Sprintf("input %d@%d at output %d@%d and %d@%d (same bytes: %v)", p, o, f.Partition, f.Offset, m.Partition, m.Offset, same))
		}
	}
	var missing []string
	for p := range partitions {
		for o := range end[p] {
			if _, ok := first[position{p, o}]; !ok {
				missing = append(missing, fmt.Sprintf("%d@%d", p, o))
			}
		}
	}
	t.Logf("%d events, %d output records, %d duplicates (by input partition %v), %d of them differ in bytes from the first copy; %v in all",
		n, len(out.Msgs), dups, dupsOf, differ, time.Since(began).Round(time.Millisecond))
	if len(missing) > 0 {
		t.Errorf("%d input offsets without an output record, first %v", len(missing), missing[:min(len(missing), 10)])
	}
	if dups > 0 {
		t.Errorf("%d output records re-emit a source position already in the output (%d of them with other bytes), first:\n%s",
			dups, differ, strings.Join(at, "\n"))
	}
	if layout == online.LayoutPartition && !t.Failed() {
		checkPartitionOutputs(t, b, cfgs[0], out.Msgs, n, nil)
		t.Logf("every output record is byte-identical to its partition's own model")
	}
}
