// Package kafkatest gives tests a Kafka broker, so that one integration
// suite runs against two brokers: the real Apache Kafka named by the
// KAFKA_BROKERS environment variable when it is set (.ci/run starts one with
// scripts/kafka.sh), and an embedded kfake cluster
// (github.com/twmb/franz-go/pkg/kfake) otherwise, so that the suite also
// runs on a machine that has only Go.
//
// It owns: starting (and restarting) the embedded broker, creating uniquely
// named topics, producing records and reading a topic back.
//
// Tests of several packages may share one real broker at the same time
// (go test runs packages in parallel). A test that stops or restarts it
// must not disturb the others: New takes a shared lock on a lock file
// named after the broker address, Exclusive an exclusive one, held until
// the test ends.
//
// It must not be imported by non-test code.
package kafkatest
