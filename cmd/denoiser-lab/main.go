// Command denoiser-lab is the laboratory beside the denoiser service: the
// demo (the stream service against an embedded Kafka broker), the paper's
// experiments, the synthetic stream generator and dataset converters.
//
// Subcommands:
//
//	denoiser-lab demo [--in FILE] [--report FILE.json] [--http ADDR] [--seed N]
//	denoiser-lab eval transition|recommend|detect [flags]
//	denoiser-lab gen --out FILE --events N --noise RATE --seed S
//	denoiser-lab convert movielens --in u.data|ratings.csv --out FILE
//
// It is a binary of its own so that the service binary (cmd/denoiser)
// links neither gonum/plot and its fonts nor the embedded broker. This
// package wires packages together; it holds no logic of its own.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"denoiser/internal/cli"
)

// commands maps a subcommand to its entry point.
var commands = map[string]cli.Command{
	"demo":    runDemo,
	"eval":    runEval,
	"gen":     runGen,
	"convert": runConvert,
	"version": cli.Version,
}

const usage = `usage: denoiser-lab <command> [flags]

commands:
  demo      the stream service against an embedded Kafka broker, with a report
  eval      reproduce the paper's experiments (transition, recommend, detect)
  gen       write a synthetic click stream with ground truth
  convert   convert a dataset (movielens) into the event format
  version   print the commit and Go version this binary was built from

Run "denoiser-lab <command> -h" for a command's flags. The service itself
(run, replay, snapshot) is the binary denoiser.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Main(ctx, "denoiser-lab", usage, commands, args, stdout, stderr)
}
