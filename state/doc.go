// Package state keeps denoiser's checkpoints in Badger
// (github.com/dgraph-io/badger/v4): the serialised model and the next input
// position of every owned partition, committed together, atomically, so that a
// restart resumes exactly where the last checkpoint left off (DESIGN.md §4).
//
// # What it owns
//
//   - [Store]: one Badger database in one directory, opened with [Open].
//   - [Checkpoint]: model bytes, per-partition positions, a model version.
//   - Background value-log garbage collection, stopped by [Store.Close].
//
// It must not know Kafka (positions are plain topic/partition/offset
// triples) nor the model's internals (the model is opaque bytes).
//
// # Invariants
//
//  1. A checkpoint is all or nothing. [Store.SaveFrom] (and [Store.Save],
//     which calls it) writes the model chunks under a new generation's key
//     prefix, a chunk to a transaction, and then the positions and the
//     commit record, which names that generation, in ONE last read-write
//     transaction. Nothing reads a generation the commit record does not
//     name, so the checkpoint appears with that transaction, whole, or not
//     at all. [Store.Load] reads the commit record, the chunks it names and
//     the positions in ONE read-only transaction, i.e. one MVCC snapshot.
//     Load therefore returns exactly the last checkpoint whose Save
//     returned nil (or an older one if a Save was running concurrently and
//     had not committed), never a mix.
//  2. Generations increase by one with every committed Save, starting at 1,
//     across restarts. Load reports the generation it read.
//  3. A checkpoint replaces the previous one entirely: positions absent from
//     the new checkpoint are deleted in the same transaction.
//  4. Load verifies what it read against the commit record (chunk count,
//     model length, CRC-32C of the model, number of positions) and returns
//     [ErrCorrupt] rather than a damaged checkpoint.
//  5. Save does not modify or retain the checkpoint it is given after it
//     returns.
//  6. A Save that fails, or a process killed during one, leaves the previous
//     checkpoint in place. The chunks it wrote belong to a generation no
//     commit record names: the collector drops them, or the next Save,
//     which takes the same generation number, writes over them (Load reads
//     only the chunks the commit record counts).
//
// # Why the model is written a chunk at a time, and what makes it safe
//
// Read from badger v4.9.6 (txn.go, value.go, memtable.go):
//
//   - Txn.Commit sends all entries of a transaction as ONE write request. Each
//     entry is marked bitTxn and the request ends with a bitFinTxn marker. On
//     start-up, the memtable WAL replay (memtable.go, logFile.iterate) only
//     applies entries whose transaction's finish marker was also written; a
//     crash in the middle of a commit therefore loses the whole transaction,
//     never part of it. Readers see a commit only once its timestamp is marked
//     done, after all its entries are in the memtable (oracle watermarks).
//     With SyncWrites (the default), a commit returns after its writes are
//     fsynced, so every chunk is on disk before the commit record is written.
//   - Commit returns after the value is copied: into the memory-mapped value
//     log for values of at least ValueThreshold (1 MiB), into the memtable's
//     arena below that. The chunk buffer is therefore reused for the next
//     chunk: a save costs one 4 MiB buffer, not a copy of the model. (Before
//     SaveFrom the service encoded the model into a buffer of its full size
//     and handed that to one transaction; BenchmarkCheckpointMemory: a 256
//     MiB model's save peaked at +550 MiB of heap that way, +44–48 MiB now.)
//   - The value-log writer encodes each entry into a temporary buffer before
//     copying it to the mmapped file, so one value costs its size again in
//     heap while it is written: 4 MiB chunks keep that small. One value may
//     not exceed ValueLogFileSize either.
//   - The transaction size limit (ErrTxnTooBig: ~15% of MemTableSize, and a
//     maximum entry count) bounds the last transaction: positions and the
//     commit record. Tens of thousands of positions fit.
//
// Badger's WriteBatch is not used for the chunks: its own splitting into
// transactions gains nothing here, and each chunk's commit is what orders
// it before the commit record. The price of a transaction per chunk is an
// fsync per 4 MiB (BenchmarkSave: 32 MiB in 73–79 ms against 60–67 ms as
// one transaction), paid beside the stream. A model may be at most
// [MaxModelSize].
//
// # Key layout (layout version 1)
//
//	meta/checkpoint                          commit record, see below
//	model/<generation %020d>/<chunk %08d>    model bytes, 4 MiB chunks
//	pos/<escaped topic>/<partition %010d>    next offset, 8 bytes big-endian
//
// The topic is escaped so that '/' cannot split it: '%' becomes "%25" and '/'
// becomes "%2F" (Kafka topic names contain neither, so keys stay readable).
// Positions are keyed per partition so that the state of one partition can
// later be read or handed to another instance without reading the others
// (DESIGN.md §5); [Store.Position] reads one.
//
// The commit record (49 bytes, big-endian) is
//
//	"DNCP" | layout u8 = 1 | generation u64 | model version u64 |
//	saved at (Unix ns) i64 | model length u64 | chunks u32 |
//	CRC-32C (Castagnoli) of the model u32 | positions u32
//
// A database without a commit record is empty; Load returns ok == false.
//
// # Model generations and disk space
//
// Each Save writes the model under a new generation prefix. Superseded
// generations are removed by the garbage collector with Badger's DropPrefix,
// not deleted by Save. This matters: Badger reclaims value-log space only
// from files whose "discard statistics" say they are mostly garbage, and
// those statistics are only updated by LSM compactions. A checkpoint store
// has few keys, so its memtable would almost never fill, flush and compact;
// overwritten models would pile up in the value log for thousands of
// checkpoints. DropPrefix flushes the memtable and compacts the dropped keys
// away, recording their value-log bytes as discardable; RunValueLogGC then
// rewrites and deletes those files. DropPrefix blocks writes and ignores
// MVCC snapshots, so the collector takes both of the store's locks while it
// runs: Save and Load wait for it (milliseconds for a small LSM).
//
// With GC disabled (Options.GCInterval < 0), superseded generations stay on
// disk until a collection runs; Load is unaffected.
//
// # Durability
//
// By default every transaction of a Save is fsynced before the next one
// starts, and the last before Save returns (Badger SyncWrites).
// Options.NoSync trades that for speed: a process crash still loses nothing
// (the data is in the page cache); a machine crash may lose the last
// checkpoints, or leave the last one with chunks missing, which Load then
// reports as ErrCorrupt. It never returns a torn checkpoint as good.
//
// # Empty log files after a crash
//
// Badger v4.9.6 creates a value-log or memtable WAL file and sizes it in two
// steps. A process killed between them leaves a file of zero bytes, and
// badger.Open then fails for good ("Open existing file: ...vlog: Create a
// new file"; upstream dgraph-io/badger#2207, fix not released). Without a
// repair, 18 of 40 runs of TestCrashNeverTearsACheckpoint hit it. [Open]
// therefore first removes zero-length *.vlog and *.mem files, holding
// Badger's directory lock so that a running Badger's files are never
// touched, and logs a warning for each. A zero-length log holds no entry,
// not even its header, so nothing committed is lost.
package state
