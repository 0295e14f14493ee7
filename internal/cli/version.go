package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// Version implements `version`: the commit the binary was built from (with
// "+dirty" when the tree had changes), its time, and the Go version, from
// the build information the Go toolchain embeds.
func Version(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("version: takes no arguments: %w", ErrUsage)
	}
	_, err := io.WriteString(stdout, versionString())
	return err
}

func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "denoiser (no build information)\n"
	}
	var rev, when string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		rev = "unknown commit"
	} else if dirty {
		rev += "+dirty"
	}
	out := fmt.Sprintf("denoiser %s", rev)
	if when != "" {
		out += " (" + when + ")"
	}
	return out + ", " + info.GoVersion + "\n"
}
