// Package snapshot is denoiser's portable, versioned model file: the whole
// online model (configuration, embeddings with their ids, classifier,
// transition network, GMM, co-occurrence sketches, random-source state) and
// the input positions it has consumed up to, in one self-checking file that
// moves between machines, serves as a backup and starts a new instance warm.
// The format is specified in FORMAT.md.
//
// # What it owns
//
//   - The file format: [Write] / [WriteFile] (atomic: temporary file, fsync,
//     rename) and [Read] / [ReadFile], one reader per format version.
//   - Export from and import into a checkpoint store ([Export], [Import]),
//     through the small [Loader] / [Saver] interfaces.
//   - Inspection ([Inspect], [Diff]) for `denoiser snapshot inspect|diff`.
//
// # Invariants
//
//  1. Streaming: writing holds one 1 MiB frame buffer beside the model;
//     reading holds one frame beside the model being built. A declared
//     length never allocates more than the bytes actually present (beyond
//     fixed small limits), so a hostile or damaged file cannot exhaust
//     memory.
//  2. Nothing damaged is accepted: every frame's CRC-32C is checked before
//     its payload is decoded, and the whole file's CRC-32C before [Read]
//     returns. Errors wrap exactly one of [ErrBadMagic],
//     [ErrUnsupportedVersion], [ErrTruncated], [ErrChecksum], [ErrCorrupt]
//     (or are I/O errors). Bad data never panics.
//  3. A reader reads every format version up to [FormatVersion] and refuses
//     newer ones; testdata/v<N>.snap is a golden file per version.
//  4. Deterministic: the same model, positions and metadata give the same
//     bytes, and a model read back continues exactly as the one written.
//
// # What it must not do
//
// It must not depend on Badger or Kafka: checkpoint stores are reached
// through [Loader] and [Saver] (cmd/denoiser adapts *state.Store). It must
// not serve HTTP: live snapshots of a running stream (/snapshot) are
// package service's, which writes them with [WriteFile]. It must not Step a
// model: a snapshot only reads it.
package snapshot
