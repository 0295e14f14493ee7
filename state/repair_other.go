//go:build windows || plan9 || js || wasip1 || aix

package state

import "log/slog"

// removeEmptyLogs does nothing where Badger does not flock its directory:
// without the lock the files of a running Badger could be removed.
func removeEmptyLogs(string, *slog.Logger) ([]string, error) { return nil, nil }
