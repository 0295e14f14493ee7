//go:build !windows && !plan9 && !js && !wasip1 && !aix

package state

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// removeEmptyLogs removes the zero-length value-log (*.vlog) and memtable
// WAL (*.mem) files from dir, and returns their names.
//
// Badger creates such a file with O_CREATE and only then sizes it; a process
// killed between the two leaves a file of zero bytes behind, and badger v4.9.6
// refuses to open the directory again ("Open existing file: ...vlog: Create a
// new file", upstream dgraph-io/badger#2207). A zero-length log holds no
// entry, not even its header, so no committed write can live in it or point
// into it: removing it loses nothing.
//
// The removal runs holding Badger's own directory lock (flock on the
// directory, as badger's dir_unix.go takes it), so it never touches the files
// of a Badger that has the directory open: the lock is then taken and the
// call fails, and Badger's Open reports the lock error.
func removeEmptyLogs(dir string, log *slog.Logger) ([]string, error) {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // a new store: Badger creates the directory
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, nil // held: leave it to Badger to report
	}
	defer unix.Flock(int(d.Fd()), unix.LOCK_UN)

	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".vlog") || strings.HasSuffix(name, ".mem")) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return removed, err
		}
		if info.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return removed, fmt.Errorf("remove empty log %s: %w", name, err)
		}
		log.Warn("state: removed an empty Badger log left by a crash", "dir", dir, "file", name)
		removed = append(removed, name)
	}
	return removed, nil
}
