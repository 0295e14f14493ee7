// Command denoiser is the streaming label-noise filter: it scores every
// interaction of an event stream with a calibrated reliability.
//
// Subcommands:
//
//	denoiser replay --in FILE --out FILE [--dead-letter FILE] [--truth MODE] [--report FILE.json] [--config FILE]
//	denoiser gen --out FILE --events N --noise RATE --seed S
//	denoiser convert movielens --in u.data --out FILE
//	denoiser run [--config FILE] [--set PATH=VALUE]... [flags]
//	denoiser demo [--in FILE] [--report FILE.json] [--http ADDR]
//	denoiser eval transition|recommend|detect [flags]
//	denoiser snapshot export|import|inspect|diff [flags]
//
// This package wires packages together; it holds no logic of its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// commands maps a subcommand to its entry point. Each parses its own flags
// from args, writes data to stdout (when asked for "-") and messages to
// stderr.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"replay":   runReplay,
	"gen":      runGen,
	"convert":  runConvert,
	"eval":     runEval,
	"run":      runRun,
	"demo":     runDemo,
	"snapshot": runSnapshot,
}

const usage = `usage: denoiser <command> [flags]

commands:
  replay    score a recorded JSON-lines event log, file to file, and report
  gen       write a synthetic click stream with ground truth
  convert   convert a dataset (movielens) into the event format
  eval      reproduce the paper's experiments (transition, recommend, detect)
  run       the stream service: Kafka topic in, scored topic out, checkpoints, metrics
  demo      the stream service against an embedded Kafka broker, with a report
  snapshot  export, import, inspect and diff portable model snapshots

Run "denoiser <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and returns the process exit code: 0 on
// success (and for -h), 2 for a usage error, 1 for a failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "denoiser: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	err := cmd(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "denoiser: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "denoiser: %v\n", err)
		return 1
	}
}

// errUsage marks an error in how a command was called.
var errUsage = errors.New("usage")
