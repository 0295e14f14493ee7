// Package input names places in denoiser's input: [Position], one type
// shared by the sources that produce positions (consumer), the checkpoint
// store that keeps them (state) and the snapshot file that carries them
// (snapshot).
//
// It owns the Position type, its text form and its order. It sits under
// consumer, the package that makes positions, but is a leaf of its own: it
// imports only the standard library, so that state and snapshot share the
// type without depending on Kafka (the rest of consumer), Badger or each
// other.
// It must not grow behaviour of its own: encodings of positions belong to
// the packages that write them (state/FORMAT.md, snapshot/FORMAT.md,
// consumer/FORMAT.md).
package input
