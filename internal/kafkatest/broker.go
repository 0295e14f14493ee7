package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnvBrokers names the environment variable holding the bootstrap address
// of a real broker ("127.0.0.1:19092").
const EnvBrokers = "KAFKA_BROKERS"

// Broker is a broker for one test.
type Broker struct {
	// Addrs are the bootstrap addresses.
	Addrs []string
	// Real is true for the Apache Kafka named by KAFKA_BROKERS.
	Real bool

	mu      sync.Mutex
	cluster *kfake.Cluster // embedded only; nil while stopped
	port    int
	dir     string
	lock    *os.File
	excl    bool
	stopped bool        // a real broker this test stopped and has not started again
	frozen  atomic.Bool // not answering: the real broker paused, the embedded one swallowing requests
}

// New returns the broker for t: the real one when KAFKA_BROKERS is set, a
// new embedded one otherwise. Everything is released when t ends.
func New(t testing.TB) *Broker { return start(t, false) }

// Exclusive is New for a test that stops or restarts the broker: with a
// real broker it waits until no other test (in any package) uses it.
func Exclusive(t testing.TB) *Broker { return start(t, true) }

func start(t testing.TB, exclusive bool) *Broker {
	t.Helper()
	if addrs := os.Getenv(EnvBrokers); addrs != "" {
		b := &Broker{Addrs: strings.Split(addrs, ","), Real: true, excl: exclusive}
		b.lockShared(t)
		// Registered after the lock's cleanup, so it runs before it: a
		// test that failed with the broker stopped leaves it running.
		t.Cleanup(func() {
			if b.frozen.Load() {
				t.Log("kafkatest: resuming the broker this test left paused")
				b.script(t, "resume")
			}
			if b.stopped {
				t.Log("kafkatest: starting the broker this test left stopped")
				b.script(t, "start")
			}
		})
		return b
	}
	b := &Broker{dir: t.TempDir()}
	b.startEmbedded(t)
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.cluster != nil {
			b.cluster.Close()
			b.cluster = nil
		}
	})
	return b
}

func (b *Broker) startEmbedded(t testing.TB) {
	t.Helper()
	var err error
	var c *kfake.Cluster
	// The port of a stopped broker may take a moment to be free again.
	for attempt := 0; attempt < 50; attempt++ {
		c, err = kfake.NewCluster(
			kfake.NumBrokers(1),
			kfake.Ports(b.port), // 0 the first time: any free port
			kfake.DataDir(b.dir),
			kfake.GroupMinSessionTimeout(time.Second),
		)
		if err == nil || b.port == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("start embedded broker: %v", err)
	}
	// While frozen, every request is taken and never answered: the
	// connections stay open and the client waits, as on a hung broker.
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, b.frozen.Load()
	})
	addrs := c.ListenAddrs()
	_, portStr, _ := strings.Cut(addrs[0], ":")
	b.port, _ = strconv.Atoi(portStr)
	b.mu.Lock()
	b.cluster, b.Addrs = c, addrs
	b.mu.Unlock()
}

// lockShared takes a lock on a file named after the broker address, shared
// or exclusive, and releases it when t ends.
func (b *Broker) lockShared(t testing.TB) {
	t.Helper()
	name := filepath.Join(os.TempDir(), "denoiser-kafkatest-"+strings.NewReplacer(":", "_", ",", "_", "/", "_").Replace(b.Addrs[0])+".lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("open broker lock: %v", err)
	}
	how := syscall.LOCK_SH
	if b.excl {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("lock broker: %v", err)
	}
	b.lock = f
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// Stop stops the broker. Only for an Exclusive broker.
func (b *Broker) Stop(t testing.TB) {
	t.Helper()
	b.needExclusive(t)
	if b.Real {
		b.stopped = true
		b.script(t, "stop")
		return
	}
	b.mu.Lock()
	c := b.cluster
	b.cluster = nil
	b.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Start starts a stopped broker again, with its data. Only for an Exclusive
// broker.
func (b *Broker) Start(t testing.TB) {
	t.Helper()
	b.needExclusive(t)
	if b.Real {
		b.script(t, "start")
		b.stopped = false
		return
	}
	b.startEmbedded(t)
}

// Freeze makes the broker hang: connections stay open, new ones are
// accepted, but no request is answered (a real broker is sent SIGSTOP). Only
// for an Exclusive broker; Thaw undoes it, and so does the end of the test.
func (b *Broker) Freeze(t testing.TB) {
	t.Helper()
	b.needExclusive(t)
	b.setFrozen(t, true)
}

// Thaw makes a frozen broker answer again. Requests it swallowed while
// frozen stay unanswered; clients time out and retry them.
func (b *Broker) Thaw(t testing.TB) {
	t.Helper()
	b.setFrozen(t, false)
}

// setFrozen pauses or resumes the real broker's process, or switches the
// embedded broker's control function.
func (b *Broker) setFrozen(t testing.TB, on bool) {
	t.Helper()
	if b.Real {
		cmd := "resume"
		if on {
			cmd = "pause"
		}
		b.script(t, cmd)
	}
	b.frozen.Store(on)
}

// Restart stops and starts the broker, keeping its data.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	b.Stop(t)
	b.Start(t)
}

func (b *Broker) needExclusive(t testing.TB) {
	t.Helper()
	if b.Real && !b.excl {
		t.Fatal("kafkatest: stopping a shared broker; use Exclusive")
	}
	if b.Real {
		if _, err := findScript(); err != nil {
			t.Skipf("cannot restart the broker at %s: %v", b.Addrs[0], err)
		}
		port := os.Getenv("KAFKA_PORT")
		if port == "" {
			port = "19092"
		}
		if b.Addrs[0] != "127.0.0.1:"+port {
			t.Skipf("cannot restart the broker at %s: scripts/kafka.sh manages 127.0.0.1:%s (set KAFKA_PORT)", b.Addrs[0], port)
		}
	}
}

func (b *Broker) script(t testing.TB, cmd string) {
	t.Helper()
	path, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c := exec.Command(path, cmd)
	c.Stdout, c.Stderr = &out, &out
	start := time.Now()
	if err := c.Run(); err != nil {
		t.Fatalf("scripts/kafka.sh %s: %v\n%s", cmd, err, out.Bytes())
	}
	t.Logf("scripts/kafka.sh %s: %.1fs", cmd, time.Since(start).Seconds())
}

// findScript finds scripts/kafka.sh above the working directory.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "kafka.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/kafka.sh not found above the working directory")
		}
		dir = parent
	}
}

var topicSeq atomic.Uint64

// Topic creates a topic with a name unique to this test run and returns
// the name.
func (b *Broker) Topic(t testing.TB, prefix string, partitions int) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d-%d-%d", prefix, os.Getpid(), time.Now().UnixNano()%1e9, topicSeq.Add(1))
	b.CreateTopic(t, name, partitions)
	return name
}

// CreateTopic creates a topic and waits until every partition is served.
func (b *Broker) CreateTopic(t testing.TB, name string, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(b.addrs()...), Transport: tr}
	for {
		resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
			Topic: name, NumPartitions: partitions, ReplicationFactor: 1,
		}}})
		if err == nil {
			err = resp.Errors[name]
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic %s: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Wait until every partition has a leader that serves it.
	for p := range partitions {
		for {
			resp, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{name: {kafka.LastOffsetOf(p)}}})
			if err == nil && len(resp.Topics[name]) == 1 && resp.Topics[name][0].Error == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("topic %s partition %d not ready: %v", name, p, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// Produce writes msgs to topic, partitioned by key with the Java client's
// murmur2 hash (keyless messages go to random partitions).
func (b *Broker) Produce(t testing.TB, topic string, msgs ...kafka.Message) {
	t.Helper()
	if err := b.ProduceErr(topic, msgs...); err != nil {
		t.Fatal(err)
	}
}

// ProduceErr is Produce for goroutines other than the test's: it returns
// the error.
func (b *Broker) ProduceErr(topic string, msgs ...kafka.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr: kafka.TCP(b.addrs()...), Topic: topic, Transport: tr,
		Balancer: kafka.Murmur2Balancer{}, BatchSize: 1000, BatchTimeout: time.Millisecond,
		RequiredAcks: kafka.RequireAll,
	}
	for len(msgs) > 0 {
		n := min(len(msgs), 5000)
		if err := w.WriteMessages(ctx, msgs[:n]...); err != nil {
			w.Close()
			return fmt.Errorf("produce to %s: %w", topic, err)
		}
		msgs = msgs[n:]
	}
	return w.Close()
}

// Values turns lines into keyless messages.
func Values(lines ...[]byte) []kafka.Message {
	msgs := make([]kafka.Message, len(lines))
	for i, l := range lines {
		msgs[i].Value = l
	}
	return msgs
}

// Reader reads a topic from the start, all partitions.
type Reader struct {
	b     *Broker
	topic string
	tr    *kafka.Transport
	next  map[int]int64
	Msgs  []kafka.Message // everything read so far, per partition in offset order
}

// NewReader returns a Reader of topic; it is closed when t ends.
func (b *Broker) NewReader(t testing.TB, topic string) *Reader {
	r := &Reader{b: b, topic: topic, tr: &kafka.Transport{}, next: map[int]int64{}}
	t.Cleanup(r.tr.CloseIdleConnections)
	return r
}

// Poll reads what is new in every partition, once.
func (r *Reader) Poll(ctx context.Context) error {
	c := &kafka.Client{Addr: kafka.TCP(r.b.addrs()...), Transport: r.tr}
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{r.topic}})
	if err != nil {
		return err
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		return fmt.Errorf("metadata of %s: %+v", r.topic, md.Topics)
	}
	for _, p := range md.Topics[0].Partitions {
		for {
			resp, err := c.Fetch(ctx, &kafka.FetchRequest{
				Topic: r.topic, Partition: p.ID, Offset: r.next[p.ID],
				MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 10 * time.Millisecond,
			})
			if err != nil {
				return err
			}
			if resp.Error != nil {
				return fmt.Errorf("fetch %s/%d: %w", r.topic, p.ID, resp.Error)
			}
			n := 0
			for {
				rec, err := resp.Records.ReadRecord()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
				if rec.Offset < r.next[p.ID] {
					continue
				}
				m := kafka.Message{Topic: r.topic, Partition: p.ID, Offset: rec.Offset, Time: rec.Time}
				m.Key, _ = readBytes(rec.Key)
				m.Value, _ = readBytes(rec.Value)
				for _, h := range rec.Headers {
					m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: bytes.Clone(h.Value)})
				}
				r.Msgs = append(r.Msgs, m)
				r.next[p.ID] = rec.Offset + 1
				n++
			}
			if n == 0 || r.next[p.ID] >= resp.HighWatermark {
				break
			}
		}
	}
	return nil
}

// Until polls until done(r.Msgs) is true, failing t after timeout.
func (r *Reader) Until(t testing.TB, timeout time.Duration, done func([]kafka.Message) bool) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		if err := r.Poll(ctx); err != nil {
			last = err
		}
		if done(r.Msgs) {
			return r.Msgs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("reading %s: condition not met after %v with %d records (last error: %v)", r.topic, timeout, len(r.Msgs), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// AtLeast is a condition for Until: at least n records.
func AtLeast(n int) func([]kafka.Message) bool {
	return func(m []kafka.Message) bool { return len(m) >= n }
}

func (b *Broker) addrs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Addrs
}

func readBytes(v kafka.Bytes) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	defer v.Close()
	out := make([]byte, v.Len())
	_, err := io.ReadFull(v, out)
	return out, err
}

// Header returns the value of header key in m, and whether it is there.
func Header(m kafka.Message, key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// SortByPosition sorts ms by partition, then offset.
func SortByPosition(ms []kafka.Message) {
	slices.SortFunc(ms, func(a, b kafka.Message) int {
		if a.Partition != b.Partition {
			return a.Partition - b.Partition
		}
		return int(a.Offset - b.Offset)
	})
}
