package main

import (
	"context"
	"denoiser/internal/atomicfile"
	"denoiser/internal/cli"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"denoiser/internal/movielens"
	"denoiser/internal/synth"
)

// runGen implements
//
//	denoiser-lab gen --out FILE --events N --noise RATE --seed S [--users U --items I --topics K ...]
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
		dwell     = fs.Float64("dwell-share", 1, "share of events that carry dwell_ms, in [0, 1]")
		profile   = fs.String("profile", synth.ProfileV1, "generative model: v1 (clicks, three noise kinds) or v2 (event types, trending, bots, bounce chains, purchase-then-return; docs/design/generator.md)")
		mix       = fs.String("mix", "", "v2: noise shares, e.g. misclick=0.15,clickbait=0.15,curiosity=0.15,trending=0.2,bounce=0.25,purchase-return=0.1 (normalised; empty: these)")
		bots      = fs.Float64("bot-users", synth.DefaultBotUsers, "v2: share of users that are bots")
		botNoise  = fs.Float64("bot-noise", synth.DefaultBotNoise, "v2: share of a bot's events that are noise")
		lowq      = fs.Float64("low-quality-users", synth.DefaultLowQualityUsers, "v2: share of users that are low-quality humans")
		lowqNoise = fs.Float64("low-quality-noise", synth.DefaultLowQualityNoise, "v2: share of a low-quality user's events that are noise")
		trendN    = fs.Int("trending-items", synth.DefaultTrendingItems, "v2: items in the trending slot")
		trendP    = fs.Duration("trending-period", time.Duration(synth.DefaultTrendingPeriodMS)*time.Millisecond, "v2: stream time before the trending slot rotates")
		bounce    = fs.Float64("bounce-mean", synth.DefaultBounceMean, "v2: mean events of a bounce chain (>= 2)")
		retDelay  = fs.Duration("return-delay", time.Duration(synth.DefaultReturnDelayMS)*time.Millisecond, "v2: mean delay from a purchase to its return")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: denoiser-lab gen --out FILE [--events N] [--noise RATE] [--seed S] [flags]\n\n"+
			"Writes a synthetic click/dwell stream in which every event carries its ground truth.\n\n")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("gen: unexpected arguments %q: %w", fs.Args(), cli.ErrUsage)
	}
	if *out == "" {
		return fmt.Errorf("gen: --out is required: %w", cli.ErrUsage)
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
	// Config's zero value means the default; negative means none.
	zero := func(x float64) float64 {
		if x == 0 {
			return -1
		}
		return x
	}
	cfg.Overlap = zero(*overlap)
	cfg.DwellShare = zero(*dwell)
	cfg.Profile = *profile
	cfg.V2 = synth.V2Config{
		BotUsers: zero(*bots), BotNoise: zero(*botNoise), LowQualityUsers: zero(*lowq), LowQualityNoise: zero(*lowqNoise),
		TrendingItems: *trendN, TrendingPeriodMS: trendP.Milliseconds(), BounceMean: *bounce, ReturnDelayMS: retDelay.Milliseconds(),
	}
	// A configuration synth refuses is the flags' values: a usage error.
	if err := parseMix(*mix, &cfg.V2); err != nil {
		return fmt.Errorf("gen: %w: %w", err, cli.ErrUsage)
	}
	if err := cfg.Resolve().Validate(); err != nil {
		return fmt.Errorf("gen: %w: %w", err, cli.ErrUsage)
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

// parseMix reads --mix, "name=share,..." into v's noise shares; a share
// of 0 means none.
func parseMix(s string, v *synth.V2Config) error {
	if s == "" {
		return nil
	}
	fields := map[string]*float64{
		"misclick": &v.Misclick, "clickbait": &v.Clickbait, "curiosity": &v.Curiosity,
		"trending": &v.Trending, "bounce": &v.Bounce, "purchase-return": &v.PurchaseReturn,
	}
	for _, kv := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		p := fields[name]
		if !ok || p == nil {
			return fmt.Errorf("--mix: %q is not name=share (names: misclick, clickbait, curiosity, trending, bounce, purchase-return)", kv)
		}
		x, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return fmt.Errorf("--mix: %s: %w", name, err)
		}
		if x == 0 {
			x = -1 // V2Config: negative means none
		}
		*p = x
	}
	return nil
}

// runConvert implements
//
//	denoiser-lab convert movielens --in u.data|ratings.csv --out FILE
//
// It converts a MovieLens rating file (u.data, or a ratings.csv with its
// header) into the event format (package
// movielens), sorted by (ts, user, item), writing FILE atomically or stdout
// when FILE is "-".
func runConvert(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: denoiser-lab convert movielens --in u.data|ratings.csv --out FILE\n\n"+
			"Converts MovieLens ratings into events: u.data (user item rating unix_seconds per line)\n"+
			"or ratings.csv (header userId,movieId,rating,timestamp; half-star ratings kept as they are):\n"+
			"event \"rating\", rating kept, ts in ms, no truth field, sorted by (ts, user, item).\n\n")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return fmt.Errorf("convert: missing format (movielens): %w", cli.ErrUsage)
		}
		return flag.ErrHelp
	}
	if args[0] != "movielens" {
		usage(stderr)
		return fmt.Errorf("convert: unknown format %q (want movielens): %w", args[0], cli.ErrUsage)
	}
	fs := flag.NewFlagSet("convert movielens", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "input `file`, u.data or ratings.csv, gzip read as such (required; - for stdin)")
	out := fs.String("out", "", "output `file` of JSON-lines events (required; - for stdout)")
	fs.Usage = func() {
		usage(fs.Output())
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("convert: unexpected arguments %q: %w", fs.Args(), cli.ErrUsage)
	}
	if *in == "" || *out == "" {
		return fmt.Errorf("convert: --in and --out are required: %w", cli.ErrUsage)
	}
	if err := cli.DistinctPaths(*in, *out, "", ""); err != nil {
		return fmt.Errorf("convert: %w: %w", err, cli.ErrUsage) // the output would replace the ratings
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
