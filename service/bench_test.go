package service_test

import (
	"context"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"denoiser/internal/kafkatest"
	"denoiser/service"
)

// BenchmarkPipeline measures, against the same broker and the same input
// (KAFKA_BROKERS, or the embedded broker), the events/s of the denoiser
// pipeline (consumer group -> decode -> model -> scored topic, default
// configuration, checkpoints included) and of a pass-through that only
// consumes and produces with kafka-go (no decoding, no model), and reports
// their ratio. Each is timed from its first record read to its last record
// handed to the output (the pass-through: acknowledged; the service: the
// model loop done, its output at most one bounded batch behind).
//
//	go test ./service -run '^$' -bench Pipeline -benchtime 1x
func BenchmarkPipeline(b *testing.B) {
	const n = 100_000
	br := kafkatest.New(b)
	in := br.Topic(b, "bench", 3)
	lines := events(b, n, 5)
	br.Produce(b, in, keyed(lines)...)

	var pt, dn, ptCPU, dnCPU float64
	for i := 0; i < b.N; i++ {
		// Each arm runs under a profiler label that the goroutines it
		// starts (kafka-go's connections included) inherit, so that
		// -cpuprofile splits them: go tool pprof -tagfocus arm=denoiser.
		var e float64
		var c time.Duration
		pprof.Do(context.Background(), pprof.Labels("arm", "pass-through"), func(context.Context) {
			e, c = passThrough(b, br, in, n)
		})
		pt, ptCPU = pt+e, ptCPU+c.Seconds()
		pprof.Do(context.Background(), pprof.Labels("arm", "denoiser"), func(context.Context) {
			e, c = denoiserRun(b, br, in, n)
		})
		dn, dnCPU = dn+e, dnCPU+c.Seconds()
	}
	k := float64(b.N)
	pt, dn = pt/k, dn/k
	b.ReportMetric(pt, "passthrough-events/s")
	b.ReportMetric(dn, "denoiser-events/s")
	b.ReportMetric(dn/pt, "ratio")
	// CPU of this process per event over the same timed windows (the
	// embedded broker's included, a real broker's not): what decides the
	// ratio when CPU is the limit.
	b.ReportMetric(1e6*ptCPU/k/n, "passthrough-cpu-µs/event")
	b.ReportMetric(1e6*dnCPU/k/n, "denoiser-cpu-µs/event")
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// passThrough consumes n records of in with a kafka-go consumer-group
// Reader and produces them to a new topic with a kafka-go Writer, in
// batches; it returns events/s and the CPU time of the timed window.
func passThrough(b *testing.B, br *kafkatest.Broker, in string, n int) (float64, time.Duration) {
	b.Helper()
	out := br.Topic(b, "bench-pt-out", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: br.Addrs, GroupID: out + "-g", Topic: in, MinBytes: 1, MaxBytes: 1 << 20,
		MaxWait: 100 * time.Millisecond, StartOffset: kafka.FirstOffset, QueueCapacity: 1000,
	})
	defer r.Close()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr: kafka.TCP(br.Addrs...), Topic: out, Transport: tr, Balancer: kafka.Murmur2Balancer{},
		BatchSize: 1000, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll,
	}
	defer w.Close()
	batch := make([]kafka.Message, 0, 1000)
	var start time.Time
	var cpu0 time.Duration
	for done := 0; done < n; {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			b.Fatalf("pass-through fetch: %v", err)
		}
		if start.IsZero() {
			start, cpu0 = time.Now(), cpuTime()
		}
		batch = append(batch, kafka.Message{Key: m.Key, Value: m.Value, Headers: m.Headers})
		if len(batch) == cap(batch) || done+len(batch) == n {
			if err := w.WriteMessages(ctx, batch...); err != nil {
				b.Fatalf("pass-through write: %v", err)
			}
			done += len(batch)
			batch = batch[:0]
		}
	}
	evps, cpu := float64(n)/time.Since(start).Seconds(), cpuTime()-cpu0
	b.Logf("pass-through: %d events, %.0f events/s, %.1f CPU-µs/event", n, evps, 1e6*cpu.Seconds()/float64(n))
	return evps, cpu
}

// denoiserRun runs the service over n records of in with its default
// configuration (new group, new state) and returns events/s and the CPU
// time of the timed window.
func denoiserRun(b *testing.B, br *kafkatest.Broker, in string, n int) (float64, time.Duration) {
	b.Helper()
	out := br.Topic(b, "bench-dn-out", 3)
	br.CreateTopic(b, out+".dead", 1)
	cfg := service.Config{
		Kafka: service.KafkaConfig{
			Brokers: br.Addrs, InputTopic: in, Group: out + "-g", OutputTopic: out, DeadLetterTopic: out + ".dead",
			SourceConfig: service.SourceConfig{SessionTimeout: 6 * time.Second},
		},
		Checkpoint: service.CheckpointConfig{Dir: b.TempDir()},
		HTTP:       service.HTTPConfig{Addr: service.HTTPOff},
	}
	reg := prometheus.NewRegistry()
	svc, err := service.New(context.Background(), cfg, service.Options{Registerer: reg, Gatherer: reg})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var start time.Time
	var cpu0 time.Duration
	deadline := time.Now().Add(5 * time.Minute)
	for {
		p := svc.Processed()
		if p > 0 && start.IsZero() {
			start, cpu0 = time.Now(), cpuTime()
		}
		if p >= uint64(n) {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			b.Fatalf("denoiser: %d of %d after 5 minutes: %v", p, n, <-done)
		}
		time.Sleep(time.Millisecond)
	}
	took, cpu := time.Since(start), cpuTime()-cpu0
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("denoiser stop: %v", err)
	}
	evps := float64(n) / took.Seconds()
	b.Logf("denoiser: %d events, %.0f events/s, %.1f CPU-µs/event", n, evps, 1e6*cpu.Seconds()/float64(n))
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "denoiser_checkpoint_pause_seconds", "denoiser_checkpoint_duration_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			b.Logf("%s: %d, mean %.2f ms", mf.GetName(), h.GetSampleCount(), 1e3*h.GetSampleSum()/float64(max(h.GetSampleCount(), 1)))
		case "denoiser_checkpoint_bytes":
			b.Logf("%s: %.0f", mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return evps, cpu
}
