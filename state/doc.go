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
//   - The layout of checkpoints in the database, specified in FORMAT.md.
//   - Background garbage collection of superseded model generations and of
//     the value log, stopped by [Store.Close].
//
// # Invariants
//
//  1. A checkpoint is all or nothing. [Store.SaveFrom] (and [Store.Save])
//     writes the model chunks under a new generation, then the positions
//     and the commit record, which names that generation, in ONE last
//     transaction; nothing reads a generation the commit record does not
//     name. [Store.Load] reads the record, its chunks and the positions in
//     ONE read-only transaction. Load therefore returns exactly the last
//     checkpoint whose Save returned nil (or an older one while a Save is
//     still committing), never a mix.
//  2. Generations increase by one with every committed Save, starting at 1,
//     across restarts. Load reports the generation it read.
//  3. A checkpoint replaces the previous one entirely: positions absent from
//     the new checkpoint are deleted in the same transaction.
//  4. Load verifies what it read against the commit record (chunk count,
//     model length, CRC-32C of the model, number of positions) and returns
//     [ErrCorrupt], never a damaged checkpoint.
//  5. Save does not modify or retain the checkpoint it is given after it
//     returns; SaveFrom buffers one chunk (4 MiB) of the model at a time.
//  6. A Save that fails, or a process killed during one, leaves the previous
//     checkpoint in place; what it wrote is garbage that readers ignore.
//  7. Unless Options.NoSync, a Save that returned nil survives a machine
//     crash. With NoSync a machine crash may lose the last checkpoints or
//     make Load report ErrCorrupt; a torn checkpoint is never returned as
//     good.
//  8. [Open] repairs what a crash can leave and Badger refuses (zero-length
//     value-log and WAL files), under Badger's directory lock, and never
//     removes anything that holds a committed write.
//  9. A full filesystem is an error, never a fault. Badger writes through
//     memory maps of sparse files, and a write into a page the filesystem
//     cannot back kills the process (SIGBUS). So, on Linux, [Open], every
//     chunk and commit of a Save, and each step of the collector first
//     measure the free space of the store's filesystem, and refuse with
//     [ErrNoSpace] what it does not cover with a reserve to spare: room
//     for Badger's own memtable flushes and compactions (the size of its
//     memtable logs and tables, plus 4 MiB) and, for Saves, for one
//     rewrite of the collector, so that it can always free what
//     superseded checkpoints hold. A refused Save leaves the previous
//     checkpoint in place and starts a collection. [Store.Close] does not
//     close Badger when its final flush would not fit (see Close). The
//     check cannot see another process that fills the filesystem between
//     it and the write: give the store a filesystem of its own.
//
// # What it must not do
//
// It must not know Kafka: positions are plain input.Position values (topic,
// partition, next offset), nor the model's internals: the model is opaque
// bytes, at most [MaxModelSize]. It serves no network requests and decides no
// schedule; when to checkpoint is the service's choice.
//
// Why the model is written a chunk at a time, why superseded generations are
// dropped by the collector rather than deleted by Save, what was read in
// Badger to make this safe, and the measurements behind it are in
// docs/design/state.md.
package state
