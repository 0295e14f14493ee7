package main

import (
	"context"
	command "denoiser/internal/cli"
	"flag"
	"fmt"
	"io"
	"strings"

	"denoiser/service"
)

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
	var sets command.SetFlags
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
		{"snapshot-dir", "http.snapshot_dir", "`directory` for live snapshots requested at /snapshot (POST writes one there, GET downloads one)"},
		{"log-level", "log.level", "debug, info, warn or error"},
	} {
		fs.String(f.name, "", f.path+": "+f.usage)
		shorthands[f.name] = f.path
	}
	fromSnapshot := fs.String("from-snapshot", "", "start from this snapshot `file` when the state directory holds no checkpoint (its model keeps the configuration it was made with)")
	printConfig := fs.Bool("print-config", false, "print the effective configuration as YAML and exit")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, "usage: denoiser run [--config FILE] [--set PATH=VALUE]... [flags]\n\n")
		fmt.Fprintln(w, command.Wrap("Runs the stream service: consumes the input topic as a member of a consumer group, "+
			"scores every event and writes it to the output topic, bad records to the dead-letter topic, "+
			"with Badger checkpoints and Prometheus metrics. SIGINT/SIGTERM stop it gracefully.", command.HelpWidth, ""))
		fmt.Fprintln(w)
		fmt.Fprintln(w, command.Wrap("Settings come from the file, then DENOISER_* variables (DENOISER_KAFKA_BROKERS for "+
			"kafka.brokers), then flags; docs/operations.md describes each. The settings:", command.HelpWidth, ""))
		fmt.Fprintln(w, command.Wrap(strings.Join(service.Paths(), ", "), command.HelpWidth, "  "))
		fmt.Fprint(w, "\nflags:\n")
		command.PrintFlags(w, fs, command.HelpWidth)
	}
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run: unexpected arguments %q: %w", fs.Args(), errUsage)
	}

	flags := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		if path, ok := shorthands[f.Name]; ok {
			flags[path] = f.Value.String()
		}
	})
	cfg, unknownEnv, err := loadLayers("run", *configPath, sets, flags)
	if err != nil {
		return err
	}
	if *printConfig {
		if len(unknownEnv) > 0 { // what a run would warn of (below)
			fmt.Fprintf(stderr, "run: warning: ignored: %s\n", command.UnknownEnv(unknownEnv))
		}
		b, err := cfg.EffectiveYAML()
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if _, err = stdout.Write(b); err != nil {
			return err
		}
		// Printed, not refused: the defaults alone lack the brokers and
		// the input topic, and printing them is what the flag is for.
		if err := cfg.Validate(); err != nil {
			fmt.Fprintf(stderr, "run: warning: this configuration would not start: %v\n", err)
		}
		return nil
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("run: %w%s: %w", err, ignoredEnv(unknownEnv), errUsage)
	}
	log := service.NewLogger(cfg.Log, stderr)
	for _, name := range unknownEnv {
		attrs := []any{"variable", name}
		if near := service.NearestEnv(name); near != "" {
			attrs = append(attrs, "did_you_mean", near)
		}
		log.Warn("ignoring an environment variable that names no setting", attrs...)
	}

	opts := service.Options{Logger: log}
	if *fromSnapshot != "" {
		opts.Initial = service.FromSnapshot(*fromSnapshot, log)
	}
	opts.LiveSnapshots = &service.LiveSnapshotOptions{Dir: cfg.HTTP.SnapshotDir}

	svc, err := service.New(ctx, cfg, opts)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if err := svc.Run(ctx); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}
