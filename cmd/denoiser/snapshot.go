package main

import (
	"context"
	command "denoiser/internal/cli"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"denoiser/online"
	"denoiser/service"
	"denoiser/snapshot"
	"denoiser/state"
)

const snapshotUsage = `usage: denoiser snapshot <command> [flags]

commands:
  export   --state DIR --out FILE        snapshot the last checkpoint of a state directory
  export   --url URL --out FILE          download a snapshot from a running instance (GET URL,
                                         e.g. http://host:port/snapshot)
           [--partition N]               the model of input partition N, where the state
                                         holds a model per partition
  import   --in FILE --state DIR [--replace]
                                         make a snapshot the checkpoint of a state directory
  inspect  [--json] FILE                 summarise a snapshot (FILE "-" reads stdin)
  diff     [--json] A B                  what changed from snapshot A to snapshot B

A running instance also writes snapshots itself: POST /snapshot on its HTTP
address (denoiser run --snapshot-dir DIR). Start a new instance warm with
denoiser run --from-snapshot FILE. The file format is snapshot/FORMAT.md.
`

// runSnapshot implements "denoiser snapshot export|import|inspect|diff".
func runSnapshot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, snapshotUsage)
		return fmt.Errorf("snapshot: missing command: %w", errUsage)
	}
	switch args[0] {
	case "export":
		return snapshotExport(ctx, args[1:], stderr)
	case "import":
		return snapshotImport(ctx, args[1:], stderr)
	case "inspect":
		return snapshotInspect(args[1:], stdout, stderr)
	case "diff":
		return snapshotDiff(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, snapshotUsage)
		return nil
	}
	fmt.Fprint(stderr, snapshotUsage)
	return fmt.Errorf("snapshot: unknown command %q: %w", args[0], errUsage)
}

func snapshotFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("snapshot "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: denoiser snapshot %s\n\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

func snapshotExport(ctx context.Context, args []string, stderr io.Writer) error {
	fs := snapshotFlags("export", "export (--state DIR | --url URL) --out FILE", stderr)
	var (
		dir  = fs.String("state", "", "Badger state `directory` to export the last checkpoint of (not in use by a running instance)")
		url  = fs.String("url", "", "download from a running instance: its snapshot `URL`, e.g. http://127.0.0.1:9090/snapshot")
		out  = fs.String("out", "", "snapshot `file` to write (atomically)")
		part = fs.Int("partition", -1, "where the state holds a model per input partition: export `N`'s (a snapshot holds one model; default: the only one)")
	)
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("snapshot export: unexpected arguments %q: %w", fs.Args(), errUsage)
	case *part < -1 || *part > math.MaxInt32:
		return fmt.Errorf("snapshot export: --partition %d: want an input partition number: %w", *part, errUsage)
	case *out == "" || (*dir == "") == (*url == ""):
		return fmt.Errorf("snapshot export: --out and exactly one of --state and --url are required: %w", errUsage)
	}

	var s *snapshot.Snapshot
	if *url != "" {
		u := *url
		if *part >= 0 {
			sep := "?"
			if strings.Contains(u, "?") {
				sep = "&"
			}
			u += sep + "partition=" + strconv.Itoa(*part)
		}
		var err error
		if s, err = download(ctx, u, *out); err != nil {
			return fmt.Errorf("snapshot export: %w", err)
		}
	} else {
		if _, err := os.Stat(*dir); err != nil {
			return fmt.Errorf("snapshot export: state: %w", err)
		}
		store, err := openState(*dir)
		if err != nil {
			return fmt.Errorf("snapshot export: %w", err)
		}
		store.partition, store.note = int32(*part), stderr
		s, err = snapshot.Export(ctx, store, *out, snapshot.Meta{CreatedAt: time.Now().UTC(), Source: "state " + *dir})
		if err = errors.Join(err, store.s.Close()); err != nil {
			return fmt.Errorf("snapshot export: %w", err)
		}
	}
	fmt.Fprintf(stderr, "snapshot: wrote %s: %d bytes, crc32c %s, model version %d (%d users, %d items), %d positions\n",
		*out, s.Bytes, s.ChecksumHex(), s.Model.Version(), s.Model.NumUsers(), s.Model.NumItems(), len(s.Positions))
	return nil
}

// download copies the snapshot served at url to path, verified.
func download(ctx context.Context, url, path string) (*snapshot.Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return nil, fmt.Errorf("download %s: %s: %s", url, resp.Status, msg)
	}
	// No WithLength(resp.ContentLength): a length the server states is not
	// to be trusted with the size of allocations.
	return snapshot.CopyFile(path, resp.Body)
}

func snapshotImport(ctx context.Context, args []string, stderr io.Writer) error {
	fs := snapshotFlags("import", "import --in FILE --state DIR [--replace]", stderr)
	var (
		in      = fs.String("in", "", "snapshot `file` to import")
		dir     = fs.String("state", "", "Badger state `directory` to import into (created if missing, and removed again if the import fails; not in use by a running instance)")
		replace = fs.Bool("replace", false, "replace the checkpoint the state already holds")
	)
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("snapshot import: unexpected arguments %q: %w", fs.Args(), errUsage)
	case *in == "" || *dir == "":
		return fmt.Errorf("snapshot import: --in and --state are required: %w", errUsage)
	}
	// The file is read and verified before the state is opened, so that
	// one that does not read creates nothing; a state directory this
	// import creates is removed again if it fails.
	s, err := snapshot.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("snapshot import: %w", err)
	}
	_, statErr := os.Stat(*dir)
	created := errors.Is(statErr, os.ErrNotExist)
	store, err := openState(*dir)
	if err == nil {
		err = snapshot.ImportSnapshot(ctx, s, store, snapshot.ImportOptions{Replace: *replace})
		err = errors.Join(err, store.s.Close())
	}
	if err != nil {
		if created {
			err = errors.Join(err, os.RemoveAll(*dir))
		}
		if errors.Is(err, snapshot.ErrStateNotEmpty) {
			return fmt.Errorf("snapshot import: %w: use --replace to overwrite it", err)
		}
		return fmt.Errorf("snapshot import: %w", err)
	}
	fmt.Fprintf(stderr, "snapshot: imported %s into %s: model version %d (%d users, %d items), %d positions\n",
		*in, *dir, s.Model.Version(), s.Model.NumUsers(), s.Model.NumItems(), len(s.Positions))
	return nil
}

func snapshotInspect(args []string, stdout, stderr io.Writer) error {
	fs := snapshotFlags("inspect", "inspect [--json] FILE", stderr)
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("snapshot inspect: want one snapshot file: %w", errUsage)
	}
	name := fs.Arg(0)
	s, err := readSnapshot(name)
	if err != nil {
		return fmt.Errorf("snapshot inspect: %w", err)
	}
	r := snapshot.Inspect(s, name)
	if *asJSON {
		return writeJSON(stdout, &r)
	}
	return r.WriteText(stdout)
}

func snapshotDiff(args []string, stdout, stderr io.Writer) error {
	fs := snapshotFlags("diff", "diff [--json] A B", stderr)
	asJSON := fs.Bool("json", false, "print the differences as JSON")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("snapshot diff: want two snapshot files: %w", errUsage)
	}
	a, err := readSnapshot(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("snapshot diff: %w", err)
	}
	b, err := readSnapshot(fs.Arg(1))
	if err != nil {
		return fmt.Errorf("snapshot diff: %w", err)
	}
	d := snapshot.Diff(a, fs.Arg(0), b, fs.Arg(1))
	if *asJSON {
		return writeJSON(stdout, &d)
	}
	return d.WriteText(stdout)
}

// readSnapshot reads a snapshot file, or stdin for "-".
func readSnapshot(name string) (*snapshot.Snapshot, error) {
	if name == "-" {
		return snapshot.Read(os.Stdin)
	}
	return snapshot.ReadFile(name)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// stateStore adapts *state.Store to snapshot.LoadSaver (the snapshot
// package does not depend on Badger).
// stateStore adapts a state directory to snapshot.LoadSaver. Load gives
// the model of partition (-1: the only model the state holds).
type stateStore struct {
	s         *state.Store
	partition int32
	// note, if not nil, is told when partition names a partition of a
	// state whose one model serves every partition (state_layout member).
	note io.Writer
}

var _ snapshot.LoadSaver = stateStore{}

// openState opens a state directory for a one-off export or import, with
// no background garbage collection.
func openState(dir string) (stateStore, error) {
	s, err := state.Open(dir, state.Options{GCInterval: -1})
	if err != nil {
		return stateStore{}, fmt.Errorf("%w (a running instance holds its state directory: export from it with --url)", err)
	}
	return stateStore{s: s, partition: -1}, nil
}

// Load returns the last checkpoint with its model whole: a checkpoint
// with deltas is decoded and encoded again (snapshot files hold whole
// models), and of a state with a model per input partition, the model of
// a.partition with that partition's position.
func (a stateStore) Load(ctx context.Context) (snapshot.Checkpoint, bool, error) {
	cp, ok, err := a.s.Load(ctx)
	if err != nil || !ok {
		return snapshot.Checkpoint{}, ok, err
	}
	if layout, _ := online.SetLayoutOf(cp.Model); a.partition >= 0 && layout == online.LayoutMember && a.note != nil {
		fmt.Fprintf(a.note, "snapshot: the state holds one model (state_layout member), which serves every partition: --partition %d exports that model\n", a.partition)
	}
	out, err := service.CheckpointModel(ctx, cp, a.partition)
	if err != nil {
		return snapshot.Checkpoint{}, false, fmt.Errorf("generation %d: %w", cp.Generation, err)
	}
	return out, true, nil
}

func (a stateStore) SaveFrom(ctx context.Context, cp snapshot.Checkpoint, write func(io.Writer) error) error {
	return a.s.SaveFrom(ctx, state.Checkpoint{Model: cp.Model, Positions: cp.Positions, Version: cp.Version}, write)
}
