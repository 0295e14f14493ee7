package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"denoiser/internal/cli"
	"denoiser/internal/demo"
	"denoiser/internal/report"
	"denoiser/online"
	"denoiser/service"
)

// defaultDemoInput is --in's default: the shipped log, relative to the
// repository root (it is not embedded in the binary).
const defaultDemoInput = "testdata/synthetic-20k.jsonl"

// runDemo implements
//
//	denoiser-lab demo [--in FILE] [--format jsonl|csv|auto] [--partitions N] [--members N] [--state-layout L] [--sharing=BOOL] [--truth MODE] [--report FILE.json] [--http ADDR] [--config FILE] [--log-level LEVEL]
//
// It runs the stream service against an embedded Kafka broker (package
// demo) and prints the report.
func runDemo(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		in         = fs.String("in", defaultDemoInput, "event `file` to produce into the input topic, read as replay reads it (gzip too); the default is relative to the repository root")
		format     = fs.String("format", "auto", "input `format`: jsonl (JSON lines), csv (with a header line), or auto: csv for a name ending in .csv or .csv.gz, else jsonl")
		partitions = fs.Int("partitions", 3, "partitions of the input and output topics, at least 1 and at least --members")
		layout     = fs.String("state-layout", string(online.LayoutMember), "the services' state_layout: member or partition")
		share      = fs.Bool("sharing", true, "with --state-layout partition: the partition models share their item rows through the shared topic (false: each learns alone)")
		shareEvery = fs.Duration("sharing-interval", service.DefaultSharingInterval, "with --sharing: how often the partition models publish and merge")
		shareCount = fs.Int("sharing-events", service.DefaultSharingEvents, "with --sharing: the partition models also publish and merge after this many records of a member")
		shareWait  = fs.Duration("sharing-wait", service.DefaultSharingWait, "with --sharing: how long a member waits after a publication for the shared topic to hand it back before its models step on (negative: never)")
		members    = fs.Int("members", 1, "service instances in the consumer group, from 1 to --partitions (with --state-layout partition, each partition's model follows its partition)")
		truthMode  = fs.String("truth", "field", "ground truth for the report: field, dwell:MS, rating:R or none (evaluate nothing)")
		reportPath = fs.String("report", "", "write the JSON report (the fields of replay's) to `file`")
		httpAddr   = fs.String("http", service.DefaultHTTPAddr, "listen `address` of /metrics, /healthz, /readyz while the demo runs (off: none)")
		loadConfig = cli.ConfigFlags(fs, "demo", stderr)
		stateDir   = fs.String("state-dir", "", "Badger state `directory`, new or empty (default: a temporary one)")
		logLevel   = fs.String("log-level", "warn", "log level of the service: debug, info, warn or error")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: denoiser-lab demo [flags]\n\n"+
			"Starts an embedded Kafka broker, produces the event log into a topic, runs the\n"+
			"stream service (denoiser run) as a consumer-group member, reads the scored topic\n"+
			"back and prints the report. Needs nothing but this binary.\n\n")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("demo: unexpected arguments %q: %w", fs.Args(), cli.ErrUsage)
	}
	// Every flag is checked before anything starts; a wrong one is a
	// usage error. demo.Options takes 0 as a default: given here, it is
	// refused.
	for _, f := range []struct {
		name  string
		value int
	}{{"members", *members}, {"partitions", *partitions}, {"sharing-events", *shareCount}} {
		if f.value < 1 {
			return fmt.Errorf("demo: --%s %d: want at least 1: %w", f.name, f.value, cli.ErrUsage)
		}
	}
	if *shareEvery <= 0 {
		return fmt.Errorf("demo: --sharing-interval %v: want a positive duration: %w", *shareEvery, cli.ErrUsage)
	}
	truth, err := report.ParseTruth(*truthMode)
	if err != nil {
		return fmt.Errorf("demo: --truth: %w: %w", err, cli.ErrUsage)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("demo: --log-level %q: use debug, info, warn or error: %w", *logLevel, cli.ErrUsage)
	}
	if *reportPath != "" {
		if fi, err := os.Stat(filepath.Dir(*reportPath)); err != nil || !fi.IsDir() {
			return fmt.Errorf("demo: --report %s: its directory does not exist: %w", *reportPath, cli.ErrUsage)
		}
	}
	cfg, err := loadConfig()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	sharing := service.SharingConfig{Interval: *shareEvery, EveryEvents: *shareCount, Wait: *shareWait}
	if !*share {
		sharing.Topic = service.SharingOff
	}
	opts := demo.Options{
		Input: *in, Format: *format, Partitions: *partitions, Truth: &truth, HTTPAddr: *httpAddr, StateDir: *stateDir,
		Seed: cfg.Seed, Model: cfg.Model, Fields: cfg.Fields, Members: *members, StateLayout: online.Layout(*layout), Sharing: sharing,
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		Progress: stderr,
	}
	if err := opts.Validate(); err != nil {
		if !given(fs, "in") && errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("demo: %s not found: run from the repository root or pass --in FILE: %w", defaultDemoInput, cli.ErrUsage)
		}
		return fmt.Errorf("demo: %w: %w", err, cli.ErrUsage)
	}
	rep, err := demo.Run(ctx, opts)
	if err != nil {
		return err
	}
	if *reportPath != "" {
		if err := rep.WriteFile(*reportPath); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		fmt.Fprintf(stderr, "demo: report written to %s\n", *reportPath)
	}
	return rep.PrintAs(stderr, "demo")
}

// given reports whether the flag name was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
