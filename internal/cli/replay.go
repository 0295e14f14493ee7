package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"denoiser/consumer"
	"denoiser/internal/atomicfile"
	"denoiser/internal/report"
	"denoiser/online"
	"denoiser/producer"
	"denoiser/service"
)

// ReplayConfig is what replay and the demo take of the configuration: the
// seed and the model.
type ReplayConfig struct {
	// Seed seeds the models' random sources (default 1).
	Seed uint64
	// Model configures the model; see online.Config for fields and defaults.
	Model online.Config
	// Fields names the members the fields are read from (the input's
	// fields section, consumer.Fields).
	Fields consumer.Fields
	// Ignored names the sections of the file that only `denoiser run`
	// uses (kafka, checkpoint, ...) and that the file sets: replay notes
	// them and goes on.
	Ignored []string
}

// LoadReplayConfig reads the same configuration as `denoiser run`, with
// the same layers (service.Layers: the YAML file, "" for none, then the
// DENOISER_* variables of environ, then the --set overrides), and keeps
// its seed, model and fields sections. Unknown keys are errors, so that a typo
// does not silently fall back to a default; so are DENOISER_* variables
// that name no setting (UnknownEnv) and --set overrides of a section
// (CheckSets).
func LoadReplayConfig(path string, environ, sets []string) (ReplayConfig, error) {
	if err := CheckSets(sets); err != nil {
		return ReplayConfig{}, err
	}
	full, unknownEnv, err := service.Layers{File: path, Environ: environ, Sets: sets}.Load()
	if err != nil {
		return ReplayConfig{}, err
	}
	if len(unknownEnv) > 0 {
		return ReplayConfig{}, fmt.Errorf("%w: %s", service.ErrConfig, UnknownEnv(unknownEnv))
	}
	c := ReplayConfig{Seed: full.Seed, Model: full.Model, Fields: full.Fields}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if err := c.Model.Validate(); err != nil {
		return c, fmt.Errorf("%w: model: %w", service.ErrConfig, err)
	}
	if err := service.CheckClasses(c.Model); err != nil {
		return c, err
	}
	if err := c.Fields.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", service.ErrConfig, err)
	}
	// What only the service reads: every section but seed, model and fields.
	full.Seed, full.Model, full.Fields = 0, online.Config{}, consumer.Fields{}
	sections := reflect.ValueOf(full)
	for i := range sections.NumField() {
		if !sections.Field(i).IsZero() {
			name, _, _ := strings.Cut(sections.Type().Field(i).Tag.Get("yaml"), ",")
			c.Ignored = append(c.Ignored, name)
		}
	}
	return c, nil
}

// SetFlags collects repeated --set PATH=VALUE flags.
type SetFlags []string

func (s *SetFlags) String() string     { return strings.Join(*s, " ") }
func (s *SetFlags) Set(v string) error { *s = append(*s, v); return nil }

// ConfigFlags registers --config and --set on fs and returns the function
// that loads what they name, with the environment, and notes on stderr the
// settings that only `denoiser run` uses. A wrong setting, and a --config
// file that does not exist, are usage errors (ErrUsage, exit code 2, as
// `denoiser run` gives them); a file that cannot be read otherwise is not.
func ConfigFlags(fs *flag.FlagSet, command string, stderr io.Writer) func() (ReplayConfig, error) {
	path := fs.String("config", "", "YAML `file`: the configuration of denoiser run, of which "+command+" reads seed, model and fields")
	var sets SetFlags
	fs.Var(&sets, "set", "override one setting, `PATH=VALUE` (repeatable), e.g. --set model.dim=16; DENOISER_* variables apply too")
	seed := SeedFlag(fs)
	return func() (ReplayConfig, error) {
		cfg, err := LoadReplayConfig(*path, os.Environ(), sets)
		if errors.Is(err, service.ErrConfig) || errors.Is(err, os.ErrNotExist) {
			return cfg, fmt.Errorf("%w: %w", err, ErrUsage)
		}
		if err != nil {
			return cfg, err
		}
		seed.Apply(&cfg.Seed)
		if len(cfg.Ignored) > 0 {
			fmt.Fprintf(stderr, "%s: note: %s reads only seed, model and fields; %s are for denoiser run and are ignored\n",
				command, command, strings.Join(cfg.Ignored, ", "))
		}
		return cfg, nil
	}
}

// SeedOverride is the --seed flag of replay and demo: when given, it
// replaces the configuration file's seed.
type SeedOverride struct {
	set   bool
	value uint64
}

// SeedFlag registers --seed on fs.
func SeedFlag(fs *flag.FlagSet) *SeedOverride {
	s := &SeedOverride{}
	fs.Func("seed", "seed of the models' random sources (`N`, default: the config's seed:, else 1)", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want a non-negative integer")
		}
		s.set, s.value = true, n
		return nil
	})
	return s
}

// Apply writes the flag's seed into dst when the flag was given.
func (s *SeedOverride) Apply(dst *uint64) {
	if s.set {
		*dst = s.value
	}
}

// ErrNothingScored is returned by Replay when no record of the input could
// be scored: the input is most likely not in the event format.
var ErrNothingScored = errors.New("no event could be scored")

// Replay implements
//
//	denoiser replay --in FILE --out FILE [--dead-letter FILE] [--truth MODE] [--report FILE.json] [--passes N] [--partition N [--shared FILE [--first-offset N]]] [--config FILE]
//
// It runs the stream pipeline (consumer.Run) from a JSON-lines file to a
// JSON-lines file, with a plain model beside the main one as the
// loss_baseline (not with --truth none, which evaluates nothing), and
// reports how well the scores find the noise. With
// --passes N > 1 both models first learn from the whole log N−1 times
// (re-opening the file each time; nothing is written), and the last pass
// scores as with one.
func Replay(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		in         = fs.String("in", "", "input `file` of events (JSON lines, or CSV with a header: --format), - for standard input (required)")
		out        = fs.String("out", "", "output `file` of scored events, - for standard output (required)")
		deadLetter = fs.String("dead-letter", "", "dead-letter `file` for bad records (default: OUT with .dead-letter.jsonl for its extension, .dead-letter.jsonl.gz for .EXT.gz, /dev/null for /dev/null; required with --out -)")
		format     = fs.String("format", "auto", "input `format`: jsonl (JSON lines), csv (with a header line), or auto: csv for a name ending in .csv or .csv.gz, else jsonl; gzip is read as such")
		truthMode  = fs.String("truth", "field", "ground truth for the report: field, dwell:MS (dwell_ms < MS is noise), rating:R (rating <= R is noise) or none (evaluate nothing: the replay keeps no per-event or per-id state beside the model, and steps no plain model for the loss_baseline)")
		reportPath = fs.String("report", "", "write the JSON report to `file`")
		partition  = fs.Int("partition", 0, "score the log as input partition `N`'s: the model is made as the service makes partition N's (state_layout: partition; online.NewPartition), so that a replay of one partition's records reproduces that partition's output of a live run")
		sharedPath = fs.String("shared", "", "merge what partition --partition's live model merged, where it merged it: a `file` of the shared topic written by denoiser shared-log (state_layout partition with sharing); the log must hold the partition's records one per line, from offset --first-offset")
		firstOff   = fs.Int64("first-offset", 0, "the input offset of the log's first line, for --shared (`N`)")
		passes     = fs.Int("passes", 1, "read the log `N` times: both models learn from it N-1 times (no output, no report), then the last pass scores, test-then-train, and writes the output, dead letters and report; N > 1 needs a regular file as --in. The scores are then no longer out-of-sample: each event has been learned from before it is scored")
		loadConfig = ConfigFlags(fs, "replay", stderr)
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: denoiser replay --in FILE --out FILE [--format jsonl|csv|auto] [--dead-letter FILE] [--truth MODE] [--report FILE.json] [--passes N] [--partition N [--shared FILE [--first-offset N]]] [--config FILE] [--set PATH=VALUE]... [--seed N]\n\n"+
			"Scores a recorded event log with the same pipeline as the stream service and\n"+
			"prints a report (ROC-AUC, PR-AUC against ground truth) to stderr.\n"+
			"With --passes N the models learn from the whole log N-1 times first (batch\n"+
			"mode), then score it in a last pass.\n\n")
		fs.PrintDefaults()
	}
	if err := ParseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("replay: unexpected arguments %q: %w", fs.Args(), ErrUsage)
	case *in == "" || *out == "":
		return fmt.Errorf("replay: --in and --out are required: %w", ErrUsage)
	case *passes < 1:
		return fmt.Errorf("replay: --passes %d: want at least 1: %w", *passes, ErrUsage)
	case *partition < 0 || *partition > math.MaxInt32:
		return fmt.Errorf("replay: --partition %d: want an input partition number: %w", *partition, ErrUsage)
	case *sharedPath != "" && *passes > 1:
		return fmt.Errorf("replay: --shared reproduces one live pass: it cannot be used with --passes %d: %w", *passes, ErrUsage)
	case *firstOff < 0:
		return fmt.Errorf("replay: --first-offset %d: want an input offset: %w", *firstOff, ErrUsage)
	case *firstOff != 0 && *sharedPath == "":
		return fmt.Errorf("replay: --first-offset places the log among the merge points of --shared: give --shared too: %w", ErrUsage)
	case *sharedPath != "" && !given(fs, "partition"):
		return fmt.Errorf("replay: --shared merges what one partition's live model merged: say which with --partition N: %w", ErrUsage)
	case *passes > 1 && *in == "-":
		return fmt.Errorf("replay: --passes %d reads the input %d times: --in - (standard input) cannot be re-read; give a file: %w", *passes, *passes, ErrUsage)
	}
	if *deadLetter == "" {
		if *out == atomicfile.Stdout {
			return fmt.Errorf("replay: --out - needs --dead-letter FILE: %w", ErrUsage)
		}
		*deadLetter = defaultDeadLetter(*out)
	}
	if err := DistinctPaths(*in, *out, *deadLetter, *reportPath); err != nil {
		return fmt.Errorf("replay: %w: %w", err, ErrUsage)
	}
	truth, err := report.ParseTruth(*truthMode)
	if err != nil {
		return fmt.Errorf("replay: --truth: %w: %w", err, ErrUsage)
	}
	cfg, err := loadConfig()
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	model, err := online.NewPartition(cfg.Model, cfg.Seed, int32(*partition))
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if m := model.Config().Mode; m == online.ModeRating && truth.Mode == report.TruthRating || m == online.ModeDwell && truth.Mode == report.TruthDwell {
		fmt.Fprintf(stderr, "replay: note: in %s mode the model's label is the %s that --truth %s reads: its scores are not label-free against that truth, as the report's baselines are; compare them in binary mode\n", m, truth.Mode, *truthMode)
	}
	var before func(*consumer.Result)
	if *sharedPath != "" {
		if before, err = replayMerges(*sharedPath, int32(*partition), *firstOff, model, stderr); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	}
	// The plain model beside the main one serves the report's
	// loss_baseline only: with nothing to evaluate it is not stepped.
	var baseline *online.Model
	if truth.Mode != report.TruthNone {
		if baseline, err = online.New(cfg.Model.Baseline(), online.NewSource(cfg.Seed)); err != nil {
			return fmt.Errorf("replay: baseline: %w", err)
		}
	}

	if *passes > 1 { // before the input is opened: opening a pipe waits for its writer
		if err := rereadable(*in); err != nil {
			return fmt.Errorf("replay: --passes %d: %w: %w", *passes, err, ErrUsage)
		}
	}
	src, err := OpenInput(*in, *format, cfg.Fields)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer src.Close()
	sink, err := producer.CreateFileSink(*out)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	dlq, err := producer.CreateFileDeadLetter(*deadLetter)
	if err != nil {
		return errors.Join(fmt.Errorf("replay: %w", err), sink.Abort())
	}
	// The outputs are created before the learning passes and the run, so
	// that a path they cannot be written to fails at once, not at the end.
	var reportFile *atomicfile.File
	if *reportPath != "" {
		if reportFile, err = atomicfile.Create(*reportPath); err != nil {
			return errors.Join(fmt.Errorf("replay: report: %w", err), sink.Abort(), dlq.Abort())
		}
	}
	abort := func() error { // every output, on a failure before they are closed
		err := errors.Join(sink.Abort(), dlq.Abort())
		if reportFile != nil {
			err = errors.Join(err, reportFile.Abort())
		}
		return err
	}
	if *passes > 1 {
		for pass := 1; pass < *passes; pass++ {
			if err := learnPass(ctx, *in, *format, cfg.Fields, model, baseline, pass, *passes, stderr); err != nil {
				return errors.Join(fmt.Errorf("replay: %w", err), abort())
			}
			model.ForgetTimes() // the next pass's times start over
		}
	}

	collector := report.NewCollector(truth, sink)

	var progress *report.Progress
	if isTerminal(stderr) {
		progress = report.StartProgress(stderr, 0, src.Size(), src.BytesRead, collector.Scored)
	}
	start := time.Now()
	st, err := consumer.Run(ctx, src, model, collector, dlq, consumer.Options{Fields: cfg.Fields, Shadow: shadowOf(baseline), Before: before})
	elapsed := time.Since(start)
	if progress != nil {
		progress.Stop()
	}
	cut, _ := err.(*consumer.ReadError) // the input ends early: keep what was read, then fail
	if err != nil && cut == nil {
		return errors.Join(fmt.Errorf("replay: %w", err), abort())
	}
	if err := errors.Join(sink.Close(), dlq.Close()); err != nil {
		return errors.Join(fmt.Errorf("replay: %w", err), abort()) // the closed ones' Abort is a no-op
	}

	var base *online.Summary
	if baseline != nil {
		b := baseline.Summary()
		base = &b
	}
	rep := report.Build(report.Inputs{
		Input: *in, Collector: collector, Stats: st,
		Model: model.Summary(), Baseline: base, Elapsed: elapsed,
		Passes: *passes, InputErr: cut, Config: model.Config(),
	})
	if reportFile != nil {
		if err := rep.WriteJSON(reportFile); err != nil {
			return errors.Join(fmt.Errorf("replay: report: %w", err), reportFile.Abort())
		}
		if err := reportFile.Commit(); err != nil {
			return fmt.Errorf("replay: report: %w", err)
		}
	}
	fmt.Fprintf(stderr, "replay: wrote %s (%d scored) and %s (%d dead-lettered)\n", *out, st.Scored, *deadLetter, st.Rejected)
	if err := rep.Print(stderr); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if cut != nil {
		return fmt.Errorf("replay: %w; the outputs and the report hold the %d records read", cut, st.Records)
	}
	if st.Scored > 0 && st.Rejected > st.Scored {
		fmt.Fprintf(stderr, "replay: warning: %d of %d records (%.0f%%) were dead-lettered (%s); %s\n",
			st.Rejected, st.Records, 100*float64(st.Rejected)/float64(st.Records), rep.InvalidReasons(), deadLetterHint(*deadLetter, model.Config()))
	}
	if st.Scored == 0 {
		why := src.Describe()
		if n := st.ByReason[consumer.ReasonModelRejected]; n > 0 && n == st.Rejected {
			why = fmt.Sprintf("the model refused all %d records (model_rejected): they do not fit model.mode %s (rating needs a rating on every event, dwell a dwell_ms); the dead letters give each one's error", n, model.Config().Mode)
		} else if st.Records > 0 && st.Skipped == st.Records {
			why = fmt.Sprintf("all %d lines of the input are blank", st.Records)
		} else if len(st.Unread) > 0 && st.ByReason[consumer.ReasonMissingField] > 0 {
			why = "the records name their fields as another format does (\"not read\" above): read them with --set fields.FIELD=MEMBER, or rename them (consumer/FORMAT.md)"
		} else if len(st.Shadowed) > 0 {
			why = "the records lack the members that fields.* names and carry the event format's own names, which are then not read (\"not read\" above): drop those settings, or name the members the records carry"
		}
		if st.Rejected > 0 {
			why += fmt.Sprintf(" (dead-lettered: %s; the first, %s; %s)", rep.InvalidReasons(), st.FirstRejected, deadLetterHint(*deadLetter, model.Config()))
		}
		return fmt.Errorf("replay: %w: %s", ErrNothingScored, why)
	}
	return nil
}

// deadLetterHint says where each dead-lettered record's error is, and for
// rating mode the setting that most often refuses records.
func deadLetterHint(deadLetter string, cfg online.Config) string {
	hint := "--dead-letter FILE writes each one with its field and error"
	if deadLetter != "" && deadLetter != os.DevNull {
		hint = "the dead letters (" + deadLetter + ") give each one's field and error"
	}
	if cfg.Mode == online.ModeRating {
		hint += fmt.Sprintf("; rating mode reads ratings 1..%d (model.classes %d)", cfg.K(), cfg.K())
	}
	return hint
}

// given reports whether the flag name was given on fs's command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// replayMerges reads the shared topic's file at path and returns the
// function that merges into model, before it steps each record, what
// partition p's live model merged up to that record's input offset
// (first plus its line number less one). model starts sharing.
func replayMerges(path string, p int32, first int64, model *online.Model, stderr io.Writer) (func(*consumer.Result), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	hist, err := service.ReadSharedHistory(f)
	if err := errors.Join(err, f.Close()); err != nil {
		return nil, fmt.Errorf("--shared %s: %w", path, err)
	}
	merges, err := hist.Merges(p)
	if err != nil {
		return nil, fmt.Errorf("--shared %s: %w", path, err)
	}
	fmt.Fprintf(stderr, "replay: partition %d merges %d deltas at %d points (%s)\n", p, merges.Deltas(), merges.Len(), path)
	model.StartSharing()
	return func(r *consumer.Result) { merges.Apply(model, first+r.Pos.Line-1) }, nil
}

// rereadable refuses an input that cannot be read twice the same: standard
// input, a pipe, a device. It must be a regular file (a symbolic link to
// one is fine).
func rereadable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("--in %s is not a regular file (%s) and cannot be re-read", path, fi.Mode().Type())
	}
	return nil
}

// learnPass is one of the first passes of --passes: model and baseline
// (if any) learn from every event of the log at path, as in the scoring
// pass, and everything the loop writes (scored records, dead letters) is
// dropped. It notes the pass on stderr.
func learnPass(ctx context.Context, path, format string, fields consumer.Fields, model, baseline *online.Model, pass, passes int, stderr io.Writer) error {
	src, err := OpenInput(path, format, fields)
	if err != nil {
		return err
	}
	var sink discard
	var progress *report.Progress
	if isTerminal(stderr) {
		progress = report.StartProgress(stderr, 0, src.Size(), src.BytesRead, sink.written.Load)
	}
	start := time.Now()
	st, err := consumer.Run(ctx, src, model, &sink, &sink, consumer.Options{Fields: fields, Shadow: shadowOf(baseline)})
	if progress != nil {
		progress.Stop()
	}
	if _, cut := err.(*consumer.ReadError); cut {
		err = nil // the pass learned what could be read; the scoring pass reports where it ends
	}
	if err := errors.Join(err, src.Close()); err != nil {
		return fmt.Errorf("learning pass %d: %w", pass, err)
	}
	fmt.Fprintf(stderr, "replay: pass %d/%d learned from %d events in %.1f s (no output)\n", pass, passes, st.Scored, time.Since(start).Seconds())
	return nil
}

// discard is the sink and dead letter of the learning passes: it drops
// every record, counting the scored ones for the progress bar.
type discard struct{ written atomic.Uint64 }

var (
	_ consumer.Sink       = (*discard)(nil)
	_ consumer.DeadLetter = (*discard)(nil)
)

func (d *discard) Write(context.Context, *consumer.Result) error { d.written.Add(1); return nil }
func (*discard) Reject(context.Context, *consumer.Result) error  { return nil }
func (*discard) Flush(context.Context) error                     { return nil }

// isTerminal reports whether w is a terminal, where progress is drawn.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// stdinName is the file name the positions of events read from standard
// input carry.
const stdinName = "stdin"

// input is an event log being read.
// Input is an event log opened by OpenInput.
type Input interface {
	consumer.Source
	BytesRead() int64
	Size() int64
	Describe() string
	Close() error
}

// openInput opens the event log, "-" for standard input, in format
// (jsonl, csv or auto).
func OpenInput(path, format string, fields consumer.Fields) (Input, error) {
	if format == "auto" {
		format = "jsonl"
		if name := strings.TrimSuffix(path, ".gz"); strings.HasSuffix(name, ".csv") {
			format = "csv"
		}
	}
	if format != "jsonl" && format != "csv" {
		return nil, fmt.Errorf("--format %q: use jsonl, csv or auto: %w", format, ErrUsage)
	}
	var lines *consumer.FileSource
	if path == "-" {
		lines = consumer.NewFileSource(os.Stdin, stdinName)
	} else {
		var err error
		if lines, err = consumer.OpenFile(path); err != nil {
			return nil, err
		}
	}
	if format == "csv" {
		return consumer.NewCSVSource(lines, fields), nil
	}
	return lines, nil
}

// DistinctPaths refuses an input that is also an output, and one output
// given twice ("" is a flag not given): writing would destroy what is read, or interleave two
// outputs. Names that do not exist yet are distinct from everything, and
// a file that is not a regular one (/dev/null) from itself.
func DistinctPaths(in, out, deadLetter, report string) error {
	named := []struct{ flag, path string }{{"--in", in}, {"--out", out}, {"--dead-letter", deadLetter}, {"--report", report}}
	for i, a := range named {
		for _, b := range named[i+1:] {
			if a.path == "" || b.path == "" {
				continue
			}
			if a.path == "-" || b.path == "-" {
				if a.path == b.path && a.flag != "--in" {
					return fmt.Errorf("%s and %s are both standard output", a.flag, b.flag)
				}
				continue
			}
			fa, errA := os.Stat(a.path)
			fb, errB := os.Stat(b.path)
			if a.path == b.path && (errA != nil || fa.Mode().IsRegular()) {
				return fmt.Errorf("%s and %s are the same file %s", a.flag, b.flag, a.path)
			}
			if errA == nil && errB == nil && os.SameFile(fa, fb) && fa.Mode().IsRegular() {
				return fmt.Errorf("%s %s and %s %s are the same file", a.flag, a.path, b.flag, b.path)
			}
		}
	}
	return nil
}

// shadowOf is m as the loop's shadow model: none when m is nil (a nil
// *online.Model is not a nil consumer.Model).
func shadowOf(m *online.Model) consumer.Model {
	if m == nil {
		return nil
	}
	return m
}

// defaultDeadLetter is the dead-letter file of replay's --out out when
// --dead-letter is not given: out with .dead-letter.jsonl in place of its
// extension, compressed as out is (out.jsonl.gz: out.dead-letter.jsonl.gz);
// the null device for the null device, whose user keeps no output (the
// summary and the report still count the dead letters by reason).
func defaultDeadLetter(out string) string {
	if out == os.DevNull {
		return os.DevNull
	}
	gz := ""
	if strings.HasSuffix(out, ".gz") {
		out, gz = strings.TrimSuffix(out, ".gz"), ".gz"
	}
	return strings.TrimSuffix(out, filepath.Ext(out)) + ".dead-letter.jsonl" + gz
}
