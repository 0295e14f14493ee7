//go:build !linux

package state

import (
	"errors"
	"math"
	"os"
)

// errReadOnly is never returned here.
var errReadOnly = errors.New("read-only filesystem")

// statFree reports unlimited space: only Linux builds measure it (the
// service's platform); elsewhere the store writes unchecked, and a full
// filesystem can still fault Badger's mapped writes.
func statFree(string) (int64, bool, error) { return math.MaxInt64 / 2, false, nil }

// allocated returns the length of the file.
func allocated(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
