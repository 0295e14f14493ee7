#!/bin/sh
# Regenerates cmd/denoiser/default.pgo, the CPU profile that `go build`
# uses for profile-guided optimisation of the denoiser binary (Go selects
# default.pgo in a main package's directory: -pgo=auto, the default since
# Go 1.21). The profile merges three workloads of the service's hot path:
#
#   - replay of the shipped log (TestReplayGolden: decode, step, encode);
#   - BenchmarkStep, the model's step on a stream with dwell and types, on
#     one without dwell (the type's instrument) and on one of (user, item,
#     time) only (the gap's instrument and the bursts);
#   - BenchmarkPipeline, the service end to end on the embedded broker.
#
# PGO changes which calls are inlined and how hot code is laid out, never
# a result: the output stays byte for byte the same (docs/perf.md,
# "Profile-guided optimisation"). Regenerate after a change that moves the
# hot path (`make pgo`, about half a minute), and commit the file.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$GO test ./cmd/denoiser -run '^TestReplayGolden$' -count 5 \
	-o "$tmp/cmd.test" -cpuprofile "$tmp/replay.prof" >/dev/null
$GO test ./online -run '^$' -bench '^BenchmarkStep$/^rgbt(-no-dwell|-bare)?$' -benchtime 2s \
	-o "$tmp/online.test" -cpuprofile "$tmp/step.prof" >/dev/null
$GO test ./service -run '^$' -bench '^BenchmarkPipeline$' \
	-o "$tmp/service.test" -cpuprofile "$tmp/pipeline.prof" >/dev/null
$GO tool pprof -proto "$tmp/replay.prof" "$tmp/step.prof" "$tmp/pipeline.prof" \
	>cmd/denoiser/default.pgo
echo "wrote cmd/denoiser/default.pgo ($(wc -c <cmd/denoiser/default.pgo) bytes)"
