package state

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// errReadOnly is returned for a store on a filesystem mounted read-only.
var errReadOnly error = unix.EROFS

// statFree returns the bytes of the filesystem of path (or of its nearest
// existing parent) that this process may still allocate, and whether it is
// mounted read-only.
func statFree(path string) (free int64, readOnly bool, err error) {
	var st unix.Statfs_t
	dir := existingAncestor(path)
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	if st.Blocks == 0 {
		// /proc, /sys and their kind: not full, but no disk at all.
		return 0, false, fmt.Errorf("%s is on a filesystem with no storage (type %#x, such as /proc or /sys): put the state directory on a disk", dir, st.Type)
	}
	return int64(st.Bavail) * int64(st.Bsize), st.Flags&unix.ST_RDONLY != 0, nil
}

// allocated returns the space the file occupies: the blocks allocated, not
// its length (Badger's logs are sparse until written).
func allocated(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512, nil
	}
	return info.Size(), nil
}
