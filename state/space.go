package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Badger writes its value log, memtable logs and tables through memory
// maps of files it has sized with ftruncate, that is without allocating
// their blocks. A store on a full filesystem does not get an error from
// such a write: the page fault that should allocate the block fails and
// the process dies of SIGBUS, in one of Badger's own goroutines, where
// nothing can recover it. The store therefore refuses, with ErrNoSpace, a
// write that the free space of its filesystem does not cover with a reserve
// to spare, and leaves Badger closed rather than let it flush into a full
// filesystem (see docs/design/state.md, "A full disk").

// spaceSlack is added to every reserve: the first page of a new value-log
// or memtable log file, the index and filters of a flushed table, the
// DISCARD file of a new store (1 MiB), a manifest record.
const spaceSlack = 4 << 20

// entryOverhead bounds what Badger adds to one entry in its logs: header,
// key, checksum, and its memtable log record.
const entryOverhead = 1 << 10

// diskUsage is what the store's directory holds, as far as Badger's later
// writes are bounded by it.
type diskUsage struct {
	// memLogs is the space the memtable logs (*.mem) occupy. A memtable
	// holds what its log holds; flushing it writes at most that much into
	// a level-0 table.
	memLogs int64
	// tables is the size of the LSM tables (*.sst). A compaction writes
	// its output before it deletes its input, so at most this much.
	tables int64
	// hasDiscard: the DISCARD file exists (a new store creates 1 MiB).
	hasDiscard bool
}

// reserve is the free space that must remain after a write of the store:
// room for Badger to flush its memtables and compact its tables (which
// happen on its own goroutines, at times the store does not choose) and
// to close.
func (u diskUsage) reserve() int64 { return u.memLogs + u.tables + spaceSlack }

// flushNeed is the free space Badger's Close needs: it flushes the
// memtable into a table.
func (u diskUsage) flushNeed() int64 { return u.memLogs + spaceSlack }

// readUsage measures dir.
func readUsage(dir string) (diskUsage, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return diskUsage{}, nil
	}
	if err != nil {
		return diskUsage{}, err
	}
	var u diskUsage
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == "DISCARD":
			u.hasDiscard = true
		case strings.HasSuffix(name, ".mem"):
			n, err := allocated(filepath.Join(dir, name))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return diskUsage{}, err
			}
			u.memLogs += n
		case strings.HasSuffix(name, ".sst"):
			info, err := e.Info()
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return diskUsage{}, err
			}
			if err == nil {
				u.tables += info.Size()
			}
		}
	}
	return u, nil
}

// gcNeed bounds what one value-log rewrite writes: the live entries of the
// file it rewrites. Those are chunks of the committed model (superseded
// generations are dropped first, under the same lock), and at most
// (1 - discardRatio) of the file, which holds one transaction
// (chunksPerTxn chunks, ValueLogMaxEntries 0) and is at most that or one
// value-log file, and one chunk, long.
func gcNeed(committed int64, vlogFileSize int64, discardRatio float64) int64 {
	perFile := int64((1 - discardRatio) * float64(max(vlogFileSize, chunksPerTxn*chunkSize)+chunkSize))
	n := min(committed+committed/chunkSize*entryOverhead+entryOverhead, perFile)
	return n
}

// spaceError describes a refused write.
type spaceError struct {
	dir     string
	free    int64
	write   int64 // what the refused operation writes itself
	reserve int64 // what must remain free after it
}

func (e *spaceError) Error() string {
	need := fmt.Sprintf("%s (%s to write, %s kept free for Badger's own flushes, compactions and garbage collection)",
		bytesString(e.write+e.reserve), bytesString(e.write), bytesString(e.reserve))
	if e.write == 0 {
		need = bytesString(e.reserve) + " (for Badger's own log files, flushes and compactions)"
	}
	return fmt.Sprintf("%v: %s free on the filesystem of %s, %s needed", ErrNoSpace, bytesString(e.free), e.dir, need)
}

func (e *spaceError) Unwrap() error { return ErrNoSpace }

// ensureSpace returns nil when the filesystem of dir has room for a write
// of n bytes with reserve bytes to spare, a *spaceError wrapping
// ErrNoSpace when it has not, and an error wrapping EROFS when it is
// mounted read-only.
func ensureSpace(dir string, n, reserve int64) error {
	free, readOnly, err := statFree(dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	if readOnly {
		return fmt.Errorf("the filesystem is mounted read-only: %w", errReadOnly)
	}
	if free < n+reserve {
		return &spaceError{dir: dir, free: free, write: n, reserve: reserve}
	}
	return nil
}

// existingAncestor returns dir or the nearest of its parents that exists:
// a new store's directory is created by Badger.
func existingAncestor(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}

func bytesString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
