package online

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// Two partition models that exchange deltas every 50 events of the stream
// count the stream's events on their clocks (within one interval), end a
// ρ period per RefitEvery of the clock, and refit their mixtures per
// RefitEvery of their own events; the warm-up ends when the clock, not
// the model's own count, reaches it.
func TestClockFollowsMergedEvents(t *testing.T) {
	cfg := mergeConfig() // RefitEvery 50, WarmUp 100
	models := [2]*Model{}
	for q := range models {
		m, err := NewPartition(cfg, 2, int32(q))
		if err != nil {
			t.Fatal(err)
		}
		m.StartSharing()
		models[q] = m
	}
	evs := mergeStream(1000, 3)
	var d [2]Shared
	var sc Score
	own := [2]uint64{}
	warmAt := [2]int{-1, -1}
	for j, ev := range evs {
		q := j % 2
		if err := models[q].Step(ev, &sc); err != nil {
			t.Fatal(err)
		}
		own[q]++
		for p, m := range models {
			if warmAt[p] < 0 && m.distilling() {
				warmAt[p] = j + 1
			}
		}
		if (j+1)%50 != 0 {
			continue
		}
		for q, m := range models {
			if err := m.Publish(&d[q]); err != nil {
				t.Fatal(err)
			}
		}
		for q, m := range models {
			if err := m.Merge(&d[1-q]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for q, m := range models {
		s := &m.schedule
		if m.clock() != uint64(len(evs)) || s.events != own[q] || s.merged != own[1-q] {
			t.Fatalf("model %d: clock %d (events %d, merged %d), want %d (%d own)", q, m.clock(), s.events, s.merged, len(evs), own[q])
		}
		if want := uint64(len(evs)) / uint64(cfg.RefitEvery); s.periods < want-1 || s.periods > want {
			t.Fatalf("model %d: %d ρ periods, want about %d", q, s.periods, want)
		}
		if want := own[q] / uint64(cfg.RefitEvery); s.refits != want {
			t.Fatalf("model %d: %d refits, want %d", q, s.refits, want)
		}
		// Its own count reached the warm-up at stream event 200; the
		// clock at 100, plus at most a merge interval.
		if warmAt[q] < cfg.WarmUp || warmAt[q] > cfg.WarmUp+50 {
			t.Fatalf("model %d: warm-up over at stream event %d, want within 50 after %d", q, warmAt[q], cfg.WarmUp)
		}
	}
}

// A model with merged events encodes version 11 with its clock, reads back
// to the same bytes, and goes on as the model does, ρ periods included,
// whether it is copied between a merge and its next event, where a
// period is due, or after that event, which ended it. Labelled version 10, the CLCK section is where USER
// belongs. A model that merged no events encodes as before.
func TestClockEncoding(t *testing.T) {
	m, partner, d := cursorModel(t, 6)
	if v := m.Encoding(); v == clockVersion {
		t.Fatalf("a model without merged events encodes version %d", v)
	}
	stepAll(t, partner, mergeStream(170, 8))
	if err := partner.Publish(&d); err != nil {
		t.Fatal(err)
	}
	if err := m.Merge(&d); err != nil {
		t.Fatal(err)
	}
	if !m.periodDue() {
		t.Fatal("the merge put no ρ period due: nothing to carry over")
	}
	b := encode(t, m)
	if v := binary.LittleEndian.Uint32(b[8:]); v != clockVersion || m.Encoding() != clockVersion {
		t.Fatalf("version %d (Encoding %d), want %d", v, m.Encoding(), clockVersion)
	}
	back := cloneModel(t, m)
	if !bytes.Equal(encode(t, back), b) || back.clock() != m.clock() || back.schedule.periods != m.schedule.periods {
		t.Fatal("read back otherwise")
	}
	evs := mergeStream(11, 9) // within the period after the one due
	stepAll(t, m, evs[:1])    // the period due ends here
	stepAll(t, back, evs[:1])
	later := cloneModel(t, m)
	stepAll(t, m, evs[1:])
	stepAll(t, back, evs[1:])
	stepAll(t, later, evs[1:])
	if !bytes.Equal(encode(t, back), encode(t, m)) || !bytes.Equal(encode(t, later), encode(t, m)) {
		t.Fatal("a model read back went on otherwise")
	}
	binary.LittleEndian.PutUint32(b[8:], gateVersion)
	if _, err := ReadModel(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 11 relabelled 10: %v, want ErrCorrupt", err)
	}
}

// A delta that would take the clock past what a model counts is refused.
func TestMergeRefusesAbsurdEvents(t *testing.T) {
	m, _, d := cursorModel(t, 7)
	d.Events = maxSharedEvents + 1
	if err := m.Merge(&d); err == nil || m.schedule.merged != 0 {
		t.Fatalf("merged %d events: %v", m.schedule.merged, err)
	}
}
