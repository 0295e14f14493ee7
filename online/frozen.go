package online

import "math/rand/v2"

// FrozenCopy copies m into dst (nil: a new model), reusing dst's buffers,
// and returns dst. The frozen copy shares nothing that m goes on changing
// (ids are immutable strings and are shared), so another goroutine may
// encode it while m learns: a checkpoint pauses the stream for a memory
// copy, not for the encoding. The copy supports WriteTo and Summary; Step
// refuses it with ErrFrozen.
//
// When dst is the last frozen copy of m, only what changed since is
// copied: the user and item rows that m touched in between (their
// embeddings, step accumulators, transition offsets, recent items and
// co-occurrence state), the new rows, and the model's shared parameters,
// which are small. A model kept in two copies alternately works too: each
// copy knows which epoch it was synced at.
func (m *Model) FrozenCopy(dst *Model) *Model {
	if dst == nil {
		dst = &Model{src: &rand.PCG{}}
	}
	nu, ni := m.listChanges(dst)
	users, items := dst.changedUsers, dst.changedItems

	dst.frozen = true
	dst.cfg, dst.k, dst.d = m.cfg, m.k, m.d
	*dst.src = *m.src
	dst.users.copyFrom(&m.users, users, nu)
	dst.items.copyFrom(&m.items, items, ni)
	dst.transition.copyFrom(&m.transition, items, ni)
	dst.cooc = m.cooc.copyInto(dst.cooc, users, items, nu, ni)
	dst.popular.copyFrom(&m.popular)
	dst.classifier.copyFrom(&m.classifier)
	dst.noisyHead.copyFrom(&m.noisyHead)
	dst.mixture.copyFrom(&m.mixture)
	dst.context = m.context
	dst.schedule.copyFrom(&m.schedule)
	dst.bounds = m.bounds
	if m.admission == nil {
		dst.admission = nil
	} else {
		if dst.admission == nil {
			dst.admission = &admission{}
		}
		dst.admission.copyFrom(m.admission)
	}
	if len(dst.scratch.identity) != len(m.scratch.identity) { // Summary reads it
		dst.scratch.identity = append(dst.scratch.identity[:0], m.scratch.identity...)
	}
	return dst
}

// listChanges lists in dst.changedUsers and dst.changedItems the rows
// that dst, as a copy of m, holds but that changed since its last sync,
// and returns how many user and item rows dst holds: none unless dst is a
// copy of m. It starts a new epoch of m. A frozen m does not change, has
// no stamps and is only read.
func (m *Model) listChanges(dst *Model) (nu, ni int) {
	dst.changedUsers, dst.changedItems = dst.changedUsers[:0], dst.changedItems[:0]
	if m.frozen {
		dst.origin = nil
		return 0, 0
	}
	if dst.origin == m {
		nu, ni = dst.users.len(), dst.items.len()
		dst.changedUsers = changedRows(dst.changedUsers, m.users.stamps[:nu], dst.synced)
		dst.changedItems = changedRows(dst.changedItems, m.items.stamps[:ni], dst.synced)
	}
	m.epoch++
	dst.origin, dst.synced = m, m.epoch
	return nu, ni
}
