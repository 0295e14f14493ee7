// Package atomicfile writes files that readers see either whole or not at
// all: the data goes to a temporary file beside the destination, which is
// synced, closed and renamed over the destination only when everything was
// written; the directory is then synced so that the rename is durable.
// On any failure, or on Abort, the temporary file is removed and the
// destination is left as it was.
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
}

// Create starts writing path. The temporary file is created in path's
// directory, so that the rename stays on one file system.
func Create(path string) (*File, error) {
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
// temporary name).
func (f *File) Sync() error { return f.f.Sync() }

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
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	return errors.Join(f.f.Close(), remove(f.f.Name()))
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
