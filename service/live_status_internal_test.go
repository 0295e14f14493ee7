package service

import (
	"errors"
	"net/http"
	"testing"

	"denoiser/online"
)

// TestSnapshotStatusNoSuchModel: a live snapshot of a partition-layout
// state without ?partition=, or naming a partition whose model the
// member does not hold, is the request's fault (404 with the partitions
// there are), not the server's (it answered 500).
func TestSnapshotStatusNoSuchModel(t *testing.T) {
	set, err := online.NewSet(online.DefaultConfig(), 1, online.LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{0, 3} {
		if _, err := set.For(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []int32{-1, 7} {
		_, _, err := SetModel(set, p)
		if !errors.Is(err, ErrNoSuchModel) || snapshotStatus(err) != http.StatusNotFound {
			t.Errorf("partition %d: %v, status %d; want ErrNoSuchModel, 404", p, err, snapshotStatus(err))
		}
	}
	if _, _, err := SetModel(set, 3); err != nil {
		t.Errorf("partition 3: %v", err)
	}
}
