// Package state keeps denoiser's checkpoints in Badger
// (github.com/dgraph-io/badger/v4): the serialised model and the next input
// position of every owned partition, committed together, atomically, so that a
// restart resumes exactly where the last checkpoint left off.
//
// # What it owns
//
//   - [Store]: one Badger database in one directory, opened with [Open]; one
//     Store per directory at a time (Badger holds a directory lock).
//   - [Checkpoint]: model bytes, per-partition positions, a model version.
//     The model is a chain: a base (the whole model) and the deltas saved
//     after it ([Store.SaveModel]), which [Store.Load] returns in order.
//   - When a save writes a delta and when a new base ([Options.MaxDeltas],
//     [Options.DeltaShare]).
//   - The layout of checkpoints in the database, specified in FORMAT.md.
//   - Background garbage collection of superseded chains and of the value
//     log, stopped by [Store.Close].
//
// # Invariants
//
//  1. A checkpoint is all or nothing. [Store.SaveModel] (and SaveFrom,
//     Save) writes the model chunks (a base or a delta) under a new
//     generation, then the positions, the generation's blob record and
//     the commit record, which names the chain's base and that
//     generation, in ONE last transaction; nothing reads a generation the
//     commit record does not name. [Store.Load] reads the record, its
//     chain and the positions in ONE read-only transaction. Load therefore
//     returns exactly the last checkpoint whose Save returned nil (or an
//     older one while a Save is still committing), never a mix.
//  2. A delta is written only against the committed generation (the
//     writer names it, [ModelWriter.Since]), so a chain is its base and
//     every delta saved after it, in order. It holds at most
//     Options.MaxDeltas deltas, together at most Options.DeltaShare of
//     the base's length; a save that would pass either writes a new base,
//     which supersedes the chain.
//  3. Generations increase by one with every committed Save, starting at 1,
//     across restarts. Load reports the generation it read and its base.
//  4. A checkpoint replaces the previous one entirely: positions absent from
//     the new checkpoint are deleted in the same transaction.
//  5. Load verifies what it read against the commit and blob records
//     (kinds, chunk counts, lengths, CRC-32C of each generation, number of
//     positions) and returns [ErrCorrupt], never a damaged checkpoint.
//  6. Save does not modify or retain the checkpoint it is given after it
//     returns; SaveModel buffers one transaction of the model at a time
//     (up to four chunks of 4 MiB).
//  7. A Save that fails, or a process killed during one, leaves the previous
//     checkpoint in place; what it wrote is garbage that readers ignore.
//  8. Layout 1 (FORMAT.md), written before deltas, is read as a chain of
//     one base.
//  9. Unless Options.NoSync, a Save that returned nil survives a machine
//     crash. With NoSync a machine crash may lose the last checkpoints or
//     make Load report ErrCorrupt; a torn checkpoint is never returned as
//     good.
//  10. [Open] repairs what a crash can leave and Badger refuses (zero-length
//     value-log and WAL files), under Badger's directory lock, and never
//     removes anything that holds a committed write.
//  11. A full filesystem is an error, never a fault. Badger writes through
//     memory maps of sparse files, and a write into a page the filesystem
//     cannot back kills the process (SIGBUS). So, on Linux, [Open], every
//     chunk and commit of a Save, and each step of the collector first
//     measure the free space of the store's filesystem, and refuse with
//     [ErrNoSpace] what it does not cover (a base or a delta alike) with a
//     reserve to spare: room
//     for Badger's own memtable flushes and compactions (the size of its
//     memtable logs and tables, plus 4 MiB) and, for Saves, for one
//     rewrite of the collector, so that it can always free what
//     superseded checkpoints hold. A refused Save leaves the previous
//     checkpoint in place and starts a collection. [Store.Close] does not
//     close Badger when its final flush would not fit (see Close). The
//     check cannot see another process that fills the filesystem between
//     it and the write: give the store a filesystem of its own.
//
// # The changelog
//
// [Changelog] is the store of record of per-partition checkpoints: a
// compacted Kafka topic that [OpenChangelog] creates and checks, from which
// any member restores a partition ([Changelog.Load]: the newest complete
// checkpoint by epoch, then next offset; torn saves and zombies of lower
// epochs lose). Its records and why compaction never deletes what the newest
// checkpoint needs are in docs/design/changelog.md. It is the only part of
// the package that knows Kafka; the Store does not.
//
// # What it must not do
//
// The Store must not know Kafka: positions are plain input.Position values
// (topic, partition, next offset). Neither part knows the model's internals:
// the model is opaque bytes, at most [MaxModelSize]. It serves no network requests and decides no
// schedule; when to checkpoint is the service's choice.
//
// Why the model is written a chunk at a time and as deltas, why superseded
// generations are dropped by the collector rather than deleted by Save,
// what was read in Badger to make this safe, and the measurements behind
// it are in docs/design/state.md.
package state
