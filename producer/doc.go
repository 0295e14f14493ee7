// Package producer writes what the processing loop produces: scored records
// and dead-lettered records.
//
// It owns the output encoding (encode.go, the one place that turns a
// consumer.Result into bytes; the Kafka writer reuses it), the file sinks
// and the Kafka writers (kafka.go).
//
// Kafka: KafkaSink writes scored records with key = user (murmur2, the Java
// client's partitioner, so that downstream partitioning by user holds),
// value = the scored JSON below, and headers source_topic,
// source_partition, source_offset (or source_file, source_line) and
// model_version. KafkaDeadLetter writes the dead-letter JSON below, no key,
// with headers reason, error and the source position. Both batch records
// (BatchSize, or BatchTimeout, 10 ms by default) and send the batches in
// order from one goroutine; a batch that fails is retried, its failed
// records only, for RetryFor (1 min by default); after that the writer
// fails for good (ErrWriterFailed) and every later Write and Flush returns
// the error, so that consumption stops rather than drop output. At most
// MaxBatches batches are filling, queued or in flight: Write blocks beyond
// that (backpressure). Re-emitted records are byte-identical: the same
// Result gives the same key, value and headers.
//
// Scored record, one JSON object per line, fields in this fixed order, input
// fields only when present in the input:
//
//	{"user":"u1","item":"i9","ts":1700000000000,"event":"click","dwell_ms":8300,
//	 "rating":4,"truth":"noise","reliability":0.93,"p_clean":0.81,
//	 "clean_posterior":[0.19,0.81],"label":1,"distilled":null,"model_version":41,
//	 "source":{"file":"clicks.jsonl","line":42}}
//
// A Kafka source position is written "source":{"topic":"clicks","partition":3,"offset":1234}.
//
// Dead-letter record, one JSON object per line:
//
//	{"reason":"out_of_range","error":"dwell_ms: -5 is outside 0..86400000",
//	 "source":{"file":"clicks.jsonl","line":7},"raw":"{\"user\":...}"}
//
// "raw" is the record as read when it is valid UTF-8, otherwise "raw_base64"
// holds it base64-encoded; a record over consumer.MaxRawBytes is cut there and
// carries "raw_truncated":true and "raw_bytes" (its length as read: a file
// line over consumer.MaxLineBytes is read to MaxLineBytes+1 bytes). Both
// formats, field by field, with the Kafka keys and headers: FORMAT.md.
//
// Invariants: the encoding is deterministic, the same record gives the same
// bytes (scores at the nearest multiple of 10⁻⁹ in at most 9 decimals,
// other floats in strconv's shortest exact form, non-finite floats as
// null); file outputs appear atomically
// (written to a temporary file in the same directory, fsynced and renamed on
// Close), so a failed run never leaves a half-written file under the final
// name.
//
// What it must not do: decide scores or read input.
package producer
