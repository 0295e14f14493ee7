// Package producertest holds the test suites every scored-record sink and
// every dead-letter writer must pass, so that the file and the Kafka
// implementations are held to the same contract: every record written comes
// back, byte-identical to the encoding of package producer and carrying its
// source position; records keep their write order (per output stream); what
// a writer reports as delivered after Flush is everything written; Close
// flushes and is idempotent; writes after Close fail; a cancelled context
// never loses or half-writes a record.
//
// It must not be imported by non-test code.
package producertest
