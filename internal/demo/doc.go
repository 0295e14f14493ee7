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
package demo
