package main

import (
	"context"
	command "denoiser/internal/cli"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

Flags may come before or after the files; after "--" every argument is a file.

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

// parseSnapshotFlags parses args with fs, flags before, between or after
// the positional arguments (snapshot inspect FILE --json), and returns
// the positional ones. "--" ends the flags: every argument after it is
// positional. A flag that takes a value takes the next argument, as the
// flag package does; "-" is positional (stdin).
func parseSnapshotFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			positional = append(positional, arg)
			continue
		}
		flags = append(flags, arg)
		name := strings.TrimPrefix(arg[1:], "-")
		if strings.Contains(name, "=") || i+1 == len(args) {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) {
			i++
			flags = append(flags, args[i])
		}
	}
	// flags holds flags and their values only: Parse consumes them all.
	if err := command.ParseFlags(fs, flags); err != nil {
		return nil, err
	}
	return positional, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func snapshotExport(ctx context.Context, args []string, stderr io.Writer) error {
	fs := snapshotFlags("export", "export (--state DIR | --url URL) --out FILE", stderr)
	var (
		dir  = fs.String("state", "", "Badger state `directory` to export the last checkpoint of (not in use by a running instance)")
		url  = fs.String("url", "", "download from a running instance: its snapshot `URL`, e.g. http://127.0.0.1:9090/snapshot")
		out  = fs.String("out", "", "snapshot `file` to write (atomically)")
		part = fs.Int("partition", -1, "where the state holds a model per input partition: export `N`'s (a snapshot holds one model; default: the only one)")
	)
	rest, err := parseSnapshotFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return fmt.Errorf("snapshot export: unexpected arguments %q: %w", rest, errUsage)
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
		// Opening a directory that holds no state would make one there.
		if err := checkState(*dir); err != nil {
			return fmt.Errorf("snapshot export: %w", err)
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
	rest, err := parseSnapshotFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return fmt.Errorf("snapshot import: unexpected arguments %q: %w", rest, errUsage)
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
	files, err := parseSnapshotFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return fmt.Errorf("snapshot inspect: want one snapshot file, got %q: %w", files, errUsage)
	}
	name := files[0]
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
	files, err := parseSnapshotFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 2 {
		return fmt.Errorf("snapshot diff: want two snapshot files, got %q: %w", files, errUsage)
	}
	a, err := readSnapshot(files[0])
	if err != nil {
		return fmt.Errorf("snapshot diff: %w", err)
	}
	b, err := readSnapshot(files[1])
	if err != nil {
		return fmt.Errorf("snapshot diff: %w", err)
	}
	d := snapshot.Diff(a, files[0], b, files[1])
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

// stateStore adapts a state directory to snapshot.LoadSaver (the
// snapshot package does not depend on Badger). Load gives the model of
// partition (-1: the only model the state holds).
type stateStore struct {
	s         *state.Store
	partition int32
	// note, if not nil, is told when partition names a partition of a
	// state whose one model serves every partition (state_layout member).
	note io.Writer
}

var _ snapshot.LoadSaver = stateStore{}

// checkState returns an error saying what dir is unless it holds a
// state, before anything opens it: state.Open makes a state in any
// directory. Where states are in its subdirectories (a several-member
// demo's member-N), the error names them.
func checkState(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state: %s is not a directory", dir)
	}
	if ok, err := state.Exists(dir); ok || err != nil {
		return err
	}
	entries, _ := os.ReadDir(dir) // unreadable: the error says less
	var states []string
	for _, e := range entries {
		if sub := filepath.Join(dir, e.Name()); e.IsDir() {
			if ok, _ := state.Exists(sub); ok {
				states = append(states, sub)
			}
		}
	}
	if len(states) == 0 {
		return fmt.Errorf("%s holds no denoiser state", dir)
	}
	// A several-member demo keeps one state per member: DIR/member-N.
	return fmt.Errorf("%s holds no denoiser state; directories in it do: --state %s", dir, strings.Join(states, " or --state "))
}

// openState opens a state directory for a one-off export or import, with
// no background garbage collection.
func openState(dir string) (stateStore, error) {
	s, err := state.Open(dir, state.Options{GCInterval: -1})
	// Badger formats its errors into text (y.Wrap, outside its debug
	// mode): a permission or read-only failure is told by what it says.
	switch msg := fmt.Sprint(err); {
	case errors.Is(err, state.ErrLocked):
		return stateStore{}, fmt.Errorf("%w (a running instance holds its state directory: export from it with --url)", err)
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) ||
		strings.Contains(msg, "permission denied") || strings.Contains(msg, "read-only file system"):
		// The store writes even to be read (its lock, its manifest).
		return stateStore{}, fmt.Errorf("%w (the state directory must be writable: export from a writable copy of it, or from the running instance with --url)", err)
	case err != nil:
		return stateStore{}, err
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
