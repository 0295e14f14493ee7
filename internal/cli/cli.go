// Package cli holds what the two command-line binaries share: the
// subcommand dispatcher with its exit codes, the usage-error sentinel, and
// the replay command with its model configuration file, which the service
// binary (cmd/denoiser) serves and the lab binary (cmd/denoiser-lab) runs
// beside the demo in its tests.
//
// It must not hold model, Kafka or state logic: it parses flags and calls
// the packages that do.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Command is one subcommand's entry point. It parses its own flags from
// args, writes data to stdout (when asked for "-") and messages to stderr.
type Command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// ErrUsage marks an error in how a command was called (exit code 2).
var ErrUsage = errors.New("usage")

// ParseFlags parses args with fs, a flag set of flag.ContinueOnError
// (which has printed the error and the usage), and marks an error in them
// as a usage error (exit code 2); -h is flag.ErrHelp, as fs gives it.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return fmt.Errorf("%s: %w: %w", fs.Name(), err, ErrUsage)
	}
	return err
}

// Main dispatches args to one of commands and returns the process exit
// code: 0 on success (and for -h), 2 for a usage error, 1 for a failure.
// name prefixes the error messages; usage is printed for help and for an
// unknown or missing command.
func Main(ctx context.Context, name, usage string, commands map[string]Command, args []string, stdout, stderr io.Writer) int {
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
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", name, args[0], usage)
		return 2
	}
	err := cmd(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		// The sentinel marks the kind of error; its text adds nothing.
		fmt.Fprintf(stderr, "%s: %s\n", name, strings.TrimSuffix(err.Error(), ": "+ErrUsage.Error()))
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
}
