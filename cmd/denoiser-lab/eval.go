package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"denoiser/internal/cli"
	"denoiser/internal/eval"
	"denoiser/internal/report"
	"denoiser/online"
)

// dataHint says where MovieLens 100K comes from; no data set ships with
// the repository.
const dataHint = "MovieLens 100K's u.data: download ml-100k.zip from https://grouplens.org/datasets/movielens/100k/ and unzip it"

const evalUsage = `usage: denoiser-lab eval <transition|recommend|sensitivity|detect|partitions> [flags]

  transition   RQ2: error of the transition-matrix estimate under injected flip noise
  recommend    RQ1/RQ3/RQ4: downstream GMF and NeuMF on Normal, T-CE and denoiser-weighted streams
  sensitivity  RQ3/RQ4: the denoiser's f against λ and fixed ρ; distilled share, progressive against fixed ρ
  detect       ROC-AUC / PR-AUC of the scores where the noise is known
  partitions   what partition models cost against one model, isolated and with merged item rows

Each writes a Markdown report and PNG figures into --out (default out/results; the committed reports are in docs/results: pass --out docs/results to refresh them).
`

// runEval dispatches the eval subcommands.
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, evalUsage)
		return fmt.Errorf("eval: missing subcommand: %w", cli.ErrUsage)
	}
	sub := map[string]func(context.Context, []string, io.Writer) error{
		"transition":  runEvalTransition,
		"recommend":   runEvalRecommend,
		"sensitivity": runEvalSensitivity,
		"detect":      runEvalDetect,
		"partitions":  runEvalPartitions,
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, evalUsage)
		return nil
	}
	fn, ok := sub[args[0]]
	if !ok {
		fmt.Fprint(stderr, evalUsage)
		return fmt.Errorf("eval: unknown subcommand %q: %w", args[0], cli.ErrUsage)
	}
	return fn(ctx, args[1:], stderr)
}

// listFlag is a repeatable, comma-separable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, v := range strings.Split(s, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return nil, fmt.Errorf("rates: %q is not a number: %w", v, cli.ErrUsage)
		}
		out = append(out, f)
	}
	return out, nil
}

// parseInts parses a comma-separated list of integers in [lo, hi]; what
// names them in the error.
func parseInts(s string, lo, hi int, what string) ([]int, error) {
	fs, err := parseRates(s)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(fs))
	for k, f := range fs {
		if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
			return nil, fmt.Errorf("%s %v is not an integer in %d..%d: %w", what, f, lo, hi, cli.ErrUsage)
		}
		out[k] = int(f)
	}
	return out, nil
}

// commandLine is how the report names the command that produced it.
func commandLine(sub string, args []string) string {
	return strings.Join(append([]string{"denoiser-lab", "eval", sub}, args...), " ")
}

// withProgress shows a bar of finished runs on a terminal while fn runs.
func withProgress(stderr io.Writer, c *eval.Counter, fn func() error) error {
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p := report.StartProgress(stderr, 0, 1000, func() int64 { return c.Jobs.Load() * 1000 / max(c.Total.Load(), 1) },
			func() uint64 { return uint64(c.Events.Load()) })
		defer p.Stop()
	}
	return fn()
}

// evalFlags is the flag set of an eval subcommand with the flags every
// one of them has.
type evalFlags struct {
	*flag.FlagSet
	name    string
	workers *int
	report  *string
	out     *string
}

func newEvalFlags(name string, stderr io.Writer, usage string) *evalFlags {
	fs := flag.NewFlagSet("eval "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: denoiser-lab eval %s %s\n\n", name, usage)
		fs.PrintDefaults()
	}
	return &evalFlags{FlagSet: fs, name: name,
		workers: fs.Int("workers", 2, "parallel runs"),
		report:  fs.String("report", "", "write the numbers as JSON to `file`"),
		out:     fs.String("out", "out/results", "`dir` for the Markdown report and figures (empty: none; the committed reports are in docs/results: pass it to refresh them)"),
	}
}

// parse parses args and refuses positional arguments.
func (fs *evalFlags) parse(args []string) error {
	if err := cli.ParseFlags(fs.FlagSet, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("eval %s: unexpected arguments %q: %w", fs.name, fs.Args(), cli.ErrUsage)
	}
	return nil
}

func runEvalTransition(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newEvalFlags("transition", stderr, "[--data FILE] [--noise KIND]... [--rates LIST] [--seeds N] [--first-seed N] [--estimator NAME]... [--ordinal-epochs N] [--report FILE.json] [--out DIR]")
	var noises, estimators listFlag
	fs.Var(&noises, "noise", "noise `kind`: symmetric or pairflip (repeatable; default both)")
	fs.Var(&estimators, "estimator", "estimator: rgbt, anchor or ordinal (repeatable; default all)")
	var (
		data   = fs.String("data", "", "MovieLens 100K u.data `file` (required)")
		rates  = fs.String("rates", "0.1,0.2,0.3,0.4", "comma-separated noise `rates`")
		seeds  = fs.Int("seeds", 3, "number of seeds")
		first  = fs.Int("first-seed", 2, "first seed (seed 1 is the one the settings were chosen on)")
		epochs = fs.Int("ordinal-epochs", 0, "EM epochs of the ordinal estimator (0: its default, 12)")
		passes = fs.Int("passes", 3, "passes of the online model over the training stream")
	)
	if err := fs.parse(args); err != nil {
		return err
	}
	workers, rep, out := fs.workers, fs.report, fs.out
	rs, err := parseRates(*rates)
	if err != nil {
		return fmt.Errorf("eval transition: %w", err)
	}
	start := time.Now()
	d, err := loadData(ctx, *data)
	if err != nil {
		return fmt.Errorf("eval transition: %w", err)
	}
	var c eval.Counter
	var res *eval.TransitionResult
	err = withProgress(stderr, &c, func() error {
		var err error
		res, err = eval.RunTransition(ctx, d, eval.TransitionConfig{
			Noises: noises, Rates: rs, Seeds: *seeds, FirstSeed: *first, Estimators: estimators,
			Passes: *passes, Workers: *workers, Progress: &c, Ordinal: eval.OrdinalConfig{Epochs: *epochs},
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("eval transition: %w", err)
	}
	meta := eval.Meta{Command: commandLine("transition", args), Commit: eval.Commit(), Data: *data, Seconds: time.Since(start).Seconds()}
	res.Meta = meta
	return writeEvalOutputs(stderr, *out, *rep, meta, res, res.WriteReport, "transition.md")
}

func runEvalSensitivity(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newEvalFlags("sensitivity", stderr, "[--data FILE] [--lambdas LIST] [--rhos LIST] [--seeds N] [--first-seed N] [--passes N] [--report FILE.json] [--out DIR]")
	var (
		data    = fs.String("data", "", "MovieLens 100K u.data `file` (required)")
		lambdas = fs.String("lambdas", "0.1,0.3,1,3,10", "comma-separated λ, tried with the progressive ρ (must hold 1)")
		rhos    = fs.String("rhos", "0.4,0.5,0.6,0.7,0.8,0.9", "comma-separated fixed ρ, tried with λ = 1 (must hold 0.4, 0.6, 0.8)")
		seeds   = fs.Int("seeds", 2, "number of seeds")
		first   = fs.Int("first-seed", 1, "first seed")
		passes  = fs.Int("passes", 5, "passes of the denoiser over the training stream")
	)
	if err := fs.parse(args); err != nil {
		return err
	}
	workers, rep, out := fs.workers, fs.report, fs.out
	ls, err := parseRates(*lambdas)
	if err != nil {
		return fmt.Errorf("eval sensitivity: --lambdas: %w", err)
	}
	rs, err := parseRates(*rhos)
	if err != nil {
		return fmt.Errorf("eval sensitivity: --rhos: %w", err)
	}
	start := time.Now()
	d, err := loadData(ctx, *data)
	if err != nil {
		return fmt.Errorf("eval sensitivity: %w", err)
	}
	var c eval.Counter
	var res *eval.SensitivityResult
	err = withProgress(stderr, &c, func() error {
		var err error
		res, err = eval.RunSensitivity(ctx, d, eval.SensitivityConfig{Lambdas: ls, Rhos: rs, Seeds: *seeds, FirstSeed: *first,
			Passes: *passes, Workers: *workers, Progress: &c})
		return err
	})
	if err != nil {
		return fmt.Errorf("eval sensitivity: %w", err)
	}
	res.Meta = eval.Meta{Command: commandLine("sensitivity", args), Commit: eval.Commit(), Data: *data, Seconds: time.Since(start).Seconds()}
	return writeEvalOutputs(stderr, *out, *rep, res.Meta, res, res.WriteReport, "sensitivity.md")
}

// writeEvalOutputs writes the Markdown report (into out) and the JSON
// report, and says where.
func writeEvalOutputs(stderr io.Writer, out, rep string, meta eval.Meta, res any, write func(string, eval.Meta) error, name string) error {
	if out != "" {
		if err := write(out, meta); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		fmt.Fprintf(stderr, "eval: wrote %s/%s\n", out, name)
	}
	if rep != "" {
		if err := eval.WriteJSON(rep, res); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		fmt.Fprintf(stderr, "eval: wrote %s\n", rep)
	}
	return nil
}

func runEvalRecommend(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newEvalFlags("recommend", stderr, "[--data FILE|DIR | --in LOG.jsonl] [--split random|chrono|deca] [--seeds N] [--passes N] [--weight weight|product|p_clean|reliability] [--negatives N] [--backbone gmf|neumf]... [--oracle] [--ablations=false] [--report FILE.json] [--out DIR]")
	var backbones listFlag
	fs.Var(&backbones, "backbone", "downstream model: gmf or neumf (repeatable; default both)")
	var (
		data      = fs.String("data", "", "MovieLens 100K u.data `file`, or with --split deca the DeCA split's directory (this or --in)")
		in        = fs.String("in", "", "JSON-lines event `log` with a truth field on every event (gen's output), instead of --data: genuine events are the clean test, the denoiser reads every field")
		split     = fs.String("split", "random", "random or chrono: an 8:1:1 split of --data (random: seeded); deca: the DeCA paper's fixed split in the directory --data")
		negatives = fs.Int("negatives", 0, "negatives sampled per positive and epoch by the downstream model (0: 1 on the deca split, as DeCA's code, else 4)")
		seeds     = fs.Int("seeds", 3, "number of seeds")
		passes    = fs.Int("passes", 5, "passes of the denoiser over the training stream")
		weight    = fs.String("weight", eval.WeightRecommended, "denoiser score that weighs positives: weight (the output's recommended weight, the one to train on), product (p_clean × reliability, the paper's; its factors are what the ablations remove), p_clean or reliability")
		oracle    = fs.Bool("oracle", false, "add a downstream row weighted by the truth (rating <= 2 weighs 0): what weighting can gain at best, a diagnosis")
		ablations = fs.Bool("ablations", true, "run the ablations and fixed-ρ variants beside the full model (false: the full model only)")
	)
	if err := fs.parse(args); err != nil {
		return err
	}
	workers, rep, out := fs.workers, fs.report, fs.out
	var models []string
	for _, b := range backbones {
		switch strings.ToLower(b) {
		case "gmf":
			models = append(models, eval.BackboneGMF)
		case "neumf":
			models = append(models, eval.BackboneNeuMF)
		default:
			return fmt.Errorf("eval recommend: unknown backbone %q (use gmf or neumf): %w", b, cli.ErrUsage)
		}
	}
	if *negatives < 0 {
		return fmt.Errorf("eval recommend: --negatives %d is negative: %w", *negatives, cli.ErrUsage)
	}
	var variants []eval.Variant // nil: eval.DefaultVariants
	if !*ablations {
		variants = eval.DefaultVariants()[:1]
	}
	start := time.Now()
	var (
		d     *eval.Dataset
		fixed *eval.Split
		err   error
	)
	switch {
	case *in != "" && (*data != "" || *split == eval.SplitDeca):
		return fmt.Errorf("eval recommend: --in takes the place of --data, and its split is random or chrono: %w", cli.ErrUsage)
	case *in != "":
		d, err = eval.LoadEventLog(ctx, *in)
	case *split == eval.SplitDeca:
		d, fixed, err = loadDecaSplit(ctx, *data)
	default:
		d, err = loadData(ctx, *data)
	}
	if err != nil {
		return fmt.Errorf("eval recommend: %w", err)
	}
	var c eval.Counter
	var res *eval.RecommendResult
	err = withProgress(stderr, &c, func() error {
		var err error
		res, err = eval.RunRecommend(ctx, d, eval.RecommendConfig{
			Split: *split, Fixed: fixed, Seeds: *seeds, Passes: *passes, Weight: *weight, Workers: *workers, Progress: &c,
			GMF: eval.GMFConfig{Negatives: *negatives}, Backbones: models, Oracle: *oracle, Variants: variants,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("eval recommend: %w", err)
	}
	res.Meta = eval.Meta{Command: commandLine("recommend", args), Commit: eval.Commit(), Data: cmp.Or(*in, *data), Seconds: time.Since(start).Seconds()}
	return writeEvalOutputs(stderr, *out, *rep, res.Meta, res, res.WriteReport, "recommend.md")
}

func runEvalDetect(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newEvalFlags("detect", stderr, "[--data FILE] [--deca DIR] [--synth-events N] [--synth-noise LIST] [--dwell-shares LIST] [--sparse-dwell-shares LIST] [--profile v1|v2] [--seeds N] [--first-seed N] [--passes N] [--ceiling-epochs LIST] [--transition-user-offset] [--report FILE.json] [--out DIR]")
	var (
		data        = fs.String("data", "", "MovieLens 100K u.data `file` (none: no ML-100k case)")
		sparseDwell = fs.String("sparse-dwell-shares", "1,0", "comma-separated dwell shares of the sparse synthetic streams (synth-events·3/10 users, synth-events/5 items: about 5 events per item); \"\" for none")
		deca        = fs.String("deca", "", "`dir` of the DeCA split of MovieLens 100K; its "+eval.DecaTrainFile+" is scored in file order (none: no DeCA case)")
		thresholds  = fs.String("thresholds", "2", "comma-separated rating thresholds R of the MovieLens cases (rating <= R is noise)")
		synthEvents = fs.Int("synth-events", 200000, "events per synthetic stream")
		synthNoise  = fs.String("synth-noise", "0.2", "comma-separated noise shares of the synthetic streams")
		dwellShares = fs.String("dwell-shares", "1,0.3,0", "comma-separated shares of synthetic events that carry dwell_ms; each noise share runs with each")
		profile     = fs.String("profile", "v2", "generator profile of the synthetic streams (v1 or v2)")
		seeds       = fs.Int("seeds", 2, "number of seeds (on synthetic streams both the generator's and the model's)")
		first       = fs.Int("first-seed", 1, "first seed")
		passes      = fs.Int("passes", 1, "passes over each stream; scores from the last")
		ceiling     = fs.String("ceiling-epochs", "1,2,4", "comma-separated epoch counts of the offline ceiling's batch matrix factorisations; the ceiling is the best of them by ROC-AUC (more epochs memorise the noise they are scored on)")
		userOffset  = fs.Bool("transition-user-offset", true, "score with the model setting transition_user_offset (a per-user offset in T̂; on by default, as in the service; =false turns it off)")
		dwellDir    = fs.String("dwell-direction", online.DwellLong, "score with the model setting dwell_direction: long (the default, as in the service: the longer dwell is genuine) or learned (the classifier's classes say which)")
	)
	if err := fs.parse(args); err != nil {
		return err
	}
	workers, rep, out := fs.workers, fs.report, fs.out
	noise, err := parseRates(*synthNoise)
	if err != nil {
		return fmt.Errorf("eval detect: %w", err)
	}
	dwell, err := parseRates(*dwellShares)
	if err != nil {
		return fmt.Errorf("eval detect: %w", err)
	}
	sparse := []float64{}
	if strings.TrimSpace(*sparseDwell) != "" {
		if sparse, err = parseRates(*sparseDwell); err != nil {
			return fmt.Errorf("eval detect: %w", err)
		}
	}
	th, err := parseInts(*thresholds, 1, 4, "threshold")
	if err != nil {
		return fmt.Errorf("eval detect: %w", err)
	}
	epochs, err := parseInts(*ceiling, 1, math.MaxInt32, "ceiling epochs")
	if err != nil {
		return fmt.Errorf("eval detect: %w", err)
	}
	start := time.Now()
	var d, dd *eval.Dataset
	if *data != "" {
		if d, err = loadData(ctx, *data); err != nil {
			return fmt.Errorf("eval detect: %w", err)
		}
	}
	if *deca != "" {
		if dd, err = eval.LoadDeca(ctx, *deca); err != nil {
			return fmt.Errorf("eval detect: %w", err)
		}
	}
	model := online.DefaultConfig()
	model.TransitionUserOffset, model.DwellDirection = *userOffset, *dwellDir
	if err := model.Validate(); err != nil {
		return fmt.Errorf("eval detect: %w", err)
	}
	var c eval.Counter
	var res *eval.DetectResult
	err = withProgress(stderr, &c, func() error {
		var err error
		res, err = eval.RunDetect(ctx, d, dd, eval.DetectConfig{
			Thresholds: th, SynthNoise: noise, SynthEvents: *synthEvents, SynthProfile: *profile, DwellShares: dwell, SparseDwellShares: sparse,
			Seeds: *seeds, FirstSeed: *first, Passes: *passes, CeilingEpochs: epochs, Workers: *workers, Progress: &c,
			Model: model,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("eval detect: %w", err)
	}
	res.Meta = eval.Meta{Command: commandLine("detect", args), Commit: eval.Commit(), Data: strings.Trim(*data+" "+*deca, " "), Seconds: time.Since(start).Seconds()}
	return writeEvalOutputs(stderr, *out, *rep, res.Meta, res, res.WriteReport, "detect.md")
}

// loadDecaSplit reads the DeCA split from dir; a missing directory or
// file says where to get it.
func loadDecaSplit(ctx context.Context, dir string) (*eval.Dataset, *eval.Split, error) {
	if dir == "" {
		return nil, nil, fmt.Errorf("--data DIR is required with --split deca: %s: %w", eval.DecaSource, cli.ErrUsage)
	}
	d, sp, err := eval.LoadDecaSplit(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	return d, &sp, nil
}

// loadData reads MovieLens from path; a missing path or file names where
// to get it.
func loadData(ctx context.Context, path string) (*eval.Dataset, error) {
	if path == "" {
		return nil, fmt.Errorf("--data FILE is required: %s: %w", dataHint, cli.ErrUsage)
	}
	d, err := eval.LoadMovieLens(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (the data set is %s)", err, dataHint)
	}
	return d, err
}

func runEvalPartitions(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newEvalFlags("partitions", stderr, "[--data FILE] [--in LOG.jsonl] [--partitions P] [--every LIST] [--lagged] [--synth-events N] [--dwell-shares LIST] [--seeds N] [--report FILE.json] [--out DIR]")
	var (
		data        = fs.String("data", "", "MovieLens 100K u.data `file` (none: no ML-100k case)")
		in          = fs.String("in", "", "JSON-lines event `log` with a truth field on every event, scored as one more case (split by user as the demo's producer splits it)")
		lagged      = fs.Bool("lagged", false, "also merge each round's deltas a round late, as a member merges the others' publications that reach it an interval late")
		partitions  = fs.Int("partitions", 3, "number of partition models")
		every       = fs.String("every", "100,1000,10000", "comma-separated merge intervals, in events of the whole stream")
		synthEvents = fs.Int("synth-events", 200000, "events per synthetic stream")
		dwellShares = fs.String("dwell-shares", "1,0.3,0", "comma-separated shares of synthetic events that carry dwell_ms")
		seeds       = fs.Int("seeds", 2, "number of seeds (the generator's and the models')")
	)
	if err := fs.parse(args); err != nil {
		return err
	}
	ev, err := parseInts(*every, 1, math.MaxInt32, "merge interval")
	if err != nil {
		return fmt.Errorf("eval partitions: %w", err)
	}
	dwell, err := parseRates(*dwellShares)
	if err != nil {
		return fmt.Errorf("eval partitions: %w", err)
	}
	start := time.Now()
	var d *eval.Dataset
	if *data != "" {
		if d, err = loadData(ctx, *data); err != nil {
			return fmt.Errorf("eval partitions: %w", err)
		}
	}
	var c eval.Counter
	var res *eval.PartitionsResult
	err = withProgress(stderr, &c, func() error {
		var err error
		res, err = eval.RunPartitions(ctx, d, eval.PartitionsConfig{Partitions: *partitions, Every: ev, Lagged: *lagged, Log: *in, SynthEvents: *synthEvents,
			DwellShares: dwell, Seeds: *seeds, Workers: *fs.workers, Progress: &c, Model: online.DefaultConfig()})
		return err
	})
	if err != nil {
		return fmt.Errorf("eval partitions: %w", err)
	}
	res.Meta = eval.Meta{Command: commandLine("partitions", args), Commit: eval.Commit(), Data: *data, Seconds: time.Since(start).Seconds()}
	return writeEvalOutputs(stderr, *fs.out, *fs.report, res.Meta, res, res.WriteReport, "partitions.md")
}
