// Package atomicfile writes files that readers see either whole or not at
// all: the data goes to a temporary file beside the destination, which is
// synced, closed and renamed over the destination only when everything was
// written; the directory is then synced so that the rename is durable.
// On any failure, or on Abort, the temporary file is removed and the
// destination is left as it was.
//
// Only a regular file is ever replaced. A destination that is a symbolic
// link is resolved, and the file it names is replaced (the link stays). A
// destination that exists and is not a regular file (a device such as
// /dev/stdout, a FIFO) is written straight through, with no temporary file
// and no rename: such a stream cannot be replaced whole. The name "-" is
// standard output, written straight through and never closed.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File is a file being written under a temporary name. It is not safe for
// concurrent use.
type File struct {
	f    *os.File
	path string
	done bool
	// direct: f is the destination itself (standard output, a device, a
	// FIFO), written straight through; keepOpen: f is standard output.
	direct, keepOpen bool
}

// Stdout is the name that means standard output.
const Stdout = "-"

// Create starts writing path. The temporary file is created in the
// directory of the regular file path names (after symbolic links), so that
// the rename stays on one file system. See the package comment for "-",
// devices and FIFOs.
func Create(path string) (*File, error) {
	if path == Stdout {
		return &File{f: os.Stdout, path: path, direct: true, keepOpen: true}, nil
	}
	switch fi, err := os.Stat(path); {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("create %s: is a directory", path)
	case err == nil && fi.Mode().IsRegular():
		// A link to a regular file: replace the file, keep the link. A
		// link that names no path (/dev/stdout redirected to a file names
		// /proc/self/fd/1) is written through.
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return openDirect(path)
		}
		path = target
	case err == nil:
		return openDirect(path) // a device, a FIFO, a socket
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &File{f: f, path: path}, nil
}

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// Sync flushes what was written so far to stable storage (under the
// temporary name). A destination written straight through is not synced
// (a pipe or a terminal cannot be).
func (f *File) Sync() error {
	if f.direct {
		return nil
	}
	return f.f.Sync()
}

// Path is the destination.
func (f *File) Path() string { return f.path }

// Commit syncs the temporary file, gives it mode 0644 and renames it over
// the destination. After a failed Commit the temporary file is gone.
// Commit and Abort after a Commit or an Abort do nothing.
func (f *File) Commit() error {
	if f.done {
		return nil
	}
	f.done = true
	if f.direct {
		return f.closeDirect()
	}
	err := f.f.Chmod(0o644)
	if err == nil {
		err = f.f.Sync()
	}
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.f.Name(), f.path)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", f.path, err), remove(f.f.Name()))
	}
	syncDir(filepath.Dir(f.path))
	return nil
}

// Abort discards what was written.
// A destination written straight through keeps what was written: a stream
// cannot be taken back.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	if f.direct {
		return f.closeDirect()
	}
	return errors.Join(f.f.Close(), remove(f.f.Name()))
}

// openDirect opens an existing non-regular destination to write straight
// through.
func openDirect(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &File{f: f, path: path, direct: true}, nil
}

// closeDirect ends a write straight through: standard output stays open.
func (f *File) closeDirect() error {
	if f.keepOpen {
		return nil
	}
	if err := f.f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return nil
}

// WriteFile writes path atomically with write.
func WriteFile(path string, write func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		return errors.Join(err, f.Abort())
	}
	return f.Commit()
}

func remove(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove temporary file: %w", err)
	}
	return nil
}

// syncDir makes a rename durable. A failure is ignored: some file systems
// cannot sync a directory, and the data itself is already synced.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
