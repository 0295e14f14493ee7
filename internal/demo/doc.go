// Package demo runs the whole stream service end to end on one machine
// with nothing but Go: an embedded Kafka broker
// (github.com/twmb/franz-go/pkg/kfake) in the process, the input, scored
// and dead-letter topics, a recorded event log produced into the input
// topic, the service (package service) as a member of a consumer group,
// and the scored topic read back into the same report `denoiser replay`
// prints (ROC-AUC and PR-AUC against the ground truth, T̂, the GMM). It is
// what `denoiser-lab demo` and `make demo` run.
//
// It owns nothing the service does not: it only wires a broker, a producer
// and a reader around it. It must not be used as a broker for anything
// but the demo (the broker lives and dies with Run).
//
// Invariants:
//
//   - Every record of the input is accounted for: the demo waits until
//     the members have processed as many records as the input has
//     non-blank lines, and the report counts them scored (events),
//     dead-lettered (invalid, by reason) or blank, as replay's does. A
//     line over consumer.MaxLineBytes is produced as the input's reader
//     keeps it (its first MaxLineBytes+1 bytes), and the embedded broker
//     and the producer take records that large, so that it reaches the
//     service, which dead-letters it as too_large, as replay does; the
//     demo neither drops nor counts a record itself.
//   - Options are checked (Options.Validate) before anything starts: no
//     broker, no record produced, no HTTP server. More members than
//     partitions are refused (a member without a partition would wait for
//     records forever), and so is a taken HTTP address, with what to pass
//     instead.
//   - Seconds measure the service, from the later of the first record
//     produced and the last poll that found nothing processed, to the
//     poll that found everything processed; a rate is reported only over
//     at least 50 ms (events_per_sec is 0 under it, and the progress line
//     says so), as the polls bound the span to within a few milliseconds.
package demo
