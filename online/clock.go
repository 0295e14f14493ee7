package online

import "math"

// The clock of a partition model (docs/design/partitions.md, "Built: the
// schedule follows the stream").
//
// A partition model steps its own partition's events, a third of the
// stream's with 3 partitions, so a warm-up and a ρ schedule counted in its
// own events last three times as long in the stream as one model's. The
// deltas it merges say how many events their publisher learned since its
// previous delta (Shared.Events); the model adds them to its clock,
// events + merged, and the warm-up (transitionActive, distilling) and the
// ρ periods (endPeriod: one each time the clock passes a multiple of
// RefitEvery, at the model's next own event) follow the clock. The
// mixture's refits stay one per RefitEvery of the model's own events:
// a refit fits the window, which fills with the model's own events, and
// a refit per RefitEvery of the clock would cost P times the refits of
// one model with P partitions.
//
// Without merges the clock is the model's events, a period ends exactly
// where a refit happens, and nothing differs from a model before the
// clock. The clock is model state: merged and periods are encoded (the
// CLCK section, encoding version 11) by a model that merged events.

// clock is the stream's events as far as the model knows them: its own
// and those of the deltas it merged.
func (m *Model) clock() uint64 { return m.schedule.events + m.schedule.merged }

// periodDue reports whether the clock has passed the end of the current ρ
// period.
func (m *Model) periodDue() bool {
	return m.clock()/uint64(m.cfg.RefitEvery) > m.schedule.periods
}

// maxSharedEvents bounds Shared.Events: no delta holds more events than a
// model could count.
const maxSharedEvents = math.MaxUint32 * 1024

// encodeClock writes the CLCK section's values: merged and periods, u64
// each.
func (m *Model) encodeClock(e *encoder) {
	e.u64(m.schedule.merged)
	e.u64(m.schedule.periods)
}

// decodeClock reads what encodeClock writes: periods no further than the
// clock's.
func (m *Model) decodeClock(d *decoder) {
	m.schedule.merged, m.schedule.periods = d.u64(), d.u64()
	if d.err == nil && (m.schedule.merged > maxSharedEvents || m.schedule.periods > m.clock()/uint64(m.cfg.RefitEvery)) {
		d.fail("clock: %d merged events, %d periods, %d events", m.schedule.merged, m.schedule.periods, m.schedule.events)
	}
}

// hasClock reports whether the model's encodings hold the CLCK section.
func (m *Model) hasClock() bool { return m.schedule.merged > 0 }
