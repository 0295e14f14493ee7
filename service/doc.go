// Package service is denoiser's stream stage (`denoiser run`): a member of
// a Kafka consumer group that scores every input record with the online
// model and writes it to the output topic, bad records to the dead-letter
// topic, with Badger checkpoints, Prometheus metrics, health endpoints and
// a bounded graceful stop. It wires consumer.KafkaSource, consumer.Run,
// producer.KafkaSink / KafkaDeadLetter and state.Store together; the
// operator's view is in docs/operations.md.
//
// # What it owns
//
//   - Config: the YAML configuration with defaults, Validate (errors name
//     the field and how to set it), DENOISER_* environment overrides
//     (ApplyEnv) and dotted-path overrides for flags (Set); Layers applies
//     them in order (file, environment, flags, --set) for `denoiser run`.
//   - The start: New restores the model from the last checkpoint, an
//     Initial (FromSnapshot) or the configuration, and stops when its
//     context ends.
//   - The checkpoint schedule: every Checkpoint.EveryEvents records, and
//     every Checkpoint.Interval while records arrive. On the model
//     goroutine a checkpoint flushes the output (so that it never covers a
//     record whose output could be lost), copies what changed in the
//     model into a reused frozen copy and copies the positions; a saver
//     goroutine writes to the store what changed since the last committed
//     checkpoint (a delta) or, when the store starts a new base, the whole
//     model, and commits it with the positions in one last transaction,
//     then commits the offsets to the group (for lag monitoring only). The
//     loop pauses for the flush and the copy, never for the encoding or
//     the Badger write. A restore applies the base and its deltas. A
//     failed checkpoint
//     (a full disk: state.ErrNoSpace) is counted, fails /readyz with its
//     error and is tried again every Checkpoint.Interval, with or without
//     new records; the stream goes on (docs/operations.md, "A full disk").
//   - Metrics (denoiser_*, on an injected or private registry), /metrics,
//     /healthz, /readyz, and a hook for more routes (Options.Handlers).
//   - Live snapshots (LiveSnapshots, Options.LiveSnapshots): /snapshot
//     writes or downloads a snapshot of the running model, taken on the
//     model goroutine between two records; package snapshot writes the
//     file.
//   - Tasks on the model goroutine (Submit, ModelState): the way for
//     another component (a live snapshot) to read the model consistently.
//
// # Invariants
//
//  1. One goroutine owns the model: the one that calls Run.
//  2. Exactly-once model state on one member: the model and the next input
//     position of every partition it has read are saved together; a
//     restart restores both, and the source starts every partition at the
//     restored position, unless the committed group offset is later
//     (another member processed the records in between: the fence).
//  3. At-least-once output: a checkpoint is taken only after every record
//     it covers has been acknowledged by the output broker; records after
//     it are processed again after a crash and re-emitted byte-identical,
//     with their source position in the headers and the value.
//  4. Run returns within Config.ShutdownTimeout of its context ending,
//     even with the broker gone; only a drain that finished cleanly is
//     followed by a final checkpoint.
//  5. Handover: when a rebalance takes the partitions away, the member
//     flushes, checkpoints and commits on the model goroutine (a barrier
//     through the loop) before it rejoins, so the next owner starts where
//     this member's output ends.
//  6. Partition state (state_layout partition, with a changelog topic):
//     each checkpoint also saves every assigned partition that moved to
//     the changelog, and offsets are committed only after that partition's
//     save; on each assignment, before anything is fetched, a partition
//     the member did not own in the generation just before is restored
//     from the changelog when that is further in the input than the
//     member's own state, and the source starts it there. A partition's
//     output is therefore that of a model stepped on the partition alone,
//     whichever members wrote it (checkpointer.assign, saveChangelog).
//
// What it must not do: know model internals (it only steps, serialises and
// summarises the model) or encode records (package producer does).
package service
