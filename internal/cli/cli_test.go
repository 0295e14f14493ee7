package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestMainUsageErrorMessage: a usage error prints its message, without the
// sentinel's ": usage" tail, and exits with 2.
func TestMainUsageErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code int
		want string
	}{
		{"usage", fmt.Errorf("run: unexpected arguments [\"x\"]: %w", ErrUsage), 2, "denoiser: run: unexpected arguments [\"x\"]\n"},
		{"wrapped usage", fmt.Errorf("run: %w: %w", errors.New("configuration: kafka.input_topic: required"), ErrUsage), 2,
			"denoiser: run: configuration: kafka.input_topic: required\n"},
		{"failure", errors.New("run: broker gone"), 1, "denoiser: run: broker gone\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := func(context.Context, []string, io.Writer, io.Writer) error { return tc.err }
			var stderr bytes.Buffer
			code := Main(context.Background(), "denoiser", "usage\n", map[string]Command{"run": cmd}, []string{"run"}, io.Discard, &stderr)
			if code != tc.code || stderr.String() != tc.want {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// TestPrintFlagsWraps: flag help is wrapped at the width, every flag named.
func TestPrintFlagsWraps(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("set", "", "override one setting, `PATH=VALUE` (repeatable), e.g. --set kafka.batch_timeout=5ms; "+strings.Repeat("more words here ", 10))
	fs.Bool("print-config", false, "print the effective configuration as YAML and exit")
	fs.Int("n", 3, "a number")
	var b bytes.Buffer
	PrintFlags(&b, fs, 80)
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if len(line) > 80 {
			t.Errorf("line longer than 80: %q", line)
		}
	}
	for _, want := range []string{"--set PATH=VALUE", "--print-config", "--n int", "(default 3)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestDefaultDeadLetter: replay's dead-letter file beside --out, compressed
// as --out is, and the null device for the null device.
func TestDefaultDeadLetter(t *testing.T) {
	for out, want := range map[string]string{
		"scored.jsonl":    "scored.dead-letter.jsonl",
		"dir.v2/scored":   "dir.v2/scored.dead-letter.jsonl",
		"scored.jsonl.gz": "scored.dead-letter.jsonl.gz",
		"scored.gz":       "scored.dead-letter.jsonl.gz",
		"/dev/null":       "/dev/null",
		"/tmp/a.b.csv":    "/tmp/a.b.dead-letter.jsonl",
	} {
		if got := defaultDeadLetter(out); got != want {
			t.Errorf("--out %s: dead letters to %s, want %s", out, got, want)
		}
	}
}

// TestParseFlagsUsage: an unknown flag or a bad value is a usage error
// (exit 2), -h is help (exit 0), and good flags parse.
func TestParseFlagsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{{[]string{"--bogus"}, 2}, {[]string{"--n", "x"}, 2}, {[]string{"-h"}, 0}, {[]string{"--n", "3"}, 0}} {
		cmd := func(_ context.Context, args []string, _, stderr io.Writer) error {
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			fs.SetOutput(stderr)
			fs.Int("n", 1, "a count")
			return ParseFlags(fs, args)
		}
		var stderr bytes.Buffer
		if code := Main(context.Background(), "denoiser", "usage\n", map[string]Command{"run": cmd}, append([]string{"run"}, tc.args...), io.Discard, &stderr); code != tc.code {
			t.Errorf("run %q: exit %d, want %d\n%s", tc.args, code, tc.code, stderr.String())
		}
	}
}
