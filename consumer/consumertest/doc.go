// Package consumertest holds the test suite every consumer.Source must pass,
// so that the file source and the Kafka source are held to the same
// contract: records in order, values intact, positions increasing and
// re-readable, cancellation honoured.
//
// It must not be imported by non-test code.
package consumertest
