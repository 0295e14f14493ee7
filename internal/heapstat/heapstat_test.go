package heapstat

import (
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: Peak samples on a
// goroutine of its own, which stop must end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPeak(t *testing.T) {
	stop := Peak()
	keep := make([]byte, 8<<20)
	for i := range keep {
		keep[i] = byte(i)
	}
	peak := stop()
	runtime.KeepAlive(keep)
	if peak < uint64(len(keep)) {
		t.Errorf("peak %d bytes while %d were live", peak, len(keep))
	}
	if now := Now(); now == 0 {
		t.Error("Now = 0")
	}
	var sink []byte
	if n := Allocated(func() { sink = make([]byte, 1<<20) }); n < 1<<20 {
		t.Errorf("Allocated = %d for a 1 MiB allocation", n)
	}
	_ = sink
}
