// Package report measures how well scores separate genuine interactions
// from noise, and writes the replay report.
//
// It owns:
//   - exact ranking metrics: ROCAUC (Mann-Whitney with midranks for ties,
//     equal to the trapezoidal area under the ROC curve) and
//     AveragePrecision (PR-AUC as the step-wise sum over distinct
//     thresholds, ties forming one threshold, as scikit-learn computes it);
//   - calibration of the scores that are probabilities: ECE and
//     ReliabilityDiagram over CalibrationBins equal-width bins;
//   - Truth, where ground truth comes from: the event's "truth" field, a
//     dwell threshold, or a rating threshold;
//   - Collector, a consumer.Sink wrapper that records each scored event's
//     truth and scores on the way to the real sink;
//   - Report, the JSON replay report, and its human summary;
//   - Progress, a one-line progress display for terminals.
//
// Orientation: the positive class is "genuine" and higher scores must mean
// more genuine. p_clean and reliability are used as they are; the baseline's
// per-event loss is negated (a high loss means likely noise, the signal
// loss-based denoisers such as T-CE use). Events for which the truth mode
// has no answer are left out of the metrics and counted.
//
// What it must not do: influence the scores (it only observes them) or
// give ground truth to the model.
package report
