// Package state keeps denoiser's checkpoints in Badger
// (github.com/dgraph-io/badger/v4): the serialised model and the next input
// position of every owned partition, written together, atomically, so that a
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
//  1. A checkpoint is all or nothing. [Store.Save] writes every key of a
//     checkpoint — model chunks, positions, and the commit record — in ONE
//     Badger read-write transaction. [Store.Load] reads them in ONE read-only
//     transaction, i.e. one MVCC snapshot. Load therefore returns exactly the
//     last checkpoint whose Save returned nil (or an older one if a Save was
//     running concurrently and had not committed), never a mix.
//  2. Generations increase by one with every committed Save, starting at 1,
//     across restarts. Load reports the generation it read.
//  3. A checkpoint replaces the previous one entirely: positions absent from
//     the new checkpoint are deleted in the same transaction.
//  4. Load verifies what it read against the commit record (chunk count,
//     model length, CRC-32C of the model, number of positions) and returns
//     [ErrCorrupt] rather than a damaged checkpoint.
//  5. Save does not modify or retain the checkpoint it is given after it
//     returns; the caller must not modify cp.Model while Save runs (the model
//     chunks are handed to Badger without a copy).
//
// # Why one transaction is enough, and why the model is chunked
//
// Read from badger v4.9.6 (txn.go, value.go, memtable.go):
//
//   - Txn.Commit sends all entries of a transaction as ONE write request. Each
//     entry is marked bitTxn and the request ends with a bitFinTxn marker. On
//     start-up, the memtable WAL replay (memtable.go, logFile.iterate) only
//     applies entries whose transaction's finish marker was also written; a
//     crash in the middle of a commit therefore loses the whole checkpoint,
//     never part of it. Readers see a commit only once its timestamp is marked
//     done, after all its entries are in the memtable (oracle watermarks).
//   - The transaction size limit (ErrTxnTooBig: ~15% of MemTableSize, and a
//     maximum entry count) counts a value stored in the value log as a 12-byte
//     pointer, not its length. Values of at least ValueThreshold (1 MiB) go to
//     the value log. So a large model does not hit the limit — as long as it
//     is not stored as many small values.
//   - One value may not exceed ValueLogFileSize, and the value-log writer
//     encodes each entry into a temporary buffer before copying it to the
//     mmapped file: a single 500 MB value costs another 500 MB of heap. All
//     entries of one request go to the same value-log file, whose offsets are
//     uint32, so one transaction must stay under 4 GiB.
//
// Hence: the model is split into 4 MiB chunks (each ≥ ValueThreshold except
// possibly the last, which is < 1 MiB and fits the limit inline), all set in
// the same transaction; a model may be at most [MaxModelSize]. Badger's
// WriteBatch is NOT used: it splits into several transactions when full and
// is therefore not atomic.
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
// By default every Save is fsynced before it returns (Badger SyncWrites).
// Options.NoSync trades that for speed: a process crash still loses nothing
// (the data is in the page cache), a machine crash may lose the last
// checkpoints — never tear one.
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
