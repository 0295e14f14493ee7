package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"denoiser/internal/cli"
	"denoiser/internal/demo"
	"denoiser/internal/report"
	"denoiser/online"
	"denoiser/service"
)

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
		in         = fs.String("in", "testdata/synthetic-20k.jsonl", "event `file` to produce into the input topic, read as replay reads it (gzip too)")
		format     = fs.String("format", "auto", "input `format`: jsonl (JSON lines), csv (with a header line), or auto: csv for a name ending in .csv or .csv.gz, else jsonl")
		partitions = fs.Int("partitions", 3, "partitions of the input and output topics")
		layout     = fs.String("state-layout", string(online.LayoutMember), "the services' state_layout: member or partition")
		share      = fs.Bool("sharing", true, "with --state-layout partition: the partition models share their item rows through the shared topic (false: each learns alone)")
		shareEvery = fs.Duration("sharing-interval", service.DefaultSharingInterval, "with --sharing: how often the partition models publish and merge")
		shareCount = fs.Int("sharing-events", service.DefaultSharingEvents, "with --sharing: the partition models also publish and merge after this many records of a member")
		shareWait  = fs.Duration("sharing-wait", service.DefaultSharingWait, "with --sharing: how long a member waits after a publication for the shared topic to hand it back before its models step on (negative: never)")
		members    = fs.Int("members", 1, "service instances in the consumer group (with --state-layout partition, each partition's model follows its partition)")
		truthMode  = fs.String("truth", "field", "ground truth for the report: field, dwell:MS or rating:R")
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
	truth, err := report.ParseTruth(*truthMode)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	cfg, err := loadConfig()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	sharing := service.SharingConfig{Interval: *shareEvery, EveryEvents: *shareCount, Wait: *shareWait}
	if !*share {
		sharing.Topic = service.SharingOff
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("demo: --log-level: %w: %w", err, cli.ErrUsage)
	}
	rep, err := demo.Run(ctx, demo.Options{
		Input: *in, Format: *format, Partitions: *partitions, Truth: &truth, HTTPAddr: *httpAddr, StateDir: *stateDir,
		Seed: cfg.Seed, Model: cfg.Model, Fields: cfg.Fields, Members: *members, StateLayout: online.Layout(*layout), Sharing: sharing,
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		Progress: stderr,
	})
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
