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
//
// Once a copy was marked saved (MarkSaved), the rows it lists as changed
// are those changed since then, not since its last sync, so that
// WriteDelta writes everything a store lacks even when the saves between
// failed; they are copied again, which costs only their copy.
func (m *Model) FrozenCopy(dst *Model) *Model {
	if dst == nil {
		dst = &Model{src: &rand.PCG{}}
	}
	nu, ni, incremental := m.listChanges(dst)
	users, items := dst.changedUsers, dst.changedItems

	dst.frozen = true
	dst.cfg, dst.k, dst.d = m.cfg, m.k, m.d
	*dst.src = *m.src
	dst.users.copyFrom(&m.users, users, nu)
	dst.items.copyFrom(&m.items, items, ni)
	dst.transition.copyFrom(&m.transition, users, nu, items, ni)
	if m.itemPriors != nil {
		dst.itemPriors = syncRows(dst.itemPriors, m.itemPriors, userPriorWidth, items, ni)
	} else {
		dst.itemPriors = nil
	}
	dst.cooc = m.cooc.copyInto(dst.cooc, users, items, nu, ni)
	dst.popular.copyFrom(&m.popular)
	dst.classifier.copyFrom(&m.classifier)
	dst.noisyHead.copyFrom(&m.noisyHead)
	dst.mixture.copyFrom(&m.mixture)
	dst.context = m.context
	dst.context.acc = nil // what the model publishes is the model's
	dst.schedule.copyFrom(&m.schedule)
	dst.bounds = m.bounds
	dst.cursors = append(dst.cursors[:0], m.cursors...)
	if m.admission == nil {
		dst.admission = nil
	} else {
		if dst.admission == nil {
			dst.admission = &admission{}
		}
		dst.admission.copyFrom(m.admission, dst.changedBlocks, incremental)
	}
	if len(dst.scratch.identity) != len(m.scratch.identity) { // Summary reads it
		dst.scratch.identity = append(dst.scratch.identity[:0], m.scratch.identity...)
	}
	return dst
}

// listChanges lists in dst.changedUsers and dst.changedItems the rows
// that changed since dst, as a copy of m, was last synced (or, once it
// was saved, last saved), new rows included, and returns how many user and
// item rows dst holds and whether it holds m as it was (incremental):
// none and false unless dst is a copy of m. It lists the admission
// sketch's changed blocks in dst.changedBlocks the same way. It starts a
// new epoch of m. A frozen m does not change, has no stamps and is only
// read.
func (m *Model) listChanges(dst *Model) (nu, ni int, incremental bool) {
	dst.changedUsers, dst.changedItems = dst.changedUsers[:0], dst.changedItems[:0]
	dst.changedBlocks = dst.changedBlocks[:0]
	if m.frozen {
		dst.origin, dst.delta = nil, deltaBase{}
		return 0, 0, false
	}
	incremental = dst.origin == m
	if incremental {
		nu, ni = dst.users.len(), dst.items.len()
		since := dst.synced
		if dst.delta.saved {
			since = dst.delta.sync
		}
		dst.changedUsers = changedRows(dst.changedUsers, m.users.stamps, since)
		dst.changedItems = changedRows(dst.changedItems, m.items.stamps, since)
		if m.admission != nil {
			dst.changedBlocks = changedRows(dst.changedBlocks, m.admission.stamps, since)
		}
	} else {
		dst.delta = deltaBase{} // what was saved of another model says nothing of m
	}
	m.epoch++
	dst.origin, dst.synced = m, m.epoch
	return nu, ni, incremental
}
