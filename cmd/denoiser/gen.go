package main

import (
	"context"
	"denoiser/internal/atomicfile"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"denoiser/internal/movielens"
	"denoiser/internal/synth"
)

// runGen implements
//
//	denoiser gen --out FILE --events N --noise RATE --seed S [--users U --items I --topics K ...]
//
// It writes a synthetic click stream with ground truth (package synth) to
// FILE atomically, or to stdout when FILE is "-".
func runGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		out       = fs.String("out", "", "output `file` of JSON-lines events (required; - for stdout)")
		events    = fs.Int("events", 200_000, "number of events")
		noise     = fs.Float64("noise", 0.2, "share of events that are noise, in [0, 1)")
		seed      = fs.Uint64("seed", 1, "random seed; the same flags give a byte-identical file")
		users     = fs.Int("users", 0, "number of users (0: max(20, events/100))")
		items     = fs.Int("items", 0, "number of items (0: max(events/200, min(events/20, 500), 50))")
		topics    = fs.Int("topics", 0, "number of latent topics (0: items/100 clamped to [4, 16])")
		clickbait = fs.Int("clickbait-items", 0, "size of the clickbait set (0: max(3, items/20))")
		overlap   = fs.Float64("overlap", synth.DefaultOverlap, "share of genuine clicks with a short dwell and of noisy clicks with a long one, in [0, 0.5]")
		session   = fs.Float64("session-mean", synth.DefaultSessionMean, "mean clicks per session")
		epoch     = fs.Int64("epoch", synth.DefaultEpochMS, "unix `ms` of the start of the stream")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: denoiser gen --out FILE [--events N] [--noise RATE] [--seed S] [flags]\n\n"+
			"Writes a synthetic click/dwell stream in which every event carries its ground truth.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("gen: unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return errors.New("gen: --out is required")
	}
	cfg := synth.Config{
		Events:         *events,
		Noise:          *noise,
		Seed:           *seed,
		Users:          *users,
		Items:          *items,
		Topics:         *topics,
		ClickbaitItems: *clickbait,
		Overlap:        *overlap,
		SessionMean:    *session,
		EpochMS:        *epoch,
	}
	if *overlap == 0 {
		cfg.Overlap = -1 // Config's zero value means the default; negative means none
	}
	if err := cfg.Resolve().Validate(); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	var st synth.Stats
	err := writeOutput(*out, stdout, func(w io.Writer) error {
		var err error
		st, err = synth.Write(ctx, w, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	fmt.Fprintf(stderr, "gen: wrote %s: %v\n", *out, st)
	return nil
}

// runConvert implements
//
//	denoiser convert movielens --in u.data --out FILE
//
// It converts a MovieLens rating file into the event format (package
// movielens), sorted by (ts, user, item), writing FILE atomically or stdout
// when FILE is "-".
func runConvert(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: denoiser convert movielens --in u.data --out FILE\n\n"+
			"Converts MovieLens ratings (user item rating unix_seconds per line) into events:\n"+
			"event \"rating\", rating kept, ts in ms, no truth field, sorted by (ts, user, item).\n\n")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return errors.New("convert: missing format (movielens)")
		}
		return flag.ErrHelp
	}
	if args[0] != "movielens" {
		usage(stderr)
		return fmt.Errorf("convert: unknown format %q (want movielens)", args[0])
	}
	fs := flag.NewFlagSet("convert movielens", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "input `file` in u.data format (required; - for stdin)")
	out := fs.String("out", "", "output `file` of JSON-lines events (required; - for stdout)")
	fs.Usage = func() {
		usage(fs.Output())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("convert: unexpected arguments %q", fs.Args())
	}
	if *in == "" || *out == "" {
		return errors.New("convert: --in and --out are required")
	}
	var r io.Reader = os.Stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		defer f.Close()
		r = f
	}
	var st movielens.Stats
	err := writeOutput(*out, stdout, func(w io.Writer) error {
		var err error
		st, err = movielens.Convert(ctx, r, w)
		return err
	})
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	fmt.Fprintf(stderr, "convert: wrote %s: %v\n", *out, st)
	return nil
}

// writeOutput runs write against stdout when path is "-", and otherwise
// against a temporary file beside path that is synced and renamed over path
// only when write succeeded: readers see the old file or the whole new one.
func writeOutput(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "-" {
		return write(stdout)
	}
	return atomicfile.WriteFile(path, write)
}
