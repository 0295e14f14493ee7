package eval

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: the
// transition estimates run their folds on worker goroutines (parallel).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
