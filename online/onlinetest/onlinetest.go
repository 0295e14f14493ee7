// Package onlinetest holds the fixtures that tests of the packages around
// the model share: a small structured event stream, a configuration in
// which every phase of the model happens within a few thousand events, and
// helpers to build and feed a model. It is for tests only.
package onlinetest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"denoiser/online"
)

// Stream is a deterministic stream of n events over 60 users in four taste
// groups and 40 items (one event in five on a random item), with ratings
// and dwell times.
func Stream(n int, seed uint64) []online.Event {
	r := rand.New(rand.NewPCG(seed, seed+1))
	evs := make([]online.Event, n)
	for j := range evs {
		u := r.IntN(60)
		i := (u%4)*10 + r.IntN(10)
		if r.Float64() < 0.2 {
			i = r.IntN(40)
		}
		evs[j] = online.Event{User: fmt.Sprint("u", u), Item: fmt.Sprint("i", i),
			Rating: float64(1 + r.IntN(5)), DwellMS: int64(r.IntN(60000)), HasDwell: true}
	}
	return evs
}

// SmallConfig makes every phase of the model (warm-up, distillation,
// refits, ρ relaxation) happen within a few thousand events, with small
// buffers, so that encoded models stay small.
func SmallConfig(mode string) online.Config {
	return online.Config{Mode: mode, Dim: 8, WarmUp: 300, RefitEvery: 100, GMMMinSamples: 32, GMMWindow: 256}
}

// QuickDefaults is the configuration the service runs by default
// (online.DefaultConfig: dwell read as longer-is-genuine, the event order
// and its instruments, the per-user offset) with a short warm-up and
// frequent refits, so that a test's few thousand events reach the
// distillation, the mixture and the instruments: what a user runs, in
// a test's time.
func QuickDefaults() online.Config {
	c := online.DefaultConfig()
	c.WarmUp, c.RefitEvery, c.GMMMinSamples = 300, 200, 64
	return c
}

// New returns a new model of cfg with a fixed random source (PCG 1, 2:
// golden files were made with it).
func New(t testing.TB, cfg online.Config) *online.Model {
	t.Helper()
	m, err := online.New(cfg, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Step runs evs through m and returns their scores.
func Step(t testing.TB, m *online.Model, evs []online.Event) []online.Score {
	t.Helper()
	out := make([]online.Score, len(evs))
	for j, ev := range evs {
		if err := m.Step(ev, &out[j]); err != nil {
			t.Fatalf("event %d: %v", j, err)
		}
	}
	return out
}
