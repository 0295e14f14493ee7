// Package consumer turns raw input records into events for the model and
// runs the processing loop that joins a Source, the model and the sinks.
//
// It owns:
//   - the JSON-lines event format: Decode parses and validates one line into
//     an Event, and reports a bad line as a *RecordError whose Reason is one
//     of a small fixed set (Reasons) usable as a metric label; it checks the
//     JSON as it parses (not_json is exactly what json.Valid rejects). A
//     Decoder decodes the same way and reuses the strings of recent ids
//     (copies, never views of the record, so they outlive it);
//   - the position of every record (an input.Position, either file+line
//     or topic+partition+offset), carried by every output record;
//   - sources: FileSource reads JSON lines from a file or any io.Reader;
//     KafkaSource reads a topic as a member of a consumer group
//     (github.com/segmentio/kafka-go ConsumerGroup, explicit generations).
//     On every assignment a partition starts at the later of the position
//     the model has reached (the checkpoint's, or what Next returned
//     since) and the committed group offset: commits follow checkpoints
//     and handovers, so a later commit means another member has emitted
//     the records in between. When a rebalance takes the partitions away,
//     the source stops returning their records and sends a barrier
//     (Message.Task) through the loop, where the service flushes,
//     checkpoints and commits before the group rejoins. One fetcher per
//     assigned partition feeds a bounded channel; both sources pass the
//     suite in consumertest;
//   - Run, the processing loop. It reads records, decodes them, calls
//     Model.Step (score with the model as it was, then learn), hands the
//     scored record to a Sink, routes bad records to a DeadLetter with their
//     reason and counts them.
//
// Invariants:
//   - bad input never stops the loop and is never dropped silently: every
//     record read is either scored, dead-lettered with a reason, or (blank
//     lines and empty messages only) counted as Blank;
//   - exactly one goroutine owns the model: the goroutine that calls Run.
//     Reading and writing run beside it, joined by bounded channels, so
//     memory is bounded and a slow sink slows the reader (backpressure).
//     Records go from one goroutine to the next in chunks of up to
//     chunkLen, but none waits for a later record: the reader hands on
//     what it read once its source has nothing ready (Ready), and the
//     model goroutine what it stepped before it waits for input;
//   - a Partitioned model (one model per input partition) is stepped a
//     batch at a time, its partitions at the same time on a fixed pool of
//     goroutines (Options.Workers): each partition's model steps its
//     records in input order on one goroutine, so scores do not depend on
//     the batching or the number of workers. A batch starts while up to
//     two before it are still being stepped (batchDepth), if its records
//     are read already: a model's lane of the new batch is chained after
//     its lane of the batch before, so a worker whose lane ended early
//     goes on rather than wait for the slowest. For is called as a batch
//     is formed, After and Skipped as an earlier batch is finished (the
//     models may be past its records: only a record with BatchEnd sees
//     them at rest, and Options.Drain asks for one); tasks and barriers
//     run only when every model is at rest. Once every worker has a lane,
//     records are decoded on their lane too (each lane its own Decoder),
//     not on the reader; For is still called only for a partition with a
//     record that decodes;
//   - records leave the loop in input order;
//   - the ground-truth field of an event is never given to the model.
//
// What it must not do: know model internals (the model is the one-method
// Model interface), decide scores, or know how sinks encode their records
// (Sink and DeadLetter are declared here, implemented in package producer).
package consumer
