package snapshot

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: the
// live snapshot export encodes beside the stream, and Export writes
// through a pipe, on goroutines of their own.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
