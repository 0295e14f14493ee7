package eval

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"testing"

	"denoiser/consumer"
	"denoiser/internal/report"
	"denoiser/online"

	"github.com/segmentio/kafka-go"
)

func TestProbe49(t *testing.T) {
	path := os.Getenv("PROBE_LOG")
	if path == "" {
		t.Skip()
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &stream{}
	var parts []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	bal := kafka.Murmur2Balancer{}
	for sc.Scan() {
		var ev consumer.Event
		if err := consumer.Decode(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		s.events = append(s.events, ev.Model())
		s.genuine = append(s.genuine, ev.Truth == consumer.TruthGenuine)
		parts = append(parts, bal.Balance(kafka.Message{Key: []byte(ev.User)}, 0, 1, 2))
	}
	cfg := online.DefaultConfig()
	for _, v := range []struct{ p, every, lag int }{{1, 0, 0}, {3, 0, 0}, {3, 30, 0}, {3, 100, 0}, {3, 300, 0}, {3, 100, 1}, {3, 300, 1}} {
		w, pc, err := probeScores(s, parts, cfg, 1, v.p, v.every, v.lag)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := report.ROCAUC(w, s.genuine)
		b, _ := report.ROCAUC(pc, s.genuine)
		fmt.Printf("p=%d every=%d lag=%d weight %.4f p_clean %.4f\n", v.p, v.every, v.lag, a, b)
	}
}

func probeScores(s *stream, parts []int, cfg online.Config, seed uint64, p, every, lag int) (w, pclean []float64, err error) {
	models := make([]*online.Model, p)
	for q := range models {
		if models[q], err = online.New(cfg, online.NewPartitionSource(seed, int32(q))); err != nil {
			return nil, nil, err
		}
		if every > 0 {
			models[q].StartSharing()
		}
	}
	var prev []online.Shared
	w, pclean = make([]float64, len(s.events)), make([]float64, len(s.events))
	var sc online.Score
	for e, ev := range s.events {
		q := 0
		if p > 1 {
			q = parts[e]
		}
		if err := models[q].Step(ev, &sc); err != nil && !errors.Is(err, online.ErrNumerical) {
			return nil, nil, err
		}
		w[e], pclean[e] = sc.Weight, sc.PClean
		if every == 0 || (e+1)%every != 0 {
			continue
		}
		deltas := make([]online.Shared, p)
		for q, m := range models {
			if err := m.Publish(&deltas[q]); err != nil {
				return nil, nil, err
			}
		}
		use := deltas
		if lag > 0 {
			use, prev = prev, deltas
		}
		for q, m := range models {
			for r := range use {
				if r == q {
					continue
				}
				if err := m.Merge(&use[r]); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return w, pclean, nil
}
