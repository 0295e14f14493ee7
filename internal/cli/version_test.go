package cli

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := Version(context.Background(), nil, &out, nil); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "denoiser ") || !strings.Contains(s, runtime.Version()) {
		t.Errorf("version printed %q", s)
	}
	if err := Version(context.Background(), []string{"x"}, &out, nil); !errors.Is(err, ErrUsage) {
		t.Errorf("version with an argument: %v", err)
	}
}
