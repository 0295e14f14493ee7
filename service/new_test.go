package service_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/service"
	"denoiser/snapshot"
	"denoiser/state"
)

// TestNewCancelled: once its context ends, New returns promptly with an
// error wrapping context.Canceled, wherever the start is (before it
// begins, in an Initial that waits, reading a snapshot), having closed the
// state (it opens again) and leaving no goroutine behind. It needs no
// broker: New gives up before it reaches Kafka.
func TestNewCancelled(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "start.snap")
	m, err := online.New(online.Config{}.WithDefaults(), online.NewSource(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.WriteFile(snap, snapshot.Contents{Model: m,
		Positions: []input.Position{{Topic: "t", Partition: 0, Offset: 5}}}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		// start cancels ctx at some point of New, through Initial if it
		// returns one.
		start func(cancel context.CancelFunc) service.Initial
	}{
		{"before New", func(cancel context.CancelFunc) service.Initial {
			cancel()
			return nil
		}},
		{"in a waiting Initial", func(cancel context.CancelFunc) service.Initial {
			time.AfterFunc(50*time.Millisecond, cancel)
			return func(ctx context.Context) (*online.Model, []input.Position, error) {
				<-ctx.Done()
				return nil, nil, ctx.Err()
			}
		}},
		{"reading a snapshot", func(cancel context.CancelFunc) service.Initial {
			from := service.FromSnapshot(snap, nil)
			return func(ctx context.Context) (*online.Model, []input.Position, error) {
				cancel()
				return from(ctx)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			cfg := service.Config{
				Kafka:      service.KafkaConfig{Brokers: []string{"127.0.0.1:1"}, InputTopic: "t"},
				Checkpoint: service.CheckpointConfig{Dir: t.TempDir(), NoSync: true},
				HTTP:       service.HTTPConfig{Addr: "127.0.0.1:0"},
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := service.Options{Initial: tc.start(cancel)}
			begin := time.Now()
			svc, err := service.New(ctx, cfg, opts)
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("New took %v after its context ended", took)
			}
			if !errors.Is(err, context.Canceled) {
				if svc != nil {
					svc.Close()
				}
				t.Fatalf("New = %v, want an error wrapping context.Canceled", err)
			}
			if svc != nil {
				t.Fatal("New returned a service with its error")
			}
			st, err := state.Open(cfg.Checkpoint.Dir, state.Options{GCInterval: -1})
			if err != nil {
				t.Fatalf("the state is still held after New failed: %v", err)
			}
			if _, ok, err := st.Load(context.Background()); ok || err != nil {
				t.Errorf("a cancelled start saved a checkpoint: %v %v", ok, err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// failingRegisterer refuses every collector.
type failingRegisterer struct{ prometheus.Registry }

func (*failingRegisterer) Register(prometheus.Collector) error {
	return errors.New("registry refuses")
}

// TestNewFailurePaths: every way New can fail after it opened something
// returns an error (no panic), closes what it opened (the state directory
// opens again) and leaves no goroutine behind. None needs a broker: the
// Kafka clients connect lazily.
func TestNewFailurePaths(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*service.Config, *service.Options)
		want string
	}{
		{"state directory is a file", func(c *service.Config, _ *service.Options) { c.Checkpoint.Dir = notADir }, "state"},
		{"metrics refused", func(_ *service.Config, o *service.Options) { o.Registerer = &failingRegisterer{} }, "registry refuses"},
		{"live snapshot directory is a file", func(_ *service.Config, o *service.Options) {
			o.LiveSnapshots = &service.LiveSnapshotOptions{Dir: notADir}
		}, "snapshot"},
		{"HTTP address taken", func(c *service.Config, _ *service.Options) { c.HTTP.Addr = taken.Addr().String() }, "address already in use"},
		{"HTTP address garbage", func(c *service.Config, _ *service.Options) { c.HTTP.Addr = "garbage" }, "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			cfg := service.Config{
				Kafka:      service.KafkaConfig{Brokers: []string{"127.0.0.1:1"}, InputTopic: "t"},
				Checkpoint: service.CheckpointConfig{Dir: t.TempDir(), NoSync: true},
				HTTP:       service.HTTPConfig{Addr: "127.0.0.1:0"},
			}
			var opts service.Options
			tc.edit(&cfg, &opts)
			if opts.Registerer != nil {
				opts.Gatherer = prometheus.NewRegistry()
			}
			svc, err := service.New(context.Background(), cfg, opts)
			if err == nil {
				svc.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error about %q", err, tc.want)
			}
			if cfg.Checkpoint.Dir != notADir {
				st, err := state.Open(cfg.Checkpoint.Dir, state.Options{NoSync: true})
				if err != nil {
					t.Fatalf("state left locked: %v", err)
				}
				st.Close()
			}
		})
	}
}

// TestNewStateDirHeld: a state directory another process holds (two
// members given the same checkpoint.dir) is refused naming the setting,
// where Badger's own text said only "Cannot acquire directory lock". It
// needs no broker: the state opens before Kafka is reached.
func TestNewStateDirHeld(t *testing.T) {
	dir := t.TempDir()
	held, err := state.Open(dir, state.Options{GCInterval: -1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cfg := service.Config{
		Kafka:      service.KafkaConfig{Brokers: []string{"127.0.0.1:1"}, InputTopic: "t"},
		Checkpoint: service.CheckpointConfig{Dir: dir, NoSync: true},
		HTTP:       service.HTTPConfig{Addr: "127.0.0.1:0"},
	}
	svc, err := service.New(context.Background(), cfg, service.Options{})
	if err == nil {
		svc.Close()
		t.Fatal("New opened a state directory another store holds")
	}
	if !strings.Contains(err.Error(), "checkpoint.dir "+dir) || !strings.Contains(err.Error(), "a state directory of its own") {
		t.Errorf("New: %v, want checkpoint.dir named", err)
	}
}

// TestNewHTTPAddrInUse: a listen address another process has is refused
// naming http.addr (it said only "bind: address already in use").
func TestNewHTTPAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := service.Config{
		Kafka:      service.KafkaConfig{Brokers: []string{"127.0.0.1:1"}, InputTopic: "t"},
		Checkpoint: service.CheckpointConfig{Dir: t.TempDir(), NoSync: true},
		HTTP:       service.HTTPConfig{Addr: ln.Addr().String()},
	}
	svc, err := service.New(context.Background(), cfg, service.Options{})
	if err == nil {
		svc.Close()
		t.Fatal("New listened on an address in use")
	}
	if !strings.Contains(err.Error(), "http.addr "+ln.Addr().String()) {
		t.Errorf("New: %v, want http.addr named", err)
	}
}
