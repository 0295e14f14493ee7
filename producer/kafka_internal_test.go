package producer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestSummarizeWrite: a batch's write errors are logged as a count and the
// first error, not once per record (80 KB a line for 1,000 records while
// a broker was down), and kafka-go's error stays reachable.
func TestSummarizeWrite(t *testing.T) {
	werrs := make(kafka.WriteErrors, 1000)
	for i := range werrs {
		if i%4 != 3 {
			werrs[i] = fmt.Errorf("kafka.(*Client).Produce: dial tcp 127.0.0.1:19092: connect: connection refused (record %d)", i)
		}
	}
	err := summarizeWrite(werrs)
	if want := "750 of 1000 records failed, the first with: kafka.(*Client).Produce: dial tcp 127.0.0.1:19092: connect: connection refused (record 0)"; err.Error() != want {
		t.Errorf("summary %q, want %q", err, want)
	}
	var back kafka.WriteErrors
	if !errors.As(err, &back) || len(back) != 1000 {
		t.Errorf("kafka-go's WriteErrors not reachable through the summary")
	}
	if other := errors.New("x"); summarizeWrite(other) != other {
		t.Error("another error is not passed through as it is")
	}
}
