package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"denoiser/internal/atomicfile"
	command "denoiser/internal/cli"
	"denoiser/service"
)

// runSharedLog implements
//
//	denoiser shared-log [--config FILE] [--set PATH=VALUE]... --out FILE
//
// It copies what the shared topic of `denoiser run`'s configuration holds
// (sharing.topic, state_layout partition) to a file, for `denoiser replay
// --partition N --shared FILE` (service.DumpShared).
func runSharedLog(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("shared-log", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sets command.SetFlags
	configPath := fs.String("config", "", "YAML configuration `file` of denoiser run: its brokers and shared topic")
	fs.Var(&sets, "set", "override one setting, `PATH=VALUE` (repeatable)")
	out := fs.String("out", "", "write the records to this `file` as JSON lines, - for standard output (required)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, "usage: denoiser shared-log [--config FILE] [--set PATH=VALUE]... --out FILE\n\n")
		fmt.Fprintln(w, command.Wrap("Copies every record the shared topic holds now (the deltas of the shared "+
			"parameters and where each partition model merged them, state_layout partition) to a file. "+
			"denoiser replay --partition N --shared FILE then merges what partition N's live model merged, "+
			"where it merged it, and reproduces its scores. Take it within sharing.retention (1 h by default).", command.HelpWidth, ""))
		fmt.Fprint(w, "\nflags:\n")
		command.PrintFlags(w, fs, command.HelpWidth)
	}
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("shared-log: unexpected arguments %q: %w", fs.Args(), errUsage)
	case *out == "":
		return fmt.Errorf("shared-log: --out is required: %w", errUsage)
	}
	cfg, unknownEnv, err := loadLayers("shared-log", *configPath, sets, nil)
	if err != nil {
		return err
	}
	if len(unknownEnv) > 0 {
		fmt.Fprintf(stderr, "shared-log: ignoring %s\n", command.UnknownEnv(unknownEnv))
	}
	if err := service.CheckSharedLog(cfg); err != nil {
		return fmt.Errorf("shared-log: %w: %w", err, errUsage)
	}
	n := 0
	err = atomicfile.WriteFile(*out, func(w io.Writer) error {
		var err error
		n, err = service.DumpShared(ctx, cfg, w)
		return err
	})
	if err != nil {
		return fmt.Errorf("shared-log: %w", err)
	}
	fmt.Fprintf(stderr, "shared-log: wrote %d records of %s to %s\n", n, cfg.WithDefaults().Sharing.Topic, *out)
	return nil
}
