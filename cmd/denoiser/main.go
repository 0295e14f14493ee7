// Command denoiser is the streaming label-noise filter: it scores every
// interaction of an event stream with a calibrated reliability.
//
// Subcommands:
//
//	denoiser run [--config FILE] [--set PATH=VALUE]... [flags]
//	denoiser replay --in FILE --out FILE [--dead-letter FILE] [--truth MODE] [--report FILE.json] [--passes N] [--partition N [--shared FILE [--first-offset N]]] [--config FILE] [--seed N]
//	denoiser snapshot export|import|inspect|diff [flags]
//	denoiser shared-log [--config FILE] [--set PATH=VALUE]... --out FILE
//	denoiser topics [--config FILE] [--set PATH=VALUE]... [--brokers B] [--input-topic T] [--partitions N]
//
// The lab (demo, eval, gen, convert) is the separate binary
// cmd/denoiser-lab, so that this one links neither plotting nor the
// embedded broker. This package wires packages together; it holds no logic
// of its own.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	command "denoiser/internal/cli"
	"denoiser/service"
)

// commands maps a subcommand to its entry point.
var commands = map[string]command.Command{
	"run":        runRun,
	"replay":     command.Replay,
	"shared-log": runSharedLog,
	"snapshot":   runSnapshot,
	"topics":     runTopics,
	"version":    command.Version,
}

const usage = `usage: denoiser <command> [flags]

commands:
  run         the stream service: Kafka topic in, scored topic out, checkpoints, metrics
  replay      score a recorded JSON-lines event log, file to file, and report
  snapshot    export, import, inspect and diff portable model snapshots
  topics      create the input, output and dead-letter topics run needs, where missing
  shared-log  copy the shared topic (the merges of state_layout partition) to a file, for replay --shared
  version     print the commit and Go version this binary was built from

Run "denoiser <command> -h" for a command's flags. The demo and the
evaluation lab are the separate binary denoiser-lab (make demo builds it).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command.Main(ctx, "denoiser", usage, commands, args, stdout, stderr)
}

// errUsage marks an error in how a command was called.
var errUsage = command.ErrUsage

// loadLayers loads the service's configuration as the command name reads
// it: the file, DENOISER_* variables, the shorthand flags (paths to
// values) and --set; errors are usage errors.
func loadLayers(name, configPath string, sets command.SetFlags, flags map[string]string) (service.Config, []string, error) {
	if err := command.CheckSets(sets); err != nil {
		return service.Config{}, nil, fmt.Errorf("%s: %w: %w", name, err, errUsage)
	}
	cfg, unknownEnv, err := service.Layers{File: configPath, Environ: os.Environ(), Flags: flags, Sets: sets}.Load()
	if err != nil {
		return cfg, unknownEnv, fmt.Errorf("%s: %w%s: %w", name, err, ignoredEnv(unknownEnv), errUsage)
	}
	return cfg, unknownEnv, nil
}

// ignoredEnv is what an error adds of the DENOISER_* variables that named
// no setting, "" for none: a misspelt variable is often why a setting is
// missing or wrong, so the refusal names it, not only a later warning.
func ignoredEnv(unknownEnv []string) string {
	if len(unknownEnv) == 0 {
		return ""
	}
	return " (ignored: " + command.UnknownEnv(unknownEnv) + ")"
}
