package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"gopkg.in/yaml.v3"

	"denoiser/consumer"
	"denoiser/input"
	"denoiser/online"
	"denoiser/service"
	"denoiser/snapshot"
)

// setFlags collects repeated --set PATH=VALUE flags.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

// runRun implements
//
//	denoiser run [--config FILE] [--set PATH=VALUE]... [shorthand flags]
//
// It runs the stream service (package service) until SIGINT or SIGTERM,
// then stops gracefully within shutdown_timeout. Configuration: the YAML
// file, then DENOISER_* environment variables, then flags.
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sets setFlags
	configPath := fs.String("config", "", "YAML configuration `file` (see docs/operations.md)")
	fs.Var(&sets, "set", "override one setting, `PATH=VALUE` (repeatable), e.g. --set kafka.batch_timeout=5ms")
	// Shorthand flags for the most used settings: flag name -> path.
	shorthands := map[string]string{}
	for _, f := range []struct{ name, path, usage string }{
		{"brokers", "kafka.brokers", "bootstrap `host:port` list, comma-separated"},
		{"input-topic", "kafka.input_topic", "the `topic` of raw events"},
		{"output-topic", "kafka.output_topic", "the `topic` of scored events"},
		{"group", "kafka.group", "consumer group `id`"},
		{"state-dir", "checkpoint.dir", "Badger state `directory`"},
		{"http", "http.addr", "listen `address` of /metrics, /healthz, /readyz (off: none)"},
		{"log-level", "log.level", "debug, info, warn or error"},
	} {
		fs.String(f.name, "", f.path+": "+f.usage)
		shorthands[f.name] = f.path
	}
	fromSnapshot := fs.String("from-snapshot", "", "start from this snapshot `file` when the state directory holds no checkpoint")
	snapshotDir := fs.String("snapshot-dir", "", "`directory` for live snapshots requested at /snapshot (POST writes one there, GET downloads one)")
	printConfig := fs.Bool("print-config", false, "print the effective configuration as YAML and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: denoiser run [--config FILE] [--set PATH=VALUE]... [flags]\n\n"+
			"Runs the stream service: consumes the input topic as a member of a consumer group,\n"+
			"scores every event and writes it to the output topic, bad records to the dead-letter\n"+
			"topic, with Badger checkpoints and Prometheus metrics. SIGINT/SIGTERM stop it\n"+
			"gracefully. Settings: the file, then DENOISER_* variables (DENOISER_KAFKA_BROKERS for\n"+
			"kafka.brokers), then flags. Settings: %s\n\n", strings.Join(service.Paths(), ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run: unexpected arguments %q: %w", fs.Args(), errUsage)
	}

	cfg, err := service.LoadConfig(*configPath)
	if err != nil {
		return fmt.Errorf("run: %w: %w", err, errUsage)
	}
	unknownEnv, err := cfg.ApplyEnv(os.Environ())
	if err != nil {
		return fmt.Errorf("run: %w: %w", err, errUsage)
	}
	var setErr error
	fs.Visit(func(f *flag.Flag) {
		if path, ok := shorthands[f.Name]; ok {
			setErr = errors.Join(setErr, cfg.Set(path, f.Value.String()))
		}
	})
	for _, s := range sets {
		path, value, ok := strings.Cut(s, "=")
		if !ok {
			setErr = errors.Join(setErr, fmt.Errorf("--set %q: want PATH=VALUE", s))
			continue
		}
		setErr = errors.Join(setErr, cfg.Set(path, value))
	}
	if setErr != nil {
		return fmt.Errorf("run: %w: %w", setErr, errUsage)
	}
	if *printConfig {
		c := cfg.WithDefaults()
		c.Model = c.Model.WithDefaults()
		b, err := yaml.Marshal(c)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		_, err = stdout.Write(b)
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("run: %w: %w", err, errUsage)
	}
	cfg = cfg.WithDefaults()
	log := newLogger(cfg.Log, stderr)
	for _, name := range unknownEnv {
		log.Warn("ignoring an environment variable that names no setting", "variable", name)
	}

	var svcp atomic.Pointer[service.Service]
	opts := service.Options{Logger: log}
	if *fromSnapshot != "" {
		opts.Initial = func(context.Context) (*online.Model, []input.Position, error) {
			s, err := snapshot.ReadFile(*fromSnapshot)
			if err != nil {
				return nil, nil, err
			}
			log.Info("starting from a snapshot", "file", *fromSnapshot, "model_version", s.Model.Version())
			return s.Model, s.Positions, nil
		}
	}
	live, err := snapshot.NewLive(snapshot.LiveOptions{
		Dir: *snapshotDir,
		Contents: func() snapshot.Contents {
			m, ps := svcp.Load().ModelState()
			return snapshot.Contents{Model: m, Positions: ps}
		},
		Submit: func(ctx context.Context, t snapshot.Task) error {
			svc := svcp.Load()
			if svc == nil {
				return service.ErrNotRunning
			}
			return svc.Submit(ctx, func(ctx context.Context, out consumer.Flusher) error { return t(ctx, out) })
		},
	})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer live.Close()
	opts.Handlers = map[string]http.Handler{"/snapshot": live}

	svc, err := service.New(cfg, opts)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	svcp.Store(svc)
	if err := svc.Run(ctx); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}

// newLogger returns the process logger for cfg, writing to w.
func newLogger(cfg service.LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level)) // validated already
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
